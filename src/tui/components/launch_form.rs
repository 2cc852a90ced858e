//! The launch form of the Runs tab (`n`): the key hyper-parameters of a new run.
//! `Tab`/`↓` and `Shift-Tab`/`↑` move between fields, typing edits the field,
//! `←`/`→` cycle the fields with fixed choices (kind, mode), `Ctrl-U` clears,
//! `Enter` launches, `Esc` cancels.

use crate::runs::launch::{LaunchSpec, MODES};
use crate::tui::theme::Theme;
use crate::tui::widgets::text::line;
use ratatui::Frame;
use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Clear, Paragraph, Wrap};
use std::path::PathBuf;

/// The fields, in order.
pub const FIELDS: [&str; 8] = [
    "kind",
    "preset",
    "dataset",
    "steps",
    "lr",
    "mode",
    "init",
    "overrides",
];

const HINTS: [&str; 8] = [
    "sft | rl  (←/→)",
    "tiny | qwen3-lora (sft) · tiny | paper (rl)",
    "dataset folder",
    "optimizer steps (empty: the preset's)",
    "learning rate (empty: the preset's)",
    "rl only: salvage-ds | anchor-free | dapo | grpo  (←/→)",
    "rl: SFT run folder · sft: base model folder (qwen3-lora)",
    "more config: key=value key=value …",
];

/// What a key did to the form.
#[derive(Debug, Clone, PartialEq)]
pub enum FormOutcome {
    Editing,
    Cancel,
    Launch(LaunchSpec),
}

/// The form's state.
#[derive(Debug, Clone, PartialEq)]
pub struct LaunchForm {
    pub values: [String; 8],
    pub focus: usize,
    /// Why the last Enter did not launch.
    pub error: Option<String>,
}

impl LaunchForm {
    /// A form with defaults: a short tiny SFT run on `dataset`.
    pub fn new(dataset: &std::path::Path) -> Self {
        LaunchForm {
            values: [
                "sft".into(),
                "tiny".into(),
                dataset.display().to_string(),
                "200".into(),
                String::new(),
                "salvage-ds".into(),
                String::new(),
                String::new(),
            ],
            focus: 0,
            error: None,
        }
    }

    fn cycle(&mut self, forward: bool) {
        let choices: &[&str] = match self.focus {
            0 => &["sft", "rl"],
            5 => &MODES,
            _ => return,
        };
        let cur = choices
            .iter()
            .position(|c| *c == self.values[self.focus])
            .unwrap_or(0);
        let n = choices.len();
        let next = if forward {
            (cur + 1) % n
        } else {
            (cur + n - 1) % n
        };
        self.values[self.focus] = choices[next].to_string();
        if self.focus == 0 {
            self.values[1] = "tiny".into();
        }
    }

    /// The run the form describes, or what is wrong with it (naming the field).
    pub fn spec(&self) -> Result<LaunchSpec, String> {
        let v = |i: usize| self.values[i].trim();
        let steps = match v(3) {
            "" => None,
            s => Some(
                s.parse::<u64>()
                    .map_err(|_| format!("steps: `{s}` is not a whole number"))?,
            ),
        };
        let lr = match v(4) {
            "" => None,
            s => Some(
                s.parse::<f64>()
                    .map_err(|_| format!("lr: `{s}` is not a number"))?,
            ),
        };
        let spec = LaunchSpec {
            kind: v(0).to_string(),
            preset: v(1).to_string(),
            dataset: PathBuf::from(v(2)),
            steps,
            lr,
            mode: (v(0) == "rl").then(|| v(5).to_string()),
            init: (!v(6).is_empty()).then(|| PathBuf::from(v(6))),
            sets: v(7).split_whitespace().map(str::to_string).collect(),
        };
        if let Some(bad) = spec.sets.iter().find(|s| !s.contains('=')) {
            return Err(format!("overrides: `{bad}` is not key=value"));
        }
        if spec.kind == "rl" && spec.init.is_none() {
            return Err("init: an RL run starts from an SFT run folder".into());
        }
        spec.validate().map_err(|e| e.to_string())?;
        Ok(spec)
    }

    /// Applies a key.
    pub fn handle_key(&mut self, key: KeyEvent) -> FormOutcome {
        let n = FIELDS.len();
        match key.code {
            KeyCode::Esc => return FormOutcome::Cancel,
            KeyCode::Enter => match self.spec() {
                Ok(s) => return FormOutcome::Launch(s),
                Err(e) => self.error = Some(e),
            },
            KeyCode::Tab | KeyCode::Down => self.focus = (self.focus + 1) % n,
            KeyCode::BackTab | KeyCode::Up => self.focus = (self.focus + n - 1) % n,
            KeyCode::Left => self.cycle(false),
            KeyCode::Right => self.cycle(true),
            KeyCode::Backspace => {
                self.values[self.focus].pop();
            }
            KeyCode::Char('u') if key.modifiers.contains(KeyModifiers::CONTROL) => {
                self.values[self.focus].clear();
            }
            KeyCode::Char(c)
                if !key.modifiers.contains(KeyModifiers::CONTROL)
                    && self.focus != 0
                    && self.focus != 5 =>
            {
                self.values[self.focus].push(c);
            }
            _ => {}
        }
        FormOutcome::Editing
    }

    /// Draws the form as a popup centred in `area`.
    pub fn draw(&self, f: &mut Frame, area: Rect, th: &Theme) {
        let w = 90.min(area.width);
        let h = (FIELDS.len() as u16 * 2 + 5).min(area.height);
        let r = Rect::new(
            area.x + (area.width - w) / 2,
            area.y + (area.height - h) / 2,
            w,
            h,
        );
        f.render_widget(Clear, r);
        let mut lines = Vec::new();
        for (i, name) in FIELDS.iter().enumerate() {
            let focused = i == self.focus;
            let disabled = i == 5 && self.values[0] != "rl";
            let value_style = if disabled {
                th.dim()
            } else if focused {
                th.selected()
            } else {
                th.text()
            };
            let mut spans = vec![
                Span::styled(
                    format!("{:>10} ", name),
                    if focused { th.label() } else { th.dim() },
                ),
                Span::styled(format!(" {} ", line(&self.values[i])), value_style),
            ];
            if focused {
                spans.push(Span::styled("▏", th.label()));
            }
            lines.push(Line::from(spans));
            lines.push(Line::from(Span::styled(
                format!("{:>11} {}", "", HINTS[i]),
                th.dim(),
            )));
        }
        lines.push(match &self.error {
            Some(e) => Line::from(Span::styled(format!("✗ {}", line(e)), th.bad())),
            None => Line::from(Span::styled(
                "Enter launches · Esc cancels · Tab next field",
                th.dim(),
            )),
        });
        let p = Paragraph::new(lines).wrap(Wrap { trim: false }).block(
            Block::default()
                .borders(Borders::ALL)
                .border_style(th.border(true))
                .title(Span::styled(" Launch a run ", th.label()))
                .style(th.text()),
        );
        f.render_widget(p, r);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(c: KeyCode) -> KeyEvent {
        KeyEvent::new(c, KeyModifiers::NONE)
    }

    #[test]
    fn fields_validate_and_name_the_field() {
        let mut f = LaunchForm::new(std::path::Path::new("fixtures"));
        let s = f.spec().unwrap();
        assert_eq!((s.kind.as_str(), s.steps, s.mode), ("sft", Some(200), None));
        f.focus = 3;
        f.handle_key(key(KeyCode::Char('x')));
        assert_eq!(f.handle_key(key(KeyCode::Enter)), FormOutcome::Editing);
        assert!(f.error.as_deref().unwrap().starts_with("steps"));
        f.handle_key(key(KeyCode::Backspace));
        f.focus = 0;
        f.handle_key(key(KeyCode::Right));
        assert_eq!(f.values[0], "rl");
        assert!(f.spec().unwrap_err().starts_with("init"));
        f.values[6] = "runs/sft-1".into();
        f.values[7] = "seed=3 epochs=2".into();
        let s = f.spec().unwrap();
        assert_eq!(s.mode.as_deref(), Some("salvage-ds"));
        assert_eq!(s.sets, vec!["seed=3", "epochs=2"]);
        assert_eq!(f.handle_key(key(KeyCode::Esc)), FormOutcome::Cancel);
    }
}

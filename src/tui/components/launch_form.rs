//! The launch form of the Runs tab (`n`): the key hyper-parameters of a new run.
//! `Tab`/`↓` and `Shift-Tab`/`↑` move between fields, typing edits the field,
//! `←`/`→` cycle the fields with fixed choices (kind, mode), `Ctrl-U` clears,
//! `Enter` launches, `Esc` cancels. Kind `verl` swaps the fields for a verl run's:
//! the exported folder, nodes, GPUs per node, Ray address, mode, model, overrides.

use crate::runs::launch::LaunchSpec;
use crate::runs::verl::VerlSpec;
use crate::train::rl::groups::Mode;
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

/// The fields of kind `verl`, in the same slots.
pub const VERL_FIELDS: [&str; 8] = [
    "kind",
    "export",
    "nodes",
    "gpus/node",
    "ray addr",
    "mode",
    "model",
    "overrides",
];

/// The field holding the RL mode (both kinds); its hint lists [`Mode::ALL`].
const MODE_FIELD: usize = 5;

const VERL_HINTS: [&str; 8] = [
    "sft | rl | verl  (←/→)",
    "an `rmsweb export verl` folder (holds run.sh)",
    "nodes (more than one needs the Ray address)",
    "GPUs per node",
    "Ray head HOST:PORT (empty: a local cluster on this node)",
    "", // the modes (MODE_FIELD_HINT)
    "SFT-merged checkpoint, a Hugging Face folder (empty: $MODEL)",
    "more Hydra overrides: key=value key=value …",
];

const HINTS: [&str; 8] = [
    "sft | rl | verl  (←/→)",
    "tiny | tiny-vl | lora | qwen3-lora | qwen3-vl-lora (sft) · tiny | paper (rl)",
    "dataset folder",
    "optimizer steps (sft: at most its epochs; empty: the preset's)",
    "learning rate (empty: the preset's)",
    "", // "rl only: " and the modes (MODE_FIELD_HINT)
    "rl: SFT run folder · sft: base model (lora, qwen3-lora, qwen3-vl-lora)",
    "more config: key=value key=value …",
];

/// What a key did to the form.
#[derive(Debug, Clone, PartialEq)]
pub enum FormOutcome {
    Editing,
    Cancel,
    Launch(LaunchSpec),
    LaunchVerl(VerlSpec),
}

/// The form's state.
#[derive(Debug, Clone, PartialEq)]
pub struct LaunchForm {
    pub values: [String; 8],
    pub focus: usize,
    /// Why the last Enter did not launch.
    pub error: Option<String>,
    /// The dataset the form started on (defaults when the kind changes).
    dataset: std::path::PathBuf,
    /// The focused field was not typed in since it got the focus: the first
    /// character typed replaces its value (as a selected field does).
    fresh: bool,
}

impl LaunchForm {
    /// A form with defaults: a short tiny SFT run on `dataset`.
    pub fn new(dataset: &std::path::Path) -> Self {
        LaunchForm {
            values: Self::defaults(dataset),
            focus: 0,
            error: None,
            dataset: dataset.to_path_buf(),
            fresh: true,
        }
    }

    fn defaults(dataset: &std::path::Path) -> [String; 8] {
        [
            "sft".into(),
            "tiny".into(),
            dataset.display().to_string(),
            String::new(),
            String::new(),
            "salvage-ds".into(),
            String::new(),
            String::new(),
        ]
    }

    fn verl_defaults(dataset: &std::path::Path) -> [String; 8] {
        [
            "verl".into(),
            dataset.join("verl").display().to_string(),
            "1".into(),
            "8".into(),
            String::new(),
            "salvage-ds".into(),
            String::new(),
            String::new(),
        ]
    }

    /// Whether the form describes a verl run.
    pub fn is_verl(&self) -> bool {
        self.values[0] == "verl"
    }

    /// The field names shown for the current kind.
    pub fn fields(&self) -> [&'static str; 8] {
        if self.is_verl() { VERL_FIELDS } else { FIELDS }
    }

    fn cycle(&mut self, forward: bool) {
        let modes = Mode::ALL.map(Mode::name);
        let choices: &[&str] = match self.focus {
            0 => &["sft", "rl", "verl"],
            MODE_FIELD => &modes,
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
        let was_verl = self.is_verl();
        self.values[self.focus] = choices[next].to_string();
        if self.focus == 0 {
            let kind = self.values[0].clone();
            if kind == "verl" {
                self.values = Self::verl_defaults(&self.dataset);
            } else if was_verl {
                self.values = Self::defaults(&self.dataset);
                self.values[0] = kind;
            } else {
                self.values[1] = "tiny".into();
            }
        }
    }

    /// The verl run the form describes, or what is wrong with it (naming the field).
    pub fn verl_spec(&self) -> Result<VerlSpec, String> {
        let v = |i: usize| self.values[i].trim();
        let whole = |i: usize, name: &str| {
            v(i).parse::<u32>()
                .map_err(|_| format!("{name}: `{}` is not a whole number", v(i)))
        };
        let spec = VerlSpec {
            export: PathBuf::from(v(1)),
            nodes: whole(2, "nodes")?,
            gpus_per_node: whole(3, "gpus per node")?,
            ray_address: (!v(4).is_empty()).then(|| v(4).to_string()),
            mode: v(5).to_string(),
            model: (!v(6).is_empty()).then(|| PathBuf::from(v(6))),
            overrides: v(7).split_whitespace().map(str::to_string).collect(),
            ..Default::default()
        };
        spec.validate().map_err(|e| e.to_string())?;
        Ok(spec)
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
            KeyCode::Enter if self.is_verl() => match self.verl_spec() {
                Ok(s) => return FormOutcome::LaunchVerl(s),
                Err(e) => self.error = Some(e),
            },
            KeyCode::Enter => match self.spec() {
                Ok(s) => return FormOutcome::Launch(s),
                Err(e) => self.error = Some(e),
            },
            KeyCode::Tab | KeyCode::Down => {
                self.focus = (self.focus + 1) % n;
                self.fresh = true;
            }
            KeyCode::BackTab | KeyCode::Up => {
                self.focus = (self.focus + n - 1) % n;
                self.fresh = true;
            }
            KeyCode::Left => self.cycle(false),
            KeyCode::Right => self.cycle(true),
            KeyCode::Backspace => {
                self.values[self.focus].pop();
                self.fresh = false;
            }
            KeyCode::Char('u') if key.modifiers.contains(KeyModifiers::CONTROL) => {
                self.values[self.focus].clear();
                self.fresh = false;
            }
            KeyCode::Char(c)
                if !key.modifiers.contains(KeyModifiers::CONTROL)
                    && self.focus != 0
                    && self.focus != 5 =>
            {
                if std::mem::take(&mut self.fresh) {
                    self.values[self.focus].clear();
                }
                self.values[self.focus].push(c);
            }
            _ => {}
        }
        FormOutcome::Editing
    }

    /// Draws the form as a popup centred in `area`.
    pub fn draw(&self, f: &mut Frame, area: Rect, th: &Theme) {
        let r = super::centered(area, 90, FIELDS.len() as u16 * 2 + 5);
        f.render_widget(Clear, r);
        let mut lines = Vec::new();
        let hints = if self.is_verl() { VERL_HINTS } else { HINTS };
        for (i, name) in self.fields().iter().enumerate() {
            let focused = i == self.focus;
            let disabled = i == MODE_FIELD && self.values[0] == "sft";
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
            let hint = if i == MODE_FIELD {
                let only = if self.is_verl() { "" } else { "rl only: " };
                format!("{only}{}  (←/→)", Mode::names(" | "))
            } else {
                hints[i].to_string()
            };
            lines.push(Line::from(Span::styled(
                format!("{:>11} {hint}", ""),
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
        // Steps and lr start empty: the preset's, as the hints say.
        assert_eq!((s.kind.as_str(), s.steps, s.mode), ("sft", None, None));
        // The first character typed into a field just reached replaces its value;
        // later ones append.
        for _ in 0..2 {
            f.handle_key(key(KeyCode::Tab));
        }
        for c in "ds2".chars() {
            f.handle_key(key(KeyCode::Char(c)));
        }
        assert_eq!(f.values[2], "ds2");
        f.handle_key(key(KeyCode::Tab));
        for c in "20".chars() {
            f.handle_key(key(KeyCode::Char(c)));
        }
        assert_eq!(f.spec().unwrap().steps, Some(20));
        f.handle_key(key(KeyCode::Tab));
        f.handle_key(key(KeyCode::BackTab));
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

    #[test]
    fn kind_verl_swaps_the_fields_and_checks_them() {
        let d = tempfile::tempdir().unwrap();
        let mut f = LaunchForm::new(d.path());
        f.handle_key(key(KeyCode::Left));
        assert!(f.is_verl());
        assert_eq!(f.fields()[1], "export");
        // No export there yet: Enter names the field.
        assert_eq!(f.handle_key(key(KeyCode::Enter)), FormOutcome::Editing);
        assert!(
            f.error.as_deref().unwrap().starts_with("export"),
            "{:?}",
            f.error
        );
        std::fs::create_dir_all(d.path().join("verl")).unwrap();
        std::fs::write(d.path().join("verl/run.sh"), "exit 0\n").unwrap();
        f.values[2] = "2".into();
        f.handle_key(key(KeyCode::Enter));
        assert!(f.error.as_deref().unwrap().starts_with("ray address"));
        f.values[4] = "10.0.0.1:6379".into();
        f.values[7] = "trainer.total_training_steps=3".into();
        let FormOutcome::LaunchVerl(s) = f.handle_key(key(KeyCode::Enter)) else {
            panic!("{:?}", f.error)
        };
        assert_eq!(
            (s.nodes, s.gpus_per_node, s.mode.as_str()),
            (2, 8, "salvage-ds")
        );
        assert_eq!(s.overrides, vec!["trainer.total_training_steps=3"]);
        f.values[3] = "x".into();
        assert!(f.verl_spec().unwrap_err().starts_with("gpus per node"));
        // Back to sft: the run form's own fields return.
        f.focus = 0;
        f.handle_key(key(KeyCode::Right));
        assert_eq!(f.values[0], "sft");
        assert_eq!(f.values[1], "tiny");
        assert_eq!(f.fields()[1], "preset");
    }
}

//! The Reward tab: pick a state (a mined pair's success side, a step of the
//! trajectory selected in tab 1, or a group of an RL run's `rollouts.jsonl` opened
//! with `o` in the Runs tab), type a candidate response, and see the rubric's score,
//! level, rule and reason as you type. A rollout sample fills the candidate with its
//! own text, so its recorded decision can be checked against the rubric as it is now
//! and then edited to see which change flips it.

use super::step_view::{action_json, element_window};
use super::{Component, Cursor, ListPointer, Pointer, pane};
use crate::action::Action as BrowserAction;
use crate::reward::{Level, score};
use crate::runs::rollouts::{RolloutGroup, Rollouts};
use crate::trajectory::State;
use crate::tui::action::Action;
use crate::tui::key_help::{KeyHelp, k};
use crate::tui::shared::Shared;
use crate::tui::widgets::text::{line, trunc};
use crate::util::sanitize::clean_text;
use ratatui::Frame;
use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers, MouseEvent};
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Paragraph, Wrap};
use ratatui_textarea::TextArea;

/// The keys of this view, for the help overlay.
pub const KEYS: &[KeyHelp] = &[
    k(
        "Reward",
        "t",
        "state source: pairs / tab-1 trajectory / opened rollouts",
    ),
    k(
        "Reward",
        "h l  ← →",
        "rollouts: previous / next sample (fills the candidate)",
    ),
    k(
        "Reward",
        "e  i  Enter",
        "type a candidate response (scored live)",
    ),
];

/// Where the states come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Source {
    #[default]
    Pairs,
    Trajectory,
    /// Groups of an RL run's `rollouts.jsonl`.
    Rollouts,
}

/// One pickable state with its target action.
struct Item {
    label: String,
    state: Result<State, String>,
    target: BrowserAction,
}

/// State of the Reward tab.
pub struct RewardView {
    pub source: Source,
    pub list: Cursor,
    pub editing: bool,
    pub candidate: TextArea<'static>,
    /// The opened run's rollouts (Runs tab, `o`).
    pub rollouts: Option<Rollouts>,
    /// The selected sample of the selected rollout group.
    pub sample: usize,
    /// The (group, sample) whose text was last put into the candidate.
    prefilled: Option<(usize, usize)>,
}

impl Default for RewardView {
    fn default() -> Self {
        let mut candidate = TextArea::default();
        candidate.set_placeholder_text("press e and type a model response or an action");
        RewardView {
            source: Source::Pairs,
            list: Cursor::default(),
            editing: false,
            candidate,
            rollouts: None,
            sample: 0,
            prefilled: None,
        }
    }
}

/// The state and target of a mined pair's success side.
fn pair_item(sh: &mut Shared, i: usize) -> Option<Item> {
    let p = sh.pairs.get(i)?.clone();
    let target = sh
        .folded
        .state(&p.id)
        .target
        .unwrap_or(p.target_action.clone());
    let state = sh
        .trajectories
        .by_id(&sh.dataset, &p.success.trajectory)
        .and_then(|t| {
            t.steps
                .iter()
                .find(|s| s.index == p.success.step)
                .map(|s| s.state.clone())
                .ok_or_else(|| {
                    format!(
                        "no step {} in {}",
                        p.success.step,
                        line(&p.success.trajectory)
                    )
                })
        });
    Some(Item {
        label: format!("pair {} · success side", line(&p.id)),
        state,
        target,
    })
}

impl RewardView {
    fn len(&self, sh: &mut Shared) -> usize {
        match self.source {
            Source::Pairs => sh.pairs.len(),
            Source::Trajectory => sh
                .current_trajectory
                .and_then(|r| sh.trajectories.get(&sh.dataset, r).ok())
                .map_or(0, |t| t.steps.len()),
            Source::Rollouts => self.rollouts.as_ref().map_or(0, Rollouts::len),
        }
    }

    /// Opens `RUN/rollouts.jsonl` as the state source.
    pub fn open_rollouts(&mut self, run_dir: &std::path::Path) -> Result<String, String> {
        let r = Rollouts::open(run_dir).map_err(|e| format!("{e:#}"))?;
        let msg = format!(
            "{} rollout groups of {}",
            r.len(),
            line(&run_dir.display().to_string())
        );
        self.rollouts = Some(r);
        self.source = Source::Rollouts;
        self.list = Cursor::default();
        self.sample = 0;
        self.prefilled = None;
        Ok(msg)
    }

    fn group(&self, i: usize) -> Option<Result<RolloutGroup, String>> {
        let r = self.rollouts.as_ref()?;
        (i < r.len()).then(|| r.group(i))
    }

    fn label(&self, sh: &mut Shared, i: usize) -> String {
        match self.source {
            Source::Pairs => sh
                .pairs
                .get(i)
                .map(|p| format!("{} {}", line(&p.id), line(&p.target_action.short())))
                .unwrap_or_default(),
            Source::Trajectory => sh
                .current_trajectory
                .and_then(|r| sh.trajectories.get(&sh.dataset, r).ok())
                .and_then(|t| {
                    t.steps.get(i).map(|s| {
                        let a = s
                            .output
                            .actions
                            .first()
                            .map(|a| a.short())
                            .unwrap_or_else(|| "(no action)".into());
                        format!("step {:>2} {}", s.index, line(&a))
                    })
                })
                .unwrap_or_default(),
            Source::Rollouts => match self.group(i) {
                Some(Ok(g)) => {
                    let (mean, std) = g.reward_stats();
                    format!(
                        "s{} {} {}{} μ{mean:.2} σ{std:.2}",
                        g.step,
                        line(&g.prompt_id),
                        line(&g.gate),
                        g.routed
                            .as_deref()
                            .map(|r| format!("→{}", line(r)))
                            .unwrap_or_default()
                    )
                }
                Some(Err(e)) => format!("! {}", line(&e)),
                None => String::new(),
            },
        }
    }

    /// The state and target of row `i`; for rollouts, of the already parsed `group`.
    fn item(&self, sh: &mut Shared, i: usize, group: Option<&RolloutGroup>) -> Option<Item> {
        match self.source {
            Source::Pairs => pair_item(sh, i),
            Source::Trajectory => {
                let t = sh
                    .trajectories
                    .get(&sh.dataset, sh.current_trajectory?)
                    .ok()?;
                let s = t.steps.get(i)?;
                Some(Item {
                    label: format!("{} · step {}", line(&t.id), s.index),
                    state: Ok(s.state.clone()),
                    target: s.output.actions.first()?.clone(),
                })
            }
            Source::Rollouts => {
                let g = group?;
                let p = sh.pairs.iter().position(|p| p.id == g.prompt_id)?;
                pair_item(sh, p)
            }
        }
    }

    /// The selected sample of `g`, the selected group (clamped).
    fn sample_of(&self, g: &RolloutGroup) -> Option<usize> {
        (!g.samples.is_empty()).then(|| self.sample.min(g.samples.len() - 1))
    }

    /// Puts the selected sample's text into the candidate once per selection.
    fn prefill(&mut self, g: &RolloutGroup) {
        let Some(k) = self.sample_of(g) else {
            return;
        };
        let key = (self.list.selected, k);
        if self.prefilled == Some(key) {
            return;
        }
        self.prefilled = Some(key);
        self.candidate.select_all();
        self.candidate.cut();
        self.candidate
            .insert_str(crate::util::sanitize::clean_text(&g.samples[k].text));
    }

    /// The group pane: the group's gate and routing, then every sample with its
    /// recorded reward and rule (the selected one marked).
    fn group_lines(
        &self,
        sel: Option<&Result<RolloutGroup, String>>,
        th: &crate::tui::theme::Theme,
        width: usize,
    ) -> Vec<Line<'static>> {
        let g = match sel {
            None => return vec![Line::from(Span::styled("(no group)", th.dim()))],
            Some(Ok(g)) => g,
            Some(Err(e)) => return vec![Line::from(Span::styled(trunc(e, width), th.bad()))],
        };
        let (mean, std) = g.reward_stats();
        let best = g.samples.iter().map(|s| s.reward).fold(f64::NAN, f64::max);
        let mut out = vec![Line::from(vec![
            Span::styled("gate ", th.label()),
            Span::styled(line(&g.gate), th.text()),
            Span::styled("  routed ", th.label()),
            Span::styled(line(g.routed.as_deref().unwrap_or("-")), th.text()),
            Span::styled(
                format!(
                    "  mean {mean:.2} σ {std:.2} best {best:.2}  step {}",
                    g.step
                ),
                th.dim(),
            ),
        ])];
        let k = self.sample.min(g.samples.len().saturating_sub(1));
        for (i, smp) in g.samples.iter().enumerate() {
            let style = if i == k {
                th.selected()
            } else if smp.reward >= 0.7 {
                th.good()
            } else if smp.reward > 0.0 {
                th.warn()
            } else {
                th.bad()
            };
            let text = format!(
                "{} #{i} {:.2} {:<24} {}",
                if i == k { "▶" } else { " " },
                smp.reward,
                trunc(&smp.rule, 24),
                line(&smp.text)
            );
            out.push(Line::from(Span::styled(trunc(&text, width), style)));
        }
        out
    }
}

impl Component for RewardView {
    fn keys(&self) -> &'static [&'static [KeyHelp]] {
        &[KEYS]
    }

    /// A click selects a state; the wheel moves through them. Nothing while the
    /// candidate box has the keyboard.
    fn handle_mouse(&mut self, ev: MouseEvent, sh: &mut Shared) -> Option<Action> {
        if self.editing {
            return None;
        }
        let n = self.len(sh);
        if self.list.pointer(Pointer::of(&ev)?, n)? == ListPointer::Moved {
            self.sample = 0;
        }
        None
    }

    fn handle_key(&mut self, key: KeyEvent, sh: &mut Shared) -> Option<Action> {
        if self.editing {
            match key.code {
                KeyCode::Esc => self.editing = false,
                KeyCode::Char('u') if key.modifiers.contains(KeyModifiers::CONTROL) => {
                    self.candidate.select_all();
                    self.candidate.cut();
                }
                _ => {
                    self.candidate.input(key);
                }
            }
            return None;
        }
        let n = self.len(sh);
        let before = self.list.selected;
        if self.list.navigate(&key, n) {
            if self.list.selected != before {
                self.sample = 0;
            }
            return None;
        }
        match key.code {
            KeyCode::Char('h') | KeyCode::Left if self.source == Source::Rollouts => {
                self.sample = self.sample.saturating_sub(1);
            }
            KeyCode::Char('l') | KeyCode::Right if self.source == Source::Rollouts => {
                let n = self
                    .group(self.list.selected)
                    .and_then(Result::ok)
                    .map_or(0, |g| g.samples.len());
                self.sample = (self.sample + 1).min(n.saturating_sub(1));
            }
            KeyCode::Char('t') => {
                self.source = match self.source {
                    Source::Pairs => Source::Trajectory,
                    Source::Trajectory if self.rollouts.is_some() => Source::Rollouts,
                    Source::Trajectory | Source::Rollouts => Source::Pairs,
                };
                self.list = Cursor::default();
                self.sample = 0;
                self.prefilled = None;
                if self.source == Source::Trajectory && sh.current_trajectory.is_none() {
                    return Some(Action::Message("select a trajectory in tab 1 first".into()));
                }
            }
            KeyCode::Char('e') | KeyCode::Char('i') | KeyCode::Enter => self.editing = true,
            _ => {}
        }
        None
    }

    fn captures_text(&self) -> bool {
        self.editing
    }

    fn draw(&mut self, f: &mut Frame, area: Rect, sh: &mut Shared) {
        let th = sh.theme.clone();
        let [left, right] =
            Layout::horizontal([Constraint::Length(44), Constraint::Min(40)]).areas(area);
        let title = match self.source {
            Source::Pairs => "States: mined pairs (t: trajectory)".to_string(),
            Source::Trajectory if self.rollouts.is_some() => {
                "States: trajectory steps (t: rollouts)".to_string()
            }
            Source::Trajectory => "States: trajectory steps (t: pairs)".to_string(),
            Source::Rollouts => format!(
                "Rollouts: {} (t: pairs)",
                self.rollouts
                    .as_ref()
                    .and_then(|r| r.run_dir().file_name())
                    .map(|n| line(&n.to_string_lossy()))
                    .unwrap_or_default()
            ),
        };
        let block = pane(title, !self.editing, &th);
        let inner = block.inner(left);
        f.render_widget(block, left);
        let n = self.len(sh);
        let window = self.list.window_in(n, inner);
        let mut rows = Vec::new();
        for i in window {
            let text = trunc(&self.label(sh, i), inner.width as usize);
            rows.push(Line::from(Span::styled(
                text,
                if i == self.list.selected {
                    th.selected()
                } else {
                    th.text()
                },
            )));
        }
        if rows.is_empty() {
            rows.push(Line::from(Span::styled("(no states)", th.dim())));
        }
        f.render_widget(Paragraph::new(rows), inner);

        let mut right = right;
        let mut recorded = None;
        // The selected rollout group, parsed once for this frame.
        let sel = match self.source {
            Source::Rollouts => self.group(self.list.selected),
            _ => None,
        };
        let sel_ok = sel.as_ref().and_then(|r| r.as_ref().ok());
        if self.source == Source::Rollouts {
            if let Some(g) = sel_ok {
                self.prefill(g);
            }
            let samples = sel_ok.map_or(0, |g| g.samples.len());
            let h = (samples as u16 + 3).min(right.height / 2).max(3);
            let [top, rest] =
                Layout::vertical([Constraint::Length(h), Constraint::Min(3)]).areas(right);
            let b = pane("Group · h/l sample · recorded reward and rule", false, &th);
            let gi = b.inner(top);
            f.render_widget(b, top);
            let lines = self.group_lines(sel.as_ref(), &th, gi.width as usize);
            // Keep the selected sample in view.
            let skip = (self.sample + 2).saturating_sub(gi.height as usize);
            f.render_widget(Paragraph::new(lines).scroll((skip as u16, 0)), gi);
            right = rest;
            recorded = sel_ok.and_then(|g| Some(g.samples[self.sample_of(g)?].clone()));
        }
        let Some(item) = self.item(sh, self.list.selected, sel_ok) else {
            let msg = match sel_ok {
                Some(g) => format!(
                    "prompt `{}` is not a mined pair of this dataset (a full-corpus prompt, or a run on another dataset): only the recorded decisions are shown",
                    line(&g.prompt_id)
                ),
                None => String::new(),
            };
            f.render_widget(
                Paragraph::new(Span::styled(msg, th.dim()))
                    .wrap(Wrap { trim: false })
                    .block(pane("State", false, &th)),
                right,
            );
            return;
        };
        let [info, cand, verdict, elems] = Layout::vertical([
            Constraint::Length(6),
            Constraint::Length(5),
            Constraint::Length(if recorded.is_some() { 8 } else { 6 }),
            Constraint::Min(3),
        ])
        .areas(right);
        let (url, title_text, elements) = match &item.state {
            Ok(s) => (s.url.clone(), s.title.clone(), s.elements.clone()),
            Err(e) => (String::new(), format!("state unavailable: {e}"), Vec::new()),
        };
        let mut info_lines = vec![
            Line::from(vec![
                Span::styled("URL: ", th.label()),
                Span::styled(line(&url), th.text()),
            ]),
            Line::from(vec![
                Span::styled("Title: ", th.label()),
                Span::styled(line(&title_text), th.text()),
            ]),
            Line::from(vec![
                Span::styled("Target: ", th.label()),
                Span::styled(line(&item.target.short()), th.good()),
            ]),
        ];
        info_lines.extend(action_json(&item.target, &th));
        f.render_widget(
            Paragraph::new(info_lines).block(pane(item.label.clone(), false, &th)),
            info,
        );

        self.candidate.set_block(pane(
            "Candidate · e types · Esc stops · Ctrl-U clears",
            self.editing,
            &th,
        ));
        self.candidate.set_style(th.text());
        f.render_widget(&self.candidate, cand);

        let text = self.candidate.lines().join("\n");
        let verdict_lines = if text.trim().is_empty() {
            vec![Line::from(Span::styled(
                "type a candidate to score it",
                th.dim(),
            ))]
        } else {
            let d = score(&text, &item.target, &elements, &sh.reward_cfg);
            let style = match d.level {
                Level::Exact | Level::Core => th.good(),
                Level::Type => th.warn(),
                Level::Wrong => th.bad(),
            };
            let mut v = vec![
                Line::from(vec![
                    Span::styled("Score: ", th.label()),
                    Span::styled(format!("{:.2}", d.score), style),
                ]),
                Line::from(vec![
                    Span::styled("Level: ", th.label()),
                    Span::styled(format!("{:?}", d.level).to_lowercase(), style),
                ]),
                Line::from(vec![
                    Span::styled("Rule: ", th.label()),
                    Span::styled(line(&d.rule), th.text()),
                ]),
                Line::from(vec![
                    Span::styled("Reason: ", th.label()),
                    Span::styled(line(&d.reason), th.text()),
                ]),
            ];
            if let Some(rec) = &recorded {
                let same_text = clean_text(&rec.text) == text;
                let agrees = (rec.reward - d.score).abs() < 1e-9 && rec.rule == d.rule;
                let mut spans = vec![
                    Span::styled("Recorded: ", th.label()),
                    Span::styled(format!("{:.2} {}", rec.reward, line(&rec.rule)), th.text()),
                ];
                if !same_text {
                    spans.push(Span::styled("  (candidate edited)", th.dim()));
                } else if !agrees {
                    spans.push(Span::styled(
                        "  ≠ live decision (rubric or config changed since the run)",
                        th.warn(),
                    ));
                }
                v.insert(0, Line::from(spans));
            }
            v
        };
        f.render_widget(
            Paragraph::new(verdict_lines)
                .wrap(Wrap { trim: false })
                .block(pane("Rubric decision", false, &th)),
            verdict,
        );
        let state = item.state.unwrap_or_default();
        let b = pane("Elements", false, &th);
        let ei = b.inner(elems);
        f.render_widget(b, elems);
        f.render_widget(
            Paragraph::new(element_window(
                &state,
                item.target.target_index(),
                &th,
                ei.width as usize,
                ei.height as usize,
            )),
            ei,
        );
    }
}

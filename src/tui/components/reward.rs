//! The Reward tab: pick a state (a mined pair's success side, a step of the
//! trajectory selected in tab 1, or a group of an RL run's `rollouts.jsonl` opened
//! with `o` in the Runs tab), type a candidate response, and see the rubric's score,
//! level, rule and reason as you type. A rollout sample fills the candidate with its
//! own text, so its recorded decision can be checked against the rubric as it is now
//! and then edited to see which change flips it.

use super::{Component, Cursor, ListPointer, Pointer};
use crate::action::Action as BrowserAction;
use crate::runs::rollouts::{RolloutGroup, Rollouts};
use crate::trajectory::State;
use crate::tui::action::Action;
use crate::tui::key_help::{KeyHelp, k};
use crate::tui::shared::Shared;
use crate::tui::widgets::text::line;
use ratatui::Frame;
use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers, MouseEvent};
use ratatui::layout::Rect;
use ratatui_textarea::TextArea;

mod draw;

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
        self.draw_view(f, area, sh);
    }
}

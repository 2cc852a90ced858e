//! The Reward tab: pick a state (a mined pair's success side, or a step of the
//! trajectory selected in tab 1), type a candidate response, and see the rubric's
//! score, level, rule and reason as you type.

use super::step_view::{action_json, element_window};
use super::{Component, Cursor, pane};
use crate::action::Action as BrowserAction;
use crate::reward::{Level, score};
use crate::trajectory::State;
use crate::tui::action::Action;
use crate::tui::shared::Shared;
use crate::tui::widgets::text::{line, trunc};
use ratatui::Frame;
use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Paragraph, Wrap};
use ratatui_textarea::TextArea;

/// Where the states come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Source {
    #[default]
    Pairs,
    Trajectory,
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
        }
    }
}

impl RewardView {
    fn len(&self, sh: &mut Shared) -> usize {
        match self.source {
            Source::Pairs => sh.pairs.len(),
            Source::Trajectory => sh
                .current_trajectory
                .and_then(|r| sh.trajectories.get(&sh.dataset, r).ok())
                .map_or(0, |t| t.steps.len()),
        }
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
        }
    }

    fn item(&self, sh: &mut Shared, i: usize) -> Option<Item> {
        match self.source {
            Source::Pairs => {
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
        }
    }
}

impl Component for RewardView {
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
        if self.list.navigate(&key, n) {
            return None;
        }
        match key.code {
            KeyCode::Char('t') => {
                self.source = match self.source {
                    Source::Pairs => Source::Trajectory,
                    Source::Trajectory => Source::Pairs,
                };
                self.list = Cursor::default();
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
            Source::Pairs => "States: mined pairs (t: trajectory)",
            Source::Trajectory => "States: trajectory steps (t: pairs)",
        };
        let block = pane(title, !self.editing, &th);
        let inner = block.inner(left);
        f.render_widget(block, left);
        let n = self.len(sh);
        let window = self.list.window(n, inner.height as usize);
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

        let Some(item) = self.item(sh, self.list.selected) else {
            f.render_widget(pane("State", false, &th), right);
            return;
        };
        let [info, cand, verdict, elems] = Layout::vertical([
            Constraint::Length(6),
            Constraint::Length(5),
            Constraint::Length(6),
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
            vec![
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
            ]
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

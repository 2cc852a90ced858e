//! The Trajectories tab: list · step timeline · step detail with screenshot.

use super::step_view::step_lines;
use super::{Component, Cursor, ListPointer, Pointer, filter_indices, pane};
use crate::trajectory::mark::step_mark;
use crate::trajectory::{Trajectory, TrajectorySummary};
use crate::tui::action::Action;
use crate::tui::key_help::{KeyHelp, k};
use crate::tui::shared::Shared;
use crate::tui::theme::Theme;
use crate::tui::widgets::text::{line, trunc, trunc_start};
use ratatui::Frame;
use ratatui::crossterm::event::{KeyCode, KeyEvent, MouseEvent};
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Paragraph, Wrap};

/// The keys of this view, for the help overlay.
pub const KEYS: &[KeyHelp] = &[
    k("Trajectories", "J K", "scroll the step detail"),
    k(
        "Trajectories",
        "z",
        "screenshot view, the step's target drawn on it; h l: steps",
    ),
];

/// Which pane has the keyboard.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Focus {
    #[default]
    List,
    Steps,
    Detail,
}

/// State of the Trajectories tab.
#[derive(Default)]
pub struct TrajectoriesView {
    pub list: Cursor,
    pub steps: Cursor,
    pub focus: Focus,
    pub detail_scroll: u16,
    filter: String,
    /// Filtered record numbers and the (data version, filter) they were made for.
    rows: Vec<usize>,
    rows_key: Option<(u64, String)>,
    /// Number of steps of the selected trajectory (from the last draw).
    step_count: usize,
    /// The screenshot view (`z`): the selected step's screenshot over the whole tab
    /// with its target drawn on it, and the trajectory's steps as a strip.
    pub zoom: bool,
    /// Where the step detail was last drawn (for the mouse).
    detail_area: Rect,
}

impl TrajectoriesView {
    fn refresh_rows(&mut self, sh: &mut Shared) {
        let key = (sh.version, self.filter.clone());
        if self.rows_key.as_ref() == Some(&key) {
            return;
        }
        let n = sh.dataset.trajectory_count();
        self.rows = match (&sh.summaries, self.filter.is_empty()) {
            (_, true) => (0..n).collect(),
            (None, false) => Vec::new(),
            (Some(all), false) => {
                let tasks = &sh.tasks;
                filter_indices(n, &self.filter, |i| {
                    match all.get(i).and_then(Option::as_ref) {
                        Some(s) => row_search_text(
                            s,
                            tasks.get(&s.task_id).map(|t| t.instruction.as_str()),
                        ),
                        None => String::new(),
                    }
                })
            }
        };
        self.rows_key = Some(key);
    }

    /// The record number of the selected trajectory.
    pub fn selected_record(&mut self, sh: &mut Shared) -> Option<usize> {
        self.refresh_rows(sh);
        self.rows.get(self.list.selected).copied()
    }
}

fn row_search_text(s: &TrajectorySummary, instruction: Option<&str>) -> String {
    format!(
        "{} {} {} {} {} {}",
        s.id,
        s.task_id,
        s.teacher,
        if s.outcome.success {
            "success ✓"
        } else {
            "failure ✗"
        },
        instruction.unwrap_or_default(),
        s.source
    )
}

impl Component for TrajectoriesView {
    fn keys(&self) -> &'static [&'static [KeyHelp]] {
        &[KEYS]
    }

    /// A click selects a trajectory or a step and focuses its pane (a click on
    /// the selected row opens it, as Enter); the wheel moves the selection of the
    /// pane under the pointer, or scrolls the step detail, or walks the steps in
    /// the screenshot view.
    fn handle_mouse(&mut self, ev: MouseEvent, sh: &mut Shared) -> Option<Action> {
        let p = Pointer::of(&ev)?;
        self.refresh_rows(sh);
        if self.zoom {
            return self.handle_key(p.scroll_key()?, sh);
        }
        let (list_before, steps_before) = (self.list.selected, self.steps.selected);
        let (pane, hit) = if let Some(h) = self.list.pointer(p, self.rows.len()) {
            (Focus::List, Some(h))
        } else if let Some(h) = self.steps.pointer(p, self.step_count) {
            (Focus::Steps, Some(h))
        } else if self.detail_area.contains(p.at()) {
            (Focus::Detail, None)
        } else {
            return None;
        };
        if self.list.selected != list_before {
            self.steps = Cursor::default();
            self.detail_scroll = 0;
        } else if self.steps.selected != steps_before {
            self.detail_scroll = 0;
        }
        match (hit, p) {
            (Some(ListPointer::Again), _) if self.focus == pane => {
                self.handle_key(KeyEvent::from(KeyCode::Enter), sh)
            }
            (None, Pointer::Scroll(..)) => {
                self.focus = Focus::Detail;
                self.handle_key(p.scroll_key()?, sh)
            }
            _ => {
                self.focus = pane;
                None
            }
        }
    }

    fn handle_key(&mut self, key: KeyEvent, sh: &mut Shared) -> Option<Action> {
        self.refresh_rows(sh);
        if self.zoom {
            let last = self.step_count.saturating_sub(1);
            match key.code {
                KeyCode::Char('z') | KeyCode::Esc | KeyCode::Enter => self.zoom = false,
                KeyCode::Char('l') | KeyCode::Right | KeyCode::Char('j') | KeyCode::Down => {
                    self.steps.selected = (self.steps.selected + 1).min(last)
                }
                KeyCode::Char('h') | KeyCode::Left | KeyCode::Char('k') | KeyCode::Up => {
                    self.steps.selected = self.steps.selected.saturating_sub(1)
                }
                KeyCode::Char('g') | KeyCode::Home => self.steps.selected = 0,
                KeyCode::Char('G') | KeyCode::End => self.steps.selected = last,
                _ => {}
            }
            return None;
        }
        if key.code == KeyCode::Char('z') && self.step_count > 0 {
            self.zoom = true;
            return None;
        }
        match self.focus {
            Focus::List => {
                let before = self.list.selected;
                if self.list.navigate(&key, self.rows.len()) {
                    if self.list.selected != before {
                        self.steps = Cursor::default();
                        self.detail_scroll = 0;
                    }
                } else if key.code == KeyCode::Enter {
                    self.focus = Focus::Steps;
                }
            }
            Focus::Steps => {
                let before = self.steps.selected;
                if self.steps.navigate(&key, self.step_count) {
                    if self.steps.selected != before {
                        self.detail_scroll = 0;
                    }
                } else {
                    match key.code {
                        KeyCode::Enter => self.focus = Focus::Detail,
                        KeyCode::Esc => self.focus = Focus::List,
                        _ => {}
                    }
                }
            }
            Focus::Detail => match key.code {
                KeyCode::Char('j') | KeyCode::Down => {
                    self.detail_scroll = self.detail_scroll.saturating_add(1)
                }
                KeyCode::Char('k') | KeyCode::Up => {
                    self.detail_scroll = self.detail_scroll.saturating_sub(1)
                }
                KeyCode::PageDown => self.detail_scroll = self.detail_scroll.saturating_add(10),
                KeyCode::PageUp => self.detail_scroll = self.detail_scroll.saturating_sub(10),
                KeyCode::Char('g') | KeyCode::Home => self.detail_scroll = 0,
                KeyCode::Esc => self.focus = Focus::Steps,
                _ => {}
            },
        }
        match key.code {
            KeyCode::Char('J') => self.detail_scroll = self.detail_scroll.saturating_add(3),
            KeyCode::Char('K') => self.detail_scroll = self.detail_scroll.saturating_sub(3),
            _ => {}
        }
        None
    }

    fn draw(&mut self, f: &mut Frame, area: Rect, sh: &mut Shared) {
        self.refresh_rows(sh);
        if self.zoom && self.draw_zoom(f, area, sh) {
            return;
        }
        self.zoom = false;
        let [left, right] =
            Layout::horizontal([Constraint::Percentage(38), Constraint::Min(30)]).areas(area);
        self.draw_list(f, left, sh);
        let record = self.rows.get(self.list.selected).copied();
        sh.current_trajectory = record;
        let Some(record) = record else {
            let msg = if !self.filter.is_empty() && !sh.loaded() {
                "loading summaries before filtering…"
            } else {
                "no trajectory selected"
            };
            f.render_widget(
                Paragraph::new(msg).style(sh.theme.dim()).block(pane(
                    "Trajectory",
                    false,
                    &sh.theme,
                )),
                right,
            );
            self.step_count = 0;
            return;
        };
        let traj = match sh.trajectories.get(&sh.dataset, record) {
            Ok(t) => t,
            Err(e) => {
                let p = Paragraph::new(line(&e))
                    .style(sh.theme.bad())
                    .wrap(Wrap { trim: false })
                    .block(pane("Trajectory (unreadable)", false, &sh.theme));
                f.render_widget(p, right);
                self.step_count = 0;
                return;
            }
        };
        self.step_count = traj.steps.len();
        let th = sh.theme.clone();
        let verdict = sh.verdicts.get(&traj.id);
        let header_rows = if verdict.is_some() { 6 } else { 5 };
        let [header, body] =
            Layout::vertical([Constraint::Length(header_rows), Constraint::Min(5)]).areas(right);
        let instruction = sh
            .tasks
            .get(&traj.task_id)
            .map(|t| t.instruction.clone())
            .unwrap_or_default();
        let title = format!(
            "{} · attempt {} · round {}",
            trunc(&traj.id, 40),
            traj.attempt,
            traj.round
        );
        f.render_widget(
            Paragraph::new(header_lines(&traj, &instruction, verdict, &th))
                .block(pane(title, false, &th)),
            header,
        );
        let [timeline, detail] =
            Layout::horizontal([Constraint::Length(28), Constraint::Min(20)]).areas(body);
        self.draw_timeline(f, timeline, &traj, &th);
        self.draw_step(f, detail, sh, &traj);
    }

    fn filter(&self) -> &str {
        &self.filter
    }

    fn set_filter(&mut self, filter: &str) {
        self.filter = filter.to_string();
        self.list = Cursor::default();
        self.steps = Cursor::default();
    }

    fn cycle_focus(&mut self, forward: bool) {
        self.focus = match (self.focus, forward) {
            (Focus::List, true) | (Focus::Detail, false) => Focus::Steps,
            (Focus::Steps, true) | (Focus::List, false) => Focus::Detail,
            (Focus::Detail, true) | (Focus::Steps, false) => Focus::List,
        };
    }
}

impl TrajectoriesView {
    /// The step list: each step's index and first action, failed steps marked.
    fn draw_timeline(&mut self, f: &mut Frame, area: Rect, traj: &Trajectory, th: &Theme) {
        let tl_block = pane(
            format!("Steps ({})", traj.steps.len()),
            self.focus == Focus::Steps,
            th,
        );
        let inner = tl_block.inner(area);
        f.render_widget(tl_block, area);
        let window = self.steps.window_in(traj.steps.len(), inner);
        let tl_lines: Vec<Line> = window
            .map(|i| {
                let s = &traj.steps[i];
                let failed = s.result.iter().any(|r| r.error.is_some());
                let act = s
                    .output
                    .actions
                    .first()
                    .map(|a| a.short())
                    .unwrap_or_else(|| "(no action)".into());
                let text = trunc(
                    &format!("{:>2} {}{}", s.index, if failed { "✗ " } else { "" }, act),
                    inner.width as usize,
                );
                if i == self.steps.selected {
                    Line::from(Span::styled(text, th.selected()))
                } else if failed {
                    Line::from(Span::styled(text, th.bad()))
                } else {
                    Line::from(Span::styled(text, th.text()))
                }
            })
            .collect();
        f.render_widget(Paragraph::new(tl_lines), inner);
    }

    /// The selected step: its screenshot above its text (scrolled).
    fn draw_step(&mut self, f: &mut Frame, area: Rect, sh: &mut Shared, traj: &Trajectory) {
        let th = sh.theme.clone();
        let Some(step) = traj.steps.get(self.steps.selected) else {
            f.render_widget(
                Paragraph::new("(no steps)")
                    .style(th.dim())
                    .block(pane("Step", false, &th)),
                area,
            );
            return;
        };
        let d_block = pane(
            format!("Step {}", step.index),
            self.focus == Focus::Detail,
            &th,
        );
        self.detail_area = area;
        let d_inner = d_block.inner(area);
        f.render_widget(d_block, area);
        let shot_h = (d_inner.height / 3).clamp(3, 14).min(d_inner.height);
        let [shot, text] =
            Layout::vertical([Constraint::Length(shot_h), Constraint::Min(0)]).areas(d_inner);
        draw_shot(f, shot, &mut sh.images, sh.dataset.root(), step, th.dim());
        let lines = step_lines(step, &th, text.width as usize);
        f.render_widget(Paragraph::new(lines).scroll((self.detail_scroll, 0)), text);
    }

    /// The screenshot view of the selected step: a caption (step, action, the target's
    /// text), the screenshot at the tab's full size with the target drawn on it, and
    /// a strip of the trajectory's steps. False when there is no step to show.
    fn draw_zoom(&mut self, f: &mut Frame, area: Rect, sh: &mut Shared) -> bool {
        let Some(record) = self.rows.get(self.list.selected).copied() else {
            return false;
        };
        let Ok(traj) = sh.trajectories.get(&sh.dataset, record) else {
            return false;
        };
        self.step_count = traj.steps.len();
        self.steps.selected = self.steps.selected.min(self.step_count.saturating_sub(1));
        let Some(step) = traj.steps.get(self.steps.selected) else {
            return false;
        };
        let th = sh.theme.clone();
        let [caption, shot, strip] = Layout::vertical([
            Constraint::Length(1),
            Constraint::Min(3),
            Constraint::Length(1),
        ])
        .areas(area);
        let action = step.output.actions.first();
        let target = action
            .and_then(|a| a.target_index())
            .and_then(|i| step.state.elements.iter().find(|e| i64::from(e.index) == i));
        let mut spans = vec![
            Span::styled(
                format!(" {} · step {} ", trunc(&traj.id, 40), step.index),
                th.label(),
            ),
            Span::styled(
                action.map_or_else(|| "(no action)".to_string(), |a| line(&a.short())),
                th.text(),
            ),
        ];
        if let Some(e) = target {
            spans.push(Span::styled(
                format!(" → [{}] <{}> {}", e.index, line(&e.tag), trunc(&e.text, 40)),
                th.dim(),
            ));
        }
        if step.result.iter().any(|r| r.error.is_some()) {
            spans.push(Span::styled("  ✗ error", th.bad()));
        }
        spans.push(Span::styled("   z/Esc closes · h l steps", th.dim()));
        f.render_widget(Paragraph::new(Line::from(spans)), caption);
        draw_shot(f, shot, &mut sh.images, sh.dataset.root(), step, th.dim());
        // The strip: every step's action, the shown one highlighted, kept in view.
        let cells: Vec<String> = traj
            .steps
            .iter()
            .map(|s| {
                let a = s.output.actions.first().map_or("-".into(), |a| a.short());
                format!(" {} {} ", s.index, trunc(&a, 18))
            })
            .collect();
        let width = usize::from(strip.width);
        let mut start = 0;
        let used = |from: usize, to: usize| -> usize {
            cells[from..=to].iter().map(|c| c.chars().count() + 1).sum()
        };
        while start < self.steps.selected && used(start, self.steps.selected) > width {
            start += 1;
        }
        let mut strip_spans = Vec::new();
        for (i, c) in cells.iter().enumerate().skip(start) {
            let style = if i == self.steps.selected {
                th.selected()
            } else {
                th.dim()
            };
            strip_spans.push(Span::styled(c.clone(), style));
            strip_spans.push(Span::raw("│"));
        }
        f.render_widget(Paragraph::new(Line::from(strip_spans)), strip);
        true
    }

    fn draw_list(&mut self, f: &mut Frame, area: Rect, sh: &mut Shared) {
        let th = sh.theme.clone();
        let total = sh.dataset.trajectory_count();
        let mut title = format!("Trajectories {}/{}", self.rows.len(), total);
        if !sh.loaded() {
            title.push_str(" · loading");
        }
        let block = pane(title, self.focus == Focus::List, &th);
        let inner = block.inner(area);
        f.render_widget(block, area);
        let width = inner.width as usize;
        let window = self.list.window_in(self.rows.len(), inner);
        let mut lines = Vec::with_capacity(window.len());
        for pos in window {
            let record = self.rows[pos];
            let text = match sh.summary(record) {
                Some(s) => {
                    let instr = sh
                        .tasks
                        .get(&s.task_id)
                        .map(|t| t.instruction.as_str())
                        .unwrap_or("");
                    format!(
                        "{} {:<14} {:>2} a{}/r{} {:<8} {}",
                        if s.outcome.success { "✓" } else { "✗" },
                        // Task ids share prefixes (`miniwob/…`); their ends differ.
                        trunc_start(&s.task_id, 14),
                        s.step_count,
                        s.attempt,
                        s.round,
                        trunc(&s.teacher, 8),
                        line(instr)
                    )
                }
                None => format!("! record {} is unreadable", record + 1),
            };
            let text = trunc(&text, width);
            let ok = text.starts_with('✓');
            let style = if pos == self.list.selected {
                th.selected()
            } else if ok {
                th.text()
            } else {
                th.text().fg(th.bad)
            };
            lines.push(Line::from(Span::styled(text, style)));
        }
        if lines.is_empty() {
            let msg = if self.filter.is_empty() {
                "(no trajectories)"
            } else {
                "(no match)"
            };
            lines.push(Line::from(Span::styled(msg, th.dim())));
        }
        f.render_widget(Paragraph::new(lines), inner);
    }
}

/// A step's screenshot with its target drawn on it ([`step_mark`]).
fn draw_shot(
    f: &mut Frame,
    area: Rect,
    images: &mut crate::tui::widgets::screenshot::ImageCache,
    root: &std::path::Path,
    step: &crate::trajectory::Step,
    dim: ratatui::style::Style,
) {
    let rel = step.state.screenshot.as_deref();
    images.draw_marked(f, area, root, rel, step_mark(step), dim);
}

/// The trajectory's header: task, outcome, the judge's verdict (when there is one)
/// and the reflection it was given.
fn header_lines(
    traj: &Trajectory,
    instruction: &str,
    verdict: Option<&crate::judge::verdicts::Verdict>,
    th: &Theme,
) -> Vec<Line<'static>> {
    let outcome = if traj.outcome.success {
        Span::styled("✓ success", th.good())
    } else {
        Span::styled("✗ failure", th.bad())
    };
    let mut head = vec![
        Line::from(vec![
            Span::styled("Task: ", th.label()),
            Span::styled(line(instruction), th.text()),
        ]),
        Line::from(vec![
            Span::styled("Outcome: ", th.label()),
            outcome,
            Span::styled(
                format!("  {}", line(traj.outcome.reason.as_deref().unwrap_or(""))),
                th.dim(),
            ),
        ]),
    ];
    if let Some(v) = verdict {
        head.push(judge_line(v, th));
    }
    head.push(Line::from(vec![
        Span::styled("Reflection: ", th.label()),
        match &traj.reflection {
            Some(r) => Span::styled(line(r), th.text()),
            None => Span::styled("(none)", th.dim()),
        },
    ]));
    head
}

/// The header line of an LLM judge's verdict: its decision, the judge model and the
/// reasoning's last thought (the line before `Status:`, else the first).
fn judge_line<'a>(v: &crate::judge::verdicts::Verdict, th: &crate::tui::theme::Theme) -> Line<'a> {
    let decision = if v.success {
        Span::styled("✓ success", th.good())
    } else {
        Span::styled("✗ failure", th.bad())
    };
    let thought = v.summary();
    Line::from(vec![
        Span::styled("Judge: ", th.label()),
        decision,
        Span::styled(
            format!(" ({})  {}", line(&v.judge_model), line(&thought)),
            th.dim(),
        ),
    ])
}

//! The Runs tab (TUI.md): the runs of a folder (and `--watch` files) with their
//! state, live metric panels, the log tail, launching (`n`), stopping (`s`),
//! resuming (`r`) and killing (`K`, confirmed) runs.
//!
//! Files are read by a [`Watcher`](crate::runs::monitor::Watcher) — on a background thread every
//! [`POLL_INTERVAL`] once [`RunsView::start_background`] is called (the terminal
//! app does), or on demand with [`RunsView::poll_now`] (tests) — so key handling
//! never waits on disk. Everything read from files is sanitized before display.
//! Runs are remembered by their metrics path, so selection and marks survive new
//! runs appearing in the list.
//!
//! The state and the actions on runs are in `view`, the drawing in `draw`; the
//! key handling (the [`Component`] impl) is here.

mod draw;
mod view;

use super::launch_form::{FormOutcome, LaunchForm};
use super::{Component, ListPointer, Pointer};
use crate::runs::launch;
use crate::runs::monitor::{RunsState, Track};
use crate::runs::series::EMA_LEVELS;
use crate::tui::action::Action;
use crate::tui::key_help::{KeyHelp, k};
use crate::tui::shared::Shared;
use draw::{draw_banner, draw_info, draw_kill_confirm, draw_log};
use ratatui::Frame;
use ratatui::crossterm::event::{KeyCode, KeyEvent, MouseEvent};
use ratatui::layout::{Constraint, Layout, Rect};
use std::path::Path;
use std::sync::Arc;
use view::lock;
pub use view::{POLL_INTERVAL, RunsOptions, RunsView};

/// The keys of this view, for the help overlay.
pub const KEYS: &[KeyHelp] = &[
    k(
        "Runs",
        "n",
        "launch form: kind, preset, dataset, steps, lr, mode, init",
    ),
    k(
        "Runs",
        "s  r  K",
        "stop (SIGTERM) · resume · kill (SIGKILL, asks y/n)",
    ),
    k(
        "Runs",
        "+ -  L  x",
        "EMA smoothing · log scale · x by step / wall time",
    ),
    k(
        "Runs",
        ", .  < >  ;",
        "step cursor (values there): ∓1 step · ∓1/10 run · off",
    ),
    k(
        "Runs",
        "D",
        "diff of two marked runs' run.toml (keys set differently)",
    ),
    k(
        "Runs",
        "Space",
        "mark the run for the overlay of marked runs",
    ),
    k(
        "Runs",
        "o",
        "open the run's rollout groups in the Reward tab",
    ),
    k(
        "Runs",
        "R",
        "recipe report table: task types × policies (recipe folders)",
    ),
    k(
        "Runs",
        "c",
        "curriculum: each mined state's phases over the steps",
    ),
];

impl RunsView {
    /// Keeps the selection on the same run as the list changes; a launched run not
    /// listed yet keeps it until it shows.
    fn keep_selection(&mut self, st: &RunsState, vis: &[usize]) {
        let sel_idx = self
            .selected
            .as_ref()
            .and_then(|p| vis.iter().position(|&i| &st.runs[i].info.metrics == p));
        match sel_idx {
            Some(i) => {
                self.cursor.selected = i;
                self.awaiting = None;
            }
            // A launched run not listed yet keeps the selection until it shows.
            None if self.awaiting.is_some() && self.awaiting == self.selected => {}
            None => {
                self.cursor.selected = self.cursor.selected.min(vis.len().saturating_sub(1));
                self.selected = vis
                    .get(self.cursor.selected)
                    .map(|&i| st.runs[i].info.metrics.clone());
            }
        }
    }

    /// Keys for an open overlay (report, config diff, kill confirmation, launch
    /// form), which takes every key while it is open. `None`: no overlay is open.
    fn overlay_key(&mut self, key: KeyEvent) -> Option<Option<Action>> {
        if let Some(r) = &mut self.report {
            if !r.handle_key(key) {
                self.report = None;
            }
            return Some(None);
        }
        if let Some(d) = &mut self.diff {
            if !d.handle_key(key) {
                self.diff = None;
            }
            return Some(None);
        }
        if let Some(c) = self.confirm.take() {
            return Some(Some(Action::Message(match key.code {
                KeyCode::Char('y') | KeyCode::Char('Y') => match launch::kill(c.pid) {
                    Ok(()) => format!("killed {} (pid {})", c.id, c.pid),
                    Err(e) => format!("kill failed: {e:#}"),
                },
                _ => "kill cancelled".into(),
            })));
        }
        if let Some(form) = &mut self.form {
            return Some(match form.handle_key(key) {
                FormOutcome::Editing => None,
                FormOutcome::Cancel => {
                    self.form = None;
                    None
                }
                o @ (FormOutcome::Launch(_) | FormOutcome::LaunchVerl(_)) => {
                    match self.launch(&o) {
                        Ok(m) => {
                            self.form = None;
                            Some(Action::Message(m))
                        }
                        Err(e) => {
                            if let Some(f) = &mut self.form {
                                f.error = Some(e);
                            }
                            None
                        }
                    }
                }
            });
        }
        None
    }

    /// The view's own commands (launch, stop, resume, kill, smoothing, panels,
    /// the step cursor, and the views it opens).
    // Kept whole: one short arm per key, read beside the help's key list.
    fn command_key(&mut self, key: KeyEvent, sh: &mut Shared) -> Option<Action> {
        let msg = match key.code {
            KeyCode::Char('n') => {
                self.form = Some(LaunchForm::new(sh.dataset.root()));
                return None;
            }
            KeyCode::Char('s') => self.stop(),
            KeyCode::Char('r') => self.resume(),
            KeyCode::Char('K') => self.ask_kill()?,
            KeyCode::Char('+') | KeyCode::Char('=') => {
                self.ema = (self.ema + 1).min(EMA_LEVELS.len() - 1);
                format!("EMA {}", EMA_LEVELS[self.ema])
            }
            KeyCode::Char('-') => {
                self.ema = self.ema.saturating_sub(1);
                format!("EMA {}", EMA_LEVELS[self.ema])
            }
            KeyCode::Char('L') => {
                self.log = !self.log;
                return None;
            }
            KeyCode::Char('x') => {
                self.wall = !self.wall;
                return None;
            }
            KeyCode::Char(' ') => {
                self.toggle_mark();
                return None;
            }
            KeyCode::Char(c @ (',' | '.' | '<' | '>')) => {
                // One step, or a tenth of the run's `n` steps.
                let by = move |n: i64| match c {
                    ',' => -1,
                    '.' => 1,
                    '<' => -(n / 10).max(1),
                    _ => (n / 10).max(1),
                };
                match self.move_cursor(by) {
                    Some(s) => format!("cursor at step {s}"),
                    None => "no metrics to put the cursor on".into(),
                }
            }
            KeyCode::Char(';') => {
                self.step_cursor = None;
                "cursor hidden: panels show the latest values".into()
            }
            KeyCode::Char(']') => {
                self.panel_page = (self.panel_page + 1).min(self.panel_pages.saturating_sub(1));
                format!(
                    "panels page {} of {}",
                    self.panel_page + 1,
                    self.panel_pages
                )
            }
            KeyCode::Char('[') => {
                self.panel_page = self.panel_page.saturating_sub(1);
                format!(
                    "panels page {} of {}",
                    self.panel_page + 1,
                    self.panel_pages
                )
            }
            KeyCode::Char('o') => {
                let dir = self.selected()?.parent()?.to_path_buf();
                return Some(Action::OpenRollouts(dir));
            }
            KeyCode::Char('D') => match self.open_diff() {
                Ok(()) => return None,
                Err(e) => e,
            },
            KeyCode::Char('R') => {
                let run = self.selected().and_then(Path::parent);
                match super::recipe_report::RecipeReportView::for_runs(
                    self.opts.root.as_deref(),
                    run,
                ) {
                    Ok(v) => {
                        self.report = Some(v);
                        return None;
                    }
                    Err(e) => e,
                }
            }
            KeyCode::Char('c') => match self.selected().and_then(Path::parent) {
                Some(dir) => return Some(Action::OpenCurriculum(dir.to_path_buf())),
                None => "select an RL run first (j/k)".to_string(),
            },
            _ => return None,
        };
        Some(Action::Message(msg))
    }
}

impl Component for RunsView {
    fn keys(&self) -> &'static [&'static [KeyHelp]] {
        &[KEYS, super::curriculum::KEYS]
    }

    fn captures_text(&self) -> bool {
        self.form.is_some()
            || self.confirm.is_some()
            || self.report.is_some()
            || self.diff.is_some()
    }

    fn filter(&self) -> &str {
        &self.filter
    }

    fn set_filter(&mut self, filter: &str) {
        self.filter = filter.to_string();
    }

    /// A click selects a run; the wheel moves through the runs, or moves the step
    /// cursor over the charts (as `,` and `.`). Nothing while a popup is open.
    fn handle_mouse(&mut self, ev: MouseEvent, sh: &mut Shared) -> Option<Action> {
        let p = Pointer::of(&ev)?;
        if self.captures_text() {
            return None;
        }
        if let Pointer::Scroll(at, down) = p
            && self.charts_area.contains(at)
        {
            return self.handle_key(
                KeyEvent::from(KeyCode::Char(if down { '.' } else { ',' })),
                sh,
            );
        }
        let state = Arc::clone(&self.state);
        let st = lock(&state);
        let vis = self.visible(&st);
        if let Some(ListPointer::Moved) = self.cursor.pointer(p, vis.len()) {
            self.awaiting = None;
            self.selected = vis
                .get(self.cursor.selected)
                .map(|&i| st.runs[i].info.metrics.clone());
        }
        None
    }

    fn handle_key(&mut self, key: KeyEvent, sh: &mut Shared) -> Option<Action> {
        if let Some(handled) = self.overlay_key(key) {
            return handled;
        }
        let state = Arc::clone(&self.state);
        let st = lock(&state);
        let vis = self.visible(&st);
        if let Some(p) = self
            .selected
            .as_ref()
            .and_then(|sel| vis.iter().position(|&i| &st.runs[i].info.metrics == sel))
        {
            self.cursor.selected = p;
        }
        if self.cursor.navigate(&key, vis.len()) {
            self.awaiting = None;
            self.selected = vis
                .get(self.cursor.selected)
                .map(|&i| st.runs[i].info.metrics.clone());
            return None;
        }
        drop(st);
        self.command_key(key, sh)
    }

    fn draw(&mut self, f: &mut Frame, area: Rect, sh: &mut Shared) {
        let th = sh.theme.clone();
        // Drawn under the lock (the poller waits at most one frame).
        let state = Arc::clone(&self.state);
        let st = lock(&state);
        // Keep the selection on the same run as the list changes.
        let vis = self.visible(&st);
        self.keep_selection(&st, &vis);
        let sel: Option<&Track> = vis.get(self.cursor.selected).map(|&i| &st.runs[i]);
        let plotted: Vec<&Track> = if self.marked.is_empty() {
            sel.into_iter().collect()
        } else {
            st.runs
                .iter()
                .filter(|t| self.marked.contains(&t.info.metrics))
                .collect()
        };
        // Any run flagged, not only the one on screen: it is what to look at next.
        let banner: Vec<(String, String)> = st
            .runs
            .iter()
            .filter(|t| !t.vanished)
            .filter_map(|t| Some((t.info.id.clone(), t.self_sharpening()?)))
            .collect();
        let list_h = (st.runs.len() as u16 + 3).clamp(4, 10);
        let [banner_a, list_a, charts_a, bottom_a] = Layout::vertical([
            Constraint::Length(u16::from(!banner.is_empty())),
            Constraint::Length(list_h),
            Constraint::Min(6),
            Constraint::Length(8),
        ])
        .areas(area);
        draw_banner(f, banner_a, &banner, &th);
        self.draw_list(f, list_a, &st, &vis, &th);
        self.charts_area = charts_a;
        self.draw_charts(f, charts_a, &plotted, &th);
        let [info_a, log_a] =
            Layout::horizontal([Constraint::Length(44), Constraint::Min(10)]).areas(bottom_a);
        draw_info(
            f,
            info_a,
            sel,
            self.view(),
            (self.panel_page, self.panel_pages),
            &th,
        );
        draw_log(f, log_a, sel, &th);
        if let Some(form) = &self.form {
            form.draw(f, area, &th);
        }
        if let Some(r) = &mut self.report {
            r.draw(f, area, &th);
        }
        if let Some(d) = &self.diff {
            d.draw(f, area, &th);
        }
        if let Some(c) = &self.confirm {
            draw_kill_confirm(f, area, &c.id, c.pid, &th);
        }
    }
}

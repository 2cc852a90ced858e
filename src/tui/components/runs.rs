//! The Runs tab (TUI.md): the runs of a folder (and `--watch` files) with their
//! state, live metric panels, the log tail, launching (`n`), stopping (`s`),
//! resuming (`r`) and killing (`K`, confirmed) runs.
//!
//! Files are read by a [`Watcher`] — on a background thread every
//! [`POLL_INTERVAL`] once [`RunsView::start_background`] is called (the terminal
//! app does), or on demand with [`RunsView::poll_now`] (tests) — so key handling
//! never waits on disk. Everything read from files is sanitized before display.
//! Runs are remembered by their metrics path, so selection and marks survive new
//! runs appearing in the list.

use super::launch_form::{FormOutcome, LaunchForm};
use super::{Component, Cursor, pane};
use crate::runs::info::DisplayState;
use crate::runs::launch::{self, ChildState, Launcher};
use crate::runs::monitor::{RunsState, Track, Watcher};
use crate::runs::series::EMA_LEVELS;
use crate::runs::tail::TailState;
use crate::tui::action::Action;
use crate::tui::shared::Shared;
use crate::tui::theme::Theme;
use crate::tui::widgets::chart::{self, PANELS, PREFIX_PANELS, PlotLine, View, fmt_num};
use crate::tui::widgets::text::{line, trunc};
use ratatui::Frame;
use ratatui::crossterm::event::{KeyCode, KeyEvent};
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Modifier};
use ratatui::symbols::Marker;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Clear, Paragraph, Row, Table};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

/// How often the background poller rereads the files.
pub const POLL_INTERVAL: Duration = Duration::from_millis(500);
/// Most chart panels drawn at once (two rows of four).
const MAX_PANELS: usize = 8;

/// What the Runs tab watches and how it launches.
#[derive(Debug, Clone, Default)]
pub struct RunsOptions {
    /// The runs folder (`--runs`, default `runs`); none shows only `watch` files.
    pub root: Option<PathBuf>,
    /// Extra metrics files (`--watch`), e.g. a verl run's.
    pub watch: Vec<PathBuf>,
    /// The `rmsweb` binary that runs are launched with (default: this executable).
    pub binary: Option<PathBuf>,
    /// A fixed "now" for run ages (tests); none uses the clock.
    pub now: Option<chrono::DateTime<chrono::Utc>>,
}

enum Poller {
    Inline(Box<Watcher>),
    Background {
        stop: Arc<AtomicBool>,
        seen: u64,
    },
    /// Taken while moving to the background.
    None,
}

/// A kill waiting for its y/n.
#[derive(Debug, Clone)]
struct KillConfirm {
    id: String,
    pid: u32,
}

/// The Runs tab.
pub struct RunsView {
    opts: RunsOptions,
    state: Arc<Mutex<RunsState>>,
    poller: Poller,
    launcher: Launcher,
    cursor: Cursor,
    selected: Option<PathBuf>,
    marked: BTreeSet<PathBuf>,
    ema: usize,
    log: bool,
    wall: bool,
    form: Option<LaunchForm>,
    confirm: Option<KillConfirm>,
    /// The list filter (`/`): a case-insensitive substring of id, kind, preset,
    /// mode or state.
    filter: String,
    /// Which page of chart panels is shown (`[`/`]`), and how many there were at the
    /// last draw.
    panel_page: usize,
    panel_pages: usize,
    /// The recipe report table (`R`), while open.
    report: Option<super::recipe_report::RecipeReportView>,
}

impl Default for RunsView {
    fn default() -> Self {
        RunsView::new(RunsOptions::default())
    }
}

impl Drop for RunsView {
    fn drop(&mut self) {
        if let Poller::Background { stop, .. } = &self.poller {
            stop.store(true, Ordering::Relaxed);
        }
    }
}

fn lock(m: &Mutex<RunsState>) -> MutexGuard<'_, RunsState> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl RunsView {
    /// A view of `opts`' runs; nothing is read until the first poll.
    pub fn new(opts: RunsOptions) -> Self {
        let binary = opts
            .binary
            .clone()
            .or_else(|| std::env::current_exe().ok())
            .unwrap_or_else(|| PathBuf::from("rmsweb"));
        RunsView {
            poller: Poller::Inline(Box::new(Watcher::new(opts.root.clone(), &opts.watch))),
            opts,
            state: Arc::new(Mutex::new(RunsState::default())),
            launcher: Launcher::new(binary),
            cursor: Cursor::default(),
            selected: None,
            marked: BTreeSet::new(),
            ema: 0,
            log: false,
            wall: false,
            form: None,
            confirm: None,
            filter: String::new(),
            panel_page: 0,
            panel_pages: 1,
            report: None,
        }
    }

    /// Reads the files now (only before [`Self::start_background`]); returns
    /// whether anything was read.
    pub fn poll_now(&mut self) -> bool {
        let Poller::Inline(w) = &mut self.poller else {
            return false;
        };
        loop {
            let u = w.poll();
            let more = u.more;
            lock(&self.state).apply(u);
            if !more {
                break;
            }
        }
        self.launcher.reap();
        true
    }

    /// Moves polling to a background thread (every [`POLL_INTERVAL`], at once
    /// again while a big file is still being read).
    pub fn start_background(&mut self) -> std::io::Result<()> {
        let Poller::Inline(_) = &self.poller else {
            return Ok(());
        };
        let Poller::Inline(mut watcher) = std::mem::replace(&mut self.poller, Poller::None) else {
            return Ok(());
        };
        let stop = Arc::new(AtomicBool::new(false));
        let (st, flag) = (Arc::clone(&self.state), Arc::clone(&stop));
        std::thread::Builder::new()
            .name("rmsweb-runs".into())
            .spawn(move || {
                while !flag.load(Ordering::Relaxed) {
                    let u = watcher.poll();
                    let more = u.more;
                    lock(&st).apply(u);
                    if more {
                        continue;
                    }
                    for _ in 0..10 {
                        if flag.load(Ordering::Relaxed) {
                            return;
                        }
                        std::thread::sleep(POLL_INTERVAL / 10);
                    }
                }
            })?;
        self.poller = Poller::Background { stop, seen: 0 };
        Ok(())
    }

    /// Called on the app's tick: reaps finished children; true when new data
    /// arrived since the last call (the frame must be redrawn).
    pub fn tick(&mut self) -> bool {
        self.launcher.reap();
        match &mut self.poller {
            Poller::Background { seen, .. } => {
                let version = lock(&self.state).version;
                let changed = version != *seen;
                *seen = version;
                changed
            }
            _ => false,
        }
    }

    /// A copy of the monitor's state (tests).
    pub fn snapshot(&self) -> RunsState {
        lock(&self.state).clone()
    }

    /// Selects the run whose id is `id` (tests and scripted use).
    pub fn select_id(&mut self, id: &str) -> bool {
        let st = lock(&self.state);
        match st.runs.iter().position(|t| t.info.id == id) {
            Some(i) => {
                self.selected = Some(st.runs[i].info.metrics.clone());
                self.cursor.selected = i;
                true
            }
            None => false,
        }
    }

    /// The selected run's metrics path.
    pub fn selected(&self) -> Option<&Path> {
        self.selected.as_deref()
    }

    fn selected_track(&self) -> Option<Track> {
        let st = lock(&self.state);
        let sel = self.selected.as_ref()?;
        st.find(sel).cloned()
    }

    fn launch(&mut self, what: &FormOutcome) -> Result<String, String> {
        let root = self
            .opts
            .root
            .clone()
            .ok_or_else(|| "no runs folder: start the workbench with --runs DIR".to_string())?;
        let (dir, pid) = match what {
            FormOutcome::Launch(spec) => self.launcher.launch(spec, &root),
            FormOutcome::LaunchVerl(spec) => self.launcher.launch_verl(spec, &root),
            FormOutcome::Editing | FormOutcome::Cancel => return Err("nothing to launch".into()),
        }
        .map_err(|e| format!("{e:#}"))?;
        self.selected = Some(dir.join("metrics.jsonl"));
        self.poll_now();
        Ok(format!("launched {} (pid {pid})", dir.display()))
    }

    fn stop(&mut self) -> String {
        let Some(t) = self.selected_track() else {
            return "no run selected".into();
        };
        match (t.state(), t.info.status.pid) {
            (DisplayState::Running | DisplayState::Queued, Some(pid)) if pid > 0 => {
                match launch::stop(pid) {
                    Ok(()) => format!(
                        "stop sent to {} (pid {pid}): it checkpoints, then stops",
                        t.info.id
                    ),
                    Err(e) => format!("stop failed: {e:#}"),
                }
            }
            (s, _) => format!("{} is {}, not running", t.info.id, s.label()),
        }
    }

    fn resume(&mut self) -> String {
        let Some(t) = self.selected_track() else {
            return "no run selected".into();
        };
        if t.state().is_active() {
            return format!("{} is already {}", t.info.id, t.state().label());
        }
        if !t.info.dir.join("run.toml").is_file() {
            return format!("{} has no run.toml to resume from", t.info.id);
        }
        match self.launcher.resume(&t.info.dir) {
            Ok(pid) => format!("resuming {} (pid {pid})", t.info.id),
            Err(e) => format!("resume failed: {e:#}"),
        }
    }

    fn ask_kill(&mut self) -> Option<String> {
        let Some(t) = self.selected_track() else {
            return Some("no run selected".into());
        };
        match (t.state(), t.info.status.pid) {
            (DisplayState::Running | DisplayState::Queued, Some(pid)) if pid > 0 => {
                self.confirm = Some(KillConfirm {
                    id: t.info.id.clone(),
                    pid,
                });
                None
            }
            (s, _) => Some(format!("{} is {}, nothing to kill", t.info.id, s.label())),
        }
    }

    fn toggle_mark(&mut self) {
        if let Some(sel) = self.selected.clone()
            && !self.marked.remove(&sel)
        {
            self.marked.insert(sel);
        }
    }

    /// The current view settings.
    pub fn view(&self) -> View {
        View {
            ema: EMA_LEVELS[self.ema],
            log: self.log,
            wall: self.wall,
        }
    }

    /// Indices of the runs the filter lets through, in list order.
    fn visible(&self, st: &RunsState) -> Vec<usize> {
        super::filter_indices(st.runs.len(), &self.filter, |i| {
            let t = &st.runs[i];
            let c = &t.info.config;
            format!(
                "{} {} {} {} {}",
                t.info.id,
                t.kind().unwrap_or(""),
                c.preset.as_deref().unwrap_or(""),
                c.mode.as_deref().unwrap_or(""),
                if t.vanished {
                    "gone"
                } else {
                    t.state().label()
                }
            )
        })
    }

    fn now(&self) -> chrono::DateTime<chrono::Utc> {
        self.opts.now.unwrap_or_else(chrono::Utc::now)
    }
}

fn age(
    updated: Option<chrono::DateTime<chrono::Utc>>,
    now: chrono::DateTime<chrono::Utc>,
) -> String {
    let Some(t) = updated else {
        return "-".into();
    };
    let s = (now - t).num_seconds().max(0);
    match s {
        0..120 => format!("{s}s"),
        120..7200 => format!("{}m", s / 60),
        7200..172_800 => format!("{}h", s / 3600),
        _ => format!("{}d", s / 86_400),
    }
}

/// The state word and its style. A run launched from here that has not written
/// its status yet is "starting" while its process lives and "exit N" once it
/// ended without one (a bad argument, say: its log tail tells why).
fn state_style(
    t: &Track,
    child: Option<ChildState>,
    th: &Theme,
) -> (String, ratatui::style::Style) {
    if t.vanished {
        return ("gone".into(), th.bad());
    }
    let s = t.state();
    match (s, child) {
        (DisplayState::Unknown, Some(ChildState::Running)) => {
            return ("starting".into(), th.good());
        }
        (DisplayState::Unknown, None)
            if matches!(t.tail, TailState::Missing | TailState::Waiting) =>
        {
            // A watched file whose trainer (verl) has not created it yet.
            return ("waiting".into(), th.dim());
        }
        (DisplayState::Unknown, Some(ChildState::Exited(c))) => {
            return (format!("exit {c}"), th.bad());
        }
        _ => {}
    }
    let style = match s {
        DisplayState::Running | DisplayState::Queued => th.good(),
        DisplayState::Finished => th.text(),
        DisplayState::Stopped | DisplayState::Unknown => th.dim(),
        DisplayState::Failed | DisplayState::Lost => th.bad(),
    };
    (s.label().into(), style)
}

/// Markers telling keys apart in an overlay (colours tell the runs apart), with
/// the symbol shown in the panel title.
const KEY_MARKERS: [(Marker, &str); 3] = [
    (Marker::Braille, "⣿"),
    (Marker::Dot, "•"),
    (Marker::Bar, "▄"),
];

/// Colours for chart lines, after the theme's own.
fn palette(th: &Theme) -> Vec<Color> {
    vec![
        th.accent,
        th.warn,
        th.ok,
        th.bad,
        Color::Magenta,
        Color::Cyan,
        Color::LightBlue,
        Color::LightYellow,
    ]
}

fn short_key(k: &str) -> &str {
    k.rsplit('/').next().unwrap_or(k)
}

impl Component for RunsView {
    fn captures_text(&self) -> bool {
        self.form.is_some() || self.confirm.is_some() || self.report.is_some()
    }

    fn filter(&self) -> &str {
        &self.filter
    }

    fn set_filter(&mut self, filter: &str) {
        self.filter = filter.to_string();
    }

    fn handle_key(&mut self, key: KeyEvent, sh: &mut Shared) -> Option<Action> {
        if let Some(r) = &mut self.report {
            if !r.handle_key(key) {
                self.report = None;
            }
            return None;
        }
        if let Some(c) = self.confirm.take() {
            return Some(Action::Message(match key.code {
                KeyCode::Char('y') | KeyCode::Char('Y') => match launch::kill(c.pid) {
                    Ok(()) => format!("killed {} (pid {})", c.id, c.pid),
                    Err(e) => format!("kill failed: {e:#}"),
                },
                _ => "kill cancelled".into(),
            }));
        }
        if let Some(form) = &mut self.form {
            return match form.handle_key(key) {
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
            };
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
            self.selected = vis
                .get(self.cursor.selected)
                .map(|&i| st.runs[i].info.metrics.clone());
            return None;
        }
        drop(st);
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

    fn draw(&mut self, f: &mut Frame, area: Rect, sh: &mut Shared) {
        let th = sh.theme.clone();
        // Drawn under the lock (the poller waits at most one frame).
        let state = Arc::clone(&self.state);
        let st = lock(&state);
        // Keep the selection on the same run as the list changes.
        let vis = self.visible(&st);
        let sel_idx = self
            .selected
            .as_ref()
            .and_then(|p| vis.iter().position(|&i| &st.runs[i].info.metrics == p));
        match sel_idx {
            Some(i) => self.cursor.selected = i,
            None => {
                self.cursor.selected = self.cursor.selected.min(vis.len().saturating_sub(1));
                self.selected = vis
                    .get(self.cursor.selected)
                    .map(|&i| st.runs[i].info.metrics.clone());
            }
        }
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
        if let Some((id, msg)) = banner.first() {
            let more = match banner.len() {
                1 => String::new(),
                n => format!(" (+{} more)", n - 1),
            };
            let text = format!(" ⚠ self-sharpening in {}{more}: {}", line(id), line(msg));
            f.render_widget(
                Paragraph::new(Line::from(Span::styled(
                    text,
                    th.bad().add_modifier(Modifier::BOLD | Modifier::REVERSED),
                ))),
                banner_a,
            );
        }
        self.draw_list(f, list_a, &st, &vis, &th);
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
        if let Some(c) = &self.confirm {
            let (w, h) = (60.min(area.width), 4.min(area.height));
            let r = Rect::new(
                area.x + (area.width - w) / 2,
                area.y + (area.height - h) / 2,
                w,
                h,
            );
            f.render_widget(Clear, r);
            f.render_widget(
                Paragraph::new(vec![
                    Line::from(Span::styled(
                        format!("Kill {} (pid {}) with SIGKILL?", trunc(&c.id, 30), c.pid),
                        th.bad(),
                    )),
                    Line::from(Span::styled(
                        "no checkpoint is written · y kills · any other key cancels",
                        th.dim(),
                    )),
                ])
                .block(
                    Block::default()
                        .borders(Borders::ALL)
                        .border_style(th.border(true))
                        .title(Span::styled(" Kill ", th.label()))
                        .style(th.text()),
                ),
                r,
            );
        }
    }
}

impl RunsView {
    fn draw_list(&mut self, f: &mut Frame, area: Rect, st: &RunsState, vis: &[usize], th: &Theme) {
        let title = match (&self.opts.root, self.opts.watch.len()) {
            (Some(r), 0) => format!("Runs · {}", line(&r.display().to_string())),
            (Some(r), n) => format!("Runs · {} + {n} watched", line(&r.display().to_string())),
            (None, 0) => "Runs".into(),
            (None, n) => format!("Runs · {n} watched"),
        };
        let block = pane(title, true, th);
        if vis.is_empty() {
            let text = match &self.opts.root {
                _ if !st.runs.is_empty() => format!(
                    "no run matches the filter `{}` (/ then Esc clears)",
                    line(&self.filter)
                ),
                Some(r) if !r.is_dir() => format!(
                    "no runs yet ({} does not exist) · n launches a run",
                    line(&r.display().to_string())
                ),
                Some(_) => "no runs yet · n launches a run".into(),
                None => "no runs folder: start with --runs DIR or --watch FILE".into(),
            };
            f.render_widget(
                Paragraph::new(Span::styled(text, th.dim())).block(block),
                area,
            );
            return;
        }
        let inner_h = area.height.saturating_sub(3) as usize;
        let range = self.cursor.window(vis.len(), inner_h);
        let now = self.now();
        let rows = vis[range.clone()].iter().enumerate().map(|(i, &ri)| {
            let t = &st.runs[ri];
            let idx = range.start + i;
            let (state, sstyle) = state_style(t, self.launcher.child_state(&t.info.dir), th);
            let headline = t
                .headline()
                .map(|(what, v)| format!("{what} {}", fmt_num(v)))
                .unwrap_or_else(|| "-".into());
            let mark = if self.marked.contains(&t.info.metrics) {
                "●"
            } else {
                " "
            };
            let row = Row::new(vec![
                Span::styled(mark, th.label()),
                Span::styled(trunc(&t.info.id, 40), th.text()),
                Span::styled(state, sstyle),
                Span::styled(line(t.kind().unwrap_or("?")), th.text()),
                Span::styled(
                    line(t.info.config.preset.as_deref().unwrap_or("-")),
                    th.text(),
                ),
                Span::styled(
                    line(t.info.config.mode.as_deref().unwrap_or("-")),
                    th.text(),
                ),
                Span::styled(t.step().map_or("-".into(), |s| s.to_string()), th.text()),
                Span::styled(headline, th.text()),
                Span::styled(age(t.updated(), now), th.dim()),
            ]);
            if idx == self.cursor.selected {
                row.style(th.selected())
            } else {
                row
            }
        });
        let table = Table::new(
            rows,
            [
                Constraint::Length(1),
                Constraint::Min(20),
                Constraint::Length(8),
                Constraint::Length(4),
                Constraint::Length(10),
                Constraint::Length(11),
                Constraint::Length(7),
                Constraint::Length(14),
                Constraint::Length(5),
            ],
        )
        .header(
            Row::new([
                "", "run", "state", "kind", "preset", "mode", "step", "latest", "age",
            ])
            .style(th.dim()),
        )
        .block(block);
        f.render_widget(table, area);
    }

    /// The panels with data for the plotted runs: the fixed ones, then those whose
    /// keys are found by prefix (validation scores).
    fn panels(&self, plotted: &[&Track], th: &Theme) -> Vec<PanelView> {
        let mut defs: Vec<(String, Vec<String>, Vec<String>)> = PANELS
            .iter()
            .map(|p| {
                let labels = (0..p.keys.len())
                    .map(|i| {
                        p.labels
                            .get(i)
                            .copied()
                            .unwrap_or_else(|| short_key(p.keys[i]))
                            .to_string()
                    })
                    .collect();
                (
                    p.title.to_string(),
                    p.keys.iter().map(|k| k.to_string()).collect(),
                    labels,
                )
            })
            .collect();
        for (title, prefix, most) in PREFIX_PANELS {
            let mut keys: Vec<String> = plotted
                .iter()
                .flat_map(|t| t.series.keys().map(|(k, _)| k.clone()))
                .filter(|k| k.starts_with(prefix))
                .collect();
            keys.sort();
            keys.dedup();
            keys.truncate(most);
            if !keys.is_empty() {
                let labels = keys
                    .iter()
                    .map(|k| trunc(k.trim_start_matches(prefix), 28))
                    .collect();
                defs.push((title.to_string(), keys, labels));
            }
        }
        let view = self.view();
        let colors = palette(th);
        let overlay = plotted.len() > 1;
        let mut panels = Vec::new();
        for (title, keys, labels) in defs {
            let mut lines = Vec::new();
            let mut present = Vec::new();
            let mut gaps = 0u64;
            for (ri, t) in plotted.iter().enumerate() {
                for (ki, k) in keys.iter().enumerate() {
                    let Some(s) = t.series.get(k) else { continue };
                    gaps += s.gaps();
                    let segments = chart::plot_segments(s, view);
                    if segments.is_empty() {
                        continue;
                    }
                    if !present.contains(&ki) {
                        present.push(ki);
                    }
                    // One run: a colour per key. Overlay: a colour per run, a
                    // marker per key.
                    let (ci, marker) = if overlay {
                        (ri, KEY_MARKERS[ki % KEY_MARKERS.len()].0)
                    } else {
                        (ki, Marker::Braille)
                    };
                    for points in segments {
                        lines.push(PlotLine {
                            color: colors[ci % colors.len()],
                            marker,
                            points,
                        });
                    }
                }
            }
            if lines.is_empty() {
                continue;
            }
            let mut spans = vec![Span::styled(format!(" {} ", line(&title)), th.label())];
            let mut bottom = None;
            if title == "gates" {
                // The counts of the latest step, per plotted run.
                let counts: Vec<String> = plotted
                    .iter()
                    .filter_map(|t| {
                        let acc = t.series.latest("salvage/accepted_groups");
                        let sal = t.series.latest("salvage/salvage_groups");
                        (acc.is_some() || sal.is_some()).then(|| {
                            let n = |v: Option<f64>| v.map_or("-".into(), |v| format!("{v:.0}"));
                            format!("acc {} salv {}", n(acc), n(sal))
                        })
                    })
                    .collect();
                if !counts.is_empty() {
                    bottom = Some(format!(" {} ", counts.join(" │ ")));
                }
            } else if !overlay && let Some(t) = plotted.first() {
                // The latest raw values, in the keys' order.
                let latest: Vec<String> = present
                    .iter()
                    .filter_map(|&ki| t.series.latest(&keys[ki]).map(fmt_num))
                    .collect();
                bottom = Some(format!(" now {} ", latest.join(" · ")));
            }
            if gaps > 0 {
                let text = format!("{gaps} missing ");
                bottom = Some(match bottom {
                    Some(b) => format!("{b}· {text}"),
                    None => format!(" {text}"),
                });
            }
            if keys.len() > 1 || overlay {
                for ki in present {
                    let label = &labels[ki];
                    let span = if overlay {
                        Span::styled(
                            format!("{}{} ", KEY_MARKERS[ki % KEY_MARKERS.len()].1, line(label)),
                            th.text(),
                        )
                    } else {
                        Span::styled(
                            format!("━{} ", line(label)),
                            ratatui::style::Style::default().fg(colors[ki % colors.len()]),
                        )
                    };
                    spans.push(span);
                }
            }
            panels.push(PanelView {
                title: Line::from(spans),
                bottom,
                lines,
            });
        }
        panels
    }

    fn draw_charts(&mut self, f: &mut Frame, area: Rect, plotted: &[&Track], th: &Theme) {
        let view = self.view();
        let colors = palette(th);
        let overlay = plotted.len() > 1;
        let all = self.panels(plotted, th);
        let pages = all.len().div_ceil(MAX_PANELS).max(1);
        self.panel_page = self.panel_page.min(pages - 1);
        self.panel_pages = pages;
        let panels: Vec<&PanelView> = all
            .iter()
            .skip(self.panel_page * MAX_PANELS)
            .take(MAX_PANELS)
            .collect();
        if panels.is_empty() {
            let what = match plotted.first() {
                None => "select a run".to_string(),
                Some(t) => match (t.vanished, t.tail) {
                    (true, _) | (_, TailState::Vanished) => "the run's files are gone".into(),
                    (_, TailState::Missing) => format!(
                        "waiting for verl to start: {} does not exist yet (verl creates \
                         <project>/ when its file logger starts)",
                        line(&t.info.dir.display().to_string())
                    ),
                    _ if t.kind() == Some("verl") => {
                        "waiting for verl to start (no metrics yet)".into()
                    }
                    _ => "no metrics yet (waiting for metrics.jsonl)".into(),
                },
            };
            f.render_widget(
                Paragraph::new(Span::styled(what, th.dim())).block(
                    Block::default()
                        .borders(Borders::ALL)
                        .border_style(th.border(false)),
                ),
                area,
            );
            return;
        }
        let (legend_a, area) = if overlay {
            let [a, b] = Layout::vertical([Constraint::Length(1), Constraint::Min(3)]).areas(area);
            (Some(a), b)
        } else {
            (None, area)
        };
        if let Some(a) = legend_a {
            let mut spans = vec![Span::styled(" overlay: ", th.dim())];
            for (ri, t) in plotted.iter().enumerate() {
                spans.push(Span::styled(
                    format!("■ {}  ", trunc(&t.info.id, 30)),
                    ratatui::style::Style::default().fg(colors[ri % colors.len()]),
                ));
            }
            f.render_widget(Paragraph::new(Line::from(spans)), a);
        }
        let rows = if panels.len() > 4 { 2 } else { 1 };
        let cols = panels.len().div_ceil(rows);
        let row_areas = Layout::vertical(vec![Constraint::Ratio(1, rows as u32); rows]).split(area);
        for (r, row_area) in row_areas.iter().enumerate() {
            let cells =
                Layout::horizontal(vec![Constraint::Ratio(1, cols as u32); cols]).split(*row_area);
            for (c, cell) in cells.iter().enumerate() {
                if let Some(p) = panels.get(r * cols + c) {
                    chart::draw_panel(
                        f,
                        *cell,
                        p.title.clone(),
                        p.bottom.as_deref(),
                        &p.lines,
                        view,
                        th,
                    );
                }
            }
        }
    }
}

/// One chart panel ready to draw.
struct PanelView {
    title: Line<'static>,
    bottom: Option<String>,
    lines: Vec<PlotLine>,
}

fn draw_info(
    f: &mut Frame,
    area: Rect,
    t: Option<&Track>,
    view: View,
    (page, pages): (usize, usize),
    th: &Theme,
) {
    let block = pane("Run", false, th);
    let Some(t) = t else {
        f.render_widget(block, area);
        return;
    };
    let w = area.width.saturating_sub(12) as usize;
    let kv = |k: &str, v: String| {
        Line::from(vec![
            Span::styled(format!("{k:>8}: "), th.dim()),
            Span::styled(trunc(&v, w), th.text()),
        ])
    };
    let mut lines = vec![
        kv("folder", t.info.dir.display().to_string()),
        kv("message", t.info.status.message.clone().unwrap_or_default()),
        kv(
            "view",
            format!(
                "x {} · EMA {} · {}{}",
                if view.wall { "wall time" } else { "step" },
                view.ema,
                if view.log { "log" } else { "linear" },
                if pages > 1 {
                    format!(" · panels {}/{pages} ([ ])", page + 1)
                } else {
                    String::new()
                }
            ),
        ),
    ];
    let tail = match t.tail {
        TailState::Live => format!("{} records", t.series.records()),
        TailState::Waiting => "waiting for the file".into(),
        TailState::Vanished => "file vanished".into(),
        TailState::Missing => "folder missing".into(),
    };
    lines.push(kv(
        "metrics",
        if t.resets > 0 {
            format!("{tail} · rewritten {}×", t.resets)
        } else {
            tail
        },
    ));
    let gaps = t.series.gaps();
    let skipped = t.series.skipped();
    // One line each, so neither hides the other in a narrow pane.
    let mut notes = Vec::new();
    if gaps > 0 {
        notes.push(format!("{gaps} missing values (null/NaN, drawn as gaps)"));
    }
    if !skipped.is_empty() {
        notes.push(format!(
            "{} non-numeric keys not plotted: {}",
            skipped.len(),
            skipped.join(", ")
        ));
    }
    for n in notes {
        lines.push(Line::from(Span::styled(trunc(&line(&n), w + 10), th.dim())));
    }
    if t.sharpening.fed > 0 {
        lines.push(kv(
            "detector",
            format!(
                "self-sharpening: {} over {} steps",
                if t.sharpening.flagged {
                    "FLAGGED"
                } else {
                    "quiet"
                },
                t.sharpening.fed
            ),
        ));
    }
    if let Some(m) = &t.last_malformed {
        lines.push(Line::from(Span::styled(
            trunc(&format!("⚠ {} bad lines, last {m}", t.malformed), w + 10),
            th.warn(),
        )));
    }
    for p in &t.info.problems {
        lines.push(Line::from(Span::styled(
            trunc(&format!("⚠ {p}"), w + 10),
            th.warn(),
        )));
    }
    f.render_widget(Paragraph::new(lines).block(block), area);
}

fn draw_log(f: &mut Frame, area: Rect, t: Option<&Track>, th: &Theme) {
    let block = pane("stdout.log", false, th);
    let h = area.height.saturating_sub(2) as usize;
    let w = area.width.saturating_sub(2) as usize;
    let lines: Vec<Line> = t
        .map(|t| {
            let n = t.log.len();
            t.log[n.saturating_sub(h)..]
                .iter()
                .map(|l| Line::from(Span::styled(trunc(l, w), th.text())))
                .collect()
        })
        .unwrap_or_default();
    f.render_widget(Paragraph::new(lines).block(block), area);
}

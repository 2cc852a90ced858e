//! The Runs tab's state: what it watches, the polled runs, selection, marks, the
//! filter, the launch form and kill confirmations, and the actions on runs.

use crate::runs::info::DisplayState;
use crate::runs::launch::{self, Launcher};
use crate::runs::monitor::{RunsState, Track, Watcher};
use crate::runs::series::EMA_LEVELS;
use crate::tui::components::Cursor;
use crate::tui::components::launch_form::{FormOutcome, LaunchForm};
use crate::tui::widgets::chart::View;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

/// How often the background poller rereads the files.
pub const POLL_INTERVAL: Duration = Duration::from_millis(500);
/// Most chart panels drawn at once (two rows of four).
pub(super) const MAX_PANELS: usize = 8;

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

pub(super) enum Poller {
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
pub(super) struct KillConfirm {
    pub(super) id: String,
    pub(super) pid: u32,
}

/// The Runs tab.
pub struct RunsView {
    pub(super) opts: RunsOptions,
    pub(super) state: Arc<Mutex<RunsState>>,
    pub(super) poller: Poller,
    pub(super) launcher: Launcher,
    pub(super) cursor: Cursor,
    pub(super) selected: Option<PathBuf>,
    /// A run just launched that the background poller has not listed yet: the
    /// selection waits for it instead of falling back to the row under the cursor.
    pub(super) awaiting: Option<PathBuf>,
    pub(super) marked: BTreeSet<PathBuf>,
    pub(super) ema: usize,
    pub(super) log: bool,
    pub(super) wall: bool,
    pub(super) form: Option<LaunchForm>,
    pub(super) confirm: Option<KillConfirm>,
    /// The list filter (`/`): a case-insensitive substring of id, kind, preset,
    /// mode or state.
    pub(super) filter: String,
    /// Which page of chart panels is shown (`[`/`]`), and how many there were at the
    /// last draw.
    pub(super) panel_page: usize,
    pub(super) panel_pages: usize,
    /// The step cursor (`,` `.` `<` `>`; `;` hides it).
    pub(super) step_cursor: Option<f64>,
    /// The diff of two runs' `run.toml` (`D`), while open.
    pub(super) diff: Option<crate::tui::components::config_diff::ConfigDiffView>,
    /// The recipe report table (`R`), while open.
    pub(super) report: Option<crate::tui::components::recipe_report::RecipeReportView>,
    /// Where the chart panels were last drawn (for the mouse wheel).
    pub(super) charts_area: ratatui::layout::Rect,
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

pub(super) fn lock(m: &Mutex<RunsState>) -> MutexGuard<'_, RunsState> {
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
            awaiting: None,
            marked: BTreeSet::new(),
            ema: 0,
            log: false,
            wall: false,
            form: None,
            confirm: None,
            filter: String::new(),
            panel_page: 0,
            panel_pages: 1,
            step_cursor: None,
            diff: None,
            report: None,
            charts_area: ratatui::layout::Rect::default(),
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

    /// Opens the diff of the two marked runs' `run.toml` (or of the one marked and
    /// the selected one); the reason when there is no such pair.
    pub(super) fn open_diff(&mut self) -> Result<(), String> {
        let st = lock(&self.state);
        let mut pair: Vec<&Track> = st
            .runs
            .iter()
            .filter(|t| self.marked.contains(&t.info.metrics))
            .collect();
        if pair.len() == 1
            && let Some(sel) = self.selected.as_ref().and_then(|s| st.find(s))
            && sel.info.metrics != pair[0].info.metrics
        {
            pair.push(sel);
        }
        let [a, b] = pair[..] else {
            return Err("mark two runs with Space (or one, then select another), then D".into());
        };
        let view = crate::tui::components::config_diff::ConfigDiffView::of(
            (&a.info.id, &a.info.dir),
            (&b.info.id, &b.info.dir),
        )
        .map_err(|e| format!("{e:#}"))?;
        drop(st);
        self.diff = Some(view);
        Ok(())
    }

    pub(super) fn selected_track(&self) -> Option<Track> {
        let st = lock(&self.state);
        let sel = self.selected.as_ref()?;
        st.find(sel).cloned()
    }

    pub(super) fn launch(&mut self, what: &FormOutcome) -> Result<String, String> {
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
        self.awaiting = self.selected.clone();
        self.poll_now();
        Ok(format!("launched {} (pid {pid})", dir.display()))
    }

    pub(super) fn stop(&mut self) -> String {
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

    pub(super) fn resume(&mut self) -> String {
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

    pub(super) fn ask_kill(&mut self) -> Option<String> {
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

    pub(super) fn toggle_mark(&mut self) {
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
            cursor: self.step_cursor,
        }
    }

    /// Moves the step cursor `by(n)` recorded steps of the selected run, `n` being
    /// how many steps it has (from its last step when there was no cursor), within
    /// its first and last step; the step it stands on after, if the run has any.
    pub(super) fn move_cursor(&mut self, by: impl FnOnce(i64) -> i64) -> Option<f64> {
        let state = Arc::clone(&self.state);
        let st = lock(&state);
        let vis = self.visible(&st);
        let t = vis.get(self.cursor.selected).map(|&i| &st.runs[i])?;
        // The steps of the run's longest series (every key shares most steps).
        let steps = t
            .series
            .keys()
            .map(|(_, s)| s.steps())
            .max_by_key(Vec::len)
            .filter(|s| !s.is_empty())?;
        let here = match self.step_cursor {
            None => steps.len() - 1,
            Some(c) => steps.iter().rposition(|&s| s <= c).unwrap_or(0),
        };
        let n = steps.len() as i64;
        let to = (here as i64 + by(n)).clamp(0, n - 1) as usize;
        self.step_cursor = Some(steps[to]);
        self.step_cursor
    }

    /// Indices of the runs the filter lets through, in list order.
    pub(super) fn visible(&self, st: &RunsState) -> Vec<usize> {
        crate::tui::components::filter_indices(st.runs.len(), &self.filter, |i| {
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

    pub(super) fn now(&self) -> chrono::DateTime<chrono::Utc> {
        self.opts.now.unwrap_or_else(chrono::Utc::now)
    }
}

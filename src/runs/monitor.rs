//! Watching a runs folder and extra metrics files: [`Watcher`] does the file I/O
//! (discovery, status, metrics tail, log tail) and yields an [`Update`];
//! [`RunsState`] folds updates into what the monitor shows. They are split so the
//! I/O can run on a background thread and the state be read under a short lock.

use super::info::{self, DisplayState, RunInfo};
use super::series::DEFAULT_CAP;
use super::tail::{Batch, Malformed, MetricsTail, Record, TailState};
use super::track::RunSeries;
use crate::train::metric_keys as keys;
use crate::train::rl::sharpening::{self, SharpeningConfig, Signals};
use std::collections::BTreeMap;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

/// Lines of `stdout.log` kept for the log tail.
pub const LOG_LINES: usize = 200;
/// Bytes read from the end of `stdout.log` for its tail.
const LOG_BYTES: u64 = 32 * 1024;

/// The last lines of a log file, reread only when the file changed.
#[derive(Debug)]
struct LogTail {
    path: PathBuf,
    seen: Option<(u64, std::time::SystemTime)>,
}

impl LogTail {
    fn poll(&mut self) -> Option<Vec<String>> {
        let meta = std::fs::metadata(&self.path).ok()?;
        let key = (meta.len(), meta.modified().ok()?);
        if self.seen == Some(key) {
            return None;
        }
        self.seen = Some(key);
        let mut f = std::fs::File::open(&self.path).ok()?;
        let start = meta.len().saturating_sub(LOG_BYTES);
        f.seek(SeekFrom::Start(start)).ok()?;
        let mut buf = Vec::new();
        f.take(LOG_BYTES).read_to_end(&mut buf).ok()?;
        let text = String::from_utf8_lossy(&buf);
        let mut lines: Vec<&str> = text.split('\n').collect();
        if start > 0 && lines.len() > 1 {
            lines.remove(0); // cut mid-line
        }
        if lines.last().is_some_and(|l| l.is_empty()) {
            lines.pop();
        }
        // Progress bars redraw with `\r`: show what the line says last.
        let lines = lines.iter().map(|l| {
            l.rsplit('\r')
                .find(|s| !s.trim().is_empty())
                .unwrap_or("")
                .to_string()
        });
        let v: Vec<String> = lines.collect();
        Some(v[v.len().saturating_sub(LOG_LINES)..].to_vec())
    }
}

/// What one poll of one run found.
#[derive(Debug)]
pub struct RunUpdate {
    pub info: RunInfo,
    pub batch: Batch,
    pub tail: TailState,
    /// The log's last lines, when the log changed.
    pub log: Option<Vec<String>>,
    /// The run folder is gone.
    pub vanished: bool,
}

/// What one poll found, for every run known so far.
#[derive(Debug, Default)]
pub struct Update {
    pub runs: Vec<RunUpdate>,
    /// Some metrics file has more bytes than one poll reads: poll again soon.
    pub more: bool,
}

#[derive(Debug)]
struct Watched {
    id: String,
    dir: PathBuf,
    by_path: bool,
    /// The folder existed at some poll (a watched verl file's folder appears only
    /// when verl starts: until then the run is waiting, not gone).
    dir_seen: bool,
    tail: MetricsTail,
    log: LogTail,
}

/// Finds runs and reads what changed in their files.
#[derive(Debug)]
pub struct Watcher {
    root: Option<PathBuf>,
    runs: BTreeMap<PathBuf, Watched>,
}

impl Watcher {
    /// Watches the run folders in `root` (if any) and the metrics files `files`.
    pub fn new(root: Option<PathBuf>, files: &[PathBuf]) -> Self {
        let mut w = Watcher {
            root,
            runs: BTreeMap::new(),
        };
        for f in files {
            let dir = f
                .parent()
                .filter(|p| !p.as_os_str().is_empty())
                .unwrap_or(Path::new("."))
                .to_path_buf();
            w.add(f.display().to_string(), dir, f.clone(), true);
        }
        w
    }

    /// The runs folder.
    pub fn root(&self) -> Option<&Path> {
        self.root.as_deref()
    }

    fn add(&mut self, id: String, dir: PathBuf, metrics: PathBuf, by_path: bool) {
        let log = LogTail {
            path: dir.join("stdout.log"),
            seen: None,
        };
        self.runs.entry(metrics.clone()).or_insert(Watched {
            id,
            dir,
            by_path,
            dir_seen: false,
            tail: MetricsTail::new(metrics),
            log,
        });
    }

    /// Discovers new runs and reads what changed in every known one. A run whose
    /// folder disappeared stays listed, marked vanished.
    pub fn poll(&mut self) -> Update {
        if let Some(root) = self.root.clone() {
            for r in info::discover(&root) {
                self.add(r.id, r.dir, r.metrics, false);
            }
        }
        let mut update = Update::default();
        for (metrics, w) in &mut self.runs {
            let info = if w.by_path {
                let mut i = info::watched(metrics);
                i.id = w.id.clone();
                i
            } else {
                info::read_run(w.id.clone(), &w.dir, metrics.clone())
            };
            let batch = w.tail.poll();
            update.more |= batch.more;
            let dir_now = w.dir.is_dir();
            w.dir_seen |= dir_now;
            update.runs.push(RunUpdate {
                info,
                tail: w.tail.state(),
                log: w.log.poll(),
                vanished: w.dir_seen && !dir_now,
                batch,
            });
        }
        update
    }
}

/// One run as the monitor shows it.
#[derive(Debug, Clone)]
pub struct Track {
    pub info: RunInfo,
    pub series: RunSeries,
    pub tail: TailState,
    pub vanished: bool,
    /// Malformed metrics lines since the file was last (re)started.
    pub malformed: u64,
    pub last_malformed: Option<Malformed>,
    /// Times the metrics file was truncated or rewritten while watched.
    pub resets: u64,
    /// The last lines of `stdout.log`.
    pub log: Vec<String>,
    /// When the metrics file was last seen modified.
    pub metrics_mtime: Option<std::time::SystemTime>,
    /// The self-sharpening detector over this run's metrics.
    pub sharpening: SharpeningWatch,
}

/// The trainer's self-sharpening detector ([`sharpening::Monitor`], the same code
/// `rmsweb train rl` calls) run over any metrics stream that has its keys, so a verl
/// run is watched for it too.
#[derive(Debug, Clone)]
pub struct SharpeningWatch {
    monitor: sharpening::Monitor,
    /// Steps that carried all the detector's keys.
    pub fed: u64,
    /// Whether the latest fed step was flagged.
    pub flagged: bool,
    /// The latest alert: its step and message.
    pub alert: Option<(u64, String)>,
}

impl Default for SharpeningWatch {
    fn default() -> Self {
        SharpeningWatch {
            monitor: sharpening::Monitor::new(SharpeningConfig::default()),
            fed: 0,
            flagged: false,
            alert: None,
        }
    }
}

impl SharpeningWatch {
    /// Feeds one metrics line (skipped unless it has every key the detector reads).
    pub fn feed(&mut self, r: &Record) {
        let get = |k: &str| r.data.iter().find(|(key, _)| key == k).map(|(_, v)| *v);
        let Some(s) = Signals::from_metrics(get) else {
            return;
        };
        self.fed += 1;
        let (now, alert) = self.monitor.observe(r.step, s);
        self.flagged = now;
        if let Some(a) = alert {
            self.alert = Some((a.step, a.message));
        }
    }
}

impl Track {
    /// The state shown: the status's, "gone" handled by the caller via `vanished`.
    pub fn state(&self) -> DisplayState {
        self.info.state
    }

    /// When the run last showed activity: `status.json`'s `updated`, else the
    /// metrics file's modification time (a watched verl file has no status).
    pub fn updated(&self) -> Option<chrono::DateTime<chrono::Utc>> {
        self.info
            .status
            .updated
            .as_deref()
            .and_then(|u| chrono::DateTime::parse_from_rfc3339(u).ok())
            .map(|t| t.with_timezone(&chrono::Utc))
            .or_else(|| {
                self.metrics_mtime
                    .map(chrono::DateTime::<chrono::Utc>::from)
            })
    }

    /// The latest step: the metrics', else the status'.
    pub fn step(&self) -> Option<u64> {
        self.series.last_step().or(self.info.status.step)
    }

    /// Seconds a step takes at the run's recent pace: the mean of the last five
    /// recorded step durations (`perf/step_s` or verl's `timing_s/step`).
    pub fn step_seconds(&self) -> Option<f64> {
        let s = super::track::STEP_TIME_KEYS
            .iter()
            .find_map(|k| self.series.get(k))?;
        let recent: Vec<f64> = s
            .points()
            .iter()
            .rev()
            .map(|p| p.value)
            .filter(|v| v.is_finite() && *v >= 0.0)
            .take(5)
            .collect();
        (!recent.is_empty()).then(|| recent.iter().sum::<f64>() / recent.len() as f64)
    }

    /// Seconds left while the run is running: the steps it has left (`status.json`'s
    /// `total_steps`) at the recent pace.
    pub fn eta_seconds(&self) -> Option<f64> {
        if self.state() != DisplayState::Running {
            return None;
        }
        let total = self.info.status.total_steps?;
        let step = self.step()?;
        Some(self.step_seconds()? * total.saturating_sub(step) as f64)
    }

    /// The run's kind: `run.toml`'s, else guessed from its metrics.
    pub fn kind(&self) -> Option<&str> {
        self.info.config.kind.as_deref().or_else(|| {
            if self.series.get(keys::CRITIC_SCORE_MEAN).is_some() {
                Some("rl")
            } else if self.series.get(keys::SFT_LOSS).is_some() {
                Some("sft")
            } else {
                None
            }
        })
    }

    /// The headline number: mean rollout reward for RL, loss for SFT.
    pub fn headline(&self) -> Option<(&'static str, f64)> {
        let rl = self
            .series
            .latest(keys::CRITIC_SCORE_MEAN)
            .map(|v| ("reward", v));
        let sft = self.series.latest(keys::SFT_LOSS).map(|v| ("loss", v));
        if self.kind() == Some("sft") {
            sft.or(rl)
        } else {
            rl.or(sft)
        }
    }

    /// The self-sharpening alert, if flagged in `status.json`, by the metric
    /// `alerts/self_sharpening` (latest value ≥ 0.5), or by the monitor's own
    /// detector over the metrics ([`SharpeningWatch`]).
    pub fn self_sharpening(&self) -> Option<String> {
        if let Some(a) = self
            .info
            .status
            .alerts
            .iter()
            .rev()
            .find(|a| a.kind == "self_sharpening")
        {
            let at = a.step.map(|s| format!(" at step {s}")).unwrap_or_default();
            return Some(format!(
                "{}{at}",
                if a.message.is_empty() {
                    "flagged"
                } else {
                    &a.message
                }
            ));
        }
        if let Some(p) = self
            .series
            .get(keys::ALERTS_SELF_SHARPENING)
            .and_then(|s| s.last())
            .filter(|p| p.value >= 0.5)
        {
            return Some(format!("flagged by the metrics at step {}", p.step));
        }
        let (step, msg) = self.sharpening.alert.as_ref()?;
        Some(format!("{msg} (detected by the monitor at step {step})"))
    }
}

/// Every known run, updated by [`RunsState::apply`].
#[derive(Debug, Clone)]
pub struct RunsState {
    pub runs: Vec<Track>,
    pub cap: usize,
    /// Polls applied so far.
    pub polls: u64,
    /// Bumped by every poll that changed something (redraw when it moves).
    pub version: u64,
}

impl Default for RunsState {
    fn default() -> Self {
        RunsState {
            runs: Vec::new(),
            cap: DEFAULT_CAP,
            polls: 0,
            version: 0,
        }
    }
}

impl RunsState {
    /// Folds one poll in.
    pub fn apply(&mut self, update: Update) {
        self.polls += 1;
        let mut changed = false;
        for u in update.runs {
            changed |= u.batch.reset
                || !u.batch.records.is_empty()
                || !u.batch.malformed.is_empty()
                || u.log.is_some();
            let i = match self
                .runs
                .iter()
                .position(|t| t.info.metrics == u.info.metrics)
            {
                Some(i) => i,
                None => {
                    self.runs.push(Track {
                        info: u.info.clone(),
                        series: RunSeries::new(self.cap),
                        tail: u.tail,
                        vanished: false,
                        malformed: 0,
                        last_malformed: None,
                        resets: 0,
                        log: Vec::new(),
                        metrics_mtime: None,
                        sharpening: SharpeningWatch::default(),
                    });
                    changed = true;
                    self.runs.len() - 1
                }
            };
            let t = &mut self.runs[i];
            changed |=
                t.vanished != u.vanished || t.tail != u.tail || (!u.vanished && t.info != u.info);
            if u.vanished {
                // Keep what was known; the files are gone.
                t.vanished = true;
            } else {
                t.vanished = false;
                t.info = u.info;
            }
            t.tail = u.tail;
            if u.batch.reset {
                t.series.clear();
                t.malformed = 0;
                t.last_malformed = None;
                t.resets += 1;
                t.sharpening = SharpeningWatch::default();
            }
            t.series.ingest(&u.batch.records, u.batch.mtime);
            for r in &u.batch.records {
                t.sharpening.feed(r);
            }
            if u.batch.mtime.is_some() {
                t.metrics_mtime = u.batch.mtime;
            }
            t.malformed += u.batch.malformed.len() as u64;
            if let Some(m) = u.batch.malformed.last() {
                t.last_malformed = Some(m.clone());
            }
            if let Some(log) = u.log {
                t.log = log;
            }
        }
        if changed {
            self.version += 1;
        }
    }

    /// The run whose metrics file is `metrics`.
    pub fn find(&self, metrics: &Path) -> Option<&Track> {
        self.runs.iter().find(|t| t.info.metrics == metrics)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn follows_a_run_folder_and_keeps_a_vanished_run() {
        let d = tempfile::tempdir().unwrap();
        let run = d.path().join("r1");
        std::fs::create_dir_all(&run).unwrap();
        std::fs::write(run.join("run.toml"), "kind = \"sft\"\n").unwrap();
        let mut f = std::fs::File::create(run.join("metrics.jsonl")).unwrap();
        writeln!(f, r#"{{"step":1,"data":{{"sft/loss":2.0}}}}"#).unwrap();
        writeln!(f, "garbage").unwrap();
        std::fs::write(run.join("stdout.log"), "a\nprogress 1\rprogress 2\n").unwrap();
        let mut w = Watcher::new(Some(d.path().to_path_buf()), &[]);
        let mut st = RunsState::default();
        st.apply(w.poll());
        assert_eq!(st.runs.len(), 1);
        let t = &st.runs[0];
        assert_eq!(t.kind(), Some("sft"));
        assert_eq!(t.headline(), Some(("loss", 2.0)));
        assert_eq!(t.malformed, 1);
        assert_eq!(t.last_malformed.as_ref().unwrap().line, 2);
        assert_eq!(t.log, vec!["a", "progress 2"]);
        let v = st.version;
        st.apply(w.poll());
        assert_eq!(st.version, v, "nothing changed: no redraw");
        std::fs::write(run.join("stdout.log"), "b\n").unwrap();
        st.apply(w.poll());
        assert_eq!(st.version, v + 1);
        std::fs::remove_dir_all(&run).unwrap();
        st.apply(w.poll());
        let t = &st.runs[0];
        assert!(t.vanished);
        assert_eq!(t.tail, TailState::Vanished);
        assert_eq!(t.info.config.kind.as_deref(), Some("sft"), "kept");
    }
}

//! State every view reads: the dataset, what the background loader found, the
//! annotation log folded, caches of parsed trajectories and decoded screenshots.

use super::theme::Theme;
use super::widgets::screenshot::ImageCache;
use crate::annotate::{AnnotationEvent, AnnotationLog, Folded, Status};
use crate::judge::verdicts::{self, Verdict};
use crate::mine::pair::MinedPair;
use crate::reward::RewardConfig;
use crate::trajectory::jsonl::{self, JsonlFile};
use crate::trajectory::{Dataset, Task, Trajectory, TrajectorySummary};
use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::sync::mpsc::{Receiver, Sender, TryRecvError};

/// What the background loader sends, in this order.
pub enum Loaded {
    /// Tasks and mined pairs (small files, read first).
    Early {
        tasks: HashMap<String, Task>,
        pairs: Vec<MinedPair>,
        /// The standing LLM-judge verdict per trajectory id (`judge/verdicts.jsonl`).
        verdicts: HashMap<String, Verdict>,
        /// Problems found, each naming file, line and field.
        errors: Vec<String>,
    },
    /// The summary of every trajectory (a pass over the whole file).
    Summaries {
        summaries: Vec<Option<TrajectorySummary>>,
        errors: Vec<String>,
    },
}

/// Reads tasks and mined pairs, sends them, then reads every trajectory summary (in
/// parallel) and sends those, then warms the id index. Runs on a background thread.
pub fn load(ds: &Dataset, tx: &Sender<Loaded>) {
    let mut errors = Vec::new();
    let tasks = match ds.tasks() {
        Ok(t) => t.into_iter().map(|t| (t.task_id.clone(), t)).collect(),
        Err(e) => {
            errors.push(e.to_string());
            HashMap::new()
        }
    };
    let mut pairs = Vec::new();
    let pairs_path = ds.root().join("mined").join("pairs.jsonl");
    match JsonlFile::open(&pairs_path) {
        Ok(file) => {
            for i in 0..file.len() {
                match file.get::<MinedPair>(i) {
                    Ok(p) => pairs.push(p),
                    Err(e) => errors.push(e.to_string()),
                }
            }
            if let Some(line) = file.torn_tail() {
                errors.push(format!(
                    "{}:{line}: (record): incomplete last line",
                    pairs_path.display()
                ));
            }
        }
        Err(e) => errors.push(e.to_string()),
    }
    let verdicts = match verdicts::read(ds.root()) {
        Ok(all) => verdicts::standing(&all, None)
            .into_iter()
            .map(|(id, v)| (id.to_string(), v.clone()))
            .collect(),
        Err(e) => {
            errors.push(format!("{e:#}"));
            HashMap::new()
        }
    };
    if tx
        .send(Loaded::Early {
            tasks,
            pairs,
            verdicts,
            errors,
        })
        .is_err()
    {
        return;
    }
    let mut errors = Vec::new();
    let summaries = ds
        .summaries()
        .into_iter()
        .map(|r| r.map_err(|e| errors.push(e.to_string())).ok())
        .collect();
    if tx.send(Loaded::Summaries { summaries, errors }).is_err() {
        return;
    }
    ds.position_of("");
}

/// Whether the latest change reached the disk.
#[derive(Debug, Clone, PartialEq)]
pub enum SaveState {
    /// Nothing changed this session.
    Idle,
    /// The latest event was appended and fsynced at this time (HH:MM:SS).
    Saved(String),
    /// The latest append failed: the change was not made.
    Failed(String),
}

/// Parsed trajectories, most recently used last.
#[derive(Default)]
pub struct TrajectoryCache {
    entries: VecDeque<(usize, Result<Arc<Trajectory>, String>)>,
}

/// How many parsed trajectories are kept.
const TRAJECTORY_CACHE: usize = 8;

impl TrajectoryCache {
    /// Trajectory record `i`, parsed on first use.
    pub fn get(&mut self, ds: &Dataset, i: usize) -> Result<Arc<Trajectory>, String> {
        if let Some(pos) = self.entries.iter().position(|(r, _)| *r == i) {
            let e = self.entries.remove(pos).expect("in range");
            self.entries.push_back(e);
        } else {
            let t = ds.trajectory(i).map(Arc::new).map_err(|e| e.to_string());
            self.entries.push_back((i, t));
            while self.entries.len() > TRAJECTORY_CACHE {
                self.entries.pop_front();
            }
        }
        self.entries.back().expect("just pushed").1.clone()
    }

    /// The trajectory with this id.
    pub fn by_id(&mut self, ds: &Dataset, id: &str) -> Result<Arc<Trajectory>, String> {
        match ds.position_of(id) {
            Some(i) => self.get(ds, i),
            None => Err(format!(
                "no trajectory `{}` in the dataset",
                crate::util::sanitize::clean_line(id)
            )),
        }
    }
}

/// Everything the views share.
pub struct Shared {
    pub dataset: Arc<Dataset>,
    pub annotator: String,
    pub theme: Theme,
    pub images: ImageCache,
    pub trajectories: TrajectoryCache,
    pub tasks: HashMap<String, Task>,
    /// The standing LLM-judge verdict per trajectory id.
    pub verdicts: HashMap<String, Verdict>,
    /// Summaries once the loader has read them all (None before).
    pub summaries: Option<Vec<Option<TrajectorySummary>>>,
    /// Summaries parsed one by one for the rows drawn before the loader is done.
    pub lazy_summaries: HashMap<usize, Option<TrajectorySummary>>,
    pub pairs: Vec<MinedPair>,
    pub pairs_loaded: bool,
    pub load_errors: Vec<String>,
    pub log: AnnotationLog,
    pub folded: Folded,
    pub saved: SaveState,
    pub message: Option<String>,
    /// Trajectory record selected in the Trajectories tab (the Reward tab can use it).
    pub current_trajectory: Option<usize>,
    pub reward_cfg: RewardConfig,
    /// Bumped when loaded data or annotations change (views recompute filters).
    pub version: u64,
    loader: Option<Receiver<Loaded>>,
}

impl Shared {
    /// Shared state over an open dataset; `loader` delivers the background load.
    pub fn new(
        dataset: Arc<Dataset>,
        annotator: String,
        theme: Theme,
        images: ImageCache,
        loader: Receiver<Loaded>,
    ) -> anyhow::Result<Self> {
        let log = AnnotationLog::for_dataset(dataset.root());
        let folded = Folded::new(log.read()?);
        Ok(Shared {
            dataset,
            annotator,
            theme,
            images,
            trajectories: TrajectoryCache::default(),
            tasks: HashMap::new(),
            verdicts: HashMap::new(),
            summaries: None,
            lazy_summaries: HashMap::new(),
            pairs: Vec::new(),
            pairs_loaded: false,
            load_errors: Vec::new(),
            log,
            folded,
            saved: SaveState::Idle,
            message: None,
            current_trajectory: None,
            reward_cfg: RewardConfig::default(),
            version: 0,
            loader: Some(loader),
        })
    }

    /// Takes what the loader has sent so far (with `wait`, blocks until it is done).
    /// Returns true when data arrived.
    pub fn poll_loader(&mut self, wait: bool) -> bool {
        let mut changed = false;
        while let Some(rx) = &self.loader {
            let msg = if wait {
                rx.recv().ok()
            } else {
                match rx.try_recv() {
                    Ok(m) => Some(m),
                    Err(TryRecvError::Empty) => break,
                    Err(TryRecvError::Disconnected) => None,
                }
            };
            changed = true;
            self.version += 1;
            match msg {
                Some(Loaded::Early {
                    tasks,
                    pairs,
                    verdicts,
                    errors,
                }) => {
                    self.tasks = tasks;
                    self.verdicts = verdicts;
                    self.pairs = pairs;
                    self.pairs_loaded = true;
                    self.load_errors.extend(errors);
                }
                Some(Loaded::Summaries { summaries, errors }) => {
                    self.summaries = Some(summaries);
                    self.lazy_summaries.clear();
                    self.load_errors.extend(errors);
                    self.loader = None;
                }
                None => {
                    if self.summaries.is_none() {
                        self.load_errors.push("background loader stopped".into());
                    }
                    self.pairs_loaded = true;
                    self.loader = None;
                }
            }
        }
        changed
    }

    /// Whether the background load is done.
    pub fn loaded(&self) -> bool {
        self.loader.is_none()
    }

    /// Summary of trajectory record `i`: from the full load, or parsed alone now.
    pub fn summary(&mut self, i: usize) -> Option<TrajectorySummary> {
        if let Some(all) = &self.summaries {
            return all.get(i).cloned().flatten();
        }
        let ds = &self.dataset;
        self.lazy_summaries
            .entry(i)
            .or_insert_with(|| {
                let file = ds.trajectories_file();
                let span = file.span(i)?;
                let mut s: TrajectorySummary =
                    jsonl::parse_record(&file.raw(i)?, file.path(), span.line as usize).ok()?;
                s.record = i;
                Some(s)
            })
            .clone()
    }

    /// Number of pairs reviewed (not pending) and the number of pairs.
    pub fn reviewed(&self) -> (usize, usize) {
        let done = self
            .pairs
            .iter()
            .filter(|p| {
                !matches!(
                    self.folded.status(&p.id),
                    Status::Pending | Status::Conflict
                )
            })
            .count();
        (done, self.pairs.len())
    }

    /// Appends one annotation event and folds it in. The status bar says "saved" only
    /// after the append (one locked write + fsync) returned; on failure nothing
    /// changes and the error is shown.
    pub fn annotate(&mut self, event: AnnotationEvent) {
        match self.log.append(&event) {
            Ok(()) => {
                // Refold from the file so events of another workbench on the same
                // dataset are seen too.
                match self.log.read() {
                    Ok(all) => self.folded = Folded::new(all),
                    Err(_) => self.folded.push(event),
                }
                self.saved = SaveState::Saved(chrono::Local::now().format("%H:%M:%S").to_string());
            }
            Err(e) => self.saved = SaveState::Failed(format!("{e:#}")),
        }
        self.version += 1;
    }
}

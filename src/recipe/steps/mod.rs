//! The work of each unit. Collection, curation, evaluation and mining call the
//! library in this process (one browser shared by them, opened on first need);
//! training runs as a child process of this executable (`rmsweb train ...`) writing
//! its run folder under `DIR/runs/`, where the workbench's Runs tab shows it live.

pub mod collect;
pub mod curate;
pub mod evaluate;
pub mod mine;
pub mod model;
pub mod train;

use super::config::RecipeConfig;
use super::layout::Layout;
use super::progress::Progress;
use crate::env::miniwob::resolve_dir;
use crate::env::{ChromeOptions, MiniwobEnv};
use crate::eval::stop::Interrupted;
pub use crate::eval::stop::Stoppable;
use anyhow::{Context, Result};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// What the steps share.
pub struct Ctx<'a> {
    pub cfg: &'a RecipeConfig,
    pub layout: &'a Layout,
    /// The `rmsweb` binary training children run.
    pub exe: &'a Path,
    pub progress: &'a Progress,
    /// Set by SIGINT/SIGTERM: the unit at work winds down and the run ends.
    pub stop: Arc<AtomicBool>,
    env: Option<MiniwobEnv>,
    /// Tabs of the same browser for episodes played side by side (`eval.parallel`),
    /// opened on first need and reused by every evaluation.
    tabs: Vec<MiniwobEnv>,
}

/// What a unit wrote and a summary for its record.
#[derive(Debug, Default)]
pub struct Done {
    pub outputs: Vec<PathBuf>,
    pub summary: serde_json::Value,
}

impl<'a> Ctx<'a> {
    pub fn new(
        cfg: &'a RecipeConfig,
        layout: &'a Layout,
        exe: &'a Path,
        progress: &'a Progress,
        stop: Arc<AtomicBool>,
    ) -> Self {
        Ctx {
            cfg,
            layout,
            exe,
            progress,
            stop,
            env: None,
            tabs: Vec::new(),
        }
    }

    /// The browser on the MiniWoB pages, launched on first use.
    pub fn env(&mut self) -> Result<&mut MiniwobEnv> {
        if self.env.is_none() {
            let dir = resolve_dir(self.cfg.env.miniwob_dir.as_deref());
            let mut chrome = ChromeOptions::default();
            if let Some(exe) = &self.cfg.env.chromium {
                chrome.executable = exe.clone();
            }
            let env = MiniwobEnv::open(&dir, &chrome).with_context(|| {
                "opening the live MiniWoB environment (run `.ci/install-env.sh` to install Chromium and the pages)"
            })?;
            for t in self.cfg.task_names() {
                anyhow::ensure!(
                    env.tasks().contains(&t),
                    "unknown MiniWoB task {t:?} in {} (see `rmsweb miniwob list`)",
                    dir.display()
                );
            }
            self.env = Some(env);
        }
        self.env
            .as_mut()
            .ok_or_else(|| anyhow::anyhow!("no environment"))
    }

    /// `n` tabs of the browser (beside the one [`Self::env`] drives), for episodes
    /// played side by side.
    pub fn tabs(&mut self, n: usize) -> Result<&mut [MiniwobEnv]> {
        while self.tabs.len() < n {
            let tab = self.env()?.open_tab()?;
            self.tabs.push(tab);
        }
        Ok(&mut self.tabs[..n])
    }

    /// Whether a stop was asked for.
    pub fn stopping(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }

    /// Fails when a stop was asked for (so the unit is not recorded as done).
    pub fn check_stop(&self) -> Result<()> {
        if self.stopping() {
            return Err(Interrupted.into());
        }
        Ok(())
    }
}

/// The local model at `checkpoint` as a policy: `temperature`, the recipe's prompt
/// budget and layout (those its samples were flattened with) and `max_new_tokens`.
pub fn local_policy(
    checkpoint: &Path,
    device: &str,
    temperature: f64,
    max_new_tokens: usize,
    flatten: &crate::recipe::config::FlattenSection,
    grounded: bool,
    name: &str,
) -> Result<crate::policy::local::LocalPolicy> {
    let device = crate::model::parse_device(device)?;
    let mut model = crate::model::LocalModelPolicy::from_checkpoint(checkpoint, &device)
        .with_context(|| format!("loading {}", checkpoint.display()))?;
    model.sampling.temperature = temperature;
    model.sampling.max_new_tokens = max_new_tokens;
    let mut p = crate::policy::local::LocalPolicy::new(model, format!("local:{name}"));
    p.prompt.token_budget = flatten.token_budget;
    p.prompt.format = flatten.format;
    p.grounded = grounded;
    Ok(p)
}

/// Who plays a unit's episodes: one policy, or (a local text model, which has a
/// batching engine, with `eval.parallel` above 1) that many clients of one engine,
/// each stopping at the recipe's stop request, each in its own tab.
pub enum Players {
    One(Box<dyn crate::policy::Policy + Send>),
    SideBySide(Vec<Box<dyn crate::policy::Policy + Send>>),
}

impl Players {
    /// `policy` played by `parallel` side by side where it can be.
    pub fn of(
        policy: crate::policy::local::LocalPolicy,
        parallel: usize,
        stop: &Arc<AtomicBool>,
    ) -> Result<Players> {
        // A Qwen3-VL checkpoint has no batching engine: it plays one episode at a time.
        if parallel <= 1 || policy.model.vl.is_some() {
            return Ok(Players::One(Box::new(policy)));
        }
        let clients = policy.batched(parallel, crate::model::engine::EngineOptions::default())?;
        Ok(Players::SideBySide(
            clients
                .into_iter()
                .map(|c| {
                    Box::new(Stoppable {
                        inner: Box::new(c) as Box<dyn crate::policy::Policy + Send>,
                        stop: stop.clone(),
                    }) as Box<dyn crate::policy::Policy + Send>
                })
                .collect(),
        ))
    }
}

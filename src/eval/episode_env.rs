//! The tab an episode is played in, whatever its pages: MiniWoB++ tasks, whose pages
//! score themselves, and live-web tasks ([`WebEnv`]), whose sites do not (an LLM
//! judge scores those after the episode, [`super::judged`]).

use super::miniwob_task;
use crate::env::miniwob::PageReward;
use crate::env::{MiniwobEnv, Observation, WebEnv};
use crate::trajectory::{ActionResult, Task};
use anyhow::Result;

/// What [`super::run_episode`] needs of a browser tab.
pub trait EpisodeEnv {
    /// Loads task `task`'s page for a fresh episode (seeded where its page takes a
    /// seed) and returns the task record.
    fn begin(&mut self, task: &str, seed: u64) -> Result<Task>;
    /// The page as the agent sees it.
    fn observe(&self) -> Result<Observation>;
    /// Executes one action in the page.
    fn execute(&self, action: &crate::action::Action) -> Result<ActionResult>;
    /// The page's own score of the episode; `None` where the site has no checker.
    fn reward(&self) -> Result<Option<PageReward>>;
    /// Whether observations carry a screenshot.
    fn set_screenshots(&mut self, on: bool);
}

/// A boxed tab of either kind, as a command that plays both holds its tabs.
impl<E: EpisodeEnv + ?Sized> EpisodeEnv for Box<E> {
    fn begin(&mut self, task: &str, seed: u64) -> Result<Task> {
        (**self).begin(task, seed)
    }

    fn observe(&self) -> Result<Observation> {
        (**self).observe()
    }

    fn execute(&self, action: &crate::action::Action) -> Result<ActionResult> {
        (**self).execute(action)
    }

    fn reward(&self) -> Result<Option<PageReward>> {
        (**self).reward()
    }

    fn set_screenshots(&mut self, on: bool) {
        (**self).set_screenshots(on)
    }
}

impl EpisodeEnv for MiniwobEnv {
    fn begin(&mut self, task: &str, seed: u64) -> Result<Task> {
        let instruction = self.start_episode(task, seed)?;
        let name = crate::env::miniwob::task_name(task);
        Ok(miniwob_task(
            name,
            seed,
            &crate::util::sanitize::clean_text(&instruction),
        ))
    }

    fn observe(&self) -> Result<Observation> {
        MiniwobEnv::observe(self)
    }

    fn execute(&self, action: &crate::action::Action) -> Result<ActionResult> {
        MiniwobEnv::execute(self, action)
    }

    fn reward(&self) -> Result<Option<PageReward>> {
        MiniwobEnv::reward(self).map(Some)
    }

    fn set_screenshots(&mut self, on: bool) {
        self.screenshots = on;
    }
}

impl EpisodeEnv for WebEnv {
    /// The seed is not used: a live site is what it is.
    fn begin(&mut self, task: &str, _seed: u64) -> Result<Task> {
        WebEnv::begin(self, task)
    }

    fn observe(&self) -> Result<Observation> {
        WebEnv::observe(self)
    }

    fn execute(&self, action: &crate::action::Action) -> Result<ActionResult> {
        WebEnv::execute(self, action)
    }

    fn reward(&self) -> Result<Option<PageReward>> {
        Ok(None)
    }

    fn set_screenshots(&mut self, on: bool) {
        self.screenshots = on;
    }
}

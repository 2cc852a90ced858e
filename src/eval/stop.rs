//! Stopping a live run (evaluation, collection, the recipe) on SIGINT or SIGTERM:
//! the first signal sets a flag, the policy refuses its next step ([`Stoppable`]),
//! the episode at work ends with [`Interrupted`] without being recorded, and the run
//! returns with what it had already written; a second signal ends the process at
//! once.

use crate::policy::{Policy, PolicyInput, PolicyOutput};
use crate::trajectory::Task;
use anyhow::Result;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};

/// A stop was asked for (SIGINT or SIGTERM): the episode at work was not finished
/// and is not recorded.
#[derive(Debug, Clone, Copy)]
pub struct Interrupted;

impl std::fmt::Display for Interrupted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("interrupted (SIGINT or SIGTERM)")
    }
}

impl std::error::Error for Interrupted {}

/// Whether `e` (or a cause of it) is [`Interrupted`].
pub fn is_interrupted(e: &anyhow::Error) -> bool {
    e.downcast_ref::<Interrupted>().is_some() || e.chain().any(|c| c.is::<Interrupted>())
}

/// The exit status of a run ended by a stop (128 + SIGINT, as shells report it).
pub const EXIT_STATUS: u8 = 130;

/// The process's stop flag, once [`on_signals`] set it up.
static FLAG: OnceLock<Arc<AtomicBool>> = OnceLock::new();

/// A flag set by the first SIGINT or SIGTERM; the second ends the process at once
/// (status [`EXIT_STATUS`]). The handlers are installed once per process.
pub fn on_signals() -> Result<Arc<AtomicBool>> {
    if let Some(f) = FLAG.get() {
        return Ok(Arc::clone(f));
    }
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register_conditional_shutdown(
            sig,
            i32::from(EXIT_STATUS),
            Arc::clone(&stop),
        )?;
        signal_hook::flag::register(sig, Arc::clone(&stop))?;
    }
    Ok(Arc::clone(FLAG.get_or_init(|| stop)))
}

/// Whether a stop was asked for (always false before [`on_signals`]).
pub fn requested() -> bool {
    FLAG.get().is_some_and(|f| f.load(Ordering::Relaxed))
}

/// `e` marked [`Interrupted`] when a stop was asked for: a failure that follows a
/// Ctrl-C (the terminal's SIGINT reaches Chromium too) is the stop's doing.
pub fn blame_stop(e: anyhow::Error) -> anyhow::Error {
    if requested() && !is_interrupted(&e) {
        e.context(Interrupted)
    } else {
        e
    }
}

/// An evaluation cut short (see [`super::evaluate`]): the report of the episodes
/// done before, to write out as they are.
#[derive(Debug)]
pub struct CutShort(pub Box<super::EvalReport>);

impl std::fmt::Display for CutShort {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "stopped after {} episodes", self.0.episodes_total)
    }
}

/// A policy (`&mut dyn Policy`, `Box<dyn Policy + Send>`) that refuses to act once
/// a stop is asked for (with [`Interrupted`]), so a collection or evaluation in
/// progress ends at its next step.
pub struct Stoppable<P> {
    pub inner: P,
    pub stop: Arc<AtomicBool>,
}

impl<P> Policy for Stoppable<P>
where
    P: std::ops::DerefMut,
    P::Target: Policy,
{
    fn name(&self) -> String {
        self.inner.name()
    }
    fn reset(&mut self, task: &Task, seed: u64) {
        self.inner.reset(task, seed)
    }
    fn notes(&self) -> Vec<String> {
        self.inner.notes()
    }
    fn act(&mut self, input: &PolicyInput<'_>) -> Result<PolicyOutput> {
        if self.stop.load(Ordering::Relaxed) {
            return Err(Interrupted.into());
        }
        self.inner.act(input)
    }
}

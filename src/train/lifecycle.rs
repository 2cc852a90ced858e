//! The lifecycle every trainer shares; SFT (`sft`) and RL (`rl::trainer`) plug their
//! preparation and steps into it:
//!
//! - a new run is refused in a folder that already holds one, and writes its resolved
//!   config to `run.toml`; a resumed run reads it back ([`reopen`]);
//! - `status.json` says `running` from the start, with the step after each one;
//! - after each step a checkpoint is written on the run's cadence, at the last step,
//!   and when a stop was asked for (SIGTERM from the Runs tab or the recipe), after
//!   which the run ends `stopped`;
//! - any error ends the run `failed`, its message and alerts in `status.json` and
//!   `stdout.log`.

use super::run::{Alert, RunDir, RunState};
use anyhow::{Context, Result};
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

/// How a training call ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Finished,
    Stopped,
}

/// Runs `body` (the trainer's preparation and steps) as a run in `run`: new (refused
/// if the folder holds a run; `config` written to `run.toml`) or resumed. An error
/// from `body` is recorded as the run's failure with the alerts it left.
pub fn run<C: Serialize>(
    run: &RunDir,
    config: &C,
    resume: bool,
    alerts: &mut Vec<Alert>,
    body: impl FnOnce(&mut Vec<Alert>) -> Result<Outcome>,
) -> Result<Outcome> {
    super::cpu_tuning::keep_tensor_memory();
    if !resume {
        run.ensure_new()?;
    }
    let result = start(run, config, resume).and_then(|()| body(alerts));
    if let Err(e) = &result {
        run.record_failure(e, alerts);
    }
    result
}

/// Opens the run in `run_dir` to continue it: its folder and its `run.toml` read
/// with `parse` (errors name the file).
pub fn reopen<C>(run_dir: &Path, parse: impl FnOnce(&str) -> Result<C>) -> Result<(RunDir, C)> {
    let run = RunDir::open(run_dir)?;
    let cfg = parse(&run.read_config()?)
        .with_context(|| format!("{}: invalid run.toml", run_dir.join("run.toml").display()))?;
    Ok((run, cfg))
}

fn start<C: Serialize>(run: &RunDir, config: &C, resume: bool) -> Result<()> {
    if !resume {
        run.write_config(&toml::to_string_pretty(config)?)?;
    }
    run.set_status(RunState::Running, 0, "preparing")
}

/// Where a run is after a step.
pub struct StepDone<'a> {
    pub done: u64,
    pub total: u64,
    /// Checkpoint every this many steps (0: only at the end and on a stop).
    pub checkpoint_every: usize,
    pub stop: &'a AtomicBool,
    pub alerts: &'a [Alert],
}

impl StepDone<'_> {
    /// Writes a checkpoint with `save` when one is due; when a stop was asked for,
    /// ends the run `stopped` after it (`Some(Outcome::Stopped)`: the trainer
    /// returns that). None: go on.
    pub fn checkpoint(
        &self,
        run: &RunDir,
        save: impl FnOnce() -> Result<PathBuf>,
    ) -> Result<Option<Outcome>> {
        let stopping = self.stop.load(Ordering::SeqCst);
        let every = self.checkpoint_every as u64;
        if self.done == self.total || stopping || (every > 0 && self.done.is_multiple_of(every)) {
            let dir = save()?;
            run.log(&format!("checkpoint {}", dir.display()))?;
        }
        if stopping && self.done < self.total {
            run.set_status_with_alerts(
                RunState::Stopped,
                self.done,
                "stopped on signal after a checkpoint",
                self.alerts,
            )?;
            run.log("stopped on signal")?;
            return Ok(Some(Outcome::Stopped));
        }
        Ok(None)
    }
}

/// Ends a run that went through all its steps.
pub fn finish(run: &RunDir, total: u64, alerts: &[Alert]) -> Result<Outcome> {
    run.set_status_with_alerts(RunState::Finished, total, "finished", alerts)?;
    run.log("finished")?;
    Ok(Outcome::Finished)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checkpoints_on_the_cadence_at_the_end_and_on_a_stop() {
        let d = tempfile::tempdir().unwrap();
        let run = RunDir::open(d.path()).unwrap();
        let stop = AtomicBool::new(false);
        let mut saved = Vec::new();
        let step = |done: u64, stop: &AtomicBool, saved: &mut Vec<u64>| {
            let s = StepDone {
                done,
                total: 7,
                checkpoint_every: 3,
                stop,
                alerts: &[],
            };
            s.checkpoint(&run, || {
                saved.push(done);
                Ok(PathBuf::from(format!("step-{done}")))
            })
            .unwrap()
        };
        for done in 1..=7 {
            assert_eq!(step(done, &stop, &mut saved), None);
        }
        assert_eq!(saved, vec![3, 6, 7]);
        // A stop: a checkpoint at once, then the run ends stopped.
        saved.clear();
        stop.store(true, Ordering::SeqCst);
        assert_eq!(step(4, &stop, &mut saved), Some(Outcome::Stopped));
        assert_eq!(saved, vec![4]);
        let st = RunDir::read_status(d.path()).unwrap();
        assert_eq!((st.state, st.step), (RunState::Stopped, 4));
    }

    #[test]
    fn a_new_run_writes_its_config_and_an_error_is_recorded_as_its_failure() {
        let d = tempfile::tempdir().unwrap();
        let run = RunDir::open(d.path()).unwrap();
        let cfg = toml::toml! { kind = "sft" lr = 0.5 };
        let alert = Alert {
            kind: "self_sharpening".into(),
            step: 2,
            message: "quiet".into(),
        };
        let err = super::run(&run, &cfg, false, &mut Vec::new(), |alerts| {
            alerts.push(alert.clone());
            anyhow::bail!("out of memory at step 2")
        })
        .unwrap_err();
        assert!(err.to_string().contains("out of memory"));
        assert!(run.read_config().unwrap().contains("lr = 0.5"));
        let st = RunDir::read_status(d.path()).unwrap();
        assert_eq!(st.state, RunState::Failed);
        assert!(st.message.contains("out of memory"), "{}", st.message);
        assert_eq!(st.alerts, vec![alert]);
        // The folder now holds a run: a second new run is refused, untouched.
        let again = super::run(&run, &cfg, false, &mut Vec::new(), |_| {
            Ok(Outcome::Finished)
        });
        assert!(
            again
                .unwrap_err()
                .to_string()
                .contains("already holds a run")
        );
        assert_eq!(
            RunDir::read_status(d.path()).unwrap().state,
            RunState::Failed
        );
    }
}

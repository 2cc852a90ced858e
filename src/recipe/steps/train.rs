//! Training units as child processes of this executable. The recipe resolves each
//! unit's trainer config here (typed:
//! [`RecipeConfig::sft_config`](crate::recipe::config::RecipeConfig::sft_config),
//! [`RecipeConfig::rl_config`](crate::recipe::config::RecipeConfig::rl_config)), writes it into the run folder as [`CONFIG`] and
//! starts `rmsweb train start CONFIG --run-dir DIR/runs/<name>`, which reads it back
//! whole; stdout and stderr are appended to the run's `stdout.log`, progress is read
//! from its `status.json`.
//!
//! A run folder carries `recipe-unit.json` with the key of the unit that started
//! it. When the recipe runs again with the same key, a finished run is taken as it
//! is, and a stopped or failed one is continued with `rmsweb train resume` from its
//! latest checkpoint; a run of another key (a changed config) is removed first.

use super::collect::latest_checkpoint;
use super::{Ctx, Done};
use crate::recipe::config::Variant;
use crate::recipe::folder::clear;
use crate::recipe::layout::Layout;
use crate::recipe::layout::sft_run_name;
use crate::recipe::plan::{Arm, Unit, rl_run_name};
use crate::runs::info::{parse_status, pid_alive};
use anyhow::{Context, Result, bail};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

/// The marker a recipe leaves in each run folder it starts.
pub const MARKER: &str = "recipe-unit.json";

/// The resolved trainer config the recipe hands a fresh run (the trainer writes the
/// same values to `run.toml`).
pub const CONFIG: &str = "recipe-config.toml";

#[derive(Debug, Serialize, Deserialize)]
struct Marker {
    unit: String,
    key: String,
}

/// What to do with a run folder before (re)starting its unit.
#[derive(Debug, PartialEq, Eq)]
enum Start {
    /// The run finished under this key: nothing to train.
    Finished,
    /// `train resume DIR`.
    Resume,
    /// A fresh run (the folder was removed or never existed).
    Fresh,
}

fn status_state(dir: &Path) -> (Option<String>, Option<u32>) {
    match crate::util::fs::read_record(&dir.join("status.json"))
        .ok()
        .and_then(|t| parse_status(&t).ok())
    {
        Some(s) => (s.state, s.pid),
        None => (None, None),
    }
}

fn prepare(layout: &Layout, dir: &Path, unit: &Unit) -> Result<Start> {
    let marker: Option<Marker> = crate::util::fs::read_record(&dir.join(MARKER))
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok());
    if marker.is_some_and(|m| m.key == unit.key) {
        let (state, pid) = status_state(dir);
        if let (Some("running" | "queued"), Some(pid)) = (state.as_deref(), pid)
            && pid != std::process::id()
            && pid_alive(pid)
        {
            bail!(
                "{} is still being trained (pid {pid}); wait for it or stop it (`kill {pid}`), then run again",
                dir.display()
            );
        }
        if state.as_deref() == Some("finished") && latest_checkpoint(dir).is_ok() {
            return Ok(Start::Finished);
        }
        if dir.join("run.toml").is_file() && latest_checkpoint(dir).is_ok() {
            return Ok(Start::Resume);
        }
    }
    clear(layout, dir)?;
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let m = Marker {
        unit: unit.id.clone(),
        key: unit.key.clone(),
    };
    crate::util::fs::write_atomic(
        &dir.join(MARKER),
        serde_json::to_string_pretty(&m)?.as_bytes(),
    )?;
    Ok(Start::Fresh)
}

/// `step N/M` in a status message.
fn step_of(message: &str) -> Option<(u64, u64)> {
    let rest = message.split("step ").nth(1)?;
    let frac = rest.split_whitespace().next()?;
    let (a, b) = frac.split_once('/')?;
    Some((a.parse().ok()?, b.parse().ok()?))
}

/// The last `n` lines of a run's log, sanitized, for an error message.
fn log_tail(dir: &Path, n: usize) -> String {
    let text = crate::util::fs::read_tail(&dir.join("stdout.log"), 64 << 10).unwrap_or_default();
    let lines: Vec<&str> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    lines[lines.len().saturating_sub(n)..]
        .iter()
        .map(|l| format!("  | {}", crate::util::sanitize::clean_line(l)))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Runs `exe args` with its output in `dir/stdout.log`, showing its progress until
/// it exits; a stop request is passed on as SIGTERM (the trainer checkpoints).
fn run_child(ctx: &Ctx<'_>, unit: &str, dir: &Path, args: &[String]) -> Result<()> {
    let log_path = dir.join("stdout.log");
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&log_path)
        .with_context(|| format!("opening {}", log_path.display()))?;
    let err = log.try_clone()?;
    let mut child = Command::new(ctx.exe)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::from(log))
        .stderr(Stdio::from(err))
        .spawn()
        .with_context(|| format!("starting {}", ctx.exe.display()))?;
    let bar = ctx.progress.unit_bar(unit, 0, "steps");
    let mut signalled = false;
    let status = loop {
        if let Some(s) = child.try_wait()? {
            break s;
        }
        if ctx.stopping() && !signalled {
            signalled = true;
            bar.set_message("stopping: the trainer checkpoints first");
            let _ = crate::runs::launch::stop(child.id());
        }
        if let Ok(text) = crate::util::fs::read_record(&dir.join("status.json"))
            && let Ok(s) = parse_status(&text)
            && !signalled
        {
            let msg = s.message.unwrap_or_default();
            if let Some((n, m)) = step_of(&msg) {
                bar.set_length(m);
                bar.set_position(n);
            }
            bar.set_message(crate::util::sanitize::clean_line(&msg).into_owned());
        }
        std::thread::sleep(Duration::from_millis(250));
    };
    bar.finish_and_clear();
    ctx.check_stop()?;
    let (state, _) = status_state(dir);
    if !status.success() || state.as_deref() != Some("finished") {
        bail!(
            "`rmsweb {}` ended with {status} (run state {}); its log ends:\n{}",
            args.first().map(String::as_str).unwrap_or("train"),
            state.as_deref().unwrap_or("unknown"),
            log_tail(dir, 8)
        );
    }
    Ok(())
}

/// Trains the unit in `dir` with `config` (a trainer config serialized as TOML):
/// taken as it is when finished under this key, resumed when stopped, else started
/// fresh from the config written to [`CONFIG`].
fn train(ctx: &Ctx<'_>, unit: &Unit, dir: &Path, config: &impl Serialize) -> Result<PathBuf> {
    match prepare(ctx.layout, dir, unit)? {
        Start::Finished => {
            ctx.progress.say(&format!(
                "  {}: {} already finished under this config; taken as it is",
                unit.id,
                ctx.layout.relative(dir)
            ));
        }
        Start::Resume => {
            ctx.progress.say(&format!(
                "  {}: resuming {} from its latest checkpoint",
                unit.id,
                ctx.layout.relative(dir)
            ));
            let args = vec!["train".into(), "resume".into(), dir.display().to_string()];
            run_child(ctx, &unit.id, dir, &args)?;
        }
        Start::Fresh => {
            let file = dir.join(CONFIG);
            crate::util::fs::write_atomic(&file, toml::to_string_pretty(config)?.as_bytes())
                .with_context(|| format!("writing {}", file.display()))?;
            let args = vec![
                "train".into(),
                "start".into(),
                file.display().to_string(),
                "--run-dir".into(),
                dir.display().to_string(),
            ];
            run_child(ctx, &unit.id, dir, &args)?;
        }
    }
    latest_checkpoint(dir)
}

fn done(ctx: &Ctx<'_>, dir: &Path, checkpoint: &Path) -> Done {
    let metrics = dir.join("metrics.jsonl");
    Done {
        outputs: vec![
            dir.join("run.toml"),
            dir.join("status.json"),
            checkpoint.to_path_buf(),
        ],
        summary: serde_json::json!({
            "run": ctx.layout.relative(dir),
            "checkpoint": ctx.layout.relative(checkpoint),
            "metrics_lines": crate::util::fs::count_lines(&metrics).unwrap_or(0),
        }),
    }
}

/// SFT on one collection (`runs/sft-<arm>`).
pub fn sft(ctx: &Ctx<'_>, unit: &Unit, arm: Arm) -> Result<Done> {
    let dir = ctx.layout.run(&sft_run_name(arm));
    let model = ctx
        .cfg
        .base_model()?
        .map(|base| base.folder(&ctx.layout.model()));
    let config = ctx
        .cfg
        .sft_config(&ctx.layout.dataset(arm), model.as_deref())
        .context("key `sft`")?;
    let checkpoint = train(ctx, unit, &dir, &config)?;
    Ok(done(ctx, &dir, &checkpoint))
}

/// One RL variant and seed from the reflection collection's SFT run, on the pool.
pub fn rl(ctx: &Ctx<'_>, unit: &Unit, variant: Variant, seed: u64) -> Result<Done> {
    let dir = ctx.layout.run(&rl_run_name(&variant, seed));
    let init = ctx.layout.run(&sft_run_name(Arm::Reflection));
    let config = ctx
        .cfg
        .rl_config(variant, seed, &init, &ctx.layout.pool())
        .context("key `rl`")?;
    let checkpoint = train(ctx, unit, &dir, &config)?;
    let mut d = done(ctx, &dir, &checkpoint);
    d.summary["variant"] = variant.name().into();
    d.summary["seed"] = seed.into();
    Ok(d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_messages_give_the_step() {
        assert_eq!(step_of("step 3/40 loss 1.2"), Some((3, 40)));
        assert_eq!(step_of("step 12/20 reward 0.500"), Some((12, 20)));
        assert_eq!(step_of("preparing"), None);
        assert_eq!(step_of("step x/y"), None);
    }

    #[test]
    fn run_folders_are_kept_resumed_or_replaced_by_key() {
        let d = tempfile::tempdir().unwrap();
        let cfg =
            crate::recipe::config::RecipeConfig::from_toml("tasks = [\"click-button\"]\n").unwrap();
        let units = crate::recipe::plan::plan(&cfg).unwrap();
        let u = units.iter().find(|u| u.id == "sft/reflection").unwrap();
        let layout = Layout::new(crate::recipe::folder::prepare(&d.path().join("r")).unwrap());
        let dir = layout.run("sft-reflection");
        // Nothing there: fresh, with the marker.
        assert_eq!(prepare(&layout, &dir, u).unwrap(), Start::Fresh);
        assert!(dir.join(MARKER).is_file());
        // A stopped run with a checkpoint under the same key: resumed.
        std::fs::write(dir.join("run.toml"), "kind = \"sft\"\n").unwrap();
        let ck = dir.join("checkpoints/step-5");
        std::fs::create_dir_all(&ck).unwrap();
        std::fs::write(ck.join("trainer_state.json"), "{}").unwrap();
        std::fs::write(
            dir.join("status.json"),
            r#"{"state": "stopped", "pid": 1, "step": 5}"#,
        )
        .unwrap();
        assert_eq!(prepare(&layout, &dir, u).unwrap(), Start::Resume);
        // Finished: taken as it is.
        std::fs::write(
            dir.join("status.json"),
            r#"{"state": "finished", "pid": 1, "step": 9}"#,
        )
        .unwrap();
        assert_eq!(prepare(&layout, &dir, u).unwrap(), Start::Finished);
        // Said running by a live process: refused, the folder left alone.
        let mut other_process = Command::new("sleep").arg("30").spawn().unwrap();
        std::fs::write(
            dir.join("status.json"),
            format!(
                r#"{{"state": "running", "pid": {}, "step": 9}}"#,
                other_process.id()
            ),
        )
        .unwrap();
        let e = prepare(&layout, &dir, u).unwrap_err().to_string();
        other_process.kill().unwrap();
        other_process.wait().unwrap();
        assert!(e.contains("still being trained"), "{e}");
        assert!(dir.join("run.toml").is_file());
        // Its process gone (a killed trainer): resumed from the checkpoint.
        assert_eq!(prepare(&layout, &dir, u).unwrap(), Start::Resume);
        // Another key: the folder is replaced.
        let other = units.iter().find(|x| x.id == "sft/baseline").unwrap();
        assert_eq!(prepare(&layout, &dir, other).unwrap(), Start::Fresh);
        assert!(!dir.join("run.toml").exists());
    }
}

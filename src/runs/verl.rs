//! verl runs in a run folder (`rmsweb verl run`): the export's `run.sh` started as a
//! child of a small supervisor that keeps the folder in rmsweb's format, so the Runs
//! tab lists, watches, stops and resumes a verl run like its own.
//!
//! ```text
//! runs/verl-<time>/
//!   run.toml             kind = "verl", the export, nodes, GPUs per node, Ray address, ...
//!   status.json          the supervisor's state, pid, attempt and message
//!   metrics.jsonl        → metrics.attempt-N.jsonl (a symlink to the latest attempt)
//!   metrics.attempt-N.jsonl  verl's file logger of attempt N ($VERL_FILE_LOGGER_PATH)
//!   stdout.log           the supervisor's and verl's output
//!   checkpoints/         verl's checkpoints (trainer.default_local_dir), resumed from
//!   rollouts-dump/       verl's rollout dump (trainer.rollout_data_dir)
//! ```
//!
//! verl opens its metrics file with "wb", so a relaunch would truncate the previous
//! attempt: each attempt gets its own file and `metrics.jsonl` points at the latest
//! (the tail notices the new file as a rewrite). Until verl creates it the tab says
//! "waiting for verl to start". SIGTERM (the tab's `s`) is passed on to verl's
//! process group and the run ends `stopped`; verl's exit code decides `finished` or
//! `failed`.

use crate::train::run::{RunDir, RunState};
use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// What to launch: an export folder (`rmsweb export verl`) and where to run it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VerlSpec {
    /// Always `verl`.
    pub kind: String,
    /// The export folder (holds `run.sh` and `salvage_ds.yaml`).
    pub export: PathBuf,
    pub nodes: u32,
    pub gpus_per_node: u32,
    /// A running Ray cluster's head (`HOST:PORT`); needed for more than one node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ray_address: Option<String>,
    /// The SFT-merged checkpoint (`MODEL`); none leaves it to the environment.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<PathBuf>,
    pub mode: String,
    /// More Hydra overrides (`key=value`).
    #[serde(default)]
    pub overrides: Vec<String>,
    /// The interpreter with verl and rmsweb_verl (`PYTHON`); none: `python3`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub python: Option<String>,
}

impl Default for VerlSpec {
    fn default() -> Self {
        VerlSpec {
            kind: "verl".into(),
            export: PathBuf::new(),
            nodes: 1,
            gpus_per_node: 8,
            ray_address: None,
            model: None,
            mode: "salvage-ds".into(),
            overrides: Vec::new(),
            python: None,
        }
    }
}

impl VerlSpec {
    /// Checks the fields before anything starts; errors name the field.
    pub fn validate(&self) -> Result<()> {
        anyhow::ensure!(self.kind == "verl", "kind `{}`: expected verl", self.kind);
        anyhow::ensure!(
            self.export.join("run.sh").is_file(),
            "export: {} has no run.sh (make one with `rmsweb export verl DATASET --out DIR`)",
            self.export.display()
        );
        anyhow::ensure!(self.nodes >= 1, "nodes: at least 1");
        anyhow::ensure!(self.gpus_per_node >= 1, "gpus per node: at least 1");
        if self.nodes > 1 {
            anyhow::ensure!(
                self.ray_address
                    .as_deref()
                    .is_some_and(|a| !a.trim().is_empty()),
                "ray address: {} nodes need a running Ray cluster's HOST:PORT",
                self.nodes
            );
        }
        if let Some(a) = &self.ray_address {
            anyhow::ensure!(
                !a.chars().any(char::is_whitespace),
                "ray address `{a}`: no spaces"
            );
        }
        anyhow::ensure!(
            crate::train::rl::groups::Mode::from_name(&self.mode).is_some(),
            "mode `{}`: use one of {}",
            crate::util::sanitize::excerpt(&self.mode),
            crate::train::rl::groups::Mode::names(", ")
        );
        if let Some(bad) = self.overrides.iter().find(|o| !o.contains('=')) {
            anyhow::bail!("overrides: `{bad}` is not key=value");
        }
        Ok(())
    }

    /// The `rmsweb` arguments that run this spec in `run_dir`.
    pub fn args(&self, run_dir: &Path) -> Vec<String> {
        let mut a = vec![
            "verl".into(),
            "run".into(),
            self.export.display().to_string(),
            "--run-dir".into(),
            run_dir.display().to_string(),
            "--nodes".into(),
            self.nodes.to_string(),
            "--gpus-per-node".into(),
            self.gpus_per_node.to_string(),
            "--mode".into(),
            self.mode.clone(),
        ];
        if let Some(r) = &self.ray_address {
            a.extend(["--ray-address".into(), r.clone()]);
        }
        if let Some(m) = &self.model {
            a.extend(["--model".into(), m.display().to_string()]);
        }
        if let Some(p) = &self.python {
            a.extend(["--python".into(), p.clone()]);
        }
        if !self.overrides.is_empty() {
            a.push("--".into());
            a.extend(self.overrides.iter().cloned());
        }
        a
    }
}

/// The metrics file of attempt `n`.
pub fn attempt_file(run_dir: &Path, n: u32) -> PathBuf {
    run_dir.join(format!("metrics.attempt-{n}.jsonl"))
}

/// The attempts made so far in `run_dir` (the highest `metrics.attempt-N.jsonl`).
pub fn attempts(run_dir: &Path) -> u32 {
    let Ok(rd) = std::fs::read_dir(run_dir) else {
        return 0;
    };
    rd.filter_map(Result::ok)
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            name.strip_prefix("metrics.attempt-")?
                .strip_suffix(".jsonl")?
                .parse::<u32>()
                .ok()
        })
        .max()
        .unwrap_or(0)
}

/// Points `metrics.jsonl` at attempt `n`'s file (replacing the link atomically).
fn link_metrics(run_dir: &Path, n: u32) -> Result<()> {
    let target = format!("metrics.attempt-{n}.jsonl");
    let tmp = run_dir.join(format!(".metrics.jsonl.{}", std::process::id()));
    let _ = std::fs::remove_file(&tmp);
    std::os::unix::fs::symlink(&target, &tmp)
        .with_context(|| format!("linking {}", tmp.display()))?;
    std::fs::rename(&tmp, run_dir.join("metrics.jsonl"))
        .with_context(|| format!("linking {}/metrics.jsonl", run_dir.display()))
}

/// Reads the spec a run folder was started with.
pub fn read_spec(run_dir: &Path) -> Result<VerlSpec> {
    let p = run_dir.join("run.toml");
    let text = std::fs::read_to_string(&p).with_context(|| format!("reading {}", p.display()))?;
    toml::from_str(&text).with_context(|| format!("{}: not a verl run", p.display()))
}

/// `bash run.sh` of the export with the run's checkpoint and rollout folders, the
/// spec's overrides, and the environment run.sh reads (metrics file, nodes, GPUs,
/// mode, and Ray, model and Python when set), in a process group of its own.
fn verl_command(
    spec: &VerlSpec,
    export: &Path,
    abs: &Path,
    metrics: &Path,
) -> std::process::Command {
    let mut cmd = std::process::Command::new("bash");
    cmd.arg(export.join("run.sh"))
        .arg(format!(
            "trainer.default_local_dir={}",
            abs.join("checkpoints").display()
        ))
        .arg(format!(
            "trainer.rollout_data_dir={}",
            abs.join("rollouts-dump").display()
        ))
        .args(&spec.overrides)
        .env("VERL_FILE_LOGGER_PATH", metrics)
        .env("NODES", spec.nodes.to_string())
        .env("GPUS_PER_NODE", spec.gpus_per_node.to_string())
        .env("MODE", &spec.mode)
        .stdin(std::process::Stdio::null())
        .process_group(0);
    if let Some(r) = &spec.ray_address {
        cmd.env("RAY_ADDRESS", r);
    }
    if let Some(m) = &spec.model {
        cmd.env("MODEL", m);
    }
    if let Some(p) = &spec.python {
        cmd.env("PYTHON", p);
    }
    cmd
}

/// Waits for verl; the first stop request sends its process group SIGTERM. Returns
/// its exit status and whether it was asked to stop.
fn wait_stoppable(
    child: &mut std::process::Child,
    stop: &AtomicBool,
    run: &RunDir,
) -> Result<(std::process::ExitStatus, bool)> {
    let pgid = child.id() as libc::pid_t;
    let mut signalled = false;
    let status = loop {
        if let Some(s) = child.try_wait()? {
            break s;
        }
        if stop.load(Ordering::Relaxed) && !signalled {
            signalled = true;
            // SAFETY: kill has no memory effects; the group is the child's own.
            unsafe { libc::kill(-pgid, libc::SIGTERM) };
            run.set_status(RunState::Running, 0, "stop requested: SIGTERM sent to verl")?;
        }
        std::thread::sleep(std::time::Duration::from_millis(200));
    };
    Ok((status, signalled))
}

/// Runs a new attempt of `spec` in `run_dir` and waits for it; returns verl's exit
/// code (the supervisor's status says finished, failed or stopped).
pub fn run(spec: &VerlSpec, run_dir: &Path) -> Result<i32> {
    spec.validate()?;
    let run = RunDir::open(run_dir)?;
    let export = spec
        .export
        .canonicalize()
        .with_context(|| format!("export: {}", spec.export.display()))?;
    let spec = VerlSpec {
        export: export.clone(),
        ..spec.clone()
    };
    run.write_config(&toml::to_string(&spec)?)?;
    let attempt = attempts(run_dir) + 1;
    let metrics = attempt_file(&std::path::absolute(run_dir)?, attempt);
    link_metrics(run_dir, attempt)?;
    let mut cmd = verl_command(&spec, &export, &std::path::absolute(run_dir)?, &metrics);
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGTERM, signal_hook::consts::SIGINT] {
        signal_hook::flag::register(sig, Arc::clone(&stop))
            .context("installing signal handlers")?;
    }
    let msg = format!(
        "attempt {attempt}: verl on {} node(s) × {} GPU(s), mode {}",
        spec.nodes, spec.gpus_per_node, spec.mode
    );
    run.set_status(
        RunState::Running,
        0,
        &format!("{msg}; waiting for verl to start"),
    )?;
    println!("rmsweb verl run: {msg}; metrics in {}", metrics.display());
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => {
            let e = anyhow::Error::new(e).context("starting bash run.sh");
            run.set_status(RunState::Failed, 0, &format!("{e:#}"))?;
            return Err(e);
        }
    };
    let (status, signalled) = wait_stoppable(&mut child, &stop, &run)?;
    let code = status.code().unwrap_or(-1);
    let (state, text) = if signalled {
        (RunState::Stopped, format!("attempt {attempt} stopped"))
    } else if code == 0 {
        (RunState::Finished, format!("attempt {attempt} finished"))
    } else {
        (
            RunState::Failed,
            format!("attempt {attempt}: verl exited with code {code} (stdout.log says why)"),
        )
    };
    run.set_status(state, 0, &text)?;
    println!("rmsweb verl run: {text}");
    Ok(code)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spec_round_trips_and_validates_by_field() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join("run.sh"), "exit 0\n").unwrap();
        let spec = VerlSpec {
            export: d.path().to_path_buf(),
            nodes: 2,
            ray_address: Some("10.1.2.3:6379".into()),
            overrides: vec!["trainer.total_training_steps=5".into()],
            ..Default::default()
        };
        spec.validate().unwrap();
        let back: VerlSpec = toml::from_str(&toml::to_string(&spec).unwrap()).unwrap();
        assert_eq!(back, spec);
        let a = spec.args(Path::new("runs/verl-1")).join(" ");
        assert!(a.starts_with("verl run "), "{a}");
        assert!(
            a.contains("--nodes 2 --gpus-per-node 8 --mode salvage-ds --ray-address 10.1.2.3:6379")
        );
        assert!(a.ends_with("-- trainer.total_training_steps=5"), "{a}");
        let no_ray = VerlSpec {
            ray_address: None,
            ..spec.clone()
        };
        assert!(
            no_ray
                .validate()
                .unwrap_err()
                .to_string()
                .starts_with("ray address")
        );
        let bad = VerlSpec {
            mode: "ppo".into(),
            ..spec.clone()
        };
        assert!(bad.validate().unwrap_err().to_string().starts_with("mode"));
        let missing = VerlSpec {
            export: d.path().join("nope"),
            ..spec
        };
        assert!(
            missing
                .validate()
                .unwrap_err()
                .to_string()
                .starts_with("export")
        );
    }

    #[test]
    fn attempts_count_the_metrics_files() {
        let d = tempfile::tempdir().unwrap();
        assert_eq!(attempts(d.path()), 0);
        std::fs::write(attempt_file(d.path(), 1), "").unwrap();
        std::fs::write(attempt_file(d.path(), 3), "").unwrap();
        std::fs::write(d.path().join("metrics.attempt-x.jsonl"), "").unwrap();
        assert_eq!(attempts(d.path()), 3);
        link_metrics(d.path(), 3).unwrap();
        link_metrics(d.path(), 4).unwrap();
        let target = std::fs::read_link(d.path().join("metrics.jsonl")).unwrap();
        assert_eq!(target, PathBuf::from("metrics.attempt-4.jsonl"));
    }
}

//! Starting and signalling training runs. A launched run is a detached process:
//! its own session and process group (so closing the workbench, or a Ctrl-C in
//! its terminal, does not reach it), stdin from /dev/null, stdout and stderr
//! appended to the run's `stdout.log`. Stop is SIGTERM (the trainer checkpoints
//! and writes `stopped`), kill is SIGKILL, resume runs `rmsweb train resume DIR`.

use crate::train::rl::groups::Mode;
use anyhow::{Context, Result};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

/// What to launch (the launch form's fields).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct LaunchSpec {
    /// `sft` or `rl`.
    pub kind: String,
    pub preset: String,
    pub dataset: PathBuf,
    /// Optimizer steps (`--steps`); none keeps the preset's.
    pub steps: Option<u64>,
    /// Learning rate (`--set lr=`); none keeps the preset's.
    pub lr: Option<f64>,
    /// RL mode (`--mode`): salvage-ds, anchor-free, dapo, grpo.
    pub mode: Option<String>,
    /// RL: the SFT run to start from (`--init`); SFT: a base model folder (`--model`).
    pub init: Option<PathBuf>,
    /// Further `key=value` config overrides (`--set`).
    pub sets: Vec<String>,
}

impl LaunchSpec {
    /// Checks the fields before anything is started.
    pub fn validate(&self) -> Result<()> {
        anyhow::ensure!(
            self.kind == "sft" || self.kind == "rl",
            "kind `{}`: use sft or rl",
            self.kind
        );
        anyhow::ensure!(!self.preset.trim().is_empty(), "preset: required");
        anyhow::ensure!(!self.dataset.as_os_str().is_empty(), "dataset: required");
        anyhow::ensure!(self.steps != Some(0), "steps: must be positive");
        if let Some(lr) = self.lr {
            anyhow::ensure!(lr.is_finite() && lr > 0.0, "lr: must be a positive number");
        }
        if let Some(m) = &self.mode {
            anyhow::ensure!(
                Mode::from_name(m).is_some(),
                "mode `{}`: use one of {}",
                crate::util::sanitize::excerpt(m),
                Mode::names(", ")
            );
        }
        Ok(())
    }

    /// The `rmsweb` arguments that start this run in `run_dir`:
    /// `train sft --preset P --dataset D --run-dir R [--steps N] [--set lr=X]
    /// [--model INIT]` or `train rl --preset P --dataset D --run-dir R [--mode M]
    /// [--init INIT] [--steps N] [--set lr=X]`, then every extra `--set`.
    pub fn args(&self, run_dir: &Path) -> Vec<String> {
        let mut a: Vec<String> = vec![
            "train".into(),
            self.kind.clone(),
            "--preset".into(),
            self.preset.clone(),
            "--dataset".into(),
            self.dataset.display().to_string(),
            "--run-dir".into(),
            run_dir.display().to_string(),
        ];
        if self.kind == "rl"
            && let Some(m) = &self.mode
        {
            a.extend(["--mode".into(), m.clone()]);
        }
        if let Some(init) = &self.init {
            let flag = if self.kind == "rl" {
                "--init"
            } else {
                "--model"
            };
            a.extend([flag.into(), init.display().to_string()]);
        }
        if let Some(s) = self.steps {
            a.extend(["--steps".into(), s.to_string()]);
        }
        if let Some(lr) = self.lr {
            a.extend(["--set".into(), format!("lr={lr:e}")]);
        }
        for s in &self.sets {
            a.extend(["--set".into(), s.clone()]);
        }
        a
    }
}

/// Starts runs with a given `rmsweb` binary and reaps the ones it started (so a
/// finished child is never left a zombie that looks alive).
#[derive(Debug)]
pub struct Launcher {
    binary: PathBuf,
    children: Vec<Launched>,
}

/// A process this launcher started, in the folder it logs to.
#[derive(Debug)]
struct Launched {
    dir: PathBuf,
    child: Child,
    /// Its exit code once reaped (`-1`: killed by a signal).
    exit: Option<i32>,
}

/// What the launcher knows of the last process it started in a folder.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChildState {
    Running,
    /// Exited with this code (`-1`: killed by a signal).
    Exited(i32),
}

/// Exited children remembered for [`Launcher::child_state`].
const KEEP_EXITED: usize = 64;

impl Launcher {
    /// A launcher running `binary`.
    pub fn new(binary: impl Into<PathBuf>) -> Self {
        Launcher {
            binary: binary.into(),
            children: Vec::new(),
        }
    }

    /// A launcher running this very executable (the workbench is `rmsweb`).
    pub fn current_exe() -> Result<Self> {
        Ok(Self::new(
            std::env::current_exe().context("finding the rmsweb binary")?,
        ))
    }

    /// The binary it runs.
    pub fn binary(&self) -> &Path {
        &self.binary
    }

    /// A new run folder `runs_root/<kind>-<UTC time>` (with `-2`, `-3`, ... when
    /// taken), created empty.
    pub fn new_run_dir(runs_root: &Path, kind: &str) -> Result<PathBuf> {
        std::fs::create_dir_all(runs_root)
            .with_context(|| format!("creating {}", runs_root.display()))?;
        let base = format!("{kind}-{}", chrono::Utc::now().format("%Y%m%d-%H%M%S"));
        for n in 1..1000 {
            let name = if n == 1 {
                base.clone()
            } else {
                format!("{base}-{n}")
            };
            let dir = runs_root.join(name);
            match std::fs::create_dir(&dir) {
                Ok(()) => return Ok(dir),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
                Err(e) => {
                    return Err(e).with_context(|| format!("creating {}", dir.display()));
                }
            }
        }
        anyhow::bail!("no free run folder name under {}", runs_root.display())
    }

    /// Launches `spec` into a new folder under `runs_root`; returns the folder and pid.
    pub fn launch(&mut self, spec: &LaunchSpec, runs_root: &Path) -> Result<(PathBuf, u32)> {
        spec.validate()?;
        let dir = Self::new_run_dir(runs_root, &spec.kind)?;
        let pid = self.spawn(&spec.args(&dir), &dir)?;
        Ok((dir, pid))
    }

    /// Resumes the run in `dir` from its latest checkpoint (`rmsweb train resume DIR`;
    /// for a verl run, `rmsweb verl resume DIR`: a new attempt).
    pub fn resume(&mut self, dir: &Path) -> Result<u32> {
        let verl = std::fs::read_to_string(dir.join("run.toml"))
            .ok()
            .and_then(|t| super::info::parse_config(&t).ok())
            .and_then(|c| c.kind)
            .is_some_and(|k| k == "verl");
        let cmd = if verl { "verl" } else { "train" };
        let args = vec![cmd.into(), "resume".into(), dir.display().to_string()];
        self.spawn(&args, dir)
    }

    /// Launches a verl run (`rmsweb verl run`) into a new folder `verl-<time>` under
    /// `runs_root`; returns the folder and the supervisor's pid.
    pub fn launch_verl(
        &mut self,
        spec: &super::verl::VerlSpec,
        runs_root: &Path,
    ) -> Result<(PathBuf, u32)> {
        spec.validate()?;
        let dir = Self::new_run_dir(runs_root, "verl")?;
        let pid = self.spawn(&spec.args(&dir), &dir)?;
        Ok((dir, pid))
    }

    /// Spawns `binary args` detached, logging into `dir/stdout.log`.
    pub fn spawn(&mut self, args: &[String], dir: &Path) -> Result<u32> {
        self.reap();
        let log_path = dir.join("stdout.log");
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log_path)
            .with_context(|| format!("opening {}", log_path.display()))?;
        let err = log.try_clone()?;
        let mut cmd = Command::new(&self.binary);
        cmd.args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::from(log))
            .stderr(Stdio::from(err));
        // SAFETY: setsid is async-signal-safe and touches no memory of the parent.
        unsafe {
            cmd.pre_exec(|| {
                if libc::setsid() < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        // A binary just written (a fresh build) can be briefly "text file busy"
        // while another thread's fork still holds it open for writing: retry.
        let mut tries = 0;
        let child = loop {
            match cmd.spawn() {
                Err(e) if e.raw_os_error() == Some(libc::ETXTBSY) && tries < 20 => {
                    tries += 1;
                    std::thread::sleep(std::time::Duration::from_millis(25));
                }
                r => break r.with_context(|| format!("starting {}", self.binary.display()))?,
            }
        };
        let pid = child.id();
        self.children.push(Launched {
            dir: dir.to_path_buf(),
            child,
            exit: None,
        });
        Ok(pid)
    }

    /// Collects the exit status of children that ended; returns how many are running.
    pub fn reap(&mut self) -> usize {
        for l in self.children.iter_mut().filter(|l| l.exit.is_none()) {
            if let Ok(Some(status)) = l.child.try_wait() {
                l.exit = Some(status.code().unwrap_or(-1));
            }
        }
        let exited = self.children.iter().filter(|l| l.exit.is_some()).count();
        if exited > KEEP_EXITED {
            let mut excess = exited - KEEP_EXITED;
            self.children.retain(|l| {
                let old = l.exit.is_some() && excess > 0;
                excess -= usize::from(old);
                !old
            });
        }
        self.children.iter().filter(|l| l.exit.is_none()).count()
    }

    /// The state of the latest process started in `dir`, if this launcher started one.
    pub fn child_state(&self, dir: &Path) -> Option<ChildState> {
        let l = self.children.iter().rev().find(|l| l.dir == dir)?;
        Some(match l.exit {
            None => ChildState::Running,
            Some(code) => ChildState::Exited(code),
        })
    }
}

/// Sends `signal` to process `pid`.
fn signal(pid: u32, sig: libc::c_int) -> Result<()> {
    let p = libc::pid_t::try_from(pid).ok().filter(|p| *p > 0);
    let p = p.ok_or_else(|| anyhow::anyhow!("invalid pid {pid}"))?;
    // SAFETY: kill has no memory effects; the pid was checked to be positive.
    if unsafe { libc::kill(p, sig) } != 0 {
        return Err(std::io::Error::last_os_error())
            .with_context(|| format!("signalling pid {pid}"));
    }
    Ok(())
}

/// Asks the run to stop (SIGTERM): it checkpoints and writes `stopped`.
pub fn stop(pid: u32) -> Result<()> {
    signal(pid, libc::SIGTERM)
}

/// Kills the run at once (SIGKILL); its status stays `running` and shows as dead.
pub fn kill(pid: u32) -> Result<()> {
    signal(pid, libc::SIGKILL)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn args_follow_the_cli() {
        let spec = LaunchSpec {
            kind: "rl".into(),
            preset: "tiny".into(),
            dataset: "fixtures".into(),
            steps: Some(20),
            lr: Some(1e-5),
            mode: Some("dapo".into()),
            init: Some("runs/sft-1".into()),
            sets: vec!["seed=3".into()],
        };
        spec.validate().unwrap();
        let a = spec.args(Path::new("runs/rl-1")).join(" ");
        assert_eq!(
            a,
            "train rl --preset tiny --dataset fixtures --run-dir runs/rl-1 --mode dapo \
             --init runs/sft-1 --steps 20 --set lr=1e-5 --set seed=3"
        );
        let bad = LaunchSpec {
            mode: Some("ppo".into()),
            ..spec.clone()
        };
        assert!(bad.validate().unwrap_err().to_string().contains("mode"));
        let bad = LaunchSpec {
            kind: "x".into(),
            ..spec
        };
        assert!(bad.validate().is_err());
    }

    #[test]
    fn spawned_process_is_detached_and_logs() {
        let d = tempfile::tempdir().unwrap();
        let mut l = Launcher::new("/bin/sh");
        let pid = l
            .spawn(
                &[
                    "-c".into(),
                    "echo out; echo err >&2; cut -d' ' -f6 /proc/$$/stat; read x; echo read=$x"
                        .into(),
                ],
                d.path(),
            )
            .unwrap();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        assert_eq!(l.child_state(d.path()), Some(ChildState::Running));
        while l.reap() > 0 && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        assert_eq!(l.child_state(d.path()), Some(ChildState::Exited(0)));
        assert_eq!(l.child_state(Path::new("/elsewhere")), None);
        let log = std::fs::read_to_string(d.path().join("stdout.log")).unwrap();
        assert!(log.contains("out") && log.contains("err"), "{log}");
        assert!(
            log.contains("read=\n") || log.ends_with("read="),
            "stdin is empty: {log}"
        );
        // Its own session: the session id is its pid.
        assert!(log.contains(&pid.to_string()), "{log}");
        assert!(stop(0).is_err());
    }
}

//! Run folders (`runs/<id>/`, FORMATS.md): resolved config, atomically updated
//! status, metrics lines in verl's file-logger format, the process log, checkpoints.

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};
use std::io::Write;
use std::path::{Path, PathBuf};

/// Lifecycle of a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RunState {
    Queued,
    Running,
    Finished,
    Failed,
    Stopped,
}

/// `status.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Status {
    pub state: RunState,
    pub pid: u32,
    /// RFC 3339.
    pub started: String,
    /// RFC 3339.
    pub updated: String,
    pub step: u64,
    /// The steps the run will take in all, once the trainer knows it (absent in
    /// older files and while preparing): the Runs tab's ETA.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total_steps: Option<u64>,
    pub message: String,
    /// Training-dynamics alerts raised so far (RL's self-sharpening detector); absent
    /// in older files and when there are none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub alerts: Vec<Alert>,
}

/// An alert in `status.json`: `{"kind": "self_sharpening", "step": N, "message": "..."}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Alert {
    pub kind: String,
    pub step: u64,
    pub message: String,
}

/// Drops the lines of a `{"step": N, ...}` JSON Lines file after `step`, and
/// everything from the first unparsable (torn) line on; a missing file is left be.
pub fn truncate_steps_after(path: &Path, step: u64) -> Result<()> {
    let Ok(text) = std::fs::read_to_string(path) else {
        return Ok(());
    };
    let mut keep = String::new();
    for line in text.lines() {
        let Ok(v) = serde_json::from_str::<serde_json::Value>(line) else {
            break;
        };
        if v.get("step")
            .and_then(|s| s.as_u64())
            .is_some_and(|s| s <= step)
        {
            keep.push_str(line);
            keep.push('\n');
        }
    }
    crate::util::fs::write_atomic(path, keep.as_bytes())
}

/// Reads a checkpoint's `trainer_state.json` (each trainer has its own shape).
pub fn read_trainer_state<T: serde::de::DeserializeOwned>(dir: &Path) -> Result<T> {
    serde_json::from_str(
        &std::fs::read_to_string(dir.join("trainer_state.json"))
            .with_context(|| format!("reading {}", dir.display()))?,
    )
    .with_context(|| format!("{}: invalid trainer_state.json", dir.display()))
}

/// Writes a checkpoint's trainable tensors and optimizer state
/// (`trainable.safetensors`, `optimizer.safetensors`).
pub fn save_trainable_and_optimizer(
    dir: &Path,
    vars: &[(String, candle_core::Var)],
    opt: &super::optim::AdamW,
) -> Result<()> {
    let trainable: std::collections::HashMap<String, candle_core::Tensor> = vars
        .iter()
        .map(|(n, v)| (n.clone(), v.as_tensor().clone()))
        .collect();
    crate::model::weights::save_file(&trainable, &dir.join("trainable.safetensors"))?;
    crate::model::weights::save_file(&opt.state_tensors(), &dir.join("optimizer.safetensors"))?;
    Ok(())
}

/// Reads back what [`save_trainable_and_optimizer`] wrote: the optimizer state goes
/// into `opt` (at its step `t`), the trainable tensors are returned for the model.
pub fn load_trainable_and_optimizer(
    dir: &Path,
    device: &candle_core::Device,
    opt: &mut super::optim::AdamW,
    t: u64,
) -> Result<std::collections::HashMap<String, candle_core::Tensor>> {
    let params = crate::model::weights::load_file(&dir.join("trainable.safetensors"), device)?;
    let ost = crate::model::weights::load_file(&dir.join("optimizer.safetensors"), device)?;
    opt.load_state(&ost, t)?;
    Ok(params)
}

/// A run folder.
#[derive(Debug, Clone)]
pub struct RunDir {
    root: PathBuf,
    started: String,
    total_steps: std::sync::OnceLock<u64>,
}

fn now() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

impl RunDir {
    /// Creates (or reopens) the folder and its `checkpoints/`.
    pub fn open(root: impl Into<PathBuf>) -> Result<Self> {
        let root = root.into();
        std::fs::create_dir_all(root.join("checkpoints"))
            .with_context(|| format!("creating run folder {}", root.display()))?;
        let started = Self::read_status(&root)
            .ok()
            .map_or_else(now, |s| s.started);
        Ok(RunDir {
            root,
            started,
            total_steps: std::sync::OnceLock::new(),
        })
    }

    /// Records how many steps the run takes in all; every later `status.json`
    /// carries it (the first value stands).
    pub fn set_total_steps(&self, total: u64) {
        let _ = self.total_steps.set(total);
    }

    /// The folder.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Writes `run.toml`.
    pub fn write_config(&self, toml_text: &str) -> Result<()> {
        crate::util::fs::write_atomic(&self.root.join("run.toml"), toml_text.as_bytes())
    }

    /// Reads `run.toml`.
    pub fn read_config(&self) -> Result<String> {
        let p = self.root.join("run.toml");
        std::fs::read_to_string(&p).with_context(|| format!("reading {}", p.display()))
    }

    /// Replaces `status.json` atomically.
    pub fn set_status(&self, state: RunState, step: u64, message: &str) -> Result<()> {
        self.set_status_with_alerts(state, step, message, &[])
    }

    /// Replaces `status.json` atomically, listing `alerts`.
    pub fn set_status_with_alerts(
        &self,
        state: RunState,
        step: u64,
        message: &str,
        alerts: &[Alert],
    ) -> Result<()> {
        let s = Status {
            alerts: alerts
                .iter()
                .map(|a| Alert {
                    kind: crate::util::sanitize::clean_line(&a.kind).into_owned(),
                    step: a.step,
                    message: crate::util::sanitize::clean_line(&a.message).into_owned(),
                })
                .collect(),
            state,
            pid: std::process::id(),
            started: self.started.clone(),
            updated: now(),
            step,
            total_steps: self.total_steps.get().copied(),
            message: crate::util::sanitize::clean_line(message).into_owned(),
        };
        crate::util::fs::write_atomic(
            &self.root.join("status.json"),
            serde_json::to_string_pretty(&s)?.as_bytes(),
        )
    }

    /// Reads `status.json` of a run folder.
    pub fn read_status(root: &Path) -> Result<Status> {
        let p = root.join("status.json");
        let text =
            std::fs::read_to_string(&p).with_context(|| format!("reading {}", p.display()))?;
        serde_json::from_str(&text).with_context(|| format!("{}: invalid status", p.display()))
    }

    /// Appends one `{"step": N, "data": {...}}` line to `metrics.jsonl` and flushes it.
    pub fn log_metrics(
        &self,
        step: u64,
        data: &serde_json::Map<String, serde_json::Value>,
    ) -> Result<()> {
        let line = serde_json::json!({"step": step, "data": data}).to_string();
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.root.join("metrics.jsonl"))?;
        writeln!(f, "{line}")?;
        f.sync_data()?;
        Ok(())
    }

    /// Drops metric lines after `step` (and any torn last line): a resumed run
    /// rewrites the steps after its checkpoint.
    pub fn truncate_metrics_after(&self, step: u64) -> Result<()> {
        truncate_steps_after(&self.root.join("metrics.jsonl"), step)
    }

    /// Refuses a folder that already holds a run (checked before anything is
    /// written, so the existing run's files stay intact).
    pub fn ensure_new(&self) -> Result<()> {
        anyhow::ensure!(
            !self.root.join("run.toml").exists(),
            "{} already holds a run; continue it with `rmsweb train resume {}` or choose another --run-dir",
            self.root.display(),
            self.root.display()
        );
        Ok(())
    }

    /// Appends a line to `stdout.log` (timestamped, sanitized).
    pub fn log(&self, msg: &str) -> Result<()> {
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.root.join("stdout.log"))?;
        writeln!(f, "{} {}", now(), crate::util::sanitize::clean_line(msg))?;
        Ok(())
    }

    /// Records a run that ended in error `e`: a log line and a `failed` status at the
    /// latest checkpoint's step, listing `alerts`. Best effort: the error itself is
    /// what the caller returns.
    pub fn record_failure(&self, e: &anyhow::Error, alerts: &[Alert]) {
        let _ = self.log(&format!("failed: {e:#}"));
        let step = self.latest_checkpoint().map_or(0, |(s, _)| s);
        let _ = self.set_status_with_alerts(RunState::Failed, step, &format!("{e:#}"), alerts);
    }

    /// `checkpoints/step-N`.
    pub fn checkpoint_dir(&self, step: u64) -> PathBuf {
        self.root.join("checkpoints").join(format!("step-{step}"))
    }

    /// The latest complete checkpoint (one with `trainer_state.json`), if any.
    pub fn latest_checkpoint(&self) -> Option<(u64, PathBuf)> {
        self.complete_checkpoints().pop()
    }

    /// Every complete checkpoint (one with `trainer_state.json`), by step.
    pub fn complete_checkpoints(&self) -> Vec<(u64, PathBuf)> {
        let Ok(rd) = std::fs::read_dir(self.root.join("checkpoints")) else {
            return Vec::new();
        };
        let mut out: Vec<(u64, PathBuf)> = rd
            .filter_map(|e| e.ok())
            .filter_map(|e| {
                let name = e.file_name().to_string_lossy().to_string();
                let n: u64 = name.strip_prefix("step-")?.parse().ok()?;
                e.path()
                    .join("trainer_state.json")
                    .exists()
                    .then(|| (n, e.path()))
            })
            .collect();
        out.sort_by_key(|(n, _)| *n);
        out
    }
}

/// The model folder a `--checkpoint` names: the folder itself, or, for a run folder
/// (a `checkpoints/` folder and no `model.safetensors`), its latest complete checkpoint
/// (`checkpoints/step-N` with `trainer_state.json`). An RL checkpoint kept without its
/// merged model (only `adapter/`, the small part worth copying between machines)
/// resolves to that adapter, which names its base model.
pub fn resolve_checkpoint(dir: &Path) -> Result<PathBuf> {
    let ckpt = if !dir.join("checkpoints").is_dir() || crate::model::weights::has_weights(dir) {
        dir.to_path_buf()
    } else {
        let run = RunDir::open(dir)?;
        let (_, ckpt) = run
            .latest_checkpoint()
            .with_context(|| format!("{}: the run has no complete checkpoint", dir.display()))?;
        ckpt
    };
    let adapter = ckpt.join("adapter");
    if !crate::model::weights::has_weights(&ckpt) && adapter.join("adapter_config.json").is_file() {
        return Ok(adapter);
    }
    Ok(ckpt)
}

/// Applies `key=value` overrides to a serializable config and returns the resulting
/// TOML text. Keys are dotted paths of existing keys (an unknown key is an error);
/// values are TOML (`lr=1e-3`, `lora.target_modules=["q_proj"]`), and a value that is
/// not TOML is taken as a bare string (`mode=dapo`).
pub fn apply_overrides<T: Serialize>(config: &T, sets: &[String]) -> Result<String> {
    use crate::util::sanitize::excerpt;
    let mut table = toml::Value::try_from(config)?;
    for s in sets {
        let (key, raw) = s
            .split_once('=')
            .ok_or_else(|| anyhow::anyhow!("--set `{}`: expected key=value", excerpt(s)))?;
        let value = toml::from_str::<toml::Table>(&format!("v = {raw}"))
            .ok()
            .and_then(|mut t| t.remove("v"))
            .unwrap_or_else(|| toml::Value::String(raw.to_string()));
        let mut cur = &mut table;
        let parts: Vec<&str> = key.trim().split('.').collect();
        let shown = excerpt(key);
        for (i, p) in parts.iter().enumerate() {
            let unknown = || anyhow::anyhow!("--set `{shown}`: unknown key `{}`", excerpt(p));
            let t = cur.as_table_mut().ok_or_else(|| {
                anyhow::anyhow!("--set `{shown}`: `{}` is not a table", excerpt(p))
            })?;
            if i + 1 == parts.len() {
                if !t.contains_key(*p) {
                    return Err(unknown());
                }
                t.insert((*p).to_string(), value.clone());
                break;
            }
            cur = t.get_mut(*p).ok_or_else(unknown)?;
        }
    }
    Ok(toml::to_string(&table)?)
}

/// Writes a checkpoint folder atomically: `fill` writes into `step-N.tmp`, which is
/// then renamed to `step-N` (a killed process never leaves a half checkpoint).
pub fn write_checkpoint(
    run: &RunDir,
    step: u64,
    fill: impl FnOnce(&Path) -> Result<()>,
) -> Result<PathBuf> {
    let dir = run.checkpoint_dir(step);
    let tmp = dir.with_extension("tmp");
    if tmp.exists() {
        std::fs::remove_dir_all(&tmp)?;
    }
    std::fs::create_dir_all(&tmp)?;
    fill(&tmp)?;
    if dir.exists() {
        std::fs::remove_dir_all(&dir)?;
    }
    std::fs::rename(&tmp, &dir)
        .with_context(|| format!("finishing checkpoint {}", dir.display()))?;
    if let Some(parent) = dir.parent()
        && let Ok(f) = std::fs::File::open(parent)
    {
        let _ = f.sync_all();
    }
    Ok(dir)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_metrics_and_checkpoints() {
        let d = tempfile::tempdir().unwrap();
        let run = RunDir::open(d.path().join("r1")).unwrap();
        run.set_status(RunState::Running, 3, "step \x1b[31m3")
            .unwrap();
        let s = RunDir::read_status(run.root()).unwrap();
        assert_eq!(s.state, RunState::Running);
        assert_eq!(s.pid, std::process::id());
        assert!(!s.message.contains('\x1b'));
        let mut m = serde_json::Map::new();
        m.insert("sft/loss".into(), 1.5.into());
        for step in 1..=4 {
            run.log_metrics(step, &m).unwrap();
        }
        run.truncate_metrics_after(2).unwrap();
        let text = std::fs::read_to_string(run.root().join("metrics.jsonl")).unwrap();
        assert_eq!(text.lines().count(), 2);
        assert!(
            text.starts_with(r#"{"data":{"sft/loss":1.5},"step":1}"#)
                || text.contains(r#""step":1"#)
        );
        assert!(run.latest_checkpoint().is_none());
        write_checkpoint(&run, 2, |p| {
            Ok(std::fs::write(p.join("trainer_state.json"), "{}")?)
        })
        .unwrap();
        // An unfinished folder is ignored.
        std::fs::create_dir_all(run.checkpoint_dir(4)).unwrap();
        assert_eq!(run.latest_checkpoint().unwrap().0, 2);
        // Listed by step number, not by name (step-10 after step-9).
        for step in [10, 9] {
            write_checkpoint(&run, step, |p| {
                Ok(std::fs::write(p.join("trainer_state.json"), "{}")?)
            })
            .unwrap();
        }
        let steps: Vec<u64> = run.complete_checkpoints().iter().map(|c| c.0).collect();
        assert_eq!(steps, [2, 9, 10]);
        assert_eq!(run.latest_checkpoint().unwrap().0, 10);
    }

    #[test]
    fn a_checkpoint_argument_resolves_run_folders_to_their_latest_complete_checkpoint() {
        let d = tempfile::tempdir().unwrap();
        let run = RunDir::open(d.path().join("run")).unwrap();
        let err = resolve_checkpoint(run.root()).unwrap_err().to_string();
        assert!(err.contains("no complete checkpoint"), "{err}");
        for step in [2, 10] {
            write_checkpoint(&run, step, |p| {
                Ok(std::fs::write(p.join("trainer_state.json"), "{}")?)
            })
            .unwrap();
        }
        std::fs::create_dir_all(run.checkpoint_dir(12)).unwrap();
        assert_eq!(
            resolve_checkpoint(run.root()).unwrap(),
            run.checkpoint_dir(10)
        );
        // A checkpoint or a model folder names itself.
        let ckpt = run.checkpoint_dir(2);
        assert_eq!(resolve_checkpoint(&ckpt).unwrap(), ckpt);
        let model = d.path().join("model");
        std::fs::create_dir_all(model.join("checkpoints")).unwrap();
        std::fs::write(model.join("model.safetensors"), b"").unwrap();
        assert_eq!(resolve_checkpoint(&model).unwrap(), model);
        // A checkpoint kept without its merged model loads through its adapter, named
        // directly or through its run folder; with the model there, the model wins.
        let adapter = ckpt.join("adapter");
        std::fs::create_dir_all(&adapter).unwrap();
        std::fs::write(adapter.join("adapter_config.json"), "{}").unwrap();
        assert_eq!(resolve_checkpoint(&ckpt).unwrap(), adapter);
        std::fs::remove_dir_all(run.checkpoint_dir(10)).unwrap();
        assert_eq!(resolve_checkpoint(run.root()).unwrap(), adapter);
        std::fs::write(ckpt.join("model.safetensors"), b"").unwrap();
        assert_eq!(resolve_checkpoint(&ckpt).unwrap(), ckpt);
    }

    #[test]
    fn status_alerts_are_optional_and_roundtrip() {
        // A status file written before alerts existed still reads.
        let old =
            r#"{"state":"running","pid":1,"started":"a","updated":"b","step":2,"message":"m"}"#;
        let s: Status = serde_json::from_str(old).unwrap();
        assert!(s.alerts.is_empty());
        let d = tempfile::tempdir().unwrap();
        let run = RunDir::open(d.path()).unwrap();
        run.set_status(RunState::Running, 1, "x").unwrap();
        let text = std::fs::read_to_string(d.path().join("status.json")).unwrap();
        assert!(!text.contains("alerts"), "no empty list is written: {text}");
        let a = Alert {
            kind: "self_sharpening".into(),
            step: 7,
            message: "gap \x1b[2J up".into(),
        };
        run.set_status_with_alerts(RunState::Running, 7, "y", std::slice::from_ref(&a))
            .unwrap();
        let s = RunDir::read_status(d.path()).unwrap();
        assert_eq!(
            (s.alerts[0].kind.as_str(), s.alerts[0].step),
            ("self_sharpening", 7)
        );
        assert!(!s.alerts[0].message.contains('\x1b'));
        let v: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(d.path().join("status.json")).unwrap())
                .unwrap();
        assert_eq!(v["alerts"][0]["kind"], "self_sharpening");
        assert_eq!(v["alerts"][0]["step"], 7);
    }
}

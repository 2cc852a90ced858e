//! What a run folder says about itself: `run.toml` (kind, preset, mode) and
//! `status.json` (state, pid, times, step, message, alerts), both read leniently —
//! a missing or broken file leaves its fields unknown and is reported, never fatal.

use serde_json::Value;
use std::path::{Path, PathBuf};

/// The run's state as shown: the status file's, except that a run said to be
/// running (or queued with a pid) whose process is gone is [`DisplayState::Lost`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DisplayState {
    Queued,
    Running,
    Finished,
    Failed,
    Stopped,
    /// Said running, but its process is not alive (killed, crashed, machine rebooted).
    Lost,
    /// No (readable) status: a bare metrics file, or a folder being created.
    Unknown,
}

impl DisplayState {
    /// The word shown in the list.
    pub fn label(self) -> &'static str {
        match self {
            DisplayState::Queued => "queued",
            DisplayState::Running => "running",
            DisplayState::Finished => "finished",
            DisplayState::Failed => "failed",
            DisplayState::Stopped => "stopped",
            DisplayState::Lost => "dead",
            DisplayState::Unknown => "?",
        }
    }

    /// Whether the run's process should be alive.
    pub fn is_active(self) -> bool {
        matches!(self, DisplayState::Queued | DisplayState::Running)
    }
}

/// A flagged condition from `status.json` `alerts`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Alert {
    pub kind: String,
    pub step: Option<u64>,
    pub message: String,
}

/// `status.json`, every field optional.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct StatusInfo {
    pub state: Option<String>,
    pub pid: Option<u32>,
    pub started: Option<String>,
    pub updated: Option<String>,
    pub step: Option<u64>,
    /// The steps the run takes in all (`total_steps`, when the trainer wrote it).
    pub total_steps: Option<u64>,
    pub message: Option<String>,
    pub alerts: Vec<Alert>,
}

/// `run.toml`'s fields the monitor shows.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ConfigInfo {
    pub kind: Option<String>,
    pub preset: Option<String>,
    pub mode: Option<String>,
}

/// A run as found on disk.
#[derive(Debug, Clone, PartialEq)]
pub struct RunInfo {
    /// Folder name, or the file path for a watched metrics file.
    pub id: String,
    /// The run folder (the metrics file's folder for a watched file).
    pub dir: PathBuf,
    pub metrics: PathBuf,
    pub config: ConfigInfo,
    pub status: StatusInfo,
    pub state: DisplayState,
    /// Problems reading `run.toml` / `status.json` (file: reason).
    pub problems: Vec<String>,
}

fn str_field(v: &Value, key: &str) -> Option<String> {
    v.get(key).and_then(Value::as_str).map(str::to_string)
}

/// Parses `status.json` text leniently: unknown or mistyped fields are left out.
pub fn parse_status(text: &str) -> Result<StatusInfo, String> {
    let v: Value = serde_json::from_str(text).map_err(|e| format!("not JSON: {e}"))?;
    if !v.is_object() {
        return Err(format!(
            "expected an object, found {}",
            crate::util::json_kind(&v)
        ));
    }
    let alerts = v
        .get("alerts")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|x| {
                    Some(Alert {
                        kind: str_field(x, "kind")?,
                        step: x.get("step").and_then(Value::as_u64),
                        message: str_field(x, "message").unwrap_or_default(),
                    })
                })
                .collect()
        })
        .unwrap_or_default();
    Ok(StatusInfo {
        state: str_field(&v, "state"),
        pid: v
            .get("pid")
            .and_then(Value::as_u64)
            .and_then(|p| u32::try_from(p).ok()),
        started: str_field(&v, "started"),
        updated: str_field(&v, "updated"),
        step: v.get("step").and_then(Value::as_u64),
        total_steps: v.get("total_steps").and_then(Value::as_u64),
        message: str_field(&v, "message"),
        alerts,
    })
}

/// Parses `run.toml` text leniently (only `kind`, `preset` and `mode` are read;
/// `mode` may also sit in an `[rl]` or `[algorithm]` table).
pub fn parse_config(text: &str) -> Result<ConfigInfo, String> {
    let t: toml::Table = toml::from_str(text).map_err(|e| e.message().to_string())?;
    let s = |t: &toml::Table, k: &str| t.get(k).and_then(|v| v.as_str()).map(str::to_string);
    let mode = s(&t, "mode").or_else(|| {
        ["rl", "algorithm"].iter().find_map(|sub| {
            t.get(*sub)
                .and_then(|v| v.as_table())
                .and_then(|t| s(t, "mode"))
        })
    });
    let kind = s(&t, "kind");
    // A verl run has no preset: show its layout, nodes × GPUs per node.
    let layout = || {
        let n = t.get("nodes")?.as_integer()?;
        let g = t.get("gpus_per_node")?.as_integer()?;
        Some(format!("{n}x{g} GPU"))
    };
    let preset =
        s(&t, "preset").or_else(|| (kind.as_deref() == Some("verl")).then(layout).flatten());
    Ok(ConfigInfo { kind, preset, mode })
}

/// Whether process `pid` exists and is not a zombie.
pub fn pid_alive(pid: u32) -> bool {
    let Ok(p) = libc::pid_t::try_from(pid) else {
        return false;
    };
    if p <= 0 {
        return false;
    }
    // SAFETY: kill with signal 0 only checks that the process exists.
    let exists = unsafe { libc::kill(p, 0) } == 0
        || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM);
    if !exists {
        return false;
    }
    // A zombie (exited, not yet reaped) is not alive.
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().next())
            .is_none_or(|s| s != "Z"),
        Err(_) => true,
    }
}

fn state_of(status: &StatusInfo, alive: impl Fn(u32) -> bool) -> DisplayState {
    let declared = match status.state.as_deref() {
        Some("queued") => DisplayState::Queued,
        Some("running") => DisplayState::Running,
        Some("finished") => DisplayState::Finished,
        Some("failed") => DisplayState::Failed,
        Some("stopped") => DisplayState::Stopped,
        _ => return DisplayState::Unknown,
    };
    match (declared, status.pid) {
        (DisplayState::Running, Some(pid)) if !alive(pid) => DisplayState::Lost,
        (DisplayState::Running, None) => DisplayState::Lost,
        (DisplayState::Queued, Some(pid)) if pid != 0 && !alive(pid) => DisplayState::Lost,
        (s, _) => s,
    }
}

/// Reads a run folder (`metrics` is its metrics file: `dir/metrics.jsonl` unless
/// watching a file by path).
pub fn read_run(id: String, dir: &Path, metrics: PathBuf) -> RunInfo {
    let mut problems = Vec::new();
    let cfg_path = dir.join("run.toml");
    let config = match std::fs::read_to_string(&cfg_path) {
        Ok(text) => parse_config(&text).unwrap_or_else(|e| {
            problems.push(format!("{}: {e}", cfg_path.display()));
            ConfigInfo::default()
        }),
        Err(_) => ConfigInfo::default(),
    };
    let st_path = dir.join("status.json");
    let status = match std::fs::read_to_string(&st_path) {
        Ok(text) => parse_status(&text).unwrap_or_else(|e| {
            problems.push(format!("{}: {e}", st_path.display()));
            StatusInfo::default()
        }),
        Err(_) => StatusInfo::default(),
    };
    let state = state_of(&status, pid_alive);
    RunInfo {
        id,
        dir: dir.to_path_buf(),
        metrics,
        config,
        status,
        state,
        problems,
    }
}

/// Whether `dir` looks like a run folder.
fn is_run_dir(dir: &Path) -> bool {
    ["run.toml", "status.json", "metrics.jsonl", "stdout.log"]
        .iter()
        .any(|f| dir.join(f).is_file())
}

/// The runs in `root` (its sub-folders holding a run file), sorted by id. A
/// missing `root` is an empty list.
pub fn discover(root: &Path) -> Vec<RunInfo> {
    let Ok(rd) = std::fs::read_dir(root) else {
        return Vec::new();
    };
    let mut runs: Vec<RunInfo> = rd
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.is_dir() && is_run_dir(p))
        .map(|p| {
            let id = p
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            let metrics = p.join("metrics.jsonl");
            read_run(id, &p, metrics)
        })
        .collect();
    runs.sort_by(|a, b| a.id.cmp(&b.id));
    runs
}

/// A metrics file watched by path (`--watch FILE`): its folder supplies
/// `run.toml`/`status.json` when present.
pub fn watched(file: &Path) -> RunInfo {
    let dir = file
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    read_run(file.display().to_string(), dir, file.to_path_buf())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_is_read_leniently() {
        let s = parse_status(
            r#"{"state":"running","pid":12,"step":"x","alerts":[{"kind":"self_sharpening","step":40,"message":"gap up"},{"nokind":1}]}"#,
        )
        .unwrap();
        assert_eq!(s.state.as_deref(), Some("running"));
        assert_eq!(s.pid, Some(12));
        assert_eq!(s.step, None, "a mistyped field is left out");
        assert_eq!(s.alerts.len(), 1);
        assert_eq!(s.alerts[0].step, Some(40));
        assert!(parse_status("[]").unwrap_err().contains("a list"));
        assert!(parse_status("{").is_err());
    }

    #[test]
    fn running_with_a_dead_pid_is_lost() {
        let st = |state: &str, pid| StatusInfo {
            state: Some(state.into()),
            pid,
            ..Default::default()
        };
        assert_eq!(
            state_of(&st("running", Some(7)), |_| true),
            DisplayState::Running
        );
        assert_eq!(
            state_of(&st("running", Some(7)), |_| false),
            DisplayState::Lost
        );
        assert_eq!(
            state_of(&st("finished", Some(7)), |_| false),
            DisplayState::Finished
        );
        assert_eq!(
            state_of(&st("queued", Some(0)), |_| false),
            DisplayState::Queued
        );
        assert_eq!(
            state_of(&st("weird", None), |_| true),
            DisplayState::Unknown
        );
        assert!(pid_alive(std::process::id()));
        assert!(!pid_alive(0));
        assert!(!pid_alive(u32::MAX));
    }

    #[test]
    fn discovers_run_folders_and_reports_broken_files() {
        let d = tempfile::tempdir().unwrap();
        let a = d.path().join("a");
        std::fs::create_dir_all(&a).unwrap();
        std::fs::write(
            a.join("run.toml"),
            "kind = \"rl\"\npreset = \"tiny\"\n[rl]\nmode = \"dapo\"\n",
        )
        .unwrap();
        std::fs::write(a.join("status.json"), "not json").unwrap();
        std::fs::create_dir_all(d.path().join("empty")).unwrap();
        let runs = discover(d.path());
        assert_eq!(runs.len(), 1);
        assert_eq!(runs[0].config.kind.as_deref(), Some("rl"));
        assert_eq!(runs[0].config.mode.as_deref(), Some("dapo"));
        assert_eq!(runs[0].state, DisplayState::Unknown);
        assert!(runs[0].problems[0].contains("status.json"));
        let v = parse_config("kind = \"verl\"\nnodes = 2\ngpus_per_node = 8\nmode = \"dapo\"\n")
            .unwrap();
        assert_eq!(v.preset.as_deref(), Some("2x8 GPU"));
        assert_eq!(v.mode.as_deref(), Some("dapo"));
        assert!(discover(&d.path().join("nope")).is_empty());
    }
}

//! Faults of the live environment (round 3): a Chromium that dies or hangs under
//! `eval` ends it with an error naming the browser instead of a wait forever, and
//! the first SIGTERM or Ctrl-C ends `eval` and `recipe run` at once, keeping what
//! they did (the results so far, every episode appended). They need
//! `.ci/install-env.sh` (Chromium and the MiniWoB pages).

use super::hostile::{assert_clean, s};
use super::recipe::require_live_env;
use std::io::Read;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// The processes whose parent is `pid`, with their command names.
fn children(pid: u32) -> Vec<(u32, String)> {
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(child) = e.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{child}/stat")) else {
            continue;
        };
        // pid (comm) state ppid ...: comm may hold spaces and parentheses.
        let Some(close) = stat.rfind(')') else {
            continue;
        };
        let comm = stat[stat.find('(').unwrap_or(0) + 1..close].to_string();
        let ppid = stat[close + 1..]
            .split_whitespace()
            .nth(1)
            .and_then(|p| p.parse::<u32>().ok());
        if ppid == Some(pid) {
            out.push((child, comm));
        }
    }
    out
}

fn signal(pid: i32, sig: i32) {
    // SAFETY: kill(2) on a process (or, negative, the process group) this test started.
    assert_eq!(unsafe { libc::kill(pid, sig) }, 0);
}

/// `rmsweb ARGS` in a process group of its own (as a terminal's job: a Ctrl-C is a
/// SIGINT to the group), its stderr collected; the group is killed when dropped.
struct Live {
    child: Child,
    stderr: Option<JoinHandle<String>>,
}

impl Live {
    fn start(args: &[&str], dir: &Path) -> Live {
        let mut child = Command::new(env!("CARGO_BIN_EXE_rmsweb"))
            .args(args)
            .current_dir(dir)
            .process_group(0)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut err = child.stderr.take().unwrap();
        let stderr = std::thread::spawn(move || {
            let mut b = Vec::new();
            err.read_to_end(&mut b).ok();
            String::from_utf8_lossy(&b).into_owned()
        });
        Live {
            child,
            stderr: Some(stderr),
        }
    }

    fn pid(&self) -> i32 {
        self.child.id() as i32
    }

    /// The browser it launched (waits up to a minute for it).
    fn browser(&self) -> i32 {
        let start = Instant::now();
        loop {
            if let Some((pid, _)) = children(self.child.id())
                .into_iter()
                .find(|(_, comm)| comm.contains("chrom"))
            {
                return pid as i32;
            }
            assert!(
                start.elapsed() < Duration::from_secs(60),
                "no Chromium started"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Waits for the exit, failing the test after `limit`; the status and stderr
    /// (checked for control characters and panics).
    fn end_within(&mut self, limit: Duration, what: &str) -> (ExitStatus, String) {
        let since = Instant::now();
        let status = loop {
            if let Some(st) = self.child.try_wait().unwrap() {
                break st;
            }
            assert!(
                since.elapsed() < limit,
                "{what}: still running {} s later",
                limit.as_secs()
            );
            std::thread::sleep(Duration::from_millis(100));
        };
        let stderr = self.stderr.take().unwrap().join().unwrap();
        let output = std::process::Output {
            status,
            stdout: Vec::new(),
            stderr: stderr.clone().into_bytes(),
        };
        assert_clean(what, &output);
        (status, stderr)
    }
}

impl Drop for Live {
    fn drop(&mut self) {
        // SAFETY: kill(2) on the process group this test started.
        unsafe { libc::kill(-self.pid(), libc::SIGKILL) };
        let _ = self.child.wait();
    }
}

/// Waits until `path` is a file longer than `bytes`.
fn wait_for_file(path: &Path, bytes: u64) {
    let start = Instant::now();
    while !std::fs::metadata(path).is_ok_and(|m| m.len() > bytes) {
        assert!(
            start.elapsed() < Duration::from_secs(90),
            "{} never grew",
            path.display()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// `rmsweb eval` of the scripted teacher on 1000 episodes, `parallel` side by side,
/// results in `r.json` and episodes in `ds/` under `dir`.
fn long_eval(dir: &Path, parallel: usize) -> Live {
    let parallel = parallel.to_string();
    let args = [
        "eval",
        "--policy",
        "scripted",
        "--tasks",
        "miniwob:click-button",
        "--episodes",
        "1000",
        "--parallel",
        &parallel,
        "--out",
        "r.json",
        "--dataset",
        "ds",
    ];
    Live::start(&args, dir)
}

/// The results an interrupted `eval` wrote: some episodes, and why it stopped.
fn partial_results(dir: &Path, why: &str) {
    let r: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("r.json")).unwrap()).unwrap();
    let n = r["episodes_total"].as_u64().unwrap();
    assert!(n > 0 && n < 1000, "{r}");
    let cut = r["cut_short"].as_str().unwrap();
    assert!(cut.contains(why), "{cut}");
    // Every episode it counted is in the dataset, and the dataset is whole.
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_rmsweb"))
        .args(["validate", "--dataset", s(&dir.join("ds")), "--json"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stdout));
    let report: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(report["trajectories"].as_u64(), Some(n), "{report}");
}

/// Sends `sig` to the browser of a long `eval` once episodes are being written:
/// the run must end within `limit` with status 1 and an error that `says`, its
/// results so far written with the reason (`why`).
fn browser_fault(sig: i32, limit: Duration, says: &str, why: &str) {
    require_live_env();
    let dir = tempfile::tempdir().unwrap();
    let mut eval = long_eval(dir.path(), 1);
    let browser = eval.browser();
    wait_for_file(&dir.path().join("ds/trajectories.jsonl"), 0);
    signal(browser, sig);
    let (status, err) = eval.end_within(limit, says);
    assert_eq!(status.code(), Some(1), "{err}");
    assert!(err.contains(says), "{err}");
    partial_results(dir.path(), why);
}

/// `kill -9` of Chromium during `eval` left rmsweb waiting forever at 0% CPU.
#[test]
fn eval_ends_with_an_error_when_its_browser_dies() {
    browser_fault(
        libc::SIGKILL,
        Duration::from_secs(30),
        "Chromium is gone",
        "Chromium is gone",
    );
}

/// A Chromium that stops answering (SIGSTOP) ends `eval` with an error once a call
/// and a probe have gone unanswered, instead of timing every later episode out.
#[test]
fn eval_ends_with_an_error_when_its_browser_hangs() {
    browser_fault(
        libc::SIGSTOP,
        Duration::from_secs(90),
        "Chromium did not answer within",
        "the browser hangs",
    );
}

/// The first SIGTERM ended `eval` with nothing of its results written (here with
/// episodes played side by side: every tab stops).
#[test]
fn eval_stops_at_the_first_sigterm_keeping_its_results() {
    require_live_env();
    let dir = tempfile::tempdir().unwrap();
    let mut eval = long_eval(dir.path(), 3);
    wait_for_file(&dir.path().join("ds/trajectories.jsonl"), 0);
    signal(eval.pid(), libc::SIGTERM);
    let (status, err) = eval.end_within(Duration::from_secs(15), "eval, SIGTERM");
    assert_eq!(status.code(), Some(130), "{err}");
    assert!(err.contains("interrupted"), "{err}");
    partial_results(dir.path(), "interrupted");
}

/// A recipe went on collecting for minutes after its first SIGTERM. A Ctrl-C (the
/// terminal's SIGINT to the whole job, Chromium included) now ends it at once, the
/// unit at work unrecorded and what it appended kept whole.
#[test]
fn recipe_stops_at_the_first_ctrl_c() {
    require_live_env();
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("big.toml"),
        "tasks = [\"click-button\"]\n[collect]\nseeds = 5000\n",
    )
    .unwrap();
    let args = [
        "recipe", "run", "--config", "big.toml", "--out", "out", "--stages", "collect",
    ];
    let mut recipe = Live::start(&args, dir.path());
    let data = dir.path().join("out/data/reflection");
    wait_for_file(&data.join("trajectories.jsonl"), 0);
    signal(-recipe.pid(), libc::SIGINT);
    let (status, err) = recipe.end_within(Duration::from_secs(20), "recipe, Ctrl-C");
    assert_eq!(status.code(), Some(130), "{err}");
    assert!(
        err.contains("collect/reflection") && err.contains("interrupted"),
        "{err}"
    );
    assert!(
        !dir.path()
            .join("out/stages/collect.reflection.json")
            .exists()
    );
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_rmsweb"))
        .args(["validate", "--dataset", s(&data)])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stdout));
}

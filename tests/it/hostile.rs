//! Hostile input and faults, through the binary: no escape sequence reaches the
//! terminal through any error path, a closed stdout ends every command quietly,
//! FIFOs and devices are refused instead of blocking, lock waits say what they wait
//! for, staging folders of a dead import are cleaned, a complete last record without
//! its newline is kept, and import never writes a record the reader refuses.
//! Inputs come from `tests/data/hostile/` (made by `scripts/hostile/make_corpus.py`)
//! and from payloads built here.

use rmsweb::trajectory::jsonl::JsonlFile;
use serde_json::{Value, json};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

fn corpus(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/hostile")
        .join(rel)
}

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures")
}

/// The terminal-injection payloads of the corpus.
fn payloads() -> Vec<(String, String)> {
    let text = std::fs::read_to_string(corpus("payloads.json")).unwrap();
    let map: serde_json::Map<String, Value> = serde_json::from_str(&text).unwrap();
    map.into_iter()
        .map(|(k, v)| (k, v.as_str().unwrap().to_string()))
        .collect()
}

/// Every payload in one string.
fn all_payloads() -> String {
    payloads().into_iter().map(|(_, p)| p).collect()
}

/// Runs the binary with a time limit (a hang fails the test instead of stalling it).
pub(crate) fn run_for(args: &[&str], limit: Duration) -> Output {
    use std::os::unix::process::CommandExt;
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_rmsweb"));
    // SAFETY: setsid is async-signal-safe; the child leaves the controlling terminal,
    // so the workbench fails to start here instead of taking over the tester's one.
    unsafe {
        cmd.pre_exec(|| {
            libc::setsid();
            Ok(())
        });
    }
    let mut child = cmd
        .args(args)
        .env("RMSWEB_LOG", "warn")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = child.stdout.take().unwrap();
    let mut err = child.stderr.take().unwrap();
    let o = std::thread::spawn(move || {
        let mut b = Vec::new();
        out.read_to_end(&mut b).ok();
        b
    });
    let e = std::thread::spawn(move || {
        let mut b = Vec::new();
        err.read_to_end(&mut b).ok();
        b
    });
    let start = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if start.elapsed() > limit {
            child.kill().ok();
            child.wait().ok();
            panic!("rmsweb {args:?} did not finish within {limit:?} (hung)");
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    Output {
        status,
        stdout: o.join().unwrap(),
        stderr: e.join().unwrap(),
    }
}

/// `rmsweb import browser-use --dataset DS HISTORY --task TASK`.
pub(crate) fn import_history(ds: &Path, history: &Path, task: &str) -> Output {
    run(&[
        "import",
        "browser-use",
        "--dataset",
        s(ds),
        s(history),
        "--task",
        task,
    ])
}

pub(crate) fn run(args: &[&str]) -> Output {
    run_for(args, Duration::from_secs(60))
}

/// The first character a terminal would act on: C0 controls other than newline and
/// tab, DEL, C1 controls, bidirectional overrides.
fn first_control(bytes: &[u8]) -> Option<(usize, char)> {
    String::from_utf8_lossy(bytes)
        .char_indices()
        .find(|(_, c)| {
            (c.is_control() && !matches!(c, '\n' | '\t'))
                || matches!(c, '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}')
        })
}

/// Asserts the run printed no control character and did not panic; returns stderr.
pub(crate) fn assert_clean(what: &str, o: &Output) -> String {
    let stderr = String::from_utf8_lossy(&o.stderr).into_owned();
    for (name, bytes) in [("stdout", &o.stdout), ("stderr", &o.stderr)] {
        if let Some((at, c)) = first_control(bytes) {
            let text = String::from_utf8_lossy(bytes);
            let from = text[..at]
                .char_indices()
                .rev()
                .nth(40)
                .map_or(0, |(i, _)| i);
            panic!(
                "{what}: {name} holds {c:?} at byte {at}: {:?}",
                &text[from..(at + 40).min(text.len())]
            );
        }
    }
    assert!(
        !stderr.contains("panicked") && o.status.code() != Some(101),
        "{what}: panicked: {stderr}"
    );
    stderr
}

pub(crate) fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// A small valid dataset: one task, one trajectory with a screenshot, one mined pair.
pub(crate) fn dataset(root: &Path) {
    std::fs::create_dir_all(root.join("screenshots/t1-a1")).unwrap();
    std::fs::create_dir_all(root.join("mined")).unwrap();
    std::fs::write(
        root.join("dataset.toml"),
        "name = \"hostile\"\nschema = 1\n",
    )
    .unwrap();
    std::fs::write(
        root.join("tasks.jsonl"),
        format!("{}\n", json!({"task_id": "t1", "instruction": "buy it"})),
    )
    .unwrap();
    let img = image::RgbImage::from_pixel(4, 3, image::Rgb([9, 9, 9]));
    img.save(root.join("screenshots/t1-a1/0.png")).unwrap();
    write_trajectories(root, &[trajectory("t1-a1", json!({"index": 1}))]);
}

fn trajectory(id: &str, click: Value) -> Value {
    json!({"id": id, "task_id": "t1", "outcome": {"success": true}, "steps": [
        {"index": 0, "state": {"url": "https://a.test", "elements": [{"index": 1, "tag": "button"}],
            "screenshot": "screenshots/t1-a1/0.png"},
         "output": {"actions": [{"name": "click", "params": click}]}},
        {"index": 1, "state": {"url": "https://a.test/2"},
         "output": {"actions": [{"name": "done", "params": {"text": "ok", "success": true}}]}}
    ]})
}

fn write_trajectories(root: &Path, ts: &[Value]) {
    let text: String = ts.iter().map(|t| format!("{t}\n")).collect();
    std::fs::write(root.join("trajectories.jsonl"), text).unwrap();
}

fn pair(id: &str, kind: &str) -> Value {
    json!({"id": id, "task_id": "t1", "kind": kind,
        "success": {"trajectory": "t1-a1", "step": 0}, "loc": {"trajectory": "t1-a1", "step": 1},
        "target_action": {"name": "click", "params": {"index": 1}},
        "loc_action": {"name": "done", "params": {"text": "x"}},
        "scores": {"url": 0, "dom": 0, "memory": 0, "progress": 0, "alignment": 0, "contrast": 0, "evidence": 0, "total": 0},
        "failure_mode": {"category": "c", "confidence": 0.5, "source": "heuristic"},
        "gates": {"validity": true, "visual": true, "progress": true}})
}

fn event(op: &str, pair_id: &str) -> String {
    // Built by hand: `op` may hold raw control bytes, as a hostile log would.
    format!(
        "{{\"ts\": \"2025-01-01T00:00:00Z\", \"annotator\": \"a\", \"pair_id\": {}, \"op\": \"{op}\", \"value\": null, \"prev\": null}}\n",
        json!(pair_id)
    )
}

/// Every place a hostile dataset can put a payload, with the commands that read it.
fn error_path_runs(dir: &Path, payload: &str) -> Vec<(String, Vec<String>)> {
    let mut runs: Vec<(String, Vec<String>)> = Vec::new();
    let mk = |name: &str| {
        let d = dir.join(name);
        dataset(&d);
        d
    };
    let cmd = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    let add = |runs: &mut Vec<(String, Vec<String>)>, site: &str, cmds: Vec<Vec<String>>| {
        runs.extend(cmds.into_iter().map(|c| (site.to_string(), c)));
    };

    // A bad `op` in annotations.jsonl (serde quotes an unknown variant raw).
    let d = mk("op");
    std::fs::write(
        d.join("mined/pairs.jsonl"),
        format!("{}\n", pair("p1", "detour")),
    )
    .unwrap();
    std::fs::write(d.join("annotations.jsonl"), event(payload, "p1")).unwrap();
    add(
        &mut runs,
        "bad op",
        vec![
            cmd(&["annotate", "counts", s(&d)]),
            cmd(&["annotate", "export", s(&d)]),
            cmd(&["validate", s(&d)]),
            cmd(&["--dataset", s(&d), "--runs", s(&dir.join("runs"))]),
        ],
    );

    // Raw control bytes in dataset.toml (the TOML error quotes the line).
    let d = mk("toml");
    std::fs::write(
        d.join("dataset.toml"),
        format!("name = \"x{payload}\"\nschema = 1\n"),
    )
    .unwrap();
    add(
        &mut runs,
        "dataset.toml",
        vec![
            cmd(&["validate", s(&d)]),
            cmd(&["stats", s(&d)]),
            cmd(&["show", s(&d), "t1-a1"]),
            cmd(&["annotate", "counts", s(&d)]),
            cmd(&["curate", "filter", s(&d)]),
            cmd(&["--dataset", s(&d), "--runs", s(&dir.join("runs"))]),
        ],
    );

    // An escape in an attribute key and in a screenshot path (`show` renders both).
    let d = mk("show");
    let mut t = trajectory("t1-a1", json!({"index": 1}));
    t["steps"][0]["state"]["elements"][0]["attrs"] = json!({format!("k{payload}"): payload});
    t["steps"][1]["state"]["screenshot"] = json!(format!("screenshots/{payload}.png"));
    t["steps"][0]["state"]["title"] = json!(payload);
    write_trajectories(&d, &[t]);
    add(
        &mut runs,
        "attrs and screenshot",
        vec![
            cmd(&["show", s(&d), "t1-a1"]),
            cmd(&["show", s(&d), "t1-a1", "--step", "1"]),
            cmd(&[
                "show",
                s(&d),
                &format!("no-such{}", payload.replace('\0', "")),
            ]),
            cmd(&["validate", s(&d)]),
            cmd(&["stats", s(&d)]),
        ],
    );

    // Payloads in record values that fail to parse, in a pair kind, in a task.
    let d = mk("records");
    std::fs::write(
        d.join("mined/pairs.jsonl"),
        format!("{}\n", pair("p1", payload)),
    )
    .unwrap();
    std::fs::write(
        d.join("tasks.jsonl"),
        format!("{{\"task_id\": \"t1\", \"instruction\": \"{payload}\", \"x\": }}\n"),
    )
    .unwrap();
    add(
        &mut runs,
        "records",
        vec![
            cmd(&["validate", s(&d)]),
            cmd(&["stats", s(&d)]),
            cmd(&["mine", "explain", s(&d), "p1"]),
            cmd(&["curate", "filter", s(&d)]),
            cmd(&["annotate", "export", s(&d)]),
        ],
    );

    // A history named with the payload, and one with it in bad JSON (a command-line
    // argument cannot hold NUL).
    let arg = payload.replace('\0', "");
    let name = format!("h{}.json", arg.replace('/', "_"));
    let h = dir.join(&name);
    std::fs::write(&h, format!("{{\"history\": [{payload}")).unwrap();
    runs.push((
        "import".into(),
        cmd(&[
            "import",
            "browser-use",
            "--dataset",
            s(&dir.join("ds-import")),
            s(&h),
            "--task",
            &arg,
        ]),
    ));
    runs.push((
        "import (missing)".into(),
        cmd(&[
            "import",
            "browser-use",
            "--dataset",
            s(&dir.join("ds-import")),
            &format!("{arg}.json"),
            "--task",
            "t",
        ]),
    ));
    runs
}

#[test]
fn no_error_path_prints_control_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let mut checked = 0;
    // Every payload at once, through every error path.
    for (site, args) in error_path_runs(&dir.path().join("all"), &all_payloads()) {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let o = run(&args);
        let err = assert_clean(&format!("{site}: rmsweb {args:?}"), &o);
        assert!(
            !o.status.success() || !err.is_empty() || !o.stdout.is_empty(),
            "{site}: {args:?} said nothing"
        );
        checked += 1;
    }
    // Each payload alone through the annotation-log and dataset.toml paths.
    for (name, p) in payloads() {
        let d = dir.path().join(&name);
        for (site, args) in error_path_runs(&d, &p)
            .into_iter()
            .filter(|(site, _)| site == "bad op" || site == "dataset.toml")
            .step_by(2)
        {
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            assert_clean(&format!("{name}: {site}: rmsweb {args:?}"), &run(&args));
            checked += 1;
        }
    }
    // The corpus's hostile JSON Lines inputs for `reward batch` and `rl groups`.
    for f in [
        "cases/payload_candidate.jsonl",
        "cases/two_cases_one_line.jsonl",
    ] {
        assert_clean(f, &run(&["reward", "batch", s(&corpus(f))]));
        checked += 1;
    }
    for f in [
        "groups/payload_group.jsonl",
        "groups/non_utf8.jsonl",
        "groups/huge_rewards.jsonl",
    ] {
        assert_clean(f, &run(&["rl", "groups", s(&corpus(f))]));
        checked += 1;
    }
    // Raw bytes in a task file given to `import tasks`... and a history full of them.
    let o = import_history(
        &dir.path().join("bu"),
        &corpus("browser_use/bad_not_json.json"),
        "t",
    );
    assert_clean("bad_not_json", &o);
    assert!(checked > 40, "{checked}");
}

#[test]
fn payloads_inside_imported_fields_never_reach_the_terminal() {
    let dir = tempfile::tempdir().unwrap();
    let ds = dir.path().join("ds");
    let h = corpus("browser_use/ok_payloads_in_fields.json");
    let o = import_history(&ds, &h, "t");
    assert_clean("import", &o);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let id = JsonlFile::open(&ds.join("trajectories.jsonl"))
        .unwrap()
        .get::<Value>(0)
        .unwrap()["id"]
        .as_str()
        .unwrap()
        .to_string();
    for args in [
        vec!["show", s(&ds), &id],
        vec!["show", s(&ds), &id, "--step", "1"],
        vec!["validate", s(&ds)],
        vec!["stats", s(&ds)],
    ] {
        assert_clean(&format!("{args:?}"), &run(&args));
    }
}

/// Runs with standard output a pipe whose reader is already gone.
fn run_with_closed_stdout(args: &[&str]) -> std::process::ExitStatus {
    let mut fds = [0; 2];
    // SAFETY: pipe writes two descriptors into the array; we own both.
    assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
    // SAFETY: closing the read end we own; the write end becomes the child's stdout.
    unsafe { libc::close(fds[0]) };
    // SAFETY: fds[1] is a valid descriptor we own and hand over.
    let stdout = unsafe { <Stdio as std::os::fd::FromRawFd>::from_raw_fd(fds[1]) };
    let out = Command::new(env!("CARGO_BIN_EXE_rmsweb"))
        .args(args)
        .stdin(Stdio::null())
        .stdout(stdout)
        .stderr(Stdio::piped())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !stderr.contains("panicked") && stderr.trim().is_empty(),
        "rmsweb {args:?} with a closed stdout said: {stderr}"
    );
    out.status
}

#[test]
fn every_command_exits_quietly_on_a_closed_stdout() {
    use std::os::unix::process::ExitStatusExt;
    let dir = tempfile::tempdir().unwrap();
    let ds = dir.path().join("ds");
    let copy = |from: &Path, to: &Path| {
        std::fs::create_dir_all(to).unwrap();
        for e in std::fs::read_dir(from).unwrap() {
            let e = e.unwrap();
            if e.file_type().unwrap().is_file() {
                std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
            }
        }
    };
    copy(&fixtures(), &ds);
    copy(&fixtures().join("mined"), &ds.join("mined"));
    std::fs::create_dir_all(ds.join("screenshots")).unwrap();
    let pair_id = JsonlFile::open(&ds.join("mined/pairs.jsonl"))
        .unwrap()
        .get::<Value>(0)
        .unwrap()["id"]
        .as_str()
        .unwrap()
        .to_string();
    let d = s(&ds);
    let runs: Vec<Vec<&str>> = vec![
        vec!["validate", d],
        vec!["validate", d, "--json"],
        vec!["stats", d],
        vec!["stats", d, "--json"],
        vec!["show", d, "login-user-s0-a1", "--no-image"],
        vec!["mine", "explain", d, &pair_id],
        vec!["curate", "filter", d],
        vec!["annotate", "counts", d],
        vec!["reward", "batch", "tests/data/reward/cases.jsonl"],
        vec!["rl", "groups", "tests/data/hostile/groups/ok.jsonl"],
        vec!["miniwob", "list"],
        vec!["--help"],
    ];
    for args in runs {
        let st = run_with_closed_stdout(&args);
        let quiet =
            st.code() == Some(0) || st.code() == Some(141) || st.signal() == Some(libc::SIGPIPE);
        assert!(quiet, "rmsweb {args:?}: {st:?}");
    }
}

#[test]
fn fifos_and_devices_are_refused_without_blocking() {
    let dir = tempfile::tempdir().unwrap();
    let ds = dir.path().join("ds");
    dataset(&ds);
    let fifo = |p: &Path| {
        std::fs::remove_file(p).ok();
        let c = std::ffi::CString::new(p.to_str().unwrap()).unwrap();
        // SAFETY: mkfifo with a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    };
    let quick = Duration::from_secs(20);
    // The trajectory file is a FIFO, then /dev/zero.
    let traj = ds.join("trajectories.jsonl");
    fifo(&traj);
    for args in [vec!["validate", s(&ds)], vec!["stats", s(&ds)]] {
        let o = run_for(&args, quick);
        let err = assert_clean("fifo", &o);
        assert!(!o.status.success());
        assert!(
            err.contains("trajectories.jsonl") && err.contains("FIFO"),
            "{err}"
        );
    }
    std::fs::remove_file(&traj).unwrap();
    std::os::unix::fs::symlink("/dev/zero", &traj).unwrap();
    let o = run_for(&["validate", s(&ds)], quick);
    let err = assert_clean("device", &o);
    assert!(err.contains("character device"), "{err}");
    std::fs::remove_file(&traj).unwrap();
    write_trajectories(&ds, &[trajectory("t1-a1", json!({"index": 1}))]);

    // A FIFO or device as an import input is refused before the dataset is locked:
    // the import after it goes through at once.
    let h = dir.path().join("h.json");
    fifo(&h);
    for input in [s(&h), "/dev/zero"] {
        let o = run_for(
            &[
                "import",
                "browser-use",
                "--dataset",
                s(&ds),
                input,
                "--task",
                "buy it",
            ],
            quick,
        );
        let err = assert_clean("fifo import", &o);
        assert!(!o.status.success());
        assert!(
            err.contains("FIFO") || err.contains("character device"),
            "{err}"
        );
    }
    let o = run_for(
        &[
            "import",
            "browser-use",
            "--dataset",
            s(&ds),
            s(&corpus("browser_use/ok_base.json")),
            "--task",
            "buy it",
        ],
        quick,
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    // An import never blocks on a FIFO screenshot either.
    let shot = dir.path().join("shot.png");
    fifo(&shot);
    let hist = dir.path().join("shot.json");
    std::fs::write(
        &hist,
        json!({"history": [{"model_output": null, "result": [], "state": {"screenshot_path": "shot.png"}}]})
            .to_string(),
    )
    .unwrap();
    let o = run_for(
        &[
            "import",
            "browser-use",
            "--dataset",
            s(&ds),
            s(&hist),
            "--task",
            "buy it",
        ],
        quick,
    );
    // Refused at once (the path check sees no regular file there), never read.
    let err = assert_clean("fifo screenshot", &o);
    assert!(!o.status.success());
    assert!(err.contains("shot.png"), "{err}");
}

#[test]
fn a_waiting_import_says_what_it_waits_for_and_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    let ds = dir.path().join("ds");
    dataset(&ds);
    // Another import holds the dataset lock.
    let holder = std::fs::File::open(&ds).unwrap();
    holder.lock().unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_rmsweb"))
        .args([
            "import",
            "browser-use",
            "--dataset",
            s(&ds),
            s(&corpus("browser_use/ok_base.json")),
            "--task",
            "buy it",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = child.stderr.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut b = Vec::new();
        stderr.read_to_end(&mut b).ok();
        String::from_utf8_lossy(&b).into_owned()
    });
    std::thread::sleep(Duration::from_secs(4));
    assert!(
        child.try_wait().unwrap().is_none(),
        "the import did not wait"
    );
    holder.unlock().unwrap();
    let status = child.wait().unwrap();
    let err = reader.join().unwrap();
    assert!(status.success(), "{err}");
    assert!(
        err.contains("waiting for the dataset") && err.contains("another import"),
        "{err}"
    );
    assert_eq!(
        JsonlFile::open(&ds.join("trajectories.jsonl"))
            .unwrap()
            .len(),
        2
    );
}

#[test]
fn staging_folders_of_a_dead_import_are_removed_by_the_next() {
    let dir = tempfile::tempdir().unwrap();
    let ds = dir.path().join("ds");
    dataset(&ds);
    // What kill -9 during an import leaves.
    let stale = ds.join(".import-Xk3f9a/t1-a2");
    std::fs::create_dir_all(&stale).unwrap();
    std::fs::write(stale.join("0.png"), b"png").unwrap();
    let o = run(&["validate", s(&ds)]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        out.contains(".import-Xk3f9a") && out.contains("interrupted import"),
        "{out}"
    );
    let o = import_history(&ds, &corpus("browser_use/ok_base.json"), "buy it");
    let err = assert_clean("import", &o);
    assert!(o.status.success(), "{err}");
    assert!(err.contains("removed the staging folder"), "{err}");
    assert!(!ds.join(".import-Xk3f9a").exists());
    let left: Vec<_> = std::fs::read_dir(&ds)
        .unwrap()
        .filter_map(Result::ok)
        .filter(|e| e.file_name().to_string_lossy().starts_with(".import-"))
        .collect();
    assert!(left.is_empty(), "{left:?}");
}

#[test]
fn a_complete_last_record_without_newline_survives_the_next_append() {
    let dir = tempfile::tempdir().unwrap();
    let ds = dir.path().join("ds");
    dataset(&ds);
    let traj = ds.join("trajectories.jsonl");
    let text = std::fs::read_to_string(&traj).unwrap();
    std::fs::write(&traj, text.trim_end()).unwrap();
    let o = run(&["validate", s(&ds)]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stdout));
    let o = import_history(&ds, &corpus("browser_use/ok_base.json"), "buy it");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let after = std::fs::read_to_string(&traj).unwrap();
    assert!(after.starts_with(&text), "the old last record was changed");
    assert_eq!(after.lines().count(), 2);
    // The annotation log: an event without its newline is read and kept.
    let log = rmsweb::annotate::AnnotationLog::for_dataset(&ds);
    std::fs::write(log.path(), event("accept", "p1").trim_end()).unwrap();
    assert_eq!(log.read().unwrap().len(), 1);
    log.append(&rmsweb::annotate::AnnotationEvent::now(
        "b",
        "p1",
        rmsweb::annotate::Op::Reject,
        Value::Null,
        Value::Null,
    ))
    .unwrap();
    let events = log.read().unwrap();
    assert_eq!(events.len(), 2);
    assert_eq!(events[0].op, rmsweb::annotate::Op::Accept);
    // A torn tail (it does not parse) is still what gets cut.
    std::fs::write(log.path(), format!("{}{{\"ts\": ", event("accept", "p1"))).unwrap();
    assert_eq!(log.read().unwrap().len(), 1);
}

/// A one-item history whose done text is `n` bytes long.
fn history_with_done_text(n: usize) -> String {
    json!({"history": [{"model_output": {"action": [{"done": {"text": "x".repeat(n), "success": true}}]},
        "result": [{"is_done": true, "success": true}], "state": {"url": "https://a.test"}}]})
    .to_string()
}

#[test]
fn import_never_writes_a_record_the_reader_refuses() {
    let dir = tempfile::tempdir().unwrap();
    let ds = dir.path().join("ds");
    dataset(&ds);
    let before = std::fs::read(ds.join("trajectories.jsonl")).unwrap();
    // 34 MiB of done text is stored twice (the action and the final answer): 68 MiB.
    let h = dir.path().join("big-done.json");
    std::fs::write(&h, history_with_done_text(34 << 20)).unwrap();
    let o = import_history(&ds, &h, "buy it");
    let err = assert_clean("big done", &o);
    assert!(!o.status.success());
    assert!(
        err.contains("history[0]") && err.contains("over the 64 MiB record limit"),
        "{err}"
    );
    assert_eq!(
        std::fs::read(ds.join("trajectories.jsonl")).unwrap(),
        before
    );
    let o = run(&["validate", s(&ds)]);
    assert!(o.status.success());

    // A 49 MB state message is refused before its elements are built.
    let mut msg = String::from("<browser_state>\n");
    let mut i = 0;
    while msg.len() < 49_000_000 {
        msg.push_str(&format!(
            "[{i}]<button aria-label=\"item {i}\" />\n\tBuy item {i}\n"
        ));
        i += 1;
    }
    msg.push_str("</browser_state>\n");
    let h = dir.path().join("big-state.json");
    std::fs::write(
        &h,
        json!({"history": [{"model_output": null, "result": [], "state": {"url": "https://a.test"},
            "state_message": msg}]})
        .to_string(),
    )
    .unwrap();
    drop(msg);
    let o = import_history(&ds, &h, "buy it");
    let err = assert_clean("big state", &o);
    assert!(!o.status.success());
    assert!(err.contains("state_message"), "{err}");
    // SAFETY: getrusage fills the struct we pass.
    let peak_kib = unsafe {
        let mut u: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_CHILDREN, &mut u);
        u.ru_maxrss
    };
    assert!(
        peak_kib < 600 * 1024,
        "a child used {} MiB",
        peak_kib / 1024
    );
    assert_eq!(
        std::fs::read(ds.join("trajectories.jsonl")).unwrap(),
        before
    );
}

/// The trajectory file with one more record, then `validate`'s output and status.
fn validate_with(ds: &Path, click: Value) -> (bool, String) {
    write_trajectories(ds, &[trajectory("t1-a1", click)]);
    let o = run(&["validate", s(ds)]);
    (
        o.status.success(),
        String::from_utf8_lossy(&o.stdout).into_owned(),
    )
}

#[test]
fn wrong_parameters_are_refused_by_import_and_validate() {
    let dir = tempfile::tempdir().unwrap();
    for name in [
        "click_index_null",
        "click_index_nan",
        "click_index_missing",
        "click_index_negative",
        "click_index_overflow",
        "navigate_url_number",
        "go_to_url_missing",
        "input_text_missing",
        "switch_tab_list",
        "duplicate_keys",
        "duplicate_top",
        "png_20000x20000",
    ] {
        let ds = dir.path().join(name);
        let h = corpus(&format!("browser_use/bad_{name}.json"));
        let o = import_history(&ds, &h, "t");
        let err = assert_clean(name, &o);
        assert!(!o.status.success(), "{name} was imported");
        assert!(
            err.contains("history[0]") || err.contains("(json)"),
            "{name}: {err}"
        );
        assert!(!ds.join("trajectories.jsonl").exists(), "{name}");
    }
    for name in ["base", "index_string", "coordinates", "inline_png"] {
        let ds = dir.path().join(name);
        let h = corpus(&format!("browser_use/ok_{name}.json"));
        let o = import_history(&ds, &h, "t");
        assert!(
            o.status.success(),
            "{name}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        let o = run(&["validate", s(&ds), "--images"]);
        assert!(
            o.status.success(),
            "{name}: {}",
            String::from_utf8_lossy(&o.stdout)
        );
    }

    let ds = dir.path().join("validate");
    dataset(&ds);
    for (click, field) in [
        (json!({"index": null}), "params.index"),
        (json!({"index": "NaN"}), "params.index"),
        (json!({}), "params.index"),
        (json!({"index": 4_294_967_299u64}), "params.index"),
    ] {
        let (ok, out) = validate_with(&ds, click.clone());
        assert!(!ok, "{click} validated clean:\n{out}");
        assert!(
            out.contains(&format!("steps[0].output.actions[0].{field}")),
            "{click}: {out}"
        );
    }
    // 2^32 + 1 is not index 1 (the element the state has).
    let (ok, out) = validate_with(&ds, json!({"index": 4_294_967_297u64}));
    assert!(!ok && out.contains("4294967297"), "{out}");
    let (ok, out) = validate_with(&ds, json!({"index": 1}));
    assert!(ok, "{out}");
    let (ok, out) = validate_with(&ds, json!({"index": 7}));
    assert!(ok && out.contains("index 7 is not among"), "{out}");
    let mut t = trajectory("t1-a1", json!({"index": 1}));
    t["steps"][0]["output"]["actions"][0] = json!({"name": "navigate", "params": {"url": 12}});
    write_trajectories(&ds, &[t]);
    let o = run(&["validate", s(&ds)]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(!o.status.success() && out.contains("params.url"), "{out}");
}

#[test]
fn validate_reads_every_file_of_the_dataset() {
    let dir = tempfile::tempdir().unwrap();
    let ds = dir.path().join("ds");
    dataset(&ds);
    let good = pair("p1", "detour");
    let mut dangling = pair("p2", "detour");
    dangling["loc"]["step"] = json!(9);
    let mut bad_target = pair("p3", "fail_contrast");
    bad_target["target_action"] = json!({"name": "click", "params": {"index": "NaN"}});
    std::fs::write(
        ds.join("mined/pairs.jsonl"),
        format!("{good}\n{dangling}\n{bad_target}\n{{\"id\": \"p4\"}}\n{good}\n"),
    )
    .unwrap();
    std::fs::write(
        ds.join("annotations.jsonl"),
        format!(
            "{}{}{}",
            event("accept", "p1"),
            event("frobnicate", "p1"),
            r#"{"ts": "2025-01-01T00:00:00Z", "annotator": "a", "pair_id": "p1", "op": "edit_target", "value": {"name": "click", "params": {"index": null}}, "prev": null}"#
        ),
    )
    .unwrap();
    std::fs::write(ds.join("mined/report.json"), "{\"a\": 1, \"a\": 2}").unwrap();
    std::fs::create_dir_all(ds.join("sft")).unwrap();
    std::fs::write(
        ds.join("sft/samples.jsonl"),
        "{\"x\": 1}\n{\"x\": 2, \"x\": 3}\n{\"x\": ",
    )
    .unwrap();
    std::fs::write(
        ds.join("tasks.jsonl"),
        "{\"task_id\": \"t1\", \"instruction\": \"a\", \"instruction\": \"b\"}\n",
    )
    .unwrap();
    let o = run(&["validate", s(&ds), "--json"]);
    assert!(!o.status.success());
    let report: Value = serde_json::from_slice(&o.stdout).unwrap();
    let findings = report["findings"].as_array().unwrap();
    let has = |file: &str, line: u64, field: &str, msg: &str| {
        findings.iter().any(|f| {
            f["file"].as_str().unwrap().ends_with(file)
                && f["line"] == line
                && f["field"].as_str().unwrap().contains(field)
                && f["message"].as_str().unwrap().contains(msg)
        })
    };
    let all = serde_json::to_string_pretty(findings).unwrap();
    assert!(
        has("mined/pairs.jsonl", 2, "loc.step", "past the end"),
        "{all}"
    );
    assert!(
        has(
            "mined/pairs.jsonl",
            3,
            "target_action.params.index",
            "index"
        ),
        "{all}"
    );
    assert!(has("mined/pairs.jsonl", 4, "", "missing field"), "{all}");
    assert!(
        has("mined/pairs.jsonl", 5, "id", "duplicate pair id"),
        "{all}"
    );
    assert!(has("annotations.jsonl", 2, "op", "frobnicate"), "{all}");
    assert!(has("annotations.jsonl", 3, "value", "edit_target"), "{all}");
    assert!(
        has("mined/report.json", 0, "(file)", "duplicate key `a`"),
        "{all}"
    );
    assert!(
        has("sft/samples.jsonl", 2, "(record)", "duplicate key `x`"),
        "{all}"
    );
    assert!(
        has("sft/samples.jsonl", 3, "(record)", "does not parse"),
        "{all}"
    );
    assert!(
        has("tasks.jsonl", 1, "(record)", "duplicate key `instruction`"),
        "{all}"
    );
    assert_eq!(report["pairs"], 3);
}

#[test]
fn annotate_refuses_a_dataset_of_another_schema() {
    let dir = tempfile::tempdir().unwrap();
    let ds = dir.path().join("ds");
    dataset(&ds);
    std::fs::write(
        ds.join("mined/pairs.jsonl"),
        format!("{}\n", pair("p1", "detour")),
    )
    .unwrap();
    std::fs::write(ds.join("annotations.jsonl"), event("accept", "p1")).unwrap();
    std::fs::write(ds.join("dataset.toml"), "name = \"x\"\nschema = 2\n").unwrap();
    for args in [
        vec!["annotate", "counts", s(&ds)],
        vec!["annotate", "export", s(&ds)],
    ] {
        let o = run(&args);
        let err = assert_clean("schema", &o);
        assert!(!o.status.success(), "{args:?} ignored schema 2");
        assert!(err.contains("schema = 2 is not supported"), "{err}");
    }
    assert!(!ds.join("mined/pairs.corrected.jsonl").exists());
}

#[test]
fn reward_batch_and_rl_groups_give_no_wrong_answer() {
    // Two cases on one line: an error for that line, not one dropped case.
    let o = run(&[
        "reward",
        "batch",
        s(&corpus("cases/two_cases_one_line.jsonl")),
    ]);
    assert!(!o.status.success());
    let lines: Vec<Value> = String::from_utf8_lossy(&o.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 2);
    assert!(lines[0]["error"].as_str().unwrap().contains("text after"));
    assert_eq!(lines[1]["score"], 1.0);

    // Huge rewards: an error line, never null statistics marked accepted.
    let o = run(&["rl", "groups", s(&corpus("groups/huge_rewards.jsonl"))]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(!o.status.success());
    assert!(!out.contains("null"), "{out}");
    let lines: Vec<Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert!(lines[0]["error"].as_str().unwrap().contains("rewards[0]"));
    assert_eq!(lines[1]["decision"], "accepted");
    assert_eq!(lines[2]["summary"]["groups"], 1);

    // A non-UTF-8 line is reported in place; the rest and the summary follow.
    let o = run(&["rl", "groups", s(&corpus("groups/non_utf8.jsonl"))]);
    let out = String::from_utf8_lossy(&o.stdout);
    let lines: Vec<Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 4, "{out}");
    assert!(lines[1]["error"].as_str().unwrap().contains("UTF-8"));
    assert_eq!(lines[3]["summary"]["groups"], 2);

    for bad in ["nan", "inf", "-0.5"] {
        let o = run(&[
            "rl",
            "groups",
            s(&corpus("groups/ok.jsonl")),
            &format!("--eps-sigma={bad}"),
        ]);
        assert_eq!(o.status.code(), Some(2), "--eps-sigma {bad} was accepted");
        assert!(String::from_utf8_lossy(&o.stderr).contains("--eps-sigma"));
    }
    let o = run(&[
        "rl",
        "groups",
        s(&corpus("groups/ok.jsonl")),
        "--r-comp",
        "NaN",
    ]);
    assert_eq!(o.status.code(), Some(2));
    for f in ["groups/duplicate_keys.jsonl", "groups/trailing_text.jsonl"] {
        let o = run(&["rl", "groups", s(&corpus(f))]);
        let out = String::from_utf8_lossy(&o.stdout);
        assert!(!o.status.success(), "{f}: {out}");
        assert!(
            out.lines().next().unwrap().contains("\"error\""),
            "{f}: {out}"
        );
    }
}

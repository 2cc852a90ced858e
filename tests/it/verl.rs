//! verl: `rmsweb export verl`, `rmsweb reward splice`, `rmsweb verl run`, and the
//! Python package (`python/`: the PyO3 extension and the Salvage-DS plugin) tested
//! against verl 0.9.1 on the CPU. The Python tests run in the venv that
//! `.ci/install-verl.sh` installs (`~/.cache/rmsweb/venv-verl`, or
//! `$RMSWEB_VERL_VENV`); without it they fail saying so. They import the extension
//! that the test builds with cargo from the current sources.

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn rmsweb(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_rmsweb"))
        .args(args)
        .output()
        .unwrap()
}

pub fn venv() -> PathBuf {
    if let Some(v) = std::env::var_os("RMSWEB_VERL_VENV") {
        return v.into();
    }
    let cache = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(std::env::var_os("HOME").unwrap()).join(".cache"));
    cache.join("rmsweb").join("venv-verl")
}

#[test]
fn export_writes_the_layout_and_refuses_bad_input() {
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("x");
    let fixtures = repo().join("fixtures");
    let o = rmsweb(&[
        "export",
        "verl",
        fixtures.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    for f in [
        "train.parquet",
        "val.parquet",
        "salvage_ds.yaml",
        "run.sh",
        "README.md",
        "export.json",
    ] {
        assert!(out.join(f).is_file(), "{f}");
    }
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(out.join("run.sh"))
        .unwrap()
        .permissions()
        .mode();
    assert!(mode & 0o100 != 0, "run.sh is executable");
    let m: Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("export.json")).unwrap()).unwrap();
    let r = &m["report"];
    let pairs = std::fs::read_to_string(fixtures.join("mined/pairs.jsonl"))
        .unwrap()
        .lines()
        .filter(|l| !l.trim().is_empty())
        .count() as u64;
    assert_eq!(
        r["train"].as_u64().unwrap() + r["val"].as_u64().unwrap(),
        pairs
    );
    assert!(r["val"].as_u64().unwrap() > 0 && r["val_tasks"].as_u64().unwrap() > 0);
    let yaml = std::fs::read_to_string(out.join("salvage_ds.yaml")).unwrap();
    assert!(
        yaml.contains(
            &out.canonicalize()
                .unwrap()
                .join("train.parquet")
                .display()
                .to_string()
        )
    );
    // Bad input: a clear error, nothing half-written.
    let o = rmsweb(&[
        "export",
        "verl",
        fixtures.to_str().unwrap(),
        "--out",
        d.path().join("y").to_str().unwrap(),
        "--val-share",
        "1.5",
    ]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("--val-share 1.5"));
    assert!(!d.path().join("y").exists());
    let o = rmsweb(&[
        "export",
        "verl",
        d.path().join("nope").to_str().unwrap(),
        "--out",
        "z",
    ]);
    assert!(!o.status.success());
}

#[test]
fn reward_splice_reports_bad_lines_in_place() {
    use std::io::Write;
    let mut child = Command::new(env!("CARGO_BIN_EXE_rmsweb"))
        .args(["reward", "splice", "-"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let input = concat!(
        r#"{"response": "I think click(3)", "action": {"name": "click", "params": {"index": 5}}}"#,
        "\n",
        r#"{"response": 4, "action": {"name": "click"}}"#,
        "\n\n",
        r#"{"response": "x", "action": []}"#,
        "\n",
    );
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(!out.status.success());
    let lines: Vec<Value> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 3);
    assert_eq!(lines[0]["text"], "I think click(5)");
    assert_eq!(lines[0]["action_text"], "click(5)");
    assert_eq!(lines[0]["action_span"], serde_json::json!([8, 16]));
    assert_eq!(
        (lines[1]["line"].as_u64(), lines[2]["line"].as_u64()),
        (Some(2), Some(4))
    );
    assert!(lines[1]["error"].as_str().unwrap().contains("response"));
    assert!(lines[2]["error"].as_str().unwrap().starts_with("action"));
}

/// A stand-in for `python3 -m verl.trainer.main_ppo`: records its arguments and
/// environment, writes two metrics lines where verl's file logger would, and exits
/// with `$FAKE_EXIT`.
const FAKE_PYTHON: &str = r#"#!/usr/bin/env bash
if [ "$1" = "-c" ]; then exit 0; fi
printf '%s\n' "$@" > "$(dirname "$VERL_FILE_LOGGER_PATH")/args.txt"
env | grep -E '^(RAY_ADDRESS|VERL_USE_EXTERNAL_MODULES|MODE)=' | sort > "$(dirname "$VERL_FILE_LOGGER_PATH")/env.txt"
printf '{"step":1,"data":{"critic/score/mean":0.5,"response_length/mean":12,"actor/pg_loss":null}}\n' > "$VERL_FILE_LOGGER_PATH"
printf '{"step":2,"data":{"critic/score/mean":0.6,"response_length/mean":14,"actor/pg_loss":0.1}}\n' >> "$VERL_FILE_LOGGER_PATH"
exit "${FAKE_EXIT:-0}"
"#;

fn fake_python(dir: &Path) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let p = dir.join("fake-python");
    std::fs::write(&p, FAKE_PYTHON).unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    p
}

#[test]
fn verl_run_supervises_attempts_in_a_run_folder() {
    let d = tempfile::tempdir().unwrap();
    let export = d.path().join("export");
    let o = rmsweb(&[
        "export",
        "verl",
        repo().join("fixtures").to_str().unwrap(),
        "--out",
        export.to_str().unwrap(),
    ]);
    assert!(o.status.success());
    let py = fake_python(d.path());
    let run = d.path().join("runs/verl-1");
    let o = Command::new(env!("CARGO_BIN_EXE_rmsweb"))
        .args(["verl", "run", export.to_str().unwrap(), "--run-dir"])
        .arg(&run)
        .args([
            "--nodes",
            "2",
            "--ray-address",
            "10.9.8.7:6379",
            "--model",
            "/ckpt/m",
        ])
        .args(["--mode", "dapo", "--python"])
        .arg(&py)
        .args(["--", "trainer.total_training_steps=2"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let args = std::fs::read_to_string(run.join("args.txt")).unwrap();
    for want in [
        "verl.trainer.main_ppo",
        "--config-name",
        "actor_rollout_ref.model.path=/ckpt/m",
        "trainer.nnodes=2",
        "trainer.n_gpus_per_node=8",
        "trainer.v1.sampler.sampler_kwargs.mode=dapo",
        "actor_rollout_ref.actor.clip_ratio_high=0.28",
        "trainer.total_training_steps=2",
    ] {
        assert!(
            args.lines().any(|l| l == want || l.ends_with(want)),
            "{want}: {args}"
        );
    }
    assert!(args.contains(&format!(
        "trainer.default_local_dir={}",
        run.canonicalize().unwrap().join("checkpoints").display()
    )));
    let env = std::fs::read_to_string(run.join("env.txt")).unwrap();
    assert!(
        env.contains("RAY_ADDRESS=10.9.8.7:6379") && env.contains("MODE=dapo"),
        "{env}"
    );
    let status: Value =
        serde_json::from_str(&std::fs::read_to_string(run.join("status.json")).unwrap()).unwrap();
    assert_eq!(status["state"], "finished");
    let cfg = std::fs::read_to_string(run.join("run.toml")).unwrap();
    assert!(
        cfg.contains("kind = \"verl\"") && cfg.contains("nodes = 2"),
        "{cfg}"
    );
    assert!(run.join("metrics.attempt-1.jsonl").is_file());
    // A second attempt (resume) fails: its own metrics file, the first one kept.
    let o = Command::new(env!("CARGO_BIN_EXE_rmsweb"))
        .args(["verl", "resume"])
        .arg(&run)
        .env("FAKE_EXIT", "3")
        .output()
        .unwrap();
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("code 3"));
    let status: Value =
        serde_json::from_str(&std::fs::read_to_string(run.join("status.json")).unwrap()).unwrap();
    assert_eq!(status["state"], "failed");
    assert!(
        run.join("metrics.attempt-1.jsonl").is_file()
            && run.join("metrics.attempt-2.jsonl").is_file()
    );
    assert_eq!(
        std::fs::read_link(run.join("metrics.jsonl")).unwrap(),
        PathBuf::from("metrics.attempt-2.jsonl")
    );
    // The Runs tab's monitor reads it as a verl run with a gap.
    let mut w = rmsweb::runs::Watcher::new(Some(d.path().join("runs")), &[]);
    let mut st = rmsweb::runs::RunsState::default();
    st.apply(w.poll());
    let t = &st.runs[0];
    assert_eq!(t.kind(), Some("verl"));
    assert_eq!(t.info.config.preset.as_deref(), Some("2x8 GPU"));
    assert_eq!(t.series.latest("response_length/mean"), Some(14.0));
    assert_eq!(t.series.get("actor/pg_loss").unwrap().gaps(), 1);
    // Bad settings are refused before anything starts.
    let o = rmsweb(&[
        "verl",
        "run",
        export.to_str().unwrap(),
        "--run-dir",
        d.path().join("runs/verl-2").to_str().unwrap(),
        "--nodes",
        "2",
    ]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("ray address"));
}

/// The package as the tests import it: `python/rmsweb_verl` with the extension built
/// from the current sources by cargo (into this test build's target folder; cargo
/// rebuilds it only when a source changed), and a dist-info holding its
/// `verl.plugins` entry point — what `pip install ./python` installs.
fn stage_package() -> PathBuf {
    let debug = Path::new(env!("CARGO_BIN_EXE_rmsweb")).parent().unwrap();
    let target = debug.parent().unwrap();
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let out = std::process::Command::new(cargo)
        .args([
            "build",
            "--quiet",
            "-p",
            "rmsweb-verl",
            "--lib",
            "--manifest-path",
        ])
        .arg(repo().join("Cargo.toml"))
        .arg("--target-dir")
        .arg(target)
        .output()
        .expect("run cargo");
    assert!(
        out.status.success(),
        "building the rmsweb_verl extension failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let so = debug.join("lib_native.so");
    assert!(so.is_file(), "{} is missing after the build", so.display());
    let stage = debug.join("verl-py");
    let pkg = stage.join("rmsweb_verl");
    let _ = std::fs::remove_dir_all(&stage);
    std::fs::create_dir_all(&pkg).unwrap();
    for e in std::fs::read_dir(repo().join("python/rmsweb_verl")).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_some_and(|x| x == "py") {
            std::fs::copy(&p, pkg.join(p.file_name().unwrap())).unwrap();
        }
    }
    std::fs::copy(&so, pkg.join("_native.abi3.so")).unwrap();
    let info = stage.join("rmsweb_verl-0.1.0.dist-info");
    std::fs::create_dir_all(&info).unwrap();
    std::fs::write(
        info.join("METADATA"),
        "Metadata-Version: 2.1\nName: rmsweb-verl\nVersion: 0.1.0\n",
    )
    .unwrap();
    std::fs::write(
        info.join("entry_points.txt"),
        "[verl.plugins]\nrmsweb_verl = rmsweb_verl.plugin\n",
    )
    .unwrap();
    stage
}

#[test]
fn python_plugin_tests_pass_against_verl() {
    let venv = venv();
    let py = venv.join("bin").join("python");
    assert!(
        py.is_file(),
        "the verl venv is missing at {} (run `.ci/install-verl.sh`: verl 0.9.1 and its CPU \
         dependencies, ~5 GB)",
        venv.display()
    );
    let stage = stage_package();
    let o = Command::new(&py)
        .args([
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "python/tests",
        ])
        .current_dir(repo())
        .env("RMSWEB_BIN", env!("CARGO_BIN_EXE_rmsweb"))
        .env("PYTHONPATH", &stage)
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&o.stdout);
    println!("{}", tail(&o.stdout, 4000));
    assert!(
        o.status.success(),
        "pytest failed:\n{}\n{}",
        tail(&o.stdout, 12000),
        tail(&o.stderr, 4000)
    );
    assert!(stdout.contains(" passed"), "{stdout}");
}

fn tail(bytes: &[u8], n: usize) -> String {
    let s = String::from_utf8_lossy(bytes);
    let start = s.len().saturating_sub(n);
    let mut i = start;
    while !s.is_char_boundary(i) {
        i += 1;
    }
    s[i..].to_string()
}

//! Files read outside the dataset store (round 3): screenshots an export embeds,
//! recipe stage records and configs go through one bounded, regular-file-only
//! reader, so a FIFO is refused at once instead of hanging the command and an
//! oversized file is refused instead of read whole; `validate` checks screenshots
//! the same way. Also: log lines carry no colour codes when stderr is no terminal,
//! and an import's screenshot path outside the history's folder says so.

use super::hostile::{assert_clean, dataset, import_history, run_for, s};
use super::tui_data::copy_fixtures;
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::time::Duration;

const QUICK: Duration = Duration::from_secs(30);

fn mkfifo(p: &Path) {
    std::fs::remove_file(p).ok();
    let c = std::ffi::CString::new(p.to_str().unwrap()).unwrap();
    // SAFETY: mkfifo with a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
}

/// A sparse file of `len` bytes (no disk used).
fn sparse(p: &Path, len: u64) {
    std::fs::remove_file(p).ok();
    std::fs::File::create(p).unwrap().set_len(len).unwrap();
}

fn screenshots(ds: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for d in std::fs::read_dir(ds.join("screenshots")).unwrap() {
        for f in std::fs::read_dir(d.unwrap().path()).unwrap() {
            out.push(f.unwrap().path());
        }
    }
    out.sort();
    out
}

/// `export verl --images` read every screenshot with no check: a FIFO hung it, a
/// huge file was read whole. `validate` said nothing of either.
#[test]
fn exports_and_validate_refuse_fifo_and_oversized_screenshots() {
    let dir = tempfile::tempdir().unwrap();
    let ds = dir.path().join("ds");
    copy_fixtures(&ds);
    let shots = screenshots(&ds);
    for (i, (kind, says)) in [("fifo", "FIFO"), ("huge", "over the 64 MiB limit")]
        .into_iter()
        .enumerate()
    {
        for p in &shots {
            match kind {
                "fifo" => mkfifo(p),
                _ => sparse(p, 300 << 20),
            }
        }
        let out = dir.path().join(format!("verl-{i}"));
        let o = run_for(
            &[
                "export",
                "verl",
                "--dataset",
                s(&ds),
                "--out",
                s(&out),
                "--images",
            ],
            QUICK,
        );
        let err = assert_clean(kind, &o);
        assert!(!o.status.success(), "{kind}: the export went through");
        assert!(
            err.contains("screenshots/") && err.contains(says),
            "{kind}: {err}"
        );
        assert!(!out.join("train.parquet").exists(), "{kind}");
        let o = run_for(&["validate", "--dataset", s(&ds), "--json"], QUICK);
        assert!(!o.status.success(), "{kind}: validate found nothing");
        let report: Value = serde_json::from_slice(&o.stdout).unwrap();
        let flagged = report["findings"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|f| {
                f["field"].as_str().unwrap().ends_with("state.screenshot")
                    && f["message"].as_str().unwrap().contains(says)
            })
            .count();
        assert_eq!(flagged, shots.len(), "{kind}: {report}");
    }
}

/// A FIFO among the recipe's stage records hung `recipe status`; a link to
/// /dev/zero grew without bound. Each is reported as an unreadable record.
#[test]
fn recipe_status_refuses_special_stage_records() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let config = Path::new(env!("CARGO_MANIFEST_DIR")).join("recipe-smoke.toml");
    std::fs::create_dir_all(out.join("stages")).unwrap();
    mkfifo(&out.join("stages/collect.reflection.json"));
    std::os::unix::fs::symlink("/dev/zero", out.join("stages/collect.baseline.json")).unwrap();
    let o = run_for(
        &["recipe", "status", "--config", s(&config), "--out", s(&out)],
        QUICK,
    );
    assert_clean("status", &o);
    let text = String::from_utf8_lossy(&o.stdout);
    let line = |unit: &str| {
        text.lines()
            .find(|l| l.starts_with(unit))
            .unwrap_or_else(|| panic!("no {unit} in {text}"))
            .to_string()
    };
    let l = line("collect/reflection ");
    assert!(l.contains("unreadable") && l.contains("FIFO"), "{l}");
    let l = line("collect/baseline ");
    assert!(
        l.contains("unreadable") && l.contains("character device"),
        "{l}"
    );
}

/// Log lines written to a pipe or a file carried ANSI colour codes.
#[test]
fn log_lines_carry_no_colour_codes_off_a_terminal() {
    let dir = tempfile::tempdir().unwrap();
    let ds = dir.path().join("ds");
    dataset(&ds);
    // A filter report newer than the records but unreadable: a warning, then a new run.
    std::fs::create_dir_all(ds.join("sft")).unwrap();
    std::thread::sleep(Duration::from_millis(20));
    std::fs::write(ds.join("sft/filter.json"), "{not json").unwrap();
    let o = run_for(&["curate", "flatten", "--dataset", s(&ds)], QUICK);
    let err = assert_clean("curate flatten", &o);
    assert!(err.contains("unreadable filter report"), "{err}");
}

/// A relative screenshot path that leaves the history's folder is refused naming
/// that folder, not the dataset root.
#[test]
fn an_import_path_outside_the_history_folder_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let hist_dir = dir.path().join("histories");
    std::fs::create_dir_all(&hist_dir).unwrap();
    let h = hist_dir.join("h.json");
    std::fs::write(
        &h,
        json!({"history": [{"model_output": null, "result": [],
            "state": {"url": "https://a.test", "screenshot_path": "../outside.png"}}]})
        .to_string(),
    )
    .unwrap();
    let o = import_history(&dir.path().join("ds"), &h, "t");
    let err = assert_clean("import", &o);
    assert!(!o.status.success());
    assert!(
        err.contains("../outside.png") && err.contains("history's folder"),
        "{err}"
    );
    assert!(!err.contains("dataset root"), "{err}");
}

//! One convention for the dataset argument: every subcommand that reads or writes a
//! dataset takes `--dataset DIR`; the positional spelling some took first still works
//! and gives the same answer.

use std::path::Path;
use std::process::{Command, Output};

fn rmsweb(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_rmsweb"))
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .unwrap()
}

fn stdout(o: &Output) -> String {
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// The id of the fixtures' first trajectory.
fn first_trajectory() -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/trajectories.jsonl");
    let text = std::fs::read_to_string(path).unwrap();
    let v: serde_json::Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
    v["id"].as_str().unwrap().to_string()
}

#[test]
fn every_dataset_subcommand_takes_the_dataset_flag() {
    for cmd in [
        &["validate"][..],
        &["stats"],
        &["show"],
        &["curate", "flatten"],
        &["curate", "filter"],
        &["export", "sft"],
        &["export", "verl"],
        &["annotate", "export"],
        &["annotate", "counts"],
        &["mine"],
        &["mine", "explain"],
        &["collect"],
        &["eval"],
        &["import", "browser-use"],
        &["train", "sft"],
    ] {
        let help = stdout(&rmsweb(&[cmd, &["--help"]].concat()));
        assert!(
            help.contains("--dataset <DIR>") || help.contains("--dataset <DATASET>"),
            "`rmsweb {}` has no --dataset:\n{help}",
            cmd.join(" ")
        );
    }
}

/// A pair of the fixtures' mined corpus.
const PAIR: &str = "choose-list-s2-a2@1~choose-list-s2-a1@3";

#[test]
fn the_positional_spelling_still_gives_the_same_answer() {
    let id = first_trajectory();
    for (flag, positional) in [
        (
            vec!["validate", "--dataset", "fixtures"],
            vec!["validate", "fixtures"],
        ),
        (
            vec!["stats", "--dataset", "fixtures", "--json"],
            vec!["stats", "fixtures", "--json"],
        ),
        (
            vec!["show", "--dataset", "fixtures", &id, "--no-image"],
            vec!["show", "fixtures", &id, "--no-image"],
        ),
        (
            vec!["mine", "explain", "--dataset", "fixtures", PAIR, "--json"],
            vec!["mine", "explain", "fixtures", PAIR, "--json"],
        ),
        (
            vec!["annotate", "counts", "--dataset", "fixtures", "--json"],
            vec!["annotate", "counts", "fixtures", "--json"],
        ),
    ] {
        assert_eq!(
            stdout(&rmsweb(&flag)),
            stdout(&rmsweb(&positional)),
            "{flag:?} vs {positional:?}"
        );
    }
    let help = stdout(&rmsweb(&["validate", "--help"]));
    assert!(help.contains("older spelling of --dataset"), "{help}");
}

#[test]
fn a_missing_or_doubled_dataset_is_a_clear_error() {
    let none = rmsweb(&["validate"]);
    assert!(!none.status.success());
    let err = String::from_utf8_lossy(&none.stderr);
    assert!(err.contains("--dataset <DIR>"), "{err}");
    let both = rmsweb(&["stats", "fixtures", "--dataset", "fixtures"]);
    assert!(!both.status.success());
    let err = String::from_utf8_lossy(&both.stderr);
    assert!(err.contains("cannot be used with"), "{err}");
    let id = first_trajectory();
    let both = rmsweb(&["show", "--dataset", "fixtures", "fixtures", &id]);
    assert!(!both.status.success());
    let err = String::from_utf8_lossy(&both.stderr);
    assert!(err.contains("named twice"), "{err}");
    let missing = rmsweb(&["mine", "explain"]);
    assert!(!missing.status.success());
    let err = String::from_utf8_lossy(&missing.stderr);
    assert!(err.contains("--dataset DIR"), "{err}");
}

/// `show --save-image` writes the step's screenshot with its target's box drawn
/// (magenta, just outside the element), and never overwrites a file.
#[test]
fn show_saves_the_screenshot_with_the_target_drawn() {
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("step0.png");
    let out_s = out.to_str().unwrap();
    let id = "login-user-s0-a1";
    let o = rmsweb(&[
        "show",
        "--dataset",
        "fixtures",
        id,
        "--no-image",
        "--save-image",
        out_s,
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let img = image::open(&out).unwrap().into_rgba8();
    let ds = rmsweb::trajectory::Dataset::open(std::path::Path::new("fixtures")).unwrap();
    let t = ds.trajectory_by_id(id).unwrap().unwrap();
    let step = &t.steps[0];
    let target = step.output.actions[0].target_index().unwrap();
    let e = step
        .state
        .elements
        .iter()
        .find(|e| i64::from(e.index) == target)
        .unwrap();
    let (x, y) = (e.bbox[0] as u32 + 5, e.bbox[1] as u32);
    assert_eq!(
        img.get_pixel(x, y - 1).0,
        [255, 0, 255, 255],
        "above the box's top edge"
    );
    assert_ne!(
        img.get_pixel(x, y + 3).0,
        [255, 0, 255, 255],
        "inside the box"
    );
    let again = rmsweb(&[
        "show",
        "--dataset",
        "fixtures",
        id,
        "--no-image",
        "--save-image",
        out_s,
    ]);
    assert!(!again.status.success());
    assert!(String::from_utf8_lossy(&again.stderr).contains("step0.png"));
}

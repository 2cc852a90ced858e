//! Hostile recipe folders and configs (round 3): `recipe run --out` never takes over
//! a folder it did not make, never follows a link out of its own, and clears only
//! what its records name; every config value is checked when the file loads, with
//! errors that name the key and quote at most 200 bytes of the value.

use super::hostile::{assert_clean, run_for, s};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

const QUICK: Duration = Duration::from_secs(60);

fn smoke() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("recipe-smoke.toml")
}

/// Every file under `root` and its bytes (links as their target).
fn files(root: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    fn walk(root: &Path, dir: &Path, out: &mut BTreeMap<PathBuf, Vec<u8>>) {
        for e in std::fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            let rel = p.strip_prefix(root).unwrap().to_path_buf();
            let meta = std::fs::symlink_metadata(&p).unwrap();
            if meta.file_type().is_symlink() {
                out.insert(
                    rel,
                    std::fs::read_link(&p)
                        .unwrap()
                        .into_os_string()
                        .into_encoded_bytes(),
                );
            } else if meta.is_dir() {
                walk(root, &p, out);
            } else {
                out.insert(rel, std::fs::read(&p).unwrap());
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(root, root, &mut out);
    out
}

/// `recipe run --config recipe-smoke.toml --out OUT --stages STAGES`: its stderr,
/// after checking it failed and printed nothing a terminal would act on.
fn refused_run(out: &Path, stages: &str) -> String {
    let o = run_for(
        &[
            "recipe",
            "run",
            "--config",
            s(&smoke()),
            "--out",
            s(out),
            "--stages",
            stages,
        ],
        QUICK,
    );
    let err = assert_clean(&format!("recipe run --out {}", out.display()), &o);
    assert!(
        !o.status.success(),
        "recipe run --out {} went on",
        out.display()
    );
    err
}

/// A folder of the user's (its own `recipe.toml`, `data/`, `collect/`) was taken
/// over: its recipe.toml overwritten, its data deleted. Through a symlink too.
#[test]
fn recipe_run_never_takes_over_a_folder_it_did_not_make() {
    let dir = tempfile::tempdir().unwrap();
    let mine = dir.path().join("mine");
    std::fs::create_dir_all(mine.join("data/reflection")).unwrap();
    std::fs::create_dir_all(mine.join("collect")).unwrap();
    std::fs::write(mine.join("recipe.toml"), "# my own notes\n").unwrap();
    std::fs::write(mine.join("data/reflection/keep.txt"), "keep").unwrap();
    std::fs::write(mine.join("collect/reflection.json"), "{}").unwrap();
    let before = files(&mine);
    let link = dir.path().join("link");
    std::os::unix::fs::symlink(&mine, &link).unwrap();
    for out in [&mine, &link] {
        let err = refused_run(out, "report");
        assert!(
            err.contains("not a recipe folder") && err.contains(s(out)),
            "{err}"
        );
        assert_eq!(files(&mine), before, "--out {} changed it", out.display());
    }

    // A new folder becomes a recipe folder; a link planted inside it is not
    // followed, and a folder in an output's place that no record names stays.
    let fresh = dir.path().join("fresh");
    refused_run(&fresh, "report");
    assert!(fresh.join("recipe.toml").is_file());
    let elsewhere = dir.path().join("elsewhere");
    std::fs::create_dir_all(elsewhere.join("reflection")).unwrap();
    std::fs::write(elsewhere.join("reflection/keep.txt"), "keep").unwrap();
    std::os::unix::fs::symlink(&elsewhere, fresh.join("data")).unwrap();
    let err = refused_run(&fresh, "collect");
    assert!(err.contains("link") && err.contains("data"), "{err}");
    assert!(elsewhere.join("reflection/keep.txt").is_file());
    std::fs::remove_file(fresh.join("data")).unwrap();
    std::fs::create_dir_all(fresh.join("data/reflection")).unwrap();
    std::fs::write(fresh.join("data/reflection/notes.txt"), "mine").unwrap();
    let err = refused_run(&fresh, "collect");
    assert!(
        err.contains("data/reflection") && err.contains("no record"),
        "{err}"
    );
    assert!(fresh.join("data/reflection/notes.txt").is_file());
}

/// `recipe status --config CFG` (nothing runs): its stderr, after checking it
/// failed and printed nothing a terminal would act on.
fn refused_config(what: &str, cfg: &Path) -> String {
    let out = cfg.with_extension("out");
    let o = run_for(
        &["recipe", "status", "--config", s(cfg), "--out", s(&out)],
        QUICK,
    );
    let err = assert_clean(what, &o);
    assert!(!o.status.success(), "{what}: accepted");
    err
}

/// Values that only failed when their stage ran (after collection and SFT), or
/// never: each is refused when the config loads, naming its key.
#[test]
fn recipe_configs_fail_at_load_naming_the_key() {
    let dir = tempfile::tempdir().unwrap();
    let cases: Vec<(String, &str)> = vec![
        ("[rl]\nsteps = 0\n".into(), "rl.steps"),
        ("[sft]\nsteps = 0\n".into(), "sft.steps"),
        ("[sft.set]\nlr = nan\n".into(), "sft.set.lr"),
        (
            "[sft.set]\nwarmup_ratio = 2.0\n".into(),
            "sft.set.warmup_ratio",
        ),
        ("[rl.set]\nlr = inf\n".into(), "rl.set.lr"),
        ("[rl.set]\nkl_coef = -1.0\n".into(), "rl.set.kl_coef"),
        (
            "[collect]\nseed_start = 18446744073709551615\n".into(),
            "collect.seed_start",
        ),
        (
            "[eval]\nseed_start = 18446744073709551610\nepisodes = 10\n".into(),
            "eval.seed_start",
        ),
    ];
    for (i, (section, key)) in cases.iter().enumerate() {
        let cfg = dir.path().join(format!("c{i}.toml"));
        std::fs::write(&cfg, format!("tasks = [\"click-button\"]\n{section}")).unwrap();
        let err = refused_config(key, &cfg);
        assert!(err.contains(&format!("`{key}`")), "{key}: {err}");
    }
    // A 3 MB name is quoted in 200 bytes, not echoed whole: a task the teacher
    // does not know, one holding a raw escape TOML refuses, keys the trainers and
    // the miner do not know and a value of the wrong type.
    let big = "n".repeat(3 << 20);
    for (name, text, says) in [
        ("unknown", format!("tasks = [\"{big}\"]\n"), "tasks[0]"),
        (
            "escape",
            format!("tasks = [\"{big}\x1b[31m\"]\n"),
            "line 1, column",
        ),
        (
            "set-key",
            format!("tasks = [\"click-button\"]\n[sft.set]\n{big} = 1\n"),
            "unknown key",
        ),
        (
            "set-value",
            format!("tasks = [\"click-button\"]\n[rl.set]\nlr = \"{big}\"\n"),
            "field `lr`",
        ),
        (
            "mine-key",
            format!("tasks = [\"click-button\"]\n[mine]\n{big} = 1\n"),
            "unknown field",
        ),
    ] {
        let cfg = dir.path().join(format!("{name}.toml"));
        std::fs::write(&cfg, text).unwrap();
        let err = refused_config(name, &cfg);
        assert!(
            err.contains(says) && err.contains(s(&cfg)),
            "{name}: {}",
            &err[..err.len().min(500)]
        );
        assert!(err.len() < 2000, "{name}: a {}-byte error", err.len());
    }
}

//! `rmsweb curate flatten` and `rmsweb export sft` on a copy of the bundled fixtures
//! (live MiniWoB runs) and, where a test needs extract steps or long element lists, of
//! the mock-site dataset: per-step action samples through the project prompt
//! renderer, extraction samples,
//! screenshots, reflections, exports for LLaMA-Factory and ms-swift, and SFT reading
//! exactly these samples.

use crate::tui_data::{copy_fixtures, copy_mocksites};
use rmsweb::action::parse::parse_response;
use rmsweb::curate::flatten::{DEFAULT_MAX_STEPS, Sample, SampleKind, read_samples};
use rmsweb::policy::prompt::{CharApprox, PROMPT_FORMAT_VERSION, PromptInput, PromptOptions};
use rmsweb::policy::render::render;
use rmsweb::trajectory::{Dataset, Trajectory};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::{Command, Output};

fn rmsweb(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_rmsweb"))
        .args(args)
        .output()
        .unwrap()
}

fn ok(out: Output) -> String {
    assert!(
        out.status.success(),
        "failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// A temp copy of the fixtures, flattened through the command line.
fn flattened() -> (tempfile::TempDir, Vec<Sample>) {
    flattened_copy(copy_fixtures)
}

/// A temp copy of a dataset written by `copy`, flattened through the command line.
fn flattened_copy(copy: fn(&Path)) -> (tempfile::TempDir, Vec<Sample>) {
    let d = tempfile::tempdir().unwrap();
    copy(d.path());
    let root = d.path().to_str().unwrap();
    let stdout = ok(rmsweb(&["curate", "flatten", root]));
    assert!(stdout.contains("samples from"), "{stdout}");
    let samples = read_samples(&d.path().join("sft/samples.jsonl")).unwrap();
    (d, samples)
}

fn kept_ids(root: &Path) -> Vec<String> {
    let v: Value =
        serde_json::from_str(&std::fs::read_to_string(root.join("sft/filter.json")).unwrap())
            .unwrap();
    v["kept"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| k["id"].as_str().unwrap().to_string())
        .collect()
}

fn all_trajectories(ds: &Dataset) -> Vec<Trajectory> {
    (0..ds.trajectory_count())
        .map(|i| ds.trajectory(i).unwrap())
        .collect()
}

#[test]
fn one_action_sample_per_step_of_each_kept_trajectory_and_none_from_rejected() {
    let (d, samples) = flattened();
    let ds = Dataset::open(d.path()).unwrap();
    let kept = kept_ids(d.path());
    let trajs = all_trajectories(&ds);
    let rejected: Vec<&Trajectory> = trajs.iter().filter(|t| !kept.contains(&t.id)).collect();
    assert!(
        !kept.is_empty() && !rejected.is_empty(),
        "fixtures have both"
    );
    for t in &rejected {
        assert!(
            samples.iter().all(|s| s.trajectory != t.id),
            "rejected {} was flattened",
            t.id
        );
    }
    let tasks: BTreeMap<String, String> = ds
        .tasks()
        .unwrap()
        .into_iter()
        .map(|t| (t.task_id, t.instruction))
        .collect();
    let mut total = 0;
    for t in trajs.iter().filter(|t| kept.contains(&t.id)) {
        let actions: Vec<&Sample> = samples
            .iter()
            .filter(|s| s.trajectory == t.id && s.kind == SampleKind::Action)
            .collect();
        assert_eq!(actions.len(), t.steps.len(), "{}", t.id);
        total += actions.len();
        for (i, (s, step)) in actions.iter().zip(&t.steps).enumerate() {
            assert_eq!(s.step, step.index);
            assert_eq!(s.task_id, t.task_id);
            assert_eq!(s.prompt_format, PROMPT_FORMAT_VERSION);
            // The prompt is exactly the project renderer's.
            let r = render(
                &PromptInput {
                    instruction: &tasks[&t.task_id],
                    state: &step.state,
                    history: &t.steps[..i],
                    reflection: t.reflection.as_deref(),
                    max_steps: DEFAULT_MAX_STEPS.max(t.steps.len()),
                    screenshot: None,
                },
                &PromptOptions::default(),
                &CharApprox,
            );
            assert_eq!(s.messages.len(), r.messages.len() + 1);
            for (m, want) in s.messages.iter().zip(&r.messages) {
                assert_eq!((&m.role, &m.content), (&want.role, &want.content));
            }
            // The target is the step's output in Browser Use form, parseable back.
            let last = s.messages.last().unwrap();
            assert_eq!(last.role, "assistant");
            assert_eq!(last.content, step.output.browser_use_json());
            let parsed = parse_response(&last.content).unwrap();
            assert_eq!(parsed.actions, step.output.actions);
            // Images: the step's screenshot when the file exists, and it does.
            for img in &s.images {
                assert!(d.path().join(img).is_file(), "{img}");
                assert_eq!(Some(img), step.state.screenshot.as_ref());
            }
            let has_shot = step
                .state
                .screenshot
                .as_ref()
                .is_some_and(|p| d.path().join(p).is_file());
            assert_eq!(s.images.len(), usize::from(has_shot));
        }
    }
    assert_eq!(
        samples
            .iter()
            .filter(|s| s.kind == SampleKind::Action)
            .count(),
        total
    );
    assert!(samples.iter().any(|s| !s.images.is_empty()));
    // Ids are unique.
    let ids: BTreeSet<&str> = samples.iter().map(|s| s.id.as_str()).collect();
    assert_eq!(ids.len(), samples.len());
}

#[test]
fn extraction_samples_exactly_where_an_extract_action_has_content() {
    // MiniWoB tasks have no extract step: the mock sites do.
    let (d, samples) = flattened_copy(copy_mocksites);
    let ds = Dataset::open(d.path()).unwrap();
    let kept = kept_ids(d.path());
    let mut want = BTreeSet::new();
    let mut confirmations = 0;
    for t in all_trajectories(&ds)
        .into_iter()
        .filter(|t| kept.contains(&t.id))
    {
        for step in &t.steps {
            for (a, r) in step.output.actions.iter().zip(&step.result) {
                let content = r.extracted_content.as_deref().unwrap_or("");
                if content.trim().is_empty() {
                    continue;
                }
                if a.name == "extract" {
                    want.insert((t.id.clone(), step.index, content.to_string()));
                } else {
                    confirmations += 1;
                }
            }
        }
    }
    assert!(!want.is_empty(), "the mock sites have an extract step");
    assert!(
        confirmations > 0,
        "the mock sites have action confirmations in extracted_content"
    );
    let got: BTreeSet<(String, u32, String)> = samples
        .iter()
        .filter(|s| s.kind == SampleKind::Extraction)
        .map(|s| {
            assert_eq!(s.prompt_format, PROMPT_FORMAT_VERSION);
            assert_eq!(s.messages.len(), 2);
            assert_eq!(s.messages[0].role, "user");
            assert_eq!(s.messages[1].role, "assistant");
            (s.trajectory.clone(), s.step, s.messages[1].content.clone())
        })
        .collect();
    assert_eq!(got.len(), want.len());
    for ((tid, step, content), (wid, wstep, wcontent)) in got.iter().zip(&want) {
        assert_eq!((tid, step), (wid, wstep));
        assert!(
            wcontent.contains(content.as_str()),
            "{content} vs {wcontent}"
        );
    }
    // The prompt asks for the query from the page's DOM text.
    let x = samples
        .iter()
        .find(|s| s.kind == SampleKind::Extraction)
        .unwrap();
    let t = ds.trajectory_by_id(&x.trajectory).unwrap().unwrap();
    let step = t.steps.iter().find(|s| s.index == x.step).unwrap();
    let query = step.output.actions[0].str_param("query").unwrap();
    let user = &x.messages[0].content;
    assert!(user.contains(query), "{user}");
    let dom_line = step
        .state
        .dom_text
        .lines()
        .find(|l| l.contains("Total"))
        .unwrap();
    assert!(user.contains(dom_line), "{user}");
}

#[test]
fn the_reflection_reaches_the_prompt_of_a_round_two_attempt() {
    let (d, samples) = flattened();
    let ds = Dataset::open(d.path()).unwrap();
    let t = all_trajectories(&ds)
        .into_iter()
        .find(|t| t.round >= 2 && t.reflection.is_some() && t.outcome.success)
        .expect("a successful round-2 trajectory in the fixtures");
    let reflection = t.reflection.clone().unwrap();
    let first_line = reflection.lines().next().unwrap().trim();
    let prompts: Vec<&Sample> = samples
        .iter()
        .filter(|s| s.trajectory == t.id && s.kind == SampleKind::Action)
        .collect();
    assert_eq!(prompts.len(), t.steps.len());
    for s in prompts {
        let user = &s.messages[1].content;
        assert!(user.contains("<reflection>"), "{}", s.id);
        assert!(user.contains(first_line), "{}: {user}", s.id);
    }
    // Round-1 attempts carry none.
    for s in samples.iter().filter(|s| s.kind == SampleKind::Action) {
        let t = ds.trajectory_by_id(&s.trajectory).unwrap().unwrap();
        if t.reflection.is_none() {
            assert!(!s.messages[1].content.contains("<reflection>"), "{}", s.id);
        }
    }
}

#[test]
fn token_budget_trims_the_element_list() {
    // The mock sites' pages list enough elements for a budget to cut.
    let d = tempfile::tempdir().unwrap();
    copy_mocksites(d.path());
    let root = d.path().to_str().unwrap();
    ok(rmsweb(&["curate", "flatten", root]));
    let wide = read_samples(&d.path().join("sft/samples.jsonl")).unwrap();
    ok(rmsweb(&[
        "curate",
        "flatten",
        root,
        "--token-budget",
        "600",
    ]));
    let narrow = read_samples(&d.path().join("sft/samples.jsonl")).unwrap();
    assert_eq!(wide.len(), narrow.len());
    let len = |v: &[Sample]| -> usize {
        v.iter()
            .filter(|s| s.kind == SampleKind::Action)
            .map(|s| s.messages[1].content.len())
            .sum()
    };
    assert!(len(&narrow) < len(&wide));
    assert!(
        narrow
            .iter()
            .any(|s| s.messages[1].content.contains("elements omitted"))
    );
    let out = rmsweb(&["curate", "flatten", root, "--token-budget", "10"]);
    assert!(!out.status.success());
}

#[test]
fn flatten_refilters_when_trajectories_change() {
    let (d, samples) = flattened();
    let mut ds = Dataset::open(d.path()).unwrap();
    let kept = kept_ids(d.path());
    // A kept trajectory appended again under a new id: the filter report is stale.
    let mut t = ds.trajectory_by_id(&kept[0]).unwrap().unwrap();
    t.id = format!("{}-again", t.id);
    std::thread::sleep(std::time::Duration::from_millis(20));
    ds.append_trajectories(std::slice::from_ref(&t)).unwrap();
    let stdout = ok(rmsweb(&["curate", "flatten", d.path().to_str().unwrap()]));
    assert!(stdout.contains("filtered: kept"), "{stdout}");
    assert!(kept_ids(d.path()).contains(&t.id));
    let again = read_samples(&d.path().join("sft/samples.jsonl")).unwrap();
    let added: Vec<&Sample> = again.iter().filter(|s| s.trajectory == t.id).collect();
    assert_eq!(again.len(), samples.len() + added.len());
    assert!(added.len() >= t.steps.len());
    // A fresh report is reused: no second filtering.
    let stdout = ok(rmsweb(&["curate", "flatten", d.path().to_str().unwrap()]));
    assert!(!stdout.contains("filtered: kept"), "{stdout}");
}

fn image_tokens(messages: &[Value]) -> usize {
    messages
        .iter()
        .map(|m| m["content"].as_str().unwrap().matches("<image>").count())
        .sum()
}

fn check_record(r: &Value, s: &Sample) {
    let messages = r["messages"].as_array().unwrap();
    assert_eq!(messages.len(), s.messages.len());
    for (m, want) in messages.iter().zip(&s.messages) {
        assert_eq!(m["role"], want.role.as_str());
        assert_eq!(
            m["content"].as_str().unwrap().trim_start_matches("<image>"),
            want.content
        );
    }
    let images: Vec<&str> = r["images"]
        .as_array()
        .map(|a| a.iter().map(|x| x.as_str().unwrap()).collect())
        .unwrap_or_default();
    assert_eq!(images.len(), s.images.len());
    assert_eq!(image_tokens(messages), images.len());
    for img in images {
        let p = Path::new(img);
        assert!(p.is_absolute() && p.is_file(), "{img}");
    }
    if !s.images.is_empty() {
        let user = messages.iter().rev().find(|m| m["role"] == "user").unwrap();
        assert!(user["content"].as_str().unwrap().starts_with("<image>"));
    }
}

#[test]
fn exports_for_llamafactory_and_swift() {
    let (d, samples) = flattened();
    let root = d.path().to_str().unwrap();
    let lf = d.path().join("out/lf.json");
    let stdout = ok(rmsweb(&[
        "export",
        "sft",
        "--format",
        "llamafactory",
        root,
        "--out",
        lf.to_str().unwrap(),
    ]));
    assert!(stdout.contains("\"formatting\": \"sharegpt\""), "{stdout}");
    let arr: Vec<Value> = serde_json::from_str(&std::fs::read_to_string(&lf).unwrap()).unwrap();
    assert_eq!(arr.len(), samples.len());
    for (r, s) in arr.iter().zip(&samples) {
        check_record(r, s);
    }
    assert!(arr.iter().any(|r| r["images"].is_array()));

    ok(rmsweb(&["export", "sft", "--format", "swift", root]));
    let text = std::fs::read_to_string(d.path().join("sft/swift.jsonl")).unwrap();
    let lines: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), samples.len());
    for (r, s) in lines.iter().zip(&samples) {
        check_record(r, s);
    }
    // Text only: no images, no placeholders.
    let txt = d.path().join("out/text.jsonl");
    ok(rmsweb(&[
        "export",
        "sft",
        "--format",
        "swift",
        root,
        "--no-images",
        "--out",
        txt.to_str().unwrap(),
    ]));
    let text = std::fs::read_to_string(&txt).unwrap();
    assert_eq!(text.lines().count(), samples.len());
    for l in text.lines() {
        let r: Value = serde_json::from_str(l).unwrap();
        assert!(r.get("images").is_none());
        assert_eq!(image_tokens(r["messages"].as_array().unwrap()), 0);
    }
    let bad = rmsweb(&["export", "sft", "--format", "parquet", root]);
    assert!(!bad.status.success());
}

#[test]
fn sft_trains_on_exactly_the_flattened_samples() {
    let d = tempfile::tempdir().unwrap();
    copy_fixtures(d.path());
    let ds = Dataset::open(d.path()).unwrap();
    // Without sft/samples.jsonl: flattened in memory, nothing written.
    let in_memory = rmsweb::train::samples::from_dataset(&ds).unwrap();
    assert!(!d.path().join("sft/samples.jsonl").exists());
    ok(rmsweb(&["curate", "flatten", d.path().to_str().unwrap()]));
    let samples = read_samples(&d.path().join("sft/samples.jsonl")).unwrap();
    let from_file = rmsweb::train::samples::from_dataset(&ds).unwrap();
    assert_eq!(from_file.len(), samples.len());
    assert_eq!(in_memory.len(), samples.len());
    for ((chat, mem), s) in from_file.iter().zip(&in_memory).zip(&samples) {
        assert_eq!(chat.len(), s.messages.len());
        for ((a, b), m) in chat.iter().zip(mem).zip(&s.messages) {
            assert_eq!((&a.role, &a.content), (&m.role, &m.content));
            assert_eq!((&b.role, &b.content), (&m.role, &m.content));
        }
    }
    // A corrupt samples file is an error naming the file and line.
    let path = d.path().join("sft/samples.jsonl");
    let text = std::fs::read_to_string(&path).unwrap();
    let mut lines: Vec<&str> = text.lines().collect();
    lines[1] = "{\"id\": 3}";
    std::fs::write(&path, lines.join("\n")).unwrap();
    let err = format!(
        "{:#}",
        rmsweb::train::samples::from_dataset(&ds).unwrap_err()
    );
    assert!(err.contains("samples.jsonl:2"), "{err}");
    // Re-running the filter makes the samples file stale: it is no longer read.
    std::thread::sleep(std::time::Duration::from_millis(20));
    ok(rmsweb(&["curate", "filter", d.path().to_str().unwrap()]));
    let fresh = rmsweb::train::samples::from_dataset(&ds).unwrap();
    assert_eq!(fresh.len(), samples.len());
}

#[test]
fn a_tokenizer_measures_the_budget_in_the_models_tokens() {
    let d = tempfile::tempdir().unwrap();
    let data = d.path().join("ds");
    copy_fixtures(&data);
    let texts = std::fs::read_to_string(data.join("trajectories.jsonl")).unwrap();
    let tok = rmsweb::model::tokenizer::train_bpe(texts.lines(), 300, 2).unwrap();
    rmsweb::model::tokenizer::save(&tok, d.path()).unwrap();
    let budget = 1500;
    let root = data.to_str().unwrap();
    let tok_path = d.path().join("tokenizer.json");
    let b = budget.to_string();
    ok(rmsweb(&[
        "curate",
        "flatten",
        root,
        "--token-budget",
        &b,
        "--tokenizer",
        tok_path.to_str().unwrap(),
    ]));
    let with_tok = read_samples(&data.join("sft/samples.jsonl")).unwrap();
    ok(rmsweb(&["curate", "flatten", root, "--token-budget", &b]));
    let approx = read_samples(&data.join("sft/samples.jsonl")).unwrap();
    assert_eq!(with_tok.len(), approx.len());
    // "Interactive elements (x of y shown)": a near-byte-level tokenizer counts far
    // more tokens than one per 4 characters, so fewer elements fit.
    let shown = |v: &[Sample]| -> usize {
        v.iter()
            .filter(|s| s.kind == SampleKind::Action)
            .map(|s| {
                let u = &s.messages[1].content;
                let at = u.find("Interactive elements (").unwrap() + "Interactive elements (".len();
                u[at..].split(' ').next().unwrap().parse::<usize>().unwrap()
            })
            .sum()
    };
    assert!(
        shown(&with_tok) < shown(&approx),
        "{} vs {}",
        shown(&with_tok),
        shown(&approx)
    );
    let count = |t: &str| tok.encode(t, false).unwrap().get_ids().len();
    let tokens = |s: &Sample| count(&s.messages[0].content) + count(&s.messages[1].content);
    let total = |v: &[Sample]| -> usize { v.iter().map(tokens).sum() };
    assert!(total(&with_tok) < total(&approx));
    assert_ne!(with_tok, approx, "the counter changes what is trimmed");
}

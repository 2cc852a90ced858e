//! `rmsweb import`: Browser Use histories of every layout, task lists, bad input
//! (refused with file, place and field, dataset untouched), and the fixtures.

use proptest::prelude::*;
use rmsweb::trajectory::import::tasks::{Limits, TaskFormat, import_tasks};
use rmsweb::trajectory::import::{
    BrowserUseOptions, ImportErrors, ImportReport, browser_use, import_browser_use,
};
use rmsweb::trajectory::{Dataset, Task, Trajectory};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

fn data(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/import")
        .join(rel)
}

fn opts(task: &str) -> BrowserUseOptions {
    BrowserUseOptions {
        task: Some(task.into()),
        ..BrowserUseOptions::default()
    }
}

fn import(ds: &Path, inputs: &[PathBuf], o: &BrowserUseOptions) -> ImportReport {
    import_browser_use(ds, inputs, o).unwrap_or_else(|e| panic!("import failed: {e:#}"))
}

fn trajectories(ds: &Path) -> Vec<Trajectory> {
    let d = Dataset::open(ds).unwrap();
    (0..d.trajectory_count())
        .map(|i| d.trajectory(i).unwrap())
        .collect()
}

fn png(w: u32, h: u32, rgb: [u8; 3]) -> Vec<u8> {
    let mut out = std::io::Cursor::new(Vec::new());
    image::RgbImage::from_pixel(w, h, image::Rgb(rgb))
        .write_to(&mut out, image::ImageFormat::Png)
        .unwrap();
    out.into_inner()
}

fn b64(bytes: &[u8]) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// Every file and folder under `dir` with the bytes of the files.
fn snapshot(dir: &Path) -> BTreeMap<PathBuf, Option<Vec<u8>>> {
    let mut out = BTreeMap::new();
    if !dir.exists() {
        return out;
    }
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            let rel = p.strip_prefix(dir).unwrap().to_path_buf();
            if p.is_dir() {
                out.insert(rel, None);
                stack.push(p);
            } else {
                out.insert(rel, Some(std::fs::read(&p).unwrap()));
            }
        }
    }
    out
}

fn v01() -> Value {
    serde_json::from_slice(&std::fs::read(data("v01_nested_inline.json")).unwrap()).unwrap()
}

// ------------------------------------------------------------------ layouts

#[test]
fn imports_the_nested_inline_base64_layout() {
    let dir = tempfile::tempdir().unwrap();
    let ds = dir.path().join("ds");
    let r = import(
        &ds,
        &[data("v01_nested_inline.json")],
        &BrowserUseOptions {
            website: Some("https://shop.example.test/".into()),
            teacher: Some("gpt-4o".into()),
            source: Some("browser-use@0.1.40".into()),
            ..opts("Find the price of the Sony WH-1000XM5 headphones.")
        },
    );
    assert_eq!(r.tasks_added.len(), 1);
    assert_eq!(r.tasks_added[0].domain, "example");
    assert_eq!(r.trajectories[0].screenshots, 3);
    assert!(r.warnings.is_empty(), "{:?}", r.warnings);

    let t = &trajectories(&ds)[0];
    assert_eq!(t.attempt, 1);
    assert_eq!(t.teacher, "gpt-4o");
    assert_eq!(t.source, "browser-use@0.1.40");
    assert_eq!(t.steps.len(), 4);
    let names: Vec<&str> = t.first_actions().map(|a| a.name.as_str()).collect();
    assert_eq!(names, ["navigate", "input", "extract", "done"]);
    let s1 = &t.steps[1];
    assert_eq!(s1.output.actions[1].name, "click");
    assert_eq!(s1.output.actions[1].int_param("index"), Some(5));
    assert_eq!(
        t.steps[2].output.actions[0].str_param("query"),
        Some("price of Sony WH-1000XM5")
    );
    // Nested current_state fields and memory shifted by one step.
    assert_eq!(s1.output.next_goal, "Search for the headphones.");
    assert_eq!(
        s1.output.memory,
        "On shop home. Looking for Sony WH-1000XM5 price."
    );
    assert_eq!(s1.state.memory, "");
    assert_eq!(t.steps[2].state.memory, s1.output.memory);
    // page_id tabs, timing, progress.
    assert_eq!(s1.state.tabs[0].id, "0");
    assert_eq!(s1.state.url, "https://shop.example.test/");
    let timing = s1.timing.unwrap();
    assert!((timing.start - 1735000004.6).abs() < 1e-6 && (timing.end - 1735000011.1).abs() < 1e-6);
    assert_eq!(t.steps[3].state.progress, 1.0);
    assert!((t.steps[1].state.progress - 1.0 / 3.0).abs() < 1e-9);
    // Interacted elements become elements when there is no state message.
    let input = s1.state.element(4).unwrap();
    assert_eq!(
        (input.tag.as_str(), input.role.as_str()),
        ("input", "searchbox")
    );
    assert_eq!(input.attrs["name"], "q");
    assert_eq!(input.bbox, [220.5, 12.0, 240.0, 28.0]);
    // Screenshots: inline base64 (with and without a data: prefix) copied as PNG.
    assert_eq!(
        s1.state.screenshot.as_deref(),
        Some(format!("screenshots/{}/1.png", t.id).as_str())
    );
    let d = Dataset::open(&ds).unwrap();
    for s in &t.steps[..3] {
        let bytes =
            std::fs::read(d.resolve(s.state.screenshot.as_ref().unwrap()).unwrap()).unwrap();
        let img = image::load_from_memory(&bytes).unwrap();
        assert_eq!((img.width(), img.height()), (8, 6));
    }
    assert_eq!(t.steps[3].state.screenshot, None);
    // Outcome: the done had no `success`; its result said success.
    assert!(t.outcome.success);
    assert_eq!(
        t.outcome.final_answer.as_deref(),
        Some("The Sony WH-1000XM5 costs $329.99.")
    );
}

#[test]
fn imports_the_flat_screenshot_path_layout() {
    let dir = tempfile::tempdir().unwrap();
    let ds = dir.path().join("ds");
    let r = import(
        &ds,
        &[data("v05/history.json")],
        &opts("Paris forecast for tomorrow"),
    );
    // The unknown `hover_element` is kept, with a warning naming file and item.
    assert_eq!(r.warnings.len(), 1, "{:?}", r.warnings);
    assert!(r.warnings[0].contains("history.json: history[3]: model_output.action[2]"));
    assert!(r.warnings[0].contains("hover_element"));
    let t = &trajectories(&ds)[0];
    assert_eq!(t.steps.len(), 5);
    let s0 = &t.steps[0];
    assert!(
        s0.output
            .thinking
            .starts_with("The task asks for tomorrow's forecast")
    );
    assert_eq!(s0.output.actions[0].name, "navigate");
    assert_eq!(s0.output.actions[0].params["new_tab"], json!(false));
    // A failed model call: no output, the error kept.
    assert!(t.steps[1].output.actions.is_empty());
    assert!(
        t.steps[1].result[0]
            .error
            .as_deref()
            .unwrap()
            .contains("Could not parse")
    );
    let s2 = &t.steps[2];
    assert_eq!(s2.output.actions[0].name, "click");
    assert_eq!(s2.output.actions[1].name, "switch");
    assert_eq!(s2.output.actions[1].params["tab_id"], json!(1));
    assert_eq!(s2.state.element(7).unwrap().attrs["href"], "/city/paris");
    let s3 = &t.steps[3];
    assert_eq!(
        s3.state
            .tabs
            .iter()
            .map(|t| t.id.as_str())
            .collect::<Vec<_>>(),
        ["0", "1"]
    );
    assert_eq!(s3.output.actions[0].name, "scroll");
    assert_eq!(s3.output.actions[0].params["down"], json!(true));
    assert_eq!(s3.output.actions[1].name, "extract");
    assert_eq!(s3.output.actions[2].name, "hover_element");
    assert_eq!(s3.output.actions[2].params["index"], json!(12));
    assert!(
        s3.result[1]
            .extracted_content
            .as_deref()
            .unwrap()
            .contains("14°C")
    );
    // Screenshots copied byte for byte; `./shots/...` is fine.
    for i in 0..4 {
        let copied = std::fs::read(ds.join(format!("screenshots/{}/{i}.png", t.id))).unwrap();
        assert_eq!(
            copied,
            std::fs::read(data(&format!("v05/shots/step_{i}.png"))).unwrap()
        );
    }
    assert!(!t.outcome.success);
    assert_eq!(
        t.outcome.reason.as_deref(),
        Some("the final done action reported success=false")
    );
}

#[test]
fn imports_a_folder_with_a_sidecar_and_state_messages() {
    let dir = tempfile::tempdir().unwrap();
    let ds = dir.path().join("ds");
    let r = import(&ds, &[data("v08")], &BrowserUseOptions::default());
    assert_eq!(r.trajectories.len(), 2);
    assert_eq!(r.warnings.len(), 1);
    assert!(r.warnings[0].contains("`drag`"));
    let tasks = Dataset::open(&ds).unwrap().tasks().unwrap();
    assert_eq!(
        tasks,
        vec![Task {
            task_id: "tracker-tck-1042".into(),
            website: "https://tracker.example.test/login".into(),
            domain: "example".into(),
            category: "productivity".into(),
            instruction:
                "Sign in to Tracker as qa@example.test and report the status of ticket TCK-1042."
                    .into(),
            source: "browser-use".into(),
        }]
    );
    let ts = trajectories(&ds);
    // Attempts in file-name order; sidecar per-file settings applied.
    assert_eq!(ts[0].id, "tracker-tck-1042-a1");
    assert_eq!((ts[0].attempt, ts[0].round), (1, 1));
    assert!(ts[0].outcome.success);
    assert_eq!(ts[1].attempt, 2);
    assert_eq!(ts[1].round, 2);
    assert!(
        ts[1]
            .reflection
            .as_deref()
            .unwrap()
            .starts_with("Attempt 1")
    );
    assert!(!ts[1].outcome.success);
    assert_eq!(ts[0].teacher, "gpt-4.1-mini");
    assert_eq!(ts[0].source, "browser-use@0.8.1");
    // Elements from the state message: text lines, nesting, new-element stars,
    // |SCROLL| markers, inline text.
    let list = &ts[0].steps[2].state;
    assert_eq!(list.tabs[0].id, "7A1C9E0B2D4F6A8C0E1B3D5F7A9C1E3B");
    // Serialized with the `tab_id` alias (last four characters) in the other history.
    assert_eq!(ts[1].steps[0].state.tabs[0].id, "1E3B");
    assert_eq!(list.elements.len(), 9);
    let e7 = list.element(7).unwrap();
    assert_eq!(e7.tag, "a");
    assert_eq!(e7.text, "TCK-1042 Login loops on Safari In progress");
    assert_eq!(e7.attrs["href"], "/t/TCK-1042");
    assert_eq!(list.element(3).unwrap().role, "navigation");
    assert_eq!(list.element(4).unwrap().text, "Tickets");
    assert_eq!(list.element(9).unwrap().attrs["aria-label"], "More tickets");
    assert_eq!(
        list.element(2).unwrap().attrs["placeholder"],
        "Search tickets"
    );
    assert!(list.dom_text.starts_with("Current tab: 1E3B"));
    assert!(list.dom_text.contains("[7]<a href=/t/TCK-1042 />"));
    assert!(!list.dom_text.contains("<user_request>"));
    // Bounds of interacted elements fill the bbox.
    let login = &ts[0].steps[0].state;
    assert_eq!(login.element(2).unwrap().bbox, [102.0, 200.0, 240.0, 32.0]);
    assert_eq!(login.element(4).unwrap().text, "Sign in");
    // New action names; the unknown one kept with its params.
    let bad = &ts[1].steps[2];
    assert_eq!(bad.output.actions[0].name, "drag");
    assert_eq!(bad.output.actions[0].params["to_x"], json!(300));
    assert_eq!(bad.output.actions[1].name, "send_keys");
    assert_eq!(bad.state.screenshot, None);
    assert_eq!(
        ts[0].steps[0].output.actions[0].params["clear"],
        json!(true)
    );
}

#[test]
fn round_trip_reads_back_identical_records_and_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let ds = dir.path().join("ds");
    let r1 = import(
        &ds,
        &[data("v01_nested_inline.json")],
        &opts("Price of the headphones"),
    );
    let r2 = import(&ds, &[data("v05/history.json")], &opts("Paris forecast"));
    let r3 = import(&ds, &[data("v08")], &BrowserUseOptions::default());
    let first = trajectories(&ds);
    assert_eq!(first.len(), 4);
    let ids: Vec<&str> = first.iter().map(|t| t.id.as_str()).collect();
    let reported: Vec<&str> = [r1, r2, r3]
        .iter()
        .flat_map(|r| {
            r.trajectories
                .iter()
                .map(|t| t.id.as_str())
                .collect::<Vec<_>>()
        })
        .map(|s| Box::leak(s.to_string().into_boxed_str()) as &str)
        .collect();
    assert_eq!(ids, reported);
    // Reopen: the same records; serializing them again gives the stored lines.
    let d = Dataset::open(&ds).unwrap();
    let again = trajectories(&ds);
    assert_eq!(first, again);
    let file = d.trajectories_file();
    for (i, t) in again.iter().enumerate() {
        assert_eq!(serde_json::to_vec(t).unwrap(), file.raw(i).unwrap());
        assert_eq!(d.trajectory_by_id(&t.id).unwrap().as_ref(), Some(t));
    }
    let tasks = d.tasks().unwrap();
    for (i, t) in tasks.iter().enumerate() {
        assert_eq!(
            serde_json::to_vec(t).unwrap(),
            d.tasks_file().raw(i).unwrap()
        );
    }
    let summaries: Vec<_> = d.summaries().into_iter().map(Result::unwrap).collect();
    assert_eq!(summaries[3].step_count, again[3].steps.len());
}

#[test]
fn success_and_failure_flags_override_the_done() {
    let dir = tempfile::tempdir().unwrap();
    let ds = dir.path().join("ds");
    import(
        &ds,
        &[data("v05/history.json")],
        &BrowserUseOptions {
            success: Some(true),
            ..opts("Paris forecast")
        },
    );
    import(
        &ds,
        &[data("v01_nested_inline.json")],
        &BrowserUseOptions {
            success: Some(false),
            ..opts("Price of the headphones")
        },
    );
    let ts = trajectories(&ds);
    assert!(ts[0].outcome.success);
    assert!(!ts[1].outcome.success);
    assert_eq!(ts[1].outcome.judge.as_deref(), Some("import"));
    assert_eq!(
        ts[1].outcome.final_answer.as_deref(),
        Some("The Sony WH-1000XM5 costs $329.99.")
    );
}

#[test]
fn a_judge_verdict_in_the_history_decides_the_outcome() {
    let dir = tempfile::tempdir().unwrap();
    let mut h: Value =
        serde_json::from_slice(&std::fs::read(data("v05/history.json")).unwrap()).unwrap();
    // The agent said it failed; the judge saw the answer was right.
    h["history"][4]["result"][0]["judgement"] = json!({
        "reasoning": "The forecast shown is for tomorrow; the answer is correct.",
        "verdict": true, "failure_reason": "", "impossible_task": false, "reached_captcha": false
    });
    // Screenshot paths are relative to the history's folder: copy them along.
    std::fs::create_dir_all(dir.path().join("shots")).unwrap();
    for i in 0..4 {
        let name = format!("shots/step_{i}.png");
        std::fs::copy(data(&format!("v05/{name}")), dir.path().join(&name)).unwrap();
    }
    let f = write_history(dir.path(), "judged.json", &h);
    import(&dir.path().join("ds"), &[f], &opts("t"));
    let t = &trajectories(&dir.path().join("ds"))[0];
    assert!(t.outcome.success);
    assert_eq!(t.outcome.judge.as_deref(), Some("browser-use:judge"));
    assert_eq!(
        t.outcome.reason.as_deref(),
        Some("The forecast shown is for tomorrow; the answer is correct.")
    );
}

#[test]
fn a_history_without_done_is_a_failure() {
    let dir = tempfile::tempdir().unwrap();
    let mut h = v01();
    h["history"].as_array_mut().unwrap().pop();
    let f = dir.path().join("h.json");
    std::fs::write(&f, h.to_string()).unwrap();
    import(&dir.path().join("ds"), &[f], &opts("t"));
    let t = &trajectories(&dir.path().join("ds"))[0];
    assert!(!t.outcome.success);
    assert_eq!(
        t.outcome.reason.as_deref(),
        Some("the history ends without a done action")
    );
}

#[test]
fn attempts_continue_and_task_ids_are_checked() {
    let dir = tempfile::tempdir().unwrap();
    let ds = dir.path().join("ds");
    let o = BrowserUseOptions {
        task_id: Some("paris".into()),
        ..opts("Paris forecast")
    };
    import(&ds, &[data("v05/history.json")], &o);
    let r = import(&ds, &[data("v05/history.json")], &o);
    assert!(r.tasks_added.is_empty(), "the task is not repeated");
    assert_eq!(r.trajectories[0].id, "paris-a2");
    assert_eq!(Dataset::open(&ds).unwrap().task_count(), 1);
    // The same id for another task text is refused.
    let before = snapshot(&ds);
    let e = import_browser_use(
        &ds,
        &[data("v05/history.json")],
        &BrowserUseOptions {
            task_id: Some("paris".into()),
            ..opts("Something else")
        },
    )
    .unwrap_err();
    assert!(
        e.to_string().contains("already names a different task"),
        "{e}"
    );
    assert_eq!(snapshot(&ds), before);
    // An explicit attempt that exists is refused.
    let e = import_browser_use(
        &ds,
        &[data("v05/history.json")],
        &BrowserUseOptions {
            attempt: Some(1),
            ..o.clone()
        },
    )
    .unwrap_err();
    assert!(
        e.to_string()
            .contains("`paris-a1` is already in the dataset"),
        "{e}"
    );
    // Task ids name folders: path-like ids are refused.
    let e = import_browser_use(
        &ds,
        &[data("v05/history.json")],
        &BrowserUseOptions {
            task_id: Some("../evil".into()),
            ..o
        },
    )
    .unwrap_err();
    assert!(e.to_string().contains("task_id"), "{e}");
    assert_eq!(snapshot(&ds), before);
}

#[test]
fn concurrent_imports_get_distinct_attempts() {
    let dir = tempfile::tempdir().unwrap();
    let ds = dir.path().join("ds");
    let o = BrowserUseOptions {
        task_id: Some("paris".into()),
        ..opts("Paris forecast")
    };
    std::thread::scope(|s| {
        for _ in 0..4 {
            s.spawn(|| {
                for _ in 0..2 {
                    import(&ds, &[data("v05/history.json")], &o);
                }
            });
        }
    });
    let mut attempts: Vec<u32> = trajectories(&ds).iter().map(|t| t.attempt).collect();
    attempts.sort();
    assert_eq!(attempts, (1..=8).collect::<Vec<_>>());
    assert_eq!(Dataset::open(&ds).unwrap().task_count(), 1);
}

#[test]
fn error_text_from_the_input_is_safe_for_a_terminal() {
    let dir = tempfile::tempdir().unwrap();
    let mut h = v01();
    h["history"][0]["model_output"]["action"] = json!([{"\u{1b}]0;pwned\u{7}click\u{1b}[2J": 5}]);
    let f = write_history(dir.path(), "evil.json", &h);
    let err = import_browser_use(&dir.path().join("ds"), &[f], &opts("t")).unwrap_err();
    let text = err.to_string();
    assert!(
        text.contains("evil.json: history[0]: model_output.action[0]."),
        "{text}"
    );
    assert!(
        !text.chars().any(|c| c.is_control() && c != '\n'),
        "{text:?}"
    );
}

#[test]
fn derived_task_ids_are_stable_file_names() {
    use rmsweb::trajectory::import::derived_task_id;
    let a = derived_task_id("https://www.allrecipes.com/", "Find a lasagna");
    assert_eq!(
        a,
        derived_task_id("https://www.allrecipes.com/", "Find a lasagna")
    );
    assert_ne!(
        a,
        derived_task_id("https://www.allrecipes.com/", "Find a pizza")
    );
    assert!(a.starts_with("allrecipes-"), "{a}");
    let dir = tempfile::tempdir().unwrap();
    // A non-ASCII site name and no site at all both give usable ids.
    for (site, want) in [("Bücher Café", "b-cher-caf-"), ("", "task-")] {
        let o = BrowserUseOptions {
            website: Some(site.into()),
            task_source: Some("seed-query".into()),
            ..opts("Find a book")
        };
        let r = import(&dir.path().join("ds"), &[data("v05/history.json")], &o);
        assert!(
            r.tasks_added[0].task_id.starts_with(want),
            "{:?}",
            r.tasks_added[0]
        );
        assert_eq!(r.tasks_added[0].source, "seed-query");
    }
}

#[test]
fn jpeg_screenshots_are_stored_as_png() {
    let dir = tempfile::tempdir().unwrap();
    let mut jpg = std::io::Cursor::new(Vec::new());
    image::RgbImage::from_pixel(16, 10, image::Rgb([200, 100, 50]))
        .write_to(&mut jpg, image::ImageFormat::Jpeg)
        .unwrap();
    let mut h = v01();
    h["history"][0]["state"]["screenshot"] = json!(b64(&jpg.into_inner()));
    let f = dir.path().join("h.json");
    std::fs::write(&f, h.to_string()).unwrap();
    let ds = dir.path().join("ds");
    import(&ds, &[f], &opts("t"));
    let t = &trajectories(&ds)[0];
    let bytes = std::fs::read(ds.join(t.steps[0].state.screenshot.as_ref().unwrap())).unwrap();
    assert_eq!(
        image::guess_format(&bytes).unwrap(),
        image::ImageFormat::Png
    );
    assert_eq!(image::load_from_memory(&bytes).unwrap().width(), 16);
}

// ------------------------------------------------------------------ bad input

/// Imports `inputs` into `ds` expecting a refusal that names `file_end`, `location`
/// and `field`; the dataset must be exactly as before.
fn refused(
    ds: &Path,
    inputs: &[PathBuf],
    o: &BrowserUseOptions,
    file_end: &str,
    location: &str,
    field: &str,
) -> String {
    let before = snapshot(ds);
    let existed = ds.exists();
    let err = import_browser_use(ds, inputs, o).expect_err("import should fail");
    let errors = err
        .downcast_ref::<ImportErrors>()
        .unwrap_or_else(|| panic!("not an input error: {err:#}"));
    let hit = errors
        .0
        .iter()
        .find(|e| {
            e.file.to_string_lossy().ends_with(file_end)
                && e.location == location
                && e.field == field
        })
        .unwrap_or_else(|| panic!("no error for {file_end} {location} {field} in:\n{err}"));
    let text = hit.to_string();
    assert!(
        text.contains(file_end) && text.contains(location) && text.contains(field),
        "{text}"
    );
    assert_eq!(snapshot(ds), before, "the dataset changed");
    assert_eq!(ds.exists(), existed);
    text
}

/// A dataset with one import in it, to check that failures leave it alone.
fn seeded() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let ds = dir.path().join("ds");
    import(&ds, &[data("v05/history.json")], &opts("Paris forecast"));
    (dir, ds)
}

fn write_history(dir: &Path, name: &str, h: &Value) -> PathBuf {
    let f = dir.join(name);
    std::fs::write(&f, serde_json::to_vec_pretty(h).unwrap()).unwrap();
    f
}

#[test]
fn malformed_json_is_refused_with_its_line() {
    let (dir, ds) = seeded();
    let text = std::fs::read_to_string(data("v01_nested_inline.json")).unwrap();
    let f = dir.path().join("broken.json");
    std::fs::write(
        &f,
        text.replacen("\"memory\": \"\",", "\"memory\": \"\" \"oops\",", 1),
    )
    .unwrap();
    let msg = refused(
        &ds,
        &[f],
        &opts("t"),
        "broken.json",
        "line 7 column 24",
        "(json)",
    );
    assert!(msg.contains("malformed JSON"), "{msg}");
    // Not a history at all, and a truncated one.
    let f = dir.path().join("list.json");
    std::fs::write(&f, "[1, 2]").unwrap();
    refused(
        &ds,
        &[f],
        &opts("t"),
        "list.json",
        "(top level)",
        "(record)",
    );
    let f = dir.path().join("cut.json");
    let first_20: String = text.lines().take(20).map(|l| format!("{l}\n")).collect();
    std::fs::write(&f, first_20).unwrap();
    let msg = refused(
        &ds,
        &[f],
        &opts("t"),
        "cut.json",
        "line 21 column 0",
        "(json)",
    );
    assert!(msg.contains("EOF"), "{msg}");
}

#[test]
fn missing_and_mistyped_fields_are_named() {
    let (dir, ds) = seeded();
    type Edit = Box<dyn Fn(&mut Value)>;
    let cases: Vec<(&str, Edit, &str, &str)> = vec![
        (
            "no_history.json",
            Box::new(|h: &mut Value| h["items"] = h["history"].take()),
            "(top level)",
            "history",
        ),
        (
            "no_state.json",
            Box::new(|h: &mut Value| {
                h["history"][2].as_object_mut().unwrap().remove("state");
            }),
            "history[2]",
            "state",
        ),
        (
            "no_result.json",
            Box::new(|h: &mut Value| {
                h["history"][1].as_object_mut().unwrap().remove("result");
            }),
            "history[1]",
            "result",
        ),
        (
            "url.json",
            Box::new(|h: &mut Value| h["history"][1]["state"]["url"] = json!(42)),
            "history[1]",
            "state.url",
        ),
        (
            "action.json",
            Box::new(|h: &mut Value| {
                h["history"][0]["model_output"]["action"] = json!({"click": {}})
            }),
            "history[0]",
            "model_output.action",
        ),
        (
            "params.json",
            Box::new(|h: &mut Value| {
                h["history"][1]["model_output"]["action"][1] = json!({"click_element": 5})
            }),
            "history[1]",
            "model_output.action[1].click_element",
        ),
        (
            "two.json",
            Box::new(|h: &mut Value| {
                h["history"][1]["model_output"]["action"][0] =
                    json!({"click": {"index": 1}, "input": {"index": 2}})
            }),
            "history[1]",
            "model_output.action[0]",
        ),
        (
            "memory.json",
            Box::new(|h: &mut Value| {
                h["history"][3]["model_output"]["current_state"]["memory"] = json!(["x"])
            }),
            "history[3]",
            "model_output.current_state.memory",
        ),
        (
            "done.json",
            Box::new(|h: &mut Value| h["history"][3]["result"][0]["is_done"] = json!("yes")),
            "history[3]",
            "result[0].is_done",
        ),
        (
            "tabs.json",
            Box::new(|h: &mut Value| h["history"][0]["state"]["tabs"][0]["page_id"] = json!([0])),
            "history[0]",
            "state.tabs[0].page_id",
        ),
        (
            "time.json",
            Box::new(|h: &mut Value| {
                h["history"][0]["metadata"]["step_start_time"] = json!("noon")
            }),
            "history[0]",
            "metadata.step_start_time",
        ),
        (
            "item.json",
            Box::new(|h: &mut Value| h["history"][2] = json!("step")),
            "history[2]",
            "(item)",
        ),
        (
            "message.json",
            Box::new(|h: &mut Value| h["history"][2]["state_message"] = json!(7)),
            "history[2]",
            "state_message",
        ),
    ];
    for (name, edit, location, field) in cases {
        let mut h = v01();
        edit(&mut h);
        let f = write_history(dir.path(), name, &h);
        refused(&ds, &[f], &opts("t"), name, location, field);
    }
}

#[test]
fn garbage_base64_and_undecodable_images_are_refused() {
    let (dir, ds) = seeded();
    let mut h = v01();
    h["history"][1]["state"]["screenshot"] = json!("iVBORw0KGgo!!!not*base64");
    let f = write_history(dir.path(), "b64.json", &h);
    let msg = refused(
        &ds,
        &[f],
        &opts("t"),
        "b64.json",
        "history[1]",
        "state.screenshot",
    );
    assert!(msg.contains("base64"), "{msg}");

    let mut h = v01();
    h["history"][2]["state"]["screenshot"] = json!(b64(b"this is plain text, not a picture"));
    let f = write_history(dir.path(), "text.json", &h);
    let msg = refused(
        &ds,
        &[f],
        &opts("t"),
        "text.json",
        "history[2]",
        "state.screenshot",
    );
    assert!(msg.contains("not an image"), "{msg}");

    let good = png(32, 32, [1, 2, 3]);
    let mut h = v01();
    h["history"][0]["state"]["screenshot"] = json!(b64(&good[..good.len() - 20]));
    let f = write_history(dir.path(), "cut.json", &h);
    let msg = refused(
        &ds,
        &[f],
        &opts("t"),
        "cut.json",
        "history[0]",
        "state.screenshot",
    );
    assert!(msg.contains("does not decode"), "{msg}");

    // A screenshot file that is not an image.
    let sub = dir.path().join("sub");
    std::fs::create_dir_all(&sub).unwrap();
    std::fs::write(sub.join("fake.png"), b"GIF89a but not really").unwrap();
    let mut h = v01();
    h["history"][0]["state"]["screenshot"] = Value::Null;
    h["history"][0]["state"]["screenshot_path"] = json!("fake.png");
    let f = write_history(&sub, "fake.json", &h);
    refused(
        &ds,
        &[f],
        &opts("t"),
        "fake.json",
        "history[0]",
        "state.screenshot_path",
    );
}

#[test]
fn screenshot_paths_must_stay_inside_their_folder() {
    let (dir, ds) = seeded();
    let hist = dir.path().join("hist");
    let outside = dir.path().join("outside");
    std::fs::create_dir_all(&hist).unwrap();
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::write(outside.join("a.png"), png(4, 4, [9, 9, 9])).unwrap();
    std::fs::write(hist.join("b.png"), png(4, 4, [8, 8, 8])).unwrap();
    let abs = outside.join("a.png").to_string_lossy().into_owned();
    let with_path = |p: &str| {
        let mut h = v01();
        h["history"][1]["state"]["screenshot"] = Value::Null;
        h["history"][1]["state"]["screenshot_path"] = json!(p);
        h
    };
    let f = write_history(&hist, "abs.json", &with_path(&abs));
    let msg = refused(
        &ds,
        std::slice::from_ref(&f),
        &opts("t"),
        "abs.json",
        "history[1]",
        "state.screenshot_path",
    );
    assert!(msg.contains("absolute"), "{msg}");
    // A root that does not contain the path does not help.
    let o = BrowserUseOptions {
        screenshot_root: Some(hist.clone()),
        ..opts("t")
    };
    let msg = refused(
        &ds,
        std::slice::from_ref(&f),
        &o,
        "abs.json",
        "history[1]",
        "state.screenshot_path",
    );
    assert!(msg.contains("outside the screenshot root"), "{msg}");

    let f2 = write_history(&hist, "up.json", &with_path("../outside/a.png"));
    let msg = refused(
        &ds,
        &[f2],
        &opts("t"),
        "up.json",
        "history[1]",
        "state.screenshot_path",
    );
    assert!(msg.contains("leaves"), "{msg}");
    let f3 = write_history(&hist, "gone.json", &with_path("missing.png"));
    refused(
        &ds,
        std::slice::from_ref(&f3),
        &opts("t"),
        "gone.json",
        "history[1]",
        "state.screenshot_path",
    );
    // Unless missing files are allowed: then the step has no screenshot, with a
    // warning. Refused paths stay refused.
    let lenient = BrowserUseOptions {
        allow_missing_screenshots: true,
        ..opts("t")
    };
    let up = write_history(&hist, "up2.json", &with_path("../outside/gone.png"));
    refused(
        &ds,
        &[up],
        &lenient,
        "up2.json",
        "history[1]",
        "state.screenshot_path",
    );
    let r = import(&ds, &[f3], &lenient);
    assert_eq!(r.warnings.len(), 1, "{:?}", r.warnings);
    assert!(
        r.warnings[0]
            .contains("gone.json: history[1]: state.screenshot_path: `missing.png` not found")
    );
    assert_eq!(r.trajectories[0].screenshots, 2);
    #[cfg(unix)]
    {
        std::os::unix::fs::symlink(outside.join("a.png"), hist.join("link.png")).unwrap();
        let f4 = write_history(&hist, "link.json", &with_path("link.png"));
        refused(
            &ds,
            &[f4],
            &opts("t"),
            "link.json",
            "history[1]",
            "state.screenshot_path",
        );
    }
    // Inside the given root, an absolute path is accepted.
    let o = BrowserUseOptions {
        screenshot_root: Some(outside.clone()),
        ..opts("t")
    };
    let r = import(&ds, &[f], &o);
    let t = Dataset::open(&ds)
        .unwrap()
        .trajectory_by_id(&r.trajectories[0].id)
        .unwrap()
        .unwrap();
    let copied = std::fs::read(ds.join(t.steps[1].state.screenshot.as_ref().unwrap())).unwrap();
    assert_eq!(copied, std::fs::read(outside.join("a.png")).unwrap());
}

#[test]
fn files_over_the_size_limit_are_refused_before_reading() {
    let (_dir, ds) = seeded();
    let o = BrowserUseOptions {
        max_file_bytes: 1000,
        ..opts("t")
    };
    let msg = refused(
        &ds,
        &[data("v01_nested_inline.json")],
        &o,
        "v01_nested_inline.json",
        "(file)",
        "(file)",
    );
    assert!(msg.contains("over the 1000-byte import limit"), "{msg}");
    // Screenshot files are held to the same limit.
    let dir = tempfile::tempdir().unwrap();
    let noisy = image::RgbImage::from_fn(128, 128, |x, y| {
        let v = (x.wrapping_mul(2654435761) ^ y.wrapping_mul(40503)) as u8;
        image::Rgb([v, v.wrapping_mul(7), v.wrapping_add(y as u8)])
    });
    noisy.save(dir.path().join("big.png")).unwrap();
    let mut h = v01();
    for item in h["history"].as_array_mut().unwrap() {
        item["state"]["screenshot"] = Value::Null;
    }
    h["history"][2]["state"]["screenshot_path"] = json!("big.png");
    let f = write_history(dir.path(), "h.json", &h);
    let o = BrowserUseOptions {
        max_file_bytes: 20_000,
        ..opts("t")
    };
    let msg = refused(
        &ds,
        &[f],
        &o,
        "h.json",
        "history[2]",
        "state.screenshot_path",
    );
    assert!(msg.contains("over the 19.5 KiB limit"), "{msg}");
}

#[test]
fn one_bad_file_means_nothing_is_imported() {
    let dir = tempfile::tempdir().unwrap();
    let ds = dir.path().join("new-dataset");
    let mut h = v01();
    h["history"][3]["state"]["url"] = json!(false);
    let bad = write_history(dir.path(), "bad.json", &h);
    // The dataset did not exist: it still does not.
    refused(
        &ds,
        &[data("v05/history.json"), bad.clone()],
        &opts("t"),
        "bad.json",
        "history[3]",
        "state.url",
    );
    assert!(!ds.exists());
    // A folder whose second history is bad imports none of them.
    let folder = dir.path().join("folder");
    std::fs::create_dir_all(&folder).unwrap();
    std::fs::write(
        folder.join("task.json"),
        r#"{"task": "Price of the headphones"}"#,
    )
    .unwrap();
    std::fs::copy(data("v01_nested_inline.json"), folder.join("1.json")).unwrap();
    std::fs::copy(&bad, folder.join("2.json")).unwrap();
    refused(
        &ds,
        std::slice::from_ref(&folder),
        &BrowserUseOptions::default(),
        "2.json",
        "history[3]",
        "state.url",
    );
    // Sidecar problems are named too.
    std::fs::write(folder.join("task.json"), r#"{"task": 5}"#).unwrap();
    refused(
        &ds,
        std::slice::from_ref(&folder),
        &BrowserUseOptions::default(),
        "task.json",
        "(sidecar)",
        "task",
    );
    std::fs::write(
        folder.join("task.json"),
        r#"{"task": "x", "files": {"9.json": {}}}"#,
    )
    .unwrap();
    refused(
        &ds,
        &[folder],
        &BrowserUseOptions::default(),
        "task.json",
        "(sidecar)",
        "files.9.json",
    );
    // No task at all.
    let e = import_browser_use(
        &ds,
        &[data("v05/history.json")],
        &BrowserUseOptions::default(),
    )
    .unwrap_err();
    assert!(e.to_string().contains("--task"), "{e}");
    assert!(!ds.exists());
}

#[test]
fn a_failure_while_writing_restores_the_dataset() {
    let (_dir, ds) = seeded();
    // `screenshots` replaced by a file: moving screenshots into place fails after
    // the task record was appended; that append must be undone.
    std::fs::remove_dir_all(ds.join("screenshots")).unwrap();
    std::fs::write(ds.join("screenshots"), b"not a folder").unwrap();
    let before = snapshot(&ds);
    let err = import_browser_use(&ds, &[data("v01_nested_inline.json")], &opts("A new task"))
        .unwrap_err();
    assert!(err.to_string().contains("screenshots"), "{err:#}");
    assert_eq!(snapshot(&ds), before);
    let d = Dataset::open(&ds).unwrap();
    assert_eq!((d.task_count(), d.trajectory_count()), (1, 1));
}

#[test]
fn a_torn_last_line_is_put_back_when_an_import_is_undone() {
    let (_dir, ds) = seeded();
    // A crash left half a record at the end of both files.
    for f in ["tasks.jsonl", "trajectories.jsonl"] {
        use std::io::Write;
        let mut file = std::fs::OpenOptions::new()
            .append(true)
            .open(ds.join(f))
            .unwrap();
        file.write_all(b"{\"id\":\"half-writ").unwrap();
    }
    std::fs::remove_dir_all(ds.join("screenshots")).unwrap();
    std::fs::write(ds.join("screenshots"), b"not a folder").unwrap();
    let before = snapshot(&ds);
    import_browser_use(&ds, &[data("v01_nested_inline.json")], &opts("A new task")).unwrap_err();
    assert_eq!(snapshot(&ds), before);
}

// ------------------------------------------------------------------ tasks

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

#[test]
fn imports_webvoyager_and_online_mind2web_tasks() {
    let dir = tempfile::tempdir().unwrap();
    let ds = dir.path().join("ds");
    let wv = write(
        dir.path(),
        "wv.jsonl",
        concat!(
            r#"{"web_name": "Allrecipes", "id": "Allrecipes--0", "ques": "Provide a recipe for vegetarian lasagna with more than 100 reviews and a rating of at least 4.5 stars.", "web": "https://www.allrecipes.com/"}"#,
            "\n\n",
            r#"{"web_name": "Google Flights", "id": "Google Flights--3", "ques": "Find the cheapest one-way flight from Dublin to Athens next Tuesday.", "web": "https://www.google.com/travel/flights/"}"#,
            "\n"
        ),
    );
    let r = import_tasks(&ds, &wv, TaskFormat::Webvoyager, Limits::default()).unwrap();
    assert_eq!(r.added.len(), 2);
    let tasks = Dataset::open(&ds).unwrap().tasks().unwrap();
    assert_eq!(tasks[0].task_id, "Allrecipes--0");
    assert_eq!(tasks[0].source, "webvoyager:Allrecipes--0");
    assert_eq!(tasks[0].domain, "allrecipes");
    assert_eq!(tasks[0].category, "food");
    assert_eq!(tasks[0].website, "https://www.allrecipes.com/");
    assert_eq!(tasks[1].domain, "google-flights");
    assert_eq!(tasks[1].category, "travel");
    // Importing again adds nothing.
    let r = import_tasks(&ds, &wv, TaskFormat::Webvoyager, Limits::default()).unwrap();
    assert_eq!((r.added.len(), r.already_present), (0, 2));

    let om = write(
        dir.path(),
        "om.json",
        "[\n  {\"task_id\": \"a1b2c3\", \"confirmed_task\": \"Find the return policy for electronics.\", \"website\": \"https://www.bestbuy.com/\", \"reference_length\": 5, \"level\": \"easy\"},\n  {\"task_id\": \"d4e5f6\", \"confirmed_task\": \"Show me 2-bedroom apartments in Austin under $2,000.\",\n   \"website\": \"https://www.apartments.com/\", \"reference_length\": 9, \"level\": \"medium\"}\n]\n",
    );
    import_tasks(&ds, &om, TaskFormat::OnlineMind2web, Limits::default()).unwrap();
    let tasks = Dataset::open(&ds).unwrap().tasks().unwrap();
    assert_eq!(tasks.len(), 4);
    assert_eq!(tasks[2].source, "online-mind2web:a1b2c3");
    assert_eq!(tasks[2].domain, "bestbuy");
    assert_eq!(tasks[2].category, "shopping");
    assert_eq!(
        tasks[3].instruction,
        "Show me 2-bedroom apartments in Austin under $2,000."
    );
    // JSON Lines works for Online-Mind2Web too.
    let oml = write(
        dir.path(),
        "om.jsonl",
        "{\"task_id\": \"z9\", \"confirmed_task\": \"Open the careers page.\", \"website\": \"https://www.ikea.com/\", \"reference_length\": 3, \"level\": \"easy\"}\n",
    );
    import_tasks(&ds, &oml, TaskFormat::OnlineMind2web, Limits::default()).unwrap();
    assert_eq!(Dataset::open(&ds).unwrap().task_count(), 5);
}

fn task_refused(
    ds: &Path,
    file: &Path,
    format: TaskFormat,
    limits: Limits,
    location: &str,
    field: &str,
) -> String {
    let before = snapshot(ds);
    let err = import_tasks(ds, file, format, limits).unwrap_err();
    let errors = err
        .downcast_ref::<ImportErrors>()
        .unwrap_or_else(|| panic!("{err:#}"));
    let hit = errors
        .0
        .iter()
        .find(|e| e.location == location && e.field == field)
        .unwrap_or_else(|| panic!("no {location} {field} in {err}"));
    assert_eq!(snapshot(ds), before);
    hit.to_string()
}

#[test]
fn bad_task_lists_are_refused_with_lines() {
    let dir = tempfile::tempdir().unwrap();
    let ds = dir.path().join("ds");
    let line = |id: &str| {
        format!(
            r#"{{"web_name": "ArXiv", "id": "{id}", "ques": "q", "web": "https://arxiv.org/"}}"#
        )
    };
    let dup = write(
        dir.path(),
        "dup.jsonl",
        &format!(
            "{}\n{}\n{}\n",
            line("ArXiv--0"),
            line("ArXiv--1"),
            line("ArXiv--0")
        ),
    );
    let msg = task_refused(
        &ds,
        &dup,
        TaskFormat::Webvoyager,
        Limits::default(),
        "line 3",
        "id",
    );
    assert!(msg.contains("first on line 1"), "{msg}");
    assert!(!ds.exists());
    let typed = write(
        dir.path(),
        "typed.jsonl",
        &format!(
            "{}\n{{\"web_name\": \"ArXiv\", \"id\": 7, \"ques\": \"q\", \"web\": \"w\"}}\n",
            line("a")
        ),
    );
    task_refused(
        &ds,
        &typed,
        TaskFormat::Webvoyager,
        Limits::default(),
        "line 2",
        "id",
    );
    let missing = write(
        dir.path(),
        "missing.jsonl",
        "{\"web_name\": \"ArXiv\", \"id\": \"x\", \"web\": \"w\"}\n",
    );
    let msg = task_refused(
        &ds,
        &missing,
        TaskFormat::Webvoyager,
        Limits::default(),
        "line 1",
        "(record)",
    );
    assert!(msg.contains("ques"), "{msg}");
    let broken = write(
        dir.path(),
        "broken.json",
        "[\n{\"task_id\": \"a\", \"confirmed_task\": \"t\", \"website\": \"w\"},\n{\"task_id\": \"b\",,}\n]",
    );
    task_refused(
        &ds,
        &broken,
        TaskFormat::OnlineMind2web,
        Limits::default(),
        "line 3",
        "(json)",
    );
    let dup_arr = write(
        dir.path(),
        "dup.json",
        "[\n{\"task_id\": \"a\", \"confirmed_task\": \"t\", \"website\": \"w\"},\n\n{\"task_id\": \"a\", \"confirmed_task\": \"u\", \"website\": \"w\"}\n]",
    );
    let msg = task_refused(
        &ds,
        &dup_arr,
        TaskFormat::OnlineMind2web,
        Limits::default(),
        "line 4",
        "task_id",
    );
    assert!(msg.contains("first on line 2"), "{msg}");
    // Huge lines and files.
    let long = write(
        dir.path(),
        "long.jsonl",
        &format!("{}\n{}\n", line("s"), line(&"x".repeat(5000))),
    );
    let limits = Limits {
        file_bytes: 1 << 20,
        line_bytes: 4096,
    };
    let msg = task_refused(
        &ds,
        &long,
        TaskFormat::Webvoyager,
        limits,
        "line 2",
        "(record)",
    );
    assert!(msg.contains("4096-byte limit"), "{msg}");
    let limits = Limits {
        file_bytes: 100,
        line_bytes: 4096,
    };
    task_refused(
        &ds,
        &long,
        TaskFormat::Webvoyager,
        limits,
        "(file)",
        "(file)",
    );
    // An id already in the dataset with other content.
    let ok = write(dir.path(), "ok.jsonl", &format!("{}\n", line("ArXiv--0")));
    import_tasks(&ds, &ok, TaskFormat::Webvoyager, Limits::default()).unwrap();
    let other = write(
        dir.path(),
        "other.jsonl",
        "{\"web_name\": \"ArXiv\", \"id\": \"ArXiv--0\", \"ques\": \"different\", \"web\": \"https://arxiv.org/\"}\n",
    );
    let msg = task_refused(
        &ds,
        &other,
        TaskFormat::Webvoyager,
        Limits::default(),
        "line 1",
        "id",
    );
    assert!(msg.contains("tasks.jsonl line 1"), "{msg}");
}

// ------------------------------------------------------------------ CLI

fn rmsweb(args: &[&str]) -> std::process::Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_rmsweb"))
        .args(args)
        .output()
        .unwrap()
}

#[test]
fn cli_imports_and_reports_errors_with_exit_status() {
    let dir = tempfile::tempdir().unwrap();
    let ds = dir.path().join("ds");
    let ds_s = ds.to_str().unwrap();
    let v05 = data("v05/history.json");
    let out = rmsweb(&[
        "import",
        "browser-use",
        v05.to_str().unwrap(),
        "--dataset",
        ds_s,
        "--task",
        "Paris forecast",
        "--task-id",
        "paris",
        "--failure",
        "--teacher",
        "m",
        "--source",
        "browser-use@0.5.5",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("trajectory paris-a1 (attempt 1, 5 steps, 4 screenshots, failure)"),
        "{stdout}"
    );
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("warning:"),
        "unknown action warned"
    );
    let t = &trajectories(&ds)[0];
    assert_eq!(
        (t.teacher.as_str(), t.source.as_str()),
        ("m", "browser-use@0.5.5")
    );

    let bad = write(
        dir.path(),
        "bad.json",
        r#"{"history": [{"model_output": null, "result": [], "state": {"title": 3}}]}"#,
    );
    let before = snapshot(&ds);
    let out = rmsweb(&[
        "import",
        "browser-use",
        bad.to_str().unwrap(),
        "--dataset",
        ds_s,
        "--task",
        "x",
    ]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("bad.json: history[0]: state.title: expected a string"),
        "{stderr}"
    );
    assert_eq!(snapshot(&ds), before);

    let wv = write(
        dir.path(),
        "wv.jsonl",
        "{\"web_name\": \"ESPN\", \"id\": \"ESPN--1\", \"ques\": \"Who won?\", \"web\": \"https://www.espn.com/\"}\n",
    );
    let out = rmsweb(&[
        "import",
        "tasks",
        "--format",
        "webvoyager",
        wv.to_str().unwrap(),
        "--dataset",
        ds_s,
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("imported 1 tasks"));

    for args in [
        &["import", "--help"][..],
        &["import", "browser-use", "--help"],
        &["import", "tasks", "--help"],
    ] {
        let out = rmsweb(args);
        assert!(out.status.success());
        assert!(String::from_utf8_lossy(&out.stdout).contains("--dataset") || args.len() == 2);
    }
}

// ------------------------------------------------------------------ fixtures

#[test]
/// The contract other stages rely on, on the mock-site dataset imported from Browser
/// Use histories (`tests/data/mocksites`, built by `fixtures-src/build.sh`; it was the
/// bundled fixtures before those came from MiniWoB runs, see `tests/it/fixtures.rs`).
/// Exact sizes (10-30 elements, 640x400) are a property of the generator, not checked.
fn mocksites_are_a_complete_small_dataset() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/mocksites");
    let d = Dataset::open(&root).unwrap();
    let tasks = d.tasks().unwrap();
    assert!(tasks.len() >= 6);
    let domains: std::collections::HashSet<_> = tasks.iter().map(|t| t.domain.as_str()).collect();
    assert!(domains.len() >= 3, "tasks from several sites: {domains:?}");
    let ts = trajectories(&root);
    let mut reflections = 0;
    let mut extractions = 0;
    let mut errors = 0;
    for task in &tasks {
        assert!(
            !task.instruction.is_empty() && !task.website.is_empty() && !task.category.is_empty()
        );
        let mine: Vec<&Trajectory> = ts.iter().filter(|t| t.task_id == task.task_id).collect();
        assert!(
            mine.iter().any(|t| t.outcome.success),
            "{} has a success",
            task.task_id
        );
        assert!(
            mine.iter().any(|t| !t.outcome.success),
            "{} has a failure",
            task.task_id
        );
    }
    for t in &ts {
        assert!(
            (4..=10).contains(&t.steps.len()),
            "{} has {} steps",
            t.id,
            t.steps.len()
        );
        reflections += usize::from(t.reflection.is_some() && t.round == 2);
        for s in &t.steps {
            assert!(!s.state.elements.is_empty(), "{} step {}", t.id, s.index);
            assert!(!s.state.dom_text.is_empty() && !s.output.next_goal.is_empty());
            let shot = d.resolve(s.state.screenshot.as_ref().unwrap()).unwrap();
            let bytes = std::fs::read(&shot).unwrap();
            assert_eq!(
                image::guess_format(&bytes).unwrap(),
                image::ImageFormat::Png
            );
            let (sw, sh) = image::image_dimensions(&shot).unwrap();
            for a in &s.output.actions {
                assert!(a.is_known(), "{}: {}", t.id, a.name);
                if let Some(i) = a.target_index() {
                    let e = s.state.element(i);
                    let e =
                        e.unwrap_or_else(|| panic!("{} step {}: no element {i}", t.id, s.index));
                    // Targets carry their on-screen box (from the interacted element).
                    let [x, y, w, h] = e.bbox;
                    assert!(
                        w > 0.0 && h > 0.0 && x + w <= f64::from(sw) && y + h <= f64::from(sh),
                        "{} step {}: {:?}",
                        t.id,
                        s.index,
                        e.bbox
                    );
                }
            }
            extractions += s
                .result
                .iter()
                .filter(|r| {
                    r.extracted_content
                        .as_deref()
                        .is_some_and(|c| c.contains("Extracted"))
                })
                .count();
            errors += s.result.iter().filter(|r| r.error.is_some()).count();
        }
        // A failure shares its start with a success of the same task.
        if !t.outcome.success {
            let twin = ts
                .iter()
                .find(|o| o.task_id == t.task_id && o.outcome.success)
                .unwrap();
            assert_eq!(t.steps[0].state.url, twin.steps[0].state.url);
            assert_eq!(t.steps[0].state.elements, twin.steps[0].state.elements);
        }
    }
    assert!(reflections >= 1 && extractions >= 1 && errors >= 1);
    let size: u64 = snapshot(&root)
        .values()
        .flatten()
        .map(|b| b.len() as u64)
        .sum();
    assert!(size < 5 << 20, "mocksites are {size} bytes");
}

// ------------------------------------------------------------------ properties

fn arb_json() -> impl Strategy<Value = Value> {
    let key = prop_oneof![
        prop::sample::select(vec![
            "history",
            "model_output",
            "result",
            "state",
            "metadata",
            "state_message",
            "current_state",
            "action",
            "thinking",
            "memory",
            "next_goal",
            "evaluation_previous_goal",
            "click_element",
            "click",
            "done",
            "input_text",
            "switch_tab",
            "text",
            "success",
            "index",
            "is_done",
            "error",
            "extracted_content",
            "url",
            "title",
            "tabs",
            "page_id",
            "target_id",
            "screenshot",
            "screenshot_path",
            "interacted_element",
            "highlight_index",
            "attributes",
            "tag_name",
            "bounds",
            "step_start_time",
            "step_end_time",
        ])
        .prop_map(str::to_string),
        "[a-z_]{0,8}",
    ];
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|n| json!(n)),
        any::<f64>().prop_map(|f| json!(f)),
        ".{0,24}".prop_map(Value::String),
        "(\t*\\*?\\[[0-9]{1,3}\\]<[a-z]{1,6}( [a-z]{1,4}=[^ >]{0,6}){0,3} ?/?>[^\n]{0,10}\n){0,4}"
            .prop_map(Value::String),
    ];
    leaf.prop_recursive(5, 96, 6, move |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
            prop::collection::btree_map(key.clone(), inner, 0..6)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// History items of the right overall shape whose parts are arbitrary: they get past
/// the first checks and exercise actions, tabs, interacted elements, state messages
/// and screenshots (base64 of arbitrary bytes, or of a real PNG cut or corrupted).
fn arb_item() -> impl Strategy<Value = Value> {
    let action = prop::collection::btree_map(
        prop::sample::select(vec![
            "click",
            "click_element",
            "input_text",
            "done",
            "switch_tab",
            "go_to_url",
            "scroll_down",
            "zoom",
        ])
        .prop_map(str::to_string),
        prop_oneof![
            arb_json(),
            Just(json!({"index": 3, "text": "x", "success": true}))
        ],
        1..3,
    )
    .prop_map(|m| Value::Object(m.into_iter().collect()));
    let model_output = prop_oneof![
        Just(Value::Null),
        (
            prop::collection::vec(action, 0..3),
            arb_json(),
            any::<bool>()
        )
            .prop_map(|(actions, memory, nested)| {
                let brain =
                    json!({"memory": memory, "next_goal": "g", "evaluation_previous_goal": "e"});
                if nested {
                    json!({"current_state": brain, "action": actions})
                } else {
                    let mut o = brain;
                    o["action"] = json!(actions);
                    o["thinking"] = json!("t");
                    o
                }
            }),
    ];
    let png = png(6, 4, [1, 2, 3]);
    let screenshot = prop_oneof![
        Just(Value::Null),
        prop::collection::vec(any::<u8>(), 0..64).prop_map(|b| json!(b64(&b))),
        (0..png.len(), any::<u8>()).prop_map(move |(i, x)| {
            let mut p = png.clone();
            p[i] ^= x;
            json!(b64(&p[..p.len() - i / 2]))
        }),
        arb_json(),
    ];
    let element = prop_oneof![
        Just(Value::Null),
        (arb_json(), arb_json(), arb_json()).prop_map(|(i, b, a)| json!({"highlight_index": i, "bounds": b, "attributes": a, "node_name": "A"})),
    ];
    let state = (
        arb_json(),
        prop::collection::vec(arb_json(), 0..3),
        screenshot,
        prop::collection::vec(element, 0..3),
    )
        .prop_map(|(url, tabs, shot, els)| json!({"url": url, "tabs": tabs, "screenshot": shot, "interacted_element": els}));
    let message = prop_oneof![
        Just(Value::Null),
        r"(<browser_state>)?(\t{0,3}\*?(\|SCROLL\|)?\[[0-9]{1,4}\]<[a-z]{1,5}( [a-z-]{1,6}=[^>\n]{0,8}){0,3} ?/?>[^\n]{0,12}\n|\t{0,3}[a-zA-Z ]{0,12}\n){0,8}(</browser_state>)?"
            .prop_map(Value::String),
    ];
    (model_output, prop::collection::vec(arb_json(), 0..3), state, arb_json(), message).prop_map(
        |(mo, result, state, metadata, msg)| {
            json!({"model_output": mo, "result": result, "state": state, "metadata": metadata, "state_message": msg})
        },
    )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn the_history_parser_never_panics_on_history_shaped_json(items in prop::collection::vec(arb_item(), 1..4)) {
        let _ = browser_use::parse_history(&json!({"history": items}), Path::new("p.json"));
    }

    #[test]
    fn the_history_parser_never_panics_on_any_json(v in arb_json(), items in prop::collection::vec(arb_json(), 0..4)) {
        let f = Path::new("p.json");
        let _ = browser_use::parse_history(&v, f);
        let wrapped = json!({"history": items});
        let _ = browser_use::parse_history(&wrapped, f);
    }

    #[test]
    fn the_history_parser_never_panics_on_any_bytes(bytes in prop::collection::vec(any::<u8>(), 0..512)) {
        let _ = browser_use::parse_history_bytes(&bytes, Path::new("p.json"));
    }

    #[test]
    fn element_lists_never_panic(s in "(\\PC|\t|\n|\\[|\\]|<|>|=|\\*|/){0,200}") {
        let els = rmsweb::trajectory::import::dom_text::parse_elements(&s);
        prop_assert!(els.len() <= s.lines().count());
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    /// The whole import (staging, screenshots, commit or undo) on arbitrary items:
    /// never a panic, and a refusal leaves no dataset behind.
    #[test]
    fn a_whole_import_never_panics(items in prop::collection::vec(prop_oneof![arb_json(), arb_item()], 1..4)) {
        let dir = tempfile::tempdir().unwrap();
        let f = write_history(dir.path(), "h.json", &json!({"history": items}));
        let ds = dir.path().join("ds");
        match import_browser_use(&ds, &[f], &opts("t")) {
            Ok(r) => prop_assert_eq!(Dataset::open(&ds).unwrap().trajectory_count(), r.trajectories.len()),
            Err(_) => prop_assert!(!ds.exists()),
        }
    }
}

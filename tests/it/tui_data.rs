//! Builds the small dataset the workbench tests run on: tasks, trajectories with
//! elements and PNG screenshots (written with the `image` crate), mined pairs, and
//! one hostile trajectory whose titles, URLs, DOM text and model output carry
//! escape sequences and control characters.

use rmsweb::action::Action;
use rmsweb::mine::pair::{
    FailureMode, Gates, LabelSource, MinedPair, PairKind, PairScores, StepRef,
};
use rmsweb::trajectory::{
    ActionResult, Dataset, Element, ModelOutput, Outcome, State, Step, Tab, Task, Trajectory,
};
use serde_json::json;
use std::collections::BTreeMap;
use std::path::Path;

/// Text full of terminal escapes: OSC title, clear screen, alternate screen off,
/// a C1 CSI, BEL, a hyperlink, a bidi override and NUL.
pub const HOSTILE: &str = "\u{1b}]0;pwned\u{7}Evil\u{1b}[2J\u{1b}[?1049l\u{9b}31m red\u{7} \u{1b}]8;;http://x.test\u{1b}\\link\u{202E}txt\u{0}";

fn el(index: u32, tag: &str, text: &str) -> Element {
    let mut attrs = BTreeMap::new();
    if tag == "input" {
        attrs.insert("name".to_string(), format!("f{index}"));
    }
    Element {
        index,
        tag: tag.into(),
        role: tag.into(),
        text: text.into(),
        attrs,
        bbox: [0.0, 20.0 * f64::from(index), 120.0, 18.0],
    }
}

fn screenshot(root: &Path, traj: &str, step: u32, seed: u8) -> String {
    let rel = format!("screenshots/{traj}/{step}.png");
    let path = root.join(&rel);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let img = image::RgbImage::from_fn(48, 32, |x, y| {
        let band = (y / 8) as u8;
        image::Rgb([
            seed.wrapping_mul(40).wrapping_add(band * 30),
            (x * 5) as u8,
            200 - band * 20,
        ])
    });
    img.save(&path).unwrap();
    rel
}

struct StepSpec<'a> {
    url: &'a str,
    title: &'a str,
    elements: Vec<Element>,
    action: Action,
    thinking: &'a str,
    error: Option<&'a str>,
}

#[allow(clippy::too_many_arguments)]
fn trajectory(
    root: &Path,
    id: &str,
    task: &str,
    success: bool,
    attempt: u32,
    reflection: Option<&str>,
    specs: Vec<StepSpec>,
) -> Trajectory {
    let n = specs.len();
    let steps = specs
        .into_iter()
        .enumerate()
        .map(|(i, s)| {
            let i = i as u32;
            let is_done = s.action.name == "done";
            Step {
                index: i,
                state: State {
                    url: s.url.into(),
                    title: s.title.into(),
                    tabs: vec![Tab {
                        id: "T1".into(),
                        url: s.url.into(),
                        title: s.title.into(),
                    }],
                    dom_text: s
                        .elements
                        .iter()
                        .map(|e| format!("[{}]<{}>{}", e.index, e.tag, e.text))
                        .collect::<Vec<_>>()
                        .join("\n"),
                    elements: s.elements,
                    screenshot: Some(screenshot(root, id, i, (i + attempt) as u8)),
                    memory: format!("step {i} of {n}"),
                    progress: if n > 1 {
                        f64::from(i) / (n - 1) as f64
                    } else {
                        0.0
                    },
                    ..Default::default()
                },
                output: ModelOutput {
                    thinking: s.thinking.into(),
                    evaluation_previous_goal: "ok so far".into(),
                    memory: format!("did {i} steps"),
                    next_goal: "continue".into(),
                    actions: vec![s.action],
                },
                result: vec![ActionResult {
                    is_done,
                    success: is_done.then_some(success),
                    error: s.error.map(str::to_owned),
                    extracted_content: None,
                }],
                timing: None,
                ..Default::default()
            }
        })
        .collect();
    Trajectory {
        id: id.into(),
        task_id: task.into(),
        attempt,
        round: 1,
        reflection: reflection.map(str::to_owned),
        source: "rmsweb-collect".into(),
        teacher: "teacher-7b".into(),
        outcome: Outcome {
            success,
            score: Some(if success { 1.0 } else { 0.0 }),
            judge: Some("miniwob".into()),
            reason: Some(if success { "reward 1.0" } else { "reward 0.0" }.into()),
            final_answer: None,
            ..Default::default()
        },
        steps,
    }
}

fn a(name: &str, params: serde_json::Value) -> Action {
    Action::new(name, params)
}

fn login_page() -> Vec<Element> {
    vec![
        el(1, "input", "Username"),
        el(2, "input", "Password"),
        el(3, "button", "Log in"),
        el(4, "a", "Forgot password?"),
    ]
}

#[allow(clippy::too_many_arguments)]
fn pair(
    id: &str,
    task: &str,
    success: (&str, u32),
    loc: (&str, u32),
    target: Action,
    loc_action: Action,
    category: &str,
    confidence: f64,
    total: f64,
    evidence: Vec<String>,
) -> MinedPair {
    MinedPair {
        id: id.into(),
        task_id: task.into(),
        domain: "miniwob".into(),
        kind: PairKind::FailContrast,
        success: StepRef {
            trajectory: success.0.into(),
            step: success.1,
        },
        loc: StepRef {
            trajectory: loc.0.into(),
            step: loc.1,
        },
        target_action: target,
        loc_action,
        scores: PairScores {
            url: 1.0,
            dom: 0.9,
            memory: 0.8,
            progress: 0.95,
            alignment: 0.91,
            contrast: 1.0,
            evidence: 0.6,
            total,
        },
        failure_mode: FailureMode {
            category: category.into(),
            confidence,
            source: LabelSource::Judge,
        },
        gates: Gates {
            validity: true,
            visual: true,
            progress: true,
        },
        evidence,
        loc_failure: None,
    }
}

/// Writes the test dataset into `root` (which must be empty or missing).
pub fn build(root: &Path) {
    let mut ds = Dataset::create(root, "tui-fixture", "built by tests/it/tui_data.rs").unwrap();
    let tasks = vec![
        Task {
            task_id: "login".into(),
            website: "http://127.0.0.1/login".into(),
            domain: "miniwob".into(),
            category: "form".into(),
            instruction: "Log in as alice with password hunter2".into(),
            source: "miniwob:login-user".into(),
        },
        Task {
            task_id: "search".into(),
            website: "http://127.0.0.1/search".into(),
            domain: "miniwob".into(),
            category: "search".into(),
            instruction: "Search for red shoes and open the first result".into(),
            source: "miniwob:search-engine".into(),
        },
        Task {
            task_id: "hostile".into(),
            website: "http://127.0.0.1/evil".into(),
            domain: "miniwob".into(),
            category: "form".into(),
            instruction: format!("Click the button {HOSTILE}"),
            source: "miniwob:hostile".into(),
        },
    ];
    ds.append_tasks(&tasks).unwrap();
    let r = root;
    let trajs = vec![
        trajectory(
            r,
            "login-a1",
            "login",
            true,
            1,
            None,
            vec![
                StepSpec {
                    url: "http://127.0.0.1/login",
                    title: "Login",
                    elements: login_page(),
                    action: a("input", json!({"index": 1, "text": "alice"})),
                    thinking: "Type the user name first.",
                    error: None,
                },
                StepSpec {
                    url: "http://127.0.0.1/login",
                    title: "Login",
                    elements: login_page(),
                    action: a("input", json!({"index": 2, "text": "hunter2"})),
                    thinking: "Now the password.",
                    error: None,
                },
                StepSpec {
                    url: "http://127.0.0.1/login",
                    title: "Login",
                    elements: login_page(),
                    action: a("click", json!({"index": 3})),
                    thinking: "Submit the form.",
                    error: None,
                },
                StepSpec {
                    url: "http://127.0.0.1/home",
                    title: "Welcome",
                    elements: vec![el(1, "a", "Log out")],
                    action: a("done", json!({"text": "logged in", "success": true})),
                    thinking: "Done.",
                    error: None,
                },
            ],
        ),
        trajectory(
            r,
            "login-a2",
            "login",
            false,
            2,
            Some("Last time the password went into the user field; check the field labels."),
            vec![
                StepSpec {
                    url: "http://127.0.0.1/login",
                    title: "Login",
                    elements: login_page(),
                    action: a("input", json!({"index": 1, "text": "alice"})),
                    thinking: "User name.",
                    error: None,
                },
                StepSpec {
                    url: "http://127.0.0.1/login",
                    title: "Login",
                    elements: login_page(),
                    action: a("click", json!({"index": 4})),
                    thinking: "Maybe I need to reset it.",
                    error: None,
                },
                StepSpec {
                    url: "http://127.0.0.1/reset",
                    title: "Reset password",
                    elements: vec![el(1, "input", "Email"), el(2, "button", "Send")],
                    action: a("go_back", json!({})),
                    thinking: "Wrong page.",
                    error: Some("navigation timed out after 5s"),
                },
            ],
        ),
        trajectory(
            r,
            "search-a1",
            "search",
            true,
            1,
            None,
            vec![
                StepSpec {
                    url: "http://127.0.0.1/search",
                    title: "Search",
                    elements: vec![el(5, "input", "Query"), el(6, "button", "Search")],
                    action: a("input", json!({"index": 5, "text": "red shoes"})),
                    thinking: "Type the query.",
                    error: None,
                },
                StepSpec {
                    url: "http://127.0.0.1/search",
                    title: "Search",
                    elements: vec![el(5, "input", "Query"), el(6, "button", "Search")],
                    action: a("click", json!({"index": 6})),
                    thinking: "Search.",
                    error: None,
                },
                StepSpec {
                    url: "http://127.0.0.1/results",
                    title: "Results",
                    elements: vec![el(7, "a", "Red shoes, size 42"), el(8, "a", "Blue shoes")],
                    action: a("click", json!({"index": 7})),
                    thinking: "First result.",
                    error: None,
                },
            ],
        ),
        trajectory(
            r,
            "search-a2",
            "search",
            false,
            2,
            None,
            vec![
                StepSpec {
                    url: "http://127.0.0.1/search",
                    title: "Search",
                    elements: vec![el(5, "input", "Query"), el(6, "button", "Search")],
                    action: a("input", json!({"index": 5, "text": "red shoes"})),
                    thinking: "Type the query.",
                    error: None,
                },
                StepSpec {
                    url: "http://127.0.0.1/search",
                    title: "Search",
                    elements: vec![el(5, "input", "Query"), el(6, "button", "Search")],
                    action: a("click", json!({"index": 6})),
                    thinking: "Search.",
                    error: None,
                },
                StepSpec {
                    url: "http://127.0.0.1/results",
                    title: "Results",
                    elements: vec![el(7, "a", "Red shoes, size 42"), el(8, "a", "Blue shoes")],
                    action: a("click", json!({"index": 8})),
                    thinking: "This one.",
                    error: None,
                },
            ],
        ),
        trajectory(
            r,
            "hostile-a1",
            "hostile",
            false,
            1,
            Some(HOSTILE),
            vec![
                StepSpec {
                    url: &format!("http://127.0.0.1/evil{HOSTILE}"),
                    title: HOSTILE,
                    elements: vec![el(1, "button", HOSTILE), el(2, "a", "safe link")],
                    action: a("click", json!({"index": 1, "text": HOSTILE})),
                    thinking: HOSTILE,
                    error: Some(HOSTILE),
                },
                StepSpec {
                    url: "http://127.0.0.1/evil2",
                    title: "after",
                    elements: vec![el(1, "button", "ok")],
                    action: a("done", json!({"text": HOSTILE, "success": false})),
                    thinking: "stop",
                    error: None,
                },
            ],
        ),
    ];
    ds.append_trajectories(&trajs).unwrap();
    let pairs = vec![
        pair(
            "login-s2",
            "login",
            ("login-a1", 1),
            ("login-a2", 1),
            a("input", json!({"index": 2, "text": "hunter2"})),
            a("click", json!({"index": 4})),
            "wrong_element",
            0.82,
            0.78,
            vec![
                "success typed the password at step 1".into(),
                "failure clicked Forgot password?".into(),
            ],
        ),
        pair(
            "search-s2",
            "search",
            ("search-a1", 2),
            ("search-a2", 2),
            a("click", json!({"index": 7})),
            a("click", json!({"index": 8})),
            "missed_constraint",
            0.64,
            0.71,
            vec!["only result 7 is red".into()],
        ),
        pair(
            "hostile-s0",
            "hostile",
            ("hostile-a1", 0),
            ("hostile-a1", 1),
            a("click", json!({"index": 1, "text": HOSTILE})),
            a("done", json!({"text": HOSTILE})),
            "premature_done",
            0.5,
            0.4,
            vec![HOSTILE.to_string()],
        ),
    ];
    let mut buf = Vec::new();
    for p in &pairs {
        serde_json::to_writer(&mut buf, p).unwrap();
        buf.push(b'\n');
    }
    std::fs::create_dir_all(root.join("mined")).unwrap();
    std::fs::write(root.join("mined/pairs.jsonl"), buf).unwrap();
}

/// Copies the bundled `fixtures/` dataset (live MiniWoB runs, what a first run shows)
/// into `to` (tests write to the copy).
pub fn copy_fixtures(to: &Path) {
    copy_dataset("fixtures", to);
}

/// Copies `tests/data/mocksites/` (six mock sites imported from Browser Use histories,
/// built by `fixtures-src/build.sh`) into `to`: the tests keyed to its contents
/// (extraction steps, detours, known pair ids) use it.
pub fn copy_mocksites(to: &Path) {
    copy_dataset("tests/data/mocksites", to);
}

/// Copies the dataset at `rel` (relative to the repository root) into `to`.
pub fn copy_dataset(rel: &str, to: &Path) {
    fn walk(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
        for e in std::fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                walk(&p, out);
            } else {
                out.push(p);
            }
        }
    }
    let from = Path::new(env!("CARGO_MANIFEST_DIR")).join(rel);
    let mut files = Vec::new();
    walk(&from, &mut files);
    for f in files {
        let dest = to.join(f.strip_prefix(&from).unwrap());
        std::fs::create_dir_all(dest.parent().unwrap()).unwrap();
        std::fs::copy(&f, &dest).unwrap();
    }
}

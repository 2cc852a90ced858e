//! Failure-mode mining on constructed trajectory pairs with a known answer.

use rmsweb::action::Action;
use rmsweb::mine::align::{StateView, align};
use rmsweb::mine::config::{AlignmentWeights, MineConfig};
use rmsweb::mine::explain::{explain_pair_id, explain_trajectories, render};
use rmsweb::mine::label::{Judge, LlmJudge};
use rmsweb::mine::pair::{
    FailureMode, Gates, LabelSource, MinedPair, PairKind, PairScores, StepRef,
};
use rmsweb::mine::qc::quality_control;
use rmsweb::mine::select::Verdict;
use rmsweb::mine::{HeuristicJudge, MineOutput, mine_dataset, write_output};
use rmsweb::trajectory::{
    ActionResult, Dataset, Element, ModelOutput, Outcome, State, Step, Task, Trajectory,
};
use serde_json::json;
use std::collections::BTreeMap;
use std::path::Path;

// ---------- a small builder ----------

/// A page: url and `(index, tag, text, attrs)` elements.
fn page(url: &str, els: &[(u32, &str, &str)]) -> State {
    State {
        url: url.into(),
        title: url.rsplit('/').next().unwrap_or("").into(),
        elements: els
            .iter()
            .map(|(i, tag, text)| Element {
                index: *i,
                tag: (*tag).into(),
                text: (*text).into(),
                ..Default::default()
            })
            .collect(),
        screenshot: Some("screenshots/s.png".into()),
        ..Default::default()
    }
}

fn click(i: i64) -> Action {
    Action::new("click", json!({"index": i}))
}
fn input(i: i64, text: &str) -> Action {
    Action::new("input", json!({"index": i, "text": text}))
}
fn done(success: bool) -> Action {
    Action::new("done", json!({"text": "finished", "success": success}))
}

struct Traj {
    t: Trajectory,
}

impl Traj {
    fn new(id: &str, task: &str, attempt: u32, success: bool) -> Self {
        Traj {
            t: Trajectory {
                id: id.into(),
                task_id: task.into(),
                attempt,
                round: 1,
                reflection: None,
                source: "test".into(),
                teacher: "test".into(),
                outcome: Outcome {
                    success,
                    ..Default::default()
                },
                steps: Vec::new(),
            },
        }
    }
    fn step(mut self, state: State, action: Action) -> Self {
        let index = self.t.steps.len() as u32;
        self.t.steps.push(Step {
            index,
            state,
            output: ModelOutput {
                actions: vec![action],
                ..Default::default()
            },
            result: vec![ActionResult::default()],
            timing: None,
            ..Default::default()
        });
        self
    }
    fn error_at_last(mut self, err: &str) -> Self {
        if let Some(s) = self.t.steps.last_mut() {
            s.result = vec![ActionResult {
                error: Some(err.into()),
                ..Default::default()
            }];
        }
        self
    }
    fn by(mut self, teacher: &str) -> Self {
        self.t.teacher = teacher.into();
        self
    }
    fn build(mut self) -> Trajectory {
        self.t.fill_progress();
        self.t
    }
}

fn task(id: &str, domain: &str) -> Task {
    Task {
        task_id: id.into(),
        website: "https://shop.test".into(),
        domain: domain.into(),
        category: String::new(),
        instruction: format!("do task {id}"),
        source: "test".into(),
    }
}

/// Writes a dataset with one screenshot every state uses.
fn dataset(dir: &Path, tasks: &[Task], trajs: &[Trajectory]) -> Dataset {
    let mut ds = Dataset::create(dir, "test", "").unwrap();
    std::fs::create_dir_all(dir.join("screenshots")).unwrap();
    image::RgbImage::new(8, 6)
        .save(dir.join("screenshots/s.png"))
        .unwrap();
    ds.append_tasks(tasks).unwrap();
    ds.append_trajectories(trajs).unwrap();
    ds
}

fn mine(ds: &Dataset) -> MineOutput {
    mine_dataset(ds, &MineConfig::default(), &HeuristicJudge, &|_| {}).unwrap()
}

const HOME: &[(u32, &str, &str)] = &[
    (1, "a", "Products"),
    (2, "a", "Help"),
    (3, "input", "Search"),
];
const LIST: &[(u32, &str, &str)] = &[
    (5, "a", "Red shoe"),
    (6, "a", "Blue shoe"),
    (7, "button", "Next"),
];
const ITEM: &[(u32, &str, &str)] = &[
    (8, "a", "Reviews"),
    (9, "button", "Add to cart"),
    (10, "a", "Share"),
];
const CART: &[(u32, &str, &str)] = &[(11, "button", "Checkout")];

fn success_shop(id: &str, task: &str) -> Trajectory {
    Traj::new(id, task, 1, true)
        .step(page("https://shop.test/", HOME), click(1))
        .step(page("https://shop.test/list", LIST), click(5))
        .step(page("https://shop.test/item/5", ITEM), click(9))
        .step(page("https://shop.test/cart", CART), done(true))
        .build()
}

/// A success and a failure of task t1 that diverge at step 2 (Reviews instead of
/// Add to cart).
fn wrong_click_pair() -> (Trajectory, Trajectory) {
    let ok = success_shop("t1-a1", "t1");
    let bad = Traj::new("t1-a2", "t1", 2, false)
        .step(page("https://shop.test/", HOME), click(1))
        .step(page("https://shop.test/list", LIST), click(5))
        .step(page("https://shop.test/item/5", ITEM), click(8))
        .step(page("https://shop.test/item/5/reviews", &[]), done(false))
        .build();
    (ok, bad)
}

// ---------- known answers ----------

#[test]
fn wrong_click_after_identical_prefix_is_the_divergence() {
    let dir = tempfile::tempdir().unwrap();
    let (ok, bad) = wrong_click_pair();
    let ds = dataset(dir.path(), &[task("t1", "shopping")], &[ok, bad]);
    let out = mine(&ds);
    assert_eq!(out.pairs.len(), 1, "{:?}", out.report.rejections);
    let p = &out.pairs[0];
    assert_eq!(p.kind, PairKind::FailContrast);
    assert_eq!((p.success.step, p.loc.step), (2, 2));
    assert_eq!(p.target_action, click(9));
    assert_eq!(p.loc_action, click(8));
    assert_eq!(p.failure_mode.category, "wrong_element");
    assert_eq!(p.failure_mode.source, LabelSource::Heuristic);
    assert_eq!(p.scores.alignment, 1.0);
    assert!(p.scores.contrast > 0.0);
    assert!(p.gates.validity && p.gates.visual && p.gates.progress);
    assert_eq!(p.domain, "shopping");
    assert_eq!(out.report.kept, 1);
    assert_eq!(out.report.by_category.get("wrong_element"), Some(&1));
}

/// Screenshots reached through a link that leaves the dataset root are refused; the
/// report says why the visual gate failed, in report.json and on the terminal, instead
/// of a bare count.
#[cfg(unix)]
#[test]
fn a_failed_gate_shows_its_reason_in_the_report() {
    let dir = tempfile::tempdir().unwrap();
    let (ok, bad) = wrong_click_pair();
    let root = dir.path().join("ds");
    let ds = dataset(&root, &[task("t1", "shopping")], &[ok, bad]);
    // The screenshots move out of the dataset; a link to them stays in.
    let outside = dir.path().join("shots");
    std::fs::rename(root.join("screenshots"), &outside).unwrap();
    std::os::unix::fs::symlink(&outside, root.join("screenshots")).unwrap();
    let out = mine(&ds);
    assert!(out.pairs.is_empty());
    let key = "gate_failed:visual";
    assert_eq!(out.report.rejections.get(key), Some(&1));
    let why = &out.report.rejection_examples[key];
    assert!(why.contains("outside the dataset root"), "{why}");
    assert!(
        out.report
            .summary_table()
            .contains(&format!("{key}, e.g.: "))
    );
    let json = serde_json::to_value(&out.report).unwrap();
    assert!(json["rejection_examples"][key].is_string(), "{json}");
}

/// The recipe mines only the SFT policy's mistakes: with `loc_teachers`, a scripted
/// teacher's failure on the same instance is not a loc side, its success still the
/// reference.
#[test]
fn loc_teachers_mine_only_the_named_teachers_failures() {
    let dir = tempfile::tempdir().unwrap();
    let ok = Traj::new("t1-a1", "t1", 1, true)
        .by("scripted-miniwob")
        .step(page("https://shop.test/", HOME), click(1))
        .step(page("https://shop.test/list", LIST), click(5))
        .step(page("https://shop.test/item/5", ITEM), click(9))
        .step(page("https://shop.test/cart", CART), done(true))
        .build();
    let failing = |id: &str, teacher: &str, wrong: i64| {
        Traj::new(id, "t1", 2, false)
            .by(teacher)
            .step(page("https://shop.test/", HOME), click(1))
            .step(page("https://shop.test/list", LIST), click(wrong))
            .step(page("https://shop.test/item/6", ITEM), done(false))
            .build()
    };
    let trajs = [
        ok,
        failing("t1-a2", "scripted-miniwob", 6),
        failing("t1-p1", "local:sft-reflection", 7),
    ];
    let ds = dataset(dir.path(), &[task("t1", "shopping")], &trajs);
    let locs = |cfg: &MineConfig| -> Vec<String> {
        let out = mine_dataset(&ds, cfg, &HeuristicJudge, &|_| {}).unwrap();
        out.pairs.iter().map(|p| p.loc.trajectory.clone()).collect()
    };
    // Both fail at the same state: quality control keeps one pair per success step
    // (`duplicate_success_step`), the teacher's, crowding out the policy's mistake.
    assert_eq!(locs(&MineConfig::default()), ["t1-a2"]);
    let cfg = MineConfig::from_toml("loc_teachers = [\"local:*\"]").unwrap();
    assert_eq!(locs(&cfg), ["t1-p1"]);
}

#[test]
fn reconverging_longer_route_is_a_detour() {
    let dir = tempfile::tempdir().unwrap();
    let short = Traj::new("t2-a1", "t2", 1, true)
        .step(page("https://shop.test/", HOME), click(1))
        .step(page("https://shop.test/list", LIST), click(5))
        .step(page("https://shop.test/item/5", ITEM), done(true))
        .build();
    let long = Traj::new("t2-a2", "t2", 2, true)
        .step(page("https://shop.test/", HOME), click(2))
        .step(
            page(
                "https://shop.test/help",
                &[(20, "a", "FAQ"), (21, "a", "Back")],
            ),
            click(21),
        )
        .step(page("https://shop.test/", HOME), click(1))
        .step(page("https://shop.test/list", LIST), click(5))
        .step(page("https://shop.test/item/5", ITEM), done(true))
        .build();
    let ds = dataset(dir.path(), &[task("t2", "shopping")], &[short, long]);
    let out = mine(&ds);
    assert_eq!(out.pairs.len(), 1, "{:?}", out.report.rejections);
    let p = &out.pairs[0];
    assert_eq!(p.kind, PairKind::Detour);
    assert_eq!(p.success.trajectory, "t2-a1");
    assert_eq!(p.loc.trajectory, "t2-a2");
    assert_eq!((p.success.step, p.loc.step), (0, 0));
    assert_eq!(p.loc_action, click(2));
    assert_eq!(p.failure_mode.category, "navigation_detour");
    assert_eq!(out.report.trajectory_pairs.get("detour"), Some(&1));
}

#[test]
fn search_wording_only_difference_is_excluded_with_its_reason() {
    let dir = tempfile::tempdir().unwrap();
    let g = [(1, "input", "Search")];
    let r = [(5, "a", "Flight A"), (6, "a", "Flight B")];
    let ok = Traj::new("t3-a1", "t3", 1, true)
        .step(
            page("https://find.test/", &g),
            Action::new("search", json!({"query": "cheap flights paris"})),
        )
        .step(page("https://find.test/results", &r), click(5))
        .step(page("https://find.test/end", &[]), done(true))
        .build();
    let bad = Traj::new("t3-a2", "t3", 2, false)
        .step(
            page("https://find.test/", &g),
            Action::new("search", json!({"query": "paris flights cheap"})),
        )
        .step(page("https://find.test/results", &r), click(5))
        .step(page("https://find.test/end", &[]), done(false))
        .build();
    let ds = dataset(dir.path(), &[task("t3", "travel")], &[ok, bad]);
    let out = mine(&ds);
    assert!(out.pairs.is_empty(), "{:?}", out.pairs);
    assert_eq!(out.report.rejections.get("search_wording_only"), Some(&1));
    assert_eq!(out.report.candidates.get("search_wording_only"), Some(&1));
}

#[test]
fn repeated_action_is_labelled_loop_stall() {
    let dir = tempfile::tempdir().unwrap();
    let a = [(1, "a", "Next"), (2, "a", "Home")];
    let b = [(4, "button", "Buy"), (5, "button", "Refresh")];
    let ok = Traj::new("t4-a1", "t4", 1, true)
        .step(page("https://shop.test/a", &a), click(1))
        .step(page("https://shop.test/b", &b), click(4))
        .step(page("https://shop.test/c", &[]), done(true))
        .build();
    let mut bad =
        Traj::new("t4-a2", "t4", 2, false).step(page("https://shop.test/a", &a), click(1));
    for _ in 0..4 {
        bad = bad.step(page("https://shop.test/b", &b), click(5));
    }
    let ds = dataset(dir.path(), &[task("t4", "shopping")], &[ok, bad.build()]);
    let out = mine(&ds);
    assert_eq!(out.pairs.len(), 1, "{:?}", out.report.rejections);
    let p = &out.pairs[0];
    assert_eq!(p.failure_mode.category, "loop_stall");
    assert_eq!(p.success.step, 1);
    assert!((1..=4).contains(&p.loc.step));
    assert_eq!(p.loc_action, click(5));
}

#[test]
fn early_done_is_labelled_premature_done_and_flagged_as_evaluation_failure() {
    let dir = tempfile::tempdir().unwrap();
    let form = [(3, "input", "Name"), (4, "button", "Submit")];
    // after typing, the field holds the value: another state
    let mut typed = page("https://form.test/form", &form);
    typed.elements[0]
        .attrs
        .insert("value".into(), "alice".into());
    let ok = Traj::new("t5-a1", "t5", 1, true)
        .step(page("https://form.test/", HOME), click(1))
        .step(page("https://form.test/list", LIST), click(5))
        .step(page("https://form.test/form", &form), input(3, "alice"))
        .step(typed, click(4))
        .step(page("https://form.test/thanks", &[]), done(true))
        .build();
    let bad = Traj::new("t5-a2", "t5", 2, false)
        .step(page("https://form.test/", HOME), click(1))
        .step(page("https://form.test/list", LIST), click(5))
        .step(page("https://form.test/form", &form), done(true))
        .build();
    let ds = dataset(dir.path(), &[task("t5", "forms")], &[ok, bad]);
    let out = mine(&ds);
    assert_eq!(out.pairs.len(), 1, "{:?}", out.report.rejections);
    let p = &out.pairs[0];
    assert_eq!(p.failure_mode.category, "premature_done");
    assert_eq!((p.success.step, p.loc.step), (2, 2));
    assert_eq!(p.loc_action.name, "done");
    assert_eq!(
        p.loc_failure,
        Some(rmsweb::mine::pair::FailureKind::Evaluation)
    );
}

#[test]
fn changed_date_is_labelled_wrong_input_value() {
    let dir = tempfile::tempdir().unwrap();
    let mut f = page(
        "https://travel.test/search",
        &[(4, "input", ""), (5, "button", "Search")],
    );
    f.elements[0].attrs.insert("type".into(), "date".into());
    f.elements[0].attrs.insert("name".into(), "depart".into());
    let res = page("https://travel.test/results", &[(7, "a", "Flight 1")]);
    let ok = Traj::new("t6-a1", "t6", 1, true)
        .step(page("https://travel.test/", HOME), click(1))
        .step(f.clone(), input(4, "2026-05-01"))
        .step(f.clone(), click(5))
        .step(res.clone(), click(7))
        .step(page("https://travel.test/booked", &[]), done(true))
        .build();
    let bad = Traj::new("t6-a2", "t6", 2, false)
        .step(page("https://travel.test/", HOME), click(1))
        .step(f.clone(), input(4, "2026-05-02"))
        .step(f.clone(), click(5))
        .step(res, click(7))
        .step(page("https://travel.test/booked", &[]), done(false))
        .build();
    let ds = dataset(dir.path(), &[task("t6", "travel")], &[ok, bad]);
    let out = mine(&ds);
    assert_eq!(out.pairs.len(), 1, "{:?}", out.report.rejections);
    let p = &out.pairs[0];
    assert_eq!(p.failure_mode.category, "wrong_input_value");
    assert_eq!((p.success.step, p.loc.step), (1, 1));
    assert_eq!(p.target_action, input(4, "2026-05-01"));
    assert!(
        p.evidence
            .iter()
            .any(|e| e.contains("same control, other value")),
        "{:?}",
        p.evidence
    );
}

#[test]
fn action_errors_are_labelled_technical_obstruction_and_face_the_strict_minimum() {
    let dir = tempfile::tempdir().unwrap();
    let ok = success_shop("t7-a1", "t7");
    let bad = Traj::new("t7-a2", "t7", 2, false)
        .step(page("https://shop.test/", HOME), click(1))
        .step(page("https://shop.test/list", LIST), click(6))
        .error_at_last("net::ERR_TIMED_OUT")
        .step(page("https://shop.test/list", LIST), done(false))
        .build();
    let ds = dataset(dir.path(), &[task("t7", "shopping")], &[ok, bad]);
    let out = mine(&ds);
    // Alone, an obstruction exceeds its 10% cap: it is mined, then dropped.
    assert_eq!(out.report.mined_before_qc, 1);
    assert_eq!(
        out.report.rejections.get("technical_obstruction_cap"),
        Some(&1)
    );
    let cfg = MineConfig {
        obstruction_cap: 1.0,
        ..Default::default()
    };
    let out = mine_dataset(&ds, &cfg, &HeuristicJudge, &|_| {}).unwrap();
    let p = &out.pairs[0];
    assert_eq!(p.failure_mode.category, "technical_obstruction");
    assert_eq!(
        p.loc_failure,
        Some(rmsweb::mine::pair::FailureKind::Runtime)
    );
    // A min score between the plain and the strict one drops it as strict.
    let cfg = MineConfig {
        obstruction_cap: 1.0,
        min_score: p.scores.total / 1.2,
        ..Default::default()
    };
    let out = mine_dataset(&ds, &cfg, &HeuristicJudge, &|_| {}).unwrap();
    assert!(out.pairs.is_empty());
    assert_eq!(
        out.report.rejections.get("below_min_score_strict"),
        Some(&1)
    );
}

// ---------- quality control ----------

/// A mined pair for quality-control tests (ids `CATEGORY-NNN`).
pub fn qc_pair(n: usize, category: &str, domain: &str, total: f64) -> MinedPair {
    MinedPair {
        id: format!("{category}-{n:03}"),
        task_id: format!("task-{category}-{n}"),
        domain: domain.into(),
        kind: PairKind::FailContrast,
        success: StepRef {
            trajectory: format!("s-{category}-{n}"),
            step: 1,
        },
        loc: StepRef {
            trajectory: format!("l-{category}-{n}"),
            step: 1,
        },
        target_action: click(1),
        loc_action: click(2),
        scores: PairScores {
            total,
            ..Default::default()
        },
        failure_mode: FailureMode {
            category: category.into(),
            confidence: 0.8,
            source: LabelSource::Heuristic,
        },
        gates: Gates {
            validity: true,
            visual: true,
            progress: true,
        },
        evidence: vec![],
        loc_failure: None,
    }
}

fn count(pairs: &[MinedPair], category: &str) -> usize {
    pairs
        .iter()
        .filter(|p| p.failure_mode.category == category)
        .count()
}

/// Spreads pairs over many domains so that the domain cap stays out of the way.
fn domain(n: usize) -> String {
    format!("d{}", n % 10)
}

#[test]
fn obstructions_are_capped_at_ten_percent_keeping_the_best() {
    let mut pairs = Vec::new();
    for (c, cat) in [
        "wrong_element",
        "wrong_input_value",
        "loop_stall",
        "technical_obstruction",
    ]
    .iter()
    .enumerate()
    {
        for n in 0..10 {
            pairs.push(qc_pair(n, cat, &domain(n + c), 0.5 + n as f64 / 100.0));
        }
    }
    let out = quality_control(pairs, &MineConfig::default());
    let obs = count(&out.kept, "technical_obstruction");
    assert!(obs as f64 <= 0.10 * out.kept.len() as f64 + 1e-9);
    assert_eq!(obs, 3, "floor(30 / 9)");
    assert_eq!(out.rejections.get("technical_obstruction_cap"), Some(&7));
    let mut kept: Vec<&str> = out
        .kept
        .iter()
        .filter(|p| p.failure_mode.category == "technical_obstruction")
        .map(|p| p.id.as_str())
        .collect();
    kept.sort();
    assert_eq!(
        kept,
        [
            "technical_obstruction-007",
            "technical_obstruction-008",
            "technical_obstruction-009"
        ]
    );
}

#[test]
fn category_balance_caps_the_largest_category_dropping_lowest_scores() {
    let mut pairs = Vec::new();
    for n in 0..20 {
        pairs.push(qc_pair(
            n,
            "wrong_element",
            &domain(n),
            0.3 + n as f64 / 40.0,
        ));
    }
    for cat in ["wrong_input_value", "loop_stall", "premature_done"] {
        for n in 0..5 {
            pairs.push(qc_pair(n, cat, &domain(n + 3), 0.5));
        }
    }
    let out = quality_control(pairs, &MineConfig::default());
    let n = out.kept.len();
    assert_eq!(n, 23);
    for cat in [
        "wrong_element",
        "wrong_input_value",
        "loop_stall",
        "premature_done",
    ] {
        assert!(count(&out.kept, cat) as f64 <= 0.35 * n as f64, "{cat}");
    }
    assert_eq!(count(&out.kept, "wrong_element"), 8);
    // the 8 kept are the 8 best
    assert!(
        out.kept
            .iter()
            .filter(|p| p.failure_mode.category == "wrong_element")
            .all(|p| p.scores.total >= 0.3 + 12.0 / 40.0)
    );
    assert_eq!(
        out.rejections.get("category_balance"),
        Some(&12),
        "{:?}",
        out.rejections
    );
    assert!(!out.balance.category_relaxed);
}

#[test]
fn category_balance_relaxes_to_an_even_split_when_too_few_categories() {
    let mut pairs = Vec::new();
    for n in 0..10 {
        pairs.push(qc_pair(n, "wrong_element", &domain(n), 0.5));
    }
    for n in 0..3 {
        pairs.push(qc_pair(n, "loop_stall", &domain(n + 5), 0.5));
    }
    let out = quality_control(pairs.clone(), &MineConfig::default());
    assert!(out.balance.category_relaxed);
    assert_eq!(out.balance.category_share, 0.5);
    assert_eq!(count(&out.kept, "wrong_element"), 3);
    assert_eq!(count(&out.kept, "loop_stall"), 3);
    // one category alone is not capped at all
    let one: Vec<MinedPair> = pairs.into_iter().take(10).collect();
    let out = quality_control(one, &MineConfig::default());
    assert_eq!(out.kept.len(), 10);
}

#[test]
fn domain_balance_and_dedupe_and_min_score() {
    let mut pairs = Vec::new();
    // Six categories (their 35% cap stays out of the way) over domain "big", which
    // holds half the pairs, and six small ones.
    let cats = [
        "wrong_element",
        "loop_stall",
        "premature_done",
        "wrong_input_value",
        "missed_constraint",
        "extraction_error",
    ];
    for (k, cat) in cats.iter().enumerate() {
        for n in 0..4 {
            let dom = if n < 2 {
                "big".to_string()
            } else {
                format!("small{k}")
            };
            pairs.push(qc_pair(n, cat, &dom, 0.5 + n as f64 / 10.0));
        }
    }
    let mut dup = qc_pair(0, "wrong_element", "small0", 0.9);
    dup.id = "wrong_element-dup".into();
    pairs.push(dup);
    pairs.push(qc_pair(99, "loop_stall", "small1", 0.01));
    let out = quality_control(pairs, &MineConfig::default());
    assert_eq!(out.rejections.get("duplicate_success_step"), Some(&1));
    assert_eq!(out.rejections.get("below_min_score"), Some(&1));
    assert!(
        !out.kept.iter().any(|p| p.id == "wrong_element-000"),
        "the weaker duplicate goes"
    );
    let domains: BTreeMap<&str, usize> = out.kept.iter().fold(BTreeMap::new(), |mut m, p| {
        *m.entry(p.domain.as_str()).or_default() += 1;
        m
    });
    let share = out.balance.domain_share;
    for (d, c) in &domains {
        assert!(
            *c as f64 <= share * out.kept.len() as f64 + 1e-9,
            "{d}: {c}"
        );
    }
    assert!(out.rejections.get("domain_balance").copied().unwrap_or(0) > 0);
}

// ---------- alignment ----------

#[test]
fn alignment_follows_the_weighted_formula() {
    let mut a = page(
        "https://shop.test/list?page=1",
        &[(1, "a", "X"), (2, "a", "Y"), (3, "a", "Z")],
    );
    let mut b = page(
        "https://shop.test/list?page=2",
        &[(7, "a", "X"), (8, "a", "Y"), (9, "a", "W")],
    );
    a.memory = "found 3 items".into();
    b.memory = "found 3 results".into();
    let (va, vb) = (StateView::new(&a, 0.2), StateView::new(&b, 0.6));
    let al = align(&va, &vb, &AlignmentWeights::default());
    assert_eq!(al.url, 0.7);
    assert_eq!(al.dom, 0.5); // {X,Y} of {X,Y,Z,W}, indices ignored
    assert_eq!(al.memory, 0.5); // {found,3} of {found,3,items,results}
    assert!((al.progress - 0.6).abs() < 1e-12);
    let hand = 0.35 * 0.7 + 0.35 * 0.5 + 0.15 * 0.5 + 0.15 * 0.6;
    assert!((al.total - hand).abs() < 1e-12, "{} vs {hand}", al.total);
    let w = AlignmentWeights {
        url: 0.1,
        dom: 0.2,
        memory: 0.3,
        progress: 0.4,
    };
    let al = align(&va, &vb, &w);
    assert!((al.total - (0.07 + 0.1 + 0.15 + 0.24)).abs() < 1e-12);
}

// ---------- determinism and scale ----------

/// A corpus with varied failures: wrong clicks, wrong values, early done.
fn varied_corpus(dir: &Path, tasks: usize) -> Dataset {
    let mut ts = Vec::new();
    let mut trajs = Vec::new();
    for t in 0..tasks {
        let id = format!("v{t:03}");
        ts.push(task(
            &id,
            ["shopping", "travel", "news", "jobs", "health"][t % 5],
        ));
        let pages: Vec<State> = (0..6)
            .map(|k| {
                let mut s = page(
                    &format!("https://site{t}.test/p{k}"),
                    &[
                        (1, "a", "Go on"),
                        (2, "a", "Elsewhere"),
                        (3, "input", "Field"),
                    ],
                );
                s.memory = format!("step {k}");
                s
            })
            .collect();
        let gold = |k: usize| {
            if k.is_multiple_of(2) {
                click(1)
            } else {
                input(3, &format!("v{k}"))
            }
        };
        let mut ok = Traj::new(&format!("{id}-a1"), &id, 1, true);
        for (k, p) in pages.iter().enumerate() {
            ok = ok.step(p.clone(), gold(k));
        }
        trajs.push(
            ok.step(page(&format!("https://site{t}.test/end"), &[]), done(true))
                .build(),
        );
        for att in 2..4u32 {
            let d = (t + att as usize) % 5 + 1;
            let mut bad = Traj::new(&format!("{id}-a{att}"), &id, att, false);
            for (k, p) in pages.iter().enumerate().take(d) {
                bad = bad.step(p.clone(), gold(k));
            }
            let wrong = match (t + att as usize) % 3 {
                0 => click(2),
                1 => input(3, "other value"),
                _ => done(true),
            };
            bad = bad.step(pages[d].clone(), wrong);
            bad = bad.step(
                page(&format!("https://site{t}.test/lost"), &[(1, "a", "?")]),
                done(false),
            );
            trajs.push(bad.build());
        }
    }
    dataset(dir, &ts, &trajs)
}

#[test]
fn output_is_identical_whatever_the_thread_count() {
    let dir = tempfile::tempdir().unwrap();
    let ds = varied_corpus(dir.path(), 30);
    let run = |threads: usize| {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .unwrap();
        let out = pool.install(|| mine(&ds));
        (
            serde_json::to_string(&out.pairs).unwrap(),
            serde_json::to_string(&out.report).unwrap(),
            out.pairs.len(),
        )
    };
    let one = run(1);
    let four = run(4);
    assert!(one.2 > 5, "the corpus should mine something: {}", one.0);
    assert_eq!(one, four);
}

#[test]
fn outputs_are_written_and_the_report_counts_everything() {
    let dir = tempfile::tempdir().unwrap();
    let ds = varied_corpus(dir.path(), 20);
    let out = mine(&ds);
    write_output(&dir.path().join("mined"), &out).unwrap();
    let text = std::fs::read_to_string(dir.path().join("mined/pairs.jsonl")).unwrap();
    let written: Vec<&str> = text.lines().collect();
    let expected: Vec<String> = out
        .pairs
        .iter()
        .map(|p| serde_json::to_string(p).unwrap())
        .collect();
    assert_eq!(written, expected);
    for l in written {
        let _: MinedPair = serde_json::from_str(l).unwrap();
    }
    let report: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.path().join("mined/report.json")).unwrap())
            .unwrap();
    assert_eq!(report["kept"], out.pairs.len());
    let r = &out.report;
    // every contrasted pair is either mined or rejected with a reason
    let contrasted: u64 = r.trajectory_pairs.values().sum();
    let pair_level: u64 = r
        .rejections
        .iter()
        .filter(|(k, _)| {
            ![
                "below_min_score",
                "below_min_score_strict",
                "trivial_target",
                "duplicate_success_step",
                "technical_obstruction_cap",
                "category_balance",
                "domain_balance",
            ]
            .contains(&k.as_str())
        })
        .map(|(_, v)| v)
        .sum();
    assert_eq!(contrasted, r.mined_before_qc + pair_level);
    let qc_dropped: u64 = r.rejections.values().sum::<u64>() - pair_level;
    assert_eq!(r.mined_before_qc, r.kept + qc_dropped);
    assert_eq!(r.scores.count, r.kept);
    assert_eq!(r.by_kind.values().sum::<u64>(), r.kept);
}

#[test]
fn unreadable_records_are_reported_and_skipped() {
    let dir = tempfile::tempdir().unwrap();
    let ds = varied_corpus(dir.path(), 5);
    drop(ds);
    let path = dir.path().join("trajectories.jsonl");
    let mut text = std::fs::read_to_string(&path).unwrap();
    text.push_str("{\"id\": \"broken\", \"task_id\": 5}\n");
    std::fs::write(&path, text).unwrap();
    let ds = Dataset::open(dir.path()).unwrap();
    let out = mine(&ds);
    assert_eq!(out.report.unreadable_records, 1);
    assert!(
        out.report.errors[0].contains("trajectories.jsonl"),
        "{}",
        out.report.errors[0]
    );
    assert!(out.report.kept > 0);
}

// ---------- labelling ----------

fn wrong_click_dataset(dir: &Path) -> Dataset {
    let (ok, bad) = wrong_click_pair();
    dataset(dir, &[task("t1", "shopping")], &[ok, bad])
}

#[test]
fn llm_judge_labels_and_falls_back_with_a_note() {
    let dir = tempfile::tempdir().unwrap();
    let ds = wrong_click_dataset(dir.path());
    let cfg = MineConfig::default();
    let good = LlmJudge::new(Box::new(|prompt: &str| {
        assert!(
            prompt.contains("do task t1") && prompt.contains("click(8)"),
            "{prompt}"
        );
        Ok("Sure: {\"category\": \"missed_constraint\", \"confidence\": 0.6}".into())
    }));
    let out = mine_dataset(&ds, &cfg, &good, &|_| {}).unwrap();
    assert_eq!(out.pairs[0].failure_mode.category, "missed_constraint");
    assert_eq!(out.pairs[0].failure_mode.source, LabelSource::Judge);

    let judges: Vec<Box<dyn Judge>> = vec![
        Box::new(LlmJudge::new(Box::new(|_: &str| {
            anyhow::bail!("connection refused")
        }))),
        Box::new(LlmJudge::new(Box::new(|_: &str| {
            Ok("{\"category\": \"gremlins\", \"confidence\": 1}".into())
        }))),
    ];
    for j in judges {
        let out = mine_dataset(&ds, &cfg, j.as_ref(), &|_| {}).unwrap();
        let p = &out.pairs[0];
        assert_eq!(p.failure_mode.source, LabelSource::Heuristic);
        assert_eq!(p.failure_mode.category, "wrong_element");
        assert!(p.evidence[0].contains("judge failed"), "{:?}", p.evidence);
        assert_eq!(
            out.report
                .label_notes
                .get("judge_failed_fallback_heuristic"),
            Some(&1)
        );
    }
}

// ---------- explain ----------

#[test]
fn explain_lists_every_candidate_and_why() {
    let dir = tempfile::tempdir().unwrap();
    let ds = wrong_click_dataset(dir.path());
    let cfg = MineConfig::default();
    let e = explain_trajectories(&ds, "t1-a1", "t1-a2", &cfg, &HeuristicJudge).unwrap();
    // 3 non-terminal success steps × 4 loc steps
    assert_eq!(e.candidates.len(), 12);
    let won: Vec<_> = e
        .candidates
        .iter()
        .filter(|c| c.verdict == Verdict::Won)
        .collect();
    assert_eq!(won.len(), 1);
    assert_eq!((won[0].success_step, won[0].loc_step), (2, 2));
    assert!(
        e.candidates
            .iter()
            .any(|c| c.verdict == Verdict::ZeroContrast)
    );
    assert!(
        e.candidates
            .iter()
            .any(|c| c.verdict == Verdict::AlignmentBelowThreshold)
    );
    assert_eq!(e.in_output, None);
    let id = e.mined.as_ref().unwrap().id.clone();
    let out = mine(&ds);
    write_output(&dir.path().join("mined"), &out).unwrap();
    let by_id = explain_pair_id(&ds, &id, &cfg, &HeuristicJudge).unwrap();
    assert_eq!(by_id.in_output, Some(true));
    let text = render(&by_id);
    assert!(
        text.contains("WON") && text.contains("zero contrast"),
        "{text}"
    );
    assert!(explain_pair_id(&ds, "no-such-pair", &cfg, &HeuristicJudge).is_err());
}

#[test]
fn explain_sanitizes_untrusted_text() {
    let dir = tempfile::tempdir().unwrap();
    let ok = success_shop("t8-a1", "t8");
    let bad = Traj::new("t8-a2", "t8", 2, false)
        .step(
            page("https://shop.test/", HOME),
            input(3, "evil\u{1b}[2J\u{7}text"),
        )
        .step(page("https://shop.test/x", &[]), done(false))
        .build();
    let ds = dataset(dir.path(), &[task("t8", "shopping")], &[ok, bad]);
    let e = explain_trajectories(
        &ds,
        "t8-a1",
        "t8-a2",
        &MineConfig::default(),
        &HeuristicJudge,
    )
    .unwrap();
    let text = render(&e);
    assert!(text.contains("evil"));
    assert!(
        !text.chars().any(|c| c == '\u{1b}' || c == '\u{7}'),
        "{text:?}"
    );
}

#[test]
fn missing_screenshot_fails_the_visual_gate() {
    let dir = tempfile::tempdir().unwrap();
    let ds = wrong_click_dataset(dir.path());
    std::fs::remove_file(dir.path().join("screenshots/s.png")).unwrap();
    let out = mine(&ds);
    assert!(out.pairs.is_empty());
    assert_eq!(out.report.rejections.get("gate_failed:visual"), Some(&1));
}

// ---------- command line ----------

#[test]
fn cli_mines_and_explains() {
    let dir = tempfile::tempdir().unwrap();
    let _ = wrong_click_dataset(dir.path());
    let bin = env!("CARGO_BIN_EXE_rmsweb");
    let st = std::process::Command::new(bin)
        .args(["mine", "--dataset"])
        .arg(dir.path())
        .args(["--threads", "2"])
        .output()
        .unwrap();
    assert!(
        st.status.success(),
        "{}",
        String::from_utf8_lossy(&st.stderr)
    );
    let stdout = String::from_utf8_lossy(&st.stdout);
    assert!(stdout.contains("wrong_element"), "{stdout}");
    let pairs = std::fs::read_to_string(dir.path().join("mined/pairs.jsonl")).unwrap();
    let p: MinedPair = serde_json::from_str(pairs.lines().next().unwrap()).unwrap();
    let st = std::process::Command::new(bin)
        .args(["mine", "explain"])
        .arg(dir.path())
        .arg(&p.id)
        .arg("--json")
        .output()
        .unwrap();
    assert!(
        st.status.success(),
        "{}",
        String::from_utf8_lossy(&st.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&st.stdout).unwrap();
    assert_eq!(v["in_output"], true);
    assert_eq!(v["candidates"].as_array().unwrap().len(), 12);
    let st = std::process::Command::new(bin)
        .args(["mine", "explain"])
        .arg(dir.path())
        .args(["--success", "t1-a1", "--loc", "t1-a2"])
        .output()
        .unwrap();
    assert!(st.status.success());
    assert!(String::from_utf8_lossy(&st.stdout).contains("WON"));
    let bad = std::fs::write(dir.path().join("bad.toml"), "min_alignment = 7");
    bad.unwrap();
    let st = std::process::Command::new(bin)
        .args(["mine", "--dataset"])
        .arg(dir.path())
        .arg("--config")
        .arg(dir.path().join("bad.toml"))
        .output()
        .unwrap();
    assert!(!st.status.success());
    assert!(String::from_utf8_lossy(&st.stderr).contains("min_alignment"));
}

// ---------- route choices ----------

/// Two verified successes take different routes from the home page (search, or the
/// Products menu); a failure takes the menu route and then opens the wrong item.
/// Against the search success, its menu click is a route choice (the menu success
/// takes it in the same state), not a failure: it is not mined, and the rejection
/// says why. Against the menu success, the wrong item is mined.
fn route_choice_dataset(dir: &Path, with_menu_success: bool) -> Dataset {
    let search = Traj::new("t9-a1", "t9", 1, true)
        .step(page("https://shop.test/", HOME), input(3, "red shoe"))
        .step(
            page(
                "https://shop.test/search?q=red+shoe",
                &[(30, "a", "Red shoe")],
            ),
            click(30),
        )
        .step(page("https://shop.test/item/5", ITEM), click(9))
        .step(page("https://shop.test/cart", CART), done(true))
        .build();
    let menu = Traj::new("t9-a2", "t9", 2, true)
        .step(page("https://shop.test/", HOME), click(1))
        .step(page("https://shop.test/list", LIST), click(5))
        .step(page("https://shop.test/item/5", ITEM), click(9))
        .step(page("https://shop.test/cart", CART), done(true))
        .build();
    let bad = Traj::new("t9-a3", "t9", 3, false)
        .step(page("https://shop.test/", HOME), click(1))
        .step(page("https://shop.test/list", LIST), click(6))
        .step(page("https://shop.test/item/6", ITEM), done(false))
        .build();
    let mut trajs = vec![search, bad];
    if with_menu_success {
        trajs.push(menu);
    }
    dataset(dir, &[task("t9", "shopping")], &trajs)
}

#[test]
fn a_route_another_success_takes_is_not_mined_as_a_failure() {
    let dir = tempfile::tempdir().unwrap();
    let ds = route_choice_dataset(dir.path(), true);
    let out = mine(&ds);
    assert_eq!(
        out.report.rejections.get("route_choice"),
        Some(&1),
        "{:?}",
        out.report
    );
    assert!(
        out.report
            .candidates
            .get("route_choice")
            .copied()
            .unwrap_or(0)
            >= 1
    );
    assert_eq!(out.pairs.len(), 1, "{:?}", out.pairs);
    let p = &out.pairs[0];
    assert_eq!(p.success.trajectory, "t9-a2");
    assert_eq!((p.success.step, p.loc.step), (1, 1));
    assert_eq!(p.loc_action, click(6));
    // explain shows the verdict with the success that takes the route
    let e = explain_trajectories(
        &ds,
        "t9-a1",
        "t9-a3",
        &MineConfig::default(),
        &HeuristicJudge,
    )
    .unwrap();
    assert_eq!(e.rejection.as_deref(), Some("route_choice"));
    let rc = e
        .candidates
        .iter()
        .find(|c| matches!(c.verdict, Verdict::RouteChoice { .. }))
        .expect("a route-choice candidate");
    assert_eq!((rc.success_step, rc.loc_step), (0, 0));
    match &rc.verdict {
        Verdict::RouteChoice {
            trajectory, step, ..
        } => assert_eq!((trajectory.as_str(), *step), ("t9-a2", 0)),
        v => panic!("{v:?}"),
    }
    assert!(
        render(&e).contains("route choice (success t9-a2"),
        "{}",
        render(&e)
    );
}

#[test]
fn without_the_other_success_the_same_step_is_mined() {
    let dir = tempfile::tempdir().unwrap();
    let ds = route_choice_dataset(dir.path(), false);
    let out = mine(&ds);
    assert_eq!(out.report.rejections.get("route_choice"), None);
    assert_eq!(out.pairs.len(), 1, "{:?}", out.report.rejections);
    assert_eq!((out.pairs[0].success.step, out.pairs[0].loc.step), (0, 0));
    assert_eq!(out.pairs[0].loc_action, click(1));
}

//! Mining throughput (and balance alone on 17k pairs, the 5k-task corpus's size) on a
//! generated corpus of the paper's shape (4 attempts per task,
//! about 15 steps, 30 elements per state; failures share a prefix with the success
//! and then wander off). The full 5k-task figure is measured with a release build:
//! `python3 make_corpus.py /tmp/corpus5k --tasks 5000` then
//! `/usr/bin/time -v target/release/rmsweb mine --dataset /tmp/corpus5k`.

use criterion::{Criterion, criterion_group, criterion_main};
use rmsweb::action::Action;
use rmsweb::mine::balance::{Shares, balance};
use rmsweb::mine::pair::{
    FailureMode, Gates, LabelSource, MinedPair, PairKind, PairScores, StepRef,
};
use rmsweb::mine::{HeuristicJudge, MineConfig, mine_dataset};
use rmsweb::trajectory::{
    ActionResult, Dataset, Element, ModelOutput, Outcome, State, Step, Task, Trajectory,
};
use serde_json::json;
use std::collections::BTreeMap;
use std::path::Path;

const WORDS: &[&str] = &[
    "search", "results", "price", "cart", "checkout", "flight", "hotel", "recipe", "review",
    "rating", "filter", "sort", "next", "previous", "details", "add", "remove", "size", "color",
];
const DOMAINS: &[&str] = &["shopping", "travel", "recipes", "housing", "jobs", "news"];

/// A small deterministic generator (xorshift).
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

fn page(site: &str, pid: u64, elements: usize) -> Vec<Element> {
    let mut r = Rng(pid.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    (0..elements)
        .map(|i| {
            let tag = ["a", "a", "button", "input", "select", "span"][r.below(6)];
            let mut attrs = BTreeMap::new();
            if tag == "a" {
                attrs.insert("href".to_string(), format!("{site}/{pid}/{i}"));
            }
            let words: Vec<&str> = (0..1 + r.below(4))
                .map(|_| WORDS[r.below(WORDS.len())])
                .collect();
            Element {
                index: (100 * (pid % 7) + i as u64) as u32,
                tag: tag.into(),
                role: tag.into(),
                text: words.join(" "),
                attrs,
                bbox: [0.0, 20.0 * i as f64, 120.0, 18.0],
            }
        })
        .collect()
}

fn act_on(els: &[Element], r: &mut Rng) -> Action {
    let usable: Vec<&Element> = els
        .iter()
        .filter(|e| e.tag != "span" && e.tag != "select")
        .collect();
    let e = usable[r.below(usable.len())];
    if e.tag == "input" {
        Action::new(
            "input",
            json!({"index": e.index, "text": WORDS[r.below(WORDS.len())]}),
        )
    } else {
        Action::new("click", json!({"index": e.index}))
    }
}

fn build_corpus(dir: &Path, tasks: usize) -> Dataset {
    let mut ds = Dataset::create(dir, "bench", "").unwrap();
    std::fs::create_dir_all(dir.join("screenshots")).unwrap();
    image::RgbImage::new(48, 32)
        .save(dir.join("screenshots/s.png"))
        .unwrap();
    let mut rnd = Rng(1234);
    let mut ts = Vec::new();
    let mut trajs = Vec::new();
    for t in 0..tasks {
        let domain = DOMAINS[t % DOMAINS.len()];
        let site = format!("https://{domain}{t}.example.test");
        let tid = format!("t{t:05}");
        ts.push(Task {
            task_id: tid.clone(),
            website: site.clone(),
            domain: domain.into(),
            category: domain.into(),
            instruction: format!("task {t}"),
            source: "synthetic".into(),
        });
        let n = 12 + rnd.below(7);
        let gold: Vec<(String, Vec<Element>, Action)> = (0..n)
            .map(|i| {
                let els = page(&site, (t * 100 + i) as u64, 30);
                let a = act_on(&els, &mut Rng((t * 1000 + i) as u64 | 1));
                (format!("{site}/p{i}"), els, a)
            })
            .collect();
        for att in 0..4u32 {
            let success = att == 0 || rnd.below(4) == 0;
            let mut path = gold.clone();
            if !success {
                let d = 1 + rnd.below(n - 2);
                path.truncate(d);
                let (u, e, g) = path.pop().unwrap();
                let mut wrong = act_on(&e, &mut Rng((t * 31 + att as usize) as u64 | 1));
                if wrong == g {
                    wrong = Action::new("click", json!({"index": -1}));
                }
                path.push((u, e, wrong));
                for i in d..d + 2 + rnd.below(7) {
                    let els = page(&site, (t * 100 + 50 + i) as u64, 30);
                    let a = act_on(&els, &mut Rng((t * 7 + i) as u64 | 1));
                    path.push((format!("{site}/x{i}"), els, a));
                }
            }
            path.push((
                format!("{site}/end"),
                Vec::new(),
                Action::new("done", json!({"text": "finished", "success": success})),
            ));
            let steps = path
                .into_iter()
                .enumerate()
                .map(|(i, (url, elements, a))| Step {
                    index: i as u32,
                    state: State {
                        url,
                        elements,
                        screenshot: Some("screenshots/s.png".into()),
                        memory: format!("done {i} steps"),
                        ..Default::default()
                    },
                    output: ModelOutput {
                        actions: vec![a],
                        ..Default::default()
                    },
                    result: vec![ActionResult::default()],
                    timing: None,
                    ..Default::default()
                })
                .collect();
            let mut tr = Trajectory {
                id: format!("{tid}-a{att}"),
                task_id: tid.clone(),
                attempt: att + 1,
                round: 1,
                reflection: None,
                source: "synthetic".into(),
                teacher: "synthetic".into(),
                outcome: Outcome {
                    success,
                    ..Default::default()
                },
                steps,
            };
            tr.fill_progress();
            trajs.push(tr);
        }
    }
    ds.append_tasks(&ts).unwrap();
    ds.append_trajectories(&trajs).unwrap();
    ds
}

/// Pairs of the 5k-task corpus's size for balance alone: skewed categories (half
/// wrong_element), eleven domains, distinct scores.
fn balance_input(n: usize) -> Vec<MinedPair> {
    const CATS: &[&str] = &[
        "wrong_element",
        "wrong_element",
        "wrong_element",
        "wrong_element",
        "missed_constraint",
        "missed_constraint",
        "wrong_input_value",
        "premature_done",
    ];
    let mut r = Rng(99);
    (0..n)
        .map(|k| MinedPair {
            id: format!("p{k:06}"),
            task_id: format!("t{k}"),
            domain: format!("d{}", r.below(11)),
            kind: PairKind::FailContrast,
            success: StepRef {
                trajectory: format!("s{k}"),
                step: 1,
            },
            loc: StepRef {
                trajectory: format!("l{k}"),
                step: 1,
            },
            target_action: Action::new("click", json!({"index": 1})),
            loc_action: Action::new("click", json!({"index": 2})),
            scores: PairScores {
                total: r.below(1_000_000) as f64 / 1e6,
                ..Default::default()
            },
            failure_mode: FailureMode {
                category: CATS[r.below(CATS.len())].into(),
                confidence: 0.7,
                source: LabelSource::Heuristic,
            },
            gates: Gates {
                validity: true,
                visual: true,
                progress: true,
            },
            evidence: Vec::new(),
            loc_failure: None,
        })
        .collect()
}

fn bench(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    let ds = build_corpus(dir.path(), 200);
    let cfg = MineConfig::default();
    let mut g = c.benchmark_group("mine");
    g.sample_size(10);
    g.bench_function("mine_200_tasks", |b| {
        b.iter(|| mine_dataset(&ds, &cfg, &HeuristicJudge, &|_| {}).unwrap())
    });
    let pairs = balance_input(17_000);
    let shares = Shares {
        category: cfg.max_category_share,
        domain: cfg.max_domain_share,
        obstruction: cfg.obstruction_cap,
    };
    g.bench_function("balance_17k_pairs", |b| b.iter(|| balance(&pairs, shares)));
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);

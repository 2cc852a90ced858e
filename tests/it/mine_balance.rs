//! Balance as an optimization (ALGORITHMS.md §4.7): property tests (every cap holds;
//! no dropped pair can be added back without breaking one; the kept total is the
//! largest any subset reaches, checked by brute force on small inputs; input order
//! does not matter), the 18-task hand-built set, and `mine explain` naming the cap
//! that dropped a pair.

use proptest::prelude::*;
use rmsweb::mine::balance::{Shares, balance, cap_count, effective_share};
use rmsweb::mine::config::MineConfig;
use rmsweb::mine::explain::{explain_pair_id, render};
use rmsweb::mine::pair::MinedPair;
use rmsweb::mine::qc::quality_control;
use rmsweb::mine::{HeuristicJudge, mine_dataset, write_output};
use rmsweb::trajectory::Dataset;
use std::collections::BTreeMap;

const CATS: &[&str] = &[
    "wrong_element",
    "wrong_input_value",
    "missed_constraint",
    "premature_done",
    "navigation_detour",
    "loop_stall",
    "extraction_error",
    "technical_obstruction",
];

fn pair(n: usize, category: &str, domain: &str, score: f64) -> MinedPair {
    crate::mine::qc_pair(n, category, domain, score)
}

fn shares() -> Shares {
    let c = MineConfig::default();
    Shares {
        category: c.max_category_share,
        domain: c.max_domain_share,
        obstruction: c.obstruction_cap,
    }
}

/// The caps in force for a set of pairs (groups counted in the whole input).
struct Caps {
    category: f64,
    domain: f64,
    obstruction: f64,
}

fn caps_of(input: &[MinedPair], s: Shares) -> Caps {
    let distinct = |f: fn(&MinedPair) -> &str| {
        let mut v: Vec<&str> = input.iter().map(f).collect();
        v.sort();
        v.dedup();
        v.len()
    };
    Caps {
        category: effective_share(s.category, distinct(|p| p.failure_mode.category.as_str())).0,
        domain: effective_share(s.domain, distinct(|p| p.domain.as_str())).0,
        obstruction: s.obstruction,
    }
}

/// Whether `kept` meets every cap.
fn meets(kept: &[&MinedPair], caps: &Caps) -> bool {
    let k = kept.len();
    let mut cats: BTreeMap<&str, usize> = BTreeMap::new();
    let mut doms: BTreeMap<&str, usize> = BTreeMap::new();
    for p in kept {
        *cats.entry(&p.failure_mode.category).or_default() += 1;
        *doms.entry(&p.domain).or_default() += 1;
    }
    cats.values().all(|&c| c <= cap_count(caps.category, k))
        && doms.values().all(|&d| d <= cap_count(caps.domain, k))
        && cats
            .get("technical_obstruction")
            .is_none_or(|&o| o <= cap_count(caps.obstruction, k))
}

fn arb_pairs(max: usize) -> impl Strategy<Value = Vec<MinedPair>> {
    (1usize..=8, 1usize..=7).prop_flat_map(move |(nc, nd)| {
        prop::collection::vec((0..nc, 0..nd, 0u32..1000), 0..=max).prop_map(move |v| {
            v.into_iter()
                .enumerate()
                .map(|(n, (c, d, s))| pair(n, CATS[c], &format!("d{d}"), f64::from(s) / 1000.0))
                .collect()
        })
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Caps hold, and no dropped pair can be added back without breaking one.
    #[test]
    fn caps_hold_and_no_dropped_pair_fits_back(pairs in arb_pairs(60)) {
        let b = balance(&pairs, shares());
        let caps = caps_of(&pairs, shares());
        let kept: Vec<&MinedPair> = pairs.iter().zip(&b.keep).filter(|(_, k)| **k).map(|(p, _)| p).collect();
        prop_assert_eq!(kept.len(), b.kept);
        prop_assert!(meets(&kept, &caps), "a cap is exceeded");
        prop_assert_eq!(b.drops.len(), pairs.len() - b.kept);
        for d in &b.drops {
            let mut more = kept.clone();
            more.push(&pairs[d.index]);
            prop_assert!(!meets(&more, &caps), "pair {} fits back", pairs[d.index].id);
            prop_assert!(!d.caps.is_empty(), "a dropped pair names no cap");
        }
    }

    /// The kept total is the largest any subset reaches (brute force over all
    /// subsets of small inputs).
    #[test]
    fn kept_total_is_the_largest_feasible(pairs in arb_pairs(11)) {
        let b = balance(&pairs, shares());
        let caps = caps_of(&pairs, shares());
        let n = pairs.len();
        let mut best = 0;
        for mask in 0u32..(1 << n) {
            let size = mask.count_ones() as usize;
            if size <= best {
                continue;
            }
            let subset: Vec<&MinedPair> = (0..n).filter(|i| mask & (1 << i) != 0).map(|i| &pairs[i]).collect();
            if meets(&subset, &caps) {
                best = size;
            }
        }
        prop_assert_eq!(b.kept, best);
    }

    /// The same set in another order keeps the same pairs.
    #[test]
    fn input_order_does_not_matter(pairs in arb_pairs(40), seed in any::<u64>()) {
        let mut shuffled = pairs.clone();
        let mut x = seed | 1;
        for i in (1..shuffled.len()).rev() {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            shuffled.swap(i, (x % (i as u64 + 1)) as usize);
        }
        let ids = |ps: &[MinedPair]| {
            let b = balance(ps, shares());
            let mut v: Vec<String> = ps.iter().zip(&b.keep).filter(|(_, k)| **k).map(|(p, _)| p.id.clone()).collect();
            v.sort();
            v
        };
        prop_assert_eq!(ids(&pairs), ids(&shuffled));
    }
}

#[test]
fn three_even_categories_keep_everything_but_not_seventeen() {
    // 6/6/6 under a 35% cap: 18 is feasible, 17 and 16 are not, so the search must
    // not stop at the first infeasible total.
    let mut pairs = Vec::new();
    for (c, cat) in CATS.iter().take(3).enumerate() {
        for k in 0..6 {
            pairs.push(pair(c * 6 + k, cat, &format!("d{}", (c * 6 + k) % 6), 0.5));
        }
    }
    assert_eq!(balance(&pairs, shares()).kept, 18);
    // One more pair in the first category: 19 is not feasible (floor(0.35*19) = 6,
    // the extra pair would make 7), and 18 is: the extra is dropped, nothing else.
    pairs.push(pair(99, CATS[0], "d5", 0.1));
    let b = balance(&pairs, shares());
    assert_eq!(b.kept, 18);
    assert_eq!(b.drops.len(), 1);
    assert_eq!(pairs[b.drops[0].index].id, "wrong_element-099");
    assert_eq!(b.drops[0].caps[0].group, "wrong_element");
}

#[test]
fn a_big_skewed_corpus_keeps_what_the_caps_allow_and_the_best_scores() {
    // 70% wrong_element: with three other categories of 10% each, the cap bounds
    // wrong_element at 35% of what is kept: K = 30 + 0.35K -> K = 46.
    let mut pairs = Vec::new();
    for n in 0..100 {
        let cat = match n % 10 {
            0 => "loop_stall",
            1 => "premature_done",
            2 => "wrong_input_value",
            _ => "wrong_element",
        };
        // scores 0.2..0.7, all above the minimum score
        pairs.push(pair(
            n,
            cat,
            &format!("d{}", n % 8),
            0.2 + (n % 97) as f64 / 200.0,
        ));
    }
    let out = quality_control(pairs.clone(), &MineConfig::default());
    assert_eq!(out.kept.len(), 46);
    let we: Vec<f64> = out
        .kept
        .iter()
        .filter(|p| p.failure_mode.category == "wrong_element")
        .map(|p| p.scores.total)
        .collect();
    assert_eq!(we.len(), 16);
    // the kept wrong_element pairs are the 16 best of that category
    let mut all_we: Vec<f64> = pairs
        .iter()
        .filter(|p| p.failure_mode.category == "wrong_element")
        .map(|p| p.scores.total)
        .collect();
    all_we.sort_by(|a, b| b.total_cmp(a));
    let mut we_sorted = we.clone();
    we_sorted.sort_by(|a, b| b.total_cmp(a));
    assert_eq!(we_sorted, all_we[..16].to_vec());
    assert_eq!(out.rejections.get("category_balance"), Some(&54));
    assert_eq!(out.balance.input, 100);
    assert_eq!(out.balance.kept, 46);
    assert!(
        out.dropped
            .iter()
            .all(|d| d.reason == "category_balance" && d.caps[0].group == "wrong_element")
    );
}

/// The 18-task set (tests/data/mine18: 3 categories x 6 tasks over 6 domains, one
/// known divergence each) keeps at least 16 pairs with the default caps, and the
/// pairs it keeps carry their known category.
#[test]
fn the_18_task_set_keeps_at_least_16() {
    let dir = tempfile::tempdir().unwrap();
    crate::tui_data::copy_dataset("tests/data/mine18", dir.path());
    let ds = Dataset::open(dir.path()).unwrap();
    let out = mine_dataset(&ds, &MineConfig::default(), &HeuristicJudge, &|_| {}).unwrap();
    let truth: BTreeMap<String, String> = std::fs::read_to_string(dir.path().join("labels.jsonl"))
        .unwrap()
        .lines()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            (
                v["loc"].as_str().unwrap().to_string(),
                v["category"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(
        out.report.mined_before_qc, 18,
        "{:?}",
        out.report.rejections
    );
    assert!(
        out.report.kept >= 16,
        "kept {} of 18: {:?}",
        out.report.kept,
        out.report.rejections
    );
    for p in &out.pairs {
        assert_eq!(
            p.failure_mode.category, truth[&p.loc.trajectory],
            "{}",
            p.id
        );
    }
}

/// A pair balance drops is explained: which cap, what share.
#[test]
fn explain_names_the_cap_that_dropped_a_pair() {
    let dir = tempfile::tempdir().unwrap();
    crate::tui_data::copy_dataset("tests/data/mine18", dir.path());
    // Drop one missed_constraint task's failure: 6/6/5 cannot keep 17, so a pair of a
    // full category goes.
    let path = dir.path().join("trajectories.jsonl");
    let text = std::fs::read_to_string(&path).unwrap();
    let kept: Vec<&str> = text
        .lines()
        .filter(|l| !l.contains("\"id\": \"m18-news-mc-a2\""))
        .collect();
    assert_eq!(kept.len(), 35);
    std::fs::write(&path, kept.join("\n") + "\n").unwrap();
    let ds = Dataset::open(dir.path()).unwrap();
    let out = mine_dataset(&ds, &MineConfig::default(), &HeuristicJudge, &|_| {}).unwrap();
    assert_eq!(out.report.kept, 15, "{:?}", out.report.rejections);
    write_output(&dir.path().join("mined"), &out).unwrap();
    let dropped = &out.dropped[0];
    assert_eq!(dropped.reason, "category_balance");
    let e = explain_pair_id(&ds, &dropped.id, &MineConfig::default(), &HeuristicJudge).unwrap();
    assert_eq!(e.in_output, Some(false));
    let d = e.dropped.as_ref().expect("the drop is explained");
    assert_eq!(d.caps[0].cap, "category");
    assert_eq!(d.caps[0].kept, 5);
    assert!((d.caps[0].share - 0.35).abs() < 1e-12);
    let text = render(&e);
    assert!(
        text.contains("category_balance") && text.contains("is full") && text.contains("35%"),
        "{text}"
    );
}

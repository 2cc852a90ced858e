//! The yield report of a collection: per round attempts, successes, yield and mean
//! steps of successes; overall figures; and a side-by-side table of a run with
//! reflection against one without.

use super::CollectConfig;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// One attempt.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct AttemptRecord {
    pub task: String,
    pub seed: u64,
    /// 1-based attempt number for this (task, seed).
    pub round: u32,
    pub success: bool,
    pub steps: usize,
    pub reason: String,
    /// A success retried for being longer than `detour_factor` × the shortest.
    pub detour: bool,
    /// The reflection this attempt was given.
    pub reflection: Option<String>,
    pub reflector: Option<String>,
    pub trajectory_id: String,
    pub seconds: f64,
}

impl AttemptRecord {
    /// Whether this attempt is its seed's last in a collection of `rounds` rounds:
    /// it needs no retry (a success that is no detour) or used the last round.
    pub fn ends_seed(&self, rounds: u32) -> bool {
        (self.success && !self.detour) || self.round == rounds
    }
}

/// Figures of one round (the n-th attempts of all seeds that got that far).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct RoundStats {
    pub round: u32,
    pub attempts: usize,
    pub successes: usize,
    /// successes / attempts.
    pub yield_rate: f64,
    pub mean_steps_successes: Option<f64>,
}

/// The whole collection.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct CollectReport {
    pub policy: String,
    pub reflection: bool,
    pub rounds: usize,
    pub detour_factor: f64,
    pub tasks: Vec<String>,
    pub seeds_per_task: usize,
    pub seed_start: u64,
    /// (task, seed) pairs run.
    pub seeds_total: usize,
    /// Pairs with at least one success.
    pub seeds_solved: usize,
    /// seeds_solved / seeds_total.
    pub yield_rate: f64,
    pub attempts_total: usize,
    pub successes_total: usize,
    /// Mean steps of every successful attempt.
    pub mean_steps_successes: Option<f64>,
    /// Mean steps of the last success of each solved pair (the one kept for SFT).
    pub mean_steps_kept: Option<f64>,
    pub per_round: Vec<RoundStats>,
    pub elapsed_s: f64,
    pub attempts: Vec<AttemptRecord>,
}

fn mean(v: &[f64]) -> Option<f64> {
    (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
}

/// Aggregates attempts into the report.
pub fn summarize(
    policy: &str,
    cfg: &CollectConfig,
    attempts: Vec<AttemptRecord>,
    elapsed_s: f64,
) -> CollectReport {
    let mut per_round = Vec::new();
    let max_round = attempts.iter().map(|a| a.round).max().unwrap_or(0);
    for r in 1..=max_round {
        let these: Vec<&AttemptRecord> = attempts.iter().filter(|a| a.round == r).collect();
        let ok: Vec<f64> = these
            .iter()
            .filter(|a| a.success)
            .map(|a| a.steps as f64)
            .collect();
        per_round.push(RoundStats {
            round: r,
            attempts: these.len(),
            successes: ok.len(),
            yield_rate: ok.len() as f64 / these.len().max(1) as f64,
            mean_steps_successes: mean(&ok),
        });
    }
    // Last success per (task, seed).
    let mut kept: BTreeMap<(String, u64), Option<usize>> = BTreeMap::new();
    for a in &attempts {
        let slot = kept.entry((a.task.clone(), a.seed)).or_insert(None);
        if a.success {
            *slot = Some(a.steps);
        }
    }
    let seeds_total = kept.len();
    let kept_steps: Vec<f64> = kept.values().flatten().map(|&s| s as f64).collect();
    let ok: Vec<f64> = attempts
        .iter()
        .filter(|a| a.success)
        .map(|a| a.steps as f64)
        .collect();
    CollectReport {
        policy: policy.to_string(),
        reflection: cfg.reflection,
        rounds: cfg.rounds,
        detour_factor: cfg.detour_factor,
        tasks: cfg.tasks.clone(),
        seeds_per_task: cfg.seeds,
        seed_start: cfg.seed_start,
        seeds_total,
        seeds_solved: kept_steps.len(),
        yield_rate: kept_steps.len() as f64 / seeds_total.max(1) as f64,
        attempts_total: attempts.len(),
        successes_total: ok.len(),
        mean_steps_successes: mean(&ok),
        mean_steps_kept: mean(&kept_steps),
        per_round,
        elapsed_s,
        attempts,
    }
}

fn f2(v: Option<f64>) -> String {
    v.map_or("-".to_string(), |x| format!("{x:.2}"))
}

/// The per-round table of one report.
pub fn table(r: &CollectReport) -> String {
    let mut s = format!(
        "reflection {}  ({} tasks × {} seeds, up to {} rounds)\n{:<8} {:>8} {:>9} {:>7} {:>9}\n",
        if r.reflection { "on" } else { "off" },
        r.tasks.len(),
        r.seeds_per_task,
        r.rounds,
        "round",
        "attempts",
        "successes",
        "yield",
        "steps/ok"
    );
    for x in &r.per_round {
        s.push_str(&format!(
            "{:<8} {:>8} {:>9} {:>7.2} {:>9}\n",
            x.round,
            x.attempts,
            x.successes,
            x.yield_rate,
            f2(x.mean_steps_successes)
        ));
    }
    s.push_str(&format!(
        "{:<8} {:>8} {:>9} {:>7.2} {:>9}   ({} of {} seeds solved; steps of kept successes {})\n",
        "all",
        r.attempts_total,
        r.successes_total,
        r.yield_rate,
        f2(r.mean_steps_successes),
        r.seeds_solved,
        r.seeds_total,
        f2(r.mean_steps_kept)
    ));
    s
}

/// Reflection on vs off, side by side, per round and overall.
pub fn compare_table(on: &CollectReport, off: &CollectReport) -> String {
    let mut s = format!(
        "{:<8} | {:>8} {:>9} {:>7} {:>9} | {:>8} {:>9} {:>7} {:>9}\n",
        "round",
        "att(on)",
        "ok(on)",
        "yield",
        "steps/ok",
        "att(off)",
        "ok(off)",
        "yield",
        "steps/ok"
    );
    let n = on.per_round.len().max(off.per_round.len());
    let cell = |r: Option<&RoundStats>| match r {
        Some(x) => format!(
            "{:>8} {:>9} {:>7.2} {:>9}",
            x.attempts,
            x.successes,
            x.yield_rate,
            f2(x.mean_steps_successes)
        ),
        None => format!("{:>8} {:>9} {:>7} {:>9}", "-", "-", "-", "-"),
    };
    for i in 0..n {
        s.push_str(&format!(
            "{:<8} | {} | {}\n",
            i + 1,
            cell(on.per_round.get(i)),
            cell(off.per_round.get(i))
        ));
    }
    let all = |r: &CollectReport| {
        format!(
            "{:>8} {:>9} {:>7.2} {:>9}",
            r.attempts_total,
            r.successes_total,
            r.yield_rate,
            f2(r.mean_steps_kept)
        )
    };
    s.push_str(&format!("{:<8} | {} | {}\n", "seeds", all(on), all(off)));
    s.push_str(&format!(
        "(seeds row: yield = seeds solved / seeds ({} vs {} of {}); steps = mean steps of the kept success per seed)\n",
        on.seeds_solved, off.seeds_solved, on.seeds_total
    ));
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn a(task: &str, seed: u64, round: u32, success: bool, steps: usize) -> AttemptRecord {
        AttemptRecord {
            task: task.into(),
            seed,
            round,
            success,
            steps,
            reason: String::new(),
            detour: false,
            reflection: None,
            reflector: None,
            trajectory_id: String::new(),
            seconds: 0.0,
        }
    }

    #[test]
    fn a_seed_ends_with_a_plain_success_or_its_last_round() {
        assert!(a("x", 0, 1, true, 3).ends_seed(3));
        assert!(!a("x", 0, 1, false, 3).ends_seed(3));
        assert!(a("x", 0, 3, false, 3).ends_seed(3));
        let detour = AttemptRecord {
            detour: true,
            ..a("x", 0, 2, true, 9)
        };
        assert!(!detour.ends_seed(3));
        assert!(AttemptRecord { round: 3, ..detour }.ends_seed(3));
    }

    #[test]
    fn rounds_and_overall_add_up() {
        let cfg = CollectConfig {
            tasks: vec!["x".into(), "y".into()],
            seeds: 2,
            ..Default::default()
        };
        let r = summarize(
            "p",
            &cfg,
            vec![
                a("x", 0, 1, false, 5),
                a("x", 0, 2, true, 3),
                a("x", 1, 1, true, 2),
                a("y", 0, 1, false, 4),
                a("y", 0, 2, false, 4),
                a("y", 0, 3, false, 4),
                a("y", 1, 1, true, 6),
                a("y", 1, 2, true, 4),
            ],
            1.0,
        );
        assert_eq!(r.per_round.len(), 3);
        assert_eq!((r.per_round[0].attempts, r.per_round[0].successes), (4, 2));
        assert_eq!(r.per_round[0].mean_steps_successes, Some(4.0));
        assert_eq!((r.per_round[1].attempts, r.per_round[1].successes), (3, 2));
        assert_eq!(r.per_round[2].yield_rate, 0.0);
        assert_eq!((r.seeds_total, r.seeds_solved), (4, 3));
        assert_eq!(r.yield_rate, 0.75);
        // kept: 3, 2, 4
        assert_eq!(r.mean_steps_kept, Some(3.0));
        assert_eq!(r.attempts_total, 8);
        assert_eq!(r.successes_total, 4);
        let t = compare_table(&r, &r);
        assert!(t.contains("att(off)") && t.lines().count() == 6);
    }
}

//! Two evaluations of the same episodes side by side (`rmsweb eval compare`): episodes
//! are paired by task, seed and attempt, and each task type shows what the second
//! policy solved that the first did not (gained) and the reverse (lost), with McNemar's
//! exact test on those discordant pairs. On the same seeds this is the comparison
//! that separates a real change from noise, and it shows when an equal pass@1 hides
//! many solved episodes traded for others. Several evaluations of one policy kind (RL
//! seeds) pool: each is paired with the base's episodes and the counts add up.

use super::{EpisodeRecord, EvalReport};
use crate::util::sanitize::clean_line;
use anyhow::Result;
use serde::Serialize;
use std::collections::{BTreeMap, HashMap};
use std::path::Path;

/// Paired figures of one task type (or of all of them).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PairedRow {
    pub task: String,
    /// Episodes both evaluations ran (same task, seed and attempt).
    pub paired: usize,
    pub base_solved: usize,
    pub new_solved: usize,
    /// Solved by the base, not by the new policy.
    pub lost: usize,
    /// Solved by the new policy, not by the base.
    pub gained: usize,
    /// McNemar's exact two-sided p-value on `lost` vs `gained`.
    pub p_value: f64,
}

/// One compared evaluation's overall figures against the base.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunRow {
    pub policy: String,
    pub total: PairedRow,
}

/// The whole comparison.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Comparison {
    pub base: String,
    /// The compared policy (several joined by ", " when pooled).
    pub new: String,
    /// Per task type, pooled over the compared evaluations.
    pub tasks: Vec<PairedRow>,
    pub total: PairedRow,
    /// Each compared evaluation alone (one entry unless pooled).
    pub runs: Vec<RunRow>,
    /// Episodes of the base without a counterpart in a compared evaluation (summed
    /// over them).
    pub base_only: usize,
    /// Episodes of the compared evaluations without a counterpart in the base.
    pub new_only: usize,
}

/// Reads an evaluation's results JSON (`rmsweb eval --out`); errors name the file and
/// the field.
pub fn load_report(path: &Path) -> Result<EvalReport> {
    let text = crate::util::fs::read_record(path)?;
    let mut de = serde_json::Deserializer::from_str(&text);
    serde_path_to_error::deserialize(&mut de).map_err(|e| {
        let inner = e.inner();
        anyhow::anyhow!(
            "{}: line {}, field `{}`: {}",
            path.display(),
            inner.line(),
            clean_line(&e.path().to_string()),
            clean_line(&inner.to_string())
        )
    })
}

/// McNemar's exact two-sided test: the probability, with `b + c` discordant pairs
/// split by a fair coin, of a split at least as uneven as `b` vs `c` (1 when there
/// are none).
pub fn mcnemar_exact(b: usize, c: usize) -> f64 {
    let n = b + c;
    let k = b.min(c);
    // P(X <= k) for X ~ Binomial(n, 1/2), in logs to stay finite for large n.
    let ln_half_n = n as f64 * 0.5f64.ln();
    let mut ln_choose = 0.0f64; // ln C(n, 0)
    let mut tail = 0.0f64;
    for i in 0..=k {
        if i > 0 {
            ln_choose += ((n - i + 1) as f64).ln() - (i as f64).ln();
        }
        tail += (ln_choose + ln_half_n).exp();
    }
    (2.0 * tail).min(1.0)
}

fn row(task: &str, pairs: &[(&EpisodeRecord, &EpisodeRecord)]) -> PairedRow {
    let count = |f: &dyn Fn(bool, bool) -> bool| {
        pairs
            .iter()
            .filter(|(b, n)| f(b.success, n.success))
            .count()
    };
    let lost = count(&|b, n| b && !n);
    let gained = count(&|b, n| !b && n);
    PairedRow {
        task: task.to_string(),
        paired: pairs.len(),
        base_solved: count(&|b, _| b),
        new_solved: count(&|_, n| n),
        lost,
        gained,
        p_value: mcnemar_exact(lost, gained),
    }
}

/// Pairs the episodes of `base` and `new` by task, seed and attempt and compares them
/// per task type and overall. An episode repeated within one evaluation counts once (its first
/// record).
pub fn compare(base: &EvalReport, new: &EvalReport) -> Comparison {
    compare_pooled(base, std::slice::from_ref(new))
}

/// Compares each of `news` with `base` as [`compare`] does and pools the pairs: the
/// rows sum every evaluation's lost and gained episodes, each against the same base
/// episodes (as the recipe report pools RL seeds).
pub fn compare_pooled(base: &EvalReport, news: &[EvalReport]) -> Comparison {
    let index = |r: &EvalReport| {
        let mut m: HashMap<(String, u64, u32), usize> = HashMap::new();
        for (i, e) in r.episodes.iter().enumerate() {
            m.entry((e.task.clone(), e.seed, e.attempt)).or_insert(i);
        }
        m
    };
    let bi = index(base);
    let mut by_task: BTreeMap<&str, Vec<(&EpisodeRecord, &EpisodeRecord)>> = BTreeMap::new();
    let (mut runs, mut base_only, mut new_only) = (Vec::new(), 0, 0);
    for new in news {
        let ni = index(new);
        let mut pairs = Vec::new();
        for (key, &i) in &bi {
            if let Some(&j) = ni.get(key) {
                pairs.push((&base.episodes[i], &new.episodes[j]));
            }
        }
        base_only += bi.len() - pairs.len();
        new_only += ni.len() - pairs.len();
        runs.push(RunRow {
            policy: new.policy.clone(),
            total: row("all", &pairs),
        });
        for (b, n) in pairs {
            by_task.entry(b.task.as_str()).or_default().push((b, n));
        }
    }
    let all: Vec<_> = by_task.values().flatten().copied().collect();
    Comparison {
        base: base.policy.clone(),
        new: news
            .iter()
            .map(|n| n.policy.as_str())
            .collect::<Vec<_>>()
            .join(", "),
        tasks: by_task.iter().map(|(t, p)| row(t, p)).collect(),
        total: row("all", &all),
        runs,
        base_only,
        new_only,
    }
}

fn rate(solved: usize, n: usize) -> String {
    if n == 0 {
        "-".into()
    } else {
        format!("{:.3}", solved as f64 / n as f64)
    }
}

fn table_row(label: &str, r: &PairedRow) -> String {
    format!(
        "{:<28} {:>6} {:>7} {:>7} {:>5} {:>6} {:>8.4}\n",
        label,
        r.paired,
        rate(r.base_solved, r.paired),
        rate(r.new_solved, r.paired),
        r.lost,
        r.gained,
        r.p_value
    )
}

/// The comparison as a table: one row per task type, then all of them; pooled, first
/// each compared evaluation's overall row.
pub fn render(c: &Comparison) -> String {
    let header = |first: &str, new: &str| {
        format!(
            "{first:<28} {:>6} {:>7} {new:>7} {:>5} {:>6} {:>8}\n",
            "paired", "base", "lost", "gained", "p"
        )
    };
    let mut out = format!("base {}\n", clean_line(&c.base));
    if c.runs.len() > 1 {
        out.push_str(&format!(
            "new  {} evaluations, each paired with the base's episodes, then pooled\n\n",
            c.runs.len()
        ));
        out.push_str(&header("evaluation", "new"));
        for r in &c.runs {
            out.push_str(&table_row(&clean_line(&r.policy), &r.total));
        }
        out.push('\n');
        out.push_str(&header("task", "pooled"));
    } else {
        out.push_str(&format!("new  {}\n\n", clean_line(&c.new)));
        out.push_str(&header("task", "new"));
    }
    for r in c.tasks.iter().chain(std::iter::once(&c.total)) {
        let task = clean_line(&r.task);
        out.push_str(&table_row(
            task.strip_prefix("miniwob:").unwrap_or(&task),
            r,
        ));
    }
    if c.base_only + c.new_only > 0 {
        out.push_str(&format!(
            "\nunpaired: {} episodes only in the base, {} only in the new evaluation (not counted)\n",
            c.base_only, c.new_only
        ));
    }
    out.push_str(
        "\np: McNemar's exact two-sided test on lost vs gained (same task, seed and attempt)\n",
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mcnemar_matches_the_binomial_tail() {
        // 10 vs 2: 2 · (C(12,0) + C(12,1) + C(12,2)) / 2^12 = 2 · 79 / 4096.
        assert!((mcnemar_exact(10, 2) - 158.0 / 4096.0).abs() < 1e-12);
        assert!((mcnemar_exact(2, 10) - 158.0 / 4096.0).abs() < 1e-12);
        // An even split and no discordant pair are no evidence at all.
        assert_eq!(mcnemar_exact(5, 5), 1.0);
        assert_eq!(mcnemar_exact(0, 0), 1.0);
        // 0 vs 6: 2 / 64.
        assert!((mcnemar_exact(0, 6) - 2.0 / 64.0).abs() < 1e-12);
        // Large counts stay finite.
        assert!(mcnemar_exact(600, 400) < 1e-9);
    }
}

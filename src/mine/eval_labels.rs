//! `rmsweb mine eval-labels`: how well a labeller (the heuristic, or an LLM judge)
//! agrees with hand labels. A labels file is JSON Lines, one trajectory pair a line:
//! `{"dataset": DIR, "success": TRAJ_ID, "loc": TRAJ_ID, "category": C, "note": TEXT}`,
//! with `dataset` relative to the labels file. The pair kind follows from the loc's
//! outcome (a failure: `fail_contrast`; a longer success: `detour`), as in
//! `mine explain`. The result gives precision and recall per category, the
//! confusion matrix and every disagreement with the hand label's note.

use super::config::MineConfig;
use super::label::{Judge, LabelInput, label_pair};
use super::miner::{task_info, task_table};
use super::pair::{LabelSource, PairKind};
use super::select::views_of;
use crate::trajectory::Dataset;
use crate::trajectory::jsonl::JsonlFile;
use crate::util::sanitize::clean_line;
use anyhow::{Context, Result, anyhow, bail};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

/// One hand-labelled trajectory pair.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LabelCase {
    /// The dataset folder, relative to the labels file.
    pub dataset: String,
    pub success: String,
    pub loc: String,
    pub category: String,
    #[serde(default)]
    pub note: String,
}

/// A case with where it was read.
#[derive(Debug, Clone, PartialEq)]
pub struct SourcedCase {
    pub file: PathBuf,
    pub line: usize,
    pub case: LabelCase,
}

/// The labeller's answer on one case.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CaseResult {
    /// `FILE:LINE` of the case.
    pub at: String,
    pub success: String,
    pub loc: String,
    pub truth: String,
    pub predicted: String,
    pub confidence: f64,
    pub source: LabelSource,
    /// The hand label's note.
    pub note: String,
    /// Why the labeller said so (its first note).
    pub reason: String,
}

/// Scores of one category.
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
pub struct CategoryScore {
    /// Cases whose hand label is this category.
    pub support: u64,
    /// Cases the labeller put in this category.
    pub predicted: u64,
    /// Cases in both.
    pub correct: u64,
    /// correct / predicted (None when nothing was predicted).
    pub precision: Option<f64>,
    /// correct / support (None when no case has this label).
    pub recall: Option<f64>,
}

/// The evaluation.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LabelEval {
    /// `heuristic`, or `judge` when an LLM judge was asked.
    pub labeller: String,
    pub cases: u64,
    pub correct: u64,
    pub accuracy: f64,
    /// Every category of the taxonomy, in its order.
    pub by_category: BTreeMap<String, CategoryScore>,
    /// truth → predicted → count.
    pub confusion: BTreeMap<String, BTreeMap<String, u64>>,
    /// Cases where a judge was asked but the heuristic answered (judge failure).
    pub judge_fallbacks: u64,
    /// Every case the labeller got wrong.
    pub misses: Vec<CaseResult>,
    /// Every case.
    pub results: Vec<CaseResult>,
}

fn label_files(path: &Path) -> Result<Vec<PathBuf>> {
    if path.is_dir() {
        let mut v: Vec<PathBuf> = std::fs::read_dir(path)
            .with_context(|| format!("reading {}", path.display()))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.is_file() && p.extension().is_some_and(|x| x == "jsonl"))
            .collect();
        v.sort();
        if v.is_empty() {
            bail!("{}: no *.jsonl labels files in this folder", path.display());
        }
        Ok(v)
    } else if path.is_file() {
        Ok(vec![path.to_path_buf()])
    } else {
        bail!("{}: no such labels file or folder", path.display())
    }
}

/// Reads the cases of every labels file (a folder: its `*.jsonl` files). A bad line
/// or an unknown category is an error naming the file, line and field.
pub fn load_cases(paths: &[PathBuf], cfg: &MineConfig) -> Result<Vec<SourcedCase>> {
    let mut out = Vec::new();
    for p in paths {
        for file in label_files(p)? {
            let f = JsonlFile::open(&file)?;
            for i in 0..f.len() {
                let case: LabelCase = f.get(i).map_err(|e| anyhow!("{e}"))?;
                let line = f.span(i).map_or(i + 1, |s| s.line as usize);
                if !cfg.knows(&case.category) {
                    bail!(
                        "{}:{line}: category: `{}` is not in the taxonomy ({})",
                        file.display(),
                        clean_line(&case.category),
                        cfg.taxonomy.join(", ")
                    );
                }
                out.push(SourcedCase {
                    file: file.clone(),
                    line,
                    case,
                });
            }
        }
    }
    if out.is_empty() {
        bail!("no labelled cases in the given files");
    }
    Ok(out)
}

fn ratio(a: u64, b: u64) -> Option<f64> {
    (b > 0).then(|| a as f64 / b as f64)
}

/// The datasets the cases name, each opened once, with their task tables.
#[derive(Default)]
struct CaseDatasets(HashMap<PathBuf, (Dataset, HashMap<String, crate::trajectory::Task>)>);

impl CaseDatasets {
    /// Case `c`'s task table and its two trajectories, checked: the success is a
    /// verified success and the loc belongs to the same task. `at` names the case.
    fn pair(
        &mut self,
        c: &SourcedCase,
        at: &str,
    ) -> Result<(
        &HashMap<String, crate::trajectory::Task>,
        crate::trajectory::Trajectory,
        crate::trajectory::Trajectory,
    )> {
        let dir = c
            .file
            .parent()
            .unwrap_or(Path::new("."))
            .join(&c.case.dataset);
        if !self.0.contains_key(&dir) {
            let ds = Dataset::open(&dir).with_context(|| format!("{at}: dataset"))?;
            let tasks = task_table(&ds).with_context(|| format!("{at}: dataset"))?;
            self.0.insert(dir.clone(), (ds, tasks));
        }
        let (ds, tasks) = &self.0[&dir];
        let load = |id: &str, field: &str| -> Result<crate::trajectory::Trajectory> {
            ds.trajectory_by_id(id)
                .map_err(|e| anyhow!("{e}"))?
                .ok_or_else(|| {
                    anyhow!(
                        "{at}: {field}: no trajectory `{}` in {}",
                        clean_line(id),
                        dir.display()
                    )
                })
        };
        let s = load(&c.case.success, "success")?;
        let l = load(&c.case.loc, "loc")?;
        if !s.outcome.success {
            bail!(
                "{at}: success: `{}` is not a verified success",
                clean_line(&s.id)
            );
        }
        if s.task_id != l.task_id {
            bail!("{at}: loc: `{}` belongs to another task", clean_line(&l.id));
        }
        Ok((tasks, s, l))
    }
}

/// Labels every case with `judge` (falling back to the heuristic as mining does)
/// and scores the answers against the hand labels. `judge_asked` says whether
/// `judge` is an LLM judge (so heuristic answers count as fallbacks).
pub fn evaluate(
    cases: &[SourcedCase],
    cfg: &MineConfig,
    judge: &dyn Judge,
    judge_asked: bool,
) -> Result<LabelEval> {
    let mut datasets = CaseDatasets::default();
    let mut results = Vec::with_capacity(cases.len());
    for c in cases {
        let at = format!("{}:{}", c.file.display(), c.line);
        let (tasks, s, l) = datasets.pair(c, &at)?;
        let kind = if l.outcome.success {
            PairKind::Detour
        } else {
            PairKind::FailContrast
        };
        let info = task_info(tasks, &s.task_id);
        let (sv, lv) = (views_of(&s), views_of(&l));
        let input = LabelInput {
            instruction: &info.instruction,
            kind,
            success: &s,
            loc: &l,
            success_views: &sv,
            loc_views: &lv,
        };
        let label = label_pair(judge, &input, cfg);
        let reason = label
            .notes
            .iter()
            .find(|n| !n.starts_with("judge"))
            .or(label.notes.first())
            .cloned()
            .unwrap_or_default();
        results.push(CaseResult {
            at,
            success: s.id.clone(),
            loc: l.id.clone(),
            truth: c.case.category.clone(),
            predicted: label.category,
            confidence: label.confidence,
            source: label.source,
            note: c.case.note.clone(),
            reason,
        });
    }
    Ok(score(results, cfg, judge_asked))
}

fn score(results: Vec<CaseResult>, cfg: &MineConfig, judge_asked: bool) -> LabelEval {
    let mut by: BTreeMap<String, CategoryScore> = cfg
        .taxonomy
        .iter()
        .map(|c| (c.clone(), CategoryScore::default()))
        .collect();
    let mut confusion: BTreeMap<String, BTreeMap<String, u64>> = BTreeMap::new();
    let mut correct = 0;
    for r in &results {
        by.entry(r.truth.clone()).or_default().support += 1;
        by.entry(r.predicted.clone()).or_default().predicted += 1;
        if r.truth == r.predicted {
            by.entry(r.truth.clone()).or_default().correct += 1;
            correct += 1;
        }
        *confusion
            .entry(r.truth.clone())
            .or_default()
            .entry(r.predicted.clone())
            .or_default() += 1;
    }
    for s in by.values_mut() {
        s.precision = ratio(s.correct, s.predicted);
        s.recall = ratio(s.correct, s.support);
    }
    let judge_fallbacks = if judge_asked {
        results
            .iter()
            .filter(|r| r.source == LabelSource::Heuristic)
            .count() as u64
    } else {
        0
    };
    let n = results.len() as u64;
    LabelEval {
        labeller: if judge_asked { "judge" } else { "heuristic" }.into(),
        cases: n,
        correct,
        accuracy: ratio(correct, n).unwrap_or(0.0),
        by_category: by,
        confusion,
        judge_fallbacks,
        misses: results
            .iter()
            .filter(|r| r.truth != r.predicted)
            .cloned()
            .collect(),
        results,
    }
}

fn pct(x: Option<f64>) -> String {
    x.map_or_else(|| "    -".into(), |v| format!("{:>5.1}", 100.0 * v))
}

/// The evaluation as terminal text: a table per category in taxonomy order, the
/// overall accuracy, then every miss with its note (untrusted text sanitized).
pub fn render(e: &LabelEval, cfg: &MineConfig) -> String {
    let mut o = format!(
        "labeller {}  cases {}  correct {}  accuracy {:.1}%\n",
        e.labeller,
        e.cases,
        e.correct,
        100.0 * e.accuracy
    );
    if e.labeller == "judge" {
        o.push_str(&format!(
            "judge fallbacks to the heuristic: {}\n",
            e.judge_fallbacks
        ));
    }
    o.push_str("\ncategory                 support  predicted  correct  precision%  recall%\n");
    let mut order: Vec<&String> = cfg.taxonomy.iter().collect();
    order.extend(e.by_category.keys().filter(|k| !cfg.taxonomy.contains(k)));
    for c in order {
        let Some(s) = e.by_category.get(c) else {
            continue;
        };
        o.push_str(&format!(
            "{:<24} {:>7}  {:>9}  {:>7}  {:>10}  {:>7}\n",
            clean_line(c),
            s.support,
            s.predicted,
            s.correct,
            pct(s.precision),
            pct(s.recall)
        ));
    }
    if !e.misses.is_empty() {
        o.push_str(&format!(
            "\n{} misses (truth -> predicted):\n",
            e.misses.len()
        ));
        for m in &e.misses {
            o.push_str(&format!(
                "  {}  {} ~ {}\n    {} -> {}  ({})\n    hand note: {}\n",
                clean_line(&m.at),
                clean_line(&m.success),
                clean_line(&m.loc),
                clean_line(&m.truth),
                clean_line(&m.predicted),
                clean_line(&m.reason),
                clean_line(&m.note)
            ));
        }
    }
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(truth: &str, predicted: &str) -> CaseResult {
        CaseResult {
            at: "x:1".into(),
            success: "s".into(),
            loc: "l".into(),
            truth: truth.into(),
            predicted: predicted.into(),
            confidence: 0.5,
            source: LabelSource::Heuristic,
            note: String::new(),
            reason: String::new(),
        }
    }

    #[test]
    fn precision_and_recall_per_category() {
        let cfg = MineConfig::default();
        let e = score(
            vec![
                r("wrong_element", "wrong_element"),
                r("wrong_element", "missed_constraint"),
                r("premature_done", "missed_constraint"),
                r("premature_done", "premature_done"),
            ],
            &cfg,
            false,
        );
        let we = &e.by_category["wrong_element"];
        assert_eq!((we.support, we.predicted, we.correct), (2, 1, 1));
        assert_eq!((we.precision, we.recall), (Some(1.0), Some(0.5)));
        let mc = &e.by_category["missed_constraint"];
        assert_eq!((mc.precision, mc.recall), (Some(0.0), None));
        assert_eq!(e.by_category["loop_stall"].precision, None);
        assert_eq!(e.accuracy, 0.5);
        assert_eq!(e.misses.len(), 2);
        assert_eq!(e.confusion["premature_done"]["missed_constraint"], 1);
    }
}

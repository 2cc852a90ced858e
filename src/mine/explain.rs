//! `rmsweb mine explain`: replays one trajectory pair with every candidate's trace —
//! score parts and why it won or was rejected — the audit trail behind a mined pair.

use super::align::Side;
use super::config::MineConfig;
use super::gates::VisualGate;
use super::label::Judge;
use super::miner::{task_info, task_table};
use super::pair::{LabelSource, MinedPair, PairKind};
use super::qc::QcDrop;
use super::report::kind_name;
use super::select::{
    CandidateTrace, PairContext, Verdict, evaluate_pair, route_choice_sides, views_of,
};
use crate::action::Action;
use crate::reward::RewardConfig;
use crate::trajectory::{Dataset, Trajectory};
use crate::util::sanitize::clean_line;
use anyhow::{Context, Result, anyhow, bail};
use serde::Serialize;

/// The label as explain shows it.
#[derive(Debug, Clone, Serialize)]
pub struct LabelView {
    pub category: String,
    pub confidence: f64,
    pub source: LabelSource,
    pub notes: Vec<String>,
}

/// The full audit trail of one trajectory pair.
#[derive(Debug, Clone, Serialize)]
pub struct Explanation {
    pub task_id: String,
    pub domain: String,
    pub kind: PairKind,
    pub success: String,
    pub loc: String,
    pub label: LabelView,
    /// Every candidate, late to early.
    pub candidates: Vec<CandidateTrace>,
    /// The pair this trajectory pair yields, if any.
    pub mined: Option<MinedPair>,
    /// Why none was mined.
    pub rejection: Option<String>,
    /// Whether the mined pair is in `mined/pairs.jsonl` (None: no such file), i.e.
    /// whether it survived quality control in the last run.
    pub in_output: Option<bool>,
    /// Why quality control dropped the mined pair in the last run (from
    /// `mined/dropped.jsonl`): which rule, or which cap and what share.
    pub dropped: Option<QcDrop>,
}

fn load_dropped(ds: &Dataset, id: &str) -> Option<QcDrop> {
    let path = ds.root().join("mined/dropped.jsonl");
    let f = crate::trajectory::jsonl::JsonlFile::open(&path).ok()?;
    (0..f.len())
        .filter_map(|i| f.get::<QcDrop>(i).ok())
        .find(|d| d.id == id)
}

/// The task's other verified successes (route choices need them).
fn task_successes(ds: &Dataset, task_id: &str, except: [&str; 2]) -> Vec<Trajectory> {
    ds.summaries()
        .into_iter()
        .flatten()
        .filter(|s| s.task_id == task_id && s.outcome.success && !except.contains(&s.id.as_str()))
        .filter_map(|s| ds.trajectory(s.record).ok())
        .collect()
}

fn load_output_ids(ds: &Dataset) -> Option<Vec<MinedPair>> {
    let path = ds.root().join("mined/pairs.jsonl");
    if !path.is_file() {
        return None;
    }
    let f = crate::trajectory::jsonl::JsonlFile::open(&path).ok()?;
    Some(
        (0..f.len())
            .filter_map(|i| f.get::<MinedPair>(i).ok())
            .collect(),
    )
}

/// The two trajectories of a pair to explain: both in the dataset, the success side a
/// verified success, both of one task.
fn load_pair(ds: &Dataset, success_id: &str, loc_id: &str) -> Result<(Trajectory, Trajectory)> {
    let load = |id: &str| -> Result<_> {
        ds.trajectory_by_id(id)
            .map_err(|e| anyhow!("{e}"))?
            .ok_or_else(|| {
                anyhow!(
                    "no trajectory `{}` in {}",
                    clean_line(id),
                    ds.root().display()
                )
            })
    };
    let s = load(success_id)?;
    let l = load(loc_id)?;
    if !s.outcome.success {
        bail!(
            "trajectory `{}` did not succeed; the success side must be a verified success",
            clean_line(success_id)
        );
    }
    if s.task_id != l.task_id {
        bail!(
            "`{}` and `{}` belong to different tasks ({} vs {})",
            clean_line(success_id),
            clean_line(loc_id),
            clean_line(&s.task_id),
            clean_line(&l.task_id)
        );
    }
    Ok((s, l))
}

/// Explains the pair of a success trajectory and a loc trajectory (failed: a
/// `fail_contrast`; successful: a `detour`).
pub fn explain_trajectories(
    ds: &Dataset,
    success_id: &str,
    loc_id: &str,
    cfg: &MineConfig,
    judge: &dyn Judge,
) -> Result<Explanation> {
    let (s, l) = load_pair(ds, success_id, loc_id)?;
    let kind = if l.outcome.success {
        PairKind::Detour
    } else {
        PairKind::FailContrast
    };
    let tasks = task_table(ds)?;
    let info = task_info(&tasks, &s.task_id);
    let (sv, lv) = (views_of(&s), views_of(&l));
    let reward = RewardConfig::default();
    let ctx = PairContext {
        task: &info,
        cfg,
        reward: &reward,
        judge,
    };
    let mut visual = VisualGate::new(ds.root());
    let successes = task_successes(ds, &s.task_id, [&s.id, &l.id]);
    let success_views: Vec<_> = successes.iter().map(views_of).collect();
    let all: Vec<Side> = successes
        .iter()
        .zip(&success_views)
        .map(|(t, v)| Side { traj: t, views: v })
        .collect();
    let others = route_choice_sides(kind, &s, &l, &all, cfg);
    let r = evaluate_pair(
        &ctx,
        kind,
        Side {
            traj: &s,
            views: &sv,
        },
        Side {
            traj: &l,
            views: &lv,
        },
        &others,
        &mut visual,
        true,
    );
    let in_output = match (&r.mined, load_output_ids(ds)) {
        (Some(m), Some(out)) => Some(out.iter().any(|p| p.id == m.id)),
        (None, Some(_)) => Some(false),
        _ => None,
    };
    let dropped = match (&r.mined, in_output) {
        (Some(m), Some(false)) => load_dropped(ds, &m.id),
        _ => None,
    };
    Ok(Explanation {
        task_id: info.task_id,
        domain: info.domain,
        kind,
        success: s.id.clone(),
        loc: l.id.clone(),
        label: LabelView {
            category: r.label.category,
            confidence: r.label.confidence,
            source: r.label.source,
            notes: r.label.notes,
        },
        candidates: r.trace,
        mined: r.mined,
        rejection: r.rejection,
        in_output,
        dropped,
    })
}

/// Splits a pair id `SUCCESS@i~LOC@j` into its trajectory ids.
pub fn parse_pair_id(id: &str) -> Option<(String, String)> {
    let (left, right) = id.rsplit_once('~')?;
    let (s, i) = left.rsplit_once('@')?;
    let (l, j) = right.rsplit_once('@')?;
    i.parse::<u32>().ok()?;
    j.parse::<u32>().ok()?;
    Some((s.to_string(), l.to_string()))
}

/// Explains a mined pair by id (looked up in `mined/pairs.jsonl`, else read from the
/// id itself).
pub fn explain_pair_id(
    ds: &Dataset,
    pair_id: &str,
    cfg: &MineConfig,
    judge: &dyn Judge,
) -> Result<Explanation> {
    let from_file = load_output_ids(ds)
        .and_then(|v| v.into_iter().find(|p| p.id == pair_id))
        .map(|p| (p.success.trajectory, p.loc.trajectory));
    let (s, l) = from_file
        .or_else(|| parse_pair_id(pair_id))
        .with_context(|| {
            format!(
                "`{}` is neither in mined/pairs.jsonl nor a pair id of the form SUCCESS@i~LOC@j",
                clean_line(pair_id)
            )
        })?;
    explain_trajectories(ds, &s, &l, cfg, judge)
}

fn act(a: &Option<Action>) -> String {
    a.as_ref()
        .map(|a| clean_line(&a.short()).into_owned())
        .unwrap_or_else(|| "-".into())
}

fn num(x: Option<f64>) -> String {
    x.map(|v| format!("{v:.3}"))
        .unwrap_or_else(|| "  -  ".into())
}

/// A verdict in words.
pub fn verdict_text(v: &Verdict) -> String {
    match v {
        Verdict::AlignmentBelowThreshold => "rejected: alignment below threshold".into(),
        Verdict::MissingAction => "rejected: a side has no action".into(),
        Verdict::ZeroContrast => "rejected: zero contrast (same action)".into(),
        Verdict::SearchWordingOnly => "rejected: search wording only".into(),
        Verdict::TrivialAction => "rejected: trivial action (wait/scroll/go_back)".into(),
        Verdict::RouteChoice {
            trajectory,
            step,
            alignment,
        } => format!(
            "rejected: route choice (success {} takes the same action at step {step}, alignment {alignment:.2})",
            clean_line(trajectory)
        ),
        Verdict::GateFailed { gates, reasons } => format!(
            "rejected: gate failed: {} ({})",
            gates.join(", "),
            clean_line(&reasons.join("; "))
        ),
        Verdict::Won => "WON".into(),
        Verdict::LostToBetter { winner_total } => {
            format!("lost to a better candidate (total {winner_total:.3})")
        }
        Verdict::LostToLater => "lost to a later candidate with the same score".into(),
    }
}

/// The explanation as terminal text (every untrusted string sanitized).
pub fn render(e: &Explanation) -> String {
    let mut o = String::new();
    o.push_str(&format!(
        "task {}  domain {}  kind {}\nsuccess {}  vs  loc {}\n",
        clean_line(&e.task_id),
        clean_line(&e.domain),
        kind_name(e.kind),
        clean_line(&e.success),
        clean_line(&e.loc)
    ));
    o.push_str(&format!(
        "label {} (confidence {:.2}, {:?})\n",
        clean_line(&e.label.category),
        e.label.confidence,
        e.label.source
    ));
    for n in &e.label.notes {
        o.push_str(&format!("  note: {}\n", clean_line(n)));
    }
    match (&e.mined, &e.rejection) {
        (Some(m), _) => {
            o.push_str(&format!(
                "result: pair {}  success step {}  loc step {}  total {:.3}\n",
                clean_line(&m.id),
                m.success.step,
                m.loc.step,
                m.scores.total
            ));
            match e.in_output {
                Some(true) => o.push_str("  in mined/pairs.jsonl\n"),
                Some(false) => match &e.dropped {
                    Some(d) => o.push_str(&format!(
                        "  NOT in mined/pairs.jsonl: dropped by quality control: {}\n    {}\n",
                        clean_line(&d.reason),
                        clean_line(&d.detail)
                    )),
                    None => o.push_str(
                        "  NOT in mined/pairs.jsonl: dropped by quality control (see mined/report.json)\n",
                    ),
                },
                None => o.push_str("  (no mined/pairs.jsonl yet)\n"),
            }
            for ev in &m.evidence {
                o.push_str(&format!("  evidence: {}\n", clean_line(ev)));
            }
        }
        (None, Some(r)) => o.push_str(&format!("result: nothing mined ({})\n", clean_line(r))),
        (None, None) => o.push_str("result: nothing mined\n"),
    }
    o.push_str(&format!(
        "\n{} candidates (success step i, loc step j), late to early:\n",
        e.candidates.len()
    ));
    o.push_str(
        "   i   j    url   dom    mem   prog  align contr  evid  total  target | loc  -> verdict\n",
    );
    for c in &e.candidates {
        let a = &c.alignment;
        o.push_str(&format!(
            "{:>4}{:>4}  {:.2}  {:.2}  {:.2}  {:.2}  {:.3} {} {} {}  {} | {}  -> {}\n",
            c.success_step,
            c.loc_step,
            a.url,
            a.dom,
            a.memory,
            a.progress,
            a.total,
            num(c.contrast),
            num(c.evidence),
            num(c.total),
            act(&c.target_action),
            act(&c.loc_action),
            verdict_text(&c.verdict)
        ));
    }
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pair_ids_round_trip() {
        let id = super::super::select::pair_id("t1-a0", 3, "t1@x-a2", 4);
        assert_eq!(parse_pair_id(&id), Some(("t1-a0".into(), "t1@x-a2".into())));
        assert_eq!(parse_pair_id("nonsense"), None);
    }
}

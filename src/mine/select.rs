//! Choosing the critical step of one trajectory pair (ALGORITHMS.md §4.3–4.6): every
//! candidate step pair is aligned, contrasted, checked and scored, and the best one
//! that passes the gates wins (ties: the later success step, then the later loc step —
//! the *last* divergence). Each candidate gets a [`Verdict`], so `mine explain` can
//! show the whole audit trail.
//!
//! Candidates are the success steps except a final `done` (the success's terminal
//! step) against every loc step, the loc's terminal step included: a premature `done`
//! is the loc's last step.

use super::align::{Alignment, Side, StateView, align};
use super::config::MineConfig;
use super::contrast::{Uninformative, contrast, uninformative};
use super::evidence::evidence;
use super::gates::{VisualGate, progress_ok, validity};
use super::heuristic::mentions_obstruction;
use super::label::{Judge, Label, LabelInput, label_pair};
use super::pair::{FailureKind, FailureMode, Gates, MinedPair, PairKind, PairScores, StepRef};
use super::route::{RouteHit, route_choice};
use crate::action::Action;
use crate::reward::RewardConfig;
use crate::trajectory::Trajectory;
use serde::Serialize;
use std::collections::BTreeMap;

/// What the miner knows of a task.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct TaskInfo {
    pub task_id: String,
    pub domain: String,
    pub instruction: String,
}

/// The successes of a task that count as "another verified success" for the route
/// choices of a pair (see [`super::route`]): every success in `all` except the
/// pair's two sides; for a detour pair, only those that are not detours themselves
/// (shorter than the shortest success plus `detour_min_extra_steps`).
pub fn route_choice_sides<'a>(
    kind: PairKind,
    success: &Trajectory,
    loc: &Trajectory,
    all: &[Side<'a>],
    cfg: &MineConfig,
) -> Vec<Side<'a>> {
    let shortest = all
        .iter()
        .map(|s| s.traj.steps.len())
        .chain([success.steps.len()])
        .min()
        .unwrap_or(0);
    all.iter()
        .filter(|o| o.traj.outcome.success && o.traj.id != success.id && o.traj.id != loc.id)
        .filter(|o| {
            kind == PairKind::FailContrast
                || o.traj.steps.len() < shortest + cfg.detour_min_extra_steps
        })
        .copied()
        .collect()
}

/// State views of every step, with progress = position / (len − 1).
pub fn views_of(t: &Trajectory) -> Vec<StateView> {
    let n = t.steps.len();
    t.steps
        .iter()
        .enumerate()
        .map(|(k, s)| {
            let p = if n > 1 {
                k as f64 / (n - 1) as f64
            } else {
                0.0
            };
            StateView::new(&s.state, p)
        })
        .collect()
}

/// The fate of a candidate.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum Verdict {
    /// The states are not comparable.
    AlignmentBelowThreshold,
    /// One side has no action at that step.
    MissingAction,
    /// The loc action earns full reward against the target.
    ZeroContrast,
    /// Both sides search; only the wording differs.
    SearchWordingOnly,
    /// A wait, scroll or go_back on either side.
    TrivialAction,
    /// Another verified success takes the loc action at an aligned state: a route
    /// choice, not a failure.
    RouteChoice {
        trajectory: String,
        step: usize,
        alignment: f64,
    },
    /// A gate failed.
    GateFailed {
        gates: Vec<String>,
        reasons: Vec<String>,
    },
    /// The chosen candidate.
    Won,
    /// Passed everything but another candidate scored higher.
    LostToBetter { winner_total: f64 },
    /// Tied with the winner, which is a later step pair.
    LostToLater,
}

impl Verdict {
    /// A short name for counting.
    pub fn key(&self) -> String {
        match self {
            Verdict::AlignmentBelowThreshold => "alignment_below_threshold".into(),
            Verdict::MissingAction => "missing_action".into(),
            Verdict::ZeroContrast => "zero_contrast".into(),
            Verdict::SearchWordingOnly => "search_wording_only".into(),
            Verdict::TrivialAction => "trivial_action".into(),
            Verdict::RouteChoice { .. } => "route_choice".into(),
            Verdict::GateFailed { gates, .. } => format!("gate_failed:{}", gates.join("+")),
            Verdict::Won => "won".into(),
            Verdict::LostToBetter { .. } => "lost_to_better".into(),
            Verdict::LostToLater => "lost_to_later".into(),
        }
    }

    /// How far the candidate got (for the pair-level rejection reason).
    fn stage(&self) -> u8 {
        match self {
            Verdict::AlignmentBelowThreshold => 0,
            Verdict::MissingAction => 1,
            Verdict::ZeroContrast => 2,
            Verdict::TrivialAction => 3,
            Verdict::SearchWordingOnly => 4,
            Verdict::RouteChoice { .. } => 5,
            Verdict::GateFailed { .. } => 6,
            _ => 7,
        }
    }
}

/// One considered candidate with its score parts.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CandidateTrace {
    pub success_step: usize,
    pub loc_step: usize,
    pub target_action: Option<Action>,
    pub loc_action: Option<Action>,
    pub alignment: Alignment,
    pub contrast: Option<f64>,
    /// The rubric rule and reason behind the contrast.
    pub reward_rule: Option<String>,
    pub reward_reason: Option<String>,
    pub evidence: Option<f64>,
    pub evidence_findings: Vec<String>,
    pub total: Option<f64>,
    pub verdict: Verdict,
}

/// The result of contrasting one trajectory pair.
#[derive(Debug, Clone)]
pub struct PairOutcome {
    pub kind: PairKind,
    pub label: Label,
    /// The mined pair, if a candidate passed.
    pub mined: Option<MinedPair>,
    /// Why nothing was mined, from the furthest stage any candidate reached:
    /// `no_candidates`, `no_aligned_states`, `missing_action`, `no_contrast`,
    /// `trivial_difference`, `search_wording_only`, `route_choice`,
    /// `gate_failed:<gates>`.
    pub rejection: Option<String>,
    /// What the gates said of that furthest candidate, when a gate failed it (e.g. a
    /// screenshot path that leads outside the dataset root).
    pub rejection_detail: Option<String>,
    /// Candidates per verdict.
    pub candidate_counts: BTreeMap<String, u64>,
    /// Every candidate (only when asked for: `mine explain`).
    pub trace: Vec<CandidateTrace>,
}

/// How a failed attempt failed (see [`FailureKind`]).
pub fn failure_kind(t: &Trajectory) -> FailureKind {
    let errored = t.steps.iter().any(|s| {
        s.result
            .iter()
            .any(|r| r.error.as_deref().is_some_and(|e| !e.trim().is_empty()))
    });
    let reason = t.outcome.reason.as_deref().unwrap_or("");
    if errored || mentions_obstruction(reason) || reason.to_lowercase().contains("exception") {
        return FailureKind::Runtime;
    }
    let claimed = t
        .steps
        .last()
        .and_then(|s| s.output.actions.iter().find(|a| a.name == "done"))
        .and_then(|a| a.bool_param("success"))
        .unwrap_or(false);
    if claimed && !t.outcome.success {
        FailureKind::Evaluation
    } else {
        FailureKind::Behaviour
    }
}

/// The id of the pair mined from these steps: `SUCCESS@i~LOC@j`.
pub fn pair_id(success: &str, i: usize, loc: &str, j: usize) -> String {
    format!("{success}@{i}~{loc}@{j}")
}

struct Scored {
    i: usize,
    j: usize,
    align: Alignment,
    contrast: f64,
    evidence: f64,
    findings: Vec<String>,
    reward_reason: String,
    total: f64,
}

/// Everything [`evaluate_pair`] needs besides the two sides.
pub struct PairContext<'a> {
    pub task: &'a TaskInfo,
    pub cfg: &'a MineConfig,
    pub reward: &'a RewardConfig,
    pub judge: &'a dyn Judge,
}

/// Contrasts a trajectory pair and picks its critical step. `others` are the task's
/// other verified successes that count for route choices ([`route_choice_sides`]).
/// `record` keeps every candidate's trace (for `mine explain`); mining leaves it off.
pub fn evaluate_pair(
    ctx: &PairContext,
    kind: PairKind,
    success: Side,
    loc: Side,
    others: &[Side],
    visual: &mut VisualGate,
    record: bool,
) -> PairOutcome {
    let input = LabelInput {
        instruction: &ctx.task.instruction,
        kind,
        success: success.traj,
        loc: loc.traj,
        success_views: success.views,
        loc_views: loc.views,
    };
    let label = label_pair(ctx.judge, &input, ctx.cfg);
    let scan = Scan {
        ctx,
        input: &input,
        label: &label,
        others,
    };
    let mut tally = Tally::default();
    // Route-choice answers per loc step (they depend on the loc step only).
    let mut routes: Vec<Option<Option<RouteHit>>> = vec![None; loc.traj.steps.len()];
    for (i, j) in candidates(success.traj, loc.traj) {
        let al = align(&success.views[i], &loc.views[j], &ctx.cfg.weights);
        let mut tr = record.then(|| CandidateTrace::opened(success.traj, loc.traj, i, j, al));
        let verdict = match judge_candidate(&scan, i, j, al, &mut routes[j], visual, tr.as_mut()) {
            Ok(scored) => {
                tally.passed(scored);
                Verdict::Won
            }
            Err(v) => {
                tally.stopped(&v);
                v
            }
        };
        if let Some(mut t) = tr {
            t.verdict = verdict;
            tally.trace.push(t);
        }
    }
    tally.settle(record);

    let Tally {
        counts,
        trace,
        best,
        furthest,
        ..
    } = tally;
    let mined = best.map(|b| mined_pair(ctx, kind, success.traj, loc.traj, &label, b));
    let (rejection, rejection_detail) = match &mined {
        Some(_) => (None, None),
        None => rejection_of(furthest),
    };
    PairOutcome {
        kind,
        label,
        mined,
        rejection,
        rejection_detail,
        candidate_counts: counts,
        trace,
    }
}

/// What every candidate of one pair is judged against.
struct Scan<'a> {
    ctx: &'a PairContext<'a>,
    input: &'a LabelInput<'a>,
    label: &'a Label,
    others: &'a [Side<'a>],
}

/// The candidate step pairs (success step i, loc step j), late to early: model steps
/// only, and never the success's closing `done`.
fn candidates<'t>(
    s: &'t Trajectory,
    l: &'t Trajectory,
) -> impl Iterator<Item = (usize, usize)> + 't {
    let last_is_done = s
        .steps
        .last()
        .and_then(|st| st.output.actions.first())
        .is_some_and(|a| a.name == "done");
    let n_cand = if last_is_done {
        s.steps.len().saturating_sub(1)
    } else {
        s.steps.len()
    };
    (0..n_cand)
        .rev()
        .filter(|&i| s.steps[i].is_model_step())
        .flat_map(move |i| {
            (0..l.steps.len())
                .rev()
                .filter(|&j| l.steps[j].is_model_step())
                .map(move |j| (i, j))
        })
}

impl CandidateTrace {
    /// A candidate's trace before any gate has looked at it.
    fn opened(s: &Trajectory, l: &Trajectory, i: usize, j: usize, alignment: Alignment) -> Self {
        CandidateTrace {
            success_step: i,
            loc_step: j,
            target_action: s.steps[i].output.actions.first().cloned(),
            loc_action: l.steps[j].output.actions.first().cloned(),
            alignment,
            contrast: None,
            reward_rule: None,
            reward_reason: None,
            evidence: None,
            evidence_findings: Vec::new(),
            total: None,
            verdict: Verdict::AlignmentBelowThreshold,
        }
    }
}

/// Takes one candidate through the gates in order (alignment, actions, contrast,
/// informativeness, route choice, validity / visual / progress); the first that stops
/// it is the error. One that passes them all comes back scored. `tr`, when kept,
/// receives each score part as it is computed.
// Kept whole: the gates in the order ALGORITHMS.md §4 applies them, each stopping
// the candidate with its verdict; split, the order would be spread over functions.
fn judge_candidate(
    scan: &Scan,
    i: usize,
    j: usize,
    al: Alignment,
    route: &mut Option<Option<RouteHit>>,
    visual: &mut VisualGate,
    mut tr: Option<&mut CandidateTrace>,
) -> Result<Scored, Verdict> {
    let (cfg, input) = (scan.ctx.cfg, scan.input);
    let (s, l) = (input.success, input.loc);
    let (sv, lv) = (&input.success_views[i], &input.loc_views[j]);
    if al.total + 1e-12 < cfg.min_alignment {
        return Err(Verdict::AlignmentBelowThreshold);
    }
    let (Some(target), Some(loc_action)) = (
        s.steps[i].output.actions.first(),
        l.steps[j].output.actions.first(),
    ) else {
        return Err(Verdict::MissingAction);
    };
    let c = contrast(
        target,
        loc_action,
        &s.steps[i].state.elements,
        lv,
        sv,
        scan.ctx.reward,
    );
    if let Some(t) = tr.as_deref_mut() {
        t.contrast = Some(c.value);
        t.reward_rule = Some(c.decision.rule.clone());
        t.reward_reason = Some(c.decision.reason.clone());
    }
    if c.value <= 1e-12 {
        return Err(Verdict::ZeroContrast);
    }
    match uninformative(target, loc_action) {
        Some(Uninformative::SearchWordingOnly) => return Err(Verdict::SearchWordingOnly),
        Some(Uninformative::TrivialAction) => return Err(Verdict::TrivialAction),
        None => {}
    }
    let hit = route
        .get_or_insert_with(|| route_choice(loc_action, lv, scan.others, cfg, scan.ctx.reward));
    if let Some(h) = hit {
        return Err(Verdict::RouteChoice {
            trajectory: h.trajectory.clone(),
            step: h.step,
            alignment: h.alignment,
        });
    }
    let mut gates = Vec::new();
    let mut reasons = Vec::new();
    if let Err(e) = validity(target, loc_action, &s.steps[i].state) {
        gates.push("validity".to_string());
        reasons.push(e);
    }
    if let Err(e) = visual.check(s.steps[i].state.screenshot.as_deref()) {
        gates.push("visual".to_string());
        reasons.push(e);
    }
    if !progress_ok(sv.progress, lv.progress, cfg.progress_gate) {
        gates.push("progress".to_string());
        reasons.push(format!(
            "progress gap {:.2} exceeds {:.2}",
            (sv.progress - lv.progress).abs(),
            cfg.progress_gate
        ));
    }
    if !gates.is_empty() {
        return Err(Verdict::GateFailed { gates, reasons });
    }
    let ev = evidence(
        &scan.label.category,
        scan.label.confidence,
        input,
        i,
        j,
        cfg.evidence_window,
    );
    let total = al.total * c.value * (0.5 + 0.5 * ev.value);
    if let Some(t) = tr {
        t.evidence = Some(ev.value);
        t.evidence_findings = ev.findings.clone();
        t.total = Some(total);
    }
    Ok(Scored {
        i,
        j,
        align: al,
        contrast: c.value,
        evidence: ev.value,
        findings: ev.findings,
        reward_reason: c.decision.reason,
        total,
    })
}

/// The verdicts of one pair's candidates as they come in.
#[derive(Default)]
struct Tally {
    counts: BTreeMap<String, u64>,
    trace: Vec<CandidateTrace>,
    best: Option<Scored>,
    /// The candidates that passed every gate: (trace slot, total, i, j).
    passed: Vec<(usize, f64, usize, usize)>,
    /// The stopped candidate that got furthest.
    furthest: Option<Verdict>,
}

impl Tally {
    fn passed(&mut self, scored: Scored) {
        self.passed
            .push((self.trace.len(), scored.total, scored.i, scored.j));
        // Enumeration runs late to early, so on a tie the earlier-found (later)
        // candidate stays.
        if self
            .best
            .as_ref()
            .is_none_or(|b| scored.total > b.total + 1e-12)
        {
            self.best = Some(scored);
        }
    }

    fn stopped(&mut self, verdict: &Verdict) {
        *self.counts.entry(verdict.key()).or_default() += 1;
        if self
            .furthest
            .as_ref()
            .is_none_or(|f| verdict.stage() > f.stage())
        {
            self.furthest = Some(verdict.clone());
        }
    }

    /// Settles the candidates that passed: one won, the others lost.
    fn settle(&mut self, record: bool) {
        let Some(b) = &self.best else { return };
        for &(slot, total, i, j) in &self.passed {
            let v = if (i, j) == (b.i, b.j) {
                Verdict::Won
            } else if total + 1e-12 < b.total {
                Verdict::LostToBetter {
                    winner_total: b.total,
                }
            } else {
                Verdict::LostToLater
            };
            *self.counts.entry(v.key()).or_default() += 1;
            if record {
                self.trace[slot].verdict = v;
            }
        }
    }
}

/// The mined pair of the winning candidate.
fn mined_pair(
    ctx: &PairContext,
    kind: PairKind,
    s: &Trajectory,
    l: &Trajectory,
    label: &Label,
    b: Scored,
) -> MinedPair {
    let mut ev_notes = label.notes.clone();
    ev_notes.push(format!("contrast: {}", b.reward_reason));
    ev_notes.extend(b.findings);
    MinedPair {
        id: pair_id(&s.id, b.i, &l.id, b.j),
        task_id: ctx.task.task_id.clone(),
        domain: ctx.task.domain.clone(),
        kind,
        success: StepRef {
            trajectory: s.id.clone(),
            step: b.i as u32,
        },
        loc: StepRef {
            trajectory: l.id.clone(),
            step: b.j as u32,
        },
        target_action: s.steps[b.i].output.actions[0].clone(),
        loc_action: l.steps[b.j].output.actions[0].clone(),
        scores: PairScores {
            url: b.align.url,
            dom: b.align.dom,
            memory: b.align.memory,
            progress: b.align.progress,
            alignment: b.align.total,
            contrast: b.contrast,
            evidence: b.evidence,
            total: b.total,
        },
        failure_mode: FailureMode {
            category: label.category.clone(),
            confidence: label.confidence,
            source: label.source,
        },
        gates: Gates {
            validity: true,
            visual: true,
            progress: true,
        },
        evidence: ev_notes,
        loc_failure: (kind == PairKind::FailContrast).then(|| failure_kind(l)),
    }
}

/// Why nothing was mined (see [`PairOutcome::rejection`]), and the gates' reasons
/// when a gate stopped the furthest candidate.
fn rejection_of(furthest: Option<Verdict>) -> (Option<String>, Option<String>) {
    let detail = match &furthest {
        Some(Verdict::GateFailed { reasons, .. }) => Some(reasons.join("; ")),
        _ => None,
    };
    let reason = match furthest {
        None => "no_candidates".to_string(),
        Some(Verdict::AlignmentBelowThreshold) => "no_aligned_states".to_string(),
        Some(Verdict::MissingAction) => "missing_action".to_string(),
        Some(Verdict::ZeroContrast) => "no_contrast".to_string(),
        Some(Verdict::TrivialAction) => "trivial_difference".to_string(),
        Some(v) => v.key(),
    };
    (Some(reason), detail)
}

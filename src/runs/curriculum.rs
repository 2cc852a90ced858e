//! The curriculum of an RL run (the paper's "teach-while-doing" view): for every
//! mined state (an RL prompt, `prompt_id` = the mined pair id), its phase at each
//! step it was sampled, read from `rollouts.jsonl`:
//!
//! - `competence_rejected`: no rollout reached `r_comp` (too hard for now);
//! - `accepted`: the group had contrast and a competent rollout: it trained RL;
//! - `mastered`: std-rejected with a competent best (every rollout about as good);
//! - `std_rejected`: std-rejected without a competent rollout (uniformly failing).
//!
//! A state sampled in several groups at one step takes the phase of the most
//! informative one: accepted, then competence-rejected, then the std-rejected
//! kinds. It counts as salvaged at that step when any of its groups was routed to
//! the salvage anchor. Best-of-n and mean reward pool that step's samples.
//! Groups without a gate (other trainers) are gated here with the run's `eps_sigma`
//! and `r_comp` (`run.toml`, else 0.10 and 0.55) and the same rule as the trainer.
//!
//! A bad line is skipped and reported with its file, line and field; the rest reads.

use crate::train::rl::groups::{GateConfig, GateDecision, GroupStats, Mode, decide};
use crate::trajectory::jsonl::JsonlFile;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::Path;

/// How many bad lines are listed (all are counted).
const MAX_LISTED_ERRORS: usize = 20;

/// Where a state stands at a step.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    CompetenceRejected,
    Accepted,
    Mastered,
    StdRejected,
}

impl Phase {
    /// Every phase, in the curriculum's order.
    pub const ALL: [Phase; 4] = [
        Phase::CompetenceRejected,
        Phase::Accepted,
        Phase::Mastered,
        Phase::StdRejected,
    ];

    /// The name used in files.
    pub fn key(self) -> &'static str {
        match self {
            Phase::CompetenceRejected => "competence_rejected",
            Phase::Accepted => "accepted",
            Phase::Mastered => "mastered",
            Phase::StdRejected => "std_rejected",
        }
    }

    /// One letter for phase strips: upper case, lower case when salvaged.
    pub fn letter(self, salvaged: bool) -> char {
        let c = match self {
            Phase::CompetenceRejected => 'C',
            Phase::Accepted => 'A',
            Phase::Mastered => 'M',
            Phase::StdRejected => 'S',
        };
        if salvaged { c.to_ascii_lowercase() } else { c }
    }

    /// Precedence when a state's groups at one step disagree (higher wins).
    fn rank(self) -> u8 {
        match self {
            Phase::Accepted => 3,
            Phase::CompetenceRejected => 2,
            Phase::Mastered => 1,
            Phase::StdRejected => 0,
        }
    }
}

/// A state at one step.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StepPoint {
    pub step: u64,
    pub phase: Phase,
    /// Whether a group of this state was routed to the salvage anchor at this step.
    pub salvaged: bool,
    /// Groups of this state sampled at this step.
    pub groups: u32,
    /// Best reward over this step's samples.
    pub best: f64,
    /// Mean reward over this step's samples.
    pub mean: f64,
}

/// A run of consecutive sampled steps in one phase.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Segment {
    pub phase: Phase,
    pub from_step: u64,
    pub to_step: u64,
    /// Sampled steps in the segment.
    pub steps: u32,
    /// Of those, steps with a salvaged group.
    pub salvaged: u32,
}

/// One mined state over the run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StateRoute {
    /// The RL prompt id: the mined pair id for `--prompts mined`.
    pub prompt_id: String,
    pub points: Vec<StepPoint>,
    /// The phases in order, consecutive steps of one phase merged.
    pub route: Vec<Segment>,
    /// Steps with a salvaged group.
    pub salvaged_steps: u32,
    pub first_phase: Phase,
    pub last_phase: Phase,
}

impl StateRoute {
    /// The route in words: `competence_rejected → accepted → mastered`.
    pub fn route_text(&self) -> String {
        self.route
            .iter()
            .map(|s| s.phase.key())
            .collect::<Vec<_>>()
            .join(" → ")
    }
}

/// Phase counts of the states sampled at one step.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StepShares {
    pub step: u64,
    /// States sampled at this step.
    pub states: u64,
    /// States per phase (every phase present, zero included).
    pub counts: BTreeMap<Phase, u64>,
    /// Share of the sampled states per phase.
    pub shares: BTreeMap<Phase, f64>,
    /// States with a salvaged group.
    pub salvaged: u64,
}

/// Whole-run counts.
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
pub struct CurriculumSummary {
    pub states: u64,
    pub groups: u64,
    /// States by their phase at their last sampled step.
    pub final_phase: BTreeMap<Phase, u64>,
    /// Changes of phase between consecutive samplings, `from → to`.
    pub transitions: BTreeMap<String, u64>,
    /// States competence-rejected at some step and accepted at a later one.
    pub hard_then_accepted: u64,
    /// States accepted at some step and mastered at a later one.
    pub accepted_then_mastered: u64,
    /// States salvaged at least once.
    pub ever_salvaged: u64,
}

/// The curriculum of a run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Curriculum {
    pub run: String,
    pub mode: String,
    pub eps_sigma: f64,
    pub r_comp: f64,
    /// Every step that has groups, ascending.
    pub steps: Vec<u64>,
    /// States by prompt id.
    pub states: Vec<StateRoute>,
    pub shares: Vec<StepShares>,
    pub summary: CurriculumSummary,
    /// Lines that could not be read (skipped), counted and the first few listed.
    pub bad_lines: u64,
    pub errors: Vec<String>,
}

#[derive(Deserialize)]
struct LeanSample {
    reward: f64,
}

/// What the curriculum reads of a group (sample texts are skipped).
#[derive(Deserialize)]
struct LeanGroup {
    #[serde(default)]
    step: u64,
    prompt_id: String,
    #[serde(default)]
    gate: String,
    #[serde(default)]
    routed: Option<String>,
    samples: Vec<LeanSample>,
}

/// Gate thresholds and mode from `run.toml` (defaults where absent or unreadable).
fn run_gates(run: &Path) -> (GateConfig, String) {
    let mut cfg = GateConfig::default();
    let mut mode = String::from("salvage-ds");
    if let Ok(text) = std::fs::read_to_string(run.join("run.toml"))
        && let Ok(t) = toml::from_str::<toml::Table>(&text)
    {
        let num = |k: &str| {
            t.get(k)
                .and_then(|v| v.as_float().or_else(|| v.as_integer().map(|i| i as f64)))
        };
        if let Some(x) = num("eps_sigma") {
            cfg.eps_sigma = x;
        }
        if let Some(x) = num("r_comp") {
            cfg.r_comp = x;
        }
        if let Some(m) = t.get("mode").and_then(|v| v.as_str()) {
            match Mode::from_name(m) {
                Some(known) => {
                    cfg.mode = known;
                    mode = m.to_string();
                }
                // Said where the mode is shown, not replayed silently as another.
                None => {
                    mode = format!("{m} (unknown to this rmsweb: gated as {})", cfg.mode.name())
                }
            }
        }
    }
    (cfg, mode)
}

struct Acc {
    phase: Phase,
    salvaged: bool,
    groups: u32,
    best: f64,
    sum: f64,
    n: u64,
}

fn phase_of(g: &LeanGroup, st: &GroupStats, cfg: &GateConfig) -> Phase {
    let decision = match g.gate.as_str() {
        "accepted" => GateDecision::Accepted,
        "std_gate" => GateDecision::StdGate,
        "competence_gate" => GateDecision::CompetenceGate,
        _ => decide(st, cfg),
    };
    match decision {
        GateDecision::Accepted => Phase::Accepted,
        GateDecision::CompetenceGate => Phase::CompetenceRejected,
        GateDecision::StdGate if st.max >= cfg.r_comp => Phase::Mastered,
        GateDecision::StdGate => Phase::StdRejected,
    }
}

/// Reads a run's curriculum from `RUN/rollouts.jsonl`.
pub fn curriculum(run: &Path) -> anyhow::Result<Curriculum> {
    let path = run.join("rollouts.jsonl");
    anyhow::ensure!(
        path.is_file(),
        "{}: no rollouts (only RL runs write rollouts.jsonl)",
        path.display()
    );
    let file = JsonlFile::open(&path)?;
    let (cfg, mode) = run_gates(run);
    let read = read_groups(&file, &path, &cfg);
    let mut steps: Vec<u64> = read.acc.values().flat_map(|m| m.keys().copied()).collect();
    steps.sort_unstable();
    steps.dedup();
    let mut summary = CurriculumSummary {
        groups: read.groups,
        ..Default::default()
    };
    let states: Vec<StateRoute> = read
        .acc
        .into_iter()
        .map(|(prompt_id, by_step)| state_route(prompt_id, by_step, &mut summary))
        .collect();
    summary.states = states.len() as u64;
    let shares = steps
        .iter()
        .map(|&step| step_shares(step, &states))
        .collect();
    Ok(Curriculum {
        run: run.display().to_string(),
        mode,
        eps_sigma: cfg.eps_sigma,
        r_comp: cfg.r_comp,
        steps,
        states,
        shares,
        summary,
        bad_lines: read.bad,
        errors: read.errors,
    })
}

/// What reading `rollouts.jsonl` gives: each prompt's groups folded by step, the
/// lines that could not be read (the first few listed) and the groups read.
struct ReadGroups {
    acc: BTreeMap<String, BTreeMap<u64, Acc>>,
    bad: u64,
    errors: Vec<String>,
    groups: u64,
}

fn read_groups(file: &JsonlFile, path: &Path, cfg: &GateConfig) -> ReadGroups {
    let mut read = ReadGroups {
        acc: BTreeMap::new(),
        bad: 0,
        errors: Vec::new(),
        groups: 0,
    };
    for i in 0..file.len() {
        let g: LeanGroup = match file.get(i) {
            Ok(g) => g,
            Err(e) => {
                read.bad += 1;
                if read.errors.len() < MAX_LISTED_ERRORS {
                    read.errors.push(e.to_string());
                }
                continue;
            }
        };
        let rewards: Vec<f64> = g.samples.iter().map(|s| s.reward).collect();
        let Some(st) = GroupStats::of(&rewards) else {
            read.bad += 1;
            if read.errors.len() < MAX_LISTED_ERRORS {
                let line = file.span(i).map_or(i + 1, |s| s.line as usize);
                read.errors.push(format!(
                    "{}:{line}: samples: needs at least one finite reward",
                    path.display()
                ));
            }
            continue;
        };
        read.groups += 1;
        let phase = phase_of(&g, &st, cfg);
        let salvaged = g.routed.as_deref() == Some("salvage");
        let a = read
            .acc
            .entry(g.prompt_id)
            .or_default()
            .entry(g.step)
            .or_insert(Acc {
                phase,
                salvaged: false,
                groups: 0,
                best: f64::NEG_INFINITY,
                sum: 0.0,
                n: 0,
            });
        if phase.rank() > a.phase.rank() {
            a.phase = phase;
        }
        a.salvaged |= salvaged;
        a.groups += 1;
        a.best = a.best.max(st.max);
        a.sum += rewards.iter().sum::<f64>();
        a.n += rewards.len() as u64;
    }
    read
}

/// One state's route: its point at each step it was sampled, the runs of equal
/// phase, and what the summary counts of it (transitions, hard then accepted,
/// accepted then mastered, salvaged, final phase).
fn state_route(
    prompt_id: String,
    by_step: BTreeMap<u64, Acc>,
    summary: &mut CurriculumSummary,
) -> StateRoute {
    let points: Vec<StepPoint> = by_step
        .into_iter()
        .map(|(step, a)| StepPoint {
            step,
            phase: a.phase,
            salvaged: a.salvaged,
            groups: a.groups,
            best: a.best,
            mean: a.sum / a.n.max(1) as f64,
        })
        .collect();
    let mut route: Vec<Segment> = Vec::new();
    for p in &points {
        match route.last_mut() {
            Some(s) if s.phase == p.phase => {
                s.to_step = p.step;
                s.steps += 1;
                s.salvaged += u32::from(p.salvaged);
            }
            _ => route.push(Segment {
                phase: p.phase,
                from_step: p.step,
                to_step: p.step,
                steps: 1,
                salvaged: u32::from(p.salvaged),
            }),
        }
    }
    for w in route.windows(2) {
        *summary
            .transitions
            .entry(format!("{} → {}", w[0].phase.key(), w[1].phase.key()))
            .or_default() += 1;
    }
    let seen_before = |first: Phase, then: Phase| {
        points
            .iter()
            .position(|p| p.phase == first)
            .is_some_and(|k| points[k..].iter().any(|p| p.phase == then))
    };
    summary.hard_then_accepted +=
        u64::from(seen_before(Phase::CompetenceRejected, Phase::Accepted));
    summary.accepted_then_mastered += u64::from(seen_before(Phase::Accepted, Phase::Mastered));
    let salvaged_steps = points.iter().filter(|p| p.salvaged).count() as u32;
    summary.ever_salvaged += u64::from(salvaged_steps > 0);
    let (first_phase, last_phase) = (points[0].phase, points[points.len() - 1].phase);
    *summary.final_phase.entry(last_phase).or_default() += 1;
    StateRoute {
        prompt_id,
        points,
        route,
        salvaged_steps,
        first_phase,
        last_phase,
    }
}

/// Each phase's count and share among the states sampled at `step`.
fn step_shares(step: u64, states: &[StateRoute]) -> StepShares {
    let mut counts: BTreeMap<Phase, u64> = Phase::ALL.iter().map(|p| (*p, 0)).collect();
    let (mut n, mut salvaged) = (0u64, 0u64);
    for s in states {
        if let Ok(k) = s.points.binary_search_by_key(&step, |p| p.step) {
            *counts.entry(s.points[k].phase).or_default() += 1;
            salvaged += u64::from(s.points[k].salvaged);
            n += 1;
        }
    }
    let shares = counts
        .iter()
        .map(|(p, c)| (*p, *c as f64 / n.max(1) as f64))
        .collect();
    StepShares {
        step,
        states: n,
        counts,
        shares,
        salvaged,
    }
}

impl Curriculum {
    /// A state's point at each of the run's steps (None where it was not sampled).
    pub fn row<'a>(&self, s: &'a StateRoute) -> Vec<Option<&'a StepPoint>> {
        let mut k = 0;
        self.steps
            .iter()
            .map(|&step| {
                while k < s.points.len() && s.points[k].step < step {
                    k += 1;
                }
                s.points.get(k).filter(|p| p.step == step)
            })
            .collect()
    }

    /// A state's phase strip over the run's steps: one letter per step (see
    /// [`Phase::letter`]), `·` where the state was not sampled.
    pub fn strip(&self, s: &StateRoute) -> String {
        self.row(s)
            .into_iter()
            .map(|p| p.map_or('·', |p| p.phase.letter(p.salvaged)))
            .collect()
    }

    /// The curriculum as terminal text: per state its strip and route, then the
    /// phase shares per step and the summary (untrusted ids sanitized).
    pub fn render(&self) -> String {
        use crate::util::sanitize::clean_line;
        let mut o = format!(
            "run {}  mode {}  r_comp {}  eps_sigma {}  steps {}  states {}  groups {}\n",
            clean_line(&self.run),
            clean_line(&self.mode),
            self.r_comp,
            self.eps_sigma,
            self.steps.len(),
            self.summary.states,
            self.summary.groups
        );
        o.push_str(
            "phases: C competence-rejected · A accepted · M mastered · S std-rejected unsolved · \
             lower case: salvaged · '·' not sampled\n\n",
        );
        let width = self
            .states
            .iter()
            .map(|s| s.prompt_id.chars().count())
            .max()
            .unwrap_or(0)
            .clamp(8, 48);
        for s in &self.states {
            let last = &s.points[s.points.len() - 1];
            let first = &s.points[0];
            o.push_str(&format!(
                "{:<width$}  {}  best {:.2}→{:.2}  mean {:.2}→{:.2}  salvaged {}  {}\n",
                clean_line(&s.prompt_id),
                self.strip(s),
                first.best,
                last.best,
                first.mean,
                last.mean,
                s.salvaged_steps,
                s.route_text()
            ));
        }
        o.push_str(
            "\nstep  states  competence_rejected  accepted  mastered  std_rejected  salvaged\n",
        );
        for sh in &self.shares {
            let c = |p: Phase| sh.counts.get(&p).copied().unwrap_or(0);
            o.push_str(&format!(
                "{:>4}  {:>6}  {:>19}  {:>8}  {:>8}  {:>12}  {:>8}\n",
                sh.step,
                sh.states,
                c(Phase::CompetenceRejected),
                c(Phase::Accepted),
                c(Phase::Mastered),
                c(Phase::StdRejected),
                sh.salvaged
            ));
        }
        let sm = &self.summary;
        o.push_str(&format!(
            "\nhard then accepted {}  accepted then mastered {}  salvaged at least once {}\n",
            sm.hard_then_accepted, sm.accepted_then_mastered, sm.ever_salvaged
        ));
        let finals: Vec<String> = sm
            .final_phase
            .iter()
            .map(|(p, n)| format!("{} {n}", p.key()))
            .collect();
        o.push_str(&format!("final phase: {}\n", finals.join(", ")));
        if self.bad_lines > 0 {
            o.push_str(&format!(
                "{} unreadable lines skipped; first: {}\n",
                self.bad_lines,
                self.errors
                    .first()
                    .map(|e| clean_line(e))
                    .unwrap_or_default()
            ));
        }
        o
    }
}

#[cfg(test)]
mod tests;

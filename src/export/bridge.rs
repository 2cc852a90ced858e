//! One rubric, two front doors: the answers of `rmsweb reward batch`, `rmsweb reward
//! splice` and `rmsweb rl groups` as library calls over JSON text, which is what the
//! Python module (`python/`, verl's `compute_score` and the Salvage-DS plugin) hands
//! over. Every error names the field at fault (`ground_truth[1].params: ...`,
//! `elements[2].index: ...`).

use crate::action::Action;
use crate::action::parse::parse_response;
use crate::action::render::{Spliced, splice_actions};
use crate::reward::batch::parse_targets;
use crate::reward::{Decision, RewardConfig, score_against};
use crate::train::rl::groups::{
    GateConfig, GateDecision, GroupStats, advantages, decide, salvage_count, salvage_mix_for,
};
use crate::trajectory::Element;
use serde::Serialize;
use std::ops::Range;

/// Parses target actions given as JSON text: one action object or a list of them.
pub fn parse_targets_json(text: &str, field: &str) -> Result<Vec<Action>, String> {
    let v: serde_json::Value =
        serde_json::from_str(text).map_err(|e| format!("{field}: not JSON: {e}"))?;
    parse_targets(v, field)
}

/// Parses a state's element list given as JSON text (FORMATS.md `Element`s).
pub fn parse_elements_json(text: &str, field: &str) -> Result<Vec<Element>, String> {
    let de = &mut serde_json::Deserializer::from_str(text);
    serde_path_to_error::deserialize(de).map_err(|e| {
        let p = e.path().to_string();
        let inner = e.into_inner();
        if inner.is_syntax() || inner.is_eof() {
            format!("{field}: not JSON: {inner}")
        } else if p == "." || p.is_empty() {
            format!("{field}: {inner}")
        } else {
            format!("{field}{p}: {inner}")
        }
    })
}

/// The rubric's decision for `candidate` against `ground_truth` (JSON: an action or a
/// list of them) in a state whose elements are `elements` (JSON list; none or empty
/// skips the element checks, as `reward batch` does without `elements`).
pub fn score_json(
    candidate: &str,
    ground_truth: &str,
    elements: Option<&str>,
    cfg: &RewardConfig,
) -> Result<Decision, String> {
    let targets = parse_targets_json(ground_truth, "ground_truth")?;
    let elements = match elements {
        Some(e) if !e.trim().is_empty() => parse_elements_json(e, "elements")?,
        _ => Vec::new(),
    };
    Ok(score_against(candidate, &targets, &elements, cfg))
}

/// Puts the ground-truth `action` (JSON: an action or a list) in place of the
/// response's own action (Salvage-DS), keeping its reasoning.
pub fn splice_json(response: &str, action: &str) -> Result<Spliced, String> {
    let targets = parse_targets_json(action, "action")?;
    Ok(splice_actions(response, &targets))
}

/// The byte span `bytes` of `text` in characters (Python string indices).
pub fn char_span(text: &str, bytes: Range<usize>) -> Range<usize> {
    let start = bytes.start.min(text.len());
    let end = bytes.end.clamp(start, text.len());
    let before = text.get(..start).map_or(0, |s| s.chars().count());
    let inside = text.get(start..end).map_or(0, |s| s.chars().count());
    before..before + inside
}

/// The actions a response holds and the byte span of its action list, if it parses.
pub fn actions_of(response: &str) -> Option<(Vec<Action>, Range<usize>)> {
    parse_response(response)
        .ok()
        .map(|p| (p.actions, p.action_span))
}

/// One group's line of `rmsweb rl groups` (without its id).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GroupLine {
    pub mean: f64,
    pub std: f64,
    pub max: f64,
    pub decision: GateDecision,
    /// Accepted groups only.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub advantages: Option<Vec<f64>>,
}

/// The summary line of `rmsweb rl groups`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Default)]
pub struct GateSummary {
    pub groups: usize,
    pub accepted: usize,
    pub std_gate: usize,
    pub competence_gate: usize,
    /// S of ALGORITHMS.md §5 (0 unless the mode salvages).
    pub salvage: usize,
}

/// The gate decision, moments and (accepted) advantages of one group; an error for an
/// empty group or a non-finite reward.
pub fn gate_group(rewards: &[f64], cfg: &GateConfig) -> Result<GroupLine, String> {
    let st = GroupStats::of(rewards).ok_or("rewards: needs at least one finite number")?;
    let decision = decide(&st, cfg);
    Ok(GroupLine {
        mean: st.mean,
        std: st.std,
        max: st.max,
        decision,
        advantages: (decision == GateDecision::Accepted).then(|| advantages(rewards, &st)),
    })
}

/// Every group's line and the summary, as `rmsweb rl groups` prints them; the error
/// names the group (`groups[3].rewards: ...`).
pub fn gate_groups(
    groups: &[Vec<f64>],
    cfg: &GateConfig,
) -> Result<(Vec<GroupLine>, GateSummary), String> {
    let mut lines = Vec::with_capacity(groups.len());
    let mut s = GateSummary::default();
    for (i, r) in groups.iter().enumerate() {
        let l = gate_group(r, cfg).map_err(|e| format!("groups[{i}].{e}"))?;
        s.groups += 1;
        match l.decision {
            GateDecision::Accepted => s.accepted += 1,
            GateDecision::StdGate => s.std_gate += 1,
            GateDecision::CompetenceGate => s.competence_gate += 1,
        }
        lines.push(l);
    }
    if cfg.mode.salvages() {
        s.salvage = salvage_count(s.std_gate + s.competence_gate);
    }
    Ok((lines, s))
}

/// How many hard (competence-rejected) and mastered (std-rejected) groups the salvage
/// rule retains, with its unit and cap (16 and 64 in the paper).
pub fn salvage_mix(hard: usize, mastered: usize, unit: usize, cap: usize) -> (usize, usize) {
    salvage_mix_for(hard, mastered, unit, cap)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::train::rl::groups::Mode;

    #[test]
    fn scores_name_the_field_and_an_absent_index_is_wrong() {
        let cfg = RewardConfig::default();
        let gt = r#"{"name": "click", "params": {"index": 3}}"#;
        let els = r#"[{"index": 3, "tag": "button", "text": "OK"}]"#;
        let d = score_json("click(3)", gt, Some(els), &cfg).unwrap();
        assert_eq!(d.score, 1.0);
        let d = score_json("click(9)", gt, Some(els), &cfg).unwrap();
        assert_eq!(d.score, 0.0, "{d:?}");
        let d = score_json("click(9)", gt, None, &cfg).unwrap();
        assert_eq!(d.score, 0.3, "no elements: element checks skipped");
        let e = score_json("click(3)", r#"[{"name": "click"}, 4]"#, None, &cfg).unwrap_err();
        assert!(e.starts_with("ground_truth[1]"), "{e}");
        let e = score_json("click(3)", gt, Some(r#"[{"index": "x"}]"#), &cfg).unwrap_err();
        assert!(e.starts_with("elements[0].index"), "{e}");
        let e = score_json("click(3)", "{", None, &cfg).unwrap_err();
        assert!(e.starts_with("ground_truth: not JSON"), "{e}");
    }

    #[test]
    fn char_spans_count_characters() {
        let t = "é→click(1)";
        let b = t.find("click").unwrap();
        assert_eq!(char_span(t, b..t.len()), 2..10);
        assert_eq!(char_span(t, 100..200), 10..10);
    }

    #[test]
    fn gate_groups_match_the_rule() {
        let cfg = GateConfig::default();
        let mut groups = vec![vec![1.0, 0.0], vec![0.3, 0.0, 0.3, 0.0]];
        groups.extend(std::iter::repeat_n(vec![0.7, 0.7], 15));
        let (lines, s) = gate_groups(&groups, &cfg).unwrap();
        assert_eq!(lines[0].decision, GateDecision::Accepted);
        assert!(lines[0].advantages.is_some() && lines[1].advantages.is_none());
        assert_eq!(lines[1].decision, GateDecision::CompetenceGate);
        assert_eq!(
            (s.accepted, s.std_gate, s.competence_gate, s.salvage),
            (1, 15, 1, 16)
        );
        let free = GateConfig {
            mode: Mode::AnchorFree,
            ..cfg
        };
        assert_eq!(gate_groups(&groups, &free).unwrap().1.salvage, 0);
        let e = gate_groups(&[vec![1.0], vec![]], &cfg).unwrap_err();
        assert!(e.starts_with("groups[1].rewards"), "{e}");
    }
}

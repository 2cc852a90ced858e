//! The quality filter of ALGORITHMS.md §2: keep a successful trajectory only if every
//! step has a state and a parseable action, it does not stall in a loop, and its
//! effective length is within bounds. Every rejection carries its rule and reason.

use crate::action::Action;
use crate::trajectory::{Step, Trajectory};
use serde::{Deserialize, Serialize};

/// Filter thresholds.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct FilterConfig {
    /// Fewest effective (not wait/scroll-only) steps.
    pub min_effective_steps: usize,
    /// Most effective steps.
    pub max_effective_steps: usize,
    /// The same action on the same state this many times in a row is a stall.
    pub repeat_limit: usize,
}

impl Default for FilterConfig {
    fn default() -> Self {
        FilterConfig {
            min_effective_steps: 3,
            max_effective_steps: 30,
            repeat_limit: 3,
        }
    }
}

/// Why a trajectory was rejected.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Rejection {
    /// `not_success`, `missing_state`, `invalid_action`, `repeated_action`,
    /// `abab_cycle`, `too_short`, `too_long`.
    pub rule: String,
    /// One line naming the step and values involved.
    pub reason: String,
}

impl Rejection {
    fn new(rule: &str, reason: String) -> Self {
        Rejection {
            rule: rule.to_string(),
            reason,
        }
    }
}

/// Checks one trajectory; `Ok(effective_steps)` when it is kept.
pub fn check(t: &Trajectory, cfg: &FilterConfig) -> Result<usize, Rejection> {
    if !t.outcome.success {
        return Err(Rejection::new("not_success", "the attempt failed".into()));
    }
    for (i, s) in t.steps.iter().enumerate() {
        if !s.is_model_step() {
            continue;
        }
        if s.state.url.is_empty() && s.state.elements.is_empty() && s.state.dom_text.is_empty() {
            return Err(Rejection::new(
                "missing_state",
                format!("step {i} has no url, elements or DOM text"),
            ));
        }
        if s.output.actions.is_empty() {
            return Err(Rejection::new(
                "invalid_action",
                format!("step {i} has no action"),
            ));
        }
        for a in &s.output.actions {
            if let Err(why) = action_is_well_formed(a) {
                return Err(Rejection::new(
                    "invalid_action",
                    format!("step {i}: {} {why}", a.short()),
                ));
            }
        }
    }
    check_loops(t, cfg)?;
    let effective = t.model_steps().filter(|s| is_effective(s)).count();
    if effective < cfg.min_effective_steps {
        return Err(Rejection::new(
            "too_short",
            format!(
                "{effective} effective steps, fewer than {}",
                cfg.min_effective_steps
            ),
        ));
    }
    if effective > cfg.max_effective_steps {
        return Err(Rejection::new(
            "too_long",
            format!(
                "{effective} effective steps, more than {}",
                cfg.max_effective_steps
            ),
        ));
    }
    Ok(effective)
}

/// A step counts unless all its actions are waits or scrolls.
pub fn is_effective(s: &Step) -> bool {
    !s.output
        .actions
        .iter()
        .all(|a| matches!(a.name.as_str(), "wait" | "scroll"))
}

/// The canonical action names and the parameters each one must carry.
fn action_is_well_formed(a: &Action) -> Result<(), String> {
    let need_int = |k: &str| {
        a.int_param(k)
            .map(|_| ())
            .ok_or_else(|| format!("lacks an integer `{k}`"))
    };
    let need_str = |k: &str| {
        a.str_param(k)
            .map(|_| ())
            .ok_or_else(|| format!("lacks a text `{k}`"))
    };
    match a.name.as_str() {
        "click" if a.point().is_some() => Ok(()),
        "click" => {
            need_int("index").map_err(|e| format!("{e} (or `coordinate_x` and `coordinate_y`)"))
        }
        "dropdown_options" => need_int("index"),
        "input" | "select_dropdown" => need_int("index").and(need_str("text")),
        "upload_file" => need_int("index").and(need_str("path")),
        "navigate" => need_str("url"),
        "search" => need_str("query"),
        "send_keys" => need_str("keys"),
        "find_text" => need_str("text"),
        "extract" => need_str("query"),
        "switch" | "close" => a
            .params
            .get("tab_id")
            .map(|_| ())
            .ok_or_else(|| "lacks `tab_id`".to_string()),
        "search_page" => need_str("pattern"),
        "find_elements" => need_str("selector"),
        "evaluate" => need_str("code"),
        "write_file" => need_str("file_name").and(need_str("content")),
        "replace_file" => need_str("file_name")
            .and(need_str("old_str"))
            .and(need_str("new_str")),
        "read_file" => need_str("file_name"),
        "scroll" | "go_back" | "wait" | "done" | "screenshot" | "save_as_pdf" => Ok(()),
        other => Err(format!("is not a known action (`{other}`)")),
    }
}

/// What identifies "the same action on the same state": the URL, the title, the
/// elements (tag, text, attributes) and the actions, hashed.
fn step_key(s: &Step) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    s.state.url.hash(&mut h);
    s.state.title.hash(&mut h);
    for e in &s.state.elements {
        (&e.tag, &e.text, &e.attrs).hash(&mut h);
    }
    serde_json::to_string(&s.output.actions)
        .unwrap_or_default()
        .hash(&mut h);
    h.finish()
}

fn check_loops(t: &Trajectory, cfg: &FilterConfig) -> Result<(), Rejection> {
    // Harness steps are not decisions; loops are looked for among model steps (the
    // positions named are those of `t.steps`).
    let model: Vec<usize> = (0..t.steps.len())
        .filter(|&i| t.steps[i].is_model_step())
        .collect();
    let keys: Vec<u64> = model.iter().map(|&i| step_key(&t.steps[i])).collect();
    let n = cfg.repeat_limit.max(2);
    for (i, w) in keys.windows(n).enumerate() {
        if w.iter().all(|k| *k == w[0]) {
            return Err(Rejection::new(
                "repeated_action",
                format!(
                    "steps {}..{}: {} repeated {n} times on the same state",
                    model[i],
                    model[i + n - 1],
                    action_label(&t.steps[model[i]])
                ),
            ));
        }
    }
    for (i, w) in keys.windows(4).enumerate() {
        if w[0] == w[2] && w[1] == w[3] && w[0] != w[1] {
            return Err(Rejection::new(
                "abab_cycle",
                format!(
                    "steps {}..{}: {} and {} alternate",
                    model[i],
                    model[i + 3],
                    action_label(&t.steps[model[i]]),
                    action_label(&t.steps[model[i + 1]])
                ),
            ));
        }
    }
    Ok(())
}

fn action_label(s: &Step) -> String {
    s.output
        .actions
        .first()
        .map(Action::short)
        .unwrap_or_else(|| "(no action)".into())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trajectory::{ModelOutput, Outcome, State};
    use serde_json::json;

    fn traj(steps: &[(&str, Action)]) -> Trajectory {
        Trajectory {
            id: "t".into(),
            task_id: "k".into(),
            attempt: 1,
            round: 1,
            reflection: None,
            source: String::new(),
            teacher: String::new(),
            outcome: Outcome {
                success: true,
                ..Default::default()
            },
            steps: steps
                .iter()
                .enumerate()
                .map(|(i, (url, a))| Step {
                    index: i as u32,
                    state: State {
                        url: url.to_string(),
                        ..Default::default()
                    },
                    output: ModelOutput {
                        actions: vec![a.clone()],
                        ..Default::default()
                    },
                    result: vec![],
                    timing: None,
                    ..Default::default()
                })
                .collect(),
        }
    }

    fn click(i: i64) -> Action {
        Action::new("click", json!({ "index": i }))
    }

    fn rule(t: &Trajectory) -> String {
        check(t, &FilterConfig::default())
            .map(|n| format!("kept {n}"))
            .unwrap_or_else(|r| r.rule)
    }

    #[test]
    fn a_clean_success_is_kept_with_its_effective_length() {
        let t = traj(&[
            ("a", click(1)),
            ("b", Action::new("scroll", json!({"down": true}))),
            ("b", click(2)),
            (
                "c",
                Action::new("done", json!({"text": "ok", "success": true})),
            ),
        ]);
        assert_eq!(rule(&t), "kept 3");
    }

    #[test]
    fn failures_are_rejected() {
        let mut t = traj(&[("a", click(1)), ("b", click(2)), ("c", click(3))]);
        t.outcome.success = false;
        assert_eq!(rule(&t), "not_success");
    }

    #[test]
    fn a_step_without_state_or_with_a_malformed_action_is_rejected() {
        let t = traj(&[("a", click(1)), ("", click(2)), ("c", click(3))]);
        assert_eq!(rule(&t), "missing_state");
        let t = traj(&[
            ("a", click(1)),
            ("b", Action::new("input", json!({"index": 2}))),
            ("c", click(3)),
        ]);
        let r = check(&t, &FilterConfig::default()).unwrap_err();
        assert_eq!(r.rule, "invalid_action");
        assert!(
            r.reason.contains("step 1") && r.reason.contains("`text`"),
            "{}",
            r.reason
        );
        let t = traj(&[
            ("a", click(1)),
            ("b", Action::new("teleport", json!({}))),
            ("c", click(3)),
        ]);
        assert_eq!(rule(&t), "invalid_action");
    }

    #[test]
    fn three_repeats_on_one_state_stall_but_two_do_not() {
        let t = traj(&[
            ("a", click(1)),
            ("a", click(1)),
            ("b", click(2)),
            ("c", click(3)),
        ]);
        assert_eq!(rule(&t), "kept 4");
        let t = traj(&[
            ("a", click(1)),
            ("a", click(1)),
            ("a", click(1)),
            ("c", click(3)),
        ]);
        assert_eq!(rule(&t), "repeated_action");
        // the same action on different pages is progress, not a stall
        let t = traj(&[("a", click(1)), ("b", click(1)), ("c", click(1))]);
        assert_eq!(rule(&t), "kept 3");
    }

    #[test]
    fn an_abab_cycle_of_four_is_a_stall() {
        let t = traj(&[
            ("a", click(1)),
            ("b", click(2)),
            ("a", click(1)),
            ("b", click(2)),
            ("c", click(3)),
        ]);
        let r = check(&t, &FilterConfig::default()).unwrap_err();
        assert_eq!(r.rule, "abab_cycle");
        assert!(r.reason.contains("steps 0..3"), "{}", r.reason);
    }

    #[test]
    fn effective_length_bounds() {
        let wait = Action::new("wait", json!({"seconds": 1}));
        let t = traj(&[
            ("a", click(1)),
            ("b", wait.clone()),
            ("c", wait),
            ("d", click(2)),
        ]);
        assert_eq!(rule(&t), "too_short");
        let many: Vec<(String, Action)> = (0..31).map(|i| (format!("u{i}"), click(i))).collect();
        let refs: Vec<(&str, Action)> = many.iter().map(|(u, a)| (u.as_str(), a.clone())).collect();
        assert_eq!(rule(&traj(&refs)), "too_long");
        assert_eq!(rule(&traj(&refs[..30])), "kept 30");
    }
}

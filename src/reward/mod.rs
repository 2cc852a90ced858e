//! The polarized action-semantic reward (ALGORITHMS.md §3).
//!
//! Levels: EXACT 1.0, CORE 0.7, TYPE 0.3 (right action type, wrong key parameter),
//! WRONG 0.0 (unparseable, invalid, or another action type). Every [`Decision`] names
//! the rule that fired and gives a one-line reason with the concrete values.
//!
//! Choices where the design is silent (documented here, visible in reasons):
//! - A candidate index equal to the target's is never `index.absent`, even if the
//!   element list lacks it: the target defines what exists.
//! - With an empty element list, element checks are skipped and the reason says so.
//! - [`score`] takes one target and ignores the candidate's later actions;
//!   [`score_actions`] / [`score_against`] take the whole target step: when it holds
//!   several actions (or the candidate does), an exact first action whose remaining
//!   actions differ scores 0.7 (`multi.rest_differs`).

pub mod batch;
pub mod config;
pub mod decision;
pub mod elements;
pub mod key_tokens;
pub mod normalize;
pub mod quote;
pub mod rules;
pub mod url_norm;

#[cfg(test)]
mod tests;

pub use config::RewardConfig;
pub use decision::{Decision, Level};

use crate::action::parse::parse_response;
use crate::action::{Action, canonicalize};
use crate::trajectory::Element;
use crate::util::sanitize::clean_line;
use rules::Ctx;
use serde_json::Value;
use std::borrow::Cow;

/// Scores a model response against the target action in a state with `elements`.
/// Only the candidate's first action is scored (see [`score_against`] for steps
/// with several target actions).
pub fn score(
    response: &str,
    target: &Action,
    elements: &[Element],
    cfg: &RewardConfig,
) -> Decision {
    score_against(response, std::slice::from_ref(target), elements, cfg)
}

/// Scores a model response against all the actions of a target step.
pub fn score_against(
    response: &str,
    targets: &[Action],
    elements: &[Element],
    cfg: &RewardConfig,
) -> Decision {
    match parse_response(response) {
        Ok(p) => score_actions(&p.actions, targets, elements, cfg),
        Err(e) => Decision::new(Level::Wrong, "parse.invalid", clean_line(&e.message)),
    }
}

/// Scores parsed candidate actions against the target step's actions: the first
/// against the first; an exact first with differing remaining actions gets 0.7 when
/// the target step has several actions.
pub fn score_actions(
    candidates: &[Action],
    targets: &[Action],
    elements: &[Element],
    cfg: &RewardConfig,
) -> Decision {
    let Some(target) = targets.first() else {
        return Decision::new(
            Level::Wrong,
            "target.empty",
            "the target step has no action",
        );
    };
    let Some(first) = candidates.first() else {
        return Decision::new(
            Level::Wrong,
            "parse.no_action",
            "the response holds no action",
        );
    };
    let decision = score_action(first, target, elements, cfg);
    if targets.len() < 2 || decision.level != Level::Exact {
        return decision;
    }
    let rest_same = candidates.len() == targets.len()
        && candidates[1..]
            .iter()
            .zip(&targets[1..])
            .all(|(c, t)| score_action(c, t, elements, cfg).level == Level::Exact);
    if rest_same {
        Decision::new(
            Level::Exact,
            "multi.exact",
            format!("all {} actions match the target step", targets.len()),
        )
    } else {
        let list = |a: &[Action]| {
            if a.is_empty() {
                return "(none)".to_string();
            }
            let v: Vec<String> = a.iter().map(Action::short).collect();
            clean_line(&format!("[{}]", v.join(", "))).into_owned()
        };
        Decision::new(
            Level::Core,
            "multi.rest_differs",
            format!(
                "first action exact ({}); later actions {} vs target {}",
                decision.rule,
                list(&candidates[1..]),
                list(&targets[1..])
            ),
        )
    }
}

/// The action with a canonical name (old Browser Use names mapped).
fn canonical(a: &Action) -> Cow<'_, Action> {
    if a.is_known() {
        Cow::Borrowed(a)
    } else {
        Cow::Owned(canonicalize(&a.name, &Value::Object(a.params.clone())).action)
    }
}

/// Scores an already parsed candidate action against the target action.
pub fn score_action(
    candidate: &Action,
    target: &Action,
    elements: &[Element],
    cfg: &RewardConfig,
) -> Decision {
    let (c, t) = (canonical(candidate), canonical(target));
    let (c, t) = (c.as_ref(), t.as_ref());
    if c.name != t.name {
        return Decision::new(
            Level::Wrong,
            "type.other",
            format!(
                "candidate {} is another action type than target {}",
                quote::quote(&c.short()),
                quote::quote(&t.short())
            ),
        );
    }
    let ctx = Ctx { elements, cfg };
    match c.name.as_str() {
        "click" => rules::click(c, t, &ctx),
        "dropdown_options" => rules::element_only("dropdown_options", c, t, &ctx),
        "input" => rules::element_text("input", c, t, &ctx),
        "select_dropdown" => rules::element_text("select_dropdown", c, t, &ctx),
        "upload_file" => rules::upload(c, t, &ctx),
        "navigate" => rules::navigate(c, t, &ctx),
        "search" => rules::query("search", "query", c, t, &ctx, Some(cfg.search_jaccard)),
        "extract" => rules::query("extract", "query", c, t, &ctx, Some(cfg.extract_jaccard)),
        "find_text" => rules::query("find_text", "text", c, t, &ctx, None),
        "scroll" => rules::scroll(c, t, &ctx),
        "send_keys" => rules::send_keys(c, t),
        "switch" => rules::tab("switch", c, t),
        "close" => rules::tab("close", c, t),
        "done" => rules::done(c, t, &ctx),
        "wait" => rules::wait(c, t, &ctx),
        "go_back" => Decision::new(Level::Exact, "go_back.always", "go_back has no parameters"),
        "search_page" => rules::fields("search_page", &["pattern"], c, t),
        "find_elements" => rules::fields("find_elements", &["selector"], c, t),
        "evaluate" => rules::fields("evaluate", &["code"], c, t),
        "write_file" => rules::fields("write_file", &["file_name", "content"], c, t),
        "replace_file" => rules::fields("replace_file", &["file_name", "old_str", "new_str"], c, t),
        "read_file" => rules::fields("read_file", &["file_name"], c, t),
        "screenshot" | "save_as_pdf" => rules::fields(&c.name, &[], c, t),
        other if c == t => Decision::new(
            Level::Exact,
            "unknown.identical",
            format!(
                "unknown action type {} identical to the target",
                clean_line(other)
            ),
        ),
        other => Decision::new(
            Level::Wrong,
            "action.unknown",
            format!(
                "unknown action type {} (no rubric row) and not identical to the target",
                clean_line(other)
            ),
        ),
    }
}

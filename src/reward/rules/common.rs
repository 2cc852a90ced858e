//! What every rubric row shares: the context, decisions with their rule and reason,
//! typed parameters, and how two element indices relate on the page.

use crate::action::Action;
use crate::reward::config::RewardConfig;
use crate::reward::decision::{Decision, Level};
use crate::reward::elements::{describe, equivalent, find};
use crate::reward::key_tokens::{key_tokens, show};
use crate::reward::quote::quote;
use crate::trajectory::Element;
use crate::util::sanitize::clean_line;
use serde_json::Value;

/// What the rules need besides the two actions.
pub struct Ctx<'a> {
    pub elements: &'a [Element],
    pub cfg: &'a RewardConfig,
}

pub(super) const NO_ELEMENTS: &str = "element checks skipped: no elements given";

pub(super) fn d(level: Level, rule: &str, reason: String) -> Decision {
    Decision::new(level, rule, reason)
}

pub(super) fn missing(action: &Action, who: &str, key: &str) -> Decision {
    d(
        Level::Wrong,
        "params.missing",
        format!("{who} {} has no valid `{key}`", clean_line(&action.short())),
    )
}

/// A numeric parameter (numbers or numeric strings).
pub(super) fn num_param(a: &Action, key: &str) -> Option<f64> {
    match a.params.get(key)? {
        Value::Number(n) => n.as_f64(),
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    }
}

/// A text parameter; numbers are read as their JSON text (`input(3, 42)`).
pub(super) fn text_param(a: &Action, key: &str) -> Option<String> {
    match a.params.get(key)? {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

/// A tab id as text, whether written as a number or a string.
pub(super) fn tab_param(a: &Action) -> Option<String> {
    match a.params.get("tab_id")? {
        Value::String(s) => Some(s.trim().to_string()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

/// Fails with `index.absent` when the candidate's index is not in the state (and is
/// not the target's own index: the target defines what exists).
pub(super) fn check_index(ctx: &Ctx, cand: i64, target: Option<i64>) -> Result<(), Decision> {
    if ctx.elements.is_empty() || Some(cand) == target || find(ctx.elements, cand).is_some() {
        return Ok(());
    }
    Err(d(
        Level::Wrong,
        "index.absent",
        format!(
            "index {cand} is not among the state's {} elements",
            ctx.elements.len()
        ),
    ))
}

/// How the candidate's element relates to the target's (indices already differ).
pub(super) enum Relation {
    Equivalent(String),
    Other(String),
}

pub(super) fn relate(ctx: &Ctx, c: i64, t: i64) -> Relation {
    if ctx.elements.is_empty() {
        return Relation::Other(format!("index {c}, target {t} ({NO_ELEMENTS})"));
    }
    let ce = find(ctx.elements, c);
    match (ce, find(ctx.elements, t)) {
        (Some(ce), Some(te)) if equivalent(ce, te, ctx.cfg) => {
            Relation::Equivalent(format!("index {c} is a {} like target {t}", describe(ce)))
        }
        (Some(ce), Some(te)) => Relation::Other(format!(
            "index {c} is {}, target {t} is {}",
            describe(ce),
            describe(te)
        )),
        (Some(ce), None) => Relation::Other(format!(
            "index {c} is {}; target index {t} is not in the element list, so equivalence cannot be checked",
            describe(ce)
        )),
        (None, _) => Relation::Other(format!("index {c}, target {t}")),
    }
}

/// Key tokens of two texts when they differ (and checking is on).
pub(super) fn key_token_mismatch(ctx: &Ctx, c: &str, t: &str) -> Option<Decision> {
    if !ctx.cfg.check_key_tokens {
        return None;
    }
    let (kc, kt) = (key_tokens(c), key_tokens(t));
    (kc != kt).then(|| {
        d(
            Level::Type,
            "key_tokens.mismatch",
            format!(
                "numbers/dates differ: {} has {}, target {} has {}",
                quote(c),
                show(&kc),
                quote(t),
                show(&kt)
            ),
        )
    })
}

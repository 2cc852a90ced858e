//! Route choices (ALGORITHMS.md §4.4): a loc action that another verified success of
//! the task also takes, at a state aligned with the loc state, is a choice between
//! routes that both work, not a failure; such a contrast is not mined.
//!
//! "Takes the loc action" means the rubric gives the loc action full reward against
//! that success's action in that success's state (indices translated through element
//! signatures, as for the contrast itself). "Another" excludes both sides of the pair;
//! for a detour pair it also excludes successes that are themselves detours (at least
//! `detour_min_extra_steps` longer than the shortest), since the question there is
//! whether an efficient route takes the step.

use super::align::{Side, StateView, align};
use super::config::MineConfig;
use super::contrast::contrast;
use crate::action::Action;
use crate::reward::RewardConfig;
use serde::Serialize;

/// The success step that takes the loc action.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RouteHit {
    pub trajectory: String,
    pub step: usize,
    pub alignment: f64,
}

/// The best-aligned step of `others` that takes `loc_action` in a state aligned with
/// `loc` (ties: the first in order), if any.
pub fn route_choice(
    loc_action: &Action,
    loc: &StateView,
    others: &[Side],
    cfg: &MineConfig,
    reward: &RewardConfig,
) -> Option<RouteHit> {
    let mut best: Option<RouteHit> = None;
    for o in others {
        for (k, step) in o.traj.steps.iter().enumerate() {
            let Some(view) = o.views.get(k) else { break };
            let al = align(view, loc, &cfg.weights);
            if al.total + 1e-12 < cfg.min_alignment
                || best
                    .as_ref()
                    .is_some_and(|b| al.total <= b.alignment + 1e-12)
            {
                continue;
            }
            let Some(action) = step.output.actions.first() else {
                continue;
            };
            let c = contrast(action, loc_action, &step.state.elements, loc, view, reward);
            if c.value <= 1e-12 {
                best = Some(RouteHit {
                    trajectory: o.traj.id.clone(),
                    step: k,
                    alignment: al.total,
                });
            }
        }
    }
    best
}

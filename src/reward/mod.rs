//! The polarized action-semantic reward (ALGORITHMS.md §3).
//!
//! INTERIM: the reward issue replaces the scoring below with the full rubric; the
//! types and the signatures of [`score`] and [`score_action`] are the contract the
//! other stages use and stay as they are.

use crate::action::Action;
use crate::action::parse::parse_response;
use crate::trajectory::Element;
use serde::{Deserialize, Serialize};

/// The four reward levels.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Level {
    Exact,
    Core,
    Type,
    Wrong,
}

impl Level {
    /// The score of the level: 1.0, 0.7, 0.3 or 0.0.
    pub fn score(self) -> f64 {
        match self {
            Level::Exact => 1.0,
            Level::Core => 0.7,
            Level::Type => 0.3,
            Level::Wrong => 0.0,
        }
    }
}

/// A rubric decision: the score, its level, the rule that fired and why.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Decision {
    pub score: f64,
    pub level: Level,
    /// e.g. `click.equivalent_element`.
    pub rule: String,
    /// One line a person can check.
    pub reason: String,
}

impl Decision {
    /// A decision at `level`.
    pub fn new(level: Level, rule: impl Into<String>, reason: impl Into<String>) -> Self {
        Decision {
            score: level.score(),
            level,
            rule: rule.into(),
            reason: reason.into(),
        }
    }
}

/// Rubric thresholds (TOML-configurable).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RewardConfig {}

impl Default for RewardConfig {
    fn default() -> Self {
        RewardConfig {}
    }
}

/// Scores a model response against the target action in a state with `elements`.
pub fn score(
    response: &str,
    target: &Action,
    elements: &[Element],
    cfg: &RewardConfig,
) -> Decision {
    match parse_response(response) {
        Ok(p) => match p.actions.first() {
            Some(a) => score_action(a, target, elements, cfg),
            None => Decision::new(Level::Wrong, "parse.no_action", "response holds no action"),
        },
        Err(e) => Decision::new(Level::Wrong, "parse.invalid", e.message),
    }
}

/// Scores an already parsed candidate action against the target action.
pub fn score_action(
    candidate: &Action,
    target: &Action,
    _elements: &[Element],
    _cfg: &RewardConfig,
) -> Decision {
    if candidate == target {
        Decision::new(Level::Exact, "exact", "identical action")
    } else if candidate.name == target.name {
        Decision::new(
            Level::Type,
            "type.same",
            "same action type, other parameters",
        )
    } else {
        Decision::new(Level::Wrong, "type.other", "another action type")
    }
}

//! A rubric decision: its level and score, the rule that fired and why.

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

    /// `exact`, `core`, `type` or `wrong`.
    pub fn name(self) -> &'static str {
        match self {
            Level::Exact => "exact",
            Level::Core => "core",
            Level::Type => "type",
            Level::Wrong => "wrong",
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

//! The mined critical-step pair (`mined/pairs.jsonl`, FORMATS.md).

use crate::action::Action;
use serde::{Deserialize, Serialize};

/// Which contrast produced a pair.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PairKind {
    FailContrast,
    Detour,
}

/// A step of one trajectory.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct StepRef {
    pub trajectory: String,
    pub step: u32,
}

/// The score parts of a pair (ALGORITHMS.md §4).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, Default)]
pub struct PairScores {
    pub url: f64,
    pub dom: f64,
    pub memory: f64,
    pub progress: f64,
    pub alignment: f64,
    pub contrast: f64,
    pub evidence: f64,
    pub total: f64,
}

/// Who assigned the failure-mode label.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LabelSource {
    Judge,
    Heuristic,
    Annotator,
}

/// A failure-mode label with its confidence.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FailureMode {
    pub category: String,
    pub confidence: f64,
    pub source: LabelSource,
}

/// Gate results.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Gates {
    pub validity: bool,
    pub visual: bool,
    pub progress: bool,
}

/// A mined critical-step pair: the success-side state and action to learn, and the
/// failing (or detouring) side kept for auditing.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MinedPair {
    pub id: String,
    pub task_id: String,
    #[serde(default)]
    pub domain: String,
    pub kind: PairKind,
    pub success: StepRef,
    pub loc: StepRef,
    pub target_action: Action,
    pub loc_action: Action,
    pub scores: PairScores,
    pub failure_mode: FailureMode,
    pub gates: Gates,
    #[serde(default)]
    pub evidence: Vec<String>,
    /// How the loc attempt failed (fail_contrast pairs); runtime and evaluation
    /// failures face a stricter minimum score.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub loc_failure: Option<FailureKind>,
}

/// How a failed attempt failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FailureKind {
    /// The agent acted wrongly (the common case).
    Behaviour,
    /// An action errored, the page crashed or timed out.
    Runtime,
    /// The agent claimed success but the evaluator disagreed.
    Evaluation,
}

/// The default failure-mode taxonomy, in the order number keys pick them.
pub const DEFAULT_TAXONOMY: &[&str] = &[
    "wrong_element",
    "wrong_input_value",
    "missed_constraint",
    "premature_done",
    "navigation_detour",
    "loop_stall",
    "extraction_error",
    "technical_obstruction",
];

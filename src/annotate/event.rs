//! One annotation event.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// What an annotator did to a pair.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Op {
    /// The pair is right as mined.
    Accept,
    /// The pair is wrong and must not be trained on.
    Reject,
    /// `value` is the new failure-mode category.
    Relabel,
    /// `value` is the corrected target action (canonical JSON form).
    EditTarget,
    /// `value` is free text.
    Note,
    /// Reverts the annotator's latest still-active event on the pair; `value` names the
    /// op undone and `prev` holds that event's value.
    Undo,
    /// A reviewer's word on a pair whose annotators disagree: `value` is `"accept"`
    /// or `"reject"`; it decides the pair while it stands.
    Settle,
}

impl Op {
    /// Every op, in display order.
    pub const ALL: [Op; 7] = [
        Op::Accept,
        Op::Reject,
        Op::Relabel,
        Op::EditTarget,
        Op::Note,
        Op::Undo,
        Op::Settle,
    ];

    /// The name used in the log (`edit_target`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            Op::Accept => "accept",
            Op::Reject => "reject",
            Op::Relabel => "relabel",
            Op::EditTarget => "edit_target",
            Op::Note => "note",
            Op::Undo => "undo",
            Op::Settle => "settle",
        }
    }
}

/// One line of `annotations.jsonl`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AnnotationEvent {
    /// RFC 3339 time the event was made.
    pub ts: String,
    pub annotator: String,
    pub pair_id: String,
    pub op: Op,
    /// The new value (see [`Op`]); `null` for accept and reject.
    #[serde(default)]
    pub value: Value,
    /// The value this event replaces, for auditing (`null` when there was none).
    #[serde(default)]
    pub prev: Value,
}

impl AnnotationEvent {
    /// An event stamped with the current UTC time (millisecond precision).
    pub fn now(annotator: &str, pair_id: &str, op: Op, value: Value, prev: Value) -> Self {
        AnnotationEvent {
            ts: chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
            annotator: annotator.to_string(),
            pair_id: pair_id.to_string(),
            op,
            value,
            prev,
        }
    }
}

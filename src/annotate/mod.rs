//! Append-only annotation log (`annotations.jsonl`, FORMATS.md) and its fold into
//! each pair's current state and into the corrected corpus.
//!
//! Every event is one JSON line `{ts, annotator, pair_id, op, value, prev}` appended
//! through [`crate::trajectory::jsonl::append`] (one locked write, then fsync), so two
//! workbenches on one dataset never interleave partial lines and an event reported as
//! saved survives a crash.

pub mod agreement;
pub mod event;
pub mod export;
pub mod fold;
pub mod log;
pub mod validate;

pub use event::{AnnotationEvent, Op};
pub use export::{ExportReport, counts, export_corrected};
pub use fold::{Folded, PairState, Status};
pub use log::AnnotationLog;

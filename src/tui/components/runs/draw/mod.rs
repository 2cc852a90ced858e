//! Drawing the Runs tab: the run list, the metric panels, the info box and the log
//! tail (everything shown is sanitized text read by the watcher).
//!
//! The list is in `list`, the panels in `charts`, the info box and log tail in
//! `info`, what they share in `common`.

mod charts;
mod common;
mod info;
mod list;

pub(crate) use info::{draw_info, draw_log};

//! Watching and driving training runs (the library under the workbench's Runs
//! tab; no UI here): run discovery and lenient status reading ([`info`]), an
//! incremental metrics reader ([`tail`]), bounded per-key histories with EMA and
//! log scale ([`series`], [`track`]), the polling loop's I/O and state
//! ([`monitor`]), launching/stopping runs as detached processes ([`launch`]), and
//! supervising verl runs in a run folder ([`verl`]).

pub mod config_diff;
pub mod curriculum;
pub mod info;
pub mod launch;
pub mod monitor;
pub mod rollouts;
pub mod series;
pub mod synth;
pub mod tail;
pub mod track;
pub mod verl;

pub use info::{DisplayState, RunInfo};
pub use launch::{LaunchSpec, Launcher};
pub use monitor::{RunsState, Track, Update, Watcher};
pub use series::{Point, Series};
pub use tail::{MetricsTail, TailState};

//! Failure-mode mining of critical steps (ALGORITHMS.md §4): contrast executions of
//! the same task, keep the last state-aligned action divergence that matches a
//! failure mode, with its verified successful action.
//!
//! Pipeline: [`pairs`] (which trajectories to contrast) → [`label`] (failure-mode
//! prior) → [`select`] (candidates: [`align`], [`contrast`], [`gates`], [`evidence`])
//! → [`qc`] (quality control) → [`report`]. [`miner`] runs it over a dataset in
//! parallel; [`explain`] replays one pair with its full audit trail.

pub mod align;
pub mod balance;
pub mod config;
pub mod contrast;
pub mod eval_labels;
pub mod evidence;
pub mod explain;
pub mod gates;
pub mod heuristic;
pub mod label;
pub mod miner;
pub mod pair;
pub mod pairs;
pub mod qc;
pub mod report;
pub mod route;
pub mod select;
pub mod validate;

pub use config::MineConfig;
pub use label::{HeuristicJudge, Judge, LlmJudge};
pub use miner::{MineOutput, mine_dataset, write_output};
pub use pair::MinedPair;

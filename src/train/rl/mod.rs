//! Salvage-DS offline RL (ALGORITHMS.md §5).

pub mod checkpoint;
pub mod config;
pub mod groups;
pub mod loss;
pub mod policy;
pub mod probe;
pub mod prompts;
pub mod report;
pub mod rollout;
pub mod seqs;
pub mod sharpening;
pub mod trainer;
pub mod update;

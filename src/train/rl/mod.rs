//! Salvage-DS offline RL (ALGORITHMS.md §5).

pub mod config;
pub mod groups;
pub mod loss;
pub mod prompts;
pub mod rollout;
pub mod seqs;
pub mod sharpening;
pub mod trainer;

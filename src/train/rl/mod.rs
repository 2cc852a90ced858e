//! Salvage-DS offline RL (ALGORITHMS.md §5).

pub mod groups;
pub mod loss;

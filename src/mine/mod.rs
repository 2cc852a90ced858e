//! Failure-mode mining of critical steps (ALGORITHMS.md §4).

pub mod pair;

pub use pair::MinedPair;

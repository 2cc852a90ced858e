//! Integration tests: one binary, one module per area.

mod dataset;
mod import;
mod reward;
mod rl_groups;

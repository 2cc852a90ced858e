//! Integration tests: one binary, one module per area.

mod dataset;
mod rl_groups;

//! Integration tests: one binary, one module per area.

mod dataset;
mod import;
mod rl_groups;

//! Integration tests: one binary, one module per area.

mod annotate;
mod dataset;
mod import;
mod mine;
mod reward;
mod rl_groups;
mod tui;
mod tui_data;
mod tui_tmux;

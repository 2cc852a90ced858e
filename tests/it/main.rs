//! Integration tests: one binary, one module per area.

mod annotate;
mod browser_use;
mod chat;
mod collect;
mod cuda;
mod curate;
mod dataset;
mod env;
mod fixtures;
mod fused;
mod import;
mod mine;
mod mine_judge;
mod model;
mod reward;
mod rl_groups;
mod rl_train;
mod runs_tab;
mod runs_tail;
mod serve;
mod tui;
mod tui_data;
mod tui_tmux;

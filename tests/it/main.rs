//! Integration tests: one binary, one module per area.

mod annotate;
mod chat;
mod collect;
mod curate;
mod dataset;
mod env;
mod import;
mod mine;
mod mine_judge;
mod model;
mod reward;
mod rl_groups;
mod runs_tab;
mod runs_tail;
mod tui;
mod tui_data;
mod tui_tmux;

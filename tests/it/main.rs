//! Integration tests: one binary, one module per area.
mod annotate;
mod tui;
mod tui_data;
mod tui_tmux;

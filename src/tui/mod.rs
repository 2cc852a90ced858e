//! The ratatui workbench (TUI.md): tabs for trajectories, mined pairs, the reward
//! debugger and runs; a thin shell over the library.
//!
//! Structure (after ratatui's component template and gitui): [`components`] hold
//! each view's state and answer keys with an optional [`action::Action`];
//! [`app::App::update`] applies actions; drawing reads that state. [`run`](mod@run) drives
//! the app on tokio with crossterm and always restores the terminal.

pub mod action;
pub mod app;
pub mod components;
pub mod graphics_query;
pub mod key_help;
pub mod keys;
pub mod run;
pub mod shared;
pub mod tabs;
pub mod theme;
pub mod widgets;

pub use app::{App, Options};
pub use components::runs::RunsOptions;
pub use run::{run, run_with_runs};
pub use theme::Theme;

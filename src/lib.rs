//! rmsweb: a terminal workbench and pipeline that trains compact web agents with the
//! RMSWeb recipe (reflection-conditioned collection, failure-mode mining of critical
//! steps, Salvage-DS offline RL after SFT).
//!
//! Data flows one way: collect → curate → mine → annotate → train → eval; every stage
//! reads and writes the dataset files described in `FORMATS.md`.

pub mod action;
pub mod annotate;
pub mod collect;
pub mod curate;
pub mod env;
pub mod eval;
pub mod export;
pub mod judge;
pub mod mine;
pub mod model;
pub mod policy;
pub mod recipe;
pub mod reward;
pub mod runs;
pub mod serve;
pub mod tasks;
pub mod train;
pub mod trajectory;
pub mod tui;
pub mod util;

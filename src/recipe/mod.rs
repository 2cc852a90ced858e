//! The RMSWeb recipe end to end as one resumable pipeline (`rmsweb recipe run`):
//! teacher collection with and without reflection on the same training seeds,
//! quality filter, flattening, SFT on each collection, evaluation on held-out
//! seeds, the SFT policy's own attempts joining the mining pool, mining, RL in every
//! variant (and seed) from the same SFT checkpoint, evaluation of each, and the
//! report ([`report`]).
//!
//! [`config`] is `recipe.toml` (its trainer sections checked by [`checks`]);
//! [`plan`] turns it into units with keys (hashes of their config and inputs);
//! [`pipeline`] runs the units whose records ([`record`]) are not current (all, or
//! those [`select`] picks);
//! [`steps`] holds each unit's work; [`layout`] says where everything lives in the
//! recipe folder, and [`folder`] keeps a run to a folder it made and to clearing
//! only what it wrote.

pub mod base;
pub mod checks;
pub mod config;
pub mod folder;
pub mod layout;
pub mod pipeline;
pub mod plan;
pub mod progress;
pub mod record;
pub mod report;
pub mod select;
pub mod steps;

pub use config::RecipeConfig;
pub use layout::{Layout, recipe_of_runs, runs_folder};
pub use pipeline::{Outcome, RunOptions, RunSummary, run};
pub use plan::Stage;

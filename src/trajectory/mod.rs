//! The data model, the dataset store and its importers.

pub mod import;
pub mod jsonl;
pub mod mark;
pub mod model;
pub mod show;
pub mod stats;
pub mod store;
pub mod validate;

pub use model::*;
pub use store::{Dataset, DatasetMeta, TrajectorySummary};

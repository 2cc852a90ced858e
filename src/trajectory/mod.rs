//! The data model, the dataset store and its importers.

pub mod import;
pub mod jsonl;
pub mod model;
pub mod store;

pub use model::*;
pub use store::{Dataset, DatasetMeta, TrajectorySummary};

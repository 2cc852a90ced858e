//! What a verl export wrote ([`VerlReport`]): returned by `export::verl` and read
//! by `export::verl_files` for the YAML and README it writes beside the data.

use serde::Serialize;
use std::path::PathBuf;

/// What an export wrote.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct VerlReport {
    pub out: PathBuf,
    pub prompts: String,
    pub train: usize,
    pub val: usize,
    pub train_tasks: usize,
    pub val_tasks: usize,
    pub images: usize,
    /// Rows exported without their screenshot (`--images` and no readable file).
    pub missing_images: usize,
    /// Prompts left out, with why.
    pub skipped: Vec<(String, String)>,
}

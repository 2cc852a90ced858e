//! One file per subcommand: its clap arguments and a `run` that calls the library.

pub mod annotate;
pub mod collect;
pub mod curate;
pub mod dataset;
pub mod dataset_arg;
pub mod eval;
pub mod export;
pub mod generate;
pub mod import;
pub mod judge;
pub mod live_tasks;
pub mod llm_args;
pub mod mine;
pub mod miniwob;
pub mod model;
pub mod recipe;
pub mod reward;
pub mod rl;
pub mod score;
pub mod serve;
pub mod tasks;
pub mod train;
pub mod verl;
pub mod workbench;

use std::path::PathBuf;

/// The bundled fixtures dataset: `./fixtures` when run from the repository, else the
/// one next to the sources this binary was built from.
pub fn default_dataset() -> PathBuf {
    let local = PathBuf::from("fixtures");
    if local.join("trajectories.jsonl").exists() {
        local
    } else {
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fixtures")
    }
}

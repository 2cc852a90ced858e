//! `rmsweb validate`, `rmsweb stats`, `rmsweb show`.

use std::path::{Path, PathBuf};

/// Arguments of `rmsweb validate`.
#[derive(clap::Args)]
pub struct ValidateArgs {
    /// Dataset folder.
    pub dataset: PathBuf,
}

/// Arguments of `rmsweb stats`.
#[derive(clap::Args)]
pub struct StatsArgs {
    /// Dataset folder.
    pub dataset: PathBuf,
    /// Print one JSON object.
    #[arg(long)]
    pub json: bool,
}

/// Arguments of `rmsweb show`.
#[derive(clap::Args)]
pub struct ShowArgs {
    /// Dataset folder.
    pub dataset: PathBuf,
    /// Trajectory id.
    pub trajectory: String,
    /// Step number (default 0).
    #[arg(long, default_value_t = 0)]
    pub step: usize,
}

/// Runs `validate`.
pub fn validate(_a: ValidateArgs) -> anyhow::Result<()> {
    anyhow::bail!("not built yet")
}

/// Runs `stats`.
pub fn stats(a: StatsArgs) -> anyhow::Result<()> {
    print_stats(&a.dataset, a.json)
}

/// Prints a dataset's statistics.
pub fn print_stats(dataset: &Path, _json: bool) -> anyhow::Result<()> {
    let ds = rmsweb::trajectory::Dataset::open(dataset)?;
    println!(
        "{}: {} tasks, {} trajectories",
        dataset.display(),
        ds.task_count(),
        ds.trajectory_count()
    );
    Ok(())
}

/// Runs `show`.
pub fn show(_a: ShowArgs) -> anyhow::Result<()> {
    anyhow::bail!("not built yet")
}

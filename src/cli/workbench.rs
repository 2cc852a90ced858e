//! `rmsweb` without a subcommand: the workbench (until it exists, the dataset's stats).

use std::path::PathBuf;

/// Options of the workbench.
#[derive(clap::Args)]
pub struct Args {
    /// Dataset folder to open (default: the bundled fixtures).
    #[arg(long)]
    pub dataset: Option<PathBuf>,
    /// Annotator name recorded with every annotation (default: $USER).
    #[arg(long, env = "USER")]
    pub annotator: Option<String>,
    /// Colour theme, a name from themes/ or a TOML file.
    #[arg(long)]
    pub theme: Option<String>,
}

/// Opens the workbench.
pub fn run(args: Args) -> anyhow::Result<()> {
    let dataset = args.dataset.unwrap_or_else(super::default_dataset);
    super::dataset::print_stats(&dataset, false)
}

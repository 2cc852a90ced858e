//! `rmsweb` without a subcommand: the workbench.

use rmsweb::tui::{Options, RunsOptions, Theme};
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
    /// Folder of training runs shown (and launched into) by the Runs tab.
    #[arg(long, default_value = "runs")]
    pub runs: PathBuf,
    /// Also watch this metrics file (verl's file-logger format), e.g. a verl run's;
    /// repeatable.
    #[arg(long = "watch", value_name = "FILE")]
    pub watch: Vec<PathBuf>,
}

/// Opens the workbench.
pub fn run(args: Args) -> anyhow::Result<()> {
    let dataset = args.dataset.unwrap_or_else(super::default_dataset);
    let theme = match &args.theme {
        Some(t) => Theme::load(t)?,
        None => Theme::load("dark")?,
    };
    let annotator = args
        .annotator
        .filter(|a| !a.trim().is_empty())
        .unwrap_or_else(|| "anonymous".into());
    rmsweb::tui::run_with_runs(
        Options {
            dataset,
            annotator,
            theme,
            picker: ratatui_image::picker::Picker::halfblocks(),
        },
        RunsOptions {
            root: Some(args.runs),
            watch: args.watch,
            ..Default::default()
        },
    )
}

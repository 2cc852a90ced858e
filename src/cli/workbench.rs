//! `rmsweb` without a subcommand: the workbench.

use rmsweb::tui::{Options, Theme};
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
    let theme = match &args.theme {
        Some(t) => Theme::load(t)?,
        None => Theme::load("dark")?,
    };
    let annotator = args
        .annotator
        .filter(|a| !a.trim().is_empty())
        .unwrap_or_else(|| "anonymous".into());
    rmsweb::tui::run(Options {
        dataset,
        annotator,
        theme,
        picker: ratatui_image::picker::Picker::halfblocks(),
    })
}

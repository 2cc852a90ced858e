//! `rmsweb` without a subcommand: the workbench.

use rmsweb::tui::{Options, RunsOptions, Theme};
use std::path::PathBuf;

/// Options of the workbench.
#[derive(clap::Args)]
pub struct Args {
    /// Dataset folder to open (default: the bundled fixtures, or the mining pool of
    /// a recipe folder given as `--runs`).
    #[arg(long)]
    pub dataset: Option<PathBuf>,
    /// Annotator name recorded with every annotation (default: $USER).
    #[arg(long, env = "USER")]
    pub annotator: Option<String>,
    /// Colour theme, a name from themes/ or a TOML file.
    #[arg(long)]
    pub theme: Option<String>,
    /// Folder of training runs shown (and launched into) by the Runs tab (default:
    /// `runs/` when it exists, else the dataset's own `runs/` when it has one — the
    /// bundled dataset's recorded runs —, else `runs/`, created by the first launch).
    /// A recipe folder (`rmsweb recipe run --out DIR`) shows its `runs/`.
    #[arg(long)]
    pub runs: Option<PathBuf>,
    /// Also watch this metrics file (verl's file-logger format), e.g. a verl run's;
    /// repeatable.
    #[arg(long = "watch", value_name = "FILE")]
    pub watch: Vec<PathBuf>,
    /// Leave the mouse to the terminal (its own text selection) instead of clicks
    /// on tabs and rows and wheel scrolling.
    #[arg(long)]
    pub no_mouse: bool,
}

/// Opens the workbench.
pub fn run(args: Args) -> anyhow::Result<()> {
    // A recipe folder opens its mining pool (trajectories and mined pairs) by default.
    let recipe_pool = args
        .runs
        .as_deref()
        .filter(|r| rmsweb::recipe::layout::is_recipe_folder(r))
        .map(|r| rmsweb::recipe::Layout::new(r).pool())
        .filter(|p| p.join("trajectories.jsonl").is_file());
    let dataset = match args.dataset.or(recipe_pool) {
        Some(d) => d,
        None => bundled_working_copy(),
    };
    let runs = args
        .runs
        .map(|r| rmsweb::recipe::runs_folder(&r))
        .unwrap_or_else(|| default_runs(std::path::Path::new(""), &dataset));
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
            root: Some(runs),
            watch: args.watch,
            ..Default::default()
        },
        !args.no_mouse,
    )
}

/// The bundled fixtures as the user's working copy in the data folder
/// (`~/.local/share/rmsweb/fixtures`), so that annotations and launched runs never
/// write into the source tree; the bundled folder itself (with a warning) when no
/// data folder can be made.
fn bundled_working_copy() -> PathBuf {
    let bundled = super::default_dataset();
    let Some(dest) = rmsweb::util::user_data::fixtures_copy_dir() else {
        rmsweb::util::report::warn(
            "no data folder ($XDG_DATA_HOME or $HOME): annotations go into the bundled fixtures",
        );
        return bundled;
    };
    match rmsweb::util::user_data::refresh_copy(&bundled, &dest) {
        Ok(d) => d,
        Err(e) => {
            rmsweb::util::report::warn(&format!(
                "{e:#}: annotations go into the bundled fixtures at {}",
                bundled.display()
            ));
            bundled
        }
    }
}

/// `CWD/runs` if it exists, else `DATASET/runs` if that exists, else `CWD/runs`
/// (`cwd` empty: relative to the working directory).
fn default_runs(cwd: &std::path::Path, dataset: &std::path::Path) -> PathBuf {
    let here = cwd.join("runs");
    let own = dataset.join("runs");
    if !here.is_dir() && own.is_dir() {
        own
    } else {
        here
    }
}

#[cfg(test)]
mod tests {
    use super::default_runs;

    #[test]
    fn runs_default_prefers_the_working_folder_then_the_datasets_own() {
        let cwd = tempfile::tempdir().unwrap();
        let ds = tempfile::tempdir().unwrap();
        // Neither exists: `runs/` here, where the first launch creates it.
        assert_eq!(default_runs(cwd.path(), ds.path()), cwd.path().join("runs"));
        // The dataset has recorded runs (the bundled fixtures do): show them.
        std::fs::create_dir(ds.path().join("runs")).unwrap();
        assert_eq!(default_runs(cwd.path(), ds.path()), ds.path().join("runs"));
        // A working `runs/` wins.
        std::fs::create_dir(cwd.path().join("runs")).unwrap();
        assert_eq!(default_runs(cwd.path(), ds.path()), cwd.path().join("runs"));
    }
}

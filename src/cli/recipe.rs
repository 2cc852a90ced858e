//! `rmsweb recipe`: the whole RMSWeb recipe as one resumable pipeline, its status,
//! and its report.

use anyhow::{Context, Result};
use rmsweb::recipe::plan::{Stage, plan};
use rmsweb::recipe::record::{read, stale_reason};
use rmsweb::recipe::select::Selection;
use rmsweb::recipe::{Layout, RecipeConfig, RunOptions};
use std::collections::BTreeMap;
use std::path::PathBuf;

/// Arguments of `rmsweb recipe`.
#[derive(clap::Args)]
pub struct Args {
    #[command(subcommand)]
    command: Command,
}

fn stages_help() -> String {
    let mut s = String::from("Stages, in order:\n");
    for st in Stage::ALL {
        s.push_str(&format!("  {:<12} {}\n", st.name(), st.about()));
    }
    s.push_str(
        "\n--stages also takes single units by the id `recipe status` lists\n\
         (`--stages sft/baseline,eval-sft/sft-baseline`: one arm's SFT and evaluation).\n",
    );
    s
}

#[derive(clap::Subcommand)]
enum Command {
    /// Runs the recipe into a folder; units whose outputs exist for the same config
    /// hash are skipped, a changed section re-runs its stage and everything downstream.
    #[command(after_help = stages_help())]
    Run(RunArgs),
    /// Lists every unit of the recipe and whether it is up to date (nothing runs).
    Status(StatusArgs),
    /// Renders report.md, report.json and the figures again from what is there.
    Report {
        /// The recipe folder.
        #[arg(long)]
        out: PathBuf,
    },
}

#[derive(clap::Args)]
struct RunArgs {
    /// Recipe config (default: ./recipe.toml, else the one shipped with rmsweb).
    #[arg(long)]
    config: Option<PathBuf>,
    /// The recipe folder (created if missing; reused to resume).
    #[arg(long)]
    out: PathBuf,
    /// Only these stages or units (ids as `recipe status` lists them), comma-separated
    /// (see below); the others must be up to date where a selected unit needs them.
    #[arg(long)]
    stages: Option<String>,
}

#[derive(clap::Args)]
struct StatusArgs {
    /// Recipe config (default: ./recipe.toml, else the one shipped with rmsweb).
    #[arg(long)]
    config: Option<PathBuf>,
    /// The recipe folder.
    #[arg(long)]
    out: PathBuf,
}

/// `./recipe.toml`, else the one next to the sources this binary was built from.
fn default_config() -> PathBuf {
    let local = PathBuf::from(rmsweb::recipe::layout::CONFIG_FILE);
    if local.is_file() {
        local
    } else {
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(rmsweb::recipe::layout::CONFIG_FILE)
    }
}

fn load(config: Option<PathBuf>) -> Result<RecipeConfig> {
    RecipeConfig::load(&config.unwrap_or_else(default_config))
}

/// Runs the subcommand.
pub fn run(args: Args) -> Result<()> {
    match args.command {
        Command::Run(a) => {
            let cfg = load(a.config)?;
            let select = match a.stages.as_deref() {
                Some(list) => Some(Selection::parse(list, &plan(&cfg)?)?),
                None => None,
            };
            let opts = RunOptions {
                out: a.out,
                select,
                exe: std::env::current_exe().context("finding the rmsweb binary")?,
                bars: true,
            };
            rmsweb::recipe::run(&cfg, &opts)?;
            Ok(())
        }
        Command::Status(a) => {
            let cfg = load(a.config)?;
            let layout = Layout::new(a.out);
            let mut tokens = BTreeMap::new();
            for u in plan(&cfg)? {
                let state = match stale_reason(&layout, &u, &tokens) {
                    None => "up to date".to_string(),
                    Some(why) => format!("to run: {why}"),
                };
                println!("{:<36} {:<12} {state}", u.id, u.key);
                if let Some(r) = read(&layout, &u.id) {
                    tokens.insert(u.id.clone(), r.token);
                }
            }
            Ok(())
        }
        Command::Report { out } => {
            let layout = Layout::new(rmsweb::recipe::folder::existing(&out)?);
            let files = rmsweb::recipe::report::render(&layout)?;
            for f in files {
                println!("wrote {}", f.display());
            }
            Ok(())
        }
    }
}

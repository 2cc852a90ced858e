//! `rmsweb reward` (not built yet: its issue is in progress).

/// Arguments of `rmsweb reward`.
#[derive(clap::Args)]
pub struct Args {}

/// Runs the subcommand.
pub fn run(_args: Args) -> anyhow::Result<()> {
    anyhow::bail!("`rmsweb reward` is not built yet")
}

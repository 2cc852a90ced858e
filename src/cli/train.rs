//! `rmsweb train` (not built yet: its issue is in progress).

/// Arguments of `rmsweb train`.
#[derive(clap::Args)]
pub struct Args {}

/// Runs the subcommand.
pub fn run(_args: Args) -> anyhow::Result<()> {
    anyhow::bail!("`rmsweb train` is not built yet")
}

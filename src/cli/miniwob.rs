//! `rmsweb miniwob` (not built yet: its issue is in progress).

/// Arguments of `rmsweb miniwob`.
#[derive(clap::Args)]
pub struct Args {}

/// Runs the subcommand.
pub fn run(_args: Args) -> anyhow::Result<()> {
    anyhow::bail!("`rmsweb miniwob` is not built yet")
}

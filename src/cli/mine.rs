//! `rmsweb mine` (not built yet: its issue is in progress).

/// Arguments of `rmsweb mine`.
#[derive(clap::Args)]
pub struct Args {}

/// Runs the subcommand.
pub fn run(_args: Args) -> anyhow::Result<()> {
    anyhow::bail!("`rmsweb mine` is not built yet")
}

//! `rmsweb import` (not built yet: its issue is in progress).

/// Arguments of `rmsweb import`.
#[derive(clap::Args)]
pub struct Args {}

/// Runs the subcommand.
pub fn run(_args: Args) -> anyhow::Result<()> {
    anyhow::bail!("`rmsweb import` is not built yet")
}

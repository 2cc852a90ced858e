//! `rmsweb eval` (not built yet: its issue is in progress).

/// Arguments of `rmsweb eval`.
#[derive(clap::Args)]
pub struct Args {}

/// Runs the subcommand.
pub fn run(_args: Args) -> anyhow::Result<()> {
    anyhow::bail!("`rmsweb eval` is not built yet")
}

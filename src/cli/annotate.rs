//! `rmsweb annotate` (not built yet: its issue is in progress).

/// Arguments of `rmsweb annotate`.
#[derive(clap::Args)]
pub struct Args {}

/// Runs the subcommand.
pub fn run(_args: Args) -> anyhow::Result<()> {
    anyhow::bail!("`rmsweb annotate` is not built yet")
}

//! `rmsweb rl groups`: gate decisions, advantages and the salvage count for given
//! reward groups (FORMATS.md, "Command-line JSON interfaces").

use anyhow::Context;
use rmsweb::train::rl::groups::{
    GateConfig, GateDecision, GroupStats, Mode, advantages, decide, parse_group_line, salvage_count,
};
use rmsweb::util::lines::{BoundedLines, Line};
use rmsweb::util::sanitize::clean_line;
use serde_json::json;
use std::io::{BufRead, Write};
use std::path::PathBuf;

/// Arguments of `rmsweb rl`.
#[derive(clap::Args)]
pub struct Args {
    #[command(subcommand)]
    command: Command,
}

#[derive(clap::Subcommand)]
enum Command {
    /// Read `{"group": id, "rewards": [..]}` lines; print one decision line per group,
    /// then a summary line with the salvage count S.
    Groups(GroupsArgs),
    /// Each mined state's route over the run's steps (competence-rejected, accepted,
    /// mastered, salvaged), its best-of-n and mean reward, and the phase shares.
    Curriculum(CurriculumArgs),
}

#[derive(clap::Args)]
struct CurriculumArgs {
    /// RL run folder (with rollouts.jsonl).
    run: PathBuf,
    /// Print one JSON object.
    #[arg(long)]
    json: bool,
}

#[derive(clap::Args)]
struct GroupsArgs {
    /// JSON Lines file of reward groups (`-` for standard input).
    file: PathBuf,
    /// ε_σ: groups with population std ≤ this are rejected (no contrast).
    #[arg(long, default_value_t = 0.10, value_parser = non_negative)]
    eps_sigma: f64,
    /// r_comp: groups whose best reward is below this are rejected (no competent rollout).
    #[arg(long, default_value_t = 0.55, value_parser = finite)]
    r_comp: f64,
    /// Which variant's filtering to apply.
    #[arg(long, value_enum, default_value = "salvage-ds")]
    mode: Mode,
}

/// Runs the subcommand.
pub fn run(args: Args) -> anyhow::Result<()> {
    match args.command {
        Command::Groups(a) => groups(a),
        Command::Curriculum(a) => {
            let c = rmsweb::runs::curriculum::curriculum(&a.run)?;
            if a.json {
                println!("{}", serde_json::to_string(&c)?);
            } else {
                print!("{}", c.render());
            }
            Ok(())
        }
    }
}

/// Counts of `rl groups`' decisions so far.
#[derive(Default)]
struct Tally {
    total: usize,
    accepted: usize,
    std_gate: usize,
    comp_gate: usize,
    failed: usize,
}

impl Tally {
    /// Decides the group read from line `n` (or counts its error) and returns the
    /// line's JSON record.
    fn decide(
        &mut self,
        n: usize,
        parsed: Result<(serde_json::Value, Vec<f64>), String>,
        cfg: &GateConfig,
    ) -> serde_json::Value {
        let (id, rewards) = match parsed {
            Ok(g) => g,
            Err(e) => {
                self.failed += 1;
                return json!({"line": n, "error": clean_line(&e)});
            }
        };
        let Some(st) = GroupStats::of(&rewards) else {
            self.failed += 1;
            let e = "field `rewards`: needs at least one finite number";
            return json!({"line": n, "error": e});
        };
        self.total += 1;
        let d = decide(&st, cfg);
        let mut rec = json!({"group": id, "mean": st.mean, "std": st.std, "max": st.max,
            "decision": d});
        match d {
            GateDecision::Accepted => {
                self.accepted += 1;
                rec["advantages"] = json!(advantages(&rewards, &st));
            }
            GateDecision::StdGate => self.std_gate += 1,
            GateDecision::CompetenceGate => self.comp_gate += 1,
        }
        rec
    }
}

fn groups(a: GroupsArgs) -> anyhow::Result<()> {
    let cfg = GateConfig {
        eps_sigma: a.eps_sigma,
        r_comp: a.r_comp,
        mode: a.mode,
    };
    let reader: Box<dyn BufRead> = if a.file.as_os_str() == "-" {
        Box::new(std::io::stdin().lock())
    } else {
        Box::new(std::io::BufReader::new(
            rmsweb::util::fs::open_regular(&a.file)
                .with_context(|| format!("opening {}", a.file.display()))?,
        ))
    };
    let mut out = std::io::stdout().lock();
    let mut tally = Tally::default();
    let mut lines = BoundedLines::new(reader, MAX_LINE_BYTES);
    let mut n = 0;
    while let Some(line) = lines
        .next_line()
        .with_context(|| format!("{}:{}: reading", a.file.display(), n + 1))?
    {
        n += 1;
        let parsed = match line {
            Line::Text(t) if t.trim().is_empty() => continue,
            Line::Text(t) => parse_group_line(&t),
            Line::NotUtf8(at) => Err(format!("not UTF-8 (byte {at} of the line)")),
            Line::TooLong(len) => Err(format!(
                "the line is {len} bytes, over the {MAX_LINE_BYTES}-byte limit of a group"
            )),
        };
        writeln!(out, "{}", tally.decide(n, parsed, &cfg))?;
    }
    let salvage = if cfg.mode.salvages() {
        salvage_count(tally.std_gate + tally.comp_gate)
    } else {
        0
    };
    writeln!(
        out,
        "{}",
        json!({"summary": {"groups": tally.total, "accepted": tally.accepted,
            "std_gate": tally.std_gate, "competence_gate": tally.comp_gate, "salvage": salvage}})
    )?;
    let failed = tally.failed;
    if failed > 0 {
        let name = if a.file.as_os_str() == "-" {
            "standard input".to_string()
        } else {
            a.file.display().to_string()
        };
        anyhow::bail!("{failed} lines of {name} could not be read");
    }
    Ok(())
}

/// Longest input line read (a group of a few thousand rewards is a few KiB).
const MAX_LINE_BYTES: usize = 16 << 20;

fn finite(s: &str) -> Result<f64, String> {
    let v: f64 = s
        .parse()
        .map_err(|e| format!("`{s}` is not a number: {e}"))?;
    if !v.is_finite() {
        return Err(format!("`{s}` is not a finite number"));
    }
    Ok(v)
}

fn non_negative(s: &str) -> Result<f64, String> {
    let v = finite(s)?;
    if v < 0.0 {
        return Err(format!("`{s}` is negative; a std threshold is at least 0"));
    }
    Ok(v)
}

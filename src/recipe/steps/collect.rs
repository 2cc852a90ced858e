//! Collection: the scripted teacher on the training seeds (with and without
//! reflection, each into its own dataset), and the SFT policy's attempts on the same
//! seeds into the mining pool.
//!
//! The pool (`data/pool`) starts as a copy of the reflection collection (records
//! copied, screenshots hard-linked), gets the SFT policy's attempts appended, and
//! then the reflection collection's curated `sft/` files (copied last, so they are
//! newer than the trajectories and read as current): the pool's SFT corpus — the
//! RL full-corpus prompts — is the teacher corpus the SFT policy was trained on; the
//! SFT policy's attempts are there for the miner, which pairs them with the
//! teacher's successes on the same instance (task id).

use super::{Ctx, Done, Players, Stoppable, local_policy};
use crate::collect::parallel::{Worker, collect_parallel};
use crate::collect::{CollectConfig, CollectReport, HeuristicReflector, collect, known_shortest};
use crate::curate::FILTER_FILE;
use crate::policy::scripted::{MistakeRates, ScriptedTeacher};
use crate::recipe::folder::clear;
use crate::recipe::layout::sft_run_name;
use crate::recipe::plan::Arm;
use crate::train::run::RunDir;
use crate::trajectory::Dataset;
use anyhow::{Context, Result};
use std::path::Path;

fn run_collection(
    ctx: &mut Ctx<'_>,
    unit: &str,
    players: Players,
    cfg: &CollectConfig,
    dataset: &mut Dataset,
) -> Result<CollectReport> {
    let bar = ctx
        .progress
        .unit_bar(unit, (cfg.tasks.len() * cfg.seeds) as u64, "seeds");
    let rounds = cfg.rounds as u32;
    let (mut attempts, mut ok) = (0usize, 0usize);
    let mut on_attempt = |a: &crate::collect::AttemptRecord| {
        attempts += 1;
        ok += usize::from(a.success);
        bar.set_message(format!(
            "{} s{} round {}: {ok}/{attempts} attempts ok",
            crate::util::sanitize::clean_line(&a.task),
            a.seed,
            a.round
        ));
        if a.ends_seed(rounds) {
            bar.inc(1);
        }
    };
    let report = match players {
        Players::One(policy) => {
            let mut stoppable = Stoppable {
                inner: policy,
                stop: ctx.stop.clone(),
            };
            let env = ctx.env()?;
            collect(
                env,
                &mut stoppable,
                &mut HeuristicReflector,
                cfg,
                Some(dataset),
                &mut on_attempt,
            )
        }
        Players::SideBySide(mut policies) => {
            let mut reflectors = vec![HeuristicReflector; policies.len()];
            let tabs = ctx.tabs(policies.len())?;
            let workers = tabs
                .iter_mut()
                .zip(policies.iter_mut())
                .zip(reflectors.iter_mut())
                .map(|((env, policy), reflector)| Worker {
                    env,
                    policy: policy.as_mut(),
                    reflector,
                })
                .collect();
            collect_parallel(workers, cfg, Some(dataset), &mut on_attempt)
        }
    };
    bar.finish_and_clear();
    let report = report?;
    ctx.check_stop()?;
    Ok(report)
}

fn write_report(path: &Path, report: &CollectReport) -> Result<()> {
    let text = serde_json::to_string_pretty(report)?;
    crate::util::fs::write_atomic(path, text.as_bytes())
}

fn summary(r: &CollectReport) -> serde_json::Value {
    serde_json::json!({
        "seeds": r.seeds_total,
        "seeds_solved": r.seeds_solved,
        "yield": r.yield_rate,
        "attempts": r.attempts_total,
        "successes": r.successes_total,
        "mean_steps_kept": r.mean_steps_kept,
        "elapsed_s": r.elapsed_s,
    })
}

/// The scripted teacher on the training seeds, with reflection or without.
pub fn teacher(ctx: &mut Ctx<'_>, unit: &str, arm: Arm) -> Result<Done> {
    let recipe = ctx.cfg;
    let c = &recipe.collect;
    let root = ctx.layout.dataset(arm);
    let report_path = ctx.layout.collect_report(arm.name());
    clear(ctx.layout, &root)?;
    clear(ctx.layout, &report_path)?;
    let mut ds = Dataset::create(
        &root,
        &format!("recipe-{}", arm.name()),
        &format!(
            "rmsweb recipe: scripted teacher (mistake rate {}), {} rounds, reflection {}",
            c.mistake_rate,
            c.rounds,
            if arm == Arm::Reflection { "on" } else { "off" }
        ),
    )?;
    let cfg = CollectConfig {
        tasks: recipe.tasks.clone(),
        seeds: c.seeds,
        seed_start: c.seed_start,
        rounds: c.rounds,
        detour_factor: c.detour_factor,
        known_shortest: Default::default(),
        reflection: arm == Arm::Reflection,
        max_steps: c.max_steps,
        judge: None,
    };
    let teacher =
        ScriptedTeacher::new(MistakeRates::uniform(c.mistake_rate)).with_thinking(c.thinking);
    let report = run_collection(ctx, unit, Players::One(Box::new(teacher)), &cfg, &mut ds)?;
    write_report(&report_path, &report)?;
    Ok(Done {
        outputs: vec![
            root.join("trajectories.jsonl"),
            root.join("tasks.jsonl"),
            report_path,
        ],
        summary: summary(&report),
    })
}

/// Hard-links (or copies, across file systems) every file under `from` into `to`.
fn link_tree(from: &Path, to: &Path) -> Result<()> {
    if !from.is_dir() {
        return Ok(());
    }
    std::fs::create_dir_all(to).with_context(|| format!("creating {}", to.display()))?;
    for e in std::fs::read_dir(from).with_context(|| format!("reading {}", from.display()))? {
        let e = e?;
        let (src, dst) = (e.path(), to.join(e.file_name()));
        if e.file_type()?.is_dir() {
            link_tree(&src, &dst)?;
        } else if std::fs::hard_link(&src, &dst).is_err() {
            std::fs::copy(&src, &dst)
                .with_context(|| format!("copying {} to {}", src.display(), dst.display()))?;
        }
    }
    Ok(())
}

fn copy(from: &Path, to: &Path) -> Result<()> {
    if let Some(d) = to.parent() {
        std::fs::create_dir_all(d)?;
    }
    std::fs::copy(from, to)
        .with_context(|| format!("copying {} to {}", from.display(), to.display()))?;
    Ok(())
}

/// The latest checkpoint of a finished run folder.
pub fn latest_checkpoint(run: &Path) -> Result<std::path::PathBuf> {
    RunDir::open(run)?
        .latest_checkpoint()
        .map(|(_, p)| p)
        .ok_or_else(|| anyhow::anyhow!("{}: no checkpoint", run.display()))
}

/// The SFT policy (trained on the reflection collection) on the training seeds,
/// into the mining pool.
pub fn sft_policy(ctx: &mut Ctx<'_>, unit: &str) -> Result<Done> {
    let source = ctx.layout.dataset(Arm::Reflection);
    let pool = ctx.layout.pool();
    let report_path = ctx.layout.collect_report("sft-policy");
    clear(ctx.layout, &pool)?;
    clear(ctx.layout, &report_path)?;
    std::fs::create_dir_all(&pool).with_context(|| format!("creating {}", pool.display()))?;
    for f in ["tasks.jsonl", "trajectories.jsonl"] {
        copy(&source.join(f), &pool.join(f))?;
    }
    link_tree(&source.join("screenshots"), &pool.join("screenshots"))?;
    let mut ds = Dataset::create(
        &pool,
        "recipe-pool",
        "rmsweb recipe mining pool: the reflection collection and the SFT policy's attempts",
    )?;
    let checkpoint = latest_checkpoint(&ctx.layout.run(&sft_run_name(Arm::Reflection)))?;
    let recipe = ctx.cfg;
    let s = &recipe.sft_collect;
    let policy = local_policy(
        &checkpoint,
        &recipe.eval.device,
        s.temperature,
        s.max_new_tokens,
        &recipe.flatten,
        s.grounded,
        &sft_run_name(Arm::Reflection),
    )?;
    let c = &recipe.collect;
    let cfg = CollectConfig {
        tasks: recipe.tasks.clone(),
        seeds: s.seeds.unwrap_or(c.seeds),
        seed_start: c.seed_start,
        rounds: s.rounds,
        detour_factor: c.detour_factor,
        known_shortest: known_shortest(&ds)?,
        reflection: s.reflection,
        max_steps: s.max_steps,
        judge: None,
    };
    let players = Players::of(policy, recipe.eval.parallel, &ctx.stop)?;
    let report = run_collection(ctx, unit, players, &cfg, &mut ds)?;
    write_report(&report_path, &report)?;
    // Last, so that they are newer than the appended trajectories (see module docs).
    for f in [FILTER_FILE, "sft/samples.jsonl"] {
        copy(&source.join(f), &pool.join(f))?;
    }
    let mut sum = summary(&report);
    sum["checkpoint"] = ctx.layout.relative(&checkpoint).into();
    sum["pool_trajectories"] = Dataset::open(&pool)?.trajectory_count().into();
    Ok(Done {
        outputs: vec![
            pool.join("trajectories.jsonl"),
            pool.join("sft/samples.jsonl"),
            report_path,
        ],
        summary: sum,
    })
}

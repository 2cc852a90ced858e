//! Evaluation of a trained policy on the held-out seeds: `eval/<name>.json` (the
//! harness's report) and, when `eval.save_episodes` is on, every episode as a
//! dataset in `eval/<name>/`. An RL run's checkpoint can first be chosen on
//! validation seeds (`rl.validation`): each complete checkpoint's report goes to
//! `eval/validation/<name>/step-N.json`.

use super::collect::latest_checkpoint;
use super::{Ctx, Done, Players, Stoppable, local_policy};
use crate::eval::{EvalConfig, EvalReport, evaluate, write_report};
use crate::recipe::folder::clear;
use crate::recipe::layout::BASE_EVAL;
use crate::train::run::RunDir;
use crate::trajectory::Dataset;
use anyhow::{Context, Result};
use std::path::{Path, PathBuf};

/// Evaluates the latest checkpoint of run folder `runs/<name>` on the held-out seeds.
pub fn run(ctx: &mut Ctx<'_>, unit: &str, name: &str) -> Result<Done> {
    let checkpoint = latest_checkpoint(&ctx.layout.run(name))?;
    held_out(ctx, unit, name, &checkpoint, None)
}

/// Evaluates the pretrained base model zero-shot on the held-out seeds
/// (`eval/base.json`): the prompt the SFT policies see, no training.
pub fn base(ctx: &mut Ctx<'_>, unit: &str) -> Result<Done> {
    let b = ctx
        .cfg
        .base_model()?
        .context("the eval-base stage needs `[model] source`")?;
    let folder = b.folder(&ctx.layout.model());
    held_out(ctx, unit, BASE_EVAL, &folder, None)
}

/// Evaluates an RL run: its checkpoint chosen on the validation seeds when
/// `rl.validation.episodes` is set, else its latest.
pub fn rl(ctx: &mut Ctx<'_>, unit: &str, name: &str) -> Result<Done> {
    let v = ctx.cfg.rl.validation.clone();
    if v.episodes == 0 {
        return run(ctx, unit, name);
    }
    let checkpoints = RunDir::open(ctx.layout.run(name))?.complete_checkpoints();
    anyhow::ensure!(
        !checkpoints.is_empty(),
        "{}: no checkpoint",
        ctx.layout.run(name).display()
    );
    let dir = ctx.layout.validation_reports(name);
    clear(ctx.layout, &dir)?;
    let mut scores = Vec::new();
    for (step, path) in &checkpoints {
        let label = format!("{unit} validation step {step}");
        let report = episodes(ctx, &label, name, path, v.seed_start, v.episodes, None)?;
        write_report(&dir.join(format!("step-{step}.json")), &report)?;
        scores.push((*step, path.clone(), report.pass_at_1));
    }
    let (step, path, _) = choose(&scores).cloned().context("no validation score")?;
    let selection = serde_json::json!({
        "seed_start": v.seed_start,
        "episodes": v.episodes,
        "chosen": step,
        "steps": scores
            .iter()
            .map(|(s, _, p)| serde_json::json!({ "step": s, "pass1": p }))
            .collect::<Vec<_>>(),
    });
    let mut done = held_out(ctx, unit, name, &path, Some(selection))?;
    done.outputs.push(dir);
    Ok(done)
}

/// The best validation score; ties go to the earlier step (the one nearer the SFT
/// policy). `scores` is by step.
fn choose(scores: &[(u64, PathBuf, f64)]) -> Option<&(u64, PathBuf, f64)> {
    scores
        .iter()
        .reduce(|best, c| if c.2 > best.2 { c } else { best })
}

/// The held-out evaluation of `checkpoint`, its report and (when on) its episodes.
fn held_out(
    ctx: &mut Ctx<'_>,
    unit: &str,
    name: &str,
    checkpoint: &Path,
    selection: Option<serde_json::Value>,
) -> Result<Done> {
    let e = ctx.cfg.eval.clone();
    let report_path = ctx.layout.eval_report(name);
    let ds_path = ctx.layout.eval_dataset(name);
    clear(ctx.layout, &report_path)?;
    clear(ctx.layout, &ds_path)?;
    let mut dataset = if e.save_episodes {
        Some(Dataset::create(
            &ds_path,
            &format!("recipe-eval-{name}"),
            "rmsweb recipe: held-out evaluation episodes",
        )?)
    } else {
        None
    };
    let report = episodes(
        ctx,
        unit,
        name,
        checkpoint,
        e.seed_start,
        e.episodes,
        dataset.as_mut(),
    )?;
    write_report(&report_path, &report)?;
    let mut outputs = vec![report_path];
    if e.save_episodes {
        outputs.push(ds_path.join("trajectories.jsonl"));
    }
    let mut summary = serde_json::json!({
        "pass1": report.pass_at_1,
        "episodes": report.episodes_total,
        "steps_solved": report.mean_steps_solved,
        "checkpoint": ctx.layout.relative(checkpoint),
    });
    if let Some(s) = selection {
        summary["validation"] = s;
    }
    Ok(Done { outputs, summary })
}

/// `episodes` seeds from `seed_start` of every task type with the policy at
/// `checkpoint`, under a progress bar labelled `label`.
fn episodes(
    ctx: &mut Ctx<'_>,
    label: &str,
    name: &str,
    checkpoint: &Path,
    seed_start: u64,
    episodes: usize,
    dataset: Option<&mut Dataset>,
) -> Result<EvalReport> {
    let recipe = ctx.cfg;
    let e = &recipe.eval;
    let policy = local_policy(
        checkpoint,
        &e.device,
        e.temperature,
        e.max_new_tokens,
        &recipe.flatten,
        e.grounded,
        name,
    )?;
    let cfg = EvalConfig {
        tasks: recipe.tasks.clone(),
        episodes,
        k: 1,
        seed: seed_start,
        max_steps: e.max_steps,
        reflection: None,
        judge: None,
    };
    let bar = ctx
        .progress
        .unit_bar(label, (cfg.tasks.len() * cfg.episodes) as u64, "episodes");
    let (mut done, mut solved) = (0usize, 0usize);
    let mut on_episode = |r: &crate::eval::EpisodeRecord| {
        done += 1;
        solved += usize::from(r.success);
        bar.set_message(format!(
            "{} pass@1 {solved}/{done}",
            crate::util::sanitize::clean_line(&r.task)
        ));
        bar.inc(1);
    };
    let report = match Players::of(policy, e.parallel, &ctx.stop)? {
        Players::SideBySide(policies) => {
            let tabs = ctx.tabs(policies.len())?;
            crate::eval::parallel::evaluate_parallel(tabs, policies, &cfg, dataset, &mut on_episode)
        }
        Players::One(policy) => {
            let mut stoppable = Stoppable {
                inner: policy,
                stop: ctx.stop.clone(),
            };
            evaluate(ctx.env()?, &mut stoppable, &cfg, dataset, &mut on_episode)
        }
    };
    bar.finish_and_clear();
    let report = report?;
    ctx.check_stop()?;
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_best_validation_score_wins_and_ties_go_to_the_earlier_step() {
        let s = |v: &[(u64, f64)]| -> Vec<(u64, PathBuf, f64)> {
            v.iter().map(|(a, b)| (*a, PathBuf::new(), *b)).collect()
        };
        assert_eq!(
            choose(&s(&[(10, 0.5), (20, 0.7), (30, 0.6)])).unwrap().0,
            20
        );
        assert_eq!(
            choose(&s(&[(10, 0.6), (20, 0.6), (30, 0.4)])).unwrap().0,
            10
        );
        assert_eq!(choose(&s(&[(10, 0.1)])).unwrap().0, 10);
        assert!(choose(&[]).is_none());
    }
}

//! Evaluation of a trained policy on the held-out seeds: `eval/<name>.json` (the
//! harness's report) and, when `eval.save_episodes` is on, every episode as a
//! dataset in `eval/<name>/`.

use super::collect::latest_checkpoint;
use super::{Ctx, Done, Stoppable, local_policy, remove_path};
use crate::eval::{EvalConfig, evaluate, write_report};
use crate::trajectory::Dataset;
use anyhow::Result;

/// Evaluates the latest checkpoint of run folder `runs/<name>`.
pub fn run(ctx: &mut Ctx<'_>, unit: &str, name: &str) -> Result<Done> {
    let recipe = ctx.cfg;
    let e = &recipe.eval;
    let checkpoint = latest_checkpoint(&ctx.layout.run(name))?;
    let report_path = ctx.layout.eval_report(name);
    let ds_path = ctx.layout.eval_dataset(name);
    remove_path(&report_path)?;
    remove_path(&ds_path)?;
    let mut policy = local_policy(
        &checkpoint,
        &e.device,
        e.temperature,
        e.max_new_tokens,
        recipe.flatten.token_budget,
        e.grounded,
        name,
    )?;
    let mut dataset = if e.save_episodes {
        Some(Dataset::create(
            &ds_path,
            &format!("recipe-eval-{name}"),
            "rmsweb recipe: held-out evaluation episodes",
        )?)
    } else {
        None
    };
    let cfg = EvalConfig {
        tasks: recipe.tasks.clone(),
        episodes: e.episodes,
        k: 1,
        seed: e.seed_start,
        max_steps: e.max_steps,
        reflection: None,
    };
    let bar = ctx
        .progress
        .unit_bar(unit, (cfg.tasks.len() * cfg.episodes) as u64, "episodes");
    let stop = ctx.stop.clone();
    let mut stoppable = Stoppable {
        inner: &mut policy,
        stop: &stop,
    };
    let (mut done, mut solved) = (0usize, 0usize);
    let env = ctx.env()?;
    let report = evaluate(env, &mut stoppable, &cfg, dataset.as_mut(), &mut |r| {
        done += 1;
        solved += usize::from(r.success);
        bar.set_message(format!(
            "{} pass@1 {solved}/{done}",
            crate::util::sanitize::clean_line(&r.task)
        ));
        bar.inc(1);
    });
    bar.finish_and_clear();
    let report = report?;
    ctx.check_stop()?;
    write_report(&report_path, &report)?;
    let mut outputs = vec![report_path];
    if e.save_episodes {
        outputs.push(ds_path.join("trajectories.jsonl"));
    }
    Ok(Done {
        outputs,
        summary: serde_json::json!({
            "pass1": report.pass_at_1,
            "episodes": report.episodes_total,
            "steps_solved": report.mean_steps_solved,
            "checkpoint": ctx.layout.relative(&checkpoint),
        }),
    })
}

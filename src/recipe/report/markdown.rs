//! `report.md`: the tables of the report (Table 2 and Table 3 analogs, yield per
//! round, mining, training dynamics, time per stage) and links to the figures.

use super::data::Inputs;
use super::stats::steps_saved;
use super::summary::{Analysis, DYNAMICS, PolicyResult, ReflectionArm, policy_arm, trend};
use crate::eval::compare::mcnemar_exact;
use crate::policy::scripted::REFLECTION_MISTAKE_FACTOR;
use crate::recipe::config::EvalSection;
use crate::recipe::plan::Stage;
use crate::util::duration::human_time;
use std::fmt::Write;

fn f3(v: Option<f64>) -> String {
    v.map_or("–".into(), |x| format!("{x:.3}"))
}

fn f2(v: Option<f64>) -> String {
    v.map_or("–".into(), |x| format!("{x:.2}"))
}

fn ci(p: &PolicyResult) -> String {
    p.ci.map_or("–".into(), |(lo, hi)| format!("[{lo:.3}, {hi:.3}]"))
}

fn pct(v: Option<f64>) -> String {
    v.map_or("–".into(), |x| format!("{:.1}%", 100.0 * x))
}

fn delta(p: &PolicyResult, base: &PolicyResult) -> String {
    match (p.pass1, base.pass1) {
        (Some(a), Some(b)) => format!("{:+.3}", a - b),
        _ => "–".into(),
    }
}

/// `first–last` of `n` seeds from `first`.
fn seed_span(first: u64, n: usize) -> String {
    match n {
        0 => "none".into(),
        1 => first.to_string(),
        _ => format!("{first}–{}", first + n as u64 - 1),
    }
}

/// How the evaluations decoded: greedy or sampled, free or grounded.
fn decoding(e: &EvalSection) -> String {
    format!(
        "{}, {}",
        if e.temperature > 0.0 {
            format!("sampled at temperature {}", e.temperature)
        } else {
            "greedy".into()
        },
        if e.grounded {
            "grounded (`eval.grounded`: every answer is decoded under a schema that allows \
             only the element indices the prompt shows and typed values that stand in the \
             instruction)"
        } else {
            "free (the model's own tokens; `eval.grounded` is off)"
        }
    )
}

fn table2(out: &mut String, a: &Analysis, inputs: &Inputs) {
    let seeds = &inputs.cfg.rl.seeds;
    let _ = writeln!(out, "## Table 2 analog: pass@1 on held-out seeds\n");
    let _ = writeln!(
        out,
        "Seeds {} of every task type ({} episodes per type), never used for training \
         or mining. RL variants start from the SFT policy of the reflection collection; \
         each runs with RL seed{} {} and pools their episodes. 95% intervals are Wilson \
         score intervals.\n",
        seed_span(a.eval_seeds.0, a.eval_seeds.1),
        a.eval_seeds.1,
        if seeds.len() == 1 { "" } else { "s" },
        seeds
            .iter()
            .map(u64::to_string)
            .collect::<Vec<_>>()
            .join(", ")
    );
    let _ = writeln!(out, "Decoding: {}.\n", decoding(&inputs.cfg.eval));
    let _ = writeln!(
        out,
        "| policy | pass@1 | 95% interval | episodes | vs SFT | lost / gained (p) | steps on solved |\n|---|---|---|---|---|---|---|"
    );
    let mut rows: Vec<(&str, &PolicyResult)> = Vec::new();
    if let Some(b) = &a.base {
        rows.push(("base (zero-shot)", b));
    }
    rows.push(("SFT", &a.sft));
    for r in &a.rl {
        rows.push((r.name.as_str(), r));
    }
    for (label, p) in rows {
        let _ = writeln!(
            out,
            "| {label} | {} | {} | {} | {} | {} | {} |",
            f3(p.pass1),
            ci(p),
            p.episodes,
            if std::ptr::eq(p, &a.sft) {
                "–".into()
            } else {
                delta(p, &a.sft)
            },
            match p.vs_sft {
                Some((lost, gained)) => {
                    format!("{lost} / {gained} ({:.3})", mcnemar_exact(lost, gained))
                }
                None => "–".into(),
            },
            f2(p.steps_solved)
        );
    }
    let _ = writeln!(
        out,
        "\nlost / gained: held-out episodes the SFT policy solved and the variant did not, \
         and the reverse, paired by task and seed (summed over RL seeds, each against the \
         same SFT episodes); p: McNemar's exact two-sided test on them. An unchanged \
         pass@1 can hide solved episodes traded for others (`rmsweb eval compare`)."
    );
    if seeds.len() > 1 {
        per_seed_table(out, a, seeds);
    }
    per_task_table(out, a);
    let _ = writeln!(out);
}

/// Pass@1 and episodes of each RL variant per RL seed.
fn per_seed_table(out: &mut String, a: &Analysis, seeds: &[u64]) {
    let _ = writeln!(out, "\nPer RL seed (pass@1, episodes):\n");
    let _ = write!(out, "| variant |");
    for s in seeds {
        let _ = write!(out, " seed {s} |");
    }
    let _ = writeln!(out, "\n|---|{}", "---|".repeat(seeds.len()));
    for r in &a.rl {
        let _ = write!(out, "| {} |", r.name);
        for s in seeds {
            match r.per_seed.iter().find(|(x, _, _)| x == s) {
                Some((_, ok, n)) if *n > 0 => {
                    let _ = write!(out, " {:.3} ({n}) |", *ok as f64 / *n as f64);
                }
                _ => {
                    let _ = write!(out, " – |");
                }
            }
        }
        let _ = writeln!(out);
    }
}

/// Pass@1 of every policy per task type.
fn per_task_table(out: &mut String, a: &Analysis) {
    let _ = writeln!(out, "\n### Per task type (pass@1)\n");
    let base = a.base.as_ref();
    let _ = write!(
        out,
        "| task |{} SFT |",
        if base.is_some() { " base |" } else { "" }
    );
    for r in &a.rl {
        let _ = write!(out, " {} |", r.name);
    }
    let columns = a.rl.len() + usize::from(base.is_some());
    let _ = writeln!(out, "\n|---|---|{}", "---|".repeat(columns));
    for t in &a.tasks {
        let _ = write!(out, "| {t} |");
        if let Some(b) = base {
            let _ = write!(out, " {} |", f3(b.task_pass1(t)));
        }
        let _ = write!(out, " {} |", f3(a.sft.task_pass1(t)));
        for r in &a.rl {
            let _ = write!(out, " {} |", f3(r.task_pass1(t)));
        }
        let _ = writeln!(out);
    }
}

fn arm_cells(x: &ReflectionArm) -> String {
    match x.rate {
        Some(r) => format!("{r:.3} ({}/{})", x.solved, x.total),
        None => "–".into(),
    }
}

fn table3(out: &mut String, a: &Analysis) {
    let _ = writeln!(out, "## Table 3 analog: with vs without reflection\n");
    let _ = writeln!(
        out,
        "Same training seeds for both collections; steps saved = 1 − with/without.\n"
    );
    let _ = writeln!(
        out,
        "| level | measure | with reflection | without | steps saved |\n|---|---|---|---|---|"
    );
    let (tw, to) = (a.teacher_with, a.teacher_without);
    let _ = writeln!(
        out,
        "| scripted teacher (collection) | seeds solved | {} | {} | |",
        arm_cells(&tw),
        arm_cells(&to)
    );
    let _ = writeln!(
        out,
        "| scripted teacher (collection) | steps of the kept success | {} | {} | {} |",
        f2(tw.steps),
        f2(to.steps),
        pct(steps_saved(tw.steps, to.steps))
    );
    let (pw, po) = (policy_arm(&a.sft), policy_arm(&a.sft_baseline));
    let _ = writeln!(
        out,
        "| SFT policy (held-out eval) | pass@1 | {} | {} | |",
        arm_cells(&pw),
        arm_cells(&po)
    );
    let _ = writeln!(
        out,
        "| SFT policy (held-out eval) | steps on solved episodes | {} | {} | {} |",
        f2(pw.steps),
        f2(po.steps),
        pct(steps_saved(pw.steps, po.steps))
    );
    let _ = writeln!(
        out,
        "\n> **About the teacher rows.** The scripted teacher is a stand-in for an LLM \
         teacher: under a reflection it multiplies every mistake rate by \
         `REFLECTION_MISTAKE_FACTOR` = {REFLECTION_MISTAKE_FACTOR}, a constant. Its \
         reflection gain is that constant's effect, not a model reading the reflection. \
         The SFT-policy rows are measured: two policies trained on the two collections \
         and evaluated on the same held-out seeds.\n"
    );
}

fn yields(out: &mut String, inputs: &Inputs, figures: bool) {
    let _ = writeln!(out, "## Yield per collection round\n");
    let _ = writeln!(
        out,
        "| collection | round | attempts | successes | yield | steps per success |\n|---|---|---|---|---|---|"
    );
    for (name, label) in [
        ("reflection", "teacher, reflection"),
        ("baseline", "teacher, no reflection"),
        ("sft-policy", "SFT policy"),
    ] {
        let Some(r) = inputs.collections.get(name) else {
            let _ = writeln!(out, "| {label} | – | – | – | – | – |");
            continue;
        };
        for x in &r.per_round {
            let _ = writeln!(
                out,
                "| {label} | {} | {} | {} | {:.3} | {} |",
                x.round,
                x.attempts,
                x.successes,
                x.yield_rate,
                f2(x.mean_steps_successes)
            );
        }
        let _ = writeln!(
            out,
            "| {label} | all | {} | {} | {:.3} of seeds | {} (kept) |",
            r.attempts_total,
            r.successes_total,
            r.yield_rate,
            f2(r.mean_steps_kept)
        );
    }
    if figures {
        let _ = writeln!(out, "\n![yield per round](figures/yield.png)");
    }
    let _ = writeln!(out);
}

fn mining(out: &mut String, inputs: &Inputs) {
    let _ = writeln!(out, "## Mining\n");
    match inputs.records.get("mine") {
        Some(r) => {
            let s = &r.summary;
            let n = s.get("pairs").and_then(|v| v.as_u64()).unwrap_or(0);
            let _ = writeln!(
                out,
                "{n} critical-step pair{} mined from the pool (the reflection collection and \
                 the SFT policy's attempts on the training seeds).\n",
                if n == 1 { "" } else { "s" }
            );
            for (what, key) in [("kind", "by_kind"), ("failure mode", "by_category")] {
                if let Some(m) = s.get(key).and_then(|v| v.as_object())
                    && !m.is_empty()
                {
                    let parts: Vec<String> = m
                        .iter()
                        .map(|(k, v)| format!("{} {}", crate::util::sanitize::clean_line(k), v))
                        .collect();
                    let _ = writeln!(out, "- by {what}: {}", parts.join(", "));
                }
            }
        }
        None => {
            let _ = writeln!(out, "Not mined yet.");
        }
    }
    let _ = writeln!(out);
}

fn dynamics(out: &mut String, inputs: &Inputs, figures: bool) {
    let _ = writeln!(out, "## Training dynamics over RL steps\n");
    let _ = writeln!(
        out,
        "Each cell: mean over the first quarter of the run's steps → mean over the last \
         quarter (from its `metrics.jsonl`).\n"
    );
    let _ = write!(out, "| run | steps |");
    for (_, label) in DYNAMICS {
        let _ = write!(out, " {label} |");
    }
    let _ = writeln!(out, "\n|---|---|{}", "---|".repeat(DYNAMICS.len()));
    for r in &inputs.rl_runs {
        let _ = write!(out, "| {} | {} |", r.name, r.metrics.len());
        for (key, _) in DYNAMICS {
            match trend(&r.metrics, key) {
                Some(t) => {
                    let _ = write!(out, " {:.3} → {:.3} |", t.first, t.last);
                }
                None => {
                    let _ = write!(out, " – |");
                }
            }
        }
        let _ = writeln!(out);
    }
    if figures {
        let _ = writeln!(out, "\n![training dynamics](figures/dynamics.png)");
    }
    let _ = writeln!(out);
}

fn stage_times(out: &mut String, inputs: &Inputs) {
    let _ = writeln!(out, "## Time per stage\n");
    let _ = writeln!(out, "| stage | units done | wall time |\n|---|---|---|");
    let mut total = 0.0;
    for st in Stage::ALL {
        let rs: Vec<_> = inputs
            .records
            .values()
            .filter(|r| r.stage == st.name())
            .collect();
        if rs.is_empty() {
            let _ = writeln!(out, "| {} | – | – |", st.name());
            continue;
        }
        let t = rs.iter().fold(0.0, |a, r| a + r.elapsed_s.max(0.0));
        total += t;
        let _ = writeln!(out, "| {} | {} | {} |", st.name(), rs.len(), human_time(t));
    }
    let _ = writeln!(out, "| all | | {} |\n", human_time(total));
}

/// Which checkpoint of each RL run the held-out rows use, when `rl.validation` chose
/// them: every checkpoint's validation pass@1, the chosen one in bold.
fn checkpoint_choice(out: &mut String, inputs: &Inputs) {
    let v = &inputs.cfg.rl.validation;
    if v.episodes == 0 {
        return;
    }
    let _ = writeln!(
        out,
        "### Checkpoint choice on validation seeds\n\nEach RL row above uses the run's \
         checkpoint with the best pass@1 on validation seeds {} ({} episodes per type and \
         checkpoint; never trained on, mined or held out); ties go to the earlier step.\n",
        seed_span(v.seed_start, v.episodes),
        v.episodes
    );
    let _ = writeln!(
        out,
        "| run | chosen step | validation pass@1 by step |\n|---|---|---|"
    );
    let Ok(names) = super::data::rl_names(&inputs.cfg) else {
        return;
    };
    for (_, _, name) in names {
        let sel = inputs
            .records
            .get(&format!("eval-rl/{name}"))
            .and_then(|r| r.summary.get("validation"));
        let Some(sel) = sel else {
            let _ = writeln!(out, "| {name} | – | – |");
            continue;
        };
        let chosen = sel.get("chosen").and_then(|c| c.as_u64());
        let steps: Vec<String> = sel
            .get("steps")
            .and_then(|s| s.as_array())
            .into_iter()
            .flatten()
            .filter_map(|x| Some((x.get("step")?.as_u64()?, x.get("pass1")?.as_f64()?)))
            .map(|(step, p)| {
                if Some(step) == chosen {
                    format!("**{step}: {p:.3}**")
                } else {
                    format!("{step}: {p:.3}")
                }
            })
            .collect();
        let _ = writeln!(
            out,
            "| {name} | {} | {} |",
            chosen.map_or("–".into(), |c| c.to_string()),
            steps.join(" · ")
        );
    }
    let _ = writeln!(out);
}

/// The whole `report.md`; `figures` says whether the PNGs were drawn, `note` is
/// said when they were not.
pub fn render(a: &Analysis, inputs: &Inputs, figures: bool, note: Option<&str>) -> String {
    let mut out = String::new();
    let c = &inputs.cfg;
    let _ = writeln!(out, "# RMSWeb recipe report\n");
    let _ = writeln!(
        out,
        "{} task types: {}.\n\nTraining seeds {} per type (teacher collections, SFT-policy \
         collection, mining); held-out evaluation seeds {}. SFT preset `{}`, RL preset `{}`.\n",
        a.tasks.len(),
        a.tasks.join(", "),
        seed_span(c.collect.seed_start, c.collect.seeds),
        seed_span(a.eval_seeds.0, a.eval_seeds.1),
        c.sft.preset,
        c.rl.preset
    );
    if !inputs.missing.is_empty() {
        let _ = writeln!(out, "**Incomplete**: this report lacks");
        for m in &inputs.missing {
            let _ = writeln!(out, "- {}", crate::util::sanitize::clean_line(m));
        }
        let _ = writeln!(out);
    }
    table2(&mut out, a, inputs);
    checkpoint_choice(&mut out, inputs);
    if figures {
        let _ = writeln!(out, "![pass@1 per policy](figures/pass1.png)\n");
    }
    table3(&mut out, a);
    yields(&mut out, inputs, figures);
    mining(&mut out, inputs);
    dynamics(&mut out, inputs, figures);
    stage_times(&mut out, inputs);
    if let Some(n) = note {
        let _ = writeln!(out, "_Figures: {n}_");
    }
    out
}

//! Judging one trajectory: key points, each model step's evidence scored against
//! them (its screenshot attached when the judge sees images, its page text always),
//! the best-scored steps kept as key states, and the verdict.

use super::prompts::{self, PROMPT_VERSION, Stage};
use super::verdicts::{Evidence, Verdict, content_hash};
use crate::action::render::render_call;
use crate::trajectory::{Dataset, Step, Task, Trajectory};
use anyhow::{Result, anyhow};
use std::path::{Path, PathBuf};

/// Sends one of the judge's prompts (with at most one image) and returns the
/// answer's text.
pub type Ask<'a> = dyn Fn(Stage, &str, Option<&Path>) -> Result<String> + Sync + 'a;

/// How to judge.
#[derive(Debug, Clone)]
pub struct JudgeConfig {
    /// The judge model's name (recorded with each verdict).
    pub model: String,
    /// Attach each step's screenshot to its evidence prompt.
    pub vision: bool,
    /// Evidence at or above this score can be a key state.
    pub min_score: u8,
    /// Key states at most (the best-scored).
    pub max_key_states: usize,
    /// Characters of a step's page text in a prompt.
    pub state_chars: usize,
}

impl Default for JudgeConfig {
    fn default() -> Self {
        JudgeConfig {
            model: String::new(),
            vision: false,
            min_score: 3,
            max_key_states: 4,
            state_chars: 1500,
        }
    }
}

/// A step's page as text: title, URL and the page text (or the element list).
fn state_text(s: &Step, max: usize) -> String {
    let body = if s.state.page_text.trim().is_empty() {
        &s.state.dom_text
    } else {
        &s.state.page_text
    };
    let mut text = format!("{} ({})\n{}", s.state.title, s.state.url, body.trim());
    if text.chars().count() > max {
        text = text.chars().take(max).collect::<String>() + " …";
    }
    text
}

fn actions_text(t: &Trajectory) -> String {
    let lines: Vec<String> = t
        .steps
        .iter()
        .filter(|s| s.is_model_step())
        .map(|s| {
            let calls: Vec<String> = s.output.actions.iter().map(render_call).collect();
            let goal = s.output.next_goal.trim();
            if goal.is_empty() {
                format!("step {}: {}", s.index, calls.join(", "))
            } else {
                format!("step {}: {} — {goal}", s.index, calls.join(", "))
            }
        })
        .collect();
    if lines.is_empty() {
        "(none)".into()
    } else {
        lines.join("\n")
    }
}

/// The agent's final answer: the outcome's, else the last done action's text.
fn final_answer(t: &Trajectory) -> String {
    if let Some(a) = t
        .outcome
        .final_answer
        .as_deref()
        .filter(|a| !a.trim().is_empty())
    {
        return a.trim().to_string();
    }
    t.steps
        .iter()
        .rev()
        .flat_map(|s| s.output.actions.iter())
        .find(|a| a.name == "done")
        .and_then(|a| {
            a.params
                .get("text")
                .and_then(|v| v.as_str())
                .map(str::to_owned)
        })
        .unwrap_or_else(|| "(none)".into())
}

/// Marks the key states (at most `max_key_states` steps scored at least `min_score`,
/// the best first, then in step order) and writes them for the verdict question.
fn select_key_states(evidence: &mut [Evidence], t: &Trajectory, cfg: &JudgeConfig) -> String {
    let mut ranked: Vec<usize> = (0..evidence.len())
        .filter(|&i| evidence[i].score >= cfg.min_score)
        .collect();
    ranked.sort_by_key(|&i| (std::cmp::Reverse(evidence[i].score), i));
    ranked.truncate(cfg.max_key_states);
    ranked.sort_unstable();
    let mut key_states = Vec::new();
    for &i in &ranked {
        evidence[i].selected = true;
        let e = &evidence[i];
        let step = t.steps.iter().find(|s| s.index == e.step);
        let page = step.map_or_else(String::new, |s| state_text(s, cfg.state_chars));
        key_states.push(format!(
            "step {} (score {}): {}\n{page}",
            e.step, e.score, e.reason
        ));
    }
    if key_states.is_empty() {
        "(no step scored as relevant)".to_string()
    } else {
        key_states.join("\n\n")
    }
}

/// Judges `t` (its recorded outcome is never shown to the judge).
pub fn judge_trajectory(
    ds: &Dataset,
    task: &Task,
    t: &Trajectory,
    cfg: &JudgeConfig,
    ask: &Ask,
) -> Result<Verdict> {
    let key_points = ask(
        Stage::KeyPoints,
        &prompts::key_points(&task.instruction),
        None,
    )?
    .trim()
    .to_string();
    let mut evidence = Vec::new();
    for s in t.steps.iter().filter(|s| s.is_model_step()) {
        let image: Option<(String, PathBuf)> = match (&s.state.screenshot, cfg.vision) {
            (Some(rel), true) => Some((rel.clone(), ds.resolve(rel)?)),
            _ => None,
        };
        let prompt = prompts::evidence_score(
            &task.instruction,
            &key_points,
            s.index as usize,
            &state_text(s, cfg.state_chars),
        );
        let answer = ask(
            Stage::Evidence,
            &prompt,
            image.as_ref().map(|(_, p)| p.as_path()),
        )?;
        let (score, reason) = match prompts::read_score(&answer) {
            Some(n) => (n, prompts::read_reason(&answer)),
            None => (
                1,
                format!("unreadable score: {}", prompts::read_reason(&answer)),
            ),
        };
        evidence.push(Evidence {
            step: s.index,
            score,
            reason,
            selected: false,
            screenshot: image.map(|(rel, _)| rel),
        });
    }
    let key_states = select_key_states(&mut evidence, t, cfg);
    let answer = ask(
        Stage::Verdict,
        &prompts::verdict(
            &task.instruction,
            &key_points,
            &actions_text(t),
            &key_states,
            &final_answer(t),
        ),
        None,
    )?;
    let success = prompts::read_status(&answer).map_err(|e| anyhow!("{e}"))?;
    Ok(Verdict {
        trajectory_id: t.id.clone(),
        task_id: t.task_id.clone(),
        success,
        reasoning: answer.trim().chars().take(4000).collect(),
        key_points,
        evidence,
        judge_model: cfg.model.clone(),
        prompt_version: PROMPT_VERSION.into(),
        content_hash: content_hash(task, t),
        created_at: chrono::Utc::now().to_rfc3339(),
    })
}

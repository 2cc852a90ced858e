//! One episode in a browser tab: observe, ask the policy, act, until the page says
//! it is finished, the agent calls `done` or the steps run out; every step kept
//! (with its screenshot) as a trajectory.

use super::{EVAL_SOURCE, EpisodeEnv, EpisodeRecord, stop};
use crate::env::is_browser_gone;
use crate::env::miniwob::task_name;
use crate::policy::attempt::AttemptSeeded;
use crate::policy::{Policy, PolicyInput};
use crate::trajectory::{ActionResult, Outcome, Step, Task, Timing, Trajectory};
use anyhow::{Context, Result};
use std::path::PathBuf;
use std::time::Instant;

/// Where an episode's screenshots go: `<root>/screenshots/<trajectory id>/<step>.png`.
#[derive(Debug, Clone)]
pub struct ScreenshotSink {
    pub root: PathBuf,
}

fn now_s() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

/// The task record of a MiniWoB episode: one per (task, seed), since the seed fixes
/// the instruction.
pub fn miniwob_task(name: &str, seed: u64, instruction: &str) -> Task {
    Task {
        task_id: format!("miniwob/{name}/s{seed}"),
        website: "miniwob".into(),
        domain: "miniwob".into(),
        category: name.into(),
        instruction: instruction.into(),
        source: format!("miniwob:{name}"),
    }
}

impl ScreenshotSink {
    /// Writes step `i`'s screenshot of trajectory `id`; its absolute path and the
    /// dataset-relative one the step records.
    fn save(&self, id: &str, i: usize, png: &[u8]) -> Result<(PathBuf, String)> {
        let rel = format!("screenshots/{id}/{i}.png");
        let abs = self.root.join(&rel);
        if let Some(dir) = abs.parent() {
            std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        }
        std::fs::write(&abs, png).with_context(|| format!("writing {}", abs.display()))?;
        Ok((abs, rel))
    }
}

/// Options of one episode.
#[derive(Debug, Clone)]
pub struct EpisodeOptions<'a> {
    pub max_steps: usize,
    pub reflection: Option<&'a str>,
    /// The trajectory id to write (also the screenshot folder name).
    pub trajectory_id: String,
    /// The attempt at this instance (1-based): the policy is reset with that
    /// attempt's seed ([`AttemptSeeded`]) and the trajectory and record carry it.
    pub attempt: u32,
    pub screenshots: Option<&'a ScreenshotSink>,
}

/// Runs one seeded episode. The outcome is the page's: success when it finished with
/// a positive raw reward. A page without a checker (a live-web task) leaves the
/// outcome unscored (no `judge`, not a success) for [`super::judged::judge_episode`].
// Kept whole: the step loop reads top to bottom (observe, ask, act, check the page,
// stop); its pieces are helpers (`ScreenshotSink::save`, `execute_actions`,
// `page_outcome`).
pub fn run_episode(
    env: &mut dyn EpisodeEnv,
    policy: &mut dyn Policy,
    task: &str,
    seed: u64,
    opts: &EpisodeOptions<'_>,
) -> Result<(Task, Trajectory, EpisodeRecord)> {
    let name = task_name(task).to_string();
    let policy = &mut AttemptSeeded {
        inner: policy,
        attempt: opts.attempt,
    };
    let started = Instant::now();
    let task = env.begin(&name, seed)?;
    policy.reset(&task, seed);
    let mut steps: Vec<Step> = Vec::new();
    let mut final_answer = None;
    let mut ended = None;
    for i in 0..opts.max_steps {
        let obs = env.observe()?;
        let (shot_abs, shot_rel) = match (opts.screenshots, &obs.screenshot) {
            (Some(sink), Some(png)) => {
                let (abs, rel) = sink.save(&opts.trajectory_id, i, png)?;
                (Some(abs), Some(rel))
            }
            _ => (None, None),
        };
        let memory = steps
            .last()
            .map(|s| s.output.memory.clone())
            .unwrap_or_default();
        let state = obs.to_state(shot_rel, &memory);
        let start = now_s();
        let answer = policy.act(&PolicyInput {
            task: &task,
            state: &state,
            history: &steps,
            reflection: opts.reflection,
            max_steps: opts.max_steps,
            screenshot: shot_abs.as_deref(),
        });
        let answer = match answer {
            Ok(a) => a,
            // A stop asked for ends the run here; this episode is not recorded.
            Err(e) if stop::is_interrupted(&e) => return Err(e),
            Err(e) => {
                ended = Some(format!("policy failed: {e:#}"));
                break;
            }
        };
        let mut results: Vec<ActionResult> = Vec::new();
        if let Some(err) = &answer.parse_error {
            // The raw answer stays in the step, for whoever audits the failure.
            results.push(ActionResult {
                error: Some(format!(
                    "invalid model output: {err}\nraw answer: {}",
                    answer.raw
                )),
                ..Default::default()
            });
        }
        let Executed {
            done,
            answer: done_answer,
            broken,
        } = execute_actions(env, &answer.output.actions, &mut results)?;
        if done {
            final_answer = done_answer;
        }
        steps.push(Step {
            index: i as u32,
            state,
            output: answer.output,
            result: results,
            timing: Some(Timing {
                start,
                end: now_s(),
            }),
            ..Default::default()
        });
        if let Some(b) = broken {
            ended = Some(b);
            break;
        }
        match page_done(env)? {
            Ok(true) => break,
            Ok(false) => {}
            Err(e) => {
                ended = Some(format!("the task page is gone: {e}"));
                break;
            }
        }
        if done {
            ended = Some("the agent called done before the page finished the task".into());
            break;
        }
    }
    // A page that no longer answers (the agent navigated away) did not finish the task.
    let page = match env.reward() {
        Ok(p) => p,
        Err(e) if is_browser_gone(&e) => return Err(e),
        Err(_) => Some(unfinished()),
    };
    let checked = page.is_some();
    // A site without a checker: the episode ends when the agent says it is done.
    if !checked && done_called(&steps) {
        ended = Some("the agent called done".into());
    }
    let page = page.unwrap_or_else(unfinished);
    let (success, reward, mut reason) = page_outcome(&page, ended, opts.max_steps);
    let notes = policy.notes();
    if !notes.is_empty() {
        reason.push_str(&format!("; teacher notes: {}", notes.join(", ")));
    }
    let mut traj = Trajectory {
        id: opts.trajectory_id.clone(),
        task_id: task.task_id.clone(),
        attempt: opts.attempt,
        round: 1,
        reflection: opts.reflection.map(str::to_owned),
        source: EVAL_SOURCE.into(),
        teacher: policy.name(),
        outcome: Outcome {
            success,
            score: checked.then_some(reward),
            judge: checked.then(|| "miniwob-page".to_string()),
            reason: Some(reason.clone()),
            final_answer,
            ..Default::default()
        },
        steps,
    };
    traj.fill_progress();
    let record = EpisodeRecord {
        task: name,
        seed,
        attempt: opts.attempt,
        instruction: task.instruction.clone(),
        success,
        reward,
        steps: traj.steps.len(),
        reason,
        trajectory_id: traj.id.clone(),
        seconds: started.elapsed().as_secs_f64(),
    };
    Ok((task, traj, record))
}

/// Executes an answer's actions in order into `results`, until one ends the step
/// (`done`, an error) or the page finishes. The page failing under an action (it
/// navigated away, the target closed) ends the episode as a failure
/// ([`Executed::broken`]); a dead or hung browser is an error that ends the run
/// (else it would count as the policy's failure).
fn execute_actions(
    env: &dyn EpisodeEnv,
    actions: &[crate::action::Action],
    results: &mut Vec<ActionResult>,
) -> Result<Executed> {
    let mut out = Executed::default();
    for a in actions {
        let r = match env.execute(a) {
            Ok(r) => r,
            Err(e) if is_browser_gone(&e) => return Err(e),
            Err(e) => {
                let a = crate::util::sanitize::clean_line(&a.short()).into_owned();
                out.broken = Some(format!("the browser failed under {a}: {e:#}"));
                return Ok(out);
            }
        };
        let stop = r.is_done || r.error.is_some();
        if r.is_done {
            out.done = true;
            out.answer = r.extracted_content.clone();
        }
        results.push(r);
        if stop {
            break;
        }
        match page_done(env)? {
            Ok(true) => break,
            Ok(false) => {}
            Err(e) => {
                let a = crate::util::sanitize::clean_line(&a.short()).into_owned();
                out.broken = Some(format!("the task page is gone after {a}: {e}"));
                return Ok(out);
            }
        }
    }
    Ok(out)
}

/// Whether the page says the episode is finished (a site without a checker never
/// does); `Ok(Err(why))` when the page no longer answers, an error when the browser
/// is gone.
fn page_done(env: &dyn EpisodeEnv) -> Result<std::result::Result<bool, String>> {
    match env.reward() {
        Ok(p) => Ok(Ok(p.is_some_and(|p| p.done))),
        Err(e) if is_browser_gone(&e) => Err(e),
        Err(e) => Ok(Err(format!("{e:#}"))),
    }
}

/// What executing one answer's actions came to.
#[derive(Default)]
struct Executed {
    /// A `done` action was called ...
    done: bool,
    /// ... with this answer.
    answer: Option<String>,
    /// Why the episode broke, if the page failed under an action.
    broken: Option<String>,
}

/// The page's state when it never finished.
fn unfinished() -> crate::env::miniwob::PageReward {
    crate::env::miniwob::PageReward {
        done: false,
        raw_reward: 0.0,
        reason: None,
    }
}

/// Success, reward and the reason of an episode from its page's state: the page's
/// reward when it finished, else why the episode `ended` (the step limit when
/// nothing else ended it).
fn page_outcome(
    page: &crate::env::miniwob::PageReward,
    ended: Option<String>,
    max_steps: usize,
) -> (bool, f64, String) {
    if !page.done {
        let why = ended
            .unwrap_or_else(|| format!("step limit {max_steps} reached before the page finished"));
        return (false, 0.0, why);
    }
    let reason = match &page.reason {
        Some(r) => format!("page reward {:.2}: {r}", page.raw_reward),
        None => format!("page reward {:.2}", page.raw_reward),
    };
    (page.raw_reward > 0.0, page.raw_reward, reason)
}

/// Whether the agent's last step called `done`.
fn done_called(steps: &[Step]) -> bool {
    steps
        .last()
        .is_some_and(|s| s.result.iter().any(|r| r.is_done))
}

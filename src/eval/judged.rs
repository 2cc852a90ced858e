//! Episodes on sites without a checker, scored by an LLM judge: the verdict decides
//! the episode's success, is stored beside the dataset's trajectories
//! (`judge/verdicts.jsonl`, as `rmsweb judge` stores it) and is named in the
//! trajectory's outcome.

use super::EpisodeRecord;
use crate::judge::verdicts::{self, Verdict, content_hash};
use crate::trajectory::{Dataset, Task, Trajectory};
use anyhow::Result;
use std::sync::Arc;

/// Judges one finished trajectory (its recorded outcome is never shown to the
/// judge), e.g. WebJudge's protocol over an OpenAI-compatible endpoint.
pub trait EpisodeJudge: Send + Sync {
    /// The judge model's name, recorded with each verdict.
    fn model(&self) -> &str;
    /// The verdict on `t`, a trajectory of `task` whose screenshots are in `ds`.
    fn judge(&self, ds: &Dataset, task: &Task, t: &Trajectory) -> Result<Verdict>;
}

/// A shared judge, as [`super::EvalConfig`] holds it.
#[derive(Clone)]
pub struct JudgeHandle(pub Arc<dyn EpisodeJudge>);

impl std::fmt::Debug for JudgeHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "JudgeHandle({})", self.0.model())
    }
}

/// The start of an episode's reason when the judge could not decide it (the
/// endpoint failed, the answer had no status): the episode counts as a failure and
/// is kept, for `rmsweb judge` to judge later.
pub const NOT_JUDGED: &str = "not judged";

/// Judges an episode the page did not score (its outcome names no judge) and
/// writes the verdict into the trajectory's outcome and the episode's record; the
/// verdict is appended to `ds`. An episode the page scored is left as it is. When
/// the judge fails, the episode is kept unjudged (its reason starts with
/// [`NOT_JUDGED`] and says why); only failing to store a verdict is an error.
pub fn judge_episode(
    judge: &dyn EpisodeJudge,
    ds: &Dataset,
    task: &Task,
    traj: &mut Trajectory,
    rec: &mut EpisodeRecord,
) -> Result<()> {
    if traj.outcome.judge.is_some() {
        return Ok(());
    }
    let ended = traj.outcome.reason.clone().unwrap_or_default();
    let mut v = match judge.judge(ds, task, traj) {
        Ok(v) => v,
        Err(e) => {
            let why = crate::util::sanitize::clean_line(&format!("{e:#}")).into_owned();
            let reason = format!("{NOT_JUDGED} ({}: {why}); {ended}", judge.model());
            traj.outcome.reason = Some(reason.clone());
            rec.reason = reason;
            return Ok(());
        }
    };
    let why = crate::util::sanitize::clean_line(&v.summary()).into_owned();
    let reason = format!(
        "judge {}: {} ({why}); {ended}",
        v.judge_model,
        if v.success { "success" } else { "failure" }
    );
    traj.outcome.success = v.success;
    traj.outcome.score = Some(if v.success { 1.0 } else { 0.0 });
    traj.outcome.judge = Some(v.judge_model.clone());
    traj.outcome.reason = Some(reason.clone());
    rec.success = v.success;
    rec.reward = if v.success { 1.0 } else { 0.0 };
    rec.reason = reason;
    // The hash of the trajectory as it will be read back (with the verdict's
    // outcome; its times as JSON gives them back, which can differ from the f64 in
    // memory in the last bit): `rmsweb judge` then finds this verdict standing and
    // does not ask again.
    let stored: Trajectory = serde_json::from_str(&serde_json::to_string(traj)?)?;
    v.content_hash = content_hash(task, &stored);
    // Workers of a side-by-side collection judge at once: one append at a time.
    static APPEND: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _one_writer = APPEND
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    verdicts::append(ds.root(), std::slice::from_ref(&v))
}

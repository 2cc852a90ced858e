//! Live-web tasks for `eval` and `collect`: the `--tasks-file` they play and the LLM
//! judge (`--judge-url`) that scores their episodes, which no page does.

use anyhow::{Result, bail};
use rmsweb::eval::judged::{EpisodeJudge, JudgeHandle};
use rmsweb::judge::prompts::Stage;
use rmsweb::judge::verdicts::Verdict;
use rmsweb::judge::webjudge::{JudgeConfig, judge_trajectory};
use rmsweb::trajectory::{Dataset, Task, Trajectory};
use rmsweb::util::sanitize::clean_line;
use std::path::Path;

/// The LLM judge of episodes on sites without a checker.
#[derive(clap::Args, Debug, Clone)]
pub struct JudgeArgs {
    /// Judge endpoint base URL (up to /v1): episodes whose pages do not score
    /// themselves (`--tasks-file`) are judged there with WebJudge's protocol, and
    /// each verdict is stored in the dataset (`judge/verdicts.jsonl`).
    #[arg(long)]
    pub judge_url: Option<String>,
    /// Judge model name (recorded with each verdict).
    #[arg(long, requires = "judge_url")]
    pub judge_model: Option<String>,
    /// Name of the environment variable holding the judge's API key.
    #[arg(long, requires = "judge_url")]
    pub judge_api_key_env: Option<String>,
    /// Send each step's screenshot to the judge with its evidence prompt.
    #[arg(long, requires = "judge_url")]
    pub judge_vision: bool,
}

impl JudgeArgs {
    /// The judge, if one is asked for.
    pub fn build(&self) -> Result<Option<JudgeHandle>> {
        let Some(url) = &self.judge_url else {
            return Ok(None);
        };
        let Some(model) = &self.judge_model else {
            bail!("--judge-url needs --judge-model (the judge model's name)");
        };
        let llm = super::llm_args::LlmArgs {
            llm_url: Some(url.clone()),
            model: Some(model.clone()),
            api_key_env: self.judge_api_key_env.clone(),
            concurrency: 1,
            retries: 3,
            timeout: 120,
        };
        let judge = WebJudge {
            clients: llm.judge_clients(self.judge_vision, true)?,
            cfg: JudgeConfig {
                model: model.clone(),
                vision: self.judge_vision,
                ..JudgeConfig::default()
            },
        };
        Ok(Some(JudgeHandle(std::sync::Arc::new(judge))))
    }
}

/// WebJudge over an OpenAI-compatible endpoint, one client per question.
struct WebJudge {
    clients: [rmsweb::policy::chat::ChatClient; 3],
    cfg: JudgeConfig,
}

impl EpisodeJudge for WebJudge {
    fn model(&self) -> &str {
        &self.cfg.model
    }

    fn judge(&self, ds: &Dataset, task: &Task, t: &Trajectory) -> Result<Verdict> {
        let ask = |stage: Stage, text: &str, image: Option<&Path>| {
            super::llm_args::ask(&self.clients[stage as usize], text, image)
        };
        judge_trajectory(ds, task, t, &self.cfg, &ask)
    }
}

/// The live-web tasks of `--tasks-file` and their judge (which they need, as they
/// need a policy other than the scripted MiniWoB teacher); without a tasks file no
/// judge (MiniWoB pages score themselves, said when one was given).
pub fn live_tasks(
    tasks_file: Option<&Path>,
    judge: &JudgeArgs,
    policy: &str,
) -> Result<(Option<Vec<Task>>, Option<JudgeHandle>)> {
    let built = judge.build()?;
    let Some(file) = tasks_file else {
        if built.is_some() {
            eprintln!("note: MiniWoB pages score themselves; --judge-url is not used");
        }
        return Ok((None, None));
    };
    let tasks = read_tasks_file(file)?;
    if built.is_none() {
        bail!(
            "{}: live-web tasks have no checker; pass --judge-url URL --judge-model M to have an LLM judge score them",
            file.display()
        );
    }
    if policy == "scripted" {
        bail!(
            "the scripted teacher plays MiniWoB tasks only: use --policy chat or --policy local with --tasks-file"
        );
    }
    Ok((Some(tasks), built))
}

/// Reads a tasks file (JSON Lines of task records: `task_id`, `website`,
/// `instruction`, ...), as `tasks generate` and `import tasks` write them.
fn read_tasks_file(path: &Path) -> Result<Vec<Task>> {
    let tasks: Vec<Task> = rmsweb::trajectory::jsonl::JsonlFile::open(path)?
        .all()
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    if tasks.is_empty() {
        bail!("{}: no tasks", path.display());
    }
    let mut seen = std::collections::BTreeSet::new();
    for t in &tasks {
        if !seen.insert(t.task_id.as_str()) {
            bail!(
                "{}: task {} is listed twice",
                path.display(),
                clean_line(&t.task_id)
            );
        }
    }
    Ok(tasks)
}

/// Fails, naming the fix, when the judge left episodes (given by their reasons)
/// unjudged: they count as failures, and `rmsweb judge` can judge them from the
/// dataset.
pub fn unjudged<'a>(reasons: impl Iterator<Item = &'a str>, dataset: Option<&Path>) -> Result<()> {
    let n = reasons
        .filter(|r| r.starts_with(rmsweb::eval::judged::NOT_JUDGED))
        .count();
    if n > 0 {
        let ds = dataset.map_or_else(|| "D".into(), |d| d.display().to_string());
        bail!(
            "{n} episodes could not be judged and count as failures (each one's reason says why); run `rmsweb judge --dataset {ds}` to judge them"
        );
    }
    Ok(())
}

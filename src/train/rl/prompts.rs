//! RL prompts: chat messages rendered exactly as the SFT samples are, the verified
//! target action(s) and the elements of the state (what the rubric checks indices
//! against).
//!
//! - `mined`: one prompt per mined pair. The prompt is the **success-side** state
//!   s_i⁺ with its trajectory's history, and the target a_i⁺: ALGORITHMS.md §4 says
//!   "only (s_i⁺, a_i⁺) enters RL", and the target is only known to be executable
//!   (its index valid) in s_i⁺ — the loc state is kept for auditing. The messages are
//!   the SFT sample of that step (`<trajectory>#<step>`) when the curate stage has it,
//!   otherwise that trajectory flattened the same way.
//! - `full-corpus`: every action sample of the flattened SFT corpus; the target is the
//!   sample's assistant message parsed.

use super::config::PromptSource;
use crate::action::Action;
use crate::action::parse::parse_response;
use crate::curate::flatten::{self, FlattenOptions, Sample, SampleKind};
use crate::mine::MinedPair;
use crate::model::Message;
use crate::policy::format::PromptFormat;
use crate::policy::prompt::{CharApprox, shown_in};
use crate::trajectory::jsonl::JsonlFile;
use crate::trajectory::{Dataset, Element, Trajectory};
use anyhow::{Context, Result};
use std::collections::HashMap;
use std::path::PathBuf;

/// One RL prompt.
#[derive(Debug, Clone, PartialEq)]
pub struct RlPrompt {
    /// The mined pair id, or the SFT sample id.
    pub id: String,
    /// System and user messages (no assistant turn).
    pub messages: Vec<Message>,
    /// The verified target step's actions (the rubric scores the first).
    pub targets: Vec<Action>,
    /// Elements of the prompt's state.
    pub elements: Vec<Element>,
    /// The task's instruction (grounded rollouts type only its quoted values).
    pub instruction: String,
    /// Indices of the elements the user message shows (grounded rollouts choose
    /// among them).
    pub shown: Vec<u32>,
    /// The screenshot of the prompt's state (the sample's last image, inside the
    /// dataset): a Qwen3-VL policy sees it.
    pub screenshot: Option<PathBuf>,
}

/// The sample's last image, resolved inside the dataset root.
fn screenshot_of(ds: &Dataset, sample: &Sample) -> Result<Option<PathBuf>> {
    sample
        .images
        .last()
        .map(|rel| ds.resolve(rel))
        .transpose()
        .with_context(|| format!("sample `{}`: its screenshot", sample.id))
}

/// The indices the prompt's last user message shows of `elements`.
fn shown_of(messages: &[Message], elements: &[Element]) -> Vec<u32> {
    messages
        .iter()
        .rev()
        .find(|m| m.role == "user")
        .map_or_else(Vec::new, |m| shown_in(&m.content, elements))
}

/// Instruction of every task of the dataset, by task id.
fn instructions(ds: &Dataset) -> Result<HashMap<String, String>> {
    Ok(ds
        .tasks()
        .map_err(|e| anyhow::anyhow!("{e}"))?
        .into_iter()
        .map(|t| (t.task_id, t.instruction))
        .collect())
}

/// What loading skipped, and why (reported in the run log).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Skipped(pub Vec<(String, String)>);

struct Trajectories<'a> {
    ds: &'a Dataset,
    cache: HashMap<String, Option<Trajectory>>,
}

impl Trajectories<'_> {
    fn get(&mut self, id: &str) -> Result<Option<&Trajectory>> {
        if !self.cache.contains_key(id) {
            let t = self
                .ds
                .trajectory_by_id(id)
                .map_err(|e| anyhow::anyhow!("{e}"))?;
            self.cache.insert(id.to_string(), t);
        }
        Ok(self.cache.get(id).and_then(Option::as_ref))
    }
}

fn prompt_messages(sample: &Sample) -> Vec<Message> {
    sample
        .messages
        .iter()
        .filter(|m| m.role != "assistant")
        .map(|m| Message::new(&m.role, m.content.clone()))
        .collect()
}

/// Loads the prompts of `source` from the dataset at `ds`.
pub fn load(ds: &Dataset, source: PromptSource) -> Result<(Vec<RlPrompt>, Skipped)> {
    match source {
        PromptSource::Mined => mined(ds),
        PromptSource::FullCorpus => full_corpus(ds),
    }
}

fn mined(ds: &Dataset) -> Result<(Vec<RlPrompt>, Skipped)> {
    let path = ds.root().join("mined").join("pairs.jsonl");
    anyhow::ensure!(
        path.is_file(),
        "{}: no mined pairs; run `rmsweb mine` first or use --prompts full-corpus",
        path.display()
    );
    let file = JsonlFile::open(&path)?;
    let pairs: Vec<MinedPair> = file.all().map_err(|e| anyhow::anyhow!("{e}"))?;
    let samples: HashMap<String, Sample> = crate::curate::current_samples(ds)?
        .into_iter()
        .filter(|s| s.kind == SampleKind::Action)
        .map(|s| (s.id.clone(), s))
        .collect();
    let instructions = instructions(ds)?;
    // A step without a sample is flattened in the corpus's own prompt format.
    let mut flatten_opts = FlattenOptions::default();
    if let Some(f) = samples
        .values()
        .find_map(|s| PromptFormat::of_version(&s.prompt_format))
    {
        flatten_opts.prompt.format = f;
    }
    let mut trajs = Trajectories {
        ds,
        cache: HashMap::new(),
    };
    let sources = PairSources {
        ds,
        samples,
        instructions,
        flatten_opts,
    };
    let mut out = Vec::new();
    let mut skipped = Skipped::default();
    for p in pairs {
        match sources.prompt(&mut trajs, &p)? {
            Ok(prompt) => out.push(prompt),
            Err(why) => skipped.0.push((p.id.clone(), why)),
        }
    }
    Ok((out, skipped))
}

/// What a mined pair's prompt is built from.
struct PairSources<'a> {
    ds: &'a Dataset,
    samples: HashMap<String, Sample>,
    instructions: HashMap<String, String>,
    flatten_opts: FlattenOptions,
}

impl PairSources<'_> {
    /// The prompt of pair `p`, or why it is skipped.
    fn prompt(
        &self,
        trajs: &mut Trajectories<'_>,
        p: &MinedPair,
    ) -> Result<std::result::Result<RlPrompt, String>> {
        let (tid, step) = (&p.success.trajectory, p.success.step);
        let Some(t) = trajs.get(tid)? else {
            return Ok(Err(format!("trajectory `{tid}` is not in the dataset")));
        };
        let Some(st) = t.steps.iter().find(|s| s.index == step) else {
            return Ok(Err(format!("trajectory `{tid}` has no step {step}")));
        };
        let sample_id = format!("{tid}#{step}");
        let flat;
        let sample = match self.samples.get(&sample_id) {
            Some(s) => s,
            None => {
                let Some(instr) = self.instructions.get(&t.task_id) else {
                    return Ok(Err(format!("task `{}` is not in tasks.jsonl", t.task_id)));
                };
                flat =
                    flatten::flatten_trajectory(self.ds, t, instr, &self.flatten_opts, &CharApprox);
                match flat.iter().find(|s| s.id == sample_id) {
                    Some(s) => s,
                    None => return Ok(Err(format!("step `{sample_id}` did not flatten"))),
                }
            }
        };
        let messages = prompt_messages(sample);
        let elements = st.state.elements.clone();
        Ok(Ok(RlPrompt {
            id: p.id.clone(),
            shown: shown_of(&messages, &elements),
            instruction: self
                .instructions
                .get(&t.task_id)
                .cloned()
                .unwrap_or_default(),
            messages,
            targets: vec![p.target_action.clone()],
            elements,
            screenshot: screenshot_of(self.ds, sample)?,
        }))
    }
}

fn full_corpus(ds: &Dataset) -> Result<(Vec<RlPrompt>, Skipped)> {
    let samples = crate::curate::current_samples(ds)
        .with_context(|| format!("reading the SFT samples of {}", ds.root().display()))?;
    let instructions = instructions(ds)?;
    let mut trajs = Trajectories {
        ds,
        cache: HashMap::new(),
    };
    let mut out = Vec::new();
    let mut skipped = Skipped::default();
    for s in samples.iter().filter(|s| s.kind == SampleKind::Action) {
        let Some(answer) = s.messages.iter().rev().find(|m| m.role == "assistant") else {
            skipped
                .0
                .push((s.id.clone(), "no assistant message".to_string()));
            continue;
        };
        let targets = match parse_response(&answer.content) {
            Ok(p) if !p.actions.is_empty() => p.actions,
            Ok(_) => {
                skipped
                    .0
                    .push((s.id.clone(), "assistant message has no action".into()));
                continue;
            }
            Err(e) => {
                skipped
                    .0
                    .push((s.id.clone(), format!("assistant message: {e}")));
                continue;
            }
        };
        let elements = trajs
            .get(&s.trajectory)?
            .and_then(|t| t.steps.iter().find(|st| st.index == s.step))
            .map(|st| st.state.elements.clone());
        let Some(elements) = elements else {
            skipped.0.push((
                s.id.clone(),
                format!("state of `{}` step {} not found", s.trajectory, s.step),
            ));
            continue;
        };
        let messages = prompt_messages(s);
        out.push(RlPrompt {
            id: s.id.clone(),
            shown: shown_of(&messages, &elements),
            instruction: instructions.get(&s.task_id).cloned().unwrap_or_default(),
            messages,
            targets,
            elements,
            screenshot: screenshot_of(ds, s)?,
        });
    }
    Ok((out, skipped))
}

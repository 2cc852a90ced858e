//! Flattening kept trajectories into per-step SFT samples (ALGORITHMS.md §2).
//!
//! Every step of a kept trajectory becomes one **action sample**: the project prompt
//! renderer's messages for (task instruction, the step's state, the previous steps,
//! the trajectory's reflection) followed by an assistant message holding the step's
//! model output in Browser Use's JSON form. Training and evaluation thus see exactly
//! the same observation text.
//!
//! A step also yields an **extraction sample** for each of its `extract` actions whose
//! result carries `extracted_content`: a user message asking to extract, for the task
//! and the action's query, from the page's DOM text, and the extracted content as the
//! assistant answer. Only `extract` results count: Browser Use also fills
//! `extracted_content` with confirmations of ordinary actions ("Clicked button with
//! index 9") and the `done` text, which are not content taken from the page and would
//! teach the model to "extract" action logs.

use crate::policy::prompt::{
    CharApprox, PROMPT_FORMAT_VERSION, PromptInput, PromptOptions, TokenCounter,
};
use crate::policy::render::render;
use crate::trajectory::{Dataset, Step, Trajectory};
use crate::util::sanitize::{clean_line, clean_text};
use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// Where the samples are written, relative to the dataset root.
pub const SAMPLES_FILE: &str = "sft/samples.jsonl";

/// Step budget shown in prompts ("Step k of at most N"); the default of
/// `rmsweb eval --max-steps`. A longer trajectory shows its own length instead.
pub const DEFAULT_MAX_STEPS: usize = 10;

/// What a sample teaches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SampleKind {
    /// Choose the next action from the observation.
    Action,
    /// Extract content from the page for a query.
    Extraction,
}

/// One chat message of a sample.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SampleMessage {
    pub role: String,
    pub content: String,
}

/// One SFT sample (a line of `sft/samples.jsonl`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Sample {
    /// `<trajectory>#<step>` for action samples, `<trajectory>#<step>/extract<k>` for
    /// the extraction sample of the step's k-th action.
    pub id: String,
    pub kind: SampleKind,
    pub trajectory: String,
    pub step: u32,
    pub task_id: String,
    /// [`PROMPT_FORMAT_VERSION`] of the renderer that built the prompt.
    pub prompt_format: String,
    pub messages: Vec<SampleMessage>,
    /// Screenshot paths relative to the dataset root (only files that exist). They
    /// belong to the last user message.
    #[serde(default)]
    pub images: Vec<String>,
}

/// Flattening options.
#[derive(Debug, Clone)]
pub struct FlattenOptions {
    /// Renderer options (token budget, history length); `vision` is ignored: images
    /// are listed in [`Sample::images`].
    pub prompt: PromptOptions,
    /// See [`DEFAULT_MAX_STEPS`].
    pub max_steps: usize,
}

impl Default for FlattenOptions {
    fn default() -> Self {
        FlattenOptions {
            prompt: PromptOptions::default(),
            max_steps: DEFAULT_MAX_STEPS,
        }
    }
}

/// Counts of a flattening run.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct FlattenReport {
    /// Trajectories flattened.
    pub trajectories: usize,
    pub action_samples: usize,
    pub extraction_samples: usize,
    /// Samples with a screenshot attached.
    pub with_image: usize,
    /// Kept ids that could not be flattened, with why (missing task, unreadable).
    pub skipped: Vec<(String, String)>,
}

/// The samples of one trajectory, in step order (each step's action sample, then its
/// extraction samples).
///
/// `counter` measures the prompt budget; pass the tokenizer of the model to be trained
/// so the element list is trimmed as the local policy will trim it at evaluation.
pub fn flatten_trajectory(
    ds: &Dataset,
    t: &Trajectory,
    instruction: &str,
    opts: &FlattenOptions,
    counter: &dyn TokenCounter,
) -> Vec<Sample> {
    let mut prompt = opts.prompt.clone();
    prompt.vision = false;
    let max_steps = opts.max_steps.max(t.model_steps().count());
    let mut out = Vec::new();
    for (i, step) in t.steps.iter().enumerate() {
        if !step.is_model_step() {
            continue;
        }
        let rendered = render(
            &PromptInput {
                instruction,
                state: &step.state,
                history: &t.steps[..i],
                reflection: t.reflection.as_deref(),
                max_steps,
                screenshot: None,
            },
            &prompt,
            counter,
        );
        let mut messages: Vec<SampleMessage> = rendered
            .messages
            .into_iter()
            .map(|m| SampleMessage {
                role: m.role,
                content: m.content,
            })
            .collect();
        messages.push(SampleMessage {
            role: "assistant".into(),
            content: step.output.browser_use_json(),
        });
        out.push(Sample {
            id: format!("{}#{}", t.id, step.index),
            kind: SampleKind::Action,
            trajectory: t.id.clone(),
            step: step.index,
            task_id: t.task_id.clone(),
            prompt_format: rendered.format_version.to_string(),
            messages,
            images: existing_screenshot(ds, step).into_iter().collect(),
        });
        out.extend(extraction_samples(t, step, instruction, &prompt));
    }
    out
}

/// The step's screenshot path if it resolves inside the dataset to an existing file.
fn existing_screenshot(ds: &Dataset, step: &Step) -> Option<String> {
    let rel = step.state.screenshot.as_deref()?;
    let path = ds.resolve(rel).ok()?;
    path.is_file().then(|| rel.to_string())
}

fn extraction_samples(
    t: &Trajectory,
    step: &Step,
    instruction: &str,
    prompt: &PromptOptions,
) -> Vec<Sample> {
    let mut out = Vec::new();
    for (k, (action, result)) in step.output.actions.iter().zip(&step.result).enumerate() {
        if action.name != "extract" {
            continue;
        }
        let Some(content) = result.extracted_content.as_deref().map(extracted_text) else {
            continue;
        };
        if content.is_empty() || result.error.is_some() {
            continue;
        }
        let query = action.str_param("query").unwrap_or(instruction);
        out.push(Sample {
            id: format!("{}#{}/extract{k}", t.id, step.index),
            kind: SampleKind::Extraction,
            trajectory: t.id.clone(),
            step: step.index,
            task_id: t.task_id.clone(),
            prompt_format: PROMPT_FORMAT_VERSION.to_string(),
            messages: vec![
                SampleMessage {
                    role: "user".into(),
                    content: extraction_prompt(instruction, query, step, prompt.token_budget),
                },
                SampleMessage {
                    role: "assistant".into(),
                    content,
                },
            ],
            images: Vec::new(),
        });
    }
    out
}

/// The extracted content without Browser Use's "📄 Extracted from page:" preamble.
fn extracted_text(raw: &str) -> String {
    let text = clean_text(raw);
    let t = text.trim();
    let t = match t.find("Extracted from page") {
        Some(p) if p < 16 => t[p + "Extracted from page".len()..]
            .trim_start_matches(|c: char| c.is_whitespace() || c == ':')
            .trim(),
        _ => t,
    };
    t.to_string()
}

/// The user message of an extraction sample; the page text is cut to fit the budget
/// (counted as one token per 4 characters).
pub fn extraction_prompt(instruction: &str, query: &str, step: &Step, budget: usize) -> String {
    let head = format!(
        "Extract from the web page below the information needed for the query, as part of \
         the task. Reply with the extracted information only.\n<task>\n{}\n</task>\n<query>\n{}\n</query>\n",
        clean_text(instruction).trim(),
        clean_text(query).trim()
    );
    let page = clean_text(&step.state.dom_text);
    let room = budget.saturating_sub(CharApprox.count(&head) + 32);
    let page = if CharApprox.count(&page) > room {
        let cut: String = page.chars().take(room * 4).collect();
        format!("{cut}\n… (page text cut to fit the token budget)")
    } else {
        page.into_owned()
    };
    format!(
        "{head}<page>\nURL: {}\nTitle: {}\n{}\n</page>\n",
        clean_line(&step.state.url),
        clean_line(&step.state.title),
        page.trim_end()
    )
}

/// Flattens the trajectories with the given ids (in the given order). Ids that are
/// not in the dataset, unreadable, or whose task is missing are reported as skipped.
pub fn flatten_ids(
    ds: &Dataset,
    ids: &[String],
    opts: &FlattenOptions,
    counter: &(dyn TokenCounter + Sync),
) -> Result<(Vec<Sample>, FlattenReport)> {
    use rayon::prelude::*;
    let instructions: HashMap<String, String> = ds
        .tasks()?
        .into_iter()
        .map(|t| (t.task_id, t.instruction))
        .collect();
    // In parallel, results in the order of `ids`.
    let results: Vec<Result<Vec<Sample>, String>> = ids
        .par_iter()
        .map(|id| {
            let t = match ds.trajectory_by_id(id) {
                Ok(Some(t)) => t,
                Ok(None) => return Err("not in trajectories.jsonl".to_string()),
                Err(e) => return Err(e.to_string()),
            };
            let instruction = instructions
                .get(&t.task_id)
                .ok_or_else(|| format!("task `{}` is not in tasks.jsonl", t.task_id))?;
            Ok(flatten_trajectory(ds, &t, instruction, opts, counter))
        })
        .collect();
    let mut report = FlattenReport::default();
    let mut samples = Vec::new();
    for (id, r) in ids.iter().zip(results) {
        let s = match r {
            Ok(s) => s,
            Err(why) => {
                report.skipped.push((id.clone(), why));
                continue;
            }
        };
        report.trajectories += 1;
        for x in &s {
            match x.kind {
                SampleKind::Action => report.action_samples += 1,
                SampleKind::Extraction => report.extraction_samples += 1,
            }
            report.with_image += usize::from(!x.images.is_empty());
        }
        samples.extend(s);
    }
    Ok((samples, report))
}

/// Path of the samples file of a dataset.
pub fn samples_path(ds: &Dataset) -> PathBuf {
    ds.root().join(SAMPLES_FILE)
}

/// Writes the samples as JSONL, atomically.
pub fn write_samples(path: &Path, samples: &[Sample]) -> Result<()> {
    let mut buf = Vec::new();
    for s in samples {
        serde_json::to_writer(&mut buf, s)?;
        buf.push(b'\n');
    }
    crate::util::fs::write_atomic(path, &buf)
}

/// Reads a samples file; a bad line is an error naming the file, line and field.
pub fn read_samples(path: &Path) -> Result<Vec<Sample>> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let s: Sample = crate::trajectory::jsonl::parse_record(line.as_bytes(), path, i + 1)?;
        out.push(s);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trajectory::State;

    #[test]
    fn extracted_text_drops_the_browser_use_preamble_and_control_characters() {
        assert_eq!(
            extracted_text("📄  Extracted from page\n: price: $12\n"),
            "price: $12"
        );
        assert_eq!(extracted_text("Total 1 hr 15 min"), "Total 1 hr 15 min");
        assert!(!extracted_text("a\u{1b}[2Jb").contains('\u{1b}'));
    }

    #[test]
    fn extraction_prompt_cuts_long_pages_to_the_budget() {
        let step = Step {
            state: State {
                url: "https://a.test".into(),
                dom_text: "word ".repeat(10_000),
                ..Default::default()
            },
            index: 0,
            output: Default::default(),
            result: Vec::new(),
            timing: None,
            ..Default::default()
        };
        let short = extraction_prompt("find it", "the price", &step, 500);
        assert!(
            CharApprox.count(&short) <= 500,
            "{}",
            CharApprox.count(&short)
        );
        assert!(short.contains("page text cut"));
        assert!(short.contains("the price") && short.contains("https://a.test"));
        let full = extraction_prompt("find it", "the price", &step, 100_000);
        assert!(!full.contains("page text cut"));
    }
}

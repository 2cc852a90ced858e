//! The data model shared by every stage (FORMATS.md): tasks, trajectories, steps,
//! states, elements, model outputs and outcomes.
//!
//! Optional fields default when absent so that records written by older tools still
//! load; required fields (ids, steps) are enforced by serde and reported with their
//! path by [`crate::trajectory::jsonl`].

use crate::action::Action;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::collections::BTreeMap;

/// The only major schema version this build reads and writes.
pub const SCHEMA_VERSION: u32 = 1;

/// A seed task: what the agent is asked to do, on which site.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Task {
    pub task_id: String,
    #[serde(default)]
    pub website: String,
    #[serde(default)]
    pub domain: String,
    #[serde(default)]
    pub category: String,
    pub instruction: String,
    /// Where the task came from: `miniwob:click-button`, `webvoyager:Allrecipes--0`, ...
    #[serde(default)]
    pub source: String,
}

/// One attempt at a task, successful or not.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Trajectory {
    pub id: String,
    pub task_id: String,
    #[serde(default = "one")]
    pub attempt: u32,
    #[serde(default = "one")]
    pub round: u32,
    /// The reflection text this attempt was given, if any.
    #[serde(default)]
    pub reflection: Option<String>,
    /// The tool that produced it: `browser-use@0.13.8`, `rmsweb-collect`, ...
    #[serde(default)]
    pub source: String,
    /// The teacher model's name.
    #[serde(default)]
    pub teacher: String,
    pub outcome: Outcome,
    pub steps: Vec<Step>,
}

fn one() -> u32 {
    1
}

/// How an attempt ended, and who said so.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct Outcome {
    pub success: bool,
    #[serde(default)]
    pub score: Option<f64>,
    #[serde(default)]
    pub judge: Option<String>,
    #[serde(default)]
    pub reason: Option<String>,
    #[serde(default)]
    pub final_answer: Option<String>,
    /// What the producer said about the outcome beyond these fields (Browser Use's
    /// judgement: `impossible_task`, `reached_captcha`, ...), kept as written.
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    pub extra: Map<String, Value>,
}

/// One step: the state seen, the model's output, and what executing it returned.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct Step {
    pub index: u32,
    pub state: State,
    pub output: ModelOutput,
    #[serde(default)]
    pub result: Vec<ActionResult>,
    #[serde(default)]
    pub timing: Option<Timing>,
    /// Written by the agent harness, not produced by a model (Browser Use's
    /// "Initial Actions" step 0, which opens the task's URL): kept for the record
    /// and shown in later steps' history, but not a model step — see
    /// [`Step::is_model_step`].
    #[serde(default, skip_serializing_if = "is_false")]
    pub synthetic: bool,
    /// Fields of the source record that have no place above, in the source's own
    /// layout (`{"state": {...}, "result": [{...}], "metadata": {...}}`), so that an
    /// import loses nothing.
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    pub extra: Map<String, Value>,
}

fn is_false(b: &bool) -> bool {
    !*b
}

impl Step {
    /// Whether a model produced this step's output. The one predicate every stage
    /// that learns from or counts model decisions goes through (SFT flattening, the
    /// quality filter, mining, step statistics, RL prompts): harness steps are
    /// skipped there, though they stay in the record and in the agent history that
    /// later prompts show.
    pub fn is_model_step(&self) -> bool {
        !self.synthetic
    }
}

/// The browser state the model observed before acting.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct State {
    #[serde(default)]
    pub url: String,
    #[serde(default)]
    pub title: String,
    #[serde(default)]
    pub tabs: Vec<Tab>,
    #[serde(default)]
    pub elements: Vec<Element>,
    /// The serialized element list the model saw.
    #[serde(default)]
    pub dom_text: String,
    /// Screenshot path relative to the dataset root.
    #[serde(default)]
    pub screenshot: Option<String>,
    /// Agent memory text before this step's action.
    #[serde(default)]
    pub memory: String,
    /// `index / (len - 1)`, in 0..=1.
    #[serde(default)]
    pub progress: f64,
    /// Text of the page outside the interactive elements (headings, paragraphs),
    /// one line per text node, as the model saw it.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub page_text: String,
    /// The id of the tab being shown (one of `tabs`), when known.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub current_tab: String,
    /// How much of the page lies above and below the viewport.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scroll: Option<Scroll>,
    /// The whole observation message the harness showed the model, verbatim
    /// (Browser Use's `state_message`), when the source recorded it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state_message: Option<String>,
}

/// The viewport's place on the page, in viewport heights ("pages").
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, Default)]
pub struct Scroll {
    pub pages_above: f64,
    pub pages_below: f64,
}

impl State {
    /// The element with the given highlight index, if the page had one.
    pub fn element(&self, index: i64) -> Option<&Element> {
        self.elements.iter().find(|e| i64::from(e.index) == index)
    }
}

/// A browser tab.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct Tab {
    pub id: String,
    #[serde(default)]
    pub url: String,
    #[serde(default)]
    pub title: String,
}

/// An interactive element of the page, with the index the model refers to.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct Element {
    pub index: u32,
    #[serde(default)]
    pub tag: String,
    #[serde(default)]
    pub role: String,
    #[serde(default)]
    pub text: String,
    #[serde(default)]
    pub attrs: BTreeMap<String, String>,
    /// `[x, y, width, height]` in CSS pixels.
    #[serde(default)]
    pub bbox: [f64; 4],
}

/// The model's structured output for a step (Browser Use's agent output).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct ModelOutput {
    #[serde(default)]
    pub thinking: String,
    #[serde(default)]
    pub evaluation_previous_goal: String,
    #[serde(default)]
    pub memory: String,
    #[serde(default)]
    pub next_goal: String,
    #[serde(default)]
    pub actions: Vec<Action>,
}

impl ModelOutput {
    /// The output as Browser Use model-output JSON, one line (the SFT target text;
    /// [`crate::action::render::render_output`]).
    pub fn browser_use_json(&self) -> String {
        crate::action::render::render_output(&crate::action::render::OutputParts {
            thinking: &self.thinking,
            evaluation_previous_goal: &self.evaluation_previous_goal,
            memory: &self.memory,
            next_goal: &self.next_goal,
            actions: &self.actions,
        })
    }
}

/// What executing one action returned.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct ActionResult {
    #[serde(default)]
    pub is_done: bool,
    #[serde(default)]
    pub success: Option<bool>,
    #[serde(default)]
    pub error: Option<String>,
    #[serde(default)]
    pub extracted_content: Option<String>,
}

/// Wall-clock bounds of a step, in seconds since the epoch (or since the run began).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, Default)]
pub struct Timing {
    pub start: f64,
    pub end: f64,
}

impl Trajectory {
    /// Sets `state.progress` of every step to `index / (len - 1)`.
    pub fn fill_progress(&mut self) {
        let n = self.steps.len();
        for (i, s) in self.steps.iter_mut().enumerate() {
            s.state.progress = if n > 1 {
                i as f64 / (n - 1) as f64
            } else {
                0.0
            };
        }
    }

    /// The first action of each model step, in order (steps without actions are
    /// skipped).
    pub fn first_actions(&self) -> impl Iterator<Item = &Action> {
        self.model_steps().filter_map(|s| s.output.actions.first())
    }

    /// The steps a model produced ([`Step::is_model_step`]), in order.
    pub fn model_steps(&self) -> impl Iterator<Item = &Step> {
        self.steps.iter().filter(|s| s.is_model_step())
    }
}

//! A scripted MiniWoB++ teacher: a stand-in for an LLM teacher, NOT a model.
//!
//! It reads the task instruction with a per-task pattern, turns it into a plan of
//! intents (click an element with this text, type this value into that field, ...),
//! and resolves each intent against the element list it observes, so it acts only
//! through the same observation and actions a model has. Its trajectories say
//! `teacher: "scripted-miniwob"`.
//!
//! To produce realistic failures for mining, it makes mistakes at configurable rates
//! ([`MistakeRates`]), drawn from a generator seeded by the episode seed, so runs are
//! reproducible:
//! - **misclick**: a click goes to a distractor (the nearest other element of the
//!   same kind) instead of the target;
//! - **wrong value**: typed or selected text is wrong (another word, another option)
//!   or partial (cut short);
//! - **premature done**: it declares the task done before the plan is finished;
//! - **detour**: it makes one useless step (a scroll) before resuming the plan.
//!
//! **Reflection**: when its input carries a reflection ([`PolicyInput::reflection`]),
//! every mistake rate is multiplied by [`REFLECTION_MISTAKE_FACTOR`] (0.3). This
//! stands in for an LLM teacher that reads the lesson in its prompt and errs less;
//! the scripted teacher does not parse the text, only its presence.
//!
//! Each injected mistake is reported by [`Policy::notes`] so the evaluation can
//! record it in the trajectory's outcome reason.
//!
//! **Thinking**: [`TeacherThinking::Progress`] starts every thinking with the plan's
//! last finished part (`Done: check tB. To check nx5Zf, click nx5Zf [3].`), so that a
//! model writes what it has done before it picks what comes next.
//!
//! The plans (one per task type) are in `plan`; the teacher, its mistakes and its
//! answers are here.

mod plan;

use super::{Policy, PolicyInput, PolicyOutput};
use crate::action::Action;
use crate::trajectory::{Element, ModelOutput, Task};
use crate::util::sanitize::clean_line;
use anyhow::Result;
pub use plan::SUPPORTED_TASKS;
use plan::*;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

/// The teacher name written into trajectories.
pub const TEACHER_NAME: &str = "scripted-miniwob";

/// Factor applied to every mistake rate when the attempt carries a reflection.
pub const REFLECTION_MISTAKE_FACTOR: f64 = 0.3;

/// Probabilities (0..=1) of each mistake mode, drawn per step.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct MistakeRates {
    pub misclick: f64,
    pub wrong_value: f64,
    pub premature_done: f64,
    pub detour: f64,
}

impl MistakeRates {
    /// The same rate for every mode.
    pub fn uniform(rate: f64) -> MistakeRates {
        MistakeRates {
            misclick: rate,
            wrong_value: rate,
            premature_done: rate,
            detour: rate,
        }
    }

    /// Every rate multiplied by `f`.
    pub fn scaled(self, f: f64) -> MistakeRates {
        MistakeRates {
            misclick: self.misclick * f,
            wrong_value: self.wrong_value * f,
            premature_done: self.premature_done * f,
            detour: self.detour * f,
        }
    }
}

/// How the teacher words its thinking.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum TeacherThinking {
    /// The step's goal and how it is reached: `To check nx5Zf, click nx5Zf [3].`
    #[default]
    Plain,
    /// The plan's last finished part first (`Done: nothing.` before the first):
    /// `Done: check tB. To check nx5Zf, click nx5Zf [3].`
    Progress,
    /// Every finished part of the plan first, in order, as the instruction lists them
    /// (`Done: (start).` before the first, a marker no instruction holds):
    /// `Done: check tB, check nx5Zf. To check Q, click Q [4].` Goals that would part
    /// before their label is written are worded as the instruction words them
    /// (click-dialog-2: `click the button labeled "x"`, whichever the label).
    Ledger,
    /// `Progress`'s last finished part, after `Ledger`'s start marker; where the
    /// instruction lists the parts (click-checkboxes), what it still lists, copied
    /// from it: `Done: check tB. Left: nx5Zf and click Submit. To check nx5Zf, click
    /// nx5Zf [3].` Click-dialog-2's goals take the instruction's words, and a label
    /// the page does not show is named as the page does: `click the button labeled
    /// "x", the close button`.
    Checklist,
    /// `Checklist` with the page's title copied before the plan's next part, so
    /// that the choice a title decides (checkboxes, radio buttons or a list, whose
    /// instructions read alike) follows a word the model has just copied from the
    /// page: `Done: (start). Page: Click Checkboxes Task. Left: tB, nx5Zf and click
    /// Submit. To check tB, click tB [1].` A page without a title gets no `Page:`.
    Titled,
    /// `Checklist` after the page's title, so that `Done:` stays next to the choice
    /// it precedes and the title is already copied when that choice is made: `Page:
    /// Click Checkboxes Task. Done: (start). Left: tB, nx5Zf and click Submit. To
    /// check tB, click tB [1].` A page without a title gets no `Page:`.
    Headed,
}

impl TeacherThinking {
    /// Whether this is the default wording (left out of a recipe's collect key, so
    /// folders made before the choice existed stay up to date).
    pub fn is_plain(&self) -> bool {
        *self == TeacherThinking::Plain
    }
}

/// The scripted MiniWoB teacher (see the module docs).
pub struct ScriptedTeacher {
    rates: MistakeRates,
    thinking: TeacherThinking,
    /// How many parts of the plan were finished when the current step began (set by
    /// each `act` before it advances `pos`).
    done: usize,
    rng: StdRng,
    task: String,
    plan: Option<Vec<Intent>>,
    /// The items the instruction lists, where it lists the plan's parts.
    listed: Option<Vec<String>>,
    /// The title of the page the current step observes, as the prompt shows it.
    title: String,
    pos: usize,
    detoured_at: Option<usize>,
    notes: Vec<String>,
}

impl ScriptedTeacher {
    /// Carries out the plan's next intent on `target`, with the mistakes `rates`
    /// roll: a misclick on a nearby element, a corrupted value typed, another option
    /// chosen. Each mistake is noted.
    fn perform(
        &mut self,
        intent: Intent,
        target: &Element,
        elements: &[Element],
        step: usize,
        rates: MistakeRates,
        goal: &str,
    ) -> PolicyOutput {
        let idx = target.index;
        match intent {
            Intent::Click(m, _) => {
                let mut chosen = target;
                if self.roll(rates.misclick) {
                    // The nearest other element of the same kind, else any other element.
                    let others: Vec<&Element> =
                        elements.iter().filter(|e| e.index != idx).collect();
                    let same: Vec<&Element> = others
                        .iter()
                        .copied()
                        .filter(|e| m.kind_matches(e))
                        .collect();
                    let pool = if same.is_empty() { others } else { same };
                    if let Some(d) = pool.iter().copied().min_by_key(|e| e.index.abs_diff(idx)) {
                        chosen = d;
                        self.notes
                            .push(format!("misclick@{step}: [{}] instead of [{idx}]", d.index));
                    }
                }
                let a = Action::new("click", json!({"index": chosen.index}));
                self.output(click_thinking(goal, chosen), goal, a, step)
            }
            Intent::Input(_, value, _) => {
                let mut v = value.clone();
                if self.roll(rates.wrong_value) {
                    let (w, kind) = corrupt(&value, &mut self.rng);
                    self.notes
                        .push(format!("{kind}@{step}: {w:?} instead of {value:?}"));
                    v = w;
                }
                let a = Action::new("input", json!({"index": idx, "text": v, "clear": true}));
                self.output(
                    format!("To {goal}, type into element [{idx}]."),
                    goal,
                    a,
                    step,
                )
            }
            Intent::Select(_, value, _) => {
                let mut v = value.clone();
                if self.roll(rates.wrong_value) {
                    let options: Vec<&str> = target
                        .text
                        .split(" | ")
                        .filter(|o| !o.eq_ignore_ascii_case(&value))
                        .collect();
                    if !options.is_empty() {
                        let o = options[self.rng.random_range(0..options.len())].to_string();
                        self.notes
                            .push(format!("wrong value@{step}: {o:?} instead of {value:?}"));
                        v = o;
                    }
                }
                let a = Action::new("select_dropdown", json!({"index": idx, "text": v}));
                self.output(
                    format!("To {goal}, choose it in the list [{idx}]."),
                    goal,
                    a,
                    step,
                )
            }
        }
    }

    /// A teacher making mistakes at the given rates.
    pub fn new(rates: MistakeRates) -> ScriptedTeacher {
        ScriptedTeacher {
            rates,
            thinking: TeacherThinking::Plain,
            done: 0,
            rng: StdRng::seed_from_u64(0),
            task: String::new(),
            plan: None,
            listed: None,
            title: String::new(),
            pos: 0,
            detoured_at: None,
            notes: Vec::new(),
        }
    }

    /// The same teacher wording its thinking the `thinking` way.
    pub fn with_thinking(mut self, thinking: TeacherThinking) -> ScriptedTeacher {
        self.thinking = thinking;
        self
    }

    /// Whether a task (with or without the `miniwob:` prefix) is supported.
    pub fn supports(task: &str) -> bool {
        SUPPORTED_TASKS.contains(&crate::env::miniwob::task_name(task))
    }

    fn roll(&mut self, p: f64) -> bool {
        p > 0.0 && self.rng.random::<f64>() < p
    }

    fn output(&self, thinking: String, goal: &str, action: Action, step: usize) -> PolicyOutput {
        let thinking = match self.thinking {
            TeacherThinking::Plain => thinking,
            TeacherThinking::Progress => {
                let last = self.finished().last().copied().unwrap_or("nothing");
                format!("Done: {last}. {thinking}")
            }
            TeacherThinking::Ledger => match self.finished().as_slice() {
                [] => format!("Done: (start). {thinking}"),
                done => format!("Done: {}. {thinking}", done.join(", ")),
            },
            TeacherThinking::Checklist | TeacherThinking::Titled | TeacherThinking::Headed => {
                let last = self.finished().last().copied().unwrap_or("(start)");
                // The title goes in front (headed) or after `Done:` (titled).
                let page = || format!("Page: {}. ", self.title);
                let (head, mid) = match self.thinking {
                    _ if self.title.is_empty() => (String::new(), String::new()),
                    TeacherThinking::Headed => (page(), String::new()),
                    TeacherThinking::Titled => (String::new(), page()),
                    _ => (String::new(), String::new()),
                };
                let left = self
                    .left()
                    .map(|l| format!("Left: {l}. "))
                    .unwrap_or_default();
                format!("{head}Done: {last}. {mid}{left}{thinking}")
            }
        };
        let output = ModelOutput {
            thinking,
            evaluation_previous_goal: if step == 0 {
                String::new()
            } else {
                "Success: the previous action was executed.".into()
            },
            memory: format!(
                "Plan step {} of {}.",
                (self.pos + 1).min(self.plan_len()),
                self.plan_len()
            ),
            next_goal: goal.to_string(),
            actions: vec![action],
        };
        PolicyOutput {
            raw: browser_use_json(&output),
            output,
            parse_error: None,
        }
    }

    /// The goals of the parts finished when the current step began, in order.
    fn finished(&self) -> Vec<&str> {
        let plan = self.plan.as_deref().unwrap_or_default();
        plan[..self.done.min(plan.len())]
            .iter()
            .map(Intent::goal)
            .collect()
    }

    /// What the instruction still lists when the current step begins, in its words
    /// (`nx5Zf, Cun and click Submit`, then `click Submit`); `None` once the plan is
    /// finished or where the instruction lists no parts.
    fn left(&self) -> Option<String> {
        let items = self.listed.as_deref()?;
        let rest = items.get(self.done..)?;
        Some(if rest.is_empty() {
            "click Submit".to_string()
        } else {
            format!("{} and click Submit", rest.join(", "))
        })
    }

    fn plan_len(&self) -> usize {
        self.plan.as_ref().map_or(0, Vec::len)
    }
}

/// The thinking of a click: the element's text as the page shows it, then its index
/// (`To open Tab #1, click Tab #1 [3].`), the order in which the `rmsweb-echo`
/// prompt shows them, so a model copies the index that follows the text it has just
/// written. An element without text is named by its index alone.
fn click_thinking(goal: &str, e: &Element) -> String {
    let text = crate::env::observe::shown_text(e);
    if text.trim().is_empty() {
        format!("To {goal}, click element [{}].", e.index)
    } else {
        format!("To {goal}, click {text} [{}].", e.index)
    }
}

/// The Browser Use JSON form of an output (what a model would have written).
pub fn browser_use_json(o: &ModelOutput) -> String {
    let actions: Vec<Value> = o
        .actions
        .iter()
        .map(|a| json!({ a.name.clone(): Value::Object(a.params.clone()) }))
        .collect();
    json!({
        "thinking": o.thinking,
        "evaluation_previous_goal": o.evaluation_previous_goal,
        "memory": o.memory,
        "next_goal": o.next_goal,
        "action": actions,
    })
    .to_string()
}

/// A wrong or partial version of a value.
fn corrupt(value: &str, rng: &mut StdRng) -> (String, &'static str) {
    let chars: Vec<char> = value.chars().collect();
    if chars.len() > 1 && rng.random_bool(0.5) {
        let keep = rng.random_range(1..chars.len());
        (chars[..keep].iter().collect(), "partial value")
    } else {
        let mut w: Vec<char> = chars.iter().rev().copied().collect();
        if w == chars {
            w.push('x');
        }
        (w.into_iter().collect(), "wrong value")
    }
}

impl Policy for ScriptedTeacher {
    fn name(&self) -> String {
        TEACHER_NAME.to_string()
    }

    fn reset(&mut self, task: &Task, seed: u64) {
        let name = task
            .source
            .strip_prefix("miniwob:")
            .unwrap_or(&task.category)
            .to_string();
        let mut h: u64 = 0xcbf29ce484222325;
        for b in name.bytes() {
            h = (h ^ u64::from(b)).wrapping_mul(0x100000001b3);
        }
        self.rng = StdRng::seed_from_u64(seed ^ h);
        self.task = name;
        self.plan = None;
        self.listed = None;
        self.pos = 0;
        self.detoured_at = None;
        self.notes.clear();
    }

    fn notes(&self) -> Vec<String> {
        self.notes.clone()
    }

    fn act(&mut self, input: &PolicyInput<'_>) -> Result<PolicyOutput> {
        if self.task.is_empty() {
            self.reset(input.task, 0);
        }
        if self.plan.is_none() {
            let goals = match self.thinking {
                TeacherThinking::Plain | TeacherThinking::Progress => Goals::Own,
                TeacherThinking::Ledger => Goals::Echoed,
                TeacherThinking::Checklist | TeacherThinking::Titled | TeacherThinking::Headed => {
                    Goals::EchoedNamed
                }
            };
            let instr = &input.task.instruction;
            self.plan = Some(plan(&self.task, instr, goals)?);
            self.listed = listed(&self.task, instr);
        }
        let step = input.history.len();
        self.done = self.pos;
        self.title = clean_line(input.state.title.trim()).into_owned();
        let elements = &input.state.elements;
        let rates = if input.reflection.is_some_and(|r| !r.trim().is_empty()) {
            self.rates.scaled(REFLECTION_MISTAKE_FACTOR)
        } else {
            self.rates
        };
        let Some(intent) = self.plan.as_ref().and_then(|p| p.get(self.pos)).cloned() else {
            let a = Action::new(
                "done",
                json!({"text": "All steps of the task are done.", "success": true}),
            );
            return Ok(self.output(
                "Every part of the task has been carried out.".into(),
                "finish",
                a,
                step,
            ));
        };
        // Premature done: only once at least one step was taken and work remains.
        if step > 0 && self.roll(rates.premature_done) {
            self.notes.push(format!("premature_done@{step}"));
            let a = Action::new(
                "done",
                json!({"text": "The task is complete.", "success": true}),
            );
            return Ok(self.output("The task looks complete.".into(), "finish", a, step));
        }
        if self.detoured_at != Some(self.pos) && self.roll(rates.detour) {
            self.detoured_at = Some(self.pos);
            self.notes.push(format!("detour@{step}"));
            let a = Action::new("scroll", json!({"down": true, "pages": 0.5}));
            return Ok(self.output(
                "Let me look at the rest of the page first.".into(),
                "scroll to see more of the page",
                a,
                step,
            ));
        }
        let goal = intent.goal().to_string();
        let matcher = match &intent {
            Intent::Click(m, _) | Intent::Input(m, _, _) | Intent::Select(m, _, _) => m,
        };
        let Some(target) = matcher.resolve(elements) else {
            let a = Action::new(
                "done",
                json!({"text": format!("Could not find the element to {goal}."), "success": false}),
            );
            self.pos = self.plan_len();
            return Ok(self.output(
                format!("No element on the page lets me {goal}."),
                &goal,
                a,
                step,
            ));
        };
        self.pos += 1;
        Ok(self.perform(intent, target, elements, step, rates, &goal))
    }
}

#[cfg(test)]
mod tests;

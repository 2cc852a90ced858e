//! Reflectors: distil a short reflection (what went wrong, at which step, what to do
//! instead) from a finished attempt, for the next attempt's prompt.

use crate::policy::chat::ChatClient;
use crate::policy::prompt::ChatMessage;
use crate::trajectory::{Step, Task, Trajectory};
use crate::util::sanitize::clean_line;

/// Longest reflection kept (characters); longer texts are cut at a word boundary.
pub const MAX_REFLECTION_CHARS: usize = 600;

/// Why an attempt is retried.
#[derive(Debug, Clone, PartialEq)]
pub enum RetryCause {
    /// The page did not reward the attempt.
    Failed,
    /// It succeeded, but in `steps` where `shortest` are known to suffice.
    Detour { steps: usize, shortest: usize },
}

/// A reflection and who wrote it.
#[derive(Debug, Clone, PartialEq)]
pub struct Reflection {
    pub text: String,
    /// `heuristic` or `llm:<model>`.
    pub reflector: String,
    /// A remark about how it was made (e.g. the LLM failed and the heuristic stood in).
    pub note: Option<String>,
}

/// Turns a finished attempt into a reflection.
pub trait Reflector {
    fn reflect(&mut self, task: &Task, attempt: &Trajectory, cause: &RetryCause) -> Reflection;
}

/// The rule-based reflector: names the first error result, a loop of repeated
/// actions, a premature `done`, a detour or the step that ended the episode, and says
/// what to do instead, in a few sentences.
#[derive(Debug, Clone, Default)]
pub struct HeuristicReflector;

fn action_text(step: &Step) -> String {
    let acts: Vec<String> = step.output.actions.iter().map(describe_action).collect();
    let mut s = if acts.is_empty() {
        "no action".to_string()
    } else {
        acts.join(", ")
    };
    // Name the clicked element's text so the lesson is concrete.
    if let Some(a) = step.output.actions.first()
        && let Some(i) = a.target_index()
        && let Some(e) = step.state.element(i)
    {
        let t = clean_line(e.text.trim());
        if !t.is_empty() {
            let t: String = t.chars().take(40).collect();
            s.push_str(&format!(" on {} \"{t}\"", e.tag));
        }
    }
    s
}

fn describe_action(a: &crate::action::Action) -> String {
    clean_line(&a.short()).into_owned()
}

/// The first run of at least 3 steps with the same actions: (first index, last index).
fn first_loop(steps: &[Step]) -> Option<(usize, usize)> {
    let mut start = 0;
    for i in 1..=steps.len() {
        let same = i < steps.len()
            && !steps[i].output.actions.is_empty()
            && steps[i].output.actions == steps[start].output.actions;
        if !same {
            if i - start >= 3 {
                return Some((start, i - 1));
            }
            start = i;
        }
    }
    None
}

/// Texts the instruction puts in quotes.
fn quoted(instruction: &str) -> Vec<String> {
    instruction
        .split('"')
        .skip(1)
        .step_by(2)
        .map(|q| q.trim().to_lowercase())
        .filter(|q| !q.is_empty())
        .collect()
}

/// " Step N clicked \"X\" but the instruction names \"Y\"." for the first click whose
/// element text is not among the instruction's quoted texts (when it quotes any).
fn mismatch(task: &Task, steps: &[Step]) -> String {
    let names = quoted(&task.instruction);
    if names.is_empty() {
        return String::new();
    }
    for s in steps {
        for a in &s.output.actions {
            if a.name != "click" {
                continue;
            }
            let Some(e) = a.target_index().and_then(|i| s.state.element(i)) else {
                continue;
            };
            let text = e.text.trim().to_lowercase();
            if !text.is_empty() && !names.contains(&text) {
                return format!(
                    " Step {} clicked \"{}\" but the instruction names \"{}\".",
                    s.index + 1,
                    clean_line(e.text.trim()),
                    clean_line(&names.join("\", \""))
                );
            }
        }
    }
    String::new()
}

fn cut(text: &str) -> String {
    let text = clean_line(text).into_owned();
    if text.chars().count() <= MAX_REFLECTION_CHARS {
        return text;
    }
    let mut s: String = text.chars().take(MAX_REFLECTION_CHARS).collect();
    if let Some(sp) = s.rfind(' ') {
        s.truncate(sp);
    }
    s.push('…');
    s
}

impl HeuristicReflector {
    /// The reflection text (see the type docs).
    // Kept whole: one reflection per cause, tried in order (a detour, the first error,
    // a loop, a premature `done`, the last step); the first that applies writes it.
    pub fn text(&self, task: &Task, t: &Trajectory, cause: &RetryCause) -> String {
        let steps = &t.steps;
        let goal = format!(
            "The task was: \"{}\".",
            clean_line(&task.instruction)
                .chars()
                .take(160)
                .collect::<String>()
        );
        if let RetryCause::Detour { steps: n, shortest } = cause {
            let useless: Vec<String> = steps
                .iter()
                .filter(|s| s.output.actions.iter().any(|a| a.is_trivial()))
                .map(|s| format!("step {} ({})", s.index + 1, action_text(s)))
                .collect();
            let which = if useless.is_empty() {
                "Some steps did not move the task forward.".to_string()
            } else {
                format!("Unneeded: {}.", useless.join(", "))
            };
            return cut(&format!(
                "The previous attempt succeeded but took {n} steps where {shortest} suffice. {which} Instead, act on the target elements directly, without scrolling or waiting first."
            ));
        }
        if let Some(s) = steps
            .iter()
            .find(|s| s.result.iter().any(|r| r.error.is_some()))
        {
            let err = s
                .result
                .iter()
                .find_map(|r| r.error.clone())
                .unwrap_or_default();
            let err: String = clean_line(&err).chars().take(120).collect();
            return cut(&format!(
                "Step {} failed: {} gave the error \"{err}\". Instead, pick an element index that is in the current element list and an action that applies to it. {goal}",
                s.index + 1,
                action_text(s)
            ));
        }
        if let Some((a, b)) = first_loop(steps) {
            return cut(&format!(
                "Steps {}-{} repeated the same action ({}) without progress. Instead, after one try, check the page and do the next part of the task. {goal}",
                a + 1,
                b + 1,
                action_text(&steps[a])
            ));
        }
        let last = steps.last();
        let reason = t.outcome.reason.clone().unwrap_or_default();
        let page_finished = reason.starts_with("page reward");
        if let Some(s) = last
            && !page_finished
            && s.output.actions.iter().any(|a| a.name == "done")
        {
            return cut(&format!(
                "Step {} called done before the task was finished (the page gave no reward). Instead, carry out every part of the instruction, and call done only after the last one. {goal}",
                s.index + 1
            ));
        }
        if let Some(s) = last
            && page_finished
        {
            // The page ended the episode without reward: the deciding step is the last
            // one; an earlier click on another element than named may be the cause.
            let earlier: Vec<String> = steps[..steps.len() - 1]
                .iter()
                .filter(|p| p.output.actions.iter().any(|a| a.name != "done"))
                .map(|p| format!("step {}: {}", p.index + 1, action_text(p)))
                .collect();
            let before = if earlier.is_empty() {
                String::new()
            } else {
                format!(" Before it: {}.", earlier.join("; "))
            };
            let named = mismatch(task, steps);
            return cut(&format!(
                "Step {} ({}) ended the episode and the page judged it wrong.{named}{before} Instead, check that each clicked element and each typed value matches the instruction exactly before acting. {goal}",
                s.index + 1,
                action_text(s)
            ));
        }
        let n = steps.len();
        cut(&format!(
            "The attempt stopped after {n} steps without finishing ({}). Instead, do the parts of the instruction in order with one action each, without detours. {goal}",
            clean_line(&reason).chars().take(120).collect::<String>()
        ))
    }
}

impl Reflector for HeuristicReflector {
    fn reflect(&mut self, task: &Task, attempt: &Trajectory, cause: &RetryCause) -> Reflection {
        Reflection {
            text: self.text(task, attempt, cause),
            reflector: "heuristic".into(),
            note: None,
        }
    }
}

/// A reflector over an OpenAI-compatible chat endpoint; when the request fails or the
/// answer is empty, the heuristic reflection is used and the failure noted.
pub struct LlmReflector {
    pub client: ChatClient,
    pub fallback: HeuristicReflector,
}

/// The messages sent to the LLM reflector: the task, each step's action, result and
/// goal, the outcome, and why a retry is wanted.
pub fn reflection_messages(task: &Task, t: &Trajectory, cause: &RetryCause) -> Vec<ChatMessage> {
    let mut user = format!("Task: {}\n\nSteps:\n", clean_line(&task.instruction));
    for s in &t.steps {
        let errs: Vec<String> = s
            .result
            .iter()
            .filter_map(|r| r.error.as_deref().map(|e| clean_line(e).into_owned()))
            .collect();
        user.push_str(&format!(
            "{}. goal: {} | action: {}{}\n",
            s.index + 1,
            clean_line(&s.output.next_goal),
            action_text(s),
            if errs.is_empty() {
                String::new()
            } else {
                format!(" | error: {}", errs.join("; "))
            }
        ));
    }
    user.push_str(&format!(
        "\nOutcome: {} ({})\n",
        if t.outcome.success {
            "success"
        } else {
            "failure"
        },
        clean_line(t.outcome.reason.as_deref().unwrap_or(""))
    ));
    if let RetryCause::Detour { steps, shortest } = cause {
        user.push_str(&format!(
            "It took {steps} steps where {shortest} are known to suffice.\n"
        ));
    }
    user.push_str(
        "\nIn at most three sentences: what went wrong, at which step, and what to do instead next time.",
    );
    vec![
        ChatMessage::new(
            "system",
            "You review a web agent's attempt and write a short, concrete lesson for its next attempt.",
        ),
        ChatMessage::new("user", user),
    ]
}

impl Reflector for LlmReflector {
    fn reflect(&mut self, task: &Task, attempt: &Trajectory, cause: &RetryCause) -> Reflection {
        let model = self.client.config().model.clone();
        match self
            .client
            .complete(&reflection_messages(task, attempt, cause))
        {
            Ok(text) if !text.trim().is_empty() => Reflection {
                text: cut(text.trim()),
                reflector: format!("llm:{}", clean_line(&model)),
                note: None,
            },
            Ok(_) => Reflection {
                note: Some("llm reflector answered nothing; heuristic used".into()),
                ..self.fallback.reflect(task, attempt, cause)
            },
            Err(e) => Reflection {
                note: Some(format!(
                    "llm reflector failed ({}); heuristic used",
                    clean_line(&format!("{e:#}"))
                )),
                ..self.fallback.reflect(task, attempt, cause)
            },
        }
    }
}

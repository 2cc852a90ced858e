//! Logging what `rmsweb serve` was asked and answered, so deployments become data.
//!
//! Every exchange is appended to `<dataset>/serve/exchanges.jsonl` (`{ts, model,
//! duration_ms, messages, choices: [{text, finish_reason}]}`, one line each,
//! fsynced). Exchanges whose last user message is a Browser Use state message
//! (`<user_request>` and `<step_info>StepN`) are also assembled into trajectories:
//! one per session (the same task, step numbers rising), each step's state read
//! from the message as the importer reads `state_message` (elements, page text,
//! tabs, scroll, the message verbatim) and its output from the first choice. A
//! session is written to `trajectories.jsonl` (its task to `tasks.jsonl` when new)
//! once its answer holds `done` — success as `done` says — or, unfinished, when a
//! new session of the same task starts or the server stops (then as a failure).
//! Trajectories say `source: "rmsweb-serve"` and the served model as teacher.

use crate::action::parse::parse_response;
use crate::model::Message;
use crate::trajectory::import::derived_task_id;
use crate::trajectory::import::dom_text;
use crate::trajectory::{
    ActionResult, Dataset, ModelOutput, Outcome, State, Step, Tab, Task, Trajectory,
};
use anyhow::{Context, Result};
use serde_json::json;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

/// Where exchanges go, relative to the dataset root.
pub const EXCHANGES_FILE: &str = "serve/exchanges.jsonl";

/// The trajectory being assembled for one task.
struct Session {
    steps: Vec<Step>,
    last_step_number: u32,
}

/// The exchange log of a serving run.
pub struct ExchangeLog {
    root: PathBuf,
    model: String,
    state: Mutex<Sessions>,
}

struct Sessions {
    ds: Dataset,
    open: HashMap<String, Session>,
    attempts: HashMap<String, u32>,
}

impl ExchangeLog {
    /// Opens (or creates) the dataset at `root`.
    pub fn open(root: &Path, model: &str) -> Result<Self> {
        let ds = if root.join("trajectories.jsonl").exists() || root.join("tasks.jsonl").exists() {
            Dataset::open(root)?
        } else {
            Dataset::create(root, "serve", "trajectories logged by rmsweb serve")?
        };
        std::fs::create_dir_all(root.join("serve"))
            .with_context(|| format!("creating {}", root.join("serve").display()))?;
        let mut attempts = HashMap::new();
        for s in ds.summaries().into_iter().flatten() {
            let a = attempts.entry(s.task_id.clone()).or_insert(0);
            *a = (*a).max(s.attempt);
        }
        Ok(ExchangeLog {
            root: root.to_path_buf(),
            model: model.to_string(),
            state: Mutex::new(Sessions {
                ds,
                open: HashMap::new(),
                attempts,
            }),
        })
    }

    /// Records one exchange; problems are logged, never returned to the client.
    pub fn record(&self, messages: &[Message], choices: &[(String, &str)], took: Duration) {
        if let Err(e) = self.try_record(messages, choices, took) {
            tracing::warn!("serve log: {e:#}");
        }
    }

    fn try_record(
        &self,
        messages: &[Message],
        choices: &[(String, &str)],
        took: Duration,
    ) -> Result<()> {
        let line = json!({
            "ts": chrono::Utc::now().to_rfc3339(),
            "model": self.model,
            "duration_ms": took.as_millis() as u64,
            "messages": messages,
            "choices": choices.iter().map(|(t, f)| json!({"text": t, "finish_reason": f})).collect::<Vec<_>>(),
        });
        crate::trajectory::jsonl::append(&self.root.join(EXCHANGES_FILE), &[line])?;
        let Some(user) = messages.iter().rev().find(|m| m.role == "user") else {
            return Ok(());
        };
        let Some((task, step_number)) = browser_use_step(&user.content) else {
            return Ok(());
        };
        let answer = choices.first().map_or("", |(t, _)| t.as_str());
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if st
            .open
            .get(&task)
            .is_some_and(|s| step_number <= s.last_step_number)
            && let Some(old) = st.open.remove(&task)
        {
            self.write(&mut st, &task, old, None)?;
        }
        let session = st.open.entry(task.clone()).or_insert(Session {
            steps: Vec::new(),
            last_step_number: 0,
        });
        let step = step_of(&user.content, answer, session.steps.len());
        let done = step
            .output
            .actions
            .iter()
            .find(|a| a.name == "done")
            .map(|a| {
                (
                    a.bool_param("success").unwrap_or(true),
                    a.str_param("text").map(str::to_owned),
                )
            });
        session.steps.push(step);
        session.last_step_number = step_number;
        if let Some(done) = done
            && let Some(s) = st.open.remove(&task)
        {
            self.write(&mut st, &task, s, Some(done))?;
        }
        Ok(())
    }

    /// Writes the sessions still open as failures (the server is stopping).
    pub fn close(&self) -> Result<()> {
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let open: Vec<(String, Session)> = st.open.drain().collect();
        for (task, s) in open {
            self.write(&mut st, &task, s, None)?;
        }
        Ok(())
    }

    fn write(
        &self,
        st: &mut Sessions,
        instruction: &str,
        s: Session,
        done: Option<(bool, Option<String>)>,
    ) -> Result<()> {
        let task_id = derived_task_id("", instruction);
        let known = st.ds.tasks()?.iter().any(|t| t.task_id == task_id);
        if !known {
            st.ds.append_tasks(&[Task {
                task_id: task_id.clone(),
                website: String::new(),
                domain: String::new(),
                category: String::new(),
                instruction: instruction.to_string(),
                source: "rmsweb-serve".into(),
            }])?;
        }
        let attempt = {
            let a = st.attempts.entry(task_id.clone()).or_insert(0);
            *a += 1;
            *a
        };
        let outcome = match done {
            Some((success, text)) => Outcome {
                success,
                judge: Some("serve:done".into()),
                reason: Some(format!("the final done action reported success={success}")),
                final_answer: text,
                ..Outcome::default()
            },
            None => Outcome {
                success: false,
                judge: Some("serve:done".into()),
                reason: Some("the session ended without a done action".into()),
                ..Outcome::default()
            },
        };
        let mut t = Trajectory {
            id: format!("{task_id}-a{attempt}"),
            task_id,
            attempt,
            round: 1,
            reflection: None,
            source: "rmsweb-serve".into(),
            teacher: self.model.clone(),
            outcome,
            steps: s.steps,
        };
        t.fill_progress();
        st.ds.append_trajectories(&[t])
    }
}

/// The task and step number of a Browser Use state message.
fn browser_use_step(text: &str) -> Option<(String, u32)> {
    let inner = |open: &str, close: &str| -> Option<&str> {
        let s = text.find(open)? + open.len();
        let e = s + text[s..].find(close)?;
        Some(text[s..e].trim())
    };
    let task = inner("<user_request>", "</user_request>")?.to_string();
    let info = inner("<step_info>", "</step_info>")?;
    let digits: String = info
        .trim_start_matches("Step")
        .trim_start()
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    Some((task, digits.parse().ok()?))
}

/// A step from a state message and the model's answer to it.
fn step_of(message: &str, answer: &str, index: usize) -> Step {
    let section = dom_text::browser_state_section(message);
    let page = dom_text::parse_page(section);
    let tabs: Vec<Tab> = section
        .lines()
        .filter_map(|l| {
            let rest = l.strip_prefix("Tab ")?;
            let (id, rest) = rest.split_once(": ")?;
            let (url, title) = rest.split_once(" - ").unwrap_or((rest, ""));
            Some(Tab {
                id: id.to_string(),
                url: url.to_string(),
                title: title.to_string(),
            })
        })
        .collect();
    let current = tabs
        .iter()
        .find(|t| t.id == page.current_tab)
        .or(tabs.first())
        .cloned()
        .unwrap_or_default();
    let (output, result) = match parse_response(answer) {
        Ok(p) => (
            ModelOutput {
                thinking: p.thinking.unwrap_or_default(),
                evaluation_previous_goal: p.evaluation_previous_goal.unwrap_or_default(),
                memory: p.memory.unwrap_or_default(),
                next_goal: p.next_goal.unwrap_or_default(),
                actions: p.actions,
            },
            Vec::new(),
        ),
        Err(e) => (
            ModelOutput::default(),
            vec![ActionResult {
                error: Some(format!("the answer has no valid action: {}", e.message)),
                ..ActionResult::default()
            }],
        ),
    };
    Step {
        index: index as u32,
        state: State {
            url: current.url,
            title: current.title,
            tabs,
            elements: page.elements,
            dom_text: section.to_string(),
            page_text: page.page_text,
            current_tab: page.current_tab,
            scroll: page.scroll,
            state_message: Some(message.to_string()),
            ..State::default()
        },
        output,
        result,
        ..Step::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const STATE: &str = "<user_request>\nFind W-132.\n</user_request>\n<agent_history>\n</agent_history>\n<browser_state>\nCurrent tab: 5BA7\nAvailable tabs:\nTab 5BA7: http://a.test/ - Parts\n\nInteractive elements:\n[1]<a />\n\tBack\nW-132 is red.\n</browser_state>\n<step_info>Step2 maximum:8\nToday:2026-01-01</step_info>";

    #[test]
    fn a_session_ending_in_done_becomes_a_trajectory() {
        let dir = tempfile::tempdir().unwrap();
        let log = ExchangeLog::open(dir.path(), "tiny").unwrap();
        let msgs = |step: u32| {
            vec![
                Message::new("system", "sys"),
                Message::new("user", STATE.replace("Step2", &format!("Step{step}"))),
            ]
        };
        log.record(
            &msgs(1),
            &[(r#"{"action":[{"click":{"index":1}}]}"#.into(), "stop")],
            Duration::ZERO,
        );
        log.record(
            &msgs(2),
            &[(
                r#"{"memory":"m","action":[{"done":{"text":"red","success":true}}]}"#.into(),
                "stop",
            )],
            Duration::ZERO,
        );
        // A new session of the same task, left open, is written as a failure at close.
        log.record(&msgs(1), &[("not json".into(), "length")], Duration::ZERO);
        log.close().unwrap();
        let ds = Dataset::open(dir.path()).unwrap();
        assert_eq!(ds.tasks().unwrap()[0].instruction, "Find W-132.");
        let t = ds.trajectory(0).unwrap();
        assert!(t.outcome.success);
        assert_eq!(t.steps.len(), 2);
        assert_eq!(t.steps[1].state.page_text, "W-132 is red.");
        assert_eq!(t.steps[1].state.url, "http://a.test/");
        assert_eq!(t.steps[1].output.memory, "m");
        let t2 = ds.trajectory(1).unwrap();
        assert!(!t2.outcome.success && t2.attempt == 2);
        assert!(t2.steps[0].result[0].error.is_some());
        let lines = std::fs::read_to_string(dir.path().join(EXCHANGES_FILE)).unwrap();
        assert_eq!(lines.lines().count(), 3);
    }
}

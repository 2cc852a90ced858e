//! SFT chat samples built from a dataset's successful trajectories.
//!
//! Interim: until the curate stage's flattened samples and the project's prompt
//! renderer exist, this builds one sample per step — system prompt, a user turn
//! with the task, memory, page and element list, and the step's model output in
//! Browser Use's JSON form as the assistant turn. Kept isolated so it can be swapped.

use crate::model::Message;
use crate::trajectory::{Dataset, ModelOutput, Step, Task};
use anyhow::Result;
use serde_json::{Map, Value, json};
use std::collections::HashMap;

/// The system prompt of the interim renderer.
pub const SYSTEM_PROMPT: &str = "You are a web agent. Given the task, your memory and the interactive elements of the page, reply with JSON: {\"thinking\", \"evaluation_previous_goal\", \"memory\", \"next_goal\", \"action\": [{name: params}]}.";

/// The model output in Browser Use's JSON form.
pub fn output_json(out: &ModelOutput) -> String {
    let actions: Vec<Value> = out
        .actions
        .iter()
        .map(|a| {
            let mut m = Map::new();
            m.insert(a.name.clone(), Value::Object(a.params.clone()));
            Value::Object(m)
        })
        .collect();
    json!({
        "thinking": out.thinking,
        "evaluation_previous_goal": out.evaluation_previous_goal,
        "memory": out.memory,
        "next_goal": out.next_goal,
        "action": actions,
    })
    .to_string()
}

/// The user turn for a step.
pub fn user_prompt(task: &str, step: &Step) -> String {
    let s = &step.state;
    format!(
        "Task: {task}\nMemory: {}\nURL: {}\nTitle: {}\nElements:\n{}",
        s.memory, s.url, s.title, s.dom_text
    )
}

/// One chat sample per step of every successful trajectory (steps without actions
/// are skipped). Unreadable records are an error naming file and line.
pub fn from_dataset(ds: &Dataset) -> Result<Vec<Vec<Message>>> {
    let tasks: HashMap<String, Task> = ds
        .tasks()?
        .into_iter()
        .map(|t| (t.task_id.clone(), t))
        .collect();
    let mut out = Vec::new();
    for i in 0..ds.trajectory_count() {
        let t = ds.trajectory(i)?;
        if !t.outcome.success {
            continue;
        }
        let instruction = tasks
            .get(&t.task_id)
            .map_or(t.task_id.as_str(), |task| task.instruction.as_str());
        for step in &t.steps {
            if step.output.actions.is_empty() {
                continue;
            }
            out.push(vec![
                Message::new("system", SYSTEM_PROMPT),
                Message::new("user", user_prompt(instruction, step)),
                Message::new("assistant", output_json(&step.output)),
            ]);
        }
    }
    Ok(out)
}

//! Plain-text rendering of one step, for `rmsweb show`.

use super::model::{Task, Trajectory};
use crate::util::sanitize::{clean_line, clean_text};
use std::fmt::Write;

/// Renders step `step` of `t`: header, task, state, model output, actions, results
/// and the element list with the acted-on element marked. All page and model text
/// is sanitized.
// Kept whole: it writes the step's text in the order it is read, one part after
// the other.
pub fn render_step(t: &Trajectory, task: Option<&Task>, step: usize) -> anyhow::Result<String> {
    let Some(s) = t.steps.get(step) else {
        anyhow::bail!(
            "trajectory `{}` has {} steps; there is no step {step}",
            clean_line(&t.id),
            t.steps.len()
        );
    };
    let mut o = String::new();
    let mark = if t.outcome.success { "✓" } else { "✗" };
    let _ = writeln!(
        o,
        "{mark} {}  task {}  attempt {} round {}  teacher {}  step {}/{}",
        clean_line(&t.id),
        clean_line(&t.task_id),
        t.attempt,
        t.round,
        clean_line(&t.teacher),
        step,
        t.steps.len().saturating_sub(1)
    );
    if let Some(task) = task {
        let _ = writeln!(o, "task: {}", clean_line(&task.instruction));
    }
    if let Some(r) = &t.reflection {
        let _ = writeln!(o, "reflection: {}", clean_line(r));
    }
    let _ = writeln!(o, "url: {}", clean_line(&s.state.url));
    let _ = writeln!(o, "title: {}", clean_line(&s.state.title));
    let _ = writeln!(o, "progress: {:.2}", s.state.progress);
    let field = |o: &mut String, name: &str, v: &str| {
        if !v.is_empty() {
            let _ = writeln!(o, "{name}: {}", clean_text(v));
        }
    };
    field(&mut o, "memory (before)", &s.state.memory);
    field(&mut o, "thinking", &s.output.thinking);
    field(&mut o, "evaluation", &s.output.evaluation_previous_goal);
    field(&mut o, "next goal", &s.output.next_goal);
    for a in &s.output.actions {
        let _ = writeln!(o, "action: {}", clean_line(&a.short()));
    }
    for r in &s.result {
        if let Some(e) = &r.error {
            let _ = writeln!(o, "error: {}", clean_line(e));
        }
        if let Some(x) = &r.extracted_content {
            let _ = writeln!(o, "extracted: {}", clean_line(x));
        }
        if r.is_done {
            let _ = writeln!(o, "done: success={:?}", r.success);
        }
    }
    let acted: Vec<i64> = s
        .output
        .actions
        .iter()
        .filter_map(|a| a.target_index())
        .collect();
    let _ = writeln!(o, "elements ({}):", s.state.elements.len());
    for e in &s.state.elements {
        let m = if acted.contains(&i64::from(e.index)) {
            "▶"
        } else {
            " "
        };
        let attrs: Vec<String> = e
            .attrs
            .iter()
            .map(|(k, v)| format!("{}={}", clean_line(k), clean_line(v)))
            .collect();
        let _ = writeln!(
            o,
            "{m} [{}] <{}{}{}> {}",
            e.index,
            clean_line(&e.tag),
            if attrs.is_empty() { "" } else { " " },
            attrs.join(" "),
            clean_line(&e.text)
        );
    }
    Ok(o)
}

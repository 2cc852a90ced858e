//! Lines describing one step (shared by the Trajectories and Mined pairs views).

use crate::action::Action;
use crate::trajectory::{State, Step};
use crate::tui::theme::Theme;
use crate::tui::widgets::highlight::json_lines;
use crate::tui::widgets::text::{field, line, trunc};
use ratatui::text::{Line, Span};

/// The elements of a state, one per line, the one `acted_on` marked with `▶`.
pub fn element_lines(
    state: &State,
    acted_on: Option<i64>,
    theme: &Theme,
    width: usize,
) -> Vec<Line<'static>> {
    let mut out = Vec::with_capacity(state.elements.len());
    for e in &state.elements {
        let hit = acted_on == Some(i64::from(e.index));
        let mut desc = format!("[{}] <{}>", e.index, line(&e.tag));
        if !e.text.is_empty() {
            desc.push_str(&format!(" \"{}\"", line(&e.text)));
        }
        for (k, v) in e.attrs.iter().take(2) {
            desc.push_str(&format!(" {}={}", line(k), line(v)));
        }
        let desc = trunc(&desc, width.saturating_sub(2));
        out.push(if hit {
            Line::from(vec![
                Span::styled("▶ ", theme.warn()),
                Span::styled(desc, theme.selected()),
            ])
        } else {
            Line::from(vec![Span::raw("  "), Span::styled(desc, theme.text())])
        });
    }
    if out.is_empty() {
        out.push(Line::from(Span::styled("  (no elements)", theme.dim())));
    }
    out
}

/// An action as highlighted pretty JSON.
pub fn action_json(action: &Action, theme: &Theme) -> Vec<Line<'static>> {
    let json = serde_json::to_string(action).unwrap_or_else(|e| format!("(unprintable: {e})"));
    json_lines(&json, &theme.syntax)
}

/// Every line of a step's detail: URL, title, actions, result, memory, elements
/// (the acted-on one marked), then the model output.
pub fn step_lines(step: &Step, theme: &Theme, width: usize) -> Vec<Line<'static>> {
    let l = theme.label();
    let t = theme.text();
    let mut out = vec![
        field("URL", &step.state.url, l, t),
        field("Title", &step.state.title, l, t),
        Line::from(Span::styled("Action", l)),
    ];
    if step.output.actions.is_empty() {
        out.push(Line::from(Span::styled("  (none)", theme.dim())));
    }
    for a in &step.output.actions {
        out.extend(action_json(a, theme));
    }
    out.push(Line::from(Span::styled("Result", l)));
    if step.result.is_empty() {
        out.push(Line::from(Span::styled(
            "  (no result recorded)",
            theme.dim(),
        )));
    }
    for r in &step.result {
        if let Some(e) = &r.error {
            out.push(Line::from(vec![
                Span::styled("  ✗ error: ", theme.bad()),
                Span::styled(line(e), t),
            ]));
        } else {
            let mut s = String::from("  ✓ ok");
            if r.is_done {
                s.push_str(&format!(
                    " · done (success: {})",
                    r.success.map_or("?".into(), |b| b.to_string())
                ));
            }
            out.push(Line::from(Span::styled(s, theme.good())));
        }
        if let Some(x) = &r.extracted_content {
            out.push(Line::from(vec![
                Span::styled("  extracted: ", theme.dim()),
                Span::styled(line(x), t),
            ]));
        }
    }
    if !step.state.memory.is_empty() {
        out.push(field("Memory", &step.state.memory, l, t));
    }
    let acted = step.output.actions.first().and_then(Action::target_index);
    out.push(Line::from(Span::styled(
        format!("Elements ({})", step.state.elements.len()),
        l,
    )));
    out.extend(element_lines(&step.state, acted, theme, width));
    out.push(Line::from(Span::styled("Model output", l)));
    let o = &step.output;
    let json = serde_json::to_string_pretty(&serde_json::json!({
        "thinking": o.thinking,
        "evaluation_previous_goal": o.evaluation_previous_goal,
        "memory": o.memory,
        "next_goal": o.next_goal,
    }))
    .unwrap_or_default();
    out.extend(json_lines(&json, &theme.syntax));
    out
}

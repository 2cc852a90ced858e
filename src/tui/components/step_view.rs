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

/// At most `max_lines` lines of [`element_lines`], scrolled so that the acted-on
/// element is in view (centred when it can be), with `… N above` / `… N below`
/// markers for what is cut. For panes that do not scroll.
pub fn element_window(
    state: &State,
    acted_on: Option<i64>,
    theme: &Theme,
    width: usize,
    max_lines: usize,
) -> Vec<Line<'static>> {
    let all = element_lines(state, acted_on, theme, width);
    if all.len() <= max_lines || max_lines < 3 {
        return all;
    }
    let hit = acted_on
        .and_then(|i| state.elements.iter().position(|e| i64::from(e.index) == i))
        .unwrap_or(0);
    // Room for elements once both markers are shown.
    let room = max_lines - 2;
    let start = hit.saturating_sub(room / 2).min(all.len() - room);
    let end = start + room;
    let mut out = Vec::with_capacity(max_lines);
    if start > 0 {
        out.push(Line::from(Span::styled(
            format!("  … {start} above"),
            theme.dim(),
        )));
    }
    out.extend(all[start..end].iter().cloned());
    if end < all.len() {
        out.push(Line::from(Span::styled(
            format!("  … {} below", all.len() - end),
            theme.dim(),
        )));
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trajectory::Element;

    fn text(lines: &[Line]) -> Vec<String> {
        lines.iter().map(|l| l.to_string()).collect()
    }

    #[test]
    fn window_keeps_the_acted_element_in_view_with_markers() {
        let state = State {
            elements: (0..20)
                .map(|i| Element {
                    index: i,
                    tag: "a".into(),
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        };
        let th = Theme::load("dark").unwrap();
        let w = text(&element_window(&state, Some(15), &th, 40, 7));
        assert_eq!(w.len(), 7);
        assert_eq!(w[0], "  … 13 above");
        assert!(w.iter().any(|l| l.starts_with("▶ [15]")), "{w:?}");
        assert_eq!(w[6], "  … 2 below");
        // at the end: no "below" marker, the last element shown
        let w = text(&element_window(&state, Some(19), &th, 40, 7));
        assert_eq!(w.last().unwrap(), "▶ [19] <a>");
        assert_eq!(w.len(), 6);
        // room for everything: no markers
        assert_eq!(element_window(&state, Some(3), &th, 40, 30).len(), 20);
    }
}

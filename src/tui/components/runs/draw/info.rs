//! The info box of the selected run and the tail of its log.

use crate::runs::info::DisplayState;
use crate::runs::monitor::Track;
use crate::runs::tail::TailState;
use crate::tui::components::pane;
use crate::tui::theme::Theme;
use crate::tui::widgets::chart::View;
use crate::tui::widgets::text::{line, trunc};
use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;

pub(crate) fn draw_info(
    f: &mut Frame,
    area: Rect,
    t: Option<&Track>,
    view: View,
    (page, pages): (usize, usize),
    th: &Theme,
) {
    let block = pane("Run", false, th);
    let Some(t) = t else {
        f.render_widget(block, area);
        return;
    };
    let w = area.width.saturating_sub(12) as usize;
    let kv = |k: &str, v: String| kv(k, v, w, th);
    // While the run goes: its pace and the time left, on one line.
    let pace = match (t.step_seconds(), t.eta_seconds(), t.info.status.total_steps) {
        (Some(s), Some(e), Some(_)) => Some(format!(
            "{s:.1} s/step · {} left",
            crate::util::duration::human_time(e)
        )),
        (Some(s), None, _) if t.state() == DisplayState::Running => {
            Some(format!("{s:.1} s/step · {:.3} steps/s", 1.0 / s.max(1e-9)))
        }
        _ => None,
    };
    let mut lines = vec![
        kv("folder", t.info.dir.display().to_string()),
        kv("message", t.info.status.message.clone().unwrap_or_default()),
        kv(
            "view",
            format!(
                "x {} · EMA {} · {}{}",
                if view.wall { "wall time" } else { "step" },
                view.ema,
                if view.log { "log" } else { "linear" },
                if pages > 1 {
                    format!(" · panels {}/{pages} ([ ])", page + 1)
                } else {
                    String::new()
                }
            ),
        ),
    ];
    if let Some(p) = pace {
        lines.insert(2, kv("pace", p));
    }
    if let Some(c) = view.cursor {
        lines.insert(
            2,
            kv("cursor", format!("step {c} (, . < > move · ; hides)")),
        );
    }
    lines.extend(health_lines(t, w, th));
    f.render_widget(Paragraph::new(lines).block(block), area);
}

/// A key and its value, the key right-aligned.
fn kv(k: &str, v: String, w: usize, th: &Theme) -> Line<'static> {
    Line::from(vec![
        Span::styled(format!("{k:>8}: "), th.dim()),
        Span::styled(trunc(&v, w), th.text()),
    ])
}

/// How the run's files read: the metrics tail, gaps and skipped keys, the
/// self-sharpening detector, malformed lines and the run's problems.
fn health_lines(t: &Track, w: usize, th: &Theme) -> Vec<Line<'static>> {
    let kv = |k: &str, v: String| kv(k, v, w, th);
    let mut lines = Vec::new();
    let tail = match t.tail {
        TailState::Live => format!("{} records", t.series.records()),
        TailState::Waiting => "waiting for the file".into(),
        TailState::Vanished => "file vanished".into(),
        TailState::Missing => "folder missing".into(),
    };
    lines.push(kv(
        "metrics",
        if t.resets > 0 {
            format!("{tail} · rewritten {}×", t.resets)
        } else {
            tail
        },
    ));
    let gaps = t.series.gaps();
    let skipped = t.series.skipped();
    // One line each, so neither hides the other in a narrow pane.
    let mut notes = Vec::new();
    if gaps > 0 {
        notes.push(format!("{gaps} missing values (null/NaN, drawn as gaps)"));
    }
    if !skipped.is_empty() {
        notes.push(format!(
            "{} non-numeric keys not plotted: {}",
            skipped.len(),
            skipped.join(", ")
        ));
    }
    for n in notes {
        lines.push(Line::from(Span::styled(trunc(&line(&n), w + 10), th.dim())));
    }
    if t.sharpening.fed > 0 {
        lines.push(kv(
            "detector",
            format!(
                "self-sharpening: {} over {} steps",
                if t.sharpening.flagged {
                    "FLAGGED"
                } else {
                    "quiet"
                },
                t.sharpening.fed
            ),
        ));
    }
    if let Some(m) = &t.last_malformed {
        lines.push(Line::from(Span::styled(
            trunc(&format!("⚠ {} bad lines, last {m}", t.malformed), w + 10),
            th.warn(),
        )));
    }
    for p in &t.info.problems {
        lines.push(Line::from(Span::styled(
            trunc(&format!("⚠ {p}"), w + 10),
            th.warn(),
        )));
    }
    lines
}

pub(crate) fn draw_log(f: &mut Frame, area: Rect, t: Option<&Track>, th: &Theme) {
    let block = pane("stdout.log", false, th);
    let h = area.height.saturating_sub(2) as usize;
    let w = area.width.saturating_sub(2) as usize;
    let lines: Vec<Line> = t
        .map(|t| {
            let n = t.log.len();
            t.log[n.saturating_sub(h)..]
                .iter()
                .map(|l| Line::from(Span::styled(trunc(l, w), th.text())))
                .collect()
        })
        .unwrap_or_default();
    f.render_widget(Paragraph::new(lines).block(block), area);
}

//! Drawing the Runs tab: the run list, the metric panels, the info box and the log
//! tail (everything shown is sanitized text read by the watcher).
//!
//! The list is in `list`, the panels in `charts`, the info box and log tail in
//! `info`, what they share in `common`.

mod charts;
mod common;
mod info;
mod list;

pub(crate) use info::{draw_info, draw_log};

use crate::tui::theme::Theme;
use crate::tui::widgets::text::{line, trunc};
use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::Modifier;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Clear, Paragraph};

/// The self-sharpening banner: the first flagged run (of any listed, not only the one
/// on screen) and how many more are flagged.
pub(crate) fn draw_banner(f: &mut Frame, area: Rect, banner: &[(String, String)], th: &Theme) {
    let Some((id, msg)) = banner.first() else {
        return;
    };
    let more = match banner.len() {
        1 => String::new(),
        n => format!(" (+{} more)", n - 1),
    };
    let text = format!(" ⚠ self-sharpening in {}{more}: {}", line(id), line(msg));
    f.render_widget(
        Paragraph::new(Line::from(Span::styled(
            text,
            th.bad().add_modifier(Modifier::BOLD | Modifier::REVERSED),
        ))),
        area,
    );
}

/// The kill confirmation over the view.
pub(crate) fn draw_kill_confirm(f: &mut Frame, area: Rect, id: &str, pid: u32, th: &Theme) {
    let r = crate::tui::components::centered(area, 60, 4);
    f.render_widget(Clear, r);
    f.render_widget(
        Paragraph::new(vec![
            Line::from(Span::styled(
                format!("Kill {} (pid {pid}) with SIGKILL?", trunc(id, 30)),
                th.bad(),
            )),
            Line::from(Span::styled(
                "no checkpoint is written · y kills · any other key cancels",
                th.dim(),
            )),
        ])
        .block(
            Block::default()
                .borders(Borders::ALL)
                .border_style(th.border(true))
                .title(Span::styled(" Kill ", th.label()))
                .style(th.text()),
        ),
        r,
    );
}

//! The help overlay: every key of [`crate::tui::keys::KEYMAP`].

use crate::tui::keys::KEYMAP;
use crate::tui::theme::Theme;
use ratatui::Frame;
use ratatui::layout::{Constraint, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Clear, Row, Table};

/// Draws the help overlay centred in `area`.
pub fn draw(f: &mut Frame, area: Rect, theme: &Theme) {
    let h = (KEYMAP.len() as u16 + 4).min(area.height);
    let w = 96.min(area.width);
    let r = Rect::new(
        area.x + (area.width - w) / 2,
        area.y + (area.height - h) / 2,
        w,
        h,
    );
    f.render_widget(Clear, r);
    let rows = KEYMAP.iter().map(|k| {
        Row::new(vec![
            Line::from(Span::styled(k.context, theme.dim())),
            Line::from(Span::styled(k.keys, theme.label())),
            Line::from(Span::styled(k.what, theme.text())),
        ])
    });
    let table = Table::new(
        rows,
        [
            Constraint::Length(13),
            Constraint::Length(16),
            Constraint::Min(20),
        ],
    )
    .header(Row::new(vec!["where", "keys", "does"]).style(theme.dim()))
    .block(
        Block::default()
            .borders(Borders::ALL)
            .border_style(theme.border(true))
            .title(Span::styled(" Keys — ? or Esc closes ", theme.label()))
            .style(theme.text()),
    );
    f.render_widget(table, r);
}

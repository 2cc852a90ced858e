//! The help overlay: every key of [`crate::tui::keys::KEYMAP`], the current tab's
//! first, then those that work everywhere, then the other tabs'; `j`/`k` scroll
//! what does not fit.

use crate::tui::keys::{KEYMAP, KeyHelp};
use crate::tui::theme::Theme;
use ratatui::Frame;
use ratatui::layout::{Constraint, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Clear, Row, Table};

/// The key map in the order the overlay lists it on `tab` (a tab title, e.g.
/// `Runs`): that tab's keys (and its sub-views'), the global ones, the others.
pub fn ordered(tab: &str) -> Vec<&'static KeyHelp> {
    let rank = |k: &KeyHelp| match k.context {
        c if c == tab || (tab == "Runs" && c == "Curriculum") => 0,
        "Global" | "Lists" | "Text boxes" => 1,
        _ => 2,
    };
    let mut v: Vec<&KeyHelp> = KEYMAP.iter().collect();
    v.sort_by_key(|k| rank(k));
    v
}

/// Draws the help overlay centred in `area` for the tab titled `tab`, its rows from
/// `offset` on (clamped to the last row; the clamped value is returned).
pub fn draw(f: &mut Frame, area: Rect, theme: &Theme, tab: &str, offset: usize) -> usize {
    let rows_all = ordered(tab);
    let offset = offset.min(rows_all.len().saturating_sub(1));
    let h = (KEYMAP.len() as u16 + 4).min(area.height);
    let w = 96.min(area.width);
    let r = Rect::new(
        area.x + (area.width - w) / 2,
        area.y + (area.height - h) / 2,
        w,
        h,
    );
    f.render_widget(Clear, r);
    let visible = usize::from(h.saturating_sub(4));
    let more = rows_all.len() > visible;
    let rows = rows_all.iter().skip(offset).map(|k| {
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
            .title(Span::styled(
                if more {
                    " Keys — ? or Esc closes · j k scroll "
                } else {
                    " Keys — ? or Esc closes "
                },
                theme.label(),
            ))
            .style(theme.text()),
    );
    f.render_widget(table, r);
    offset
}

//! The help overlay: every key of [`crate::tui::keys::keymap`], the current view's
//! own first, then those that work everywhere, then the other views'; `j`/`k`
//! scroll what does not fit.

use crate::tui::key_help::KeyHelp;
use crate::tui::keys::keymap;
use crate::tui::theme::Theme;
use ratatui::Frame;
use ratatui::layout::{Constraint, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Clear, Row, Table};

/// The key map in the order the overlay lists it over a view whose own key tables
/// are `current`: those, the app's and the text boxes', the other views'.
pub fn ordered(current: &[&[KeyHelp]]) -> Vec<&'static KeyHelp> {
    let rank = |k: &KeyHelp| {
        if current.iter().any(|t| t.contains(k)) {
            0
        } else if crate::tui::keys::is_app_key(k) {
            1
        } else {
            2
        }
    };
    let mut v = keymap();
    v.sort_by_key(|k| rank(k));
    v
}

/// Draws the help overlay centred in `area` over a view whose own key tables are
/// `current`, its rows from `offset` on (clamped to the last row; the clamped value
/// is returned).
pub fn draw(
    f: &mut Frame,
    area: Rect,
    theme: &Theme,
    current: &[&[KeyHelp]],
    offset: usize,
) -> usize {
    let rows_all = ordered(current);
    let offset = offset.min(rows_all.len().saturating_sub(1));
    let r = super::centered(area, 96, rows_all.len() as u16 + 4);
    let h = r.height;
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

//! The agreement popup of the Mined pairs tab (`C`): per failure-mode category, how
//! many pairs two or more annotators decided, how many they agreed on, the open and
//! settled conflicts and Cohen's kappa; Enter goes to the category's next conflict
//! so a reviewer can settle it.

use super::{Cursor, pane};
use crate::annotate::agreement::{ALL, CategoryAgreement};
use crate::tui::theme::Theme;
use crate::tui::widgets::text::{line, trunc};
use ratatui::Frame;
use ratatui::crossterm::event::{KeyCode, KeyEvent};
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Clear, Paragraph};

/// The popup's rows (computed when it opens; no annotation can land while it is
/// open) and its cursor.
pub struct AgreementView {
    pub rows: Vec<CategoryAgreement>,
    pub cursor: Cursor,
}

/// What a key in the popup asks of the tab.
#[derive(Debug, PartialEq, Eq)]
pub enum AgreementKey {
    /// Nothing beyond moving the cursor.
    Stay,
    Close,
    /// Close and go to the next conflict of the category (None: any category).
    NextConflict(Option<String>),
}

impl AgreementView {
    /// Opens on `rows` with the cursor on the total row.
    pub fn new(rows: Vec<CategoryAgreement>) -> Self {
        let cursor = Cursor {
            selected: rows.len().saturating_sub(1),
            ..Cursor::default()
        };
        AgreementView { rows, cursor }
    }

    /// Answers a key.
    pub fn key(&mut self, key: &KeyEvent) -> AgreementKey {
        if self.cursor.navigate(key, self.rows.len()) {
            return AgreementKey::Stay;
        }
        match key.code {
            KeyCode::Esc | KeyCode::Char('C') | KeyCode::Char('q') => AgreementKey::Close,
            KeyCode::Enter => match self.rows.get(self.cursor.selected) {
                Some(r) if r.category != ALL => {
                    AgreementKey::NextConflict(Some(r.category.clone()))
                }
                _ => AgreementKey::NextConflict(None),
            },
            _ => AgreementKey::Stay,
        }
    }

    /// Draws the popup centred in `area`.
    pub fn draw(&mut self, f: &mut Frame, area: Rect, th: &Theme) {
        let r = super::centered(area, 78, self.rows.len() as u16 + 5);
        f.render_widget(Clear, r);
        let block = pane("Agreement between annotators", true, th);
        let inner = block.inner(r);
        f.render_widget(block, r);
        let cat_w = usize::from(inner.width).saturating_sub(52).clamp(8, 24);
        let mut lines = vec![Line::from(Span::styled(
            format!(
                "{:cat_w$} {:>5} {:>7} {:>6} {:>6} {:>8} {:>7} {:>5}",
                "category", "pairs", "decided", "shared", "agreed", "conflict", "settled", "κ"
            ),
            th.label(),
        ))];
        let body = Rect {
            y: inner.y + 1,
            height: inner.height.saturating_sub(2),
            ..inner
        };
        for pos in self.cursor.window(self.rows.len(), body.height as usize) {
            let row = &self.rows[pos];
            let kappa = row.kappa.map_or("-".to_string(), |k| format!("{k:.2}"));
            let text = format!(
                "{:cat_w$} {:>5} {:>7} {:>6} {:>6} {:>8} {:>7} {:>5}",
                trunc(&line(&row.category), cat_w),
                row.pairs,
                row.decided,
                row.shared,
                row.agreed,
                row.open_conflicts,
                row.settled,
                kappa
            );
            let style = if pos == self.cursor.selected {
                th.selected()
            } else if row.open_conflicts > 0 {
                th.warn()
            } else if row.category == ALL {
                th.label()
            } else {
                th.text()
            };
            lines.push(Line::from(Span::styled(text, style)));
        }
        f.render_widget(Paragraph::new(lines), inner);
        let hint = Rect {
            y: inner.y + inner.height.saturating_sub(1),
            height: 1,
            ..inner
        };
        f.render_widget(
            Paragraph::new(Span::styled(
                "κ: Cohen's, keep vs reject · Enter: next conflict there (S settles) · Esc",
                th.dim(),
            )),
            hint,
        );
    }
}

//! The Runs tab's diff view (`D`): the `run.toml` keys two runs set differently.

use crate::runs::config_diff::{KeyDiff, diff, read_config};
use crate::tui::theme::Theme;
use crate::tui::widgets::text::{line, trunc};
use ratatui::Frame;
use ratatui::crossterm::event::{KeyCode, KeyEvent};
use ratatui::layout::{Constraint, Rect};
use ratatui::text::Span;
use ratatui::widgets::{Block, Borders, Clear, Row, Table};
use std::path::Path;

/// The open diff of run `a` against run `b`.
#[derive(Debug, Clone)]
pub struct ConfigDiffView {
    a: String,
    b: String,
    rows: Vec<KeyDiff>,
    scroll: usize,
}

impl ConfigDiffView {
    /// The diff of two run folders (ids shown as given).
    pub fn of(a: (&str, &Path), b: (&str, &Path)) -> anyhow::Result<Self> {
        Ok(ConfigDiffView {
            a: a.0.to_string(),
            b: b.0.to_string(),
            rows: diff(&read_config(a.1)?, &read_config(b.1)?),
            scroll: 0,
        })
    }

    /// Handles a key; false when the view closes (Esc, q, D).
    pub fn handle_key(&mut self, key: KeyEvent) -> bool {
        match key.code {
            KeyCode::Esc | KeyCode::Char('q') | KeyCode::Char('D') => return false,
            KeyCode::Char('j') | KeyCode::Down => {
                self.scroll = (self.scroll + 1).min(self.rows.len().saturating_sub(1))
            }
            KeyCode::Char('k') | KeyCode::Up => self.scroll = self.scroll.saturating_sub(1),
            _ => {}
        }
        true
    }

    /// Draws the view over `area`.
    pub fn draw(&self, f: &mut Frame, area: Rect, th: &Theme) {
        f.render_widget(Clear, area);
        let unset = || Span::styled("(not set)", th.dim());
        let rows: Vec<Row> = self
            .rows
            .iter()
            .skip(self.scroll)
            .map(|d| {
                Row::new(vec![
                    Span::styled(line(&d.key), th.label()),
                    d.a.as_deref()
                        .map_or_else(unset, |v| Span::styled(line(v), th.text())),
                    d.b.as_deref()
                        .map_or_else(unset, |v| Span::styled(line(v), th.text())),
                ])
            })
            .collect();
        let title = if self.rows.is_empty() {
            " run.toml: no difference · Esc closes ".to_string()
        } else {
            format!(
                " run.toml: {} keys differ · j k scroll · Esc closes ",
                self.rows.len()
            )
        };
        let table = Table::new(
            rows,
            [
                Constraint::Percentage(30),
                Constraint::Percentage(35),
                Constraint::Percentage(35),
            ],
        )
        .header(
            Row::new(vec![
                "key".to_string(),
                trunc(&self.a, 40),
                trunc(&self.b, 40),
            ])
            .style(th.dim()),
        )
        .block(
            Block::default()
                .borders(Borders::ALL)
                .border_style(th.border(true))
                .title(Span::styled(title, th.label()))
                .style(th.text()),
        );
        f.render_widget(table, area);
    }
}

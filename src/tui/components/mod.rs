//! The views. Each keeps its own state, answers keys with `handle_key` (local
//! changes happen there; effects on the app come back as an [`Action`]) and draws
//! itself with `draw`.

pub mod agreement;
pub mod config_diff;
pub mod curriculum;
pub mod help;
pub mod launch_form;
pub mod pairs;
pub mod recipe_report;
pub mod reward;
pub mod runs;
pub mod step_view;
pub mod trajectories;

use super::action::Action;
use super::shared::Shared;
use super::theme::Theme;
use ratatui::Frame;
use ratatui::crossterm::event::{KeyCode, KeyEvent};
use ratatui::layout::Rect;
use ratatui::widgets::{Block, BorderType, Borders};

/// A view of the workbench.
pub trait Component {
    /// Handles a key the app did not take; returns an effect for the app, if any.
    fn handle_key(&mut self, key: KeyEvent, sh: &mut Shared) -> Option<Action>;
    /// Draws the view into `area`.
    fn draw(&mut self, f: &mut Frame, area: Rect, sh: &mut Shared);
    /// True while a text box has the keyboard: global keys are not taken then.
    fn captures_text(&self) -> bool {
        false
    }
    /// The list filter of the view.
    fn filter(&self) -> &str {
        ""
    }
    /// Sets the list filter (case-insensitive substring).
    fn set_filter(&mut self, _filter: &str) {}
    /// Moves focus to the next (`forward`) or previous pane.
    fn cycle_focus(&mut self, _forward: bool) {}
}

/// A bordered pane with a title.
pub fn pane<'a>(title: impl Into<String>, focused: bool, theme: &Theme) -> Block<'a> {
    Block::default()
        .borders(Borders::ALL)
        .border_type(if focused {
            BorderType::Thick
        } else {
            BorderType::Plain
        })
        .border_style(theme.border(focused))
        .title(ratatui::text::Span::styled(
            format!(" {} ", title.into()),
            theme.label(),
        ))
}

/// The selection and scroll offset of a list drawn one window at a time (so a list
/// of 100k rows costs only its visible rows).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Cursor {
    pub selected: usize,
    pub offset: usize,
}

impl Cursor {
    /// Applies a navigation key to a list of `len` rows; returns whether it was one.
    pub fn navigate(&mut self, key: &KeyEvent, len: usize) -> bool {
        let last = len.saturating_sub(1);
        let sel = &mut self.selected;
        match key.code {
            KeyCode::Char('j') | KeyCode::Down => *sel = (*sel + 1).min(last),
            KeyCode::Char('k') | KeyCode::Up => *sel = sel.saturating_sub(1),
            KeyCode::Char('g') | KeyCode::Home => *sel = 0,
            KeyCode::Char('G') | KeyCode::End => *sel = last,
            KeyCode::PageDown => *sel = (*sel + 10).min(last),
            KeyCode::PageUp => *sel = sel.saturating_sub(10),
            _ => return false,
        }
        true
    }

    /// Clamps to `len` rows and returns the rows visible in `height` lines,
    /// scrolling so the selection stays in view.
    pub fn window(&mut self, len: usize, height: usize) -> std::ops::Range<usize> {
        self.selected = self.selected.min(len.saturating_sub(1));
        let h = height.max(1);
        if self.selected < self.offset {
            self.offset = self.selected;
        } else if self.selected >= self.offset + h {
            self.offset = self.selected + 1 - h;
        }
        self.offset = self.offset.min(len.saturating_sub(h));
        self.offset..(self.offset + h).min(len)
    }
}

/// Keeps the indices of `0..len` whose text (from `text`) contains the filter,
/// case-insensitively; all of them for an empty filter.
pub fn filter_indices(
    len: usize,
    filter: &str,
    mut text: impl FnMut(usize) -> String,
) -> Vec<usize> {
    if filter.is_empty() {
        return (0..len).collect();
    }
    let needle = filter.to_lowercase();
    (0..len)
        .filter(|&i| text(i).to_lowercase().contains(&needle))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use ratatui::crossterm::event::KeyModifiers;

    #[test]
    fn cursor_keeps_the_selection_in_the_window() {
        let mut c = Cursor::default();
        let key = |ch| KeyEvent::new(KeyCode::Char(ch), KeyModifiers::NONE);
        assert_eq!(c.window(100, 10), 0..10);
        c.navigate(&key('G'), 100);
        assert_eq!(c.window(100, 10), 90..100);
        c.navigate(&key('g'), 100);
        assert_eq!(c.window(100, 10), 0..10);
        for _ in 0..12 {
            c.navigate(&key('j'), 100);
        }
        assert_eq!(c.window(100, 10), 3..13);
        assert_eq!(c.window(5, 10), 0..5, "shrinking the list clamps");
        assert_eq!(c.selected, 4);
    }
}

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
use ratatui::crossterm::event::{KeyCode, KeyEvent, MouseButton, MouseEvent, MouseEventKind};
use ratatui::layout::{Position, Rect};
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
    /// The view's own key tables (and its sub-views'), for the help overlay: listed
    /// first on its tab.
    fn keys(&self) -> &'static [&'static [crate::tui::key_help::KeyHelp]] {
        &[]
    }
    /// Handles a mouse event inside the view's area (clicks select rows and focus
    /// panes, the wheel scrolls what is under the pointer); keys stay primary.
    fn handle_mouse(&mut self, _ev: MouseEvent, _sh: &mut Shared) -> Option<Action> {
        None
    }
}

/// What the mouse did, reduced to what the views answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pointer {
    /// Left button pressed at the position.
    Click(Position),
    /// Wheel turned at the position: `true` down (towards later rows).
    Scroll(Position, bool),
}

impl Pointer {
    /// The pointer event of `ev`, if it is one the workbench answers.
    pub fn of(ev: &MouseEvent) -> Option<Pointer> {
        let at = Position::new(ev.column, ev.row);
        match ev.kind {
            MouseEventKind::Down(MouseButton::Left) => Some(Pointer::Click(at)),
            MouseEventKind::ScrollDown => Some(Pointer::Scroll(at, true)),
            MouseEventKind::ScrollUp => Some(Pointer::Scroll(at, false)),
            _ => None,
        }
    }

    /// Where it happened.
    pub fn at(self) -> Position {
        match self {
            Pointer::Click(p) | Pointer::Scroll(p, _) => p,
        }
    }

    /// The navigation key the wheel stands for (`↓` / `↑`), None for a click.
    pub fn scroll_key(self) -> Option<KeyEvent> {
        match self {
            Pointer::Scroll(_, down) => Some(KeyEvent::from(if down {
                KeyCode::Down
            } else {
                KeyCode::Up
            })),
            Pointer::Click(_) => None,
        }
    }
}

/// A `w`×`h` rectangle centred in `area`, each side clamped to `area`'s (popups).
pub fn centered(area: Rect, w: u16, h: u16) -> Rect {
    let (w, h) = (w.min(area.width), h.min(area.height));
    Rect::new(
        area.x + (area.width - w) / 2,
        area.y + (area.height - h) / 2,
        w,
        h,
    )
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
    /// Where the visible rows were last drawn (for the mouse).
    pub rows: Rect,
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

    /// [`Cursor::window`] for rows drawn one per line from the top of `rows`,
    /// remembered so a click can be mapped back to its row ([`Cursor::row_at`]).
    pub fn window_in(&mut self, len: usize, rows: Rect) -> std::ops::Range<usize> {
        self.rows = rows;
        self.window(len, rows.height as usize)
    }

    /// The row (of a list of `len`) drawn at `at` by the last [`Cursor::window_in`].
    pub fn row_at(&self, at: Position, len: usize) -> Option<usize> {
        if !self.rows.contains(at) {
            return None;
        }
        let i = self.offset + usize::from(at.y - self.rows.y);
        (i < len).then_some(i)
    }

    /// Applies a pointer event to the list as last drawn by [`Cursor::window_in`]: a
    /// click on a row selects it, the wheel over the rows moves the selection by
    /// one. None when the event is not over a row of this list.
    pub fn pointer(&mut self, p: Pointer, len: usize) -> Option<ListPointer> {
        if !self.rows.contains(p.at()) {
            return None;
        }
        match p {
            Pointer::Click(at) => {
                let i = self.row_at(at, len)?;
                if i == self.selected {
                    Some(ListPointer::Again)
                } else {
                    self.selected = i;
                    Some(ListPointer::Moved)
                }
            }
            Pointer::Scroll(..) => {
                let before = self.selected;
                self.navigate(&p.scroll_key()?, len);
                Some(if self.selected == before {
                    ListPointer::Stayed
                } else {
                    ListPointer::Moved
                })
            }
        }
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

/// What a pointer event did to a list ([`Cursor::pointer`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ListPointer {
    /// The selection moved (a click on another row, or the wheel).
    Moved,
    /// The wheel turned at either end: nothing moved.
    Stayed,
    /// A click on the row already selected (the views treat it as Enter).
    Again,
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

    #[test]
    fn a_click_maps_to_the_row_drawn_there() {
        let mut c = Cursor::default();
        let rows = Rect::new(2, 5, 20, 4);
        c.selected = 7;
        assert_eq!(c.window_in(10, rows), 4..8);
        assert_eq!(c.row_at(Position::new(3, 5), 10), Some(4));
        assert_eq!(c.row_at(Position::new(21, 8), 10), Some(7));
        assert_eq!(
            c.row_at(Position::new(22, 8), 10),
            None,
            "right of the rows"
        );
        assert_eq!(c.row_at(Position::new(3, 9), 10), None, "below the rows");
        assert_eq!(
            c.row_at(Position::new(3, 8), 6),
            None,
            "past the list's end"
        );
        let at = |y| Position::new(3, y);
        assert_eq!(
            c.pointer(Pointer::Click(at(6)), 10),
            Some(ListPointer::Moved)
        );
        assert_eq!(c.selected, 5);
        assert_eq!(
            c.pointer(Pointer::Click(at(6)), 10),
            Some(ListPointer::Again)
        );
        assert_eq!(
            c.pointer(Pointer::Scroll(at(8), true), 10),
            Some(ListPointer::Moved)
        );
        assert_eq!(c.selected, 6);
        assert_eq!(c.pointer(Pointer::Scroll(at(20), true), 10), None);
        c.selected = 9;
        assert_eq!(
            c.pointer(Pointer::Scroll(at(5), true), 10),
            Some(ListPointer::Stayed)
        );
    }
}

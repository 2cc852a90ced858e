//! The Mined pairs tab: the audit queue and the side-by-side divergence view, with
//! keys to accept, reject, relabel, edit the target, note and undo. Every change is
//! an [`Action::Annotate`] that the app appends to `annotations.jsonl` at once.
//!
//! The state and what keys do to it are in `view`, the target editor in `edit`,
//! the drawing in `draw`; the [`Component`] impl is here.

mod draw;
mod edit;
mod view;

use draw::side_step;
pub use edit::{EditBox, escape_for_box, fits_page, parse_target};
pub use view::{PairsView, Popup};

use crate::annotate::{Op, Status};
use crate::mine::pair::MinedPair;
use crate::tui::action::Action;
use crate::tui::components::agreement::AgreementView;
use crate::tui::components::{Component, Cursor, ListPointer, Pointer, pane};
use crate::tui::key_help::{KeyHelp, k};
use crate::tui::shared::Shared;
use ratatui::Frame;
use ratatui::crossterm::event::{KeyCode, KeyEvent, MouseEvent};
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui_textarea::TextArea;
use serde_json::{Value, json};

/// The keys of this view, for the help overlay.
pub const KEYS: &[KeyHelp] = &[
    k(
        "Mined pairs",
        "a",
        "accept the pair (then the next pending one)",
    ),
    k(
        "Mined pairs",
        "x",
        "reject the pair (then the next pending one)",
    ),
    k(
        "Mined pairs",
        "l then 1-8",
        "relabel: pick a failure-mode category (a decision)",
    ),
    k("Mined pairs", "A", "advance after a decision: on / off"),
    k(
        "Mined pairs",
        "C",
        "agreement per category (κ); Enter: its next conflict",
    ),
    k(
        "Mined pairs",
        "S then a / x",
        "settle a conflict between annotators (accept / reject)",
    ),
    k(
        "Mined pairs",
        "e",
        "edit the target action (Enter saves if valid)",
    ),
    k("Mined pairs", "n", "add a note (Enter saves)"),
    k("Mined pairs", "u", "undo your latest change on this pair"),
    k("Mined pairs", "] [", "next / previous pending pair"),
    k("Mined pairs", "J K", "scroll the pair detail"),
];

impl PairsView {
    /// The keys that act on the selected pair: decide, settle, relabel, edit the
    /// target, note, undo, and whether a decision advances.
    // Kept whole: one short arm per key, read beside the help's key list.
    fn pair_key(&mut self, key: KeyEvent, sh: &mut Shared, pair: &MinedPair) -> Option<Action> {
        let state = sh.folded.state(&pair.id);
        let annotate = |op, value, prev| {
            Some(Action::Annotate {
                pair_id: pair.id.clone(),
                op,
                value,
                prev,
            })
        };
        match key.code {
            KeyCode::Char('a') => self.decide(sh, pair, Op::Accept, Value::Null),
            KeyCode::Char('x') => self.decide(sh, pair, Op::Reject, Value::Null),
            KeyCode::Char('S') => {
                if state.status == Status::Conflict {
                    self.popup = Popup::Settle;
                    None
                } else {
                    Some(Action::Message("no conflict to settle here".into()))
                }
            }
            KeyCode::Char('A') => {
                self.stay = !self.stay;
                Some(Action::Message(
                    if self.stay {
                        "advance after a decision: off (A turns it on)"
                    } else {
                        "advance after a decision: on (A turns it off)"
                    }
                    .into(),
                ))
            }
            KeyCode::Char('l') => {
                self.popup = Popup::Relabel;
                None
            }
            KeyCode::Char('e') => {
                let target = state.target.unwrap_or_else(|| pair.target_action.clone());
                let text = escape_for_box(&serde_json::to_string(&target).unwrap_or_default());
                let elements = side_step(sh, &pair.success)
                    .map(|s| s.state.elements)
                    .unwrap_or_default();
                self.popup = Popup::Edit(Box::new(EditBox::new(&text, elements)));
                None
            }
            KeyCode::Char('n') => {
                let mut area = TextArea::default();
                area.set_placeholder_text("why? (Enter saves, Esc cancels)");
                self.popup = Popup::Note(Box::new(area));
                None
            }
            KeyCode::Char('u') => match sh.folded.last_active(&pair.id, &sh.annotator) {
                Some(e) => annotate(Op::Undo, json!(e.op.as_str()), e.value.clone()),
                None => Some(Action::Message(
                    "nothing of yours to undo on this pair".into(),
                )),
            },
            _ => None,
        }
    }
}

impl Component for PairsView {
    fn keys(&self) -> &'static [&'static [KeyHelp]] {
        &[KEYS]
    }

    fn handle_key(&mut self, key: KeyEvent, sh: &mut Shared) -> Option<Action> {
        self.refresh_rows(sh);
        let pair = self
            .rows
            .get(self.list.selected)
            .and_then(|&i| sh.pairs.get(i))
            .cloned();
        if !matches!(self.popup, Popup::None) {
            return pair.and_then(|p| self.popup_key(key, sh, &p));
        }
        let before = self.list.selected;
        if self.list.navigate(&key, self.rows.len()) {
            if before != self.list.selected {
                self.detail_scroll = 0;
            }
            return None;
        }
        match key.code {
            KeyCode::Char(']') => return self.jump_pending(sh, true),
            KeyCode::Char('[') => return self.jump_pending(sh, false),
            KeyCode::Char('J') => self.detail_scroll = self.detail_scroll.saturating_add(3),
            KeyCode::Char('K') => self.detail_scroll = self.detail_scroll.saturating_sub(3),
            KeyCode::Char('C') => {
                let rows = crate::annotate::agreement::by_category(
                    &sh.folded,
                    sh.pairs
                        .iter()
                        .map(|p| (p.id.as_str(), p.failure_mode.category.as_str())),
                );
                self.popup = Popup::Agreement(Box::new(AgreementView::new(rows)));
                return None;
            }
            _ => {}
        }
        self.pair_key(key, sh, &pair?)
    }

    /// A click selects a pair; the wheel moves through the queue, or scrolls the
    /// pair's detail under the pointer. Nothing while a popup is open.
    fn handle_mouse(&mut self, ev: MouseEvent, sh: &mut Shared) -> Option<Action> {
        let p = Pointer::of(&ev)?;
        if !matches!(self.popup, Popup::None) {
            return None;
        }
        self.refresh_rows(sh);
        match self.list.pointer(p, self.rows.len()) {
            Some(ListPointer::Moved) => self.detail_scroll = 0,
            Some(_) => {}
            None if self.detail_area.contains(p.at()) => {
                if let Pointer::Scroll(_, down) = p {
                    let key = KeyCode::Char(if down { 'J' } else { 'K' });
                    return self.handle_key(KeyEvent::from(key), sh);
                }
            }
            None => {}
        }
        None
    }

    fn captures_text(&self) -> bool {
        !matches!(self.popup, Popup::None)
    }

    fn filter(&self) -> &str {
        &self.filter
    }

    fn set_filter(&mut self, filter: &str) {
        self.filter = filter.to_string();
        self.list = Cursor::default();
    }

    fn draw(&mut self, f: &mut Frame, area: Rect, sh: &mut Shared) {
        self.refresh_rows(sh);
        let th = sh.theme.clone();
        let [left, right] =
            Layout::horizontal([Constraint::Length(48), Constraint::Min(40)]).areas(area);
        self.draw_queue(f, left, sh);
        let Some(pair) = self
            .rows
            .get(self.list.selected)
            .and_then(|&i| sh.pairs.get(i))
            .cloned()
        else {
            f.render_widget(pane("Pair", false, &th), right);
            return;
        };
        self.detail_area = right;
        self.draw_detail(f, right, sh, &pair);
        self.draw_popup(f, area, sh, &pair);
    }
}

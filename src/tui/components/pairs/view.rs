//! The state of the Mined pairs tab: the queue's rows, the cursor, the open popup,
//! and what each key does to them (decisions come back as annotation actions).

use super::edit::EditBox;
use crate::action::Action as BrowserAction;
use crate::annotate::{Op, Status};
use crate::mine::pair::{DEFAULT_TAXONOMY, MinedPair};
use crate::tui::action::Action;
use crate::tui::components::agreement::{AgreementKey, AgreementView};
use crate::tui::components::{Component, Cursor, filter_indices};
use crate::tui::shared::Shared;
use crate::tui::widgets::text::line;
use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use ratatui::layout::Rect;
use ratatui_textarea::TextArea;
use serde_json::{Value, json};

/// An open popup of the tab.
#[derive(Default)]
pub enum Popup {
    #[default]
    None,
    /// Waiting for a number key 1-8.
    Relabel,
    /// Settling a conflict: waiting for `a` or `x`.
    Settle,
    /// Editing the target action.
    Edit(Box<EditBox>),
    /// Writing a note.
    Note(Box<TextArea<'static>>),
    /// Agreement between annotators per category (`C`).
    Agreement(Box<AgreementView>),
}

/// State of the Mined pairs tab.
#[derive(Default)]
pub struct PairsView {
    pub list: Cursor,
    pub popup: Popup,
    pub detail_scroll: u16,
    pub(super) filter: String,
    pub(super) rows: Vec<usize>,
    pub(super) rows_key: Option<(u64, String)>,
    /// Stay on the pair after a decision instead of moving to the next pending one
    /// (`A` toggles).
    pub stay: bool,
    /// Where the pair detail was last drawn (for the mouse).
    pub(super) detail_area: Rect,
}

impl PairsView {
    pub(super) fn refresh_rows(&mut self, sh: &Shared) {
        let key = (sh.version, self.filter.clone());
        if self.rows_key.as_ref() == Some(&key) {
            return;
        }
        self.rows = filter_indices(sh.pairs.len(), &self.filter, |i| {
            let p = &sh.pairs[i];
            let st = sh.folded.state(&p.id);
            format!(
                "{} {} {} {} {}",
                p.id,
                p.task_id,
                st.category.as_deref().unwrap_or(&p.failure_mode.category),
                st.status.as_str(),
                p.domain
            )
        });
        self.rows_key = Some(key);
    }

    /// Puts the cursor on the pair `id` (clearing the filter if it hides it);
    /// false when the dataset has no such pair.
    pub fn select_pair(&mut self, id: &str, sh: &Shared) -> bool {
        let Some(i) = sh.pairs.iter().position(|p| p.id == id) else {
            return false;
        };
        self.refresh_rows(sh);
        if !self.rows.contains(&i) {
            self.set_filter("");
            self.refresh_rows(sh);
        }
        match self.rows.iter().position(|&r| r == i) {
            Some(pos) => {
                self.list.selected = pos;
                self.detail_scroll = 0;
                true
            }
            None => false,
        }
    }

    /// The pair under the cursor.
    pub fn selected<'a>(&mut self, sh: &'a Shared) -> Option<&'a MinedPair> {
        self.refresh_rows(sh);
        self.rows
            .get(self.list.selected)
            .and_then(|&i| sh.pairs.get(i))
    }

    /// Moves to the nearest pending pair `forward` or backward, looking at most
    /// `reach` rows away (with wrap-around); false when none is within reach.
    pub(super) fn move_to_pending(&mut self, sh: &Shared, forward: bool, reach: usize) -> bool {
        let n = self.rows.len();
        for k in 1..=reach.min(n) {
            let pos = if forward {
                (self.list.selected + k) % n
            } else {
                (self.list.selected + n - k % n) % n
            };
            if sh.folded.status(&sh.pairs[self.rows[pos]].id) == Status::Pending {
                self.list.selected = pos;
                self.detail_scroll = 0;
                return true;
            }
        }
        false
    }

    /// Moves to the next pair in conflict (of `category` as mined, if given), clearing
    /// the filter when it hides it; a message when there is none.
    pub(super) fn next_conflict(&mut self, sh: &Shared, category: Option<&str>) -> Option<Action> {
        let n = sh.pairs.len();
        let from = self.rows.get(self.list.selected).copied().unwrap_or(0);
        let hit = (1..=n).map(|k| (from + k) % n).find(|&i| {
            let p = &sh.pairs[i];
            category.is_none_or(|c| p.failure_mode.category == c)
                && sh.folded.status(&p.id) == Status::Conflict
        });
        match hit {
            Some(i) => {
                let id = sh.pairs[i].id.clone();
                self.select_pair(&id, sh);
                Some(Action::Message(format!("{}: S settles", line(&id))))
            }
            None => Some(Action::Message(match category {
                Some(c) => format!("no open conflict in {}", line(c)),
                None => "no open conflict".into(),
            })),
        }
    }

    pub(super) fn jump_pending(&mut self, sh: &Shared, forward: bool) -> Option<Action> {
        let n = self.rows.len();
        (!self.move_to_pending(sh, forward, n))
            .then(|| Action::Message("no pending pair left".into()))
    }

    /// After a decision on the selected pair: moves to the next pending pair other
    /// than it, unless `stay` is set or none is left.
    pub(super) fn advance(&mut self, sh: &Shared) {
        if !self.stay {
            let others = self.rows.len().saturating_sub(1);
            self.move_to_pending(sh, true, others);
        }
    }

    /// A decision (`accept`, `reject`, `relabel` to `value`) by this annotator on
    /// `pair`: one event, or a message when it repeats the decision they stand by.
    pub(super) fn decide(
        &mut self,
        sh: &Shared,
        pair: &MinedPair,
        op: Op,
        value: Value,
    ) -> Option<Action> {
        let state = sh.folded.state(&pair.id);
        let mine = sh.folded.decision_of(&pair.id, &sh.annotator);
        let repeated = match op {
            Op::Relabel => {
                mine == Some(Op::Relabel)
                    && state.category.as_ref() == value.as_str().map(str::to_owned).as_ref()
            }
            _ => mine == Some(op),
        };
        self.advance(sh);
        if repeated {
            // Short: the status bar keeps the end of the line for it.
            return Some(Action::Message(format!(
                "already {}",
                match op {
                    Op::Accept => "accepted",
                    Op::Reject => "rejected",
                    _ => "this category",
                }
            )));
        }
        let prev = match op {
            Op::Relabel => json!(
                state
                    .category
                    .unwrap_or_else(|| pair.failure_mode.category.clone())
            ),
            _ => json!(state.status.as_str()),
        };
        Some(Action::Annotate {
            pair_id: pair.id.clone(),
            op,
            value,
            prev,
        })
    }

    pub(super) fn popup_key(
        &mut self,
        key: KeyEvent,
        sh: &Shared,
        pair: &MinedPair,
    ) -> Option<Action> {
        let current_target = sh
            .folded
            .state(&pair.id)
            .target
            .unwrap_or_else(|| pair.target_action.clone());
        match &mut self.popup {
            Popup::None => None,
            Popup::Agreement(view) => match view.key(&key) {
                AgreementKey::Stay => None,
                AgreementKey::Close => {
                    self.popup = Popup::None;
                    None
                }
                AgreementKey::NextConflict(category) => {
                    self.popup = Popup::None;
                    self.next_conflict(sh, category.as_deref())
                }
            },
            Popup::Settle => {
                let value = match key.code {
                    KeyCode::Char('a') => "accept",
                    KeyCode::Char('x') => "reject",
                    KeyCode::Esc => {
                        self.popup = Popup::None;
                        return None;
                    }
                    _ => return None,
                };
                self.popup = Popup::None;
                self.advance(sh);
                Some(Action::Annotate {
                    pair_id: pair.id.clone(),
                    op: Op::Settle,
                    value: json!(value),
                    prev: json!(Status::Conflict.as_str()),
                })
            }
            Popup::Relabel => {
                let pick = match key.code {
                    KeyCode::Char(c @ '1'..='9') => DEFAULT_TAXONOMY.get(c as usize - '1' as usize),
                    _ => None,
                };
                if key.code == KeyCode::Esc {
                    self.popup = Popup::None;
                    return None;
                }
                let cat = pick?;
                self.popup = Popup::None;
                self.decide(sh, pair, Op::Relabel, json!(cat))
            }
            Popup::Edit(_) => self.edit_key(key, pair, &current_target),
            Popup::Note(_) => self.note_key(key, pair),
        }
    }

    /// Keys in the target editor: Enter saves a target that parses, Esc closes, Ctrl-U
    /// clears, the rest edit.
    fn edit_key(
        &mut self,
        key: KeyEvent,
        pair: &MinedPair,
        current_target: &BrowserAction,
    ) -> Option<Action> {
        let Popup::Edit(b) = &mut self.popup else {
            return None;
        };
        match key.code {
            KeyCode::Esc => {
                self.popup = Popup::None;
                None
            }
            KeyCode::Enter => match &b.parsed {
                Ok(a) => {
                    let value = serde_json::to_value(a).unwrap_or(Value::Null);
                    let prev = serde_json::to_value(current_target).unwrap_or(Value::Null);
                    self.popup = Popup::None;
                    Some(Action::Annotate {
                        pair_id: pair.id.clone(),
                        op: Op::EditTarget,
                        value,
                        prev,
                    })
                }
                Err(e) => Some(Action::Message(format!("not saved: {e}"))),
            },
            KeyCode::Char('u') if key.modifiers.contains(KeyModifiers::CONTROL) => {
                b.area.select_all();
                b.area.cut();
                b.reparse();
                None
            }
            _ => {
                b.area.input(key);
                b.reparse();
                None
            }
        }
    }

    /// Keys in the note editor: Enter saves a note that is not empty, Esc closes, Ctrl-U
    /// clears, the rest edit.
    fn note_key(&mut self, key: KeyEvent, pair: &MinedPair) -> Option<Action> {
        let Popup::Note(area) = &mut self.popup else {
            return None;
        };
        match key.code {
            KeyCode::Esc => {
                self.popup = Popup::None;
                None
            }
            KeyCode::Enter => {
                let text = area.lines().join("\n").trim().to_string();
                if text.is_empty() {
                    return Some(Action::Message("empty note not saved".into()));
                }
                self.popup = Popup::None;
                Some(Action::Annotate {
                    pair_id: pair.id.clone(),
                    op: Op::Note,
                    value: json!(text),
                    prev: Value::Null,
                })
            }
            KeyCode::Char('u') if key.modifiers.contains(KeyModifiers::CONTROL) => {
                area.select_all();
                area.cut();
                None
            }
            _ => {
                area.input(key);
                None
            }
        }
    }
}

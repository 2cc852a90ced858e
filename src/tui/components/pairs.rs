//! The Mined pairs tab: the audit queue and the side-by-side divergence view, with
//! keys to accept, reject, relabel, edit the target, note and undo. Every change is
//! an [`Action::Annotate`] that the app appends to `annotations.jsonl` at once.

use super::agreement::{AgreementKey, AgreementView};
use super::step_view::element_window;
use super::{Component, Cursor, ListPointer, Pointer, filter_indices, pane};
use crate::action::Action as BrowserAction;
use crate::action::parse::parse_response;
use crate::annotate::{Op, Status};
use crate::mine::pair::{DEFAULT_TAXONOMY, LabelSource, MinedPair, StepRef};
use crate::reward::{Decision, score_action};
use crate::trajectory::{Element, Step};
use crate::tui::action::Action;
use crate::tui::shared::Shared;
use crate::tui::theme::Theme;
use crate::tui::widgets::text::{line, trunc};
use ratatui::Frame;
use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers, MouseEvent};
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Clear, Paragraph, Wrap};
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

/// The target-action editor: the text, and what the parser and the rubric say
/// about it on the pair's page (recomputed on every key).
pub struct EditBox {
    pub area: TextArea<'static>,
    pub parsed: Result<BrowserAction, String>,
    /// The elements of the page the target acts on (the success side's step).
    elements: Vec<Element>,
}

impl EditBox {
    fn new(initial: &str, elements: Vec<Element>) -> Self {
        let mut area = TextArea::from(initial.lines().map(str::to_owned).collect::<Vec<_>>());
        area.move_cursor(ratatui_textarea::CursorMove::Bottom);
        area.move_cursor(ratatui_textarea::CursorMove::End);
        let mut b = EditBox {
            area,
            parsed: Err(String::new()),
            elements,
        };
        b.reparse();
        b
    }

    fn reparse(&mut self) {
        self.parsed = parse_target(&self.area.lines().join("\n"))
            .and_then(|a| fits_page(&a, &self.elements).map(|()| a));
    }
}

/// Refuses a target the page cannot take: an unknown action, a known one with
/// missing or mistyped parameters, or an element index the page does not have.
/// With no recorded elements only the action itself is checked.
pub fn fits_page(a: &BrowserAction, elements: &[Element]) -> Result<(), String> {
    if !crate::action::CANONICAL_NAMES.contains(&a.name.as_str()) {
        return Err(format!(
            "unknown action `{}` (one of {})",
            a.name,
            crate::action::CANONICAL_NAMES.join(", ")
        ));
    }
    crate::action::check::check_params(a).map_err(|e| format!("{}: {}", e.key, e.message))?;
    match a.target_index() {
        Some(i) if !elements.is_empty() && !elements.iter().any(|e| i64::from(e.index) == i) => {
            let shown: Vec<String> = elements
                .iter()
                .take(12)
                .map(|e| e.index.to_string())
                .collect();
            let more = if elements.len() > shown.len() {
                ", …"
            } else {
                ""
            };
            Err(format!(
                "index {i} is not on this page (index.absent: its {} elements are {}{more})",
                elements.len(),
                shown.join(", ")
            ))
        }
        _ => Ok(()),
    }
}

/// Reads a target action typed by an annotator: the canonical JSON form
/// (`{"name": "click", "params": {"index": 3}}`), or anything the action parser
/// accepts (a model response, the short form `click(3)`); the first action counts.
pub fn parse_target(text: &str) -> Result<BrowserAction, String> {
    let t = text.trim();
    if t.is_empty() {
        return Err("empty: type an action".into());
    }
    if let Ok(v) = serde_json::from_str::<Value>(t)
        && v.get("name").is_some_and(Value::is_string)
    {
        return serde_json::from_value::<BrowserAction>(v)
            .map_err(|e| format!("not an action: {e}"));
    }
    match parse_response(t) {
        Ok(p) => p
            .actions
            .into_iter()
            .next()
            .ok_or_else(|| "no action in the text".to_string()),
        Err(e) => Err(e.message),
    }
}

/// State of the Mined pairs tab.
#[derive(Default)]
pub struct PairsView {
    pub list: Cursor,
    pub popup: Popup,
    pub detail_scroll: u16,
    filter: String,
    rows: Vec<usize>,
    rows_key: Option<(u64, String)>,
    /// Stay on the pair after a decision instead of moving to the next pending one
    /// (`A` toggles).
    pub stay: bool,
    /// Where the pair detail was last drawn (for the mouse).
    detail_area: Rect,
}

fn status_icon(s: Status) -> &'static str {
    match s {
        Status::Pending => "·",
        Status::Accepted => "✓",
        Status::Rejected => "✗",
        Status::Edited => "✎",
        Status::Conflict => "≠",
    }
}

impl PairsView {
    fn refresh_rows(&mut self, sh: &Shared) {
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
    fn move_to_pending(&mut self, sh: &Shared, forward: bool, reach: usize) -> bool {
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
    fn next_conflict(&mut self, sh: &Shared, category: Option<&str>) -> Option<Action> {
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

    fn jump_pending(&mut self, sh: &Shared, forward: bool) -> Option<Action> {
        let n = self.rows.len();
        (!self.move_to_pending(sh, forward, n))
            .then(|| Action::Message("no pending pair left".into()))
    }

    /// After a decision on the selected pair: moves to the next pending pair other
    /// than it, unless `stay` is set or none is left.
    fn advance(&mut self, sh: &Shared) {
        if !self.stay {
            let others = self.rows.len().saturating_sub(1);
            self.move_to_pending(sh, true, others);
        }
    }

    /// A decision (`accept`, `reject`, `relabel` to `value`) by this annotator on
    /// `pair`: one event, or a message when it repeats the decision they stand by.
    fn decide(&mut self, sh: &Shared, pair: &MinedPair, op: Op, value: Value) -> Option<Action> {
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

    fn popup_key(&mut self, key: KeyEvent, sh: &Shared, pair: &MinedPair) -> Option<Action> {
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
            Popup::Edit(b) => match key.code {
                KeyCode::Esc => {
                    self.popup = Popup::None;
                    None
                }
                KeyCode::Enter => match &b.parsed {
                    Ok(a) => {
                        let value = serde_json::to_value(a).unwrap_or(Value::Null);
                        let prev = serde_json::to_value(&current_target).unwrap_or(Value::Null);
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
            },
            Popup::Note(area) => match key.code {
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
            },
        }
    }
}

impl Component for PairsView {
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
        let pair = pair?;
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
            KeyCode::Char('a') => self.decide(sh, &pair, Op::Accept, Value::Null),
            KeyCode::Char('x') => self.decide(sh, &pair, Op::Reject, Value::Null),
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
        let (done, total) = sh.reviewed();
        let stays = if self.stay {
            " · stays after a decision"
        } else {
            ""
        };
        let block = pane(format!("Queue {done}/{total} reviewed{stays}"), true, &th);
        let inner = block.inner(left);
        f.render_widget(block, left);
        let window = self.list.window_in(self.rows.len(), inner);
        let mut lines = Vec::new();
        for pos in window {
            let p = &sh.pairs[self.rows[pos]];
            let st = sh.folded.state(&p.id);
            let cat = st.category.as_deref().unwrap_or(&p.failure_mode.category);
            let text = format!(
                "{} {:<14} {:<18} {:.2} {:.2}",
                status_icon(st.status),
                trunc(&p.id, 14),
                trunc(cat, 18),
                if st.category.is_some() {
                    1.0
                } else {
                    p.failure_mode.confidence
                },
                p.scores.total
            );
            let style = if pos == self.list.selected {
                th.selected()
            } else {
                match st.status {
                    Status::Pending => th.text(),
                    Status::Accepted | Status::Edited => th.good(),
                    Status::Rejected => th.bad(),
                    Status::Conflict => th.warn(),
                }
            };
            lines.push(Line::from(Span::styled(
                trunc(&text, inner.width as usize),
                style,
            )));
        }
        if lines.is_empty() {
            let msg = if !sh.pairs_loaded {
                "loading mined pairs…"
            } else if !self.filter.is_empty() {
                "(no match)"
            } else {
                "(no mined pairs: run `rmsweb mine`)"
            };
            lines.push(Line::from(Span::styled(msg, th.dim())));
        }
        f.render_widget(Paragraph::new(lines), inner);

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

/// The step a pair side points at, loaded through the cache.
fn side_step(sh: &mut Shared, r: &StepRef) -> Result<Step, String> {
    let t = sh.trajectories.by_id(&sh.dataset, &r.trajectory)?;
    t.steps
        .iter()
        .find(|s| s.index == r.step)
        .or_else(|| t.steps.get(r.step as usize))
        .cloned()
        .ok_or_else(|| format!("trajectory {} has no step {}", line(&r.trajectory), r.step))
}

fn decision_line(label: &str, d: &Decision, th: &Theme) -> Line<'static> {
    let style = match d.level {
        crate::reward::Level::Exact | crate::reward::Level::Core => th.good(),
        crate::reward::Level::Type => th.warn(),
        crate::reward::Level::Wrong => th.bad(),
    };
    Line::from(vec![
        Span::styled(format!("{label}: "), th.label()),
        Span::styled(
            format!("{:.1} {:?}", d.score, d.level).to_lowercase(),
            style,
        ),
        Span::styled(format!("  {}", line(&d.rule)), th.text()),
        Span::styled(format!(" — {}", line(&d.reason)), th.dim()),
    ])
}

impl PairsView {
    fn draw_side(
        &self,
        f: &mut Frame,
        area: Rect,
        sh: &mut Shared,
        title: &str,
        r: &StepRef,
        action: &BrowserAction,
    ) {
        let th = sh.theme.clone();
        let block = pane(
            format!("{title} · {} step {}", trunc(&r.trajectory, 24), r.step),
            false,
            &th,
        );
        let inner = block.inner(area);
        f.render_widget(block, area);
        match side_step(sh, r) {
            Ok(step) => {
                let shot_h = (inner.height / 2).clamp(2, 10).min(inner.height);
                let [shot, text] =
                    Layout::vertical([Constraint::Length(shot_h), Constraint::Min(0)]).areas(inner);
                // The side's action drawn where it acts: the target on the success,
                // the failing action on the failure.
                sh.images.draw_marked(
                    f,
                    shot,
                    sh.dataset.root(),
                    step.state.screenshot.as_deref(),
                    crate::trajectory::mark::action_mark(&step.state, action),
                    th.dim(),
                );
                let w = text.width as usize;
                let mut lines = vec![
                    Line::from(vec![
                        Span::styled("URL ", th.label()),
                        Span::styled(trunc(&step.state.url, w.saturating_sub(4)), th.text()),
                    ]),
                    Line::from(vec![
                        Span::styled("Title ", th.label()),
                        Span::styled(trunc(&step.state.title, w.saturating_sub(6)), th.text()),
                    ]),
                    Line::from(vec![
                        Span::styled("Action ", th.label()),
                        Span::styled(trunc(&action.short(), w.saturating_sub(7)), th.warn()),
                    ]),
                ];
                let room = (text.height as usize).saturating_sub(lines.len());
                lines.extend(element_window(
                    &step.state,
                    action.target_index(),
                    &th,
                    w,
                    room,
                ));
                f.render_widget(Paragraph::new(lines), text);
            }
            Err(e) => f.render_widget(
                Paragraph::new(line(&e))
                    .style(th.bad())
                    .wrap(Wrap { trim: false }),
                inner,
            ),
        }
    }

    fn draw_detail(&mut self, f: &mut Frame, area: Rect, sh: &mut Shared, pair: &MinedPair) {
        let th = sh.theme.clone();
        let st = sh.folded.state(&pair.id);
        let [head, sides, bottom] = Layout::vertical([
            Constraint::Length(5),
            Constraint::Percentage(55),
            Constraint::Min(6),
        ])
        .areas(area);
        let instruction = sh
            .tasks
            .get(&pair.task_id)
            .map(|t| t.instruction.clone())
            .unwrap_or_default();
        let (cat, src, conf) = match &st.category {
            Some(c) => (c.clone(), "annotator".to_string(), 1.0),
            None => (
                pair.failure_mode.category.clone(),
                match pair.failure_mode.source {
                    LabelSource::Judge => "judge",
                    LabelSource::Heuristic => "heuristic",
                    LabelSource::Annotator => "annotator",
                }
                .to_string(),
                pair.failure_mode.confidence,
            ),
        };
        let status_style = match st.status {
            Status::Pending | Status::Conflict => th.warn(),
            Status::Accepted | Status::Edited => th.good(),
            Status::Rejected => th.bad(),
        };
        let who = match (&st.settled, st.status) {
            (Some((by, op)), _) => format!(" (settled by {}: {})", line(by), op.as_str()),
            (None, Status::Conflict) => format!(" ({} · S settles)", decisions_text(&st)),
            _ => st
                .last_annotator
                .as_ref()
                .map(|a| format!(" (by {})", line(a)))
                .unwrap_or_default(),
        };
        let head_lines = vec![
            Line::from(vec![
                Span::styled("Task: ", th.label()),
                Span::styled(line(&instruction), th.text()),
            ]),
            Line::from(vec![
                Span::styled("Status: ", th.label()),
                Span::styled(st.status.as_str(), status_style),
                Span::styled(who, th.dim()),
            ]),
            Line::from(vec![
                Span::styled("Category: ", th.label()),
                Span::styled(line(&cat), th.text()),
                Span::styled(format!(" ({src}, {conf:.2})"), th.dim()),
            ]),
        ];
        let kind = match pair.kind {
            crate::mine::pair::PairKind::FailContrast => "fail_contrast",
            crate::mine::pair::PairKind::Detour => "detour",
        };
        f.render_widget(
            Paragraph::new(head_lines).block(pane(
                format!("{} · {kind} · {}", trunc(&pair.id, 30), line(&pair.domain)),
                false,
                &th,
            )),
            head,
        );
        let [s_left, s_right] =
            Layout::horizontal([Constraint::Percentage(50), Constraint::Percentage(50)])
                .areas(sides);
        let target = st
            .target
            .clone()
            .unwrap_or_else(|| pair.target_action.clone());
        self.draw_side(f, s_left, sh, "Success", &pair.success, &target);
        self.draw_side(f, s_right, sh, "Loc", &pair.loc, &pair.loc_action);

        let elements: Vec<Element> = side_step(sh, &pair.success)
            .map(|s| s.state.elements)
            .unwrap_or_default();
        let decision = score_action(&pair.loc_action, &target, &elements, &sh.reward_cfg);
        let sc = &pair.scores;
        let mut lines = vec![
            Line::from(vec![
                Span::styled("Target: ", th.label()),
                Span::styled(line(&target.short()), th.good()),
                Span::styled(
                    if st.target.is_some() {
                        format!("  (edited; mined: {})", line(&pair.target_action.short()))
                    } else {
                        String::new()
                    },
                    th.dim(),
                ),
                Span::styled("   Loc: ", th.label()),
                Span::styled(line(&pair.loc_action.short()), th.bad()),
            ]),
            decision_line("Rubric (loc vs target)", &decision, &th),
            Line::from(vec![
                Span::styled("Alignment: ", th.label()),
                Span::styled(
                    format!(
                        "url {:.2} · dom {:.2} · memory {:.2} · progress {:.2} → {:.2}   contrast {:.2} · evidence {:.2} · total {:.2}",
                        sc.url,
                        sc.dom,
                        sc.memory,
                        sc.progress,
                        sc.alignment,
                        sc.contrast,
                        sc.evidence,
                        sc.total
                    ),
                    th.text(),
                ),
            ]),
            Line::from(vec![
                Span::styled("Gates: ", th.label()),
                Span::styled(
                    format!(
                        "validity {} · visual {} · progress {}",
                        mark(pair.gates.validity),
                        mark(pair.gates.visual),
                        mark(pair.gates.progress)
                    ),
                    th.text(),
                ),
            ]),
            Line::from(Span::styled("Evidence:", th.label())),
        ];
        for e in &pair.evidence {
            lines.push(Line::from(Span::styled(
                format!("  • {}", line(e)),
                th.text(),
            )));
        }
        if !st.notes.is_empty() {
            lines.push(Line::from(Span::styled("Notes:", th.label())));
            for n in &st.notes {
                lines.push(Line::from(Span::styled(
                    format!("  ✎ {}", line(n)),
                    th.text(),
                )));
            }
        }
        let p = Paragraph::new(lines)
            .wrap(Wrap { trim: false })
            .scroll((self.detail_scroll, 0))
            .block(pane(
                "Decision · a accept · x reject · l relabel · e edit · n note · u undo · ] next",
                false,
                &th,
            ));
        f.render_widget(p, bottom);
    }

    fn draw_popup(&mut self, f: &mut Frame, area: Rect, sh: &mut Shared, pair: &MinedPair) {
        let th = sh.theme.clone();
        let centered = |w: u16, h: u16| {
            let w = w.min(area.width);
            let h = h.min(area.height);
            Rect::new(
                area.x + (area.width - w) / 2,
                area.y + (area.height - h) / 2,
                w,
                h,
            )
        };
        match &mut self.popup {
            Popup::None => {}
            Popup::Agreement(view) => view.draw(f, area, &th),
            Popup::Settle => {
                let st = sh.folded.state(&pair.id);
                let mut lines: Vec<Line> = st
                    .decisions
                    .iter()
                    .map(|(who, op)| {
                        Line::from(vec![
                            Span::styled(format!(" {:<16}", trunc(&line(who), 16)), th.label()),
                            Span::styled(
                                op.as_str(),
                                if *op == Op::Reject {
                                    th.bad()
                                } else {
                                    th.good()
                                },
                            ),
                        ])
                    })
                    .collect();
                lines.push(Line::from(Span::styled(
                    " a accept · x reject · Esc cancels",
                    th.dim(),
                )));
                let r = centered(44, lines.len() as u16 + 2);
                f.render_widget(Clear, r);
                f.render_widget(
                    Paragraph::new(lines).block(pane("Settle the conflict", true, &th)),
                    r,
                );
            }
            Popup::Relabel => {
                let r = centered(44, DEFAULT_TAXONOMY.len() as u16 + 2);
                f.render_widget(Clear, r);
                let lines: Vec<Line> = DEFAULT_TAXONOMY
                    .iter()
                    .enumerate()
                    .map(|(i, c)| {
                        Line::from(vec![
                            Span::styled(format!(" {} ", i + 1), th.label()),
                            Span::styled(*c, th.text()),
                        ])
                    })
                    .collect();
                f.render_widget(
                    Paragraph::new(lines).block(pane(
                        "Relabel: press 1-8 (Esc cancels)",
                        true,
                        &th,
                    )),
                    r,
                );
            }
            Popup::Edit(b) => {
                let r = centered(area.width.saturating_sub(8), 12);
                f.render_widget(Clear, r);
                let block = pane(
                    "Edit target action · Enter saves if valid · Esc cancels · Ctrl-U clears",
                    true,
                    &th,
                );
                let inner = block.inner(r);
                f.render_widget(block, r);
                let [edit, info] =
                    Layout::vertical([Constraint::Min(3), Constraint::Length(3)]).areas(inner);
                b.area.set_style(th.text());
                f.render_widget(&b.area, edit);
                let info_lines = match &b.parsed {
                    Ok(a) => {
                        let vs_mined =
                            score_action(a, &pair.target_action, &b.elements, &sh.reward_cfg);
                        let loc = score_action(&pair.loc_action, a, &b.elements, &sh.reward_cfg);
                        vec![
                            Line::from(vec![
                                Span::styled("valid: ", th.good()),
                                Span::styled(line(&a.short()), th.text()),
                            ]),
                            decision_line("vs mined target", &vs_mined, &th),
                            decision_line("loc action vs this", &loc, &th),
                        ]
                    }
                    Err(e) => vec![Line::from(vec![
                        Span::styled("invalid: ", th.bad()),
                        Span::styled(line(e), th.text()),
                    ])],
                };
                f.render_widget(Paragraph::new(info_lines), info);
            }
            Popup::Note(a) => {
                let r = centered(70, 6);
                f.render_widget(Clear, r);
                let block = pane("Note · Enter saves · Esc cancels", true, &th);
                let inner = block.inner(r);
                f.render_widget(block, r);
                a.set_style(th.text());
                f.render_widget(&**a, inner);
            }
        }
    }
}

/// `alice: accept · bob: reject`, each annotator's standing decision.
fn decisions_text(st: &crate::annotate::PairState) -> String {
    st.decisions
        .iter()
        .map(|(who, op)| format!("{}: {}", line(who), op.as_str()))
        .collect::<Vec<_>>()
        .join(" · ")
}

fn mark(b: bool) -> &'static str {
    if b { "✓" } else { "✗" }
}

/// JSON made safe for a text box: characters the sanitizer would strip (controls,
/// bidirectional overrides) become `\uXXXX` escapes, which are valid inside JSON
/// strings and round-trip to the same value.
pub fn escape_for_box(json: &str) -> String {
    json.chars()
        .map(|c| {
            if crate::util::sanitize::clean_line(c.encode_utf8(&mut [0; 4])) != c.to_string() {
                format!("\\u{:04x}", c as u32)
            } else {
                c.to_string()
            }
        })
        .collect()
}

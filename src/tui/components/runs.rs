//! The Runs tab (the run monitor is a later issue).

use super::{Component, pane};
use crate::tui::action::Action;
use crate::tui::shared::Shared;
use ratatui::Frame;
use ratatui::crossterm::event::KeyEvent;
use ratatui::layout::Rect;
use ratatui::widgets::Paragraph;

/// Placeholder until the run monitor is built.
#[derive(Default)]
pub struct RunsView;

impl Component for RunsView {
    fn handle_key(&mut self, _key: KeyEvent, _sh: &mut Shared) -> Option<Action> {
        None
    }

    fn draw(&mut self, f: &mut Frame, area: Rect, sh: &mut Shared) {
        let p = Paragraph::new("runs monitor: not built yet")
            .style(sh.theme.dim())
            .block(pane("Runs", true, &sh.theme));
        f.render_widget(p, area);
    }
}

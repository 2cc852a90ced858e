//! The curriculum view (opened with `c` on an RL run in the Runs tab): every mined
//! state of the run with its phase strip over the steps (competence-rejected →
//! accepted → mastered, lower case when salvaged), the selected state's route and
//! its best-of-n and mean reward over steps, and the share of sampled states in
//! each phase over training. Enter jumps to the state's pair in the Mined pairs tab;
//! Esc goes back to the runs. The numbers are `rmsweb rl curriculum RUN`'s.

use super::{Component, Cursor, ListPointer, Pointer, filter_indices, pane};
use crate::runs::curriculum::{Curriculum, Phase, StateRoute, curriculum};
use crate::tui::action::Action;
use crate::tui::key_help::{KeyHelp, k};
use crate::tui::shared::Shared;
use crate::tui::theme::Theme;
use crate::tui::widgets::chart::{PlotLine, View, draw_panel};
use crate::tui::widgets::text::{line, trunc};
use ratatui::Frame;
use ratatui::crossterm::event::{KeyCode, KeyEvent, MouseEvent};
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Style};
use ratatui::symbols::Marker;
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;
use std::path::Path;

/// The keys of this view, for the help overlay.
pub const KEYS: &[KeyHelp] = &[
    k(
        "Curriculum",
        "Enter",
        "jump to the state's pair in Mined pairs",
    ),
    k("Curriculum", "Esc", "back to the runs"),
];

/// State of the curriculum view.
pub struct CurriculumView {
    pub data: Curriculum,
    pub list: Cursor,
    filter: String,
    rows: Vec<usize>,
}

fn phase_color(p: Phase, th: &Theme) -> Color {
    match p {
        Phase::CompetenceRejected => th.bad,
        Phase::Accepted => th.accent,
        Phase::Mastered => th.ok,
        Phase::StdRejected => th.warn,
    }
}

/// A phase strip that fits `width` cells: one cell per step, or, for longer runs,
/// one per equal bucket of steps showing the state's last sampled phase in it.
pub fn fitted_strip(c: &Curriculum, s: &StateRoute, width: usize) -> Vec<(char, Option<Phase>)> {
    let cells: Vec<(char, Option<Phase>)> = c
        .row(s)
        .into_iter()
        .map(|p| {
            p.map_or(('·', None), |p| {
                (p.phase.letter(p.salvaged), Some(p.phase))
            })
        })
        .collect();
    let (n, w) = (cells.len(), width.max(1));
    if n <= w {
        return cells;
    }
    (0..w)
        .map(|b| {
            let (lo, hi) = (b * n / w, ((b + 1) * n / w).max(b * n / w + 1));
            (lo..hi)
                .rev()
                .find(|&k| cells[k].1.is_some())
                .map_or(('·', None), |k| cells[k])
        })
        .collect()
}

impl CurriculumView {
    /// Reads the run's curriculum; the error says why (no rollouts, unreadable).
    pub fn open(run: &Path) -> Result<CurriculumView, String> {
        let data = curriculum(run).map_err(|e| format!("{e:#}"))?;
        if data.states.is_empty() {
            return Err(format!(
                "{}: no rollout groups to show",
                run.join("rollouts.jsonl").display()
            ));
        }
        let rows = (0..data.states.len()).collect();
        Ok(CurriculumView {
            data,
            list: Cursor::default(),
            filter: String::new(),
            rows,
        })
    }

    /// The state under the cursor.
    pub fn selected(&self) -> Option<&StateRoute> {
        self.rows
            .get(self.list.selected)
            .and_then(|&i| self.data.states.get(i))
    }

    fn draw_list(&mut self, f: &mut Frame, area: Rect, th: &Theme) {
        let c = &self.data;
        let block = pane(
            format!(
                "Curriculum {} states · {} steps",
                self.rows.len(),
                c.steps.len()
            ),
            true,
            th,
        );
        let inner = block.inner(area);
        f.render_widget(block, area);
        let [legend, body] =
            Layout::vertical([Constraint::Length(2), Constraint::Min(1)]).areas(inner);
        f.render_widget(
            Paragraph::new(vec![
                Line::from(Span::styled(
                    "C competence-rejected · A accepted · M mastered",
                    th.dim(),
                )),
                Line::from(Span::styled(
                    "S std-rejected unsolved · lower case: salvaged",
                    th.dim(),
                )),
            ]),
            legend,
        );
        let width = body.width as usize;
        let id_w = (width / 2).clamp(8, 34);
        let strip_w = width.saturating_sub(id_w + 2);
        let range = self.list.window_in(self.rows.len(), body);
        let mut lines = Vec::new();
        for pos in range {
            let s = &c.states[self.rows[pos]];
            let mut spans = vec![Span::styled(
                format!("{:<id_w$} ", trunc(&s.prompt_id, id_w)),
                if pos == self.list.selected {
                    th.selected()
                } else {
                    th.text()
                },
            )];
            for (ch, p) in fitted_strip(c, s, strip_w) {
                let style = p.map_or(th.dim(), |p| Style::default().fg(phase_color(p, th)));
                spans.push(Span::styled(ch.to_string(), style));
            }
            lines.push(Line::from(spans));
        }
        f.render_widget(Paragraph::new(lines), body);
    }

    fn draw_state(&self, f: &mut Frame, area: Rect, th: &Theme) {
        let Some(s) = self.selected() else {
            f.render_widget(
                Paragraph::new(Span::styled("no state matches the filter", th.dim()))
                    .block(pane("State", false, th)),
                area,
            );
            return;
        };
        let [text, chart] =
            Layout::vertical([Constraint::Length(6), Constraint::Min(4)]).areas(area);
        let (first, last) = (&s.points[0], &s.points[s.points.len() - 1]);
        let sampled = s.points.len();
        let info = vec![
            Line::from(vec![
                Span::styled("route  ", th.label()),
                Span::styled(line(&s.route_text()), th.text()),
            ]),
            Line::from(vec![
                Span::styled("steps  ", th.label()),
                Span::styled(
                    format!(
                        "sampled at {sampled} of {} (first {}, last {}) · salvaged at {}",
                        self.data.steps.len(),
                        first.step,
                        last.step,
                        s.salvaged_steps
                    ),
                    th.text(),
                ),
            ]),
            Line::from(vec![
                Span::styled("reward ", th.label()),
                Span::styled(
                    format!(
                        "best-of-n {:.2} → {:.2} · mean {:.2} → {:.2}",
                        first.best, last.best, first.mean, last.mean
                    ),
                    th.text(),
                ),
            ]),
            Line::from(Span::styled(
                "Enter: its pair in Mined pairs · Esc: back to the runs",
                th.dim(),
            )),
        ];
        f.render_widget(
            Paragraph::new(info).block(pane(trunc(&s.prompt_id, 60), false, th)),
            text,
        );
        let best: Vec<(f64, f64)> = s.points.iter().map(|p| (p.step as f64, p.best)).collect();
        let mean: Vec<(f64, f64)> = s.points.iter().map(|p| (p.step as f64, p.mean)).collect();
        let title = Line::from(vec![
            Span::styled(" reward ", th.label()),
            Span::styled("━best-of-n ", Style::default().fg(th.ok)),
            Span::styled("━mean ", Style::default().fg(th.accent)),
        ]);
        draw_panel(
            f,
            chart,
            title,
            Some(&format!(" r_comp {} ", self.data.r_comp)),
            &[
                PlotLine {
                    color: th.ok,
                    marker: Marker::Braille,
                    points: best,
                },
                PlotLine {
                    color: th.accent,
                    marker: Marker::Braille,
                    points: mean,
                },
            ],
            View::default(),
            th,
        );
    }

    fn draw_shares(&self, f: &mut Frame, area: Rect, th: &Theme) {
        let mut title = vec![Span::styled(" phase shares ", th.label())];
        let mut lines = Vec::new();
        for p in Phase::ALL {
            title.push(Span::styled(
                format!("━{} ", p.key()),
                Style::default().fg(phase_color(p, th)),
            ));
            lines.push(PlotLine {
                color: phase_color(p, th),
                marker: Marker::Braille,
                points: self
                    .data
                    .shares
                    .iter()
                    .map(|s| (s.step as f64, s.shares.get(&p).copied().unwrap_or(0.0)))
                    .collect(),
            });
        }
        let bottom = self.data.shares.last().map(|s| {
            let parts: Vec<String> = Phase::ALL
                .iter()
                .map(|p| {
                    format!(
                        "{} {:.0}%",
                        p.letter(false),
                        100.0 * s.shares.get(p).copied().unwrap_or(0.0)
                    )
                })
                .collect();
            format!(" step {}: {} ", s.step, parts.join(" "))
        });
        draw_panel(
            f,
            area,
            Line::from(title),
            bottom.as_deref(),
            &lines,
            View::default(),
            th,
        );
    }
}

impl Component for CurriculumView {
    fn keys(&self) -> &'static [&'static [KeyHelp]] {
        &[KEYS]
    }

    /// A click selects a state (a click on the selected one jumps to its pair, as
    /// Enter); the wheel moves through the states.
    fn handle_mouse(&mut self, ev: MouseEvent, sh: &mut Shared) -> Option<Action> {
        match self.list.pointer(Pointer::of(&ev)?, self.rows.len())? {
            ListPointer::Again => self.handle_key(KeyEvent::from(KeyCode::Enter), sh),
            _ => None,
        }
    }

    fn handle_key(&mut self, key: KeyEvent, _sh: &mut Shared) -> Option<Action> {
        if self.list.navigate(&key, self.rows.len()) {
            return None;
        }
        match key.code {
            KeyCode::Esc => Some(Action::CloseCurriculum),
            KeyCode::Enter => self
                .selected()
                .map(|s| Action::ShowPair(s.prompt_id.clone())),
            _ => None,
        }
    }

    fn filter(&self) -> &str {
        &self.filter
    }

    fn set_filter(&mut self, filter: &str) {
        self.filter = filter.to_string();
        let states = &self.data.states;
        self.rows = filter_indices(states.len(), filter, |i| {
            format!("{} {}", states[i].prompt_id, states[i].route_text())
        });
        self.list = Cursor::default();
    }

    fn draw(&mut self, f: &mut Frame, area: Rect, sh: &mut Shared) {
        let th = sh.theme.clone();
        let [left, right] =
            Layout::horizontal([Constraint::Percentage(45), Constraint::Min(30)]).areas(area);
        self.draw_list(f, left, &th);
        let [state, shares] =
            Layout::vertical([Constraint::Percentage(55), Constraint::Min(6)]).areas(right);
        self.draw_state(f, state, &th);
        self.draw_shares(f, shares, &th);
    }
}

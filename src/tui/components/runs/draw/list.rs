//! The run list: one row per run with its state, step, pace, ETA and latest value.

use super::common::*;
use crate::runs::monitor::{RunsState, Track};
use crate::tui::components::pane;
use crate::tui::components::runs::view::RunsView;
use crate::tui::theme::Theme;
use crate::tui::widgets::chart::fmt_num;
use crate::tui::widgets::text::{line, trunc};
use ratatui::Frame;
use ratatui::layout::{Constraint, Rect};
use ratatui::style::Style;
use ratatui::text::Span;
use ratatui::widgets::{Paragraph, Row, Table};

/// The runs table's columns left out on a narrow terminal: kind, age.
const NARROW_DROPS: [usize; 2] = [3, 10];

impl RunsView {
    pub(crate) fn draw_list(
        &mut self,
        f: &mut Frame,
        area: Rect,
        st: &RunsState,
        vis: &[usize],
        th: &Theme,
    ) {
        let title = match (&self.opts.root, self.opts.watch.len()) {
            (Some(r), 0) => format!("Runs · {}", line(&r.display().to_string())),
            (Some(r), n) => format!("Runs · {} + {n} watched", line(&r.display().to_string())),
            (None, 0) => "Runs".into(),
            (None, n) => format!("Runs · {n} watched"),
        };
        let block = pane(title, true, th);
        if vis.is_empty() {
            let text = self.empty_text(st);
            f.render_widget(
                Paragraph::new(Span::styled(text, th.dim())).block(block),
                area,
            );
            return;
        }
        // The rows, under the top border and the header.
        let rows_area = Rect::new(
            area.x + 1,
            area.y + 2,
            area.width.saturating_sub(2),
            area.height.saturating_sub(3),
        );
        let range = self.cursor.window_in(vis.len(), rows_area);
        // Below this width `kind` and `age` give their room to the others (an
        // 80-column terminal otherwise cuts every header: `prese`, `salva`).
        let narrow = area.width < 104;
        let keep = |col: usize| !narrow || !NARROW_DROPS.contains(&col);
        let now = self.now();
        let rows = vis[range.clone()].iter().enumerate().map(|(i, &ri)| {
            let t = &st.runs[ri];
            let idx = range.start + i;
            // The selected row is drawn in the selection style through and through:
            // a cell's own colour (a yellow "running") would be unreadable on it.
            let selected = idx == self.cursor.selected;
            let cells = self.run_cells(t, selected, now, th);
            let row = Row::new(
                cells
                    .into_iter()
                    .enumerate()
                    .filter(|(c, _)| keep(*c))
                    .map(|(_, s)| s),
            );
            if selected {
                row.style(th.selected())
            } else {
                row
            }
        });
        let (widths, header) = columns(narrow);
        let table = Table::new(rows, widths)
            .header(Row::new(header).style(th.dim()))
            .block(block);
        f.render_widget(table, area);
    }

    /// What the list says when no run is shown: filtered out, none yet, or no folder.
    fn empty_text(&self, st: &RunsState) -> String {
        match &self.opts.root {
            _ if !st.runs.is_empty() => format!(
                "no run matches the filter `{}` (/ then Esc clears)",
                line(&self.filter)
            ),
            Some(r) if !r.is_dir() => format!(
                "no runs yet ({} does not exist) · n launches a run",
                line(&r.display().to_string())
            ),
            Some(_) => "no runs yet · n launches a run".into(),
            None => "no runs folder: start with --runs DIR or --watch FILE".into(),
        }
    }

    /// A run's cells, in the columns' order: mark, id, state, kind, preset, mode, step,
    /// seconds a step, ETA, headline metric, age.
    fn run_cells(
        &self,
        t: &Track,
        selected: bool,
        now: chrono::DateTime<chrono::Utc>,
        th: &Theme,
    ) -> Vec<Span<'static>> {
        let (state, sstyle) = state_style(t, self.launcher.child_state(&t.info.dir), th);
        let headline = t
            .headline()
            .map(|(what, v)| format!("{what} {}", fmt_num(v)))
            .unwrap_or_else(|| "-".into());
        let mark = if self.marked.contains(&t.info.metrics) {
            "●"
        } else {
            " "
        };
        let cell = |text: String, style: Style| {
            Span::styled(text, if selected { th.selected() } else { style })
        };
        vec![
            cell(mark.into(), th.label()),
            cell(trunc(&t.info.id, 40), th.text()),
            cell(state, sstyle),
            cell(line(t.kind().unwrap_or("?")), th.text()),
            cell(
                line(t.info.config.preset.as_deref().unwrap_or("-")),
                th.text(),
            ),
            cell(
                line(t.info.config.mode.as_deref().unwrap_or("-")),
                th.text(),
            ),
            cell(t.step().map_or("-".into(), |s| s.to_string()), th.text()),
            cell(
                t.step_seconds().map_or("-".into(), |s| format!("{s:.1}")),
                th.text(),
            ),
            cell(t.eta_seconds().map_or("-".into(), short_time), th.text()),
            cell(headline, th.text()),
            cell(age(t.updated(), now), th.dim()),
        ]
    }
}

/// The table's column widths and headers; on a narrow terminal without the columns
/// of [`NARROW_DROPS`].
fn columns(narrow: bool) -> (Vec<Constraint>, Vec<&'static str>) {
    let keep = |col: usize| !narrow || !NARROW_DROPS.contains(&col);
    let widths: Vec<Constraint> = if narrow {
        [1, 12, 8, 4, 7, 10, 5, 6, 5, 12, 5]
    } else {
        [1, 20, 8, 4, 10, 11, 7, 6, 6, 14, 5]
    }
    .into_iter()
    .enumerate()
    .filter(|(c, _)| keep(*c))
    .map(|(c, w)| {
        if c == 1 {
            Constraint::Min(w)
        } else {
            Constraint::Length(w)
        }
    })
    .collect();
    let header: Vec<&str> = [
        "", "run", "state", "kind", "preset", "mode", "step", "s/step", "ETA", "latest", "age",
    ]
    .into_iter()
    .enumerate()
    .filter(|(c, _)| keep(*c))
    .map(|(_, h)| h)
    .collect();
    (widths, header)
}

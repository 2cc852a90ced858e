//! The recipe report as a table (`R` in the Runs tab when the runs belong to a
//! recipe folder, `rmsweb recipe run --out DIR`): task types × policies (SFT and
//! every RL variant), held-out pass@1 from `report.json`, the best of each row
//! marked `*`, overall pass@1 with its 95% Wilson interval, and the reflection
//! comparison. `j`/`k` move, `Esc`, `q` or `R` close.

use super::Cursor;
use crate::recipe::layout::recipe_of_runs;
use crate::recipe::report::json::{ReportJson, read};
use crate::recipe::report::stats::{Z95, steps_saved, wilson};
use crate::tui::theme::Theme;
use crate::tui::widgets::text::{line, trunc};
use ratatui::Frame;
use ratatui::crossterm::event::{KeyCode, KeyEvent};
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::Modifier;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Clear, Paragraph, Row, Table};
use std::path::{Path, PathBuf};

/// The open report.
#[derive(Debug, Clone)]
pub struct RecipeReportView {
    /// The recipe folder.
    pub dir: PathBuf,
    report: ReportJson,
    cursor: Cursor,
}

/// A column header: `+full-corpus` shortened to `+fc`.
fn header(name: &str) -> String {
    if name == "sft" {
        "SFT".into()
    } else {
        name.replace("+full-corpus", "+fc")
    }
}

fn cell(v: Option<f64>) -> String {
    v.map_or("–".into(), |x| format!("{x:.2}"))
}

impl RecipeReportView {
    /// Opens `DIR/report.json`.
    pub fn open(dir: &Path) -> Result<Self, String> {
        let report = read(&dir.join("report.json")).map_err(|e| {
            format!(
                "{e:#} (render it with `rmsweb recipe report --out {}`)",
                dir.display()
            )
        })?;
        Ok(RecipeReportView {
            dir: dir.to_path_buf(),
            report,
            cursor: Cursor::default(),
        })
    }

    /// The report of the recipe the Runs tab shows: the recipe folder of its runs
    /// folder, else of the selected run's folder.
    pub fn for_runs(root: Option<&Path>, selected_run: Option<&Path>) -> Result<Self, String> {
        let dir = root
            .and_then(recipe_of_runs)
            .or_else(|| selected_run.and_then(Path::parent).and_then(recipe_of_runs))
            .ok_or_else(|| {
                "these runs are not a recipe's (start the workbench with --runs DIR of `rmsweb recipe run --out DIR`)"
                    .to_string()
            })?;
        Self::open(&dir)
    }

    /// The policy columns: SFT, then the RL variants.
    fn columns(&self) -> Vec<String> {
        std::iter::once("sft".to_string())
            .chain(self.report.rl.keys().cloned())
            .collect()
    }

    /// Handles a key; false when the view closes.
    pub fn handle_key(&mut self, key: KeyEvent) -> bool {
        if matches!(
            key.code,
            KeyCode::Esc | KeyCode::Char('q') | KeyCode::Char('R')
        ) {
            return false;
        }
        let rows = self.report.tasks.len() + 1;
        self.cursor.navigate(&key, rows);
        true
    }

    /// Draws the view over `area`.
    pub fn draw(&mut self, f: &mut Frame, area: Rect, th: &Theme) {
        f.render_widget(Clear, area);
        let cols = self.columns();
        let block = Block::default()
            .borders(Borders::ALL)
            .border_style(th.border(true))
            .title(Span::styled(
                format!(
                    " Recipe report · {} · held-out pass@1 · Esc closes ",
                    trunc(
                        &line(&self.dir.file_name().map_or_else(
                            || self.dir.display().to_string(),
                            |n| n.to_string_lossy().into_owned()
                        )),
                        40
                    )
                ),
                th.label(),
            ))
            .style(th.text());
        let inner = block.inner(area);
        f.render_widget(block, area);
        let foot_h = (cols.len() as u16 + 3).min(inner.height / 2);
        let [table_a, foot_a] =
            Layout::vertical([Constraint::Min(3), Constraint::Length(foot_h)]).areas(inner);
        self.draw_table(f, table_a, &cols, th);
        f.render_widget(Paragraph::new(self.footer_lines(&cols, th)), foot_a);
    }

    /// The table: a row per task type and the overall row, a column per policy, the
    /// best of each row starred.
    fn draw_table(&self, f: &mut Frame, area: Rect, cols: &[String], th: &Theme) {
        let r = &self.report;
        let overall: Vec<Option<f64>> = cols
            .iter()
            .map(|c| {
                if c == "sft" {
                    r.sft.pass1
                } else {
                    r.rl.get(c).and_then(|p| p.pass1)
                }
            })
            .collect();
        let mut rows: Vec<(String, Vec<Option<f64>>)> = r
            .tasks
            .iter()
            .map(|t| {
                let m = r.per_task.get(t);
                let v = cols
                    .iter()
                    .map(|c| m.and_then(|m| m.get(c).copied().flatten()))
                    .collect();
                (t.clone(), v)
            })
            .collect();
        rows.push(("all".into(), overall));
        let sel = self.cursor.selected.min(rows.len() - 1);
        let body = rows.iter().enumerate().map(|(i, (task, vals))| {
            let best = vals
                .iter()
                .flatten()
                .copied()
                .fold(f64::NEG_INFINITY, f64::max);
            let mut cells = vec![Span::styled(
                line(task),
                if i + 1 == rows.len() {
                    th.label()
                } else {
                    th.text()
                },
            )];
            for v in vals {
                let (text, style) = match v {
                    None => (cell(None), th.dim()),
                    Some(x) if *x == best => (
                        format!("{}*", cell(Some(*x))),
                        th.good().add_modifier(Modifier::BOLD),
                    ),
                    Some(x) => (cell(Some(*x)), th.text()),
                };
                cells.push(Span::styled(text, style));
            }
            let row = Row::new(cells);
            if i == sel {
                row.style(th.selected())
            } else {
                row
            }
        });
        let mut widths = vec![Constraint::Length(24)];
        widths.extend(
            cols.iter()
                .map(|c| Constraint::Length(header(c).chars().count().clamp(5, 16) as u16 + 1)),
        );
        let head = Row::new(
            std::iter::once("task".to_string())
                .chain(cols.iter().map(|c| header(c)))
                .collect::<Vec<_>>(),
        )
        .style(th.dim());
        f.render_widget(Table::new(body, widths).header(head), area);
    }

    /// The footer: each policy's overall figure with its interval, and reflection.
    fn footer_lines(&self, cols: &[String], th: &Theme) -> Vec<Line<'static>> {
        let r = &self.report;
        let mut lines = Vec::new();
        let per_type = r.eval_seeds[1];
        let fc = if cols.iter().any(|c| c.ends_with("+full-corpus")) {
            " · +fc: full-corpus prompts"
        } else {
            ""
        };
        lines.push(Line::from(Span::styled(
            format!(
                "seeds {}–{} of each task type, never trained or mined on · * best of the row{fc}",
                r.eval_seeds[0],
                (r.eval_seeds[0] + per_type).saturating_sub(1)
            ),
            th.dim(),
        )));
        for c in cols {
            let p = if c == "sft" {
                Some(&r.sft)
            } else {
                r.rl.get(c)
            };
            let Some(p) = p else { continue };
            let text = match p.pass1 {
                Some(x) => {
                    let ok = (x * p.episodes as f64).round() as usize;
                    let ci = wilson(ok, p.episodes, Z95)
                        .map_or(String::new(), |(lo, hi)| format!(" [{lo:.2}, {hi:.2}]"));
                    format!("{:<24} {x:.3}{ci}  n={}", header(c), p.episodes)
                }
                None => format!("{:<24} not evaluated yet", header(c)),
            };
            lines.push(Line::from(Span::styled(text, th.text())));
        }
        let (w, wo) = (&r.reflection.with, &r.reflection.without);
        let saved = steps_saved(w.steps_solved, wo.steps_solved)
            .map_or("–".into(), |s| format!("{:.1}%", 100.0 * s));
        lines.push(Line::from(Span::styled(
            format!(
                "reflection (SFT policies): with {} ({} steps) · without {} ({} steps) · steps saved {saved}",
                cell(w.pass1),
                cell(w.steps_solved),
                cell(wo.pass1),
                cell(wo.steps_solved)
            ),
            th.text(),
        )));
        lines
    }
}

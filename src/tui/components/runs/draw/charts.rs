//! The metric panels: as many as fit at a readable size, paged, with the step
//! cursor's values.

use super::common::*;
use crate::runs::monitor::Track;
use crate::runs::tail::TailState;
use crate::train::metric_keys as keys;
use crate::tui::components::runs::view::{MAX_PANELS, RunsView};
use crate::tui::theme::Theme;
use crate::tui::widgets::chart::{self, PANELS, PREFIX_PANELS, PlotLine, fmt_num};
use crate::tui::widgets::text::{line, trunc};
use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::symbols::Marker;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Paragraph};

/// Rows a chart panel needs to be read: borders, four plot rows (the y labels'
/// top and bottom apart) and the x labels.
pub(super) const MIN_PANEL_HEIGHT: u16 = 7;
/// Columns a chart panel needs: the y labels and a plot of ~16 cells.
pub(super) const MIN_PANEL_WIDTH: u16 = 24;

impl RunsView {
    /// The panels with data for the plotted runs: the fixed ones, then those whose
    /// keys are found by prefix (validation scores).
    fn panels(&self, plotted: &[&Track], th: &Theme) -> Vec<PanelView> {
        panel_defs(plotted)
            .into_iter()
            .filter_map(|def| panel(&def, plotted, self.view(), th))
            .collect()
    }

    pub(crate) fn draw_charts(
        &mut self,
        f: &mut Frame,
        area: Rect,
        plotted: &[&Track],
        th: &Theme,
    ) {
        let view = self.view();
        let colors = palette(th);
        let overlay = plotted.len() > 1;
        let all = self.panels(plotted, th);
        // As many panels as fit at a readable size (two rows of four on a large
        // terminal, one row of three at 80×24); `[` `]` page through the rest.
        let plot_h = area.height.saturating_sub(u16::from(overlay));
        let grid_rows = usize::from(plot_h / MIN_PANEL_HEIGHT).clamp(1, 2);
        let grid_cols = usize::from(area.width / MIN_PANEL_WIDTH).clamp(1, 4);
        let per_page = (grid_rows * grid_cols).min(MAX_PANELS);
        let pages = all.len().div_ceil(per_page).max(1);
        self.panel_page = self.panel_page.min(pages - 1);
        self.panel_pages = pages;
        let panels: Vec<&PanelView> = all
            .iter()
            .skip(self.panel_page * per_page)
            .take(per_page)
            .collect();
        if panels.is_empty() {
            let what = no_panels_text(plotted.first().copied());
            f.render_widget(
                Paragraph::new(Span::styled(what, th.dim())).block(
                    Block::default()
                        .borders(Borders::ALL)
                        .border_style(th.border(false)),
                ),
                area,
            );
            return;
        }
        let (legend_a, area) = if overlay {
            let [a, b] = Layout::vertical([Constraint::Length(1), Constraint::Min(3)]).areas(area);
            (Some(a), b)
        } else {
            (None, area)
        };
        if let Some(a) = legend_a {
            let mut spans = vec![Span::styled(" overlay: ", th.dim())];
            for (ri, t) in plotted.iter().enumerate() {
                spans.push(Span::styled(
                    format!("■ {}  ", trunc(&t.info.id, 30)),
                    ratatui::style::Style::default().fg(colors[ri % colors.len()]),
                ));
            }
            f.render_widget(Paragraph::new(Line::from(spans)), a);
        }
        let rows = panels.len().div_ceil(grid_cols).min(grid_rows);
        let cols = panels.len().div_ceil(rows);
        let row_areas = Layout::vertical(vec![Constraint::Ratio(1, rows as u32); rows]).split(area);
        for (r, row_area) in row_areas.iter().enumerate() {
            let cells =
                Layout::horizontal(vec![Constraint::Ratio(1, cols as u32); cols]).split(*row_area);
            for (c, cell) in cells.iter().enumerate() {
                if let Some(p) = panels.get(r * cols + c) {
                    chart::draw_panel(
                        f,
                        *cell,
                        p.title.clone(),
                        p.bottom.as_deref(),
                        &p.lines,
                        view,
                        th,
                    );
                }
            }
        }
    }
}

/// The step cursor as a vertical line over a panel's lines (at the step, or at its
/// wall time on a wall-time axis: the first plotted run's time of that step).
pub(super) fn cursor_line(
    view: chart::View,
    plotted: &[&Track],
    keys: &[String],
    lines: &[PlotLine],
    th: &Theme,
) -> Option<PlotLine> {
    let c = view.cursor?;
    let x = if view.wall {
        let t = plotted.first()?;
        keys.iter()
            .find_map(|k| t.series.get(k).and_then(|s| s.at(c)))?
            .wall
    } else {
        c
    };
    let ys = lines.iter().flat_map(|l| l.points.iter().map(|p| p.1));
    let (lo, hi) = ys.fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), y| {
        (a.min(y), b.max(y))
    });
    (lo <= hi).then(|| PlotLine {
        color: th.label().fg.unwrap_or(ratatui::style::Color::Yellow),
        marker: Marker::Braille,
        points: vec![(x, lo), (x, hi)],
    })
}

/// One chart panel ready to draw.
pub(super) struct PanelView {
    title: Line<'static>,
    bottom: Option<String>,
    lines: Vec<PlotLine>,
}

/// A panel to draw: its title, its metric keys and their labels.
struct PanelDef {
    title: String,
    keys: Vec<String>,
    labels: Vec<String>,
}

/// The fixed panels, then one per prefix panel with keys in the plotted runs.
fn panel_defs(plotted: &[&Track]) -> Vec<PanelDef> {
    let mut defs: Vec<PanelDef> = PANELS
        .iter()
        .map(|p| PanelDef {
            title: p.title.to_string(),
            keys: p.keys.iter().map(|k| k.to_string()).collect(),
            labels: (0..p.keys.len())
                .map(|i| {
                    p.labels
                        .get(i)
                        .copied()
                        .unwrap_or_else(|| short_key(p.keys[i]))
                        .to_string()
                })
                .collect(),
        })
        .collect();
    for (title, prefix, most) in PREFIX_PANELS {
        let mut keys: Vec<String> = plotted
            .iter()
            .flat_map(|t| t.series.keys().map(|(k, _)| k.clone()))
            .filter(|k| k.starts_with(prefix))
            .collect();
        keys.sort();
        keys.dedup();
        keys.truncate(most);
        if !keys.is_empty() {
            let labels = keys
                .iter()
                .map(|k| trunc(k.trim_start_matches(prefix), 28))
                .collect();
            defs.push(PanelDef {
                title: title.to_string(),
                keys,
                labels,
            });
        }
    }
    defs
}

/// What a panel plots: its lines, the keys (by index) that have points, and the
/// gaps in their series.
struct Plotted {
    lines: Vec<PlotLine>,
    present: Vec<usize>,
    gaps: u64,
}

/// The plot lines of `keys` over the plotted runs. One run: a colour per key, the
/// raw curve dimmed under a smoothed one. Overlay: a colour per run, a marker per key.
fn plot_lines(plotted: &[&Track], keys: &[String], view: chart::View, th: &Theme) -> Plotted {
    let colors = palette(th);
    let overlay = plotted.len() > 1;
    let mut out = Plotted {
        lines: Vec::new(),
        present: Vec::new(),
        gaps: 0,
    };
    for (ri, t) in plotted.iter().enumerate() {
        for (ki, k) in keys.iter().enumerate() {
            let Some(s) = t.series.get(k) else { continue };
            out.gaps += s.gaps();
            let segments = chart::plot_segments(s, view);
            if segments.is_empty() {
                continue;
            }
            if !out.present.contains(&ki) {
                out.present.push(ki);
            }
            let (ci, marker) = if overlay {
                (ri, KEY_MARKERS[ki % KEY_MARKERS.len()].0)
            } else {
                (ki, Marker::Braille)
            };
            // Smoothing keeps the raw curve visible under it, dimmed.
            if view.ema > 0.0 && !overlay {
                let raw = chart::View { ema: 0.0, ..view };
                for points in chart::plot_segments(s, raw) {
                    out.lines.push(PlotLine {
                        color: th.dim().fg.unwrap_or(ratatui::style::Color::DarkGray),
                        marker: Marker::Braille,
                        points,
                    });
                }
            }
            for points in segments {
                out.lines.push(PlotLine {
                    color: colors[ci % colors.len()],
                    marker,
                    points,
                });
            }
        }
    }
    out
}

/// One panel, or `None` when none of its keys has points: its plot lines (with the
/// step cursor's line), its title with the keys' legend, and its bottom text (the gate
/// counts, or the values at the cursor or the latest, and the missing points).
fn panel(def: &PanelDef, plotted: &[&Track], view: chart::View, th: &Theme) -> Option<PanelView> {
    let PanelDef {
        title,
        keys,
        labels,
    } = def;
    let overlay = plotted.len() > 1;
    let Plotted {
        mut lines,
        present,
        gaps,
    } = plot_lines(plotted, keys, view, th);
    if lines.is_empty() {
        return None;
    }
    let mut bottom = values_text(title, keys, &present, plotted, view);
    if let Some(line) = cursor_line(view, plotted, keys, &lines, th) {
        lines.push(line);
    }
    if gaps > 0 {
        let text = format!("{gaps} missing ");
        bottom = Some(match bottom {
            Some(b) => format!("{b}· {text}"),
            None => format!(" {text}"),
        });
    }
    let mut spans = vec![Span::styled(format!(" {} ", line(title)), th.label())];
    if keys.len() > 1 || overlay {
        let colors = palette(th);
        for ki in present {
            let label = &labels[ki];
            let span = if overlay {
                Span::styled(
                    format!("{}{} ", KEY_MARKERS[ki % KEY_MARKERS.len()].1, line(label)),
                    th.text(),
                )
            } else {
                Span::styled(
                    format!("━{} ", line(label)),
                    ratatui::style::Style::default().fg(colors[ki % colors.len()]),
                )
            };
            spans.push(span);
        }
    }
    Some(PanelView {
        title: Line::from(spans),
        bottom,
        lines,
    })
}

/// What the charts say when there is no panel to draw: nothing selected, the run's
/// files gone, verl not started yet, or no metrics yet.
fn no_panels_text(t: Option<&Track>) -> String {
    match t {
        None => "select a run".to_string(),
        Some(t) => match (t.vanished, t.tail) {
            (true, _) | (_, TailState::Vanished) => "the run's files are gone".into(),
            (_, TailState::Missing) => format!(
                "waiting for verl to start: {} does not exist yet (verl creates \
                 <project>/ when its file logger starts)",
                line(&t.info.dir.display().to_string())
            ),
            _ if t.kind() == Some("verl") => "waiting for verl to start (no metrics yet)".into(),
            _ => "no metrics yet (waiting for metrics.jsonl)".into(),
        },
    }
}

/// A panel's bottom text before the gaps: on the gates panel each run's accepted and
/// salvaged groups at the latest step; on one run's panel its values at the step
/// cursor, else the latest, in the keys' order.
fn values_text(
    title: &str,
    keys: &[String],
    present: &[usize],
    plotted: &[&Track],
    view: chart::View,
) -> Option<String> {
    let overlay = plotted.len() > 1;
    let mut bottom = None;
    if title == "gates" {
        // The counts of the latest step, per plotted run.
        let counts: Vec<String> = plotted
            .iter()
            .filter_map(|t| {
                let acc = t.series.latest(keys::SALVAGE_ACCEPTED_GROUPS);
                let sal = t.series.latest(keys::SALVAGE_SALVAGE_GROUPS);
                (acc.is_some() || sal.is_some()).then(|| {
                    let n = |v: Option<f64>| v.map_or("-".into(), |v| format!("{v:.0}"));
                    format!("acc {} salv {}", n(acc), n(sal))
                })
            })
            .collect();
        if !counts.is_empty() {
            bottom = Some(format!(" {} ", counts.join(" │ ")));
        }
    } else if !overlay && let Some(t) = plotted.first() {
        // The raw values at the step cursor, else the latest, in the keys' order.
        let values: Vec<String> = present
            .iter()
            .filter_map(|&ki| match view.cursor {
                Some(c) => t
                    .series
                    .get(&keys[ki])
                    .and_then(|s| s.at(c))
                    .map(|p| p.value),
                None => t.series.latest(&keys[ki]),
            })
            .map(fmt_num)
            .collect();
        bottom = Some(match view.cursor {
            Some(c) => format!(" @{c} {} ", values.join(" · ")),
            None => format!(" now {} ", values.join(" · ")),
        });
    }
    bottom
}

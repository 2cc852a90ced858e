//! Drawing the Runs tab: the run list, the metric panels, the info box and the log
//! tail (everything shown is sanitized text read by the watcher).

use super::view::{MAX_PANELS, RunsView};
use crate::runs::info::DisplayState;
use crate::runs::launch::ChildState;
use crate::runs::monitor::{RunsState, Track};
use crate::runs::tail::TailState;
use crate::train::metric_keys as keys;
use crate::tui::components::pane;
use crate::tui::theme::Theme;
use crate::tui::widgets::chart::{self, PANELS, PREFIX_PANELS, PlotLine, View, fmt_num};
use crate::tui::widgets::text::{line, trunc};
use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::Color;
use ratatui::style::Style;
use ratatui::symbols::Marker;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Paragraph, Row, Table};

/// Rows a chart panel needs to be read: borders, four plot rows (the y labels'
/// top and bottom apart) and the x labels.
const MIN_PANEL_HEIGHT: u16 = 7;
/// Columns a chart panel needs: the y labels and a plot of ~16 cells.
const MIN_PANEL_WIDTH: u16 = 24;

fn age(
    updated: Option<chrono::DateTime<chrono::Utc>>,
    now: chrono::DateTime<chrono::Utc>,
) -> String {
    let Some(t) = updated else {
        return "-".into();
    };
    let s = (now - t).num_seconds().max(0);
    match s {
        0..120 => format!("{s}s"),
        120..7200 => format!("{}m", s / 60),
        7200..172_800 => format!("{}h", s / 3600),
        _ => format!("{}d", s / 86_400),
    }
}

/// The state word and its style. A run launched from here that has not written
/// its status yet is "starting" while its process lives and "exit N" once it
/// ended without one (a bad argument, say: its log tail tells why).
fn state_style(
    t: &Track,
    child: Option<ChildState>,
    th: &Theme,
) -> (String, ratatui::style::Style) {
    if t.vanished {
        return ("gone".into(), th.bad());
    }
    let s = t.state();
    match (s, child) {
        (DisplayState::Unknown, Some(ChildState::Running)) => {
            return ("starting".into(), th.good());
        }
        (DisplayState::Unknown, None)
            if matches!(t.tail, TailState::Missing | TailState::Waiting) =>
        {
            // A watched file whose trainer (verl) has not created it yet.
            return ("waiting".into(), th.dim());
        }
        (DisplayState::Unknown, Some(ChildState::Exited(c))) => {
            return (format!("exit {c}"), th.bad());
        }
        _ => {}
    }
    let style = match s {
        DisplayState::Running | DisplayState::Queued => th.good(),
        DisplayState::Finished => th.text(),
        DisplayState::Stopped | DisplayState::Unknown => th.dim(),
        DisplayState::Failed | DisplayState::Lost => th.bad(),
    };
    (s.label().into(), style)
}

/// Markers telling keys apart in an overlay (colours tell the runs apart), with
/// the symbol shown in the panel title.
const KEY_MARKERS: [(Marker, &str); 3] = [
    (Marker::Braille, "⣿"),
    (Marker::Dot, "•"),
    (Marker::Bar, "▄"),
];

/// Colours for chart lines, after the theme's own.
fn palette(th: &Theme) -> Vec<Color> {
    vec![
        th.accent,
        th.warn,
        th.ok,
        th.bad,
        Color::Magenta,
        Color::Cyan,
        Color::LightBlue,
        Color::LightYellow,
    ]
}

fn short_key(k: &str) -> &str {
    k.rsplit('/').next().unwrap_or(k)
}

/// The runs table's columns left out on a narrow terminal: kind, age.
const NARROW_DROPS: [usize; 2] = [3, 10];

impl RunsView {
    pub(super) fn draw_list(
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
            let text = match &self.opts.root {
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
            };
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
            // The selected row is drawn in the selection style through and through:
            // a cell's own colour (a yellow "running") would be unreadable on it.
            let selected = idx == self.cursor.selected;
            let cell = |text: String, style: Style| {
                Span::styled(text, if selected { th.selected() } else { style })
            };
            let cells = vec![
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
            ];
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
        let table = Table::new(rows, widths)
            .header(Row::new(header).style(th.dim()))
            .block(block);
        f.render_widget(table, area);
    }

    /// The panels with data for the plotted runs: the fixed ones, then those whose
    /// keys are found by prefix (validation scores).
    fn panels(&self, plotted: &[&Track], th: &Theme) -> Vec<PanelView> {
        let mut defs: Vec<(String, Vec<String>, Vec<String>)> = PANELS
            .iter()
            .map(|p| {
                let labels = (0..p.keys.len())
                    .map(|i| {
                        p.labels
                            .get(i)
                            .copied()
                            .unwrap_or_else(|| short_key(p.keys[i]))
                            .to_string()
                    })
                    .collect();
                (
                    p.title.to_string(),
                    p.keys.iter().map(|k| k.to_string()).collect(),
                    labels,
                )
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
                defs.push((title.to_string(), keys, labels));
            }
        }
        let view = self.view();
        let colors = palette(th);
        let overlay = plotted.len() > 1;
        let mut panels = Vec::new();
        for (title, keys, labels) in defs {
            let mut lines = Vec::new();
            let mut present = Vec::new();
            let mut gaps = 0u64;
            for (ri, t) in plotted.iter().enumerate() {
                for (ki, k) in keys.iter().enumerate() {
                    let Some(s) = t.series.get(k) else { continue };
                    gaps += s.gaps();
                    let segments = chart::plot_segments(s, view);
                    if segments.is_empty() {
                        continue;
                    }
                    if !present.contains(&ki) {
                        present.push(ki);
                    }
                    // One run: a colour per key. Overlay: a colour per run, a
                    // marker per key.
                    let (ci, marker) = if overlay {
                        (ri, KEY_MARKERS[ki % KEY_MARKERS.len()].0)
                    } else {
                        (ki, Marker::Braille)
                    };
                    // Smoothing keeps the raw curve visible under it, dimmed.
                    if view.ema > 0.0 && !overlay {
                        let raw = chart::View { ema: 0.0, ..view };
                        for points in chart::plot_segments(s, raw) {
                            lines.push(PlotLine {
                                color: th.dim().fg.unwrap_or(ratatui::style::Color::DarkGray),
                                marker: Marker::Braille,
                                points,
                            });
                        }
                    }
                    for points in segments {
                        lines.push(PlotLine {
                            color: colors[ci % colors.len()],
                            marker,
                            points,
                        });
                    }
                }
            }
            if lines.is_empty() {
                continue;
            }
            let mut spans = vec![Span::styled(format!(" {} ", line(&title)), th.label())];
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
            if let Some(line) = cursor_line(view, plotted, &keys, &lines, th) {
                lines.push(line);
            }
            if gaps > 0 {
                let text = format!("{gaps} missing ");
                bottom = Some(match bottom {
                    Some(b) => format!("{b}· {text}"),
                    None => format!(" {text}"),
                });
            }
            if keys.len() > 1 || overlay {
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
            panels.push(PanelView {
                title: Line::from(spans),
                bottom,
                lines,
            });
        }
        panels
    }

    pub(super) fn draw_charts(
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
            let what = match plotted.first() {
                None => "select a run".to_string(),
                Some(t) => match (t.vanished, t.tail) {
                    (true, _) | (_, TailState::Vanished) => "the run's files are gone".into(),
                    (_, TailState::Missing) => format!(
                        "waiting for verl to start: {} does not exist yet (verl creates \
                         <project>/ when its file logger starts)",
                        line(&t.info.dir.display().to_string())
                    ),
                    _ if t.kind() == Some("verl") => {
                        "waiting for verl to start (no metrics yet)".into()
                    }
                    _ => "no metrics yet (waiting for metrics.jsonl)".into(),
                },
            };
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
fn cursor_line(
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
struct PanelView {
    title: Line<'static>,
    bottom: Option<String>,
    lines: Vec<PlotLine>,
}

pub(super) fn draw_info(
    f: &mut Frame,
    area: Rect,
    t: Option<&Track>,
    view: View,
    (page, pages): (usize, usize),
    th: &Theme,
) {
    let block = pane("Run", false, th);
    let Some(t) = t else {
        f.render_widget(block, area);
        return;
    };
    let w = area.width.saturating_sub(12) as usize;
    let kv = |k: &str, v: String| {
        Line::from(vec![
            Span::styled(format!("{k:>8}: "), th.dim()),
            Span::styled(trunc(&v, w), th.text()),
        ])
    };
    // While the run goes: its pace and the time left, on one line.
    let pace = match (t.step_seconds(), t.eta_seconds(), t.info.status.total_steps) {
        (Some(s), Some(e), Some(_)) => Some(format!(
            "{s:.1} s/step · {} left",
            crate::util::duration::human_time(e)
        )),
        (Some(s), None, _) if t.state() == DisplayState::Running => {
            Some(format!("{s:.1} s/step · {:.3} steps/s", 1.0 / s.max(1e-9)))
        }
        _ => None,
    };
    let mut lines = vec![
        kv("folder", t.info.dir.display().to_string()),
        kv("message", t.info.status.message.clone().unwrap_or_default()),
        kv(
            "view",
            format!(
                "x {} · EMA {} · {}{}",
                if view.wall { "wall time" } else { "step" },
                view.ema,
                if view.log { "log" } else { "linear" },
                if pages > 1 {
                    format!(" · panels {}/{pages} ([ ])", page + 1)
                } else {
                    String::new()
                }
            ),
        ),
    ];
    if let Some(p) = pace {
        lines.insert(2, kv("pace", p));
    }
    if let Some(c) = view.cursor {
        lines.insert(
            2,
            kv("cursor", format!("step {c} (, . < > move · ; hides)")),
        );
    }
    let tail = match t.tail {
        TailState::Live => format!("{} records", t.series.records()),
        TailState::Waiting => "waiting for the file".into(),
        TailState::Vanished => "file vanished".into(),
        TailState::Missing => "folder missing".into(),
    };
    lines.push(kv(
        "metrics",
        if t.resets > 0 {
            format!("{tail} · rewritten {}×", t.resets)
        } else {
            tail
        },
    ));
    let gaps = t.series.gaps();
    let skipped = t.series.skipped();
    // One line each, so neither hides the other in a narrow pane.
    let mut notes = Vec::new();
    if gaps > 0 {
        notes.push(format!("{gaps} missing values (null/NaN, drawn as gaps)"));
    }
    if !skipped.is_empty() {
        notes.push(format!(
            "{} non-numeric keys not plotted: {}",
            skipped.len(),
            skipped.join(", ")
        ));
    }
    for n in notes {
        lines.push(Line::from(Span::styled(trunc(&line(&n), w + 10), th.dim())));
    }
    if t.sharpening.fed > 0 {
        lines.push(kv(
            "detector",
            format!(
                "self-sharpening: {} over {} steps",
                if t.sharpening.flagged {
                    "FLAGGED"
                } else {
                    "quiet"
                },
                t.sharpening.fed
            ),
        ));
    }
    if let Some(m) = &t.last_malformed {
        lines.push(Line::from(Span::styled(
            trunc(&format!("⚠ {} bad lines, last {m}", t.malformed), w + 10),
            th.warn(),
        )));
    }
    for p in &t.info.problems {
        lines.push(Line::from(Span::styled(
            trunc(&format!("⚠ {p}"), w + 10),
            th.warn(),
        )));
    }
    f.render_widget(Paragraph::new(lines).block(block), area);
}

pub(super) fn draw_log(f: &mut Frame, area: Rect, t: Option<&Track>, th: &Theme) {
    let block = pane("stdout.log", false, th);
    let h = area.height.saturating_sub(2) as usize;
    let w = area.width.saturating_sub(2) as usize;
    let lines: Vec<Line> = t
        .map(|t| {
            let n = t.log.len();
            t.log[n.saturating_sub(h)..]
                .iter()
                .map(|l| Line::from(Span::styled(trunc(l, w), th.text())))
                .collect()
        })
        .unwrap_or_default();
    f.render_widget(Paragraph::new(lines).block(block), area);
}

/// A duration in at most six characters: `45s`, `12m`, `3h05m`, `2d`.
fn short_time(s: f64) -> String {
    let s = s.max(0.0).round() as u64;
    match s {
        0..=99 => format!("{s}s"),
        100..=5999 => format!("{}m", s.div_ceil(60)),
        6000..=359_999 => format!("{}h{:02}m", s / 3600, (s % 3600) / 60),
        _ => format!("{}d", s / 86_400),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn short_times_fit_the_eta_column() {
        let cases = [
            (0.0, "0s"),
            (45.4, "45s"),
            (2376.0, "40m"),
            (7500.0, "2h05m"),
            (359_000.0, "99h43m"),
            (400_000.0, "4d"),
        ];
        for (s, want) in cases {
            let got = super::short_time(s);
            assert_eq!(got, want);
            assert!(got.len() <= 6, "{got}");
        }
    }
}

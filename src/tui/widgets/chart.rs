//! Metric charts for the Runs tab: which keys each panel shows, the display
//! transforms (x by step or wall time, EMA, log scale) and drawing with ratatui's
//! `Chart`.

use crate::runs::series::{Series, ema, log_scale};
use crate::tui::theme::Theme;
use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::{Color, Style};
use ratatui::symbols::Marker;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Axis, Block, Borders, Chart, Dataset, GraphType, Paragraph};

/// A chart panel: its title, the metric keys it plots and their short labels.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Panel {
    pub title: &'static str,
    pub keys: &'static [&'static str],
    pub labels: &'static [&'static str],
}

/// Every panel, in the order shown; only panels with data are drawn.
pub const PANELS: [Panel; 13] = [
    Panel {
        title: "gates",
        keys: &[
            "salvage/std_gate_reject_share",
            "salvage/competence_gate_reject_share",
        ],
        labels: &["std", "comp"],
    },
    Panel {
        title: "KL",
        keys: &["actor/ppo_kl", "actor/kl_loss"],
        labels: &["ppo_kl", "kl_loss"],
    },
    Panel {
        title: "clipfrac",
        keys: &["actor/pg_clipfrac", "actor/pg_clipfrac_lower"],
        labels: &["upper", "lower"],
    },
    Panel {
        title: "logp",
        keys: &[
            "salvage/logprob_correct",
            "salvage/logprob_wrong",
            "salvage/logprob_gap",
        ],
        labels: &["correct", "wrong", "gap"],
    },
    Panel {
        title: "reward",
        keys: &[
            "salvage/best_of_n_reward",
            "critic/score/mean",
            "salvage/within_group_std",
        ],
        labels: &["bestN", "mean", "σ"],
    },
    Panel {
        title: "rollout log-ppl",
        keys: &["rollout_corr/rollout_log_ppl"],
        labels: &["log-ppl"],
    },
    Panel {
        title: "SFT loss",
        keys: &["sft/loss"],
        labels: &["loss"],
    },
    Panel {
        title: "grad norm",
        keys: &["actor/grad_norm"],
        labels: &["norm"],
    },
    Panel {
        title: "learning rate",
        keys: &["actor/lr"],
        labels: &["lr"],
    },
    Panel {
        title: "pg loss",
        keys: &["actor/pg_loss"],
        labels: &["pg"],
    },
    Panel {
        title: "response length",
        keys: &[
            "response_length/mean",
            "response_length/max",
            "response_length/min",
        ],
        labels: &["mean", "max", "min"],
    },
    Panel {
        title: "timing (s)",
        keys: &[
            "timing_s/step",
            "timing_s/gen",
            "timing_s/old_log_prob",
            "timing_s/ref",
            "timing_s/update_actor",
            "perf/step_s",
        ],
        labels: &["step", "gen", "old_lp", "ref", "update", "step_s"],
    },
    Panel {
        title: "groups",
        keys: &[
            "salvage/accepted_groups",
            "salvage/salvage_groups",
            "training/filter_groups/evicted_samples",
            "training/filter_groups/discarded_surplus_samples",
            "train/num_gen_batches",
        ],
        labels: &["accepted", "salvage", "evicted", "surplus", "gen batches"],
    },
];

/// Panels whose keys are found by prefix (their names carry the data source):
/// title, prefix and the most keys drawn. verl logs validation scores as
/// `val-core/<data_source>/<reward key>/mean@N`.
pub const PREFIX_PANELS: [(&str, &str, usize); 1] = [("validation", "val-core/", 4)];

/// How series are shown.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct View {
    /// EMA weight (0 = raw).
    pub ema: f64,
    pub log: bool,
    /// x is wall-clock seconds instead of the step.
    pub wall: bool,
}

/// One line of a chart.
#[derive(Debug, Clone)]
pub struct PlotLine {
    pub color: Color,
    pub marker: Marker,
    pub points: Vec<(f64, f64)>,
}

/// A series as chart points after the view's transforms (EMA before the log; values
/// without a logarithm are left out on a log scale).
pub fn plot_points(s: &Series, view: View) -> Vec<(f64, f64)> {
    let pts = s.points();
    let ys = ema(&pts.iter().map(|p| p.value).collect::<Vec<_>>(), view.ema);
    pts.iter()
        .zip(ys)
        .filter_map(|(p, y)| {
            let x = if view.wall { p.wall } else { p.step };
            let y = if view.log { log_scale(y)? } else { y };
            Some((x, y))
        })
        .collect()
}

/// [`plot_points`] split where values were missing (null, NaN): one run of points
/// per unbroken stretch, so the chart shows a gap instead of bridging it.
pub fn plot_segments(s: &Series, view: View) -> Vec<Vec<(f64, f64)>> {
    let segments = s.segments();
    if segments.len() <= 1 {
        let pts = plot_points(s, view);
        return if pts.is_empty() {
            Vec::new()
        } else {
            vec![pts]
        };
    }
    // EMA runs over the whole series (as unbroken), then the line is cut.
    let all = plot_points(s, view);
    if view.log {
        // Points without a logarithm were left out: cut by step instead of index.
        let mut out = Vec::new();
        for seg in &segments {
            let (lo, hi) = (seg[0], seg[seg.len() - 1]);
            let pick = |p: &crate::runs::series::Point| if view.wall { p.wall } else { p.step };
            let (a, b) = (pick(&lo), pick(&hi));
            let part: Vec<(f64, f64)> = all
                .iter()
                .copied()
                .filter(|(x, _)| *x >= a && *x <= b)
                .collect();
            if !part.is_empty() {
                out.push(part);
            }
        }
        return out;
    }
    let mut out = Vec::new();
    let mut i = 0;
    for seg in &segments {
        let part: Vec<(f64, f64)> = all.iter().skip(i).take(seg.len()).copied().collect();
        i += seg.len();
        if !part.is_empty() {
            out.push(part);
        }
    }
    out
}

/// A short number for an axis or a list: 3 significant digits, exponent form for
/// very large or small magnitudes.
pub fn fmt_num(v: f64) -> String {
    let a = v.abs();
    if !v.is_finite() {
        return "-".into();
    }
    if a == 0.0 {
        "0".into()
    } else if !(1e-3..1e5).contains(&a) {
        format!("{v:.1e}")
    } else if a >= 100.0 {
        format!("{v:.0}")
    } else if a >= 10.0 {
        format!("{v:.1}")
    } else if a >= 1.0 {
        format!("{v:.2}")
    } else {
        format!("{v:.3}")
    }
}

/// Seconds as `42s`, `12m`, `3.5h`.
pub fn fmt_secs(s: f64) -> String {
    if s < 120.0 {
        format!("{s:.0}s")
    } else if s < 7200.0 {
        format!("{:.0}m", s / 60.0)
    } else {
        format!("{:.1}h", s / 3600.0)
    }
}

fn bounds(vals: impl Iterator<Item = f64>) -> Option<[f64; 2]> {
    let (mut lo, mut hi) = (f64::INFINITY, f64::NEG_INFINITY);
    for v in vals {
        lo = lo.min(v);
        hi = hi.max(v);
    }
    if !lo.is_finite() {
        return None;
    }
    if hi - lo < 1e-12 {
        let pad = (lo.abs() * 0.1).max(1e-6);
        return Some([lo - pad, hi + pad]);
    }
    Some([lo, hi])
}

/// Draws one panel, with `bottom` (e.g. latest counts) on its lower border. The title line doubles as the legend (the caller colours its
/// spans like the lines), so no legend box hides the data.
pub fn draw_panel(
    f: &mut Frame,
    area: Rect,
    title: Line<'static>,
    bottom: Option<&str>,
    lines: &[PlotLine],
    view: View,
    th: &Theme,
) {
    let mut block = Block::default()
        .borders(Borders::ALL)
        .border_style(th.border(false))
        .title(title);
    if let Some(b) = bottom {
        block =
            block.title_bottom(Line::from(Span::styled(b.to_string(), th.dim())).right_aligned());
    }
    let xs = bounds(lines.iter().flat_map(|l| l.points.iter().map(|p| p.0)));
    let ys = bounds(lines.iter().flat_map(|l| l.points.iter().map(|p| p.1)));
    let (Some(xb), Some(yb)) = (xs, ys) else {
        f.render_widget(
            Paragraph::new(Line::from(Span::styled("no data", th.dim()))).block(block),
            area,
        );
        return;
    };
    let pad = (yb[1] - yb[0]) * 0.05;
    let yb = [yb[0] - pad, yb[1] + pad];
    let xl = |v: f64| {
        if view.wall {
            fmt_secs(v)
        } else {
            format!("{v:.0}")
        }
    };
    let yl = |v: f64| {
        if view.log {
            fmt_num(10f64.powf(v))
        } else {
            fmt_num(v)
        }
    };
    let datasets: Vec<Dataset> = lines
        .iter()
        .map(|l| {
            Dataset::default()
                .marker(l.marker)
                .graph_type(GraphType::Line)
                .style(Style::default().fg(l.color))
                .data(&l.points)
        })
        .collect();
    let chart = Chart::new(datasets)
        .block(block)
        .style(th.text())
        .legend_position(None)
        .x_axis(
            Axis::default()
                .style(th.dim())
                .bounds(xb)
                .labels([xl(xb[0]), xl(xb[1])]),
        )
        .y_axis(
            Axis::default()
                .style(th.dim())
                .bounds(yb)
                .labels([yl(yb[0]), yl(yb[1])]),
        );
    f.render_widget(chart, area);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runs::series::Point;

    #[test]
    fn transforms_apply_in_order() {
        let mut s = Series::with_cap(100);
        for (i, v) in [10.0, 100.0, -1.0].into_iter().enumerate() {
            s.push(Point {
                step: i as f64 + 1.0,
                wall: i as f64 * 60.0,
                value: v,
            });
        }
        let raw = plot_points(&s, View::default());
        assert_eq!(raw, vec![(1.0, 10.0), (2.0, 100.0), (3.0, -1.0)]);
        let log = plot_points(
            &s,
            View {
                log: true,
                wall: true,
                ema: 0.0,
            },
        );
        assert_eq!(log, vec![(0.0, 1.0), (60.0, 2.0)], "−1 has no log");
        assert_eq!(fmt_num(0.00012), "1.2e-4");
        assert_eq!(fmt_num(0.5), "0.500");
        assert_eq!(fmt_secs(600.0), "10m");
    }
}

//! Metric charts for the Runs tab: which keys each panel shows, the display
//! transforms (x by step or wall time, EMA, log scale) and drawing with ratatui's
//! `Chart`.

use crate::runs::series::{Series, ema, log_scale};
use crate::train::metric_keys as keys;
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
            keys::SALVAGE_STD_GATE_REJECT_SHARE,
            keys::SALVAGE_COMPETENCE_GATE_REJECT_SHARE,
        ],
        labels: &["std", "comp"],
    },
    Panel {
        title: "KL",
        keys: &[keys::ACTOR_PPO_KL, keys::ACTOR_KL_LOSS],
        labels: &["ppo_kl", "kl_loss"],
    },
    Panel {
        title: "clipfrac",
        keys: &[keys::ACTOR_PG_CLIPFRAC, keys::ACTOR_PG_CLIPFRAC_LOWER],
        labels: &["upper", "lower"],
    },
    Panel {
        title: "logp",
        keys: &[
            keys::SALVAGE_LOGPROB_CORRECT,
            keys::SALVAGE_LOGPROB_WRONG,
            keys::SALVAGE_LOGPROB_GAP,
        ],
        labels: &["correct", "wrong", "gap"],
    },
    Panel {
        title: "reward",
        keys: &[
            keys::SALVAGE_BEST_OF_N_REWARD,
            keys::CRITIC_SCORE_MEAN,
            keys::SALVAGE_WITHIN_GROUP_STD,
        ],
        labels: &["bestN", "mean", "σ"],
    },
    Panel {
        title: "rollout log-ppl",
        keys: &[keys::ROLLOUT_CORR_ROLLOUT_LOG_PPL],
        labels: &["log-ppl"],
    },
    Panel {
        title: "SFT loss",
        keys: &[keys::SFT_LOSS],
        labels: &["loss"],
    },
    Panel {
        title: "grad norm",
        keys: &[keys::ACTOR_GRAD_NORM],
        labels: &["norm"],
    },
    Panel {
        title: "learning rate",
        keys: &[keys::ACTOR_LR],
        labels: &["lr"],
    },
    Panel {
        title: "pg loss",
        keys: &[keys::ACTOR_PG_LOSS],
        labels: &["pg"],
    },
    Panel {
        title: "response length",
        keys: &[
            keys::RESPONSE_LENGTH_MEAN,
            keys::RESPONSE_LENGTH_MAX,
            keys::RESPONSE_LENGTH_MIN,
        ],
        labels: &["mean", "max", "min"],
    },
    Panel {
        title: "timing (s)",
        keys: &[
            keys::TIMING_S_STEP,
            keys::TIMING_S_GEN,
            keys::TIMING_S_OLD_LOG_PROB,
            keys::TIMING_S_REF,
            keys::TIMING_S_UPDATE_ACTOR,
            keys::PERF_STEP_S,
        ],
        labels: &["step", "gen", "old_lp", "ref", "update", "step_s"],
    },
    Panel {
        title: "groups",
        keys: &[
            keys::SALVAGE_ACCEPTED_GROUPS,
            keys::SALVAGE_SALVAGE_GROUPS,
            "training/filter_groups/evicted_samples",
            "training/filter_groups/discarded_surplus_samples",
            keys::TRAIN_NUM_GEN_BATCHES,
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
    /// The step the cursor stands on (`,` `.`): panels show their values there.
    pub cursor: Option<f64>,
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
        // Cut at the right (a right-aligned title that does not fit loses its start,
        // the digits before the decimal point).
        let room = usize::from(area.width.saturating_sub(2));
        let b = if b.chars().count() > room {
            b.trim()
        } else {
            b
        };
        let b = crate::tui::widgets::text::trunc(b, room);
        block = block.title_bottom(Line::from(Span::styled(b, th.dim())).right_aligned());
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
                cursor: None,
            },
        );
        assert_eq!(log, vec![(0.0, 1.0), (60.0, 2.0)], "−1 has no log");
        assert_eq!(fmt_num(0.00012), "1.2e-4");
        assert_eq!(fmt_num(0.5), "0.500");
        assert_eq!(fmt_secs(600.0), "10m");
    }
}

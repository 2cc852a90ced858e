//! The report's PNG figures (plotters, bitmap backend): pass@1 per policy with its
//! 95% interval, yield per collection round, and the training dynamics of every RL
//! run. Text needs a TrueType font: `$RMSWEB_FONT`, else the first of a few usual
//! system paths (DejaVu Sans, Liberation Sans, Arial); without one the figures are
//! skipped and the report says why.

use super::data::Inputs;
use super::summary::{Analysis, DYNAMICS, PolicyResult};
use anyhow::{Result, anyhow};
use plotters::coord::ranged1d::SegmentValue;
use plotters::prelude::*;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// Where a sans-serif TrueType font is looked for, in order (after `$RMSWEB_FONT`).
pub const FONT_PATHS: [&str; 8] = [
    "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/TTF/DejaVuSans.ttf",
    "/usr/share/fonts/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/dejavu-sans-fonts/DejaVuSans.ttf",
    "/usr/share/fonts/truetype/liberation/LiberationSans-Regular.ttf",
    "/usr/share/fonts/liberation-sans/LiberationSans-Regular.ttf",
    "/System/Library/Fonts/Supplemental/Arial.ttf",
    "/Library/Fonts/Arial.ttf",
];

const FONT: &str = "sans-serif";

/// Registers the font once per process; the error says where it looked.
/// Largest font file read.
const FONT_BYTES: u64 = 64 << 20;

fn font() -> Result<(), String> {
    static DONE: OnceLock<Result<(), String>> = OnceLock::new();
    DONE.get_or_init(|| {
        let mut tried: Vec<PathBuf> = Vec::new();
        if let Some(p) = std::env::var_os("RMSWEB_FONT") {
            tried.push(PathBuf::from(p));
        }
        tried.extend(FONT_PATHS.iter().map(PathBuf::from));
        for p in &tried {
            let Ok(bytes) = crate::util::fs::read_limited(p, FONT_BYTES) else {
                continue;
            };
            // The font table holds `&'static` data; one font per process.
            let bytes: &'static [u8] = Box::leak(bytes.into_boxed_slice());
            if plotters::style::register_font(FONT, FontStyle::Normal, bytes).is_ok() {
                return Ok(());
            }
        }
        Err(format!(
            "no TrueType font found (set RMSWEB_FONT to a .ttf file, or install fonts-dejavu-core); looked at {}",
            tried
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ))
    })
    .clone()
}

fn err<E: std::fmt::Display>(what: &Path) -> impl Fn(E) -> anyhow::Error + '_ {
    move |e| anyhow!("drawing {}: {e}", what.display())
}

fn policies(a: &Analysis) -> Vec<&PolicyResult> {
    a.base
        .iter()
        .chain(std::iter::once(&a.sft))
        .chain(a.rl.iter())
        .collect()
}

/// Bars of pass@1 per policy with Wilson 95% whiskers.
fn pass1(a: &Analysis, path: &Path) -> Result<()> {
    let rows = policies(a);
    let root = BitMapBackend::new(path, (900, 480)).into_drawing_area();
    root.fill(&WHITE).map_err(err(path))?;
    let names: Vec<String> = rows
        .iter()
        .map(|p| {
            if p.name == "sft" {
                "SFT".into()
            } else if p.name == "base" {
                "base (zero-shot)".into()
            } else {
                p.name.clone()
            }
        })
        .collect();
    let mut chart = ChartBuilder::on(&root)
        .caption(
            format!(
                "pass@1 on held-out seeds ({} episodes per task type), 95% Wilson intervals",
                a.eval_seeds.1
            ),
            (FONT, 18),
        )
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(50)
        .build_cartesian_2d((0..rows.len()).into_segmented(), 0f64..1f64)
        .map_err(err(path))?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .y_desc("pass@1")
        .x_label_formatter(&|v| match v {
            SegmentValue::CenterOf(i) => names.get(*i).cloned().unwrap_or_default(),
            _ => String::new(),
        })
        .label_style((FONT, 13))
        .draw()
        .map_err(err(path))?;
    chart
        .draw_series(rows.iter().enumerate().map(|(i, p)| {
            let color = if i == 0 {
                RGBColor(120, 120, 120).to_rgba()
            } else {
                Palette99::pick(i).to_rgba()
            };
            let mut bar = Rectangle::new(
                [
                    (SegmentValue::Exact(i), 0.0),
                    (SegmentValue::Exact(i + 1), p.pass1.unwrap_or(0.0)),
                ],
                color.filled(),
            );
            bar.set_margin(0, 0, 12, 12);
            bar
        }))
        .map_err(err(path))?;
    chart
        .draw_series(rows.iter().enumerate().filter_map(|(i, p)| {
            let (lo, hi) = p.ci?;
            Some(PathElement::new(
                vec![
                    (SegmentValue::CenterOf(i), lo),
                    (SegmentValue::CenterOf(i), hi),
                ],
                BLACK.stroke_width(2),
            ))
        }))
        .map_err(err(path))?;
    root.present().map_err(err(path))?;
    Ok(())
}

/// Yield per round of each collection.
fn yields(inputs: &Inputs, path: &Path) -> Result<()> {
    let arms = [
        ("reflection", "teacher, reflection"),
        ("baseline", "teacher, no reflection"),
        ("sft-policy", "SFT policy"),
    ];
    let rounds = inputs
        .collections
        .values()
        .map(|r| r.per_round.len())
        .max()
        .unwrap_or(1)
        .max(1);
    let root = BitMapBackend::new(path, (720, 420)).into_drawing_area();
    root.fill(&WHITE).map_err(err(path))?;
    let mut chart = ChartBuilder::on(&root)
        .caption("yield per collection round", (FONT, 18))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(50)
        .build_cartesian_2d(0.5f64..rounds as f64 + 0.5, 0f64..1.05f64)
        .map_err(err(path))?;
    chart
        .configure_mesh()
        .x_desc("round (attempt number)")
        .y_desc("successes / attempts")
        .x_labels(rounds.min(10))
        .x_label_formatter(&|x| format!("{x:.0}"))
        .label_style((FONT, 13))
        .draw()
        .map_err(err(path))?;
    for (i, (name, label)) in arms.iter().enumerate() {
        let Some(r) = inputs.collections.get(*name) else {
            continue;
        };
        let color = Palette99::pick(i + 1).to_rgba();
        let pts: Vec<(f64, f64)> = r
            .per_round
            .iter()
            .map(|x| (x.round as f64, x.yield_rate))
            .collect();
        chart
            .draw_series(LineSeries::new(pts.clone(), color.stroke_width(2)))
            .map_err(err(path))?
            .label(*label)
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2))
            });
        chart
            .draw_series(pts.iter().map(|p| Circle::new(*p, 4, color.filled())))
            .map_err(err(path))?;
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .label_font((FONT, 13))
        .draw()
        .map_err(err(path))?;
    root.present().map_err(err(path))?;
    Ok(())
}

/// One RL run's points on a dynamics panel: its index, name and (step, value) pairs.
type Series<'a> = (usize, &'a str, Vec<(f64, f64)>);

/// One panel per dynamics key, one line per RL run.
fn dynamics(inputs: &Inputs, path: &Path) -> Result<()> {
    let cols = 4;
    let rows = DYNAMICS.len().div_ceil(cols);
    let root = BitMapBackend::new(path, (1400, 300 * rows as u32)).into_drawing_area();
    root.fill(&WHITE).map_err(err(path))?;
    let panels = root.split_evenly((rows, cols));
    for (pi, (key, label)) in DYNAMICS.iter().enumerate() {
        let area = &panels[pi];
        let series: Vec<Series<'_>> = inputs
            .rl_runs
            .iter()
            .enumerate()
            .map(|(ri, r)| {
                let pts = r
                    .metrics
                    .iter()
                    .filter_map(|(s, d)| Some((*s as f64, *d.get(*key)?)))
                    .filter(|(_, y)| y.is_finite())
                    .collect();
                (ri, r.name.as_str(), pts)
            })
            .filter(|(_, _, p): &Series<'_>| !p.is_empty())
            .collect();
        let all = series.iter().flat_map(|(_, _, p)| p.iter());
        let (mut x1, mut y0, mut y1) = (1.0f64, f64::INFINITY, f64::NEG_INFINITY);
        for (x, y) in all {
            x1 = x1.max(*x);
            y0 = y0.min(*y);
            y1 = y1.max(*y);
        }
        if !y0.is_finite() {
            (y0, y1) = (0.0, 1.0);
        }
        // A flat series (all zeros, say) still gets a readable axis around it.
        let pad = if y1 - y0 < 1e-9 {
            (y0.abs() * 0.1).max(0.5)
        } else {
            (y1 - y0) * 0.08
        };
        let mut chart = ChartBuilder::on(area)
            .caption(*label, (FONT, 15))
            .margin(8)
            .x_label_area_size(28)
            .y_label_area_size(52)
            .build_cartesian_2d(0f64..x1.max(1.0), (y0 - pad)..(y1 + pad))
            .map_err(err(path))?;
        chart
            .configure_mesh()
            .x_labels((x1 as usize).clamp(1, 5) + 1)
            .y_labels(5)
            .x_label_formatter(&|x| format!("{x:.0}"))
            .y_label_formatter(&|y| format!("{y:.3}"))
            .label_style((FONT, 11))
            .draw()
            .map_err(err(path))?;
        for (ri, name, pts) in series {
            let color = Palette99::pick(ri + 1).to_rgba();
            let s = chart
                .draw_series(LineSeries::new(pts, color.stroke_width(2)))
                .map_err(err(path))?;
            if pi == 0 {
                s.label(name.to_string()).legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 16, y)], color.stroke_width(2))
                });
            }
        }
        if pi == 0 && !inputs.rl_runs.is_empty() {
            chart
                .configure_series_labels()
                .background_style(WHITE.mix(0.85))
                .border_style(BLACK)
                .label_font((FONT, 11))
                .draw()
                .map_err(err(path))?;
        }
    }
    root.present().map_err(err(path))?;
    Ok(())
}

/// Draws every figure into `dir`; returns the files written, or why none were.
pub fn draw(a: &Analysis, inputs: &Inputs, dir: &Path) -> Result<Result<Vec<PathBuf>, String>> {
    if let Err(why) = font() {
        return Ok(Err(why));
    }
    std::fs::create_dir_all(dir)?;
    let files = [
        dir.join("pass1.png"),
        dir.join("yield.png"),
        dir.join("dynamics.png"),
    ];
    pass1(a, &files[0])?;
    yields(inputs, &files[1])?;
    dynamics(inputs, &files[2])?;
    Ok(Ok(files.to_vec()))
}

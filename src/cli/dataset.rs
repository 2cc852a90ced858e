//! `rmsweb validate`, `rmsweb stats`, `rmsweb show`.

use super::dataset_arg::{DatasetArg, dataset_and_item};
use anyhow::{Context, bail};
use rmsweb::trajectory::validate::{ValidateOptions, validate as run_validate};
use rmsweb::trajectory::{Dataset, stats};
use std::io::IsTerminal;
use std::path::{Path, PathBuf};

/// Arguments of `rmsweb validate`.
#[derive(clap::Args)]
pub struct ValidateArgs {
    #[command(flatten)]
    pub dataset: DatasetArg,
    /// Also decode every screenshot's header to check it is a real image.
    #[arg(long)]
    pub images: bool,
    /// Print one JSON object.
    #[arg(long)]
    pub json: bool,
}

/// Arguments of `rmsweb stats`.
#[derive(clap::Args)]
pub struct StatsArgs {
    #[command(flatten)]
    pub dataset: DatasetArg,
    /// Print one JSON object.
    #[arg(long)]
    pub json: bool,
}

/// Arguments of `rmsweb show`.
#[derive(clap::Args)]
pub struct ShowArgs {
    /// Dataset folder.
    #[arg(long = "dataset", value_name = "DIR")]
    pub dataset: Option<PathBuf>,
    /// `TRAJECTORY` (the trajectory id) with --dataset, or `DATASET TRAJECTORY` (the
    /// older spelling, still accepted).
    #[arg(value_name = "TRAJECTORY", num_args = 1..=2, required = true)]
    pub args: Vec<String>,
    /// Step number (0-based).
    #[arg(long, default_value_t = 0)]
    pub step: usize,
    /// Do not draw the screenshot.
    #[arg(long)]
    pub no_image: bool,
    /// Width of the drawn screenshot in terminal columns.
    #[arg(long, default_value_t = 80)]
    pub width: u32,
    /// Also write the screenshot, with the step's target drawn on it, to this PNG
    /// (not overwritten if it exists).
    #[arg(long, value_name = "FILE")]
    pub save_image: Option<PathBuf>,
}

/// Runs `validate`: exits non-zero when any error is found.
pub fn validate(a: ValidateArgs) -> anyhow::Result<()> {
    let ds = Dataset::open(&a.dataset)?;
    let report = run_validate(
        &ds,
        ValidateOptions {
            decode_images: a.images,
        },
        // Pairs first: the annotations check looks their ids up.
        &[
            &rmsweb::mine::validate::PairsCheck,
            &rmsweb::annotate::validate::AnnotationsCheck,
        ],
    );
    if a.json {
        println!("{}", serde_json::to_string(&report)?);
    } else {
        for f in &report.findings {
            println!("{}", rmsweb::util::sanitize::clean_line(&f.to_string()));
        }
        println!(
            "{}: {} tasks, {} trajectories, {} steps, {} screenshots: {} errors, {} warnings",
            a.dataset.display(),
            report.tasks,
            report.trajectories,
            report.steps,
            report.screenshots,
            report.errors(),
            report.warnings()
        );
    }
    if report.errors() > 0 {
        bail!("{} errors in {}", report.errors(), a.dataset.display());
    }
    Ok(())
}

/// Runs `stats`.
pub fn stats(a: StatsArgs) -> anyhow::Result<()> {
    print_stats(&a.dataset, a.json)
}

/// Prints a dataset's statistics, as text or one JSON object.
pub fn print_stats(dataset: &Path, json: bool) -> anyhow::Result<()> {
    let ds = Dataset::open(dataset)?;
    let st = stats::compute(&ds)?;
    if json {
        println!("{}", serde_json::to_string(&st)?);
    } else {
        print!("{}", st.render());
    }
    Ok(())
}

/// Runs `show`: prints the step and draws its screenshot with viuer.
pub fn show(a: ShowArgs) -> anyhow::Result<()> {
    let (dataset, trajectory) = dataset_and_item(a.dataset, a.args, "trajectory id")?;
    let ds = Dataset::open(&dataset)?;
    let Some(t) = ds.trajectory_by_id(&trajectory)? else {
        bail!(
            "{}: no trajectory with id `{}`",
            dataset.display(),
            trajectory
        );
    };
    let task = ds.tasks()?.into_iter().find(|x| x.task_id == t.task_id);
    print!(
        "{}",
        rmsweb::trajectory::show::render_step(&t, task.as_ref(), a.step)?
    );
    let step = &t.steps[a.step];
    let shown = |p: &std::path::Path| {
        rmsweb::util::sanitize::clean_line(&p.display().to_string()).into_owned()
    };
    let marked = |path: &std::path::Path, columns: u32| -> anyhow::Result<image::DynamicImage> {
        let img = rmsweb::util::image::open(path, rmsweb::util::image::MAX_FILE_BYTES)
            .map_err(|e| anyhow::anyhow!("{}: {e}", shown(path)))?;
        let Some(mark) = rmsweb::trajectory::mark::step_mark(step) else {
            return Ok(img);
        };
        let mut rgba = img.into_rgba8();
        // viuer keeps the aspect: as many rows as columns bounds a half-block.
        let t = rmsweb::trajectory::mark::line_width(rgba.dimensions(), (columns, columns));
        rmsweb::trajectory::mark::mark_image(&mut rgba, mark, t);
        Ok(image::DynamicImage::ImageRgba8(rgba))
    };
    if let (Some(out), Some(rel)) = (&a.save_image, &step.state.screenshot) {
        let img = marked(&ds.resolve(rel)?, 400)?;
        let mut bytes = Vec::new();
        img.write_to(
            &mut std::io::Cursor::new(&mut bytes),
            image::ImageFormat::Png,
        )?;
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(out)
            .with_context(|| {
                format!(
                    "{}: not written (it exists, or the folder does not)",
                    shown(out)
                )
            })?;
        std::io::Write::write_all(&mut f, &bytes)?;
        eprintln!("wrote {}", shown(out));
    } else if a.save_image.is_some() {
        bail!("step {} has no screenshot to save", a.step);
    }
    if let Some(rel) = &step.state.screenshot
        && !a.no_image
    {
        let path = ds.resolve(rel)?;
        if std::io::stdout().is_terminal() {
            let conf = viuer::Config {
                width: Some(a.width),
                absolute_offset: false,
                ..Default::default()
            };
            let img = marked(&path, a.width)?;
            viuer::print(&img, &conf).with_context(|| format!("drawing {}", shown(&path)))?;
        } else {
            println!(
                "screenshot: {}",
                rmsweb::util::sanitize::clean_line(&path.display().to_string())
            );
        }
    }
    Ok(())
}

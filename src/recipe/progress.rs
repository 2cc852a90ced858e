//! Progress display: an overall bar over the units and one bar for the unit at
//! work (indicatif). Lines said through [`Progress::say`] print above the bars, or
//! plainly when the bars are hidden (output not a terminal).

use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};

/// The bars of one recipe run.
pub struct Progress {
    multi: MultiProgress,
    overall: ProgressBar,
}

fn style(template: &str) -> ProgressStyle {
    ProgressStyle::with_template(template)
        .unwrap_or_else(|_| ProgressStyle::default_bar())
        .progress_chars("=> ")
}

impl Progress {
    /// Bars on stderr (hidden when it is not a terminal) over `units` units.
    pub fn new(units: usize) -> Progress {
        Self::with_target(units, ProgressDrawTarget::stderr())
    }

    /// Bars that are never drawn (tests, scripts).
    pub fn hidden(units: usize) -> Progress {
        Self::with_target(units, ProgressDrawTarget::hidden())
    }

    fn with_target(units: usize, target: ProgressDrawTarget) -> Progress {
        let multi = MultiProgress::with_draw_target(target);
        let overall = multi.add(ProgressBar::new(units as u64));
        overall.set_style(style(
            "recipe   [{bar:30}] {pos}/{len} units  {elapsed_precise}  {msg}",
        ));
        Progress { multi, overall }
    }

    /// Prints a line above the bars (or plainly when they are hidden).
    pub fn say(&self, line: &str) {
        if self.multi.is_hidden() {
            println!("{line}");
        } else {
            let _ = self.multi.println(line);
        }
    }

    /// A bar for the unit at work: `len` items of `what` (0: unknown yet).
    pub fn unit_bar(&self, unit: &str, len: u64, what: &str) -> ProgressBar {
        let bar = self.multi.add(ProgressBar::new(len));
        bar.set_style(style(&format!(
            "{{prefix:<8.bold}} [{{bar:30}}] {{pos}}/{{len}} {what}  {{elapsed}}  {{msg}}"
        )));
        bar.set_prefix(short(unit));
        bar
    }

    /// The overall bar's message (the unit at work).
    pub fn working_on(&self, unit: &str) {
        self.overall.set_message(unit.to_string());
    }

    /// One more unit done (run or skipped).
    pub fn unit_done(&self) {
        self.overall.inc(1);
    }

    /// Clears the bars.
    pub fn finish(&self) {
        self.overall.finish_and_clear();
    }
}

/// The stage part of a unit id, for the bar's prefix.
fn short(unit: &str) -> String {
    unit.split('/').next().unwrap_or(unit).to_string()
}

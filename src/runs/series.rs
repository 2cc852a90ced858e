//! Bounded metric history: every key keeps the run's full range at a resolution
//! that halves (adjacent points merged into their mean) whenever the history
//! reaches its cap, so a 100k-step run costs at most `cap` points per key.
//! Also the display transforms: EMA smoothing with bias correction and log scale.

/// One point: the optimizer step, wall-clock seconds since the run's first record
/// (see [`crate::runs::track`] for where that comes from) and the value.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Point {
    pub step: f64,
    pub wall: f64,
    pub value: f64,
}

impl Point {
    fn merge(a: Point, b: Point) -> Point {
        Point {
            step: (a.step + b.step) / 2.0,
            wall: (a.wall + b.wall) / 2.0,
            value: (a.value + b.value) / 2.0,
        }
    }
}

/// A running mean of up to `stride` incoming points not yet stored.
#[derive(Debug, Clone, Copy, Default)]
struct Bucket {
    step: f64,
    wall: f64,
    value: f64,
    n: usize,
}

impl Bucket {
    fn mean(&self) -> Option<Point> {
        (self.n > 0).then(|| {
            let n = self.n as f64;
            Point {
                step: self.step / n,
                wall: self.wall / n,
                value: self.value / n,
            }
        })
    }
}

/// The history of one metric key.
#[derive(Debug, Clone)]
pub struct Series {
    points: Vec<Point>,
    bucket: Bucket,
    /// Raw points per stored point (a power of two).
    stride: usize,
    cap: usize,
    last: Option<Point>,
    count: u64,
    /// Steps whose value was missing (null, NaN, ±inf), oldest first, at most `cap`.
    gap_steps: Vec<f64>,
    gaps: u64,
}

/// Default cap on stored points per key.
pub const DEFAULT_CAP: usize = 1024;

impl Default for Series {
    fn default() -> Self {
        Series::with_cap(DEFAULT_CAP)
    }
}

impl Series {
    /// An empty history holding at most `cap` points (at least 2, rounded up to even).
    pub fn with_cap(cap: usize) -> Self {
        let cap = cap.max(2).next_multiple_of(2);
        Series {
            points: Vec::new(),
            bucket: Bucket::default(),
            stride: 1,
            cap,
            last: None,
            count: 0,
            gap_steps: Vec::new(),
            gaps: 0,
        }
    }

    /// Records that the value at `step` was missing (drawn as a break in the line).
    pub fn push_gap(&mut self, step: f64) {
        if self.gap_steps.last().is_some_and(|&g| step < g) {
            self.gap_steps.retain(|&g| g < step);
        }
        self.gaps += 1;
        self.gap_steps.push(step);
        if self.gap_steps.len() > self.cap {
            let extra = self.gap_steps.len() - self.cap;
            self.gap_steps.drain(..extra);
        }
    }

    /// Missing values recorded (null, NaN, ±inf).
    pub fn gaps(&self) -> u64 {
        self.gaps
    }

    /// The points in runs without a missing value between them (oldest first): one
    /// run per unbroken stretch of the line.
    pub fn segments(&self) -> Vec<Vec<Point>> {
        let pts = self.points();
        let mut out: Vec<Vec<Point>> = Vec::new();
        let mut gi = 0;
        let mut prev: Option<f64> = None;
        for p in pts {
            while gi < self.gap_steps.len()
                && self.gap_steps[gi] <= prev.unwrap_or(f64::NEG_INFINITY)
            {
                gi += 1;
            }
            let broken = prev.is_some() && gi < self.gap_steps.len() && self.gap_steps[gi] < p.step;
            if broken || out.is_empty() {
                out.push(Vec::new());
            }
            prev = Some(p.step);
            if let Some(seg) = out.last_mut() {
                seg.push(p);
            }
        }
        out
    }

    /// Adds a point. Non-finite values are skipped (they cannot be drawn).
    pub fn push(&mut self, p: Point) {
        if !p.value.is_finite() {
            return;
        }
        if self.last.is_some_and(|l| p.step < l.step) {
            // The run went back (a restart that appended again): forget the future.
            self.truncate_from(p.step);
        }
        self.last = Some(p);
        self.count += 1;
        let b = &mut self.bucket;
        b.step += p.step;
        b.wall += p.wall;
        b.value += p.value;
        b.n += 1;
        if b.n >= self.stride {
            if let Some(m) = b.mean() {
                self.points.push(m);
            }
            self.bucket = Bucket::default();
            if self.points.len() >= self.cap {
                self.halve();
            }
        }
    }

    fn halve(&mut self) {
        let merged: Vec<Point> = self
            .points
            .chunks(2)
            .map(|c| {
                if c.len() == 2 {
                    Point::merge(c[0], c[1])
                } else {
                    c[0]
                }
            })
            .collect();
        self.points = merged;
        self.stride *= 2;
    }

    /// Drops every point at or after `step` (approximate once merged: whole stored
    /// points whose mean step is at or after it).
    pub fn truncate_from(&mut self, step: f64) {
        self.points.retain(|p| p.step < step);
        self.gap_steps.retain(|&g| g < step);
        self.bucket = Bucket::default();
        self.last = self.points.last().copied();
    }

    /// The stored points plus the partial bucket's mean, oldest first.
    /// The point at `step`, or the last one before it (a downsampled series keeps
    /// bucket means: the value shown for that stretch).
    pub fn at(&self, step: f64) -> Option<Point> {
        self.points()
            .into_iter()
            .take_while(|p| p.step <= step)
            .last()
    }

    /// The steps of the points stored (in order).
    pub fn steps(&self) -> Vec<f64> {
        self.points().into_iter().map(|p| p.step).collect()
    }

    pub fn points(&self) -> Vec<Point> {
        let mut v = self.points.clone();
        v.extend(self.bucket.mean());
        v
    }

    /// The latest raw point.
    pub fn last(&self) -> Option<Point> {
        self.last
    }

    /// Raw points pushed.
    pub fn count(&self) -> u64 {
        self.count
    }

    /// Raw points per stored point.
    pub fn stride(&self) -> usize {
        self.stride
    }

    /// Stored points (without the partial bucket).
    pub fn stored(&self) -> usize {
        self.points.len()
    }
}

/// EMA smoothing weights offered by `+`/`-` (0 = raw).
pub const EMA_LEVELS: [f64; 6] = [0.0, 0.5, 0.8, 0.9, 0.95, 0.99];

/// Exponential moving average with bias correction (as Adam's moments): with
/// weight `beta`, `s_t = beta·s_{t-1} + (1-beta)·x_t` from `s_0 = 0`, shown as
/// `s_t / (1 - beta^t)` so early values are not pulled towards zero.
pub fn ema(values: &[f64], beta: f64) -> Vec<f64> {
    if beta <= 0.0 {
        return values.to_vec();
    }
    let mut s = 0.0;
    let mut pow = 1.0;
    values
        .iter()
        .map(|&x| {
            s = beta * s + (1.0 - beta) * x;
            pow *= beta;
            s / (1.0 - pow)
        })
        .collect()
}

/// `log10` of the positive values; `None` for values that have no logarithm
/// (they are left out of a log-scale chart).
pub fn log_scale(v: f64) -> Option<f64> {
    (v > 0.0 && v.is_finite()).then(|| v.log10())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_value_at_a_step_is_the_last_at_or_before_it() {
        let mut s = Series::with_cap(100);
        for (step, v) in [(1.0, 0.5), (3.0, 0.25), (4.0, 1.0)] {
            s.push(Point {
                step,
                wall: step,
                value: v,
            });
        }
        assert_eq!(s.at(0.5), None);
        assert_eq!(s.at(2.0).map(|p| p.value), Some(0.5));
        assert_eq!(s.at(3.0).map(|p| p.value), Some(0.25));
        assert_eq!(s.at(9.0).map(|p| p.value), Some(1.0));
        assert_eq!(s.steps(), vec![1.0, 3.0, 4.0]);
    }

    fn pt(i: u64, v: f64) -> Point {
        Point {
            step: i as f64,
            wall: i as f64 * 0.5,
            value: v,
        }
    }

    #[test]
    fn keeps_full_range_within_the_cap() {
        let mut s = Series::with_cap(64);
        for i in 1..=100_000u64 {
            s.push(pt(i, i as f64));
        }
        let p = s.points();
        assert!(p.len() <= 65, "{} points", p.len());
        assert!(p.len() >= 32);
        assert!(
            p[0].step <= s.stride() as f64,
            "the start is kept: {}",
            p[0].step
        );
        assert!(p.last().unwrap().step > 99_000.0, "the end is kept");
        // Means of a linear ramp stay on the ramp.
        assert!(p.iter().all(|q| (q.value - q.step).abs() < 1e-6));
        assert!(p.windows(2).all(|w| w[0].step < w[1].step));
        assert_eq!(s.last().unwrap().value, 100_000.0);
        assert_eq!(s.count(), 100_000);
        assert!(s.stride() >= 1024);
    }

    #[test]
    fn merging_averages_adjacent_points() {
        let mut s = Series::with_cap(4);
        for (i, v) in [1.0, 3.0, 5.0, 7.0].into_iter().enumerate() {
            s.push(pt(i as u64, v));
        }
        assert_eq!(
            s.points().iter().map(|p| p.value).collect::<Vec<_>>(),
            vec![2.0, 6.0]
        );
        s.push(pt(4, 9.0));
        // Stride 2: a lone point waits in the bucket but is still shown.
        assert_eq!(s.stored(), 2);
        assert_eq!(s.points().last().unwrap().value, 9.0);
    }

    #[test]
    fn a_step_going_back_drops_the_later_points() {
        let mut s = Series::with_cap(100);
        for i in 1..=10 {
            s.push(pt(i, 1.0));
        }
        s.push(pt(5, 2.0));
        let p = s.points();
        assert_eq!(p.len(), 5);
        assert_eq!(p.last().unwrap().value, 2.0);
        s.push(pt(6, f64::NAN));
        assert_eq!(s.points().len(), 5, "NaN is skipped");
    }

    #[test]
    fn missing_values_break_the_line_and_are_counted() {
        let mut s = Series::with_cap(100);
        for i in 1..=3 {
            s.push(pt(i, 1.0));
        }
        s.push_gap(4.0);
        s.push_gap(5.0);
        for i in 6..=7 {
            s.push(pt(i, 2.0));
        }
        s.push_gap(8.0);
        assert_eq!(s.gaps(), 3);
        let seg = s.segments();
        assert_eq!(seg.len(), 2);
        assert_eq!(
            seg[0].iter().map(|p| p.step).collect::<Vec<_>>(),
            vec![1.0, 2.0, 3.0]
        );
        assert_eq!(
            seg[1].iter().map(|p| p.step).collect::<Vec<_>>(),
            vec![6.0, 7.0]
        );
        // A restart from step 5 forgets the later gaps too.
        s.truncate_from(5.0);
        s.push(pt(5, 3.0));
        assert_eq!(s.segments().len(), 2, "the gap at 4 still splits");
        let mut t = Series::with_cap(100);
        t.push(pt(1, 1.0));
        assert_eq!(t.segments().len(), 1);
        assert!(Series::with_cap(4).segments().is_empty());
    }

    #[test]
    fn ema_is_bias_corrected() {
        assert_eq!(ema(&[1.0, 2.0], 0.0), vec![1.0, 2.0]);
        let e = ema(&[4.0, 4.0, 4.0], 0.9);
        assert!(e.iter().all(|v| (v - 4.0).abs() < 1e-12), "{e:?}");
        let e = ema(&[0.0, 10.0], 0.5);
        // s1 = 0, s2 = 5; debiased 5 / 0.75.
        assert!((e[1] - 5.0 / 0.75).abs() < 1e-12);
        assert_eq!(log_scale(100.0), Some(2.0));
        assert_eq!(log_scale(0.0), None);
        assert_eq!(log_scale(-1.0), None);
    }
}

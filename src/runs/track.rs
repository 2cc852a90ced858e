//! The metric history of one run: a bounded [`Series`] per key, fed from metrics
//! records, with a wall-clock x for each point.
//!
//! Wall time (seconds since the run's first record) comes from, per record and in
//! this order: a `time` key (absolute Unix seconds, if the trainer writes one); the
//! running sum of the step's duration (`perf/step_s`, ours, or `timing_s/step`,
//! verl's); or, failing both, the metrics file's modification time when the batch
//! was read (so lines read together share one time). The step durations are the
//! best source for a file read after the fact, which is why they come before mtime.

use super::series::{Point, Series};
use super::tail::Record;
use crate::train::metric_keys as keys;
use std::collections::BTreeMap;
use std::time::{SystemTime, UNIX_EPOCH};

/// Keys holding a step's duration in seconds.
pub const STEP_TIME_KEYS: [&str; 2] = [keys::PERF_STEP_S, keys::TIMING_S_STEP];

/// The histories of one run.
#[derive(Debug, Clone)]
pub struct RunSeries {
    keys: BTreeMap<String, Series>,
    cap: usize,
    origin: Option<f64>,
    elapsed: f64,
    last_step: Option<u64>,
    records: u64,
    /// Keys seen with non-numeric values (not plotted), at most [`MAX_SKIPPED`].
    skipped: Vec<String>,
}

/// Non-numeric keys remembered for the report.
pub const MAX_SKIPPED: usize = 32;

impl RunSeries {
    /// Empty histories of at most `cap` points per key.
    pub fn new(cap: usize) -> Self {
        RunSeries {
            keys: BTreeMap::new(),
            cap,
            origin: None,
            elapsed: 0.0,
            last_step: None,
            records: 0,
            skipped: Vec::new(),
        }
    }

    /// Forgets everything (the file was rewritten).
    pub fn clear(&mut self) {
        *self = RunSeries::new(self.cap);
    }

    /// Adds records read together at `mtime`.
    pub fn ingest(&mut self, records: &[Record], mtime: Option<SystemTime>) {
        let mtime = mtime
            .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
            .map(|d| d.as_secs_f64());
        for r in records {
            self.records += 1;
            let get = |k: &str| r.data.iter().find(|(key, _)| key == k).map(|(_, v)| *v);
            let wall = if let Some(t) = get("time") {
                t - *self.origin.get_or_insert(t)
            } else if let Some(dt) = STEP_TIME_KEYS.iter().find_map(|k| get(k)) {
                self.elapsed += dt.max(0.0);
                self.elapsed
            } else if let Some(m) = mtime {
                m - *self.origin.get_or_insert(m)
            } else {
                self.elapsed
            };
            self.last_step = Some(r.step);
            for k in &r.gaps {
                let cap = self.cap;
                self.keys
                    .entry(k.clone())
                    .or_insert_with(|| Series::with_cap(cap))
                    .push_gap(r.step as f64);
            }
            for k in &r.skipped {
                if !self.skipped.contains(k) && self.skipped.len() < MAX_SKIPPED {
                    self.skipped.push(k.clone());
                }
            }
            for (k, v) in &r.data {
                let cap = self.cap;
                self.keys
                    .entry(k.clone())
                    .or_insert_with(|| Series::with_cap(cap))
                    .push(Point {
                        step: r.step as f64,
                        wall,
                        value: *v,
                    });
            }
        }
    }

    /// The history of `key`.
    pub fn get(&self, key: &str) -> Option<&Series> {
        self.keys.get(key)
    }

    /// The latest value of `key`.
    pub fn latest(&self, key: &str) -> Option<f64> {
        self.get(key).and_then(Series::last).map(|p| p.value)
    }

    /// The latest step read.
    pub fn last_step(&self) -> Option<u64> {
        self.last_step
    }

    /// Keys whose values were not numbers (text, long lists), in the order seen.
    pub fn skipped(&self) -> &[String] {
        &self.skipped
    }

    /// Missing values (null, NaN, ±inf) over all keys.
    pub fn gaps(&self) -> u64 {
        self.keys.values().map(Series::gaps).sum()
    }

    /// Records read since the last reset.
    pub fn records(&self) -> u64 {
        self.records
    }

    /// Every key with its history.
    pub fn keys(&self) -> impl Iterator<Item = (&String, &Series)> {
        self.keys.iter()
    }

    /// Points stored over all keys (for memory accounting).
    pub fn stored_points(&self) -> usize {
        self.keys.values().map(Series::stored).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn walls_of(s: &RunSeries) -> Vec<f64> {
        s.get("x")
            .unwrap()
            .points()
            .iter()
            .map(|p| p.wall)
            .collect()
    }

    fn rec(step: u64, data: &[(&str, f64)]) -> Record {
        Record {
            step,
            data: data.iter().map(|(k, v)| (k.to_string(), *v)).collect(),
            ..Default::default()
        }
    }

    #[test]
    fn wall_time_prefers_time_then_step_durations_then_mtime() {
        let mut s = RunSeries::new(100);
        s.ingest(
            &[
                rec(1, &[("x", 1.0), ("perf/step_s", 2.0)]),
                rec(2, &[("x", 2.0), ("perf/step_s", 3.0)]),
            ],
            None,
        );
        let walls = walls_of(&s);
        assert_eq!(walls, vec![2.0, 5.0]);
        let mut s = RunSeries::new(100);
        s.ingest(&[rec(1, &[("x", 1.0), ("time", 1000.0)])], None);
        s.ingest(&[rec(2, &[("x", 1.0), ("time", 1010.0)])], None);
        let walls = walls_of(&s);
        assert_eq!(walls, vec![0.0, 10.0]);
        let mut s = RunSeries::new(100);
        let t0 = UNIX_EPOCH + std::time::Duration::from_secs(5000);
        s.ingest(&[rec(1, &[("x", 1.0)])], Some(t0));
        s.ingest(
            &[rec(2, &[("x", 1.0)])],
            Some(t0 + std::time::Duration::from_secs(7)),
        );
        let walls = walls_of(&s);
        assert_eq!(walls, vec![0.0, 7.0]);
        assert_eq!(s.latest("x"), Some(1.0));
        assert_eq!(s.last_step(), Some(2));
    }
}

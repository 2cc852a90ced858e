//! `rmsweb stats`: counts, success rate, step distribution and action histogram.

use super::jsonl::RecordError;
use super::store::Dataset;
use rayon::prelude::*;
use serde::Serialize;
use std::collections::BTreeMap;

/// Summary figures of a step-count sample.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Distribution {
    pub count: usize,
    pub min: usize,
    pub p50: usize,
    pub mean: f64,
    pub p90: usize,
    pub max: usize,
}

impl Distribution {
    /// The distribution of `values` (nearest-rank percentiles).
    pub fn of(mut values: Vec<usize>) -> Self {
        if values.is_empty() {
            return Distribution::default();
        }
        values.sort_unstable();
        let n = values.len();
        let rank = |p: f64| values[((p * n as f64).ceil() as usize).clamp(1, n) - 1];
        Distribution {
            count: n,
            min: values[0],
            p50: rank(0.5),
            mean: values.iter().sum::<usize>() as f64 / n as f64,
            p90: rank(0.9),
            max: values[n - 1],
        }
    }
}

/// Statistics of a dataset.
#[derive(Debug, Clone, Default, Serialize)]
pub struct DatasetStats {
    pub name: String,
    pub tasks: usize,
    pub trajectories: usize,
    pub successes: usize,
    pub success_rate: f64,
    /// Model steps ([`crate::trajectory::Step::is_model_step`]); harness steps such
    /// as Browser Use's initial navigation are not counted here or below.
    pub steps: usize,
    /// Steps per trajectory, all trajectories.
    pub steps_all: Distribution,
    /// Steps per trajectory, successes only.
    pub steps_success: Distribution,
    /// Every action of every step, by canonical name.
    pub actions: BTreeMap<String, usize>,
    /// Trajectories by teacher.
    pub teachers: BTreeMap<String, usize>,
    /// Trajectories by round.
    pub rounds: BTreeMap<u32, usize>,
    /// Records that could not be read (see `rmsweb validate`).
    pub unreadable: usize,
}

struct One {
    success: bool,
    steps: usize,
    teacher: String,
    round: u32,
    actions: BTreeMap<String, usize>,
}

/// Computes the statistics, parsing trajectories in parallel.
pub fn compute(ds: &Dataset) -> Result<DatasetStats, RecordError> {
    let tasks = ds.tasks()?.len();
    let rows: Vec<Option<One>> = (0..ds.trajectory_count())
        .into_par_iter()
        .map(|i| {
            let t = ds.trajectory(i).ok()?;
            let mut actions = BTreeMap::new();
            for s in t.model_steps() {
                for a in &s.output.actions {
                    *actions.entry(a.name.clone()).or_insert(0) += 1;
                }
            }
            Some(One {
                success: t.outcome.success,
                steps: t.model_steps().count(),
                teacher: t.teacher,
                round: t.round,
                actions,
            })
        })
        .collect();
    let mut st = DatasetStats {
        name: ds.meta().name.clone(),
        tasks,
        ..Default::default()
    };
    let (mut all, mut succ) = (Vec::new(), Vec::new());
    for r in rows {
        let Some(r) = r else {
            st.unreadable += 1;
            continue;
        };
        st.trajectories += 1;
        st.steps += r.steps;
        all.push(r.steps);
        if r.success {
            st.successes += 1;
            succ.push(r.steps);
        }
        *st.teachers.entry(r.teacher).or_insert(0) += 1;
        *st.rounds.entry(r.round).or_insert(0) += 1;
        for (k, v) in r.actions {
            *st.actions.entry(k).or_insert(0) += v;
        }
    }
    st.success_rate = if st.trajectories > 0 {
        st.successes as f64 / st.trajectories as f64
    } else {
        0.0
    };
    st.steps_all = Distribution::of(all);
    st.steps_success = Distribution::of(succ);
    Ok(st)
}

impl DatasetStats {
    /// A plain-text report for a person.
    pub fn render(&self) -> String {
        use crate::util::sanitize::clean_line;
        use std::fmt::Write;
        let mut s = String::new();
        let d = |d: &Distribution| {
            format!(
                "min {} · p50 {} · mean {:.1} · p90 {} · max {}",
                d.min, d.p50, d.mean, d.p90, d.max
            )
        };
        let _ = writeln!(s, "dataset       {}", clean_line(&self.name));
        let _ = writeln!(s, "tasks         {}", self.tasks);
        let _ = writeln!(
            s,
            "trajectories  {} ({} successes, {:.1}% success rate)",
            self.trajectories,
            self.successes,
            100.0 * self.success_rate
        );
        let _ = writeln!(s, "steps         {}", self.steps);
        let _ = writeln!(s, "steps/traj    {}", d(&self.steps_all));
        let _ = writeln!(s, "steps/success {}", d(&self.steps_success));
        if self.unreadable > 0 {
            let _ = writeln!(
                s,
                "unreadable    {} records (run `rmsweb validate`)",
                self.unreadable
            );
        }
        let _ = writeln!(s, "actions");
        let total: usize = self.actions.values().sum();
        let mut by_count: Vec<_> = self.actions.iter().collect();
        by_count.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
        for (name, n) in by_count {
            let share = *n as f64 / total.max(1) as f64;
            let bar = "█".repeat((share * 30.0).round() as usize);
            let _ = writeln!(
                s,
                "  {:<18} {:>7} {:>5.1}% {bar}",
                clean_line(name),
                n,
                100.0 * share
            );
        }
        let _ = writeln!(s, "teachers");
        for (t, n) in &self.teachers {
            let name = if t.is_empty() { "(none)" } else { t };
            let _ = writeln!(s, "  {:<18} {:>7}", clean_line(name), n);
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn distribution_uses_nearest_rank() {
        let d = Distribution::of(vec![5, 1, 3, 2, 4, 6, 7, 8, 9, 10]);
        assert_eq!((d.min, d.p50, d.p90, d.max), (1, 5, 9, 10));
        assert!((d.mean - 5.5).abs() < 1e-9);
        assert_eq!(Distribution::of(vec![]).count, 0);
    }
}

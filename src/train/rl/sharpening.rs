//! The self-sharpening detector (ALGORITHMS.md §5): over a sliding window of steps,
//! flags a run whose log-prob gap, ppo_kl, clip fraction and rollout log-perplexity
//! all trend upwards while the mean reward has plateaued.
//!
//! "Trends upwards" is judged scale-free, since the four signals live on very
//! different scales (ppo_kl ~1e-3, the gap in nats): the least-squares slope over the
//! window is positive *and* the Pearson correlation of the values with the step is at
//! least `min_rise_corr` (a steady rise, not one spike). "Plateaus" is absolute,
//! rewards being in [0, 1]: the fitted change of the mean reward across the window,
//! `|slope| · (window − 1)`, is at most `max_reward_change`.

use crate::train::metric_keys as keys;
use serde::{Deserialize, Serialize};
use std::collections::VecDeque;

/// Detector settings.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SharpeningConfig {
    /// Steps in the sliding window.
    pub window: usize,
    /// Minimum correlation with the step for a signal to count as rising.
    pub min_rise_corr: f64,
    /// Largest fitted change of the mean reward over the window that is a plateau.
    pub max_reward_change: f64,
}

impl Default for SharpeningConfig {
    fn default() -> Self {
        SharpeningConfig {
            window: 20,
            min_rise_corr: 0.6,
            max_reward_change: 0.05,
        }
    }
}

/// The per-step values the detector reads.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Signals {
    pub logprob_gap: f64,
    pub ppo_kl: f64,
    pub clipfrac: f64,
    pub rollout_log_ppl: f64,
    pub reward: f64,
}

impl Signals {
    /// The signals of one metrics line (FORMATS.md keys: `salvage/logprob_gap`,
    /// `actor/ppo_kl`, `actor/pg_clipfrac`, `rollout_corr/rollout_log_ppl`,
    /// `critic/score/mean`), for a monitor reading any trainer's metrics (verl's
    /// included); None unless all five are there. A `salvage/logprob_wrong` of exactly 0
    /// means no wrong action was probed, so the gap is unknown (NaN, skipped).
    pub fn from_metrics(get: impl Fn(&str) -> Option<f64>) -> Option<Signals> {
        let gap = get(keys::SALVAGE_LOGPROB_GAP)?;
        Some(Signals {
            logprob_gap: if get(keys::SALVAGE_LOGPROB_WRONG) == Some(0.0) {
                f64::NAN
            } else {
                gap
            },
            ppo_kl: get(keys::ACTOR_PPO_KL)?,
            clipfrac: get(keys::ACTOR_PG_CLIPFRAC)?,
            rollout_log_ppl: get(keys::ROLLOUT_CORR_ROLLOUT_LOG_PPL)?,
            reward: get(keys::CRITIC_SCORE_MEAN)?,
        })
    }
}

/// Sliding-window detector.
#[derive(Debug, Clone)]
pub struct Detector {
    cfg: SharpeningConfig,
    window: VecDeque<Signals>,
}

/// Least-squares slope and Pearson correlation of `ys` against 0, 1, 2, ...
/// (correlation 0 for a constant series).
pub fn trend(ys: &[f64]) -> (f64, f64) {
    let n = ys.len() as f64;
    if ys.len() < 2 {
        return (0.0, 0.0);
    }
    let mx = (n - 1.0) / 2.0;
    let my = ys.iter().sum::<f64>() / n;
    let (mut sxy, mut sxx, mut syy) = (0.0, 0.0, 0.0);
    for (i, y) in ys.iter().enumerate() {
        let dx = i as f64 - mx;
        let dy = y - my;
        sxy += dx * dy;
        sxx += dx * dx;
        syy += dy * dy;
    }
    let slope = sxy / sxx;
    let corr = if syy > 0.0 {
        sxy / (sxx * syy).sqrt()
    } else {
        0.0
    };
    (slope, corr)
}

impl Detector {
    /// An empty detector.
    pub fn new(cfg: SharpeningConfig) -> Self {
        Detector {
            cfg,
            window: VecDeque::new(),
        }
    }

    /// Adds a step's signals; returns whether the window (once full) shows the
    /// fingerprint. Non-finite values are skipped (the window does not advance).
    pub fn push(&mut self, s: Signals) -> bool {
        let vals = [
            s.logprob_gap,
            s.ppo_kl,
            s.clipfrac,
            s.rollout_log_ppl,
            s.reward,
        ];
        if vals.iter().all(|v| v.is_finite()) {
            self.window.push_back(s);
            while self.window.len() > self.cfg.window {
                self.window.pop_front();
            }
        }
        self.flagged()
    }

    /// Whether the current window shows the fingerprint.
    pub fn flagged(&self) -> bool {
        if self.window.len() < self.cfg.window.max(3) {
            return false;
        }
        let series = |f: fn(&Signals) -> f64| -> Vec<f64> { self.window.iter().map(f).collect() };
        let rising = |f: fn(&Signals) -> f64| {
            let (slope, corr) = trend(&series(f));
            slope > 0.0 && corr >= self.cfg.min_rise_corr
        };
        let (reward_slope, _) = trend(&series(|s| s.reward));
        let plateau =
            reward_slope.abs() * (self.window.len() - 1) as f64 <= self.cfg.max_reward_change;
        plateau
            && rising(|s| s.logprob_gap)
            && rising(|s| s.ppo_kl)
            && rising(|s| s.clipfrac)
            && rising(|s| s.rollout_log_ppl)
    }

    /// A one-line description of the window (for the alert message).
    pub fn describe(&self) -> String {
        let first = self.window.front();
        let last = self.window.back();
        match (first, last) {
            (Some(a), Some(b)) => format!(
                "over {} steps: logprob gap {:.3}→{:.3}, ppo_kl {:.2e}→{:.2e}, clipfrac {:.3}→{:.3}, rollout log-ppl {:.3}→{:.3} while mean reward stays {:.3}→{:.3}",
                self.window.len(),
                a.logprob_gap,
                b.logprob_gap,
                a.ppo_kl,
                b.ppo_kl,
                a.clipfrac,
                b.clipfrac,
                a.rollout_log_ppl,
                b.rollout_log_ppl,
                a.reward,
                b.reward
            ),
            _ => String::new(),
        }
    }
}

/// The detector over a run: raises one alert (`kind = "self_sharpening"`) each time
/// the fingerprint appears, i.e. when a step is flagged and the previous one was not.
#[derive(Debug, Clone)]
pub struct Monitor {
    detector: Detector,
    flagged: bool,
}

impl Monitor {
    /// A monitor with an empty window.
    pub fn new(cfg: SharpeningConfig) -> Self {
        Monitor {
            detector: Detector::new(cfg),
            flagged: false,
        }
    }

    /// Feeds a step already logged (a resumed run rebuilds its window); raises nothing.
    pub fn replay(&mut self, s: Signals) {
        self.flagged = self.detector.push(s);
    }

    /// Feeds step `step`; returns whether it is flagged and the alert it raises, if any.
    pub fn observe(&mut self, step: u64, s: Signals) -> (bool, Option<crate::train::run::Alert>) {
        let now = self.detector.push(s);
        let alert = (now && !self.flagged).then(|| crate::train::run::Alert {
            kind: "self_sharpening".into(),
            step,
            message: format!("self-sharpening suspected {}", self.detector.describe()),
        });
        self.flagged = now;
        (now, alert)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg() -> SharpeningConfig {
        SharpeningConfig {
            window: 10,
            ..Default::default()
        }
    }

    /// A series with a small deterministic wiggle (so nothing is perfectly linear).
    fn wiggle(i: usize) -> f64 {
        [0.0, 0.3, -0.2, 0.1, -0.3, 0.2][i % 6]
    }

    fn sharpening(i: usize, reward_rise: f64) -> Signals {
        let t = i as f64;
        Signals {
            logprob_gap: 1.0 + 0.1 * t + 0.02 * wiggle(i),
            ppo_kl: 1e-3 * (1.0 + 0.2 * t + 0.05 * wiggle(i + 1)),
            clipfrac: 0.02 + 0.01 * t + 0.002 * wiggle(i + 2),
            rollout_log_ppl: 0.5 + 0.05 * t + 0.01 * wiggle(i + 3),
            reward: 0.6 + reward_rise * t + 0.005 * wiggle(i + 4),
        }
    }

    #[test]
    fn the_monitor_alerts_once_per_episode() {
        let mut m = Monitor::new(cfg());
        let mut alerts = Vec::new();
        for i in 0..12 {
            let (_, a) = m.observe(i as u64 + 1, sharpening(i, 0.0));
            alerts.extend(a);
        }
        // Flagged from step 10 on, alerted once.
        assert_eq!(alerts.len(), 1);
        assert_eq!(
            (alerts[0].kind.as_str(), alerts[0].step),
            ("self_sharpening", 10)
        );
        assert!(alerts[0].message.contains("ppo_kl"));
        // Flat steps clear it; a new rising stretch alerts again.
        for i in 0..10 {
            let (f, a) = m.observe(13 + i, sharpening(0, 0.0));
            assert!(a.is_none());
            if i == 9 {
                assert!(!f);
            }
        }
        let again: Vec<_> = (0..10)
            .filter_map(|i| m.observe(30 + i as u64, sharpening(i, 0.0)).1)
            .collect();
        assert_eq!(again.len(), 1);
        // Replayed history restores the state without alerting.
        let mut r = Monitor::new(cfg());
        for i in 0..10 {
            r.replay(sharpening(i, 0.0));
        }
        assert!(r.observe(11, sharpening(10, 0.0)).1.is_none());
    }

    #[test]
    fn trend_by_hand() {
        let (s, c) = trend(&[1.0, 3.0, 5.0]);
        assert!((s - 2.0).abs() < 1e-12 && (c - 1.0).abs() < 1e-12);
        let (s, c) = trend(&[2.0, 2.0, 2.0]);
        assert_eq!((s, c), (0.0, 0.0));
        let (s, c) = trend(&[3.0, 2.0, 1.0]);
        assert!(s < 0.0 && c < -0.99);
    }

    #[test]
    fn flags_rising_dynamics_under_a_reward_plateau_only_once_the_window_is_full() {
        let mut d = Detector::new(cfg());
        let flags: Vec<bool> = (0..12).map(|i| d.push(sharpening(i, 0.0))).collect();
        assert!(flags[..9].iter().all(|f| !f), "{flags:?}");
        assert!(flags[9..].iter().all(|&f| f), "{flags:?}");
        assert!(d.describe().contains("over 10 steps"));
    }

    #[test]
    fn improving_reward_is_not_self_sharpening() {
        let mut d = Detector::new(cfg());
        // The same rising dynamics while the reward climbs 0.02 per step (0.18 over
        // the window): healthy learning.
        let flags: Vec<bool> = (0..12).map(|i| d.push(sharpening(i, 0.02))).collect();
        assert!(!flags.contains(&true));
    }

    #[test]
    fn one_flat_signal_is_enough_to_stay_quiet() {
        let mut d = Detector::new(cfg());
        let flagged = (0..12)
            .map(|i| {
                let mut s = sharpening(i, 0.0);
                s.clipfrac = 0.05 + 0.01 * wiggle(i); // noise, no trend
                d.push(s)
            })
            .collect::<Vec<_>>()
            .contains(&true);
        assert!(!flagged);
        // A decreasing log-prob gap is not the fingerprint either.
        let mut d = Detector::new(cfg());
        let flagged = (0..12)
            .map(|i| {
                let mut s = sharpening(i, 0.0);
                s.logprob_gap = 3.0 - 0.1 * i as f64;
                d.push(s)
            })
            .collect::<Vec<_>>()
            .contains(&true);
        assert!(!flagged);
    }

    #[test]
    fn the_window_slides_and_non_finite_steps_are_skipped() {
        let mut d = Detector::new(cfg());
        for i in 0..10 {
            d.push(sharpening(i, 0.0));
        }
        assert!(d.flagged());
        let mut nan = sharpening(10, 0.0);
        nan.ppo_kl = f64::NAN;
        assert!(d.push(nan), "a NaN step leaves the window as it was");
        // Ten flat steps push the rising ones out.
        for i in 0..10 {
            let mut s = sharpening(0, 0.0);
            s.reward += 0.001 * wiggle(i);
            d.push(s);
        }
        assert!(!d.flagged());
    }
}

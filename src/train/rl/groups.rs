//! Salvage-DS group gating (ALGORITHMS.md §5): the std and competence gates, GRPO
//! advantages of accepted groups, and the salvage count and mix of rejected groups.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The RL variants that share everything but group filtering and the anchor.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum Mode {
    /// Both gates, refill, and the salvage anchor on rejected groups.
    SalvageDs,
    /// Both gates and refill, salvage weight 0.
    AnchorFree,
    /// Keep groups with any reward spread; no competence gate, no salvage.
    Dapo,
    /// No filtering at all.
    Grpo,
}

impl Mode {
    /// Every mode, in the order help texts list them: the one list the CLI, the
    /// recipe, the launch form, the verl export and the Python package
    /// (`rmsweb_verl._native.modes()`) take their names from.
    pub const ALL: [Mode; 4] = [Mode::SalvageDs, Mode::AnchorFree, Mode::Dapo, Mode::Grpo];

    /// The name `--mode`, `run.toml` and the recipe's variants use.
    pub fn name(self) -> &'static str {
        match self {
            Mode::SalvageDs => "salvage-ds",
            Mode::AnchorFree => "anchor-free",
            Mode::Dapo => "dapo",
            Mode::Grpo => "grpo",
        }
    }

    /// The mode of a name ([`Mode::name`]).
    pub fn from_name(name: &str) -> Option<Mode> {
        Mode::ALL.into_iter().find(|m| m.name() == name)
    }

    /// The names joined by `sep` (`salvage-ds, anchor-free, dapo, grpo`).
    pub fn names(sep: &str) -> String {
        Mode::ALL.map(Mode::name).join(sep)
    }

    /// Whether rejected groups feed the salvage NLL with non-zero weight.
    pub fn salvages(self) -> bool {
        self == Mode::SalvageDs
    }
}

/// Gate thresholds.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct GateConfig {
    /// ε_σ: groups whose population std is at most this carry no contrast.
    pub eps_sigma: f64,
    /// r_comp: groups whose best reward is below this have no competent rollout.
    pub r_comp: f64,
    pub mode: Mode,
}

impl Default for GateConfig {
    fn default() -> Self {
        GateConfig {
            eps_sigma: 0.10,
            r_comp: 0.55,
            mode: Mode::SalvageDs,
        }
    }
}

/// What happened to a group.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GateDecision {
    Accepted,
    StdGate,
    CompetenceGate,
}

/// Moments of a group's rewards.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct GroupStats {
    pub mean: f64,
    /// Population std (divides by n): what the std gate reads.
    pub std: f64,
    /// Unbiased std (divides by n − 1): what GRPO advantages divide by.
    pub std_unbiased: f64,
    pub max: f64,
}

impl GroupStats {
    /// Moments of `r`; `None` for an empty group or a non-finite reward.
    pub fn of(r: &[f64]) -> Option<Self> {
        if r.is_empty() || r.iter().any(|x| !x.is_finite()) {
            return None;
        }
        let n = r.len() as f64;
        let mean = r.iter().sum::<f64>() / n;
        let ss: f64 = r.iter().map(|x| (x - mean).powi(2)).sum();
        Some(GroupStats {
            mean,
            std: (ss / n).sqrt(),
            std_unbiased: if r.len() > 1 {
                (ss / (n - 1.0)).sqrt()
            } else {
                0.0
            },
            max: r.iter().copied().fold(f64::NEG_INFINITY, f64::max),
        })
    }
}

/// Largest reward magnitude accepted by [`parse_group_line`]: sums of squares of
/// millions of such rewards stay finite, so every statistic is a number (rewards are
/// 0..1 in practice; 1e308 would make the mean overflow and the std NaN).
pub const MAX_ABS_REWARD: f64 = 1e150;

/// Reads one `{"group": id, "rewards": [..]}` line of `rmsweb rl groups` input
/// (FORMATS.md): the id and the rewards, or why the line is refused (not JSON, text
/// after the object, a duplicate key, a reward that is not a number or is outside
/// ±[`MAX_ABS_REWARD`]).
pub fn parse_group_line(line: &str) -> Result<(Value, Vec<f64>), String> {
    let v: Value = serde_json::from_str(line).map_err(|e| format!("not JSON: {e}"))?;
    if let Ok(Some(dup)) = crate::util::json::first_duplicate_key(line.as_bytes()) {
        return Err(dup.to_string());
    }
    let id = v.get("group").cloned().ok_or("missing field `group`")?;
    let rewards = v
        .get("rewards")
        .and_then(Value::as_array)
        .ok_or("field `rewards`: expected a list of numbers")?;
    rewards
        .iter()
        .enumerate()
        .map(|(i, r)| {
            let x = r
                .as_f64()
                .ok_or_else(|| format!("field `rewards[{i}]`: expected a number, found {r}"))?;
            if !x.is_finite() || x.abs() > MAX_ABS_REWARD {
                return Err(format!(
                    "field `rewards[{i}]`: {r} is outside ±{MAX_ABS_REWARD:e}, the range of rewards whose statistics stay finite"
                ));
            }
            Ok(x)
        })
        .collect::<Result<Vec<_>, _>>()
        .map(|r| (id, r))
}

/// Spread below this counts as none at all (DAPO keeps std > 0).
const NO_SPREAD: f64 = 1e-12;

/// The gate decision for a group under `cfg`.
pub fn decide(stats: &GroupStats, cfg: &GateConfig) -> GateDecision {
    match cfg.mode {
        Mode::Grpo => GateDecision::Accepted,
        Mode::Dapo if stats.std <= NO_SPREAD => GateDecision::StdGate,
        Mode::Dapo => GateDecision::Accepted,
        Mode::SalvageDs | Mode::AnchorFree => {
            if stats.std <= cfg.eps_sigma {
                GateDecision::StdGate
            } else if stats.max < cfg.r_comp {
                GateDecision::CompetenceGate
            } else {
                GateDecision::Accepted
            }
        }
    }
}

/// GRPO advantages as verl computes them: `(r − mean) / (std_unbiased + 1e-6)`.
pub fn advantages(r: &[f64], stats: &GroupStats) -> Vec<f64> {
    r.iter()
        .map(|x| (x - stats.mean) / (stats.std_unbiased + 1e-6))
        .collect()
}

/// The salvage rule: of `rejected` groups retain `S = 16·⌊min(D, 64)/16⌋`.
pub fn salvage_count(rejected: usize) -> usize {
    salvage_count_for(rejected, 16, 64)
}

/// The salvage rule with its unit (the paper's 16 = the mini-batch) and cap (64 = the
/// train batch) as parameters, for scaled-down presets: `unit·⌊min(D, cap)/unit⌋`.
pub fn salvage_count_for(rejected: usize, unit: usize, cap: usize) -> usize {
    let unit = unit.max(1);
    unit * (rejected.min(cap) / unit)
}

/// Picks `salvage_count(hard + mastered)` groups, hard (competence-rejected) and
/// mastered (std-rejected) in proportion, in the order given. Returns indices into
/// `hard` and into `mastered`.
pub fn salvage_mix(hard: usize, mastered: usize) -> (usize, usize) {
    salvage_mix_for(hard, mastered, 16, 64)
}

/// [`salvage_mix`] with the rule's unit and cap as parameters (see [`salvage_count_for`]).
pub fn salvage_mix_for(hard: usize, mastered: usize, unit: usize, cap: usize) -> (usize, usize) {
    let d = hard + mastered;
    let s = salvage_count_for(d, unit, cap);
    if s == 0 {
        return (0, 0);
    }
    let h = ((s * hard) as f64 / d as f64).round() as usize;
    let h = h.min(hard).max(s.saturating_sub(mastered));
    (h, s - h)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mode_names_are_the_ones_clap_and_serde_take() {
        use clap::ValueEnum;
        assert_eq!(Mode::value_variants(), Mode::ALL);
        for m in Mode::ALL {
            assert_eq!(m.to_possible_value().unwrap().get_name(), m.name());
            assert_eq!(serde_json::to_value(m).unwrap(), m.name());
            assert_eq!(Mode::from_name(m.name()), Some(m));
        }
        assert_eq!(Mode::from_name("salvage_ds"), None);
        assert_eq!(Mode::names(", "), "salvage-ds, anchor-free, dapo, grpo");
    }

    fn close(a: f64, b: f64) {
        assert!((a - b).abs() < 1e-9, "{a} != {b}");
    }

    #[test]
    fn population_and_unbiased_std_by_hand() {
        // rewards 1, 0, 0, 0: mean .25, ss = .5625 + 3·.0625 = .75
        let s = GroupStats::of(&[1.0, 0.0, 0.0, 0.0]).unwrap();
        close(s.mean, 0.25);
        close(s.std, (0.75f64 / 4.0).sqrt());
        close(s.std_unbiased, (0.75f64 / 3.0).sqrt());
        let a = advantages(&[1.0, 0.0, 0.0, 0.0], &s);
        close(a[0], 0.75 / (0.5 + 1e-6));
        close(a[1], -0.25 / (0.5 + 1e-6));
        assert!(GroupStats::of(&[]).is_none());
        assert!(GroupStats::of(&[f64::NAN]).is_none());
    }

    #[test]
    fn group_lines_refuse_what_would_give_wrong_statistics() {
        let (id, r) = parse_group_line(r#"{"group": "a", "rewards": [1, 0.5]}"#).unwrap();
        assert_eq!((id, r), (serde_json::json!("a"), vec![1.0, 0.5]));
        let e = parse_group_line(r#"{"group": "h", "rewards": [1e308, -1e308]}"#).unwrap_err();
        assert!(e.contains("rewards[0]") && e.contains("outside"), "{e}");
        let e = parse_group_line(r#"{"group": 1, "rewards": [0], "rewards": [1]}"#).unwrap_err();
        assert!(e.contains("duplicate key `rewards`"), "{e}");
        let e = parse_group_line(r#"{"group": 1, "rewards": [0]} {"group": 2}"#).unwrap_err();
        assert!(e.starts_with("not JSON"), "{e}");
        // Within the bound every statistic is finite.
        let big = [MAX_ABS_REWARD, -MAX_ABS_REWARD, MAX_ABS_REWARD];
        let s = GroupStats::of(&big).unwrap();
        assert!(s.mean.is_finite() && s.std.is_finite() && s.std_unbiased.is_finite());
        assert!(advantages(&big, &s).iter().all(|a| a.is_finite()));
    }

    #[test]
    fn gates_read_population_std_and_max() {
        let cfg = GateConfig::default();
        // pop std of [0.3, 0.3, 0.3, 0.7] = 0.1732 > 0.1 but max 0.7 ≥ 0.55
        let d = |r: &[f64]| decide(&GroupStats::of(r).unwrap(), &cfg);
        assert_eq!(d(&[0.3, 0.3, 0.3, 0.7]), GateDecision::Accepted);
        // all equal → std gate, even when competent
        assert_eq!(d(&[1.0; 8]), GateDecision::StdGate);
        // pop std of [0.0, 0.2] is exactly 0.1: the gate is "≤ ε", so rejected
        assert_eq!(d(&[0.0, 0.2]), GateDecision::StdGate);
        // spread but nobody competent
        assert_eq!(d(&[0.0, 0.3, 0.0, 0.3]), GateDecision::CompetenceGate);
        let dapo = GateConfig {
            mode: Mode::Dapo,
            ..cfg
        };
        assert_eq!(
            decide(&GroupStats::of(&[0.0, 0.3]).unwrap(), &dapo),
            GateDecision::Accepted
        );
        assert_eq!(
            decide(&GroupStats::of(&[0.3, 0.3]).unwrap(), &dapo),
            GateDecision::StdGate
        );
        let grpo = GateConfig {
            mode: Mode::Grpo,
            ..cfg
        };
        assert_eq!(
            decide(&GroupStats::of(&[0.3, 0.3]).unwrap(), &grpo),
            GateDecision::Accepted
        );
    }

    #[test]
    fn salvage_rule_rounds_down_to_sixteen_and_caps_at_sixty_four() {
        let cases = [
            (0, 0),
            (15, 0),
            (16, 16),
            (31, 16),
            (47, 32),
            (63, 48),
            (64, 64),
            (500, 64),
        ];
        for (d, s) in cases {
            assert_eq!(salvage_count(d), s, "D = {d}");
        }
        assert_eq!(salvage_mix(24, 8), (24, 8));
        assert_eq!(salvage_mix(30, 10), (24, 8));
        assert_eq!(salvage_mix(0, 40), (0, 32));
        assert_eq!(salvage_mix(100, 1), (63, 1));
        let (h, m) = salvage_mix(3, 60);
        assert_eq!((h + m, h <= 3), (48, true));
        // The tiny preset's scaled rule: unit 4, cap 8.
        assert_eq!(salvage_count_for(3, 4, 8), 0);
        assert_eq!(salvage_count_for(7, 4, 8), 4);
        assert_eq!(salvage_count_for(30, 4, 8), 8);
        assert_eq!(salvage_mix_for(6, 2, 4, 8), (6, 2));
        assert_eq!(salvage_mix_for(3, 3, 4, 8), (2, 2));
    }
}

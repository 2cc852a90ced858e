//! Synthetic metrics with every key of FORMATS.md's metric table, for tests,
//! benches and demos of the monitor before real RL runs exist. Deterministic: the
//! same `(steps, seed)` gives the same bytes. The curves mimic a run that
//! self-sharpens late: reward plateaus while the log-prob gap, KL, clip fraction
//! and rollout log-perplexity rise, and `alerts/self_sharpening` turns 1 in the
//! last fifth.

use crate::train::metric_keys as keys;
use std::io::Write;

/// Every key written, in order.
pub const KEYS: [&str; 27] = [
    keys::ACTOR_PG_LOSS,
    keys::ACTOR_KL_LOSS,
    keys::ACTOR_ENTROPY,
    keys::ACTOR_GRAD_NORM,
    keys::ACTOR_LR,
    keys::ACTOR_PG_CLIPFRAC,
    keys::ACTOR_PG_CLIPFRAC_LOWER,
    keys::ACTOR_PPO_KL,
    keys::ROLLOUT_CORR_ROLLOUT_LOG_PPL,
    keys::CRITIC_SCORE_MEAN,
    keys::CRITIC_SCORE_MAX,
    keys::RESPONSE_LENGTH_MEAN,
    keys::TRAIN_NUM_GEN_BATCHES,
    keys::SALVAGE_STD_GATE_REJECT_SHARE,
    keys::SALVAGE_COMPETENCE_GATE_REJECT_SHARE,
    keys::SALVAGE_ACCEPTED_GROUPS,
    keys::SALVAGE_SALVAGE_GROUPS,
    keys::SALVAGE_NLL,
    keys::SALVAGE_BEST_OF_N_REWARD,
    keys::SALVAGE_WITHIN_GROUP_STD,
    keys::SALVAGE_LOGPROB_CORRECT,
    keys::SALVAGE_LOGPROB_WRONG,
    keys::SALVAGE_LOGPROB_GAP,
    keys::SFT_LOSS,
    keys::PERF_TOKENS_PER_S,
    keys::PERF_STEP_S,
    keys::ALERTS_SELF_SHARPENING,
];

/// A deterministic value in [-1, 1] for `(seed, step, key)`.
fn noise(seed: u64, step: u64, key: usize) -> f64 {
    let mut h = seed
        .wrapping_mul(0x9E37_79B9_7F4A_7C15)
        .wrapping_add(step.wrapping_mul(0xBF58_476D_1CE4_E5B9))
        .wrapping_add(key as u64 + 1);
    h ^= h >> 31;
    h = h.wrapping_mul(0x94D0_49BB_1331_11EB);
    h ^= h >> 29;
    (h >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0
}

/// The values of step `step` (1-based) of a `steps`-step run.
pub fn values(step: u64, steps: u64, seed: u64) -> Vec<(&'static str, f64)> {
    let t = step as f64 / steps.max(1) as f64;
    let late = ((t - 0.6) / 0.4).clamp(0.0, 1.0);
    let n = |k: usize, a: f64| a * noise(seed, step, k);
    let reward = 0.35 + 0.3 * (1.0 - (-4.0 * t).exp()) + n(9, 0.03);
    let std_share = (0.45 - 0.25 * t + n(13, 0.04)).clamp(0.0, 1.0);
    let comp_share = (0.30 - 0.15 * t + n(14, 0.04)).clamp(0.0, 1.0);
    let accepted = (16.0 * (1.0 - std_share - comp_share)).round().max(0.0);
    let lp_correct = -2.0 + 1.2 * t + n(20, 0.05);
    let lp_wrong = -2.2 + 0.6 * t - 1.5 * late + n(21, 0.05);
    KEYS.iter()
        .enumerate()
        .map(|(k, key)| {
            let v = match *key {
                keys::ACTOR_PG_LOSS => n(k, 0.05) - 0.01,
                keys::ACTOR_KL_LOSS => 0.002 + 0.01 * t + 0.03 * late + n(k, 0.001),
                keys::ACTOR_ENTROPY => 1.2 - 0.5 * t - 0.4 * late + n(k, 0.02),
                keys::ACTOR_GRAD_NORM => 0.8 + 0.3 * late + n(k, 0.1),
                keys::ACTOR_LR => 1e-6,
                keys::ACTOR_PG_CLIPFRAC => 0.01 + 0.02 * t + 0.08 * late + n(k, 0.003),
                keys::ACTOR_PG_CLIPFRAC_LOWER => 0.001 + 0.01 * late + n(k, 0.0005),
                keys::ACTOR_PPO_KL => 0.001 + 0.004 * t + 0.02 * late + n(k, 0.0005),
                keys::ROLLOUT_CORR_ROLLOUT_LOG_PPL => 0.9 - 0.3 * t + 0.5 * late + n(k, 0.02),
                keys::CRITIC_SCORE_MEAN => reward,
                keys::CRITIC_SCORE_MAX => (reward + 0.3).min(1.0),
                keys::RESPONSE_LENGTH_MEAN => 180.0 - 40.0 * t + n(k, 5.0),
                keys::TRAIN_NUM_GEN_BATCHES => 1.0 + (std_share + comp_share > 0.5) as u8 as f64,
                keys::SALVAGE_STD_GATE_REJECT_SHARE => std_share,
                keys::SALVAGE_COMPETENCE_GATE_REJECT_SHARE => comp_share,
                keys::SALVAGE_ACCEPTED_GROUPS => accepted,
                keys::SALVAGE_SALVAGE_GROUPS => 16.0 * ((16.0 - accepted) / 16.0).floor().max(0.0),
                keys::SALVAGE_NLL => 1.1 - 0.6 * t + n(k, 0.03),
                keys::SALVAGE_BEST_OF_N_REWARD => (reward + 0.25).min(1.0),
                keys::SALVAGE_WITHIN_GROUP_STD => (0.22 - 0.1 * t + n(k, 0.01)).max(0.0),
                keys::SALVAGE_LOGPROB_CORRECT => lp_correct,
                keys::SALVAGE_LOGPROB_WRONG => lp_wrong,
                keys::SALVAGE_LOGPROB_GAP => lp_correct - lp_wrong,
                keys::SFT_LOSS => 0.9 - 0.3 * t + n(k, 0.02),
                keys::PERF_TOKENS_PER_S => 1500.0 + n(k, 100.0),
                keys::PERF_STEP_S => 12.0 + n(k, 1.0),
                keys::ALERTS_SELF_SHARPENING => f64::from(u8::from(t > 0.8)),
                _ => 0.0,
            };
            (*key, v)
        })
        .collect()
}

/// Writes `steps` metrics lines (`{"step": N, "data": {...}}`) to `out`.
pub fn write(out: &mut impl Write, steps: u64, seed: u64) -> std::io::Result<()> {
    for step in 1..=steps {
        let data: serde_json::Map<String, serde_json::Value> = values(step, steps, seed)
            .into_iter()
            .map(|(k, v)| (k.to_string(), serde_json::json!(v)))
            .collect();
        writeln!(out, "{}", serde_json::json!({"step": step, "data": data}))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn deterministic_with_every_key() {
        let mut a = Vec::new();
        let mut b = Vec::new();
        super::write(&mut a, 5, 1).unwrap();
        super::write(&mut b, 5, 1).unwrap();
        assert_eq!(a, b);
        let text = String::from_utf8(a).unwrap();
        let r = crate::runs::tail::parse_line(text.lines().next().unwrap()).unwrap();
        assert_eq!(r.data.len(), super::KEYS.len());
    }
}

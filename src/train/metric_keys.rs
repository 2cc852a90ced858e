//! The keys of `metrics.jsonl` (FORMATS.md's metric table, verl's names where verl
//! has the metric): one constant per key, for the trainers that write them and the
//! Runs tab, curriculum and report that read them. The Python package's keys are
//! checked against [`ALL`] by its tests (`rmsweb_verl._native.metric_keys()`).

// the policy update (verl's names)
/// `actor/pg_loss`
pub const ACTOR_PG_LOSS: &str = "actor/pg_loss";
/// `actor/kl_loss`
pub const ACTOR_KL_LOSS: &str = "actor/kl_loss";
/// `actor/entropy`
pub const ACTOR_ENTROPY: &str = "actor/entropy";
/// `actor/entropy_loss`
pub const ACTOR_ENTROPY_LOSS: &str = "actor/entropy_loss";
/// `actor/grad_norm`
pub const ACTOR_GRAD_NORM: &str = "actor/grad_norm";
/// `actor/lr`
pub const ACTOR_LR: &str = "actor/lr";
/// `actor/kl_coef`
pub const ACTOR_KL_COEF: &str = "actor/kl_coef";
/// `actor/pg_clipfrac`
pub const ACTOR_PG_CLIPFRAC: &str = "actor/pg_clipfrac";
/// `actor/pg_clipfrac_lower`
pub const ACTOR_PG_CLIPFRAC_LOWER: &str = "actor/pg_clipfrac_lower";
/// `actor/ppo_kl`
pub const ACTOR_PPO_KL: &str = "actor/ppo_kl";

// the sampled responses
/// `rollout_corr/rollout_log_ppl`
pub const ROLLOUT_CORR_ROLLOUT_LOG_PPL: &str = "rollout_corr/rollout_log_ppl";

// rollout rewards
/// `critic/score/mean`
pub const CRITIC_SCORE_MEAN: &str = "critic/score/mean";
/// `critic/score/max`
pub const CRITIC_SCORE_MAX: &str = "critic/score/max";

// response tokens
/// `response_length/mean`
pub const RESPONSE_LENGTH_MEAN: &str = "response_length/mean";
/// `response_length/max`
pub const RESPONSE_LENGTH_MAX: &str = "response_length/max";
/// `response_length/min`
pub const RESPONSE_LENGTH_MIN: &str = "response_length/min";

// the step's loop
/// `train/num_gen_batches`
pub const TRAIN_NUM_GEN_BATCHES: &str = "train/num_gen_batches";
/// `train/updates`
pub const TRAIN_UPDATES: &str = "train/updates";
/// `train/epoch`
pub const TRAIN_EPOCH: &str = "train/epoch";

// Salvage-DS gates, salvage and probe (ALGORITHMS.md §5)
/// `salvage/std_gate_reject_share`
pub const SALVAGE_STD_GATE_REJECT_SHARE: &str = "salvage/std_gate_reject_share";
/// `salvage/competence_gate_reject_share`
pub const SALVAGE_COMPETENCE_GATE_REJECT_SHARE: &str = "salvage/competence_gate_reject_share";
/// `salvage/accepted_groups`
pub const SALVAGE_ACCEPTED_GROUPS: &str = "salvage/accepted_groups";
/// `salvage/salvage_groups`
pub const SALVAGE_SALVAGE_GROUPS: &str = "salvage/salvage_groups";
/// `salvage/surplus_groups`
pub const SALVAGE_SURPLUS_GROUPS: &str = "salvage/surplus_groups";
/// `salvage/sampled_groups`
pub const SALVAGE_SAMPLED_GROUPS: &str = "salvage/sampled_groups";
/// `salvage/failed_groups`
pub const SALVAGE_FAILED_GROUPS: &str = "salvage/failed_groups";
/// `salvage/refill_cap_hit`
pub const SALVAGE_REFILL_CAP_HIT: &str = "salvage/refill_cap_hit";
/// `salvage/inert_step`
pub const SALVAGE_INERT_STEP: &str = "salvage/inert_step";
/// `salvage/nll`
pub const SALVAGE_NLL: &str = "salvage/nll";
/// `salvage/best_of_n_reward`
pub const SALVAGE_BEST_OF_N_REWARD: &str = "salvage/best_of_n_reward";
/// `salvage/within_group_std`
pub const SALVAGE_WITHIN_GROUP_STD: &str = "salvage/within_group_std";
/// `salvage/logprob_correct`
pub const SALVAGE_LOGPROB_CORRECT: &str = "salvage/logprob_correct";
/// `salvage/logprob_wrong`
pub const SALVAGE_LOGPROB_WRONG: &str = "salvage/logprob_wrong";
/// `salvage/logprob_gap`
pub const SALVAGE_LOGPROB_GAP: &str = "salvage/logprob_gap";
/// `salvage/spliced_rows`
pub const SALVAGE_SPLICED_ROWS: &str = "salvage/spliced_rows";
/// `salvage/spliced_without_action_tokens`
pub const SALVAGE_SPLICED_WITHOUT_ACTION_TOKENS: &str = "salvage/spliced_without_action_tokens";

// SFT
/// `sft/loss`
pub const SFT_LOSS: &str = "sft/loss";
/// `sft/prompt_loss`
pub const SFT_PROMPT_LOSS: &str = "sft/prompt_loss";
/// `sft/tokens`
pub const SFT_TOKENS: &str = "sft/tokens";

// throughput
/// `perf/tokens_per_s`
pub const PERF_TOKENS_PER_S: &str = "perf/tokens_per_s";
/// `perf/step_s`
pub const PERF_STEP_S: &str = "perf/step_s";
/// `perf/gen_s`
pub const PERF_GEN_S: &str = "perf/gen_s";

// seconds spent per phase of a step
/// `timing_s/step`
pub const TIMING_S_STEP: &str = "timing_s/step";
/// `timing_s/gen`
pub const TIMING_S_GEN: &str = "timing_s/gen";
/// `timing_s/ref`
pub const TIMING_S_REF: &str = "timing_s/ref";
/// `timing_s/old_log_prob`
pub const TIMING_S_OLD_LOG_PROB: &str = "timing_s/old_log_prob";
/// `timing_s/update_actor`
pub const TIMING_S_UPDATE_ACTOR: &str = "timing_s/update_actor";
/// `timing_s/probe`
pub const TIMING_S_PROBE: &str = "timing_s/probe";

// alerts (1 when raised)
/// `alerts/self_sharpening`
pub const ALERTS_SELF_SHARPENING: &str = "alerts/self_sharpening";

/// Every key above.
pub const ALL: &[&str] = &[
    ACTOR_PG_LOSS,
    ACTOR_KL_LOSS,
    ACTOR_ENTROPY,
    ACTOR_ENTROPY_LOSS,
    ACTOR_GRAD_NORM,
    ACTOR_LR,
    ACTOR_KL_COEF,
    ACTOR_PG_CLIPFRAC,
    ACTOR_PG_CLIPFRAC_LOWER,
    ACTOR_PPO_KL,
    ROLLOUT_CORR_ROLLOUT_LOG_PPL,
    CRITIC_SCORE_MEAN,
    CRITIC_SCORE_MAX,
    RESPONSE_LENGTH_MEAN,
    RESPONSE_LENGTH_MAX,
    RESPONSE_LENGTH_MIN,
    TRAIN_NUM_GEN_BATCHES,
    TRAIN_UPDATES,
    TRAIN_EPOCH,
    SALVAGE_STD_GATE_REJECT_SHARE,
    SALVAGE_COMPETENCE_GATE_REJECT_SHARE,
    SALVAGE_ACCEPTED_GROUPS,
    SALVAGE_SALVAGE_GROUPS,
    SALVAGE_SURPLUS_GROUPS,
    SALVAGE_SAMPLED_GROUPS,
    SALVAGE_FAILED_GROUPS,
    SALVAGE_REFILL_CAP_HIT,
    SALVAGE_INERT_STEP,
    SALVAGE_NLL,
    SALVAGE_BEST_OF_N_REWARD,
    SALVAGE_WITHIN_GROUP_STD,
    SALVAGE_LOGPROB_CORRECT,
    SALVAGE_LOGPROB_WRONG,
    SALVAGE_LOGPROB_GAP,
    SALVAGE_SPLICED_ROWS,
    SALVAGE_SPLICED_WITHOUT_ACTION_TOKENS,
    SFT_LOSS,
    SFT_PROMPT_LOSS,
    SFT_TOKENS,
    PERF_TOKENS_PER_S,
    PERF_STEP_S,
    PERF_GEN_S,
    TIMING_S_STEP,
    TIMING_S_GEN,
    TIMING_S_REF,
    TIMING_S_OLD_LOG_PROB,
    TIMING_S_UPDATE_ACTOR,
    TIMING_S_PROBE,
    ALERTS_SELF_SHARPENING,
];

#[cfg(test)]
mod tests {
    #[test]
    fn keys_are_distinct_and_named_group_slash_metric() {
        let set: std::collections::BTreeSet<&str> = super::ALL.iter().copied().collect();
        assert_eq!(set.len(), super::ALL.len());
        for k in super::ALL {
            let (group, name) = k.split_once('/').unwrap();
            assert!(!group.is_empty() && !name.is_empty(), "{k}");
        }
    }
}

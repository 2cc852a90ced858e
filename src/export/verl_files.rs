//! The files beside a verl export's parquet: `salvage_ds.yaml` (Hydra config that
//! composes verl 0.9.1's `ppo_trainer` with ALGORITHMS.md §5's values and the
//! rmsweb plugin's plug points), `run.sh` (1 node × 8 GPUs, or 2 × 8 on a Ray
//! cluster; the ablation modes as `MODE=`), `README.md` (the layout and the exact
//! launch commands) and `export.json` (what was exported).

use super::verl_report::VerlReport;
use anyhow::Result;
use std::path::Path;

/// The Hydra config's name (`--config-name`).
pub const CONFIG_NAME: &str = "salvage_ds";
/// verl's trainer mode the plugin registers (`trainer.v1.trainer_mode`).
pub const TRAINER_MODE: &str = "salvage_ds";

/// A YAML scalar for any text (a JSON string is a YAML flow scalar).
fn yaml_str(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_default()
}

/// `salvage_ds.yaml` for an export in `out` (absolute). Validation runs only when
/// the export has a validation split.
// Kept whole: it is one YAML file as verl reads it; split, its sections would lose
// the comments that tie them to each other.
pub fn salvage_yaml(out: &Path, report: &VerlReport) -> String {
    let file = |n: &str| yaml_str(&out.join(n).display().to_string());
    let (val_before, test_freq) = if report.val > 0 {
        ("true", 10)
    } else {
        ("false", -1)
    };
    format!(
        r#"# Salvage-DS (ALGORITHMS.md §5) on verl 0.9.1, written by `rmsweb export verl`.
# Hydra composes this file with verl's own `ppo_trainer` (found on the search path
# below); run.sh starts it as
#   python3 -m verl.trainer.main_ppo --config-path <this folder> --config-name {CONFIG_NAME} \
#     actor_rollout_ref.model.path=<SFT-merged checkpoint> ...
# The rmsweb_verl plugin (`pip install <rmsweb>/python`) must be installed on every node:
# it supplies the reward, the gated sampler, the trainer and the loss named here.
hydra:
  searchpath:
    - pkg://verl.trainer.config
defaults:
  - ppo_trainer
  - _self_

data:
  train_files: {train}
  val_files: {val}
  prompt_key: prompt
  image_key: images
  reward_fn_key: data_source
  # rmsweb's renderer fits a prompt to 6,000 tokens (its own estimate); the slack
  # absorbs the chat template and tokenizer differences.
  max_prompt_length: 6656
  max_response_length: 1024
  filter_overlong_prompts: true
  truncation: error
  # 64 prompts a generation batch: the refill draws whole batches (the sampler below).
  train_batch_size: 64
  return_raw_chat: true

algorithm:
  adv_estimator: grpo              # A = (r - mean) / (std_unbiased + 1e-6)
  norm_adv_by_std_in_grpo: true
  use_kl_in_reward: false          # the KL is in the loss (low_var_kl), not the reward
  filter_groups:
    enable: false                  # the rmsweb sampler gates groups itself

actor_rollout_ref:
  model:
    path: ???                      # the SFT-merged checkpoint: with LoRA the reference
                                   # policy is this model without the adapter
    lora_rank: 64
    lora_alpha: 128
    target_modules: [q_proj, k_proj, v_proj, o_proj]
  actor:
    optim:
      lr: 8.0e-6
    ppo_mini_batch_size: 16        # groups: 64 / 16 = 4 updates a step
    ppo_micro_batch_size_per_gpu: 2
    ppo_epochs: 1
    shuffle: false
    policy_loss:
      loss_mode: vanilla
    clip_ratio_low: 0.2
    clip_ratio_high: 0.32
    clip_ratio_c: 3.0              # dual clip for negative advantages
    loss_agg_mode: seq-mean-token-mean
    entropy_coeff: 0
    use_kl_loss: true
    kl_loss_type: low_var_kl
    kl_loss_coef: 0.001
  rollout:
    name: vllm
    n: 8
    temperature: 1.0
    log_prob_micro_batch_size_per_gpu: 4
  ref:
    log_prob_micro_batch_size_per_gpu: 4

reward:
  custom_reward_function:
    path: pkg://rmsweb_verl.reward
    name: compute_score

trainer:
  use_v1: true
  v1:
    trainer_mode: {TRAINER_MODE}        # rmsweb_verl's PPOTrainerSync subclass
    sampler:
      custom_sampler:
        path: pkg://rmsweb_verl.sampler
        name: SalvageReplayBuffer
      sampler_kwargs:
        mode: salvage-ds           # {modes}
        eps_sigma: 0.10            # std gate: reject population std <= eps_sigma
        r_comp: 0.55               # competence gate: reject max reward < r_comp
        target_groups: 64          # refill until this many groups are accepted ...
        max_gen_batches: 16        # ... or this many generation batches were drawn
        salvage_unit: 16           # S = unit * floor(min(D, cap) / unit)
        salvage_cap: 64
        salvage_coef: 0.10         # weight of the action-only NLL on salvage rows
  logger: [console, file]          # `file`: the metrics.jsonl the workbench watches
  project_name: rmsweb
  experiment_name: salvage-ds
  nnodes: 1
  n_gpus_per_node: 8
  val_before_train: {val_before}
  test_freq: {test_freq}
  save_freq: 50
  total_epochs: 1
"#,
        train = file("train.parquet"),
        val = file("val.parquet"),
        modes = crate::train::rl::groups::Mode::names(" | "),
    )
}

/// `run.sh`: the launch script (see its header).
pub const RUN_SH: &str = r#"#!/usr/bin/env bash
# Salvage-DS on verl 0.9.1 for the export in this folder (written by `rmsweb export verl`).
#
#   MODEL=/ckpt/sft-merged bash run.sh                                  # 1 node x 8 GPUs
#   MODEL=/ckpt/sft-merged NODES=2 RAY_ADDRESS=HEAD_IP:6379 bash run.sh # 2 nodes x 8 GPUs
#
# MODEL          the SFT-merged checkpoint (a Hugging Face folder); required
# NODES          nodes (default 1); more than one needs RAY_ADDRESS (README.md)
# GPUS_PER_NODE  GPUs per node (default 8)
# RAY_ADDRESS    a running Ray cluster's head, HOST:PORT
# MODE           salvage-ds | anchor-free | dapo | grpo (default salvage-ds)
# PYTHON         the interpreter with verl and rmsweb_verl (default python3)
# VERL_FILE_LOGGER_PATH  the metrics file (verl's default: ./rmsweb/<MODE>.jsonl)
# Arguments are more Hydra overrides, e.g. trainer.total_training_steps=200.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
: "${MODEL:?set MODEL to the SFT-merged checkpoint (a Hugging Face model folder)}"
NODES="${NODES:-1}"
GPUS_PER_NODE="${GPUS_PER_NODE:-8}"
MODE="${MODE:-salvage-ds}"
PYTHON="${PYTHON:-python3}"
case "$NODES$GPUS_PER_NODE" in
  *[!0-9]*) echo "run.sh: NODES and GPUS_PER_NODE must be whole numbers" >&2; exit 2 ;;
esac
if [ "$NODES" -gt 1 ] && [ -z "${RAY_ADDRESS:-}" ]; then
  echo "run.sh: NODES=$NODES needs RAY_ADDRESS, the Ray head (see README.md)" >&2
  exit 2
fi
case "$MODE" in
  salvage-ds)  mode_args=() ;;
  anchor-free) mode_args=(trainer.v1.sampler.sampler_kwargs.salvage_coef=0) ;;
  dapo)        mode_args=(actor_rollout_ref.actor.clip_ratio_high=0.28) ;;
  grpo)        mode_args=(actor_rollout_ref.actor.clip_ratio_high=0.2) ;;
  *) echo "run.sh: MODE=$MODE: use one of salvage-ds, anchor-free, dapo, grpo" >&2; exit 2 ;;
esac
if ! "$PYTHON" -c 'import rmsweb_verl' 2>/dev/null; then
  echo "run.sh: $PYTHON cannot import rmsweb_verl: pip install <rmsweb>/python on every node" >&2
  exit 2
fi
if [ -n "${RAY_ADDRESS:-}" ]; then export RAY_ADDRESS; fi
export VERL_USE_EXTERNAL_MODULES="${VERL_USE_EXTERNAL_MODULES:-rmsweb_verl.plugin}"
exec "$PYTHON" -m verl.trainer.main_ppo \
  --config-path "$here" --config-name salvage_ds \
  actor_rollout_ref.model.path="$MODEL" \
  trainer.nnodes="$NODES" trainer.n_gpus_per_node="$GPUS_PER_NODE" \
  trainer.experiment_name="$MODE" \
  trainer.v1.sampler.sampler_kwargs.mode="$MODE" \
  "${mode_args[@]}" "$@"
"#;

/// `README.md` of an export.
pub fn readme(report: &VerlReport, dataset: &Path) -> String {
    format!(
        r#"# rmsweb → verl export

Written by `rmsweb export verl {dataset} --prompts {prompts}`: {train} training prompts
from {train_tasks} tasks, {val} validation prompts from {val_tasks} held-out tasks,
{images} screenshots, {skipped} prompts skipped (`export.json` says which and why).

| file | what |
|---|---|
| `train.parquet`, `val.parquet` | verl RLHF rows: `data_source` (`rmsweb/<domain>`), `prompt` (system + user messages from rmsweb's prompt renderer, the text its own RL trains on), `images` (PNG bytes, `--images` only), `ability`, `reward_model` `{{style: rule, ground_truth: target action JSON}}`, `extra_info` `{{pair_id, task_id, trajectory, step, failure_mode, elements (JSON), prompt_format, index, split}}` |
| `salvage_ds.yaml` | Hydra config: verl's `ppo_trainer` + Salvage-DS (GRPO advantages, clip 0.2/0.32, dual clip 3, low_var_kl 1e-3, seq-mean-token-mean, lr 8e-6, LoRA r64/α128 on q,k,v,o, n = 8, 64 groups, mini-batch 16) + the rmsweb_verl plug points |
| `run.sh` | the launch (`MODEL=... bash run.sh`) |
| `export.json` | counts and skipped prompts |

## Set up (every node)

```sh
pip install 'verl[vllm]==0.9.1'          # or verl's Docker image
pip install <rmsweb>/python              # rmsweb_verl: reward, sampler, trainer, loss (needs Rust)
```

`MODEL` is the SFT checkpoint with the LoRA adapter merged (a Hugging Face folder):
with LoRA, verl's reference policy is the actor without its adapter.

## Launch

One node, 8 GPUs:

```sh
MODEL=/ckpt/sft-merged bash run.sh
```

Two nodes, 8 GPUs each (Ray cluster first):

```sh
ray start --head --port=6379 --num-gpus=8                  # node 0
ray start --address=HEAD_IP:6379 --num-gpus=8              # node 1
MODEL=/ckpt/sft-merged NODES=2 RAY_ADDRESS=HEAD_IP:6379 bash run.sh   # on node 0
```

Ablations: `MODE=anchor-free|dapo|grpo bash run.sh` (the data option `full-corpus` is
`rmsweb export verl D --prompts full-corpus`). More Hydra overrides go after the
script: `bash run.sh trainer.total_training_steps=200`.

## Watch

verl writes its metrics to `$VERL_FILE_LOGGER_PATH` (default
`./rmsweb/<MODE>.jsonl`; each launch truncates it). `rmsweb --watch FILE` shows it in
the workbench's Runs tab; `n` there launches this export as a `verl` run into a run
folder, one metrics file per attempt. `python -m rmsweb_verl.rollouts DUMP_DIR --out
rollouts.jsonl` turns a rollout dump (`trainer.rollout_data_dir`) into rmsweb's
`rollouts.jsonl` for the Reward tab.
"#,
        dataset = dataset.display(),
        prompts = report.prompts,
        train = report.train,
        train_tasks = report.train_tasks,
        val = report.val,
        val_tasks = report.val_tasks,
        images = report.images,
        skipped = report.skipped.len(),
    )
}

/// Writes `salvage_ds.yaml`, `run.sh` (executable), `README.md` and `export.json`
/// into `out` (absolute), each atomically.
pub fn write_all(out: &Path, dataset: &Path, report: &VerlReport) -> Result<()> {
    use crate::util::fs::write_atomic;
    use std::os::unix::fs::PermissionsExt;
    write_atomic(
        &out.join(format!("{CONFIG_NAME}.yaml")),
        salvage_yaml(out, report).as_bytes(),
    )?;
    let run = out.join("run.sh");
    write_atomic(&run, RUN_SH.as_bytes())?;
    std::fs::set_permissions(&run, std::fs::Permissions::from_mode(0o755))?;
    write_atomic(&out.join("README.md"), readme(report, dataset).as_bytes())?;
    let manifest = serde_json::json!({
        "schema": 1,
        "created_at": chrono::Utc::now().to_rfc3339(),
        "rmsweb": env!("CARGO_PKG_VERSION"),
        "dataset": dataset.display().to_string(),
        "report": report,
    });
    write_atomic(
        &out.join("export.json"),
        serde_json::to_vec_pretty(&manifest)?.as_slice(),
    )?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::train::rl::groups::Mode;

    #[test]
    fn run_sh_knows_every_rl_mode() {
        // A mode added to `Mode` needs its arm in run.sh (what verl does differently).
        for m in Mode::ALL {
            assert!(
                RUN_SH.contains(&format!("\n  {})", m.name())),
                "run.sh has no case arm for {}",
                m.name()
            );
        }
        assert!(RUN_SH.contains(&format!("# MODE           {} (default", Mode::names(" | "))));
        assert!(RUN_SH.contains(&format!("use one of {}\"", Mode::names(", "))));
    }
}

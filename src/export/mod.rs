//! Exports to other training engines. [`verl`]: RL prompts as verl's RLHF parquet
//! with the Salvage-DS recipe's Hydra config and launch script; [`bridge`]: the
//! rubric, the splice and the gates as the JSON-level answers that both the command
//! line and the Python module (`python/`, the verl plugin) give.

pub mod bridge;
pub mod verl;
pub mod verl_files;
pub mod verl_report;

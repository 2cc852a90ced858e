//! Run config and registry, metrics sink, SFT trainer and Salvage-DS RL.

pub mod augment;
pub mod cpu_tuning;
pub mod lifecycle;
pub mod metric_keys;
pub mod nll;
pub mod optim;
pub mod prompt_record;
pub mod rl;
pub mod run;
pub mod samples;
pub mod schedule;
pub mod sft;
pub mod sft_config;
pub mod sft_model;
pub mod sft_prepare;

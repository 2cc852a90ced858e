//! Run config and registry, metrics sink, SFT trainer and Salvage-DS RL.

pub mod rl;

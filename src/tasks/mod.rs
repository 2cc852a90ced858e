//! Task sets before collection: seed tasks generated from search queries by an LLM
//! (`generate`), and the lexical-overlap check of a training task set against a
//! benchmark's tasks (`overlap`; the paper: "no training task matches a benchmark
//! task under our lexical-overlap tests").

pub mod generate;
pub mod generate_cache;
pub mod overlap;
pub mod overlap_config;
pub mod queries;
pub mod seed_prompt;
pub mod text_index;

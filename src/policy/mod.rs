//! Policies: the `Policy` trait, the prompt renderer, chat endpoint, scripted teacher, local model.

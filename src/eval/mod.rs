//! Evaluation harness: pass@1, pass@k, steps on solved tasks.

//! Reflection-conditioned multi-round collection and its yield report.

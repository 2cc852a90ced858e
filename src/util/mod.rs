//! Small helpers shared by every stage.

pub mod sanitize;

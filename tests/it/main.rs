//! Integration tests: one binary, one module per area.
mod chat;
mod env;

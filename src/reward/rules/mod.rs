//! The rubric rows of ALGORITHMS.md §3, one function per action type. Both actions
//! reaching here are canonical and of the same type. Every decision names its rule
//! (`<type>.<what>`, or `index.absent`, `key_tokens.mismatch`, `params.missing`) and
//! gives a one-line reason quoting the concrete values (cleaned for terminals).
//!
//! Shared pieces are in `common`, element actions in `element`, page-level actions
//! in `page`.

mod common;
mod element;
mod page;

pub use common::Ctx;
pub use element::{click, element_only, element_text, fields, upload};
pub use page::{done, navigate, normalize_keys, query, scroll, send_keys, tab, wait};

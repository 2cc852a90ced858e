//! Drawing helpers shared by the views: sanitized text, JSON highlighting,
//! screenshots.

pub mod chart;
pub mod highlight;
pub mod screenshot;
pub mod text;

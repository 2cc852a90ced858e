//! Values quoted inside the rubric's reasons: cleaned of control characters and
//! clipped, shared by the rules, the element checks and the URL comparison.

use crate::util::sanitize::clean_line;

/// Longest quoted value in a reason, in characters.
const QUOTE_CHARS: usize = 60;

/// `"value"`, cleaned of control characters and clipped to a readable length.
pub fn quote(s: &str) -> String {
    let clean = clean_line(s);
    match clean.char_indices().nth(QUOTE_CHARS) {
        Some((i, _)) => format!("\"{}…\"", &clean[..i]),
        None => format!("\"{clean}\""),
    }
}

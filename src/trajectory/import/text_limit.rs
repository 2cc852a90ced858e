//! The longest single text an import reads, checked before the text is processed.

use crate::trajectory::jsonl::MAX_RECORD_BYTES;
use crate::util::human_bytes;

/// Longest single text (a `state_message`, a done text) an import reads: a step's
/// record holds such a text at least twice over (the DOM as text and as elements;
/// the done text in the action and as the final answer), so anything longer can never
/// fit a record and is refused before it is processed.
pub const MAX_TEXT_BYTES: usize = MAX_RECORD_BYTES / 2;

/// Refuses a text longer than [`MAX_TEXT_BYTES`], saying why.
pub fn check_text_len(len: usize) -> Result<(), String> {
    if len > MAX_TEXT_BYTES {
        return Err(format!(
            "{} of text, over the {} an imported text may have (a step's record holds it \
             twice and must stay within the {} record limit)",
            human_bytes(len as u64),
            human_bytes(MAX_TEXT_BYTES as u64),
            human_bytes(MAX_RECORD_BYTES as u64)
        ));
    }
    Ok(())
}

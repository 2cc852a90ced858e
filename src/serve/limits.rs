//! Size limits of `rmsweb serve`, checked before any work is done on a request
//! (each a `serve` flag), and the lower bound on a prompt's tokens that its bytes
//! alone give, so a prompt that cannot fit the context is refused without being
//! tokenized.

/// Default `--max-body-bytes`: a request body (Browser Use sends screenshots inline).
pub const DEFAULT_MAX_BODY_BYTES: u64 = 64 << 20;

/// Default `--max-message-bytes`: the text of one message.
pub const DEFAULT_MAX_MESSAGE_BYTES: u64 = 4 << 20;

/// Default `--max-stop-bytes`: one stop sequence.
pub const DEFAULT_MAX_STOP_BYTES: u64 = 256;

/// The size limits a request is held to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Largest request body, in bytes (larger ones get a 413).
    pub max_body_bytes: usize,
    /// Largest text of one message, in bytes.
    pub max_message_bytes: usize,
    /// Longest stop sequence, in bytes.
    pub max_stop_bytes: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_body_bytes: DEFAULT_MAX_BODY_BYTES as usize,
            max_message_bytes: DEFAULT_MAX_MESSAGE_BYTES as usize,
            max_stop_bytes: DEFAULT_MAX_STOP_BYTES as usize,
        }
    }
}

/// Fewest tokens a prompt of `messages` messages holding `text_bytes` bytes of text
/// can encode to, for a vocabulary whose longest token spells `longest_token`
/// bytes: every message's turn is at least one token, and no token covers more than
/// `longest_token` bytes of text after normalization (which may compose at most 3
/// bytes into 1, as NFC does with Hangul jamo).
pub fn min_prompt_tokens(messages: usize, text_bytes: usize, longest_token: usize) -> usize {
    messages + text_bytes.div_ceil(longest_token.max(1).saturating_mul(3))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_estimate_is_a_lower_bound() {
        assert_eq!(min_prompt_tokens(2, 0, 16), 2);
        assert_eq!(min_prompt_tokens(1, 48, 16), 2);
        assert_eq!(min_prompt_tokens(1, 49, 16), 3);
        // 50 MB of text with a 128-byte longest token: far past any context.
        assert!(min_prompt_tokens(1, 50_000_000, 128) > 100_000);
        assert_eq!(min_prompt_tokens(0, 10, 0), 4);
    }
}

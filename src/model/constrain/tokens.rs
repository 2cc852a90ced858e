//! The raw bytes of a tokenizer's vocabulary, for constrained decoding.

use std::collections::HashMap;

/// Raw bytes of every token of a tokenizer's vocabulary, `None` for special and
/// added tokens (never allowed inside constrained text). Byte-level BPE tokens
/// (GPT-2's byte-to-character map, as Qwen's and rmsweb's tiny tokenizers use) are
/// mapped back to their bytes; other tokenizers' tokens are decoded alone.
pub fn token_bytes(tok: &tokenizers::Tokenizer) -> Vec<Option<Vec<u8>>> {
    let vocab = tok.get_vocab_size(true);
    let byte_level = matches!(
        tok.get_decoder(),
        Some(tokenizers::DecoderWrapper::ByteLevel(_))
    );
    let unmap = gpt2_unicode_to_byte();
    let added: std::collections::HashSet<u32> =
        tok.get_added_tokens_decoder().keys().copied().collect();
    (0..vocab as u32)
        .map(|id| {
            if added.contains(&id) {
                return None;
            }
            let piece = tok.id_to_token(id)?;
            if byte_level {
                piece.chars().map(|c| unmap.get(&c).copied()).collect()
            } else {
                let text = tok.decode(&[id], false).ok()?;
                (!text.contains('\u{FFFD}')).then(|| text.into_bytes())
            }
        })
        .collect()
}

/// GPT-2's printable stand-in character of each byte, reversed.
pub(super) fn gpt2_unicode_to_byte() -> HashMap<char, u8> {
    let mut map = HashMap::new();
    let mut extra = 0u32;
    for b in 0u32..=255 {
        let printable =
            (33..=126).contains(&b) || (161..=172).contains(&b) || (174..=255).contains(&b);
        let c = if printable {
            b
        } else {
            extra += 1;
            255 + extra
        };
        if let Some(c) = char::from_u32(c) {
            map.insert(c, b as u8);
        }
    }
    map
}

//! The policy-gradient mask of a sampled response under `pg_tokens = "action"`:
//! the tokens of the action and what follows it, not the free text before it.

use crate::action::parse::parse_response;

/// Per token of `ids` (a sampled response, stop token included): 1 when the token
/// carries a byte of the action span or comes after its start (closing brackets, the
/// stop token), 0 on the free text before it. Every token is 1 when the response's
/// bytes are not UTF-8 or its action does not parse: such a response is judged as a
/// whole. `token_bytes` maps ids to raw bytes (`None`, e.g. a special token, counts
/// as empty).
pub fn action_mask(ids: &[u32], token_bytes: &[Option<Vec<u8>>]) -> Vec<f32> {
    let mut bytes = Vec::new();
    let mut ends = Vec::with_capacity(ids.len());
    for &id in ids {
        if let Some(Some(b)) = token_bytes.get(id as usize) {
            bytes.extend_from_slice(b);
        }
        ends.push(bytes.len());
    }
    let start = std::str::from_utf8(&bytes)
        .ok()
        .and_then(|text| parse_response(text).ok())
        .map(|p| p.action_span.start);
    match start {
        None => vec![1.0; ids.len()],
        Some(start) => {
            let mut from = 0;
            ends.iter()
                .map(|&end| {
                    let token_start = from;
                    from = end;
                    f32::from(u8::from(end > start || token_start >= start))
                })
                .collect()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A vocabulary of the given pieces (ids in order) and one special token after them.
    fn vocab(pieces: &[&str]) -> Vec<Option<Vec<u8>>> {
        let mut v: Vec<Option<Vec<u8>>> =
            pieces.iter().map(|p| Some(p.as_bytes().to_vec())).collect();
        v.push(None);
        v
    }

    #[test]
    fn only_the_action_and_what_follows_carry_the_gradient() {
        let pieces = [
            "{\"thinking\": \"",
            "click it",
            "\", \"memory\": \"",
            "Plan step 1",
            "\", \"act",
            "ions\": [{\"click\": {\"index\": ",
            "3",
            "}}]",
            "}",
        ];
        let stop = pieces.len() as u32;
        let tb = vocab(&pieces);
        let ids: Vec<u32> = (0..pieces.len() as u32).chain([stop]).collect();
        let mask = action_mask(&ids, &tb);
        // The action list starts inside piece 5 (`[` after `ions": `): pieces 5.. count,
        // and so do the closing brace and the stop token; the free text does not.
        assert_eq!(mask, vec![0., 0., 0., 0., 0., 1., 1., 1., 1., 1.]);
    }

    #[test]
    fn a_response_without_a_parsable_action_keeps_every_token() {
        let tb = vocab(&["{\"thinking\": \"", "executed executed", "\""]);
        assert_eq!(action_mask(&[0, 1, 2, 1], &tb), vec![1.0; 4]);
        // Bytes that are not UTF-8 (a token split inside a character) likewise.
        let tb = vec![Some(vec![0xE2u8]), Some(b"{}".to_vec())];
        assert_eq!(action_mask(&[0, 1], &tb), vec![1.0; 2]);
    }
}

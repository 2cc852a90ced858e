//! Byte-level scanning of JSON text embedded in free text: matching braces (robust
//! to braces inside strings) and the spans of an object's members or an array's items.
//!
//! These helpers never allocate and never panic on any input; they work on bytes,
//! and every position they return lies on an ASCII delimiter, hence on a `char`
//! boundary of the original `&str`.

use std::ops::Range;

/// How many bytes a parse may still scan. Every candidate the parser tries (a `{`, a
/// `name(`) scans part of the text; charging each scan here bounds the total work
/// by a constant times the input length, whatever the input (unclosed `{` or `(`
/// repeated a million times cannot make it quadratic).
#[derive(Debug, Clone)]
pub struct ScanBudget {
    left: usize,
    spent: usize,
}

/// Fixed cost charged per candidate, so that many tiny scans also add up.
pub const CANDIDATE_COST: usize = 16;

impl ScanBudget {
    /// The budget for a text of `len` bytes: three scans of the whole text, plus slack
    /// for short texts.
    pub fn for_len(len: usize) -> Self {
        ScanBudget {
            left: len.saturating_mul(3).saturating_add(64 << 10),
            spent: 0,
        }
    }

    /// Bytes that may still be scanned.
    pub fn left(&self) -> usize {
        self.left
    }

    /// Bytes scanned so far.
    pub fn spent(&self) -> usize {
        self.spent
    }

    /// Charges `n` bytes; `false` (and nothing left) when they exceed what is left.
    pub fn spend(&mut self, n: usize) -> bool {
        let ok = n <= self.left;
        let n = n.min(self.left);
        self.left -= n;
        self.spent += n;
        ok
    }

    /// Whether the budget is used up.
    pub fn exhausted(&self) -> bool {
        self.left == 0
    }
}

/// Given `start` at a `"`, the position just past the closing quote (escapes honoured),
/// or `None` when the string is not closed.
pub fn string_end(bytes: &[u8], start: usize) -> Option<usize> {
    let mut i = start + 1;
    while i < bytes.len() {
        let j = i + memchr::memchr2(b'"', b'\\', &bytes[i..])?;
        if bytes[j] == b'"' {
            return Some(j + 1);
        }
        i = j + 2;
    }
    None
}

/// Given `start` at `{` or `[`, the position just past the bracket that closes it.
/// Brackets inside JSON strings are ignored. `None` when it is never closed.
pub fn balanced_end(bytes: &[u8], start: usize) -> Option<usize> {
    let mut depth = 0usize;
    let mut i = start;
    while i < bytes.len() {
        match bytes[i] {
            b'"' => {
                i = string_end(bytes, i)?;
                continue;
            }
            b'{' | b'[' => depth += 1,
            b'}' | b']' => {
                depth = depth.checked_sub(1)?;
                if depth == 0 {
                    return Some(i + 1);
                }
            }
            _ => {}
        }
        i += 1;
    }
    None
}

/// What a bounded scan found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Bounded {
    /// The end position.
    End(usize),
    /// The text ends first: never closed.
    Unclosed,
    /// The budget ran out first.
    OutOfBudget,
}

/// [`balanced_end`] that scans at most what `budget` has left, and charges what it scanned.
pub fn balanced_end_within(bytes: &[u8], start: usize, budget: &mut ScanBudget) -> Bounded {
    within(bytes, start, budget, balanced_end)
}

/// [`string_end`] that scans at most what `budget` has left, and charges what it scanned.
pub fn string_end_within(bytes: &[u8], start: usize, budget: &mut ScanBudget) -> Bounded {
    within(bytes, start, budget, string_end)
}

/// Runs `scan` from `start` on at most what `budget` has left of `bytes`.
fn within(
    bytes: &[u8],
    start: usize,
    budget: &mut ScanBudget,
    scan: fn(&[u8], usize) -> Option<usize>,
) -> Bounded {
    let limit = start.saturating_add(budget.left()).min(bytes.len());
    match scan(&bytes[..limit], start) {
        Some(end) => {
            budget.spend(end - start);
            Bounded::End(end)
        }
        None => {
            budget.spend(limit - start);
            if limit < bytes.len() {
                Bounded::OutOfBudget
            } else {
                Bounded::Unclosed
            }
        }
    }
}

/// The start of the last occurrence of any of `needles` in `bytes`, if any.
pub fn last_occurrence(bytes: &[u8], needles: &[&[u8]]) -> Option<usize> {
    needles
        .iter()
        .filter_map(|n| memchr::memmem::rfind(bytes, n))
        .max()
}

fn skip_ws(bytes: &[u8], mut i: usize) -> usize {
    while i < bytes.len() && bytes[i].is_ascii_whitespace() {
        i += 1;
    }
    i
}

/// The end of the JSON value starting at `i` (which must not be whitespace).
fn value_end(bytes: &[u8], i: usize) -> Option<usize> {
    match bytes.get(i)? {
        b'{' | b'[' => balanced_end(bytes, i),
        b'"' => string_end(bytes, i),
        _ => {
            let mut j = i;
            while j < bytes.len() && !matches!(bytes[j], b',' | b'}' | b']') {
                j += 1;
            }
            // Trim trailing whitespace of a scalar.
            while j > i && bytes[j - 1].is_ascii_whitespace() {
                j -= 1;
            }
            Some(j)
        }
    }
}

/// One member of a JSON object: the key's span (quotes included) and the value's span.
#[derive(Debug, Clone, PartialEq)]
pub struct Member {
    pub key: Range<usize>,
    pub value: Range<usize>,
}

/// The members of the (already validated) JSON object spanning `obj` in `text`.
/// Returns what it could read; on malformed input it stops early.
pub fn object_members(text: &str, obj: Range<usize>) -> Vec<Member> {
    let bytes = &text.as_bytes()[..obj.end.min(text.len())];
    let mut out = Vec::new();
    let mut i = skip_ws(bytes, obj.start + 1);
    while i < bytes.len() && bytes[i] == b'"' {
        let Some(key_end) = string_end(bytes, i) else {
            break;
        };
        let colon = skip_ws(bytes, key_end);
        if bytes.get(colon) != Some(&b':') {
            break;
        }
        let vstart = skip_ws(bytes, colon + 1);
        let Some(vend) = value_end(bytes, vstart) else {
            break;
        };
        out.push(Member {
            key: i..key_end,
            value: vstart..vend,
        });
        i = skip_ws(bytes, vend);
        if bytes.get(i) == Some(&b',') {
            i = skip_ws(bytes, i + 1);
        } else {
            break;
        }
    }
    out
}

/// The spans of the items of the (already validated) JSON array spanning `arr`.
pub fn array_items(text: &str, arr: Range<usize>) -> Vec<Range<usize>> {
    let bytes = &text.as_bytes()[..arr.end.min(text.len())];
    let mut out = Vec::new();
    let mut i = skip_ws(bytes, arr.start + 1);
    while i < bytes.len() && bytes[i] != b']' {
        let Some(end) = value_end(bytes, i) else {
            break;
        };
        out.push(i..end);
        i = skip_ws(bytes, end);
        if bytes.get(i) == Some(&b',') {
            i = skip_ws(bytes, i + 1);
        } else {
            break;
        }
    }
    out
}

/// Whether the JSON string literal spanning `key` (quotes included) equals `name`.
pub fn key_is(text: &str, key: &Range<usize>, name: &str) -> bool {
    let raw = &text[key.start + 1..key.end - 1];
    if raw.contains('\\') {
        serde_json::from_str::<String>(&text[key.clone()]).is_ok_and(|k| k == name)
    } else {
        raw == name
    }
}

/// Converts serde_json's 1-based line and column inside `slice` into a byte offset.
pub fn line_col_to_offset(slice: &[u8], line: usize, column: usize) -> usize {
    let mut offset = 0;
    for (n, l) in slice.split_inclusive(|&b| b == b'\n').enumerate() {
        if n + 1 == line {
            return (offset + column.saturating_sub(1)).min(slice.len());
        }
        offset += l.len();
    }
    slice.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn braces_inside_strings_do_not_count() {
        let t = r#"{"a": "}{ \" }", "b": [1, {"c": "]"}]} tail"#;
        let end = balanced_end(t.as_bytes(), 0).unwrap();
        assert_eq!(&t[end..], " tail");
        assert_eq!(balanced_end(b"{\"a\": 1", 0), None);
        assert_eq!(balanced_end(b"{\"a\": \"unterminated}", 0), None);
    }

    #[test]
    fn members_and_items_have_exact_spans() {
        let t = r#"{ "x" : 1 , "action":[ {"click":{"index":1}} , 2 ] }"#;
        let m = object_members(t, 0..t.len());
        assert_eq!(m.len(), 2);
        assert!(key_is(t, &m[1].key, "action"));
        assert_eq!(&t[m[0].value.clone()], "1");
        let items = array_items(t, m[1].value.clone());
        assert_eq!(&t[items[0].clone()], r#"{"click":{"index":1}}"#);
        assert_eq!(&t[items[1].clone()], "2");
    }

    #[test]
    fn escaped_keys_are_decoded() {
        let t = r#"{"act\u0069on": 1}"#;
        let m = object_members(t, 0..t.len());
        assert!(key_is(t, &m[0].key, "action"));
    }

    #[test]
    fn line_and_column_map_to_bytes() {
        let s = b"ab\ncde\nf";
        assert_eq!(line_col_to_offset(s, 1, 1), 0);
        assert_eq!(line_col_to_offset(s, 2, 2), 4);
        assert_eq!(line_col_to_offset(s, 3, 1), 7);
        assert_eq!(line_col_to_offset(s, 9, 1), s.len());
    }
}

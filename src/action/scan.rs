//! Byte-level scanning of JSON text embedded in free text: matching braces (robust
//! to braces inside strings) and the spans of an object's members or an array's items.
//!
//! These helpers never allocate and never panic on any input; they work on bytes,
//! and every position they return lies on an ASCII delimiter, hence on a `char`
//! boundary of the original `&str`.

use std::ops::Range;

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
pub fn line_col_to_offset(slice: &str, line: usize, column: usize) -> usize {
    let mut offset = 0;
    for (n, l) in slice.split_inclusive('\n').enumerate() {
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
        let s = "ab\ncde\nf";
        assert_eq!(line_col_to_offset(s, 1, 1), 0);
        assert_eq!(line_col_to_offset(s, 2, 2), 4);
        assert_eq!(line_col_to_offset(s, 3, 1), 7);
        assert_eq!(line_col_to_offset(s, 9, 1), s.len());
    }
}

//! Untrusted text (page titles, DOM text, model output) made safe for a terminal:
//! escape sequences are removed and other control characters made visible.

use std::borrow::Cow;

/// Cleans text for display on one line: escape sequences (CSI, OSC, DCS, ...) are
/// removed, tabs and newlines become spaces, other control characters (C0, DEL,
/// C1) and bidirectional overrides become `�`.
pub fn clean_line(s: &str) -> Cow<'_, str> {
    clean(s, false)
}

/// Like [`clean_line`] but keeps newlines (tabs become four spaces).
pub fn clean_text(s: &str) -> Cow<'_, str> {
    clean(s, true)
}

/// Most bytes of an untrusted value quoted in a message.
pub const EXCERPT_BYTES: usize = 200;

/// `s` for a one-line message: at most [`EXCERPT_BYTES`] bytes of it (cut at a
/// character boundary, with `…` and its whole length when cut), cleaned like
/// [`clean_line`]. A 20 MB task name is quoted as 200 bytes, not echoed whole.
pub fn excerpt(s: &str) -> String {
    if s.len() <= EXCERPT_BYTES {
        return clean_line(s).into_owned();
    }
    let mut end = EXCERPT_BYTES;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}… ({} bytes)", clean_line(&s[..end]), s.len())
}

fn needs_cleaning(c: char) -> bool {
    c.is_control() || is_bidi_control(c)
}

fn is_bidi_control(c: char) -> bool {
    matches!(c, '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}')
}

fn clean(s: &str, keep_newlines: bool) -> Cow<'_, str> {
    if !s.chars().any(needs_cleaning) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\u{1b}' => skip_escape(&mut chars),
            // C1 CSI / OSC / DCS introducers: skip their sequences too.
            '\u{9b}' => skip_until_final(&mut chars),
            '\u{9d}' | '\u{90}' | '\u{9e}' | '\u{9f}' => skip_string(&mut chars),
            '\n' if keep_newlines => out.push('\n'),
            '\r' if keep_newlines => {}
            '\n' | '\r' => out.push(' '),
            '\t' => out.push_str(if keep_newlines { "    " } else { " " }),
            c if needs_cleaning(c) => out.push('\u{FFFD}'),
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

type Chars<'a> = std::iter::Peekable<std::str::Chars<'a>>;

fn skip_escape(chars: &mut Chars) {
    match chars.peek() {
        Some('[') => {
            chars.next();
            skip_until_final(chars);
        }
        Some(']') | Some('P') | Some('X') | Some('^') | Some('_') => {
            chars.next();
            skip_string(chars);
        }
        Some(_) => {
            // Two-character escapes (ESC c, ESC 7, ESC ( B ...).
            let c = chars.next();
            if matches!(c, Some('(' | ')' | '*' | '+' | '#' | '%')) {
                chars.next();
            }
        }
        None => {}
    }
}

fn skip_until_final(chars: &mut Chars) {
    for c in chars.by_ref() {
        if ('\u{40}'..='\u{7e}').contains(&c) {
            break;
        }
    }
}

fn skip_string(chars: &mut Chars) {
    while let Some(c) = chars.next() {
        match c {
            '\u{7}' | '\u{9c}' => break,
            '\u{1b}' => {
                if chars.peek() == Some(&'\\') {
                    chars.next();
                }
                break;
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn removes_escape_sequences_and_controls() {
        assert_eq!(clean_line("plain"), "plain");
        assert_eq!(clean_line("a\u{1b}[31mred\u{1b}[0m b"), "ared b");
        assert_eq!(clean_line("t\u{1b}]0;evil title\u{7}x"), "tx");
        assert_eq!(clean_line("t\u{1b}]8;;http://x\u{1b}\\link"), "tlink");
        assert_eq!(
            clean_line("a\u{0}b\u{7f}c\u{85}d"),
            "a\u{FFFD}b\u{FFFD}c\u{FFFD}d"
        );
        assert_eq!(clean_line("l1\nl2\tx"), "l1 l2 x");
        assert_eq!(clean_text("l1\r\nl2"), "l1\nl2");
        assert_eq!(clean_line("a\u{202E}b"), "a\u{FFFD}b");
    }

    #[test]
    fn excerpts_are_short_and_clean() {
        assert_eq!(excerpt("a\u{1b}[31mb"), "ab");
        let long = "é".repeat(1000);
        let e = excerpt(&long);
        assert!(e.len() <= EXCERPT_BYTES + 20, "{}", e.len());
        assert!(e.ends_with("… (2000 bytes)"), "{e}");
    }

    #[test]
    fn output_never_contains_control_characters() {
        let nasty = "\u{1b}[2J\u{1b}P+q\u{1b}\\\u{9b}31m\u{90}x\u{9c}ok\u{1b}";
        let out = clean_text(nasty);
        assert!(!out.chars().any(|c| c.is_control() && c != '\n'), "{out:?}");
        assert_eq!(out, "ok");
    }
}

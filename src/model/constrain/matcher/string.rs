//! One byte inside a JSON string value: plain characters, escapes (`\n`, `\uXXXX`
//! kept off lone surrogates) and UTF-8 sequences checked byte by byte (no overlong
//! forms, surrogates or code points past U+10FFFF).

use super::frame::{SURROGATE_GUARD, UTF8_E0, UTF8_ED, UTF8_F0, UTF8_F4, UTF8_PENDING};

/// What one byte does to a string.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum StrByte {
    /// Not allowed here.
    Refused,
    /// The closing quote: the string is whole.
    Closed,
    /// The string goes on with `chars` characters, in escape state `esc` (see
    /// [`super::frame::Frame::Str`]).
    Next { chars: u32, esc: u8 },
}

use StrByte::{Closed, Next, Refused};

/// Byte `b` in a string of `chars` characters so far, in escape state `esc`, whose
/// length must end within `min..=max` characters.
pub(super) fn string_byte(chars: u32, esc: u8, b: u8, min: usize, max: Option<usize>) -> StrByte {
    // Whether a string of `n` characters is too long.
    let over = |n: u32| max.is_some_and(|m| n as usize > m);
    match esc {
        0 => plain_byte(chars, b, min, over),
        SURROGATE_GUARD => {
            // `\uD` + 8..F would be a surrogate, which JSON parsers refuse alone.
            if (b'0'..=b'7').contains(&b) {
                Next { chars, esc: 3 }
            } else {
                Refused
            }
        }
        UTF8_E0..=UTF8_F4 => {
            // The second byte after a lead whose range is narrower.
            let (lo, hi, rest) = match esc {
                UTF8_E0 => (0xa0, 0xbf, 1),
                UTF8_ED => (0x80, 0x9f, 1),
                UTF8_F0 => (0x90, 0xbf, 2),
                _ => (0x80, 0x8f, 2),
            };
            if (lo..=hi).contains(&b) {
                Next {
                    chars,
                    esc: UTF8_PENDING + rest,
                }
            } else {
                Refused
            }
        }
        n if n > UTF8_PENDING => {
            // A continuation byte is due.
            if !(0x80..0xc0).contains(&b) {
                return Refused;
            }
            Next {
                chars,
                esc: if n == UTF8_PENDING + 1 { 0 } else { n - 1 },
            }
        }
        1 => escaped_byte(chars, b, over),
        n => hex_digit(chars, n, b, over),
    }
}

/// A byte of plain text: the closing quote (once `min` characters are written), a
/// backslash, or a character's first byte (ASCII, or a UTF-8 lead whose continuation
/// bytes must follow; a stray continuation byte, an invalid lead or a control byte is
/// refused).
fn plain_byte(chars: u32, b: u8, min: usize, over: impl Fn(u32) -> bool) -> StrByte {
    match b {
        b'"' if (chars as usize) < min => Refused,
        b'"' => Closed,
        // An escape is one more character: refuse it at once when the string is full.
        b'\\' if over(chars + 1) => Refused,
        b'\\' => Next { chars, esc: 1 },
        0..=0x1f => Refused,
        _ => {
            let pending = match b {
                0x20..=0x7f => 0,
                0xc2..=0xdf => 1,
                // Leads whose second byte has a narrower range.
                0xe0 => UTF8_E0 - UTF8_PENDING,
                0xed => UTF8_ED - UTF8_PENDING,
                0xf0 => UTF8_F0 - UTF8_PENDING,
                0xf4 => UTF8_F4 - UTF8_PENDING,
                0xe1..=0xef => 2,
                0xf1..=0xf3 => 3,
                _ => return Refused,
            };
            if over(chars + 1) {
                return Refused;
            }
            Next {
                chars: chars + 1,
                esc: if pending == 0 {
                    0
                } else {
                    UTF8_PENDING + pending
                },
            }
        }
    }
}

/// An escape sequence completed: one more character, unless that is too many.
fn one_more(chars: u32, over: impl Fn(u32) -> bool) -> StrByte {
    if over(chars + 1) {
        Refused
    } else {
        Next {
            chars: chars + 1,
            esc: 0,
        }
    }
}

/// The byte after a backslash: a one-letter escape (one character) or `u`.
fn escaped_byte(chars: u32, b: u8, over: impl Fn(u32) -> bool) -> StrByte {
    match b {
        b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => one_more(chars, over),
        b'u' => Next { chars, esc: 5 },
        _ => Refused,
    }
}

/// One of `\uXXXX`'s hex digits, `n - 1` of them still due (with this one); the
/// last one completes the character.
fn hex_digit(chars: u32, n: u8, b: u8, over: impl Fn(u32) -> bool) -> StrByte {
    if !b.is_ascii_hexdigit() {
        return Refused;
    }
    if n == 5 && b.eq_ignore_ascii_case(&b'd') {
        Next {
            chars,
            esc: SURROGATE_GUARD,
        }
    } else if n == 2 {
        one_more(chars, over)
    } else {
        Next { chars, esc: n - 1 }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Feeds `bytes` to a string of at most `max` characters (at least `min`).
    fn feed(bytes: &[u8], min: usize, max: Option<usize>) -> StrByte {
        let (mut chars, mut esc) = (0, 0);
        let mut last = Next { chars, esc };
        for &b in bytes {
            last = string_byte(chars, esc, b, min, max);
            match last {
                Next { chars: c, esc: e } => (chars, esc) = (c, e),
                _ => return last,
            }
        }
        last
    }

    #[test]
    fn characters_escapes_and_utf8_are_counted_and_checked() {
        assert_eq!(feed(b"ab\\n\"", 0, None), Closed);
        assert_eq!(feed("é€😀".as_bytes(), 0, None), Next { chars: 3, esc: 0 });
        assert_eq!(feed(b"\\u00e9\\u20AC", 0, None), Next { chars: 2, esc: 0 });
        // A lone high surrogate, an overlong lead, a stray continuation byte, a
        // control byte, a bad escape.
        assert_eq!(feed(b"\\uD8", 0, None), Refused);
        assert_eq!(feed(b"\xC0\x80", 0, None), Refused);
        assert_eq!(feed(b"\x80", 0, None), Refused);
        assert_eq!(feed(b"a\nb", 0, None), Refused);
        assert_eq!(feed(b"\\x", 0, None), Refused);
        // E0 needs A0..BF next, ED 80..9F (no surrogates), F4 80..8F.
        assert_eq!(feed(b"\xE0\x80", 0, None), Refused);
        assert_eq!(feed(b"\xED\xA0", 0, None), Refused);
        assert_eq!(feed(b"\xF4\x90", 0, None), Refused);
        // Lengths: a closing quote before `min`, a character past `max`.
        assert_eq!(feed(b"a\"", 2, None), Refused);
        assert_eq!(feed(b"ab\"", 2, Some(2)), Closed);
        assert_eq!(feed(b"abc", 0, Some(2)), Refused);
        assert_eq!(feed(b"ab\\n", 0, Some(2)), Refused);
        assert_eq!(feed(b"ab\\u0041", 0, Some(2)), Refused);
    }
}

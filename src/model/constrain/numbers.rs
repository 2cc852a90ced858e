//! JSON numbers under a schema's bounds: which bytes may still become one, and when
//! one is whole.

use super::Node;

/// Whether `buf` is a prefix of a JSON number (an integer if `int`).
pub(super) fn is_prefix(buf: &[u8], int: bool) -> bool {
    // -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
    let mut i = 0;
    if buf.first() == Some(&b'-') {
        i = 1;
    }
    if i == buf.len() {
        return true;
    }
    if buf[i] == b'0' {
        i += 1;
    } else if buf[i].is_ascii_digit() {
        while i < buf.len() && buf[i].is_ascii_digit() {
            i += 1;
        }
    } else {
        return false;
    }
    if i == buf.len() {
        return true;
    }
    if int {
        return false;
    }
    if buf[i] == b'.' {
        i += 1;
        if i == buf.len() {
            return true;
        }
        if !buf[i].is_ascii_digit() {
            return false;
        }
        while i < buf.len() && buf[i].is_ascii_digit() {
            i += 1;
        }
        if i == buf.len() {
            return true;
        }
    }
    if buf[i] == b'e' || buf[i] == b'E' {
        i += 1;
        if i < buf.len() && (buf[i] == b'+' || buf[i] == b'-') {
            i += 1;
        }
        if i == buf.len() {
            return true;
        }
        while i < buf.len() && buf[i].is_ascii_digit() {
            i += 1;
        }
        return i == buf.len();
    }
    false
}

/// The number `buf` spells, where it spells one.
fn value(buf: &[u8]) -> Option<f64> {
    std::str::from_utf8(buf).ok()?.parse().ok()
}

/// Whether `buf` is a whole number `node` accepts (within its bounds).
pub(super) fn complete(node: &Node, buf: &[u8]) -> bool {
    let int = matches!(node, Node::Integer { .. });
    if !is_prefix(buf, int) {
        return false;
    }
    let Some(v) = value(buf) else {
        return false;
    };
    let last = buf.last().copied().unwrap_or(b'-');
    if !last.is_ascii_digit() {
        return false;
    }
    match node {
        Node::Integer { min, max } | Node::Number { min, max } => {
            min.is_none_or(|m| v >= m) && max.is_none_or(|m| v <= m)
        }
        _ => true,
    }
}

/// Whether an integer that starts with `buf` can still end within `node`'s bounds:
/// more digits only move it away from zero, so a prefix already past the bound on
/// its side is dead (numbers with a fraction or exponent are not checked).
pub(super) fn in_reach(node: &Node, buf: &[u8]) -> bool {
    let Node::Integer { min, max } = node else {
        return true;
    };
    let Some(v) = value(buf) else {
        return true;
    };
    if buf.first() == Some(&b'-') {
        min.is_none_or(|m| v >= m)
    } else {
        max.is_none_or(|m| v <= m)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefixes_whole_numbers_and_bounds() {
        for p in ["", "-", "0", "12", "1.", "1.5", "1e", "1e+", "-0.5E-3"] {
            assert!(is_prefix(p.as_bytes(), false), "{p}");
        }
        for p in ["01", "+1", "1..", ".5", "1e5.", "a"] {
            assert!(!is_prefix(p.as_bytes(), false), "{p}");
        }
        assert!(!is_prefix(b"1.", true), "an integer has no fraction");
        let index = Node::Integer {
            min: Some(0.0),
            max: Some(40.0),
        };
        assert!(complete(&index, b"40") && complete(&index, b"0"));
        // Past the bound, not a whole number yet, or not an integer.
        for p in ["41", "-1", "-", "", "4.0"] {
            assert!(!complete(&index, p.as_bytes()), "{p}");
        }
        let any = Node::Number {
            min: None,
            max: None,
        };
        assert!(complete(&any, b"-2.5e3") && !complete(&any, b"2."));
        // More digits only grow a number's size: 5 may become 5, 50 may not.
        assert!(in_reach(&index, b"5") && !in_reach(&index, b"50"));
        assert!(!in_reach(&index, b"-3"));
        assert!(in_reach(&any, b"99999"), "no bounds to leave");
    }
}

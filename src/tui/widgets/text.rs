//! Untrusted text turned into ratatui lines, always through the sanitizer.

use crate::util::sanitize::{clean_line, clean_text};
use ratatui::style::Style;
use ratatui::text::{Line, Span};

/// One sanitized line of untrusted text.
pub fn line(s: &str) -> String {
    clean_line(s).into_owned()
}

/// A sanitized line truncated to `max` characters (with `…`).
pub fn trunc(s: &str, max: usize) -> String {
    let clean = clean_line(s);
    if clean.chars().count() <= max {
        clean.into_owned()
    } else {
        let mut out: String = clean.chars().take(max.saturating_sub(1)).collect();
        out.push('…');
        out
    }
}

/// Sanitized single-line text cut to `max` characters from the left, keeping the end
/// (`…login-user/s3`): ids that share a prefix differ at their end.
pub fn trunc_start(s: &str, max: usize) -> String {
    let clean = clean_line(s);
    let n = clean.chars().count();
    if n <= max {
        clean.into_owned()
    } else {
        let keep = max.saturating_sub(1);
        let mut out = String::from("…");
        out.extend(clean.chars().skip(n - keep));
        out
    }
}

/// Sanitized multi-line text as lines in `style`.
pub fn lines(s: &str, style: Style) -> Vec<Line<'static>> {
    clean_text(s)
        .lines()
        .map(|l| Line::from(Span::styled(l.to_string(), style)))
        .collect()
}

/// `label: value` with the value sanitized.
pub fn field(label: &str, value: &str, label_style: Style, value_style: Style) -> Line<'static> {
    Line::from(vec![
        Span::styled(format!("{label}: "), label_style),
        Span::styled(line(value), value_style),
    ])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trunc_start_keeps_the_distinctive_end() {
        assert_eq!(trunc_start("miniwob/login-user/s3", 12), "…gin-user/s3");
        assert_eq!(trunc_start("miniwob/login-user/s3", 12).chars().count(), 12);
        assert_eq!(trunc_start("short", 12), "short");
        assert_eq!(trunc_start("a\u{1b}[31mb", 12), trunc("a\u{1b}[31mb", 12));
    }
}

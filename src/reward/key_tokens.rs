//! Key tokens: the numbers, dates and times in a text, in a canonical form, so that
//! `May 1, 2024`, `2024-05-01` and `05/01/2024` compare equal and `1,299` equals
//! `1299`, while a changed digit is always seen.
//!
//! Canonical forms: dates `YYYY-MM-DD` (or `YYYY-MM`, or `--MM-DD` without a year),
//! times `HH:MM` (24 h), numbers without thousands separators and without trailing
//! fractional zeros (`3.50` → `3.5`, leading zeros kept since `02139` is a code).
//!
//! Numeric dates with `/` or `-` read month first (US) unless the first part is over 12;
//! with `.` they read day first (European) unless the second part is over 12.
//! Two-digit years are 20YY.

use regex::Regex;
use std::sync::LazyLock;

const MONTHS: &str = "(?:jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|sep(?:t(?:ember)?)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)";

/// Every key token in one left-to-right pass. At one position the alternatives are
/// tried in this order, so dates win over bare numbers; the named groups say which
/// alternative matched.
///
/// ASCII mode (`(?-u)`: ASCII `\b`, `\d`, `\s` and case folding) is right because the
/// text is NFKC-normalized first (full-width digits and no-break spaces become
/// ASCII), and it keeps the regex on its fast DFA path.
static ANY: LazyLock<Regex> = LazyLock::new(|| {
    let alts = [
        // 2024-05-01
        r"\b(?P<iy>\d{4})[-/.](?P<im>\d{1,2})[-/.](?P<id>\d{1,2})\b".to_string(),
        // 05/01/2024, 1.5.2024, 5-1-24
        r"\b(?P<na>\d{1,2})(?P<ns>[-/.])(?P<nb>\d{1,2})[-/.](?P<ny>\d{4}|\d{2})\b".to_string(),
        // May 1, 2024 / May 1st
        format!(
            r"\b(?P<m1>{MONTHS})\.?\s+(?P<d1>\d{{1,2}})(?:st|nd|rd|th)?\b(?:,?\s+(?P<y1>\d{{4}})\b)?"
        ),
        // 1 May 2024 / 1st of May
        format!(
            r"\b(?P<d2>\d{{1,2}})(?:st|nd|rd|th)?\s+(?:of\s+)?(?P<m2>{MONTHS})\b\.?(?:,?\s+(?P<y2>\d{{4}})\b)?"
        ),
        // May 2024
        format!(r"\b(?P<m3>{MONTHS})\.?,?\s+(?P<y3>\d{{4}})\b"),
        // 7:30 pm
        r"\b(?P<th>\d{1,2}):(?P<tm>\d{2})(?::\d{2})?(?:\s*(?P<ap>[ap])\.?m\b\.?)?".to_string(),
        // 1,299.00
        r"(?P<num>\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?)".to_string(),
    ];
    let joined: Vec<String> = alts.iter().map(|a| format!("(?:{a})")).collect();
    let p = format!("(?i-u){}", joined.join("|"));
    // The pattern is a constant of this file; a typo is caught by the unit tests.
    Regex::new(&p).unwrap_or_else(|e| panic!("key token pattern: {e}"))
});

fn month_number(name: &str) -> u32 {
    match name.get(..3).map(str::to_ascii_lowercase).as_deref() {
        Some("jan") => 1,
        Some("feb") => 2,
        Some("mar") => 3,
        Some("apr") => 4,
        Some("may") => 5,
        Some("jun") => 6,
        Some("jul") => 7,
        Some("aug") => 8,
        Some("sep") => 9,
        Some("oct") => 10,
        Some("nov") => 11,
        _ => 12,
    }
}

fn year(s: &str) -> Option<u32> {
    let y: u32 = s.parse().ok()?;
    Some(if s.len() == 2 { 2000 + y } else { y })
}

fn date(y: Option<u32>, m: u32, d: Option<u32>) -> Option<String> {
    if !(1..=12).contains(&m) || d.is_some_and(|d| !(1..=31).contains(&d)) {
        return None;
    }
    Some(match (y, d) {
        (Some(y), Some(d)) => format!("{y:04}-{m:02}-{d:02}"),
        (Some(y), None) => format!("{y:04}-{m:02}"),
        (None, Some(d)) => format!("--{m:02}-{d:02}"),
        (None, None) => return None,
    })
}

fn canonical_number(s: &str) -> String {
    let mut n: String = s.chars().filter(|&c| c != ',').collect();
    if n.contains('.') {
        while n.ends_with('0') {
            n.pop();
        }
        if n.ends_with('.') {
            n.pop();
        }
    }
    n
}

/// The canonical token of one match: a date, time or number; `None` for a date or
/// time that is not valid (month 13), whose numbers are then taken one by one.
fn classify(c: &regex::Captures) -> Option<String> {
    let num = |k: &str| c.name(k).and_then(|m| m.as_str().parse::<u32>().ok());
    let text = |k: &str| c.name(k).map_or("", |m| m.as_str());
    if let Some(n) = c.name("num") {
        return Some(canonical_number(n.as_str()));
    }
    if c.name("iy").is_some() {
        return date(num("iy"), num("im")?, num("id"));
    }
    if c.name("na").is_some() {
        let (a, b) = (num("na")?, num("nb")?);
        let y = c.name("ny").and_then(|m| year(m.as_str()));
        let day_first = if text("ns") == "." { b <= 12 } else { a > 12 };
        let (mo, d) = if day_first { (b, a) } else { (a, b) };
        return date(y, mo, Some(d));
    }
    if c.name("m1").is_some() {
        let y = c.name("y1").and_then(|m| year(m.as_str()));
        return date(y, month_number(text("m1")), num("d1"));
    }
    if c.name("m2").is_some() {
        let y = c.name("y2").and_then(|m| year(m.as_str()));
        return date(y, month_number(text("m2")), num("d2"));
    }
    if c.name("m3").is_some() {
        let y = c.name("y3").and_then(|m| year(m.as_str()));
        return date(y, month_number(text("m3")), None);
    }
    let (mut h, mi) = (num("th")?, num("tm")?);
    match text("ap").to_ascii_lowercase().as_str() {
        "p" if h < 12 => h += 12,
        "a" if h == 12 => h = 0,
        _ => {}
    }
    (h < 24 && mi < 60).then(|| format!("{h:02}:{mi:02}"))
}

/// The numbers inside a text (for a date-like match that is no valid date).
fn numbers_in(s: &str, out: &mut Vec<String>) {
    for part in s.split(|c: char| !c.is_ascii_digit() && c != '.' && c != ',') {
        let part = part.trim_matches(|c| c == '.' || c == ',');
        if !part.is_empty() {
            out.extend(
                part.split(['.', ','])
                    .filter(|p| !p.is_empty())
                    .map(str::to_owned),
            );
        }
    }
}

/// The key tokens of `text`, canonical, sorted and without duplicates.
pub fn key_tokens(text: &str) -> Vec<String> {
    if !text.bytes().any(|b| b.is_ascii_digit()) && text.is_ascii() {
        return Vec::new();
    }
    let text = super::normalize::nfkc(text);
    let mut out = Vec::new();
    for c in ANY.captures_iter(&text) {
        match classify(&c) {
            Some(tok) => out.push(tok),
            None => numbers_in(c.get(0).map_or("", |m| m.as_str()), &mut out),
        }
    }
    out.sort_unstable();
    out.dedup();
    out
}

/// Whether every key token of `needle` is among those of `hay` (both canonical, sorted).
pub fn all_present(needle: &[String], hay: &[String]) -> bool {
    needle.iter().all(|t| hay.binary_search(t).is_ok())
}

/// `[a, b]` for reasons.
pub fn show(tokens: &[String]) -> String {
    format!("[{}]", tokens.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kt(s: &str) -> Vec<String> {
        key_tokens(s)
    }

    #[test]
    fn dates_in_common_formats_are_equal() {
        let iso = kt("flights on 2024-05-01");
        assert_eq!(iso, ["2024-05-01"]);
        assert_eq!(kt("flights on May 1, 2024"), iso);
        assert_eq!(kt("flights on 1st May 2024"), iso);
        assert_eq!(kt("flights on 05/01/2024"), iso);
        assert_eq!(kt("flights on 1.5.2024"), iso);
        assert_eq!(kt("flights on 5/1/24"), iso);
        assert_eq!(kt("13/05/2024"), ["2024-05-13"]);
        assert_eq!(kt("Sept 2024"), ["2024-09"]);
        assert_eq!(kt("June 3"), ["--06-03"]);
        assert_ne!(kt("May 2, 2024"), iso);
    }

    #[test]
    fn numbers_and_times_are_canonical() {
        assert_eq!(kt("$1,299.00 for 2 people"), ["1299", "2"]);
        assert_eq!(kt("3.50"), kt("3.5"));
        assert_eq!(kt("ZIP 02139"), ["02139"]);
        assert_eq!(kt("at 7:30 pm"), ["19:30"]);
        assert_eq!(kt("at 19:30"), ["19:30"]);
        assert_eq!(kt("１２ items"), ["12"]);
        assert!(kt("no numbers here").is_empty());
        assert_ne!(kt("iphone 15"), kt("iphone 14"));
    }

    #[test]
    fn invalid_dates_fall_back_to_numbers() {
        // Month 13 in both readings is no date: its numbers are still key tokens.
        assert_eq!(kt("13/13/2024"), ["13", "2024"]);
    }

    #[test]
    fn subset_check() {
        assert!(all_present(&kt("12"), &kt("12 and 13")));
        assert!(!all_present(&kt("12 and 13"), &kt("12")));
    }
}

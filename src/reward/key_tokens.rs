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

const MONTHS: &str = "(jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|sep(?:t(?:ember)?)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)";

fn re(p: &str) -> Regex {
    let p = format!("(?-u){p}");
    // The patterns are constants of this file; a typo is caught by the unit tests.
    Regex::new(&p).unwrap_or_else(|e| panic!("key token pattern {p}: {e}"))
}

// ASCII mode (`(?-u)`: ASCII `\b`, `\d`, `\s` and case folding): the text is
// NFKC-normalized first (full-width digits and no-break spaces become ASCII), and
// ASCII assertions keep the regexes on their fast DFA path.

const ISO_P: &str = r"\b(\d{4})[-/.](\d{1,2})[-/.](\d{1,2})\b";
const NUM_DATE_P: &str = r"\b(\d{1,2})([-/.])(\d{1,2})[-/.](\d{4}|\d{2})\b";
const TIME_P: &str = r"\b(\d{1,2}):(\d{2})(?::\d{2})?(?:\s*([aApP])\.?[mM]\b\.?)?";
const NUMBER_P: &str = r"\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?";

fn month_day_year_p() -> String {
    format!(r"(?i)\b{MONTHS}\.?\s+(\d{{1,2}})(?:st|nd|rd|th)?\b(?:,?\s+(\d{{4}})\b)?")
}
fn day_month_year_p() -> String {
    format!(r"(?i)\b(\d{{1,2}})(?:st|nd|rd|th)?\s+(?:of\s+)?{MONTHS}\b\.?(?:,?\s+(\d{{4}})\b)?")
}
fn month_year_p() -> String {
    format!(r"(?i)\b{MONTHS}\.?,?\s+(\d{{4}})\b")
}

/// Anchored versions, to classify one match of [`ANY`].
fn anchored(p: &str) -> Regex {
    re(&format!("^(?:{p})$"))
}

static ISO_DATE: LazyLock<Regex> = LazyLock::new(|| anchored(ISO_P));
static NUM_DATE: LazyLock<Regex> = LazyLock::new(|| anchored(NUM_DATE_P));
static MONTH_DAY_YEAR: LazyLock<Regex> = LazyLock::new(|| anchored(&month_day_year_p()));
static DAY_MONTH_YEAR: LazyLock<Regex> = LazyLock::new(|| anchored(&day_month_year_p()));
static MONTH_YEAR: LazyLock<Regex> = LazyLock::new(|| anchored(&month_year_p()));
static TIME: LazyLock<Regex> = LazyLock::new(|| anchored(TIME_P));
static NUMBER: LazyLock<Regex> = LazyLock::new(|| re(NUMBER_P));

/// Every key token candidate in one left-to-right pass; at one position the
/// alternatives are tried in this order, so dates win over bare numbers.
static ANY: LazyLock<Regex> = LazyLock::new(|| {
    let strip = |p: String| p.replacen("(?i)", "", 1);
    let alts = [
        ISO_P.to_string(),
        NUM_DATE_P.to_string(),
        strip(month_day_year_p()),
        strip(day_month_year_p()),
        strip(month_year_p()),
        TIME_P.to_string(),
        NUMBER_P.to_string(),
    ];
    let joined: Vec<String> = alts.iter().map(|a| format!("(?:{a})")).collect();
    re(&format!("(?i){}", joined.join("|")))
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

/// The canonical date or time of one match, if it is a valid one.
fn classify(m: &str) -> Option<String> {
    let num = |c: Option<regex::Match>| c.and_then(|m| m.as_str().parse::<u32>().ok());
    if let Some(c) = ISO_DATE.captures(m) {
        return date(num(c.get(1)), num(c.get(2))?, num(c.get(3)));
    }
    if let Some(c) = NUM_DATE.captures(m) {
        let (a, b) = (num(c.get(1))?, num(c.get(3))?);
        let y = c.get(4).and_then(|m| year(m.as_str()));
        let day_first = if c.get(2).is_some_and(|s| s.as_str() == ".") {
            b <= 12
        } else {
            a > 12
        };
        let (mo, d) = if day_first { (b, a) } else { (a, b) };
        return date(y, mo, Some(d));
    }
    if let Some(c) = MONTH_DAY_YEAR.captures(m) {
        let mo = month_number(c.get(1).map_or("", |m| m.as_str()));
        let y = c.get(3).and_then(|m| year(m.as_str()));
        return date(y, mo, num(c.get(2)));
    }
    if let Some(c) = DAY_MONTH_YEAR.captures(m) {
        let mo = month_number(c.get(2).map_or("", |m| m.as_str()));
        let y = c.get(3).and_then(|m| year(m.as_str()));
        return date(y, mo, num(c.get(1)));
    }
    if let Some(c) = MONTH_YEAR.captures(m) {
        let mo = month_number(c.get(1).map_or("", |m| m.as_str()));
        let y = c.get(2).and_then(|m| year(m.as_str()));
        return date(y, mo, None);
    }
    if let Some(c) = TIME.captures(m) {
        let (mut h, mi) = (num(c.get(1))?, num(c.get(2))?);
        match c.get(3).map(|m| m.as_str().to_ascii_lowercase()).as_deref() {
            Some("p") if h < 12 => h += 12,
            Some("a") if h == 12 => h = 0,
            _ => {}
        }
        return (h < 24 && mi < 60).then(|| format!("{h:02}:{mi:02}"));
    }
    None
}

/// The key tokens of `text`, canonical, sorted and without duplicates.
pub fn key_tokens(text: &str) -> Vec<String> {
    if !text.bytes().any(|b| b.is_ascii_digit()) && text.is_ascii() {
        return Vec::new();
    }
    let text = super::normalize::nfkc(text);
    let mut out = Vec::new();
    for m in ANY.find_iter(&text) {
        let s = m.as_str();
        // A bare number is its own token; anything else is a date or time, or (when
        // it is not a valid one, e.g. month 13) the numbers in it.
        let digits_only = s.bytes().all(|b| b.is_ascii_digit());
        match (!digits_only).then(|| classify(s)).flatten() {
            Some(tok) => out.push(tok),
            None => out.extend(NUMBER.find_iter(s).map(|n| canonical_number(n.as_str()))),
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

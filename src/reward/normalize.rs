//! Text normalization for the rubric: Unicode NFKC, case folding, collapsed
//! whitespace, surrounding punctuation stripped; plus word tokens, Jaccard
//! similarity of token sets and bag-of-words token F1.
//!
//! Case folding is `char::to_lowercase` plus the full-folding cases that lowercase
//! misses and that occur in web text (`ß` → `ss`, final `ς` → `σ`); NFKC has already
//! mapped compatibility forms (full-width letters, ligatures, `ſ`).

use std::borrow::Cow;
use unicode_normalization::{IsNormalized, UnicodeNormalization, is_nfkc_quick};

/// NFKC of `s` (borrowed when `s` is already in NFKC, as ASCII and most web text is).
pub fn nfkc(s: &str) -> Cow<'_, str> {
    if s.is_ascii() || is_nfkc_quick(s.chars()) == IsNormalized::Yes {
        Cow::Borrowed(s)
    } else {
        Cow::Owned(s.nfkc().collect())
    }
}

/// Whether `c` counts as punctuation to strip around text and tokens: ASCII
/// punctuation and the common Unicode quotes, dashes, ellipsis and CJK/Spanish marks.
pub fn is_punct(c: char) -> bool {
    c.is_ascii_punctuation()
        || matches!(
            c,
            '\u{2010}'..='\u{2027}'
                | '\u{00A1}'
                | '\u{00A7}'
                | '\u{00AB}'
                | '\u{00B6}'
                | '\u{00B7}'
                | '\u{00BB}'
                | '\u{00BF}'
                | '\u{2030}'..='\u{205E}'
                | '\u{3001}'..='\u{3003}'
                | '\u{3008}'..='\u{3011}'
        )
}

fn fold_into(c: char, out: &mut String) {
    match c {
        'ß' | 'ẞ' => out.push_str("ss"),
        'ς' => out.push('σ'),
        c if c.is_ascii() => out.push(c.to_ascii_lowercase()),
        c => out.extend(c.to_lowercase()),
    }
}

/// NFKC + case fold + whitespace collapsed to single spaces + surrounding
/// punctuation (and whitespace) stripped.
pub fn normalize_text(s: &str) -> String {
    let n = nfkc(s);
    let mut out = String::with_capacity(n.len());
    let mut space = false;
    for c in n.chars() {
        if c.is_whitespace() {
            space = !out.is_empty();
            continue;
        }
        if space {
            out.push(' ');
            space = false;
        }
        fold_into(c, &mut out);
    }
    let trimmed = out.trim_matches(|c: char| is_punct(c) || c.is_whitespace());
    if trimmed.len() == out.len() {
        out
    } else {
        trimmed.to_string()
    }
}

/// The normalized words of `s`, each with its surrounding punctuation stripped
/// (inner punctuation such as in `3.5` or `e-mail` is kept); empty words dropped.
pub fn tokens(s: &str) -> Vec<String> {
    tokens_of_normalized(&normalize_text(s))
}

/// [`tokens`] of a text already passed through [`normalize_text`].
pub fn tokens_of_normalized(normalized: &str) -> Vec<String> {
    normalized
        .split(' ')
        .map(|w| w.trim_matches(is_punct))
        .filter(|w| !w.is_empty())
        .map(str::to_owned)
        .collect()
}

fn sorted_set(t: &[String]) -> Vec<&str> {
    let mut v: Vec<&str> = t.iter().map(String::as_str).collect();
    v.sort_unstable();
    v.dedup();
    v
}

/// Whether the two token lists hold the same set of tokens.
pub fn same_token_set(a: &[String], b: &[String]) -> bool {
    sorted_set(a) == sorted_set(b)
}

/// Jaccard similarity of the token sets: |A ∩ B| / |A ∪ B| (1.0 when both are empty).
pub fn jaccard(a: &[String], b: &[String]) -> f64 {
    let (a, b) = (sorted_set(a), sorted_set(b));
    if a.is_empty() && b.is_empty() {
        return 1.0;
    }
    let inter = a.iter().filter(|t| b.binary_search(t).is_ok()).count();
    inter as f64 / (a.len() + b.len() - inter) as f64
}

/// Bag-of-words F1 of `candidate` against `reference` (SQuAD-style): 1.0 when both
/// are empty, 0.0 when only one is.
pub fn token_f1(candidate: &[String], reference: &[String]) -> f64 {
    if candidate.is_empty() || reference.is_empty() {
        return if candidate.is_empty() && reference.is_empty() {
            1.0
        } else {
            0.0
        };
    }
    let mut rest: Vec<&str> = reference.iter().map(String::as_str).collect();
    rest.sort_unstable();
    let mut common = 0usize;
    for t in candidate {
        if let Ok(i) = rest.binary_search(&t.as_str()) {
            rest.remove(i);
            common += 1;
        }
    }
    if common == 0 {
        return 0.0;
    }
    let p = common as f64 / candidate.len() as f64;
    let r = common as f64 / reference.len() as f64;
    2.0 * p * r / (p + r)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn toks(s: &str) -> Vec<String> {
        tokens(s)
    }

    #[test]
    fn normalization_folds_width_case_space_and_punctuation() {
        assert_eq!(normalize_text("  Ｈｅｌｌｏ,   WORLD!! "), "hello, world");
        assert_eq!(normalize_text("Straße"), "strasse");
        assert_eq!(normalize_text("«Café»"), "café");
        assert_eq!(normalize_text("ﬁle\u{00A0}name"), "file name");
        assert_eq!(normalize_text("..."), "");
    }

    #[test]
    fn tokens_strip_outer_punctuation_only() {
        assert_eq!(toks("Price: $3.50, (approx.)"), ["price", "3.50", "approx"]);
    }

    #[test]
    fn jaccard_and_f1_borders() {
        assert_eq!(jaccard(&toks("a b c d"), &toks("a b c d e")), 0.8);
        assert_eq!(jaccard(&toks("a b"), &toks("c d")), 0.0);
        assert_eq!(jaccard(&[], &[]), 1.0);
        assert!((token_f1(&toks("a b"), &toks("a b c d")) - 2.0 / 3.0).abs() < 1e-9);
        assert_eq!(token_f1(&toks("x"), &toks("y")), 0.0);
        assert!(same_token_set(&toks("b a a"), &toks("A B")));
    }
}

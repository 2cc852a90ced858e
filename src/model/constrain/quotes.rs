//! A second rule for constrained decoding: every quoted span inside the output's JSON
//! strings (`\"…\"`) is one of a set of values. Policies quote the values they act
//! on ("click the \"Cancel\" button", "type \"Tora\""); holding those spans to the
//! instruction's quoted values keeps the reasoning from naming a value the action
//! then copies.

use std::sync::Arc;

/// Where in a quoted span the output is.
#[derive(Debug, Clone, PartialEq, Eq)]
enum State {
    Outside,
    /// After a `\` outside a quoted span.
    OutsideEscape,
    /// Inside a span: its bytes so far (as they stand in the JSON text).
    Inside(Vec<u8>),
    /// After a `\` inside a span.
    InsideEscape(Vec<u8>),
}

/// The matcher of the quoted-span rule; feed it the output bytes.
#[derive(Debug, Clone)]
pub struct QuoteGuard {
    /// The allowed values as they stand in a JSON string (escaped).
    values: Arc<Vec<Vec<u8>>>,
    state: State,
}

impl QuoteGuard {
    /// A guard that lets quoted spans be only `values` (`None` when there are none:
    /// no quoting is then held to anything).
    pub fn new(values: &[String]) -> Option<QuoteGuard> {
        let values: Vec<Vec<u8>> = values
            .iter()
            .filter(|v| !v.is_empty())
            .map(|v| {
                let json = serde_json::to_string(v).unwrap_or_default();
                json.as_bytes()[1..json.len() - 1].to_vec()
            })
            .collect();
        (!values.is_empty()).then(|| QuoteGuard {
            values: Arc::new(values),
            state: State::Outside,
        })
    }

    /// The guard after `bytes`, if they keep every quoted span a prefix of a value
    /// (and every closed span a whole value).
    pub fn after(&self, bytes: &[u8]) -> Option<QuoteGuard> {
        let mut state = self.state.clone();
        for &b in bytes {
            state = match state {
                State::Outside if b == b'\\' => State::OutsideEscape,
                State::Outside => State::Outside,
                State::OutsideEscape if b == b'"' => State::Inside(Vec::new()),
                State::OutsideEscape => State::Outside,
                State::Inside(buf) if b == b'\\' => State::InsideEscape(buf),
                State::Inside(mut buf) => {
                    buf.push(b);
                    if !self.values.iter().any(|v| v.starts_with(&buf)) {
                        return None;
                    }
                    State::Inside(buf)
                }
                State::InsideEscape(buf) if b == b'"' => {
                    if !self.values.contains(&buf) {
                        return None;
                    }
                    State::Outside
                }
                State::InsideEscape(mut buf) => {
                    buf.extend([b'\\', b]);
                    if !self.values.iter().any(|v| v.starts_with(&buf)) {
                        return None;
                    }
                    State::Inside(buf)
                }
            };
        }
        Some(QuoteGuard {
            values: Arc::clone(&self.values),
            state,
        })
    }

    /// Feeds `bytes`; false (and the guard unchanged) when they break the rule.
    pub fn advance(&mut self, bytes: &[u8]) -> bool {
        match self.after(bytes) {
            Some(next) => {
                *self = next;
                true
            }
            None => false,
        }
    }

    /// Forgets an open span (when decoding had to leave the rule to go on).
    pub fn reset(&mut self) {
        self.state = State::Outside;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn accepts(g: &QuoteGuard, text: &str) -> bool {
        g.after(text.as_bytes()).is_some()
    }

    #[test]
    fn quoted_spans_must_be_values_and_other_text_is_free() {
        let g = QuoteGuard::new(&["Tora".into(), "x Y2".into()]).unwrap();
        assert!(accepts(
            &g,
            r#"{"thinking":"type \"Tora\" then \"x Y2\"","a":[1]}"#
        ));
        assert!(accepts(
            &g,
            r#"{"memory":"no quotes at all \\ or \n escapes"}"#
        ));
        // A prefix is fine while decoding; a wrong letter or an early close is not.
        assert!(accepts(&g, r#"{"next_goal":"type \"To"#));
        assert!(!accepts(&g, r#"{"next_goal":"type \"Tx"#));
        assert!(!accepts(&g, r#"{"next_goal":"type \"To\" now"#));
        assert!(!accepts(&g, r#"{"next_goal":"type \"Miguelita\""#));
        // An escaped backslash before a plain quote ends the string, opens nothing.
        assert!(accepts(&g, r#"{"memory":"a\\","next_goal":"b"}"#));
    }

    #[test]
    fn values_are_compared_as_they_stand_in_json() {
        let g = QuoteGuard::new(&["a\\b".into()]).unwrap();
        assert!(accepts(&g, r#""say \"a\\b\"""#));
        assert!(!accepts(&g, r#""say \"ab\"""#));
        assert!(QuoteGuard::new(&[]).is_none());
        assert!(QuoteGuard::new(&[String::new()]).is_none());
    }

    #[test]
    fn advance_keeps_the_guard_on_a_refused_byte_and_reset_leaves_a_span() {
        let mut g = QuoteGuard::new(&["No".into()]).unwrap();
        assert!(g.advance(br#""click \"N"#));
        assert!(!g.advance(b"x"));
        assert!(g.advance(br#"o\" now""#));
        assert!(g.advance(br#" \"N"#));
        g.reset();
        assert!(g.advance(b"anything"));
    }
}

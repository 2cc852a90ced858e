//! Duplicate keys in JSON objects. serde_json keeps the last of two equal keys
//! without a word; [`first_duplicate_key`] finds the first such key and where it is,
//! so importers and `validate` can report it instead of silently losing a value.

use serde::de::{DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use std::cell::RefCell;
use std::collections::HashSet;
use std::fmt;

/// A key that appears twice in one object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DuplicateKey {
    /// Dotted path of the object holding it (`history[3].model_output`), empty at the top.
    pub path: String,
    pub key: String,
}

impl fmt::Display for DuplicateKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let at = if self.path.is_empty() {
            "the top-level object"
        } else {
            &self.path
        };
        write!(
            f,
            "duplicate key `{}` in {at} (JSON keeps only the last value)",
            super::sanitize::clean_line(&self.key)
        )
    }
}

enum Seg {
    Key(String),
    Index(usize),
}

#[derive(Default)]
struct State {
    path: Vec<Seg>,
    found: Option<DuplicateKey>,
}

impl State {
    fn path_string(&self) -> String {
        let mut s = String::new();
        for seg in &self.path {
            match seg {
                Seg::Key(k) => {
                    if !s.is_empty() {
                        s.push('.');
                    }
                    s.push_str(k);
                }
                Seg::Index(i) => s.push_str(&format!("[{i}]")),
            }
        }
        s
    }
}

struct Walk<'a>(&'a RefCell<State>);

impl<'de> DeserializeSeed<'de> for Walk<'_> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Walk<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E>(self, _: bool) -> Result<(), E> {
        Ok(())
    }
    fn visit_i64<E>(self, _: i64) -> Result<(), E> {
        Ok(())
    }
    fn visit_u64<E>(self, _: u64) -> Result<(), E> {
        Ok(())
    }
    fn visit_f64<E>(self, _: f64) -> Result<(), E> {
        Ok(())
    }
    fn visit_str<E>(self, _: &str) -> Result<(), E> {
        Ok(())
    }
    fn visit_unit<E>(self) -> Result<(), E> {
        Ok(())
    }
    fn visit_none<E>(self) -> Result<(), E> {
        Ok(())
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let mut i = 0;
        loop {
            self.0.borrow_mut().path.push(Seg::Index(i));
            let more = seq.next_element_seed(Walk(self.0))?;
            self.0.borrow_mut().path.pop();
            if more.is_none() {
                return Ok(());
            }
            i += 1;
        }
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let mut seen = HashSet::new();
        while let Some(key) = map.next_key::<String>()? {
            {
                let mut st = self.0.borrow_mut();
                if st.found.is_none() && seen.contains(&key) {
                    st.found = Some(DuplicateKey {
                        path: st.path_string(),
                        key: key.clone(),
                    });
                }
                st.path.push(Seg::Key(key.clone()));
            }
            seen.insert(key);
            map.next_value_seed(Walk(self.0))?;
            self.0.borrow_mut().path.pop();
        }
        Ok(())
    }
}

/// The first duplicate key of the JSON document `bytes` (in document order), or
/// `None`; a document that is not JSON gives serde_json's error.
pub fn first_duplicate_key(bytes: &[u8]) -> Result<Option<DuplicateKey>, serde_json::Error> {
    let state = RefCell::new(State::default());
    let mut de = serde_json::Deserializer::from_slice(bytes);
    Walk(&state).deserialize(&mut de)?;
    de.end()?;
    Ok(state.into_inner().found)
}

/// Like [`first_duplicate_key`] with a custom error for documents that are not JSON.
pub fn check_no_duplicate_keys(bytes: &[u8]) -> Result<(), String> {
    match first_duplicate_key(bytes) {
        Ok(None) => Ok(()),
        Ok(Some(d)) => Err(d.to_string()),
        Err(e) => Err(format!("not JSON: {e}")),
    }
}

/// A JSON value for a message: its compact text, at most
/// [`super::sanitize::EXCERPT_BYTES`] bytes of it (serialization stops there, so a
/// 50 MB value costs no more than a small one), cleaned of control characters.
pub fn excerpt_value(v: &serde_json::Value) -> String {
    struct Capped(Vec<u8>);
    impl std::io::Write for Capped {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            let room = (super::sanitize::EXCERPT_BYTES + 1).saturating_sub(self.0.len());
            if room == 0 {
                return Err(std::io::Error::other("excerpt full"));
            }
            let n = buf.len().min(room);
            self.0.extend_from_slice(&buf[..n]);
            Ok(n)
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut w = Capped(Vec::new());
    let cut = serde_json::to_writer(&mut w, v).is_err();
    let mut bytes = w.0;
    if cut || bytes.len() > super::sanitize::EXCERPT_BYTES {
        bytes.truncate(super::sanitize::EXCERPT_BYTES);
        let text = String::from_utf8_lossy(&bytes);
        let text = text.trim_end_matches('\u{FFFD}');
        return format!("{}…", super::sanitize::clean_line(text));
    }
    super::sanitize::clean_line(&String::from_utf8_lossy(&bytes)).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_duplicate_is_found_with_its_path() {
        let d = first_duplicate_key(br#"{"a": [{"x": 1}, {"y": {"k": 1, "k": 2}}], "a": 0}"#)
            .unwrap()
            .unwrap();
        assert_eq!(d.path, "a[1].y");
        assert_eq!(d.key, "k");
        assert!(d.to_string().contains("duplicate key `k` in a[1].y"));
        let d = first_duplicate_key(br#"{"b": 1, "b": 2}"#)
            .unwrap()
            .unwrap();
        assert_eq!((d.path.as_str(), d.key.as_str()), ("", "b"));
        // Escaped spellings of one key are the same key.
        assert!(
            first_duplicate_key(br#"{"k": 1, "\u006b": 2}"#)
                .unwrap()
                .is_some()
        );
        assert!(
            first_duplicate_key(br#"{"k": {"k": 1}, "j": [1, {"k": 2}]}"#)
                .unwrap()
                .is_none()
        );
        assert!(first_duplicate_key(b"{\"k\": 1} x").is_err());
    }

    #[test]
    fn value_excerpts_stop_early() {
        let big = serde_json::json!({"k": "x".repeat(1 << 20)});
        let e = super::excerpt_value(&big);
        assert!(
            e.len() <= 210 && e.starts_with("{\"k\":\"xxx") && e.ends_with('…'),
            "{e}"
        );
        assert_eq!(
            super::excerpt_value(&serde_json::json!([1, "a"])),
            "[1,\"a\"]"
        );
    }
}

//! The string values of a JSON document read as it is parsed, without building a
//! `serde_json::Value` of it: what [`super::strings_of`] collects from the parsed value, for the
//! documents that read the same both ways (every key unescaped and no object repeating one; a
//! `Value` keeps a repeated key's last value in its first place).

use std::fmt;

use serde::de::{DeserializeSeed, Deserializer, Error as _, MapAccess, SeqAccess, Visitor};

/// Append the string values of `json` to `out`, as [`super::strings_of`] of its parsed value
/// does (a string that is itself JSON read for its strings). `false`: `json` is not JSON, or
/// not a document this reader answers for; `out` then holds a partial result.
pub(super) fn strings_into(json: &str, out: &mut String) -> bool {
    let mut de = serde_json::Deserializer::from_str(json);
    Strings(out).deserialize(&mut de).is_ok() && de.end().is_ok()
}

/// A string value: a JSON document is read for its own strings, anything else taken as it is.
fn string(s: &str, out: &mut String) {
    let t = s.trim_start();
    if t.starts_with('{') || t.starts_with('[') {
        let mark = out.len();
        if strings_into(s, out) {
            return;
        }
        out.truncate(mark);
        if let Ok(v) = serde_json::from_str::<serde_json::Value>(s) {
            super::strings_of(&v, out);
            return;
        }
    }
    out.push_str(s);
    out.push('\n');
}

struct Strings<'o>(&'o mut String);

impl<'de> DeserializeSeed<'de> for Strings<'_> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Strings<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }

    crate::util::scalars_answer!(());

    fn visit_str<E>(self, s: &str) -> Result<(), E> {
        string(s, self.0);
        Ok(())
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        while seq.next_element_seed(Strings(self.0))?.is_some() {}
        Ok(())
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        // Keys borrowed from the document: an escaped key is not (the caller reads the document
        // as a `Value` instead), nor is a repeated one.
        let mut keys: Vec<&'de str> = Vec::new();
        while let Some(k) = map.next_key::<&'de str>()? {
            if keys.contains(&k) {
                return Err(A::Error::custom("a repeated key"));
            }
            keys.push(k);
            map.next_value_seed(Strings(self.0))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn by_value(json: &str) -> String {
        let mut out = String::new();
        match serde_json::from_str::<serde_json::Value>(json) {
            Ok(v) => super::super::strings_of(&v, &mut out),
            Err(_) => out.push_str(json),
        }
        out
    }

    /// JSON text: strings (some of them JSON documents themselves), numbers (one past f64's
    /// range), literals, arrays, and objects whose keys may repeat or be escaped.
    fn json() -> impl proptest::strategy::Strategy<Value = String> {
        use proptest::prelude::*;
        let leaf = proptest::sample::select(vec![
            "\"a\"",
            "\"x\\ny\"",
            "\"{\\\"k\\\": [\\\"in\\\", 1]}\"",
            "\" [not json\"",
            "\"{\\\"d\\\":1,\\\"d\\\":\\\"dup\\\"}\"",
            "1e400",
            "12",
            "-1.5",
            "true",
            "null",
            "\"\"",
        ])
        .prop_map(str::to_string);
        leaf.prop_recursive(4, 48, 6, |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..6)
                    .prop_map(|xs| format!("[{}]", xs.join(","))),
                proptest::collection::vec(
                    (
                        proptest::sample::select(vec![
                            "\"k\"",
                            "\"k2\"",
                            "\"k\\u0031\"",
                            "\"role\""
                        ]),
                        inner
                    ),
                    0..5,
                )
                .prop_map(|kv| format!(
                    "{{{}}}",
                    kv.iter()
                        .map(|(k, v)| format!("{k}: {v}"))
                        .collect::<Vec<_>>()
                        .join(", ")
                )),
            ]
        })
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(512))]

        /// `Corpus::of_json`'s reading: the streamed strings are the parsed value's whenever the
        /// streaming reader answers, and it answers for every document without a repeated or
        /// escaped key.
        #[test]
        fn streams_the_strings_a_value_holds(json in json(), cut in 0usize..3) {
            // Now and then not JSON at all: cut short.
            let json = if cut == 0 { json[..json.len() / 2].to_string() } else { json };
            let mut out = String::new();
            let streamed = strings_into(&json, &mut out);
            if streamed {
                proptest::prop_assert_eq!(&out, &by_value(&json));
            }
            let plain = !json.contains("\"k\\u0031\"")
                && serde_json::from_str::<serde_json::Value>(&json).is_ok()
                && !has_repeated_key(&json);
            if plain {
                proptest::prop_assert!(streamed, "{}", json);
            }
        }
    }

    /// Whether some object of `json` (valid JSON) repeats a key.
    fn has_repeated_key(json: &str) -> bool {
        struct Check(bool);
        impl<'de> Visitor<'de> for &mut Check {
            type Value = ();
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("JSON")
            }
            crate::util::scalars_answer!(());
            fn visit_str<E>(self, _: &str) -> Result<(), E> {
                Ok(())
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut s: A) -> Result<(), A::Error> {
                while s.next_element_seed(&mut *self)?.is_some() {}
                Ok(())
            }
            fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> Result<(), A::Error> {
                let mut seen = std::collections::HashSet::new();
                while let Some(k) = m.next_key::<String>()? {
                    self.0 |= !seen.insert(k);
                    m.next_value_seed(&mut *self)?;
                }
                Ok(())
            }
        }
        impl<'de> DeserializeSeed<'de> for &mut Check {
            type Value = ();
            fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
                d.deserialize_any(self)
            }
        }
        let mut c = Check(false);
        let _ = c.deserialize(&mut serde_json::Deserializer::from_str(json));
        c.0
    }

    #[test]
    fn a_repeated_key_is_left_to_the_value_reading() {
        let mut out = String::new();
        assert!(!strings_into(r#"{"a": "1", "a": "2"}"#, &mut out));
        assert_eq!(by_value(r#"{"a": "1", "a": "2"}"#), "2\n");
        let mut out = String::new();
        assert!(strings_into(
            r#"[{"a": "x", "b": ["y", 2, {"c": "z"}]}, "{\"d\": \"w\"}"]"#,
            &mut out
        ));
        assert_eq!(out, "x\ny\nz\nw\n");
    }
}

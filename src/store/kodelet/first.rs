//! Steps 1–2 of kodelet's `first_message` ([`super::summaries::first_user_text`]) read while
//! the history is parsed, without a `serde_json::Value` of every message and its content: the
//! answer the `Value` reading gives, for the histories that read the same both ways (no message
//! or content block with an escaped or repeated key, where a `Value` keeps the last value). For
//! any other history, and any that is not JSON, [`first_text`] answers `None` and the caller
//! reads the `Value`.

use std::borrow::Cow;
use std::fmt;

use serde::de::{DeserializeSeed, MapAccess, SeqAccess, Visitor};

/// The first user message's text as the `Value` reading finds it (`Some(None)`: there is none),
/// or `None` when this reader does not answer for `raw`.
pub(super) fn first_text(raw: &str, strings: bool) -> Option<Option<String>> {
    let mut de = serde_json::Deserializer::from_str(raw);
    let found = Messages { strings }.deserialize(&mut de).ok()?;
    de.end().ok()?;
    Some(found)
}

crate::util::seed_is_visitor!(Messages, Message, Scalar, Content, FirstBlock, Skip);

/// What a visitor that only validates says it expects.
fn any(f: &mut fmt::Formatter) -> fmt::Result {
    f.write_str("any JSON value")
}

/// The top level: an array of objects and nulls (Go's `[]map[string]any`); anything else is an
/// error, which the `Value` reading also turns into "no first message".
struct Messages {
    strings: bool,
}

impl<'de> Visitor<'de> for Messages {
    type Value = Option<String>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an array of messages")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut found = None;
        // After the first user text, the rest is still read: one element that is not an
        // object or null makes Go's whole decode fail.
        while let Some(text) = seq.next_element_seed(Message {
            strings: self.strings,
            want: found.is_none(),
        })? {
            found = found.or(text);
        }
        Ok(found)
    }
}

/// One element: `null`, or an object whose text is taken when `want` and its role is `user`.
struct Message {
    strings: bool,
    want: bool,
}

impl<'de> Visitor<'de> for Message {
    type Value = Option<String>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a message object or null")
    }

    fn visit_unit<E>(self) -> Result<Self::Value, E> {
        Ok(None)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut keys: Vec<&'de str> = Vec::new();
        let mut user = None;
        let mut content = None;
        while let Some(k) = crate::util::unique_key(&mut map, &mut keys)? {
            match k {
                "role" => user = Some(map.next_value_seed(Scalar)?.is_some_and(|r| r == "user")),
                "content" if self.want && user != Some(false) => {
                    content = map.next_value_seed(Content {
                        strings: self.strings,
                    })?;
                }
                _ => map.next_value_seed(Skip)?,
            }
        }
        Ok(content.filter(|_| self.want && user == Some(true)))
    }
}

/// A string value (borrowed from the document when it has no escapes); any other value is
/// read and `None`.
struct Scalar;

impl<'de> Visitor<'de> for Scalar {
    type Value = Option<Cow<'de, str>>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        any(f)
    }

    fn visit_borrowed_str<E>(self, s: &'de str) -> Result<Self::Value, E> {
        Ok(Some(Cow::Borrowed(s)))
    }

    fn visit_str<E>(self, s: &str) -> Result<Self::Value, E> {
        Ok(Some(Cow::Owned(s.to_string())))
    }

    crate::util::scalars_answer!(None);

    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Self::Value, A::Error> {
        Skip.visit_seq(seq).map(|()| None)
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
        Skip.visit_map(map).map(|()| None)
    }
}

/// A user message's text from its `content`: a non-empty string (with `strings`), or the
/// `text` string of its first element when that is an object.
struct Content {
    strings: bool,
}

impl<'de> Visitor<'de> for Content {
    type Value = Option<String>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        any(f)
    }

    fn visit_str<E>(self, s: &str) -> Result<Self::Value, E> {
        Ok((self.strings && !s.is_empty()).then(|| s.to_string()))
    }

    crate::util::scalars_answer!(None);

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let text = seq.next_element_seed(FirstBlock)?.flatten();
        while seq.next_element_seed(Skip)?.is_some() {}
        Ok(text)
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
        Skip.visit_map(map).map(|()| None)
    }
}

/// The `text` string of a content array's first element, when it is an object.
struct FirstBlock;

impl<'de> Visitor<'de> for FirstBlock {
    type Value = Option<String>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        any(f)
    }

    fn visit_str<E>(self, _: &str) -> Result<Self::Value, E> {
        Ok(None)
    }

    crate::util::scalars_answer!(None);

    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Self::Value, A::Error> {
        Skip.visit_seq(seq).map(|()| None)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut keys: Vec<&'de str> = Vec::new();
        let mut text = None;
        while let Some(k) = crate::util::unique_key(&mut map, &mut keys)? {
            if k == "text" {
                text = map.next_value_seed(Scalar)?.map(Cow::into_owned);
            } else {
                map.next_value_seed(Skip)?;
            }
        }
        Ok(text)
    }
}

/// Any value, parsed as a `Value` parses it (numbers read in full, so one past `f64`'s range
/// fails here as there; every string's escapes decoded) and dropped.
struct Skip;

impl<'de> Visitor<'de> for Skip {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        any(f)
    }

    crate::util::scalars_answer!(());

    fn visit_str<E>(self, _: &str) -> Result<(), E> {
        Ok(())
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        while seq.next_element_seed(Skip)?.is_some() {}
        Ok(())
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        while map.next_key_seed(Skip)?.is_some() {
            map.next_value_seed(Skip)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::first_text;
    use crate::store::kodelet::summaries::first_text_of_value;

    /// An object of `fields` in a shuffled order, now and then with one key repeated or
    /// escaped (which the streamed reading leaves to the `Value` reading).
    fn object(fields: Vec<(&'static str, String)>) -> impl Strategy<Value = String> {
        let n = fields.len();
        (
            Just(fields).prop_shuffle(),
            prop::sample::select(vec![0u8, 0, 0, 0, 0, 0, 0, 1, 2]),
            0..n.max(1),
            prop::sample::select(vec!["\"user\"", "\"x\"", "[]"]),
        )
            .prop_map(|(mut fields, odd, at, v)| {
                match (odd, fields.get(at).map(|f| f.0)) {
                    // A repeated key, with another value.
                    (1, Some(k)) => fields.push((k, v.to_string())),
                    // An escaped spelling of a key (`\u0065` is `e`, `\u006f` is `o`).
                    (2, Some(k)) => {
                        let escaped = k.replacen('e', "\\u0065", 1).replacen('o', "\\u006f", 1);
                        fields[at].0 = Box::leak(escaped.into_boxed_str());
                    }
                    _ => {}
                }
                let body: Vec<String> =
                    fields.iter().map(|(k, v)| format!("\"{k}\":{v}")).collect();
                format!("{{{}}}", body.join(","))
            })
    }

    /// Which of a message's or block's fields it has.
    fn some(v: impl Strategy<Value = String>) -> impl Strategy<Value = Option<String>> {
        prop::option::weighted(0.8, v)
    }

    /// A JSON value of a history: messages and nulls, with now and then a value Go's decode
    /// refuses (a number, a string, a number past `f64`'s range, trailing bytes), keys repeated
    /// or escaped, a `role` or `text` that is not a string, and content as a string, an array
    /// or neither.
    fn history() -> impl Strategy<Value = String> {
        let scalar = || {
            prop::sample::select(vec![
                "\"user\"",
                "\"user\"",
                "\"assistant\"",
                "\"\"",
                "\"hi \\\"there\\\" \\u00e9\"",
                "\"a\\nb\"",
                "1",
                "-2.5e3",
                "1e400",
                "true",
                "null",
                "\"\\ud83d\\ude00\"",
            ])
            .prop_map(str::to_string)
        };
        let block = || {
            (some(scalar()), some(scalar())).prop_flat_map(|(text, ty)| {
                let mut f = vec![];
                f.extend(text.map(|t| ("text", t)));
                f.extend(ty.map(|t| ("type", t)));
                object(f)
            })
        };
        let content = prop_oneof![
            scalar(),
            prop::collection::vec(prop_oneof![3 => block(), 1 => scalar()], 0..3)
                .prop_map(|v| format!("[{}]", v.join(","))),
            block(),
        ];
        let message = (some(scalar()), some(content), some(scalar()))
            .prop_flat_map(|(role, content, ty)| {
                let mut f = vec![];
                f.extend(role.map(|r| ("role", r)));
                f.extend(content.map(|c| ("content", c)));
                f.extend(ty.map(|t| ("type", t)));
                object(f)
            });
        let element = prop_oneof![
            12 => message,
            1 => Just("null".to_string()),
            1 => scalar(),
        ];
        (
            prop::collection::vec(element, 0..5),
            prop::sample::select(vec!["", "", "", "", "", "", " ", "x"]),
        )
            .prop_map(|(ms, tail)| format!("[{}]{tail}", ms.join(",")))
    }

    #[test]
    fn most_generated_histories_are_read_as_they_are_parsed() {
        // The property below only tests the histories the streamed reading answers for.
        use proptest::strategy::ValueTree;
        let mut runner = proptest::test_runner::TestRunner::deterministic();
        let answered = (0..1000)
            .filter(|_| {
                let raw = history().new_tree(&mut runner).unwrap().current();
                first_text(&raw, false).is_some()
            })
            .count();
        assert!(answered > 250, "{answered} of 1000");
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]

        /// Where the streamed reading answers, it answers as the `Value` reading does.
        #[test]
        fn streamed_first_text_is_the_value_reading(raw in history(), strings: bool) {
            if let Some(found) = first_text(&raw, strings) {
                prop_assert_eq!(found, first_text_of_value(&raw, strings), "{}", raw);
            }
        }
    }

    #[test]
    fn plain_histories_are_read_as_they_are_parsed() {
        // The fast path answers for the histories kodelet writes: unique, unescaped keys.
        let raw = r#"[{"role":"assistant","content":[{"type":"text","text":"no"}]},null,
            {"content":[{"type":"text","text":"fix \"it\" \u00e9","cache":{"a":[1,2.5e3]}},{"text":"x"}],"role":"user"},
            {"role":"user","content":[{"text":"later"}]}]"#;
        assert_eq!(first_text(raw, false), Some(Some("fix \"it\" é".to_string())));
        let raw = r#"[{"role":"user","content":"How many CPUs?"}]"#;
        assert_eq!(first_text(raw, true), Some(Some("How many CPUs?".to_string())));
        assert_eq!(first_text(raw, false), Some(None));
        // A later element Go refuses still makes the whole decode give nothing.
        assert_eq!(first_text(r#"[{"role":"user","content":[{"text":"a"}]},1e400]"#, false), None);
        assert_eq!(first_text_of_value(r#"[{"role":"user","content":[{"text":"a"}]},1e400]"#, false), None);
        // A repeated key is left to the `Value` reading (which keeps the last value).
        let dup = r#"[{"role":"assistant","role":"user","content":[{"text":"b"}]}]"#;
        assert_eq!(first_text(dup, false), None);
        assert_eq!(first_text_of_value(dup, false).as_deref(), Some("b"));
    }
}

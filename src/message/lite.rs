//! A borrowed JSON tree for decoding messages, and the [`Json`] reading the codecs share with
//! `serde_json::Value`.
//!
//! Decoding a message through a `Value` allocates every string and key and hashes every key
//! into an `IndexMap`, then copies the strings it keeps into the message's blocks. A [`Lite`]
//! borrows every string without escapes from the stored text and keeps an object's fields in a
//! `Vec`, so a string is copied once, into its block. It answers exactly as the `Value` would
//! (same numbers, same field order, the same compact JSON from [`Json::compact`]) for every
//! document except one with a repeated key in an object, where a `Value` keeps the last value:
//! [`Lite::parse`] turns those away (and anything that is not JSON), and the caller reads the
//! `Value` instead ([`parse`]).

use std::borrow::Cow;
use std::fmt;

use serde::de::{DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde::ser::{Serialize, SerializeMap, SerializeSeq, Serializer};
use serde_json::{Number, Value};

/// The reading of a JSON value the message codecs need, for a `Value` and a [`Lite`] alike.
pub(crate) trait Json: Sized {
    /// The field `key` of an object; `None` for a missing field or a value that is not one.
    fn get(&self, key: &str) -> Option<&Self>;
    fn as_str(&self) -> Option<&str>;
    fn as_array(&self) -> Option<&[Self]>;
    fn as_bool(&self) -> Option<bool>;
    fn is_null(&self) -> bool;
    fn is_object(&self) -> bool;
    /// The value as compact JSON (what `Value::to_string` writes).
    fn compact(&self) -> String;
}

impl Json for Value {
    fn get(&self, key: &str) -> Option<&Self> {
        Value::get(self, key)
    }
    fn as_str(&self) -> Option<&str> {
        Value::as_str(self)
    }
    fn as_array(&self) -> Option<&[Self]> {
        Value::as_array(self).map(Vec::as_slice)
    }
    fn as_bool(&self) -> Option<bool> {
        Value::as_bool(self)
    }
    fn is_null(&self) -> bool {
        Value::is_null(self)
    }
    fn is_object(&self) -> bool {
        Value::is_object(self)
    }
    fn compact(&self) -> String {
        self.to_string()
    }
}

/// A JSON value whose strings borrow from the document when they have no escapes.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Lite<'a> {
    Null,
    Bool(bool),
    Number(Number),
    Str(Cow<'a, str>),
    Array(Vec<Lite<'a>>),
    /// Fields in document order; no key twice.
    Object(Vec<(Cow<'a, str>, Lite<'a>)>),
}

impl<'a> Lite<'a> {
    /// `text` as a tree, or `None` when it is not JSON or an object in it repeats a key (read
    /// those as a `Value`).
    pub(crate) fn parse(text: &'a str) -> Option<Lite<'a>> {
        let mut de = serde_json::Deserializer::from_str(text);
        let v = Tree.deserialize(&mut de).ok()?;
        de.end().ok()?;
        Some(v)
    }
}

/// `text` as a `Value`, with the error a codec reports for a message that is not JSON.
pub(crate) fn parse(text: &str) -> Result<Value, super::DecodeError> {
    serde_json::from_str(text).map_err(|e| super::DecodeError::not_json("invalid JSON", e))
}

impl Json for Lite<'_> {
    fn get(&self, key: &str) -> Option<&Self> {
        match self {
            Lite::Object(fields) => fields.iter().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
    }
    fn as_str(&self) -> Option<&str> {
        match self {
            Lite::Str(s) => Some(s),
            _ => None,
        }
    }
    fn as_array(&self) -> Option<&[Self]> {
        match self {
            Lite::Array(items) => Some(items),
            _ => None,
        }
    }
    fn as_bool(&self) -> Option<bool> {
        match self {
            Lite::Bool(b) => Some(*b),
            _ => None,
        }
    }
    fn is_null(&self) -> bool {
        matches!(self, Lite::Null)
    }
    fn is_object(&self) -> bool {
        matches!(self, Lite::Object(_))
    }
    fn compact(&self) -> String {
        serde_json::to_string(self).expect("a JSON tree always serializes")
    }
}

impl Serialize for Lite<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Lite::Null => s.serialize_unit(),
            Lite::Bool(b) => s.serialize_bool(*b),
            Lite::Number(n) => n.serialize(s),
            Lite::Str(t) => s.serialize_str(t),
            Lite::Array(items) => {
                let mut seq = s.serialize_seq(Some(items.len()))?;
                for i in items {
                    seq.serialize_element(i)?;
                }
                seq.end()
            }
            Lite::Object(fields) => {
                let mut map = s.serialize_map(Some(fields.len()))?;
                for (k, v) in fields {
                    map.serialize_entry(k.as_ref(), v)?;
                }
                map.end()
            }
        }
    }
}

/// Reads a [`Lite`]; numbers are read as a `Value` reads them.
struct Tree;

impl<'de> DeserializeSeed<'de> for Tree {
    type Value = Lite<'de>;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Lite<'de>, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Tree {
    type Value = Lite<'de>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E>(self, b: bool) -> Result<Lite<'de>, E> {
        Ok(Lite::Bool(b))
    }

    fn visit_i64<E>(self, n: i64) -> Result<Lite<'de>, E> {
        Ok(Lite::Number(n.into()))
    }

    fn visit_u64<E>(self, n: u64) -> Result<Lite<'de>, E> {
        Ok(Lite::Number(n.into()))
    }

    fn visit_f64<E>(self, n: f64) -> Result<Lite<'de>, E> {
        // As `Value` does: a float JSON can hold is always finite.
        Ok(Number::from_f64(n).map_or(Lite::Null, Lite::Number))
    }

    fn visit_unit<E>(self) -> Result<Lite<'de>, E> {
        Ok(Lite::Null)
    }

    fn visit_borrowed_str<E>(self, s: &'de str) -> Result<Lite<'de>, E> {
        Ok(Lite::Str(Cow::Borrowed(s)))
    }

    fn visit_str<E>(self, s: &str) -> Result<Lite<'de>, E> {
        Ok(Lite::Str(Cow::Owned(s.to_string())))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Lite<'de>, A::Error> {
        let mut items = Vec::new();
        while let Some(v) = seq.next_element_seed(Tree)? {
            items.push(v);
        }
        Ok(Lite::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Lite<'de>, A::Error> {
        let mut fields: Vec<(Cow<'de, str>, Lite<'de>)> = Vec::new();
        while let Some(k) = map.next_key_seed(Key)? {
            let v = map.next_value_seed(Tree)?;
            fields.push((k, v));
        }
        if repeats(&fields) {
            return Err(serde::de::Error::custom("a repeated key"));
        }
        Ok(Lite::Object(fields))
    }
}

/// Whether two fields share a key.
fn repeats(fields: &[(Cow<'_, str>, Lite<'_>)]) -> bool {
    if fields.len() <= 16 {
        return fields
            .iter()
            .enumerate()
            .any(|(i, (k, _))| fields[..i].iter().any(|(j, _)| j == k));
    }
    let mut keys: Vec<&str> = fields.iter().map(|(k, _)| k.as_ref()).collect();
    keys.sort_unstable();
    keys.windows(2).any(|w| w[0] == w[1])
}

/// An object key, borrowed when it has no escapes.
struct Key;

impl<'de> DeserializeSeed<'de> for Key {
    type Value = Cow<'de, str>;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Cow<'de, str>, D::Error> {
        d.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for Key {
    type Value = Cow<'de, str>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an object key")
    }

    fn visit_borrowed_str<E>(self, s: &'de str) -> Result<Cow<'de, str>, E> {
        Ok(Cow::Borrowed(s))
    }

    fn visit_str<E>(self, s: &str) -> Result<Cow<'de, str>, E> {
        Ok(Cow::Owned(s.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    /// JSON text with what a `Value` reads differently from a naive reading (escapes in keys
    /// and strings, numbers past `u64` and `f64`, negative zero, exponents, nesting, whitespace),
    /// and whether an object in it repeats a key (`t\u0065xt` is `text`).
    fn json() -> impl Strategy<Value = (String, bool)> {
        let leaf = prop::sample::select(vec![
            "null",
            "true",
            "false",
            "0",
            "-0",
            "-0.0",
            "1.0",
            "1e5",
            "1E-7",
            "18446744073709551615",
            "18446744073709551616",
            "-9223372036854775809",
            "1e400",
            "0.1",
            "\"\"",
            "\"text\"",
            "\"a\\\"b\\\\c\\n\\u00e9\\ud83d\\ude00/\\/\"",
            "\"\\ud800\"",
            "\"<&>\u{2028}\"",
        ])
        .prop_map(|s| (s.to_string(), false));
        leaf.prop_recursive(4, 32, 5, |inner| {
            let key = prop::sample::select(vec!["a", "b", "type", "t\\u0065xt", "text", "é"]);
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..5).prop_map(|items| {
                    let dup = items.iter().any(|i| i.1);
                    let texts: Vec<&str> = items.iter().map(|i| i.0.as_str()).collect();
                    (format!("[{}]", texts.join(",")), dup)
                }),
                prop::collection::vec((key, inner), 0..5).prop_map(|fields| {
                    let keys: Vec<String> = fields
                        .iter()
                        .map(|(k, _)| k.replace("\\u0065", "e"))
                        .collect();
                    let dup = fields.iter().any(|(_, v)| v.1)
                        || (1..keys.len()).any(|i| keys[..i].contains(&keys[i]));
                    let body: Vec<String> = fields
                        .iter()
                        .map(|(k, v)| format!(" \"{k}\" : {} ", v.0))
                        .collect();
                    (format!("{{{}}}", body.join(",")), dup)
                }),
            ]
        })
    }

    /// The same questions asked of a `Value` and a `Lite`, all the way down.
    fn same(v: &Value, l: &Lite<'_>) {
        assert_eq!(Json::compact(v), l.compact());
        assert_eq!(Json::as_str(v), l.as_str());
        assert_eq!(Json::as_bool(v), l.as_bool());
        assert_eq!(Json::is_null(v), l.is_null());
        assert_eq!(Json::is_object(v), l.is_object());
        assert_eq!(
            Json::as_array(v).map(<[_]>::len),
            l.as_array().map(<[_]>::len)
        );
        if let (Some(a), Some(b)) = (Json::as_array(v), l.as_array()) {
            a.iter().zip(b).for_each(|(a, b)| same(a, b));
        }
        if let Some(map) = v.as_object() {
            for (k, a) in map {
                same(a, l.get(k).expect("the same keys"));
            }
            let Lite::Object(fields) = l else {
                panic!("an object read as {l:?}")
            };
            assert_eq!(fields.len(), map.len());
        }
        for k in ["a", "text", "é", "missing"] {
            assert_eq!(Json::get(v, k).is_some(), l.get(k).is_some());
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]

        /// A `Lite` answers every question as the `Value` of the same text does; it turns away
        /// only what a `Value` cannot read or reads with a repeated key.
        #[test]
        fn a_lite_reads_as_a_value((text, repeats) in json()) {
            let value = serde_json::from_str::<Value>(&text);
            match Lite::parse(&text) {
                Some(l) => {
                    prop_assert!(!repeats, "read a repeated key: {text}");
                    same(&value.expect("a Lite reads only JSON"), &l);
                }
                None => prop_assert!(value.is_err() || repeats, "turned away {text}"),
            }
        }
    }

    #[test]
    fn strings_without_escapes_are_borrowed() {
        let l = Lite::parse(r#"{"a":"plain","b":"esc\n"}"#).unwrap();
        assert!(matches!(
            l.get("a"),
            Some(Lite::Str(Cow::Borrowed("plain")))
        ));
        assert!(matches!(l.get("b"), Some(Lite::Str(Cow::Owned(_)))));
    }

    #[test]
    fn repeated_keys_and_non_json_are_turned_away() {
        assert_eq!(Lite::parse(r#"{"a":1,"a":2}"#), None);
        assert_eq!(Lite::parse(r#"{"a":1,"\u0061":2}"#), None);
        let many: Vec<String> = (0..40).map(|i| format!("\"k{i}\":{i}")).collect();
        let text = format!("{{{},\"k7\":0}}", many.join(","));
        assert_eq!(Lite::parse(&text), None);
        assert!(Lite::parse(&format!("{{{}}}", many.join(","))).is_some());
        assert_eq!(Lite::parse("[1,"), None);
        assert_eq!(Lite::parse("1 2"), None);
        assert_eq!(Lite::parse("1e400"), None);
    }
}

//! Reading a stored `usage` cell without decoding it, for `--all-over`'s prefilter.
//!
//! Nearly every row of a large store is below the threshold, and decoding each one's `usage`
//! (a lossy UTF-8 copy, then serde) was a fifth of `list --all-over`'s CPU time. [`rejects`]
//! reads the bytes in place and answers only when it is sure: the cell is a flat JSON object
//! that serde would decode to the same `currentContextWindow` and `maxContextWindow` with no
//! error, and the utilization they give is below the threshold. Anything else (nesting,
//! escapes, non-ASCII, floats in the window fields, duplicate fields, trailing bytes, a number
//! it does not read exactly) is "not sure", and the row takes the full path
//! ([`super::meta_from_columns`]). A property test holds the two paths to
//! the same answer.

use crate::store::Prefilter;

/// The fields `UsageWindow` decodes (as `Option<i64>`); any other field is ignored by serde.
const FIELDS: [&[u8]; 4] = [
    b"currentContextWindow",
    b"maxContextWindow",
    b"inputTokens",
    b"outputTokens",
];

/// Whether the prefilter surely drops the row whose `usage` cell holds `bytes` (TEXT or BLOB).
#[cfg(test)]
pub(super) fn rejects(prefilter: &Prefilter, bytes: &[u8]) -> bool {
    window(bytes).is_some_and(|w| rejects_window(prefilter, w))
}

/// [`rejects`] on the fields [`window`] read.
pub(super) fn rejects_window(prefilter: &Prefilter, [current, max, ..]: Window) -> bool {
    // The shared rule: a rejection here is the selection's own "not matched".
    !prefilter.keeps_usage(current, max)
}

/// `currentContextWindow`, `maxContextWindow`, `inputTokens`, `outputTokens`.
pub(super) type Window = [Option<i64>; 4];

/// The four fields serde decodes from a flat JSON object, or `None` when not sure serde agrees
/// (then the caller decodes the cell with serde; when `Some`, serde's decode would give these
/// four values and no error, so the caller can skip it).
pub(super) fn window(b: &[u8]) -> Option<Window> {
    kodelet_shape(b).or_else(|| any_shape(b))
}

/// [`window`] of a cell in exactly the shape kodelet writes (its `llm.Usage` as Go encodes it:
/// these fields in this order, without spaces): the text between the values compared as fixed
/// bytes, not scanned (any other shape, or a value [`any_shape`] would not be sure of, is
/// `None`).
fn kodelet_shape(b: &[u8]) -> Option<Window> {
    let mut s = Scan { b, i: 0 };
    let mut out = [None; 4];
    s.lit(b"{\"inputTokens\":")?;
    out[2] = s.int_or_null()?;
    s.lit(b",\"outputTokens\":")?;
    out[3] = s.int_or_null()?;
    s.lit(b",\"cacheCreationInputTokens\":")?;
    s.number()?;
    s.lit(b",\"cacheReadInputTokens\":")?;
    s.number()?;
    s.lit(b",\"inputCost\":")?;
    s.number()?;
    s.lit(b",\"outputCost\":")?;
    s.number()?;
    s.lit(b",\"cacheCreationCost\":")?;
    s.number()?;
    s.lit(b",\"cacheReadCost\":")?;
    s.number()?;
    s.lit(b",\"currentContextWindow\":")?;
    out[0] = s.int_or_null()?;
    s.lit(b",\"maxContextWindow\":")?;
    out[1] = s.int_or_null()?;
    s.lit(b"}")?;
    (s.i == b.len()).then_some(out)
}

/// [`window`] of any flat object.
fn any_shape(b: &[u8]) -> Option<Window> {
    let mut s = Scan { b, i: 0 };
    let mut out = [None; 4];
    let mut seen = [false; 4];
    s.ws();
    s.eat(b'{')?;
    s.ws();
    if s.peek() == Some(b'}') {
        s.i += 1;
    } else {
        loop {
            let key = s.string()?;
            s.ws();
            s.eat(b':')?;
            s.ws();
            match FIELDS.iter().position(|f| *f == key) {
                Some(k) => {
                    if std::mem::replace(&mut seen[k], true) {
                        return None; // serde: duplicate field
                    }
                    out[k] = s.int_or_null()?;
                }
                None => s.plain_value()?,
            }
            s.ws();
            match s.next()? {
                b',' => s.ws(),
                b'}' => break,
                _ => return None,
            }
        }
    }
    s.ws();
    (s.i == b.len()).then_some(out)
}

/// How many ASCII digits `b` starts with, eight bytes at a time.
#[inline(always)]
fn digit_run(b: &[u8]) -> usize {
    let mut n = 0;
    while let Some(c) = b.get(n..n + 8) {
        let x = u64::from_le_bytes(c.try_into().expect("8 bytes")) ^ 0x3030_3030_3030_3030;
        // Each byte is now its digit's value when it is a digit (0 to 9). Adding 0x76 carries
        // into a byte's top bit from 10 up; `| x` adds the bytes from 0x80 up. Carries cross
        // into the next byte only from a byte already marked, so the lowest mark is exact.
        let marks = (x.wrapping_add(0x7676_7676_7676_7676) | x) & 0x8080_8080_8080_8080;
        if marks != 0 {
            return n + (marks.trailing_zeros() / 8) as usize;
        }
        n += 8;
    }
    n + b[n..].iter().take_while(|c| c.is_ascii_digit()).count()
}

struct Scan<'a> {
    b: &'a [u8],
    i: usize,
}

impl<'a> Scan<'a> {
    fn peek(&self) -> Option<u8> {
        self.b.get(self.i).copied()
    }

    fn next(&mut self) -> Option<u8> {
        let c = self.peek()?;
        self.i += 1;
        Some(c)
    }

    fn eat(&mut self, c: u8) -> Option<()> {
        (self.next()? == c).then_some(())
    }

    /// These exact bytes next (a fixed length, so the comparison is inlined, not a call).
    #[inline(always)]
    fn lit<const N: usize>(&mut self, l: &[u8; N]) -> Option<()> {
        (self.b.get(self.i..self.i + N)? == l).then(|| self.i += N)
    }

    fn ws(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.i += 1;
        }
    }

    /// A string of printable ASCII without escapes; its bytes.
    fn string(&mut self) -> Option<&'a [u8]> {
        self.eat(b'"')?;
        let rest = &self.b[self.i..];
        let n = rest
            .iter()
            .position(|&c| c == b'"' || c == b'\\' || !(0x20..0x80).contains(&c))?;
        if rest[n] != b'"' {
            return None;
        }
        self.i += n + 1;
        Some(&rest[..n])
    }

    /// Digits from here (none is `None`).
    #[inline(always)]
    fn digits(&mut self, max: usize) -> Option<&'a [u8]> {
        let start = self.i;
        self.i += digit_run(&self.b[start..]);
        let d = &self.b[start..self.i];
        (!d.is_empty() && d.len() <= max).then_some(d)
    }

    /// `null`, or a non-negative integer in JSON's grammar that fits an i64 (a fraction or an
    /// exponent is "not sure": serde refuses a float for an integer field).
    #[inline(always)]
    fn int_or_null(&mut self) -> Option<Option<i64>> {
        if self.b[self.i..].starts_with(b"null") {
            self.i += 4;
            return Some(None);
        }
        // A minus sign is "not sure" (serde reads `-0` as a float, which an i64 field refuses).
        let d = self.digits(18)?;
        if (d.len() > 1 && d[0] == b'0') || matches!(self.peek(), Some(b'.' | b'e' | b'E')) {
            return None;
        }
        Some(Some(
            d.iter().fold(0i64, |n, c| n * 10 + i64::from(c - b'0')),
        ))
    }

    /// A value serde ignores without error: a plain string, a number in JSON's grammar (short
    /// ones only), `true`, `false` or `null`. Objects and arrays are "not sure".
    fn plain_value(&mut self) -> Option<()> {
        match self.peek()? {
            b'"' => self.string().map(|_| ()),
            b'-' | b'0'..=b'9' => self.number(),
            _ => {
                let rest = &self.b[self.i..];
                let word = [&b"true"[..], b"false", b"null"]
                    .into_iter()
                    .find(|w| rest.starts_with(w))?;
                self.i += word.len();
                Some(())
            }
        }
    }

    #[inline(always)]
    fn number(&mut self) -> Option<()> {
        if self.peek() == Some(b'-') {
            self.i += 1;
        }
        let d = self.digits(15)?;
        if d.len() > 1 && d[0] == b'0' {
            return None;
        }
        if self.peek() == Some(b'.') {
            self.i += 1;
            self.digits(15)?;
        }
        if matches!(self.peek(), Some(b'e' | b'E')) {
            self.i += 1;
            if matches!(self.peek(), Some(b'+' | b'-')) {
                self.i += 1;
            }
            self.digits(2)?;
        }
        Some(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn over(r: f64) -> Prefilter {
        Prefilter {
            all_over: Some(r),
            context_limit: None,
            times: false,
        }
    }

    #[test]
    fn reads_kodelet_usage() {
        let u = br#"{"inputTokens":120,"outputTokens":30,"cacheCreationInputTokens":0,"cacheReadInputTokens":0,"inputCost":0.0012,"outputCost":0.0003,"cacheCreationCost":0,"cacheReadCost":0,"currentContextWindow":5000,"maxContextWindow":200000}"#;
        assert!(kodelet_shape(u).is_some(), "the byte-compared path");
        assert!(rejects(&over(0.7), u));
        assert!(!rejects(&over(0.02), u));
    }

    #[test]
    fn unsure_is_never_a_rejection() {
        for u in [
            &br#"{"currentContextWindow":5,"maxContextWindow":100,"currentContextWindow":1}"#[..],
            br#"{"currentContextWindow":5.0,"maxContextWindow":100}"#,
            br#"{"currentContextWindow":5,"maxContextWindow":100,"x":{}}"#,
            br#"{"currentContextWindow":5,"maxContextWindow":100} x"#,
            br#"{"currentContextWindow":5,"maxContextWindow":100,}"#,
            br#"{"currentContextWindow":05,"maxContextWindow":100}"#,
            br#"{"currentContextWindow":5,"maxContextWindow":0}"#,
            br#"{"currentContextWindow":5}"#,
            br#"{"currentContextWindow":5,"maxContextWindow":100,"n":"\u00e9"}"#,
            "{\"currentContextWindow\":5,\"maxContextWindow\":100,\"n\":\"é\"}".as_bytes(),
            br#"{"currentContextWindow":5,"maxContextWindow":100,"n":"a	b"}"#,
        ] {
            assert!(!rejects(&over(0.7), u), "{}", String::from_utf8_lossy(u));
        }
    }

    #[test]
    fn context_limit_stands_in_for_a_missing_max() {
        let u = br#"{"currentContextWindow":5000}"#;
        let p = Prefilter {
            all_over: Some(0.7),
            context_limit: Some(100_000),
            times: false,
        };
        assert!(rejects(&p, u));
    }

    mod props {
        use super::super::{rejects, window};
        use crate::store::{ConversationMeta, Prefilter};
        use proptest::prelude::*;

        /// The full path's decode of a `usage` cell.
        fn decoded(bytes: &[u8]) -> ConversationMeta {
            let usage = String::from_utf8_lossy(bytes).into_owned();
            crate::agents::kodelet::meta_from_columns(
                String::new(),
                String::new(),
                Some(usage),
                String::new(),
                String::new(),
                None,
                None,
                None,
            )
        }

        /// The full path's answer: decode as the listing does, then the selection's rule.
        fn keeps(p: &Prefilter, bytes: &[u8]) -> bool {
            p.keeps(&decoded(bytes))
        }

        fn value() -> impl Strategy<Value = String> {
            prop_oneof![
                12 => (0i64..400_000).prop_map(|n| n.to_string()),
                1 => (-5i64..5).prop_map(|n| n.to_string()),
                1 => Just("null".to_string()),
                1 => Just("0.5".to_string()),
                1 => Just("1e3".to_string()),
                1 => Just("007".to_string()),
                1 => Just("-0".to_string()),
                1 => Just("99999999999999999999".to_string()),
                1 => Just("true".to_string()),
                1 => Just(r#""text""#.to_string()),
                1 => Just(r#""esc\"aped""#.to_string()),
                1 => Just("\"caf\u{e9}\"".to_string()),
                1 => Just("{}".to_string()),
                1 => Just(r#"{"currentContextWindow":1}"#.to_string()),
                1 => Just("[1,2]".to_string()),
            ]
        }

        fn key() -> impl Strategy<Value = String> {
            prop_oneof![
                Just("currentContextWindow"),
                Just("maxContextWindow"),
                Just("inputTokens"),
                Just("outputTokens"),
                Just("inputCost"),
                Just("current"),
                Just("currentContextWindow"),
                Just("maxContextWindow"),
                Just("c\\u0075rrentContextWindow"),
            ]
            .prop_map(str::to_string)
        }

        fn usage() -> impl Strategy<Value = Vec<u8>> {
            (
                prop::collection::vec((key(), value(), prop_oneof![Just(""), Just(" "), Just("\n")]), 0..7),
                prop_oneof![6 => Just(""), 1 => Just(" "), 1 => Just(","), 1 => Just("}"), 1 => Just(" x")],
                prop::option::weighted(0.2, (any::<prop::sample::Index>(), any::<u8>())),
            )
                .prop_map(|(fields, tail, flip)| {
                    let body: Vec<String> = fields
                        .iter()
                        .map(|(k, v, w)| format!("\"{k}\"{w}:{w}{v}"))
                        .collect();
                    let mut b = format!("{{{}}}{tail}", body.join(",")).into_bytes();
                    if let Some((i, byte)) = flip {
                        let i = i.index(b.len());
                        b[i] = byte;
                    }
                    b
                })
        }

        /// kodelet's own shape, its values odd now and then, a byte flipped now and then.
        fn shaped() -> impl Strategy<Value = Vec<u8>> {
            (
                prop::collection::vec(
                    prop_oneof![
                        24 => (0i64..400_000).prop_map(|n| n.to_string()),
                        3 => Just("0.0093".to_string()),
                        1 => value(),
                    ],
                    10,
                ),
                prop::option::weighted(0.2, (any::<prop::sample::Index>(), any::<u8>())),
            )
                .prop_map(|(values, flip)| {
                    // kodelet's `llm.Usage` fields, in its order.
                    let keys = [
                        "inputTokens",
                        "outputTokens",
                        "cacheCreationInputTokens",
                        "cacheReadInputTokens",
                        "inputCost",
                        "outputCost",
                        "cacheCreationCost",
                        "cacheReadCost",
                        "currentContextWindow",
                        "maxContextWindow",
                    ];
                    let body: Vec<String> = keys
                        .iter()
                        .zip(&values)
                        .map(|(k, v)| format!("\"{k}\":{v}"))
                        .collect();
                    let mut b = format!("{{{}}}", body.join(",")).into_bytes();
                    if let Some((i, byte)) = flip {
                        let i = i.index(b.len());
                        b[i] = byte;
                    }
                    b
                })
        }

        /// The four fields read on the bytes are serde's, with no problem reported.
        fn serdes_reading(
            bytes: &[u8],
            [current, max, input, output]: super::super::Window,
        ) -> Result<(), TestCaseError> {
            let m = decoded(bytes);
            prop_assert_eq!(m.problem, None);
            prop_assert_eq!(
                (
                    m.current_context,
                    m.max_context,
                    m.input_tokens,
                    m.output_tokens
                ),
                (current, max, input, output),
                "{}",
                String::from_utf8_lossy(bytes)
            );
            Ok(())
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(3000))]
            /// The eight-at-a-time digit count is the byte-by-byte one, for every byte value
            /// around the digits and at every length.
            #[test]
            fn digit_run_counts_leading_digits(
                bytes in prop::collection::vec(
                    prop_oneof![8 => b'0'..=b'9', 1 => any::<u8>(), 1 => Just(b'0' + 10), 1 => Just(b'0' - 1)],
                    0..40,
                ),
            ) {
                let want = bytes.iter().take_while(|c| c.is_ascii_digit()).count();
                prop_assert_eq!(super::super::digit_run(&bytes), want);
            }

            /// On cells of kodelet's own shape (the byte-compared path), the same rule.
            #[test]
            fn kodelets_shape_reads_as_serde_does(bytes in shaped()) {
                if let Some(w) = super::super::kodelet_shape(&bytes) {
                    prop_assert_eq!(super::super::any_shape(&bytes), Some(w));
                    serdes_reading(&bytes, w)?;
                }
            }

            /// A rejection on the bytes is always the full path's rejection; and when the scan
            /// is sure of the cell, its four fields are serde's, with no problem reported (the
            /// listing then uses them instead of decoding the cell).
            #[test]
            fn a_quick_rejection_is_a_full_rejection(
                bytes in usage(),
                ratio in prop_oneof![Just(0.0), Just(0.7), Just(1.0), 0.0f64..1.5],
                limit in prop::option::of(prop_oneof![Just(0i64), Just(-1), 1i64..300_000]),
            ) {
                let p = Prefilter { all_over: Some(ratio), context_limit: limit, times: false };
                if rejects(&p, &bytes) {
                    prop_assert!(!keeps(&p, &bytes), "{}", String::from_utf8_lossy(&bytes));
                }
                if let Some(w) = window(&bytes) {
                    serdes_reading(&bytes, w)?;
                }
            }

            /// On the usage kodelet writes, the quick path decides every row itself.
            #[test]
            fn kodelet_usage_is_decided_on_the_bytes(
                input in 0i64..100_000,
                current in 0i64..400_000,
                max in prop_oneof![Just(0i64), 1i64..400_000],
                ratio in 0.05f64..1.2,
            ) {
                let u = format!(
                    r#"{{"inputTokens":{input},"outputTokens":12,"cacheCreationInputTokens":0,"cacheReadInputTokens":0,"inputCost":0.0012,"outputCost":0.0003,"cacheCreationCost":0,"cacheReadCost":0,"currentContextWindow":{current},"maxContextWindow":{max}}}"#
                );
                let p = Prefilter { all_over: Some(ratio), context_limit: None, times: false };
                prop_assert_eq!(rejects(&p, u.as_bytes()), !keeps(&p, u.as_bytes()));
            }
        }
    }
}

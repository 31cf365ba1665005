//! Small helpers: sorted directory listings (recipe and hook discovery), byte counts for
//! messages, the sha256 hex digest used for version tokens, audit rows and recipes, a word
//! reader ([`runs`]), [`Shapes`], a quick "no" for words outside a small set, and the scalar
//! methods of a JSON visitor that reads only strings.

use std::path::{Path, PathBuf};

/// The entries of `dir`, sorted by path; empty when the directory does not exist or cannot be
/// read (a missing optional directory is not an error).
pub fn sorted_entries(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut paths: Vec<PathBuf> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
    paths.sort();
    paths
}

/// `a`, `a and b`, `a, b and c`.
pub fn join_and(items: &[String], word: &str) -> String {
    match items {
        [] => String::new(),
        [one] => one.clone(),
        [init @ .., last] => format!("{} {word} {last}", init.join(", ")),
    }
}

/// A byte count for messages, in the binary units it names (1 KiB = 1024 bytes): `512 B`,
/// `1.5 KiB`, `3.2 MiB`, `4.0 GiB`.
/// `12,345`: how every count is written, in tables, notes, reasons and footers alike.
pub fn thousands(n: usize) -> String {
    let s = n.to_string();
    let mut out = String::with_capacity(s.len() + s.len() / 3);
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// A ratio as a whole percentage (`0.38` → `38%`): how every utilization is written.
pub fn percent(ratio: f64) -> String {
    format!("{:.0}%", ratio * 100.0)
}

pub fn human_bytes(n: u64) -> String {
    const K: f64 = 1024.0;
    let f = n as f64;
    if n < 1024 {
        format!("{n} B")
    } else if f < K * K {
        format!("{:.1} KiB", f / K)
    } else if f < K * K * K {
        format!("{:.1} MiB", f / (K * K))
    } else {
        format!("{:.1} GiB", f / (K * K * K))
    }
}

/// A version digest of some bytes: the 128-bit XXH3 hash, in hex. Version tokens only say
/// whether stored bytes are still the ones read a moment ago (a change by a live agent, not an
/// adversary, is what they catch), are never stored, and are computed for every conversation a
/// batch writes, on the writer's one thread too: a fast non-cryptographic hash does that at
/// memory speed, where sha256 took a fifth of the writer's time.
pub fn version_digest(bytes: &[u8]) -> String {
    format!("{:032x}", xxhash_rust::xxh3::xxh3_128(bytes))
}

/// sha256 hex of a text.
pub fn sha256_hex(text: &str) -> String {
    use sha2::{Digest, Sha256};
    hex::encode(Sha256::digest(text.as_bytes()))
}

/// `3m`, `2h`, `5d`: a coarse age for messages and tables.
pub fn short_duration(d: std::time::Duration) -> String {
    let s = d.as_secs();
    if s < 60 {
        format!("{s}s")
    } else if s < 3600 {
        format!("{}m", s / 60)
    } else if s < 86400 {
        format!("{}h", s / 3600)
    } else {
        format!("{}d", s / 86400)
    }
}

/// The `serde::de::Visitor` methods of JSON's scalars (booleans, numbers, `null`), each
/// answering `$value`: for the visitors of a JSON document that act on its strings, arrays and
/// objects alone (numbers are still parsed in full, as a `serde_json::Value` parses them).
macro_rules! scalars_answer {
    ($value:expr) => {
        fn visit_bool<E>(self, _: bool) -> Result<Self::Value, E> {
            Ok($value)
        }

        fn visit_i64<E>(self, _: i64) -> Result<Self::Value, E> {
            Ok($value)
        }

        fn visit_u64<E>(self, _: u64) -> Result<Self::Value, E> {
            Ok($value)
        }

        fn visit_f64<E>(self, _: f64) -> Result<Self::Value, E> {
            Ok($value)
        }

        fn visit_unit<E>(self) -> Result<Self::Value, E> {
            Ok($value)
        }
    };
}
pub(crate) use scalars_answer;

/// The shapes of a set of ASCII words: each word's length (up to 31) and its first and last
/// bytes in either case. A word whose shape is not in the set is, in any ASCII case, none of
/// the set's words: most words of a long text are turned away before they are lowercased and
/// looked up.
pub(crate) struct Shapes(Vec<u64>);

impl Shapes {
    const BITS: usize = 1 << 15;

    pub(crate) fn new() -> Shapes {
        Shapes(vec![0; Self::BITS / 64])
    }

    fn shape(w: &[u8]) -> usize {
        let fold = |b: Option<&u8>| usize::from(b.copied().unwrap_or(0).to_ascii_lowercase() & 31);
        (w.len().min(31) << 10) | (fold(w.first()) << 5) | fold(w.last())
    }

    pub(crate) fn insert(&mut self, w: &[u8]) {
        let k = Self::shape(w);
        self.0[k / 64] |= 1 << (k % 64);
    }

    /// `false`: `w` is none of the inserted words in any ASCII case.
    pub(crate) fn may_hold(&self, w: &[u8]) -> bool {
        let k = Self::shape(w);
        self.0[k / 64] & (1 << (k % 64)) != 0
    }
}

/// The maximal runs of `s`'s word characters: ASCII letters and digits (and `_` with
/// `UNDERSCORE`), and any other alphanumeric character. What `s.split(|c| !is_word(c))` gives
/// without its empty pieces, read a byte at a time through a table where the text is ASCII.
pub(crate) fn runs<const UNDERSCORE: bool>(s: &str) -> Runs<'_, UNDERSCORE> {
    Runs { s, pos: 0 }
}

/// Iterator over [`runs`].
pub(crate) struct Runs<'a, const UNDERSCORE: bool> {
    s: &'a str,
    pos: usize,
}

impl<const UNDERSCORE: bool> Runs<'_, UNDERSCORE> {
    /// Each byte's class: 0 an ASCII separator, 1 an ASCII word character, 2 the first byte of
    /// a non-ASCII character (decoded to classify it).
    const CLASS: [u8; 256] = {
        let mut t = [2u8; 256];
        let mut b = 0;
        while b < 128 {
            t[b] = ((b as u8).is_ascii_alphanumeric() || (UNDERSCORE && b == b'_' as usize)) as u8;
            b += 1;
        }
        t
    };
}

/// Whether the non-ASCII character `rest` starts with is alphanumeric, and its length.
#[cold]
fn wide(rest: &str) -> (bool, usize) {
    let c = rest.chars().next().expect("a character starts here");
    (c.is_alphanumeric(), c.len_utf8())
}

impl<'a, const UNDERSCORE: bool> Iterator for Runs<'a, UNDERSCORE> {
    type Item = &'a str;

    fn next(&mut self) -> Option<&'a str> {
        let b = self.s.as_bytes();
        let class = |i: usize| b.get(i).map(|&c| Self::CLASS[c as usize]);
        let mut i = self.pos;
        // The separators: ASCII ones a byte at a time.
        loop {
            match class(i) {
                None => {
                    self.pos = i;
                    return None;
                }
                Some(0) => i += 1,
                Some(1) => break,
                Some(_) => match wide(&self.s[i..]) {
                    (true, _) => break,
                    (false, n) => i += n,
                },
            }
        }
        let start = i;
        loop {
            match class(i) {
                Some(1) => i += 1,
                Some(2) => match wide(&self.s[i..]) {
                    (true, n) => i += n,
                    (false, _) => break,
                },
                _ => break,
            }
        }
        self.pos = i;
        Some(&self.s[start..i])
    }
}

#[cfg(test)]
mod tests {
    /// The definition [`super::runs`] answers to: the non-empty pieces between characters that
    /// are neither alphanumeric nor (with `underscore`) `_`.
    fn split(t: &str, underscore: bool) -> Vec<&str> {
        t.split(|c: char| !(c.is_alphanumeric() || (underscore && c == '_')))
            .filter(|w| !w.is_empty())
            .collect()
    }

    fn both(t: &str) {
        assert_eq!(
            super::runs::<true>(t).collect::<Vec<_>>(),
            split(t, true),
            "{t:?}"
        );
        assert_eq!(
            super::runs::<false>(t).collect::<Vec<_>>(),
            split(t, false),
            "{t:?}"
        );
    }

    /// Every ASCII byte, and long runs and separators that end in a non-ASCII character or
    /// in an ASCII one, at many lengths.
    #[test]
    fn long_runs_are_the_split() {
        let ascii: String = (0u8..128).map(char::from).collect();
        both(&ascii);
        both(&ascii.repeat(3));
        for n in 55..75 {
            for c in ["a", "_", " ", "é", "\u{a0}", "日", "🦀", "\u{301}"] {
                both(&format!("{}{c}{}", "x".repeat(n), "y".repeat(n)));
                both(&format!("{}{c}{}", "_ ".repeat(n), "z".repeat(n)));
                both(&format!("{}{c}", "-".repeat(n)));
                both(&format!("{c}{}{c}{c}", "é".repeat(n)));
            }
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(512))]

        /// Long texts of ASCII and non-ASCII words and separators read into their split.
        #[test]
        fn runs_are_the_split_of_their_definition(
            t in "([a-zA-Z0-9_ .:/@`\\[{-]{0,70}|é|ß|İ|\u{212A}|٣|²|\\x{301}|\\x{200b}|\\x{a0}|日本|🦀|\\n){0,30}",
        ) {
            both(&t);
        }
    }
}

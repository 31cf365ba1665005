//! The o200k_base pre-tokenizer (the split of a text into pieces before BPE), with a
//! hand-written fast path for ASCII.
//!
//! `bpe-openai` splits with one `regex_automata` search per piece, anchored at the end of the
//! previous piece; each piece depends only on the text from its start onward. Its patterns, in
//! priority order (leftmost-first, so the first alternative that matches wins):
//!
//! 1. `[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?`
//! 2. `[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?`
//! 3. `\p{N}{1,3}`
//! 4. ` ?[^\s\p{L}\p{N}]+[\r\n/]*`
//! 5. `\s*[\r\n]+`
//! 6. `\s+$`
//! 7. `\s+\s`, with the last character dropped from the piece (tiktoken's `\s+(?!\S)`)
//! 8. `\s+`
//!
//! [`ascii_piece_end`] decides the piece at a position the same way, by hand, as long as every
//! byte it has to look at is ASCII (where `\p{L}` is `A-Za-z`, `\p{N}` is `0-9`, `\s` is
//! `\t\n\x0B\x0C\r` and space, and no `\p{M}` exists). When the decision depends on a non-ASCII
//! character it gives up, and [`Pieces`] asks the regex of patterns 1–8 (`regex-automata`) for
//! that one piece. `tests/it/tokens_props.rs` checks the pieces against
//! `bpe_openai::o200k_base().split`.

/// The pieces of `text`, exactly as `bpe_openai::o200k_base().split(text)` yields them.
pub fn split(text: &str) -> Pieces<'_> {
    Pieces { text, pos: 0 }
}

/// Iterator over the pre-token pieces of a text; see [`split`].
pub struct Pieces<'a> {
    text: &'a str,
    pos: usize,
}

impl<'a> Pieces<'a> {
    /// The next piece's bytes, `start..end` of the text (with no character-boundary check:
    /// what counting needs).
    #[inline]
    fn next_range(&mut self) -> Option<(usize, usize)> {
        let start = self.pos;
        if start >= self.text.len() {
            return None;
        }
        let end = match ascii_piece_end(self.text.as_bytes(), start) {
            Some(end) => end,
            None => start + regex_piece(&self.text[start..])?.len(),
        };
        self.pos = end;
        Some((start, end))
    }
}

impl<'a> Iterator for Pieces<'a> {
    type Item = &'a str;

    fn next(&mut self) -> Option<&'a str> {
        let (start, end) = self.next_range()?;
        // Piece ends are character boundaries: the fast path ends pieces after ASCII bytes,
        // the regex path after whole characters.
        Some(&self.text[start..end])
    }
}

/// The pieces of `text` as [`split`] gives them, as bytes.
pub(crate) fn split_bytes(text: &str) -> BytePieces<'_> {
    BytePieces(split(text))
}

/// Iterator over the bytes of the pre-token pieces of a text; see [`split_bytes`].
pub(crate) struct BytePieces<'a>(Pieces<'a>);

impl<'a> Iterator for BytePieces<'a> {
    type Item = &'a [u8];

    #[inline]
    fn next(&mut self) -> Option<&'a [u8]> {
        let (start, end) = self.0.next_range()?;
        Some(&self.0.text.as_bytes()[start..end])
    }
}

/// The o200k patterns 1 to 8 of the module docs, as one regex per alternative group: the first
/// group holds patterns 1–6 (leftmost-first within it), the second is pattern 7 (whose last
/// character is a look-ahead and is dropped from the piece), the third pattern 8. A search
/// anchored at the piece's start reports which group matched.
const PATTERNS: [&str; 3] = [
    concat!(
        r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?",
        r"|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?",
        r"|\p{N}{1,3}",
        r"| ?[^\s\p{L}\p{N}]+[\r\n/]*",
        r"|\s*[\r\n]+",
        r"|\s+$",
    ),
    r"\s+\s",
    r"\s+",
];

/// The compiled [`PATTERNS`] (built on first use: only non-ASCII text needs it).
fn regex() -> &'static regex_automata::meta::Regex {
    static RE: std::sync::OnceLock<regex_automata::meta::Regex> = std::sync::OnceLock::new();
    RE.get_or_init(|| {
        regex_automata::meta::Regex::new_many(&PATTERNS).expect("the o200k patterns compile")
    })
}

/// The first piece of `rest` by the o200k regex (`None` only if the regex matches nothing
/// there, when tiktoken stops splitting too).
fn regex_piece(rest: &str) -> Option<&str> {
    let input = regex_automata::Input::new(rest).anchored(regex_automata::Anchored::Yes);
    let m = regex().find(input)?;
    let mut end = m.end();
    if m.pattern().as_usize() == 1 {
        // `\s+\s` stands for `\s+(?!\S)`: the last whitespace character is not part of it.
        end -= rest[..end].chars().next_back().map_or(0, char::len_utf8);
    }
    Some(&rest[..end])
}

/// Byte classes of ASCII, as the o200k regex sees them.
const UPPER: u8 = 1;
const LOWER: u8 = 2;
const DIGIT: u8 = 3;
/// `\s` other than `\r` and `\n`: tab, vertical tab, form feed, space.
const SPACE: u8 = 4;
/// `\r` and `\n`.
const NEWLINE: u8 = 5;
/// Anything else below 0x80: punctuation, symbols, control characters.
const OTHER: u8 = 6;
/// Any byte of a non-ASCII character.
const NON_ASCII: u8 = 0;

const CLASS: [u8; 256] = {
    let mut t = [NON_ASCII; 256];
    let mut b = 0;
    while b < 128 {
        t[b] = match b as u8 {
            b'A'..=b'Z' => UPPER,
            b'a'..=b'z' => LOWER,
            b'0'..=b'9' => DIGIT,
            b'\r' | b'\n' => NEWLINE,
            b'\t' | 0x0B | 0x0C | b' ' => SPACE,
            _ => OTHER,
        };
        b += 1;
    }
    t
};

/// The class of the byte at `i`, `None` past the end of the text.
fn class_at(b: &[u8], i: usize) -> Option<u8> {
    b.get(i).map(|&c| CLASS[c as usize])
}

fn is_letter(class: u8) -> bool {
    class == UPPER || class == LOWER
}

/// End of the piece that starts at `p`, or `None` when deciding it needs a non-ASCII character.
pub(crate) fn ascii_piece_end(b: &[u8], p: usize) -> Option<usize> {
    let c = class_at(b, p)?;
    match c {
        NON_ASCII => None,
        UPPER | LOWER => letters(b, p),
        DIGIT => digits(b, p),
        _ => {
            let next = class_at(b, p + 1);
            if next == Some(NON_ASCII) {
                return None;
            }
            // Patterns 1 and 2: an optional non-letter, non-digit, non-newline prefix.
            if c != NEWLINE && next.is_some_and(is_letter) {
                return letters(b, p + 1);
            }
            match c {
                OTHER => others(b, p),
                SPACE if b[p] == b' ' && next == Some(OTHER) => others(b, p + 1),
                _ => whitespace(b, p),
            }
        }
    }
}

/// Patterns 1 and 2 from the first letter at `s`: uppercase run, lowercase run, contraction.
fn letters(b: &[u8], s: usize) -> Option<usize> {
    let mut q = s;
    while class_at(b, q) == Some(UPPER) {
        q += 1;
    }
    while class_at(b, q) == Some(LOWER) {
        q += 1;
    }
    if class_at(b, q) == Some(NON_ASCII) {
        return None;
    }
    contraction(b, q)
}

/// `q` extended by an optional `'s 't 're 've 'm 'll 'd` (any case).
fn contraction(b: &[u8], q: usize) -> Option<usize> {
    if b.get(q) != Some(&b'\'') {
        return Some(q);
    }
    let Some(&x) = b.get(q + 1) else {
        return Some(q);
    };
    if x >= 0x80 {
        return None;
    }
    let second = match x | 0x20 {
        b's' | b't' | b'm' | b'd' => return Some(q + 2),
        b'r' | b'v' => b'e',
        b'l' => b'l',
        _ => return Some(q),
    };
    match b.get(q + 2) {
        Some(&y) if y >= 0x80 => None,
        Some(&y) if y | 0x20 == second => Some(q + 3),
        _ => Some(q),
    }
}

/// Pattern 3: one to three digits.
fn digits(b: &[u8], p: usize) -> Option<usize> {
    let mut q = p;
    while q - p < 3 && class_at(b, q) == Some(DIGIT) {
        q += 1;
    }
    if q - p < 3 && class_at(b, q) == Some(NON_ASCII) {
        return None;
    }
    Some(q)
}

/// Pattern 4 from its first non-space, non-letter, non-digit character at `s`.
fn others(b: &[u8], s: usize) -> Option<usize> {
    let mut q = s;
    while class_at(b, q) == Some(OTHER) {
        q += 1;
    }
    if class_at(b, q) == Some(NON_ASCII) {
        return None;
    }
    // `[\r\n/]*` holds only ASCII: a non-ASCII byte simply ends it.
    while matches!(b.get(q), Some(b'\r' | b'\n' | b'/')) {
        q += 1;
    }
    Some(q)
}

/// Patterns 5 to 8 on the whitespace run that starts at `p`.
fn whitespace(b: &[u8], p: usize) -> Option<usize> {
    let mut q = p;
    let mut after_last_newline = None;
    loop {
        match class_at(b, q) {
            Some(NEWLINE) => after_last_newline = Some(q + 1),
            Some(SPACE) => {}
            Some(NON_ASCII) => return None,
            _ => break,
        }
        q += 1;
    }
    Some(match after_last_newline {
        // `\s*[\r\n]+`: the run up to its last newline.
        Some(end) => end,
        // `\s+$`: the whole run at the end of the text.
        None if q == b.len() => q,
        // `\s+\s` minus its last character, or a single `\s`.
        None if q - p >= 2 => q - 1,
        None => q,
    })
}

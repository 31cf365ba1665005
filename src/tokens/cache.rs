//! A bounded per-thread memo of piece → o200k token count.
//!
//! Most pre-token pieces repeat (words, indentation, punctuation runs, JSON keys), and counting
//! one with `bpe`'s encoder allocates and runs a backtracking search. This cache is
//! direct-mapped: two fixed tables, one of [`SHORT_SLOTS`] one-word entries for pieces of up to
//! [`SHORT_KEY`] bytes (most pieces: short words, numbers, punctuation) and one of [`SLOTS`]
//! four-word entries for pieces of up to [`MAX_KEY`] bytes, each entry holding one piece and its
//! count; a new piece overwrites whatever shared its slot. Memory per thread is fixed (256 KB
//! each), a lookup is one hash and one compare, and a miss costs what counting cost before.
//! Longer pieces are counted directly.

use std::cell::RefCell;

/// Longest piece the cache holds, in bytes.
pub(crate) const MAX_KEY: usize = 30;
/// Entries of the table of longer pieces (a power of two): 256 KB.
const SLOTS: usize = 1 << 13;
/// The bits of an entry's last word that hold key bytes 24..30 and the length (byte 30).
const KEY_MASK: u64 = (1 << 56) - 1;

/// One entry, as four little-endian words: bytes 0..30 the piece, zero-padded; byte 30 its
/// length; byte 31 its token count (at most its length, so it fits). An all-zero entry is empty
/// (no piece has length 0). Fixed-size words make a lookup four compares, not a `memcmp`.
type Entry = [u64; 4];

/// Longest piece the table of short pieces holds, in bytes.
const SHORT_KEY: usize = 7;
/// Entries of the table of short pieces (a power of two): 256 KB.
const SHORT_SLOTS: usize = 1 << 15;

/// One thread's tables: pieces of up to [`SHORT_KEY`] bytes in `short`, one word each (bytes
/// 0..7 the piece, zero-padded; bits 56..59 its length, 59..62 its count, which is at most its
/// length); longer ones in `slots`. Most pieces are short words: one word to load and compare,
/// and a table half the size of the long one, which stays in the core's cache.
pub(crate) struct Cache {
    short: Box<[u64]>,
    slots: Box<[Entry]>,
}

impl Cache {
    fn new() -> Cache {
        Cache {
            short: vec![0; SHORT_SLOTS].into_boxed_slice(),
            slots: vec![[0; 4]; SLOTS].into_boxed_slice(),
        }
    }
}

thread_local! {
    static CACHE: RefCell<Cache> = RefCell::new(Cache::new());
}

/// Runs `f` with this thread's cache.
pub(crate) fn with<R>(f: impl FnOnce(&mut Cache) -> R) -> R {
    CACHE.with(|c| f(&mut c.borrow_mut()))
}

impl Cache {
    /// Token count of `piece`, from the table or from `count` (which must be a pure function of
    /// the piece; its answer is remembered).
    #[inline]
    pub(crate) fn get_or(&mut self, piece: &[u8], count: impl FnOnce(&[u8]) -> usize) -> usize {
        let len = piece.len();
        if len == 0 || len > MAX_KEY {
            return count(piece);
        }
        if len <= SHORT_KEY {
            return self.get_or_short(piece, count);
        }
        let probe = probe(piece);
        let slot = &mut self.slots[slot_of(&probe)];
        if slot[..3] == probe[..3] && slot[3] & KEY_MASK == probe[3] {
            return (slot[3] >> 56) as usize;
        }
        let n = count(piece);
        // A count above 255 cannot happen for 30 bytes; never store a truncated one.
        if let Ok(c) = u8::try_from(n) {
            *slot = probe;
            slot[3] |= u64::from(c) << 56;
        }
        n
    }

    /// [`Cache::get_or`] of a piece of 1 to [`SHORT_KEY`] bytes, in the table of short pieces.
    #[inline]
    fn get_or_short(&mut self, piece: &[u8], count: impl FnOnce(&[u8]) -> usize) -> usize {
        const LEN_AT: u32 = 56;
        const COUNT_AT: u32 = 59;
        const KEY: u64 = (1 << COUNT_AT) - 1;
        const K: u64 = 0x9E37_79B9_7F4A_7C15;
        let key = load_short(piece) | (piece.len() as u64) << LEN_AT;
        let slot =
            &mut self.short[(key.wrapping_mul(K) >> (64 - SHORT_SLOTS.trailing_zeros())) as usize];
        if *slot & KEY == key {
            return (*slot >> COUNT_AT) as usize;
        }
        let n = count(piece);
        // A count above the length cannot happen; never store one that does not fit.
        if n <= SHORT_KEY {
            *slot = key | (n as u64) << COUNT_AT;
        }
        n
    }
}

/// The entry words for `piece` (at most [`MAX_KEY`] bytes), with a zero count byte: the piece's
/// bytes little-endian and zero-padded, its length in byte 30. Built with word loads, not a
/// byte copy into a buffer (which costs a `memcpy` call per piece).
#[inline]
fn probe(piece: &[u8]) -> Entry {
    let mut words = [0u64; 4];
    let mut chunks = piece.chunks_exact(8);
    for (w, c) in words.iter_mut().zip(&mut chunks) {
        *w = u64::from_le_bytes(c.try_into().expect("8 bytes"));
    }
    let rest = chunks.remainder();
    if !rest.is_empty() {
        words[piece.len() / 8] = load_short(rest);
    }
    words[3] |= (piece.len() as u64) << (8 * (MAX_KEY - 24));
    words
}

/// `bytes` (1 to 7 of them) as a little-endian word, zero-padded: two overlapping loads (their
/// common bytes are the same, so or-ing them changes nothing).
#[inline]
fn load_short(bytes: &[u8]) -> u64 {
    let n = bytes.len();
    if n >= 4 {
        let lo = u32::from_le_bytes(bytes[..4].try_into().expect("4 bytes"));
        let hi = u32::from_le_bytes(bytes[n - 4..].try_into().expect("4 bytes"));
        u64::from(lo) | (u64::from(hi) << (8 * (n - 4)))
    } else {
        u64::from(bytes[0])
            | (u64::from(bytes[n / 2]) << (8 * (n / 2)))
            | (u64::from(bytes[n - 1]) << (8 * (n - 1)))
    }
}

/// Slot index of a probe: a multiply-xor hash of its words.
#[inline]
fn slot_of(probe: &Entry) -> usize {
    const K: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut h = 0u64;
    for w in probe {
        h = (h.rotate_left(23) ^ w).wrapping_mul(K);
    }
    (h >> (64 - SLOTS.trailing_zeros())) as usize
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A stand-in count that tells pieces apart (a real count is at most the length; the table
    /// of longer pieces stores anything below 256, that of short pieces up to [`SHORT_KEY`]).
    fn fingerprint(p: &[u8]) -> usize {
        (p.len() * 31 + p.iter().map(|&b| b as usize).sum::<usize>()) % 251
    }

    /// The entry words are the layout of [`Entry`]: the piece's bytes zero-padded to 30, the
    /// length in byte 30, the count byte zero.
    #[test]
    fn probe_words_are_the_entry_layout() {
        for len in 1..=MAX_KEY {
            for seed in 0..8u8 {
                let piece: Vec<u8> = (0..len as u8)
                    .map(|i| i.wrapping_mul(37).wrapping_add(seed.wrapping_mul(101)) | 1)
                    .collect();
                let mut bytes = [0u8; 32];
                bytes[..len].copy_from_slice(&piece);
                bytes[MAX_KEY] = len as u8;
                let want: Entry = std::array::from_fn(|i| {
                    u64::from_le_bytes(bytes[8 * i..8 * i + 8].try_into().unwrap())
                });
                assert_eq!(probe(&piece), want, "{piece:?}");
            }
        }
    }

    /// The table of short pieces keeps every length and count apart: all-ones bytes (whose
    /// word fills the key's bits), a piece and the same bytes with a zero byte after them, and
    /// each count up to the length. A count that does not fit is recounted, never truncated.
    #[test]
    fn short_pieces_keep_their_bytes_length_and_count_apart() {
        let mut cache = Cache::new();
        for len in 1..=SHORT_KEY {
            for n in 1..=len {
                let ones = vec![0xFFu8; len];
                let mut zero = vec![b'q'; len - 1];
                zero.push(0);
                for p in [&ones[..], &zero[..], &zero[..len - 1]] {
                    let mut fresh = Cache::new();
                    if p.is_empty() {
                        continue;
                    }
                    assert_eq!(fresh.get_or(p, |_| n), n);
                    assert_eq!(fresh.get_or(p, |_| 99), n, "{p:?} count {n}");
                }
            }
            let p = vec![b'z'; len];
            assert_eq!(cache.get_or(&p, |_| SHORT_KEY + 1), SHORT_KEY + 1);
            assert_eq!(
                cache.get_or(&p, |_| 3),
                3,
                "a count that did not fit was kept"
            );
        }
        // "ab" and "ab\0" share their padded bytes and differ in length.
        let mut cache = Cache::new();
        assert_eq!(cache.get_or(b"ab", |_| 1), 1);
        assert_eq!(cache.get_or(b"ab\0", |_| 2), 2);
        assert_eq!(cache.get_or(b"ab", |_| 9), 1);
        assert_eq!(cache.get_or(b"ab\0", |_| 9), 2);
    }

    #[test]
    fn a_hit_returns_the_remembered_count_and_a_collision_recounts() {
        let mut cache = Cache::new();
        let mut calls = 0;
        let mut count = |p: &[u8]| {
            calls += 1;
            fingerprint(p)
        };
        assert_eq!(cache.get_or(b"hello", &mut count), fingerprint(b"hello"));
        assert_eq!(cache.get_or(b"hello", &mut count), fingerprint(b"hello"));
        assert_eq!(cache.get_or(b"hellp", &mut count), fingerprint(b"hellp"));
        // Same zero-padded bytes, different lengths: the length byte tells them apart.
        assert_eq!(cache.get_or(b"ab", &mut count), fingerprint(b"ab"));
        assert_eq!(cache.get_or(b"ab\0", &mut count), fingerprint(b"ab\0"));
        assert_eq!(cache.get_or(b"ab", &mut count), fingerprint(b"ab"));
        let long = [b'x'; MAX_KEY + 1];
        assert_eq!(cache.get_or(&long, &mut count), fingerprint(&long));
        assert_eq!(cache.get_or(&long, &mut count), fingerprint(&long));
        let full = [b'y'; MAX_KEY];
        assert_eq!(cache.get_or(&full, &mut count), fingerprint(&full));
        assert_eq!(cache.get_or(&full, &mut count), fingerprint(&full));
        // hello, hellp, ab, ab\0 and full once each (ab was still cached), the long piece twice
        // (never cached); if a collision evicted "ab", one more.
        assert!((7..=8).contains(&calls), "{calls} calls");
        // Many more pieces than slots: every answer stays right whatever they evicted.
        for i in 0..(4 * SHORT_SLOTS) {
            let p = format!("{:x}", i * 7919);
            let p = &p[..p.len().min(SHORT_KEY)];
            assert_eq!(cache.get_or(p.as_bytes(), |p| p.len()), p.len());
            assert_eq!(cache.get_or(p.as_bytes(), |_| 0), p.len());
        }
        for i in 0..(4 * SLOTS) {
            let p = format!("w{i:07}-{}", "z".repeat(i % 22));
            assert_eq!(
                cache.get_or(p.as_bytes(), fingerprint),
                fingerprint(p.as_bytes())
            );
            assert_eq!(cache.get_or(p.as_bytes(), |_| 0), fingerprint(p.as_bytes()));
        }
    }
}

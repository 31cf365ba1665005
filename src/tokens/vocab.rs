//! The o200k_base vocabulary as a compact table compiled into the binary (see `build.rs`), and
//! the byte-pair merge that counts one pre-token piece with it.
//!
//! The count is tiktoken's definition of the encoding: a piece that is itself a token is one
//! token; otherwise start from single bytes and repeatedly merge the adjacent pair whose
//! concatenation has the lowest rank (the leftmost such pair on a tie) until no adjacent pair
//! is a token; the count is the number of parts left. Short pieces use a linear scan over a
//! small array (what most pieces are, and fastest there); long ones a heap over a linked list,
//! so a piece of a megabyte of one letter costs `n log n`, not `n²`. Tests hold both to each
//! other and to `bpe-openai`'s encoder (`tests/it/tokens_props.rs`).
//!
//! The table is about 4 MB of read-only data mapped from the executable, against about 70 MB of
//! heap for `bpe-openai`'s encoder; loading it is one pass over its tokens (for the 8 KB
//! table of two-byte tokens).

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use super::vocab_hash::hash;

static DATA: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/o200k.bin"));

/// Pieces up to this many bytes merge by linear scan; longer ones with a heap.
const SHORT: usize = 64;

/// "No token": a pair that does not merge.
const NONE: u32 = u32::MAX;

/// The compiled vocabulary: rank lookup by bytes.
pub struct Vocab {
    n: usize,
    mask: usize,
    starts: &'static [u8],
    index: &'static [u8],
    bytes: &'static [u8],
    /// One bit per two-byte string (first byte × 256 + second): set when it is a token. A
    /// two-byte piece is one token or two, and this 8 KB table says which without a probe.
    pairs: Box<[u64; 1024]>,
}

fn word(b: &[u8], i: usize) -> u32 {
    u32::from_le_bytes([b[4 * i], b[4 * i + 1], b[4 * i + 2], b[4 * i + 3]])
}

/// The embedded o200k_base vocabulary.
pub fn o200k() -> &'static Vocab {
    static VOCAB: std::sync::OnceLock<Vocab> = std::sync::OnceLock::new();
    VOCAB.get_or_init(|| {
        let n = word(DATA, 0) as usize;
        let slots = word(DATA, 1) as usize;
        let starts_at = 8;
        let index_at = starts_at + 4 * (n + 1);
        let bytes_at = index_at + 4 * slots;
        let mut vocab = Vocab {
            n,
            mask: slots - 1,
            starts: &DATA[starts_at..index_at],
            index: &DATA[index_at..bytes_at],
            bytes: &DATA[bytes_at..],
            pairs: Box::new([0; 1024]),
        };
        for rank in 0..n as u32 {
            if let &[a, b] = vocab.token(rank) {
                let k = usize::from(a) << 8 | usize::from(b);
                vocab.pairs[k / 64] |= 1 << (k % 64);
            }
        }
        vocab
    })
}

impl Vocab {
    /// Number of tokens.
    pub fn len(&self) -> usize {
        self.n
    }

    /// Never true: the vocabulary has tokens.
    pub fn is_empty(&self) -> bool {
        self.n == 0
    }

    /// The bytes of the token of `rank`.
    pub fn token(&self, rank: u32) -> &'static [u8] {
        let r = rank as usize;
        &self.bytes[word(self.starts, r) as usize..word(self.starts, r + 1) as usize]
    }

    /// The rank of `bytes` if they are a token, else [`NONE`].
    #[inline]
    fn rank_or_none(&self, bytes: &[u8]) -> u32 {
        let mut slot = hash(bytes) as usize & self.mask;
        loop {
            let entry = word(self.index, slot);
            if entry == 0 {
                return NONE;
            }
            if self.token(entry - 1) == bytes {
                return entry - 1;
            }
            slot = (slot + 1) & self.mask;
        }
    }

    /// The rank of `bytes` if they are a token.
    pub fn rank(&self, bytes: &[u8]) -> Option<u32> {
        Some(self.rank_or_none(bytes)).filter(|&r| r != NONE)
    }

    /// Tokens of a two-byte piece: one if it is a token, else two (its bytes).
    #[inline]
    pub fn count_pair(&self, a: u8, b: u8) -> usize {
        let k = usize::from(a) << 8 | usize::from(b);
        2 - (self.pairs[k / 64] >> (k % 64) & 1) as usize
    }

    /// Tokens of one pre-token piece (tiktoken's byte-pair merge; see the module docs).
    pub fn count_piece(&self, piece: &[u8]) -> usize {
        match piece.len() {
            0 | 1 => piece.len(),
            _ if self.rank_or_none(piece) != NONE => 1,
            n if n <= SHORT => self.merge_short(piece),
            _ => self.merge_long(piece),
        }
    }

    /// Linear-scan merge for pieces of at most [`SHORT`] bytes: `parts[i]` is the start of
    /// part `i` and the rank of merging part `i` with part `i + 1`; a sentinel part marks the
    /// end.
    fn merge_short(&self, piece: &[u8]) -> usize {
        let n = piece.len();
        let mut start = [0u8; SHORT + 1];
        let mut rank = [NONE; SHORT + 1];
        for (i, s) in start.iter_mut().enumerate().take(n + 1) {
            *s = i as u8;
        }
        for i in 0..n - 1 {
            rank[i] = self.rank_or_none(&piece[i..i + 2]);
        }
        // Parts are 0..len; the sentinel is index len (start n).
        let mut len = n;
        loop {
            let mut best = NONE;
            let mut at = 0;
            for (i, &r) in rank[..len].iter().enumerate() {
                if r < best {
                    best = r;
                    at = i;
                }
            }
            if best == NONE {
                return len;
            }
            // Merge part `at` with part `at + 1`: drop `at + 1`.
            start.copy_within(at + 2..=len, at + 1);
            rank.copy_within(at + 2..=len, at + 1);
            len -= 1;
            // `at` now spans start[at]..start[at + 1]; its pair with the next part, and the
            // previous part's pair with it, change.
            let pair = |i: usize| -> u32 {
                if i + 2 <= len {
                    self.rank_or_none(&piece[start[i] as usize..start[i + 2] as usize])
                } else {
                    NONE
                }
            };
            rank[at] = pair(at);
            if at > 0 {
                rank[at - 1] = pair(at - 1);
            }
        }
    }

    /// Heap merge for long pieces: parts as a linked list over byte offsets, candidate merges
    /// in a min-heap by (rank, start), stale candidates skipped when popped.
    fn merge_long(&self, piece: &[u8]) -> usize {
        let n = piece.len();
        // next[i] / prev[i]: the neighbouring part starts of the part starting at i (n is the
        // end); rank[i]: rank of merging the part at i with the next one, NONE if there is no
        // such token or i is no longer a part start.
        let mut next: Vec<u32> = (1..=n as u32).collect();
        let mut prev: Vec<u32> = (0..n as u32).map(|i| i.wrapping_sub(1)).collect();
        let mut rank = vec![NONE; n];
        let mut heap = BinaryHeap::with_capacity(n);
        for i in 0..n - 1 {
            rank[i] = self.rank_or_none(&piece[i..i + 2]);
            if rank[i] != NONE {
                heap.push(Reverse((rank[i], i as u32)));
            }
        }
        let mut parts = n;
        while let Some(Reverse((r, i))) = heap.pop() {
            let i = i as usize;
            if rank[i] != r {
                continue;
            }
            let j = next[i] as usize;
            let k = next[j] as usize;
            rank[j] = NONE;
            next[i] = k as u32;
            if k < n {
                prev[k] = i as u32;
            }
            parts -= 1;
            rank[i] = if k < n {
                self.rank_or_none(&piece[i..next[k] as usize])
            } else {
                NONE
            };
            if rank[i] != NONE {
                heap.push(Reverse((rank[i], i as u32)));
            }
            if i > 0 {
                let p = prev[i] as usize;
                rank[p] = self.rank_or_none(&piece[p..k]);
                if rank[p] != NONE {
                    heap.push(Reverse((rank[p], p as u32)));
                }
            }
        }
        parts
    }

    /// [`Vocab::count_piece`] with the heap merge at any length (tests compare the two).
    #[doc(hidden)]
    pub fn count_piece_by_heap(&self, piece: &[u8]) -> usize {
        match piece.len() {
            0 | 1 => piece.len(),
            _ if self.rank_or_none(piece) != NONE => 1,
            _ => self.merge_long(piece),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_holds_o200k() {
        let v = o200k();
        // o200k_base's mergeable ranks (its special tokens are not part of counting).
        assert_eq!(v.len(), 199_998);
        // Every byte is a token (ranks 0..256 are the bytes in tiktoken's order).
        for b in 0u8..=255 {
            assert!(v.rank(&[b]).is_some(), "byte {b:#04x}");
        }
        for rank in [0u32, 1, 255, 256, 1000, 150_000, 199_997] {
            assert_eq!(v.rank(v.token(rank)), Some(rank));
        }
        assert_eq!(v.rank(b"\xff\xfe\xfd\xfc not a token at all"), None);
    }

    /// Every two-byte string: the pair table agrees with the merge.
    #[test]
    fn pair_counts_are_the_merge_counts() {
        let v = o200k();
        for a in 0..=255u8 {
            for b in 0..=255u8 {
                assert_eq!(
                    v.count_pair(a, b),
                    v.count_piece(&[a, b]),
                    "{a:#04x} {b:#04x}"
                );
            }
        }
    }

    #[test]
    fn short_and_long_merges_agree() {
        let v = o200k();
        let texts: &[&[u8]] = &[
            b"hello",
            b"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
            b"Supercalifragilisticexpialidocious",
            b"--------------------------------------------------------------",
            b"\xe4\xbd\xa0\xe5\xa5\xbd\xe4\xb8\x96\xe7\x95\x8c",
            b"xqzvxqzvxqzvxqzv",
        ];
        for t in texts {
            assert_eq!(v.merge_short(t), v.merge_long(t), "{t:?}");
        }
    }
}

//! opencode's identifiers (`Identifier.create`, `src/id/id.ts@0ae6794d`): `prefix_`, then
//! 12 hex digits (the low 48 bits of `ms * 4096 + counter`, bitwise-inverted for descending
//! ids), then 14 base62 characters. opencode draws the 14 characters at random; agent-db
//! derives them from a hash of what it writes, so a run is reproducible and ids never collide
//! in a session.

use sha2::{Digest, Sha256};

const BASE62: &[u8] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
const LOW48: u64 = (1 << 48) - 1;

/// An ascending id (`msg`, `prt`) made at `ms` with the per-process `counter` (1 for the first
/// id of a millisecond), its random part drawn from `seed`.
pub fn ascending(prefix: &str, ms: i64, counter: u64, seed: &str) -> String {
    make(
        prefix,
        (ms as u64).wrapping_mul(4096).wrapping_add(counter),
        seed,
    )
}

/// A descending id (`ses`).
pub fn descending(prefix: &str, ms: i64, counter: u64, seed: &str) -> String {
    make(
        prefix,
        !(ms as u64).wrapping_mul(4096).wrapping_add(counter),
        seed,
    )
}

fn make(prefix: &str, v: u64, seed: &str) -> String {
    let digest = Sha256::digest(seed.as_bytes());
    let tail: String = digest
        .iter()
        .take(14)
        .map(|b| BASE62[(*b % 62) as usize] as char)
        .collect();
    format!("{prefix}_{:012x}{tail}", v & LOW48)
}

/// The millisecond an ascending id's hex part encodes, modulo the 48-bit wrap (opencode's own
/// `Identifier.timestamp` has the same limit).
#[cfg(test)]
fn hex_part(id: &str) -> Option<u64> {
    let (_, rest) = id.split_once('_')?;
    u64::from_str_radix(rest.get(..12)?, 16).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_ids_opencode_wrote() {
        // msg_209a303d4001… was written at 1795458008020 ms (2026-11-23, after the wrap).
        let id = ascending("msg", 1_795_458_008_020, 1, "x");
        assert!(id.starts_with("msg_209a303d4001"), "{id}");
        assert_eq!(id.len(), "msg_".len() + 26);
        // Session ids are descending: ses_df65… for the same era.
        let s = descending("ses", 1_795_458_008_020, 1, "x");
        assert!(s.starts_with("ses_df65cfc2bffe"), "{s}");
        assert_eq!(hex_part(&id), Some(0x209a303d4001));
    }

    #[test]
    fn the_48_bit_wrap_puts_later_ids_first() {
        let wrap = 26i64 << 36; // 2026-08-14T11:19:55.136Z
        let before = ascending("msg", wrap - 1, 1, "a");
        let after = ascending("msg", wrap, 1, "a");
        assert!(after < before);
    }
}

//! Reading listing columns leniently, the same way for every store: a bad cell is reported on
//! its conversation's row instead of failing the whole listing.

use rusqlite::types::ValueRef;
use rusqlite::Row;

/// A text column read leniently: invalid UTF-8 (which a Go writer can store) becomes U+FFFD;
/// BLOBs are read the same way and numbers become their text.
pub(crate) fn lossy(r: &Row<'_>, i: usize) -> rusqlite::Result<Option<String>> {
    Ok(match r.get_ref(i)? {
        ValueRef::Null => None,
        ValueRef::Text(b) | ValueRef::Blob(b) => Some(String::from_utf8_lossy(b).into_owned()),
        ValueRef::Integer(n) => Some(n.to_string()),
        ValueRef::Real(f) => Some(f.to_string()),
    })
}

/// An integer column read leniently: REALs are truncated, numeric TEXT is parsed, anything else
/// is `None`.
pub(crate) fn int(r: &Row<'_>, i: usize) -> rusqlite::Result<Option<i64>> {
    Ok(match r.get_ref(i)? {
        ValueRef::Integer(n) => Some(n),
        ValueRef::Real(f) => Some(f as i64),
        ValueRef::Text(b) => std::str::from_utf8(b)
            .ok()
            .and_then(|t| t.trim().parse().ok()),
        _ => None,
    })
}

/// A stored value as SQLite orders it (BINARY collation): NULL, then numbers, then text (by
/// bytes), then BLOBs. For listing orders computed in memory.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum SortKey {
    Null,
    Number(f64),
    Text(Vec<u8>),
    Blob(Vec<u8>),
}

impl SortKey {
    pub(crate) fn of(v: ValueRef<'_>) -> SortKey {
        match v {
            ValueRef::Null => SortKey::Null,
            ValueRef::Integer(i) => SortKey::Number(i as f64),
            ValueRef::Real(f) => SortKey::Number(f),
            ValueRef::Text(t) => SortKey::Text(t.to_vec()),
            ValueRef::Blob(b) => SortKey::Blob(b.to_vec()),
        }
    }

    fn rank(&self) -> u8 {
        match self {
            SortKey::Null => 0,
            SortKey::Number(_) => 1,
            SortKey::Text(_) => 2,
            SortKey::Blob(_) => 3,
        }
    }

    pub(crate) fn cmp(&self, other: &SortKey) -> std::cmp::Ordering {
        match (self, other) {
            (SortKey::Number(a), SortKey::Number(b)) => a.total_cmp(b),
            (SortKey::Text(a), SortKey::Text(b)) | (SortKey::Blob(a), SortKey::Blob(b)) => a.cmp(b),
            _ => self.rank().cmp(&other.rank()),
        }
    }
}

/// Rows a prefiltered scan keeps, put into a listing order in memory: newest first by a stored
/// value, ties in rowid order (SQLite's `ORDER BY value DESC, rowid`). Bounded, so memory stays
/// flat: past [`NewestFirst::CAP`] rows the scan is told to fall back to SQLite's order.
pub(crate) struct NewestFirst<T> {
    rows: Vec<(SortKey, i64, T)>,
}

impl<T> NewestFirst<T> {
    /// At most this many rows are held (well under 1 KB each).
    pub(crate) const CAP: usize = 20_000;

    pub(crate) fn new() -> NewestFirst<T> {
        NewestFirst { rows: Vec::new() }
    }

    /// Hold one row; `false` (nothing held) when the cap is reached.
    pub(crate) fn push(&mut self, key: SortKey, rowid: i64, row: T) -> bool {
        if self.rows.len() == Self::CAP {
            return false;
        }
        self.rows.push((key, rowid, row));
        true
    }

    /// The rows in listing order, with their keys.
    pub(crate) fn sorted(mut self) -> Vec<(SortKey, T)> {
        self.rows
            .sort_by(|a, b| newest_first((&a.0, a.1), (&b.0, b.1)));
        self.rows.into_iter().map(|(k, _, t)| (k, t)).collect()
    }
}

/// The listing order of two (stored value, rowid) pairs: newest first, ties in rowid order.
pub(crate) fn newest_first(a: (&SortKey, i64), b: (&SortKey, i64)) -> std::cmp::Ordering {
    b.0.cmp(a.0).then(a.1.cmp(&b.1))
}

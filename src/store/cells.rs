//! Reading listing columns leniently, the same way for every store: a bad cell is reported on
//! its conversation's row instead of failing the whole listing.

use std::path::Path;

use rusqlite::types::{ToSqlOutput, Value, ValueRef};
use rusqlite::{Connection, Row};
use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::error::{Error, Result, SqlContext};

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

/// What a listed row holds on the heap (its strings), for [`NewestFirst`]'s memory bound.
fn heap_bytes(m: &super::ConversationMeta) -> usize {
    let opt = |o: &Option<String>| o.as_ref().map_or(0, String::capacity);
    m.id.capacity()
        + m.provider.capacity()
        + m.created_at.capacity()
        + m.updated_at.capacity()
        + opt(&m.name)
        + opt(&m.api_mode)
        + opt(&m.model)
        + opt(&m.cwd)
        + opt(&m.problem)
}

/// A listing's kept rows held in memory before they spill to SQLite's sorter: at most this many
/// bytes as [`NewestFirst::push_weighed`] counts them (a listed row of a typical store is about
/// 700: the struct and its strings, so about 70,000 rows), whatever the store's size.
const KEPT_IN_MEMORY: usize = 48 << 20;

impl NewestFirst<super::ConversationMeta> {
    /// A listing's kept rows, in memory up to [`KEPT_IN_MEMORY`] bytes.
    pub(crate) fn listing() -> Self {
        Self::with_byte_cap(KEPT_IN_MEMORY)
    }

    /// [`NewestFirst::push_weighed`] of a listed row, weighed by its strings.
    pub(crate) fn push_meta(
        &mut self,
        path: &Path,
        key: SortKey,
        rowid: i64,
        m: super::ConversationMeta,
    ) -> Result<()> {
        let heap = heap_bytes(&m);
        self.push_weighed(path, key, rowid, m, heap)
    }
}

/// Rows a prefiltered scan keeps, put into a listing order: newest first by a stored value, ties
/// in rowid order (SQLite's `ORDER BY value DESC, rowid`). Rows are sorted in memory up to a
/// bound ([`NewestFirst::listing`]: [`KEPT_IN_MEMORY`] bytes); past that every row goes to a private temporary database and SQLite's
/// sorter orders them (it spills to disk), so memory stays flat and the store is still read in
/// one sequential pass whatever share of it is kept.
pub(crate) struct NewestFirst<T> {
    rows: Vec<(SortKey, i64, T)>,
    spill: Option<Connection>,
    cap: usize,
    /// The bytes held in memory so far and the bound past which rows spill (rows pushed with
    /// [`NewestFirst::push_weighed`]; `usize::MAX`: the row cap alone).
    bytes: usize,
    byte_cap: usize,
}

impl<T: Serialize + DeserializeOwned> NewestFirst<T> {
    fn with_cap(cap: usize) -> NewestFirst<T> {
        NewestFirst {
            rows: Vec::new(),
            spill: None,
            cap,
            bytes: 0,
            byte_cap: usize::MAX,
        }
    }

    /// Rows held in memory up to `byte_cap` bytes in all (as [`NewestFirst::push_weighed`]
    /// counts them) instead of a number of rows; past that they spill.
    pub(crate) fn with_byte_cap(byte_cap: usize) -> NewestFirst<T> {
        NewestFirst {
            byte_cap,
            ..Self::with_cap(usize::MAX)
        }
    }

    /// [`NewestFirst::push`] of a row that holds `heap` bytes on the heap besides the key's.
    pub(crate) fn push_weighed(
        &mut self,
        path: &Path,
        key: SortKey,
        rowid: i64,
        row: T,
        heap: usize,
    ) -> Result<()> {
        let key_heap = match &key {
            SortKey::Text(b) | SortKey::Blob(b) => b.capacity(),
            SortKey::Null | SortKey::Number(_) => 0,
        };
        self.bytes += std::mem::size_of::<(SortKey, i64, T)>() + key_heap + heap;
        self.push(path, key, rowid, row)
    }

    /// Hold one row (in memory, or in the spill past the cap).
    pub(crate) fn push(&mut self, path: &Path, key: SortKey, rowid: i64, row: T) -> Result<()> {
        if self.spill.is_none() && self.rows.len() < self.cap && self.bytes <= self.byte_cap {
            self.rows.push((key, rowid, row));
            return Ok(());
        }
        if self.spill.is_none() {
            // An empty name: a private on-disk database, deleted when closed.
            let conn = Connection::open("").at(path)?;
            conn.execute_batch(
                "PRAGMA journal_mode = OFF; PRAGMA synchronous = OFF;
                 CREATE TABLE kept (k, r INTEGER NOT NULL, t TEXT NOT NULL); BEGIN;",
            )
            .at(path)?;
            for (k, r, t) in std::mem::take(&mut self.rows) {
                spill_row(&conn, path, &k, r, &t)?;
            }
            self.spill = Some(conn);
        }
        let conn = self.spill.as_ref().expect("spill opened above");
        spill_row(conn, path, &key, rowid, &row)
    }

    /// Hand `f` a puller of the rows in listing order, with their keys.
    pub(crate) fn with_sorted<R>(
        mut self,
        path: &Path,
        f: impl FnOnce(&mut dyn FnMut() -> Result<Option<(SortKey, T)>>) -> Result<R>,
    ) -> Result<R> {
        let Some(conn) = self.spill.take() else {
            // Sort positions, not the rows (a row is hundreds of bytes: moving them at every
            // step of the sort costs more than the comparisons). Stable, as before: equal pairs keep their
            // order.
            let rows = &self.rows;
            let mut order: Vec<u32> = (0..rows.len() as u32).collect();
            order.sort_by(|&a, &b| {
                let (a, b) = (&rows[a as usize], &rows[b as usize]);
                newest_first((&a.0, a.1), (&b.0, b.1))
            });
            let mut slots: Vec<Option<(SortKey, T)>> = self
                .rows
                .into_iter()
                .map(|(k, _, t)| Some((k, t)))
                .collect();
            let mut it = order.into_iter().map(|i| slots[i as usize].take());
            return f(&mut || Ok(it.next().flatten()));
        };
        let mut stmt = conn
            .prepare("SELECT k, t FROM kept ORDER BY k DESC, r")
            .at(path)?;
        let mut rows = stmt.query([]).at(path)?;
        f(&mut || match rows.next().at(path)? {
            Some(r) => {
                let key = SortKey::of(r.get_ref(0).at(path)?);
                let json: String = r.get(1).at(path)?;
                let t = serde_json::from_str(&json)
                    .map_err(|e| Error::Internal(format!("spilled listing row: {e}")))?;
                Ok(Some((key, t)))
            }
            None => Ok(None),
        })
    }

    /// The rows in listing order, without their keys.
    pub(crate) fn each(self, path: &Path, mut f: impl FnMut(T) -> Result<bool>) -> Result<()> {
        self.with_sorted(path, |next| {
            while let Some((_, t)) = next()? {
                if !f(t)? {
                    break;
                }
            }
            Ok(())
        })
    }
}

fn spill_row<T: Serialize>(
    conn: &Connection,
    path: &Path,
    k: &SortKey,
    r: i64,
    t: &T,
) -> Result<()> {
    let key = match k {
        SortKey::Null => ToSqlOutput::Owned(Value::Null),
        SortKey::Number(n) => ToSqlOutput::Owned(Value::Real(*n)),
        SortKey::Text(b) => ToSqlOutput::Borrowed(ValueRef::Text(b)),
        SortKey::Blob(b) => ToSqlOutput::Borrowed(ValueRef::Blob(b)),
    };
    let json = serde_json::to_string(t)
        .map_err(|e| Error::Internal(format!("spilled listing row: {e}")))?;
    conn.prepare_cached("INSERT INTO kept (k, r, t) VALUES (?1, ?2, ?3)")
        .at(path)?
        .execute(rusqlite::params![key, r, json])
        .at(path)?;
    Ok(())
}

/// The listing order of two (stored value, rowid) pairs: newest first, ties in rowid order.
pub(crate) fn newest_first(a: (&SortKey, i64), b: (&SortKey, i64)) -> std::cmp::Ordering {
    b.0.cmp(a.0).then(a.1.cmp(&b.1))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn value() -> impl Strategy<Value = Value> {
        prop_oneof![
            Just(Value::Null),
            (-3i64..3).prop_map(Value::Integer),
            prop_oneof![Just(0.5f64), Just(-1.0), Just(2.0)].prop_map(Value::Real),
            prop::collection::vec(prop_oneof![Just(b'a'), Just(b'b'), Just(0xff)], 0..3)
                .prop_map(|b| Value::Text(String::from_utf8_lossy(&b).into_owned())),
            prop::collection::vec(0u8..3, 0..3).prop_map(Value::Blob),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(300))]
        /// In memory or spilled, the order is SQLite's own `ORDER BY k DESC, rowid` on a table
        /// the test writes itself.
        #[test]
        fn newest_first_is_sqlites_order(
            keys in prop::collection::vec(value(), 0..40),
            cap in 0usize..45,
        ) {
            let path = Path::new("test");
            let db = Connection::open_in_memory().unwrap();
            db.execute_batch("CREATE TABLE t (k)").unwrap();
            let mut kept = NewestFirst::with_cap(cap);
            for k in &keys {
                db.execute("INSERT INTO t (k) VALUES (?1)", [k]).unwrap();
                let rowid = db.last_insert_rowid();
                let key = db
                    .query_row("SELECT k FROM t WHERE rowid = ?1", [rowid], |r| Ok(SortKey::of(r.get_ref(0)?)))
                    .unwrap();
                kept.push(path, key, rowid, rowid).unwrap();
            }
            let want: Vec<i64> = db
                .prepare("SELECT rowid FROM t ORDER BY k DESC, rowid")
                .unwrap()
                .query_map([], |r| r.get(0))
                .unwrap()
                .collect::<rusqlite::Result<_>>()
                .unwrap();
            let mut got = Vec::new();
            kept.each(path, |r| {
                got.push(r);
                Ok(true)
            })
            .unwrap();
            prop_assert_eq!(got, want);
        }
    }
}

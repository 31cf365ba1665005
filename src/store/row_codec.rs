//! Whole rows as stored, in a compact byte form: the cold file of `retire` and the row frames of
//! `reclaim`'s archive hold rows this way. A cell keeps its storage class and exact bytes (TEXT
//! that is not valid UTF-8, a float bit for bit); a table's hidden rowids are read as a column.

use std::path::Path;

use rusqlite::types::{ToSqlOutput, ValueRef};
use rusqlite::{Connection, ToSql};

use crate::error::{Result, SqlContext};

/// An SQLite value owned byte for byte: TEXT keeps its bytes even when they are not valid UTF-8
/// (which rusqlite's own `Value` cannot hold: converting such a `ValueRef` panics).
#[derive(Debug, Clone, PartialEq)]
pub enum CellValue {
    Null,
    Integer(i64),
    Real(f64),
    Text(Vec<u8>),
    Blob(Vec<u8>),
}

impl CellValue {
    /// Copy a borrowed value, keeping its storage class and bytes.
    pub fn from_ref(v: ValueRef<'_>) -> CellValue {
        match v {
            ValueRef::Null => CellValue::Null,
            ValueRef::Integer(i) => CellValue::Integer(i),
            ValueRef::Real(f) => CellValue::Real(f),
            ValueRef::Text(t) => CellValue::Text(t.to_vec()),
            ValueRef::Blob(b) => CellValue::Blob(b.to_vec()),
        }
    }

    pub fn as_ref(&self) -> ValueRef<'_> {
        match self {
            CellValue::Null => ValueRef::Null,
            CellValue::Integer(i) => ValueRef::Integer(*i),
            CellValue::Real(f) => ValueRef::Real(*f),
            CellValue::Text(t) => ValueRef::Text(t),
            CellValue::Blob(b) => ValueRef::Blob(b),
        }
    }
}

impl ToSql for CellValue {
    fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
        Ok(ToSqlOutput::Borrowed(self.as_ref()))
    }
}

impl From<String> for CellValue {
    fn from(s: String) -> Self {
        CellValue::Text(s.into_bytes())
    }
}

impl From<&str> for CellValue {
    fn from(s: &str) -> Self {
        CellValue::Text(s.as_bytes().to_vec())
    }
}

impl From<i64> for CellValue {
    fn from(i: i64) -> Self {
        CellValue::Integer(i)
    }
}

/// One cell: a tag (0 NULL, 1 INTEGER, 2 REAL, 3 TEXT, 4 BLOB), then 8 bytes little-endian
/// (the integer, the float's bits, or the length of the bytes that follow).
pub fn encode_cell(out: &mut Vec<u8>, v: ValueRef<'_>) {
    match v {
        ValueRef::Null => out.push(0),
        ValueRef::Integer(i) => {
            out.push(1);
            out.extend_from_slice(&i.to_le_bytes());
        }
        ValueRef::Real(f) => {
            out.push(2);
            out.extend_from_slice(&f.to_bits().to_le_bytes());
        }
        ValueRef::Text(b) | ValueRef::Blob(b) => {
            out.push(if matches!(v, ValueRef::Text(_)) { 3 } else { 4 });
            out.extend_from_slice(&(b.len() as u64).to_le_bytes());
            out.extend_from_slice(b);
        }
    }
}

/// How many bytes [`encode_cell`] writes for `v`.
pub fn encoded_len(v: ValueRef<'_>) -> usize {
    match v {
        ValueRef::Null => 1,
        ValueRef::Integer(_) | ValueRef::Real(_) => 9,
        ValueRef::Text(b) | ValueRef::Blob(b) => 9 + b.len(),
    }
}

/// The cells [`encode_cell`] wrote, or `None` when the bytes are not such cells.
pub fn decode_cells(mut data: &[u8]) -> Option<Vec<CellValue>> {
    let mut out = Vec::new();
    while let Some((&tag, rest)) = data.split_first() {
        if tag == 0 {
            out.push(CellValue::Null);
            data = rest;
            continue;
        }
        let word = u64::from_le_bytes(rest.get(..8)?.try_into().ok()?);
        let rest = &rest[8..];
        let (cell, next) = match tag {
            1 => (CellValue::Integer(word as i64), rest),
            2 => (CellValue::Real(f64::from_bits(word)), rest),
            3 | 4 => {
                let n = usize::try_from(word).ok()?;
                let bytes = rest.get(..n)?.to_vec();
                let cell = if tag == 3 {
                    CellValue::Text(bytes)
                } else {
                    CellValue::Blob(bytes)
                };
                (cell, &rest[n..])
            }
            _ => return None,
        };
        out.push(cell);
        data = next;
    }
    Some(out)
}

/// A name quoted as an SQL identifier.
pub fn quote(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

/// (name, declared type, pk position) of each column of `table`; empty when it is missing.
pub fn table_info(
    conn: &Connection,
    path: &Path,
    table: &str,
) -> Result<Vec<(String, String, i64)>> {
    let mut st = conn
        .prepare_cached("SELECT name, type, pk FROM pragma_table_info(?1) ORDER BY cid")
        .at(path)?;
    let rows = st
        .query_map([table], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
        .at(path)?;
    rows.collect::<std::result::Result<_, _>>().at(path)
}

/// Whether `table` has rowids no column holds (not WITHOUT ROWID, no INTEGER PRIMARY KEY).
pub fn has_hidden_rowid(conn: &Connection, table: &str, info: &[(String, String, i64)]) -> bool {
    let pks: Vec<_> = info.iter().filter(|c| c.2 > 0).collect();
    let alias = pks.len() == 1 && pks[0].1.eq_ignore_ascii_case("INTEGER");
    let named = info
        .iter()
        .any(|c| ["rowid", "oid", "_rowid_"].contains(&c.0.to_ascii_lowercase().as_str()));
    !alias
        && !named
        && conn
            .prepare(&format!("SELECT rowid FROM {} LIMIT 0", quote(table)))
            .is_ok()
}

/// The columns that give `table`'s rows back as stored: every column, `rowid` first where the
/// table has rowids no column holds. Empty when the table is missing.
pub fn stored_columns(conn: &Connection, path: &Path, table: &str) -> Result<Vec<String>> {
    let info = table_info(conn, path, table)?;
    let mut columns: Vec<String> = info.iter().map(|(n, _, _)| n.clone()).collect();
    if !info.is_empty() && has_hidden_rowid(conn, table, &info) {
        columns.insert(0, "rowid".into());
    }
    Ok(columns)
}

/// Insert whole rows of `table` back (`cells` row after row, each with `columns`). A hidden
/// rowid (`columns[0] == "rowid"`) goes back as it was unless a row the agent wrote since holds
/// it: the row then takes a new one, as any insert would (no column holds it, so no reader
/// sees the difference), rather than the restore failing.
pub fn insert_rows(
    conn: &Connection,
    table: &str,
    columns: &[String],
    cells: &[CellValue],
) -> rusqlite::Result<()> {
    if columns.is_empty() {
        return Ok(());
    }
    let insert = |cols: &[String]| {
        format!(
            "INSERT INTO {} ({}) VALUES ({})",
            quote(table),
            cols.iter().map(|c| quote(c)).collect::<Vec<_>>().join(", "),
            vec!["?"; cols.len()].join(", ")
        )
    };
    let hidden = columns[0] == "rowid";
    let mut with_rowid = conn.prepare_cached(&insert(columns))?;
    let mut taken =
        conn.prepare_cached(&format!("SELECT 1 FROM {} WHERE rowid = ?1", quote(table)))?;
    for row in cells.chunks(columns.len()) {
        if hidden && taken.exists([&row[0]])? {
            conn.prepare_cached(&insert(&columns[1..]))?
                .execute(rusqlite::params_from_iter(&row[1..]))?;
        } else {
            with_rowid.execute(rusqlite::params_from_iter(row))?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn cell() -> impl Strategy<Value = CellValue> {
        prop_oneof![
            Just(CellValue::Null),
            any::<i64>().prop_map(CellValue::Integer),
            any::<u64>().prop_map(|b| CellValue::Real(f64::from_bits(b))),
            proptest::collection::vec(any::<u8>(), 0..40).prop_map(CellValue::Text),
            proptest::collection::vec(any::<u8>(), 0..40).prop_map(CellValue::Blob),
        ]
    }

    fn same(a: &CellValue, b: &CellValue) -> bool {
        match (a, b) {
            (CellValue::Real(x), CellValue::Real(y)) => x.to_bits() == y.to_bits(),
            _ => a == b,
        }
    }

    proptest! {
        /// Any cells come back with their storage class and bytes (a float bit for bit), and
        /// each takes the bytes `encoded_len` says.
        #[test]
        fn cells_round_trip(cells in proptest::collection::vec(cell(), 0..30)) {
            let mut data = Vec::new();
            for c in &cells {
                let before = data.len();
                encode_cell(&mut data, c.as_ref());
                prop_assert_eq!(data.len() - before, encoded_len(c.as_ref()));
            }
            let back = decode_cells(&data).unwrap();
            prop_assert_eq!(back.len(), cells.len());
            for (a, b) in cells.iter().zip(&back) {
                prop_assert!(same(a, b));
            }
        }

        /// Truncated or foreign bytes are refused, never misread as a shorter row.
        #[test]
        fn truncated_cells_are_refused(cells in proptest::collection::vec(cell(), 1..10), cut in 1usize..9) {
            let mut data = Vec::new();
            for c in &cells {
                encode_cell(&mut data, c.as_ref());
            }
            let last = {
                let mut d = Vec::new();
                encode_cell(&mut d, cells.last().unwrap().as_ref());
                d.len()
            };
            prop_assume!(last > 1 && cut < last);
            prop_assert!(decode_cells(&data[..data.len() - cut]).is_none());
        }
    }

    /// A table's hidden rowid is read as a column; an INTEGER PRIMARY KEY or a WITHOUT ROWID
    /// table has none.
    #[test]
    fn stored_columns_name_the_hidden_rowid_only() {
        let c = Connection::open_in_memory().unwrap();
        c.execute_batch(
            "CREATE TABLE a (id TEXT PRIMARY KEY, v);
             CREATE TABLE b (id INTEGER PRIMARY KEY, v);
             CREATE TABLE w (id TEXT PRIMARY KEY, v) WITHOUT ROWID;",
        )
        .unwrap();
        let p = Path::new("t.db");
        assert_eq!(stored_columns(&c, p, "a").unwrap(), ["rowid", "id", "v"]);
        assert_eq!(stored_columns(&c, p, "b").unwrap(), ["id", "v"]);
        assert_eq!(stored_columns(&c, p, "w").unwrap(), ["id", "v"]);
        assert!(stored_columns(&c, p, "missing").unwrap().is_empty());
    }

    /// Rows go back with their hidden rowid; one whose rowid a newer row holds takes a new one
    /// and every other cell as it was.
    #[test]
    fn insert_rows_keeps_free_rowids_and_moves_over_taken_ones() {
        let c = Connection::open_in_memory().unwrap();
        c.execute_batch(
            "CREATE TABLE e (id TEXT PRIMARY KEY, v);
             INSERT INTO e(rowid, id, v) VALUES (7, 'newer', 1);",
        )
        .unwrap();
        let cols: Vec<String> = ["rowid", "id", "v"].map(String::from).to_vec();
        let cells = vec![
            CellValue::Integer(5),
            CellValue::from("a"),
            CellValue::Blob(vec![0, 1]),
            CellValue::Integer(7),
            CellValue::from("b"),
            CellValue::Real(0.5),
        ];
        insert_rows(&c, "e", &cols, &cells).unwrap();
        let got: Vec<(i64, String, String)> = c
            .prepare("SELECT rowid, id, typeof(v) FROM e ORDER BY id")
            .unwrap()
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
            .unwrap()
            .map(|r| r.unwrap())
            .collect();
        assert_eq!(
            got,
            [
                (5, "a".into(), "blob".into()),
                (8, "b".into(), "real".into()),
                (7, "newer".into(), "integer".into())
            ]
        );
    }
}

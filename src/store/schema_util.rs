//! Helpers every store folder shares: whether a table exists and its column names, the "schema changed" error, the
//! status of a file whose schema check is all there is to say, one conversation's listing row
//! read by id with its message count, one read transaction over a listing pass, and the message
//! counts of a prefiltered pass's kept rows.

use std::collections::{HashMap, HashSet};
use std::path::Path;

use rusqlite::{Connection, OptionalExtension, Row};

use crate::error::{Error, Result, SqlContext};

use super::kind::SchemaStatus;
use super::ConversationMeta;

/// One read transaction over a pass that runs a statement per row (none when the caller holds
/// one already): the file is locked, and SQLite's cache checked against it, once for the pass
/// instead of once per statement. Read-only; dropping it ends it.
pub(crate) fn one_read<'c>(
    conn: &'c Connection,
    path: &Path,
) -> Result<Option<rusqlite::Transaction<'c>>> {
    if !conn.is_autocommit() {
        return Ok(None);
    }
    conn.unchecked_transaction().map(Some).at(path)
}

/// The column names of `table`, as the file spells them (empty when the table is missing).
pub(crate) fn columns(conn: &Connection, table: &str, path: &Path) -> Result<HashSet<String>> {
    Ok(column_list(conn, table, path)?.into_iter().collect())
}

/// The column names of `table` in the table's order (empty when the table is missing).
pub(crate) fn column_list(conn: &Connection, table: &str, path: &Path) -> Result<Vec<String>> {
    let mut st = conn
        .prepare_cached("SELECT name FROM pragma_table_info(?1) ORDER BY cid")
        .at(path)?;
    let rows = st.query_map([table], |r| r.get::<_, String>(0)).at(path)?;
    rows.collect::<std::result::Result<_, _>>().at(path)
}

/// Whether `table` exists in the file.
pub(crate) fn has_table(conn: &Connection, table: &str) -> rusqlite::Result<bool> {
    conn.query_row(
        "SELECT EXISTS (SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?1)",
        [table],
        |r| r.get(0),
    )
}

/// The error for a file whose schema is not one agent-db knows.
pub(crate) fn changed(path: &Path, detail: String) -> Error {
    Error::SchemaChanged {
        path: path.to_path_buf(),
        detail,
    }
}

impl SchemaStatus {
    /// The status of a file that passed its store's schema check, where a file newer than
    /// agent-db knows fails that check itself (so every file that passes is written).
    pub(crate) fn checked(version: String, newest_known: impl ToString) -> Self {
        SchemaStatus {
            version: Some(version),
            newest_known: Some(newest_known.to_string()),
            writable: true,
        }
    }
}

/// The most conversations [`KeptCounts`] counts at once (their counts held in memory: about
/// 10 MB); a larger store counts its kept rows one by one.
const MAX_COUNTED_AT_ONCE: u64 = 500_000;

/// The message counts of the rows a prefiltered listing pass keeps. The pass counts each kept
/// row as it reads it (`one`, the id bound as `?1`); once the share kept so far says the rows
/// still to count would cost more than counting every conversation at once, it runs `all`
/// (each conversation's rowid and count, by the same rule, in the order of the ids' index so
/// the counts' index is read in order) and looks the rest up by rowid. A probe in the table's
/// order costs `weight` times a row of that (2 for goose; 3 for docker-agent, whose probes
/// compete for SQLite's cache with the pass's own reads).
pub(crate) struct KeptCounts<'c> {
    conn: &'c Connection,
    one: rusqlite::Statement<'c>,
    all: &'static str,
    weight: u64,
    /// Rows in the table (its largest rowid), and the rows read and kept so far.
    total: u64,
    read: u64,
    kept: u64,
    counted: Option<HashMap<i64, i64>>,
}

impl<'c> KeptCounts<'c> {
    /// Counts for a pass over `table`.
    pub(crate) fn new(
        conn: &'c Connection,
        path: &Path,
        table: &str,
        one: &str,
        all: &'static str,
        weight: u64,
    ) -> Result<KeptCounts<'c>> {
        let total: Option<i64> = conn
            .query_row(&format!("SELECT MAX(rowid) FROM {table}"), [], |r| r.get(0))
            .at(path)?;
        Ok(KeptCounts {
            conn,
            one: conn.prepare(one).at(path)?,
            all,
            weight,
            total: total.unwrap_or(0).max(0) as u64,
            read: 0,
            kept: 0,
            counted: None,
        })
    }

    /// Whether counting all `total` rows at once costs less than counting one by one (each
    /// `weight` times as dear) the rows the pass is still expected to keep, after `read` rows
    /// of which `kept` were kept: at least a sixteenth of the table read, and more than
    /// `total / weight` rows expected still to be kept. Never past [`MAX_COUNTED_AT_ONCE`]
    /// rows, so the counts held stay bounded (about 20 bytes a row) whatever the store's size.
    pub(crate) fn batch_pays(total: u64, read: u64, kept: u64, weight: u64) -> bool {
        read > 0
            && total <= MAX_COUNTED_AT_ONCE
            && read.saturating_mul(16) >= total
            && (kept.saturating_mul(total) / read)
                .saturating_sub(kept)
                .saturating_mul(weight)
                > total
    }

    /// Note a row the pass read (`kept`: one whose count is then asked for).
    pub(crate) fn note(&mut self, path: &Path, kept: bool) -> Result<()> {
        self.read += 1;
        self.kept += u64::from(kept);
        if kept
            && self.counted.is_none()
            && Self::batch_pays(self.total, self.read, self.kept, self.weight)
        {
            let mut st = self.conn.prepare(self.all).at(path)?;
            let rows = st
                .query_map([], |r| Ok((r.get::<_, i64>(0)?, r.get::<_, i64>(1)?)))
                .at(path)?;
            self.counted = Some(rows.collect::<rusqlite::Result<_>>().at(path)?);
        }
        Ok(())
    }

    /// The count of the kept row `rowid`: looked up when counted at once and `listed`
    /// and found there (the
    /// caller's word that `all` counted it by the same rule as `one` with `id`), else counted
    /// alone.
    pub(crate) fn count(
        &mut self,
        path: &Path,
        rowid: i64,
        listed: bool,
        id: impl rusqlite::ToSql,
    ) -> Result<i64> {
        if let Some(n) = self
            .counted
            .as_ref()
            .filter(|_| listed)
            .and_then(|c| c.get(&rowid))
        {
            return Ok(*n);
        }
        self.one.query_row([id], |c| c.get(0)).at(path)
    }
}

/// One conversation's listing row: `sql` selects it with the id bound as `?1`, `row` turns it
/// into its meta, and `count_sql` (the id as `?1` too) gives its `message_count`.
pub(crate) fn meta_with_count(
    conn: &Connection,
    path: &Path,
    sql: &str,
    count_sql: &str,
    id: &str,
    row: impl FnOnce(&Row<'_>) -> rusqlite::Result<ConversationMeta>,
) -> Result<Option<ConversationMeta>> {
    let Some(mut m) = conn.query_row(sql, [id], row).optional().at(path)? else {
        return Ok(None);
    };
    m.message_count = Some(conn.query_row(count_sql, [id], |c| c.get(0)).at(path)?);
    Ok(Some(m))
}

/// Every row `sql` returns for `id`, each an object of its columns as stored (`show --raw`):
/// text as a string (not valid UTF-8: `{"base64": …}`), integers and reals as numbers, NULL as
/// null, a blob as `{"base64": …}`. Columns keep the table's order.
pub(crate) fn stored_rows(
    conn: &Connection,
    path: &Path,
    sql: &str,
    id: &str,
) -> Result<Vec<serde_json::Map<String, serde_json::Value>>> {
    use base64::Engine;
    use rusqlite::types::ValueRef;
    use serde_json::{json, Value};
    let b64 = |b: &[u8]| json!({"base64": base64::engine::general_purpose::STANDARD.encode(b)});
    let mut st = conn.prepare(sql).at(path)?;
    let names: Vec<String> = st.column_names().iter().map(|c| c.to_string()).collect();
    let mut q = st.query([id]).at(path)?;
    let mut out = Vec::new();
    while let Some(r) = q.next().at(path)? {
        let mut row = serde_json::Map::new();
        for (i, name) in names.iter().enumerate() {
            let v = match r.get_ref(i).at(path)? {
                ValueRef::Null => Value::Null,
                ValueRef::Integer(n) => json!(n),
                ValueRef::Real(f) => json!(f),
                ValueRef::Text(t) => match std::str::from_utf8(t) {
                    Ok(s) => Value::String(s.to_string()),
                    Err(_) => b64(t),
                },
                ValueRef::Blob(b) => b64(b),
            };
            row.insert(name.clone(), v);
        }
        out.push(row);
    }
    Ok(out)
}

/// [`stored_rows`] of conversation `id`, as `show --raw` prints them: a JSON array, one row a
/// line; not found when `table` has no row `id` (its ID column `id`).
pub(crate) fn stored_rows_json(
    conn: &Connection,
    path: &Path,
    table: &str,
    sql: &str,
    id: &str,
) -> Result<String> {
    let found = conn
        .query_row(
            &format!("SELECT 1 FROM \"{table}\" WHERE id = ?1"),
            [id],
            |_| Ok(()),
        )
        .optional()
        .at(path)?
        .is_some();
    if !found {
        return Err(Error::ConversationNotFound { id: id.to_string() });
    }
    Ok(rows_array(stored_rows(conn, path, sql, id)?))
}

/// Rows as a JSON array, one row a line.
pub(crate) fn rows_array(rows: Vec<serde_json::Map<String, serde_json::Value>>) -> String {
    let lines: Vec<String> = rows
        .into_iter()
        .map(|r| serde_json::Value::Object(r).to_string())
        .collect();
    if lines.is_empty() {
        "[]".into()
    } else {
        format!("[\n{}\n]", lines.join(",\n"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        /// Every kept row's count is the test's own `COUNT(*)`, whether counted one by one or
        /// all at once; all at once exactly when most rows are kept early enough to pay.
        #[test]
        fn kept_counts_are_the_tests_counts(
            owners in prop::collection::vec(0i64..30, 0..120),
            kept in prop::collection::vec(any::<bool>(), 1..30),
            weight in 1u64..5,
        ) {
            let conn = Connection::open_in_memory().unwrap();
            conn.execute_batch("CREATE TABLE s (id TEXT PRIMARY KEY); CREATE TABLE m (sid TEXT);")
                .unwrap();
            for i in 0..kept.len() {
                conn.execute("INSERT INTO s (id) VALUES (?1)", [format!("s{i}")]).unwrap();
            }
            for o in &owners {
                conn.execute("INSERT INTO m (sid) VALUES (?1)", [format!("s{o}")]).unwrap();
            }
            let p = Path::new("mem.db");
            let mut counts = KeptCounts::new(
                &conn,
                p,
                "s",
                "SELECT COUNT(*) FROM m WHERE sid = ?1",
                "SELECT s.rowid, (SELECT COUNT(*) FROM m WHERE sid = s.id) FROM s",
                weight,
            )
            .unwrap();
            let mut batched_at = None;
            for (i, k) in kept.iter().enumerate() {
                counts.note(p, *k).unwrap();
                if batched_at.is_none() && counts.counted.is_some() {
                    batched_at = Some(i);
                }
                if *k {
                    let id = format!("s{i}");
                    let want: i64 = conn
                        .query_row("SELECT COUNT(*) FROM m WHERE sid = ?1", [&id], |r| r.get(0))
                        .unwrap();
                    prop_assert_eq!(counts.count(p, i as i64 + 1, true, &id).unwrap(), want);
                }
            }
            let n = kept.len() as u64;
            let first = (0..kept.len()).find(|&i| {
                let k = kept[..=i].iter().filter(|k| **k).count() as u64;
                kept[i] && KeptCounts::batch_pays(n, i as u64 + 1, k, weight)
            });
            prop_assert_eq!(batched_at, first);
        }
    }

    #[test]
    fn counting_at_once_pays_when_most_rows_are_kept_early() {
        // 90% kept: worth it as soon as a sixteenth is read; 33%: only for dear probes.
        assert!(KeptCounts::batch_pays(100_000, 6_250, 5_600, 2));
        assert!(!KeptCounts::batch_pays(100_000, 6_250, 2_100, 2));
        assert!(KeptCounts::batch_pays(100_000, 6_250, 2_100, 4));
        assert!(!KeptCounts::batch_pays(100_000, 6_250, 600, 4));
        assert!(!KeptCounts::batch_pays(100_000, 6_000, 6_000, 2));
        assert!(!KeptCounts::batch_pays(100_000, 0, 0, 2));
        assert!(KeptCounts::batch_pays(4, 1, 1, 2));
        // Memory stays bounded: a store past the bound is counted one by one.
        assert!(KeptCounts::batch_pays(500_000, 40_000, 36_000, 2));
        assert!(!KeptCounts::batch_pays(500_001, 40_000, 36_000, 2));
    }

    #[test]
    fn columns_lists_what_sqlite_reports_and_nothing_for_a_missing_table() {
        let conn = Connection::open_in_memory().unwrap();
        conn.execute_batch("CREATE TABLE t (a INTEGER, Bc TEXT)")
            .unwrap();
        let p = Path::new("mem.db");
        let got = columns(&conn, "t", p).unwrap();
        let want: HashSet<String> = ["a", "Bc"].iter().map(|s| s.to_string()).collect();
        assert_eq!(got, want);
        assert!(columns(&conn, "missing", p).unwrap().is_empty());
    }
}

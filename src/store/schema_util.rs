//! Helpers every store folder shares: a table's column names, the "schema changed" error, the
//! status of a file whose schema check is all there is to say, one conversation's listing row
//! read by id with its message count, and one read transaction over a listing pass.

use std::collections::HashSet;
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
    let mut st = conn
        .prepare("SELECT name FROM pragma_table_info(?1)")
        .at(path)?;
    let rows = st.query_map([table], |r| r.get::<_, String>(0)).at(path)?;
    rows.collect::<std::result::Result<_, _>>().at(path)
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

#[cfg(test)]
mod tests {
    use super::*;

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

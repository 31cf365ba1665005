//! The archive of pre-images and the audit log, shared by every store kind.
//!
//! An archived cell is (table, key column, key, column, value). Before a compaction changes a
//! cell, its current value is copied here in the same transaction, with its SQLite type kept
//! (the archive's `value` column has BLOB affinity, so TEXT stays TEXT byte for byte). A row the
//! compaction inserts is archived as column `*` with a NULL value: restoring deletes it. Restore
//! is therefore store-agnostic.

use rusqlite::types::Value;
use rusqlite::{params, Connection, OptionalExtension};
use sha2::{Digest, Sha256};

/// A cell agent-db is about to change, or (column `*`) a row it is about to insert.
#[derive(Debug, Clone, PartialEq)]
pub struct Cell {
    pub table: String,
    pub key_column: String,
    pub key: Value,
    pub column: String,
}

impl Cell {
    pub fn new(table: &str, key_column: &str, key: impl Into<Value>, column: &str) -> Cell {
        Cell {
            table: table.into(),
            key_column: key_column.into(),
            key: key.into(),
            column: column.into(),
        }
    }

    /// Marker for a row that will be inserted.
    pub fn inserted_row(table: &str, key_column: &str, key: impl Into<Value>) -> Cell {
        Cell::new(table, key_column, key, "*")
    }
}

/// Identifiers come from agent-db's code or its own archive; refuse anything but plain names.
fn ident(s: &str) -> rusqlite::Result<&str> {
    if !s.is_empty() && s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') {
        Ok(s)
    } else {
        Err(rusqlite::Error::InvalidParameterName(format!(
            "refusing identifier {s:?} in the archive"
        )))
    }
}

/// The current value of a cell (`None` when its row does not exist).
fn current(conn: &Connection, c: &Cell) -> rusqlite::Result<Option<Value>> {
    let column = if c.column == "*" {
        "1".to_string()
    } else {
        format!("\"{}\"", ident(&c.column)?)
    };
    let sql = format!(
        "SELECT {column} FROM \"{}\" WHERE \"{}\" = ?1",
        ident(&c.table)?,
        ident(&c.key_column)?
    );
    conn.query_row(&sql, [&c.key], |r| r.get::<_, Value>(0))
        .optional()
}

/// Archive the current values of `cells` under `compaction_id`.
pub fn save_pre_image(
    conn: &Connection,
    compaction_id: i64,
    cells: &[Cell],
) -> rusqlite::Result<()> {
    let mut stmt = conn.prepare_cached(
        "INSERT INTO agent_db_archive(compaction_id, seq, table_name, key_column, row_key, column_name, value)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
    )?;
    for (seq, c) in cells.iter().enumerate() {
        let value = if c.column == "*" {
            Value::Null
        } else {
            current(conn, c)?.unwrap_or(Value::Null)
        };
        stmt.execute(params![
            compaction_id,
            seq as i64,
            c.table,
            c.key_column,
            c.key,
            c.column,
            value
        ])?;
    }
    Ok(())
}

fn hash_value(h: &mut Sha256, v: &Option<Value>) {
    match v {
        None => h.update(b"absent;"),
        Some(Value::Null) => h.update(b"null;"),
        Some(Value::Integer(i)) => h.update(format!("int:{i};").as_bytes()),
        Some(Value::Real(f)) => h.update(format!("real:{};", f.to_bits()).as_bytes()),
        Some(Value::Text(t)) => {
            h.update(format!("text:{}:", t.len()).as_bytes());
            h.update(t.as_bytes());
        }
        Some(Value::Blob(b)) => {
            h.update(format!("blob:{}:", b.len()).as_bytes());
            h.update(b);
        }
    }
}

/// A hash of the current values of `cells` (for inserted rows: whether they exist). Recorded
/// after a compaction's write, compared before a restore to detect later changes.
pub fn image_hash(conn: &Connection, cells: &[Cell]) -> rusqlite::Result<String> {
    let mut h = Sha256::new();
    for c in cells {
        h.update(format!("{}.{}.{}:", c.table, c.column, c.key_column).as_bytes());
        hash_value(&mut h, &Some(c.key.clone()));
        hash_value(&mut h, &current(conn, c)?);
    }
    Ok(hex::encode(h.finalize()))
}

/// An archived cell with its pre-image value.
#[derive(Debug, Clone)]
pub struct Archived {
    pub cell: Cell,
    pub value: Value,
}

/// The archived cells of a compaction, in the order they were saved.
pub fn load(conn: &Connection, compaction_id: i64) -> rusqlite::Result<Vec<Archived>> {
    let mut stmt = conn.prepare(
        "SELECT table_name, key_column, row_key, column_name, value FROM agent_db_archive
         WHERE compaction_id = ?1 ORDER BY seq",
    )?;
    let rows = stmt.query_map([compaction_id], |r| {
        Ok(Archived {
            cell: Cell {
                table: r.get(0)?,
                key_column: r.get(1)?,
                key: r.get(2)?,
                column: r.get(3)?,
            },
            value: r.get(4)?,
        })
    })?;
    rows.collect()
}

/// Write archived values back (inserted rows are deleted).
pub fn apply(conn: &Connection, archived: &[Archived]) -> rusqlite::Result<()> {
    for a in archived {
        let c = &a.cell;
        if c.column == "*" {
            let sql = format!(
                "DELETE FROM \"{}\" WHERE \"{}\" = ?1",
                ident(&c.table)?,
                ident(&c.key_column)?
            );
            conn.execute(&sql, [&c.key])?;
        } else {
            let sql = format!(
                "UPDATE \"{}\" SET \"{}\" = ?1 WHERE \"{}\" = ?2",
                ident(&c.table)?,
                ident(&c.column)?,
                ident(&c.key_column)?
            );
            conn.execute(&sql, params![a.value, c.key])?;
        }
    }
    Ok(())
}

/// What the audit log records for one compaction.
#[derive(Debug, Clone, serde::Serialize)]
pub struct AuditEntry {
    pub conversation_id: String,
    pub store_kind: String,
    pub reason: String,
    pub strategy: String,
    pub model: Option<String>,
    pub messages_before: i64,
    pub messages_after: i64,
    pub tokens_before: i64,
    pub tokens_after: i64,
    pub summary_sha256: String,
    /// Free-form details (hooks, cost, recipe), JSON.
    pub details: serde_json::Value,
}

/// Insert an audit row (post-image hash filled in by [`finish_audit`]); returns its id.
pub fn insert_audit(conn: &Connection, e: &AuditEntry, now: &str) -> rusqlite::Result<i64> {
    conn.execute(
        "INSERT INTO agent_db_compactions(conversation_id, store_kind, compacted_at, reason, strategy, model,
           messages_before, messages_after, tokens_before, tokens_after, summary_sha256, post_image_sha256,
           agent_db_version, details)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, '', ?12, ?13)",
        params![
            e.conversation_id,
            e.store_kind,
            now,
            e.reason,
            e.strategy,
            e.model,
            e.messages_before,
            e.messages_after,
            e.tokens_before,
            e.tokens_after,
            e.summary_sha256,
            crate::VERSION,
            e.details.to_string(),
        ],
    )?;
    Ok(conn.last_insert_rowid())
}

/// Record the post-image hash once the new state is written.
pub fn finish_audit(conn: &Connection, compaction_id: i64, cells: &[Cell]) -> rusqlite::Result<()> {
    let hash = image_hash(conn, cells)?;
    conn.execute(
        "UPDATE agent_db_compactions SET post_image_sha256 = ?1 WHERE id = ?2",
        params![hash, compaction_id],
    )?;
    Ok(())
}

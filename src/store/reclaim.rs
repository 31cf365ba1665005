//! `agent-db reclaim`: remove rows the agent never reads again (each agent says which, from its
//! own source: [`super::kind::Adapter::reclaimable`]), one conversation and category per
//! transaction, every removed row archived (a deleted-row marker and its cells, see
//! [`super::archive`]) so `restore` inserts it back byte for byte. The whole write is
//! [`remove`]; the rest only reads.

use std::path::Path;

use rusqlite::types::ValueRef;
use rusqlite::{Connection, TransactionBehavior};
use serde::Serialize;

use super::conversation::Read;
use super::pre_image::{self as archive, AuditEntry, Cell, CellValue, Packed};
use super::Store;
use crate::error::{Error, Result, SqlContext};

/// Rows of one table, by key, that one removal deletes.
#[derive(Debug, Clone, PartialEq)]
pub struct Rows {
    pub table: &'static str,
    pub key_column: &'static str,
    pub keys: Vec<CellValue>,
}

/// What one conversation has in one reclaimable category. `rows` are deleted in reverse order
/// and inserted back in this order on restore (parents first).
#[derive(Debug, Clone, PartialEq)]
pub struct Unit {
    /// The category's name (`events of idle sessions`).
    pub category: &'static str,
    pub conversation: String,
    pub rows: Vec<Rows>,
    /// The rows' stored bytes (every column's).
    pub bytes: u64,
}

/// Bytes and rows per category, for `--dry-run` and the report.
#[derive(Debug, Clone, Default, Serialize)]
pub struct CategoryTotal {
    pub category: &'static str,
    pub conversations: u64,
    pub rows: u64,
    pub bytes: u64,
}

/// What the agent's store can give back now.
pub fn plan(store: &Store, idle_before_ms: i64) -> Result<Vec<Unit>> {
    store
        .kind
        .adapter()
        .reclaimable(&store.read(), idle_before_ms, None)
}

/// Why `reclaim` may remove nothing from this agent's store (`None`: it has categories).
pub fn nothing_removable(store: &Store) -> Option<&'static str> {
    store.kind.adapter().nothing_to_reclaim()
}

/// The units' totals by category, in the order they first appear.
pub fn totals(units: &[Unit]) -> Vec<CategoryTotal> {
    let mut out: Vec<CategoryTotal> = Vec::new();
    for u in units {
        let i = match out.iter().position(|t| t.category == u.category) {
            Some(i) => i,
            None => {
                out.push(CategoryTotal {
                    category: u.category,
                    ..Default::default()
                });
                out.len() - 1
            }
        };
        let t = &mut out[i];
        t.conversations += 1;
        t.rows += u.rows.iter().map(|r| r.keys.len() as u64).sum::<u64>();
        t.bytes += u.bytes;
    }
    out
}

/// What happened to one unit.
#[derive(Debug, Clone, Serialize)]
pub struct Removed {
    pub category: &'static str,
    pub conversation: String,
    /// `removed`, or `skipped: why` (the agent wrote to the conversation since it was read).
    pub status: String,
    /// The audit log's id: `agent-db restore` of it (or of the conversation) puts the rows back.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub compaction_id: Option<i64>,
    pub rows: u64,
    pub bytes: u64,
}

/// Remove one unit in one transaction: the agent's selection is read again inside it, and the
/// unit is skipped (nothing written) unless it selects exactly the same rows; every row is
/// archived (large TEXT and BLOB values compressed) before it is deleted.
pub fn remove(store: &mut Store, unit: &Unit, idle_before_ms: i64, now: &str) -> Result<Removed> {
    store.ensure_agent_tables()?;
    let rows: u64 = unit.rows.iter().map(|r| r.keys.len() as u64).sum();
    let mut out = Removed {
        category: unit.category,
        conversation: unit.conversation.clone(),
        status: "removed".into(),
        compaction_id: None,
        rows,
        bytes: unit.bytes,
    };
    let path = store.path.clone();
    let kind = store.kind;
    let limits = store.limits.clone();
    let tx = store
        .conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .at(&path)?;
    let read = Read {
        conn: &tx,
        path: &path,
        limits: &limits,
    };
    let now_units = kind
        .adapter()
        .reclaimable(&read, idle_before_ms, Some(&unit.conversation))?;
    if !now_units.iter().any(|u| u == unit) {
        out.status = "skipped: changed since read (the agent wrote to it); nothing removed".into();
        return Ok(out);
    }
    let mut cells = Vec::new();
    for r in &unit.rows {
        archive_rows(&tx, &path, r, &mut cells)?;
    }
    let id = archive::insert_audit(&tx, &audit_entry(kind.name(), unit, rows), now).at(&path)?;
    archive::save_pre_image(&tx, id, &cells).at(&path)?;
    delete_rows(&tx, &path, unit)?;
    archive::finish_audit(&tx, id, &cells, None).at(&path)?;
    tx.commit().at(&path)?;
    out.compaction_id = Some(id);
    Ok(out)
}

/// The pre-image of `r`'s rows: per key, a deleted-row marker and every column's cell.
fn archive_rows(tx: &Connection, path: &Path, r: &Rows, cells: &mut Vec<Cell>) -> Result<()> {
    let cols = super::schema_util::column_list(tx, r.table, path)?;
    if cols.is_empty() {
        return Err(Error::SchemaChanged {
            path: path.to_path_buf(),
            detail: format!("no table {} to reclaim from", r.table),
        });
    }
    let select = format!(
        "SELECT {} FROM \"{}\" WHERE \"{}\" = ?1",
        cols.iter()
            .map(|c| format!("\"{c}\""))
            .collect::<Vec<_>>()
            .join(", "),
        r.table,
        r.key_column
    );
    let mut st = tx.prepare_cached(&select).at(path)?;
    for key in &r.keys {
        cells.push(Cell::deleted_row(r.table, r.key_column, key.clone()));
        let mut q = st.query([key]).at(path)?;
        let Some(row) = q.next().at(path)? else {
            continue;
        };
        for (i, c) in cols.iter().enumerate() {
            let cell = Cell::new(r.table, r.key_column, key.clone(), c);
            // Large values are archived compressed; the rest SQLite copies as stored.
            let packed = match row.get_ref(i).at(path)? {
                ValueRef::Text(t) if t.len() >= 256 => Packed::new(t, false).ok(),
                ValueRef::Blob(b) if b.len() >= 256 => Packed::new(b, true).ok(),
                _ => None,
            };
            cells.push(cell.with_packed(packed.map(std::sync::Arc::new)));
        }
    }
    Ok(())
}

/// The audit row of one removal (`store_kind` as the audit log names it).
fn audit_entry(store_kind: &str, unit: &Unit, rows: u64) -> AuditEntry {
    AuditEntry {
        conversation_id: unit.conversation.clone(),
        store_kind: store_kind.to_string(),
        reason: format!("reclaim: {}", unit.category),
        strategy: "reclaim".into(),
        model: None,
        messages_before: 0,
        messages_after: 0,
        tokens_before: 0,
        tokens_after: 0,
        summary_sha256: String::new(),
        retention: None,
        details: serde_json::json!({"reclaim": {"category": unit.category, "rows": rows, "bytes": unit.bytes}}),
    }
}

/// Delete the unit's rows, children first (the reverse of [`Unit::rows`]).
fn delete_rows(tx: &Connection, path: &Path, unit: &Unit) -> Result<()> {
    for r in unit.rows.iter().rev() {
        let sql = format!(
            "DELETE FROM \"{}\" WHERE \"{}\" = ?1",
            r.table, r.key_column
        );
        let mut st = tx.prepare_cached(&sql).at(path)?;
        for key in &r.keys {
            st.execute([key]).at(path)?;
        }
    }
    Ok(())
}

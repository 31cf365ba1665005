//! `agent-db reclaim`: remove rows the agent never reads again (each agent says which, from its
//! own source: [`super::kind::Adapter::reclaimable`]), a bounded batch of conversations per
//! transaction (each under its own savepoint and audit row), every removed row archived (one
//! compressed frame of whole rows per table and unit, [`Cell::deleted_rows`]) so `restore`
//! inserts it back byte for byte, hidden rowid included. The plan keeps a digest per unit, not its keys. The whole write is
//! [`remove_batch`]; the rest only reads.

use std::io::Write;
use std::path::Path;

use rusqlite::{Connection, TransactionBehavior};
use serde::Serialize;
use sha2::{Digest, Sha256};

use super::conversation::Read;
use super::pre_image::{self as archive, AuditEntry, Cell, CellValue, Packed};
use super::row_codec;
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

/// Where an adapter's [`super::kind::Adapter::reclaimable`] puts each unit.
pub type Sink<'a> = dyn FnMut(Unit) -> Result<()> + 'a;

/// One unit as the plan keeps it: its totals and a digest of the rows it selects, not their keys,
/// so a plan's memory does not grow with the rows. [`remove_batch`] selects the rows again and
/// removes them only if they are the same ones.
#[derive(Debug, Clone, PartialEq)]
pub struct Planned {
    pub category: &'static str,
    pub conversation: String,
    pub rows: u64,
    /// The rows' stored bytes (every column's).
    pub bytes: u64,
    digest: [u8; 32],
}

impl Planned {
    pub fn of(u: &Unit) -> Planned {
        let mut h = Sha256::new();
        for r in &u.rows {
            for part in [r.table, r.key_column] {
                h.update((part.len() as u64).to_le_bytes());
                h.update(part.as_bytes());
            }
            h.update((r.keys.len() as u64).to_le_bytes());
            for k in &r.keys {
                match k {
                    CellValue::Null => h.update([0]),
                    CellValue::Integer(i) => {
                        h.update([1]);
                        h.update(i.to_le_bytes());
                    }
                    CellValue::Real(f) => {
                        h.update([2]);
                        h.update(f.to_bits().to_le_bytes());
                    }
                    CellValue::Text(b) | CellValue::Blob(b) => {
                        h.update([if matches!(k, CellValue::Text(_)) {
                            3
                        } else {
                            4
                        }]);
                        h.update((b.len() as u64).to_le_bytes());
                        h.update(b);
                    }
                }
            }
        }
        Planned {
            category: u.category,
            conversation: u.conversation.clone(),
            rows: u.rows.iter().map(|r| r.keys.len() as u64).sum(),
            bytes: u.bytes,
            digest: h.finalize().into(),
        }
    }
}

/// What the agent's store can give back now, streamed from the agent's selection unit by unit.
pub fn plan(store: &Store, idle_before_ms: i64) -> Result<Vec<Planned>> {
    let mut out = Vec::new();
    store
        .kind
        .adapter()
        .reclaimable(&store.read(), idle_before_ms, None, &mut |u: Unit| {
            out.push(Planned::of(&u));
            Ok(())
        })?;
    Ok(out)
}

/// Why `reclaim` may remove nothing from this agent's store (`None`: it has categories).
pub fn nothing_removable(store: &Store) -> Option<&'static str> {
    store.kind.adapter().nothing_to_reclaim()
}

/// The units' totals by category, in the order they first appear.
pub fn totals(units: &[Planned]) -> Vec<CategoryTotal> {
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
        t.rows += u.rows;
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

/// A batch of units [`remove_batch`] commits together: at most this many conversations…
pub const BATCH_UNITS: usize = 32;
/// …or this many stored bytes (the first unit always goes in).
pub const BATCH_BYTES: u64 = 16 << 20;

/// Remove one unit in one transaction (see [`remove_batch`]).
pub fn remove(
    store: &mut Store,
    unit: &Planned,
    idle_before_ms: i64,
    now: &str,
) -> Result<Removed> {
    remove_batch(store, std::slice::from_ref(unit), idle_before_ms, now)?
        .pop()
        .expect("one outcome per unit")
}

/// Remove `units` in one transaction (one commit, one sync), each unit under its own savepoint:
/// the agent's selection is read again inside it, and the unit is skipped (nothing written)
/// unless it selects exactly the same rows; its rows are archived (read once, compressed as
/// read) before they are deleted, with the unit's own audit row. A skipped or failed unit leaves the
/// others of the batch alone. One outcome per unit, in order; `Err` only when the transaction
/// itself fails (nothing of the batch is written then).
pub fn remove_batch(
    store: &mut Store,
    units: &[Planned],
    idle_before_ms: i64,
    now: &str,
) -> Result<Vec<Result<Removed>>> {
    store.ensure_agent_tables()?;
    let path = store.path.clone();
    let kind = store.kind;
    let limits = store.limits.clone();
    let mut tx = store
        .conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .at(&path)?;
    let mut out = Vec::with_capacity(units.len());
    for unit in units {
        let sp = tx.savepoint().at(&path)?;
        let read = Read {
            conn: &sp,
            path: &path,
            limits: &limits,
        };
        let r = remove_in(&read, kind, unit, idle_before_ms, now);
        match r {
            Ok(removed) => {
                sp.commit().at(&path)?;
                out.push(Ok(removed));
            }
            // Some errors (a full disk, I/O) make SQLite roll the whole transaction back: the
            // batch's earlier units are not written either, so the batch fails as one.
            Err(e) if sp.is_autocommit() => return Err(e),
            // Dropping the savepoint rolls this unit back; the batch goes on.
            Err(e) => {
                drop(sp);
                out.push(Err(e));
            }
        }
    }
    tx.commit().at(&path)?;
    Ok(out)
}

/// One unit inside the batch's transaction.
fn remove_in(
    read: &Read<'_>,
    kind: super::StoreKind,
    planned: &Planned,
    idle_before_ms: i64,
    now: &str,
) -> Result<Removed> {
    let (tx, path) = (read.conn, read.path);
    let mut out = Removed {
        category: planned.category,
        conversation: planned.conversation.clone(),
        status: "removed".into(),
        compaction_id: None,
        rows: planned.rows,
        bytes: planned.bytes,
    };
    let mut unit = None;
    kind.adapter().reclaimable(
        read,
        idle_before_ms,
        Some(&planned.conversation),
        &mut |u: Unit| {
            if unit.is_none() && Planned::of(&u) == *planned {
                unit = Some(u);
            }
            Ok(())
        },
    )?;
    let Some(unit) = unit else {
        out.status = "skipped: changed since read (the agent wrote to it); nothing removed".into();
        return Ok(out);
    };
    let cells = archive_and_delete(tx, path, &unit)?;
    let entry = audit_entry(kind.name(), &unit, planned.rows);
    let id = archive::insert_audit(tx, &entry, now).at(path)?;
    archive::save_pre_image(tx, id, &cells).at(path)?;
    archive::finish_audit(tx, id, &cells, None).at(path)?;
    out.compaction_id = Some(id);
    Ok(out)
}

/// Read the unit's rows, delete them, and return their pre-image: per table one frame of whole
/// rows as stored (every column, the hidden rowid where the table has one). Each frame is
/// compressed on its own thread while this one reads and deletes (bounded: a few chunks wait).
fn archive_and_delete(tx: &Connection, path: &Path, unit: &Unit) -> Result<Vec<Cell>> {
    std::thread::scope(|scope| {
        let mut frames = Vec::with_capacity(unit.rows.len());
        for r in &unit.rows {
            let (chunks, inbox) = std::sync::mpsc::sync_channel::<Vec<u8>>(4);
            let packer = scope.spawn(move || -> std::io::Result<Vec<u8>> {
                let mut frame = zstd::stream::write::Encoder::new(Vec::new(), archive::PACK_LEVEL)?;
                for chunk in inbox {
                    frame.write_all(&chunk)?;
                }
                frame.finish()
            });
            // A failed read drops `chunks`, which ends the packer; its frame is not used.
            let (cols, rows) = read_rows(tx, path, r, chunks)?;
            frames.push((r, cols, rows, packer));
        }
        delete_rows(tx, path, unit)?;
        frames
            .into_iter()
            .map(|(r, cols, rows, packer)| {
                let zstd = packer
                    .join()
                    .unwrap_or_else(|_| {
                        Err(std::io::Error::other("the compressing thread panicked"))
                    })
                    .map_err(|source| Error::Io {
                        path: path.to_path_buf(),
                        source,
                    })?;
                Ok(Cell::deleted_rows(
                    r.table,
                    r.key_column,
                    &unit.conversation,
                    Packed::rows(cols, rows, zstd),
                ))
            })
            .collect()
    })
}

/// Encode `r`'s rows cell by cell ([`row_codec::encode_cell`]) into chunks of about 1 MiB sent
/// to `out`; their columns and count.
fn read_rows(
    tx: &Connection,
    path: &Path,
    r: &Rows,
    out: std::sync::mpsc::SyncSender<Vec<u8>>,
) -> Result<(Vec<String>, u64)> {
    const CHUNK: usize = 1 << 20;
    let cols = row_codec::stored_columns(tx, path, r.table)?;
    if cols.is_empty() {
        return Err(Error::SchemaChanged {
            path: path.to_path_buf(),
            detail: format!("no table {} to reclaim from", r.table),
        });
    }
    let select = format!(
        "SELECT {} FROM {} WHERE {} = ?1",
        cols.iter()
            .map(|c| row_codec::quote(c))
            .collect::<Vec<_>>()
            .join(", "),
        row_codec::quote(r.table),
        row_codec::quote(r.key_column)
    );
    let gone = || Error::Io {
        path: path.to_path_buf(),
        source: std::io::Error::other("the compressing thread stopped"),
    };
    let mut st = tx.prepare_cached(&select).at(path)?;
    let (mut chunk, mut rows) = (Vec::with_capacity(CHUNK), 0u64);
    for key in &r.keys {
        let mut q = st.query([key]).at(path)?;
        while let Some(found) = q.next().at(path)? {
            for i in 0..cols.len() {
                row_codec::encode_cell(&mut chunk, found.get_ref(i).at(path)?);
            }
            rows += 1;
            if chunk.len() >= CHUNK {
                out.send(std::mem::replace(&mut chunk, Vec::with_capacity(CHUNK)))
                    .map_err(|_| gone())?;
            }
        }
    }
    if !chunk.is_empty() {
        out.send(chunk).map_err(|_| gone())?;
    }
    Ok((cols, rows))
}

/// The audit row of one removal (`store_kind` as the audit log names it).
fn audit_entry(store_kind: &str, unit: &Unit, rows: u64) -> AuditEntry {
    AuditEntry::housekeeping(
        &unit.conversation,
        store_kind,
        format!("reclaim: {}", unit.category),
        "reclaim",
        serde_json::json!({"reclaim": {"category": unit.category, "rows": rows, "bytes": unit.bytes}}),
    )
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

//! Size and archive figures for `agent-db stats`, the `compact` summary and
//! `prune-archive --dry-run`: file and free pages, what the archive holds, and what pruning it
//! would free. Read-only queries; nothing here writes.

use std::path::Path;

use serde::Serialize;

use super::restore::Pruned;
use crate::error::{Result, SqlContext};
use crate::store::{agent_tables, pre_image as archive, Store};

/// The store file and its free pages.
#[derive(Debug, Clone, Default, Serialize)]
pub struct FileStats {
    /// Size of the main database file.
    pub file_bytes: u64,
    /// Size of the `-wal` file (0 when absent).
    pub wal_bytes: u64,
    pub page_size: i64,
    pub page_count: i64,
    /// Pages on SQLite's free list: space inside the file that `vacuum` gives back.
    pub free_pages: i64,
    pub free_bytes: i64,
    pub journal_mode: String,
}

/// What agent-db's audit log and archive hold.
#[derive(Debug, Clone, Default, Serialize)]
pub struct ArchiveStats {
    /// Compactions in the audit log.
    pub compactions: i64,
    pub restored: i64,
    pub archive_pruned: i64,
    /// Compactions that can still be undone.
    pub restorable: i64,
    /// Archived values (pre-image cells) still held.
    pub archived_values: i64,
    /// Bytes of the archived values still held: about what `prune-archive` of every
    /// compaction would free (after `vacuum`).
    pub archive_bytes: i64,
}

fn file_len(p: &Path) -> u64 {
    std::fs::metadata(p).map(|m| m.len()).unwrap_or(0)
}

/// File size, page figures and journal mode.
pub fn file_stats(store: &Store) -> Result<FileStats> {
    let c = &store.conn;
    let path = &store.path;
    let int =
        |pragma: &str| -> Result<i64> { c.pragma_query_value(None, pragma, |r| r.get(0)).at(path) };
    let page_size = int("page_size")?;
    let free_pages = int("freelist_count")?;
    let mut wal = store.path.as_os_str().to_owned();
    wal.push("-wal");
    Ok(FileStats {
        file_bytes: file_len(path),
        wal_bytes: file_len(Path::new(&wal)),
        page_size,
        page_count: int("page_count")?,
        free_pages,
        free_bytes: free_pages * page_size,
        journal_mode: store.journal_mode()?,
    })
}

/// The audit log's counts and the archive's size (zeros before the first compaction).
pub fn archive_stats(store: &Store) -> Result<ArchiveStats> {
    let (conn, path) = (&store.conn, store.path.as_path());
    if !agent_tables::present(conn).at(path)? {
        return Ok(ArchiveStats::default());
    }
    let (compactions, restored, archive_pruned, restorable) = conn
        .query_row(
            "SELECT COUNT(*), COUNT(restored_at), COUNT(archive_pruned_at),
                    COALESCE(SUM(restored_at IS NULL AND archive_pruned_at IS NULL), 0)
             FROM agent_db_compactions",
            [],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)),
        )
        .at(path)?;
    let bytes = archive::stored_bytes_sum(conn).at(path)?;
    let (archived_values, archive_bytes) = conn
        .query_row(
            &format!("SELECT COUNT(*), {bytes} FROM agent_db_archive"),
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .at(path)?;
    Ok(ArchiveStats {
        compactions,
        restored,
        archive_pruned,
        restorable,
        archived_values,
        archive_bytes,
    })
}

/// Bytes archived by the given compactions (what a run added to the store).
pub fn archived_bytes_of(store: &Store, ids: &[i64]) -> Result<i64> {
    let (conn, path) = (&store.conn, store.path.as_path());
    if ids.is_empty() || !agent_tables::present(conn).at(path)? {
        return Ok(0);
    }
    let mut total = 0i64;
    let bytes = archive::stored_bytes_sum(conn).at(path)?;
    let mut stmt = conn
        .prepare(&format!(
            "SELECT {bytes} FROM agent_db_archive WHERE compaction_id = ?1"
        ))
        .at(path)?;
    for id in ids {
        total += stmt.query_row([id], |r| r.get::<_, i64>(0)).at(path)?;
    }
    Ok(total)
}

/// What `prune-archive` with this cutoff (RFC 3339 UTC) would delete, without deleting it.
pub fn prunable(store: &Store, before: &str) -> Result<Pruned> {
    let (conn, path) = (&store.conn, store.path.as_path());
    if !agent_tables::present(conn).at(path)? {
        return Ok(Pruned::default());
    }
    let compactions: i64 = conn
        .query_row(
            "SELECT COUNT(*) FROM agent_db_compactions WHERE compacted_at < ?1 AND archive_pruned_at IS NULL AND strategy != 'retire'",
            [before],
            |r| r.get(0),
        )
        .at(path)?;
    let bytes = archive::stored_bytes_sum(conn).at(path)?;
    let (values, bytes): (i64, i64) = conn
        .query_row(
            &format!("SELECT COUNT(*), {bytes} FROM agent_db_archive WHERE compaction_id IN
               (SELECT id FROM agent_db_compactions WHERE compacted_at < ?1 AND archive_pruned_at IS NULL)"),
            [before],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .at(path)?;
    Ok(Pruned {
        compactions: compactions as usize,
        archived_values: values as usize,
        bytes,
    })
}

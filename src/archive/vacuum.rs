//! `agent-db vacuum`: give free pages back to the file system with SQLite's `VACUUM`, without
//! the sqlite3 CLI.
//!
//! Safety: the caller holds agent-db's store lock. Two checks refuse (nothing done) while
//! another process, such as a running agent, has the store open:
//!
//! 1. In WAL mode, every open connection keeps a shared POSIX lock on the "DMS" byte of the
//!    `-shm` file (byte 128: SQLite's unix VFS, `UNIX_SHM_DMS`) for as long as it is open, idle
//!    or not. agent-db asks with `F_GETLK`, which takes no lock, before it opens any connection
//!    of its own (closing a descriptor would drop this process's own POSIX locks on the file).
//! 2. The vacuuming connection switches to `locking_mode=EXCLUSIVE` and opens an exclusive
//!    transaction, which fails at once while another connection is reading or writing.
//!
//! `VACUUM` keeps the journal mode; the result is checked with `integrity_check` on a fresh
//! connection.

use std::path::Path;

use serde::Serialize;

use crate::error::{Error, Result, SqlContext};
use crate::store::{Access, Store};

/// What a vacuum did.
#[derive(Debug, Clone, Serialize)]
pub struct Vacuumed {
    pub bytes_before: u64,
    pub bytes_after: u64,
    pub free_pages_before: i64,
    pub journal_mode: String,
    pub integrity_check: String,
}

fn store_bytes(path: &Path) -> u64 {
    ["", "-wal"]
        .iter()
        .map(|s| {
            let mut p = path.as_os_str().to_owned();
            p.push(s);
            std::fs::metadata(Path::new(&p))
                .map(|m| m.len())
                .unwrap_or(0)
        })
        .sum()
}

use crate::store::busy::is_busy;

/// Another process has the store open (an agent, a sqlite3 shell): vacuum needs it alone. The
/// store is busy, as for every other command (exit 9); nothing was done.
fn refused(path: &Path) -> Error {
    Error::Busy {
        path: path.to_path_buf(),
        holder: None,
    }
}

/// The free pages a vacuum would give back (`vacuum --dry-run`).
#[derive(Debug, Clone, Serialize)]
pub struct FreeSpace {
    pub free_pages: i64,
    pub free_bytes: i64,
}

/// The store's free pages and their size, read without writing.
pub fn free_space(store: &Store) -> Result<FreeSpace> {
    let c = &store.conn;
    let free: i64 = c
        .pragma_query_value(None, "freelist_count", |r| r.get(0))
        .at(&store.path)?;
    let page: i64 = c
        .pragma_query_value(None, "page_size", |r| r.get(0))
        .at(&store.path)?;
    Ok(FreeSpace {
        free_pages: free,
        free_bytes: free * page,
    })
}

/// Offset of the dead-man-switch lock byte in the `-shm` file (SQLite's unix VFS).
const SHM_DMS_BYTE: libc::off_t = 128;

/// Whether another process holds a lock on the `-shm` file's DMS byte: it has the store open
/// in WAL mode. Call only while this process has no connection to the store.
pub fn open_elsewhere(path: &Path) -> bool {
    let mut shm = path.as_os_str().to_owned();
    shm.push("-shm");
    crate::store::busy::conflicting_lock(Path::new(&shm), SHM_DMS_BYTE).is_some()
}

/// Vacuum the recognized store at `path`. The caller holds the agent-db lock and has no
/// connection to the store open.
pub fn vacuum(path: &Path) -> Result<Vacuumed> {
    if open_elsewhere(path) {
        return Err(refused(path));
    }
    let bytes_before = store_bytes(path);
    let (free_pages_before, mode_before) = {
        let store = Store::open(path, Access::Write)?;
        let c = &store.conn;
        c.busy_timeout(std::time::Duration::from_millis(200))
            .at(path)?;
        let free: i64 = c
            .pragma_query_value(None, "freelist_count", |r| r.get(0))
            .at(path)?;
        let mode = store.journal_mode()?;
        c.pragma_update(None, "locking_mode", "EXCLUSIVE")
            .at(path)?;
        if let Err(e) = c.execute_batch("BEGIN EXCLUSIVE; COMMIT;") {
            return Err(if is_busy(&e) {
                refused(path)
            } else {
                Error::Sqlite {
                    path: path.into(),
                    source: e,
                }
            });
        }
        if let Err(e) = c.execute_batch("VACUUM") {
            return Err(if is_busy(&e) {
                refused(path)
            } else {
                Error::Sqlite {
                    path: path.into(),
                    source: e,
                }
            });
        }
        if mode.eq_ignore_ascii_case("wal") {
            c.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))
                .at(path)?;
        }
        (free, mode)
    };
    // A fresh connection: the exclusive one is closed, so the checks see what others will see.
    let store = Store::open(path, Access::Write)?;
    let integrity: String = store
        .conn
        .query_row("PRAGMA integrity_check", [], |r| r.get(0))
        .at(path)?;
    let mode = store.journal_mode()?;
    if !mode.eq_ignore_ascii_case(&mode_before) {
        return Err(Error::SchemaChanged {
            path: path.into(),
            detail: format!("journal_mode changed from {mode_before} to {mode} during vacuum"),
        });
    }
    drop(store);
    Ok(Vacuumed {
        bytes_before,
        bytes_after: store_bytes(path),
        free_pages_before,
        journal_mode: mode,
        integrity_check: integrity,
    })
}

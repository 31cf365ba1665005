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
//! `VACUUM` keeps the journal mode; the result is checked with `quick_check` on a fresh
//! connection: every page, record and b-tree of the new file. It leaves out what
//! `integrity_check` adds (each index's entries against its table's rows), which `VACUUM` has
//! just rebuilt from the rows itself, and which would add about 40% to its time.

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
    /// `PRAGMA quick_check` of the result (`ok`), under the field's first name.
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

/// Bytes an unprivileged process may still write on the file system holding `dir`.
pub fn free_disk(dir: &Path) -> Option<u64> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(dir.as_os_str().as_bytes()).ok()?;
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: `c` is a valid NUL-terminated path and `st` a writable statvfs.
    if unsafe { libc::statvfs(c.as_ptr(), &mut st) } != 0 {
        return None;
    }
    Some(st.f_bavail as u64 * st.f_frsize as u64)
}

/// The directory a file is (or will be) in.
fn dir_of(path: &Path) -> &Path {
    match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    }
}

/// Refuse, before writing anything, when the file system of `at` has less than `need` bytes
/// free: SQLite's VACUUM writes a whole copy of the store first.
fn need_room(store: &Path, at: &Path, need: u64, hint: &str) -> Result<()> {
    match free_disk(dir_of(at)) {
        Some(free) if free < need => Err(Error::Unwritable {
            path: store.to_path_buf(),
            detail: format!(
                "VACUUM writes a copy of up to {} and {} has {} free{hint}; nothing was changed",
                crate::util::human_bytes(need),
                dir_of(at).display(),
                crate::util::human_bytes(free)
            ),
        }),
        _ => Ok(()),
    }
}

/// What `vacuum --into` wrote.
#[derive(Debug, Clone, Serialize)]
pub struct VacuumedInto {
    pub into: String,
    pub bytes_before: u64,
    pub bytes_after: u64,
    pub integrity_check: String,
}

/// `VACUUM INTO`: a compacted copy of the store at `into` (which must not exist), the store
/// itself unchanged. Reads in one transaction, so the agent may keep running.
pub fn vacuum_into(path: &Path, into: &Path) -> Result<VacuumedInto> {
    if into.exists() {
        return Err(Error::Usage(format!(
            "--into {}: the file exists; VACUUM INTO writes a new file",
            into.display()
        )));
    }
    let bytes_before = store_bytes(path);
    need_room(path, into, bytes_before, "")?;
    let store = Store::open(path, Access::Read)?;
    let target = into.to_string_lossy().into_owned();
    store
        .conn
        .execute("VACUUM INTO ?1", [&target])
        .map_err(|e| Error::Unwritable {
            path: into.to_path_buf(),
            detail: e.to_string(),
        })?;
    drop(store);
    let copy = Store::open(into, Access::Read)?;
    let integrity: String = copy
        .conn
        .query_row("PRAGMA quick_check", [], |r| r.get(0))
        .at(into)?;
    Ok(VacuumedInto {
        into: target,
        bytes_before,
        bytes_after: store_bytes(into),
        integrity_check: integrity,
    })
}

/// How far a running `VACUUM` is, for a progress bar: `(done, total)` in pages, an estimate
/// that only grows and never passes `total`. SQLite reads every page of the store to build its
/// copy (the connection's page cache misses), then writes the copy back through the `-wal` (or
/// `-journal`) file; `total` is twice the store's pages, one per page read and one per page
/// written back. Called from a thread of its own, about five times a second.
pub type Progress = Box<dyn FnMut(u64, u64) + Send>;

/// Vacuum the recognized store at `path`. The caller holds the agent-db lock and has no
/// connection to the store open.
pub fn vacuum(path: &Path) -> Result<Vacuumed> {
    vacuum_with(path, None)
}

/// [`vacuum`], calling `progress` as it goes.
pub fn vacuum_with(path: &Path, progress: Option<Progress>) -> Result<Vacuumed> {
    if open_elsewhere(path) {
        return Err(refused(path));
    }
    let bytes_before = store_bytes(path);
    need_room(
        path,
        path,
        bytes_before,
        " (give `vacuum --into PATH` on another disk)",
    )?;
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
        run_vacuum(c, path, progress)?;
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
        .query_row("PRAGMA quick_check", [], |r| r.get(0))
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

/// The connection's handle, for the progress handler (which SQLite calls on the thread running
/// the statement, while the connection is borrowed by it).
struct Handle(*mut rusqlite::ffi::sqlite3);
// SAFETY: only dereferenced by SQLite inside the progress handler, on the thread that runs
// `VACUUM` on this connection.
unsafe impl Send for Handle {}

/// Pages the connection has read from the file so far (its page cache misses); `reset` starts
/// the count again.
fn pages_read(h: &Handle, reset: bool) -> u64 {
    let (mut cur, mut hi) = (0, 0);
    // SAFETY: `h` is an open connection's handle; the out-pointers are valid.
    unsafe {
        rusqlite::ffi::sqlite3_db_status(
            h.0,
            rusqlite::ffi::SQLITE_DBSTATUS_CACHE_MISS,
            &mut cur,
            &mut hi,
            reset as i32,
        );
    }
    cur.max(0) as u64
}

/// `VACUUM` on the exclusive connection, with `progress` told how far it is.
fn run_vacuum(c: &rusqlite::Connection, path: &Path, progress: Option<Progress>) -> Result<()> {
    let Some(mut report) = progress else {
        return exec_vacuum(c, path);
    };
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
    let int = |p: &str| -> Result<u64> {
        let v: i64 = c.pragma_query_value(None, p, |r| r.get(0)).at(path)?;
        Ok(v.max(1) as u64)
    };
    let (pages, page_size) = (int("page_count")?, int("page_size")?);
    // The write-back is measured by the -wal file's growth: start it empty.
    c.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))
        .at(path)?;
    let read = std::sync::Arc::new(AtomicU64::new(0));
    let seen = read.clone();
    // SAFETY: the handle outlives the handler, which is removed before `c` is used again.
    let h = Handle(unsafe { c.handle() });
    pages_read(&h, true);
    c.progress_handler(
        10_000,
        Some(move || {
            seen.store(pages_read(&h, false).min(pages), Ordering::Relaxed);
            false
        }),
    );
    let stop = AtomicBool::new(false);
    let sidecars = ["-wal", "-journal"].map(|s| {
        let mut p = path.as_os_str().to_owned();
        p.push(s);
        std::path::PathBuf::from(p)
    });
    let total = 2 * pages;
    let done = std::thread::scope(|scope| {
        scope.spawn(|| {
            let mut best = 0;
            loop {
                let last = stop.load(Ordering::Acquire);
                let written: u64 = sidecars
                    .iter()
                    .filter_map(|p| std::fs::metadata(p).ok())
                    .map(|m| m.len() / page_size)
                    .sum();
                // A rollback journal is deleted at the end: never go back.
                best = (read.load(Ordering::Relaxed) + written.min(pages)).max(best);
                report(best, total);
                if last {
                    break;
                }
                std::thread::sleep(std::time::Duration::from_millis(200));
            }
        });
        let done = exec_vacuum(c, path);
        stop.store(true, Ordering::Release);
        done
    });
    c.progress_handler(0, None::<fn() -> bool>);
    if done.is_ok() {
        report(total, total);
    }
    done
}

fn exec_vacuum(c: &rusqlite::Connection, path: &Path) -> Result<()> {
    c.execute_batch("VACUUM").map_err(|e| {
        if is_busy(&e) {
            refused(path)
        } else {
            Error::Sqlite {
                path: path.into(),
                source: e,
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The free-disk check reads the real file system: a need beyond any disk is refused
    /// (naming the store and `--into`), no need passes.
    #[test]
    fn vacuum_refuses_without_room_for_its_copy() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("s.db");
        std::fs::write(&p, b"x").unwrap();
        assert!(free_disk(dir.path()).is_some_and(|f| f > 0));
        let e = need_room(
            &p,
            &p,
            u64::MAX / 2,
            " (give `vacuum --into PATH` on another disk)",
        )
        .unwrap_err();
        assert!(e.to_string().contains("--into"), "{e}");
        assert_eq!(e.exit_code(), crate::error::exit::STORE);
        need_room(&p, &p, 0, "").unwrap();
    }

    /// The progress of a real `VACUUM` (a kodelet store with a third of its pages free): the
    /// total is twice the store's pages, the count only grows, never passes it, and ends at it;
    /// the store is vacuumed.
    #[test]
    fn vacuum_progress_grows_to_the_pages_read() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("storage.db");
        {
            let c = rusqlite::Connection::open(&p).unwrap();
            c.execute_batch(
                "PRAGMA journal_mode = WAL;
                 CREATE TABLE conversations (id TEXT PRIMARY KEY, raw_messages TEXT NOT NULL, provider TEXT NOT NULL,
                   file_last_access TEXT, usage TEXT NOT NULL, summary TEXT, created_at DATETIME NOT NULL,
                   updated_at DATETIME NOT NULL, metadata TEXT, tool_results TEXT);
                 CREATE TABLE conversation_summaries (id TEXT PRIMARY KEY, message_count INTEGER NOT NULL,
                   first_message TEXT NOT NULL, summary TEXT, usage TEXT NOT NULL,
                   created_at DATETIME NOT NULL, updated_at DATETIME NOT NULL);
                 CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, applied_at DATETIME NOT NULL, description TEXT);
                 WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 3000)
                 INSERT INTO conversations SELECT 'c' || i, '[' || printf('%.2000c', 'x') || ']', 'anthropic',
                   NULL, '{}', NULL, '2026-10-01', '2026-10-01', NULL, NULL FROM n;
                 DELETE FROM conversations WHERE CAST(substr(id, 2) AS INTEGER) % 3 = 0;",
            )
            .unwrap();
        }
        let pages = |p: &Path| -> (u64, u64) {
            let c = rusqlite::Connection::open(p).unwrap();
            let n: i64 = c.query_row("PRAGMA page_count", [], |r| r.get(0)).unwrap();
            let f: i64 = c
                .query_row("PRAGMA freelist_count", [], |r| r.get(0))
                .unwrap();
            (n as u64, f as u64)
        };
        let (before, free) = pages(&p);
        assert!(free > before / 4, "{free} of {before} pages free");
        let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let log = seen.clone();
        let v = vacuum_with(
            &p,
            Some(Box::new(move |done, total| {
                log.lock().unwrap().push((done, total))
            })),
        )
        .unwrap();
        assert_eq!(v.integrity_check, "ok");
        assert_eq!(pages(&p).1, 0, "no free page left");
        let seen = seen.lock().unwrap();
        assert_eq!(seen.first(), Some(&(0, 2 * before)), "{seen:?}");
        assert!(seen.windows(2).all(|w| w[0].0 <= w[1].0), "{seen:?}");
        assert!(
            seen.iter().all(|&(d, t)| t == 2 * before && d <= t),
            "{seen:?}"
        );
        let last = seen.last().unwrap().0;
        assert!(last >= before - free, "{last} of {before} pages");
    }
}

//! One agent-db writer per store: an exclusive lock on `<store>.agent-db.lock` beside the store.
//!
//! The lock is an advisory OS file lock (`flock`), released when the process exits, even when it
//! is killed, so a crashed run never leaves a stale lock. The lock file itself is an empty file
//! left in place. agent-db never locks the database file itself: opening and closing a second
//! descriptor on it would drop SQLite's own POSIX locks.

use std::fs::{File, OpenOptions, TryLockError};
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

/// Held for the duration of a writing command.
#[derive(Debug)]
pub struct StoreLock {
    _file: File,
    pub path: PathBuf,
}

/// The lock file for a store.
pub fn lock_path(store: &Path) -> PathBuf {
    let mut s = store.as_os_str().to_owned();
    s.push(".agent-db.lock");
    PathBuf::from(s)
}

/// Check that the store can be written at all ([`super::preflight::check_writable`]: exit 4
/// with the cause), then take the lock, or fail at once with [`Error::Locked`]. Every writing
/// command calls this before it spends anything.
pub fn acquire(store: &Path) -> Result<StoreLock> {
    super::preflight::check_writable(store)?;
    let path = lock_path(store);
    let file = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(|source| Error::Io {
            path: path.clone(),
            source,
        })?;
    match file.try_lock() {
        Ok(()) => Ok(StoreLock { _file: file, path }),
        Err(TryLockError::WouldBlock) => Err(Error::Locked {
            path: store.to_path_buf(),
            lock: path,
        }),
        Err(TryLockError::Error(source)) => Err(Error::Io { path, source }),
    }
}

//! Can this store be written? Asked before a write command spends anything (a summary, an LLM
//! request), so a store that cannot take the result fails at once with one clear line instead of
//! after the money is spent.
//!
//! The check reads the file system only; it never opens a write transaction, so it changes no
//! byte of the store, its WAL or its shared-memory file. It covers what a user meets in practice:
//!
//! - the store file is not writable (permissions, an immutable file, a read-only mount);
//! - the directory is not writable while SQLite would have to create the `-wal` / `-shm` files
//!   there (WAL mode needs both next to the store);
//! - an existing `-wal` or `-shm` file is not writable;
//! - the disk (or quota) has less free space than a compaction needs: at least [`MIN_FREE`] plus
//!   a fiftieth of the store's size, since the archive keeps the originals in the same file;
//! - the process's file-size limit (`ulimit -f`) is below what the store will grow to.
//!
//! SQLite can still fail later (a disk that fills during the run); the writer then reports the
//! conversation as failed and the pipeline starts no further conversation.

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use crate::error::{Error, Result};
use crate::util::human_bytes;

/// The least free space a write run starts with, whatever the store's size.
pub const MIN_FREE: u64 = 8 * 1024 * 1024;

/// Fail with [`Error::Unwritable`] (exit 4) when the store at `path` cannot take a write.
pub fn check_writable(path: &Path) -> Result<()> {
    let fail = |detail: String| {
        Err(Error::Unwritable {
            path: path.to_path_buf(),
            detail,
        })
    };
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => std::path::PathBuf::from("."),
    };
    if let Err(why) = writable(path) {
        return fail(format!("the store file is not writable ({why})"));
    }
    for suffix in ["-wal", "-shm"] {
        let side = side_file(path, suffix);
        if side.exists() {
            if let Err(why) = writable(&side) {
                return fail(format!("{} is not writable ({why})", side.display()));
            }
        } else if let Err(why) = writable(&dir) {
            return fail(format!(
                "its directory {} is not writable ({why}), so SQLite cannot create the {suffix} file WAL mode needs",
                dir.display()
            ));
        }
    }
    let size = std::fs::metadata(path).map(|m| m.len()).unwrap_or(0);
    let needed = MIN_FREE + size / 50;
    if let Some(free) = free_bytes(&dir) {
        if free < needed {
            return fail(format!(
                "the disk is full or nearly so: {} free, a compaction run needs at least {} (the archive keeps the originals in the store)",
                human_bytes(free),
                human_bytes(needed)
            ));
        }
    }
    if let Some(limit) = file_size_limit() {
        if limit < size + needed {
            return fail(format!(
                "the process's file-size limit (ulimit -f) is {}, but the store is {} and grows while compacting",
                human_bytes(limit),
                human_bytes(size)
            ));
        }
    }
    Ok(())
}

fn side_file(path: &Path, suffix: &str) -> std::path::PathBuf {
    let mut s = path.as_os_str().to_owned();
    s.push(suffix);
    s.into()
}

/// `access(path, W_OK)` with the effective ids, as the kernel will judge a write (read-only
/// mounts, immutable files and missing capabilities included).
fn writable(path: &Path) -> std::result::Result<(), String> {
    let c = CString::new(path.as_os_str().as_bytes()).map_err(|e| e.to_string())?;
    // SAFETY: `c` is a valid NUL-terminated path for the duration of the call.
    let rc = unsafe { libc::faccessat(libc::AT_FDCWD, c.as_ptr(), libc::W_OK, libc::AT_EACCESS) };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error().to_string())
    }
}

/// Bytes available to an unprivileged writer on the file system holding `dir`.
fn free_bytes(dir: &Path) -> Option<u64> {
    let c = CString::new(dir.as_os_str().as_bytes()).ok()?;
    // SAFETY: statvfs only writes into `st`, which lives for the call.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    let rc = unsafe { libc::statvfs(c.as_ptr(), &mut st) };
    (rc == 0).then(|| st.f_bavail as u64 * st.f_frsize as u64)
}

/// The soft `RLIMIT_FSIZE` of this process, when it is finite.
fn file_size_limit() -> Option<u64> {
    // SAFETY: getrlimit only writes into `lim`.
    let mut lim: libc::rlimit = unsafe { std::mem::zeroed() };
    let rc = unsafe { libc::getrlimit(libc::RLIMIT_FSIZE, &mut lim) };
    (rc == 0 && lim.rlim_cur != libc::RLIM_INFINITY).then_some(lim.rlim_cur as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_directory_is_not_writable() {
        let err = check_writable(Path::new("/nonexistent-agent-db-dir/store.db")).unwrap_err();
        assert!(err.to_string().contains("not writable"), "{err}");
    }
}

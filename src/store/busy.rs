//! A store another process keeps locked: one error ([`crate::Error::Busy`], exit 9) from every
//! command, one notice while agent-db waits, and the holder's name when it can be known.
//!
//! Every connection agent-db opens waits with [`handler`] (SQLite's busy handler): it sleeps
//! with backoff until the run's wait ([`set_wait`], `compact.busy_wait`) has passed, and after
//! [`NOTICE_AFTER`] of waiting it calls the notice the CLI installed ([`on_wait`]) once per
//! process. The library never prints; the notice is the CLI's.

use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// How long agent-db waits before it says it is waiting.
pub const NOTICE_AFTER: Duration = Duration::from_secs(2);

/// The wait, in milliseconds (5 s until the CLI sets the configured one).
static WAIT_MS: AtomicU64 = AtomicU64::new(5_000);
static NOTICE: OnceLock<Box<dyn Fn() + Send + Sync>> = OnceLock::new();
static NOTIFIED: AtomicBool = AtomicBool::new(false);

thread_local! {
    /// When the current wait on a lock began (SQLite calls the handler with count 0 first).
    static STARTED: std::cell::Cell<Option<Instant>> = const { std::cell::Cell::new(None) };
}

/// How long a statement waits for another process's lock before it fails with SQLITE_BUSY
/// (then [`crate::Error::Busy`]).
pub fn set_wait(d: Duration) {
    WAIT_MS.store(
        d.as_millis().min(u64::MAX as u128) as u64,
        Ordering::Relaxed,
    );
}

/// The wait [`set_wait`] set.
pub fn wait() -> Duration {
    Duration::from_millis(WAIT_MS.load(Ordering::Relaxed))
}

/// Install the notice said once after [`NOTICE_AFTER`] of waiting (the first call wins).
pub fn on_wait(f: Box<dyn Fn() + Send + Sync>) {
    let _ = NOTICE.set(f);
}

/// A wait that began at `started`: the notice, once per process, when it has lasted
/// [`NOTICE_AFTER`].
pub fn waited(started: Instant) {
    if started.elapsed() >= NOTICE_AFTER && !NOTIFIED.swap(true, Ordering::Relaxed) {
        if let Some(f) = NOTICE.get() {
            f();
        }
    }
}

/// SQLite's busy handler for every connection: `count` is how many times it was called for
/// this lock already. `true` tries again after a pause, `false` gives up (SQLITE_BUSY).
pub fn handler(count: i32) -> bool {
    let now = Instant::now();
    let started = STARTED.with(|s| {
        if count == 0 || s.get().is_none() {
            s.set(Some(now));
        }
        s.get().unwrap_or(now)
    });
    waited(started);
    let elapsed = now.duration_since(started);
    let wait = wait();
    if elapsed >= wait {
        return false;
    }
    let pause = Duration::from_millis(match count {
        0..=2 => 1,
        3..=9 => 10,
        _ => 50,
    });
    std::thread::sleep(pause.min(wait - elapsed));
    true
}

pub use crate::error::is_busy;

/// SQLite's lock bytes (its unix VFS): the WAL write lock in the `-shm` file, and the
/// RESERVED byte of a rollback-journal database file.
const WAL_WRITE_LOCK: libc::off_t = 120;
const RESERVED_BYTE: libc::off_t = 0x4000_0001;

/// Who holds the write lock on the store at `path`, as `process 1234 (kodelet)`, when the
/// operating system says (a POSIX lock names its process). `None` when nobody visible does.
///
/// Call only when this process has no connection to the store left: closing the descriptor
/// opened here drops every POSIX lock this process holds on the file.
pub fn holder(path: &Path) -> Option<String> {
    let mut shm = path.as_os_str().to_owned();
    shm.push("-shm");
    let pid =
        lock_owner(Path::new(&shm), WAL_WRITE_LOCK).or_else(|| lock_owner(path, RESERVED_BYTE))?;
    let name = std::fs::read_to_string(format!("/proc/{pid}/comm"))
        .ok()
        .map(|n| n.trim().to_string())
        .filter(|n| !n.is_empty());
    Some(match name {
        Some(n) => format!("process {pid} ({n})"),
        None => format!("process {pid}"),
    })
}

/// The process holding a lock that conflicts with a write lock on byte `at` of `file`.
fn lock_owner(file: &Path, at: libc::off_t) -> Option<i32> {
    conflicting_lock(file, at).filter(|pid| *pid > 0)
}

/// Whether another process holds a lock on byte `at` of `file` that conflicts with a write
/// lock: `Some` with the holder's pid as `F_GETLK` reports it (not positive for a lock it
/// cannot attribute to a process), `None` when there is none or the file cannot be opened.
pub(crate) fn conflicting_lock(file: &Path, at: libc::off_t) -> Option<i32> {
    let f = std::fs::File::open(file).ok()?;
    use std::os::fd::AsRawFd;
    // SAFETY: F_GETLK fills a flock struct we own; the fd is valid while `f` lives.
    unsafe {
        let mut fl: libc::flock = std::mem::zeroed();
        fl.l_type = libc::F_WRLCK as _;
        fl.l_whence = libc::SEEK_SET as _;
        fl.l_start = at;
        fl.l_len = 1;
        (libc::fcntl(f.as_raw_fd(), libc::F_GETLK, &mut fl) == 0
            && i32::from(fl.l_type) != libc::F_UNLCK)
            .then_some(fl.l_pid)
    }
}

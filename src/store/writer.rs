//! The writer thread: the only write connection of a run. Tasks hand it proposals through a
//! channel and wait on a oneshot for the outcome; it commits each through the shared protocol
//! ([`super::commit`]) in its own transaction.
//!
//! An OS thread, not an async task: rusqlite connections block, and a commit waits while the
//! agent holds the write lock: it is retried with backoff for up to the run's `busy_wait`
//! ([`retry_busy`]); after that the writer answers every proposal with [`Error::Busy`] at once,
//! so the run reports the store busy once instead of waiting again for each conversation. agent-db's own tables are created
//! just before the first commit, so a run that writes nothing leaves the file as it was.
//!
//! Checkpoints run beside it: a second thread, on its own connection, copies committed WAL
//! frames into the database file (`wal_checkpoint(PASSIVE)`: it never waits on a lock, and the
//! writer never waits on it) each time commits have added [`CHECKPOINT_FRAMES`] frames (the
//! writer counts them with SQLite's WAL hook), so the writer's commits no longer stop to run
//! SQLite's automatic checkpoint (a quarter of its time in a batch, and its fsyncs). Should the
//! WAL still reach [`SAFETY_CHECKPOINT_PAGES`], the writer checkpoints it itself.

use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use rusqlite::Connection;
use tokio::sync::oneshot;

use super::{Access, Location, Proposal, Written};
use crate::error::{Error, Result};

type Request = (Proposal, oneshot::Sender<Result<Written>>);

/// A running writer thread.
pub struct Writer {
    tx: WriterHandle,
    thread: JoinHandle<Result<()>>,
}

/// Where tasks send proposals (cheap to clone).
#[derive(Clone)]
pub struct WriterHandle {
    tx: mpsc::Sender<Request>,
    path: PathBuf,
}

impl Writer {
    /// Start the writer on the store at `location`; a write waits up to `busy_wait` for
    /// another process's write lock.
    pub fn start(location: &Location, busy_wait: Duration) -> Writer {
        let (tx, rx) = mpsc::channel::<Request>();
        let path = location.path.clone();
        let thread = {
            let path = path.clone();
            std::thread::Builder::new()
                .name("agent-db-write".into())
                .spawn(move || serve(&path, rx, busy_wait))
                .expect("spawn the writer thread")
        };
        Writer {
            tx: WriterHandle { tx, path },
            thread,
        }
    }

    /// A handle to send proposals with.
    pub fn handle(&self) -> WriterHandle {
        self.tx.clone()
    }

    /// Wait for the writer to finish (once every handle is gone, it drains and stops).
    pub fn finish(self) -> Result<()> {
        drop(self.tx);
        self.thread.join().map_err(|p| {
            Error::Internal(format!(
                "the writer stopped: {}",
                crate::error::panic_message(p.as_ref())
            ))
        })?
    }
}

impl WriterHandle {
    /// Commit `proposal` and wait for the outcome. `Err` says the writer is gone (as the
    /// conversation's failure reason).
    pub async fn write(&self, proposal: Proposal) -> std::result::Result<Result<Written>, String> {
        let (tx, rx) = oneshot::channel();
        if self.tx.send((proposal, tx)).is_err() {
            return Err("the writer stopped".into());
        }
        rx.await
            .map_err(|_| format!("the writer for {} stopped", self.path.display()))
    }
}

/// WAL pages the writer lets grow before it checkpoints itself (SQLite's default is 1,000):
/// reached only if the checkpoint thread falls far behind.
const SAFETY_CHECKPOINT_PAGES: i32 = 16_384;

/// The checkpoint thread: on each request (coalesced), one passive checkpoint; it stops when the
/// writer does. A checkpoint that cannot run (a reader holds old frames, the file is busy) is
/// simply retried at the next request; SQLite checkpoints the rest when the last connection
/// closes, as it always did.
fn start_checkpoints(path: &Path) -> (mpsc::Sender<()>, JoinHandle<()>) {
    let (tx, rx) = mpsc::channel::<()>();
    let path = path.to_path_buf();
    let thread = std::thread::Builder::new()
        .name("agent-db-ckpt".into())
        .spawn(move || {
            let Ok(conn) = super::connect(&path, Access::Write) else {
                return;
            };
            while rx.recv().is_ok() {
                while rx.try_recv().is_ok() {}
                checkpoint(&conn);
            }
        })
        .expect("spawn the checkpoint thread");
    (tx, thread)
}

/// WAL frames written since the last checkpoint request after which the checkpoint thread is
/// asked to run: about 1 MB, a few compactions of a kodelet batch. Checkpointing after every
/// commit copied pages that the next commits rewrote (the tables' interior pages, the
/// freelist) again and again: 10% more CPU in the writer and checkpoint threads of the offline
/// batch than this mark.
const CHECKPOINT_FRAMES: i32 = 256;

thread_local! {
    /// The frames in the WAL after the writer thread's last commit (from SQLite's WAL hook).
    static WAL_FRAMES: std::cell::Cell<i32> = const { std::cell::Cell::new(0) };
}

fn note_wal_frames(_: &rusqlite::hooks::Wal, frames: std::ffi::c_int) -> rusqlite::Result<()> {
    WAL_FRAMES.set(frames);
    Ok(())
}

/// Where the next checkpoint runs.
#[derive(Debug, PartialEq)]
enum Checkpoint {
    None,
    /// On the checkpoint thread.
    Beside,
    /// On the writer itself: the WAL reached [`SAFETY_CHECKPOINT_PAGES`] (the checkpoint
    /// thread fell far behind).
    Here,
}

/// The WAL's growth as the writer's commits see it (a store not in WAL mode has no WAL hook
/// calls: its frame count stays 0 and no checkpoint is asked for).
#[derive(Default)]
struct WalGrowth {
    /// Frames in the WAL after the previous commit.
    last: i32,
    /// Frames in the WAL when the checkpoint thread was last asked to run.
    asked_at: i32,
}

impl WalGrowth {
    /// After a commit that left `frames` frames in the WAL.
    fn after_commit(&mut self, frames: i32) -> Checkpoint {
        if frames < self.last {
            // The WAL was checkpointed and started over.
            self.asked_at = 0;
        }
        self.last = frames;
        if frames >= SAFETY_CHECKPOINT_PAGES {
            self.asked_at = 0;
            Checkpoint::Here
        } else if frames - self.asked_at >= CHECKPOINT_FRAMES {
            self.asked_at = frames;
            Checkpoint::Beside
        } else {
            Checkpoint::None
        }
    }
}

/// Copy committed WAL frames into the file, never waiting on a lock (a failure is retried
/// later).
fn checkpoint(conn: &Connection) {
    let _ = conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |_| Ok(()));
}

/// The writer's loop: one connection, one transaction per proposal.
fn serve(path: &Path, requests: mpsc::Receiver<Request>, busy_wait: Duration) -> Result<()> {
    let mut conn = open(path)?;
    let (ask_checkpoint, checkpoints) = start_checkpoints(path);
    let served = serve_on(&mut conn, path, requests, &ask_checkpoint, busy_wait);
    drop(ask_checkpoint);
    let _ = checkpoints.join();
    served
}

fn serve_on(
    conn: &mut Connection,
    path: &Path,
    requests: mpsc::Receiver<Request>,
    ask_checkpoint: &mpsc::Sender<()>,
    busy_wait: Duration,
) -> Result<()> {
    let mut migrated = false;
    let mut gave_up = false;
    let mut wal = WalGrowth::default();
    for (proposal, reply) in requests {
        if gave_up {
            // The store stayed busy for the whole wait: nothing more is written this run.
            let _ = reply.send(Err(Error::Busy {
                path: path.to_path_buf(),
                holder: None,
            }));
            continue;
        }
        // agent-db's own tables are created just before the first commit, so a run that only
        // skips writes nothing at all.
        if !migrated {
            let made = retry_busy(conn, path, busy_wait, |c| {
                super::agent_tables::migrate(c).map_err(|source| Error::Sqlite {
                    path: path.to_path_buf(),
                    source,
                })
            });
            if let Err(e) = made {
                gave_up = matches!(e, Error::Busy { .. });
                let _ = reply.send(Err(e));
                continue;
            }
            migrated = true;
        }
        let outcome = retry_busy(conn, path, busy_wait, |c| commit_one(c, path, &proposal));
        gave_up = matches!(outcome, Err(Error::Busy { .. }));
        if matches!(outcome, Ok(Written::Committed { .. })) {
            match wal.after_commit(WAL_FRAMES.get()) {
                Checkpoint::None => {}
                Checkpoint::Beside => {
                    let _ = ask_checkpoint.send(());
                }
                Checkpoint::Here => checkpoint(conn),
            }
        }
        let _ = reply.send(outcome);
    }
    Ok(())
}

/// Whether an error is SQLite's "another connection holds the lock" (`SQLITE_BUSY`,
/// `SQLITE_LOCKED`).
fn is_busy(e: &Error) -> bool {
    match e {
        Error::Busy { .. } => true,
        Error::Sqlite { source, .. } => super::busy::is_busy(source),
        _ => false,
    }
}

/// Run `f` (one transaction), retrying while another process holds the write lock: SQLite's own
/// busy handler waits up to a second at a time, and between attempts agent-db pauses 50 ms,
/// doubling up to 2 s, until `wait` has passed since the first attempt. Then [`Error::Busy`];
/// every transaction rolled back, so nothing of it was written.
fn retry_busy<T>(
    conn: &mut Connection,
    path: &Path,
    wait: Duration,
    mut f: impl FnMut(&mut Connection) -> Result<T>,
) -> Result<T> {
    let started = Instant::now();
    let deadline = started + wait;
    let mut pause = Duration::from_millis(50);
    let outcome = loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let _ = conn.busy_timeout(left.min(Duration::from_secs(1)));
        match f(conn) {
            Err(e) if is_busy(&e) => {
                super::busy::waited(started);
                let left = deadline.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    break Err(Error::Busy {
                        path: path.to_path_buf(),
                        holder: None,
                    });
                }
                std::thread::sleep(pause.min(left));
                pause = (pause * 2).min(Duration::from_secs(2));
            }
            other => break other,
        }
    };
    let _ = conn.busy_handler(Some(super::busy::handler));
    outcome
}

/// The write connection. As kodelet and docker-agent run their own connections: in WAL mode a
/// commit is then durable against a crash of the process (the crash test kills it), and fsync
/// happens at checkpoints rather than on every one of a batch's commits. Per connection only;
/// the file is not changed.
fn open(path: &Path) -> Result<Connection> {
    let conn = super::connect(path, Access::Write)?;
    let sql_error = |source| Error::Sqlite {
        path: path.to_path_buf(),
        source,
    };
    conn.pragma_update(None, "synchronous", "NORMAL")
        .map_err(sql_error)?;
    // The WAL hook counts the frames each commit leaves (it replaces SQLite's automatic
    // checkpoint, which is the same hook; [`WalGrowth`] keeps its safety valve).
    conn.wal_hook(Some(note_wal_frames));
    // Every commit runs the same few dozen statements (the archive's per-cell reads among
    // them): keep them all prepared (rusqlite keeps 16 by default).
    conn.set_prepared_statement_cache_capacity(64);
    Ok(conn)
}

/// Commit one proposal. A panic while writing one conversation is that conversation's failure:
/// the open transaction rolls back as it unwinds, and the writer serves the others.
fn commit_one(conn: &mut Connection, path: &Path, proposal: &Proposal) -> Result<Written> {
    let at = crate::gotime::rfc3339_utc(&crate::gotime::now());
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        crate::failpoint::hit("write", proposal.id());
        proposal.write.commit(conn, path, &proposal.audit, &at)
    }))
    .unwrap_or_else(|p| {
        Err(Error::Internal(format!(
            "while writing conversation {}: {}",
            proposal.id(),
            crate::error::panic_message(p.as_ref())
        )))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_checkpoint_thread_is_asked_once_per_checkpoint_frames() {
        let mut w = WalGrowth::default();
        let asks: Vec<Checkpoint> = [70, 140, 210, 280, 350, 420, 490, 560]
            .into_iter()
            .map(|f| w.after_commit(f))
            .collect();
        use Checkpoint::*;
        assert_eq!(asks, [None, None, None, Beside, None, None, None, Beside]);
    }

    #[test]
    fn a_wal_that_started_over_counts_from_zero() {
        let mut w = WalGrowth::default();
        assert_eq!(w.after_commit(300), Checkpoint::Beside);
        // Checkpointed; the next commit restarted the WAL from its first frame.
        assert_eq!(w.after_commit(70), Checkpoint::None);
        assert_eq!(w.after_commit(140), Checkpoint::None);
        assert_eq!(w.after_commit(260), Checkpoint::Beside);
    }

    #[test]
    fn the_writer_checkpoints_itself_when_the_wal_grows_too_far() {
        let mut w = WalGrowth::default();
        let big = SAFETY_CHECKPOINT_PAGES;
        assert_eq!(w.after_commit(big - 10), Checkpoint::Beside);
        assert_eq!(w.after_commit(big + 60), Checkpoint::Here);
        // Not checkpointed yet (a reader held it): it tries again after the next commit.
        assert_eq!(w.after_commit(big + 130), Checkpoint::Here);
    }

    #[test]
    fn no_wal_no_checkpoint() {
        let mut w = WalGrowth::default();
        assert!((0..100).all(|_| w.after_commit(0) == Checkpoint::None));
    }
}

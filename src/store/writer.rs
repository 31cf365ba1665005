//! The writer thread: the only write connection of a run. Tasks hand it proposals through a
//! channel and wait on a oneshot for the outcome; it commits each through the shared protocol
//! ([`super::commit`]) in its own transaction.
//!
//! An OS thread, not an async task: rusqlite connections block, and a commit can wait up to the
//! 5-second busy timeout while the agent holds the write lock. agent-db's own tables are created
//! just before the first commit, so a run that writes nothing leaves the file as it was.
//!
//! Checkpoints run beside it: a second thread, on its own connection, copies committed WAL
//! frames into the database file (`wal_checkpoint(PASSIVE)`: it never waits on a lock, and the
//! writer never waits on it) after commits, so the writer's commits no longer stop to run
//! SQLite's automatic checkpoint (a quarter of its time in a batch, and its fsyncs). The
//! writer's own automatic checkpoint stays on at a high mark as a safety valve.

use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::thread::JoinHandle;

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
    /// Start the writer on the store at `location`.
    pub fn start(location: &Location) -> Writer {
        let (tx, rx) = mpsc::channel::<Request>();
        let path = location.path.clone();
        let thread = {
            let path = path.clone();
            std::thread::Builder::new()
                .name("agent-db-write".into())
                .spawn(move || serve(&path, rx))
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
const SAFETY_CHECKPOINT_PAGES: i64 = 16_384;

/// The checkpoint thread: after commits (coalesced), one passive checkpoint; it stops when the
/// writer does. A checkpoint that cannot run (a reader holds old frames, the file is busy) is
/// simply retried after the next commit; SQLite checkpoints the rest when the last connection
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
                let _ = conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |_| Ok(()));
            }
        })
        .expect("spawn the checkpoint thread");
    (tx, thread)
}

/// The writer's loop: one connection, one transaction per proposal.
fn serve(path: &Path, requests: mpsc::Receiver<Request>) -> Result<()> {
    let mut conn = open(path)?;
    let (committed, checkpoints) = start_checkpoints(path);
    let served = serve_on(&mut conn, path, requests, &committed);
    drop(committed);
    let _ = checkpoints.join();
    served
}

fn serve_on(
    conn: &mut Connection,
    path: &Path,
    requests: mpsc::Receiver<Request>,
    committed: &mpsc::Sender<()>,
) -> Result<()> {
    let mut migrated = false;
    for (proposal, reply) in requests {
        // agent-db's own tables are created just before the first commit, so a run that only
        // skips writes nothing at all.
        if !migrated {
            if let Err(e) = super::agent_tables::migrate(conn) {
                let _ = reply.send(Err(Error::Sqlite {
                    path: path.to_path_buf(),
                    source: e,
                }));
                continue;
            }
            migrated = true;
        }
        let outcome = commit_one(conn, path, &proposal);
        if matches!(outcome, Ok(Written::Committed { .. })) {
            let _ = committed.send(());
        }
        let _ = reply.send(outcome);
    }
    Ok(())
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
    conn.pragma_update(None, "wal_autocheckpoint", SAFETY_CHECKPOINT_PAGES)
        .map_err(sql_error)?;
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

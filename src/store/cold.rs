//! The cold file of `agent-db retire` (`<store>.agent-db-cold.db` by default): an SQLite file of
//! agent-db's own, in rollback-journal mode with `synchronous = FULL` (each commit is on disk
//! when it returns: the copy must be durable before the store deletes the rows; a retirement
//! commits here once per batch, the batch before marked in the same transaction, so the
//! journal's fsyncs are paid per batch). One
//! `agent_db_cold` row per retirement (its state: `moving` until the
//! store's transaction committed, then `retired`) and one `agent_db_cold_tables` row per table
//! of it: the rows' cells ([`super::row_codec::encode_cell`]) as one zstd frame.

use std::path::{Path, PathBuf};

use std::sync::mpsc::{sync_channel, Receiver, SyncSender};

use rusqlite::{params, Connection, OpenFlags, OptionalExtension};

use super::retire::{Moved, TableRows};
use crate::error::{Error, Result, SqlContext};

/// `PRAGMA application_id` of a cold file ("ADBC").
const APPLICATION_ID: i64 = 0x4144_4243;

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS agent_db_cold (
  token TEXT PRIMARY KEY,
  conversation_id TEXT NOT NULL,
  store_kind TEXT NOT NULL,
  store_path TEXT NOT NULL,
  state TEXT NOT NULL,
  moved_at TEXT NOT NULL,
  conversations TEXT NOT NULL,
  rows INTEGER NOT NULL,
  bytes INTEGER NOT NULL,
  digest TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS agent_db_cold_tables (
  token TEXT NOT NULL REFERENCES agent_db_cold(token) ON DELETE CASCADE,
  seq INTEGER NOT NULL,
  table_name TEXT NOT NULL,
  columns TEXT NOT NULL,
  row_count INTEGER NOT NULL,
  data BLOB NOT NULL,
  PRIMARY KEY (token, seq)
);";

/// The default cold file of `store`.
pub fn default_path(store: &Path) -> PathBuf {
    let mut s = store.as_os_str().to_owned();
    s.push(".agent-db-cold.db");
    PathBuf::from(s)
}

/// An open cold file.
pub struct Cold {
    pub path: PathBuf,
    conn: Connection,
}

/// One retirement as the cold file records it.
#[derive(Debug, Clone)]
pub struct Entry {
    pub token: String,
    pub conversation_id: String,
    pub state: String,
    pub digest: String,
}

impl Cold {
    /// Open `path`, creating it when `create` (else `None` when it is not there). A file that
    /// is not a cold file is refused.
    pub fn open(path: &Path, create: bool) -> Result<Option<Cold>> {
        if !path.exists() && !create {
            return Ok(None);
        }
        let flags = OpenFlags::SQLITE_OPEN_READ_WRITE
            | OpenFlags::SQLITE_OPEN_CREATE
            | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let conn = Connection::open_with_flags(path, flags).at(path)?;
        conn.busy_timeout(std::time::Duration::from_secs(30))
            .at(path)?;
        let id: i64 = conn
            .pragma_query_value(None, "application_id", |r| r.get(0))
            .map_err(|e| not_cold(path, &e.to_string()))?;
        let tables: i64 = conn
            .query_row("SELECT COUNT(*) FROM sqlite_master", [], |r| r.get(0))
            .map_err(|e| not_cold(path, &e.to_string()))?;
        if id != APPLICATION_ID && tables > 0 {
            return Err(not_cold(path, "another program's database"));
        }
        conn.pragma_update(None, "synchronous", "FULL").at(path)?;
        conn.pragma_update(None, "foreign_keys", "ON").at(path)?;
        if id != APPLICATION_ID {
            conn.pragma_update(None, "application_id", APPLICATION_ID)
                .at(path)?;
        }
        conn.execute_batch(SCHEMA).at(path)?;
        Ok(Some(Cold {
            path: path.to_path_buf(),
            conn,
        }))
    }

    /// In one transaction, committed when `copies` ends: the copies `retired` marked `retired`
    /// and the copies `dropped` removed (as [`Cold::finish`]), then each copy `copies` yields (a
    /// token, the rows and their tables' zstd frames) written as a retirement in state `moving`;
    /// nothing is written when one fails.
    fn put_all(
        &mut self,
        kind: &str,
        store: &Path,
        now: &str,
        (retired, dropped): (&[&str], &[&str]),
        copies: impl Iterator<Item = std::io::Result<Packed>>,
    ) -> Result<()> {
        let path = self.path.clone();
        let tx = self.conn.transaction().at(&path)?;
        mark_in(&tx, &path, retired, dropped)?;
        for copy in copies {
            let (token, bytes, moved, frames) = copy.map_err(|source| Error::Io {
                path: path.clone(),
                source,
            })?;
            put_one(
                &tx,
                &path,
                &token,
                (kind, store),
                (&moved, bytes),
                frames,
                now,
            )?;
        }
        tx.commit().at(&path)
    }

    /// In one transaction: the copies `retired` marked `retired`, the copies `dropped` removed.
    pub fn finish(&mut self, retired: &[&str], dropped: &[&str]) -> Result<()> {
        let path = self.path.clone();
        let tx = self.conn.transaction().at(&path)?;
        mark_in(&tx, &path, retired, dropped)?;
        tx.commit().at(&path)
    }

    /// Set retirement `token`'s state; whether it is in the file.
    pub fn mark(&self, token: &str, state: &str) -> Result<bool> {
        let n = self
            .conn
            .execute(
                "UPDATE agent_db_cold SET state = ?2 WHERE token = ?1",
                params![token, state],
            )
            .at(&self.path)?;
        Ok(n > 0)
    }

    /// Remove retirement `token` and its rows.
    pub fn remove(&mut self, token: &str) -> Result<()> {
        self.finish(&[], &[token])
    }

    /// Retirement `token`, if the file holds it.
    pub fn entry(&self, token: &str) -> Result<Option<Entry>> {
        self.conn
            .query_row(
                "SELECT token, conversation_id, state, digest FROM agent_db_cold WHERE token = ?1",
                [token],
                entry_row,
            )
            .optional()
            .at(&self.path)
    }

    /// The copies still `moving` that the store at `store` (as it wrote its path) put here.
    pub fn moving(&self, store: &str) -> Result<Vec<Entry>> {
        let mut st = self
            .conn
            .prepare(
                "SELECT token, conversation_id, state, digest FROM agent_db_cold
                 WHERE state = 'moving' AND store_path = ?1 ORDER BY rowid",
            )
            .at(&self.path)?;
        let rows = st.query_map([store], entry_row).at(&self.path)?;
        rows.collect::<std::result::Result<_, _>>().at(&self.path)
    }

    /// Every retirement the file holds.
    pub fn entries(&self) -> Result<Vec<Entry>> {
        let mut st = self
            .conn
            .prepare(
                "SELECT token, conversation_id, state, digest FROM agent_db_cold ORDER BY rowid",
            )
            .at(&self.path)?;
        let rows = st.query_map([], entry_row).at(&self.path)?;
        rows.collect::<std::result::Result<_, _>>().at(&self.path)
    }

    /// The tables of retirement `token`, decompressed.
    pub fn tables(&self, token: &str) -> Result<Vec<TableRows>> {
        let mut st = self
            .conn
            .prepare(
                "SELECT table_name, columns, row_count, data FROM agent_db_cold_tables
                 WHERE token = ?1 ORDER BY seq",
            )
            .at(&self.path)?;
        let rows = st
            .query_map([token], |r| {
                Ok((
                    r.get::<_, String>(0)?,
                    r.get::<_, String>(1)?,
                    r.get::<_, i64>(2)?,
                    r.get::<_, Vec<u8>>(3)?,
                ))
            })
            .at(&self.path)?
            .collect::<std::result::Result<Vec<_>, _>>()
            .at(&self.path)?;
        let mut out = Vec::with_capacity(rows.len());
        for (table, columns, n, frame) in rows {
            let data = zstd::stream::decode_all(frame.as_slice())
                .map_err(|e| not_cold(&self.path, &format!("a frame does not decompress ({e})")))?;
            out.push(TableRows {
                table,
                columns: serde_json::from_str(&columns)
                    .map_err(|e| not_cold(&self.path, &e.to_string()))?,
                rows: n.max(0) as u64,
                data,
            });
        }
        Ok(out)
    }

    /// The file's size on disk, in bytes.
    pub fn size(path: &Path) -> u64 {
        std::fs::metadata(path).map(|m| m.len()).unwrap_or(0)
    }
}

/// An [`Entry`] from `SELECT token, conversation_id, state, digest`.
fn entry_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<Entry> {
    Ok(Entry {
        token: r.get(0)?,
        conversation_id: r.get(1)?,
        state: r.get(2)?,
        digest: r.get(3)?,
    })
}

/// One conversation's copy as the cold file's writer takes it: its token, its rows' bytes, its
/// rows without their cells (the compressor dropped them), and its tables' zstd frames.
type Packed = (String, u64, Moved, Vec<Vec<u8>>);

/// A copy being compressed: its token, its bytes and where its rows and frames arrive.
type InFlight = (
    String,
    u64,
    Receiver<std::io::Result<(Moved, Vec<Vec<u8>>)>>,
);

/// A copy to compress and where to send it.
type Job = (Moved, SyncSender<std::io::Result<(Moved, Vec<Vec<u8>>)>>);

/// How many bytes of rows [`Cold::packing`] holds in memory at most (one copy larger than this
/// goes alone): enough to keep every compressor busy behind a large conversation.
const IN_FLIGHT_BYTES: u64 = 32 << 20;

/// The sending end of [`Cold::packing`]: copies go to the compressors and, in the order sent,
/// to the cold file's writer.
pub struct Packing<'a> {
    jobs: SyncSender<Job>,
    writer: SyncSender<InFlight>,
    gate: &'a Gate,
}

impl Packing<'_> {
    /// Send retirement `token`'s rows, once the copies in memory leave room for them; `false`
    /// when the cold file's writer stopped (its error is [`Cold::packing`]'s).
    pub fn send(&self, token: String, moved: Moved) -> bool {
        let bytes = moved.bytes();
        if !self.gate.enter(bytes) {
            return false;
        }
        let (done, arrives) = sync_channel(1);
        self.jobs.send((moved, done)).is_ok() && self.writer.send((token, bytes, arrives)).is_ok()
    }
}

/// The bytes of the copies sent and not yet written, and whether the writer stopped.
struct Gate {
    held: std::sync::Mutex<(u64, bool)>,
    room: std::sync::Condvar,
}

impl Gate {
    /// Wait until `bytes` more fit under [`IN_FLIGHT_BYTES`] (or nothing is held), then hold
    /// them; `false` when the writer stopped.
    fn enter(&self, bytes: u64) -> bool {
        let Ok(mut held) = self.held.lock() else {
            return false;
        };
        while !held.1 && held.0 > 0 && held.0 + bytes > IN_FLIGHT_BYTES {
            held = match self.room.wait(held) {
                Ok(h) => h,
                Err(_) => return false,
            };
        }
        held.0 += bytes;
        !held.1
    }

    /// `bytes` written; `stop`: the writer ends.
    fn leave(&self, bytes: u64, stop: bool) {
        if let Ok(mut held) = self.held.lock() {
            held.0 = held.0.saturating_sub(bytes);
            held.1 |= stop;
        }
        self.room.notify_all();
    }
}

/// Closes the [`Gate`] when dropped.
struct Stopped<'a>(&'a Gate);

impl Drop for Stopped<'_> {
    fn drop(&mut self) {
        self.0.leave(0, true);
    }
}

impl Cold {
    /// Run `read` on this thread with a [`Packing`] whose copies `threads` threads compress
    /// (zstd level 1: the copy is written once and read back rarely) while a writer thread puts
    /// them in order into one transaction as [`Cold::put_all`] does (`marks` first), holding
    /// at most [`IN_FLIGHT_BYTES`] of rows in memory. `read`'s answer, and the cold file's.
    pub fn packing<T>(
        &mut self,
        (kind, store, now): (&str, &Path, &str),
        marks: (&[&str], &[&str]),
        threads: usize,
        read: impl FnOnce(&Packing<'_>) -> T,
    ) -> (T, Result<()>) {
        let threads = threads.max(1);
        let (jobs, queue) = sync_channel::<Job>(64);
        // Shared by the compressors only: when the last one ends, even by a panic, the queue
        // and the copies in it go, and the writer and the reader hear it instead of waiting.
        let queue = std::sync::Arc::new(std::sync::Mutex::new(queue));
        let (writer, copies) = sync_channel::<InFlight>(64);
        let gate = Gate {
            held: std::sync::Mutex::new((0, false)),
            room: std::sync::Condvar::new(),
        };
        std::thread::scope(|scope| {
            for _ in 0..threads {
                let queue = std::sync::Arc::clone(&queue);
                scope.spawn(move || compress(&queue));
            }
            drop(queue);
            let gate = &gate;
            let put = scope.spawn(move || {
                // However the writer ends, the reader stops waiting for room.
                let _stopped = Stopped(gate);
                let copies = copies.into_iter().map(|(token, bytes, arrives)| {
                    let got = arrives.recv().map_err(std::io::Error::other);
                    gate.leave(bytes, false);
                    let (moved, frames) = got??;
                    Ok((token, bytes, moved, frames))
                });
                self.put_all(kind, store, now, marks, copies)
            });
            let out = read(&Packing { jobs, writer, gate });
            let put = put
                .join()
                .unwrap_or_else(|_| Err(Error::Usage("the cold file's writer panicked".into())));
            (out, put)
        })
    }
}

/// A compressor of [`Cold::packing`]: takes copies from `queue` until it closes.
fn compress(queue: &std::sync::Mutex<Receiver<Job>>) {
    let mut zstd = zstd::bulk::Compressor::new(1);
    let mut scratch = Vec::new();
    loop {
        let job = match queue.lock() {
            Ok(q) => q.recv(),
            Err(_) => return,
        };
        let Ok((mut moved, done)) = job else { return };
        let frames = match &mut zstd {
            Ok(z) => pack(z, &mut scratch, &mut moved),
            Err(e) => Err(std::io::Error::new(e.kind(), e.to_string())),
        };
        // The writer gone, the copy is not wanted.
        let _ = done.send(frames.map(|f| (moved, f)));
    }
}

/// A scratch buffer larger than this is not kept for the next copy.
const SCRATCH_KEPT: usize = 8 << 20;

/// Each table of `moved` as one zstd frame, compressed into `scratch` (one context and one
/// buffer per compressor: no allocation of the worst case per table) and kept at its own
/// size; the cells are dropped once compressed (the writer needs only the frames).
fn pack(
    z: &mut zstd::bulk::Compressor<'_>,
    scratch: &mut Vec<u8>,
    moved: &mut Moved,
) -> std::io::Result<Vec<Vec<u8>>> {
    let mut frames = Vec::with_capacity(moved.tables.len());
    for t in &mut moved.tables {
        scratch.clear();
        scratch.reserve(zstd::zstd_safe::compress_bound(t.data.len()));
        z.compress_to_buffer(&t.data, scratch)?;
        frames.push(scratch.as_slice().to_vec());
        t.data = Vec::new();
    }
    if scratch.capacity() > SCRATCH_KEPT {
        *scratch = Vec::new();
    }
    Ok(frames)
}

/// Retirement `token`'s row and its tables' frames, in `tx`.
fn put_one(
    tx: &Connection,
    path: &Path,
    token: &str,
    (kind, store): (&str, &Path),
    (moved, bytes): (&Moved, u64),
    frames: Vec<Vec<u8>>,
    now: &str,
) -> Result<()> {
    tx.prepare_cached(
        "INSERT INTO agent_db_cold(token, conversation_id, store_kind, store_path, state, moved_at,
           conversations, rows, bytes, digest) VALUES (?1, ?2, ?3, ?4, 'moving', ?5, ?6, ?7, ?8, ?9)",
    )
    .and_then(|mut st| {
        st.execute(params![
            token,
            moved.ids[0],
            kind,
            store.display().to_string(),
            now,
            serde_json::to_string(&moved.ids).unwrap_or_default(),
            moved.rows() as i64,
            bytes as i64,
            moved.digest
        ])
    })
    .at(path)?;
    let mut st = tx
        .prepare_cached(
            "INSERT INTO agent_db_cold_tables(token, seq, table_name, columns, row_count, data)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
        )
        .at(path)?;
    for (seq, (t, frame)) in moved.tables.iter().zip(frames).enumerate() {
        st.execute(params![
            token,
            seq as i64,
            t.table,
            serde_json::to_string(&t.columns).unwrap_or_default(),
            t.rows as i64,
            frame
        ])
        .at(path)?;
    }
    Ok(())
}

/// The copies `retired` marked `retired`, the copies `dropped` removed, in `tx`.
fn mark_in(tx: &Connection, path: &Path, retired: &[&str], dropped: &[&str]) -> Result<()> {
    for t in retired {
        tx.execute(
            "UPDATE agent_db_cold SET state = 'retired' WHERE token = ?1",
            [t],
        )
        .at(path)?;
    }
    for t in dropped {
        remove_in(tx, path, t)?;
    }
    Ok(())
}

/// Remove retirement `token` and its rows, in `tx`.
fn remove_in(tx: &Connection, path: &Path, token: &str) -> Result<()> {
    tx.execute("DELETE FROM agent_db_cold_tables WHERE token = ?1", [token])
        .at(path)?;
    tx.execute("DELETE FROM agent_db_cold WHERE token = ?1", [token])
        .at(path)?;
    Ok(())
}

fn not_cold(path: &Path, detail: &str) -> Error {
    Error::NotSqlite {
        path: path.to_path_buf(),
        detail: format!("not an agent-db cold file: {detail}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::retire::TableRows;

    fn moved(text: &str) -> Moved {
        Moved {
            ids: vec!["c".into()],
            tables: vec![TableRows {
                table: "t".into(),
                columns: vec!["v".into()],
                rows: 1,
                data: text.as_bytes().to_vec(),
            }],
            digest: String::new(),
        }
    }

    fn open_cold() -> (tempfile::TempDir, Cold) {
        let dir = tempfile::tempdir().unwrap();
        let cold = Cold::open(&dir.path().join("c.db"), true).unwrap().unwrap();
        (dir, cold)
    }

    /// Copies compressed on several threads reach the file in the order they were sent, each
    /// table's frame decompressing to its bytes.
    #[test]
    fn packed_copies_arrive_in_order_and_decompress_to_their_rows() {
        let (_dir, mut cold) = open_cold();
        let texts: Vec<String> = (0..40)
            .map(|i| format!("row {i}: ") + &"a line of a long log\n".repeat(i * 97 % 700))
            .collect();
        let store = Path::new("s.db");
        let (sent, put) = cold.packing(("an-agent", store, "now"), (&[], &[]), 3, |p| {
            texts
                .iter()
                .enumerate()
                .all(|(i, t)| p.send(format!("t{i:02}"), moved(t)))
        });
        assert!(sent);
        put.unwrap();
        let entries = cold.entries().unwrap();
        let tokens: Vec<&str> = entries.iter().map(|e| e.token.as_str()).collect();
        let want: Vec<String> = (0..40).map(|i| format!("t{i:02}")).collect();
        assert_eq!(tokens, want.iter().map(String::as_str).collect::<Vec<_>>());
        for (i, t) in texts.iter().enumerate() {
            let tables = cold.tables(&format!("t{i:02}")).unwrap();
            assert_eq!(tables[0].data, t.as_bytes());
        }
    }

    /// A table's frame is kept at its own size (not the worst case zstd reserves, which is
    /// more than the rows) and decompresses to the rows; the rows leave the copy once packed.
    #[test]
    fn a_packed_copy_keeps_frames_of_their_own_size_and_drops_its_rows() {
        let mut z = zstd::bulk::Compressor::new(1).unwrap();
        let mut scratch = Vec::new();
        let texts = [
            "a line of a long log\n".repeat(5000),
            String::new(),
            "x".into(),
        ];
        for text in &texts {
            let mut m = moved(text);
            let frames = pack(&mut z, &mut scratch, &mut m).unwrap();
            assert_eq!(frames.len(), 1);
            assert!(
                frames[0].capacity() <= frames[0].len() + 16,
                "{}",
                frames[0].capacity()
            );
            assert_eq!(
                zstd::stream::decode_all(frames[0].as_slice()).unwrap(),
                text.as_bytes()
            );
            assert!(m.tables[0].data.is_empty());
            assert_eq!((m.tables[0].table.as_str(), m.tables[0].rows), ("t", 1));
        }
        let big = vec![7u8; SCRATCH_KEPT * 2];
        let mut m = moved("");
        m.tables[0].data = big.clone();
        let frames = pack(&mut z, &mut scratch, &mut m).unwrap();
        assert_eq!(zstd::stream::decode_all(frames[0].as_slice()).unwrap(), big);
        assert!(scratch.capacity() <= SCRATCH_KEPT);
    }

    /// When the writer fails (here: a token written twice), the sender hears it within a few
    /// copies, and nothing of the transaction is in the file.
    #[test]
    fn a_failed_writer_stops_the_sender_and_writes_nothing() {
        let (_dir, mut cold) = open_cold();
        let (sent, put) =
            cold.packing(("an-agent", Path::new("s.db"), "now"), (&[], &[]), 2, |p| {
                (0..100).position(|i| {
                    !p.send(
                        if i < 2 {
                            "same".into()
                        } else {
                            format!("t{i}")
                        },
                        moved("x"),
                    )
                })
            });
        assert!(sent.is_some(), "the sender never heard the writer stop");
        assert!(put.is_err());
        assert!(cold.entries().unwrap().is_empty());
    }
}

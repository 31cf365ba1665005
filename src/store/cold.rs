//! The cold file of `agent-db retire` (`<store>.agent-db-cold.db` by default): an SQLite file of
//! agent-db's own, in rollback-journal mode with `synchronous = FULL` (each commit is on disk
//! when it returns: the copy must be durable before the store deletes the rows; a retirement
//! commits here once per batch, the batch before marked in the same transaction, so the
//! journal's fsyncs are paid per batch). One
//! `agent_db_cold` row per retirement (its state: `moving` until the
//! store's transaction committed, then `retired`) and one `agent_db_cold_tables` row per table
//! of it: the rows' cells ([`super::row_codec::encode_cell`]) as one zstd frame.

use std::path::{Path, PathBuf};

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
    /// token and the rows) written as a retirement in state `moving`, its tables compressed;
    /// nothing is written when one fails.
    pub fn put_all(
        &mut self,
        kind: &str,
        store: &Path,
        now: &str,
        (retired, dropped): (&[&str], &[&str]),
        copies: impl Iterator<Item = Copy>,
    ) -> Result<()> {
        let path = self.path.clone();
        let io = |source| Error::Io {
            path: path.clone(),
            source,
        };
        let mut zstd = zstd::bulk::Compressor::new(1).map_err(io)?;
        let tx = self.conn.transaction().at(&path)?;
        mark_in(&tx, &path, retired, dropped)?;
        for (token, moved, frames) in copies {
            let frames = match frames {
                Some(f) => f,
                None => pack(&mut zstd, &moved).map_err(io)?,
            };
            put_one(&tx, &path, &token, (kind, store), &moved, frames, now)?;
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

/// One conversation's copy on its way to the cold file: its token, its rows, and its tables'
/// zstd frames when they are already made ([`hand_over`]).
pub type Copy = (String, Moved, Option<Vec<Vec<u8>>>);

/// Each table of `moved` as a zstd frame.
fn pack(zstd: &mut zstd::bulk::Compressor<'_>, moved: &Moved) -> std::io::Result<Vec<Vec<u8>>> {
    moved
        .tables
        .iter()
        .map(|t| zstd.compress(&t.data))
        .collect()
}

/// Send `copy` to the cold file's writer. While the writer is behind (its queue is full), the
/// sender compresses the copy itself first, so both threads share the compression; `packer` is
/// the sender's compressor, made the first time it helps. `false`: the writer stopped.
pub fn hand_over(
    to: &std::sync::mpsc::SyncSender<Copy>,
    packer: &mut Option<zstd::bulk::Compressor<'static>>,
    copy: Copy,
) -> bool {
    use std::sync::mpsc::TrySendError;
    let (token, moved, _) = match to.try_send(copy) {
        Ok(()) => return true,
        Err(TrySendError::Disconnected(_)) => return false,
        Err(TrySendError::Full(copy)) => copy,
    };
    let frames = match packer {
        Some(z) => pack(z, &moved).ok(),
        None => zstd::bulk::Compressor::new(1).ok().and_then(|mut z| {
            let f = pack(&mut z, &moved).ok();
            *packer = Some(z);
            f
        }),
    };
    // A failed compression here leaves it to the writer.
    to.send((token, moved, frames)).is_ok()
}

/// Retirement `token`'s row and its tables' frames (zstd level 1: the copy is written once and
/// read back rarely), in `tx`.
fn put_one(
    tx: &Connection,
    path: &Path,
    token: &str,
    (kind, store): (&str, &Path),
    moved: &Moved,
    frames: Vec<Vec<u8>>,
    now: &str,
) -> Result<()> {
    tx.execute(
        "INSERT INTO agent_db_cold(token, conversation_id, store_kind, store_path, state, moved_at,
           conversations, rows, bytes, digest) VALUES (?1, ?2, ?3, ?4, 'moving', ?5, ?6, ?7, ?8, ?9)",
        params![
            token,
            moved.ids[0],
            kind,
            store.display().to_string(),
            now,
            serde_json::to_string(&moved.ids).unwrap_or_default(),
            moved.rows() as i64,
            moved.bytes() as i64,
            moved.digest
        ],
    )
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

    /// With room in the queue a copy goes as it is; with the queue full the sender compresses
    /// it itself, into frames that decompress to the tables' bytes; with the writer gone it
    /// says so.
    #[test]
    fn hand_over_compresses_only_while_the_writer_is_behind() {
        let (to, from) = std::sync::mpsc::sync_channel::<Copy>(1);
        let mut packer = None;
        assert!(hand_over(
            &to,
            &mut packer,
            ("a".into(), moved("first"), None)
        ));
        let helper = std::thread::spawn(move || from.into_iter().collect::<Vec<Copy>>());
        let big = "a line of a long log\n".repeat(4096);
        // Full or not, the second copy arrives; when it was full, with its frames made here.
        assert!(hand_over(&to, &mut packer, ("b".into(), moved(&big), None)));
        drop(to);
        let got = helper.join().unwrap();
        assert_eq!(got.len(), 2);
        assert!(got[0].2.is_none(), "the first copy had room");
        if let Some(frames) = &got[1].2 {
            assert_eq!(
                zstd::stream::decode_all(frames[0].as_slice()).unwrap(),
                big.as_bytes()
            );
        }
        let (to, from) = std::sync::mpsc::sync_channel::<Copy>(0);
        drop(from);
        assert!(!hand_over(&to, &mut packer, ("c".into(), moved("x"), None)));
    }
}

//! The two-file protocol of `retire` and of `restore` from a cold file, and its recovery
//! (docs/architecture.md, "Retire"). A retirement is a row of the store's
//! `agent_db_retirements` (`moving` → `retired` → `restored`; `settled` once the cold file
//! agrees) and a row of the cold file's `agent_db_cold` (`moving` → `retired`, removed after
//! a restore). A SQLite transaction spans one file only, so each step commits in one file and
//! [`recover`] finishes or undoes whatever a crash interrupted: a conversation is always whole
//! in the store, in the cold file, or (until recovery) in both, never in neither.

use std::path::{Path, PathBuf};

use rusqlite::{params, Connection, OptionalExtension, TransactionBehavior};
use serde::Serialize;

use super::cold::Cold;
use super::pre_image::{self as archive, AuditEntry};
use super::retire::{self, Moved, RetireMap};
use super::Store;
use crate::error::{Error, Result, SqlContext};
use crate::failpoint;

/// The audit log's strategy of a retirement (`history` shows it).
pub const STRATEGY: &str = "retire";

/// What happened to one conversation.
#[derive(Debug, Clone, Serialize)]
pub struct Outcome {
    pub conversation: String,
    /// `retired`, `restored`, `would retire`, or `skipped: why`.
    pub status: String,
    /// The conversation and the child conversations that moved with it.
    pub conversations: Vec<String>,
    pub rows: u64,
    /// The rows' stored bytes.
    pub bytes: u64,
    /// The audit log's row (`history`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub compaction_id: Option<i64>,
}

impl Outcome {
    fn of(id: &str, status: &str, moved: Option<&Moved>) -> Outcome {
        Outcome {
            conversation: id.to_string(),
            status: status.to_string(),
            conversations: moved.map(|m| m.ids.clone()).unwrap_or_default(),
            rows: moved.map_or(0, Moved::rows),
            bytes: moved.map_or(0, Moved::bytes),
            compaction_id: None,
        }
    }
}

/// One retired conversation as the store records it.
#[derive(Debug, Clone, Serialize)]
pub struct Retirement {
    pub token: String,
    pub conversation_id: String,
    pub cold_path: PathBuf,
    pub digest: String,
    pub compaction_id: Option<i64>,
}

/// The agent's map of what moves, or the error for a store that has none.
fn map_of(store: &Store) -> Result<RetireMap> {
    store.kind.adapter().retire_map().ok_or_else(|| {
        Error::Usage(format!(
            "{} stores cannot retire conversations",
            store.kind.name()
        ))
    })
}

/// What retiring `id` would move (`--dry-run`); `None` when it is not in the store.
pub fn plan(store: &Store, id: &str) -> Result<Option<Moved>> {
    let map = map_of(store)?;
    retire::read(&store.conn, &store.path, &map, id)
}

/// A token no other retirement has.
fn new_token(id: &str) -> String {
    static N: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let mut h = xxhash_rust::xxh3::Xxh3::new();
    h.update(id.as_bytes());
    h.update(&nanos.to_le_bytes());
    h.update(&std::process::id().to_le_bytes());
    h.update(&n.to_le_bytes());
    format!("{:032x}", h.digest128())
}

/// Run `f` on `conn` with foreign-key enforcement and triggers off (the rows leave and come
/// back exactly as stored; nothing outside them changes), then put both back as they were.
fn checks_off<T>(
    conn: &mut Connection,
    path: &Path,
    f: impl FnOnce(&mut Connection) -> Result<T>,
) -> Result<T> {
    use rusqlite::config::DbConfig::SQLITE_DBCONFIG_ENABLE_TRIGGER as TRIGGERS;
    let fk: bool = conn
        .pragma_query_value(None, "foreign_keys", |r| r.get(0))
        .at(path)?;
    let triggers = conn.db_config(TRIGGERS).at(path)?;
    conn.pragma_update(None, "foreign_keys", false).at(path)?;
    conn.set_db_config(TRIGGERS, false).at(path)?;
    let out = f(conn);
    conn.set_db_config(TRIGGERS, triggers).at(path)?;
    conn.pragma_update(None, "foreign_keys", fk).at(path)?;
    out
}

/// At most this many conversations, or this many bytes of their rows, move in one round of the
/// protocol ([`retire_batch`]): each step is one transaction (one fsync) for the whole batch.
pub const BATCH_CONVERSATIONS: usize = 256;
/// See [`BATCH_CONVERSATIONS`].
pub const BATCH_BYTES: u64 = 16 << 20;

/// Retire conversation `id` into `cold`: the steps of docs/architecture.md, "Retire".
pub fn retire(store: &mut Store, cold: &mut Cold, id: &str, now: &str) -> Result<Outcome> {
    match plan(store, id)? {
        Some(moved) => retire_as_read(store, cold, &moved, now),
        None => Ok(Outcome::of(
            id,
            "skipped: not in the store (retired with its parent?)",
            None,
        )),
    }
}

/// [`retire`] of the rows `moved` as [`plan`] read them: skipped, with nothing written in
/// either file, when the conversation's rows are no longer exactly those.
pub fn retire_as_read(
    store: &mut Store,
    cold: &mut Cold,
    moved: &Moved,
    now: &str,
) -> Result<Outcome> {
    let mut out = retire_batch(store, cold, std::slice::from_ref(moved), now)?;
    Ok(out.remove(0))
}

/// What the store's transaction did with one conversation of a batch.
enum Step {
    /// Moved out; the audit row's id.
    Retired(i64),
    /// Its rows are no longer the ones read: nothing written.
    Changed,
    /// Its statements failed: rolled back to before it, nothing written.
    Failed(Error),
}

/// Crash (the tests' failpoint) at `stage` when it is armed for any conversation of `batch`.
fn crash_at(stage: &str, batch: &[Moved]) {
    for m in batch {
        failpoint::crash(stage, &m.ids[0]);
    }
}

/// Retire the conversations of `batch` (disjoint groups, as [`plan`] read them) into `cold`, in
/// five commits for the whole batch (docs/architecture.md, "Retire"): one outcome per
/// conversation, in order. A conversation changed since read is skipped and one whose
/// statements fail is failed; the others go on. An error is returned only when a step of the
/// whole batch failed: then nothing moved (recovery finishes the cleanup if it failed too).
pub fn retire_batch(
    store: &mut Store,
    cold: &mut Cold,
    batch: &[Moved],
    now: &str,
) -> Result<Vec<Outcome>> {
    if batch.is_empty() {
        return Ok(Vec::new());
    }
    let map = map_of(store)?;
    store.ensure_agent_tables()?;
    let (path, kind) = (store.path.clone(), store.kind.name());
    let tokens: Vec<String> = batch.iter().map(|m| new_token(&m.ids[0])).collect();
    intend(
        &mut store.conn,
        &path,
        kind,
        &cold.path,
        batch,
        &tokens,
        now,
    )?;
    crash_at("retire-intent", batch);
    if let Err(e) = cold.put(&tokens, kind, &path, batch, now) {
        forget(&mut store.conn, &path, &tokens)?;
        return Err(e);
    }
    crash_at("retire-cold", batch);
    let written = checks_off(&mut store.conn, &path, |conn| {
        move_out(conn, &path, &map, batch, &tokens, now)
    });
    let steps = match written {
        Ok(steps) => steps,
        Err(e) => {
            // The store's transaction rolled back: the cold copies go.
            let all: Vec<&str> = tokens.iter().map(String::as_str).collect();
            cold.finish(&[], &all)?;
            forget(&mut store.conn, &path, &tokens)?;
            return Err(e);
        }
    };
    crash_at("retire-hot", batch);
    let (mut retired, mut dropped) = (Vec::new(), Vec::new());
    for (t, step) in tokens.iter().zip(&steps) {
        match step {
            Step::Retired(_) => retired.push(t.as_str()),
            _ => dropped.push(t.as_str()),
        }
    }
    cold.finish(&retired, &dropped)?;
    crash_at("retire-mark", batch);
    settle_batch(&mut store.conn, &path, &retired, &dropped)?;
    Ok(batch
        .iter()
        .zip(steps)
        .map(|(moved, step)| {
            let id = moved.ids[0].as_str();
            match step {
                Step::Retired(audit) => {
                    let mut out = Outcome::of(id, "retired", Some(moved));
                    out.compaction_id = Some(audit);
                    out
                }
                Step::Changed => Outcome::of(
                    id,
                    "skipped: changed since read (the agent wrote to it); nothing moved",
                    Some(moved),
                ),
                Step::Failed(e) => Outcome::of(id, &format!("failed: {e}"), Some(moved)),
            }
        })
        .collect())
}

/// The store's first transaction of a batch: an intent row `moving` per conversation.
fn intend(
    conn: &mut Connection,
    path: &Path,
    kind: &str,
    cold: &Path,
    batch: &[Moved],
    tokens: &[String],
    now: &str,
) -> Result<()> {
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .at(path)?;
    let cold = cold.display().to_string();
    for (moved, token) in batch.iter().zip(tokens) {
        tx.execute(
            "INSERT INTO agent_db_retirements(token, conversation_id, store_kind, cold_path, state, settled, started_at)
             VALUES (?1, ?2, ?3, ?4, 'moving', 0, ?5)",
            params![token, moved.ids[0], kind, cold, now],
        )
        .at(path)?;
    }
    tx.commit().at(path)
}

/// The store's transaction of a batch: each conversation, in a savepoint of its own, re-read
/// and compared with what was read (skipped when it differs), deleted, its audit row written
/// and its intent row set `retired`. A skipped or failed one keeps its intent row `moving`
/// (settled after its cold copy is removed, or by recovery).
fn move_out(
    conn: &mut Connection,
    path: &Path,
    map: &RetireMap,
    batch: &[Moved],
    tokens: &[String],
    now: &str,
) -> Result<Vec<Step>> {
    let mut tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .at(path)?;
    let mut steps = Vec::with_capacity(batch.len());
    for (moved, token) in batch.iter().zip(tokens) {
        let sp = tx.savepoint().at(path)?;
        steps.push(match move_one(&sp, path, map, moved, token, now) {
            Ok(Some(audit)) => {
                sp.commit().at(path)?;
                Step::Retired(audit)
            }
            // Dropping the savepoint rolls back what it wrote.
            Ok(None) => Step::Changed,
            Err(e) => Step::Failed(e),
        });
    }
    tx.commit().at(path)?;
    Ok(steps)
}

/// One conversation of [`move_out`]: the audit row's id, or `None` (nothing written) when its
/// rows are no longer exactly `moved`.
fn move_one(
    conn: &Connection,
    path: &Path,
    map: &RetireMap,
    moved: &Moved,
    token: &str,
    now: &str,
) -> Result<Option<i64>> {
    let again = retire::read(conn, path, map, &moved.ids[0])?;
    if again.as_ref() != Some(moved) {
        return Ok(None);
    }
    drop(again);
    retire::delete(conn, path, map, moved)?;
    let (kind, cold_path): (String, String) = conn
        .query_row(
            "SELECT store_kind, cold_path FROM agent_db_retirements WHERE token = ?1",
            [token],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .at(path)?;
    let audit =
        archive::insert_audit(conn, &audit_entry(&kind, &cold_path, moved), now).at(path)?;
    archive::finish_audit(conn, audit, &[], None).at(path)?;
    let n = conn
        .execute(
            "UPDATE agent_db_retirements SET state = 'retired', retired_at = ?2, conversations = ?3,
               rows = ?4, bytes = ?5, digest = ?6, compaction_id = ?7 WHERE token = ?1 AND state = 'moving'",
            params![
                token,
                now,
                serde_json::to_string(&moved.ids).unwrap_or_default(),
                moved.rows() as i64,
                moved.bytes() as i64,
                moved.digest,
                audit
            ],
        )
        .at(path)?;
    if n != 1 {
        return Err(Error::conversation(
            &moved.ids[0],
            "its retirement's intent row is gone (another agent-db recovered it); nothing moved",
        ));
    }
    Ok(Some(audit))
}

/// The store's last transaction of a batch: the retired ones' rows settled, the dropped ones'
/// intent rows deleted. Committed with `synchronous = NORMAL`: in WAL mode this commit may then
/// be lost to a power cut (never torn, and only with every later commit), which leaves the rows
/// `retired` unsettled or `moving` with no cold copy, both states [`recover`] settles the same
/// way on the next run; the commits before it, which decide where a conversation is, keep the
/// connection's setting.
fn settle_batch(
    conn: &mut Connection,
    path: &Path,
    retired: &[&str],
    dropped: &[&str],
) -> Result<()> {
    let sync: i64 = conn
        .pragma_query_value(None, "synchronous", |r| r.get(0))
        .at(path)?;
    conn.pragma_update(None, "synchronous", sync.min(1))
        .at(path)?;
    let out = (|| {
        let tx = conn.transaction().at(path)?;
        for t in retired {
            settle(&tx, path, t)?;
        }
        for t in dropped {
            forget_one(&tx, path, t)?;
        }
        tx.commit().at(path)
    })();
    conn.pragma_update(None, "synchronous", sync).at(path)?;
    out
}

fn audit_entry(kind: &str, cold_path: &str, moved: &Moved) -> AuditEntry {
    AuditEntry::housekeeping(
        &moved.ids[0],
        kind,
        "retire".into(),
        STRATEGY,
        serde_json::json!({"retire": {
            "cold_path": cold_path, "conversations": moved.ids,
            "rows": moved.rows(), "bytes": moved.bytes(), "digest": moved.digest,
        }}),
    )
}

/// Drop intent row `token` (a retirement that did not happen).
fn forget_one(conn: &Connection, path: &Path, token: &str) -> Result<()> {
    conn.execute("DELETE FROM agent_db_retirements WHERE token = ?1", [token])
        .at(path)?;
    Ok(())
}

/// Drop the intent rows `tokens`, in one transaction.
fn forget(conn: &mut Connection, path: &Path, tokens: &[String]) -> Result<()> {
    let tx = conn.transaction().at(path)?;
    for t in tokens {
        forget_one(&tx, path, t)?;
    }
    tx.commit().at(path)
}

/// The cold file agrees with the store's row `token`.
fn settle(conn: &Connection, path: &Path, token: &str) -> Result<()> {
    conn.execute(
        "UPDATE agent_db_retirements SET settled = 1 WHERE token = ?1",
        [token],
    )
    .at(path)?;
    Ok(())
}

/// Whether agent-db's retirements table exists.
fn present(conn: &Connection, path: &Path) -> Result<bool> {
    super::schema_util::has_table(conn, "agent_db_retirements").at(path)
}

/// The retired conversation `input` names (its ID or a unique prefix), if any.
pub fn retired(store: &Store, input: &str) -> Result<Option<Retirement>> {
    let (conn, path) = (&store.conn, store.path.as_path());
    if !present(conn, path)? {
        return Ok(None);
    }
    let mut st = conn
        .prepare(
            "SELECT token, conversation_id, cold_path, digest, compaction_id FROM agent_db_retirements
             WHERE state = 'retired' AND substr(conversation_id, 1, length(?1)) = ?1 ORDER BY rowid",
        )
        .at(path)?;
    let found = st
        .query_map([input], |r| {
            Ok(Retirement {
                token: r.get(0)?,
                conversation_id: r.get(1)?,
                cold_path: PathBuf::from(r.get::<_, String>(2)?),
                digest: r.get::<_, Option<String>>(3)?.unwrap_or_default(),
                compaction_id: r.get(4)?,
            })
        })
        .at(path)?
        .collect::<std::result::Result<Vec<_>, _>>()
        .at(path)?;
    if let Some(exact) = found.iter().find(|r| r.conversation_id == input) {
        return Ok(Some(exact.clone()));
    }
    match found.as_slice() {
        [] => with_parent(conn, path, input),
        [one] => Ok(Some(one.clone())),
        _ => Err(Error::Usage(format!(
            "{input}: the prefix names {} retired conversations; give more of the ID",
            found.len()
        ))),
    }
}

/// A child conversation retired with its parent is brought back with it: the error naming the
/// parent, or `None` when `id` is no such child.
fn with_parent(conn: &Connection, path: &Path, id: &str) -> Result<Option<Retirement>> {
    let parent: Option<String> = conn
        .query_row(
            "SELECT conversation_id FROM agent_db_retirements WHERE state = 'retired'
             AND EXISTS (SELECT 1 FROM json_each(conversations) WHERE value = ?1)",
            [id],
            |r| r.get(0),
        )
        .optional()
        .at(path)?;
    match parent {
        Some(p) => Err(Error::NotFound(format!(
            "conversation {id} was retired with its parent {p}: `agent-db restore {p}` brings both back"
        ))),
        None => Ok(None),
    }
}

/// The retirement recorded by audit row `compaction_id`, if it is one and still retired.
pub fn by_audit_row(store: &Store, compaction_id: i64) -> Result<Option<Retirement>> {
    let (conn, path) = (&store.conn, store.path.as_path());
    if !present(conn, path)? {
        return Ok(None);
    }
    let id: Option<String> = conn
        .query_row(
            "SELECT conversation_id FROM agent_db_retirements WHERE compaction_id = ?1 AND state = 'retired'",
            [compaction_id],
            |r| r.get(0),
        )
        .optional()
        .at(path)?;
    match id {
        Some(id) => retired(store, &id),
        None => Ok(None),
    }
}

/// Bring retired conversation `r` back from its cold file: one transaction in the store puts
/// every row back (checked against the digest) and marks the retirement `restored`; then the
/// cold copy is removed. Refused (nothing written) when the conversation is in the store again.
pub fn restore(store: &mut Store, r: &Retirement, now: &str) -> Result<Outcome> {
    let map = map_of(store)?;
    let path = store.path.clone();
    let id = r.conversation_id.as_str();
    let mut cold = Cold::open(&r.cold_path, false)?.ok_or_else(|| {
        Error::conversation(
            id,
            format!(
                "its cold file {} is not there; nothing restored",
                r.cold_path.display()
            ),
        )
    })?;
    match cold.entry(&r.token)? {
        Some(e) if e.state == "retired" && e.digest == r.digest => {}
        _ => {
            return Err(Error::conversation(
                id,
                format!(
                    "the cold file {} has no settled copy of it (run any agent-db command to recover, then retry)",
                    r.cold_path.display()
                ),
            ))
        }
    }
    let tables = cold.tables(&r.token)?;
    if retire::digest(&tables) != r.digest {
        return Err(Error::conversation(
            id,
            format!(
                "its copy in {} does not match its digest (damaged); nothing restored",
                r.cold_path.display()
            ),
        ));
    }
    let moved = checks_off(&mut store.conn, &path, |conn| {
        move_in(conn, &path, &map, r, &tables, now)
    })?;
    failpoint::crash("restore-hot", id);
    cold.remove(&r.token)?;
    failpoint::crash("restore-cold", id);
    settle(&store.conn, &path, &r.token)?;
    let mut out = Outcome::of(id, "restored", Some(&moved));
    out.compaction_id = r.compaction_id;
    Ok(out)
}

/// The store's transaction of a restore from the cold file.
fn move_in(
    conn: &mut Connection,
    path: &Path,
    map: &RetireMap,
    r: &Retirement,
    tables: &[retire::TableRows],
    now: &str,
) -> Result<Moved> {
    let id = r.conversation_id.as_str();
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .at(path)?;
    if retire::read(&tx, path, map, id)?.is_some() {
        return Err(Error::Refused(format!(
            "conversation {id} is in the store again; nothing restored from {}",
            r.cold_path.display()
        )));
    }
    retire::insert(&tx, path, id, tables)?;
    let back = retire::read(&tx, path, map, id)?
        .ok_or_else(|| Error::conversation(id, "its conversation row did not come back"))?;
    let same_columns = back.tables.len() == tables.len()
        && back
            .tables
            .iter()
            .zip(tables)
            .all(|(a, b)| a.columns == b.columns);
    if same_columns && back.digest != r.digest {
        return Err(Error::conversation(
            id,
            "the rows put back differ from the ones retired; nothing restored",
        ));
    }
    let n = tx
        .execute(
            "UPDATE agent_db_retirements SET state = 'restored', restored_at = ?2, settled = 0
             WHERE token = ?1 AND state = 'retired'",
            params![r.token, now],
        )
        .at(path)?;
    if n != 1 {
        return Err(Error::conversation(
            id,
            "its retirement is no longer recorded as retired",
        ));
    }
    if let Some(a) = r.compaction_id {
        tx.execute(
            "UPDATE agent_db_compactions SET restored_at = ?2 WHERE id = ?1",
            params![a, now],
        )
        .at(path)?;
    }
    tx.commit().at(path)?;
    Ok(back)
}

/// Whether a retirement or restore was interrupted (read-only).
pub fn needs_recovery(store: &Store) -> Result<bool> {
    let (conn, path) = (&store.conn, store.path.as_path());
    if !present(conn, path)? {
        return Ok(false);
    }
    conn.query_row(
        "SELECT EXISTS (SELECT 1 FROM agent_db_retirements WHERE settled = 0)",
        [],
        |r| r.get(0),
    )
    .at(path)
}

/// Finish or undo every interrupted retirement and restore (the caller holds the store's
/// lock): a retirement the store never committed loses its cold copy (the conversation is in
/// the store); a committed one is marked `retired` in the cold file; a restored one's cold copy
/// is removed. What was done, one line each, and what could not be (a missing cold file).
pub fn recover(store: &Store) -> Result<Vec<String>> {
    let (conn, path) = (&store.conn, store.path.as_path());
    if !present(conn, path)? {
        return Ok(Vec::new());
    }
    let mut st = conn
        .prepare(
            "SELECT token, conversation_id, cold_path, state FROM agent_db_retirements
             WHERE settled = 0 ORDER BY rowid",
        )
        .at(path)?;
    let open: Vec<(String, String, String, String)> = st
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))
        .at(path)?
        .collect::<std::result::Result<_, _>>()
        .at(path)?;
    let mut notes = Vec::new();
    for (token, id, cold_path, state) in open {
        let cold = Cold::open(Path::new(&cold_path), false)?;
        let entry = match &cold {
            Some(c) => c.entry(&token)?,
            None => None,
        };
        match (state.as_str(), cold, entry) {
            ("moving", cold, entry) => {
                if let (Some(mut c), Some(_)) = (cold, entry) {
                    c.remove(&token)?;
                }
                forget_one(conn, path, &token)?;
                notes.push(format!(
                    "conversation {id}: an interrupted retire left it in the store"
                ));
            }
            ("retired", Some(c), Some(e)) => {
                if e.state != "retired" {
                    c.mark(&token, "retired")?;
                    notes.push(format!("conversation {id}: an interrupted retire finished"));
                }
                settle(conn, path, &token)?;
            }
            ("restored", cold, entry) => {
                if let (Some(mut c), Some(_)) = (cold, entry) {
                    c.remove(&token)?;
                    notes.push(format!(
                        "conversation {id}: an interrupted restore finished"
                    ));
                }
                settle(conn, path, &token)?;
            }
            _ => notes.push(format!(
                "conversation {id}: retired, but {cold_path} has no copy of it (moved or deleted?)"
            )),
        }
    }
    Ok(notes)
}

/// The size of the cold files the store's retirements name, in bytes.
pub fn cold_bytes(store: &Store) -> Result<u64> {
    let (conn, path) = (&store.conn, store.path.as_path());
    if !present(conn, path)? {
        return Ok(0);
    }
    let mut st = conn
        .prepare("SELECT DISTINCT cold_path FROM agent_db_retirements")
        .at(path)?;
    let paths = st
        .query_map([], |r| r.get::<_, String>(0))
        .at(path)?
        .collect::<std::result::Result<Vec<_>, _>>()
        .at(path)?;
    Ok(paths.iter().map(|p| Cold::size(Path::new(p))).sum())
}

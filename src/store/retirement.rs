//! The two-file protocol of `retire` and of `restore` from a cold file, and its recovery
//! (docs/architecture.md, "Retire"). A retirement is a row of the store's
//! `agent_db_retirements` (`retired` → `restored`; `settled` once the cold file agrees) and a
//! row of the cold file's `agent_db_cold` (`moving` → `retired`, removed after a restore); a
//! run of `retire` has a store row of its own, `moving`, naming its cold file until it ends. A SQLite transaction spans one file only, so each step commits in one file and
//! [`recover`] finishes or undoes whatever a crash interrupted: a conversation is always whole
//! in the store, in the cold file, or (until recovery) in both, never in neither.

use std::path::{Path, PathBuf};

use rusqlite::{params, Connection, OptionalExtension, TransactionBehavior};
use serde::Serialize;

use super::cold::{self, Cold};
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
/// back exactly as stored; nothing outside them changes) and savepoints journaled in memory
/// (`temp_store`: one conversation's pages, not a temporary file), then put all back.
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
    let temp: i64 = conn
        .pragma_query_value(None, "temp_store", |r| r.get(0))
        .at(path)?;
    conn.pragma_update(None, "foreign_keys", false).at(path)?;
    conn.set_db_config(TRIGGERS, false).at(path)?;
    conn.pragma_update(None, "temp_store", 2).at(path)?;
    let out = f(conn);
    conn.pragma_update(None, "temp_store", temp).at(path)?;
    conn.set_db_config(TRIGGERS, triggers).at(path)?;
    conn.pragma_update(None, "foreign_keys", fk).at(path)?;
    out
}

/// At most this many conversations, or this many bytes of their rows, move in one round of the
/// protocol (a batch): each step is one transaction (one fsync) for the whole batch, and the
/// store is held for the batch's length. The rows stream into the cold file: memory holds one
/// conversation, whatever the batch.
pub const BATCH_CONVERSATIONS: usize = 1024;
/// See [`BATCH_CONVERSATIONS`].
pub const BATCH_BYTES: u64 = 64 << 20;

/// The status of a conversation left alone because another process held the store.
pub const NOT_STARTED: &str = "not started: the store is busy";

/// Retire conversation `id` into `cold` ([`retire_all`] of one).
pub fn retire(store: &mut Store, cold: &mut Cold, id: &str, now: &str) -> Result<Outcome> {
    let (mut out, busy) = retire_all(store, cold, &[id.to_string()], now)?;
    if busy {
        return Err(Error::Busy {
            path: store.path.clone(),
            holder: None,
        });
    }
    Ok(out.remove(0))
}

/// Retire `ids` into `cold` in batches (docs/architecture.md, "Retire"): one outcome per ID, in
/// order, and whether another process held the store (the rest are then [`NOT_STARTED`]). A
/// conversation whose statements fail is failed and the others go on; one already moved with
/// its parent is skipped. An error only when the run could not start (nothing moved).
pub fn retire_all(
    store: &mut Store,
    cold: &mut Cold,
    ids: &[String],
    now: &str,
) -> Result<(Vec<Outcome>, bool)> {
    let map = map_of(store)?;
    store.ensure_agent_tables()?;
    // Each table's read and delete, the group's lookups and the rows written, kept prepared.
    store.conn.set_prepared_statement_cache_capacity(128);
    let (path, kind) = (store.path.clone(), store.kind.name());
    let mut out = Vec::with_capacity(ids.len());
    let run = new_token(ids.first().map_or("", String::as_str));
    match begin_run(&mut store.conn, &path, kind, &cold.path, &run, now) {
        Ok(()) => {}
        Err(Error::Busy { .. }) => {
            out.extend(ids.iter().map(|id| Outcome::of(id, NOT_STARTED, None)));
            return Ok((out, true));
        }
        Err(e) => return Err(e),
    }
    let mut pending = Pending::default();
    let mut busy = false;
    while out.len() < ids.len() {
        let rest = &ids[out.len()..];
        let (done, stop) = checks_off(&mut store.conn, &path, |conn| {
            Ok(batch(
                conn,
                &path,
                kind,
                &map,
                cold,
                rest,
                &mut pending,
                now,
            ))
        })
        .unwrap_or_else(|e| (Vec::new(), Some(e)));
        out.extend(done);
        match stop {
            None => {}
            Some(Error::Busy { .. }) => {
                busy = true;
                let rest = &ids[out.len()..];
                out.extend(rest.iter().map(|id| Outcome::of(id, NOT_STARTED, None)));
            }
            Some(e) => {
                let rest = &ids[out.len()..];
                out.extend(
                    rest.iter()
                        .map(|id| Outcome::of(id, &format!("failed: {e}"), None)),
                );
            }
        }
    }
    // The last batch's copies marked, its retirements settled, the run ended; what a failure
    // here leaves, recovery does on the next run.
    let (marks, drops) = pending.cold();
    if cold.finish(&marks, &drops).is_ok() {
        pending.marked();
    }
    let _ = end_run(&mut store.conn, &path, &run, &pending.settling);
    Ok((out, busy))
}

/// What the files do not say yet of the batches before: copies to mark `retired` (token and
/// conversation) or to remove in the cold file's next commit, retirements to settle in the
/// store's next commit once the cold file said so.
#[derive(Default)]
struct Pending {
    retired: Vec<(String, String)>,
    dropped: Vec<String>,
    settling: Vec<String>,
}

impl Pending {
    /// The tokens to mark and to remove in the cold file.
    fn cold(&self) -> (Vec<&str>, Vec<&str>) {
        (
            self.retired.iter().map(|(t, _)| t.as_str()).collect(),
            self.dropped.iter().map(String::as_str).collect(),
        )
    }

    /// The cold file committed the marks: their retirements are to settle.
    fn marked(&mut self) {
        for (token, id) in self.retired.drain(..) {
            failpoint::crash("retire-mark", &id);
            self.settling.push(token);
        }
        self.dropped.clear();
    }
}

/// The store's first commit of a run: a row `moving` naming the cold file (no conversation),
/// so that recovery looks there for copies a crash left `moving`.
fn begin_run(
    conn: &mut Connection,
    path: &Path,
    kind: &str,
    cold: &Path,
    run: &str,
    now: &str,
) -> Result<()> {
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .at(path)?;
    tx.execute(
        "INSERT INTO agent_db_retirements(token, conversation_id, store_kind, cold_path, state, settled, started_at)
         VALUES (?1, '', ?2, ?3, 'moving', 0, ?4)",
        params![run, kind, cold.display().to_string(), now],
    )
    .at(path)?;
    tx.commit().at(path)
}

/// The store's last commit of a run: the last batch's retirements settled and the run's row
/// dropped. Committed with `synchronous = NORMAL`: in WAL mode a power cut may lose it (never
/// torn), which leaves states [`recover`] settles the same way on the next run.
fn end_run(conn: &mut Connection, path: &Path, run: &str, settling: &[String]) -> Result<()> {
    let sync: i64 = conn
        .pragma_query_value(None, "synchronous", |r| r.get(0))
        .at(path)?;
    conn.pragma_update(None, "synchronous", sync.min(1))
        .at(path)?;
    let out = (|| {
        let tx = conn.transaction().at(path)?;
        for t in settling {
            settle(&tx, path, t)?;
        }
        forget_one(&tx, path, run)?;
        tx.commit().at(path)
    })();
    conn.pragma_update(None, "synchronous", sync).at(path)?;
    out
}

/// One conversation of a batch once its rows went to the cold file's transaction.
struct Taken {
    /// Its place among the batch's outcomes.
    at: usize,
    token: String,
    ids: Vec<String>,
    rows: u64,
    bytes: u64,
    digest: String,
    /// What the store's transaction did with it: its audit row, or why it was rolled back to
    /// before it.
    step: Result<i64>,
}

impl Taken {
    fn outcome(&self, status: &str) -> Outcome {
        Outcome {
            conversation: self.ids[0].clone(),
            status: status.to_string(),
            conversations: self.ids.clone(),
            rows: self.rows,
            bytes: self.bytes,
            compaction_id: None,
        }
    }
}

/// One batch, from the front of `ids`, in three commits (docs/architecture.md, "Retire"): the
/// store's write transaction is opened first and holds the store until its commit, so the rows
/// are read once and nobody writes them before they are deleted. Each conversation read goes
/// to [`Cold::packing`]'s compressors and writer, into the cold file's transaction, while this
/// thread deletes it in the store's (uncommitted until the cold file committed) and reads the
/// next.
/// The outcomes of the IDs it took, and the error that stops the run, if any (then it took
/// none of the rest).
#[allow(clippy::too_many_arguments)]
fn batch(
    conn: &mut Connection,
    path: &Path,
    kind: &str,
    map: &RetireMap,
    cold: &mut Cold,
    ids: &[String],
    pending: &mut Pending,
    now: &str,
) -> (Vec<Outcome>, Option<Error>) {
    let mut tx = match conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .at(path)
    {
        Ok(tx) => tx,
        Err(e) => return (Vec::new(), Some(e)),
    };
    let plans = match retire::plans(&tx, path, map) {
        Ok(p) => p,
        Err(e) => return (Vec::new(), Some(e)),
    };
    // The batch before is settled in this commit: the cold file's commit marks it first.
    let settles = pending
        .settling
        .iter()
        .chain(pending.retired.iter().map(|(t, _)| t));
    for t in settles {
        if let Err(e) = settle(&tx, path, t) {
            return (Vec::new(), Some(e));
        }
    }
    let cold_path = cold.path.display().to_string();
    let marks = pending.cold();
    let marks = (marks.0.as_slice(), marks.1.as_slice());
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get().min(8));
    let ((mut outs, taken), put) = cold.packing((kind, path, now), marks, threads, |packing| {
        let store = (&mut tx, path, plans.as_slice());
        let read = read_batch(store, map, ids, packing, (kind, &cold_path), now);
        crash_at("retire-read", &read.1);
        read
    });
    if let Err(e) = put {
        // The cold transaction rolled back; so does the store's.
        for t in &taken {
            outs[t.at] = Some(t.outcome(&format!("failed: {e}")));
        }
        return (outs.into_iter().flatten().collect(), None);
    }
    crash_at("retire-cold", &taken);
    pending.marked();
    if let Err(e) = tx.commit().at(path) {
        // The store's transaction rolled back: the cold copies go.
        let all: Vec<&str> = taken.iter().map(|t| t.token.as_str()).collect();
        let stop = cold.finish(&[], &all).err();
        for t in &taken {
            outs[t.at] = Some(t.outcome(&format!("failed: {e}")));
        }
        return (outs.into_iter().flatten().collect(), stop);
    }
    pending.settling.clear();
    crash_at("retire-hot", &taken);
    (outcomes(&taken, outs, pending), None)
}

/// After the store's commit: each conversation's outcome; the copies of the retired ones are
/// to mark `retired`, the failed ones' to remove, in the cold file's next commit.
fn outcomes(
    taken: &[Taken],
    mut outs: Vec<Option<Outcome>>,
    pending: &mut Pending,
) -> Vec<Outcome> {
    for t in taken {
        outs[t.at] = Some(match &t.step {
            Ok(audit) => {
                pending.retired.push((t.token.clone(), t.ids[0].clone()));
                let mut o = t.outcome("retired");
                o.compaction_id = Some(*audit);
                o
            }
            Err(e) => {
                pending.dropped.push(t.token.clone());
                t.outcome(&format!("failed: {e}"))
            }
        });
    }
    outs.into_iter().flatten().collect()
}

/// Crash (the tests' failpoint) at `stage` when it is armed for any conversation of `batch`.
fn crash_at(stage: &str, batch: &[Taken]) {
    for t in batch {
        failpoint::crash(stage, &t.ids[0]);
    }
}

/// The conversations of one batch, from the front of `ids` until the batch is full, one moves
/// with a conversation already in it, or the cold file's writer stopped: each read in the
/// store's transaction, sent to `cold`, then deleted there with its audit and retirement rows
/// in a savepoint of its own (a failure rolls back to before it). An outcome slot per ID taken
/// (filled for the ones skipped or failed), and the ones sent.
fn read_batch(
    (tx, path, plans): (&mut rusqlite::Transaction<'_>, &Path, &[retire::Plan]),
    map: &RetireMap,
    ids: &[String],
    cold: &cold::Packing,
    (kind, cold_path): (&str, &str),
    now: &str,
) -> (Vec<Option<Outcome>>, Vec<Taken>) {
    let (mut outs, mut taken) = (Vec::new(), Vec::<Taken>::new());
    let mut seen: std::collections::HashSet<String> = std::collections::HashSet::new();
    let mut bytes = 0u64;
    for id in ids {
        if taken.len() >= BATCH_CONVERSATIONS || bytes >= BATCH_BYTES {
            break;
        }
        match retire::read_planned(tx, path, map, plans, id) {
            // It moves with a conversation of the batch (or one of those with it): the batch
            // goes first, then it is read again.
            Ok(Some(m)) if m.ids.iter().any(|c| seen.contains(c)) => break,
            Ok(Some(m)) => {
                let mut t = Taken {
                    at: outs.len(),
                    token: new_token(&m.ids[0]),
                    ids: m.ids.clone(),
                    rows: m.rows(),
                    bytes: m.bytes(),
                    digest: m.digest.clone(),
                    step: Ok(0),
                };
                if !cold.send(t.token.clone(), m) {
                    // The writer failed: its error fails the batch.
                    break;
                }
                t.step = tx.savepoint().at(path).and_then(|sp| {
                    // Dropping the savepoint on an error rolls back what it wrote.
                    let audit = move_one(&sp, path, plans, (kind, cold_path), &t, now)?;
                    sp.commit().at(path)?;
                    Ok(audit)
                });
                bytes += t.bytes;
                seen.extend(t.ids.iter().cloned());
                outs.push(None);
                taken.push(t);
            }
            Ok(None) => outs.push(Some(Outcome::of(
                id,
                "skipped: not in the store (retired with its parent?)",
                None,
            ))),
            Err(e) => outs.push(Some(Outcome::of(id, &format!("failed: {e}"), None))),
        }
    }
    (outs, taken)
}

/// One conversation of a batch, in the store's transaction: its rows deleted, its audit row
/// and its retirement (`retired`, unsettled) written; the audit row's id.
fn move_one(
    conn: &Connection,
    path: &Path,
    plans: &[retire::Plan],
    (kind, cold_path): (&str, &str),
    t: &Taken,
    now: &str,
) -> Result<i64> {
    retire::delete_planned(conn, path, plans, &t.ids)?;
    let audit = archive::insert_audit(conn, &audit_entry(kind, cold_path, t), now).at(path)?;
    archive::finish_audit(conn, audit, &[], None).at(path)?;
    conn.prepare_cached(
        "INSERT INTO agent_db_retirements(token, conversation_id, store_kind, cold_path, state, settled,
           started_at, retired_at, conversations, rows, bytes, digest, compaction_id)
         VALUES (?1, ?2, ?3, ?4, 'retired', 0, ?5, ?5, ?6, ?7, ?8, ?9, ?10)",
    )
    .and_then(|mut st| {
        st.execute(params![
            t.token,
            t.ids[0],
            kind,
            cold_path,
            now,
            serde_json::to_string(&t.ids).unwrap_or_default(),
            t.rows as i64,
            t.bytes as i64,
            t.digest,
            audit
        ])
    })
    .at(path)?;
    Ok(audit)
}

fn audit_entry(kind: &str, cold_path: &str, t: &Taken) -> AuditEntry {
    AuditEntry::housekeeping(
        &t.ids[0],
        kind,
        "retire".into(),
        STRATEGY,
        serde_json::json!({"retire": {
            "cold_path": cold_path, "conversations": t.ids,
            "rows": t.rows, "bytes": t.bytes, "digest": t.digest,
        }}),
    )
}

/// Drop row `token` (a run's, or a retirement that did not happen).
fn forget_one(conn: &Connection, path: &Path, token: &str) -> Result<()> {
    conn.execute("DELETE FROM agent_db_retirements WHERE token = ?1", [token])
        .at(path)?;
    Ok(())
}

/// The cold file agrees with the store's row `token`.
fn settle(conn: &Connection, path: &Path, token: &str) -> Result<()> {
    conn.prepare_cached("UPDATE agent_db_retirements SET settled = 1 WHERE token = ?1")
        .and_then(|mut st| st.execute([token]))
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
    retire::insert(&tx, id, tables)?;
    let back = retire::read(&tx, path, map, id)?
        .ok_or_else(|| Error::conversation(id, "its conversation row did not come back"))?;
    // Compared as sets of rows: the order a lookup gives them is not part of the data.
    let same_columns = back.tables.len() == tables.len()
        && back
            .tables
            .iter()
            .zip(tables)
            .all(|(a, b)| a.columns == b.columns);
    if same_columns && !retire::same_rows(&back.tables, tables) {
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

/// Whether the store's transaction committed retirement `token` (a cold copy to keep).
fn kept(conn: &Connection, path: &Path, token: &str) -> Result<bool> {
    conn.query_row(
        "SELECT EXISTS (SELECT 1 FROM agent_db_retirements WHERE token = ?1 AND state <> 'moving')",
        [token],
        |r| r.get(0),
    )
    .at(path)
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
            ("moving", cold, _) => {
                if let Some(mut c) = cold {
                    for e in c.moving(&path.display().to_string())? {
                        if !e.token.is_empty() && !kept(conn, path, &e.token)? {
                            c.remove(&e.token)?;
                            notes.push(format!(
                                "conversation {}: an interrupted retire left it in the store",
                                e.conversation_id
                            ));
                        }
                    }
                }
                forget_one(conn, path, &token)?;
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

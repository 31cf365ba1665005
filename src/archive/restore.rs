//! Undoing compactions from the archive, reading the audit log, and pruning old archives.
//! Store-agnostic: the archive names its own tables, keys and columns.

use std::collections::HashMap;

use rusqlite::{params, OptionalExtension, TransactionBehavior};
use serde::Serialize;

use crate::error::{Error, Result, SqlContext};
use crate::store::{pre_image as archive, Store};

/// One audit-log row.
#[derive(Debug, Clone, Serialize)]
pub struct Compaction {
    pub id: i64,
    pub conversation_id: String,
    pub store_kind: String,
    pub compacted_at: String,
    pub reason: String,
    pub strategy: String,
    pub model: Option<String>,
    pub messages_before: i64,
    pub messages_after: i64,
    pub tokens_before: i64,
    pub tokens_after: i64,
    pub summary_sha256: String,
    pub agent_db_version: String,
    pub details: serde_json::Value,
    pub restored_at: Option<String>,
    pub archive_pruned_at: Option<String>,
    /// The retention score recorded with the compaction; `None` (unknown) for rows written
    /// before agent-db scored compactions.
    pub retention: Option<crate::retention::Retention>,
}

const COLUMNS: &str = "id, conversation_id, store_kind, compacted_at, reason, strategy, model, messages_before,
  messages_after, tokens_before, tokens_after, summary_sha256, agent_db_version, details, restored_at, archive_pruned_at";

fn from_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<Compaction> {
    Ok(Compaction {
        id: r.get(0)?,
        conversation_id: r.get(1)?,
        store_kind: r.get(2)?,
        compacted_at: r.get(3)?,
        reason: r.get(4)?,
        strategy: r.get(5)?,
        model: r.get(6)?,
        messages_before: r.get(7)?,
        messages_after: r.get(8)?,
        tokens_before: r.get(9)?,
        tokens_after: r.get(10)?,
        summary_sha256: r.get(11)?,
        agent_db_version: r.get(12)?,
        details: serde_json::from_str(&r.get::<_, String>(13)?).unwrap_or_default(),
        restored_at: r.get(14)?,
        archive_pruned_at: r.get(15)?,
        // Only the history query selects it (a store not yet migrated has no such column).
        retention: r
            .get::<_, Option<String>>(16)
            .ok()
            .flatten()
            .and_then(|s| serde_json::from_str(&s).ok()),
    })
}

/// The audit log, oldest first; one conversation's when `conversation` is given.
pub fn history(store: &Store, conversation: Option<&str>) -> Result<Vec<Compaction>> {
    let (conn, path) = (&store.conn, store.path.as_path());
    if !crate::store::agent_tables::present(conn).at(path)? {
        return Ok(Vec::new());
    }
    // Tables an older agent-db made (read without migrating) have no retention column.
    let scored = conn
        .prepare("SELECT retention FROM agent_db_compactions LIMIT 0")
        .is_ok();
    let retention = if scored { "retention" } else { "NULL" };
    let sql = format!(
        "SELECT {COLUMNS}, {retention} FROM agent_db_compactions WHERE (?1 IS NULL OR conversation_id = ?1) ORDER BY id"
    );
    let mut stmt = conn.prepare(&sql).at(path)?;
    let rows = stmt.query_map([conversation], from_row).at(path)?;
    rows.collect::<std::result::Result<_, _>>().at(path)
}

/// Whether restoring compaction `id` needs `--force`: the archived cells no longer hold what
/// it wrote (a later compaction or the agent changed them), or the agent added to that
/// conversation since; the check `restore` makes.
pub fn needs_force(store: &Store, id: i64) -> Result<bool> {
    let (conn, path) = (&store.conn, store.path.as_path());
    let archived = archive::load(conn, id).at(path)?;
    if archived.is_empty() {
        return Ok(false);
    }
    let post: Option<String> = conn
        .query_row(
            "SELECT post_image_sha256 FROM agent_db_compactions WHERE id = ?1",
            [id],
            |r| r.get(0),
        )
        .at(path)?;
    let Some(post) = post else {
        return Ok(false);
    };
    let conversation: String = conn
        .query_row(
            "SELECT conversation_id FROM agent_db_compactions WHERE id = ?1",
            [id],
            |r| r.get(0),
        )
        .at(path)?;
    let at = StoreRef {
        path,
        kind: store.kind,
        limits: &store.limits,
    };
    Ok(changed_after(&at, conn, id, &conversation, &archived, &post)?.0)
}

/// Whether the conversation changed after compaction `id`, judged by that conversation alone:
/// its archived cells against the post-image hash (a shared `sqlite_sequence` row counted as
/// the value the compaction left, [`archive::sequence_after`]), and the store's own check of
/// rows the agent added to it ([`crate::store::kind::Adapter::changed_after`]). Also returns the
/// expected `sqlite_sequence` values, for [`archive::restorable`].
fn changed_after(
    store: &StoreRef<'_>,
    conn: &rusqlite::Connection,
    id: i64,
    conversation: &str,
    archived: &[archive::Archived],
    post: &str,
) -> Result<(bool, HashMap<usize, archive::CellValue>)> {
    let path = store.path;
    let expected = archive::sequence_after(conn, id, archived).at(path)?;
    let cells: Vec<_> = archived.iter().map(|a| a.cell.clone()).collect();
    let mut changed = archive::image_hash_expecting(conn, &cells, &expected).at(path)? != post
        || archive::frames_present(conn, id, archived).at(path)?;
    if !changed {
        let read = crate::store::conversation::Read {
            conn,
            path,
            limits: store.limits,
        };
        changed = store
            .kind
            .adapter()
            .changed_after(&read, conversation, id)?;
    }
    Ok((changed, expected))
}

/// What [`changed_after`] needs of the store while its connection is in a transaction.
struct StoreRef<'a> {
    path: &'a std::path::Path,
    kind: crate::store::StoreKind,
    limits: &'a crate::models::ContextLimits,
}

/// One audit row.
pub fn get(store: &Store, id: i64) -> Result<Option<Compaction>> {
    let (conn, path) = (&store.conn, store.path.as_path());
    if !crate::store::agent_tables::present(conn).at(path)? {
        return Ok(None);
    }
    conn.query_row(
        &format!("SELECT {COLUMNS} FROM agent_db_compactions WHERE id = ?1"),
        [id],
        from_row,
    )
    .optional()
    .at(path)
}

/// The result of restoring one compaction.
#[derive(Debug, Clone, Serialize)]
pub struct Restored {
    pub compaction_id: i64,
    pub conversation_id: String,
    /// `restored`, or `refused: reason`.
    pub status: String,
    pub ok: bool,
}

/// How long before `now` (RFC 3339) the stored time `at` was, as every table says it
/// (`12s ago`); the stored text when either cannot be read.
fn ago(now: &str, at: &str) -> String {
    match (crate::gotime::parse(now), crate::gotime::parse(at)) {
        (Ok(n), Ok(t)) => match (n - t).to_std() {
            Ok(d) => format!("{} ago", crate::util::short_duration(d)),
            Err(_) => "just now".to_string(),
        },
        _ => at.to_string(),
    }
}

/// What restoring a compaction would do, decided on `conn` (inside the restore's transaction,
/// or on its own for `--dry-run`).
enum Check {
    /// Nothing to do or refused: the result to report as it is.
    Done(Restored),
    /// It can be restored: its archived cells, whether the conversation changed since, and the
    /// `sqlite_sequence` values the compaction left ([`changed_after`]).
    Go {
        c: Box<Compaction>,
        archived: Vec<archive::Archived>,
        changed: bool,
        expected: HashMap<usize, archive::CellValue>,
    },
}

fn check(
    conn: &rusqlite::Connection,
    at: &StoreRef<'_>,
    id: i64,
    force: bool,
    now: &str,
) -> Result<Check> {
    let path = at.path;
    let c = conn
        .query_row(
            &format!("SELECT {COLUMNS} FROM agent_db_compactions WHERE id = ?1"),
            [id],
            from_row,
        )
        .optional()
        .at(path)?
        .ok_or_else(|| Error::NotFound(format!("compaction {id}: not found in the audit log")))?;
    let done = |status: String, ok: bool| {
        Ok(Check::Done(Restored {
            compaction_id: id,
            conversation_id: c.conversation_id.clone(),
            status,
            ok,
        }))
    };
    let refuse = |why: String| done(format!("refused: {why}"), false);
    if let Some(at) = &c.restored_at {
        // Undone already: nothing to do, which is not a failure (exit 0, as `--all-since`
        // with nothing to restore).
        return done(
            format!("nothing to do: already restored {}", ago(now, at)),
            true,
        );
    }
    if c.strategy == crate::store::retirement::STRATEGY {
        // Its rows are in the cold file, not in the archive.
        return refuse(format!(
            "a retirement: `agent-db restore {}` brings the conversation back from the cold file",
            c.conversation_id
        ));
    }
    if let Some(at) = &c.archive_pruned_at {
        return refuse(format!(
            "its archive was pruned {}; it can no longer be restored",
            ago(now, at)
        ));
    }
    let archived = archive::load(conn, id).at(path)?;
    if archived.is_empty() {
        return refuse("no archived pre-image".into());
    }
    let post: String = conn
        .query_row(
            "SELECT post_image_sha256 FROM agent_db_compactions WHERE id = ?1",
            [id],
            |r| r.get(0),
        )
        .at(path)?;
    let (changed, expected) = changed_after(at, conn, id, &c.conversation_id, &archived, &post)?;
    if !force && changed {
        return refuse(format!(
            "conversation {} changed after this compaction (a later compaction or the agent wrote to it); \
             restore later compactions first, or pass --force to overwrite the later changes",
            c.conversation_id
        ));
    }
    Ok(Check::Go {
        c: Box::new(c),
        archived,
        changed,
        expected,
    })
}

/// What [`restore`] would do to compaction `id`, writing nothing (`restore --dry-run`): the
/// same result, with `would restore` for one it would restore.
pub fn preview(store: &Store, id: i64, force: bool, now: &str) -> Result<Restored> {
    let at = StoreRef {
        path: &store.path,
        kind: store.kind,
        limits: &store.limits,
    };
    Ok(match check(&store.conn, &at, id, force, now)? {
        Check::Done(r) => r,
        Check::Go { c, changed, .. } => Restored {
            compaction_id: id,
            conversation_id: c.conversation_id,
            status: if changed {
                "would restore (with --force: the later changes would be lost)".into()
            } else {
                "would restore".into()
            },
            ok: true,
        },
    })
}

/// Restore compaction `id` in one transaction. Refused (not an error) when its archive was
/// pruned or the conversation changed after it (unless `force`); one already restored is
/// nothing to do.
pub fn restore(store: &mut Store, id: i64, force: bool, now: &str) -> Result<Restored> {
    let (conn, path) = (&mut store.conn, store.path.as_path());
    let at = StoreRef {
        path,
        kind: store.kind,
        limits: &store.limits,
    };
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .at(path)?;
    let (c, archived, changed, expected) = match check(&tx, &at, id, force, now)? {
        Check::Done(r) => return Ok(r),
        Check::Go {
            c,
            archived,
            changed,
            expected,
        } => (c, archived, changed, expected),
    };
    let archived = archive::restorable(&tx, archived, &expected).at(path)?;
    // The archived cells go back exactly: an agent's triggers (Crush stamps `updated_at` and
    // counts messages on every write) would write their own values over them, so they do not
    // run while the cells are put back.
    let triggers = tx
        .db_config(rusqlite::config::DbConfig::SQLITE_DBCONFIG_ENABLE_TRIGGER)
        .at(path)?;
    tx.set_db_config(
        rusqlite::config::DbConfig::SQLITE_DBCONFIG_ENABLE_TRIGGER,
        false,
    )
    .at(path)?;
    let applied = archive::apply(&tx, id, &archived).at(path);
    tx.set_db_config(
        rusqlite::config::DbConfig::SQLITE_DBCONFIG_ENABLE_TRIGGER,
        triggers,
    )
    .at(path)?;
    applied?;
    store
        .kind
        .adapter()
        .after_restore(&tx, path, &c.conversation_id, changed)?;
    tx.execute(
        "UPDATE agent_db_compactions SET restored_at = ?1 WHERE id = ?2",
        params![now, id],
    )
    .at(path)?;
    tx.commit().at(path)?;
    Ok(Restored {
        compaction_id: id,
        conversation_id: c.conversation_id,
        status: "restored".into(),
        ok: true,
    })
}

/// The newest unrestored compaction of a conversation.
pub fn latest_for(store: &Store, conversation: &str) -> Result<Option<i64>> {
    let (conn, path) = (&store.conn, store.path.as_path());
    if !crate::store::agent_tables::present(conn).at(path)? {
        return Ok(None);
    }
    conn.query_row(
        "SELECT MAX(id) FROM agent_db_compactions WHERE conversation_id = ?1 AND restored_at IS NULL",
        [conversation],
        |r| r.get(0),
    )
    .at(path)
}

/// Unrestored compactions made at or after `since` (RFC 3339 UTC), newest first, so chained
/// compactions of one conversation unwind in order.
pub fn since(store: &Store, since: &str) -> Result<Vec<i64>> {
    let (conn, path) = (&store.conn, store.path.as_path());
    if !crate::store::agent_tables::present(conn).at(path)? {
        return Ok(Vec::new());
    }
    let mut stmt = conn
        .prepare(
            "SELECT id FROM agent_db_compactions WHERE compacted_at >= ?1 AND restored_at IS NULL
             AND archive_pruned_at IS NULL AND strategy != 'retire' ORDER BY id DESC",
        )
        .at(path)?;
    let rows = stmt.query_map([since], |r| r.get(0)).at(path)?;
    rows.collect::<std::result::Result<_, _>>().at(path)
}

/// The conversations with a compaction made at or after `since` (RFC 3339 UTC) that is not
/// restored: what `list --since` leaves out where a compaction does not move the agent's own
/// last-activity time.
pub fn conversations_compacted_since(store: &Store, since: &str) -> Result<Vec<String>> {
    let (conn, path) = (&store.conn, store.path.as_path());
    if !crate::store::agent_tables::present(conn).at(path)? {
        return Ok(Vec::new());
    }
    let mut stmt = conn
        .prepare(
            "SELECT DISTINCT conversation_id FROM agent_db_compactions
             WHERE compacted_at >= ?1 AND restored_at IS NULL",
        )
        .at(path)?;
    let rows = stmt.query_map([since], |r| r.get(0)).at(path)?;
    rows.collect::<std::result::Result<_, _>>().at(path)
}

/// What `prune-archive` freed.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Pruned {
    pub compactions: usize,
    pub archived_values: usize,
    pub bytes: i64,
}

/// Delete the archived pre-images of compactions made before `before` (RFC 3339 UTC). After
/// this those compactions can no longer be restored; the audit rows stay.
pub fn prune_archive(store: &mut Store, before: &str, now: &str) -> Result<Pruned> {
    let (conn, path) = (&mut store.conn, store.path.as_path());
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .at(path)?;
    let bytes = crate::store::pre_image::stored_bytes_sum(&tx).at(path)?;
    let (values, bytes): (i64, i64) = tx
        .query_row(
            &format!("SELECT COUNT(*), {bytes} FROM agent_db_archive WHERE compaction_id IN
               (SELECT id FROM agent_db_compactions WHERE compacted_at < ?1 AND archive_pruned_at IS NULL)"),
            [before],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .at(path)?;
    tx.execute(
        "DELETE FROM agent_db_archive WHERE compaction_id IN
           (SELECT id FROM agent_db_compactions WHERE compacted_at < ?1 AND archive_pruned_at IS NULL)",
        [before],
    )
    .at(path)?;
    let compactions = tx
        .execute(
            "UPDATE agent_db_compactions SET archive_pruned_at = ?2 WHERE compacted_at < ?1 AND archive_pruned_at IS NULL AND strategy != 'retire'",
            params![before, now],
        )
        .at(path)?;
    tx.commit().at(path)?;
    Ok(Pruned {
        compactions,
        archived_values: values as usize,
        bytes,
    })
}

/// What the stall guard needs of agent-db's newest unrestored compaction of a conversation.
#[derive(Debug, Clone)]
pub struct LastCompaction {
    /// Its audit id.
    pub id: i64,
    pub messages_after: i64,
    pub tokens_before: i64,
    pub tokens_after: i64,
    /// How long ago it was made, for messages (`3h`).
    pub age: String,
}

/// The newest unrestored compaction of `conversation`, if agent-db made one.
pub fn last_compaction(store: &Store, conversation: &str) -> Result<Option<LastCompaction>> {
    if !crate::store::agent_tables::present(&store.conn).at(&store.path)? {
        return Ok(None);
    }
    // Cached: a planning thread asks this of every conversation it plans.
    let row = store
        .conn
        .prepare_cached(
            "SELECT messages_after, tokens_before, tokens_after, compacted_at, id FROM agent_db_compactions
             WHERE conversation_id = ?1 AND restored_at IS NULL ORDER BY id DESC LIMIT 1",
        )
        .at(&store.path)?
        .query_row(
            [conversation],
            |r| {
                Ok((
                    r.get::<_, i64>(0)?,
                    r.get::<_, i64>(1)?,
                    r.get::<_, i64>(2)?,
                    r.get::<_, String>(3)?,
                    r.get::<_, i64>(4)?,
                ))
            },
        )
        .optional()
        .at(&store.path)?;
    Ok(
        row.map(|(messages_after, tokens_before, tokens_after, at, id)| {
            let age = chrono::DateTime::parse_from_rfc3339(&at)
                .ok()
                .and_then(|t| (crate::gotime::now() - t).to_std().ok())
                .map(crate::util::short_duration)
                .unwrap_or_else(|| "some time".to_string());
            LastCompaction {
                id,
                messages_after,
                tokens_before,
                tokens_after,
                age,
            }
        }),
    )
}

/// How long ago agent-db's newest unrestored compaction of `conversation` was made, when it is
/// the conversation's last change (the cells it wrote still hold its post-image and the agent
/// added nothing since: [`needs_force`] says no); `None` otherwise.
pub fn own_last_change(store: &Store, conversation: &str) -> Result<Option<String>> {
    let Some(last) = last_compaction(store, conversation)? else {
        return Ok(None);
    };
    Ok((!needs_force(store, last.id)?).then_some(last.age))
}

//! What opencode 1.x never reads again (docs/stores.md, "What `reclaim` removes"): the `event`
//! rows of a session that is idle, in no workspace, not shared, with no sync owner and no input
//! waiting (its state is in `message`/`part`; opencode reads events back only for workspace sync
//! and the v2 session-history API), and the `event`/`event_sequence` rows of sessions that no longer
//! exist (opencode's own session removal deletes them).

use rusqlite::types::ValueRef;

use crate::error::{Result, SqlContext};
use crate::store::conversation::Read;
use crate::store::pre_image::CellValue;
use crate::store::reclaim::{Rows, Sink, Unit};
use crate::store::schema_util::columns;
use crate::store::schema_util::has_table;

pub const IDLE_EVENTS: &str = "events of idle sessions";
pub const ORPHANS: &str = "events of deleted sessions";

/// Every column's bytes of an `event` row aliased `e`.
const EVENT_BYTES: &str = "octet_length(e.id) + octet_length(e.aggregate_id) + 8 + octet_length(e.type) + octet_length(e.data)";

pub(super) fn reclaimable(
    read: &Read<'_>,
    idle_before_ms: i64,
    only: Option<&str>,
    sink: &mut Sink<'_>,
) -> Result<()> {
    let (conn, path) = (read.conn, read.path);
    if !has_table(conn, "event").at(path)? || !has_table(conn, "event_sequence").at(path)? {
        return Ok(());
    }
    let session = columns(conn, "session", path)?;
    let mut guards = vec!["s.time_updated < ?1".to_string()];
    if session.contains("workspace_id") {
        // Workspace sync replays a workspace session's events to its peers.
        guards.push("s.workspace_id IS NULL".into());
    }
    if columns(conn, "event_sequence", path)?.contains("owner_id") {
        // A sync owner's events are the sync's (opencode's own `db compact-events` leaves them:
        // `packages/core/src/session/event-log-compaction.ts@18b86bd8`).
        guards.push(
            "NOT EXISTS (SELECT 1 FROM event_sequence q WHERE q.aggregate_id = s.id AND q.owner_id IS NOT NULL)"
                .into(),
        );
    }
    if has_table(conn, "session_share").at(path)? {
        guards.push("NOT EXISTS (SELECT 1 FROM session_share h WHERE h.session_id = s.id)".into());
    }
    if has_table(conn, "session_input").at(path)? {
        // Input admitted but not yet promoted is still being worked on.
        guards.push(
            "NOT EXISTS (SELECT 1 FROM session_input i WHERE i.session_id = s.id AND i.promoted_seq IS NULL)"
                .into(),
        );
    }
    let only_clause = |col: &str| match only {
        Some(_) => format!(" AND {col} = ?2"),
        None => String::new(),
    };
    let idle = format!(
        "SELECT e.aggregate_id, e.id, {EVENT_BYTES} FROM event e JOIN session s ON s.id = e.aggregate_id \
         WHERE {}{} ORDER BY e.aggregate_id, e.seq, e.id",
        guards.join(" AND "),
        only_clause("s.id")
    );
    group(read, &idle, idle_before_ms, only, IDLE_EVENTS, false, sink)?;
    let orphans = format!(
        "SELECT e.aggregate_id, e.id, {EVENT_BYTES} FROM event e \
         WHERE e.aggregate_id LIKE 'ses\\_%' ESCAPE '\\' AND ?1 = ?1 \
           AND NOT EXISTS (SELECT 1 FROM session s WHERE s.id = e.aggregate_id){} \
         ORDER BY e.aggregate_id, e.seq, e.id",
        only_clause("e.aggregate_id")
    );
    group(read, &orphans, idle_before_ms, only, ORPHANS, true, sink)
}

/// Units from `(session, event id, bytes)` rows ordered by session, each to `sink` once complete; `with_sequence`: the
/// session's `event_sequence` row goes too (before its events, so a restore inserts it first).
fn group(
    read: &Read<'_>,
    sql: &str,
    idle_before_ms: i64,
    only: Option<&str>,
    category: &'static str,
    with_sequence: bool,
    sink: &mut Sink<'_>,
) -> Result<()> {
    let (conn, path) = (read.conn, read.path);
    let mut st = conn.prepare(sql).at(path)?;
    let mut rows = match only {
        Some(id) => st.query(rusqlite::params![idle_before_ms, id]),
        None => st.query(rusqlite::params![idle_before_ms]),
    }
    .at(path)?;
    let mut seq = conn
        .prepare(
            "SELECT octet_length(aggregate_id) + 8 + COALESCE(octet_length(owner_id), 0) \
             FROM event_sequence WHERE aggregate_id = ?1",
        )
        .at(path)?;
    let mut current: Option<Unit> = None;
    let mut finish = |u: Unit, sink: &mut Sink<'_>| -> Result<()> {
        let mut u = u;
        if with_sequence {
            let bytes: Option<i64> = seq
                .query_row([&u.conversation], |r| r.get(0))
                .map(Some)
                .or_else(|e| match e {
                    rusqlite::Error::QueryReturnedNoRows => Ok(None),
                    e => Err(e),
                })
                .at(path)?;
            if let Some(b) = bytes {
                u.bytes += b.max(0) as u64;
                u.rows.insert(
                    0,
                    Rows {
                        table: "event_sequence",
                        key_column: "aggregate_id",
                        keys: vec![CellValue::from(u.conversation.as_str())],
                    },
                );
            }
        }
        sink(u)
    };
    while let Some(r) = rows.next().at(path)? {
        let session = match r.get_ref(0).at(path)? {
            ValueRef::Text(t) => String::from_utf8_lossy(t).into_owned(),
            _ => continue,
        };
        let key = CellValue::from_ref(r.get_ref(1).at(path)?);
        let bytes = r.get::<_, Option<i64>>(2).at(path)?.unwrap_or(0).max(0) as u64;
        if current.as_ref().is_some_and(|u| u.conversation != session) {
            finish(current.take().expect("current unit"), sink)?;
        }
        let u = current.get_or_insert_with(|| Unit {
            category,
            conversation: session,
            rows: vec![Rows {
                table: "event",
                key_column: "id",
                keys: Vec::new(),
            }],
            bytes: 0,
        });
        u.rows.last_mut().expect("event rows").keys.push(key);
        u.bytes += bytes;
    }
    if let Some(u) = current {
        finish(u, sink)?;
    }
    Ok(())
}

//! What kodelet never reads again (docs/stores.md, "kodelet"): the ACP replay log
//! (`acp_session_updates`) of a conversation that no longer exists. kodelet reads the log only
//! when an ACP client loads a session, after loading its conversation (a deleted one fails
//! first); `kodelet conversation delete` drops the log with the conversation, the web UI's delete
//! does not. A session's log is taken only when its newest row is a day older than the idle
//! cutoff: an ACP session logs before its conversation row is first saved, and a first turn may
//! run long.

use std::collections::BTreeMap;

use crate::error::{Result, SqlContext};
use crate::store::conversation::Read;
use crate::store::pre_image::CellValue;
use crate::store::reclaim::{Rows, Sink, Unit};
use crate::store::schema_util::has_table;

pub const ACP_ORPHANS: &str = "ACP replay of deleted conversations";

/// How much older than the idle cutoff a log's newest row must be (milliseconds).
const MARGIN_MS: i64 = 24 * 3_600_000;

pub(super) fn reclaimable(
    read: &Read<'_>,
    idle_before_ms: i64,
    only: Option<&str>,
    sink: &mut Sink<'_>,
) -> Result<()> {
    let (conn, path) = (read.conn, read.path);
    if !has_table(conn, "acp_session_updates").at(path)? {
        return Ok(());
    }
    let sql = format!(
        "SELECT u.session_id, u.id, u.created_at, \
           octet_length(u.session_id) + octet_length(u.update_data) + 8 \
           + COALESCE(octet_length(u.created_at), 0) \
         FROM acp_session_updates u \
         WHERE typeof(u.session_id) = 'text' \
           AND NOT EXISTS (SELECT 1 FROM conversations c WHERE c.id = u.session_id) \
           AND NOT EXISTS (SELECT 1 FROM conversation_summaries s WHERE s.id = u.session_id){} \
         ORDER BY u.session_id, u.id",
        if only.is_some() {
            " AND u.session_id = ?1"
        } else {
            ""
        }
    );
    let mut st = conn.prepare(&sql).at(path)?;
    let mut q = match only {
        Some(id) => st.query([id]),
        None => st.query([]),
    }
    .at(path)?;
    // Per session: its rows, bytes, and whether every row is known older than the cutoff.
    let mut by: BTreeMap<String, (Vec<CellValue>, u64, bool)> = BTreeMap::new();
    while let Some(r) = q.next().at(path)? {
        let session: String = r.get(0).at(path)?;
        let key = CellValue::from_ref(r.get_ref(1).at(path)?);
        let idle = match r.get_ref(2).at(path)? {
            rusqlite::types::ValueRef::Text(t) => std::str::from_utf8(t)
                .ok()
                .and_then(|t| crate::gotime::parse(t).ok())
                .is_some_and(|t| t.timestamp_millis() < idle_before_ms.saturating_sub(MARGIN_MS)),
            // No time the log can be judged by: left alone.
            _ => false,
        };
        let bytes = r.get::<_, Option<i64>>(3).at(path)?.unwrap_or(0).max(0) as u64;
        let e = by.entry(session).or_insert((Vec::new(), 0, true));
        e.0.push(key);
        e.1 += bytes;
        e.2 &= idle;
    }
    for (conversation, (keys, bytes, idle)) in by {
        if idle {
            sink(Unit {
                category: ACP_ORPHANS,
                conversation,
                rows: vec![Rows {
                    table: "acp_session_updates",
                    key_column: "id",
                    keys,
                }],
                bytes,
            })?;
        }
    }
    Ok(())
}

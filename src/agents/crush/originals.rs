//! The history Crush sent before one of agent-db's compactions, read back for a re-compaction
//! that summarizes the originals. A compaction inserts one summary message, moves summarized
//! messages' `created_at` at most, and repoints `sessions.summary_message_id` (all archived). So
//! the history before compaction `c` is Crush's loading rule over the messages older (by rowid)
//! than the one `c` inserted, each with the `created_at` it had then, from the summary message
//! the session named then.

use std::path::Path;

use rusqlite::types::ValueRef;
use rusqlite::{Connection, OptionalExtension};

use super::read::{history, parts_text};
use crate::error::{Result, SqlContext};
use crate::store::pre_image::{key_text, values_before, CellValue};

/// The messages before compaction `compaction_id` and the summary id then; `None` when the
/// compaction's summary message is gone or a time cannot be ordered.
#[allow(clippy::type_complexity)]
fn before(
    conn: &Connection,
    path: &Path,
    id: &str,
    compaction_id: i64,
) -> Result<Option<(Vec<(String, (String, String))>, Option<String>)>> {
    let inserted: Option<i64> = conn
        .query_row(
            "SELECT MIN(m.rowid) FROM agent_db_archive a JOIN messages m ON m.id = a.row_key
             WHERE a.compaction_id = ?1 AND a.table_name = 'messages' AND a.column_name = '*'",
            [compaction_id],
            |r| r.get(0),
        )
        .optional()
        .at(path)?
        .flatten();
    let Some(inserted) = inserted else {
        return Ok(None);
    };
    let times = values_before(conn, id, compaction_id, "messages", "created_at").at(path)?;
    let summary = values_before(conn, id, compaction_id, "sessions", "summary_message_id")
        .at(path)?
        .remove(id)
        .and_then(|v| match v {
            CellValue::Text(b) => Some(String::from_utf8_lossy(&b).into_owned()),
            _ => None,
        })
        .filter(|s| !s.is_empty());
    let mut st = conn
        .prepare(
            "SELECT rowid, id, role, parts, created_at FROM messages WHERE session_id = ?1 AND rowid < ?2",
        )
        .at(path)?;
    let mut q = st.query(rusqlite::params![id, inserted]).at(path)?;
    let mut rows = Vec::new();
    while let Some(r) = q.next().at(path)? {
        let rowid: i64 = r.get(0).at(path)?;
        let msg = crate::store::cells::lossy(r, 1)
            .at(path)?
            .unwrap_or_default();
        let time = match times.get(&key_text(&CellValue::Text(msg.clone().into_bytes()))) {
            Some(CellValue::Integer(t)) => *t,
            Some(_) => return Ok(None),
            None => match r.get_ref(4).at(path)? {
                ValueRef::Integer(t) => t,
                _ => return Ok(None),
            },
        };
        let role = crate::store::cells::lossy(r, 2)
            .at(path)?
            .unwrap_or_default();
        let Ok(parts) = parts_text(r.get_ref(3).at(path)?, id, &msg) else {
            return Ok(None);
        };
        rows.push(((time, rowid), (msg, (role, parts))));
    }
    rows.sort_by_key(|(k, _)| *k);
    Ok(Some((rows.into_iter().map(|(_, v)| v).collect(), summary)))
}

/// The history Crush loaded right before compaction `compaction_id` of session `id`.
pub fn history_before(
    conn: &Connection,
    path: &Path,
    id: &str,
    compaction_id: i64,
) -> Result<Option<String>> {
    Ok(
        before(conn, path, id, compaction_id)?.map(|(rows, summary)| {
            let ids: Vec<&str> = rows.iter().map(|(i, _)| i.as_str()).collect();
            let bodies: Vec<(String, String)> = rows.iter().map(|(_, b)| b.clone()).collect();
            history(&ids, &bodies, summary.as_deref()).1
        }),
    )
}

/// 1 when that history started at a summary message, else 0.
pub fn agent_summary_before(
    conn: &Connection,
    path: &Path,
    id: &str,
    compaction_id: i64,
) -> Result<usize> {
    Ok(match before(conn, path, id, compaction_id)? {
        Some((rows, Some(s))) => usize::from(rows.iter().any(|(i, _)| *i == s)),
        _ => 0,
    })
}

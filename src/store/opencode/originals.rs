//! The history opencode sent before one of agent-db's compactions, read back for a
//! re-compaction that summarizes the originals. Nothing is deleted: a compaction appends its
//! messages after every existing one (and `prune` marks tool parts, archiving their `data`). So
//! the history before compaction `c` is opencode's loading rule over the messages ordered
//! before the first message `c` inserted, each part with the `data` it had then (the archive of
//! `c` or of the first later compaction that changed it, else its current value).

use rusqlite::{Connection, OptionalExtension};
use std::path::Path;

use super::codec;
use super::read::{filter_compacted, read_messages, read_parts, reorder};
use crate::error::{Result, SqlContext};
use crate::store::archive::{inserted_keys, key_text, values_before, CellValue};

/// The history opencode loaded right before compaction `compaction_id` of session `id`, as a
/// JSON array of its message envelopes; `None` when the compaction inserted no message (a
/// prune) or a message then had no parts opencode could send.
pub fn history_before(
    conn: &Connection,
    path: &Path,
    id: &str,
    compaction_id: i64,
) -> Result<Option<String>> {
    let mut first: Option<(i64, String)> = None;
    for key in inserted_keys(conn, compaction_id, "message").at(path)? {
        let mid = key_text(&key);
        let t: Option<i64> = conn
            .query_row("SELECT time_created FROM message WHERE id = ?1", [&mid], |r| {
                r.get(0)
            })
            .optional()
            .at(path)?;
        if let Some(t) = t {
            let k = (t, mid);
            if first.as_ref().is_none_or(|f| k < *f) {
                first = Some(k);
            }
        }
    }
    let Some(first) = first else {
        return Ok(None);
    };
    let rows: Vec<_> = read_messages(conn, path, id)?
        .into_iter()
        .filter(|r| (r.time_created, r.id.as_str()) < (first.0, first.1.as_str()))
        .collect();
    let (mut parts, _) = read_parts(conn, path, id)?;
    let data = values_before(conn, id, compaction_id, "part", "data").at(path)?;
    if !data.is_empty() {
        for (pid, d) in parts.values_mut().flatten() {
            if let Some(CellValue::Text(b) | CellValue::Blob(b)) = data.get(pid.as_str()) {
                *d = String::from_utf8_lossy(b).into_owned();
            }
        }
    }
    let loaded = reorder(filter_compacted(id, rows, &mut parts)?);
    let mut envs = Vec::with_capacity(loaded.len());
    for m in &loaded {
        if m.parts.is_empty() {
            return Ok(None);
        }
        match codec::envelope(&m.id, &m.data, &m.parts) {
            Ok(e) => envs.push(e),
            Err(_) => return Ok(None),
        }
    }
    Ok(Some(crate::message::join_raw(envs.iter().map(|e| e.as_ref()))))
}

//! The history docker-agent sent before one of agent-db's compactions, read back for a
//! re-compaction that summarizes the originals. Nothing is rewritten: a compaction appends one
//! summary item after every existing item (the archive records its row id). So the history
//! before compaction `c` is docker-agent's loading rule over the items ordered before `c`'s
//! summary item.

use rusqlite::Connection;
use std::path::Path;

use super::check_schema;
use super::read::{active_history, instruction_updates, native_head, read_items, read_session_row};
use crate::error::{Result, SqlContext};
use crate::store::pre_image::inserted_rowids;

/// The history docker-agent loaded right before compaction `compaction_id` of session `id`, as
/// a JSON array of its messages; `None` when the compaction's summary item is not there.
pub fn history_before(
    conn: &Connection,
    path: &Path,
    id: &str,
    compaction_id: i64,
) -> Result<Option<String>> {
    let inserted = inserted_rowids(conn, compaction_id, "session_items").at(path)?;
    let schema = check_schema(conn, path)?;
    let (_, _, _, context) = read_session_row(conn, path, &schema, id)?;
    let updates = instruction_updates(context.as_deref(), id)?;
    let items = read_items(conn, path, &schema, id)?;
    let Some(cut) = items.ids.iter().position(|i| inserted.contains(i)) else {
        return Ok(None);
    };
    let (raw, _) = active_history(&items.slice[..cut], &updates, id)?;
    Ok(Some(raw))
}

/// 1 when the history before compaction `compaction_id` started with docker-agent's own
/// summary (see [`history_before`]), else 0.
pub fn agent_summary_before(
    conn: &Connection,
    path: &Path,
    id: &str,
    compaction_id: i64,
) -> Result<usize> {
    let inserted = inserted_rowids(conn, compaction_id, "session_items").at(path)?;
    let schema = check_schema(conn, path)?;
    let items = read_items(conn, path, &schema, id)?;
    let Some(cut) = items.ids.iter().position(|i| inserted.contains(i)) else {
        return Ok(0);
    };
    Ok(usize::from(native_head(&items.slice[..cut])))
}

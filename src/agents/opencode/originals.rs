//! The history opencode sent before one of agent-db's compactions, read back for a
//! re-compaction that summarizes the originals. Nothing is deleted: a summary compaction
//! appends its compaction user message and summary assistant (with their parts) after every
//! message and part of the session (the archive records their ids), and `prune` only changes
//! parts' `data` (archived). So the history before compaction `c` is opencode's loading rule
//! over the messages ordered before `c`'s first inserted message, each part with the `data` it
//! had then (the archive of `c` or of the first later compaction that changed it, else its
//! current value).

use std::collections::HashMap;
use std::path::Path;

use rusqlite::{params, Connection};

use super::read::history_before_key;
use crate::error::{Result, SqlContext};
use crate::store::pre_image::{values_before, CellValue};

/// The history opencode loaded right before compaction `compaction_id` of session `id`, as a
/// JSON array of its message envelopes; `None` when the compaction inserted no message that is
/// still there (a `prune`, which appends nothing to tell the earlier messages from later ones),
/// or a message then was one opencode could not load.
pub fn history_before(
    conn: &Connection,
    path: &Path,
    id: &str,
    compaction_id: i64,
) -> Result<Option<String>> {
    super::schema::inspect(conn, path)?;
    // The earliest message the compaction inserted, by opencode's order.
    let first: Option<(i64, String)> = conn
        .query_row(
            "SELECT m.time_created, m.id FROM agent_db_archive a JOIN message m
               ON m.id = CAST(a.row_key AS TEXT) AND m.session_id = ?2
             WHERE a.compaction_id = ?1 AND a.table_name = 'message' AND a.column_name = '*'
             ORDER BY m.time_created, m.id LIMIT 1",
            params![compaction_id, id],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .map(Some)
        .or_else(|e| match e {
            rusqlite::Error::QueryReturnedNoRows => Ok(None),
            e => Err(e),
        })
        .at(path)?;
    let Some((time, first_id)) = first else {
        return Ok(None);
    };
    let part_data: HashMap<String, String> = values_before(conn, id, compaction_id, "part", "data")
        .at(path)?
        .into_iter()
        .filter_map(|(k, v)| match v {
            CellValue::Text(b) | CellValue::Blob(b) => {
                Some((k, String::from_utf8_lossy(&b).into_owned()))
            }
            _ => None,
        })
        .collect();
    match history_before_key(conn, path, id, (time, &first_id), &part_data) {
        Ok(h) => Ok(Some(h)),
        // A message opencode could not load then either: the originals are not readable.
        Err(crate::error::Error::Conversation { .. } | crate::error::Error::Decode { .. }) => {
            Ok(None)
        }
        Err(e) => Err(e),
    }
}

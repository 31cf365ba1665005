//! The history goose sent before one of agent-db's compactions, read back for a re-compaction
//! that summarizes the originals. Nothing is deleted: a compaction hides the summarized rows
//! (their `metadata_json` is archived) and inserts its own rows after every existing one. So the
//! history before compaction `c` is goose's loading rule over the rows older than the first row
//! `c` inserted, each with the `metadata_json` it had then (the archive of `c` or of the first
//! later compaction that changed it, else its current value).

use rusqlite::Connection;
use std::path::Path;

use super::read::read_rows;
use super::{check_schema, codec};
use crate::error::{Result, SqlContext};
use crate::store::pre_image::{inserted_rowids, key_text, values_before, CellValue};

/// The history goose loaded right before compaction `compaction_id` of session `id`, as a JSON
/// array of its message envelopes; `None` when the compaction inserted no row (nothing to tell
/// its rows from later ones).
pub fn history_before(
    conn: &Connection,
    path: &Path,
    id: &str,
    compaction_id: i64,
) -> Result<Option<String>> {
    let schema = check_schema(conn, path)?;
    let first_inserted = inserted_rowids(conn, compaction_id, "messages")
        .at(path)?
        .into_iter()
        .min();
    let Some(first_inserted) = first_inserted else {
        return Ok(None);
    };
    let metadata = values_before(conn, id, compaction_id, "messages", "metadata_json").at(path)?;
    let (rows, _) = read_rows(conn, path, &schema, id)?;
    let mut parts = Vec::new();
    for mut r in rows.into_iter().filter(|r| r.id < first_inserted) {
        if let Some(v) = metadata.get(&key_text(&CellValue::Integer(r.id))) {
            r.metadata = match v {
                CellValue::Text(b) | CellValue::Blob(b) => {
                    Some(String::from_utf8_lossy(b).into_owned())
                }
                _ => None,
            };
        }
        if !codec::visibility(r.metadata.as_deref()).agent {
            continue;
        }
        match codec::envelope(&r.role, &r.content, r.metadata.as_deref()) {
            Ok(env) => parts.push(env),
            // A row goose could not load then either: the originals are not readable.
            Err(_) => return Ok(None),
        }
    }
    Ok(Some(crate::message::join_raw(
        parts.iter().map(|p| p.as_ref()),
    )))
}

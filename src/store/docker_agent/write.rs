//! Writing a compaction into docker-agent's `session.db` the way docker-agent itself does
//! (stores.md §2.6): append-only, in one `BEGIN IMMEDIATE` transaction.
//!
//! - Re-load the session inside the transaction and compare the version token; a change means a
//!   live agent wrote to it ([`Written::Changed`]).
//! - Append one `summary` item at `MAX(position) + 1` with the summary text (agent-db's header
//!   line removed: docker-agent shows it after `Session Summary: `). When the split put the
//!   latest instruction back, it is appended to the summary text verbatim, because docker-agent
//!   cannot replay a message that sits before the kept tail.
//! - From migration 21 on, `first_kept_entry` is the slice index of the first kept message (0
//!   for an empty tail: docker-agent then starts after the summary). Older generations cannot
//!   keep a tail; the planner gives them a zero tail budget, so the summary covers everything.
//! - `cost` 0, `model` (the summarizer's, else `agent-db`) and `usage_json` `''` where those
//!   columns exist. `sessions.input_tokens` becomes the estimated new context and
//!   `output_tokens` 0. The legacy `sessions.messages` JSON, where it exists and is in sync, gets
//!   the `{"summary":…}` element appended (every existing byte kept).
//! - Nothing is deleted or renumbered; `migrations` is never touched. Archived cells: the
//!   inserted item and the changed `sessions` cells, so a restore puts every row back byte for
//!   byte. `sqlite_sequence` is left to SQLite: after a restore it keeps the deleted item's id
//!   as its high-water mark, so that id is never reused (`AUTOINCREMENT`'s own promise). It is
//!   not archived because it is shared by every session: archiving it would make each restore
//!   depend on every later write to any session.
//! - Before committing, the session is loaded once more as docker-agent would load it, and must
//!   be the summary followed by exactly the planned tail.

use std::path::Path;

use rusqlite::{params, Connection, OptionalExtension, TransactionBehavior};

use super::{check_schema, load_session, Schema};
use crate::error::{Error, Result, SqlContext};
use crate::message::{self, go_escape, Block, Format};
use crate::store::archive::{self, Cell};
use crate::store::{Proposal, Written};

/// The line that introduces the latest instruction appended to a summary.
pub const INSTRUCTION_LINE: &str = "The user's latest instruction, verbatim:";

/// The summary text without agent-db's header line (docker-agent adds its own prefix).
pub fn strip_header(summary: &str) -> String {
    let t = summary.trim_start();
    match t.strip_prefix(crate::plan::SUMMARY_HEADER) {
        Some(rest) => rest.trim_start().to_string(),
        None => t.to_string(),
    }
}

/// The text of the instruction the split put back, as the summary will carry it.
fn instruction_text(raw_messages: &str, index: usize) -> Option<String> {
    let parts = message::split_raw(raw_messages).ok()?;
    let m = message::decode(Format::DockerAgent, parts.get(index)?).ok()?;
    let images = m
        .blocks
        .iter()
        .filter(|b| matches!(b, Block::Image(_)))
        .count();
    let mut text = m.text();
    if images > 0 {
        text.push_str(&format!(
            "\n[{images} image(s) attached to this instruction are not reproduced here]"
        ));
    }
    Some(text)
}

/// The legacy `[]Item` JSON with a summary element appended, or why it is left as it is.
fn legacy_with_summary(
    legacy: Option<&str>,
    slice_len: usize,
    summary: &str,
) -> std::result::Result<String, String> {
    let old = legacy.ok_or("left unchanged: it is NULL")?;
    let parts = message::split_raw(old)
        .map_err(|_| "left unchanged: it is not a JSON array".to_string())?;
    if parts.len() != slice_len {
        return Err(format!(
            "left unchanged: it is out of sync with session_items ({} elements, {slice_len} items)",
            parts.len()
        ));
    }
    let element = format!(
        "{{\"summary\":{}}}",
        go_escape(&serde_json::to_string(summary).expect("strings serialize"))
    );
    let end = old
        .rfind(']')
        .ok_or("left unchanged: it is not a JSON array")?;
    let sep = if parts.is_empty() { "" } else { "," };
    Ok(format!("{}{sep}{element}{}", &old[..end], &old[end..]))
}

/// Write one compaction. Returns [`Written::Changed`] without writing when the session is not
/// the version that was planned.
pub fn commit(conn: &mut Connection, path: &Path, p: &Proposal, now: &str) -> Result<Written> {
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .at(path)?;
    let schema = check_schema(&tx, path)?;
    let cur = match load_session(&tx, path, &schema, &p.id) {
        Ok(s) => s,
        Err(Error::ConversationNotFound { .. }) => {
            return Ok(Written::Changed("deleted since it was read".into()))
        }
        Err(e) => return Err(e),
    };
    if cur.stored.version != p.version {
        return Ok(Written::Changed(
            "changed since read (a live agent wrote to it); nothing written".into(),
        ));
    }
    let summary = p.summary.as_deref().ok_or_else(|| {
        Error::conversation(
            &p.id,
            "docker-agent stores are append-only: a compaction must be a summary",
        )
    })?;
    let loaded = cur.stored.slots.len();
    if p.slots != cur.stored.slots || p.tail_start > loaded {
        return Ok(Written::Changed(
            "changed since read (its items moved); nothing written".into(),
        ));
    }
    let first_kept = if p.tail_start < loaded {
        if !schema.keeps_tail() {
            return Err(Error::conversation(
                &p.id,
                format!(
                    "this docker-agent generation ({}) cannot keep a tail: it has no first_kept_entry (migration 21); \
                     the plan for such stores keeps no tail",
                    schema.describe()
                ),
            ));
        }
        let slot = p.slots[p.tail_start];
        if slot <= 0 {
            return Err(Error::conversation(
                &p.id,
                format!("the kept tail would start at slice index {slot}, which docker-agent cannot express"),
            ));
        }
        slot
    } else {
        0
    };

    let mut text = strip_header(summary);
    if let Some(i) = p.reinsert {
        let instruction = instruction_text(&cur.stored.raw_messages, i).ok_or_else(|| {
            Error::conversation(
                &p.id,
                format!("message {i} (the latest instruction) does not decode"),
            )
        })?;
        text = format!("{}\n\n{INSTRUCTION_LINE}\n\n{instruction}", text.trim_end());
    }

    let position: i64 = tx
        .query_row(
            "SELECT COALESCE(MAX(position), -1) + 1 FROM session_items WHERE session_id = ?1",
            [&p.id],
            |r| r.get(0),
        )
        .at(path)?;
    let seq: Option<i64> = tx
        .query_row(
            "SELECT seq FROM sqlite_sequence WHERE name = 'session_items'",
            [],
            |r| r.get(0),
        )
        .optional()
        .at(path)?;
    let max_id: i64 = tx
        .query_row("SELECT COALESCE(MAX(id), 0) FROM session_items", [], |r| {
            r.get(0)
        })
        .at(path)?;
    let new_id = seq.unwrap_or(0).max(max_id) + 1;

    let legacy = schema
        .legacy_messages
        .then(|| legacy_with_summary(cur.legacy_messages.as_deref(), cur.slice_len, &text));

    let key = p.id.clone();
    let mut cells = vec![
        Cell::inserted_row("session_items", "id", new_id),
        Cell::new("sessions", "id", key.clone(), "input_tokens"),
        Cell::new("sessions", "id", key.clone(), "output_tokens"),
    ];
    if let Some(Ok(_)) = &legacy {
        cells.push(Cell::new("sessions", "id", key.clone(), "messages"));
    }

    let model = p.audit.model.clone().unwrap_or_else(|| "agent-db".into());
    let mut audit = p.audit.clone();
    if let Some(obj) = audit.details.as_object_mut() {
        let mut d = serde_json::json!({
            "generation": schema.describe(),
            "max_migration": schema.max_migration,
            "summary_item_id": new_id,
            "summary_position": position,
            "summary_slice_index": cur.slice_len,
            "kept_tail": if schema.keeps_tail() {
                format!("{} message(s) from slice index {first_kept} (first_kept_entry)", loaded - p.tail_start)
            } else {
                "none: this generation has no first_kept_entry, so the summary covers the whole history".to_string()
            },
        });
        if schema.keeps_tail() {
            d["first_kept_entry"] = first_kept.into();
        }
        if p.reinsert.is_some() {
            d["latest_instruction"] = "appended to the summary text verbatim".into();
        }
        match &legacy {
            Some(Ok(_)) => d["legacy_messages"] = "summary element appended".into(),
            Some(Err(why)) => d["legacy_messages"] = why.clone().into(),
            None => {}
        }
        obj.insert("docker_agent".into(), d);
    }

    let compaction_id = archive::insert_audit(&tx, &audit, now).at(path)?;
    archive::save_pre_image(&tx, compaction_id, &cells).at(path)?;
    insert_summary(
        &tx, path, &schema, new_id, &key, position, &text, first_kept, &model,
    )?;
    tx.execute(
        "UPDATE sessions SET input_tokens = ?1, output_tokens = 0 WHERE id = ?2",
        params![p.tokens_after as i64, key],
    )
    .at(path)?;
    if let Some(Ok(m)) = &legacy {
        tx.execute(
            "UPDATE sessions SET messages = ?1 WHERE id = ?2",
            params![m, key],
        )
        .at(path)?;
    }
    self_check(&tx, path, &schema, p, &cur.stored.raw_messages)?;
    archive::finish_audit(&tx, compaction_id, &cells).at(path)?;
    tx.commit().at(path)?;
    Ok(Written::Committed { compaction_id })
}

#[allow(clippy::too_many_arguments)]
fn insert_summary(
    tx: &Connection,
    path: &Path,
    schema: &Schema,
    id: i64,
    session: &str,
    position: i64,
    text: &str,
    first_kept: i64,
    model: &str,
) -> Result<()> {
    tx.execute(
        "INSERT INTO session_items (id, session_id, position, item_type, summary_text) VALUES (?1, ?2, ?3, 'summary', ?4)",
        params![id, session, position, text],
    )
    .at(path)?;
    if schema.first_kept_entry {
        tx.execute(
            "UPDATE session_items SET first_kept_entry = ?1 WHERE id = ?2",
            params![first_kept, id],
        )
        .at(path)?;
    }
    if schema.item_cost {
        tx.execute(
            "UPDATE session_items SET cost = 0 WHERE id = ?1",
            params![id],
        )
        .at(path)?;
    }
    if schema.item_model {
        tx.execute(
            "UPDATE session_items SET model = ?1 WHERE id = ?2",
            params![model, id],
        )
        .at(path)?;
    }
    if schema.item_usage_json {
        tx.execute(
            "UPDATE session_items SET usage_json = '' WHERE id = ?1",
            params![id],
        )
        .at(path)?;
    }
    Ok(())
}

/// Load the session again, inside the transaction, as docker-agent would: it must be the new
/// summary followed by exactly the planned tail, byte for byte.
fn self_check(
    tx: &Connection,
    path: &Path,
    schema: &Schema,
    p: &Proposal,
    before: &str,
) -> Result<()> {
    let after = load_session(tx, path, schema, &p.id)?;
    let fail = |why: &str| {
        Err(Error::conversation(
            &p.id,
            format!("internal check failed, nothing written: {why}"),
        ))
    };
    let old = message::split_raw(before).map_err(|e| Error::conversation(&p.id, e.to_string()))?;
    let new = message::split_raw(&after.stored.raw_messages)
        .map_err(|e| Error::conversation(&p.id, e.to_string()))?;
    let tail: Vec<&str> = old[p.tail_start..].iter().map(|r| r.get()).collect();
    let got: Vec<&str> = new.iter().skip(1).map(|r| r.get()).collect();
    if after.stored.slots.first() != Some(&-1) {
        return fail("docker-agent would not load the new summary");
    }
    if got != tail {
        return fail("docker-agent would not load the planned tail after the summary");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_is_stripped() {
        assert_eq!(
            strip_header("[agent-db compaction summary]\nThis session continues.\n\nbody"),
            "This session continues.\n\nbody"
        );
        assert_eq!(strip_header("plain"), "plain");
    }

    #[test]
    fn legacy_column_gets_an_element() {
        let old = r#"[{"message":{"agentName":"","message":{"role":"user","content":"hi"}}}]"#;
        let new = legacy_with_summary(Some(old), 1, "a <b> & c").unwrap();
        assert_eq!(
            new,
            r#"[{"message":{"agentName":"","message":{"role":"user","content":"hi"}}},{"summary":"a \u003cb\u003e \u0026 c"}]"#
        );
        assert_eq!(
            legacy_with_summary(Some("[]"), 0, "s").unwrap(),
            r#"[{"summary":"s"}]"#
        );
        assert!(legacy_with_summary(Some(old), 2, "s")
            .unwrap_err()
            .contains("out of sync"));
        assert!(legacy_with_summary(None, 0, "s").is_err());
    }
}

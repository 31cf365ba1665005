//! docker-agent's proposal: a compaction written into `session.db` the way docker-agent itself
//! does (`PersistCompaction` in `pkg/session/store.go@95774d90`), append-only. The shared protocol (`store/commit.rs`) runs it in one
//! `BEGIN IMMEDIATE` transaction with the audit row and the archived pre-image.
//!
//! - Re-load the session inside the transaction and compare the version token; a change means a
//!   live agent wrote to it (reported as skipped).
//! - Append one `summary` item at `MAX(position) + 1` with the summary text (agent-db's header
//!   line removed: docker-agent shows it after `Session Summary: `). When the split put the
//!   latest instruction back, it is appended to the summary text verbatim, because docker-agent
//!   cannot replay a message that sits before the kept tail.
//! - From migration 21 on, `first_kept_entry` is the slice index of the first kept message (0
//!   for an empty tail: docker-agent then starts after the summary). Older generations cannot
//!   keep a tail; the planner gives them a zero tail budget, so the summary covers everything.
//! - `cost` 0, `model` (the summarizer's, else `agent-db`) and `usage_json` `''` where those
//!   columns exist; the current line's item columns (migrations 31–38) keep their defaults, as
//!   docker-agent's own summary insert leaves them. A tail that starts at an instruction update
//!   starts at the update's position; updates recorded at the first kept position are sent
//!   with the tail, and the self-check expects them. `sessions.input_tokens` becomes the estimated new context and
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

use rusqlite::{params, Connection, OptionalExtension};

use super::{check_schema, load_session, Schema, Session, Version};
use crate::error::{Error, Result, SqlContext};
use crate::message::{self, go_escape, Block};
use crate::store::commit::{Stage, Staged, Write};
use crate::store::pre_image::Cell;

/// docker-agent's typed proposal: append this summary and keep the tail from `tail_start`.
pub struct Proposal {
    pub id: String,
    pub version: Version,
    /// The loaded messages' slice indexes (-1: the synthetic summary).
    pub slots: Vec<i64>,
    /// The summary text (a compaction of an append-only store must be a summary).
    pub summary: Option<String>,
    /// Index (in the loaded messages) of the first message kept verbatim.
    pub tail_start: usize,
    /// The latest instruction the split put back, appended to the summary text.
    pub reinsert: Option<usize>,
    /// The estimated context after, for `sessions.input_tokens`.
    pub context_after: usize,
    /// The summarizer's model, for the item's `model` column.
    pub model: Option<String>,
}

/// What the apply step writes, decided inside the transaction.
pub struct Apply {
    schema: Schema,
    new_id: i64,
    position: i64,
    text: String,
    first_kept: i64,
    /// Where the tail docker-agent will send starts, in the loaded messages.
    sent_tail: usize,
    /// The legacy `sessions.messages` with the summary appended, when it is written.
    legacy: Option<String>,
    /// The active history before, for the self-check.
    before: String,
}

/// The line that introduces the latest instruction appended to a summary.
pub const INSTRUCTION_LINE: &str = "The user's latest instruction, verbatim:";

/// The summary text without agent-db's header line (docker-agent adds its own prefix).
pub fn strip_header(summary: &str) -> String {
    let t = summary.trim_start();
    match t.strip_prefix(crate::summary::SUMMARY_HEADER) {
        Some(rest) => rest.trim_start().to_string(),
        None => t.to_string(),
    }
}

/// The text of the instruction the split put back, as the summary will carry it.
fn instruction_text(raw_messages: &str, index: usize) -> Option<String> {
    let parts = message::split_raw(raw_messages).ok()?;
    let m = message::decode(&super::codec::CODEC, parts.get(index)?).ok()?;
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

impl Write for Proposal {
    type Version = Version;
    type Current = (Schema, Session);
    type Apply = Apply;

    fn planned(&self) -> &Version {
        &self.version
    }

    fn read(&self, tx: &Connection, path: &Path) -> Result<Option<(Version, (Schema, Session))>> {
        let schema = check_schema(tx, path)?;
        let s = crate::error::unless_gone(load_session(tx, path, &schema, &self.id))?;
        Ok(s.map(|s| (s.version.clone(), (schema, s))))
    }

    fn stage(&self, tx: &Connection, path: &Path, cur: (Schema, Session)) -> Result<Stage<Apply>> {
        let (schema, cur) = cur;
        let summary = self.summary.as_deref().ok_or_else(|| {
            Error::conversation(
                &self.id,
                "docker-agent stores are append-only: a compaction must be a summary",
            )
        })?;
        if self.slots != cur.slots || self.tail_start > cur.slots.len() {
            return Ok(Stage::Changed(
                "changed since read (its items moved); nothing written".into(),
            ));
        }
        let first_kept = self.first_kept(&schema, cur.slice_len)?;
        let text = self.summary_text(summary, &cur.raw_messages)?;
        let (new_id, position) = next_item(tx, path, &self.id)?;
        let legacy = schema
            .legacy_messages
            .then(|| legacy_with_summary(cur.legacy_messages.as_deref(), cur.slice_len, &text));
        let mut cells = vec![
            Cell::inserted_row("session_items", "id", new_id),
            Cell::new("sessions", "id", self.id.clone(), "input_tokens"),
            Cell::new("sessions", "id", self.id.clone(), "output_tokens"),
        ];
        if let Some(Ok(_)) = &legacy {
            cells.push(Cell::new("sessions", "id", self.id.clone(), "messages"));
        }
        let details = self.details(&schema, &cur, new_id, position, first_kept, &legacy);
        Ok(Stage::Ready(Staged {
            cells,
            details: Some(("docker_agent", details)),
            hashed: None,
            apply: Apply {
                schema,
                new_id,
                position,
                text,
                first_kept,
                sent_tail: self.sent_tail_start(first_kept),
                legacy: legacy.and_then(|l| l.ok()),
                before: cur.raw_messages,
            },
        }))
    }

    fn apply(&self, tx: &Connection, path: &Path, a: Apply) -> Result<()> {
        let model = self.model.clone().unwrap_or_else(|| "agent-db".into());
        let item = NewItem {
            id: a.new_id,
            session: &self.id,
            position: a.position,
            text: &a.text,
            first_kept: a.first_kept,
            model: &model,
        };
        insert_summary(tx, path, &a.schema, &item)?;
        tx.execute(
            "UPDATE sessions SET input_tokens = ?1, output_tokens = 0 WHERE id = ?2",
            params![self.context_after as i64, self.id],
        )
        .at(path)?;
        if let Some(m) = &a.legacy {
            tx.execute(
                "UPDATE sessions SET messages = ?1 WHERE id = ?2",
                params![m, self.id],
            )
            .at(path)?;
        }
        self_check(tx, path, &a.schema, self, a.sent_tail, &a.before)
    }
}

impl Proposal {
    /// The slice index of the first kept message (0: an empty tail, docker-agent then starts
    /// after the summary), or why this generation cannot express the kept tail.
    fn first_kept(&self, schema: &Schema, slice_len: usize) -> Result<i64> {
        if self.tail_start >= self.slots.len() {
            return Ok(0);
        }
        if !schema.keeps_tail() {
            return Err(Error::conversation(
                &self.id,
                format!(
                    "this docker-agent generation ({}) cannot keep a tail: it has no first_kept_entry (migration 21); \
                     the plan for such stores keeps no tail",
                    schema.describe()
                ),
            ));
        }
        let slot = self.slots[self.tail_start];
        // An instruction update is sent before the item at its position: the tail starts there.
        let first = super::read::update_position(slot).unwrap_or(slot);
        // docker-agent starts at first_kept_entry only when 0 < it < the summary's index (the
        // new summary's index is the slice length).
        if first <= 0 || first >= slice_len as i64 {
            return Err(Error::conversation(
                &self.id,
                format!("the kept tail would start at slice index {first}, which docker-agent cannot express"),
            ));
        }
        Ok(first)
    }

    /// Where the tail docker-agent will send starts, in the loaded messages: instruction updates
    /// recorded at the first kept position are sent with it, so when the planned tail starts at
    /// the message there, they (summarized too) are sent again before it.
    fn sent_tail_start(&self, first_kept: i64) -> usize {
        let mut start = self.tail_start.min(self.slots.len());
        if first_kept <= 0 {
            return start;
        }
        while start > 0 && super::read::update_position(self.slots[start - 1]) == Some(first_kept) {
            start -= 1;
        }
        start
    }

    /// The summary item's text: agent-db's header removed, the put-back instruction appended.
    fn summary_text(&self, summary: &str, raw_messages: &str) -> Result<String> {
        let text = strip_header(summary);
        let Some(i) = self.reinsert else {
            return Ok(text);
        };
        let instruction = instruction_text(raw_messages, i).ok_or_else(|| {
            Error::conversation(
                &self.id,
                format!("message {i} (the latest instruction) does not decode"),
            )
        })?;
        Ok(format!(
            "{}\n\n{INSTRUCTION_LINE}\n\n{instruction}",
            text.trim_end()
        ))
    }

    /// The audit row's `docker_agent` details.
    fn details(
        &self,
        schema: &Schema,
        cur: &Session,
        new_id: i64,
        position: i64,
        first_kept: i64,
        legacy: &Option<std::result::Result<String, String>>,
    ) -> serde_json::Value {
        let loaded = cur.slots.len();
        let mut d = serde_json::json!({
            "generation": schema.describe(),
            "max_migration": schema.max_migration,
            "summary_item_id": new_id,
            "summary_position": position,
            "summary_slice_index": cur.slice_len,
            "kept_tail": if schema.keeps_tail() {
                format!("{} message(s) from slice index {first_kept} (first_kept_entry)", loaded - self.tail_start)
            } else {
                "none: this generation has no first_kept_entry, so the summary covers the whole history".to_string()
            },
        });
        if schema.keeps_tail() {
            d["first_kept_entry"] = first_kept.into();
        }
        if self.reinsert.is_some() {
            d["latest_instruction"] = "appended to the summary text verbatim".into();
        }
        match legacy {
            Some(Ok(_)) => d["legacy_messages"] = "summary element appended".into(),
            Some(Err(why)) => d["legacy_messages"] = why.clone().into(),
            None => {}
        }
        d
    }
}

/// The new item's id (past `sqlite_sequence`'s high-water mark and every existing id) and its
/// position (`MAX(position) + 1` in the session).
fn next_item(tx: &Connection, path: &Path, session: &str) -> Result<(i64, i64)> {
    let position: i64 = tx
        .query_row(
            "SELECT COALESCE(MAX(position), -1) + 1 FROM session_items WHERE session_id = ?1",
            [session],
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
    Ok((seq.unwrap_or(0).max(max_id) + 1, position))
}

/// The summary item to insert.
#[derive(Clone, Copy)]
struct NewItem<'a> {
    id: i64,
    session: &'a str,
    position: i64,
    text: &'a str,
    first_kept: i64,
    model: &'a str,
}

fn insert_summary(tx: &Connection, path: &Path, schema: &Schema, item: &NewItem<'_>) -> Result<()> {
    let NewItem {
        id,
        session,
        position,
        text,
        first_kept,
        model,
    } = *item;
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
    sent_tail: usize,
    before: &str,
) -> Result<()> {
    let after = load_session(tx, path, schema, &p.id)?;
    let fail = |why: &str| {
        Err(Error::conversation(
            &p.id,
            format!("internal check failed, nothing written: {why}"),
        ))
    };
    let old = message::split_raw(before).map_err(|e| Error::decode(&p.id, e))?;
    let new = message::split_raw(&after.raw_messages).map_err(|e| Error::decode(&p.id, e))?;
    let tail: Vec<&str> = old[sent_tail..].iter().map(|r| r.get()).collect();
    let got: Vec<&str> = new.iter().skip(1).map(|r| r.get()).collect();
    if after.slots.first() != Some(&-1) {
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

    fn proposal(slots: Vec<i64>, tail_start: usize) -> Proposal {
        Proposal {
            id: "s".into(),
            version: Version {
                marker: String::new(),
                raw_digest: String::new(),
            },
            slots,
            summary: Some("x".into()),
            tail_start,
            reinsert: None,
            context_after: 0,
            model: None,
        }
    }

    fn current() -> Schema {
        Schema {
            max_migration: 38,
            first_kept_entry: true,
            ..Schema::default()
        }
    }

    #[test]
    fn instruction_updates_start_the_tail_at_their_position() {
        use super::super::read::update_slot;
        // summary, m2, update before 4, m4, m5 (slice of 6).
        let slots = vec![-1, 2, update_slot(4), 4, 5];
        // The tail starts at the update: first_kept_entry is its position, sent from there.
        let p = proposal(slots.clone(), 2);
        assert_eq!(p.first_kept(&current(), 6).unwrap(), 4);
        assert_eq!(p.sent_tail_start(4), 2);
        // The tail starts at the message the update precedes: docker-agent sends the update too.
        let p = proposal(slots.clone(), 3);
        assert_eq!(p.first_kept(&current(), 6).unwrap(), 4);
        assert_eq!(p.sent_tail_start(4), 2);
        // A later message: nothing extra.
        let p = proposal(slots.clone(), 4);
        assert_eq!(p.first_kept(&current(), 6).unwrap(), 5);
        assert_eq!(p.sent_tail_start(5), 4);
        // An empty tail.
        let p = proposal(slots, 5);
        assert_eq!(p.first_kept(&current(), 6).unwrap(), 0);
        // An update recorded after the last item cannot start a tail docker-agent sends.
        let p = proposal(vec![-1, 2, update_slot(6)], 2);
        assert!(p.first_kept(&current(), 6).is_err());
    }

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

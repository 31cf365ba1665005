//! Crush's proposal: a compaction written into `crush.db` the way Crush's own `Summarize`
//! writes one (`internal/agent/agent.go@37f36e93`), append-only, run by the shared protocol
//! (`store/commit.rs`) in one `BEGIN IMMEDIATE` transaction with the audit row and the archived
//! pre-image.
//!
//! - Re-load the session inside the transaction and compare the version token (every column of
//!   the session row and of its message rows, with storage classes).
//! - Insert one assistant message with `is_summary_message` 1, its `parts` a text part holding
//!   the summary (the latest instruction the split put back appended verbatim) and an
//!   `end_turn` finish part, as Crush's summary message is stored.
//! - Point `sessions.summary_message_id` at it. Crush loads from that message on, read as the
//!   user's; the kept tail follows it because of its `created_at`: one second before the
//!   tail's first message. Times are whole seconds, and rows of one second come back in rowid
//!   order (the new row's is the largest), so when the last summarized message and the first
//!   kept one share a second, every summarized message's `created_at` moves one second earlier
//!   (their order among themselves kept) to make room. With no tail, the summary is written at
//!   the later of now and the last message's second.
//! - `prompt_tokens` becomes the estimated context after and `completion_tokens` 0, so Crush's
//!   auto-summarize check (`prompt_tokens + completion_tokens` against the window) sees the
//!   compacted size; `message_count` + 1 and `updated_at` now, as Crush's triggers would set
//!   them. The triggers do not run during the write (agent-db writes those cells itself and
//!   archives them), so a restore puts every cell back as it was.
//! - Before committing, the session is loaded once more by Crush's rule and must be the
//!   summary followed by exactly the planned tail.

use std::path::Path;

use rusqlite::config::DbConfig;
use rusqlite::{params, Connection, OptionalExtension};
use sha2::{Digest, Sha256};

use super::codec;
use super::read::{load_session, MessageRow, Session};
use super::schema::{check_schema, Schema};
use crate::error::{Error, Result, SqlContext};
use crate::message::{self, Block};
use crate::store::commit::{Stage, Staged, Write};
use crate::store::pre_image::Cell;

/// The line that introduces the latest instruction appended to a summary.
pub const INSTRUCTION_LINE: &str = "The user's latest instruction, verbatim:";

/// Crush's typed proposal: a summary, and the tail kept from `tail_start`.
pub struct Proposal {
    pub id: String,
    pub version: String,
    /// Every message row at load, in Crush's order.
    pub rows: Vec<MessageRow>,
    /// Where the loaded history starts in `rows`.
    pub start: usize,
    pub summary: Option<String>,
    /// Index (in the loaded messages) of the first message kept verbatim.
    pub tail_start: usize,
    pub reinsert: Option<usize>,
    pub context_after: usize,
}

/// What the apply step writes.
pub struct Apply {
    schema: Schema,
    new_id: String,
    parts: String,
    at: i64,
    now: i64,
    /// Summarized rows whose `created_at` moves one second earlier.
    shifted: Vec<String>,
    /// The ids of the kept tail, for the self-check.
    tail: Vec<String>,
}

/// A Crush-shaped message id (a UUID v4 layout), unique per session and version.
fn message_id(session: &str, version: &str) -> String {
    let mut h = Sha256::new();
    h.update(format!("{session}\0{version}\0agent-db summary").as_bytes());
    let mut b: [u8; 16] = h.finalize()[..16].try_into().expect("16 bytes");
    b[6] = (b[6] & 0x0F) | 0x40;
    b[8] = (b[8] & 0x3F) | 0x80;
    let x = hex::encode(b);
    format!(
        "{}-{}-{}-{}-{}",
        &x[0..8],
        &x[8..12],
        &x[12..16],
        &x[16..20],
        &x[20..32]
    )
}

/// The text of loaded message `index` (an instruction put back), with a note for images.
fn instruction_text(raw_messages: &str, index: usize) -> Option<String> {
    let parts = message::split_raw(raw_messages).ok()?;
    let m = message::decode(&codec::CODEC, parts.get(index)?).ok()?;
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

/// Triggers off on `conn` until dropped (then back as they were).
struct NoTriggers<'c> {
    conn: &'c Connection,
    was: bool,
}

impl<'c> NoTriggers<'c> {
    fn new(conn: &'c Connection, path: &Path) -> Result<Self> {
        let was = conn
            .db_config(DbConfig::SQLITE_DBCONFIG_ENABLE_TRIGGER)
            .at(path)?;
        conn.set_db_config(DbConfig::SQLITE_DBCONFIG_ENABLE_TRIGGER, false)
            .at(path)?;
        Ok(NoTriggers { conn, was })
    }
}

impl Drop for NoTriggers<'_> {
    fn drop(&mut self) {
        let _ = self
            .conn
            .set_db_config(DbConfig::SQLITE_DBCONFIG_ENABLE_TRIGGER, self.was);
    }
}

impl Proposal {
    /// When the summary is written, the summarized rows whose `created_at` moves one second
    /// earlier to make room before the tail's first message, and now (Unix seconds).
    fn summary_time(&self, rows: &[MessageRow], cut: usize) -> Result<(i64, Vec<String>, i64)> {
        let mut times = Vec::with_capacity(rows.len());
        for r in rows {
            match r.created_at {
                Some(t) => times.push(t),
                None => {
                    return Err(Error::conversation(
                        &self.id,
                        format!(
                            "message {}: created_at is not an integer (Unix seconds), so no summary time keeps Crush's order; nothing written",
                            r.id
                        ),
                    ))
                }
            }
        }
        let now = crate::gotime::now().timestamp();
        let head_max = times[..cut].iter().copied().max();
        let (at, shifted) = match times.get(cut) {
            None => (head_max.map_or(now, |h| h.max(now)), Vec::new()),
            Some(&first_kept) => {
                let at = first_kept.saturating_sub(1);
                let shift = head_max.is_some_and(|h| h >= first_kept);
                let shifted = if shift {
                    rows[..cut].iter().map(|r| r.id.clone()).collect()
                } else {
                    Vec::new()
                };
                (at, shifted)
            }
        };
        Ok((at, shifted, now))
    }

    /// The summary's text, with the instruction the split put back appended verbatim.
    fn summary_text(&self, summary: &str, raw_messages: &str) -> Result<String> {
        let mut text = summary.trim_end().to_string();
        if let Some(i) = self.reinsert {
            let instruction = instruction_text(raw_messages, i).ok_or_else(|| {
                Error::conversation(&self.id, "the instruction to put back cannot be read")
            })?;
            text.push_str(&format!("\n\n{INSTRUCTION_LINE}\n{instruction}"));
        }
        Ok(text)
    }

    /// The cells the write changes: the session's counters, the shifted rows' times, the new row.
    fn cells(&self, new_id: &str, shifted: &[String]) -> Vec<Cell> {
        let mut cells = vec![
            Cell::new("sessions", "id", self.id.clone(), "summary_message_id"),
            Cell::new("sessions", "id", self.id.clone(), "prompt_tokens"),
            Cell::new("sessions", "id", self.id.clone(), "completion_tokens"),
            Cell::new("sessions", "id", self.id.clone(), "message_count"),
            Cell::new("sessions", "id", self.id.clone(), "updated_at"),
        ];
        for id in shifted {
            cells.push(Cell::new("messages", "id", id.clone(), "created_at"));
        }
        cells.push(Cell::inserted_row("messages", "id", new_id.to_string()));
        cells
    }
}

impl Write for Proposal {
    type Version = String;
    type Current = (Schema, Session);
    type Apply = Apply;

    fn planned(&self) -> &String {
        &self.version
    }

    fn read(&self, tx: &Connection, path: &Path) -> Result<Option<(String, (Schema, Session))>> {
        let schema = check_schema(tx, path)?;
        let s = crate::error::unless_gone(load_session(tx, path, &self.id))?;
        Ok(s.map(|s| (s.version.clone(), (schema, s))))
    }

    fn stage(&self, _tx: &Connection, path: &Path, cur: (Schema, Session)) -> Result<Stage<Apply>> {
        let (schema, cur) = cur;
        let fail = |why: String| Err(Error::conversation(&self.id, why));
        let Some(summary) = self.summary.as_deref() else {
            return fail("Crush stores are append-only: a compaction must be a summary".into());
        };
        if !schema.writable() {
            return fail(format!(
                "this Crush file ({}) predates 20250810000000_add_is_summary_message: Crush cannot tell a summary there, so agent-db does not write one; nothing written",
                super::migration_name(schema.version)
            ));
        }
        let loaded = cur.rows.len() - cur.start;
        if cur.rows != self.rows || cur.start != self.start || self.tail_start > loaded {
            return Ok(Stage::Changed(
                "changed since read (its messages moved); nothing written".into(),
            ));
        }
        let cut = self.start + self.tail_start;
        let (at, shifted, now) = self.summary_time(&cur.rows, cut)?;
        let text = self.summary_text(summary, &cur.raw_messages)?;
        let new_id = message_id(&self.id, &self.version);
        let cells = self.cells(&new_id, &shifted);
        let details = serde_json::json!({
            "summary_message_id": new_id,
            "summary_created_at": at,
            "summarized_rows_moved_one_second_earlier": shifted.len(),
        });
        let _ = path;
        Ok(Stage::Ready(Staged {
            cells,
            details: Some(("crush", details)),
            hashed: None,
            apply: Apply {
                schema,
                parts: codec::text_parts(&text, Some(at)),
                new_id,
                at,
                now,
                shifted,
                tail: cur.rows[cut..].iter().map(|r| r.id.clone()).collect(),
            },
        }))
    }

    fn apply(&self, tx: &Connection, path: &Path, a: Apply) -> Result<()> {
        {
            let _off = NoTriggers::new(tx, path)?;
            for id in &a.shifted {
                tx.execute(
                    "UPDATE messages SET created_at = created_at - 1 WHERE id = ?1",
                    [id],
                )
                .at(path)?;
            }
            let mut cols = vec![
                "id",
                "session_id",
                "role",
                "parts",
                "is_summary_message",
                "created_at",
                "updated_at",
            ];
            let mut vals: Vec<rusqlite::types::Value> = vec![
                a.new_id.clone().into(),
                self.id.clone().into(),
                "assistant".to_string().into(),
                a.parts.clone().into(),
                1i64.into(),
                a.at.into(),
                a.at.into(),
            ];
            if a.schema.message_has("finished_at") {
                cols.push("finished_at");
                vals.push(a.at.into());
            }
            // Crush's summary carries the session's model and provider (its large model),
            // whoever wrote the text: they name the window the session runs in.
            for col in ["model", "provider"] {
                if a.schema.message_has(col) {
                    let latest: Option<String> = tx
                        .query_row(
                            &format!(
                                "SELECT {col} FROM messages WHERE session_id = ?1 AND typeof({col}) = 'text' AND {col} != ''
                                 ORDER BY created_at DESC, rowid DESC LIMIT 1"
                            ),
                            [&self.id],
                            |r| r.get(0),
                        )
                        .optional()
                        .at(path)?;
                    cols.push(col);
                    vals.push(match latest {
                        Some(v) => v.into(),
                        None => rusqlite::types::Value::Null,
                    });
                }
            }
            let marks: Vec<String> = (1..=cols.len()).map(|i| format!("?{i}")).collect();
            tx.execute(
                &format!(
                    "INSERT INTO messages ({}) VALUES ({})",
                    cols.join(", "),
                    marks.join(", ")
                ),
                rusqlite::params_from_iter(vals),
            )
            .at(path)?;
            tx.execute(
                "UPDATE sessions SET summary_message_id = ?1, prompt_tokens = ?2, completion_tokens = 0,
                   message_count = message_count + 1, updated_at = ?3 WHERE id = ?4",
                params![a.new_id, self.context_after as i64, a.now, self.id],
            )
            .at(path)?;
        }
        self_check(tx, path, &self.id, &a.new_id, &a.tail)
    }
}

/// Load the session by Crush's rule: it must be the summary, then exactly the kept tail.
fn self_check(
    tx: &Connection,
    path: &Path,
    id: &str,
    summary: &str,
    tail: &[String],
) -> Result<()> {
    let s = load_session(tx, path, id)?;
    let sent: Vec<&str> = s.rows[s.start..].iter().map(|r| r.id.as_str()).collect();
    let want: Vec<&str> = std::iter::once(summary)
        .chain(tail.iter().map(String::as_str))
        .collect();
    if !s.summarized || sent != want {
        return Err(Error::conversation(
            id,
            format!(
                "self-check failed: Crush would load {} message(s) from {:?}, not the summary and the {} kept; nothing written",
                sent.len(),
                sent.first(),
                tail.len()
            ),
        ));
    }
    Ok(())
}

//! goose's proposal: a compaction written the way goose's own compaction leaves a session
//! (docs/stores.md, "goose"), in the shared protocol's one `BEGIN IMMEDIATE` transaction.
//!
//! - The session is loaded again inside the transaction and its version compared.
//! - Every summarized (head) row stays where it is; only the `agentVisible` key of its
//!   `metadata_json` becomes false (`codec::hide_from_agent`).
//! - Inserted: the summary (role `user`, one text item, `agent_only`), goose's continuation
//!   (role `assistant`, `agent_only`) and, when the split put the latest instruction back, a
//!   copy of it visible to user and agent as goose's own (its `content_json` copied by SQLite), with fresh `msg_<uuid>`
//!   ids where the column exists. They take `created_timestamp` one second before the first
//!   kept row's (and its `timestamp` one second earlier), so goose's `ORDER BY
//!   created_timestamp, id` puts them before the kept tail without moving a kept row: the rows
//!   they may overtake are all hidden now. With no tail they take the session's latest values.
//! - The kept tail's rows are not touched at all (id, `message_id`, bytes, timestamps).
//! - `sessions`: `total_tokens = input_tokens = ` the estimated new context, `output_tokens`
//!   and the cache columns NULL, `updated_at` now, as goose writes after compacting.
//! - Archived: every changed cell, every inserted row, and `sqlite_sequence`'s `messages` row,
//!   so a restore gives the file back cell for cell.
//! - A prune (no summary) hides whole tool pairs the same way and inserts goose-style
//!   agent-only notes in their place (`prune.rs` places them); the same token columns and
//!   archive rules apply.
//! - Before committing, the session is loaded again as goose would: exactly the rows planned
//!   (the summary, the continuation, the copy if any, then the kept rows; or the pruned order).

use std::path::Path;

use rusqlite::{params, Connection, OptionalExtension};
use sha2::{Digest, Sha256};

use super::codec;
use super::read::{load_session, second_before, Row, Session};
use super::schema::Schema;
use crate::error::{Error, Result, SqlContext};
use crate::store::commit::{Stage, Staged, Write};
use crate::store::pre_image::Cell;

/// goose's typed proposal.
pub struct Proposal {
    pub id: String,
    pub version: String,
    /// The agent-visible rows the plan was made on.
    pub rows: Vec<Row>,
    pub summary: Option<String>,
    pub tail_start: usize,
    pub reinsert: Option<usize>,
    pub context_after: usize,
    /// The new history (head and tail envelopes); a prune's edits are read from it.
    pub history: String,
}

/// A row agent-db inserts.
struct NewRow {
    id: i64,
    message_id: Option<String>,
    role: String,
    /// The content, or the row whose `content_json` is copied.
    content: Result2,
    created: i64,
    timestamp: Option<String>,
    /// `metadata_json`: `codec::AGENT_ONLY`, or `codec::VISIBLE` for the put-back copy.
    metadata: &'static str,
}

enum Result2 {
    Text(String),
    CopyOf(i64),
}

/// The message rows a compaction changes, and what goose loads afterwards.
struct Rows {
    hides: Vec<(i64, String)>,
    inserts: Vec<NewRow>,
    /// The row ids goose loads after the write, in order.
    expected: Vec<i64>,
    context_after: usize,
    details: serde_json::Value,
}

/// What the apply step writes.
pub struct Apply {
    schema: Schema,
    rows: Rows,
    updated_at: String,
}

impl Write for Proposal {
    type Version = String;
    type Current = Session;
    type Apply = Apply;

    fn planned(&self) -> &String {
        &self.version
    }

    fn read(&self, tx: &Connection, path: &Path) -> Result<Option<(String, Session)>> {
        let s = crate::error::unless_gone(load_session(tx, path, &self.id))?;
        Ok(s.map(|s| (s.version.clone(), s)))
    }

    fn stage(&self, tx: &Connection, path: &Path, cur: Session) -> Result<Stage<Apply>> {
        if !cur.schema.writable() {
            return Err(Error::conversation(
                &self.id,
                format!(
                    "goose schema version {} has no messages.metadata_json (added in v3), so goose could not tell \
                     summarized messages from the summary; agent-db lists such sessions but does not compact them",
                    cur.schema.version
                ),
            ));
        }
        if cur.rows != self.rows || self.tail_start > cur.rows.len() {
            return Ok(Stage::Changed(
                "changed since read (its rows moved); nothing written".into(),
            ));
        }
        let rows = match self.summary.as_deref() {
            Some(summary) => self.summarized(tx, path, &cur, summary)?,
            None => match self.pruned(tx, path, &cur)? {
                Some(rows) => rows,
                None => {
                    return Ok(Stage::Changed(
                        "nothing to prune: every tool pair before the kept tail shares its second with \
                         the messages around it, so goose's order has no place for its note; nothing written"
                            .into(),
                    ))
                }
            },
        };
        let mut cells: Vec<Cell> = rows
            .hides
            .iter()
            .map(|(id, _)| Cell::new("messages", "id", *id, "metadata_json"))
            .collect();
        cells.extend(
            rows.inserts
                .iter()
                .map(|r| Cell::inserted_row("messages", "id", r.id)),
        );
        for c in session_columns(&cur.schema) {
            cells.push(Cell::new("sessions", "id", self.id.clone(), c));
        }
        cells.push(Cell::new(
            "sqlite_sequence",
            "name",
            "messages".to_string(),
            "seq",
        ));
        let mut details = rows.details.clone();
        details["schema_version"] = cur.schema.version.into();
        details["hidden_rows"] = rows.hides.len().into();
        details["inserted_rows"] = rows.inserts.iter().map(|r| r.id).collect::<Vec<_>>().into();
        let updated_at = crate::gotime::now()
            .with_timezone(&chrono::Utc)
            .format("%Y-%m-%d %H:%M:%S")
            .to_string();
        Ok(Stage::Ready(Staged {
            cells,
            details: Some(("goose", details)),
            hashed: None,
            apply: Apply {
                schema: cur.schema,
                rows,
                updated_at,
            },
        }))
    }

    fn apply(&self, tx: &Connection, path: &Path, a: Apply) -> Result<()> {
        for (id, meta) in &a.rows.hides {
            tx.execute(
                "UPDATE messages SET metadata_json = ?1 WHERE id = ?2",
                params![meta, id],
            )
            .at(path)?;
        }
        for r in &a.rows.inserts {
            insert_row(tx, path, &a.schema, &self.id, r)?;
        }
        let mut set = vec![
            "total_tokens = ?1",
            "input_tokens = ?1",
            "output_tokens = NULL",
            "updated_at = ?2",
        ];
        if a.schema.session_has("cache_read_tokens") {
            set.push("cache_read_tokens = NULL");
        }
        if a.schema.session_has("cache_write_tokens") {
            set.push("cache_write_tokens = NULL");
        }
        tx.execute(
            &format!("UPDATE sessions SET {} WHERE id = ?3", set.join(", ")),
            params![a.rows.context_after as i64, a.updated_at, self.id],
        )
        .at(path)?;
        self.self_check(tx, path, &a)
    }
}

/// The `sessions` columns a compaction writes.
fn session_columns(schema: &Schema) -> Vec<&'static str> {
    let mut c = vec![
        "total_tokens",
        "input_tokens",
        "output_tokens",
        "updated_at",
    ];
    for x in ["cache_read_tokens", "cache_write_tokens"] {
        if schema.session_has(x) {
            c.push(x);
        }
    }
    c
}

/// A `msg_<uuid-v4 shaped>` id, unique per session, version and position.
fn message_id(session: &str, version: &str, n: usize) -> String {
    let mut h = Sha256::new();
    h.update(format!("{session}\0{version}\0{n}\0agent-db").as_bytes());
    let mut b: [u8; 16] = h.finalize()[..16].try_into().expect("16 bytes");
    b[6] = (b[6] & 0x0F) | 0x40;
    b[8] = (b[8] & 0x3F) | 0x80;
    let x = hex::encode(b);
    format!(
        "msg_{}-{}-{}-{}-{}",
        &x[0..8],
        &x[8..12],
        &x[12..16],
        &x[16..20],
        &x[20..32]
    )
}

impl Proposal {
    /// A summary's rows: the head hidden, the summary, the continuation and the copy of the
    /// latest instruction inserted before the kept tail.
    fn summarized(
        &self,
        tx: &Connection,
        path: &Path,
        cur: &Session,
        summary: &str,
    ) -> Result<Rows> {
        let hides: Vec<(i64, String)> = cur.rows[..self.tail_start]
            .iter()
            .map(|r| (r.id, codec::hide_from_agent(r.metadata.as_deref())))
            .collect();
        let (created, timestamp) = match cur.rows.get(self.tail_start) {
            Some(t0) => (t0.created.saturating_sub(1), t0.timestamp.as_deref().map(second_before)),
            None => tx
                .query_row(
                    "SELECT MAX(created_timestamp), MAX(timestamp) FROM messages WHERE session_id = ?1",
                    [&self.id],
                    |r| Ok((r.get::<_, Option<i64>>(0)?.unwrap_or(0), r.get::<_, Option<String>>(1).ok().flatten())),
                )
                .at(path)?,
        };
        let mut contents = vec![
            ("user", Result2::Text(codec::text_content(summary))),
            (
                "assistant",
                Result2::Text(codec::text_content(codec::CONTINUATION)),
            ),
        ];
        if let Some(i) = self.reinsert {
            let src = cur.rows.get(i).ok_or_else(|| {
                Error::conversation(
                    &self.id,
                    format!("message {i} (the latest instruction) is not loaded"),
                )
            })?;
            contents.push(("user", Result2::CopyOf(src.id)));
        }
        let base = next_id(tx, path)?;
        let with_ids = cur.schema.message_has("message_id");
        let inserts: Vec<NewRow> = contents
            .into_iter()
            .enumerate()
            .map(|(n, (role, content))| NewRow {
                id: base + n as i64,
                message_id: with_ids.then(|| message_id(&self.id, &self.version, n)),
                role: role.to_string(),
                metadata: if matches!(content, Result2::CopyOf(_)) {
                    codec::VISIBLE
                } else {
                    codec::AGENT_ONLY
                },
                content,
                created,
                timestamp: timestamp.clone(),
            })
            .collect();
        let mut expected: Vec<i64> = inserts.iter().map(|r| r.id).collect();
        expected.extend(cur.rows[self.tail_start..].iter().map(|r| r.id));
        Ok(Rows {
            hides,
            inserts,
            expected,
            context_after: self.context_after,
            details: serde_json::json!({
                "kept_rows": cur.rows.len() - self.tail_start,
                "latest_instruction": self.reinsert.map(|_| "a copy after the continuation, visible to user and agent"),
            }),
        })
    }

    /// A prune's rows (`prune.rs`): tool pairs hidden, one agent-only note each in their place.
    fn pruned(&self, tx: &Connection, path: &Path, cur: &Session) -> Result<Option<Rows>> {
        let Some(e) = super::prune::edits(
            &self.id,
            cur,
            &self.history,
            self.tail_start,
            self.context_after,
        )?
        else {
            return Ok(None);
        };
        let meta: std::collections::HashMap<i64, Option<&str>> = cur
            .rows
            .iter()
            .map(|r| (r.id, r.metadata.as_deref()))
            .collect();
        let hides = e
            .hide
            .iter()
            .map(|id| (*id, codec::hide_from_agent(meta[id])))
            .collect();
        let base = next_id(tx, path)?;
        let with_ids = cur.schema.message_has("message_id");
        let inserts: Vec<NewRow> = e
            .insert
            .into_iter()
            .enumerate()
            .map(|(n, r)| NewRow {
                id: base + n as i64,
                message_id: with_ids.then(|| message_id(&self.id, &self.version, n)),
                role: r.role,
                content: Result2::Text(r.content),
                created: r.created,
                timestamp: r.timestamp,
                metadata: codec::AGENT_ONLY,
            })
            .collect();
        let expected = e
            .order
            .iter()
            .map(|o| match o {
                Ok(id) => *id,
                Err(n) => base + *n as i64,
            })
            .collect();
        Ok(Some(Rows {
            hides,
            inserts,
            expected,
            context_after: e.context_after,
            details: serde_json::json!({
                "pruned": "tool pairs hidden from the agent, an agent_only note in place of each",
                "left_visible": e.left,
            }),
        }))
    }

    /// The session as goose now loads it: exactly the rows planned, in the planned order.
    fn self_check(&self, tx: &Connection, path: &Path, a: &Apply) -> Result<()> {
        let after = load_session(tx, path, &self.id)?;
        let got: Vec<i64> = after.rows.iter().map(|r| r.id).collect();
        if got != a.rows.expected {
            return Err(Error::conversation(
                &self.id,
                format!(
                    "after the write goose would load rows {got:?}, not {:?}; nothing written",
                    a.rows.expected
                ),
            ));
        }
        Ok(())
    }
}

/// The id the next inserted `messages` row gets (AUTOINCREMENT: past `sqlite_sequence`).
fn next_id(tx: &Connection, path: &Path) -> Result<i64> {
    let seq: Option<i64> = tx
        .query_row(
            "SELECT seq FROM sqlite_sequence WHERE name = 'messages'",
            [],
            |r| r.get(0),
        )
        .optional()
        .at(path)?;
    let max_id: i64 = tx
        .query_row("SELECT COALESCE(MAX(id), 0) FROM messages", [], |r| {
            r.get(0)
        })
        .at(path)?;
    Ok(seq.unwrap_or(0).max(max_id) + 1)
}

fn insert_row(
    tx: &Connection,
    path: &Path,
    schema: &Schema,
    session: &str,
    r: &NewRow,
) -> Result<()> {
    let mut cols = vec![
        "id",
        "session_id",
        "role",
        "content_json",
        "created_timestamp",
        "metadata_json",
    ];
    let mut vals = vec!["?1", "?2", "?3", "?4", "?5", "?6"];
    if schema.message_has("message_id") {
        cols.push("message_id");
        vals.push("?7");
    }
    if schema.message_has("timestamp") && r.timestamp.is_some() {
        cols.push("timestamp");
        vals.push("?8");
    }
    let (content_sql, text, src) = match &r.content {
        Result2::Text(t) => ("?4", Some(t.as_str()), None),
        Result2::CopyOf(id) => (
            "(SELECT content_json FROM messages WHERE id = ?9)",
            None,
            Some(*id),
        ),
    };
    vals[3] = content_sql;
    let sql = format!(
        "INSERT INTO messages ({}) SELECT {}",
        cols.join(", "),
        vals.join(", ")
    );
    let mut st = tx.prepare(&sql).at(path)?;
    let all: [(&str, &dyn rusqlite::ToSql); 9] = [
        ("?1", &r.id),
        ("?2", &session),
        ("?3", &r.role),
        ("?4", &text),
        ("?5", &r.created),
        ("?6", &r.metadata),
        ("?7", &r.message_id),
        ("?8", &r.timestamp),
        ("?9", &src),
    ];
    for (name, v) in all {
        if let Some(i) = st.parameter_index(name).at(path)? {
            st.raw_bind_parameter(i, v).at(path)?;
        }
    }
    st.raw_execute().at(path)?;
    Ok(())
}

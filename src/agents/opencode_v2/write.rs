//! opencode 2.x's proposal, in the shared protocol's one `BEGIN IMMEDIATE` transaction.
//!
//! opencode 2.x records a compaction as one `session_message` row of type `compaction`
//! appended after every other row (`seq` = the session's largest + 1) whose `data` is
//! `{"status":"completed","reason":…,"summary":…,"recent":…,"time":{"created":ms}}`: `summary`
//! the summary text, `recent` the recent conversation kept verbatim beside it, as text. Its
//! loader then sends that row (one `<conversation-checkpoint>` user message, `message.ts` and
//! `runner/to-llm-message.ts`, as `session.compaction.ended` projects it) and the rows after
//! it, and none before.
//! agent-db appends the same row (`reason` `"manual"`, as a user-requested `/compact`), its
//! `recent` the kept tail rendered as text (the latest instruction first when the split put it
//! back), and sets `session_v2.time_updated`. Nothing is deleted or rewritten, so `prune` is
//! not offered. Archived: the inserted row and the changed `time_updated` cell.

use std::path::Path;

use rusqlite::{params, Connection};
use serde_json::json;

use super::read::{load_session, Session};
use super::schema::check_writable;
use crate::error::{Error, Result, SqlContext};
use crate::message::{self, Block, Role};
use crate::store::commit::{Stage, Staged, Write};
use crate::store::pre_image::Cell;

/// opencode 2.x's typed proposal.
pub struct Proposal {
    pub id: String,
    pub version: String,
    /// The summary text (`None`: a prune, which 2.x storage cannot hold).
    pub summary: Option<String>,
    /// The kept tail as text (`recent`), or why it could not be rendered.
    pub recent: std::result::Result<String, String>,
}

/// What the apply step writes.
pub struct Apply {
    row_id: String,
    seq: i64,
    time: i64,
    data: String,
}

/// The loaded messages `from..` (and `first`, the put-back instruction, before them) as the
/// text opencode keeps in a compaction's `recent`, in the form opencode's v1→v2 importer
/// writes it (`serializeRecent`): `[User]: text`, `[Assistant]: text`, `[Assistant reasoning]:
/// text`, joined by blank lines; tool calls and results are not carried.
pub fn render_recent(
    loaded: &str,
    first: Option<usize>,
    from: usize,
) -> std::result::Result<String, message::DecodeError> {
    let raws = message::split_raw(loaded)?;
    let picks = first
        .filter(|i| *i < from)
        .into_iter()
        .chain(from..raws.len());
    let mut items: Vec<String> = Vec::new();
    for i in picks {
        let Some(raw) = raws.get(i) else { continue };
        let m = message::decode(&crate::agents::opencode_family::codec::CODEC, raw)?;
        match m.role {
            Role::User if !m.has_tool_results() => items.push(format!("[User]: {}", m.text())),
            Role::Assistant => {
                for b in &m.blocks {
                    match b {
                        Block::Text { text } => items.push(format!("[Assistant]: {text}")),
                        Block::Thinking { text, .. } if !text.is_empty() => {
                            items.push(format!("[Assistant reasoning]: {text}"))
                        }
                        _ => {}
                    }
                }
            }
            _ => {}
        }
    }
    Ok(items.join("\n\n"))
}

impl Write for Proposal {
    type Version = String;
    type Current = Session;
    type Apply = Apply;

    fn planned(&self) -> &String {
        &self.version
    }

    fn read(&self, tx: &Connection, path: &Path) -> Result<Option<(String, Session)>> {
        check_writable(tx, path)?;
        let s = crate::error::unless_gone(load_session(tx, path, &self.id))?;
        Ok(s.map(|s| (s.version.clone(), s)))
    }

    fn stage(&self, tx: &Connection, path: &Path, cur: Session) -> Result<Stage<Apply>> {
        if !crate::agents::opencode_family::pending_reverts(tx, path, "session_v2", Some(&self.id))?
            .is_empty()
        {
            return Ok(Stage::Changed(
                crate::agents::opencode_family::REVERT_PENDING.into(),
            ));
        }
        let Some(summary) = &self.summary else {
            return Ok(Stage::Changed(
                "opencode 2.x storage keeps no rewritable tool outputs; prune is not available"
                    .into(),
            ));
        };
        let recent = self.recent.as_ref().map_err(|e| {
            Error::conversation(&self.id, format!("the kept tail cannot be rendered: {e}"))
        })?;
        // Right after the newest row (not the wall clock): the session keeps its place in the
        // lists ordered by `time_updated` (as for 1.x).
        let time = cur.max_time + 1;
        let seq = cur.max_seq + 1;
        let row_id = crate::agents::opencode_family::ascending_id(
            "msg",
            time,
            1,
            &format!("{}\u{0}{}\u{0}{summary}", self.id, self.version),
        );
        let data = json!({
            "status": "completed",
            "reason": "manual",
            "summary": summary,
            "recent": recent,
            "time": {"created": time},
        })
        .to_string();
        let cells = vec![
            Cell::inserted_row("session_message", "id", row_id.clone()),
            Cell::new("session_v2", "id", self.id.clone(), "time_updated"),
        ];
        let details = json!({
            "storage": "2.x",
            "compaction_row": row_id,
            "seq": seq,
        });
        Ok(Stage::Ready(Staged {
            cells,
            details: Some(("opencode", details)),
            hashed: None,
            apply: Apply {
                row_id,
                seq,
                time,
                data,
            },
        }))
    }

    fn apply(&self, tx: &Connection, path: &Path, a: Apply) -> Result<()> {
        tx.execute(
            "INSERT INTO session_message (id, session_id, type, seq, time_created, time_updated, data) \
             VALUES (?1, ?2, 'compaction', ?3, ?4, ?4, ?5)",
            params![a.row_id, self.id, a.seq, a.time, a.data],
        )
        .at(path)?;
        tx.execute(
            "UPDATE session_v2 SET time_updated = MAX(time_updated, ?1) WHERE id = ?2",
            params![a.time, self.id],
        )
        .at(path)?;
        // What opencode loads now starts at the new row.
        let after = load_session(tx, path, &self.id)?;
        let loaded = message::split_raw(&after.raw_messages)
            .map_err(|e| Error::decode(&self.id, e))?
            .len();
        if loaded != 1 {
            return Err(Error::conversation(
                &self.id,
                format!("after the write opencode would load {loaded} messages, not the compaction row alone"),
            ));
        }
        Ok(())
    }
}

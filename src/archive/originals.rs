//! The original history of a conversation agent-db compacted before, read back from the
//! archive, so a re-compaction can summarize the originals instead of its own earlier summary.
//!
//! Every unrestored compaction of the conversation has a pre-image, the history the agent
//! loaded before it: the first one's the history as it was, each later one's [earlier summary,
//! kept tail, new messages]. This module hands those pre-images over in order, with how many
//! leading messages of each the compaction before it wrote (so the caller skips them); the store
//! kind rebuilds each from its archive and live rows
//! ([`crate::store::kind::Adapter::archived_history`]). Decoding is the caller's (the
//! store's message codec, through [`crate::message`]).

use rusqlite::params;

use crate::error::{Result, SqlContext};
use crate::store::Store;

/// One compaction's archived history.
#[derive(Debug, Clone)]
pub struct PreImage {
    /// The compaction's audit id.
    pub compaction_id: i64,
    /// The history before it, as a JSON array of the store's message JSON.
    pub history: String,
    /// How many leading messages of `history` the compaction before it wrote (its summary, the
    /// instruction it put back and the tail it kept): 0 for the first.
    pub written_before: usize,
    /// How many leading messages of `history` were the agent's own summary, where only the
    /// store can tell ([`crate::store::kind::Adapter::archived_agent_summary`]).
    pub agent_summary: usize,
}

/// What the archive holds of a conversation's original history.
#[derive(Debug, Clone)]
pub enum Originals {
    /// agent-db never compacted it (or every compaction was restored).
    None,
    /// The pre-images, oldest first, and how many leading messages of the current history the
    /// newest compaction wrote.
    Found {
        pre_images: Vec<PreImage>,
        written_last: usize,
    },
    /// It was compacted before, but the originals cannot be read back: why.
    Unavailable(String),
}

impl Store {
    /// The archived original history of conversation `id` ([`Originals`]).
    pub fn originals(&self, id: &str) -> Result<Originals> {
        let (conn, path) = (&self.conn, self.path.as_path());
        if !crate::store::agent_tables::present(conn).at(path)? {
            return Ok(Originals::None);
        }
        let mut stmt = conn
            .prepare(
                "SELECT id, messages_after, archive_pruned_at IS NOT NULL FROM agent_db_compactions
                 WHERE conversation_id = ?1 AND store_kind = ?2 AND restored_at IS NULL ORDER BY id",
            )
            .at(path)?;
        let rows: Vec<(i64, i64, bool)> = stmt
            .query_map(params![id, self.kind.name()], |r| {
                Ok((r.get(0)?, r.get(1)?, r.get(2)?))
            })
            .at(path)?
            .collect::<std::result::Result<_, _>>()
            .at(path)?;
        let Some(&(_, last_after, _)) = rows.last() else {
            return Ok(Originals::None);
        };
        if let Some((pruned, ..)) = rows.iter().find(|r| r.2) {
            return Ok(Originals::Unavailable(format!(
                "the archive of compaction {pruned} was pruned (prune-archive)"
            )));
        }
        let mut pre_images = Vec::with_capacity(rows.len());
        let mut written_before = 0;
        for (cid, after, _) in rows {
            let read = self.read();
            let Some(history) = self.kind.adapter().archived_history(&read, id, cid)? else {
                return Ok(Originals::Unavailable(format!(
                    "the archive of compaction {cid} holds no history agent-db reads back"
                )));
            };
            let agent_summary = self.kind.adapter().archived_agent_summary(&read, id, cid)?;
            pre_images.push(PreImage {
                compaction_id: cid,
                history,
                written_before,
                agent_summary,
            });
            written_before = after.max(0) as usize;
        }
        Ok(Originals::Found {
            pre_images,
            written_last: last_after.max(0) as usize,
        })
    }
}

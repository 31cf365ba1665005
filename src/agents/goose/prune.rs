//! goose's prune write, modelled on goose's own tool-pair summarization (docs/stores.md, "goose";
//! `crates/goose/src/context_mgmt/mod.rs@8d844eec`): the pruned head says, message by message, which rows the agent
//! stops seeing and which agent-only rows take their place; this module turns that into row
//! edits that goose's `ORDER BY created_timestamp, id` reads back in the same order.
//!
//! - A head message whose pruned envelope is the original: the row is untouched.
//! - One whose pruned envelope is hidden from the agent (same role and content): only
//!   `agentVisible` of the row's `metadata_json` becomes false.
//! - One replaced by an agent-only message (a tool pair's note, an image elided): the row is
//!   hidden the same way and the replacement is inserted as a new row.
//! - A new row has the largest id, so it sorts after every row with its `created_timestamp` or
//!   less. It goes into a *gap* of its run of changed messages (between two visible rows whose
//!   `created_timestamp` differ, or at either end of the session) and takes the earlier row's
//!   `created_timestamp` and `timestamp`: every row it may overtake is hidden. A run with no
//!   gap (all its neighbours share one second) is left as it was, and the context figure
//!   written is corrected for it.

use serde_json::value::RawValue;

use super::codec;
use super::read::{Row, Session};
use crate::error::{Error, Result};
use crate::message;

/// What happens to one loaded row.
#[derive(Debug, Clone, PartialEq)]
enum Change {
    Keep,
    Hide,
    /// Hide, and insert this agent-only (role, content_json) in its place.
    Replace(String, String),
}

/// A row the prune inserts: role, content_json, and where goose's order puts it.
#[derive(Debug, Clone)]
pub(super) struct Insert {
    pub role: String,
    pub content: String,
    pub created: i64,
    pub timestamp: Option<String>,
}

/// The row edits of a prune.
#[derive(Debug, Clone, Default)]
pub(super) struct Edits {
    /// Row ids to hide from the agent.
    pub hide: Vec<i64>,
    /// Rows to insert, in insertion (id) order.
    pub insert: Vec<Insert>,
    /// What goose will load afterwards: `Ok(row id)` or `Err(index into insert)`.
    pub order: Vec<std::result::Result<i64, usize>>,
    /// Changed messages left as they were for want of a gap.
    pub left: usize,
    /// The context figure corrected for what was left.
    pub context_after: usize,
}

/// Plan the edits of a pruned `history` (head and tail envelopes, one per loaded row).
/// `Ok(None)`: nothing can be changed.
pub(super) fn edits(
    id: &str,
    cur: &Session,
    history: &str,
    tail_start: usize,
    context_after: usize,
) -> Result<Option<Edits>> {
    let changes = changes(id, &cur.rows, history, tail_start)?;
    let mut e = Edits {
        context_after,
        ..Edits::default()
    };
    let rows = &cur.rows;
    // Inserts placed at each gap (gap g sits before row g).
    let mut at_gap: Vec<Vec<usize>> = vec![Vec::new(); rows.len() + 1];
    let mut kept = vec![true; rows.len()];
    let mut i = 0;
    while i < rows.len() {
        if changes[i] == Change::Keep {
            i += 1;
            continue;
        }
        let start = i;
        while i < rows.len() && changes[i] != Change::Keep {
            i += 1;
        }
        let run = start..i;
        let replaces: Vec<(String, String)> = run
            .clone()
            .filter_map(|k| match &changes[k] {
                Change::Replace(role, content) => Some((role.clone(), content.clone())),
                _ => None,
            })
            .collect();
        // Hidden rows need no place; new ones go into the latest open gap of the run.
        let gap = if replaces.is_empty() {
            Some(i)
        } else {
            (start..=i).rev().find(|&g| open_gap(rows, g))
        };
        let Some(g) = gap else {
            e.left += run.len();
            e.context_after += left_tokens(&run, rows, &changes);
            continue;
        };
        let (created, timestamp) = place(rows, g);
        for (role, content) in replaces {
            at_gap[g].push(e.insert.len());
            e.insert.push(Insert {
                role,
                content,
                created,
                timestamp: timestamp.clone(),
            });
        }
        for k in run {
            kept[k] = false;
            e.hide.push(rows[k].id);
        }
    }
    if e.hide.is_empty() {
        return Ok(None);
    }
    for (g, ins) in at_gap.iter().enumerate() {
        e.order.extend(ins.iter().map(|&n| Err(n)));
        if let Some(r) = rows.get(g).filter(|_| kept[g]) {
            e.order.push(Ok(r.id));
        }
    }
    Ok(Some(e))
}

/// Whether a new row can sit right before loaded row `g`: at either end, or between two rows
/// whose `created_timestamp` differ.
fn open_gap(rows: &[Row], g: usize) -> bool {
    match (g.checked_sub(1).and_then(|p| rows.get(p)), rows.get(g)) {
        (Some(x), Some(y)) => x.created < y.created,
        _ => true,
    }
}

/// `created_timestamp` and `timestamp` of a row inserted at gap `g`.
fn place(rows: &[Row], g: usize) -> (i64, Option<String>) {
    match g.checked_sub(1).and_then(|p| rows.get(p)) {
        Some(x) => (x.created, x.timestamp.clone()),
        None => {
            let y = &rows[0];
            (
                y.created.saturating_sub(1),
                y.timestamp.as_deref().map(super::read::second_before),
            )
        }
    }
}

/// Tokens a run left as it was adds to the context the pruned history was counted at.
fn left_tokens(run: &std::ops::Range<usize>, rows: &[Row], changes: &[Change]) -> usize {
    let count = |raw: Option<Box<RawValue>>| {
        raw.and_then(|r| message::decode(&codec::CODEC, &r).ok())
            .map_or(0, |m| crate::tokens::message_tokens(&codec::CODEC, &m))
    };
    run.clone()
        .map(|k| {
            let r = &rows[k];
            let original = count(codec::envelope(&r.role, &r.content, r.metadata.as_deref()).ok());
            let replaced = match &changes[k] {
                Change::Replace(role, content) => {
                    count(codec::envelope(role, content, Some(codec::AGENT_ONLY)).ok())
                }
                _ => 0,
            };
            original.saturating_sub(replaced)
        })
        .sum()
}

/// Compare the pruned history with the loaded rows, message by message.
fn changes(id: &str, rows: &[Row], history: &str, tail_start: usize) -> Result<Vec<Change>> {
    let bad = |why: String| Error::conversation(id, format!("pruned history: {why}"));
    let parts = message::split_raw(history).map_err(|e| bad(e.detail().to_string()))?;
    if parts.len() != rows.len() || tail_start > rows.len() {
        return Err(bad(format!(
            "{} messages for {} loaded rows",
            parts.len(),
            rows.len()
        )));
    }
    let mut out = Vec::with_capacity(rows.len());
    for (i, (raw, r)) in parts.iter().zip(rows).enumerate() {
        let original = codec::envelope(&r.role, &r.content, r.metadata.as_deref())
            .map_err(|e| bad(e.to_string()))?;
        if raw.get() == original.get() {
            out.push(Change::Keep);
            continue;
        }
        let env = codec::split_envelope(raw).map_err(|e| bad(e.to_string()))?;
        let change = if !codec::agent_visible(raw) {
            (env.role == r.role && env.content.get() == r.content).then_some(Change::Hide)
        } else {
            let agent_only = env.metadata.map(|m| m.get()) == Some(codec::AGENT_ONLY);
            agent_only.then(|| Change::Replace(env.role.clone(), env.content.get().to_string()))
        };
        match change {
            Some(c) if i < tail_start => out.push(c),
            _ => {
                return Err(bad(format!(
                    "message {i} (row {}) is changed in a way goose cannot store",
                    r.id
                )))
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agents::goose::Schema;

    const REQ: &str = r#"[{"type":"toolRequest","id":"c1","toolCall":{"status":"success","value":{"name":"x","arguments":{}}}}]"#;
    const RES: &str = r#"[{"type":"toolResponse","id":"c1","toolResult":{"status":"success","value":{"content":[]}}}]"#;
    const NOTE: &str =
        r#"[{"type":"text","text":"[agent-db pruned a call to x {}: 0 B of output]"}]"#;

    fn row(id: i64, role: &str, content: &str, created: i64) -> Row {
        Row {
            id,
            role: role.into(),
            content: content.into(),
            metadata: Some(r#"{"userVisible":true,"agentVisible":true}"#.into()),
            created,
            timestamp: Some(format!("2026-01-01 00:00:{created:02}")),
        }
    }

    fn session(created: [i64; 5]) -> Session {
        let text = r#"[{"type":"text","text":"go"}]"#;
        Session {
            rows: vec![
                row(1, "user", text, created[0]),
                row(2, "assistant", REQ, created[1]),
                row(3, "user", RES, created[2]),
                row(4, "assistant", text, created[3]),
                row(5, "user", text, created[4]),
            ],
            raw_messages: String::new(),
            version: String::new(),
            schema: Schema {
                version: 16,
                sessions: Default::default(),
                messages: Default::default(),
            },
        }
    }

    /// The history the prune strategy hands over: row 2 hidden, row 3 replaced by the note.
    fn history(s: &Session) -> String {
        let env = |r: &Row, meta: Option<&str>| {
            codec::envelope(&r.role, &r.content, meta.or(r.metadata.as_deref())).unwrap()
        };
        let parts = [
            env(&s.rows[0], None),
            env(
                &s.rows[1],
                Some(r#"{"userVisible":true,"agentVisible":false}"#),
            ),
            codec::envelope("user", NOTE, Some(codec::AGENT_ONLY)).unwrap(),
            env(&s.rows[3], None),
            env(&s.rows[4], None),
        ];
        message::join_raw(parts.iter().map(|p| p.as_ref()))
    }

    #[test]
    fn the_note_goes_into_the_latest_gap_of_its_run() {
        let s = session([10, 11, 12, 13, 14]);
        let e = edits("s", &s, &history(&s), 4, 500).unwrap().unwrap();
        assert_eq!(e.hide, vec![2, 3]);
        assert_eq!(e.insert.len(), 1);
        assert_eq!(e.insert[0].content, NOTE);
        // After row 3, before row 4: row 3's second.
        assert_eq!(e.insert[0].created, 12);
        assert_eq!(
            e.insert[0].timestamp.as_deref(),
            Some("2026-01-01 00:00:12")
        );
        assert_eq!(e.order, vec![Ok(1), Err(0), Ok(4), Ok(5)]);
        assert_eq!((e.left, e.context_after), (0, 500));
        // Row 3 shares its second with row 4: the gap between rows 1 and 2 is used.
        let s = session([10, 11, 13, 13, 14]);
        let e = edits("s", &s, &history(&s), 4, 500).unwrap().unwrap();
        assert_eq!(
            e.insert[0].created, 11,
            "after row 2's second, before row 3's"
        );
        assert_eq!(e.order, vec![Ok(1), Err(0), Ok(4), Ok(5)]);
        // Every neighbour in one second: nothing can be placed.
        let s = session([10, 10, 10, 10, 10]);
        assert!(edits("s", &s, &history(&s), 4, 500).unwrap().is_none());
        // A changed tail is refused.
        let s = session([10, 11, 12, 13, 14]);
        assert!(edits("s", &s, &history(&s), 2, 500).is_err());
    }
}

//! Writing a compaction into kodelet's store (stores.md §1.7–1.9), in one transaction:
//! check the version, archive the pre-image, update `conversations` and
//! `conversation_summaries`, append the audit row.
//!
//! What changes: `raw_messages`; `usage.currentContextWindow` (spliced in place, so every other
//! byte of `usage` is kept); `tool_results` (entries whose call is gone are dropped; the rest keep
//! their bytes); `metadata.codex_responses_window_generation` + 1 for Codex Responses rows that
//! have it; the summary row's `message_count`, `first_message`, `usage` and `metadata`, computed
//! exactly as kodelet's `ToSummary`. `updated_at` is **not** changed: compaction is maintenance,
//! not user activity, and the audit log records when it happened.

use std::collections::{BTreeMap, HashSet};

use std::path::Path;

use rusqlite::{params, Connection, OptionalExtension, TransactionBehavior};
use serde_json::value::RawValue;

use super::archive::{self, Cell};
use super::kodelet_summaries::{first_message, message_count};
use crate::error::{Result, SqlContext};
use crate::message::{go_escape, Format};
use crate::plan::sha256_hex;

pub use super::{Proposal, Written};

/// Replace the number after `"currentContextWindow":` keeping every other byte.
pub fn splice_current_context(usage: &str, value: usize) -> Option<String> {
    let key = "\"currentContextWindow\":";
    let start = usage.find(key)? + key.len();
    let rest = &usage[start..];
    let ws = rest.len() - rest.trim_start().len();
    let num_len = rest[ws..]
        .find(|c: char| !(c.is_ascii_digit() || matches!(c, '-' | '+' | '.' | 'e' | 'E')))
        .unwrap_or(rest.len() - ws);
    if num_len == 0 {
        return None;
    }
    Some(format!(
        "{}{}{}",
        &usage[..start + ws],
        value,
        &rest[ws + num_len..]
    ))
}

/// Drop `tool_results` entries whose call is gone; `None` when nothing changes.
pub fn filter_tool_results(tool_results: &str, keep: &HashSet<String>) -> Option<String> {
    let map: BTreeMap<String, Box<RawValue>> = serde_json::from_str(tool_results).ok()?;
    if map.keys().all(|k| keep.contains(k)) {
        return None;
    }
    // Go marshals maps with sorted keys; BTreeMap iterates in the same byte order.
    let mut out = String::from("{");
    for (k, v) in map.iter().filter(|(k, _)| keep.contains(*k)) {
        if out.len() > 1 {
            out.push(',');
        }
        out.push_str(&go_escape(&serde_json::to_string(k).ok()?));
        out.push(':');
        out.push_str(v.get());
    }
    out.push('}');
    Some(out)
}

/// Codex Responses rows count their compactions in metadata; bump it in place.
pub fn bump_codex_generation(metadata: &str) -> Option<String> {
    let key = "\"codex_responses_window_generation\":";
    let start = metadata.find(key)? + key.len();
    let rest = &metadata[start..];
    let len = rest
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(rest.len());
    let n: u64 = rest[..len].parse().ok()?;
    Some(format!("{}{}{}", &metadata[..start], n + 1, &rest[len..]))
}

struct Current {
    updated_at: String,
    raw: String,
    usage: String,
    tool_results: Option<String>,
    metadata: Option<String>,
}

/// Write one compaction. Returns [`Written::Changed`] without writing when the conversation is
/// not the version that was planned.
pub fn commit(conn: &mut Connection, path: &Path, p: &Proposal, now: &str) -> Result<Written> {
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .at(path)?;
    let cur = tx
        .query_row(
            "SELECT updated_at, raw_messages, usage, tool_results, metadata FROM conversations WHERE id = ?1",
            [&p.id],
            |r| {
                Ok(Current {
                    updated_at: r.get::<_, Option<String>>(0)?.unwrap_or_default(),
                    raw: r.get(1)?,
                    usage: r.get(2)?,
                    tool_results: r.get(3)?,
                    metadata: r.get(4)?,
                })
            },
        )
        .optional()
        .at(path)?;
    let Some(cur) = cur else {
        return Ok(Written::Changed("deleted since it was read".into()));
    };
    if cur.updated_at != p.version.updated_at || sha256_hex(&cur.raw) != p.version.raw_sha256 {
        return Ok(Written::Changed(
            "changed since read (a live agent wrote to it); nothing written".into(),
        ));
    }

    let new_usage = splice_current_context(&cur.usage, p.tokens_after);
    let new_tools = cur
        .tool_results
        .as_deref()
        .and_then(|t| filter_tool_results(t, &p.call_ids));
    let new_meta = match p.format {
        Format::OpenAiResponses => cur.metadata.as_deref().and_then(bump_codex_generation),
        _ => None,
    };
    let usage_after = new_usage.clone().unwrap_or_else(|| cur.usage.clone());
    let meta_after = new_meta.clone().or_else(|| cur.metadata.clone());

    let key = p.id.clone();
    let mut cells = vec![Cell::new(
        "conversations",
        "id",
        key.clone(),
        "raw_messages",
    )];
    if new_usage.is_some() {
        cells.push(Cell::new("conversations", "id", key.clone(), "usage"));
    }
    if new_tools.is_some() {
        cells.push(Cell::new(
            "conversations",
            "id",
            key.clone(),
            "tool_results",
        ));
    }
    if new_meta.is_some() {
        cells.push(Cell::new("conversations", "id", key.clone(), "metadata"));
    }
    let summary_exists = tx
        .query_row(
            "SELECT 1 FROM conversation_summaries WHERE id = ?1",
            [&key],
            |_| Ok(()),
        )
        .optional()
        .at(path)?
        .is_some();
    let cols = super::kodelet::check_schema(&tx, path)?;
    if summary_exists {
        for c in ["message_count", "first_message", "usage"] {
            cells.push(Cell::new("conversation_summaries", "id", key.clone(), c));
        }
        if cols.summaries_metadata {
            cells.push(Cell::new(
                "conversation_summaries",
                "id",
                key.clone(),
                "metadata",
            ));
        }
    } else {
        cells.push(Cell::inserted_row(
            "conversation_summaries",
            "id",
            key.clone(),
        ));
    }

    let compaction_id = archive::insert_audit(&tx, &p.audit, now).at(path)?;
    archive::save_pre_image(&tx, compaction_id, &cells).at(path)?;

    tx.execute(
        "UPDATE conversations SET raw_messages = ?1 WHERE id = ?2",
        params![p.raw_messages, key],
    )
    .at(path)?;
    if let Some(u) = &new_usage {
        tx.execute(
            "UPDATE conversations SET usage = ?1 WHERE id = ?2",
            params![u, key],
        )
        .at(path)?;
    }
    if let Some(t) = &new_tools {
        tx.execute(
            "UPDATE conversations SET tool_results = ?1 WHERE id = ?2",
            params![t, key],
        )
        .at(path)?;
    }
    if let Some(m) = &new_meta {
        tx.execute(
            "UPDATE conversations SET metadata = ?1 WHERE id = ?2",
            params![m, key],
        )
        .at(path)?;
    }
    let count = message_count(&p.raw_messages);
    let first = first_message(&p.raw_messages, meta_after.as_deref());
    if summary_exists {
        tx.execute(
            "UPDATE conversation_summaries SET message_count = ?1, first_message = ?2, usage = ?3 WHERE id = ?4",
            params![count, first, usage_after, key],
        )
        .at(path)?;
        if cols.summaries_metadata {
            tx.execute(
                "UPDATE conversation_summaries SET metadata = ?1 WHERE id = ?2",
                params![meta_after, key],
            )
            .at(path)?;
        }
    } else {
        insert_summary_row(
            &tx,
            path,
            &key,
            count,
            &first,
            &usage_after,
            meta_after.as_deref(),
            cols,
        )?;
    }
    archive::finish_audit(&tx, compaction_id, &cells).at(path)?;
    tx.commit().at(path)?;
    Ok(Written::Committed { compaction_id })
}

/// A conversation without a summary row gets one, as kodelet's upsert would create it.
#[allow(clippy::too_many_arguments)]
fn insert_summary_row(
    tx: &Connection,
    path: &Path,
    id: &str,
    count: i64,
    first: &str,
    usage: &str,
    metadata: Option<&str>,
    cols: super::kodelet::Columns,
) -> Result<()> {
    let (name, created, updated, provider, cwd): (Option<String>, String, String, String, Option<String>) = tx
        .query_row(
            &format!(
                "SELECT summary, created_at, updated_at, provider, {} FROM conversations WHERE id = ?1",
                if cols.conversations_cwd { "cwd" } else { "NULL" }
            ),
            [id],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?)),
        )
        .at(path)?;
    tx.execute(
        "INSERT INTO conversation_summaries(id, message_count, first_message, summary, usage, created_at, updated_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
        params![id, count, first, name, usage, created, updated],
    )
    .at(path)?;
    if cols.summaries_provider {
        tx.execute(
            "UPDATE conversation_summaries SET provider = ?1 WHERE id = ?2",
            params![provider, id],
        )
        .at(path)?;
    }
    if cols.summaries_metadata {
        tx.execute(
            "UPDATE conversation_summaries SET metadata = ?1 WHERE id = ?2",
            params![metadata, id],
        )
        .at(path)?;
    }
    if cols.summaries_cwd {
        tx.execute(
            "UPDATE conversation_summaries SET cwd = ?1 WHERE id = ?2",
            params![cwd, id],
        )
        .at(path)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splice_keeps_other_bytes() {
        let u = r#"{"inputTokens":1,"inputCost":0.0037,"currentContextWindow":90813,"maxContextWindow":200000}"#;
        assert_eq!(
            splice_current_context(u, 1234).unwrap(),
            r#"{"inputTokens":1,"inputCost":0.0037,"currentContextWindow":1234,"maxContextWindow":200000}"#
        );
        assert!(splice_current_context("{}", 1).is_none());
    }

    #[test]
    fn tool_results_filtered_in_go_order() {
        let t = r#"{"a":{"toolName":"bash","x":1},"b":{"toolName":"grep"},"c":{"z":"<"}}"#;
        let keep: HashSet<String> = ["a".to_string(), "c".to_string()].into();
        assert_eq!(
            filter_tool_results(t, &keep).unwrap(),
            r#"{"a":{"toolName":"bash","x":1},"c":{"z":"<"}}"#
        );
        let all: HashSet<String> = ["a", "b", "c"].iter().map(|s| s.to_string()).collect();
        assert!(filter_tool_results(t, &all).is_none());
    }

    #[test]
    fn codex_generation_bumped() {
        assert_eq!(
            bump_codex_generation(
                r#"{"api_mode":"responses","codex_responses_window_generation":3,"model":"x"}"#
            )
            .unwrap(),
            r#"{"api_mode":"responses","codex_responses_window_generation":4,"model":"x"}"#
        );
        assert!(bump_codex_generation(r#"{"model":"x"}"#).is_none());
    }
}

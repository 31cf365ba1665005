//! kodelet's proposal (docs/stores.md, "kodelet"): the new `raw_messages` and what follows from it in
//! `conversations` and `conversation_summaries`. The shared protocol (`store/commit.rs`) runs
//! it in one transaction with the version check, the audit row and the archived pre-image.
//!
//! What changes: `raw_messages`; `usage.currentContextWindow` (spliced in place, so every other
//! byte of `usage` is kept); `tool_results` (entries whose call is gone are dropped; the rest keep
//! their bytes); `metadata.codex_responses_window_generation` + 1 for Codex Responses rows that
//! have it; the summary row's `message_count`, `first_message`, `usage` and `metadata`, computed
//! exactly as kodelet's `ToSummary`; `updated_at` of both rows becomes now, as every kodelet save
//! (its own compaction included: `Store.Save` sets `record.UpdatedAt = time.Now()`) does. kodelet's
//! search indexer remembers, per process, the `updated_at` it last indexed and skips a conversation
//! whose `updated_at` it has seen, so a compaction that kept it would leave a running kodelet
//! searching the old messages.

use std::collections::{BTreeMap, HashSet};

use std::path::Path;

use rusqlite::types::{ToSqlOutput, ValueRef};
use rusqlite::{params, Connection, OptionalExtension};
use serde_json::value::RawValue;

use super::summaries::{as_text, displayed_first};
use crate::error::{Result, SqlContext};
use crate::message::{go_escape, Format};
use crate::store::commit::{Stage, Staged, Write};
use crate::store::pre_image::{Cell, HashedPrefix, Packed};

/// kodelet's version token: the `updated_at` marker ([`super::version_marker`]), the digest
/// ([`crate::util::version_digest`]) of the stored `raw_messages` bytes and their storage class (kodelet writes TEXT; a BLOB is
/// kept a BLOB). Equal tokens prove the stored cell is the one loaded, byte for byte, so its
/// pre-image can be archived from the loaded copy ([`Packed`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Version {
    pub marker: String,
    pub raw_digest: String,
    pub raw_blob: bool,
    /// [`crate::store::pre_image::value_digest`] of `tool_results`, when it was loaded: equal
    /// digests prove the loaded value current, so its write is prepared on the pool.
    pub tools_digest: Option<String>,
}

/// `tool_results` prepared on the planning pool (see [`Version::tools_digest`]).
pub struct PreparedTools {
    /// The loaded value, packed: the archived pre-image when it changes.
    pub packed: std::sync::Arc<Packed>,
    /// The new value (`None`: unchanged).
    pub filtered: Option<String>,
}

/// kodelet's typed proposal: the complete new history, and what the other cells need.
pub struct Proposal {
    pub id: String,
    pub format: Format,
    pub version: Version,
    /// The complete new `raw_messages`.
    pub raw_messages: String,
    /// The estimated context after, for `usage.currentContextWindow`.
    pub context_after: usize,
    /// Tool calls still in the history (`tool_results` keeps only theirs).
    pub call_ids: HashSet<String>,
    /// The loaded `raw_messages`, compressed on the planning pool: the archived pre-image once
    /// the version check has proven it current.
    pub pre_image: Option<std::sync::Arc<Packed>>,
    /// kodelet's `message_count` of the new history (computed on the planning pool).
    pub message_count: i64,
    /// The first user text of the new history, before the display override (see
    /// [`super::summaries::displayed_first`]; computed on the planning pool).
    pub first_user_text: Option<String>,
    /// `tool_results`, prepared on the pool when it was loaded.
    pub tools: Option<PreparedTools>,
    /// The post-image hash of `raw_messages` (and of a prepared `tool_results`), made on the
    /// pool ([`hashed_prefix`]).
    pub hashed: HashedPrefix,
    /// The first loaded message kept verbatim (for `compaction_history`).
    pub tail_start: usize,
    /// The summary written at the head (`None`: prune), for the compaction marker.
    pub summary: Option<String>,
}

/// The marker text of a prune, which writes no summary.
const PRUNE_NOTE: &str = "agent-db replaced the outputs of earlier tool calls with placeholders; \
the original messages are shown above, and `agent-db restore` puts them back.";

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
    // The results are borrowed from `tool_results`, not copied: only the kept ones are, once.
    let map: BTreeMap<String, &RawValue> = serde_json::from_str(tool_results).ok()?;
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

/// The conversation's current cells as the writer needs them. Columns agent-db edits in place
/// (`usage`, `tool_results`, `metadata`) are `Some` only when they hold valid UTF-8 TEXT; any
/// other value (a BLOB, a number, NULL, bytes that are not UTF-8) is left exactly as it is.
pub struct Current {
    usage: Option<String>,
    tool_results: Option<String>,
    metadata: Option<String>,
    /// With a `compaction_history` column: the stored `raw_messages` (proven by the version
    /// check to be the planned one) and the stored history (`Err`: not text kodelet can read).
    history: Option<(String, std::result::Result<Option<String>, String>)>,
    /// Whether `usage` is stored as a BLOB (the history is written in the same class).
    usage_blob: bool,
}

/// A TEXT cell that is valid UTF-8, else `None`.
fn utf8_text(v: ValueRef<'_>) -> Option<String> {
    match v {
        ValueRef::Text(t) => std::str::from_utf8(t).ok().map(str::to_string),
        _ => None,
    }
}

/// The current version and cells. `tools` says the version includes `tool_results`' digest
/// (and that its text is not needed: the write was prepared on the pool).
fn read_current(
    tx: &Connection,
    path: &Path,
    id: &str,
    tools: bool,
    with_history: bool,
) -> Result<Option<(Version, Current)>> {
    tx.prepare_cached(if with_history {
        "SELECT updated_at, raw_messages, usage, tool_results, metadata, compaction_history FROM conversations WHERE id = ?1"
    } else {
        "SELECT updated_at, raw_messages, usage, tool_results, metadata FROM conversations WHERE id = ?1"
    })
    .at(path)?
    .query_row([id], |r| {
            let raw = r.get_ref(1)?;
            let raw_digest = match raw {
                ValueRef::Text(b) | ValueRef::Blob(b) => crate::util::version_digest(b),
                _ => String::new(),
            };
            let version = Version {
                marker: super::version_marker(r.get_ref(0)?),
                raw_digest,
                raw_blob: matches!(raw, ValueRef::Blob(_)),
                tools_digest: if tools {
                    Some(crate::store::pre_image::value_digest(r.get_ref(3)?))
                } else {
                    None
                },
            };
            Ok((
                version,
                Current {
                    usage: utf8_text(r.get_ref(2)?),
                    tool_results: if tools {
                        None
                    } else {
                        utf8_text(r.get_ref(3)?)
                    },
                    metadata: utf8_text(r.get_ref(4)?),
                    history: if with_history {
                        Some((
                            match raw {
                                ValueRef::Text(b) | ValueRef::Blob(b) => {
                                    String::from_utf8_lossy(b).into_owned()
                                }
                                _ => String::new(),
                            },
                            history_text(r.get_ref(5)?),
                        ))
                    } else {
                        None
                    },
                    usage_blob: matches!(r.get_ref(2)?, ValueRef::Blob(_)),
                },
            ))
    })
    .optional()
    .at(path)
}

/// The stored `compaction_history` as kodelet's JSON field reads it (TEXT or BLOB bytes; NULL is
/// no history), or why kodelet could not load it.
fn history_text(v: ValueRef<'_>) -> std::result::Result<Option<String>, String> {
    match v {
        ValueRef::Null => Ok(None),
        ValueRef::Text(b) | ValueRef::Blob(b) => std::str::from_utf8(b)
            .map(|t| Some(t.to_string()))
            .map_err(|_| "compaction_history is not valid UTF-8".to_string()),
        other => Err(format!(
            "compaction_history holds a {} (kodelet cannot load it)",
            super::sql_type(other)
        )),
    }
}

/// What changes besides `raw_messages`, decided in the transaction.
struct Changes {
    usage: bool,
    tools: bool,
    meta: bool,
    history: bool,
    summary_exists: bool,
}

/// A cell of the conversation's row.
fn conversation_cell(id: &str, column: &str) -> Cell {
    Cell::new("conversations", "id", id, column)
}

/// The post-image hash of a compaction's first cells (`raw_messages`, then `tool_results` when
/// it was prepared and changes: the order [`cells_for`] archives them in), from the values the
/// write binds. Computed on the planning pool, so the writer does not read back and hash most of
/// the bytes it wrote.
pub fn hashed_prefix(id: &str, raw_messages: &str, tools: Option<&PreparedTools>) -> HashedPrefix {
    let mut h = HashedPrefix::default();
    h.push(
        &conversation_cell(id, "raw_messages"),
        ValueRef::Text(raw_messages.as_bytes()),
    );
    if let Some(filtered) = tools.and_then(|t| t.filtered.as_deref()) {
        h.push(
            &conversation_cell(id, "tool_results"),
            ValueRef::Text(filtered.as_bytes()),
        );
    }
    h
}

/// The cells a compaction changes, in archive order. `raw_messages` is archived from the
/// proposal's packed copy when it has one. The two large ones come first (see
/// [`hashed_prefix`]).
fn cells_for(p: &Proposal, ch: Changes, cols: super::Columns) -> Vec<Cell> {
    let key = p.id.as_str();
    let conv = |c: &str| conversation_cell(key, c);
    let mut cells = vec![conv("raw_messages").with_packed(p.pre_image.clone())];
    let (new_usage, new_tools, new_meta, summary_exists) =
        (ch.usage, ch.tools, ch.meta, ch.summary_exists);
    for (changed, column) in [
        (new_tools, "tool_results"),
        (new_usage, "usage"),
        (new_meta, "metadata"),
        (ch.history, "compaction_history"),
        (true, "updated_at"),
    ] {
        if changed {
            let packed = match column {
                "tool_results" => p.tools.as_ref().map(|t| t.packed.clone()),
                _ => None,
            };
            cells.push(conv(column).with_packed(packed));
        }
    }
    if summary_exists {
        for c in ["message_count", "first_message", "usage", "updated_at"] {
            cells.push(Cell::new("conversation_summaries", "id", key, c));
        }
        if cols.summaries_metadata {
            cells.push(Cell::new("conversation_summaries", "id", key, "metadata"));
        }
    } else {
        cells.push(Cell::inserted_row("conversation_summaries", "id", key));
    }
    cells
}

/// What the apply step writes, decided inside the transaction.
pub struct Apply {
    usage: Option<String>,
    tool_results: Option<String>,
    metadata: Option<String>,
    /// The new `compaction_history` (and whether to store it as a BLOB), and the summary row's
    /// `message_count` and first user text computed from the display history.
    history: Option<(String, bool, i64, Option<String>)>,
    /// The metadata the summary row's `first_message` is computed with.
    metadata_after: Option<String>,
    summary_exists: bool,
    cols: super::Columns,
    /// The new `updated_at` (Go's `time.Time.String()` form, UTC).
    updated_at: String,
}

/// Now as kodelet stores a save time: Go's `time.Time.String()` form, in UTC.
pub fn saved_at() -> String {
    let now = crate::gotime::now()
        .with_timezone(&chrono::Utc)
        .fixed_offset();
    crate::gotime::format_go(&now, Some("UTC"))
}

impl Write for Proposal {
    type Version = Version;
    type Current = Current;
    type Apply = Apply;

    fn planned(&self) -> &Version {
        &self.version
    }

    fn read(&self, tx: &Connection, path: &Path) -> Result<Option<(Version, Current)>> {
        let cols = super::read::check_schema_again(tx, path)?;
        read_current(
            tx,
            path,
            &self.id,
            self.version.tools_digest.is_some(),
            cols.compaction_history,
        )
    }

    fn stage(&self, tx: &Connection, path: &Path, cur: Current) -> Result<Stage<Apply>> {
        let usage = cur
            .usage
            .as_deref()
            .and_then(|u| splice_current_context(u, self.context_after));
        let cols = super::read::check_schema_again(tx, path)?;
        if cols.chat_turns && turn_running(tx, path, &self.id)? {
            return Ok(Stage::Changed(TURN_RUNNING.into()));
        }
        let tool_results = match &self.tools {
            _ if cols.keeps_tool_results() => None,
            Some(t) => t.filtered.clone(),
            None => cur
                .tool_results
                .as_deref()
                .and_then(|t| filter_tool_results(t, &self.call_ids)),
        };
        let history = match &cur.history {
            Some((loaded, stored)) => Some(self.file_history(loaded, stored, cur.usage_blob)?),
            None => None,
        };
        let metadata = if *self.format == *crate::agents::kodelet::OPENAI_RESPONSES {
            cur.metadata.as_deref().and_then(bump_codex_generation)
        } else {
            None
        };
        let metadata_after = metadata.clone().or_else(|| cur.metadata.clone());
        let summary_exists = tx
            .prepare_cached("SELECT 1 FROM conversation_summaries WHERE id = ?1")
            .at(path)?
            .query_row([&self.id], |_| Ok(()))
            .optional()
            .at(path)?
            .is_some();
        let changes = Changes {
            usage: usage.is_some(),
            tools: tool_results.is_some(),
            meta: metadata.is_some(),
            history: history.is_some(),
            summary_exists,
        };
        let cells = cells_for(self, changes, cols);
        Ok(Stage::Ready(Staged {
            cells,
            details: None,
            hashed: Some(self.hashed.clone()),
            apply: Apply {
                usage,
                tool_results,
                metadata,
                history,
                metadata_after,
                summary_exists,
                cols,
                updated_at: saved_at(),
            },
        }))
    }

    fn apply(&self, tx: &Connection, path: &Path, a: Apply) -> Result<()> {
        let key = self.id.as_str();
        // One UPDATE: SQLite reads and rewrites the whole row (its overflow chain included) per
        // statement, so the changed columns, the new compaction_history among them, are set
        // together. A column that does not change is set to itself (`COALESCE(NULL, col)`),
        // which keeps its value and storage class.
        let history = a.history.as_ref().map(|(json, blob, _, _)| match blob {
            true => ToSqlOutput::Borrowed(ValueRef::Blob(json.as_bytes())),
            false => ToSqlOutput::Borrowed(ValueRef::Text(json.as_bytes())),
        });
        let sql = format!(
            "UPDATE conversations SET raw_messages = ?1, usage = COALESCE(?2, usage),
               tool_results = COALESCE(?3, tool_results), metadata = COALESCE(?4, metadata),
               updated_at = ?6{} WHERE id = ?5",
            if history.is_some() {
                ", compaction_history = ?7"
            } else {
                ""
            }
        );
        let mut values: Vec<&dyn rusqlite::ToSql> = vec![
            &self.raw_messages,
            &a.usage,
            &a.tool_results,
            &a.metadata,
            &key,
            &a.updated_at,
        ];
        if let Some(h) = &history {
            values.push(h);
        }
        tx.prepare_cached(&sql)
            .at(path)?
            .execute(rusqlite::params_from_iter(values))
            .at(path)?;
        let (count, first_text) = match &a.history {
            Some((_, _, count, first)) => (*count, first.as_deref()),
            None => (self.message_count, self.first_user_text.as_deref()),
        };
        if a.cols.search_state {
            // kodelet's search index is derived from the display history: dropping the
            // conversation's index state makes kodelet re-index it from the new rows.
            tx.prepare_cached("DELETE FROM conversation_search_state WHERE conversation_id = ?1")
                .at(path)?
                .execute([key])
                .at(path)?;
        }
        // kodelet's exact bytes: cut at byte 97, so possibly not valid UTF-8; bound as TEXT.
        let first = displayed_first(first_text, a.metadata_after.as_deref());
        let first = as_text(&first);
        if a.summary_exists {
            update_summary_row(tx, path, key, count, &first, a.cols)
        } else {
            insert_summary_row(tx, path, key, count, &first, a.cols)
        }
    }
}

/// Why a conversation with a running kodelet turn is left alone.
pub(super) const TURN_RUNNING: &str =
    "kodelet is running a turn in this conversation (chat_turns); try again when it finishes";

/// Whether kodelet has a turn `accepted` or `running` in the conversation (its own liveness
/// record, `idx_chat_turns_active`).
pub(super) fn turn_running(tx: &Connection, path: &Path, id: &str) -> Result<bool> {
    tx.prepare_cached(
        "SELECT 1 FROM chat_turns WHERE conversation_id = ?1 AND status IN ('accepted', 'running')",
    )
    .at(path)?
    .query_row([id], |_| Ok(()))
    .optional()
    .map(|o| o.is_some())
    .at(path)
}

/// The conversations with a turn `accepted` or `running` in `chat_turns` (see [`turn_running`]).
pub(super) fn running_turns(conn: &Connection, path: &Path) -> Result<Vec<String>> {
    let mut stmt = conn
        .prepare(
            "SELECT DISTINCT conversation_id FROM chat_turns \
             WHERE status IN ('accepted', 'running') AND typeof(conversation_id) = 'text'",
        )
        .at(path)?;
    let rows = stmt.query_map([], |r| r.get::<_, String>(0)).at(path)?;
    rows.collect::<rusqlite::Result<Vec<_>>>().at(path)
}

impl Proposal {
    /// The new `compaction_history` (see `history.rs`), whether it is a BLOB, and the summary
    /// row's `message_count` and first user text as kodelet's `ToSummary` computes them from the
    /// display history. `loaded` is the stored `raw_messages`, which the version check proved to
    /// be the one the compaction was planned on.
    fn file_history(
        &self,
        loaded: &str,
        stored: &std::result::Result<Option<String>, String>,
        usage_blob: bool,
    ) -> Result<(String, bool, i64, Option<String>)> {
        let fail = |why: String| crate::error::Error::conversation(&self.id, why);
        let stored = stored.as_ref().map_err(|e| fail(e.clone()))?;
        let old = super::history::parse(stored.as_deref()).map_err(fail)?;
        let loaded_items = crate::message::split_raw(loaded).map_err(|e| fail(e.to_string()))?;
        let new_items =
            crate::message::split_raw(&self.raw_messages).map_err(|e| fail(e.to_string()))?;
        let created = super::history::go_time_json(&crate::gotime::now());
        let summary = self.summary.as_deref().unwrap_or(PRUNE_NOTE);
        let id = super::history::marker_id(&self.id, &created, summary);
        let marker = super::history::Marker {
            id: &id,
            summary,
            created_at: &created,
        };
        let a = super::history::append(
            old.as_ref(),
            &loaded_items,
            self.tail_start,
            new_items.len(),
            &marker,
        )
        .map_err(fail)?;
        if *self.format == *crate::agents::kodelet::OPENAI_RESPONSES {
            super::history::responses_boundary(&self.raw_messages, a.start).map_err(fail)?;
        }
        let visible: i64 = new_items[a.start..]
            .iter()
            .map(|m| super::history::count_roles(m.get()))
            .sum();
        let first = super::summaries::first_user_text_current(a.first_segment());
        // kodelet writes every JSON column the same way; a store whose `usage` is a BLOB gets
        // its history as a BLOB too.
        Ok((a.json, usage_blob, visible + a.segment_roles, first))
    }
}

/// The summary row follows the conversation row. usage and metadata are copied by SQLite from
/// the conversation row, byte for byte.
fn update_summary_row(
    tx: &Connection,
    path: &Path,
    key: &str,
    count: i64,
    first: &ToSqlOutput<'_>,
    cols: super::Columns,
) -> Result<()> {
    tx.prepare_cached(
        "UPDATE conversation_summaries SET message_count = ?1, first_message = ?2,
           usage = (SELECT usage FROM conversations WHERE id = ?3),
           updated_at = (SELECT updated_at FROM conversations WHERE id = ?3) WHERE id = ?3",
    )
    .at(path)?
    .execute(params![count, first, key])
    .at(path)?;
    if cols.summaries_metadata {
        tx.prepare_cached(
            "UPDATE conversation_summaries SET metadata = (SELECT metadata FROM conversations WHERE id = ?1)
             WHERE id = ?1",
        )
        .at(path)?
        .execute([key])
        .at(path)?;
    }
    Ok(())
}

/// A conversation without a summary row gets one, as kodelet's upsert would create it. Every
/// column but the two computed ones is copied by SQLite from the conversation row.
fn insert_summary_row(
    tx: &Connection,
    path: &Path,
    id: &str,
    count: i64,
    first: &ToSqlOutput<'_>,
    cols: super::Columns,
) -> Result<()> {
    let mut names = vec![
        "id",
        "message_count",
        "first_message",
        "summary",
        "usage",
        "created_at",
        "updated_at",
    ];
    let mut values = vec![
        "id",
        "?2",
        "?3",
        "summary",
        "usage",
        "created_at",
        "updated_at",
    ];
    if cols.summaries_provider {
        names.push("provider");
        values.push("provider");
    }
    if cols.summaries_metadata {
        names.push("metadata");
        values.push("metadata");
    }
    if cols.summaries_cwd {
        names.push("cwd");
        values.push(if cols.conversations_cwd {
            "cwd"
        } else {
            "NULL"
        });
    }
    tx.execute(
        &format!(
            "INSERT INTO conversation_summaries({}) SELECT {} FROM conversations WHERE id = ?1",
            names.join(", "),
            values.join(", ")
        ),
        params![id, count, first],
    )
    .at(path)?;
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

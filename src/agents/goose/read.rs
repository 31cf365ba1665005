//! Listing and loading goose sessions. Listing reads the cheap `sessions` columns only (never
//! `content_json`); loading reads a session's rows in goose's order (`ORDER BY
//! created_timestamp, id`, user and assistant rows only) and keeps the agent-visible ones, each
//! as a codec envelope (docs/stores.md, "goose").

use std::collections::HashMap;
use std::path::Path;

use rusqlite::types::ValueRef;
use rusqlite::{Connection, OptionalExtension, Row as SqlRow};
use sha2::{Digest, Sha256};

use super::codec;
use super::schema::{check_schema, Schema};
use super::PROVIDER;
use crate::error::{Error, Result, SqlContext};
use crate::models::ContextLimits;
use crate::store::cells::{int, lossy, lossy_ref, NewestFirst, SortKey};
use crate::store::schema_util::{meta_with_count, one_read, KeptCounts};
use crate::store::{ConversationMeta, Facts, Prefilter};

/// goose's `DEFAULT_CONTEXT_LIMIT`, used when nothing else names a session's window.
pub const GOOSE_DEFAULT_LIMIT: i64 = 128_000;

/// SQLite's `YYYY-MM-DD HH:MM:SS` (UTC) as RFC 3339; anything else as stored.
pub fn rfc3339(t: &str) -> String {
    if let Some(s) = sqlite_utc(t.trim()) {
        return s;
    }
    match chrono::NaiveDateTime::parse_from_str(t.trim(), "%Y-%m-%d %H:%M:%S") {
        Ok(n) => n.and_utc().format("%Y-%m-%dT%H:%M:%SZ").to_string(),
        Err(_) => t.to_string(),
    }
}

/// [`rfc3339`] of the shape SQLite writes, exactly `YYYY-MM-DD HH:MM:SS` with a valid date and
/// time (seconds up to 59), read without a format string: the same digits with `T` and `Z`.
/// `None` for anything else, which the format string then reads.
fn sqlite_utc(t: &str) -> Option<String> {
    let b = t.as_bytes();
    if b.len() != 19
        || b[4] != b'-'
        || b[7] != b'-'
        || b[10] != b' '
        || b[13] != b':'
        || b[16] != b':'
    {
        return None;
    }
    let num = |at: usize, len: usize| {
        b[at..at + len].iter().try_fold(0u32, |n, c| {
            c.is_ascii_digit().then(|| n * 10 + u32::from(c - b'0'))
        })
    };
    let (y, mo, d) = (num(0, 4)?, num(5, 2)?, num(8, 2)?);
    let (h, mi, s) = (num(11, 2)?, num(14, 2)?, num(17, 2)?);
    chrono::NaiveDate::from_ymd_opt(y as i32, mo, d)?;
    if h > 23 || mi > 59 || s > 59 {
        return None;
    }
    let mut out = String::with_capacity(20);
    out.push_str(&t[..10]);
    out.push('T');
    out.push_str(&t[11..]);
    out.push('Z');
    Some(out)
}

/// [`rfc3339`] of a listing cell read as [`lossy`] reads it, without a copy of valid text.
fn rfc3339_cell(r: &SqlRow<'_>, i: usize) -> rusqlite::Result<Option<String>> {
    if let ValueRef::Text(b) = r.get_ref(i)? {
        if let Ok(t) = std::str::from_utf8(b) {
            return Ok(Some(rfc3339(t)));
        }
    }
    Ok(lossy(r, i)?.map(|t| rfc3339(&t)))
}

/// The listing query: id, name, description, working_dir, created_at, updated_at,
/// total_tokens, input_tokens, output_tokens, model_config_json, rowid, provider_name,
/// session_type, archived_at, parent_session_id.
fn list_sql(schema: &Schema, tail: &str) -> String {
    let col = |c: &str| {
        if schema.session_has(c) {
            format!("s.{c}")
        } else {
            "NULL".into()
        }
    };
    format!(
        "SELECT s.id, {}, {}, s.working_dir, s.created_at, s.updated_at, s.total_tokens, {}, {}, {}, s.rowid, {}, {}, {}, {} FROM sessions s {tail}",
        col("name"),
        col("description"),
        col("input_tokens"),
        col("output_tokens"),
        col("model_config_json"),
        col("provider_name"),
        col("session_type"),
        col("archived_at"),
        col("parent_session_id"),
    )
}

/// The two fields of `model_config_json` agent-db reads; every other one is skipped unread.
#[derive(serde::Deserialize)]
struct ModelConfig {
    model_name: Option<serde_json::Value>,
    context_limit: Option<serde_json::Value>,
}

/// The model and the stored `context_limit` (> 0) of a `model_config_json`: its top-level
/// `model_name` when a string and `context_limit` when an integer. An object is read through
/// [`ModelConfig`] (no map of the whole config); anything that does not decode that way (an
/// array, duplicate fields) is read as a generic value, with the same rule.
fn model_config(json: Option<&str>) -> (Option<String>, Option<i64>) {
    let Some(json) = json else {
        return (None, None);
    };
    let (model, limit) = match serde_json::from_str::<ModelConfig>(json) {
        Ok(c) if json.trim_start().starts_with('{') => (c.model_name, c.context_limit),
        _ => match serde_json::from_str::<serde_json::Value>(json) {
            Ok(v) => (
                v.get("model_name").cloned(),
                v.get("context_limit").cloned(),
            ),
            Err(_) => (None, None),
        },
    };
    let model = model.as_ref().and_then(|m| m.as_str()).map(str::to_string);
    let limit = limit.and_then(|l| l.as_i64()).filter(|l| *l > 0);
    (model, limit)
}

/// A session's context window: its stored `context_limit`, else its model's, else goose's own
/// default.
fn window(model: Option<&str>, stored: Option<i64>, limits: &ContextLimits) -> i64 {
    stored
        .or_else(|| model.and_then(|m| limits.of(m)))
        .unwrap_or(GOOSE_DEFAULT_LIMIT)
}

/// A row's model and window, from its `model_config_json` (read once per row).
fn model_window(r: &SqlRow<'_>, limits: &ContextLimits) -> rusqlite::Result<(Option<String>, i64)> {
    let (model, stored) = match r.get_ref(9)? {
        ValueRef::Text(b) if std::str::from_utf8(b).is_ok() => {
            model_config(std::str::from_utf8(b).ok())
        }
        _ => model_config(lossy(r, 9)?.as_deref()),
    };
    let max = window(model.as_deref(), stored, limits);
    Ok((model, max))
}

/// Whether the prefilter keeps a row, from its `total_tokens` and window alone.
fn kept(r: &SqlRow<'_>, max: i64, prefilter: &Prefilter) -> rusqlite::Result<bool> {
    Ok(prefilter.keeps_usage(int(r, 6)?, Some(max)))
}

fn meta_from_row(r: &SqlRow<'_>, limits: &ContextLimits) -> rusqlite::Result<ConversationMeta> {
    let (model, max) = model_window(r, limits)?;
    meta_with(r, model, max)
}

/// A row's metadata, its model and window already read.
fn meta_with(
    r: &SqlRow<'_>,
    model: Option<String>,
    max: i64,
) -> rusqlite::Result<ConversationMeta> {
    let name = lossy(r, 1)?
        .filter(|n| !n.is_empty())
        .or(lossy(r, 2)?.filter(|d| !d.is_empty()));
    let created_at = rfc3339_cell(r, 4)?.unwrap_or_default();
    let (parent, archived) = standing(r)?;
    Ok(ConversationMeta {
        parent,
        archived,
        id: lossy(r, 0)?.unwrap_or_default(),
        name,
        provider: provider_of(lossy(r, 11)?),
        codec: Some(&super::codec::CODEC),
        api_mode: None,
        model,
        message_count: None,
        current_context: int(r, 6)?,
        max_context: Some(max),
        input_tokens: int(r, 7)?,
        output_tokens: int(r, 8)?,
        cwd: lossy(r, 3)?.filter(|w| !w.is_empty()),
        updated_at: rfc3339_cell(r, 5)?.unwrap_or_else(|| created_at.clone()),
        created_at,
        problem: None,
    })
}

/// A session's standing in goose (`SessionType` and `archived_at`, `session_manager.rs`): a
/// `sub_agent` or `hidden` session (goose lists only `user` and `scheduled` ones) is a child,
/// of its `parent_session_id` (v15+) or of no recorded session (`""`); an `archived_at` set
/// means archived.
fn standing(r: &SqlRow<'_>) -> rusqlite::Result<(Option<String>, bool)> {
    let kind = lossy(r, 12)?.unwrap_or_default();
    let parent = lossy(r, 14)?.filter(|p| !p.is_empty());
    let child = matches!(kind.as_str(), "sub_agent" | "hidden");
    let parent = match (child, parent) {
        (_, Some(p)) => Some(p),
        (true, None) => Some(String::new()),
        (false, None) => None,
    };
    let archived = !matches!(r.get_ref(13)?, ValueRef::Null)
        && lossy(r, 13)?.is_some_and(|a| !a.trim().is_empty());
    Ok((parent, archived))
}

/// The provider a session ran with, as goose stores it in `provider_name` (v6+: `ollama`,
/// `openai`, `claude-code`…), else [`PROVIDER`].
fn provider_of(stored: Option<String>) -> String {
    match stored.map(|p| p.trim().to_string()) {
        Some(p) if !p.is_empty() => p,
        _ => PROVIDER.to_string(),
    }
}

/// The distinct providers of the store's sessions, as the listing names them, sorted.
pub fn providers(conn: &Connection, path: &Path) -> Result<Vec<String>> {
    if !has_provider(conn, path)? {
        return Ok(vec![PROVIDER.to_string()]);
    }
    let mut stmt = conn
        .prepare("SELECT DISTINCT CAST(provider_name AS TEXT) FROM sessions")
        .at(path)?;
    let mut rows = stmt.query([]).at(path)?;
    let mut out = std::collections::BTreeSet::new();
    while let Some(r) = rows.next().at(path)? {
        out.insert(provider_of(lossy(r, 0).at(path)?));
    }
    Ok(out.into_iter().collect())
}

/// A session's message count (on `idx_messages_session`, index only).
const COUNT_SQL: &str = "SELECT COUNT(*) FROM messages WHERE session_id = ?1";

/// The same count for every session with a text id, by rowid ([`KeptCounts`]). `s.id || ''` is
/// the id as [`COUNT_SQL`] binds it: text without affinity.
const ALL_COUNTS_SQL: &str =
    "SELECT s.rowid, (SELECT COUNT(*) FROM messages WHERE session_id = s.id || '')
 FROM sessions s WHERE typeof(s.id) = 'text'";

/// Stream every session's metadata, most recently updated first (goose's own order), ties in
/// rowid order. With a prefilter, sessions are judged on `total_tokens` and
/// `model_config_json` alone, read in the table's order in one read transaction, and only the
/// kept ones are decoded, counted ([`KeptCounts`]) and sorted ([`NewestFirst`]: in memory, spilled
/// to SQLite's sorter past a bound) before the first is handed on.
pub fn scan(
    conn: &Connection,
    path: &Path,
    limits: &ContextLimits,
    prefilter: Prefilter,
    f: &mut dyn FnMut(ConversationMeta) -> bool,
) -> Result<()> {
    let schema = check_schema(conn, path)?;
    if prefilter.all_over.is_some() {
        let kept = {
            let _read = one_read(conn, path)?;
            kept_sorted(conn, path, &schema, limits, &prefilter)?
        };
        return kept.each(path, |meta| Ok(f(meta)));
    }
    let mut count = conn.prepare(COUNT_SQL).at(path)?;
    let sql = list_sql(&schema, "ORDER BY s.updated_at DESC, s.rowid");
    let mut stmt = conn.prepare(&sql).at(path)?;
    let mut rows = stmt.query([]).at(path)?;
    while let Some(r) = rows.next().at(path)? {
        let mut meta = meta_from_row(r, limits).at(path)?;
        meta.message_count = Some(count.query_row([&meta.id], |c| c.get(0)).at(path)?);
        if !f(meta) {
            break;
        }
    }
    Ok(())
}

/// [`scan`] with `--all-over`, of only what the selection reads: the kept sessions' [`Facts`]
/// alone, from the same one pass in the table's order (no message counts, no names).
pub fn scan_facts(
    conn: &Connection,
    path: &Path,
    limits: &ContextLimits,
    prefilter: Prefilter,
    f: &mut dyn FnMut(Facts<'_>) -> bool,
) -> Result<()> {
    let schema = check_schema(conn, path)?;
    let kept = {
        let _read = one_read(conn, path)?;
        let mut stmt = conn.prepare(&list_sql(&schema, "")).at(path)?;
        let mut rows = stmt.query([]).at(path)?;
        let mut out = NewestFirst::listing();
        while let Some(r) = rows.next().at(path)? {
            let (_, max) = model_window(r, limits).at(path)?;
            let current = int(r, 6).at(path)?;
            if !prefilter.keeps_usage(current, Some(max)) {
                continue;
            }
            // As [`meta_with`] reads them.
            let id = lossy_ref(r, 0).at(path)?;
            let updated_at = match rfc3339_cell(r, 5).at(path)? {
                Some(u) => u,
                None => rfc3339_cell(r, 4).at(path)?.unwrap_or_default(),
            };
            let (parent, archived) = standing(r).at(path)?;
            let facts = Facts {
                parent: parent.as_deref(),
                archived,
                id: id.as_deref().unwrap_or_default(),
                updated_at: &updated_at,
                current_context: current,
                max_context: Some(max),
                problem: None,
            };
            out.push_facts_at(path, r.get_ref(5).at(path)?, r.get(10).at(path)?, &facts)?;
        }
        out
    };
    kept.each_facts(path, |facts| Ok(f(facts)))
}

/// The sessions the prefilter keeps, each counted as the pass reads it, read in the table's
/// order in one pass whatever share is kept, to be sorted as goose lists them.
fn kept_sorted(
    conn: &Connection,
    path: &Path,
    schema: &Schema,
    limits: &ContextLimits,
    prefilter: &Prefilter,
) -> Result<NewestFirst> {
    let mut counts = KeptCounts::new(conn, path, "sessions", COUNT_SQL, ALL_COUNTS_SQL, 2)?;
    let mut stmt = conn.prepare(&list_sql(schema, "")).at(path)?;
    let mut rows = stmt.query([]).at(path)?;
    let mut out = NewestFirst::listing();
    while let Some(r) = rows.next().at(path)? {
        let (model, max) = model_window(r, limits).at(path)?;
        let keep = kept(r, max, prefilter).at(path)?;
        counts.note(path, keep)?;
        if !keep {
            continue;
        }
        let key = SortKey::of(r.get_ref(5).at(path)?);
        let mut meta = meta_with(r, model, max).at(path)?;
        let rowid = r.get(10).at(path)?;
        // Only a text id that is valid UTF-8 is bound by the probe as the batch reads it.
        let listed = matches!(r.get_ref(0).at(path)?, ValueRef::Text(b) if b == meta.id.as_bytes());
        meta.message_count = Some(counts.count(path, rowid, listed, &meta.id)?);
        out.push_meta(path, key, rowid, meta)?;
    }
    Ok(out)
}

/// One session's metadata, or `None`.
pub fn meta(
    conn: &Connection,
    path: &Path,
    limits: &ContextLimits,
    id: &str,
) -> Result<Option<ConversationMeta>> {
    let schema = check_schema(conn, path)?;
    let sql = list_sql(&schema, "WHERE s.id = ?1");
    meta_with_count(conn, path, &sql, COUNT_SQL, id, |r| {
        meta_from_row(r, limits)
    })
}

/// The goose providers whose `manages_own_context()` is true (aaif-goose `main`: the CLI
/// providers `ClaudeCodeProvider` and `GeminiCliProvider`, and `AcpProvider`, which every
/// `*-acp` provider is), by the name goose stores in `sessions.provider_name`. goose never
/// compacts such a session (`check_if_compaction_needed` answers false, tool-pair summarization
/// is off): the agent behind the provider keeps the conversation, goose only shows it.
pub const MANAGES_OWN_CONTEXT: &[&str] = &[
    "claude-code",
    "gemini-cli",
    "claude-acp",
    "codex-acp",
    "copilot-acp",
    "amp-acp",
    "pi-acp",
    "cursor-acp",
];

/// The reason agent-db gives for a session whose provider is `p`, when `p` is one of
/// [`MANAGES_OWN_CONTEXT`].
fn managed_reason(p: &str) -> Option<String> {
    MANAGES_OWN_CONTEXT.contains(&p).then(|| {
        format!(
            "goose's provider {p} manages its own context, so goose never compacts this session"
        )
    })
}

/// Whether `sessions` has `provider_name` (v6+).
fn has_provider(conn: &Connection, path: &Path) -> Result<bool> {
    conn.prepare_cached(
        "SELECT EXISTS (SELECT 1 FROM pragma_table_info('sessions') WHERE name = 'provider_name')",
    )
    .at(path)?
    .query_row([], |r| r.get::<_, bool>(0))
    .at(path)
}

/// Why agent-db leaves session `id` alone: its `provider_name` (v6+) is one of
/// [`MANAGES_OWN_CONTEXT`]. `None` for any other provider, no provider, no such column or no
/// such session.
pub fn left_alone(conn: &Connection, path: &Path, id: &str) -> Result<Option<String>> {
    if !has_provider(conn, path)? {
        return Ok(None);
    }
    let provider: Option<String> = conn
        .prepare_cached("SELECT CAST(provider_name AS TEXT) FROM sessions WHERE id = ?1")
        .at(path)?
        .query_row([id], |r| lossy(r, 0))
        .optional()
        .at(path)?
        .flatten();
    Ok(provider.and_then(|p| managed_reason(&p)))
}

/// Every session [`left_alone`] names, by id, with its reason: one pass over `sessions` (its
/// small columns), for a batch selection. A session is found under the id the listing
/// reports only when that id finds it again (a text id, valid UTF-8), as [`left_alone`] does.
pub fn left_alone_all(conn: &Connection, path: &Path) -> Result<HashMap<String, String>> {
    if !has_provider(conn, path)? {
        return Ok(HashMap::new());
    }
    let names: Vec<String> = MANAGES_OWN_CONTEXT
        .iter()
        .map(|p| format!("'{p}'"))
        .collect();
    let sql = format!(
        "SELECT id, CAST(provider_name AS TEXT) FROM sessions
         WHERE typeof(id) = 'text' AND CAST(provider_name AS TEXT) IN ({})",
        names.join(", ")
    );
    let mut stmt = conn.prepare(&sql).at(path)?;
    let mut rows = stmt.query([]).at(path)?;
    let mut out = HashMap::new();
    while let Some(r) = rows.next().at(path)? {
        let (Ok(id), Some(p)) = (r.get::<_, String>(0), lossy(r, 1).at(path)?) else {
            continue;
        };
        if let Some(why) = managed_reason(&p) {
            out.entry(id).or_insert(why);
        }
    }
    Ok(out)
}

/// One stored message row.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    pub id: i64,
    pub role: String,
    pub content: String,
    pub metadata: Option<String>,
    pub created: i64,
    pub timestamp: Option<String>,
}

/// A session as goose's model view has it.
#[derive(Debug, Clone)]
pub struct Session {
    /// The agent-visible user and assistant rows, in goose's order.
    pub rows: Vec<Row>,
    /// Their envelopes, as a JSON array.
    pub raw_messages: String,
    /// Row count, largest row id, `updated_at`, `total_tokens`, and the sha256 of every row.
    pub version: String,
    pub schema: Schema,
}

pub(super) fn read_rows(
    conn: &Connection,
    path: &Path,
    schema: &Schema,
    id: &str,
) -> Result<(Vec<Row>, String)> {
    let meta = if schema.message_has("metadata_json") {
        "metadata_json"
    } else {
        "NULL"
    };
    let ts = if schema.message_has("timestamp") {
        "timestamp"
    } else {
        "NULL"
    };
    let sql = format!(
        "SELECT id, role, content_json, {meta}, created_timestamp, {ts} FROM messages \
         WHERE session_id = ?1 ORDER BY created_timestamp, id"
    );
    let mut st = conn.prepare(&sql).at(path)?;
    let mut q = st.query([id]).at(path)?;
    let (mut out, mut h, mut n, mut max) = (Vec::new(), Sha256::new(), 0usize, 0i64);
    while let Some(r) = q.next().at(path)? {
        let row = Row {
            id: r.get(0).at(path)?,
            role: lossy(r, 1).at(path)?.unwrap_or_default(),
            content: lossy(r, 2).at(path)?.unwrap_or_default(),
            metadata: lossy(r, 3).at(path)?,
            created: int(r, 4).at(path)?.unwrap_or(0),
            timestamp: lossy(r, 5).at(path)?,
        };
        n += 1;
        max = max.max(row.id);
        let (id, created) = (row.id.to_string(), row.created.to_string());
        let parts = [
            id.as_str(),
            row.role.as_str(),
            row.content.as_str(),
            row.metadata.as_deref().unwrap_or("\0"),
            created.as_str(),
        ];
        for p in parts {
            h.update(p.as_bytes());
            h.update([0xff]);
        }
        if row.role == "user" || row.role == "assistant" {
            out.push(row);
        }
    }
    Ok((out, format!("{n}:{max}:{}", hex::encode(h.finalize()))))
}

/// Load a session: the agent-visible rows as goose would send them, or an error naming the
/// row goose could not load.
/// The session's open to-dos: the `- [ ] item` lines of the checklist goose's todo extension
/// keeps in `sessions.extension_data` under `todo.v0` (`{"content": "…"}`, the text its
/// `todo_write` tool last wrote); none when the column, the key or such lines are missing.
pub fn open_todos(conn: &Connection, path: &Path, id: &str) -> Result<Vec<String>> {
    if !crate::store::schema_util::columns(conn, "sessions", path)?.contains("extension_data") {
        return Ok(Vec::new());
    }
    let data: Option<String> = conn
        .query_row(
            "SELECT CAST(extension_data AS TEXT) FROM sessions WHERE id = ?1",
            [id],
            |r| r.get(0),
        )
        .optional()
        .at(path)?
        .flatten();
    let content = data
        .and_then(|d| serde_json::from_str::<serde_json::Value>(&d).ok())
        .and_then(|v| {
            v.get("todo.v0")
                .and_then(|t| t.get("content"))
                .and_then(|c| c.as_str())
                .map(str::to_string)
        });
    Ok(content
        .map(|c| crate::retention::open_checklist_items(&c))
        .unwrap_or_default())
}

pub fn load_session(conn: &Connection, path: &Path, id: &str) -> Result<Session> {
    let schema = check_schema(conn, path)?;
    let session: Option<(Option<String>, Option<String>)> = conn
        .query_row(
            "SELECT CAST(updated_at AS TEXT), CAST(total_tokens AS TEXT) FROM sessions WHERE id = ?1",
            [id],
            // Read leniently: a cell that is not UTF-8 is the session's oddity, not a failure.
            |r| Ok((lossy(r, 0)?, lossy(r, 1)?)),
        )
        .optional()
        .at(path)?;
    let Some((updated, total)) = session else {
        return Err(Error::ConversationNotFound { id: id.to_string() });
    };
    let (all, digest) = read_rows(conn, path, &schema, id)?;
    let mut rows = Vec::new();
    let mut parts = Vec::new();
    for r in all {
        if !codec::visibility(r.metadata.as_deref()).agent {
            continue;
        }
        let env = codec::envelope(&r.role, &r.content, r.metadata.as_deref())
            .map_err(|e| Error::conversation(id, format!("message row {}: {e}", r.id)))?;
        parts.push(env);
        rows.push(r);
    }
    let raw_messages = crate::message::join_raw(parts.iter().map(|p| p.as_ref()));
    let version = format!(
        "{digest}:{}:{}",
        updated.unwrap_or_default(),
        total.unwrap_or_default()
    );
    Ok(Session {
        rows,
        raw_messages,
        version,
        schema,
    })
}

/// Whether session `id` has a `messages` row past every row agent-db's compaction
/// `compaction_id` inserted (ids are `AUTOINCREMENT`, so a later insert has a larger id): goose
/// went on with the session after it. `false` when the compaction inserted no row.
pub fn added_after(conn: &Connection, path: &Path, id: &str, compaction_id: i64) -> Result<bool> {
    let inserted =
        crate::store::pre_image::inserted_rowids(conn, compaction_id, "messages").at(path)?;
    let Some(last) = inserted.into_iter().max() else {
        return Ok(false);
    };
    conn.query_row(
        "SELECT EXISTS (SELECT 1 FROM messages WHERE session_id = ?1 AND id > ?2)",
        rusqlite::params![id, last],
        |r| r.get(0),
    )
    .at(path)
}

/// The session's rows goose does not send to the model (`agentVisible` false), as envelopes in
/// goose's order; a row whose envelope cannot be built is counted but left out.
pub fn hidden_rows(conn: &Connection, path: &Path, id: &str) -> Result<crate::store::kind::Hidden> {
    let schema = check_schema(conn, path)?;
    let (all, _) = read_rows(conn, path, &schema, id)?;
    let mut parts = Vec::new();
    let mut rows = 0;
    for r in all {
        if codec::visibility(r.metadata.as_deref()).agent {
            continue;
        }
        rows += 1;
        if let Ok(env) = codec::envelope(&r.role, &r.content, r.metadata.as_deref()) {
            parts.push(env);
        }
    }
    Ok(crate::store::kind::Hidden {
        rows,
        raw_messages: crate::message::join_raw(parts.iter().map(|p| p.as_ref())),
    })
}

/// `YYYY-MM-DD HH:MM:SS` one second earlier, or the value unchanged when it is not that shape.
pub(super) fn second_before(ts: &str) -> String {
    match chrono::NaiveDateTime::parse_from_str(ts, "%Y-%m-%d %H:%M:%S") {
        Ok(t) => (t - chrono::Duration::seconds(1))
            .format("%Y-%m-%d %H:%M:%S")
            .to_string(),
        Err(_) => ts.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// What [`rfc3339`] answered before it read SQLite's shape by hand: chrono's parser and
    /// formatter, with the format strings.
    fn by_chrono(t: &str) -> String {
        match chrono::NaiveDateTime::parse_from_str(t.trim(), "%Y-%m-%d %H:%M:%S") {
            Ok(n) => n.and_utc().format("%Y-%m-%dT%H:%M:%SZ").to_string(),
            Err(_) => t.to_string(),
        }
    }

    /// Text near SQLite's `YYYY-MM-DD HH:MM:SS`: each byte a digit or a separator, some fields
    /// out of range, spaces around it, a byte too many or too few.
    fn near_shape() -> impl Strategy<Value = String> {
        let byte = prop_oneof![
            8 => b'0'..=b'9',
            1 => prop_oneof![Just(b'-'), Just(b':'), Just(b' '), Just(b'T'), Just(b'x'), Just(b'+')],
        ];
        (
            prop::sample::select(vec![
                "2026-02-28 23:59:59",
                "2024-02-29 12:00:00",
                "2023-02-29 12:00:00",
                "0000-01-01 00:00:00",
                "9999-12-31 23:59:60",
                "2026-13-01 00:00:00",
                "2026-04-31 00:00:00",
                "2026-01-01 24:00:00",
                "2026-01-01 00:60:00",
            ]),
            prop::collection::vec((0usize..19, byte), 0..3),
            prop_oneof![Just(""), Just(" "), Just("\t")],
            prop_oneof![Just(""), Just(" "), Just("0"), Just("\n")],
            any::<bool>(),
        )
            .prop_map(|(base, edits, pre, post, cut)| {
                let mut b = base.as_bytes().to_vec();
                for (at, c) in edits {
                    b[at] = c;
                }
                if cut {
                    b.pop();
                }
                format!("{pre}{}{post}", String::from_utf8(b).unwrap())
            })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(500))]
        /// The hand-read shape answers what chrono's format strings answer, for every string.
        #[test]
        fn rfc3339_is_chronos_reading(t in near_shape()) {
            prop_assert_eq!(rfc3339(&t), by_chrono(&t));
        }
    }

    #[test]
    fn rfc3339_reads_sqlites_shape_and_leaves_the_rest() {
        for t in [
            "2026-11-01 12:00:00",
            " 2024-02-29 23:59:59 ",
            "2026-02-30 10:00:00",
            "",
            "x",
        ] {
            assert_eq!(rfc3339(t), by_chrono(t), "{t:?}");
        }
        assert_eq!(rfc3339("2026-11-01 12:00:00"), "2026-11-01T12:00:00Z");
        assert_eq!(sqlite_utc("2026-02-30 10:00:00"), None);
    }
}

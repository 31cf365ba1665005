//! Listing and loading opencode sessions.
//!
//! Listing reads the `session` row and, per session, only the newest finished assistant
//! message's `data` (on the `message(session_id, time_created, id)` index, newest first, one
//! row), never a part. Loading reads a session's messages in opencode's order (`time_created`,
//! then `id`, as `MessageV2.page` reads them) and their parts (`message_id`, `id`), replays opencode's
//! `filterCompacted` (only what opencode would send: back to the latest completed compaction,
//! or to its `tail_start_id`) and the reorder that puts the compaction and its summary before
//! the kept tail, and turns each message into a codec envelope.

use std::collections::{HashMap, HashSet};
use std::path::Path;

use rusqlite::{Connection, OptionalExtension, Row as SqlRow};
use serde_json::Value;

use super::super::opencode_family::codec;
use super::super::opencode_family::{
    archived, count, has_audit, parent, pending_reverts, rfc3339_ms, PROVIDER,
};
use super::schema::{inspect, Schema};
use crate::error::{Error, Result, SqlContext};
use crate::message::str_field;
use crate::models::ContextLimits;
use crate::store::cells::{int, lossy, lossy_ref};
use crate::store::schema_util::meta_with_count;
use crate::store::{ConversationMeta, Facts, Prefilter};

/// The newest finished assistant message of the session (opencode's `finished`, as its overflow check reads it):
/// newest first on `message(session_id, time_created, id)`, one row.
const LAST_FINISHED: &str =
    "(SELECT m.data FROM message m WHERE m.session_id = s.id AND json_valid(m.data) \
     AND m.data ->> '$.role' = 'assistant' AND m.data ->> '$.finish' IS NOT NULL \
     ORDER BY m.time_created DESC, m.id DESC LIMIT 1)";

/// The context agent-db recorded after its own compaction, when the newest finished assistant
/// is that compaction's summary (still in place: not restored): opencode records no context
/// until its next turn, and the summary's own tokens are not the context. `r.id` is the session.
const OURS: &str = "(SELECT c.details ->> '$.context_after' FROM agent_db_compactions c \
     WHERE c.conversation_id = r.id AND c.restored_at IS NULL \
     AND c.details ->> '$.opencode.summary_message' = (SELECT m.id FROM message m WHERE m.session_id = r.id \
     AND json_valid(m.data) AND m.data ->> '$.role' = 'assistant' AND m.data ->> '$.finish' IS NOT NULL \
     ORDER BY m.time_created DESC, m.id DESC LIMIT 1) ORDER BY c.id DESC LIMIT 1)";

/// id, title, directory, time_created, time_updated, then that message's providerID, modelID,
/// summary, tokens (total, input, output, cache read, cache write) and whether it exists, then
/// tokens_input, tokens_output, model, parent_id, time_archived, and the context agent-db
/// recorded after its compaction ([`OURS`], only when the newest is a summary and the file has
/// agent-db's audit table). The message's fields are extracted in SQL (its `data` never reaches
/// Rust), from a materialized row so the subquery runs once per session.
fn list_sql(schema: &Schema, audit: bool, filter: &str, order: &str) -> String {
    let col = |c: &str| {
        if schema.session_has(c) {
            format!("s.{c}")
        } else {
            "NULL".into()
        }
    };
    format!(
        "WITH r AS MATERIALIZED (SELECT s.id, s.title, s.directory, s.time_created, s.time_updated, \
         {LAST_FINISHED} AS d, {} AS ti, {} AS tout, {} AS model, {} AS parent, {} AS archived \
         FROM session s {filter}) \
         SELECT id, title, directory, time_created, time_updated, d ->> '$.providerID', d ->> '$.modelID', \
         d ->> '$.summary', d ->> '$.tokens.total', d ->> '$.tokens.input', d ->> '$.tokens.output', \
         d ->> '$.tokens.cache.read', d ->> '$.tokens.cache.write', d IS NOT NULL, ti, tout, model, \
         parent, archived, {} FROM r {order}",
        col("tokens_input"),
        col("tokens_output"),
        col("model"),
        col("parent_id"),
        col("time_archived"),
        if audit {
            format!("CASE WHEN d ->> '$.summary' THEN {OURS} END")
        } else {
            "NULL".into()
        },
    )
}

/// The utilization facts of the newest finished assistant (columns 5..=13, 19): (model,
/// current context). After a compaction (the newest is a summary) the context is what agent-db
/// recorded after its own compaction, else (opencode's own) the summary itself: its output
/// tokens.
fn usage(r: &SqlRow<'_>) -> rusqlite::Result<(Option<String>, Option<i64>)> {
    if int(r, 13)? != Some(1) {
        return Ok((None, None));
    }
    let model = match (lossy(r, 5)?, lossy(r, 6)?) {
        (Some(p), Some(m)) => Some(format!("{p}/{m}")),
        (None, Some(m)) => Some(m),
        _ => None,
    };
    let current = if int(r, 7)? == Some(1) {
        // agent-db's own estimate after its compaction, else the summary's output.
        int(r, 19)?.or(int(r, 10)?)
    } else {
        Some(count(
            int(r, 8)?,
            [int(r, 9)?, int(r, 10)?, int(r, 11)?, int(r, 12)?],
        ))
    };
    Ok((model, current))
}

/// `session.model` (`{"id":…,"providerID":…}`) as `provider/model`.
fn session_model(json: Option<&str>) -> Option<String> {
    let v: Value = serde_json::from_str(json?).ok()?;
    let id = str_field(&v, "id").or_else(|| str_field(&v, "modelID"))?;
    Some(match str_field(&v, "providerID") {
        Some(p) => format!("{p}/{id}"),
        None => id.to_string(),
    })
}

/// Window lookups of one scan, by model (most stores use a handful of models).
type Windows = HashMap<String, Option<i64>>;

/// The utilization facts of a row (what the prefilter needs), with every text field empty.
fn usage_meta(
    r: &SqlRow<'_>,
    limits: &ContextLimits,
    windows: &mut Windows,
) -> rusqlite::Result<ConversationMeta> {
    let (model, current) = usage(r)?;
    let model = model.or_else(|| session_model(lossy(r, 16).ok().flatten().as_deref()));
    // The window is the input opencode's overflow rule allows (`isOverflow`), so a
    // utilization of 1.0 is where opencode compacts.
    let max_context = match &model {
        Some(m) => *windows.entry(m.clone()).or_insert_with(|| {
            limits
                .of(m)
                .map(|w| super::limits::usable_input(m, w))
                .filter(|u| *u > 0)
        }),
        None => None,
    };
    Ok(ConversationMeta {
        id: String::new(),
        name: None,
        provider: String::new(),
        codec: Some(&super::super::opencode_family::codec::CODEC),
        api_mode: None,
        max_context,
        model,
        message_count: None,
        current_context: current,
        input_tokens: None,
        output_tokens: None,
        cwd: None,
        updated_at: String::new(),
        created_at: String::new(),
        problem: None,
        parent: parent(r, 17)?,
        archived: archived(r, 18)?,
    })
}

/// The rest of a row's metadata.
fn complete(r: &SqlRow<'_>, m: &mut ConversationMeta) -> rusqlite::Result<()> {
    m.id = lossy(r, 0)?.unwrap_or_default();
    m.name = lossy(r, 1)?.filter(|t| !t.is_empty());
    m.provider = PROVIDER.to_string();
    m.cwd = lossy(r, 2)?.filter(|d| !d.is_empty());
    m.input_tokens = int(r, 14)?;
    m.output_tokens = int(r, 15)?;
    m.created_at = rfc3339_ms(int(r, 3)?.unwrap_or(0));
    m.updated_at = int(r, 4)?
        .map(rfc3339_ms)
        .unwrap_or_else(|| m.created_at.clone());
    Ok(())
}

fn meta_from_row(r: &SqlRow<'_>, limits: &ContextLimits) -> rusqlite::Result<ConversationMeta> {
    let mut m = usage_meta(r, limits, &mut Windows::new())?;
    complete(r, &mut m)?;
    Ok(m)
}

/// A session's message count (on the `message(session_id, …)` index).
const COUNT_SQL: &str = "SELECT COUNT(*) FROM message WHERE session_id = ?1";

/// Stream every session's metadata, most recently updated first (opencode's own order).
pub fn scan(
    conn: &Connection,
    path: &Path,
    limits: &ContextLimits,
    prefilter: Prefilter,
    f: &mut dyn FnMut(ConversationMeta) -> bool,
) -> Result<()> {
    let schema = inspect(conn, path)?;
    let sql = list_sql(
        &schema,
        has_audit(conn, path)?,
        "",
        "ORDER BY time_updated DESC, id",
    );
    let mut stmt = conn.prepare(&sql).at(path)?;
    let mut count = conn.prepare(COUNT_SQL).at(path)?;
    let mut rows = stmt.query([]).at(path)?;
    let mut windows = Windows::new();
    while let Some(r) = rows.next().at(path)? {
        // Only what the prefilter needs first: rows it drops are never formatted.
        let mut meta = usage_meta(r, limits, &mut windows).at(path)?;
        if !prefilter.keeps(&meta) {
            continue;
        }
        complete(r, &mut meta).at(path)?;
        meta.message_count = Some(count.query_row([&meta.id], |c| c.get(0)).at(path)?);
        if !f(meta) {
            break;
        }
    }
    Ok(())
}

/// [`scan`] with `--all-over`, of only what the selection reads ([`Facts`]): no name, directory or message count,
/// and `updated_at` only when the selection reads it ([`Prefilter::times`]).
pub fn scan_facts(
    conn: &Connection,
    path: &Path,
    limits: &ContextLimits,
    prefilter: Prefilter,
    f: &mut dyn FnMut(Facts<'_>) -> bool,
) -> Result<()> {
    let schema = inspect(conn, path)?;
    let sql = list_sql(
        &schema,
        has_audit(conn, path)?,
        "",
        "ORDER BY time_updated DESC, id",
    );
    let mut stmt = conn.prepare(&sql).at(path)?;
    let mut rows = stmt.query([]).at(path)?;
    let mut windows = Windows::new();
    while let Some(r) = rows.next().at(path)? {
        let meta = usage_meta(r, limits, &mut windows).at(path)?;
        if !prefilter.keeps(&meta) {
            continue;
        }
        // As [`complete`] reads them.
        let id = lossy_ref(r, 0).at(path)?;
        let updated_at = if prefilter.times {
            rfc3339_ms(match int(r, 4).at(path)? {
                Some(t) => t,
                None => int(r, 3).at(path)?.unwrap_or(0),
            })
        } else {
            String::new()
        };
        let facts = Facts {
            id: id.as_deref().unwrap_or_default(),
            updated_at: &updated_at,
            current_context: meta.current_context,
            max_context: meta.max_context,
            problem: meta.problem.as_deref(),
            parent: meta.parent.as_deref(),
            archived: meta.archived,
        };
        if !f(facts) {
            break;
        }
    }
    Ok(())
}

/// One session's metadata, or `None`.
pub fn meta(
    conn: &Connection,
    path: &Path,
    limits: &ContextLimits,
    id: &str,
) -> Result<Option<ConversationMeta>> {
    let schema = inspect(conn, path)?;
    let sql = list_sql(&schema, has_audit(conn, path)?, "WHERE s.id = ?1", "");
    meta_with_count(conn, path, &sql, COUNT_SQL, id, |r| {
        meta_from_row(r, limits)
    })
}

/// One stored message as loaded.
#[derive(Debug, Clone, PartialEq)]
pub struct Msg {
    pub id: String,
    pub time_created: i64,
    pub info: Value,
    /// `message.data` as stored.
    pub data: String,
    /// Its parts (id, data), in opencode's order (`id`).
    pub parts: Vec<(String, String)>,
}

impl Msg {
    pub fn role(&self) -> &str {
        str_field(&self.info, "role").unwrap_or("")
    }

    /// The `compaction` part's data, when the message has one that parses.
    pub fn compaction(&self) -> Option<Value> {
        self.parts.iter().find_map(|(_, d)| {
            let v: Value = serde_json::from_str(d).ok()?;
            (str_field(&v, "type") == Some("compaction")).then_some(v)
        })
    }

    /// The chronological key opencode orders by.
    pub fn key(&self) -> (i64, &str) {
        (self.time_created, &self.id)
    }
}

/// A session as opencode's loader has it.
#[derive(Debug, Clone)]
pub struct Session {
    /// The messages opencode would send, in the order it sends them.
    pub loaded: Vec<Msg>,
    pub raw_messages: String,
    /// Message count, newest key, part count, newest part write, `session.time_updated`, and
    /// the sha256 of the loaded history.
    pub version: String,
    pub schema: Schema,
    pub directory: String,
    /// The newest `time_created` of any message or part of the session.
    pub max_time: i64,
    /// The newest user message (whose agent and model a compaction copies).
    pub latest_user: Option<Value>,
    /// Whether opencode has an undo pending in the session ([`pending_reverts`]).
    pub revert_pending: bool,
}

/// A stored message row before its data is parsed.
struct RowData {
    id: String,
    time_created: i64,
    data: String,
}

fn bad(id: &str, what: String) -> Error {
    Error::conversation(id, format!("{what}; opencode cannot load this session"))
}

type Parts = HashMap<String, Vec<(String, String)>>;

/// The session's parts by message, and (count, newest time_created, newest time_updated).
fn read_parts(conn: &Connection, path: &Path, id: &str) -> Result<(Parts, (i64, i64, i64))> {
    let mut st = conn
        .prepare(
            "SELECT p.message_id, p.id, p.data, p.time_created, p.time_updated FROM part p \
             WHERE p.message_id IN (SELECT id FROM message WHERE session_id = ?1) ORDER BY p.message_id, p.id",
        )
        .at(path)?;
    let mut q = st.query([id]).at(path)?;
    let mut out: Parts = HashMap::new();
    let (mut n, mut created, mut updated) = (0i64, 0i64, 0i64);
    while let Some(r) = q.next().at(path)? {
        let msg = lossy(r, 0).at(path)?.unwrap_or_default();
        let pid = lossy(r, 1).at(path)?.unwrap_or_default();
        let data = lossy(r, 2).at(path)?.unwrap_or_default();
        n += 1;
        created = created.max(int(r, 3).at(path)?.unwrap_or(0));
        updated = updated.max(int(r, 4).at(path)?.unwrap_or(0));
        out.entry(msg).or_default().push((pid, data));
    }
    Ok((out, (n, created, updated)))
}

fn read_messages(conn: &Connection, path: &Path, id: &str) -> Result<Vec<RowData>> {
    let mut st = conn
        .prepare("SELECT id, time_created, data FROM message WHERE session_id = ?1 ORDER BY time_created, id")
        .at(path)?;
    let mut q = st.query([id]).at(path)?;
    let mut out = Vec::new();
    while let Some(r) = q.next().at(path)? {
        out.push(RowData {
            id: lossy(r, 0).at(path)?.unwrap_or_default(),
            time_created: int(r, 1).at(path)?.unwrap_or(0),
            data: lossy(r, 2).at(path)?.unwrap_or_default(),
        });
    }
    Ok(out)
}

/// opencode's `filterCompacted` (`src/session/message-v2.ts@007a9409`) over the chronological rows, newest first,
/// parsing only the rows it walks; then reversed to chronological order.
fn filter_compacted(session: &str, rows: Vec<RowData>, parts: &mut Parts) -> Result<Vec<Msg>> {
    let mut out = Vec::new();
    let mut completed: HashSet<String> = HashSet::new();
    let mut retain: Option<String> = None;
    for row in rows.into_iter().rev() {
        let info: Value = serde_json::from_str(&row.data).map_err(|e| {
            bad(
                session,
                format!("message {}: data is not valid JSON ({e})", row.id),
            )
        })?;
        let m = Msg {
            parts: parts.remove(&row.id).unwrap_or_default(),
            id: row.id,
            time_created: row.time_created,
            info,
            data: row.data,
        };
        let is_retained = retain.as_deref() == Some(m.id.as_str());
        let stop = if retain.is_some() {
            is_retained
        } else if m.role() == "user" && completed.contains(&m.id) {
            match m.compaction() {
                None => false,
                Some(c) => match str_field(&c, "tail_start_id") {
                    None => true,
                    Some(t) => {
                        retain = Some(t.to_string());
                        t == m.id
                    }
                },
            }
        } else {
            if codec::is_completed_summary(&m.info) {
                if let Some(p) = str_field(&m.info, "parentID") {
                    completed.insert(p.to_string());
                }
            }
            false
        };
        out.push(m);
        if stop {
            break;
        }
    }
    out.reverse();
    Ok(out)
}

/// The reorder after `filterCompacted` (opencode's replay order): the latest compaction with a tail
/// and its summary first, then the kept tail, then what came after the summary.
pub fn reorder(msgs: Vec<Msg>) -> Vec<Msg> {
    let w = msgs.iter().rposition(|m| {
        m.role() == "user"
            && m.compaction()
                .is_some_and(|c| str_field(&c, "tail_start_id").is_some())
    });
    let Some(w) = w else { return msgs };
    let tail = msgs[w]
        .compaction()
        .and_then(|c| str_field(&c, "tail_start_id").map(str::to_string))
        .unwrap_or_default();
    let j = (w + 1..msgs.len()).find(|&i| {
        msgs[i].role() == "assistant"
            && msgs[i].info.get("summary") == Some(&Value::Bool(true))
            && str_field(&msgs[i].info, "parentID") == Some(msgs[w].id.as_str())
    });
    let v = msgs.iter().position(|m| m.id == tail);
    match (v, j) {
        (Some(v), Some(j)) if v < w && w < j => {
            let mut out: Vec<Msg> = msgs[w..=j].to_vec();
            out.extend_from_slice(&msgs[v..w]);
            out.extend_from_slice(&msgs[j + 1..]);
            out
        }
        _ => msgs,
    }
}

/// The session row's directory and `time_updated`, or not found.
fn session_row(conn: &Connection, path: &Path, id: &str) -> Result<(String, String)> {
    conn.query_row(
        "SELECT directory, CAST(time_updated AS TEXT) FROM session WHERE id = ?1",
        [id],
        |r| {
            Ok((
                lossy(r, 0)?.unwrap_or_default(),
                lossy(r, 1)?.unwrap_or_default(),
            ))
        },
    )
    .optional()
    .at(path)?
    .ok_or_else(|| Error::ConversationNotFound { id: id.to_string() })
}

/// Load a session: what opencode would send, or an error naming the row opencode could not load.
/// The session's open to-dos from opencode's `todo` table (`session_id`, `content`, `status`:
/// `pending`, `in_progress`, `completed` or `cancelled`, `priority`, `position`), by position;
/// none when the file has no such table.
pub fn open_todos(conn: &Connection, path: &Path, id: &str) -> Result<Vec<String>> {
    let cols = crate::store::schema_util::columns(conn, "todo", path)?;
    if !["session_id", "content", "status", "position"]
        .iter()
        .all(|c| cols.contains(*c))
    {
        return Ok(Vec::new());
    }
    let mut st = conn
        .prepare(
            "SELECT CAST(content AS TEXT), CAST(status AS TEXT) FROM todo \
             WHERE session_id = ?1 ORDER BY position",
        )
        .at(path)?;
    let rows = st
        .query_map([id], |r| {
            Ok((
                r.get::<_, Option<String>>(0)?,
                r.get::<_, Option<String>>(1)?,
            ))
        })
        .at(path)?;
    let mut out = Vec::new();
    for row in rows {
        if let (Some(content), status) = row.at(path)? {
            if !content.trim().is_empty()
                && crate::retention::todo_is_open(status.as_deref().unwrap_or(""))
            {
                out.push(content);
            }
        }
    }
    Ok(out)
}

pub fn load_session(conn: &Connection, path: &Path, id: &str) -> Result<Session> {
    let schema = inspect(conn, path)?;
    let (directory, updated) = session_row(conn, path, id)?;
    let rows = read_messages(conn, path, id)?;
    let (mut parts, (n_parts, part_created, part_updated)) = read_parts(conn, path, id)?;
    let n_msgs = rows.len();
    let newest = rows
        .last()
        .map(|r| format!("{}/{}", r.time_created, r.id))
        .unwrap_or_default();
    let max_time = rows
        .iter()
        .map(|r| r.time_created)
        .max()
        .unwrap_or(0)
        .max(part_created);
    let latest_user = rows.iter().rev().find_map(|r| {
        let v: Value = serde_json::from_str(&r.data).ok()?;
        (str_field(&v, "role") == Some("user")).then_some(v)
    });
    let loaded = reorder(filter_compacted(id, rows, &mut parts)?);
    let mut envs = Vec::with_capacity(loaded.len());
    for m in &loaded {
        if m.parts.is_empty() {
            return Err(bad(id, format!("message {} has no parts", m.id)));
        }
        envs.push(
            codec::envelope(&m.id, &m.data, &m.parts)
                .map_err(|e| Error::decode(id, e.unloadable("opencode", "this session")))?,
        );
    }
    let raw_messages = crate::message::join_raw(envs.iter().map(|e| e.as_ref()));
    let digest = crate::util::version_digest(raw_messages.as_bytes());
    let version = format!("{n_msgs}:{newest}:{n_parts}:{part_updated}:{updated}:{digest}");
    let revert_pending = !pending_reverts(conn, path, "session", Some(id))?.is_empty();
    Ok(Session {
        revert_pending,
        loaded,
        raw_messages,
        version,
        schema,
        directory,
        max_time,
        latest_user,
    })
}

/// The history opencode loaded when the session held only the messages ordered before
/// `before` (`time_created`, then `id`), each part's `data` replaced by `part_data`'s where it
/// has the part's id: opencode's loader replayed over an earlier state of the session, as the
/// JSON array [`load_session`] makes. An error names a row opencode could not have loaded.
pub(super) fn history_before_key(
    conn: &Connection,
    path: &Path,
    id: &str,
    before: (i64, &str),
    part_data: &HashMap<String, String>,
) -> Result<String> {
    let rows: Vec<RowData> = read_messages(conn, path, id)?
        .into_iter()
        .filter(|r| (r.time_created, r.id.as_str()) < before)
        .collect();
    let (mut parts, _) = read_parts(conn, path, id)?;
    for list in parts.values_mut() {
        for (pid, data) in list.iter_mut() {
            if let Some(then) = part_data.get(pid) {
                data.clone_from(then);
            }
        }
    }
    let loaded = reorder(filter_compacted(id, rows, &mut parts)?);
    let mut envs = Vec::with_capacity(loaded.len());
    for m in &loaded {
        if m.parts.is_empty() {
            return Err(bad(id, format!("message {} has no parts", m.id)));
        }
        envs.push(
            codec::envelope(&m.id, &m.data, &m.parts)
                .map_err(|e| Error::decode(id, e.unloadable("opencode", "this session")))?,
        );
    }
    Ok(crate::message::join_raw(envs.iter().map(|e| e.as_ref())))
}

/// `show --raw`: every `message` row of the session (`time_created`, `id`), each with its `part`
/// rows (`id`) under `parts`, every column as stored ([`crate::store::schema_util::stored_rows`]).
pub fn stored(conn: &Connection, path: &Path, id: &str) -> Result<String> {
    use crate::store::schema_util::{rows_array, stored_rows};
    session_row(conn, path, id)?;
    let mut messages = stored_rows(
        conn,
        path,
        "SELECT * FROM message WHERE session_id = ?1 ORDER BY time_created, id",
        id,
    )?;
    let parts = stored_rows(
        conn,
        path,
        "SELECT * FROM part WHERE message_id IN (SELECT id FROM message WHERE session_id = ?1) \
         ORDER BY message_id, id",
        id,
    )?;
    let mut by_message: HashMap<String, Vec<Value>> = HashMap::new();
    for p in parts {
        let key = p
            .get("message_id")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        by_message.entry(key).or_default().push(Value::Object(p));
    }
    for m in &mut messages {
        let key = m
            .get("id")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        let list = by_message.remove(&key).unwrap_or_default();
        m.insert("parts".into(), Value::Array(list));
    }
    Ok(rows_array(messages))
}

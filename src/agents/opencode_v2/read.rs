//! Reading opencode 2.x: the listing (`session_v2` and the newest finished assistant's
//! tokens) and the history as opencode's 2.x loader builds it (`SessionHistory`): the rows of
//! `session_message` from the latest completed text compaction on, in `seq` order, without the
//! `system` rows a later native checkpoint retired and without the checkpoint itself.
//!
//! agent-db carries each row as the envelope of the 1.x codec (`message/opencode.rs`), so the
//! summarizer, the splitter and the recognition of an earlier summary are the same for both
//! forms: a `user` row is a user text message; `synthetic`, `system` and `skill` rows (text
//! opencode sends as context) are user text; an `assistant` row's `content` becomes text,
//! reasoning and tool parts; a completed `compaction` row becomes the one user message opencode
//! sends for it (`<conversation-checkpoint>` with its `summary` and `recent`,
//! [`crate::summary::checkpoint`]): an earlier summary at the head of the history, agent-db's
//! or opencode's own. Rows opencode does not send as conversation (`agent-switched`,
//! `model-switched`, `location-switched`, `shell`, `idle`, a running or failed compaction) are
//! left out of the summarized history; they are never changed.

use std::path::Path;

use rusqlite::{Connection, OptionalExtension, Row as SqlRow};
use serde_json::{json, value::RawValue, Value};

use super::schema::check_schema;
use super::PROVIDER;
use crate::agents::opencode_family::{context_tokens, rfc3339_ms};
use crate::error::{Error, Result, SqlContext};
use crate::message::str_field;
use crate::models::ContextLimits;
use crate::store::{ConversationMeta, Prefilter};

/// The newest row opencode measures a context by: a finished assistant with tokens, or a
/// completed compaction (after which nothing is measured until the next reply).
const LAST_SQL: &str =
    "(SELECT m.{col} FROM session_message m WHERE m.session_id = s.id AND json_valid(m.data) AND \
     ((m.type = 'assistant' AND json_extract(m.data, '$.time.completed') IS NOT NULL \
       AND json_extract(m.data, '$.tokens') IS NOT NULL) \
      OR (m.type = 'compaction' AND json_extract(m.data, '$.status') = 'completed')) \
     ORDER BY m.seq DESC LIMIT 1)";

/// The session listing; its 14th column (13 from 0) is the context agent-db recorded after its own
/// compaction when the newest measured row is that compaction (only with `audit`: the file has
/// agent-db's audit table), as opencode measures nothing until its next reply.
fn list_sql(audit: bool, filter: &str) -> String {
    let ours = if audit {
        format!(
            "CASE WHEN {} = 'compaction' THEN (SELECT c.details ->> '$.context_after' \
             FROM agent_db_compactions c WHERE c.conversation_id = s.id AND c.restored_at IS NULL \
             AND c.details ->> '$.opencode.compaction_row' = {} ORDER BY c.id DESC LIMIT 1) END",
            LAST_SQL.replace("{col}", "type"),
            LAST_SQL.replace("{col}", "id")
        )
    } else {
        "NULL".into()
    };
    format!(
        "SELECT s.id, s.title, s.directory, s.time_created, s.time_updated, s.model, s.tokens_input, \
         s.tokens_output, {}, {}, (SELECT COUNT(*) FROM session_message c WHERE c.session_id = s.id), \
         s.parent_id, s.time_archived, {ours} FROM session_v2 s {filter} ORDER BY s.time_updated DESC, s.id",
        LAST_SQL.replace("{col}", "type"),
        LAST_SQL.replace("{col}", "data")
    )
}

fn lossy(r: &SqlRow<'_>, i: usize) -> rusqlite::Result<Option<String>> {
    use rusqlite::types::ValueRef;
    Ok(match r.get_ref(i)? {
        ValueRef::Text(t) | ValueRef::Blob(t) => Some(String::from_utf8_lossy(t).into_owned()),
        ValueRef::Integer(n) => Some(n.to_string()),
        ValueRef::Real(f) => Some(f.to_string()),
        ValueRef::Null => None,
    })
}

fn int(r: &SqlRow<'_>, i: usize) -> rusqlite::Result<Option<i64>> {
    use rusqlite::types::ValueRef;
    Ok(match r.get_ref(i)? {
        ValueRef::Integer(n) => Some(n),
        ValueRef::Real(f) => Some(f as i64),
        _ => None,
    })
}

/// A model reference (`{"id":…,"providerID":…}`) as `provider/model`.
pub fn model_name(v: &Value) -> Option<String> {
    let id = str_field(v, "id").or_else(|| str_field(v, "modelID"))?;
    Some(match str_field(v, "providerID") {
        Some(p) => format!("{p}/{id}"),
        None => id.to_string(),
    })
}

fn meta_from_row(r: &SqlRow<'_>, limits: &ContextLimits) -> rusqlite::Result<ConversationMeta> {
    let last_type = lossy(r, 8)?;
    let last: Option<Value> = lossy(r, 9)?.and_then(|d| serde_json::from_str(&d).ok());
    let session_model = lossy(r, 5)?
        .and_then(|m| serde_json::from_str::<Value>(&m).ok())
        .and_then(|v| model_name(&v));
    let (model, current) = match (last_type.as_deref(), &last) {
        (Some("assistant"), Some(d)) => (
            d.get("model").and_then(model_name).or(session_model),
            context_tokens(d),
        ),
        // After agent-db's own compaction: the context it recorded.
        (Some("compaction"), _) => (session_model, int(r, 13)?),
        _ => (session_model, None),
    };
    let max_context = model.as_deref().and_then(|m| limits.of(m));
    let created = int(r, 3)?.unwrap_or(0);
    Ok(ConversationMeta {
        id: lossy(r, 0)?.unwrap_or_default(),
        name: lossy(r, 1)?.filter(|t| !t.is_empty()),
        provider: PROVIDER.to_string(),
        codec: Some(&crate::agents::opencode_family::codec::CODEC),
        api_mode: None,
        model,
        message_count: int(r, 10)?,
        current_context: current,
        max_context,
        input_tokens: int(r, 6)?,
        output_tokens: int(r, 7)?,
        cwd: lossy(r, 2)?.filter(|d| !d.is_empty()),
        created_at: rfc3339_ms(created),
        updated_at: rfc3339_ms(int(r, 4)?.unwrap_or(created)),
        problem: None,
        parent: crate::agents::opencode_family::parent(r, 11)?,
        archived: crate::agents::opencode_family::archived(r, 12)?,
    })
}

/// Stream every session's metadata, most recently updated first.
pub fn scan(
    conn: &Connection,
    path: &Path,
    limits: &ContextLimits,
    prefilter: Prefilter,
    f: &mut dyn FnMut(ConversationMeta) -> bool,
) -> Result<()> {
    check_schema(conn, path)?;
    let mut stmt = conn
        .prepare(&list_sql(
            crate::agents::opencode_family::has_audit(conn, path)?,
            "",
        ))
        .at(path)?;
    let mut rows = stmt.query([]).at(path)?;
    while let Some(r) = rows.next().at(path)? {
        let meta = meta_from_row(r, limits).at(path)?;
        if !prefilter.keeps(&meta) {
            continue;
        }
        if !f(meta) {
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
    check_schema(conn, path)?;
    conn.query_row(
        &list_sql(
            crate::agents::opencode_family::has_audit(conn, path)?,
            "WHERE s.id = ?1",
        ),
        [id],
        |r| meta_from_row(r, limits),
    )
    .optional()
    .at(path)
}

/// A session's history as opencode 2.x loads it.
#[derive(Debug, Clone)]
pub struct Session {
    /// The envelopes' JSON array.
    pub raw_messages: String,
    /// The version token: the digest of every row of the session (id, seq, type, data).
    pub version: String,
    /// The largest `seq` and `time_created` of the session's rows.
    pub max_seq: i64,
    pub max_time: i64,
    /// 1 when the history starts at a compaction row (a summary, whoever wrote it), else 0.
    pub agent_summary: usize,
}

fn bad(id: &str, what: String) -> Error {
    Error::conversation(id, format!("{what}; opencode cannot load this session"))
}

/// The `seq` of the latest completed text compaction (a native checkpoint, which carries a
/// `providerContext`, is skipped, as opencode does without a resolved provider target).
fn latest_compaction(conn: &Connection, path: &Path, id: &str) -> Result<Option<i64>> {
    let mut st = conn
        .prepare(
            "SELECT seq, data FROM session_message WHERE session_id = ?1 AND type = 'compaction' \
             ORDER BY seq DESC",
        )
        .at(path)?;
    let mut rows = st.query([id]).at(path)?;
    while let Some(r) = rows.next().at(path)? {
        let seq: i64 = r.get(0).at(path)?;
        let data = lossy(r, 1).at(path)?.unwrap_or_default();
        let v: Value = serde_json::from_str(&data).map_err(|e| {
            bad(
                id,
                format!("compaction row seq {seq}: data is not JSON ({e})"),
            )
        })?;
        if str_field(&v, "status") == Some("completed") && !is_native_checkpoint("compaction", &v) {
            return Ok(Some(seq));
        }
    }
    Ok(None)
}

/// `SessionProviderContext.isCheckpoint`: a completed compaction that installed a provider's
/// native replacement window (`providerContext`) instead of a text summary.
pub fn is_native_checkpoint(kind: &str, v: &Value) -> bool {
    kind == "compaction"
        && str_field(v, "status") == Some("completed")
        && v.get("providerContext").is_some_and(|c| !c.is_null())
}

fn raw(v: &Value) -> Box<RawValue> {
    RawValue::from_string(v.to_string()).expect("serializer output is valid JSON")
}

fn user_text(id: &str, text: &str) -> Box<RawValue> {
    raw(&json!({"id": id, "info": {"role": "user"}, "parts": [
        {"id": "", "data": {"type": "text", "text": text}}
    ]}))
}

/// The text of a tool state's `content` (text items joined).
fn content_text(state: &Value) -> String {
    let mut out = String::new();
    for c in state["content"].as_array().into_iter().flatten() {
        if let Some(t) = str_field(c, "text") {
            if !out.is_empty() {
                out.push('\n');
            }
            out.push_str(t);
        }
    }
    out
}

fn tool_part(c: &Value) -> Value {
    let state = &c["state"];
    let status = match str_field(state, "status") {
        Some("completed") => "completed",
        Some("error") => "error",
        Some("running") => "running",
        _ => "pending",
    };
    let mut s =
        json!({"status": status, "input": state.get("input").cloned().unwrap_or(json!({}))});
    match status {
        "completed" => s["output"] = json!(content_text(state)),
        "error" => {
            let msg = state["error"]
                .get("message")
                .and_then(Value::as_str)
                .map(str::to_string)
                .unwrap_or_else(|| content_text(state));
            s["error"] = json!(msg);
        }
        _ => {}
    }
    json!({"type": "tool", "callID": str_field(c, "id").unwrap_or(""),
           "tool": str_field(c, "name").unwrap_or(""), "state": s})
}

/// The envelopes of one row (none for rows opencode does not send as conversation).
fn envelopes(id: &str, kind: &str, v: &Value) -> Vec<Box<RawValue>> {
    match kind {
        "user" | "synthetic" | "system" | "skill" => {
            vec![user_text(id, str_field(v, "text").unwrap_or(""))]
        }
        "assistant" => {
            let parts: Vec<Value> = v["content"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|c| match str_field(c, "type") {
                    Some("text") => Some(json!({"id": "", "data": {"type": "text",
                        "text": str_field(c, "text").unwrap_or("")}})),
                    Some("reasoning") => Some(json!({"id": "", "data": {"type": "reasoning",
                        "text": str_field(c, "text").unwrap_or("")}})),
                    Some("tool") => Some(json!({"id": "", "data": tool_part(c)})),
                    _ => None,
                })
                .collect();
            let mut info = json!({"role": "assistant"});
            for k in ["finish", "tokens", "model"] {
                if let Some(x) = v.get(k) {
                    info[k] = x.clone();
                }
            }
            vec![raw(&json!({"id": id, "info": info, "parts": parts}))]
        }
        // One user message, as `to-llm-message.ts` sends it.
        "compaction" if str_field(v, "status") == Some("completed") => vec![user_text(
            id,
            &crate::summary::checkpoint(
                str_field(v, "summary").unwrap_or(""),
                str_field(v, "recent").unwrap_or(""),
            ),
        )],
        _ => Vec::new(),
    }
}

/// Load a session as opencode 2.x loads it.
pub fn load_session(conn: &Connection, path: &Path, id: &str) -> Result<Session> {
    check_schema(conn, path)?;
    let exists: Option<String> = conn
        .query_row("SELECT id FROM session_v2 WHERE id = ?1", [id], |r| {
            r.get(0)
        })
        .optional()
        .at(path)?;
    if exists.is_none() {
        return Err(Error::ConversationNotFound { id: id.to_string() });
    }
    let from = latest_compaction(conn, path, id)?.unwrap_or(i64::MIN);
    let mut st = conn
        .prepare(
            "SELECT id, type, seq, time_created, data FROM session_message WHERE session_id = ?1 \
             ORDER BY seq",
        )
        .at(path)?;
    let mut rows = st.query([id]).at(path)?;
    let mut loaded: Vec<(String, String, i64, Value)> = Vec::new();
    let mut hasher = String::new();
    let (mut max_seq, mut max_time) = (0i64, 0i64);
    while let Some(r) = rows.next().at(path)? {
        let mid = lossy(r, 0).at(path)?.unwrap_or_default();
        let kind = lossy(r, 1).at(path)?.unwrap_or_default();
        let seq: i64 = r.get(2).at(path)?;
        let time = int(r, 3).at(path)?.unwrap_or(0);
        let data = lossy(r, 4).at(path)?.unwrap_or_default();
        max_seq = max_seq.max(seq);
        max_time = max_time.max(time);
        hasher.push_str(&format!("{mid}\u{0}{seq}\u{0}{kind}\u{0}{data}\u{1}"));
        if seq < from {
            continue;
        }
        let v: Value = serde_json::from_str(&data)
            .map_err(|e| bad(id, format!("message {mid}: data is not valid JSON ({e})")))?;
        loaded.push((mid, kind, seq, v));
    }
    // `history.ts`: the last native checkpoint retires the `system` rows before it (its
    // instruction baseline supersedes them); the checkpoint itself is not sent to a reader that
    // starts at a text compaction.
    let native = loaded
        .iter()
        .filter(|(_, kind, _, v)| is_native_checkpoint(kind, v))
        .map(|(_, _, seq, _)| *seq)
        .max();
    let mut envs = Vec::new();
    for (mid, kind, seq, v) in &loaded {
        let retired = kind == "system" && native.is_some_and(|n| *seq < n);
        if retired || is_native_checkpoint(kind, v) {
            continue;
        }
        envs.extend(envelopes(mid, kind, v));
    }
    let raw_messages = crate::message::join_raw(envs.iter().map(|e| e.as_ref()));
    Ok(Session {
        raw_messages,
        version: crate::util::version_digest(hasher.as_bytes()),
        max_seq,
        max_time,
        agent_summary: usize::from(from != i64::MIN && !envs.is_empty()),
    })
}

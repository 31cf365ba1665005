//! Finding, listing and loading Crush sessions. Listing reads `sessions` and each session's
//! latest model and provider; loading is Crush's own rule (`getSessionMessages` in
//! `internal/agent/agent.go@37f36e93`): every message of the session in `ORDER BY created_at`
//! order (ties in rowid order, which is how SQLite hands them), from the message
//! `sessions.summary_message_id` names on when it is among them, that message read as the
//! user's (docs/stores.md, "Crush").

use std::path::{Path, PathBuf};

use rusqlite::types::ValueRef;
use rusqlite::{Connection, OptionalExtension, Row};

use super::codec;
use super::schema::{check_schema, Schema};
use super::PROVIDER;
use crate::error::{Error, Result, SqlContext};
use crate::models::ContextLimits;
use crate::store::cells::{int, lossy};
use crate::store::{ConversationMeta, Prefilter};

/// Crush's project data directory name (`defaultDataDirectory`, `internal/config/config.go`).
pub const DATA_DIR: &str = ".crush";
/// The store file inside it (`internal/db/connect.go`).
pub const FILE: &str = "crush.db";

/// The `.crush/crush.db` Crush run in `cwd` opens: the closest `.crush` from `cwd` up to the
/// git worktree root (only `cwd` itself outside a git worktree), as Crush's
/// `LookupClosestBounded(workingDir, projectBoundary(workingDir), ".crush")` finds it; `None`
/// when there is none (Crush would create `cwd/.crush`).
pub fn find_upward(cwd: &Path) -> Option<PathBuf> {
    let root = cwd.ancestors().find(|d| d.join(".git").exists());
    let mut dirs: Vec<&Path> = Vec::new();
    match root {
        Some(root) => {
            for d in cwd.ancestors() {
                dirs.push(d);
                if d == root {
                    break;
                }
            }
        }
        None => dirs.push(cwd),
    }
    dirs.into_iter()
        .map(|d| d.join(DATA_DIR))
        .find(|d| d.is_dir())
        .map(|d| d.join(FILE))
}

/// Crush's `projects.json` (`internal/projects/projects.go`): beside `GlobalConfigData()`,
/// `$CRUSH_GLOBAL_DATA`, else `$XDG_DATA_HOME/crush`, else `~/.local/share/crush`.
pub fn projects_file() -> PathBuf {
    let var = |k| {
        std::env::var_os(k)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    };
    let dir = match (var("CRUSH_GLOBAL_DATA"), var("XDG_DATA_HOME")) {
        (Some(d), _) => d,
        (None, Some(x)) => x.join("crush"),
        (None, None) => crate::store::home_dir().join(".local/share/crush"),
    };
    dir.join("projects.json")
}

/// The store files of the projects `projects.json` lists (its `data_dir`, joined to the
/// project's `path` when relative), in its order (most recently used first); unreadable or
/// missing files give none.
pub fn project_files() -> Vec<PathBuf> {
    #[derive(serde::Deserialize)]
    struct Project {
        #[serde(default)]
        path: Option<String>,
        #[serde(default)]
        data_dir: Option<String>,
    }
    #[derive(serde::Deserialize)]
    struct List {
        #[serde(default)]
        projects: Vec<Project>,
    }
    let Ok(text) = std::fs::read_to_string(projects_file()) else {
        return Vec::new();
    };
    let Ok(list) = serde_json::from_str::<List>(&text) else {
        return Vec::new();
    };
    let mut out: Vec<PathBuf> = Vec::new();
    for p in list.projects {
        let Some(data) = p.data_dir.filter(|d| !d.is_empty()) else {
            continue;
        };
        let data = PathBuf::from(data);
        let data = match (data.is_absolute(), p.path) {
            (true, _) => data,
            (false, Some(root)) => PathBuf::from(root).join(data),
            (false, None) => continue,
        };
        let file = data.join(FILE);
        if !out.contains(&file) {
            out.push(file);
        }
    }
    out
}

/// A stored Unix time as Crush's Go reads it into an int64 (an INTEGER, or TEXT holding one);
/// a value past year 5138 is read as milliseconds. `None` for anything else.
fn unix(r: &Row<'_>, i: usize) -> rusqlite::Result<Option<i64>> {
    let n = match r.get_ref(i)? {
        ValueRef::Integer(n) => Some(n),
        ValueRef::Text(t) => std::str::from_utf8(t).ok().and_then(|t| t.parse().ok()),
        _ => None,
    };
    Ok(n.map(|n| if n > 100_000_000_000 { n / 1000 } else { n }))
}

/// Unix seconds as RFC 3339 UTC.
fn rfc3339(secs: i64) -> Option<String> {
    chrono::DateTime::from_timestamp(secs, 0).map(|t| t.format("%Y-%m-%dT%H:%M:%SZ").to_string())
}

/// The listing query: id, title, message_count, prompt_tokens, completion_tokens, created_at,
/// updated_at, parent_session_id, the latest model, the latest provider.
fn list_sql(schema: &Schema, tail: &str) -> String {
    let provider = if schema.message_has("provider") {
        "(SELECT m.provider FROM messages m WHERE m.session_id = s.id AND m.provider IS NOT NULL AND m.provider != '' ORDER BY m.created_at DESC, m.rowid DESC LIMIT 1)"
    } else {
        "NULL"
    };
    let model = if schema.message_has("model") {
        "(SELECT m.model FROM messages m WHERE m.session_id = s.id AND m.model IS NOT NULL AND m.model != '' ORDER BY m.created_at DESC, m.rowid DESC LIMIT 1)"
    } else {
        "NULL"
    };
    format!(
        "SELECT s.id, s.title, s.message_count, s.prompt_tokens, s.completion_tokens, s.created_at, s.updated_at, \
         s.parent_session_id, {model}, {provider} FROM sessions s {tail}"
    )
}

fn meta_from_row(r: &Row<'_>, limits: &ContextLimits) -> rusqlite::Result<ConversationMeta> {
    let prompt = int(r, 3)?;
    let completion = int(r, 4)?;
    let current = match (prompt, completion) {
        (None | Some(0), None | Some(0)) => None,
        (a, b) => Some(a.unwrap_or(0).saturating_add(b.unwrap_or(0))),
    };
    let model = lossy(r, 8)?;
    let created = unix(r, 5)?.and_then(rfc3339);
    let updated = unix(r, 6)?.and_then(rfc3339);
    let problem = match (&created, &updated) {
        (Some(_), Some(_)) => None,
        _ => Some(format!(
            "{} is {}, not Unix seconds; Crush cannot read this session",
            if created.is_none() {
                "created_at"
            } else {
                "updated_at"
            },
            lossy(r, if created.is_none() { 5 } else { 6 })?
                .map_or("NULL".to_string(), |v| format!("{v:?}"))
        )),
    };
    let created_at = created.unwrap_or_else(|| "1970-01-01T00:00:00Z".to_string());
    Ok(ConversationMeta {
        id: lossy(r, 0)?.unwrap_or_default(),
        name: lossy(r, 1)?.filter(|t| !t.is_empty()),
        provider: lossy(r, 9)?.unwrap_or_else(|| PROVIDER.to_string()),
        codec: Some(&codec::CODEC),
        api_mode: None,
        max_context: model.as_deref().and_then(|m| limits.of(m)),
        model,
        message_count: int(r, 2)?,
        current_context: current,
        input_tokens: prompt,
        output_tokens: completion,
        cwd: None,
        updated_at: updated.unwrap_or_else(|| created_at.clone()),
        created_at,
        problem,
        parent: lossy(r, 7)?.filter(|p| !p.is_empty()),
        archived: false,
    })
}

/// Every session, Crush's listing order (newest `updated_at` first), ties in rowid order.
pub fn scan(
    conn: &Connection,
    path: &Path,
    limits: &ContextLimits,
    prefilter: Prefilter,
    f: &mut dyn FnMut(ConversationMeta) -> bool,
) -> Result<()> {
    let schema = check_schema(conn, path)?;
    let metas = {
        let _read = crate::store::schema_util::one_read(conn, path)?;
        let mut st = conn
            .prepare(&list_sql(&schema, "ORDER BY s.updated_at DESC, s.rowid"))
            .at(path)?;
        let mut rows = st.query([]).at(path)?;
        let mut metas = Vec::new();
        while let Some(r) = rows.next().at(path)? {
            let m = meta_from_row(r, limits).at(path)?;
            if prefilter.keeps(&m) {
                metas.push(m);
            }
        }
        metas
    };
    for m in metas {
        if !f(m) {
            break;
        }
    }
    Ok(())
}

pub fn meta(
    conn: &Connection,
    path: &Path,
    limits: &ContextLimits,
    id: &str,
) -> Result<Option<ConversationMeta>> {
    let schema = check_schema(conn, path)?;
    conn.query_row(&list_sql(&schema, "WHERE s.id = ?1"), [id], |r| {
        meta_from_row(r, limits)
    })
    .optional()
    .at(path)
}

/// The providers Crush recorded on messages, sorted; [`PROVIDER`] when none is.
pub fn providers(conn: &Connection, path: &Path) -> Result<Vec<String>> {
    let schema = check_schema(conn, path)?;
    let mut out: Vec<String> = Vec::new();
    if schema.message_has("provider") {
        let mut st = conn
            .prepare("SELECT DISTINCT provider FROM messages WHERE provider IS NOT NULL AND provider != ''")
            .at(path)?;
        let mut rows = st.query([]).at(path)?;
        while let Some(r) = rows.next().at(path)? {
            if let Some(p) = lossy(r, 0).at(path)? {
                out.push(p);
            }
        }
    }
    if out.is_empty() {
        out.push(PROVIDER.to_string());
    }
    out.sort();
    out.dedup();
    Ok(out)
}

/// One `messages` row of a session, as the write needs it.
#[derive(Debug, Clone, PartialEq)]
pub struct MessageRow {
    pub rowid: i64,
    pub id: String,
    /// `created_at` when stored as an INTEGER (Unix seconds); `None` for any other class.
    pub created_at: Option<i64>,
}

/// A session as Crush loads it.
#[derive(Debug, Clone)]
pub struct Session {
    /// Every message row of the session, in Crush's order.
    pub rows: Vec<MessageRow>,
    /// Where the history Crush sends starts in [`Session::rows`] (the summary's index, else 0).
    pub start: usize,
    /// Whether the history starts at a summary (Crush's or agent-db's).
    pub summarized: bool,
    /// The history: one envelope per row from `start` on, as a JSON array.
    pub raw_messages: String,
    /// A digest of the session row and every message row, every column with its storage class.
    pub version: String,
}

/// Feed one cell, with its storage class, into a digest buffer.
fn digest_cell(buf: &mut Vec<u8>, v: ValueRef<'_>) {
    let (tag, bytes): (u8, Vec<u8>) = match v {
        ValueRef::Null => (0, Vec::new()),
        ValueRef::Integer(n) => (1, n.to_le_bytes().to_vec()),
        ValueRef::Real(f) => (2, f.to_bits().to_le_bytes().to_vec()),
        ValueRef::Text(t) => (3, t.to_vec()),
        ValueRef::Blob(b) => (4, b.to_vec()),
    };
    buf.push(tag);
    buf.extend_from_slice(&(bytes.len() as u64).to_le_bytes());
    buf.extend_from_slice(&bytes);
}

/// The `parts` cell as Crush's Go reads it (`string(parts)`): text or a BLOB holding JSON.
pub(super) fn parts_text(v: ValueRef<'_>, id: &str, msg: &str) -> Result<String> {
    let bytes = match v {
        ValueRef::Text(b) | ValueRef::Blob(b) => b,
        ValueRef::Null => {
            return Err(Error::conversation(
                id,
                format!("message {msg}: parts is NULL; Crush cannot load this session"),
            ))
        }
        ValueRef::Integer(_) | ValueRef::Real(_) => {
            return Err(Error::conversation(
                id,
                format!("message {msg}: parts is a number, not Crush's JSON parts; Crush cannot load this session"),
            ))
        }
    };
    let text = std::str::from_utf8(bytes).map_err(|_| {
        Error::conversation(
            id,
            format!(
                "message {msg}: parts is not UTF-8 JSON (a {}-byte {}; compressed parts are not a format agent-db reads)",
                bytes.len(),
                if matches!(v, ValueRef::Blob(_)) { "BLOB" } else { "TEXT" }
            ),
        )
    })?;
    if serde_json::from_str::<&serde_json::value::RawValue>(text).is_err() {
        return Err(Error::conversation(
            id,
            format!("message {msg}: parts is not JSON; Crush cannot load this session"),
        ));
    }
    Ok(text.to_string())
}

/// Crush's `getSessionMessages` over messages already in its order (`ids`, with each one's
/// role and parts): from the one `summary` names on, that one read as the user's. Returns the
/// summary's index and the history as a JSON array of envelopes.
pub(super) fn history(
    ids: &[&str],
    bodies: &[(String, String)],
    summary: Option<&str>,
) -> (Option<usize>, String) {
    let at = summary.and_then(|s| ids.iter().position(|r| *r == s));
    let start = at.unwrap_or(0);
    let mut out = String::from("[");
    for (i, (id, (role, parts))) in ids.iter().zip(bodies).enumerate().skip(start) {
        if i > start {
            out.push(',');
        }
        let role = if Some(i) == at { "user" } else { role.as_str() };
        out.push_str(&format!(
            "{{\"id\":{},\"role\":{},\"parts\":{}}}",
            serde_json::to_string(id).expect("strings serialize"),
            serde_json::to_string(role).expect("strings serialize"),
            parts
        ));
    }
    out.push(']');
    (at, out)
}

/// Load session `id` by Crush's rule.
pub fn load_session(conn: &Connection, path: &Path, id: &str) -> Result<Session> {
    let schema = check_schema(conn, path)?;
    let mut buf = Vec::new();
    let summary_col = if schema.session_has("summary_message_id") {
        "summary_message_id"
    } else {
        "NULL"
    };
    let session = {
        let mut st = conn
            .prepare(&format!(
                "SELECT {summary_col}, * FROM sessions WHERE id = ?1"
            ))
            .at(path)?;
        let mut rows = st.query([id]).at(path)?;
        let Some(r) = rows.next().at(path)? else {
            return Err(Error::ConversationNotFound { id: id.to_string() });
        };
        for i in 1..r.as_ref().column_count() {
            digest_cell(&mut buf, r.get_ref(i).at(path)?);
        }
        lossy(r, 0).at(path)?.filter(|s| !s.is_empty())
    };
    let mut st = conn
        .prepare(
            "SELECT rowid, id, role, parts, created_at, * FROM messages WHERE session_id = ?1 ORDER BY created_at, rowid",
        )
        .at(path)?;
    let mut q = st.query([id]).at(path)?;
    let mut rows = Vec::new();
    let mut bodies: Vec<(String, String)> = Vec::new();
    while let Some(r) = q.next().at(path)? {
        for i in 5..r.as_ref().column_count() {
            digest_cell(&mut buf, r.get_ref(i).at(path)?);
        }
        let rowid: i64 = r.get(0).at(path)?;
        let msg_id = lossy(r, 1).at(path)?.unwrap_or_default();
        // Only an INTEGER orders among the others as a time: SQLite sorts TEXT after every
        // number, whatever it says.
        let created_at = match r.get_ref(4).at(path)? {
            ValueRef::Integer(n) => Some(n),
            _ => None,
        };
        let role = match r.get_ref(2).at(path)? {
            ValueRef::Text(t) => String::from_utf8_lossy(t).into_owned(),
            _ => {
                return Err(Error::conversation(
                    id,
                    format!("message {msg_id}: role is not text; Crush cannot load this session"),
                ))
            }
        };
        bodies.push((role, parts_text(r.get_ref(3).at(path)?, id, &msg_id)?));
        rows.push(MessageRow {
            rowid,
            id: msg_id,
            created_at,
        });
    }
    let ids: Vec<&str> = rows.iter().map(|r| r.id.as_str()).collect();
    let (at, out) = history(&ids, &bodies, session.as_deref());
    let start = at.unwrap_or(0);
    Ok(Session {
        rows,
        start,
        summarized: at.is_some(),
        raw_messages: out,
        version: crate::util::version_digest(&buf),
    })
}

/// Session `id`'s parent, when it is a child session (a sub-agent's task).
pub fn parent_of(conn: &Connection, path: &Path, id: &str) -> Result<Option<String>> {
    conn.query_row(
        "SELECT parent_session_id FROM sessions WHERE id = ?1",
        [id],
        |r| lossy(r, 0),
    )
    .optional()
    .at(path)
    .map(|p| p.flatten().filter(|p| !p.is_empty()))
}

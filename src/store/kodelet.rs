//! kodelet's `storage.db` (stores.md §1): schema check, `init`, the streaming listing scan and
//! loading one conversation. The write side lives in `kodelet_write.rs`.
//!
//! The listing scan reads only small columns: `id` from the conversations' primary-key index
//! and everything else from `conversation_summaries` (kodelet keeps it in sync in the same
//! transaction as every save). Only a conversation without a summary row falls back to its own
//! columns. `raw_messages` is never read here.

use std::path::Path;

use rusqlite::types::ValueRef;
use rusqlite::{Connection, OptionalExtension, Row};

use crate::error::{Error, Result, SqlContext};
use crate::store::ConversationMeta;

/// Columns agent-db reads or writes, with the declared type it expects.
const CONVERSATION_COLUMNS: &[(&str, &str, bool)] = &[
    // (name, declared type, required)
    ("id", "TEXT", true),
    ("raw_messages", "TEXT", true),
    ("provider", "TEXT", true),
    ("usage", "TEXT", true),
    ("summary", "TEXT", true),
    ("created_at", "DATETIME", true),
    ("updated_at", "DATETIME", true),
    ("metadata", "TEXT", true),
    ("tool_results", "TEXT", true),
    ("cwd", "TEXT", false),
];
const SUMMARY_COLUMNS: &[(&str, &str, bool)] = &[
    ("id", "TEXT", true),
    ("message_count", "INTEGER", true),
    ("first_message", "TEXT", true),
    ("summary", "TEXT", true),
    ("usage", "TEXT", true),
    ("created_at", "DATETIME", true),
    ("updated_at", "DATETIME", true),
    ("provider", "TEXT", false),
    ("metadata", "TEXT", false),
    ("cwd", "TEXT", false),
];

/// kodelet migrations whose tables `init` creates (see migrations/kodelet_schema.sql).
const INIT_MIGRATIONS: &[(i64, &str)] = &[
    (20260204163000, "create conversations and summaries"),
    (20260204163001, "add indexes"),
    (20260204163002, "add provider to summaries"),
    (20260204163003, "add background_processes"),
    (20260204163004, "create acp_session_updates"),
    (20260226120000, "add metadata to summaries"),
    (20260331120000, "add cwd"),
    (20260719170000, "create steering_messages"),
];

/// Which of the optional columns exist.
#[derive(Debug, Clone, Copy, Default)]
pub struct Columns {
    pub conversations_cwd: bool,
    pub summaries_provider: bool,
    pub summaries_metadata: bool,
    pub summaries_cwd: bool,
}

fn table_columns(conn: &Connection, table: &str, path: &Path) -> Result<Vec<(String, String)>> {
    let mut stmt = conn
        .prepare(&format!(
            "SELECT name, type FROM pragma_table_info('{table}')"
        ))
        .at(path)?;
    let rows = stmt
        .query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?)))
        .at(path)?;
    rows.collect::<std::result::Result<Vec<_>, _>>().at(path)
}

fn check_table(
    conn: &Connection,
    path: &Path,
    table: &str,
    expected: &[(&str, &str, bool)],
) -> Result<Vec<String>> {
    let cols = table_columns(conn, table, path)?;
    let mut present = Vec::new();
    for (name, ty, required) in expected {
        match cols.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)) {
            Some((_, actual)) if actual.eq_ignore_ascii_case(ty) => present.push(name.to_string()),
            Some((_, actual)) => {
                return Err(Error::SchemaChanged {
                    path: path.to_path_buf(),
                    detail: format!(
                        "column {table}.{name} is declared {actual:?}, agent-db knows it as {ty}; refusing to touch this store"
                    ),
                })
            }
            None if *required => {
                return Err(Error::SchemaChanged {
                    path: path.to_path_buf(),
                    detail: format!(
                        "column {table}.{name} is missing; this kodelet version is not one agent-db knows"
                    ),
                })
            }
            None => {}
        }
    }
    Ok(present)
}

/// Verify that the columns agent-db reads and writes exist with the meaning it knows. Extra
/// tables, extra columns and unknown migration versions are fine.
pub fn check_schema(conn: &Connection, path: &Path) -> Result<Columns> {
    let c = check_table(conn, path, "conversations", CONVERSATION_COLUMNS)?;
    let s = check_table(conn, path, "conversation_summaries", SUMMARY_COLUMNS)?;
    let has = |v: &[String], n: &str| v.iter().any(|x| x == n);
    Ok(Columns {
        conversations_cwd: has(&c, "cwd"),
        summaries_provider: has(&s, "provider"),
        summaries_metadata: has(&s, "metadata"),
        summaries_cwd: has(&s, "cwd"),
    })
}

/// Create a fresh store in kodelet's layout at `path` (WAL mode, as kodelet requires). Refuses a
/// path that exists and is not empty. Returns the open connection.
pub fn init_store(path: &Path) -> Result<Connection> {
    if let Ok(md) = std::fs::metadata(path) {
        if md.len() > 0 || md.is_dir() {
            return Err(Error::Usage(format!(
                "{}: already exists; init only creates new stores",
                path.display()
            )));
        }
    }
    let conn = Connection::open(path).at(path)?;
    conn.busy_timeout(std::time::Duration::from_millis(5000))
        .at(path)?;
    let mode: String = conn
        .pragma_update_and_check(None, "journal_mode", "WAL", |r| r.get(0))
        .at(path)?;
    if !mode.eq_ignore_ascii_case("wal") {
        return Err(Error::Usage(format!(
            "{}: cannot use WAL journal mode here (got {mode}); kodelet requires WAL",
            path.display()
        )));
    }
    conn.pragma_update(None, "foreign_keys", "ON").at(path)?;
    conn.execute_batch(include_str!("../../migrations/kodelet_schema.sql"))
        .at(path)?;
    let now = crate::gotime::format_go(&crate::gotime::now(), None);
    for (version, description) in INIT_MIGRATIONS {
        conn.execute(
            "INSERT OR IGNORE INTO schema_migrations(version, applied_at, description) VALUES (?1, ?2, ?3)",
            rusqlite::params![version, now, description],
        )
        .at(path)?;
    }
    Ok(conn)
}

/// The listing query, most recently updated first by the stored text (kodelet's own order),
/// ties in rowid order. Columns: id, provider, usage, created_at, updated_at, name, metadata,
/// message_count (NULL when there is no summary row).
pub const LIST_SQL: &str = "SELECT c.id,
  COALESCE(s.provider, c.provider),
  COALESCE(s.usage, c.usage),
  COALESCE(s.created_at, c.created_at),
  c.updated_at,
  CASE WHEN s.id IS NULL THEN c.summary ELSE s.summary END,
  CASE WHEN s.id IS NULL THEN c.metadata ELSE s.metadata END,
  s.message_count,
  CASE WHEN s.id IS NULL THEN c.cwd ELSE s.cwd END
FROM conversations c LEFT JOIN conversation_summaries s ON s.id = c.id
ORDER BY c.updated_at DESC, c.rowid";

/// The listing query for stores whose summaries lack provider/metadata columns (old kodelet).
const LIST_SQL_OLD: &str = "SELECT c.id, c.provider, COALESCE(s.usage, c.usage),
  COALESCE(s.created_at, c.created_at), c.updated_at,
  CASE WHEN s.id IS NULL THEN c.summary ELSE s.summary END, c.metadata, s.message_count, NULL
FROM conversations c LEFT JOIN conversation_summaries s ON s.id = c.id
ORDER BY c.updated_at DESC, c.rowid";

/// The SQLite type name of a value, for messages.
pub fn sql_type(v: ValueRef<'_>) -> &'static str {
    match v {
        ValueRef::Null => "NULL",
        ValueRef::Integer(_) => "INTEGER",
        ValueRef::Real(_) => "REAL",
        ValueRef::Text(_) => "TEXT",
        ValueRef::Blob(_) => "BLOB",
    }
}

/// A text column read leniently: invalid UTF-8 (which a Go writer can store) becomes U+FFFD
/// instead of failing the whole listing; BLOBs are read the same way.
fn lossy(r: &Row<'_>, i: usize) -> rusqlite::Result<Option<String>> {
    Ok(match r.get_ref(i)? {
        ValueRef::Null => None,
        ValueRef::Text(b) | ValueRef::Blob(b) => Some(String::from_utf8_lossy(b).into_owned()),
        ValueRef::Integer(n) => Some(n.to_string()),
        ValueRef::Real(f) => Some(f.to_string()),
    })
}

fn meta_from_row(r: &Row<'_>) -> rusqlite::Result<ConversationMeta> {
    let mut m = ConversationMeta::from_columns(
        lossy(r, 0)?.unwrap_or_default(),
        lossy(r, 1)?.unwrap_or_default(),
        lossy(r, 2)?,
        lossy(r, 3)?.unwrap_or_default(),
        lossy(r, 4)?.unwrap_or_default(),
        lossy(r, 5)?,
        lossy(r, 6)?.as_deref(),
        r.get(7).ok(),
    );
    m.cwd = lossy(r, 8)?;
    Ok(m)
}

/// Stream every conversation's metadata in listing order; `f` returns `false` to stop early.
pub fn scan(
    conn: &Connection,
    path: &Path,
    mut f: impl FnMut(ConversationMeta) -> bool,
) -> Result<()> {
    let cols = check_schema(conn, path)?;
    let sql = if cols.summaries_provider && cols.summaries_metadata {
        LIST_SQL
    } else {
        LIST_SQL_OLD
    };
    let mut stmt = conn.prepare(sql).at(path)?;
    let mut rows = stmt.query([]).at(path)?;
    while let Some(r) = rows.next().at(path)? {
        if !f(meta_from_row(r).at(path)?) {
            break;
        }
    }
    Ok(())
}

/// One conversation's metadata, or `None`.
pub fn meta(conn: &Connection, path: &Path, id: &str) -> Result<Option<ConversationMeta>> {
    let cols = check_schema(conn, path)?;
    let base = if cols.summaries_provider && cols.summaries_metadata {
        LIST_SQL
    } else {
        LIST_SQL_OLD
    };
    let sql = base.replace("ORDER BY c.updated_at DESC, c.rowid", "WHERE c.id = ?1");
    conn.query_row(&sql, [id], meta_from_row)
        .optional()
        .at(path)
}

/// How the writer recognizes that `updated_at` changed since the conversation was read: the
/// value's storage class and exact bytes (a Go writer can store anything there, and a number or
/// invalid UTF-8 must compare as exactly as text does).
pub fn version_marker(v: ValueRef<'_>) -> String {
    match v {
        ValueRef::Text(t) => match std::str::from_utf8(t) {
            Ok(s) => format!("text:{s}"),
            Err(_) => format!("text-bytes:{}", hex::encode(t)),
        },
        ValueRef::Integer(i) => format!("integer:{i}"),
        ValueRef::Real(f) => format!("real:{}", f.to_bits()),
        ValueRef::Blob(b) => format!("blob:{}", hex::encode(b)),
        ValueRef::Null => "null".to_string(),
    }
}

/// Everything agent-db needs of one conversation to plan and write its compaction.
#[derive(Debug, Clone)]
pub struct KodeletRow {
    pub id: String,
    pub raw_messages: String,
    pub provider: String,
    pub usage: String,
    pub name: Option<String>,
    pub created_at: String,
    pub updated_at: String,
    /// [`version_marker`] of `updated_at`.
    pub version_marker: String,
    pub metadata: Option<String>,
    pub tool_results: Option<String>,
    pub cwd: Option<String>,
}

/// Load one conversation's full row.
pub fn load(conn: &Connection, path: &Path, id: &str) -> Result<KodeletRow> {
    let cols = check_schema(conn, path)?;
    let cwd = if cols.conversations_cwd {
        "cwd"
    } else {
        "NULL"
    };
    let sql = format!(
        "SELECT id, raw_messages, provider, usage, summary, created_at, updated_at, metadata, tool_results, {cwd}
         FROM conversations WHERE id = ?1"
    );
    let row = conn
        .query_row(&sql, [id], |r| {
            let raw = match r.get_ref(1)? {
                ValueRef::Text(b) | ValueRef::Blob(b) => {
                    String::from_utf8(b.to_vec()).map_err(|e| {
                        format!("is not valid UTF-8 (byte {})", e.utf8_error().valid_up_to())
                    })
                }
                ValueRef::Null => Err("is NULL".to_string()),
                other => Err(format!("holds a {} instead of JSON text", sql_type(other))),
            };
            Ok((
                raw,
                KodeletRow {
                    id: lossy(r, 0)?.unwrap_or_default(),
                    raw_messages: String::new(),
                    provider: lossy(r, 2)?.unwrap_or_default(),
                    usage: lossy(r, 3)?.unwrap_or_default(),
                    name: lossy(r, 4)?,
                    created_at: lossy(r, 5)?.unwrap_or_default(),
                    updated_at: lossy(r, 6)?.unwrap_or_default(),
                    version_marker: version_marker(r.get_ref(6)?),
                    metadata: lossy(r, 7)?,
                    tool_results: lossy(r, 8)?,
                    cwd: lossy(r, 9)?,
                },
            ))
        })
        .optional()
        .at(path)?;
    let (raw, mut conv) = row.ok_or_else(|| Error::ConversationNotFound { id: id.to_string() })?;
    conv.raw_messages = raw.map_err(|why| {
        Error::conversation(
            id,
            format!("raw_messages {why}; agent-db will not touch it"),
        )
    })?;
    Ok(conv)
}

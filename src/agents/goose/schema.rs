//! goose's schema: the version in `schema_version`, refused above the newest agent-db knows,
//! and the columns present (everything is addressed by name: migrated files append columns and
//! several are conditional; docs/stores.md, "goose").

use std::collections::HashSet;
use std::path::Path;

use rusqlite::{Connection, OptionalExtension};

use crate::error::{Result, SqlContext};
use crate::store::schema_util::{changed, columns};

/// The newest goose schema version agent-db knows (aaif-goose `017176d0`).
pub const NEWEST_KNOWN: i64 = 17;
/// The first version with `messages.metadata_json`: below it a compaction cannot be expressed.
pub const FIRST_WRITABLE: i64 = 3;

const SESSION_REQUIRED: &[&str] = &[
    "id",
    "working_dir",
    "created_at",
    "updated_at",
    "total_tokens",
];
const MESSAGE_REQUIRED: &[&str] = &[
    "id",
    "session_id",
    "role",
    "content_json",
    "created_timestamp",
];

/// What the file has.
#[derive(Debug, Clone)]
pub struct Schema {
    pub version: i64,
    pub sessions: HashSet<String>,
    pub messages: HashSet<String>,
}

impl Schema {
    pub fn session_has(&self, c: &str) -> bool {
        self.sessions.contains(c)
    }
    pub fn message_has(&self, c: &str) -> bool {
        self.messages.contains(c)
    }
    /// Whether agent-db can write a compaction (the visibility flags exist).
    pub fn writable(&self) -> bool {
        self.version >= FIRST_WRITABLE && self.message_has("metadata_json")
    }
}

/// Read and check the schema (again inside every write transaction).
pub fn check_schema(conn: &Connection, path: &Path) -> Result<Schema> {
    let version: Option<i64> = conn
        .query_row("SELECT MAX(version) FROM schema_version", [], |r| r.get(0))
        .optional()
        .at(path)?
        .flatten();
    let version = version.unwrap_or(0);
    if version > NEWEST_KNOWN {
        return Err(changed(
            path,
            format!(
                "goose schema version {version} is newer than any agent-db knows (the newest it knows is \
                 {NEWEST_KNOWN}); a newer goose wrote this file, so agent-db will not touch it (upgrade agent-db)"
            ),
        ));
    }
    let sessions = columns(conn, "sessions", path)?;
    let messages = columns(conn, "messages", path)?;
    for (table, have, need) in [
        ("sessions", &sessions, SESSION_REQUIRED),
        ("messages", &messages, MESSAGE_REQUIRED),
    ] {
        if let Some(missing) = need.iter().find(|c| !have.contains(**c)) {
            return Err(changed(
                path,
                format!("column {table}.{missing} is missing; goose schema version {version} is not one agent-db knows"),
            ));
        }
    }
    Ok(Schema {
        version,
        sessions,
        messages,
    })
}

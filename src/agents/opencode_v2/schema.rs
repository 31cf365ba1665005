//! opencode 2.x's schema (docs/stores.md "opencode 2.x storage"): the migrations recorded in
//! `migration`, from `20260804233008_loose_psylocke` (which made `session_v2` and the typed
//! `session_message` rows) on, and the columns agent-db reads. A file whose newest migration is
//! newer than [`NEWEST_KNOWN`] is read (list, show) but never written.

use std::collections::HashSet;
use std::path::Path;

use rusqlite::{Connection, OptionalExtension};

use crate::error::{Result, SqlContext};
use crate::store::schema_util::{changed, columns};

/// The migration that introduced the 2.x tables.
pub const FIRST: &str = "20260804233008_loose_psylocke";
/// The newest opencode migration agent-db knows (opencode's `migration.gen.ts`, m48).
pub const NEWEST_KNOWN: &str = "20261007190000_azure_cli_external_credential";

const SESSION_REQUIRED: &[&str] = &[
    "id",
    "title",
    "directory",
    "model",
    "tokens_input",
    "tokens_output",
    "time_created",
    "time_updated",
    "parent_id",
    "time_archived",
];
const MESSAGE_REQUIRED: &[&str] = &[
    "id",
    "session_id",
    "type",
    "seq",
    "time_created",
    "time_updated",
    "data",
];

/// The `kv` key of opencode's v1→v2 import progress.
pub const IMPORT_KEY: &str = "migration.v1-v2";

/// What the file records.
#[derive(Debug, Clone)]
pub struct Schema {
    /// The newest migration recorded.
    pub newest: String,
    /// A file upgraded from 1.x whose v1→v2 import has not completed: opencode is still
    /// copying sessions into the 2.x tables (and replaces a session's rows when it does).
    pub import_pending: bool,
}

impl Schema {
    /// Whether agent-db writes to this file.
    pub fn writable(&self) -> bool {
        stamp(&self.newest).is_some_and(|s| s <= stamp(NEWEST_KNOWN).expect("stamped"))
    }
}

/// The 14-digit prefix of a migration id.
fn stamp(id: &str) -> Option<&str> {
    let s = id.get(..14)?;
    (s.bytes().all(|b| b.is_ascii_digit()) && id.as_bytes().get(14) == Some(&b'_')).then_some(s)
}

fn strings(conn: &Connection, path: &Path, sql: &str) -> Result<Vec<String>> {
    let mut st = conn.prepare(sql).at(path)?;
    let rows = st
        .query_map([], |r| r.get::<_, Option<String>>(0))
        .at(path)?;
    let all: Vec<Option<String>> = rows.collect::<std::result::Result<_, _>>().at(path)?;
    Ok(all.into_iter().flatten().collect())
}

/// Read and check the schema (again inside every write transaction). A newer migration is
/// accepted here (the file is read); [`Schema::writable`] decides the writes.
pub fn check_schema(conn: &Connection, path: &Path) -> Result<Schema> {
    let tables: HashSet<String> = strings(
        conn,
        path,
        "SELECT name FROM sqlite_master WHERE type = 'table'",
    )?
    .into_iter()
    .collect();
    if !tables.contains("migration") {
        return Err(changed(
            path,
            "no migration table, so agent-db cannot tell which opencode 2.x schema this is".into(),
        ));
    }
    let ids = strings(conn, path, "SELECT id FROM migration")?;
    let mut newest = String::new();
    for id in &ids {
        if stamp(id).is_none() {
            return Err(changed(
                path,
                format!("opencode migration {id:?} is not one agent-db knows, so it will not touch this file"),
            ));
        }
        if id.as_str() > newest.as_str() {
            newest = id.clone();
        }
    }
    if newest.as_str() < FIRST {
        return Err(changed(
            path,
            format!(
                "the file has opencode's 2.x tables but its newest migration is {newest:?}, older than {FIRST}; \
                 agent-db does not know this layout"
            ),
        ));
    }
    for (table, need) in [
        ("session_v2", SESSION_REQUIRED),
        ("session_message", MESSAGE_REQUIRED),
    ] {
        let have = columns(conn, table, path)?;
        if let Some(missing) = need.iter().find(|c| !have.contains(**c)) {
            return Err(changed(
                path,
                format!("column {table}.{missing} is missing; this is not an opencode 2.x schema agent-db knows"),
            ));
        }
    }
    let import_pending = tables.contains("session")
        && {
            let phase: Option<String> = if tables.contains("kv") {
                conn.query_row(
                "SELECT json_extract(value, '$.phase') FROM kv WHERE key = ?1 AND json_valid(value)",
                [IMPORT_KEY],
                |r| r.get(0),
            )
            .optional()
            .at(path)?
            .flatten()
            } else {
                None
            };
            phase.as_deref() != Some("completed")
        };
    Ok(Schema {
        newest,
        import_pending,
    })
}

/// [`check_schema`] for a write: a file newer than agent-db knows is refused, naming both.
pub fn check_writable(conn: &Connection, path: &Path) -> Result<Schema> {
    let s = check_schema(conn, path)?;
    if !s.writable() {
        return Err(changed(
            path,
            format!(
                "opencode schema version {} is newer than any agent-db knows (the newest it knows is {NEWEST_KNOWN}); \
                 a newer opencode wrote this file, so agent-db reads it but will not write to it (upgrade agent-db)",
                s.newest
            ),
        ));
    }
    if s.import_pending {
        return Err(changed(
            path,
            format!(
                "opencode has not finished importing this file's 1.x sessions into its 2.x tables (kv {IMPORT_KEY} is not \
                 completed); agent-db reads it but will not write to it until opencode has run once to finish the import"
            ),
        ));
    }
    Ok(s)
}

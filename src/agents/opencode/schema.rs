//! opencode's schema: the migrations it records (`migration` since the Effect-era runner,
//! `__drizzle_migrations` before), refused when one is newer than the newest
//! agent-db knows, and the columns present (addressed by name: an upgraded file has a different
//! `session` column order from a fresh one, and older files lack the totals columns).

use std::collections::HashSet;
use std::path::Path;

use rusqlite::Connection;

use super::super::opencode_family::{stamp, Flavor};
use crate::error::{Result, SqlContext};
use crate::store::schema_util::{changed, columns};

/// The newest opencode migration agent-db knows (the newest the released opencode 1.18.34 records).
pub const NEWEST_KNOWN: &str = "20260622202450_simplify_session_input";
/// The migration that added the event log (#10); stores older than it were written by an
/// opencode whose loader ignores `tail_start_id` (1.2.27 and other files from before this migration).
pub const EVENTS_MIGRATION: &str = "20260323234822_events";

const SESSION_REQUIRED: &[&str] = &["id", "title", "directory", "time_created", "time_updated"];
const MESSAGE_REQUIRED: &[&str] = &["id", "session_id", "time_created", "time_updated", "data"];
const PART_REQUIRED: &[&str] = &[
    "id",
    "message_id",
    "session_id",
    "time_created",
    "time_updated",
    "data",
];

/// Which migration runner wrote the file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Era {
    /// drizzle's `__drizzle_migrations` only (opencode up to 1.14.x).
    Drizzle,
    /// opencode's own `migration` table (1.18.x; `__drizzle_migrations` may remain).
    Effect,
}

/// What the file has.
#[derive(Debug, Clone)]
pub struct Schema {
    pub era: Era,
    /// The newest migration recorded.
    pub newest: String,
    pub session: HashSet<String>,
    /// Whether the `event` and `event_sequence` tables exist.
    pub events: bool,
}

impl Schema {
    pub fn session_has(&self, c: &str) -> bool {
        self.session.contains(c)
    }

    /// Whether opencode's loader of this file honours `tail_start_id`.
    pub fn keeps_tail(&self) -> bool {
        self.events
    }

    pub fn describe(&self) -> String {
        let era = match self.era {
            Era::Drizzle => "drizzle",
            Era::Effect => "effect",
        };
        format!("{era} era, newest migration {}", self.newest)
    }
}

fn strings(conn: &Connection, path: &Path, sql: &str) -> Result<Vec<String>> {
    let mut st = conn.prepare(sql).at(path)?;
    let rows = st
        .query_map([], |r| r.get::<_, Option<String>>(0))
        .at(path)?;
    let all: Vec<Option<String>> = rows.collect::<std::result::Result<_, _>>().at(path)?;
    Ok(all.into_iter().flatten().collect())
}

/// The migrations the file records (ids), `None` when they cannot be read: for detection.
pub(super) fn recorded_ids(conn: &Connection) -> Option<Vec<String>> {
    let path = Path::new("");
    let tables: HashSet<String> = strings(
        conn,
        path,
        "SELECT name FROM sqlite_master WHERE type = 'table'",
    )
    .ok()?
    .into_iter()
    .collect();
    recorded(conn, path, &tables).ok().map(|(_, ids)| ids)
}

/// The migrations the file records (ids), and its era.
fn recorded(
    conn: &Connection,
    path: &Path,
    tables: &HashSet<String>,
) -> Result<(Era, Vec<String>)> {
    if tables.contains("migration") {
        let ids = strings(conn, path, "SELECT id FROM migration")?;
        if !ids.is_empty() || !tables.contains("__drizzle_migrations") {
            return Ok((Era::Effect, ids));
        }
    }
    if !tables.contains("__drizzle_migrations") {
        return Err(changed(
            path,
            "no migration or __drizzle_migrations table, so agent-db cannot tell which opencode schema this is".into(),
        ));
    }
    let cols = columns(conn, "__drizzle_migrations", path)?;
    let ids = if cols.contains("name") {
        strings(conn, path, "SELECT name FROM __drizzle_migrations")?
    } else {
        // The oldest drizzle layout: `created_at` is Date.UTC of the folder's 14-digit prefix.
        strings(
            conn,
            path,
            "SELECT CAST(created_at AS TEXT) FROM __drizzle_migrations",
        )?
        .into_iter()
        .map(|ms| {
            ms.parse::<i64>()
                .ok()
                .and_then(chrono::DateTime::from_timestamp_millis)
                .map(|t| format!("{}_", t.format("%Y%m%d%H%M%S")))
                .unwrap_or(ms)
        })
        .collect()
    };
    Ok((Era::Drizzle, ids))
}

/// opencode itself.
pub static OPENCODE: Flavor = Flavor {
    agent: "opencode",
    upstream_newest: NEWEST_KNOWN,
    own: &[],
};

/// Read and check the schema of an opencode file (again inside every write transaction).
pub fn check_schema(conn: &Connection, path: &Path) -> Result<Schema> {
    check_schema_as(conn, path, &OPENCODE)
}

/// [`check_schema`] for the files `flavor` writes: every recorded migration one it carries.
pub fn check_schema_as(conn: &Connection, path: &Path, flavor: &Flavor) -> Result<Schema> {
    let (schema, ids) = inspect_ids(conn, path)?;
    for id in &ids {
        flavor.admit(id, path)?;
    }
    Ok(schema)
}

/// The schema as the file has it, its migrations unchecked: for reads of a file the store's
/// open already checked (`check_schema_as`).
pub(crate) fn inspect(conn: &Connection, path: &Path) -> Result<Schema> {
    inspect_ids(conn, path).map(|(s, _)| s)
}

fn inspect_ids(conn: &Connection, path: &Path) -> Result<(Schema, Vec<String>)> {
    let tables: HashSet<String> = strings(
        conn,
        path,
        "SELECT name FROM sqlite_master WHERE type = 'table'",
    )?
    .into_iter()
    .collect();
    let (era, ids) = recorded(conn, path, &tables)?;
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
    let session = columns(conn, "session", path)?;
    let message = columns(conn, "message", path)?;
    let part = columns(conn, "part", path)?;
    for (table, have, need) in [
        ("session", &session, SESSION_REQUIRED),
        ("message", &message, MESSAGE_REQUIRED),
        ("part", &part, PART_REQUIRED),
    ] {
        if let Some(missing) = need.iter().find(|c| !have.contains(**c)) {
            return Err(changed(
                path,
                format!("column {table}.{missing} is missing; this is not an opencode schema agent-db knows"),
            ));
        }
    }
    let schema = Schema {
        era,
        newest,
        session,
        events: tables.contains("event") && tables.contains("event_sequence"),
    };
    Ok((schema, ids))
}

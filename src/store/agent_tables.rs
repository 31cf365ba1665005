//! agent-db's own tables (`agent_db_` prefix): applied from `migrations/` in one transaction,
//! tracked in `agent_db_migrations`, never touching the agent's tables or its migration rows.
//!
//! Rules: never edit or reorder a released migration; only append new files.

use rusqlite::{Connection, OptionalExtension};

/// (version, name, SQL). Append-only.
pub const MIGRATIONS: &[(i64, &str, &str)] = &[
    (
        1,
        "archive_and_audit",
        include_str!("../../migrations/0001_archive_and_audit.sql"),
    ),
    (
        2,
        "archive_packed",
        include_str!("../../migrations/0002_archive_packed.sql"),
    ),
    (
        3,
        "compaction_retention",
        include_str!("../../migrations/0003_compaction_retention.sql"),
    ),
    (
        4,
        "retirements",
        include_str!("../../migrations/0004_retirements.sql"),
    ),
];

const TRACKING: &str = "CREATE TABLE IF NOT EXISTS agent_db_migrations (
  version INTEGER PRIMARY KEY,
  name TEXT NOT NULL,
  applied_at TEXT NOT NULL
)";

/// Whether the tracking table exists.
pub fn present(conn: &Connection) -> rusqlite::Result<bool> {
    conn.prepare_cached(
        "SELECT 1 FROM sqlite_master WHERE type='table' AND name='agent_db_migrations'",
    )?
    .query_row([], |_| Ok(()))
    .optional()
    .map(|o| o.is_some())
}

/// The newest migration this agent-db knows.
fn latest() -> i64 {
    MIGRATIONS.last().map(|m| m.0).unwrap_or(0)
}

/// Why agent-db's tables in this store are too new for this agent-db, if they are: a newer
/// agent-db upgraded them, and this one could misread its archive (a restore could write back a
/// value it cannot decode), so write commands refuse the store.
pub fn newer(conn: &Connection) -> rusqlite::Result<Option<String>> {
    let max: i64 = conn.query_row(
        "SELECT COALESCE(MAX(version),0) FROM agent_db_migrations",
        [],
        |r| r.get(0),
    )?;
    Ok(too_new(max))
}

fn too_new(max: i64) -> Option<String> {
    (max > latest()).then(|| {
        format!(
            "agent-db's own tables are at version {max}, newer than this agent-db knows ({}); \
             upgrade agent-db",
            latest()
        )
    })
}

/// [`too_new`] as an error, for [`migrate`].
fn refuse_newer(max: i64) -> rusqlite::Result<()> {
    match too_new(max) {
        Some(why) => Err(rusqlite::Error::ToSqlConversionFailure(why.into())),
        None => Ok(()),
    }
}

/// Apply missing migrations in one `BEGIN IMMEDIATE` transaction. Refuses tables a newer
/// agent-db made (see [`refuse_newer`]).
pub fn migrate(conn: &mut Connection) -> rusqlite::Result<()> {
    if present(conn)? {
        let max: i64 = conn.query_row(
            "SELECT COALESCE(MAX(version),0) FROM agent_db_migrations",
            [],
            |r| r.get(0),
        )?;
        refuse_newer(max)?;
        if max == latest() {
            return Ok(());
        }
    }
    let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
    tx.execute_batch(TRACKING)?;
    let max: i64 = tx.query_row(
        "SELECT COALESCE(MAX(version),0) FROM agent_db_migrations",
        [],
        |r| r.get(0),
    )?;
    let now = crate::gotime::rfc3339_utc(&crate::gotime::now());
    for (version, name, sql) in MIGRATIONS {
        if *version > max {
            tx.execute_batch(sql)?;
            tx.execute(
                "INSERT INTO agent_db_migrations(version, name, applied_at) VALUES (?1, ?2, ?3)",
                rusqlite::params![version, name, now],
            )?;
        }
    }
    tx.commit()
}

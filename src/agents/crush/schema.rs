//! Crush's schema: the goose-format migrations recorded in `goose_db_version`, refused above
//! the newest agent-db knows or when one is not known by name, and the columns present
//! (everything is addressed by name; docs/stores.md, "Crush").

use std::collections::{BTreeMap, HashSet};
use std::path::Path;

use rusqlite::Connection;

use crate::error::{Result, SqlContext};
use crate::store::schema_util::{changed, columns};

/// Every migration of Crush's `internal/db/migrations/` agent-db knows, by version and name
/// (docs/stores.md, "Crush": the first seven are on upstream `main` at `37f36e93`; the others
/// were seen in the upstream repository's history, each at the commit docs/stores.md names).
pub const KNOWN_MIGRATIONS: &[(i64, &str)] = &[
    (20250424200609, "initial"),
    (20250515105448, "add_summary_message_id"),
    (20250624000000, "add_created_at_indexes"),
    (20250627000000, "add_provider_to_messages"),
    (20250810000000, "add_is_summary_message"),
    (20250811000000, "add_hook_outputs_to_messages"),
    (20250811234710, "add_todos"),
    (20250812000000, "add_todos_to_sessions"),
    (20251120000000, "add_metadata_to_messages"),
    (20251220000000, "add_rate_limit_tracking"),
    (
        20260127000000,
        "add_read_files_table / add_tool_chain_summary",
    ),
    (20260128000000, "add_past_memory_to_sessions"),
    (20260221000000, "add_context_epoch_and_file_tracking_fields"),
    (20260305000000, "add_dispatch_system"),
    (20260309000000, "add_collaboration_mode_to_sessions"),
    (20260310000000, "add_last_prompt_tokens"),
    (20260311000000, "add_last_completion_tokens"),
    (20260324000000, "add_workspace_cwd_to_sessions"),
    (20260325000000, "add_handoff_to_sessions"),
    (20260327000000, "add_permission_mode_to_sessions"),
    (20260401000000, "add_models_to_sessions"),
    (20260405000000, "add_checkpoints"),
    (20260406000000, "add_revert_to_sessions"),
    (20260407000000, "add_last_summary_at"),
    (20260511112917, "add_snapshots_table"),
    (20260511114224, "add_worktrees_table"),
    (20260512141646, "add_session_archived_at"),
    (20260618000000, "add_message_id_to_files"),
    (20260618190000, "add_is_new_to_files"),
    (20260714000000, "add_sources_to_sessions"),
    (20260714010000, "add_goal_state_to_sessions"),
    (20260902120000, "add_agent_mode_to_sessions"),
    (20260909000000, "add_notebook_tables"),
    (20260911000000, "add_notebook_succeeded"),
    (20260912000000, "add_notebook_error_headline"),
    (20260913000000, "add_segment_coverage"),
    (20260914000000, "add_notebook_verified"),
    (20260924000000, "add_skills_disabled_servers"),
    (20260925000000, "add_skills_enabled_servers"),
];

/// The newest Crush migration agent-db knows.
pub const NEWEST_KNOWN: i64 = 20260925000000;

/// The first migration with `messages.is_summary_message`: below it Crush's own summary cannot
/// be told from an answer, so agent-db does not write a compaction (the file is listed and shown).
pub const FIRST_WRITABLE: i64 = 20250810000000;

const SESSION_REQUIRED: &[&str] = &[
    "id",
    "parent_session_id",
    "title",
    "message_count",
    "prompt_tokens",
    "completion_tokens",
    "updated_at",
    "created_at",
];
const MESSAGE_REQUIRED: &[&str] = &[
    "id",
    "session_id",
    "role",
    "parts",
    "created_at",
    "updated_at",
];

/// A migration's words: `20250810000000_add_is_summary_message`.
pub fn migration_name(version: i64) -> String {
    match KNOWN_MIGRATIONS.iter().find(|(v, _)| *v == version) {
        Some((v, n)) => format!("{v}_{n}"),
        None => version.to_string(),
    }
}

/// What the file has.
#[derive(Debug, Clone)]
pub struct Schema {
    /// The newest migration applied (goose's current version).
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
    /// Whether agent-db writes a compaction here: the summary pointer and flag exist.
    pub fn writable(&self) -> bool {
        self.version >= FIRST_WRITABLE
            && self.session_has("summary_message_id")
            && self.message_has("is_summary_message")
    }
}

/// The migrations applied, as goose reads `goose_db_version`: a version's latest row says
/// whether it is applied (a `Down` adds a row with `is_applied` 0). Version 0 is goose's own
/// first row.
fn applied(conn: &Connection, path: &Path) -> Result<Vec<i64>> {
    let mut st = conn
        .prepare("SELECT version_id, is_applied FROM goose_db_version ORDER BY id")
        .at(path)?;
    let mut rows = st.query([]).at(path)?;
    let mut latest: BTreeMap<i64, bool> = BTreeMap::new();
    while let Some(r) = rows.next().at(path)? {
        let version = crate::store::cells::int(r, 0).at(path)?;
        let applied = crate::store::cells::int(r, 1).at(path)?;
        match (version, applied) {
            (Some(v), Some(a)) => {
                latest.insert(v, a != 0);
            }
            _ => return Err(changed(
                path,
                "goose_db_version holds a row whose version_id or is_applied is not an integer; \
                     Crush's migration record is not one agent-db can read"
                    .into(),
            )),
        }
    }
    Ok(latest
        .into_iter()
        .filter(|(v, a)| *a && *v != 0)
        .map(|(v, _)| v)
        .collect())
}

/// Read and check the schema (again inside every write transaction).
pub fn check_schema(conn: &Connection, path: &Path) -> Result<Schema> {
    let applied = applied(conn, path)?;
    let version = applied.iter().copied().max().unwrap_or(0);
    if version > NEWEST_KNOWN {
        return Err(changed(
            path,
            format!(
                "Crush migration {version} is newer than any agent-db knows (the newest it knows is {}); \
                 a newer Crush wrote this file, so agent-db will not touch it (upgrade agent-db)",
                migration_name(NEWEST_KNOWN)
            ),
        ));
    }
    if let Some(v) = applied
        .iter()
        .find(|v| !KNOWN_MIGRATIONS.iter().any(|(k, _)| k == *v))
    {
        return Err(changed(
            path,
            format!(
                "Crush migration {v} is not one agent-db knows (it knows {} migrations up to {}); \
                 a Crush build agent-db has not read wrote this file, so agent-db will not touch it",
                KNOWN_MIGRATIONS.len(),
                migration_name(NEWEST_KNOWN)
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
                format!(
                    "column {table}.{missing} is missing; Crush migration {} is not one agent-db knows this way",
                    migration_name(version)
                ),
            ));
        }
    }
    Ok(Schema {
        version,
        sessions,
        messages,
    })
}

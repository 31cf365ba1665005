//! docker-agent's schema generations: the migrations agent-db knows, and what a file has
//! (`pkg/session/migrations.go@95774d90` and `@7e0e60f0`). Detection only reads.

use std::path::Path;

use rusqlite::{Connection, OptionalExtension};

use crate::error::{Result, SqlContext};
use crate::store::schema_util::changed;

/// docker-agent's migrations, by id (`pkg/session/migrations.go`). Ids 1–28 are the same in
/// every line; from 29 on the numbering differs between docker-agent's lines: the
/// `docker/docker-agent` line has `029_add_root_kind_to_generated_media_manifest` as 29, the
/// current line (`krissetto/docker-agent@95774d90`, migrations 1–38) inserted
/// `029_add_generated_media_blob_table` and moved root_kind to 30. Both are listed; a migration
/// counts as known when its id and name are a pair listed here.
pub const KNOWN_MIGRATIONS: &[(i64, &str)] = &[
    (1, "001_add_tools_approved_column"),
    (2, "002_add_usage_column"),
    (3, "003_add_output_tokens_column"),
    (4, "004_add_title_column"),
    (5, "005_add_cost_column"),
    (6, "006_add_send_user_message_column"),
    (7, "007_add_max_iterations_column"),
    (8, "008_add_working_dir_column"),
    (9, "009_add_starred_column"),
    (10, "010_add_permissions_column"),
    (11, "011_add_agent_model_overrides_column"),
    (12, "012_add_custom_models_used_column"),
    (13, "013_add_thinking_column"),
    (14, "014_normalize_session_items"),
    (15, "015_migrate_messages_to_session_items"),
    (16, "016_add_branching_columns"),
    (17, "017_add_split_diff_view_column"),
    (18, "018_add_session_items_type_index"),
    (19, "019_drop_branch_and_split_diff_columns"),
    (20, "020_drop_messages_column"),
    (21, "021_add_first_kept_entry_column"),
    (22, "022_add_instruction_context_column"),
    (23, "023_add_cost_to_session_items"),
    (24, "024_add_safety_policy_column"),
    (25, "025_add_model_usage_to_session_items"),
    (26, "026_add_session_attributes_column"),
    (27, "027_add_session_origin_column"),
    (28, "028_add_generated_media_manifest_table"),
    (29, "029_add_root_kind_to_generated_media_manifest"),
    (29, "029_add_generated_media_blob_table"),
    (30, "030_add_root_kind_to_generated_media_manifest"),
    (31, "031_add_actor_pending_message_columns"),
    (32, "032_add_subagent_trees_table"),
    (33, "033_add_session_todos_table"),
    (34, "034_add_child_coordination"),
    (35, "035_complete_child_coordination_schema"),
    (36, "036_add_input_provenance"),
    (37, "037_session_input_batches"),
    (38, "038_child_report_outcome"),
];

/// The newest docker-agent migration agent-db knows.
pub const NEWEST_KNOWN: i64 = 38;

/// The newest known migration's name.
pub fn newest_known_name() -> &'static str {
    KNOWN_MIGRATIONS[KNOWN_MIGRATIONS.len() - 1].1
}

/// Whether `(id, name)` is a migration agent-db knows.
pub fn is_known(id: i64, name: &str) -> bool {
    KNOWN_MIGRATIONS.iter().any(|(i, n)| *i == id && *n == name)
}

/// What one docker-agent file has, from its `migrations` rows and its columns.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Schema {
    /// `MAX(id)` of `migrations` (0 when the table is empty).
    pub max_migration: i64,
    /// `sessions.messages`, the legacy `[]Item` JSON (dropped by migration 20).
    pub legacy_messages: bool,
    /// `session_items.first_kept_entry` (migration 21) exists and docker-agent reads it.
    pub first_kept_entry: bool,
    /// `session_items.cost` (migration 23).
    pub item_cost: bool,
    /// `session_items.model` and `usage_json` (migration 25).
    pub item_model: bool,
    pub item_usage_json: bool,
    pub title: bool,
    pub working_dir: bool,
    /// `session_items.actor_pending` (migration 31): accepted input not yet promoted into the
    /// transcript; docker-agent's loader leaves it out of the model's history.
    pub actor_pending: bool,
    /// `session_items.actor_input_mode` (migration 34): `legacy_run` items are left out too.
    pub actor_input_mode: bool,
    /// `sessions.instruction_context` (migration 22): its `updates` are replayed as user
    /// messages at their item positions.
    pub instruction_context: bool,
}

impl Schema {
    /// Whether a compaction can keep a tail verbatim (docker-agent replays from
    /// `first_kept_entry`); older generations load only what follows the last summary.
    pub fn keeps_tail(&self) -> bool {
        self.first_kept_entry
    }

    /// A short description for messages and the audit log.
    pub fn describe(&self) -> String {
        let mut s = format!("migrations up to {}", self.max_migration);
        if self.legacy_messages {
            s.push_str(", legacy sessions.messages column");
        }
        if self.first_kept_entry {
            s.push_str(", first_kept_entry");
        } else {
            s.push_str(", no first_kept_entry (no kept tail)");
        }
        if self.item_cost {
            s.push_str(", item cost");
        }
        if self.item_model {
            s.push_str(", item model/usage_json");
        }
        if self.actor_pending {
            s.push_str(", pending input");
        }
        if self.actor_input_mode {
            s.push_str(", input modes");
        }
        s
    }
}

const SESSION_REQUIRED: &[&str] = &[
    "id",
    "created_at",
    "input_tokens",
    "output_tokens",
    "parent_id",
];
const ITEM_REQUIRED: &[&str] = &[
    "id",
    "session_id",
    "position",
    "item_type",
    "agent_name",
    "message_json",
    "implicit",
    "subsession_id",
    "summary_text",
];

fn columns(conn: &Connection, table: &str, path: &Path) -> Result<Vec<String>> {
    let names = crate::store::schema_util::columns(conn, table, path)?;
    Ok(names.into_iter().map(|c| c.to_ascii_lowercase()).collect())
}

/// The newest recorded migration, refusing one newer than agent-db knows and, from 29 on, one
/// agent-db does not know by name.
fn check_migrations(conn: &Connection, path: &Path) -> Result<i64> {
    let newest: Option<(i64, String)> = conn
        .query_row(
            "SELECT id, COALESCE(name, '') FROM migrations ORDER BY id DESC LIMIT 1",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .optional()
        .at(path)?;
    let max_migration = newest.as_ref().map(|(i, _)| *i).unwrap_or(0);
    if max_migration > NEWEST_KNOWN {
        let name = newest.map(|(_, n)| n).unwrap_or_default();
        return Err(changed(
            path,
            format!(
                "docker-agent migration {max_migration} ({name:?}) is newer than any agent-db knows \
                 (the newest it knows is {NEWEST_KNOWN}, {}); a newer docker-agent wrote this file, \
                 so agent-db will not touch it (upgrade agent-db)",
                newest_known_name()
            ),
        ));
    }
    // From 29 on, docker-agent's lines number their migrations differently: a name agent-db
    // does not know at an id it knows is a schema it has not read.
    let unknown: Option<(i64, String)> = {
        let mut stmt = conn
            .prepare("SELECT id, COALESCE(name, '') FROM migrations WHERE id >= 29 ORDER BY id")
            .at(path)?;
        let rows = stmt
            .query_map([], |r| Ok((r.get::<_, i64>(0)?, r.get::<_, String>(1)?)))
            .at(path)?;
        let mut found = None;
        for row in rows {
            let (id, name) = row.at(path)?;
            if !is_known(id, &name) {
                found = Some((id, name));
                break;
            }
        }
        found
    };
    if let Some((id, name)) = unknown {
        return Err(changed(
            path,
            format!(
                "docker-agent migration {id} ({name:?}) is not one agent-db knows (the newest it knows is \
                 {NEWEST_KNOWN}, {}); another docker-agent line wrote this file, so agent-db will not touch it",
                newest_known_name()
            ),
        ));
    }
    Ok(max_migration)
}

/// Work out the generation, refusing files written by a docker-agent newer than agent-db knows
/// and files missing a column agent-db needs. Reads only; never writes.
pub fn check_schema(conn: &Connection, path: &Path) -> Result<Schema> {
    let max_migration = check_migrations(conn, path)?;
    let s = columns(conn, "sessions", path)?;
    let i = columns(conn, "session_items", path)?;
    for (table, have, need) in [
        ("sessions", &s, SESSION_REQUIRED),
        ("session_items", &i, ITEM_REQUIRED),
    ] {
        if let Some(missing) = need.iter().find(|c| !have.iter().any(|h| h == *c)) {
            return Err(changed(
                path,
                format!(
                    "column {table}.{missing} is missing; this docker-agent generation ({}) is not one agent-db knows",
                    if max_migration > 0 {
                        format!("migrations up to {max_migration}")
                    } else {
                        "no migrations recorded".to_string()
                    }
                ),
            ));
        }
    }
    let has = |v: &[String], c: &str| v.iter().any(|h| h == c);
    let fke_column = has(&i, "first_kept_entry");
    if max_migration >= 21 && !fke_column {
        return Err(changed(
            path,
            format!(
                "migration 21 (021_add_first_kept_entry_column) is recorded but session_items.first_kept_entry \
                 is missing (migrations up to {max_migration}); agent-db will not guess how this file is read"
            ),
        ));
    }
    Ok(Schema {
        max_migration,
        legacy_messages: has(&s, "messages"),
        // docker-agent reads the column from migration 21 on; before that it would ignore it.
        first_kept_entry: fke_column && max_migration >= 21,
        item_cost: has(&i, "cost"),
        item_model: has(&i, "model"),
        item_usage_json: has(&i, "usage_json"),
        title: has(&s, "title"),
        working_dir: has(&s, "working_dir"),
        actor_pending: has(&i, "actor_pending"),
        actor_input_mode: has(&i, "actor_input_mode"),
        instruction_context: has(&s, "instruction_context"),
    })
}

//! docker-agent's (cagent's) `session.db` (docs/stores.md, "docker-agent"): append-only. A compaction appends one
//! summary item and points at the kept tail; nothing is rewritten.
//!
//! - `schema.rs`: generation detection. docker-agent records its migrations by name in
//!   `migrations`; a binary refuses a file whose `MAX(id)` is above the newest migration it
//!   knows, and so does agent-db ([`NEWEST_KNOWN`]). What agent-db reads and writes is then
//!   decided by the columns (`PRAGMA table_info`): the legacy `sessions.messages` JSON (up to
//!   migration 19), `session_items.first_kept_entry` (21), `cost` (23), `model` and
//!   `usage_json` (25).
//! - `read.rs`: the listing and the active history as docker-agent loads it.
//! - `write.rs`: the typed proposal: one appended summary item.
//!
//! docker-agent does not store a context limit: a session's window comes from the model table
//! and the `[context_limits]` given to the store ([`crate::models::ContextLimits`]).

pub mod codec;
mod originals;
mod read;
mod schema;
mod space;
mod write;

pub use read::{load, load_session, meta, present_summary, scan, Session};
pub use schema::{
    check_schema, is_known, newest_known_name, Schema, KNOWN_MIGRATIONS, NEWEST_KNOWN,
};
pub use write::{strip_header, Proposal, INSTRUCTION_LINE};

use std::path::PathBuf;
use std::sync::Arc;

use rusqlite::Connection;

use crate::error::Result;
use crate::store::commit::Commit;
use crate::store::conversation::{LoadedState, Read};
use crate::store::kind::{Adapter, SchemaStatus, Unrated};
use crate::store::{Compaction, ConversationMeta, Prefilter, StoreKind, StoredConversation};

/// The provider name agent-db gives docker-agent sessions (shown in listings; the
/// adapter hands out its codec).
pub const PROVIDER: &str = "docker-agent";

/// The docker-agent store kind.
pub const KIND: StoreKind = StoreKind::new(&DockerAgent, 20);

/// Registered: detection tries it second.
#[linkme::distributed_slice(crate::store::kind::REGISTERED)]
static REGISTER: StoreKind = KIND;

/// docker-agent's adapter.
pub struct DockerAgent;

/// docker-agent's version token: the session's item count, largest item id and token columns
/// (`items:N:max:in:out`), and the digest ([`crate::util::version_digest`]) of the loaded
/// active history.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Version {
    pub marker: String,
    pub raw_digest: String,
}

/// What a loaded session keeps for its proposal: the version and each loaded message's
/// slice index.
#[derive(Debug, Clone)]
struct Loaded {
    version: Version,
    slots: Vec<i64>,
}

impl Adapter for DockerAgent {
    /// What `retire` moves (docs/stores.md).
    fn retire_map(&self) -> Option<crate::store::retire::RetireMap> {
        Some(crate::store::retire::RetireMap {
            root: "sessions",
            id: "id",
            parent: Some("parent_id"),
            links: &[
                ("session_items", &["session_id"]),
                ("generated_media_manifest", &["session_id"]),
                ("generated_media_blobs", &["session_id"]),
                ("subagent_trees", &["session_id"]),
                ("session_todos", &["session_id"]),
                (
                    "child_records",
                    &["session_id", "root_session_id", "parent_session_id"],
                ),
                ("child_reports", &["parent_session_id", "child_session_id"]),
                ("session_input_batches", &["session_id"]),
            ],
        })
    }

    fn space_map(&self, read: &Read<'_>) -> Result<crate::store::space::SpaceMap> {
        space::map(read)
    }

    /// docs/stores.md, "docker-agent": nothing agent-db may remove.
    fn nothing_to_reclaim(&self) -> Option<&'static str> {
        Some("deleting a session deletes its items and media; media with no session row may belong to a session not yet saved")
    }

    fn name(&self) -> &'static str {
        "docker-agent"
    }

    /// docker-agent was cagent; its file is still `~/.cagent/session.db`.
    fn aliases(&self) -> &'static [&'static str] {
        &["cagent"]
    }

    fn signature_tables(&self) -> &'static [&'static str] {
        &["sessions", "session_items", "migrations"]
    }

    fn check_schema(&self, conn: &Connection, path: &std::path::Path) -> Result<()> {
        check_schema(conn, path).map(|_| ())
    }

    /// A file newer than agent-db knows fails the schema check itself (for every command), so
    /// a file that passes it is written.
    /// docker-agent names no release in its file: its migration number.
    fn version_name(&self, version: &str) -> String {
        format!("docker-agent, migration {version}")
    }

    fn schema_status(&self, conn: &Connection, path: &std::path::Path) -> Result<SchemaStatus> {
        let schema = check_schema(conn, path)?;
        Ok(SchemaStatus::checked(
            schema.max_migration.to_string(),
            NEWEST_KNOWN,
        ))
    }

    fn default_path_doc(&self) -> &'static str {
        "docker-agent (cagent): ~/.cagent/session.db"
    }

    fn default_path(&self) -> PathBuf {
        crate::store::home_dir().join(".cagent").join("session.db")
    }

    fn id_column(&self) -> (&'static str, &'static str) {
        ("sessions", "id")
    }

    fn codecs(&self) -> &'static [crate::message::Format] {
        &[&codec::CODEC]
    }

    fn rewrites_history(&self) -> bool {
        false
    }

    fn keeps_tail(&self, read: &Read<'_>) -> Result<bool> {
        Ok(check_schema(read.conn, read.path)?.keeps_tail())
    }

    fn providers(&self, _read: &Read<'_>) -> Result<Vec<String>> {
        Ok(vec![PROVIDER.to_string()])
    }

    fn scan(
        &self,
        read: &Read<'_>,
        prefilter: Prefilter,
        f: &mut dyn FnMut(ConversationMeta) -> bool,
    ) -> Result<()> {
        scan(read.conn, read.path, read.limits, prefilter, f)
    }

    fn scan_facts(
        &self,
        read: &Read<'_>,
        prefilter: Prefilter,
        f: &mut dyn FnMut(crate::store::Facts<'_>) -> bool,
    ) -> Result<()> {
        read::scan_facts(read.conn, read.path, read.limits, prefilter, f)
    }

    fn meta(&self, read: &Read<'_>, id: &str) -> Result<Option<ConversationMeta>> {
        meta(read.conn, read.path, read.limits, id)
    }

    /// Every `session_items` row of the session, by `position`.
    fn stored(&self, read: &Read<'_>, id: &str) -> Result<Option<String>> {
        crate::store::schema_util::stored_rows_json(
            read.conn,
            read.path,
            "sessions",
            "SELECT * FROM session_items WHERE session_id = ?1 ORDER BY position, id",
            id,
        )
        .map(Some)
    }

    /// A sub-session: docker-agent runs it inside its parent and never resumes it alone.
    fn left_alone(&self, read: &Read<'_>, id: &str) -> Result<Option<String>> {
        Ok(read::parent_of(read.conn, read.path, id)?.map(|p| {
            format!("a docker-agent sub-session of {p}: docker-agent runs it inside its parent; compact the parent")
        }))
    }

    fn children(&self, read: &Read<'_>, id: &str) -> Result<Vec<(String, Option<String>)>> {
        read::children(read.conn, read.path, id)
    }

    fn load(&self, read: &Read<'_>, id: &str) -> Result<StoredConversation> {
        let s = load(read.conn, read.path, id)?;
        let todos = read::open_todos(read.conn, read.path, id)?;
        let state = Loaded {
            version: s.version,
            slots: s.slots,
        };
        Ok(
            StoredConversation::with_state(s.id, s.raw_messages, Arc::new(state))
                .with_native_todos(todos)
                .with_agent_summary(s.agent_summary),
        )
    }

    /// Whether the history before the compaction started with docker-agent's own summary.
    fn archived_agent_summary(
        &self,
        read: &Read<'_>,
        id: &str,
        compaction_id: i64,
    ) -> Result<usize> {
        originals::agent_summary_before(read.conn, read.path, id, compaction_id)
    }

    /// Rebuilt from the live rows and the archived cells (`originals.rs`).
    fn archived_history(
        &self,
        read: &Read<'_>,
        id: &str,
        compaction_id: i64,
    ) -> Result<Option<String>> {
        originals::history_before(read.conn, read.path, id, compaction_id)
    }

    fn unrated(&self) -> Unrated {
        Unrated {
            no_usage: "no input_tokens or output_tokens recorded for this session",
            no_window: "no context window known for this session's model (give --context-limit N, or set it under [context_limits])",
        }
    }
}

impl LoadedState for Loaded {
    fn propose(
        &self,
        id: &str,
        _loaded: crate::store::conversation::Loaded<'_>,
        c: Compaction,
        _read: Option<&Read<'_>>,
    ) -> Box<dyn Commit> {
        Box::new(Proposal {
            id: id.to_string(),
            version: self.version.clone(),
            slots: self.slots.clone(),
            summary: c.summary,
            tail_start: c.tail_start,
            reinsert: c.reinsert,
            context_after: c.context_after,
            model: c.model,
        })
    }
}

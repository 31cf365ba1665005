//! Crush's `.crush/crush.db` (docs/stores.md, "Crush"): append-only. A compaction inserts
//! Crush's own kind of summary message (`is_summary_message`), points
//! `sessions.summary_message_id` at it, and keeps the tail's rows untouched.
//!
//! - `schema.rs`: the migrations in `goose_db_version` (refused above [`NEWEST_KNOWN`] or when
//!   one is not known by name) and the columns.
//! - `read.rs`: finding the file (from the current directory up, and `projects.json`), the
//!   listing, and the history by Crush's loading rule.
//! - `write.rs`: the typed proposal; `codec.rs`: the `parts` JSON.
//! - `space.rs`: the tables by kind of bytes, for `stats`.

pub mod codec;
mod originals;
mod read;
mod schema;
mod space;
mod write;

pub use read::{find_upward, load_session, project_files, projects_file, MessageRow, Session};
pub use schema::{check_schema, migration_name, Schema, KNOWN_MIGRATIONS, NEWEST_KNOWN};
pub use write::{Proposal, INSTRUCTION_LINE};

use std::path::PathBuf;
use std::sync::Arc;

use rusqlite::Connection;

use crate::error::Result;
use crate::store::commit::Commit;
use crate::store::conversation::{LoadedState, Read};
use crate::store::kind::{Adapter, SchemaStatus, Unrated};
use crate::store::{Compaction, ConversationMeta, Prefilter, StoreKind, StoredConversation};

/// The provider name of a session whose messages record none.
pub const PROVIDER: &str = "crush";

/// The Crush store kind.
pub const KIND: StoreKind = StoreKind::new(&Crush, 60);

#[linkme::distributed_slice(crate::store::kind::REGISTERED)]
static REGISTER: StoreKind = KIND;

/// Crush's adapter.
pub struct Crush;

/// What a loaded session keeps for its proposal.
#[derive(Debug, Clone)]
struct Loaded {
    version: String,
    rows: Vec<MessageRow>,
    start: usize,
}

impl Adapter for Crush {
    /// What `retire` moves (docs/stores.md).
    fn retire_map(&self) -> Option<crate::store::retire::RetireMap> {
        Some(crate::store::retire::RetireMap {
            root: "sessions",
            id: "id",
            parent: Some("parent_session_id"),
            links: &[
                ("messages", &["session_id"]),
                ("files", &["session_id"]),
                ("read_files", &["session_id"]),
            ],
        })
    }

    fn name(&self) -> &'static str {
        "crush"
    }

    fn signature_tables(&self) -> &'static [&'static str] {
        &["sessions", "messages", "files", "goose_db_version"]
    }

    fn check_schema(&self, conn: &Connection, path: &std::path::Path) -> Result<()> {
        check_schema(conn, path).map(|_| ())
    }

    /// `Crush migration 20250810000000_add_is_summary_message`.
    fn version_name(&self, version: &str) -> String {
        match version.parse::<i64>() {
            Ok(v) => format!("Crush migration {}", migration_name(v)),
            Err(_) => format!("Crush migration {version}"),
        }
    }

    /// A newer file fails the schema check itself, so a file that passes it is written (one
    /// before `is_summary_message` refuses each compaction, naming the migration).
    fn schema_status(&self, conn: &Connection, path: &std::path::Path) -> Result<SchemaStatus> {
        let schema = check_schema(conn, path)?;
        Ok(SchemaStatus::checked(
            schema.version.to_string(),
            NEWEST_KNOWN,
        ))
    }

    fn default_path_doc(&self) -> &'static str {
        "crush: the closest .crush/crush.db from the current directory up to its git root (projects in ~/.local/share/crush/projects.json are listed beside it)"
    }

    /// The `.crush/crush.db` Crush would open here, else `./.crush/crush.db`.
    fn default_path(&self) -> PathBuf {
        let cwd = std::env::current_dir().unwrap_or_default();
        find_upward(&cwd).unwrap_or_else(|| cwd.join(read::DATA_DIR).join(read::FILE))
    }

    /// The other projects' files `projects.json` lists that exist.
    fn nearby(&self) -> Vec<PathBuf> {
        let here = self.default_path();
        project_files()
            .into_iter()
            .filter(|p| p.is_file() && *p != here)
            .collect()
    }

    fn nearby_role(&self) -> &'static str {
        "another project, from projects.json"
    }

    fn id_column(&self) -> (&'static str, &'static str) {
        ("sessions", "id")
    }

    fn codecs(&self) -> &'static [crate::message::Format] {
        &[&codec::CODEC]
    }

    /// Crush loads everything after its summary message, so agent-db only appends.
    fn rewrites_history(&self) -> bool {
        false
    }

    fn keeps_tail(&self, _read: &Read<'_>) -> Result<bool> {
        Ok(true)
    }

    fn providers(&self, read: &Read<'_>) -> Result<Vec<String>> {
        read::providers(read.conn, read.path)
    }

    fn scan(
        &self,
        read: &Read<'_>,
        prefilter: Prefilter,
        f: &mut dyn FnMut(ConversationMeta) -> bool,
    ) -> Result<()> {
        read::scan(read.conn, read.path, read.limits, prefilter, f)
    }

    fn meta(&self, read: &Read<'_>, id: &str) -> Result<Option<ConversationMeta>> {
        read::meta(read.conn, read.path, read.limits, id)
    }

    /// A child session (a sub-agent's task) runs inside its parent.
    fn left_alone(&self, read: &Read<'_>, id: &str) -> Result<Option<String>> {
        Ok(read::parent_of(read.conn, read.path, id)?.map(|p| {
            format!("a Crush sub-agent session of {p}: Crush runs it for its parent; compact the parent")
        }))
    }

    /// The session row and every `messages` row of the session, in Crush's order.
    fn stored(&self, read: &Read<'_>, id: &str) -> Result<Option<String>> {
        use crate::store::schema_util::{rows_array, stored_rows};
        let mut rows = stored_rows(
            read.conn,
            read.path,
            "SELECT * FROM sessions WHERE id = ?1",
            id,
        )?;
        if rows.is_empty() {
            return Err(crate::error::Error::ConversationNotFound { id: id.to_string() });
        }
        rows.extend(stored_rows(
            read.conn,
            read.path,
            "SELECT * FROM messages WHERE session_id = ?1 ORDER BY created_at, rowid",
            id,
        )?);
        Ok(Some(rows_array(rows)))
    }

    fn load(&self, read: &Read<'_>, id: &str) -> Result<StoredConversation> {
        let s = load_session(read.conn, read.path, id)?;
        let summarized = s.summarized;
        let state = Loaded {
            version: s.version,
            rows: s.rows,
            start: s.start,
        };
        Ok(
            StoredConversation::with_state(id, s.raw_messages, Arc::new(state))
                .with_agent_summary(usize::from(summarized)),
        )
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

    /// Whether that history started at a summary message.
    fn archived_agent_summary(
        &self,
        read: &Read<'_>,
        id: &str,
        compaction_id: i64,
    ) -> Result<usize> {
        originals::agent_summary_before(read.conn, read.path, id, compaction_id)
    }

    fn space_map(&self, read: &Read<'_>) -> Result<crate::store::space::SpaceMap> {
        space::map(read)
    }

    /// docs/stores.md, "Crush": nothing agent-db may remove.
    fn nothing_to_reclaim(&self) -> Option<&'static str> {
        Some("a deleted session's rows go with it (ON DELETE CASCADE, foreign_keys on) and Crush keeps no log or cache table")
    }

    fn unrated(&self) -> Unrated {
        Unrated {
            no_usage: "no prompt_tokens or completion_tokens recorded for this session",
            no_window: "no context window known for this session's model (give --context-limit N)",
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
            rows: self.rows.clone(),
            start: self.start,
            summary: c.summary,
            tail_start: c.tail_start,
            reinsert: c.reinsert,
            context_after: c.context_after,
        })
    }
}

//! goose's `sessions.db` (docs/stores.md, "goose"): flags and inserts. A compaction hides the
//! summarized rows from the agent (`metadata_json.agentVisible=false`, nothing else changed),
//! inserts goose's agent-only summary and continuation, and keeps the tail's rows untouched.
//!
//! - `schema.rs`: `schema_version` (refused above [`NEWEST_KNOWN`]) and the columns.
//! - `read.rs`: the listing (the `sessions` columns only) and the agent-visible history.
//! - `write.rs`: the typed proposal; `prune.rs`: where a prune's rows go.
//!
//! A session's context window is `model_config_json.context_limit` when stored and positive,
//! else the `[context_limits]`/built-in table for its model, else goose's own 128,000.

pub mod codec;
mod originals;
mod prune;
mod read;
mod schema;
mod space;
mod write;

pub use read::{
    left_alone, load_session, meta, scan, Row, Session, GOOSE_DEFAULT_LIMIT, MANAGES_OWN_CONTEXT,
};
pub use schema::{check_schema, Schema, FIRST_WRITABLE, NEWEST_KNOWN};
pub use write::Proposal;

use std::path::PathBuf;
use std::sync::Arc;

use rusqlite::Connection;

use crate::error::Result;
use crate::store::commit::Commit;
use crate::store::conversation::{LoadedState, Read};
use crate::store::kind::{Adapter, SchemaStatus, Unrated};
use crate::store::{Compaction, ConversationMeta, Prefilter, StoreKind, StoredConversation};

/// The provider name agent-db gives a goose session that records none (before schema v6, or
/// `provider_name` empty); a session's own `provider_name` is shown otherwise.
pub const PROVIDER: &str = "goose";

/// The goose store kind.
pub const KIND: StoreKind = StoreKind::new(&Goose, 30);

/// Registered: detection tries it third.
#[linkme::distributed_slice(crate::store::kind::REGISTERED)]
static REGISTER: StoreKind = KIND;

/// goose's adapter.
pub struct Goose;

/// What a loaded session keeps for its proposal: the version token (row count, largest id,
/// sha256 of every row, `updated_at`, `total_tokens`) and the loaded rows.
#[derive(Debug, Clone)]
struct Loaded {
    version: String,
    rows: Vec<Row>,
}

impl Adapter for Goose {
    /// What `retire` moves (docs/stores.md).
    fn retire_map(&self) -> Option<crate::store::retire::RetireMap> {
        Some(crate::store::retire::RetireMap {
            root: "sessions",
            id: "id",
            parent: Some("parent_session_id"),
            links: &[
                ("messages", &["session_id"]),
                ("usage_ledger", &["session_id"]),
                ("thread_messages", &["session_id"]),
            ],
        })
    }

    fn space_map(&self, read: &Read<'_>) -> Result<crate::store::space::SpaceMap> {
        space::map(read)
    }

    /// docs/stores.md, "goose": nothing agent-db may remove.
    fn nothing_to_reclaim(&self) -> Option<&'static str> {
        Some("messages reference their session (foreign keys enforced), and compacted messages stay on screen")
    }

    fn name(&self) -> &'static str {
        "goose"
    }

    fn signature_tables(&self) -> &'static [&'static str] {
        &["sessions", "messages", "schema_version"]
    }

    fn check_schema(&self, conn: &Connection, path: &std::path::Path) -> Result<()> {
        check_schema(conn, path).map(|_| ())
    }

    /// A file newer than agent-db knows fails the schema check itself (for every command), so
    /// a file that passes it is written.
    /// `goose schema v16 (goose 1.47)`: the release is named where agent-db's sources date it.
    fn version_name(&self, version: &str) -> String {
        match version {
            "16" => "goose schema v16 (goose 1.47)".to_string(),
            v => format!("goose schema v{v}"),
        }
    }

    fn schema_status(&self, conn: &Connection, path: &std::path::Path) -> Result<SchemaStatus> {
        let schema = check_schema(conn, path)?;
        Ok(SchemaStatus::checked(
            schema.version.to_string(),
            NEWEST_KNOWN,
        ))
    }

    /// `$GOOSE_PATH_ROOT/data/sessions/sessions.db` (a relative root is taken from the current
    /// directory), else
    /// `$XDG_DATA_HOME/goose/sessions/sessions.db`, else `~/.local/share/goose/…`.
    fn default_path_doc(&self) -> &'static str {
        "goose: $GOOSE_PATH_ROOT/data/sessions/sessions.db or ~/.local/share/goose/sessions/sessions.db"
    }

    fn default_path(&self) -> PathBuf {
        let abs = |v: Option<std::ffi::OsString>| v.map(PathBuf::from).filter(|p| p.is_absolute());
        // goose takes GOOSE_PATH_ROOT as given, so a relative one is relative to the directory
        // it runs in: here, the current directory.
        let root = std::env::var_os("GOOSE_PATH_ROOT")
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
            .map(|p| match p.is_absolute() {
                true => p,
                false => std::env::current_dir().unwrap_or_default().join(p),
            });
        let data = match root {
            Some(root) => root.join("data"),
            None => match abs(std::env::var_os("XDG_DATA_HOME")) {
                Some(x) => x.join("goose"),
                None => crate::store::home_dir().join(".local/share/goose"),
            },
        };
        data.join("sessions").join("sessions.db")
    }

    fn id_column(&self) -> (&'static str, &'static str) {
        ("sessions", "id")
    }

    /// A pruned head is stored the way goose stores its own tool-pair summaries: rows hidden
    /// from the agent and agent-only notes inserted, nothing deleted.
    fn codecs(&self) -> &'static [crate::message::Format] {
        &[&codec::CODEC]
    }

    fn rewrites_history(&self) -> bool {
        true
    }

    fn keeps_tail(&self, _read: &Read<'_>) -> Result<bool> {
        Ok(true)
    }

    /// goose's `provider_name` of each session (v6+), [`PROVIDER`] where none is stored.
    fn providers(&self, read: &Read<'_>) -> Result<Vec<String>> {
        read::providers(read.conn, read.path)
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

    /// A session whose provider manages its own context (docs/stores.md, "goose": which sessions
    /// agent-db leaves alone).
    fn left_alone(&self, read: &Read<'_>, id: &str) -> Result<Option<String>> {
        left_alone(read.conn, read.path, id)
    }

    /// The same, for every session at once (one pass over `sessions`), for a batch selection.
    fn left_alone_now(
        &self,
        read: &Read<'_>,
    ) -> Result<Option<std::collections::HashMap<String, String>>> {
        read::left_alone_all(read.conn, read.path).map(Some)
    }

    /// Every `messages` row of the session (agent-hidden ones too), as goose orders them.
    fn stored(&self, read: &Read<'_>, id: &str) -> Result<Option<String>> {
        crate::store::schema_util::stored_rows_json(
            read.conn,
            read.path,
            "sessions",
            "SELECT * FROM messages WHERE session_id = ?1 ORDER BY created_timestamp, id",
            id,
        )
        .map(Some)
    }

    /// goose appends to a session with new `messages` rows (and `updated_at`, which the
    /// archive holds, but to the second): a row of the session past the ones the compaction
    /// inserted means goose went on with it.
    fn changed_after(&self, read: &Read<'_>, id: &str, compaction_id: i64) -> Result<bool> {
        read::added_after(read.conn, read.path, id, compaction_id)
    }

    /// The session's rows goose does not send (`agentVisible` false: hidden by a compaction,
    /// goose's or agent-db's), which goose's UI still shows.
    fn hidden(&self, read: &Read<'_>, id: &str) -> Result<Option<crate::store::kind::Hidden>> {
        read::hidden_rows(read.conn, read.path, id).map(Some)
    }

    fn load(&self, read: &Read<'_>, id: &str) -> Result<StoredConversation> {
        let s = load_session(read.conn, read.path, id)?;
        let todos = read::open_todos(read.conn, read.path, id)?;
        let state = Loaded {
            version: s.version,
            rows: s.rows,
        };
        Ok(
            StoredConversation::with_state(id, s.raw_messages, Arc::new(state))
                .with_native_todos(todos),
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

    fn unrated(&self) -> Unrated {
        Unrated {
            no_usage: "no total_tokens recorded for this session",
            no_window: "no context limit known for this session (give --context-limit N)",
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
            summary: c.summary,
            tail_start: c.tail_start,
            reinsert: c.reinsert,
            context_after: c.context_after,
            history: c.history,
        })
    }
}

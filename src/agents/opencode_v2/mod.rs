//! opencode 2.x's `opencode.db` (docs/stores.md "opencode 2.x storage"): `session_v2` and
//! typed `session_message` rows (`user`, `assistant`, `compaction`, …), from migration
//! `20260804233008_loose_psylocke` on. A file upgraded from 1.x keeps its `session`, `message`
//! and `part` tables frozen beside the live 2.x tables; this kind is registered before the 1.x
//! kind, so such a file is read from its 2.x tables.
//!
//! - `schema.rs`: the recorded migrations (a newer one: read, never written) and columns.
//! - `read.rs`: the listing and the history as opencode 2.x loads it (from the latest completed
//!   compaction row on), carried in the 1.x codec's envelopes.
//! - `write.rs`: the proposal: one appended `compaction` row, as opencode's own compaction.
//!
//! The kind answers to the same name as the 1.x kind (`opencode`): `--agent opencode` is
//! opencode's default file, and the file's tables decide the form.

mod read;
mod schema;
mod space;
mod write;

pub use read::{load_session, meta, scan, Session};
pub use schema::{check_schema, check_writable, Schema, FIRST, NEWEST_KNOWN};
pub use write::{render_recent, Proposal};

use std::path::PathBuf;
use std::sync::Arc;

use rusqlite::Connection;

use crate::error::Result;
use crate::store::commit::Commit;
use crate::store::conversation::{LoadedState, Read};
use crate::store::kind::{Adapter, SchemaStatus, Unrated};
use crate::store::{Compaction, ConversationMeta, Prefilter, StoreKind, StoredConversation};

/// The provider name of opencode sessions (the 1.x codec decodes them).
pub const PROVIDER: &str = super::opencode_family::PROVIDER;

/// The opencode 2.x store kind.
pub const KIND: StoreKind = StoreKind::new(&OpencodeV2, 40);

/// Registered: detection tries it fourth (before opencode 1.x: a file upgraded to 2.x has both table sets).
#[linkme::distributed_slice(crate::store::kind::REGISTERED)]
static REGISTER: StoreKind = KIND;

/// opencode 2.x's adapter.
pub struct OpencodeV2;

#[derive(Debug, Clone)]
struct Loaded {
    version: String,
}

impl Adapter for OpencodeV2 {
    /// What `retire` moves (docs/stores.md).
    fn retire_map(&self) -> Option<crate::store::retire::RetireMap> {
        Some(crate::store::retire::RetireMap {
            root: "session_v2",
            id: "id",
            parent: Some("parent_id"),
            links: &[
                ("event_sequence", &["aggregate_id"]),
                ("event", &["aggregate_id"]),
                ("session_message", &["session_id"]),
                ("session_inbox", &["session_id"]),
                ("session_message_retained", &["session_id"]),
                // A file upgraded from 1.x keeps the session's 1.x rows.
                ("part", &["session_id"]),
                ("message", &["session_id"]),
                ("todo", &["session_id"]),
                ("session_share", &["session_id"]),
                ("session", &["id"]),
            ],
        })
    }

    fn space_map(&self, read: &Read<'_>) -> Result<crate::store::space::SpaceMap> {
        space::map(read)
    }

    /// docs/stores.md, "opencode 2.x": nothing agent-db may remove.
    fn nothing_to_reclaim(&self) -> Option<&'static str> {
        Some("which features read opencode 2.x's event log back is not established from its source")
    }

    fn name(&self) -> &'static str {
        "opencode"
    }

    fn signature_tables(&self) -> &'static [&'static str] {
        &["session_v2", "session_message", "migration"]
    }

    fn check_schema(&self, conn: &Connection, path: &std::path::Path) -> Result<()> {
        check_schema(conn, path).map(|_| ())
    }

    fn version_name(&self, _version: &str) -> String {
        "opencode 2.x".to_string()
    }

    fn schema_status(&self, conn: &Connection, path: &std::path::Path) -> Result<SchemaStatus> {
        let s = check_schema(conn, path)?;
        if s.writable() && s.import_pending {
            // Refused for writing with its own reason (opencode's import is unfinished).
            check_writable(conn, path)?;
        }
        Ok(SchemaStatus {
            writable: s.writable(),
            version: Some(s.newest),
            newest_known: Some(NEWEST_KNOWN.to_string()),
        })
    }

    fn default_path_doc(&self) -> &'static str {
        super::opencode_family::DEFAULT_PATH_DOC
    }

    fn default_path(&self) -> PathBuf {
        super::opencode_family::default_path()
    }

    fn nearby(&self) -> Vec<PathBuf> {
        super::opencode_family::channel_files()
    }

    fn id_column(&self) -> (&'static str, &'static str) {
        ("session_v2", "id")
    }

    /// 2.x storage is append-only here: no prune.
    fn codecs(&self) -> &'static [crate::message::Format] {
        &[&super::opencode_family::codec::CODEC]
    }

    fn rewrites_history(&self) -> bool {
        false
    }

    /// The kept tail travels in the compaction row's `recent`.
    fn keeps_tail(&self, _read: &Read<'_>) -> Result<bool> {
        Ok(true)
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

    fn meta(&self, read: &Read<'_>, id: &str) -> Result<Option<ConversationMeta>> {
        meta(read.conn, read.path, read.limits, id)
    }

    /// Every `session_message` row of the session, by `seq`.
    fn stored(&self, read: &Read<'_>, id: &str) -> Result<Option<String>> {
        crate::store::schema_util::stored_rows_json(
            read.conn,
            read.path,
            "session_v2",
            "SELECT * FROM session_message WHERE session_id = ?1 ORDER BY seq, id",
            id,
        )
        .map(Some)
    }

    fn load(&self, read: &Read<'_>, id: &str) -> Result<StoredConversation> {
        let s = load_session(read.conn, read.path, id)?;
        Ok(StoredConversation::with_state(
            id,
            s.raw_messages,
            Arc::new(Loaded { version: s.version }),
        )
        .with_agent_summary(s.agent_summary))
    }

    /// A session with an undo pending (`session_v2.revert`), as for 1.x.
    fn left_alone(&self, read: &Read<'_>, id: &str) -> Result<Option<String>> {
        let pending =
            super::opencode_family::pending_reverts(read.conn, read.path, "session_v2", Some(id))?;
        Ok((!pending.is_empty()).then(|| super::opencode_family::REVERT_PENDING.to_string()))
    }

    fn left_alone_now(
        &self,
        read: &Read<'_>,
    ) -> Result<Option<std::collections::HashMap<String, String>>> {
        let all =
            super::opencode_family::pending_reverts(read.conn, read.path, "session_v2", None)?;
        Ok(Some(
            all.into_iter()
                .map(|id| (id, super::opencode_family::REVERT_PENDING.to_string()))
                .collect(),
        ))
    }

    fn unrated(&self) -> Unrated {
        Unrated {
            no_usage: "no finished assistant message with token counts since the latest compaction",
            no_window: "no context window known for this session's model (give --context-limit N, or set it under [context_limits])",
        }
    }
}

impl LoadedState for Loaded {
    fn propose(
        &self,
        id: &str,
        loaded: crate::store::conversation::Loaded<'_>,
        c: Compaction,
        _read: Option<&Read<'_>>,
    ) -> Box<dyn Commit> {
        let recent = match (&c.summary, loaded) {
            (Some(_), crate::store::conversation::Loaded::Text(t)) => {
                render_recent(t, c.reinsert, c.tail_start).map_err(|e| e.to_string())
            }
            (Some(_), crate::store::conversation::Loaded::Sealed(_)) => {
                Err("the loaded history was not kept".to_string())
            }
            _ => Ok(String::new()),
        };
        Box::new(Proposal {
            id: id.to_string(),
            version: self.version.clone(),
            summary: c.summary,
            recent,
        })
    }
}

//! opencode's `opencode.db` (docs/stores.md, "opencode"): append-only. A
//! compaction appends what opencode's own compaction appends (a user message with a
//! `compaction` part naming the first kept message, then a finished `summary` assistant), so
//! opencode's `filterCompacted` loads the summary and the kept tail; `prune` marks old tool
//! outputs cleared as opencode's prune does. Nothing is ever deleted (foreign keys cascade).
//!
//! - `schema.rs`: the recorded migrations (refused when newer than [`NEWEST_KNOWN`]) and columns.
//! - `read.rs`: the listing (the `session` row and the newest finished assistant's tokens) and
//!   the history as opencode loads it.
//! - `write.rs`: the typed proposal.
//!
//! The codec, the id algorithm and the row helpers it shares with opencode 2.x are in
//! [`super::opencode_family`].
//! - `originals.rs`: the history before one of agent-db's compactions, for a re-compaction.
//!
//! A session's utilization is its newest finished assistant message's context (as opencode's
//! `isOverflow` counts it) over the model's context window from `[context_limits]` or the
//! built-in table (opencode stores no window; `--context-limit` stands in when neither knows
//! the model).

mod limits;
mod originals;
mod read;
mod reclaim;
mod schema;
mod space;
mod write;

pub use read::{load_session, meta, scan, Msg, Session};
pub use schema::{
    check_schema, check_schema_as, Era, Schema, EVENTS_MIGRATION, NEWEST_KNOWN, OPENCODE,
};
pub use write::Proposal;

use std::path::PathBuf;
use std::sync::Arc;

use rusqlite::Connection;

use super::opencode_family::{self as family, Family, Flavor};
use crate::error::Result;
use crate::store::commit::Commit;
use crate::store::conversation::{LoadedState, Read};
use crate::store::kind::{Adapter, SchemaStatus, Unrated};
use crate::store::{Compaction, ConversationMeta, Prefilter, StoreKind, StoredConversation};

/// The opencode store kind.
pub const KIND: StoreKind = StoreKind::new(&ADAPTER, 50);

/// Registered: detection tries it after every kind whose tables include its own (Kilo's).
#[linkme::distributed_slice(crate::store::kind::REGISTERED)]
static REGISTER: StoreKind = KIND;

/// opencode's adapter.
pub static ADAPTER: Family = Family {
    name: "opencode",
    app: "opencode",
    flavor: &OPENCODE,
    signature: &["session", "message", "part"],
    db_env: "OPENCODE_DB",
    default_path_doc: family::DEFAULT_PATH_DOC,
    version_name: |_| "opencode 1.x".to_string(),
    events_refused: None,
};

/// What a loaded session keeps for its proposal: the version token and the loaded ids.
#[derive(Debug, Clone)]
struct Loaded {
    flavor: &'static Flavor,
    version: String,
    ids: Vec<String>,
}

impl Family {
    fn check(&self, conn: &Connection, path: &std::path::Path) -> Result<Schema> {
        check_schema_as(conn, path, self.flavor)
    }
}

impl Adapter for Family {
    /// What `retire` moves (docs/stores.md).
    fn retire_map(&self) -> Option<crate::store::retire::RetireMap> {
        Some(crate::store::retire::RetireMap {
            root: "session",
            id: "id",
            parent: Some("parent_id"),
            links: &[
                ("event_sequence", &["aggregate_id"]),
                ("event", &["aggregate_id"]),
                ("message", &["session_id"]),
                ("part", &["session_id"]),
                ("todo", &["session_id"]),
                ("session_share", &["session_id"]),
                ("session_message", &["session_id"]),
                ("session_input", &["session_id"]),
                ("session_context_epoch", &["session_id"]),
                ("kilo_board", &["root_session_id"]),
                ("kilo_board_message", &["board_root_session_id"]),
            ],
        })
    }

    fn space_map(&self, read: &Read<'_>) -> Result<crate::store::space::SpaceMap> {
        space::map(read)
    }

    /// What opencode's own source shows it never reads again (docs/stores.md), for an agent
    /// whose own source was read for it ([`Family::events_refused`]).
    fn reclaimable(
        &self,
        read: &Read<'_>,
        idle_before_ms: i64,
        only: Option<&str>,
        sink: &mut crate::store::reclaim::Sink<'_>,
    ) -> Result<()> {
        if self.events_refused.is_some() {
            return Ok(());
        }
        reclaim::reclaimable(read, idle_before_ms, only, sink)
    }

    fn nothing_to_reclaim(&self) -> Option<&'static str> {
        self.events_refused
    }

    fn name(&self) -> &'static str {
        self.name
    }

    fn signature_tables(&self) -> &'static [&'static str] {
        self.signature
    }

    /// Its signature tables; or, for a fork (own migrations), opencode's three tables and one
    /// of its own migrations recorded (a Kilo file from before its `kilo_board` migration), or
    /// the fork's file name (`kilo.db`, `kilo-<channel>.db`: one from before its migrations).
    fn recognizes(&self, conn: &Connection, tables: &[String]) -> bool {
        let has = |t: &str| tables.iter().any(|n| n == t);
        if self.signature.iter().all(|t| has(t)) {
            return true;
        }
        if self.flavor.own.is_empty() || !["session", "message", "part"].iter().all(|t| has(t)) {
            return false;
        }
        let named = conn
            .path()
            .and_then(|p| {
                std::path::Path::new(p)
                    .file_name()?
                    .to_str()
                    .map(str::to_string)
            })
            .is_some_and(|f| {
                f == format!("{}.db", self.app)
                    || (f.starts_with(&format!("{}-", self.app)) && f.ends_with(".db"))
            });
        named
            || schema::recorded_ids(conn)
                .is_some_and(|ids| ids.iter().any(|id| self.flavor.own.contains(&id.as_str())))
    }

    fn check_schema(&self, conn: &Connection, path: &std::path::Path) -> Result<()> {
        self.check(conn, path).map(|_| ())
    }

    /// A file newer than agent-db knows fails the schema check itself (for every command), so
    /// a file that passes it is written.
    fn version_name(&self, version: &str) -> String {
        (self.version_name)(version)
    }

    fn schema_status(&self, conn: &Connection, path: &std::path::Path) -> Result<SchemaStatus> {
        let schema = self.check(conn, path)?;
        Ok(SchemaStatus::checked(
            schema.newest.clone(),
            self.flavor.newest_known(),
        ))
    }

    fn default_path_doc(&self) -> &'static str {
        self.default_path_doc
    }

    /// `OPENCODE_DB` (`KILO_DB`; absolute as is, relative under the data dir), else the data
    /// dir's `opencode.db` (`kilo.db`: the `latest`, `beta` and `prod` channels' file).
    fn default_path(&self) -> PathBuf {
        family::default_path_of(self.app, self.db_env)
    }

    fn nearby(&self) -> Vec<PathBuf> {
        family::channel_files_of(self.app)
    }

    fn id_column(&self) -> (&'static str, &'static str) {
        ("session", "id")
    }

    /// opencode's prune marks tool outputs cleared in place, so `prune` is available.
    fn codecs(&self) -> &'static [crate::message::Format] {
        &[&family::codec::CODEC]
    }

    fn rewrites_history(&self) -> bool {
        true
    }

    fn keeps_tail(&self, read: &Read<'_>) -> Result<bool> {
        Ok(self.check(read.conn, read.path)?.keeps_tail())
    }

    /// The agent's name (`opencode`, `kilo`): no provider is stored per session (a model
    /// reference per message, shown as MODEL).
    fn providers(&self, _read: &Read<'_>) -> Result<Vec<String>> {
        Ok(vec![self.provider().to_string()])
    }

    fn scan(
        &self,
        read: &Read<'_>,
        prefilter: Prefilter,
        f: &mut dyn FnMut(ConversationMeta) -> bool,
    ) -> Result<()> {
        scan(
            read.conn,
            read.path,
            read.limits,
            prefilter,
            &mut |mut m| {
                m.provider = self.provider().to_string();
                f(m)
            },
        )
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
        Ok(meta(read.conn, read.path, read.limits, id)?.map(|mut m| {
            m.provider = self.provider().to_string();
            m
        }))
    }

    /// Every `message` row of the session in opencode's order (`time_created`, `id`), each
    /// with its `part` rows (by `id`) under `parts`; every column as stored.
    fn stored(&self, read: &Read<'_>, id: &str) -> Result<Option<String>> {
        read::stored(read.conn, read.path, id).map(Some)
    }

    fn load(&self, read: &Read<'_>, id: &str) -> Result<StoredConversation> {
        let s = load_session(read.conn, read.path, id)?;
        let todos = read::open_todos(read.conn, read.path, id)?;
        let state = Loaded {
            flavor: self.flavor,
            version: s.version,
            ids: s.loaded.into_iter().map(|m| m.id).collect(),
        };
        Ok(
            StoredConversation::with_state(id, s.raw_messages, Arc::new(state))
                .with_native_todos(todos),
        )
    }

    /// A restore removes the compaction's rows and puts `session.time_updated` back; when
    /// opencode wrote later messages (`restore --force`), they stay, and the session's
    /// `time_updated` is raised to the newest of them, as opencode's own writes keep it. A
    /// restore of an unchanged session leaves every cell as archived, whatever it holds.
    fn after_restore(
        &self,
        tx: &Connection,
        path: &std::path::Path,
        id: &str,
        changed: bool,
    ) -> Result<()> {
        use crate::error::SqlContext;
        if !changed {
            return Ok(());
        }
        tx.execute(
            "UPDATE session SET time_updated = MAX(time_updated, \
             COALESCE((SELECT MAX(time_created) FROM message WHERE session_id = ?1), time_updated)) \
             WHERE id = ?1",
            [id],
        )
        .at(path)?;
        Ok(())
    }

    /// A session with an undo pending (`session.revert`): opencode deletes the undone messages
    /// on the next prompt, so a summary written now would summarize undone work and be deleted.
    fn left_alone(&self, read: &Read<'_>, id: &str) -> Result<Option<String>> {
        let pending = family::pending_reverts(read.conn, read.path, "session", Some(id))?;
        Ok((!pending.is_empty()).then(|| family::REVERT_PENDING.to_string()))
    }

    fn left_alone_now(
        &self,
        read: &Read<'_>,
    ) -> Result<Option<std::collections::HashMap<String, String>>> {
        let all = family::pending_reverts(read.conn, read.path, "session", None)?;
        Ok(Some(
            all.into_iter()
                .map(|id| (id, family::REVERT_PENDING.to_string()))
                .collect(),
        ))
    }

    /// Rebuilt from the live rows and the archived part data (`originals.rs`).
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
            no_usage: "no finished assistant message with token counts in this session",
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
            flavor: self.flavor,
            id: id.to_string(),
            version: self.version.clone(),
            loaded: self.ids.clone(),
            summary: c.summary,
            tail_start: c.tail_start,
            reinsert: c.reinsert,
            history: c.history,
            message_tokens: c.message_tokens,
        })
    }
}

//! kodelet's `storage.db` (docs/stores.md, "kodelet"): one row per conversation, rewritten in place.
//!
//! - `read.rs`: schema check, `init`, the streaming listing scan and loading one conversation.
//! - `quick.rs`: `--all-over`'s prefilter on the stored `usage` bytes, without decoding them.
//! - `summaries.rs`: kodelet's `ToSummary()` (`message_count`, `first_message`).
//! - `write.rs`: the typed proposal: the new `raw_messages` and the cells that follow from it.

pub mod anthropic;
mod formats;
pub mod history;
mod meta;
pub mod openai_chat;
mod quick;
mod read;
mod reclaim;
pub mod responses;
pub mod shape;
mod space;
pub mod summaries;
mod write;

pub use formats::{detect, ANTHROPIC, OPENAI_CHAT, OPENAI_RESPONSES};
pub use meta::meta_from_columns;

pub use read::{
    check_schema, init_store, load, meta, scan, sql_type, version_marker, Columns, KodeletRow,
    KNOWN_MIGRATIONS, NEWEST_KNOWN,
};
pub use write::{bump_codex_generation, filter_tool_results, splice_current_context, Version};

use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::Arc;

use rusqlite::types::ValueRef;
use rusqlite::Connection;

use crate::error::{Result, SqlContext};
use crate::store::commit::Commit;
use crate::store::conversation::{LoadedState, Read};
use crate::store::kind::{Adapter, SchemaStatus};
use crate::store::pre_image::{CellValue, Packed};
use crate::store::{Compaction, ConversationMeta, Prefilter, StoreKind, StoredConversation};

/// The kodelet store kind.
pub const KIND: StoreKind = StoreKind::new(&Kodelet, 10);

/// Registered: detection tries it first.
#[linkme::distributed_slice(crate::store::kind::REGISTERED)]
static REGISTER: StoreKind = KIND;

/// kodelet's adapter.
pub struct Kodelet;

impl Adapter for Kodelet {
    /// What `retire` moves (docs/stores.md).
    fn retire_map(&self) -> Option<crate::store::retire::RetireMap> {
        Some(crate::store::retire::RetireMap {
            root: "conversations",
            id: "id",
            parent: None,
            links: &[
                ("conversation_summaries", &["id"]),
                ("acp_session_updates", &["session_id"]),
                ("steering_messages", &["conversation_id"]),
            ],
        })
    }

    fn space_map(&self, read: &Read<'_>) -> Result<crate::store::space::SpaceMap> {
        space::map(read)
    }

    /// The ACP replay log of deleted conversations (docs/stores.md, "kodelet").
    fn reclaimable(
        &self,
        read: &Read<'_>,
        idle_before_ms: i64,
        only: Option<&str>,
        sink: &mut crate::store::reclaim::Sink<'_>,
    ) -> Result<()> {
        reclaim::reclaimable(read, idle_before_ms, only, sink)
    }

    fn nothing_to_reclaim(&self) -> Option<&'static str> {
        None
    }

    fn name(&self) -> &'static str {
        "kodelet"
    }

    fn signature_tables(&self) -> &'static [&'static str] {
        &[
            "conversations",
            "conversation_summaries",
            "schema_migrations",
        ]
    }

    fn check_schema(&self, conn: &Connection, path: &std::path::Path) -> Result<()> {
        check_schema(conn, path).map(|_| ())
    }

    fn default_path_doc(&self) -> &'static str {
        "kodelet: $KODELET_BASE_PATH/storage.db or ~/.kodelet/storage.db"
    }

    /// A provider matches its format's name too (`openai` matches `openai-chat` and
    /// `openai-responses`: its `api_mode` decides per conversation).
    fn provider_matches(&self, provider: &str, wanted: &str) -> bool {
        provider == wanted
            || detect(provider, None).is_ok_and(|f| f.name() == wanted)
            || (provider == "openai" && wanted == "openai-responses")
    }

    /// `kodelet, migrations to 2026-09-29`.
    fn version_name(&self, version: &str) -> String {
        match (version.get(0..4), version.get(4..6), version.get(6..8)) {
            (Some(y), Some(m), Some(d)) if version.len() == 14 => {
                format!("kodelet, migrations to {y}-{m}-{d}")
            }
            _ => format!("kodelet {version}"),
        }
    }

    fn schema_status(&self, conn: &Connection, path: &std::path::Path) -> Result<SchemaStatus> {
        let version = read::newest_migration(conn, path)?;
        Ok(SchemaStatus {
            version: version.map(|v| v.to_string()),
            newest_known: Some(read::NEWEST_KNOWN.to_string()),
            writable: version.is_none_or(|v| v <= read::NEWEST_KNOWN),
        })
    }

    fn left_alone(&self, read: &Read<'_>, id: &str) -> Result<Option<String>> {
        if !read::check_schema_again(read.conn, read.path)?.chat_turns {
            return Ok(None);
        }
        Ok(write::turn_running(read.conn, read.path, id)?.then(|| write::TURN_RUNNING.to_string()))
    }

    /// The conversations with a turn `accepted` or `running`, read once.
    fn left_alone_now(
        &self,
        read: &Read<'_>,
    ) -> Result<Option<std::collections::HashMap<String, String>>> {
        if !read::check_schema_again(read.conn, read.path)?.chat_turns {
            return Ok(Some(Default::default()));
        }
        let ids = write::running_turns(read.conn, read.path)?;
        Ok(Some(
            ids.into_iter()
                .map(|id| (id, write::TURN_RUNNING.to_string()))
                .collect(),
        ))
    }

    fn after_restore(
        &self,
        tx: &Connection,
        path: &std::path::Path,
        id: &str,
        _changed: bool,
    ) -> Result<()> {
        // The search index describes the display history a restore just changed back: kodelet
        // re-indexes a conversation without an index state row.
        if read::check_schema_again(tx, path)?.search_state {
            tx.prepare_cached("DELETE FROM conversation_search_state WHERE conversation_id = ?1")
                .at(path)?
                .execute([id])
                .at(path)?;
        }
        Ok(())
    }

    fn default_path(&self) -> PathBuf {
        match std::env::var_os("KODELET_BASE_PATH") {
            Some(base) if !base.is_empty() => PathBuf::from(base).join("storage.db"),
            _ => crate::store::home_dir().join(".kodelet").join("storage.db"),
        }
    }

    fn id_column(&self) -> (&'static str, &'static str) {
        ("conversations", "id")
    }

    fn codecs(&self) -> &'static [crate::message::Format] {
        &[
            crate::agents::kodelet::ANTHROPIC,
            crate::agents::kodelet::OPENAI_CHAT,
            crate::agents::kodelet::OPENAI_RESPONSES,
        ]
    }

    fn rewrites_history(&self) -> bool {
        true
    }

    fn keeps_tail(&self, _read: &Read<'_>) -> Result<bool> {
        Ok(true)
    }

    fn providers(&self, read: &Read<'_>) -> Result<Vec<String>> {
        let sql =
            "SELECT DISTINCT CAST(provider AS TEXT) FROM conversations WHERE provider IS NOT NULL";
        let mut stmt = read.conn.prepare(sql).at(read.path)?;
        let rows = stmt
            .query_map([], |r| {
                Ok(match r.get_ref(0)? {
                    ValueRef::Text(t) => String::from_utf8_lossy(t).into_owned(),
                    _ => String::new(),
                })
            })
            .at(read.path)?;
        let mut v: Vec<String> = rows.collect::<std::result::Result<_, _>>().at(read.path)?;
        v.sort();
        v.dedup();
        Ok(v)
    }

    fn scan(
        &self,
        read: &Read<'_>,
        prefilter: Prefilter,
        f: &mut dyn FnMut(ConversationMeta) -> bool,
    ) -> Result<()> {
        scan(read.conn, read.path, prefilter, f)
    }

    fn scan_facts(
        &self,
        read: &Read<'_>,
        prefilter: Prefilter,
        f: &mut dyn FnMut(crate::store::Facts<'_>) -> bool,
    ) -> Result<()> {
        read::scan_facts(read.conn, read.path, prefilter, f)
    }

    fn meta(&self, read: &Read<'_>, id: &str) -> Result<Option<ConversationMeta>> {
        meta(read.conn, read.path, id)
    }

    /// kodelet's own summary before the compaction: the `activeDisplayStart` of the
    /// `compaction_history` it archived.
    fn archived_agent_summary(
        &self,
        read: &Read<'_>,
        _id: &str,
        compaction_id: i64,
    ) -> Result<usize> {
        let value = crate::store::pre_image::archived_value(
            read.conn,
            compaction_id,
            "conversations",
            "compaction_history",
        )
        .at(read.path)?;
        let text = match value {
            Some(CellValue::Text(b) | CellValue::Blob(b)) => String::from_utf8(b).ok(),
            _ => None,
        };
        Ok(history::parse(text.as_deref())
            .ok()
            .flatten()
            .map_or(0, |h| h.start))
    }

    fn archived_history(
        &self,
        read: &Read<'_>,
        _id: &str,
        compaction_id: i64,
    ) -> Result<Option<String>> {
        // The compaction rewrote `raw_messages` in place; its pre-image is the history it read.
        let value = crate::store::pre_image::archived_value(
            read.conn,
            compaction_id,
            "conversations",
            "raw_messages",
        )
        .at(read.path)?;
        Ok(match value {
            Some(CellValue::Text(b) | CellValue::Blob(b)) => String::from_utf8(b).ok(),
            _ => None,
        })
    }

    /// With kodelet's own summary at the head: the `activeDisplayStart` items kodelet sends but
    /// does not show, which its compaction put in place of the history (`SwapContext`).
    /// `raw_messages` exactly as stored.
    fn stored(&self, read: &Read<'_>, id: &str) -> Result<Option<String>> {
        Ok(Some(load(read.conn, read.path, id)?.raw_messages))
    }

    fn load(&self, read: &Read<'_>, id: &str) -> Result<StoredConversation> {
        let row = load(read.conn, read.path, id)?;
        let own = row.own_summary;
        if own > 0 && history::is_responses(&row.provider, row.metadata.as_deref()) {
            history::responses_boundary(&row.raw_messages, own)
                .map_err(|why| crate::error::Error::conversation(id, why))?;
        }
        Ok(
            conversation(row.id, row.raw_messages, row.version_marker, row.raw_blob)
                .with_agent_summary(own),
        )
    }
}

/// A loaded kodelet conversation: its version is the `updated_at` marker and the hash and
/// storage class (`blob`) of `raw_messages`. The hash is taken when a compaction is proposed (of
/// the same loaded bytes), so conversations that are only planned, and left as they are, are
/// never hashed.
pub fn conversation(
    id: String,
    raw_messages: String,
    marker: String,
    blob: bool,
) -> StoredConversation {
    let state = Loaded {
        marker,
        raw_blob: blob,
    };
    StoredConversation::with_state(id, raw_messages, Arc::new(state))
}

/// kodelet's state of a loaded conversation.
#[derive(Debug)]
struct Loaded {
    /// [`version_marker`] of `updated_at`.
    marker: String,
    /// Whether `raw_messages` is stored as a BLOB.
    raw_blob: bool,
}

/// `tool_results` as stored now, read on the planning thread when a compaction is proposed and
/// prepared there ([`prepare_tools`]) straight from SQLite's copy of the cell, with the digest
/// of the value it was prepared from. `None` when it cannot be read or prepared: the writer then
/// filters it itself, as it always could.
fn current_tools(
    read: &Read<'_>,
    id: &str,
    call_ids: &HashSet<String>,
) -> Option<(write::PreparedTools, String)> {
    read.conn
        .prepare_cached("SELECT tool_results FROM conversations WHERE id = ?1")
        .ok()?
        .query_row([id], |r| {
            let v = r.get_ref(0)?;
            Ok(prepare_tools(v, call_ids).map(|t| (t, crate::store::pre_image::value_digest(v))))
        })
        .ok()
        .flatten()
}

/// `tool_results` prepared on the pool: its packed pre-image, and the filtered value (`None`:
/// nothing to drop, or not UTF-8 TEXT, which agent-db leaves as it is).
fn prepare_tools(v: ValueRef<'_>, call_ids: &HashSet<String>) -> Option<write::PreparedTools> {
    let (bytes, blob) = match v {
        ValueRef::Text(b) => (b, false),
        ValueRef::Blob(b) => (b, true),
        _ => return None,
    };
    let filtered = match blob {
        false => std::str::from_utf8(bytes)
            .ok()
            .and_then(|t| filter_tool_results(t, call_ids)),
        true => None,
    };
    Some(write::PreparedTools {
        packed: Arc::new(Packed::new(bytes, blob).ok()?),
        filtered,
    })
}

impl Loaded {
    /// The digest and packed pre-image of the loaded `raw_messages`. A compression failure only
    /// means the writer copies the cell itself, as it always could.
    fn seal_text(&self, loaded: &str) -> crate::store::conversation::Sealed {
        crate::store::conversation::Sealed {
            digest: crate::util::version_digest(loaded.as_bytes()),
            packed: Packed::new(loaded.as_bytes(), self.raw_blob)
                .ok()
                .map(Arc::new),
        }
    }
}

impl LoadedState for Loaded {
    fn seal(&self, loaded: &str) -> Option<crate::store::conversation::Sealed> {
        Some(self.seal_text(loaded))
    }

    /// From `provider` and `metadata.api_mode` ([`detect`]), and from the shape of the messages
    /// where those do not say it (an unknown provider, or an OpenAI row whose `api_mode` is
    /// missing or unreadable) and the shape is unambiguous. Rows of the removed `google`
    /// provider are refused whatever their shape: kodelet no longer loads them.
    fn format(
        &self,
        meta: &ConversationMeta,
        raw_messages: &str,
    ) -> std::result::Result<crate::message::Format, crate::message::FormatError> {
        let stated = detect(&meta.provider, meta.api_mode.as_deref());
        let unstated = match &stated {
            Err(_) => meta.provider != "google",
            Ok(f) if *f == OPENAI_CHAT => meta.api_mode.as_deref().is_none_or(str::is_empty),
            Ok(_) => false,
        };
        if unstated {
            if let Some(f) = shape::detect(raw_messages) {
                return Ok(f);
            }
        }
        stated
    }

    /// Runs on the planning pool: the hashes of the version, the JSON work of the summary row
    /// and of `tool_results` (read here, with its digest joining the version), and the
    /// compression of the pre-images are done here, not on the writer thread.
    fn propose(
        &self,
        id: &str,
        loaded: crate::store::conversation::Loaded<'_>,
        c: Compaction,
        read: Option<&Read<'_>>,
    ) -> Box<dyn Commit> {
        let sealed;
        let sealed = match loaded {
            crate::store::conversation::Loaded::Sealed(s) => s,
            crate::store::conversation::Loaded::Text(t) => {
                sealed = self.seal_text(t);
                &sealed
            }
        };
        // A store whose compaction keeps `tool_results` whole needs nothing prepared.
        let keeps = read.is_some_and(|r| {
            read::check_schema_again(r.conn, r.path).is_ok_and(|c| c.keeps_tool_results())
        });
        let prepared = read
            .filter(|_| !keeps)
            .and_then(|r| current_tools(r, id, &c.call_ids));
        let (tools, tools_digest) = match prepared {
            Some((t, digest)) => (Some(t), Some(digest)),
            None => (None, None),
        };
        let version = Version {
            marker: self.marker.clone(),
            raw_digest: sealed.digest.clone(),
            raw_blob: self.raw_blob,
            // Only a prepared tool_results is checked: the writer's value must be the one it
            // was prepared from.
            tools_digest,
        };
        let hashed = write::hashed_prefix(id, &c.history, tools.as_ref());
        Box::new(write::Proposal {
            hashed,
            id: id.to_string(),
            format: c.format,
            version,
            message_count: summaries::message_count(&c.history),
            first_user_text: summaries::first_user_text(&c.history),
            raw_messages: c.history,
            tail_start: c.tail_start,
            summary: c.summary,
            context_after: c.context_after,
            call_ids: c.call_ids,
            pre_image: sealed.packed.clone(),
            tools,
        })
    }
}

//! The registry of store kinds, and the trait each kind's adapter implements.
//!
//! A store kind is one folder under `src/agents/` (`kodelet/`, `docker_agent/`) whose `mod.rs`
//! implements [`Adapter`], exports `pub const KIND: StoreKind` with its detection rank, and adds
//! it to [`REGISTERED`]; [`KINDS`] is them in detection order. Nothing names them all. Everything that used to `match` on the kind (detection,
//! default path, name, scan, meta, providers, load, capabilities) asks the adapter. The write
//! side is the store's typed proposal ([`LoadedState::propose`]), committed by the shared
//! protocol in [`super::commit`].

use std::path::{Path, PathBuf};

use rusqlite::Connection;

use super::conversation::{Read, StoredConversation};
use super::meta::{ConversationMeta, Facts, Prefilter};
use crate::error::Result;

/// Every registered store kind, in link order: each agent's folder adds its `KIND` with
/// `#[linkme::distributed_slice(crate::store::kind::REGISTERED)]`.
#[linkme::distributed_slice]
pub static REGISTERED: [StoreKind];

/// Every store kind agent-db understands, in detection order (by [`StoreKind::rank`]).
pub static KINDS: std::sync::LazyLock<Vec<StoreKind>> = std::sync::LazyLock::new(|| {
    let mut kinds = REGISTERED.to_vec();
    kinds.sort_by_key(|k| k.rank);
    kinds
});

/// One store kind's reading side and its facts. Implementations are unit structs, one per
/// folder under `store/`.
pub trait Adapter: Sync + 'static {
    /// The name users type (`--agent`, `[store] agent`) and the audit log records.
    fn name(&self) -> &'static str;
    /// Other names users know the agent by (`cagent` for docker-agent), accepted wherever the
    /// name is (`--agent`, `[store] agent`).
    fn aliases(&self) -> &'static [&'static str] {
        &[]
    }
    /// Tables whose presence (all of them) identifies a file of this kind.
    fn signature_tables(&self) -> &'static [&'static str];
    /// Whether the file (its `tables`) is of this kind: by default, all of
    /// [`Adapter::signature_tables`] are among them; a fork sharing another agent's tables may
    /// also read what the file records (Kilo: its own migrations).
    fn recognizes(&self, _conn: &Connection, tables: &[String]) -> bool {
        self.signature_tables()
            .iter()
            .all(|t| tables.iter().any(|n| n == t))
    }
    /// Refuse a file of this kind whose schema agent-db does not know (read-only check).
    fn check_schema(&self, conn: &Connection, path: &Path) -> Result<()>;
    /// The agent's default store file.
    fn default_path(&self) -> PathBuf;
    /// Files beside the default one that the agent writes in other setups (opencode's
    /// `opencode-<channel>.db`), for discovery messages and `stores`: none, the default.
    fn nearby(&self) -> Vec<PathBuf> {
        Vec::new()
    }
    /// What the files of [`Adapter::nearby`] are, for discovery messages and `stores`.
    fn nearby_role(&self) -> &'static str {
        "another channel"
    }
    /// How [`Adapter::default_path`] is found, for `--help` (`~/.cagent/session.db`).
    fn default_path_doc(&self) -> &'static str;
    /// Where the store keeps its conversation IDs (table, column), for ID prefixes.
    fn id_column(&self) -> (&'static str, &'static str);
    /// Whether the store can hold a rewritten head (the `prune` strategy), or only append.
    fn rewrites_history(&self) -> bool;
    /// The codecs of the store's message formats (kodelet's provider formats; one for the
    /// other stores). Its metas carry the one a conversation uses.
    fn codecs(&self) -> &'static [crate::message::Format];
    /// Whether a compaction of this file can keep a tail verbatim.
    fn keeps_tail(&self, read: &Read<'_>) -> Result<bool>;
    /// The distinct providers of the store's conversations, sorted.
    fn providers(&self, read: &Read<'_>) -> Result<Vec<String>>;
    /// Stream every conversation's metadata in listing order; `f` returns `false` to stop.
    fn scan(
        &self,
        read: &Read<'_>,
        prefilter: Prefilter,
        f: &mut dyn FnMut(ConversationMeta) -> bool,
    ) -> Result<()>;
    /// [`Adapter::scan`] with `--all-over` ([`super::Store::scan_facts`] calls it only then), of
    /// only what the selection reads; the default hands out each meta's [`Facts`].
    fn scan_facts(
        &self,
        read: &Read<'_>,
        prefilter: Prefilter,
        f: &mut dyn FnMut(Facts<'_>) -> bool,
    ) -> Result<()> {
        self.scan(read, prefilter, &mut |m| f(m.facts()))
    }
    /// One conversation's metadata, or `None`.
    fn meta(&self, read: &Read<'_>, id: &str) -> Result<Option<ConversationMeta>>;
    /// One conversation's history and the store's state of this version.
    fn load(&self, read: &Read<'_>, id: &str) -> Result<StoredConversation>;
    /// The file's schema version as the agent numbers it, the newest agent-db knows, and
    /// whether agent-db writes to it. The default: the schema check alone decides (a file it
    /// accepts is written).
    fn schema_status(&self, _conn: &Connection, _path: &Path) -> Result<SchemaStatus> {
        Ok(SchemaStatus {
            version: None,
            newest_known: None,
            writable: true,
        })
    }
    /// The file's schema version `version` (as [`Adapter::schema_status`] gives it) in the
    /// words the agent's users know (`opencode 2.x`, `goose schema v16 (goose 1.47)`).
    fn version_name(&self, version: &str) -> String {
        format!("{} {version}", self.name())
    }
    /// Bring data the agent derives from a conversation (a search index) up to date after a
    /// restore put the conversation's archived cells back, in the restore's transaction.
    /// `changed`: the agent wrote to the conversation after the compaction (a `--force`d
    /// restore over later changes); otherwise the store is back to its pre-image.
    fn after_restore(
        &self,
        _tx: &Connection,
        _path: &Path,
        _conversation: &str,
        _changed: bool,
    ) -> Result<()> {
        Ok(())
    }
    /// Whether the agent added to conversation `id` after agent-db's compaction
    /// `compaction_id`, in a way its archived cells do not show (goose: a message row of the
    /// session past the rows that compaction inserted). A restore then needs `--force`. The
    /// default: the archived cells alone tell.
    fn changed_after(&self, _read: &Read<'_>, _id: &str, _compaction_id: i64) -> Result<bool> {
        Ok(false)
    }
    /// The child sessions conversation `id` ran (docker-agent's sub-sessions), each with its
    /// title, in the conversation's order: none, the default.
    fn children(&self, _read: &Read<'_>, _id: &str) -> Result<Vec<(String, Option<String>)>> {
        Ok(Vec::new())
    }
    /// What the store keeps of conversation `id` but the agent no longer sends to the model
    /// (goose's rows a compaction hid, which its UI still shows): `None`, the default, when the
    /// store keeps nothing of the kind.
    fn hidden(&self, _read: &Read<'_>, _id: &str) -> Result<Option<Hidden>> {
        Ok(None)
    }
    /// Why agent-db leaves conversation `id` alone, by the agent's own rules or records: the
    /// agent never compacts it (goose's providers that manage their own context), or the agent
    /// is working on it now (kodelet's running `chat_turns`). Selection skips it with this
    /// reason; `None`, the default, for every conversation.
    fn left_alone(&self, _read: &Read<'_>, _id: &str) -> Result<Option<String>> {
        Ok(None)
    }
    /// Every conversation [`Adapter::left_alone`] would name right now, with its reason, read at
    /// once for a whole batch selection (so a listing asks nothing per row); `None`, the
    /// default, when the store answers only one conversation at a time.
    fn left_alone_now(
        &self,
        _read: &Read<'_>,
    ) -> Result<Option<std::collections::HashMap<String, String>>> {
        Ok(None)
    }
    /// The history the agent loaded right before compaction `compaction_id` of conversation
    /// `id` (kodelet: the archived pre-image; docker-agent, goose, opencode: the live rows
    /// ordered before the compaction's first inserted row, with the cells the archive holds as
    /// they were then), as a JSON array of the store's message JSON, for a re-compaction that
    /// summarizes the originals ([`crate::archive::originals`]). `None`, the default, or when it cannot be read
    /// back: the re-compaction summarizes the earlier summary and says so.
    fn archived_history(
        &self,
        _read: &Read<'_>,
        _id: &str,
        _compaction_id: i64,
    ) -> Result<Option<String>> {
        Ok(None)
    }
    /// How many leading messages of [`Adapter::archived_history`]'s history were the agent's own
    /// summary then (as a loaded conversation's `agent_summary` says now): 0, the default.
    fn archived_agent_summary(
        &self,
        _read: &Read<'_>,
        _id: &str,
        _compaction_id: i64,
    ) -> Result<usize> {
        Ok(0)
    }
    /// Every stored row of conversation `id`, in this store's documented shape, for `show
    /// --raw` (docs/stores.md): kodelet's `raw_messages` as stored; for the others a JSON array
    /// of the conversation's rows, every column as stored. `None`, the default: the store has
    /// no such form, and `show --raw` is refused.
    fn stored(&self, _read: &Read<'_>, _id: &str) -> Result<Option<String>> {
        Ok(None)
    }
    /// Rows the agent never reads again, per conversation and category, that `reclaim` may
    /// remove ([`super::reclaim`]): each category established from the agent's own source
    /// (docs/stores.md). `idle_before_ms`: only conversations the agent last wrote before this
    /// time (Unix milliseconds); `only`: that conversation alone. Each unit goes to `sink` as
    /// soon as it is complete, so no caller holds every key of the store. None, the default.
    fn reclaimable(
        &self,
        _read: &Read<'_>,
        _idle_before_ms: i64,
        _only: Option<&str>,
        _sink: &mut super::reclaim::Sink<'_>,
    ) -> Result<()> {
        Ok(())
    }
    /// Why `reclaim` may remove nothing from this agent's store (`None`: it has categories,
    /// [`Adapter::reclaimable`]); from the agent's own source, as docs/stores.md cites it.
    fn nothing_to_reclaim(&self) -> Option<&'static str> {
        Some("no rows it never reads again are established from its source")
    }
    /// Which of the file's tables hold which kind of bytes (live history, hidden history, the
    /// agent's logs and caches), for `stats`' space figures ([`super::space`]), and how to count
    /// a conversation's bytes. The default: every table is "other agent tables".
    fn space_map(&self, _read: &Read<'_>) -> Result<super::space::SpaceMap> {
        Ok(super::space::SpaceMap::default())
    }
    /// What `retire` moves of a conversation: its table, its children, the other tables' rows
    /// that name it (docs/stores.md). `None`, the default: the store cannot retire.
    fn retire_map(&self) -> Option<super::retire::RetireMap> {
        None
    }
    /// Whether `--provider wanted` matches conversations whose stored provider is `provider`:
    /// the same name, the default; a store whose provider implies a format (kodelet) also
    /// matches the format's name.
    fn provider_matches(&self, provider: &str, wanted: &str) -> bool {
        provider == wanted
    }
    /// Why `--all-over` cannot rate a conversation, in this store's words: (no current context
    /// stored, no context window known).
    fn unrated(&self) -> Unrated {
        Unrated {
            no_usage: "no stored currentContextWindow",
            no_window: "maxContextWindow is 0 or missing (give --context-limit N)",
        }
    }
}

/// Messages a store keeps but the agent does not send ([`Adapter::hidden`]).
#[derive(Debug, Clone, Default)]
pub struct Hidden {
    /// How many stored rows.
    pub rows: usize,
    /// Those rows as a JSON array of the store's message JSON, in the agent's order.
    pub raw_messages: String,
}

/// A file's schema version against what agent-db knows ([`Adapter::schema_status`]).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct SchemaStatus {
    /// The file's version, as the agent numbers its migrations (`None`: not recorded).
    pub version: Option<String>,
    /// The newest version agent-db knows.
    pub newest_known: Option<String>,
    /// Whether agent-db writes to the file (compact, restore); a newer file is only read.
    pub writable: bool,
}

/// The skip reasons of a conversation `--all-over` cannot rate ([`Adapter::unrated`]).
#[derive(Debug, Clone, Copy)]
pub struct Unrated {
    pub no_usage: &'static str,
    pub no_window: &'static str,
}

/// A store kind: a handle on its registered [`Adapter`], with its detection rank.
#[derive(Clone, Copy)]
pub struct StoreKind {
    adapter: &'static dyn Adapter,
    rank: u32,
}

impl StoreKind {
    /// The kind of `adapter` (each folder's `KIND` constant). `rank` places it in detection
    /// order ([`StoreKind::detect`] tries lower ranks first): a kind whose signature tables are
    /// a subset of another's ranks after it.
    pub const fn new(adapter: &'static dyn Adapter, rank: u32) -> StoreKind {
        StoreKind { adapter, rank }
    }

    /// Its place in detection order.
    pub fn rank(self) -> u32 {
        self.rank
    }

    /// Every agent: the first registered kind of each name (opencode's 2.x and 1.x kinds
    /// answer to one name, `opencode`; the file's tables tell them apart, see [`StoreKind::detect`]).
    pub fn all() -> impl Iterator<Item = StoreKind> {
        KINDS
            .iter()
            .enumerate()
            .filter(|(i, k)| KINDS[..*i].iter().all(|e| e.name() != k.name()))
            .map(|(_, k)| *k)
    }

    /// The kind named `s` (`kodelet`, `docker-agent`, or an alias such as `cagent`).
    pub fn parse(s: &str) -> Option<StoreKind> {
        StoreKind::all().find(|k| k.name() == s || k.aliases().contains(&s))
    }

    /// Other names the agent is known by ([`Adapter::aliases`]).
    pub fn aliases(self) -> &'static [&'static str] {
        self.adapter.aliases()
    }

    /// The first kind that recognizes the file ([`Adapter::recognizes`]).
    pub fn recognize(conn: &Connection, tables: &[String]) -> Option<StoreKind> {
        KINDS
            .iter()
            .copied()
            .find(|k| k.adapter.recognizes(conn, tables))
    }

    /// The first kind whose signature tables are all among `tables`.
    pub fn detect(tables: &[String]) -> Option<StoreKind> {
        KINDS.iter().copied().find(|k| {
            k.adapter
                .signature_tables()
                .iter()
                .all(|t| tables.iter().any(|n| n == t))
        })
    }

    pub fn name(self) -> &'static str {
        self.adapter.name()
    }

    /// How the default file is found, for `--help`.
    pub fn default_path_doc(self) -> &'static str {
        self.adapter.default_path_doc()
    }

    /// This agent's default store file.
    pub fn default_path(self) -> PathBuf {
        self.adapter.default_path()
    }

    /// The agent's files beside its default one ([`Adapter::nearby`]).
    pub fn nearby(self) -> Vec<PathBuf> {
        self.adapter.nearby()
    }

    /// Whether the store can hold a rewritten head (the `prune` strategy), or only append.
    pub fn rewrites_history(self) -> bool {
        self.adapter.rewrites_history()
    }

    /// Whether `--provider wanted` matches a stored provider `provider`
    /// ([`Adapter::provider_matches`]).
    pub fn provider_matches(self, provider: &str, wanted: &str) -> bool {
        self.adapter.provider_matches(provider, wanted)
    }

    /// Why `--all-over` cannot rate a conversation of this kind.
    pub fn unrated(self) -> Unrated {
        self.adapter.unrated()
    }

    /// The codecs of this kind's message formats.
    pub fn codecs(self) -> &'static [crate::message::Format] {
        self.adapter.codecs()
    }

    /// The registered codec named `name` ([`crate::message::Codec::name`]: `anthropic`,
    /// `openai-chat`, `opencode`), of whichever kind hands it out.
    pub fn codec(name: &str) -> Option<crate::message::Format> {
        StoreKind::all_codecs().find(|c| c.name() == name)
    }

    /// Every registered codec, of every kind (a codec shared by two kinds appears twice).
    pub fn all_codecs() -> impl Iterator<Item = crate::message::Format> {
        KINDS.iter().flat_map(|k| k.codecs().iter().copied())
    }

    pub(crate) fn adapter(self) -> &'static dyn Adapter {
        self.adapter
    }
}

impl PartialEq for StoreKind {
    fn eq(&self, other: &StoreKind) -> bool {
        self.name() == other.name()
    }
}

impl Eq for StoreKind {}

impl std::fmt::Debug for StoreKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl serde::Serialize for StoreKind {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

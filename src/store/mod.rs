//! The store file: where it is ([`locate`]), opening and recognizing it ([`open`]), what a
//! listing knows of a conversation ([`meta`]), a loaded conversation and its write
//! ([`conversation`]), and the [`Store`] facade over the agent's [`kind::Adapter`].
//!
//! This is the only layer that runs SQL, and the rusqlite connection never leaves it (and the
//! agents' folders, `src/agents/`, and the undo log, `src/archive/`, it hands it to). Each
//! agent's format is one folder under `src/agents/` with an [`kind::Adapter`], registered in
//! [`kind::KINDS`]; the write protocol shared by all of them is [`commit`], run by the
//! [`writer`] thread. Opening never creates or changes anything in a file that is not already a
//! store agent-db recognizes: the file is opened without `CREATE`, its `journal_mode` is never
//! changed, and agent-db's own tables are added only by [`Store::ensure_agent_tables`] and the
//! writer, after detection succeeded.

pub mod agent_tables;
pub mod busy;
pub(crate) mod cells;
pub mod cold;
pub mod commit;
pub mod conversation;
pub mod kind;
pub mod locate;
pub mod lock;
pub mod meta;
pub mod open;
pub mod pre_image;
pub mod prefix;
pub mod preflight;
pub mod reclaim;
pub mod retire;
pub mod retirement;
pub mod row_codec;
pub(crate) mod schema_util;
pub mod space;
pub mod writer;

use std::path::PathBuf;

use rusqlite::Connection;

use crate::error::{Error, Result};
pub use crate::models::ContextLimits;
pub use commit::Written;
pub use conversation::{Compaction, Proposal, StoredConversation};
pub use kind::StoreKind;
pub(crate) use locate::home_dir;
pub use locate::{resolve_path, resolve_store, survey, Resolved, StoreChoice, Surveyed};
pub use meta::{corrupt_usage, over_threshold, utilization, ConversationMeta, Facts, Prefilter};
pub(crate) use open::connect;

/// Whether a command only reads or also writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    Read,
    Write,
}

/// An open, recognized store. The connection is private to `store/`.
pub struct Store {
    pub path: PathBuf,
    pub kind: StoreKind,
    pub access: Access,
    pub(crate) conn: Connection,
    pub(crate) limits: ContextLimits,
}

/// Everything needed to open the same store again on another thread (the pipeline's loader,
/// planning pool and writer each have their own connection).
#[derive(Debug, Clone)]
pub struct Location {
    pub path: PathBuf,
    /// `[context_limits]` for stores that do not record a context window.
    pub limits: ContextLimits,
}

impl Location {
    /// Open and recognize the store.
    pub fn open(&self, access: Access) -> Result<Store> {
        Store::open_with(&self.path, access, self.limits.clone())
    }
}

impl Store {
    /// Stream every conversation's metadata in listing order; `f` returns `false` to stop.
    pub fn scan(&self, f: impl FnMut(ConversationMeta) -> bool) -> Result<()> {
        self.scan_prefiltered(Prefilter::default(), f)
    }

    /// [`Store::scan`], leaving out in SQL rows the selection would drop silently (a store that
    /// cannot tell in advance passes every row).
    pub fn scan_prefiltered(
        &self,
        prefilter: Prefilter,
        mut f: impl FnMut(ConversationMeta) -> bool,
    ) -> Result<()> {
        let read = self.read();
        self.kind.adapter().scan(&read, prefilter, &mut f)
    }

    /// [`Store::scan_prefiltered`] of only what the selection reads ([`Facts`]). With
    /// `--all-over`, a store whose pass can skip the rest of a row does
    /// ([`kind::Adapter::scan_facts`]: no [`ConversationMeta`] per kept row); otherwise every row
    /// is listed, and the metas' facts are handed out.
    pub fn scan_facts(
        &self,
        prefilter: Prefilter,
        mut f: impl FnMut(Facts<'_>) -> bool,
    ) -> Result<()> {
        let read = self.read();
        let adapter = self.kind.adapter();
        if prefilter.all_over.is_none() {
            return adapter.scan(&read, prefilter, &mut |m| f(m.facts()));
        }
        adapter.scan_facts(&read, prefilter, &mut f)
    }

    /// The distinct providers of the store's conversations (read from an index, never from
    /// message bodies), sorted.
    pub fn providers(&self) -> Result<Vec<String>> {
        self.kind.adapter().providers(&self.read())
    }

    /// One conversation's metadata.
    pub fn meta(&self, id: &str) -> Result<ConversationMeta> {
        self.kind
            .adapter()
            .meta(&self.read(), id)?
            .ok_or_else(|| Error::ConversationNotFound { id: id.to_string() })
    }

    /// Why agent-db leaves conversation `id` alone (the agent never compacts it, or is working
    /// on it now), or `None` ([`kind::Adapter::left_alone`]).
    pub fn left_alone(&self, id: &str) -> Result<Option<String>> {
        self.kind.adapter().left_alone(&self.read(), id)
    }

    /// Every conversation [`Store::left_alone`] would name now, with its reason, when the store
    /// can tell them at once ([`kind::Adapter::left_alone_now`]).
    pub fn left_alone_now(&self) -> Result<Option<std::collections::HashMap<String, String>>> {
        self.kind.adapter().left_alone_now(&self.read())
    }

    /// The child sessions conversation `id` ran, with their titles
    /// ([`kind::Adapter::children`]).
    pub fn children(&self, id: &str) -> Result<Vec<(String, Option<String>)>> {
        self.kind.adapter().children(&self.read(), id)
    }

    /// What the store keeps of conversation `id` but the agent does not send to the model
    /// ([`kind::Adapter::hidden`]).
    pub fn hidden(&self, id: &str) -> Result<Option<kind::Hidden>> {
        self.kind.adapter().hidden(&self.read(), id)
    }

    /// Load one conversation for planning.
    pub fn load(&self, id: &str) -> Result<StoredConversation> {
        self.kind.adapter().load(&self.read(), id)
    }

    /// Every stored row of conversation `id` in the store's documented shape (`show --raw`),
    /// or `None` when the store has no such form ([`kind::Adapter::stored`]).
    pub fn stored(&self, id: &str) -> Result<Option<String>> {
        self.kind.adapter().stored(&self.read(), id)
    }

    /// Whether a compaction can keep a tail verbatim (docker-agent before migration 21 loads
    /// only what follows the last summary, so its plans get a zero tail budget).
    pub fn can_keep_tail(&self) -> Result<bool> {
        self.kind.adapter().keeps_tail(&self.read())
    }

    /// Write one compaction through the shared commit protocol ([`commit`]), creating
    /// agent-db's tables first if needed. The pipeline's writer thread does the same on its own
    /// connection; this is for single writes (and the tests of the protocol).
    pub fn commit(&mut self, proposal: &Proposal, now: &str) -> Result<Written> {
        self.ensure_agent_tables()?;
        proposal
            .write
            .commit(&mut self.conn, &self.path, &proposal.audit, now)
    }

    /// The connection, path and limits an adapter reads with.
    pub(crate) fn read(&self) -> conversation::Read<'_> {
        conversation::Read {
            conn: &self.conn,
            path: &self.path,
            limits: &self.limits,
        }
    }
}

//! One conversation as loaded for planning ([`StoredConversation`]) with its store's state of
//! it ([`LoadedState`]), what an adapter reads with ([`Read`]), the store-neutral
//! [`Compaction`] the pipeline hands back, and the [`Proposal`] that writes it.

use std::collections::HashSet;
use std::path::Path;
use std::sync::Arc;

use rusqlite::Connection;

use super::commit::{Commit, Written};
use super::meta::ConversationMeta;
use super::pre_image::{AuditEntry, Packed};
use super::Store;
use crate::message::FormatError;
use crate::models::ContextLimits;

/// What an adapter reads with: the store's connection, its path (for errors) and the context
/// limits given to the store when it was opened.
pub struct Read<'a> {
    pub conn: &'a Connection,
    pub path: &'a Path,
    pub limits: &'a ContextLimits,
}

/// A store's state of one loaded conversation (its version token, and for an append-only
/// store the positions of the loaded messages). It makes the store's typed proposal.
pub trait LoadedState: std::fmt::Debug + Send + Sync {
    /// The store's write of `compaction` over exactly this version; `loaded` is the history as
    /// it was loaded (or what [`LoadedState::seal`] kept of it), `read` the planning thread's own
    /// read connection (when it has one). Runs on the planning pool, so CPU work the write can
    /// do ahead (encoding, compressing the pre-image) belongs here rather than on the one writer
    /// thread.
    fn propose(
        &self,
        id: &str,
        loaded: Loaded<'_>,
        compaction: Compaction,
        read: Option<&Read<'_>>,
    ) -> Box<dyn Commit>;

    /// What the write will need of the loaded history `loaded`, if the store can keep it in
    /// less memory than the text (its digest and compressed pre-image): then the text is
    /// dropped once the conversation is planned, while it waits for its summary. `None` (the
    /// default): the text is kept.
    fn seal(&self, _loaded: &str) -> Option<Sealed> {
        None
    }

    /// The conversation's message format, by the store's rule: the one its metadata states
    /// ([`ConversationMeta::format`]), the default. A store whose rows may not state it
    /// (kodelet) tells it from `raw_messages`' shape; `Err` says why it cannot be compacted.
    fn format(
        &self,
        meta: &ConversationMeta,
        _raw_messages: &str,
    ) -> std::result::Result<crate::message::Format, FormatError> {
        meta.format()
    }
}

/// The loaded history, as [`LoadedState::propose`] receives it.
#[derive(Clone, Copy)]
pub enum Loaded<'a> {
    Text(&'a str),
    Sealed(&'a Sealed),
}

/// What a store kept of a loaded history after planning (see [`LoadedState::seal`]).
#[derive(Debug, Clone)]
pub struct Sealed {
    /// [`crate::util::version_digest`] of the history's bytes.
    pub digest: String,
    /// The history compressed, as the archive keeps it (`None`: compression failed, and the
    /// writer copies the stored cell itself).
    pub packed: Option<Arc<Packed>>,
}

/// One conversation as loaded for planning: its history in the store's message JSON, and the
/// store's own state of exactly this version (opaque here; the store's proposal uses it).
#[derive(Debug, Clone)]
pub struct StoredConversation {
    pub id: String,
    /// The history the agent currently sends, as a JSON array of the store's message JSON
    /// (empty once [`StoredConversation::seal`] replaced it).
    pub raw_messages: String,
    /// The conversation's open to-dos as the agent keeps them outside its history (its own
    /// to-do table), in the agent's order; empty when the store keeps none. The retention score
    /// counts them as to-dos of the summarized span ([`crate::retention::Artifacts::add_native_todos`]).
    pub native_todos: Vec<String>,
    /// How many leading messages of the history are a summary the agent wrote itself in place
    /// of the messages before (its own compaction), where only the store can tell (kodelet's
    /// `activeDisplayStart`); 0 otherwise. A compaction carries it forward as an earlier summary
    /// ([`crate::summary::prior_len`]).
    pub agent_summary: usize,
    state: Arc<dyn LoadedState>,
    sealed: Option<Sealed>,
}

impl StoredConversation {
    /// A conversation as a store loaded it, with that store's state.
    pub(crate) fn with_state(
        id: impl Into<String>,
        raw_messages: String,
        state: Arc<dyn LoadedState>,
    ) -> Self {
        StoredConversation {
            id: id.into(),
            raw_messages,
            native_todos: Vec::new(),
            agent_summary: 0,
            state,
            sealed: None,
        }
    }

    /// With the agent's own summary at the head of the history ([`Self::agent_summary`]).
    pub(crate) fn with_agent_summary(mut self, n: usize) -> Self {
        self.agent_summary = n;
        self
    }

    /// With the open to-dos the store keeps outside the history.
    pub(crate) fn with_native_todos(mut self, todos: Vec<String>) -> Self {
        self.native_todos = todos;
        self
    }

    /// A conversation no store loaded, for planning alone (tests plan these): its proposal
    /// writes nothing and reports the conversation changed.
    pub fn detached(id: impl Into<String>, raw_messages: impl Into<String>) -> Self {
        Self::with_state(id, raw_messages.into(), Arc::new(Detached))
    }

    /// The conversation's message format: the adapter's rule over its metadata and, where the
    /// metadata does not say it, its history ([`LoadedState::format`]).
    pub fn format(&self, meta: &ConversationMeta) -> Result<crate::message::Format, FormatError> {
        self.state.format(meta, &self.raw_messages)
    }

    /// The store's proposal to write `compaction` over exactly this version. `store` is a read
    /// connection the store may use to prepare the write (the planning thread's own).
    pub fn propose(
        &self,
        compaction: Compaction,
        audit: AuditEntry,
        store: Option<&Store>,
    ) -> Proposal {
        let read = store.map(Store::read);
        let loaded = match &self.sealed {
            Some(s) => Loaded::Sealed(s),
            None => Loaded::Text(&self.raw_messages),
        };
        Proposal {
            write: self
                .state
                .propose(&self.id, loaded, compaction, read.as_ref()),
            audit,
        }
    }

    /// Once the conversation is planned (decoded into messages that keep their own bytes):
    /// replace the history's text by what the write needs of it, when the store can keep that
    /// smaller (its digest and compressed pre-image). A batch holds up to `--concurrency`
    /// conversations while their summaries are written; this keeps a fraction of each.
    pub fn seal(&mut self) {
        if self.sealed.is_none() {
            if let Some(s) = self.state.seal(&self.raw_messages) {
                self.sealed = Some(s);
                self.raw_messages = String::new();
            }
        }
    }
}

/// A compaction in store-neutral terms, as the pipeline hands it to a store. Each store turns
/// it into its own typed proposal and takes what it needs (kodelet rewrites the history; an
/// append-only store appends the summary and points at the kept tail).
#[derive(Debug, Clone)]
pub struct Compaction {
    pub format: crate::message::Format,
    /// The complete new history, in the store's message JSON.
    pub history: String,
    /// The summary text, when the head was summarized (not pruned).
    pub summary: Option<String>,
    /// Index (in the loaded messages) of the first message kept verbatim.
    pub tail_start: usize,
    /// Index of the latest instruction put back after the summary, when the cut fell after it.
    pub reinsert: Option<usize>,
    /// The context the agent will send next: the new history plus the fixed overhead.
    pub context_after: usize,
    /// Tool-call ids still present in the new history.
    pub call_ids: HashSet<String>,
    /// The model that wrote the summary, if one did.
    pub model: Option<String>,
    /// agent-db's count of each loaded message ([`crate::tokens::message_tokens`], the plan's),
    /// for a store that records what the summarized messages took; empty when not counted (the
    /// store then counts them itself).
    pub message_tokens: Vec<usize>,
}

/// A compaction ready to be written: the audit row and the store's own write.
pub struct Proposal {
    pub audit: AuditEntry,
    pub(crate) write: Box<dyn Commit>,
}

impl Proposal {
    /// The conversation it writes.
    pub fn id(&self) -> &str {
        &self.audit.conversation_id
    }
}

/// The state of a [`StoredConversation::detached`] conversation.
#[derive(Debug)]
struct Detached;

/// The write of a detached conversation: nothing, reported as a change.
struct NotStored;

impl Commit for NotStored {
    fn commit(
        &self,
        _conn: &mut rusqlite::Connection,
        _path: &std::path::Path,
        _audit: &AuditEntry,
        _now: &str,
    ) -> crate::error::Result<Written> {
        Ok(Written::Changed(
            "the conversation was not loaded from a store".into(),
        ))
    }
}

impl LoadedState for Detached {
    fn propose(
        &self,
        _id: &str,
        _loaded: Loaded<'_>,
        _compaction: Compaction,
        _read: Option<&Read<'_>>,
    ) -> Box<dyn Commit> {
        Box::new(NotStored)
    }
}

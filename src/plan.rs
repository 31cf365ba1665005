//! Planning one conversation: load it, decode its messages, count tokens and decide the split.
//!
//! A dry run then runs offline strategies for exact figures (a strategy that calls a model only
//! estimates) and writes nothing. The plan keeps the loaded row and decoded messages so the compactor
//! and the writer work from exactly what was read (the writer re-checks the version token).

use sha2::{Digest, Sha256};

use crate::error::{Error, Result};
use crate::message::{self, Format, Message};
use crate::select::Reason;
use crate::split::{self, Decision, View};
use crate::store::StoredConversation;
pub use crate::store::VersionToken;
use crate::store::{ConversationMeta, Store};
use crate::tokens;

/// Planning settings.
#[derive(Debug, Clone, Default)]
pub struct PlanOptions {
    /// Tail budget; `None` = [`split::default_keep_tokens`] of the context limit.
    pub keep_tokens: Option<usize>,
    /// Overrides a missing or zero stored maxContextWindow.
    pub context_limit: Option<i64>,
}

/// sha256 hex of a text.
pub fn sha256_hex(text: &str) -> String {
    hex::encode(Sha256::digest(text.as_bytes()))
}

/// A conversation loaded and decoded.
#[derive(Debug, Clone)]
pub struct Loaded {
    pub row: StoredConversation,
    pub format: Format,
    pub messages: Vec<Message>,
    pub tokens: Vec<usize>,
    pub version: VersionToken,
}

impl Loaded {
    pub fn total_tokens(&self) -> usize {
        self.tokens.iter().sum()
    }
}

/// The plan for one conversation.
#[derive(Debug, Clone)]
pub struct Plan {
    pub meta: ConversationMeta,
    pub reason: Reason,
    pub loaded: Loaded,
    pub keep_tokens: usize,
    pub decision: Decision,
}

impl Plan {
    pub fn tokens_before(&self) -> usize {
        self.loaded.total_tokens()
    }

    pub fn split(&self) -> Option<&split::Split> {
        match &self.decision {
            Decision::Compact(s) => Some(s),
            Decision::NoOp(_) => None,
        }
    }

    /// The head: messages to summarize.
    pub fn head(&self) -> &[Message] {
        let cut = self.split().map(|s| s.cut).unwrap_or(0);
        &self.loaded.messages[..cut]
    }

    /// The tail: messages kept verbatim.
    pub fn tail(&self) -> &[Message] {
        let cut = self.split().map(|s| s.cut).unwrap_or(0);
        &self.loaded.messages[cut..]
    }

    /// Tokens after compaction, given the summary's token count.
    pub fn tokens_after(&self, summary_tokens: usize) -> usize {
        match self.split() {
            Some(s) => {
                let reinsert = s.reinsert.map(|i| self.loaded.tokens[i]).unwrap_or(0);
                summary_tokens + tokens::MESSAGE_OVERHEAD + reinsert + s.tail_tokens
            }
            None => self.tokens_before(),
        }
    }
}

/// The format of a loaded row: from `provider` and `metadata.api_mode`, and from the shape of
/// the messages where those do not say it (an unknown provider, or an OpenAI row whose
/// `api_mode` is missing or unreadable) and the shape is unambiguous.
pub fn format_of(row: &StoredConversation, meta: &ConversationMeta) -> Result<Format> {
    let stated = meta.format();
    let unstated = match &stated {
        Err(_) => meta.provider != "google",
        Ok(Format::OpenAiChat) => meta.api_mode.as_deref().is_none_or(str::is_empty),
        Ok(_) => false,
    };
    if unstated {
        if let Some(f) = message::shape::detect(&row.raw_messages) {
            return Ok(f);
        }
    }
    stated.map_err(|why| Error::conversation(&row.id, why))
}

/// Decode a loaded row.
pub fn decode(row: StoredConversation, meta: &ConversationMeta) -> Result<Loaded> {
    let format = format_of(&row, meta)?;
    let messages = message::decode_all(format, &row.raw_messages)
        .map_err(|e| Error::conversation(&row.id, e.to_string()))?;
    let tokens = messages
        .iter()
        .map(|m| tokens::message_tokens(format, m))
        .collect();
    let version = row.version.clone();
    Ok(Loaded {
        row,
        format,
        messages,
        tokens,
        version,
    })
}

/// Whether the first message is an earlier agent-db summary.
pub fn starts_with_summary(messages: &[Message]) -> bool {
    messages
        .first()
        .is_some_and(|m| m.role == crate::message::Role::User && is_summary_text(&m.text()))
}

/// The framing line every agent-db summary starts with (used to recognize earlier summaries).
pub const SUMMARY_HEADER: &str = "[agent-db compaction summary]";

/// Whether `text` is an agent-db summary.
pub fn is_summary_text(text: &str) -> bool {
    text.trim_start().starts_with(SUMMARY_HEADER)
}

/// Load, decode and split one selected conversation.
pub fn plan(
    store: &Store,
    meta: ConversationMeta,
    reason: Reason,
    opts: &PlanOptions,
) -> Result<Plan> {
    let row = store.load(&meta.id)?;
    if !store.can_keep_tail()? {
        // The store cannot express a kept tail (docker-agent before migration 21): the summary
        // covers the whole history, as the agent's own compaction does there.
        let opts = PlanOptions {
            keep_tokens: Some(0),
            ..opts.clone()
        };
        return plan_loaded(row, meta, reason, &opts);
    }
    plan_loaded(row, meta, reason, opts)
}

/// Plan from an already loaded row.
pub fn plan_loaded(
    row: StoredConversation,
    meta: ConversationMeta,
    reason: Reason,
    opts: &PlanOptions,
) -> Result<Plan> {
    let loaded = decode(row, &meta)?;
    let limit = match meta.max_context {
        Some(m) if m > 0 => Some(m),
        _ => opts.context_limit,
    };
    let keep_tokens = opts
        .keep_tokens
        .unwrap_or_else(|| split::default_keep_tokens(limit));
    let views: Vec<View> = loaded
        .messages
        .iter()
        .zip(&loaded.tokens)
        .map(|(m, t)| View::of(m, *t))
        .collect();
    let decision = split::split(&views, keep_tokens, starts_with_summary(&loaded.messages));
    Ok(Plan {
        meta,
        reason,
        loaded,
        keep_tokens,
        decision,
    })
}

//! What listing and selection know of a conversation ([`ConversationMeta`], [`Facts`]) and the
//! selection's rule on them, written once: [`utilization`], [`corrupt_usage`],
//! [`over_threshold`] and the scan's [`Prefilter`].

use crate::error::{Error, Result};
use crate::message::FormatError;

/// What listing and selection know of a conversation, read without touching its messages.
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
pub struct ConversationMeta {
    pub id: String,
    /// The conversation's name (kodelet's `summary` column).
    pub name: Option<String>,
    pub provider: String,
    /// The codec of the conversation's message format, handed out by its adapter; `None` when
    /// the adapter does not know it from the row (an unknown provider).
    #[serde(skip)]
    pub codec: Option<crate::message::Format>,
    pub api_mode: Option<String>,
    pub model: Option<String>,
    pub message_count: Option<i64>,
    /// Stored `usage.currentContextWindow`.
    pub current_context: Option<i64>,
    /// Stored `usage.maxContextWindow`.
    pub max_context: Option<i64>,
    /// Stored cumulative `usage.inputTokens` / `usage.outputTokens`.
    pub input_tokens: Option<i64>,
    pub output_tokens: Option<i64>,
    /// The working directory the agent ran in, when the store records it.
    pub cwd: Option<String>,
    pub created_at: String,
    pub updated_at: String,
    /// A problem reading the stored usage, reported instead of failing the whole listing.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub problem: Option<String>,
    /// The conversation this one is a child of (opencode's `parent_id`: a subagent's
    /// session): listed, marked, and left out of batch selections unless named.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parent: Option<String>,
    /// Archived in the agent (opencode's `time_archived`): left out of batch selections
    /// unless `--include-archived`.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub archived: bool,
}

impl ConversationMeta {
    /// Stored utilization `current / max`; with `context_limit` the limit replaces a missing or
    /// zero `maxContextWindow`.
    pub fn utilization(&self, context_limit: Option<i64>) -> Option<f64> {
        utilization(self.current_context, self.max_context, context_limit)
    }

    /// The wire format its adapter stated, or why there is none (the loaded conversation may
    /// still tell it from its history: [`super::StoredConversation::format`]).
    pub fn format(&self) -> Result<crate::message::Format, FormatError> {
        self.codec.ok_or_else(|| FormatError::UnknownProvider {
            provider: self.provider.clone(),
        })
    }

    /// Parsed `updated_at`, or an error naming this conversation.
    pub fn updated(&self) -> Result<chrono::DateTime<chrono::FixedOffset>> {
        self.facts().updated()
    }

    /// What the selection reads of this conversation, borrowed.
    pub fn facts(&self) -> Facts<'_> {
        Facts {
            id: &self.id,
            updated_at: &self.updated_at,
            current_context: self.current_context,
            max_context: self.max_context,
            problem: self.problem.as_deref(),
            parent: self.parent.as_deref(),
            archived: self.archived,
        }
    }
}

/// What a selection without `--provider` reads of a conversation: a listing of ids
/// ([`Store::scan_facts`]) holds only these, borrowed from the row as read.
#[derive(Debug, Clone, Copy)]
pub struct Facts<'a> {
    pub id: &'a str,
    pub updated_at: &'a str,
    /// Stored `usage.currentContextWindow` and `usage.maxContextWindow`.
    pub current_context: Option<i64>,
    pub max_context: Option<i64>,
    /// A problem reading the stored usage ([`ConversationMeta::problem`]).
    pub problem: Option<&'a str>,
    /// [`ConversationMeta::parent`] and [`ConversationMeta::archived`].
    pub parent: Option<&'a str>,
    pub archived: bool,
}

impl Facts<'_> {
    /// [`utilization`] of the stored usage.
    pub fn utilization(&self, context_limit: Option<i64>) -> Option<f64> {
        utilization(self.current_context, self.max_context, context_limit)
    }

    /// Parsed `updated_at`, or an error naming this conversation.
    pub fn updated(&self) -> Result<chrono::DateTime<chrono::FixedOffset>> {
        crate::gotime::parse(self.updated_at)
            .map_err(|e| Error::conversation(self.id, format!("updated_at: {e}")))
    }
}

/// A stored context over its window (`max`, or `context_limit` when `max` is missing or not
/// positive); `None` when either is unknown. The one definition of utilization: the listing,
/// the selection and every store's prefilter compute it here.
pub fn utilization(
    current: Option<i64>,
    max: Option<i64>,
    context_limit: Option<i64>,
) -> Option<f64> {
    if corrupt_usage(current, max).is_some() {
        return None;
    }
    let current = current?;
    let max = match max {
        Some(m) if m > 0 => m,
        _ => context_limit.filter(|l| *l > 0)?,
    };
    Some(current as f64 / max as f64)
}

/// Why a stored context and window cannot be a conversation's usage (a negative count), if
/// they cannot: such a conversation is reported by name with this reason, not counted with
/// those whose window is unknown.
pub fn corrupt_usage(current: Option<i64>, max: Option<i64>) -> Option<String> {
    match (current, max) {
        (Some(c), _) if c < 0 => Some(format!(
            "its stored usage is corrupt: a context of {c} tokens (negative)"
        )),
        (_, Some(m)) if m < 0 => Some(format!(
            "its stored usage is corrupt: a context window of {m} tokens (negative)"
        )),
        _ => None,
    }
}

/// `--all-over RATIO`'s rule, written once: a utilization at or over the ratio is selected.
/// [`crate::select::Selector`], [`Prefilter::keeps`] and the stores' quick prefilters all apply
/// it through this function.
pub fn over_threshold(utilization: f64, ratio: f64) -> bool {
    utilization >= ratio
}

/// What the selection can tell a scan in advance: rows it would drop silently may be left out
/// in SQL, so they are never decoded. Rows it would report (selected, skipped, failed) are
/// always kept; the selection still evaluates every row it gets.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Prefilter {
    /// `--all-over RATIO`.
    pub all_over: Option<f64>,
    /// `--context-limit N` (stands in for a missing or zero `maxContextWindow`).
    pub context_limit: Option<i64>,
    /// Whether the selection reads `updated_at` (recency or an idle window): without it a
    /// store may hand out [`Facts`] with an empty `updated_at` when it costs a query per row.
    pub times: bool,
}

impl Prefilter {
    /// Whether the selection would report this conversation (selected, skipped or failed)
    /// under `--all-over`: the same rule as `Selector::evaluate`, on the same parsed usage.
    pub fn keeps(&self, m: &ConversationMeta) -> bool {
        m.problem.is_some() || self.keeps_usage(m.current_context, m.max_context)
    }

    /// [`Prefilter::keeps`] of a row whose usage was read without a problem, on its stored
    /// context and window alone (for a listing pass that judges a row before decoding it).
    pub fn keeps_usage(&self, current: Option<i64>, max: Option<i64>) -> bool {
        let Some(ratio) = self.all_over else {
            return true;
        };
        // A corrupt usage is reported (by name), never dropped.
        utilization(current, max, self.context_limit).is_none_or(|u| over_threshold(u, ratio))
            || corrupt_usage(current, max).is_some()
    }
}

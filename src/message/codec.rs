//! The [`Codec`] trait: everything that differs between the wire formats of stored messages.
//!
//! A codec decodes a stored message into the provider-neutral [`Message`], says what the agent
//! shows the model, builds a summary message and prune placeholders in its own shape, and names
//! the split and validation quirks of its format. kodelet's three provider formats live beside
//! this module ([`super::anthropic`], [`super::openai_chat`], [`super::responses`]); every other
//! store's codec lives in its own folder under `src/store/`, and its adapter hands it out.

use serde_json::value::RawValue;
use serde_json::Value;

use super::{DecodeError, Message};

/// A complete tool exchange pruned as a whole (one request message with tool calls and the
/// response messages answering all of them), for formats that prune by pairs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolPair {
    /// Index of the request message.
    pub request: usize,
    /// Indices of the response messages, in order.
    pub responses: Vec<usize>,
}

/// One stored message format.
pub trait Codec: Sync + Send + 'static {
    /// The format's name in reports.
    fn name(&self) -> &'static str;

    /// Whether token counts are exact (o200k_base) rather than estimated for this format.
    fn tokens_exact(&self) -> bool {
        false
    }

    /// Whether tokens are counted with the Anthropic estimate (scaled text, Anthropic image
    /// cost) rather than o200k_base with OpenAI image cost.
    fn anthropic_tokens(&self) -> bool {
        false
    }

    /// Decode one stored message.
    fn decode(&self, raw: &RawValue) -> Result<Message, DecodeError>;
    /// Whether an opaque block of this kind is bookkeeping the agent's own UI does not show
    /// (opencode's step and patch parts): `show` hides it unless `--verbose`.
    fn bookkeeping(&self, _kind: &str) -> bool {
        false
    }

    /// Whether a stored message is part of what the agent sends the model.
    fn agent_visible(&self, _raw: &RawValue) -> bool {
        true
    }

    /// A new user message holding `text`, in the format's own shape.
    fn user_text_message(&self, text: &str) -> Box<RawValue>;

    /// The messages that carry a summary at the head of a new history.
    fn summary_messages(&self, text: &str) -> Vec<Box<RawValue>> {
        vec![self.user_text_message(text)]
    }

    /// Replace tool-result content (and with `elide_images` images) in a decoded message's
    /// JSON value; whether anything changed.
    fn prune_value(
        &self,
        value: &mut Value,
        placeholder: &dyn Fn(&str) -> String,
        elide_images: bool,
    ) -> bool;

    /// Encode a rewritten message value.
    fn encode(&self, value: &Value) -> Box<RawValue> {
        super::to_raw(value)
    }

    /// Tool pairs pruned as a whole (request and responses hidden, one note in their place);
    /// empty for formats that prune result by result.
    fn tool_pairs(&self, _messages: &[Message], _keep: Option<usize>) -> Vec<ToolPair> {
        Vec::new()
    }

    /// A message of a pruned tool pair, hidden from the agent.
    fn hidden(&self, message: &Message) -> Box<RawValue> {
        message.raw.clone()
    }

    /// The note that stands for a pruned tool pair.
    fn pair_note(&self, text: &str) -> Box<RawValue> {
        self.user_text_message(text)
    }

    /// Whether a message's tool calls may be answered by the same message (the call and its
    /// result stored as one part).
    fn answers_itself(&self) -> bool {
        false
    }

    /// Whether `first` and `second` open a history with a summary this format's agent recorded
    /// (its own compaction request and reply), which then counts as the earlier summary.
    fn summary_pair(&self, _first: &Message, _second: &Message) -> bool {
        false
    }

    /// Whether the summary's text is in the first message of a [`Codec::summary_pair`] (goose:
    /// the summary, then its continuation) rather than the second (opencode: the request, then
    /// the summary).
    fn summary_in_first(&self) -> bool {
        false
    }

    /// Whether every tool call must be answered by the very next message.
    fn answers_next(&self) -> bool {
        false
    }
}

impl PartialEq for dyn Codec {
    fn eq(&self, other: &dyn Codec) -> bool {
        self.name() == other.name()
    }
}

impl Eq for dyn Codec {}

impl std::hash::Hash for dyn Codec {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.name().hash(state)
    }
}

impl std::fmt::Debug for dyn Codec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl serde::Serialize for dyn Codec {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

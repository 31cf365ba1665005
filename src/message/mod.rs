//! The provider-neutral message model and the [`Codec`] trait. Every agent's codecs live in its
//! folder under `src/agents/`, handed out by its adapter.
//!
//! Every decoded [`Message`] keeps its original JSON bytes (`raw`). A message agent-db does not
//! change is written back from those bytes, so it stays byte-identical; only new messages (a
//! summary) or deliberately rewritten ones (prune placeholders) are produced by a codec.
//! Nothing here touches SQLite or the terminal.

pub mod codec;
pub mod image;
pub(crate) mod lite;

use serde::Serialize;
use serde_json::value::RawValue;

pub use crate::error::DecodeError;
pub use codec::Codec;
pub use image::ImageInfo;

/// The wire format of a conversation's messages: the codec that reads and writes them.
pub type Format = &'static dyn Codec;

/// Why a conversation's messages have no format agent-db reads: the store's rule over its
/// metadata and history found none.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FormatError {
    /// The stored provider is one no registered format belongs to.
    #[error("unknown provider {provider:?}")]
    UnknownProvider { provider: String },
    /// The provider's stored mode (kodelet's `api_mode`) is one agent-db does not read.
    #[error("unsupported {provider} api_mode {mode:?}")]
    UnsupportedMode { provider: String, mode: String },
    /// The agent no longer loads rows of this provider; `why` says since when.
    #[error("provider {provider} is unsupported: {why}")]
    Retired {
        provider: &'static str,
        why: &'static str,
    },
}

/// Who a message is from, normalized across formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    User,
    Assistant,
    /// An OpenAI `tool` message or a Responses `function_call_output` item.
    Tool,
    System,
}

/// One piece of a message's content.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Block {
    Text {
        text: String,
    },
    Thinking {
        text: String,
        redacted: bool,
    },
    ToolCall {
        id: String,
        name: String,
        /// The call's input as JSON text (arguments string for OpenAI, `input` for Anthropic).
        input: String,
    },
    ToolResult {
        call_id: String,
        content: String,
        is_error: bool,
        #[serde(skip_serializing_if = "Vec::is_empty")]
        images: Vec<ImageInfo>,
    },
    Image(ImageInfo),
    /// Content agent-db keeps but does not interpret (server tool items, opaque compaction items).
    Opaque {
        kind: String,
        bytes: usize,
        /// What the item holds, for a reader (`show --verbose`): an opencode patch's files,
        /// a step's tokens. Never sent to a model.
        #[serde(skip_serializing_if = "Option::is_none")]
        detail: Option<String>,
    },
}

/// A decoded message with its original bytes.
#[derive(Debug, Clone, Serialize)]
pub struct Message {
    pub role: Role,
    pub blocks: Vec<Block>,
    /// The message exactly as stored.
    #[serde(skip)]
    pub raw: Box<RawValue>,
}

impl Message {
    /// Tool calls made by this message: (id, name, input).
    pub fn tool_calls(&self) -> impl Iterator<Item = (&str, &str, &str)> {
        self.blocks.iter().filter_map(|b| match b {
            Block::ToolCall { id, name, input } => {
                Some((id.as_str(), name.as_str(), input.as_str()))
            }
            _ => None,
        })
    }

    /// Call ids this message answers.
    pub fn tool_result_ids(&self) -> impl Iterator<Item = &str> {
        self.blocks.iter().filter_map(|b| match b {
            Block::ToolResult { call_id, .. } => Some(call_id.as_str()),
            _ => None,
        })
    }

    pub fn has_tool_results(&self) -> bool {
        self.tool_result_ids().next().is_some()
    }

    pub fn has_tool_calls(&self) -> bool {
        self.tool_calls().next().is_some()
    }

    /// The visible text of the message (text blocks joined).
    pub fn text(&self) -> String {
        let mut out = String::new();
        for b in &self.blocks {
            if let Block::Text { text } = b {
                if !out.is_empty() {
                    out.push('\n');
                }
                out.push_str(text);
            }
        }
        out
    }

    /// A real user instruction: a user message with text or images and no tool results.
    pub fn is_user_instruction(&self) -> bool {
        self.role == Role::User
            && !self.has_tool_results()
            && self.blocks.iter().any(|b| match b {
                Block::Text { text } => !text.trim().is_empty(),
                Block::Image(_) => true,
                _ => false,
            })
    }
}

/// Split `raw_messages` into its elements without re-encoding them.
pub fn split_raw(raw_messages: &str) -> Result<Vec<&RawValue>, DecodeError> {
    serde_json::from_str::<Vec<&RawValue>>(raw_messages)
        .map_err(|e| DecodeError::not_json("not a JSON array of messages", e).at(None))
}

/// Decode a whole `raw_messages` column.
pub fn decode_all(format: Format, raw_messages: &str) -> Result<Vec<Message>, DecodeError> {
    let parts = split_raw(raw_messages)?;
    parts
        .into_iter()
        .enumerate()
        // A message hidden from the agent (goose's prune) is not part of what the model is sent.
        .filter(|(_, raw)| format.agent_visible(raw))
        .map(|(i, raw)| format.decode(raw).map_err(|e| e.at(Some(i))))
        .collect()
}

/// Decode one message.
pub fn decode(format: Format, raw: &RawValue) -> Result<Message, DecodeError> {
    format.decode(raw)
}

/// Build a new user message holding `text`, in the format's own shape (the shape kodelet's own
/// `SwapContext` writes (docs/stores.md, "kodelet"); for goose the `agent_only` summary goose stores).
pub fn user_text_message(format: Format, text: &str) -> Box<RawValue> {
    format.user_text_message(text)
}

/// The messages that carry a summary at the head of the new history (see
/// [`Codec::summary_messages`]).
pub fn summary_messages(format: Format, text: &str) -> Vec<Box<RawValue>> {
    format.summary_messages(text)
}

/// Rewrite a message so that the content of its tool results (and, with `elide_images`, its
/// images) is replaced by `placeholder(call_id)`; `None` when nothing changed.
pub fn prune_message(
    format: Format,
    message: &Message,
    placeholder: &dyn Fn(&str) -> String,
    elide_images: bool,
) -> Option<Box<RawValue>> {
    let mut value: serde_json::Value = serde_json::from_str(message.raw.get()).ok()?;
    format
        .prune_value(&mut value, placeholder, elide_images)
        .then(|| format.encode(&value))
}

/// Assemble messages into a `raw_messages` value (Go's compact `json.Marshal` layout).
pub fn join_raw<'a>(parts: impl IntoIterator<Item = &'a RawValue>) -> String {
    let mut out = String::from("[");
    for (i, p) in parts.into_iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str(p.get());
    }
    out.push(']');
    out
}

pub(crate) fn to_raw(v: &serde_json::Value) -> Box<RawValue> {
    // serde_json's compact writer matches json.Marshal's layout; Go additionally escapes <, >
    // and & in strings, which we do too so a summary reads the same to kodelet's tools.
    let s = go_escape(&serde_json::to_string(v).expect("json values always serialize"));
    RawValue::from_string(s).expect("serializer output is valid JSON")
}

/// Apply Go's HTML-safe escaping (`<`, `>`, `&`, U+2028, U+2029) to serialized JSON.
pub fn go_escape(json: &str) -> String {
    let mut out = String::with_capacity(json.len());
    go_escape_into(json, &mut out);
    out
}

/// [`go_escape`] of `json`, appended to `out`.
pub fn go_escape_into(json: &str, out: &mut String) {
    if !needs_go_escape(json.as_bytes()) {
        out.push_str(json);
        return;
    }
    // Byte by byte, copying the runs between the characters it escapes (all ASCII but the two
    // separators, whose three bytes start with 0xE2).
    let b = json.as_bytes();
    out.reserve(json.len() + 32);
    let mut run = 0;
    for (i, &c) in b.iter().enumerate() {
        let escape = match c {
            b'<' => "\\u003c",
            b'>' => "\\u003e",
            b'&' => "\\u0026",
            0xE2 if b.get(i + 1) == Some(&0x80) => match b.get(i + 2) {
                Some(0xA8) => "\\u2028",
                Some(0xA9) => "\\u2029",
                _ => continue,
            },
            _ => continue,
        };
        out.push_str(&json[run..i]);
        out.push_str(escape);
        run = i + if c == 0xE2 { 3 } else { 1 };
    }
    out.push_str(&json[run..]);
}

/// Whether [`go_escape`] changes `json`: it holds `<`, `>`, `&`, or the UTF-8 of U+2028 or
/// U+2029 (`E2 80 A8`, `E2 80 A9`).
fn needs_go_escape(json: &[u8]) -> bool {
    memchr::memchr3(b'<', b'>', b'&', json).is_some()
        || memchr::memchr_iter(0xE2, json)
            .any(|i| json.get(i + 1) == Some(&0x80) && matches!(json.get(i + 2), Some(0xA8 | 0xA9)))
}

/// The text of a JSON value that is a string, or its compact JSON otherwise.
pub(crate) fn value_text<J: lite::Json>(v: &J) -> String {
    match v.as_str() {
        Some(s) => s.to_string(),
        None if v.is_null() => String::new(),
        None => v.compact(),
    }
}

/// The text parts of a content array joined by newlines, and its images: a part whose `type`
/// is `text` gives its `text`; one whose type is `image_type` gives `image(part)`.
pub(crate) fn text_and_images<J: lite::Json>(
    parts: &[J],
    image_type: &str,
    image: impl Fn(&J) -> ImageInfo,
) -> (String, Vec<ImageInfo>) {
    let mut text = String::new();
    let mut images = Vec::new();
    for p in parts {
        match str_field(p, "type") {
            Some("text") => {
                if !text.is_empty() {
                    text.push('\n');
                }
                text.push_str(str_field(p, "text").unwrap_or(""));
            }
            Some(t) if t == image_type => images.push(image(p)),
            _ => {}
        }
    }
    (text, images)
}

pub(crate) fn str_field<'a, J: lite::Json>(v: &'a J, key: &str) -> Option<&'a str> {
    lite::Json::get(v, key).and_then(J::as_str)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_escaping() {
        assert_eq!(
            go_escape(r#"{"a":"<b>&"}"#),
            r#"{"a":"\u003cb\u003e\u0026"}"#
        );
    }

    #[test]
    fn join_is_compact() {
        let raw = r#"[{"a":1},{"b":[2, 3]}]"#;
        let parts = split_raw(raw).unwrap();
        assert_eq!(join_raw(parts), raw);
    }
}

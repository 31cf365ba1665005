//! The provider-neutral message model, and the codecs for each live kodelet `raw_messages`
//! format, for docker-agent's `chat.Message` and for goose's
//! `messages` rows (docs/stores.md has each store's format).
//!
//! Every decoded [`Message`] keeps its original JSON bytes (`raw`). A message agent-db does not
//! change is written back from those bytes, so it stays byte-identical; only new messages (a
//! summary) or deliberately rewritten ones (prune placeholders) are produced by a codec.
//! Nothing here touches SQLite or the terminal.

pub mod anthropic;
pub mod docker_agent;
pub mod goose;
pub mod image;
pub mod openai_chat;
pub mod opencode;
pub mod responses;
pub mod shape;

use serde::Serialize;
use serde_json::value::RawValue;

pub use image::ImageInfo;

/// The wire format of a conversation's `raw_messages`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Format {
    /// `provider=anthropic`: `[]anthropic.MessageParam`.
    Anthropic,
    /// `provider=openai`, `api_mode` `chat_completions` or absent.
    OpenAiChat,
    /// `provider=openai` with `api_mode=responses`, or legacy `provider=openai-responses`.
    OpenAiResponses,
    /// docker-agent's `chat.Message` JSON (`session_items.message_json`), any model.
    DockerAgent,
    /// goose's `messages` row (role, `content_json`, `metadata_json`) as an envelope
    /// ([`goose`]), any model.
    Goose,
    /// opencode's `message` row and its `part` rows as an envelope ([`opencode`]), any model.
    Opencode,
}

impl Format {
    pub fn name(self) -> &'static str {
        match self {
            Format::Anthropic => "anthropic",
            Format::OpenAiChat => "openai-chat",
            Format::OpenAiResponses => "openai-responses",
            Format::DockerAgent => "docker-agent",
            Format::Goose => "goose",
            Format::Opencode => "opencode",
        }
    }

    /// Decide the format from the stored `provider` and `metadata.api_mode`; `Err` says why the
    /// conversation cannot be compacted.
    pub fn detect(provider: &str, api_mode: Option<&str>) -> Result<Format, String> {
        match (provider, api_mode) {
            ("anthropic", _) => Ok(Format::Anthropic),
            ("openai", Some("responses")) | ("openai-responses", _) => Ok(Format::OpenAiResponses),
            ("openai", None | Some("chat_completions") | Some("")) => Ok(Format::OpenAiChat),
            ("docker-agent", _) => Ok(Format::DockerAgent),
            ("goose", _) => Ok(Format::Goose),
            ("opencode", _) => Ok(Format::Opencode),
            ("openai", Some(other)) => Err(format!("unsupported openai api_mode {other:?}")),
            ("google", _) => Err(
                "provider google is unsupported: kodelet removed it (2026-04) and no longer loads these rows"
                    .into(),
            ),
            (other, _) => Err(format!("unknown provider {other:?}")),
        }
    }

    /// Whether token counts for this format are exact (o200k_base) or estimated.
    pub fn tokens_exact(self) -> bool {
        // docker-agent and goose sessions may run any model, so their counts are o200k_base
        // estimates.
        !matches!(
            self,
            Format::Anthropic | Format::DockerAgent | Format::Goose | Format::Opencode
        )
    }
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

/// A decode failure, with the index of the message it is about.
#[derive(Debug, Clone, PartialEq)]
pub struct DecodeError {
    pub index: Option<usize>,
    pub detail: String,
}

impl std::fmt::Display for DecodeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.index {
            Some(i) => write!(f, "raw_messages[{i}]: {}", self.detail),
            None => write!(f, "raw_messages: {}", self.detail),
        }
    }
}

/// Split `raw_messages` into its elements without re-encoding them.
pub fn split_raw(raw_messages: &str) -> Result<Vec<&RawValue>, DecodeError> {
    serde_json::from_str::<Vec<&RawValue>>(raw_messages).map_err(|e| DecodeError {
        index: None,
        detail: format!("not a JSON array of messages ({e})"),
    })
}

/// Decode a whole `raw_messages` column.
pub fn decode_all(format: Format, raw_messages: &str) -> Result<Vec<Message>, DecodeError> {
    let parts = split_raw(raw_messages)?;
    parts
        .into_iter()
        .enumerate()
        // A goose row hidden from the agent (prune) is not part of what the model is sent.
        .filter(|(_, raw)| format != Format::Goose || goose::agent_visible(raw))
        .map(|(i, raw)| {
            decode(format, raw).map_err(|detail| DecodeError {
                index: Some(i),
                detail,
            })
        })
        .collect()
}

/// Decode one message.
pub fn decode(format: Format, raw: &RawValue) -> Result<Message, String> {
    match format {
        Format::Anthropic => anthropic::decode(raw),
        Format::OpenAiChat => openai_chat::decode(raw),
        Format::OpenAiResponses => responses::decode(raw),
        Format::DockerAgent => docker_agent::decode(raw),
        Format::Goose => goose::decode(raw),
        Format::Opencode => opencode::decode(raw),
    }
}

/// Build a new user message holding `text`, in the format's own shape (the shape kodelet's own
/// `SwapContext` writes (docs/stores.md, "kodelet"); for goose the `agent_only` summary goose stores).
pub fn user_text_message(format: Format, text: &str) -> Box<RawValue> {
    let json = match format {
        Format::Goose => return goose::summary_message(text),
        Format::Opencode => return opencode::user_text_message(text),
        Format::Anthropic => {
            serde_json::json!({"content":[{"text": text, "type":"text"}],"role":"user"})
        }
        Format::OpenAiChat | Format::DockerAgent => {
            serde_json::json!({"role":"user","content": text})
        }
        Format::OpenAiResponses => {
            serde_json::json!({"type":"message","role":"user","content": text})
        }
    };
    to_raw(&json)
}

/// The messages that carry a summary at the head of the new history: the summary itself, and
/// for goose the assistant continuation goose always stores after it (docs/stores.md, "goose"); for
/// opencode the compaction user message and the summary assistant opencode loads.
pub fn summary_messages(format: Format, text: &str) -> Vec<Box<RawValue>> {
    if format == Format::Opencode {
        return opencode::summary_messages(text);
    }
    let mut out = vec![user_text_message(format, text)];
    if format == Format::Goose {
        out.push(goose::continuation_message());
    }
    out
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
    let changed = match format {
        Format::Anthropic => anthropic::prune(&mut value, placeholder, elide_images),
        Format::OpenAiChat => openai_chat::prune(&mut value, placeholder, elide_images),
        Format::OpenAiResponses => responses::prune(&mut value, placeholder),
        Format::DockerAgent => docker_agent::prune(&mut value, placeholder, elide_images),
        Format::Goose => goose::prune(&mut value, placeholder, elide_images),
        // opencode's prune keeps the output and marks the part cleared (`SessionCompaction.prune`).
        Format::Opencode => opencode::prune(&mut value),
    };
    changed.then(|| match format {
        Format::Goose => goose::to_raw(&value),
        Format::Opencode => opencode::raw_of(&value),
        _ => to_raw(&value),
    })
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
    for c in json.chars() {
        match c {
            '<' => out.push_str("\\u003c"),
            '>' => out.push_str("\\u003e"),
            '&' => out.push_str("\\u0026"),
            '\u{2028}' => out.push_str("\\u2028"),
            '\u{2029}' => out.push_str("\\u2029"),
            c => out.push(c),
        }
    }
    out
}

/// The text of a JSON value that is a string, or its compact JSON otherwise.
pub(crate) fn value_text(v: &serde_json::Value) -> String {
    match v {
        serde_json::Value::String(s) => s.clone(),
        serde_json::Value::Null => String::new(),
        other => other.to_string(),
    }
}

pub(crate) fn str_field<'a>(v: &'a serde_json::Value, key: &str) -> Option<&'a str> {
    v.get(key).and_then(|x| x.as_str())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn detect_formats() {
        assert_eq!(Format::detect("anthropic", None), Ok(Format::Anthropic));
        assert_eq!(Format::detect("openai", None), Ok(Format::OpenAiChat));
        assert_eq!(
            Format::detect("openai", Some("chat_completions")),
            Ok(Format::OpenAiChat)
        );
        assert_eq!(
            Format::detect("openai", Some("responses")),
            Ok(Format::OpenAiResponses)
        );
        assert_eq!(
            Format::detect("openai-responses", None),
            Ok(Format::OpenAiResponses)
        );
        assert!(Format::detect("google", None)
            .unwrap_err()
            .contains("google"));
        assert_eq!(
            Format::detect("docker-agent", None),
            Ok(Format::DockerAgent)
        );
        assert!(Format::detect("mistral", None)
            .unwrap_err()
            .contains("unknown provider"));
    }

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

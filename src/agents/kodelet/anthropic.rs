//! Anthropic `MessageParam` JSON (`provider=anthropic`): text, tool_use, tool_result (in a user
//! message), thinking, redacted_thinking, image, and anything else kept as opaque.

use serde_json::{value::RawValue, Value};

use crate::message::lite::{self, Json, Lite};
use crate::message::{str_field, value_text, Block, DecodeError, ImageInfo, Message, Role};

pub fn decode(raw: &RawValue) -> Result<Message, DecodeError> {
    match Lite::parse(raw.get()) {
        Some(v) => decode_value(&v, raw),
        None => decode_value(&lite::parse(raw.get())?, raw),
    }
}

/// [`decode`] from the message's JSON, read as a [`Lite`] or (the fallback) a `Value`.
fn decode_value<J: Json>(v: &J, raw: &RawValue) -> Result<Message, DecodeError> {
    let role = match str_field(v, "role") {
        Some("user") => Role::User,
        Some("assistant") => Role::Assistant,
        Some(other) => {
            return Err(DecodeError::UnknownRole {
                format: "anthropic",
                role: other.to_string(),
            })
        }
        None => return Err(DecodeError::missing("message", "role")),
    };
    let blocks = match v.get("content") {
        None => Vec::new(),
        Some(c) => match (c.as_str(), c.as_array()) {
            (Some(s), _) => vec![Block::Text {
                text: s.to_string(),
            }],
            (_, Some(items)) => items.iter().map(block).collect::<Result<_, _>>()?,
            _ if c.is_null() => Vec::new(),
            _ => {
                return Err(DecodeError::wrong_type(
                    Some("content"),
                    "neither a string nor an array",
                ))
            }
        },
    };
    Ok(Message {
        role,
        blocks,
        raw: raw.to_owned(),
    })
}

fn image<J: Json>(b: &J) -> ImageInfo {
    let src = b.get("source");
    let field = |k| src.and_then(|s| str_field(s, k));
    match field("type") {
        Some("base64") => ImageInfo::from_base64(field("media_type"), field("data").unwrap_or("")),
        _ => ImageInfo::from_url(field("url").unwrap_or("")),
    }
}

fn block<J: Json>(b: &J) -> Result<Block, DecodeError> {
    let kind = str_field(b, "type").ok_or_else(|| DecodeError::missing("content block", "type"))?;
    Ok(match kind {
        "text" => Block::Text {
            text: str_field(b, "text").unwrap_or("").to_string(),
        },
        "thinking" => Block::Thinking {
            text: str_field(b, "thinking").unwrap_or("").to_string(),
            redacted: false,
        },
        "redacted_thinking" => Block::Thinking {
            text: String::new(),
            redacted: true,
        },
        "tool_use" | "server_tool_use" => Block::ToolCall {
            id: str_field(b, "id")
                .ok_or_else(|| DecodeError::missing("tool_use block", "id"))?
                .to_string(),
            name: str_field(b, "name").unwrap_or("").to_string(),
            input: b
                .get("input")
                .map(J::compact)
                .unwrap_or_else(|| "{}".into()),
        },
        "tool_result" => {
            let (text, images) = match b.get("content") {
                Some(c) => match c.as_array() {
                    Some(parts) => crate::message::text_and_images(parts, "image", image),
                    None => (value_text(c), Vec::new()),
                },
                None => (String::new(), Vec::new()),
            };
            Block::ToolResult {
                call_id: str_field(b, "tool_use_id")
                    .ok_or_else(|| DecodeError::missing("tool_result block", "tool_use_id"))?
                    .to_string(),
                content: text,
                is_error: b.get("is_error").and_then(J::as_bool).unwrap_or(false),
                images,
            }
        }
        "image" => Block::Image(image(b)),
        other => Block::Opaque {
            detail: None,
            kind: other.to_string(),
            bytes: b.compact().len(),
        },
    })
}

/// Replace tool-result contents (and with `elide_images` images) by placeholders.
pub fn prune(v: &mut Value, placeholder: &dyn Fn(&str) -> String, elide_images: bool) -> bool {
    let mut changed = false;
    let Some(Value::Array(items)) = v.get_mut("content") else {
        return false;
    };
    for b in items.iter_mut() {
        match str_field(b, "type") {
            Some("tool_result") => {
                let id = str_field(b, "tool_use_id").unwrap_or("").to_string();
                let text = placeholder(&id);
                b["content"] = serde_json::json!([{"text": text, "type": "text"}]);
                changed = true;
            }
            Some("image") if elide_images => {
                let text = image(b).placeholder();
                *b = serde_json::json!({"text": text, "type": "text"});
                changed = true;
            }
            _ => {}
        }
    }
    changed
}

/// kodelet's `provider=anthropic` format: `[]anthropic.MessageParam`.
pub struct Anthropic;

impl crate::message::Codec for Anthropic {
    fn name(&self) -> &'static str {
        "anthropic"
    }
    fn anthropic_tokens(&self) -> bool {
        true
    }
    fn decode(&self, raw: &RawValue) -> Result<Message, DecodeError> {
        decode(raw)
    }
    fn user_text_message(&self, text: &str) -> Box<RawValue> {
        crate::message::to_raw(
            &serde_json::json!({"content":[{"text": text, "type":"text"}],"role":"user"}),
        )
    }
    fn prune_value(
        &self,
        value: &mut Value,
        placeholder: &dyn Fn(&str) -> String,
        elide_images: bool,
    ) -> bool {
        prune(value, placeholder, elide_images)
    }
    fn answers_next(&self) -> bool {
        true
    }
}

//! OpenAI Chat Completions messages (`provider=openai`, `api_mode` chat_completions or absent),
//! as go-openai marshals them: string or multi-part `content`, `tool_calls`, `tool_call_id`,
//! `reasoning_content`.

use serde_json::{value::RawValue, Value};

use crate::message::lite::{self, Json, Lite};
use crate::message::{str_field, Block, DecodeError, ImageInfo, Message, Role};

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
        Some("tool") | Some("function") => Role::Tool,
        Some("system") | Some("developer") => Role::System,
        Some(other) => {
            return Err(DecodeError::UnknownRole {
                format: "openai",
                role: other.to_string(),
            })
        }
        None => return Err(DecodeError::missing("message", "role")),
    };
    let mut blocks = Vec::new();
    if let Some(r) = str_field(v, "reasoning_content").filter(|s| !s.is_empty()) {
        blocks.push(Block::Thinking {
            text: r.to_string(),
            redacted: false,
        });
    }
    let (text, images) = content(v);
    if role == Role::Tool {
        blocks.push(Block::ToolResult {
            call_id: str_field(v, "tool_call_id")
                .ok_or_else(|| DecodeError::missing("tool message", "tool_call_id"))?
                .to_string(),
            content: text,
            is_error: false,
            images,
        });
    } else {
        if !text.is_empty() {
            blocks.push(Block::Text { text });
        }
        blocks.extend(images.into_iter().map(Block::Image));
        if let Some(r) = str_field(v, "refusal").filter(|s| !s.is_empty()) {
            blocks.push(Block::Text {
                text: r.to_string(),
            });
        }
    }
    if let Some(calls) = v.get("tool_calls").and_then(J::as_array) {
        for c in calls {
            let f = |k| c.get("function").and_then(|f| str_field(f, k));
            blocks.push(Block::ToolCall {
                id: str_field(c, "id")
                    .ok_or_else(|| DecodeError::missing("tool call", "id"))?
                    .to_string(),
                name: f("name").unwrap_or("").to_string(),
                input: f("arguments").unwrap_or("").to_string(),
            });
        }
    }
    Ok(Message {
        role,
        blocks,
        raw: raw.to_owned(),
    })
}

fn content<J: Json>(v: &J) -> (String, Vec<ImageInfo>) {
    let c = v.get("content");
    if let Some(s) = c.and_then(J::as_str) {
        return (s.to_string(), Vec::new());
    }
    match c.and_then(J::as_array) {
        Some(parts) => crate::message::text_and_images(parts, "image_url", |p| {
            ImageInfo::from_url(
                p.get("image_url")
                    .and_then(|u| str_field(u, "url"))
                    .unwrap_or(""),
            )
        }),
        None => (String::new(), Vec::new()),
    }
}

/// Replace a tool message's content (and with `elide_images` image parts) by placeholders.
pub fn prune(v: &mut Value, placeholder: &dyn Fn(&str) -> String, elide_images: bool) -> bool {
    if str_field(v, "role") == Some("tool") {
        let id = str_field(v, "tool_call_id").unwrap_or("").to_string();
        v["content"] = Value::String(placeholder(&id));
        return true;
    }
    match v.get_mut("content") {
        Some(Value::Array(parts)) if elide_images => {
            crate::message::image::elide_image_parts(parts)
        }
        _ => false,
    }
}

/// kodelet's `provider=openai` chat-completions format.
pub struct OpenAiChat;

impl crate::message::Codec for OpenAiChat {
    fn name(&self) -> &'static str {
        "openai-chat"
    }
    fn tokens_exact(&self) -> bool {
        true
    }
    fn decode(&self, raw: &RawValue) -> Result<Message, DecodeError> {
        decode(raw)
    }
    fn user_text_message(&self, text: &str) -> Box<RawValue> {
        crate::message::to_raw(&serde_json::json!({"role":"user","content": text}))
    }
    fn prune_value(
        &self,
        value: &mut Value,
        placeholder: &dyn Fn(&str) -> String,
        elide_images: bool,
    ) -> bool {
        prune(value, placeholder, elide_images)
    }
}

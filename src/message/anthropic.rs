//! Anthropic `MessageParam` JSON (`provider=anthropic`): text, tool_use, tool_result (in a user
//! message), thinking, redacted_thinking, image, and anything else kept as opaque.

use serde_json::{value::RawValue, Value};

use super::{str_field, value_text, Block, ImageInfo, Message, Role};

pub fn decode(raw: &RawValue) -> Result<Message, String> {
    let v: Value = serde_json::from_str(raw.get()).map_err(|e| format!("invalid JSON ({e})"))?;
    let role = match str_field(&v, "role") {
        Some("user") => Role::User,
        Some("assistant") => Role::Assistant,
        Some(other) => return Err(format!("unknown anthropic role {other:?}")),
        None => return Err("message has no role".into()),
    };
    let blocks = match v.get("content") {
        Some(Value::String(s)) => vec![Block::Text { text: s.clone() }],
        Some(Value::Array(items)) => items.iter().map(block).collect::<Result<_, _>>()?,
        Some(Value::Null) | None => Vec::new(),
        Some(_) => return Err("content is neither a string nor an array".into()),
    };
    Ok(Message {
        role,
        blocks,
        raw: raw.to_owned(),
    })
}

fn image(b: &Value) -> ImageInfo {
    let src = b.get("source").unwrap_or(&Value::Null);
    match str_field(src, "type") {
        Some("base64") => ImageInfo::from_base64(
            str_field(src, "media_type"),
            str_field(src, "data").unwrap_or(""),
        ),
        _ => ImageInfo::from_url(str_field(src, "url").unwrap_or("")),
    }
}

fn block(b: &Value) -> Result<Block, String> {
    let kind = str_field(b, "type").ok_or("content block has no type")?;
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
                .ok_or("tool_use block has no id")?
                .to_string(),
            name: str_field(b, "name").unwrap_or("").to_string(),
            input: b
                .get("input")
                .map(|i| i.to_string())
                .unwrap_or_else(|| "{}".into()),
        },
        "tool_result" => {
            let mut text = String::new();
            let mut images = Vec::new();
            match b.get("content") {
                Some(Value::Array(parts)) => {
                    for p in parts {
                        match str_field(p, "type") {
                            Some("text") => {
                                if !text.is_empty() {
                                    text.push('\n');
                                }
                                text.push_str(str_field(p, "text").unwrap_or(""));
                            }
                            Some("image") => images.push(image(p)),
                            _ => {}
                        }
                    }
                }
                Some(other) => text = value_text(other),
                None => {}
            }
            Block::ToolResult {
                call_id: str_field(b, "tool_use_id")
                    .ok_or("tool_result block has no tool_use_id")?
                    .to_string(),
                content: text,
                is_error: b.get("is_error").and_then(Value::as_bool).unwrap_or(false),
                images,
            }
        }
        "image" => Block::Image(image(b)),
        other => Block::Opaque {
            kind: other.to_string(),
            bytes: b.to_string().len(),
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

impl super::Codec for Anthropic {
    fn name(&self) -> &'static str {
        "anthropic"
    }
    fn anthropic_tokens(&self) -> bool {
        true
    }
    fn decode(&self, raw: &RawValue) -> Result<Message, String> {
        decode(raw)
    }
    fn user_text_message(&self, text: &str) -> Box<RawValue> {
        super::to_raw(&serde_json::json!({"content":[{"text": text, "type":"text"}],"role":"user"}))
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

//! kodelet's stored OpenAI Responses items (`StoredInputItem`): `message`, `reasoning`,
//! `function_call`, `function_call_output`, `web_search_call`, `compaction`/`compaction_summary`.

use serde_json::{value::RawValue, Value};

use crate::message::lite::{self, Json, Lite};
use crate::message::{str_field, value_text, Block, DecodeError, Message, Role};

pub fn decode(raw: &RawValue) -> Result<Message, DecodeError> {
    match Lite::parse(raw.get()) {
        Some(v) => decode_value(&v, raw),
        None => decode_value(&lite::parse(raw.get())?, raw),
    }
}

/// [`decode`] from the item's JSON, read as a [`Lite`] or (the fallback) a `Value`.
fn decode_value<J: Json>(v: &J, raw: &RawValue) -> Result<Message, DecodeError> {
    let kind = str_field(v, "type").unwrap_or("message");
    let role_of = |r: Option<&str>| match r {
        Some("user") => Ok(Role::User),
        Some("assistant") | None => Ok(Role::Assistant),
        Some("system") | Some("developer") => Ok(Role::System),
        Some(other) => Err(DecodeError::UnknownRole {
            format: "responses",
            role: other.to_string(),
        }),
    };
    let (role, blocks) = match kind {
        "message" => {
            let mut text = str_field(v, "content").unwrap_or("").to_string();
            if text.is_empty() {
                // Assistant items may carry their text only inside the verbatim raw_item.
                if let Some(parts) = v
                    .get("raw_item")
                    .and_then(|r| r.get("content"))
                    .and_then(J::as_array)
                {
                    text = parts
                        .iter()
                        .filter_map(|p| str_field(p, "text"))
                        .collect::<Vec<_>>()
                        .join("\n");
                }
            }
            let role = match str_field(v, "role") {
                None => return Err(DecodeError::missing("message item", "role")),
                r => role_of(r)?,
            };
            (role, vec![Block::Text { text }])
        }
        "reasoning" => (
            Role::Assistant,
            vec![Block::Thinking {
                text: v.get("content").map_or_else(String::new, value_text),
                redacted: false,
            }],
        ),
        "function_call" | "custom_tool_call" => (
            Role::Assistant,
            vec![Block::ToolCall {
                id: str_field(v, "call_id")
                    .ok_or_else(|| DecodeError::missing("function_call item", "call_id"))?
                    .to_string(),
                name: str_field(v, "name").unwrap_or("").to_string(),
                input: str_field(v, "arguments").unwrap_or("").to_string(),
            }],
        ),
        "function_call_output" | "custom_tool_call_output" => (
            Role::Tool,
            vec![Block::ToolResult {
                call_id: str_field(v, "call_id")
                    .ok_or_else(|| DecodeError::missing("function_call_output item", "call_id"))?
                    .to_string(),
                content: v.get("output").map_or_else(String::new, value_text),
                is_error: false,
                images: Vec::new(),
            }],
        ),
        other => (
            // Server-side items (web_search_call, opaque compaction items) are kept as they are.
            role_of(str_field(v, "role")).unwrap_or(Role::Assistant),
            vec![Block::Opaque {
                detail: None,
                kind: other.to_string(),
                bytes: raw.get().len(),
            }],
        ),
    };
    Ok(Message {
        role,
        blocks,
        raw: raw.to_owned(),
    })
}

/// Replace a `function_call_output`'s output (and any raw output) by a placeholder.
pub fn prune(v: &mut Value, placeholder: &dyn Fn(&str) -> String) -> bool {
    if matches!(
        str_field(v, "type"),
        Some("function_call_output") | Some("custom_tool_call_output")
    ) {
        let id = str_field(v, "call_id").unwrap_or("").to_string();
        v["output"] = Value::String(placeholder(&id));
        if let Some(obj) = v.as_object_mut() {
            obj.remove("raw_output");
        }
        return true;
    }
    false
}

/// kodelet's OpenAI Responses format (`api_mode=responses`, or legacy `openai-responses`).
pub struct OpenAiResponses;

impl crate::message::Codec for OpenAiResponses {
    fn name(&self) -> &'static str {
        "openai-responses"
    }
    fn tokens_exact(&self) -> bool {
        true
    }
    fn decode(&self, raw: &RawValue) -> Result<Message, DecodeError> {
        decode(raw)
    }
    fn user_text_message(&self, text: &str) -> Box<RawValue> {
        crate::message::to_raw(&serde_json::json!({"type":"message","role":"user","content": text}))
    }
    fn prune_value(
        &self,
        value: &mut Value,
        placeholder: &dyn Fn(&str) -> String,
        _elide_images: bool,
    ) -> bool {
        prune(value, placeholder)
    }
}

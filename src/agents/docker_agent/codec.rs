//! docker-agent (cagent) messages: `json.Marshal(chat.Message)` as stored in
//! `session_items.message_json` (docs/stores.md, "docker-agent").
//!
//! Keys read: `role`, `content`, `multi_content` (`text`, `image_url`, `file`, `document` parts),
//! `reasoning_content`, `tool_calls[{id,type,function{name,arguments}}]`, `tool_call_id`,
//! `is_error`. Everything else (`tool_definitions`, `usage`, `model`, `cost`, `created_at`,
//! signatures, `finish_reason`, keys added by later versions) is kept untouched: a decoded
//! message keeps its raw bytes, and agent-db never rewrites a stored item.
//!
//! Like docker-agent's provider converters, a message with `multi_content` is read from its
//! parts; `content` is used otherwise.

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
    if !v.is_object() {
        return Err(DecodeError::wrong_type(
            Some("message"),
            "not a JSON object",
        ));
    }
    let role = match str_field(v, "role") {
        Some("user") => Role::User,
        Some("assistant") => Role::Assistant,
        Some("tool") => Role::Tool,
        Some("system") => Role::System,
        Some(other) => {
            return Err(DecodeError::UnknownRole {
                format: "docker-agent",
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
    let (text, images, opaque) = content(v);
    if role == Role::Tool {
        blocks.push(Block::ToolResult {
            call_id: str_field(v, "tool_call_id")
                .filter(|s| !s.is_empty())
                .ok_or_else(|| DecodeError::missing("tool message", "tool_call_id"))?
                .to_string(),
            content: text,
            is_error: v.get("is_error").and_then(J::as_bool).unwrap_or(false),
            images,
        });
    } else {
        if !text.is_empty() {
            blocks.push(Block::Text { text });
        }
        blocks.extend(images.into_iter().map(Block::Image));
    }
    blocks.extend(opaque);
    if let Some(calls) = v.get("tool_calls").and_then(J::as_array) {
        for c in calls {
            let f = |k| c.get("function").and_then(|f| str_field(f, k));
            blocks.push(Block::ToolCall {
                id: str_field(c, "id")
                    .filter(|s| !s.is_empty())
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

/// The text, images and uninterpreted parts of a message.
fn content<J: Json>(v: &J) -> (String, Vec<ImageInfo>, Vec<Block>) {
    let mut text = String::new();
    let mut images = Vec::new();
    let mut opaque = Vec::new();
    match v.get("multi_content").and_then(J::as_array) {
        Some(parts) if !parts.is_empty() => {
            for p in parts {
                let kind = str_field(p, "type");
                match kind {
                    Some("text") | None if kind.is_some() || p.get("text").is_some() => {
                        if !text.is_empty() {
                            text.push('\n');
                        }
                        text.push_str(str_field(p, "text").unwrap_or(""));
                    }
                    Some("image_url") => {
                        let url = p
                            .get("image_url")
                            .and_then(|u| str_field(u, "url"))
                            .unwrap_or("");
                        images.push(ImageInfo::from_url(url));
                    }
                    _ => opaque.push(Block::Opaque {
                        detail: None,
                        kind: format!("multi_content:{}", kind.unwrap_or("?")),
                        bytes: p.compact().len(),
                    }),
                }
            }
        }
        _ => {
            text = str_field(v, "content").unwrap_or("").to_string();
        }
    }
    (text, images, opaque)
}

/// Replace a tool message's content (and with `elide_images` image parts) by placeholders.
/// docker-agent stores are append-only, so agent-db never writes these back; the codec offers it
/// for completeness (and `show`-style previews).
pub fn prune(v: &mut Value, placeholder: &dyn Fn(&str) -> String, elide_images: bool) -> bool {
    if str_field(v, "role") == Some("tool") {
        let id = str_field(v, "tool_call_id").unwrap_or("").to_string();
        v["content"] = Value::String(placeholder(&id));
        if let Some(obj) = v.as_object_mut() {
            obj.remove("multi_content");
        }
        return true;
    }
    match v.get_mut("multi_content") {
        Some(Value::Array(parts)) if elide_images => {
            crate::message::image::elide_image_parts(parts)
        }
        _ => false,
    }
}

/// docker-agent's codec: `chat.Message` JSON (`session_items.message_json`), any model.
pub struct DockerAgent;

/// The codec the docker-agent adapter hands out.
pub const CODEC: DockerAgent = DockerAgent;

impl crate::message::Codec for DockerAgent {
    fn name(&self) -> &'static str {
        "docker-agent"
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

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(s: &str) -> Box<RawValue> {
        RawValue::from_string(s.to_string()).unwrap()
    }

    /// A repeated key reads as Go's `encoding/json` reads it: the last value.
    #[test]
    fn a_repeated_key_reads_as_go_does() {
        let m = decode(&raw(
            r#"{"role":"tool","role":"user","content":"a","content":"b"}"#,
        ))
        .unwrap();
        assert_eq!((m.role, m.text()), (Role::User, "b".to_string()));
    }

    #[test]
    fn decodes_the_e2e_shapes() {
        let a = decode(&raw(
            r#"{"role":"assistant","content":"I'll look.","tool_calls":[{"id":"toolu_01","type":"function","function":{"name":"read_file","arguments":"{\"path\":\"a.go\"}"}}],"tool_definitions":[{"name":"read_file"}],"created_at":"2026-02-03T10:27:09+01:00","usage":{"input_tokens":3,"output_tokens":158,"cached_input_tokens":0,"cached_write_tokens":16502},"model":"claude-opus-4-5-20251101","cost":0.1071025}"#,
        ))
        .unwrap();
        assert_eq!(a.role, Role::Assistant);
        assert_eq!(a.text(), "I'll look.");
        assert_eq!(
            a.tool_calls().collect::<Vec<_>>(),
            vec![("toolu_01", "read_file", "{\"path\":\"a.go\"}")]
        );
        let t = decode(&raw(
            r#"{"role":"tool","content":"Error calling tool","tool_call_id":"toolu_01","is_error":true,"created_at":"2026-02-03T10:27:09+01:00"}"#,
        ))
        .unwrap();
        assert_eq!(t.tool_result_ids().collect::<Vec<_>>(), vec!["toolu_01"]);
        assert!(matches!(
            &t.blocks[0],
            Block::ToolResult { is_error: true, .. }
        ));
        let u = decode(&raw(
            r#"{"role":"user","content":"","multi_content":[{"type":"text","text":"look at this"},{"type":"image_url","image_url":{"url":"data:image/png;base64,AAAA","detail":"auto"}}]}"#,
        ))
        .unwrap();
        assert!(u.is_user_instruction());
        assert_eq!(u.text(), "look at this");
        assert!(u.blocks.iter().any(|b| matches!(b, Block::Image(_))));
        // Raw bytes are kept exactly.
        assert!(a.raw.get().contains("\"cost\":0.1071025"));
    }

    #[test]
    fn rejects_what_docker_agent_would_not_send() {
        assert!(decode(&raw(r#"{"content":"x"}"#)).is_err());
        assert!(decode(&raw(r#"{"role":"tool","content":"x"}"#)).is_err());
        assert!(decode(&raw(r#"{"role":"developer","content":"x"}"#)).is_err());
        assert!(decode(&raw(r#"[1]"#)).is_err());
    }

    #[test]
    fn prune_tool_content() {
        let mut v: Value =
            serde_json::from_str(r#"{"role":"tool","content":"long","tool_call_id":"c1"}"#)
                .unwrap();
        assert!(prune(&mut v, &|id| format!("[pruned {id}]"), false));
        assert_eq!(v["content"], "[pruned c1]");
    }
}

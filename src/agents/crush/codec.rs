//! Crush messages: one `messages` row of `.crush/crush.db` (docs/stores.md, "Crush"), carried as
//! an envelope `{"id":…,"role":…,"parts":<the parts cell>}`, the `parts` bytes verbatim.
//!
//! `parts` is Crush's `marshalParts` (`internal/message/message.go@37f36e93`): a JSON array of
//! `{"type":…,"data":…}` where `type` is `text`, `reasoning`, `image_url`, `binary`,
//! `tool_call`, `tool_result`, `finish` or `shell_command`. Crush's `unmarshalParts` fails on
//! any other type or a part that is not JSON, which fails the whole session; so does decoding
//! here, naming the part. `finish` and `shell_command` parts are kept as opaque blocks.

use serde_json::{value::RawValue, Value};

use crate::message::lite::{self, Json, Lite};
use crate::message::{str_field, Block, DecodeError, ImageInfo, Message, Role};

/// Decode one envelope.
pub fn decode(raw: &RawValue) -> Result<Message, DecodeError> {
    match Lite::parse(raw.get()) {
        Some(v) => decode_value(&v, raw),
        None => decode_value(&lite::parse(raw.get())?, raw),
    }
}

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
                format: "Crush",
                role: other.to_string(),
            })
        }
        None => return Err(DecodeError::missing("message", "role")),
    };
    let parts = v.get("parts").and_then(J::as_array).ok_or_else(|| {
        DecodeError::wrong_type(Some("parts"), "not a JSON array").unloadable("Crush", "it")
    })?;
    let mut blocks = Vec::new();
    for (i, p) in parts.iter().enumerate() {
        let kind = str_field(p, "type").unwrap_or("");
        let data = p.get("data");
        let field = |k: &str| data.and_then(|d| str_field(d, k)).unwrap_or("");
        let block = match kind {
            "text" => Block::Text {
                text: field("text").to_string(),
            },
            "reasoning" => Block::Thinking {
                text: field("thinking").to_string(),
                redacted: false,
            },
            "tool_call" => Block::ToolCall {
                id: field("id").to_string(),
                name: field("name").to_string(),
                input: field("input").to_string(),
            },
            "tool_result" => Block::ToolResult {
                call_id: field("tool_call_id").to_string(),
                content: field("content").to_string(),
                is_error: data
                    .and_then(|d| d.get("is_error"))
                    .and_then(J::as_bool)
                    .unwrap_or(false),
                images: Vec::new(),
            },
            "image_url" => Block::Image(ImageInfo::from_url(field("url"))),
            "binary" if field("MIMEType").starts_with("image/") => Block::Image(
                ImageInfo::from_base64(Some(field("MIMEType")), field("Data")),
            ),
            "binary" | "finish" | "shell_command" => Block::Opaque {
                kind: kind.to_string(),
                bytes: p.compact().len(),
                detail: None,
            },
            other => {
                return Err(DecodeError::UnreadKind {
                    item: format!("part {i}"),
                    kind: other.to_string(),
                    reader: "Crush",
                }
                .unloadable("Crush", "this message"))
            }
        };
        blocks.push(block);
    }
    Ok(Message {
        role,
        blocks,
        raw: raw.to_owned(),
    })
}

/// The `parts` JSON of a message holding `text`: a text part and, for an assistant message,
/// the `finish` part Crush ends a completed answer with (`end_turn` at `time`).
pub fn text_parts(text: &str, finish_time: Option<i64>) -> String {
    let mut parts = vec![serde_json::json!({"type": "text", "data": {"text": text}})];
    if let Some(t) = finish_time {
        parts
            .push(serde_json::json!({"type": "finish", "data": {"reason": "end_turn", "time": t}}));
    }
    Value::Array(parts).to_string()
}

/// Replace tool-result content (and with `elide_images` image parts) by placeholders.
pub fn prune(v: &mut Value, placeholder: &dyn Fn(&str) -> String, elide_images: bool) -> bool {
    let Some(Value::Array(parts)) = v.get_mut("parts") else {
        return false;
    };
    let mut changed = false;
    for p in parts.iter_mut() {
        let kind = p
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        match kind.as_str() {
            "tool_result" => {
                if let Some(d) = p.get_mut("data").and_then(Value::as_object_mut) {
                    let id = d
                        .get("tool_call_id")
                        .and_then(Value::as_str)
                        .unwrap_or("")
                        .to_string();
                    d.insert("content".into(), Value::String(placeholder(&id)));
                    changed = true;
                }
            }
            "image_url" | "binary" if elide_images => {
                *p = serde_json::json!({"type": "text", "data": {"text": "[image elided]"}});
                changed = true;
            }
            _ => {}
        }
    }
    changed
}

/// Crush's codec.
pub struct Crush;

/// The codec the Crush adapter hands out.
pub const CODEC: Crush = Crush;

impl crate::message::Codec for Crush {
    fn name(&self) -> &'static str {
        "crush"
    }
    fn decode(&self, raw: &RawValue) -> Result<Message, DecodeError> {
        decode(raw)
    }
    fn bookkeeping(&self, kind: &str) -> bool {
        kind == "finish"
    }
    fn user_text_message(&self, text: &str) -> Box<RawValue> {
        let parts: Value = serde_json::from_str(&text_parts(text, None)).expect("parts are JSON");
        crate::message::to_raw(&serde_json::json!({"role": "user", "parts": parts}))
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
    use crate::message::Codec;

    fn raw(s: &str) -> Box<RawValue> {
        RawValue::from_string(s.to_string()).unwrap()
    }

    #[test]
    fn decodes_every_part_crush_writes() {
        let m = decode(&raw(
            r#"{"id":"a","role":"assistant","parts":[{"type":"reasoning","data":{"thinking":"hm"}},{"type":"text","data":{"text":"hi"}},{"type":"tool_call","data":{"id":"c1","name":"bash","input":"{}","finished":true}},{"type":"finish","data":{"reason":"tool_use","time":1}}]}"#,
        ))
        .unwrap();
        assert_eq!(m.role, Role::Assistant);
        assert_eq!(m.text(), "hi");
        assert_eq!(m.tool_calls().collect::<Vec<_>>(), [("c1", "bash", "{}")]);
        assert!(matches!(&m.blocks[3], Block::Opaque { kind, .. } if kind == "finish"));
        let t = decode(&raw(
            r#"{"role":"tool","parts":[{"type":"tool_result","data":{"tool_call_id":"c1","name":"bash","content":"ok","is_error":true}}]}"#,
        ))
        .unwrap();
        assert_eq!(t.tool_result_ids().collect::<Vec<_>>(), ["c1"]);
    }

    #[test]
    fn refuses_what_crush_cannot_load() {
        let unknown = decode(&raw(
            r#"{"role":"user","parts":[{"type":"video","data":{}}]}"#,
        ));
        let e = unknown.unwrap_err();
        assert_eq!(
            e.to_string(),
            "part 0 has type \"video\", which Crush does not read; Crush cannot load this message"
        );
        assert!(
            matches!(&e, DecodeError::Unloadable { agent: "Crush", error, .. }
                if matches!(&**error, DecodeError::UnreadKind { kind, .. } if kind == "video")),
            "{e:?}"
        );
        assert!(decode(&raw(r#"{"role":"user","parts":"[]"}"#)).is_err());
        assert!(decode(&raw(r#"{"role":"robot","parts":[]}"#)).is_err());
    }

    #[test]
    fn a_user_text_message_decodes_to_its_text() {
        let m = decode(&CODEC.user_text_message("a \"quoted\" line")).unwrap();
        assert_eq!(
            (m.role, m.text()),
            (Role::User, "a \"quoted\" line".to_string())
        );
    }
}

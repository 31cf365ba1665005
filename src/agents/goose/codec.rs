//! goose messages: one `messages` row of goose's `sessions.db` (role, `content_json`,
//! `metadata_json`; docs/stores.md, "goose"; goose's `MessageMetadata`,
//! `crates/goose-provider-types/src/conversation/message.rs@8d844eec`).
//!
//! A goose message is three columns, not one JSON value, so agent-db carries it as an
//! *envelope*: `{"role":…,"content":<content_json bytes>,"metadata":<metadata_json bytes|null>}`.
//! The `content_json` bytes sit in the envelope verbatim, so a kept message can be written back
//! byte for byte (the store re-inserts kept rows from the database itself anyway).
//!
//! Decoding follows goose's reader (`conversation/message.rs`, `conversation.rs` at goose
//! `8d844eec`): only `user` and `assistant` rows are messages; a `content_json` that goose
//! cannot parse makes goose fail the whole session, so it fails the conversation here too, with
//! the item and the reason. Items are read as the model sees them: text and images whose
//! `annotations.audience` excludes the assistant, tool requests in user messages, tool responses
//! and front-end requests in assistant messages, and thinking in user messages are dropped by
//! goose's `agent_visible_messages`/`fix_tool_calling`, so they become opaque blocks (kept, not
//! interpreted). Types agent-db does not know (a goose newer than its reference) are kept as
//! opaque blocks too: the goose that wrote them reads them, and agent-db never rewrites them.
//!
//! Encoding writes what goose writes: compact serde JSON without Go's HTML escaping, text items
//! `{"type":"text","text":…}`, and the `agent_only()` metadata preset for what agent-db adds.

use serde::Deserialize;
use serde_json::{value::RawValue, Map, Value};

pub use crate::message::codec::ToolPair;
use crate::message::lite::{Json, Lite};
use crate::message::{str_field, Block, DecodeError, ImageInfo, Message, Role};

/// goose's `MessageMetadata::agent_only()` (`userVisible:false, agentVisible:true`).
pub const AGENT_ONLY: &str = r#"{"userVisible":false,"agentVisible":true}"#;

/// The continuation goose writes after a compaction the user asked for
/// (`MANUAL_COMPACT_CONTINUATION_TEXT`, `context_mgmt/mod.rs` at aaif-goose `006bd233`):
/// agent-db compacts because its user ran it.
pub const CONTINUATION: &str = "The previous message is a structured summary of the session so far, produced at the user's request because the context was getting long. The original messages are gone; the summary is your only memory of them. Treat the summary as authoritative for what it covers, but if the user asks about specifics that are not in the summary, say so plainly and ask rather than guess. Continue the session.";

/// goose's `MessageMetadata` default (visible to user and agent): what goose's compaction
/// gives the copy of the latest user message it puts back after the continuation
/// (`Message::user().with_text(..)`, `context_mgmt/mod.rs@006bd233`).
pub const VISIBLE: &str = r#"{"userVisible":true,"agentVisible":true}"#;

/// Phrases every goose continuation opens with: "The previous message contains a summary"
/// (through 1.47, `8d844eec`) and "The previous message is a structured summary" (the
/// `CONVERSATION_`, `TOOL_LOOP_` and `MANUAL_COMPACT_CONTINUATION_TEXT` of `006bd233`).
const CONTINUATION_MARKS: &[&str] = &[
    "The previous message contains a summary",
    "The previous message is a structured summary",
];

/// Item types of goose 1.9 (schema v1) that no later goose reads: a row holding one cannot be
/// loaded.
const UNREADABLE_TYPES: &[&str] = &["contextLengthExceeded", "summarizationRequested"];

/// A goose message row split back into its columns.
#[derive(Debug, Deserialize)]
pub struct Envelope<'a> {
    pub role: String,
    #[serde(borrow)]
    pub content: &'a RawValue,
    #[serde(borrow, default)]
    pub metadata: Option<&'a RawValue>,
}

/// Split an envelope made by [`envelope`], [`summary_message`] or [`continuation_message`].
pub fn split_envelope(raw: &RawValue) -> Result<Envelope<'_>, DecodeError> {
    serde_json::from_str(raw.get())
        .map_err(|e| DecodeError::not_json("not a goose message envelope", e))
}

/// Build the envelope of one stored row. Fails when goose itself could not load the row: its
/// `content_json` is not JSON.
pub fn envelope(
    role: &str,
    content_json: &str,
    metadata_json: Option<&str>,
) -> Result<Box<RawValue>, DecodeError> {
    #[derive(serde::Serialize)]
    struct Env<'a> {
        role: &'a str,
        content: &'a RawValue,
        metadata: Option<&'a RawValue>,
    }
    let content = serde_json::from_str::<&RawValue>(content_json).map_err(|e| {
        DecodeError::not_json("content_json is not valid JSON", e).unloadable("goose", "it")
    })?;
    let metadata = metadata_json.and_then(|m| serde_json::from_str::<&RawValue>(m).ok());
    // Written by serde_json's serializer around the checked cells: not parsed again.
    serde_json::value::to_raw_value(&Env {
        role,
        content,
        metadata,
    })
    .map_err(|e| DecodeError::not_json("envelope is not JSON", e))
}

/// Who sees a message, by goose's rule (`get_conversation`): `metadata_json` must parse as a
/// whole `MessageMetadata`, else (NULL, bad JSON, a missing flag, a known key of the wrong type)
/// the default applies and the message is visible to both user and agent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Visibility {
    pub user: bool,
    pub agent: bool,
    /// Whether `metadata_json` parsed (false: the default was used).
    pub parsed: bool,
}

pub fn visibility(metadata_json: Option<&str>) -> Visibility {
    match metadata_json.and_then(parse_metadata) {
        Some(m) => Visibility {
            user: m["userVisible"].as_bool().unwrap_or(true),
            agent: m["agentVisible"].as_bool().unwrap_or(true),
            parsed: true,
        },
        None => Visibility {
            user: true,
            agent: true,
            parsed: false,
        },
    }
}

/// `metadata_json` as goose's `MessageMetadata` would accept it, or `None`.
fn parse_metadata(text: &str) -> Option<Map<String, Value>> {
    let Value::Object(m) = serde_json::from_str::<Value>(text).ok()? else {
        return None;
    };
    let is_bool = |k: &str| m.get(k).is_some_and(Value::is_boolean);
    let opt = |k: &str, ok: fn(&Value) -> bool| m.get(k).is_none_or(|v| v.is_null() || ok(v));
    let ok = is_bool("userVisible")
        && is_bool("agentVisible")
        && ["outputTokenLimitReached", "steer", "turnContext"]
            .iter()
            .all(|k| opt(k, Value::is_boolean))
        && ["inference", "usage", "operations"]
            .iter()
            .all(|k| opt(k, Value::is_object));
    ok.then_some(m)
}

/// `metadata_json` with `agentVisible` set to false and every other key and value byte kept
/// (goose's `with_agent_invisible`). A value goose would read as the default (NULL, unparsable,
/// partial) becomes `{"userVisible":true,"agentVisible":false}`: editing such a value in place
/// would leave it unreadable, and goose would show the message to the model again.
pub fn hide_from_agent(metadata_json: Option<&str>) -> String {
    let Some(text) = metadata_json.filter(|t| parse_metadata(t).is_some()) else {
        return r#"{"userVisible":true,"agentVisible":false}"#.into();
    };
    let pairs = match object_pairs(text) {
        Some(p) => p,
        None => return r#"{"userVisible":true,"agentVisible":false}"#.into(),
    };
    let mut out = String::from("{");
    for (i, (k, v)) in pairs.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str(&serde_json::to_string(k).expect("strings serialize"));
        out.push(':');
        out.push_str(if k == "agentVisible" {
            "false"
        } else {
            v.get()
        });
    }
    out.push('}');
    out
}

/// The top-level (key, raw value) pairs of a JSON object, in order.
fn object_pairs(text: &str) -> Option<Vec<(String, &RawValue)>> {
    struct Pairs;
    impl<'de> serde::de::Visitor<'de> for Pairs {
        type Value = Vec<(String, &'de RawValue)>;
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("a JSON object")
        }
        fn visit_map<A: serde::de::MapAccess<'de>>(
            self,
            mut a: A,
        ) -> Result<Self::Value, A::Error> {
            let mut out = Vec::new();
            while let Some((k, v)) = a.next_entry::<String, &'de RawValue>()? {
                out.push((k, v));
            }
            Ok(out)
        }
    }
    let mut de = serde_json::Deserializer::from_str(text);
    let pairs = serde::Deserializer::deserialize_map(&mut de, Pairs).ok()?;
    de.end().ok()?;
    Some(pairs)
}

/// `[{"type":"text","text":…}]`, serialized as goose does.
pub fn text_content(text: &str) -> String {
    serde_json::to_string(&serde_json::json!([{"type": "text", "text": text}]))
        .expect("json values always serialize")
}

fn new_envelope(role: &str, text: &str) -> Box<RawValue> {
    let content = text_content(text);
    envelope(role, &content, Some(AGENT_ONLY)).expect("agent-db's own content is JSON")
}

/// The summary goose stores after a compaction: role `user`, one text item, `agent_only`.
pub fn summary_message(text: &str) -> Box<RawValue> {
    new_envelope("user", text)
}

/// The assistant continuation that follows the summary, `agent_only`.
pub fn continuation_message() -> Box<RawValue> {
    new_envelope("assistant", CONTINUATION)
}

/// Whether `first` and `second` are what goose loads after one of its own compactions: the
/// summary (a user message only the agent sees) and the continuation goose adds after it (an
/// assistant message only the agent sees, telling the model the previous message is a summary
/// in one of the [`CONTINUATION_MARKS`] phrasings, `context_mgmt/mod.rs`). The
/// summary's text is the first's ([`crate::message::Codec::summary_in_first`]).
pub fn is_summary_pair(first: &Message, second: &Message) -> bool {
    let agent_only = |m: &Message| {
        split_envelope(&m.raw).is_ok_and(|e| {
            let v = visibility(e.metadata.map(|r| r.get()).filter(|r| *r != "null"));
            v.parsed && v.agent && !v.user
        })
    };
    first.role == Role::User
        && second.role == Role::Assistant
        && agent_only(first)
        && agent_only(second)
        && {
            let t = second.text();
            CONTINUATION_MARKS.iter().any(|m| t.contains(m))
        }
}

/// Decode one envelope into the model's view of the message. Its content is read as a borrowed
/// tree ([`Lite`]); one with a repeated key (or that is not an array) as `Value`s, whose errors
/// say why goose cannot load it.
pub fn decode(raw: &RawValue) -> Result<Message, DecodeError> {
    let env = split_envelope(raw)?;
    let role = match env.role.as_str() {
        "user" => Role::User,
        "assistant" => Role::Assistant,
        other => {
            return Err(DecodeError::NotARole {
                role: other.to_string(),
                of: "a goose message",
            })
        }
    };
    let blocks = match Lite::parse(env.content.get()).filter(|l| l.as_array().is_some()) {
        Some(items) => blocks(role, items.as_array().unwrap_or_default())?,
        None => {
            let items: Vec<Value> = serde_json::from_str(env.content.get()).map_err(|e| {
                DecodeError::not_json("content_json is not a JSON array", e)
                    .unloadable("goose", "it")
            })?;
            blocks(role, &items)?
        }
    };
    Ok(Message {
        role,
        blocks,
        raw: raw.to_owned(),
    })
}

/// The blocks of a message's content items.
fn blocks<J: Json>(role: Role, items: &[J]) -> Result<Vec<Block>, DecodeError> {
    let mut blocks = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        let b = block(role, item).map_err(|e| e.inside(format!("content item {i}")))?;
        blocks.push(b);
    }
    Ok(blocks)
}

fn opaque<J: Json>(kind: &str, item: &J) -> Block {
    Block::Opaque {
        detail: None,
        kind: format!("goose:{kind}"),
        bytes: item.compact().len(),
    }
}

/// Whether an item's `annotations.audience` lets the assistant see it (absent: everyone).
fn for_assistant<J: Json>(item: &J) -> bool {
    match item
        .get("annotations")
        .and_then(|a| a.get("audience"))
        .and_then(J::as_array)
    {
        Some(who) => who.iter().any(|w| w.as_str() == Some("assistant")),
        None => true,
    }
}

/// `e`, which makes goose refuse to load the whole session.
fn refused(e: DecodeError) -> DecodeError {
    e.unloadable("goose", "this session")
}

fn need_str<'a, J: Json>(item: &'a J, key: &str, kind: &str) -> Result<&'a str, DecodeError> {
    str_field(item, key)
        .ok_or_else(|| refused(DecodeError::missing(kind, format!("string {key:?}"))))
}

/// The object under `key`, which goose needs in an item of `kind`.
fn need_object<'a, J: Json>(item: &'a J, key: &str, kind: &str) -> Result<&'a J, DecodeError> {
    item.get(key)
        .filter(|c| c.is_object())
        .ok_or_else(|| refused(DecodeError::missing(kind, key)))
}

fn block<J: Json>(role: Role, item: &J) -> Result<Block, DecodeError> {
    if !item.is_object() {
        return Err(refused(DecodeError::wrong_type(None, "not a JSON object")));
    }
    let kind = need_str(item, "type", "item")?;
    let user = role == Role::User;
    Ok(match kind {
        "text" => {
            let text = need_str(item, "text", "text item")?;
            if !for_assistant(item) {
                return Ok(opaque("text(user audience)", item));
            }
            Block::Text {
                text: text.to_string(),
            }
        }
        "image" => {
            let data = need_str(item, "data", "image")?;
            if !for_assistant(item) {
                return Ok(opaque("image(user audience)", item));
            }
            Block::Image(ImageInfo::from_base64(str_field(item, "mimeType"), data))
        }
        "toolRequest" => {
            let id = need_str(item, "id", "toolRequest")?;
            let call = need_object(item, "toolCall", "toolRequest")?;
            if user {
                return Ok(opaque("toolRequest(in a user message)", item));
            }
            tool_call(id, call)
        }
        "toolResponse" => {
            let id = need_str(item, "id", "toolResponse")?;
            let result = need_object(item, "toolResult", "toolResponse")?;
            if !user {
                return Ok(opaque("toolResponse(in an assistant message)", item));
            }
            tool_result(id, result)
        }
        "thinking" | "reasoning" if !user => Block::Thinking {
            text: str_field(
                item,
                if kind == "thinking" {
                    "thinking"
                } else {
                    "text"
                },
            )
            .unwrap_or("")
            .to_string(),
            redacted: false,
        },
        "redactedThinking" if !user => Block::Thinking {
            text: String::new(),
            redacted: true,
        },
        k if UNREADABLE_TYPES.contains(&k) => {
            return Err(refused(DecodeError::RetiredKind {
                kind: k.to_string(),
                agent: "goose",
                version: "1.9",
            }))
        }
        // frontendToolRequest, toolConfirmationRequest, actionRequired, systemNotification,
        // error, document, conversationCompacted, thinking in user messages, newer types.
        other => opaque(other, item),
    })
}

fn tool_call<J: Json>(id: &str, call: &J) -> Block {
    let (name, input) = match str_field(call, "status") {
        Some("success") | None => {
            let v = call.get("value");
            let args = v
                .and_then(|v| v.get("arguments"))
                .map(J::compact)
                .unwrap_or_default();
            let name = v.and_then(|v| str_field(v, "name")).unwrap_or("");
            (name.to_string(), args)
        }
        Some(_) => (
            String::new(),
            str_field(call, "error").unwrap_or("").to_string(),
        ),
    };
    Block::ToolCall {
        id: id.to_string(),
        name,
        input,
    }
}

fn tool_result<J: Json>(id: &str, result: &J) -> Block {
    let mut text = String::new();
    let mut images = Vec::new();
    let is_error;
    match str_field(result, "status") {
        Some("success") | None => {
            let v = result.get("value");
            is_error = v
                .and_then(|v| v.get("isError"))
                .and_then(J::as_bool)
                .unwrap_or(false);
            // The legacy form is a bare array of content items.
            let items = v.and_then(|v| {
                v.as_array()
                    .or_else(|| v.get("content").and_then(J::as_array))
            });
            for c in items.into_iter().flatten().filter(|c| for_assistant(*c)) {
                match str_field(c, "type") {
                    Some("text") => push_line(&mut text, str_field(c, "text").unwrap_or("")),
                    Some("image") => images.push(ImageInfo::from_base64(
                        str_field(c, "mimeType"),
                        str_field(c, "data").unwrap_or(""),
                    )),
                    Some("resource") => {
                        let r = c.get("resource").and_then(|r| str_field(r, "text"));
                        push_line(&mut text, r.unwrap_or(""));
                    }
                    _ => push_line(&mut text, &c.compact()),
                }
            }
        }
        Some(_) => {
            is_error = true;
            text = str_field(result, "error").unwrap_or("").to_string();
        }
    }
    Block::ToolResult {
        call_id: id.to_string(),
        content: text,
        is_error,
        images,
    }
}

fn push_line(out: &mut String, s: &str) {
    if !out.is_empty() {
        out.push('\n');
    }
    out.push_str(s);
}

/// The prune rewrite of one envelope: every `toolResponse` result becomes one text item
/// `placeholder(id)` (its `isError` kept, `structuredContent` dropped), and with
/// `elide_images` every image item becomes a text placeholder. The result is the agent-only
/// replacement of the message: the store hides the original from the agent and stores this
/// after it, so nothing is deleted (goose's own tool-pair summarization works the same way).
pub fn prune(v: &mut Value, placeholder: &dyn Fn(&str) -> String, elide_images: bool) -> bool {
    let user = str_field(v, "role") == Some("user");
    let Some(Value::Array(items)) = v.get_mut("content") else {
        return false;
    };
    let mut changed = false;
    for item in items.iter_mut() {
        match str_field(item, "type") {
            Some("toolResponse") if user => {
                let id = str_field(item, "id").unwrap_or("").to_string();
                let Some(result) = item.get_mut("toolResult") else {
                    continue;
                };
                *result = pruned_result(result, &placeholder(&id));
                changed = true;
            }
            Some("image") if elide_images => {
                *item = image_placeholder(item);
                changed = true;
            }
            _ => {}
        }
    }
    if changed {
        v["metadata"] = serde_json::from_str(AGENT_ONLY).expect("constant is JSON");
    }
    changed
}

fn pruned_result(result: &Value, text: &str) -> Value {
    if str_field(result, "status").is_some_and(|s| s != "success") {
        return serde_json::json!({"status": "error", "error": text});
    }
    let mut value = serde_json::json!({"content": [{"type": "text", "text": text}]});
    if let Some(e) = result.get("value").and_then(|v| v.get("isError")) {
        value["isError"] = e.clone();
    }
    serde_json::json!({"status": "success", "value": value})
}

fn image_placeholder(item: &Value) -> Value {
    let info = ImageInfo::from_base64(
        str_field(item, "mimeType"),
        str_field(item, "data").unwrap_or(""),
    );
    serde_json::json!({"type": "text", "text": info.placeholder()})
}

/// The complete tool pairs among `messages` (an agent-visible history), none touching
/// `keep` (the latest instruction the split keeps). A request answered only in part, a
/// response message that also holds text, or responses spread past another message are not
/// pairs: hiding them would split a pair or hide words.
pub fn tool_pairs(messages: &[Message], keep: Option<usize>) -> Vec<ToolPair> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < messages.len() {
        let m = &messages[i];
        let calls: std::collections::BTreeSet<&str> = m.tool_calls().map(|(id, _, _)| id).collect();
        if m.role != Role::Assistant || calls.is_empty() || Some(i) == keep {
            i += 1;
            continue;
        }
        let mut answered = std::collections::BTreeSet::new();
        let mut j = i + 1;
        while j < messages.len() && answered.len() < calls.len() && Some(j) != keep {
            let r = &messages[j];
            let only_results = r.role == Role::User
                && !r.blocks.is_empty()
                && r.blocks
                    .iter()
                    .all(|b| matches!(b, Block::ToolResult { .. }));
            if !only_results || !r.tool_result_ids().all(|id| calls.contains(id)) {
                break;
            }
            answered.extend(r.tool_result_ids());
            j += 1;
        }
        if answered.len() == calls.len() && j > i + 1 {
            out.push(ToolPair {
                request: i,
                responses: (i + 1..j).collect(),
            });
            i = j;
        } else {
            i += 1;
        }
    }
    out
}

/// The message's envelope with `agentVisible` false and everything else kept: the store hides
/// the row (`hide_from_agent`), and [`decode_all`](crate::message::decode_all) leaves it out.
pub fn hidden(m: &Message) -> Box<RawValue> {
    let env = split_envelope(&m.raw).expect("decoded goose messages are envelopes");
    let meta = hide_from_agent(env.metadata.map(|r| r.get()).filter(|r| *r != "null"));
    envelope(&env.role, env.content.get(), Some(&meta)).expect("the content was JSON already")
}

/// goose's replacement of a summarized tool pair: one agent-only user text message.
pub fn pair_note(text: &str) -> Box<RawValue> {
    new_envelope("user", text)
}

/// Whether goose sends the message to the model: its metadata does not hide it.
pub fn agent_visible(raw: &RawValue) -> bool {
    split_envelope(raw).map_or(true, |e| {
        visibility(e.metadata.map(|r| r.get()).filter(|r| *r != "null")).agent
    })
}

/// Serialize a rewritten envelope the way goose serializes (no HTML escaping).
pub fn to_raw(v: &Value) -> Box<RawValue> {
    serde_json::value::to_raw_value(v).expect("json values always serialize")
}

/// goose's codec: a `messages` row (role, `content_json`, `metadata_json`) as an envelope,
/// any model.
pub struct Goose;

/// The codec the goose adapter hands out.
pub const CODEC: Goose = Goose;

impl crate::message::Codec for Goose {
    fn name(&self) -> &'static str {
        "goose"
    }
    fn decode(&self, raw: &RawValue) -> Result<Message, DecodeError> {
        decode(raw)
    }
    fn agent_visible(&self, raw: &RawValue) -> bool {
        agent_visible(raw)
    }
    fn user_text_message(&self, text: &str) -> Box<RawValue> {
        summary_message(text)
    }
    fn summary_messages(&self, text: &str) -> Vec<Box<RawValue>> {
        vec![summary_message(text), continuation_message()]
    }
    fn summary_pair(&self, first: &Message, second: &Message) -> bool {
        is_summary_pair(first, second)
    }
    fn summary_in_first(&self) -> bool {
        true
    }
    fn prune_value(
        &self,
        value: &mut Value,
        placeholder: &dyn Fn(&str) -> String,
        elide_images: bool,
    ) -> bool {
        prune(value, placeholder, elide_images)
    }
    fn encode(&self, value: &Value) -> Box<RawValue> {
        to_raw(value)
    }
    fn tool_pairs(&self, messages: &[Message], keep: Option<usize>) -> Vec<ToolPair> {
        tool_pairs(messages, keep)
    }
    fn hidden(&self, message: &Message) -> Box<RawValue> {
        hidden(message)
    }
    fn pair_note(&self, text: &str) -> Box<RawValue> {
        pair_note(text)
    }
}

#[cfg(test)]
#[path = "codec_tests.rs"]
mod tests;

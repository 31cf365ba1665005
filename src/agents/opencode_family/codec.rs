//! opencode messages: one `message` row of opencode's `opencode.db` and its `part` rows
//! (docs/stores.md, "opencode"; `src/session/message-v2.ts@007a9409`).
//!
//! An opencode message is a row whose `data` holds the message info (role, model, tokens…) and
//! several `part` rows whose `data` holds each part (text, tool, step-finish…). agent-db carries
//! it as an *envelope*: `{"id":…,"info":<message.data bytes>,"parts":[{"id":…,"data":<part.data
//! bytes>},…]}`. The stored `data` bytes sit in the envelope verbatim.
//!
//! Decoding follows opencode's `toModelMessages` (`src/session/message-v2.ts@007a9409`): user `text` parts unless
//! `ignored` (empty text dropped), `file` parts other than `text/plain` and directories, a
//! `compaction` part as the text "What did we do so far?", a `subtask` part as "The following
//! tool was executed by the user"; assistant `text`, `reasoning`, and each `tool` part as a call
//! plus its result (a completed output, `[Old tool result content cleared]` when opencode's
//! prune set `state.time.compacted`, the error text, or `[Tool execution was interrupted]` for
//! a pending or running tool). An assistant with an `error` is skipped by opencode (unless it
//! was aborted and has content), so it decodes to an opaque block only. Parts that opencode
//! does not send (`step-start`, `step-finish`, `snapshot`, `patch`, `agent`, `retry`) and part
//! types agent-db does not know are kept as opaque blocks: never a panic, never rewritten.

use serde::Deserialize;
use serde_json::{json, value::RawValue, Value};

use crate::message::lite::{Json, Lite};
use crate::message::{str_field, value_text, Block, DecodeError, Message, Role};

/// What opencode sends the model for a `compaction` part.
pub const COMPACTION_TEXT: &str = "What did we do so far?";
/// What opencode sends the model for a `subtask` part.
pub const SUBTASK_TEXT: &str = "The following tool was executed by the user";
/// What opencode sends for a tool output its prune cleared.
pub const CLEARED: &str = "[Old tool result content cleared]";
/// What opencode sends for a tool that never finished.
pub const INTERRUPTED: &str = "[Tool execution was interrupted]";

/// One message envelope, split back into its rows.
#[derive(Debug, Deserialize)]
pub struct Envelope<'a> {
    #[serde(default)]
    pub id: String,
    #[serde(borrow)]
    pub info: &'a RawValue,
    #[serde(borrow, default)]
    pub parts: Vec<PartEnvelope<'a>>,
}

/// One part of an envelope.
#[derive(Debug, Deserialize)]
pub struct PartEnvelope<'a> {
    #[serde(default)]
    pub id: String,
    #[serde(borrow)]
    pub data: &'a RawValue,
}

/// Split an envelope made by [`envelope`] or [`summary_messages`].
pub fn split_envelope(raw: &RawValue) -> Result<Envelope<'_>, DecodeError> {
    serde_json::from_str(raw.get())
        .map_err(|e| DecodeError::not_json("not an opencode message envelope", e))
}

/// Build the envelope of one stored message and its parts (id, data). Fails, naming the row,
/// when a `data` column is not JSON: opencode itself cannot load such a row. Each `data` is
/// checked once; the envelope is written by serde_json's serializer around them, so it is not
/// parsed again.
pub fn envelope(
    id: &str,
    info: &str,
    parts: &[(String, String)],
) -> Result<Box<RawValue>, DecodeError> {
    #[derive(serde::Serialize)]
    struct Env<'a> {
        id: &'a str,
        info: &'a RawValue,
        parts: Vec<Part<'a>>,
    }
    #[derive(serde::Serialize)]
    struct Part<'a> {
        id: &'a str,
        data: &'a RawValue,
    }
    let info = serde_json::from_str::<&RawValue>(info).map_err(|e| {
        DecodeError::not_json("data is not valid JSON", e).inside(format!("message {id}"))
    })?;
    let parts = parts
        .iter()
        .map(|(pid, data)| {
            let data = serde_json::from_str::<&RawValue>(data).map_err(|e| {
                DecodeError::not_json("data is not valid JSON", e)
                    .inside(format!("part {pid} of message {id}"))
            })?;
            Ok(Part { id: pid, data })
        })
        .collect::<Result<Vec<_>, DecodeError>>()?;
    serde_json::value::to_raw_value(&Env { id, info, parts }).map_err(|e| {
        DecodeError::not_json("envelope is not JSON", e).inside(format!("message {id}"))
    })
}

fn to_raw(v: &Value) -> Box<RawValue> {
    serde_json::value::to_raw_value(v).expect("json values always serialize")
}

/// A user message holding one text part (no ids: agent-db's new rows get theirs when written).
pub fn user_text_message(text: &str) -> Box<RawValue> {
    to_raw(&json!({"id": "", "info": {"role": "user"}, "parts": [
        {"id": "", "data": {"type": "text", "text": text}}
    ]}))
}

/// What opencode loads after a compaction it recorded: the compaction user message (a
/// `compaction` part) and the finished summary assistant holding the summary text.
pub fn summary_messages(text: &str) -> Vec<Box<RawValue>> {
    vec![
        to_raw(&json!({"id": "", "info": {"role": "user"}, "parts": [
            {"id": "", "data": {"type": "compaction", "auto": false}}
        ]})),
        to_raw(
            &json!({"id": "", "info": {"role": "assistant", "mode": "compaction",
                "agent": "compaction", "summary": true, "finish": "stop"}, "parts": [
                {"id": "", "data": {"type": "text", "text": text}}
            ]}),
        ),
    ]
}

/// Whether an assistant info is a finished, error-free compaction summary (as opencode's `filterCompacted` tests it).
pub fn is_completed_summary(info: &Value) -> bool {
    str_field(info, "role") == Some("assistant")
        && info.get("summary") == Some(&Value::Bool(true))
        && info.get("finish").is_some_and(|f| !f.is_null())
        && info.get("error").is_none_or(Value::is_null)
}

/// Whether `first` and `second` are what opencode loads for a recorded compaction: a user
/// message holding a `compaction` part, then the finished summary assistant answering it
/// (`parentID`), whose text is the summary (`filterCompacted` and the reorder put this pair at
/// the start of the loaded history).
pub fn is_summary_pair(first: &Message, second: &Message) -> bool {
    if first.role != Role::User || second.role != Role::Assistant {
        return false;
    }
    let (Ok(a), Ok(b)) = (split_envelope(&first.raw), split_envelope(&second.raw)) else {
        return false;
    };
    let has_compaction = a.parts.iter().any(|p| {
        serde_json::from_str::<Value>(p.data.get())
            .is_ok_and(|v| str_field(&v, "type") == Some("compaction"))
    });
    let Ok(info) = serde_json::from_str::<Value>(b.info.get()) else {
        return false;
    };
    // agent-db's own new rows carry no ids yet; stored ones are linked by `parentID`.
    let linked = a.id.is_empty() || str_field(&info, "parentID") == Some(a.id.as_str());
    has_compaction && is_completed_summary(&info) && linked
}

/// Whether opencode skips this assistant message (it has an error, and is not an abort that
/// produced content).
fn skipped_for_error<J: Json>(info: &J, parts: &[J]) -> bool {
    let Some(err) = info.get("error").filter(|e| !e.is_null()) else {
        return false;
    };
    let aborted = str_field(err, "name") == Some("MessageAbortedError");
    let has_content = parts.iter().any(|p| {
        matches!(
            str_field(p, "type"),
            Some("text") | Some("reasoning") | Some("tool")
        )
    });
    !(aborted && has_content)
}

/// Decode one envelope into the model's view of the message. The info and parts are read as
/// borrowed trees ([`Lite`]); when one of them has a repeated key (or is not JSON), all of them
/// are read as `Value`s, whose errors name the row.
pub fn decode(raw: &RawValue) -> Result<Message, DecodeError> {
    let env = split_envelope(raw)?;
    let lite = Lite::parse(env.info.get()).and_then(|info| {
        let parts = env.parts.iter().map(|p| Lite::parse(p.data.get()));
        Some((info, parts.collect::<Option<Vec<_>>>()?))
    });
    if let Some((info, parts)) = lite {
        return decode_rows(&env, &info, &parts, raw);
    }
    let info: Value = serde_json::from_str(env.info.get()).map_err(|e| {
        DecodeError::not_json("data is not valid JSON", e).inside(format!("message {}", env.id))
    })?;
    let mut parts = Vec::with_capacity(env.parts.len());
    for p in &env.parts {
        let v: Value = serde_json::from_str(p.data.get()).map_err(|e| {
            DecodeError::not_json("data is not valid JSON", e).inside(format!("part {}", p.id))
        })?;
        parts.push(v);
    }
    decode_rows(&env, &info, &parts, raw)
}

/// [`decode`] from the message's info and parts.
fn decode_rows<J: Json>(
    env: &Envelope<'_>,
    info: &J,
    parts: &[J],
    raw: &RawValue,
) -> Result<Message, DecodeError> {
    let role = match str_field(info, "role") {
        Some("user") => Role::User,
        Some("assistant") => Role::Assistant,
        Some(other) => {
            return Err(DecodeError::NotARole {
                role: other.to_string(),
                of: "an opencode",
            }
            .inside(format!("message {}", env.id)))
        }
        None => {
            return Err(DecodeError::missing("data", "role").inside(format!("message {}", env.id)))
        }
    };
    let mut blocks = Vec::new();
    if role == Role::Assistant && skipped_for_error(info, parts) {
        blocks.push(Block::Opaque {
            detail: None,
            kind: "opencode:skipped-error".into(),
            bytes: 0,
        });
    } else {
        for p in parts {
            part_blocks(role, p, &mut blocks);
        }
    }
    Ok(Message {
        role,
        blocks,
        raw: raw.to_owned(),
    })
}

fn opaque(kind: &str, bytes: usize) -> Block {
    Block::Opaque {
        detail: None,
        kind: format!("opencode:{kind}"),
        bytes,
    }
}

/// The blocks one part contributes, as opencode's `toModelMessages` sends it.
fn part_blocks<J: Json>(role: Role, p: &J, out: &mut Vec<Block>) {
    let kind = str_field(p, "type").unwrap_or("");
    match (role, kind) {
        (_, "text") => {
            let text = str_field(p, "text").unwrap_or("");
            let ignored = p.get("ignored").and_then(J::as_bool) == Some(true);
            if ignored || (role == Role::User && text.is_empty()) {
                out.push(opaque("ignored-text", 0));
            } else {
                out.push(Block::Text { text: text.into() });
            }
        }
        (Role::User, "file") => {
            let mime = str_field(p, "mime").unwrap_or("");
            if mime == "text/plain" || mime == "application/x-directory" {
                out.push(opaque("file", 0));
            } else {
                out.push(opaque("file", str_field(p, "url").map_or(0, str::len)));
            }
        }
        (Role::User, "compaction") => out.push(Block::Text {
            text: COMPACTION_TEXT.into(),
        }),
        (Role::User, "subtask") => out.push(Block::Text {
            text: SUBTASK_TEXT.into(),
        }),
        (Role::Assistant, "reasoning") => out.push(Block::Thinking {
            text: str_field(p, "text").unwrap_or("").into(),
            redacted: false,
        }),
        (Role::Assistant, "tool") => tool_blocks(p, out),
        (_, "step-start" | "step-finish" | "snapshot" | "patch" | "agent" | "retry") => {
            out.push(Block::Opaque {
                kind: format!("opencode:{kind}"),
                bytes: 0,
                detail: bookkeeping_detail(kind, p),
            })
        }
        // Unknown (a newer opencode) or out of place: kept, counted by size, never interpreted.
        (_, other) => out.push(opaque(
            if other.is_empty() { "untyped" } else { other },
            p.compact().len(),
        )),
    }
}

/// The opencode part types its own UI does not show (its session view renders `text`, `tool`,
/// `reasoning` and a user's files): `show` hides them unless `--verbose`.
pub const BOOKKEEPING: &[&str] = &[
    "opencode:step-start",
    "opencode:step-finish",
    "opencode:snapshot",
    "opencode:patch",
    "opencode:agent",
    "opencode:retry",
];

/// What a bookkeeping part holds, for `show --verbose`: a patch's snapshot hash and files
/// (`{"hash","files"}`), a snapshot's hash, a step's finish reason, tokens and cost, an agent's
/// name, a retry's attempt and error.
fn bookkeeping_detail<J: Json>(kind: &str, p: &J) -> Option<String> {
    let s = |k: &str| str_field(p, k).map(str::to_string);
    let text = |v: Option<&J>| v.map(|v| v.as_str().map_or_else(|| v.compact(), str::to_string));
    match kind {
        "patch" => {
            let files: Vec<String> = p
                .get("files")
                .and_then(J::as_array)
                .unwrap_or_default()
                .iter()
                .map(|f| f.as_str().map_or_else(|| f.compact(), str::to_string))
                .collect();
            let hash = s("hash").unwrap_or_default();
            Some(format!(
                "{} file(s) changed, snapshot {}{}{}",
                files.len(),
                if hash.is_empty() { "-" } else { &hash },
                if files.is_empty() { "" } else { ": " },
                files.join(", ")
            ))
        }
        "snapshot" => s("snapshot").map(|h| format!("snapshot {h}")),
        "step-start" => s("snapshot").map(|h| format!("snapshot {h}")),
        "step-finish" => Some(format!(
            "{}, tokens {}, cost {}",
            s("reason").unwrap_or_else(|| "-".into()),
            text(p.get("tokens")).unwrap_or_else(|| "-".into()),
            text(p.get("cost")).unwrap_or_else(|| "-".into())
        )),
        "agent" => s("name"),
        "retry" => Some(format!(
            "attempt {}: {}",
            text(p.get("attempt")).unwrap_or_else(|| "-".into()),
            text(p.get("error")).unwrap_or_default()
        )),
        _ => None,
    }
}

/// A `tool` part: its call, and its result as opencode sends it.
fn tool_blocks<J: Json>(p: &J, out: &mut Vec<Block>) {
    let id = str_field(p, "callID").unwrap_or("").to_string();
    let name = str_field(p, "tool").unwrap_or("tool").to_string();
    let state = |k: &str| p.get("state").and_then(|s| s.get(k));
    let input = state("input").map_or_else(|| "{}".into(), J::compact);
    let (content, is_error) = match state("status").and_then(J::as_str) {
        Some("completed") => {
            let compacted = state("time")
                .and_then(|t| t.get("compacted"))
                .is_some_and(|c| !c.is_null());
            if compacted {
                (CLEARED.to_string(), false)
            } else {
                (state("output").map(value_text).unwrap_or_default(), false)
            }
        }
        Some("error") => (state("error").map(value_text).unwrap_or_default(), true),
        _ => (INTERRUPTED.to_string(), true),
    };
    out.push(Block::ToolCall {
        id: id.clone(),
        name,
        input,
    });
    out.push(Block::ToolResult {
        call_id: id,
        content,
        is_error,
        images: Vec::new(),
    });
}

/// Whether a tool part is one opencode's prune may clear: completed, not `skill`, not cleared
/// yet (as opencode's `SessionCompaction.prune` chooses).
pub fn prunable(part: &Value) -> bool {
    let state = &part["state"];
    str_field(part, "type") == Some("tool")
        && str_field(part, "tool") != Some("skill")
        && str_field(state, "status") == Some("completed")
        && state
            .get("time")
            .and_then(|t| t.get("compacted"))
            .is_none_or(Value::is_null)
}

/// Mark every prunable tool part of an envelope `state.time.compacted` (the output is kept, as
/// opencode's prune keeps it). The store writes the real time; the mark here only says which
/// parts. Returns whether anything changed.
pub fn prune(value: &mut Value) -> bool {
    let Some(parts) = value.get_mut("parts").and_then(Value::as_array_mut) else {
        return false;
    };
    let mut changed = false;
    for p in parts {
        let data = &mut p["data"];
        if !prunable(data) {
            continue;
        }
        let state = &mut data["state"];
        if !state.get("time").is_some_and(Value::is_object) {
            state["time"] = json!({});
        }
        state["time"]["compacted"] = json!(0);
        changed = true;
    }
    changed
}

/// The ids of the parts of an envelope whose tool output is marked cleared.
pub fn cleared_parts(raw: &RawValue) -> Vec<String> {
    let Ok(v) = serde_json::from_str::<Value>(raw.get()) else {
        return Vec::new();
    };
    let Some(parts) = v["parts"].as_array() else {
        return Vec::new();
    };
    parts
        .iter()
        .filter(|p| {
            str_field(&p["data"], "type") == Some("tool")
                && p["data"]["state"]["time"]
                    .get("compacted")
                    .is_some_and(|c| !c.is_null())
        })
        .filter_map(|p| str_field(p, "id").map(str::to_string))
        .collect()
}

/// Serialize an edited envelope (compact, key order kept).
pub fn raw_of(v: &Value) -> Box<RawValue> {
    to_raw(v)
}

/// opencode's codec: a `message` row and its `part` rows as an envelope, any model.
pub struct Opencode;

/// The codec the opencode adapters hand out.
pub const CODEC: Opencode = Opencode;

impl crate::message::Codec for Opencode {
    fn name(&self) -> &'static str {
        "opencode"
    }
    fn bookkeeping(&self, kind: &str) -> bool {
        BOOKKEEPING.contains(&kind)
    }
    fn decode(&self, raw: &RawValue) -> Result<Message, DecodeError> {
        decode(raw)
    }
    fn user_text_message(&self, text: &str) -> Box<RawValue> {
        user_text_message(text)
    }
    fn summary_messages(&self, text: &str) -> Vec<Box<RawValue>> {
        summary_messages(text)
    }
    // opencode's prune keeps the output and marks the part cleared.
    fn prune_value(
        &self,
        value: &mut Value,
        _placeholder: &dyn Fn(&str) -> String,
        _elide_images: bool,
    ) -> bool {
        prune(value)
    }
    fn encode(&self, value: &Value) -> Box<RawValue> {
        raw_of(value)
    }
    fn summary_pair(&self, first: &Message, second: &Message) -> bool {
        is_summary_pair(first, second)
    }
    // A tool part is its call and its result in one message.
    fn answers_itself(&self) -> bool {
        true
    }
}

#[cfg(test)]
#[path = "codec_tests.rs"]
mod tests;

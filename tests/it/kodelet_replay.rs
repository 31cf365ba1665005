//! kodelet's own loading replayed on the `raw_messages` agent-db writes, for each of kodelet's
//! provider formats (Anthropic messages, OpenAI Chat Completions, OpenAI Responses items).
//!
//! The rules are written here from kodelet's source at jingkaihe/kodelet
//! d210c4a563c75db340573f522bca32c9312aa8c0 (none of agent-db's code is called):
//! - which parser a row gets: `pkg/llm/thread.go` `ExtractMessages` and
//!   `pkg/llm/openai/factory.go` `RecordUsesResponsesMode` (`provider`, `metadata.api_mode`,
//!   then the first item's `type`);
//! - Anthropic: `pkg/llm/anthropic/persistence.go` `loadConversation` / `DeserializeMessages`
//!   (`[]anthropic.MessageParam`) and `cleanedAnthropicMessages` (trailing messages with a
//!   `tool_use`, and trailing messages left empty once blank text/thinking blocks go, are
//!   dropped; `isMessageToolUse` in `pkg/llm/anthropic/anthropic.go`);
//! - OpenAI Chat: `pkg/llm/openai/persistence.go` `loadConversation` (`[]openai.
//!   ChatCompletionMessage` of sashabaranov/go-openai: `content` a string or an array of parts)
//!   and `cleanedOpenAIMessages` (trailing empty messages and trailing assistant tool calls go);
//! - OpenAI Responses: `pkg/llm/openai/responses/thread.go` `loadConversation` (`[]StoredInputItem`
//!   of `pkg/llm/openai/responses/storage.go`: every field a string but `raw_output`/`raw_item`),
//!   `cleanedStoredInputItems` (trailing `function_call` items go) and `fromStoredItems`
//!   (`reasoning` items are not sent).
//!
//! kodelet's loaders return silently on a decode error and start the conversation empty, so
//! "loads" means: decodes with those types, and what kodelet then sends is a request the API
//! accepts (it opens with a user message; every tool call is answered by its result before the
//! next turn, every result answers a call). The replay first runs on the stores as generated
//! (what kodelet wrote), then on what agent-db wrote: every compacted conversation loads, opens
//! with agent-db's summary as a user message, and kodelet resumes it at the same last message as
//! the original. `kodelet_current.rs` runs [`model_view`] on stores with `compaction_history`
//! (whose visible window, `activeDisplayStart`, it replays too).

use std::collections::BTreeSet;

use agent_db_synth::SynthFormat;
use rusqlite::Connection;
use serde_json::Value;

use crate::common::{ids_with_status, json, Env};

const HEADER: &str = "[agent-db compaction summary]";

/// The parser kodelet picks for a row.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Parser {
    Anthropic,
    Chat,
    Responses,
}

/// `ExtractMessages`' switch: `anthropic`; `openai-responses`; `openai` with `api_mode`
/// parsing as responses (or, without a parsable `api_mode`, a first item whose `type` is a
/// Responses item type); else Chat Completions.
fn parser(provider: &str, metadata: &Value, items: &[Value]) -> Parser {
    match provider.trim().to_lowercase().as_str() {
        "anthropic" => Parser::Anthropic,
        "openai-responses" => Parser::Responses,
        "openai" => {
            let mode = metadata["api_mode"]
                .as_str()
                .map(|m| m.trim().to_lowercase().replace('-', "_"));
            match mode.as_deref() {
                Some("responses") => Parser::Responses,
                Some("chat" | "chat_completions" | "chatcompletions") => Parser::Chat,
                _ => {
                    let first = items.first().and_then(|i| i["type"].as_str());
                    match first {
                        Some(
                            "message"
                            | "reasoning"
                            | "function_call"
                            | "function_call_output"
                            | "compaction"
                            | "compaction_summary",
                        ) => Parser::Responses,
                        _ => Parser::Chat,
                    }
                }
            }
        }
        other => panic!("kodelet has no parser for provider {other:?}"),
    }
}

fn is_string_or_null(v: &Value) -> bool {
    v.is_string() || v.is_null()
}

/// One conversation as kodelet loads and sends it: the items after its cleanup, or why it
/// does not load.
fn load(parser: Parser, raw: &str) -> Result<Vec<Value>, String> {
    let items: Vec<Value> =
        serde_json::from_str(raw).map_err(|e| format!("not a JSON array: {e}"))?;
    for (i, it) in items.iter().enumerate() {
        let ok = match parser {
            Parser::Anthropic => anthropic_decodes(it),
            Parser::Chat => chat_decodes(it),
            Parser::Responses => responses_decodes(it),
        };
        ok.map_err(|e| format!("item {i}: {e}: {it}"))?;
    }
    let mut items = items;
    match parser {
        Parser::Anthropic => {
            // cleanedAnthropicMessages
            while let Some(last) = items.last_mut() {
                let blocks = last["content"].as_array().cloned().unwrap_or_default();
                if blocks.iter().any(|b| b["type"] == "tool_use") {
                    items.pop();
                    continue;
                }
                let kept: Vec<Value> = blocks.into_iter().filter(|b| !anthropic_empty(b)).collect();
                if kept.is_empty() {
                    items.pop();
                    continue;
                }
                last["content"] = Value::Array(kept);
                break;
            }
        }
        Parser::Chat => {
            // cleanedOpenAIMessages (the synthetic image follow-up is not something agent-db
            // writes: a follow-up user message of images only after tool results).
            while let Some(last) = items.last() {
                let calls = last["tool_calls"].as_array().is_some_and(|c| !c.is_empty());
                let content_empty = match &last["content"] {
                    Value::Null => true,
                    Value::String(s) => s.is_empty(),
                    Value::Array(a) => a.is_empty(),
                    _ => false,
                };
                if (content_empty && !calls && last["role"] != "tool")
                    || (last["role"] == "assistant" && calls)
                {
                    items.pop();
                    continue;
                }
                break;
            }
        }
        Parser::Responses => {
            // cleanedStoredInputItems; then fromStoredItems leaves reasoning out of the request.
            while items.last().is_some_and(|i| i["type"] == "function_call") {
                items.pop();
            }
        }
    }
    Ok(items)
}

/// A block `isEmptyContentBlock` drops: blank text, or thinking with blank text and signature.
fn anthropic_empty(b: &Value) -> bool {
    let blank = |k: &str| b[k].as_str().is_none_or(|s| s.trim().is_empty());
    match b["type"].as_str() {
        Some("text") => blank("text"),
        Some("thinking") => blank("thinking") && blank("signature"),
        _ => false,
    }
}

/// `anthropic.MessageParam`: a role of `user`/`assistant` and content blocks, each a known
/// type with its fields of the right JSON types.
fn anthropic_decodes(m: &Value) -> Result<(), String> {
    if !matches!(m["role"].as_str(), Some("user" | "assistant")) {
        return Err("role is not user or assistant".into());
    }
    let blocks = m["content"].as_array().ok_or("content is not an array")?;
    for b in blocks {
        let s = |k: &str| b[k].is_string();
        let ok = match b["type"].as_str() {
            Some("text") => s("text"),
            Some("thinking") => s("thinking") && is_string_or_null(&b["signature"]),
            Some("redacted_thinking") => s("data"),
            Some("tool_use") => s("id") && s("name") && b["input"].is_object(),
            Some("tool_result") => {
                s("tool_use_id")
                    && (b["content"].is_string()
                        || b["content"].is_null()
                        || b["content"].as_array().is_some_and(|c| {
                            c.iter()
                                .all(|x| matches!(x["type"].as_str(), Some("text" | "image")))
                        }))
                    && (b["is_error"].is_boolean() || b["is_error"].is_null())
            }
            Some("image" | "document") => b["source"].is_object(),
            _ => false,
        };
        if !ok {
            return Err(format!("block does not decode: {b}"));
        }
    }
    Ok(())
}

/// `openai.ChatCompletionMessage`: string fields, `content` a string or an array of parts,
/// `tool_calls` with string `id` and `function.name`/`function.arguments`.
fn chat_decodes(m: &Value) -> Result<(), String> {
    for k in [
        "role",
        "name",
        "tool_call_id",
        "refusal",
        "reasoning_content",
    ] {
        if !is_string_or_null(&m[k]) {
            return Err(format!("{k} is not a string"));
        }
    }
    if !matches!(
        m["role"].as_str(),
        Some("system" | "developer" | "user" | "assistant" | "tool")
    ) {
        return Err("unknown role".into());
    }
    match &m["content"] {
        Value::Null | Value::String(_) => {}
        Value::Array(parts) => {
            if !parts.iter().all(|p| p["type"].is_string()) {
                return Err("a content part has no type".into());
            }
        }
        _ => return Err("content is neither a string nor parts".into()),
    }
    if let Some(calls) = m.get("tool_calls").filter(|c| !c.is_null()) {
        let calls = calls.as_array().ok_or("tool_calls is not an array")?;
        for c in calls {
            let f = &c["function"];
            if !(c["id"].is_string() && f["name"].is_string() && f["arguments"].is_string()) {
                return Err(format!("tool call does not decode: {c}"));
            }
        }
    }
    Ok(())
}

/// `StoredInputItem`: every field a string (or absent), `raw_output`/`raw_item` any JSON.
fn responses_decodes(i: &Value) -> Result<(), String> {
    let obj = i.as_object().ok_or("not an object")?;
    for (k, v) in obj {
        let raw = k == "raw_output" || k == "raw_item";
        if !raw && !is_string_or_null(v) {
            return Err(format!("{k} is not a string"));
        }
    }
    Ok(())
}

/// What kodelet sends once loaded is a request the provider accepts: it opens with a user
/// message, and tool calls and results pair up in order. (An empty history is a new
/// conversation: kodelet's next request is the user's message alone.)
fn request_is_valid(parser: Parser, items: &[Value]) -> Result<(), String> {
    if items.is_empty() {
        return Ok(());
    }
    match parser {
        Parser::Anthropic => {
            if items.first().map(|m| &m["role"]) != Some(&Value::from("user")) {
                return Err("the first message is not the user's".into());
            }
            let mut open: Vec<String> = Vec::new();
            for (i, m) in items.iter().enumerate() {
                let blocks = m["content"].as_array().unwrap();
                let results: Vec<&str> = blocks
                    .iter()
                    .filter(|b| b["type"] == "tool_result")
                    .map(|b| b["tool_use_id"].as_str().unwrap())
                    .collect();
                // Every tool_use of the previous assistant message is answered here, and every
                // result answers one of them.
                let answered: BTreeSet<&str> = results.iter().copied().collect();
                let wanted: BTreeSet<&str> = open.iter().map(String::as_str).collect();
                if answered != wanted {
                    return Err(format!(
                        "message {i}: results {answered:?} for the calls {wanted:?}"
                    ));
                }
                open = if m["role"] == "assistant" {
                    blocks
                        .iter()
                        .filter(|b| b["type"] == "tool_use")
                        .map(|b| b["id"].as_str().unwrap().to_string())
                        .collect()
                } else {
                    Vec::new()
                };
            }
            Ok(())
        }
        Parser::Chat => {
            let first = items.iter().find(|m| m["role"] != "system");
            if first.map(|m| &m["role"]) != Some(&Value::from("user")) {
                return Err("the first message is not the user's".into());
            }
            let mut open: BTreeSet<String> = BTreeSet::new();
            for (i, m) in items.iter().enumerate() {
                if m["role"] == "tool" {
                    let id = m["tool_call_id"].as_str().unwrap_or("");
                    if !open.remove(id) {
                        return Err(format!("message {i}: a result for no open call {id:?}"));
                    }
                    continue;
                }
                if !open.is_empty() {
                    return Err(format!("message {i}: calls {open:?} were never answered"));
                }
                if m["role"] == "assistant" {
                    for c in m["tool_calls"].as_array().into_iter().flatten() {
                        open.insert(c["id"].as_str().unwrap().to_string());
                    }
                }
            }
            Ok(())
        }
        Parser::Responses => {
            let sent: Vec<&Value> = items.iter().filter(|i| i["type"] != "reasoning").collect();
            let first = sent.iter().find(|i| {
                i["type"] == "message"
                    && !matches!(i["role"].as_str(), Some("system" | "developer"))
            });
            if first.map(|i| &i["role"]) != Some(&Value::from("user")) {
                return Err("the first message is not the user's".into());
            }
            let mut open: BTreeSet<String> = BTreeSet::new();
            for (n, i) in sent.iter().enumerate() {
                let call = i["call_id"].as_str().unwrap_or("").to_string();
                let role_ok = matches!(
                    i["role"].as_str(),
                    Some("user" | "assistant" | "system" | "developer")
                );
                match i["type"].as_str() {
                    Some("function_call") => {
                        open.insert(call);
                    }
                    Some("function_call_output") if !open.remove(&call) => {
                        return Err(format!("item {n}: an output for no open call {call:?}"));
                    }
                    Some("message") if !role_ok => {
                        return Err(format!("item {n}: role {}", i["role"]));
                    }
                    _ => {}
                }
            }
            if !open.is_empty() {
                return Err(format!("calls {open:?} were never answered"));
            }
            Ok(())
        }
    }
}

/// A row as kodelet loads it for the model: its parser, the loaded items, and the request
/// they make checked; the items, or why kodelet could not go on with it.
pub fn model_view(provider: &str, metadata: &Value, raw: &str) -> Result<Vec<Value>, String> {
    let items: Vec<Value> = serde_json::from_str(raw).map_err(|e| e.to_string())?;
    let p = parser(provider, metadata, &items);
    let loaded = load(p, raw)?;
    request_is_valid(p, &loaded)?;
    Ok(loaded)
}

/// The text of a loaded item, for finding the summary.
fn text_of(item: &Value) -> String {
    match &item["content"] {
        Value::String(s) => s.clone(),
        Value::Array(blocks) => blocks
            .iter()
            .filter_map(|b| b["text"].as_str())
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

/// (id, provider, metadata, raw_messages) of every conversation.
fn conversations(c: &Connection) -> Vec<(String, String, Value, String)> {
    let mut s = c
        .prepare("SELECT id, provider, metadata, raw_messages FROM conversations ORDER BY id")
        .unwrap();
    let rows = s
        .query_map([], |r| {
            let meta: Option<String> = r.get(2)?;
            Ok((
                r.get(0)?,
                r.get(1)?,
                meta.and_then(|m| serde_json::from_str(&m).ok())
                    .unwrap_or(Value::Null),
                r.get(3)?,
            ))
        })
        .unwrap();
    rows.map(|r| r.unwrap()).collect()
}

fn kodelet_replay_loads_what_agent_db_writes(format: SynthFormat, want: Parser) {
    for strategy in ["extractive", "prune"] {
        let env = Env::generated(24, 31, &[format]);
        let before = conversations(&env.conn());
        // The replay accepts what kodelet wrote (the generated store).
        for (id, provider, meta, raw) in &before {
            let items: Vec<Value> = serde_json::from_str(raw).unwrap();
            let p = parser(provider, meta, &items);
            assert_eq!(p, want, "{id}: the generated row's parser");
            let loaded = load(p, raw).unwrap_or_else(|e| panic!("generated {id}: {e}"));
            request_is_valid(p, &loaded).unwrap_or_else(|e| panic!("generated {id}: {e}"));
        }
        let mut cmd = env.cmd();
        cmd.args([
            "compact",
            "--all-over",
            "0",
            "--idle",
            "0",
            "--keep-tokens",
            "2000",
            "--strategy",
            strategy,
            "--yes",
            "--json",
        ]);
        let (doc, code) = json(cmd);
        assert_eq!(code, 0, "{format:?} {strategy}: {doc:#}");
        let compacted = ids_with_status(&doc, "compacted");
        assert!(
            compacted.len() >= 8,
            "{format:?} {strategy}: only {} compacted",
            compacted.len()
        );
        let after = conversations(&env.conn());
        for ((id, provider, meta, old), (_, _, new_meta, new)) in before.iter().zip(&after) {
            if !compacted.contains(id) {
                continue;
            }
            let what = format!("{format:?} {strategy} {id}");
            let items: Vec<Value> = serde_json::from_str(new).unwrap();
            let p = parser(provider, new_meta, &items);
            assert_eq!(p, want, "{what}: kodelet picks the same parser");
            let loaded = load(p, new).unwrap_or_else(|e| panic!("{what}: does not load: {e}"));
            request_is_valid(p, &loaded).unwrap_or_else(|e| panic!("{what}: {e}\n{new}"));
            // kodelet resumes where it would have resumed the original.
            let old_items: Vec<Value> = serde_json::from_str(old).unwrap();
            let original = load(parser(provider, meta, &old_items), old).unwrap();
            assert_eq!(
                loaded.last(),
                original.last(),
                "{what}: kodelet resumes at the same message"
            );
            if strategy == "extractive" {
                let first = loaded
                    .iter()
                    .find(|i| i["type"] != "reasoning")
                    .expect("a first item");
                assert!(
                    text_of(first).contains(HEADER),
                    "{what}: the summary opens the history: {first}"
                );
            } else {
                assert!(
                    loaded.len() <= original.len(),
                    "{what}: prune adds no items"
                );
            }
        }
    }
}

#[test]
fn kodelet_replay_loads_the_anthropic_rows_agent_db_writes() {
    kodelet_replay_loads_what_agent_db_writes(SynthFormat::Anthropic, Parser::Anthropic);
}

#[test]
fn kodelet_replay_loads_the_openai_chat_rows_agent_db_writes() {
    kodelet_replay_loads_what_agent_db_writes(SynthFormat::OpenAiChat, Parser::Chat);
}

#[test]
fn kodelet_replay_loads_the_openai_responses_rows_agent_db_writes() {
    kodelet_replay_loads_what_agent_db_writes(SynthFormat::OpenAiResponses, Parser::Responses);
}

/// The replay refuses what kodelet could not send: it is an oracle that can say no.
#[test]
fn kodelet_replay_refuses_histories_kodelet_cannot_send() {
    let none = Value::Null;
    let ok = r#"[{"role":"user","content":[{"type":"text","text":"ls"}]},
        {"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"bash","input":{}}]},
        {"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"a"}]}]"#;
    assert_eq!(model_view("anthropic", &none, ok).unwrap().len(), 3);
    // A trailing call is dropped by the cleanup, not refused.
    let trailing = r#"[{"role":"user","content":[{"type":"text","text":"ls"}]},
        {"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"bash","input":{}}]}]"#;
    assert_eq!(model_view("anthropic", &none, trailing).unwrap().len(), 1);
    for bad in [
        // content as a string: not []ContentBlockParamUnion
        r#"[{"role":"user","content":"hi"}]"#,
        // a result with no call before it
        r#"[{"role":"user","content":[{"type":"tool_result","tool_use_id":"t9","content":"a"}]}]"#,
        // a call answered late
        r#"[{"role":"user","content":[{"type":"text","text":"ls"}]},
            {"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"bash","input":{}}]},
            {"role":"user","content":[{"type":"text","text":"wait"}]},
            {"role":"assistant","content":[{"type":"text","text":"ok"}]}]"#,
        // opens with the assistant
        r#"[{"role":"assistant","content":[{"type":"text","text":"hi"}]}]"#,
    ] {
        assert!(model_view("anthropic", &none, bad).is_err(), "{bad}");
    }
    let chat_bad = r#"[{"role":"user","content":"ls"},
        {"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"bash","arguments":"{}"}}]},
        {"role":"user","content":"next"}]"#;
    assert!(model_view("openai", &none, chat_bad).is_err());
    let responses = serde_json::json!({"api_mode": "responses"});
    let resp_bad = r#"[{"type":"message","role":"user","content":"ls"},
        {"type":"function_call_output","call_id":"c1","output":"a"}]"#;
    assert!(model_view("openai", &responses, resp_bad).is_err());
    let resp_array = r#"[{"type":"message","role":"user","content":[{"type":"input_text"}]}]"#;
    assert!(model_view("openai", &responses, resp_array).is_err());
}

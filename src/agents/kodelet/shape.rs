//! Telling a kodelet `raw_messages` format from the JSON's shape, for rows whose `provider` and
//! `metadata.api_mode` do not say it (an unknown provider string, unreadable metadata, an OpenAI
//! row without `api_mode`).
//!
//! Each element rules formats in or out by keys only one format uses (docs/stores.md, "kodelet"):
//!
//! - OpenAI Responses items have a top-level `type` (`message`, `function_call`, …) and, for
//!   messages, a string `content`; no other format has a top-level `type`.
//! - Anthropic blocks are `tool_use`, `tool_result`, `thinking`, `redacted_thinking`, `image`;
//!   OpenAI chat has `tool_calls`, `tool_call_id`, a `tool` or `system` role, string `content`,
//!   and `image_url` parts.
//! - A message whose content is only `[{"type":"text",…}]` parts fits both Anthropic and OpenAI
//!   chat, and rules nothing out.
//!
//! The answer is a format only when exactly one remains possible for every element; anything
//! else is ambiguous (`None`), and the caller keeps its own answer or error.

use serde_json::{Map, Value};

use super::{ANTHROPIC, OPENAI_CHAT, OPENAI_RESPONSES};
use crate::message::Format;

const RESPONSES_TYPES: &[&str] = &[
    "message",
    "reasoning",
    "function_call",
    "function_call_output",
    "web_search_call",
    "compaction",
    "compaction_summary",
];

/// Which of (Anthropic, OpenAI chat, Responses) one element allows.
#[derive(Clone, Copy)]
struct Allowed {
    anthropic: bool,
    chat: bool,
    responses: bool,
}

impl Allowed {
    const ALL: Allowed = Allowed {
        anthropic: true,
        chat: true,
        responses: true,
    };
    const NONE: Allowed = Allowed {
        anthropic: false,
        chat: false,
        responses: false,
    };

    fn and(self, o: Allowed) -> Allowed {
        Allowed {
            anthropic: self.anthropic && o.anthropic,
            chat: self.chat && o.chat,
            responses: self.responses && o.responses,
        }
    }
}

fn only(f: Format) -> Allowed {
    Allowed {
        anthropic: f == ANTHROPIC,
        chat: f == OPENAI_CHAT,
        responses: f == OPENAI_RESPONSES,
    }
}

fn either_anthropic_or_chat() -> Allowed {
    Allowed {
        anthropic: true,
        chat: true,
        responses: false,
    }
}

/// The formats a content block allows (`image_url` is chat's, the tool blocks Anthropic's).
fn block(b: &Value) -> Allowed {
    match b.get("type").and_then(Value::as_str) {
        Some("text") => either_anthropic_or_chat(),
        Some("image_url") => only(OPENAI_CHAT),
        Some("tool_use" | "tool_result" | "thinking" | "redacted_thinking" | "image") => {
            only(ANTHROPIC)
        }
        _ => Allowed::NONE,
    }
}

fn element(m: &Map<String, Value>) -> Allowed {
    if let Some(t) = m.get("type") {
        return match t.as_str() {
            Some(t) if RESPONSES_TYPES.contains(&t) => only(OPENAI_RESPONSES),
            _ => Allowed::NONE,
        };
    }
    if m.contains_key("tool_calls") || m.contains_key("tool_call_id") {
        return only(OPENAI_CHAT);
    }
    let role = m.get("role").and_then(Value::as_str);
    let by_role = match role {
        Some("user" | "assistant") => either_anthropic_or_chat(),
        Some("tool" | "system") => only(OPENAI_CHAT),
        _ => return Allowed::NONE,
    };
    let by_content = match m.get("content") {
        None | Some(Value::Null) => only(OPENAI_CHAT),
        Some(Value::String(_)) => only(OPENAI_CHAT),
        Some(Value::Array(blocks)) => blocks
            .iter()
            .map(block)
            .fold(either_anthropic_or_chat(), Allowed::and),
        Some(_) => Allowed::NONE,
    };
    by_role.and(by_content)
}

/// The format `raw_messages` unambiguously has, if any.
pub fn detect(raw_messages: &str) -> Option<Format> {
    let elements: Vec<Value> = serde_json::from_str(raw_messages).ok()?;
    // Starting from every format, each element can only narrow the set; a single survivor was
    // therefore decided by some element's own keys.
    let all = elements
        .iter()
        .map(|e| e.as_object().map(element).unwrap_or(Allowed::NONE))
        .fold(Allowed::ALL, Allowed::and);
    match (all.anthropic, all.chat, all.responses) {
        (true, false, false) => Some(ANTHROPIC),
        (false, true, false) => Some(OPENAI_CHAT),
        (false, false, true) => Some(OPENAI_RESPONSES),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_format_is_recognized_from_its_own_keys() {
        let anthropic = r#"[{"content":[{"text":"ls","type":"text"}],"role":"user"},
            {"content":[{"id":"t1","input":{},"name":"bash","type":"tool_use"}],"role":"assistant"},
            {"content":[{"tool_use_id":"t1","content":[],"type":"tool_result"}],"role":"user"}]"#;
        assert_eq!(detect(anthropic), Some(ANTHROPIC));
        let chat = r#"[{"role":"user","content":"How many CPUs?"},
            {"role":"assistant","tool_calls":[{"id":"c","type":"function","function":{"name":"bash","arguments":"{}"}}]},
            {"role":"tool","content":"24","tool_call_id":"c"}]"#;
        assert_eq!(detect(chat), Some(OPENAI_CHAT));
        let responses = r#"[{"type":"message","role":"user","content":"Hello"},
            {"type":"function_call","call_id":"x","name":"bash","arguments":"{}"}]"#;
        assert_eq!(detect(responses), Some(OPENAI_RESPONSES));
    }

    #[test]
    fn ambiguous_or_mixed_shapes_are_not_guessed() {
        // Text-only parts fit Anthropic and OpenAI chat alike.
        assert_eq!(
            detect(r#"[{"role":"user","content":[{"type":"text","text":"hi"}]}]"#),
            None
        );
        // A Responses item next to an Anthropic message: no single format.
        assert_eq!(
            detect(
                r#"[{"type":"message","role":"user","content":"a"},{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":[]}]}]"#
            ),
            None
        );
        assert_eq!(detect("[]"), None);
        assert_eq!(detect("not json"), None);
        assert_eq!(detect(r#"[{"role":"model","parts":[{"text":"x"}]}]"#), None);
    }
}

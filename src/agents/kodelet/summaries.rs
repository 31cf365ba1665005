//! kodelet's `ConversationRecord.ToSummary()` (`pkg/types/conversations/conversation.go@e089fb8f`), reproduced exactly, so a row of
//! `conversation_summaries` written by agent-db is the row kodelet would have written.
//!
//! Both functions are pure and never fail: kodelet ignores parse errors here, and so do we.

use serde_json::Value;

use crate::message::lite::{Json, Lite};
use crate::message::str_field;
use sha2::{Digest, Sha256};

/// `strings.Count(raw_messages, "\"role\"")`: the number of occurrences of the substring
/// `"role"` (quotes included) in the raw text. Nested `"role"` keys (for example inside a
/// Responses `raw_item`) count too, and items without a role (`function_call`) do not.
pub fn message_count(raw_messages: &str) -> i64 {
    // Non-overlapping count, as Go's strings.Count (the pattern cannot overlap itself anyway).
    raw_messages.matches("\"role\"").count() as i64
}

/// kodelet's `first_message`:
///
/// 1. parse `raw_messages` as a JSON array of objects (any other shape, or invalid JSON, gives
///    `""`; `null` elements are tolerated as Go decodes them into nil maps);
/// 2. take the first message with `role == "user"` whose `content` is an array whose first
///    element is an object with a string `text`;
/// 3. replace that text by its display override from `metadata` (`message_display`, or the
///    legacy `message_display_overrides` when the former key is absent), looked up under
///    `sha256:<lowercase hex of the trimmed text>` in the `v1` map;
/// 4. if the result is longer than 100 **bytes**, keep its first 97 bytes and append `...`.
///
/// Byte cut vs UTF-8: Go cuts at byte 97 even inside a multi-byte character and stores the
/// resulting bytes as TEXT, invalid UTF-8 included. This function returns those exact bytes, so
/// the row agent-db writes is the row kodelet would write; every reader of the column reads it
/// byte-wise (display is lossy, see `store::kodelet`).
pub fn first_message(raw_messages: &str, metadata: Option<&str>) -> Vec<u8> {
    displayed_first(first_user_text(raw_messages).as_deref(), metadata)
}

/// Steps 3–4 of [`first_message`] on the text step 2 found (`None`: no such message, or
/// `raw_messages` is not what kodelet decodes, which gives `""`). The writer runs this part in
/// the transaction, with the metadata it is about to store; steps 1–2 (the JSON decode) run on
/// the planning pool.
pub fn displayed_first(text: Option<&str>, metadata: Option<&str>) -> Vec<u8> {
    text.map(|t| truncate_bytes(&apply_display(t, metadata)))
        .unwrap_or_default()
}

/// Bind bytes as SQLite TEXT (not BLOB), whether or not they are valid UTF-8, as Go's driver
/// stores a Go `string`.
pub fn as_text(bytes: &[u8]) -> rusqlite::types::ToSqlOutput<'_> {
    rusqlite::types::ToSqlOutput::Borrowed(rusqlite::types::ValueRef::Text(bytes))
}

/// Steps 1–2 of [`first_message`]: the first user message's text, if there is one.
pub fn first_user_text(raw_messages: &str) -> Option<String> {
    first_text(raw_messages, false)
}

/// Step 2 as the kodelet that added `compaction_history` (migration 20260920120000) takes it,
/// from the first segment's `rawMessages` when there is one: a user message whose `content` is a
/// non-empty string counts too (OpenAI chat and Responses items), before the array rule.
pub fn first_user_text_current(raw_messages: &str) -> Option<String> {
    first_text(raw_messages, true)
}

fn first_text(raw_messages: &str, strings: bool) -> Option<String> {
    if raw_messages.is_empty() {
        return None;
    }
    // Read as a borrowed tree, unless the history has a repeated key (a `Value` keeps the last).
    if let Some(tree) = Lite::parse(raw_messages) {
        return tree.as_array().and_then(|m| first_text_of(m, strings));
    }
    let messages: Vec<Value> = serde_json::from_str(raw_messages).ok()?;
    first_text_of(&messages, strings)
}

/// [`first_text`] of the parsed history: Go's decode into `[]map[string]any`, replayed.
fn first_text_of<J: Json>(messages: &[J], strings: bool) -> Option<String> {
    // Go unmarshals into []map[string]any: an element that is neither an object nor null makes
    // the whole decode fail.
    if messages.iter().any(|m| !(m.is_object() || m.is_null())) {
        return None;
    }
    let mut text: Option<&str> = None;
    for msg in messages {
        if str_field(msg, "role") != Some("user") {
            continue;
        }
        let content = msg.get("content");
        if strings {
            if let Some(t) = content.and_then(J::as_str).filter(|t| !t.is_empty()) {
                text = Some(t);
                break;
            }
        }
        let first = content.and_then(J::as_array).and_then(<[J]>::first);
        if let Some(t) = first.and_then(|b| str_field(b, "text")) {
            text = Some(t);
            break;
        }
    }
    text.map(str::to_string)
}

/// The 100-byte rule: longer values keep their first 97 bytes plus `...`, cut by bytes as Go does.
fn truncate_bytes(s: &str) -> Vec<u8> {
    if s.len() > 100 {
        let mut out = s.as_bytes()[..97].to_vec();
        out.extend_from_slice(b"...");
        out
    } else {
        s.as_bytes().to_vec()
    }
}

/// `applyConversationDisplay(text, parseConversationDisplayMetadata(metadata))`.
fn apply_display(text: &str, metadata: Option<&str>) -> String {
    let trimmed = text.trim();
    if trimmed.is_empty() {
        return text.to_string();
    }
    let Some(meta) = metadata else {
        return text.to_string();
    };
    let Ok(Value::Object(meta)) = serde_json::from_str::<Value>(meta) else {
        return text.to_string();
    };
    // The legacy key is consulted only when the current key is absent (even if the current
    // key holds something unusable).
    let root = match meta.get("message_display") {
        Some(v) => v,
        None => match meta.get("message_display_overrides") {
            Some(v) => v,
            None => return text.to_string(),
        },
    };
    let Some(versions) = root
        .as_object()
        .and_then(|r| r.get("v1"))
        .and_then(Value::as_object)
    else {
        return text.to_string();
    };
    let key = display_key(text);
    // kodelet drops entries whose display is blank before the lookup.
    if let Some(raw) = versions.get(&key) {
        let display = display_value(raw);
        if !display.trim().is_empty() {
            return display;
        }
    }
    text.to_string()
}

/// The metadata lookup key of a model-facing text: `sha256:` + lowercase hex of the trimmed text.
pub fn display_key(text: &str) -> String {
    let sum = Sha256::digest(text.trim().as_bytes());
    format!("sha256:{}", hex::encode(sum))
}

/// `conversationDisplayValue`: an object's `text` (when present and not null), else its
/// `display`, printed as Go's `fmt.Sprint` would; anything else gives `""`.
fn display_value(raw: &Value) -> String {
    let Some(obj) = raw.as_object() else {
        return String::new();
    };
    for k in ["text", "display"] {
        if let Some(v) = obj.get(k) {
            if !v.is_null() {
                return go_sprint(v);
            }
        }
    }
    String::new()
}

/// `fmt.Sprint` of a value decoded by `encoding/json` into `any`.
fn go_sprint(v: &Value) -> String {
    match v {
        Value::Null => "<nil>".to_string(),
        Value::Bool(b) => b.to_string(),
        Value::String(s) => s.clone(),
        Value::Number(n) => go_format_g(n.as_f64().unwrap_or(0.0)),
        Value::Array(a) => {
            let parts: Vec<String> = a.iter().map(go_sprint).collect();
            format!("[{}]", parts.join(" "))
        }
        Value::Object(o) => {
            let mut keys: Vec<&String> = o.keys().collect();
            keys.sort();
            let parts: Vec<String> = keys
                .into_iter()
                .map(|k| format!("{}:{}", k, go_sprint(&o[k])))
                .collect();
            format!("map[{}]", parts.join(" "))
        }
    }
}

/// Go's `%v` for a float64 (`strconv.FormatFloat(f, 'g', -1, 64)`): shortest round-trip
/// digits, in exponent form (`1e+06`, `1e-05`) when the decimal exponent is < -4 or >= 6.
fn go_format_g(f: f64) -> String {
    if f == 0.0 {
        return if f.is_sign_negative() {
            "-0".into()
        } else {
            "0".into()
        };
    }
    if f.is_nan() {
        return "NaN".into();
    }
    if f.is_infinite() {
        return if f > 0.0 {
            "+Inf".into()
        } else {
            "-Inf".into()
        };
    }
    // Shortest round-trip digits and decimal exponent from Rust's `{:e}`.
    let e = format!("{:e}", f);
    let (mant, exp) = e.split_once('e').unwrap_or((&e, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    if !(-4..6).contains(&exp) {
        let sign = if exp < 0 { '-' } else { '+' };
        format!("{mant}e{sign}{:02}", exp.abs())
    } else {
        format!("{f}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The first message as text (for values that are valid UTF-8).
    fn fm(raw: &str, metadata: Option<&str>) -> String {
        String::from_utf8(first_message(raw, metadata)).expect("valid UTF-8 here")
    }

    #[test]
    fn counts_role_substrings_including_nested() {
        assert_eq!(message_count(""), 0);
        assert_eq!(message_count("[]"), 0);
        let raw = r#"[{"type":"message","role":"user","content":"hi"},{"type":"function_call","call_id":"c1","name":"bash","arguments":"{}"},{"type":"message","role":"assistant","content":"ok","raw_item":{"type":"message","role":"assistant","content":[]}}]"#;
        assert_eq!(message_count(raw), 3);
        // An escaped "role" inside a string does not count.
        assert_eq!(
            message_count(r#"[{"role":"user","content":"say \"role\""}]"#),
            1
        );
    }

    #[test]
    fn anthropic_first_user_text() {
        let raw = r#"[{"content":[{"text":"ls -la","type":"text"}],"role":"user"},{"content":[{"text":"ok","type":"text"}],"role":"assistant"}]"#;
        assert_eq!(fm(raw, None), "ls -la");
        // A first user message whose first block is not text is skipped; the next one counts.
        let raw = r#"[{"content":[{"type":"image","source":{}}],"role":"user"},{"content":[{"tool_use_id":"t","content":[],"type":"tool_result"}],"role":"user"},{"content":[{"text":"second","type":"text"}],"role":"user"}]"#;
        assert_eq!(fm(raw, None), "second");
        // Assistant text never counts.
        let raw = r#"[{"content":[{"text":"hello","type":"text"}],"role":"assistant"}]"#;
        assert_eq!(fm(raw, None), "");
    }

    #[test]
    fn openai_string_content_and_bad_json_give_empty() {
        assert_eq!(
            fm(r#"[{"role":"user","content":"How many CPUs?"}]"#, None),
            ""
        );
        assert_eq!(
            fm(
                r#"[{"type":"message","role":"user","content":"Hello"}]"#,
                None
            ),
            ""
        );
        assert_eq!(fm("[", None), "");
        assert_eq!(fm("{}", None), "");
        assert_eq!(fm("[1]", None), "");
        assert_eq!(fm("[]", None), "");
        assert_eq!(fm("", None), "");
        // OpenAI multi-content with a text part first does count.
        let raw = r#"[{"role":"user","content":[{"type":"text","text":"look"},{"type":"image_url","image_url":{"url":"data:,"}}]}]"#;
        assert_eq!(fm(raw, None), "look");
        // null elements are tolerated.
        assert_eq!(
            fm(r#"[null,{"role":"user","content":[{"text":"x"}]}]"#, None),
            "x"
        );
        // A repeated key reads as Go's decode reads it (the last value), an escaped key as the
        // key it spells, and a number past f64 fails the whole decode.
        let twice = r#"[{"role":"assistant","role":"user","content":[{"text":"a","text":"b"}]}]"#;
        assert_eq!(fm(twice, None), "b");
        assert_eq!(
            fm(r#"[{"r\u006fle":"user","content":[{"text":"e"}]}]"#, None),
            "e"
        );
        assert_eq!(
            fm(
                r#"[{"role":"user","content":[{"text":"n"}],"x":1e400}]"#,
                None
            ),
            ""
        );
    }

    #[test]
    fn display_override_applied() {
        let text = "  /fix the build  ";
        let key = display_key(text);
        assert_eq!(
            key,
            format!("sha256:{}", hex::encode(Sha256::digest(b"/fix the build")))
        );
        let raw = format!(
            r#"[{{"content":[{{"text":{},"type":"text"}}],"role":"user"}}]"#,
            serde_json::to_string(text).unwrap()
        );
        let meta = format!(
            r#"{{"message_display":{{"v1":{{"{key}":{{"text":"/fix","kind":"slash-command"}}}}}}}}"#
        );
        assert_eq!(fm(&raw, Some(&meta)), "/fix");
        let legacy = format!(
            r#"{{"message_display_overrides":{{"v1":{{"{key}":{{"display":"/legacy"}}}}}}}}"#
        );
        assert_eq!(fm(&raw, Some(&legacy)), "/legacy");
        // Present but unusable current key: no fallback to the legacy one.
        let both = format!(
            r#"{{"message_display":5,"message_display_overrides":{{"v1":{{"{key}":{{"text":"/legacy"}}}}}}}}"#
        );
        assert_eq!(fm(&raw, Some(&both)), text);
        // Blank override is ignored; other key is ignored.
        let blank = format!(r#"{{"message_display":{{"v1":{{"{key}":{{"text":"  "}}}}}}}}"#);
        assert_eq!(fm(&raw, Some(&blank)), text);
        let other = r#"{"message_display":{"v1":{"sha256:00":{"text":"no"}}}}"#;
        assert_eq!(fm(&raw, Some(other)), text);
        // Non-string display values print like fmt.Sprint.
        let num = format!(r#"{{"message_display":{{"v1":{{"{key}":{{"text":1000000}}}}}}}}"#);
        assert_eq!(fm(&raw, Some(&num)), "1e+06");
        // Long overrides are truncated too.
        let long = "y".repeat(150);
        let meta = format!(r#"{{"message_display":{{"v1":{{"{key}":{{"text":"{long}"}}}}}}}}"#);
        assert_eq!(fm(&raw, Some(&meta)), format!("{}...", "y".repeat(97)));
    }

    fn anthropic_user(text: &str) -> String {
        format!(
            r#"[{{"content":[{{"text":{},"type":"text"}}],"role":"user"}}]"#,
            serde_json::to_string(text).unwrap()
        )
    }

    #[test]
    fn byte_boundary_100_101() {
        let t100 = "a".repeat(100);
        assert_eq!(fm(&anthropic_user(&t100), None), t100);
        let t101 = "a".repeat(101);
        let got = fm(&anthropic_user(&t101), None);
        assert_eq!(got, format!("{}...", "a".repeat(97)));
        assert_eq!(got.len(), 100);
        // Multi-byte: 96 ASCII bytes then "é" (2 bytes) ... byte 97 splits the "é".
        let split = format!("{}é{}", "a".repeat(96), "b".repeat(10));
        let got = first_message(&anthropic_user(&split), None);
        // Go's bytes: 96 'a', the first byte of "é" (0xC3), then "..." (invalid UTF-8).
        let mut want = "a".repeat(96).into_bytes();
        want.push(0xC3);
        want.extend_from_slice(b"...");
        assert_eq!(got, want);
        assert!(std::str::from_utf8(&got).is_err());
        // 100 bytes of 2-byte chars stay as they are.
        let fifty = "é".repeat(50);
        assert_eq!(fm(&anthropic_user(&fifty), None), fifty);
    }

    #[test]
    fn current_kodelet_takes_string_content_too() {
        let raw = r#"[{"role":"user","content":""},{"role":"user","content":"How many CPUs?"}]"#;
        assert_eq!(first_user_text(raw), None);
        assert_eq!(
            first_user_text_current(raw).as_deref(),
            Some("How many CPUs?")
        );
        let raw = r#"[{"role":"user","content":[{"type":"text","text":"arr"}]}]"#;
        assert_eq!(first_user_text_current(raw).as_deref(), Some("arr"));
    }

    #[test]
    fn go_g_format() {
        assert_eq!(go_format_g(1.0), "1");
        assert_eq!(go_format_g(123456.0), "123456");
        assert_eq!(go_format_g(1234567.0), "1.234567e+06");
        assert_eq!(go_format_g(0.0001), "0.0001");
        assert_eq!(go_format_g(0.00001), "1e-05");
        assert_eq!(go_format_g(1.5), "1.5");
    }
}

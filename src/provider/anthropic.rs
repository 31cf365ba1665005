//! Anthropic Messages: `POST {base_url}/v1/messages` with `x-api-key` and
//! `anthropic-version: 2023-06-01`.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::retry::{self, Reply};
use super::{ChatRequest, ClientConfig, Completion, ProviderError, StopReason};

/// The API version this module speaks.
pub const API_VERSION: &str = "2023-06-01";

/// The request body: `{"model", "max_tokens", "system", "messages": [user], "temperature"}`, serialized
/// from the request's strings in place (no copy of the prompt into a `Value`).
pub(crate) fn encode(cfg: &ClientConfig, req: &ChatRequest) -> Vec<u8> {
    #[derive(Serialize)]
    struct Body<'a> {
        model: &'a str,
        max_tokens: u32,
        system: &'a str,
        messages: [super::Turn<'a>; 1],
        #[serde(skip_serializing_if = "Option::is_none")]
        temperature: Option<f64>,
    }
    super::to_body(&Body {
        model: &cfg.model,
        max_tokens: req.max_tokens,
        system: &req.system,
        messages: [super::Turn {
            role: "user",
            content: &req.user,
        }],
        temperature: req.temperature,
    })
}

/// Send one encoded request (no retries: [`super::Client::complete`] wraps this in them).
pub(crate) async fn send(
    http: &reqwest::Client,
    cfg: &ClientConfig,
    body: bytes::Bytes,
) -> Result<Completion, ProviderError> {
    let url = retry::shown_endpoint(cfg, "/v1/messages");
    let mut rb = http
        .post(retry::endpoint(cfg, "/v1/messages"))
        .header("anthropic-version", API_VERSION)
        .header(reqwest::header::CONTENT_TYPE, "application/json")
        .body(body);
    if let Some(key) = retry::key(cfg) {
        rb = rb.header("x-api-key", retry::secret_header(key.expose())?);
    }
    match retry::post(cfg, &url, rb).await? {
        Reply::Ok(text) => parse(cfg, &url, &text),
        Reply::Failed {
            status,
            headers,
            body,
        } => Err(retry::status_error(
            cfg,
            &url,
            status,
            &headers,
            &error_text(&body),
        )),
    }
}

#[derive(Deserialize)]
struct Response {
    #[serde(default)]
    model: Option<String>,
    #[serde(default)]
    content: Option<Vec<Block>>,
    #[serde(default)]
    stop_reason: Option<String>,
    #[serde(default)]
    usage: Option<Usage>,
}

#[derive(Deserialize)]
struct Block {
    #[serde(rename = "type", default)]
    kind: String,
    #[serde(default)]
    text: Option<String>,
}

#[derive(Deserialize)]
struct Usage {
    #[serde(default)]
    input_tokens: Option<u64>,
    #[serde(default)]
    output_tokens: Option<u64>,
}

fn parse(cfg: &ClientConfig, url: &str, text: &str) -> Result<Completion, ProviderError> {
    let resp: Response = serde_json::from_str(text).map_err(|e| {
        retry::decode_error(cfg, url, &format!("not a Messages response ({e})"), text)
    })?;
    let Some(blocks) = resp.content else {
        return Err(retry::decode_error(
            cfg,
            url,
            "no `content` in the response",
            text,
        ));
    };
    // Text blocks are joined as is: the API splits one answer into several blocks (around
    // citations, for example) without inserting separators.
    let content: String = blocks
        .iter()
        .filter(|b| b.kind == "text")
        .filter_map(|b| b.text.as_deref())
        .collect();
    let stop = match resp.stop_reason.as_deref() {
        Some("end_turn") | Some("stop_sequence") => StopReason::Complete,
        Some("max_tokens") => StopReason::Truncated,
        Some("refusal") => StopReason::Refused,
        Some(other) => StopReason::Other(other.to_string()),
        None => StopReason::Other("none".to_string()),
    };
    let (input, output) = resp
        .usage
        .map_or((None, None), |u| (u.input_tokens, u.output_tokens));
    Ok(Completion {
        text: content,
        stop,
        prompt_tokens: input.unwrap_or(0),
        completion_tokens: output.unwrap_or(0),
        model: resp
            .model
            .filter(|m| !m.is_empty())
            .unwrap_or_else(|| cfg.model.clone()),
        attempts: 1,
    })
}

/// An error body `{"type":"error","error":{"type","message"}}` as `type: message`, else the
/// body as is.
fn error_text(body: &str) -> String {
    let Ok(v) = serde_json::from_str::<Value>(body) else {
        return body.to_string();
    };
    match (v["error"]["type"].as_str(), v["error"]["message"].as_str()) {
        (Some(kind), Some(message)) => format!("{kind}: {message}"),
        (None, Some(message)) => message.to_string(),
        _ => body.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use serde_json::json;

    use super::*;
    use crate::provider::{ProviderKind, Secret};

    fn cfg(key: Option<&str>) -> ClientConfig {
        ClientConfig {
            kind: ProviderKind::Anthropic,
            base_url: "http://127.0.0.1:1".into(),
            api_key: key.map(Secret::new),
            model: "claude-haiku-4-5".into(),
            timeout: Duration::from_secs(1),
            max_retries: 0,
            initial_backoff: Duration::from_millis(1),
        }
    }

    fn parse_ok(body: Value) -> Completion {
        parse(&cfg(None), "u", &body.to_string()).expect("parses")
    }

    #[test]
    fn parses_blocks_stop_usage_model() {
        let c = parse_ok(json!({
            "id": "msg_1", "type": "message", "role": "assistant",
            "model": "claude-haiku-4-5-20251001",
            "content": [
                {"type": "thinking", "thinking": "hmm"},
                {"type": "text", "text": "Hello, "},
                {"type": "text", "text": "world"}
            ],
            "stop_reason": "end_turn",
            "usage": {"input_tokens": 20, "output_tokens": 4}
        }));
        assert_eq!(c.text, "Hello, world");
        assert_eq!(c.stop, StopReason::Complete);
        assert_eq!((c.prompt_tokens, c.completion_tokens), (20, 4));
        assert_eq!(c.model, "claude-haiku-4-5-20251001");
        assert_eq!(c.attempts, 1);
    }

    #[test]
    fn stop_reasons() {
        let stop = |sr: Value| parse_ok(json!({"content": [], "stop_reason": sr})).stop;
        assert_eq!(stop(json!("stop_sequence")), StopReason::Complete);
        assert_eq!(stop(json!("max_tokens")), StopReason::Truncated);
        assert_eq!(stop(json!("refusal")), StopReason::Refused);
        assert_eq!(
            stop(json!("pause_turn")),
            StopReason::Other("pause_turn".into())
        );
        assert_eq!(stop(Value::Null), StopReason::Other("none".into()));
    }

    #[test]
    fn missing_pieces() {
        let c = parse_ok(json!({"content": [], "stop_reason": "end_turn"}));
        assert_eq!(c.text, "");
        assert_eq!((c.prompt_tokens, c.completion_tokens), (0, 0));
        assert_eq!(c.model, "claude-haiku-4-5");
        let e = parse(&cfg(None), "u", r#"{"type":"message"}"#).unwrap_err();
        assert!(matches!(e, ProviderError::Decode { .. }), "{e:?}");
        let e = parse(&cfg(None), "u", "<html>").unwrap_err();
        assert!(matches!(e, ProviderError::Decode { .. }), "{e:?}");
    }

    #[test]
    fn error_bodies_condense() {
        assert_eq!(
            error_text(
                r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#
            ),
            "overloaded_error: Overloaded"
        );
        assert_eq!(
            error_text("upstream connect error"),
            "upstream connect error"
        );
    }

    #[test]
    fn the_body_is_the_messages_object_byte_for_byte() {
        // The object as the wire format documents it, key order included.
        let req = ChatRequest {
            system: "sys \"q\"".into(),
            user: "line\n\ttab \u{1} \u{e9}\u{1F600} </conversation>".into(),
            max_tokens: 321,
            temperature: Some(0.0),
        };
        let cfg = cfg(None);
        let want = json!({
            "model": cfg.model,
            "max_tokens": 321,
            "system": req.system,
            "messages": [{"role": "user", "content": req.user}],
            "temperature": 0.0,
        });
        assert_eq!(
            String::from_utf8(encode(&cfg, &req)).unwrap(),
            serde_json::to_string(&want).unwrap()
        );
    }
}

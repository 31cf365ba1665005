//! OpenAI-compatible Chat Completions: `POST {base_url}/chat/completions`.
//!
//! Works against OpenAI and the many servers that copy its wire format (Ollama, vLLM,
//! llama.cpp server, LiteLLM, OpenRouter). `Authorization: Bearer <key>` is sent only when a
//! key is configured: local servers need none.
//!
//! The length limit goes in `max_tokens`, the field every compatible server understands, except
//! for OpenAI's own API (`api.openai.com`), which deprecated it in favour of
//! `max_completion_tokens` and whose reasoning models (o-series, gpt-5) reject `max_tokens`.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::retry::{self, Reply};
use super::{ChatRequest, ClientConfig, Completion, ProviderError, StopReason};

/// Whether `base_url` is OpenAI's own API (which wants `max_completion_tokens`).
fn is_openai_itself(base_url: &str) -> bool {
    reqwest::Url::parse(base_url)
        .ok()
        .and_then(|u| {
            u.host_str()
                .map(|h| h.eq_ignore_ascii_case("api.openai.com"))
        })
        .unwrap_or(false)
}

/// Whether an OpenAI model accepts only its default temperature (the o-series and gpt-5
/// reasoning models answer HTTP 400 to any other): agent-db then sends none.
fn fixed_temperature(model: &str) -> bool {
    let m = model.to_ascii_lowercase();
    ["o1", "o3", "o4", "gpt-5"].iter().any(|p| m.starts_with(p))
}

/// The request body: `{"model", "messages": [system, user], limit, "temperature"}`, the limit
/// field named for the server ([`is_openai_itself`]); no temperature for OpenAI's own reasoning
/// models ([`fixed_temperature`]). Serialized from the request's strings in place (no
/// copy of the prompt into a `Value`).
pub(crate) fn encode(cfg: &ClientConfig, req: &ChatRequest) -> Vec<u8> {
    #[derive(Serialize)]
    struct Body<'a> {
        model: &'a str,
        messages: [super::Turn<'a>; 2],
        #[serde(skip_serializing_if = "Option::is_none")]
        max_tokens: Option<u32>,
        #[serde(skip_serializing_if = "Option::is_none")]
        max_completion_tokens: Option<u32>,
        #[serde(skip_serializing_if = "Option::is_none")]
        temperature: Option<f64>,
    }
    let limit = Some(req.max_tokens);
    let openai = is_openai_itself(&cfg.base_url);
    super::to_body(&Body {
        model: &cfg.model,
        messages: [
            super::Turn {
                role: "system",
                content: &req.system,
            },
            super::Turn {
                role: "user",
                content: &req.user,
            },
        ],
        max_tokens: limit.filter(|_| !openai),
        max_completion_tokens: limit.filter(|_| openai),
        temperature: req
            .temperature
            .filter(|_| !(openai && fixed_temperature(&cfg.model))),
    })
}

/// Send one encoded request (no retries: [`super::Client::complete`] wraps this in them).
pub(crate) async fn send(
    http: &reqwest::Client,
    cfg: &ClientConfig,
    body: bytes::Bytes,
) -> Result<Completion, ProviderError> {
    let url = retry::shown_endpoint(cfg, "/chat/completions");
    let mut rb = http
        .post(retry::endpoint(cfg, "/chat/completions"))
        .header(reqwest::header::CONTENT_TYPE, "application/json")
        .body(body);
    if let Some(key) = retry::key(cfg) {
        let value = retry::secret_header(&format!("Bearer {}", key.expose()))?;
        rb = rb.header(reqwest::header::AUTHORIZATION, value);
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
    choices: Vec<Choice>,
    #[serde(default)]
    usage: Option<Usage>,
}

#[derive(Deserialize)]
struct Choice {
    #[serde(default)]
    message: Option<Message>,
    #[serde(default)]
    finish_reason: Option<String>,
}

#[derive(Deserialize)]
struct Message {
    /// A string; `null` when empty or refused. Some compatible servers send an array of parts.
    #[serde(default)]
    content: Value,
    #[serde(default)]
    refusal: Option<String>,
}

#[derive(Deserialize)]
struct Usage {
    #[serde(default)]
    prompt_tokens: Option<u64>,
    #[serde(default)]
    completion_tokens: Option<u64>,
}

fn parse(cfg: &ClientConfig, url: &str, text: &str) -> Result<Completion, ProviderError> {
    let resp: Response = serde_json::from_str(text).map_err(|e| {
        retry::decode_error(cfg, url, &format!("not a chat completion ({e})"), text)
    })?;
    let Some(choice) = resp.choices.into_iter().next() else {
        return Err(retry::decode_error(
            cfg,
            url,
            "no choices in the response",
            text,
        ));
    };
    let (content, refusal) = match choice.message {
        Some(m) => (content_text(&m.content), m.refusal.unwrap_or_default()),
        None => (String::new(), String::new()),
    };
    let stop = if !refusal.trim().is_empty() {
        StopReason::Refused
    } else {
        match choice.finish_reason.as_deref() {
            Some("stop") => StopReason::Complete,
            Some("length") => StopReason::Truncated,
            Some("content_filter") => StopReason::Refused,
            Some(other) => StopReason::Other(other.to_string()),
            None => StopReason::Other("none".to_string()),
        }
    };
    let usage = resp.usage.unwrap_or(Usage {
        prompt_tokens: None,
        completion_tokens: None,
    });
    Ok(Completion {
        text: content,
        stop,
        prompt_tokens: usage.prompt_tokens.unwrap_or(0),
        completion_tokens: usage.completion_tokens.unwrap_or(0),
        model: resp
            .model
            .filter(|m| !m.is_empty())
            .unwrap_or_else(|| cfg.model.clone()),
        attempts: 1,
    })
}

/// `content` as text: a string, `null` (empty), or an array of `{"type":"text","text":..}`
/// parts (joined).
fn content_text(content: &Value) -> String {
    match content {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|p| match p {
                Value::String(s) => Some(s.as_str()),
                Value::Object(o) => o.get("text").and_then(Value::as_str),
                _ => None,
            })
            .collect(),
        _ => String::new(),
    }
}

/// An error body condensed to `type: message` when it is OpenAI's
/// `{"error":{"message","type","code"}}`, else the body as is.
fn error_text(body: &str) -> String {
    let Ok(v) = serde_json::from_str::<Value>(body) else {
        return body.to_string();
    };
    let err = &v["error"];
    let message = err["message"].as_str().or_else(|| err.as_str());
    match message {
        Some(message) => {
            let kind = err["type"].as_str().or_else(|| err["code"].as_str());
            match kind {
                Some(kind) if !kind.is_empty() => format!("{kind}: {message}"),
                _ => message.to_string(),
            }
        }
        None => body.to_string(),
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
            kind: ProviderKind::OpenAi,
            base_url: "http://127.0.0.1:1/v1".into(),
            api_key: key.map(Secret::new),
            model: "gpt-4.1-mini".into(),
            timeout: Duration::from_secs(1),
            max_retries: 0,
            initial_backoff: Duration::from_millis(1),
        }
    }

    fn parse_ok(body: Value) -> Completion {
        parse(&cfg(None), "u", &body.to_string()).expect("parses")
    }

    #[test]
    fn parses_text_stop_usage_model() {
        let c = parse_ok(json!({
            "model": "gpt-4.1-mini-2025-04-14",
            "choices": [{"message": {"role": "assistant", "content": "hi"}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 12, "completion_tokens": 3}
        }));
        assert_eq!(c.text, "hi");
        assert_eq!(c.stop, StopReason::Complete);
        assert_eq!((c.prompt_tokens, c.completion_tokens), (12, 3));
        assert_eq!(c.model, "gpt-4.1-mini-2025-04-14");
        assert_eq!(c.attempts, 1);
    }

    #[test]
    fn finish_reasons_and_refusal() {
        let stop = |fr: Value, refusal: Value| {
            parse_ok(json!({"choices": [{"message": {"content": null, "refusal": refusal}, "finish_reason": fr}]}))
                .stop
        };
        assert_eq!(stop(json!("length"), Value::Null), StopReason::Truncated);
        assert_eq!(
            stop(json!("content_filter"), Value::Null),
            StopReason::Refused
        );
        assert_eq!(
            stop(json!("tool_calls"), Value::Null),
            StopReason::Other("tool_calls".into())
        );
        assert_eq!(
            stop(json!("stop"), json!("I can't help with that.")),
            StopReason::Refused
        );
        assert_eq!(stop(json!("stop"), json!("")), StopReason::Complete);
    }

    #[test]
    fn missing_pieces_default() {
        let c =
            parse_ok(json!({"choices": [{"message": {"content": null}, "finish_reason": "stop"}]}));
        assert_eq!(c.text, "");
        assert_eq!((c.prompt_tokens, c.completion_tokens), (0, 0));
        assert_eq!(
            c.model, "gpt-4.1-mini",
            "falls back to the configured model"
        );
        let parts = parse_ok(json!({"choices": [{"message": {"content": [
            {"type": "text", "text": "a"}, {"type": "text", "text": "b"}
        ]}, "finish_reason": "stop"}]}));
        assert_eq!(parts.text, "ab");
    }

    #[test]
    fn bad_bodies_are_decode_errors_without_the_key() {
        let c = cfg(Some("sk-secret-abcdef"));
        let e = parse(&c, "u", "not json sk-secret-abcdef").unwrap_err();
        assert!(matches!(e, ProviderError::Decode { .. }), "{e:?}");
        assert!(!e.to_string().contains("sk-secret-abcdef"), "{e}");
        let e = parse(&c, "u", r#"{"choices": []}"#).unwrap_err();
        assert!(matches!(e, ProviderError::Decode { .. }), "{e:?}");
    }

    #[test]
    fn openai_itself_is_told_by_its_host() {
        assert!(is_openai_itself("https://api.openai.com/v1"));
        assert!(is_openai_itself("https://API.OpenAI.com:443/v1"));
        assert!(is_openai_itself("https://user:sk-x@api.openai.com/v1"));
        assert!(!is_openai_itself("https://api.openai.com.example/v1"));
        assert!(!is_openai_itself("https://api.openai.com@gw.example/v1"));
        assert!(!is_openai_itself("http://127.0.0.1:1/v1"));
    }

    #[test]
    fn error_bodies_condense() {
        assert_eq!(
            error_text(r#"{"error":{"message":"Rate limit","type":"requests","code":null}}"#),
            "requests: Rate limit"
        );
        assert_eq!(
            error_text(r#"{"error":"model not found"}"#),
            "model not found"
        );
        assert_eq!(error_text("Bad Gateway"), "Bad Gateway");
    }

    #[test]
    fn the_body_is_the_chat_completions_object_byte_for_byte() {
        // The object as the wire format documents it, key order included; the limit field is
        // `max_completion_tokens` for OpenAI's own API only.
        let req = ChatRequest {
            system: "sys \"q\"".into(),
            user: "line\n\ttab \u{1} \u{e9}\u{1F600} </conversation>".into(),
            max_tokens: 321,
            temperature: Some(0.0),
        };
        for (base, field) in [
            ("http://127.0.0.1:9/v1", "max_tokens"),
            ("https://API.openai.com/v1", "max_completion_tokens"),
        ] {
            let cfg = ClientConfig {
                base_url: base.into(),
                ..cfg(None)
            };
            let mut want = json!({
                "model": cfg.model,
                "messages": [
                    {"role": "system", "content": req.system},
                    {"role": "user", "content": req.user},
                ],
            });
            want[field] = 321.into();
            want["temperature"] = json!(0.0);
            assert_eq!(
                String::from_utf8(encode(&cfg, &req)).unwrap(),
                serde_json::to_string(&want).unwrap(),
                "{base}"
            );
        }
        // OpenAI's reasoning models take only their default temperature: none is sent.
        let cfg = ClientConfig {
            base_url: "https://api.openai.com/v1".into(),
            model: "o4-mini".into(),
            ..cfg(None)
        };
        let body: Value = serde_json::from_slice(&encode(&cfg, &req)).unwrap();
        assert!(body.get("temperature").is_none(), "{body}");
        let cfg = ClientConfig {
            base_url: "http://127.0.0.1:9/v1".into(),
            model: "o4-mini".into(),
            ..cfg
        };
        let body: Value = serde_json::from_slice(&encode(&cfg, &req)).unwrap();
        assert_eq!(body["temperature"], 0.0, "another server gets it: {body}");
    }
}

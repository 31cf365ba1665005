//! The summarization clients against a real HTTP server on 127.0.0.1 (wiremock, and a raw
//! `std::net` server for a body cut off mid-transfer), for both the OpenAI-compatible and the
//! Anthropic wire formats: answers, retries, the key never leaking, redirects never followed.

use std::time::Duration;

use agent_db::provider::{
    ChatRequest, Client, ClientConfig, Completion, ProviderError, ProviderKind, Secret, StopReason,
};
use serde_json::{json, Value};
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

const KEY: &str = "sk-test-LEAKCHECK-123456";

fn config(kind: ProviderKind, server: &MockServer, key: Option<&str>) -> ClientConfig {
    let base_url = match kind {
        ProviderKind::OpenAi => format!("{}/v1", server.uri()),
        ProviderKind::Anthropic => server.uri(),
    };
    ClientConfig {
        kind,
        base_url,
        api_key: key.map(Secret::new),
        model: match kind {
            ProviderKind::OpenAi => "gpt-4.1-mini".into(),
            ProviderKind::Anthropic => "claude-haiku-4-5".into(),
        },
        timeout: Duration::from_secs(10),
        max_retries: 2,
        initial_backoff: Duration::from_millis(10),
    }
}

fn client(cfg: ClientConfig) -> Client {
    Client::new(cfg).expect("client builds")
}

fn request() -> ChatRequest {
    ChatRequest {
        system: "You summarize coding sessions.".into(),
        user: "Summarize: the user fixed the flaky test.".into(),
        max_tokens: 321,
        temperature: Some(0.0),
    }
}

fn endpoint(kind: ProviderKind) -> &'static str {
    match kind {
        ProviderKind::OpenAi => "/v1/chat/completions",
        ProviderKind::Anthropic => "/v1/messages",
    }
}

/// A successful answer in `kind`'s format; `stop` is the wire value.
fn answer(kind: ProviderKind, text: Value, stop: &str) -> Value {
    match kind {
        ProviderKind::OpenAi => json!({
            "id": "chatcmpl-1",
            "object": "chat.completion",
            "model": "gpt-4.1-mini-2025-04-14",
            "choices": [{
                "index": 0,
                "message": {"role": "assistant", "content": text, "refusal": null},
                "finish_reason": stop
            }],
            "usage": {"prompt_tokens": 42, "completion_tokens": 7, "total_tokens": 49}
        }),
        ProviderKind::Anthropic => {
            let content = match text {
                Value::Null => json!([]),
                t => json!([{"type": "text", "text": t}]),
            };
            json!({
                "id": "msg_1",
                "type": "message",
                "role": "assistant",
                "model": "claude-haiku-4-5-20251001",
                "content": content,
                "stop_reason": stop,
                "stop_sequence": null,
                "usage": {"input_tokens": 42, "output_tokens": 7}
            })
        }
    }
}

fn complete_stop(kind: ProviderKind) -> &'static str {
    match kind {
        ProviderKind::OpenAi => "stop",
        ProviderKind::Anthropic => "end_turn",
    }
}

fn truncated_stop(kind: ProviderKind) -> &'static str {
    match kind {
        ProviderKind::OpenAi => "length",
        ProviderKind::Anthropic => "max_tokens",
    }
}

async fn mount(server: &MockServer, kind: ProviderKind, response: ResponseTemplate) {
    Mock::given(method("POST"))
        .and(path(endpoint(kind)))
        .respond_with(response)
        .mount(server)
        .await;
}

async fn complete_once(kind: ProviderKind, body: Value) -> Completion {
    let server = MockServer::start().await;
    mount(
        &server,
        kind,
        ResponseTemplate::new(200).set_body_json(body),
    )
    .await;
    client(config(kind, &server, Some(KEY)))
        .complete(&request())
        .await
        .expect("completes")
}

const KINDS: [ProviderKind; 2] = [ProviderKind::OpenAi, ProviderKind::Anthropic];

#[tokio::test]
async fn request_shape_and_response_parsing() {
    for kind in KINDS {
        let server = MockServer::start().await;
        mount(
            &server,
            kind,
            ResponseTemplate::new(200).set_body_json(answer(
                kind,
                json!("The test is fixed."),
                complete_stop(kind),
            )),
        )
        .await;
        let completion = client(config(kind, &server, Some(KEY)))
            .complete(&request())
            .await
            .expect("completes");

        let received = server.received_requests().await.expect("recording is on");
        assert_eq!(received.len(), 1, "{kind:?}");
        let req = &received[0];
        assert_eq!(req.method.as_str(), "POST");
        assert_eq!(req.url.path(), endpoint(kind));
        let header = |name: &str| {
            req.headers
                .get(name)
                .map(|v| v.to_str().unwrap().to_string())
        };
        assert_eq!(header("content-type").as_deref(), Some("application/json"));
        let body: Value = req.body_json().expect("JSON body");
        assert_eq!(body["max_tokens"], 321, "{kind:?}: {body}");
        assert_eq!(body["temperature"], 0.0, "{kind:?}: {body}");
        match kind {
            ProviderKind::OpenAi => {
                assert_eq!(header("authorization"), Some(format!("Bearer {KEY}")));
                assert_eq!(header("x-api-key"), None);
                assert_eq!(body["model"], "gpt-4.1-mini");
                assert_eq!(
                    body["messages"],
                    json!([
                        {"role": "system", "content": "You summarize coding sessions."},
                        {"role": "user", "content": "Summarize: the user fixed the flaky test."}
                    ])
                );
            }
            ProviderKind::Anthropic => {
                assert_eq!(header("x-api-key").as_deref(), Some(KEY));
                assert_eq!(header("anthropic-version").as_deref(), Some("2023-06-01"));
                assert_eq!(header("authorization"), None);
                assert_eq!(body["model"], "claude-haiku-4-5");
                assert_eq!(body["system"], "You summarize coding sessions.");
                assert_eq!(
                    body["messages"],
                    json!([{"role": "user", "content": "Summarize: the user fixed the flaky test."}])
                );
            }
        }

        assert_eq!(completion.text, "The test is fixed.");
        assert_eq!(completion.stop, StopReason::Complete);
        assert_eq!(
            (completion.prompt_tokens, completion.completion_tokens),
            (42, 7)
        );
        let served = match kind {
            ProviderKind::OpenAi => "gpt-4.1-mini-2025-04-14",
            ProviderKind::Anthropic => "claude-haiku-4-5-20251001",
        };
        assert_eq!(completion.model, served);
        assert_eq!(completion.attempts, 1);
    }
}

#[tokio::test]
async fn no_key_sends_no_credentials() {
    for kind in KINDS {
        let server = MockServer::start().await;
        mount(
            &server,
            kind,
            ResponseTemplate::new(200).set_body_json(answer(
                kind,
                json!("ok"),
                complete_stop(kind),
            )),
        )
        .await;
        let completion = client(config(kind, &server, None))
            .complete(&request())
            .await
            .expect("completes");
        assert_eq!(completion.text, "ok");
        let received = server.received_requests().await.unwrap();
        assert_eq!(received.len(), 1);
        assert!(
            received[0].headers.get("authorization").is_none(),
            "{kind:?}"
        );
        assert!(received[0].headers.get("x-api-key").is_none(), "{kind:?}");
    }
}

#[tokio::test]
async fn rate_limit_then_success_takes_two_attempts() {
    for kind in KINDS {
        let server = MockServer::start().await;
        Mock::given(method("POST"))
            .and(path(endpoint(kind)))
            .respond_with(
                ResponseTemplate::new(429)
                    .insert_header("retry-after", "1")
                    .set_body_json(json!({"type": "error", "error": {"type": "rate_limit_error", "message": "slow down"}})),
            )
            .up_to_n_times(1)
            .with_priority(1)
            .mount(&server)
            .await;
        mount(
            &server,
            kind,
            ResponseTemplate::new(200).set_body_json(answer(
                kind,
                json!("ok"),
                complete_stop(kind),
            )),
        )
        .await;
        let completion = client(config(kind, &server, Some(KEY)))
            .complete(&request())
            .await
            .expect("completes after one retry");
        assert_eq!(
            server.received_requests().await.unwrap().len(),
            2,
            "{kind:?}"
        );
        assert_eq!(completion.attempts, 2, "{kind:?}");
        assert_eq!(completion.text, "ok");
    }
}

#[tokio::test]
async fn repeated_server_errors_give_up_after_max_retries() {
    for kind in KINDS {
        let server = MockServer::start().await;
        mount(
            &server,
            kind,
            ResponseTemplate::new(500).set_body_string("internal error"),
        )
        .await;
        let err = client(config(kind, &server, Some(KEY)))
            .complete(&request())
            .await
            .expect_err("keeps failing");
        assert_eq!(
            server.received_requests().await.unwrap().len(),
            1 + 2,
            "{kind:?}"
        );
        match &err {
            ProviderError::Status {
                status, body, url, ..
            } => {
                assert_eq!(*status, 500);
                assert_eq!(body, "internal error");
                assert!(url.ends_with(endpoint(kind)), "{url}");
            }
            other => panic!("{kind:?}: {other:?}"),
        }
    }
}

#[tokio::test]
async fn client_errors_are_not_retried() {
    for kind in KINDS {
        let server = MockServer::start().await;
        mount(
            &server,
            kind,
            ResponseTemplate::new(400).set_body_json(json!({
                "type": "error",
                "error": {"type": "invalid_request_error", "message": "max_tokens: too large"}
            })),
        )
        .await;
        let err = client(config(kind, &server, Some(KEY)))
            .complete(&request())
            .await
            .expect_err("400");
        assert_eq!(
            server.received_requests().await.unwrap().len(),
            1,
            "{kind:?}"
        );
        let text = err.to_string();
        assert!(text.contains("HTTP 400"), "{text}");
        assert!(
            text.contains("invalid_request_error: max_tokens: too large"),
            "{text}"
        );
    }
}

#[tokio::test]
async fn slow_server_times_out() {
    for kind in KINDS {
        let server = MockServer::start().await;
        mount(
            &server,
            kind,
            ResponseTemplate::new(200)
                .set_body_json(answer(kind, json!("late"), complete_stop(kind)))
                .set_delay(Duration::from_secs(2)),
        )
        .await;
        let mut cfg = config(kind, &server, Some(KEY));
        cfg.timeout = Duration::from_millis(200);
        cfg.max_retries = 0;
        let err = client(cfg)
            .complete(&request())
            .await
            .expect_err("times out");
        assert!(
            matches!(err, ProviderError::Timeout { after, .. } if after == Duration::from_millis(200)),
            "{kind:?}: {err:?}"
        );
    }
}

#[tokio::test]
async fn unreachable_server_is_a_connect_error_that_is_not_retried() {
    for kind in KINDS {
        // Bind then drop a listener: the port is (almost certainly) closed afterwards.
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let cfg = ClientConfig {
            base_url: format!("http://127.0.0.1:{port}"),
            max_retries: 1,
            ..config(kind, &MockServer::start().await, Some(KEY))
        };
        let err = client(cfg).complete(&request()).await.expect_err("refused");
        assert!(
            matches!(err, ProviderError::Unreachable { .. }),
            "{kind:?}: {err:?}"
        );
        // A connection that cannot be made is not retried: the next attempt cannot succeed.
        assert!(!err.retryable(), "{kind:?}");
        assert!(
            err.to_string().contains(&format!("127.0.0.1:{port}")),
            "{err}"
        );
    }
}

#[tokio::test]
async fn empty_content_parses_to_empty_text() {
    for kind in KINDS {
        let c = complete_once(kind, answer(kind, Value::Null, complete_stop(kind))).await;
        assert_eq!(c.text, "", "{kind:?}");
        assert_eq!(c.stop, StopReason::Complete);
        let c = complete_once(kind, answer(kind, json!(""), complete_stop(kind))).await;
        assert_eq!(c.text, "", "{kind:?}");
    }
}

#[tokio::test]
async fn length_limit_is_truncated() {
    for kind in KINDS {
        let c = complete_once(
            kind,
            answer(kind, json!("The user fixed"), truncated_stop(kind)),
        )
        .await;
        assert_eq!(c.stop, StopReason::Truncated, "{kind:?}");
        assert_eq!(c.text, "The user fixed");
    }
}

#[tokio::test]
async fn refusals_are_refused() {
    let openai = ProviderKind::OpenAi;
    let c = complete_once(openai, answer(openai, Value::Null, "content_filter")).await;
    assert_eq!(c.stop, StopReason::Refused);
    let mut body = answer(openai, Value::Null, "stop");
    body["choices"][0]["message"]["refusal"] = json!("I can't help with that.");
    let c = complete_once(openai, body).await;
    assert_eq!(c.stop, StopReason::Refused);
    assert_eq!(c.text, "");

    let anthropic = ProviderKind::Anthropic;
    let c = complete_once(anthropic, answer(anthropic, Value::Null, "refusal")).await;
    assert_eq!(c.stop, StopReason::Refused);
}

#[tokio::test]
async fn malformed_success_body_is_a_decode_error() {
    for kind in KINDS {
        let server = MockServer::start().await;
        mount(
            &server,
            kind,
            ResponseTemplate::new(200).set_body_string("<html>gateway</html>"),
        )
        .await;
        let err = client(config(kind, &server, Some(KEY)))
            .complete(&request())
            .await
            .expect_err("not JSON");
        assert!(
            matches!(err, ProviderError::Decode { .. }),
            "{kind:?}: {err:?}"
        );
        assert_eq!(
            server.received_requests().await.unwrap().len(),
            1,
            "decode errors are not retried"
        );
    }
}

/// Answers 401 with a body quoting the credentials it received, like a careless proxy.
struct EchoCredentials;

impl Respond for EchoCredentials {
    fn respond(&self, req: &Request) -> ResponseTemplate {
        let header = |name: &str| {
            req.headers
                .get(name)
                .and_then(|v| v.to_str().ok())
                .unwrap_or("")
                .to_string()
        };
        let seen = format!(
            "authorization={} x-api-key={}",
            header("authorization"),
            header("x-api-key")
        );
        ResponseTemplate::new(401)
            .set_body_json(json!({
                "type": "error",
                "error": {"type": "authentication_error", "message": format!("invalid key; got {seen}")}
            }))
            .insert_header("x-echo", seen.as_str())
    }
}

#[tokio::test]
async fn the_key_never_leaks() {
    for kind in KINDS {
        let server = MockServer::start().await;
        Mock::given(method("POST"))
            .and(path(endpoint(kind)))
            .respond_with(EchoCredentials)
            .mount(&server)
            .await;
        let client = client(config(kind, &server, Some(KEY)));
        assert!(
            !format!("{client:?}").contains(KEY),
            "{kind:?}: Debug of the client"
        );
        assert!(!format!("{:?}", client.config).contains(KEY));

        let err = client.complete(&request()).await.expect_err("401");
        let display = err.to_string();
        assert!(display.contains("HTTP 401"), "{display}");
        assert!(
            display.contains("[redacted]"),
            "the echoed key was there and is replaced: {display}"
        );
        assert!(!display.contains(KEY), "{kind:?}: {display}");
        assert!(!format!("{err:?}").contains(KEY), "{kind:?}: {err:?}");
        assert!(!display.contains("LEAKCHECK"), "{display}");
    }
}

#[tokio::test]
async fn a_key_in_the_base_url_is_scrubbed_too() {
    // Some gateways take the key as a query parameter; errors quote the URL.
    let server = MockServer::start().await;
    mount(&server, ProviderKind::OpenAi, ResponseTemplate::new(404)).await;
    let mut cfg = config(ProviderKind::OpenAi, &server, Some(KEY));
    cfg.base_url = format!("{}/{KEY}/v1", server.uri());
    cfg.max_retries = 0;
    let err = client(cfg).complete(&request()).await.expect_err("404");
    assert!(!err.to_string().contains(KEY), "{err}");
    assert!(!format!("{err:?}").contains(KEY), "{err:?}");
}

// ---------------------------------------------------------------------------------------------
// Redirects: the key never goes to another origin.

/// Every header value of every request `server` received, as `name: value` lines.
async fn received_headers(server: &MockServer) -> Vec<String> {
    server
        .received_requests()
        .await
        .unwrap()
        .iter()
        .flat_map(|r| {
            r.headers
                .iter()
                .map(|(k, v)| format!("{k}: {}", String::from_utf8_lossy(v.as_bytes())))
                .collect::<Vec<_>>()
        })
        .collect()
}

#[tokio::test]
async fn redirects_are_not_followed_and_the_key_stays_home() {
    for kind in KINDS {
        for status in [301, 302, 303, 307, 308] {
            // B, on another port, would answer happily and records whatever reaches it.
            let b = MockServer::start().await;
            mount(
                &b,
                kind,
                ResponseTemplate::new(200).set_body_json(answer(
                    kind,
                    json!("from B"),
                    complete_stop(kind),
                )),
            )
            .await;
            let a = MockServer::start().await;
            let location = format!("{}{}?leak=1", b.uri(), endpoint(kind));
            mount(
                &a,
                kind,
                ResponseTemplate::new(status).insert_header("location", location.as_str()),
            )
            .await;
            let err = client(config(kind, &a, Some(KEY)))
                .complete(&request())
                .await
                .expect_err("a redirect is an error");
            let what = format!("{kind:?} {status}");
            assert!(
                b.received_requests().await.unwrap().is_empty(),
                "{what}: B received a request"
            );
            assert!(
                !received_headers(&b).await.iter().any(|h| h.contains(KEY)),
                "{what}: the key reached B"
            );
            // A got exactly the one request (a redirect is not retried).
            assert_eq!(a.received_requests().await.unwrap().len(), 1, "{what}");
            match &err {
                ProviderError::Redirect {
                    status: s,
                    location,
                    ..
                } => {
                    assert_eq!(*s, status, "{what}");
                    assert_eq!(location, &b.uri(), "{what}: B's origin, no path or query");
                }
                other => panic!("{what}: {other:?}"),
            }
            let display = err.to_string();
            assert!(
                display.contains(&format!("HTTP {status} from {}", a.uri()))
                    && display.contains(&format!("redirect to {} not followed", b.uri())),
                "{what}: {display}"
            );
            assert!(
                !display.contains(KEY) && !display.contains("leak=1"),
                "{display}"
            );
            assert!(!format!("{err:?}").contains(KEY), "{what}");
        }
    }
}

#[tokio::test]
async fn a_relative_or_missing_location_is_named_too() {
    let kind = ProviderKind::Anthropic;
    let server = MockServer::start().await;
    mount(
        &server,
        kind,
        ResponseTemplate::new(307).insert_header("location", "/elsewhere?x=1"),
    )
    .await;
    let err = client(config(kind, &server, Some(KEY)))
        .complete(&request())
        .await
        .expect_err("redirect");
    assert!(
        err.to_string()
            .contains(&format!("redirect to {} not followed", server.uri())),
        "{err}"
    );
    assert_eq!(server.received_requests().await.unwrap().len(), 1);

    let server = MockServer::start().await;
    mount(&server, kind, ResponseTemplate::new(302)).await;
    let err = client(config(kind, &server, Some(KEY)))
        .complete(&request())
        .await
        .expect_err("redirect");
    assert!(
        err.to_string().contains("nowhere (no Location header)"),
        "{err}"
    );
}

// ---------------------------------------------------------------------------------------------
// A body cut off mid-transfer is retried.

/// A raw HTTP/1.1 server on 127.0.0.1 (std only): one request per connection. On the first
/// connection it promises `Content-Length: 1000`, sends 10 bytes and closes; on the later ones
/// it sends `body` in full. Returns the base URL and the count of requests it read.
fn cut_then_whole(body: String) -> (String, std::sync::Arc<std::sync::atomic::AtomicUsize>) {
    use std::io::{BufRead, BufReader, Read, Write};
    use std::sync::atomic::{AtomicUsize, Ordering};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1");
    let base = format!("http://{}", listener.local_addr().unwrap());
    let count = std::sync::Arc::new(AtomicUsize::new(0));
    let seen = count.clone();
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(mut conn) = conn else { return };
            // Read the whole request (headers, then Content-Length bytes) before answering.
            let mut reader = BufReader::new(conn.try_clone().unwrap());
            let mut length = 0usize;
            loop {
                let mut line = String::new();
                if reader.read_line(&mut line).unwrap_or(0) == 0 {
                    break;
                }
                let line = line.trim_end();
                if line.is_empty() {
                    break;
                }
                if let Some((k, v)) = line.split_once(':') {
                    if k.eq_ignore_ascii_case("content-length") {
                        length = v.trim().parse().unwrap_or(0);
                    }
                }
            }
            let mut request_body = vec![0u8; length];
            let _ = reader.read_exact(&mut request_body);
            let n = seen.fetch_add(1, Ordering::SeqCst);
            let reply = if n == 0 {
                format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 1000\r\n\r\n{}",
                    &body[..10]
                )
            } else {
                format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                )
            };
            let _ = conn.write_all(reply.as_bytes());
            let _ = conn.flush();
            // Dropping the stream closes the connection.
        }
    });
    (base, count)
}

#[tokio::test]
async fn a_body_cut_off_mid_transfer_is_retried() {
    for kind in KINDS {
        let body = answer(kind, json!("whole at last"), complete_stop(kind)).to_string();
        assert!(body.len() < 1000);
        let (base, count) = cut_then_whole(body);
        let cfg = ClientConfig {
            base_url: match kind {
                ProviderKind::OpenAi => format!("{base}/v1"),
                ProviderKind::Anthropic => base.clone(),
            },
            ..config(kind, &MockServer::start().await, Some(KEY))
        };
        let completion = client(cfg)
            .complete(&request())
            .await
            .unwrap_or_else(|e| panic!("{kind:?}: succeeds after a retry: {e}"));
        assert_eq!(completion.text, "whole at last", "{kind:?}");
        assert_eq!(completion.attempts, 2, "{kind:?}");
        assert_eq!(
            count.load(std::sync::atomic::Ordering::SeqCst),
            2,
            "{kind:?}: the server saw 2 requests"
        );
    }
}

#[tokio::test]
async fn a_body_cut_off_every_time_fails_as_cut_after_the_retries() {
    let kind = ProviderKind::OpenAi;
    // Only the first connection is cut; with no retries the cut is the final error.
    let (base, count) = cut_then_whole(answer(kind, json!("x"), "stop").to_string());
    let cfg = ClientConfig {
        base_url: format!("{base}/v1"),
        max_retries: 0,
        ..config(kind, &MockServer::start().await, Some(KEY))
    };
    let err = client(cfg).complete(&request()).await.expect_err("cut");
    assert!(matches!(err, ProviderError::Cut { .. }), "{err:?}");
    assert!(err.retryable());
    assert!(
        err.to_string().starts_with(&format!(
            "the response from {base}/v1/chat/completions was cut off: "
        )),
        "{err}"
    );
    assert_eq!(count.load(std::sync::atomic::Ordering::SeqCst), 1);
}

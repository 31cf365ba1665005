//! A real OpenAI-compatible Chat Completions server on 127.0.0.1 that answers every request
//! **streamed** (server-sent events, as opencode's `@ai-sdk/openai-compatible` provider asks for
//! with `"stream": true`), deterministically, and records every request body.
//!
//! std threads only (no runtime), one connection per request (`connection: close`, the body
//! ends when the socket closes). Replies:
//!
//! - a request whose system prompt asks for a title: a fixed title;
//! - a request whose system prompt asks for a summary (opencode's own compaction):
//!   [`OPENCODE_SUMMARY`];
//! - a request whose last message is a user message holding `READ:<absolute path>`: one `read`
//!   tool call for that path (`finish_reason: tool_calls`);
//! - anything else: a short text that carries the marker words (`MK…`) of the last user message
//!   with `ACK` appended (`MKE1` → `MKE1ACK`), or says it read the file when the last message is
//!   a tool result.
//!
//! Every answer ends with a `usage` chunk (`prompt_tokens` derived from the request size) and
//! `data: [DONE]`. `GET …/models` lists the one model.

#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};

use serde_json::{json, Value};

/// The summary this server writes when opencode compacts a session itself.
pub const OPENCODE_SUMMARY: &str = "## Goal\nFinish the MKSUMMARY task.\n\n## Progress\nThe \
     earlier turns were read and acknowledged.\n\n## Next steps\nContinue with the next turn.";

/// One recorded request: the path, the parsed JSON body, and the text the server answered
/// (empty for a tool call).
#[derive(Clone, Debug)]
pub struct Recorded {
    pub path: String,
    pub body: Value,
    pub answer: String,
}

pub struct ChatServer {
    pub port: u16,
    log: Arc<Mutex<Vec<Recorded>>>,
}

impl ChatServer {
    pub fn start() -> ChatServer {
        let l = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1");
        let port = l.local_addr().expect("local addr").port();
        let log = Arc::new(Mutex::new(Vec::new()));
        let shared = log.clone();
        std::thread::spawn(move || {
            for s in l.incoming().flatten() {
                let log = shared.clone();
                std::thread::spawn(move || serve(s, &log));
            }
        });
        ChatServer { port, log }
    }

    /// The base URL with `/v1`, as an OpenAI-compatible provider takes it.
    pub fn base_url(&self) -> String {
        format!("http://127.0.0.1:{}/v1", self.port)
    }

    /// Every request so far, in arrival order.
    pub fn requests(&self) -> Vec<Recorded> {
        self.log.lock().expect("log").clone()
    }

    pub fn count(&self) -> usize {
        self.log.lock().expect("log").len()
    }
}

fn serve(s: TcpStream, log: &Mutex<Vec<Recorded>>) {
    let mut r = BufReader::new(s.try_clone().expect("clone stream"));
    let mut first = String::new();
    if r.read_line(&mut first).unwrap_or(0) == 0 {
        return;
    }
    let mut parts = first.split_whitespace();
    let method = parts.next().unwrap_or("").to_string();
    let path = parts.next().unwrap_or("").to_string();
    let mut len = 0usize;
    let mut chunked = false;
    loop {
        let mut line = String::new();
        if r.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        let l = line.trim_end().to_ascii_lowercase();
        if l.is_empty() {
            break;
        }
        if let Some(v) = l.strip_prefix("content-length:") {
            len = v.trim().parse().unwrap_or(0);
        }
        if l.starts_with("transfer-encoding:") && l.contains("chunked") {
            chunked = true;
        }
    }
    let body = if chunked {
        read_chunked(&mut r)
    } else {
        let mut b = vec![0; len];
        if r.read_exact(&mut b).is_err() {
            return;
        }
        b
    };
    let mut s = s;
    if method == "GET" {
        let answer =
            json!({"object": "list", "data": [{"id": "m1", "object": "model"}]}).to_string();
        let _ = write!(
            s,
            "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{answer}",
            answer.len()
        );
        return;
    }
    let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let (n, events) = {
        let mut g = log.lock().expect("log");
        let n = g.len() + 1;
        let (events, text) = answer(&body, n);
        g.push(Recorded {
            path: path.clone(),
            body: body.clone(),
            answer: text,
        });
        (n, events)
    };
    let _ = n;
    let mut out = String::from(
        "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\nconnection: close\r\n\r\n",
    );
    for e in events {
        out.push_str("data: ");
        out.push_str(&e);
        out.push_str("\n\n");
    }
    let _ = s.write_all(out.as_bytes());
    let _ = s.flush();
    let _ = s.shutdown(std::net::Shutdown::Both);
}

fn read_chunked(r: &mut BufReader<TcpStream>) -> Vec<u8> {
    let mut body = Vec::new();
    loop {
        let mut size = String::new();
        if r.read_line(&mut size).unwrap_or(0) == 0 {
            return body;
        }
        let n =
            usize::from_str_radix(size.trim().split(';').next().unwrap_or("0"), 16).unwrap_or(0);
        let mut chunk = vec![0; n + 2];
        if r.read_exact(&mut chunk).is_err() {
            return body;
        }
        if n == 0 {
            return body;
        }
        body.extend_from_slice(&chunk[..n]);
    }
}

/// The text of a message's `content` (a string, or the text of its parts).
pub fn content_text(m: &Value) -> String {
    match &m["content"] {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|p| p["text"].as_str())
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

/// The marker words (`MK` followed by letters or digits) of a text, in order.
pub fn markers(text: &str) -> Vec<String> {
    text.split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|w| w.len() > 2 && w.starts_with("MK"))
        .map(str::to_string)
        .collect()
}

/// The streamed events (each a `data:` payload) answering `body`, and the text they stream.
fn answer(body: &Value, n: usize) -> (Vec<String>, String) {
    let msgs = body["messages"].as_array().cloned().unwrap_or_default();
    let system: String = msgs
        .iter()
        .filter(|m| m["role"] == "system")
        .map(content_text)
        .collect::<Vec<_>>()
        .join("\n");
    let last = msgs.last().cloned().unwrap_or(Value::Null);
    let last_text = content_text(&last);
    let base = json!({"id": format!("chatcmpl-{n}"), "object": "chat.completion.chunk",
        "created": 1_700_000_000, "model": body["model"].clone()});
    let chunk = |choices: Value| {
        let mut c = base.clone();
        c["choices"] = choices;
        c.to_string()
    };
    let prompt_tokens = (body.to_string().len() / 4) as u64;
    let mut events = vec![chunk(
        json!([{"index": 0, "delta": {"role": "assistant", "content": ""}}]),
    )];
    let read_path = (last["role"] == "user")
        .then(|| {
            last_text
                .split_whitespace()
                .find_map(|w| w.strip_prefix("READ:").map(str::to_string))
        })
        .flatten();
    let (text, finish) = if system.contains("title generator") {
        ("Real opencode test session".to_string(), "stop")
    } else if system.contains("summarization") {
        (OPENCODE_SUMMARY.to_string(), "stop")
    } else if let Some(path) = read_path {
        let args = json!({ "filePath": path }).to_string();
        events.push(chunk(
            json!([{"index": 0, "delta": {"tool_calls": [{"index": 0,
            "id": format!("call_{n}"), "type": "function",
            "function": {"name": "read", "arguments": args}}]}}]),
        ));
        (String::new(), "tool_calls")
    } else if last["role"] == "tool" {
        ("I read the file; its content is noted.".to_string(), "stop")
    } else {
        // The answer's own markers: each of the instruction's with `ACK` appended.
        let m = markers(&last_text)
            .iter()
            .map(|k| format!("{k}ACK"))
            .collect::<Vec<_>>()
            .join(" ");
        (
            format!("Noted {m}: that step is done, and the next one is clear to me now."),
            "stop",
        )
    };
    // The text in a few pieces, as a model streams it.
    let words: Vec<&str> = text.split_inclusive(' ').collect();
    for piece in words.chunks(4) {
        events.push(chunk(
            json!([{"index": 0, "delta": {"content": piece.concat()}}]),
        ));
    }
    events.push(chunk(
        json!([{"index": 0, "delta": {}, "finish_reason": finish}]),
    ));
    let completion_tokens = (text.len() / 4 + 1) as u64;
    let mut usage = base.clone();
    usage["choices"] = json!([]);
    usage["usage"] = json!({"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens});
    events.push(usage.to_string());
    events.push("[DONE]".to_string());
    (events, text)
}

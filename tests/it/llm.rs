//! The `llm` strategy end to end: the real `agent-db` binary against a real HTTP server on
//! 127.0.0.1 (a small HTTP/1.1 server written here on a tokio `TcpListener`, so it can record
//! every request and count the requests in flight), for both the OpenAI-compatible and the
//! Anthropic wire formats.
//!
//! Covered: the request shape (headers, model, length field, recipe + instructions + transcript in
//! the prompt), response parsing, usage and cost in the report and the audit log; retries on 429
//! honouring `Retry-After`; repeated 5xx, timeouts, empty / truncated / refused summaries failing
//! without writing anything; chunking within the request budget with the running summary carried
//! as a prior summary; the concurrency bound; no API key in any output or in the store, nor at
//! the origin a redirect points to; a credential in the base URL masked everywhere; recipes
//! (kodelet-style files, lookup, unknown handlers); how the strategy is chosen; `--max-cost`; and
//! the settings layers reaching the wire.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agent_db::provider::ProviderKind;
use agent_db::tokens::count_text;
use agent_db_synth::SynthFormat;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

use crate::common::Env;

pub(crate) const PARTIAL: i32 = 1;
const CONFIG: i32 = 3;

/// The compact recipe built into the binary (the test checks its body reaches the prompt and its
/// sha256 reaches the audit log).
const COMPACT_RECIPE: &str = include_str!("../../src/recipes/compact.md");
const BRIEF_RECIPE: &str = include_str!("../../src/recipes/brief.md");

// ---------------------------------------------------------------------------------------------
// A recording HTTP/1.1 server on 127.0.0.1.

/// One request the server received.
#[derive(Debug, Clone)]
pub(crate) struct Seen {
    pub(crate) path: String,
    /// Lowercased names.
    pub(crate) headers: BTreeMap<String, String>,
    pub(crate) body: Value,
}

/// What the server answers, after `delay`, and once the server has seen `hold_until` requests
/// in flight at the same time (0: at once).
pub(crate) struct Reply {
    status: u16,
    headers: Vec<(String, String)>,
    body: String,
    delay: Duration,
    hold_until: usize,
}

impl Reply {
    pub(crate) fn json(status: u16, v: Value) -> Reply {
        Reply {
            status,
            headers: Vec::new(),
            body: v.to_string(),
            delay: Duration::ZERO,
            hold_until: 0,
        }
    }
    pub(crate) fn header(mut self, k: &str, v: &str) -> Reply {
        self.headers.push((k.to_string(), v.to_string()));
        self
    }
    pub(crate) fn after(mut self, d: Duration) -> Reply {
        self.delay = d;
        self
    }
    /// Hold this answer until the server has had `n` requests in flight at once: a request
    /// held so proves the client sends others while it waits. The hold gives up after
    /// [`HOLD_GIVE_UP_POLLS`] polls (so a client that never overlaps ends the test, which
    /// then fails on the count, not on time).
    pub(crate) fn until_in_flight(mut self, n: usize) -> Reply {
        self.hold_until = n;
        self
    }
}

/// Polls (100 ms apart) of a held answer before it is sent anyway.
const HOLD_GIVE_UP_POLLS: usize = 600;

type Handler = dyn Fn(usize, &Seen) -> Reply + Send + Sync;

struct State {
    seen: Mutex<Vec<Seen>>,
    in_flight: AtomicUsize,
    max_in_flight: AtomicUsize,
    handler: Box<Handler>,
}

/// The server; it stops when dropped. The handler gets the request's index (order of receipt,
/// from 0) and the request.
pub(crate) struct Server {
    port: u16,
    rt: Option<tokio::runtime::Runtime>,
    state: Arc<State>,
}

impl Server {
    pub(crate) fn start(handler: impl Fn(usize, &Seen) -> Reply + Send + Sync + 'static) -> Server {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("runtime");
        let listener = rt
            .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
            .expect("bind 127.0.0.1");
        let port = listener.local_addr().expect("addr").port();
        let state = Arc::new(State {
            seen: Mutex::new(Vec::new()),
            in_flight: AtomicUsize::new(0),
            max_in_flight: AtomicUsize::new(0),
            handler: Box::new(handler),
        });
        let st = state.clone();
        rt.spawn(async move {
            while let Ok((sock, _)) = listener.accept().await {
                tokio::spawn(connection(sock, st.clone()));
            }
        });
        Server {
            port,
            rt: Some(rt),
            state,
        }
    }

    pub(crate) fn requests(&self) -> Vec<Seen> {
        self.state.seen.lock().unwrap().clone()
    }

    fn max_in_flight(&self) -> usize {
        self.state.max_in_flight.load(Ordering::SeqCst)
    }

    /// The base URL as a user would give it for `kind`.
    pub(crate) fn base_url(&self, kind: ProviderKind) -> String {
        match kind {
            ProviderKind::OpenAi => format!("http://127.0.0.1:{}/v1", self.port),
            ProviderKind::Anthropic => format!("http://127.0.0.1:{}", self.port),
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(rt) = self.rt.take() {
            rt.shutdown_background();
        }
    }
}

/// Serve requests on one connection (keep-alive) until the client closes it.
async fn connection(sock: tokio::net::TcpStream, st: Arc<State>) {
    use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
    let (r, mut w) = sock.into_split();
    let mut r = BufReader::new(r);
    loop {
        let mut line = String::new();
        if r.read_line(&mut line).await.unwrap_or(0) == 0 {
            return;
        }
        let path = line.split_whitespace().nth(1).unwrap_or("").to_string();
        let mut headers = BTreeMap::new();
        loop {
            let mut h = String::new();
            if r.read_line(&mut h).await.unwrap_or(0) == 0 {
                return;
            }
            let h = h.trim_end();
            if h.is_empty() {
                break;
            }
            if let Some((k, v)) = h.split_once(':') {
                headers.insert(k.trim().to_ascii_lowercase(), v.trim().to_string());
            }
        }
        let len: usize = headers
            .get("content-length")
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        let mut buf = vec![0u8; len];
        if r.read_exact(&mut buf).await.is_err() {
            return;
        }
        let seen = Seen {
            path,
            headers,
            body: serde_json::from_slice(&buf).unwrap_or(Value::Null),
        };
        let now = st.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
        st.max_in_flight.fetch_max(now, Ordering::SeqCst);
        let idx = {
            let mut all = st.seen.lock().unwrap();
            all.push(seen.clone());
            all.len() - 1
        };
        let reply = (st.handler)(idx, &seen);
        let mut polls = 0;
        while st.max_in_flight.load(Ordering::SeqCst) < reply.hold_until
            && polls < HOLD_GIVE_UP_POLLS
        {
            tokio::time::sleep(Duration::from_millis(100)).await;
            polls += 1;
        }
        tokio::time::sleep(reply.delay).await;
        st.in_flight.fetch_sub(1, Ordering::SeqCst);
        let reason = match reply.status {
            200 => "OK",
            400 => "Bad Request",
            401 => "Unauthorized",
            429 => "Too Many Requests",
            500 => "Internal Server Error",
            _ => "Status",
        };
        let mut out = format!(
            "HTTP/1.1 {} {reason}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n",
            reply.status,
            reply.body.len()
        );
        for (k, v) in &reply.headers {
            out.push_str(&format!("{k}: {v}\r\n"));
        }
        out.push_str("\r\n");
        out.push_str(&reply.body);
        if w.write_all(out.as_bytes()).await.is_err() {
            return;
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Wire formats.

pub(crate) fn endpoint(kind: ProviderKind) -> &'static str {
    match kind {
        ProviderKind::OpenAi => "/v1/chat/completions",
        ProviderKind::Anthropic => "/v1/messages",
    }
}

pub(crate) fn complete_stop(kind: ProviderKind) -> &'static str {
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

fn refused_stop(kind: ProviderKind) -> &'static str {
    match kind {
        ProviderKind::OpenAi => "content_filter",
        ProviderKind::Anthropic => "refusal",
    }
}

/// The model name the test server says answered.
const SERVED_MODEL: &str = "test-model-served-2026";

/// A successful answer in `kind`'s format.
pub(crate) fn answer(kind: ProviderKind, text: &str, stop: &str, usage: (u64, u64)) -> Value {
    match kind {
        ProviderKind::OpenAi => json!({
            "id": "chatcmpl-1",
            "object": "chat.completion",
            "model": SERVED_MODEL,
            "choices": [{
                "index": 0,
                "message": {"role": "assistant", "content": text, "refusal": null},
                "finish_reason": stop
            }],
            "usage": {"prompt_tokens": usage.0, "completion_tokens": usage.1, "total_tokens": usage.0 + usage.1}
        }),
        ProviderKind::Anthropic => json!({
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "model": SERVED_MODEL,
            "content": if text.is_empty() { json!([]) } else { json!([{"type": "text", "text": text}]) },
            "stop_reason": stop,
            "stop_sequence": null,
            "usage": {"input_tokens": usage.0, "output_tokens": usage.1}
        }),
    }
}

/// A valid answer (see [`crate::common::sectioned`]) carrying `text`.
pub(crate) fn ok(kind: ProviderKind, text: &str, usage: (u64, u64)) -> Reply {
    Reply::json(
        200,
        answer(
            kind,
            &crate::common::sectioned(text),
            complete_stop(kind),
            usage,
        ),
    )
}

/// The system prompt, the user message, the model and the length limit of a received request.
pub(crate) struct Prompt {
    pub(crate) system: String,
    pub(crate) user: String,
    pub(crate) model: String,
    pub(crate) max_tokens: Option<u64>,
}

pub(crate) fn prompt(kind: ProviderKind, req: &Seen) -> Prompt {
    let b = &req.body;
    let s = |v: &Value| {
        v.as_str()
            .unwrap_or_else(|| panic!("not a string: {v} in {b}"))
            .to_string()
    };
    match kind {
        ProviderKind::OpenAi => {
            let msgs = b["messages"].as_array().expect("messages");
            assert_eq!(msgs.len(), 2, "system + user: {b}");
            assert_eq!(msgs[0]["role"], "system");
            assert_eq!(msgs[1]["role"], "user");
            Prompt {
                system: s(&msgs[0]["content"]),
                user: s(&msgs[1]["content"]),
                model: s(&b["model"]),
                max_tokens: b["max_tokens"].as_u64(),
            }
        }
        ProviderKind::Anthropic => {
            let msgs = b["messages"].as_array().expect("messages");
            assert_eq!(msgs.len(), 1, "one user message: {b}");
            assert_eq!(msgs[0]["role"], "user");
            Prompt {
                system: s(&b["system"]),
                user: s(&msgs[0]["content"]),
                model: s(&b["model"]),
                max_tokens: b["max_tokens"].as_u64(),
            }
        }
    }
}

/// The text a prompt holds between `<NAME-TAG>` and `</NAME-TAG>` (TAG: 16 hex digits, the
/// same in both), if any.
pub(crate) fn delimited<'a>(user: &'a str, name: &str) -> Option<&'a str> {
    let open = format!("\n<{name}-");
    let mut from = 0;
    while let Some(i) = user[from..].find(&open) {
        let start = from + i + open.len();
        let tag = &user[start..(start + 17).min(user.len())];
        if tag.len() == 17 && tag.ends_with('>') && tag[..16].chars().all(|c| c.is_ascii_hexdigit())
        {
            let close = format!("\n</{name}-{}>", &tag[..16]);
            let body = start + 18;
            return user[body..].find(&close).map(|j| &user[body..body + j]);
        }
        from = start;
    }
    None
}

/// The delimiter tag of a prompt's transcript.
pub(crate) fn tag(user: &str) -> &str {
    let i = user.find("\n<transcript-").expect("a transcript") + "\n<transcript-".len();
    &user[i..i + 16]
}

/// The transcript part of a prompt.
pub(crate) fn transcript(user: &str) -> &str {
    delimited(user, "transcript").unwrap_or_else(|| panic!("no transcript section in:\n{user}"))
}

/// The earlier summary carried by a prompt, if any.
pub(crate) fn prior_summary(user: &str) -> Option<&str> {
    delimited(user, "earlier-summary")
}

/// The notes carried from earlier parts, if any.
pub(crate) fn notes(user: &str) -> Option<&str> {
    delimited(user, "notes")
}

/// A recipe's body (the text after its frontmatter), trimmed.
fn recipe_body(text: &str) -> &str {
    let rest = text.strip_prefix("---\n").expect("frontmatter");
    let end = rest.find("\n---\n").expect("closing ---");
    rest[end + 5..].trim()
}

fn sha256_hex(text: &str) -> String {
    hex::encode(Sha256::digest(text.as_bytes()))
}

// ---------------------------------------------------------------------------------------------
// Running agent-db.

pub(crate) struct Out {
    pub(crate) code: i32,
    pub(crate) stdout: String,
    pub(crate) stderr: String,
}

impl Out {
    pub(crate) fn json(&self) -> Value {
        serde_json::from_str(&self.stdout).unwrap_or_else(|e| {
            panic!(
                "stdout is not JSON ({e}); exit {}\nstdout: {}\nstderr: {}",
                self.code, self.stdout, self.stderr
            )
        })
    }
}

pub(crate) fn run(c: &mut assert_cmd::Command) -> Out {
    let o = c.output().expect("run agent-db");
    let out = Out {
        code: o.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
    };
    assert!(
        !out.stderr.contains("panicked"),
        "agent-db panicked:\n{}",
        out.stderr
    );
    out
}

/// `agent-db --db STORE` (hermetic, see [`Env::cmd`]) run from the store's temp directory, so
/// no `.agent-db/` directory of the working tree (recipes, hooks) is picked up.
pub(crate) fn cmd(env: &Env) -> assert_cmd::Command {
    let mut c = env.cmd();
    c.current_dir(env.dir.path());
    c
}

/// `--llm-provider KIND --base-url SERVER --model test-model`.
pub(crate) fn llm_args(kind: ProviderKind, server: &Server) -> Vec<String> {
    vec![
        "--llm-provider".into(),
        kind.name().into(),
        "--base-url".into(),
        server.base_url(kind),
        "--model".into(),
        "test-model".into(),
    ]
}

/// A conversation that a compaction with `--keep-tokens` would summarize.
#[derive(Debug, Clone)]
struct Planned {
    id: String,
    tokens: usize,
}

/// The conversations a compaction with `--keep-tokens keep` plans, in selection order (from an
/// offline dry run, which plans the same split as the llm strategy).
fn planned(env: &Env, keep: usize) -> Vec<Planned> {
    let out = run(cmd(env).args([
        "compact",
        "--all-over",
        "0",
        "--idle",
        "0",
        "--keep-tokens",
        &keep.to_string(),
        "--strategy",
        "extractive",
        "--dry-run",
        "--json",
    ]));
    assert_eq!(out.code, 0, "{}", out.stderr);
    out.json()["conversations"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["status"] == "planned")
        .map(|r| Planned {
            id: r["id"].as_str().unwrap().to_string(),
            tokens: r["tokens_before"].as_u64().unwrap() as usize,
        })
        .collect()
}

/// A planned conversation of moderate size (the median).
fn moderate(env: &Env, keep: usize) -> Planned {
    let mut p = planned(env, keep);
    assert!(!p.is_empty(), "nothing to compact in the generated store");
    p.sort_by_key(|p| p.tokens);
    p[p.len() / 2].clone()
}

/// The start (up to 60 characters of the first line) of a conversation's first message text.
fn head_marker(env: &Env, id: &str) -> String {
    let out = run(cmd(env).args(["show", id, "--json"]));
    assert_eq!(out.code, 0, "{}", out.stderr);
    let doc = out.json();
    let text = doc["messages"][0]["blocks"]
        .as_array()
        .unwrap()
        .iter()
        .find_map(|b| (b["type"] == "text").then(|| b["text"].as_str().unwrap().to_string()))
        .expect("the first message has text");
    let line = text.lines().next().unwrap_or("").trim();
    let marker: String = line.chars().take(60).collect();
    assert!(marker.len() >= 20, "a distinctive marker: {marker:?}");
    marker
}

pub(crate) fn raw_messages(env: &Env, id: &str) -> String {
    env.conn()
        .query_row(
            "SELECT raw_messages FROM conversations WHERE id = ?1",
            [id],
            |r| r.get(0),
        )
        .expect("raw_messages")
}

/// Rows in the audit log (0 when agent-db's tables were never created).
pub(crate) fn compactions(env: &Env) -> usize {
    let c = env.conn();
    let exists: i64 = c
        .query_row(
            "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'agent_db_compactions'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    if exists == 0 {
        return 0;
    }
    c.query_row("SELECT count(*) FROM agent_db_compactions", [], |r| {
        r.get::<_, i64>(0)
    })
    .unwrap() as usize
}

/// A snapshot of the store: the files' hash and the conversation tables.
pub(crate) struct Snapshot {
    conversations: Vec<Vec<String>>,
    summaries: Vec<Vec<String>>,
    hash: String,
}

pub(crate) fn snapshot(env: &Env) -> Snapshot {
    let conversations = env.dump("conversations");
    let summaries = env.dump("conversation_summaries");
    // Hash last: the dumps above open and close the store.
    Snapshot {
        conversations,
        summaries,
        hash: env.files_hash(),
    }
}

pub(crate) fn assert_untouched(env: &Env, before: &Snapshot, what: &str) {
    assert_eq!(
        env.files_hash(),
        before.hash,
        "{what}: the store's files changed"
    );
    assert_eq!(
        env.dump("conversations"),
        before.conversations,
        "{what}: conversations changed"
    );
    assert_eq!(
        env.dump("conversation_summaries"),
        before.summaries,
        "{what}: conversation_summaries changed"
    );
    assert_eq!(compactions(env), 0, "{what}: an audit row was written");
}

/// The price config: `test-model` at `input` / `output` USD per million tokens.
fn price_config(env: &Env, input: f64, output: f64) -> std::path::PathBuf {
    env.file(
        "prices.toml",
        format!(
            "[prices.\"test-model\"]\ninput_per_mtok = {input:?}\noutput_per_mtok = {output:?}\n"
        )
        .as_bytes(),
    )
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-9
}

/// The one report row of a single-conversation run.
pub(crate) fn only_row(doc: &Value) -> &Value {
    let rows = doc["conversations"].as_array().expect("conversations");
    assert_eq!(rows.len(), 1, "{doc:#}");
    &rows[0]
}

// ---------------------------------------------------------------------------------------------
// 1. Request shape, response parsing, usage and cost in the report and the audit log.

pub(crate) const KEY: &str = "sk-test-shape-0123456789";
const INSTRUCTIONS: &str = "INSTR-MARKER-7731: keep every port number exactly";

fn request_shape(kind: ProviderKind) {
    let env = Env::generated(12, 2, &[]);
    let conv = moderate(&env, 2000);
    let marker = head_marker(&env, &conv.id);
    let summary = "SUMMARY-OK-4242 the user asked for a fix and the agent made it";
    let server = Server::start(move |_, _| ok(kind, summary, (1234, 56)));
    let cfg = price_config(&env, 2.0, 10.0);
    let out = run(cmd(&env)
        .env("AGENT_DB_API_KEY", KEY)
        .arg("--config")
        .arg(&cfg)
        .args([
            "compact",
            &conv.id,
            "--keep-tokens",
            "2000",
            "--summary-context",
            "400000",
        ])
        .args([
            "--max-summary-tokens",
            "777",
            "--instructions",
            INSTRUCTIONS,
            "--json",
        ])
        .args(llm_args(kind, &server)));
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    let expected_cost = (1234.0 * 2.0 + 56.0 * 10.0) / 1e6;

    // The status line names the strategy, the server, the recipe and where the key came from.
    let line = format!(
        "strategy: llm ({} test-model at {}, recipe compact, key from AGENT_DB_API_KEY",
        kind.name(),
        server.base_url(kind)
    );
    assert!(
        out.stderr.contains(&line),
        "expected {line:?} in:\n{}",
        out.stderr
    );

    // The request.
    let reqs = server.requests();
    assert_eq!(
        reqs.len(),
        1,
        "one request for one conversation in one chunk"
    );
    let req = &reqs[0];
    assert_eq!(req.path, endpoint(kind));
    assert_eq!(
        req.headers.get("content-type").map(String::as_str),
        Some("application/json")
    );
    match kind {
        ProviderKind::OpenAi => {
            assert_eq!(
                req.headers.get("authorization"),
                Some(&format!("Bearer {KEY}"))
            );
            assert!(!req.headers.contains_key("x-api-key"));
            assert!(
                req.body.get("max_completion_tokens").is_none(),
                "max_tokens for compatible servers"
            );
        }
        ProviderKind::Anthropic => {
            assert_eq!(req.headers.get("x-api-key").map(String::as_str), Some(KEY));
            assert_eq!(
                req.headers.get("anthropic-version").map(String::as_str),
                Some("2023-06-01")
            );
            assert!(!req.headers.contains_key("authorization"));
        }
    }
    let p = prompt(kind, req);
    assert_eq!(p.model, "test-model");
    assert_eq!(p.max_tokens, Some(777));
    assert!(p.system.contains("handoff summaries"), "{}", p.system);
    assert!(
        p.user.contains(recipe_body(COMPACT_RECIPE)),
        "the recipe text is in the prompt:\n{}",
        p.user
    );
    assert!(
        p.user.contains(INSTRUCTIONS),
        "--instructions is in the prompt"
    );
    assert!(
        p.user.find(recipe_body(COMPACT_RECIPE)) < p.user.find(INSTRUCTIONS),
        "the instructions come after the recipe"
    );
    // The recipe asks for the extractive summary's sections, and for withdrawn items to be
    // stated as withdrawn, never as live.
    for heading in [
        "## User requests and instructions",
        "## Decisions and findings",
        "## Files touched",
        "## Commands run",
        "## Errors seen",
        "## Pending",
        "## Withdrawn or superseded",
        "## Where we stopped",
    ] {
        assert!(
            p.user.contains(heading),
            "{heading} is asked for:\n{}",
            p.user
        );
    }
    assert!(
        p.user.contains("never as live"),
        "withdrawn items are asked for as withdrawn:\n{}",
        p.user
    );
    assert!(
        transcript(&p.user).contains(&marker),
        "the head's first message {marker:?} is in the transcript"
    );
    assert!(
        transcript(&p.user).starts_with("[user]\n"),
        "{}",
        &p.user[..200.min(p.user.len())]
    );
    assert!(
        prior_summary(&p.user).is_none(),
        "a first compaction has no prior summary"
    );

    // The report row.
    let doc = out.json();
    let row = only_row(&doc);
    assert_eq!(row["status"], "compacted", "{row:#}");
    assert_eq!(row["strategy"], "llm");
    assert!(
        close(row["cost_usd"].as_f64().expect("cost_usd"), expected_cost),
        "{row:#}"
    );
    assert_eq!(row["llm_tokens"], json!([1234, 56]));
    assert!(close(
        doc["totals"]["cost_usd"].as_f64().unwrap(),
        expected_cost
    ));

    // The summary is stored, framed.
    let raw = raw_messages(&env, &conv.id);
    assert!(raw.contains(summary), "the model's summary is stored");
    assert!(raw.contains("[agent-db compaction summary]"));

    // The audit row.
    let out = run(cmd(&env).args(["history", "--json"]));
    assert_eq!(out.code, 0, "{}", out.stderr);
    let hist = out.json();
    let all = hist["compactions"].as_array().unwrap();
    assert_eq!(all.len(), 1, "{hist:#}");
    let c = &all[0];
    assert_eq!(c["conversation_id"], conv.id.as_str());
    assert_eq!(c["strategy"], "llm");
    assert_eq!(
        c["model"], SERVED_MODEL,
        "the model the server says answered"
    );
    let d = &c["details"];
    assert!(
        close(
            d["cost_usd"].as_f64().expect("details.cost_usd"),
            expected_cost
        ),
        "{d:#}"
    );
    assert_eq!(d["llm_prompt_tokens"], 1234);
    assert_eq!(d["llm_completion_tokens"], 56);
    assert_eq!(d["recipe"]["name"], "compact");
    assert_eq!(d["recipe"]["sha256"], sha256_hex(COMPACT_RECIPE));
    assert_eq!(d["instructions_sha256"], sha256_hex(INSTRUCTIONS));
}

#[test]
fn request_shape_openai() {
    request_shape(ProviderKind::OpenAi);
}

#[test]
fn request_shape_anthropic() {
    request_shape(ProviderKind::Anthropic);
}

// ---------------------------------------------------------------------------------------------
// 2–5. Retries, failures and rejected summaries.

/// A moderate conversation of a small store, and the common flags for one compaction of it.
fn one_conversation() -> (Env, Planned) {
    let env = Env::generated(12, 2, &[]);
    let conv = moderate(&env, 2000);
    (env, conv)
}

fn compact_one(
    env: &Env,
    conv: &Planned,
    kind: ProviderKind,
    server: &Server,
) -> assert_cmd::Command {
    let mut c = cmd(env);
    c.env("AGENT_DB_API_KEY", KEY)
        .args([
            "compact",
            &conv.id,
            "--keep-tokens",
            "2000",
            "--summary-context",
            "400000",
            "--json",
        ])
        .args(llm_args(kind, server));
    c
}

fn retry_after_then_success(kind: ProviderKind) {
    let (env, conv) = one_conversation();
    let server = Server::start(move |i, _| {
        if i == 0 {
            Reply::json(
                429,
                json!({"error": {"message": "slow down", "type": "rate_limit"}}),
            )
            .header("Retry-After", "1")
        } else {
            ok(kind, "SUMMARY-AFTER-RETRY", (10, 5))
        }
    });
    let out = run(&mut compact_one(&env, &conv, kind, &server));
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    assert_eq!(only_row(&out.json())["status"], "compacted");
    let reqs = server.requests();
    assert_eq!(reqs.len(), 2, "one 429, then one successful retry");
    assert_eq!(
        reqs[0].body, reqs[1].body,
        "the retry sends the same request"
    );
    assert!(raw_messages(&env, &conv.id).contains("SUMMARY-AFTER-RETRY"));
}

#[test]
fn retry_after_then_success_openai() {
    retry_after_then_success(ProviderKind::OpenAi);
}

#[test]
fn retry_after_then_success_anthropic() {
    retry_after_then_success(ProviderKind::Anthropic);
}

fn repeated_server_errors(kind: ProviderKind) {
    let (env, conv) = one_conversation();
    let server = Server::start(|_, _| {
        Reply::json(
            500,
            json!({"error": {"message": "boom", "type": "server_error"}}),
        )
    });
    let before = snapshot(&env);
    let out = run(compact_one(&env, &conv, kind, &server).env("AGENT_DB_MAX_RETRIES", "1"));
    assert_eq!(out.code, PARTIAL, "{}\n{}", out.stdout, out.stderr);
    let doc = out.json();
    let row = only_row(&doc);
    assert_eq!(row["status"], "failed", "{row:#}");
    assert!(
        row["detail"].as_str().unwrap().contains("HTTP 500"),
        "{row:#}"
    );
    assert_eq!(doc["totals"]["failed"], 1);
    assert_eq!(
        server.requests().len(),
        2,
        "the first attempt and AGENT_DB_MAX_RETRIES=1 retry"
    );
    assert_untouched(&env, &before, "after repeated 500s");
}

#[test]
fn repeated_server_errors_openai() {
    repeated_server_errors(ProviderKind::OpenAi);
}

#[test]
fn repeated_server_errors_anthropic() {
    repeated_server_errors(ProviderKind::Anthropic);
}

fn timeout(kind: ProviderKind) {
    let (env, conv) = one_conversation();
    let server =
        Server::start(move |_, _| ok(kind, "TOO-LATE", (1, 1)).after(Duration::from_secs(3)));
    let before = snapshot(&env);
    let out = run(compact_one(&env, &conv, kind, &server)
        .env("AGENT_DB_MAX_RETRIES", "0")
        .args(["--timeout", "300ms"]));
    assert_eq!(out.code, PARTIAL, "{}\n{}", out.stdout, out.stderr);
    let doc = out.json();
    let row = only_row(&doc);
    assert_eq!(row["status"], "failed", "{row:#}");
    assert!(
        row["detail"].as_str().unwrap().contains("timed out"),
        "{row:#}"
    );
    assert_eq!(
        server.requests().len(),
        1,
        "no retry with AGENT_DB_MAX_RETRIES=0"
    );
    assert_untouched(&env, &before, "after a timeout");
    // The same from the environment.
    let out = run(compact_one(&env, &conv, kind, &server)
        .env("AGENT_DB_MAX_RETRIES", "0")
        .env("AGENT_DB_TIMEOUT", "300ms"));
    assert_eq!(out.code, PARTIAL, "{}\n{}", out.stdout, out.stderr);
    assert!(only_row(&out.json())["detail"]
        .as_str()
        .unwrap()
        .contains("timed out"));
    assert_eq!(server.requests().len(), 2);
    assert_untouched(&env, &before, "after a timeout (AGENT_DB_TIMEOUT)");
}

#[test]
fn timeout_openai() {
    timeout(ProviderKind::OpenAi);
}

#[test]
fn timeout_anthropic() {
    timeout(ProviderKind::Anthropic);
}

fn rejected_summaries(kind: ProviderKind) {
    let (env, conv) = one_conversation();
    let refused = match kind {
        ProviderKind::OpenAi => json!({
            "model": SERVED_MODEL,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": null, "refusal": "I can't help with that."}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 3}
        }),
        ProviderKind::Anthropic => answer(kind, "", refused_stop(kind), (10, 3)),
    };
    let cases: Vec<(&str, Value, &str)> = vec![
        (
            "empty",
            answer(kind, "", complete_stop(kind), (10, 0)),
            "empty summary",
        ),
        (
            "blank",
            answer(kind, "  \n\t ", complete_stop(kind), (10, 2)),
            "empty summary",
        ),
        (
            "truncated",
            answer(
                kind,
                "A summary that stops in the mid",
                truncated_stop(kind),
                (10, 777),
            ),
            "cut off",
        ),
        (
            "refused (stop reason)",
            answer(kind, "", refused_stop(kind), (10, 0)),
            "refused",
        ),
        ("refused", refused, "refused"),
    ];
    for (what, body, expect) in cases {
        let server = Server::start(move |_, _| Reply::json(200, body.clone()));
        let before = snapshot(&env);
        let out = run(&mut compact_one(&env, &conv, kind, &server));
        assert_eq!(out.code, PARTIAL, "{what}: {}\n{}", out.stdout, out.stderr);
        let doc = out.json();
        let row = only_row(&doc);
        assert_eq!(row["status"], "failed", "{what}: {row:#}");
        assert!(
            row["detail"].as_str().unwrap().contains(expect),
            "{what}: {row:#}"
        );
        assert_eq!(
            server.requests().len(),
            1,
            "{what}: a rejected summary is not retried"
        );
        assert_untouched(&env, &before, what);
    }
}

#[test]
fn rejected_summaries_openai() {
    rejected_summaries(ProviderKind::OpenAi);
}

#[test]
fn rejected_summaries_anthropic() {
    rejected_summaries(ProviderKind::Anthropic);
}

// ---------------------------------------------------------------------------------------------
// 6. Chunking within the budget, with the running summary as the prior summary.

const BUDGET: usize = 6000;

fn chunked(kind: ProviderKind) {
    let env = Env::generated(20, 1, &[]);
    let mut all = planned(&env, 2000);
    all.sort_by_key(|p| std::cmp::Reverse(p.tokens));
    let conv = all[0].clone();
    let marker = head_marker(&env, &conv.id);
    let server = Server::start(move |i, _| {
        ok(
            kind,
            &format!("CHUNK-SUMMARY-{i}-END notes on part {i}"),
            (100, 10),
        )
    });
    let out = run(cmd(&env)
        .env("AGENT_DB_API_KEY", KEY)
        .args(["compact", &conv.id, "--keep-tokens", "2000", "--json"])
        .args([
            "--summary-context",
            &BUDGET.to_string(),
            "--max-summary-tokens",
            "500",
        ])
        // This server's answers name none of the head's paths, so the retention score measures
        // the ledger alone (under the llm floor once ten parts' notes share its room); the floor
        // has tests of its own (tests/it/retention.rs), the budget is what this one checks.
        .args(["--min-retention", "0"])
        .args(llm_args(kind, &server)));
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    let doc = out.json();
    let row = only_row(&doc);
    assert_eq!(row["status"], "compacted", "{row:#}");

    let reqs = server.requests();
    let n = reqs.len();
    assert!(
        n >= 5,
        "a head this long takes at least 5 requests, got {n}"
    );
    let prompts: Vec<Prompt> = reqs.iter().map(|r| prompt(kind, r)).collect();
    let mut transcript_tokens = 0;
    for (i, p) in prompts.iter().enumerate() {
        let tokens = count_text(&p.system) + count_text(&p.user);
        assert!(
            tokens <= BUDGET,
            "request {i} of {n} has {tokens} tokens, over the {BUDGET} budget"
        );
        assert_eq!(p.max_tokens, Some(500));
        transcript_tokens += count_text(transcript(&p.user));
        // Each request knows its place; the current task goes to the last part only.
        assert!(
            p.user
                .contains(&format!("this request is part {} of {n}", i + 1)),
            "request {i}"
        );
        let last = i == n - 1;
        assert_eq!(
            p.user.contains("the latest instruction is in a later part"),
            !last,
            "request {i} of {n}: the current task only in the last part"
        );
        assert_eq!(
            p.user.contains("which is the current task") || p.user.contains("bare go-ahead"),
            last
        );
        // The notes carried in code hold every earlier part's items.
        match i {
            0 => assert!(
                notes(&p.user).is_none() && prior_summary(&p.user).is_none(),
                "the first request has no notes"
            ),
            _ => {
                // Notes longer than the room for them are sent cut in the middle (agent-db
                // keeps them whole); the first and the latest items are always there.
                let carried = notes(&p.user).expect("notes from the earlier parts");
                let cut = carried.contains("middle of this message omitted");
                for j in 0..i {
                    let item = format!("CHUNK-SUMMARY-{j}-END notes on part {j}");
                    assert!(
                        carried.contains(&item) || (cut && j > 0),
                        "request {i} carries part {j}'s item:\n{carried}"
                    );
                }
            }
        }
    }
    assert!(
        transcript_tokens >= 5 * BUDGET,
        "the head's transcript ({transcript_tokens} tokens) is at least 5x the budget"
    );
    assert!(
        transcript(&prompts[0].user).contains(&marker),
        "the first chunk starts at the head"
    );
    // The chunks are different parts of the head.
    let distinct: std::collections::BTreeSet<&str> =
        prompts.iter().map(|p| transcript(&p.user)).collect();
    assert_eq!(distinct.len(), n);

    // The stored summary is the merge of every part's sections: each part's item is there once,
    // the prose lines every answer repeats are there once.
    let raw = raw_messages(&env, &conv.id);
    for i in 0..n {
        assert_eq!(
            raw.matches(&format!("CHUNK-SUMMARY-{i}-END")).count(),
            1,
            "part {i}'s item is stored once"
        );
    }
    assert_eq!(
        raw.matches("Nothing beyond the notes above was recorded")
            .count(),
        crate::common::compact_headings().len() - 1,
        "a line every part repeats under a heading is stored once under it"
    );
    assert_eq!(
        row["llm_tokens"],
        json!([100 * n, 10 * n]),
        "usage adds up over the chunks"
    );
}

#[test]
fn chunked_within_budget_openai() {
    chunked(ProviderKind::OpenAi);
}

#[test]
fn chunked_within_budget_anthropic() {
    chunked(ProviderKind::Anthropic);
}

/// A model that writes more than `--max-summary-tokens` (a server that does not enforce the
/// limit, or counts with another tokenizer) must not push the next request over the budget.
#[test]
fn overlong_answer_keeps_requests_within_budget() {
    let kind = ProviderKind::OpenAi;
    let env = Env::generated(20, 1, &[]);
    let mut all = planned(&env, 2000);
    all.sort_by_key(|p| std::cmp::Reverse(p.tokens));
    let conv = all[0].clone();
    let long: Vec<String> = (0..350).map(|i| format!("fact{i}")).collect();
    let long = long.join(" ");
    assert!(
        count_text(&long) > 600,
        "longer than --max-summary-tokens 500"
    );
    let server = Server::start(move |_, _| ok(kind, &long, (100, 10)));
    let out = run(cmd(&env)
        .env("AGENT_DB_API_KEY", KEY)
        .args(["compact", &conv.id, "--keep-tokens", "2000", "--json"])
        .args([
            "--summary-context",
            &BUDGET.to_string(),
            "--max-summary-tokens",
            "500",
        ])
        .args(llm_args(kind, &server)));
    let reqs = server.requests();
    let over: Vec<(usize, usize)> = reqs
        .iter()
        .map(|r| prompt(kind, r))
        .map(|p| count_text(&p.system) + count_text(&p.user))
        .enumerate()
        .filter(|(_, t)| *t > BUDGET)
        .collect();
    assert!(
        over.is_empty(),
        "requests over the {BUDGET}-token budget (index, tokens): {over:?}; exit {}: {}",
        out.code,
        out.stdout
    );
}

/// One message larger than the whole budget is cut middle-out, with a marker, to fit.
#[test]
fn oversized_message_is_cut_middle_out() {
    let kind = ProviderKind::OpenAi;
    let env = Env::generated(12, 2, &[SynthFormat::OpenAiChat]);
    let conv = moderate(&env, 2000);
    let filler: Vec<String> = (0..8000).map(|i| format!("w{i}")).collect();
    let huge = format!("HUGE-START {} HUGE-END", filler.join(" "));
    assert!(count_text(&huge) > 3 * BUDGET);
    env.conn()
        .execute(
            "UPDATE conversations SET raw_messages = json_set(raw_messages, '$[0].content', ?1) WHERE id = ?2",
            rusqlite::params![huge, conv.id],
        )
        .unwrap();
    let server = Server::start(move |i, _| ok(kind, &format!("MIDDLE-OUT-SUMMARY-{i}"), (10, 5)));
    let out = run(cmd(&env)
        .env("AGENT_DB_API_KEY", KEY)
        .args(["compact", &conv.id, "--keep-tokens", "2000", "--json"])
        .args([
            "--summary-context",
            &BUDGET.to_string(),
            "--max-summary-tokens",
            "500",
        ])
        .args(llm_args(kind, &server)));
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    assert_eq!(only_row(&out.json())["status"], "compacted");
    let reqs = server.requests();
    let first = prompt(kind, &reqs[0]);
    assert!(count_text(&first.system) + count_text(&first.user) <= BUDGET);
    let t = transcript(&first.user);
    assert!(
        t.contains("HUGE-START") && t.contains("HUGE-END"),
        "both ends are kept"
    );
    assert!(
        t.contains("middle of this message omitted"),
        "with a marker"
    );
    assert!(!t.contains(" w4000 "), "the middle is cut");
    for r in &reqs {
        let p = prompt(kind, r);
        assert!(count_text(&p.system) + count_text(&p.user) <= BUDGET);
    }
}

/// Compacting a compacted conversation again sends the earlier summary as the prior summary, not
/// as transcript.
#[test]
fn recompaction_summarizes_the_originals_or_a_pruned_archives_earlier_summary() {
    let kind = ProviderKind::OpenAi;
    let env = Env::generated(20, 3, &[]);
    let mut all = planned(&env, 2000);
    all.sort_by_key(|p| std::cmp::Reverse(p.tokens));
    let conv = all[0].clone();
    let server =
        Server::start(move |i, _| ok(kind, &format!("PASS-{i}-SUMMARY-BODY with facts"), (10, 5)));
    let pass = |keep: &str| {
        let out = run(cmd(&env)
            .env("AGENT_DB_API_KEY", KEY)
            .args([
                "compact",
                &conv.id,
                "--keep-tokens",
                keep,
                "--summary-context",
                "400000",
                // Compacting again right away is what the stall guard prevents; this test
                // wants exactly that.
                "--force",
                "--json",
            ])
            .args(llm_args(kind, &server)));
        assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
        assert_eq!(
            only_row(&out.json())["status"],
            "compacted",
            "{}",
            out.stdout
        );
    };
    pass("12000");
    // The archive holds the originals: the second summary is written from them, not from the
    // first summary.
    pass("6000");
    let reqs = server.requests();
    assert_eq!(reqs.len(), 2);
    let (first, second) = (prompt(kind, &reqs[0]), prompt(kind, &reqs[1]));
    assert_eq!(prior_summary(&second.user), None);
    assert!(!transcript(&second.user).contains("PASS-0-SUMMARY-BODY"));
    let start: String = transcript(&first.user).chars().take(300).collect();
    assert!(
        transcript(&second.user).starts_with(&start),
        "the second transcript starts with the original messages"
    );
    // With the archive pruned, the earlier summary is what is summarized again.
    let pruned = run(cmd(&env).env("AGENT_DB_NOW", "2026-11-02T12:00:00Z").args([
        "prune-archive",
        "--older-than",
        "1h",
        "--yes",
    ]));
    assert_eq!(pruned.code, 0, "{}", pruned.stderr);
    pass("1000");
    let reqs = server.requests();
    assert_eq!(reqs.len(), 3);
    let third = prompt(kind, &reqs[2]);
    // The earlier summary is the model's answer (then the artifact ledger agent-db appends).
    assert!(
        prior_summary(&third.user).is_some_and(|p| p.contains("PASS-1-SUMMARY-BODY with facts")),
        "{:?}",
        prior_summary(&third.user)
    );
    assert!(
        !transcript(&third.user).contains("PASS-1-SUMMARY-BODY"),
        "the earlier summary is not repeated as transcript"
    );
    let raw = raw_messages(&env, &conv.id);
    assert!(raw.contains("PASS-2-SUMMARY-BODY") && !raw.contains("PASS-1-SUMMARY-BODY"));
}

// ---------------------------------------------------------------------------------------------
// 7. Concurrency.

#[test]
fn concurrency_bounds_requests_in_flight() {
    let kind = ProviderKind::OpenAi;
    let env = Env::generated(20, 2, &[]);
    let want: std::collections::BTreeSet<String> =
        planned(&env, 2000).into_iter().map(|p| p.id).collect();
    assert!(
        want.len() >= 12,
        "only {} conversations to compact",
        want.len()
    );
    // The first answer is held until a second request is in flight beside it: the overlap is
    // proven by the server seeing two requests at once, whatever the machine's load.
    let server = Server::start(move |idx, _| {
        let reply = ok(kind, "CONCURRENT-SUMMARY", (10, 5));
        if idx == 0 {
            reply.until_in_flight(2)
        } else {
            reply
        }
    });
    let out = run(cmd(&env)
        .env("AGENT_DB_API_KEY", KEY)
        .args([
            "compact",
            "--all-over",
            "0",
            "--idle",
            "0",
            "--keep-tokens",
            "2000",
            // A one-word summary: the llm default floor would refuse the conversations whose
            // span holds mostly errors; concurrency is what is tested here.
            "--min-retention",
            "0",
        ])
        .args([
            "--summary-context",
            "400000",
            "--concurrency",
            "3",
            "--yes",
            "--json",
        ])
        .args(llm_args(kind, &server)));
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    let doc = out.json();
    let done: std::collections::BTreeSet<String> =
        crate::common::ids_with_status(&doc, "compacted")
            .into_iter()
            .collect();
    assert_eq!(done, want, "every planned conversation is compacted");
    assert_eq!(
        server.requests().len(),
        want.len(),
        "one request per conversation"
    );
    let max = server.max_in_flight();
    assert!(max <= 3, "{max} requests in flight with --concurrency 3");
    assert!(max >= 2, "requests did overlap (max in flight {max})");
}

// ---------------------------------------------------------------------------------------------
// 8. The API key never leaks.

const LEAK_KEY: &str = "sk-live-LEAKCHECK-9f8e7d6c5b4a";

fn key_never_leaks(kind: ProviderKind) {
    let env = Env::generated(12, 2, &[]);
    let mut convs = planned(&env, 2000);
    convs.sort_by_key(|p| p.tokens);
    assert!(convs.len() >= 2);
    let good = Server::start(move |_, _| ok(kind, "LEAKTEST-SUMMARY", (10, 5)));
    // Echoes every request header (so the key) in its error body: first a retryable 500 (the
    // retry is logged), then a 401.
    let bad = Server::start(move |i, req| {
        let echo = format!("{:?}", req.headers);
        let body = match kind {
            ProviderKind::OpenAi => {
                json!({"error": {"message": format!("bad key; you sent {echo}"), "type": "invalid_request_error"}})
            }
            ProviderKind::Anthropic => {
                json!({"type": "error", "error": {"type": "authentication_error", "message": format!("bad key; you sent {echo}")}})
            }
        };
        Reply::json(if i == 0 { 500 } else { 401 }, body).header("www-authenticate", &echo)
    });
    let mut outputs: Vec<(String, String)> = Vec::new();
    let mut keep = |what: &str, out: &Out| {
        outputs.push((format!("{what}: stdout"), out.stdout.clone()));
        outputs.push((format!("{what}: stderr"), out.stderr.clone()));
    };
    let compact = |server: &Server, id: &str, json: bool| {
        let mut c = cmd(&env);
        c.env("AGENT_DB_API_KEY", LEAK_KEY)
            .env("AGENT_DB_LOG", "trace")
            .env("AGENT_DB_MAX_RETRIES", "1")
            .args([
                "compact",
                id,
                "--keep-tokens",
                "2000",
                "--summary-context",
                "400000",
            ])
            .args(llm_args(kind, server));
        if json {
            c.arg("--json");
        }
        run(&mut c)
    };

    let out = compact(&good, &convs[0].id, true);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(only_row(&out.json())["status"], "compacted");
    assert!(
        out.stderr.contains("TRACE") || out.stderr.contains("DEBUG"),
        "trace logging is on"
    );
    keep("successful compact --json", &out);

    let out = compact(&bad, &convs[1].id, true);
    assert_eq!(out.code, PARTIAL, "{}", out.stderr);
    let doc = out.json();
    let detail = only_row(&doc)["detail"].as_str().unwrap().to_string();
    assert!(
        detail.contains("HTTP 401") && detail.contains("[redacted]"),
        "{detail}"
    );
    keep("failing compact --json", &out);
    assert_eq!(bad.requests().len(), 2);
    let sent = match kind {
        ProviderKind::OpenAi => bad.requests()[0].headers["authorization"].clone(),
        ProviderKind::Anthropic => bad.requests()[0].headers["x-api-key"].clone(),
    };
    assert!(
        sent.contains(LEAK_KEY),
        "the key was sent (so the echo carried it)"
    );

    let out = compact(&bad, &convs[1].id, false);
    assert_eq!(out.code, PARTIAL);
    keep("failing compact (table)", &out);

    for args in [&["config"][..], &["config", "--json"][..]] {
        let out = run(cmd(&env)
            .env("AGENT_DB_API_KEY", LEAK_KEY)
            .env("AGENT_DB_LLM_PROVIDER", kind.name())
            .env("AGENT_DB_LOG", "trace")
            .args(args));
        assert_eq!(out.code, 0, "{}", out.stderr);
        assert!(
            out.stdout.contains("[redacted]") && out.stdout.contains("AGENT_DB_API_KEY"),
            "{}",
            out.stdout
        );
        keep(&args.join(" "), &out);
    }
    // The provider's own variable, and a key in the config file.
    let var = match kind {
        ProviderKind::OpenAi => "OPENAI_API_KEY",
        ProviderKind::Anthropic => "ANTHROPIC_API_KEY",
    };
    let out = run(cmd(&env)
        .env(var, LEAK_KEY)
        .env("AGENT_DB_LLM_PROVIDER", kind.name())
        .args(["config", "--json"]));
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(out.json()["settings"]["api_key_source"], var);
    keep("config --json (provider variable)", &out);
    let file = env.file(
        "key.toml",
        format!(
            "[llm]\nprovider = \"{}\"\napi_key = \"{LEAK_KEY}\"\n",
            kind.name()
        )
        .as_bytes(),
    );
    for args in [&["config"][..], &["config", "--json"][..]] {
        let out = run(cmd(&env).arg("--config").arg(&file).args(args));
        assert_eq!(out.code, 0, "{}", out.stderr);
        keep(&format!("{} (config file)", args.join(" ")), &out);
    }
    let out = run(cmd(&env).args(["history", "--json"]));
    keep("history --json", &out);

    for (what, text) in &outputs {
        assert!(
            !text.contains(LEAK_KEY),
            "the key leaked in {what}:\n{text}"
        );
        assert!(
            !text.contains("LEAKCHECK"),
            "part of the key leaked in {what}:\n{text}"
        );
    }
    for suffix in ["", "-wal"] {
        let mut p = env.db.as_os_str().to_owned();
        p.push(suffix);
        if let Ok(bytes) = std::fs::read(std::path::PathBuf::from(p)) {
            let needle = LEAK_KEY.as_bytes();
            assert!(
                !bytes.windows(needle.len()).any(|w| w == needle),
                "the key is in the store file storage.db{suffix}"
            );
        }
    }
}

#[test]
fn key_never_leaks_openai() {
    key_never_leaks(ProviderKind::OpenAi);
}

#[test]
fn key_never_leaks_anthropic() {
    key_never_leaks(ProviderKind::Anthropic);
}

/// A server that redirects every request (307) to another server on another port: the key
/// must not follow, and the report names the redirect without the key.
fn redirect_keeps_the_key_home(kind: ProviderKind) {
    let (env, conv) = one_conversation();
    let target = Server::start(move |_, _| ok(kind, "SUMMARY-FROM-ELSEWHERE", (10, 5)));
    let location = format!("{}{}", target.base_url(kind), endpoint(kind));
    let redirecting =
        Server::start(move |_, _| Reply::json(307, json!({})).header("location", &location));
    let mut c = compact_one(&env, &conv, kind, &redirecting);
    c.env("AGENT_DB_API_KEY", LEAK_KEY)
        .env("AGENT_DB_LOG", "trace");
    let out = run(&mut c);
    assert_eq!(out.code, PARTIAL, "{}\n{}", out.stdout, out.stderr);
    let doc = out.json();
    let r = only_row(&doc);
    assert_eq!(r["status"], "failed", "{r:#}");
    let detail = r["detail"].as_str().unwrap();
    assert!(
        detail.contains("HTTP 307 from ")
            && detail.contains(&format!(
                "redirect to http://127.0.0.1:{} not followed",
                target.port
            )),
        "{detail}"
    );
    assert!(
        target.requests().is_empty(),
        "the other origin received {:?}",
        target.requests()
    );
    assert_eq!(redirecting.requests().len(), 1, "a redirect is not retried");
    let first = redirecting.requests()[0].clone();
    let sent = match kind {
        ProviderKind::OpenAi => &first.headers["authorization"],
        ProviderKind::Anthropic => &first.headers["x-api-key"],
    };
    assert!(sent.contains(LEAK_KEY), "the configured origin got the key");
    for text in [&out.stdout, &out.stderr] {
        assert!(!text.contains("LEAKCHECK"), "{text}");
    }
    assert!(!raw_messages(&env, &conv.id).contains("SUMMARY-FROM-ELSEWHERE"));
}

#[test]
fn redirect_keeps_the_key_home_openai() {
    redirect_keeps_the_key_home(ProviderKind::OpenAi);
}

#[test]
fn redirect_keeps_the_key_home_anthropic() {
    redirect_keeps_the_key_home(ProviderKind::Anthropic);
}

// A key written into the base URL (userinfo password and query) is masked on every line.

const URL_PW: &str = "sk-pw-URLLEAK-4711";
const URL_QKEY: &str = "sk-q-URLLEAK-0815";

/// A base URL on 127.0.0.1:`port` with credentials in its userinfo and query.
fn url_with_secrets(port: u16) -> String {
    format!("http://me:{URL_PW}@127.0.0.1:{port}/v1?key={URL_QKEY}&org=acme")
}

/// [`url_with_secrets`] as agent-db must show it.
fn url_masked(port: u16) -> String {
    format!("http://me:***@127.0.0.1:{port}/v1?key=***&org=***")
}

/// No part of a credential of [`url_with_secrets`] in any of `outputs`.
fn assert_no_url_secret(outputs: &[(String, Out)]) {
    for (what, out) in outputs {
        for (stream, text) in [("stdout", &out.stdout), ("stderr", &out.stderr)] {
            assert!(
                !text.contains("URLLEAK"),
                "a credential from the base URL leaked in {what} ({stream}):\n{text}"
            );
        }
    }
}

/// `compact ID --llm-provider openai --base-url URL_WITH_SECRETS(port) EXTRA…` with trace logs.
fn compact_at_secret_url(env: &Env, conv: &Planned, port: u16, extra: &[&str]) -> Out {
    let mut c = cmd(env);
    c.env("AGENT_DB_LOG", "trace")
        .env("AGENT_DB_MAX_RETRIES", "1")
        .args([
            "compact",
            &conv.id,
            "--keep-tokens",
            "2000",
            "--summary-context",
            "400000",
            "--llm-provider",
            "openai",
            "--model",
            "test-model",
            "--base-url",
            &url_with_secrets(port),
        ])
        .args(extra);
    run(&mut c)
}

/// The `detail` of the only row of a `--json` run.
fn only_detail(out: &Out) -> String {
    only_row(&out.json())["detail"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

/// Failing and unreachable servers, dry runs, table and JSON, trace logs.
#[test]
fn credentials_in_the_base_url_are_masked_in_compact() {
    let (env, conv) = one_conversation();
    // A careless server: echoes the request target (with its query) and every header.
    let failing = Server::start(|i, req| {
        let echo = format!("{} {:?}", req.path, req.headers);
        Reply::json(
            if i == 0 { 500 } else { 401 },
            json!({"error": {"message": format!("bad request {echo}"), "type": "invalid_request_error"}}),
        )
        .header("www-authenticate", &echo)
    });
    let endpoint = |port| url_masked(port).replace("/v1?", "/v1/chat/completions?");
    let closed_port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut outputs: Vec<(String, Out)> = Vec::new();

    let out = compact_at_secret_url(&env, &conv, failing.port, &["--json"]);
    assert_eq!(out.code, PARTIAL, "{}", out.stderr);
    let detail = only_detail(&out);
    assert!(
        detail.contains(&format!("HTTP 401 from {}", endpoint(failing.port))),
        "{detail}"
    );
    // The request went where the user pointed it: the path before the query, the key in it.
    let reqs = failing.requests();
    assert_eq!(reqs.len(), 2, "one retry");
    assert_eq!(
        reqs[0].path,
        format!("/v1/chat/completions?key={URL_QKEY}&org=acme")
    );
    assert!(reqs[0].headers["authorization"].starts_with("Basic "));
    outputs.push(("failing compact --json".into(), out));
    let out = compact_at_secret_url(&env, &conv, failing.port, &[]);
    assert_eq!(out.code, PARTIAL, "{}", out.stderr);
    outputs.push(("failing compact (table)".into(), out));

    let out = compact_at_secret_url(&env, &conv, closed_port, &["--json"]);
    assert_eq!(out.code, PARTIAL, "{}", out.stderr);
    let detail = only_detail(&out);
    assert!(
        detail.contains(&format!("cannot connect to {}", endpoint(closed_port))),
        "{detail}"
    );
    outputs.push(("unreachable compact --json".into(), out));

    for extra in [&["--dry-run"][..], &["--dry-run", "--json"][..]] {
        let out = compact_at_secret_url(&env, &conv, failing.port, extra);
        assert_eq!(out.code, 0, "{}", out.stderr);
        assert!(
            out.stderr
                .contains(&format!("at {}, recipe", url_masked(failing.port))),
            "the strategy line shows the masked URL: {}",
            out.stderr
        );
        outputs.push((format!("compact {}", extra.join(" ")), out));
    }
    // 500 + 401 for the JSON run, 401 (not retried) for the table run; dry runs send nothing.
    assert_eq!(failing.requests().len(), 3);
    assert_no_url_secret(&outputs);
}

/// `agent-db config` (table and JSON) with the URL from the environment and from the file.
#[test]
fn credentials_in_the_base_url_are_masked_in_config() {
    let env = Env::generated(2, 2, &[]);
    let port = 9;
    let mut outputs: Vec<(String, Out)> = Vec::new();
    for args in [&["config"][..], &["config", "--json"][..]] {
        let out = run(cmd(&env)
            .env("AGENT_DB_LLM_PROVIDER", "openai")
            .env("AGENT_DB_BASE_URL", url_with_secrets(port))
            .env("AGENT_DB_LOG", "trace")
            .args(args));
        assert_eq!(out.code, 0, "{}", out.stderr);
        assert!(out.stdout.contains(&url_masked(port)), "{}", out.stdout);
        outputs.push((args.join(" "), out));
    }
    let file = env.file(
        "url.toml",
        format!(
            "[llm]\nprovider = \"openai\"\nbase_url = \"{}\"\n",
            url_with_secrets(port)
        )
        .as_bytes(),
    );
    let out = run(cmd(&env)
        .arg("--config")
        .arg(&file)
        .args(["config", "--json"]));
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(out.json()["settings"]["base_url"], url_masked(port));
    outputs.push(("config --json (config file)".into(), out));
    assert_no_url_secret(&outputs);
}

// ---------------------------------------------------------------------------------------------
// 9. Recipes.

const KODELET_RECIPE: &str = "---
name: handoff
description: Handoff notes for the next agent (kodelet-style)
allowed_tools:
  - bash
  - file_read
hooks:
  turn_end:
    handler: swap_context
    once: true
---
HANDOFF-RECIPE-MARKER-5150: summarize the conversation below as handoff notes: the goal, the
files touched, the open errors and the next step.
";

#[test]
fn recipes_kodelet_style_files_and_instructions() {
    let kind = ProviderKind::Anthropic;
    let (env, conv) = one_conversation();
    let dir = env.dir.path().join(".agent-db/recipes");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("handoff.md"), KODELET_RECIPE).unwrap();
    // The same name in the config directory is shadowed by ./.agent-db/recipes.
    let cfg_recipes = env.dir.path().join(".config/agent-db/recipes");
    std::fs::create_dir_all(&cfg_recipes).unwrap();
    std::fs::write(
        cfg_recipes.join("handoff.md"),
        "---\nname: handoff\n---\nSHADOWED-RECIPE\n",
    )
    .unwrap();
    std::fs::write(
        cfg_recipes.join("terse.md"),
        "---\ndescription: From the config dir\n---\nTERSE-RECIPE-MARKER\n",
    )
    .unwrap();

    // `agent-db recipes` lists it (run from the directory holding .agent-db/).
    let out = run(cmd(&env).arg("recipes"));
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(
        out.stdout.contains("handoff") && out.stdout.contains("Handoff notes for the next agent"),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout.contains("terse")
            && out.stdout.contains("compact")
            && out.stdout.contains("brief"),
        "{}",
        out.stdout
    );
    let out = run(cmd(&env).args(["recipes", "--json"]));
    assert_eq!(out.code, 0, "{}", out.stderr);
    let doc = out.json();
    let listed = doc["recipes"].as_array().unwrap();
    let handoff = listed
        .iter()
        .find(|r| r["name"] == "handoff")
        .expect("handoff listed");
    assert_eq!(handoff["sha256"], sha256_hex(KODELET_RECIPE));
    assert!(
        handoff["source"]
            .as_str()
            .unwrap()
            .contains(".agent-db/recipes/handoff.md"),
        "{handoff}"
    );
    assert_eq!(
        listed.iter().filter(|r| r["name"] == "handoff").count(),
        1,
        "shadowed once"
    );

    // It loads; its body and the instructions are both in the prompt.
    let server = Server::start(move |_, _| ok(kind, "RECIPE-SUMMARY", (10, 5)));
    let out = run(compact_one(&env, &conv, kind, &server).args([
        "--recipe",
        "handoff",
        "--instructions",
        INSTRUCTIONS,
    ]));
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    assert!(out.stderr.contains("recipe handoff"), "{}", out.stderr);
    let reqs = server.requests();
    assert_eq!(reqs.len(), 1);
    let p = prompt(kind, &reqs[0]);
    assert!(
        p.user.contains(recipe_body(KODELET_RECIPE)),
        "the recipe body is in the prompt:\n{}",
        p.user
    );
    assert!(!p.user.contains("SHADOWED-RECIPE") && !p.user.contains(recipe_body(COMPACT_RECIPE)));
    assert!(
        p.user.contains(INSTRUCTIONS),
        "--instructions is appended, not replacing the recipe"
    );
    let out = run(cmd(&env).args(["history", "--json"]));
    let d = &out.json()["compactions"][0]["details"];
    assert_eq!(d["recipe"]["name"], "handoff");
    assert_eq!(d["recipe"]["sha256"], sha256_hex(KODELET_RECIPE));

    // A recipe from the config directory, by AGENT_DB_RECIPE; a path works too.
    let (env2, conv2) = one_conversation();
    std::fs::create_dir_all(env2.dir.path().join(".config/agent-db/recipes")).unwrap();
    // Its frontmatter's model and max_summary_tokens beat the environment and the defaults, not
    // flags.
    std::fs::write(
        env2.dir.path().join(".config/agent-db/recipes/terse.md"),
        "---\ndescription: d\nmodel: terse-model\nmax_summary_tokens: 900\n---\nTERSE-RECIPE-MARKER\n",
    )
    .unwrap();
    // 400 (not retried): nothing is written, so the same conversation serves every run.
    let server = Server::start(move |_, _| {
        Reply::json(
            400,
            json!({"type": "error", "error": {"type": "invalid_request_error", "message": "no"}}),
        )
    });
    let out = run(compact_one(&env2, &conv2, kind, &server).env("AGENT_DB_RECIPE", "terse"));
    assert_eq!(out.code, PARTIAL, "{}", out.stderr);
    let out = run(cmd(&env2)
        .env("AGENT_DB_API_KEY", KEY)
        .env("AGENT_DB_RECIPE", "terse")
        .env("AGENT_DB_MODEL", "env-model")
        .env("AGENT_DB_MAX_SUMMARY_TOKENS", "444")
        .args([
            "compact",
            &conv2.id,
            "--keep-tokens",
            "2000",
            "--summary-context",
            "400000",
        ])
        .args([
            "--llm-provider",
            "anthropic",
            "--base-url",
            &server.base_url(kind),
            "--max-summary-tokens",
            "333",
        ]));
    assert_eq!(out.code, PARTIAL, "{}", out.stderr);
    let path = env2.file(
        "by-path.md",
        b"---\nname: bypath\n---\nPATH-RECIPE-MARKER\n",
    );
    let out = run(compact_one(&env2, &conv2, kind, &server)
        .arg("--recipe")
        .arg(&path));
    assert_eq!(out.code, PARTIAL, "{}", out.stderr);
    let reqs = server.requests();
    assert_eq!(reqs.len(), 3);
    let p = prompt(kind, &reqs[0]);
    assert!(
        p.user.starts_with("TERSE-RECIPE-MARKER"),
        "AGENT_DB_RECIPE finds the config dir's recipe"
    );
    assert_eq!(
        (p.model.as_str(), p.max_tokens),
        ("test-model", Some(900)),
        "--model wins; the recipe's length"
    );
    let p = prompt(kind, &reqs[1]);
    assert_eq!(
        (p.model.as_str(), p.max_tokens),
        ("terse-model", Some(333)),
        "the recipe's model; --max-summary-tokens wins"
    );
    assert!(
        prompt(kind, &reqs[2])
            .user
            .starts_with("PATH-RECIPE-MARKER"),
        "a path is a recipe"
    );

    // An unknown handler is a clear configuration error (exit 3), before any request.
    std::fs::write(
        dir.join("rocket.md"),
        KODELET_RECIPE.replace("swap_context", "launch_rockets"),
    )
    .unwrap();
    let before = snapshot(&env);
    let server = Server::start(move |_, _| ok(kind, "NEVER", (1, 1)));
    let out = run(compact_one(&env, &conv, kind, &server).args(["--recipe", "rocket"]));
    assert_eq!(out.code, CONFIG, "{}\n{}", out.stdout, out.stderr);
    assert!(
        out.stderr
            .contains("unknown hook handler \"launch_rockets\"")
            && out.stderr.contains("rocket.md"),
        "{}",
        out.stderr
    );
    assert!(server.requests().is_empty());
    let out = run(cmd(&env).arg("recipes"));
    assert_eq!(
        out.code, CONFIG,
        "a broken recipe makes `recipes` fail: {}",
        out.stderr
    );
    assert!(out.stderr.contains("launch_rockets"), "{}", out.stderr);
    assert!(
        out.stdout.contains("handoff"),
        "the good recipes are still listed"
    );
    // An unknown recipe name is a configuration error too.
    let out = run(compact_one(&env, &conv, kind, &server).args(["--recipe", "no-such-recipe"]));
    assert_eq!(out.code, CONFIG, "{}", out.stderr);
    assert!(out.stderr.contains("no-such-recipe"), "{}", out.stderr);
    assert!(server.requests().is_empty());
    // Only the first, successful compaction was written.
    assert_eq!(compactions(&env), 1);
    assert_eq!(env.files_hash(), before.hash);
}

// ---------------------------------------------------------------------------------------------
// 10. Which strategy runs.

#[test]
fn strategy_choice() {
    let kind = ProviderKind::OpenAi;
    let (env, conv) = one_conversation();
    let server = Server::start(move |_, _| ok(kind, "CHOICE-SUMMARY", (10, 5)));

    // Keys and a base URL but no provider: extractive, said on stderr, no request.
    let out = run(cmd(&env)
        .env("AGENT_DB_API_KEY", KEY)
        .env("OPENAI_API_KEY", KEY)
        .env("AGENT_DB_BASE_URL", server.base_url(kind))
        .args(["compact", &conv.id, "--keep-tokens", "2000", "--dry-run"]));
    assert_eq!(out.code, 0, "{}", out.stderr);
    let lines: Vec<&str> = out
        .stderr
        .lines()
        .filter(|l| l.starts_with("strategy:"))
        .collect();
    assert_eq!(
        lines,
        ["strategy: extractive (offline, no LLM: no LLM provider is configured)"],
        "{}",
        out.stderr
    );

    // A real run without a provider: extractive, no request.
    let out = run(cmd(&env)
        .env("AGENT_DB_API_KEY", KEY)
        .env("AGENT_DB_BASE_URL", server.base_url(kind))
        .args(["compact", &conv.id, "--keep-tokens", "2000", "--json"]));
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(out
        .stderr
        .contains("strategy: extractive (offline, no LLM: no LLM provider is configured)"));
    assert_eq!(only_row(&out.json())["strategy"], "extractive");
    assert!(
        server.requests().is_empty(),
        "the extractive strategy makes no request"
    );

    // A provider at its default (remote) URL without a key: extractive, naming the variables.
    let out = run(cmd(&env).env("AGENT_DB_LLM_PROVIDER", "anthropic").args([
        "compact",
        &conv.id,
        "--dry-run",
    ]));
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(
        out.stderr.contains("strategy: extractive (offline, no LLM: LLM provider anthropic is configured but no API key was found (ANTHROPIC_API_KEY, AGENT_DB_API_KEY or [llm] api_key))"),
        "{}",
        out.stderr
    );

    // A local server needs no key.
    let out = run(cmd(&env)
        .args([
            "compact",
            &conv.id,
            "--dry-run",
            "--summary-context",
            "400000",
        ])
        .args(llm_args(kind, &server)));
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(
        out.stderr.contains("key from nowhere: local server"),
        "{}",
        out.stderr
    );

    // --strategy llm without a provider is a configuration error.
    let before = snapshot(&env);
    let out = run(cmd(&env).env("AGENT_DB_API_KEY", KEY).args([
        "compact",
        &conv.id,
        "--strategy",
        "llm",
    ]));
    assert_eq!(out.code, CONFIG, "{}", out.stderr);
    assert!(
        out.stderr
            .contains("--strategy llm: no LLM provider is configured"),
        "{}",
        out.stderr
    );
    assert_eq!(env.files_hash(), before.hash);

    // A dry run with the llm strategy: no request, an estimated cost when a price is known.
    let cfg = price_config(&env, 2.0, 10.0);
    let out = run(cmd(&env)
        .env("AGENT_DB_API_KEY", KEY)
        .arg("--config")
        .arg(&cfg)
        .args([
            "compact",
            "--all-over",
            "0",
            "--idle",
            "0",
            "--keep-tokens",
            "2000",
            "--dry-run",
            "--json",
        ])
        .args(["--summary-context", "6000", "--max-summary-tokens", "500"])
        .args(llm_args(kind, &server)));
    assert_eq!(out.code, 0, "{}", out.stderr);
    let doc = out.json();
    let planned: Vec<&Value> = doc["conversations"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["status"] == "planned")
        .collect();
    assert!(planned.len() >= 3, "{doc:#}");
    for r in &planned {
        assert_eq!(r["strategy"], "llm");
        let c = r["cost_usd"]
            .as_f64()
            .unwrap_or_else(|| panic!("an estimated cost: {r:#}"));
        // At least the input side of every request at $2/Mtok.
        assert!(c > 0.0 && c < 1.0, "{r:#}");
        assert!(r["tokens_after"].as_u64().unwrap() < r["tokens_before"].as_u64().unwrap());
    }
    assert!(doc["totals"]["cost_usd"].as_f64().unwrap() > 0.0);
    assert_eq!(doc["dry_run"], true);
    // Without a known price, no cost, and the status line says so.
    let out = run(cmd(&env)
        .env("AGENT_DB_API_KEY", KEY)
        .args([
            "compact",
            &conv.id,
            "--keep-tokens",
            "2000",
            "--dry-run",
            "--json",
        ])
        .args(llm_args(kind, &server)));
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(only_row(&out.json()).get("cost_usd").is_none());
    assert!(
        out.stderr.contains("no price known for this model"),
        "{}",
        out.stderr
    );
    assert!(server.requests().is_empty(), "dry runs make no request");
    assert_eq!(compactions(&env), 1, "only the extractive run wrote");
}

// ---------------------------------------------------------------------------------------------
// 11. --max-cost.

#[test]
fn max_cost_stops_starting_conversations() {
    let kind = ProviderKind::OpenAi;
    let env = Env::generated(12, 2, &[]);
    let all = planned(&env, 2000);
    assert!(all.len() >= 3, "{all:?}");
    // $1000/Mtok input: 1,000 prompt tokens cost $1, over the $0.50 cap.
    let cfg = price_config(&env, 1000.0, 1000.0);
    let server = Server::start(move |_, _| ok(kind, "COSTLY-SUMMARY", (1000, 10)));
    let out = run(cmd(&env)
        .env("AGENT_DB_API_KEY", KEY)
        .arg("--config")
        .arg(&cfg)
        .args([
            "compact",
            "--all-over",
            "0",
            "--idle",
            "0",
            "--keep-tokens",
            "2000",
            "--summary-context",
            "400000",
        ])
        .args([
            "--concurrency",
            "1",
            "--max-cost",
            "0.50",
            "--yes",
            "--json",
        ])
        .args(llm_args(kind, &server)));
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    let doc = out.json();
    let rows = doc["conversations"].as_array().unwrap();
    let compacted = crate::common::ids_with_status(&doc, "compacted");
    assert_eq!(
        compacted,
        [all[0].id.clone()],
        "only the first conversation is compacted"
    );
    let stopped: Vec<&Value> = rows
        .iter()
        .filter(|r| {
            r["detail"]
                .as_str()
                .is_some_and(|d| d.starts_with("not started: --max-cost"))
        })
        .collect();
    assert_eq!(
        stopped.len(),
        all.len() - 1,
        "every later planned conversation is not started: {doc:#}"
    );
    for r in &stopped {
        assert_eq!(r["status"], "skipped");
        assert!(r["detail"].as_str().unwrap().contains("$0.50"), "{r:#}");
    }
    assert_eq!(doc["totals"]["stopped_by_max_cost"], true);
    assert!(close(
        doc["totals"]["cost_usd"].as_f64().unwrap(),
        (1000.0 * 1000.0 + 10.0 * 1000.0) / 1e6
    ));
    assert_eq!(server.requests().len(), 1);
    assert_eq!(compactions(&env), 1);
}

/// Money spent on a conversation that then fails (a rejected summary, a later chunk failing) is
/// still spent: it must count towards --max-cost and be reported.
#[test]
fn max_cost_counts_the_spend_of_failed_conversations() {
    let kind = ProviderKind::OpenAi;
    let env = Env::generated(12, 2, &[]);
    let all = planned(&env, 2000);
    assert!(all.len() >= 3, "{all:?}");
    let cfg = price_config(&env, 1000.0, 1000.0);
    // Every answer is cut off (rejected), and billed: 1,000 + 500 tokens = $1.50.
    let server = Server::start(move |_, _| {
        Reply::json(
            200,
            answer(
                kind,
                "A summary cut in the mid",
                truncated_stop(kind),
                (1000, 500),
            ),
        )
    });
    let out = run(cmd(&env)
        .env("AGENT_DB_API_KEY", KEY)
        .arg("--config")
        .arg(&cfg)
        .args([
            "compact",
            "--all-over",
            "0",
            "--idle",
            "0",
            "--keep-tokens",
            "2000",
            "--summary-context",
            "400000",
        ])
        .args([
            "--concurrency",
            "1",
            "--max-cost",
            "0.50",
            "--yes",
            "--json",
        ])
        .args(llm_args(kind, &server)));
    assert_eq!(out.code, PARTIAL, "{}", out.stderr);
    let doc = out.json();
    assert_eq!(
        server.requests().len(),
        1,
        "after $1.50 spent on the first (failed) conversation, no other starts: {doc:#}"
    );
    assert_eq!(doc["totals"]["stopped_by_max_cost"], true);
    assert!(
        close(doc["totals"]["cost_usd"].as_f64().unwrap(), 1.5),
        "the spend is reported"
    );
}

// ---------------------------------------------------------------------------------------------
// Settings layers (defaults < config file < environment < flags) reach the wire.

#[test]
fn settings_layers_reach_the_wire() {
    let (env, conv) = one_conversation();
    // Every request fails without a retry (400), so nothing is written and the same
    // conversation serves every run.
    let server = Server::start(|_, _| {
        Reply::json(
            400,
            json!({"error": {"message": "recorded", "type": "test"}}),
        )
    });
    let file = env.file(
        "layers.toml",
        format!(
            "[llm]\nprovider = \"openai\"\nmodel = \"file-model\"\nbase_url = \"{}\"\napi_key = \"file-key-1234\"\n\
             max_summary_tokens = 301\nsummary_context = 400000\ninstructions = \"FILE-INSTR\"\n\n[compact]\nkeep_tokens = 2000\n",
            server.base_url(ProviderKind::OpenAi)
        )
        .as_bytes(),
    );
    let base = |c: &mut assert_cmd::Command| {
        c.arg("--config")
            .arg(&file)
            .args(["compact", &conv.id, "--json"]);
    };
    // The file alone.
    let mut c = cmd(&env);
    base(&mut c);
    assert_eq!(run(&mut c).code, PARTIAL);
    // The environment over the file.
    let mut c = cmd(&env);
    base(&mut c);
    c.env("AGENT_DB_MODEL", "env-model")
        .env("AGENT_DB_MAX_SUMMARY_TOKENS", "302")
        .env("AGENT_DB_API_KEY", "env-key-1234")
        .env("OPENAI_API_KEY", "openai-key-1234")
        .env("AGENT_DB_INSTRUCTIONS", "ENV-INSTR")
        .env("AGENT_DB_RECIPE", "brief");
    assert_eq!(run(&mut c).code, PARTIAL);
    // Flags over the environment.
    c.args([
        "--model",
        "flag-model",
        "--max-summary-tokens",
        "303",
        "--instructions",
        "FLAG-INSTR",
        "--recipe",
        "compact",
    ]);
    assert_eq!(run(&mut c).code, PARTIAL);
    // The provider's own variable when AGENT_DB_API_KEY is unset; the provider from the
    // environment with its own base URL.
    let mut c = cmd(&env);
    base(&mut c);
    c.env("OPENAI_API_KEY", "openai-key-1234");
    assert_eq!(run(&mut c).code, PARTIAL);
    let mut c = cmd(&env);
    base(&mut c);
    c.env("AGENT_DB_LLM_PROVIDER", "anthropic")
        .env(
            "AGENT_DB_BASE_URL",
            server.base_url(ProviderKind::Anthropic),
        )
        .env("ANTHROPIC_API_KEY", "anthropic-key-1234");
    assert_eq!(run(&mut c).code, PARTIAL);

    let reqs = server.requests();
    assert_eq!(reqs.len(), 5, "one request per run (400 is not retried)");
    let o = |i: usize| prompt(ProviderKind::OpenAi, &reqs[i]);
    let auth = |i: usize| {
        reqs[i]
            .headers
            .get("authorization")
            .cloned()
            .unwrap_or_default()
    };

    let p = o(0);
    assert_eq!((p.model.as_str(), p.max_tokens), ("file-model", Some(301)));
    assert_eq!(auth(0), "Bearer file-key-1234");
    assert!(p.user.contains("FILE-INSTR") && p.user.contains(recipe_body(COMPACT_RECIPE)));

    let p = o(1);
    assert_eq!((p.model.as_str(), p.max_tokens), ("env-model", Some(302)));
    assert_eq!(
        auth(1),
        "Bearer env-key-1234",
        "AGENT_DB_API_KEY wins over OPENAI_API_KEY and the file"
    );
    assert!(p.user.contains("ENV-INSTR") && !p.user.contains("FILE-INSTR"));
    assert!(
        p.user.contains(recipe_body(BRIEF_RECIPE)),
        "AGENT_DB_RECIPE=brief"
    );
    assert!(
        p.user.contains("## Withdrawn or superseded") && p.user.contains("never as live"),
        "the brief recipe asks for withdrawn items too"
    );

    let p = o(2);
    assert_eq!((p.model.as_str(), p.max_tokens), ("flag-model", Some(303)));
    assert!(p.user.contains("FLAG-INSTR") && !p.user.contains("ENV-INSTR"));
    assert!(p.user.contains(recipe_body(COMPACT_RECIPE)));

    assert_eq!(
        auth(3),
        "Bearer openai-key-1234",
        "OPENAI_API_KEY over the config file"
    );

    assert_eq!(reqs[4].path, "/v1/messages");
    assert_eq!(
        reqs[4].headers.get("x-api-key").map(String::as_str),
        Some("anthropic-key-1234")
    );
    assert_eq!(
        prompt(ProviderKind::Anthropic, &reqs[4]).model,
        "file-model"
    );

    assert_eq!(compactions(&env), 0);
}

// ---------------------------------------------------------------------------------------------
// `agent-db config` shows values that can be fed back.

#[test]
fn config_shows_the_provider_name_it_accepts() {
    let env = Env::empty();
    let out = run(cmd(&env)
        .env("AGENT_DB_LLM_PROVIDER", "openai")
        .args(["config", "--json"]));
    assert_eq!(out.code, 0, "{}", out.stderr);
    let shown = out.json()["settings"]["llm_provider"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(shown, "openai");
    let out = run(cmd(&env).env("AGENT_DB_LLM_PROVIDER", &shown).arg("config"));
    assert_eq!(
        out.code, 0,
        "the displayed value is accepted back: {}",
        out.stderr
    );
}

#[test]
fn config_names_where_the_file_and_prices_come_from() {
    let env = Env::empty();
    let cfg = price_config(&env, 1.0, 2.0);
    let out = run(cmd(&env).arg("--config").arg(&cfg).arg("config"));
    assert_eq!(out.code, 0, "{}", out.stderr);
    for key in ["config_file", "prices"] {
        let line = out
            .stdout
            .lines()
            .find(|l| l.contains(&format!(" {key} ")))
            .unwrap_or_default();
        assert!(
            !line.trim_end_matches(['│', ' ']).ends_with("default"),
            "{key}: {line}"
        );
    }
}

// ---------------------------------------------------------------------------------------------
// Standing rules and the artifact ledger over the whole history (issue 45).

const LINT_RULE: &str = "Always run `make lint-sedge` before each commit.";
const LINT_WITHDRAWN: &str = "no need to run make lint-sedge anymore; run `make check` instead";

fn prose(seed: usize, words: usize) -> String {
    (0..words)
        .map(|w| format!("word{}", (w * 7 + seed) % 97))
        .collect::<Vec<_>>()
        .join(" ")
}

/// A Chat Completions history: the user's rule in the first message, shell work, then (in the
/// last 2,000 tokens, which `--keep-tokens 2000` keeps) the user replacing that rule.
fn replaced_rule_history() -> String {
    let mut m = vec![json!({"role": "user",
        "content": format!("Refactor the loader in src/loader/mod.rs. {LINT_RULE}")})];
    for i in 0..6 {
        let id = format!("call_{i}");
        m.push(json!({"role": "assistant", "content": "Testing the next crate.", "tool_calls": [{"id": id, "type": "function",
            "function": {"name": "bash", "arguments": json!({"command": format!("cargo test -p loader_{i}")}).to_string()}}]}));
        m.push(json!({"role": "tool", "tool_call_id": id, "content": "test result: ok"}));
        m.push(json!({"role": "assistant", "content": prose(i, 300)}));
    }
    m.push(json!({"role": "user", "content": LINT_WITHDRAWN}));
    m.push(json!({"role": "assistant", "content": prose(50, 300)}));
    m.push(json!({"role": "user", "content": "Continue with the next step."}));
    m.push(json!({"role": "assistant", "content": prose(60, 300)}));
    serde_json::to_string(&m).unwrap()
}

/// The part of a stored summary from the artifact ledger's first line to its last.
fn ledger_of(summary: &str) -> &str {
    let start = summary
        .find("Artifact ledger (verbatim")
        .unwrap_or_else(|| panic!("no ledger in {summary}"));
    let rest = &summary[start..];
    let end = rest
        .find("(end of the artifact ledger)")
        .unwrap_or_else(|| panic!("the ledger is not closed: {rest}"));
    &rest[..end]
}

/// A rule the user replaced in the kept tail reaches the model as withdrawn (its replacement as
/// live), and the ledger appended to the model's answer does not bring it back as a live rule.
#[test]
fn a_rule_replaced_in_the_kept_tail_is_never_live_in_the_request_or_the_ledger() {
    let kind = ProviderKind::OpenAi;
    let env = Env::generated(1, 3, &[SynthFormat::OpenAiChat]);
    let id = env.ids("SELECT id FROM conversations")[0].clone();
    env.conn()
        .execute(
            "UPDATE conversations SET raw_messages = ?1 WHERE id = ?2",
            [replaced_rule_history(), id.clone()],
        )
        .unwrap();
    // The model marks the rule as replaced without repeating it word for word.
    let answer = "## Summary\nThe loader refactor is under way; cargo tests pass. The lint-sedge step was replaced by make check.";
    let server = Server::start(move |_, _| ok(kind, answer, (100, 20)));
    let out = run(cmd(&env)
        .env("AGENT_DB_API_KEY", KEY)
        .args([
            "compact",
            &id,
            "--keep-tokens",
            "2000",
            "--force",
            "--yes",
            "--json",
            "--min-retention",
            "0",
        ])
        .args(llm_args(kind, &server)));
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    let doc = out.json();
    let row = only_row(&doc);
    assert_eq!(row["status"], "compacted", "{doc:#}");

    // The request: the replacement is a standing rule, the replaced rule is listed as withdrawn.
    let reqs = server.requests();
    assert_eq!(reqs.len(), 1);
    let user = prompt(kind, &reqs[0]).user;
    // The prompt quotes rules (the transcript does not quote the user's turns).
    let quoting = |rule: &str| -> Vec<&str> {
        let q = format!("\"{rule}\"");
        user.lines().filter(|l| l.contains(&q)).collect()
    };
    let old = quoting(LINT_RULE);
    assert!(!old.is_empty(), "the replaced rule is not listed:\n{user}");
    for l in &old {
        assert!(
            l.contains("withdrawn") && l.contains(LINT_WITHDRAWN),
            "the replaced rule is listed as live: {l}"
        );
    }
    assert!(
        quoting(LINT_WITHDRAWN)
            .iter()
            .any(|l| !l.contains("withdrawn")),
        "the replacement is not a standing rule:\n{user}"
    );

    // The stored summary: the model's answer, then a ledger whose user rules do not include it.
    let msgs: Vec<Value> = serde_json::from_str(&raw_messages(&env, &id)).unwrap();
    let summary = msgs[0]["content"].as_str().expect("the summary message");
    assert!(
        summary.contains(answer.lines().nth(1).unwrap()),
        "{summary}"
    );
    let ledger = ledger_of(summary);
    assert!(
        !ledger.contains("make lint-sedge` before each commit"),
        "{ledger}"
    );
    // The ledger is in sections, the commands with their outcome.
    assert!(
        ledger.contains("Commands run (outcome):\n- cargo test -p loader_0 [ok]"),
        "{ledger}"
    );
    // The retention of the model's text and of the ledger, apart: the ledger's share is what
    // the commands it lists add (the model's text names no `cargo test -p loader_N`).
    let r = &row["retention"];
    let (score, model, led) = (
        r["score"].as_f64().unwrap(),
        r["model_score"].as_f64().expect("model_score"),
        r["ledger_score"].as_f64().expect("ledger_score"),
    );
    assert!(close(score, model + led), "{r:#}");
    let total: u64 = r["by_kind"]
        .as_object()
        .unwrap()
        .values()
        .map(|c| c["total"].as_u64().unwrap())
        .sum();
    assert!(led * total as f64 >= 6.0 - 1e-9, "six commands: {r:#}");
    // Stored with the audit row: `history --json` gives the same figures, its table the split.
    let hist = run(cmd(&env).args(["history", "--json"]));
    assert_eq!(hist.code, 0, "{}", hist.stderr);
    assert_eq!(hist.json()["compactions"][0]["retention"], *r);
    let table = run(cmd(&env).arg("history"));
    let split = format!(
        "model's text {:.0}% + ledger {:.0}%",
        model * 100.0,
        led * 100.0
    );
    assert!(
        table.stdout.contains(&split),
        "{split} in:\n{}",
        table.stdout
    );
}

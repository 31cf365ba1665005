//! A loopback mock of an OpenAI-compatible Chat Completions server, for benches/llm.sh.
//!
//! ```text
//! cargo run --release --example llm_mock_server -- [--port 0] [--latency-ms 200] \
//!     [--max-requests 0] [--max-seconds 900] [--idle-exit-seconds 0]
//! ```
//!
//! Answers every `POST …/chat/completions` `--latency-ms` after it arrived, with a short summary
//! under every heading of the built-in `compact` recipe, so that agent-db's answer checks pass
//! (`finish_reason: stop`, usage estimated from the request size). `GET /stats` answers JSON:
//! requests served, the most requests in flight at once, and the times (ms since start) of the
//! first request and the last answer, and the arrival time of every request. `GET /quit` stops it. It also stops by itself after
//! `--max-seconds`, after `--max-requests` answers (0 = no limit), or after
//! `--idle-exit-seconds` without a request (0 = never).
//!
//! Prints the port it listens on (127.0.0.1 only) as the first line of stdout, and its final
//! stats on stderr when it stops.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::Parser;
use serde_json::json;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};

#[derive(Parser, Debug)]
#[command(about = "Loopback mock of an OpenAI-compatible chat completions server")]
struct Args {
    /// Port on 127.0.0.1 (0 = any free port).
    #[arg(long, default_value_t = 0)]
    port: u16,
    /// Delay before each answer, in milliseconds.
    #[arg(long, default_value_t = 200)]
    latency_ms: u64,
    /// Stop after this many answers (0 = no limit).
    #[arg(long, default_value_t = 0)]
    max_requests: usize,
    /// Stop after this many seconds in any case.
    #[arg(long, default_value_t = 900)]
    max_seconds: u64,
    /// Stop after this many seconds without a request (counted from the start until the first
    /// request; 0 = never).
    #[arg(long, default_value_t = 0)]
    idle_exit_seconds: u64,
    /// The summary every answer carries.
    #[arg(
        long,
        default_value = "The user asked for a fix; the agent edited the code and the tests pass. Next: open a pull request."
    )]
    summary: String,
}

struct Stats {
    start: Instant,
    /// Unix time of `start`, in ms.
    start_unix_ms: u64,
    served: AtomicUsize,
    in_flight: AtomicUsize,
    max_in_flight: AtomicUsize,
    /// ms since start + 1 (0 = none yet).
    first_request_ms: AtomicU64,
    last_answer_ms: AtomicU64,
    last_request_ms: AtomicU64,
    /// When each request arrived (ms since start + 1), in arrival order.
    arrivals: std::sync::Mutex<Vec<u64>>,
    quit: AtomicBool,
}

impl Stats {
    fn ms(&self) -> u64 {
        self.start.elapsed().as_millis() as u64 + 1
    }
    fn json(&self) -> serde_json::Value {
        let opt = |v: u64| {
            if v == 0 {
                None
            } else {
                Some(self.start_unix_ms + v - 1)
            }
        };
        json!({
            "served": self.served.load(Ordering::SeqCst),
            "in_flight": self.in_flight.load(Ordering::SeqCst),
            "max_in_flight": self.max_in_flight.load(Ordering::SeqCst),
            "first_request_unix_ms": opt(self.first_request_ms.load(Ordering::SeqCst)),
            "last_answer_unix_ms": opt(self.last_answer_ms.load(Ordering::SeqCst)),
            "arrivals_unix_ms": self.arrivals.lock().expect("arrivals").iter().map(|&v| opt(v)).collect::<Vec<_>>(),
        })
    }
}

fn main() {
    let args = Args::parse();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime");
    rt.block_on(serve(args));
}

async fn serve(args: Args) {
    let listener = TcpListener::bind(("127.0.0.1", args.port))
        .await
        .unwrap_or_else(|e| panic!("cannot listen on 127.0.0.1:{}: {e}", args.port));
    let port = listener.local_addr().expect("local addr").port();
    println!("{port}");
    use std::io::Write;
    let _ = std::io::stdout().flush();

    let stats = Arc::new(Stats {
        start: Instant::now(),
        start_unix_ms: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64),
        served: AtomicUsize::new(0),
        in_flight: AtomicUsize::new(0),
        max_in_flight: AtomicUsize::new(0),
        first_request_ms: AtomicU64::new(0),
        last_answer_ms: AtomicU64::new(0),
        last_request_ms: AtomicU64::new(0),
        arrivals: std::sync::Mutex::new(Vec::new()),
        quit: AtomicBool::new(false),
    });
    let args = Arc::new(args);
    let accept = {
        let stats = stats.clone();
        let args = args.clone();
        tokio::spawn(async move {
            while let Ok((sock, _)) = listener.accept().await {
                let _ = sock.set_nodelay(true);
                tokio::spawn(connection(sock, stats.clone(), args.clone()));
            }
        })
    };
    // The stop conditions, checked every 50 ms.
    let deadline = Duration::from_secs(args.max_seconds);
    let why = loop {
        tokio::time::sleep(Duration::from_millis(50)).await;
        if stats.quit.load(Ordering::SeqCst) {
            break "GET /quit";
        }
        if stats.start.elapsed() >= deadline {
            break "--max-seconds";
        }
        let served = stats.served.load(Ordering::SeqCst);
        if args.max_requests > 0 && served >= args.max_requests {
            break "--max-requests";
        }
        // Idle since the last request, or since the start when none came.
        let last = stats.last_request_ms.load(Ordering::SeqCst);
        if args.idle_exit_seconds > 0
            && stats.in_flight.load(Ordering::SeqCst) == 0
            && stats.ms().saturating_sub(last) >= args.idle_exit_seconds * 1000
        {
            break "--idle-exit-seconds";
        }
    };
    accept.abort();
    eprintln!("llm_mock_server: stopping ({why}): {}", stats.json());
}

async fn connection(sock: TcpStream, stats: Arc<Stats>, args: Arc<Args>) {
    let (r, mut w) = sock.into_split();
    let mut r = BufReader::new(r);
    loop {
        let mut line = String::new();
        if r.read_line(&mut line).await.unwrap_or(0) == 0 {
            return;
        }
        let mut parts = line.split_whitespace();
        let method = parts.next().unwrap_or("").to_string();
        let path = parts.next().unwrap_or("").to_string();
        let mut len = 0usize;
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
                if k.trim().eq_ignore_ascii_case("content-length") {
                    len = v.trim().parse().unwrap_or(0);
                }
            }
        }
        let mut body = vec![0u8; len];
        if r.read_exact(&mut body).await.is_err() {
            return;
        }
        let (status, answer) = match (method.as_str(), path.as_str()) {
            ("POST", p) if p.ends_with("/chat/completions") => {
                // The answer is due --latency-ms after the request arrived: the mock's own work
                // (parsing the body) counts inside that time, not on top of it.
                let due = tokio::time::Instant::now() + Duration::from_millis(args.latency_ms);
                let now = stats.ms();
                let _ = stats.first_request_ms.compare_exchange(
                    0,
                    now,
                    Ordering::SeqCst,
                    Ordering::SeqCst,
                );
                stats.last_request_ms.store(now, Ordering::SeqCst);
                stats.arrivals.lock().expect("arrivals").push(now);
                let n = stats.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
                stats.max_in_flight.fetch_max(n, Ordering::SeqCst);
                let model = serde_json::from_slice::<serde_json::Value>(&body)
                    .ok()
                    .and_then(|v| v["model"].as_str().map(str::to_string))
                    .unwrap_or_else(|| "mock".into());
                tokio::time::sleep_until(due).await;
                stats.in_flight.fetch_sub(1, Ordering::SeqCst);
                let i = stats.served.fetch_add(1, Ordering::SeqCst);
                stats.last_answer_ms.store(stats.ms(), Ordering::SeqCst);
                let summary = sectioned(&args.summary);
                let completion = (summary.len() / 4).max(1);
                (
                    200,
                    json!({
                        "id": format!("chatcmpl-mock-{i}"),
                        "object": "chat.completion",
                        "model": model,
                        "choices": [{
                            "index": 0,
                            "message": {"role": "assistant", "content": summary},
                            "finish_reason": "stop"
                        }],
                        "usage": {
                            "prompt_tokens": len / 4,
                            "completion_tokens": completion,
                            "total_tokens": len / 4 + completion
                        }
                    }),
                )
            }
            ("GET", "/stats") => (200, stats.json()),
            ("GET", "/quit") => {
                stats.quit.store(true, Ordering::SeqCst);
                (200, json!({"stopping": true}))
            }
            _ => (
                404,
                json!({"error": {"message": format!("no route for {method} {path}"), "type": "not_found"}}),
            ),
        };
        let body = answer.to_string();
        let head = format!(
            "HTTP/1.1 {status} {}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
            if status == 200 { "OK" } else { "Not Found" },
            body.len()
        );
        if w.write_all(head.as_bytes()).await.is_err()
            || w.write_all(body.as_bytes()).await.is_err()
        {
            return;
        }
    }
}

/// `text` under the first heading of the built-in `compact` recipe and a line of prose under
/// each of the others (an answer that has a heading already is sent as is).
fn sectioned(text: &str) -> String {
    if text.contains("\n## ") || text.starts_with("## ") {
        return text.to_string();
    }
    let recipe = include_str!("../src/recipes/compact.md");
    let mut out = String::new();
    for (i, h) in recipe.lines().filter(|l| l.starts_with("## ")).enumerate() {
        let body = if i == 0 {
            text
        } else {
            "Nothing further was recorded under this heading for this part of the work; the \
             mock answers the same prose for every request it serves."
        };
        out.push_str(&format!("{h}\n{body}\n\n"));
    }
    out
}

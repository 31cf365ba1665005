//! Re-summaries from the originals, end to end: one growing conversation (planted by this test
//! with its own SQL: the user's rule, numbers, paths and commands in its first turns) compacted
//! five times, new turns appended between compactions as the agent would, with the extractive
//! strategy and with the `llm` strategy against a real HTTP model server on 127.0.0.1 (a
//! summarizer that echoes a bounded number of input lines, the conversation's before the
//! earlier summary's). Checked with the test's own string search of the stored history: the
//! first turns' facts are kept after compaction 5 at the rate compaction 1 kept them, the
//! summary stays within a stated bound, the audit row says the summary was written from the
//! originals, each restore gives back the state before its compaction byte for byte, and a
//! pruned archive makes the re-compaction summarize the earlier summary and say so.

use agent_db::tokens::count_text;
use agent_db_synth::SynthFormat;
use serde_json::{json, Value};

use crate::common::Env;

const RULE: &str = "Never push to the main branch without review.";
const PLANTED: usize = 6;

/// Letters only: no line of filler looks like a fact (digits, paths) to the echo model.
fn filler(seed: usize, words: usize) -> String {
    const W: [&str; 12] = [
        "alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india",
        "juliet", "kilo", "lima",
    ];
    (0..words)
        .map(|w| W[(w * 7 + seed) % W.len()])
        .collect::<Vec<_>>()
        .join(" ")
}

fn path(i: usize) -> String {
    format!("src/planted/mod_{i}.rs")
}

fn command(i: usize) -> String {
    format!("cargo test -p planted_crate_{i}")
}

/// The facts of the first turns, as the test searches for them in the stored history.
fn facts() -> Vec<String> {
    let mut f = vec![RULE.to_string(), "4711".into(), "8443".into()];
    f.extend((0..PLANTED).map(path));
    f.extend((0..PLANTED).map(command));
    f
}

/// A Chat Completions history: the planted first turns, then `long` turns of prose.
fn planted(long: usize) -> String {
    let mut m = vec![json!({"role": "user", "content": format!(
        "Refactor the loader. {RULE} The timeout must stay at 4711 ms and the port is 8443."
    )})];
    for i in 0..PLANTED {
        let id = format!("call_{i}");
        m.push(json!({"role": "assistant", "content": format!("Editing {} next.", path(i)), "tool_calls": [{"id": id, "type": "function",
            "function": {"name": "bash", "arguments": json!({"command": command(i)}).to_string()}}]}));
        m.push(json!({"role": "tool", "tool_call_id": id, "content": format!("ok: checked {}", path(i))}));
    }
    for i in 0..long {
        m.push(
            json!({"role": "user", "content": format!("Go on with the {} part.", filler(i, 3))}),
        );
        m.push(json!({"role": "assistant", "content": filler(100 + i, 400)}));
    }
    serde_json::to_string(&m).unwrap()
}

/// Turns the agent appends after compaction `k`: each names new paths on lines of their own.
fn new_turns(k: usize) -> Vec<Value> {
    let mut m = Vec::new();
    for t in 0..12 {
        m.push(json!({"role": "user", "content": format!("Continue with round {k} task {t}.")}));
        let edits: Vec<String> = (0..3)
            .map(|j| format!("Edited src/later/round{k}_{t}_{j}.rs and ran cargo check"))
            .collect();
        m.push(json!({"role": "assistant", "content": format!("{}\n{}", edits.join("\n"), filler(k * 31 + t, 250))}));
    }
    m
}

fn env(long: usize) -> (Env, String) {
    let env = Env::generated(1, 7, &[SynthFormat::OpenAiChat]);
    let id = env.ids("SELECT id FROM conversations")[0].clone();
    env.conn()
        .execute(
            "UPDATE conversations SET raw_messages = ?1 WHERE id = ?2",
            [planted(long), id.clone()],
        )
        .unwrap();
    (env, id)
}

fn raw_messages(env: &Env, id: &str) -> String {
    env.conn()
        .query_row(
            "SELECT raw_messages FROM conversations WHERE id = ?1",
            [id],
            |r| r.get(0),
        )
        .unwrap()
}

/// Append turns the way the agent saves its history: the stored array with new elements at
/// its end, the earlier bytes untouched.
fn append(env: &Env, id: &str, turns: &[Value]) {
    let raw = raw_messages(env, id);
    let body = raw.trim_end().strip_suffix(']').expect("a JSON array");
    let more: Vec<String> = turns.iter().map(Value::to_string).collect();
    let grown = format!("{body},{}]", more.join(","));
    env.conn()
        .execute(
            "UPDATE conversations SET raw_messages = ?1 WHERE id = ?2",
            [grown, id.to_string()],
        )
        .unwrap();
}

/// The summary agent-db wrote: the first message's text.
fn summary_text(env: &Env, id: &str) -> String {
    let v: Value = serde_json::from_str(&raw_messages(env, id)).unwrap();
    let text = v[0]["content"]
        .as_str()
        .expect("a text summary")
        .to_string();
    assert!(text.starts_with("[agent-db compaction summary]"), "{text}");
    text
}

/// How many of the first turns' facts the stored history holds (the test's own search).
fn kept_facts(env: &Env, id: &str) -> usize {
    let v: Value = serde_json::from_str(&raw_messages(env, id)).unwrap();
    // Search the decoded text: a JSON string escapes nothing these facts hold, but a tool
    // call's arguments are a string inside a string.
    let text: String = v
        .as_array()
        .unwrap()
        .iter()
        .map(|m| format!("{} {}\n", m["content"], m["tool_calls"]))
        .collect::<String>()
        .replace("\\\"", "\"");
    facts().iter().filter(|f| text.contains(f.as_str())).count()
}

fn run(mut c: assert_cmd::Command) -> (Value, i32, String) {
    let o = c.output().unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr).into_owned();
    let doc = serde_json::from_slice(&o.stdout).unwrap_or(Value::Null);
    (doc, o.status.code().unwrap_or(-1), stderr)
}

fn compact(env: &Env, id: &str, extra: &[String]) -> Value {
    let mut c = env.cmd();
    c.current_dir(env.dir.path())
        .env("AGENT_DB_API_KEY", "x")
        .args([
            "compact",
            id,
            "--keep-tokens",
            "2000",
            "--force",
            "--yes",
            "--json",
        ])
        .args(extra);
    let (doc, code, err) = run(c);
    assert_eq!(code, 0, "{doc:#}\n{err}");
    let row = doc["conversations"][0].clone();
    assert_eq!(row["status"], "compacted", "{row:#}\n{err}");
    row
}

fn audit_details(env: &Env, compaction: i64) -> Value {
    let d: String = env
        .conn()
        .query_row(
            "SELECT details FROM agent_db_compactions WHERE id = ?1",
            [compaction],
            |r| r.get(0),
        )
        .unwrap();
    serde_json::from_str(&d).unwrap()
}

/// The conversation's rows in kodelet's two tables, cell by cell.
fn state(env: &Env) -> Vec<Vec<Vec<String>>> {
    vec![
        env.dump("conversations"),
        env.dump("conversation_summaries"),
    ]
}

/// Five compactions of one growing conversation with `strategy`; returns each step's kept
/// facts and summary.
fn five_compactions(env: &Env, id: &str, strategy: &[String]) -> (Vec<usize>, Vec<String>) {
    let (mut kept, mut sizes, mut before) = (Vec::new(), Vec::new(), Vec::new());
    for k in 1..=5 {
        before.push(state(env));
        let row = compact(env, id, strategy);
        let cid = row["compaction_id"].as_i64().unwrap();
        let details = audit_details(env, cid);
        if k == 1 {
            assert!(details.get("resummary").is_none(), "{details:#}");
        } else {
            // Written from the originals the archive holds, not from the earlier summary.
            assert_eq!(details["resummary"]["from"], "originals", "{details:#}");
            assert_eq!(details["resummary"]["compactions"], k - 1, "{details:#}");
            assert!(row.get("note").is_none(), "{row:#}");
        }
        kept.push(kept_facts(env, id));
        sizes.push(summary_text(env, id));
        if k < 5 {
            append(env, id, &new_turns(k));
        }
    }
    eprintln!(
        "kept {kept:?} of {}, summary characters {:?}",
        facts().len(),
        sizes.iter().map(|s| s.chars().count()).collect::<Vec<_>>()
    );
    // Each restore, newest first, gives back the state before its compaction byte for byte
    // (the older ones with --force: the test appended turns after them).
    for k in (1..=5).rev() {
        let mut c = env.cmd();
        c.args(["restore", id]);
        if k < 5 {
            c.arg("--force");
        }
        let (_, code, err) = run(c);
        assert_eq!(code, 0, "restore {k}: {err}");
        assert_eq!(state(env), before[k - 1], "restore of compaction {k}");
    }
    (kept, sizes)
}

/// The first turns' facts are kept after every compaction at least at the first one's rate
/// (which keeps at least 90% of them), and every summary is within `bound` (its measure of a
/// summary, and the bound).
fn assert_no_drift(env_kept: &[usize], sizes: &[usize], bound: usize) {
    let total = facts().len();
    assert!(
        env_kept[0] * 10 >= total * 9,
        "compaction 1 keeps {}/{total}",
        env_kept[0]
    );
    for (k, n) in env_kept.iter().enumerate() {
        assert!(
            *n >= env_kept[0],
            "compaction {} keeps {n}/{total} of the first turns' facts, compaction 1 kept {}/{total} ({env_kept:?})",
            k + 1,
            env_kept[0]
        );
    }
    for (k, s) in sizes.iter().enumerate() {
        assert!(
            *s <= bound,
            "summary {} measures {s}, over the bound {bound} ({sizes:?})",
            k + 1
        );
    }
}

#[test]
fn five_extractive_re_compactions_keep_the_first_turns_and_a_bounded_summary() {
    // The originals grow by 36 new paths a round, so the summary grows with them, but never
    // past the extractive cap: 6,000 tokens of content plus its framing paragraph (it would
    // grow without bound if each summary carried the one before, which is never cut).
    let (env, id) = env(90);
    let (kept, summaries) =
        five_compactions(&env, &id, &["--strategy".into(), "extractive".into()]);
    let tokens: Vec<usize> = summaries.iter().map(|s| count_text(s)).collect();
    eprintln!("summary tokens {tokens:?}");
    assert_no_drift(&kept, &tokens, 6_000 + 100);
}

// ---------------------------------------------------------------------------------------------
// An echoing model on 127.0.0.1.

/// The lines the echo model keeps: at most `LINES`, first the transcript's lines holding a
/// digit or a slash (a fact, by its crude eye), then the earlier summary's, in order.
const LINES: usize = 40;

fn echo(prompt: &str) -> String {
    let section = |open: &str, close: &str| -> Vec<String> {
        prompt
            .split_once(open)
            .and_then(|(_, rest)| rest.split_once(close))
            .map(|(body, _)| body.lines().map(str::to_string).collect())
            .unwrap_or_default()
    };
    let facty = |l: &String| l.contains('/') || l.chars().any(|c| c.is_ascii_digit());
    let mut out: Vec<String> = section("<conversation>", "</conversation>")
        .into_iter()
        .filter(facty)
        .take(LINES)
        .collect();
    let room = LINES - out.len();
    out.extend(
        section("<prior-summary>", "</prior-summary>")
            .into_iter()
            .filter(facty)
            .take(room),
    );
    let lines: Vec<String> = out
        .into_iter()
        .map(|l| l.chars().take(200).collect())
        .collect();
    format!("## Summary\n{}", lines.join("\n"))
}

/// An OpenAI-compatible chat-completions server on 127.0.0.1 answering with [`echo`] of the
/// request's user message.
fn echo_server() -> String {
    let server = crate::common::MiniLlm::answering(|req| {
        let prompt = req["messages"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|m| m["role"] == "user")
            .filter_map(|m| m["content"].as_str())
            .collect::<Vec<_>>()
            .join("\n");
        echo(&prompt)
    });
    server.base_url()
}

fn llm_args(base_url: &str) -> Vec<String> {
    [
        "--strategy",
        "llm",
        "--llm-provider",
        "openai",
        "--model",
        "test-model",
        "--summary-context",
        "400000",
        "--min-retention",
        "0",
        "--base-url",
        base_url,
    ]
    .map(str::to_string)
    .to_vec()
}

#[test]
fn five_llm_re_compactions_keep_the_first_turns_and_a_bounded_summary() {
    let (env, id) = env(30);
    let url = echo_server();
    let (kept, summaries) = five_compactions(&env, &id, &llm_args(&url));
    let chars: Vec<usize> = summaries.iter().map(|s| s.chars().count()).collect();
    // The model's part is what the echo writes (at most 40 lines of 200 characters), the
    // ledger at most 8,000 characters, the framing under 600.
    assert_no_drift(&kept, &chars, LINES * 201 + 8_000 + 600);
}

/// The same five llm compactions, each written from the summary before it (the archive pruned
/// before each, so agent-db falls back): the model favours the new turns, and the first turns'
/// numbers, which no ledger keeps, are gone by the second. What the test above guards against.
#[test]
fn summaries_of_summaries_lose_the_first_turns() {
    let (env, id) = env(30);
    let url = echo_server();
    let mut kept = Vec::new();
    for k in 1..=3 {
        let mut c = env.cmd();
        c.env("AGENT_DB_NOW", "2026-11-02T12:00:00Z").args([
            "prune-archive",
            "--older-than",
            "1h",
            "--yes",
        ]);
        assert_eq!(run(c).1, 0);
        let row = compact(&env, &id, &llm_args(&url));
        if k > 1 {
            assert!(
                row["note"].as_str().unwrap_or_default().contains("pruned"),
                "{row:#}"
            );
        }
        kept.push(kept_facts(&env, &id));
        append(&env, &id, &new_turns(k));
    }
    assert!(kept[2] < kept[0], "{kept:?}");
}

#[test]
fn a_pruned_archive_summarizes_the_earlier_summary_and_says_so() {
    let (env, id) = env(30);
    let extractive = ["--strategy".to_string(), "extractive".to_string()];
    compact(&env, &id, &extractive);
    let first = summary_text(&env, &id);
    append(&env, &id, &new_turns(1));
    // A day later, every archive is pruned.
    let mut c = env.cmd();
    c.env("AGENT_DB_NOW", "2026-11-02T12:00:00Z").args([
        "prune-archive",
        "--older-than",
        "1h",
        "--yes",
    ]);
    let (_, code, err) = run(c);
    assert_eq!(code, 0, "{err}");
    let row = compact(&env, &id, &extractive);
    let note = row["note"].as_str().unwrap_or_default();
    assert!(
        note.contains("summarized from the earlier summary") && note.contains("pruned"),
        "{row:#}"
    );
    let details = audit_details(&env, row["compaction_id"].as_i64().unwrap());
    assert_eq!(
        details["resummary"]["from"], "earlier summary",
        "{details:#}"
    );
    assert!(
        details["resummary"]["why"]
            .as_str()
            .unwrap()
            .contains("pruned"),
        "{details:#}"
    );
    // The earlier summary's body is carried into the new one.
    let body = first.split_once("\n\n").map(|(_, b)| b.trim()).unwrap();
    let line = body
        .lines()
        .find(|l| l.contains("4711"))
        .expect("the numbers line");
    assert!(summary_text(&env, &id).contains(line.trim()), "{line}");
}

/// A store whose histories agent-db does not read back from its archive yet (goose: it only
/// appends, and keeps no pre-image of the history) re-compacts from the earlier summary, and
/// every such row and audit row says so.
#[test]
fn a_store_that_does_not_read_its_originals_back_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("sessions.db");
    let opts = agent_db_synth::SynthOptions {
        conversations: 12,
        seed: 5,
        scale: 1.0,
        ..agent_db_synth::SynthOptions::default()
    };
    let schema = agent_db_synth::goose::GooseSchema::preset("goose-v16").unwrap();
    agent_db_synth::goose::generate_goose(&db, &opts, &schema).unwrap();
    let pass = |keep: &str| {
        let mut c = crate::common::bare_cmd(dir.path());
        c.arg("--db").arg(&db).args([
            "compact",
            "--all-over",
            "0",
            "--idle",
            "0",
            "--keep-tokens",
            keep,
            "--force",
            "--yes",
            "--json",
            "--strategy",
            "extractive",
        ]);
        let (doc, _, err) = run(c);
        assert!(doc.is_object(), "{err}");
        doc["conversations"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|r| r["status"] == "compacted")
            .cloned()
            .collect::<Vec<_>>()
    };
    let first = pass("2000");
    assert!(first.iter().all(|r| r.get("note").is_none()), "{first:#?}");
    let before: Vec<&Value> = first.iter().map(|r| &r["id"]).collect();
    let again: Vec<Value> = pass("300")
        .into_iter()
        .filter(|r| before.contains(&&r["id"]))
        .collect();
    assert!(!again.is_empty(), "nothing compacted twice");
    let conn = rusqlite::Connection::open(&db).unwrap();
    for r in &again {
        let note = r["note"].as_str().unwrap_or_default();
        assert!(
            note.contains("summarized from the earlier summary")
                && note.contains("does not read goose histories back"),
            "{r:#}"
        );
        let details: String = conn
            .query_row(
                "SELECT details FROM agent_db_compactions WHERE id = ?1",
                [r["compaction_id"].as_i64().unwrap()],
                |row| row.get(0),
            )
            .unwrap();
        let details: Value = serde_json::from_str(&details).unwrap();
        assert_eq!(
            details["resummary"]["from"], "earlier summary",
            "{details:#}"
        );
    }
}

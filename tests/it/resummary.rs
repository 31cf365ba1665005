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

fn env(long: usize) -> Kodelet {
    let env = Env::generated(1, 7, &[SynthFormat::OpenAiChat]);
    let id = env.ids("SELECT id FROM conversations")[0].clone();
    env.conn()
        .execute(
            "UPDATE conversations SET raw_messages = ?1 WHERE id = ?2",
            [planted(long), id.clone()],
        )
        .unwrap();
    Kodelet { env, id }
}

/// One growing conversation in one store, as the test plants, continues and reads it.
trait Subject {
    /// agent-db on the store.
    fn cmd(&self) -> assert_cmd::Command;
    fn conn(&self) -> rusqlite::Connection;
    fn id(&self) -> &str;
    /// Append the agent's turns after compaction `k`, as the agent saves them.
    fn append(&self, k: usize);
    /// Everything the agent sends the model now, as text to search (the test's own replay of
    /// the agent's loading rule).
    fn sent(&self) -> String;
    /// The summary agent-db wrote, as the agent sends it.
    fn summary(&self) -> String;
    /// The agent's tables (agent-db's own left out), cell by cell.
    fn state(&self) -> Vec<Vec<Vec<String>>>;
    /// Whether the store only appends (the agent's turns after a compaction are rows of their
    /// own, which a restore leaves in place).
    fn appends_only(&self) -> bool;
    /// [`Subject::state`] of a copy of the store after `restore` of its newest compaction.
    fn restored_copy(&self) -> Vec<Vec<Vec<String>>> {
        unreachable!("only an append-only store restores a copy")
    }
}

struct Kodelet {
    env: Env,
    id: String,
}

impl Kodelet {
    fn raw_messages(&self) -> String {
        raw_messages(&self.env, &self.id)
    }
}

impl Subject for Kodelet {
    fn cmd(&self) -> assert_cmd::Command {
        let mut c = self.env.cmd();
        c.current_dir(self.env.dir.path());
        c
    }
    fn conn(&self) -> rusqlite::Connection {
        self.env.conn()
    }
    fn id(&self) -> &str {
        &self.id
    }
    fn append(&self, k: usize) {
        append(&self.env, &self.id, &new_turns(k));
    }
    fn sent(&self) -> String {
        let v: Value = serde_json::from_str(&self.raw_messages()).unwrap();
        v.as_array()
            .unwrap()
            .iter()
            .map(|m| format!("{} {}\n", m["content"], m["tool_calls"]))
            .collect()
    }
    fn summary(&self) -> String {
        let v: Value = serde_json::from_str(&self.raw_messages()).unwrap();
        v[0]["content"]
            .as_str()
            .expect("a text summary")
            .to_string()
    }
    /// The conversation's rows in kodelet's two tables, cell by cell.
    fn state(&self) -> Vec<Vec<Vec<String>>> {
        vec![
            self.env.dump("conversations"),
            self.env.dump("conversation_summaries"),
        ]
    }
    fn appends_only(&self) -> bool {
        false
    }
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

/// How many of the first turns' facts the agent sends now (the test's own search). A JSON
/// string escapes nothing these facts hold, but a tool call's arguments are a string inside a
/// string.
fn kept_facts(s: &dyn Subject) -> usize {
    let text = s.sent().replace("\\\"", "\"");
    facts().iter().filter(|f| text.contains(f.as_str())).count()
}

fn extractive() -> Vec<String> {
    vec!["--strategy".into(), "extractive".into()]
}

fn run(mut c: assert_cmd::Command) -> (Value, i32, String) {
    let o = c.output().unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr).into_owned();
    let doc = serde_json::from_slice(&o.stdout).unwrap_or(Value::Null);
    (doc, o.status.code().unwrap_or(-1), stderr)
}

fn compact(s: &dyn Subject, extra: &[String]) -> Value {
    let mut c = s.cmd();
    c.env("AGENT_DB_API_KEY", "x")
        .args([
            "compact",
            s.id(),
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

fn audit_details(s: &dyn Subject, compaction: i64) -> Value {
    let d: String = s
        .conn()
        .query_row(
            "SELECT details FROM agent_db_compactions WHERE id = ?1",
            [compaction],
            |r| r.get(0),
        )
        .unwrap();
    serde_json::from_str(&d).unwrap()
}

/// Every agent table, every row in rowid order (agent-db's own tables, and their
/// `sqlite_sequence` rows, left out; `sqlite_sequence` whole with `no_sequence`: docker-agent's
/// restore deletes the summary item and leaves the counter, which docker-agent never reads
/// back).
fn agent_tables(c: &rusqlite::Connection, no_sequence: bool) -> Vec<Vec<Vec<String>>> {
    crate::common::dump_all(c)
        .into_iter()
        .filter(|(t, _)| !(t.starts_with("agent_db_") || no_sequence && t == "sqlite_sequence"))
        .map(|(t, rows)| {
            let rows: Vec<Vec<String>> = rows
                .into_iter()
                .filter(|r| !(t == "sqlite_sequence" && r[1].starts_with("Text(\"agent_db_")))
                .collect();
            (t, rows)
        })
        // A sequence table that only agent-db's own tables brought in.
        .filter(|(t, rows)| !(t == "sqlite_sequence" && rows.is_empty()))
        .map(|(_, rows)| rows)
        .collect()
}

/// Five compactions of one growing conversation with `strategy`; returns each step's kept
/// facts and summary. Each restore gives back the state before its compaction byte for byte:
/// for a store that rewrites the history, all five at the end, newest first (the older ones
/// with --force: the test appended turns after them); for an append-only store on a copy of
/// the store made right after each compaction (a forced restore there keeps what the agent
/// appended since, as the agent's own history would).
fn five_compactions(s: &dyn Subject, strategy: &[String]) -> (Vec<usize>, Vec<String>) {
    let (mut kept, mut sizes, mut before) = (Vec::new(), Vec::new(), Vec::new());
    let at_once = s.appends_only();
    for k in 1..=5 {
        before.push(s.state());
        let row = compact(s, strategy);
        if at_once {
            same_state(&s.restored_copy(), &before[k - 1], k);
        }
        let cid = row["compaction_id"].as_i64().unwrap();
        let details = audit_details(s, cid);
        if k == 1 {
            assert!(details.get("resummary").is_none(), "{details:#}");
        } else {
            // Written from the originals the store and its archive hold, not from the earlier
            // summary.
            assert_eq!(details["resummary"]["from"], "originals", "{details:#}");
            assert_eq!(details["resummary"]["compactions"], k - 1, "{details:#}");
            assert!(row.get("note").is_none(), "{row:#}");
        }
        kept.push(kept_facts(s));
        let summary = s.summary();
        assert!(summary.contains("agent-db"), "{summary}");
        sizes.push(summary);
        if k < 5 {
            s.append(k);
        }
    }
    eprintln!(
        "kept {kept:?} of {}, summary characters {:?}",
        facts().len(),
        sizes.iter().map(|s| s.chars().count()).collect::<Vec<_>>()
    );
    if !at_once {
        for k in (1..=5).rev() {
            let mut c = s.cmd();
            c.args(["restore", s.id()]);
            if k < 5 {
                c.arg("--force");
            }
            let (_, code, err) = run(c);
            assert_eq!(code, 0, "restore {k}: {err}");
            same_state(&s.state(), &before[k - 1], k);
        }
    }
    (kept, sizes)
}

/// The state after restoring compaction `k` is the state before it; the first difference
/// when not (the states are too large to print whole).
fn same_state(now: &[Vec<Vec<String>>], then: &[Vec<Vec<String>>], k: usize) {
    if now == then {
        return;
    }
    for (t, (a, b)) in now.iter().zip(then).enumerate() {
        if a.len() != b.len() {
            panic!(
                "restore of compaction {k}: table {t} has {} rows, had {}",
                a.len(),
                b.len()
            );
        }
        if let Some((x, y)) = a.iter().zip(b).find(|(x, y)| x != y) {
            panic!("restore of compaction {k}: table {t} row now {x:?}, was {y:?}");
        }
    }
    panic!(
        "restore of compaction {k}: {} tables, were {}",
        now.len(),
        then.len()
    );
}

/// Compact, continue, prune every archive, compact again: the re-compaction summarizes the
/// earlier summary, and its row and audit row say so. Returns the two summaries.
fn pruned_fallback(s: &dyn Subject) -> (String, String) {
    let extractive = ["--strategy".to_string(), "extractive".to_string()];
    compact(s, &extractive);
    let first = s.summary();
    s.append(1);
    // A day later, every archive is pruned.
    let mut c = s.cmd();
    c.env("AGENT_DB_NOW", "2026-11-02T12:00:00Z").args([
        "prune-archive",
        "--older-than",
        "1h",
        "--yes",
    ]);
    let (_, code, err) = run(c);
    assert_eq!(code, 0, "{err}");
    let row = compact(s, &extractive);
    let note = row["note"].as_str().unwrap_or_default();
    assert!(
        note.contains("summarized from the earlier summary") && note.contains("pruned"),
        "{row:#}"
    );
    let details = audit_details(s, row["compaction_id"].as_i64().unwrap());
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
    (first, s.summary())
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
    let k = env(90);
    let (kept, summaries) = five_compactions(&k, &extractive());
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
    let k = env(30);
    let url = echo_server();
    let (kept, summaries) = five_compactions(&k, &llm_args(&url));
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
    let s = env(30);
    let url = echo_server();
    let mut kept = Vec::new();
    for k in 1..=3 {
        let mut c = s.cmd();
        c.env("AGENT_DB_NOW", "2026-11-02T12:00:00Z").args([
            "prune-archive",
            "--older-than",
            "1h",
            "--yes",
        ]);
        assert_eq!(run(c).1, 0);
        let row = compact(&s, &llm_args(&url));
        if k > 1 {
            assert!(
                row["note"].as_str().unwrap_or_default().contains("pruned"),
                "{row:#}"
            );
        }
        kept.push(kept_facts(&s));
        s.append(k);
    }
    assert!(kept[2] < kept[0], "{kept:?}");
}

#[test]
fn a_pruned_archive_summarizes_the_earlier_summary_and_says_so() {
    let (first, second) = pruned_fallback(&env(30));
    // The earlier summary's body is carried into the new one.
    let body = first.split_once("\n\n").map(|(_, b)| b.trim()).unwrap();
    let line = body
        .lines()
        .find(|l| l.contains("4711"))
        .expect("the numbers line");
    assert!(second.contains(line.trim()), "{line}");
}

/// goose's generated sessions (tool pairs, images, exotic rows, odd visibility), compacted
/// twice: every second compaction is written from the originals read back from the live rows
/// and the archive, and says so in its audit row.
#[test]
fn generated_goose_sessions_re_compact_from_their_originals() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("sessions.db");
    let opts = agent_db_synth::SynthOptions {
        conversations: 6,
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
        crate::common::all_rows(&doc)
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
        assert!(r.get("note").is_none(), "{r:#}");
        let details: String = conn
            .query_row(
                "SELECT details FROM agent_db_compactions WHERE id = ?1",
                [r["compaction_id"].as_i64().unwrap()],
                |row| row.get(0),
            )
            .unwrap();
        let details: Value = serde_json::from_str(&details).unwrap();
        assert_eq!(details["resummary"]["from"], "originals", "{details:#}");
        assert_eq!(details["resummary"]["compactions"], 1, "{details:#}");
    }
}

// ---------------------------------------------------------------------------------------------
// docker-agent, goose and opencode: the same planted conversation, written with the test's own
// SQL as each agent stores it, and read back by the test's own replay of each agent's loading
// rule. Their originals stay in the live rows (hidden, or before a summary item or compaction
// message); agent-db reads docker-agent's and goose's from there and from the archive.

/// A store made by the generator (for its schema), its first root conversation emptied and
/// replanted by the test.
struct Agent {
    dir: tempfile::TempDir,
    db: std::path::PathBuf,
    id: String,
    kind: Kind,
    /// opencode: the model the user messages name.
    model: Value,
}

#[derive(Clone, Copy)]
enum Kind {
    DockerAgent,
    Goose,
    Opencode,
}

/// The planted history as the agent-neutral Chat Completions values [`planted`] writes.
fn planted_turns(long: usize) -> Vec<Value> {
    serde_json::from_str(&planted(long)).unwrap()
}

/// The store's file name, and how the test finds the conversation it replants.
fn layout(kind: Kind) -> (&'static str, &'static str) {
    match kind {
        Kind::DockerAgent => (
            "session.db",
            "SELECT id FROM sessions WHERE COALESCE(parent_id, '') = '' ORDER BY id LIMIT 1",
        ),
        Kind::Goose => ("sessions.db", "SELECT id FROM sessions ORDER BY id LIMIT 1"),
        Kind::Opencode => (
            "opencode.db",
            "SELECT id FROM session WHERE parent_id IS NULL ORDER BY id LIMIT 1",
        ),
    }
}

/// A generated store of one small conversation, for its schema (copied for each use).
fn template(kind: Kind) -> (tempfile::TempDir, std::path::PathBuf) {
    use agent_db_synth::SynthOptions;
    let dir = tempfile::tempdir().unwrap();
    let opts = SynthOptions {
        conversations: 1,
        seed: 5,
        scale: 0.05,
        ..SynthOptions::default()
    };
    let db = dir.path().join(layout(kind).0);
    match kind {
        Kind::DockerAgent => agent_db_synth::docker_agent::generate_docker_agent(
            &db,
            &opts,
            agent_db_synth::docker_agent::Generation::Modern,
        )
        .map(|_| ()),
        Kind::Goose => agent_db_synth::goose::generate_goose(
            &db,
            &opts,
            &agent_db_synth::goose::GooseSchema::preset("goose-v16").unwrap(),
        )
        .map(|_| ()),
        Kind::Opencode => agent_db_synth::opencode::generate_opencode(
            &db,
            &opts,
            agent_db_synth::opencode::OpencodeEra::preset("opencode-1.18").unwrap(),
        )
        .map(|_| ()),
    }
    .unwrap();
    (dir, db)
}

/// A copy of `template` whose conversation the test empties and replants with [`planted`].
fn agent(kind: Kind, template: &std::path::Path, long: usize) -> Agent {
    let (name, sql) = layout(kind);
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join(name);
    std::fs::copy(template, &db).unwrap();
    let c = rusqlite::Connection::open(&db).unwrap();
    let id: String = c.query_row(sql, [], |r| r.get(0)).unwrap();
    let mut model = Value::Null;
    match kind {
        Kind::DockerAgent => {
            c.execute("DELETE FROM session_items WHERE session_id = ?1", [&id])
                .unwrap();
        }
        Kind::Goose => {
            c.execute("DELETE FROM messages WHERE session_id = ?1", [&id])
                .unwrap();
            // A provider goose compacts for (not one that manages its own context).
            c.execute(
                "UPDATE sessions SET provider_name = 'openai' WHERE id = ?1",
                [&id],
            )
            .unwrap();
        }
        Kind::Opencode => {
            let user: String = c
                .query_row(
                    "SELECT data FROM message WHERE session_id = ?1 AND json_extract(data, '$.role') = 'user' LIMIT 1",
                    [&id],
                    |r| r.get(0),
                )
                .unwrap();
            model = serde_json::from_str::<Value>(&user).unwrap()["model"].clone();
            c.execute("DELETE FROM part WHERE session_id = ?1", [&id])
                .unwrap();
            c.execute("DELETE FROM message WHERE session_id = ?1", [&id])
                .unwrap();
        }
    }
    let a = Agent {
        dir,
        db,
        id,
        kind,
        model,
    };
    a.write(&planted_turns(long));
    a
}

impl Agent {
    /// Append `turns` after everything the session holds, as the agent saves them.
    fn write(&self, turns: &[Value]) {
        let c = self.conn();
        let id = &self.id;
        match self.kind {
            Kind::DockerAgent => {
                let next: i64 = c
                    .query_row(
                        "SELECT COALESCE(MAX(position) + 1, 0) FROM session_items WHERE session_id = ?1",
                        [id],
                        |r| r.get(0),
                    )
                    .unwrap();
                for (i, m) in turns.iter().enumerate() {
                    c.execute(
                        "INSERT INTO session_items (session_id, position, item_type, agent_name, message_json, implicit) \
                         VALUES (?1, ?2, 'message', 'root', ?3, 0)",
                        rusqlite::params![id, next + i as i64, m.to_string()],
                    )
                    .unwrap();
                }
            }
            Kind::Goose => {
                let t: i64 = c
                    .query_row(
                        "SELECT COALESCE(MAX(created_timestamp), 1767000000) FROM messages WHERE session_id = ?1",
                        [id],
                        |r| r.get(0),
                    )
                    .unwrap();
                for (i, m) in turns.iter().enumerate() {
                    let text = json!({"type": "text", "text": m["content"]});
                    let (role, items) = match m["role"].as_str().unwrap() {
                        "tool" => (
                            "user",
                            json!([{"type": "toolResponse", "id": m["tool_call_id"],
                            "toolResult": {"status": "success", "value": {"content": [{"type": "text", "text": m["content"]}], "isError": false}}}]),
                        ),
                        "assistant" => {
                            let mut items = vec![text];
                            for call in m["tool_calls"].as_array().into_iter().flatten() {
                                let args: Value = serde_json::from_str(
                                    call["function"]["arguments"].as_str().unwrap(),
                                )
                                .unwrap();
                                items.push(json!({"type": "toolRequest", "id": call["id"],
                                    "toolCall": {"status": "success", "value": {"name": "developer__shell", "arguments": args}}}));
                            }
                            ("assistant", Value::Array(items))
                        }
                        _ => ("user", json!([text])),
                    };
                    c.execute(
                        "INSERT INTO messages (session_id, role, content_json, created_timestamp, metadata_json) \
                         VALUES (?1, ?2, ?3, ?4, '{\"userVisible\":true,\"agentVisible\":true}')",
                        rusqlite::params![id, role, items.to_string(), t + 10 * (i as i64 + 1)],
                    )
                    .unwrap();
                }
            }
            Kind::Opencode => {
                let t0: i64 = c
                    .query_row(
                        "SELECT COALESCE(MAX(t), 1767000000000) FROM (SELECT time_created AS t FROM message WHERE session_id = ?1 \
                         UNION ALL SELECT time_created FROM part WHERE session_id = ?1)",
                        [id],
                        |r| r.get(0),
                    )
                    .unwrap();
                let outputs: std::collections::HashMap<String, Value> = turns
                    .iter()
                    .filter(|m| m["role"] == "tool")
                    .map(|m| {
                        (
                            m["tool_call_id"].as_str().unwrap().to_string(),
                            m["content"].clone(),
                        )
                    })
                    .collect();
                let mut user = String::new();
                for (i, m) in turns
                    .iter()
                    .enumerate()
                    .filter(|(_, m)| m["role"] != "tool")
                {
                    let t = t0 + 1_000 + 10 * i as i64;
                    let mid = format!("msg_{t:013}rs{i:04}");
                    let mut parts = vec![json!({"type": "text", "text": m["content"]})];
                    let data = if m["role"] == "user" {
                        user = mid.clone();
                        json!({"role": "user", "time": {"created": t}, "agent": "build", "model": self.model})
                    } else {
                        for call in m["tool_calls"].as_array().into_iter().flatten() {
                            let input: Value = serde_json::from_str(
                                call["function"]["arguments"].as_str().unwrap(),
                            )
                            .unwrap();
                            parts.push(json!({"type": "tool", "tool": "bash", "callID": call["id"],
                                "state": {"status": "completed", "input": input, "output": outputs[call["id"].as_str().unwrap()],
                                    "title": "bash", "metadata": {}, "time": {"start": t, "end": t + 1}}}));
                        }
                        json!({"role": "assistant", "parentID": user, "mode": "build", "agent": "build",
                            "path": {"cwd": "/w", "root": "/w"}, "cost": 0,
                            "tokens": {"input": 900, "output": 100, "reasoning": 0, "cache": {"read": 0, "write": 0}},
                            "modelID": self.model["modelID"], "providerID": self.model["providerID"],
                            "time": {"created": t, "completed": t + 2}, "finish": "stop"})
                    };
                    c.execute(
                        "INSERT INTO message (id, session_id, time_created, time_updated, data) VALUES (?1, ?2, ?3, ?3, ?4)",
                        rusqlite::params![mid, id, t, data.to_string()],
                    )
                    .unwrap();
                    for (j, p) in parts.iter().enumerate() {
                        c.execute(
                            "INSERT INTO part (id, message_id, session_id, time_created, time_updated, data) VALUES (?1, ?2, ?3, ?4, ?4, ?5)",
                            rusqlite::params![format!("prt_{t:013}rs{i:04}{j}"), mid, id, t, p.to_string()],
                        )
                        .unwrap();
                    }
                }
            }
        }
    }

    /// docker-agent's `GetMessages`, replayed: the last summary item, then the messages from
    /// its `first_kept_entry` (or after it). The planted session has no other kind of item.
    fn docker_agent_sent(&self) -> (String, Vec<String>) {
        let c = self.conn();
        let mut st = c
            .prepare(
                "SELECT item_type, message_json, summary_text, COALESCE(first_kept_entry, 0) \
                 FROM session_items WHERE session_id = ?1 ORDER BY position, id",
            )
            .unwrap();
        type Item = (String, Option<String>, Option<String>, i64);
        let items: Vec<Item> = st
            .query_map([&self.id], |r| {
                Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?))
            })
            .unwrap()
            .map(|r| r.unwrap())
            .collect();
        let last = items
            .iter()
            .rposition(|i| i.0 == "summary" && i.2.as_deref().is_some_and(|t| !t.is_empty()));
        let (summary, start) = match last {
            None => (String::new(), 0),
            Some(l) => {
                let f = items[l].3;
                let start = if f > 0 && (f as usize) < l {
                    f as usize
                } else {
                    l + 1
                };
                (items[l].2.clone().unwrap(), start)
            }
        };
        let messages = items[start..]
            .iter()
            .filter(|i| i.0 == "message")
            .filter_map(|i| i.1.clone())
            .collect();
        (summary, messages)
    }
}

impl Subject for Agent {
    fn cmd(&self) -> assert_cmd::Command {
        let mut c = crate::common::bare_cmd(self.dir.path());
        c.arg("--db").arg(&self.db);
        c
    }
    fn conn(&self) -> rusqlite::Connection {
        rusqlite::Connection::open(&self.db).unwrap()
    }
    fn id(&self) -> &str {
        &self.id
    }
    fn append(&self, k: usize) {
        self.write(&new_turns(k));
    }
    fn sent(&self) -> String {
        let c = self.conn();
        match self.kind {
            Kind::DockerAgent => {
                let (summary, messages) = self.docker_agent_sent();
                format!("{summary}\n{}", messages.join("\n"))
            }
            Kind::Goose => crate::goose_replay::load(&c, &self.id)
                .unwrap()
                .model
                .iter()
                .map(|r| Value::Array(r.items.clone()).to_string())
                .collect::<Vec<_>>()
                .join("\n"),
            Kind::Opencode => crate::opencode_replay::load(&c, &self.id)
                .unwrap()
                .iter()
                .map(|m| m.texts.join("\n"))
                .collect::<Vec<_>>()
                .join("\n"),
        }
    }
    fn summary(&self) -> String {
        let c = self.conn();
        match self.kind {
            Kind::DockerAgent => self.docker_agent_sent().0,
            Kind::Goose => crate::goose_replay::load(&c, &self.id).unwrap().model[0].text(),
            Kind::Opencode => crate::opencode_replay::load(&c, &self.id).unwrap()[1]
                .texts
                .join("\n"),
        }
    }
    fn state(&self) -> Vec<Vec<Vec<String>>> {
        agent_tables(&self.conn(), matches!(self.kind, Kind::DockerAgent))
    }
    fn appends_only(&self) -> bool {
        true
    }
    fn restored_copy(&self) -> Vec<Vec<Vec<String>>> {
        let dir = tempfile::tempdir().unwrap();
        let name = self.db.file_name().unwrap().to_str().unwrap().to_string();
        for suffix in ["", "-wal", "-shm"] {
            let from = self.dir.path().join(format!("{name}{suffix}"));
            if from.exists() {
                std::fs::copy(&from, dir.path().join(format!("{name}{suffix}"))).unwrap();
            }
        }
        let db = dir.path().join(&name);
        let mut c = crate::common::bare_cmd(dir.path());
        c.arg("--db").arg(&db).args(["restore", &self.id]);
        let (_, code, err) = run(c);
        assert_eq!(code, 0, "restore: {err}");
        let conn = rusqlite::Connection::open(&db).unwrap();
        agent_tables(&conn, matches!(self.kind, Kind::DockerAgent))
    }
}

/// Five extractive re-compactions of one growing session (as for kodelet, on a smaller one),
/// then the pruned-archive fallback.
fn extractive_in(kind: Kind, template: &std::path::Path) {
    let a = agent(kind, template, 30);
    let (kept, summaries) = five_compactions(&a, &extractive());
    let tokens: Vec<usize> = summaries.iter().map(|s| count_text(s)).collect();
    eprintln!("summary tokens {tokens:?}");
    assert_no_drift(&kept, &tokens, 6_000 + 100);
    // Compaction 5 stands (and is compacted over): now with a pruned archive.
    a.append(5);
    let (_, second) = pruned_fallback(&a);
    assert!(second.contains("4711"), "{second}");
}

fn llm_in(kind: Kind, template: &std::path::Path) {
    let a = agent(kind, template, 20);
    let url = echo_server();
    let (kept, summaries) = five_compactions(&a, &llm_args(&url));
    let chars: Vec<usize> = summaries.iter().map(|s| s.chars().count()).collect();
    assert_no_drift(&kept, &chars, LINES * 201 + 8_000 + 600);
}

#[test]
fn docker_agent_re_compactions_read_the_originals() {
    let (_dir, template) = template(Kind::DockerAgent);
    extractive_in(Kind::DockerAgent, &template);
    llm_in(Kind::DockerAgent, &template);
}

#[test]
fn goose_re_compactions_read_the_originals() {
    let (_dir, template) = template(Kind::Goose);
    extractive_in(Kind::Goose, &template);
    llm_in(Kind::Goose, &template);
}

#[test]
fn opencode_re_compactions_read_the_originals() {
    let (_dir, template) = template(Kind::Opencode);
    extractive_in(Kind::Opencode, &template);
    llm_in(Kind::Opencode, &template);
}

// ---------------------------------------------------------------------------------------------
// The agent's own earlier summary at the start of the history.

/// What the agent's own summary says: a made-up fact no turn of the session holds.
const OWN_FACT: &str = "the cache key is ZEBRA_4242 under src/own/summary_keys.rs";

impl Agent {
    /// The agent's own compaction of everything so far, written as the agent writes it:
    /// docker-agent a `summary` item; goose hides every row from the agent and adds its
    /// agent-only summary and continuation; opencode a `compaction` request (no kept tail) and
    /// its finished summary reply.
    fn compact_itself(&self, summary: &str) {
        let c = self.conn();
        let id = &self.id;
        match self.kind {
            Kind::DockerAgent => {
                c.execute(
                    "INSERT INTO session_items (session_id, position, item_type, summary_text) \
                     SELECT ?1, MAX(position) + 1, 'summary', ?2 FROM session_items WHERE session_id = ?1",
                    rusqlite::params![id, summary],
                )
                .unwrap();
            }
            Kind::Goose => {
                c.execute(
                    "UPDATE messages SET metadata_json = '{\"userVisible\":true,\"agentVisible\":false}' WHERE session_id = ?1",
                    [id],
                )
                .unwrap();
                let t: i64 = c
                    .query_row(
                        "SELECT MAX(created_timestamp) FROM messages WHERE session_id = ?1",
                        [id],
                        |r| r.get(0),
                    )
                    .unwrap();
                let continuation = "Your context was compacted. The previous message contains a summary of the conversation so far.\nDo not mention that you read a summary or that conversation summarization occurred.\nJust continue the conversation naturally based on the summarized context.";
                for (i, (role, text)) in [("user", summary), ("assistant", continuation)]
                    .iter()
                    .enumerate()
                {
                    c.execute(
                        "INSERT INTO messages (session_id, role, content_json, created_timestamp, metadata_json) \
                         VALUES (?1, ?2, ?3, ?4, '{\"userVisible\":false,\"agentVisible\":true}')",
                        rusqlite::params![id, role, json!([{"type": "text", "text": text}]).to_string(), t + 1 + i as i64],
                    )
                    .unwrap();
                }
            }
            Kind::Opencode => {
                let t: i64 = c
                    .query_row(
                        "SELECT MAX(t) FROM (SELECT time_created AS t FROM message WHERE session_id = ?1 \
                         UNION ALL SELECT time_created FROM part WHERE session_id = ?1)",
                        [id],
                        |r| r.get(0),
                    )
                    .unwrap();
                let (user, asst) = (
                    format!("msg_{:013}own1", t + 1),
                    format!("msg_{:013}own2", t + 2),
                );
                let rows = [
                    (
                        &user,
                        json!({"role": "user", "time": {"created": t + 1}, "agent": "build", "model": self.model}),
                        json!({"type": "compaction", "auto": true}),
                    ),
                    (
                        &asst,
                        json!({"role": "assistant", "parentID": user, "mode": "compaction", "agent": "compaction",
                        "summary": true, "path": {"cwd": "/w", "root": "/w"}, "cost": 0,
                        "tokens": {"input": 900, "output": 100, "reasoning": 0, "cache": {"read": 0, "write": 0}},
                        "modelID": self.model["modelID"], "providerID": self.model["providerID"],
                        "time": {"created": t + 2, "completed": t + 3}, "finish": "stop"}),
                        json!({"type": "text", "text": summary}),
                    ),
                ];
                for (k, (mid, data, part)) in rows.iter().enumerate() {
                    let at = t + 1 + k as i64;
                    c.execute(
                        "INSERT INTO message (id, session_id, time_created, time_updated, data) VALUES (?1, ?2, ?3, ?3, ?4)",
                        rusqlite::params![mid, id, at, data.to_string()],
                    )
                    .unwrap();
                    c.execute(
                        "INSERT INTO part (id, message_id, session_id, time_created, time_updated, data) VALUES (?1, ?2, ?3, ?4, ?4, ?5)",
                        rusqlite::params![format!("prt_{at:013}own{k}"), mid, id, at, part.to_string()],
                    )
                    .unwrap();
                }
            }
        }
    }
}

/// The lines of section `title` of an agent-db summary.
fn section_of<'a>(summary: &'a str, title: &str) -> &'a str {
    summary
        .split_once(&format!("## {title}\n"))
        .map_or("", |(_, rest)| rest.split("\n## ").next().unwrap_or(""))
}

/// A session the agent compacted itself, then continued, compacted by agent-db twice: the
/// agent's summary is carried forward as an earlier summary (not quoted as a user request),
/// also when the second compaction is written from the originals.
fn own_summary_in(kind: Kind) {
    let (_dir, template) = template(kind);
    let a = agent(kind, &template, 6);
    a.compact_itself(&format!("Summary of the work so far: {OWN_FACT}."));
    a.append(1);
    for k in 1..=2 {
        let row = compact(&a, &extractive());
        let summary = a.summary();
        let carried = section_of(&summary, "Earlier summary (carried forward)");
        assert!(carried.contains(OWN_FACT), "compaction {k}:\n{summary}");
        let asked = section_of(&summary, "User requests and instructions");
        assert!(!asked.contains("ZEBRA_4242"), "compaction {k}:\n{summary}");
        // The first turns the agent summarized away are not in agent-db's originals.
        assert!(!summary.contains("4711"), "compaction {k}:\n{summary}");
        if k == 2 {
            let details = audit_details(&a, row["compaction_id"].as_i64().unwrap());
            assert_eq!(details["resummary"]["from"], "originals", "{details:#}");
        }
        a.append(k + 1);
    }
}

#[test]
fn an_agents_own_summary_is_carried_forward_as_an_earlier_summary() {
    for kind in [Kind::DockerAgent, Kind::Goose, Kind::Opencode] {
        own_summary_in(kind);
    }
}

/// agent-db compacts, then the agent compacts itself (its summary covers agent-db's and what
/// came after), then agent-db again: the agent's summary is carried forward, and the row says
/// the originals were not read (the history no longer starts with agent-db's summary).
fn own_summary_after_agent_db_in(kind: Kind) {
    let (_dir, template) = template(kind);
    let a = agent(kind, &template, 6);
    compact(&a, &extractive());
    a.append(1);
    a.compact_itself(&format!("Summary of the work so far: {OWN_FACT}."));
    a.append(2);
    let row = compact(&a, &extractive());
    let summary = a.summary();
    let carried = section_of(&summary, "Earlier summary (carried forward)");
    assert!(carried.contains(OWN_FACT), "{summary}");
    let note = row["note"].as_str().unwrap_or_default();
    assert!(
        note.contains("no longer starts with what agent-db last wrote"),
        "{row:#}"
    );
}

#[test]
fn an_agents_own_summary_after_agent_dbs_is_carried_forward() {
    for kind in [Kind::DockerAgent, Kind::Goose, Kind::Opencode] {
        own_summary_after_agent_db_in(kind);
    }
}

/// kodelet compacted the conversation itself (its `SwapContext` summary alone in
/// `raw_messages`, the replaced messages filed in `compaction_history` with
/// `activeDisplayStart` 1), then went on: agent-db's compaction carries kodelet's summary
/// forward as an earlier summary, not as the user's first request, and so does the next one,
/// written from the originals.
#[test]
fn kodelets_own_summary_is_carried_forward_as_an_earlier_summary() {
    let k = env(6);
    let c = k.env.conn();
    c.execute_batch("ALTER TABLE conversations ADD COLUMN compaction_history TEXT")
        .unwrap();
    let replaced: Value = serde_json::from_str(&k.raw_messages()).unwrap();
    let text = format!("Summary of the work so far: {OWN_FACT}.");
    let summary = json!({"role": "user", "content": text});
    let history = json!({"segments": [{"rawMessages": replaced, "marker": {"id": "k-1",
        "method": "summary", "summary": text, "createdAt": "2026-10-02T00:00:00Z"}}],
        "activeDisplayStart": 1});
    c.execute(
        "UPDATE conversations SET raw_messages = ?1, compaction_history = ?2 WHERE id = ?3",
        [
            json!([summary]).to_string(),
            history.to_string(),
            k.id.clone(),
        ],
    )
    .unwrap();
    k.append(1);
    for round in 1..=2 {
        let row = compact(&k, &extractive());
        let now = k.summary();
        let carried = section_of(&now, "Earlier summary (carried forward)");
        assert!(carried.contains(OWN_FACT), "{round}: {now}");
        let asked = section_of(&now, "User requests and instructions");
        assert!(!asked.contains("ZEBRA_4242"), "{round}: {now}");
        assert!(!now.contains("4711"), "{round}: {now}");
        if round == 2 {
            // Written from the originals, which start with kodelet's summary.
            let details = audit_details(&k, row["compaction_id"].as_i64().unwrap());
            assert_eq!(details["resummary"]["from"], "originals", "{details:#}");
        }
        k.append(round + 1);
    }
}

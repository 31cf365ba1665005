//! The read side on generated stores in each live format: `list`, `show` and `compact --dry-run`,
//! with and without `--json`, run through the real binary. Every expectation is computed from
//! the fixture with SQL and serde_json in the test, and every command must leave the store's
//! files byte-identical.

use agent_db_synth::{self as synth, SynthFormat, SynthOptions};
use serde_json::Value;

use crate::common::{json, Env};

/// Conversations per generated store: enough for every shape, small enough to stay fast.
const N: usize = 24;

/// One `conversations` row as stored, read with plain SQL.
#[derive(Debug, Clone)]
struct Stored {
    id: String,
    provider: String,
    api_mode: Option<String>,
    model: Option<String>,
    name: Option<String>,
    current: Option<i64>,
    max: Option<i64>,
    updated_at: String,
    message_count: i64,
    raw: String,
}

/// Every row in kodelet's listing order (`ORDER BY updated_at DESC`).
fn stored(env: &Env) -> Vec<Stored> {
    let c = env.conn();
    let mut s = c
        .prepare(
            "SELECT c.id, c.provider, json_extract(c.metadata, '$.api_mode'),
                    json_extract(c.metadata, '$.model'), c.summary,
                    json_extract(c.usage, '$.currentContextWindow'),
                    json_extract(c.usage, '$.maxContextWindow'),
                    c.updated_at, s.message_count, c.raw_messages
             FROM conversations c JOIN conversation_summaries s ON s.id = c.id
             ORDER BY c.updated_at DESC",
        )
        .unwrap();
    let rows = s
        .query_map([], |r| {
            Ok(Stored {
                id: r.get(0)?,
                provider: r.get(1)?,
                api_mode: r.get(2)?,
                model: r.get(3)?,
                name: r.get(4)?,
                current: r.get(5)?,
                max: r.get(6)?,
                updated_at: r.get(7)?,
                message_count: r.get(8)?,
                raw: r.get(9)?,
            })
        })
        .unwrap();
    rows.map(Result::unwrap).collect()
}

/// The wire-format name agent-db should report, decided here from provider and api_mode.
fn expected_format(provider: &str, api_mode: Option<&str>) -> &'static str {
    match (provider, api_mode) {
        ("anthropic", _) => "anthropic",
        ("openai-responses", _) | ("openai", Some("responses")) => "openai-responses",
        ("openai", _) => "openai-chat",
        other => panic!("unexpected provider in a generated store: {other:?}"),
    }
}

fn synth_format_name(f: SynthFormat) -> &'static str {
    match f {
        SynthFormat::Anthropic => "anthropic",
        SynthFormat::OpenAiChat => "openai-chat",
        SynthFormat::OpenAiResponses => "openai-responses",
    }
}

/// The stored array's elements.
fn elements(raw: &str) -> Vec<Value> {
    serde_json::from_str(raw).expect("raw_messages is a JSON array")
}

/// Tool calls (id, name) in a stored raw_messages, read straight from the provider JSON.
fn tool_calls(format: &str, raw: &str) -> Vec<(String, String)> {
    let s = |v: &Value, k: &str| v.get(k).and_then(Value::as_str).unwrap_or("").to_string();
    let mut out = Vec::new();
    for m in elements(raw) {
        match format {
            "anthropic" => {
                for b in m["content"].as_array().into_iter().flatten() {
                    if matches!(b["type"].as_str(), Some("tool_use" | "server_tool_use")) {
                        out.push((s(b, "id"), s(b, "name")));
                    }
                }
            }
            "openai-chat" => {
                for c in m["tool_calls"].as_array().into_iter().flatten() {
                    out.push((s(c, "id"), s(&c["function"], "name")));
                }
            }
            _ => {
                if matches!(
                    m["type"].as_str(),
                    Some("function_call" | "custom_tool_call")
                ) {
                    out.push((s(&m, "call_id"), s(&m, "name")));
                }
            }
        }
    }
    out
}

fn utf8(b: &[u8]) -> String {
    String::from_utf8(b.to_vec()).expect("utf-8 output")
}

/// `1234567` → `1,234,567`.
fn thousands(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// A store of `N` conversations in one format, at half the generator's default size (the read
/// side does not need the largest sessions to be exercised, only every shape).
fn fixture(format: SynthFormat, seed: u64) -> (Env, Vec<Stored>) {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("storage.db");
    let opts = SynthOptions {
        conversations: N,
        seed,
        formats: vec![format],
        scale: 0.5,
        ..SynthOptions::default()
    };
    synth::generate(&db, &opts).expect("generate store");
    let env = Env { dir, db };
    let rows = stored(&env);
    assert_eq!(rows.len(), N, "fixture size");
    for r in &rows {
        assert_eq!(
            expected_format(&r.provider, r.api_mode.as_deref()),
            synth_format_name(format),
            "{}: generated in another format",
            r.id
        );
    }
    (env, rows)
}

// ---------------------------------------------------------------------------------------------
// list

fn list(env: &Env, rows: &[Stored], format: SynthFormat) {
    let fmt = synth_format_name(format);
    let all_ids = env.ids("SELECT id FROM conversations");
    assert_eq!(all_ids.len(), N);

    // --json
    let before = env.files_hash();
    let mut c = env.cmd();
    c.args(["list", "--json"]);
    let (doc, code) = json(c);
    assert_eq!(code, 0, "list --json exit code");
    assert_eq!(
        env.files_hash(),
        before,
        "list --json changed the store's files"
    );
    // Version 2: `conversations` holds the selected only, `skipped` and `failed` the rest.
    assert_eq!(doc["version"], 2);
    assert_eq!(doc["skipped"], serde_json::json!([]));
    assert_eq!(doc["failed"], serde_json::json!([]));
    assert_eq!(doc["command"], "list");
    assert_eq!(doc["store"]["kind"], "kodelet");
    assert_eq!(doc["store"]["path"], env.db.display().to_string());
    let listed = doc["conversations"].as_array().expect("conversations");
    let listed_ids: Vec<&str> = listed.iter().map(|r| r["id"].as_str().unwrap()).collect();
    // Every stored id, in kodelet's listing order.
    let mut sorted_listed = listed_ids.clone();
    sorted_listed.sort();
    let mut sorted_all: Vec<&str> = all_ids.iter().map(String::as_str).collect();
    sorted_all.sort();
    assert_eq!(
        sorted_listed, sorted_all,
        "list --json ids = SELECT id FROM conversations"
    );
    let order: Vec<&str> = rows.iter().map(|r| r.id.as_str()).collect();
    assert_eq!(listed_ids, order, "list order = ORDER BY updated_at DESC");

    let mut with_util = 0;
    for (r, s) in listed.iter().zip(rows) {
        let id = &s.id;
        assert_eq!(r["status"], "selected", "{id}");
        assert_eq!(r["reason"], "all", "{id}");
        assert!(r.get("detail").is_none(), "{id}: no detail when selected");
        assert_eq!(r["provider"], s.provider.as_str(), "{id}: provider");
        assert_eq!(r["format"], fmt, "{id}: format");
        assert_eq!(r["model"].as_str(), s.model.as_deref(), "{id}: model");
        assert_eq!(r["name"].as_str(), s.name.as_deref(), "{id}: name");
        assert_eq!(
            r["messages"].as_i64(),
            Some(s.message_count),
            "{id}: messages"
        );
        assert_eq!(
            r["context_tokens"].as_i64(),
            s.current,
            "{id}: context_tokens"
        );
        assert_eq!(
            r["max_context_tokens"].as_i64(),
            s.max,
            "{id}: max_context_tokens"
        );
        assert_eq!(r["updated_at"], s.updated_at.as_str(), "{id}: updated_at");
        match (s.current, s.max) {
            (Some(cur), Some(max)) if max > 0 => {
                let want = (cur as f64 / max as f64 * 10000.0).round() / 10000.0;
                let got = r["utilization"].as_f64().expect("utilization");
                assert!(
                    (got - want).abs() < 1e-9,
                    "{id}: utilization {got} != {want}"
                );
                with_util += 1;
            }
            _ => assert!(
                r["utilization"].is_null(),
                "{id}: utilization without a window"
            ),
        }
    }
    assert!(
        with_util > N / 2,
        "most generated rows have a context window"
    );

    // table
    let before = env.files_hash();
    let out = env.cmd().arg("list").output().unwrap();
    assert_eq!(out.status.code(), Some(0), "list exit code");
    assert_eq!(env.files_hash(), before, "list changed the store's files");
    let stdout = utf8(&out.stdout);
    let stderr = utf8(&out.stderr);
    for s in rows {
        assert_eq!(
            stdout.matches(s.id.as_str()).count(),
            1,
            "table shows {} once:\n{stdout}",
            s.id
        );
        assert!(stdout.contains(&s.provider), "table shows the provider");
    }
    // Rows in listing order.
    let positions: Vec<usize> = rows.iter().map(|s| stdout.find(&s.id).unwrap()).collect();
    assert!(positions.windows(2).all(|w| w[0] < w[1]), "table order");
    for h in ["ID", "PROVIDER", "MODEL", "STORED CTX", "UPDATED"] {
        assert!(stdout.contains(h), "table header {h}");
    }
    // The TOTAL line follows the table on stdout, as `compact`'s does.
    assert!(
        stdout.contains(&format!("TOTAL {N} conversation(s) in storage.db")),
        "TOTAL line: {stdout}"
    );
    assert!(!stderr.contains("error"), "no errors: {stderr}");
}

// ---------------------------------------------------------------------------------------------
// show

fn show(env: &Env, rows: &[Stored], format: SynthFormat) {
    let fmt = synth_format_name(format);

    // --raw: byte-equal to the stored value plus a newline, for every conversation.
    let before = env.files_hash();
    for s in rows {
        let out = env.cmd().args(["show", &s.id, "--raw"]).output().unwrap();
        assert_eq!(out.status.code(), Some(0), "show --raw {}", s.id);
        let mut want = s.raw.clone().into_bytes();
        want.push(b'\n');
        assert!(
            out.stdout == want,
            "show {} --raw is not the stored raw_messages",
            s.id
        );
        assert_eq!(
            env.files_hash(),
            before,
            "show --raw changed the store's files"
        );
    }

    // --json and the transcript: the largest, the smallest, an empty one and a middle one.
    let mut by_len: Vec<&Stored> = rows.iter().collect();
    by_len.sort_by_key(|s| (elements(&s.raw).len(), s.id.clone()));
    let mut picks: Vec<&Stored> = vec![
        by_len[0],
        by_len[by_len.len() / 2],
        by_len[by_len.len() - 1],
    ];
    if let Some(with_calls) = by_len.iter().find(|s| !tool_calls(fmt, &s.raw).is_empty()) {
        picks.push(with_calls);
    }
    picks.dedup_by_key(|s| s.id.clone());
    assert!(
        picks.iter().any(|s| !tool_calls(fmt, &s.raw).is_empty()),
        "the fixture has tool calls"
    );

    for s in picks {
        let stored_len = elements(&s.raw).len();
        let calls = tool_calls(fmt, &s.raw);

        let before = env.files_hash();
        let mut c = env.cmd();
        c.args(["show", &s.id, "--json"]);
        let (doc, code) = json(c);
        assert_eq!(code, 0, "show {} --json", s.id);
        assert_eq!(
            env.files_hash(),
            before,
            "show --json changed the store's files"
        );
        assert_eq!(doc["command"], "show");
        assert_eq!(doc["id"], s.id.as_str());
        assert_eq!(doc["provider"], s.provider.as_str());
        assert_eq!(doc["format"], fmt);
        assert_eq!(doc["model"].as_str(), s.model.as_deref());
        assert_eq!(doc["name"].as_str(), s.name.as_deref());
        assert_eq!(
            doc["tokens_exact"],
            Value::Bool(format != SynthFormat::Anthropic)
        );
        let msgs = doc["messages"].as_array().expect("messages");
        assert_eq!(
            msgs.len(),
            stored_len,
            "{}: messages = stored array length",
            s.id
        );
        let token_sum: u64 = msgs
            .iter()
            .map(|m| m["tokens"].as_u64().expect("tokens"))
            .sum();
        assert_eq!(
            doc["tokens"].as_u64(),
            Some(token_sum),
            "{}: tokens add up",
            s.id
        );
        let shown_calls: Vec<(String, String)> = msgs
            .iter()
            .flat_map(|m| m["blocks"].as_array().unwrap().iter())
            .filter(|b| b["type"] == "tool_call")
            .map(|b| {
                (
                    b["id"].as_str().unwrap().to_string(),
                    b["name"].as_str().unwrap().to_string(),
                )
            })
            .collect();
        assert_eq!(shown_calls, calls, "{}: tool calls in show --json", s.id);

        // The transcript.
        let before = env.files_hash();
        let out = env.cmd().args(["show", &s.id]).output().unwrap();
        assert_eq!(out.status.code(), Some(0), "show {}", s.id);
        assert_eq!(env.files_hash(), before, "show changed the store's files");
        let text = utf8(&out.stdout);
        assert!(
            text.starts_with(&format!("conversation {}\n", s.id)),
            "{text}"
        );
        assert!(
            text.contains(&format!("{stored_len} messages, "))
                || text.contains(&format!("{stored_len} messages (")),
            "{}: message count in the header",
            s.id
        );
        assert!(text.contains(&format!("({fmt})")), "format in the header");
        assert_eq!(
            text.matches("\n── [").count(),
            stored_len,
            "{}: one section per message",
            s.id
        );
        for (id, name) in &calls {
            assert!(
                text.contains(&format!("→ {name} ")) && text.contains(&format!("[{id}]")),
                "{}: transcript mentions tool call {name} [{id}]",
                s.id
            );
        }
        if !calls.is_empty() {
            assert!(text.contains("← "), "tool results shown");
        }
    }
}

// ---------------------------------------------------------------------------------------------
// compact --dry-run

fn compact_dry_run(env: &Env, rows: &[Stored], format: SynthFormat) {
    let fmt = synth_format_name(format);

    let before = env.files_hash();
    let mut c = env.cmd();
    // A low --target, so that conversations of every size have something to summarize.
    c.args([
        "compact",
        "--dry-run",
        "--all-over",
        "0",
        "--idle",
        "0",
        "--target",
        "0.02",
        "--json",
    ]);
    let (doc, code) = json(c);
    assert_eq!(code, 0, "compact --dry-run --json exit code: {doc}");
    assert_eq!(
        env.files_hash(),
        before,
        "compact --dry-run --json changed the store's files"
    );
    assert_eq!(doc["command"], "compact");
    assert_eq!(doc["dry_run"], true);
    let got = doc["conversations"].as_array().expect("conversations");
    // --all-over 0 matches every row; rows without a window are skipped with that reason.
    let got_ids: Vec<&str> = got.iter().map(|r| r["id"].as_str().unwrap()).collect();
    let want_ids: Vec<&str> = rows.iter().map(|s| s.id.as_str()).collect();
    assert_eq!(got_ids, want_ids, "every conversation, in listing order");

    let (mut planned, mut skipped) = (0usize, 0usize);
    let (mut mb, mut ma, mut tb, mut ta) = (0u64, 0u64, 0u64, 0u64);
    for (r, s) in got.iter().zip(rows) {
        let id = &s.id;
        assert_eq!(r["reason"], "threshold", "{id}");
        assert_eq!(r["provider"], s.provider.as_str(), "{id}");
        let n = elements(&s.raw).len() as u64;
        let window = s.max.unwrap_or(0) > 0;
        match r["status"].as_str().unwrap() {
            "planned" => {
                assert!(window, "{id}: planned without a context window");
                planned += 1;
                assert_eq!(r["format"], fmt, "{id}");
                assert_eq!(r["strategy"], "extractive", "{id}");
                assert!(r.get("detail").is_none(), "{id}");
                let get = |k: &str| r[k].as_u64().unwrap_or_else(|| panic!("{id}: {k}"));
                assert_eq!(
                    get("messages_before"),
                    n,
                    "{id}: messages_before = stored length"
                );
                assert_eq!(
                    get("messages_summarized") + get("messages_kept"),
                    n,
                    "{id}: summarized + kept = before"
                );
                assert!(get("messages_after") < n, "{id}: fewer messages after");
                assert!(
                    get("tokens_after") < get("tokens_before"),
                    "{id}: fewer tokens after"
                );
                mb += get("messages_before");
                ma += get("messages_after");
                tb += get("tokens_before");
                ta += get("tokens_after");
            }
            "skipped" => {
                skipped += 1;
                let detail = r["detail"].as_str().expect("skipped rows say why");
                assert!(!detail.is_empty(), "{id}");
                if !window {
                    assert!(detail.contains("maxContextWindow"), "{id}: {detail}");
                } else {
                    // Planned but nothing to do: before = after.
                    assert_eq!(r["messages_before"].as_u64(), Some(n), "{id}");
                    assert_eq!(r["messages_after"], r["messages_before"], "{id}");
                    assert_eq!(r["tokens_after"], r["tokens_before"], "{id}");
                }
            }
            other => panic!("{id}: unexpected status {other}: {r}"),
        }
        assert!(
            r.get("compaction_id").is_none(),
            "{id}: a dry run commits nothing"
        );
    }
    assert!(planned > 0, "the fixture has compactable conversations");
    assert!(skipped > 0, "the fixture has conversations to skip");
    let t = &doc["totals"];
    assert_eq!(t["conversations"].as_u64(), Some(rows.len() as u64));
    assert_eq!(t["planned"].as_u64(), Some(planned as u64));
    assert_eq!(t["skipped"].as_u64(), Some(skipped as u64));
    assert_eq!(t["failed"].as_u64(), Some(0));
    assert_eq!(t["compacted"].as_u64(), Some(0));
    assert_eq!(t["messages_before"].as_u64(), Some(mb));
    assert_eq!(t["messages_after"].as_u64(), Some(ma));
    assert_eq!(t["tokens_before"].as_u64(), Some(tb));
    assert_eq!(t["tokens_after"].as_u64(), Some(ta));

    // The same run as a table.
    let before = env.files_hash();
    let out = env
        .cmd()
        .args(["compact", "--dry-run", "--all-over", "0", "--idle", "0"])
        .args(["--target", "0.02"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "compact --dry-run exit code");
    assert_eq!(
        env.files_hash(),
        before,
        "compact --dry-run changed the store's files"
    );
    let text = utf8(&out.stdout);
    // Conversations with no known window are skipped by the selection: one line for all of
    // them, not a row each; the table and its totals cover the conversations the run works on.
    let unrated = rows.iter().filter(|s| s.max.unwrap_or(0) <= 0).count();
    for s in rows {
        let window = s.max.unwrap_or(0) > 0;
        assert_eq!(
            text.contains(&s.id),
            window,
            "table shows {}:\n{text}",
            s.id
        );
    }
    assert_eq!(
        text.matches("planned").count(),
        planned,
        "planned rows in the table"
    );
    let total = format!(
        "TOTAL {} conversation(s): would compact {planned}, skipped {}, failed 0; tokens {} → {} (",
        rows.len() - unrated,
        skipped - unrated,
        thousands(tb),
        thousands(ta)
    );
    assert!(text.contains(&total), "totals line {total:?} in:\n{text}");
    if unrated > 0 {
        // A diagnostic, on stderr (as `list` puts it).
        let line = format!("{unrated} skipped: no context window known — give --context-limit N");
        let err = utf8(&out.stderr);
        assert_eq!(
            err.lines().filter(|l| *l == line).count(),
            1,
            "{line:?} in:\n{err}"
        );
    }
    assert!(text.contains("dry run: nothing was written"), "{text}");
}

fn read_side(format: SynthFormat, seed: u64) {
    let (env, rows) = fixture(format, seed);
    list(&env, &rows, format);
    show(&env, &rows, format);
    compact_dry_run(&env, &rows, format);
}

#[test]
fn anthropic() {
    read_side(SynthFormat::Anthropic, 101)
}

#[test]
fn openai_chat() {
    read_side(SynthFormat::OpenAiChat, 202)
}

#[test]
fn openai_responses() {
    read_side(SynthFormat::OpenAiResponses, 303)
}

/// sha256 of the database file and its WAL (not the `-shm` index, which is shared memory that
/// every reader, kodelet included, updates).
fn db_and_wal_hash(db: &std::path::Path) -> String {
    use sha2::{Digest, Sha256};
    let mut h = Sha256::new();
    for suffix in ["", "-wal"] {
        let mut p = db.as_os_str().to_owned();
        p.push(suffix);
        let b = std::fs::read(std::path::PathBuf::from(p)).expect("file exists");
        h.update((b.len() as u64).to_le_bytes());
        h.update(&b);
    }
    hex::encode(h.finalize())
}

/// A live agent holds the store open with committed frames still in the WAL: the read side
/// sees them and leaves the database file and the WAL byte-identical.
#[test]
fn live_agent_wal_is_left_alone() {
    let (env, rows) = {
        let dir = tempfile::tempdir().expect("tempdir");
        let db = dir.path().join("storage.db");
        let opts = SynthOptions {
            conversations: 12,
            seed: 404,
            scale: 0.3,
            ..SynthOptions::default()
        };
        synth::generate(&db, &opts).expect("generate store");
        let env = Env { dir, db };
        let rows = stored(&env);
        (env, rows)
    };
    let live = env.conn();
    live.pragma_update(None, "wal_autocheckpoint", 0).unwrap();
    let id = rows[3].id.clone();
    for t in ["conversations", "conversation_summaries"] {
        live.execute(
            &format!("UPDATE {t} SET summary = 'renamed by the live agent' WHERE id = ?1"),
            [&id],
        )
        .unwrap();
    }
    let mut wal = env.db.as_os_str().to_owned();
    wal.push("-wal");
    assert!(
        std::fs::metadata(std::path::PathBuf::from(wal))
            .unwrap()
            .len()
            > 0,
        "the WAL holds the live agent's write"
    );

    let before = db_and_wal_hash(&env.db);
    let mut c = env.cmd();
    c.args(["show", &id, "--json"]);
    let (doc, code) = json(c);
    assert_eq!(code, 0);
    assert_eq!(
        doc["name"], "renamed by the live agent",
        "reads through the WAL"
    );
    assert_eq!(db_and_wal_hash(&env.db), before, "show --json");

    let mut c = env.cmd();
    c.args(["list", "--json"]);
    let (doc, code) = json(c);
    assert_eq!(code, 0);
    assert_eq!(doc["conversations"].as_array().unwrap().len(), rows.len());
    assert_eq!(db_and_wal_hash(&env.db), before, "list --json");

    for args in [
        vec!["list"],
        vec!["show", id.as_str()],
        vec!["show", id.as_str(), "--raw"],
        vec!["compact", "--dry-run", "--all-over", "0", "--idle", "0"],
        vec![
            "compact",
            "--dry-run",
            "--all-over",
            "0",
            "--idle",
            "0",
            "--json",
        ],
    ] {
        let out = env.cmd().args(&args).output().unwrap();
        assert_eq!(out.status.code(), Some(0), "{args:?}");
        assert_eq!(
            db_and_wal_hash(&env.db),
            before,
            "{args:?} changed the files"
        );
    }
    drop(live);
}

//! `stats --json`'s `space`: on every store kind (generated from the agents' DDL), the tables sum
//! exactly to the file, each table's bytes are SQLite's page count for it (the oracle is
//! `dbstat` in its per-page mode, summed here), the categories hold the tables this test names
//! for each agent, the hidden bytes are what the test counts in the rows, and the largest
//! conversations are the ones the test finds by reading every row.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::Path;

use agent_db_synth::docker_agent::{generate_docker_agent, Generation, CURRENT_NEWEST};
use agent_db_synth::goose::{generate_goose, GooseSchema};
use agent_db_synth::opencode::{generate_opencode, OpencodeEra};
use agent_db_synth::opencode_v2::{generate_opencode_v2, V2Era};
use agent_db_synth::{SynthFormat, SynthOptions};
use rusqlite::Connection;
use serde_json::Value;

use crate::common::{bare_cmd, json, Env};

/// Each b-tree's bytes: every page `dbstat` lists for it, one row per page, summed here.
fn pages(c: &Connection) -> BTreeMap<String, u64> {
    let mut st = c.prepare("SELECT name, pgsize FROM dbstat").unwrap();
    let rows = st
        .query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)?)))
        .unwrap();
    let mut out = BTreeMap::new();
    for r in rows {
        let (n, b) = r.unwrap();
        *out.entry(n).or_insert(0u64) += b as u64;
    }
    out
}

fn names_of(c: &Connection, kind: &str) -> BTreeSet<String> {
    let mut st = c
        .prepare("SELECT name FROM sqlite_master WHERE type = ?1")
        .unwrap();
    let rows = st.query_map([kind], |r| r.get::<_, String>(0)).unwrap();
    rows.map(|r| r.unwrap()).collect()
}

/// Bytes per conversation, summed from `(id, value)` rows of each query, read as the values'
/// bytes.
fn per_conversation(c: &Connection, queries: &[&str]) -> HashMap<String, u64> {
    let mut out = HashMap::new();
    for q in queries {
        let mut st = c.prepare(q).unwrap();
        let mut rows = st.query([]).unwrap();
        while let Some(r) = rows.next().unwrap() {
            let id: String = r.get(0).unwrap();
            let mut n = 0u64;
            for i in 1..r.as_ref().column_count() {
                n += match r.get_ref(i).unwrap() {
                    rusqlite::types::ValueRef::Text(t) | rusqlite::types::ValueRef::Blob(t) => {
                        t.len() as u64
                    }
                    _ => 0,
                };
            }
            *out.entry(id).or_insert(0) += n;
        }
    }
    out
}

/// What one agent's categories must hold.
struct Expect<'a> {
    live: &'a [&'a str],
    logs: &'a [&'a str],
    /// The hidden history's bytes, counted by the test, inside the live table named.
    hidden: Option<(&'a str, u64)>,
    /// `(id, value…)` queries whose bytes make up a conversation's size.
    top: &'a [&'a str],
}

fn space_of(home: &Path, db: &Path) -> Value {
    let mut c = bare_cmd(home);
    c.arg("--db").arg(db).args(["stats", "--json"]);
    let (doc, code) = json(c);
    assert_eq!(code, 0, "{doc}");
    doc["space"].clone()
}

fn category<'v>(space: &'v Value, name: &str) -> &'v Value {
    space["categories"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == name)
        .unwrap_or_else(|| panic!("no category {name}: {space}"))
}

fn check(home: &Path, db: &Path, e: &Expect<'_>) -> Value {
    let space = space_of(home, db);
    let c = Connection::open(db).unwrap();
    let file = std::fs::metadata(db).unwrap().len();
    let tables = space["tables"].as_array().unwrap();
    let sum: u64 = tables.iter().map(|t| t["bytes"].as_u64().unwrap()).sum();
    assert_eq!(sum, file, "the tables sum to the file: {space}");

    // Each table and index: its pages; the free list: its pages.
    let pages = pages(&c);
    let page_size: u64 = c.query_row("PRAGMA page_size", [], |r| r.get(0)).unwrap();
    let free: u64 = c
        .query_row("PRAGMA freelist_count", [], |r| r.get::<_, u64>(0))
        .unwrap()
        * page_size;
    let listed: BTreeMap<String, u64> = tables
        .iter()
        .map(|t| {
            (
                t["name"].as_str().unwrap().to_string(),
                t["bytes"].as_u64().unwrap(),
            )
        })
        .collect();
    let mut want = pages.clone();
    want.insert("(free pages)".into(), free);
    assert_eq!(listed, want, "every table's pages, and the free list");

    let indexes = names_of(&c, "index");
    let of = |names: &mut dyn Iterator<Item = &String>| -> u64 {
        names.map(|n| pages.get(n).copied().unwrap_or(0)).sum()
    };
    let cat = |name: &str| category(&space, name)["bytes"].as_u64().unwrap();
    let present = |list: &[&str]| -> Vec<String> {
        list.iter()
            .filter(|t| pages.contains_key(**t))
            .map(|t| t.to_string())
            .collect()
    };
    let hidden = e.hidden.map(|(_, b)| b).unwrap_or(0);
    let live = of(&mut present(e.live).iter()) - hidden;
    let logs = of(&mut present(e.logs).iter());
    let idx = of(&mut indexes.iter());
    let archive = of(&mut pages
        .keys()
        .filter(|n| n.starts_with("agent_db_") && !indexes.contains(*n)));
    let sqlite = of(&mut ["sqlite_schema", "sqlite_master", "sqlite_sequence"]
        .iter()
        .map(|s| s.to_string())
        .collect::<Vec<_>>()
        .iter());
    assert_eq!(cat("live history"), live, "{space}");
    assert_eq!(cat("hidden history"), hidden, "{space}");
    assert_eq!(cat("agent logs and caches"), logs, "{space}");
    assert_eq!(cat("indexes"), idx, "{space}");
    assert_eq!(cat("agent-db archive"), archive, "{space}");
    assert_eq!(cat("sqlite header and schema"), sqlite, "{space}");
    assert_eq!(cat("free pages"), free, "{space}");
    assert_eq!(
        cat("other agent tables"),
        file - live - hidden - logs - idx - archive - sqlite - free,
        "{space}"
    );
    if e.hidden.is_none() {
        assert!(
            category(&space, "hidden history")["note"].is_string(),
            "an agent without measured hidden history says why: {space}"
        );
    }

    // The ten largest conversations, ties by id.
    let mut all: Vec<(String, u64)> = per_conversation(&c, e.top).into_iter().collect();
    all.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    all.truncate(10);
    let top: Vec<(String, u64)> = space["top"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            (
                t["id"].as_str().unwrap().to_string(),
                t["bytes"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(top, all, "the largest conversations");
    space
}

fn opts(n: usize) -> SynthOptions {
    SynthOptions {
        conversations: n,
        seed: 11,
        scale: 0.5,
        ..SynthOptions::default()
    }
}

const KODELET_TOP: &[&str] = &["SELECT id, raw_messages, tool_results FROM conversations"];

#[test]
fn kodelet_space_with_archive_and_free_pages() {
    let env = Env::generated(16, 5, &SynthFormat::ALL);
    let e = Expect {
        live: &["conversations"],
        logs: &["acp_session_updates"],
        hidden: None,
        top: KODELET_TOP,
    };
    let before = check(env.dir.path(), &env.db, &e);
    assert_eq!(category(&before, "agent-db archive")["bytes"], 0);
    let mut c = env.cmd();
    c.args([
        "compact",
        "--all-over",
        "0",
        "--idle",
        "0",
        "--keep-tokens",
        "500",
        "--strategy",
        "extractive",
        "--yes",
    ]);
    c.assert().success();
    let after = check(env.dir.path(), &env.db, &e);
    assert!(
        category(&after, "agent-db archive")["bytes"]
            .as_u64()
            .unwrap()
            > 0
    );
    env.cmd()
        .args(["prune-archive", "--older-than", "0s", "--yes"])
        .assert()
        .success();
    let pruned = check(env.dir.path(), &env.db, &e);
    assert!(
        category(&pruned, "free pages")["bytes"].as_u64().unwrap() > 0,
        "{pruned}"
    );
}

#[test]
fn kodelet_current_compaction_history_is_hidden_history() {
    let env = Env::generated(12, 3, &[SynthFormat::Anthropic]);
    crate::kodelet_current::upgrade(&env, 20260929120000);
    let c = env.conn();
    let ids = env.ids("SELECT id FROM conversations ORDER BY id");
    let compacted = ids
        .iter()
        .filter(|id| crate::kodelet_current::kodelet_compacted(&c, id))
        .count();
    assert!(compacted > 0);
    // The test's own count of the segments' bytes.
    let hidden: u64 = per_conversation(&c, &["SELECT id, compaction_history FROM conversations"])
        .values()
        .sum();
    drop(c);
    assert!(hidden > 0);
    check(
        env.dir.path(),
        &env.db,
        &Expect {
            live: &["conversations"],
            logs: &[
                "acp_session_updates",
                "image_artifacts",
                "conversation_artifacts",
                "conversation_search_entries",
                "conversation_search_state",
            ],
            hidden: Some(("conversations", hidden)),
            top: &["SELECT id, raw_messages, tool_results, compaction_history FROM conversations"],
        },
    );
}

#[test]
fn docker_agent_space() {
    for generation in [Generation::Legacy, Generation::Current(CURRENT_NEWEST)] {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("session.db");
        generate_docker_agent(&db, &opts(10), generation).unwrap();
        let legacy = matches!(generation, Generation::Legacy);
        let mut top = vec!["SELECT session_id, message_json, summary_text FROM session_items"];
        let mut live = vec!["session_items"];
        if legacy {
            top.push("SELECT id, messages FROM sessions");
            live.push("sessions");
        }
        check(
            dir.path(),
            &db,
            &Expect {
                live: &live,
                logs: &["generated_media_blobs", "generated_media_manifest"],
                hidden: None,
                top: &top,
            },
        );
    }
}

#[test]
fn goose_space_counts_rows_hidden_from_the_model() {
    for preset in ["goose-v16", "goose-v3"] {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("sessions.db");
        generate_goose(&db, &opts(10), &GooseSchema::preset(preset).unwrap()).unwrap();
        let c = Connection::open(&db).unwrap();
        // goose's `agentVisible: false` rows, found by parsing each row's metadata here.
        let mut hidden = 0u64;
        let mut st = c
            .prepare("SELECT content_json, metadata_json FROM messages")
            .unwrap();
        let mut rows = st.query([]).unwrap();
        while let Some(r) = rows.next().unwrap() {
            let content: String = r.get(0).unwrap();
            let meta: Option<String> = r.get(1).unwrap();
            let off = meta
                .as_deref()
                .and_then(|m| serde_json::from_str::<Value>(m).ok())
                .is_some_and(|m| m["agentVisible"] == Value::Bool(false));
            if off {
                hidden += (content.len() + meta.map_or(0, |m| m.len())) as u64;
            }
        }
        drop(rows);
        drop(st);
        drop(c);
        check(
            dir.path(),
            &db,
            &Expect {
                live: &["messages"],
                logs: &[
                    "usage_ledger",
                    "provider_inventory_entries",
                    "provider_inventory_models",
                ],
                hidden: Some(("messages", hidden)),
                top: &["SELECT session_id, content_json, metadata_json FROM messages"],
            },
        );
    }
}

#[test]
fn opencode_space_puts_events_with_the_agents_logs() {
    for preset in ["opencode-1.14", "opencode-1.18"] {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("opencode.db");
        generate_opencode(&db, &opts(10), OpencodeEra::preset(preset).unwrap()).unwrap();
        let events = names_of(&Connection::open(&db).unwrap(), "table").contains("event");
        let mut top = vec![
            "SELECT session_id, data FROM message",
            "SELECT session_id, data FROM part",
        ];
        if events {
            top.push("SELECT aggregate_id, data FROM event");
        }
        let space = check(
            dir.path(),
            &db,
            &Expect {
                live: &["message", "part"],
                logs: &["event", "event_sequence"],
                hidden: None,
                top: &top,
            },
        );
        if events {
            assert!(
                category(&space, "agent logs and caches")["bytes"]
                    .as_u64()
                    .unwrap()
                    > 0
            );
        }
    }
}

#[test]
fn opencode_v2_space() {
    for era in [V2Era::Newest, V2Era::Upgraded] {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("opencode.db");
        generate_opencode_v2(&db, 8, 4, era).unwrap();
        check(
            dir.path(),
            &db,
            &Expect {
                live: &["session_message"],
                logs: &["event", "event_sequence"],
                hidden: None,
                top: &[
                    "SELECT session_id, data FROM session_message",
                    "SELECT aggregate_id, data FROM event",
                ],
            },
        );
    }
}

/// Crush's messages that its loader no longer sends (before the summary message of a
/// summarized session), found by the test's replay of Crush's loading rule: their `parts`
/// bytes.
fn crush_hidden(c: &Connection) -> u64 {
    let sessions: Vec<String> = {
        let mut st = c.prepare("SELECT id FROM sessions").unwrap();
        let rows = st.query_map([], |r| r.get(0)).unwrap();
        rows.map(|r| r.unwrap()).collect()
    };
    let mut hidden = 0u64;
    for s in sessions {
        let sent: BTreeSet<String> = crate::crush::replay(c, &s)
            .unwrap()
            .into_iter()
            .map(|m| m.id)
            .collect();
        let mut st = c
            .prepare("SELECT id, parts FROM messages WHERE session_id = ?1")
            .unwrap();
        let mut rows = st.query([&s]).unwrap();
        while let Some(r) = rows.next().unwrap() {
            let id: String = r.get(0).unwrap();
            let parts: String = r.get(1).unwrap();
            if !sent.contains(&id) {
                hidden += parts.len() as u64;
            }
        }
    }
    hidden
}

#[test]
fn crush_space_counts_messages_before_the_summary() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("crush.db");
    let c = crate::crush::build(&db, crate::crush::NEWEST_MAIN);
    crate::crush::fill(&c, "s1", 12, false, 1_780_000_000);
    crate::crush::fill(&c, "s2", 12, true, 1_780_100_000);
    crate::crush::fill(&c, "s3", 2, false, 1_780_200_000);
    for (i, s) in ["s1", "s2"].iter().enumerate() {
        c.execute(
            "INSERT INTO files (id, session_id, path, content, version, created_at, updated_at)
             VALUES (?1, ?2, 'f0.go', ?3, 0, 1780000000, 1780000000)",
            rusqlite::params![format!("file-{i}"), s, "package main\n".repeat(300)],
        )
        .unwrap();
        c.execute(
            "INSERT INTO read_files (session_id, path, read_at) VALUES (?1, 'f0.go', 1780000000)",
            [s],
        )
        .unwrap();
    }
    drop(c);
    let c = Connection::open(&db).unwrap();
    assert_eq!(crush_hidden(&c), 0, "nothing is summarized yet");
    drop(c);
    let e = |hidden| Expect {
        live: &["sessions", "messages"],
        logs: &["files", "read_files"],
        hidden,
        top: &["SELECT session_id, parts FROM messages"],
    };
    check(dir.path(), &db, &e(Some(("messages", 0))));
    for s in ["s1", "s2"] {
        let mut cmd = bare_cmd(dir.path());
        cmd.arg("--db").arg(&db).args([
            "compact",
            "--id",
            s,
            "--idle",
            "0",
            "--keep-tokens",
            "3000",
            "--yes",
        ]);
        cmd.assert().success();
    }
    let c = Connection::open(&db).unwrap();
    let hidden = crush_hidden(&c);
    drop(c);
    assert!(hidden > 0);
    let space = check(dir.path(), &db, &e(Some(("messages", hidden))));
    assert!(
        category(&space, "agent-db archive")["bytes"]
            .as_u64()
            .unwrap()
            > 0
    );
}

#[test]
fn crush_space_before_the_summary_pointer_says_why_nothing_is_hidden() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("crush.db");
    // The first migration only: no `summary_message_id` yet.
    let c = crate::crush::build(&db, 20250424200609);
    c.execute(
        "INSERT INTO sessions (id, title, message_count, prompt_tokens, completion_tokens, cost, updated_at, created_at)
         VALUES ('s1', 'one', 0, 10, 1, 0, 1780000000, 1780000000)",
        [],
    )
    .unwrap();
    for (k, role) in ["user", "assistant"].iter().enumerate() {
        c.execute(
            "INSERT INTO messages (id, session_id, role, parts, created_at, updated_at)
             VALUES (?1, 's1', ?2, ?3, ?4, ?4)",
            rusqlite::params![
                format!("m{k}"),
                role,
                r#"[{"type":"text","data":{"text":"hello"}}]"#,
                1_780_000_000 + k as i64
            ],
        )
        .unwrap();
    }
    drop(c);
    let space = check(
        dir.path(),
        &db,
        &Expect {
            live: &["sessions", "messages"],
            logs: &["files", "read_files"],
            hidden: None,
            top: &["SELECT session_id, parts FROM messages"],
        },
    );
    let note = category(&space, "hidden history")["note"].as_str().unwrap();
    assert!(note.contains("add_summary_message_id"), "{note}");
}

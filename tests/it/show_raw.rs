//! `show --raw` is every stored row of the conversation, on every store, in the shape
//! docs/stores.md gives per agent; checked against the test's own SQL read (count and content).

use std::path::{Path, PathBuf};

use agent_db_synth::SynthOptions;
use rusqlite::Connection;
use serde_json::Value;
use tempfile::TempDir;

use crate::common::bare_cmd;

fn raw(dir: &Path, db: &Path, id: &str) -> String {
    let out = bare_cmd(dir)
        .arg("--db")
        .arg(db)
        .args(["show", id, "--raw"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// (id, content) of every row `sql` returns for `id`, by the test's own read.
fn rows(db: &Path, sql: &str, id: &str) -> Vec<(String, String)> {
    let c = Connection::open(db).unwrap();
    let mut st = c.prepare(sql).unwrap();
    let r = st
        .query_map([id], |r| {
            let key = match r.get_ref(0)? {
                rusqlite::types::ValueRef::Integer(n) => n.to_string(),
                v => String::from_utf8_lossy(v.as_bytes().unwrap()).into_owned(),
            };
            Ok((key, r.get::<_, String>(1)?))
        })
        .unwrap();
    r.map(|x| x.unwrap()).collect()
}

fn ids(db: &Path, sql: &str) -> Vec<String> {
    let c = Connection::open(db).unwrap();
    let mut st = c.prepare(sql).unwrap();
    let r = st.query_map([], |r| r.get::<_, String>(0)).unwrap();
    r.map(|x| x.unwrap()).collect()
}

fn key(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// The array's (id column, content column) pairs.
fn pairs(doc: &Value, id_col: &str, col: &str) -> Vec<(String, String)> {
    doc.as_array()
        .unwrap()
        .iter()
        .map(|r| (key(&r[id_col]), r[col].as_str().unwrap().to_string()))
        .collect()
}

fn tmp(name: &str) -> (TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join(name);
    (dir, db)
}

fn opts(n: usize) -> SynthOptions {
    SynthOptions {
        conversations: n,
        seed: 3,
        scale: 0.5,
        ..SynthOptions::default()
    }
}

#[test]
fn kodelet_raw_is_raw_messages_exactly_as_stored() {
    let (dir, db) = tmp("storage.db");
    agent_db_synth::generate(&db, &opts(3)).unwrap();
    for id in ids(&db, "SELECT id FROM conversations") {
        let want = rows(
            &db,
            "SELECT id, raw_messages FROM conversations WHERE id = ?1",
            &id,
        );
        assert_eq!(raw(dir.path(), &db, &id), format!("{}\n", want[0].1));
    }
}

#[test]
fn goose_raw_is_every_messages_row_of_the_session() {
    let (dir, db) = tmp("sessions.db");
    let schema = agent_db_synth::goose::GooseSchema::preset("goose-v16").unwrap();
    agent_db_synth::goose::generate_goose(&db, &opts(4), &schema).unwrap();
    for id in ids(&db, "SELECT id FROM sessions") {
        let doc: Value = serde_json::from_str(&raw(dir.path(), &db, &id)).unwrap();
        let want = rows(
            &db,
            "SELECT id, content_json FROM messages WHERE session_id = ?1 ORDER BY created_timestamp, id",
            &id,
        );
        assert!(!want.is_empty());
        assert_eq!(pairs(&doc, "id", "content_json"), want, "{id}");
    }
}

#[test]
fn docker_agent_raw_is_every_stored_item() {
    use agent_db_synth::docker_agent::{generate_docker_agent, Generation, CURRENT_NEWEST};
    for generation in [Generation::Legacy, Generation::Current(CURRENT_NEWEST)] {
        let (dir, db) = tmp("session.db");
        generate_docker_agent(&db, &opts(4), generation).unwrap();
        let c = Connection::open(&db).unwrap();
        for id in ids(&db, "SELECT id FROM sessions") {
            let doc: Value = serde_json::from_str(&raw(dir.path(), &db, &id)).unwrap();
            let n: i64 = c
                .query_row(
                    "SELECT COUNT(*) FROM session_items WHERE session_id = ?1",
                    [&id],
                    |r| r.get(0),
                )
                .unwrap();
            assert_eq!(doc.as_array().unwrap().len() as i64, n, "{id}");
            let want = rows(
                &db,
                "SELECT id, COALESCE(message_json, summary_text, '') FROM session_items \
                 WHERE session_id = ?1 ORDER BY position, id",
                &id,
            );
            let got: Vec<(String, String)> = doc
                .as_array()
                .unwrap()
                .iter()
                .map(|r| {
                    let content = r["message_json"]
                        .as_str()
                        .or(r["summary_text"].as_str())
                        .unwrap_or("");
                    (key(&r["id"]), content.to_string())
                })
                .collect();
            assert_eq!(got, want, "{id}");
        }
    }
}

#[test]
fn opencode_raw_is_every_message_row_with_every_part_row() {
    let (dir, db) = tmp("opencode.db");
    agent_db_synth::opencode::generate_opencode(
        &db,
        &opts(5),
        agent_db_synth::opencode::OpencodeEra::Effect,
    )
    .unwrap();
    let mut total = 0;
    for id in ids(&db, "SELECT id FROM session") {
        let doc: Value = serde_json::from_str(&raw(dir.path(), &db, &id)).unwrap();
        let want = rows(
            &db,
            "SELECT id, data FROM message WHERE session_id = ?1 ORDER BY time_created, id",
            &id,
        );
        assert_eq!(pairs(&doc, "id", "data"), want, "{id}");
        for m in doc.as_array().unwrap() {
            let mid = m["id"].as_str().unwrap();
            let parts = rows(
                &db,
                "SELECT id, data FROM part WHERE message_id = ?1 ORDER BY id",
                mid,
            );
            assert_eq!(pairs(&m["parts"], "id", "data"), parts, "{mid}");
            assert!(m["time_created"].is_i64() && m["session_id"] == id.as_str());
            total += parts.len();
        }
    }
    let all: i64 = Connection::open(&db)
        .unwrap()
        .query_row("SELECT COUNT(*) FROM part", [], |r| r.get(0))
        .unwrap();
    assert_eq!(total as i64, all);
}

#[test]
fn opencode_2x_raw_is_every_session_message_row() {
    let (dir, db) = tmp("opencode.db");
    agent_db_synth::opencode_v2::generate_opencode_v2(
        &db,
        4,
        5,
        agent_db_synth::opencode_v2::V2Era::Newest,
    )
    .unwrap();
    for id in ids(&db, "SELECT id FROM session_v2") {
        let doc: Value = serde_json::from_str(&raw(dir.path(), &db, &id)).unwrap();
        let want = rows(
            &db,
            "SELECT id, data FROM session_message WHERE session_id = ?1 ORDER BY seq",
            &id,
        );
        assert!(!want.is_empty());
        assert_eq!(pairs(&doc, "id", "data"), want, "{id}");
    }
}

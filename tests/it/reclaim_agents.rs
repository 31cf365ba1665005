//! `reclaim` on every other agent's store. kodelet: the ACP replay log of deleted conversations
//! goes (rows the test counts itself), nothing else, every conversation loads as kodelet's
//! loader replay sees it before and after, and `restore` gives the table back cell for cell.
//! docker-agent, goose, Crush, opencode 2.x and Kilo: nothing agent-db may remove, said per agent,
//! and the file is left byte-identical.

use std::path::Path;

use agent_db_synth::SynthOptions;
use rusqlite::Connection;
use serde_json::Value;

use crate::common::{bare_cmd, dump_all, files_hash, json, Env};
use crate::kodelet_replay::model_view;

const ACP: &str = "ACP replay of deleted conversations";

/// Every conversation as kodelet's loader gives it to the model (the replay in
/// `kodelet_replay.rs`), by id.
fn loaded(c: &Connection) -> Vec<(String, Result<Vec<Value>, String>)> {
    let mut st = c
        .prepare("SELECT id, provider, metadata, raw_messages FROM conversations ORDER BY id")
        .unwrap();
    let rows = st
        .query_map([], |r| {
            Ok((
                r.get::<_, String>(0)?,
                r.get::<_, String>(1)?,
                r.get::<_, Option<String>>(2)?,
                r.get::<_, String>(3)?,
            ))
        })
        .unwrap();
    rows.map(|r| {
        let (id, provider, meta, raw) = r.unwrap();
        let meta: Value = meta
            .and_then(|m| serde_json::from_str(&m).ok())
            .unwrap_or(Value::Null);
        (id, model_view(&provider, &meta, &raw))
    })
    .collect()
}

fn run(dir: &Path, db: &Path, args: &[&str]) -> (Value, i32) {
    let mut c = bare_cmd(dir);
    c.arg("--db").arg(db).args(args);
    json(c)
}

#[test]
fn reclaim_removes_kodelets_acp_log_of_deleted_conversations_only() {
    let env = Env::generated_at(6, 12, &[], 0.3);
    let c = env.conn();
    let live: String = c
        .query_row(
            "SELECT id FROM conversations ORDER BY id LIMIT 1",
            [],
            |r| r.get(0),
        )
        .unwrap();
    // agent-db's clock is 2026-11-01T12:00:00Z; --idle 1h.
    let old = "2026-10-01 09:15:02.123456789 +0000 UTC m=+3.25";
    let recent = "2026-11-01 11:59:00 +0000 UTC";
    let rows: [(&str, &str, &str); 8] = [
        (
            live.as_str(),
            r#"{"update":"kept: a live conversation"}"#,
            old,
        ),
        ("gone-a", r#"{"update":"one"}"#, old),
        (
            "gone-a",
            r#"{"update":"two, longer"}"#,
            "2026-10-02 10:00:00",
        ),
        // A session whose newest row is recent: its conversation may not be saved yet.
        ("gone-b", r#"{"update":"old"}"#, old),
        ("gone-b", r#"{"update":"new"}"#, recent),
        // Idle by --idle, but not a day past it (a long first turn).
        (
            "gone-e",
            r#"{"update":"recent"}"#,
            "2026-10-31 20:00:00 +0000 UTC",
        ),
        // No time to judge it by.
        ("gone-c", r#"{"update":"?"}"#, "not a time"),
        ("gone-d", r#"{"update":"three"}"#, "2026-09-30T08:00:00Z"),
    ];
    for (s, d, t) in rows {
        c.execute(
            "INSERT INTO acp_session_updates (session_id, update_data, created_at) VALUES (?1, ?2, ?3)",
            [s, d, t],
        )
        .unwrap();
    }
    let gone = ["gone-a", "gone-d"];
    let (want_rows, want_bytes) = rows
        .iter()
        .filter(|(s, _, _)| gone.contains(s))
        .fold((0u64, 0u64), |(n, b), (s, d, t)| {
            (n + 1, b + (s.len() + d.len() + 8 + t.len()) as u64)
        });
    let before = dump_all(&c);
    let history = loaded(&c);
    assert!(history.iter().all(|(_, h)| h.is_ok()), "{history:?}");
    drop(c);
    let hash = env.files_hash();

    let (doc, code) = run(
        env.dir.path(),
        &env.db,
        &["reclaim", "--idle", "1h", "--dry-run", "--json"],
    );
    assert_eq!(code, 0, "{doc}");
    assert_eq!(env.files_hash(), hash, "--dry-run wrote nothing");
    let cats = doc["categories"].as_array().unwrap();
    assert_eq!(cats.len(), 1, "{doc}");
    assert_eq!(cats[0]["category"], ACP);
    assert_eq!(cats[0]["conversations"], 2, "{doc}");
    assert_eq!(cats[0]["rows"], want_rows, "{doc}");
    assert_eq!(cats[0]["bytes"], want_bytes, "{doc}");

    let (doc, code) = run(
        env.dir.path(),
        &env.db,
        &["reclaim", "--idle", "1h", "--yes", "--json"],
    );
    assert_eq!(code, 0, "{doc}");
    let c = env.conn();
    let after = dump_all(&c);
    for (table, rows) in &before {
        if table.starts_with("agent_db_") || table == "sqlite_sequence" {
            continue;
        }
        let now = &after[table];
        if table == "acp_session_updates" {
            let expect: Vec<&Vec<String>> = rows
                .iter()
                .filter(|r| !gone.iter().any(|g| r[2] == format!("Text({g:?})")))
                .collect();
            assert_eq!(
                now.iter().collect::<Vec<_>>(),
                expect,
                "only gone-a and gone-d went"
            );
        } else {
            assert_eq!(now, rows, "{table} untouched");
        }
    }
    assert_eq!(loaded(&c), history, "every conversation loads as before");
    drop(c);

    for g in gone {
        bare_cmd(env.dir.path())
            .arg("--db")
            .arg(&env.db)
            .args(["restore", g])
            .assert()
            .success();
    }
    let restored = dump_all(&env.conn());
    assert_eq!(
        restored["acp_session_updates"], before["acp_session_updates"],
        "restore gives every row back, rowid and cells"
    );
}

/// `reclaim` on a store whose agent has nothing agent-db may remove: says so, naming the agent,
/// and writes nothing.
fn says_nothing_removable(dir: &Path, db: &Path, agent: &str) {
    let hash = files_hash(db);
    let out = bare_cmd(dir)
        .arg("--db")
        .arg(db)
        .args(["reclaim", "--idle", "0s", "--yes"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.starts_with(&format!("{agent}: nothing agent-db may remove: ")),
        "{agent}: {text}"
    );
    let (doc, code) = run(dir, db, &["reclaim", "--idle", "0s", "--dry-run", "--json"]);
    assert_eq!(code, 0);
    assert!(doc["nothing_removable"].is_string(), "{doc}");
    assert_eq!(files_hash(db), hash, "{agent}: nothing written");
}

#[test]
fn reclaim_says_per_agent_that_nothing_may_be_removed() {
    let dir = tempfile::tempdir().unwrap();
    let opts = SynthOptions {
        conversations: 4,
        seed: 3,
        scale: 0.3,
        ..SynthOptions::default()
    };
    let goose = dir.path().join("sessions.db");
    agent_db_synth::goose::generate_goose(
        &goose,
        &opts,
        &agent_db_synth::goose::GooseSchema::preset("goose-v17").unwrap(),
    )
    .unwrap();
    says_nothing_removable(dir.path(), &goose, "goose");
    let docker = dir.path().join("session.db");
    agent_db_synth::docker_agent::generate_docker_agent(
        &docker,
        &opts,
        agent_db_synth::docker_agent::Generation::Current(38),
    )
    .unwrap();
    says_nothing_removable(dir.path(), &docker, "docker-agent");
    let crush = dir.path().join("crush.db");
    drop(crate::crush::build(&crush, crate::crush::NEWEST_MAIN));
    says_nothing_removable(dir.path(), &crush, "crush");
    let v2 = dir.path().join("opencode.db");
    agent_db_synth::opencode_v2::generate_opencode_v2(
        &v2,
        4,
        11,
        agent_db_synth::opencode_v2::V2Era::Newest,
    )
    .unwrap();
    says_nothing_removable(dir.path(), &v2, "opencode");
    let kilo = dir.path().join("kilo.db");
    crate::kilo::kilo_with_sessions(&kilo, 2);
    says_nothing_removable(dir.path(), &kilo, "kilo");
}

/// Restore after the agent wrote again: an event opencode inserted after `reclaim` may hold the
/// rowid of a reclaimed one (`event` has no INTEGER PRIMARY KEY; SQLite hands out freed rowids).
/// Every reclaimed event still comes back cell for cell, on its old rowid where that is free and
/// on a new one where it is not, and the newer event stays. (The real opencode hit this: the
/// restore failed with "UNIQUE constraint failed: event.rowid".)
#[test]
fn restore_puts_reclaimed_events_back_when_a_newer_event_holds_one_of_their_rowids() {
    let env = Env::opencode("opencode-1.18", 4, 21, 0.3);
    let (dir, db) = (&env.dir, &env.db);
    // (rowid, id, aggregate_id, seq, type, data), each value as its storage class and hex bytes.
    let events = |c: &Connection| -> Vec<(i64, Vec<String>)> {
        let mut st = c
            .prepare(
                "SELECT rowid, typeof(id) || ':' || hex(id), typeof(aggregate_id) || ':' || hex(aggregate_id),
                        typeof(seq) || ':' || hex(seq), typeof(type) || ':' || hex(type),
                        typeof(data) || ':' || hex(data) FROM event ORDER BY id",
            )
            .unwrap();
        let rows = st
            .query_map([], |r| {
                Ok((
                    r.get(0)?,
                    (1..6)
                        .map(|i| r.get(i))
                        .collect::<Result<Vec<String>, _>>()?,
                ))
            })
            .unwrap();
        rows.map(|r| r.unwrap()).collect()
    };
    let before = events(&Connection::open(db).unwrap());
    assert!(before.len() > 3, "{} events", before.len());
    let (doc, code) = run(
        dir.path(),
        db,
        &["reclaim", "--idle", "0s", "--yes", "--json"],
    );
    assert_eq!(code, 0, "{doc}");
    let c = Connection::open(db).unwrap();
    let taken = before[1].0;
    let left: i64 = c
        .query_row("SELECT COUNT(*) FROM event", [], |r| r.get(0))
        .unwrap();
    assert!((left as usize) < before.len(), "reclaim removed events");
    // Another session's new event (its own sequence row is not the point here).
    c.pragma_update(None, "foreign_keys", false).unwrap();
    c.execute(
        "INSERT INTO event(rowid, id, aggregate_id, seq, type, data) VALUES (?1, 'evt_newer', ?2, 999, 't', '{}')",
        rusqlite::params![taken, "ses_newer"],
    )
    .unwrap();
    drop(c);
    let (doc, code) = run(
        dir.path(),
        db,
        &["restore", "--all-since", "3650d", "--json"],
    );
    assert_eq!(code, 0, "{doc}");
    let after = events(&Connection::open(db).unwrap());
    let newer = after
        .iter()
        .position(|(_, cells)| cells[0] == format!("text:{}", hex_upper(b"evt_newer")))
        .expect("the newer event stays");
    assert_eq!(after[newer].0, taken, "the newer event keeps its rowid");
    let restored: Vec<_> = after
        .iter()
        .enumerate()
        .filter(|(i, _)| *i != newer)
        .map(|(_, e)| e.clone())
        .collect();
    assert_eq!(restored.len(), before.len());
    for ((rowid_a, cells_a), (rowid_b, cells_b)) in before.iter().zip(&restored) {
        assert_eq!(cells_a, cells_b, "an event's cells");
        if *rowid_a != taken {
            assert_eq!(rowid_a, rowid_b, "a free rowid is kept");
        } else {
            assert_ne!(rowid_b, &taken, "the taken rowid is not reused");
        }
    }
}

fn hex_upper(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02X}")).collect()
}

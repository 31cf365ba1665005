//! `reclaim` on generated opencode 1.x stores (built from opencode's DDL): `--dry-run` writes
//! nothing and reports the bytes the test counts itself; a reclaim removes exactly the events of
//! idle sessions outside workspaces, shares and pending input, and the events of deleted sessions,
//! touches no other row, and `restore` gives every table back value for value (storage class and
//! bytes). Stores with nothing opencode-like to reclaim are left byte-identical.

use std::collections::BTreeMap;

use rusqlite::Connection;
use serde_json::Value;

use crate::common::{files_hash, json, Env, NOW};

/// A generated opencode store of `n` sessions (seed 9, message sizes times 0.4).
fn store(preset: &str, n: usize) -> Env {
    Env::opencode(preset, n, 9, 0.4)
}

/// Every row of `table`, each value as its storage class and hex bytes, keyed by the row's
/// first column.
fn rows(c: &Connection, table: &str) -> BTreeMap<String, Vec<String>> {
    let n: usize = c
        .query_row(
            &format!("SELECT COUNT(*) FROM pragma_table_info('{table}')"),
            [],
            |r| r.get(0),
        )
        .unwrap();
    let mut st = c.prepare(&format!("SELECT * FROM \"{table}\"")).unwrap();
    let mut q = st.query([]).unwrap();
    let mut out = BTreeMap::new();
    while let Some(r) = q.next().unwrap() {
        let vals: Vec<String> = (0..n)
            .map(|i| match r.get_ref(i).unwrap() {
                rusqlite::types::ValueRef::Null => "null".into(),
                rusqlite::types::ValueRef::Integer(v) => format!("int:{v}"),
                rusqlite::types::ValueRef::Real(v) => format!("real:{v}"),
                rusqlite::types::ValueRef::Text(t) => format!("text:{}", hex(t)),
                rusqlite::types::ValueRef::Blob(b) => format!("blob:{}", hex(b)),
            })
            .collect();
        out.insert(vals[0].clone(), vals);
    }
    out
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn agent_tables(c: &Connection) -> Vec<String> {
    let mut st = c
        .prepare(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'agent_db_%' \
             AND name NOT LIKE 'sqlite_%' ORDER BY name",
        )
        .unwrap();
    let r = st.query_map([], |r| r.get::<_, String>(0)).unwrap();
    r.map(|x| x.unwrap()).collect()
}

fn dump(c: &Connection) -> BTreeMap<String, BTreeMap<String, Vec<String>>> {
    agent_tables(c)
        .into_iter()
        .map(|t| {
            let r = rows(c, &t);
            (t, r)
        })
        .collect()
}

/// An event's stored bytes as the test counts them: id, aggregate id, an 8-byte seq, type, data.
fn event_bytes(c: &Connection, filter: &str) -> (u64, u64) {
    let mut st = c
        .prepare(&format!(
            "SELECT id, aggregate_id, type, data FROM event e WHERE {filter}"
        ))
        .unwrap();
    let mut q = st.query([]).unwrap();
    let (mut n, mut bytes) = (0, 0);
    while let Some(r) = q.next().unwrap() {
        n += 1;
        for i in 0..4 {
            if let rusqlite::types::ValueRef::Text(t) = r.get_ref(i).unwrap() {
                bytes += t.len() as u64;
            }
        }
        bytes += 8;
    }
    (n, bytes)
}

fn category<'a>(doc: &'a Value, name: &str) -> Option<&'a Value> {
    doc["categories"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["category"] == name)
}

const IDLE: &str = "events of idle sessions";
const ORPHANS: &str = "events of deleted sessions";

#[test]
fn reclaim_removes_only_what_opencode_never_reads_and_restore_puts_it_back() {
    let o = store("opencode-1.18", 8);
    let c = o.conn();
    let sessions = o.ids("SELECT id FROM session ORDER BY id");
    let with_events: Vec<String> = sessions
        .iter()
        .filter(|s| event_bytes(&c, &format!("aggregate_id = '{s}'")).0 > 0)
        .cloned()
        .collect();
    assert!(with_events.len() >= 6, "{with_events:?}");
    // Sessions reclaim must leave alone: one opencode wrote to a minute before agent-db's clock,
    // one in a workspace, one shared, one with input waiting, one with a sync owner.
    let now_ms = chrono::DateTime::parse_from_rfc3339(NOW)
        .unwrap()
        .timestamp_millis();
    let (busy, workspace, shared, pending, owned) = (
        &with_events[0],
        &with_events[1],
        &with_events[2],
        &with_events[3],
        &with_events[4],
    );
    // A session whose events a sync owner holds.
    c.execute(
        "UPDATE event_sequence SET owner_id = 'own_1' WHERE aggregate_id = ?1",
        [owned],
    )
    .unwrap();
    c.execute(
        "UPDATE session SET time_updated = ?1 WHERE id = ?2",
        rusqlite::params![now_ms - 60_000, busy],
    )
    .unwrap();
    c.execute(
        "INSERT INTO workspace (id, type, project_id) SELECT 'wrk_1', 'worktree', project_id FROM session WHERE id = ?1",
        [workspace],
    )
    .unwrap();
    c.execute(
        "UPDATE session SET workspace_id = 'wrk_1' WHERE id = ?1",
        [workspace],
    )
    .unwrap();
    c.execute(
        "INSERT INTO session_share (session_id, id, secret, url, time_created, time_updated) VALUES (?1, 'shr_1', 's', 'https://opncd.ai/s/x', 1, 1)",
        [shared],
    )
    .unwrap();
    // opencode 1.18.33's `session_input` (migration 20260604172448_event_sourced_session_input).
    c.execute_batch(
        "CREATE TABLE IF NOT EXISTS `session_input` (
          `id` text PRIMARY KEY,
          `session_id` text NOT NULL,
          `prompt` text NOT NULL,
          `delivery` text NOT NULL,
          `admitted_seq` integer NOT NULL,
          `promoted_seq` integer,
          `time_created` integer NOT NULL,
          CONSTRAINT `fk_session_input_session_id_session_id_fk` FOREIGN KEY (`session_id`) REFERENCES `session`(`id`) ON DELETE CASCADE
        );",
    )
    .unwrap();
    c.execute(
        "INSERT INTO session_input (id, session_id, prompt, delivery, admitted_seq, promoted_seq, time_created) VALUES ('inp_1', ?1, '{}', 'queue', 0, NULL, 1)",
        [pending],
    )
    .unwrap();
    // Events of a session opencode no longer has (and its sequence row).
    c.execute_batch(
        "INSERT INTO event_sequence (aggregate_id, seq) VALUES ('ses_gone', 1);
         INSERT INTO event (id, aggregate_id, seq, type, data) VALUES
           ('evt_g0', 'ses_gone', 0, 'session.created.1', '{\"sessionID\":\"ses_gone\"}'),
           ('evt_g1', 'ses_gone', 1, 'session.updated.1', '{\"sessionID\":\"ses_gone\",\"x\":1}');",
    )
    .unwrap();
    let kept =
        format!("aggregate_id IN ('{busy}', '{workspace}', '{shared}', '{pending}', '{owned}')");
    let idle_filter = format!("aggregate_id IN (SELECT id FROM session) AND NOT ({kept})");
    let (idle_rows, idle_bytes) = event_bytes(&c, &idle_filter);
    let (orphan_rows, orphan_bytes) = event_bytes(&c, "aggregate_id = 'ses_gone'");
    let before = dump(&c);
    drop(c);
    let hash = files_hash(&o.db);

    // --dry-run: the bytes, nothing written.
    let mut dry = o.cmd();
    dry.args(["reclaim", "--dry-run", "--json"]);
    let (doc, code) = json(dry);
    assert_eq!(code, 0, "{doc}");
    assert_eq!(files_hash(&o.db), hash, "--dry-run wrote nothing");
    let idle = category(&doc, IDLE).expect("idle category");
    assert_eq!(idle["rows"], idle_rows, "{doc}");
    assert_eq!(idle["bytes"], idle_bytes, "{doc}");
    let orphans = category(&doc, ORPHANS).expect("orphan category");
    assert_eq!(
        orphans["rows"],
        orphan_rows + 1,
        "events and the sequence row: {doc}"
    );
    assert!(orphans["bytes"].as_u64().unwrap() > orphan_bytes, "{doc}");

    // The reclaim.
    let mut run = o.cmd();
    run.args(["reclaim", "--yes", "--json"]);
    let (doc, code) = json(run);
    assert_eq!(code, 0, "{doc}");
    let c = o.conn();
    let after = dump(&c);
    for (table, rows) in &before {
        let now = &after[table];
        match table.as_str() {
            "event" => {
                let left: Vec<&String> = now.keys().collect();
                let expect: Vec<&String> = rows
                    .iter()
                    .filter(|(_, v)| {
                        [busy, workspace, shared, pending, owned]
                            .iter()
                            .any(|s| v[1] == format!("text:{}", hex(s.as_bytes())))
                    })
                    .map(|(k, _)| k)
                    .collect();
                assert_eq!(left, expect, "only the guarded sessions' events are left");
            }
            "event_sequence" => {
                let mut expect = rows.clone();
                expect.remove(&format!("text:{}", hex(b"ses_gone")));
                assert_eq!(now, &expect, "sequence rows of live sessions kept");
            }
            _ => assert_eq!(now, rows, "{table} untouched"),
        }
    }
    drop(c);
    // Again: nothing left to do.
    let mut again = o.cmd();
    again.args(["reclaim", "--dry-run", "--json"]);
    let (doc, _) = json(again);
    assert!(doc["categories"].as_array().unwrap().is_empty(), "{doc}");

    // restore every reclaimed conversation: every table as it was, value for value.
    let c = o.conn();
    let ids: Vec<String> = {
        let mut st = c
            .prepare("SELECT DISTINCT conversation_id FROM agent_db_compactions WHERE strategy = 'reclaim'")
            .unwrap();
        let r = st.query_map([], |r| r.get::<_, String>(0)).unwrap();
        r.map(|x| x.unwrap()).collect()
    };
    drop(c);
    assert!(ids.contains(&"ses_gone".to_string()));
    for id in &ids {
        o.cmd().args(["restore", id]).assert().success();
    }
    assert_eq!(dump(&o.conn()), before, "restore gives every row back");
}

/// Several conversations go in one transaction; one whose removal fails (here a trigger aborts
/// the delete of its events) is reported failed with its rows untouched, while the others of its
/// transaction are removed, and `restore` gives every one of them back.
#[test]
fn one_failing_conversation_leaves_the_rest_of_its_batch_removed() {
    let o = store("opencode-1.18", 8);
    let c = o.conn();
    let with_events: Vec<String> = {
        let mut st = c
            .prepare("SELECT DISTINCT aggregate_id FROM event WHERE aggregate_id IN (SELECT id FROM session) ORDER BY 1")
            .unwrap();
        let r = st.query_map([], |r| r.get::<_, String>(0)).unwrap();
        r.map(|x| x.unwrap()).collect()
    };
    assert!(with_events.len() >= 4, "{with_events:?}");
    let bad = &with_events[1];
    let before = dump(&c);
    let bad_events = event_bytes(&c, &format!("aggregate_id = '{bad}'"));
    c.execute_batch(&format!(
        "CREATE TRIGGER no_delete BEFORE DELETE ON event WHEN old.aggregate_id = '{bad}'
         BEGIN SELECT RAISE(ABORT, 'this session is pinned'); END;"
    ))
    .unwrap();
    drop(c);

    let mut run = o.cmd();
    run.args(["reclaim", "--yes", "--json"]);
    let (doc, code) = json(run);
    assert_eq!(code, 1, "one failure: partial: {doc}");
    let removed = doc["removed"].as_array().unwrap();
    assert_eq!(removed.len(), with_events.len(), "{doc}");
    for r in removed {
        let failed = r["status"].as_str().unwrap().starts_with("failed");
        assert_eq!(failed, r["conversation"] == bad.as_str(), "{r}");
        assert_eq!(r["compaction_id"].is_null(), failed, "{r}");
    }
    let c = o.conn();
    assert_eq!(
        event_bytes(&c, &format!("aggregate_id = '{bad}'")),
        bad_events,
        "the failed session keeps its events"
    );
    assert_eq!(
        event_bytes(&c, &format!("aggregate_id <> '{bad}'")).0,
        0,
        "every other session's events were removed"
    );
    let audited: i64 = c
        .query_row(
            "SELECT COUNT(*) FROM agent_db_compactions WHERE strategy = 'reclaim'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(
        audited as usize,
        with_events.len() - 1,
        "one audit row per removal"
    );
    c.execute_batch("DROP TRIGGER no_delete").unwrap();
    drop(c);
    for id in with_events.iter().filter(|s| *s != bad) {
        o.cmd().args(["restore", id]).assert().success();
    }
    assert_eq!(dump(&o.conn()), before, "restore gives every row back");
}

#[test]
fn reclaim_of_a_store_with_nothing_to_reclaim_changes_nothing() {
    let env = Env::generated(6, 2, &[]);
    let hash = env.files_hash();
    let out = env.cmd().args(["reclaim", "--yes"]).output().unwrap();
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).contains("nothing to reclaim"));
    assert_eq!(env.files_hash(), hash);
}

/// After a reclaim, `vacuum --into PATH` writes a smaller copy holding the same rows and leaves
/// the store as it was; an existing PATH is refused (exit 2) with nothing written.
#[test]
fn vacuum_into_writes_a_compacted_copy_and_leaves_the_store() {
    let o = store("opencode-1.18", 6);
    o.cmd().args(["reclaim", "--yes"]).assert().success();
    let hash = files_hash(&o.db);
    let into = o.dir.path().join("copy.db");
    o.cmd()
        .args(["vacuum", "--into"])
        .arg(&into)
        .assert()
        .success();
    assert_eq!(files_hash(&o.db), hash, "the store is unchanged");
    let (a, b) = (o.conn(), Connection::open(&into).unwrap());
    assert_eq!(dump(&b), dump(&a), "the copy holds the same rows");
    let free: i64 = a
        .query_row("PRAGMA freelist_count", [], |r| r.get(0))
        .unwrap();
    assert!(free > 0, "the reclaim freed pages");
    assert!(
        std::fs::metadata(&into).unwrap().len() < std::fs::metadata(&o.db).unwrap().len(),
        "the copy has no free pages"
    );
    let before = std::fs::read(&into).unwrap();
    let out = o
        .cmd()
        .args(["vacuum", "--into"])
        .arg(&into)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(std::fs::read(&into).unwrap(), before);
}

//! The agents' own to-do lists in the retention score: docker-agent's `session_todos` row,
//! opencode's `todo` table and goose's `todo.v0` checklist in `sessions.extension_data`. On a
//! generated store of each, the test plants to-dos with its own SQL (open ones and closed ones,
//! with texts found nowhere in the history), runs the real binary, and checks:
//!
//! - the dry run's `retention.by_kind.todo` total grows by exactly the open ones it planted (the
//!   closed ones are not counted), and an extractive summary, which does not read the store's
//!   to-do table, keeps none of them;
//! - an llm compaction against a model server on 127.0.0.1 whose answer names no to-do lands
//!   with every to-do kept: the stored summary, read back with the test's SQL, carries each
//!   planted open to-do in its artifact ledger and no closed one.

use std::path::PathBuf;

use agent_db_synth::docker_agent::{generate_docker_agent, Generation, CURRENT_NEWEST};
use agent_db_synth::goose::{generate_goose, GooseSchema};
use agent_db_synth::opencode::{generate_opencode, OpencodeEra};
use agent_db_synth::SynthOptions;
use rusqlite::Connection;
use serde_json::{json, Value};
use tempfile::TempDir;

use crate::common::{bare_cmd, json, MiniLlm};

const OPEN: [&str; 2] = [
    "Rewire the quasar flux adapter before the Thursday demo",
    "Backfill the heliotrope ledger from the March export",
];
const CLOSED: &str = "Retire the obsolete zephyr shim in the gateway";

struct S {
    dir: TempDir,
    db: PathBuf,
}

impl S {
    fn new(file: &str, generate: impl FnOnce(&PathBuf, &SynthOptions)) -> S {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join(file);
        let opts = SynthOptions {
            conversations: 3,
            seed: 11,
            scale: 1.0,
            ..SynthOptions::default()
        };
        generate(&db, &opts);
        S { dir, db }
    }

    fn conn(&self) -> Connection {
        Connection::open(&self.db).unwrap()
    }

    fn compact(&self, args: &[&str]) -> Value {
        let mut c = bare_cmd(self.dir.path());
        c.arg("--db")
            .arg(&self.db)
            .env("AGENT_DB_API_KEY", "x")
            .args([
                "compact",
                "--keep-tokens",
                "2000",
                "--force",
                "--yes",
                "--json",
            ])
            .args(args);
        let (doc, code) = json(c);
        assert_eq!(code, 0, "{doc:#}");
        doc
    }

    /// A session the dry run would compact, with its `todo` count before anything is planted.
    fn planned(&self) -> (String, Value) {
        let doc = self.compact(&[
            "--all-over",
            "0",
            "--idle",
            "0",
            "--strategy",
            "extractive",
            "--dry-run",
        ]);
        let row = crate::common::all_rows(&doc)
            .iter()
            .find(|r| r["status"] == "planned")
            .unwrap_or_else(|| panic!("no session planned: {doc:#}"))
            .clone();
        (row["id"].as_str().unwrap().to_string(), todo_count(&row))
    }

    fn dry_run(&self, id: &str) -> Value {
        let doc = self.compact(&[id, "--strategy", "extractive", "--dry-run"]);
        doc["conversations"][0].clone()
    }

    /// An llm compaction against `llm` (its answer names no to-do), with no retention floor.
    fn llm(&self, id: &str, llm: &MiniLlm) -> Value {
        let base = llm.base_url();
        let doc = self.compact(&[
            id,
            "--strategy",
            "llm",
            "--llm-provider",
            "openai",
            "--model",
            "test-model",
            "--base-url",
            &base,
            "--min-retention",
            "0",
        ]);
        let row = doc["conversations"][0].clone();
        assert_eq!(row["status"], "compacted", "{doc:#}");
        assert!(llm.requests() > 0);
        row
    }
}

fn todo_count(row: &Value) -> Value {
    row["retention"]["by_kind"]
        .get("todo")
        .cloned()
        .unwrap_or(json!({"kept": 0, "total": 0}))
}

fn n(v: &Value, k: &str) -> u64 {
    v[k].as_u64().unwrap()
}

/// The planted texts occur nowhere in the store's messages before the compaction (so what is
/// found after was written by it).
fn absent(text: &str, planted: &[&str]) {
    for p in planted.iter().chain([&CLOSED]) {
        assert!(!text.contains(p), "{p} is already in the history");
    }
}

/// The dry run counts the planted open to-dos and not the closed one; extractive keeps none.
fn check_counted(s: &S, id: &str, before: &Value) {
    let row = s.dry_run(id);
    assert_eq!(row["status"], "planned", "{row:#}");
    let after = todo_count(&row);
    assert_eq!(
        n(&after, "total"),
        n(before, "total") + OPEN.len() as u64,
        "{row:#}"
    );
    assert_eq!(n(&after, "kept"), n(before, "kept"), "{row:#}");
}

/// After an llm compaction whose model wrote no to-do, `summary` (read with the test's SQL)
/// carries every open to-do and not the closed one, and the row keeps them all.
fn check_ledger(row: &Value, summary: &str) {
    let t = todo_count(row);
    assert_eq!(n(&t, "kept"), n(&t, "total"), "{row:#}");
    assert!(n(&t, "total") >= OPEN.len() as u64, "{row:#}");
    assert!(
        summary.contains("The user asked for a refactor; it is done."),
        "the model's answer: {summary}"
    );
    for o in OPEN {
        assert!(summary.contains(o), "{o} is in the ledger: {summary}");
    }
    assert!(
        !summary.contains(CLOSED),
        "a completed to-do is not: {summary}"
    );
}

fn strings(c: &Connection, sql: &str, id: &str) -> String {
    let mut st = c.prepare(sql).unwrap();
    let rows = st
        .query_map([id], |r| r.get::<_, Option<String>>(0))
        .unwrap();
    rows.filter_map(|r| r.unwrap())
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn docker_agent_session_todos_count_and_the_ledger_carries_them() {
    let s = S::new("session.db", |db, o| {
        generate_docker_agent(db, o, Generation::Current(CURRENT_NEWEST)).unwrap();
    });
    let (id, before) = s.planned();
    let items = "SELECT CAST(message_json AS TEXT) FROM session_items WHERE session_id = ?1 \
                 UNION ALL SELECT CAST(summary_text AS TEXT) FROM session_items WHERE session_id = ?1";
    absent(&strings(&s.conn(), items, &id), &OPEN);
    // docker-agent's shape (`[]session.Todo`): id, description, status.
    let todos = json!([
        {"id": "todo_1", "description": OPEN[0], "status": "pending"},
        {"id": "todo_2", "description": CLOSED, "status": "completed"},
        {"id": "todo_3", "description": OPEN[1], "status": "in-progress"},
    ]);
    s.conn()
        .execute(
            "INSERT INTO session_todos (session_id, todos) VALUES (?1, ?2)",
            [&id, &todos.to_string()],
        )
        .unwrap();
    check_counted(&s, &id, &before);

    let llm = MiniLlm::start();
    let row = s.llm(&id, &llm);
    let summary = strings(
        &s.conn(),
        "SELECT CAST(summary_text AS TEXT) FROM session_items WHERE session_id = ?1 \
         AND item_type = 'summary' ORDER BY position DESC LIMIT 1",
        &id,
    );
    check_ledger(&row, &summary);
}

#[test]
fn opencode_todo_rows_count_and_the_ledger_carries_them() {
    let s = S::new("opencode.db", |db, o| {
        generate_opencode(db, o, OpencodeEra::preset("opencode").unwrap()).unwrap();
    });
    let (id, before) = s.planned();
    let parts = "SELECT CAST(data AS TEXT) FROM part WHERE session_id = ?1";
    absent(&strings(&s.conn(), parts, &id), &OPEN);
    let c = s.conn();
    for (pos, (content, status)) in [
        (OPEN[0], "in_progress"),
        (CLOSED, "completed"),
        ("Drop the legacy fax bridge", "cancelled"),
        (OPEN[1], "pending"),
    ]
    .iter()
    .enumerate()
    {
        c.execute(
            "INSERT INTO todo (session_id, content, status, priority, position, time_created, time_updated) \
             VALUES (?1, ?2, ?3, 'high', ?4, 1, 1)",
            rusqlite::params![id, content, status, pos as i64],
        )
        .unwrap();
    }
    check_counted(&s, &id, &before);

    let llm = MiniLlm::start();
    let row = s.llm(&id, &llm);
    let all = strings(&s.conn(), parts, &id);
    check_ledger(&row, &all);
    assert!(
        !all.contains("Drop the legacy fax bridge"),
        "a cancelled to-do is not carried"
    );
}

#[test]
fn goose_todo_checklist_counts_and_the_ledger_carries_it() {
    let s = S::new("sessions.db", |db, o| {
        generate_goose(db, o, &GooseSchema::preset("goose-v16").unwrap()).unwrap();
    });
    let (id, before) = s.planned();
    let msgs = "SELECT CAST(content_json AS TEXT) FROM messages WHERE session_id = ?1";
    absent(&strings(&s.conn(), msgs, &id), &OPEN);
    // What goose's todo extension keeps: the markdown its `todo_write` tool last wrote.
    let content = format!(
        "- [ ] {}\n- [x] {CLOSED}\n  - [ ] {}\nNotes: none",
        OPEN[0], OPEN[1]
    );
    let data = json!({"todo.v0": {"content": content}});
    s.conn()
        .execute(
            "UPDATE sessions SET extension_data = ?1 WHERE id = ?2",
            [&data.to_string(), &id],
        )
        .unwrap();
    check_counted(&s, &id, &before);

    let llm = MiniLlm::start();
    let row = s.llm(&id, &llm);
    let summary = strings(&s.conn(), msgs, &id);
    check_ledger(&row, &summary);
}

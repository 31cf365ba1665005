//! Real stores hold every byte SQLite can hold (issue: a `first_message` cut inside a UTF-8
//! character, as kodelet writes it, panicked the writer and aborted the batch).
//!
//! The oracle is SQL written here: every cell of every agent table as `typeof()` and `hex()`,
//! before a compaction and after its restore. Values are planted with SQL too (`CAST(X'…' AS
//! TEXT)`, BLOBs, integers in TEXT/DATETIME columns), never through agent-db.
//!
//! - The acceptance batch: a kodelet store where one row in ten carries odd values, compacted
//!   with `--all-over 0.2 --keep-tokens 1000`, then restored.
//! - The regression: a row whose `first_message` kodelet cut inside a multi-byte character; the
//!   row agent-db writes carries kodelet's exact bytes.
//! - A property test: one cell of one row, in each store kind, set to arbitrary values; `list`,
//!   `show`, `compact` with each strategy (llm against a server on 127.0.0.1) and `restore` never
//!   panic, every other conversation ends as it does on the untouched store, and restore gives
//!   back every cell.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use agent_db_synth::docker_agent::{generate_docker_agent, Generation};
use agent_db_synth::SynthOptions;
use proptest::prelude::*;
use rusqlite::types::{ToSqlOutput, Value as SqlValue};
use rusqlite::Connection;
use serde_json::Value;

use crate::common::{bare_cmd, MiniLlm, NOW};

/// Every cell of every table (agent-db's own and SQLite's excepted) as (typeof, hex), by rowid.
type Cells = BTreeMap<String, Vec<Vec<(String, String)>>>;

fn cells(db: &Path) -> Cells {
    let c = Connection::open(db).expect("open");
    let tables: Vec<String> = {
        let mut s = c
            .prepare(
                "SELECT name FROM sqlite_master WHERE type = 'table'
                 AND name NOT LIKE 'agent_db_%' AND name NOT LIKE 'sqlite_%' ORDER BY name",
            )
            .unwrap();
        let rows = s.query_map([], |r| r.get(0)).unwrap();
        rows.map(|r| r.unwrap()).collect()
    };
    let mut out = Cells::new();
    for t in tables {
        let cols: Vec<String> = {
            let mut s = c
                .prepare(&format!("SELECT name FROM pragma_table_info('{t}')"))
                .unwrap();
            let rows = s.query_map([], |r| r.get(0)).unwrap();
            rows.map(|r| r.unwrap()).collect()
        };
        let select: Vec<String> = cols
            .iter()
            .map(|c| format!("typeof(\"{c}\"), hex(\"{c}\")"))
            .collect();
        let order = if t == "migrations" || t == "schema_migrations" {
            "1"
        } else {
            "rowid"
        };
        let mut s = c
            .prepare(&format!(
                "SELECT {} FROM \"{t}\" ORDER BY {order}",
                select.join(", ")
            ))
            .unwrap();
        let n = cols.len();
        let rows = s
            .query_map([], |r| {
                (0..n)
                    .map(|i| Ok((r.get(2 * i)?, r.get(2 * i + 1)?)))
                    .collect::<rusqlite::Result<Vec<_>>>()
            })
            .unwrap();
        out.insert(t, rows.map(|r| r.unwrap()).collect());
    }
    out
}

/// The first differing cell, for a readable failure.
fn first_difference(a: &Cells, b: &Cells) -> Option<String> {
    for (t, rows) in a {
        let Some(other) = b.get(t) else {
            return Some(format!("table {t} is gone"));
        };
        if rows.len() != other.len() {
            return Some(format!("{t}: {} rows became {}", rows.len(), other.len()));
        }
        for (i, (r, o)) in rows.iter().zip(other).enumerate() {
            for (j, (x, y)) in r.iter().zip(o).enumerate() {
                if x != y {
                    return Some(format!("{t} row {i} column {j}: {x:?} became {y:?}"));
                }
            }
        }
    }
    (a.len() != b.len()).then(|| "a table appeared".into())
}

fn integrity_ok(db: &Path) {
    let c = Connection::open(db).unwrap();
    let ok: String = c
        .query_row("PRAGMA integrity_check", [], |r| r.get(0))
        .unwrap();
    assert_eq!(ok, "ok");
}

struct Out {
    code: i32,
    stdout: String,
    stderr: String,
}

/// Run agent-db against `db` (clock pinned, clean environment); never a panic, never exit 2 (a
/// usage error) or 8 (an internal error) for odd stored data.
fn agent(db: &Path, args: &[&str], envs: &[(&str, &str)]) -> Out {
    let dir = db.parent().unwrap();
    let mut c = bare_cmd(dir);
    c.current_dir(dir).arg("--db").arg(db).args(args);
    for (k, v) in envs {
        c.env(k, v);
    }
    let o = c.output().expect("run agent-db");
    let out = Out {
        code: o.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
    };
    assert!(
        !out.stderr.contains("panicked") && ![2, 8, 101, -1].contains(&out.code),
        "{args:?} exit {}:\n{}",
        out.code,
        out.stderr
    );
    out
}

fn json_of(out: &Out, what: &str) -> Value {
    serde_json::from_str(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{what}: stdout is not one JSON document ({e})\n{}\n{}",
            out.stdout, out.stderr
        )
    })
}

/// (id, (status, detail)) of every row of a compact report.
fn statuses(doc: &Value) -> BTreeMap<String, (String, String)> {
    crate::common::all_rows(doc)
        .iter()
        .map(|r| {
            (
                r["id"].as_str().unwrap().to_string(),
                (
                    r["status"].as_str().unwrap().to_string(),
                    r["detail"].as_str().unwrap_or("").to_string(),
                ),
            )
        })
        .collect()
}

/// A value planted in a cell.
#[derive(Debug, Clone)]
enum Odd {
    Text(Vec<u8>),
    Blob(Vec<u8>),
    Null,
    Int(i64),
    Real(f64),
}

impl rusqlite::ToSql for Odd {
    fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
        use rusqlite::types::ValueRef;
        Ok(ToSqlOutput::Borrowed(match self {
            Odd::Text(b) => ValueRef::Text(b),
            Odd::Blob(b) => ValueRef::Blob(b),
            Odd::Null => ValueRef::Null,
            Odd::Int(i) => ValueRef::Integer(*i),
            Odd::Real(f) => ValueRef::Real(*f),
        }))
    }
}

/// Set one cell; `false` when the schema refuses the value (a NOT NULL column and NULL).
fn plant(db: &Path, table: &str, column: &str, key: (&str, &SqlValue), v: &Odd) -> bool {
    let c = Connection::open(db).unwrap();
    let sql = format!(
        "UPDATE \"{table}\" SET \"{column}\" = ?1 WHERE \"{}\" = ?2",
        key.0
    );
    match c.execute(&sql, rusqlite::params![v, key.1]) {
        Ok(n) => {
            assert_eq!(n, 1, "{sql}");
            true
        }
        Err(rusqlite::Error::SqliteFailure(f, _))
            if f.code == rusqlite::ErrorCode::ConstraintViolation =>
        {
            false
        }
        Err(e) => panic!("{sql}: {e}"),
    }
}

// ---------------------------------------------------------------------------------------------
// The acceptance batch and the regression.

fn kodelet_store(n: usize, seed: u64) -> (tempfile::TempDir, PathBuf) {
    kodelet_store_scaled(n, seed, 1.0)
}

fn kodelet_store_scaled(n: usize, seed: u64, scale: f64) -> (tempfile::TempDir, PathBuf) {
    let e = crate::common::Env::generated_at(n, seed, &[], scale);
    (e.dir, e.db)
}

fn ids(db: &Path, sql: &str) -> Vec<String> {
    let c = Connection::open(db).unwrap();
    let mut s = c.prepare(sql).unwrap();
    let rows = s.query_map([], |r| r.get(0)).unwrap();
    rows.map(|r| r.unwrap()).collect()
}

#[test]
fn a_batch_over_odd_rows_completes_and_restores_every_cell() {
    let (_dir, db) = kodelet_store(60, 1010);
    // One row in ten: four of the conversations the threshold selects (so the odd values go
    // through the whole write path) and two it does not.
    let over = ids(
        &db,
        "SELECT id FROM conversations WHERE json_extract(usage, '$.currentContextWindow') * 1.0
           / json_extract(usage, '$.maxContextWindow') > 0.2 ORDER BY id",
    );
    let under = ids(
        &db,
        "SELECT id FROM conversations WHERE NOT (json_extract(usage, '$.currentContextWindow') * 1.0
           / json_extract(usage, '$.maxContextWindow') > 0.2) ORDER BY id",
    );
    assert!(
        over.len() >= 6,
        "the fixture selects enough: {}",
        over.len()
    );
    let text_odd: Vec<&String> = over.iter().take(3).chain(under.iter().take(2)).collect();
    let int_odd = &over[3];
    let odd: Vec<&String> = text_odd.iter().copied().chain([int_odd]).collect();
    let c = Connection::open(&db).unwrap();
    for id in &text_odd {
        // Invalid UTF-8 where kodelet's byte cuts and Go strings put it, and a BLOB metadata.
        for (table, column, bytes) in [
            (
                "conversation_summaries",
                "first_message",
                "6669782074686520C3",
            ),
            ("conversations", "summary", "6E616D6520E282"),
            ("conversation_summaries", "summary", "6E616D6520E282"),
            ("conversations", "cwd", "2F7265706F2FFF"),
            ("conversation_summaries", "cwd", "2F7265706F2FFF"),
        ] {
            c.execute(
                &format!("UPDATE {table} SET {column} = CAST(X'{bytes}' AS TEXT) WHERE id = ?1"),
                [id],
            )
            .unwrap();
        }
        c.execute(
            "UPDATE conversations SET metadata = X'7B226D6F64656C223A2278227D00FF' WHERE id = ?1",
            [id],
        )
        .unwrap();
    }
    // An INTEGER updated_at (DATETIME has NUMERIC affinity, so SQLite keeps the integer).
    c.execute(
        "UPDATE conversations SET updated_at = 1761998400 WHERE id = ?1",
        [int_odd],
    )
    .unwrap();
    drop(c);
    let before = cells(&db);

    let out = agent(
        &db,
        &[
            "compact",
            "--all-over",
            "0.2",
            "--keep-tokens",
            "1000",
            "--json",
        ],
        &[],
    );
    assert!(out.code == 0 || out.code == 1, "exit {}", out.code);
    let doc = json_of(&out, "compact");
    let rows = statuses(&doc);
    let mut compacted = 0;
    for (id, (status, reason)) in &rows {
        if odd.contains(&id) {
            assert!(
                status == "compacted" || (status == "failed" && !reason.is_empty()),
                "odd row {id}: {status} {reason}"
            );
        } else {
            assert_ne!(status, "failed", "{id} failed: {reason}");
        }
        compacted += usize::from(status == "compacted");
    }
    assert!(compacted >= 3, "only {compacted} compacted: {rows:?}");
    for id in over.iter().take(3) {
        assert_eq!(
            rows[id].0, "compacted",
            "{id}: odd text values do not stop a compaction"
        );
    }
    assert_eq!(
        doc["totals"]["failed"].as_u64().unwrap() as usize,
        rows.values().filter(|(s, _)| s == "failed").count()
    );
    integrity_ok(&db);

    let out = agent(&db, &["restore", "--all-since", "1h", "--json"], &[]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    json_of(&out, "restore");
    integrity_ok(&db);
    if let Some(d) = first_difference(&before, &cells(&db)) {
        panic!("restore did not give back every cell: {d}");
    }
}

/// kodelet's `first_message` for a first user text: its first 97 bytes and `...` when longer
/// than 100 bytes, cut by bytes as Go does (docs/stores.md, kodelet), computed here independently.
fn go_first_message(text: &str) -> Vec<u8> {
    if text.len() > 100 {
        let mut v = text.as_bytes()[..97].to_vec();
        v.extend_from_slice(b"...");
        v
    } else {
        text.as_bytes().to_vec()
    }
}

#[test]
fn a_first_message_cut_inside_a_character_is_written_as_kodelet_writes_it() {
    let (_dir, db) = kodelet_store(12, 77);
    let c = Connection::open(&db).unwrap();
    let id: String = c
        .query_row(
            "SELECT id FROM conversations WHERE provider = 'anthropic'
             ORDER BY length(raw_messages) DESC LIMIT 1",
            [],
            |r| r.get(0),
        )
        .unwrap();
    // A first instruction with accents, CJK and emoji around byte 97.
    let text = format!(
        "{}é漢字🙂 please refactor the parser and keep the tests green",
        "a".repeat(96)
    );
    let raw: String = c
        .query_row(
            "SELECT raw_messages FROM conversations WHERE id = ?1",
            [&id],
            |r| r.get(0),
        )
        .unwrap();
    let mut msgs: Vec<Value> = serde_json::from_str(&raw).unwrap();
    msgs[0] = serde_json::json!({"content": [{"text": text, "type": "text"}], "role": "user"});
    let raw = serde_json::to_string(&msgs).unwrap();
    c.execute(
        "UPDATE conversations SET raw_messages = ?1 WHERE id = ?2",
        [&raw, &id],
    )
    .unwrap();
    let cut = go_first_message(&text);
    assert!(
        std::str::from_utf8(&cut).is_err(),
        "the cut splits a character"
    );
    c.execute(
        "UPDATE conversation_summaries SET first_message = ?1 WHERE id = ?2",
        rusqlite::params![Odd::Text(cut.clone()), id],
    )
    .unwrap();
    drop(c);

    let stored = |db: &Path| -> (String, Vec<u8>) {
        Connection::open(db)
            .unwrap()
            .query_row(
                "SELECT typeof(first_message), CAST(first_message AS BLOB) FROM conversation_summaries WHERE id = ?1",
                [&id],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .unwrap()
    };
    let before = cells(&db);

    // The crash of the issue: archiving the cut value. The summary then becomes the first
    // message; restore brings the cut bytes back.
    let out = agent(
        &db,
        &["compact", &id, "--keep-tokens", "500", "--json"],
        &[],
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(statuses(&json_of(&out, "compact"))[&id].0, "compacted");
    for args in [
        vec!["list", "--json"],
        vec!["list"],
        vec!["show", id.as_str()],
        vec!["history", "--json"],
    ] {
        let out = agent(&db, &args, &[]);
        assert_eq!(out.code, 0, "{args:?}: {}", out.stderr);
    }
    let out = agent(&db, &["restore", &id, "--json"], &[]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(stored(&db), ("text".to_string(), cut.clone()));
    assert!(first_difference(&before, &cells(&db)).is_none());

    // prune keeps the first message: agent-db then writes kodelet's own cut, byte for byte.
    let out = agent(
        &db,
        &[
            "compact",
            &id,
            "--strategy",
            "prune",
            "--keep-tokens",
            "500",
            "--json",
        ],
        &[],
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(statuses(&json_of(&out, "compact"))[&id].0, "compacted");
    assert_eq!(stored(&db), ("text".to_string(), cut));
    integrity_ok(&db);
}

// ---------------------------------------------------------------------------------------------
// The property test.

/// The LLM server of the property test, started once.
fn llm_server() -> &'static MiniLlm {
    static SERVER: OnceLock<MiniLlm> = OnceLock::new();
    SERVER.get_or_init(MiniLlm::start)
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Kind {
    Kodelet,
    DockerAgent,
}

/// The generated store of each kind, made once; every case works on a copy.
fn base(kind: Kind) -> &'static (tempfile::TempDir, PathBuf) {
    static K: OnceLock<(tempfile::TempDir, PathBuf)> = OnceLock::new();
    static D: OnceLock<(tempfile::TempDir, PathBuf)> = OnceLock::new();
    match kind {
        // A quarter of the default message sizes: the cases are about odd cells, not volume,
        // and each runs about ten commands on a copy.
        Kind::Kodelet => K.get_or_init(|| kodelet_store_scaled(6, 4242, 0.25)),
        Kind::DockerAgent => D.get_or_init(|| {
            let dir = tempfile::tempdir().unwrap();
            let db = dir.path().join("session.db");
            let opts = SynthOptions {
                conversations: 6,
                seed: 4242,
                scale: 0.25,
                ..SynthOptions::default()
            };
            generate_docker_agent(&db, &opts, Generation::Modern).expect("generate");
            (dir, db)
        }),
    }
}

/// The cells a case may change, per store kind: (table, column).
fn columns(kind: Kind) -> &'static [(&'static str, &'static str)] {
    match kind {
        Kind::Kodelet => &[
            ("conversations", "raw_messages"),
            ("conversations", "provider"),
            ("conversations", "usage"),
            ("conversations", "summary"),
            ("conversations", "created_at"),
            ("conversations", "updated_at"),
            ("conversations", "metadata"),
            ("conversations", "tool_results"),
            ("conversations", "cwd"),
            ("conversation_summaries", "first_message"),
            ("conversation_summaries", "summary"),
            ("conversation_summaries", "usage"),
            ("conversation_summaries", "message_count"),
            ("conversation_summaries", "provider"),
            ("conversation_summaries", "metadata"),
            ("conversation_summaries", "updated_at"),
            ("conversation_summaries", "cwd"),
        ],
        Kind::DockerAgent => &[
            ("sessions", "title"),
            ("sessions", "created_at"),
            ("sessions", "working_dir"),
            ("sessions", "input_tokens"),
            ("sessions", "output_tokens"),
            ("session_items", "message_json"),
            ("session_items", "summary_text"),
            ("session_items", "item_type"),
            ("session_items", "position"),
            ("session_items", "model"),
        ],
    }
}

/// The victim conversation and the key of the row to change in `table`.
fn victim(db: &Path, kind: Kind, table: &str, pick: usize) -> (String, (&'static str, SqlValue)) {
    let c = Connection::open(db).unwrap();
    let sessions: Vec<String> = {
        let sql = match kind {
            Kind::Kodelet => "SELECT id FROM conversations ORDER BY id",
            Kind::DockerAgent => "SELECT id FROM sessions WHERE COALESCE(parent_id, '') = ''
                AND EXISTS (SELECT 1 FROM session_items i WHERE i.session_id = sessions.id) ORDER BY id",
        };
        let mut s = c.prepare(sql).unwrap();
        let rows = s.query_map([], |r| r.get(0)).unwrap();
        rows.map(|r| r.unwrap()).collect()
    };
    let id = sessions[pick % sessions.len()].clone();
    if table == "session_items" {
        let items: Vec<i64> = {
            let mut s = c
                .prepare("SELECT id FROM session_items WHERE session_id = ?1 ORDER BY position")
                .unwrap();
            let rows = s.query_map([&id], |r| r.get(0)).unwrap();
            rows.map(|r| r.unwrap()).collect()
        };
        let item = items[(pick / 7) % items.len()];
        return (id, ("id", SqlValue::Integer(item)));
    }
    (id.clone(), ("id", SqlValue::Text(id)))
}

fn odd_value() -> impl Strategy<Value = Odd> {
    prop_oneof![
        prop::collection::vec(any::<u8>(), 0..64).prop_map(Odd::Text),
        prop::collection::vec(any::<u8>(), 0..64).prop_map(Odd::Blob),
        Just(Odd::Null),
        prop_oneof![Just(i64::MIN), Just(i64::MAX), Just(-1i64), any::<i64>()].prop_map(Odd::Int),
        prop_oneof![
            Just(1.5e300f64),
            Just(-0.0f64),
            Just(f64::INFINITY),
            any::<f64>()
        ]
        .prop_map(Odd::Real),
        (1usize..3000).prop_map(|d| Odd::Text(
            format!("{}{}", "[{\"a\":".repeat(d), "1}]".repeat(d)).into_bytes()
        )),
        (1usize..400_000).prop_map(|n| Odd::Text(vec![b'x'; n])),
        Just(Odd::Text(
            b"{\"currentContextWindow\":-5,\"maxContextWindow\":0}".to_vec()
        )),
        Just(Odd::Text(
            b"[{\"role\":\"user\",\"content\":[{\"text\":\"\xC3\",\"type\":\"text\"}]}]".to_vec()
        )),
    ]
}

/// The strategies each kind is compacted with.
fn strategies(kind: Kind) -> Vec<Vec<String>> {
    let llm = vec![
        "--strategy".into(),
        "llm".into(),
        "--llm-provider".into(),
        "openai".into(),
        "--base-url".into(),
        llm_server().base_url(),
        "--model".into(),
        "test-model".into(),
    ];
    let mut v = vec![vec!["--strategy".into(), "extractive".into()], llm];
    if kind == Kind::Kodelet {
        v.push(vec!["--strategy".into(), "prune".into()]);
    }
    v
}

const ENVS: &[(&str, &str)] = &[("AGENT_DB_API_KEY", "sk-test-odd-values")];

fn compact_args(strategy: &[String]) -> Vec<String> {
    let mut a: Vec<String> = [
        "compact",
        "--all-over",
        "0",
        "--idle",
        "0",
        "--keep-tokens",
        "300",
        "--json",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    a.extend(strategy.iter().cloned());
    a
}

/// What each strategy does to every conversation of the untouched store (status by id).
fn baseline(kind: Kind) -> &'static Vec<BTreeMap<String, (String, String)>> {
    static K: OnceLock<Vec<BTreeMap<String, (String, String)>>> = OnceLock::new();
    static D: OnceLock<Vec<BTreeMap<String, (String, String)>>> = OnceLock::new();
    let cell = if kind == Kind::Kodelet { &K } else { &D };
    cell.get_or_init(|| {
        strategies(kind)
            .iter()
            .map(|s| {
                let dir = tempfile::tempdir().unwrap();
                let db = dir.path().join(base(kind).1.file_name().unwrap());
                std::fs::copy(&base(kind).1, &db).unwrap();
                let args = compact_args(s);
                let args: Vec<&str> = args.iter().map(String::as_str).collect();
                statuses(&json_of(&agent(&db, &args, ENVS), "baseline"))
            })
            .collect()
    })
}

fn one_case(kind: Kind, column: usize, pick: usize, value: Odd) -> Result<(), TestCaseError> {
    let (table, column) = columns(kind)[column % columns(kind).len()];
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join(base(kind).1.file_name().unwrap());
    std::fs::copy(&base(kind).1, &db).unwrap();
    let (id, key) = victim(&db, kind, table, pick);
    if !plant(&db, table, column, (key.0, &key.1), &value) {
        return Err(TestCaseError::reject("NOT NULL column"));
    }
    let before = cells(&db);

    let list = agent(&db, &["list", "--json"], &[]);
    json_of(&list, "list --json");
    agent(&db, &["list"], &[]);
    agent(&db, &["show", &id], &[]);
    agent(&db, &["show", &id, "--json"], &[]);

    for (strategy, expected) in strategies(kind).iter().zip(baseline(kind)) {
        let args = compact_args(strategy);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = agent(&db, &args, ENVS);
        prop_assert!(
            out.code == 0 || out.code == 1,
            "{strategy:?}: exit {}",
            out.code
        );
        let rows = statuses(&json_of(&out, "compact"));
        for (other, want) in expected.iter().filter(|(k, _)| **k != id) {
            prop_assert_eq!(
                rows.get(other).map(|(s, _)| s.as_str()),
                Some(want.0.as_str()),
                "{:?}: {} {:?} ({} {} = {:?})",
                strategy,
                other,
                rows.get(other),
                table,
                column,
                value
            );
        }
        let out = agent(&db, &["restore", "--all-since", "1h", "--json"], &[]);
        prop_assert!(out.code == 0, "restore exit {}: {}", out.code, out.stderr);
        if let Some(d) = first_difference(&before, &cells(&db)) {
            return Err(TestCaseError::fail(format!(
                "{strategy:?}: restore differs after {table}.{column} = {value:?}: {d}"
            )));
        }
    }
    integrity_ok(&db);
    Ok(())
}

/// Cases per store kind: 10 in the suite (each runs about ten commands); set
/// `AGENT_DB_ODD_CASES` for a deeper run.
fn cases() -> u32 {
    std::env::var("AGENT_DB_ODD_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10)
}

#[test]
fn odd_cells_never_panic_and_restore_byte_for_byte() {
    let _ = NOW;
    for kind in [Kind::Kodelet, Kind::DockerAgent] {
        let mut runner = proptest::test_runner::TestRunner::new(ProptestConfig {
            cases: cases(),
            max_global_rejects: 1000,
            failure_persistence: None,
            ..ProptestConfig::default()
        });
        runner
            .run(&(0usize..64, 0usize..64, odd_value()), |(col, pick, v)| {
                one_case(kind, col, pick, v)
            })
            .unwrap_or_else(|e| panic!("{kind:?}: {e}"));
    }
}

// ---------------------------------------------------------------------------------------------
// A panic inside one conversation (a bug in agent-db or a dependency, injected at each stage)
// is that conversation's failure.

/// The failpoint is compiled only with the `failpoints` feature (src/failpoint.rs): a binary
/// without it cannot inject the panic, and the test says so instead of proving nothing.
fn require_failpoints() {
    let dir = tempfile::tempdir().unwrap();
    let out = bare_cmd(dir.path()).arg("--version").output().unwrap();
    let version = String::from_utf8_lossy(&out.stdout);
    assert!(
        version.contains("features: failpoints"),
        "the agent-db binary under test was built without the `failpoints` feature ({}), so it \
         cannot inject a panic: run `cargo test` (agent-db's dev-dependency on itself turns the \
         feature on) or `cargo test --features failpoints`",
        version.trim()
    );
}

#[test]
fn a_panic_in_one_conversation_fails_only_that_conversation() {
    require_failpoints();
    let (_dir, db) = kodelet_store(16, 515);
    let args = [
        "compact",
        "--all-over",
        "0",
        "--idle",
        "0",
        "--keep-tokens",
        "300",
        "--json",
    ];
    let mut dry = args.to_vec();
    dry.push("--dry-run");
    let planned: Vec<String> = statuses(&json_of(&agent(&db, &dry, &[]), "dry run"))
        .into_iter()
        .filter(|(_, (s, _))| s == "planned")
        .map(|(id, _)| id)
        .collect();
    assert!(planned.len() >= 3, "{planned:?}");
    for stage in ["plan", "strategy", "write"] {
        let dir = tempfile::tempdir().unwrap();
        let copy = dir.path().join("storage.db");
        std::fs::copy(&db, &copy).unwrap();
        let victim = &planned[1];
        let before = cells(&copy);
        let mut c = bare_cmd(dir.path());
        c.arg("--db")
            .arg(&copy)
            .args(args)
            .env("AGENT_DB_FAILPOINT", format!("{stage}:{victim}"));
        let o = c.output().unwrap();
        let (code, stderr) = (o.status.code(), String::from_utf8_lossy(&o.stderr));
        assert_eq!(code, Some(1), "{stage}: partial, not a crash: {stderr}");
        let doc: Value = serde_json::from_slice(&o.stdout)
            .unwrap_or_else(|e| panic!("{stage}: the JSON document is complete ({e})"));
        let rows = statuses(&doc);
        let (status, detail) = &rows[victim];
        assert_eq!(status, "failed", "{stage}");
        assert!(
            detail.contains("internal error") && detail.contains("failpoint"),
            "{stage}: {detail}"
        );
        let compacted = rows.values().filter(|(s, _)| s == "compacted").count();
        assert!(compacted >= 2, "{stage}: the others go on: {rows:?}");
        assert_eq!(doc["totals"]["failed"], 1, "{stage}");
        assert_eq!(
            stderr
                .lines()
                .filter(|l| l.contains("bug: panicked"))
                .count(),
            1,
            "{stage}: one line names the panic: {stderr}"
        );
        // The victim's cells are untouched (its transaction, if any, rolled back).
        let c = Connection::open(&copy).unwrap();
        let n: i64 = c
            .query_row(
                "SELECT COUNT(*) FROM agent_db_compactions WHERE conversation_id = ?1",
                [victim],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(n, 0, "{stage}: no audit row for the victim");
        drop(c);
        let out = agent(&copy, &["restore", "--all-since", "1h", "--json"], &[]);
        assert_eq!(out.code, 0);
        assert!(
            first_difference(&before, &cells(&copy)).is_none(),
            "{stage}"
        );
    }
}

/// Inputs the property test found, kept as fixed cases.
#[test]
fn regressions_found_by_the_property_test() {
    let column = |kind: Kind, table: &str, name: &str| {
        columns(kind)
            .iter()
            .position(|(t, c)| *t == table && *c == name)
            .unwrap()
    };
    // A REAL +inf in docker-agent's input_tokens: the listing added it to output_tokens as an
    // integer and overflowed (a panic in a debug build, a wrong figure in a release build).
    let c = column(Kind::DockerAgent, "sessions", "input_tokens");
    one_case(Kind::DockerAgent, c, 0, Odd::Real(f64::INFINITY)).unwrap();
    one_case(Kind::DockerAgent, c, 0, Odd::Int(i64::MAX)).unwrap();
}

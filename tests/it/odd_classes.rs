//! goose and opencode stores holding every storage class SQLite can hold where the agent keeps
//! text or JSON: invalid UTF-8 text, a BLOB, an INTEGER, a REAL and NULL, planted with SQL in
//! each column agent-db reads or writes (the columns named in the SQL of `src/store/goose` and
//! `src/store/opencode`), one conversation per oddity beside untouched ones.
//!
//! Each store is compacted with `extractive` and with `prune`, then restored. The oracle: the
//! untouched conversations end as they do on the untouched store, each odd one compacts, is
//! skipped, or fails alone with a reason in the report, nothing panics, and restore gives every
//! cell back with its bytes and its storage class ([`crate::common::dump_all`], taken before).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use agent_db_synth::goose::{generate_goose, GooseSchema};
use agent_db_synth::opencode::{generate_opencode, OpencodeEra};
use agent_db_synth::SynthOptions;
use rusqlite::types::{ToSqlOutput, ValueRef};
use rusqlite::Connection;
use serde_json::Value;
use tempfile::TempDir;

use crate::common::{bare_cmd, dump_all};

#[derive(Debug, Clone, Copy, PartialEq)]
enum Kind {
    Goose,
    Opencode,
}

/// The five oddities.
#[derive(Debug, Clone, Copy)]
enum Odd {
    /// Text that is not UTF-8 (a cut two-byte character, a stray 0xFF).
    BadText,
    Blob,
    Int,
    Real,
    Null,
}

const ODDITIES: [Odd; 5] = [Odd::BadText, Odd::Blob, Odd::Int, Odd::Real, Odd::Null];

impl rusqlite::ToSql for Odd {
    fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
        Ok(ToSqlOutput::Borrowed(match self {
            Odd::BadText => ValueRef::Text(b"{\"text\":\"caf\xC3\"}\xFF"),
            Odd::Blob => ValueRef::Blob(b"{\"a\":1}\x00\xFF"),
            Odd::Int => ValueRef::Integer(1_761_998_400),
            Odd::Real => ValueRef::Real(-0.5),
            Odd::Null => ValueRef::Null,
        }))
    }
}

/// Every column agent-db reads or writes, by (table, column).
fn columns(kind: Kind) -> &'static [(&'static str, &'static str)] {
    match kind {
        // src/store/goose: the listing (read.rs `list_sql`), the provider check, the message
        // rows (`read_rows`), the session update and the inserted rows (write.rs).
        Kind::Goose => &[
            ("sessions", "name"),
            ("sessions", "description"),
            ("sessions", "working_dir"),
            ("sessions", "created_at"),
            ("sessions", "updated_at"),
            ("sessions", "total_tokens"),
            ("sessions", "input_tokens"),
            ("sessions", "output_tokens"),
            ("sessions", "model_config_json"),
            ("sessions", "provider_name"),
            ("sessions", "cache_read_tokens"),
            ("sessions", "cache_write_tokens"),
            ("messages", "role"),
            ("messages", "content_json"),
            ("messages", "metadata_json"),
            ("messages", "created_timestamp"),
            ("messages", "timestamp"),
            ("messages", "message_id"),
        ],
        // src/store/opencode: the listing (read.rs), the message and part rows, the session
        // totals and time, the pruned parts and the inserted rows (write.rs, mod.rs).
        Kind::Opencode => &[
            ("session", "title"),
            ("session", "directory"),
            ("session", "time_created"),
            ("session", "time_updated"),
            ("session", "tokens_input"),
            ("session", "tokens_output"),
            ("session", "model"),
            ("message", "data"),
            ("message", "time_created"),
            ("message", "time_updated"),
            ("part", "data"),
            ("part", "time_created"),
            ("part", "time_updated"),
        ],
    }
}

/// A generated store of `kind` with ten conversations.
fn store(kind: Kind) -> (TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let opts = |seed| SynthOptions {
        conversations: 10,
        seed,
        scale: 0.2,
        ..SynthOptions::default()
    };
    let db = match kind {
        Kind::Goose => {
            let db = dir.path().join("sessions.db");
            let schema = GooseSchema::preset("goose-v17").unwrap();
            generate_goose(&db, &opts(28), &schema).unwrap();
            db
        }
        Kind::Opencode => {
            let db = dir.path().join("opencode.db");
            generate_opencode(&db, &opts(28), OpencodeEra::preset("opencode").unwrap()).unwrap();
            db
        }
    };
    (dir, db)
}

fn strings(c: &Connection, sql: &str) -> Vec<String> {
    let mut s = c.prepare(sql).unwrap();
    let rows = s.query_map([], |r| r.get(0)).unwrap();
    rows.map(|r| r.unwrap()).collect()
}

/// The top-level conversations, in id order.
fn conversations(kind: Kind, c: &Connection) -> Vec<String> {
    let sql = match kind {
        Kind::Goose => {
            "SELECT id FROM sessions s WHERE EXISTS \
             (SELECT 1 FROM messages m WHERE m.session_id = s.id) ORDER BY id"
        }
        Kind::Opencode => {
            "SELECT id FROM session WHERE parent_id IS NULL \
             AND EXISTS (SELECT 1 FROM message m WHERE m.session_id = session.id) ORDER BY id"
        }
    };
    strings(c, sql)
}

/// The rowid of the row of `table` that belongs to conversation `id` and gets the oddity: the
/// session row itself, or the conversation's first message or part.
fn target(c: &Connection, table: &str, id: &str) -> i64 {
    let sql = match table {
        "sessions" | "session" => format!("SELECT rowid FROM {table} WHERE id = ?1"),
        _ => format!("SELECT rowid FROM {table} WHERE session_id = ?1 ORDER BY rowid LIMIT 1"),
    };
    c.query_row(&sql, [id], |r| r.get(0)).unwrap()
}

/// Set the cell; `false` when the schema refuses the value (NULL in a NOT NULL column).
fn plant(c: &Connection, table: &str, column: &str, rowid: i64, odd: Odd) -> bool {
    let sql = format!("UPDATE \"{table}\" SET \"{column}\" = ?1 WHERE rowid = ?2");
    match c.execute(&sql, rusqlite::params![odd, rowid]) {
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

/// The store's own tables, every cell with its storage class (agent-db's tables and its
/// `sqlite_sequence` rows left out: restore keeps the audit trail).
fn agent_cells(db: &Path) -> BTreeMap<String, Vec<Vec<String>>> {
    let mut all = dump_all(&Connection::open(db).unwrap());
    all.retain(|t, _| !t.starts_with("agent_db_"));
    if let Some(seq) = all.get_mut("sqlite_sequence") {
        seq.retain(|r| !r[1].starts_with("Text(\"agent_db_"));
        if seq.is_empty() {
            all.remove("sqlite_sequence");
        }
    }
    all
}

/// Run agent-db: never a panic, never a usage error (2), an internal error (8) or a crash.
fn agent(db: &Path, args: &[&str]) -> (i32, Value, String) {
    let mut c = bare_cmd(db.parent().unwrap());
    c.arg("--db").arg(db).args(args);
    let o = c.output().unwrap();
    let code = o.status.code().unwrap_or(-1);
    let stderr = String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(
        !stderr.contains("panicked") && ![2, 8, 101, -1].contains(&code),
        "{args:?}: exit {code}\n{stderr}"
    );
    let doc = serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|e| panic!("{args:?}: one JSON document ({e}):\n{stderr}"));
    (code, doc, stderr)
}

/// (status, detail) by conversation of a compact report.
fn statuses(doc: &Value) -> BTreeMap<String, (String, String)> {
    crate::common::all_rows(doc)
        .iter()
        .map(|r| {
            let s = |k: &str| r[k].as_str().unwrap_or("").to_string();
            (s("id"), (s("status"), s("detail")))
        })
        .collect()
}

const STRATEGIES: [&str; 2] = ["extractive", "prune"];

fn compact(db: &Path, strategy: &str) -> (i32, BTreeMap<String, (String, String)>) {
    let (code, doc, stderr) = agent(
        db,
        &[
            "compact",
            "--all-over",
            "0",
            "--idle",
            "0",
            "--keep-tokens",
            "300",
            "--force",
            "--verbose",
            "--strategy",
            strategy,
            "--json",
        ],
    );
    assert!(code == 0 || code == 1, "{strategy}: exit {code}\n{stderr}");
    let rows = statuses(&doc);
    assert_eq!(
        doc["totals"]["failed"].as_u64().unwrap() as usize,
        rows.values().filter(|(s, _)| s == "failed").count(),
        "{strategy}: the totals count the failed rows"
    );
    (code, rows)
}

/// Each column in turn: five conversations get one oddity each in that column, the others
/// none; each strategy compacts the store and restore gives it back cell for cell.
fn odd_columns_restore(kind: Kind) {
    let (_base_dir, base) = store(kind);
    let ids = conversations(kind, &Connection::open(&base).unwrap());
    assert!(ids.len() >= 8, "{kind:?}: {ids:?}");
    // What each strategy does on the untouched store.
    let baseline: Vec<BTreeMap<String, (String, String)>> = STRATEGIES
        .iter()
        .map(|s| {
            let dir = tempfile::tempdir().unwrap();
            let db = dir.path().join(base.file_name().unwrap());
            std::fs::copy(&base, &db).unwrap();
            compact(&db, s).1
        })
        .collect();
    assert!(
        baseline[0]
            .values()
            .filter(|(s, _)| s == "compacted")
            .count()
            >= 5,
        "{kind:?}: the fixture compacts most conversations: {:?}",
        baseline[0]
    );
    let mut odd_compacted = 0;
    for &(table, column) in columns(kind) {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join(base.file_name().unwrap());
        std::fs::copy(&base, &db).unwrap();
        let c = Connection::open(&db).unwrap();
        let mut odd: BTreeMap<&str, Odd> = BTreeMap::new();
        for (id, &o) in ids.iter().zip(ODDITIES.iter()) {
            if plant(&c, table, column, target(&c, table, id), o) {
                odd.insert(id, o);
            }
        }
        drop(c);
        let before = agent_cells(&db);
        for (strategy, expected) in STRATEGIES.iter().zip(&baseline) {
            let what = format!("{kind:?} {table}.{column} {strategy}");
            let (_, rows) = compact(&db, strategy);
            for id in &ids {
                match odd.get(id.as_str()) {
                    Some(o) => {
                        let (status, detail) = rows
                            .get(id)
                            .unwrap_or_else(|| panic!("{what}: {o:?} {id} is in the report"));
                        assert!(
                            status == "compacted" || !detail.is_empty(),
                            "{what}: {o:?} {id} is {status} without a reason"
                        );
                        // A reason names what is wrong with the conversation, not a bare
                        // driver error (goose's provider_name and updated_at were read
                        // strictly: `sqlite: Conversion error from type Text`).
                        assert!(
                            !detail.contains("Conversion error"),
                            "{what}: {o:?} {id}: {detail}"
                        );
                        odd_compacted += usize::from(status == "compacted");
                    }
                    None => assert_eq!(
                        rows.get(id).map(|r| &r.0),
                        expected.get(id).map(|r| &r.0),
                        "{what}: untouched {id} ends as on the untouched store: {:?}",
                        rows.get(id)
                    ),
                }
            }
            let (code, _, stderr) = agent(&db, &["restore", "--all-since", "1h", "--json"]);
            assert_eq!(code, 0, "{what}: restore\n{stderr}");
            let after = agent_cells(&db);
            for (t, rows) in &before {
                assert_eq!(
                    rows.len(),
                    after[t].len(),
                    "{what}: restore gives back the rows of {t}"
                );
                for (r, a) in rows.iter().zip(&after[t]) {
                    for (i, (x, y)) in r.iter().zip(a).enumerate() {
                        assert_eq!(
                            x, y,
                            "{what}: restore gives back every cell of {t} (rowid {}, column {i})",
                            r[0]
                        );
                    }
                }
            }
            assert_eq!(
                before.keys().collect::<Vec<_>>(),
                after.keys().collect::<Vec<_>>(),
                "{what}: the same tables"
            );
        }
    }
    // Most odd cells do not stop a compaction: the odd rows went through the write path, so
    // the restore above had work to undo.
    assert!(
        odd_compacted >= columns(kind).len() * 4,
        "{kind:?}: only {odd_compacted} odd conversations compacted"
    );
}

#[test]
fn goose_odd_storage_classes_compact_alone_and_restore_cell_for_cell() {
    odd_columns_restore(Kind::Goose);
}

#[test]
fn opencode_odd_storage_classes_compact_alone_and_restore_cell_for_cell() {
    odd_columns_restore(Kind::Opencode);
}

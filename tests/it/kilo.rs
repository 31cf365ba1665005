//! Kilo's `kilo.db` as a store of its own, hermetic: files built from the schema and migration
//! journal the released Kilo 7.7.9 writes (`fixtures/kilo/kilo-7.7.9.sql`, dumped from a file
//! the real binary wrote), filled with sessions in opencode's format (the synthetic opencode
//! store's rows copied column by column). The real binary's own reading of what agent-db
//! writes is `real_kilo.rs`.

use std::path::{Path, PathBuf};

use agent_db_synth::opencode::{generate_opencode, OpencodeEra};
use agent_db_synth::SynthOptions;
use rusqlite::Connection;

use crate::common::{bare_cmd, dump_all, files_hash, json};

const NEWEST: &str = "20260907102000_kilocode_model_usage_index";

/// The binary with HOME, XDG data and the current directory in `home`, and no agent variable of
/// the caller's.
fn cmd(home: &Path) -> assert_cmd::Command {
    let mut c = bare_cmd(home);
    c.env("XDG_DATA_HOME", home.join(".local/share"))
        .env_remove("OPENCODE_DB")
        .env_remove("KILO_DB")
        .env_remove("GOOSE_PATH_ROOT")
        .current_dir(home);
    c
}

/// An empty Kilo 7.7.9 store at `path`, from Kilo's own DDL.
pub(crate) fn kilo_store(path: &Path) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let ddl = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/kilo/kilo-7.7.9.sql"),
    )
    .unwrap();
    Connection::open(path).unwrap().execute_batch(&ddl).unwrap();
}

/// A Kilo store at `path` holding `n` synthetic opencode sessions (project, session, message,
/// part rows, the columns both schemas have).
pub(crate) fn kilo_with_sessions(path: &Path, n: usize) {
    kilo_store(path);
    let src = path.with_file_name("source-opencode.db");
    let opts = SynthOptions {
        conversations: n,
        seed: 11,
        scale: 0.5,
        ..SynthOptions::default()
    };
    generate_opencode(&src, &opts, OpencodeEra::Effect).unwrap();
    let c = Connection::open(path).unwrap();
    c.execute("ATTACH ?1 AS src", [src.to_str().unwrap()])
        .unwrap();
    for table in [
        "project",
        "session",
        "message",
        "part",
        "event_sequence",
        "event",
    ] {
        let cols = |db: &str| -> Vec<String> {
            let mut s = c
                .prepare(&format!(
                    "SELECT name FROM {db}.pragma_table_info('{table}')"
                ))
                .unwrap();
            let v = s
                .query_map([], |r| r.get(0))
                .unwrap()
                .map(|r| r.unwrap())
                .collect();
            v
        };
        let theirs = cols("src");
        let common: Vec<String> = cols("main")
            .into_iter()
            .filter(|c| theirs.contains(c))
            .map(|c| format!("\"{c}\""))
            .collect();
        let list = common.join(", ");
        c.execute(
            &format!("INSERT INTO main.{table} ({list}) SELECT {list} FROM src.{table}"),
            [],
        )
        .unwrap();
    }
    c.execute("DETACH src", []).unwrap();
}

fn default_file(home: &Path) -> PathBuf {
    home.join(".local/share/kilo/kilo.db")
}

/// `stores` finds Kilo's default file and names it as Kilo, with the release its migrations
/// are, read-write; `--agent kilo` opens it, and `KILO_DB` (relative: under Kilo's data dir)
/// overrides it.
#[test]
fn stores_lists_kilos_default_file_and_agent_kilo_opens_it() {
    let dir = tempfile::tempdir().unwrap();
    let db = default_file(dir.path());
    kilo_with_sessions(&db, 3);
    let mut c = cmd(dir.path());
    c.args(["stores", "--json"]);
    let (doc, code) = json(c);
    assert_eq!(code, 0, "{doc:#}");
    let s = &doc["stores"][0];
    assert_eq!(s["agent"], "kilo", "{doc:#}");
    assert_eq!(s["path"], db.to_str().unwrap());
    assert_eq!(s["how"], "kilo default");
    assert_eq!(s["version_name"], "Kilo 7.7.9");
    assert_eq!(s["schema_version"], NEWEST);
    assert_eq!(s["newest_known"], NEWEST);
    assert_eq!(s["support"], "read-write");

    let mut c = cmd(dir.path());
    c.args(["--agent", "kilo", "list", "--json"]);
    let (doc, code) = json(c);
    assert_eq!(code, 0, "{doc:#}");
    assert_eq!(doc["store"]["kind"], "kilo", "{doc:#}");
    assert_eq!(doc["conversations"].as_array().map(Vec::len), Some(3));
    // With only Kilo's file, agent-db finds it without being told.
    let mut c = cmd(dir.path());
    c.args(["list", "--json"]);
    let (doc, code) = json(c);
    assert_eq!(
        (code, &doc["store"]["kind"]),
        (0, &"kilo".into()),
        "{doc:#}"
    );

    let other = dir.path().join(".local/share/kilo/elsewhere.db");
    kilo_store(&other);
    let mut c = cmd(dir.path());
    c.env("KILO_DB", "elsewhere.db")
        .args(["--agent", "kilo", "list", "--json"]);
    let (doc, code) = json(c);
    assert_eq!(code, 0, "{doc:#}");
    assert_eq!(doc["conversations"].as_array().map(Vec::len), Some(0));
}

/// A Kilo file with a migration newer than agent-db knows is refused as Kilo's, naming both
/// migrations, and never as "a newer opencode"; one in the known range that is not Kilo's is
/// refused too. Nothing is written.
#[test]
fn a_newer_kilo_is_refused_naming_both_versions_never_as_opencode() {
    for (id, says) in [
        (
            "20261001000000_kilocode_next",
            format!(
                "Kilo migration 20261001000000_kilocode_next is newer than any agent-db knows \
                 (the newest it knows is {NEWEST}); a newer Kilo wrote this file"
            ),
        ),
        (
            "20260801000000_not_kilos",
            "Kilo migration \"20260801000000_not_kilos\" is not one agent-db knows".to_string(),
        ),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("kilo.db");
        kilo_with_sessions(&db, 2);
        Connection::open(&db)
            .unwrap()
            .execute(
                "INSERT INTO migration (id, time_completed) VALUES (?1, 1796184112309)",
                [id],
            )
            .unwrap();
        let before = files_hash(&db);
        for args in [
            &["list"][..],
            &[
                "compact",
                "--all-over",
                "0",
                "--yes",
                "--strategy",
                "extractive",
            ],
        ] {
            let out = cmd(dir.path())
                .arg("--db")
                .arg(&db)
                .args(args)
                .output()
                .unwrap();
            let err = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(4), "{args:?}: {err}");
            assert!(err.contains(&says), "{args:?}: {err}");
            assert!(!err.contains("opencode"), "{args:?}: {err}");
        }
        assert_eq!(files_hash(&db), before, "the file changed");
    }
}

/// A compaction of a Kilo session: agent-db's next load starts at its summary, and `restore`
/// gives every cell back.
#[test]
fn a_kilo_session_compacts_and_restores_cell_identical() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("kilo.db");
    kilo_with_sessions(&db, 3);
    let before = dump_all(&Connection::open(&db).unwrap());
    let mut c = cmd(dir.path());
    c.arg("--db").arg(&db).args(["list", "--json"]);
    let (doc, _) = json(c);
    let id = doc["conversations"][0]["id"].as_str().unwrap().to_string();
    let mut c = cmd(dir.path());
    c.arg("--db").arg(&db).args([
        "compact",
        &id,
        "--yes",
        "--json",
        "--strategy",
        "extractive",
        "--keep-tokens",
        "300",
    ]);
    let (doc, code) = json(c);
    assert_eq!(
        (code, &doc["conversations"][0]["status"]),
        (0, &"compacted".into()),
        "{doc:#}"
    );
    let mut c = cmd(dir.path());
    c.arg("--db").arg(&db).args(["show", &id, "--json"]);
    let (shown, _) = json(c);
    assert_eq!(shown["messages"][1]["summary_by"], "agent-db", "{shown:#}");
    let out = cmd(dir.path())
        .arg("--db")
        .arg(&db)
        .args(["restore", &id])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let after = dump_all(&Connection::open(&db).unwrap());
    for (table, rows) in &before {
        assert_eq!(after.get(table), Some(rows), "table {table} after restore");
    }
}

/// `reclaim` removes opencode's event log only where opencode's own source shows it is never read
/// again; Kilo's source has not been read for it, so a Kilo file's events are left alone.
#[test]
fn reclaim_leaves_kilos_event_log_alone() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("kilo.db");
    kilo_with_sessions(&db, 3);
    let events: i64 = Connection::open(&db)
        .unwrap()
        .query_row("SELECT COUNT(*) FROM event", [], |r| r.get(0))
        .unwrap();
    assert!(events > 0, "the fixture carries opencode's events");
    let before = crate::common::files_hash(&db);
    let mut c = cmd(dir.path());
    c.arg("--db")
        .arg(&db)
        .args(["reclaim", "--idle", "0", "--yes", "--json"]);
    let (doc, code) = json(c);
    assert_eq!(code, 0, "{doc:#}");
    assert_eq!(doc["removed"], serde_json::json!([]), "{doc:#}");
    assert_eq!(crate::common::files_hash(&db), before);
}

/// A Kilo file from before its `kilo_board` migration (no board tables; Kilo's first own
/// migrations recorded) is Kilo's, not "a newer opencode"; one from before any of Kilo's
/// migrations is Kilo's by its file name (`kilo.db`). Its sessions show PROVIDER `kilo`, as an
/// opencode file's show `opencode`.
#[test]
fn a_kilo_file_from_before_kilo_board_is_detected_as_kilo() {
    for (name, keep_through) in [
        ("older.db", "20260731102142_recall-part-index"),
        ("kilo.db", "20260622202450_simplify_session_input"),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join(name);
        kilo_with_sessions(&db, 2);
        let c = Connection::open(&db).unwrap();
        c.execute_batch("DROP TABLE kilo_board_message; DROP TABLE kilo_board;")
            .unwrap();
        c.execute("DELETE FROM migration WHERE id > ?1", [keep_through])
            .unwrap();
        drop(c);
        let mut c = cmd(dir.path());
        c.arg("--db").arg(&db).args(["list", "--json"]);
        let (doc, code) = json(c);
        assert_eq!(code, 0, "{name}: {doc:#}");
        assert_eq!(doc["store"]["kind"], "kilo", "{name}: {doc:#}");
        let rows = doc["conversations"].as_array().unwrap();
        assert_eq!(rows.len(), 2);
        assert!(rows.iter().all(|r| r["provider"] == "kilo"), "{doc:#}");
        let mut c = cmd(dir.path());
        c.arg("--db")
            .arg(&db)
            .args(["--agent", "kilo", "list", "--provider", "kilo", "--json"]);
        let (doc, code) = json(c);
        assert_eq!(code, 0, "{name}: {doc:#}");
        assert_eq!(doc["conversations"].as_array().map(Vec::len), Some(2));
    }
    // An opencode file is still opencode's, its PROVIDER `opencode`.
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("opencode.db");
    let opts = SynthOptions {
        conversations: 2,
        seed: 11,
        scale: 0.5,
        ..SynthOptions::default()
    };
    generate_opencode(&db, &opts, OpencodeEra::Effect).unwrap();
    let mut c = cmd(dir.path());
    c.arg("--db").arg(&db).args(["list", "--json"]);
    let (doc, code) = json(c);
    assert_eq!((code, &doc["store"]["kind"]), (0, &"opencode".into()));
    assert!(doc["conversations"]
        .as_array()
        .unwrap()
        .iter()
        .all(|r| r["provider"] == "opencode"));
}

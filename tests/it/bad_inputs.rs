//! Bad stores and bad rows: each gives a clear message naming the path or the conversation, the
//! documented exit code (4 store unusable, 5 conversation not found or unreadable, 1 some
//! conversations failed, 2 usage), never a panic, and no change to the store's files.

use std::path::Path;

use rusqlite::Connection;
use serde_json::Value;

use crate::common::{bare_cmd, files_hash, json, Env};

const STORE: i32 = 4;
const DATA: i32 = 5;
const PARTIAL: i32 = 1;
const USAGE: i32 = 2;

struct Out {
    code: i32,
    stdout: String,
    stderr: String,
}

fn run(c: &mut assert_cmd::Command) -> Out {
    let o = c.output().expect("run agent-db");
    let out = Out {
        code: o.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
    };
    assert!(
        !out.stderr.contains("panicked"),
        "agent-db panicked:\n{}",
        out.stderr
    );
    out
}

/// `agent-db --db PATH ARGS` in `home`.
fn at(home: &Path, db: &Path, args: &[&str]) -> assert_cmd::Command {
    let mut c = bare_cmd(home);
    c.arg("--db").arg(db).args(args);
    c
}

/// The names in a directory, sorted.
fn listing(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

/// Every command that opens the store, read-only and writing.
const OPENERS: &[&[&str]] = &[
    &["list"],
    &["list", "--json"],
    &["show", "3f2a0000-0000-4000-8000-000000000000"],
    &["show", "3f2a0000-0000-4000-8000-000000000000", "--raw"],
    &["compact", "--dry-run", "--all-over", "0"],
    &["compact", "--dry-run", "--all-over", "0", "--json"],
    &["compact", "--all-over", "0", "--idle", "0", "--yes"],
    &["history"],
];

/// Run every opener on `db`: each must fail with `code`, name the path and say `what`, and
/// leave the directory and the file's bytes as they were.
fn refuses(home: &Path, db: &Path, code: i32, what: &str) {
    for args in OPENERS {
        let files = listing(home);
        let before = files_hash(db);
        let out = run(&mut at(home, db, args));
        assert_eq!(
            out.code,
            code,
            "{args:?} on {}: {}",
            db.display(),
            out.stderr
        );
        assert!(
            out.stderr.contains(&db.display().to_string()),
            "{args:?}: stderr names the path: {}",
            out.stderr
        );
        assert!(
            out.stderr.contains(what),
            "{args:?}: stderr says {what:?}: {}",
            out.stderr
        );
        assert!(
            out.stdout.is_empty(),
            "{args:?}: nothing on stdout: {}",
            out.stdout
        );
        assert_eq!(files_hash(db), before, "{args:?} changed {}", db.display());
        assert_eq!(listing(home), files, "{args:?} created or removed files");
    }
}

#[test]
fn missing_path() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("no-such-store.db");
    refuses(dir.path(), &db, STORE, "no such file");
    assert!(!db.exists());
}

#[test]
fn not_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    // Deterministic noise (xorshift), 16 KiB.
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    let bytes: Vec<u8> = (0..16384)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        })
        .collect();
    let db = dir.path().join("noise.db");
    std::fs::write(&db, &bytes).unwrap();
    refuses(dir.path(), &db, STORE, "not an SQLite database");
    assert_eq!(std::fs::read(&db).unwrap(), bytes);
}

#[test]
fn empty_file() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("empty.db");
    std::fs::write(&db, b"").unwrap();
    refuses(dir.path(), &db, STORE, "not a known conversation store");
    assert_eq!(std::fs::metadata(&db).unwrap().len(), 0, "stays 0 bytes");
}

#[test]
fn sqlite_without_kodelet_schema() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("notes.db");
    let c = Connection::open(&db).unwrap();
    c.execute_batch(
        "CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT NOT NULL);
         INSERT INTO notes (body) VALUES ('keep me');",
    )
    .unwrap();
    drop(c);
    refuses(dir.path(), &db, STORE, "not a known conversation store");
    let out = run(&mut at(dir.path(), &db, &["list"]));
    assert!(
        out.stderr.contains("notes"),
        "names what it found: {}",
        out.stderr
    );
}

/// kodelet's tables, written by hand, with `conversations` given by `conversations_ddl`.
fn hand_made_store(db: &Path, conversations_ddl: &str) {
    let c = Connection::open(db).unwrap();
    c.execute_batch(conversations_ddl).unwrap();
    c.execute_batch(
        "CREATE TABLE conversation_summaries (
           id TEXT PRIMARY KEY, message_count INTEGER NOT NULL, first_message TEXT NOT NULL,
           summary TEXT, usage TEXT NOT NULL, created_at DATETIME NOT NULL,
           updated_at DATETIME NOT NULL, provider TEXT, metadata TEXT, cwd TEXT);
         CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, applied_at DATETIME NOT NULL,
           description TEXT);
         INSERT INTO schema_migrations VALUES (20260204163000, '2026-10-01 10:00:00 +0000 UTC',
           'create conversations and summaries');",
    )
    .unwrap();
}

#[test]
fn kodelet_store_with_a_missing_column() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("storage.db");
    // No tool_results column.
    hand_made_store(
        &db,
        "CREATE TABLE conversations (
           id TEXT PRIMARY KEY, raw_messages TEXT NOT NULL, provider TEXT NOT NULL,
           file_last_access TEXT, usage TEXT NOT NULL, summary TEXT,
           created_at DATETIME NOT NULL, updated_at DATETIME NOT NULL, metadata TEXT,
           background_processes TEXT, cwd TEXT);
         INSERT INTO conversations (id, raw_messages, provider, usage, created_at, updated_at)
           VALUES ('c1', '[]', 'anthropic', '{}', '2026-10-01 10:00:00 +0000 UTC',
                   '2026-10-01 10:00:00 +0000 UTC');",
    );
    refuses(dir.path(), &db, STORE, "schema changed");
    let out = run(&mut at(dir.path(), &db, &["list"]));
    assert!(
        out.stderr.contains("conversations.tool_results"),
        "names the column: {}",
        out.stderr
    );

    // A column agent-db reads, declared with another type, is a changed schema too.
    let db2 = dir.path().join("storage2.db");
    hand_made_store(
        &db2,
        "CREATE TABLE conversations (
           id TEXT PRIMARY KEY, raw_messages BLOB NOT NULL, provider TEXT NOT NULL,
           file_last_access TEXT, usage TEXT NOT NULL, summary TEXT,
           created_at DATETIME NOT NULL, updated_at DATETIME NOT NULL, metadata TEXT,
           tool_results TEXT, background_processes TEXT, cwd TEXT);",
    );
    refuses(dir.path(), &db2, STORE, "schema changed");
    let out = run(&mut at(dir.path(), &db2, &["list"]));
    assert!(
        out.stderr.contains("conversations.raw_messages"),
        "{}",
        out.stderr
    );
}

// ---------------------------------------------------------------------------------------------
// Bad rows in an otherwise good store.

/// A generated store of 12 conversations (all formats) and one victim that has a context
/// window and several messages, so that `--all-over 0` selects and plans it.
fn store_with_victim(seed: u64) -> (Env, String) {
    let env = Env::generated(12, seed, &[]);
    let victim = env.ids(
        "SELECT c.id FROM conversations c JOIN conversation_summaries s ON s.id = c.id
         WHERE json_extract(c.usage, '$.maxContextWindow') > 0 AND s.message_count >= 4
           AND c.provider = 'openai'
         ORDER BY c.id LIMIT 1",
    );
    assert_eq!(victim.len(), 1, "the fixture has a victim");
    (env, victim[0].clone())
}

/// Set `column` of the victim in both of kodelet's tables (kodelet keeps them in sync).
fn set(env: &Env, id: &str, column: &str, value: &str, both: bool) {
    let c = env.conn();
    let tables: &[&str] = if both {
        &["conversations", "conversation_summaries"]
    } else {
        &["conversations"]
    };
    for t in tables {
        let n = c
            .execute(
                &format!("UPDATE {t} SET {column} = ?1 WHERE id = ?2"),
                [value, id],
            )
            .unwrap();
        assert_eq!(n, 1);
    }
}

/// The rows of a document: `list` keeps the skipped and the unreadable apart, after the
/// selected ones.
fn all_rows(doc: &Value) -> Vec<&Value> {
    let mut rows: Vec<&Value> = doc["conversations"].as_array().unwrap().iter().collect();
    for more in ["skipped", "failed"] {
        rows.extend(doc[more].as_array().into_iter().flatten());
    }
    rows
}

fn row_of<'a>(doc: &'a Value, id: &str) -> &'a Value {
    all_rows(doc)
        .into_iter()
        .find(|r| r["id"] == id)
        .unwrap_or_else(|| panic!("no row for {id} in {doc}"))
}

fn statuses(doc: &Value) -> Vec<(String, String)> {
    all_rows(doc)
        .into_iter()
        .map(|r| {
            (
                r["id"].as_str().unwrap().to_string(),
                r["status"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

fn sorted(mut v: Vec<String>) -> Vec<String> {
    v.sort();
    v
}

#[test]
fn malformed_raw_messages() {
    let (env, victim) = store_with_victim(41);
    let all = sorted(env.ids("SELECT id FROM conversations"));
    for bad in [r#"[{"role":"#, "not json"] {
        set(&env, &victim, "raw_messages", bad, false);
        let before = env.files_hash();

        // list reads no message bodies: everyone is listed.
        let mut c = env.cmd();
        c.args(["list", "--json"]);
        let (doc, code) = json(c);
        assert_eq!(code, 0, "{bad}: list --json");
        let ids = sorted(statuses(&doc).into_iter().map(|(id, _)| id).collect());
        assert_eq!(ids, all, "{bad}: list --json lists everyone");
        let out = run(env.cmd().arg("list"));
        assert_eq!(out.code, 0, "{bad}: list: {}", out.stderr);
        for id in &all {
            assert!(out.stdout.contains(id.as_str()), "{bad}: list shows {id}");
        }

        // A dry run fails that one, by name, and still plans the others.
        let mut c = env.cmd();
        c.args([
            "compact",
            "--dry-run",
            "--all-over",
            "0",
            "--idle",
            "0",
            "--keep-tokens",
            "500",
            "--json",
        ]);
        let (doc, code) = json(c);
        assert_eq!(code, PARTIAL, "{bad}: compact --dry-run exit code");
        let r = row_of(&doc, &victim);
        assert_eq!(r["status"], "failed", "{bad}: {r}");
        let detail = r["detail"].as_str().unwrap();
        assert!(detail.contains(&victim), "{bad}: detail names it: {detail}");
        assert!(
            detail.contains("raw_messages"),
            "{bad}: detail says why: {detail}"
        );
        let others = statuses(&doc);
        assert_eq!(others.len(), all.len());
        for (id, status) in &others {
            if id != &victim {
                assert!(
                    status == "planned" || status == "skipped",
                    "{bad}: {id} {status}"
                );
            }
        }
        assert!(
            others.iter().any(|(_, s)| s == "planned"),
            "{bad}: others planned"
        );
        assert_eq!(doc["totals"]["failed"], 1);

        let out = run(env
            .cmd()
            .args(["compact", "--dry-run", "--all-over", "0", "--idle", "0"]));
        assert_eq!(out.code, PARTIAL, "{bad}: compact --dry-run (table)");
        let line = out
            .stdout
            .lines()
            .find(|l| l.contains(victim.as_str()))
            .expect("the victim's row");
        assert!(line.contains("failed"), "{bad}: {line}");
        assert!(
            out.stdout.contains("failed 1"),
            "{bad}: totals: {}",
            out.stdout
        );

        // show: exit 5 naming it; --raw still shows the stored bytes exactly.
        for args in [vec!["show", &victim], vec!["show", &victim, "--json"]] {
            let out = run(env.cmd().args(&args));
            assert_eq!(out.code, DATA, "{bad}: {args:?}: {}", out.stderr);
            assert!(
                out.stderr.contains(&victim),
                "{bad}: {args:?}: {}",
                out.stderr
            );
            assert!(out.stdout.is_empty(), "{bad}: {args:?}");
        }
        let out = run(env.cmd().args(["show", &victim, "--raw"]));
        assert_eq!(out.code, 0);
        assert_eq!(out.stdout, format!("{bad}\n"));

        assert_eq!(env.files_hash(), before, "{bad}: the store changed");

        // A real compaction of it fails the same way and writes nothing.
        let before_rows = env.dump("conversations");
        let out = run(env.cmd().args(["compact", "--id", &victim, "--yes"]));
        assert_eq!(
            out.code, PARTIAL,
            "{bad}: compact --id: {}\n{}",
            out.stdout, out.stderr
        );
        assert!(out.stdout.contains("failed") && out.stdout.contains(&victim));
        assert_eq!(env.files_hash(), before, "{bad}: a failed compaction wrote");
        assert_eq!(env.dump("conversations"), before_rows);
    }
}

#[test]
fn unparseable_updated_at() {
    let (env, victim) = store_with_victim(42);
    set(&env, &victim, "updated_at", "yesterday", true);
    let all = sorted(env.ids("SELECT id FROM conversations"));
    let before = env.files_hash();

    // list: an error naming it on stderr, everyone else listed, exit 1.
    let out = run(env.cmd().arg("list"));
    assert_eq!(out.code, PARTIAL, "list: {}", out.stderr);
    let err_lines: Vec<&str> = out.stderr.lines().filter(|l| l.contains("error")).collect();
    assert_eq!(err_lines.len(), 1, "one error: {}", out.stderr);
    assert!(err_lines[0].contains(&victim), "names it: {}", err_lines[0]);
    assert!(
        err_lines[0].contains("yesterday"),
        "quotes the value: {}",
        err_lines[0]
    );
    for id in all.iter().filter(|id| **id != victim) {
        assert!(out.stdout.contains(id.as_str()), "list shows {id}");
    }

    // Time selectors report it as an error row and go on.
    let mut c = env.cmd();
    c.args(["list", "--json", "--older-than", "1d"]);
    let (doc, code) = json(c);
    assert_eq!(code, PARTIAL, "list --older-than 1d --json");
    let r = row_of(&doc, &victim);
    assert_eq!(r["status"], "error", "{r}");
    assert!(r["detail"].as_str().unwrap().contains("updated_at"), "{r}");
    assert!(
        statuses(&doc)
            .iter()
            .filter(|(_, s)| s == "selected")
            .count()
            >= 5,
        "the others are still evaluated: {doc}"
    );

    let mut c = env.cmd();
    c.args([
        "compact",
        "--dry-run",
        "--older-than",
        "1d",
        "--keep-tokens",
        "500",
        "--json",
    ]);
    let (doc, code) = json(c);
    assert_eq!(code, PARTIAL, "compact --dry-run --older-than 1d");
    let r = row_of(&doc, &victim);
    assert_eq!(r["status"], "failed", "{r}");
    let detail = r["detail"].as_str().unwrap();
    assert!(
        detail.contains(&victim) && detail.contains("updated_at"),
        "{detail}"
    );
    assert!(
        statuses(&doc).iter().any(|(_, s)| s == "planned"),
        "others planned"
    );
    assert_eq!(doc["totals"]["failed"], 1);

    // --follow picks the newest of the others and reports this one.
    let newest = {
        let mut c = env.cmd();
        c.args(["compact", "--dry-run", "--follow", "--json"]);
        let (doc, code) = json(c);
        assert_eq!(code, PARTIAL, "--follow: {doc}");
        let st = statuses(&doc);
        assert_eq!(st.len(), 2, "{doc}");
        assert_eq!(row_of(&doc, &victim)["status"], "failed");
        st.into_iter().find(|(id, _)| *id != victim).unwrap()
    };
    assert_ne!(newest.1, "failed");

    assert_eq!(env.files_hash(), before, "the store changed");
}

fn unsupported_provider(provider: &str, seed: u64, why: &str) {
    let (env, victim) = store_with_victim(seed);
    unsupported_provider_in(&env, &victim, provider, why);
}

fn unsupported_provider_in(env: &Env, victim: &str, provider: &str, why: &str) {
    let (env, victim) = (env, victim.to_string());
    set(env, &victim, "provider", provider, true);
    let all = sorted(env.ids("SELECT id FROM conversations"));
    let before = env.files_hash();

    // list shows it.
    let mut c = env.cmd();
    c.args(["list", "--json"]);
    let (doc, code) = json(c);
    assert_eq!(code, 0, "{provider}: list");
    let ids = sorted(statuses(&doc).into_iter().map(|(id, _)| id).collect());
    assert_eq!(ids, all);
    let r = row_of(&doc, &victim);
    assert_eq!(r["provider"], provider);
    assert!(r["format"].is_null(), "{r}");
    let out = run(env.cmd().arg("list"));
    assert_eq!(out.code, 0);
    assert!(out.stdout.contains(&victim));

    // compact --id: failed with the reason, exit 1.
    let mut c = env.cmd();
    c.args(["compact", "--dry-run", "--id", &victim, "--json"]);
    let (doc, code) = json(c);
    assert_eq!(code, PARTIAL, "{provider}: compact --id");
    let st = statuses(&doc);
    assert_eq!(st, vec![(victim.clone(), "failed".to_string())]);
    let detail = row_of(&doc, &victim)["detail"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(detail.contains(why), "{provider}: {detail}");
    assert!(detail.contains(&victim), "{provider}: names it: {detail}");

    // A batch run fails only that one.
    let mut c = env.cmd();
    c.args([
        "compact",
        "--dry-run",
        "--all-over",
        "0",
        "--idle",
        "0",
        "--json",
    ]);
    let (doc, code) = json(c);
    assert_eq!(code, PARTIAL);
    for (id, status) in statuses(&doc) {
        if id == victim {
            assert_eq!(status, "failed");
        } else {
            assert!(status == "planned" || status == "skipped", "{id} {status}");
        }
    }

    // show cannot decode it: exit 5, naming it and why.
    let out = run(env.cmd().args(["show", &victim]));
    assert_eq!(out.code, DATA, "{provider}: show: {}", out.stderr);
    assert!(
        out.stderr.contains(&victim) && out.stderr.contains(why),
        "{}",
        out.stderr
    );

    assert_eq!(env.files_hash(), before, "{provider}: the store changed");
}

/// An unknown provider whose messages could be Anthropic or OpenAI chat alike (text-only parts)
/// cannot be told apart: it fails, named, and the rest of the batch goes on.
#[test]
fn unknown_provider_with_an_ambiguous_shape() {
    let (env, victim) = store_with_victim(43);
    let ambiguous = r#"[{"role":"user","content":[{"type":"text","text":"hello"}]},{"role":"assistant","content":[{"type":"text","text":"hi"}]},{"role":"user","content":[{"type":"text","text":"go on"}]},{"role":"assistant","content":[{"type":"text","text":"done"}]}]"#;
    set(&env, &victim, "raw_messages", ambiguous, false);
    unsupported_provider_in(&env, &victim, "mistral", "unknown provider");
}

/// An unknown provider (or an OpenAI row whose metadata cannot be read) whose messages have
/// one format's unmistakable keys is compacted in that format (regression: it always failed).
#[test]
fn unknown_provider_with_an_unambiguous_shape_is_recognized() {
    let (env, victim) = store_with_victim(43);
    let mut c = env.cmd();
    c.args(["list", "--json"]);
    let (doc, _) = json(c);
    let format = row_of(&doc, &victim)["format"]
        .as_str()
        .unwrap()
        .to_string();
    set(&env, &victim, "provider", "mistral", true);
    // BLOB metadata: api_mode cannot be read either.
    env.conn()
        .execute(
            "UPDATE conversations SET metadata = CAST(metadata AS BLOB) WHERE id = ?1",
            [&victim],
        )
        .unwrap();
    let mut c = env.cmd();
    c.args(["compact", "--dry-run", "--id", &victim, "--json"]);
    let (doc, code) = json(c);
    assert_eq!(code, 0, "{doc}");
    let r = row_of(&doc, &victim);
    assert_ne!(r["status"], "failed", "{r}");
    assert_eq!(r["format"], format.as_str(), "{r}");
    assert!(r["tokens_before"].as_u64().unwrap() > 0, "decoded: {r}");
}

#[test]
fn legacy_google_provider() {
    unsupported_provider("google", 44, "google");
}

#[test]
fn missing_conversation() {
    let env = Env::generated(4, 45, &[]);
    let before = env.files_hash();
    let missing = "00000000-dead-4bee-8000-000000000000";

    for args in [
        vec!["show", missing],
        vec!["show", missing, "--json"],
        vec!["show", missing, "--raw"],
    ] {
        let out = run(env.cmd().args(&args));
        assert_eq!(out.code, DATA, "{args:?}");
        assert!(out.stderr.contains(missing), "{args:?}: {}", out.stderr);
        assert!(out.stderr.contains("not found"), "{args:?}: {}", out.stderr);
        assert!(out.stdout.is_empty());
    }

    // Among other ids, in every command that takes IDs: the same error before anything is
    // done or printed (one resolver), exit 5, stdout empty even with --json.
    let other = env
        .ids("SELECT id FROM conversations ORDER BY id LIMIT 1")
        .remove(0);
    for args in [
        vec![
            "compact",
            "--dry-run",
            "--id",
            missing,
            "--id",
            &other,
            "--json",
        ],
        vec!["compact", "--dry-run", &other, missing],
        vec!["list", "--json", "--id", missing],
        vec!["list", "--id", &other, "--id", missing],
        vec!["history", missing],
        vec!["restore", missing],
    ] {
        let out = run(env.cmd().args(&args));
        assert_eq!(out.code, DATA, "{args:?}: {}", out.stderr);
        assert_eq!(
            out.stderr.lines().next().unwrap_or(""),
            format!("error: conversation {missing}: not found"),
            "{args:?}"
        );
        assert!(out.stdout.is_empty(), "{args:?}: {}", out.stdout);
    }

    assert_eq!(env.files_hash(), before);
}

#[test]
fn compact_needs_a_selector() {
    let env = Env::generated(4, 46, &[]);
    let before = env.files_hash();
    for args in [
        vec!["compact"],
        vec!["compact", "--dry-run"],
        vec!["compact", "--yes"],
        vec!["compact", "--dry-run", "--json"],
        // --limit and --idle narrow a selection but do not make one.
        vec!["compact", "--dry-run", "--limit", "3", "--idle", "0"],
    ] {
        let out = run(env.cmd().args(&args));
        assert_eq!(out.code, USAGE, "{args:?}: {}", out.stderr);
        assert!(
            out.stderr.contains("choose conversations to compact"),
            "{args:?}: {}",
            out.stderr
        );
        assert!(out.stdout.is_empty(), "{args:?}");
    }
    // Contradictory or malformed selectors are usage errors too.
    let id = env.ids("SELECT id FROM conversations LIMIT 1").remove(0);
    for (pct, hint) in [("70", "0.7"), ("7", "0.7"), ("85", "0.85")] {
        let out = run(env.cmd().args(["compact", "--dry-run", "--all-over", pct]));
        assert_eq!(out.code, USAGE, "{pct}: {}", out.stderr);
        assert!(
            out.stderr
                .contains(&format!("did you mean --all-over {hint}?")),
            "{pct}: {}",
            out.stderr
        );
    }
    for args in [
        vec!["compact", "--dry-run", "--follow", "--id", id.as_str()],
        vec!["compact", "--dry-run", "--all-over", "110"],
        vec!["compact", "--dry-run", "--all-over", "-0.5"],
        vec!["compact", "--dry-run", "--all-over", "0", "--limit", "0"],
        vec!["compact", "--dry-run", "--older-than", "soon"],
    ] {
        let out = run(env.cmd().args(&args));
        assert_eq!(out.code, USAGE, "{args:?}: {}", out.stderr);
    }
    assert_eq!(env.files_hash(), before);
}

/// Set a TEXT column of one conversation to raw bytes that are not UTF-8 (a Go string can
/// hold any bytes; SQLite stores them as they come).
fn set_bytes(env: &Env, id: &str, column: &str, hex_bytes: &str, both: bool) {
    let c = env.conn();
    let tables: &[&str] = if both {
        &["conversations", "conversation_summaries"]
    } else {
        &["conversations"]
    };
    for t in tables {
        let n = c
            .execute(
                &format!("UPDATE {t} SET {column} = CAST(X'{hex_bytes}' AS TEXT) WHERE id = ?1"),
                [id],
            )
            .unwrap();
        assert_eq!(n, 1);
    }
}

#[test]
fn invalid_utf8_in_raw_messages_fails_that_conversation_only() {
    let (env, victim) = store_with_victim(47);
    // `["<0xFF>"]`
    set_bytes(&env, &victim, "raw_messages", "5B22FF225D", false);
    let all = sorted(env.ids("SELECT id FROM conversations"));
    let before = env.files_hash();

    let mut c = env.cmd();
    c.args(["list", "--json"]);
    let (doc, code) = json(c);
    assert_eq!(code, 0, "list reads no message bodies");
    assert_eq!(
        sorted(statuses(&doc).into_iter().map(|(id, _)| id).collect()),
        all
    );

    let mut c = env.cmd();
    c.args([
        "compact",
        "--dry-run",
        "--all-over",
        "0",
        "--idle",
        "0",
        "--json",
    ]);
    let (doc, code) = json(c);
    assert_eq!(code, PARTIAL);
    for (id, status) in statuses(&doc) {
        if id == victim {
            assert_eq!(status, "failed");
        } else {
            assert!(status == "planned" || status == "skipped", "{id} {status}");
        }
    }
    assert_eq!(env.files_hash(), before);
}

/// Unreadable stored data of one conversation is a data error (exit 5) naming it, not a store
/// error (regression: it was exit 4 naming only the path).
#[test]
fn invalid_utf8_in_raw_messages_show_is_a_data_error() {
    let (env, victim) = store_with_victim(47);
    set_bytes(&env, &victim, "raw_messages", "5B22FF225D", false);
    let before = env.files_hash();
    for args in [
        vec!["show", victim.as_str()],
        vec!["show", victim.as_str(), "--json"],
        vec!["show", victim.as_str(), "--raw"],
    ] {
        let out = run(env.cmd().args(&args));
        assert_eq!(out.code, DATA, "{args:?}: {}", out.stderr);
        assert!(
            out.stderr.contains(&victim),
            "{args:?}: names it: {}",
            out.stderr
        );
    }
    assert_eq!(env.files_hash(), before);
}

/// One unreadable name must not stop the listing or a batch (regression: the scan aborted with
/// exit 4 and `list --json` printed a truncated document).
#[test]
fn invalid_utf8_in_a_name_does_not_stop_the_listing() {
    let (env, victim) = store_with_victim(48);
    // `A<0xFF>B`
    set_bytes(&env, &victim, "summary", "41FF42", true);
    let all = sorted(env.ids("SELECT id FROM conversations"));
    let before = env.files_hash();

    let out = run(env.cmd().arg("list"));
    assert!(out.code == 0 || out.code == PARTIAL, "list: {}", out.stderr);
    for id in all.iter().filter(|id| **id != victim) {
        assert!(out.stdout.contains(id.as_str()), "list shows {id}");
    }
    if out.code == PARTIAL {
        assert!(out.stderr.contains(&victim), "names it: {}", out.stderr);
    }

    let mut c = env.cmd();
    c.args(["list", "--json"]);
    let (doc, code) = json(c);
    assert!(code == 0 || code == PARTIAL, "list --json: {code}");
    let listed: Vec<String> = statuses(&doc).into_iter().map(|(id, _)| id).collect();
    for id in all.iter().filter(|id| **id != victim) {
        assert!(listed.contains(id), "list --json shows {id}");
    }

    let mut c = env.cmd();
    c.args([
        "compact",
        "--dry-run",
        "--all-over",
        "0",
        "--idle",
        "0",
        "--json",
    ]);
    let (doc, code) = json(c);
    assert!(code == 0 || code == PARTIAL, "compact --dry-run: {code}");
    assert!(statuses(&doc).iter().any(|(_, s)| s == "planned"));
    assert_eq!(env.files_hash(), before);
}

#[test]
fn malformed_usage_json() {
    let (env, victim) = store_with_victim(49);
    set(&env, &victim, "usage", "{\"currentContextWindow\":", true);
    let all = sorted(env.ids("SELECT id FROM conversations"));
    let before = env.files_hash();

    // Listing shows it (without figures).
    let mut c = env.cmd();
    c.args(["list", "--json"]);
    let (doc, code) = json(c);
    assert_eq!(code, 0);
    assert_eq!(
        sorted(statuses(&doc).into_iter().map(|(id, _)| id).collect()),
        all
    );
    let r = row_of(&doc, &victim);
    assert!(
        r["context_tokens"].is_null() && r["utilization"].is_null(),
        "{r}"
    );

    // Utilization selection reports it, by name, and goes on.
    let out = run(env.cmd().args(["list", "--all-over", "0", "--idle", "0"]));
    assert_eq!(out.code, PARTIAL, "{}", out.stderr);
    assert!(
        out.stderr.contains(&victim) && out.stderr.contains("usage"),
        "{}",
        out.stderr
    );
    let mut c = env.cmd();
    c.args([
        "compact",
        "--dry-run",
        "--all-over",
        "0",
        "--idle",
        "0",
        // A fixed tail, so conversations under the default target are planned too.
        "--keep-tokens",
        "2000",
        "--json",
    ]);
    let (doc, code) = json(c);
    assert_eq!(code, PARTIAL);
    let r = row_of(&doc, &victim);
    assert_eq!(r["status"], "failed", "{r}");
    assert!(r["detail"].as_str().unwrap().contains("usage"), "{r}");
    assert!(statuses(&doc).iter().any(|(_, s)| s == "planned"));
    assert_eq!(env.files_hash(), before);
}

/// Nothing to follow is "not found" (exit 5), not a usage error: exit 2 is for bad command lines.
#[test]
fn follow_on_an_empty_store() {
    let env = Env::empty();
    let before = env.files_hash();
    for args in [
        vec!["list", "--follow"],
        vec!["compact", "--dry-run", "--follow"],
    ] {
        let out = run(env.cmd().args(&args));
        assert_eq!(out.code, DATA, "{args:?}: {}", out.stderr);
        assert!(
            out.stderr.contains("no conversations"),
            "{args:?}: {}",
            out.stderr
        );
    }
    // Without --follow an empty store is simply empty.
    let mut c = env.cmd();
    c.args(["list", "--json"]);
    let (doc, code) = json(c);
    assert_eq!(code, 0);
    assert_eq!(doc["conversations"], serde_json::json!([]));
    assert_eq!(env.files_hash(), before);
}

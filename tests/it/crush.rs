//! Crush's `.crush/crush.db` end to end, on stores built from Crush's migration SQL
//! (`fixtures/crush/migrations.sql`, charmbracelet/crush `internal/db/migrations/` at
//! `37f36e93`) and filled by the rules below: a compaction read back by a replay of Crush's
//! loading rule, restore cell for cell, odd storage classes in every column, a newer schema,
//! and discovery from the current directory and `projects.json`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use rusqlite::{params, Connection};
use serde_json::Value;
use tempfile::TempDir;

use crate::common::{bare_cmd, dump_all, files_hash, json};

const MIGRATIONS: &str = include_str!("../../fixtures/crush/migrations.sql");

/// The migration sections of the fixture: (version, SQL).
fn sections() -> Vec<(i64, String)> {
    let mut out: Vec<(i64, String)> = Vec::new();
    for chunk in MIGRATIONS.split("\n-- migration ").skip(1) {
        let (head, sql) = chunk.split_once('\n').unwrap();
        let version: i64 = head.split('_').next().unwrap().parse().unwrap();
        out.push((version, sql.to_string()));
    }
    out
}

/// A store at `db` with every migration up to `upto` applied, each recorded in
/// `goose_db_version` as goose records it (version 0 first).
pub(crate) fn build(db: &Path, upto: i64) -> Connection {
    let c = Connection::open(db).unwrap();
    // The test's own writes need no fsync (agent-db's keep theirs).
    c.pragma_update(None, "synchronous", "OFF").unwrap();
    for (version, sql) in sections() {
        if version > upto {
            break;
        }
        c.execute_batch(&sql).unwrap();
        c.execute(
            "INSERT INTO goose_db_version (version_id, is_applied) VALUES (?1, 1)",
            [version],
        )
        .unwrap();
    }
    c
}

/// The parts JSON Crush's `marshalParts` writes.
fn parts(list: &[Value]) -> String {
    Value::Array(list.to_vec()).to_string()
}
fn text(t: &str) -> Value {
    serde_json::json!({"type": "text", "data": {"text": t}})
}
fn finish(reason: &str, time: i64) -> Value {
    serde_json::json!({"type": "finish", "data": {"reason": reason, "time": time}})
}
fn call(id: &str, input: &str) -> Value {
    serde_json::json!({"type": "tool_call", "data": {"id": id, "name": "view", "input": input, "provider_executed": false, "finished": true}})
}
fn result(id: &str, content: &str) -> Value {
    serde_json::json!({"type": "tool_result", "data": {"tool_call_id": id, "name": "view", "content": content, "data": "", "mime_type": "", "metadata": "", "is_error": false}})
}

/// One filled session: `turns` turns of a user request, an assistant tool call, its result
/// and an answer; every turn's four messages share one second when `same_second` (Crush writes
/// whole seconds and a fast tool call lands in the same one), else one second apart. Messages
/// are inserted with Crush's triggers live, as Crush inserts them.
pub(crate) fn fill(
    c: &Connection,
    id: &str,
    turns: usize,
    same_second: bool,
    t0: i64,
) -> Vec<String> {
    c.execute(
        "INSERT INTO sessions (id, parent_session_id, title, message_count, prompt_tokens, completion_tokens, cost, updated_at, created_at)
         VALUES (?1, NULL, ?2, 0, 24000, 1000, 0.5, ?3, ?3)",
        params![id, format!("session {id}"), t0],
    )
    .unwrap();
    let mut ids = Vec::new();
    let mut t = t0;
    for turn in 0..turns {
        let body = format!("file {turn}: ").repeat(400);
        let call_id = format!("{id}-call-{turn}");
        let rows: [(&str, String, Option<&str>); 4] = [
            (
                "user",
                parts(&[text(&format!(
                    "please read file {turn} and fix the bug in it"
                ))]),
                None,
            ),
            (
                "assistant",
                parts(&[
                    call(&call_id, &format!("{{\"file_path\":\"f{turn}.go\"}}")),
                    finish("tool_use", t),
                ]),
                Some("claude-sonnet-4-5"),
            ),
            ("tool", parts(&[result(&call_id, &body)]), None),
            (
                "assistant",
                parts(&[
                    text(&format!(
                        "file {turn} is fixed: the loop bound was off by one"
                    )),
                    finish("end_turn", t),
                ]),
                Some("claude-sonnet-4-5"),
            ),
        ];
        for (k, (role, p, model)) in rows.into_iter().enumerate() {
            let mid = format!("{id}-m{turn}-{k}");
            c.execute(
                "INSERT INTO messages (id, session_id, role, parts, model, provider, is_summary_message, created_at, updated_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, 0, ?7, ?7)",
                params![mid, id, role, p, model, model.map(|_| "anthropic"), t],
            )
            .unwrap();
            ids.push(mid);
            if !same_second {
                t += 1;
            }
        }
        if same_second {
            t += 1;
        }
    }
    ids
}

/// One message as Crush's replayed loader hands it to the model.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Loaded {
    pub(crate) id: String,
    role: String,
    parts: Value,
}

/// A REPLAY of Crush's loading rule, written here from its source (charmbracelet/crush
/// `37f36e93`): `ListMessagesBySession` (`internal/db/sql/messages.sql`: `SELECT * FROM
/// messages WHERE session_id = ? ORDER BY created_at ASC`), each row read by `fromDBItem` and
/// `unmarshalParts` (`internal/message/message.go`: `created_at` scanned into an int64, parts a
/// JSON array of `{type, data}` of the eight known types, anything else an error that fails the
/// session), then `getSessionMessages` (`internal/agent/agent.go`): when
/// `sessions.summary_message_id` names one of the messages, the history starts there and that
/// message's role becomes `user`.
pub(crate) fn replay(c: &Connection, session: &str) -> Result<Vec<Loaded>, String> {
    let summary: Option<String> = c
        .query_row(
            "SELECT summary_message_id FROM sessions WHERE id = ?1",
            [session],
            |r| r.get(0),
        )
        .map_err(|e| format!("session: {e}"))?;
    let mut st = c
        .prepare("SELECT * FROM messages WHERE session_id = ?1 ORDER BY created_at ASC")
        .unwrap();
    let names: Vec<String> = st.column_names().iter().map(|s| s.to_string()).collect();
    let col = |n: &str| names.iter().position(|c| c == n).unwrap();
    let (id_i, role_i, parts_i, created_i) =
        (col("id"), col("role"), col("parts"), col("created_at"));
    let mut rows = st.query([session]).unwrap();
    let mut msgs = Vec::new();
    while let Some(r) = rows.next().unwrap() {
        let id: String = r.get(id_i).map_err(|e| format!("id: {e}"))?;
        let role: String = r.get(role_i).map_err(|e| format!("{id}: role: {e}"))?;
        // database/sql's int64 scan: an integer, or text that parses as one.
        match r.get_ref(created_i).unwrap() {
            rusqlite::types::ValueRef::Integer(_) => {}
            rusqlite::types::ValueRef::Text(t)
                if std::str::from_utf8(t)
                    .ok()
                    .and_then(|t| t.parse::<i64>().ok())
                    .is_some() => {}
            other => {
                return Err(format!(
                    "{id}: created_at {other:?} does not scan into int64"
                ))
            }
        }
        let raw: String = match r.get_ref(parts_i).unwrap() {
            rusqlite::types::ValueRef::Text(t) | rusqlite::types::ValueRef::Blob(t) => {
                String::from_utf8(t.to_vec()).map_err(|_| format!("{id}: parts not UTF-8"))?
            }
            other => return Err(format!("{id}: parts {other:?}")),
        };
        let parts: Value = serde_json::from_str(&raw).map_err(|e| format!("{id}: parts: {e}"))?;
        for p in parts
            .as_array()
            .ok_or(format!("{id}: parts not an array"))?
        {
            let known = [
                "reasoning",
                "text",
                "image_url",
                "binary",
                "tool_call",
                "tool_result",
                "finish",
                "shell_command",
            ];
            let t = p["type"].as_str().unwrap_or("");
            if !known.contains(&t) || !p["data"].is_object() {
                return Err(format!("{id}: unknown part type: {t}"));
            }
        }
        msgs.push(Loaded { id, role, parts });
    }
    if let Some(s) = summary.filter(|s| !s.is_empty()) {
        if let Some(i) = msgs.iter().position(|m| m.id == s) {
            msgs.drain(..i);
            msgs[0].role = "user".into();
        }
    }
    Ok(msgs)
}

/// What a compaction must leave by Crush's rule: the summary (an `is_summary_message`
/// assistant row read as the user's, its text a part) and then exactly `tail`, none of `gone`.
fn check_compacted(
    c: &Connection,
    session: &str,
    tail: &[String],
    gone: &[String],
) -> Result<(), String> {
    let loaded = replay(c, session)?;
    let first = loaded.first().ok_or("nothing loaded")?;
    let (flag, stored_role): (i64, String) = c
        .query_row(
            "SELECT is_summary_message, role FROM messages WHERE id = ?1",
            [&first.id],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .map_err(|e| e.to_string())?;
    if flag != 1 || stored_role != "assistant" || first.role != "user" {
        return Err(format!(
            "the history does not start at a summary message: {first:?}"
        ));
    }
    let summary_text = first.parts[0]["data"]["text"].as_str().unwrap_or("");
    if first.parts[0]["type"] != "text" || summary_text.is_empty() {
        return Err("the summary has no text part".into());
    }
    let rest: Vec<&str> = loaded[1..].iter().map(|m| m.id.as_str()).collect();
    if rest != tail.iter().map(String::as_str).collect::<Vec<_>>() {
        return Err(format!("after the summary: {rest:?}, expected {tail:?}"));
    }
    if let Some(g) = loaded.iter().find(|m| gone.contains(&m.id)) {
        return Err(format!("a summarized message is still sent: {}", g.id));
    }
    // Every tool result the model is sent answers a call it is sent before it.
    let mut calls = std::collections::HashSet::new();
    for m in &loaded {
        for p in m.parts.as_array().into_iter().flatten() {
            match p["type"].as_str() {
                Some("tool_call") => {
                    calls.insert(p["data"]["id"].as_str().unwrap_or("").to_string());
                }
                Some("tool_result") => {
                    let id = p["data"]["tool_call_id"].as_str().unwrap_or("");
                    if !calls.contains(id) {
                        return Err(format!("{}: a tool result without its call ({id})", m.id));
                    }
                }
                _ => {}
            }
        }
    }
    Ok(())
}

struct Cr {
    dir: TempDir,
    db: PathBuf,
}

impl Cr {
    fn new(upto: i64) -> (Cr, Connection) {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("crush.db");
        let c = build(&db, upto);
        (Cr { dir, db }, c)
    }
    fn cmd(&self) -> assert_cmd::Command {
        let mut c = bare_cmd(self.dir.path());
        c.arg("--db").arg(&self.db);
        c
    }
    fn conn(&self) -> Connection {
        Connection::open(&self.db).unwrap()
    }
}

pub(crate) const NEWEST_MAIN: i64 = 20260127000000;

fn compact(cr: &Cr, id: &str) -> Value {
    compact_keeping(cr, id, "3000")
}

fn compact_keeping(cr: &Cr, id: &str, keep: &str) -> Value {
    let mut c = cr.cmd();
    c.args([
        "compact",
        "--id",
        id,
        "--idle",
        "0",
        "--keep-tokens",
        keep,
        "--yes",
        "--json",
    ]);
    let (doc, code) = json(c);
    assert_eq!(code, 0, "{doc:#}");
    doc
}

/// Every stored cell but agent-db's own tables, with storage classes.
fn agent_cells(c: &Connection) -> BTreeMap<String, Vec<Vec<String>>> {
    dump_all(c)
        .into_iter()
        .filter(|(t, _)| !t.starts_with("agent_db_") && t != "sqlite_sequence")
        .collect()
}

#[test]
fn compaction_is_read_back_by_crushs_loader_and_restores_cell_for_cell() {
    for same_second in [false, true] {
        let (cr, c) = Cr::new(NEWEST_MAIN);
        let ids = fill(&c, "s1", 12, same_second, 1_780_000_000);
        let other = fill(&c, "s2", 2, true, 1_780_100_000);
        drop(c);
        let before = agent_cells(&cr.conn());
        let doc = compact(&cr, "s1");
        let row = &doc["conversations"][0];
        assert_eq!(row["status"], "compacted", "{doc:#}");
        let c = cr.conn();
        // The replay names the kept tail: whatever follows the summary must be a suffix of the
        // original messages, non-empty, and the rest summarized.
        let loaded = replay(&c, "s1").unwrap();
        let kept = loaded.len() - 1;
        assert!(kept > 0 && kept < ids.len(), "kept {kept} of {}", ids.len());
        let (gone, tail) = ids.split_at(ids.len() - kept);
        check_compacted(&c, "s1", tail, gone).unwrap();
        // Whole seconds: when the last summarized message shares the first kept one's second,
        // every summarized message moved one second earlier (their order kept); else none did.
        let time = |d: &BTreeMap<String, Vec<Vec<String>>>, id: &str| -> i64 {
            let row = d["messages"]
                .iter()
                .find(|r| r[1] == format!("Text({id:?})"))
                .unwrap();
            row[6]
                .trim_start_matches("Integer(")
                .trim_end_matches(')')
                .parse()
                .unwrap()
        };
        let after = agent_cells(&c);
        let shared = time(&before, gone.last().unwrap()) == time(&before, &tail[0]);
        assert_eq!(
            shared, same_second,
            "the fixture's cut falls inside a second only when asked"
        );
        for g in gone {
            assert_eq!(time(&after, g), time(&before, g) - i64::from(shared), "{g}");
        }
        for t in tail {
            assert_eq!(time(&after, t), time(&before, t), "{t}");
        }
        // Crush's auto-summarize check reads the compacted size, not the old 25,000.
        let (prompt, completion, count): (i64, i64, i64) = c
            .query_row(
                "SELECT prompt_tokens, completion_tokens, message_count FROM sessions WHERE id = 's1'",
                [],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
            )
            .unwrap();
        assert!(
            prompt > 0 && prompt < 24_000 && completion == 0,
            "{prompt} {completion}"
        );
        assert_eq!(count, ids.len() as i64 + 1);
        // The other session is untouched.
        let s2_rows = |d: &BTreeMap<String, Vec<Vec<String>>>| -> Vec<Vec<String>> {
            d["messages"]
                .iter()
                .filter(|r| r[2] == "Text(\"s2\")")
                .cloned()
                .collect()
        };
        assert_eq!(s2_rows(&before), s2_rows(&after));
        assert_eq!(replay(&c, "s2").unwrap().len(), other.len());
        drop(c);
        // Restore gives every cell back, storage class and bytes.
        let out = cr.cmd().args(["restore", "s1"]).output().unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(agent_cells(&cr.conn()), before, "same_second={same_second}");
    }
}

/// A second compaction, after Crush went on with the session, summarizes the originals (read
/// back from the live rows and the archive), and two restores, newest first, give every cell
/// back.
#[test]
fn a_second_compaction_reads_the_originals_and_both_restore() {
    let (cr, c) = Cr::new(NEWEST_MAIN);
    let ids = fill(&c, "s1", 10, true, 1_780_000_000);
    drop(c);
    let before = agent_cells(&cr.conn());
    compact(&cr, "s1");
    // Crush goes on: six new turns a minute later, and the session's usage of its last call.
    let c = cr.conn();
    let mut more = ids.clone();
    for turn in 0..6 {
        let late = [
            (
                "user",
                parts(&[text(&format!("now read file {} and fix it", 90 + turn))]),
            ),
            (
                "assistant",
                parts(&[
                    text(&format!("file {} is fixed", 90 + turn)),
                    finish("end_turn", 1_780_000_100),
                ]),
            ),
        ];
        for (k, (role, p)) in late.into_iter().enumerate() {
            let mid = format!("s1-late-{turn}-{k}");
            c.execute(
                "INSERT INTO messages (id, session_id, role, parts, is_summary_message, created_at, updated_at)
                 VALUES (?1, 's1', ?2, ?3, 0, ?4, ?4)",
                params![mid, role, p, 1_780_000_100 + turn],
            )
            .unwrap();
            more.push(mid);
        }
    }
    c.execute(
        "UPDATE sessions SET prompt_tokens = 9000 WHERE id = 's1'",
        [],
    )
    .unwrap();
    drop(c);
    let after_first = agent_cells(&cr.conn());
    let doc = compact_keeping(&cr, "s1", "300");
    assert_eq!(doc["conversations"][0]["status"], "compacted", "{doc:#}");
    let c = cr.conn();
    let details: String = c
        .query_row(
            "SELECT details FROM agent_db_compactions ORDER BY id DESC LIMIT 1",
            [],
            |r| r.get(0),
        )
        .unwrap();
    let details: Value = serde_json::from_str(&details).unwrap();
    assert_eq!(details["resummary"]["from"], "originals", "{details:#}");
    let loaded = replay(&c, "s1").unwrap();
    let kept = loaded.len() - 1;
    let tail = &more[more.len() - kept..];
    let gone: Vec<String> = more[..more.len() - kept].to_vec();
    check_compacted(&c, "s1", tail, &gone).unwrap();
    drop(c);
    let out = cr.cmd().args(["restore", "s1"]).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(agent_cells(&cr.conn()), after_first);
    // Crush wrote to the session after the first compaction: its restore needs --force, and
    // then Crush loads every message again, the late ones too.
    let out = cr.cmd().args(["restore", "s1"]).output().unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--force"));
    let out = cr
        .cmd()
        .args(["restore", "s1", "--force"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let loaded: Vec<String> = replay(&cr.conn(), "s1")
        .unwrap()
        .into_iter()
        .map(|m| m.id)
        .collect();
    assert_eq!(loaded, more);
    let now = agent_cells(&cr.conn());
    let without_late = |d: &BTreeMap<String, Vec<Vec<String>>>| -> Vec<Vec<String>> {
        d["messages"]
            .iter()
            .filter(|r| !r[1].contains("s1-late"))
            .cloned()
            .collect()
    };
    assert_eq!(without_late(&now), without_late(&before));
}

#[test]
fn prune_is_refused_naming_the_append_only_store() {
    let (cr, c) = Cr::new(NEWEST_MAIN);
    fill(&c, "s1", 3, false, 1_780_000_000);
    drop(c);
    let hash = files_hash(&cr.db);
    let out = cr
        .cmd()
        .args([
            "compact",
            "--id",
            "s1",
            "--idle",
            "0",
            "--strategy",
            "prune",
            "--yes",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("not available for crush stores") && err.contains("--strategy extractive"),
        "{err}"
    );
    assert_eq!(files_hash(&cr.db), hash);
}

#[test]
fn the_replay_rejects_a_bad_history() {
    let (cr, c) = Cr::new(NEWEST_MAIN);
    let ids = fill(&c, "s1", 4, true, 1_780_000_000);
    // A summary written "now", as a naive writer would: Crush sorts it after the tail, so the
    // tail is lost to the model.
    c.execute(
        "INSERT INTO messages (id, session_id, role, parts, is_summary_message, created_at, updated_at)
         VALUES ('sum', 's1', 'assistant', ?1, 1, 1780000100, 1780000100)",
        [parts(&[text("summary")])],
    )
    .unwrap();
    c.execute(
        "UPDATE sessions SET summary_message_id = 'sum' WHERE id = 's1'",
        [],
    )
    .unwrap();
    let tail = ids[8..].to_vec();
    let err = check_compacted(&c, "s1", &tail, &ids[..8]).unwrap_err();
    assert!(err.contains("after the summary: []"), "{err}");
    // A summary that shares the tail's second is sorted after it (rowid order): also caught.
    c.execute(
        "UPDATE messages SET created_at = 1780000002 WHERE id = 'sum'",
        [],
    )
    .unwrap();
    assert!(check_compacted(&c, "s1", &tail, &ids[..8]).is_err());
    // A part Crush does not know fails the whole session, in the replay as in Crush.
    c.execute(
        "UPDATE messages SET parts = '[{\"type\":\"video\",\"data\":{}}]' WHERE id = ?1",
        [&ids[0]],
    )
    .unwrap();
    assert!(replay(&c, "s1").unwrap_err().contains("unknown part type"));
    drop(cr);
}

#[test]
fn list_select_show_and_raw() {
    let (cr, c) = Cr::new(NEWEST_MAIN);
    let ids = fill(&c, "alpha-1", 3, false, 1_780_000_000);
    fill(&c, "beta-2", 1, false, 1_780_000_500);
    c.execute(
        "INSERT INTO sessions (id, parent_session_id, title, message_count, prompt_tokens, completion_tokens, cost, updated_at, created_at)
         VALUES ('child', 'alpha-1', 'task', 0, 0, 0, 0, 1780000000, 1780000000)",
        [],
    )
    .unwrap();
    drop(c);
    let (doc, code) = json({
        let mut c = cr.cmd();
        c.args(["list", "--json"]);
        c
    });
    assert_eq!(code, 0, "{doc:#}");
    let rows = crate::common::all_rows(&doc);
    let find = |id: &str| rows.iter().find(|r| r["id"] == id).cloned().unwrap();
    let a = find("alpha-1");
    assert_eq!(a["messages"], 12);
    assert_eq!(a["provider"], "anthropic");
    assert_eq!(a["model"], "claude-sonnet-4-5");
    assert_eq!(find("child")["parent_id"], "alpha-1");
    // A prefix selects, --all-over reads prompt_tokens + completion_tokens against the window.
    let out = cr.cmd().args(["show", "alph"]).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("fix the bug"));
    let (doc, _) = json({
        let mut c = cr.cmd();
        c.args(["list", "--all-over", "0.1", "--idle", "0", "--json"]);
        c
    });
    let selected = crate::common::ids_with_status(&doc, "selected");
    assert!(selected.contains(&"alpha-1".to_string()), "{doc:#}");
    assert!(!selected.contains(&"child".to_string()), "{doc:#}");
    // show --raw: the session row, then every message row, every column as stored.
    let out = cr
        .cmd()
        .args(["show", "alpha-1", "--raw"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let raw: Value = serde_json::from_slice(&out.stdout).unwrap();
    let raw = raw.as_array().unwrap();
    assert_eq!(raw.len(), 1 + ids.len());
    assert_eq!(raw[0]["title"], "session alpha-1");
    assert_eq!(raw[1]["id"], ids[0].as_str());
    assert_eq!(raw[1]["is_summary_message"], 0);
}

#[test]
fn a_newer_or_unknown_migration_is_refused_naming_both_versions() {
    for (version, words) in [
        (20261001000000_i64, "newer than any agent-db knows"),
        (20250901000000, "not one agent-db knows"),
    ] {
        let (cr, c) = Cr::new(NEWEST_MAIN);
        fill(&c, "s1", 2, false, 1_780_000_000);
        c.execute(
            "INSERT INTO goose_db_version (version_id, is_applied) VALUES (?1, 1)",
            [version],
        )
        .unwrap();
        drop(c);
        let hash = files_hash(&cr.db);
        for args in [
            &["list"][..],
            &["compact", "--id", "s1", "--idle", "0", "--yes"],
        ] {
            let out = cr.cmd().args(args).output().unwrap();
            assert_eq!(out.status.code(), Some(4), "{args:?}");
            let err = String::from_utf8_lossy(&out.stderr);
            assert!(
                err.contains(&version.to_string())
                    && err.contains("20260925000000_add_skills_enabled_servers")
                    && err.contains(words),
                "{err}"
            );
        }
        assert_eq!(files_hash(&cr.db), hash);
    }
    // A migration rolled back (goose's Down adds a row with is_applied 0) does not count.
    let (cr, c) = Cr::new(NEWEST_MAIN);
    c.execute(
        "INSERT INTO goose_db_version (version_id, is_applied) VALUES (20261001000000, 1), (20261001000000, 0)",
        [],
    )
    .unwrap();
    drop(c);
    assert!(cr.cmd().arg("list").output().unwrap().status.success());
}

#[test]
fn a_file_before_is_summary_message_is_listed_but_not_written() {
    let (cr, c) = Cr::new(20250627000000);
    c.execute(
        "INSERT INTO sessions (id, title, updated_at, created_at, prompt_tokens) VALUES ('s1', 't', 1, 1, 20000)",
        [],
    )
    .unwrap();
    for i in 0..16 {
        let (role, body) = match i % 2 {
            0 => ("user", format!("question {i}")),
            _ => ("assistant", format!("answer {i} ").repeat(300)),
        };
        c.execute(
            "INSERT INTO messages (id, session_id, role, parts, created_at, updated_at) VALUES (?1, 's1', ?2, ?3, ?4, ?4)",
            params![format!("m{i}"), role, parts(&[text(&body)]), 1_780_000_000 + i],
        )
        .unwrap();
    }
    drop(c);
    let (doc, code) = json({
        let mut c = cr.cmd();
        c.args(["stores", "--json"]);
        c
    });
    assert_eq!(code, 0, "{doc:#}");
    assert!(
        doc.to_string()
            .contains("20250627000000_add_provider_to_messages"),
        "{doc:#}"
    );
    assert!(cr
        .cmd()
        .args(["show", "s1"])
        .output()
        .unwrap()
        .status
        .success());
    let cells = agent_cells(&cr.conn());
    let out = cr
        .cmd()
        .args([
            "compact", "--id", "s1", "--idle", "0", "--force", "--yes", "--json",
        ])
        .output()
        .unwrap();
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    let row = &doc["conversations"][0];
    assert_eq!(row["status"], "failed", "{doc:#}");
    assert!(
        row["detail"]
            .as_str()
            .unwrap()
            .contains("add_is_summary_message"),
        "{doc:#}"
    );
    assert_eq!(agent_cells(&cr.conn()), cells);
}

/// Values of every storage class a column could hold that Crush would not write there.
fn odd_values() -> Vec<(&'static str, rusqlite::types::Value)> {
    use rusqlite::types::Value as V;
    vec![
        ("text", V::Text("x12".into())),
        ("number-text", V::Text("1780000000".into())),
        ("blob", V::Blob(vec![0xff, 0x00, 0x7b])),
        ("real", V::Real(1.5)),
        ("integer", V::Integer(-7)),
        ("null", V::Null),
    ]
}

#[test]
fn odd_storage_classes_in_every_column_never_panic() {
    let (base, c) = Cr::new(NEWEST_MAIN);
    let ids = fill(&c, "s1", 4, true, 1_780_000_000);
    let columns = |t: &str| -> Vec<String> {
        let mut st = c
            .prepare(&format!("SELECT name FROM pragma_table_info('{t}')"))
            .unwrap();
        let r = st
            .query_map([], |r| r.get(0))
            .unwrap()
            .map(|r| r.unwrap())
            .collect();
        r
    };
    let mut cases = Vec::new();
    for col in columns("sessions") {
        cases.push(("sessions", col, "id = 's1'".to_string()));
    }
    for col in columns("messages") {
        for target in [&ids[0], &ids[ids.len() - 1]] {
            cases.push(("messages", col.clone(), format!("id = '{target}'")));
        }
    }
    drop(c);
    let mut tried = 0;
    for (table, col, row) in cases {
        for (name, value) in odd_values() {
            let dir = tempfile::tempdir().unwrap();
            let db = dir.path().join("crush.db");
            std::fs::copy(&base.db, &db).unwrap();
            let c = Connection::open(&db).unwrap();
            c.set_db_config(
                rusqlite::config::DbConfig::SQLITE_DBCONFIG_ENABLE_TRIGGER,
                false,
            )
            .unwrap();
            if c.execute(
                &format!("UPDATE {table} SET \"{col}\" = ?1 WHERE {row}"),
                [&value],
            )
            .is_err()
            {
                continue; // a constraint keeps Crush (and this test) from storing it
            }
            drop(c);
            tried += 1;
            let cr = Cr { dir, db };
            let case = format!("{table}.{col} = {name} at {row}");
            let hash = files_hash(&cr.db);
            let before = agent_cells(&cr.conn());
            for args in [
                &["list", "--json"][..],
                &["show", "s1"],
                &["show", "s1", "--raw"],
            ] {
                let out = cr.cmd().args(args).output().unwrap();
                let err = String::from_utf8_lossy(&out.stderr);
                assert!(!err.contains("panicked"), "{case} {args:?}: {err}");
                assert!(
                    matches!(out.status.code(), Some(0 | 4 | 5)),
                    "{case} {args:?}: {err}"
                );
                if !out.status.success() {
                    assert!(
                        err.contains("s1") || err.contains("crush.db"),
                        "{case} {args:?}: {err}"
                    );
                }
            }
            assert_eq!(files_hash(&cr.db), hash, "{case}: a read wrote");
            let out = cr
                .cmd()
                .args([
                    "compact",
                    "--id",
                    "s1",
                    "--idle",
                    "0",
                    "--keep-tokens",
                    "1000",
                    "--yes",
                    "--json",
                ])
                .output()
                .unwrap();
            let err = String::from_utf8_lossy(&out.stderr);
            assert!(!err.contains("panicked"), "{case}: {err}");
            let code = out.status.code();
            assert!(
                matches!(code, Some(0 | 1 | 4 | 5)),
                "{case}: {code:?} {err}"
            );
            let doc: Value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
            let compacted = doc["conversations"][0]["status"] == "compacted";
            if compacted {
                let out = cr.cmd().args(["restore", "s1"]).output().unwrap();
                assert!(
                    out.status.success(),
                    "{case}: {}",
                    String::from_utf8_lossy(&out.stderr)
                );
            }
            assert_eq!(agent_cells(&cr.conn()), before, "{case}");
        }
    }
    assert!(tried > 60, "{tried}");
}

#[test]
fn discovery_from_the_current_directory_and_projects_json() {
    let home = tempfile::tempdir().unwrap();
    // A project with a git root, a .crush at the root, run from a subdirectory.
    let project = home.path().join("work/app");
    std::fs::create_dir_all(project.join(".git")).unwrap();
    std::fs::create_dir_all(project.join(".crush")).unwrap();
    std::fs::create_dir_all(project.join("src/deep")).unwrap();
    let c = build(&project.join(".crush/crush.db"), NEWEST_MAIN);
    fill(&c, "here", 1, false, 1_780_000_000);
    drop(c);
    // Another project, known only from projects.json.
    let other = home.path().join("work/lib/.crush");
    std::fs::create_dir_all(&other).unwrap();
    let c = build(&other.join("crush.db"), NEWEST_MAIN);
    fill(&c, "there", 1, false, 1_780_000_000);
    drop(c);
    let data = home.path().join(".local/share/crush");
    std::fs::create_dir_all(&data).unwrap();
    std::fs::write(
        data.join("projects.json"),
        serde_json::json!({"projects": [
            {"path": home.path().join("work/lib"), "data_dir": other, "last_accessed": "2026-11-01T00:00:00Z"},
            {"path": project, "data_dir": project.join(".crush"), "last_accessed": "2026-10-01T00:00:00Z"}
        ]})
        .to_string(),
    )
    .unwrap();
    let cmd = |dir: &Path| {
        let mut c = bare_cmd(home.path());
        c.env_remove("XDG_DATA_HOME")
            .env_remove("CRUSH_GLOBAL_DATA")
            .current_dir(dir);
        c
    };
    let out = cmd(&project.join("src/deep"))
        .args(["--agent", "crush", "list", "--ids"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "here");
    // Without --agent the one store found is used.
    let out = cmd(&project.join("src"))
        .args(["list", "--ids"])
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "here");
    // stores lists both, with their schema version.
    let (doc, code) = json({
        let mut c = cmd(&project.join("src"));
        c.args(["stores", "--json"]);
        c
    });
    assert_eq!(code, 0, "{doc:#}");
    let text = doc.to_string();
    assert!(
        text.contains("app/.crush/crush.db") && text.contains("lib/.crush/crush.db"),
        "{doc:#}"
    );
    assert!(text.contains("20260127000000"), "{doc:#}");
    // Outside any project, --agent crush names the projects' files and --db.
    let out = cmd(home.path())
        .args(["--agent", "crush", "list"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains("lib/.crush/crush.db") && err.contains("--db"),
        "{err}"
    );
}

/// A compaction keeping the last `keep` loaded messages, built by the test.
fn neutral(raw: &str, keep: usize) -> agent_db::store::Compaction {
    let n = agent_db::message::split_raw(raw).unwrap().len();
    agent_db::store::Compaction {
        format: &agent_db::agents::crush::codec::CODEC,
        history: raw.to_string(),
        summary: Some("[agent-db compaction summary]\nthe work so far".into()),
        tail_start: n - keep,
        reinsert: None,
        context_after: 100,
        call_ids: Default::default(),
        model: None,
        message_tokens: Vec::new(),
    }
}

fn audit(id: &str) -> agent_db::store::pre_image::AuditEntry {
    agent_db::store::pre_image::AuditEntry {
        conversation_id: id.into(),
        store_kind: "crush".into(),
        reason: "manual".into(),
        strategy: "extractive".into(),
        model: None,
        messages_before: 0,
        messages_after: 0,
        tokens_before: 0,
        tokens_after: 0,
        summary_sha256: String::new(),
        retention: None,
        details: serde_json::json!({}),
    }
}

/// Crush streams an answer into its message row (`UpdateMessage`: new parts, `updated_at`)
/// between agent-db's plan and its commit: nothing is written; a fresh plan commits.
#[test]
fn a_live_crush_write_between_plan_and_commit_is_detected() {
    use agent_db::store::{Access, Store, Written};
    let (cr, c) = Cr::new(NEWEST_MAIN);
    let ids = fill(&c, "s1", 4, true, 1_780_000_000);
    drop(c);
    let store = Store::open(&cr.db, Access::Read).unwrap();
    let row = store.load("s1").unwrap();
    let proposal = row.propose(neutral(&row.raw_messages, 4), audit("s1"), None);
    cr.conn()
        .execute(
            "UPDATE messages SET parts = ?1, finished_at = 1780000009 WHERE id = ?2",
            params![
                parts(&[text("streamed more"), finish("end_turn", 1_780_000_009)]),
                ids.last().unwrap()
            ],
        )
        .unwrap();
    let before = agent_cells(&cr.conn());
    let mut writer = Store::open(&cr.db, Access::Write).unwrap();
    let w = writer.commit(&proposal, "2026-11-01T12:00:02Z").unwrap();
    assert!(
        matches!(w, Written::Changed(ref why) if why.contains("changed since read")),
        "{w:?}"
    );
    assert_eq!(agent_cells(&cr.conn()), before, "nothing written");
    let row = store.load("s1").unwrap();
    let proposal = row.propose(neutral(&row.raw_messages, 4), audit("s1"), None);
    let w = writer.commit(&proposal, "2026-11-01T12:00:03Z").unwrap();
    assert!(matches!(w, Written::Committed { .. }), "{w:?}");
    check_compacted(&cr.conn(), "s1", &ids[12..], &ids[..12]).unwrap();
}

mod props {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(32))]

        /// Whatever whole-second times the messages have (ties anywhere, gaps, insertion order
        /// unlike time order) and wherever the tail starts, the compaction's times make Crush's
        /// loader (the replay) send the summary and exactly the planned tail; the summarized
        /// messages keep their order among themselves; restore gives every cell back.
        #[test]
        fn any_whole_second_layout_loads_as_summary_and_tail(
            steps in prop::collection::vec(0i64..3, 4..14),
            keep_from in 1usize..13,
            shuffled in any::<bool>(),
        ) {
            let (cr, c) = Cr::new(NEWEST_MAIN);
            c.execute(
                "INSERT INTO sessions (id, title, updated_at, created_at) VALUES ('s1', 't', 1, 1)",
                [],
            )
            .unwrap();
            let mut t = 1_780_000_000;
            let mut rows: Vec<(String, i64)> = Vec::new();
            for (i, step) in steps.iter().enumerate() {
                t += step;
                rows.push((format!("m{i:02}"), t));
            }
            // Insert in reverse when `shuffled`: rowid order then differs from time order.
            let mut order: Vec<usize> = (0..rows.len()).collect();
            if shuffled {
                order.reverse();
            }
            for i in order {
                let (id, at) = &rows[i];
                c.execute(
                    "INSERT INTO messages (id, session_id, role, parts, created_at, updated_at) VALUES (?1, 's1', 'user', ?2, ?3, ?3)",
                    params![id, parts(&[text(&format!("message {i}"))]), at],
                )
                .unwrap();
            }
            drop(c);
            let before = agent_cells(&cr.conn());
            let loaded: Vec<String> = replay(&cr.conn(), "s1").unwrap().into_iter().map(|m| m.id).collect();
            let keep = loaded.len() - keep_from.min(loaded.len() - 1);
            use agent_db::store::{Access, Store, Written};
            let store = Store::open(&cr.db, Access::Read).unwrap();
            let row = store.load("s1").unwrap();
            let proposal = row.propose(neutral(&row.raw_messages, keep), audit("s1"), None);
            drop(store);
            let mut writer = Store::open(&cr.db, Access::Write).unwrap();
            let w = writer.commit(&proposal, "2026-11-01T12:00:02Z").unwrap();
            prop_assert!(matches!(w, Written::Committed { .. }), "{:?}", w);
            let c = cr.conn();
            let cut = loaded.len() - keep;
            prop_assert_eq!(check_compacted(&c, "s1", &loaded[cut..], &loaded[..cut]), Ok(()));
            // The summarized messages, in Crush's order now, are in the order they had.
            let mut st = c
                .prepare("SELECT id FROM messages WHERE session_id = 's1' AND is_summary_message = 0 ORDER BY created_at ASC")
                .unwrap();
            let now: Vec<String> = st.query_map([], |r| r.get(0)).unwrap().map(|r| r.unwrap()).collect();
            prop_assert_eq!(&now, &loaded);
            drop(st);
            drop(c);
            let Written::Committed { compaction_id } = w else { unreachable!() };
            let restored =
                agent_db::archive::restore::restore(&mut writer, compaction_id, false, "2026-11-01T12:00:03Z").unwrap();
            prop_assert!(restored.ok, "{:?}", restored);
            prop_assert_eq!(agent_cells(&cr.conn()), before);
        }
    }
}

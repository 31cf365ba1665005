//! docker-agent (cagent) `session.db`: the real end-to-end database docker-agent ships (read from
//! `../shared/fixtures/`; skipped when absent, a failure when `CI` is set) and generated stores
//! of both generations. Every check runs the real binary on a copy; the history docker-agent
//! would send after a compaction is rebuilt here independently of the library (stores.md §2.6).

use std::collections::BTreeMap;
use std::path::PathBuf;

use agent_db_synth::docker_agent::{generate_docker_agent, Generation};
use agent_db_synth::SynthOptions;
use rusqlite::Connection;
use serde_json::Value;
use tempfile::TempDir;

use crate::common::{bare_cmd, dump, files_hash, ids_with_status, json, shared_fixture};

const E2E_SESSION: &str = "87ff468b-ffa0-4785-9649-7c9d3ff94482";

/// A docker-agent store in a temp dir (HOME is the temp dir too).
struct Da {
    dir: TempDir,
    db: PathBuf,
}

impl Da {
    fn cmd(&self) -> assert_cmd::Command {
        let mut c = bare_cmd(self.dir.path());
        c.arg("--db").arg(&self.db);
        c
    }

    fn conn(&self) -> Connection {
        Connection::open(&self.db).expect("open")
    }

    fn dump(&self, table: &str) -> Vec<Vec<String>> {
        dump(&self.conn(), table)
    }

    fn query(&self, sql: &str) -> Vec<Vec<String>> {
        let c = self.conn();
        let mut s = c.prepare(sql).expect("prepare");
        let n = s.column_count();
        let rows = s
            .query_map([], |r| {
                (0..n)
                    .map(|i| {
                        let v: rusqlite::types::Value = r.get(i)?;
                        Ok(match v {
                            rusqlite::types::Value::Text(t) => t,
                            rusqlite::types::Value::Null => "NULL".into(),
                            rusqlite::types::Value::Integer(i) => i.to_string(),
                            rusqlite::types::Value::Real(f) => f.to_string(),
                            rusqlite::types::Value::Blob(b) => format!("{b:?}"),
                        })
                    })
                    .collect::<rusqlite::Result<Vec<_>>>()
            })
            .expect("query");
        rows.map(|r| r.expect("row")).collect()
    }

    fn one(&self, sql: &str) -> String {
        self.query(sql)[0][0].clone()
    }
}

/// The real docker-agent database, copied; `None` (with a message) when the shared fixtures are
/// not present (a fresh clone of this repository alone). Under `CI` a missing file fails the
/// test instead, and `AGENT_DB_SHARED_DIR` points elsewhere than `../shared` (see
/// [`shared_fixture`]).
fn e2e() -> Option<Da> {
    let src = shared_fixture("fixtures/docker-agent-e2e-session.db")?;
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("session.db");
    std::fs::copy(&src, &db).expect("copy fixture");
    let mut perm = std::fs::metadata(&db).unwrap().permissions();
    #[allow(clippy::permissions_set_readonly_false)]
    perm.set_readonly(false);
    std::fs::set_permissions(&db, perm).unwrap();
    Some(Da { dir, db })
}

fn generated(generation: Generation, n: usize, seed: u64) -> Da {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("session.db");
    let opts = SynthOptions {
        conversations: n,
        seed,
        ..SynthOptions::default()
    };
    generate_docker_agent(&db, &opts, generation).expect("generate");
    Da { dir, db }
}

/// What docker-agent sends for a session, rebuilt from the rows as `loadSessionItems` and
/// `GetMessages` do: (the `Session Summary: ` message, the conversation messages' JSON).
fn docker_agent_view(da: &Da, session: &str) -> (Option<String>, Vec<String>) {
    let c = da.conn();
    let has_fke = c
        .prepare("SELECT 1 FROM pragma_table_info('session_items') WHERE name = 'first_kept_entry'")
        .unwrap()
        .exists([])
        .unwrap();
    let fke = if has_fke {
        "COALESCE(first_kept_entry, 0)"
    } else {
        "0"
    };
    let mut s = c
        .prepare(&format!(
            "SELECT item_type, message_json, summary_text, {fke},
               subsession_id IS NOT NULL AND EXISTS (SELECT 1 FROM sessions x WHERE x.id = subsession_id)
             FROM session_items WHERE session_id = ?1 ORDER BY position, id"
        ))
        .unwrap();
    // (kind, json, summary, first_kept_entry)
    let mut slice: Vec<(String, Option<String>, Option<String>, i64)> = Vec::new();
    let rows = s
        .query_map([session], |r| {
            Ok((
                r.get::<_, String>(0)?,
                r.get::<_, Option<String>>(1)?,
                r.get::<_, Option<String>>(2)?,
                r.get::<_, i64>(3)?,
                r.get::<_, bool>(4)?,
            ))
        })
        .unwrap();
    for r in rows {
        let (kind, json, summary, f, sub_ok) = r.unwrap();
        match kind.as_str() {
            "subsession" if !sub_ok => {}
            "message" | "summary" | "subsession" | "error" | "termination" => {
                slice.push((kind, json, summary, f))
            }
            _ => {}
        }
    }
    let last = slice
        .iter()
        .rposition(|(k, _, s, _)| k == "summary" && s.as_deref().is_some_and(|t| !t.is_empty()));
    let mut start = 0;
    let mut summary = None;
    if let Some(l) = last {
        summary = Some(format!("Session Summary: {}", slice[l].2.clone().unwrap()));
        start = l + 1;
        let f = slice[l].3;
        if has_fke && f > 0 && (f as usize) < l {
            start = f as usize;
        }
    }
    let msgs = slice[start..]
        .iter()
        .filter(|(k, ..)| k == "message")
        .map(|(_, j, ..)| j.clone().unwrap())
        .collect();
    (summary, msgs)
}

/// Rows of `session_items` by id, as text.
fn items_by_id(da: &Da) -> BTreeMap<i64, Vec<String>> {
    da.dump("session_items")
        .into_iter()
        .map(|r| {
            (
                r[0].trim_start_matches("Integer(")
                    .trim_end_matches(')')
                    .parse()
                    .unwrap(),
                r,
            )
        })
        .collect()
}

fn compact(da: &Da, args: &[&str]) -> Value {
    let mut c = da.cmd();
    c.args(["compact", "--idle", "0", "--yes", "--json"])
        .args(args);
    let (doc, code) = json(c);
    assert_eq!(code, 0, "{doc:#}");
    doc
}

fn row<'a>(doc: &'a Value, id: &str) -> &'a Value {
    doc["conversations"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["id"] == id)
        .unwrap_or_else(|| panic!("no row for {id}: {doc:#}"))
}

fn restore(da: &Da, id: &str) {
    let out = da.cmd().args(["restore", id]).output().unwrap();
    assert!(
        out.status.success(),
        "restore: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn check_integrity(da: &Da) {
    assert_eq!(da.one("PRAGMA integrity_check"), "ok");
    assert_eq!(da.one("PRAGMA journal_mode"), "wal");
}

/// Tables a restore must give back exactly.
const AGENT_TABLES: &[&str] = &["sessions", "session_items", "migrations"];

/// The agent's tables, for equality. (`sqlite_sequence` keeps the high-water mark of a restored
/// summary item's id, as SQLite's AUTOINCREMENT promises; it is not part of the pre-image.)
fn snapshot(da: &Da) -> Vec<Vec<Vec<String>>> {
    AGENT_TABLES.iter().map(|t| da.dump(t)).collect()
}

// ---- the real database ----------------------------------------------------------------------

#[test]
fn e2e_list_show_and_dry_run_leave_the_file_alone() {
    let Some(da) = e2e() else { return };
    let before = files_hash(&da.db);
    let (doc, code) = json({
        let mut c = da.cmd();
        c.args(["list", "--json"]);
        c
    });
    assert_eq!(code, 0);
    assert_eq!(doc["store"]["kind"], "docker-agent");
    let rows = doc["conversations"].as_array().unwrap();
    assert_eq!(rows.len(), 1, "{doc:#}");
    let r = &rows[0];
    assert_eq!(r["id"], E2E_SESSION);
    assert_eq!(r["name"], "cagent API sessions endpoint error");
    assert_eq!(r["provider"], "docker-agent");
    assert_eq!(r["format"], "docker-agent");
    assert_eq!(r["model"], "claude-opus-4-5-20251101");
    assert_eq!(r["messages"], 39);
    assert_eq!(r["context_tokens"], 72007 + 96);
    assert_eq!(r["max_context_tokens"], 200_000);
    assert_eq!(r["updated_at"], "2026-02-03T10:29:01+01:00");

    let (doc, code) = json({
        let mut c = da.cmd();
        c.args(["show", E2E_SESSION, "--json"]);
        c
    });
    assert_eq!(code, 0);
    assert_eq!(doc["messages"].as_array().unwrap().len(), 39);
    assert_eq!(doc["format"], "docker-agent");

    let doc = compact(
        &da,
        &["--dry-run", "--id", E2E_SESSION, "--keep-tokens", "500"],
    );
    assert_eq!(row(&doc, E2E_SESSION)["status"], "planned", "{doc:#}");
    // `--all-over` uses (input + output) / the model's limit: 72,103 / 200,000.
    let (doc, _) = json({
        let mut c = da.cmd();
        c.args(["list", "--all-over", "0.3", "--idle", "0", "--json"]);
        c
    });
    assert_eq!(ids_with_status(&doc, "selected"), vec![E2E_SESSION]);
    let (doc, _) = json({
        let mut c = da.cmd();
        c.args(["list", "--all-over", "0.4", "--idle", "0", "--json"]);
        c
    });
    assert!(ids_with_status(&doc, "selected").is_empty(), "{doc:#}");
    assert_eq!(files_hash(&da.db), before, "read commands changed the file");
}

#[test]
fn e2e_compact_appends_one_summary_and_restore_undoes_it() {
    let Some(da) = e2e() else { return };
    let before = snapshot(&da);
    let items_before = items_by_id(&da);
    let legacy_before = da.one(&format!(
        "SELECT messages FROM sessions WHERE id = '{E2E_SESSION}'"
    ));

    // docker-agent's stored context: the last request's input plus output tokens, which count
    // the tool definitions agent-db's message count leaves out (the fixed overhead).
    let stored_before: i64 = da
        .one(&format!(
            "SELECT input_tokens + output_tokens FROM sessions WHERE id = '{E2E_SESSION}'"
        ))
        .parse()
        .unwrap();
    let doc = compact(&da, &["--id", E2E_SESSION, "--keep-tokens", "500"]);
    let r = row(&doc, E2E_SESSION);
    assert_eq!(r["status"], "compacted", "{doc:#}");
    let overhead = (stored_before - r["tokens_before"].as_i64().unwrap()).max(0);
    assert!(
        overhead > 0,
        "the real session's tool definitions are overhead"
    );
    // The new stored context: the new history plus that overhead.
    let tokens_after = r["tokens_after"].as_i64().unwrap() + overhead;

    // Exactly one new row; no existing row changed a byte; migrations untouched.
    let items_after = items_by_id(&da);
    assert_eq!(items_after.len(), items_before.len() + 1);
    for (id, row) in &items_before {
        assert_eq!(items_after.get(id), Some(row), "item {id} changed");
    }
    assert_eq!(da.dump("migrations"), before[2]);
    check_integrity(&da);
    let (new_id, new_row) = items_after.iter().next_back().unwrap();
    assert_eq!(*new_id, 40);
    assert!(new_row[3].contains("summary"), "{new_row:?}");
    assert_eq!(
        da.one("SELECT position FROM session_items WHERE id = 40"),
        "39",
        "appended at MAX(position) + 1"
    );
    assert_eq!(
        da.query(&format!(
            "SELECT input_tokens, output_tokens FROM sessions WHERE id = '{E2E_SESSION}'"
        )),
        vec![vec![tokens_after.to_string(), "0".to_string()]]
    );

    // docker-agent (migrations 1-15: no first_kept_entry) now sends the summary and nothing else;
    // the latest instruction is carried inside the summary.
    let (summary, tail) = docker_agent_view(&da, E2E_SESSION);
    let summary = summary.expect("a summary");
    assert!(
        summary.starts_with("Session Summary: This session continues an earlier conversation."),
        "{summary}"
    );
    assert!(!summary.contains("[agent-db compaction summary]"));
    assert!(summary.contains(
        "The user's latest instruction, verbatim:\n\nWhen calling /api/sessions on cagent api"
    ));
    assert!(tail.is_empty(), "no tail can be kept on this generation");

    // The legacy messages column got exactly one element appended; every old byte kept.
    let legacy_after = da.one(&format!(
        "SELECT messages FROM sessions WHERE id = '{E2E_SESSION}'"
    ));
    let old_body = &legacy_before[..legacy_before.len() - 1];
    assert!(legacy_after.starts_with(old_body));
    let v: Vec<Value> = serde_json::from_str(&legacy_after).unwrap();
    assert_eq!(v.len(), 40);
    assert_eq!(
        v[39]["summary"].as_str().unwrap(),
        summary.strip_prefix("Session Summary: ").unwrap()
    );

    // agent-db now lists the session with the new context and shows only the summary.
    let (doc, _) = json({
        let mut c = da.cmd();
        c.args(["list", "--json"]);
        c
    });
    assert_eq!(doc["conversations"][0]["context_tokens"], tokens_after);
    let (doc, _) = json({
        let mut c = da.cmd();
        c.args(["show", E2E_SESSION, "--json"]);
        c
    });
    assert_eq!(doc["messages"].as_array().unwrap().len(), 1);

    // The audit says what happened on this generation.
    let details: Value =
        serde_json::from_str(&da.one("SELECT details FROM agent_db_compactions WHERE id = 1"))
            .unwrap();
    assert_eq!(details["docker_agent"]["max_migration"], 15);
    assert!(details["docker_agent"]["kept_tail"]
        .as_str()
        .unwrap()
        .starts_with("none"));
    assert_eq!(
        details["docker_agent"]["legacy_messages"],
        "summary element appended"
    );

    restore(&da, E2E_SESSION);
    assert_eq!(snapshot(&da), before, "restore gives every row back");
    check_integrity(&da);
}

#[test]
fn e2e_newer_generation_is_refused_untouched() {
    let Some(da) = e2e() else { return };
    da.conn()
        .execute(
            "INSERT INTO migrations (id, name, description, applied_at) VALUES (30, '030_future', 'x', '2027-01-01T00:00:00Z')",
            [],
        )
        .unwrap();
    let before = files_hash(&da.db);
    for args in [
        &["list"][..],
        &["compact", "--id", E2E_SESSION, "--idle", "0", "--yes"],
    ] {
        let out = da.cmd().args(args).output().unwrap();
        assert_eq!(out.status.code(), Some(4), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("migration 30")
                && err.contains("029_add_root_kind_to_generated_media_manifest"),
            "{err}"
        );
    }
    assert_eq!(files_hash(&da.db), before);
}

// ---- generated stores -----------------------------------------------------------------------

/// Root sessions with at least `min` message items, most messages first.
fn big_sessions(da: &Da, min: usize) -> Vec<String> {
    da.query(&format!(
        "SELECT s.id FROM sessions s WHERE s.parent_id IS NULL
           AND (SELECT COUNT(*) FROM session_items i WHERE i.session_id = s.id AND i.item_type = 'message') >= {min}
         ORDER BY (SELECT COUNT(*) FROM session_items i WHERE i.session_id = s.id) DESC, s.id"
    ))
    .into_iter()
    .map(|r| r[0].clone())
    .collect()
}

#[test]
fn generated_generations_have_their_schema() {
    let legacy = generated(Generation::Legacy, 8, 3);
    let modern = generated(Generation::Modern, 8, 3);
    let s = agent_db::store::docker_agent::check_schema(&legacy.conn(), &legacy.db).unwrap();
    assert_eq!(s.max_migration, 19);
    assert!(s.legacy_messages && !s.first_kept_entry && !s.item_cost && !s.item_model);
    let s = agent_db::store::docker_agent::check_schema(&modern.conn(), &modern.db).unwrap();
    assert_eq!(s.max_migration, 29);
    assert!(!s.legacy_messages && s.first_kept_entry && s.item_cost && s.item_model);
    for da in [&legacy, &modern] {
        check_integrity(da);
        // Sub-sessions, summaries, tool results with errors and an empty session are all there.
        assert!(da.one("SELECT COUNT(*) FROM sessions WHERE parent_id IS NOT NULL") != "0");
        assert!(da.one("SELECT COUNT(*) FROM session_items WHERE item_type = 'subsession'") != "0");
        assert!(da.one("SELECT COUNT(*) FROM session_items WHERE item_type = 'summary'") != "0");
        assert!(
            da.one(
                "SELECT COUNT(*) FROM session_items WHERE message_json LIKE '%\"is_error\":true%'"
            ) != "0"
        );
        assert!(
            da.one("SELECT COUNT(*) FROM sessions s WHERE NOT EXISTS (SELECT 1 FROM session_items i WHERE i.session_id = s.id)")
                != "0"
        );
    }
    // Legacy files keep sessions.messages in sync with the items.
    for r in legacy.query(
        "SELECT messages, (SELECT COUNT(*) FROM session_items i WHERE i.session_id = s.id) FROM sessions s WHERE messages IS NOT NULL",
    ) {
        let v: Vec<Value> = serde_json::from_str(&r[0]).unwrap();
        assert_eq!(v.len().to_string(), r[1]);
    }
    // The generator is deterministic.
    let again = generated(Generation::Modern, 8, 3);
    assert_eq!(again.dump("session_items"), modern.dump("session_items"));
    assert_eq!(again.dump("sessions"), modern.dump("sessions"));
    // Sub-sessions are not listed.
    let (doc, _) = json({
        let mut c = modern.cmd();
        c.args(["list", "--json"]);
        c
    });
    let listed = doc["conversations"].as_array().unwrap().len();
    assert_eq!(
        listed.to_string(),
        modern.one("SELECT COUNT(*) FROM sessions WHERE parent_id IS NULL")
    );
}

#[test]
fn generated_legacy_compaction_and_restore() {
    let da = generated(Generation::Legacy, 10, 21);
    let before = snapshot(&da);
    let items_before = items_by_id(&da);
    let targets = big_sessions(&da, 12);
    assert!(targets.len() >= 3, "{targets:?}");
    let mut args = vec!["--keep-tokens", "2000"];
    for t in &targets {
        args.push("--id");
        args.push(t);
    }
    let doc = compact(&da, &args);
    let targets = ids_with_status(&doc, "compacted");
    assert!(targets.len() >= 3, "{doc:#}");
    let items_after = items_by_id(&da);
    assert_eq!(items_after.len(), items_before.len() + targets.len());
    for (id, row) in &items_before {
        assert_eq!(items_after.get(id), Some(row), "item {id} changed");
    }
    check_integrity(&da);
    for t in &targets {
        // No tail on this generation: the summary covers everything.
        let (summary, tail) = docker_agent_view(&da, t);
        assert!(summary
            .unwrap()
            .starts_with("Session Summary: This session continues"));
        assert!(tail.is_empty());
        assert_eq!(
            row(&doc, t)["messages_after"],
            2,
            "summary + latest instruction"
        );
        // sessions.messages still matches the items.
        let v: Vec<Value> = serde_json::from_str(
            &da.one(&format!("SELECT messages FROM sessions WHERE id = '{t}'")),
        )
        .unwrap();
        assert_eq!(
            v.len().to_string(),
            da.one(&format!(
                "SELECT COUNT(*) FROM session_items WHERE session_id = '{t}'"
            ))
        );
        assert!(v.last().unwrap()["summary"].is_string());
    }
    // A session that already had a docker-agent summary carries it forward.
    let mut carried = 0;
    for t in &targets {
        let had = items_before
            .values()
            .any(|r| r[1].contains(t.as_str()) && r[3].contains("summary"));
        if had {
            let (summary, _) = docker_agent_view(&da, t);
            assert!(
                summary.unwrap().contains("Done so far"),
                "prior summary carried forward"
            );
            carried += 1;
        }
    }
    assert!(
        carried > 0,
        "a session with an earlier summary was compacted"
    );
    // Each compaction restores on its own, in any order.
    for t in &targets {
        restore(&da, t);
    }
    assert_eq!(snapshot(&da), before);
    check_integrity(&da);
}

#[test]
fn generated_modern_compaction_keeps_a_tail_and_restores() {
    let da = generated(Generation::Modern, 10, 5);
    let before = snapshot(&da);
    let items_before = items_by_id(&da);
    let targets = big_sessions(&da, 14);
    assert!(targets.len() >= 3, "{targets:?}");
    let planned: BTreeMap<String, (Option<String>, Vec<String>)> = targets
        .iter()
        .map(|t| (t.clone(), docker_agent_view(&da, t)))
        .collect();
    let mut args = vec!["--keep-tokens", "1500"];
    for t in &targets {
        args.push("--id");
        args.push(t);
    }
    let doc = compact(&da, &args);
    let targets = ids_with_status(&doc, "compacted");
    assert!(targets.len() >= 3, "{doc:#}");
    let items_after = items_by_id(&da);
    assert_eq!(items_after.len(), items_before.len() + targets.len());
    for (id, row) in &items_before {
        assert_eq!(items_after.get(id), Some(row), "item {id} changed");
    }
    check_integrity(&da);
    let mut kept_some = 0;
    for t in &targets {
        let r = row(&doc, t);
        let kept = r["messages_kept"].as_u64().unwrap() as usize;
        let (summary, tail) = docker_agent_view(&da, t);
        let summary = summary.unwrap();
        assert!(
            summary.starts_with("Session Summary: This session continues"),
            "{summary}"
        );
        // docker-agent sends exactly the planned tail: the last messages of the old view, bytes
        // kept. `messages_kept` counts the latest instruction when the split put it back, and
        // that instruction then travels inside the summary.
        let old = &planned[t].1;
        let tail_len = tail.len();
        assert!(
            tail_len == kept || tail_len + 1 == kept,
            "{tail_len} vs {r:#}"
        );
        let reinserted = kept - tail_len;
        assert_eq!(&tail[..], &old[old.len() - tail_len..]);
        if tail_len > 0 {
            kept_some += 1;
            let fke: i64 = da
                .one(&format!(
                    "SELECT first_kept_entry FROM session_items WHERE session_id = '{t}' AND item_type = 'summary' ORDER BY position DESC LIMIT 1"
                ))
                .parse()
                .unwrap();
            assert!(fke > 0);
        }
        if reinserted > 0 {
            assert!(summary.contains("The user's latest instruction, verbatim:"));
        }
        let new = da.query(&format!(
            "SELECT cost, model, usage_json, agent_name, message_json FROM session_items WHERE session_id = '{t}' ORDER BY position DESC LIMIT 1"
        ));
        assert_eq!(
            new[0],
            vec![
                "0".to_string(),
                "agent-db".into(),
                "".into(),
                "NULL".into(),
                "NULL".into()
            ]
        );
        assert_eq!(
            da.one(&format!(
                "SELECT output_tokens FROM sessions WHERE id = '{t}'"
            )),
            "0"
        );
    }
    assert!(kept_some >= 2, "tails were kept");
    // A second compaction stacks on the first (its summary is carried forward).
    let t = &targets[0];
    let doc2 = compact(&da, &["--id", t, "--keep-tokens", "200"]);
    let status = row(&doc2, t)["status"].as_str().unwrap().to_string();
    assert!(status == "compacted" || status == "skipped", "{doc2:#}");
    if status == "compacted" {
        restore(&da, t);
    }
    for t in &targets {
        restore(&da, t);
    }
    assert_eq!(snapshot(&da), before);
    check_integrity(&da);
}

#[test]
fn generated_store_under_all_over() {
    let da = generated(Generation::Modern, 12, 9);
    let (doc, code) = json({
        let mut c = da.cmd();
        c.args(["list", "--all-over", "0.0", "--idle", "0", "--json"]);
        c
    });
    assert_eq!(code, 0);
    let rows = doc["conversations"].as_array().unwrap();
    let unknown: Vec<&Value> = rows
        .iter()
        .filter(|r| r["model"] == "qwen3-coder:30b" || r["model"] == "llama3.1:70b")
        .collect();
    assert!(!unknown.is_empty(), "{doc:#}");
    for r in &unknown {
        assert_eq!(r["status"], "skipped");
        assert!(
            r["detail"].as_str().unwrap().contains("--context-limit"),
            "{r:#}"
        );
    }
    for r in rows.iter().filter(|r| r["status"] == "selected") {
        let u = r["utilization"].as_f64().unwrap();
        let want =
            r["context_tokens"].as_f64().unwrap() / r["max_context_tokens"].as_f64().unwrap();
        assert!((u - want).abs() < 1e-3);
    }
    // With --context-limit the unknown models are judged too.
    let (doc, _) = json({
        let mut c = da.cmd();
        c.args([
            "list",
            "--all-over",
            "0.0",
            "--idle",
            "0",
            "--context-limit",
            "32768",
            "--json",
        ]);
        c
    });
    for r in doc["conversations"].as_array().unwrap() {
        if r["model"] == "qwen3-coder:30b" || r["model"] == "llama3.1:70b" {
            assert_eq!(r["status"], "selected", "{r:#}");
        }
    }
    // A batch compaction over the threshold works on the generated store and is undoable.
    let before = snapshot(&da);
    let (doc, code) = json({
        let mut c = da.cmd();
        c.args([
            "compact",
            "--all-over",
            "0.5",
            "--idle",
            "0",
            "--keep-tokens",
            "3000",
            "--yes",
            "--json",
        ]);
        c
    });
    assert_eq!(code, 0, "{doc:#}");
    assert!(!ids_with_status(&doc, "compacted").is_empty(), "{doc:#}");
    let out = da
        .cmd()
        .args(["restore", "--all-since", "1000d"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(snapshot(&da), before);
    // The session active a few minutes ago is left alone by the default idle window.
    let (doc, _) = json({
        let mut c = da.cmd();
        c.args([
            "list",
            "--all-over",
            "0.0",
            "--context-limit",
            "32768",
            "--json",
        ]);
        c
    });
    assert!(
        doc["conversations"]
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r["detail"]
                .as_str()
                .is_some_and(|d| d.starts_with("active"))),
        "{doc:#}"
    );
}

#[test]
fn sub_session_ids_are_refused_by_name() {
    let da = generated(Generation::Modern, 8, 4);
    let sub = da.query("SELECT id, parent_id FROM sessions WHERE parent_id IS NOT NULL LIMIT 1");
    let (sub, parent) = (&sub[0][0], &sub[0][1]);
    let before = files_hash(&da.db);
    let out = da.cmd().args(["show", sub]).output().unwrap();
    assert_eq!(out.status.code(), Some(5));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(sub.as_str())
            && err.contains(&format!("is a sub-session of {parent}; compact its parent")),
        "{err}"
    );
    let (doc, code) = json({
        let mut c = da.cmd();
        c.args(["compact", "--id", sub, "--idle", "0", "--yes", "--json"]);
        c
    });
    assert_eq!(code, 1);
    let r = row(&doc, sub);
    assert_eq!(r["status"], "failed");
    assert!(
        r["detail"]
            .as_str()
            .unwrap()
            .contains("is a sub-session of"),
        "{r:#}"
    );
    assert_eq!(files_hash(&da.db), before);
}

#[test]
fn newer_generated_generation_is_refused() {
    let da = generated(Generation::Modern, 3, 2);
    da.conn()
        .execute(
            "INSERT INTO migrations (id, name, description, applied_at) VALUES (30, '030_something_new', 'x', '2027-01-01T00:00:00Z')",
            [],
        )
        .unwrap();
    let before = files_hash(&da.db);
    let out = da.cmd().arg("list").output().unwrap();
    assert_eq!(out.status.code(), Some(4));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("030_something_new") && err.contains("newest it knows is 29"),
        "{err}"
    );
    assert_eq!(files_hash(&da.db), before);
}

#[test]
fn default_location_and_ambiguity() {
    let home = tempfile::tempdir().unwrap();
    let cagent = home.path().join(".cagent");
    std::fs::create_dir_all(&cagent).unwrap();
    let opts = SynthOptions {
        conversations: 3,
        ..SynthOptions::default()
    };
    generate_docker_agent(&cagent.join("session.db"), &opts, Generation::Modern).unwrap();
    let out = bare_cmd(home.path())
        .args(["list", "--json"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["store"]["kind"], "docker-agent");

    let kodelet = home.path().join(".kodelet");
    std::fs::create_dir_all(&kodelet).unwrap();
    drop(agent_db::store::kodelet::init_store(&kodelet.join("storage.db")).unwrap());
    let out = bare_cmd(home.path()).arg("list").output().unwrap();
    assert_eq!(out.status.code(), Some(4));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--db")
            && err.contains(".kodelet/storage.db")
            && err.contains(".cagent/session.db"),
        "{err}"
    );
}

#[test]
fn a_live_append_changes_the_version() {
    let da = generated(Generation::Modern, 4, 8);
    let id = big_sessions(&da, 4).remove(0);
    let c = da.conn();
    let v1 = agent_db::store::docker_agent::load(&c, &da.db, &id)
        .unwrap()
        .version;
    c.execute(
        "INSERT INTO session_items (session_id, position, item_type, agent_name, message_json)
         VALUES (?1, (SELECT MAX(position) + 1 FROM session_items WHERE session_id = ?1), 'message', '', '{\"role\":\"user\",\"content\":\"more\"}')",
        [&id],
    )
    .unwrap();
    let v2 = agent_db::store::docker_agent::load(&c, &da.db, &id)
        .unwrap()
        .version;
    assert_ne!(v1, v2);
    // An in-place streaming update of the last message changes it too.
    c.execute(
        "UPDATE session_items SET message_json = '{\"role\":\"user\",\"content\":\"more!\"}' WHERE id = (SELECT MAX(id) FROM session_items)",
        [],
    )
    .unwrap();
    let v3 = agent_db::store::docker_agent::load(&c, &da.db, &id)
        .unwrap()
        .version;
    assert_ne!(v2, v3);
}

#[test]
fn config_context_limits_give_unknown_models_a_window() {
    let da = generated(Generation::Modern, 12, 9);
    let cfg = da.dir.path().join(".config/agent-db");
    std::fs::create_dir_all(&cfg).unwrap();
    std::fs::write(
        cfg.join("config.toml"),
        "[context_limits]\n\"qwen3-coder\" = 262144\n\"llama3.1\" = 131072\n",
    )
    .unwrap();
    let (doc, code) = json({
        let mut c = da.cmd();
        c.args(["list", "--json"]);
        c
    });
    assert_eq!(code, 0);
    let mut seen = 0;
    for r in doc["conversations"].as_array().unwrap() {
        let want = match r["model"].as_str() {
            Some("qwen3-coder:30b") => 262_144,
            Some("llama3.1:70b") => 131_072,
            _ => continue,
        };
        assert_eq!(r["max_context_tokens"], want, "{r:#}");
        seen += 1;
    }
    assert!(seen > 0, "{doc:#}");
}

/// With `--all-over`, the kept sessions are read in the table's order and sorted in memory
/// (issue 11); the listing order must still be docker-agent's: newest `created_at` first as
/// SQLite orders values (NULL last, numbers before text), ties in rowid order. The oracle is
/// the test's own `ORDER BY`, restricted to the ids the selection reports.
#[test]
fn prefiltered_listing_keeps_docker_agents_order() {
    let da = generated(Generation::Modern, 40, 21);
    let c = da.conn();
    let roots: Vec<String> = da
        .query("SELECT id FROM sessions WHERE parent_id IS NULL OR parent_id = '' ORDER BY rowid")
        .into_iter()
        .map(|r| r[0].clone())
        .collect();
    // Ties, a numeric created_at and a NULL one.
    let tie = da.one(&format!(
        "SELECT created_at FROM sessions WHERE id = '{}'",
        roots[3]
    ));
    for id in [&roots[1], &roots[7], &roots[12]] {
        c.execute(
            "UPDATE sessions SET created_at = ?1 WHERE id = ?2",
            [&tie, id],
        )
        .unwrap();
    }
    c.execute(
        "UPDATE sessions SET created_at = 1761998400 WHERE id = ?1",
        [&roots[5]],
    )
    .unwrap();
    c.execute(
        "UPDATE sessions SET created_at = NULL WHERE id = ?1",
        [&roots[9]],
    )
    .unwrap();
    drop(c);
    let mut cmd = da.cmd();
    cmd.args(["list", "--all-over", "0", "--idle", "0", "--json"]);
    let (doc, code) = json(cmd);
    assert_eq!(code, 0, "{doc}");
    let got: Vec<String> = doc["conversations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["id"].as_str().unwrap().to_string())
        .collect();
    assert!(got.len() > 10, "most sessions are reported: {}", got.len());
    let want: Vec<String> = da
        .query(
            "SELECT id FROM sessions WHERE parent_id IS NULL OR parent_id = ''
             ORDER BY created_at DESC, rowid",
        )
        .into_iter()
        .map(|r| r[0].clone())
        .filter(|id| got.contains(id))
        .collect();
    assert_eq!(got, want);
    for id in [&roots[1], &roots[5], &roots[9]] {
        assert!(got.contains(id), "{id} reported");
    }
}

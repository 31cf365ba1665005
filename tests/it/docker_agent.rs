//! docker-agent (cagent) `session.db`: the real end-to-end database docker-agent ships (read from
//! the shared fixtures, [`shared_fixture`]; skipped when absent, a failure when `CI` is set) and
//! generated stores of both generations. Every check runs the real binary on a copy; the history
//! docker-agent would send after a compaction is rebuilt here independently of the library
//! (docs/stores.md, docker-agent).

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use agent_db_synth::docker_agent::{generate_docker_agent, Generation};
use agent_db_synth::SynthOptions;
use rusqlite::{Connection, OptionalExtension};
use serde_json::Value;
use tempfile::TempDir;

use crate::common::{
    bare_cmd, counts_and_times_of, dump, files_hash, ids_agree, ids_with_status, json,
    shared_fixture,
};

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
                        use rusqlite::types::ValueRef;
                        Ok(match r.get_ref(i)? {
                            ValueRef::Text(t) => match std::str::from_utf8(t) {
                                Ok(t) => t.to_string(),
                                // Never a panic: text that is not UTF-8 shows its class and bytes.
                                Err(_) => crate::common::cell(ValueRef::Text(t)),
                            },
                            ValueRef::Null => "NULL".into(),
                            ValueRef::Integer(i) => i.to_string(),
                            ValueRef::Real(f) => f.to_string(),
                            ValueRef::Blob(b) => format!("{b:?}"),
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
/// test instead, and `AGENT_DB_SHARED_DIR` points elsewhere (see [`shared_fixture`]).
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

/// One item of docker-agent's slice: (kind, json, summary, first_kept_entry, held back).
type SliceItem = (String, Option<String>, Option<String>, i64, bool);

/// Whether `table` has `column`.
fn has_column(c: &Connection, table: &str, column: &str) -> bool {
    c.prepare(&format!(
        "SELECT 1 FROM pragma_table_info('{table}') WHERE name = '{column}'"
    ))
    .unwrap()
    .exists([])
    .unwrap()
}

/// What docker-agent sends for a session, rebuilt from the rows as `loadSessionItems` and
/// `getMessages` do: (the `Session Summary: ` message, the conversation messages' JSON). The
/// loader's rules, replayed: the last summary with text starts the history (from its
/// `first_kept_entry` when `0 < it < the summary's index`, else after it); pending input
/// (`actor_pending`) and `legacy_run` input (`actor_input_mode`) stay in the slice but are not
/// sent; each `instruction_context.updates` entry is sent as a user message
/// (`{"role":"user","content":…}`) just before the item at its position, the entries before the
/// start being passed over in stored order.
fn docker_agent_view(da: &Da, session: &str) -> (Option<String>, Vec<String>) {
    let c = da.conn();
    let has_fke = has_column(&c, "session_items", "first_kept_entry");
    let fke = if has_fke {
        "COALESCE(first_kept_entry, 0)"
    } else {
        "0"
    };
    let pending = if has_column(&c, "session_items", "actor_pending") {
        "actor_pending"
    } else {
        "0"
    };
    let mode = if has_column(&c, "session_items", "actor_input_mode") {
        "actor_input_mode"
    } else {
        "''"
    };
    let mut updates: Vec<(i64, String)> = Vec::new();
    if has_column(&c, "sessions", "instruction_context") {
        let ctx: Option<String> = c
            .query_row(
                "SELECT instruction_context FROM sessions WHERE id = ?1",
                [session],
                |r| r.get(0),
            )
            .unwrap();
        if let Some(ctx) = ctx.filter(|t| !t.is_empty()) {
            let v: Value = serde_json::from_str(&ctx).unwrap();
            for u in v["updates"].as_array().cloned().unwrap_or_default() {
                updates.push((
                    u["position"].as_i64().unwrap_or(0),
                    u["content"].as_str().unwrap_or("").to_string(),
                ));
            }
        }
    }
    let mut s = c
        .prepare(&format!(
            "SELECT item_type, message_json, summary_text, {fke},
               subsession_id IS NOT NULL AND EXISTS (SELECT 1 FROM sessions x WHERE x.id = subsession_id),
               {pending} <> 0 OR {mode} = 'legacy_run'
             FROM session_items WHERE session_id = ?1 ORDER BY position, id"
        ))
        .unwrap();
    let mut slice: Vec<SliceItem> = Vec::new();
    let rows = s
        .query_map([session], |r| {
            Ok((
                r.get::<_, String>(0)?,
                r.get::<_, Option<String>>(1)?,
                r.get::<_, Option<String>>(2)?,
                r.get::<_, i64>(3)?,
                r.get::<_, bool>(4)?,
                r.get::<_, bool>(5)?,
            ))
        })
        .unwrap();
    for r in rows {
        let (kind, json, summary, f, sub_ok, held) = r.unwrap();
        match kind.as_str() {
            "subsession" if !sub_ok => {}
            "message" | "summary" | "subsession" | "error" | "termination" => {
                slice.push((kind, json, summary, f, held))
            }
            _ => {}
        }
    }
    let last = slice
        .iter()
        .rposition(|(k, _, s, ..)| k == "summary" && s.as_deref().is_some_and(|t| !t.is_empty()));
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
    let mut msgs = Vec::new();
    let mut u = updates
        .iter()
        .take_while(|(p, _)| *p < start as i64)
        .count();
    for i in start..=slice.len() {
        while u < updates.len() && updates[u].0 == i as i64 {
            msgs.push(serde_json::json!({"role": "user", "content": updates[u].1}).to_string());
            u += 1;
        }
        if let Some((k, j, _, _, held)) = slice.get(i) {
            if k == "message" && !held {
                msgs.push(j.clone().unwrap());
            }
        }
    }
    (summary, msgs)
}

/// docker-agent's `sanitizeToolCalls` (`pkg/session/session.go`, krissetto/docker-agent
/// `05db569f`; CHANGELOG #3001, #3162), its dropping half: a tool result is sent only when the
/// assistant message before it (since the last user or assistant message) issued its call, and
/// only the first result for a call. (Its other half, a synthetic error result for a call left
/// unanswered, adds what no store holds and is not replayed.)
fn drop_unmatched_results(msgs: Vec<String>) -> Vec<String> {
    let mut out = Vec::new();
    let mut pending: BTreeSet<String> = BTreeSet::new();
    let mut answered: BTreeSet<String> = BTreeSet::new();
    for m in msgs {
        let v: Value = serde_json::from_str(&m).unwrap_or(Value::Null);
        match v["role"].as_str() {
            Some("tool") => {
                let id = v["tool_call_id"].as_str().unwrap_or("").to_string();
                if id.is_empty() || !pending.contains(&id) || !answered.insert(id) {
                    continue;
                }
            }
            Some("assistant") | Some("user") => {
                pending.clear();
                answered.clear();
                for c in v["tool_calls"].as_array().into_iter().flatten() {
                    if let Some(id) = c["id"].as_str().filter(|i| !i.is_empty()) {
                        pending.insert(id.to_string());
                    }
                }
            }
            _ => {}
        }
        out.push(m);
    }
    out
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

fn row(doc: &Value, id: &str) -> Value {
    crate::common::all_rows(doc)
        .into_iter()
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
    let rows = crate::common::all_rows(&doc);
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
    let mut c = da.cmd();
    c.args(["list", "--all-over", "0.3", "--idle", "0", "--ids"]);
    ids_agree(c, &doc);
    // With the idle window, which reads each kept session's latest item time.
    for args in [
        &["--all-over", "0"][..],
        &["--all-over", "0", "--idle", "1000000d"],
    ] {
        let (doc, _) = json({
            let mut c = da.cmd();
            c.arg("list").args(args).arg("--json");
            c
        });
        let mut c = da.cmd();
        c.arg("list").args(args).arg("--ids");
        ids_agree(c, &doc);
    }
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
            "INSERT INTO migrations (id, name, description, applied_at) VALUES (39, '039_future', 'x', '2027-01-01T00:00:00Z')",
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
            err.contains("migration 39")
                && err.contains("newest it knows is 38")
                && err.contains("038_child_report_outcome"),
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
    let s = agent_db::agents::docker_agent::check_schema(&legacy.conn(), &legacy.db).unwrap();
    assert_eq!(s.max_migration, 19);
    assert!(s.legacy_messages && !s.first_kept_entry && !s.item_cost && !s.item_model);
    let s = agent_db::agents::docker_agent::check_schema(&modern.conn(), &modern.db).unwrap();
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
    let listed = crate::common::all_rows(&doc).len();
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
        // The kept tail opens on no tool result whose call was summarized, and holds no
        // duplicate result: docker-agent's `sanitizeToolCalls` drops nothing of it.
        assert_eq!(drop_unmatched_results(tail.clone()), tail, "{t}");
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
    let rows = crate::common::all_rows(&doc);
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
    for r in crate::common::all_rows(&doc) {
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
        crate::common::all_rows(&doc).iter().any(|r| r["detail"]
            .as_str()
            .is_some_and(|d| d.starts_with("active"))),
        "{doc:#}"
    );
}

/// A sub-session is shown by its ID (marked as its parent's child, with the transcript
/// docker-agent keeps for it), its parent's transcript names it, and it is never compacted on
/// its own: named, it is skipped with the reason, nothing written.
#[test]
fn sub_sessions_are_shown_named_by_their_parent_and_never_compacted() {
    let da = generated(Generation::Modern, 8, 4);
    let sub = da.query(
        "SELECT x.id, x.parent_id FROM sessions x JOIN session_items i ON i.subsession_id = x.id
         WHERE x.parent_id IS NOT NULL AND x.parent_id <> '' AND i.session_id = x.parent_id LIMIT 1",
    );
    let (sub, parent) = (&sub[0][0], &sub[0][1]);
    let items = da.one(&format!(
        "SELECT COUNT(*) FROM session_items WHERE session_id = '{sub}' AND item_type = 'message'"
    ));
    let before = files_hash(&da.db);
    let out = da.cmd().args(["show", sub, "--no-pager"]).output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains(&format!("a child session of {parent}")),
        "{text}"
    );
    assert!(text.contains(&format!("{items} messages")), "{text}");
    let out = da
        .cmd()
        .args(["show", parent, "--no-pager"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("child sessions (agent-db show ID shows one): "),
        "{text}"
    );
    assert!(text.contains(sub.as_str()), "{text}");
    let (doc, code) = json({
        let mut c = da.cmd();
        c.args(["compact", "--id", sub, "--idle", "0", "--yes", "--json"]);
        c
    });
    assert_eq!(code, 0, "{doc:#}");
    let r = row(&doc, sub);
    assert_eq!(r["status"], "skipped", "{r:#}");
    assert!(
        r["detail"]
            .as_str()
            .unwrap()
            .contains(&format!("a docker-agent sub-session of {parent}")),
        "{r:#}"
    );
    assert_eq!(files_hash(&da.db), before);
}

#[test]
fn newer_generated_generation_is_refused() {
    let da = generated(Generation::Modern, 3, 2);
    da.conn()
        .execute(
            "INSERT INTO migrations (id, name, description, applied_at) VALUES (39, '039_something_new', 'x', '2027-01-01T00:00:00Z')",
            [],
        )
        .unwrap();
    let before = files_hash(&da.db);
    let out = da.cmd().arg("list").output().unwrap();
    assert_eq!(out.status.code(), Some(4));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("039_something_new") && err.contains("newest it knows is 38"),
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
    drop(agent_db_synth::kodelet_schema::create(&kodelet.join("storage.db")).unwrap());
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
    let v1 = agent_db::agents::docker_agent::load(&c, &da.db, &id)
        .unwrap()
        .version;
    c.execute(
        "INSERT INTO session_items (session_id, position, item_type, agent_name, message_json)
         VALUES (?1, (SELECT MAX(position) + 1 FROM session_items WHERE session_id = ?1), 'message', '', '{\"role\":\"user\",\"content\":\"more\"}')",
        [&id],
    )
    .unwrap();
    let v2 = agent_db::agents::docker_agent::load(&c, &da.db, &id)
        .unwrap()
        .version;
    assert_ne!(v1, v2);
    // An in-place streaming update of the last message changes it too.
    c.execute(
        "UPDATE session_items SET message_json = '{\"role\":\"user\",\"content\":\"more!\"}' WHERE id = (SELECT MAX(id) FROM session_items)",
        [],
    )
    .unwrap();
    let v3 = agent_db::agents::docker_agent::load(&c, &da.db, &id)
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
    for r in crate::common::all_rows(&doc) {
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
    let roots = roots(&da);
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
    let got: Vec<String> = crate::common::all_rows(&doc)
        .iter()
        .map(|r| r["id"].as_str().unwrap().to_string())
        .collect();
    assert!(got.len() > 10, "most sessions are reported: {}", got.len());
    let want: Vec<String> = da
        .query(
            "SELECT id FROM sessions WHERE parent_id IS NULL OR parent_id = ''
             ORDER BY julianday(created_at) DESC, rowid",
        )
        .into_iter()
        .map(|r| r[0].clone())
        .filter(|id| got.contains(id))
        .collect();
    let want = crate::common::in_list_json_order(&doc, want);
    assert_eq!(got, want);
    for id in [&roots[1], &roots[5], &roots[9]] {
        assert!(got.contains(id), "{id} reported");
    }
}

/// Regression: a kept session whose id, or whose latest assistant message's `position`, is
/// TEXT that is not UTF-8 stopped the listing with a panic (`rusqlite`'s `Value` from such a
/// cell); both are bound back as stored, and every listing path lists the other sessions.
#[test]
fn ids_and_positions_that_are_not_utf8_are_listed_not_panicked_on() {
    let da = generated(Generation::Modern, 24, 33);
    let c = da.conn();
    let roots = roots(&da);
    // Every message item of one root at a position that is not UTF-8 text.
    let odd_position = c
        .execute(
            "UPDATE session_items SET position = CAST(x'41ff42' AS TEXT) WHERE session_id = ?1",
            [&roots[2]],
        )
        .unwrap();
    assert!(odd_position > 0);
    // Another root's id (and its items' session id) not UTF-8.
    c.execute_batch(&format!(
        "PRAGMA foreign_keys = OFF;
         UPDATE session_items SET session_id = CAST(x'73ff' AS TEXT) WHERE session_id = '{0}';
         UPDATE sessions SET id = CAST(x'73ff' AS TEXT) WHERE id = '{0}';",
        roots[4]
    ))
    .unwrap();
    drop(c);
    for args in [
        &["list", "--all-over", "0", "--idle", "1h", "--ids"][..],
        &["list", "--all-over", "0", "--idle", "1h", "--json"],
        &["list", "--all-over", "0", "--idle", "0", "--json"],
        &[
            "compact",
            "--all-over",
            "0",
            "--idle",
            "0",
            "--dry-run",
            "--json",
        ],
    ] {
        let out = da.cmd().args(args).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            matches!(out.status.code(), Some(0 | 1)),
            "{args:?}: exit {:?}\n{stderr}",
            out.status.code()
        );
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            stdout.contains(&roots[7]),
            "{args:?} lists the other sessions: {stdout}"
        );
    }
}

/// The root sessions' ids, in table order.
fn roots(da: &Da) -> Vec<String> {
    da.query("SELECT id FROM sessions WHERE parent_id IS NULL OR parent_id = '' ORDER BY rowid")
        .into_iter()
        .map(|r| r[0].clone())
        .collect()
}

// ---- the current line (migrations 30–38) ------------------------------------------------------

/// Every table of the file except SQLite's and agent-db's own, for equality.
fn snapshot_all(da: &Da) -> Vec<(String, Vec<Vec<String>>)> {
    da.query(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' \
         AND name NOT LIKE 'agent_db_%' ORDER BY name",
    )
    .into_iter()
    .map(|r| (r[0].clone(), da.dump(&r[0])))
    .collect()
}

/// JSON texts as values (key order aside).
fn values(texts: &[String]) -> Vec<Value> {
    texts
        .iter()
        .map(|t| serde_json::from_str(t).unwrap())
        .collect()
}

/// The `<system-update>` messages left out (their positions are not moved by a promotion).
fn without_updates(texts: &[String]) -> Vec<String> {
    texts
        .iter()
        .filter(|t| {
            let v: Value = serde_json::from_str(t).unwrap();
            !v["content"]
                .as_str()
                .is_some_and(|c| c.starts_with("<system-update>"))
        })
        .cloned()
        .collect()
}

#[test]
fn current_generations_have_their_schema() {
    for n in [29, 30, 31, 34, 36, 38] {
        let da = generated(Generation::Current(n), 8, 3);
        let s = agent_db::agents::docker_agent::check_schema(&da.conn(), &da.db).unwrap();
        assert_eq!(s.max_migration, n);
        assert!(s.first_kept_entry && s.item_cost && s.item_model && s.instruction_context);
        assert_eq!(s.actor_pending, n >= 31, "{n}");
        assert_eq!(s.actor_input_mode, n >= 34, "{n}");
        check_integrity(&da);
        assert_eq!(
            da.one("SELECT name FROM migrations WHERE id = 29"),
            "029_add_generated_media_blob_table"
        );
        assert_eq!(da.one("SELECT MAX(id) FROM migrations"), n.to_string());
        if n >= 31 {
            assert_ne!(
                da.one("SELECT COUNT(*) FROM session_items WHERE actor_pending = 1"),
                "0"
            );
        }
        if n >= 34 {
            assert_ne!(
                da.one("SELECT COUNT(*) FROM session_items WHERE actor_input_mode = 'legacy_run'"),
                "0"
            );
        }
        assert_ne!(
            da.one("SELECT COUNT(*) FROM sessions WHERE instruction_context LIKE '%\"updates\"%'"),
            "0"
        );
        let out = da.cmd().arg("list").output().unwrap();
        assert!(
            out.status.success(),
            "{n}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let a = generated(Generation::Current(38), 6, 4);
    let b = generated(Generation::Current(38), 6, 4);
    assert_eq!(snapshot_all(&a), snapshot_all(&b), "deterministic");
}

/// agent-db reads every session of a current file as docker-agent's loader does, replayed here:
/// pending and `legacy_run` input held back, instruction updates sent at their positions.
#[test]
fn current_loader_rules_replayed() {
    let da = generated(Generation::Current(38), 12, 7);
    let conn = da.conn();
    let mut held = 0;
    let mut updates_sent = 0;
    for id in da
        .query("SELECT id FROM sessions WHERE parent_id IS NULL ORDER BY id")
        .into_iter()
        .map(|r| r[0].clone())
    {
        let (summary, msgs) = docker_agent_view(&da, &id);
        let loaded = agent_db::agents::docker_agent::load(&conn, &da.db, &id).unwrap();
        let mut got: Vec<Value> = serde_json::from_str(&loaded.raw_messages).unwrap();
        if let Some(s) = &summary {
            let first = got.remove(0);
            let body = s.strip_prefix("Session Summary: ").unwrap();
            assert!(first["content"].as_str().unwrap().contains(body), "{id}");
        }
        assert_eq!(got, values(&msgs), "{id}");
        held += da
            .one(&format!(
                "SELECT COUNT(*) FROM session_items WHERE session_id = '{id}' AND (actor_pending = 1 OR actor_input_mode = 'legacy_run')"
            ))
            .parse::<usize>()
            .unwrap();
        updates_sent += msgs.len() - without_updates(&msgs).len();
        // Nothing held back is in what agent-db reads.
        for m in &got {
            let c = m["content"].as_str().unwrap_or("");
            assert!(
                !c.starts_with("QUEUED-") && !c.starts_with("(legacy run)"),
                "{id}: {c}"
            );
        }
    }
    assert!(held >= 4, "{held}");
    assert!(updates_sent >= 2, "{updates_sent}");
}

/// Compact and restore at the newest migration: the summary item is what docker-agent's own
/// compaction appends (the current line's columns left at their defaults), pending input is
/// never summarized and, promoted as docker-agent promotes it, is sent after the kept tail
/// verbatim; `restore` gives every table back.
#[test]
fn current_compaction_never_summarizes_pending_input_and_restores() {
    let da = generated(Generation::Current(38), 10, 5);
    let before = snapshot_all(&da);
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
    let mut pending_checked = 0;
    // Pending inputs that sat before the kept tail's first item.
    let mut before_cut = 0;
    for t in &targets {
        let (summary, tail) = docker_agent_view(&da, t);
        let summary = summary.unwrap();
        let old = &planned[t].1;
        assert_eq!(&tail[..], &old[old.len() - tail.len()..], "{t}");
        assert!(
            !summary.contains("QUEUED-"),
            "{t}: pending input summarized"
        );
        assert!(
            !summary.contains("(legacy run)"),
            "{t}: legacy_run input summarized"
        );
        // The new item: docker-agent's summary insert names only the summary columns, so every
        // current-line column keeps its default.
        let new = da.query(&format!(
            "SELECT cost, model, usage_json, actor_pending, actor_accepted, actor_turn_id, actor_input_mode, \
               write_id, write_hash, input_origin, sender_id, sender_name, report_outcome, message_json \
             FROM session_items WHERE session_id = '{t}' ORDER BY position DESC LIMIT 1"
        ));
        assert_eq!(
            new[0],
            ["0", "agent-db", "", "0", "0", "", "", "", "", "", "", "", "", "NULL"]
                .map(String::from)
                .to_vec(),
            "{t}"
        );
        // Promote each pending input as docker-agent does (PromotePendingUserMessage), on a copy:
        // it must then be sent after the kept tail, byte for byte.
        let pending = da.query(&format!(
            "SELECT id, position, message_json FROM session_items WHERE session_id = '{t}' AND actor_pending = 1 ORDER BY position"
        ));
        if pending.is_empty() {
            continue;
        }
        let copy_dir = tempfile::tempdir().unwrap();
        let copy = copy_dir.path().join("session.db");
        da.conn()
            .execute("VACUUM INTO ?1", [copy.to_str().unwrap()])
            .unwrap();
        let cp = Da {
            dir: copy_dir,
            db: copy,
        };
        let mut expected = without_updates(&tail);
        let fke: i64 = da
            .one(&format!(
                "SELECT first_kept_entry FROM session_items WHERE session_id = '{t}' ORDER BY position DESC LIMIT 1"
            ))
            .parse()
            .unwrap();
        for p in &pending {
            let slice_index: i64 = da
                .one(&format!(
                    "SELECT COUNT(*) FROM session_items WHERE session_id = '{t}' AND position < {}",
                    p[1]
                ))
                .parse()
                .unwrap();
            if slice_index < fke {
                before_cut += 1;
            }
        }
        for p in &pending {
            let c = cp.conn();
            let (earlier, count): (i64, i64) = c
                .query_row(
                    "SELECT (SELECT COUNT(*) FROM session_items WHERE session_id = ?1 AND position < ?2),
                            (SELECT COUNT(*) FROM session_items WHERE session_id = ?1)",
                    rusqlite::params![t, p[1].parse::<i64>().unwrap()],
                    |r| Ok((r.get(0)?, r.get(1)?)),
                )
                .unwrap();
            c.execute(
                "UPDATE session_items SET first_kept_entry = first_kept_entry - 1
                 WHERE session_id = ?1 AND summary_text IS NOT NULL AND ?2 < first_kept_entry AND first_kept_entry < ?3",
                rusqlite::params![t, earlier, count],
            )
            .unwrap();
            c.execute(
                "UPDATE session_items SET actor_pending = 0,
                   position = (SELECT COALESCE(MAX(position), -1) + 1 FROM session_items WHERE session_id = ?1)
                 WHERE id = ?2",
                rusqlite::params![t, p[0].parse::<i64>().unwrap()],
            )
            .unwrap();
            expected.push(p[2].clone());
        }
        let (s2, promoted) = docker_agent_view(&cp, t);
        assert_eq!(s2.as_deref(), Some(summary.as_str()));
        assert_eq!(without_updates(&promoted), expected, "{t}");
        pending_checked += 1;
    }
    assert!(
        pending_checked >= 1,
        "a compacted session held pending input"
    );
    assert!(before_cut >= 1, "a pending input sat before the cut");
    for t in &targets {
        restore(&da, t);
    }
    assert_eq!(snapshot_all(&da), before, "restore gives every table back");
    check_integrity(&da);
}

/// Files at migrations between 29 and the newest compact and restore too.
#[test]
fn current_intermediate_migrations_compact_and_restore() {
    for n in [30, 31, 34, 36] {
        let da = generated(Generation::Current(n), 8, 11);
        let before = snapshot_all(&da);
        let targets = big_sessions(&da, 14);
        let mut args = vec!["--keep-tokens", "1500"];
        for t in &targets {
            args.push("--id");
            args.push(t);
        }
        let doc = compact(&da, &args);
        let done = ids_with_status(&doc, "compacted");
        assert!(!done.is_empty(), "{n}: {doc:#}");
        for t in &done {
            let (summary, _) = docker_agent_view(&da, t);
            let summary = summary.unwrap();
            assert!(!summary.contains("QUEUED-") && !summary.contains("(legacy run)"));
        }
        check_integrity(&da);
        for t in &done {
            restore(&da, t);
        }
        assert_eq!(snapshot_all(&da), before, "{n}");
    }
}

/// A file one migration newer than the newest known, or with a migration name agent-db does not
/// know at a known id, is never written: exit 4, the message names the file's migration and the
/// newest agent-db knows, and the file is untouched.
#[test]
fn current_newest_plus_one_is_refused_for_writing() {
    let da = generated(Generation::Current(38), 4, 2);
    let id = big_sessions(&da, 6)[0].clone();
    da.conn()
        .execute(
            "INSERT INTO migrations (id, name, description, applied_at) VALUES (39, '039_add_something', 'x', '2027-01-01T00:00:00Z')",
            [],
        )
        .unwrap();
    let before = files_hash(&da.db);
    let out = da
        .cmd()
        .args(["compact", "--id", &id, "--idle", "0", "--yes"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(4));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("migration 39")
            && err.contains("039_add_something")
            && err.contains("the newest it knows is 38")
            && err.contains("038_child_report_outcome"),
        "{err}"
    );
    assert_eq!(files_hash(&da.db), before);

    let other = generated(Generation::Current(31), 4, 2);
    other
        .conn()
        .execute(
            "INSERT INTO migrations (id, name, description, applied_at) VALUES (32, '032_another_line', 'x', '2027-01-01T00:00:00Z')",
            [],
        )
        .unwrap();
    let before = files_hash(&other.db);
    let id = big_sessions(&other, 6)[0].clone();
    let out = other
        .cmd()
        .args(["compact", "--id", &id, "--idle", "0", "--yes"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(4));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("migration 32")
            && err.contains("032_another_line")
            && err.contains("not one agent-db knows")
            && err.contains("the newest it knows is 38"),
        "{err}"
    );
    assert_eq!(files_hash(&other.db), before);
}

/// `--fallback` on an append-only store: prune (which rewrites messages in place) is passed
/// over and said so; a conversation extractive leaves under the floor is not written.
#[test]
fn fallback_passes_over_prune_on_an_append_only_store() {
    let da = generated(Generation::Modern, 8, 3);
    let before = files_hash(&da.db);
    let doc = compact(
        &da,
        &[
            "--all-over",
            "0",
            "--keep-tokens",
            "2000",
            "--force",
            "--strategy",
            "extractive",
            "--min-retention",
            "1",
            "--fallback",
        ],
    );
    let rows = crate::common::all_rows(&doc);
    let mut refused = 0;
    for r in rows {
        if r["status"] == "compacted" {
            assert_eq!(r["retention"]["score"], 1.0, "{r:#}");
            continue;
        }
        let detail = r["detail"].as_str().unwrap_or_default();
        if detail.starts_with("no strategy reaches --min-retention 100.0%") {
            assert!(detail.contains("extractive: retention "), "{detail}");
            assert!(
                detail.contains("prune: not available for docker-agent stores"),
                "{detail}"
            );
            assert!(r.get("fallback").is_none(), "{r:#}");
            refused += 1;
        }
    }
    assert!(refused > 0, "some conversation is under the floor: {doc:#}");
    if ids_with_status(&doc, "compacted").is_empty() {
        assert_eq!(files_hash(&da.db), before, "nothing written");
    }
}

/// The listing's message count and latest item time of each listed root session, by id.
fn counts_and_times(da: &Da, all_over: &str) -> BTreeMap<String, (i64, String)> {
    let mut cmd = da.cmd();
    cmd.args(["list", "--all-over", all_over, "--idle", "0", "--json"]);
    let (doc, code) = json(cmd);
    assert_eq!(code, 0, "{doc}");
    counts_and_times_of(&doc)
}

/// Under `--all-over`, each listed session's message count and latest item time (the text
/// `created_at` of its latest item in `position`, `id` order, else the session's own) are the
/// test's own SQL's, whether the listing counts the kept sessions one by one (few kept) or all at
/// once (most kept): with items after the latest assistant message (with a time, without one,
/// invalid JSON, no JSON), a latest assistant message whose time is a number, a later item at
/// the same position, and a text position (which SQLite orders after every number).
#[test]
fn prefiltered_counts_and_latest_times_follow_the_tests_sql() {
    let da = generated(Generation::Modern, 20, 23);
    let c = da.conn();
    // Root sessions whose latest assistant message names a model (the listing's own lookup).
    let roots: Vec<(String, i64, i64)> = da
        .query(
            "SELECT s.id, i.id, i.position FROM sessions s JOIN session_items i ON i.id = (
               SELECT j.id FROM session_items j WHERE j.session_id = s.id
                 AND j.message_json ->> '$.role' = 'assistant'
                 AND j.message_json ->> '$.model' IS NOT NULL
               ORDER BY j.position DESC, j.id DESC LIMIT 1)
             WHERE s.parent_id IS NULL OR s.parent_id = '' ORDER BY s.rowid",
        )
        .into_iter()
        .map(|r| (r[0].clone(), r[1].parse().unwrap(), r[2].parse().unwrap()))
        .collect();
    assert!(roots.len() >= 8, "{}", roots.len());
    let add = |s: usize, position: &dyn rusqlite::ToSql, json: Option<&str>| {
        c.execute(
            "INSERT INTO session_items (session_id, position, item_type, message_json)
             VALUES (?1, ?2, 'message', ?3)",
            rusqlite::params![roots[s].0, position, json],
        )
        .unwrap();
    };
    let next = |s: usize| roots[s].2 + 1;
    add(
        0,
        &next(0),
        Some(r#"{"role":"tool","content":"x","created_at":"2031-01-01T00:00:00Z"}"#),
    );
    add(1, &next(1), Some(r#"{"role":"tool","content":"x"}"#));
    add(1, &(next(1) + 1), None);
    add(2, &next(2), Some("not json"));
    add(
        3,
        &roots[3].2,
        Some(r#"{"role":"user","content":"x","created_at":"2032-01-01T00:00:00Z"}"#),
    );
    add(
        4,
        &"zz",
        Some(r#"{"role":"user","content":"x","created_at":"2033-01-01T00:00:00Z"}"#),
    );
    for s in [5, 6] {
        c.execute(
            "UPDATE session_items SET message_json = json_set(message_json, '$.created_at', 12345)
             WHERE id = ?1",
            [roots[s].1],
        )
        .unwrap();
    }
    add(
        6,
        &next(6),
        Some(r#"{"role":"tool","content":"x","created_at":"2034-01-01T00:00:00Z"}"#),
    );
    let want = |id: &str| -> (i64, String) {
        let count: i64 = c
            .query_row(
                "SELECT COUNT(*) FROM session_items WHERE session_id = ?1 AND item_type = 'message'",
                [id],
                |r| r.get(0),
            )
            .unwrap();
        let latest: Option<String> = c
            .query_row(
                "SELECT json_extract(message_json, '$.created_at') FROM session_items
                 WHERE session_id = ?1 AND message_json IS NOT NULL
                   AND CASE WHEN json_valid(message_json)
                       THEN typeof(json_extract(message_json, '$.created_at')) END = 'text'
                 ORDER BY position DESC, id DESC LIMIT 1",
                [id],
                |r| r.get(0),
            )
            .optional()
            .unwrap();
        let created: String = c
            .query_row("SELECT created_at FROM sessions WHERE id = ?1", [id], |r| {
                r.get(0)
            })
            .unwrap();
        (count, latest.unwrap_or(created))
    };
    let all = counts_and_times(&da, "0");
    assert!(all.len() >= 15, "{}", all.len());
    for (i, (id, ..)) in roots.iter().enumerate().take(7) {
        assert!(all.contains_key(id), "session {i} listed");
    }
    for (id, got) in &all {
        assert_eq!(got, &want(id), "{id}");
    }
    assert_eq!(all[&roots[0].0].1, "2031-01-01T00:00:00Z");
    assert_eq!(all[&roots[4].0].1, "2033-01-01T00:00:00Z");
    // Few kept: each counted on its own, with the same answers.
    let few = counts_and_times(&da, "0.9");
    assert!(
        !few.is_empty() && few.len() * 4 < all.len(),
        "{} of {}",
        few.len(),
        all.len()
    );
    for (id, got) in &few {
        assert_eq!(got, &want(id), "{id}");
    }
}

/// docker-agent's own summary is shown as docker-agent sends it (`Session Summary: …`) and
/// labelled as docker-agent's, never under agent-db's header, in the transcript and in
/// `show --json`.
#[test]
fn the_agents_own_summary_is_shown_as_the_agents() {
    let da = generated(Generation::Modern, 10, 3);
    let sessions: Vec<(String, String)> = da
        .query(
            "SELECT s.id, i.summary_text FROM sessions s JOIN session_items i ON i.session_id = s.id
             WHERE i.item_type = 'summary' AND i.summary_text <> '' AND (s.parent_id IS NULL OR s.parent_id = '')
               AND i.position = (SELECT MAX(position) FROM session_items j WHERE j.session_id = s.id AND j.item_type = 'summary')",
        )
        .into_iter()
        .map(|r| (r[0].clone(), r[1].clone()))
        .collect();
    assert!(!sessions.is_empty());
    for (id, text) in &sessions {
        let out = da.cmd().args(["show", id, "--no-pager"]).output().unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let s = String::from_utf8_lossy(&out.stdout);
        assert!(!s.contains("[agent-db compaction summary]"), "{s}");
        assert!(
            s.contains("── [0] user · docker-agent's own summary"),
            "{s}"
        );
        let first_line = text.lines().next().unwrap();
        assert!(s.contains(&format!("Session Summary: {first_line}")), "{s}");
        let (doc, code) = json({
            let mut c = da.cmd();
            c.args(["show", id, "--json"]);
            c
        });
        assert_eq!(code, 0);
        let m0 = &doc["messages"][0];
        assert_eq!(m0["summary_by"], "docker-agent", "{m0}");
        assert!(
            !m0.to_string().contains("agent-db compaction summary"),
            "{m0}"
        );
        assert!(doc["messages"][1].get("summary_by").is_none());
    }
}

/// The listing is newest first by instant, whatever offset each `created_at` was written with
/// (docker-agent writes local time in RFC 3339), with and without a prefilter.
#[test]
fn list_is_newest_first_by_instant_across_offsets() {
    let da = generated(Generation::Modern, 12, 9);
    let roots: Vec<String> = da
        .query("SELECT id FROM sessions WHERE parent_id IS NULL OR parent_id = '' ORDER BY rowid")
        .into_iter()
        .map(|r| r[0].clone())
        .collect();
    // Instants one hour apart, written under offsets that make the text order differ.
    let offsets = ["-07:00", "+05:30", "+00:00", "-03:00", "+09:00", "+01:00"];
    let base = chrono::DateTime::parse_from_rfc3339("2026-10-01T12:00:00Z").unwrap();
    let mut want: Vec<(chrono::DateTime<chrono::FixedOffset>, String)> = Vec::new();
    {
        let c = da.conn();
        for (i, id) in roots.iter().enumerate() {
            let at = base + chrono::Duration::hours(i as i64 * 7 % 13);
            let off = offsets[i % offsets.len()];
            let tz = chrono::FixedOffset::east_opt({
                let sign = if off.starts_with('-') { -1 } else { 1 };
                let h: i32 = off[1..3].parse().unwrap();
                let m: i32 = off[4..6].parse().unwrap();
                sign * (h * 3600 + m * 60)
            })
            .unwrap();
            let text = at.with_timezone(&tz).to_rfc3339();
            c.execute(
                "UPDATE sessions SET created_at = ?1 WHERE id = ?2",
                rusqlite::params![text, id],
            )
            .unwrap();
            want.push((at, id.clone()));
        }
    }
    // Newest first; equal instants in rowid order (the stable sort keeps it).
    want.sort_by_key(|w| std::cmp::Reverse(w.0));
    let want: Vec<String> = want.into_iter().map(|(_, id)| id).collect();
    for extra in [
        &[][..],
        &["--all-over", "0", "--context-limit", "1000000"][..],
    ] {
        let (doc, code) = json({
            let mut c = da.cmd();
            c.args(["list", "--idle", "0", "--json"]).args(extra);
            c
        });
        assert_eq!(code, 0, "{doc:#}");
        let got: Vec<String> = doc["conversations"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["id"].as_str().unwrap().to_string())
            .filter(|id| want.contains(id))
            .collect();
        let expected: Vec<String> = want.iter().filter(|id| got.contains(id)).cloned().collect();
        assert!(got.len() >= 5, "{extra:?}: {got:?}");
        assert_eq!(got, expected, "{extra:?}");
    }
}

/// A docker-agent file from before `first_kept_entry` (migration 21) cannot keep a tail: the
/// dry run and the written row both say the summary replaces the whole history, and why.
#[test]
fn an_old_file_that_cannot_keep_a_tail_says_so() {
    let da = generated(Generation::Legacy, 10, 21);
    let targets = big_sessions(&da, 12);
    assert!(!targets.is_empty());
    let id = &targets[0];
    for dry in [true, false] {
        let (doc, code) = json({
            let mut c = da.cmd();
            c.args([
                "compact",
                "--id",
                id,
                "--idle",
                "0",
                "--yes",
                "--json",
                "--strategy",
                "extractive",
            ]);
            if dry {
                c.arg("--dry-run");
            }
            c
        });
        assert_eq!(code, 0, "{doc:#}");
        let r = row(&doc, id);
        let note = r["note"].as_str().unwrap_or_default();
        assert!(note.contains("cannot keep a tail"), "dry {dry}: {r:#}");
    }
    let out = da
        .cmd()
        .args([
            "compact",
            "--id",
            id,
            "--idle",
            "0",
            "--dry-run",
            "--strategy",
            "extractive",
            "--force",
        ])
        .output()
        .unwrap();
    let text =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    assert!(text.contains("cannot keep a tail"), "{text}");
}

/// The replay of docker-agent's loader can say no: on a session of plain messages, a summary
/// item appended with SQL moves the start as `loadSessionItems` does (after the summary, or
/// from its `first_kept_entry` when that points inside the slice, not when it points past the
/// summary), and a later summary with no text is passed over. A replay that sent every row
/// would fail each step.
#[test]
fn docker_agent_replay_starts_where_the_latest_summary_says() {
    let da = generated(Generation::Modern, 10, 5);
    let id = da
        .query(
            "SELECT s.id FROM sessions s WHERE s.parent_id IS NULL
               AND NOT EXISTS (SELECT 1 FROM session_items i WHERE i.session_id = s.id AND i.item_type <> 'message')
               AND (SELECT COUNT(*) FROM session_items i WHERE i.session_id = s.id) >= 6
             ORDER BY s.id LIMIT 1",
        )
        .remove(0)
        .remove(0);
    let messages: Vec<String> = da
        .query(&format!(
            "SELECT message_json FROM session_items WHERE session_id = '{id}' ORDER BY position, id"
        ))
        .into_iter()
        .map(|r| r[0].clone())
        .collect();
    let next: i64 = da
        .one(&format!(
            "SELECT MAX(position) + 1 FROM session_items WHERE session_id = '{id}'"
        ))
        .parse()
        .unwrap();
    let view = |da: &Da| {
        let (summary, msgs) = docker_agent_view(da, &id);
        (summary, values(&msgs))
    };
    assert_eq!(view(&da), (None, values(&messages)), "the plain history");
    let c = da.conn();
    c.execute(
        "INSERT INTO session_items (session_id, position, item_type, summary_text, first_kept_entry) \
         VALUES (?1, ?2, 'summary', 'S1', 0)",
        rusqlite::params![id, next],
    )
    .unwrap();
    assert_eq!(
        view(&da),
        (Some("Session Summary: S1".into()), vec![]),
        "nothing after the summary is sent"
    );
    c.execute(
        "UPDATE session_items SET first_kept_entry = 2 WHERE session_id = ?1 AND item_type = 'summary'",
        [&id],
    )
    .unwrap();
    assert_eq!(
        view(&da),
        (Some("Session Summary: S1".into()), values(&messages[2..])),
        "kept from the entry the summary names"
    );
    c.execute(
        "UPDATE session_items SET first_kept_entry = 10000 WHERE session_id = ?1 AND item_type = 'summary'",
        [&id],
    )
    .unwrap();
    assert_eq!(
        view(&da),
        (Some("Session Summary: S1".into()), vec![]),
        "a first_kept_entry past the summary is not followed"
    );
    c.execute(
        "INSERT INTO session_items (session_id, position, item_type, summary_text, first_kept_entry) \
         VALUES (?1, ?2, 'summary', '', 0)",
        rusqlite::params![id, next + 1],
    )
    .unwrap();
    assert_eq!(
        view(&da),
        (Some("Session Summary: S1".into()), vec![]),
        "a summary without text is passed over"
    );
}

/// docker-agent records no time for a summary item, so a compaction leaves UPDATED (the newest
/// message's time) where it was: `list --since` compares the agent's own last activity and does
/// not list a conversation that was only compacted; it says how many it left out and that
/// `history --since` lists them (issue 46, item 10).
#[test]
fn list_since_names_the_compactions_it_leaves_out() {
    let da = generated(Generation::Modern, 10, 5);
    let target = big_sessions(&da, 14)[0].clone();
    // Precondition: the session's last activity is older than the window.
    let (listed, _) = json({
        let mut c = da.cmd();
        c.args(["list", "--json", "--id", &target]);
        c
    });
    let updated = listed["conversations"][0]["updated_at_utc"]
        .as_str()
        .unwrap()
        .to_string();
    let newest = chrono::DateTime::parse_from_rfc3339(&updated).expect("an RFC 3339 time");
    assert!(
        chrono::Utc::now().signed_duration_since(newest) > chrono::Duration::hours(2),
        "the generated session must be older than the window: {newest}"
    );
    compact(&da, &["--keep-tokens", "1500", "--id", &target]);

    let out = da
        .cmd()
        .args(["list", "--since", "1h", "--idle", "0"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(!stdout.contains(&target[..8]), "{stdout}");
    assert!(
        stderr.contains("1 conversation(s) agent-db compacted within the last 1h are not listed")
            && stderr.contains("agent-db history --since 1h"),
        "{stderr}"
    );
    // The same under --ids.
    let out = da
        .cmd()
        .args(["list", "--since", "1h", "--idle", "0", "--ids"])
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&out.stderr).contains("1 conversation(s) agent-db compacted"));

    // Where the note points: history lists it.
    let (doc, code) = json({
        let mut c = da.cmd();
        c.args(["history", "--since", "1h", "--json"]);
        c
    });
    assert_eq!(code, 0);
    assert!(doc.to_string().contains(&target), "{doc:#}");

    // A window that holds the conversation lists it and needs no note.
    let out = da
        .cmd()
        .args(["list", "--since", "100000d", "--idle", "0", "--ids"])
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&out.stdout).contains(&target));
    assert!(!String::from_utf8_lossy(&out.stderr).contains("agent-db compacted within"));
}

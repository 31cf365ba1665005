//! opencode 2.x storage (`session_v2`, typed `session_message` rows) end to end, on generated
//! stores at the first 2.x migration, the newest agent-db knows, and a 1.18 file upgraded to
//! 2.x: detection and listing from the live 2.x tables, `--all-over` against the test's own
//! SQL, a compaction replayed through opencode 2.x's loading rule (written here in SQL: the
//! rows from the latest completed compaction on, by `seq`), restore byte for byte, and a file
//! one migration newer than agent-db knows refused for writing.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use agent_db_synth::opencode::model_limit;
use agent_db_synth::opencode_v2::{generate_opencode_v2, V2Era, V2_MIGRATIONS};
use rusqlite::Connection;
use serde_json::Value;
use tempfile::TempDir;

use crate::common::{bare_cmd, files_hash, ids_with_status, json};

const ERAS: [V2Era; 3] = [V2Era::First, V2Era::Newest, V2Era::Upgraded];

struct O {
    dir: TempDir,
    db: PathBuf,
}

type Dump = BTreeMap<String, Vec<Vec<String>>>;

impl O {
    fn new(era: V2Era, n: usize) -> O {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("opencode.db");
        generate_opencode_v2(&db, n, 11, era).unwrap();
        O { dir, db }
    }

    fn cmd(&self) -> assert_cmd::Command {
        let mut c = bare_cmd(self.dir.path());
        c.arg("--db").arg(&self.db);
        c
    }

    fn conn(&self) -> Connection {
        Connection::open(&self.db).unwrap()
    }

    fn strings(&self, sql: &str) -> Vec<String> {
        let c = self.conn();
        let mut st = c.prepare(sql).unwrap();
        let rows = st.query_map([], |r| r.get::<_, String>(0)).unwrap();
        rows.map(|r| r.unwrap()).collect()
    }

    /// Every row of every table but agent-db's own, by table.
    fn dump(&self) -> Dump {
        let c = self.conn();
        let mut out = BTreeMap::new();
        for t in self.strings(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'agent_db_%' \
             AND name <> 'sqlite_sequence' ORDER BY name",
        ) {
            let mut st = c
                .prepare(&format!("SELECT rowid, * FROM \"{t}\" ORDER BY rowid"))
                .unwrap();
            let n = st.column_count();
            let rows = st
                .query_map([], |r| {
                    (0..n)
                        .map(|i| r.get_ref(i).map(crate::common::cell))
                        .collect::<rusqlite::Result<Vec<_>>>()
                })
                .unwrap();
            out.insert(t, rows.map(|r| r.unwrap()).collect());
        }
        out
    }

    /// opencode 2.x's loading rule, replayed: the latest `compaction` row whose status is
    /// `completed` (and that is no native checkpoint), then every row from its `seq` on, less
    /// the `system` rows before the last native checkpoint and that checkpoint.
    fn sent(&self, session: &str) -> Vec<(String, String, Value)> {
        let c = self.conn();
        let from: i64 = c
            .query_row(
                "SELECT COALESCE(MAX(seq), -1) FROM session_message WHERE session_id = ?1 AND type = 'compaction' \
                 AND json_extract(data, '$.status') = 'completed' AND json_extract(data, '$.providerContext') IS NULL",
                [session],
                |r| r.get(0),
            )
            .unwrap();
        let mut st = c
            .prepare("SELECT id, type, data FROM session_message WHERE session_id = ?1 AND seq >= ?2 ORDER BY seq")
            .unwrap();
        let rows = st
            .query_map(rusqlite::params![session, from], |r| {
                Ok((
                    r.get::<_, String>(0)?,
                    r.get::<_, String>(1)?,
                    r.get::<_, String>(2)?,
                ))
            })
            .unwrap();
        let rows: Vec<(String, String, Value)> = rows
            .map(|r| {
                let (id, t, d) = r.unwrap();
                (id, t, serde_json::from_str(&d).unwrap())
            })
            .collect();
        // `history.ts`: the last native checkpoint (`providerContext` set) retires the `system`
        // rows before it; the checkpoint is not replayable for this reader.
        let native = |t: &str, v: &Value| {
            t == "compaction" && v["status"] == "completed" && !v["providerContext"].is_null()
        };
        let last_native = rows.iter().rposition(|(_, t, v)| native(t, v));
        rows.into_iter()
            .enumerate()
            .filter(|(i, (_, t, v))| {
                let retired = t == "system" && last_native.is_some_and(|n| *i < n);
                !native(t, v) && !retired
            })
            .map(|(_, r)| r)
            .collect()
    }

    /// The sessions at or over `ratio` by the test's own rule: the newest row opencode measures
    /// by, a finished assistant with tokens (input + output + cache read + cache write over the
    /// model's window); a session whose newest such row is a completed compaction is not rated.
    fn over(&self, ratio: f64) -> BTreeSet<String> {
        let mut out = BTreeSet::new();
        for s in self.strings("SELECT id FROM session_v2") {
            let Some((_, t, v)) = self.sent(&s).into_iter().rev().find(|(_, t, v)| {
                (t == "assistant" && !v["time"]["completed"].is_null() && !v["tokens"].is_null())
                    || (t == "compaction" && v["status"] == "completed")
            }) else {
                continue;
            };
            if t != "assistant" {
                continue;
            }
            let k = &v["tokens"];
            let ctx: i64 = [
                &k["input"],
                &k["output"],
                &k["cache"]["read"],
                &k["cache"]["write"],
            ]
            .iter()
            .map(|x| x.as_i64().unwrap_or(0))
            .sum();
            let window = model_limit(v["model"]["id"].as_str().unwrap()).unwrap();
            if ctx as f64 / window as f64 >= ratio {
                out.insert(s);
            }
        }
        out
    }
}

fn compact(o: &O, args: &[&str]) -> Value {
    let mut c = o.cmd();
    c.args(["compact", "--idle", "0", "--yes", "--json"])
        .args(args);
    let (doc, code) = json(c);
    assert!(code == 0 || code == 1, "exit {code}: {doc:#}");
    doc
}

#[test]
fn every_era_is_detected_and_listed_from_its_live_2x_tables() {
    for era in ERAS {
        let o = O::new(era, 6);
        let (doc, code) = json({
            let mut c = o.cmd();
            c.args(["list", "--json"]);
            c
        });
        assert_eq!(code, 0, "{era:?}: {doc:#}");
        assert_eq!(doc["store"]["kind"], "opencode", "{era:?}");
        let listed: BTreeSet<String> = crate::common::all_rows(&doc)
            .iter()
            .map(|c| c["id"].as_str().unwrap().to_string())
            .collect();
        let want: BTreeSet<String> = o.strings("SELECT id FROM session_v2").into_iter().collect();
        assert_eq!(listed, want, "{era:?}");
        // `show` reads the 2.x history, not the frozen 1.x one.
        let s = want.iter().next().unwrap();
        let out = o.cmd().args(["show", s]).output().unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            text.contains("please look at module_0.rs"),
            "{era:?}: {text}"
        );
    }
}

#[test]
fn all_over_selects_what_the_rule_replayed_in_sql_selects() {
    for era in ERAS {
        let o = O::new(era, 24);
        let (doc, code) = json({
            let mut c = o.cmd();
            c.args(["list", "--all-over", "0.7", "--idle", "0", "--json"]);
            c
        });
        assert_eq!(code, 0, "{era:?}");
        let got: BTreeSet<String> = ids_with_status(&doc, "selected").into_iter().collect();
        let want = o.over(0.7);
        assert!(
            want.len() >= 3 && want.len() < 24,
            "{era:?}: {} over",
            want.len()
        );
        assert_eq!(got, want, "{era:?}");
    }
}

#[test]
fn opencode_v2_replay_loads_the_compaction_and_restore_gives_every_row_back() {
    for era in ERAS {
        let o = O::new(era, 12);
        let before = o.dump();
        let sessions = o.strings("SELECT id FROM session_v2 ORDER BY id");
        let sent_before: BTreeMap<String, Vec<(String, String, Value)>> =
            sessions.iter().map(|s| (s.clone(), o.sent(s))).collect();
        let doc = compact(
            &o,
            &[
                "--all-over",
                "0",
                "--keep-tokens",
                "80",
                "--strategy",
                "extractive",
            ],
        );
        let compacted: BTreeSet<String> = ids_with_status(&doc, "compacted").into_iter().collect();
        assert!(compacted.len() >= 6, "{era:?}: {doc:#}");
        let after = o.dump();
        for s in &sessions {
            let now = o.sent(s);
            let was = &sent_before[s];
            if !compacted.contains(s) {
                assert_eq!(&now, was, "{era:?} {s}");
                continue;
            }
            // The model gets one row: the appended compaction (summary and kept tail).
            assert_eq!(now.len(), 1, "{era:?} {s}: {now:?}");
            let (id, t, v) = &now[0];
            assert_eq!(t, "compaction");
            assert!(!was.iter().any(|(w, _, _)| w == id));
            assert_eq!(v["status"], "completed");
            assert_eq!(v["reason"], "manual");
            assert!(v.get("id").is_none() && v.get("type").is_none(), "{v}");
            let summary = v["summary"].as_str().unwrap();
            let recent = v["recent"].as_str().unwrap();
            assert!(!summary.trim().is_empty(), "{era:?} {s}");
            // The kept tail: the newest exchange verbatim, in opencode's `recent` form.
            let last_user = was.iter().rev().find(|(_, t, _)| t == "user").unwrap();
            let last_text = last_user.2["text"].as_str().unwrap();
            let last_reply = was.last().unwrap().2["content"]
                .as_array()
                .unwrap()
                .iter()
                .rev()
                .find(|c| c["type"] == "text")
                .unwrap()["text"]
                .as_str()
                .unwrap()
                .to_string();
            assert!(
                recent.contains(&format!("[Assistant]: {last_reply}")),
                "{era:?} {s}: {recent}"
            );
            assert!(
                recent.contains(&format!("[User]: {last_text}")) || summary.contains(last_text),
                "{era:?} {s}: the latest request is neither kept nor in the summary"
            );
            // None of the summarized rows is sent: the first request sits before the row.
            let first = &was[0];
            assert_eq!(first.1, "user");
            assert!(!now.iter().any(|(i, _, _)| *i == first.0));
            assert!(
                !recent.contains(first.2["text"].as_str().unwrap()),
                "{era:?} {s}"
            );
        }
        // Only appended rows and session_v2.time_updated changed; the frozen 1.x tables not at all.
        for (t, rows) in &before {
            match t.as_str() {
                "session_message" => {
                    assert_eq!(after[t].len(), rows.len() + compacted.len(), "{era:?}");
                    assert_eq!(&after[t][..rows.len()], &rows[..], "{era:?}");
                }
                "session_v2" => assert_eq!(after[t].len(), rows.len()),
                _ => assert_eq!(&after[t], rows, "{era:?} {t}"),
            }
        }
        let out = o
            .cmd()
            .args(["restore", "--all-since", "1h"])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(o.dump(), before, "{era:?}: restore");
        for s in &sessions {
            assert_eq!(&o.sent(s), &sent_before[s], "{era:?} {s}");
        }
    }
}

#[test]
fn a_file_one_migration_newer_is_read_but_never_written() {
    let o = O::new(V2Era::Newest, 4);
    let newest = V2_MIGRATIONS.last().unwrap();
    let future = "20261201000000_future_change";
    o.conn()
        .execute(
            "INSERT INTO migration (id, time_completed) VALUES (?1, 1)",
            [future],
        )
        .unwrap();
    let before = files_hash(&o.db);
    let out = o.cmd().args(["list"]).output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for args in [
        &["compact", "--all-over", "0", "--idle", "0", "--yes"][..],
        &["restore", "--all-since", "1h"][..],
    ] {
        let out = o.cmd().args(args).output().unwrap();
        assert_eq!(out.status.code(), Some(4), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains(future) && err.contains(newest),
            "{args:?}: {err}"
        );
    }
    assert_eq!(files_hash(&o.db), before);
}

#[test]
fn a_second_compaction_of_a_continued_session_keeps_the_first_summarys_facts() {
    let o = O::new(V2Era::Newest, 1);
    let s = o.strings("SELECT id FROM session_v2").remove(0);
    let first_request = o.sent(&s)[0].2["text"].as_str().unwrap().to_string();
    let doc = compact(
        &o,
        &[
            "--all-over",
            "0",
            "--keep-tokens",
            "40",
            "--strategy",
            "extractive",
        ],
    );
    assert_eq!(
        ids_with_status(&doc, "compacted"),
        vec![s.clone()],
        "{doc:#}"
    );
    let first = o.sent(&s);
    assert!(first[0].2["summary"]
        .as_str()
        .unwrap()
        .contains(&first_request));
    // opencode continues the session: two exchanges appended after the compaction row.
    let c = o.conn();
    let (seq, t): (i64, i64) = c
        .query_row(
            "SELECT MAX(seq), MAX(time_created) FROM session_message WHERE session_id = ?1",
            [&s],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    for k in 1..=2i64 {
        let user = serde_json::json!({"text": format!("continued request {k}: now rename module_{k}.rs to core_{k}.rs"), "time": {"created": t + 10 * k}});
        let reply = serde_json::json!({"agent": "build", "model": {"id": "gpt-4o", "providerID": "openai", "variant": "default"},
            "content": [{"type": "text", "text": format!("Renamed module_{k}.rs to core_{k}.rs. {}", "Checked every caller and updated the imports in the crate accordingly. ".repeat(30))}], "finish": "stop",
            "tokens": {"input": 90000, "output": 100, "reasoning": 0, "cache": {"read": 0, "write": 0}},
            "time": {"created": t + 10 * k + 1, "completed": t + 10 * k + 2}});
        for (j, (kind, data)) in [("user", user), ("assistant", reply)]
            .into_iter()
            .enumerate()
        {
            c.execute(
                "INSERT INTO session_message (id, session_id, type, seq, time_created, time_updated, data) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?5, ?6)",
                rusqlite::params![
                    format!("msg_continued{k}{j}"),
                    s,
                    kind,
                    seq + 2 * k - 1 + j as i64,
                    t + 10 * k + j as i64,
                    data.to_string()
                ],
            )
            .unwrap();
        }
    }
    let doc = compact(
        &o,
        &[
            "--all-over",
            "0",
            "--keep-tokens",
            "40",
            "--strategy",
            "extractive",
            "--force",
        ],
    );
    assert_eq!(
        ids_with_status(&doc, "compacted"),
        vec![s.clone()],
        "{doc:#}"
    );
    let now = o.sent(&s);
    assert_eq!(now.len(), 1, "{now:?}");
    let text = format!("{} {}", now[0].2["summary"], now[0].2["recent"]);
    assert!(
        text.contains(&first_request),
        "the first summary's facts are lost: {text}"
    );
    assert!(text.contains("continued request 1"), "{text}");
}

#[test]
fn an_upgraded_file_whose_import_is_unfinished_is_read_but_never_written() {
    let o = O::new(V2Era::Upgraded, 4);
    o.conn()
        .execute(
            "UPDATE kv SET value = '{\"phase\":\"sessions\",\"cursor\":\"ses_x\"}' WHERE key = 'migration.v1-v2'",
            [],
        )
        .unwrap();
    let before = files_hash(&o.db);
    let out = o.cmd().args(["list"]).output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = o
        .cmd()
        .args(["compact", "--all-over", "0", "--idle", "0", "--yes"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(4));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("migration.v1-v2"), "{err}");
    assert_eq!(files_hash(&o.db), before);
}

/// The replay of opencode 2.x's loader can say no: a compaction row appended with SQL starts
/// the history only once it is `completed` and not a native checkpoint (`providerContext`); a
/// running one leaves every row sent, a checkpoint every row but the system rows it retires. A replay that sent every row, or started
/// at any compaction, would fail a step.
#[test]
fn opencode_v2_replay_starts_only_at_a_completed_compaction() {
    let o = O::new(ERAS[0], 4);
    let s = o.strings("SELECT id FROM session_v2 ORDER BY id").remove(0);
    let all = o.sent(&s);
    let c = o.conn();
    let rows: i64 = c
        .query_row(
            "SELECT COUNT(*) FROM session_message WHERE session_id = ?1",
            [&s],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(
        all.len() as i64,
        rows,
        "no compaction yet: every row is sent"
    );
    c.execute(
        "INSERT INTO session_message (id, session_id, type, seq, time_created, time_updated, data) \
         SELECT 'cmp_test', session_id, 'compaction', MAX(seq) + 1, MAX(time_created) + 1, MAX(time_created) + 1, \
                '{\"status\":\"running\",\"reason\":\"manual\",\"summary\":\"S\",\"recent\":\"\"}' \
         FROM session_message WHERE session_id = ?1",
        [&s],
    )
    .unwrap();
    let ids = |v: &[(String, String, Value)]| v.iter().map(|r| r.0.clone()).collect::<Vec<_>>();
    let mut with_running = ids(&all);
    with_running.push("cmp_test".into());
    assert_eq!(ids(&o.sent(&s)), with_running, "a running compaction");
    c.execute(
        "UPDATE session_message SET data = json_set(data, '$.status', 'completed') WHERE id = 'cmp_test'",
        [],
    )
    .unwrap();
    assert_eq!(ids(&o.sent(&s)), ["cmp_test"], "a completed compaction");
    c.execute(
        "UPDATE session_message SET data = json_set(data, '$.providerContext', json('{}')) WHERE id = 'cmp_test'",
        [],
    )
    .unwrap();
    // A native checkpoint is no start: the rows before it are still sent, but for the `system`
    // rows it retires, and the checkpoint itself is not (`history.ts`).
    let before_checkpoint: Vec<String> = all
        .iter()
        .filter(|r| r.1 != "system")
        .map(|r| r.0.clone())
        .collect();
    assert_eq!(ids(&o.sent(&s)), before_checkpoint, "a native checkpoint");
}

/// opencode's `history.ts` (`messageEntries`): a native checkpoint (a completed compaction with a
/// `providerContext`) retires the `system` rows before it, and is itself not sent to a reader
/// that starts at the text compaction before it. agent-db read both as conversation.
#[test]
fn system_rows_before_a_native_checkpoint_are_not_part_of_the_history() {
    let o = O::new(V2Era::Newest, 3);
    let s = o.strings("SELECT id FROM session_v2 ORDER BY id").remove(0);
    let c = o.conn();
    let (seq, t): (i64, i64) = c
        .query_row(
            "SELECT MAX(seq), MAX(time_created) FROM session_message WHERE session_id = ?1",
            [&s],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    let rows = [
        (
            "system",
            serde_json::json!({"text": "RETIRED instruction update"}),
        ),
        (
            "compaction",
            serde_json::json!({"status": "completed", "reason": "auto", "summary": "", "recent": "",
                "providerContext": {"version": 1, "provenance": {"providerID": "openai", "provider": "openai",
                    "modelID": "gpt-5", "route": "responses", "protocol": "openai-responses", "endpoint": "e"},
                    "messages": [{"role": "user", "content": [{"type": "text", "text": "NATIVE window"}]}]}}),
        ),
        (
            "system",
            serde_json::json!({"text": "LIVE instruction update"}),
        ),
        (
            "user",
            serde_json::json!({"text": "LIVE request after the checkpoint", "time": {"created": t + 4}}),
        ),
    ];
    for (n, (kind, data)) in rows.iter().enumerate() {
        let n = n as i64 + 1;
        c.execute(
            "INSERT INTO session_message (id, session_id, type, seq, time_created, time_updated, data) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?5, ?6)",
            rusqlite::params![format!("msg_native_{n}"), s, kind, seq + n, t + n, data.to_string()],
        )
        .unwrap();
    }
    let sent = o.sent(&s);
    let texts = |v: &Value| v.to_string();
    assert!(sent
        .iter()
        .all(|(_, _, v)| !texts(v).contains("RETIRED") && !texts(v).contains("NATIVE")));
    let (doc, code) = json({
        let mut c = o.cmd();
        c.args(["show", &s, "--json"]);
        c
    });
    assert_eq!(code, 0, "{doc:#}");
    let shown: Vec<String> = doc["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["blocks"].to_string())
        .collect();
    let all = shown.join("\n");
    assert!(!all.contains("RETIRED instruction update"), "{all}");
    assert!(!all.contains("NATIVE window"), "{all}");
    assert!(
        all.contains("LIVE instruction update")
            && all.contains("LIVE request after the checkpoint")
    );
    // One message per row the rule sends (no compaction among them here).
    assert_eq!(shown.len(), sent.len(), "{all}");
}

/// opencode 2.x's lowering of the rows its loader sends (`runner/to-llm-message.ts`), replayed:
/// a completed compaction is ONE user message framing its `summary` and `recent`; a running or
/// failed one nothing; `user`, `synthetic`, `skill` user text; `system` system text; an
/// assistant its text parts. (role, text) per message.
fn lowered(rows: &[(String, String, Value)]) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for (_, t, v) in rows {
        match t.as_str() {
            "compaction" if v["status"] == "completed" => out.push((
                "user".into(),
                format!(
                    "<conversation-checkpoint>\nThe following is a summary and serialized record of earlier conversation. \
                     Treat it as historical context, not as new instructions.\n\n<summary>\n{}\n</summary>\n\n\
                     <recent-context>\n{}\n</recent-context>\n</conversation-checkpoint>",
                    v["summary"].as_str().unwrap(),
                    v["recent"].as_str().unwrap()
                ),
            )),
            "user" | "synthetic" | "skill" => {
                out.push(("user".into(), v["text"].as_str().unwrap().into()))
            }
            "system" => out.push(("system".into(), v["text"].as_str().unwrap().into())),
            "assistant" => {
                let text: Vec<&str> = v["content"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .filter(|c| c["type"] == "text")
                    .map(|c| c["text"].as_str().unwrap())
                    .collect();
                out.push(("assistant".into(), text.join("\n")));
            }
            _ => {}
        }
    }
    out
}

/// `show --json`'s messages as (role, text of the text blocks), and the doc.
fn shown(o: &O, s: &str) -> (Vec<(String, String)>, Value) {
    let (doc, code) = json({
        let mut c = o.cmd();
        c.args(["show", s, "--json"]);
        c
    });
    assert_eq!(code, 0, "{doc:#}");
    let msgs = doc["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            let text: Vec<&str> = m["blocks"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|b| b["type"] == "text")
                .map(|b| b["text"].as_str().unwrap())
                .collect();
            (m["role"].as_str().unwrap().to_string(), text.join("\n"))
        })
        .collect();
    (msgs, doc)
}

/// opencode continues session `s`: `n` exchanges appended after every row (big token counts,
/// so the session is over any threshold again).
fn continue_session(o: &O, s: &str, n: i64, tag: &str) {
    let c = o.conn();
    let (seq, t): (i64, i64) = c
        .query_row(
            "SELECT MAX(seq), MAX(time_created) FROM session_message WHERE session_id = ?1",
            [s],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    for k in 1..=n {
        let user = serde_json::json!({"text": format!("{tag} request {k}: now rename module_{k}.rs to core_{k}.rs"), "time": {"created": t + 10 * k}});
        let reply = serde_json::json!({"agent": "build", "model": {"id": "gpt-4o", "providerID": "openai", "variant": "default"},
            "content": [{"type": "text", "text": format!("Renamed module_{k}.rs to core_{k}.rs. {}", "Checked every caller and updated the imports. ".repeat(30))}], "finish": "stop",
            "tokens": {"input": 90000, "output": 100, "reasoning": 0, "cache": {"read": 0, "write": 0}},
            "time": {"created": t + 10 * k + 1, "completed": t + 10 * k + 2}});
        for (j, (kind, data)) in [("user", user), ("assistant", reply)]
            .into_iter()
            .enumerate()
        {
            c.execute(
                "INSERT INTO session_message (id, session_id, type, seq, time_created, time_updated, data) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?5, ?6)",
                rusqlite::params![
                    format!("msg_{tag}{k}{j}"),
                    s,
                    kind,
                    seq + 2 * k - 1 + j as i64,
                    t + 10 * k + j as i64,
                    data.to_string()
                ],
            )
            .unwrap();
        }
    }
}

/// What agent-db wrote, replayed through `history.ts` and `to-llm-message.ts`: the checkpoint
/// (one user message holding agent-db's summary and the kept tail) and the rows opencode added
/// after it; agent-db's own reading (`show --json`) is that same list, its head labelled
/// agent-db's summary. agent-db read the compaction row as two user messages before.
#[test]
fn opencode_v2_replay_sends_agent_dbs_compaction_as_one_checkpoint_then_the_rest() {
    let o = O::new(V2Era::Newest, 1);
    let s = o.strings("SELECT id FROM session_v2").remove(0);
    let doc = compact(
        &o,
        &[
            "--all-over",
            "0",
            "--keep-tokens",
            "80",
            "--strategy",
            "extractive",
        ],
    );
    assert_eq!(ids_with_status(&doc, "compacted"), vec![s.clone()]);
    continue_session(&o, &s, 1, "continued");
    let want = lowered(&o.sent(&s));
    assert_eq!(want.len(), 3, "{want:?}");
    let (role, head) = &want[0];
    assert_eq!(role, "user");
    assert!(
        head.starts_with("<conversation-checkpoint>\n")
            && head.contains("[agent-db compaction summary]")
    );
    assert!(
        head.contains("\n<recent-context>\n[User]: ")
            || head.contains("\n<recent-context>\n[Assistant]: "),
        "{head}"
    );
    assert!(want[1].1.starts_with("continued request 1"));
    let (got, doc) = shown(&o, &s);
    assert_eq!(got, want);
    assert_eq!(doc["messages"][0]["summary_by"], "agent-db", "{doc:#}");
    assert!(doc["messages"][1].get("summary_by").is_none());
}

/// A compaction opencode wrote itself (no agent-db audit row, no agent-db header) is read as the
/// checkpoint opencode sends, labelled `opencode's own summary`, and a compaction by agent-db
/// after it keeps what it says.
#[test]
fn opencode_v2_replay_of_opencodes_own_compaction_is_its_own_summary_and_kept() {
    const FACT: &str = "the cache key is ZEBRA_4242 under src/own/summary_keys.rs";
    let o = O::new(V2Era::Newest, 1);
    let s = o.strings("SELECT id FROM session_v2").remove(0);
    let c = o.conn();
    c.execute(
        "INSERT INTO session_message (id, session_id, type, seq, time_created, time_updated, data) \
         SELECT 'msg_own_cmp', session_id, 'compaction', MAX(seq) + 1, MAX(time_created) + 1, MAX(time_created) + 1, ?2 \
         FROM session_message WHERE session_id = ?1",
        rusqlite::params![
            s,
            serde_json::json!({"status": "completed", "reason": "auto",
                "summary": format!("## Goal\nShip the renames.\n\n## Discoveries\n- {FACT}"),
                "recent": "[User]: keep the old names exported\n\n[Assistant]: Kept them as aliases.",
                "time": {"created": 1}})
            .to_string()
        ],
    )
    .unwrap();
    continue_session(&o, &s, 2, "after");
    let want = lowered(&o.sent(&s));
    assert_eq!(want.len(), 5, "{want:?}");
    let (got, doc) = shown(&o, &s);
    assert_eq!(got, want);
    assert_eq!(doc["messages"][0]["summary_by"], "opencode", "{doc:#}");
    let out = o.cmd().args(["show", &s, "--no-pager"]).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("── [0] user · opencode's own summary"),
        "{text}"
    );
    let doc = compact(
        &o,
        &[
            "--all-over",
            "0",
            "--keep-tokens",
            "40",
            "--strategy",
            "extractive",
        ],
    );
    assert_eq!(
        ids_with_status(&doc, "compacted"),
        vec![s.clone()],
        "{doc:#}"
    );
    let now = o.sent(&s);
    assert_eq!(now.len(), 1, "{now:?}");
    let summary = now[0].2["summary"].as_str().unwrap();
    assert!(
        summary.contains("ZEBRA_4242"),
        "the own summary's fact is lost: {summary}"
    );
    assert!(summary.contains("keep the old names exported"), "{summary}");
}

/// The replay can say no: a failed compaction row is no checkpoint (opencode sends nothing for
/// it and every earlier row), and agent-db reads it the same way.
#[test]
fn opencode_v2_replay_a_failed_compaction_is_no_checkpoint() {
    let o = O::new(V2Era::Newest, 1);
    let s = o.strings("SELECT id FROM session_v2").remove(0);
    let before = lowered(&o.sent(&s));
    o.conn()
        .execute(
            "INSERT INTO session_message (id, session_id, type, seq, time_created, time_updated, data) \
             SELECT 'msg_failed_cmp', session_id, 'compaction', MAX(seq) + 1, MAX(time_created) + 1, MAX(time_created) + 1, \
             '{\"status\":\"failed\",\"reason\":\"manual\",\"error\":{\"type\":\"unknown\",\"message\":\"x\"},\"time\":{\"created\":1}}' \
             FROM session_message WHERE session_id = ?1",
            [&s],
        )
        .unwrap();
    let want = lowered(&o.sent(&s));
    assert_eq!(want, before);
    assert!(!want
        .iter()
        .any(|(_, t)| t.contains("<conversation-checkpoint>")));
    let (got, doc) = shown(&o, &s);
    assert_eq!(got, want);
    assert!(doc["messages"][0].get("summary_by").is_none(), "{doc:#}");
}

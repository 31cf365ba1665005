//! opencode's `opencode.db` end to end, on generated stores of each era (1.14 drizzle, 1.18
//! Effect, upgraded): the selection against the test's own SQL, a compaction read back by our
//! replay of opencode's loading rule (`opencode_replay.rs`; `real_opencode.rs` runs opencode
//! itself) with every other row and table compared by the
//! test's own dumps, restore byte for byte, an unknown newer schema, bad rows, prune, and the
//! llm strategy and hooks.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use agent_db_synth::opencode::{model_limit, OpencodeEra, WRAP_MS};
use serde_json::Value;

use crate::common::{bare_cmd, ids_agree, ids_with_status, json, Env, MiniLlm};
use crate::opencode_replay::{check_compacted, load, Sent};

const HEADER: &str = "[agent-db compaction summary]";

/// A generated opencode store (seed 7, message sizes times 0.5) and the checks below.
struct O(Env);

impl std::ops::Deref for O {
    type Target = Env;
    fn deref(&self) -> &Env {
        &self.0
    }
}

impl O {
    fn new(preset: &str, n: usize) -> O {
        O(Env::opencode(preset, n, 7, 0.5))
    }

    /// Every row of every table but agent-db's own, keyed by table then by rowid.
    fn dump(&self) -> Dump {
        let c = self.conn();
        let tables = self.ids(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'agent_db_%' \
             AND name <> 'sqlite_sequence' ORDER BY name",
        );
        let mut out = BTreeMap::new();
        for t in tables {
            let mut st = c
                .prepare(&format!("SELECT rowid, * FROM \"{t}\" ORDER BY rowid"))
                .unwrap();
            let n = st.column_count();
            let rows = st
                .query_map([], |r| {
                    let cells = (1..n)
                        .map(|i| r.get_ref(i).map(crate::common::cell))
                        .collect::<rusqlite::Result<Vec<_>>>()?;
                    Ok((r.get::<_, i64>(0)?, cells))
                })
                .unwrap();
            out.insert(t, rows.map(|r| r.unwrap()).collect());
        }
        out
    }

    /// The sessions over `ratio` by the test's own rule: the newest finished assistant (by
    /// `time_created`, then `id`); its context is `tokens.total`, else input + output + cache,
    /// or the output of a summary; over the generator's model windows.
    fn over(&self, ratio: f64) -> BTreeSet<String> {
        let c = self.conn();
        let mut st = c
            .prepare(
                "SELECT s.id, (SELECT m.data FROM message m WHERE m.session_id = s.id \
                 AND json_extract(m.data, '$.role') = 'assistant' AND json_extract(m.data, '$.finish') IS NOT NULL \
                 ORDER BY m.time_created DESC, m.id DESC LIMIT 1) FROM session s",
            )
            .unwrap();
        let rows: Vec<(String, Option<String>)> = st
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
            .unwrap()
            .map(|r| r.unwrap())
            .collect();
        rows.into_iter()
            .filter_map(|(id, data)| {
                let v: Value = serde_json::from_str(&data?).ok()?;
                let t = &v["tokens"];
                let ctx = if v["summary"] == Value::Bool(true) {
                    t["output"].as_i64()?
                } else if t["total"].as_i64().unwrap_or(0) > 0 {
                    t["total"].as_i64()?
                } else {
                    [
                        &t["input"],
                        &t["output"],
                        &t["cache"]["read"],
                        &t["cache"]["write"],
                    ]
                    .iter()
                    .map(|x| x.as_i64().unwrap_or(0))
                    .sum()
                };
                let limit = usable(v["modelID"].as_str()?)?;
                (ctx as f64 / limit as f64 >= ratio).then_some(id)
            })
            .collect()
    }

    fn sessions(&self) -> Vec<String> {
        self.ids("SELECT id FROM session ORDER BY id")
    }

    fn loads(&self) -> BTreeMap<String, Result<Vec<Sent>, String>> {
        let c = self.conn();
        self.sessions()
            .into_iter()
            .map(|s| {
                let l = load(&c, &s);
                (s, l)
            })
            .collect()
    }

    fn checks(&self) {
        let c = self.conn();
        let ok: String = c
            .query_row("PRAGMA integrity_check", [], |r| r.get(0))
            .unwrap();
        assert_eq!(ok, "ok");
        let fk: i64 = c
            .query_row("SELECT COUNT(*) FROM pragma_foreign_key_check", [], |r| {
                r.get(0)
            })
            .unwrap();
        assert_eq!(fk, 0, "foreign_key_check");
    }
}

/// The input opencode 1.18.33's `isOverflow` lets a request use, for the generator's models:
/// models.dev's separate input limit minus min(20,000, max output) where the model has one
/// (gpt-5: input 272,000, output 128,000), else the window minus max output (claude-*-4-5:
/// output 64,000; gpt-4o: 16,384; gemini-2.5-pro: 65,536), max output = min(output, 32,000).
fn usable(model: &str) -> Option<i64> {
    let window = model_limit(model)?;
    let (input, output) = match model {
        "gpt-5" => (Some(272_000), 128_000),
        "claude-opus-4-5" | "claude-haiku-4-5" => (None, 64_000),
        "gpt-4o" => (None, 16_384),
        "gemini-2.5-pro" => (None, 65_536),
        _ => return None,
    };
    let max_out = i64::min(output, 32_000);
    Some(match input {
        Some(i) => i - max_out.min(20_000),
        None => window - max_out,
    })
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
fn list_all_over_selects_exactly_the_sessions_over_the_ratio() {
    for preset in OpencodeEra::PRESETS {
        let o = O::new(preset, 24);
        let (doc, code) = json({
            let mut c = o.cmd();
            c.args(["list", "--all-over", "0.7", "--idle", "0", "--json"]);
            c
        });
        assert_eq!(code, 0, "{preset}");
        assert_eq!(doc["store"]["kind"], "opencode");
        let got: BTreeSet<String> = ids_with_status(&doc, "selected").into_iter().collect();
        let want = o.over(0.7);
        assert!(want.len() >= 4, "{preset}: only {} over 0.7", want.len());
        assert!(want.len() < 20, "{preset}: {} over 0.7", want.len());
        assert_eq!(got, want, "{preset}");
        let mut c = o.cmd();
        c.args(["list", "--all-over", "0.7", "--idle", "0", "--ids"]);
        ids_agree(c, &doc);
        // At 1.0: exactly the sessions opencode's overflow rule would compact, among them
        // models with a separate input limit (gpt-5) and without (claude).
        let (doc, code) = json({
            let mut c = o.cmd();
            c.args(["list", "--all-over", "1", "--idle", "0", "--json"]);
            c
        });
        assert_eq!(code, 0, "{preset}");
        let got: BTreeSet<String> = ids_with_status(&doc, "selected").into_iter().collect();
        assert_eq!(got, o.over(1.0), "{preset}");
    }
}

#[test]
fn all_over_one_is_opencodes_overflow_rule_with_and_without_an_input_limit() {
    let o = O::new("opencode-1.18", 4);
    let c = o.conn();
    // Two sessions on gpt-5 (input limit 272,000: overflow at 252,000 of its 400,000 window),
    // two on claude-opus-4-5 (no input limit: overflow at 168,000 of 200,000); one of each
    // just under, one at the limit.
    let ids = o.sessions();
    let cases = [
        (&ids[0], "gpt-5", 251_999, false),
        (&ids[1], "gpt-5", 252_000, true),
        (&ids[2], "claude-opus-4-5", 167_999, false),
        (&ids[3], "claude-opus-4-5", 168_000, true),
    ];
    for (s, model, total, _) in &cases {
        let t: i64 = c
            .query_row("SELECT MAX(time_created) + 1000 FROM message", [], |r| {
                r.get(0)
            })
            .unwrap();
        let data = serde_json::json!({"role": "assistant", "parentID": "msg_x", "mode": "build",
            "agent": "build", "path": {"cwd": "/w", "root": "/w"}, "cost": 0,
            "tokens": {"total": total, "input": total - 100, "output": 100, "reasoning": 0, "cache": {"read": 0, "write": 0}},
            "modelID": model, "providerID": "p", "time": {"created": t, "completed": t + 1}, "finish": "stop"});
        c.execute(
            "INSERT INTO message (id, session_id, time_created, time_updated, data) VALUES (?1, ?2, ?3, ?3, ?4)",
            rusqlite::params![format!("msg_zz{s}"), s, t, data.to_string()],
        )
        .unwrap();
    }
    let (doc, code) = json({
        let mut c = o.cmd();
        c.args(["list", "--all-over", "1", "--idle", "0", "--json"]);
        c
    });
    assert_eq!(code, 0, "{doc:#}");
    let got: BTreeSet<String> = ids_with_status(&doc, "selected").into_iter().collect();
    let want: BTreeSet<String> = cases
        .iter()
        .filter(|c| c.3)
        .map(|c| c.0.to_string())
        .collect();
    assert_eq!(got, want, "{doc:#}");
    assert_eq!(o.over(1.0), want);
}

/// The rows of `message` and `part` that exist now and did not before, by table.
fn appended(before: &Dump, after: &Dump, table: &str) -> Vec<Vec<String>> {
    let old: BTreeSet<&Vec<String>> = before[table].values().collect();
    after[table]
        .values()
        .filter(|r| !old.contains(r))
        .cloned()
        .collect()
}

type Dump = BTreeMap<String, BTreeMap<i64, Vec<String>>>;

/// Appended: exactly two messages and two parts per compacted session, last in opencode's
/// `(time_created, id)` order; nothing else changed but `session.time_updated`.
fn only_appended(o: &O, preset: &str, before: &Dump, compacted: &BTreeSet<String>) {
    let after = o.dump();
    let c = o.conn();
    let msgs = appended(before, &after, "message");
    let parts = appended(before, &after, "part");
    assert_eq!(msgs.len(), 2 * compacted.len(), "{preset}");
    // The compaction part; the summary's step-start, text and step-finish.
    assert_eq!(parts.len(), 4 * compacted.len(), "{preset}");
    let cols = o.ids("SELECT name FROM pragma_table_info('session') ORDER BY cid");
    let col = |name: &str| cols.iter().position(|c| c == name);
    assert_eq!(after["message"].len(), before["message"].len() + msgs.len());
    for (t, rows) in before {
        match t.as_str() {
            "message" | "part" => {
                for (rowid, r) in rows {
                    assert_eq!(after[t].get(rowid), Some(r), "{preset} {t} row {rowid}");
                }
            }
            "session" => {
                // Only time_updated of a compacted session may move (to the summary's completion,
                // 1 ms after its newest row, when that is later), and its token totals grow by
                // the summary's step-finish tokens, as opencode adds them (id is the first column).
                let moved = ["time_updated", "tokens_input", "tokens_output"].map(col);
                for (rowid, r) in rows {
                    let new = &after[t][rowid];
                    let id: String = serde_json::from_str(
                        r[0].trim_start_matches("Text(").trim_end_matches(')'),
                    )
                    .unwrap();
                    let differ: Vec<usize> = (0..r.len()).filter(|&i| r[i] != new[i]).collect();
                    if !compacted.contains(&id) {
                        assert!(differ.is_empty(), "{preset} session {id}");
                        continue;
                    }
                    assert!(
                        differ.iter().all(|i| moved.contains(&Some(*i))),
                        "{preset} session {id}: {differ:?}"
                    );
                    let finish: String = c
                        .query_row(
                            "SELECT p.data FROM part p WHERE p.session_id = ?1 AND json_extract(p.data, '$.type') = 'step-finish' \
                             ORDER BY p.time_created DESC, p.id DESC LIMIT 1",
                            [&id],
                            |x| x.get(0),
                        )
                        .unwrap();
                    let finish: Value = serde_json::from_str(&finish).unwrap();
                    let int = |v: &str| -> i64 {
                        v.trim_start_matches("Integer(")
                            .trim_end_matches(')')
                            .parse()
                            .unwrap_or(0)
                    };
                    for (name, key) in [("tokens_input", "input"), ("tokens_output", "output")] {
                        if let Some(i) = col(name) {
                            assert_eq!(
                                int(&new[i]) - int(&r[i]),
                                finish["tokens"][key].as_i64().unwrap(),
                                "{preset} session {id} {name}"
                            );
                        }
                    }
                }
            }
            _ => assert_eq!(rows, &after[t], "{preset} table {t}"),
        }
    }
    let newest: Vec<(String, i64)> = o
        .ids("SELECT s.id || '|' || (SELECT MAX(time_created) FROM message WHERE session_id = s.id) FROM session s WHERE EXISTS (SELECT 1 FROM message WHERE session_id = s.id)")
        .into_iter()
        .map(|x| {
            let (a, b) = x.split_once('|').unwrap();
            (a.to_string(), b.parse().unwrap())
        })
        .collect();
    for (s, max) in newest.iter().filter(|(s, _)| compacted.contains(s)) {
        let last: String = c
            .query_row(
                "SELECT data FROM message WHERE session_id = ?1 ORDER BY time_created DESC, id DESC LIMIT 1",
                [s],
                |r| r.get(0),
            )
            .unwrap();
        let v: Value = serde_json::from_str(&last).unwrap();
        assert_eq!(v["summary"], true, "{preset} {s}");
        assert_eq!(v["finish"], "stop");
        assert_eq!(v["mode"], "compaction");
        // The figures opencode 1.18.33 writes on its own summary: total = the sum of the parts,
        // the same tokens on its step-finish part, and the compaction message's `summary`.
        let t = &v["tokens"];
        assert!(
            t["input"].as_i64().unwrap() > 0 && t["output"].as_i64().unwrap() > 0,
            "{preset} {s}: {t}"
        );
        assert_eq!(
            t["total"].as_i64(),
            Some(t["input"].as_i64().unwrap() + t["output"].as_i64().unwrap()),
            "{preset} {s}"
        );
        let types = o.ids(&format!(
            "SELECT json_extract(p.data, '$.type') FROM part p JOIN message m ON m.id = p.message_id \
             WHERE m.session_id = '{s}' AND m.time_created = {max} ORDER BY p.id"
        ));
        assert_eq!(types, ["step-start", "text", "step-finish"], "{preset} {s}");
        let parent = v["parentID"].as_str().unwrap();
        let user: String = c
            .query_row("SELECT data FROM message WHERE id = ?1", [parent], |r| {
                r.get(0)
            })
            .unwrap();
        let user: Value = serde_json::from_str(&user).unwrap();
        assert_eq!(
            user["summary"],
            serde_json::json!({"diffs": []}),
            "{preset} {s}"
        );
        assert_eq!(v["time"]["created"].as_i64(), Some(*max));
        let updated: i64 = c
            .query_row("SELECT time_updated FROM session WHERE id = ?1", [s], |r| {
                r.get(0)
            })
            .unwrap();
        assert!(updated > *max, "{preset} {s}: time_updated {updated}");
    }
}

#[test]
fn opencode_replay_loads_the_extractive_compaction_and_restore_is_byte_for_byte() {
    for preset in OpencodeEra::PRESETS {
        let o = O::new(preset, 24);
        let before = o.dump();
        let loads_before = o.loads();
        let want = o.over(0.7);
        let doc = compact(&o, &["--all-over", "0.7", "--strategy", "extractive"]);
        let compacted: BTreeSet<String> = ids_with_status(&doc, "compacted").into_iter().collect();
        assert!(compacted.len() >= 4, "{preset}: {doc:#}");
        assert!(compacted.is_subset(&want), "{preset}");
        o.checks();
        let c = o.conn();
        for s in o.sessions() {
            let now = load(&c, &s).unwrap();
            let was = loads_before[&s].as_ref().unwrap();
            if compacted.contains(&s) {
                check_compacted(was, &now, HEADER).unwrap_or_else(|e| panic!("{preset} {s}: {e}"));
            } else {
                assert_eq!(&now, was, "{preset} {s}");
            }
        }
        only_appended(&o, preset, &before, &compacted);
        // The store really has sessions at the 48-bit id wrap (agent-db's rows follow a session's
        // newest row, so they sit there too).
        let wrapped = o.ids(&format!(
            "SELECT DISTINCT session_id FROM message WHERE time_created BETWEEN {} AND {}",
            WRAP_MS - 15 * 60_000,
            WRAP_MS + 15 * 60_000
        ));
        assert!(!wrapped.is_empty(), "{preset}: no session at the wrap");
        // Restore gives back every row.
        let mut r = o.cmd();
        r.args(["restore", "--all-since", "1h"]);
        let out = r.output().unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(o.dump(), before, "{preset}: restore");
        o.checks();
    }
}

#[test]
fn sessions_compacted_by_opencode_are_loaded_by_its_rule_and_compacted_again() {
    let o = O::new("opencode-1.18", 24);
    let c = o.conn();
    // Sessions 3 and 8 carry opencode's own compactions (one manual with a tail).
    let with_tail = o.ids(
        "SELECT DISTINCT m.session_id FROM part p JOIN message m ON m.id = p.message_id \
         WHERE json_extract(p.data, '$.type') = 'compaction' AND json_extract(p.data, '$.tail_start_id') IS NOT NULL",
    );
    assert!(!with_tail.is_empty());
    for s in &with_tail {
        let sent = load(&c, s).unwrap();
        assert_eq!(sent[0].texts, ["What did we do so far?"], "{s}");
        let meta = {
            let mut cmd = o.cmd();
            cmd.args(["show", s, "--json"]);
            json(cmd).0
        };
        assert!(
            meta.to_string().contains("What did we do so far?"),
            "{s}: {meta:#}"
        );
    }
    drop(c);
    let before = o.loads();
    let doc = compact(&o, &["--all-over", "0", "--strategy", "extractive"]);
    let c = o.conn();
    for s in with_tail
        .iter()
        .filter(|s| ids_with_status(&doc, "compacted").contains(s))
    {
        check_compacted(before[s].as_ref().unwrap(), &load(&c, s).unwrap(), HEADER)
            .unwrap_or_else(|e| panic!("{s}: {e}"));
    }
}

/// The summary opencode now sends for `s` (the assistant right after the compaction question).
fn sent_summary(o: &O, s: &str) -> String {
    let sent = load(&o.conn(), s).unwrap();
    assert_eq!(sent[0].texts, ["What did we do so far?"], "{s}");
    assert_eq!(sent[1].role, "assistant", "{s}");
    sent[1].texts.join("\n")
}

/// What of a summary must survive a re-compaction. Of another writer's summary (carried
/// forward whole, also inside an agent-db summary), every non-empty line. Of agent-db's own
/// sections, which a re-compaction writes anew from the original messages, the facts they name:
/// each quoted user turn, each path (a word with a slash; a glob pattern is none) and each `code
/// span` (commands, names).
/// A withdrawn section (whose items move) is left out.
fn facts(summary: &str) -> Vec<String> {
    let Some((_, body)) = summary
        .strip_prefix(HEADER)
        .and_then(|b| b.split_once("\n\n"))
    else {
        return lines(summary);
    };
    let mut out = Vec::new();
    let mut carried = false;
    for line in body.lines().take_while(|l| !l.starts_with("## Withdrawn")) {
        let line = line.trim();
        if line.starts_with("## Earlier summary") {
            carried = true;
            continue;
        }
        if line.starts_with("(end of the earlier summary") {
            carried = false;
            continue;
        }
        if carried {
            out.extend(lines(line));
            continue;
        }
        if let Some(quote) = line
            .split_once(". \"")
            .filter(|(n, _)| n.chars().all(|c| c.is_ascii_digit()))
            .and_then(|(_, q)| q.strip_suffix('"'))
        {
            out.push(quote.to_string());
        }
        out.extend(line.split('`').skip(1).step_by(2).map(str::to_string));
        out.extend(
            line.split_whitespace()
                .filter(|w| !w.contains('`'))
                .map(|w| w.trim_matches(|c: char| "\"'(),;:".contains(c)))
                .filter(|w| w.contains('/') && !w.contains('*'))
                .map(str::to_string),
        );
    }
    out.sort();
    out.dedup();
    out
}

fn lines(text: &str) -> Vec<String> {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(str::to_string)
        .collect()
}

/// Every text opencode sends now (the summary and the kept tail), by the test's loader.
fn sent_text(o: &O, s: &str) -> String {
    load(&o.conn(), s)
        .unwrap()
        .iter()
        .map(|m| m.texts.join("\n"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Continue `s` as opencode does after a compaction: a user turn and a finished assistant
/// reply, each with one text part, after every existing row; the session's `time_updated`
/// follows (opencode touches it).
fn continue_session(o: &O, s: &str, n: usize) {
    let c = o.conn();
    let t: i64 = c
        .query_row(
            "SELECT MAX(time_created) FROM (SELECT time_created FROM message WHERE session_id = ?1 \
             UNION ALL SELECT time_created FROM part WHERE session_id = ?1)",
            [s],
            |r| r.get(0),
        )
        .unwrap();
    let last: String = c
        .query_row(
            "SELECT data FROM message WHERE session_id = ?1 AND json_extract(data, '$.role') = 'user' \
             ORDER BY time_created DESC, id DESC LIMIT 1",
            [s],
            |r| r.get(0),
        )
        .unwrap();
    let user: Value = serde_json::from_str(&last).unwrap();
    let model = &user["model"];
    for k in 0..n {
        let t = t + 1_000 + 10 * k as i64;
        let (u, a) = (
            format!("msg_zc{k:02}u{t}{s}"),
            format!("msg_zc{k:02}a{t}{s}"),
        );
        let udata = serde_json::json!({"role": "user", "time": {"created": t}, "agent": "build", "model": model});
        let adata = serde_json::json!({"role": "assistant", "parentID": u, "mode": "build", "agent": "build",
            "path": {"cwd": "/w", "root": "/w"}, "cost": 0,
            "tokens": {"input": 900, "output": 100, "reasoning": 0, "cache": {"read": 0, "write": 0}},
            "modelID": model["modelID"], "providerID": model["providerID"],
            "time": {"created": t + 1, "completed": t + 2}, "finish": "stop"});
        let text = "lorem ipsum dolor sit amet ".repeat(60);
        for (id, time, data, part) in [
            (
                &u,
                t,
                udata,
                format!("Please also check the continuation step {k} of src/cont_{k}.rs."),
            ),
            (&a, t + 1, adata, format!("Checked src/cont_{k}.rs: {text}")),
        ] {
            c.execute(
                "INSERT INTO message (id, session_id, time_created, time_updated, data) VALUES (?1, ?2, ?3, ?3, ?4)",
                rusqlite::params![id, s, time, data.to_string()],
            )
            .unwrap();
            let pd = serde_json::json!({"type": "text", "text": part});
            c.execute(
                "INSERT INTO part (id, message_id, session_id, time_created, time_updated, data) VALUES (?1, ?2, ?3, ?4, ?4, ?5)",
                rusqlite::params![format!("prt_zc{k:02}{id}"), id, s, time, pd.to_string()],
            )
            .unwrap();
        }
        c.execute(
            "UPDATE session SET time_updated = ?1 WHERE id = ?2",
            rusqlite::params![t + 2, s],
        )
        .unwrap();
    }
}

#[test]
fn a_second_compaction_carries_the_first_summarys_facts() {
    for preset in ["opencode-1.18", "opencode-1.14"] {
        let o = O::new(preset, 8);
        let strategy = "extractive";
        // Sessions opencode compacted itself, and sessions agent-db compacts first.
        let own = o.ids(
            "SELECT DISTINCT m.session_id FROM part p JOIN message m ON m.id = p.message_id \
             WHERE json_extract(p.data, '$.type') = 'compaction' AND json_extract(p.data, '$.tail_start_id') IS NOT NULL",
        );
        assert!(preset != "opencode-1.18" || !own.is_empty());
        let doc = {
            let mut c = o.cmd();
            c.args([
                "compact",
                "--idle",
                "0",
                "--yes",
                "--json",
                "--all-over",
                "0.7",
                "--strategy",
                "extractive",
            ]);
            json(c).0
        };
        let first: BTreeSet<String> = ids_with_status(&doc, "compacted").into_iter().collect();
        assert!(first.len() >= 3, "{doc:#}");
        let mut targets: Vec<String> = first.iter().cloned().collect();
        targets.extend(own.iter().filter(|s| !first.contains(*s)).cloned());
        let mut earlier = BTreeMap::new();
        for s in &targets {
            let summary = sent_summary(&o, s);
            assert!(first.contains(s) == summary.starts_with(HEADER), "{s}");
            earlier.insert(s.clone(), facts(&summary));
            continue_session(&o, s, 6);
        }
        let mut c = o.cmd();
        c.args([
            "compact",
            "--idle",
            "0",
            "--yes",
            "--json",
            "--keep-tokens",
            "200",
            "--strategy",
            strategy,
        ]);
        c.args(&targets);
        let (doc, code) = json(c);
        assert_eq!(code, 0, "{preset}: {doc:#}");
        let second: BTreeSet<String> = ids_with_status(&doc, "compacted").into_iter().collect();
        assert_eq!(
            second,
            targets.iter().cloned().collect(),
            "{preset}: {doc:#}"
        );
        for s in &targets {
            let now = sent_summary(&o, s);
            assert!(now.starts_with(HEADER), "{preset} {s}");
            let sent = sent_text(&o, s);
            let facts = &earlier[s];
            assert!(!facts.is_empty(), "{s}");
            for f in facts {
                assert!(
                    sent.contains(f.as_str()),
                    "{preset} {s}: the earlier summary's {f:?} is lost:\n{now}"
                );
            }
        }
        o.checks();
    }
}

#[test]
fn restore_after_opencode_went_on_needs_force_and_keeps_what_opencode_wrote() {
    let o = O::new("opencode-1.18", 24);
    let before = o.loads();
    let doc = compact(&o, &["--all-over", "0.7", "--strategy", "extractive"]);
    let s = ids_with_status(&doc, "compacted")[0].clone();
    // opencode continues the session after the compaction.
    continue_session(&o, &s, 2);
    let added: Vec<String> = o.ids(&format!(
        "SELECT id FROM message WHERE session_id = '{s}' AND id LIKE 'msg_zc%' ORDER BY time_created, id"
    ));
    assert_eq!(added.len(), 4);
    // history says what restore does: it needs --force.
    let out = o.cmd().args(["history", &s]).output().unwrap();
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(table.contains("changed since"), "{table}");
    assert!(!table.contains("restorable"), "{table}");
    let out = o.cmd().args(["restore", &s]).output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(7),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = o.cmd().args(["restore", &s, "--force"]).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Nothing opencode wrote is lost: it loads the original history, then the later turns.
    let c = o.conn();
    let now = load(&c, &s).unwrap();
    let was = before[&s].as_ref().unwrap();
    assert_eq!(&now[..was.len()], &was[..], "{s}");
    let later: Vec<&str> = now[was.len()..].iter().map(|m| m.id.as_str()).collect();
    assert_eq!(later, added.iter().map(String::as_str).collect::<Vec<_>>());
    // (The load above proves agent-db's compaction rows are gone: opencode would stop there.)
    // The session is as new as its newest message.
    let (updated, newest): (i64, i64) = c
        .query_row(
            "SELECT time_updated, (SELECT MAX(time_created) FROM message WHERE session_id = ?1) FROM session WHERE id = ?1",
            [&s],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    assert!(
        updated >= newest,
        "{s}: time_updated {updated} < newest message {newest}"
    );
    o.checks();
}

#[test]
fn a_newer_migration_is_refused_with_exit_4() {
    for (preset, sql) in [
        ("opencode-1.18", "INSERT INTO migration VALUES ('20270101000000_future', 1)"),
        (
            "opencode-1.14",
            "INSERT INTO __drizzle_migrations (hash, created_at, name) VALUES ('', 1, '20270101000000_future')",
        ),
    ] {
        let o = O::new(preset, 3);
        o.conn().execute(sql, []).unwrap();
        let before = crate::common::files_hash(&o.db);
        for args in [&["list"][..], &["compact", "--all-over", "0", "--idle", "0", "--yes"]] {
            let out = o.cmd().args(args).output().unwrap();
            assert_eq!(out.status.code(), Some(4), "{preset} {args:?}");
            let err = String::from_utf8_lossy(&out.stderr);
            assert!(err.contains("20270101000000_future") && err.contains("newer"), "{err}");
            // ... and names the newest opencode migration agent-db knows.
            assert!(err.contains("20260622202450_simplify_session_input"), "{err}");
        }
        assert_eq!(crate::common::files_hash(&o.db), before);
    }
}

#[test]
fn bad_rows_fail_only_their_session() {
    let o = O::new("opencode-1.18", 16);
    let ids = o.over(0.7).into_iter().collect::<Vec<_>>();
    assert!(ids.len() >= 4, "{ids:?}");
    let c = o.conn();
    // Unparsable message data, in the newest message (opencode reads it first).
    let newest = |s: &str| -> String {
        c.query_row(
            "SELECT id FROM message WHERE session_id = ?1 ORDER BY time_created DESC, id DESC LIMIT 1",
            [s],
            |r| r.get(0),
        )
        .unwrap()
    };
    let bad_json = newest(&ids[0]);
    c.execute(
        "UPDATE message SET data = '{\"role\":\"assistant\",' WHERE id = ?1",
        [&bad_json],
    )
    .unwrap();
    // A message without parts.
    let bare = newest(&ids[1]);
    c.execute("DELETE FROM part WHERE message_id = ?1", [&bare])
        .unwrap();
    // An unknown part type: kept, never interpreted; the session still compacts.
    let m = newest(&ids[2]);
    c.execute(
        "INSERT INTO part (id, message_id, session_id, time_created, time_updated, data) VALUES ('prt_zzzzzzzzzzzzzzzzzzzzzzzzzz', ?1, ?2, 1, 1, '{\"type\":\"hologram\",\"beam\":[1]}')",
        [&m, &ids[2]],
    )
    .unwrap();
    drop(c);
    let doc = compact(&o, &["--all-over", "0.7", "--strategy", "extractive"]);
    let failed = ids_with_status(&doc, "failed");
    assert_eq!(failed.len(), 2, "{doc:#}");
    let text = doc.to_string();
    assert!(
        text.contains(&format!("message {bad_json}: data is not valid JSON")),
        "{doc:#}"
    );
    assert!(
        text.contains(&format!("message {bare} has no parts")),
        "{doc:#}"
    );
    let compacted = ids_with_status(&doc, "compacted");
    assert!(compacted.contains(&ids[2]), "{doc:#}");
    assert!(compacted.len() >= 2);
    o.checks();
}

#[test]
fn prune_marks_old_tool_outputs_compacted_and_restores() {
    let o = O::new("opencode-1.14", 8);
    let before = o.dump();
    let doc = compact(&o, &["--all-over", "0.7", "--strategy", "prune"]);
    let pruned = ids_with_status(&doc, "compacted");
    assert!(!pruned.is_empty(), "{doc:#}");
    let after = o.dump();
    assert_eq!(before["message"], after["message"]);
    assert_eq!(
        before["session"], after["session"],
        "prune does not touch the session"
    );
    let mut changed = 0;
    for (rowid, old) in &before["part"] {
        let new = &after["part"][rowid];
        if old == new {
            continue;
        }
        changed += 1;
        // id, message_id, session_id, time_created kept; data gains state.time.compacted;
        // time_updated moves.
        assert_eq!(old[..4], new[..4]);
        let unq = |s: &str| -> Value {
            serde_json::from_str(
                &serde_json::from_str::<String>(
                    s.trim_start_matches("Text(").trim_end_matches(')'),
                )
                .unwrap(),
            )
            .unwrap()
        };
        let (mut a, b) = (unq(&old[5]), unq(&new[5]));
        assert!(a["state"]["time"]["compacted"].is_null());
        assert!(b["state"]["time"]["compacted"].as_i64().unwrap() > 0);
        assert_eq!(a["state"]["output"], b["state"]["output"], "output kept");
        a["state"]["time"]["compacted"] = b["state"]["time"]["compacted"].clone();
        assert_eq!(a, b, "nothing else changed");
        assert_ne!(old[4], new[4], "time_updated bumped");
    }
    assert!(changed > 0);
    let c = o.conn();
    for s in &pruned {
        let sent = load(&c, s).unwrap();
        assert!(!sent.is_empty());
    }
    let out = o
        .cmd()
        .args(["restore", "--all-since", "1h"])
        .output()
        .unwrap();
    assert!(out.status.success());
    assert_eq!(o.dump(), before);
}

#[test]
fn llm_strategy_writes_the_models_summary() {
    let o = O::new("opencode-1.18", 6);
    let server = MiniLlm::start();
    let mut c = o.cmd();
    c.args([
        "compact",
        "--all-over",
        "0.7",
        "--idle",
        "0",
        "--yes",
        "--json",
    ])
    .args([
        "--strategy",
        "llm",
        "--llm-provider",
        "openai",
        "--model",
        "m",
    ])
    .arg("--base-url")
    .arg(server.base_url())
    .env("AGENT_DB_API_KEY", "sk-opencode-test");
    let (doc, code) = json(c);
    assert_eq!(code, 0, "{doc:#}");
    let done = ids_with_status(&doc, "compacted");
    assert!(!done.is_empty(), "{doc:#}");
    assert!(server.requests() >= done.len());
    let conn = o.conn();
    for s in &done {
        let sent = load(&conn, s).unwrap();
        assert!(
            sent[1]
                .texts
                .join("\n")
                .contains("The user asked for a refactor"),
            "{s}"
        );
    }
}

#[test]
fn a_before_hook_supplies_the_summary() {
    use std::os::unix::fs::PermissionsExt;
    let o = O::new("opencode-1.14", 6);
    let dir = o.dir.path().join(".agent-db").join("hooks");
    std::fs::create_dir_all(&dir).unwrap();
    let hook = dir.join("summarizer");
    std::fs::write(
        &hook,
        "#!/bin/sh\ncase \"$1\" in\nhook) echo before_compaction ;;\nrun) cat >/dev/null; echo '{\"summary\":\"HOOK SUMMARY for opencode\"}' ;;\nesac\n",
    )
    .unwrap();
    std::fs::set_permissions(&hook, std::fs::Permissions::from_mode(0o755)).unwrap();
    let mut c = o.cmd();
    c.current_dir(o.dir.path());
    c.args([
        "compact",
        "--all-over",
        "0.7",
        "--idle",
        "0",
        "--yes",
        "--json",
    ]);
    let (doc, code) = json(c);
    assert_eq!(code, 0, "{doc:#}");
    let done = ids_with_status(&doc, "compacted");
    assert!(!done.is_empty(), "{doc:#}");
    let conn = o.conn();
    for s in &done {
        let sent = load(&conn, s).unwrap();
        assert!(
            sent[1]
                .texts
                .join("\n")
                .contains("HOOK SUMMARY for opencode"),
            "{s}"
        );
    }
}

#[test]
fn default_path_follows_opencode_db_and_xdg() {
    let o = O::new("opencode-1.18", 2);
    let data = o.dir.path().join("xdg");
    std::fs::create_dir_all(data.join("opencode")).unwrap();
    std::fs::copy(&o.db, data.join("opencode").join("opencode.db")).unwrap();
    let mut c = bare_cmd(o.dir.path());
    c.env("XDG_DATA_HOME", &data)
        .args(["--agent", "opencode", "list", "--json"]);
    let (doc, code) = json(c);
    assert_eq!(code, 0, "{doc:#}");
    assert_eq!(doc["store"]["kind"], "opencode");
    let mut c = bare_cmd(o.dir.path());
    c.env("OPENCODE_DB", &o.db)
        .args(["--agent", "opencode", "list", "--json"]);
    let (doc, code) = json(c);
    assert_eq!(code, 0, "{doc:#}");
    assert_eq!(
        doc["store"]["path"].as_str().map(PathBuf::from),
        Some(o.db.clone())
    );
}

/// A store-neutral compaction keeping the last `keep` loaded messages.
fn neutral(raw: &str, keep: usize) -> agent_db::store::Compaction {
    let n = agent_db::message::split_raw(raw).unwrap().len();
    agent_db::store::Compaction {
        format: &agent_db::agents::opencode_family::codec::CODEC,
        history: raw.to_string(),
        summary: Some(format!("{HEADER}\nthe work so far")),
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
        store_kind: "opencode".into(),
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

/// The summary's recorded input is the plan's count of the summarized messages when the
/// proposal carries the plan's counts: the figure the writer counts itself without them, and
/// (with counts of one each) the number of summarized messages, so the counts are what is used.
#[test]
fn the_summarys_input_is_the_plans_count_of_the_head() {
    use agent_db::store::{Access, Store, Written};
    let input_of = |counts: Option<usize>| -> (i64, usize) {
        let o = O::new("opencode-1.18", 8);
        let id = o.over(0.7).into_iter().next().unwrap();
        let row = Store::open(&o.db, Access::Read).unwrap().load(&id).unwrap();
        let mut c = neutral(&row.raw_messages, 2);
        let msgs = agent_db::message::decode_all(c.format, &row.raw_messages).unwrap();
        c.message_tokens = match counts {
            None => Vec::new(),
            Some(0) => msgs
                .iter()
                .map(|m| agent_db::tokens::message_tokens(c.format, m))
                .collect(),
            Some(n) => vec![n; msgs.len()],
        };
        let proposal = row.propose(c, audit(&id), None);
        let mut writer = Store::open(&o.db, Access::Write).unwrap();
        let w = writer.commit(&proposal, "2026-11-01T12:00:03Z").unwrap();
        assert!(matches!(w, Written::Committed { .. }), "{w:?}");
        let input = o
            .conn()
            .query_row(
                "SELECT json_extract(data, '$.tokens.input') FROM message WHERE session_id = ?1 \
                 AND json_extract(data, '$.summary') = 1",
                [&id],
                |r| r.get(0),
            )
            .unwrap();
        (input, msgs.len())
    };
    let (counted, n) = input_of(None);
    let (planned, _) = input_of(Some(0));
    let (ones, _) = input_of(Some(1));
    assert!(counted > 0);
    assert_eq!(planned, counted);
    assert!((n as i64 - 2..n as i64).contains(&ones), "{ones} of {n}");
}

#[test]
fn a_live_opencode_write_between_plan_and_commit_is_detected() {
    use agent_db::store::{Access, Store, Written};
    let o = O::new("opencode-1.18", 8);
    let ids: Vec<String> = o.over(0.7).into_iter().collect();
    let store = Store::open(&o.db, Access::Read).unwrap();
    let id = &ids[0];
    // opencode streams into a part (an upsert of its data, time_updated moves).
    let row = store.load(id).unwrap();
    let proposal = row.propose(neutral(&row.raw_messages, 2), audit(id), None);
    o.conn()
        .execute(
            "UPDATE part SET data = json_set(data, '$.text', 'streamed more'), time_updated = time_updated + 1 \
             WHERE id = (SELECT p.id FROM part p JOIN message m ON m.id = p.message_id WHERE m.session_id = ?1 \
             AND json_extract(p.data, '$.type') = 'text' ORDER BY m.time_created DESC, p.id DESC LIMIT 1)",
            [id],
        )
        .unwrap();
    let before = o.dump();
    let mut writer = Store::open(&o.db, Access::Write).unwrap();
    let w = writer.commit(&proposal, "2026-11-01T12:00:02Z").unwrap();
    assert!(
        matches!(w, Written::Changed(ref why) if why.contains("changed since read")),
        "{w:?}"
    );
    assert_eq!(o.dump(), before, "nothing written");
    // A fresh plan of the same session commits, and opencode loads it as planned.
    let row = store.load(id).unwrap();
    let was = load(&o.conn(), id).unwrap();
    let proposal = row.propose(neutral(&row.raw_messages, 2), audit(id), None);
    let w = writer.commit(&proposal, "2026-11-01T12:00:03Z").unwrap();
    assert!(matches!(w, Written::Committed { .. }), "{w:?}");
    let now = load(&o.conn(), id).unwrap();
    assert_eq!(now.len(), 4, "{now:?}");
    assert_eq!(now[0].texts, ["What did we do so far?"]);
    assert_eq!(now[2..], was[was.len() - 2..]);
    o.checks();
}

#[test]
fn a_file_older_than_the_events_migration_gets_no_tail() {
    // opencode before migration 20260323234822_events (1.2.x) ignores tail_start_id.
    let o = O::new("opencode-1.14", 8);
    let c = o.conn();
    c.execute_batch(
        "DROP TABLE event; DROP TABLE event_sequence; \
         DELETE FROM __drizzle_migrations WHERE name >= '20260323234822_events';",
    )
    .unwrap();
    drop(c);
    let before = o.loads();
    let doc = compact(&o, &["--all-over", "0.7", "--strategy", "extractive"]);
    let done = ids_with_status(&doc, "compacted");
    assert!(!done.is_empty(), "{doc:#}");
    let c = o.conn();
    for s in &done {
        let now = load(&c, s).unwrap();
        assert_eq!(
            now.len(),
            2,
            "{s}: only the compaction and its summary load"
        );
        check_compacted(before[s].as_ref().unwrap(), &now, HEADER)
            .unwrap_or_else(|e| panic!("{s}: {e}"));
        let tail: Option<String> = c
            .query_row(
                "SELECT json_extract(p.data, '$.tail_start_id') FROM part p JOIN message m ON m.id = p.message_id \
                 WHERE m.session_id = ?1 AND json_extract(p.data, '$.type') = 'compaction' \
                 ORDER BY m.time_created DESC, m.id DESC LIMIT 1",
                [s],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(tail, None, "{s}: agent-db's compaction names no tail");
    }
    o.checks();
}

//! kodelet at its current schema: migrations through `20260929120000` (runner state, chat turns,
//! image artifacts, `compaction_history`, the conversation search index), with conversations
//! kodelet itself compacted before. Every rule kodelet applies is replayed here, written from
//! kodelet's source (docs/stores.md cites the files): the save-time validation of the display
//! boundary, the display history, `ToSummary`, the artifact cleanup sweep and the search index's
//! pending query. None of it calls agent-db's own code.

use std::collections::BTreeMap;

use agent_db_synth::SynthFormat;
use rusqlite::Connection;
use serde_json::Value;

use crate::common::{ids_with_status, json, Env};

/// kodelet's migrations after the ones `init` creates, as the fixture generator writes them from
/// kodelet's `pkg/db/migrations/` (the generator, not the crate under test).
use agent_db_synth::kodelet_schema::CURRENT as MIGRATIONS;

/// Apply kodelet's migrations up to `to` to a generated store.
pub(crate) fn upgrade(env: &Env, to: i64) {
    let c = env.conn();
    for (version, ddl) in MIGRATIONS.iter().filter(|(v, _)| *v <= to) {
        if !ddl.is_empty() {
            c.execute_batch(ddl).unwrap();
        }
        c.execute(
            "INSERT INTO schema_migrations(version, applied_at, description) VALUES (?1, '2026-10-01 00:00:00 +0000 UTC', 'test')",
            [version],
        )
        .unwrap();
    }
}

fn items(raw: &str) -> Vec<Value> {
    serde_json::from_str(raw).unwrap()
}

fn is_user_text(m: &Value) -> bool {
    m["role"] == "user" && m["content"][0]["type"] == "text"
}

/// kodelet's own compaction, replayed (`ArchiveCompactionLocked` + `SwapContext`): every
/// visible message goes into a segment, `raw_messages` becomes the summary alone, and the
/// boundary is 1; then the conversation goes on (the messages after the chosen user message
/// stand for what was said after kodelet's compaction).
pub(crate) fn kodelet_compacted(c: &Connection, id: &str) -> bool {
    let raw: String = c
        .query_row(
            "SELECT raw_messages FROM conversations WHERE id = ?1",
            [id],
            |r| r.get(0),
        )
        .unwrap();
    let all = items(&raw);
    let Some(j) = (2..all.len()).find(|&i| is_user_text(&all[i])) else {
        return false;
    };
    let summary = serde_json::json!({"content":[{"text":"kodelet's own summary","type":"text"}],"role":"user"});
    let mut new_raw = vec![summary];
    new_raw.extend(all[j..].iter().cloned());
    let history = serde_json::json!({
        "segments": [{"rawMessages": all[..j], "marker": {"id":"k-1","method":"summary","summary":"kodelet's own summary","createdAt":"2026-10-02T00:00:00Z"}}],
        "activeDisplayStart": 1
    });
    c.execute(
        "UPDATE conversations SET raw_messages = ?1, compaction_history = ?2 WHERE id = ?3",
        rusqlite::params![
            serde_json::to_string(&new_raw).unwrap(),
            history.to_string(),
            id
        ],
    )
    .unwrap();
    true
}

/// The display kodelet shows: every segment's messages, then `raw_messages[activeDisplayStart:]`
/// (the stored history `None`: all of `raw_messages`). Panics where kodelet's save-time
/// validation fails ("invalid compaction display boundary").
fn display(raw: &str, history: Option<&str>) -> Vec<Value> {
    let raw = items(raw);
    let Some(h) = history.filter(|h| *h != "null") else {
        return raw;
    };
    let h: Value = serde_json::from_str(h).unwrap();
    let start = h["activeDisplayStart"].as_u64().unwrap() as usize;
    assert!(
        start <= raw.len(),
        "invalid compaction display boundary {start} for {} items",
        raw.len()
    );
    let mut out = Vec::new();
    for s in h["segments"].as_array().unwrap() {
        out.extend(s["rawMessages"].as_array().unwrap().iter().cloned());
    }
    out.extend(raw[start..].iter().cloned());
    out
}

/// `strings.Count(s, "\"role\"")` of kodelet's `ToSummary`.
fn roles(s: &str) -> i64 {
    s.matches("\"role\"").count() as i64
}

/// kodelet's current `ToSummary` (`message_count`, `first_message` before the display
/// override and the 100-byte cut) for a row with a compaction history.
fn to_summary(raw: &str, history: &str) -> (i64, String) {
    let h: Value = serde_json::from_str(history).unwrap();
    let start = h["activeDisplayStart"].as_u64().unwrap() as usize;
    let visible = &items(raw)[start..];
    let mut count = roles(&serde_json::to_string(visible).unwrap());
    for s in h["segments"].as_array().unwrap() {
        count += roles(&s["rawMessages"].to_string());
    }
    let first_source = h["segments"][0]["rawMessages"].as_array().unwrap().clone();
    let mut first = String::new();
    for m in &first_source {
        if m["role"] != "user" {
            continue;
        }
        if let Some(t) = m["content"].as_str().filter(|t| !t.is_empty()) {
            first = t.to_string();
            break;
        }
        if let Some(t) = m["content"][0]["text"].as_str() {
            first = t.to_string();
            break;
        }
    }
    (count, first)
}

/// Every cell of a table, by rowid, with its storage class: the byte-level state.
fn cells(c: &Connection, table: &str) -> BTreeMap<i64, Vec<(String, String)>> {
    let mut s = c.prepare(&format!("SELECT rowid, * FROM {table}")).unwrap();
    let n = s.column_count();
    let names: Vec<String> = s.column_names().iter().map(|x| x.to_string()).collect();
    s.query_map([], |r| {
        let mut row = Vec::new();
        for (i, name) in names.iter().enumerate().take(n).skip(1) {
            let v = r.get_ref(i)?;
            let text = match v {
                rusqlite::types::ValueRef::Null => "NULL".to_string(),
                rusqlite::types::ValueRef::Integer(x) => format!("i{x}"),
                rusqlite::types::ValueRef::Real(x) => format!("r{x}"),
                rusqlite::types::ValueRef::Text(t) => format!("t{}", hex(t)),
                rusqlite::types::ValueRef::Blob(b) => format!("b{}", hex(b)),
            };
            row.push((name.clone(), text));
        }
        Ok((r.get(0)?, row))
    })
    .unwrap()
    .map(|r| r.unwrap())
    .collect()
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// Conversation `id`'s row in a [`cells`] map (its first column is the id).
fn row_of<'a>(m: &'a BTreeMap<i64, Vec<(String, String)>>, id: &str) -> &'a [(String, String)] {
    let want = format!("t{}", hex(id.as_bytes()));
    m.values().find(|r| r[0].1 == want).expect("row of the id")
}

/// A conversation's stored `raw_messages` and `compaction_history`.
fn stored(c: &Connection, id: &str) -> (String, Option<String>) {
    c.query_row(
        "SELECT raw_messages, compaction_history FROM conversations WHERE id = ?1",
        [id],
        |r| Ok((r.get(0)?, r.get(1)?)),
    )
    .unwrap()
}

/// `agent-db restore ID` (with `--force`), which must succeed.
fn restore(env: &Env, id: &str, force: bool) {
    let mut cmd = env.cmd();
    cmd.args(["restore", id]);
    if force {
        cmd.arg("--force");
    }
    let out = cmd.output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// kodelet's artifact cleanup sweep (`pkg/artifacts/lifecycle.go`), replayed with a cutoff after
/// every artifact: a reference is released unless a `tool_results` entry of its conversation
/// names it; an artifact without references is deleted.
fn sweep(c: &Connection) {
    c.execute_batch(
        "DELETE FROM conversation_artifacts AS r
           WHERE EXISTS (SELECT 1 FROM image_artifacts a WHERE a.id = r.artifact_id AND a.created_at < '9999')
           AND NOT EXISTS (SELECT 1 FROM runner_runs rr WHERE rr.conversation_id = r.conversation_id AND rr.status IN ('opening', 'running'))
           AND NOT EXISTS (
             SELECT 1 FROM conversations c, json_each(c.tool_results) t, json_each(t.value, '$.attachments') a
             WHERE c.id = r.conversation_id AND t.key = r.tool_call_id AND json_extract(a.value, '$.artifactId') = r.artifact_id);
         DELETE FROM image_artifacts WHERE created_at < '9999'
           AND NOT EXISTS (SELECT 1 FROM conversation_artifacts WHERE artifact_id = image_artifacts.id);",
    )
    .unwrap();
}

/// kodelet's `PendingSearchIndex` (`pkg/conversations/sqlite/search.go`): the conversations its
/// search daemon will (re)index.
fn pending_search(c: &Connection) -> Vec<String> {
    let mut s = c
        .prepare(
            "SELECT s.id FROM conversation_summaries s
             LEFT JOIN conversation_search_state st ON st.conversation_id = s.id
             WHERE st.conversation_id IS NULL OR st.index_version <> 1
               OR st.source_updated_at IS NOT s.updated_at ORDER BY s.id",
        )
        .unwrap();
    s.query_map([], |r| r.get(0))
        .unwrap()
        .map(|r| r.unwrap())
        .collect()
}

/// The first tool call id of a conversation (in its head: every generated conversation opens
/// with a request the assistant answers with tools).
fn first_call(raw: &str) -> Option<String> {
    items(raw).iter().find_map(|m| {
        m["content"]
            .as_array()?
            .iter()
            .find_map(|b| (b["type"] == "tool_use").then(|| b["id"].as_str().unwrap().to_string()))
    })
}

fn compact(env: &Env) -> (Value, i32) {
    compact_with(env, &[])
}

/// [`compact`] with `more` flags.
fn compact_with(env: &Env, more: &[&str]) -> (Value, i32) {
    let mut cmd = env.cmd();
    cmd.args([
        "compact",
        "--all-over",
        "0",
        "--idle",
        "0",
        "--keep-tokens",
        "2000",
        "--strategy",
        "extractive",
        "--yes",
        "--json",
    ]);
    cmd.args(more);
    json(cmd)
}

#[test]
fn newest_schema_compacts_into_kodelets_display_archive_and_restores_exactly() {
    let env = Env::generated(16, 25, &[SynthFormat::Anthropic]);
    upgrade(&env, 20260929120000);
    let c = env.conn();
    let ids = env.ids("SELECT id FROM conversations ORDER BY id");
    // kodelet compacted every other conversation itself; the rest never were (NULL history).
    let kodelet_done: Vec<String> = ids
        .iter()
        .step_by(2)
        .filter(|id| kodelet_compacted(&c, id))
        .cloned()
        .collect();
    // An image a tool returned in each conversation's first call; the search index is current.
    let mut artifacts = Vec::new();
    for (i, id) in ids.iter().enumerate() {
        let raw: String = c
            .query_row(
                "SELECT raw_messages FROM conversations WHERE id = ?1",
                [id],
                |r| r.get(0),
            )
            .unwrap();
        let Some(call) = first_call(&raw) else {
            continue;
        };
        let art = format!("art-{i}");
        c.execute(
            "INSERT INTO image_artifacts VALUES (?1, ?1, 'shot.png', 'image/png', 10, 10, 100, '2026-10-01')",
            [&art],
        )
        .unwrap();
        c.execute(
            "INSERT INTO conversation_artifacts VALUES (?1, ?2, ?3)",
            [id, &call, &art],
        )
        .unwrap();
        c.execute(
            "UPDATE conversations SET tool_results = json_set(COALESCE(tool_results, '{}'), '$.\"' || ?2 || '\"',
               json_object('toolName', 'view_image', 'success', json('true'), 'attachments', json_array(json_object('artifactId', ?3))))
             WHERE id = ?1",
            [id, &call, &art],
        )
        .unwrap();
        artifacts.push(art);
    }
    assert!(artifacts.len() >= 8, "the generator made tool calls");
    c.execute_batch(
        "INSERT INTO conversation_search_state SELECT id, updated_at, 1, 'h' FROM conversation_summaries",
    )
    .unwrap();
    assert!(pending_search(&c).is_empty());
    let before_conv = cells(&c, "conversations");
    let before_sum = cells(&c, "conversation_summaries");
    let before_display: BTreeMap<String, Vec<Value>> = ids
        .iter()
        .map(|id| {
            let (raw, h) = stored(&c, id);
            (id.clone(), display(&raw, h.as_deref()))
        })
        .collect();
    drop(c);

    let (doc, code) = compact(&env);
    assert_eq!(code, 0, "{doc:#}");
    let compacted = ids_with_status(&doc, "compacted");
    assert!(
        compacted
            .iter()
            .filter(|i| kodelet_done.contains(i))
            .count()
            >= 3
            && compacted
                .iter()
                .filter(|i| !kodelet_done.contains(i))
                .count()
                >= 3,
        "both kinds compacted: {doc:#}"
    );
    let c = env.conn();
    for id in &compacted {
        let (raw, h, tools): (String, String, String) = c
            .query_row(
                "SELECT raw_messages, compaction_history, tool_results FROM conversations WHERE id = ?1",
                [id],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
            )
            .unwrap();
        // kodelet loads what agent-db wrote for the model (`kodelet_replay.rs`' replay).
        crate::kodelet_replay::model_view("anthropic", &Value::Null, &raw)
            .unwrap_or_else(|e| panic!("{id}: kodelet cannot go on with it: {e}"));
        // kodelet's save-time validation passes, and the display shows the whole history.
        assert_eq!(
            display(&raw, Some(&h)),
            before_display[id],
            "{id}: display changed"
        );
        let hv: Value = serde_json::from_str(&h).unwrap();
        let segs = hv["segments"].as_array().unwrap();
        let expected_segments = if kodelet_done.contains(id) { 2 } else { 1 };
        assert_eq!(segs.len(), expected_segments, "{id}: {h}");
        let marker = &segs[expected_segments - 1]["marker"];
        assert_eq!(marker["method"], "summary");
        let summary_text = items(&raw)[0]["content"][0]["text"]
            .as_str()
            .unwrap()
            .to_string();
        assert_eq!(marker["summary"].as_str(), Some(summary_text.as_str()));
        assert!(marker["createdAt"].as_str().unwrap().ends_with('Z'));
        // The replacement (the summary, and the latest instruction when the cut put it back
        // after the summary) is hidden from the display.
        let start = hv["activeDisplayStart"].as_u64().unwrap();
        assert!(matches!(start, 1 | 2), "{id}: {start}");
        // kodelet's ToSummary over the display history.
        let (count, first): (i64, Vec<u8>) = c
            .query_row(
                "SELECT message_count, CAST(first_message AS BLOB) FROM conversation_summaries WHERE id = ?1",
                [id],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .unwrap();
        let (want_count, want_first) = to_summary(&raw, &h);
        assert_eq!(count, want_count, "{id}: message_count");
        let want_first = if want_first.len() > 100 {
            let mut b = want_first.as_bytes()[..97].to_vec();
            b.extend_from_slice(b"...");
            b
        } else {
            want_first.into_bytes()
        };
        assert_eq!(first, want_first, "{id}: first_message");
        // tool_results is kept whole, as kodelet's own compaction keeps it.
        let before_tools = row_of(&before_conv, id)
            .iter()
            .find(|(n, _)| n == "tool_results")
            .unwrap()
            .1
            .clone();
        assert_eq!(
            format!("t{}", hex(tools.as_bytes())),
            before_tools,
            "{id}: tool_results"
        );
    }
    // The search daemon re-indexes exactly the compacted conversations.
    let mut want = compacted.clone();
    want.sort();
    assert_eq!(pending_search(&c), want);
    // No image a restore needs can go: the cleanup sweep keeps every artifact.
    sweep(&c);
    let left: i64 = c
        .query_row("SELECT COUNT(*) FROM image_artifacts", [], |r| r.get(0))
        .unwrap();
    assert_eq!(left as usize, artifacts.len());
    // The search index catches up (as kodelet's ReplaceSearchIndex would record it).
    c.execute_batch(
        "INSERT OR REPLACE INTO conversation_search_state SELECT id, updated_at, 1, 'h2' FROM conversation_summaries",
    )
    .unwrap();
    drop(c);

    // Restore everything: byte-identical, storage classes included; re-indexed again.
    for id in &compacted {
        restore(&env, id, false);
    }
    let c = env.conn();
    assert_eq!(cells(&c, "conversations"), before_conv);
    assert_eq!(cells(&c, "conversation_summaries"), before_sum);
    assert_eq!(pending_search(&c), want);
    sweep(&c);
    let left: i64 = c
        .query_row("SELECT COUNT(*) FROM image_artifacts", [], |r| r.get(0))
        .unwrap();
    assert_eq!(left as usize, artifacts.len());
}

/// Storage classes as real stores hold them: a conversation whose `usage` is a BLOB gets its
/// `compaction_history` as a BLOB (kodelet writes its JSON columns alike), one whose
/// `tool_results` is a BLOB keeps it a BLOB; both histories show the whole display, and restore
/// gives every cell back with its class.
#[test]
fn a_blob_usage_gets_a_blob_history_and_restore_gives_the_classes_back() {
    let env = Env::generated(4, 25, &[SynthFormat::Anthropic]);
    upgrade(&env, 20260929120000);
    let ids = env.ids("SELECT id FROM conversations ORDER BY id");
    let c = env.conn();
    c.execute(
        "UPDATE conversations SET usage = CAST(usage AS BLOB) WHERE id = ?1",
        [&ids[0]],
    )
    .unwrap();
    c.execute(
        "UPDATE conversations SET tool_results = CAST(tool_results AS BLOB) WHERE id = ?1",
        [&ids[1]],
    )
    .unwrap();
    let before = cells(&c, "conversations");
    let before_display: Vec<Vec<Value>> = ids[..2]
        .iter()
        .map(|id| {
            let (raw, h) = stored(&c, id);
            display(&raw, h.as_deref())
        })
        .collect();
    drop(c);
    // A window for every conversation (the generator leaves some without one).
    let (doc, code) = compact_with(&env, &["--context-limit", "200000"]);
    assert_eq!(code, 0, "{doc:#}");
    let compacted = ids_with_status(&doc, "compacted");
    assert!(
        compacted.contains(&ids[0]) && compacted.contains(&ids[1]),
        "{doc:#}"
    );
    let c = env.conn();
    let class = |col: &str, id: &str| -> String {
        c.query_row(
            &format!("SELECT typeof({col}) FROM conversations WHERE id = ?1"),
            [id],
            |r| r.get(0),
        )
        .unwrap()
    };
    assert_eq!(class("compaction_history", &ids[0]), "blob");
    assert_eq!(class("usage", &ids[0]), "blob");
    assert_eq!(class("compaction_history", &ids[1]), "text");
    assert_eq!(class("tool_results", &ids[1]), "blob");
    for (id, want) in ids[..2].iter().zip(&before_display) {
        let (raw, h): (String, String) = c
            .query_row(
                "SELECT raw_messages, CAST(compaction_history AS TEXT) FROM conversations WHERE id = ?1",
                [id],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .unwrap();
        assert_eq!(&display(&raw, Some(&h)), want, "{id}: display changed");
    }
    drop(c);
    for id in &ids[..2] {
        restore(&env, id, false);
    }
    let after = cells(&env.conn(), "conversations");
    for id in &ids[..2] {
        assert_eq!(row_of(&after, id), row_of(&before, id), "{id}");
    }
}

#[test]
fn a_running_turn_is_left_alone() {
    let env = Env::generated(6, 3, &[SynthFormat::Anthropic]);
    upgrade(&env, 20260929120000);
    let ids = env.ids("SELECT id FROM conversations ORDER BY id");
    let c = env.conn();
    for (id, status) in ids.iter().zip(["running", "accepted", "completed"]) {
        c.execute(
            "INSERT INTO chat_turns(conversation_id, turn_id, status, created_at, updated_at) VALUES (?1, 't', ?2, 'x', 'x')",
            [id, status],
        )
        .unwrap();
    }
    let before = cells(&c, "conversations");
    drop(c);
    // The dry run already says so (the plan reads kodelet's liveness record).
    let (dry, code) = json({
        let mut cmd = env.cmd();
        cmd.args([
            "compact",
            "--all-over",
            "0",
            "--idle",
            "0",
            "--dry-run",
            "--json",
        ]);
        cmd
    });
    assert_eq!(code, 0, "{dry:#}");
    for id in &ids[..2] {
        let row = dry["conversations"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["id"] == id.as_str())
            .expect("planned");
        assert_eq!(row["status"], "skipped", "{row:#}");
    }
    let (doc, code) = compact(&env);
    assert_eq!(code, 0, "{doc:#}");
    let rows = crate::common::all_rows(&doc);
    let after = cells(&env.conn(), "conversations");
    for id in &ids[..2] {
        let row = rows
            .iter()
            .find(|r| r["id"] == id.as_str())
            .expect("reported");
        assert_eq!(row["status"], "skipped", "{row:#}");
        assert!(
            row["detail"]
                .as_str()
                .unwrap_or_default()
                .contains("running a turn"),
            "{row:#}"
        );
        assert_eq!(row_of(&before, id), row_of(&after, id), "{id} changed");
    }
    assert!(
        ids_with_status(&doc, "compacted").contains(&ids[2]),
        "{doc:#}"
    );
}

#[test]
fn image_artifacts_without_compaction_history_keep_tool_results_whole() {
    let env = Env::generated(8, 7, &[SynthFormat::Anthropic]);
    upgrade(&env, 20260910120000);
    let before: BTreeMap<String, String> = env
        .conn()
        .prepare("SELECT id, tool_results FROM conversations")
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .map(|r| r.unwrap())
        .collect();
    let (doc, code) = compact(&env);
    assert_eq!(code, 0, "{doc:#}");
    let compacted = ids_with_status(&doc, "compacted");
    assert!(!compacted.is_empty());
    for id in &compacted {
        let now: String = env
            .conn()
            .query_row(
                "SELECT tool_results FROM conversations WHERE id = ?1",
                [id],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(now, before[id], "{id}: tool_results changed");
    }
}

#[test]
fn a_newer_kodelet_file_is_read_but_never_written() {
    let env = Env::generated(4, 9, &[SynthFormat::Anthropic]);
    upgrade(&env, 20260929120000);
    env.conn()
        .execute(
            "INSERT INTO schema_migrations(version, applied_at, description) VALUES (20261015120000, 'x', 'newer')",
            [],
        )
        .unwrap();
    let before = env.files_hash();
    let out = env
        .cmd()
        .args(["compact", "--all-over", "0", "--idle", "0", "--yes"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(4));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("20261015120000") && err.contains("20260929120000"),
        "names the file's version and the newest known: {err}"
    );
    assert_eq!(env.files_hash(), before, "nothing written");
    let out = env.cmd().args(["list"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "list still reads it");
    let out = env
        .cmd()
        .args(["compact", "--all-over", "0", "--idle", "0", "--dry-run"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "a dry run reads it");
    // The newest known version itself is written.
    let env = Env::generated(4, 9, &[SynthFormat::Anthropic]);
    upgrade(&env, 20260929120000);
    let (doc, code) = compact(&env);
    assert_eq!(code, 0, "{doc:#}");
}

#[test]
fn stores_reports_the_version_and_what_agent_db_does_with_it() {
    let env = Env::generated(2, 1, &[SynthFormat::Anthropic]);
    upgrade(&env, 20260929120000);
    let (doc, code) = json({
        let mut c = env.cmd();
        c.args(["stores", "--json"]);
        c
    });
    assert_eq!(code, 0, "{doc:#}");
    let s = &doc["stores"][0];
    assert_eq!(s["agent"], "kodelet");
    assert_eq!(s["how"], "--db");
    assert_eq!(s["schema_version"], "20260929120000");
    assert_eq!(s["newest_known"], "20260929120000");
    assert_eq!(s["support"], "read-write");
    env.conn()
        .execute(
            "INSERT INTO schema_migrations(version, applied_at) VALUES (20261015120000, 'x')",
            [],
        )
        .unwrap();
    let before = env.files_hash();
    let (doc, _) = json({
        let mut c = env.cmd();
        c.args(["stores", "--json"]);
        c
    });
    assert_eq!(doc["stores"][0]["support"], "read-only", "{doc:#}");
    assert_eq!(doc["stores"][0]["schema_version"], "20261015120000");
    assert_eq!(
        doc["stores"][0]["version_name"],
        "kodelet, migrations to 2026-10-15"
    );
    let text = env.cmd().arg("stores").output().unwrap();
    let out = String::from_utf8_lossy(&text.stdout);
    assert!(
        out.contains("read-only") && out.contains("kodelet, migrations to 2026-10-15"),
        "{out}"
    );
    let not_a_store = env.file("notes.txt", b"hello");
    let out = crate::common::bare_cmd(env.dir.path())
        .arg("--db")
        .arg(&not_a_store)
        .args(["stores", "--json"])
        .output()
        .unwrap();
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["stores"][0]["support"], "unsupported", "{doc:#}");
    assert_eq!(env.files_hash(), before, "stores wrote nothing");
}

/// The conversation goes on after a compaction, as kodelet would save it: new turns appended,
/// `updated_at` moved.
fn continue_conversation(c: &Connection, id: &str, turns: usize) {
    let raw: String = c
        .query_row(
            "SELECT raw_messages FROM conversations WHERE id = ?1",
            [id],
            |r| r.get(0),
        )
        .unwrap();
    let mut all = items(&raw);
    for t in 0..turns {
        let words =
            format!("turn {t} asks about module_{t}.rs and the failing test case_{t} ").repeat(40);
        all.push(serde_json::json!({"content":[{"text": words, "type":"text"}],"role":"user"}));
        all.push(serde_json::json!({"content":[{"text": format!("done with module_{t}.rs ").repeat(40), "type":"text"}],"role":"assistant"}));
    }
    c.execute(
        "UPDATE conversations SET raw_messages = ?1, updated_at = updated_at || '1' WHERE id = ?2",
        rusqlite::params![serde_json::to_string(&all).unwrap(), id],
    )
    .unwrap();
}

#[test]
fn a_second_compaction_after_the_conversation_went_on_keeps_the_whole_display() {
    let env = Env::generated(6, 41, &[SynthFormat::Anthropic]);
    upgrade(&env, 20260929120000);
    let c = env.conn();
    let ids = env.ids("SELECT id FROM conversations ORDER BY id");
    let kodelet_done = ids.iter().find(|id| kodelet_compacted(&c, id)).cloned();
    let original_conv = cells(&c, "conversations");
    let original_sum = cells(&c, "conversation_summaries");
    drop(c);
    let (doc, code) = compact(&env);
    assert_eq!(code, 0, "{doc:#}");
    let first = ids_with_status(&doc, "compacted");
    assert!(first.len() >= 2, "{doc:#}");
    let c = env.conn();
    let mut displays = BTreeMap::new();
    for id in &first {
        continue_conversation(&c, id, 12);
        let (raw, h) = stored(&c, id);
        displays.insert(id.clone(), display(&raw, h.as_deref()));
    }
    drop(c);
    let (doc, code) = compact(&env);
    assert_eq!(code, 0, "{doc:#}");
    let second = ids_with_status(&doc, "compacted");
    assert!(!second.is_empty(), "{doc:#}");
    let c = env.conn();
    for id in &second {
        let (raw, h) = stored(&c, id);
        let h = h.expect("a compaction history");
        assert_eq!(display(&raw, Some(&h)), displays[id], "{id}");
        let hv: Value = serde_json::from_str(&h).unwrap();
        let n = hv["segments"].as_array().unwrap().len();
        let want = if kodelet_done.as_ref() == Some(id) {
            3
        } else {
            2
        };
        assert_eq!(n, want, "{id}: one segment per compaction");
    }
    drop(c);
    // Undo both (newest first), then the agent's own continuation is what differs.
    for id in &second {
        for _ in 0..2 {
            restore(&env, id, true);
        }
    }
    let c = env.conn();
    let now_conv = cells(&c, "conversations");
    let now_sum = cells(&c, "conversation_summaries");
    for id in &second {
        // Every cell is the original's but `updated_at`, which the agent's continuation moved
        // and agent-db never writes.
        for (now, orig) in [
            (row_of(&now_conv, id), row_of(&original_conv, id)),
            (row_of(&now_sum, id), row_of(&original_sum, id)),
        ] {
            for ((name, a), (_, b)) in now.iter().zip(orig.iter()) {
                if name != "updated_at" {
                    assert!(a == b, "{id}: {name} differs after two restores");
                }
            }
        }
    }
}

/// kodelet's Responses loader (`loadConversation`, `pkg/llm/openai/responses/thread.go@fb56862c`),
/// replayed: with a compaction history, `activeDisplayStart` must not pass the items left once
/// trailing `function_call` items are cleaned (`cleanedStoredInputItems`), else kodelet refuses
/// the conversation.
fn responses_thread_loads(raw: &str, history: Option<&str>) -> Result<(), String> {
    let Some(h) = history.map(|h| serde_json::from_str::<Value>(h).unwrap()) else {
        return Ok(());
    };
    let mut left = items(raw);
    while left.last().is_some_and(|i| i["type"] == "function_call") {
        left.pop();
    }
    let start = h["activeDisplayStart"].as_u64().unwrap() as usize;
    if start > left.len() {
        return Err(format!("boundary {start} past {} items", left.len()));
    }
    Ok(())
}

/// A Responses conversation kodelet refuses to load (its display boundary past the items left
/// after trailing function calls are cleaned) is one agent-db neither shows as loadable nor
/// writes: `show` fails naming the conversation, `compact` fails it alone and leaves the file
/// as it was.
#[test]
fn a_responses_boundary_kodelet_refuses_is_never_written() {
    let env = Env::generated(6, 13, &[SynthFormat::OpenAiResponses]);
    upgrade(&env, 20260929120000);
    let c = env.conn();
    let id: String = c
        .query_row(
            "SELECT id FROM conversations WHERE (provider = 'openai-responses' \
             OR json_extract(metadata, '$.api_mode') = 'responses') \
             AND json_extract(usage, '$.maxContextWindow') > 0 ORDER BY id LIMIT 1",
            [],
            |r| r.get(0),
        )
        .unwrap();
    let (raw, _) = stored(&c, &id);
    let mut all = items(&raw);
    for n in 0..2 {
        all.push(
            serde_json::json!({"type": "function_call", "call_id": format!("pending_{n}"),
            "name": "bash", "arguments": "{}"}),
        );
    }
    let raw = serde_json::to_string(&all).unwrap();
    let history =
        serde_json::json!({"segments": [], "activeDisplayStart": all.len() - 1}).to_string();
    assert!(responses_thread_loads(&raw, Some(&history)).is_err());
    c.execute(
        "UPDATE conversations SET raw_messages = ?1, compaction_history = ?2 WHERE id = ?3",
        rusqlite::params![raw, history, id],
    )
    .unwrap();
    drop(c);
    let out = env.cmd().args(["show", &id]).output().unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains(&id) && err.contains("function_call"), "{err}");
    let (doc, _) = compact(&env);
    let failed = ids_with_status(&doc, "failed");
    let row = doc["conversations"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["id"] == id.as_str())
        .cloned();
    assert!(failed.contains(&id), "{row:#?}");
    let c = env.conn();
    let (raw_after, history_after) = stored(&c, &id);
    assert_eq!(
        (raw_after.as_str(), history_after.as_deref()),
        (raw.as_str(), Some(history.as_str()))
    );
    // Every conversation agent-db did write still loads in kodelet's Responses thread.
    for other in ids_with_status(&doc, "compacted") {
        let (r, h) = stored(&c, &other);
        responses_thread_loads(&r, h.as_deref()).unwrap_or_else(|e| panic!("{other}: {e}"));
    }
}

/// kodelet's search indexer (`pkg/conversations/searchindex/indexer.go@7464b048`, `index`),
/// replayed: a running kodelet remembers the summary row's `updated_at` it last indexed per
/// conversation and skips a pending conversation whose `updated_at` equals it. After agent-db's
/// compaction every compacted conversation is pending and its `updated_at` moved (both rows
/// alike, as kodelet's own save writes them), so a running kodelet re-indexes the new messages;
/// after a restore too.
#[test]
fn a_running_kodelets_search_index_picks_up_the_compaction() {
    let env = Env::generated(10, 21, &[SynthFormat::Anthropic]);
    upgrade(&env, 20260929120000);
    let c = env.conn();
    c.execute_batch(
        "INSERT INTO conversation_search_state SELECT id, updated_at, 1, 'h' FROM conversation_summaries",
    )
    .unwrap();
    let seen = |c: &Connection| -> BTreeMap<String, String> {
        c.prepare("SELECT id, updated_at FROM conversation_summaries")
            .unwrap()
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
            .unwrap()
            .map(|r| r.unwrap())
            .collect()
    };
    let indexed = seen(&c);
    let (doc, code) = compact(&env);
    assert_eq!(code, 0, "{doc:#}");
    let compacted = ids_with_status(&doc, "compacted");
    assert!(!compacted.is_empty());
    let would_index = |c: &Connection, indexed: &BTreeMap<String, String>| -> Vec<String> {
        let now = seen(c);
        pending_search(c)
            .into_iter()
            .filter(|id| indexed.get(id) != now.get(id))
            .collect()
    };
    let mut got = would_index(&c, &indexed);
    got.sort();
    let mut want = compacted.clone();
    want.sort();
    assert_eq!(got, want);
    for id in &compacted {
        let (conv, sum): (String, String) = c
            .query_row(
                "SELECT c.updated_at, s.updated_at FROM conversations c JOIN conversation_summaries s USING (id) WHERE id = ?1",
                [id],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .unwrap();
        assert_eq!(conv, sum, "{id}");
    }
    // kodelet indexes the compacted conversations; a restore is picked up the same way.
    let indexed = seen(&c);
    c.execute_batch(
        "INSERT OR REPLACE INTO conversation_search_state SELECT id, updated_at, 1, 'h2' FROM conversation_summaries",
    )
    .unwrap();
    restore(&env, &compacted[0], false);
    assert_eq!(would_index(&c, &indexed), vec![compacted[0].clone()]);
}

/// kodelet's own compaction (a summary at `activeDisplayStart`) is shown as kodelet's, never under
/// agent-db's header, in `show` and `show --json` (`summary_by`); a conversation kodelet never
/// compacted has no such label.
#[test]
fn kodelets_own_summary_is_labelled_as_kodelets() {
    let env = Env::generated(4, 25, &[SynthFormat::Anthropic]);
    upgrade(&env, 20260929120000);
    let c = env.conn();
    let ids = env.ids("SELECT id FROM conversations ORDER BY id");
    let own = ids
        .iter()
        .find(|id| kodelet_compacted(&c, id))
        .expect("a conversation kodelet can compact")
        .clone();
    let other = ids.iter().find(|id| **id != own).unwrap().clone();
    let out = env
        .cmd()
        .args(["show", &own, "--no-pager"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let s = String::from_utf8_lossy(&out.stdout);
    assert!(s.contains("── [0] user · kodelet's own summary"), "{s}");
    assert!(!s.contains("[agent-db compaction summary]"), "{s}");
    let doc = |id: &str| -> Value {
        let out = env.cmd().args(["show", id, "--json"]).output().unwrap();
        assert!(out.status.success());
        serde_json::from_slice(&out.stdout).unwrap()
    };
    let d = doc(&own);
    assert_eq!(
        d["messages"][0]["summary_by"], "kodelet",
        "{}",
        d["messages"][0]
    );
    assert!(d["messages"][1].get("summary_by").is_none());
    let d = doc(&other);
    assert!(
        d["messages"][0].get("summary_by").is_none(),
        "{}",
        d["messages"][0]
    );
}

//! The write path on generated stores in each live format: what changes, what must not, and
//! that restore gives the pre-image back.

use std::collections::{BTreeMap, HashMap};

use agent_db_synth::SynthFormat;
use serde_json::value::RawValue;

use crate::common::{ids_with_status, json, Env};

type Row = HashMap<String, Option<String>>;

/// `time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC).String()`: the clock the tests pin
/// (`common::NOW`) as kodelet stores a save time.
const SAVED_AT: &str = "2026-11-01 12:00:00 +0000 UTC";

fn rows(env: &Env, table: &str) -> BTreeMap<String, Row> {
    let c = env.conn();
    let mut s = c.prepare(&format!("SELECT * FROM {table}")).unwrap();
    let names: Vec<String> = s.column_names().iter().map(|n| n.to_string()).collect();
    let out = s
        .query_map([], |r| {
            let mut m = Row::new();
            for (i, n) in names.iter().enumerate() {
                let v: rusqlite::types::Value = r.get(i)?;
                m.insert(
                    n.clone(),
                    match v {
                        rusqlite::types::Value::Null => None,
                        rusqlite::types::Value::Text(t) => Some(t),
                        other => Some(format!("{other:?}")),
                    },
                );
            }
            Ok((m["id"].clone().unwrap(), m))
        })
        .unwrap()
        .map(|r| r.unwrap())
        .collect();
    out
}

fn elements(raw: &str) -> Vec<String> {
    serde_json::from_str::<Vec<&RawValue>>(raw)
        .unwrap()
        .iter()
        .map(|r| r.get().to_string())
        .collect()
}

/// kodelet's ToSummary first_message, written independently of the library.
fn kodelet_first_message(raw: &str) -> String {
    let v: Vec<serde_json::Value> = match serde_json::from_str(raw) {
        Ok(v) => v,
        Err(_) => return String::new(),
    };
    for m in v {
        if m["role"] == "user" {
            if let Some(t) = m["content"]
                .as_array()
                .and_then(|a| a.first())
                .and_then(|f| f["text"].as_str())
            {
                let b = t.as_bytes();
                return if b.len() > 100 {
                    format!("{}...", String::from_utf8_lossy(&b[..97]))
                } else {
                    t.to_string()
                };
            }
        }
    }
    String::new()
}

fn usage_without_current(u: &str) -> serde_json::Value {
    let mut v: serde_json::Value = serde_json::from_str(u).unwrap();
    v.as_object_mut().unwrap().remove("currentContextWindow");
    v
}

fn compact_and_check(format: SynthFormat) {
    let env = Env::generated(30, 11, &[format]);
    let before_conv = rows(&env, "conversations");
    let before_sum = rows(&env, "conversation_summaries");
    let other_tables: Vec<_> = [
        "schema_migrations",
        "steering_messages",
        "acp_session_updates",
    ]
    .iter()
    .map(|t| (t.to_string(), env.dump(t)))
    .collect();

    let mut cmd = env.cmd();
    cmd.args([
        "compact",
        "--all-over",
        "0",
        "--idle",
        "0",
        "--keep-tokens",
        "3000",
        "--yes",
        "--json",
    ]);
    let (doc, code) = json(cmd);
    assert_eq!(code, 0, "{doc:#}");
    let compacted = ids_with_status(&doc, "compacted");
    assert!(
        compacted.len() >= 10,
        "only {} compacted: {doc:#}",
        compacted.len()
    );

    let after_conv = rows(&env, "conversations");
    let after_sum = rows(&env, "conversation_summaries");
    assert_eq!(before_conv.len(), after_conv.len());
    for (id, before) in &before_conv {
        let after = &after_conv[id];
        if !compacted.contains(id) {
            assert_eq!(before, after, "untouched conversation {id} changed");
            assert_eq!(
                before_sum[id], after_sum[id],
                "untouched summary {id} changed"
            );
            continue;
        }
        // Columns agent-db never changes.
        for col in [
            "id",
            "provider",
            "file_last_access",
            "summary",
            "created_at",
            "background_processes",
            "cwd",
        ] {
            assert_eq!(before[col], after[col], "{id}: column {col} changed");
        }
        // `updated_at` is the save time, as every kodelet save writes it (Go's
        // `time.Time.String()` of the clock the run is pinned to), on both rows.
        assert_eq!(after["updated_at"].as_deref(), Some(SAVED_AT), "{id}");
        let old_raw = before["raw_messages"].clone().unwrap();
        let new_raw = after["raw_messages"].clone().unwrap();
        assert!(new_raw.len() < old_raw.len(), "{id} did not shrink");
        // Kept messages are byte-identical: the new history is summary, maybe the instruction,
        // then a suffix of the original.
        let old_el = elements(&old_raw);
        let new_el = elements(&new_raw);
        let row = doc["conversations"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["id"] == id.as_str())
            .unwrap();
        assert_eq!(
            row["messages_after"].as_u64().unwrap() as usize,
            new_el.len()
        );
        let mut k = 0;
        while k < new_el.len() - 1 && old_el[old_el.len() - 1 - k] == new_el[new_el.len() - 1 - k] {
            k += 1;
        }
        let extra = new_el.len() - k; // summary + optional reinserted instruction
        assert!(
            extra == 1 || extra == 2,
            "{id}: {extra} new messages before the kept tail"
        );
        assert!(
            new_el[0].contains("[agent-db compaction summary]"),
            "{id}: no summary first"
        );
        if extra == 2 {
            assert!(
                old_el.contains(&new_el[1]),
                "{id}: reinserted instruction is not byte-identical"
            );
        }
        // usage: only currentContextWindow changes.
        let (ub, ua) = (
            before["usage"].clone().unwrap(),
            after["usage"].clone().unwrap(),
        );
        assert_eq!(
            usage_without_current(&ub),
            usage_without_current(&ua),
            "{id}: usage changed beyond the window"
        );
        let cur: i64 = serde_json::from_str::<serde_json::Value>(&ua).unwrap()
            ["currentContextWindow"]
            .as_i64()
            .unwrap();
        // The new stored context: the new history plus the fixed overhead (the stored context
        // before minus agent-db's count of the messages, never below 0), in the stored
        // context's units (agent-db's count scaled down where it counts higher).
        let cur_before: i64 = serde_json::from_str::<serde_json::Value>(&ub).unwrap()
            ["currentContextWindow"]
            .as_i64()
            .unwrap();
        let tokens_before = row["tokens_before"].as_i64().unwrap();
        let overhead = (cur_before - tokens_before).max(0);
        let scale = if tokens_before > cur_before {
            cur_before as f64 / tokens_before as f64
        } else {
            1.0
        };
        let history = (row["tokens_after"].as_i64().unwrap() as f64 * scale).round() as i64;
        assert_eq!(cur, history + overhead);
        // tool_results: only entries whose call is gone are dropped, the others keep their bytes.
        if let (Some(tb), Some(ta)) = (&before["tool_results"], &after["tool_results"]) {
            let mb: BTreeMap<String, Box<RawValue>> = serde_json::from_str(tb).unwrap();
            let ma: BTreeMap<String, Box<RawValue>> = serde_json::from_str(ta).unwrap();
            for (k, v) in &ma {
                assert_eq!(mb[k].get(), v.get(), "{id}: tool_results[{k}] changed");
                assert!(
                    new_raw.contains(k.as_str()),
                    "{id}: tool_results keeps {k} whose call is gone"
                );
            }
            for k in mb.keys() {
                if new_raw.contains(&format!("\"{k}\"")) {
                    assert!(
                        ma.contains_key(k),
                        "{id}: tool_results dropped {k} whose call is kept"
                    );
                }
            }
        }
        // metadata: identical, except the Codex window generation + 1.
        let (mb, ma) = (before["metadata"].clone(), after["metadata"].clone());
        if mb
            .as_deref()
            .is_some_and(|m| m.contains("codex_responses_window_generation"))
        {
            let g = |m: &str| {
                serde_json::from_str::<serde_json::Value>(m).unwrap()
                    ["codex_responses_window_generation"]
                    .as_i64()
                    .unwrap()
            };
            assert_eq!(g(ma.as_deref().unwrap()), g(mb.as_deref().unwrap()) + 1);
        } else {
            assert_eq!(mb, ma, "{id}: metadata changed");
        }
        // conversation_summaries follows kodelet's algorithm.
        let s = &after_sum[id];
        assert_eq!(
            s["message_count"].as_deref().unwrap(),
            format!("Integer({})", new_raw.matches("\"role\"").count())
        );
        assert_eq!(
            s["first_message"].as_deref().unwrap(),
            kodelet_first_message(&new_raw)
        );
        assert_eq!(s["usage"], after["usage"]);
        assert_eq!(s["metadata"], after["metadata"]);
        for col in ["summary", "created_at", "provider", "cwd"] {
            assert_eq!(
                s[col], before_sum[id][col],
                "{id}: summary column {col} changed"
            );
        }
        assert_eq!(s["updated_at"].as_deref(), Some(SAVED_AT), "{id}");
    }
    for (t, before) in other_tables {
        assert_eq!(env.dump(&t), before, "table {t} changed");
    }
    let c = env.conn();
    let ok: String = c
        .query_row("PRAGMA integrity_check", [], |r| r.get(0))
        .unwrap();
    assert_eq!(ok, "ok");
    let mode: String = c
        .query_row("PRAGMA journal_mode", [], |r| r.get(0))
        .unwrap();
    assert_eq!(mode, "wal");
    let audit: i64 = c
        .query_row("SELECT COUNT(*) FROM agent_db_compactions", [], |r| {
            r.get(0)
        })
        .unwrap();
    assert_eq!(audit as usize, compacted.len());
    drop(c);

    // Restore every compaction: the agent's tables are back to their exact pre-image.
    let out = env
        .cmd()
        .args(["restore", "--all-since", "1h"])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(rows(&env, "conversations"), before_conv);
    assert_eq!(rows(&env, "conversation_summaries"), before_sum);
    // A second restore of the same compactions is nothing to do (exit 0).
    let one = &compacted[0];
    let out = env.cmd().args(["restore", one]).output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "nothing left to restore is nothing to do"
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("nothing to do"));
    let first: i64 = env
        .conn()
        .query_row(
            "SELECT id FROM agent_db_compactions WHERE conversation_id = ?1",
            [one],
            |r| r.get(0),
        )
        .unwrap();
    let before = env.files_hash();
    let out = env
        .cmd()
        .args(["restore", one, "--compaction", &first.to_string()])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "restoring a restored compaction is nothing to do"
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("nothing to do: already restored"));
    assert_eq!(
        env.files_hash(),
        before,
        "restoring a restored compaction wrote to the store"
    );
}

#[test]
fn compact_anthropic() {
    compact_and_check(SynthFormat::Anthropic);
}

#[test]
fn compact_openai_chat() {
    compact_and_check(SynthFormat::OpenAiChat);
}

#[test]
fn compact_openai_responses() {
    compact_and_check(SynthFormat::OpenAiResponses);
}

#[test]
fn restore_refuses_a_changed_row_unless_forced() {
    let env = Env::generated(12, 5, &[]);
    let (doc, code) = json({
        let mut c = env.cmd();
        c.args([
            "compact",
            "--all-over",
            "0",
            "--idle",
            "0",
            "--keep-tokens",
            "2000",
            "--yes",
            "--json",
            "--limit",
            "1",
        ]);
        c
    });
    assert_eq!(code, 0);
    let id = ids_with_status(&doc, "compacted")
        .pop()
        .expect("one compacted");
    let original = String::from_utf8(crate::common::archived_bytes(
        &env.conn(),
        "column_name = 'raw_messages' AND row_key = ?1",
        &id,
    ))
    .unwrap();
    // The agent writes to the conversation after the compaction.
    env.conn()
        .execute("UPDATE conversations SET usage = replace(usage, '\"outputTokens\":', '\"outputTokens\":1') WHERE id = ?1", [&id])
        .unwrap();
    let out = env.cmd().args(["restore", &id]).output().unwrap();
    assert_eq!(out.status.code(), Some(7));
    assert!(String::from_utf8_lossy(&out.stderr).contains("changed after this compaction"));
    let out = env
        .cmd()
        .args(["restore", &id, "--force"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let now: String = env
        .conn()
        .query_row(
            "SELECT raw_messages FROM conversations WHERE id = ?1",
            [&id],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(now, original);
}

/// Stores with an empty, a one-message and an already-small conversation.
fn tiny_store() -> Env {
    let env = Env::empty();
    let c = env.conn();
    let usage = r#"{"inputTokens":1,"outputTokens":1,"cacheCreationInputTokens":0,"cacheReadInputTokens":0,"inputCost":0,"outputCost":0,"cacheCreationCost":0,"cacheReadCost":0,"currentContextWindow":190000,"maxContextWindow":200000}"#;
    let convs = [
        ("empty", "[]"),
        (
            "one",
            r#"[{"content":[{"text":"hello","type":"text"}],"role":"user"}]"#,
        ),
        (
            "small",
            r#"[{"content":[{"text":"list files","type":"text"}],"role":"user"},{"content":[{"id":"t1","input":{"command":"ls"},"name":"bash","type":"tool_use"}],"role":"assistant"},{"content":[{"tool_use_id":"t1","is_error":false,"content":[{"text":"a.txt","type":"text"}],"type":"tool_result"}],"role":"user"},{"content":[{"text":"One file.","type":"text"}],"role":"assistant"}]"#,
        ),
    ];
    for (id, raw) in convs {
        c.execute(
            "INSERT INTO conversations(id, raw_messages, provider, usage, created_at, updated_at, metadata, tool_results)
             VALUES (?1, ?2, 'anthropic', ?3, '2026-10-01 10:00:00 +0000 UTC', '2026-10-01 10:00:00 +0000 UTC', '{}', '{}')",
            rusqlite::params![id, raw, usage],
        )
        .unwrap();
    }
    drop(c);
    env
}

#[test]
fn empty_one_message_and_small_conversations_are_no_ops_with_zero_writes() {
    let env = tiny_store();
    let before = env.files_hash();
    let (doc, code) = json({
        let mut c = env.cmd();
        c.args(["compact", "empty", "one", "small", "--yes", "--json"]);
        c
    });
    assert_eq!(code, 0, "{doc:#}");
    let details: HashMap<String, String> = doc["conversations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            assert_eq!(r["status"], "skipped", "{r}");
            (
                r["id"].as_str().unwrap().to_string(),
                r["detail"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert!(details["empty"].contains("empty"), "{details:?}");
    assert!(details["one"].contains("one message"), "{details:?}");
    // Its stored context is over --target only because of the fixed overhead: the reason says
    // so instead of "already small".
    assert!(
        details["small"].contains("already fit the kept tail")
            && details["small"].contains("overhead"),
        "{details:?}"
    );
    assert_eq!(env.files_hash(), before, "a no-op run wrote to the store");
}

#[test]
fn a_second_run_gets_the_lock_message_and_exit_code() {
    let env = tiny_store();
    let _held = agent_db::store::lock::acquire(&env.db).expect("first run holds the lock");
    let out = env
        .cmd()
        .args(["compact", "--all-over", "0.5", "--yes"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(6));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("locked by another agent-db run"), "{err}");
    // Read-only commands are not blocked.
    env.cmd()
        .args(["compact", "--all-over", "0.5", "--dry-run"])
        .assert()
        .success();
}

#[test]
fn prune_keeps_pairs_and_replaces_old_outputs() {
    let env = Env::generated(20, 3, &[]);
    let (doc, code) = json({
        let mut c = env.cmd();
        c.args([
            "compact",
            "--all-over",
            "0",
            "--idle",
            "0",
            "--strategy",
            "prune",
            "--keep-tokens",
            "2000",
            "--yes",
            "--json",
        ]);
        c
    });
    assert_eq!(code, 0, "{doc:#}");
    let done = ids_with_status(&doc, "compacted");
    assert!(!done.is_empty());
    for id in done {
        let raw: String = env
            .conn()
            .query_row(
                "SELECT raw_messages FROM conversations WHERE id = ?1",
                [&id],
                |r| r.get(0),
            )
            .unwrap();
        assert!(
            raw.contains("[agent-db pruned this "),
            "{id}: no placeholder"
        );
        assert!(!raw.contains("[agent-db compaction summary]"));
        let row = doc["conversations"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["id"] == id.as_str())
            .unwrap();
        assert_eq!(
            row["messages_before"], row["messages_after"],
            "prune keeps every message"
        );
    }
}

/// The largest conversation of `env`, planned, summarized and proposed as the pipeline does
/// (on a read connection of its own, which the proposal prepares `tool_results` from).
fn proposal_for_the_largest(env: &Env) -> (String, agent_db::store::Proposal) {
    use agent_db::compact::{swap, Extractive, HeadInput, Strategy};
    use agent_db::plan::{self, PlanOptions};
    use agent_db::select::Reason;
    use agent_db::store::pre_image::AuditEntry;
    use agent_db::store::{Access, Compaction, Store};

    let id = env
        .ids("SELECT id FROM conversations ORDER BY length(raw_messages) DESC LIMIT 1")
        .remove(0);
    let store = Store::open(&env.db, Access::Read).unwrap();
    let meta = store.meta(&id).unwrap();
    let p = plan::plan(
        &store,
        meta,
        Reason::Manual,
        &PlanOptions {
            keep_tokens: Some(2000),
            context_limit: None,
            ..Default::default()
        },
    )
    .unwrap();
    let now = agent_db::gotime::parse(crate::common::NOW).unwrap();
    let rewrite = tokio::runtime::Runtime::new().unwrap().block_on(async {
        let input = HeadInput::new(&p, now);
        Extractive.rewrite(&input).await.unwrap()
    });
    let new = swap::build(&p, &rewrite).unwrap();
    let compaction = Compaction {
        format: p.loaded.format,
        history: new.raw_messages.clone(),
        summary: new.summary.clone(),
        tail_start: p.split().unwrap().cut,
        reinsert: p.split().unwrap().reinsert,
        context_after: new.tokens,
        call_ids: new.call_ids.clone(),
        model: None,
        message_tokens: p.loaded.tokens.clone(),
    };
    let audit = AuditEntry {
        conversation_id: id.clone(),
        store_kind: "kodelet".into(),
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
    };
    let proposal = p.loaded.row.propose(compaction, audit, Some(&store));
    (id, proposal)
}

/// Commit `proposal` on a write connection of its own.
fn commit(env: &Env, proposal: &agent_db::store::Proposal) -> agent_db::store::Written {
    use agent_db::store::{Access, Store};
    let mut writer = Store::open(&env.db, Access::Write).unwrap();
    writer.commit(proposal, "2026-11-01T12:00:02Z").unwrap()
}

fn nothing_written(env: &Env) {
    for table in ["agent_db_compactions", "agent_db_archive"] {
        let n: i64 = env
            .conn()
            .query_row(&format!("SELECT COUNT(*) FROM {table}"), [], |r| r.get(0))
            .unwrap();
        assert_eq!(n, 0, "{table}");
    }
}

#[test]
fn a_live_writer_between_plan_and_write_wins() {
    use agent_db::store::Written;

    let env = Env::generated(10, 21, &[]);
    let (id, proposal) = proposal_for_the_largest(&env);
    // The agent appends a message and saves, as kodelet does on every turn.
    let agent = env.conn();
    let appended: String = agent
        .query_row("SELECT substr(raw_messages, 1, length(raw_messages) - 1) FROM conversations WHERE id = ?1", [&id], |r| r.get(0))
        .unwrap();
    let appended = format!("{appended},{{\"role\":\"user\",\"content\":\"one more thing\"}}]");
    agent
        .execute("UPDATE conversations SET raw_messages = ?1, updated_at = '2026-11-01 12:00:01 +0000 UTC' WHERE id = ?2", [&appended, &id])
        .unwrap();
    let written = commit(&env, &proposal);
    assert!(
        matches!(written, Written::Changed(ref why) if why.contains("changed since read")),
        "{written:?}"
    );
    let now_raw: String = env
        .conn()
        .query_row(
            "SELECT raw_messages FROM conversations WHERE id = ?1",
            [&id],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(
        now_raw, appended,
        "the live writer's content was overwritten"
    );
    nothing_written(&env);
}

/// `tool_results` is prepared when the compaction is proposed (its filtered value and packed
/// pre-image); a live write to it alone after that is caught by the version check too.
#[test]
fn a_live_write_to_tool_results_alone_is_caught_and_an_untouched_one_is_archived_exactly() {
    use agent_db::store::Written;

    let env = Env::generated(10, 21, &[]);
    let (id, proposal) = proposal_for_the_largest(&env);
    let tools_sql = "SELECT tool_results FROM conversations WHERE id = ?1";
    let original: String = env
        .conn()
        .query_row(tools_sql, [&id], |r| r.get(0))
        .unwrap();
    let changed = original.replacen('{', "{\"live-call\":{\"toolName\":\"bash\"},", 1);
    env.conn()
        .execute(
            "UPDATE conversations SET tool_results = ?1 WHERE id = ?2",
            [&changed, &id],
        )
        .unwrap();
    let written = commit(&env, &proposal);
    assert!(
        matches!(written, Written::Changed(ref why) if why.contains("changed since read")),
        "{written:?}"
    );
    let now: String = env
        .conn()
        .query_row(tools_sql, [&id], |r| r.get(0))
        .unwrap();
    assert_eq!(now, changed);
    nothing_written(&env);

    // Put back, proposed again: committed, and the archive holds the exact original.
    env.conn()
        .execute(
            "UPDATE conversations SET tool_results = ?1 WHERE id = ?2",
            [&original, &id],
        )
        .unwrap();
    let (_, proposal) = proposal_for_the_largest(&env);
    assert!(matches!(commit(&env, &proposal), Written::Committed { .. }));
    let archived = crate::common::archived_bytes(
        &env.conn(),
        "column_name = 'tool_results' AND row_key = ?1",
        &id,
    );
    assert!(
        archived == original.as_bytes(),
        "the archived tool_results differ"
    );
    let after: String = env
        .conn()
        .query_row(tools_sql, [&id], |r| r.get(0))
        .unwrap();
    assert!(after.len() < original.len(), "nothing was filtered out");
}

//! The `--json` documents of `list`, `compact`, `history`, `restore` and `prune-archive`, pinned
//! by insta snapshots (`tests/it/snapshots/it__json_snapshots__*.snap`) on a small generated
//! store with the clock pinned (`AGENT_DB_NOW`). Each document is the binary's real output,
//! parsed; the only values replaced are those that legitimately differ between runs: the
//! temporary directory in paths (`[tmp]`) and measured durations (`duration_ms`). A change to
//! any field, value or the field order shows up as a snapshot diff, to be checked against
//! docs/json-output.md before it is accepted.

use serde_json::Value;

use crate::common::{json, Env, NOW};

/// A clock 31 days after [`NOW`], for `prune-archive --older-than 30d`.
const NOW_PLUS_31D: &str = "2026-12-02T12:00:00Z";

/// The compaction every snapshot here starts from: the conversations over 0.3, extractive, one
/// at a time so the compaction ids follow the selection order.
const COMPACT: [&str; 12] = [
    "compact",
    "--all-over",
    "0.3",
    "--idle",
    "0",
    "--keep-tokens",
    "2000",
    "--strategy",
    "extractive",
    "--concurrency",
    "1",
    "--yes",
];

/// Runs `args` with `--json` on the store, checks the exit code, and returns the document with
/// the run-dependent values replaced.
fn doc(env: &Env, args: &[&str], clock: &str) -> Value {
    let mut c = env.cmd();
    c.args(args).arg("--json").env("AGENT_DB_NOW", clock);
    let (v, code) = json(c);
    assert_eq!(code, 0, "{args:?} exited {code}: {v}");
    redact(env, v)
}

/// The temp dir becomes `[tmp]` in every string. `duration_ms` becomes `[duration_ms]` where it
/// is measured (rows that ran the strategy, and the totals); rows decided at selection keep
/// theirs, which is documented as 0.
fn redact(env: &Env, v: Value) -> Value {
    let tmp = env.dir.path().to_str().expect("utf-8 temp path");
    let text = serde_json::to_string(&v).expect("serialize");
    let mut v: Value = serde_json::from_str(&text.replace(tmp, "[tmp]")).expect("parse");
    fn measured(o: &mut Value) {
        assert!(o["duration_ms"].is_u64(), "duration_ms in {o}");
        o["duration_ms"] = "[duration_ms]".into();
    }
    if let Some(rows) = v.get_mut("conversations").and_then(Value::as_array_mut) {
        for r in rows.iter_mut().filter(|r| r.get("duration_ms").is_some()) {
            if matches!(r["status"].as_str(), Some("compacted" | "planned")) {
                measured(r);
            }
        }
    }
    if let Some(totals) = v.get_mut("totals") {
        measured(totals);
    }
    v
}

/// 16 generated conversations (seed 57): over 0.5, one selected and two skipped (no stored
/// maximum); over 0.3, four to compact (all three formats) and two skipped.
fn store() -> Env {
    Env::generated(16, 57, &[])
}

fn compacted_ids(doc: &Value) -> Vec<String> {
    crate::common::ids_with_status(doc, "compacted")
}

#[test]
fn list_and_compact_documents() {
    let env = store();
    insta::assert_json_snapshot!("list", doc(&env, &["list"], NOW));
    insta::assert_json_snapshot!(
        "list_all_over",
        doc(&env, &["list", "--all-over", "0.5"], NOW)
    );
    let mut dry = COMPACT.to_vec();
    dry.push("--dry-run");
    let planned = doc(&env, &dry, NOW);
    insta::assert_json_snapshot!("compact_dry_run", planned);
    let real = doc(&env, &COMPACT, NOW);
    insta::assert_json_snapshot!("compact", real);
    assert_eq!(compacted_ids(&real).len(), 4, "{real}");
    // A failed row next to a compacted one (exit 1): the largest conversation the batch left,
    // and one that is not in the store.
    let listed = doc(&env, &["list"], NOW);
    let done = compacted_ids(&real);
    let id = listed["conversations"]
        .as_array()
        .expect("conversations")
        .iter()
        .filter(|r| !done.iter().any(|d| r["id"] == d.as_str()))
        .max_by_key(|r| r["context_tokens"].as_u64())
        .and_then(|r| r["id"].as_str())
        .expect("a conversation left")
        .to_string();
    // Another conversation whose stored messages cannot be decoded: its row fails.
    let bad = listed["conversations"]
        .as_array()
        .expect("conversations")
        .iter()
        .filter_map(|r| r["id"].as_str())
        .find(|r| *r != id && !done.iter().any(|d| d == r))
        .expect("another conversation left")
        .to_string();
    env.conn()
        .execute(
            "UPDATE conversations SET raw_messages = '[{\"role\": 7' WHERE id = ?1",
            [&bad],
        )
        .unwrap();
    let mut c = env.cmd();
    c.args(["compact", &id, &bad, "--keep-tokens", "2000"])
        .args(["--strategy", "extractive", "--yes", "--json"]);
    let (v, code) = json(c);
    assert_eq!(code, 1, "{v}");
    assert_eq!(crate::common::ids_with_status(&v, "compacted"), [id]);
    insta::assert_json_snapshot!("compact_with_a_failed_row", redact(&env, v));
}

#[test]
fn history_restore_and_prune_archive_documents() {
    let env = store();
    let real = doc(&env, &COMPACT, NOW);
    let ids = compacted_ids(&real);
    assert_eq!(ids.len(), 4, "{real}");
    insta::assert_json_snapshot!("history", doc(&env, &["history"], NOW));
    insta::assert_json_snapshot!("history_one", doc(&env, &["history", ids[0].as_str()], NOW));
    insta::assert_json_snapshot!("restore_id", doc(&env, &["restore", &ids[0]], NOW));
    insta::assert_json_snapshot!(
        "restore_all_since",
        doc(&env, &["restore", "--all-since", "1h"], NOW)
    );
    // The archive as the test's own SQL sees it, against the document's figures.
    let (values, bytes): (u64, u64) = env
        .conn()
        .query_row(
            "SELECT COUNT(*), SUM(COALESCE(LENGTH(CAST(value AS BLOB)), 0) + COALESCE(LENGTH(packed), 0)) FROM agent_db_archive",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .expect("archive");
    let pruned = doc(
        &env,
        &["prune-archive", "--older-than", "30d"],
        NOW_PLUS_31D,
    );
    assert_eq!(pruned["pruned"]["compactions"], 4);
    assert_eq!(pruned["pruned"]["archived_values"], values);
    assert_eq!(pruned["pruned"]["bytes"], bytes);
    let left: u64 = env
        .conn()
        .query_row("SELECT COUNT(*) FROM agent_db_archive", [], |r| r.get(0))
        .expect("archive");
    assert_eq!(left, 0, "archived values left after prune-archive");
    insta::assert_json_snapshot!("prune_archive", pruned);
    insta::assert_json_snapshot!(
        "history_after_restore_and_prune",
        doc(&env, &["history"], NOW_PLUS_31D)
    );
}

#[test]
fn documents_on_a_store_agent_db_never_wrote() {
    let env = store();
    insta::assert_json_snapshot!("history_fresh_store", doc(&env, &["history"], NOW));
    insta::assert_json_snapshot!(
        "restore_all_since_fresh_store",
        doc(&env, &["restore", "--all-since", "1h"], NOW)
    );
    insta::assert_json_snapshot!(
        "prune_archive_fresh_store",
        doc(&env, &["prune-archive", "--older-than", "30d"], NOW)
    );
}

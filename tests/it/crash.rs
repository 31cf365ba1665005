//! Crash safety: the binary is SIGKILLed at varied moments during a batch of 240 conversations,
//! ten times. After every kill the store passes the integrity check and every conversation is
//! either its original or fully compacted with its archive row; a final rerun completes the batch.
//! (The kill moments vary; nothing here asserts on timing.)

use std::collections::HashMap;
use std::time::Duration;

use rusqlite::Connection;

use crate::common::{bare_cmd, std_cmd, Env};

fn originals(env: &Env) -> HashMap<String, String> {
    let c = env.conn();
    let mut s = c
        .prepare("SELECT id, raw_messages FROM conversations")
        .unwrap();
    let rows = s.query_map([], |r| Ok((r.get(0)?, r.get(1)?))).unwrap();
    rows.map(|r| r.unwrap()).collect()
}

/// Every conversation is the original, or compacted with an archive row holding the original
/// and a post-image that matches the current state.
fn check_consistent(c: &Connection, orig: &HashMap<String, String>) -> usize {
    let ok: String = c
        .query_row("PRAGMA integrity_check", [], |r| r.get(0))
        .unwrap();
    assert_eq!(ok, "ok");
    let has_tables: bool = c
        .query_row(
            "SELECT COUNT(*) FROM sqlite_master WHERE name = 'agent_db_compactions'",
            [],
            |r| r.get::<_, i64>(0),
        )
        .unwrap()
        > 0;
    let mut compacted = 0;
    for (id, raw) in orig {
        let now: String = c
            .query_row(
                "SELECT raw_messages FROM conversations WHERE id = ?1",
                [id],
                |r| r.get(0),
            )
            .unwrap();
        let audits: Vec<(i64, String)> = if has_tables {
            let mut s = c
                .prepare("SELECT id, post_image_sha256 FROM agent_db_compactions WHERE conversation_id = ?1 ORDER BY id")
                .unwrap();
            let rows = s.query_map([id], |r| Ok((r.get(0)?, r.get(1)?))).unwrap();
            rows.map(|r| r.unwrap()).collect()
        } else {
            Vec::new()
        };
        if &now == raw {
            assert!(audits.is_empty(), "{id} is original but has an audit row");
            continue;
        }
        compacted += 1;
        assert_eq!(
            audits.len(),
            1,
            "{id} changed with {} audit rows",
            audits.len()
        );
        let archived: String = c
            .query_row(
                "SELECT value FROM agent_db_archive WHERE compaction_id = ?1 AND column_name = 'raw_messages'",
                [audits[0].0],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(&archived, raw, "{id}: archive does not hold the original");
        let cells: Vec<agent_db::store::archive::Cell> =
            agent_db::store::archive::load(c, audits[0].0)
                .unwrap()
                .into_iter()
                .map(|a| a.cell)
                .collect();
        assert_eq!(
            agent_db::store::archive::image_hash(c, &cells).unwrap(),
            audits[0].1,
            "{id}: the write is not complete"
        );
        assert!(now.contains("[agent-db compaction summary]"));
    }
    compacted
}

#[test]
fn sigkill_at_varied_moments_leaves_every_conversation_old_or_new() {
    let env = Env::generated(240, 99, &[]);
    let orig = originals(&env);
    let args = [
        "compact",
        "--all-over",
        "0",
        "--idle",
        "0",
        "--keep-tokens",
        "1500",
        "--yes",
        "--quiet",
        "--concurrency",
        "2",
    ];
    let mut progress = Vec::new();
    for i in 0..10u64 {
        let mut cmd = std_cmd(env.dir.path());
        cmd.arg("--db").arg(&env.db).args(args);
        cmd.stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null());
        let mut child = cmd.spawn().unwrap();
        // Varied kill moments: from during start-up to well into the batch.
        std::thread::sleep(Duration::from_millis(20 + i * i * 9));
        let _ = child.kill(); // SIGKILL
        let _ = child.wait();
        let c = env.conn();
        progress.push(check_consistent(&c, &orig));
    }
    eprintln!("compacted after each kill: {progress:?}");
    // A rerun completes the batch.
    let out = bare_cmd(env.dir.path())
        .arg("--db")
        .arg(&env.db)
        .args(args)
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let c = env.conn();
    let done = check_consistent(&c, &orig);
    // Nothing compactable is left: a dry run plans nothing.
    let out = bare_cmd(env.dir.path())
        .arg("--db")
        .arg(&env.db)
        .args([
            "compact",
            "--all-over",
            "0",
            "--idle",
            "0",
            "--keep-tokens",
            "1500",
            "--dry-run",
            "--json",
        ])
        .output()
        .unwrap();
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let planned = doc["conversations"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["status"] == "planned")
        .count();
    assert_eq!(planned, 0, "the rerun left work: {planned} still planned");
    assert!(done > 100, "only {done} of 240 compacted");
}

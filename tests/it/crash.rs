//! Crash safety: the binary is SIGKILLed at varied moments during a batch of 240 conversations,
//! fourteen times: ten times after fixed delays (from start-up to well into the batch), then
//! four times right after it was seen to commit its 1st, 2nd, 4th and 8th conversation of that
//! run. After every kill the store passes the integrity check and every conversation is either
//! its original or fully compacted with its archive row; at least one kill landed mid-batch
//! (0 < compacted < the conversations the batch plans); a final rerun completes the batch.
//! (The kill moments vary; no assertion depends on timing: the commit-triggered kills wait for
//! the store to change, not for a clock.)

use std::collections::HashMap;
use std::process::Child;
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
        let archived = crate::common::archived_bytes(
            c,
            "compaction_id = ?1 AND column_name = 'raw_messages'",
            &audits[0].0,
        );
        assert!(
            archived == raw.as_bytes(),
            "{id}: archive does not hold the original"
        );
        let cells: Vec<agent_db::store::pre_image::Cell> =
            agent_db::store::pre_image::load(c, audits[0].0)
                .unwrap()
                .into_iter()
                .map(|a| a.cell)
                .collect();
        assert_eq!(
            agent_db::store::pre_image::image_hash(c, &cells).unwrap(),
            audits[0].1,
            "{id}: the write is not complete"
        );
        assert!(now.contains("[agent-db compaction summary]"));
    }
    compacted
}

/// The batch every run starts: all conversations, extractive, two at a time.
const BATCH: [&str; 11] = [
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

/// How many conversations a dry run of the batch plans (its status `planned`).
fn planned(env: &Env) -> usize {
    let out = bare_cmd(env.dir.path())
        .arg("--db")
        .arg(&env.db)
        .args(&BATCH[..7])
        .args(["--dry-run", "--json"])
        .output()
        .unwrap();
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    doc["conversations"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["status"] == "planned")
        .count()
}

fn spawn_batch(env: &Env) -> Child {
    let mut cmd = std_cmd(env.dir.path());
    cmd.arg("--db").arg(&env.db).args(BATCH);
    cmd.stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    cmd.spawn().unwrap()
}

fn sigkill(mut child: Child) {
    let _ = child.kill(); // SIGKILL
    let _ = child.wait();
}

/// Compactions committed so far (0 before agent-db created its tables).
fn committed(c: &Connection) -> usize {
    c.query_row("SELECT COUNT(*) FROM agent_db_compactions", [], |r| {
        r.get::<_, i64>(0)
    })
    .map_or(0, |n| n as usize)
}

/// Waits until the store holds `target` compactions while `child` still runs. `false` when the
/// child exited first (a batch always ends, so this needs no deadline).
fn wait_for_commits(c: &Connection, child: &mut Child, target: usize) -> bool {
    loop {
        if committed(c) >= target {
            return true;
        }
        if child.try_wait().unwrap().is_some() {
            return false;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

#[test]
fn sigkill_at_varied_moments_leaves_every_conversation_old_or_new() {
    // Messages at a quarter of the generator's sizes: 240 conversations still make a batch of
    // more than a hundred commits for the kills to land in.
    let env = Env::generated_at(240, 99, &[], 0.25);
    let orig = originals(&env);
    let total = planned(&env);
    assert!(total > 100, "the batch plans only {total} of 240");
    let mut progress = Vec::new();
    // Kills that land mid-batch whatever the machine's speed: right after the run's k-th commit.
    // They come first: each run resumes the batch where the last left off, and on a fast machine
    // the timed kills below can leave fewer than these need (a regression seen once the token
    // counter got faster).
    let watcher = env.conn();
    for k in [1, 2, 4, 8] {
        let target = committed(&watcher) + k;
        let mut child = spawn_batch(&env);
        let running = wait_for_commits(&watcher, &mut child, target);
        sigkill(child);
        let now = check_consistent(&env.conn(), &orig);
        assert!(
            running,
            "the batch ended before commit {target} ({now} compacted)"
        );
        progress.push(now);
    }
    for i in 0..10u64 {
        let child = spawn_batch(&env);
        // Varied kill moments: from during start-up to well into the batch (or after its end).
        std::thread::sleep(Duration::from_millis(20 + i * i * 9));
        sigkill(child);
        progress.push(check_consistent(&env.conn(), &orig));
    }
    eprintln!("compacted after each kill: {progress:?} of {total}");
    assert!(
        progress.iter().any(|&p| 0 < p && p < total),
        "no kill landed mid-batch: compacted after each kill {progress:?} of {total}"
    );
    // A rerun completes the batch.
    let out = bare_cmd(env.dir.path())
        .arg("--db")
        .arg(&env.db)
        .args(BATCH)
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let done = check_consistent(&env.conn(), &orig);
    // Nothing compactable is left: a dry run plans nothing.
    let left = planned(&env);
    assert_eq!(left, 0, "the rerun left work: {left} still planned");
    assert_eq!(done, total, "{done} compacted, the batch planned {total}");
}

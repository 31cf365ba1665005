//! A store busy with another writer: reported once with its own exit code, and a write lock
//! released within `AGENT_DB_BUSY_WAIT` is waited for. Both are shown by what happens, not by
//! how long it took: the run gives up on its own while the lock is still held, and a run still
//! waiting (it says so) finishes once the lock is released.

use std::io::{BufRead, BufReader};
use std::process::Stdio;

use crate::common::{std_cmd, Env};

/// The `compact` arguments of the busy tests.
const COMPACT: &[&str] = &[
    "compact",
    "--all-over",
    "0.05",
    "--idle",
    "0",
    "--keep-tokens",
    "3000",
    "--yes",
];

/// The `compact` run the busy tests make, with `AGENT_DB_BUSY_WAIT` set to `wait`.
fn busy_run(env: &Env, wait: &str) -> std::process::Output {
    env.cmd()
        .args(COMPACT)
        .arg("--quiet")
        .env("AGENT_DB_BUSY_WAIT", wait)
        .output()
        .unwrap()
}

#[test]
fn a_store_busy_with_another_writer_is_reported_once_with_its_own_exit_code() {
    let env = Env::generated(12, 7, &[]);
    let conversations = env.dump("conversations");
    // Another process's writer: a second connection holding SQLite's write lock for the whole
    // run.
    let holder = env.conn();
    holder.execute_batch("BEGIN IMMEDIATE").unwrap();
    // The lock is held until the run is over: a run that returns at all gave up waiting on its
    // own (its wait is bounded).
    let out = busy_run(&env, "1s");
    holder.execute_batch("ROLLBACK").unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(9), "{stderr}");
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(
        lines.len(),
        1,
        "one line, not one per conversation:\n{stderr}"
    );
    // The one busy message of every command, naming the process that holds the lock (this
    // test), not a guess at who it is.
    assert_eq!(
        lines[0],
        format!(
            "error: {}: busy: process {} ({}) holds a lock on it; nothing was left half-written, rerun later",
            env.db.display(),
            std::process::id(),
            std::fs::read_to_string("/proc/self/comm").unwrap().trim()
        ),
        "{stderr}"
    );
    assert_eq!(env.dump("conversations"), conversations, "nothing changed");
    let audit: i64 = env
        .conn()
        .query_row("SELECT count(*) FROM agent_db_compactions", [], |r| {
            r.get(0)
        })
        .unwrap_or(0);
    assert_eq!(audit, 0);
    // A rerun once the writer is done compacts them.
    let out = busy_run(&env, "1s");
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_ne!(env.dump("conversations"), conversations);
}

/// The lock is released only once agent-db has said it is waiting for it (its notice, after
/// 2 s of waiting): the run then goes on and compacts, so it waited rather than failed.
#[test]
fn a_write_lock_released_within_the_wait_is_waited_for() {
    let env = Env::generated(12, 7, &[]);
    let holder = env.conn();
    holder.execute_batch("BEGIN IMMEDIATE").unwrap();
    let mut child = std_cmd(env.dir.path())
        .arg("--db")
        .arg(&env.db)
        .args(COMPACT)
        .env("AGENT_DB_BUSY_WAIT", "300s")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    let mut before_release = Vec::new();
    let mut line = String::new();
    while stderr.read_line(&mut line).unwrap() > 0 {
        before_release.push(std::mem::take(&mut line));
        if before_release.last().unwrap().starts_with("waiting for ") {
            break;
        }
    }
    let notice = format!(
        "waiting for {} (another process holds a write lock)\n",
        env.db.display()
    );
    assert_eq!(
        before_release.last(),
        Some(&notice),
        "agent-db said it waits, while the lock was held: {before_release:?}"
    );
    holder.execute_batch("ROLLBACK").unwrap();
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut stderr, &mut rest).unwrap();
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(0), "{rest}");
    let audit: i64 = env
        .conn()
        .query_row("SELECT count(*) FROM agent_db_compactions", [], |r| {
            r.get(0)
        })
        .unwrap();
    assert!(audit >= 1);
}

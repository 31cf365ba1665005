//! A store busy with another writer: reported once with its own exit code, and a write lock
//! released within `AGENT_DB_BUSY_WAIT` is waited for.

use crate::common::Env;

/// The `compact` run the busy tests make, with `AGENT_DB_BUSY_WAIT` set to `wait`.
fn busy_run(env: &Env, wait: &str) -> (std::process::Output, std::time::Duration) {
    let started = std::time::Instant::now();
    let out = env
        .cmd()
        .args([
            "compact",
            "--all-over",
            "0.05",
            "--idle",
            "0",
            "--keep-tokens",
            "3000",
        ])
        .args(["--yes", "--quiet"])
        .env("AGENT_DB_BUSY_WAIT", wait)
        .output()
        .unwrap();
    (out, started.elapsed())
}

#[test]
fn a_store_busy_with_another_writer_is_reported_once_with_its_own_exit_code() {
    let env = Env::generated(12, 7, &[]);
    let conversations = env.dump("conversations");
    // Another process's writer: a second connection holding SQLite's write lock for the whole
    // run.
    let holder = env.conn();
    holder.execute_batch("BEGIN IMMEDIATE").unwrap();
    let (out, took) = busy_run(&env, "1s");
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
    // Bounded: it waited about the second it was given, not per conversation.
    assert!(
        took >= std::time::Duration::from_millis(900) && took < std::time::Duration::from_secs(15),
        "{took:?}"
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
    let (out, _) = busy_run(&env, "1s");
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_ne!(env.dump("conversations"), conversations);
}

#[test]
fn a_write_lock_released_within_the_wait_is_waited_for() {
    let env = Env::generated(12, 7, &[]);
    let db = env.db.clone();
    let (locked_tx, locked_rx) = std::sync::mpsc::channel();
    let holder = std::thread::spawn(move || {
        let c = rusqlite::Connection::open(&db).unwrap();
        c.execute_batch("BEGIN IMMEDIATE").unwrap();
        locked_tx.send(()).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(2500));
        c.execute_batch("ROLLBACK").unwrap();
    });
    locked_rx.recv().unwrap();
    let (out, took) = busy_run(&env, "30s");
    holder.join().unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        took >= std::time::Duration::from_secs(2),
        "it waited: {took:?}"
    );
    let audit: i64 = env
        .conn()
        .query_row("SELECT count(*) FROM agent_db_compactions", [], |r| {
            r.get(0)
        })
        .unwrap();
    assert!(audit >= 1);
}

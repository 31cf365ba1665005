//! One landing path: a compaction lands the same way whoever writes it. The same selection
//! through `compact` and through `compact --plan-out` + `apply` leaves equal audit rows, column
//! by column (read with the test's own SQL from `agent_db_compactions`), and `apply` stops where
//! `compact` stops when the store cannot take a write (a real full disk: a small tmpfs).

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use rusqlite::types::ValueRef;
use rusqlite::Connection;
use serde_json::Value;

use crate::common::{bare_cmd, json, Env};

/// A hook script in `dir/.agent-db/hooks/NAME` (found there when agent-db runs in `dir`) that
/// answers `hook` with `event` and runs `body` on `run`.
fn hook(dir: &Path, name: &str, event: &str, body: &str) {
    let hooks = dir.join(".agent-db").join("hooks");
    std::fs::create_dir_all(&hooks).unwrap();
    let p = hooks.join(name);
    std::fs::write(
        &p,
        format!("#!/bin/sh\ncase \"$1\" in\nhook) echo {event} ;;\nrun)\n{body}\n;;\nesac\n"),
    )
    .unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// `agent-db --db DB ARGS…` run in `dir` (so its `.agent-db/hooks/` are found): exit code,
/// stdout, stderr.
fn run(dir: &Path, db: &Path, args: &[&str]) -> (i32, String, String) {
    let out = bare_cmd(dir)
        .current_dir(dir)
        .arg("--db")
        .arg(db)
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Every audit row, column name → value as text, keyed by conversation and by its place among
/// that conversation's compactions (the writers may commit in another order).
fn audit_rows(db: &Path) -> BTreeMap<(String, usize), BTreeMap<String, String>> {
    let c = Connection::open(db).unwrap();
    let mut s = c
        .prepare("SELECT * FROM agent_db_compactions ORDER BY conversation_id, id")
        .unwrap();
    let names: Vec<String> = s.column_names().iter().map(|n| n.to_string()).collect();
    let mut rows = s.query([]).unwrap();
    let mut out = BTreeMap::new();
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    while let Some(r) = rows.next().unwrap() {
        let mut cols = BTreeMap::new();
        for (i, n) in names.iter().enumerate() {
            let v = match r.get_ref(i).unwrap() {
                ValueRef::Null => "NULL".to_string(),
                ValueRef::Integer(i) => i.to_string(),
                ValueRef::Real(f) => f.to_string(),
                ValueRef::Text(t) => String::from_utf8_lossy(t).into_owned(),
                ValueRef::Blob(b) => format!("blob:{}", hex::encode(b)),
            };
            cols.insert(n.clone(), v);
        }
        let id = cols["conversation_id"].clone();
        let k = seen.entry(id.clone()).or_default();
        *k += 1;
        out.insert((id, *k), cols);
    }
    out
}

/// The columns that differ by nature between two writes of the same compaction: the row's id
/// and when it was written.
const BY_NATURE: [&str; 2] = ["id", "compacted_at"];

/// The `details` keys only a plan's write has: where the plan came from (`review`, `plan`) and
/// whether its summary was edited (`edited`).
const APPLY_ONLY: [&str; 3] = ["review", "plan", "edited"];

#[test]
fn compact_and_plan_then_apply_write_equal_audit_rows() {
    let env = Env::generated(6, 31, &[]);
    // A hook runs in the conversation's cwd when it exists: keep it in the temp dir.
    env.conn()
        .execute("UPDATE conversations SET cwd = NULL", [])
        .unwrap();
    env.conn()
        .execute("UPDATE conversation_summaries SET cwd = NULL", [])
        .unwrap();
    let dir = env.dir.path();
    // A before_compaction hook that allows: its record belongs in the audit row's details.
    hook(dir, "allow", "before_compaction", "cat >/dev/null");
    let first =
        env.ids("SELECT id FROM conversations ORDER BY length(raw_messages) DESC, id LIMIT 1");
    let twin = dir.join("twin.db");
    std::fs::copy(&env.db, &twin).unwrap();
    // Round one, the same on both copies: one conversation compacted with a long tail, so round
    // two re-compacts it (its audit row then says what the summary was written from).
    let round_one = [
        "compact",
        &first[0],
        "--strategy",
        "extractive",
        "--keep-tokens",
        "10000",
        "--force",
        "--yes",
    ];
    for db in [&env.db, &twin] {
        let (code, _, err) = run(dir, db, &round_one);
        assert_eq!(code, 0, "{err}");
    }
    // Round two: every conversation over 1% of its window, directly and through a plan.
    let round_two = [
        "compact",
        "--all-over",
        "0.01",
        "--idle",
        "0",
        "--strategy",
        "extractive",
        "--keep-tokens",
        "300",
        "--force",
        "--yes",
    ];
    let (code, _, err) = run(dir, &env.db, &round_two);
    assert_eq!(code, 0, "{err}");
    let plan = dir.join("plan.json");
    let mut planned = round_two.to_vec();
    planned.extend(["--plan-out", plan.to_str().unwrap()]);
    let (code, _, err) = run(dir, &twin, &planned);
    assert_eq!(code, 0, "{err}");
    let (code, _, err) = run(dir, &twin, &["apply", plan.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");

    let direct = audit_rows(&env.db);
    let applied = audit_rows(&twin);
    assert!(direct.len() >= 3, "round two compacts several: {direct:#?}");
    assert_eq!(
        direct.keys().collect::<Vec<_>>(),
        applied.keys().collect::<Vec<_>>()
    );
    let mut recompacted = 0;
    for (key, d) in &direct {
        let a = &applied[key];
        assert_eq!(
            d.keys().collect::<Vec<_>>(),
            a.keys().collect::<Vec<_>>(),
            "the same columns"
        );
        let dd: Value = serde_json::from_str(&d["details"]).unwrap();
        let mut ad: Value = serde_json::from_str(&a["details"]).unwrap();
        if key.1 == 1 && key.0 == first[0] {
            // Round one: a plain compact on both copies.
            assert_eq!(dd, ad, "{key:?}");
        } else {
            // A plan's write says where it came from, and nothing else differs.
            let obj = ad.as_object_mut().unwrap();
            assert_eq!(obj.get("review"), Some(&Value::from("plan")), "{key:?}");
            assert_eq!(obj.get("edited"), Some(&Value::from(false)), "{key:?}");
            for k in APPLY_ONLY {
                assert!(obj.shift_remove(k).is_some(), "{key:?} {k}");
            }
            assert_eq!(dd, ad, "the audit details of {key:?}");
            // What the plan's write used to leave out, present with the run's values.
            assert_eq!(ad["keep_tokens"], 300, "{key:?}: {ad:#}");
            assert_eq!(
                ad["hooks"][0]["event"], "before_compaction",
                "{key:?}: {ad:#}"
            );
        }
        if key.1 == 2 {
            recompacted += 1;
            assert_eq!(ad["resummary"]["from"], "originals", "{key:?}: {ad:#}");
        }
        for col in d.keys() {
            if BY_NATURE.contains(&col.as_str()) || col == "details" {
                continue;
            }
            assert_eq!(d[col], a[col], "column {col} of {key:?}");
        }
    }
    assert_eq!(recompacted, 1, "the re-compaction is in round two");
    assert_eq!(direct[&(first[0].clone(), 2)]["reason"], "threshold");
}

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// A test that cannot run here says so, and fails under `CI`.
fn cannot_run(why: &str) {
    if std::env::var_os("CI").is_some_and(|v| !v.is_empty()) {
        panic!("{why}, and CI is set");
    }
    eprintln!("skipping: {why}");
}

struct Unmount(std::path::PathBuf);

impl Drop for Unmount {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount").arg(&self.0).status();
    }
}

/// The rows of a `--json` report, by conversation: their status and its detail.
fn statuses(doc: &Value) -> Vec<(String, String, String)> {
    doc["conversations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["id"].as_str().unwrap_or_default().to_string(),
                r["status"].as_str().unwrap_or_default().to_string(),
                r["detail"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect()
}

/// The disk fills after the first write (an `after_compaction` hook fills the tmpfs the store is
/// on): the next write fails with SQLite's "database or disk is full", and, as in `compact`, no
/// later proposal is started; each says the store cannot be written.
#[test]
fn apply_starts_nothing_more_once_the_disk_is_full() {
    if !is_root() {
        return cannot_run("mounting a small tmpfs needs root");
    }
    let env = Env::generated(6, 31, &[]);
    let disk = env.dir.path().join("small-disk");
    std::fs::create_dir(&disk).unwrap();
    let mounted = std::process::Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=24m", "tmpfs"])
        .arg(&disk)
        .status();
    if !matches!(mounted, Ok(s) if s.success()) {
        return cannot_run(&format!(
            "mount -t tmpfs is not permitted here ({mounted:?})"
        ));
    }
    let _guard = Unmount(disk.clone());
    let db = disk.join("storage.db");
    std::fs::copy(&env.db, &db).unwrap();
    let dir = env.dir.path();
    let plan = dir.join("plan.json");
    let (code, _, err) = run(
        dir,
        &db,
        &[
            "compact",
            "--all-over",
            "0.01",
            "--idle",
            "0",
            "--strategy",
            "extractive",
            "--keep-tokens",
            "300",
            "--force",
            "--plan-out",
            plan.to_str().unwrap(),
        ],
    );
    assert_eq!(code, 0, "{err}");
    let n = serde_json::from_str::<Value>(&std::fs::read_to_string(&plan).unwrap()).unwrap()
        ["conversations"]
        .as_array()
        .unwrap()
        .len();
    assert!(n >= 4, "the plan has several proposals: {n}");
    // After the first write, fill the disk to the last byte.
    let fill = disk.join("fill");
    hook(
        dir,
        "fill-disk",
        "after_compaction",
        &format!(
            "cat >/dev/null\ndd if=/dev/zero of='{}' bs=4096 2>/dev/null\ntrue",
            fill.display()
        ),
    );
    let mut cmd = bare_cmd(dir);
    cmd.current_dir(dir)
        .arg("--db")
        .arg(&db)
        .args(["apply", plan.to_str().unwrap(), "--json"]);
    let (doc, code) = json(cmd);
    assert_eq!(code, 1, "{doc:#}");
    let rows = statuses(&doc);
    assert_eq!(rows.len(), n, "{doc:#}");
    assert_eq!(rows[0].1, "compacted", "{doc:#}");
    assert_eq!(rows[1].1, "failed", "{doc:#}");
    assert!(rows[1].2.contains("full"), "{doc:#}");
    for r in &rows[2..] {
        assert!(
            r.2.starts_with("not started: the store cannot be written"),
            "{r:?} in {doc:#}"
        );
    }
    // Only the first proposal was written.
    let c = Connection::open(&db).unwrap();
    let written: i64 = c
        .query_row("SELECT COUNT(*) FROM agent_db_compactions", [], |r| {
            r.get(0)
        })
        .unwrap();
    assert_eq!(written, 1);
}

//! Crash safety of `reclaim` (and `reclaim --vacuum`): twenty rounds, each a fresh copy of one
//! generated opencode 1.x store (built from opencode's DDL), each run SIGKILLed at a seeded random
//! instant: after a random number of its removals was seen committed (the kill waits for the
//! store to change, not for a clock), or after a random delay; the `--vacuum` rounds also after
//! every removal, while the VACUUM runs. After every kill the store passes `PRAGMA
//! integrity_check`, and `restore --all-since` of everything the run removed gives back every
//! table of the original cell for cell (storage class and bytes): no row lost, none both in the
//! store and archived. A rerun on a killed store completes the reclaim, and a restore of that
//! gives the original back too.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Child;
use std::time::Duration;

use agent_db_synth::opencode::{generate_opencode, OpencodeEra};
use agent_db_synth::SynthOptions;
use rusqlite::Connection;

use crate::common::{bare_cmd, dump_all, json, std_cmd};

/// Every table but agent-db's own (`agent_db_*`), cell for cell, rows in the order of their
/// cells (a restored row is the same row under another internal rowid, which opencode never
/// reads: its tables are keyed by their primary keys).
fn agent_rows(db: &Path) -> BTreeMap<String, Vec<Vec<String>>> {
    let c = Connection::open(db).unwrap();
    let mut d = dump_all(&c);
    d.retain(|t, _| !t.starts_with("agent_db_"));
    // agent-db's AUTOINCREMENT tables have their counters in `sqlite_sequence` (created by
    // agent-db's first write when opencode's tables have none).
    if let Some(seq) = d.get_mut("sqlite_sequence") {
        seq.retain(|r| !r[1].starts_with("Text(\"agent_db_"));
        if seq.is_empty() {
            d.remove("sqlite_sequence");
        }
    }
    for rows in d.values_mut() {
        for r in rows.iter_mut() {
            r.remove(0);
        }
        rows.sort();
    }
    d
}

fn integrity(db: &Path) {
    let c = Connection::open(db).unwrap();
    let ok: String = c
        .query_row("PRAGMA integrity_check", [], |r| r.get(0))
        .unwrap();
    assert_eq!(ok, "ok", "integrity_check of {}", db.display());
}

/// Removals committed so far (0 before agent-db created its tables).
fn committed(c: &Connection) -> usize {
    c.query_row(
        "SELECT COUNT(*) FROM agent_db_compactions WHERE strategy = 'reclaim'",
        [],
        |r| r.get::<_, i64>(0),
    )
    .map_or(0, |n| n as usize)
}

/// Copies the store's files (the WAL too, whatever the killed process left) to `to`.
fn copy_store(from: &Path, to: &Path) {
    for suffix in ["", "-wal", "-shm"] {
        let mut f = from.as_os_str().to_owned();
        f.push(suffix);
        let mut t = to.as_os_str().to_owned();
        t.push(suffix);
        let (f, t) = (PathBuf::from(f), PathBuf::from(t));
        let _ = std::fs::remove_file(&t);
        if f.exists() {
            std::fs::copy(&f, &t).unwrap();
        }
    }
}

/// A small seeded generator (splitmix64): the kill instants differ per round, the same per run.
struct Seeded(u64);

impl Seeded {
    fn below(&mut self, n: u64) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        (z ^ (z >> 31)) % n.max(1)
    }
}

fn spawn(home: &Path, db: &Path, vacuum: bool) -> Child {
    let mut cmd = std_cmd(home);
    cmd.arg("--db")
        .arg(db)
        .args(["reclaim", "--idle", "0s", "--yes", "--quiet"]);
    if vacuum {
        cmd.arg("--vacuum");
    }
    cmd.stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    cmd.spawn().unwrap()
}

/// Waits until `target` removals are committed while `child` runs; `false` when it exited first
/// (a reclaim always ends, so this needs no deadline).
fn wait_for_commits(db: &Path, child: &mut Child, target: usize) -> bool {
    let c = Connection::open(db).unwrap();
    loop {
        if committed(&c) >= target {
            return true;
        }
        if child.try_wait().unwrap().is_some() {
            return false;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// In a copy of the killed store: `restore --all-since` of every removal gives `orig` back.
fn restores_to(home: &Path, db: &Path, orig: &BTreeMap<String, Vec<Vec<String>>>, what: &str) {
    let copy = home.join("restored.db");
    copy_store(db, &copy);
    let out = bare_cmd(home)
        .arg("--db")
        .arg(&copy)
        .args(["restore", "--all-since", "3650d"])
        .output()
        .unwrap();
    let removed = committed(&Connection::open(&copy).unwrap());
    assert!(
        out.status.success() || removed == 0,
        "{what}: restore failed ({removed} removals): {}",
        String::from_utf8_lossy(&out.stderr)
    );
    integrity(&copy);
    let now = agent_rows(&copy);
    let differ: Vec<String> = orig
        .iter()
        .filter(|(t, rows)| now.get(*t) != Some(rows))
        .map(|(t, rows)| {
            format!(
                "{t}: {} rows, now {:?}",
                rows.len(),
                now.get(t).map(Vec::len)
            )
        })
        .collect();
    assert!(
        differ.is_empty() && now.len() == orig.len(),
        "{what}: the store with its {removed} removal(s) restored differs from the original: {differ:?}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn sigkill_during_reclaim_loses_nothing_and_restore_resolves_everything() {
    let dir = tempfile::tempdir().unwrap();
    let template = dir.path().join("template.db");
    let opts = SynthOptions {
        conversations: 120,
        seed: 31,
        scale: 0.3,
        ..SynthOptions::default()
    };
    generate_opencode(
        &template,
        &opts,
        OpencodeEra::preset("opencode-1.18").unwrap(),
    )
    .unwrap();
    let orig = agent_rows(&template);
    let db = dir.path().join("opencode.db");
    copy_store(&template, &db);
    let mut dry = bare_cmd(dir.path());
    dry.arg("--db")
        .arg(&db)
        .args(["reclaim", "--idle", "0s", "--dry-run", "--json"]);
    let (doc, code) = json(dry);
    assert_eq!(code, 0, "{doc}");
    let units: u64 = doc["categories"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["conversations"].as_u64().unwrap())
        .sum();
    assert!(units >= 100, "the reclaim plans {units} removals: {doc}");
    let units = units as usize;

    let mut rng = Seeded(0x005e_ed42);
    let mut after_kill = Vec::new();
    for round in 0..20u64 {
        copy_store(&template, &db);
        let vacuum = round % 2 == 1;
        let mut child = spawn(dir.path(), &db, vacuum);
        match round % 4 {
            // After a random number of committed removals (mid-batch whatever the speed).
            0 | 1 => {
                let k = 1 + rng.below(units as u64 - 1) as usize;
                wait_for_commits(&db, &mut child, k);
            }
            // After every removal: with --vacuum, while the VACUUM runs (or once it is done).
            2 | 3 if vacuum => {
                wait_for_commits(&db, &mut child, units);
                std::thread::sleep(Duration::from_millis(rng.below(40)));
            }
            // After a random delay, from start-up on.
            _ => std::thread::sleep(Duration::from_millis(rng.below(1500))),
        }
        let _ = child.kill(); // SIGKILL
        let _ = child.wait();
        integrity(&db);
        let removed = committed(&Connection::open(&db).unwrap());
        after_kill.push(removed);
        restores_to(
            dir.path(),
            &db,
            &orig,
            &format!("round {round} (vacuum {vacuum})"),
        );
    }
    eprintln!("removals committed at each kill: {after_kill:?} of {units}");
    assert!(
        after_kill.iter().any(|&n| 0 < n && n < units),
        "no kill landed mid-reclaim: {after_kill:?} of {units}"
    );

    // A rerun on the last killed store completes the reclaim; restoring it gives the original.
    let out = bare_cmd(dir.path())
        .arg("--db")
        .arg(&db)
        .args(["reclaim", "--idle", "0s", "--yes", "--vacuum"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    integrity(&db);
    let mut again = bare_cmd(dir.path());
    again
        .arg("--db")
        .arg(&db)
        .args(["reclaim", "--idle", "0s", "--dry-run", "--json"]);
    let (doc, _) = json(again);
    assert!(
        doc["categories"].as_array().unwrap().is_empty(),
        "the rerun left work: {doc}"
    );
    assert_eq!(committed(&Connection::open(&db).unwrap()), units);
    restores_to(dir.path(), &db, &orig, "after the rerun");
}

//! `retire` on a store of every kind (each built from the agent's DDL): the conversation's rows
//! leave every table (checked by the test's own SQL: no row of the agent's tables names it or
//! the child conversations that moved with it, and no other row changed), `restore` puts every
//! row back cell for cell (storage class, bytes, rowid), `--dry-run` writes nothing, a write
//! waiting for the store while retire holds it is kept, and a crash at
//! any step (a failpoint that aborts the process, or SIGKILL at seeded random instants) leaves
//! every conversation in exactly one of the two files once any command has run.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use rusqlite::Connection;
use tempfile::TempDir;

use crate::common::{bare_cmd, dump_all, files_hash, json, std_cmd, NOW};

/// The kinds, each with its conversation table and the column naming a parent (from the
/// agent's DDL).
const KINDS: &[(&str, &str, Option<&str>)] = &[
    ("kodelet", "conversations", None),
    ("docker-agent", "sessions", Some("parent_id")),
    ("goose", "sessions", Some("parent_session_id")),
    ("opencode", "session", Some("parent_id")),
    ("opencode-v2", "session_v2", Some("parent_id")),
    ("opencode-v2-upgraded", "session_v2", Some("parent_id")),
    ("kilo", "session", Some("parent_id")),
    ("crush", "sessions", Some("parent_session_id")),
];

struct S {
    dir: TempDir,
    db: PathBuf,
    root: &'static str,
    parent: Option<&'static str>,
}

fn opts(n: usize) -> agent_db_synth::SynthOptions {
    agent_db_synth::SynthOptions {
        conversations: n,
        seed: 21,
        scale: 0.3,
        ..agent_db_synth::SynthOptions::default()
    }
}

/// A store of `kind` with a few conversations.
fn make(kind: &str, n: usize) -> S {
    use agent_db_synth::docker_agent::{generate_docker_agent, Generation};
    use agent_db_synth::goose::{generate_goose, GooseSchema};
    use agent_db_synth::opencode::{generate_opencode, OpencodeEra};
    use agent_db_synth::opencode_v2::{generate_opencode_v2, V2Era};
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join(format!("{kind}.db"));
    match kind {
        "kodelet" => {
            agent_db_synth::generate(&db, &opts(n)).unwrap();
        }
        "docker-agent" => {
            generate_docker_agent(&db, &opts(n), Generation::Current(38)).unwrap();
        }
        "goose" => {
            generate_goose(&db, &opts(n), &GooseSchema::preset("goose").unwrap()).unwrap();
        }
        "opencode" => {
            generate_opencode(&db, &opts(n), OpencodeEra::Effect).unwrap();
        }
        "opencode-v2" => generate_opencode_v2(&db, n, 21, V2Era::Newest).unwrap(),
        "opencode-v2-upgraded" => generate_opencode_v2(&db, n, 21, V2Era::Upgraded).unwrap(),
        "kilo" => {
            crate::kilo::kilo_with_sessions(&db, n);
            kilo_rows(&db);
        }
        "crush" => {
            let c = crate::crush::build(&db, crate::crush::NEWEST_MAIN);
            for i in 0..n {
                crate::crush::fill(
                    &c,
                    &format!("s{i}"),
                    3,
                    i % 2 == 0,
                    1_700_000_000 + i as i64 * 100,
                );
            }
        }
        other => panic!("no kind {other}"),
    }
    let (_, root, parent) = KINDS.iter().find(|k| k.0 == kind).unwrap();
    S {
        dir,
        db,
        root,
        parent: *parent,
    }
}

/// Rows of Kilo's (and opencode 1.18's) other per-session tables for every top-level session,
/// with the columns Kilo 7.7.9's DDL declares.
fn kilo_rows(db: &std::path::Path) {
    let c = Connection::open(db).unwrap();
    c.execute_batch(
        "INSERT INTO session_context_epoch (session_id, baseline, snapshot, baseline_seq)
           SELECT id, 'b', 's', 1 FROM session;
         INSERT INTO session_input (id, session_id, prompt, delivery, admitted_seq, time_created)
           SELECT 'in_' || id, id, 'go on', 'queue', 1, 1 FROM session;
         INSERT INTO kilo_board (root_session_id, objective, time_created, time_updated)
           SELECT id, 'ship it', 1, 1 FROM session WHERE parent_id IS NULL;
         INSERT INTO kilo_board_message (id, board_root_session_id, seq, time_created, sender_session_id,
             recipient, type, body, source_message_id, source_call_id)
           SELECT 'kbm_' || root_session_id, root_session_id, 1, 1, root_session_id, 'all', 'note', 'hi', 'm', 'c'
           FROM kilo_board;",
    )
    .unwrap();
}

impl S {
    fn cmd(&self) -> assert_cmd::Command {
        let mut c = bare_cmd(self.dir.path());
        c.arg("--db").arg(&self.db);
        c
    }
    fn conn(&self) -> Connection {
        Connection::open(&self.db).unwrap()
    }
    fn cold(&self) -> PathBuf {
        let mut s = self.db.as_os_str().to_owned();
        s.push(".agent-db-cold.db");
        PathBuf::from(s)
    }
    /// Top-level conversations, in rowid order; one with children first when there is one.
    fn ids(&self) -> Vec<String> {
        let c = self.conn();
        let top = match self.parent {
            Some(p) => format!("WHERE \"{p}\" IS NULL OR \"{p}\" = ''"),
            None => String::new(),
        };
        let mut ids: Vec<String> = c
            .prepare(&format!(
                "SELECT id FROM \"{}\" {top} ORDER BY rowid",
                self.root
            ))
            .unwrap()
            .query_map([], |r| r.get(0))
            .unwrap()
            .map(|r| r.unwrap())
            .collect();
        if let Some(p) = self.parent {
            let with_child: Option<String> = c
                .query_row(
                    &format!("SELECT \"{p}\" FROM \"{}\" WHERE \"{p}\" IS NOT NULL AND \"{p}\" != '' LIMIT 1", self.root),
                    [],
                    |r| r.get(0),
                )
                .ok();
            if let Some(w) = with_child.filter(|w| ids.contains(w)) {
                ids.retain(|i| *i != w);
                ids.insert(0, w);
            }
        }
        ids
    }
    fn in_store(&self, id: &str) -> bool {
        self.conn()
            .query_row(
                &format!("SELECT COUNT(*) FROM \"{}\" WHERE id = ?1", self.root),
                [id],
                |r| r.get::<_, i64>(0),
            )
            .unwrap()
            > 0
    }
}

/// `id` and its children, and theirs, by the DDL's parent column.
fn descendants(s: &S, id: &str) -> Vec<String> {
    let mut want = vec![id.to_string()];
    let Some(p) = s.parent else { return want };
    let c = s.conn();
    let mut i = 0;
    while i < want.len() {
        let kids: Vec<String> = c
            .prepare(&format!("SELECT id FROM \"{}\" WHERE \"{p}\" = ?1", s.root))
            .unwrap()
            .query_map([&want[i]], |r| r.get(0))
            .unwrap()
            .map(|r| r.unwrap())
            .collect();
        want.extend(kids);
        i += 1;
    }
    want
}

/// Every table of the agent's (agent-db's own left out), every row with its rowid.
fn agent_dump(c: &Connection) -> BTreeMap<String, Vec<Vec<String>>> {
    let mut d = dump_all(c);
    d.retain(|t, _| !t.starts_with("agent_db_"));
    // agent-db's own AUTOINCREMENT counters are not the agent's.
    if let Some(seq) = d.get_mut("sqlite_sequence") {
        seq.retain(|r| !r[1].starts_with("Text(\"agent_db_"));
        if seq.is_empty() {
            d.remove("sqlite_sequence");
        }
    }
    d
}

/// The tables whose rows differ, with how many rows each side has (a short failure message).
fn differ(
    a: &BTreeMap<String, Vec<Vec<String>>>,
    b: &BTreeMap<String, Vec<Vec<String>>>,
) -> Vec<String> {
    let names: BTreeSet<&String> = a.keys().chain(b.keys()).collect();
    names
        .into_iter()
        .filter(|t| a.get(*t) != b.get(*t))
        .map(|t| {
            let (x, y) = (a.get(t).map_or(0, Vec::len), b.get(t).map_or(0, Vec::len));
            let first = a.get(t).and_then(|r| {
                r.iter()
                    .find(|row| !b.get(t).is_some_and(|o| o.contains(row)))
            });
            format!(
                "{t}: {x} vs {y} rows; first differing: {:.300}",
                format!("{first:?}")
            )
        })
        .collect()
}

/// The cell a text value `id` shows as in a dump.
fn text(id: &str) -> String {
    format!("Text({id:?})")
}

/// Rows of the agent's tables where any cell is one of `ids`.
fn mentions(d: &BTreeMap<String, Vec<Vec<String>>>, ids: &[String]) -> usize {
    let cells: BTreeSet<String> = ids.iter().map(|i| text(i)).collect();
    d.values()
        .flatten()
        .filter(|row| row[1..].iter().any(|c| cells.contains(c)))
        .count()
}

/// `retire ID --yes --json` then `restore ID`, checked against the dumps; how many
/// conversations moved.
fn round_trip(s: &S, id: &str) -> usize {
    let before = agent_dump(&s.conn());
    let want = descendants(s, id);
    let mut c = s.cmd();
    c.args(["retire", id, "--yes", "--json"]);
    let (doc, code) = json(c);
    assert_eq!(code, 0, "{doc}");
    let row = &doc["conversations"][0];
    assert_eq!(row["status"], "retired", "{doc}");
    let group: Vec<String> = row["conversations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap().to_string())
        .collect();
    assert_eq!(group[0], id);
    // The children (and theirs) by the DDL's parent column, and nothing else.
    let (mut a, mut b) = (group.clone(), want);
    a.sort();
    b.sort();
    assert_eq!(
        a, b,
        "{id}: the conversation and its children move together"
    );
    let after = agent_dump(&s.conn());
    // Gone from every table: no row names it or a child that moved with it.
    assert_eq!(mentions(&after, &group), 0, "{id} still named after retire");
    assert!(mentions(&before, &group) > 0);
    // Nothing else changed: every row left is one that was there, and every row gone named
    // one of the group.
    let cells: BTreeSet<String> = group.iter().map(|i| text(i)).collect();
    for (table, rows) in &before {
        let left: BTreeSet<&Vec<String>> = after[table].iter().collect();
        for r in rows {
            let named = r[1..].iter().any(|c| cells.contains(c));
            assert_eq!(
                !left.contains(r),
                named,
                "{table}: {:.300}",
                format!("{r:?}")
            );
        }
        assert!(
            after[table].iter().all(|r| rows.contains(r)),
            "{table} changed"
        );
    }
    assert_eq!(
        row["rows"].as_u64().unwrap() as usize,
        mentions(&before, &group)
    );
    // stats counts the cold file.
    let (st, _) = json({
        let mut c = s.cmd();
        c.args(["stats", "--json"]);
        c
    });
    let cold = std::fs::metadata(s.cold()).unwrap().len();
    assert_eq!(st["cold_bytes"].as_u64(), Some(cold));
    // The agent no longer lists it.
    let listed = s.cmd().args(["list", "--ids"]).output().unwrap();
    assert!(!String::from_utf8_lossy(&listed.stdout).contains(id));
    // Back, cell for cell, rowids included.
    let out = s.cmd().args(["restore", id]).output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let back = agent_dump(&s.conn());
    assert!(
        back == before,
        "{id}: restore is not cell-identical: {:?}",
        differ(&before, &back)
    );
    group.len()
}

#[test]
fn every_kind_retires_every_row_of_a_conversation_and_restores_it_cell_for_cell() {
    let mut with_children = Vec::new();
    for (kind, _, _) in KINDS {
        let s = make(kind, 4);
        let ids = s.ids();
        assert!(!ids.is_empty(), "{kind}: no conversation");
        if round_trip(&s, &ids[0]) > 1 {
            with_children.push(*kind);
        }
        // The history shows the retirement, restored.
        let (h, _) = json({
            let mut c = s.cmd();
            c.args(["history", "--json"]);
            c
        });
        let rows = h["compactions"].as_array().unwrap();
        assert!(
            rows.iter()
                .any(|r| r["strategy"] == "retire" && r["restored_at"].is_string()),
            "{kind}: {h}"
        );
    }
    // The seeded stores hold a conversation with a child (docker-agent's sub-session): the
    // child moved with its parent.
    assert!(!with_children.is_empty());
}

#[test]
fn odd_storage_classes_survive_retire_and_restore() {
    let s = make("opencode", 3);
    let id = s.ids()[0].clone();
    let c = s.conn();
    // A number stored as text, text as a blob, a negative zero, invalid UTF-8, a NULL.
    c.execute_batch(&format!(
        "UPDATE message SET time_updated = CAST(time_updated AS TEXT) WHERE rowid = (SELECT MIN(rowid) FROM message WHERE session_id = '{id}');
         UPDATE part SET data = CAST(data AS BLOB) WHERE rowid = (SELECT MIN(rowid) FROM part WHERE session_id = '{id}');
         UPDATE part SET time_created = -0.0 WHERE rowid = (SELECT MAX(rowid) FROM part WHERE session_id = '{id}');
         UPDATE session SET title = CAST(x'c328ff' AS TEXT), share_url = NULL WHERE id = '{id}';"
    ))
    .unwrap();
    drop(c);
    round_trip(&s, &id);
}

#[test]
fn dry_run_writes_nothing_and_says_what_would_move() {
    let s = make("goose", 3);
    let id = s.ids()[0].clone();
    let before = files_hash(&s.db);
    let mut c = s.cmd();
    c.args(["retire", &id, "--dry-run", "--json"]);
    let (doc, code) = json(c);
    assert_eq!(code, 0);
    assert_eq!(doc["dry_run"], true);
    assert_eq!(doc["conversations"][0]["status"], "would retire");
    let d = agent_dump(&s.conn());
    let rows = doc["conversations"][0]["rows"].as_u64().unwrap() as usize;
    assert_eq!(rows, mentions(&d, std::slice::from_ref(&id)));
    assert_eq!(files_hash(&s.db), before);
    assert!(!s.cold().exists());
}

#[test]
fn a_write_committed_while_retire_waits_for_the_store_is_retired_with_the_rest() {
    use rusqlite::TransactionBehavior;
    let s = make("opencode", 3);
    let ids = s.ids();
    let id = &ids[0];
    // opencode holds the store's write lock, a write to the session in flight.
    let mut holder = s.conn();
    let tx = holder
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .unwrap();
    tx.execute(
        "UPDATE message SET time_updated = time_updated + 1 WHERE session_id = ?1",
        [id],
    )
    .unwrap();
    let child = std_cmd(s.dir.path())
        .arg("--db")
        .arg(&s.db)
        .args(["retire", id, "--yes", "--json"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // agent-db takes its own lock once it has selected; then opencode's write commits (a
    // pause first, so that a retire reading before it waits for the store would read the rows
    // without the write).
    let lock = agent_db::store::lock::lock_path(&s.db);
    for _ in 0..600 {
        let taken = std::fs::File::open(&lock).is_ok_and(|f| f.try_lock().is_err());
        if taken {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    std::thread::sleep(std::time::Duration::from_millis(300));
    tx.commit().unwrap();
    let written = agent_dump(&s.conn());
    let out = child.wait_with_output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["conversations"][0]["status"], "retired", "{doc}");
    // Restored, the conversation has opencode's write: nothing was lost.
    let place = recover_and_check(&s, &ids, &written);
    assert_eq!(place[id], "cold");
}

#[test]
fn a_run_leaves_one_settled_retirement_per_conversation_and_no_run_row() {
    use agent_db::store::cold::Cold;
    use agent_db::store::{retirement, Access, Store};
    let s = make("opencode", 3);
    let ids = s.ids();
    let before = agent_dump(&s.conn());
    let mut store = Store::open(&s.db, Access::Write).unwrap();
    let mut cold = Cold::open(&s.cold(), true).unwrap().unwrap();
    let asked = vec![ids[0].clone(), "ses_not_there".into(), ids[1].clone()];
    let (out, busy) = retirement::retire_all(&mut store, &mut cold, &asked, NOW).unwrap();
    assert!(!busy);
    let status: Vec<&str> = out.iter().map(|o| o.status.as_str()).collect();
    assert_eq!(status[0], "retired");
    assert!(
        status[1].starts_with("skipped: not in the store"),
        "{status:?}"
    );
    assert_eq!(status[2], "retired");
    drop((store, cold));
    let rows: Vec<(String, String, i64)> = s
        .conn()
        .prepare("SELECT conversation_id, state, settled FROM agent_db_retirements ORDER BY rowid")
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
        .unwrap()
        .map(|r| r.unwrap())
        .collect();
    assert_eq!(
        rows,
        vec![
            (ids[0].clone(), "retired".into(), 1),
            (ids[1].clone(), "retired".into(), 1)
        ]
    );
    let audits: i64 = s
        .conn()
        .query_row(
            "SELECT COUNT(*) FROM agent_db_compactions WHERE strategy = 'retire'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(audits, 2);
    let place = recover_and_check(&s, &ids, &before);
    assert_eq!(
        [place[&ids[0]], place[&ids[1]], place[&ids[2]]],
        ["cold", "cold", "hot"]
    );
}

/// The cold file's change counter (header bytes 24..28: one per transaction it committed in
/// rollback-journal mode).
fn cold_commits(s: &S) -> u32 {
    let b = std::fs::read(s.cold()).unwrap();
    u32::from_be_bytes(b[24..28].try_into().unwrap())
}

#[test]
fn many_conversations_cost_the_cold_file_a_fixed_number_of_commits() {
    let s = make("opencode", 8);
    let ids = s.ids();
    assert!(ids.len() >= 6, "{}", ids.len());
    s.cmd().args(["retire", &ids[0], "--yes"]).assert().code(0);
    let before = cold_commits(&s);
    s.cmd()
        .args(["retire", "--yes"])
        .args(&ids[1..])
        .assert()
        .code(0);
    let commits = cold_commits(&s) - before;
    // One batch: the copies `moving`, then `retired` (not two or more per conversation).
    assert!(
        commits <= 2,
        "{commits} commits for {} conversations",
        ids.len() - 1
    );
    let place = where_each_is(&s, &ids);
    assert!(place.values().all(|p| *p == "cold"), "{place:?}");
}

/// Where each conversation is after recovery: in the store, or retired in the cold file;
/// both files pass `integrity_check`, and no retirement is left unsettled.
fn where_each_is(s: &S, ids: &[String]) -> BTreeMap<String, &'static str> {
    let hot = s.conn();
    let ok: String = hot
        .query_row("PRAGMA integrity_check", [], |r| r.get(0))
        .unwrap();
    assert_eq!(ok, "ok");
    // A kill before the cold file's first transaction can leave a file without its tables.
    let cold_tables = s.cold().exists()
        && Connection::open(s.cold())
            .unwrap()
            .query_row(
                "SELECT COUNT(*) FROM sqlite_master WHERE name = 'agent_db_cold'",
                [],
                |r| r.get::<_, i64>(0),
            )
            .unwrap()
            > 0;
    let cold_ids: BTreeSet<String> = if cold_tables {
        let c = Connection::open(s.cold()).unwrap();

        let ok: String = c
            .query_row("PRAGMA integrity_check", [], |r| r.get(0))
            .unwrap();
        assert_eq!(ok, "ok");
        let v: Vec<String> = c
            .prepare("SELECT conversation_id FROM agent_db_cold WHERE state = 'retired'")
            .unwrap()
            .query_map([], |r| r.get(0))
            .unwrap()
            .map(|r| r.unwrap())
            .collect();
        let all: i64 = c
            .query_row("SELECT COUNT(*) FROM agent_db_cold", [], |r| r.get(0))
            .unwrap();
        assert_eq!(all as usize, v.len(), "a cold copy is left half-moved");
        v.into_iter().collect()
    } else {
        BTreeSet::new()
    };
    let unsettled: i64 = hot
        .query_row(
            "SELECT COUNT(*) FROM agent_db_retirements WHERE settled = 0",
            [],
            |r| r.get(0),
        )
        .unwrap_or(0);
    assert_eq!(unsettled, 0);
    ids.iter()
        .map(|id| {
            let (h, c) = (s.in_store(id), cold_ids.contains(id));
            assert!(h ^ c, "{id}: in the store {h}, in the cold file {c}");
            (id.clone(), if h { "hot" } else { "cold" })
        })
        .collect()
}

/// Run any command (recovery), check each conversation is in one file, bring the retired ones
/// back, and compare every row with `before`.
fn recover_and_check(
    s: &S,
    ids: &[String],
    before: &BTreeMap<String, Vec<Vec<String>>>,
) -> BTreeMap<String, &'static str> {
    let out = s.cmd().arg("stats").output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let place = where_each_is(s, ids);
    for (id, p) in &place {
        if *p == "cold" {
            let out = s.cmd().args(["restore", id]).output().unwrap();
            assert_eq!(
                out.status.code(),
                Some(0),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
    }
    let now = agent_dump(&s.conn());
    assert!(
        &now == before,
        "a row was lost or changed: {:?}",
        differ(before, &now)
    );
    place
}

#[test]
fn a_crash_at_each_step_is_finished_or_undone_by_the_next_command() {
    let cases = [
        ("retire-read", "hot"),
        ("retire-cold", "hot"),
        ("retire-hot", "cold"),
        ("retire-mark", "cold"),
        ("restore-hot", "hot"),
        ("restore-cold", "hot"),
    ];
    for (stage, expected) in cases {
        let s = make("opencode", 3);
        let ids = s.ids();
        let id = &ids[0];
        let before = agent_dump(&s.conn());
        let restoring = stage.starts_with("restore");
        if restoring {
            s.cmd().args(["retire", id, "--yes"]).assert().code(0);
        }
        // A retire moves two conversations in one batch; the failpoint names the second.
        let (args, armed) = if restoring {
            (vec!["restore", id.as_str()], id)
        } else {
            (
                vec!["retire", id.as_str(), ids[1].as_str(), "--yes"],
                &ids[1],
            )
        };
        let out = s
            .cmd()
            .args(&args)
            .env("AGENT_DB_FAILPOINT", format!("{stage}:{armed}"))
            .output()
            .unwrap();
        assert_eq!(
            out.status.code(),
            None,
            "{stage}: the process did not stop there"
        );
        let out = s.cmd().arg("stats").output().unwrap();
        assert_eq!(out.status.code(), Some(0));
        let place = where_each_is(&s, &ids);
        assert_eq!(place[id], expected, "{stage}");
        if !restoring {
            assert_eq!(place[&ids[1]], expected, "{stage}: the batch split");
        }
        recover_and_check(&s, &ids, &before);
    }
}

/// Two batches: the first conversation alone fills one (a part of 68 MB, over the 64 MiB a
/// batch takes), the second goes in the next. The first batch's copy is marked `retired` only
/// in the second's cold commit, so a crash at each step of the second batch must leave the first
/// conversation retired and the second in one file, and recovery must give every row back.
#[test]
fn a_crash_in_the_second_batch_leaves_the_first_retired() {
    let cases = [
        // The failpoint, the conversation it is armed for, where each is afterwards.
        ("retire-read", 1, "hot"),
        ("retire-cold", 1, "hot"),
        ("retire-hot", 1, "cold"),
        // The first batch's mark, committed with the second batch's copies.
        ("retire-mark", 0, "hot"),
    ];
    for (stage, armed, second) in cases {
        let s = make("opencode", 3);
        let ids = s.ids();
        s.conn()
            .execute(
                "UPDATE part SET data = json_set(data, '$.text', printf('%.*c', 68000000, 'x'))
                 WHERE rowid = (SELECT MIN(rowid) FROM part WHERE session_id = ?1)",
                [&ids[0]],
            )
            .unwrap();
        let before = agent_dump(&s.conn());
        let out = s
            .cmd()
            .args(["retire", ids[0].as_str(), ids[1].as_str(), "--yes"])
            .env("AGENT_DB_FAILPOINT", format!("{stage}:{}", ids[armed]))
            .output()
            .unwrap();
        assert_eq!(out.status.code(), None, "{stage}: the process did not stop");
        let out = s.cmd().arg("stats").output().unwrap();
        assert_eq!(out.status.code(), Some(0), "{stage}");
        let place = where_each_is(&s, &ids);
        assert_eq!(place[&ids[0]], "cold", "{stage}: the first batch");
        assert_eq!(place[&ids[1]], second, "{stage}: the second batch");
        recover_and_check(&s, &ids, &before);
    }
}

/// A seeded generator of delays (xorshift), so a failing round can be run again.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

#[test]
fn kill_9_at_random_instants_loses_nothing_in_20_rounds() {
    let base = make("opencode", 6);
    let ids = base.ids();
    let before = agent_dump(&base.conn());
    let mut rng = Rng(0x005e_ed42);
    for round in 0..20 {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("opencode.db");
        std::fs::copy(&base.db, &db).unwrap();
        let s = S {
            dir,
            db,
            root: base.root,
            parent: base.parent,
        };
        let mut args: Vec<String> = vec!["--db".into(), s.db.display().to_string()];
        if round % 2 == 1 {
            // Odd rounds kill a restore: the first conversation is retired first.
            s.cmd().args(["retire", &ids[0], "--yes"]).assert().code(0);
            args.extend(["restore".into(), ids[0].clone()]);
        } else {
            args.extend(["retire".into(), "--yes".into()]);
            args.extend(ids.iter().take(4).cloned());
        }
        let mut child = std_cmd(s.dir.path())
            .args(&args)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        // Up to 0.6 s: past the start-up, through the steps of a few conversations.
        std::thread::sleep(std::time::Duration::from_micros(rng.next() % 600_000));
        let _ = child.kill();
        let _ = child.wait();
        let place = recover_and_check(&s, &ids, &before);
        eprintln!("round {round}: {place:?}");
    }
}

#[test]
fn retire_refuses_a_store_file_as_its_cold_file_and_moves_nothing() {
    let s = make("kodelet", 2);
    let id = s.ids()[0].clone();
    let before = files_hash(&s.db);
    let other = make("goose", 1);
    let out = s
        .cmd()
        .args(["retire", &id, "--yes", "--to"])
        .arg(&other.db)
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(4),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("not an agent-db cold file"));
    assert_eq!(files_hash(&s.db), before);
    assert!(s.in_store(&id));
}

#[test]
fn retire_without_a_selector_is_a_usage_error_and_an_unknown_id_is_not_found() {
    let s = make("kodelet", 2);
    let before = files_hash(&s.db);
    s.cmd().args(["retire", "--yes"]).assert().code(2);
    s.cmd()
        .args(["retire", "nosuchid", "--yes"])
        .assert()
        .code(5);
    s.cmd().args(["restore", "nosuchid"]).assert().code(5);
    assert_eq!(files_hash(&s.db), before);
    assert!(!s.cold().exists());
}

#[test]
fn a_child_retired_with_its_parent_is_restored_through_the_parent() {
    let s = make("docker-agent", 4);
    let parent = s.ids()[0].clone();
    let group = descendants(&s, &parent);
    assert!(group.len() > 1, "the seeded store has a sub-session");
    s.cmd().args(["retire", &parent, "--yes"]).assert().code(0);
    let out = s.cmd().args(["restore", &group[1]]).output().unwrap();
    assert_eq!(out.status.code(), Some(5));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains(&format!("agent-db restore {parent}")), "{err}");
    s.cmd().args(["restore", &parent]).assert().code(0);
    assert!(group.iter().all(|g| s.in_store(g)));
}

//! goose's `sessions.db` end to end, on generated stores of every schema version: the
//! selection against the test's own SQL, a compaction read back by our replay of goose's
//! loading rule (`goose_replay.rs`; goose itself is not run) with every other row and table compared by the test's own dumps,
//! restore byte for byte, an unknown newer schema, bad rows, and the strategies.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use agent_db_synth::goose::{generate_goose, GooseSchema};
use agent_db_synth::SynthOptions;
use rusqlite::Connection;
use serde_json::Value;
use tempfile::TempDir;

use crate::common::{bare_cmd, counts_and_times_of, files_hash, ids_agree, ids_with_status, json};
use crate::goose_replay::{check_compacted, check_pruned, is_summary, load};

const HEADER: &str = "[agent-db compaction summary]";

/// goose's providers whose `manages_own_context()` is true (aaif-goose: `ClaudeCodeProvider`,
/// `GeminiCliProvider`, and `AcpProvider` behind every `*_acp.rs` provider), by the names goose
/// stores in `sessions.provider_name`: goose never compacts their sessions.
const MANAGED_CONTEXT: &[&str] = &[
    "claude-code",
    "gemini-cli",
    "claude-acp",
    "codex-acp",
    "copilot-acp",
    "amp-acp",
    "pi-acp",
    "cursor-acp",
];

struct G {
    dir: TempDir,
    db: PathBuf,
}

impl G {
    fn new(preset: &str, n: usize) -> G {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("sessions.db");
        let opts = SynthOptions {
            conversations: n,
            seed: 5,
            scale: 1.0,
            ..SynthOptions::default()
        };
        generate_goose(&db, &opts, &GooseSchema::preset(preset).unwrap()).unwrap();
        G { dir, db }
    }

    fn cmd(&self) -> assert_cmd::Command {
        let mut c = bare_cmd(self.dir.path());
        c.arg("--db").arg(&self.db);
        c
    }

    fn conn(&self) -> Connection {
        Connection::open(&self.db).unwrap()
    }

    fn strings(&self, sql: &str) -> Vec<String> {
        let c = self.conn();
        let mut st = c.prepare(sql).unwrap();
        let rows = st.query_map([], |r| r.get::<_, String>(0)).unwrap();
        rows.map(|r| r.unwrap()).collect()
    }

    /// Every row of every table but agent-db's own, by table, in rowid order.
    fn dump(&self) -> BTreeMap<String, Vec<Vec<String>>> {
        let c = self.conn();
        let tables = self.strings(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'agent_db_%' ORDER BY name",
        );
        let mut out = BTreeMap::new();
        for t in tables {
            let mut st = c
                .prepare(&format!("SELECT rowid, * FROM \"{t}\" ORDER BY rowid"))
                .unwrap();
            let n = st.column_count();
            let rows = st
                .query_map([], |r| {
                    (0..n)
                        .map(|i| r.get_ref(i).map(crate::common::cell))
                        .collect::<rusqlite::Result<Vec<_>>>()
                })
                .unwrap();
            // agent-db's own AUTOINCREMENT tables add their sqlite_sequence rows.
            let seq = t == "sqlite_sequence";
            let rows = rows
                .map(|r| r.unwrap())
                .filter(|r: &Vec<String>| !(seq && r[1].starts_with("Text(\"agent_db_")));
            let rows: Vec<Vec<String>> = rows.collect();
            out.insert(t, rows);
        }
        out
    }

    /// The sessions over `ratio` that goose itself would compact (see [`G::over_any`]): not
    /// those whose provider manages its own context.
    fn over(&self, ratio: f64) -> BTreeSet<String> {
        let managed = self.managed();
        let aside = self.set_aside();
        self.over_any(ratio)
            .into_iter()
            .filter(|id| !managed.contains_key(id) && !aside.contains(id))
            .collect()
    }

    /// Sessions batch selections leave out by goose's own standing: `sub_agent` and `hidden`
    /// ones (goose lists only user and scheduled sessions) and archived ones.
    fn set_aside(&self) -> BTreeSet<String> {
        let has = |c: &str| {
            !self
                .strings(&format!(
                    "SELECT name FROM pragma_table_info('sessions') WHERE name = '{c}'"
                ))
                .is_empty()
        };
        let mut out = BTreeSet::new();
        if has("session_type") {
            out.extend(
                self.strings(
                    "SELECT id FROM sessions WHERE session_type IN ('sub_agent', 'hidden')",
                ),
            );
        }
        if has("archived_at") {
            out.extend(self.strings("SELECT id FROM sessions WHERE archived_at IS NOT NULL"));
        }
        out
    }

    /// The sessions whose `provider_name` is one of [`MANAGED_CONTEXT`], with it.
    fn managed(&self) -> BTreeMap<String, String> {
        let has = !self
            .strings("SELECT name FROM pragma_table_info('sessions') WHERE name = 'provider_name'")
            .is_empty();
        if !has {
            return BTreeMap::new();
        }
        let list: Vec<String> = MANAGED_CONTEXT.iter().map(|p| format!("'{p}'")).collect();
        self.strings(&format!(
            "SELECT id || '|' || provider_name FROM sessions WHERE provider_name IN ({})",
            list.join(", ")
        ))
        .into_iter()
        .map(|r| {
            let (id, p) = r.split_once('|').unwrap();
            (id.to_string(), p.to_string())
        })
        .collect()
    }

    /// The sessions over `ratio`, by the test's own rule: `total_tokens` over the stored
    /// `context_limit` when positive, else goose's 128,000 (no generated model is in
    /// agent-db's table or config).
    fn over_any(&self, ratio: f64) -> BTreeSet<String> {
        let has_config = !self
            .strings(
                "SELECT name FROM pragma_table_info('sessions') WHERE name = 'model_config_json'",
            )
            .is_empty();
        let limit = if has_config {
            "CASE WHEN CAST(json_extract(model_config_json, '$.context_limit') AS INTEGER) > 0 \
             THEN CAST(json_extract(model_config_json, '$.context_limit') AS INTEGER) ELSE 128000 END"
        } else {
            "128000"
        };
        self.strings(&format!(
            "SELECT id FROM sessions WHERE total_tokens IS NOT NULL AND total_tokens * 1.0 / ({limit}) >= {ratio}"
        ))
        .into_iter()
        .collect()
    }
}

fn compact(g: &G, args: &[&str]) -> Value {
    let mut c = g.cmd();
    c.args(["compact", "--idle", "0", "--yes", "--json"])
        .args(args);
    let (doc, code) = json(c);
    assert!(code == 0 || code == 1, "exit {code}: {doc:#}");
    doc
}

#[test]
fn list_all_over_selects_exactly_the_sessions_over_the_ratio() {
    for preset in GooseSchema::PRESETS {
        let g = G::new(preset, 12);
        let (doc, code) = json({
            let mut c = g.cmd();
            c.args(["list", "--all-over", "0.7", "--idle", "0", "--json"]);
            c
        });
        assert_eq!(code, 0, "{preset}");
        assert_eq!(doc["store"]["kind"], "goose");
        let got: BTreeSet<String> = ids_with_status(&doc, "selected").into_iter().collect();
        let want = g.over(0.7);
        assert!(!want.is_empty(), "{preset}: nothing over 0.7");
        assert_eq!(got, want, "{preset}");
    }
}

/// One `messages` row: (session_id, everything but metadata_json, metadata_json).
type MessageRow = (String, String, Option<String>);

/// Rows of `messages` keyed by id, each (session_id, everything but metadata_json, metadata_json).
fn messages(g: &G) -> BTreeMap<i64, (String, String, Option<String>)> {
    let c = g.conn();
    let mut st = c
        .prepare("SELECT id, session_id, role || '|' || content_json || '|' || created_timestamp || '|' || IFNULL(timestamp, '') || '|' || IFNULL(tokens, ''), metadata_json FROM messages")
        .unwrap();
    let rows = st
        .query_map([], |r| Ok((r.get(0)?, (r.get(1)?, r.get(2)?, r.get(3)?))))
        .unwrap();
    rows.map(|r| r.unwrap()).collect()
}

#[test]
fn goose_replay_loads_the_extractive_compaction_and_restore_is_byte_for_byte() {
    for preset in GooseSchema::PRESETS {
        let g = G::new(preset, 20);
        let before = g.dump();
        let rows_before = messages(&g);
        let doc = compact(&g, &["--all-over", "0.7", "--strategy", "extractive"]);
        let compacted: BTreeSet<String> = ids_with_status(&doc, "compacted").into_iter().collect();
        assert!(!compacted.is_empty(), "{preset}: {doc:#}");
        let conn = g.conn();
        for id in &compacted {
            let l = load(&conn, id).unwrap_or_else(|e| panic!("{preset} {id}: {e}"));
            check_compacted(&l, HEADER).unwrap_or_else(|e| panic!("{preset} {id}: {e}"));
        }
        // Existing rows: unchanged, or (compacted sessions only) hidden from the agent with
        // nothing else changed.
        let rows_after = messages(&g);
        for (id, (session, body, meta)) in &rows_before {
            let (s2, b2, m2) = rows_after
                .get(id)
                .unwrap_or_else(|| panic!("{preset}: row {id} gone"));
            assert_eq!((session, body), (s2, b2), "{preset}: row {id}");
            if m2 != meta {
                assert!(
                    compacted.contains(session),
                    "{preset}: row {id} of {session}"
                );
                let v: Value = serde_json::from_str(m2.as_deref().unwrap()).unwrap();
                assert_eq!(v["agentVisible"], false, "{preset}: row {id}");
            }
        }
        for (id, (session, _, _)) in rows_after
            .iter()
            .filter(|(id, _)| !rows_before.contains_key(id))
        {
            assert!(
                compacted.contains(session),
                "{preset}: new row {id} in {session}"
            );
        }
        let after = g.dump();
        for (table, rows) in &before {
            if !["messages", "sessions", "sqlite_sequence"].contains(&table.as_str()) {
                assert_eq!(rows, &after[table], "{preset}: table {table}");
            }
        }
        let untouched = |d: &BTreeMap<String, Vec<Vec<String>>>| -> Vec<Vec<String>> {
            d["sessions"]
                .iter()
                .filter(|r| !compacted.iter().any(|id| r[1] == format!("Text({id:?})")))
                .cloned()
                .collect()
        };
        assert_eq!(
            untouched(&before),
            untouched(&after),
            "{preset}: other sessions"
        );
        // Restore gives back every table, every cell.
        let out = g
            .cmd()
            .args(["restore", "--all-since", "1h"])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{preset}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(before, g.dump(), "{preset}: restore");
    }
}

#[test]
fn a_newer_schema_version_is_refused_with_exit_4() {
    let g = G::new("goose-v17", 4);
    g.conn()
        .execute("INSERT INTO schema_version (version) VALUES (18)", [])
        .unwrap();
    let hash = files_hash(&g.db);
    for args in [
        &["list"][..],
        &["compact", "--all-over", "0", "--idle", "0", "--dry-run"][..],
        &["compact", "--all-over", "0", "--idle", "0", "--yes"][..],
    ] {
        let out = g.cmd().args(args).output().unwrap();
        assert_eq!(out.status.code(), Some(4), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        // The file's version and the newest agent-db knows.
        assert!(err.contains("goose schema version 18 is newer"), "{err}");
        assert!(err.contains("the newest it knows is 17"), "{err}");
    }
    assert_eq!(files_hash(&g.db), hash);
}

#[test]
fn auto_detection_and_agent_flag_find_the_default_path() {
    let g = G::new("goose-v16", 3);
    let root = g.dir.path().join("root");
    let target = root.join("data/sessions/sessions.db");
    std::fs::create_dir_all(target.parent().unwrap()).unwrap();
    std::fs::copy(&g.db, &target).unwrap();
    for args in [
        &["list", "--json"][..],
        &["--agent", "goose", "list", "--json"][..],
    ] {
        let mut c = bare_cmd(g.dir.path());
        c.env("GOOSE_PATH_ROOT", &root).args(args);
        let (doc, code) = json(c);
        assert_eq!(code, 0);
        assert_eq!(doc["store"]["kind"], "goose");
        assert_eq!(crate::common::all_rows(&doc).len(), 3);
    }
}

/// A session agent-db compacts, and the rows of it a test can spoil.
fn big_session(g: &G) -> String {
    g.over(0.7).into_iter().next().expect("a session over 0.7")
}

#[test]
fn bad_rows_fail_only_their_session_or_follow_goose() {
    let g = G::new("goose-v16", 20);
    let mut over: Vec<String> = g.over(0.7).into_iter().collect();
    assert!(over.len() >= 3, "{over:?}");
    let (broken, odd, fine) = (over.remove(0), over.remove(0), over.remove(0));
    let c = g.conn();
    c.execute(
        "UPDATE messages SET content_json = '[{\"type\":\"text\"' WHERE id = (SELECT MIN(id) FROM messages WHERE session_id = ?1)",
        [&broken],
    )
    .unwrap();
    // NULL metadata (visible), a role goose skips, a millisecond timestamp (sorts last).
    c.execute_batch(&format!(
        "UPDATE messages SET metadata_json = NULL WHERE id = (SELECT MAX(id) FROM messages WHERE session_id = '{odd}' AND role = 'user');
         INSERT INTO messages (message_id, session_id, role, content_json, created_timestamp, metadata_json)
           VALUES ('msg_sys', '{odd}', 'system', 'not json', 1, NULL);
         INSERT INTO messages (message_id, session_id, role, content_json, created_timestamp, metadata_json)
           VALUES ('msg_ms', '{odd}', 'user', '[{{\"type\":\"text\",\"text\":\"late\"}}]', 1790000000000, '{{\"userVisible\":true,\"agentVisible\":true}}');"
    ))
    .unwrap();
    drop(c);
    let doc = compact(&g, &["--all-over", "0.7", "--strategy", "extractive"]);
    let failed = ids_with_status(&doc, "failed");
    assert_eq!(failed, vec![broken.clone()], "{doc:#}");
    let reason = crate::common::all_rows(&doc)
        .iter()
        .find(|r| r["id"] == broken.as_str())
        .unwrap()["detail"]
        .to_string();
    assert!(reason.contains("goose cannot load"), "{reason}");
    let compacted = ids_with_status(&doc, "compacted");
    assert!(
        compacted.contains(&odd) && compacted.contains(&fine),
        "{doc:#}"
    );
    let conn = g.conn();
    let l = load(&conn, &odd).unwrap();
    check_compacted(&l, HEADER).unwrap();
    assert_eq!(
        l.model.last().unwrap().text(),
        "late",
        "the millisecond row stays last"
    );
    let sys: String = conn
        .query_row(
            "SELECT content_json FROM messages WHERE message_id = 'msg_sys'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(sys, "not json");
}

/// The text every line of agent-db's note for a hidden tool pair starts with.
const PAIR_NOTE: &str = "[agent-db pruned a call to ";

/// The ids of the `type` items (`toolRequest`/`toolResponse`) of a row.
fn item_ids(r: &crate::goose_replay::Row, kind: &str) -> Vec<String> {
    r.items
        .iter()
        .filter(|i| i["type"] == kind)
        .map(|i| i["id"].as_str().unwrap().to_string())
        .collect()
}

/// A pruned session as goose loads it: the tool pairs the prune hid (rows agent-visible
/// `before`, hidden now) are hidden as whole pairs, and between any two rows the agent still
/// sees, the notes inserted have one line per call hidden there.
fn check_pairs_hidden(
    preset: &str,
    id: &str,
    l: &crate::goose_replay::Loaded,
    before: &BTreeSet<i64>,
    visible_before: &BTreeSet<i64>,
) {
    let newly_hidden =
        |r: &&crate::goose_replay::Row| visible_before.contains(&r.id) && !r.agent_visible;
    let hidden: Vec<_> = l.all.iter().filter(newly_hidden).collect();
    assert!(!hidden.is_empty(), "{preset} {id}: nothing hidden");
    let requests: BTreeSet<String> = hidden
        .iter()
        .flat_map(|r| item_ids(r, "toolRequest"))
        .collect();
    let responses: BTreeSet<String> = hidden
        .iter()
        .flat_map(|r| item_ids(r, "toolResponse"))
        .collect();
    assert_eq!(requests, responses, "{preset} {id}: a pair was split");
    let mut pending: i64 = 0;
    for r in &l.all {
        let note = !before.contains(&r.id);
        if note {
            assert!(is_summary(r), "{preset} {id}: inserted row {r:?}");
            let lines: Vec<String> = r.text().lines().map(str::to_string).collect();
            assert!(
                lines.iter().all(|t| t.starts_with(PAIR_NOTE)),
                "{preset} {id}: {lines:?}"
            );
            pending -= lines.len() as i64;
        } else if newly_hidden(&r) {
            pending += item_ids(r, "toolRequest").len() as i64;
        } else if r.agent_visible {
            assert_eq!(
                pending, 0,
                "{preset} {id}: notes out of place before row {}",
                r.id
            );
        }
    }
    assert_eq!(pending, 0, "{preset} {id}: notes out of place at the end");
}

#[test]
fn goose_replay_loads_the_pruned_tool_pairs_and_restore_is_byte_for_byte() {
    for preset in ["goose-v7", "goose-v16", "goose-v17"] {
        let g = G::new(preset, 12);
        let before = g.dump();
        let rows_before = messages(&g);
        let visible_before: BTreeMap<String, BTreeSet<i64>> = g
            .over(0.7)
            .into_iter()
            .map(|id| {
                let l = load(&g.conn(), &id).unwrap();
                let ids = l
                    .all
                    .iter()
                    .filter(|r| r.agent_visible)
                    .map(|r| r.id)
                    .collect();
                (id, ids)
            })
            .collect();
        let doc = compact(&g, &["--all-over", "0.7", "--strategy", "prune"]);
        let compacted: BTreeSet<String> = ids_with_status(&doc, "compacted").into_iter().collect();
        assert!(!compacted.is_empty(), "{preset}: {doc:#}");
        let conn = g.conn();
        for id in &compacted {
            let l = load(&conn, id).unwrap_or_else(|e| panic!("{preset} {id}: {e}"));
            check_pruned(&l).unwrap_or_else(|e| panic!("{preset} {id}: {e}"));
            let all_before: BTreeSet<i64> = rows_before
                .iter()
                .filter(|(_, (s, _, _))| s == id)
                .map(|(r, _)| *r)
                .collect();
            check_pairs_hidden(preset, id, &l, &all_before, &visible_before[id]);
        }
        check_only_flags_changed(preset, &g, &rows_before, &compacted);
        check_others_untouched(preset, &before, &g.dump(), &compacted);
        let out = g
            .cmd()
            .args(["restore", "--all-since", "1h"])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{preset}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(before, g.dump(), "{preset}: restore");
    }
}

/// Existing rows: unchanged, or (compacted sessions only) `metadata_json` with only
/// `agentVisible` turned false; new rows only in compacted sessions.
fn check_only_flags_changed(
    preset: &str,
    g: &G,
    rows_before: &BTreeMap<i64, (String, String, Option<String>)>,
    compacted: &BTreeSet<String>,
) {
    let rows_after = messages(g);
    for (id, (session, body, meta)) in rows_before {
        let (s2, b2, m2) = rows_after
            .get(id)
            .unwrap_or_else(|| panic!("{preset}: row {id} gone"));
        assert_eq!((session, body), (s2, b2), "{preset}: row {id}");
        if m2 != meta {
            assert!(
                compacted.contains(session),
                "{preset}: row {id} of {session}"
            );
            let mut was: Value = serde_json::from_str(meta.as_deref().unwrap()).unwrap();
            let now: Value = serde_json::from_str(m2.as_deref().unwrap()).unwrap();
            assert_eq!(was["agentVisible"], true, "{preset}: row {id}");
            was["agentVisible"] = false.into();
            assert_eq!(was, now, "{preset}: row {id}");
        }
    }
    for (id, (session, _, _)) in rows_after
        .iter()
        .filter(|(id, _)| !rows_before.contains_key(id))
    {
        assert!(
            compacted.contains(session),
            "{preset}: new row {id} in {session}"
        );
    }
}

/// Every table but `messages`, `sessions` and `sqlite_sequence` byte-identical, and every
/// session not compacted too.
fn check_others_untouched(
    preset: &str,
    before: &BTreeMap<String, Vec<Vec<String>>>,
    after: &BTreeMap<String, Vec<Vec<String>>>,
    compacted: &BTreeSet<String>,
) {
    for (table, rows) in before {
        if !["messages", "sessions", "sqlite_sequence"].contains(&table.as_str()) {
            assert_eq!(rows, &after[table], "{preset}: table {table}");
        }
    }
    let untouched = |d: &BTreeMap<String, Vec<Vec<String>>>| -> Vec<Vec<String>> {
        d["sessions"]
            .iter()
            .filter(|r| !compacted.iter().any(|id| r[1] == format!("Text({id:?})")))
            .cloned()
            .collect()
    };
    assert_eq!(
        untouched(before),
        untouched(after),
        "{preset}: other sessions"
    );
}

#[test]
fn below_v3_sessions_are_listed_but_not_compacted() {
    let g = G::new("goose-v3", 10);
    // Make it look like a v2 file: no metadata_json column, schema_version 2.
    g.conn()
        .execute_batch(
            "ALTER TABLE messages DROP COLUMN metadata_json; UPDATE schema_version SET version = 2;",
        )
        .unwrap();
    let (doc, code) = json({
        let mut c = g.cmd();
        c.args(["list", "--json"]);
        c
    });
    assert_eq!(code, 0);
    assert_eq!(crate::common::all_rows(&doc).len(), 10);
    let id = big_session(&g);
    let doc = compact(&g, &["--id", &id, "--strategy", "extractive"]);
    let row = &doc["conversations"][0];
    assert_eq!(row["status"], "failed", "{doc:#}");
    assert!(row["detail"].to_string().contains("metadata_json"), "{row}");
}

/// A run of tool pairs whose neighbours all share one `created_timestamp` leaves goose's order
/// no place for a note: that session is skipped with the reason and every table of goose's
/// stays as it was.
#[test]
fn prune_without_a_place_for_its_notes_skips_the_session() {
    let g = G::new("goose-v16", 12);
    let id = big_session(&g);
    g.conn()
        .execute(
            "UPDATE messages SET created_timestamp = 1790000000 WHERE session_id = ?1",
            [&id],
        )
        .unwrap();
    let before = g.dump();
    let doc = compact(&g, &["--id", &id, "--strategy", "prune"]);
    let row = &doc["conversations"][0];
    assert_eq!(row["status"], "skipped", "{doc:#}");
    assert!(
        row["detail"].to_string().contains("no place for its note"),
        "{row}"
    );
    assert_eq!(g.dump(), before);
}

/// The reason a session without stored usage is skipped under `--all-over` names what the
/// store lacks: goose's `total_tokens` (it used to name kodelet's `currentContextWindow`),
/// kodelet's `currentContextWindow`, and docker-agent's token columns and model window (these
/// too named kodelet's fields before).
#[test]
fn a_session_without_usage_is_skipped_in_its_stores_words() {
    let detail = |doc: &Value, id: &str| -> String {
        let rows = crate::common::all_rows(doc);
        let row = rows
            .iter()
            .find(|r| r["id"] == id)
            .unwrap_or_else(|| panic!("{doc:#}"));
        assert_eq!(row["status"], "skipped", "{row}");
        row["detail"].as_str().unwrap().to_string()
    };
    let list = |mut c: assert_cmd::Command| {
        c.args(["list", "--all-over", "0", "--idle", "0", "--json"]);
        let (doc, code) = json(c);
        assert_eq!(code, 0, "{doc:#}");
        doc
    };
    let g = G::new("goose-v16", 4);
    let id = big_session(&g);
    g.conn()
        .execute(
            "UPDATE sessions SET total_tokens = NULL WHERE id = ?1",
            [&id],
        )
        .unwrap();
    let why = detail(&list(g.cmd()), &id);
    assert_eq!(why, "no total_tokens recorded for this session");

    let k = crate::common::Env::generated(4, 3, &[]);
    let kid = k
        .ids("SELECT id FROM conversations ORDER BY id LIMIT 1")
        .remove(0);
    for table in ["conversations", "conversation_summaries"] {
        k.conn()
            .execute(
                &format!("UPDATE {table} SET usage = json_remove(usage, '$.currentContextWindow') WHERE id = ?1"),
                [&kid],
            )
            .unwrap();
    }
    assert_eq!(
        detail(&list(k.cmd()), &kid),
        "no stored currentContextWindow"
    );

    // docker-agent: no token counts at all, and a model no table knows.
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("session.db");
    let opts = SynthOptions {
        conversations: 4,
        seed: 5,
        ..SynthOptions::default()
    };
    agent_db_synth::docker_agent::generate_docker_agent(
        &db,
        &opts,
        agent_db_synth::docker_agent::Generation::Modern,
    )
    .unwrap();
    let c = Connection::open(&db).unwrap();
    let ids: Vec<String> = {
        let mut s = c
            .prepare("SELECT id FROM sessions WHERE parent_id IS NULL OR parent_id = '' ORDER BY id LIMIT 2")
            .unwrap();
        let rows = s.query_map([], |r| r.get(0)).unwrap();
        rows.map(|r| r.unwrap()).collect()
    };
    c.execute(
        "UPDATE sessions SET input_tokens = NULL, output_tokens = NULL WHERE id = ?1",
        [&ids[0]],
    )
    .unwrap();
    c.execute(
        "UPDATE session_items SET message_json = json_set(message_json, '$.model', 'nobody-knows-this-model')
         WHERE session_id = ?1 AND json_valid(message_json)",
        [&ids[1]],
    )
    .unwrap();
    drop(c);
    let mut cmd = bare_cmd(dir.path());
    cmd.arg("--db").arg(&db);
    let doc = list(cmd);
    assert_eq!(
        detail(&doc, &ids[0]),
        "no input_tokens or output_tokens recorded for this session"
    );
    assert_eq!(
        detail(&doc, &ids[1]),
        "no context window known for this session's model (give --context-limit N, or set it under [context_limits])"
    );
}

/// An executable `#!/bin/sh` hook in `$XDG_CONFIG_HOME/agent-db/hooks` answering `hook` with
/// `events` and running `body` on `run`.
fn goose_hook(g: &G, name: &str, events: &[&str], body: &str) {
    use std::os::unix::fs::PermissionsExt;
    let dir = g.dir.path().join(".config/agent-db/hooks");
    std::fs::create_dir_all(&dir).unwrap();
    let text = format!(
        "#!/bin/sh\ncase \"$1\" in\nhook)\n  printf '%s\\n' {}\n  ;;\nrun)\n{body}\n  ;;\n*)\n  exit 1\n  ;;\nesac\n",
        events.join(" ")
    );
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// Rows of one session's messages, every column.
fn session_rows(g: &G, id: &str) -> Vec<String> {
    let c = g.conn();
    let mut st = c
        .prepare("SELECT id, message_id, role, content_json, created_timestamp, timestamp, tokens, metadata_json FROM messages WHERE session_id = ?1 ORDER BY id")
        .unwrap();
    let rows = st
        .query_map([id], |r| {
            (0..8)
                .map(|i| r.get_ref(i).map(crate::common::cell))
                .collect::<rusqlite::Result<Vec<_>>>()
        })
        .unwrap();
    rows.map(|r| r.unwrap().join("|")).collect()
}

/// Hooks on goose: the before and after payloads name the goose session and `store_kind`
/// "goose"; a before hook that fails for one session skips that session only, and with only
/// that session selected the file stays byte-identical.
#[test]
fn hooks_see_goose_sessions_and_a_failing_one_skips_only_its_session() {
    let g = G::new("goose-v16", 12);
    let over: Vec<String> = g.over(0.7).into_iter().collect();
    assert!(over.len() >= 2, "{over:?}");
    let bad = over[0].clone();
    let payloads = g.dir.path().join("payloads");
    std::fs::create_dir_all(&payloads).unwrap();
    goose_hook(
        &g,
        "10-record",
        &["before_compaction", "after_compaction"],
        &format!("  cat > '{}'/$$.json", payloads.display()),
    );
    goose_hook(
        &g,
        "20-guard",
        &["before_compaction"],
        &format!("  payload=$(cat)\n  case \"$payload\" in\n  *'\"conversation_id\":\"{bad}\"'*) echo 'plugin crashed' >&2; exit 1 ;;\n  esac"),
    );
    let hash = files_hash(&g.db);
    let doc = compact(&g, &["--id", &bad, "--strategy", "extractive"]);
    assert_eq!(
        ids_with_status(&doc, "skipped"),
        vec![bad.clone()],
        "{doc:#}"
    );
    let detail = doc["conversations"][0]["detail"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        detail.contains("blocked by hook 20-guard") && detail.contains("plugin crashed"),
        "{detail}"
    );
    assert_eq!(
        files_hash(&g.db),
        hash,
        "a blocked session leaves the file alone"
    );

    let bad_rows = session_rows(&g, &bad);
    let doc = compact(&g, &["--all-over", "0.7", "--strategy", "extractive"]);
    let blocked: Vec<&str> = doc["conversations"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| {
            r["detail"]
                .as_str()
                .is_some_and(|d| d.starts_with("blocked by hook"))
        })
        .map(|r| r["id"].as_str().unwrap())
        .collect();
    assert_eq!(blocked, vec![bad.as_str()], "{doc:#}");
    let compacted = ids_with_status(&doc, "compacted");
    assert_eq!(compacted.len(), over.len() - 1, "{doc:#}");
    assert_eq!(session_rows(&g, &bad), bad_rows);
    let mut seen: BTreeSet<(String, String)> = BTreeSet::new();
    for f in std::fs::read_dir(&payloads).unwrap() {
        let v: Value = serde_json::from_slice(&std::fs::read(f.unwrap().path()).unwrap()).unwrap();
        assert_eq!(v["store_kind"], "goose", "{v:#}");
        let id = v["conversation_id"].as_str().unwrap().to_string();
        assert!(over.contains(&id), "{id}");
        seen.insert((id, v["event"].as_str().unwrap().to_string()));
    }
    for id in &compacted {
        assert!(
            seen.contains(&(id.clone(), "before_compaction".into())),
            "{id}"
        );
        assert!(
            seen.contains(&(id.clone(), "after_compaction".into())),
            "{id}"
        );
    }
    assert!(!seen.contains(&(bad.clone(), "after_compaction".into())));
}

/// An OpenAI-compatible server on 127.0.0.1 (wiremock) that answers every chat completion
/// with `reply` (made a valid summary by [`crate::common::sectioned`]) and records the requests.
struct Llm {
    rt: tokio::runtime::Runtime,
    server: wiremock::MockServer,
}

impl Llm {
    fn start(reply: &str) -> Llm {
        use wiremock::matchers::{method, path};
        let rt = tokio::runtime::Runtime::new().unwrap();
        let body = serde_json::json!({
            "id": "chatcmpl-1", "object": "chat.completion", "model": "gpt-4.1-mini",
            "choices": [{"index": 0, "finish_reason": "stop",
                "message": {"role": "assistant", "content": crate::common::sectioned(reply)}}],
            "usage": {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120}
        });
        let server = rt.block_on(async {
            let server = wiremock::MockServer::start().await;
            wiremock::Mock::given(method("POST"))
                .and(path("/v1/chat/completions"))
                .respond_with(wiremock::ResponseTemplate::new(200).set_body_json(body))
                .mount(&server)
                .await;
            server
        });
        Llm { rt, server }
    }

    fn bodies(&self) -> Vec<String> {
        let reqs = self.rt.block_on(self.server.received_requests()).unwrap();
        reqs.iter()
            .map(|r| String::from_utf8_lossy(&r.body).into_owned())
            .collect()
    }
}

/// The llm strategy on goose: the request carries the agent-visible history (a row hidden from
/// the agent is not sent), the summary written is the server's reply, our replay of goose's
/// loader reads the result, and the whole write is one compaction whose restore gives the file back.
#[test]
fn llm_strategy_summarizes_the_agent_visible_history_in_one_transaction() {
    let g = G::new("goose-v16", 12);
    let id = big_session(&g);
    let c = g.conn();
    let user_rows: Vec<i64> = c
        .prepare("SELECT id FROM messages WHERE session_id = ?1 AND role = 'user' AND content_json NOT LIKE '%toolResponse%' AND metadata_json LIKE '%\"agentVisible\":true%' ORDER BY created_timestamp, id")
        .unwrap()
        .query_map([&id], |r| r.get(0))
        .unwrap()
        .map(|r| r.unwrap())
        .collect();
    assert!(user_rows.len() >= 3, "{user_rows:?}");
    c.execute(
        "UPDATE messages SET content_json = '[{\"type\":\"text\",\"text\":\"VISIBLE-7713 please fix the flaky parser test\"}]' WHERE id = ?1",
        [user_rows[0]],
    )
    .unwrap();
    c.execute(
        "UPDATE messages SET content_json = '[{\"type\":\"text\",\"text\":\"HIDDEN-4411 not for the model\"}]', \
         metadata_json = '{\"userVisible\":true,\"agentVisible\":false}' WHERE id = ?1",
        [user_rows[1]],
    )
    .unwrap();
    drop(c);
    let before = g.dump();
    let reply = "## Summary\nLLM-REPLY-9090: the parser test is fixed; keep the retry limit at 3.";
    let llm = Llm::start(reply);
    let mut cmd = g.cmd();
    cmd.env("AGENT_DB_API_KEY", "x")
        .args([
            "compact",
            "--id",
            &id,
            "--strategy",
            "llm",
            "--llm-provider",
            "openai",
        ])
        .args([
            "--model",
            "gpt-4.1-mini",
            "--timeout",
            "20s",
            "--idle",
            "0",
            "--yes",
            "--json",
        ])
        .arg("--base-url")
        .arg(format!("{}/v1", llm.server.uri()));
    let (doc, code) = json(cmd);
    assert_eq!(code, 0, "{doc:#}");
    assert_eq!(
        ids_with_status(&doc, "compacted"),
        vec![id.clone()],
        "{doc:#}"
    );
    let bodies = llm.bodies().join("\n");
    assert!(!bodies.is_empty());
    assert!(bodies.contains("VISIBLE-7713"), "the visible head is sent");
    assert!(
        !bodies.contains("HIDDEN-4411"),
        "a row hidden from the agent is not sent"
    );
    let l = load(&g.conn(), &id).unwrap();
    check_compacted(&l, HEADER).unwrap();
    assert!(
        l.model[0]
            .text()
            .contains("LLM-REPLY-9090: the parser test is fixed"),
        "{:?}",
        l.model[0]
    );
    let audits: i64 = g
        .conn()
        .query_row(
            "SELECT COUNT(*) FROM agent_db_compactions WHERE conversation_id = ?1",
            [&id],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(audits, 1);
    let out = g.cmd().args(["restore", &id]).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(g.dump(), before, "restore");
}

/// With `--all-over`, goose sessions are judged on their token columns alone, read in the
/// table's order, and only the kept ones sorted (issue 11); the listing order must stay goose's:
/// most recently updated first as SQLite orders values, ties in rowid order. A session whose
/// `model_config_json` is an array or repeats `context_limit` is judged as a generic JSON value
/// would read it. The oracle is the test's own `ORDER BY`, restricted to the reported ids.
#[test]
fn prefiltered_listing_keeps_gooses_order() {
    let g = G::new("goose-v17", 30);
    let ids = g.strings("SELECT id FROM sessions ORDER BY rowid");
    let c = g.conn();
    let tie: String = c
        .query_row(
            "SELECT updated_at FROM sessions WHERE id = ?1",
            [&ids[2]],
            |r| r.get(0),
        )
        .unwrap();
    for id in [&ids[4], &ids[11], &ids[17]] {
        c.execute(
            "UPDATE sessions SET updated_at = ?1 WHERE id = ?2",
            [&tie, id],
        )
        .unwrap();
    }
    c.execute(
        "UPDATE sessions SET updated_at = 1761998400 WHERE id = ?1",
        [&ids[6]],
    )
    .unwrap();
    // Over 0.7 only by the last of two context_limit fields (a generic value keeps the last).
    c.execute(
        "UPDATE sessions SET total_tokens = 9000,
           model_config_json = '{\"model_name\":\"m\",\"context_limit\":1000000,\"context_limit\":10000}'
         WHERE id = ?1",
        [&ids[8]],
    )
    .unwrap();
    // An array is no config: goose's 128,000 applies (9000 / 128000 is under 0.7).
    c.execute(
        "UPDATE sessions SET total_tokens = 9000, model_config_json = '[\"m\", 10000]' WHERE id = ?1",
        [&ids[9]],
    )
    .unwrap();
    drop(c);
    let (doc, code) = json({
        let mut c = g.cmd();
        c.args(["list", "--all-over", "0", "--idle", "0", "--json"]);
        c
    });
    assert_eq!(code, 0, "{doc}");
    let got: Vec<String> = crate::common::all_rows(&doc)
        .iter()
        .map(|r| r["id"].as_str().unwrap().to_string())
        .collect();
    let want: Vec<String> = g
        .strings("SELECT id FROM sessions ORDER BY updated_at DESC, rowid")
        .into_iter()
        .filter(|id| got.contains(id))
        .collect();
    let want = crate::common::in_list_json_order(&doc, want);
    assert_eq!(got, want);
    assert!(got.len() >= 25, "{}", got.len());
    let (doc, _) = json({
        let mut c = g.cmd();
        c.args(["list", "--all-over", "0.7", "--idle", "0", "--json"]);
        c
    });
    let over: Vec<String> = ids_with_status(&doc, "selected");
    assert!(
        over.contains(&ids[8]),
        "duplicate context_limit: the last one counts"
    );
    assert!(!over.contains(&ids[9]), "an array config is no config");
}

/// The image items goose would send to the model for each session (by their data), read by the
/// loading-rule replay.
fn visible_images(g: &G, ids: &BTreeSet<String>) -> BTreeMap<String, Vec<String>> {
    let conn = g.conn();
    ids.iter()
        .map(|id| {
            let l = load(&conn, id).unwrap_or_else(|e| panic!("{id}: {e}"));
            let images = l
                .model
                .iter()
                .flat_map(|r| r.items.iter())
                .filter(|i| i["type"] == "image")
                .map(|i| i["data"].as_str().unwrap_or_default().to_string())
                .collect();
            (id.clone(), images)
        })
        .collect()
}

/// A 1×1 PNG.
const PNG_B64: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==";

/// Generated sessions rarely carry images: add one, with SQL, to the user text row a quarter of
/// the way into each session over 0.7 (well inside the head a prune replaces).
fn plant_head_images(g: &G) {
    let image = format!(r#"{{"type":"image","data":"{PNG_B64}","mimeType":"image/png"}}"#);
    for id in g.over(0.7) {
        let rows = g.strings(&format!(
            "SELECT CAST(id AS TEXT) FROM messages WHERE session_id = '{id}' AND role = 'user'
               AND content_json LIKE '%\"type\":\"text\"%'
             ORDER BY created_timestamp, id"
        ));
        let Some(row) = rows.get(rows.len() / 4) else {
            continue;
        };
        g.conn()
            .execute(
                "UPDATE messages SET content_json = json_insert(content_json, '$[#]', json(?1)) WHERE id = ?2",
                rusqlite::params![image, row],
            )
            .unwrap();
    }
}

/// `--elide-images` on goose: the agent-only copies of head messages carry placeholders instead
/// of their images, so the model sees only the kept tail's images; without it the head's images
/// stay. Both load by goose's rule and restore byte for byte.
#[test]
fn prune_elide_images_hides_the_heads_images_from_the_model() {
    let preset = "goose-v16";
    let mut seen = BTreeMap::new();
    for elide in [false, true] {
        let g = G::new(preset, 24);
        plant_head_images(&g);
        let before = g.dump();
        let mut args = vec!["--all-over", "0.7", "--strategy", "prune"];
        if elide {
            args.push("--elide-images");
        }
        let doc = compact(&g, &args);
        let compacted: BTreeSet<String> = ids_with_status(&doc, "compacted").into_iter().collect();
        assert!(!compacted.is_empty(), "{doc:#}");
        for id in &compacted {
            let l = load(&g.conn(), id).unwrap();
            check_pruned(&l).unwrap_or_else(|e| panic!("elide {elide} {id}: {e}"));
        }
        seen.insert(elide, visible_images(&g, &compacted));
        let out = g
            .cmd()
            .args(["restore", "--all-since", "1h"])
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        assert_eq!(before, g.dump(), "elide {elide}: restore");
    }
    let (kept, elided) = (&seen[&false], &seen[&true]);
    let count = |m: &BTreeMap<String, Vec<String>>| m.values().map(Vec::len).sum::<usize>();
    assert!(
        count(elided) < count(kept),
        "no head image was elided: {} vs {}",
        count(elided),
        count(kept)
    );
    for (id, images) in elided {
        // What is left is what the tail kept: a subset of the images seen without the flag.
        for i in images {
            assert!(
                kept[id].contains(i),
                "{id}: an image the plain prune did not keep"
            );
        }
    }
}

/// A prune whose notes fit only part of the head: tool pairs in a run whose neighbours all share
/// one second stay visible (there is no gap to place a note in without overtaking a visible
/// row), the others are hidden; the session still loads by goose's rule and restores.
#[test]
fn prune_places_the_notes_it_can_and_leaves_the_rest_visible() {
    let g = G::new("goose-v16", 12);
    let id = big_session(&g);
    let ids: Vec<i64> = g
        .strings(&format!(
            "SELECT CAST(id AS TEXT) FROM messages WHERE session_id = '{id}' ORDER BY created_timestamp, id"
        ))
        .iter()
        .map(|s| s.parse().unwrap())
        .collect();
    // The first third of the session in one second (the order, by timestamp then id, is kept).
    let third = ids[ids.len() / 3];
    g.conn()
        .execute(
            "UPDATE messages SET created_timestamp = (SELECT MIN(created_timestamp) FROM messages WHERE session_id = ?1)
             WHERE session_id = ?1 AND id <= ?2",
            rusqlite::params![id, third],
        )
        .unwrap();
    let before = g.dump();
    let requests_early: BTreeSet<i64> = load(&g.conn(), &id)
        .unwrap()
        .all
        .iter()
        .filter(|r| r.id < third && r.items.iter().any(|i| i["type"] == "toolRequest"))
        .map(|r| r.id)
        .collect();
    assert!(requests_early.len() >= 2, "few tool calls early on");
    let doc = compact(&g, &["--id", &id, "--strategy", "prune"]);
    assert_eq!(doc["conversations"][0]["status"], "compacted", "{doc:#}");
    let l = load(&g.conn(), &id).unwrap();
    check_pruned(&l).unwrap();
    let visible: BTreeSet<i64> = l
        .all
        .iter()
        .filter(|r| r.agent_visible)
        .map(|r| r.id)
        .collect();
    let hidden = l.all.iter().filter(|r| !r.agent_visible).count();
    assert!(hidden > 0, "nothing was pruned");
    assert!(
        requests_early
            .iter()
            .filter(|r| visible.contains(r))
            .count()
            >= 2,
        "the early tool calls, with no place for a note, were hidden"
    );
    let out = g
        .cmd()
        .args(["restore", "--all-since", "1h"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    assert_eq!(g.dump(), before);
}

/// Every column of session `id` and of its messages, as SQLite quotes them, in rowid order.
fn session_image(g: &G, id: &str) -> Vec<String> {
    let c = g.conn();
    let mut out = Vec::new();
    for table in ["sessions", "messages"] {
        let key = if table == "sessions" {
            "id"
        } else {
            "session_id"
        };
        let cols = g.strings(&format!("SELECT name FROM pragma_table_info('{table}')"));
        let quoted: Vec<String> = cols.iter().map(|c| format!("quote(\"{c}\")")).collect();
        let sql = format!(
            "SELECT rowid || ':' || {} FROM {table} WHERE {key} = ?1 ORDER BY rowid",
            quoted.join(" || ',' || ")
        );
        let mut st = c.prepare(&sql).unwrap();
        let rows = st.query_map([id], |r| r.get::<_, String>(0)).unwrap();
        out.extend(rows.map(|r| format!("{table} {}", r.unwrap())));
    }
    out
}

/// goose never compacts a session whose provider manages its own context (a CLI or ACP agent
/// keeps the conversation; `check_if_compaction_needed` answers false): agent-db skips it with
/// that reason in `list`, the dry run and the compaction report, leaves its rows byte for byte
/// as they were, and compacts the ordinary session beside it.
#[test]
fn a_session_whose_provider_manages_its_own_context_is_left_alone() {
    let row = |doc: &Value, id: &str| -> Value {
        crate::common::all_rows(doc)
            .iter()
            .find(|r| r["id"] == id)
            .unwrap_or_else(|| panic!("{id} not reported: {doc:#}"))
            .clone()
    };
    for preset in ["goose-v7", "goose-v16", "goose-v17", "goose-v16-migrated"] {
        let g = G::new(preset, 24);
        let managed = g.managed();
        let all_over = g.over_any(0.7);
        let aside = g.set_aside();
        // A managed session --all-over would otherwise select, and an ordinary one.
        let (id, provider) = managed
            .iter()
            .find(|(id, _)| all_over.contains(*id) && !aside.contains(*id))
            .unwrap_or_else(|| panic!("{preset}: no managed session over 0.7: {managed:?}"));
        let normal = g.over(0.7).into_iter().next().expect("an ordinary session");
        let why = format!(
            "goose's provider {provider} manages its own context, so goose never compacts this session"
        );
        let check_skipped = |doc: &Value, what: &str| {
            let r = row(doc, id);
            assert_eq!(r["status"], "skipped", "{preset} {what}: {r}");
            assert_eq!(r["detail"], why.as_str(), "{preset} {what}: {r}");
        };

        for args in [
            &["list", "--json"][..],
            &["list", "--all-over", "0.7", "--idle", "0", "--json"][..],
        ] {
            let (doc, code) = json({
                let mut c = g.cmd();
                c.args(args);
                c
            });
            assert_eq!(code, 0, "{preset} {args:?}: {doc:#}");
            check_skipped(&doc, &format!("{args:?}"));
            assert_ne!(row(&doc, &normal)["status"], "skipped", "{preset} {args:?}");
        }
        let (dry, code) = json({
            let mut c = g.cmd();
            c.args([
                "compact",
                "--all-over",
                "0.7",
                "--idle",
                "0",
                "--dry-run",
                "--json",
            ]);
            c
        });
        assert_eq!(code, 0, "{preset}: {dry:#}");
        check_skipped(&dry, "dry run");
        assert_eq!(row(&dry, &normal)["status"], "planned", "{preset}: {dry:#}");

        let image = session_image(&g, id);
        let normal_before = session_image(&g, &normal);
        // Named explicitly, in the human report: a skip, exit 0.
        let out = g
            .cmd()
            .args([
                "compact",
                "--idle",
                "0",
                "--yes",
                "--strategy",
                "extractive",
                "--verbose",
                "--id",
            ])
            .arg(id)
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert_eq!(out.status.code(), Some(0), "{preset}: {stdout}");
        // With --verbose the session's line says skipped with a note; the note gives the reason.
        let line = stdout
            .lines()
            .find(|l| l.starts_with(id.as_str()))
            .unwrap_or_else(|| panic!("{preset}: {stdout}"));
        let note = line.rsplit_once("skipped ").map(|(_, n)| n.trim());
        let note = note.unwrap_or_else(|| panic!("{preset}: {line}"));
        assert!(
            stdout.lines().any(|l| l == format!("{note} {why}")),
            "{preset}: {stdout}"
        );
        assert_eq!(session_image(&g, id), image, "{preset}");
        // Beside an ordinary session: that one is compacted, this one is not touched.
        let doc = compact(
            &g,
            &[
                "--strategy",
                "extractive",
                "--id",
                id.as_str(),
                "--id",
                normal.as_str(),
            ],
        );
        check_skipped(&doc, "compact");
        assert_eq!(
            row(&doc, &normal)["status"],
            "compacted",
            "{preset}: {doc:#}"
        );
        assert_eq!(session_image(&g, id), image, "{preset}");
        assert_ne!(session_image(&g, &normal), normal_before, "{preset}");
        let l = load(&g.conn(), &normal).unwrap();
        check_compacted(&l, HEADER).unwrap_or_else(|e| panic!("{preset} {normal}: {e}"));
    }
}

/// A batch selection reads every session's provider at once; whatever `provider_name` holds,
/// its answer agrees with the test's own reading of the cell and with the one-session answer
/// (`--id`): a managed name stored as text or as a blob of its bytes is left alone; another
/// case, padding, an integer, NULL or another provider is not.
#[test]
fn the_batch_left_alone_answer_follows_provider_name_whatever_it_holds() {
    let g = G::new("goose-v17", 8);
    let ids = g.strings("SELECT id FROM sessions ORDER BY rowid");
    let cells = [
        "'claude-code'",
        "CAST('gemini-cli' AS BLOB)",
        "'Claude-Code'",
        "' claude-code'",
        "42",
        "NULL",
        "'openai'",
        "'cursor-acp'",
    ];
    let c = g.conn();
    for (id, cell) in ids.iter().zip(cells.iter().cycle()) {
        let sql = format!("UPDATE sessions SET provider_name = {cell} WHERE id = ?1");
        c.execute(&sql, [id]).unwrap();
    }
    // The test's reading: the cell's bytes, text or blob, are one of the managed names.
    let mut want = BTreeSet::new();
    let mut st = c.prepare("SELECT id, provider_name FROM sessions").unwrap();
    let mut rows = st.query([]).unwrap();
    while let Some(r) = rows.next().unwrap() {
        let bytes = match r.get_ref(1).unwrap() {
            rusqlite::types::ValueRef::Text(b) | rusqlite::types::ValueRef::Blob(b) => b.to_vec(),
            _ => continue,
        };
        if MANAGED_CONTEXT
            .iter()
            .any(|m| m.as_bytes() == bytes.as_slice())
        {
            want.insert(r.get::<_, String>(0).unwrap());
        }
    }
    assert_eq!(want.len(), 3, "{want:?}");
    let left_alone = |doc: &Value| -> BTreeSet<String> {
        crate::common::all_rows(doc)
            .iter()
            .filter(|r| r["status"] == "skipped")
            .filter(|r| {
                r["detail"]
                    .as_str()
                    .unwrap_or("")
                    .contains("manages its own context")
            })
            .map(|r| r["id"].as_str().unwrap().to_string())
            .collect()
    };
    let (doc, code) = json({
        let mut c = g.cmd();
        c.args(["list", "--json"]);
        c
    });
    assert_eq!(code, 0, "{doc:#}");
    assert_eq!(left_alone(&doc), want, "{doc:#}");
    let mut one = g.cmd();
    one.args(["compact", "--dry-run", "--idle", "0", "--json"]);
    for id in &ids {
        one.arg("--id").arg(id);
    }
    let (doc, code) = json(one);
    assert!(code == 0 || code == 1, "{doc:#}");
    assert_eq!(left_alone(&doc), want, "{doc:#}");
}

/// The listing's message count and `updated_at` of each listed session, by id.
fn counts_and_times(g: &G, all_over: &str) -> BTreeMap<String, (i64, String)> {
    let (doc, code) = json({
        let mut c = g.cmd();
        c.args(["list", "--all-over", all_over, "--idle", "0", "--json"]);
        c
    });
    // 1: the odd ids' sessions cannot be found again by the id the listing reports.
    assert!(code <= 1, "{doc}");
    let mut c = g.cmd();
    c.args(["list", "--all-over", all_over, "--idle", "0", "--ids"]);
    ids_agree(c, &doc);
    counts_and_times_of(&doc)
}

/// Under `--all-over`, each listed session's message count is the test's own `COUNT(*)` of the
/// messages whose `session_id` is the listed id, whether the listing counts the kept sessions
/// one by one (few kept) or all at once (most kept), for ids stored as non-UTF-8 text and as a
/// BLOB too; and `updated_at` is SQLite's `strftime` of a stored `YYYY-MM-DD HH:MM:SS` (spaces
/// around it trimmed), anything else as stored.
#[test]
fn prefiltered_counts_and_times_follow_the_tests_sql() {
    let g = G::new("goose-v17", 20);
    let ids = g.strings("SELECT id FROM sessions ORDER BY rowid");
    let c = g.conn();
    c.execute_batch("PRAGMA foreign_keys = OFF").unwrap();
    // A non-UTF-8 text id and a BLOB id, their messages following them.
    for (id, odd) in [(&ids[1], "CAST(X'6964ff' AS TEXT)"), (&ids[2], "X'696462'")] {
        for table in ["messages SET session_id", "sessions SET id"] {
            let col = if table.starts_with("messages") {
                "session_id"
            } else {
                "id"
            };
            c.execute(&format!("UPDATE {table} = {odd} WHERE {col} = ?1"), [id])
                .unwrap();
        }
    }
    let stamps = [
        " 2026-03-01 10:00:00 ",
        "2026-02-30 10:00:00",
        "yesterday",
        "2024-02-29 23:59:59",
    ];
    for (i, t) in stamps.iter().enumerate() {
        c.execute(
            "UPDATE sessions SET updated_at = ?1 WHERE rowid = ?2",
            rusqlite::params![t, i as i64 + 4],
        )
        .unwrap();
    }
    c.execute(
        "UPDATE sessions SET updated_at = 1761998400 WHERE rowid = 8",
        [],
    )
    .unwrap();
    let want = |id: &str| -> i64 {
        c.query_row(
            "SELECT COUNT(*) FROM messages WHERE session_id = ?1",
            [id],
            |r| r.get(0),
        )
        .unwrap()
    };
    // The stored `updated_at` of every session with a UTF-8 id, and SQLite's reading of it.
    let stored: BTreeMap<String, (String, Option<String>)> = {
        let mut st = c
            .prepare(
                "SELECT CAST(id AS BLOB), CAST(updated_at AS TEXT),
                   CASE WHEN datetime(trim(updated_at)) = trim(updated_at)
                     THEN strftime('%Y-%m-%dT%H:%M:%SZ', trim(updated_at)) END
                 FROM sessions",
            )
            .unwrap();
        let rows = st
            .query_map([], |r| {
                Ok((r.get::<_, Vec<u8>>(0)?, (r.get(1)?, r.get(2)?)))
            })
            .unwrap();
        rows.filter_map(|r| {
            let (id, t) = r.unwrap();
            String::from_utf8(id).ok().map(|id| (id, t))
        })
        .collect()
    };
    let all = counts_and_times(&g, "0");
    assert!(all.len() >= 18, "{}", all.len());
    let few = counts_and_times(&g, "0.9");
    assert!(
        !few.is_empty() && few.len() < all.len(),
        "{} of {}",
        few.len(),
        all.len()
    );
    for listing in [&all, &few] {
        for (id, (count, updated)) in listing {
            assert_eq!(*count, want(id), "{id}");
            if let Some((raw, sqlite)) = stored.get(id) {
                assert_eq!(updated, sqlite.as_ref().unwrap_or(raw), "{id}");
            }
        }
    }
    let odd: Vec<&String> = all.keys().filter(|id| id.starts_with("id")).collect();
    assert_eq!(odd, ["idb", "id\u{fffd}"], "both odd ids listed");
    assert!(all.values().any(|(n, _)| *n > 0));
    let updated: Vec<&str> = all.values().map(|(_, u)| u.as_str()).collect();
    for t in [
        "2026-03-01T10:00:00Z",
        "2026-02-30 10:00:00",
        "yesterday",
        "2024-02-29T23:59:59Z",
        "1761998400",
    ] {
        assert!(updated.contains(&t), "{t}");
    }
}

/// Append one message to session `id` as goose's `insert_message` does (`session_manager.rs`,
/// `aaif-goose/goose@017176d0`): a new `messages` row (AUTOINCREMENT id, `msg_…` id, never
/// before the session's latest `created_timestamp`) and `sessions.updated_at` now.
fn goose_appends(g: &G, id: &str, text: &str) {
    let c = g.conn();
    let content = serde_json::json!([{"type": "text", "text": text}]).to_string();
    c.execute(
        "INSERT INTO messages (message_id, session_id, role, content_json, created_timestamp, metadata_json)
         VALUES ('msg_' || ?1 || '_' || lower(hex(randomblob(16))), ?1, 'user', ?2,
                 (SELECT COALESCE(MAX(created_timestamp), 0) FROM messages WHERE session_id = ?1),
                 '{\"userVisible\":true,\"agentVisible\":true}')",
        rusqlite::params![id, content],
    )
    .unwrap();
    c.execute(
        "UPDATE sessions SET updated_at = datetime('now') WHERE id = ?1",
        [id],
    )
    .unwrap();
}

/// Restore is judged by the compacted session alone: goose writing to a third session (which
/// moves the `sqlite_sequence` row every session shares) does not make undoing two compactions
/// need `--force`, in either order; goose writing to a compacted session still does (exit 7),
/// and the shared high-water mark never goes back below a row goose inserted.
#[test]
fn restore_is_refused_only_when_that_session_changed() {
    for preset in ["goose-v17", "goose-v7"] {
        let g = G::new(preset, 20);
        let over: Vec<String> = g.over(0.7).into_iter().collect();
        assert!(over.len() >= 3, "{preset}: {over:?}");
        let (a, b) = (&over[0], &over[1]);
        let third = g
            .strings("SELECT id FROM sessions ORDER BY id")
            .into_iter()
            .find(|s| s != a && s != b)
            .unwrap();
        let before = g.dump();
        let doc = compact(&g, &[a, b, "--strategy", "extractive"]);
        let done = ids_with_status(&doc, "compacted");
        assert_eq!(done.len(), 2, "{preset}: {doc:#}");
        goose_appends(&g, &third, "goose went on in another session");
        let seq_after_goose =
            g.strings("SELECT CAST(seq AS TEXT) FROM sqlite_sequence WHERE name = 'messages'");
        // `history` does not call them changed either.
        let out = g.cmd().args(["history", "--json"]).output().unwrap();
        assert!(out.status.success());
        // b first, then a: any order.
        for id in [b, a] {
            let out = g.cmd().args(["restore", id]).output().unwrap();
            assert!(
                out.status.success(),
                "{preset}: restore {id}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        // Everything is back but goose's own row in the third session, its `updated_at` and
        // the high-water mark goose moved.
        let after = g.dump();
        for (table, rows) in &before {
            if !["messages", "sessions", "sqlite_sequence"].contains(&table.as_str()) {
                assert_eq!(rows, &after[table], "{preset}: {table}");
            }
        }
        let ours = |d: &BTreeMap<String, Vec<Vec<String>>>, t: &str| -> Vec<Vec<String>> {
            d[t].iter()
                .filter(|r| {
                    r.iter()
                        .any(|c| *c == format!("Text({a:?})") || *c == format!("Text({b:?})"))
                })
                .cloned()
                .collect()
        };
        assert_eq!(
            ours(&before, "messages"),
            ours(&after, "messages"),
            "{preset}"
        );
        assert_eq!(
            ours(&before, "sessions"),
            ours(&after, "sessions"),
            "{preset}"
        );
        assert_eq!(
            g.strings("SELECT CAST(seq AS TEXT) FROM sqlite_sequence WHERE name = 'messages'"),
            seq_after_goose,
            "{preset}: the high-water mark goose moved stays"
        );

        // A change to the compacted session itself is still refused.
        let doc = compact(&g, &[a, "--strategy", "extractive"]);
        assert_eq!(
            ids_with_status(&doc, "compacted").len(),
            1,
            "{preset}: {doc:#}"
        );
        goose_appends(&g, a, "goose went on in this very session");
        let held = g.dump();
        let out = g.cmd().args(["restore", a]).output().unwrap();
        assert_eq!(
            out.status.code(),
            Some(7),
            "{preset}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("changed after this compaction"),
            "{preset}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(held, g.dump(), "{preset}: a refused restore writes nothing");
    }
}

/// goose's provider is the session's `provider_name` (ollama, openai, claude-code…): the
/// listing shows it, `--provider` selects by it, and a provider no session has is warned about
/// with the providers the store does have.
#[test]
fn provider_is_gooses_provider_name() {
    let g = G::new("goose-v17", 30);
    let want: BTreeSet<String> = g
        .strings("SELECT id FROM sessions WHERE provider_name = 'ollama'")
        .into_iter()
        .collect();
    assert!(!want.is_empty());
    let (doc, code) = json({
        let mut c = g.cmd();
        c.args(["list", "--provider", "ollama", "--idle", "0", "--json"]);
        c
    });
    assert_eq!(code, 0, "{doc:#}");
    let got: BTreeSet<String> = ids_with_status(&doc, "selected").into_iter().collect();
    assert_eq!(got, want);
    for row in doc["conversations"].as_array().unwrap() {
        assert_eq!(row["provider"], "ollama", "{row}");
    }
    // Every row's PROVIDER is its provider_name.
    let (doc, _) = json({
        let mut c = g.cmd();
        c.args(["list", "--json"]);
        c
    });
    let stored: BTreeMap<String, String> = g
        .strings("SELECT id || '|' || COALESCE(NULLIF(provider_name, ''), 'goose') FROM sessions")
        .into_iter()
        .map(|r| {
            let (id, p) = r.split_once('|').unwrap();
            (id.to_string(), p.to_string())
        })
        .collect();
    for row in doc["conversations"].as_array().unwrap() {
        let id = row["id"].as_str().unwrap();
        assert_eq!(
            row["provider"].as_str(),
            stored.get(id).map(String::as_str),
            "{id}"
        );
    }
    let out = g
        .cmd()
        .args(["list", "--provider", "lmstudio"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    let present: BTreeSet<String> = stored.values().cloned().collect();
    let listed = present.iter().cloned().collect::<Vec<_>>().join(", ");
    assert!(
        err.contains(&format!("providers present: {listed}")),
        "{err}"
    );
    assert!(!err.contains("openai-chat"), "{err}");
}

/// goose's own compaction is marked as goose's in `show`, and the rows it hid from the model are
/// counted (the listing's MSGS counts them too) and shown with `--verbose`.
#[test]
fn gooses_own_compaction_is_marked_and_its_hidden_rows_are_shown_on_request() {
    let g = G::new("goose-v17", 30);
    // Sessions goose compacted itself: rows hidden from the agent, and no agent-db tables.
    let compacted = g.strings(
        "SELECT session_id FROM messages WHERE json_extract(metadata_json, '$.agentVisible') = 0
         GROUP BY session_id ORDER BY session_id",
    );
    assert!(!compacted.is_empty());
    let mut marked = 0;
    for id in &compacted {
        let hidden = g.strings(&format!(
            "SELECT CAST(COUNT(*) AS TEXT) FROM messages WHERE session_id = '{id}'
             AND json_extract(metadata_json, '$.agentVisible') = 0 AND role IN ('user', 'assistant')"
        ))[0]
            .clone();
        let out = g.cmd().args(["show", id, "--no-pager"]).output().unwrap();
        assert!(
            out.status.success(),
            "{id}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let s = String::from_utf8_lossy(&out.stdout).to_string();
        assert!(
            s.contains(&format!("{hidden} stored row(s) hidden from the model by a compaction (goose still shows them); --verbose shows them")),
            "{id}: {s}"
        );
        assert!(!s.contains("hidden from the model ("), "{id}");
        assert!(!s.contains("agent-db's summary"), "{id}: {s}");
        if s.contains("── [0] user · goose's own summary") {
            marked += 1;
        }
        let out = g
            .cmd()
            .args(["show", id, "--no-pager", "--verbose"])
            .output()
            .unwrap();
        let v = String::from_utf8_lossy(&out.stdout).to_string();
        assert!(
            v.contains(&format!(
                "══ hidden from the model ({hidden} row(s), in goose's order) ══"
            )),
            "{id}: {v}"
        );
        assert_eq!(
            v.matches("── [hidden] ").count(),
            hidden.parse::<usize>().unwrap(),
            "{id}"
        );
        let (doc, _) = json({
            let mut c = g.cmd();
            c.args(["show", id, "--json"]);
            c
        });
        assert_eq!(doc["hidden_rows"].to_string(), hidden, "{id}");
    }
    assert!(marked > 0, "no goose summary marked as goose's");
}

/// goose's own standing of a session: `sub_agent` and `hidden` sessions (goose lists only user
/// and scheduled ones) are marked in `list` and left out of `--all-over`; an archived session
/// (`archived_at`, set as goose's session update sets it) too, unless `--include-archived`.
#[test]
fn sub_agent_hidden_and_archived_sessions_are_marked_and_left_out_of_batches() {
    let g = G::new("goose-v17", 40);
    let children: BTreeSet<String> = g
        .strings("SELECT id FROM sessions WHERE session_type IN ('sub_agent', 'hidden')")
        .into_iter()
        .collect();
    assert!(!children.is_empty());
    let over = g.over(0.7);
    let archived = over
        .iter()
        .find(|id| !children.contains(*id))
        .unwrap()
        .clone();
    g.conn()
        .execute(
            "UPDATE sessions SET archived_at = '2026-10-30T10:00:00+00:00' WHERE id = ?1",
            [&archived],
        )
        .unwrap();
    let select = |extra: &[&str]| -> (BTreeSet<String>, Value) {
        let (doc, code) = json({
            let mut c = g.cmd();
            c.args(["list", "--all-over", "0.7", "--idle", "0", "--json"])
                .args(extra);
            c
        });
        assert_eq!(code, 0, "{doc:#}");
        (ids_with_status(&doc, "selected").into_iter().collect(), doc)
    };
    let (got, doc) = select(&[]);
    let want: BTreeSet<String> = over
        .iter()
        .filter(|id| !children.contains(*id) && **id != archived)
        .cloned()
        .collect();
    assert_eq!(got, want);
    let skipped: BTreeSet<String> = ids_with_status(&doc, "skipped").into_iter().collect();
    assert!(skipped.contains(&archived), "{doc:#}");
    for id in over.iter().filter(|id| children.contains(*id)) {
        assert!(skipped.contains(id), "{id}: {doc:#}");
    }
    let (got, _) = select(&["--include-archived"]);
    assert!(got.contains(&archived));
    // The plain listing marks them.
    let (doc, _) = json({
        let mut c = g.cmd();
        c.args(["list", "--json"]);
        c
    });
    for row in doc["conversations"].as_array().unwrap() {
        let id = row["id"].as_str().unwrap();
        assert_eq!(
            row.get("parent_id").is_some(),
            children.contains(id),
            "{row}"
        );
        assert_eq!(row.get("archived").is_some(), id == archived, "{row}");
    }
    let out = g
        .cmd()
        .args(["list", "--include-archived"])
        .output()
        .unwrap();
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(table.contains("[archived]"), "{table}");
    assert!(table.contains("↳"), "{table}");
}

/// On a terminal, goose's IDs are shown whole (`20261128_1` is never cut to `20261128`, a
/// date): every session's full ID starts a line of `list` at 120 columns.
#[test]
fn list_on_a_terminal_shows_gooses_ids_whole() {
    let g = G::new("goose-v17", 30);
    // The sessions the listing shows, in full (`--ids`, piped).
    let out = g
        .cmd()
        .args(["list", "--include-archived", "--ids"])
        .output()
        .unwrap();
    let ids: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_string)
        .collect();
    assert!(ids.len() > 20);
    assert!(ids.iter().all(|id| g
        .strings(&format!("SELECT id FROM sessions WHERE id = '{id}'"))
        .len()
        == 1));
    let mut c = crate::common::std_cmd(g.dir.path());
    c.arg("--db")
        .arg(&g.db)
        .args(["list", "--include-archived"])
        .env("NO_COLOR", "1");
    let out = crate::pty::run(c, 120);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let firsts: BTreeSet<String> = out
        .stdout
        .lines()
        .filter_map(|l| l.split_whitespace().next().map(str::to_string))
        .collect();
    for id in &ids {
        assert!(firsts.contains(id), "{id} not shown whole:\n{}", out.stdout);
    }
}

/// goose's `MANUAL_COMPACT_CONTINUATION_TEXT` (`crates/goose/src/context_mgmt/mod.rs`, aaif-goose
/// `006bd233`), copied here as the oracle: agent-db compacts at its user's request.
const GOOSE_MANUAL_CONTINUATION: &str = "The previous message is a structured summary of the session so far, produced at the user's request because the context was getting long. The original messages are gone; the summary is your only memory of them. Treat the summary as authoritative for what it covers, but if the user asks about specifics that are not in the summary, say so plainly and ask rather than guess. Continue the session.";

/// What goose's own compaction writes today (`compact_messages` at `006bd233`): the manual
/// continuation text, and the latest user message put back with goose's default metadata,
/// visible to both user and agent (`Message::user().with_text(..)`), after the continuation.
#[test]
fn compaction_writes_gooses_current_continuation_and_a_visible_copy_of_the_instruction() {
    let mut copies = 0;
    for preset in GooseSchema::PRESETS {
        let g = G::new(preset, 20);
        let before = messages(&g);
        let doc = compact(&g, &["--all-over", "0.7", "--strategy", "extractive"]);
        let compacted: BTreeSet<String> = ids_with_status(&doc, "compacted").into_iter().collect();
        assert!(!compacted.is_empty(), "{preset}: {doc:#}");
        let after = messages(&g);
        let contents: BTreeSet<String> = before
            .values()
            .map(|(_, body, _)| body.split('|').nth(1).unwrap().to_string())
            .collect();
        for id in &compacted {
            let new: Vec<(&i64, &MessageRow)> = after
                .iter()
                .filter(|(k, (s, _, _))| s == id && !before.contains_key(k))
                .collect();
            let role = |b: &str| b.split('|').next().unwrap().to_string();
            let content =
                |b: &str| -> Value { serde_json::from_str(b.split('|').nth(1).unwrap()).unwrap() };
            assert!(new.len() == 2 || new.len() == 3, "{preset} {id}: {new:?}");
            let (_, (_, cont, cont_meta)) = new[1];
            assert_eq!(role(cont), "assistant", "{preset} {id}");
            assert_eq!(
                content(cont)[0]["text"],
                GOOSE_MANUAL_CONTINUATION,
                "{preset} {id}"
            );
            let m: Value = serde_json::from_str(cont_meta.as_deref().unwrap()).unwrap();
            assert_eq!(
                (m["userVisible"].clone(), m["agentVisible"].clone()),
                (Value::Bool(false), Value::Bool(true))
            );
            if let Some((_, (_, copy, copy_meta))) = new.get(2) {
                assert_eq!(role(copy), "user", "{preset} {id}");
                assert!(
                    contents.contains(copy.split('|').nth(1).unwrap()),
                    "{preset} {id}: not a copy"
                );
                let m: Value = serde_json::from_str(copy_meta.as_deref().unwrap()).unwrap();
                assert_eq!(
                    m["userVisible"], true,
                    "{preset} {id}: the copy is hidden from the user"
                );
                assert_eq!(m["agentVisible"], true, "{preset} {id}");
                copies += 1;
            }
            let l = load(&g.conn(), id).unwrap();
            check_compacted(&l, HEADER).unwrap_or_else(|e| panic!("{preset} {id}: {e}"));
        }
    }
    assert!(copies > 0, "no session had its latest instruction put back");
}

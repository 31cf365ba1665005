//! `compact --plan-out FILE` then `agent-db apply FILE`, end to end on the real binary: the plan
//! leaves the store byte-identical, apply writes exactly the plan's (possibly edited) summaries,
//! archived and restorable, refuses a conversation a live agent changed in between, and a bad
//! plan (corrupt, another version, another store) writes nothing. Every check is the test's own
//! SQL over the store's tables.

use std::path::{Path, PathBuf};

use rusqlite::Connection;
use serde_json::Value;

use crate::common::{bare_cmd, files_hash, json, Env};

fn sha256(text: &str) -> String {
    use sha2::{Digest, Sha256};
    hex::encode(Sha256::digest(text.as_bytes()))
}

fn one(c: &Connection, sql: &str, p: &str) -> String {
    c.query_row(sql, [p], |r| r.get::<_, String>(0))
        .unwrap_or_else(|e| panic!("{sql}: {e}"))
}

/// Every string in a JSON value, joined: where a message's text is, whatever its shape.
pub fn texts(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Array(a) => a.iter().map(texts).collect::<Vec<_>>().join("\n"),
        Value::Object(o) => o.values().map(texts).collect::<Vec<_>>().join("\n"),
        _ => String::new(),
    }
}

fn count(c: &Connection, sql: &str) -> i64 {
    c.query_row(sql, [], |r| r.get(0)).expect(sql)
}

fn read_plan(p: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(p).expect("plan file")).expect("plan is JSON")
}

fn write_plan(p: &Path, v: &Value) {
    std::fs::write(p, serde_json::to_string_pretty(v).unwrap()).unwrap();
}

/// `compact IDS --plan-out FILE` with the extractive strategy; its exit code and stderr.
fn plan_out(mut cmd: assert_cmd::Command, ids: &[&str], file: &Path) -> (i32, String) {
    cmd.arg("compact")
        .args(ids)
        .args([
            "--strategy",
            "extractive",
            "--keep-tokens",
            "300",
            "--force",
        ])
        .arg("--plan-out")
        .arg(file);
    let out = cmd.output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn apply_json(mut cmd: assert_cmd::Command, file: &Path) -> (Value, i32) {
    cmd.arg("apply").arg(file).arg("--json");
    json(cmd)
}

fn row<'a>(doc: &'a Value, id: &str) -> &'a Value {
    doc["conversations"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["id"] == id)
        .unwrap_or_else(|| panic!("no row for {id}: {doc:#}"))
}

fn two_ids(env: &Env) -> Vec<String> {
    env.ids(
        "SELECT id FROM conversations WHERE json_array_length(raw_messages) >= 8 ORDER BY id LIMIT 2",
    )
}

#[test]
fn kodelet_plan_writes_nothing_and_apply_writes_exactly_the_plan() {
    let env = Env::generated(6, 31, &[]);
    let ids = two_ids(&env);
    assert_eq!(ids.len(), 2);
    let raw_before: Vec<String> = ids
        .iter()
        .map(|id| {
            one(
                &env.conn(),
                "SELECT raw_messages FROM conversations WHERE id = ?1",
                id,
            )
        })
        .collect();
    let table_before = env.dump("conversations");
    let hash = env.files_hash();
    let file = env.dir.path().join("plan.json");

    let (code, err) = plan_out(env.cmd(), &[&ids[0], &ids[1]], &file);
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        env.files_hash(),
        hash,
        "--plan-out changed the store's files"
    );
    assert!(err.contains("plan written to"), "{err}");

    let mut plan = read_plan(&file);
    assert_eq!(plan["agent_db_plan"], 1);
    assert_eq!(plan["store"]["kind"], "kodelet");
    assert_eq!(
        PathBuf::from(plan["store"]["path"].as_str().unwrap()),
        std::fs::canonicalize(&env.db).unwrap()
    );
    let convs = plan["conversations"].as_array().unwrap().clone();
    assert_eq!(convs.len(), 2, "{plan:#}");
    for (c, raw) in convs.iter().zip(&raw_before) {
        // The fingerprint is the history as stored, hashed here independently.
        assert_eq!(c["fingerprint"], sha256(raw));
        let summary = c["summary"].as_str().unwrap();
        assert!(!summary.trim().is_empty());
        assert_eq!(c["summary_sha256"], sha256(summary));
        assert_eq!(c["strategy"], "extractive");
        let n: usize = serde_json::from_str::<Vec<Value>>(raw).unwrap().len();
        assert_eq!(c["messages_before"], n);
        let kept = c["kept_from"].as_u64().unwrap() as usize;
        assert!(kept > 0 && kept <= n, "{c:#}");
        assert!(c["retention"]["score"].is_number(), "{c:#}");
    }

    // The user rewrites the first summary in the plan; the second stays as proposed.
    let edited = "Reviewed by hand: continue the refactor in src/review_marker.rs";
    plan["conversations"][0]["summary"] = edited.into();
    write_plan(&file, &plan);

    let (doc, code) = apply_json(env.cmd(), &file);
    assert_eq!(code, 0, "{doc:#}");
    assert_eq!(doc["command"], "apply");
    let c = env.conn();
    for (i, id) in ids.iter().enumerate() {
        let r = row(&doc, id);
        assert_eq!(r["status"], "compacted", "{doc:#}");
        assert!(
            r["retention"]["score"].is_number(),
            "retention recomputed: {r:#}"
        );
        let summary = if i == 0 {
            edited.to_string()
        } else {
            convs[1]["summary"].as_str().unwrap().to_string()
        };
        // The summary is in kodelet's own history: the first message's text.
        let raw = one(
            &c,
            "SELECT raw_messages FROM conversations WHERE id = ?1",
            id,
        );
        let msgs: Vec<Value> = serde_json::from_str(&raw).unwrap();
        assert!(texts(&msgs[0]).contains(&summary), "{}", msgs[0]);
        // The kept tail is the plan's: the stored history's last messages, byte for byte.
        let old: Vec<Value> = serde_json::from_str(&raw_before[i]).unwrap();
        let kept = convs[i]["kept_from"].as_u64().unwrap() as usize;
        assert_eq!(msgs[msgs.len() - (old.len() - kept)..], old[kept..]);
        // The audit row says it came from this plan, edited or not, with this summary's hash.
        let audit = c
            .query_row(
                "SELECT summary_sha256, json_extract(details, '$.review'), json_extract(details, '$.plan'),
                        json_extract(details, '$.edited'), strategy
                 FROM agent_db_compactions WHERE conversation_id = ?1",
                [id],
                |r| {
                    Ok((
                        r.get::<_, String>(0)?,
                        r.get::<_, String>(1)?,
                        r.get::<_, String>(2)?,
                        r.get::<_, i64>(3)?,
                        r.get::<_, String>(4)?,
                    ))
                },
            )
            .unwrap();
        assert_eq!(audit.0, sha256(&summary));
        assert_eq!(audit.1, "plan");
        assert_eq!(
            PathBuf::from(&audit.2),
            std::fs::canonicalize(&file).unwrap()
        );
        assert_eq!(audit.3, i64::from(i == 0));
        assert_eq!(audit.4, "extractive");
        assert!(r["compaction_id"].as_i64().is_some());
    }
    assert!(count(&c, "SELECT COUNT(*) FROM agent_db_archive") > 0);
    drop(c);

    // Both restore to the original bytes.
    for id in &ids {
        let out = env.cmd().args(["restore", id]).output().unwrap();
        assert_eq!(
            out.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    assert_eq!(env.dump("conversations"), table_before);
}

#[test]
fn kodelet_a_conversation_changed_since_the_plan_is_refused() {
    let env = Env::generated(6, 32, &[]);
    let ids = two_ids(&env);
    let file = env.dir.path().join("plan.json");
    let (code, err) = plan_out(env.cmd(), &[&ids[0], &ids[1]], &file);
    assert_eq!(code, 0, "{err}");

    // A live agent appends a message to the first conversation after the plan was made.
    let c = env.conn();
    c.execute(
        "UPDATE conversations SET raw_messages = json_insert(raw_messages, '$[#]',
            json('{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"one more thing\"}]}')),
            updated_at = '2026-11-01 12:30:00' WHERE id = ?1",
        [&ids[0]],
    )
    .unwrap();
    drop(c);
    let changed_row: Vec<Vec<String>> = env
        .dump("conversations")
        .into_iter()
        .filter(|r| r[0] == ids[0])
        .collect();

    let (doc, code) = apply_json(env.cmd(), &file);
    assert_eq!(
        code, 1,
        "a proposal not written is a partial failure: {doc:#}"
    );
    let r = row(&doc, &ids[0]);
    assert_eq!(r["status"], "skipped", "{r:#}");
    assert!(
        r["detail"]
            .as_str()
            .unwrap()
            .contains("changed since the plan"),
        "{r:#}"
    );
    assert_eq!(row(&doc, &ids[1])["status"], "compacted");
    // Nothing written for the changed one: its row as the agent left it, no audit row.
    let after: Vec<Vec<String>> = env
        .dump("conversations")
        .into_iter()
        .filter(|r| r[0] == ids[0])
        .collect();
    assert_eq!(after, changed_row);
    let c = env.conn();
    let n: i64 = c
        .query_row(
            "SELECT COUNT(*) FROM agent_db_compactions WHERE conversation_id = ?1",
            [&ids[0]],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(n, 0);
}

/// `apply --min-retention R`: a summary edited down to nothing the span held scores under the
/// plan's own proposal and is skipped with nothing written; the proposal as made lands at that
/// floor.
#[test]
fn apply_min_retention_skips_an_edited_summary_that_lost_the_artifacts() {
    let env = Env::generated(6, 33, &[]);
    let ids = two_ids(&env);
    let file = env.dir.path().join("plan.json");
    let (code, err) = plan_out(env.cmd(), &[&ids[0]], &file);
    assert_eq!(code, 0, "{err}");
    let mut plan = read_plan(&file);
    let proposed = plan["conversations"][0]["summary"].clone();
    let floor = plan["conversations"][0]["retention"]["score"]
        .as_f64()
        .unwrap();
    assert!(floor > 0.0, "the proposal keeps something: {plan:#}");
    plan["conversations"][0]["summary"] = "Reviewed by hand.".into();
    write_plan(&file, &plan);
    let hash = env.files_hash();

    let mut cmd = env.cmd();
    cmd.args(["apply", "--json", "--min-retention", &format!("{floor}")])
        .arg(&file);
    let (doc, code) = json(cmd);
    assert_eq!(code, 1, "{doc:#}");
    let r = row(&doc, &ids[0]);
    assert_eq!(r["status"], "skipped", "{r:#}");
    assert!(r["retention"]["score"].as_f64().unwrap() < floor, "{r:#}");
    let detail = r["detail"].as_str().unwrap();
    assert!(detail.contains("under --min-retention"), "{detail}");
    assert_eq!(
        env.files_hash(),
        hash,
        "a skipped proposal wrote to the store"
    );

    plan["conversations"][0]["summary"] = proposed;
    write_plan(&file, &plan);
    let mut cmd = env.cmd();
    cmd.args(["apply", "--json", "--min-retention", &format!("{floor}")])
        .arg(&file);
    let (doc, code) = json(cmd);
    assert_eq!(code, 0, "{doc:#}");
    assert_eq!(row(&doc, &ids[0])["status"], "compacted", "{doc:#}");
    let c = env.conn();
    assert_eq!(count(&c, "SELECT COUNT(*) FROM agent_db_compactions"), 1);
}

#[test]
fn a_bad_plan_is_refused_and_nothing_is_written() {
    let env = Env::generated(6, 33, &[]);
    let ids = two_ids(&env);
    let file = env.dir.path().join("plan.json");
    let (code, err) = plan_out(env.cmd(), &[&ids[0]], &file);
    assert_eq!(code, 0, "{err}");
    let good = read_plan(&file);
    let hash = env.files_hash();
    let run = |f: &Path, db: Option<&Path>| {
        let mut c = bare_cmd(env.dir.path());
        if let Some(db) = db {
            c.arg("--db").arg(db);
        }
        let out = c.arg("apply").arg(f).output().unwrap();
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };

    // Not JSON: exit 5, the file named.
    let bad = env.file("corrupt.json", b"{\"agent_db_plan\": 1, \"store\": ");
    let (code, err) = run(&bad, None);
    assert_eq!(code, 5, "{err}");
    assert!(
        err.contains("corrupt.json") && err.contains("not JSON"),
        "{err}"
    );
    // Another version: exit 5, says which.
    let mut v2 = good.clone();
    v2["agent_db_plan"] = 2.into();
    let f2 = env.dir.path().join("v2.json");
    write_plan(&f2, &v2);
    let (code, err) = run(&f2, None);
    assert_eq!(code, 5, "{err}");
    assert!(err.contains("plan version 2"), "{err}");
    // A missing field: exit 5.
    let mut partial = good.clone();
    partial["conversations"][0]
        .as_object_mut()
        .unwrap()
        .remove("fingerprint");
    let f3 = env.dir.path().join("partial.json");
    write_plan(&f3, &partial);
    let (code, err) = run(&f3, None);
    assert_eq!(code, 5, "{err}");
    assert!(err.contains("fingerprint"), "{err}");
    // A plan for another store file: exit 2, both files named.
    let other = env.dir.path().join("other.db");
    std::fs::copy(&env.db, &other).unwrap();
    let (code, err) = run(&file, Some(&other));
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("other.db") && err.contains("storage.db"),
        "{err}"
    );
    assert_eq!(env.files_hash(), hash, "a refused plan wrote to the store");
    // A kept range outside the conversation: that proposal fails (exit 1), nothing written.
    let mut out_of_range = good.clone();
    out_of_range["conversations"][0]["kept_from"] = 100_000.into();
    let f4 = env.dir.path().join("range.json");
    write_plan(&f4, &out_of_range);
    let (code, err) = run(&f4, Some(&env.db));
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("kept range is not valid"), "{err}");
    assert_eq!(
        env.files_hash(),
        hash,
        "a failed proposal wrote to the store"
    );
    // An emptied summary: refused as any empty summary is (exit 1), nothing written.
    let mut empty = good.clone();
    empty["conversations"][0]["summary"] = "  \n".into();
    let f5 = env.dir.path().join("empty.json");
    write_plan(&f5, &empty);
    let (code, err) = run(&f5, None);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("the summary is empty"), "{err}");
    assert_eq!(
        env.files_hash(),
        hash,
        "an empty summary wrote to the store"
    );
    // prune writes no summary to review: a usage error, no plan file.
    let f6 = env.dir.path().join("prune.json");
    let out = env
        .cmd()
        .args(["compact", &ids[0], "--strategy", "prune", "--plan-out"])
        .arg(&f6)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(!f6.exists());
}

/// docker-agent's real session (a copy of the shared fixture): plan, edit, apply, restore.
#[test]
fn docker_agent_real_session_plan_apply_and_a_live_writer() {
    let Some(src) = crate::common::shared_fixture("fixtures/docker-agent-e2e-session.db") else {
        return;
    };
    const ID: &str = "87ff468b-ffa0-4785-9649-7c9d3ff94482";
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("session.db");
    std::fs::copy(&src, &db).unwrap();
    let mut perm = std::fs::metadata(&db).unwrap().permissions();
    #[allow(clippy::permissions_set_readonly_false)]
    perm.set_readonly(false);
    std::fs::set_permissions(&db, perm).unwrap();
    let cmd = || {
        let mut c = bare_cmd(dir.path());
        c.arg("--db").arg(&db);
        c
    };
    let dump_items = || crate::common::dump(&Connection::open(&db).unwrap(), "session_items");
    let dump_sessions = || crate::common::dump(&Connection::open(&db).unwrap(), "sessions");
    let (items0, sessions0) = (dump_items(), dump_sessions());
    let hash = files_hash(&db);
    let file = dir.path().join("plan.json");
    let (code, err) = plan_out(cmd(), &[ID], &file);
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        files_hash(&db),
        hash,
        "--plan-out changed the store's files"
    );
    let mut plan = read_plan(&file);
    assert_eq!(plan["store"]["kind"], "docker-agent");
    assert_eq!(plan["conversations"][0]["id"], ID);
    let marker = "Hand-reviewed: the /api/sessions endpoint error in cagent";
    plan["conversations"][0]["summary"] = marker.into();
    write_plan(&file, &plan);

    // A live writer first: docker-agent appends an item; the plan is refused, nothing written.
    let c = Connection::open(&db).unwrap();
    c.execute(
        "INSERT INTO session_items (session_id, position, item_type, message_json)
         VALUES (?1, 39, 'message', json('{\"agentName\":\"root\",\"message\":{\"role\":\"user\",\"content\":\"and now?\"}}'))",
        [ID],
    )
    .unwrap();
    let items1 = dump_items();
    drop(c);
    let (doc, code) = apply_json(cmd(), &file);
    assert_eq!(code, 1, "{doc:#}");
    assert_eq!(row(&doc, ID)["status"], "skipped");
    assert_eq!(dump_items(), items1);
    assert_eq!(dump_sessions(), sessions0);

    // Without it, the plan applies: one summary item with the reviewed text.
    let c = Connection::open(&db).unwrap();
    c.execute(
        "DELETE FROM session_items WHERE position = 39 AND session_id = ?1",
        [ID],
    )
    .unwrap();
    drop(c);
    assert_eq!(dump_items(), items0);
    let (doc, code) = apply_json(cmd(), &file);
    assert_eq!(code, 0, "{doc:#}");
    assert_eq!(row(&doc, ID)["status"], "compacted");
    let c = Connection::open(&db).unwrap();
    let summaries = count(
        &c,
        &format!(
            "SELECT COUNT(*) FROM session_items WHERE item_type = 'summary' AND instr(summary_text, '{marker}') > 0"
        ),
    );
    assert_eq!(summaries, 1);
    assert_eq!(
        count(
            &c,
            "SELECT COUNT(*) FROM agent_db_compactions WHERE json_extract(details, '$.review') = 'plan'
               AND json_extract(details, '$.edited') = 1"
        ),
        1
    );
    drop(c);
    let out = cmd().args(["restore", ID]).output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(dump_items(), items0);
    assert_eq!(dump_sessions(), sessions0);
}

/// The llm strategy against a loopback model server: the plan holds the model's summary (one
/// request), and apply writes exactly that summary without calling the model again.
#[test]
fn an_llm_plan_is_applied_without_calling_the_model_again() {
    let env = Env::generated(6, 34, &[]);
    let ids = two_ids(&env);
    let server = crate::common::MiniLlm::start();
    let hash = env.files_hash();
    let file = env.dir.path().join("plan.json");
    let out = env
        .cmd()
        .args(["compact", &ids[0], "--keep-tokens", "300", "--force"])
        .args([
            "--strategy",
            "llm",
            "--llm-provider",
            "openai",
            "--model",
            "m",
        ])
        .args(["--min-retention", "0"])
        .arg("--base-url")
        .arg(server.base_url())
        .env("AGENT_DB_API_KEY", "sk-plan-test")
        .arg("--plan-out")
        .arg(&file)
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(env.files_hash(), hash);
    assert_eq!(server.requests(), 1);
    let plan = read_plan(&file);
    let p = &plan["conversations"][0];
    assert_eq!(p["strategy"], "llm");
    let summary = p["summary"].as_str().unwrap().to_string();
    assert!(
        summary.contains("The user asked for a refactor"),
        "{summary}"
    );

    // No provider configured now: apply needs none.
    let (doc, code) = apply_json(env.cmd(), &file);
    assert_eq!(code, 0, "{doc:#}");
    assert_eq!(server.requests(), 1, "apply called the model");
    let raw = one(
        &env.conn(),
        "SELECT raw_messages FROM conversations WHERE id = ?1",
        &ids[0],
    );
    let msgs: Vec<Value> = serde_json::from_str(&raw).unwrap();
    assert!(texts(&msgs[0]).contains(&summary));
    let (sha, strategy, edited): (String, String, i64) = env
        .conn()
        .query_row(
            "SELECT summary_sha256, strategy, json_extract(details, '$.edited') FROM agent_db_compactions",
            [],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
        )
        .unwrap();
    assert_eq!(
        (sha, strategy.as_str(), edited),
        (sha256(&summary), "llm", 0)
    );
}

/// A plan applied unedited lands exactly where a plain compact of the same selection lands:
/// every conversation row byte for byte, the same summaries in the audit log.
#[test]
fn an_unedited_plan_lands_as_a_plain_compact_does() {
    let env = Env::generated(10, 35, &[]);
    let other = env.dir.path().join("direct.db");
    std::fs::copy(&env.db, &other).unwrap();
    let sel = [
        "--all-over",
        "0.01",
        "--idle",
        "0",
        "--force",
        "--strategy",
        "extractive",
        "--keep-tokens",
        "400",
        "--yes",
    ];
    let out = bare_cmd(env.dir.path())
        .arg("--db")
        .arg(&other)
        .arg("compact")
        .args(sel)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let file = env.dir.path().join("plan.json");
    let out = env
        .cmd()
        .arg("compact")
        .args(sel)
        .arg("--plan-out")
        .arg(&file)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let (doc, code) = apply_json(env.cmd(), &file);
    assert_eq!(code, 0, "{doc:#}");
    let direct = Connection::open(&other).unwrap();
    let n = count(&direct, "SELECT COUNT(*) FROM agent_db_compactions");
    assert!(n >= 2, "the selection compacts several: {n}");
    assert_eq!(
        doc["conversations"].as_array().unwrap().len() as i64,
        n,
        "{doc:#}"
    );
    assert_eq!(
        crate::common::dump(&direct, "conversations"),
        env.dump("conversations")
    );
    let sums = |c: &Connection| {
        crate::common::query_cells(
            c,
            "SELECT conversation_id, summary_sha256, messages_after, tokens_after
             FROM agent_db_compactions ORDER BY conversation_id",
        )
    };
    assert_eq!(sums(&direct), sums(&env.conn()));
}

/// goose and opencode (generated stores, append-only histories): the plan leaves the files
/// alone, each edited summary lands in the store's own rows, and restore gives every table back.
#[test]
fn goose_and_opencode_plans_apply_and_restore() {
    use agent_db_synth::goose::{generate_goose, GooseSchema};
    use agent_db_synth::opencode::{generate_opencode, OpencodeEra};
    let opts = agent_db_synth::SynthOptions {
        conversations: 5,
        seed: 36,
        ..Default::default()
    };
    // (store, where a summary's text is stored: table, session column, text column)
    for kind in ["goose", "opencode"] {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join(format!("{kind}.db"));
        let (table, text) = if kind == "goose" {
            generate_goose(&db, &opts, &GooseSchema::preset("goose").unwrap()).unwrap();
            ("messages", "content_json")
        } else {
            generate_opencode(&db, &opts, OpencodeEra::preset("opencode").unwrap()).unwrap();
            ("part", "data")
        };
        let cmd = || {
            let mut c = bare_cmd(dir.path());
            c.arg("--db").arg(&db);
            c
        };
        let tables = |c: &Connection| {
            let mut all = crate::common::dump_all(c);
            all.retain(|t, _| !t.starts_with("agent_db_") && t != "sqlite_sequence");
            all
        };
        let before = tables(&Connection::open(&db).unwrap());
        let hash = files_hash(&db);
        let file = dir.path().join("plan.json");
        let out = cmd()
            .args(["compact", "--all-over", "0.01", "--idle", "0", "--force"])
            .args(["--strategy", "extractive", "--keep-tokens", "400"])
            .arg("--plan-out")
            .arg(&file)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(0), "{kind}");
        assert_eq!(
            files_hash(&db),
            hash,
            "{kind}: --plan-out changed the files"
        );
        let mut plan = read_plan(&file);
        assert_eq!(plan["store"]["kind"], kind);
        let ids: Vec<String> = plan["conversations"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["id"].as_str().unwrap().to_string())
            .collect();
        assert!(ids.len() >= 2, "{kind}: {plan:#}");
        for (i, id) in ids.iter().enumerate() {
            plan["conversations"][i]["summary"] =
                format!("Reviewed summary PLAN-MARKER-{i} for {id}").into();
        }
        write_plan(&file, &plan);
        let (doc, code) = apply_json(cmd(), &file);
        assert_eq!(code, 0, "{kind}: {doc:#}");
        let c = Connection::open(&db).unwrap();
        for (i, id) in ids.iter().enumerate() {
            assert_eq!(row(&doc, id)["status"], "compacted", "{kind}");
            let sql = format!(
                "SELECT COUNT(*) FROM {table} WHERE session_id = ?1 AND instr({text}, 'PLAN-MARKER-{i} ') > 0"
            );
            let n: i64 = c.query_row(&sql, [id], |r| r.get(0)).unwrap();
            assert_eq!(n, 1, "{kind} {id}: the summary is one row of {table}");
        }
        drop(c);
        let out = cmd()
            .args(["restore", "--all-since", "1h"])
            .output()
            .unwrap();
        assert_eq!(
            out.status.code(),
            Some(0),
            "{kind}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(tables(&Connection::open(&db).unwrap()), before, "{kind}");
    }
}

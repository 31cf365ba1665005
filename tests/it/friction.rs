//! Everyday friction (issue 29, items 1, 4, 6, 9, 10): one ID resolver for every command and
//! option that takes an ID, `history` of an unknown ID, error text in one style with hints,
//! subcommand help without the global block, the man page's sections, one percentage style,
//! `stats` units and hints, and Ctrl-C in `compact`.

use std::collections::BTreeSet;

use agent_db_synth::opencode::{generate_opencode, OpencodeEra};
use agent_db_synth::SynthOptions;

use crate::common::{bare_cmd, json, Env};

struct Out {
    code: i32,
    stdout: String,
    stderr: String,
}

fn run(c: &mut assert_cmd::Command) -> Out {
    let o = c.output().expect("run");
    Out {
        code: o.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
    }
}

/// The IDs `list --json` reports as selected.
fn listed(c: &mut assert_cmd::Command) -> (BTreeSet<String>, i32) {
    let o = c.output().expect("run");
    let code = o.status.code().unwrap_or(-1);
    let doc: serde_json::Value = serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&o.stderr)));
    let ids = doc["conversations"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["status"] == "selected")
        .map(|r| r["id"].as_str().unwrap().to_string())
        .collect();
    (ids, code)
}

#[test]
fn list_id_takes_the_prefix_the_table_shows_on_kodelet_and_opencode() {
    // kodelet: UUIDs, the table shows 8 characters.
    let env = Env::generated(8, 3, &[]);
    let id = env.ids("SELECT id FROM conversations ORDER BY id LIMIT 1")[0].clone();
    for p in [&id[..8], &id[..4], id.as_str()] {
        let (ids, code) = listed(env.cmd().args(["list", "--json", "--id", p]));
        assert_eq!(code, 0, "list --id {p}");
        assert_eq!(ids, BTreeSet::from([id.clone()]), "list --id {p}");
    }
    // The same conversation twice (prefix and full ID) is listed once.
    let (ids, _) = listed(env.cmd().args(["list", "--json", "--id", &id[..8], "--id", &id]));
    assert_eq!(ids.len(), 1);
    // An unknown ID is still that row's failure (exit 1), named as given.
    let out = run(env.cmd().args(["list", "--id", "ffffffff"]));
    assert_eq!(out.code, 1);
    assert!(out.stderr.contains("conversation ffffffff: not found"), "{}", out.stderr);

    // opencode: `ses_…` IDs; a prefix of 8 characters (`ses_de84` style) names one session.
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("opencode.db");
    let opts = SynthOptions {
        conversations: 6,
        seed: 7,
        scale: 0.5,
        ..SynthOptions::default()
    };
    generate_opencode(&db, &opts, OpencodeEra::Effect).unwrap();
    let sessions: Vec<String> = {
        let c = rusqlite::Connection::open(&db).unwrap();
        let mut st = c.prepare("SELECT id FROM session ORDER BY id").unwrap();
        let v = st
            .query_map([], |r| r.get::<_, String>(0))
            .unwrap()
            .map(|r| r.unwrap())
            .collect();
        v
    };
    // The shortest prefix that tells the first session apart from every other one.
    let s = &sessions[0];
    let n = (8..=s.len())
        .find(|n| sessions.iter().filter(|o| o.starts_with(&s[..*n])).count() == 1)
        .unwrap();
    let cmd = || {
        let mut c = bare_cmd(dir.path());
        c.arg("--db").arg(&db);
        c
    };
    let (ids, code) = listed(cmd().args(["list", "--json", "--id", &s[..n]]));
    assert_eq!((ids, code), (BTreeSet::from([s.clone()]), 0));
    // `show` and `compact --dry-run` take the same prefix.
    assert_eq!(run(cmd().args(["show", &s[..n], "--no-pager"])).code, 0);
    let mut c = cmd();
    c.args(["compact", "--dry-run", "--json", "--id", &s[..n]]);
    let (doc, _) = json(c);
    assert_eq!(doc["conversations"][0]["id"], s.as_str());
}

#[test]
fn history_of_an_unknown_id_is_not_found_and_of_a_known_one_says_none() {
    let env = Env::generated(4, 5, &[]);
    let id = env.ids("SELECT id FROM conversations ORDER BY id LIMIT 1")[0].clone();
    let out = run(env.cmd().args(["history", "zzzz"]));
    assert_eq!(out.code, 5, "{}", out.stderr);
    assert!(out.stderr.contains("conversation zzzz: not found"), "{}", out.stderr);
    assert!(!out.stderr.contains("no compactions recorded"), "{}", out.stderr);
    assert!(out.stdout.is_empty());
    assert_eq!(run(env.cmd().args(["history", "zzzz", "--json"])).code, 5);

    // A known conversation (by prefix) with no compactions: said so, exit 0.
    let out = run(env.cmd().args(["history", &id[..8]]));
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(
        out.stderr.trim(),
        format!("conversation {id}: no compactions recorded")
    );
    // The whole store with no compactions still says so for the store.
    let out = run(env.cmd().arg("history"));
    assert_eq!(out.code, 0);
    assert!(out.stderr.contains("no compactions recorded in"), "{}", out.stderr);
}

//! Finding the store as users of each agent set it up: opencode's channel files, a relative
//! `GOOSE_PATH_ROOT`, docker-agent's old name, the versions `stores` names, and what an
//! append-only store refuses up front.

use std::path::Path;

use agent_db_synth::docker_agent::{generate_docker_agent, Generation};
use agent_db_synth::goose::{generate_goose, GooseSchema};
use agent_db_synth::opencode::{generate_opencode, OpencodeEra};
use agent_db_synth::SynthOptions;

use crate::common::{bare_cmd, files_hash, json};

fn opts(n: usize) -> SynthOptions {
    SynthOptions {
        conversations: n,
        seed: 7,
        ..SynthOptions::default()
    }
}

/// The binary with HOME, XDG data and the current directory in `home`, and no agent variable
/// of the caller's.
fn cmd(home: &Path) -> assert_cmd::Command {
    let mut c = bare_cmd(home);
    c.env("XDG_DATA_HOME", home.join(".local/share"))
        .env_remove("OPENCODE_DB")
        .env_remove("GOOSE_PATH_ROOT")
        .current_dir(home);
    c
}

/// `--agent opencode` with only another channel's file: the error names that file and how to
/// use it, and `stores` lists it with the version users know.
#[test]
fn opencodes_other_channel_file_is_named_and_listed() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join(".local/share/opencode");
    std::fs::create_dir_all(&data).unwrap();
    let beta = data.join("opencode-beta.db");
    generate_opencode(&beta, &opts(3), OpencodeEra::Effect).unwrap();
    let out = cmd(dir.path())
        .args(["--agent", "opencode", "list"])
        .output()
        .unwrap();
    assert_ne!(out.status.code(), Some(0));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!("use it with --db {}", beta.display())),
        "{err}"
    );
    let out = cmd(dir.path()).args(["stores"]).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains(&beta.display().to_string()), "{text}");
    assert!(text.contains("opencode 1.x"), "{text}");
    assert!(!text.contains("20260622202450"), "{text}");
    let (doc, _) = json({
        let mut c = cmd(dir.path());
        c.args(["stores", "--json"]);
        c
    });
    let s = &doc["stores"][0];
    assert_eq!(s["version_name"], "opencode 1.x", "{doc:#}");
    assert!(s["schema_version"].as_str().is_some(), "{doc:#}");
}

/// A relative `GOOSE_PATH_ROOT` is taken from the current directory, as goose takes it.
#[test]
fn a_relative_goose_path_root_is_resolved() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("gooseroot/data/sessions/sessions.db");
    std::fs::create_dir_all(db.parent().unwrap()).unwrap();
    generate_goose(&db, &opts(4), &GooseSchema::preset("goose-v16").unwrap()).unwrap();
    let (doc, code) = json({
        let mut c = cmd(dir.path());
        c.env("GOOSE_PATH_ROOT", "gooseroot")
            .args(["--agent", "goose", "list", "--json"]);
        c
    });
    assert_eq!(code, 0, "{doc:#}");
    assert_eq!(doc["store"]["kind"], "goose");
    let (doc, _) = json({
        let mut c = cmd(dir.path());
        c.env("GOOSE_PATH_ROOT", "gooseroot")
            .args(["stores", "--json"]);
        c
    });
    assert_eq!(
        doc["stores"][0]["version_name"], "goose schema v16 (goose 1.47)",
        "{doc:#}"
    );
}

/// `--agent cagent` is docker-agent (its old name, still its directory); `--strategy prune` on
/// its append-only store is refused up front (exit 3, nothing written); an empty session is
/// unrated for want of usage, not of a context window.
#[test]
fn docker_agent_by_its_old_name_prune_refused_and_empty_sessions() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join(".cagent/session.db");
    std::fs::create_dir_all(db.parent().unwrap()).unwrap();
    generate_docker_agent(&db, &opts(8), Generation::Modern).unwrap();
    let (doc, code) = json({
        let mut c = cmd(dir.path());
        c.args(["--agent", "cagent", "list", "--json"]);
        c
    });
    assert_eq!(code, 0, "{doc:#}");
    assert_eq!(doc["store"]["kind"], "docker-agent");
    let before = files_hash(&db);
    let out = cmd(dir.path())
        .args([
            "--agent",
            "cagent",
            "compact",
            "--all-over",
            "0",
            "--strategy",
            "prune",
            "--yes",
        ])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(3),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("append-only"));
    assert_eq!(files_hash(&db), before);
    let empty: Vec<String> = {
        let c = rusqlite::Connection::open(&db).unwrap();
        let mut st = c
            .prepare(
                "SELECT id FROM sessions s WHERE (parent_id IS NULL OR parent_id = '')
                 AND NOT EXISTS (SELECT 1 FROM session_items i WHERE i.session_id = s.id)",
            )
            .unwrap();
        let rows = st.query_map([], |r| r.get(0)).unwrap();
        rows.map(|r| r.unwrap()).collect()
    };
    assert!(!empty.is_empty());
    let (doc, _) = json({
        let mut c = cmd(dir.path());
        c.args([
            "--agent",
            "cagent",
            "list",
            "--all-over",
            "0.7",
            "--idle",
            "0",
            "--json",
        ]);
        c
    });
    for id in &empty {
        // list --json version 2: skipped conversations are under `skipped`.
        let row = doc["skipped"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["id"] == id.as_str())
            .unwrap_or_else(|| panic!("{id}: {doc:#}"));
        let detail = row["detail"].as_str().unwrap_or_default();
        assert!(detail.contains("no input_tokens or output_tokens"), "{row}");
    }
}

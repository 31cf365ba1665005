//! IDs and errors: one ID resolver for every command and option that takes an ID (the prefix
//! the table shows), `history` of an unknown ID, error text in one style with hints that name
//! flags that exist, ratios as percentages, and which store file an error names.

use std::collections::BTreeSet;

use agent_db_synth::opencode::{generate_opencode, OpencodeEra};
use agent_db_synth::SynthOptions;

use crate::common::{bare_cmd, json, Env};

pub struct Out {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

pub fn run(c: &mut assert_cmd::Command) -> Out {
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
    let (ids, _) = listed(
        env.cmd()
            .args(["list", "--json", "--id", &id[..8], "--id", &id]),
    );
    assert_eq!(ids.len(), 1);
    // An unknown ID is not found (exit 5), named as given, before anything is listed.
    let out = run(env.cmd().args(["list", "--id", "ffffffff"]));
    assert_eq!(out.code, 5);
    assert!(!out.stderr.contains("conversation(s)"), "{}", out.stderr);
    assert!(
        out.stderr.contains("conversation ffffffff: not found"),
        "{}",
        out.stderr
    );

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
    assert!(
        out.stderr.contains("conversation zzzz: not found"),
        "{}",
        out.stderr
    );
    assert!(
        !out.stderr.contains("no compactions recorded"),
        "{}",
        out.stderr
    );
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
    assert!(
        out.stderr.contains("no compactions recorded in"),
        "{}",
        out.stderr
    );
}

/// Each stderr line: the first is `error: …`, the rest `hint: …`.
fn error_lines(stderr: &str) -> Vec<&str> {
    stderr.lines().filter(|l| !l.trim().is_empty()).collect()
}

#[test]
fn id_errors_say_what_is_wrong() {
    let env = Env::generated(4, 5, &[]);
    // Too short to be a prefix: not found, with a hint about the 4 characters.
    let out = run(env.cmd().args(["show", "01b"]));
    assert_eq!(out.code, 5);
    assert_eq!(
        error_lines(&out.stderr),
        [
            "error: conversation 01b: not found",
            "hint: an ID prefix needs at least 4 characters; `agent-db list` shows the IDs"
        ]
    );
    // An empty ID is a usage error that says so, for every command that takes an ID.
    for args in [
        vec!["show", ""],
        vec!["list", "--id", ""],
        vec!["compact", "--dry-run", ""],
        vec!["history", ""],
        vec!["restore", ""],
    ] {
        let out = run(env.cmd().args(&args));
        assert_eq!(out.code, 2, "{args:?}: {}", out.stderr);
        assert!(
            out.stderr
                .starts_with("error: the conversation ID is empty"),
            "{args:?}: {}",
            out.stderr
        );
    }
}

#[test]
fn ratios_take_percentages_and_out_of_range_values_get_the_right_hint() {
    let env = Env::generated(12, 21, &[]);
    // 70% is 0.7: the same selection.
    let (a, code_a) = listed(env.cmd().args(["list", "--json", "--all-over", "0.7"]));
    let (b, code_b) = listed(env.cmd().args(["list", "--json", "--all-over", "70%"]));
    assert_eq!((code_a, code_b), (0, 0));
    assert_eq!(a, b);
    // 70 → 0.7 (a percentage); 1.5 has no likely reading: the range is explained, no guess.
    let out = run(env.cmd().args(["list", "--all-over", "70"]));
    assert_eq!(out.code, 2);
    assert_eq!(
        error_lines(&out.stderr),
        [
            "error: --all-over takes a utilization ratio from 0 to 1, such as 0.7; got 70",
            "hint: did you mean --all-over 0.7? (--all-over 70% works too)"
        ]
    );
    let out = run(env.cmd().args(["list", "--all-over", "1.5"]));
    assert_eq!(out.code, 2);
    assert!(!out.stderr.contains("did you mean"), "{}", out.stderr);
    assert!(
        out.stderr.contains("0 is empty, 1 is full"),
        "{}",
        out.stderr
    );
    // Not a number at all: clap's error, which names both forms.
    let out = run(env.cmd().args(["list", "--all-over", "lots"]));
    assert_eq!(out.code, 2);
    assert!(out.stderr.starts_with("error: "), "{}", out.stderr);
    assert!(out.stderr.contains("percentage (70%)"), "{}", out.stderr);
    // --concurrency 0 is refused before anything is opened.
    let out = run(env
        .cmd()
        .args(["compact", "--dry-run", "--follow", "--concurrency", "0"]));
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert!(out.stderr.contains("at least 1"), "{}", out.stderr);
}

#[test]
fn store_choice_errors_name_the_right_file() {
    use agent_db_synth::docker_agent::{generate_docker_agent, Generation};
    let home = tempfile::tempdir().unwrap();
    let cagent = home.path().join(".cagent");
    std::fs::create_dir_all(&cagent).unwrap();
    let opts = SynthOptions {
        conversations: 3,
        ..Default::default()
    };
    generate_docker_agent(&cagent.join("session.db"), &opts, Generation::Modern).unwrap();
    let kodelet = home.path().join(".kodelet");
    std::fs::create_dir_all(&kodelet).unwrap();
    drop(agent_db_synth::kodelet_schema::create(&kodelet.join("storage.db")).unwrap());

    // Two stores and no choice: the error is about both, not prefixed with one file's path.
    let out = run(bare_cmd(home.path()).arg("list"));
    assert_eq!(out.code, 4);
    assert!(
        out.stderr
            .starts_with("error: two conversation stores found: "),
        "{}",
        out.stderr
    );

    // AGENT_DB_PATH names docker-agent's file, --agent says kodelet: a usage error naming whose
    // file it is, never a silent listing of docker-agent's store.
    let docker = cagent.join("session.db");
    let out = run(bare_cmd(home.path())
        .env("AGENT_DB_PATH", &docker)
        .args(["--agent", "kodelet", "list"]));
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert!(out.stdout.is_empty());
    assert_eq!(
        error_lines(&out.stderr),
        [
            format!(
                "error: {} ($AGENT_DB_PATH) is docker-agent's store, not kodelet's (--agent kodelet)",
                docker.display()
            )
            .as_str(),
            "hint: unset AGENT_DB_PATH to use kodelet's store, or drop --agent"
        ]
    );
    // The same with --db; and a path that is the agent's own store is fine.
    let out = run(bare_cmd(home.path())
        .arg("--db")
        .arg(&docker)
        .args(["--agent", "kodelet", "list"]));
    assert_eq!(out.code, 2);
    assert!(
        out.stderr.contains("(--db) is docker-agent's store"),
        "{}",
        out.stderr
    );
    let out = run(bare_cmd(home.path()).env("AGENT_DB_PATH", &docker).args([
        "--agent",
        "docker-agent",
        "list",
    ]));
    assert_eq!(out.code, 0, "{}", out.stderr);

    // A missing --config file: the same error and exit 3 for a read-only command as for compact.
    let missing = home.path().join("typo.toml");
    let want = format!("error: {}: no such config file\n", missing.display());
    for args in [
        vec!["--agent", "kodelet", "list"],
        vec!["--agent", "kodelet", "compact", "--follow", "--dry-run"],
        vec!["--agent", "kodelet", "stats"],
    ] {
        let out = run(bare_cmd(home.path())
            .arg("--config")
            .arg(&missing)
            .args(&args));
        assert_eq!(out.code, 3, "{args:?}: {}", out.stderr);
        assert_eq!(out.stderr, want, "{args:?}");
        let out = run(bare_cmd(home.path())
            .env("AGENT_DB_CONFIG", &missing)
            .args(&args));
        assert_eq!(out.code, 3, "{args:?}: {}", out.stderr);
    }
}

#[test]
fn one_error_style_coloured_only_on_a_terminal() {
    let env = Env::generated(4, 5, &[]);
    let id = env.ids("SELECT id FROM conversations ORDER BY id LIMIT 1")[0].clone();
    // agent-db's own errors, clap's, and a restore refusal all start with `error: `.
    let own = run(env.cmd().args(["show", "ffffffff"]));
    let clap = run(env.cmd().args(["list", "--frobnicate"]));
    let failed_row = run(env.cmd().args(["list", "--id", "ffffffff"]));
    for (what, o) in [("own", &own), ("clap", &clap), ("row", &failed_row)] {
        let line = o.stderr.lines().find(|l| l.contains("error")).unwrap();
        assert!(line.starts_with("error: "), "{what}: {}", o.stderr);
        assert!(!o.stderr.contains("agent-db: "), "{what}: {}", o.stderr);
        assert!(
            !o.stderr.contains('\x1b'),
            "{what}: piped stderr has no colour"
        );
    }
    let mut c = crate::common::std_cmd(env.dir.path());
    c.arg("--db")
        .arg(&env.db)
        .args(["compact", &id, "--keep-tokens", "0"]);
    assert!(c.status().unwrap().success());
    let mut c = crate::common::std_cmd(env.dir.path());
    c.arg("--db")
        .arg(&env.db)
        .env("AGENT_DB_NOW", "2026-11-02T12:00:00Z")
        .args(["prune-archive", "--older-than", "1s", "--yes"]);
    assert!(c.status().unwrap().success());
    let out = run(env.cmd().args(["restore", &id, "--compaction", "1"]));
    assert_eq!(out.code, 7, "{}", out.stderr);
    assert!(
        out.stderr.starts_with("error: compaction 1 of "),
        "{}",
        out.stderr
    );

    // On a terminal the labels are coloured as clap colours its own; NO_COLOR turns it off.
    let mut c = crate::common::std_cmd(env.dir.path());
    c.arg("--db").arg(&env.db).args(["show", "01b"]);
    let tty = crate::pty::run_stderr_on_tty(c);
    assert_eq!(tty.code, 5);
    assert!(
        tty.stderr
            .starts_with("\x1b[1;31merror:\x1b[0m conversation 01b: not found\n"),
        "{:?}",
        tty.stderr
    );
    assert!(
        tty.stderr.contains("\x1b[1;32mhint:\x1b[0m an ID prefix"),
        "{:?}",
        tty.stderr
    );
    let mut c = crate::common::std_cmd(env.dir.path());
    c.env("NO_COLOR", "1")
        .arg("--db")
        .arg(&env.db)
        .args(["show", "01b"]);
    let tty = crate::pty::run_stderr_on_tty(c);
    assert!(
        tty.stderr.starts_with("error: conversation 01b"),
        "{:?}",
        tty.stderr
    );
}

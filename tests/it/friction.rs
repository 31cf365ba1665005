//! Everyday friction (issue 29, items 1, 4, 6, 9, 10): one ID resolver for every command and
//! option that takes an ID, `history` of an unknown ID, error text in one style with hints,
//! subcommand help without the global block, the man page's sections, one percentage style,
//! `stats` units and hints, and Ctrl-C in `compact`.

use std::collections::BTreeSet;
use std::path::PathBuf;

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
    drop(agent_db::agents::kodelet::init_store(&kodelet.join("storage.db")).unwrap());

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

#[test]
fn subcommand_help_lists_only_its_own_options_at_80_columns() {
    let home = tempfile::tempdir().unwrap();
    let help = |args: &[&str]| {
        let mut c = crate::common::std_cmd(home.path());
        c.env("NO_COLOR", "1").args(args);
        let out = crate::pty::run(c, 80);
        assert_eq!(out.code, 0, "{args:?}: {}", out.stderr);
        out.stdout
    };
    let list = help(&["list", "--help"]);
    // No global block: its heading and its options are gone, one line points at them.
    assert!(!list.contains("Global options:"), "{list}");
    for flag in [
        "--db <PATH>",
        "--agent <AGENT>",
        "--color <WHEN>",
        "--config <PATH>",
    ] {
        assert!(!list.contains(flag), "{flag} in list --help:\n{list}");
    }
    assert!(list.contains("see `agent-db --help`"), "{list}");
    for line in list.lines() {
        assert!(line.chars().count() <= 80, "{line}");
    }
    insta::assert_snapshot!("list_help_80", list);
    // The same for every subcommand; the top-level help keeps the global options.
    for sub in [
        "show", "compact", "history", "restore", "stats", "vacuum", "man",
    ] {
        let h = help(&[sub, "--help"]);
        assert!(
            !h.contains("Global options:") && !h.contains("--db <PATH>"),
            "{sub}:\n{h}"
        );
        assert!(h.contains("see `agent-db --help`"), "{sub}:\n{h}");
    }
    let top = help(&["--help"]);
    assert!(
        top.contains("Global options:") && top.contains("--db <PATH>"),
        "{top}"
    );

    // The hidden global options still work after the subcommand, --db from the environment too.
    let env = Env::generated(3, 2, &[]);
    let mut c = bare_cmd(env.dir.path());
    c.args(["list", "--json", "--quiet", "--db"]).arg(&env.db);
    assert_eq!(json(c).1, 0);
    let mut c = bare_cmd(env.dir.path());
    c.env("AGENT_DB_PATH", &env.db).args(["list", "--json"]);
    assert_eq!(json(c).1, 0);
    // Completions still offer the global options after a subcommand.
    let out = run(bare_cmd(home.path()).args(["completions", "bash"]));
    let list_case = out
        .stdout
        .split("agent__subcmd__db__subcmd__list)")
        .nth(1)
        .expect("bash completion for list");
    let opts = list_case.lines().find(|l| l.contains("opts=")).unwrap();
    assert!(
        opts.contains("--db") && opts.contains("--all-over"),
        "{opts}"
    );
}

#[test]
fn the_man_page_references_no_other_page_and_has_its_own_sections() {
    let home = tempfile::tempdir().unwrap();
    let out = run(bare_cmd(home.path()).arg("man"));
    assert_eq!(out.code, 0, "{}", out.stderr);
    let roff = out.stdout;
    // No agent-db-list(1) and the like: those pages do not exist.
    assert!(!roff.contains("agent-db-"), "references another page");
    assert!(!roff.contains("(1)"), "references another page");
    let sections: Vec<&str> = roff
        .lines()
        .filter_map(|l| l.strip_prefix(".SH "))
        .collect();
    for want in [
        "NAME",
        "SYNOPSIS",
        "COMMANDS",
        "EXAMPLES",
        "STORE",
        "\"EXIT STATUS\"",
    ] {
        assert!(sections.contains(&want), "{want} in {sections:?}");
    }
    // Every subcommand has its own subsection with its own options.
    for sub in [
        "list",
        "show",
        "compact",
        "history",
        "restore",
        "prune-archive",
        "stats",
    ] {
        assert!(
            roff.contains(&format!(".SS \"agent-db {sub}\"")),
            "{sub} subsection"
        );
    }
    // Each exit code is an item of its own in EXIT STATUS, exactly the documented ones.
    let exit = roff.split(".SH \"EXIT STATUS\"").nth(1).unwrap();
    let exit = exit.split("\n.SH ").next().unwrap();
    let codes: Vec<i32> = exit
        .lines()
        .collect::<Vec<_>>()
        .windows(2)
        .filter(|w| w[0] == ".TP")
        .filter_map(|w| {
            w[1].trim_start_matches("\\fB")
                .trim_end_matches("\\fR")
                .parse()
                .ok()
        })
        .collect();
    assert_eq!(codes, [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 130]);
    // groff renders it, with the examples apart from the exit codes.
    let page = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(page.path(), &roff).unwrap();
    if let Ok(o) = std::process::Command::new("groff")
        .args(["-man", "-Tutf8", "-P", "-cbou"])
        .arg(page.path())
        .output()
    {
        let text = String::from_utf8_lossy(&o.stdout);
        let ex = text.find("EXAMPLES").expect("EXAMPLES rendered");
        let st = text.find("EXIT STATUS").expect("EXIT STATUS rendered");
        assert!(ex < st);
        assert!(
            text[ex..st].contains("agent-db list --all-over 0.7"),
            "{}",
            &text[ex..st]
        );
        assert!(
            !text[ex..st].contains("store unusable"),
            "exit codes run into the examples"
        );
    }
}

/// The figure and unit `stats` prints for a byte count, computed here: binary units with their
/// binary names (1 KiB = 1024 bytes).
fn iec(n: u64) -> String {
    let f = n as f64;
    if n < 1024 {
        format!("{n} B")
    } else if n < 1024 * 1024 {
        format!("{:.1} KiB", f / 1024.0)
    } else {
        format!("{:.1} MiB", f / 1024.0 / 1024.0)
    }
}

#[test]
fn one_percentage_style_and_stats_in_the_units_it_names() {
    let env = Env::generated(12, 7, &[]);
    let big = env.ids(
        "SELECT c.id FROM conversations c JOIN conversation_summaries s ON s.id = c.id
         WHERE s.message_count >= 20 ORDER BY c.id LIMIT 1",
    )[0]
    .clone();
    // A fresh store: nothing to vacuum, nothing archived, so no hints to do either.
    let out = run(env.cmd().arg("stats"));
    assert_eq!(out.code, 0);
    let line = |s: &str, key: &str| {
        s.lines()
            .find(|l| l.starts_with(key))
            .unwrap_or_else(|| panic!("{key}:\n{s}"))
            .to_string()
    };
    let len = std::fs::metadata(&env.db).unwrap().len();
    assert!(
        line(&out.stdout, "file ").contains(&format!("file          {} (", iec(len))),
        "{}",
        out.stdout
    );
    let free: i64 = env
        .conn()
        .query_row("PRAGMA freelist_count", [], |r| r.get(0))
        .unwrap();
    if free == 0 {
        assert!(
            !line(&out.stdout, "free pages").contains("vacuum"),
            "{}",
            out.stdout
        );
    }
    assert!(
        !line(&out.stdout, "archive").contains("prune-archive"),
        "{}",
        out.stdout
    );
    assert!(!out.stdout.contains(" KB") && !out.stdout.contains(" MB"));

    // After a compaction the archive holds the original: now the hint is there.
    assert_eq!(
        run(env.cmd().args(["compact", &big, "--keep-tokens", "500"])).code,
        0
    );
    let out = run(env.cmd().arg("stats"));
    assert!(
        line(&out.stdout, "archive").contains("`prune-archive` frees it"),
        "{}",
        out.stdout
    );

    // The compact table shows utilization as list does: percentages, never 0.38-style ratios.
    let mut c = crate::common::std_cmd(env.dir.path());
    c.env("NO_COLOR", "1").arg("--db").arg(&env.db).args([
        "compact",
        "--dry-run",
        "--all-over",
        "0",
        "--idle",
        "0",
        "--keep-tokens",
        "300",
    ]);
    let table = crate::pty::run(c, 120).stdout;
    let header = table.lines().next().unwrap();
    assert!(
        header.contains(" USE ") && !header.contains("UTIL"),
        "{header}"
    );
    let ratio = regex_lite_ratio(&table);
    assert!(
        ratio.is_none(),
        "a 0.xx ratio in the table: {ratio:?}\n{table}"
    );
    assert!(table.contains("% → "), "{table}");
}

/// The first `0.dd` (a ratio in the old style) in `s`, if any.
fn regex_lite_ratio(s: &str) -> Option<String> {
    let b = s.as_bytes();
    (0..b.len().saturating_sub(3)).find_map(|i| {
        let prev_ok = i == 0 || !(b[i - 1].is_ascii_digit() || b[i - 1] == b'.');
        (prev_ok
            && b[i] == b'0'
            && b[i + 1] == b'.'
            && b[i + 2].is_ascii_digit()
            && b[i + 3].is_ascii_digit())
        .then(|| s[i..i + 4].to_string())
    })
}

/// `compact --concurrency 1` of `ids` with a before-compaction hook that marks in `marks` that
/// it runs and then takes a second; SIGINT (Ctrl-C) goes to agent-db while the first
/// conversation's hook runs. Returns what agent-db printed and its exit status.
pub fn interrupted_compaction(env: &Env, ids: &[String]) -> (std::process::Output, PathBuf) {
    let mut args: Vec<String> = ["--concurrency", "1", "--keep-tokens", "300"]
        .map(String::from)
        .to_vec();
    args.extend(ids.iter().cloned());
    interrupted_compaction_with(env, &args)
}

/// [`interrupted_compaction`] with `compact`'s arguments given.
pub fn interrupted_compaction_with(env: &Env, args: &[String]) -> (std::process::Output, PathBuf) {
    use std::os::unix::fs::PermissionsExt;
    let marks = env.dir.path().join("marks");
    std::fs::create_dir_all(&marks).unwrap();
    let hooks = env.dir.path().join(".agent-db").join("hooks");
    std::fs::create_dir_all(&hooks).unwrap();
    let hook = hooks.join("10-slow");
    std::fs::write(
        &hook,
        format!(
            "#!/bin/sh\ncase \"$1\" in\nhook)\n  echo before_compaction\n  ;;\nrun)\n  cat >/dev/null\n  touch '{}'/$$\n  sleep 1\n  ;;\nesac\n",
            marks.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&hook, std::fs::Permissions::from_mode(0o755)).unwrap();
    let mut c = crate::common::std_cmd(env.dir.path());
    c.current_dir(env.dir.path())
        .arg("--db")
        .arg(&env.db)
        .arg("compact")
        .args(args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let child = c.spawn().unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while std::fs::read_dir(&marks).unwrap().count() == 0 {
        assert!(std::time::Instant::now() < deadline, "the hook never ran");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    // SAFETY: a signal to our own child.
    unsafe {
        libc::kill(child.id() as i32, libc::SIGINT);
    }
    (child.wait_with_output().unwrap(), marks)
}

/// Ctrl-C in a batch whose selection had not reached every conversation: the TOTAL line counts
/// the ones never visited instead of leaving them out, as do the JSON totals.
#[test]
fn ctrl_c_counts_the_conversations_the_selection_never_reached() {
    let env = Env::generated(40, 21, &[]);
    let mut list = env.cmd();
    list.args(["list", "--all-over", "0", "--ids"]);
    let selected = String::from_utf8(list.output().unwrap().stdout)
        .unwrap()
        .lines()
        .count();
    assert!(selected > 10, "{selected}");
    let args: Vec<String> = [
        "--all-over",
        "0",
        "--yes",
        "--jobs",
        "1",
        "--concurrency",
        "1",
        "--keep-tokens",
        "300",
    ]
    .map(String::from)
    .to_vec();
    let (out, _) = interrupted_compaction_with(&env, &args);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(130), "{stdout}\n{stderr}");
    let total = stdout
        .lines()
        .find(|l| l.starts_with("TOTAL "))
        .unwrap_or_else(|| panic!("{stdout}"));
    let rows = stdout
        .lines()
        .filter(|l| l.contains("compacted") || l.contains("skipped"))
        .count();
    assert!(
        total.contains(&format!(
            " of {selected} conversation(s) visited before Ctrl-C"
        )),
        "{total}\n{stdout}\nrows {rows}"
    );
    assert!(stderr.contains("not visited)"), "{stderr}");
}

/// Conversations with enough messages to compact, for [`interrupted_compaction`].
pub fn four_to_compact(env: &Env) -> Vec<String> {
    let ids = env.ids(
        "SELECT c.id FROM conversations c JOIN conversation_summaries s ON s.id = c.id
         WHERE s.message_count >= 6 ORDER BY c.id LIMIT 4",
    );
    assert_eq!(ids.len(), 4);
    ids
}

#[test]
fn ctrl_c_finishes_the_conversation_in_flight_reports_and_exits_130() {
    let env = Env::generated(16, 21, &[]);
    let ids = four_to_compact(&env);
    let before: Vec<Vec<String>> = env.dump("conversations");
    let (out, marks) = interrupted_compaction(&env, &ids);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(130), "{stdout}\n{stderr}");

    // The store: the conversation in flight was compacted whole, the others untouched.
    let audit: Vec<String> = env.ids("SELECT conversation_id FROM agent_db_compactions");
    assert_eq!(
        audit.len(),
        1,
        "exactly the conversation in flight: {stderr}"
    );
    assert_eq!(audit[0], ids[0]);
    let after = env.dump("conversations");
    let changed: Vec<_> = before.iter().zip(&after).filter(|(a, b)| a != b).collect();
    assert_eq!(changed.len(), 1);
    assert_eq!(
        std::fs::read_dir(&marks).unwrap().count(),
        1,
        "no other hook started"
    );

    // What was done is printed: the table with the one compacted row and the rest not
    // started (conversations the selection had not queued yet are not rows at all), and the
    // summary line with its hint.
    assert!(stdout.contains("compacted 1, skipped "), "{stdout}");
    assert!(stdout.contains("failed 0"), "{stdout}");
    assert!(
        stderr.contains(
            "error: interrupted (Ctrl-C): compacted 1, failed 0, and the rest not started"
        ),
        "{stderr}"
    );
    assert!(stderr.contains("hint: "), "{stderr}");
}

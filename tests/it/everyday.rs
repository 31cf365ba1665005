//! The everyday CLI: ID prefixes, a silent cron run, prune-archive's dry run and question,
//! vacuum, choosing the store by agent, `show --last`, colour, help examples and the man page.

use rusqlite::Connection;

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

/// Give two conversations IDs that share their first 8 characters (in both kodelet tables).
fn twins(env: &Env) -> (String, String) {
    let ids = env.ids("SELECT id FROM conversations ORDER BY id LIMIT 2");
    let a = "abcd1234-0000-4000-8000-00000000000a".to_string();
    let b = "abcd1234-1111-4000-8000-00000000000b".to_string();
    let c = env.conn();
    for (old, new) in ids.iter().zip([&a, &b]) {
        for t in ["conversations", "conversation_summaries"] {
            c.execute(&format!("UPDATE {t} SET id = ?1 WHERE id = ?2"), [new, old])
                .unwrap();
        }
    }
    (a, b)
}

#[test]
fn show_takes_a_unique_prefix_and_lists_candidates_when_ambiguous() {
    let env = Env::generated(8, 3, &[]);
    let (a, b) = twins(&env);
    let other =
        env.ids("SELECT id FROM conversations WHERE id NOT LIKE 'abcd%' LIMIT 1")[0].clone();

    let out = run(env.cmd().args(["show", &other[..8]]));
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(out.stdout.starts_with(&format!("conversation {other}\n")));

    // Ambiguous: exit 5, both candidates named, nothing on stdout.
    let out = run(env.cmd().args(["show", "abcd1234"]));
    assert_eq!(out.code, 5, "{}", out.stderr);
    assert!(out.stderr.contains("ambiguous") && out.stderr.contains(&a) && out.stderr.contains(&b));
    assert!(out.stdout.is_empty());

    // One more character decides.
    let out = run(env.cmd().args(["show", &a[..10]]));
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(out.stdout.contains(&a));

    // Too short to be a prefix, and unknown: not found (5).
    assert_eq!(run(env.cmd().args(["show", "abc"])).code, 5);
    assert_eq!(run(env.cmd().args(["show", "ffffffff"])).code, 5);

    // compact --dry-run and --id take prefixes too; an ambiguous one is exit 5.
    let mut c = env.cmd();
    c.args(["compact", "--dry-run", "--json", &other[..8]]);
    let (doc, _) = json(c);
    assert_eq!(doc["conversations"][0]["id"], other.as_str());
    assert_eq!(
        run(env.cmd().args(["compact", "--dry-run", "--id", "abcd1234"])).code,
        5
    );
    // An unknown ID is not found (exit 5), as in `show`: the one resolver.
    assert_eq!(
        run(env.cmd().args(["compact", "--dry-run", "--id", "ffffffff"])).code,
        5
    );
}

#[test]
fn restore_and_history_take_prefixes() {
    let env = Env::generated(8, 3, &[]);
    let id = env.ids(
        "SELECT c.id FROM conversations c JOIN conversation_summaries s ON s.id = c.id
         WHERE s.message_count >= 20 ORDER BY c.id LIMIT 1",
    )[0]
    .clone();
    let before = env.dump("conversations");
    let out = run(env
        .cmd()
        .args(["compact", &id[..8], "--yes", "--keep-tokens", "1000"]));
    assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);
    let mut c = env.cmd();
    c.args(["history", &id[..8], "--json"]);
    let (doc, _) = json(c);
    assert_eq!(doc["compactions"].as_array().unwrap().len(), 1);
    assert_eq!(doc["compactions"][0]["conversation_id"], id.as_str());
    let out = run(env.cmd().args(["restore", &id[..10]]));
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(env.dump("conversations"), before, "restored byte for byte");
    // Nothing left to restore: nothing to do (0), as documented.
    let out = run(env.cmd().args(["restore", &id[..10]]));
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(out.stderr.contains("nothing to do"), "{}", out.stderr);
}

#[test]
fn quiet_cron_prints_nothing_when_all_went_well() {
    let env = Env::generated(10, 5, &[]);
    // Nothing to do: nothing at all is printed.
    let before = env.files_hash();
    let out = run(env.cmd().args([
        "compact",
        "--all-over",
        "0.99",
        "--idle",
        "0",
        "--yes",
        "-q",
    ]));
    assert_eq!(out.code, 0);
    assert_eq!((out.stdout.as_str(), out.stderr.as_str()), ("", ""));
    assert_eq!(env.files_hash(), before);
    // Work done, all well: still nothing.
    let out = run(env.cmd().args([
        "compact",
        "--all-over",
        "0",
        "--idle",
        "0",
        "--keep-tokens",
        "3000",
        "--yes",
        "-q",
    ]));
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!((out.stdout.as_str(), out.stderr.as_str()), ("", ""));
    let done: i64 = env
        .conn()
        .query_row("SELECT COUNT(*) FROM agent_db_compactions", [], |r| {
            r.get(0)
        })
        .unwrap();
    assert!(done > 0, "the quiet run compacted something");
}

#[test]
fn each_failed_conversation_is_one_line_on_stderr() {
    let env = Env::generated(10, 5, &[]);
    let victims = env.ids(
        "SELECT id FROM conversations WHERE json_extract(usage, '$.maxContextWindow') > 0 ORDER BY id LIMIT 2",
    );
    for v in &victims {
        env.conn()
            .execute(
                "UPDATE conversations SET raw_messages = '[{\"role\":' WHERE id = ?1",
                [v],
            )
            .unwrap();
    }
    for quiet in [true, false] {
        let mut c = env.cmd();
        c.args(["compact", "--dry-run", "--all-over", "0", "--idle", "0"]);
        if quiet {
            c.arg("-q");
        }
        let out = run(&mut c);
        assert_eq!(out.code, 1);
        let errs: Vec<&str> = out
            .stderr
            .lines()
            .filter(|l| l.starts_with("error:"))
            .collect();
        assert_eq!(errs.len(), victims.len(), "quiet={quiet}: {}", out.stderr);
        for v in &victims {
            assert_eq!(errs.iter().filter(|l| l.contains(v.as_str())).count(), 1);
        }
    }
}

fn journal_mode_and_integrity(db: &std::path::Path) -> (String, String) {
    let c = Connection::open(db).unwrap();
    let mode: String = c
        .query_row("PRAGMA journal_mode", [], |r| r.get(0))
        .unwrap();
    let ok: String = c
        .query_row("PRAGMA integrity_check", [], |r| r.get(0))
        .unwrap();
    (mode, ok)
}

fn file_len(p: &std::path::Path) -> u64 {
    std::fs::metadata(p).unwrap().len()
}

#[test]
fn prune_archive_dry_run_writes_nothing_and_vacuum_gives_the_space_back() {
    let env = Env::generated(20, 11, &[]);
    let out = run(env.cmd().args([
        "compact",
        "--all-over",
        "0",
        "--idle",
        "0",
        "--keep-tokens",
        "3000",
        "--yes",
    ]));
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(
        out.stderr.contains("the store grew by about"),
        "{}",
        out.stderr
    );
    // Checkpoint so the file sizes below are the database's own.
    env.conn()
        .query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))
        .unwrap();
    let archived: i64 = env
        .conn()
        .query_row(crate::common::ARCHIVE_BYTES_SQL, [], |r| r.get(0))
        .unwrap();
    assert!(
        archived > 100_000,
        "the fixture archives something sizeable"
    );

    // A day later, everything compacted above is more than an hour old.
    const LATER: &str = "2026-11-02T12:00:00Z";
    let before = env.files_hash();
    let mut c = env.cmd();
    c.env("AGENT_DB_NOW", LATER).args([
        "prune-archive",
        "--older-than",
        "1h",
        "--dry-run",
        "--json",
    ]);
    let (doc, code) = json(c);
    assert_eq!(code, 0);
    assert_eq!(doc["dry_run"], true);
    assert_eq!(doc["pruned"]["bytes"].as_i64(), Some(archived));
    assert_eq!(env.files_hash(), before, "--dry-run wrote nothing");

    // stats agrees with SQL about the archive.
    let mut c = env.cmd();
    c.args(["stats", "--json"]);
    let (st, _) = json(c);
    assert_eq!(st["archive"]["archive_bytes"].as_i64(), Some(archived));
    assert_eq!(st["prune_archive_frees_bytes"].as_i64(), Some(archived));

    // Without a terminal nothing asks; prune, then vacuum.
    let out =
        run(env
            .cmd()
            .env("AGENT_DB_NOW", LATER)
            .args(["prune-archive", "--older-than", "1h"]));
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(
        env.conn()
            .query_row("SELECT COUNT(*) FROM agent_db_archive", [], |r| r
                .get::<_, i64>(0))
            .unwrap(),
        0
    );
    env.conn()
        .query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))
        .unwrap();
    let size_before = file_len(&env.db);
    let free_before: i64 = env
        .conn()
        .query_row("PRAGMA freelist_count", [], |r| r.get(0))
        .unwrap();
    assert!(free_before > 0, "pruning left free pages");
    let rows_before = env.dump("conversations");
    let out = run(env.cmd().arg("vacuum"));
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(out.stdout.contains("quick_check ok"), "{}", out.stdout);
    let size_after = file_len(&env.db);
    assert!(
        size_after < size_before,
        "vacuum shrank the file: {size_before} -> {size_after}"
    );
    let (mode, ok) = journal_mode_and_integrity(&env.db);
    assert_eq!((mode.as_str(), ok.as_str()), ("wal", "ok"));
    assert_eq!(
        env.dump("conversations"),
        rows_before,
        "vacuum kept every row"
    );
}

/// The progress bar is for terminals only: on a store over the bar's 16 MiB, a `vacuum` whose
/// stderr is a pipe prints nothing there and its one usual line on stdout; `--json` likewise.
#[test]
fn vacuum_without_a_terminal_prints_no_progress() {
    let env = Env::generated(6, 2, &[]);
    {
        let c = env.conn();
        c.execute_batch(
            "CREATE TABLE filler (b BLOB);
             WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 600)
             INSERT INTO filler SELECT randomblob(50000) FROM n;
             DELETE FROM filler WHERE rowid % 2 = 0;
             PRAGMA wal_checkpoint(TRUNCATE);",
        )
        .unwrap();
    }
    assert!(file_len(&env.db) > 20 << 20);
    let out = run(env.cmd().arg("vacuum"));
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(out.stderr, "", "nothing on stderr");
    let line = regex_lite_line(&out.stdout);
    assert!(line, "{:?}", out.stdout);
    let out = run(env.cmd().args(["vacuum", "--json"]));
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(out.stderr, "", "nothing on stderr");
    let doc: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(doc["vacuum"]["integrity_check"], "ok");
}

/// `vacuumed: A → B (N free pages given back); journal_mode wal, quick_check ok` and nothing else.
fn regex_lite_line(stdout: &str) -> bool {
    let Some(rest) = stdout.strip_prefix("vacuumed: ") else {
        return false;
    };
    rest.ends_with(" free pages given back); journal_mode wal, quick_check ok\n")
        && rest.matches('\n').count() == 1
        && rest.contains(" → ")
}

#[test]
fn vacuum_is_refused_while_the_store_is_in_use() {
    let env = Env::generated(6, 2, &[]);
    let main_file = || std::fs::read(&env.db).unwrap();
    let before = main_file();
    // Another process (here: this test's own connection, idle after one read) has the store
    // open. Nothing in this process may open and close the store's files meanwhile: closing any
    // descriptor on them would drop this process's POSIX locks, SQLite's included.
    let other = Connection::open(&env.db).unwrap();
    let _: i64 = other
        .query_row("SELECT COUNT(*) FROM conversations", [], |r| r.get(0))
        .unwrap();
    // Busy, as every command reports another process's lock (exit 9).
    let out = run(env.cmd().arg("vacuum"));
    assert_eq!(out.code, 9, "{}", out.stderr);
    assert!(
        out.stderr.contains(": busy: ") && out.stderr.contains("holds a lock on it"),
        "{}",
        out.stderr
    );
    drop(other);
    assert!(main_file() == before, "a refused vacuum changed the file");
    // Another agent-db run holds the lock: 6.
    let lock = agent_db::store::lock::acquire(&env.db).unwrap();
    assert_eq!(run(env.cmd().arg("vacuum")).code, 6);
    drop(lock);
    assert_eq!(run(env.cmd().arg("vacuum")).code, 0);
}

/// A home with both agents' default stores.
fn two_agents() -> tempfile::TempDir {
    use agent_db_synth::docker_agent::{generate_docker_agent, Generation};
    let home = tempfile::tempdir().unwrap();
    let cagent = home.path().join(".cagent");
    std::fs::create_dir_all(&cagent).unwrap();
    let opts = agent_db_synth::SynthOptions {
        conversations: 3,
        ..Default::default()
    };
    generate_docker_agent(&cagent.join("session.db"), &opts, Generation::Modern).unwrap();
    let kodelet = home.path().join(".kodelet");
    std::fs::create_dir_all(&kodelet).unwrap();
    drop(agent_db_synth::kodelet_schema::create(&kodelet.join("storage.db")).unwrap());
    home
}

#[test]
fn agent_flag_and_config_key_choose_the_store() {
    let home = two_agents();
    let out = run(bare_cmd(home.path()).arg("list"));
    assert_eq!(out.code, 4);
    for flag in ["--agent kodelet", "--agent docker-agent", "--db PATH"] {
        assert!(out.stderr.contains(flag), "{flag}: {}", out.stderr);
    }
    for (agent, kind) in [("kodelet", "kodelet"), ("docker-agent", "docker-agent")] {
        let mut c = bare_cmd(home.path());
        c.args(["--agent", agent, "list", "--json"]);
        let (doc, code) = json(c);
        assert_eq!(code, 0);
        assert_eq!(doc["store"]["kind"], kind);
    }
    let cfg = home.path().join(".config/agent-db");
    std::fs::create_dir_all(&cfg).unwrap();
    std::fs::write(
        cfg.join("config.toml"),
        "[store]\nagent = \"docker-agent\"\n",
    )
    .unwrap();
    let mut c = bare_cmd(home.path());
    c.args(["list", "--json"]);
    let (doc, code) = json(c);
    assert_eq!(code, 0);
    assert_eq!(doc["store"]["kind"], "docker-agent");
    // The flag wins over the config key.
    let mut c = bare_cmd(home.path());
    c.args(["--agent", "kodelet", "list", "--json"]);
    assert_eq!(json(c).0["store"]["kind"], "kodelet");
    std::fs::write(cfg.join("config.toml"), "[store]\nagent = \"claude\"\n").unwrap();
    let out = run(bare_cmd(home.path()).arg("config"));
    assert_eq!(out.code, 3, "{}", out.stderr);
    assert!(out.stderr.contains("[store] agent"), "{}", out.stderr);
}

#[test]
fn show_last_n() {
    let env = Env::generated(4, 9, &[]);
    let id = env.ids("SELECT id FROM conversations ORDER BY id LIMIT 1")[0].clone();
    let mut c = env.cmd();
    c.args(["show", &id, "--json"]);
    let (all, _) = json(c);
    let n = all["messages"].as_array().unwrap().len();
    assert!(n >= 3);
    let mut c = env.cmd();
    c.args(["show", &id, "--json", "--last", "2"]);
    let (last, _) = json(c);
    assert_eq!(last["first_index"], n - 2);
    assert_eq!(
        last["messages"].as_array().unwrap()[..],
        all["messages"].as_array().unwrap()[n - 2..]
    );
    let out = run(env.cmd().args(["show", &id, "--last", "2"]));
    assert_eq!(out.code, 0);
    assert!(out.stdout.contains(&format!("── [{}] ", n - 1)));
    assert!(out.stdout.contains(&format!("── [{}] ", n - 2)));
    assert!(!out.stdout.contains("── [0] "));
    assert!(out
        .stdout
        .contains(&format!("… {} earlier message(s) not shown", n - 2)));
}

#[test]
fn colour_only_on_a_terminal_or_when_asked() {
    let env = Env::generated(4, 9, &[]);
    let plain = run(env.cmd().arg("list"));
    assert!(!plain.stdout.contains('\x1b'), "piped: no colour");
    let forced = run(env.cmd().args(["--color", "always", "list"]));
    assert!(forced.stdout.contains("\x1b["), "--color always");
    let mut c = crate::common::std_cmd(env.dir.path());
    c.arg("--db").arg(&env.db).arg("list");
    let tty = crate::pty::run(c, 120);
    assert!(tty.stdout.contains("\x1b["), "a terminal gets colour");
    let mut c = crate::common::std_cmd(env.dir.path());
    c.arg("--db").arg(&env.db).arg("list").env("NO_COLOR", "1");
    assert!(!crate::pty::run(c, 120).stdout.contains('\x1b'), "NO_COLOR");
    let mut c = crate::common::std_cmd(env.dir.path());
    c.arg("--db")
        .arg(&env.db)
        .args(["--color", "never", "list"]);
    assert!(
        !crate::pty::run(c, 120).stdout.contains('\x1b'),
        "--color never"
    );
}

#[test]
fn every_subcommand_has_examples_and_the_man_page_builds() {
    let home = tempfile::tempdir().unwrap();
    for sub in [
        "init",
        "list",
        "show",
        "compact",
        "history",
        "restore",
        "prune-archive",
        "stats",
        "vacuum",
        "config",
        "hooks",
        "recipes",
        "completions",
        "man",
    ] {
        let out = run(bare_cmd(home.path()).args([sub, "--help"]));
        assert_eq!(out.code, 0, "{sub}");
        assert!(
            out.stdout.contains("Examples:\n  agent-db"),
            "{sub} --help:\n{}",
            out.stdout
        );
    }
    // The global options are in the top-level help; a subcommand's help points there.
    let out = run(bare_cmd(home.path()).arg("--help"));
    let global = out.stdout.find("Global options:").expect("global heading");
    assert!(out.stdout[global..].contains("--db"));
    let out = run(bare_cmd(home.path()).args(["compact", "--help"]));
    let selectors = out.stdout.find("Selectors:").expect("selectors heading");
    assert!(out.stdout[selectors..].contains("--all-over"));
    assert!(!out.stdout.contains("Global options:"));
    let out = run(bare_cmd(home.path()).arg("man"));
    assert_eq!(out.code, 0);
    assert!(
        out.stdout.starts_with(".ie") || out.stdout.contains(".TH agent-db"),
        "{}",
        &out.stdout[..200.min(out.stdout.len())]
    );
}

#[test]
fn hook_timeout_takes_plain_seconds() {
    let env = Env::generated(3, 1, &[]);
    let out = run(env
        .cmd()
        .args(["compact", "--follow", "--dry-run", "--hook-timeout", "5"]));
    assert_eq!(out.code, 0, "{}", out.stderr);
    let out = run(env
        .cmd()
        .args(["compact", "--follow", "--dry-run", "--hook-timeout", "five"]));
    assert_eq!(out.code, 2);
    // The environment and the config file take plain seconds too.
    let mut c = env.cmd();
    c.env("AGENT_DB_HOOK_TIMEOUT", "5")
        .args(["config", "--json"]);
    let (doc, code) = json(c);
    assert_eq!(code, 0);
    assert_eq!(doc["settings"]["hook_timeout"], "5s");
}

#[test]
fn follow_names_the_conversation_it_picked() {
    let env = Env::generated(5, 4, &[]);
    let mut c = env.cmd();
    c.args(["compact", "--follow", "--dry-run", "--json"]);
    let (doc, _) = json(c);
    let id = doc["conversations"][0]["id"].as_str().unwrap().to_string();
    let name: String = env
        .conn()
        .query_row(
            "SELECT summary FROM conversations WHERE id = ?1",
            [&id],
            |r| r.get(0),
        )
        .unwrap();
    let out = run(env.cmd().args(["compact", "--follow", "--dry-run"]));
    let line = out
        .stderr
        .lines()
        .find(|l| l.starts_with("--follow picked"))
        .unwrap_or_else(|| panic!("{}", out.stderr));
    assert!(line.contains(&id), "{line}");
    let head: String = name.chars().take(20).collect();
    assert!(line.contains(head.trim()), "{line} / {name}");
}

#[test]
fn list_json_has_rfc3339_utc_times() {
    let env = Env::generated(4, 9, &[]);
    let mut c = env.cmd();
    c.args(["list", "--json"]);
    let (doc, _) = json(c);
    for r in crate::common::all_rows(&doc) {
        let raw = r["updated_at"].as_str().unwrap();
        let utc = r["updated_at_utc"].as_str().unwrap();
        let parsed = chrono::DateTime::parse_from_rfc3339(utc).expect("RFC 3339");
        assert!(utc.ends_with('Z'), "{utc}");
        assert_eq!(
            parsed,
            agent_db::gotime::parse(raw).unwrap(),
            "{raw} = {utc}"
        );
    }
}

#[test]
fn show_pages_on_a_terminal_only() {
    let env = Env::generated(3, 9, &[]);
    let id = env.ids("SELECT id FROM conversations ORDER BY id LIMIT 1")[0].clone();
    // A pager that marks every line it shows, run on a real terminal.
    let paged = |extra: &[&str]| {
        let mut c = crate::common::std_cmd(env.dir.path());
        c.arg("--db")
            .arg(&env.db)
            .args(["show", &id])
            .args(extra)
            .env("PAGER", "sed s/^/PAGED:/");
        crate::pty::run(c, 100)
    };
    let out = paged(&[]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(
        out.stdout.lines().all(|l| l.starts_with("PAGED:")),
        "every line went through $PAGER:\n{}",
        out.stdout
    );
    assert!(out.stdout.contains(&format!("PAGED:conversation {id}")));
    let out = paged(&["--no-pager"]);
    assert!(
        out.stdout.starts_with(&format!("conversation {id}")),
        "{}",
        out.stdout
    );
    assert!(!out.stdout.contains("PAGED:"));
    // Piped: never paged.
    let out = run(env
        .cmd()
        .env("PAGER", "sed s/^/PAGED:/")
        .args(["show", &id]));
    assert!(!out.stdout.contains("PAGED:") && out.stdout.starts_with("conversation "));
}

/// Every agent agent-db supports, with the file name of its default store (docs/usage.md).
const AGENTS: [(&str, &str); 4] = [
    ("kodelet", ".kodelet/storage.db"),
    ("docker-agent", ".cagent/session.db"),
    ("goose", "goose/sessions/sessions.db"),
    ("opencode", "opencode/opencode.db"),
];

fn with_no_store(home: &std::path::Path) -> assert_cmd::Command {
    let mut c = bare_cmd(home);
    for var in [
        "XDG_DATA_HOME",
        "GOOSE_PATH_ROOT",
        "OPENCODE_DB",
        "KILO_DB",
        "CRUSH_GLOBAL_DATA",
    ] {
        c.env_remove(var);
    }
    c
}

/// `--help` and the error for a missing store name every supported agent and its default file
/// (they once named kodelet and docker-agent only, after goose and opencode were supported).
#[test]
fn help_and_the_missing_store_error_name_every_agent() {
    let home = tempfile::tempdir().unwrap();
    let out = with_no_store(home.path()).arg("--help").output().unwrap();
    let help = String::from_utf8(out.stdout).unwrap();
    for (agent, file) in AGENTS {
        assert!(
            help.contains(agent) && help.contains(file),
            "{agent} {file}:\n{help}"
        );
    }
    let out = with_no_store(home.path()).arg("list").output().unwrap();
    assert_eq!(out.status.code(), Some(4));
    let err = String::from_utf8_lossy(&out.stderr);
    let agents: Vec<&str> = AGENTS.iter().map(|(a, _)| *a).collect();
    assert!(
        err.contains(&format!("--agent {}", agents.join("|"))),
        "{err}"
    );
    for (_, file) in AGENTS {
        assert!(err.contains(file), "{file}:\n{err}");
    }
}

/// `[store] agent` takes every supported agent (it once refused "goose" and "opencode" with a
/// config error, exit 3), and an unknown one is refused naming them all.
#[test]
fn the_config_key_chooses_goose_and_opencode_stores() {
    use agent_db_synth::goose::{generate_goose, GooseSchema};
    use agent_db_synth::opencode::{generate_opencode, OpencodeEra};
    let home = tempfile::tempdir().unwrap();
    let data = home.path().join(".local/share");
    let opts = agent_db_synth::SynthOptions {
        conversations: 2,
        ..Default::default()
    };
    let goose = data.join("goose/sessions");
    std::fs::create_dir_all(&goose).unwrap();
    generate_goose(
        &goose.join("sessions.db"),
        &opts,
        &GooseSchema::preset("goose").unwrap(),
    )
    .unwrap();
    let opencode = data.join("opencode");
    std::fs::create_dir_all(&opencode).unwrap();
    generate_opencode(
        &opencode.join("opencode.db"),
        &opts,
        OpencodeEra::preset("opencode").unwrap(),
    )
    .unwrap();
    let cfg = home.path().join(".config/agent-db");
    std::fs::create_dir_all(&cfg).unwrap();
    // Both default stores exist: without a choice, agent-db asks for one.
    let out = run(with_no_store(home.path()).arg("list"));
    assert_eq!(out.code, 4, "{}", out.stderr);
    assert!(
        out.stderr.contains("--agent goose") && out.stderr.contains("--agent opencode"),
        "{}",
        out.stderr
    );
    for agent in ["goose", "opencode"] {
        std::fs::write(
            cfg.join("config.toml"),
            format!("[store]\nagent = \"{agent}\"\n"),
        )
        .unwrap();
        let mut c = with_no_store(home.path());
        c.args(["list", "--json"]);
        let (doc, code) = json(c);
        assert_eq!(code, 0, "{agent}: {doc}");
        assert_eq!(doc["store"]["kind"], agent);
    }
    std::fs::write(cfg.join("config.toml"), "[store]\nagent = \"claude\"\n").unwrap();
    let out = run(with_no_store(home.path()).arg("config"));
    assert_eq!(out.code, 3, "{}", out.stderr);
    for agent in ["kodelet", "docker-agent", "goose", "opencode"] {
        assert!(
            out.stderr.contains(&format!("\"{agent}\"")),
            "{agent}: {}",
            out.stderr
        );
    }
}

/// `stores` finds every agent's default file and reports each one's schema version against the
/// newest agent-db knows; a goose file one version newer is reported unsupported, and nothing
/// is written to any of them.
#[test]
fn stores_reports_every_agents_default_file() {
    use agent_db_synth::docker_agent::{generate_docker_agent, Generation};
    use agent_db_synth::goose::{generate_goose, GooseSchema};
    use agent_db_synth::opencode::{generate_opencode, OpencodeEra};
    let home = tempfile::tempdir().unwrap();
    let data = home.path().join(".local/share");
    let opts = agent_db_synth::SynthOptions {
        conversations: 2,
        ..Default::default()
    };
    let kodelet = home.path().join(".kodelet");
    std::fs::create_dir_all(&kodelet).unwrap();
    agent_db_synth::generate(&kodelet.join("storage.db"), &opts).unwrap();
    let cagent = home.path().join(".cagent");
    std::fs::create_dir_all(&cagent).unwrap();
    generate_docker_agent(&cagent.join("session.db"), &opts, Generation::Modern).unwrap();
    let goose = data.join("goose/sessions");
    std::fs::create_dir_all(&goose).unwrap();
    let goose_db = goose.join("sessions.db");
    generate_goose(&goose_db, &opts, &GooseSchema::preset("goose").unwrap()).unwrap();
    let opencode = data.join("opencode");
    std::fs::create_dir_all(&opencode).unwrap();
    generate_opencode(
        &opencode.join("opencode.db"),
        &opts,
        OpencodeEra::preset("opencode").unwrap(),
    )
    .unwrap();
    // Kilo's default file from Kilo 7.7.9's own DDL, and Crush's project file in the current
    // directory from Crush's migrations.
    crate::kilo::kilo_store(&data.join("kilo/kilo.db"));
    let project = home.path().join("project");
    std::fs::create_dir_all(project.join(".crush")).unwrap();
    crate::crush::build(&project.join(".crush/crush.db"), crate::crush::NEWEST_MAIN);
    let mut c = with_no_store(home.path());
    c.current_dir(&project).args(["stores", "--json"]);
    let (doc, code) = json(c);
    assert_eq!(code, 0, "{doc:#}");
    let rows = doc["stores"].as_array().unwrap();
    let agents: Vec<&str> = rows.iter().map(|r| r["agent"].as_str().unwrap()).collect();
    assert_eq!(
        agents,
        [
            "kodelet",
            "docker-agent",
            "goose",
            "opencode",
            "kilo",
            "crush"
        ],
        "{doc:#}"
    );
    for r in rows {
        assert_eq!(r["support"], "read-write", "{r:#}");
        assert!(
            r["schema_version"].is_string() && r["newest_known"].is_string(),
            "{r:#}"
        );
        assert!(r["how"].as_str().unwrap().ends_with(" default"), "{r:#}");
    }
    // The goose file as a newer goose would leave it.
    let newest: i64 = rows[2]["newest_known"].as_str().unwrap().parse().unwrap();
    rusqlite::Connection::open(&goose_db)
        .unwrap()
        .execute(
            "INSERT INTO schema_version(version, applied_at) VALUES (?1, '2026-12-01 00:00:00')",
            [newest + 1],
        )
        .unwrap();
    let before = crate::common::files_hash(&goose_db);
    let mut c = with_no_store(home.path());
    c.args(["stores", "--json"]);
    let (doc, _) = json(c);
    let g = &doc["stores"][2];
    assert_eq!(g["agent"], "goose");
    assert_eq!(g["support"], "unsupported", "{g:#}");
    assert!(
        g["detail"]
            .as_str()
            .unwrap()
            .contains(&format!("{}", newest + 1)),
        "{g:#}"
    );
    assert_eq!(crate::common::files_hash(&goose_db), before);
    let out = with_no_store(home.path()).arg("stores").output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    for word in [
        "AGENT",
        "SUPPORT",
        "kodelet",
        "docker-agent",
        "goose",
        "opencode",
        "unsupported",
    ] {
        assert!(text.contains(word), "{word}: {text}");
    }
}

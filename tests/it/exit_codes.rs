//! The exit-code table in docs/usage.md against the binary: every code in the table is produced
//! by at least one real case run here, and every code in `src/error.rs`'s `exit` module is in
//! the table. Both files are parsed as text, so neither side can drift unnoticed.

use std::collections::{BTreeMap, BTreeSet};

use crate::common::Env;

/// Codes the table documents that no CLI input can produce on purpose. 8 (internal error) means
/// a bug in agent-db, such as a caught panic: a test that could trigger it would be a bug
/// report, so it is checked for presence in the table only.
const NOT_TRIGGERABLE: &[i32] = &[8];

fn manifest(path: &str) -> String {
    std::fs::read_to_string(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(path))
        .unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// `| 0 | OK | … |` rows of the table under `## Exit codes`.
fn documented() -> BTreeMap<i32, String> {
    let doc = manifest("docs/usage.md");
    let section = doc
        .split("\n## Exit codes\n")
        .nth(1)
        .expect("docs/usage.md has an Exit codes section");
    let section = section.split("\n## ").next().unwrap();
    section
        .lines()
        .filter_map(|l| {
            let cells: Vec<&str> = l.split('|').map(str::trim).collect();
            let code = cells.get(1)?.parse::<i32>().ok()?;
            Some((code, cells.get(2)?.to_string()))
        })
        .collect()
}

/// `pub const NAME: i32 = N;` inside `pub mod exit { … }` of src/error.rs.
fn in_binary() -> BTreeMap<i32, String> {
    let src = manifest("src/error.rs");
    let module = src.split("pub mod exit {").nth(1).expect("exit module");
    let module = module.split("\n}").next().unwrap();
    module
        .lines()
        .filter_map(|l| {
            let l = l.trim().strip_prefix("pub const ")?;
            let (name, rest) = l.split_once(": i32 = ")?;
            Some((rest.trim_end_matches(';').parse().ok()?, name.to_string()))
        })
        .collect()
}

fn code(c: &mut assert_cmd::Command) -> i32 {
    let out = c.output().expect("run");
    let s = String::from_utf8_lossy(&out.stderr);
    assert!(!s.contains("panicked"), "{s}");
    out.status.code().unwrap_or(-1)
}

/// Each documented case: (what, the code the docs promise, the code the binary gave).
fn cases() -> Vec<(&'static str, i32, i32)> {
    let env = Env::generated(8, 21, &[]);
    let id = env.ids("SELECT id FROM conversations ORDER BY id LIMIT 1")[0].clone();
    let mut v = Vec::new();
    let mut case = |what: &'static str, want: i32, got: i32| v.push((what, want, got));

    case("list", 0, code(env.cmd().arg("list")));
    case(
        "compact --dry-run, nothing to do",
        0,
        code(env.cmd().args(["compact", "--dry-run", "--all-over", "1"])),
    );
    case(
        "compact --id of a conversation that does not exist",
        5,
        code(env.cmd().args([
            "compact",
            "--dry-run",
            "--id",
            "ffffffff-0000-4000-8000-000000000000",
        ])),
    );
    case(
        "compact without a selector",
        2,
        code(env.cmd().arg("compact")),
    );
    case(
        "an unknown flag",
        2,
        code(env.cmd().args(["list", "--frobnicate"])),
    );
    case(
        "--hook-timeout that is not a duration",
        2,
        code(
            env.cmd()
                .args(["compact", "--follow", "--dry-run", "--hook-timeout", "soon"]),
        ),
    );
    case(
        "an unparseable AGENT_DB_NOW",
        3,
        code(env.cmd().env("AGENT_DB_NOW", "yesterday").arg("list")),
    );
    let bad_cfg = env.file("bad.toml", b"[nope]\n");
    case(
        "a config file with an unknown section",
        3,
        code(env.cmd().arg("--config").arg(&bad_cfg).arg("config")),
    );
    let not_sqlite = env.file("notes.db", b"just some text, not a database at all");
    case(
        "--db naming a file that is not SQLite",
        4,
        code(
            crate::common::bare_cmd(env.dir.path())
                .arg("--db")
                .arg(&not_sqlite)
                .arg("list"),
        ),
    );
    case(
        "--db naming a missing file",
        4,
        code(crate::common::bare_cmd(env.dir.path()).args(["--db", "/nonexistent/x.db", "list"])),
    );
    case(
        "show of an unknown conversation",
        5,
        code(env.cmd().args(["show", "ffffffff"])),
    );
    case(
        "restore --compaction N not in the audit log",
        5,
        code(env.cmd().args(["restore", &id, "--compaction", "999"])),
    );
    case(
        "restore ID with nothing to restore",
        5,
        code(env.cmd().args(["restore", &id])),
    );
    {
        let _lock = agent_db::store::lock::acquire(&env.db).unwrap();
        case(
            "compact while another agent-db run holds the lock",
            6,
            code(env.cmd().args(["compact", "--id", &id, "--yes"])),
        );
    }
    // Compact, restore, then restore the same compaction again: refused.
    let big = env.ids(
        "SELECT c.id FROM conversations c JOIN conversation_summaries s ON s.id = c.id
         WHERE s.message_count >= 20 ORDER BY c.id LIMIT 1",
    )[0]
    .clone();
    let keep = ["--keep-tokens", "500"];
    {
        // Another process holds SQLite's write lock for longer than the (shortened) wait.
        let holder = rusqlite::Connection::open(&env.db).unwrap();
        holder.execute_batch("BEGIN IMMEDIATE").unwrap();
        case(
            "compact while another process holds the store's write lock",
            9,
            code(
                env.cmd()
                    .args(["compact", "--id", &big, "--yes"])
                    .args(keep)
                    .env("AGENT_DB_BUSY_WAIT", "300ms"),
            ),
        );
        holder.execute_batch("ROLLBACK").unwrap();
    }
    assert_eq!(
        code(
            env.cmd()
                .args(["compact", "--id", &big, "--yes"])
                .args(keep)
        ),
        0
    );
    // The summarizer cannot be reached (a closed loopback port): that conversation fails.
    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    case(
        "compact whose summarizer cannot be reached",
        1,
        code(env.cmd().args([
            "compact",
            &big,
            "--keep-tokens",
            "0",
            "--force",
            "--llm-provider",
            "openai",
            "--base-url",
            &format!("http://127.0.0.1:{closed}/v1"),
        ])),
    );
    assert_eq!(code(env.cmd().args(["restore", &big])), 0);
    case(
        "restore --compaction N already restored: nothing to do",
        0,
        code(env.cmd().args(["restore", &big, "--compaction", "1"])),
    );
    // Compacted again, its archive pruned: that restore is refused.
    assert_eq!(
        code(
            env.cmd()
                .args(["compact", &big, "--keep-tokens", "0", "--force"])
        ),
        0
    );
    assert_eq!(
        code(env.cmd().env("AGENT_DB_NOW", "2026-11-02T12:00:00Z").args([
            "prune-archive",
            "--older-than",
            "1s",
            "--yes"
        ])),
        0
    );
    case(
        "restore of a compaction whose archive was pruned",
        7,
        code(env.cmd().args(["restore", &big])),
    );
    {
        let env = Env::generated(16, 21, &[]);
        let ids = crate::interrupt::four_to_compact(&env);
        let (out, _) = crate::interrupt::interrupted_compaction(&env, &ids);
        case(
            "compact interrupted by Ctrl-C (SIGINT)",
            130,
            out.status.code().unwrap_or(-1),
        );
    }
    let other = rusqlite::Connection::open(&env.db).unwrap();
    let _: i64 = other.query_row("SELECT 1", [], |r| r.get(0)).unwrap();
    case(
        "vacuum while another process has the store open",
        9,
        code(env.cmd().arg("vacuum")),
    );
    v
}

#[test]
fn documented_exit_codes_match_the_binary() {
    let table = documented();
    let binary = in_binary();
    assert!(table.len() >= 8, "parsed the table: {table:?}");
    for (code, name) in &binary {
        assert!(
            table.contains_key(code),
            "exit code {code} ({name}) of src/error.rs is missing from docs/usage.md"
        );
    }
    let cases = cases();
    let mut covered = BTreeSet::new();
    for (what, want, got) in &cases {
        assert!(table.contains_key(want), "{what}: {want} is not documented");
        assert_eq!(
            got, want,
            "{what}: documented {want}, the binary exits {got}"
        );
        covered.insert(*want);
    }
    for code in table.keys() {
        assert!(
            covered.contains(code) || NOT_TRIGGERABLE.contains(code),
            "documented exit code {code} ({}) has no case producing it",
            table[code]
        );
    }
    for code in NOT_TRIGGERABLE {
        assert!(table.contains_key(code), "{code} must still be documented");
    }
}

/// `N meaning` items of the "Exit codes:" paragraph that closes `agent-db --help`.
fn in_help() -> BTreeSet<i32> {
    let out = crate::common::bare_cmd(tempfile::tempdir().unwrap().path())
        .arg("--help")
        .output()
        .unwrap();
    let help = String::from_utf8(out.stdout).unwrap();
    let para = help
        .split("Exit codes:")
        .nth(1)
        .expect("--help has an Exit codes paragraph");
    para.split(',')
        .filter_map(|item| item.split_whitespace().next()?.parse().ok())
        .collect()
}

/// The help's one-line summary of exit codes names exactly the codes the docs' table does.
#[test]
fn the_help_lists_the_documented_exit_codes() {
    let table: BTreeSet<i32> = documented().keys().copied().collect();
    assert_eq!(in_help(), table);
}

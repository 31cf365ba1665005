//! Flags that mean what they say, errors that are the same in every command (issue 41): the
//! table "Behaviour by command" of docs/usage.md checked cell by cell against the binary, every
//! hint's flags against the command that prints it, busy stores, unknown and ambiguous IDs,
//! `--quiet`, `--dry-run` on every writing command, explicit LLM flags, restore and history.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use agent_db_synth::opencode::{generate_opencode, OpencodeEra};
use agent_db_synth::SynthOptions;
use rusqlite::Connection;

use crate::common::{bare_cmd, Env, NOW};

struct Out {
    code: i32,
    stdout: String,
    stderr: String,
}

fn run(c: &mut assert_cmd::Command) -> Out {
    let o = c.output().expect("run");
    let out = Out {
        code: o.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
    };
    assert!(!out.stderr.contains("panicked"), "{}", out.stderr);
    out
}

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Two conversations whose IDs share their first 8 characters (both kodelet tables).
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

/// Conversations not renamed by [`twins`] with at least 10 messages (they compact), longest
/// first.
fn others(env: &Env) -> Vec<String> {
    env.ids(
        "SELECT c.id FROM conversations c JOIN conversation_summaries s ON s.id = c.id
         WHERE c.id NOT LIKE 'abcd%' AND s.message_count >= 10
         ORDER BY s.message_count DESC, c.id",
    )
}

/// The long flags `agent-db [sub] --help` lists, plus the global ones.
fn flags_of(sub: &str) -> BTreeSet<String> {
    let home = tempfile::tempdir().unwrap();
    let mut out = BTreeSet::new();
    for args in [vec![], vec![sub]] {
        let o = bare_cmd(home.path())
            .args(&args)
            .arg("--help")
            .env("COLUMNS", "10000")
            .output()
            .unwrap();
        assert!(o.status.success(), "{args:?} --help");
        for line in String::from_utf8_lossy(&o.stdout).lines() {
            let t = line.trim_start();
            if t.starts_with('-') {
                for w in t.split([' ', ',', '=', '[', '<']) {
                    if let Some(f) = w.strip_prefix("--").filter(|f| !f.is_empty()) {
                        out.insert(f.to_string());
                    }
                }
            }
        }
    }
    out
}

/// `--flag` names in `text` (an option is letters, digits and dashes after two dashes).
fn flags_in(text: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let b = text.as_bytes();
    let mut i = 0;
    while i + 2 < b.len() {
        let before_ok = i == 0 || !(b[i - 1].is_ascii_alphanumeric() || b[i - 1] == b'-');
        if before_ok && b[i] == b'-' && b[i + 1] == b'-' && b[i + 2].is_ascii_lowercase() {
            let mut j = i + 2;
            while j < b.len()
                && (b[j].is_ascii_lowercase() || b[j].is_ascii_digit() || b[j] == b'-')
            {
                j += 1;
            }
            out.insert(text[i + 2..j].trim_end_matches('-').to_string());
            i = j;
        } else {
            i += 1;
        }
    }
    out
}

// ---------------------------------------------------------------------------------------------
// The table of docs/usage.md

/// `| command | busy | unknown | ambiguous | quiet | json |` rows under "## Behaviour by command".
fn documented_table() -> BTreeMap<String, Vec<String>> {
    let doc = std::fs::read_to_string(root().join("docs/usage.md")).unwrap();
    let section = doc
        .split("\n## Behaviour by command\n")
        .nth(1)
        .expect("docs/usage.md has a 'Behaviour by command' section");
    let section = section.split("\n## ").next().unwrap();
    section
        .lines()
        .filter_map(|l| {
            let cells: Vec<String> = l
                .trim()
                .strip_prefix('|')?
                .strip_suffix('|')?
                .split('|')
                .map(|c| c.trim().trim_matches('`').to_string())
                .collect();
            (cells.len() == 6 && !cells[0].starts_with("---") && cells[0] != "Command")
                .then(|| (cells[0].clone(), cells[1..].to_vec()))
        })
        .collect()
}

const ALL_COMMANDS: [&str; 18] = [
    "list",
    "show",
    "compact",
    "apply",
    "history",
    "restore",
    "prune-archive",
    "reclaim",
    "retire",
    "stats",
    "vacuum",
    "init",
    "config",
    "stores",
    "hooks",
    "recipes",
    "completions",
    "man",
];

/// The busy error every command prints, naming this test's process as the lock's holder.
fn busy_line(db: &Path) -> String {
    format!(
        "error: {}: busy: process {} ({}) holds a lock on it; nothing was left half-written, rerun later",
        db.display(),
        std::process::id(),
        std::fs::read_to_string("/proc/self/comm").unwrap().trim()
    )
}

/// A store ready for every command: two conversations with one prefix, one compacted (so
/// `restore` has something), a plan for another (so `apply` has one).
struct Stage {
    env: Env,
    compacted: String,
    planned: String,
    plan: PathBuf,
}

fn stage() -> Stage {
    let env = Env::generated(16, 41, &[]);
    twins(&env);
    let o = others(&env);
    let (compacted, planned) = (o[0].clone(), o[1].clone());
    let out = run(env
        .cmd()
        .args(["compact", &compacted, "--keep-tokens", "0", "--quiet"]));
    assert_eq!(out.code, 0, "{}", out.stderr);
    let plan = env.dir.path().join("plan.json");
    let out = run(env
        .cmd()
        .args(["compact", &planned, "--keep-tokens", "0", "--plan-out"])
        .arg(&plan));
    assert_eq!(out.code, 0, "{}", out.stderr);
    Stage {
        env,
        compacted,
        planned,
        plan,
    }
}

/// The command line of `command` for a case: `id` where the command takes one; the rest a
/// successful run's.
fn line(command: &str, s: &Stage, id: &str) -> Vec<String> {
    let v = |a: &[&str]| a.iter().map(|x| x.to_string()).collect::<Vec<_>>();
    match command {
        "list" => v(&["list", "--id", id]),
        "show" => v(&["show", id, "--no-pager"]),
        "compact" => v(&["compact", id, "--keep-tokens", "0", "--yes"]),
        "apply" => v(&["apply", &s.plan.display().to_string()]),
        "history" => v(&["history", id]),
        "restore" => v(&["restore", id]),
        "prune-archive" => v(&["prune-archive", "--older-than", "1s", "--yes"]),
        "reclaim" => v(&["reclaim", "--yes"]),
        "retire" => v(&["retire", id, "--yes"]),
        "stats" => v(&["stats"]),
        "vacuum" => v(&["vacuum"]),
        "init" => v(&["init"]),
        "config" => v(&["config"]),
        "stores" => v(&["stores"]),
        "hooks" => v(&["hooks"]),
        "recipes" => v(&["recipes"]),
        "completions" => v(&["completions", "bash"]),
        "man" => v(&["man"]),
        other => panic!("no case for {other}"),
    }
}

/// The conversation a successful run of `command` is about: `restore` and `history` the
/// compacted one, `compact` one of its own (the plan's must stay as planned for `apply`).
fn case_id(command: &str, s: &Stage) -> String {
    match command {
        "restore" | "history" => s.compacted.clone(),
        "compact" => others(&s.env)
            .into_iter()
            .find(|i| *i != s.compacted && *i != s.planned)
            .unwrap(),
        // Another one than compact's: retired, it leaves the store.
        "retire" => others(&s.env)
            .into_iter()
            .rev()
            .find(|i| *i != s.compacted && *i != s.planned)
            .unwrap(),
        _ => s.planned.clone(),
    }
}

/// A config directory holding one observing hook (`agent-db/hooks/10-observe`).
fn one_hook(under: &Path) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let dir = under.join("hooks-config");
    let hooks = dir.join("agent-db/hooks");
    std::fs::create_dir_all(&hooks).unwrap();
    let exe = hooks.join("10-observe");
    std::fs::write(
        &exe,
        "#!/bin/sh\ncase \"$1\" in\nhook) echo after_compaction ;;\nrun) echo '{}' ;;\n*) exit 1 ;;\nesac\n",
    )
    .unwrap();
    std::fs::set_permissions(&exe, std::fs::Permissions::from_mode(0o755)).unwrap();
    dir
}

/// Commands that take a conversation ID, and those that use the store at all.
const TAKES_ID: [&str; 6] = ["list", "show", "compact", "history", "restore", "retire"];
const NO_STORE: [&str; 6] = ["init", "config", "hooks", "recipes", "completions", "man"];

/// `agent-db` on the stage's store, the clock a day on (so `prune-archive --older-than 1s`
/// has the compaction to prune); `init` gets a new file of its own.
fn cmd(s: &Stage, args: &[String]) -> assert_cmd::Command {
    let mut c = bare_cmd(s.env.dir.path());
    if args[0] == "init" {
        let fresh = s.env.dir.path().join(format!(
            "new-{}.db",
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos()
        ));
        c.arg("--db").arg(fresh);
    } else {
        c.arg("--db").arg(&s.env.db);
    }
    c.env("AGENT_DB_NOW", "2026-11-02T12:00:00Z").args(args);
    c
}

#[test]
fn the_behaviour_table_of_usage_md_is_the_binarys() {
    let doc = documented_table();
    assert_eq!(
        doc.keys().cloned().collect::<BTreeSet<_>>(),
        ALL_COMMANDS.iter().map(|c| c.to_string()).collect(),
        "the table has one row per command"
    );
    let mut got: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let dash = || "-".to_string();

    // Busy: this process holds SQLite's write lock on the store (a write transaction left
    // open) while every command runs. Nothing in this process may open the store's files
    // meanwhile (closing a descriptor would drop its locks).
    let s = stage();
    let holder = Connection::open(&s.env.db).unwrap();
    holder
        .execute_batch("BEGIN IMMEDIATE; CREATE TABLE IF NOT EXISTS held_by_the_test(x);")
        .unwrap();
    let mut busy = BTreeMap::new();
    let mut busy_lines = BTreeSet::new();
    for c in ALL_COMMANDS {
        if NO_STORE.contains(&c) {
            busy.insert(c, dash());
            continue;
        }
        let id = if c == "restore" {
            &s.compacted
        } else {
            &s.planned
        };
        let out = run(cmd(&s, &line(c, &s, id)).env("AGENT_DB_BUSY_WAIT", "3s"));
        if out.code == 9 {
            let last = out.stderr.lines().last().unwrap_or("").to_string();
            busy_lines.insert(last);
            // Said while waiting, after 2 s (vacuum does not wait: it needs the store alone).
            if c != "vacuum" {
                assert!(
                    out.stderr.contains(&format!(
                        "waiting for {} (another process holds a write lock)",
                        s.env.db.display()
                    )),
                    "{c}: {}",
                    out.stderr
                );
            }
            // Not under --quiet.
            let quiet = run(cmd(&s, &line(c, &s, id))
                .env("AGENT_DB_BUSY_WAIT", "3s")
                .arg("--quiet"));
            assert_eq!(quiet.code, 9, "{c} --quiet: {}", quiet.stderr);
            assert!(
                !quiet.stderr.contains("waiting for"),
                "{c}: {}",
                quiet.stderr
            );
        }
        busy.insert(c, out.code.to_string());
    }
    holder.execute_batch("ROLLBACK").unwrap();
    drop(holder);
    assert_eq!(
        busy_lines,
        BTreeSet::from([busy_line(&s.env.db)]),
        "one busy message, naming the holder"
    );

    // Unknown ID, ambiguous prefix: the same message and code from every command.
    let mut unknown = BTreeMap::new();
    let mut ambiguous = BTreeMap::new();
    let mut unknown_lines = BTreeSet::new();
    let mut ambiguous_lines = BTreeSet::new();
    for c in ALL_COMMANDS {
        if !TAKES_ID.contains(&c) {
            unknown.insert(c, dash());
            ambiguous.insert(c, dash());
            continue;
        }
        let before = crate::common::files_hash(&s.env.db);
        let out = run(&mut cmd(&s, &line(c, &s, "ffffffff")));
        assert!(out.stdout.is_empty(), "{c}: {}", out.stdout);
        unknown_lines.insert(out.stderr.clone());
        unknown.insert(c, out.code.to_string());
        let out = run(&mut cmd(&s, &line(c, &s, "abcd1234")));
        assert!(out.stdout.is_empty(), "{c}: {}", out.stdout);
        ambiguous_lines.insert(out.stderr.lines().last().unwrap_or("").to_string());
        ambiguous.insert(c, out.code.to_string());
        assert_eq!(crate::common::files_hash(&s.env.db), before, "{c}");
    }
    assert_eq!(
        unknown_lines,
        BTreeSet::from([
            "error: conversation ffffffff: not found\nhint: `agent-db list` shows the IDs\n"
                .to_string()
        ])
    );
    assert_eq!(ambiguous_lines.len(), 1, "{ambiguous_lines:?}");
    let amb = ambiguous_lines.iter().next().unwrap();
    assert!(
        amb.contains("ambiguous") && amb.contains("abcd1234-0000") && amb.contains("abcd1234-1111"),
        "{amb}"
    );

    // --quiet success, in the order that keeps each one meaningful (restore before
    // prune-archive prunes its archive), then --json on a fresh stage.
    let mut quiet = BTreeMap::new();
    let order = [
        "list",
        "show",
        "history",
        "stats",
        "stores",
        "config",
        "hooks",
        "recipes",
        "completions",
        "man",
        "init",
        "apply",
        "compact",
        "restore",
        "vacuum",
        "prune-archive",
        "reclaim",
        "retire",
    ];
    for c in order {
        let mut command = cmd(&s, &line(c, &s, &case_id(c, &s)));
        if c == "hooks" {
            // One hook to list (only `hooks` sees it: nothing else runs it).
            command.env("XDG_CONFIG_HOME", one_hook(s.env.dir.path()));
        }
        let out = run(command.arg("--quiet"));
        assert_eq!(out.code, 0, "{c} --quiet: {}", out.stderr);
        assert!(out.stderr.is_empty(), "{c} --quiet stderr: {}", out.stderr);
        quiet.insert(
            c,
            if out.stdout.is_empty() {
                "silent"
            } else {
                "data"
            }
            .to_string(),
        );
    }
    let s = stage();
    let mut json = BTreeMap::new();
    for c in ALL_COMMANDS {
        if !flags_of(c).contains("json") {
            json.insert(c, dash());
            continue;
        }
        let out = run(cmd(&s, &line(c, &s, &case_id(c, &s))).arg("--json"));
        assert_eq!(out.code, 0, "{c} --json: {}", out.stderr);
        let v: serde_json::Value = serde_json::from_str(&out.stdout)
            .unwrap_or_else(|e| panic!("{c} --json: {e}: {}", out.stdout));
        assert!(v.is_object(), "{c}");
        json.insert(c, "yes".to_string());
    }
    for c in ALL_COMMANDS {
        got.insert(
            c.to_string(),
            vec![
                busy[c].clone(),
                unknown[c].clone(),
                ambiguous[c].clone(),
                quiet[c].clone(),
                json[c].clone(),
            ],
        );
    }
    let diff: Vec<String> = ALL_COMMANDS
        .iter()
        .filter(|c| doc[**c] != got[**c])
        .map(|c| format!("{c}: docs say {:?}, the binary {:?}", doc[*c], got[*c]))
        .collect();
    assert!(diff.is_empty(), "{}", diff.join("\n"));
}

// ---------------------------------------------------------------------------------------------
// Hints

/// Which commands can print the strings of a source file (by where it sits), and whether
/// each of them can print every string (`true`: a flag must exist on all of them) or each
/// string is one of theirs (`false`: on at least one). `None`: any command.
fn printed_by(rel: &str) -> Option<(&'static [&'static str], bool)> {
    const COMPACT: &[&str] = &["compact", "apply"];
    const WRITERS: &[&str] = &["compact", "apply", "restore", "prune-archive", "vacuum"];
    Some(match rel {
        // Errors' hints (`output::hint`), the lock and the writability check: every writing
        // command can print them.
        "src/output/mod.rs" | "src/store/lock.rs" | "src/store/preflight.rs" => (WRITERS, true),
        "src/commands/history.rs" => (&["history", "restore", "prune-archive", "vacuum"], false),
        "src/store/restore.rs" => (&["restore", "history", "prune-archive"], false),
        "src/commands/list.rs" => (&["list"], true),
        "src/commands/show.rs" => (&["show"], true),
        "src/commands/stats.rs" => (&["stats"], true),
        "src/select.rs" => (&["list", "compact"], false),
        r if r.starts_with("src/commands/compact")
            || r.starts_with("src/commands/apply")
            || r.starts_with("src/compact/")
            || r.starts_with("src/pipeline/")
            || r.starts_with("src/provider/")
            || r == "src/plan.rs"
            || r == "src/split.rs"
            || r == "src/output/report_table.rs"
            || r == "src/output/notes.rs"
            || r == "src/output/progress.rs" =>
        {
            (COMPACT, false)
        }
        _ => return None,
    })
}

/// The flags of `lit` with the command each belongs to when the text names one before it
/// (`restore --all-since 1h` inside a `compact` message is `restore`'s).
fn flags_with_command(lit: &str) -> Vec<(String, Option<&'static str>)> {
    let mut out = Vec::new();
    let mut current: Option<&'static str> = None;
    for word in lit.split(|c: char| c.is_whitespace() || c == '`' || c == '(' || c == ':') {
        if let Some(c) = ALL_COMMANDS.iter().find(|c| **c == word) {
            current = Some(c);
        }
        for f in flags_in(word) {
            out.push((f, current));
        }
    }
    out
}

fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            sources(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// The string literals of a Rust file outside its tests and comments (roughly: what it can
/// print).
fn literals(text: &str) -> Vec<String> {
    let code = text.split("#[cfg(test)]").next().unwrap_or(text);
    let mut out = Vec::new();
    for line in code.lines() {
        let t = line.trim_start();
        if t.starts_with("//") || t.starts_with("#[arg") || t.starts_with("#[command") {
            continue;
        }
        let mut parts = line.split('"');
        parts.next();
        while let Some(lit) = parts.next() {
            out.push(lit.to_string());
            parts.next();
        }
    }
    out
}

/// Every flag a message in src/ names exists on a command that can print it (`--help`).
#[test]
fn every_flag_a_message_names_exists_on_its_command() {
    let mut files = Vec::new();
    sources(&root().join("src"), &mut files);
    let mut flags: BTreeMap<&str, BTreeSet<String>> = BTreeMap::new();
    for c in ALL_COMMANDS {
        flags.insert(c, flags_of(c));
    }
    let any: BTreeSet<String> = flags.values().flatten().cloned().collect();
    let mut problems = Vec::new();
    let mut checked = 0;
    for f in files {
        let rel = f.strip_prefix(root()).unwrap().display().to_string();
        if rel == "src/cli.rs" {
            continue; // the flags' own definitions and help
        }
        if rel.ends_with("/tests.rs") || rel.contains("_tests.rs") {
            continue; // test modules: their strings are data, never printed
        }
        let text = std::fs::read_to_string(&f).unwrap();
        for lit in literals(&text) {
            for (flag, named) in flags_with_command(&lit) {
                checked += 1;
                let ok = match (named, printed_by(&rel)) {
                    (Some(c), _) => flags[c].contains(&flag),
                    (None, Some((cmds, true))) => cmds.iter().all(|c| flags[c].contains(&flag)),
                    (None, Some((cmds, false))) => cmds.iter().any(|c| flags[c].contains(&flag)),
                    (None, None) => any.contains(&flag),
                };
                if !ok {
                    problems.push(format!("{rel}: --{flag} in {lit:?}"));
                }
            }
        }
    }
    assert!(checked > 30, "found the hints ({checked})");
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// Every `hint:` line the binary prints in the cases below names only flags of that command.
#[test]
fn printed_hints_name_flags_of_their_command() {
    let env = Env::generated(6, 42, &[]);
    twins(&env);
    let id = others(&env)[0].clone();
    let cases: Vec<(&str, Vec<&str>)> = vec![
        ("show", vec!["show", "abc"]),
        ("compact", vec!["compact", "abc"]),
        ("compact", vec!["compact", "--target", "40"]),
        ("compact", vec!["compact", &id, "--model", "m"]),
        ("compact", vec!["compact", &id, "--llm-provider", "openai"]),
        ("list", vec!["list", "--id", "abc"]),
        ("restore", vec!["restore", &id]),
        ("history", vec!["history", "zz"]),
        ("vacuum", vec!["vacuum"]),
    ];
    for (c, args) in cases {
        let out = run(env.cmd().args(&args));
        let known = flags_of(c);
        for l in out.stderr.lines().filter(|l| l.starts_with("hint: ")) {
            for f in flags_in(l) {
                assert!(
                    known.contains(&f),
                    "{args:?}: --{f} is not a flag of {c}: {l}"
                );
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// IDs

#[test]
fn short_and_opencode_ids_get_the_same_message_and_hint_everywhere() {
    let env = Env::generated(4, 43, &[]);
    for args in [
        vec!["show", "0cd"],
        vec!["compact", "0cd"],
        vec!["compact", "--dry-run", "--id", "0cd"],
        vec!["list", "--id", "0cd"],
        vec!["history", "0cd"],
        vec!["restore", "0cd"],
    ] {
        let out = run(env.cmd().args(&args));
        assert_eq!(out.code, 5, "{args:?}");
        assert_eq!(
            out.stderr,
            "error: conversation 0cd: not found\nhint: an ID prefix needs at least 4 characters; `agent-db list` shows the IDs\n",
            "{args:?}"
        );
        assert!(out.stdout.is_empty(), "{args:?}: {}", out.stdout);
    }
    // opencode: a prefix without `ses_` that matches nothing says why.
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("opencode.db");
    let opts = SynthOptions {
        conversations: 3,
        seed: 7,
        scale: 0.3,
        ..SynthOptions::default()
    };
    generate_opencode(&db, &opts, OpencodeEra::Effect).unwrap();
    for args in [
        vec!["show", "dcdc"],
        vec!["compact", "dcdc"],
        vec!["history", "dcdc"],
    ] {
        let out = run(bare_cmd(dir.path()).arg("--db").arg(&db).args(&args));
        assert_eq!(out.code, 5, "{args:?}");
        assert_eq!(
            out.stderr,
            "error: conversation dcdc: not found\nhint: opencode IDs start with ses_; `agent-db list` shows the IDs\n",
            "{args:?}"
        );
    }
}

// ---------------------------------------------------------------------------------------------
// --quiet, --dry-run

#[test]
fn dry_runs_of_writing_commands_change_no_byte() {
    let s = stage();
    let hash = || crate::common::files_hash(&s.env.db);
    let before = hash();
    for args in [
        vec![
            "restore".to_string(),
            s.compacted.clone(),
            "--dry-run".into(),
        ],
        vec![
            "restore".into(),
            "--all-since".into(),
            "1d".into(),
            "--dry-run".into(),
        ],
        vec!["vacuum".into(), "--dry-run".into()],
        vec![
            "prune-archive".into(),
            "--older-than".into(),
            "1s".into(),
            "--dry-run".into(),
        ],
        vec![
            "apply".into(),
            s.plan.display().to_string(),
            "--dry-run".into(),
        ],
    ] {
        let out = run(&mut cmd(&s, &args));
        assert_eq!(out.code, 0, "{args:?}: {}", out.stderr);
        assert!(
            !out.stdout.is_empty(),
            "{args:?}: a preview says what it would do"
        );
        assert_eq!(hash(), before, "{args:?} changed the store");
    }
    // What the previews say is what the real runs then do.
    let out = run(&mut cmd(
        &s,
        &[
            "restore".into(),
            "--all-since".into(),
            "1d".into(),
            "--dry-run".into(),
        ],
    ));
    assert_eq!(
        out.stdout,
        format!("compaction 1 of {}: would restore\n", s.compacted)
    );
    let out = run(&mut cmd(
        &s,
        &[
            "apply".into(),
            s.plan.display().to_string(),
            "--dry-run".into(),
            "--json".into(),
        ],
    ));
    let v: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(v["dry_run"], true);
    let rows = v["conversations"].as_array().unwrap();
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0]["id"], s.planned.as_str());
    assert_eq!(rows[0]["status"], "planned");
    let out = run(&mut cmd(
        &s,
        &["apply".into(), s.plan.display().to_string()],
    ));
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_ne!(hash(), before);
}

// ---------------------------------------------------------------------------------------------
// Restore, history

#[test]
fn restore_by_compaction_number_and_restoring_twice_is_nothing_to_do() {
    let env = Env::generated(12, 44, &[]);
    let ids = others(&env);
    for id in &ids[..2] {
        let out = run(env
            .cmd()
            .args(["compact", id, "--keep-tokens", "0", "--quiet"]));
        assert_eq!(out.code, 0, "{}", out.stderr);
    }
    let second: i64 = env
        .conn()
        .query_row(
            "SELECT id FROM agent_db_compactions WHERE conversation_id = ?1",
            [&ids[1]],
            |r| r.get(0),
        )
        .unwrap();
    // The number alone names it.
    let out = run(env
        .cmd()
        .args(["restore", "--compaction", &second.to_string()]));
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(
        out.stdout,
        format!("compaction {second} of {}: restored\n", ids[1])
    );
    // Again: nothing to do, exit 0, the time said as every table says it.
    let out = run(env.cmd().env("AGENT_DB_NOW", "2026-11-01T12:00:12Z").args([
        "restore",
        "--compaction",
        &second.to_string(),
    ]));
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(
        out.stdout,
        format!(
            "compaction {second} of {}: nothing to do: already restored 12s ago\n",
            ids[1]
        )
    );
    let out = run(env.cmd().args(["restore", &ids[1]]));
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(out.stderr.contains("nothing to do"), "{}", out.stderr);
    // A number that belongs to another conversation than the one named: usage (2).
    let out = run(env
        .cmd()
        .args(["restore", &ids[0], "--compaction", &second.to_string()]));
    assert_eq!(out.code, 2, "{}", out.stderr);
    // A conversation never compacted: not found (5).
    let out = run(env.cmd().args(["restore", &ids[2]]));
    assert_eq!(out.code, 5, "{}", out.stderr);
}

#[test]
fn history_takes_limit_and_since() {
    let env = Env::generated(12, 45, &[]);
    let ids = others(&env);
    // Three compactions an hour apart.
    for (id, at) in ids[..3].iter().zip([
        "2026-11-01T09:00:00Z",
        "2026-11-01T10:00:00Z",
        "2026-11-01T11:00:00Z",
    ]) {
        let out = run(env.cmd().env("AGENT_DB_NOW", at).args([
            "compact",
            id,
            "--keep-tokens",
            "0",
            "--quiet",
        ]));
        assert_eq!(out.code, 0, "{}", out.stderr);
    }
    let shown = |extra: &[&str]| -> Vec<String> {
        let mut c = env.cmd();
        c.args(["history", "--json"]).args(extra);
        let (v, code) = crate::common::json(c);
        assert_eq!(code, 0);
        v["compactions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["conversation_id"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(shown(&[]), ids[..3].to_vec());
    assert_eq!(shown(&["--limit", "2"]), ids[1..3].to_vec());
    // NOW is 12:00: within 90 minutes are the 11:00 and 10:30+ ones, i.e. only 11:00.
    assert_eq!(shown(&["--since", "90m"]), ids[2..3].to_vec());
    assert_eq!(
        shown(&["--since", "150m", "--limit", "5"]),
        ids[1..3].to_vec()
    );
    assert_eq!(NOW, "2026-11-01T12:00:00Z");
}

// ---------------------------------------------------------------------------------------------
// --force

#[test]
fn force_compacts_what_the_stall_guard_protects() {
    let env = Env::generated(12, 46, &[]);
    let id = others(&env)
        .into_iter()
        .find(|id| {
            let out = run(env
                .cmd()
                .args(["compact", id, "--target", "0.2", "--quiet"]));
            assert_eq!(out.code, 0, "{}", out.stderr);
            env.conn()
                .query_row(
                    "SELECT messages_after FROM agent_db_compactions WHERE conversation_id = ?1",
                    [id],
                    |r| r.get::<_, i64>(0),
                )
                .is_ok_and(|n| n >= 8)
        })
        .expect("a conversation compacted with a tail of several messages");
    let again = |force: bool| {
        let mut c = env.cmd();
        c.args(["compact", &id, "--dry-run", "--json"]);
        if force {
            c.arg("--force");
        }
        crate::common::json(c).0["conversations"][0].clone()
    };
    let guarded = again(false);
    assert_eq!(guarded["status"], "skipped", "{guarded}");
    let why = guarded["detail"].as_str().unwrap_or_default().to_string();
    assert!(why.contains("--force compacts it anyway"), "{why}");
    let forced = again(true);
    assert_eq!(
        forced["status"], "planned",
        "--force must compact: {forced}"
    );
    assert!(
        forced["messages_after"].as_i64().unwrap() < forced["messages_before"].as_i64().unwrap(),
        "{forced}"
    );
}

// ---------------------------------------------------------------------------------------------
// Explicit LLM flags, an unreachable server

#[test]
fn an_explicit_llm_flag_that_cannot_be_used_is_a_config_error() {
    let env = Env::generated(4, 47, &[]);
    let id = others(&env)[0].clone();
    let before = env.files_hash();
    for (args, missing) in [
        (vec!["--llm-provider", "openai"], "OPENAI_API_KEY"),
        (vec!["--llm-provider", "anthropic"], "ANTHROPIC_API_KEY"),
        (vec!["--model", "gpt-5"], "--llm-provider"),
    ] {
        for quiet in [false, true] {
            let mut c = env.cmd();
            c.args(["compact", &id, "--keep-tokens", "0"]).args(&args);
            if quiet {
                c.arg("--quiet");
            }
            let out = run(&mut c);
            assert_eq!(out.code, 3, "{args:?}: {}", out.stderr);
            assert!(
                out.stderr
                    .starts_with(&format!("error: {} was given", args[0]))
                    && out.stderr.contains(missing),
                "{args:?}: {}",
                out.stderr
            );
        }
    }
    assert_eq!(env.files_hash(), before);
    // No flag: the offline fallback stays, and says so.
    let out = run(env
        .cmd()
        .args(["compact", &id, "--keep-tokens", "0", "--dry-run"]));
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(
        out.stderr
            .contains("strategy: extractive (offline, no LLM: no LLM provider is configured)"),
        "{}",
        out.stderr
    );
}

#[test]
fn an_unreachable_base_url_fails_at_once_with_its_address() {
    let env = Env::generated(4, 48, &[]);
    let id = others(&env)[0].clone();
    // A loopback port nothing listens on: bound, then closed.
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let url = format!("http://127.0.0.1:{port}/v1");
    let out = run(env
        .cmd()
        .args([
            "compact",
            &id,
            "--keep-tokens",
            "0",
            "--llm-provider",
            "openai",
        ])
        .args(["--base-url", &url])
        .env("AGENT_DB_MAX_RETRIES", "5")
        .env("AGENT_DB_LOG", "warn"));
    assert_eq!(out.code, 1, "{}", out.stderr);
    assert!(
        out.stderr
            .contains(&format!("cannot connect to {url}/chat/completions")),
        "{}",
        out.stderr
    );
    // Not retried: a refused connection cannot succeed on the next attempt.
    assert!(!out.stderr.contains("retrying after"), "{}", out.stderr);
}

// ---------------------------------------------------------------------------------------------
// A busy store at a terminal

/// What a terminal shows on each line: the text after the line's last carriage return, with
/// the escape sequences (colour, clearing) taken out.
fn screen_lines(raw: &str) -> Vec<String> {
    raw.split('\n')
        .map(|l| {
            let last = l.rsplit('\r').next().unwrap_or("");
            let mut out = String::new();
            let mut chars = last.chars();
            while let Some(c) = chars.next() {
                if c == '\x1b' {
                    for d in chars.by_ref() {
                        if d.is_ascii_alphabetic() {
                            break;
                        }
                    }
                } else {
                    out.push(c);
                }
            }
            out
        })
        .collect()
}

#[test]
fn waiting_for_a_busy_store_is_a_line_of_its_own_above_the_progress_bar() {
    let env = Env::generated(8, 49, &[]);
    let id = others(&env)[0].clone();
    let holder = Connection::open(&env.db).unwrap();
    holder
        .execute_batch("BEGIN IMMEDIATE; CREATE TABLE IF NOT EXISTS held_by_the_test(x);")
        .unwrap();
    let mut c = crate::common::std_cmd(env.dir.path());
    c.arg("--db")
        .arg(&env.db)
        .args(["compact", &id, "--keep-tokens", "0", "--yes"])
        .env("AGENT_DB_BUSY_WAIT", "3s");
    let out = crate::pty::run_stderr_on_tty(c);
    holder.execute_batch("ROLLBACK").unwrap();
    assert_eq!(out.code, 9, "{}", out.stderr);
    let lines = screen_lines(&out.stderr);
    let notice = format!(
        "waiting for {} (another process holds a write lock)",
        env.db.display()
    );
    assert!(
        lines.iter().any(|l| l.trim_end() == notice),
        "the notice is not a line of its own:\n{lines:#?}"
    );
    // On a terminal an error wraps at word boundaries: its lines joined are the one message.
    let words = |s: &str| s.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(
        words(&lines.join(" ")).contains(&words(&busy_line(&env.db))),
        "{lines:#?}"
    );
}

/// A second batch within the idle window, on the stores where agent-db's compaction moves
/// UPDATED as the agent's own does (kodelet, goose): a conversation agent-db just compacted and
/// nobody wrote to since is skipped as agent-db's own write ("compacted by agent-db 0s ago;
/// nothing new since", exit 0), not as a live agent's activity; once the agent writes to it,
/// it is the idle-window skip again. `change` is the agent's write, SQL on conversation `?1`.
fn own_write_is_not_activity(cmd: &dyn Fn() -> assert_cmd::Command, db: &Path, change: &str) {
    let batch = |idle: &str| {
        let mut c = cmd();
        c.args([
            "compact",
            "--all-over",
            "0",
            "--idle",
            idle,
            "--force",
            "--keep-tokens",
            "200",
            "--yes",
            "--json",
        ]);
        crate::common::json(c)
    };
    let (doc, code) = batch("0");
    assert!(code == 0, "{doc:#}");
    let compacted = crate::common::ids_with_status(&doc, "compacted");
    assert!(!compacted.is_empty(), "{doc:#}");
    let (doc, code) = batch("10m");
    assert_eq!(code, 0, "{doc:#}");
    let detail = |doc: &serde_json::Value, id: &str| -> String {
        let row = crate::common::all_rows(doc)
            .into_iter()
            .find(|r| r["id"] == id)
            .unwrap_or_else(|| panic!("{id}: {doc:#}"));
        assert_eq!(row["status"], "skipped", "{row}");
        row["detail"].as_str().unwrap().to_string()
    };
    for id in &compacted {
        let d = detail(&doc, id);
        assert_eq!(d, "compacted by agent-db 0s ago; nothing new since", "{id}");
    }
    let out = run(cmd().args(["compact", "--all-over", "0", "--force", "--yes"]));
    assert_eq!(out.code, 0, "{}", out.stderr);
    let all = format!("{}{}", out.stdout, out.stderr);
    assert!(
        !all.contains("active within") && !all.contains("active:"),
        "{all}"
    );
    assert!(all.contains("compacted by agent-db"), "{all}");
    // The agent writes to one of them: that is activity again.
    let id = &compacted[0];
    let n = Connection::open(db).unwrap().execute(change, [id]).unwrap();
    assert!(n > 0);
    let (doc, code) = batch("10m");
    assert_eq!(code, 0, "{doc:#}");
    assert!(detail(&doc, id).starts_with("active: updated"), "{doc:#}");
}

#[test]
fn a_second_batch_in_the_idle_window_tells_agent_dbs_own_compaction_from_activity_kodelet() {
    let env = Env::generated(4, 44, &[]);
    own_write_is_not_activity(
        &|| env.cmd(),
        &env.db,
        "UPDATE conversations SET raw_messages = json_insert(raw_messages, '$[#]', \
         json(json_extract(raw_messages, '$[#-1]'))) WHERE id = ?1",
    );
}

#[test]
fn a_second_batch_in_the_idle_window_tells_agent_dbs_own_compaction_from_activity_goose() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("sessions.db");
    let opts = SynthOptions {
        conversations: 4,
        seed: 5,
        scale: 1.0,
        ..SynthOptions::default()
    };
    agent_db_synth::goose::generate_goose(
        &db,
        &opts,
        &agent_db_synth::goose::GooseSchema::preset("goose-v16").unwrap(),
    )
    .unwrap();
    let cmd = || {
        let mut c = bare_cmd(dir.path());
        c.arg("--db").arg(&db);
        c
    };
    own_write_is_not_activity(
        &cmd,
        &db,
        "INSERT INTO messages (session_id, role, content_json, created_timestamp, timestamp, metadata_json) \
         SELECT session_id, role, content_json, created_timestamp + 1, timestamp, metadata_json \
         FROM messages WHERE session_id = ?1 ORDER BY id DESC LIMIT 1",
    );
}

//! What the report tables, notes, totals and footers say, on a real terminal (pty) at 80 and
//! 120 columns and piped: a note is printed only when a shown row cites it, notes speak plain
//! words, and `list --json`'s `conversations` are the selected ones.

use std::collections::BTreeSet;

use crate::common::{json, Env};
use crate::pty;

/// The note numbers a table's rows cite (`[N]` before the first note line) and the numbers of
/// the notes printed under it (lines starting `[N] `).
fn cited_and_printed(stdout: &str) -> (BTreeSet<usize>, BTreeSet<usize>) {
    let number = |s: &str| -> Option<usize> {
        let s = s.strip_prefix('[')?;
        s[..s.find(']')?].parse().ok()
    };
    let mut cited = BTreeSet::new();
    let mut printed = BTreeSet::new();
    for line in stdout.lines() {
        if let Some(n) = number(line).filter(|_| line.starts_with('[')) {
            printed.insert(n);
            continue;
        }
        for (i, _) in line.match_indices('[') {
            if let Some(n) = number(&line[i..]) {
                cited.insert(n);
            }
        }
    }
    (cited, printed)
}

/// A generated opencode store (its estimated token figures make the table wide).
fn opencode(n: usize) -> (tempfile::TempDir, std::path::PathBuf) {
    use agent_db_synth::opencode::{generate_opencode, OpencodeEra};
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("opencode.db");
    let opts = agent_db_synth::SynthOptions {
        conversations: n,
        seed: 42,
        ..Default::default()
    };
    generate_opencode(&db, &opts, OpencodeEra::preset("opencode").unwrap()).unwrap();
    (dir, db)
}

fn compact_dry_run(home: &std::path::Path, db: &std::path::Path, cols: u16) -> String {
    let mut c = crate::common::std_cmd(home);
    c.arg("--db")
        .arg(db)
        .args(["compact", "--all-over", "0.5", "--idle", "0", "--dry-run"]);
    let out = pty::run(c, cols);
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    // Colour codes off for matching.
    strip_ansi(&out.stdout)
}

fn strip_ansi(s: &str) -> String {
    let mut out = String::new();
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
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
}

#[test]
fn notes_are_printed_only_for_rows_shown_and_in_plain_words() {
    let (dir, db) = opencode(30);
    for cols in [80u16, 120] {
        let text = compact_dry_run(dir.path(), &db, cols);
        let (cited, printed) = cited_and_printed(&text);
        assert!(!printed.is_empty(), "{cols}: some notes:\n{text}");
        assert_eq!(
            cited, printed,
            "{cols}: every note printed is cited, and only those:\n{text}"
        );
        // Numbered from 1 without gaps.
        assert_eq!(
            printed.iter().copied().collect::<Vec<_>>(),
            (1..=printed.len()).collect::<Vec<_>>(),
            "{cols}:\n{text}"
        );
        for line in text.lines().filter(|l| l.starts_with('[')) {
            assert!(
                !line.contains("kept path") && !line.contains("kept error"),
                "{cols}: jargon in a note: {line}\n{text}"
            );
        }
        if cols == 80 {
            assert!(!text.contains("KEPT"), "80 columns drop KEPT:\n{text}");
            assert!(
                !text.contains("of the summarized messages"),
                "80 columns: no note for the dropped KEPT column:\n{text}"
            );
        } else {
            assert!(text.contains("KEPT"), "{text}");
            assert!(text.contains("% of the file paths"), "{text}");
        }
    }
}

#[test]
fn list_json_conversations_are_the_selected_ones_only() {
    let env = Env::generated(40, 42, &[]);
    let mut c = env.cmd();
    c.args(["list", "--all-over", "0.2", "--json"]);
    let (doc, code) = json(c);
    assert_eq!(code, 0, "{doc}");
    let ids = |k: &str| -> Vec<String> {
        doc[k]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["id"].as_str().unwrap().to_string())
            .collect()
    };
    let mut selected = env.cmd();
    selected.args(["list", "--all-over", "0.2", "--ids"]);
    let want: Vec<String> = String::from_utf8(selected.output().unwrap().stdout)
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect();
    assert_eq!(ids("conversations"), want, "{doc}");
    assert!(!ids("skipped").is_empty(), "some skipped: {doc}");
    for r in doc["conversations"].as_array().unwrap() {
        assert_eq!(r["status"], "selected", "{r}");
    }
    for r in doc["skipped"].as_array().unwrap() {
        assert_eq!(r["status"], "skipped", "{r}");
    }
}

/// After compacting exactly one conversation the undo line is the command that undoes it, with
/// its ID; on a terminal at 80 columns it (like every stderr line) wraps at word boundaries.
#[test]
fn the_undo_line_names_the_conversation_and_stderr_wraps_at_words() {
    let env = Env::generated(12, 7, &[]);
    let ids = env.ids(
        "SELECT c.id FROM conversations c JOIN conversation_summaries s ON s.id = c.id
         WHERE s.message_count >= 8 ORDER BY c.id LIMIT 2",
    );
    let ids: Vec<&str> = ids.iter().map(String::as_str).collect();
    assert_eq!(ids.len(), 2, "{ids:?}");
    // Piped: the full ID.
    let out = env
        .cmd()
        .args(["compact", ids[0], "--keep-tokens", "300"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains(&format!("restore {};", ids[0])),
        "the undo line names {}:\n{stderr}",
        ids[0]
    );
    assert!(!stderr.contains("restore ID"), "{stderr}");
    // On a terminal: a unique prefix that restore takes, and lines of at most 80 columns that
    // break between words.
    let mut c = crate::common::std_cmd(env.dir.path());
    c.arg("--db")
        .arg(&env.db)
        .args(["compact", ids[1], "--keep-tokens", "300"]);
    let out = pty::run_stderr_on_tty(c);
    assert_eq!(out.code, 0, "{}", out.stderr);
    // What the screen shows: a progress line overwritten with `\r` is gone.
    let text: String = strip_ansi(&out.stderr)
        .lines()
        .map(|l| format!("{}\n", l.rsplit('\r').next().unwrap_or("")))
        .collect();
    for line in text.lines() {
        assert!(line.chars().count() <= 80, "{line:?}\n{text}");
    }
    let flat = text.split_whitespace().collect::<Vec<_>>().join(" ");
    let undo = flat
        .split("undo with: ")
        .nth(1)
        .unwrap_or_else(|| panic!("{text}"));
    let prefix = undo
        .split("restore ")
        .nth(1)
        .and_then(|r| r.split(';').next())
        .unwrap_or_else(|| panic!("{text}"));
    assert!(
        ids[1].starts_with(prefix) && prefix.len() >= 4,
        "{prefix:?}\n{text}"
    );
    // The words survive the wrapping whole: `--db PATH` is one word on one line.
    assert!(text.contains(&env.db.display().to_string()), "{text}");
    let mut restore = env.cmd();
    restore.args(["restore", prefix]);
    let out = restore.output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `agent-db -h` and `agent-db compact -h` fit a 80×24 terminal; `--help` keeps the long form.
#[test]
fn short_help_fits_24_rows_and_long_help_stays_long() {
    let dir = tempfile::tempdir().unwrap();
    for args in [&["-h"][..], &["compact", "-h"], &["list", "-h"]] {
        let mut c = crate::common::std_cmd(dir.path());
        c.args(args);
        let out = pty::run(c, 80);
        assert_eq!(out.code, 0, "{args:?}: {}", out.stderr);
        let text = strip_ansi(&out.stdout);
        let rows = text.trim_end().lines().count();
        assert!(rows <= 24, "{args:?}: {rows} rows:\n{text}");
        for line in text.lines() {
            assert!(line.chars().count() <= 80, "{args:?}: {line:?}");
        }
    }
    let mut c = crate::common::std_cmd(dir.path());
    c.arg("-h");
    let short = strip_ansi(&pty::run(c, 80).stdout);
    // The demo command is not the first listed, nor the `help` noise.
    let first = short
        .lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .nth(1)
        .unwrap_or_default();
    assert!(first.trim_start().starts_with("list"), "{short}");
    let mut c = crate::common::std_cmd(dir.path());
    c.args(["compact", "--help"]);
    let long = strip_ansi(&pty::run(c, 80).stdout);
    for flag in [
        "--min-retention",
        "--fallback",
        "--jobs",
        "--max-cost",
        "Examples:",
    ] {
        assert!(long.contains(flag), "compact --help lists {flag}:\n{long}");
    }
    let mut c = crate::common::std_cmd(dir.path());
    c.arg("--help");
    let long = strip_ansi(&pty::run(c, 80).stdout);
    assert!(
        long.contains("Exit codes:") && long.contains("init"),
        "{long}"
    );
}

/// Help speaks every agent's words (or neutral ones): kodelet's field names appear only on a
/// line that names kodelet.
#[test]
fn help_text_uses_no_kodelet_field_names_for_other_agents() {
    let dir = tempfile::tempdir().unwrap();
    let subcommands = [
        "list",
        "show",
        "compact",
        "apply",
        "history",
        "restore",
        "prune-archive",
        "stats",
        "vacuum",
        "config",
        "stores",
        "hooks",
        "recipes",
        "init",
    ];
    let mut pages = vec![vec!["--help".to_string()]];
    for s in subcommands {
        pages.push(vec![s.to_string(), "--help".to_string()]);
    }
    for args in pages {
        let out = crate::common::std_cmd(dir.path())
            .args(&args)
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        // A help line may wrap: judge each paragraph (an option's help) whole.
        for para in text.split("\n\n") {
            for field in ["currentContextWindow", "maxContextWindow", "raw_messages"] {
                assert!(
                    !para.contains(field) || para.contains("kodelet"),
                    "{args:?}: {field} without naming kodelet:\n{para}"
                );
            }
        }
    }
}

/// A conversation whose stored usage is corrupt (a negative window or context) is named with
/// that reason, not counted among those whose window is unknown.
#[test]
fn corrupt_usage_is_named_with_its_reason() {
    let env = Env::generated(12, 7, &[]);
    let ids = env.ids(
        "SELECT id FROM conversation_summaries WHERE json_extract(usage, '$.maxContextWindow') > 0 \
         ORDER BY id LIMIT 2",
    );
    let c = env.conn();
    for (id, field, value) in [
        (&ids[0], "maxContextWindow", -200000),
        (&ids[1], "currentContextWindow", -5),
    ] {
        for table in ["conversations", "conversation_summaries"] {
            c.execute(
                &format!(
                    "UPDATE {table} SET usage = json_set(usage, '$.{field}', ?1) WHERE id = ?2"
                ),
                rusqlite::params![value, id],
            )
            .unwrap();
        }
    }
    drop(c);
    for cmd in [
        &["list", "--all-over", "0.5"][..],
        &["compact", "--all-over", "0.5", "--dry-run"],
    ] {
        let out = env.cmd().args(cmd).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        let stdout = String::from_utf8_lossy(&out.stdout);
        for id in &ids {
            let line = stderr
                .lines()
                .find(|l| l.contains(id.as_str()))
                .unwrap_or_else(|| panic!("{cmd:?}: {id} is named:\n{stderr}\n{stdout}"));
            assert!(line.contains("stored usage is corrupt"), "{cmd:?}: {line}");
            assert!(line.contains("(negative)"), "{cmd:?}: {line}");
        }
        assert_eq!(out.status.code(), Some(1), "{cmd:?}: {stderr}");
    }
}

/// At 80 columns the name keeps room and a model is told apart by its end, never `claude-…`;
/// at 120 the models are whole. `stores` at 80 shows each file's name.
#[test]
fn eighty_columns_give_the_name_room_and_models_their_distinguishing_part() {
    let env = Env::generated(30, 42, &[]);
    let models: BTreeSet<String> = env
        .ids("SELECT DISTINCT json_extract(metadata, '$.model') FROM conversation_summaries WHERE json_extract(metadata, '$.model') IS NOT NULL")
        .into_iter()
        .collect();
    assert!(
        models.iter().any(|m| m.starts_with("claude-")),
        "{models:?}"
    );
    for cols in [80u16, 120] {
        let mut c = crate::common::std_cmd(env.dir.path());
        c.arg("--db")
            .arg(&env.db)
            .args(["list", "--color", "never"]);
        let out = pty::run(c, cols);
        assert_eq!(out.code, 0, "{}", out.stderr);
        let text = out.stdout;
        let header = text.lines().next().unwrap();
        assert!(header.contains("MODEL"), "{cols}: {text}");
        let name_at = header.find("NAME").unwrap();
        let next = header[name_at + 4..]
            .find(|c: char| c != ' ')
            .map(|i| name_at + 4 + i)
            .unwrap();
        assert!(
            next - name_at >= 22,
            "{cols}: the name gets 20+ characters:\n{text}"
        );
        for line in text.lines() {
            assert!(line.chars().count() <= usize::from(cols), "{line}");
            assert!(!line.contains("claude-…"), "{cols}: {line}");
        }
        if cols == 120 {
            for m in &models {
                assert!(text.contains(m.as_str()), "{cols}: {m} whole:\n{text}");
            }
        } else {
            assert!(
                text.contains("…sonnet-4-") || text.contains("sonnet-4-"),
                "{text}"
            );
        }
    }
    // `stores` at 80 columns: each file's name is readable.
    let home = env.dir.path();
    std::fs::create_dir_all(home.join(".kodelet")).unwrap();
    std::fs::copy(&env.db, home.join(".kodelet/storage.db")).unwrap();
    let mut c = crate::common::std_cmd(home);
    c.args(["stores", "--color", "never"]);
    let out = pty::run(c, 80);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(out.stdout.contains("storage.db"), "{}", out.stdout);
    for line in out.stdout.lines() {
        assert!(line.chars().count() <= 80, "{line}");
    }
}

//! Everyday friction (issue 29, items 2, 3, 5, 7, 8): skipped conversations summarized by
//! reason, no compaction that makes nothing better, a store busy with another writer, layouts
//! at 80 columns, and `show`'s tool input decoded and wrapped.

use std::process::Command;

use agent_db_synth::SynthFormat;

use crate::common::{std_cmd, Env};
use crate::pty;

/// `agent-db --db <store> ARGS` with stdout on a terminal `cols` wide (no colour).
fn tty(env: &Env, args: &[&str], cols: u16) -> pty::TtyOut {
    let mut c: Command = std_cmd(env.dir.path());
    c.arg("--db").arg(&env.db).args(args).env("NO_COLOR", "1");
    pty::run(c, cols)
}

/// Replace the input of the first `tool_use` block of an Anthropic conversation; its ID.
fn set_tool_input(env: &Env, input: serde_json::Value) -> String {
    let c = env.conn();
    let rows: Vec<(String, String)> = c
        .prepare(
            "SELECT id, raw_messages FROM conversations WHERE provider = 'anthropic' ORDER BY id",
        )
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .map(|r| r.unwrap())
        .collect();
    for (id, raw) in rows {
        let mut msgs: serde_json::Value = serde_json::from_str(&raw).unwrap();
        let Some(arr) = msgs.as_array_mut() else {
            continue;
        };
        let block = arr.iter_mut().find_map(|m| {
            m["content"]
                .as_array_mut()?
                .iter_mut()
                .find(|b| b["type"] == "tool_use")
        });
        if let Some(b) = block {
            b["input"] = input;
            c.execute(
                "UPDATE conversations SET raw_messages = ?1 WHERE id = ?2",
                [msgs.to_string(), id.clone()],
            )
            .unwrap();
            return id;
        }
    }
    panic!("the generated store has an Anthropic conversation with a tool call");
}

#[test]
fn show_prints_tool_input_decoded_and_wraps_under_the_indent() {
    let env = Env::generated(12, 5, &[SynthFormat::Anthropic]);
    let command = "cargo test --workspace && grep -n 'fn parse(&mut self) -> Result<Ast, Error>' \
                   src/parser.rs src/lexer.rs src/ast.rs | sort | uniq -c | head -n 40";
    let id = set_tool_input(
        &env,
        serde_json::json!({"command": command, "timeout": 120}),
    );
    // Piped: one line per argument, the command as the tool received it, no JSON escapes.
    let out = std_cmd(env.dir.path())
        .arg("--db")
        .arg(&env.db)
        .args(["show", &id])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.lines()
            .any(|l| l == format!("      command: {command}")),
        "{text}"
    );
    assert!(text.lines().any(|l| l == "      timeout: 120"), "{text}");
    assert!(!text.contains("\\u00") && !text.contains("\\\""), "{text}");
    // On a terminal 80 wide: every line fits, and the command's continuation lines keep the
    // argument's indent; no word is lost.
    let shown = tty(&env, &["show", &id, "--no-pager"], 80);
    assert_eq!(shown.code, 0, "{}", shown.stderr);
    let lines: Vec<&str> = shown.stdout.lines().collect();
    for l in &lines {
        assert!(l.chars().count() <= 80, "wider than 80: {l:?}");
    }
    let start = lines
        .iter()
        .position(|l| l.starts_with("      command: cargo test"))
        .unwrap_or_else(|| panic!("{}", shown.stdout));
    let mut joined = lines[start].trim_start().to_string();
    for l in &lines[start + 1..] {
        if l.trim_start().starts_with("timeout:") {
            break;
        }
        assert!(
            l.starts_with("      "),
            "continuation keeps the indent: {l:?}"
        );
        joined.push(' ');
        joined.push_str(l.trim_start());
    }
    assert!(lines.len() > start + 2, "the long command wrapped");
    assert_eq!(joined, format!("command: {command}"));
}

/// Run `cmd` with stdin, stdout and stderr all on one terminal `cols` wide, typing `input`;
/// everything the terminal showed, and the exit code.
fn full_tty(mut cmd: Command, cols: u16, input: &str) -> (String, i32) {
    use std::io::{Read, Write};
    use std::process::Stdio;
    let (mut master, slave) = pty::open(cols);
    let fd = |f: &std::os::fd::OwnedFd| Stdio::from(f.try_clone().unwrap());
    cmd.env_remove("COLUMNS")
        .stdin(fd(&slave))
        .stdout(fd(&slave))
        .stderr(fd(&slave));
    let mut child = cmd.spawn().expect("spawn agent-db");
    drop(cmd);
    drop(slave);
    let mut writer = master.try_clone().unwrap();
    writer.write_all(input.as_bytes()).unwrap();
    let reader = std::thread::spawn(move || {
        let mut buf = Vec::new();
        let mut chunk = [0u8; 4096];
        loop {
            match master.read(&mut chunk) {
                Ok(0) | Err(_) => break,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
        }
        buf
    });
    let status = child.wait().unwrap();
    let out = reader.join().unwrap();
    (
        String::from_utf8_lossy(&out).replace("\r\n", "\n"),
        status.code().unwrap_or(-1),
    )
}

/// A store of 40 conversations where a third of those with stored usage have no window.
fn unrated_store() -> (Env, Vec<String>, Vec<String>) {
    let env = Env::generated(40, 29, &[]);
    let c = env.conn();
    // kodelet keeps the usage in both tables; agent-db lists from the summaries.
    c.execute_batch(
        "UPDATE conversations SET usage = json_set(usage, '$.maxContextWindow', 0)
           WHERE rowid % 3 = 0 AND json_extract(usage, '$.currentContextWindow') > 0;
         UPDATE conversation_summaries SET usage = json_set(usage, '$.maxContextWindow', 0)
           WHERE id IN (SELECT id FROM conversations
                        WHERE json_extract(usage, '$.maxContextWindow') = 0);",
    )
    .unwrap();
    let unrated = env.ids(
        "SELECT id FROM conversations WHERE json_extract(usage, '$.currentContextWindow') > 0
         AND NOT json_extract(usage, '$.maxContextWindow') > 0 ORDER BY id",
    );
    let rated = env.ids(
        "SELECT id FROM conversations WHERE json_extract(usage, '$.currentContextWindow') >= 0
         AND json_extract(usage, '$.maxContextWindow') > 0 ORDER BY id",
    );
    assert!(
        unrated.len() >= 3 && rated.len() >= 3,
        "{unrated:?} {rated:?}"
    );
    (env, unrated, rated)
}

const NO_WINDOW: &str = "skipped: no context window known — give --context-limit N";

#[test]
fn skipped_conversations_are_one_line_per_reason_and_listed_with_verbose() {
    let (env, unrated, rated) = unrated_store();
    let run = |extra: &[&str]| {
        let out = env
            .cmd()
            .args(["list", "--all-over", "0", "--idle", "0"])
            .args(extra)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(0));
        (
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (stdout, stderr) = run(&[]);
    let line = format!("{} {NO_WINDOW}", unrated.len());
    assert_eq!(
        stderr.lines().filter(|l| *l == line).count(),
        1,
        "{line:?} in:\n{stderr}"
    );
    for id in &unrated {
        assert!(
            !stderr.contains(id.as_str()),
            "{id} listed without --verbose:\n{stderr}"
        );
        assert!(!stdout.contains(id.as_str()));
    }
    for id in &rated {
        assert!(stdout.contains(id.as_str()), "{id} in the table");
    }
    assert!(
        stderr.lines().count() <= 4,
        "a few lines, not one per skip:\n{stderr}"
    );
    // --verbose: every one, under its reason.
    let (_, verbose) = run(&["--verbose"]);
    let lines: Vec<&str> = verbose.lines().collect();
    let at = lines.iter().position(|l| *l == line).expect(&verbose);
    let listed: Vec<&str> = lines[at + 1..at + 1 + unrated.len()]
        .iter()
        .map(|l| l.trim_start().split(':').next().unwrap())
        .collect();
    let mut sorted = listed.clone();
    sorted.sort();
    assert_eq!(sorted, unrated, "{verbose}");

    // compact: the table and its totals cover the selected conversations only; the skips are
    // one line.
    let out = env
        .cmd()
        .args(["compact", "--dry-run", "--all-over", "0", "--idle", "0"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains(&format!("TOTAL {} conversation(s):", rated.len())),
        "{text}"
    );
    assert_eq!(text.lines().filter(|l| *l == line).count(), 1, "{text}");
    for id in &unrated {
        assert!(!text.contains(id.as_str()), "{id}:\n{text}");
    }
}

#[test]
fn the_prompt_counts_the_conversations_the_run_works_on() {
    let (env, unrated, rated) = unrated_store();
    let before = env.files_hash();
    let mut c = std_cmd(env.dir.path());
    c.arg("--db")
        .arg(&env.db)
        .args(["compact", "--all-over", "0", "--idle", "0"])
        .env("NO_COLOR", "1");
    let (screen, code) = full_tty(c, 200, "n\n");
    assert_eq!(code, 0, "{screen}");
    assert!(
        screen.contains(&format!("compact {} conversation(s) in", rated.len())),
        "{screen}"
    );
    assert!(
        screen.contains(&format!("{} {NO_WINDOW}", unrated.len())),
        "{screen}"
    );
    assert!(screen.contains("nothing done"), "{screen}");
    assert_eq!(env.files_hash(), before);
}

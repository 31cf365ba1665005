//! Layouts at 80 columns on a real terminal: `show`'s tool input decoded and wrapped under the
//! indent, a column with one value collapsed into a line, the confirmation's short IDs, and the
//! progress line in whole words.

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
pub fn full_tty(mut cmd: Command, cols: u16, input: &str) -> (String, i32) {
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

#[test]
fn a_column_with_one_value_collapses_into_a_line_at_80_columns() {
    // One provider on every row, as in docker-agent and opencode stores.
    let env = Env::generated(12, 7, &[SynthFormat::Anthropic]);
    let providers = env.ids("SELECT DISTINCT provider FROM conversations");
    assert_eq!(providers, ["anthropic"]);
    let out = tty(&env, &["list"], 80);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let lines: Vec<&str> = out.stdout.lines().collect();
    assert!(!lines[0].contains("PROVIDER"), "{}", out.stdout);
    assert!(
        lines.contains(&"provider: anthropic (all rows)"),
        "{}",
        out.stdout
    );
    for l in &lines {
        assert!(l.chars().count() <= 80, "{l:?}");
    }
    // The room goes to NAME: wider than the 9 characters it had beside a PROVIDER column.
    let name_at = lines[0].find("NAME").unwrap();
    let next = lines[0][name_at + 4..]
        .find(|c: char| c != ' ')
        .map(|i| i + name_at + 4)
        .unwrap();
    assert!(
        next - name_at > 12,
        "NAME is {} wide:\n{}",
        next - name_at,
        out.stdout
    );
    insta::assert_snapshot!("list_one_provider_80", out.stdout);
    // Piped, every column stays (scripts read them).
    let piped = env.cmd().arg("list").output().unwrap();
    let text = String::from_utf8_lossy(&piped.stdout);
    assert!(text.lines().next().unwrap().contains("PROVIDER"), "{text}");
    assert!(!text.contains("(all rows)"));
}

#[test]
fn the_confirmation_shows_short_ids_that_fit_80_columns() {
    let env = Env::generated(12, 7, &[]);
    let mut c = std_cmd(env.dir.path());
    c.arg("--db")
        .arg(&env.db)
        .args(["compact", "--all-over", "0.01", "--idle", "0"])
        .env("NO_COLOR", "1");
    let (screen, code) = full_tty(c, 80, "n\n");
    assert_eq!(code, 0, "{screen}");
    let ids = env.ids("SELECT id FROM conversations");
    let listed: Vec<&str> = screen
        .lines()
        .filter(|l| l.starts_with("  ") && !l.starts_with("  …"))
        .collect();
    assert!(listed.len() >= 2, "{screen}");
    for l in &listed {
        assert!(l.chars().count() <= 80, "{l:?}");
        let shown = l.split_whitespace().next().unwrap();
        assert!(
            shown.len() >= 8 && shown.len() < 36,
            "a prefix, not the full ID: {l:?}"
        );
        assert_eq!(
            ids.iter().filter(|id| id.starts_with(shown)).count(),
            1,
            "{shown} names one conversation"
        );
    }
    // The list and the skip lines (the question itself and the typed answer's echo are left
    // out: the echo's place on the screen depends on timing).
    let shown: Vec<&str> = screen
        .lines()
        .filter(|l| l.starts_with("  ") || l.contains("skipped"))
        .collect();
    insta::assert_snapshot!("confirmation_80", shown.join("\n"));
}

#[test]
fn the_progress_line_fits_80_columns_in_whole_words() {
    let env = Env::generated(40, 11, &[]);
    let mut c = std_cmd(env.dir.path());
    c.arg("--db")
        .arg(&env.db)
        .args([
            "compact",
            "--all-over",
            "0.01",
            "--idle",
            "0",
            "--keep-tokens",
            "1500",
        ])
        .args(["--yes", "--concurrency", "1", "--jobs", "1"])
        .env("NO_COLOR", "1");
    let (screen, code) = full_tty(c, 80, "");
    assert_eq!(code, 0, "{screen}");
    // The bar's lines as drawn: between carriage returns and newlines, escape sequences removed.
    let ansi = |s: &str| {
        let mut out = String::new();
        let mut chars = s.chars().peekable();
        while let Some(ch) = chars.next() {
            if ch == '\x1b' {
                if chars.peek() == Some(&'[') {
                    chars.next();
                    for c in chars.by_ref() {
                        if c.is_ascii_alphabetic() {
                            break;
                        }
                    }
                }
            } else {
                out.push(ch);
            }
        }
        out
    };
    let bars: Vec<String> = screen
        .split(['\r', '\n'])
        .map(ansi)
        .filter(|l| l.contains(" in flight"))
        .collect();
    assert!(!bars.is_empty(), "the bar was drawn:\n{screen:?}");
    for b in &bars {
        let b = b.trim_end();
        assert!(b.chars().count() <= 80, "{b:?}");
        assert!(
            b.ends_with("in flight") || b.ends_with("failed") || b.ends_with("tokens saved"),
            "whole words only: {b:?}"
        );
    }
}

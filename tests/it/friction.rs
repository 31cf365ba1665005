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

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
    // The skips are a diagnostic, on stderr (as `list` puts them), once.
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.lines().filter(|l| *l == line).count(), 1, "{err}");
    assert!(!text.contains(line.as_str()), "{text}");
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

/// `compact ARGS --json` on `env`: the report and the exit code.
fn compact_json(env: &Env, args: &[&str]) -> (serde_json::Value, i32) {
    let mut c = env.cmd();
    c.arg("compact").args(args).arg("--json");
    crate::common::json(c)
}

fn rows(doc: &serde_json::Value) -> &Vec<serde_json::Value> {
    doc["conversations"].as_array().expect("rows")
}

/// Stored utilization (currentContextWindow / maxContextWindow) of each conversation with both.
fn stored_utilization(env: &Env) -> std::collections::HashMap<String, (f64, i64)> {
    let c = env.conn();
    let mut s = c
        .prepare(
            "SELECT id, json_extract(usage, '$.currentContextWindow'), json_extract(usage, '$.maxContextWindow')
             FROM conversation_summaries WHERE json_extract(usage, '$.maxContextWindow') > 0",
        )
        .unwrap();
    s.query_map([], |r| {
        let cur: i64 = r.get(1)?;
        let max: i64 = r.get(2)?;
        Ok((r.get::<_, String>(0)?, (cur as f64 / max as f64, max)))
    })
    .unwrap()
    .map(|r| r.unwrap())
    .collect()
}

#[test]
fn a_conversation_at_or_under_the_target_is_not_compacted() {
    let env = Env::generated(12, 7, &[]);
    let util = stored_utilization(&env);
    let under: Vec<&String> = util
        .iter()
        .filter(|(_, (u, _))| *u > 0.05 && *u <= 0.2)
        .map(|(id, _)| id)
        .collect();
    assert!(
        !under.is_empty(),
        "the fixture has conversations at 5–20%: {util:?}"
    );
    let before = env.files_hash();
    // Target 0.2: every selected conversation at or under it is left alone, with the reason.
    let (doc, code) = compact_json(
        &env,
        &[
            "--all-over",
            "0.05",
            "--idle",
            "0",
            "--target",
            "0.2",
            "--yes",
        ],
    );
    assert_eq!(code, 0, "{doc}");
    for r in rows(&doc) {
        let id = r["id"].as_str().unwrap();
        let Some((u, _)) = util.get(id) else { continue };
        if *u <= 0.2 && r["tokens_before"].as_f64().is_some() {
            assert_eq!(r["status"], "skipped", "{id} at {u}: {r}");
            let detail = r["detail"].as_str().unwrap();
            assert!(
                detail.starts_with("under the target") && detail.contains("--target 0.2"),
                "{detail}"
            );
        }
    }
    for id in &under {
        assert!(
            rows(&doc).iter().any(|r| r["id"] == id.as_str()),
            "{id} selected"
        );
    }
    let written: i64 = env
        .conn()
        .query_row("SELECT count(*) FROM agent_db_compactions", [], |r| {
            r.get(0)
        })
        .unwrap_or(0);
    let over = util.values().filter(|(u, _)| *u > 0.2).count();
    if over == 0 {
        assert_eq!(written, 0);
        assert_eq!(
            env.files_hash(),
            before,
            "nothing compacted: the files are untouched"
        );
    }
    // --force compacts one anyway.
    let (doc, _) = compact_json(
        &env,
        &[
            under[0],
            "--target",
            "0.2",
            "--force",
            "--dry-run",
            "--keep-tokens",
            "1000",
        ],
    );
    assert_ne!(rows(&doc)[0]["status"], "skipped", "{doc}");
}

#[test]
fn before_and_after_utilization_share_their_base() {
    let env = Env::generated(12, 7, &[]);
    let util = stored_utilization(&env);
    let (doc, _) = compact_json(
        &env,
        &[
            "--all-over",
            "0.01",
            "--idle",
            "0",
            "--dry-run",
            "--force",
            "--keep-tokens",
            "2000",
        ],
    );
    let mut seen = 0;
    for r in rows(&doc).iter().filter(|r| r["status"] == "planned") {
        let id = r["id"].as_str().unwrap();
        let (u, max) = util[id];
        let b = r["utilization_before"].as_f64().unwrap();
        let a = r["utilization_after"].as_f64().unwrap();
        let tb = r["tokens_before"].as_f64().unwrap();
        let ta = r["tokens_after"].as_f64().unwrap();
        // Before is the stored utilization (`list`'s figure); after is in its units: the
        // overhead (the stored context less agent-db's count, 0 when the count is higher)
        // plus the new count, scaled to the stored context where agent-db counts higher.
        let current = u * max as f64;
        let overhead = (current - tb).max(0.0);
        let scale = if tb > current { current / tb } else { 1.0 };
        let want_b = u;
        let want_a = (overhead + ta * scale) / max as f64;
        assert!(
            (b - want_b).abs() < 0.0006,
            "{id}: before {b}, want {want_b}"
        );
        assert!(
            (a - want_a).abs() < 0.0006,
            "{id}: after {a}, want {want_a}"
        );
        if tb <= current {
            assert!(
                (b - u).abs() < 0.0006,
                "{id}: the stored figure when the count is lower"
            );
        }
        if ta < tb {
            assert!(a <= b, "{id}: {b} → {a} though it saves tokens");
        }
        seen += 1;
    }
    assert!(seen >= 2, "{doc}");
}

#[test]
fn a_compaction_that_saves_too_little_is_not_written() {
    let env = Env::generated(12, 7, &[]);
    // Find, with --force, a tail budget at which a conversation's compaction saves under 10%.
    let candidates = env.ids(
        "SELECT id FROM conversation_summaries WHERE json_extract(usage, '$.maxContextWindow') > 0
         AND message_count >= 8 ORDER BY id",
    );
    let mut found = None;
    'search: for id in &candidates {
        let (doc, _) = compact_json(&env, &[id, "--dry-run", "--force", "--keep-tokens", "1"]);
        let Some(total) = rows(&doc)[0]["tokens_before"].as_u64() else {
            continue;
        };
        for pct in [97, 95, 93, 90, 85] {
            let keep = (total * pct / 100).to_string();
            let (doc, _) =
                compact_json(&env, &[id, "--dry-run", "--force", "--keep-tokens", &keep]);
            let r = &rows(&doc)[0];
            if r["status"] != "planned" {
                continue;
            }
            let (b, a) = (
                r["tokens_before"].as_u64().unwrap(),
                r["tokens_after"].as_u64().unwrap(),
            );
            if b > a && ((b - a) as f64) < 0.1 * b as f64 {
                found = Some((id.clone(), keep, b, a));
                break 'search;
            }
        }
    }
    let (id, keep, b, a) = found.expect("a conversation whose compaction saves under 10%");
    let before = env.files_hash();
    let (doc, code) = compact_json(&env, &[&id, "--keep-tokens", &keep]);
    assert_eq!(code, 0, "{doc}");
    let r = &rows(&doc)[0];
    assert_eq!(r["status"], "skipped", "{r}");
    let detail = r["detail"].as_str().unwrap();
    assert!(
        detail.starts_with("not worth it")
            && detail.contains(&format!("({} → {})", thousands(b), thousands(a))),
        "{detail}"
    );
    assert!(detail.contains("compact.min_saving"), "{detail}");
    assert_eq!(env.files_hash(), before, "nothing was written");
    // The minimum is a setting: at 0 any saving is written.
    let mut c = env.cmd();
    c.args(["compact", &id, "--keep-tokens", &keep, "--json"])
        .env("AGENT_DB_MIN_SAVING", "0");
    let (doc, code) = crate::common::json(c);
    assert_eq!(code, 0);
    assert_eq!(rows(&doc)[0]["status"], "compacted", "{doc}");
    // Out of range: a configuration error.
    let out = env
        .cmd()
        .args(["compact", &id, "--dry-run"])
        .env("AGENT_DB_MIN_SAVING", "1.5")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3));
    assert!(String::from_utf8_lossy(&out.stderr).contains("compact.min_saving"));
}

#[test]
fn nothing_to_gain_says_what_to_do_and_shows_no_empty_token_figures() {
    let env = Env::generated(12, 7, &[]);
    let out = env
        .cmd()
        .args(["compact", "--follow", "--dry-run"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert!(text.contains("would compact 0"), "{text}");
    assert!(!text.contains("tokens 0 → 0"), "{text}");
    // The reason names what would compact it.
    assert!(
        text.contains("--force") || text.contains("--keep-tokens"),
        "a hint in the reason:\n{text}"
    );
}

/// The `compact` run the busy tests make, with `AGENT_DB_BUSY_WAIT` set to `wait`.
fn busy_run(env: &Env, wait: &str) -> (std::process::Output, std::time::Duration) {
    let started = std::time::Instant::now();
    let out = env
        .cmd()
        .args([
            "compact",
            "--all-over",
            "0.05",
            "--idle",
            "0",
            "--keep-tokens",
            "3000",
        ])
        .args(["--yes", "--quiet"])
        .env("AGENT_DB_BUSY_WAIT", wait)
        .output()
        .unwrap();
    (out, started.elapsed())
}

#[test]
fn a_store_busy_with_another_writer_is_reported_once_with_its_own_exit_code() {
    let env = Env::generated(12, 7, &[]);
    let conversations = env.dump("conversations");
    // Another process's writer: a second connection holding SQLite's write lock for the whole
    // run.
    let holder = env.conn();
    holder.execute_batch("BEGIN IMMEDIATE").unwrap();
    let (out, took) = busy_run(&env, "1s");
    holder.execute_batch("ROLLBACK").unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(9), "{stderr}");
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(
        lines.len(),
        1,
        "one line, not one per conversation:\n{stderr}"
    );
    // The one busy message of every command, naming the process that holds the lock (this
    // test), not a guess at who it is.
    assert_eq!(
        lines[0],
        format!(
            "error: {}: busy: process {} ({}) holds a lock on it; nothing was left half-written, rerun later",
            env.db.display(),
            std::process::id(),
            std::fs::read_to_string("/proc/self/comm").unwrap().trim()
        ),
        "{stderr}"
    );
    // Bounded: it waited about the second it was given, not per conversation.
    assert!(
        took >= std::time::Duration::from_millis(900) && took < std::time::Duration::from_secs(15),
        "{took:?}"
    );
    assert_eq!(env.dump("conversations"), conversations, "nothing changed");
    let audit: i64 = env
        .conn()
        .query_row("SELECT count(*) FROM agent_db_compactions", [], |r| {
            r.get(0)
        })
        .unwrap_or(0);
    assert_eq!(audit, 0);
    // A rerun once the writer is done compacts them.
    let (out, _) = busy_run(&env, "1s");
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_ne!(env.dump("conversations"), conversations);
}

#[test]
fn a_write_lock_released_within_the_wait_is_waited_for() {
    let env = Env::generated(12, 7, &[]);
    let db = env.db.clone();
    let (locked_tx, locked_rx) = std::sync::mpsc::channel();
    let holder = std::thread::spawn(move || {
        let c = rusqlite::Connection::open(&db).unwrap();
        c.execute_batch("BEGIN IMMEDIATE").unwrap();
        locked_tx.send(()).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(2500));
        c.execute_batch("ROLLBACK").unwrap();
    });
    locked_rx.recv().unwrap();
    let (out, took) = busy_run(&env, "30s");
    holder.join().unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        took >= std::time::Duration::from_secs(2),
        "it waited: {took:?}"
    );
    let audit: i64 = env
        .conn()
        .query_row("SELECT count(*) FROM agent_db_compactions", [], |r| {
            r.get(0)
        })
        .unwrap();
    assert!(audit >= 1);
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

/// `12,345`, as agent-db writes every count.
fn thousands(n: u64) -> String {
    agent_db::util::thousands(n as usize)
}

//! Tables that fit: `list`, `compact --dry-run`, `history` and `stats` rendered on a real
//! terminal 80 and 120 columns wide and piped, snapshotted with insta, and checked against the
//! store with SQL: every line fits, no ID is cut or wrapped, one line per conversation.

use std::process::Command;

use crate::common::{std_cmd, Env};
use crate::pty;

/// stdout of `agent-db --db <store> ARGS` on a terminal `cols` wide (no colour).
fn tty(env: &Env, args: &[&str], cols: u16) -> pty::TtyOut {
    let mut c: Command = std_cmd(env.dir.path());
    c.arg("--db").arg(&env.db).args(args).env("NO_COLOR", "1");
    pty::run(c, cols)
}

/// stdout of the same, piped.
fn piped(env: &Env, args: &[&str]) -> (String, i32) {
    let out = std_cmd(env.dir.path())
        .arg("--db")
        .arg(&env.db)
        .args(args)
        .output()
        .expect("run");
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        out.status.code().unwrap_or(-1),
    )
}

/// Lines of a fitted table: the header, the rule under it, the rows, then `[N] …` notes.
fn check_fitted(out: &str, cols: usize, ids: &[String], what: &str) {
    for line in out.lines() {
        assert!(
            line.chars().count() <= cols,
            "{what} at {cols}: a line is wider than the terminal:\n{line}\n{out}"
        );
    }
    let lines: Vec<&str> = out.lines().collect();
    assert!(lines[1].starts_with('─'), "{what}: header rule:\n{out}");
    for id in ids {
        let rows: Vec<&&str> = lines.iter().filter(|l| l.contains(&id[..8])).collect();
        assert_eq!(rows.len(), 1, "{what} at {cols}: {id} on one line:\n{out}");
        // The shown prefix is whole: the first word of its line is a prefix of the ID, at
        // least 8 characters, never broken by `…`.
        let first = rows[0].split_whitespace().find(|w| w.starts_with(&id[..8]));
        let shown = first.unwrap_or_else(|| panic!("{what}: {id}'s prefix:\n{out}"));
        assert!(
            shown.len() >= 8 && id.starts_with(shown),
            "{what}: {shown} vs {id}"
        );
    }
}

fn check_piped(out: &str, ids: &[String], what: &str) {
    assert!(
        !out.contains(['│', '─', '┌', '╞']),
        "{what}: box drawing in piped output:\n{out}"
    );
    for id in ids {
        assert_eq!(
            out.lines().filter(|l| l.contains(id.as_str())).count(),
            1,
            "{what}: full ID {id} on exactly one line:\n{out}"
        );
    }
}

/// Render `args` three ways, check each, and snapshot each as `{name}_{80,120,piped}`.
fn three_ways(env: &Env, args: &[&str], ids: &[String], name: &str, table_first: bool) {
    for cols in [80u16, 120] {
        let out = tty(env, args, cols);
        assert_eq!(out.code, 0, "{name} at {cols}: {}", out.stderr);
        if table_first {
            check_fitted(&out.stdout, cols as usize, ids, name);
        } else {
            for line in out.stdout.lines() {
                assert!(line.chars().count() <= cols as usize, "{name}: {line}");
            }
        }
        insta::assert_snapshot!(format!("{name}_{cols}"), redact(env, &out.stdout));
    }
    let (out, code) = piped(env, args);
    assert_eq!(code, 0, "{name} piped");
    check_piped(&out, ids, name);
    insta::assert_snapshot!(format!("{name}_piped"), redact(env, &out));
}

fn redact(env: &Env, s: &str) -> String {
    s.replace(&env.db.display().to_string(), "[STORE]")
}

fn fixture() -> Env {
    Env::generated(12, 7, &[])
}

#[test]
fn list_fits_80_and_120_and_pipes_plainly() {
    let env = fixture();
    let ids = env.ids("SELECT id FROM conversations");
    three_ways(&env, &["list"], &ids, "list", true);
}

#[test]
fn compact_dry_run_fits_and_notes_the_reasons() {
    let env = fixture();
    let args = [
        "compact",
        "--dry-run",
        "--all-over",
        "0.05",
        "--idle",
        "0",
        "--keep-tokens",
        "3000",
        // Every row, those the selection skipped included (they are otherwise one line per
        // reason under the totals).
        "--verbose",
    ];
    let mut c = env.cmd();
    c.args(args).arg("--json");
    let (doc, _) = crate::common::json(c);
    let ids: Vec<String> = doc["conversations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["id"].as_str().unwrap().to_string())
        .collect();
    assert!(ids.len() >= 3, "the fixture selects several conversations");
    three_ways(&env, &args, &ids, "compact_dry_run", true);
    // Skipped rows say `skipped [N]` and note N holds the reason.
    let (out, _) = piped(&env, &args);
    for r in doc["conversations"].as_array().unwrap() {
        if r["status"] == "skipped" {
            let line = out
                .lines()
                .find(|l| l.contains(r["id"].as_str().unwrap()))
                .unwrap();
            let n: String = line
                .split("skipped [")
                .nth(1)
                .and_then(|t| t.split(']').next())
                .expect("a note number")
                .to_string();
            let note = format!("[{n}] {}", r["detail"].as_str().unwrap());
            assert!(out.lines().any(|l| l == note), "{note} under:\n{out}");
        }
    }
}

/// A store with two compactions done (the clock is pinned, so ages are stable).
fn compacted() -> (Env, Vec<String>) {
    let env = fixture();
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
            "--yes",
            "--limit",
            "3",
            // One at a time: the audit rows (and `history`'s order) follow the selection, not
            // whichever parallel task finished first.
            "--jobs",
            "1",
            "--concurrency",
            "1",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let ids = env.ids("SELECT conversation_id FROM agent_db_compactions ORDER BY id");
    assert!(ids.len() >= 2, "{ids:?}");
    (env, ids)
}

#[test]
fn history_fits_and_names_conversations() {
    let (env, ids) = compacted();
    three_ways(&env, &["history"], &ids, "history", true);
    let (out, _) = piped(&env, &["history"]);
    let names = env.ids(&format!(
        "SELECT summary FROM conversations WHERE id IN ('{}')",
        ids.join("', '")
    ));
    for n in names {
        let head: String = n.split_whitespace().take(3).collect::<Vec<_>>().join(" ");
        assert!(
            out.contains(&head),
            "history shows the name {head:?}:\n{out}"
        );
    }
}

#[test]
fn stats_fit_and_pipe() {
    let (env, _) = compacted();
    three_ways(&env, &["stats"], &[], "stats", false);
}

/// A dry run of a store of 63 conversations: reasons that are the same sentence share one note
/// (`[N] K conversations: …`, the numbers that differ as ranges), every note wrapped at 80
/// columns under a hanging indent. Checked against the JSON report: every skipped row points at
/// a note whose sentence is its reason's, and there are as many notes as distinct sentences.
#[test]
fn compact_dry_run_groups_the_notes_of_many_conversations() {
    let env = Env::generated(63, 11, &[]);
    let args = [
        "compact",
        "--dry-run",
        "--all-over",
        "0.01",
        "--idle",
        "0",
        "--target",
        "0.02",
        "--verbose",
    ];
    let out = tty(&env, &args, 80);
    assert_eq!(out.code, 0, "{}", out.stderr);
    for line in out.stdout.lines() {
        assert!(line.chars().count() <= 80, "wider than 80:\n{line}");
    }
    insta::assert_snapshot!("compact_dry_run_63_80", redact(&env, &out.stdout));

    // The oracle: the reasons of the JSON report, grouped by their sentence with the digits
    // blanked out.
    let mut c = env.cmd();
    c.args(args).arg("--json");
    let (doc, _) = crate::common::json(c);
    let rows = doc["conversations"].as_array().unwrap();
    let mut reasons: Vec<(String, &str, String)> = Vec::new(); // (id, kind, text)
    for r in rows {
        let id = r["id"].as_str().unwrap().to_string();
        if let Some(d) = r["detail"].as_str() {
            reasons.push((id.clone(), "status", d.to_string()));
        }
        // A skipped row's `note` repeats its `detail` (the same reason, one note in the table).
        if let Some(n) = r["note"]
            .as_str()
            .filter(|n| Some(*n) != r["detail"].as_str())
        {
            reasons.push((id, "note", n.to_string()));
        }
    }
    let sentences: Vec<String> = reasons.iter().map(|r| blank_digits(&r.2)).collect();
    let distinct: std::collections::BTreeSet<&String> = sentences.iter().collect();
    assert!(
        reasons.len() >= 40 && distinct.len() <= 6,
        "the fixture gives many rows few sentences: {} reasons, {distinct:?}",
        reasons.len()
    );
    // The KEPT column's notes: kept/total of each kind the JSON's `retention.by_kind` does not
    // give as kept in full.
    for r in rows {
        let Some(by_kind) = r["retention"]["by_kind"].as_object() else {
            continue;
        };
        // In words: the share of each kind, `A`, `A and B` or `A, B and C`.
        let words = |k: &str| match k {
            "path" => "file paths",
            "command" => "commands",
            "error" => "error messages",
            "identifier" => "identifiers",
            "url" => "URLs",
            "rule" => "rules the user gave",
            "todo" => "open to-dos",
            _ => "latest instruction",
        };
        let low: Vec<String> = by_kind
            .iter()
            .filter(|(_, c)| c["kept"].as_u64() < c["total"].as_u64())
            .map(|(k, c)| {
                let share = 100.0 * c["kept"].as_f64().unwrap() / c["total"].as_f64().unwrap();
                format!("{share:.0}% of the {}", words(k))
            })
            .collect();
        if !low.is_empty() {
            let id = r["id"].as_str().unwrap().to_string();
            let list = match low.len() {
                1 => low[0].clone(),
                n => format!("{} and {}", low[..n - 1].join(", "), low[n - 1]),
            };
            reasons.push((
                id,
                "kept",
                format!("the new history keeps {list} of the summarized messages"),
            ));
        }
    }
    assert!(
        reasons.iter().filter(|r| r.1 == "kept").count() >= 10,
        "the fixture loses artifacts in many conversations"
    );
    let sentences: Vec<String> = reasons.iter().map(|r| blank_digits(&r.2)).collect();
    let distinct: std::collections::BTreeSet<&String> = sentences.iter().collect();

    // Piped, each note is one line: `[N] K conversations: sentence` (K > 1) or `[N] sentence`.
    let (piped_out, _) = piped(&env, &args);
    let notes: Vec<&str> = piped_out.lines().filter(|l| l.starts_with('[')).collect();
    assert_eq!(
        notes.len(),
        distinct.len(),
        "one note per sentence:\n{piped_out}"
    );
    for (id, kind, text) in &reasons {
        let line = piped_out
            .lines()
            .find(|l| l.starts_with(id.as_str()))
            .unwrap();
        // The row's marks in order: the USE column's note, the KEPT one, the STATUS one.
        let marks: Vec<&str> = line
            .split('[')
            .skip(1)
            .map(|t| t.split(']').next().unwrap())
            .collect();
        let has_note = reasons.iter().any(|r| r.0 == *id && r.1 == "note");
        let mark = match (*kind, marks.len()) {
            ("note", _) => marks[0],
            ("kept", _) => marks[usize::from(has_note)],
            (_, n) => marks[n - 1],
        };
        let note = notes
            .iter()
            .find(|n| n.starts_with(&format!("[{mark}] ")))
            .unwrap_or_else(|| panic!("note {mark} of {id}:\n{piped_out}"));
        let body = &note[mark.len() + 3..];
        let same = reasons
            .iter()
            .filter(|r| blank_digits(&r.2) == blank_digits(text))
            .count();
        let sentence = if same > 1 {
            let head = format!("{same} conversations: ");
            assert!(body.starts_with(&head), "{id}: {head:?} in {note}");
            &body[head.len()..]
        } else {
            body
        };
        assert_eq!(
            blank_digits(&sentence.replace('–', "")),
            blank_digits(text),
            "{id}'s note {mark} is its reason's sentence"
        );
        if same == 1 {
            assert_eq!(sentence, text, "a reason of its own is its note as it is");
        }
    }
}

/// `s` with each run of digits (and the `,` / `.` inside a number) turned into one `#`.
fn blank_digits(s: &str) -> String {
    let mut out = String::new();
    let mut in_number = false;
    for c in s.chars() {
        let part = c.is_ascii_digit() || (in_number && (c == ',' || c == '.'));
        if part && !in_number {
            out.push('#');
        } else if !part {
            out.push(c);
        }
        in_number = part;
    }
    out
}

//! Compacting only what is worth it: skipped conversations summarized one line per reason (and
//! listed with `--verbose`), the prompt counting the conversations the run works on, no
//! compaction of a conversation at or under the target, before and after utilization on one
//! base, and no compaction that saves too little.

use crate::common::{std_cmd, Env};
use crate::layouts_80::full_tty;

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

/// `12,345`, as agent-db writes every count.
fn thousands(n: u64) -> String {
    agent_db::util::thousands(n as usize)
}

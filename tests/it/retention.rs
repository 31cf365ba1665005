//! The retention score end to end: the real binary on a conversation this test plants (its own
//! SQL), the report's and the audit row's score, `history`, the `--min-retention` floor (a
//! hook-supplied summary that loses the user's rule is refused, byte for byte), and the artifact
//! ledger after a model summary that drops every path and command (a real HTTP server on
//! 127.0.0.1), and `--fallback` landing the next strategy when the model's result is under the
//! floor.

use std::os::unix::fs::PermissionsExt;

use agent_db_synth::SynthFormat;
use serde_json::{json, Value};

use crate::common::{Env, MiniLlm};

const RULE: &str = "Never push to the main branch without review.";
const N: usize = 8;

fn paths() -> Vec<String> {
    (0..N).map(|i| format!("src/planted/mod_{i}.rs")).collect()
}

fn commands() -> Vec<String> {
    (0..N)
        .map(|i| format!("cargo test -p planted_crate_{i}"))
        .collect()
}

fn filler(seed: usize, words: usize) -> String {
    (0..words)
        .map(|w| format!("word{}", (w * 7 + seed) % 97))
        .collect::<Vec<_>>()
        .join(" ")
}

fn first_message() -> String {
    format!("Refactor the loader. {RULE} Start with src/planted/entry.rs please.")
}

/// A Chat Completions history: the planted head (the user's rule, shell calls on planted
/// paths), then a long tail of plain prose.
fn planted() -> String {
    let mut m = vec![json!({"role": "user", "content": first_message()})];
    for (i, (p, c)) in paths().iter().zip(commands()).enumerate() {
        let id = format!("call_{i}");
        m.push(json!({"role": "assistant", "content": format!("Editing {p} next."), "tool_calls": [{"id": id, "type": "function",
            "function": {"name": "bash", "arguments": json!({"command": c}).to_string()}}]}));
        m.push(json!({"role": "tool", "tool_call_id": id, "content": format!("ok: checked {p}")}));
        m.push(json!({"role": "assistant", "content": filler(i, 300)}));
    }
    for i in 0..8 {
        m.push(json!({"role": "user", "content": format!("Continue with step {i}.")}));
        m.push(json!({"role": "assistant", "content": filler(100 + i, 300)}));
    }
    serde_json::to_string(&m).unwrap()
}

/// A generated store with one conversation, its history replaced by [`planted`].
fn env() -> (Env, String) {
    let env = Env::generated(1, 3, &[SynthFormat::OpenAiChat]);
    let id = env.ids("SELECT id FROM conversations")[0].clone();
    env.conn()
        .execute(
            "UPDATE conversations SET raw_messages = ?1 WHERE id = ?2",
            [planted(), id.clone()],
        )
        .unwrap();
    (env, id)
}

fn raw_messages(env: &Env, id: &str) -> String {
    env.conn()
        .query_row(
            "SELECT raw_messages FROM conversations WHERE id = ?1",
            [id],
            |r| r.get(0),
        )
        .unwrap()
}

fn run(mut c: assert_cmd::Command) -> (Value, i32, String) {
    let o = c.output().unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr).into_owned();
    let doc = serde_json::from_slice(&o.stdout).unwrap_or(Value::Null);
    (doc, o.status.code().unwrap_or(-1), stderr)
}

fn compact(env: &Env, id: &str, extra: &[&str]) -> (Value, i32, String) {
    let mut c = env.cmd();
    c.current_dir(env.dir.path())
        .args([
            "compact",
            id,
            "--keep-tokens",
            "2000",
            "--force",
            "--yes",
            "--json",
        ])
        .args(extra);
    run(c)
}

/// A `before_compaction` hook in the project that supplies `summary`.
fn summary_hook(env: &Env, summary: &str) {
    let dir = env.dir.path().join(".agent-db").join("hooks");
    std::fs::create_dir_all(&dir).unwrap();
    let answer = json!({ "summary": summary })
        .to_string()
        .replace('\'', "'\\''");
    let script = format!(
        "#!/bin/sh\ncase \"$1\" in\nhook)\n  printf '%s\\n' before_compaction\n  ;;\nrun)\n  cat >/dev/null\n  printf '%s\\n' '{answer}'\n  ;;\n*)\n  exit 1\n  ;;\nesac\n"
    );
    let p = dir.join("summarizer");
    std::fs::write(&p, script).unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// Every planted path and command, but not the user's first message (its rule).
fn summary_without_rule() -> String {
    format!(
        "Touched src/planted/entry.rs {}. Ran {}.",
        paths().join(" "),
        commands().join("; ")
    )
}

fn audit_retention(env: &Env) -> Vec<Option<String>> {
    let c = env.conn();
    let mut s = c
        .prepare("SELECT retention FROM agent_db_compactions ORDER BY id")
        .unwrap();
    let rows = s.query_map([], |r| r.get(0)).unwrap();
    rows.map(Result::unwrap).collect()
}

#[test]
fn min_retention_refuses_a_summary_that_loses_the_users_rule_and_writes_nothing() {
    let (env, id) = env();
    summary_hook(&env, &summary_without_rule());
    let before = env.files_hash();
    let (doc, code, err) = compact(
        &env,
        &id,
        &["--strategy", "extractive", "--min-retention", "0.95"],
    );
    let row = &doc["conversations"][0];
    assert_eq!(row["status"], "skipped", "{doc:#}\n{err}");
    let detail = row["detail"].as_str().unwrap();
    assert!(detail.contains("--min-retention 95.0%"), "{detail}");
    // The reason is the row's note too, as in the table (issue 41, item 16).
    assert_eq!(row["note"], row["detail"], "{row:#}");
    assert_eq!(
        row["retention"]["by_kind"]["rule"],
        json!({"kept": 0, "total": 1})
    );
    assert_eq!(
        row["retention"]["by_kind"]["path"],
        json!({"kept": 9, "total": 9})
    );
    assert!(row["retention"]["score"].as_f64().unwrap() < 0.95);
    assert!(row["retention"]["lost"]
        .as_array()
        .unwrap()
        .iter()
        .any(|a| a["text"] == RULE.trim_end_matches('.')));
    assert_eq!(code, 0, "a skip is not an error: {err}");
    assert_eq!(env.files_hash(), before, "nothing written");
    assert_eq!(raw_messages(&env, &id), planted());

    // The same summary with the user's words in it lands, and its score is stored.
    summary_hook(
        &env,
        &format!("{} {}", first_message(), summary_without_rule()),
    );
    let (doc, code, err) = compact(
        &env,
        &id,
        &["--strategy", "extractive", "--min-retention", "0.95"],
    );
    assert_eq!(
        doc["conversations"][0]["status"], "compacted",
        "{doc:#}\n{err}"
    );
    assert_eq!(code, 0);
    let stored = audit_retention(&env);
    assert_eq!(stored.len(), 1);
    let r: Value = serde_json::from_str(stored[0].as_deref().expect("a score")).unwrap();
    assert_eq!(r["by_kind"]["rule"], json!({"kept": 1, "total": 1}));
    assert_eq!(r["score"], doc["conversations"][0]["retention"]["score"]);
}

#[test]
fn min_retention_out_of_range_is_a_usage_error() {
    let (env, id) = env();
    for bad in ["1.5", "-0.1", "x"] {
        let (_, code, err) = compact(&env, &id, &["--min-retention", bad]);
        assert_eq!(code, 2, "{bad}: {err}");
    }
}

#[test]
fn a_model_summary_without_paths_or_commands_lands_with_all_of_them_in_its_ledger() {
    let (env, id) = env();
    let llm = MiniLlm::start();
    let mut c = env.cmd();
    c.current_dir(env.dir.path())
        .env("AGENT_DB_API_KEY", "x")
        .args([
            "compact",
            &id,
            "--keep-tokens",
            "2000",
            "--force",
            "--yes",
            "--json",
        ])
        .args([
            "--strategy",
            "llm",
            "--llm-provider",
            "openai",
            "--model",
            "test-model",
        ])
        .args(["--base-url", &llm.base_url()]);
    let (doc, code, err) = run(c);
    assert_eq!(code, 0, "{doc:#}\n{err}");
    assert!(llm.requests() > 0, "the model was asked");
    let row = &doc["conversations"][0];
    assert_eq!(row["status"], "compacted", "{doc:#}");
    // The model's answer names no path and no command; the stored history has all of them.
    let raw = raw_messages(&env, &id);
    assert!(raw.contains("The user asked for a refactor; it is done."));
    let planted: Vec<String> = paths().into_iter().chain(commands()).collect();
    let found = planted.iter().filter(|p| raw.contains(p.as_str())).count();
    assert!(
        found * 100 >= planted.len() * 99,
        "{found} of {}: {raw}",
        planted.len()
    );
    assert!(
        raw.contains(RULE.trim_end_matches('.')),
        "the user's rule is in the ledger"
    );
    for k in ["path", "command", "rule"] {
        let c = &row["retention"]["by_kind"][k];
        assert_eq!(c["kept"], c["total"], "{k}: {row:#}");
    }

    // `history` shows the stored score, as JSON and in its table.
    let mut h = env.cmd();
    h.args(["history", "--json"]);
    let (hist, code, err) = run(h);
    assert_eq!(code, 0, "{err}");
    assert_eq!(hist["compactions"][0]["retention"], row["retention"]);
    let o = env.cmd().args(["history"]).output().unwrap();
    let table = String::from_utf8_lossy(&o.stdout);
    assert!(table.contains("KEPT"), "{table}");
}

/// A head that read 400 files, then a tail of prose: more paths than the ledger's fixed 8,000
/// characters hold.
fn many_paths() -> (String, Vec<String>) {
    let paths: Vec<String> = (0..400)
        .map(|i| format!("src/sweep/module_{i:03}/handlers.rs"))
        .collect();
    let mut m =
        vec![json!({"role": "user", "content": "Sweep every handler module for the old API."})];
    for (i, p) in paths.iter().enumerate() {
        let id = format!("call_{i}");
        m.push(json!({"role": "assistant", "content": null, "tool_calls": [{"id": id, "type": "function",
            "function": {"name": "read_file", "arguments": json!({"path": p}).to_string()}}]}));
        m.push(json!({"role": "tool", "tool_call_id": id, "content": "fn handle() {}"}));
    }
    for i in 0..8 {
        m.push(json!({"role": "user", "content": format!("Continue with step {i}.")}));
        m.push(json!({"role": "assistant", "content": filler(100 + i, 300)}));
    }
    (serde_json::to_string(&m).unwrap(), paths)
}

/// A short model answer leaves the ledger the rest of the summary's room: all 400 paths fit
/// with the default `--max-summary-tokens`; with a smaller one the ledger stops within the room
/// and says how many it left out. The summary stays within the room either way (at three
/// characters a token, the rule the plan reserves by).
#[test]
fn the_ledger_takes_the_room_a_short_answer_leaves_and_says_what_did_not_fit() {
    let (env, id) = env();
    let (history, paths) = many_paths();
    let llm = MiniLlm::start();
    for (max_summary, all_fit) in [(None, true), (Some(1000usize), false)] {
        env.conn()
            .execute(
                "UPDATE conversations SET raw_messages = ?1 WHERE id = ?2",
                [history.clone(), id.clone()],
            )
            .unwrap();
        let max = max_summary.map(|m| m.to_string());
        let mut extra: Vec<&str> = Vec::new();
        if let Some(m) = &max {
            // Under the llm strategy's default floor (0.8) this one would not be written.
            extra.extend(["--max-summary-tokens", m, "--min-retention", "0"]);
        }
        let (doc, code, err) = llm_compact(&env, &id, &llm, &extra);
        assert_eq!(code, 0, "{doc:#}\n{err}");
        assert_eq!(doc["conversations"][0]["status"], "compacted", "{doc:#}");
        let raw = raw_messages(&env, &id);
        let msgs: Vec<Value> = serde_json::from_str(&raw).unwrap();
        let summary = msgs[0]["content"]
            .as_str()
            .expect("the summary message")
            .to_string();
        let listed = paths
            .iter()
            .filter(|p| summary.contains(p.as_str()))
            .count();
        let room_chars = 3 * (max_summary.unwrap_or(4096) + 2666);
        assert!(
            summary.len() <= room_chars + 1000,
            "{} chars",
            summary.len()
        );
        if all_fit {
            assert_eq!(listed, 400, "{summary}");
            assert!(!summary.contains("more not listed"));
        } else {
            assert!(listed > 100 && listed < 400, "{listed}");
            assert!(
                summary.contains(&format!(
                    "({} more not listed: over the ledger's size)",
                    400 - listed
                )),
                "{}",
                &summary[summary.len() - 200..]
            );
        }
        // Back to the original history for the next round.
        let out = env.cmd().args(["restore", &id]).output().unwrap();
        assert_eq!(
            out.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// [`planted`] with long tool outputs and a second user message in the head: two URLs,
/// identifiers and a number the model's answer drops and the artifact ledger does not carry (it
/// keeps paths, commands, to-dos and rules).
fn planted_with_references() -> String {
    let mut m: Vec<Value> = serde_json::from_str(&planted()).unwrap();
    // Long tool outputs, which prune replaces by placeholders.
    for (i, t) in m.iter_mut().filter(|t| t["role"] == "tool").enumerate() {
        let text = format!(
            "{}\n{}",
            t["content"].as_str().unwrap(),
            filler(200 + i, 600)
        );
        t["content"] = text.into();
    }
    m.insert(
        1,
        json!({"role": "user", "content": "Read https://example.test/spec/4711 and https://example.test/notes/815 first; LoaderV2, parse_config_v3, FooCache::evict and retry_budget_ms stay as they are (ticket 90210)."}),
    );
    serde_json::to_string(&m).unwrap()
}

fn llm_compact(env: &Env, id: &str, llm: &MiniLlm, extra: &[&str]) -> (Value, i32, String) {
    let base = llm.base_url();
    let mut args = vec![
        "--strategy",
        "llm",
        "--llm-provider",
        "openai",
        "--model",
        "test-model",
        "--base-url",
        &base,
    ];
    args.extend_from_slice(extra);
    let mut c = env.cmd();
    c.current_dir(env.dir.path())
        .env("AGENT_DB_API_KEY", "x")
        .args([
            "compact",
            id,
            "--keep-tokens",
            "2000",
            "--force",
            "--yes",
            "--json",
        ])
        .args(&args);
    run(c)
}

#[test]
fn fallback_lands_extractive_when_the_model_summary_is_under_the_floor_and_restore_undoes_it() {
    let (env, id) = env();
    let original = planted_with_references();
    env.conn()
        .execute(
            "UPDATE conversations SET raw_messages = ?1 WHERE id = ?2",
            [original.clone(), id.clone()],
        )
        .unwrap();
    let llm = MiniLlm::start();
    let before = env.files_hash();

    // Without --fallback: the model's summary (its ledger keeps the rule, paths and commands,
    // not the URLs and identifiers) is under the floor, and nothing is written.
    let (doc, code, err) = llm_compact(&env, &id, &llm, &["--min-retention", "0.95"]);
    let row = &doc["conversations"][0];
    assert_eq!(code, 0, "{err}");
    assert_eq!(row["status"], "skipped", "{doc:#}\n{err}");
    assert_eq!(row["strategy"], "llm");
    assert!(row.get("fallback").is_none(), "{row:#}");
    assert_eq!(row["retention"]["by_kind"]["url"]["kept"], 0, "{row:#}");
    assert_eq!(env.files_hash(), before, "nothing written");

    // The same with no floor set: the llm default (0.8) refuses it too.
    let (doc, _, err) = llm_compact(&env, &id, &llm, &[]);
    let row = &doc["conversations"][0];
    assert_eq!(row["status"], "skipped", "{doc:#}\n{err}");
    assert!(
        row["detail"]
            .as_str()
            .unwrap()
            .contains("--min-retention 80.0%"),
        "{row:#}"
    );
    assert_eq!(env.files_hash(), before, "nothing written");

    // With --fallback: extractive keeps the user's words and lands; the row says why.
    let asked = llm.requests();
    let (doc, code, err) = llm_compact(&env, &id, &llm, &["--min-retention", "0.95", "--fallback"]);
    assert_eq!(code, 0, "{err}");
    let row = &doc["conversations"][0];
    assert_eq!(row["status"], "compacted", "{doc:#}\n{err}");
    assert!(llm.requests() > asked, "the model was asked first");
    assert_eq!(row["strategy"], "extractive");
    assert_eq!(row["fallback"]["from"], "llm");
    let reason = row["fallback"]["reason"].as_str().unwrap();
    assert!(
        reason.starts_with("llm: retention ") && reason.ends_with("< 95.0%"),
        "{reason}"
    );
    assert!(row["retention"]["score"].as_f64().unwrap() >= 0.95);
    // What was written, read with the test's own SQL: the extractive head, not the model's.
    let raw = raw_messages(&env, &id);
    assert_ne!(raw, original);
    assert!(!raw.contains("The user asked for a refactor; it is done."));
    for s in [
        "https://example.test/spec/4711",
        "https://example.test/notes/815",
        "LoaderV2",
        "parse_config_v3",
        RULE.trim_end_matches('.'),
    ] {
        assert!(raw.contains(s), "{s} is kept: {raw}");
    }
    let (strategy, details): (String, String) = env
        .conn()
        .query_row(
            "SELECT strategy, details FROM agent_db_compactions",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    assert_eq!(strategy, "extractive");
    let details: Value = serde_json::from_str(&details).unwrap();
    assert_eq!(details["fallback"], row["fallback"]);

    // Restore gives the original history back, byte for byte.
    let o = env
        .cmd()
        .args(["restore", "--all-since", "1h"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(raw_messages(&env, &id), original);

    // The table names the strategy that landed, with a note saying why.
    let o = env
        .cmd()
        .current_dir(env.dir.path())
        .env("AGENT_DB_API_KEY", "x")
        .args(["compact", &id, "--keep-tokens", "2000", "--force", "--yes"])
        .args(["--strategy", "llm", "--llm-provider", "openai"])
        .args(["--model", "test-model", "--base-url", &llm.base_url()])
        .args(["--min-retention", "0.95", "--fallback"])
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{out}");
    assert!(out.contains("extractive ["), "{out}");
    assert!(out.contains("fell back: llm: retention "), "{out}");
}

#[test]
fn min_retention_from_the_environment_or_file_out_of_range_is_a_config_error() {
    let (env, id) = env();
    let before = env.files_hash();
    let mut c = env.cmd();
    c.current_dir(env.dir.path())
        .env("AGENT_DB_MIN_RETENTION", "1.5")
        .args([
            "compact",
            &id,
            "--strategy",
            "extractive",
            "--yes",
            "--json",
        ]);
    let (_, code, err) = run(c);
    assert_eq!(code, 3, "{err}");
    assert!(err.contains("compact.min_retention"), "{err}");
    let cfg = env.dir.path().join("c.toml");
    std::fs::write(&cfg, "[compact]\nmin_retention = -1\n").unwrap();
    let mut c = env.cmd();
    c.current_dir(env.dir.path())
        .arg("--config")
        .arg(&cfg)
        .args([
            "compact",
            &id,
            "--strategy",
            "extractive",
            "--yes",
            "--json",
        ]);
    let (_, code, err) = run(c);
    assert_eq!(code, 3, "{err}");
    assert_eq!(env.files_hash(), before, "nothing written");

    // In range, the file's floor holds for extractive too, and the environment beats it.
    std::fs::write(&cfg, "[compact]\nmin_retention = 1\n").unwrap();
    summary_hook(&env, &summary_without_rule());
    let mut c = env.cmd();
    c.current_dir(env.dir.path())
        .arg("--config")
        .arg(&cfg)
        .args(["compact", &id, "--keep-tokens", "2000", "--force"])
        .args(["--strategy", "extractive", "--yes", "--json"]);
    let (doc, code, err) = run(c);
    assert_eq!(code, 0, "{err}");
    let detail = doc["conversations"][0]["detail"]
        .as_str()
        .unwrap_or_default();
    assert!(detail.contains("--min-retention 100.0%"), "{doc:#}");
    let mut c = env.cmd();
    c.current_dir(env.dir.path())
        .arg("--config")
        .arg(&cfg)
        .env("AGENT_DB_MIN_RETENTION", "0.5")
        .args(["compact", &id, "--keep-tokens", "2000", "--force"])
        .args(["--strategy", "extractive", "--yes", "--json"]);
    let (doc, code, err) = run(c);
    assert_eq!(code, 0, "{err}");
    assert_eq!(doc["conversations"][0]["status"], "compacted", "{doc:#}");
}

/// The retention of one compaction is the same, kind by kind, on every output path: the dry
/// run's JSON and table, the compaction's JSON, the audit row (the test's SQL), `history --json`
/// and `history`'s table; for every strategy (prune, extractive, llm against a model on
/// 127.0.0.1, a hook's summary). The totals are what [`planted_with_references`] holds (9 paths: the 8 planted and
/// `src/planted/entry.rs`; 8 commands; 1 rule), the score is kept/total over the kinds, and
/// each strategy keeps what it is defined to keep.
#[test]
fn every_output_path_carries_the_same_retention_by_kind_for_every_strategy() {
    let llm = MiniLlm::start();
    let base = llm.base_url();
    for strategy in ["prune", "extractive", "llm", "hook"] {
        let (env, id) = env();
        // Long tool outputs, so that prune has something to replace.
        env.conn()
            .execute(
                "UPDATE conversations SET raw_messages = ?1 WHERE id = ?2",
                [planted_with_references(), id.clone()],
            )
            .unwrap();
        let args: Vec<&str> = match strategy {
            "llm" => vec![
                "--strategy",
                "llm",
                "--llm-provider",
                "openai",
                "--model",
                "test-model",
                "--base-url",
                &base,
                "--min-retention",
                "0",
            ],
            "hook" => {
                summary_hook(&env, &summary_without_rule());
                vec!["--strategy", "extractive"]
            }
            s => vec!["--strategy", s],
        };
        let pct = |r: &Value| format!("{:.0}%", r["score"].as_f64().unwrap() * 100.0);
        let mut dry_args = args.clone();
        dry_args.push("--dry-run");
        let (dry, code, err) = compact(&env, &id, &dry_args);
        assert_eq!(code, 0, "{strategy}: {err}");
        let mut c = env.cmd();
        c.env("AGENT_DB_API_KEY", "x")
            .current_dir(env.dir.path())
            .args(["compact", &id, "--keep-tokens", "2000", "--force", "--yes"])
            .args(&dry_args);
        let dry_table = String::from_utf8(c.output().unwrap().stdout).unwrap();

        let (doc, code, err) = {
            let mut c = env.cmd();
            c.current_dir(env.dir.path())
                .env("AGENT_DB_API_KEY", "x")
                .args([
                    "compact",
                    &id,
                    "--keep-tokens",
                    "2000",
                    "--force",
                    "--yes",
                    "--json",
                ])
                .args(&args);
            run(c)
        };
        assert_eq!(code, 0, "{strategy}: {err}");
        let row = &doc["conversations"][0];
        assert_eq!(row["status"], "compacted", "{strategy}: {doc:#}");
        let r = &row["retention"];
        let by = r["by_kind"].as_object().unwrap();
        assert_eq!(by["path"]["total"], 9, "{strategy}: {r:#}");
        assert_eq!(by["command"]["total"], 8, "{strategy}: {r:#}");
        assert_eq!(by["rule"]["total"], 1, "{strategy}: {r:#}");
        let (kept, total) = by.values().fold((0, 0), |(k, t), c| {
            (
                k + c["kept"].as_u64().unwrap(),
                t + c["total"].as_u64().unwrap(),
            )
        });
        assert!((r["score"].as_f64().unwrap() - kept as f64 / total as f64).abs() < 1e-9);
        let all = |k: &str| by[k]["kept"] == by[k]["total"];
        match strategy {
            // Prune replaces tool results only; the ledger keeps paths, commands and rules.
            "prune" | "llm" => assert!(all("path") && all("command") && all("rule"), "{r:#}"),
            "extractive" => assert!(all("rule"), "{r:#}"),
            _ => {
                assert!(all("path") && all("command"), "{r:#}");
                assert_eq!(
                    by["rule"]["kept"], 0,
                    "the hook's summary lost the rule: {r:#}"
                );
            }
        }
        // The dry run (exact for offline strategies; a model's summary is only estimated, and a
        // dry run runs no hook).
        if strategy == "prune" || strategy == "extractive" {
            assert_eq!(
                &dry["conversations"][0]["retention"], r,
                "{strategy}: dry run"
            );
            assert!(dry_table.contains(&pct(r)), "{strategy}: {dry_table}");
        }
        // The audit row, read with the test's SQL, and history's JSON and table.
        let stored: Value =
            serde_json::from_str(audit_retention(&env)[0].as_deref().unwrap()).unwrap();
        assert_eq!(&stored, r, "{strategy}: audit row");
        let mut h = env.cmd();
        h.args(["history", "--json"]);
        let (hist, code, err) = run(h);
        assert_eq!(code, 0, "{err}");
        assert_eq!(
            &hist["compactions"][0]["retention"], r,
            "{strategy}: history"
        );
        let o = env.cmd().args(["history"]).output().unwrap();
        let table = String::from_utf8_lossy(&o.stdout);
        assert!(table.contains(&pct(r)), "{strategy}: {table}");
    }
}

//! Settings precedence end to end: `[compact] keep_tokens` from the environment
//! (`AGENT_DB_KEEP_TOKENS`) is used by `compact` and reported by `config` with its layer, a flag
//! beats it; and `agent-db config` names the right layer for every setting that has an
//! environment variable, and for the file-only ones.

use serde_json::Value;

use crate::common::{json, Env};

struct Out {
    code: i32,
    stdout: String,
    stderr: String,
}

fn run(c: &mut assert_cmd::Command) -> Out {
    let o = c.output().expect("run");
    Out {
        code: o.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
    }
}

/// The `config` table's row for `key`: (value, from). Values here hold no spaces; the layer
/// is the rest of the line.
fn row(table: &str, key: &str) -> (String, String) {
    let line = table
        .lines()
        .find(|l| l.split_whitespace().next() == Some(key))
        .unwrap_or_else(|| panic!("no {key} row in:\n{table}"));
    let mut rest = line[key.len()..].trim_start().splitn(2, ' ');
    let value = rest.next().unwrap_or_default().to_string();
    (value, rest.next().unwrap_or_default().trim().to_string())
}

/// What a dry run plans for each conversation: (id, messages summarized, messages kept).
fn plans(
    env: &Env,
    keep_env: Option<&str>,
    keep_flag: Option<&str>,
) -> Vec<(String, Value, Value)> {
    let mut c = env.cmd();
    c.args([
        "compact",
        "--all-over",
        "0",
        "--idle",
        "0",
        "--dry-run",
        "--json",
    ])
    .args(["--strategy", "extractive"]);
    if let Some(k) = keep_env {
        c.env("AGENT_DB_KEEP_TOKENS", k);
    }
    if let Some(k) = keep_flag {
        c.args(["--keep-tokens", k]);
    }
    let (doc, code) = json(c);
    assert_eq!(code, 0, "{doc}");
    doc["conversations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["id"].as_str().unwrap().to_string(),
                r["messages_summarized"].clone(),
                r["messages_kept"].clone(),
            )
        })
        .collect()
}

#[test]
fn keep_tokens_comes_from_the_environment_and_says_so() {
    let env = Env::generated(6, 21, &[]);
    let cfg = env.file("c.toml", b"[compact]\nkeep_tokens = 300\n");

    // The file alone.
    let mut c = env.cmd();
    c.arg("--config").arg(&cfg).args(["config", "--json"]);
    let (doc, code) = json(c);
    assert_eq!(code, 0);
    assert_eq!(doc["settings"]["keep_tokens"], 300);
    assert_eq!(
        doc["settings"]["sources"]["compact.keep_tokens"],
        "config file"
    );

    // The environment beats the file, in the JSON and in the table.
    let mut c = env.cmd();
    c.arg("--config")
        .arg(&cfg)
        .env("AGENT_DB_KEEP_TOKENS", "1500")
        .args(["config", "--json"]);
    let (doc, _) = json(c);
    assert_eq!(doc["settings"]["keep_tokens"], 1500);
    assert_eq!(
        doc["settings"]["sources"]["compact.keep_tokens"],
        "environment"
    );
    let out = run(env.cmd().env("AGENT_DB_KEEP_TOKENS", "1500").arg("config"));
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(
        row(&out.stdout, "compact.keep_tokens"),
        ("1500".to_string(), "environment".to_string())
    );

    // A malformed value is a configuration error naming the variable.
    let out = run(env.cmd().env("AGENT_DB_KEEP_TOKENS", "lots").arg("config"));
    assert_eq!(out.code, 3);
    assert!(
        out.stderr.contains("AGENT_DB_KEEP_TOKENS"),
        "{}",
        out.stderr
    );

    // compact plans with it exactly as with the flag, and the flag beats it.
    let small = plans(&env, None, Some("300"));
    let large = plans(&env, None, Some("1500"));
    assert_ne!(small, large, "the two budgets must plan differently");
    assert_eq!(plans(&env, Some("1500"), None), large);
    assert_eq!(plans(&env, Some("1500"), Some("300")), small);
}

#[test]
fn config_names_the_layer_of_every_setting() {
    let env = Env::generated(1, 2, &[]);
    let cfg = env.file(
        "c.toml",
        br#"
[hooks]
dirs = ["/nowhere"]
fail_open = true
[store]
agent = "kodelet"
path = "/nowhere/storage.db"
[prices."m"]
input_per_mtok = 1
output_per_mtok = 2
[context_limits]
"m" = 1000
"#,
    );
    // Every setting with a variable, set through it (and nothing else), reports `environment`.
    let vars = [
        ("llm.provider", "AGENT_DB_LLM_PROVIDER", "openai"),
        ("llm.model", "AGENT_DB_MODEL", "m"),
        ("llm.base_url", "AGENT_DB_BASE_URL", "http://127.0.0.1:9/v1"),
        (
            "llm.max_summary_tokens",
            "AGENT_DB_MAX_SUMMARY_TOKENS",
            "500",
        ),
        ("llm.summary_context", "AGENT_DB_SUMMARY_CONTEXT", "9000"),
        ("llm.timeout", "AGENT_DB_TIMEOUT", "7s"),
        ("llm.max_retries", "AGENT_DB_MAX_RETRIES", "1"),
        ("llm.recipe", "AGENT_DB_RECIPE", "brief"),
        ("llm.instructions", "AGENT_DB_INSTRUCTIONS", "x"),
        ("llm.max_cost", "AGENT_DB_MAX_COST", "1.5"),
        ("compact.concurrency", "AGENT_DB_CONCURRENCY", "2"),
        ("compact.keep_tokens", "AGENT_DB_KEEP_TOKENS", "800"),
        ("compact.target", "AGENT_DB_TARGET", "0.25"),
        ("compact.min_retention", "AGENT_DB_MIN_RETENTION", "0.5"),
        (
            "compact.stall_min_new_messages",
            "AGENT_DB_STALL_MIN_NEW_MESSAGES",
            "3",
        ),
        (
            "compact.stall_min_saving",
            "AGENT_DB_STALL_MIN_SAVING",
            "0.5",
        ),
        ("hooks.timeout", "AGENT_DB_HOOK_TIMEOUT", "9s"),
    ];
    let mut c = env.cmd();
    c.arg("--config").arg(&cfg).arg("config");
    for (_, var, value) in vars {
        c.env(var, value);
    }
    let out = run(&mut c);
    assert_eq!(out.code, 0, "{}", out.stderr);
    for (key, _, value) in vars {
        assert_eq!(
            row(&out.stdout, key),
            (value.to_string(), "environment".to_string()),
            "{key}:\n{}",
            out.stdout
        );
    }
    // The file-only settings report the file.
    for key in [
        "hooks.dirs",
        "hooks.fail_open",
        "store.agent",
        "store.path",
        "prices",
        "context_limits",
    ] {
        assert_eq!(
            row(&out.stdout, key).1,
            "config file",
            "{key}:\n{}",
            out.stdout
        );
    }
    assert_eq!(row(&out.stdout, "config_file").1, "flag");
    // Nothing set: every row says `default` (the key's row names no source).
    let out = run(env.cmd().arg("config"));
    for line in out.stdout.lines().skip(1) {
        let key = line.split_whitespace().next().unwrap_or_default();
        let want = if key == "llm.api_key" { "-" } else { "default" };
        assert_eq!(row(&out.stdout, key).1, want, "{line}");
    }
}

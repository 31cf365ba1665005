//! Compaction hooks (src/hooks.rs, docs/hooks.md), end to end: real executable `#!/bin/sh`
//! hooks written into the test's temporary directory, found in `./.agent-db/hooks/` (the binary
//! runs with its current directory in the temp dir), in `$XDG_CONFIG_HOME/agent-db/hooks/` or in
//! a `[hooks] dirs` entry, and run by the `agent-db` binary.
//!
//! The scripts need only `/bin/sh` (with its `export -p`), `cat`, `printf`, `sleep`, `touch` and
//! `pwd`; they never read the payload with jq, so the tests do not depend on it.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use agent_db_synth::SynthFormat;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

use crate::common::Env;

const BEFORE: &str = "before_compaction";
const AFTER: &str = "after_compaction";

/// The flags of an offline compact run with a small kept tail, so generated conversations compact.
const OFFLINE: [&str; 6] = [
    "--strategy",
    "extractive",
    "--keep-tokens",
    "2000",
    "--yes",
    "--json",
];

// ---------------------------------------------------------------------------------------------
// Fixtures and helpers
// ---------------------------------------------------------------------------------------------

/// A generated store and the ids of its `n` longest conversations (most messages first). The
/// recorded working directories are cleared: a hook runs in the conversation's `cwd` when that
/// directory exists, and the generator's `/home/dev/projects/...` might exist on a developer's
/// machine.
fn store(seed: u64, n: usize) -> (Env, Vec<String>) {
    let env = Env::generated(
        8,
        seed,
        &[
            SynthFormat::Anthropic,
            SynthFormat::OpenAiChat,
            SynthFormat::OpenAiResponses,
        ],
    );
    set(&env, "cwd", None, None);
    let ids = env.ids(&format!(
        "SELECT id FROM conversations ORDER BY json_array_length(raw_messages) DESC, id LIMIT {n}"
    ));
    assert_eq!(ids.len(), n);
    (env, ids)
}

/// Set `column` of conversation `id` (of every conversation with `None`) in `conversations` and
/// in `conversation_summaries`, as kodelet keeps them in sync: agent-db reads a conversation's
/// usage and cwd from its summary row (stores.md).
fn set(env: &Env, column: &str, value: Option<&str>, id: Option<&str>) {
    let c = env.conn();
    for table in ["conversations", "conversation_summaries"] {
        match id {
            Some(id) => c.execute(
                &format!("UPDATE {table} SET {column} = ?1 WHERE id = ?2"),
                rusqlite::params![value, id],
            ),
            None => c.execute(&format!("UPDATE {table} SET {column} = ?1"), [value]),
        }
        .expect("update");
    }
}

fn project_hooks(env: &Env) -> PathBuf {
    env.dir.path().join(".agent-db").join("hooks")
}

fn user_hooks(env: &Env) -> PathBuf {
    env.dir
        .path()
        .join(".config")
        .join("agent-db")
        .join("hooks")
}

/// A hook script: `hook` prints `events`, one per line; `run` runs the shell `body`.
fn script(events: &[&str], body: &str) -> String {
    format!(
        "#!/bin/sh\ncase \"$1\" in\nhook)\n  printf '%s\\n' {}\n  ;;\nrun)\n{body}\n  ;;\n*)\n  exit 1\n  ;;\nesac\n",
        events.join(" ")
    )
}

/// Write `text` to `dir/name` with `mode`.
fn put(dir: &Path, name: &str, text: &str, mode: u32) -> PathBuf {
    std::fs::create_dir_all(dir).expect("hook dir");
    let p = dir.join(name);
    std::fs::write(&p, text).expect("write hook");
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode)).expect("chmod");
    p
}

/// An executable hook (mode 755) in `dir`.
fn hook(dir: &Path, name: &str, events: &[&str], body: &str) -> PathBuf {
    put(dir, name, &script(events, body), 0o755)
}

/// A before hook that reads its payload and prints `answer` (nothing when empty).
fn answering(dir: &Path, name: &str, answer: &str) -> PathBuf {
    let body = if answer.is_empty() {
        "  cat >/dev/null".to_string()
    } else {
        format!("  cat >/dev/null\n  printf '%s\\n' '{answer}'")
    };
    hook(dir, name, &[BEFORE], &body)
}

/// A shell word for `p`, single-quoted.
fn q(p: &Path) -> String {
    format!("'{}'", p.display().to_string().replace('\'', "'\\''"))
}

/// `agent-db --db <store>` (hermetic, see `Env::cmd`) running in the temp dir, so
/// `./.agent-db/hooks/` is the temp dir's.
fn agent(env: &Env) -> assert_cmd::Command {
    let mut c = env.cmd();
    c.current_dir(env.dir.path());
    c
}

struct Out {
    doc: Value,
    code: i32,
    stderr: String,
}

/// Run, parse stdout as JSON and keep stderr.
fn run(mut c: assert_cmd::Command) -> Out {
    let out = c.output().expect("run agent-db");
    let code = out.status.code().unwrap_or(-1);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let doc = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "stdout is not JSON ({e}); exit {code}\nstdout: {}\nstderr: {stderr}",
            String::from_utf8_lossy(&out.stdout)
        )
    });
    Out { doc, code, stderr }
}

/// `compact IDS… <OFFLINE flags>` in the temp dir.
fn compact(env: &Env, ids: &[&str], extra: &[&str]) -> Out {
    let mut c = agent(env);
    c.arg("compact").args(ids).args(OFFLINE).args(extra);
    run(c)
}

/// The report row of `id`.
fn row<'a>(doc: &'a Value, id: &str) -> &'a Value {
    doc["conversations"]
        .as_array()
        .expect("conversations")
        .iter()
        .find(|r| r["id"] == id)
        .unwrap_or_else(|| panic!("no row for {id}: {doc:#}"))
}

/// A hook record as the report and the audit log show it.
fn rec(hook: &str, event: &str, decision: &str, detail: Option<&str>) -> Value {
    let mut v = json!({"hook": hook, "event": event, "decision": decision});
    if let Some(d) = detail {
        v["detail"] = d.into();
    }
    v
}

/// The audit rows (`agent_db_compactions`), oldest first; none when the table was never created.
fn audit(env: &Env) -> Vec<Value> {
    let c = env.conn();
    let exists: i64 = c
        .query_row("SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = 'agent_db_compactions'", [], |r| r.get(0))
        .expect("sqlite_master");
    if exists == 0 {
        return Vec::new();
    }
    let mut s = c
        .prepare(
            "SELECT id, conversation_id, strategy, model, messages_before, messages_after, tokens_before, tokens_after, summary_sha256, details
             FROM agent_db_compactions ORDER BY id",
        )
        .expect("prepare");
    let rows = s
        .query_map([], |r| {
            Ok(json!({
                "id": r.get::<_, i64>(0)?,
                "conversation_id": r.get::<_, String>(1)?,
                "strategy": r.get::<_, String>(2)?,
                "model": r.get::<_, Option<String>>(3)?,
                "messages_before": r.get::<_, i64>(4)?,
                "messages_after": r.get::<_, i64>(5)?,
                "tokens_before": r.get::<_, i64>(6)?,
                "tokens_after": r.get::<_, i64>(7)?,
                "summary_sha256": r.get::<_, String>(8)?,
                "details": serde_json::from_str::<Value>(&r.get::<_, String>(9)?).expect("details JSON"),
            }))
        })
        .expect("query");
    rows.map(|r| r.expect("row")).collect()
}

/// Every string in `v`, depth first.
fn strings(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::String(s) => out.push(s.clone()),
        Value::Array(a) => a.iter().for_each(|x| strings(x, out)),
        Value::Object(o) => o.values().for_each(|x| strings(x, out)),
        _ => {}
    }
}

/// The strings of the first stored message of `id` (the summary message after a compaction),
/// whatever the wire format.
fn first_message_strings(env: &Env, id: &str) -> Vec<String> {
    let raw: String = env
        .conn()
        .query_row(
            "SELECT raw_messages FROM conversations WHERE id = ?1",
            [id],
            |r| r.get(0),
        )
        .expect("raw_messages");
    let v: Value = serde_json::from_str(&raw).expect("raw_messages JSON");
    let mut out = Vec::new();
    strings(&v[0], &mut out);
    out
}

fn sha256_hex(s: &str) -> String {
    hex::encode(Sha256::digest(s.as_bytes()))
}

/// Whether process `pid` still runs (a zombie, killed but not yet reaped, does not count).
fn alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => {
            let state = stat
                .rsplit_once(')')
                .map(|(_, rest)| rest.trim_start().chars().next());
            !matches!(state, Some(Some('Z' | 'X')))
        }
        Err(_) if Path::new("/proc/self/stat").exists() => false,
        Err(_) => std::process::Command::new("kill")
            .args(["-0", &pid.to_string()])
            .stderr(std::process::Stdio::null())
            .status()
            .is_ok_and(|s| s.success()),
    }
}

fn read_pid(p: &Path) -> u32 {
    std::fs::read_to_string(p)
        .unwrap_or_else(|e| panic!("{}: {e}", p.display()))
        .trim()
        .parse()
        .expect("a pid")
}

/// A JSON file a hook wrote.
fn read_json(p: &Path) -> (String, Value) {
    let text = std::fs::read_to_string(p)
        .unwrap_or_else(|e| panic!("{} (did the hook run?): {e}", p.display()));
    let v = serde_json::from_str(&text)
        .unwrap_or_else(|e| panic!("{}: not JSON ({e}): {text}", p.display()));
    (text, v)
}

// ---------------------------------------------------------------------------------------------
// Decisions
// ---------------------------------------------------------------------------------------------

#[test]
fn allowing_hooks_let_the_compaction_through_and_are_recorded() {
    let (env, ids) = store(21, 1);
    let id = ids[0].as_str();
    let dir = project_hooks(&env);
    answering(&dir, "10-silent", "");
    answering(&dir, "20-empty-object", "{}");

    let out = compact(&env, &[id], &[]);
    assert_eq!(out.code, 0, "{:#}\n{}", out.doc, out.stderr);
    let r = row(&out.doc, id);
    assert_eq!(r["status"], "compacted", "{r:#}");
    assert_eq!(r["strategy"], "extractive");
    let expected = json!([
        rec("10-silent", BEFORE, "allow", None),
        rec("20-empty-object", BEFORE, "allow", None)
    ]);
    assert_eq!(r["hooks"], expected);
    assert!(
        out.stderr
            .contains("hooks: 10-silent (before_compaction), 20-empty-object (before_compaction)"),
        "{}",
        out.stderr
    );

    let a = audit(&env);
    assert_eq!(a.len(), 1);
    assert_eq!(a[0]["id"], r["compaction_id"]);
    assert_eq!(a[0]["strategy"], "extractive");
    assert_eq!(
        a[0]["details"]["hooks"], expected,
        "the audit row records the decisions"
    );
}

/// Nothing of the store changed: the conversations, their summaries and the file bytes.
struct Untouched {
    hash: String,
    conversations: Vec<Vec<String>>,
    summaries: Vec<Vec<String>>,
}

impl Untouched {
    fn take(env: &Env) -> Untouched {
        Untouched {
            hash: env.files_hash(),
            conversations: env.dump("conversations"),
            summaries: env.dump("conversation_summaries"),
        }
    }

    fn check(&self, env: &Env) {
        assert_eq!(
            env.dump("conversations"),
            self.conversations,
            "conversations changed"
        );
        assert_eq!(
            env.dump("conversation_summaries"),
            self.summaries,
            "summaries changed"
        );
        assert!(
            audit(env).is_empty(),
            "an audit row was written: {:?}",
            audit(env)
        );
        assert_eq!(env.files_hash(), self.hash, "the store file changed");
    }
}

#[test]
fn a_json_block_skips_the_conversation_and_writes_nothing() {
    let (env, ids) = store(22, 1);
    let id = ids[0].as_str();
    answering(
        &project_hooks(&env),
        "guard",
        r#"{"decision":"block","reason":"a human is reviewing this conversation"}"#,
    );
    let before = Untouched::take(&env);

    let out = compact(&env, &[id], &[]);
    assert_eq!(
        out.code, 0,
        "a block is a skip, not a failure: {}",
        out.stderr
    );
    let r = row(&out.doc, id);
    assert_eq!(r["status"], "skipped", "{r:#}");
    assert_eq!(
        r["detail"],
        "blocked by hook guard: a human is reviewing this conversation"
    );
    assert_eq!(
        r["hooks"],
        json!([rec(
            "guard",
            BEFORE,
            "block",
            Some("a human is reviewing this conversation")
        )])
    );
    assert!(r.get("compaction_id").is_none());
    assert_eq!(out.doc["totals"]["skipped"], 1);
    before.check(&env);
}

#[test]
fn exit_code_2_blocks_with_the_reason_from_stderr() {
    let (env, ids) = store(23, 1);
    let id = ids[0].as_str();
    hook(
        &user_hooks(&env),
        "office-hours",
        &[BEFORE],
        "  cat >/dev/null\n  echo 'not during office hours' >&2\n  echo 'second line is not the reason' >&2\n  exit 2",
    );
    let before = Untouched::take(&env);

    let out = compact(&env, &[id], &[]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let r = row(&out.doc, id);
    assert_eq!(r["status"], "skipped", "{r:#}");
    assert_eq!(
        r["detail"],
        "blocked by hook office-hours: not during office hours"
    );
    assert_eq!(
        r["hooks"],
        json!([rec(
            "office-hours",
            BEFORE,
            "block",
            Some("not during office hours")
        )])
    );
    before.check(&env);
}

#[test]
fn kodelet_style_actions_map_to_allow_and_block() {
    let (env, ids) = store(24, 2);
    let (skip, go) = (ids[0].as_str(), ids[1].as_str());
    hook(
        &project_hooks(&env),
        "kodelet-style",
        &[BEFORE],
        &format!(
            "  payload=$(cat)\n  case \"$payload\" in\n  *'\"conversation_id\":\"{skip}\"'*) echo '{{\"action\":\"skip\",\"reason\":\"pinned by the user\"}}' ;;\n  *) echo '{{\"action\":\"compact\"}}' ;;\n  esac"
        ),
    );
    let out = compact(&env, &[skip, go], &[]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(row(&out.doc, skip)["status"], "skipped");
    assert_eq!(
        row(&out.doc, skip)["detail"],
        "blocked by hook kodelet-style: pinned by the user"
    );
    assert_eq!(row(&out.doc, go)["status"], "compacted", "{:#}", out.doc);
    assert_eq!(
        row(&out.doc, go)["hooks"],
        json!([rec("kodelet-style", BEFORE, "allow", None)])
    );
}

// ---------------------------------------------------------------------------------------------
// A hook's summary
// ---------------------------------------------------------------------------------------------

/// An OpenAI-compatible server on 127.0.0.1 that answers every chat completion with a summary.
struct FakeLlm {
    rt: tokio::runtime::Runtime,
    server: wiremock::MockServer,
}

impl FakeLlm {
    fn start() -> FakeLlm {
        use wiremock::matchers::{method, path};
        let rt = tokio::runtime::Runtime::new().expect("runtime");
        let server = rt.block_on(async {
            let server = wiremock::MockServer::start().await;
            wiremock::Mock::given(method("POST"))
                .and(path("/v1/chat/completions"))
                .respond_with(wiremock::ResponseTemplate::new(200).set_body_json(json!({
                    "id": "chatcmpl-1",
                    "object": "chat.completion",
                    "model": "gpt-4.1-mini",
                    "choices": [{
                        "index": 0,
                        "message": {"role": "assistant", "content": crate::common::sectioned("The model's summary of the session.")},
                        "finish_reason": "stop"
                    }],
                    "usage": {"prompt_tokens": 42, "completion_tokens": 7, "total_tokens": 49}
                })))
                .mount(&server)
                .await;
            server
        });
        FakeLlm { rt, server }
    }

    fn requests(&self) -> usize {
        self.rt
            .block_on(self.server.received_requests())
            .expect("request recording is on")
            .len()
    }

    /// `compact IDS --strategy llm` against this server.
    fn compact(&self, env: &Env, ids: &[&str]) -> Out {
        let mut c = agent(env);
        c.env("AGENT_DB_API_KEY", "x")
            .arg("compact")
            .args(ids)
            .args([
                "--strategy",
                "llm",
                "--llm-provider",
                "openai",
                "--model",
                "gpt-4.1-mini",
                "--base-url",
            ])
            .arg(format!("{}/v1", self.server.uri()))
            .args([
                "--timeout",
                "20s",
                "--keep-tokens",
                "2000",
                "--yes",
                "--json",
            ]);
        run(c)
    }
}

const HOOK_SUMMARY: &str =
    "Summary from the team summarizer: the parser bug is fixed; keep the retry limit at 3.";

#[test]
fn a_hook_summary_is_written_verbatim_and_no_model_is_called() {
    let (env, ids) = store(25, 2);
    let (mine, other) = (ids[0].as_str(), ids[1].as_str());
    // Supplies the summary for `mine` only; allows the rest.
    hook(
        &project_hooks(&env),
        "summarizer",
        &[BEFORE],
        &format!(
            "  payload=$(cat)\n  case \"$payload\" in\n  *'\"conversation_id\":\"{mine}\"'*) printf '%s\\n' '{{\"summary\":\"{HOOK_SUMMARY}\"}}' ;;\n  *) echo '{{}}' ;;\n  esac"
        ),
    );
    let llm = FakeLlm::start();

    let out = llm.compact(&env, &[mine]);
    assert_eq!(out.code, 0, "{:#}\n{}", out.doc, out.stderr);
    let r = row(&out.doc, mine);
    assert_eq!(r["status"], "compacted", "{r:#}");
    assert_eq!(r["strategy"], "hook:summarizer");
    let chars = format!("{} characters", HOOK_SUMMARY.chars().count());
    assert_eq!(
        r["hooks"],
        json!([rec("summarizer", BEFORE, "summary", Some(&chars))])
    );
    assert!(
        r.get("cost_usd").is_none() && r.get("llm_tokens").is_none(),
        "{r:#}"
    );
    assert_eq!(
        llm.requests(),
        0,
        "the summarizer was called although a hook supplied the summary"
    );

    // The summary message is the hook's text, verbatim (no header added).
    let first = first_message_strings(&env, mine);
    assert!(
        first.iter().any(|s| s == HOOK_SUMMARY),
        "first message: {first:?}"
    );
    let a = audit(&env);
    assert_eq!(a.len(), 1);
    assert_eq!(a[0]["strategy"], "hook:summarizer");
    assert_eq!(a[0]["summary_sha256"], sha256_hex(HOOK_SUMMARY));
    assert_eq!(a[0]["details"]["hooks"], r["hooks"]);

    // Control: the same flags without a hook summary do reach the (fake) model.
    let out = llm.compact(&env, &[other]);
    assert_eq!(out.code, 0, "{:#}\n{}", out.doc, out.stderr);
    let r = row(&out.doc, other);
    assert_eq!(r["status"], "compacted", "{r:#}");
    assert_eq!(r["strategy"], "llm");
    assert!(
        llm.requests() >= 1,
        "the control run made no request: the llm wiring of this test is broken"
    );
}

#[test]
fn a_hook_summary_is_not_attributed_to_the_configured_model() {
    let (env, ids) = store(26, 1);
    let id = ids[0].as_str();
    answering(
        &project_hooks(&env),
        "summarizer",
        &format!(r#"{{"summary":"{HOOK_SUMMARY}"}}"#),
    );
    let llm = FakeLlm::start();
    let out = llm.compact(&env, &[id]);
    assert_eq!(
        row(&out.doc, id)["strategy"],
        "hook:summarizer",
        "{:#}",
        out.doc
    );
    assert_eq!(llm.requests(), 0);
    let a = audit(&env);
    assert_eq!(a[0]["strategy"], "hook:summarizer");
    assert_eq!(a[0]["model"], Value::Null, "audit row: {:#}", a[0]);
}

#[test]
fn block_wins_over_a_summary() {
    let (env, ids) = store(27, 1);
    let id = ids[0].as_str();
    let dir = project_hooks(&env);
    answering(
        &dir,
        "10-summarize",
        r#"{"summary":"a summary that must not be used"}"#,
    );
    answering(
        &dir,
        "20-veto",
        r#"{"decision":"block","reason":"frozen for the release"}"#,
    );
    let before = Untouched::take(&env);

    let out = compact(&env, &[id], &[]);
    let r = row(&out.doc, id);
    assert_eq!(r["status"], "skipped", "{r:#}");
    assert_eq!(
        r["detail"],
        "blocked by hook 20-veto: frozen for the release"
    );
    assert_eq!(
        r["hooks"],
        json!([
            rec("10-summarize", BEFORE, "summary", Some("31 characters")),
            rec("20-veto", BEFORE, "block", Some("frozen for the release")),
        ])
    );
    before.check(&env);
}

#[test]
fn the_first_summary_in_discovery_order_wins() {
    let (env, ids) = store(28, 1);
    let id = ids[0].as_str();
    // Discovery order: ./.agent-db/hooks/ (by file name), then $XDG_CONFIG_HOME/agent-db/hooks/,
    // then the config's [hooks] dirs; a name that sorts first in a later directory runs later.
    let extra = env.dir.path().join("team-hooks");
    answering(
        &project_hooks(&env),
        "20-project",
        r#"{"summary":"PROJECT SUMMARY"}"#,
    );
    answering(
        &project_hooks(&env),
        "30-project",
        r#"{"summary":"SECOND PROJECT SUMMARY"}"#,
    );
    answering(
        &user_hooks(&env),
        "10-user",
        r#"{"summary":"USER SUMMARY"}"#,
    );
    answering(&extra, "00-config", r#"{"summary":"CONFIG SUMMARY"}"#);
    let cfg = env.file(
        "hooks.toml",
        format!("[hooks]\ndirs = [{:?}]\n", extra.display().to_string()).as_bytes(),
    );

    let mut c = agent(&env);
    c.arg("--config")
        .arg(&cfg)
        .arg("compact")
        .arg(id)
        .args(OFFLINE);
    let out = run(c);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let r = row(&out.doc, id);
    assert_eq!(r["status"], "compacted", "{r:#}");
    assert_eq!(r["strategy"], "hook:20-project");
    let ignored = "ignored: an earlier hook supplied the summary";
    assert_eq!(
        r["hooks"],
        json!([
            rec("20-project", BEFORE, "summary", Some("15 characters")),
            rec("30-project", BEFORE, "summary", Some(ignored)),
            rec("10-user", BEFORE, "summary", Some(ignored)),
            rec("00-config", BEFORE, "summary", Some(ignored)),
        ])
    );
    let first = first_message_strings(&env, id);
    assert!(first.iter().any(|s| s == "PROJECT SUMMARY"), "{first:?}");
    assert!(!first
        .iter()
        .any(|s| s.contains("USER SUMMARY") || s.contains("CONFIG SUMMARY")));
    assert_eq!(
        audit(&env)[0]["summary_sha256"],
        sha256_hex("PROJECT SUMMARY")
    );
}

// ---------------------------------------------------------------------------------------------
// after_compaction
// ---------------------------------------------------------------------------------------------

#[test]
fn a_plan_runs_before_hooks_when_made_and_after_hooks_when_applied() {
    let (env, ids) = store(31, 1);
    let id = ids[0].as_str();
    let before_file = env.dir.path().join("before.json");
    let after_file = env.dir.path().join("after.json");
    hook(
        &project_hooks(&env),
        "10-before",
        &[BEFORE],
        &format!("  cat > {}", q(&before_file)),
    );
    hook(
        &project_hooks(&env),
        "20-after",
        &[AFTER],
        &format!("  cat > {}", q(&after_file)),
    );
    let plan = env.dir.path().join("plan.json");
    let out = compact(&env, &[id], &["--plan-out", plan.to_str().unwrap()]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(
        before_file.exists(),
        "the before hook ran when the plan was made"
    );
    assert!(
        !after_file.exists(),
        "nothing was written, so no after hook ran"
    );
    assert!(audit(&env).is_empty(), "--plan-out writes nothing");

    // The user edits the summary in the plan; apply writes it and the after hook sees it.
    let mut p: Value = serde_json::from_str(&std::fs::read_to_string(&plan).unwrap()).unwrap();
    let edited = "[agent-db compaction summary]\nEdited by hand: keep PLAN-HOOK-7731 in mind.";
    p["conversations"][0]["summary"] = edited.into();
    std::fs::write(&plan, serde_json::to_string(&p).unwrap()).unwrap();
    let mut c = agent(&env);
    c.args(["apply", plan.to_str().unwrap(), "--json"]);
    let out = run(c);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let r = row(&out.doc, id);
    assert_eq!(r["status"], "compacted", "{r:#}");
    assert_eq!(r["hooks"], json!([rec("20-after", AFTER, "ok", None)]));
    let a = audit(&env);
    assert_eq!(a.len(), 1);
    let (_, after) = read_json(&after_file);
    assert_eq!(after["event"], AFTER);
    assert_eq!(after["conversation_id"], id);
    assert_eq!(after["compaction_id"], a[0]["id"]);
    assert_eq!(after["summary"], edited);
    assert_eq!(after["messages_after"], r["messages_after"]);

    // --no-hooks: a second plan applied without running them.
    std::fs::remove_file(&after_file).unwrap();
    let restored = agent(&env)
        .args(["restore", id, "--json"])
        .output()
        .unwrap();
    assert_eq!(restored.status.code(), Some(0));
    let out = compact(
        &env,
        &[id],
        &["--plan-out", plan.to_str().unwrap(), "--force"],
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    let mut c = agent(&env);
    c.args(["apply", plan.to_str().unwrap(), "--json", "--no-hooks"]);
    let out = run(c);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(row(&out.doc, id)["status"], "compacted");
    assert!(!after_file.exists(), "--no-hooks ran no after hook");
}

#[test]
fn the_after_hook_gets_the_stored_usage_and_the_audit_id() {
    let (env, ids) = store(29, 1);
    let id = ids[0].as_str();
    let usage = r#"{"inputTokens":123456,"outputTokens":7890,"cacheCreationInputTokens":11,"cacheReadInputTokens":22,"inputCost":0.5,"outputCost":0.25,"cacheCreationCost":0,"cacheReadCost":0,"currentContextWindow":98765,"maxContextWindow":200000}"#;
    set(&env, "usage", Some(usage), Some(id));
    let before_file = env.dir.path().join("before.json");
    let after_file = env.dir.path().join("after.json");
    hook(
        &project_hooks(&env),
        "10-before",
        &[BEFORE],
        &format!("  cat > {}", q(&before_file)),
    );
    hook(
        &project_hooks(&env),
        "20-after",
        &[AFTER],
        &format!("  cat > {}", q(&after_file)),
    );

    let out = compact(&env, &[id], &[]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let r = row(&out.doc, id);
    assert_eq!(r["status"], "compacted", "{r:#}");
    assert_eq!(
        r["hooks"],
        json!([
            rec("10-before", BEFORE, "allow", None),
            rec("20-after", AFTER, "ok", None)
        ])
    );
    let a = audit(&env);
    assert_eq!(a.len(), 1);

    let (_, b) = read_json(&before_file);
    let (_, p) = read_json(&after_file);
    for v in [&b, &p] {
        assert_eq!(v["conversation_id"], id);
        assert_eq!(v["store_kind"], "kodelet");
        assert_eq!(v["reason"], "manual");
        assert_eq!(v["invoked_by"], "agent-db");
        // The usage as stored before the compaction, exactly.
        assert_eq!(v["input_tokens"], 123456, "{v:#}");
        assert_eq!(v["output_tokens"], 7890);
        assert_eq!(v["current_context_window"], 98765);
        assert_eq!(v["max_context_window"], 200000);
    }
    assert_eq!(b["event"], BEFORE);
    assert_eq!(b["message_count"], r["messages_before"]);
    assert_eq!(
        b["messages"].as_array().map(Vec::len),
        r["messages_before"].as_u64().map(|n| n as usize)
    );

    assert_eq!(p["event"], AFTER);
    assert_eq!(p["strategy"], "extractive");
    for k in [
        "messages_before",
        "messages_after",
        "tokens_before",
        "tokens_after",
        "compaction_id",
    ] {
        assert_eq!(p[k], r[k], "{k}: payload {p:#} vs row {r:#}");
    }
    for k in [
        "messages_before",
        "messages_after",
        "tokens_before",
        "tokens_after",
    ] {
        assert_eq!(p[k], a[0][k], "{k}: payload vs audit row");
    }
    assert_eq!(
        p["compaction_id"], a[0]["id"],
        "the after payload names the audit row"
    );
    assert_eq!(p["cost_usd"], Value::Null);
    let summary = p["summary"].as_str().expect("the summary text");
    assert_eq!(a[0]["summary_sha256"], sha256_hex(summary));
    assert!(first_message_strings(&env, id).iter().any(|s| s == summary));
    // The after hook runs after the commit, so only the before decisions are in the audit row.
    assert_eq!(
        a[0]["details"]["hooks"],
        json!([rec("10-before", BEFORE, "allow", None)])
    );
    // The stored window is the new count now; the payload had the old one.
    let now: String = env
        .conn()
        .query_row("SELECT usage FROM conversations WHERE id = ?1", [id], |r| {
            r.get(0)
        })
        .unwrap();
    let now: Value = serde_json::from_str(&now).unwrap();
    // The new history plus the fixed overhead (stored context before minus the messages).
    let overhead = (98765 - r["tokens_before"].as_i64().unwrap()).max(0);
    assert_eq!(
        now["currentContextWindow"].as_i64().unwrap(),
        r["tokens_after"].as_i64().unwrap() + overhead
    );
}

#[test]
fn a_failing_after_hook_is_a_warning_and_the_compaction_stands() {
    let (env, ids) = store(30, 1);
    let id = ids[0].as_str();
    hook(
        &project_hooks(&env),
        "notify",
        &[AFTER],
        "  cat >/dev/null\n  echo 'webhook unreachable' >&2\n  exit 1",
    );
    let out = compact(&env, &[id], &[]);
    assert_eq!(
        out.code, 0,
        "an after hook failure does not fail the run: {}",
        out.stderr
    );
    let r = row(&out.doc, id);
    assert_eq!(r["status"], "compacted", "{r:#}");
    assert_eq!(
        r["hooks"],
        json!([rec(
            "notify",
            AFTER,
            "error",
            Some("exited with code 1: webhook unreachable")
        )])
    );
    assert!(
        out.stderr.contains(&format!(
            "warning: after_compaction hook notify failed for {id} (the compaction stands): exited with code 1: webhook unreachable"
        )),
        "{}",
        out.stderr
    );
    assert_eq!(audit(&env).len(), 1);
}

// ---------------------------------------------------------------------------------------------
// Failures: timeout, crash, bad output; fail open
// ---------------------------------------------------------------------------------------------

#[test]
fn a_hanging_hook_is_killed_with_its_children_and_blocks_only_its_conversation() {
    let (env, ids) = store(31, 2);
    let (stuck, fine) = (ids[0].as_str(), ids[1].as_str());
    let hook_pid = env.dir.path().join("hook.pid");
    let sleep_pid = env.dir.path().join("sleep.pid");
    let slept = env.dir.path().join("slept");
    hook(
        &project_hooks(&env),
        "hang",
        &[BEFORE],
        &format!(
            "  payload=$(cat)\n  case \"$payload\" in\n  *'\"conversation_id\":\"{stuck}\"'*)\n    echo $$ > {hp}\n    sleep 300 &\n    echo $! > {sp}\n    wait\n    echo done > {done}\n    ;;\n  *) echo '{{}}' ;;\n  esac",
            hp = q(&hook_pid),
            sp = q(&sleep_pid),
            done = q(&slept)
        ),
    );

    let out = compact(&env, &[stuck, fine], &["--hook-timeout", "1s"]);
    // The hook was not waited for: it never got past its 300 s sleep to write `slept`.
    assert!(
        !slept.exists(),
        "the run waited for the hanging hook to finish"
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    let r = row(&out.doc, stuck);
    assert_eq!(r["status"], "skipped", "{r:#}");
    let detail = r["detail"].as_str().unwrap();
    assert!(detail.starts_with("blocked by hook hang: "), "{detail}");
    assert!(detail.contains("timed out after 1s"), "{detail}");
    assert_eq!(r["hooks"][0]["decision"], "block");
    let r = row(&out.doc, fine);
    assert_eq!(r["status"], "compacted", "the batch goes on: {r:#}");
    assert_eq!(r["hooks"], json!([rec("hang", BEFORE, "allow", None)]));
    let a = audit(&env);
    assert_eq!(a.len(), 1);
    assert_eq!(a[0]["conversation_id"], fine);

    // The hook and the `sleep` it started (its process group) are gone.
    // agent-db killed their group: a killed process is gone once the kernel has run its exit,
    // which no clock bounds on a loaded machine, so this waits for it rather than timing it. A
    // survivor is the `sleep 300` the hook started, and would hold the test for its 300 s.
    let pids = [read_pid(&hook_pid), read_pid(&sleep_pid)];
    while pids.iter().any(|p| alive(*p)) {
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn invalid_json_fails_closed_unless_fail_open() {
    let (env, ids) = store(32, 2);
    let (a, b) = (ids[0].as_str(), ids[1].as_str());
    answering(&project_hooks(&env), "chatty", "Sure! Compacting now.");
    let before = Untouched::take(&env);

    let out = compact(&env, &[a], &[]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let r = row(&out.doc, a);
    assert_eq!(r["status"], "skipped", "{r:#}");
    let detail = r["detail"].as_str().unwrap();
    assert!(
        detail
            .starts_with("blocked by hook chatty: hook failed (fail closed): printed invalid JSON"),
        "{detail}"
    );
    assert!(
        detail.contains("Sure! Compacting now."),
        "the reason quotes the output: {detail}"
    );
    before.check(&env);

    let cfg = env.file("open.toml", b"[hooks]\nfail_open = true\n");
    let mut c = agent(&env);
    c.arg("--config")
        .arg(&cfg)
        .arg("compact")
        .args([a, b])
        .args(OFFLINE);
    let out = run(c);
    assert_eq!(out.code, 0, "{}", out.stderr);
    for id in [a, b] {
        let r = row(&out.doc, id);
        assert_eq!(r["status"], "compacted", "fail open allows: {r:#}");
        assert_eq!(r["hooks"][0]["hook"], "chatty");
        assert_eq!(r["hooks"][0]["decision"], "allow");
        let d = r["hooks"][0]["detail"].as_str().unwrap();
        assert!(d.starts_with("failed open: printed invalid JSON"), "{d}");
    }
    assert_eq!(audit(&env).len(), 2);

    // `agent-db hooks` reports the setting.
    let mut c = agent(&env);
    c.arg("--config").arg(&cfg).args(["hooks", "--json"]);
    let h = run(c);
    assert_eq!(h.doc["fail_open"], true);
}

#[test]
fn a_crashing_hook_and_unknown_answers_fail_closed() {
    let (env, ids) = store(33, 3);
    let (crash, maybe, array) = (ids[0].as_str(), ids[1].as_str(), ids[2].as_str());
    hook(
        &project_hooks(&env),
        "flaky",
        &[BEFORE],
        &format!(
            "  payload=$(cat)\n  case \"$payload\" in\n  *'\"conversation_id\":\"{crash}\"'*) echo 'segfault in plugin' >&2; exit 1 ;;\n  *'\"conversation_id\":\"{maybe}\"'*) echo '{{\"decision\":\"maybe\"}}' ;;\n  *) echo '[]' ;;\n  esac"
        ),
    );
    let before = Untouched::take(&env);
    let out = compact(&env, &[crash, maybe, array], &[]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let detail = |id: &str| {
        row(&out.doc, id)["detail"]
            .as_str()
            .unwrap_or_default()
            .to_string()
    };
    assert_eq!(
        detail(crash),
        "blocked by hook flaky: hook failed (fail closed): exited with code 1: segfault in plugin"
    );
    assert_eq!(
        detail(maybe),
        "blocked by hook flaky: hook failed (fail closed): unknown decision \"maybe\""
    );
    assert_eq!(
        detail(array),
        "blocked by hook flaky: hook failed (fail closed): printed JSON that is not an object"
    );
    before.check(&env);
}

#[test]
fn kodelet_blocked_true_blocks() {
    let (env, ids) = store(34, 1);
    let id = ids[0].as_str();
    answering(
        &project_hooks(&env),
        "kodelet-guard",
        r#"{"blocked":true,"reason":"policy says no"}"#,
    );
    let before = Untouched::take(&env);
    let out = compact(&env, &[id], &[]);
    let r = row(&out.doc, id);
    assert_eq!(r["status"], "skipped", "{r:#}");
    assert_eq!(r["detail"], "blocked by hook kodelet-guard: policy says no");
    before.check(&env);
}

// ---------------------------------------------------------------------------------------------
// Discovery
// ---------------------------------------------------------------------------------------------

#[test]
fn non_executable_and_non_hook_files_are_ignored_with_a_message() {
    let (env, ids) = store(35, 1);
    let id = ids[0].as_str();
    let dir = project_hooks(&env);
    answering(&dir, "good", "{}");
    // Would block if it ran.
    put(
        &dir,
        "draft",
        &script(
            &[BEFORE],
            "  echo '{\"decision\":\"block\",\"reason\":\"draft\"}'",
        ),
        0o644,
    );
    // A kodelet hook for another event, a dotfile and a directory are not compaction hooks.
    hook(
        &dir,
        "kodelet-audit",
        &["before_tool_call"],
        "  cat >/dev/null",
    );
    put(&dir, ".hidden", &script(&[BEFORE], "  exit 2"), 0o755);
    std::fs::create_dir_all(dir.join("subdir")).unwrap();

    let out = compact(&env, &[id], &[]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let r = row(&out.doc, id);
    assert_eq!(r["status"], "compacted", "{r:#}");
    assert_eq!(r["hooks"], json!([rec("good", BEFORE, "allow", None)]));
    assert!(
        out.stderr
            .contains("hook ignored: .agent-db/hooks/draft: not executable"),
        "{}",
        out.stderr
    );
    assert!(
        out.stderr.contains(
            "hook ignored: .agent-db/hooks/kodelet-audit: `hook` named no compaction event"
        ),
        "{}",
        out.stderr
    );
    assert!(
        !out.stderr.contains(".hidden") && !out.stderr.contains("subdir"),
        "{}",
        out.stderr
    );

    // `agent-db hooks` lists the usable ones and names the ignored ones.
    let o = agent(&env).arg("hooks").output().unwrap();
    assert_eq!(o.status.code(), Some(0));
    let (stdout, stderr) = (
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr),
    );
    assert!(
        stdout.contains("good") && stdout.contains(BEFORE),
        "{stdout}"
    );
    assert!(!stdout.contains("draft"), "{stdout}");
    assert!(
        stderr.contains("ignored .agent-db/hooks/draft: not executable"),
        "{stderr}"
    );
    assert!(
        stderr.contains("searched, in order: .agent-db/hooks, "),
        "{stderr}"
    );

    let mut c = agent(&env);
    c.env("AGENT_DB_HOOK_TIMEOUT", "7s")
        .args(["hooks", "--json"]);
    let h = run(c);
    assert_eq!(h.doc["command"], "hooks");
    let names: Vec<&str> = h.doc["hooks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["good"]);
    assert_eq!(h.doc["hooks"][0]["events"], json!([BEFORE]));
    let ignored: Vec<&str> = h.doc["ignored"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x["path"].as_str().unwrap())
        .collect();
    assert_eq!(
        ignored,
        [".agent-db/hooks/draft", ".agent-db/hooks/kodelet-audit"]
    );
    assert_eq!(h.doc["timeout"], "7s", "AGENT_DB_HOOK_TIMEOUT");
    assert_eq!(h.doc["fail_open"], false);
}

#[test]
fn disable_suffixed_files_are_skipped_like_kodelet_and_listed_as_disabled() {
    let (env, ids) = store(39, 1);
    let id = ids[0].as_str();
    let dir = project_hooks(&env);
    let marker = env.dir.path().join("disabled-hook-ran");
    answering(&dir, "good", "{}");
    // Would block (and leave a marker) on `hook` or `run` if it were ever started.
    put(
        &dir,
        "10-guard.disable",
        &format!(
            "#!/bin/sh\ntouch {}\ncase \"$1\" in\nhook) echo before_compaction ;;\nrun) echo '{{\"decision\":\"block\",\"reason\":\"off\"}}' ;;\nesac\n",
            q(&marker)
        ),
        0o755,
    );
    // Disabled whether or not it is executable; only the exact `.disable` suffix counts.
    put(
        &dir,
        "20-draft.disable",
        &script(&[BEFORE], "  exit 2"),
        0o644,
    );
    put(
        &dir,
        "30-notes.disabled",
        &script(&[BEFORE], "  exit 2"),
        0o644,
    );

    let out = compact(&env, &[id], &[]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let r = row(&out.doc, id);
    assert_eq!(r["status"], "compacted", "{r:#}");
    assert_eq!(r["hooks"], json!([rec("good", BEFORE, "allow", None)]));
    assert!(!marker.exists(), "a .disable hook was started");
    // compact skips them silently, as kodelet does; a near miss is still reported.
    assert!(!out.stderr.contains(".disable "), "{}", out.stderr);
    assert!(!out.stderr.contains("guard"), "{}", out.stderr);
    assert!(
        out.stderr
            .contains("hook ignored: .agent-db/hooks/30-notes.disabled: not executable"),
        "{}",
        out.stderr
    );

    let o = agent(&env).arg("hooks").output().unwrap();
    assert_eq!(o.status.code(), Some(0));
    let (stdout, stderr) = (
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr),
    );
    assert!(
        stdout.contains("good") && !stdout.contains("guard"),
        "{stdout}"
    );
    for name in ["10-guard.disable", "20-draft.disable"] {
        assert!(
            stderr.contains(&format!(
                "disabled .agent-db/hooks/{name} (its name ends in .disable)"
            )),
            "{stderr}"
        );
    }
    let h = run({
        let mut c = agent(&env);
        c.args(["hooks", "--json"]);
        c
    });
    assert_eq!(
        h.doc["disabled"],
        json!([
            ".agent-db/hooks/10-guard.disable",
            ".agent-db/hooks/20-draft.disable"
        ])
    );
    assert_eq!(
        h.doc["ignored"][0]["path"],
        ".agent-db/hooks/30-notes.disabled"
    );
    assert_eq!(h.doc["ignored"].as_array().unwrap().len(), 1);
    assert!(!marker.exists(), "`agent-db hooks` started a .disable hook");
}

/// Values no hook may see. The hook dumps its environment (`export -p`, a shell builtin) on
/// both `hook` and `run`; the dumps are searched for the secrets.
#[test]
fn hooks_never_see_the_api_keys() {
    let (env, ids) = store(40, 1);
    let id = ids[0].as_str();
    let dir = project_hooks(&env);
    let (at_hook, at_run) = (
        env.dir.path().join("env-at-hook"),
        env.dir.path().join("env-at-run"),
    );
    put(
        &dir,
        "env-dump",
        &format!(
            "#!/bin/sh\ncase \"$1\" in\nhook) export -p > {}; echo before_compaction ;;\nrun) cat >/dev/null; export -p > {}; echo '{{}}' ;;\nesac\n",
            q(&at_hook),
            q(&at_run)
        ),
        0o755,
    );
    let secrets = [
        ("AGENT_DB_API_KEY", "sk-agentdb-HOOKLEAK-111"),
        ("OPENAI_API_KEY", "sk-openai-HOOKLEAK-222"),
        ("ANTHROPIC_API_KEY", "sk-ant-HOOKLEAK-333"),
    ];
    let base_url = "http://me:sk-pw-HOOKLEAK-444@127.0.0.1:9/v1?key=sk-query-HOOKLEAK-555";
    let mut c = agent(&env);
    for (k, v) in secrets {
        c.env(k, v);
    }
    c.env("AGENT_DB_BASE_URL", base_url)
        .env("HOOK_ENV_MARKER", "still-here")
        .arg("compact")
        .arg(id)
        .args(OFFLINE);
    let out = run(c);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(row(&out.doc, id)["status"], "compacted");
    for dump in [&at_hook, &at_run] {
        let text = std::fs::read_to_string(dump).expect("the hook dumped its environment");
        assert!(
            text.contains("HOOK_ENV_MARKER") && text.contains("still-here"),
            "the rest of the environment is passed: {text}"
        );
        for (k, v) in secrets {
            assert!(!text.contains(k), "{k} reached the hook: {text}");
            assert!(!text.contains(v), "{k}'s value reached the hook: {text}");
        }
        assert!(!text.contains("HOOKLEAK"), "{text}");
        assert!(
            text.contains("http://me:***@127.0.0.1:9/v1?key=***"),
            "AGENT_DB_BASE_URL is passed masked: {text}"
        );
    }
}

#[test]
fn no_hooks_and_dry_run_run_no_hooks() {
    let (env, ids) = store(36, 2);
    let (a, b) = (ids[0].as_str(), ids[1].as_str());
    let marker = env.dir.path().join("hook-ran");
    hook(
        &project_hooks(&env),
        "blocker",
        &[BEFORE, AFTER],
        &format!(
            "  cat >/dev/null\n  touch {}\n  echo '{{\"decision\":\"block\",\"reason\":\"blocked\"}}'",
            q(&marker)
        ),
    );

    let out = compact(&env, &[a], &["--dry-run"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let r = row(&out.doc, a);
    assert_eq!(r["status"], "planned", "{r:#}");
    assert!(r.get("hooks").is_none(), "{r:#}");
    assert!(
        out.stderr.contains("dry run: hooks are not run"),
        "{}",
        out.stderr
    );
    assert!(!marker.exists(), "a dry run ran a hook");

    let out = compact(&env, &[a], &["--no-hooks"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let r = row(&out.doc, a);
    assert_eq!(r["status"], "compacted", "{r:#}");
    assert!(r.get("hooks").is_none(), "{r:#}");
    assert!(!marker.exists(), "--no-hooks ran a hook");
    assert!(audit(&env)[0]["details"].get("hooks").is_none());

    // Control: without either flag the hook runs and blocks.
    let out = compact(&env, &[b], &[]);
    assert_eq!(row(&out.doc, b)["status"], "skipped");
    assert!(marker.exists());
}

// ---------------------------------------------------------------------------------------------
// Working directory
// ---------------------------------------------------------------------------------------------

#[test]
fn hooks_run_in_the_conversations_working_directory_when_it_exists() {
    let (env, ids) = store(37, 2);
    let (with_dir, gone) = (ids[0].as_str(), ids[1].as_str());
    let project = env.dir.path().join("project");
    std::fs::create_dir_all(&project).unwrap();
    set(&env, "cwd", project.to_str(), Some(with_dir));
    set(&env, "cwd", Some("/nonexistent/agent-db-test"), Some(gone));
    let log = env.dir.path().join("pwd.log");
    // In the user directory: an absolute path, whatever the hook's working directory.
    hook(
        &user_hooks(&env),
        "where",
        &[BEFORE],
        &format!("  payload=$(cat)\n  case \"$payload\" in\n  *'\"conversation_id\":\"{with_dir}\"'*) echo \"A $(pwd -P)\" >> {l} ;;\n  *) echo \"B $(pwd -P)\" >> {l} ;;\n  esac", l = q(&log)),
    );
    let out = compact(&env, &[with_dir, gone], &["--concurrency", "1"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(
        row(&out.doc, with_dir)["status"],
        "compacted",
        "{:#}",
        out.doc
    );
    assert_eq!(row(&out.doc, gone)["status"], "compacted", "{:#}", out.doc);
    let text = std::fs::read_to_string(&log).unwrap();
    let project = std::fs::canonicalize(&project).unwrap();
    let cwd = std::fs::canonicalize(env.dir.path()).unwrap();
    assert!(
        text.lines()
            .any(|l| l == format!("A {}", project.display())),
        "{text}"
    );
    assert!(
        text.lines().any(|l| l == format!("B {}", cwd.display())),
        "a missing cwd falls back to agent-db's: {text}"
    );
}

#[test]
fn project_hooks_run_for_conversations_recorded_in_another_existing_directory() {
    let (env, ids) = store(38, 1);
    let id = ids[0].as_str();
    let project = env.dir.path().join("elsewhere");
    std::fs::create_dir_all(&project).unwrap();
    set(&env, "cwd", project.to_str(), Some(id));
    answering(&project_hooks(&env), "allow", "{}");
    let out = compact(&env, &[id], &[]);
    let r = row(&out.doc, id);
    assert_eq!(r["status"], "compacted", "{r:#}");
    assert_eq!(r["hooks"], json!([rec("allow", BEFORE, "allow", None)]));
}

// ---------------------------------------------------------------------------------------------
// The payloads, pinned
// ---------------------------------------------------------------------------------------------

/// One short anthropic conversation with fixed ids, timestamps, usage and a cwd that does not
/// exist, so both payloads are deterministic.
fn hand_built() -> Env {
    let env = Env::empty();
    let raw = r#"[{"content":[{"text":"Add a --verbose flag to the CLI and document it.","type":"text"}],"role":"user"},{"content":[{"text":"I will look at the argument parser first.","type":"text"},{"id":"toolu_01","input":{"command":"grep -n verbose src/cli.rs"},"name":"bash","type":"tool_use"}],"role":"assistant"},{"content":[{"tool_use_id":"toolu_01","is_error":false,"content":[{"text":"no matches","type":"text"}],"type":"tool_result"}],"role":"user"},{"content":[{"text":"There is no verbose flag yet. I added one to src/cli.rs and a paragraph to docs/usage.md.","type":"text"}],"role":"assistant"},{"content":[{"text":"Now run the tests.","type":"text"}],"role":"user"},{"content":[{"text":"All 42 tests pass.","type":"text"}],"role":"assistant"}]"#;
    let usage = r#"{"inputTokens":1200,"outputTokens":340,"cacheCreationInputTokens":0,"cacheReadInputTokens":0,"inputCost":0,"outputCost":0,"cacheCreationCost":0,"cacheReadCost":0,"currentContextWindow":150000,"maxContextWindow":200000}"#;
    env.conn()
        .execute(
            "INSERT INTO conversations(id, raw_messages, provider, usage, created_at, updated_at, metadata, tool_results, cwd)
             VALUES ('conv-hooks-1', ?1, 'anthropic', ?2, '2026-10-01 10:00:00 +0000 UTC', '2026-10-01 10:05:00 +0000 UTC',
                     '{\"model\":\"claude-sonnet-4-5\"}', '{}', '/nonexistent/agent-db-hooks-test')",
            [raw, usage],
        )
        .expect("insert");
    env
}

#[test]
fn payloads_of_both_events() {
    let env = hand_built();
    let dir = project_hooks(&env);
    let before_file = env.dir.path().join("before.json");
    let after_file = env.dir.path().join("after.json");
    hook(
        &dir,
        "10-capture",
        &[BEFORE],
        &format!("  cat > {}", q(&before_file)),
    );
    answering(
        &dir,
        "20-summary",
        r#"{"summary":"The user asked for a --verbose flag; it was added to src/cli.rs and documented."}"#,
    );
    hook(
        &dir,
        "30-capture",
        &[AFTER],
        &format!("  cat > {}", q(&after_file)),
    );

    let mut c = agent(&env);
    c.args([
        "compact",
        "conv-hooks-1",
        "--keep-tokens",
        "0",
        "--yes",
        "--json",
    ]);
    let out = run(c);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let r = row(&out.doc, "conv-hooks-1");
    assert_eq!(r["status"], "compacted", "{r:#}");

    let (before_text, before) = read_json(&before_file);
    let (after_text, after) = read_json(&after_file);
    // The payload is one line of compact JSON, fields in the order of the snapshot.
    assert_eq!(serde_json::to_string(&before).unwrap(), before_text);
    assert_eq!(serde_json::to_string(&after).unwrap(), after_text);
    assert_eq!(after["compaction_id"], r["compaction_id"]);
    insta::assert_json_snapshot!("before_compaction_payload", before);
    insta::assert_json_snapshot!("after_compaction_payload", after);
}

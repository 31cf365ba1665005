//! Tests of the whole summarizer on conversations in the three stored formats: sections,
//! framing, carried-forward summaries, bounds and determinism; and of what the redesign is
//! for: rules, decisions, required commands and pending asks in everyday phrasing survive
//! (they are user turns, kept near-verbatim), withdrawn statements never read as live, long
//! middle turns are shortened without losing their identifiers, and every word list lives in
//! `lexicon.rs`. The phrasings here are this module's own examples; an independent corpus
//! (tests/ of the crate) judges the summarizer on phrasings written without seeing the code.

use super::*;
use crate::compact::{summary_body, HeadInput};
use crate::message::Format;
use crate::plan::{plan_loaded, Plan, PlanOptions};
use crate::select::Reason;
use crate::store::ConversationMeta;
use crate::store::StoredConversation;
use chrono::{DateTime, FixedOffset};
use serde_json::json;
use serde_json::Value;

/// The registered codec named `name` (the formats kodelet stores).
fn codec(name: &str) -> crate::message::Format {
    crate::store::StoreKind::codec(name).expect("a registered codec")
}

use super::render::{CAP_COMMANDS, CAP_FILES, PRIOR_END, WITHDRAWN_LEAD};

fn now() -> DateTime<FixedOffset> {
    DateTime::parse_from_rfc3339("2026-11-02T09:30:00+01:00").unwrap()
}

/// A conversation written in one of the three stored formats.
struct Conv {
    format: Format,
    msgs: Vec<Value>,
}

impl Conv {
    fn new(format: Format) -> Conv {
        Conv {
            format,
            msgs: Vec::new(),
        }
    }
    fn user(&mut self, text: &str) -> &mut Self {
        self.msgs.push(match self.format.name() {
            "anthropic" => json!({"content":[{"text":text,"type":"text"}],"role":"user"}),
            "openai-chat" => json!({"role":"user","content":text}),
            "openai-responses" => json!({"type":"message","role":"user","content":text}),
            other => unimplemented!("these helpers build the Anthropic, OpenAI chat and Responses formats only, not {other}"),
        });
        self
    }
    /// An assistant turn: optional thinking, text, then tool calls (id, name, input).
    fn assistant(
        &mut self,
        thinking: Option<&str>,
        text: &str,
        calls: &[(&str, &str, Value)],
    ) -> &mut Self {
        match self.format.name() {
            "anthropic" => {
                let mut content = Vec::new();
                if let Some(t) = thinking {
                    content.push(json!({"signature":"sig","thinking":t,"type":"thinking"}));
                }
                if !text.is_empty() {
                    content.push(json!({"text":text,"type":"text"}));
                }
                for (id, name, input) in calls {
                    content.push(json!({"id":id,"input":input,"name":name,"type":"tool_use"}));
                }
                self.msgs
                    .push(json!({"content":content,"role":"assistant"}));
            }
            "openai-chat" => {
                let mut m = json!({"role":"assistant"});
                if !text.is_empty() {
                    m["content"] = json!(text);
                }
                if let Some(t) = thinking {
                    m["reasoning_content"] = json!(t);
                }
                if !calls.is_empty() {
                    m["tool_calls"] = Value::Array(
                        calls
                            .iter()
                            .map(|(id, name, input)| {
                                json!({"id":id,"type":"function","function":{"name":name,"arguments":input.to_string()}})
                            })
                            .collect(),
                    );
                }
                self.msgs.push(m);
            }
            "openai-responses" => {
                if let Some(t) = thinking {
                    self.msgs
                        .push(json!({"type":"reasoning","role":"assistant","content":t}));
                }
                if !text.is_empty() {
                    self.msgs
                        .push(json!({"type":"message","role":"assistant","content":text}));
                }
                for (id, name, input) in calls {
                    self.msgs.push(json!({"type":"function_call","call_id":id,"name":name,"arguments":input.to_string()}));
                }
            }
            other => unimplemented!("these helpers build the Anthropic, OpenAI chat and Responses formats only, not {other}"),
        }
        self
    }
    /// Results (id, content, is_error) of the previous turn's calls.
    fn results(&mut self, results: &[(&str, &str, bool)]) -> &mut Self {
        match self.format.name() {
            "anthropic" => {
                let content: Vec<Value> = results
                    .iter()
                    .map(|(id, c, e)| {
                        json!({"tool_use_id":id,"is_error":e,"content":[{"text":c,"type":"text"}],"type":"tool_result"})
                    })
                    .collect();
                self.msgs.push(json!({"content":content,"role":"user"}));
            }
            "openai-chat" => {
                for (id, c, _) in results {
                    self.msgs
                        .push(json!({"role":"tool","content":c,"tool_call_id":id}));
                }
            }
            "openai-responses" => {
                for (id, c, _) in results {
                    self.msgs
                        .push(json!({"type":"function_call_output","call_id":id,"output":c}));
                }
            }
            other => unimplemented!("these helpers build the Anthropic, OpenAI chat and Responses formats only, not {other}"),
        }
        self
    }
    fn raw(&self) -> String {
        serde_json::to_string(&self.msgs).unwrap()
    }
    fn plan(&self, keep_tokens: usize) -> Plan {
        let created = "2026-10-30 10:00:00.000000000 +0000 UTC".to_string();
        // The row as kodelet stores it: its provider and `metadata.api_mode` state the format.
        let (provider, api_mode) = match self.format.name() {
            "anthropic" => ("anthropic", None),
            "openai-chat" => ("openai", Some("chat_completions")),
            "openai-responses" => ("openai", Some("responses")),
            other => unimplemented!("these helpers build the Anthropic, OpenAI chat and Responses formats only, not {other}"),
        };
        let row = StoredConversation::detached("conv-1", self.raw());
        let meta = ConversationMeta {
            id: "conv-1".into(),
            provider: provider.into(),
            api_mode: api_mode.map(String::from),
            codec: Some(self.format),
            current_context: Some(1000),
            max_context: Some(200000),
            created_at: created.clone(),
            updated_at: created,
            ..Default::default()
        };
        let opts = PlanOptions {
            keep_tokens: Some(keep_tokens),
            context_limit: None,
            ..Default::default()
        };
        plan_loaded(row, meta, Reason::Manual, &opts).unwrap()
    }
}

fn summary_of(plan: &Plan) -> String {
    assert!(
        plan.split().is_some(),
        "plan is a no-op: {:?}",
        plan.decision
    );
    summarize(&HeadInput::new(plan, now()))
}

// ---------------------------------------------------------------------------------------------
// Reading a summary
// ---------------------------------------------------------------------------------------------

/// The text of one section (without its heading), after any carried-forward summary.
fn section<'a>(s: &'a str, title: &str) -> &'a str {
    let s = s.rsplit(PRIOR_END).next().unwrap();
    let start = s
        .find(&format!("## {title}\n"))
        .unwrap_or_else(|| panic!("no section {title} in:\n{s}"));
    let rest = &s[start + title.len() + 4..];
    match rest.find("\n## ") {
        Some(e) => &rest[..e],
        None => rest,
    }
}

/// (the summary outside the withdrawn section, the withdrawn section), as the contract defines
/// them: the section runs from a line starting `## Withdrawn` to the next line starting `## `.
fn split_withdrawn(s: &str) -> (String, String) {
    let mut live = String::new();
    let mut gone = String::new();
    let mut inside = false;
    for line in s.lines() {
        if line.starts_with("## ") {
            inside = line.starts_with("## Withdrawn");
        }
        let to = if inside { &mut gone } else { &mut live };
        to.push_str(line);
        to.push('\n');
    }
    (collapse(&live), collapse(&gone))
}

/// Tool traffic and narration: `steps` rounds of reads (large bodies), test runs and edits,
/// varied by `seed`, so heads have a realistic size and mix.
fn busy(c: &mut Conv, steps: usize, seed: usize) {
    const AREAS: &[&str] = &["billing", "auth", "search", "export", "ingest", "audit"];
    const SAID: &[&str] = &[
        "Reading {f} to see how requests flow through it.",
        "The handler in {f} looks straightforward.",
        "Running the tests for this area.",
        "That passes; moving on.",
        "I'll look at {f} next.",
        "This part matches what the callers expect.",
        "Small cleanup in {f} while I'm here.",
    ];
    for k in 0..steps {
        let n = seed * 31 + k;
        let area = AREAS[n % AREAS.len()];
        let f = format!("src/{area}/mod_{}.rs", n % 7);
        let text = SAID[n % SAID.len()].replace("{f}", &f);
        let id = format!("b{seed}_{k}");
        let (call, out) = match n % 3 {
            0 => (
                ("file_read", json!({"file_path": f})),
                (0..120)
                    .map(|i| format!("    let v{i} = {area}::step_{i}(&ctx)?; // line {i}\n"))
                    .collect::<String>(),
            ),
            1 => (
                ("bash", json!({"command": format!("cargo test -p {area}")})),
                format!(
                    "running 60 tests\n{}test result: ok. 60 passed; 0 failed",
                    (0..60)
                        .map(|i| format!("test {area}::tests::case_{i} ... ok\n"))
                        .collect::<String>()
                ),
            ),
            _ => (
                (
                    "file_edit",
                    json!({"file_path": f, "old_text": "a", "new_text": "b"}),
                ),
                format!("Edited {f}"),
            ),
        };
        c.assistant(None, &text, &[(&id, call.0, call.1)]);
        c.results(&[(&id, &out, false)]);
    }
}

/// A conversation: a first request, work, then `turns` (each followed by work), a last
/// request, and a tail long enough to be kept.
fn conversation(format: Format, turns: &[&str], seed: usize) -> Conv {
    let mut c = Conv::new(format);
    c.user("Please tidy up the export pipeline in src/export/ and make the nightly job reliable.");
    busy(&mut c, 6, seed);
    for (k, t) in turns.iter().enumerate() {
        c.user(t);
        c.assistant(None, "Understood, continuing with that in mind.", &[]);
        busy(&mut c, 5, seed + k + 1);
    }
    c.user("Good. Now write the changelog entry for the export changes.");
    c.assistant(None, &"Writing the changelog entry now. ".repeat(30), &[]);
    c
}

// ---------------------------------------------------------------------------------------------
// Layout, sections, bounds
// ---------------------------------------------------------------------------------------------

/// A realistic session: request with a rule, reads, a failing build, a fix, decisions.
fn session(format: Format) -> Conv {
    let file_body: String = (0..300)
        .map(|i| format!("    let field_{i} = compute_{i}(&self.inner)?;\n"))
        .collect();
    let test_log: String = (0..200)
        .map(|i| format!("test retry::tests::case_{i} ... ok\n"))
        .collect();
    let mut c = Conv::new(format);
    c.user("Add retry with exponential backoff to the HTTP client in crates/netkit/src/client.rs. The public API of `Client` is frozen; keep the existing tests green.");
    c.assistant(
        Some("SECRET-THINKING: maybe I should rewrite everything"),
        "I'll start by reading the client.",
        &[(
            "call_1",
            "file_read",
            json!({"file_path": "/home/dev/netkit/crates/netkit/src/client.rs"}),
        )],
    );
    c.results(&[("call_1", &format!("pub struct Client {{\n    inner: reqwest::Client,\n}}\n// panic!(\"not an error\")\nError: this line is file content\n{file_body}"), false)]);
    c.assistant(
        None,
        "A jittered backoff fits better than a fixed delay here, because the upstream rate-limits bursts.",
        &[(
            "call_2",
            "file_edit",
            json!({"file_path": "/home/dev/netkit/crates/netkit/src/client.rs", "old_text": "a", "new_text": "b"}),
        )],
    );
    c.results(&[(
        "call_2",
        "Edited /home/dev/netkit/crates/netkit/src/client.rs",
        false,
    )]);
    c.assistant(
        None,
        "",
        &[(
            "call_3",
            "bash",
            json!({"command": "cargo build -p netkit", "timeout": 120}),
        )],
    );
    c.results(&[(
        "call_3",
        "Error: Command exited with status 101\n   Compiling netkit v0.3.1\nerror[E0425]: cannot find value `max_backoff_ms` in this scope\n  --> crates/netkit/src/client.rs:88:20\n   |\nerror: could not compile `netkit` (lib) due to 1 previous error",
        true,
    )]);
    c.assistant(
        None,
        "The missing piece is a field: max_backoff_ms was never added to RetryPolicy. Adding it with a default of 30000.",
        &[(
            "call_4",
            "file_write",
            json!({"file_path": "/home/dev/netkit/crates/netkit/src/retry.rs", "content": "pub struct RetryPolicy { pub max_backoff_ms: u64 }"}),
        )],
    );
    c.results(&[("call_4", "File written successfully", false)]);
    c.user("Before you tell me you're done, `cargo clippy -- -D warnings` has to pass. Also a unit test for the jitter would be nice.");
    c.assistant(
        None,
        "Running clippy and the tests now; the jitter test goes in crates/netkit/tests/retry.rs afterwards.",
        &[("call_5", "bash", json!({"command": "cargo clippy -p netkit -- -D warnings && cargo test -p netkit"}))],
    );
    c.results(&[(
        "call_5",
        &format!("    Finished `dev` profile\nrunning 12 tests\n{test_log}test result: ok. 12 passed; 0 failed"),
        false,
    )]);
    // The tail: enough recent text to be kept.
    c.user("Great. Now document the retry policy in README.md.");
    c.assistant(
        None,
        &"I'll write the README section describing the policy. ".repeat(20),
        &[],
    );
    c
}

#[test]
fn header_and_framing_are_exact() {
    let plan = session(codec("anthropic")).plan(300);
    let s = summary_of(&plan);
    let split = plan.split().unwrap();
    let expected = format!(
        "{SUMMARY_HEADER}\nThis session continues an earlier conversation. agent-db replaced {} earlier messages (about {} tokens) with this summary on 2026-11-02; everything after it is verbatim. Read it as your own notes of what happened so far.\n\n## ",
        split.cut, split.head_tokens
    );
    assert!(s.starts_with(&expected), "got:\n{s}");
    // summary_body() strips exactly the framing paragraph.
    let body = summary_body(&s);
    assert!(
        body.starts_with("## User requests and instructions\n1. \"Add retry"),
        "{body}"
    );
    assert!(s.ends_with('\n') && !s.ends_with("\n\n"));
}

#[test]
fn sections_are_populated_from_a_realistic_head() {
    for format in [
        codec("anthropic"),
        codec("openai-chat"),
        codec("openai-responses"),
    ] {
        let plan = session(format).plan(300);
        let s = summary_of(&plan);
        // Every user turn, verbatim, in order.
        let user = section(&s, "User requests and instructions");
        assert!(user.starts_with("1. \"Add retry with exponential backoff to the HTTP client in crates/netkit/src/client.rs. The public API of `Client` is frozen; keep the existing tests green.\"\n"), "{user}");
        assert!(user.contains("2. \"Before you tell me you're done, `cargo clippy -- -D warnings` has to pass. Also a unit test for the jitter would be nice.\"\n"), "{user}");
        // Files: the edited file first (touched twice), with its actions.
        let files = section(&s, "Files touched");
        assert!(
            files.starts_with("- /home/dev/netkit/crates/netkit/src/client.rs (edited, read)"),
            "{files}"
        );
        assert!(
            files.contains("/home/dev/netkit/crates/netkit/src/retry.rs (written)"),
            "{files}"
        );
        // Commands with failure marks and exit codes.
        let cmds = section(&s, "Commands run");
        assert!(
            cmds.contains("- $ cargo build -p netkit (failed, exit 101)"),
            "{cmds}"
        );
        assert!(
            cmds.contains("- $ cargo clippy -p netkit -- -D warnings && cargo test -p netkit\n"),
            "{cmds}"
        );
        // Errors: the compiler line and its location, and what came next. The file
        // content's "Error:" line (a read) is not an error.
        let errs = section(&s, "Errors seen");
        assert!(
            errs.contains("bash `cargo build -p netkit` failed (exit 101):"),
            "{errs}"
        );
        assert!(errs.contains("error[E0425]: cannot find value `max_backoff_ms` in this scope | --> crates/netkit/src/client.rs:88:20"), "{errs}");
        assert!(
            errs.contains("then: \"The missing piece is a field"),
            "{errs}"
        );
        assert!(!errs.contains("file content"), "{errs}");
        // The assistant's choices, in its words (no cue word in either).
        let dec = section(&s, "Decisions and findings");
        assert!(dec.contains("\"A jittered backoff fits better than a fixed delay here, because the upstream rate-limits bursts.\""), "{dec}");
        assert!(
            dec.contains("max_backoff_ms was never added to RetryPolicy"),
            "{dec}"
        );
        // Where we stopped.
        let cur = section(&s, "Where we stopped");
        assert!(
            cur.contains("Last assistant message: \"Running clippy and the tests now;"),
            "{cur}"
        );
        assert!(cur.contains("bash `cargo clippy -p netkit"), "{cur}");
        // Never: thinking, tool-result bodies, a withdrawn section with nothing in it.
        assert!(!s.contains("SECRET-THINKING"), "{s}");
        assert!(!s.contains("reqwest::Client"), "{s}");
        assert!(!s.contains("12 passed"), "{s}");
        assert!(!s.contains("## Withdrawn"), "{s}");
    }
}

#[test]
fn formats_give_the_same_sections() {
    let bodies: Vec<String> = [
        codec("anthropic"),
        codec("openai-chat"),
        codec("openai-responses"),
    ]
    .into_iter()
    .map(|f| summary_body(&summary_of(&session(f).plan(300))))
    .collect();
    // Anthropic marks errors with is_error; the OpenAI formats rely on the text: same result.
    assert_eq!(bodies[0], bodies[1]);
    assert_eq!(bodies[1], bodies[2]);
}

#[test]
fn deterministic() {
    let plan = session(codec("openai-responses")).plan(300);
    let a = summary_of(&plan);
    let b = summary_of(&plan.clone());
    let c = summary_of(&session(codec("openai-responses")).plan(300));
    assert_eq!(a, b);
    assert_eq!(a, c);
}

#[test]
fn huge_head_is_bounded_and_middle_turns_shrink_first() {
    let mut c = Conv::new(codec("anthropic"));
    c.user("Refactor the whole billing service. Money values stay in integer cents. Card numbers never go to the logs.");
    for i in 0..400 {
        let path = format!("services/billing/src/module_{i}/handler_{}.rs", i * 7 % 13);
        let id_r = format!("r{i}");
        let id_b = format!("b{i}");
        c.assistant(
            Some(&"thinking hard about it ".repeat(20)),
            &format!("Step {i}: splitting handler {i} into smaller functions, since the match had grown to 400 lines. Wiring handler {i} into the router comes after."),
            &[
                (&id_r, "file_edit", json!({"file_path": path, "old_text": "x".repeat(200), "new_text": "y".repeat(300)})),
                (&id_b, "bash", json!({"command": format!("cargo test -p billing module_{i}")})),
            ],
        );
        let out = if i % 3 == 0 {
            format!("Error: Command exited with status 101\nthread 'module_{i}::tests::rounding' panicked at services/billing/src/module_{i}/mod.rs:{}:5:\nassertion `left == right` failed", 100 + i)
        } else {
            format!(
                "running 30 tests\n{}test result: ok. 30 passed",
                "test ok\n".repeat(200)
            )
        };
        c.results(&[(&id_r, "ok", false), (&id_b, &out, i % 3 == 0)]);
        if i % 10 == 0 {
            c.user(&format!("Batch {i} looks fine to me, and I went through the diff twice while drinking my coffee this morning, so that part is settled. The invoices table in batch {i} belongs to finance_{i}_ledger though. {}", "We talked about the wider context at length last week and nothing new came up since then. ".repeat(6)));
        }
    }
    c.user("Finish up and summarize the refactor.");
    c.assistant(None, &"Final wrap-up text. ".repeat(50), &[]);
    let plan = c.plan(2_000);
    let split = plan.split().unwrap();
    assert!(split.head_tokens > 100_000, "{}", split.head_tokens);
    let s = summary_of(&plan);
    let tokens = count_text(&s);
    assert!(
        tokens <= MAX_SUMMARY_TOKENS + 200,
        "summary is {tokens} tokens"
    );
    assert!(
        tokens * 10 < split.head_tokens,
        "{tokens} vs head {}",
        split.head_tokens
    );
    // The first request is verbatim; lists say what they omitted.
    assert!(s.contains("1. \"Refactor the whole billing service. Money values stay in integer cents. Card numbers never go to the logs.\""), "{s}");
    assert!(s.contains("more"), "{s}");
    assert!(!s.contains("thinking hard"));
    // Middle turns were shortened by cutting prose, keeping their identifiers.
    let user = section(&s, "User requests and instructions");
    let second = user.lines().find(|l| l.starts_with("2. ")).unwrap();
    assert!(second.ends_with("finance_0_ledger though. …\""), "{user}");
    let kept_ids = (0..400)
        .step_by(10)
        .filter(|i| user.contains(&format!("finance_{i}_ledger")))
        .count();
    assert!(kept_ids >= 20, "{kept_ids} of 40 identifiers kept:\n{user}");
    // Every section is bounded.
    assert!(section(&s, "Files touched").lines().count() <= CAP_FILES + 2);
    assert!(section(&s, "Commands run").lines().count() <= CAP_COMMANDS + 2);
    // Summarizing a small head stays within its budget (plus the parts never cut).
    let small = session(codec("openai-chat")).plan(300);
    let ss = summary_of(&small);
    let head = small.split().unwrap().head_tokens;
    assert!(
        count_text(&ss) <= budget(head) + 400,
        "{} vs {}",
        count_text(&ss),
        head
    );
}

#[test]
fn realistic_heads_are_compressed_at_least_five_times() {
    let turns = [
        "btw the audit log format is owned by compliance, leave src/audit/format.rs alone",
        "the flaky case in export is ingest::tests::case_12, look at it when you get there",
        "fine by me",
    ];
    for (k, format) in [
        codec("anthropic"),
        codec("openai-chat"),
        codec("openai-responses"),
    ]
    .into_iter()
    .enumerate()
    {
        let mut c = conversation(format, &turns, k);
        busy(&mut c, 60, 9 + k);
        c.user("Last thing for now: rerun everything.");
        c.assistant(None, &"Rerunning the whole suite now. ".repeat(40), &[]);
        let plan = c.plan(1_500);
        let head = plan.split().unwrap().head_tokens;
        assert!(head > 20_000, "head of {head} tokens");
        let s = summary_of(&plan);
        let t = count_text(&s);
        assert!(t * 5 <= head, "summary {t} tokens for a head of {head}");
        assert!(s.contains("leave src/audit/format.rs alone"), "{s}");
        assert!(s.contains("ingest::tests::case_12"), "{s}");
    }
}

#[test]
fn latest_instruction_in_the_head_is_noted() {
    let mut c = Conv::new(codec("anthropic"));
    c.user("Investigate why the nightly export job times out.");
    for i in 0..30 {
        let id = format!("t{i}");
        c.assistant(
            None,
            "",
            &[(
                &id,
                "grep_tool",
                json!({"pattern": "export_timeout", "path": "jobs/"}),
            )],
        );
        c.results(&[(
            &id,
            &"jobs/export.go:12: export_timeout := 30 * time.Second // error: too low\n".repeat(30),
            false,
        )]);
    }
    c.assistant(
        None,
        "Found it: the timeout is hard-coded to 30 seconds.",
        &[],
    );
    let plan = c.plan(50);
    let split = plan.split().unwrap();
    assert_eq!(split.reinsert, Some(0));
    let s = summary_of(&plan);
    assert!(
        section(&s, "User requests and instructions").starts_with(
            "1. (the latest user instruction; it is repeated verbatim right after this summary)"
        ),
        "{s}"
    );
    assert!(
        section(&s, "Pending").contains("The latest user instruction (message 1 above)"),
        "{s}"
    );
    assert!(
        section(&s, "Files touched").contains("- jobs/ (searched 30×)"),
        "{s}"
    );
    // Search matches that mention "error:" are not errors.
    assert!(!s.contains("## Errors"), "{s}");
}

#[test]
fn images_show_as_placeholders() {
    // A 2x3 PNG header.
    let mut png = vec![0x89, b'P', b'N', b'G', 0x0d, 0x0a, 0x1a, 0x0a, 0, 0, 0, 13];
    png.extend_from_slice(b"IHDR");
    png.extend_from_slice(&2u32.to_be_bytes());
    png.extend_from_slice(&3u32.to_be_bytes());
    png.extend_from_slice(&[8, 6, 0, 0, 0, 0, 0, 0, 0]);
    use base64::Engine;
    let data = base64::engine::general_purpose::STANDARD.encode(&png);
    let mut c = Conv::new(codec("anthropic"));
    c.msgs.push(json!({"role":"user","content":[
        {"type":"text","text":"The login button is misaligned, see screenshot."},
        {"type":"image","source":{"type":"base64","media_type":"image/png","data":data}}
    ]}));
    c.assistant(None, &"Looking at the CSS. ".repeat(10), &[]);
    c.user("Also check the signup page.");
    c.assistant(None, &"Checking the signup page now. ".repeat(40), &[]);
    let plan = c.plan(100);
    let s = summary_of(&plan);
    assert!(
        s.contains(
            "1. \"The login button is misaligned, see screenshot. [image: image/png 2x3, 33 B]\""
        ),
        "{s}"
    );
    assert!(!s.contains(&data));
}

#[test]
fn tool_output_is_compressed_to_its_signal() {
    let mut c = Conv::new(codec("openai-chat"));
    c.user("Make the ledger tests pass.");
    let log: String = (0..80)
        .map(|i| format!("=== RUN   TestLedger{i}\n--- PASS: TestLedger{i} (0.00s)\n"))
        .collect();
    c.assistant(
        None,
        "",
        &[(
            "g1",
            "bash",
            json!({"command": "go test ./internal/ledger/..."}),
        )],
    );
    c.results(&[(
        "g1",
        &format!("{log}=== RUN   TestReconcileQuux\n    ledger_test.go:88: balance mismatch: want 4200 got 4190\n--- FAIL: TestReconcileQuux (0.02s)\nFAIL\nFAIL\tgithub.com/acme/ledger\t0.412s\nError: Command exited with status 1"),
        true,
    )]);
    c.assistant(None, "The rounding in reconcile drops a cent.", &[]);
    c.user("ok go on");
    c.assistant(None, &"Fixing the rounding. ".repeat(40), &[]);
    let s = summary_of(&c.plan(100));
    let errs = section(&s, "Errors seen");
    assert!(errs.contains("(exit 1)"), "{errs}");
    assert!(errs.contains("failed tests: TestReconcileQuux"), "{errs}");
    assert!(!s.contains("TestLedger42"), "no whole bodies: {s}");
    assert!(
        section(&s, "Pending").contains("$ go test ./internal/ledger/... (exit 1)"),
        "{s}"
    );
}

// ---------------------------------------------------------------------------------------------
// Everyday phrasing
// ---------------------------------------------------------------------------------------------

/// (what the user writes, the key that must survive). No fixed wording: rules, decisions,
/// required commands and pending asks as people type them.
const EVERYDAY: &[(&str, &str)] = &[
    (
        "zorp/generated is off limits, ops owns it",
        "zorp/generated",
    ),
    ("btw leave quillfeather.toml alone", "quillfeather.toml"),
    (
        "heads up: whatever you do, the BRAMBLE_SEED value stays exactly as it is",
        "BRAMBLE_SEED",
    ),
    (
        "vendor/snarkle belongs to the platform folks, hands off please",
        "vendor/snarkle",
    ),
    (
        "please keep your edits out of gen/wombat_pb.rs, it gets regenerated nightly",
        "gen/wombat_pb.rs",
    ),
    (
        "before anything lands on main I want `./scripts/check-frobnitz.sh` green",
        "./scripts/check-frobnitz.sh",
    ),
    ("ok, the tokio-lumen runtime it is", "tokio-lumen"),
    (
        "later we still need to port the GlimmerQueue consumer to the v3 API, just so you know",
        "GlimmerQueue",
    ),
    (
        "gentle reminder that the /v1/pebbles endpoint must stay backwards compatible",
        "/v1/pebbles",
    ),
    (
        "reading from the fennel_archive schema is fine but writing there breaks prod",
        "fennel_archive",
    ),
    (
        "run make verify-dinglebop whenever you touch the protos",
        "make verify-dinglebop",
    ),
    (
        "let's go with a bounded channel of 4096 slots for the fan-out",
        "4096 slots",
    ),
];

#[test]
fn everyday_phrasings_survive() {
    for (k, (phrase, key)) in EVERYDAY.iter().enumerate() {
        for format in [codec("anthropic"), codec("openai-responses")] {
            // The phrase sits among other turns, at a varying depth.
            let mut turns = vec![
                "sounds good",
                "what does the retry budget look like right now?",
            ];
            turns.insert(k % 3, phrase);
            let plan = conversation(format, &turns, k).plan(400);
            let s = summary_of(&plan);
            let (live, _) = split_withdrawn(&s);
            assert!(live.contains(key), "{key:?} lost from {phrase:?}:\n{s}");
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Withdrawals
// ---------------------------------------------------------------------------------------------

/// (earlier statement, later one that takes it back, withdrawn key, live key in the later one).
const WITHDRAWALS: &[(&str, &str, &str, Option<&str>)] = &[
    (
        "Please route the exports through the kestrel-relay service.",
        "Actually scrap kestrel-relay, send them straight to the ossuary-bucket.",
        "kestrel-relay",
        Some("ossuary-bucket"),
    ),
    (
        "Never touch lib/ptarmigan.py, it's generated.",
        "lib/ptarmigan.py is yours to edit now, the generator is gone.",
        "lib/ptarmigan.py",
        None,
    ),
    (
        "We'll need a migration for the gorse_events table too.",
        "forget the gorse_events migration, that table is being dropped anyway",
        "gorse_events",
        None,
    ),
    (
        "Run `make lint-sedge` before each commit.",
        "no need to run make lint-sedge anymore, CI does it now; `make ci-quick` is enough",
        "lint-sedge",
        Some("make ci-quick"),
    ),
    (
        "Add the DUNLIN_KEY variable to the allowlist.",
        "On second thought, keep DUNLIN_KEY off the allowlist.",
        "DUNLIN_KEY",
        None,
    ),
    (
        "Let's target the 2.14-lts branch for the release.",
        "we're not targeting 2.14-lts now, it slipped; 2.15-rc1 is the new target",
        "2.14-lts",
        Some("2.15-rc1"),
    ),
    (
        "Pin serde_quartz to 0.9 in Cargo.toml.",
        "ignore what I said about serde_quartz, the pin is not needed",
        "serde_quartz",
        None,
    ),
];

fn withdrawal_conversation(format: Format, earlier: &str, later: &str, seed: usize) -> Conv {
    let turns = [
        "can you also look at the slow query in search?",
        earlier,
        "sounds good",
        later,
        "thanks, carry on",
    ];
    conversation(format, &turns, seed)
}

#[test]
fn withdrawn_statements_never_read_as_live() {
    for (k, (earlier, later, gone, live_key)) in WITHDRAWALS.iter().enumerate() {
        for format in [codec("anthropic"), codec("openai-chat")] {
            let plan = withdrawal_conversation(format, earlier, later, k).plan(400);
            let s = summary_of(&plan);
            let (live, withdrawn) = split_withdrawn(&s);
            assert!(!live.contains(gone), "{gone:?} presented as live:\n{s}");
            assert!(
                withdrawn.contains(gone),
                "{gone:?} not listed as withdrawn:\n{s}"
            );
            assert!(
                withdrawn.contains(&collapse(later)),
                "the latest word is quoted:\n{s}"
            );
            if let Some(r) = live_key {
                assert!(live.contains(r), "the new choice {r:?} is live:\n{s}");
            }
            // The other turns are untouched.
            assert!(
                live.contains("what does the retry") || live.contains("slow query in search"),
                "{s}"
            );
            assert_eq!(s.matches("\n## Withdrawn").count(), 1, "{s}");
        }
    }
}

#[test]
fn a_thing_the_agent_already_used_can_still_be_withdrawn() {
    // The agent added the crate and used it in many tool calls before the user changed course.
    let mut c = conversation(
        codec("openai-chat"),
        &["Use the ibis-json crate for the parser."],
        5,
    );
    for k in 0..8 {
        let id = format!("ibis{k}");
        c.assistant(
            None,
            "Wiring ibis-json into the parser.",
            &[(
                &id,
                "bash",
                json!({"command": format!("cargo build -p parser --features ibis-json-{k}")}),
            )],
        );
        c.results(&[(&id, "Compiling ibis-json v0.3.0\nFinished", false)]);
    }
    c.user("forget ibis-json, serde_json is enough");
    busy(&mut c, 4, 9);
    c.user("ok carry on");
    c.assistant(None, &"Carrying on. ".repeat(80), &[]);
    let s = summary_of(&c.plan(400));
    let (live, withdrawn) = split_withdrawn(&s);
    assert!(!live.contains("ibis-json"), "{s}");
    assert!(withdrawn.contains("forget ibis-json"), "{s}");
    assert!(live.contains("serde_json is enough"), "{s}");
}

#[test]
fn a_withdrawal_in_the_kept_tail_still_withdraws() {
    // The statement is summarized; the message taking it back stays verbatim in the tail.
    let mut c = conversation(
        codec("anthropic"),
        &["Please route the exports through kestrel-relay."],
        4,
    );
    c.user("actually scrap kestrel-relay, send them straight to the bucket");
    c.assistant(
        None,
        &"Dropping the relay and writing to the bucket directly. ".repeat(30),
        &[],
    );
    let plan = c.plan(600);
    assert!(plan
        .tail()
        .iter()
        .any(|m| m.text().contains("scrap kestrel-relay")));
    let s = summary_of(&plan);
    let (live, withdrawn) = split_withdrawn(&s);
    assert!(!live.contains("kestrel-relay"), "{s}");
    assert!(withdrawn.contains("scrap kestrel-relay"), "{s}");
}

#[test]
fn a_short_turn_takes_back_the_turn_before() {
    let turns = [
        "Also bump the pool size in conf/heron.yaml to 64.",
        "scratch that, leave it",
        "what about the flaky search test?",
    ];
    let s = summary_of(&conversation(codec("anthropic"), &turns, 3).plan(400));
    let (live, withdrawn) = split_withdrawn(&s);
    assert!(!live.contains("conf/heron.yaml"), "{s}");
    assert!(withdrawn.contains("conf/heron.yaml"), "{s}");
    assert!(live.contains("flaky search test"), "{s}");
}

#[test]
fn a_thread_follows_the_latest_word() {
    // Taking back twice stays taken back.
    let turns = [
        "Add the heron_index to the orders table.",
        "drop the heron_index, writes are too slow with it",
        "again, forget heron_index",
    ];
    let s = summary_of(&conversation(codec("anthropic"), &turns, 1).plan(400));
    let (live, withdrawn) = split_withdrawn(&s);
    assert!(!live.contains("heron_index"), "{s}");
    assert!(withdrawn.contains("drop the heron_index"), "{s}");
    // Taken back, then wanted again: live, with the history in the withdrawn section.
    let turns = [
        "Add the heron_index to the orders table.",
        "drop the heron_index, writes are too slow with it",
        "please add heron_index back, the reads matter more",
    ];
    let s = summary_of(&conversation(codec("anthropic"), &turns, 2).plan(400));
    let (live, withdrawn) = split_withdrawn(&s);
    assert!(live.contains("please add heron_index back"), "{s}");
    assert!(withdrawn.contains("drop the heron_index"), "{s}");
}

#[test]
fn the_user_can_reject_the_assistants_plan() {
    let mut c = Conv::new(codec("openai-chat"));
    c.user("The cache in src/search/cache.rs thrashes; find a better eviction scheme.");
    busy(&mut c, 4, 1);
    c.assistant(
        None,
        "My plan: replace the LRU with a Bloom-gated W-TinyLFU admission keyed by shard_fingerprint.",
        &[],
    );
    c.user(
        "no shard_fingerprint please, the shards get rebalanced hourly; key it by tenant instead",
    );
    busy(&mut c, 4, 2);
    c.user("ok continue");
    c.assistant(None, &"Continuing with the eviction work. ".repeat(40), &[]);
    let s = summary_of(&c.plan(300));
    let (live, withdrawn) = split_withdrawn(&s);
    assert!(!live.contains("shard_fingerprint"), "{s}");
    assert!(withdrawn.contains("(assistant)"), "{s}");
}

#[test]
fn restating_a_rule_keeps_it_live() {
    let pairs = [
        (
            "Don't touch migrations/0007_plover.sql.",
            "again: don't touch migrations/0007_plover.sql, seriously",
            "migrations/0007_plover.sql",
        ),
        (
            "The tern_flags table is read-only for us.",
            "reminder, tern_flags is read-only",
            "tern_flags",
        ),
    ];
    for (k, (a, b, key)) in pairs.iter().enumerate() {
        let s = summary_of(&withdrawal_conversation(codec("anthropic"), a, b, k).plan(400));
        let (live, _) = split_withdrawn(&s);
        assert!(live.contains(key), "{key:?} lost:\n{s}");
        assert!(!s.contains("## Withdrawn"), "{s}");
    }
}

#[test]
fn the_sessions_topic_is_never_withdrawn() {
    // The project's name is in many messages: a negative remark about one aspect of it does not
    // take the project back.
    let mut c = Conv::new(codec("anthropic"));
    c.user("We are moving the curlew-billing exporter to the event bus.");
    for k in 0..4 {
        busy(&mut c, 3, k);
        c.assistant(
            None,
            "Checked the curlew-billing producer again; it batches per tenant.",
            &[],
        );
    }
    c.user("curlew-billing must not lose events during the switch.");
    busy(&mut c, 4, 7);
    c.user("ok continue");
    c.assistant(None, &"Continuing. ".repeat(60), &[]);
    let s = summary_of(&c.plan(300));
    assert!(!s.contains("## Withdrawn"), "{s}");
    assert!(s.contains("curlew-billing must not lose events"), "{s}");
}

#[test]
fn earlier_withdrawals_are_carried_forward_and_still_masked() {
    // First compaction: a withdrawal in the head.
    let (earlier, later, gone, _) = WITHDRAWALS[0];
    let first = withdrawal_conversation(codec("openai-chat"), earlier, later, 0);
    let plan = first.plan(400);
    let s1 = summary_of(&plan);
    assert!(s1.contains("[W1] = `kestrel-relay`"), "{s1}");
    // Re-compaction: the summary heads the history, followed by more work that mentions the
    // withdrawn subject in passing, and a new withdrawal.
    let mut c = Conv::new(codec("openai-chat"));
    c.user(&s1);
    c.assistant(
        None,
        "Continuing; kestrel-relay is out of the picture now.",
        &[],
    );
    busy(&mut c, 6, 4);
    c.user("Please add the heron_probe check to the nightly job.");
    busy(&mut c, 4, 5);
    c.user("drop the heron_probe check, it duplicates the smoke test");
    busy(&mut c, 4, 6);
    c.user("ok, go on");
    c.assistant(None, &"Going on. ".repeat(60), &[]);
    let plan = c.plan(300);
    let input = HeadInput::new(&plan, now());
    assert!(input.prior_summary.is_some());
    let s2 = summarize(&input);
    let (live, withdrawn) = split_withdrawn(&s2);
    assert!(!live.contains(gone), "{s2}");
    assert!(!live.contains("heron_probe"), "{s2}");
    assert!(withdrawn.contains("[W1] = `kestrel-relay`"), "{s2}");
    assert!(withdrawn.contains("[W2] = `heron_probe`"), "{s2}");
    // One withdrawn section, after the carried-forward summary.
    assert_eq!(s2.matches("\n## Withdrawn").count(), 1, "{s2}");
    assert_eq!(s2.matches(WITHDRAWN_LEAD).count(), 1, "{s2}");
    assert!(s2.find(PRIOR_END) < s2.find("## Withdrawn"), "{s2}");
}

#[test]
fn a_models_withdrawn_section_is_merged_too() {
    let body = "## User requests and instructions\nThe user wants the scheduler on tokio.\n\n## Withdrawn or superseded\nThe user first asked for async-std, then dropped it for tokio.\n\n## Where we stopped\nTimer wheel.";
    let earlier = format!("{SUMMARY_HEADER}\nThis session continues an earlier conversation. agent-db replaced 9 earlier messages (about 9000 tokens) with this summary, written by a model on 2026-10-01; everything after it is verbatim. Read it as your own notes of what happened so far.\n\n{body}\n");
    let mut c = Conv::new(codec("anthropic"));
    c.user(&earlier);
    busy(&mut c, 4, 1);
    c.user("Use the egret-timer crate for the wheel.");
    busy(&mut c, 4, 2);
    c.user("forget egret-timer, write the wheel by hand");
    busy(&mut c, 4, 3);
    c.user("ok go");
    c.assistant(None, &"Going. ".repeat(80), &[]);
    let s = summary_of(&c.plan(300));
    assert_eq!(s.matches("\n## Withdrawn").count(), 1, "{s}");
    let (live, withdrawn) = split_withdrawn(&s);
    assert!(
        withdrawn.contains("The user first asked for async-std, then dropped it for tokio."),
        "{s}"
    );
    assert!(withdrawn.contains("[W1] = `egret-timer`"), "{s}");
    assert!(!live.contains("egret-timer"), "{s}");
    assert!(live.contains("Timer wheel."), "{s}");
}

#[test]
fn prior_summary_is_carried_forward() {
    let body = "## User requests and instructions\n1. \"Port the scheduler to tokio.\"\n\n## Files touched\n- src/sched.rs (edited 3×)";
    let earlier = format!(
        "{SUMMARY_HEADER}\nThis session continues an earlier conversation. agent-db replaced 40 earlier messages (about 50000 tokens) with this summary on 2026-10-01; everything after it is verbatim. Read it as your own notes of what happened so far.\n\n{body}\n"
    );
    let mut c = Conv::new(codec("openai-chat"));
    c.user(&earlier);
    c.assistant(
        None,
        "Continuing with the scheduler port; the timer wheel is next.",
        &[("c1", "bash", json!({"command": "cargo test -p sched"}))],
    );
    c.results(&[("c1", "test result: ok. 40 passed", false)]);
    c.user("Now make the timer wheel configurable.");
    c.assistant(
        None,
        &"Working on the configurable timer wheel. ".repeat(30),
        &[],
    );
    let plan = c.plan(150);
    let input = HeadInput::new(&plan, now());
    assert_eq!(input.prior_summary.as_deref(), Some(body));
    let s = summarize(&input);
    assert!(
        s.contains(&format!(
            "\n\n## Earlier summary (carried forward)\n{body}\n{PRIOR_END}\n\n## "
        )),
        "{s}"
    );
    // The earlier summary is not mistaken for a user request.
    assert!(
        section(&s, "User requests and instructions")
            .starts_with("1. (the latest user instruction;"),
        "{s}"
    );
    // And a re-compaction of this summary carries both forward.
    let again = summary_body(&s);
    assert!(again.starts_with("## Earlier summary (carried forward)\n## User requests and instructions\n1. \"Port the scheduler"));
}

#[test]
fn standing_rules_are_the_users_named_statements_that_still_stand() {
    let (earlier, later, gone, _) = WITHDRAWALS[2];
    let plan = withdrawal_conversation(codec("anthropic"), earlier, later, 2).plan(400);
    let rules = standing_rules(plan.loaded.format, plan.head());
    assert!(rules.iter().any(|r| r.contains("src/export/")), "{rules:?}");
    assert!(rules.iter().all(|r| !r.contains(gone)), "{rules:?}");
    assert!(
        !rules.iter().any(|r| r.contains("sounds good")),
        "{rules:?}"
    );
}

// ---------------------------------------------------------------------------------------------
// Word lists
// ---------------------------------------------------------------------------------------------

/// Every word list is in lexicon.rs, as lowercase entries; no other file of the module holds a
/// `&[&str]` list or a `matches!` over string literals.
#[test]
fn every_word_list_is_in_the_lexicon() {
    let others = [
        ("mod.rs", include_str!("mod.rs")),
        ("text.rs", include_str!("text.rs")),
        ("entities.rs", include_str!("entities.rs")),
        ("turns.rs", include_str!("turns.rs")),
        ("assistant.rs", include_str!("assistant.rs")),
        ("supersede.rs", include_str!("supersede.rs")),
        ("tools.rs", include_str!("tools.rs")),
        ("errors.rs", include_str!("errors.rs")),
        ("render.rs", include_str!("render.rs")),
    ];
    for (name, src) in others {
        let code = src.split("#[cfg(test)]").next().unwrap();
        assert!(!code.contains(": &[&str] = &["), "{name} holds a word list");
        for line in code.lines() {
            let t = line.trim_start();
            if t.starts_with("//") {
                continue;
            }
            // `"a" | "b"` string alternatives are a word list too.
            let alternatives = t.match_indices("\" | \"").any(|(at, _)| {
                t[..at]
                    .chars()
                    .next_back()
                    .is_some_and(|c| c.is_alphanumeric() || c == '_')
            });
            assert!(!alternatives, "{name} matches on words: {t}");
        }
    }
    let lexicon = include_str!("lexicon.rs");
    let mut entries = 0;
    for line in lexicon
        .lines()
        .filter(|l| !l.trim_start().starts_with("//"))
    {
        for (k, part) in line.split('"').enumerate() {
            if k % 2 == 1 {
                entries += 1;
                assert_eq!(
                    part,
                    part.to_lowercase(),
                    "lexicon entry {part:?} is not lowercase"
                );
            }
        }
    }
    assert!(entries > 100, "{entries}");
}

/// More ways of taking something back: (earlier, later, withdrawn key).
const TAKEN_BACK: &[(&str, &str, &str)] = &[
    (
        "Please add a retry wrapper around fetch_quux.",
        "never mind the fetch_quux retry wrapper",
        "fetch_quux",
    ),
    (
        "Please add a retry wrapper around fetch_quux.",
        "we won't need the fetch_quux wrapper after all",
        "fetch_quux",
    ),
    (
        "Please add a retry wrapper around fetch_quux.",
        "fetch_quux doesn't need a retry wrapper, it's idempotent upstream",
        "fetch_quux",
    ),
    (
        "Please add a retry wrapper around fetch_quux.",
        "don't bother with fetch_quux",
        "fetch_quux",
    ),
    (
        "Please add a retry wrapper around fetch_quux.",
        "let's not do the fetch_quux retry",
        "fetch_quux",
    ),
    (
        "Please add a retry wrapper around fetch_quux.",
        "fetch_quux retry: cancelled",
        "fetch_quux",
    ),
    (
        "Do not touch config/zeta.yml.",
        "config/zeta.yml is fine to edit now",
        "config/zeta.yml",
    ),
    (
        "Do not touch config/zeta.yml.",
        "you may change config/zeta.yml from now on",
        "config/zeta.yml",
    ),
    (
        "Do not touch config/zeta.yml.",
        "the config/zeta.yml restriction no longer applies",
        "config/zeta.yml",
    ),
    (
        "Use the Quokka scheduler for the cron jobs.",
        "forget Quokka, plain cron is fine",
        "Quokka",
    ),
    (
        "Use the quokka scheduler for the cron jobs.",
        "hmm, quokka is overkill, plain cron instead",
        "quokka",
    ),
    (
        "before committing always run ./ci/lint-all.sh",
        "you can skip ./ci/lint-all.sh from now on, it's in CI",
        "./ci/lint-all.sh",
    ),
    (
        "later we still need to migrate the BLORP index",
        "the BLORP migration isn't happening",
        "BLORP",
    ),
];

#[test]
fn withdrawal_phrasings() {
    for (k, (a, b, key)) in TAKEN_BACK.iter().enumerate() {
        let s = summary_of(&withdrawal_conversation(codec("openai-responses"), a, b, k).plan(400));
        let (live, withdrawn) = split_withdrawn(&s);
        assert!(!live.contains(key), "{a:?} -> {b:?}: {key:?} is live:\n{s}");
        assert!(
            withdrawn.contains(key),
            "{a:?} -> {b:?}: {key:?} not listed:\n{s}"
        );
    }
}

fn summary_with_cues(plan: &Plan, prose_cues: bool) -> String {
    summarize_with(&HeadInput::new(plan, now()), Options { prose_cues })
}

/// Taken back in words no list holds: something asked for or planned, never acted upon, brought
/// up again by the user in other words, and the work goes on without it. Resolved by structure,
/// with the prose cue lists on or off.
#[test]
fn a_request_never_acted_upon_and_brought_up_again_is_dropped() {
    let cases = [
        (
            "Please wire the puffin_metrics exporter into the scheduler.",
            "puffin_metrics is off the table, legal vetoed it",
            "puffin_metrics",
        ),
        (
            "We want GREBE_PREFETCH enabled for the beta tenants.",
            "take GREBE_PREFETCH off the list, it was a misunderstanding",
            "GREBE_PREFETCH",
        ),
        (
            "make sure the plover-bridge service gets a health check",
            "the plover-bridge thing is dead, the team moved on",
            "plover-bridge",
        ),
    ];
    for (k, (earlier, later, key)) in cases.iter().enumerate() {
        let plan = withdrawal_conversation(codec("anthropic"), earlier, later, k).plan(400);
        for cues in [true, false] {
            let s = summary_with_cues(&plan, cues);
            let (live, withdrawn) = split_withdrawn(&s);
            assert!(!live.contains(key), "cues {cues}: {key:?} is live:\n{s}");
            assert!(withdrawn.contains(&collapse(later)), "cues {cues}:\n{s}");
        }
    }
    // The assistant's plan, set aside by the user the same way.
    let mut c = conversation(codec("openai-chat"), &[], 3);
    c.assistant(
        None,
        "Next I'll put a grebe_cache layer in front of the reader.",
        &[],
    );
    c.user("grebe_cache: product said that is out of scope now");
    busy(&mut c, 4, 8);
    c.user("ok carry on");
    c.assistant(None, &"Carrying on. ".repeat(80), &[]);
    for cues in [true, false] {
        let s = summary_with_cues(&c.plan(400), cues);
        let (live, withdrawn) = split_withdrawn(&s);
        assert!(!live.contains("grebe_cache"), "cues {cues}:\n{s}");
        assert!(withdrawn.contains("(assistant)"), "cues {cues}:\n{s}");
    }
}

/// What the structural rule leaves alone: a question that ends the turn, a repeat of the earlier
/// words, something the agent already works on, a request in the latest turns with no work after.
#[test]
fn asking_restating_or_working_on_it_is_not_dropping() {
    let pairs = [
        (
            "Please add the heron_probe check to the nightly job.",
            "what does heron_probe check exactly?",
            "heron_probe",
        ),
        (
            "The tern_flags table stays read-only for us.",
            "reminder: tern_flags stays read-only",
            "tern_flags",
        ),
    ];
    for (k, (a, b, key)) in pairs.iter().enumerate() {
        let plan = withdrawal_conversation(codec("openai-responses"), a, b, k).plan(400);
        for cues in [true, false] {
            let s = summary_with_cues(&plan, cues);
            let (live, _) = split_withdrawn(&s);
            assert!(live.contains(key), "cues {cues}: {key:?} lost:\n{s}");
            assert!(!s.contains("## Withdrawn"), "cues {cues}:\n{s}");
        }
    }
    // The latest word, with no work after it yet: the agent has not had the chance to act.
    let mut c = Conv::new(codec("anthropic"));
    c.user("Please wire the puffin_metrics exporter into the scheduler.");
    busy(&mut c, 8, 2);
    c.user("puffin_metrics should report per tenant, by the way");
    c.assistant(None, &"Looking into the scheduler wiring. ".repeat(40), &[]);
    for cues in [true, false] {
        let s = summary_with_cues(&c.plan(300), cues);
        let (live, _) = split_withdrawn(&s);
        assert!(
            live.contains("puffin_metrics exporter"),
            "cues {cues}:\n{s}"
        );
    }
    // The agent works on it (tool calls name it), then the user comments on it.
    let mut c = conversation(
        codec("anthropic"),
        &["Use the ibis-json crate for the parser."],
        5,
    );
    c.assistant(
        None,
        "Adding ibis-json.",
        &[("i1", "bash", json!({"command": "cargo add ibis-json"}))],
    );
    c.results(&[("i1", "Adding ibis-json v0.3.0", false)]);
    c.user("ibis-json looks good so far");
    busy(&mut c, 4, 9);
    c.user("ok carry on");
    c.assistant(None, &"Carrying on. ".repeat(80), &[]);
    for cues in [true, false] {
        let s = summary_with_cues(&c.plan(400), cues);
        let (live, _) = split_withdrawn(&s);
        assert!(live.contains("ibis-json looks good"), "cues {cues}:\n{s}");
        assert!(!s.contains("## Withdrawn"), "cues {cues}:\n{s}");
    }
}

/// The cue switch turns off the cue words and nothing else: a take-back said with a cue word,
/// of something the agent already used (so structure alone does not withdraw it), is withdrawn
/// with the cue lists on and live with them off.
#[test]
fn the_cue_switch_turns_off_the_cue_words() {
    let mut c = conversation(
        codec("openai-chat"),
        &["Use the ibis-json crate for the parser."],
        5,
    );
    c.assistant(
        None,
        "Adding ibis-json.",
        &[("i1", "bash", json!({"command": "cargo add ibis-json"}))],
    );
    c.results(&[("i1", "Adding ibis-json v0.3.0", false)]);
    c.user("forget ibis-json, serde_json is enough");
    busy(&mut c, 4, 9);
    c.user("ok carry on");
    c.assistant(None, &"Carrying on. ".repeat(80), &[]);
    let plan = c.plan(400);
    let (live, _) = split_withdrawn(&summary_with_cues(&plan, true));
    assert!(!live.contains("ibis-json"), "{live}");
    let (live, _) = split_withdrawn(&summary_with_cues(&plan, false));
    assert!(live.contains("forget ibis-json"), "{live}");
}

/// Regression: a pasted wall of text (one "sentence" of thousands of identifiers) is neither a
/// standing rule nor a slow statement, and the summary stays bounded.
#[test]
fn a_pasted_wall_of_text_is_not_a_statement() {
    let filler: Vec<String> = (0..8000).map(|i| format!("w{i}")).collect();
    let mut c = Conv::new(codec("openai-chat"));
    c.user(&format!("HUGE-START {} HUGE-END", filler.join(" ")));
    busy(&mut c, 10, 1);
    c.user("Thanks. Keep scripts/deploy_prod.sh untouched.");
    busy(&mut c, 4, 2);
    c.user("ok continue");
    c.assistant(None, &"Continuing. ".repeat(80), &[]);
    let plan = c.plan(300);
    // What made it slow is counted, not timed: the wall is pasted material, so no statement
    // is made of it (its 8,000 identifiers are never scanned for entities), and no statement
    // carries more than the entities looked at per statement.
    let facts = gather(
        plan.loaded.format,
        plan.head(),
        None,
        None,
        &[],
        Cues { on: true },
        Scope::Statements,
    );
    assert!(
        facts.stmts.iter().all(|st| !st.text.contains("HUGE-START")
            && !st.text.contains("w4000")
            && st.ents.len() <= STATEMENT_ENTITIES),
        "the wall became a statement"
    );
    let s = summary_of(&plan);
    let head = plan.split().unwrap().head_tokens;
    assert!(
        count_text(&s) <= budget(head) + 400,
        "{} for {head}",
        count_text(&s)
    );
    assert!(s.contains("HUGE-START"), "{s}");
    assert!(s.contains("scripts/deploy_prod.sh untouched"), "{s}");
    let rules = standing_rules(plan.loaded.format, plan.head());
    assert!(rules.iter().all(|r| r.chars().count() <= 400), "{rules:?}");
    assert!(rules.iter().all(|r| !r.contains("HUGE-START")), "{rules:?}");
    assert!(
        rules.iter().any(|r| r.contains("scripts/deploy_prod.sh")),
        "{rules:?}"
    );
}

// ---------------------------------------------------------------------------------------------
// Withdrawals that generalize: the dev set of the withdrawal work (issue 12, item 3). These are
// this module's own cases, tuned on; the held-out corpora judge them blind.
// ---------------------------------------------------------------------------------------------

/// One step of a scripted conversation.
enum Step<'a> {
    /// A user turn, answered briefly, then tool work.
    User(&'a str),
    /// A user turn answered by nothing yet (the next step follows directly).
    UserOnly(&'a str),
    /// An assistant text with no tool call.
    Said(&'a str),
    /// Tool work (reads, test runs, edits).
    Work,
}

/// A scripted conversation: a first request, the steps, a last request and a kept tail.
fn scripted(format: Format, steps: &[Step<'_>], seed: usize) -> Plan {
    let mut c = Conv::new(format);
    c.user("Please tidy up the export pipeline in src/export/ and make the nightly job reliable.");
    busy(&mut c, 4, seed);
    for (k, s) in steps.iter().enumerate() {
        match s {
            Step::User(t) => {
                c.user(t);
                c.assistant(None, "Understood, continuing with that in mind.", &[]);
                busy(&mut c, 3, seed + k + 1);
            }
            Step::UserOnly(t) => {
                c.user(t);
            }
            Step::Said(t) => {
                c.assistant(None, t, &[]);
            }
            Step::Work => busy(&mut c, 4, seed + k + 7),
        }
    }
    c.user("Good. Now write the changelog entry for the export changes.");
    c.assistant(None, &"Writing the changelog entry now. ".repeat(30), &[]);
    c.plan(400)
}

/// Asserts `gone` is only in the withdrawn section and every `live` key outside it.
fn assert_final_state(s: &str, gone: &[&str], live_keys: &[&str], what: &str) {
    let (live, withdrawn) = split_withdrawn(s);
    for g in gone {
        assert!(!live.contains(g), "{what}: {g:?} presented as live:\n{s}");
        assert!(withdrawn.contains(g), "{what}: {g:?} not listed:\n{s}");
    }
    for l in live_keys {
        assert!(live.contains(l), "{what}: {l:?} lost:\n{s}");
    }
}

/// A take-back that never repeats the key: it refers back by what the earlier request was
/// about, or by a pronoun right after it, across tool output and other turns.
#[test]
fn a_withdrawal_can_refer_back_by_description() {
    use Step::*;
    let cases: Vec<(Vec<Step<'_>>, &str, &str)> = vec![
        (
            vec![
                User("Also write the zephyr_backfill migration for the orders table."),
                Work,
                User("Keep scripts/release_cut.sh as it is."),
                Work,
                User("the migration thing from before — forget it, DBA says no"),
            ],
            "zephyr_backfill",
            "scripts/release_cut.sh",
        ),
        (
            vec![
                User("Put FEATURE_OSPREY_TOGGLE into the config loader, default off."),
                Work,
                User("what does the nightly job do when the bucket is full?"),
                Work,
                User("please ignore my earlier note about the config loader"),
            ],
            "FEATURE_OSPREY_TOGGLE",
            "bucket is full",
        ),
        (
            vec![
                User("Turn on FLAG_ZETA_ROLLOUT for the canary tenants."),
                Work,
                User("Keep scripts/release_cut.sh as it is."),
                Work,
                User("forget the zeta rollout flag, marketing moved the date"),
            ],
            "FLAG_ZETA_ROLLOUT",
            "scripts/release_cut.sh",
        ),
        (
            vec![
                User("We should rate-limit the exporter with the grackle_throttle helper."),
                User("actually never mind that, the exporter is fast enough"),
                User("Remember that `make verify-export` must pass before any commit."),
            ],
            "grackle_throttle",
            "make verify-export",
        ),
    ];
    for (k, (steps, gone, live)) in cases.iter().enumerate() {
        for format in [codec("anthropic"), codec("openai-chat")] {
            let s = summary_of(&scripted(format, steps, k));
            assert_final_state(&s, &[gone], &[live], gone);
        }
    }
}

/// "use Y instead": a new option of the same kind replaces the earlier one, which is not named.
#[test]
fn a_new_option_of_the_same_kind_replaces_the_old_one() {
    use Step::*;
    let steps = [
        User("Use the fennel_queue for the retry jobs."),
        Work,
        User("hmm, use the kiln_queue instead"),
    ];
    let s = summary_of(&scripted(codec("openai-responses"), &steps, 2));
    assert_final_state(&s, &["fennel_queue"], &["kiln_queue"], "replace");
}

/// A question that the same turn answers, or an aside, takes back as well.
#[test]
fn a_withdrawal_can_come_as_a_question_or_aside() {
    use Step::*;
    let cases = [
        (
            "Add the GANNET_TRACE header to every outgoing export request.",
            "do we even need GANNET_TRACE anymore? no, let's not",
            "GANNET_TRACE",
        ),
        (
            "Hook the tern-notifier up to the job's failure path.",
            "btw re tern-notifier: nah, leave it out, the pager covers it",
            "tern-notifier",
        ),
    ];
    for (k, (a, b, key)) in cases.iter().enumerate() {
        let steps = [User(a), Work, User(b)];
        let s = summary_of(&scripted(codec("anthropic"), &steps, k));
        assert_final_state(&s, &[key], &[], b);
    }
}

/// The assistant offers to drop something and the user agrees; the assistant reverses its own
/// plan. Either way the thing is no longer live. An offer the user turns down stays live.
#[test]
fn the_assistant_can_take_back_with_the_users_consent_or_its_own_plan() {
    use Step::*;
    let offer = [
        User("Put the pelican_shim in front of the router."),
        Work,
        Said("The router already retries on its own, so should I drop pelican_shim?"),
        UserOnly("yep, go ahead"),
        Work,
    ];
    let s = summary_of(&scripted(codec("openai-chat"), &offer, 1));
    assert_final_state(&s, &["pelican_shim"], &[], "offer accepted");

    let refused = [
        User("Put the pelican_shim in front of the router."),
        Work,
        Said("The router already retries on its own, so should I drop pelican_shim?"),
        UserOnly("no, keep it, the retries are too slow"),
        Work,
    ];
    let s = summary_of(&scripted(codec("openai-chat"), &refused, 1));
    let (live, _) = split_withdrawn(&s);
    assert!(live.contains("pelican_shim"), "offer refused:\n{s}");

    let done = [
        User("Put the pelican_shim in front of the router."),
        Work,
        Said("I've dropped pelican_shim from the plan since the router already retries."),
        UserOnly("ok"),
        Work,
    ];
    let s = summary_of(&scripted(codec("anthropic"), &done, 2));
    assert_final_state(&s, &["pelican_shim"], &[], "dropped, no objection");

    let objected = [
        User("Put the pelican_shim in front of the router."),
        Work,
        Said("I've dropped pelican_shim from the plan since the router already retries."),
        UserOnly("wait, we still want pelican_shim, the router retries are too slow"),
        Work,
    ];
    let s = summary_of(&scripted(codec("anthropic"), &objected, 2));
    let (live, _) = split_withdrawn(&s);
    assert!(live.contains("pelican_shim"), "objected:\n{s}");

    let own = [
        Said("I'll add a quill_cache in front of the lookups so repeated reads are cheap."),
        Work,
        Said("On reflection I'm dropping quill_cache: the lookups are already O(1), so plain HashMap reads it is."),
        Work,
    ];
    let s = summary_of(&scripted(codec("anthropic"), &own, 3));
    assert_final_state(&s, &["quill_cache"], &["HashMap"], "own plan");
}

/// Insisting is not taking back: "never skip X" and "don't forget X" after asking for X keep it
/// live, and so does asking for X again after it was taken back.
#[test]
fn insisting_or_reinstating_keeps_it_live() {
    use Step::*;
    let cases: Vec<(Vec<Step<'_>>, &str)> = vec![
        (
            vec![
                User("Add the tern_check step to the CI pipeline."),
                Work,
                User("and never skip tern_check, even for hotfixes"),
            ],
            "tern_check",
        ),
        (
            vec![
                User("Please wire puffin_metrics into the scheduler."),
                Work,
                User("don't forget puffin_metrics, the SRE team asked twice"),
            ],
            "puffin_metrics",
        ),
        (
            vec![
                User("Add the heron_index to the orders table."),
                Work,
                User("drop the heron_index, writes are too slow with it"),
                Work,
                User("actually we do need heron_index after all, the reads matter more"),
            ],
            "heron_index",
        ),
        (
            vec![
                User("Also write the zephyr_backfill migration for the orders table."),
                Work,
                User("the migration thing from before — forget it"),
                Work,
                User("ok the DBA changed their mind, zephyr_backfill is needed again"),
            ],
            "zephyr_backfill",
        ),
    ];
    for (k, (steps, key)) in cases.iter().enumerate() {
        let s = summary_of(&scripted(codec("openai-responses"), steps, k));
        let (live, _) = split_withdrawn(&s);
        assert!(live.contains(key), "{key:?} lost:\n{s}");
    }
}

/// A path taken back by its file name alone.
#[test]
fn a_path_can_be_taken_back_by_its_file_name() {
    use Step::*;
    let steps = [
        User("Also refactor src/net/pool_tuner.rs to use the new config API."),
        Work,
        User("forget pool_tuner.rs, it's getting deleted next sprint"),
    ];
    let s = summary_of(&scripted(codec("anthropic"), &steps, 4));
    assert_final_state(&s, &["src/net/pool_tuner.rs"], &[], "basename");
}

/// Markdown strikethrough takes a thing back whatever the words around it (markup, so also
/// with the prose cues off); a single `~` (a home path) is not markup.
#[test]
fn struck_out_in_markdown_is_withdrawn() {
    use Step::*;
    let cases = [
        (
            "Please wire up the gannet_probe too.",
            "Revised list: ~~gannet_probe~~, docs, tests",
        ),
        (
            "Add the gannet_probe to the deploy.",
            "todo:\n- ~~add gannet_probe~~\n- bump the chart",
        ),
    ];
    for (k, (a, b)) in cases.iter().enumerate() {
        let steps = [User(a), Work, User(b), Work];
        let s = summary_of(&scripted(codec("anthropic"), &steps, k));
        assert_final_state(&s, &["gannet_probe"], &[], b);
    }
    let home = [
        User("Keep the config in ~/.config/gannet/ as before."),
        Work,
    ];
    let s = summary_of(&scripted(codec("anthropic"), &home, 3));
    let (live, _) = split_withdrawn(&s);
    assert!(live.contains("~/.config/gannet/"), "{s}");
}

/// The assistant changing its mind to not doing what was asked ("on second thought I won't add
/// X") takes it back when the user lets it stand; agreeing with a prohibition ("I won't touch X"
/// after "never touch X") does not, and neither does a reply about something else count as an
/// objection.
#[test]
fn the_assistant_reversing_a_request_takes_it_back() {
    use Step::*;
    let reversed = [
        User("could you also add the merlin_fallback to the client?"),
        Work,
        Said("Change of plan: I'm not adding merlin_fallback, the client already retries."),
        UserOnly("what does sparrow_gc do?"),
        Work,
    ];
    let s = summary_of(&scripted(codec("openai-chat"), &reversed, 4));
    assert_final_state(&s, &["merlin_fallback"], &[], "reversed");

    let objected = [
        User("could you also add the merlin_fallback to the client?"),
        Work,
        Said("Change of plan: I'm not adding merlin_fallback, the client already retries."),
        UserOnly("no, please add merlin_fallback, the retries are not enough"),
        Work,
    ];
    let s = summary_of(&scripted(codec("openai-chat"), &objected, 4));
    let (live, _) = split_withdrawn(&s);
    assert!(live.contains("merlin_fallback"), "objected:\n{s}");

    let agreed = [
        User("Never touch the kestrel_vendor directory."),
        Work,
        Said("On second thought I won't touch kestrel_vendor at all, understood."),
        Work,
    ];
    let s = summary_of(&scripted(codec("anthropic"), &agreed, 5));
    let (live, _) = split_withdrawn(&s);
    assert!(
        live.contains("kestrel_vendor"),
        "a prohibition stays live:\n{s}"
    );
}

/// The assistant's change of mind whose negation is in a later clause that refers back ("I've
/// reconsidered X: ..., so I'm not doing it") reverses the request like one in the same clause
/// (a class found in holdout3.toml once it became a development corpus).
#[test]
fn a_change_of_mind_negated_in_a_later_clause_takes_the_request_back() {
    use Step::*;
    let steps = [
        User("while you're in there, wire the heron_shadow_flag into the loader"),
        Work,
        Said("I've changed my mind on heron_shadow_flag: it pulls in a second config source for nothing, so I'm not wiring it in."),
        UserOnly("fine"),
        Work,
    ];
    let s = summary_of(&scripted(codec("openai-chat"), &steps, 4));
    assert_final_state(
        &s,
        &["heron_shadow_flag"],
        &[],
        "reversed in a later clause",
    );
}

/// A take-back of an action the sentence names itself ("no need to wait for me") takes back
/// nothing said before: the decision in the sentence before stays live (a false withdrawal
/// found in holdout3.toml). "no need to do that" still refers back.
#[test]
fn a_take_back_of_its_own_action_is_no_withdrawal() {
    use Step::*;
    let own = [
        User("Read your comparison. I think the osprey_queue wins, since ops already runs it. Anyway, go ahead when ready, no need to wait for me."),
        Work,
    ];
    let s = summary_of(&scripted(codec("anthropic"), &own, 4));
    assert_final_state(&s, &[], &["osprey_queue"], "own action");

    let back = [
        User("Also add the osprey_queue metrics exporter to the worker. Hmm, no need to do that."),
        Work,
    ];
    let s = summary_of(&scripted(codec("anthropic"), &back, 4));
    assert_final_state(&s, &["osprey_queue"], &[], "refers back");
}

#[test]
fn stats_remembered_answers_follow_the_kept_tail() {
    // in_tools and entity_df remember their answers by text; adding the kept tail's tool I/O
    // afterwards must not leave a stale "not in tools". The expected figures are read off the
    // messages below.
    let dec = |j: Value| {
        let raw = serde_json::value::RawValue::from_string(j.to_string()).unwrap();
        crate::message::decode(codec("openai-chat"), &raw).unwrap()
    };
    let call = |id: &str, cmd: &str| {
        json!({"role": "assistant", "content": null, "tool_calls": [{"id": id, "type": "function",
            "function": {"name": "shell", "arguments": json!({"cmd": cmd}).to_string()}}]})
    };
    let head = vec![
        dec(json!({"role": "user", "content": "Use the Redis cache at cache/redis.conf"})),
        dec(call("c1", "cat cache/redis.conf")),
        dec(json!({"role": "tool", "tool_call_id": "c1", "content": "port 6379"})),
    ];
    let later = vec![dec(call("c2", "grep maxmemory redis.conf"))];
    let mut stats = entities::Stats::new(&head, 0);
    assert!(stats.in_tools("cache/REDIS.conf"));
    assert!(!stats.in_tools("MaxMemory"));
    assert!(!stats.in_tools("maxmemory"));
    stats.add_later(&later, head.len());
    assert!(stats.in_tools("MaxMemory"));
    assert!(stats.in_tools("maxmemory"));
    assert!(!stats.in_tools("6380"));
    // The user's message and the first call name the file; the result does not.
    let file = entities::Entity::new("cache/redis.conf", entities::Kind::Code);
    assert_eq!(stats.entity_df(&file), 2);
    assert_eq!(stats.entity_df(&file), 2);
    let port = entities::Entity::new("6379", entities::Kind::Code);
    assert_eq!(stats.entity_df(&port), 1);
}

// ---------------------------------------------------------------------------------------------
// Standing rules from the statements alone
// ---------------------------------------------------------------------------------------------

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(3))]

    /// `standing_rules` gathers the statements only (no tool calls, results or errors): its
    /// rules are those of every fact gathered, on random mixes of rules, withdrawals, busy tool
    /// work and the three stored formats.
    #[test]
    fn standing_rules_from_statements_are_those_of_all_facts(
        picks in proptest::collection::vec(0usize..(2 * WITHDRAWALS.len() + 4), 1..7),
        seed in 0usize..50,
        f in 0usize..3,
    ) {
        let format = [
            codec("anthropic"),
            codec("openai-chat"),
            codec("openai-responses"),
        ][f];
        let extra = [
            "Always run cargo fmt before committing changes to crates/netkit.",
            "sounds good",
            "Don't use the legacy_auth module, it is going away; use auth::v2 instead.",
            "Scratch that about cargo fmt, the CI runs it for us.",
        ];
        let turns: Vec<&str> = picks
            .iter()
            .map(|&k| match k {
                k if k < WITHDRAWALS.len() => WITHDRAWALS[k].0,
                k if k < 2 * WITHDRAWALS.len() => WITHDRAWALS[k - WITHDRAWALS.len()].1,
                k => extra[k - 2 * WITHDRAWALS.len()],
            })
            .collect();
        let plan = conversation(format, &turns, seed).plan(400);
        let all = gather(format, plan.head(), None, None, &[], Cues { on: true }, Scope::All);
        proptest::prop_assert_eq!(standing_rules(format, plan.head()), rules_of(&all));
    }
}

#[test]
fn a_re_summary_of_the_originals_keeps_the_turns_the_earlier_one_quoted() {
    let conv = |n: usize| {
        let mut c = Conv::new(codec("openai-chat"));
        for i in 1..=n {
            c.user(&format!(
                "Step TURN{i}: {}",
                "keep the names of the parser module as they are and note anything odd. ".repeat(3)
            ));
            c.assistant(
                None,
                &format!("Step {i} done. {}", "Read it through. ".repeat(30)),
                &[],
            );
        }
        c
    };
    let quoted = |s: &str| -> Vec<usize> {
        let user = section(s, "User requests and instructions");
        (1..=20)
            .filter(|i| user.contains(&format!("TURN{i}:")))
            .collect()
    };
    let first = conv(8).plan(300);
    let s1 = summary_of(&first);
    let kept = quoted(&s1);
    assert!(kept.len() >= 3, "{s1}");
    // The originals grew; the next summary is written from all of them.
    let plan = conv(14).plan(300);
    let again = |earlier: Option<String>| {
        summarize(&HeadInput {
            earlier_summary: earlier,
            ..HeadInput::new(&plan, now())
        })
    };
    let s2 = again(Some(summary_body(&s1)));
    let now_kept = quoted(&s2);
    assert!(
        kept.iter().all(|k| now_kept.contains(k)),
        "{kept:?} then {now_kept:?}:\n{s2}"
    );
    // Without the earlier summary, its head's middle turns give way to the newer ones.
    let alone = quoted(&again(None));
    assert!(
        !kept.iter().all(|k| alone.contains(k)),
        "{kept:?} then {alone:?}"
    );
    assert_eq!(render::quoted_turns("## User requests and instructions\n1. \"a\"\n- … 2 more\n4. (the latest)\n## Files\n5. x"), [1, 4]);
}

// ---------------------------------------------------------------------------------------------
// Standing rules over the whole history (head and kept tail)
// ---------------------------------------------------------------------------------------------

/// `conv`'s messages split before the user turn `at` (head, tail).
fn split_before<'a>(plan: &'a Plan, at: &str) -> (&'a [Message], &'a [Message]) {
    let all = &plan.loaded.messages;
    let i = all
        .iter()
        .position(|m| m.role == crate::message::Role::User && m.text().contains(at))
        .unwrap_or_else(|| panic!("no user turn {at:?}"));
    (&all[..i], &all[i..])
}

#[test]
fn a_rule_replaced_in_the_kept_tail_is_not_live_and_its_replacement_is() {
    let earlier = "Run `make lint-sedge` before each commit.";
    let later = "no need to run make lint-sedge anymore; run `make check` instead";
    for format in [codec("anthropic"), codec("openai-chat")] {
        let plan = withdrawal_conversation(format, earlier, later, 3).plan(400);
        let (head, tail) = split_before(&plan, later);
        let rules = standing_rules_over(format, head, tail);
        let live: Vec<&str> = rules
            .iter()
            .filter(|r| r.is_live())
            .map(|r| r.text.as_str())
            .collect();
        assert!(!live.contains(&earlier), "{rules:#?}");
        assert!(live.contains(&later), "the replacement is live: {rules:#?}");
        let gone = rules.iter().find(|r| r.text == earlier).expect("listed");
        assert_eq!(
            gone.status,
            RuleStatus::Replaced {
                by: later.to_string()
            }
        );
        // The head alone (what the llm strategy read before) still has it live.
        assert!(standing_rules(format, head).iter().any(|r| r == earlier));
    }
}

#[test]
fn rules_withdrawn_in_the_tail_are_never_live() {
    for (k, (earlier, later, gone, live_key)) in WITHDRAWALS.iter().enumerate() {
        for format in [codec("anthropic"), codec("openai-chat")] {
            let plan = withdrawal_conversation(format, earlier, later, k).plan(400);
            let (head, tail) = split_before(&plan, later);
            let rules = standing_rules_over(format, head, tail);
            let r = rules
                .iter()
                .find(|r| r.text == collapse(earlier))
                .unwrap_or_else(|| panic!("{earlier:?} not listed: {rules:#?}"));
            match &r.status {
                RuleStatus::Withdrawn { latest } | RuleStatus::Replaced { by: latest } => {
                    assert_eq!(latest, &collapse(later), "{rules:#?}")
                }
                RuleStatus::Live => panic!("{earlier:?} live: {rules:#?}"),
            }
            for r in rules.iter().filter(|r| r.is_live()) {
                assert!(
                    !r.text.contains(gone) || r.text == collapse(later),
                    "{gone:?} live in {r:?}"
                );
            }
            if let Some(key) = live_key {
                assert!(
                    rules.iter().any(|r| r.is_live() && r.text.contains(key)),
                    "{key:?} not live: {rules:#?}"
                );
            }
        }
    }
}

#[test]
fn a_rule_withdrawn_in_the_head_is_withdrawn_with_the_latest_word() {
    let earlier = "Pin serde_quartz to 0.9 in Cargo.toml.";
    let later = "ignore what I said about serde_quartz, the pin is not needed";
    let plan = withdrawal_conversation(codec("anthropic"), earlier, later, 1).plan(400);
    let all = &plan.loaded.messages;
    let rules = standing_rules_over(plan.loaded.format, all, &[]);
    let r = rules.iter().find(|r| r.text == earlier).expect("listed");
    assert_eq!(
        r.status,
        RuleStatus::Withdrawn {
            latest: later.to_string()
        }
    );
    assert!(!rules
        .iter()
        .any(|r| r.is_live() && r.text.contains("serde_quartz")));
}

// ---------------------------------------------------------------------------------------------
// Property: nothing a later user turn withdrew is reported live (head and kept tail)
// ---------------------------------------------------------------------------------------------

/// Made-up names, one per rule of a generated history.
const RULE_NAMES: [&str; 6] = ["sedge", "plover", "dunlin", "gorse", "ibis", "kiln"];

/// The grammar's rules (`{}` is the rule's name) and, for each, the withdrawals a user may say.
const RULE_GRAMMAR: [(&str, [&str; 2]); 3] = [
    (
        "Always run `make {}-check` before each commit.",
        [
            "no need to run make {}-check anymore",
            "forget make {}-check, the CI does it now",
        ],
    ),
    (
        "Never edit `config/{}.toml` by hand.",
        [
            "ignore what I said about config/{}.toml, it is not generated anymore",
            "scrap the config/{}.toml rule",
        ],
    ),
    (
        "Keep the `{}_TOKEN` variable out of the logs.",
        [
            "forget the {}_TOKEN rule, that variable is gone",
            "no need to hide {}_TOKEN anymore",
        ],
    ),
];

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(64))]

    /// For any history built from the grammar (each rule stated once, maybe withdrawn in a later
    /// turn, with other turns and tool work between, split anywhere between head and kept tail),
    /// no rule the grammar withdrew is reported live. The oracle is the grammar: which rules were
    /// followed by one of their withdrawals.
    #[test]
    fn no_rule_a_later_user_turn_withdrew_is_live(
        rules in proptest::collection::vec((0usize..3, proptest::bool::ANY, 0usize..2), 1..4),
        order in proptest::collection::vec(0usize..100, 8),
        cut in 0usize..100,
        seed in 0usize..50,
        anthropic in proptest::bool::ANY,
    ) {
        let format = if anthropic { codec("anthropic") } else { codec("openai-chat") };
        // Events: each rule's statement, then (maybe) its withdrawal, interleaved by `order`
        // while keeping each rule's statement before its withdrawal.
        let mut stated: Vec<(String, Option<String>)> = Vec::new();
        for (i, (kind, withdrawn, how)) in rules.iter().enumerate() {
            let (rule, takes) = RULE_GRAMMAR[*kind];
            let name = RULE_NAMES[i];
            let name = if *kind == 2 { name.to_uppercase() } else { name.to_string() };
            stated.push((
                rule.replace("{}", &name),
                withdrawn.then(|| takes[*how].replace("{}", &name)),
            ));
        }
        let mut queue: Vec<(usize, bool)> = Vec::new(); // (rule, is the withdrawal)
        let mut next: Vec<usize> = vec![0; stated.len()]; // 0: state, 1: withdraw, 2: done
        let mut k = 0;
        while next.iter().enumerate().any(|(i, n)| *n == 0 || (*n == 1 && stated[i].1.is_some())) {
            let i = order[k % order.len()] % stated.len();
            k += 1;
            match next[i] {
                0 => { queue.push((i, false)); next[i] = 1; }
                1 if stated[i].1.is_some() => { queue.push((i, true)); next[i] = 2; }
                _ => {
                    // Someone else's turn: the first rule with something left.
                    if let Some(j) = (0..stated.len()).find(|&j| next[j] == 0 || (next[j] == 1 && stated[j].1.is_some())) {
                        let w = next[j] == 1;
                        queue.push((j, w));
                        next[j] += 1;
                    }
                }
            }
        }
        let mut c = Conv::new(format);
        c.user("Please tidy up the export pipeline in src/export/ and make the nightly job reliable.");
        busy(&mut c, 3, seed);
        for (n, (i, w)) in queue.iter().enumerate() {
            let text = if *w { stated[*i].1.clone().unwrap() } else { stated[*i].0.clone() };
            c.user(&text);
            c.assistant(None, "Understood, continuing with that in mind.", &[]);
            busy(&mut c, 2, seed + n + 1);
        }
        c.user("Good. Now write the changelog entry for the export changes.");
        c.assistant(None, "Writing the changelog entry now.", &[]);
        let plan = c.plan(400);
        let all = &plan.loaded.messages;
        // Split before a user turn, anywhere after the first.
        let starts: Vec<usize> = all
            .iter()
            .enumerate()
            .filter(|(i, m)| *i > 0 && m.role == crate::message::Role::User && m.is_user_instruction())
            .map(|(i, _)| i)
            .collect();
        let at = starts[cut % starts.len()];
        let got = standing_rules_over(format, &all[..at], &all[at..]);
        for (rule, withdrawal) in &stated {
            if withdrawal.is_some() {
                proptest::prop_assert!(
                    !got.iter().any(|r| r.is_live() && r.text == *rule),
                    "{rule:?} withdrew but live: {got:#?}"
                );
                proptest::prop_assert!(got.iter().any(|r| !r.is_live() && r.text == *rule), "{rule:?} not listed as withdrawn: {got:#?}");
            } else {
                proptest::prop_assert!(
                    got.iter().any(|r| r.is_live() && r.text == *rule),
                    "{rule:?} stands but is not live: {got:#?}"
                );
            }
        }
    }
}

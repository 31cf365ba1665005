//! Tests of the whole summarizer on conversations in the three stored formats: sections,
//! framing, carried-forward summaries, bounds and determinism.

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

use super::render::{CAP_COMMANDS, CAP_FILES, PRIOR_END};

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
        self.msgs.push(match self.format {
            Format::Anthropic => json!({"content":[{"text":text,"type":"text"}],"role":"user"}),
            Format::OpenAiChat | Format::DockerAgent => json!({"role":"user","content":text}),
            Format::OpenAiResponses => json!({"type":"message","role":"user","content":text}),
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
        match self.format {
            Format::Anthropic => {
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
            Format::OpenAiChat | Format::DockerAgent => {
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
            Format::OpenAiResponses => {
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
        }
        self
    }
    /// Results (id, content, is_error) of the previous turn's calls.
    fn results(&mut self, results: &[(&str, &str, bool)]) -> &mut Self {
        match self.format {
            Format::Anthropic => {
                let content: Vec<Value> = results
                    .iter()
                    .map(|(id, c, e)| {
                        json!({"tool_use_id":id,"is_error":e,"content":[{"text":c,"type":"text"}],"type":"tool_result"})
                    })
                    .collect();
                self.msgs.push(json!({"content":content,"role":"user"}));
            }
            Format::OpenAiChat | Format::DockerAgent => {
                for (id, c, _) in results {
                    self.msgs
                        .push(json!({"role":"tool","content":c,"tool_call_id":id}));
                }
            }
            Format::OpenAiResponses => {
                for (id, c, _) in results {
                    self.msgs
                        .push(json!({"type":"function_call_output","call_id":id,"output":c}));
                }
            }
        }
        self
    }
    fn raw(&self) -> String {
        serde_json::to_string(&self.msgs).unwrap()
    }
    fn plan(&self, keep_tokens: usize) -> Plan {
        let (provider, metadata) = match self.format {
            Format::Anthropic => ("anthropic", None),
            Format::OpenAiChat | Format::DockerAgent => (
                "openai",
                Some(r#"{"api_mode":"chat_completions"}"#.to_string()),
            ),
            Format::OpenAiResponses => ("openai", Some(r#"{"api_mode":"responses"}"#.to_string())),
        };
        let created = "2026-10-30 10:00:00.000000000 +0000 UTC".to_string();
        let usage = r#"{"currentContextWindow":1000,"maxContextWindow":200000}"#.to_string();
        let row = StoredConversation::new("conv-1", self.raw(), "2026-11-01 10:00:00 +0000 UTC");
        let meta = ConversationMeta::from_columns(
            "conv-1".into(),
            provider.into(),
            Some(usage),
            created.clone(),
            created,
            None,
            metadata.as_deref(),
            None,
        );
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

/// A realistic session: request with a rule, reads, a failing build, a fix, decisions.
fn session(format: Format) -> Conv {
    let file_body: String = (0..300)
        .map(|i| format!("    let field_{i} = compute_{i}(&self.inner)?;\n"))
        .collect();
    let test_log: String = (0..200)
        .map(|i| format!("test retry::tests::case_{i} ... ok\n"))
        .collect();
    let mut c = Conv::new(format);
    c.user("Add retry with exponential backoff to the HTTP client in crates/netkit/src/client.rs. Never change the public API of `Client`; keep the existing tests green.");
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
        "I decided to use a jittered backoff instead of a fixed delay because the upstream rate-limits bursts.",
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
        "The root cause is a missing field: max_backoff_ms was never added to RetryPolicy. I'll add it with a default of 30000.",
        &[(
            "call_4",
            "file_write",
            json!({"file_path": "/home/dev/netkit/crates/netkit/src/retry.rs", "content": "pub struct RetryPolicy { pub max_backoff_ms: u64 }"}),
        )],
    );
    c.results(&[("call_4", "File written successfully", false)]);
    c.user("From now on, always run `cargo clippy -- -D warnings` before telling me you're done. Also please add a unit test for the jitter.");
    c.assistant(
        None,
        "Running clippy and the tests now. Next step: add the jitter unit test in crates/netkit/tests/retry.rs.",
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
    let plan = session(Format::Anthropic).plan(300);
    let s = summary_of(&plan);
    let split = plan.split().unwrap();
    let expected = format!(
        "{SUMMARY_HEADER}\nThis session continues an earlier conversation. agent-db replaced {} earlier messages (about {} tokens) with this summary on 2026-11-02; everything after it is verbatim. Read it as your own notes of what happened so far.\n\n## ",
        split.cut, split.head_tokens
    );
    assert!(s.starts_with(&expected), "got:\n{s}");
    // summary_body() strips exactly the framing paragraph.
    let body = summary_body(&s);
    assert!(body.starts_with("## User requests and intent"), "{body}");
    assert!(s.ends_with('\n') && !s.ends_with("\n\n"));
}

#[test]
fn sections_are_populated_from_a_realistic_head() {
    for format in [
        Format::Anthropic,
        Format::OpenAiChat,
        Format::OpenAiResponses,
    ] {
        let plan = session(format).plan(300);
        let s = summary_of(&plan);
        // Requests.
        assert!(s.contains("First request: \"Add retry with exponential backoff to the HTTP client in crates/netkit/src/client.rs."), "{s}");
        assert!(
            s.contains("Later instructions, oldest first:\n- \"From now on, always run"),
            "{s}"
        );
        // Standing instructions, verbatim sentences.
        let rules = section(&s, "Standing instructions and constraints");
        assert!(
            rules.contains(
                "\"Never change the public API of `Client`; keep the existing tests green.\""
            ),
            "{rules}"
        );
        assert!(rules.contains("\"From now on, always run `cargo clippy -- -D warnings` before telling me you're done.\""), "{rules}");
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
        // Commands with failure marks.
        let cmds = section(&s, "Commands run");
        assert!(
            cmds.contains("- $ cargo build -p netkit (failed)"),
            "{cmds}"
        );
        assert!(
            cmds.contains("- $ cargo clippy -p netkit -- -D warnings && cargo test -p netkit\n"),
            "{cmds}"
        );
        // Errors: the compiler line and its location, and what came next. The file
        // content's "Error:" line (a read) is not an error.
        let errs = section(&s, "Errors and how they were resolved");
        assert!(
            errs.contains("bash `cargo build -p netkit` failed:"),
            "{errs}"
        );
        assert!(errs.contains("error[E0425]: cannot find value `max_backoff_ms` in this scope | --> crates/netkit/src/client.rs:88:20"), "{errs}");
        assert!(
            errs.contains("then: \"The root cause is a missing field"),
            "{errs}"
        );
        assert!(!errs.contains("file content"), "{errs}");
        // Decisions.
        let dec = section(&s, "Decisions and findings");
        assert!(dec.contains("\"I decided to use a jittered backoff instead of a fixed delay because the upstream rate-limits bursts.\""), "{dec}");
        assert!(dec.contains("The root cause is a missing field"), "{dec}");
        // Pending.
        let pend = section(&s, "Pending tasks");
        assert!(
            pend.contains("Next step: add the jitter unit test in crates/netkit/tests/retry.rs."),
            "{pend}"
        );
        // Current work.
        let cur = section(&s, "Current work");
        assert!(
            cur.contains("Last assistant message: \"Running clippy and the tests now."),
            "{cur}"
        );
        assert!(cur.contains("bash `cargo clippy -p netkit"), "{cur}");
        // Never: thinking, tool-result bodies.
        assert!(!s.contains("SECRET-THINKING"), "{s}");
        assert!(!s.contains("reqwest::Client"), "{s}");
        assert!(!s.contains("12 passed"), "{s}");
    }
}

/// The text of one section (without its heading).
fn section<'a>(s: &'a str, title: &str) -> &'a str {
    // Skip a carried-forward summary.
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

#[test]
fn formats_give_the_same_sections() {
    let bodies: Vec<String> = [
        Format::Anthropic,
        Format::OpenAiChat,
        Format::OpenAiResponses,
    ]
    .into_iter()
    .map(|f| summary_body(&summary_of(&session(f).plan(300))))
    .collect();
    // Anthropic marks errors with is_error; the OpenAI formats rely on the text: same result.
    assert_eq!(bodies[0], bodies[1]);
    assert_eq!(bodies[1], bodies[2]);
}

#[test]
fn prior_summary_is_carried_verbatim() {
    let body = "## User requests and intent\nFirst request: \"Port the scheduler to tokio.\"\n\n## Files touched\n- src/sched.rs (edited 3×)";
    let earlier = format!(
        "{SUMMARY_HEADER}\nThis session continues an earlier conversation. agent-db replaced 40 earlier messages (about 50000 tokens) with this summary on 2026-10-01; everything after it is verbatim. Read it as your own notes of what happened so far.\n\n{body}\n"
    );
    let mut c = Conv::new(Format::OpenAiChat);
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
        section(&s, "User requests and intent")
            .contains("First request: \"Now make the timer wheel configurable.\""),
        "{s}"
    );
    // And a re-compaction of this summary carries both forward.
    let again = summary_body(&s);
    assert!(again.starts_with("## Earlier summary (carried forward)\n## User requests and intent\nFirst request: \"Port the scheduler"));
}

#[test]
fn huge_head_is_bounded() {
    let mut c = Conv::new(Format::Anthropic);
    c.user("Refactor the whole billing service. Always keep money values in integer cents. Never log card numbers.");
    for i in 0..400 {
        let path = format!("services/billing/src/module_{i}/handler_{}.rs", i * 7 % 13);
        let id_r = format!("r{i}");
        let id_b = format!("b{i}");
        c.assistant(
            Some(&"thinking hard about it ".repeat(20)),
            &format!("Step {i}: I decided to split handler {i} into smaller functions instead of one big match, because the match had grown to 400 lines. Next step: wire handler {i} into the router."),
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
            c.user(&format!("Batch {i} looks fine. Please make sure you don't touch the invoices table in batch {i}. {}", "Some context. ".repeat(40)));
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
    // The first request and the earliest rules survive; lists say what they omitted.
    assert!(s.contains("First request: \"Refactor the whole billing service. Always keep money values in integer cents. Never log card numbers.\""));
    assert!(s.contains("\"Never log card numbers.\""));
    assert!(s.contains("more"), "{s}");
    assert!(!s.contains("thinking hard"));
    // Every section is bounded.
    assert!(section(&s, "Files touched").lines().count() <= CAP_FILES + 2);
    assert!(section(&s, "Commands run").lines().count() <= CAP_COMMANDS + 2);
    // Summarizing a small head stays within a third of it (plus the framing).
    let small = session(Format::OpenAiChat).plan(300);
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
fn deterministic() {
    let plan = session(Format::OpenAiResponses).plan(300);
    let a = summary_of(&plan);
    let b = summary_of(&plan.clone());
    let c = summary_of(&session(Format::OpenAiResponses).plan(300));
    assert_eq!(a, b);
    assert_eq!(a, c);
}

#[test]
fn latest_instruction_in_the_head_is_noted() {
    let mut c = Conv::new(Format::Anthropic);
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
        section(&s, "Pending tasks")
            .contains("The first request above is also the latest user instruction"),
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
    let mut c = Conv::new(Format::Anthropic);
    c.msgs.push(json!({"role":"user","content":[
        {"type":"text","text":"The login button is misaligned, see screenshot."},
        {"type":"image","source":{"type":"base64","media_type":"image/png","data":data}}
    ]}));
    c.assistant(None, &"Looking at the CSS. ".repeat(10), &[]);
    c.user("Also check the signup page.");
    c.assistant(None, &"Checking the signup page now. ".repeat(40), &[]);
    let plan = c.plan(100);
    let s = summary_of(&plan);
    assert!(s.contains("First request: \"The login button is misaligned, see screenshot. [image: image/png 2x3, 33 B]\""), "{s}");
    assert!(!s.contains(&data));
}

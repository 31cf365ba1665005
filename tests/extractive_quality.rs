//! Summary-quality measurement of the extractive summarizer.
//!
//! Builds 24 long conversations (8 per stored format, 30k–60k tokens each) with varied, realistic
//! content, plants five facts early in each (a standing rule the user gave, a file the agent
//! edited or wrote, a distinctive error a tool returned, a decision the assistant stated, and the
//! user's first request), compacts each with a kept tail of about 20% of its size, and measures
//! how many planted facts are still findable verbatim in the new history (summary + re-inserted
//! instruction + tail) and how large the new history is. Each fact kind has at least three
//! phrasings, so the measurement does not hinge on one wording; the rules include everyday
//! phrasings with no cue word in them.
//!
//! Run with `cargo test --test extractive_quality -- --nocapture` to see the figures.

use agent_db::compact::extractive::summarize;
use agent_db::compact::HeadInput;
use agent_db::message::{self, Block, Format, Message};
use agent_db::plan::PlanOptions;
use agent_db::select::Reason;
use agent_db::tokens;
use chrono::{DateTime, FixedOffset};
use serde_json::{json, Value};

#[path = "support/convgen.rs"]
mod convgen;
use convgen::*;

// ---------------------------------------------------------------------------------------------
// A tiny deterministic RNG (xorshift64*).
// ---------------------------------------------------------------------------------------------

// ---------------------------------------------------------------------------------------------
// Conversations in the three stored formats.
// ---------------------------------------------------------------------------------------------

// ---------------------------------------------------------------------------------------------
// Vocabulary and filler content.
// ---------------------------------------------------------------------------------------------

fn code_line(rng: &mut Rng, lang: Lang) -> String {
    let n = rng.pick(NOUNS);
    let v = rng.pick(VERBS);
    match lang {
        Lang::Rust => match rng.below(5) {
            0 => format!("    let {n}_{v} = self.{v}_{n}(&ctx)?;"),
            1 => format!(
                "    if {n}.is_empty() {{ return Err(Error::Empty{}); }}",
                n.len()
            ),
            2 => format!(
                "pub fn {v}_{n}(&mut self, {n}: &{}) -> Result<()> {{",
                cap(n)
            ),
            3 => "    }".to_string(),
            _ => format!("    // {v} the {n} before handing it to the worker"),
        },
        Lang::Go => match rng.below(5) {
            0 => format!("\t{n}, err := s.{}{}(ctx, req)", cap(v), cap(n)),
            1 => "\tif err != nil {\n\t\treturn nil, err\n\t}".to_string(),
            2 => format!(
                "func (s *Service) {}{}(ctx context.Context) error {{",
                cap(v),
                cap(n)
            ),
            3 => "}".to_string(),
            _ => format!("\t// {v} the {n} under the lock"),
        },
        Lang::Python => match rng.below(5) {
            0 => format!("    {n} = self._{v}_{n}(ctx)"),
            1 => format!("    if not {n}:\n        raise ValueError(\"empty {n}\")"),
            2 => format!("def {v}_{n}(self, {n}: dict) -> None:"),
            3 => format!("    return {n}"),
            _ => format!("    # {v} the {n} lazily"),
        },
        Lang::Ts => match rng.below(5) {
            0 => format!("  const {n} = await this.{v}{}(ctx);", cap(n)),
            1 => format!("  if (!{n}) throw new Error('missing {n}');"),
            2 => format!(
                "export async function {v}{}({n}: {}): Promise<void> {{",
                cap(n),
                cap(n)
            ),
            3 => "}".to_string(),
            _ => format!("  // {v} the {n} in a transaction"),
        },
    }
}

fn cap<S: AsRef<str>>(s: S) -> String {
    let mut c = s.as_ref().chars();
    match c.next() {
        Some(f) => f.to_uppercase().collect::<String>() + c.as_str(),
        None => String::new(),
    }
}

fn file_content(rng: &mut Rng, lang: Lang, lines: usize) -> String {
    let mut s = String::new();
    for i in 0..lines {
        s.push_str(&format!("{:>4}: {}\n", i + 1, code_line(rng, lang)));
    }
    s
}

fn test_log(rng: &mut Rng, lines: usize) -> String {
    let mut s = format!("running {lines} tests\n");
    for _ in 0..lines {
        s.push_str(&format!(
            "test {}::tests::{}_{} ... ok\n",
            rng.pick(NOUNS),
            rng.pick(VERBS),
            rng.pick(NOUNS)
        ));
    }
    s.push_str(&format!(
        "\ntest result: ok. {lines} passed; 0 failed; 0 ignored; finished in 1.{:02}s\n",
        rng.below(100)
    ));
    s
}

fn grep_output(rng: &mut Rng, p: &Project, lines: usize) -> String {
    let mut s = String::new();
    for _ in 0..lines {
        s.push_str(&format!(
            "{}:{}:{}\n",
            p.file(rng),
            rng.range(1, 900),
            code_line(rng, p.lang).trim()
        ));
    }
    s
}

fn narrative(rng: &mut Rng, p: &Project) -> String {
    let f = p.file(rng);
    let short = f.rsplit('/').next().unwrap().to_string();
    let n = rng.pick(NOUNS);
    let v = rng.pick(VERBS);
    let options = [
        format!("Let me look at how the {n} is wired into {short}."),
        format!("The {v} path in {short} calls the {n} store before validating the payload."),
        format!("This looks fine; the {n} handling matches what the tests expect."),
        format!("I'll read {short} next to see where the {n} gets {v}d."),
        format!("The test suite passes locally, moving on to the {n} changes."),
        format!("Okay, the {n} cache is only consulted on the slow path."),
        format!("Now I'll update the {v} helper so it takes the {n} by reference."),
        format!("The diff is small: two call sites of {v}_{n} change."),
    ];
    let mut out = rng.pick(&options).clone();
    if rng.chance(0.5) {
        out.push(' ');
        out.push_str(&rng.pick(&options).clone());
    }
    out
}

fn followup(rng: &mut Rng, p: &Project) -> String {
    let f = p.file(rng);
    let n = rng.pick(NOUNS);
    let options = [
        format!("Looks good so far. Can you also check how {f} handles an empty {n}?"),
        format!("What about the error handling around the {n}? I saw a flaky failure yesterday."),
        "ok, continue".to_string(),
        "Can you run the whole test suite again and tell me what fails?".to_string(),
        format!("Please also look at {f}, I think the {n} logic there is duplicated."),
        format!("Nice. Next, add a small test for the {n} edge case."),
    ];
    rng.pick(&options).clone()
}

fn thinking(rng: &mut Rng) -> String {
    let n = rng.pick(NOUNS);
    format!(
        "PRIVATE-REASONING: the user wants the {n} flow fixed; I should check the callers first, then the tests. Maybe the {} is stale.",
        rng.pick(NOUNS)
    )
}

// ---------------------------------------------------------------------------------------------
// Planted facts.
// ---------------------------------------------------------------------------------------------

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum FactKind {
    Rule,
    File,
    Error,
    Decision,
    FirstRequest,
}

const KINDS: [FactKind; 5] = [
    FactKind::FirstRequest,
    FactKind::Rule,
    FactKind::File,
    FactKind::Error,
    FactKind::Decision,
];

struct Fact {
    kind: FactKind,
    /// The exact text that must be findable in the new history.
    probe: String,
}

/// The user's first request: (full message, distinctive phrase).
fn first_request(rng: &mut Rng, k: &str, p: &Project) -> (String, String) {
    let f = p.file(rng);
    match rng.below(4) {
        0 => {
            let phrase =
                format!("migrate the {k} billing exporter from cron jobs to the event queue");
            (
                format!("Hi! I need you to {phrase}. The exporter lives under {}/ and is scheduled by crontab today. Keep the CSV format identical so finance does not notice.", p.root),
                phrase,
            )
        }
        1 => {
            let phrase = format!("the {k}-dashboard shows stale totals after a tenant switch");
            (
                format!("We have a bug report: {phrase}. Repro: log in as tenant A, switch to tenant B, open the usage page. I suspect the cache key in {f} ignores the tenant. Please find the cause and fix it with a regression test."),
                phrase,
            )
        }
        2 => {
            let phrase = format!("add rate limiting per API key to the {k} gateway");
            (
                format!("Context: we got hammered by one customer last night ({} requests/s).\n\nTask: {phrase}, using a token bucket. Limits come from the plans table. Start by reading {f}.", rng.range(2000, 9000)),
                phrase,
            )
        }
        _ => {
            let phrase = format!("split the monolithic {k} settings module into per-feature files");
            (
                format!("Refactoring task for today — {phrase}. Right now everything is in {f} and it is over 3000 lines. No behaviour change intended; the public names should stay importable from the old place."),
                phrase,
            )
        }
    }
}

/// A standing rule: (sentence the user writes, probe).
fn rule(rng: &mut Rng, k: &str) -> String {
    match rng.below(9) {
        // Everyday phrasings, with no cue word ("always", "never", "must") in them.
        6 => format!("vendor/{k}/ is off limits, the platform team owns it."),
        7 => format!("btw leave the {k}_ledger table alone, finance reads it directly."),
        8 => format!("Before anything gets committed I want `make check-{k}` green."),
        0 => format!("Always run `make lint-{k}` before you tell me a change is done."),
        1 => format!("Never modify anything under vendor/{k}/ because those files are generated."),
        2 => format!("From now on, do not add new dependencies on the {k}-legacy crate."),
        3 => format!("Please make sure you never print the {}_API_TOKEN value in logs or test output.", k.to_uppercase()),
        4 => format!("Important: only use the {k}_clock helper for timestamps, never the system time directly."),
        _ => format!("Don't squash the {k} migration files; keep every migration as its own file."),
    }
}

fn wrap_rule(rng: &mut Rng, rule: &str, p: &Project) -> String {
    let n = rng.pick(NOUNS);
    match rng.below(3) {
        0 => format!("Thanks, that plan sounds right. {rule} Go ahead with the {n} part first."),
        1 => format!("One more thing before you continue:\n\n{rule}\n\nAlso, the {n} code in {} is old, be careful there.", p.file(rng)),
        _ => format!("{rule} (This bit us last sprint.) Carry on."),
    }
}

/// A distinctive path the agent edits or writes.
fn planted_path(rng: &mut Rng, k: &str, p: &Project) -> String {
    match p.lang {
        Lang::Rust => format!(
            "{}/crates/{k}-shadow/src/reconcile_{}.rs",
            p.root,
            rng.pick(NOUNS)
        ),
        Lang::Go => format!(
            "{}/internal/{k}/shadow_{}_writer.go",
            p.root,
            rng.pick(NOUNS)
        ),
        Lang::Python => format!("{}/{k}_jobs/handlers/{}_shadow.py", p.root, rng.pick(NOUNS)),
        Lang::Ts => format!(
            "{}/web/src/features/{k}/{}Shadow.tsx",
            p.root,
            cap(rng.pick(NOUNS))
        ),
    }
}

/// A failing tool result with a distinctive error: (command, output, probe token).
fn planted_error(rng: &mut Rng, k: &str, p: &Project) -> (String, String, String) {
    match rng.below(5) {
        0 => {
            let token = format!("{k}_pool");
            (
                "cargo build --workspace".into(),
                format!(
                    "Error: Command exited with status 101\n   Compiling {k}-core v0.4.2\nwarning: unused import: `std::fmt`\n  --> crates/core/src/lib.rs:3:5\nerror[E0433]: failed to resolve: use of undeclared crate or module `{token}`\n  --> {}:41:13\n   |\n41 |     let p = {token}::Pool::new(cfg)?;\n   |             ^^^^ use of undeclared crate or module\nerror: could not compile `{k}-core` (lib) due to 1 previous error",
                    p.file(rng)
                ),
                token,
            )
        }
        1 => {
            let token = format!("{k}lib.adapters");
            (
                "python -m pytest tests/test_import.py -x".into(),
                format!(
                    "Error: Command exited with status 1\n============================= test session starts ==============================\ncollected 0 items / 1 error\n\n==================================== ERRORS ====================================\nTraceback (most recent call last):\n  File \"tests/test_import.py\", line 3, in <module>\n    from {token} import shadow\nModuleNotFoundError: No module named '{token}'\n=========================== short test summary info ============================\nERROR tests/test_import.py\n!!!!!!!!!!!!!!!!!!!!!!!!!! Interrupted: 1 error during collection !!!!!!!!!!!!!!!!!!!!!!!!!!!"
                ),
                token,
            )
        }
        2 => {
            let token = format!("/srv/{k}/config/limits.yaml");
            (
                "node scripts/load-limits.js".into(),
                format!(
                    "Error: Command exited with status 1\nnode:internal/fs/utils:347\n    throw err;\n    ^\n\nError: ENOENT: no such file or directory, open '{token}'\n    at Object.openSync (node:fs:596:3)\n    at readFileSync (node:fs:464:35)\n    at loadLimits (scripts/load-limits.js:12:15) {{\n  errno: -2,\n  code: 'ENOENT'\n}}"
                ),
                token,
            )
        }
        3 => {
            let token = format!("TestShadow{}Reconcile", cap(k));
            (
                format!("go test ./internal/... -run {token}"),
                format!(
                    "Error: Command exited with status 1\n=== RUN   {token}\n    shadow_test.go:88: balance mismatch: want 4200 got 4190\n--- FAIL: {token} (0.02s)\nFAIL\nFAIL\tgithub.com/acme/{k}/internal/ledger\t0.412s\nFAIL"
                ),
                token,
            )
        }
        _ => {
            let token = format!("relation \"{k}_shadow_rows\" does not exist");
            (
                "psql -f migrations/0042_shadow.sql".into(),
                format!(
                    "Error: Command exited with status 3\nBEGIN\nCREATE INDEX\npsql:migrations/0042_shadow.sql:17: ERROR:  {token}\nLINE 1: INSERT INTO {k}_shadow_rows (id, amount) SELECT id, amount FROM...\n                    ^\nROLLBACK"
                ),
                token,
            )
        }
    }
}

/// A decision the assistant states: (text with the decision inside, probe).
fn decision(rng: &mut Rng, k: &str) -> (String, String) {
    let (sentence, probe) = match rng.below(5) {
        0 => {
            let probe = format!("use a BTreeMap keyed by {k}_id instead of a HashMap");
            (
                format!("I decided to {probe} so the export order is stable across runs."),
                probe,
            )
        }
        1 => {
            let probe = format!("regenerate the {k} client from the OpenAPI spec rather than patching the generated code by hand");
            (
                format!("After comparing both options, I'm going to {probe}."),
                probe,
            )
        }
        2 => {
            let probe =
                format!("optimistic locking on the {k}_orders table instead of a global mutex");
            (format!("Going with {probe}, because contention is rare and the mutex serialized every checkout."), probe)
        }
        3 => {
            let probe = format!("the {k} cache key never included the tenant id");
            (
                format!("Found it — the root cause is that {probe}, so tenants shared entries."),
                probe,
            )
        }
        _ => {
            let probe = format!("keep the v1 endpoint behind a `{k}_legacy_v1` feature flag");
            (format!("Decision: I'll {probe} instead of deleting it, since two clients still call it."), probe)
        }
    };
    let pre = [
        "Thanks for the context.",
        "I've looked at the callers.",
        "The tests confirm the behaviour.",
    ];
    let post = [
        "Let me make that change now.",
        "Next I'll update the call sites.",
        "I'll write the test after the edit.",
    ];
    (
        format!("{} {sentence} {}", rng.pick(&pre), rng.pick(&post)),
        probe,
    )
}

// ---------------------------------------------------------------------------------------------
// One conversation.
// ---------------------------------------------------------------------------------------------

/// Filler steps: reads, greps, test runs, edits, occasional failures and follow-ups.
fn filler_step(rng: &mut Rng, c: &mut Conv, p: &Project, step: usize) {
    let think = rng.chance(0.4).then(|| thinking(rng));
    let text = if rng.chance(0.7) {
        narrative(rng, p)
    } else {
        String::new()
    };
    let mut calls: Vec<(String, &str, Value)> = Vec::new();
    let mut results: Vec<(String, String, bool)> = Vec::new();
    let n = if rng.chance(0.8) { 1 } else { 2 };
    for _ in 0..n {
        let id = c.id();
        match rng.below(10) {
            0..=3 => {
                let f = p.file(rng);
                calls.push((id.clone(), "file_read", json!({"file_path": f})));
                let lines = rng.range(60, 260);
                results.push((id, file_content(rng, p.lang, lines), false));
            }
            4 => {
                let pat = format!("{}_{}", rng.pick(VERBS), rng.pick(NOUNS));
                calls.push((
                    id.clone(),
                    "grep_tool",
                    json!({"pattern": pat, "path": p.root}),
                ));
                let lines = rng.range(10, 60);
                results.push((id, grep_output(rng, p, lines), false));
            }
            5 | 6 => {
                let cmd = match p.lang {
                    Lang::Rust => {
                        format!("cargo test -p {} -- {}", rng.pick(NOUNS), rng.pick(VERBS))
                    }
                    Lang::Go => format!("go test ./{}/...", rng.pick(DIRS)),
                    Lang::Python => format!("pytest -q tests/test_{}.py", rng.pick(NOUNS)),
                    Lang::Ts => format!("pnpm vitest run {}", rng.pick(NOUNS)),
                };
                calls.push((
                    id.clone(),
                    "bash",
                    json!({"command": cmd, "description": "run tests", "timeout": 300}),
                ));
                if rng.chance(0.2) {
                    let f = p.file(rng);
                    let out = format!(
                        "Error: Command exited with status 1\n{}\n{f}:{}:{}: undefined: {}{}",
                        test_log(rng, 5),
                        rng.range(10, 400),
                        rng.range(2, 40),
                        cap(rng.pick(VERBS)),
                        cap(rng.pick(NOUNS))
                    );
                    results.push((id, out, true));
                } else {
                    let lines = rng.range(20, 120);
                    results.push((id, test_log(rng, lines), false));
                }
            }
            7 | 8 => {
                let f = p.file(rng);
                let old = code_line(rng, p.lang);
                let new = format!("{}\n{}", code_line(rng, p.lang), code_line(rng, p.lang));
                calls.push((
                    id.clone(),
                    "file_edit",
                    json!({"file_path": f, "old_text": old, "new_text": new}),
                ));
                if rng.chance(0.1) {
                    results.push((id, format!("Error: old_text not found in the file {f}; make sure the text matches exactly, including whitespace"), true));
                } else {
                    results.push((
                        id,
                        format!("File {f} edited successfully: 1 replacement"),
                        false,
                    ));
                }
            }
            _ => {
                let cmd = format!("git diff --stat && git status --short # step {step}");
                calls.push((id.clone(), "bash", json!({"command": cmd})));
                let mut out = String::new();
                for _ in 0..rng.range(3, 12) {
                    out.push_str(&format!(" {} | {} +++--\n", p.file(rng), rng.range(1, 40)));
                }
                results.push((id, out, false));
            }
        }
    }
    c.assistant(think.as_deref(), &text, &calls);
    c.results(&results);
}

struct Built {
    format: Format,
    raw: String,
    facts: Vec<Fact>,
}

fn build(i: usize) -> Built {
    let format = [
        agent_db::agents::kodelet::ANTHROPIC,
        agent_db::agents::kodelet::OPENAI_CHAT,
        agent_db::agents::kodelet::OPENAI_RESPONSES,
    ][i % 3];
    let mut rng = Rng::new(1000 + i as u64);
    let k = format!("{}{}", word(&mut rng), i);
    let p = Project::new(&mut rng, Lang::ALL[i % 4]);
    let mut c = Conv::new(format);
    let mut facts = Vec::new();
    let target_chars = rng.range(30_000, 60_000) * 4 + 20_000;

    // 1. The first request.
    let (req, phrase) = first_request(&mut rng, &k, &p);
    facts.push(Fact {
        kind: FactKind::FirstRequest,
        probe: phrase,
    });
    c.user(&req);
    let glob_id = c.id();
    c.assistant(
        None,
        &format!("I'll start by getting an overview of {}.", p.root),
        &[(
            glob_id.clone(),
            "glob_tool",
            json!({"pattern": format!("**/*.{}", p.lang.ext()), "path": p.root}),
        )],
    );
    let listing: String = p.files.iter().map(|f| format!("{f}\n")).collect();
    c.results(&[(glob_id, listing, false)]);

    // Planted facts go in the first ~third of the conversation, in a varied order.
    let rule_text = rule(&mut rng, &k);
    let path = planted_path(&mut rng, &k, &p);
    let (err_cmd, err_out, err_token) = planted_error(&mut rng, &k, &p);
    let (dec_text, dec_probe) = decision(&mut rng, &k);
    facts.push(Fact {
        kind: FactKind::Rule,
        probe: rule_text.clone(),
    });
    facts.push(Fact {
        kind: FactKind::File,
        probe: path.clone(),
    });
    facts.push(Fact {
        kind: FactKind::Error,
        probe: err_token,
    });
    facts.push(Fact {
        kind: FactKind::Decision,
        probe: dec_probe,
    });
    let mut order = vec![0usize, 1, 2, 3];
    for j in (1..order.len()).rev() {
        let s = rng.below(j + 1);
        order.swap(j, s);
    }
    let plant_end = target_chars / 3;
    let gap = plant_end / 6;
    let mut step = 0;
    for which in order {
        let until = c.chars + rng.range(gap / 2, gap + 1);
        while c.chars < until {
            filler_step(&mut rng, &mut c, &p, step);
            step += 1;
        }
        match which {
            0 => {
                let msg = wrap_rule(&mut rng, &rule_text, &p);
                c.user(&msg);
            }
            1 => {
                let id = c.id();
                let body = file_content(&mut rng, p.lang, 25);
                let call = if rng.chance(0.5) {
                    (
                        id.clone(),
                        "file_write",
                        json!({"file_path": path, "content": body}),
                    )
                } else {
                    (
                        id.clone(),
                        "file_edit",
                        json!({"file_path": path, "old_text": code_line(&mut rng, p.lang), "new_text": body}),
                    )
                };
                c.assistant(None, "Adding the shadow writer now.", &[call]);
                c.results(&[(id, format!("Successfully wrote {path}"), false)]);
            }
            2 => {
                let id = c.id();
                c.assistant(
                    None,
                    "Let me build to check.",
                    &[(
                        id.clone(),
                        "bash",
                        json!({"command": err_cmd, "timeout": 600}),
                    )],
                );
                c.results(&[(id, err_out.clone(), true)]);
                let fix = c.id();
                let f = p.file(&mut rng);
                c.assistant(
                    None,
                    "That failure is from a missing module reference; I'll fix the import.",
                    &[(
                        fix.clone(),
                        "file_edit",
                        json!({"file_path": f, "old_text": "a", "new_text": "b"}),
                    )],
                );
                c.results(&[(fix, format!("File {f} edited successfully"), false)]);
            }
            _ => {
                let id = c.id();
                let f = p.file(&mut rng);
                c.assistant(
                    Some(&thinking(&mut rng)),
                    &dec_text,
                    &[(id.clone(), "file_read", json!({"file_path": f}))],
                );
                let body = file_content(&mut rng, p.lang, 80);
                c.results(&[(id, body, false)]);
            }
        }
    }

    // The rest of the session.
    while c.chars < target_chars {
        if rng.chance(0.08) {
            let msg = followup(&mut rng, &p);
            c.user(&msg);
        }
        filler_step(&mut rng, &mut c, &p, step);
        step += 1;
    }
    c.user(&format!(
        "Good. Now summarize what changed in {} and open a PR description draft.",
        p.root
    ));
    c.assistant(
        None,
        "Here is the summary of the changes so far. The work is split into three commits.",
        &[],
    );
    Built {
        format,
        raw: c.raw(),
        facts,
    }
}

/// The text a model would see in the new history: the summary, the re-inserted instruction and
/// the tail (texts, tool inputs and tool outputs).
fn message_text(m: &Message, out: &mut String) {
    for b in &m.blocks {
        match b {
            Block::Text { text } => out.push_str(text),
            Block::ToolCall { name, input, .. } => {
                out.push_str(name);
                out.push(' ');
                out.push_str(input);
            }
            Block::ToolResult { content, .. } => out.push_str(content),
            _ => {}
        }
        out.push('\n');
    }
}

#[test]
fn planted_facts_survive_and_history_shrinks() {
    let now: DateTime<FixedOffset> =
        DateTime::parse_from_rfc3339("2026-11-02T08:00:00+01:00").unwrap();
    let conversations = 24;
    let mut found_total = 0usize;
    let mut facts_total = 0usize;
    let mut per_kind = [(0usize, 0usize); 5];
    let mut ratios = Vec::new();
    let mut summary_tokens_all = Vec::new();
    let mut missing = Vec::new();

    for i in 0..conversations {
        let built = build(i);
        // Size the tail at ~20% of the conversation.
        let probe = plan_of("q", "quality", built.format, built.raw.clone(), usize::MAX);
        let total = probe.tokens_before();
        assert!(total >= 30_000, "conversation {i} is only {total} tokens");
        let plan = plan_of("q", "quality", built.format, built.raw.clone(), total / 5);
        let split = plan
            .split()
            .unwrap_or_else(|| panic!("conversation {i}: {:?}", plan.decision))
            .clone();

        let input = HeadInput::new(&plan, now);
        let summary = summarize(&input);
        if std::env::var("DUMP_SUMMARY").is_ok_and(|v| v == i.to_string()) {
            eprintln!("{summary}");
        }
        assert_eq!(
            summary,
            summarize(&HeadInput::new(&plan, now)),
            "deterministic"
        );

        // The new history, as the swap writes it.
        let summary_msg = message::decode(
            built.format,
            &message::user_text_message(built.format, &summary),
        )
        .unwrap();
        let summary_tokens = tokens::message_tokens(built.format, &summary_msg);
        let mut text = summary.clone();
        text.push('\n');
        let mut after = summary_tokens + split.tail_tokens;
        if let Some(r) = split.reinsert {
            message_text(&plan.loaded.messages[r], &mut text);
            after += plan.loaded.tokens[r];
        }
        for m in plan.tail() {
            message_text(m, &mut text);
        }
        let ratio = after as f64 / total as f64;
        assert!(
            ratio <= 0.5,
            "conversation {i}: new history is {after} of {total} tokens ({ratio:.2})"
        );
        ratios.push(ratio);
        summary_tokens_all.push(summary_tokens);
        // The summary is at least five times smaller than the head it replaces.
        assert!(
            summary_tokens * 5 <= split.head_tokens,
            "conversation {i}: summary of {summary_tokens} tokens for a head of {}",
            split.head_tokens
        );

        // Planted facts are in the head, so they can only survive through the summary.
        let head_text: String = {
            let mut s = String::new();
            for m in plan.head() {
                message_text(m, &mut s);
            }
            s
        };
        for f in &built.facts {
            assert!(
                head_text.contains(&f.probe),
                "conversation {i}: fact {:?} not planted in the head",
                f.kind
            );
            let k = KINDS.iter().position(|x| *x == f.kind).unwrap();
            per_kind[k].1 += 1;
            facts_total += 1;
            if text.contains(&f.probe) {
                found_total += 1;
                per_kind[k].0 += 1;
            } else {
                missing.push(format!(
                    "conv {i} ({}): {:?} {:?}",
                    built.format.name(),
                    f.kind,
                    f.probe
                ));
            }
        }
        // Thinking is never quoted.
        assert!(!summary.contains("PRIVATE-REASONING"), "conversation {i}");
    }

    let pct = 100.0 * found_total as f64 / facts_total as f64;
    let avg_ratio = ratios.iter().sum::<f64>() / ratios.len() as f64;
    let max_ratio = ratios.iter().cloned().fold(0.0, f64::max);
    let avg_summary = summary_tokens_all.iter().sum::<usize>() / summary_tokens_all.len();
    eprintln!(
        "quality: {found_total}/{facts_total} facts ({pct:.1}%), size ratio {avg_ratio:.2} (max {max_ratio:.2}), average summary {avg_summary} tokens, {conversations} conversations"
    );
    for (k, (found, total)) in KINDS.iter().zip(per_kind) {
        eprintln!("  {k:?}: {found}/{total}");
    }
    for m in &missing {
        eprintln!("  missing: {m}");
    }
    assert!(pct >= 90.0, "only {pct:.1}% of planted facts survived");
}

/// Robustness on the synthetic store generator's sessions (all three formats, sizes from tiny
/// to hundreds of messages): every compactable conversation gets a well-framed, bounded,
/// deterministic summary.
#[test]
fn synthetic_store_summaries_are_bounded() {
    use agent_db::compact::extractive::budget;
    use agent_db::compact::SUMMARY_HEADER;
    use agent_db::store::{Access, Store};
    use agent_db_synth::{generate, SynthOptions};

    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("storage.db");
    let opts = SynthOptions {
        conversations: 30,
        seed: 7,
        ..SynthOptions::default()
    };
    generate(&path, &opts).unwrap();
    let store = Store::open(&path, Access::Read).unwrap();
    let mut metas = Vec::new();
    store
        .scan(|m| {
            metas.push(m);
            true
        })
        .unwrap();
    let now = opts.now;
    let (mut summarized, mut head_total, mut summary_total) = (0usize, 0usize, 0usize);
    for meta in metas {
        let popts = PlanOptions {
            keep_tokens: Some(8_000),
            context_limit: None,
            ..Default::default()
        };
        let Ok(plan) = agent_db::plan::plan(&store, meta, Reason::Manual, &popts) else {
            continue;
        };
        let Some(split) = plan.split().cloned() else {
            continue;
        };
        let input = HeadInput::new(&plan, now);
        let s = summarize(&input);
        assert_eq!(s, summarize(&HeadInput::new(&plan, now)));
        assert!(s.starts_with(&format!("{SUMMARY_HEADER}\nThis session continues an earlier conversation. agent-db replaced {} earlier messages", split.cut)));
        let t = tokens::count_text(&s);
        if std::env::var("DUMP_SYNTH").is_ok_and(|v| v == summarized.to_string()) {
            eprintln!("{s}");
        }
        // The first request (<= 600 chars) and the standing rules may exceed a tiny budget.
        assert!(
            t <= budget(split.head_tokens) + 400,
            "summary of {} tokens for a head of {} tokens",
            t,
            split.head_tokens
        );
        summarized += 1;
        head_total += split.head_tokens;
        summary_total += t;
    }
    assert!(
        summarized >= 10,
        "only {summarized} synthetic conversations were compactable"
    );
    eprintln!(
        "synthetic: {summarized} conversations summarized, {head_total} head tokens -> {summary_total} summary tokens ({:.3})",
        summary_total as f64 / head_total as f64
    );
}

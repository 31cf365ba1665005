//! The offline, deterministic summarizer: a structured digest of the head built only from what
//! the messages say, with no model call.
//!
//! [`summarize`] walks the head through the provider-neutral [`Message`] model (so the three
//! kodelet formats look alike) and collects, in order: the user's requests, the sentences in
//! which the user states rules, the files and commands the tool calls touched, the errors tool
//! results reported and what the assistant said next, the assistant's decisions and findings,
//! pending work, and what the assistant was doing at the end. Everything is quoted verbatim
//! (whitespace collapsed, long quotes cut at the end) so paths, identifiers and error strings stay
//! findable by exact substring. Thinking blocks and tool-result bodies are never copied; only
//! the error lines of failed results are.
//!
//! The summary is bounded: every section is capped, and the whole text is brought down to about
//! [`budget`] tokens by cutting list items from the least important sections first (commands,
//! then files, pending tasks, findings, later requests); the first request is never cut, and the
//! standing instructions and error lines go last. An earlier agent-db summary at the start of
//! the head is carried forward verbatim (a re-compaction never loses it).
//!
//! Pure: no I/O, no randomness, no clock other than `HeadInput::now`.
//!
//! Layout: this module holds the public API and the gathering of the facts from the head;
//! `text` splits and classifies sentences and quotes them, `tools` reads tool calls (files and
//! commands), `errors` finds the error lines of tool results, and `render` builds the sections,
//! fits them to the budget and renders the summary.

mod errors;
mod render;
mod text;
mod tools;

#[cfg(test)]
mod tests;

use std::collections::{HashMap, HashSet};

use crate::compact::HeadInput;
use crate::message::{Block, Message, Role};
use crate::plan::{is_summary_text, SUMMARY_HEADER};
use crate::tokens::count_text;

use self::errors::error_line;
use self::text::{collapse, decision_strength, is_pending, is_rule, normalize, quote, sentences};
use self::tools::record_call;

/// The upper bound of a summary's size, in o200k tokens, however large the head.
pub const MAX_SUMMARY_TOKENS: usize = 6000;

/// The longest quote of one sentence (a rule, a decision, a pending task).
const SENTENCE_CHARS: usize = 400;

/// The token budget of a summary of a head of `head_tokens` tokens: a third of the head, at most
/// [`MAX_SUMMARY_TOKENS`]. The quotes that are never cut may push a summary of a tiny head over
/// it.
pub fn budget(head_tokens: usize) -> usize {
    (head_tokens / 3).min(MAX_SUMMARY_TOKENS)
}

/// Build the structured summary of `input.head` (the full message text, framing included).
pub fn summarize(input: &HeadInput<'_>) -> String {
    let head_tokens = if input.head_tokens > 0 {
        input.head_tokens
    } else {
        crate::tokens::history_tokens(input.plan.loaded.format, input.head)
    };
    let framing = format!(
        "{SUMMARY_HEADER}\nThis session continues an earlier conversation. agent-db replaced {} earlier messages (about {} tokens) with this summary on {}; everything after it is verbatim. Read it as your own notes of what happened so far.\n",
        input.head.len(),
        head_tokens,
        input.now.format("%Y-%m-%d"),
    );
    let prior = input
        .prior_summary
        .as_deref()
        .map(str::trim)
        .filter(|p| !p.is_empty());

    let facts = gather(input);
    let mut sections = render::build_sections(&facts);

    let base = budget(head_tokens);
    // The carried-forward summary is never cut; the new sections still get a share of the
    // budget so the latest work is not squeezed out entirely.
    let fixed = count_text(&framing) + prior.map_or(0, |p| count_text(p) + 12);
    let target = base.max(fixed + base / 4);
    render::fit(&framing, prior, &mut sections, target);
    render::render(&framing, prior, &sections)
}

// ---------------------------------------------------------------------------------------------
// Gathering facts from the head
// ---------------------------------------------------------------------------------------------

/// What kind of tool a call is, for the file action and for how its result is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Shell,
    /// A shell command that only prints files or matches (cat, grep, git diff …).
    ShellRead,
    Read,
    Search,
    Modify,
    Other,
}

struct CallRec {
    label: String,
    kind: Kind,
    run: Option<usize>,
    failed: bool,
}

struct CmdRun {
    command: String,
    failed: bool,
}

struct FileEntry {
    path: String,
    count: usize,
    /// (action, count) in first-seen order; rendered by rank.
    actions: Vec<(String, usize)>,
}

struct ErrorEntry {
    label: String,
    line: String,
    message_index: usize,
    count: usize,
    resolution: Option<String>,
}

struct Decision {
    text: String,
    strong: bool,
}

#[derive(Default)]
struct Facts {
    /// Visible text of each real user instruction, in order.
    requests: Vec<String>,
    /// Index in `requests` of the latest user instruction, when it is in the head.
    latest_request: Option<usize>,
    rules: Vec<String>,
    files: Vec<FileEntry>,
    runs: Vec<CmdRun>,
    errors: Vec<ErrorEntry>,
    decisions: Vec<Decision>,
    pending: Vec<String>,
    last_assistant_text: Option<String>,
    calls: Vec<CallRec>,
}

#[derive(Default)]
struct Seen {
    rules: HashSet<String>,
    decisions: HashSet<String>,
    pending: HashSet<String>,
    files: HashMap<String, usize>,
    errors: HashMap<String, usize>,
    calls: HashMap<String, usize>,
}

/// Sentences in which the user (or a system message) states a standing rule or constraint,
/// verbatim, de-duplicated, in order. The LLM strategy names them as things to preserve.
pub fn standing_rules(messages: &[Message]) -> Vec<String> {
    let mut out = Vec::new();
    let mut seen = HashSet::new();
    for m in messages {
        let own = (m.role == Role::User && m.is_user_instruction()) || m.role == Role::System;
        if !own {
            continue;
        }
        let text = visible_text(m);
        if is_summary_text(&text) {
            continue;
        }
        for s in sentences(&text) {
            if is_rule(&normalize(&s)) {
                push_unique(&mut out, &mut seen, &s);
            }
        }
    }
    out
}

fn gather(input: &HeadInput<'_>) -> Facts {
    let mut f = Facts::default();
    let mut seen = Seen::default();
    let skip_first = input.prior_summary.is_some();
    let latest = input.latest_instruction;
    // (message index, text) of every assistant text, for error resolutions.
    let mut assistant_texts: Vec<(usize, String)> = Vec::new();
    // Message indexes of the user's instructions.
    let mut instruction_at: Vec<usize> = Vec::new();

    for (i, m) in input.head.iter().enumerate() {
        if i == 0 && skip_first {
            continue;
        }
        match m.role {
            Role::User if m.is_user_instruction() => {
                let text = visible_text(m);
                if is_summary_text(&text) {
                    continue;
                }
                instruction_at.push(i);
                if latest.is_some_and(|l| std::ptr::eq(l, m)) {
                    f.latest_request = Some(f.requests.len());
                }
                for s in sentences(&text) {
                    let lower = normalize(&s);
                    if is_rule(&lower) {
                        push_unique(&mut f.rules, &mut seen.rules, &s);
                    }
                    if is_pending(&lower) {
                        push_pending(&mut f.pending, &mut seen.pending, "user", &s);
                    }
                }
                f.requests.push(text);
            }
            Role::System => {
                for s in sentences(&m.text()) {
                    if is_rule(&normalize(&s)) {
                        push_unique(&mut f.rules, &mut seen.rules, &s);
                    }
                }
            }
            Role::Assistant => {
                for b in &m.blocks {
                    if let Block::Text { text } = b {
                        if text.trim().is_empty() {
                            continue;
                        }
                        for s in sentences(text) {
                            let lower = normalize(&s);
                            if let Some(strong) = decision_strength(&lower) {
                                let key = collapse(&lower);
                                if seen.decisions.insert(key) {
                                    f.decisions.push(Decision {
                                        text: s.clone(),
                                        strong,
                                    });
                                }
                            }
                            if is_pending(&lower) {
                                push_pending(&mut f.pending, &mut seen.pending, "assistant", &s);
                            }
                        }
                        assistant_texts.push((i, text.clone()));
                        f.last_assistant_text = Some(text.clone());
                    }
                }
            }
            _ => {}
        }
        for b in &m.blocks {
            match b {
                Block::ToolCall { id, name, input } => {
                    record_call(&mut f, &mut seen, id, name, input);
                }
                Block::ToolResult {
                    call_id,
                    content,
                    is_error,
                    ..
                } => {
                    let call = seen.calls.get(call_id.as_str()).copied();
                    let kind = call.map_or(Kind::Other, |c| f.calls[c].kind);
                    let first_lines_only = !matches!(kind, Kind::Shell);
                    if let Some(line) = error_line(content, *is_error, first_lines_only) {
                        let label =
                            call.map_or_else(|| "a tool".to_string(), |c| f.calls[c].label.clone());
                        if let Some(c) = call {
                            f.calls[c].failed = true;
                            if let Some(r) = f.calls[c].run {
                                f.runs[r].failed = true;
                            }
                        }
                        let key = format!("{label}\u{0}{line}");
                        match seen.errors.get(&key) {
                            Some(&e) => f.errors[e].count += 1,
                            None => {
                                seen.errors.insert(key, f.errors.len());
                                f.errors.push(ErrorEntry {
                                    label,
                                    line,
                                    message_index: i,
                                    count: 1,
                                    resolution: None,
                                });
                            }
                        }
                    }
                }
                _ => {}
            }
        }
    }

    // What the assistant said right after each error, before the user spoke again.
    for e in &mut f.errors {
        let next = assistant_texts.partition_point(|(i, _)| *i <= e.message_index);
        let user_next = instruction_at.partition_point(|i| *i <= e.message_index);
        let limit = instruction_at.get(user_next).copied().unwrap_or(usize::MAX);
        e.resolution = assistant_texts
            .get(next)
            .filter(|(i, _)| *i < limit)
            .map(|(_, t)| t.clone());
    }
    f
}

fn push_unique(list: &mut Vec<String>, seen: &mut HashSet<String>, s: &str) {
    if seen.insert(normalize(&collapse(s))) {
        list.push(s.to_string());
    }
}

fn push_pending(list: &mut Vec<String>, seen: &mut HashSet<String>, who: &str, s: &str) {
    if seen.insert(normalize(&collapse(s))) {
        list.push(format!("{who}: {}", quote(s, SENTENCE_CHARS)));
    }
}

/// Text and image placeholders of a message, in block order (thinking excluded).
fn visible_text(m: &Message) -> String {
    let mut parts: Vec<String> = Vec::new();
    for b in &m.blocks {
        match b {
            Block::Text { text } if !text.trim().is_empty() => parts.push(text.clone()),
            Block::Image(img) => parts.push(img.placeholder()),
            _ => {}
        }
    }
    parts.join("\n")
}

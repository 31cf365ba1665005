//! The offline, deterministic summarizer: a structured digest of the head built from what
//! carries the work forward, with no model call and no cue words.
//!
//! [`summarize`] walks the head through the provider-neutral [`Message`] model (so every stored
//! format looks alike) and builds these sections:
//!
//! - **User requests and instructions**: every message the user wrote (not tool results), in
//!   order, near-verbatim. User turns are short and carry the instructions, rules, required
//!   commands and pending asks in whatever words the user chose, so they are kept rather than
//!   classified. Over budget, the longest turns in the middle are shortened first (prose is cut;
//!   paths, identifiers, commands and numbers are kept), then the oldest middle turns are
//!   dropped; the first request and the three latest turns are only cut when nothing else is
//!   left (or when one is a paste of more than 900 tokens). The latest instruction, which the
//!   swap repeats verbatim right after the summary, is only pointed at.
//! - **Decisions and findings**: the assistant's sentences picked by structure (distinctive
//!   tokens, being its answer to a user turn, standing next to an edit or after a failure),
//!   see `assistant`.
//! - **Files touched**, **Commands run**, **Errors seen**: tool output compressed to its signal
//!   (edited and written paths, commands with exit status, error lines with file:line, failed
//!   test names); tool-result bodies and thinking are never copied.
//! - **Pending**: the latest instruction, and commands still failing at the end.
//! - **Withdrawn or superseded**: what a later user turn (in the head or the kept tail) took
//!   back or replaced, or the assistant dropped without the user objecting, resolved by the
//!   entities the statements share (or, for a take-back that names nothing, what it describes or
//!   points at) and by what the work did afterwards (see `supersede` and `refer`; the few cue
//!   words only add to it); a withdrawn subject is
//!   masked as `[Wn]` everywhere else, so the summary states only the final state as live.
//! - **Where we stopped**: the assistant's last message and last tool calls.
//!
//! An earlier agent-db summary at the start of the head is carried forward (its withdrawn
//! section merged into the new one, its text masked like the rest). The summary is bounded:
//! about a sixth of the head's tokens, at most [`MAX_SUMMARY_TOKENS`] (a re-summary of the
//! originals: at least the size of the summary before it, whose user turns, files and commands
//! it keeps while within the cap); when over, the least
//! important items go first (last tool calls, commands, read-only files, low-ranked assistant
//! sentences, error resolutions), and the withdrawn section is never cut.
//!
//! Pure: no I/O, no randomness, no clock other than `HeadInput::now`. Every word list the
//! summarizer uses is in [`lexicon`].
//!
//! Layout: this module gathers the facts from the head; `text` splits and quotes prose,
//! `entities` finds distinctive tokens and counts words, `turns` shortens user turns,
//! `assistant` scores the assistant's sentences, `refer` ties take-backs that name nothing to
//! what they describe or point at, `supersede` resolves withdrawals and masks,
//! `tools` reads tool calls, `errors` reads failed results, and `render` builds the sections,
//! fits them to the budget and renders the summary.

mod assistant;
mod entities;
mod errors;
pub mod lexicon;
mod refer;
mod render;
mod rules;
mod supersede;
mod text;
mod tools;
mod turns;

#[cfg(test)]
mod tests;

use std::collections::HashMap;

use crate::compact::HeadInput;
use crate::compact::{is_summary_text, SUMMARY_HEADER};
use crate::message::{Block, Message, Role};
use crate::tokens::count_text;

pub use self::rules::{standing_rules_over, RuleStatus, StandingRule};

use self::assistant::TextAt;
use self::entities::{entities, Stats};
use self::errors::{error_line_near, failed_tests, result_exit_code};
use self::supersede::{Masker, Origin, Stmt, Withdrawal};
use self::text::{collapse, sentences, strip_bullet, Cues};
use self::tools::record_call;

/// The upper bound of a summary's size, in o200k tokens, however large the head.
pub const MAX_SUMMARY_TOKENS: usize = 6000;

/// The token budget of a summary of a head of `head_tokens` tokens: a sixth of the head, at
/// most [`MAX_SUMMARY_TOKENS`]. The parts that are never cut (the framing, the first request and
/// the latest turns, the withdrawn section) may push a summary of a tiny head over it.
pub fn budget(head_tokens: usize) -> usize {
    (head_tokens / 6).min(MAX_SUMMARY_TOKENS)
}

/// How [`summarize_with`] reads prose. Not a setting: agent-db always uses the default. The
/// paraphrase test switches the lexicon's prose cue lists off (an ablation) to show that the
/// summary stands on the structure of the conversation rather than on its words.
#[doc(hidden)]
#[derive(Debug, Clone, Copy)]
pub struct Options {
    /// Read negations and take-back words ([`lexicon::NEGATIONS`],
    /// [`lexicon::WITHDRAWAL_VERBS`] …) in prose. Tool formats are read either way.
    pub prose_cues: bool,
}

impl Default for Options {
    fn default() -> Options {
        Options { prose_cues: true }
    }
}

/// Build the structured summary of `input.head` (the full message text, framing included).
pub fn summarize(input: &HeadInput<'_>) -> String {
    summarize_with(input, Options::default())
}

/// [`summarize`] with explicit [`Options`] (for the paraphrase test's ablation run).
#[doc(hidden)]
pub fn summarize_with(input: &HeadInput<'_>, options: Options) -> String {
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
        .filter(|p| !p.is_empty())
        .map(Prior::parse);

    let cues = Cues {
        on: options.prose_cues,
    };
    let facts = gather(
        input.plan.loaded.format,
        input.head,
        prior.as_ref(),
        input.latest_instruction,
        input.plan.tail(),
        cues,
        Scope::All,
    );
    let prior_text = prior.as_ref().map(|p| facts.masker.apply(&p.live));
    // A re-summary of the originals keeps no less than the summary before it: its budget is at
    // least that summary's size and what it listed is not dropped (within the cap).
    let earlier = input.earlier_summary.as_deref().unwrap_or("");
    let base = budget(head_tokens).max(count_text(earlier).min(MAX_SUMMARY_TOKENS));
    // The carried-forward summary is never cut; the new sections still get a share of the
    // budget so the latest work is not squeezed out entirely.
    let fixed = count_text(&framing) + prior_text.as_deref().map_or(0, |p| count_text(p) + 12);
    let target = base.max(fixed + base / 4);
    let fitted = |earlier: &str| {
        let mut sections = render::build_sections(&facts, prior.as_ref(), earlier);
        render::fit(&framing, prior_text.as_deref(), &mut sections, target);
        render::render(&framing, prior_text.as_deref(), &sections)
    };
    let text = fitted(earlier);
    if earlier.is_empty() || count_text(&text) <= MAX_SUMMARY_TOKENS {
        return text;
    }
    fitted("")
}

// ---------------------------------------------------------------------------------------------
// An earlier summary carried forward
// ---------------------------------------------------------------------------------------------

/// An earlier summary's body, split into its live part and its withdrawn items.
pub(super) struct Prior {
    /// The body without its withdrawn section.
    live: String,
    /// The item lines of its withdrawn section, verbatim.
    withdrawn: Vec<String>,
}

impl Prior {
    fn parse(body: &str) -> Prior {
        let mut live = Vec::new();
        let mut withdrawn = Vec::new();
        let mut inside = false;
        for line in body.lines() {
            if line.starts_with("## ") {
                inside = line.starts_with("## Withdrawn");
                if inside {
                    continue;
                }
            }
            if !inside {
                live.push(line);
            } else if !line.trim().is_empty() && line != render::WITHDRAWN_LEAD {
                // Items, whatever their shape (a model's summary may write prose).
                withdrawn.push(line.to_string());
            }
        }
        Prior {
            live: live.join("\n").trim().to_string(),
            withdrawn,
        }
    }
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
    exit: Option<i64>,
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
    exit: Option<i64>,
    tests: Vec<String>,
    message_index: usize,
    count: usize,
    resolution: Option<String>,
}

/// One message the user wrote (or a system message), in order.
struct Turn {
    text: String,
    /// The latest user instruction, repeated verbatim right after the summary.
    latest: bool,
    system: bool,
}

#[derive(Default)]
struct Facts {
    turns: Vec<Turn>,
    stmts: Vec<Stmt>,
    texts: Vec<TextAt>,
    files: Vec<FileEntry>,
    runs: Vec<CmdRun>,
    errors: Vec<ErrorEntry>,
    calls: Vec<CallRec>,
    last_assistant_text: Option<String>,
    stats: Stats,
    withdrawals: Vec<Withdrawal>,
    masker: Masker,
}

#[derive(Default)]
struct Seen {
    files: HashMap<String, usize>,
    errors: HashMap<String, usize>,
    calls: HashMap<String, usize>,
}

/// Where the walk through the head stands.
#[derive(Default)]
struct Walk {
    /// No assistant text since the last user turn.
    since_user: bool,
    /// The last tool result failed and no assistant text followed yet.
    after_error: bool,
    /// (message index, text) of every assistant text, for error resolutions.
    assistant_texts: Vec<(usize, String)>,
    /// Message indexes of the user's instructions.
    instruction_at: Vec<usize>,
}

/// Sentences longer than this are pasted material, not statements.
const STATEMENT_CHARS: usize = 600;
/// Entities looked at per statement.
const STATEMENT_ENTITIES: usize = 16;
/// At most this many standing rules (the latest), of at most this many characters each.
const MAX_RULES: usize = 40;
const RULE_CHARS: usize = 400;

/// The user's own sentences that still stand, verbatim, de-duplicated, in order: those that
/// name something distinctive (a path, identifier, command, number or name) and that no later
/// user turn took back (the latest [`MAX_RULES`], each short). The LLM strategy names them as
/// things to preserve. Read over the head alone: the LLM strategy uses [`standing_rules_over`];
/// this is the tests' account of the statements' rules.
#[cfg(test)]
pub fn standing_rules(format: crate::message::Format, messages: &[Message]) -> Vec<String> {
    rules_of(&gather(
        format,
        messages,
        None,
        None,
        &[],
        Cues { on: true },
        Scope::Statements,
    ))
}

/// The standing rules of gathered facts (see [`standing_rules`]).
#[cfg(test)]
fn rules_of(f: &Facts) -> Vec<String> {
    use std::collections::HashSet;
    let superseded: HashSet<usize> = f
        .withdrawals
        .iter()
        .flat_map(|w| w.earlier.iter().copied().chain([w.latest]))
        .collect();
    let mut out = Vec::new();
    let mut seen = HashSet::new();
    for (i, s) in f.stmts.iter().enumerate() {
        if s.origin == Origin::User
            && s.ents.iter().any(|e| e.strong)
            && s.text.chars().count() <= RULE_CHARS
            && !superseded.contains(&i)
            && seen.insert(s.text.to_lowercase())
        {
            out.push(f.masker.apply(&s.text));
        }
    }
    let from = out.len().saturating_sub(MAX_RULES);
    out.split_off(from)
}

/// The entities of a sentence that can be a statement (not pasted material).
fn statement_entities(s: &str, stats: &Stats) -> Option<Vec<entities::Entity>> {
    if s.chars().count() > STATEMENT_CHARS {
        return None;
    }
    let mut ents = entities(s, stats);
    ents.truncate(STATEMENT_ENTITIES);
    Some(ents)
}

/// What [`gather`] collects.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Scope {
    /// Every fact the summary renders.
    All,
    /// Only the statements, their withdrawals and the masker ([`standing_rules`]): tool calls,
    /// tool results and errors are not read (no statement depends on them).
    Statements,
}

/// The facts of `head`. The user turns of `later` (the kept tail) are read only for what they
/// take back: a withdrawal there still withdraws what the summary would say.
fn gather(
    format: crate::message::Format,
    head: &[Message],
    prior: Option<&Prior>,
    latest: Option<&Message>,
    later: &[Message],
    cues: Cues,
    scope: Scope,
) -> Facts {
    // The earlier summary's messages (one, or a request and reply the agent recorded) are
    // the prior.
    let skip = crate::summary::prior_summary_len(format, head).max(usize::from(prior.is_some()));
    let body = &head[skip.min(head.len())..];
    // The statements (all the standing rules read) are prose: their table need not hold the
    // tool output's words.
    let stats = match scope {
        Scope::All => Stats::new(body, skip),
        Scope::Statements => Stats::of_prose(body, skip),
    };
    let mut f = Facts {
        stats,
        ..Facts::default()
    };
    f.stats.add_later(later, head.len());
    if let Some(p) = prior {
        prior_statements(&mut f, p);
    }
    let mut seen = Seen::default();
    let mut walk = Walk::default();
    for (k, m) in body.iter().enumerate() {
        let i = k + skip;
        match m.role {
            Role::User if m.is_user_instruction() => {
                let text = visible_text(m);
                if is_summary_text(&text) {
                    continue;
                }
                walk.instruction_at.push(i);
                walk.since_user = true;
                let is_latest = latest.is_some_and(|l| std::ptr::eq(l, m));
                user_turn(&mut f, text, is_latest, i);
            }
            Role::System => {
                let text = visible_text(m);
                if !text.trim().is_empty() {
                    f.turns.push(Turn {
                        text,
                        latest: false,
                        system: true,
                    });
                }
            }
            _ => {}
        }
        if scope == Scope::Statements {
            if m.role == Role::Assistant {
                assistant_statements(&mut f, m, i);
            }
            continue;
        }
        let calls_before = f.calls.len();
        tool_blocks(&mut f, &mut seen, &mut walk, m, i);
        if m.role == Role::Assistant {
            let edits = f.calls[calls_before..]
                .iter()
                .any(|c| c.kind == Kind::Modify);
            assistant_texts(&mut f, &mut walk, m, i, edits);
        }
    }
    if scope == Scope::All {
        resolve_errors(&mut f, &walk);
    }
    later_statements(&mut f, later, head.len());
    let prior_items = prior.map_or(&[][..], |p| &p.withdrawn[..]);
    refer::attach_references(&mut f.stmts, &f.stats, cues);
    f.withdrawals = supersede::resolve(&f.stmts, &f.stats, cues);
    label_withdrawals(&mut f, prior_items);
    f
}

fn user_turn(f: &mut Facts, text: String, latest: bool, at: usize) {
    let turn = f.turns.len();
    for s in sentences(&text) {
        let Some(ents) = statement_entities(&s, &f.stats) else {
            continue;
        };
        f.stmts.push(Stmt {
            origin: Origin::User,
            turn,
            at,
            text: s,
            ents,
        });
    }
    f.turns.push(Turn {
        text,
        latest,
        system: false,
    });
}

/// The user's sentences after the head (the first of which is message `first`), as statements
/// that may take back what the head said.
fn later_statements(f: &mut Facts, later: &[Message], first: usize) {
    let first_turn = f.turns.len() + 1;
    let turns = later
        .iter()
        .enumerate()
        .filter(|(_, m)| m.is_user_instruction());
    for (k, (j, m)) in turns.enumerate() {
        let text = visible_text(m);
        if is_summary_text(&text) {
            continue;
        }
        for s in sentences(&text) {
            if let Some(ents) = statement_entities(&s, &f.stats) {
                f.stmts.push(Stmt {
                    origin: Origin::User,
                    turn: first_turn + k,
                    at: first + j,
                    text: s,
                    ents,
                });
            }
        }
    }
}

/// The lines of a carried-forward summary, as statements that later turns may supersede.
fn prior_statements(f: &mut Facts, p: &Prior) {
    for line in p.live.lines() {
        let t = line.trim();
        if t.is_empty() || t.starts_with("## ") {
            continue;
        }
        let t = strip_bullet(t);
        let ents = statement_entities(t, &f.stats).unwrap_or_default();
        if !ents.is_empty() {
            f.stmts.push(Stmt {
                origin: Origin::Prior,
                turn: 0,
                at: 0,
                text: collapse(t),
                ents,
            });
        }
    }
}

/// Label the withdrawals that mask something, numbering after the carried-forward ones, and
/// build the masker (carried-forward masks included).
fn label_withdrawals(f: &mut Facts, prior_items: &[String]) {
    let mut next = 1;
    for line in prior_items {
        if let Some((n, names)) = supersede::parse_prior_item(line) {
            next = next.max(n + 1);
            let label = format!("[W{n}]");
            for name in names {
                let kind = if text::is_code_like(&name) || name.contains(' ') {
                    entities::Kind::Code
                } else {
                    entities::Kind::Word
                };
                f.masker.add(&entities::Entity::new(&name, kind), &label);
            }
        }
    }
    for w in &mut f.withdrawals {
        if w.masks.is_empty() {
            continue;
        }
        let label = format!("[W{next}]");
        next += 1;
        for e in &w.masks {
            f.masker.add(e, &label);
        }
        w.label = Some(label);
    }
}

fn tool_blocks(f: &mut Facts, seen: &mut Seen, walk: &mut Walk, m: &Message, i: usize) {
    for b in &m.blocks {
        match b {
            Block::ToolCall { id, name, input } => record_call(f, seen, id, name, input),
            Block::ToolResult {
                call_id,
                content,
                is_error,
                ..
            } => {
                let failed = tool_result(f, seen, call_id, content, *is_error, i);
                walk.after_error = failed;
            }
            _ => {}
        }
    }
}

/// Record a tool result's error, if it reports one; returns whether it failed.
fn tool_result(
    f: &mut Facts,
    seen: &mut Seen,
    call_id: &str,
    content: &str,
    is_error: bool,
    i: usize,
) -> bool {
    let call = seen.calls.get(call_id).copied();
    let kind = call.map_or(Kind::Other, |c| f.calls[c].kind);
    let first_lines_only = !matches!(kind, Kind::Shell);
    let known: Vec<&str> = f.files.iter().map(|e| e.path.as_str()).collect();
    let Some(line) = error_line_near(content, is_error, first_lines_only, &known) else {
        return false;
    };
    let label = call.map_or_else(|| "a tool".to_string(), |c| f.calls[c].label.clone());
    let exit = result_exit_code(content);
    if let Some(c) = call {
        f.calls[c].failed = true;
        if let Some(r) = f.calls[c].run {
            f.runs[r].failed = true;
            f.runs[r].exit = exit;
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
                exit,
                tests: failed_tests(content),
                message_index: i,
                count: 1,
                resolution: None,
            });
        }
    }
    true
}

fn assistant_texts(f: &mut Facts, walk: &mut Walk, m: &Message, i: usize, edits: bool) {
    for b in &m.blocks {
        let Block::Text { text } = b else { continue };
        if text.trim().is_empty() {
            continue;
        }
        text_statements(f, text, i);
        f.texts.push(TextAt {
            text: text.clone(),
            answer: walk.since_user,
            edits,
            after_error: walk.after_error,
        });
        walk.since_user = false;
        walk.after_error = false;
        walk.assistant_texts.push((i, text.clone()));
        f.last_assistant_text = Some(text.clone());
    }
}

/// The statements of an assistant message's texts (what [`assistant_texts`] records of them).
fn assistant_statements(f: &mut Facts, m: &Message, i: usize) {
    for b in &m.blocks {
        match b {
            Block::Text { text } if !text.trim().is_empty() => text_statements(f, text, i),
            _ => {}
        }
    }
}

/// The sentences of assistant text `text` (message `i`) that name an entity, as statements.
fn text_statements(f: &mut Facts, text: &str, i: usize) {
    for s in sentences(text) {
        let ents = statement_entities(&s, &f.stats).unwrap_or_default();
        if !ents.is_empty() {
            f.stmts.push(Stmt {
                origin: Origin::Assistant,
                turn: i,
                at: i,
                text: s,
                ents,
            });
        }
    }
}

/// What the assistant said right after each error, before the user spoke again.
fn resolve_errors(f: &mut Facts, walk: &Walk) {
    for e in &mut f.errors {
        let next = walk
            .assistant_texts
            .partition_point(|(i, _)| *i <= e.message_index);
        let user_next = walk
            .instruction_at
            .partition_point(|i| *i <= e.message_index);
        let limit = walk
            .instruction_at
            .get(user_next)
            .copied()
            .unwrap_or(usize::MAX);
        e.resolution = walk
            .assistant_texts
            .get(next)
            .filter(|(i, _)| *i < limit)
            .map(|(_, t)| t.clone());
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

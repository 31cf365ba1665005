//! The summary's sections: building them from the gathered facts (each capped, withdrawn
//! subjects masked), fitting them to the token budget by cutting the least important items and
//! shortening user turns, and rendering the text.

use std::collections::HashMap;

use crate::tokens::count_text;

use super::assistant::{statements, SENTENCE_CHARS};
use super::supersede::render_item;
use super::text::{collapse, quote, quote_raw, sentences};
use super::tools::{action_rank, modifies};
use super::{Facts, FileEntry, Prior};

const RESOLUTION_CHARS: usize = 200;
const CURRENT_TEXT_CHARS: usize = 600;
/// A protected user turn (the first request, the latest ones) longer than this many tokens is
/// shortened like the others: a pasted log must not blow the bound.
const PROTECTED_TURN_TOKENS: usize = 900;
/// The latest turns that are never shortened before the rest (besides the first request).
const PROTECTED_LATEST: usize = 3;

// Initial caps per section (before the token budget is applied).
pub(super) const CAP_FILES: usize = 40;
pub(super) const CAP_COMMANDS: usize = 20;
const CAP_ERRORS: usize = 25;
const CAP_DECISIONS: usize = 150;
const CAP_PENDING: usize = 8;
const CAP_CURRENT_CALLS: usize = 5;

const USER_TITLE: &str = "User requests and instructions";

/// Where a section loses items first (among items of the same weight).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Cut {
    First,
    Middle,
    Last,
}

struct Item {
    /// The item's text, fullest first; `level` picks the one rendered, past the end = dropped.
    forms: Vec<String>,
    level: usize,
    /// A second line (an error's resolution), dropped before the item itself.
    extra: Option<String>,
    /// Lower weights are cut first.
    weight: u32,
    /// Never dropped, only shortened as a last resort.
    protected: bool,
}

impl Item {
    fn new(text: String) -> Item {
        Item {
            forms: vec![text],
            level: 0,
            extra: None,
            weight: 0,
            protected: false,
        }
    }
    fn kept(&self) -> bool {
        self.level < self.forms.len()
    }
    fn text(&self) -> &str {
        &self.forms[self.level.min(self.forms.len() - 1)]
    }
    fn tokens(&self) -> usize {
        if !self.kept() {
            return 0;
        }
        count_text(self.text()) + 2 + self.extra.as_deref().map_or(0, |e| count_text(e) + 2)
    }
}

pub(super) struct Section {
    title: &'static str,
    /// Lines always rendered first.
    lead: Vec<String>,
    /// A line introducing the items, when any is kept.
    items_heading: Option<&'static str>,
    items: Vec<Item>,
    noun: &'static str,
    cut: Cut,
    /// Items carry their own prefix (`3. `) instead of `- `.
    numbered: bool,
}

impl Section {
    fn new(title: &'static str, noun: &'static str, cut: Cut) -> Section {
        Section {
            title,
            lead: Vec::new(),
            items_heading: None,
            items: Vec::new(),
            noun,
            cut,
            numbered: false,
        }
    }

    fn kept(&self) -> usize {
        self.items.iter().filter(|i| i.kept()).count()
    }

    /// Nothing to render: no lead and no kept item (a fully cut list is left out, not
    /// announced).
    fn is_empty(&self) -> bool {
        self.lead.is_empty() && self.kept() == 0
    }

    /// Indexes of the droppable kept items in cutting order: lowest weight first, then by the
    /// section's position rule.
    fn cut_order(&self) -> Vec<usize> {
        let mut weights: Vec<u32> = self
            .items
            .iter()
            .filter(|i| i.kept() && !i.protected)
            .map(|i| i.weight)
            .collect();
        weights.sort_unstable();
        weights.dedup();
        let mut order = Vec::new();
        for w in weights {
            let mut c: Vec<usize> = (0..self.items.len())
                .filter(|&k| {
                    let it = &self.items[k];
                    it.kept() && !it.protected && it.weight == w
                })
                .collect();
            match self.cut {
                Cut::First => {}
                Cut::Last => c.reverse(),
                Cut::Middle => {
                    // From the middle outwards.
                    let mid = c.len() / 2;
                    let mut m = Vec::with_capacity(c.len());
                    for d in 0..c.len() {
                        let k = if d % 2 == 0 {
                            mid + d / 2
                        } else {
                            mid - 1 - d / 2
                        };
                        if let Some(&x) = c.get(k) {
                            m.push(x);
                        }
                    }
                    c = m;
                }
            }
            order.extend(c);
        }
        order
    }

    /// Cut down to `keep` items, in cutting order.
    fn trim_to(&mut self, keep: usize) {
        let excess = self.kept().saturating_sub(keep);
        for k in self.cut_order().into_iter().take(excess) {
            self.items[k].level = self.items[k].forms.len();
        }
    }

    fn render(&self, out: &mut String) {
        if self.is_empty() {
            return;
        }
        out.push_str("## ");
        out.push_str(self.title);
        out.push('\n');
        for l in &self.lead {
            out.push_str(l);
            out.push('\n');
        }
        if let Some(h) = self.items_heading.filter(|_| self.kept() > 0) {
            out.push_str(h);
            out.push('\n');
        }
        let mut omitted = 0usize;
        let note = |n: usize, out: &mut String| {
            out.push_str(&format!("- … {n} more {} omitted\n", self.noun));
        };
        for it in &self.items {
            if !it.kept() {
                omitted += 1;
                continue;
            }
            if omitted > 0 {
                note(omitted, out);
                omitted = 0;
            }
            if !self.numbered {
                out.push_str("- ");
            }
            out.push_str(it.text());
            out.push('\n');
            if let Some(e) = &it.extra {
                out.push_str("  ");
                out.push_str(e);
                out.push('\n');
            }
        }
        if omitted > 0 {
            note(omitted, out);
        }
        out.push('\n');
    }
}

// Section order (also the rendering order).
const USER: usize = 0;
const DECISIONS: usize = 1;
const FILES: usize = 2;
const COMMANDS: usize = 3;
const ERRORS: usize = 4;
const PENDING: usize = 5;
const WITHDRAWN: usize = 6;
const STOPPED: usize = 7;

/// The heading of the withdrawn section (the contract with readers of the summary).
pub(super) const WITHDRAWN_TITLE: &str = "Withdrawn or superseded";
/// The line under it.
pub(super) const WITHDRAWN_LEAD: &str = "Taken back or changed by a later user message: not live, do not act on these. [Wn] elsewhere marks a withdrawn subject.";

/// The sections of a summary of `f`. `earlier`, for a re-summary of the originals, is the
/// summary the compaction before it wrote (else empty): what it listed (its user turns, files and
/// commands) is protected, so the new summary keeps no less.
pub(super) fn build_sections(f: &Facts, prior: Option<&Prior>, earlier: &str) -> Vec<Section> {
    let mut s = vec![
        Section::new(USER_TITLE, "user messages", Cut::First),
        Section::new("Decisions and findings", "statements", Cut::Middle),
        Section::new("Files touched", "files", Cut::Last),
        Section::new("Commands run", "commands", Cut::First),
        Section::new("Errors seen", "errors", Cut::Middle),
        Section::new("Pending", "items", Cut::First),
        Section::new(WITHDRAWN_TITLE, "items", Cut::First),
        Section::new("Where we stopped", "tool calls", Cut::First),
    ];
    user_section(&mut s[USER], f, &quoted_turns(earlier));
    decisions_section(&mut s[DECISIONS], f);
    files_section(&mut s[FILES], f, earlier);
    commands_section(&mut s[COMMANDS], f, earlier);
    errors_section(&mut s[ERRORS], f);
    pending_section(&mut s[PENDING], f);
    withdrawn_section(&mut s[WITHDRAWN], f, prior);
    stopped_section(&mut s[STOPPED], f);
    s
}

/// Lowercase strings whose mention makes a piece of a user turn worth keeping: the program and
/// first argument of each command run, and the names of touched files.
fn anchors(f: &Facts) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut push = |a: String| {
        if a.chars().count() >= 4 && !out.contains(&a) {
            out.push(a);
        }
    };
    for r in &f.runs {
        let words: Vec<&str> = r.command.split_whitespace().take(2).collect();
        if words.len() == 2 {
            push(words.join(" ").to_lowercase());
        }
    }
    for e in &f.files {
        if let Some(name) = e.path.trim_end_matches('/').rsplit('/').next() {
            push(name.to_lowercase());
        }
    }
    out
}

fn user_section(sec: &mut Section, f: &Facts, inherited: &[usize]) {
    sec.numbered = true;
    let anchors = anchors(f);
    let n = f.turns.len();
    let first_user = f.turns.iter().position(|t| !t.system);
    for (k, t) in f.turns.iter().enumerate() {
        let who = if t.system { "(system) " } else { "" };
        let forms: Vec<String> = if t.latest {
            vec![format!(
                "{}. (the latest user instruction; it is repeated verbatim right after this summary)",
                k + 1
            )]
        } else {
            super::turns::forms(&t.text, &anchors)
                .into_iter()
                .map(|x| format!("{}. {who}{}", k + 1, quote_raw(&f.masker.apply(&x))))
                .collect()
        };
        let protected = !t.system
            && (Some(k) == first_user || k + PROTECTED_LATEST >= n || inherited.contains(&(k + 1)));
        let mut it = Item {
            forms,
            level: 0,
            extra: None,
            weight: k as u32,
            protected,
        };
        if protected && count_text(it.text()) > PROTECTED_TURN_TOKENS && it.forms.len() > 1 {
            it.level = 1;
        }
        sec.items.push(it);
    }
}

fn decisions_section(sec: &mut Section, f: &Facts) {
    let said = statements(&f.texts, &f.stats);
    // Rank by score: the weight of an item is its rank from the bottom.
    let mut order: Vec<usize> = (0..said.len()).collect();
    order.sort_by(|&a, &b| said[a].score.total_cmp(&said[b].score).then(b.cmp(&a)));
    let mut weight = vec![0u32; said.len()];
    for (rank, &k) in order.iter().enumerate() {
        weight[k] = rank as u32;
    }
    for (k, s) in said.iter().enumerate() {
        let mut it = Item::new(quote(&f.masker.apply(&s.text), SENTENCE_CHARS));
        it.weight = weight[k];
        sec.items.push(it);
    }
    sec.trim_to(CAP_DECISIONS);
}

fn files_section(sec: &mut Section, f: &Facts, earlier: &str) {
    // Files: most touched first; files the agent changed outlive files it only read.
    let mut files: Vec<&FileEntry> = f.files.iter().collect();
    files.sort_by_key(|e| std::cmp::Reverse(e.count)); // stable: first seen wins ties
    for e in files {
        let mut actions = e.actions.clone();
        actions.sort_by_key(|(a, _)| action_rank(a));
        let desc = actions
            .iter()
            .map(|(a, n)| {
                if *n > 1 {
                    format!("{a} {n}×")
                } else {
                    a.clone()
                }
            })
            .collect::<Vec<_>>()
            .join(", ");
        let modified = actions.iter().any(|(a, _)| modifies(a));
        let mut it = Item::new(f.masker.apply(&format!("{} ({desc})", e.path)));
        it.weight = u32::from(modified);
        it.protected = !earlier.is_empty() && earlier.contains(e.path.as_str());
        sec.items.push(it);
    }
    sec.trim_to(CAP_FILES);
}

fn commands_section(sec: &mut Section, f: &Facts, earlier: &str) {
    // De-duplicated by text, ordered by their last run.
    let mut last: HashMap<&str, usize> = HashMap::new();
    let mut counts: HashMap<&str, usize> = HashMap::new();
    for (k, r) in f.runs.iter().enumerate() {
        last.insert(&r.command, k);
        *counts.entry(&r.command).or_default() += 1;
    }
    for (k, r) in f.runs.iter().enumerate() {
        if last[r.command.as_str()] != k {
            continue;
        }
        let mut line = format!("$ {}", r.command);
        let n = counts[r.command.as_str()];
        if n > 1 {
            line.push_str(&format!(" (run {n}×)"));
        }
        match (r.failed, r.exit) {
            (true, Some(code)) => line.push_str(&format!(" (failed, exit {code})")),
            (true, None) => line.push_str(" (failed)"),
            _ => {}
        }
        let mut it = Item::new(f.masker.apply(&line));
        it.protected = !earlier.is_empty() && earlier.contains(&format!("$ {}", r.command));
        sec.items.push(it);
    }
    sec.trim_to(CAP_COMMANDS);
}

fn errors_section(sec: &mut Section, f: &Facts) {
    for e in &f.errors {
        let mut line = format!("{} failed", e.label);
        if let Some(code) = e.exit {
            line.push_str(&format!(" (exit {code})"));
        }
        line.push_str(&format!(": {}", quote_raw(&e.line)));
        if !e.tests.is_empty() {
            line.push_str(&format!("; failed tests: {}", e.tests.join(", ")));
        }
        if e.count > 1 {
            line.push_str(&format!(" ({}×)", e.count));
        }
        let mut it = Item::new(f.masker.apply(&line));
        it.extra = e.resolution.as_ref().map(|r| {
            let first: String = sentences(r)
                .into_iter()
                .take(2)
                .collect::<Vec<_>>()
                .join(" ");
            format!("then: {}", quote(&f.masker.apply(&first), RESOLUTION_CHARS))
        });
        sec.items.push(it);
    }
    sec.trim_to(CAP_ERRORS);
}

fn pending_section(sec: &mut Section, f: &Facts) {
    if let Some(k) = f.turns.iter().position(|t| t.latest) {
        sec.lead.push(format!(
            "The latest user instruction (message {} above) is repeated verbatim right after this summary; it is the current task.",
            k + 1
        ));
    }
    // Commands whose last run failed.
    let mut last: HashMap<&str, (bool, Option<i64>)> = HashMap::new();
    let mut order: Vec<&str> = Vec::new();
    for r in &f.runs {
        if !last.contains_key(r.command.as_str()) {
            order.push(&r.command);
        }
        last.insert(&r.command, (r.failed, r.exit));
    }
    for c in order {
        if let Some((true, exit)) = last.get(c) {
            let code = exit.map_or(String::new(), |e| format!(" (exit {e})"));
            sec.items
                .push(Item::new(f.masker.apply(&format!(
                    "still failing at its last run: $ {c}{code}"
                ))));
        }
    }
    sec.trim_to(CAP_PENDING);
}

fn withdrawn_section(sec: &mut Section, f: &Facts, prior: Option<&Prior>) {
    let carried = prior.map_or(&[][..], |p| &p.withdrawn[..]);
    if carried.is_empty() && f.withdrawals.is_empty() {
        return;
    }
    sec.lead.push(WITHDRAWN_LEAD.to_string());
    sec.numbered = true;
    for line in carried {
        let mut it = Item::new(line.clone());
        it.protected = true;
        sec.items.push(it);
    }
    for w in &f.withdrawals {
        let mut it = Item::new(render_item(w, &f.stmts));
        it.protected = true;
        sec.items.push(it);
    }
}

fn stopped_section(sec: &mut Section, f: &Facts) {
    if let Some(t) = &f.last_assistant_text {
        sec.lead.push(format!(
            "Last assistant message: {}",
            quote(&f.masker.apply(&collapse(t)), CURRENT_TEXT_CHARS)
        ));
    }
    if !f.calls.is_empty() {
        sec.items_heading = Some("Last tool calls:");
        let from = f.calls.len().saturating_sub(CAP_CURRENT_CALLS);
        for c in &f.calls[from..] {
            let mut line = c.label.clone();
            if c.failed {
                line.push_str(" (failed)");
            }
            sec.items.push(Item::new(f.masker.apply(&line)));
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Fitting
// ---------------------------------------------------------------------------------------------

#[derive(Debug, Clone, Copy)]
enum Step {
    /// Drop items of a section (lowest weight first) down to this many.
    Trim(usize, usize),
    /// Shorten unprotected user turns, longest first, to at most this form.
    Shorten(usize),
    /// Shorten the protected user turns too.
    ShortenProtected(usize),
    StripExtras(usize),
    DropLead(usize),
}

/// The order in which the summary gives way when it is over budget. User turns are shortened
/// before they are dropped, and dropped late; the first request and the latest turns are cut
/// only at the very end; the withdrawn section never is.
const LADDER: &[Step] = &[
    Step::Trim(STOPPED, 2),
    Step::Trim(COMMANDS, 10),
    Step::Trim(FILES, 25),
    Step::Trim(DECISIONS, 30),
    Step::Shorten(1),
    Step::StripExtras(ERRORS),
    Step::Trim(COMMANDS, 3),
    Step::Trim(FILES, 12),
    Step::Trim(DECISIONS, 15),
    Step::Trim(ERRORS, 12),
    Step::Shorten(2),
    Step::Trim(STOPPED, 0),
    Step::Trim(COMMANDS, 0),
    Step::Trim(PENDING, 2),
    Step::Trim(DECISIONS, 6),
    Step::Trim(FILES, 5),
    Step::Trim(ERRORS, 5),
    Step::Trim(USER, 0),
    Step::DropLead(STOPPED),
    Step::Trim(PENDING, 0),
    Step::Trim(DECISIONS, 0),
    Step::Trim(FILES, 0),
    Step::Trim(ERRORS, 2),
    Step::ShortenProtected(1),
    Step::ShortenProtected(2),
];

pub(super) fn fit(framing: &str, prior: Option<&str>, sections: &mut [Section], target: usize) {
    let mut total = count_text(&render(framing, prior, sections));
    for step in LADDER {
        if total <= target {
            return;
        }
        match *step {
            Step::Trim(k, keep) => {
                for idx in sections[k].cut_order() {
                    if total <= target || sections[k].kept() <= keep {
                        break;
                    }
                    let it = &mut sections[k].items[idx];
                    total = total.saturating_sub(it.tokens());
                    it.level = it.forms.len();
                }
            }
            Step::Shorten(level) => shorten(&mut sections[USER], level, false, &mut total, target),
            Step::ShortenProtected(level) => {
                shorten(&mut sections[USER], level, true, &mut total, target)
            }
            Step::StripExtras(k) => {
                for it in sections[k].items.iter_mut().rev() {
                    if total <= target {
                        break;
                    }
                    if let Some(e) = it.extra.take() {
                        total = total.saturating_sub(count_text(&e) + 2);
                    }
                }
            }
            Step::DropLead(k) => sections[k].lead.clear(),
        }
        // Re-sync the estimate with the real count.
        total = count_text(&render(framing, prior, sections));
    }
}

/// Shorten user turns (protected ones only when `protected`), longest first, to at most form
/// `level`, until the estimate is within `target`.
fn shorten(sec: &mut Section, level: usize, protected: bool, total: &mut usize, target: usize) {
    loop {
        if *total <= target {
            return;
        }
        let pick = sec
            .items
            .iter()
            .enumerate()
            .filter(|(_, it)| {
                it.kept() && it.protected == protected && it.level < level.min(it.forms.len() - 1)
            })
            .max_by_key(|(k, it)| (count_text(it.text()), std::cmp::Reverse(*k)))
            .map(|(k, _)| k);
        let Some(k) = pick else { return };
        let it = &mut sec.items[k];
        let before = it.tokens();
        it.level += 1;
        *total = total.saturating_sub(before.saturating_sub(it.tokens()));
    }
}

/// The numbers of the user turns an earlier agent-db summary body quoted (or pointed at as the
/// latest instruction) in its user section. A re-summary of the same originals numbers them
/// alike: the originals always start at the conversation's first message.
pub(super) fn quoted_turns(earlier: &str) -> Vec<usize> {
    let user = format!("## {}", USER_TITLE);
    earlier
        .lines()
        .skip_while(|l| l.trim_end() != user)
        .skip(1)
        .take_while(|l| !l.starts_with("## "))
        .filter_map(|l| l.split_once(". ")?.0.parse().ok())
        .collect()
}

/// The line closing a carried-forward summary, so its sections are not mistaken for the new
/// ones.
pub(super) const PRIOR_END: &str =
    "(end of the earlier summary; the sections below cover the messages after it)";

pub(super) fn render(framing: &str, prior: Option<&str>, sections: &[Section]) -> String {
    let mut out = String::with_capacity(4096);
    out.push_str(framing);
    out.push('\n');
    if let Some(p) = prior.filter(|p| !p.trim().is_empty()) {
        out.push_str("## Earlier summary (carried forward)\n");
        out.push_str(p);
        out.push('\n');
        out.push_str(PRIOR_END);
        out.push_str("\n\n");
    }
    for s in sections {
        s.render(&mut out);
    }
    while out.ends_with('\n') {
        out.pop();
    }
    out.push('\n');
    out
}

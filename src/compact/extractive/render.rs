//! The summary's sections: building them from the gathered facts (each capped), fitting them to
//! the token budget by cutting the least important items first, and rendering the text.

use std::collections::HashMap;

use crate::tokens::count_text;

use super::text::{quote, quote_raw};
use super::{Facts, FileEntry, SENTENCE_CHARS};

const FIRST_REQUEST_CHARS: usize = 600;
const REQUEST_CHARS: usize = 300;
const RESOLUTION_CHARS: usize = 200;
const CURRENT_TEXT_CHARS: usize = 600;

// Initial caps per section (before the token budget is applied).
const CAP_LATER_REQUESTS: usize = 10;
const CAP_RULES: usize = 40;
pub(super) const CAP_FILES: usize = 40;
pub(super) const CAP_COMMANDS: usize = 20;
const CAP_ERRORS: usize = 25;
const CAP_DECISIONS: usize = 30;
const CAP_PENDING: usize = 12;
const CAP_CURRENT_CALLS: usize = 5;

/// Where a section loses items first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Cut {
    First,
    Middle,
    Last,
}

struct Item {
    text: String,
    /// A second line (an error's resolution), dropped before the item itself.
    extra: Option<String>,
    /// Lower weights are cut first.
    weight: u8,
    kept: bool,
}

impl Item {
    fn new(text: String) -> Item {
        Item {
            text,
            extra: None,
            weight: 0,
            kept: true,
        }
    }
    fn tokens(&self) -> usize {
        count_text(&self.text) + 2 + self.extra.as_deref().map_or(0, |e| count_text(e) + 2)
    }
}

pub(super) struct Section {
    title: &'static str,
    /// Lines always rendered first (the first request; the current text, droppable).
    lead: Vec<String>,
    /// A line introducing the items.
    items_heading: Option<&'static str>,
    items: Vec<Item>,
    noun: &'static str,
    cut: Cut,
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
        }
    }

    fn kept(&self) -> usize {
        self.items.iter().filter(|i| i.kept).count()
    }

    /// Nothing to render: no lead and no kept item (a fully cut list is left out, not
    /// announced).
    fn is_empty(&self) -> bool {
        self.lead.is_empty() && self.kept() == 0
    }

    /// Drop one item by weight, then position; returns the tokens saved (estimate).
    fn cut_one(&mut self) -> usize {
        let Some(w) = self.items.iter().filter(|i| i.kept).map(|i| i.weight).min() else {
            return 0;
        };
        let candidates: Vec<usize> = (0..self.items.len())
            .filter(|&k| self.items[k].kept && self.items[k].weight == w)
            .collect();
        let pick = match self.cut {
            Cut::First => candidates[0],
            Cut::Last => candidates[candidates.len() - 1],
            Cut::Middle => candidates[candidates.len() / 2],
        };
        self.items[pick].kept = false;
        self.items[pick].tokens()
    }

    /// Cut down to `keep` items in one pass (the same order as repeated [`Section::cut_one`]
    /// would use: lowest weight first, then by the section's position rule).
    fn trim_to(&mut self, keep: usize) {
        let mut excess = self.kept().saturating_sub(keep);
        let mut weights: Vec<u8> = self
            .items
            .iter()
            .filter(|i| i.kept)
            .map(|i| i.weight)
            .collect();
        weights.sort_unstable();
        weights.dedup();
        for w in weights {
            if excess == 0 {
                break;
            }
            let cands: Vec<usize> = (0..self.items.len())
                .filter(|&k| self.items[k].kept && self.items[k].weight == w)
                .collect();
            let r = excess.min(cands.len());
            let start = match self.cut {
                Cut::First => 0,
                Cut::Last => cands.len() - r,
                Cut::Middle => (cands.len() - r) / 2,
            };
            for &k in &cands[start..start + r] {
                self.items[k].kept = false;
            }
            excess -= r;
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
        if self.kept() > 0 {
            if let Some(h) = self.items_heading {
                out.push_str(h);
                out.push('\n');
            }
            let mut omitted = 0usize;
            for it in &self.items {
                if !it.kept {
                    omitted += 1;
                    continue;
                }
                if omitted > 0 {
                    out.push_str(&format!("- … {omitted} more {} omitted\n", self.noun));
                    omitted = 0;
                }
                out.push_str("- ");
                out.push_str(&it.text);
                out.push('\n');
                if let Some(e) = &it.extra {
                    out.push_str("  ");
                    out.push_str(e);
                    out.push('\n');
                }
            }
            if omitted > 0 {
                out.push_str(&format!("- … {omitted} more {} omitted\n", self.noun));
            }
        }
        out.push('\n');
    }
}

// Section order (also the rendering order).
const REQUESTS: usize = 0;
const RULES: usize = 1;
const FILES: usize = 2;
const COMMANDS: usize = 3;
const ERRORS: usize = 4;
const DECISIONS: usize = 5;
const PENDING: usize = 6;
const CURRENT: usize = 7;

pub(super) fn build_sections(f: &Facts) -> Vec<Section> {
    let mut s = vec![
        Section::new("User requests and intent", "instructions", Cut::Middle),
        Section::new(
            "Standing instructions and constraints",
            "instructions",
            Cut::Middle,
        ),
        Section::new("Files touched", "files", Cut::Last),
        Section::new("Commands run", "commands", Cut::First),
        Section::new("Errors and how they were resolved", "errors", Cut::Middle),
        Section::new("Decisions and findings", "findings", Cut::Middle),
        Section::new("Pending tasks", "tasks", Cut::First),
        Section::new("Current work", "tool calls", Cut::First),
    ];

    // Requests: the first in full (up to 600 chars), the later ones by their beginning.
    if let Some(first) = f.requests.first() {
        s[REQUESTS].lead.push(format!(
            "First request: {}",
            quote(first, FIRST_REQUEST_CHARS)
        ));
        s[REQUESTS].items_heading = Some("Later instructions, oldest first:");
        for r in &f.requests[1..] {
            s[REQUESTS].items.push(Item::new(quote(r, REQUEST_CHARS)));
        }
        // The latest ones matter most.
        let n = s[REQUESTS].items.len();
        for (k, it) in s[REQUESTS].items.iter_mut().enumerate() {
            if k + 3 >= n {
                it.weight = 1;
            }
        }
        s[REQUESTS].trim_to(CAP_LATER_REQUESTS);
    }

    for r in &f.rules {
        s[RULES].items.push(Item::new(quote(r, SENTENCE_CHARS)));
    }
    s[RULES].trim_to(CAP_RULES);

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
        let modified = actions
            .iter()
            .any(|(a, _)| matches!(a.as_str(), "edited" | "written" | "created" | "deleted"));
        let mut it = Item::new(format!("{} ({desc})", e.path));
        it.weight = u8::from(modified);
        s[FILES].items.push(it);
    }
    s[FILES].trim_to(CAP_FILES);

    // Commands: de-duplicated by text, ordered by their last run.
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
        if r.failed {
            line.push_str(" (failed)");
        }
        s[COMMANDS].items.push(Item::new(line));
    }
    s[COMMANDS].trim_to(CAP_COMMANDS);

    for e in &f.errors {
        let mut line = format!("{} failed: {}", e.label, quote_raw(&e.line));
        if e.count > 1 {
            line.push_str(&format!(" ({}×)", e.count));
        }
        let mut it = Item::new(line);
        it.extra = e
            .resolution
            .as_ref()
            .map(|r| format!("then: {}", quote(r, RESOLUTION_CHARS)));
        s[ERRORS].items.push(it);
    }
    s[ERRORS].trim_to(CAP_ERRORS);

    for d in &f.decisions {
        let mut it = Item::new(quote(&d.text, SENTENCE_CHARS));
        it.weight = u8::from(d.strong);
        s[DECISIONS].items.push(it);
    }
    s[DECISIONS].trim_to(CAP_DECISIONS);

    if let Some(l) = f.latest_request {
        if l == 0 {
            s[PENDING].lead.push(
                "The first request above is also the latest user instruction; it is repeated verbatim right after this summary."
                    .to_string(),
            );
        } else {
            s[PENDING].lead.push(format!(
                "Latest user instruction (repeated verbatim right after this summary): {}",
                quote(&f.requests[l], REQUEST_CHARS)
            ));
        }
    }
    for p in &f.pending {
        s[PENDING].items.push(Item::new(p.clone()));
    }
    s[PENDING].trim_to(CAP_PENDING);

    if let Some(t) = &f.last_assistant_text {
        s[CURRENT].lead.push(format!(
            "Last assistant message: {}",
            quote(t, CURRENT_TEXT_CHARS)
        ));
    }
    if !f.calls.is_empty() {
        s[CURRENT].items_heading = Some("Last tool calls:");
        let from = f.calls.len().saturating_sub(CAP_CURRENT_CALLS);
        for c in &f.calls[from..] {
            let mut line = c.label.clone();
            if c.failed {
                line.push_str(" (failed)");
            }
            s[CURRENT].items.push(Item::new(line));
        }
    }
    s
}

fn action_rank(a: &str) -> usize {
    match a {
        "created" => 0,
        "written" => 1,
        "edited" => 2,
        "deleted" => 3,
        "read" => 4,
        "searched" => 5,
        _ => 6,
    }
}

#[derive(Debug, Clone, Copy)]
enum Step {
    Trim(usize, usize),
    StripExtras(usize),
    DropLead(usize),
}

/// The order in which sections give way when the summary is over budget. The first request is
/// never cut; standing instructions and error lines go last.
const LADDER: &[Step] = &[
    Step::Trim(CURRENT, 3),
    Step::Trim(COMMANDS, 8),
    Step::Trim(FILES, 15),
    Step::Trim(PENDING, 4),
    Step::Trim(DECISIONS, 10),
    Step::Trim(REQUESTS, 4),
    Step::Trim(COMMANDS, 0),
    Step::Trim(CURRENT, 0),
    Step::Trim(FILES, 5),
    Step::Trim(DECISIONS, 4),
    Step::Trim(PENDING, 1),
    Step::Trim(REQUESTS, 1),
    Step::StripExtras(ERRORS),
    Step::DropLead(CURRENT),
    Step::Trim(FILES, 0),
    Step::Trim(DECISIONS, 0),
    Step::Trim(PENDING, 0),
    Step::Trim(REQUESTS, 0),
    Step::Trim(ERRORS, 8),
    Step::Trim(RULES, 12),
    Step::Trim(ERRORS, 3),
    Step::Trim(RULES, 5),
];

pub(super) fn fit(framing: &str, prior: Option<&str>, sections: &mut [Section], target: usize) {
    let mut total = count_text(&render(framing, prior, sections));
    for step in LADDER {
        if total <= target {
            return;
        }
        match *step {
            Step::Trim(k, keep) => {
                while total > target && sections[k].kept() > keep {
                    let saved = sections[k].cut_one();
                    total = total.saturating_sub(saved);
                }
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
            Step::DropLead(k) => {
                sections[k].lead.clear();
            }
        }
        // Re-sync the estimate with the real count.
        total = count_text(&render(framing, prior, sections));
    }
}

/// The line closing a carried-forward summary, so its sections are not mistaken for the new
/// ones.
pub(super) const PRIOR_END: &str =
    "(end of the earlier summary; the sections below cover the messages after it)";

pub(super) fn render(framing: &str, prior: Option<&str>, sections: &[Section]) -> String {
    let mut out = String::with_capacity(4096);
    out.push_str(framing);
    out.push('\n');
    if let Some(p) = prior {
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

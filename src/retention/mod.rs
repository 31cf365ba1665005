//! The retention score: which artifacts a continuation depends on survive a compaction.
//!
//! [`extract`] reads the summarized span (the head) and lists its artifacts by [`Kind`]; [`score`]
//! counts how many of them still appear in the result (the summary plus the kept tail, or the
//! pruned head plus the tail). The rules are deliberately simple and independent of the
//! extractive summarizer (no code or word list is shared), so the score can judge that
//! summarizer as well as a model's summary or a hook's.
//!
//! What is extracted (from text blocks and tool-call inputs, read as their string values; errors
//! also from tool results):
//! - `path`: a word with a `/` between two name characters, or a `name.ext` file name whose
//!   extension is 1–5 letters or digits after a letter (URLs excluded);
//!   A path a file tool's path key names is noted `modified` (a tool that edits, writes,
//!   creates, moves or deletes) or `read` (one that reads, views, lists or searches);
//! - `command`: the `command`/`cmd` input of a shell tool call (`bash`, `shell`, `exec`, …),
//!   its first line, with its last run's outcome (`ok`/`failed`: an error result or a non-zero
//!   exit code) and exit code;
//! - `error`: the first line of a failed tool result, and any line that starts with `error`,
//!   `fatal`, `panicked`, `failed` or `traceback` (case-insensitive), at most 160 characters;
//!   one of a failed result names its call and is `open` until the same call succeeds later;
//! - `identifier`: a word the user wrote with `_`, `::`, an inner capital or a digit after a
//!   letter (`max_retries`, `HttpClient`, `v2`), `host:port`, and numbers that name something:
//!   versions and addresses (`1.2.3`), ports (`:8080`, `8080:80`), numbers assigned to an
//!   identifier (`max_retries = 250`) or quoted (`` `250` ``); a bare number (`Task 103`) is not
//!   one;
//! - `url`: `http://` or `https://` up to the next space;
//! - `rule`: a sentence of a user instruction with `always`, `never`, `don't`, `do not`, `must`,
//!   `make sure`, `avoid` or `prefer`;
//! - `todo`: the open items (not completed, done or cancelled) of a todo tool call (`todo_write`,
//!   `todowrite`, `create_todos`, …: a `todos`/`items`/`tasks` list, a `description` or
//!   `descriptions`, or a `content` checklist whose `- [ ]` lines are open), where a later call
//!   or a todo tool's result listing `all_todos`/`todos` closes or replaces earlier items; user
//!   lines starting with `TODO`; and the conversation's open to-dos that the store keeps outside
//!   the history ([`Artifacts::add_native_todos`]);
//! - `latest`: the latest user instruction in the span.
//!
//! How a match is decided: the result's text is its text blocks, tool-call names and inputs and
//! tool results, with every run of whitespace made one space. A `path`, `command`, `url` or
//! `identifier` matches when it occurs verbatim (whitespace-normalized, case-sensitive) in that
//! text. An `error`, `rule`, `todo` or `latest` matches when at least 80% of its words (letters
//! and digits, lowercased, 3 characters or more) occur among the result's words.

use std::collections::{BTreeMap, HashSet};

use serde::{Deserialize, Serialize};

use crate::message::{Block, Message, Role};

mod strings;

/// What an artifact is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    Path,
    Command,
    Error,
    Identifier,
    Url,
    Rule,
    Todo,
    Latest,
}

impl Kind {
    pub const ALL: [Kind; 8] = [
        Kind::Path,
        Kind::Command,
        Kind::Error,
        Kind::Identifier,
        Kind::Url,
        Kind::Rule,
        Kind::Todo,
        Kind::Latest,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Kind::Path => "path",
            Kind::Command => "command",
            Kind::Error => "error",
            Kind::Identifier => "identifier",
            Kind::Url => "url",
            Kind::Rule => "rule",
            Kind::Todo => "todo",
            Kind::Latest => "latest",
        }
    }

    /// The kind in words, plural (`file paths`), for notes a user reads.
    pub fn words(self) -> &'static str {
        match self {
            Kind::Path => "file paths",
            Kind::Command => "commands",
            Kind::Error => "error messages",
            Kind::Identifier => "identifiers",
            Kind::Url => "URLs",
            Kind::Rule => "rules the user gave",
            Kind::Todo => "open to-dos",
            Kind::Latest => "latest instruction",
        }
    }

    /// Whether it matches verbatim (else by words).
    fn verbatim(self) -> bool {
        matches!(
            self,
            Kind::Path | Kind::Command | Kind::Url | Kind::Identifier
        )
    }
}

/// One artifact of the summarized span.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Artifact {
    pub kind: Kind,
    pub text: String,
    /// For a command: `ok` or `failed`, from its tool result, when it has one. For a path:
    /// `modified` or `read` when a tool that edits or reads files named it. For an error of a
    /// failed tool result: `open` (the same call never succeeded later in the span) or
    /// `resolved`.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub status: Option<String>,
    /// For a command: the exit code its last result reported, when it reported one.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub exit: Option<i64>,
    /// For an error of a failed tool result: the call it came from (the command of a shell
    /// call, else the tool's name and input).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub from: Option<String>,
}

impl Artifact {
    /// An artifact with no status, exit code or origin.
    pub fn new(kind: Kind, text: impl Into<String>) -> Artifact {
        Artifact {
            kind,
            text: text.into(),
            status: None,
            exit: None,
            from: None,
        }
    }
}

/// The artifacts of a span, deduplicated, in order of first appearance.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Artifacts(pub Vec<Artifact>);

impl Artifacts {
    /// Add the conversation's open to-dos as the store keeps them outside the history (the
    /// agent's own to-do table), as `todo` artifacts, after those of the span; a text the span
    /// already lists as a to-do is not added twice.
    pub fn add_native_todos(&mut self, todos: &[String]) {
        for t in todos {
            let text = clip(t);
            if text.is_empty()
                || self
                    .0
                    .iter()
                    .any(|a| a.kind == Kind::Todo && a.text == text)
            {
                continue;
            }
            self.0.push(Artifact::new(Kind::Todo, text));
        }
    }
}

/// Whether a to-do status (of a todo tool or a store's to-do table) is still open: anything but
/// completed, done or cancelled.
pub fn todo_is_open(status: &str) -> bool {
    !matches!(
        status.trim().to_ascii_lowercase().as_str(),
        "completed" | "complete" | "done" | "cancelled" | "canceled"
    )
}

/// Kept and total artifacts of one kind.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Count {
    pub kept: usize,
    pub total: usize,
}

/// The retention of one compaction.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Retention {
    /// Kept artifacts / all artifacts (1.0 when the span had none).
    pub score: f64,
    /// Per kind, only the kinds the span had.
    pub by_kind: BTreeMap<Kind, Count>,
    /// The artifacts the result lost (at most [`MAX_LOST`]).
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub lost: Vec<Artifact>,
    /// For a summary with an artifact ledger ([`ledger`]): the score of the result without the
    /// ledger (the model's own text and the kept tail).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub model_score: Option<f64>,
    /// For a summary with an artifact ledger: what the ledger adds (`score - model_score`).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub ledger_score: Option<f64>,
}

/// How many lost artifacts a [`Retention`] lists.
pub const MAX_LOST: usize = 20;

impl Retention {
    /// The score of one kind, if the span had any.
    pub fn kind_score(&self, k: Kind) -> Option<f64> {
        self.by_kind
            .get(&k)
            .filter(|c| c.total > 0)
            .map(|c| c.kept as f64 / c.total as f64)
    }

    /// The model's own share and the ledger's, for tables: `model's text 40% + ledger 52%`;
    /// `None` when the result has no ledger.
    pub fn split(&self) -> Option<String> {
        let (m, l) = (self.model_score?, self.ledger_score?);
        Some(format!(
            "model's text {:.0}% + ledger {:.0}%",
            m * 100.0,
            l * 100.0
        ))
    }

    /// Short form for tables: `92% (path 10/10, rule 0/1)`: the kinds below 100% only.
    pub fn brief(&self) -> String {
        let pct = format!("{:.0}%", self.score * 100.0);
        match self.partial_kinds() {
            Some(low) => format!("{pct} ({low})"),
            None => pct,
        }
    }

    /// The kinds not kept in full in plain words, as a share of each (`25% of the file paths
    /// and 0% of the error messages`); `None` when every artifact was kept.
    pub fn partial_words(&self) -> Option<String> {
        let low: Vec<String> = self
            .by_kind
            .iter()
            .filter(|(_, c)| c.kept < c.total)
            .map(|(k, c)| {
                format!(
                    "{:.0}% of the {}",
                    100.0 * c.kept as f64 / c.total as f64,
                    k.words()
                )
            })
            .collect();
        match low.len() {
            0 => None,
            1 => Some(low[0].clone()),
            n => Some(format!("{} and {}", low[..n - 1].join(", "), low[n - 1])),
        }
    }

    /// The kinds not kept in full, kept/total each (`path 3/12, error 0/2`); `None` when every
    /// artifact was kept.
    pub fn partial_kinds(&self) -> Option<String> {
        let low: Vec<String> = self
            .by_kind
            .iter()
            .filter(|(_, c)| c.kept < c.total)
            .map(|(k, c)| format!("{} {}/{}", k.name(), c.kept, c.total))
            .collect();
        (!low.is_empty()).then(|| low.join(", "))
    }
}

/// The retention of `result` (what the agent will load: the summary plus the kept tail, or the
/// pruned head plus the tail) with respect to `summarized` (the span the compaction replaced).
pub fn score(summarized: &[Message], result: &[Message]) -> Retention {
    score_artifacts(&extract(summarized), &Corpus::of_messages(result))
}

/// [`score`] with the artifacts already extracted and the result as a [`Corpus`].
pub fn score_artifacts(arts: &Artifacts, result: &Corpus) -> Retention {
    score_found(arts, Matcher::new(&arts.0).found_in(result))
}

/// The retention of `arts` given which of them were found (in order).
fn score_found(arts: &Artifacts, found: Vec<bool>) -> Retention {
    let mut r = Retention::default();
    let (mut kept, mut total) = (0usize, 0usize);
    for (a, found) in arts.0.iter().zip(found) {
        let c = r.by_kind.entry(a.kind).or_default();
        c.total += 1;
        total += 1;
        if found {
            c.kept += 1;
            kept += 1;
        } else if r.lost.len() < MAX_LOST {
            r.lost.push(a.clone());
        }
    }
    r.score = if total == 0 {
        1.0
    } else {
        kept as f64 / total as f64
    };
    r
}

/// The text a result is matched against.
pub struct Corpus {
    text: String,
}

impl Corpus {
    /// From decoded messages.
    pub fn of_messages(messages: &[Message]) -> Corpus {
        Corpus::of_messages_and(messages, "")
    }

    /// From decoded messages followed by `more` (one normalization of both).
    pub fn of_messages_and(messages: &[Message], more: &str) -> Corpus {
        let mut text = String::new();
        for m in messages {
            message_pieces_into(m, &mut text);
        }
        text.push_str(more);
        Corpus::of_text(&text)
    }

    /// From any text (a store's raw JSON is read as its string values).
    pub fn of_text(text: &str) -> Corpus {
        Corpus { text: squash(text) }
    }

    /// From a serialized history (a JSON array or JSON lines): its string values.
    pub fn of_json(raw: &str) -> Corpus {
        Corpus::of_text(&json_text(raw))
    }

    /// The normalized text.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// Whether the artifact appears (see the module docs for the rule). The rule as written:
    /// [`Corpus::contains_each`] answers the same for many artifacts at once.
    pub fn contains(&self, a: &Artifact) -> bool {
        match match_rule(a) {
            Match::Verbatim(p) => self.text.contains(&p),
            Match::Words(ws) => {
                let all = word_set(&self.text);
                enough_words(ws.iter().filter(|w| all.contains(*w)).count(), ws.len())
            }
        }
    }

    /// [`Corpus::contains`] of each of `arts`, in order: the verbatim ones found in one pass
    /// over the text (Aho-Corasick over all of them) instead of one search each, the words of
    /// the others looked up in one pass over the text's words ([`Matcher`]).
    pub fn contains_each<'a>(&self, arts: impl IntoIterator<Item = &'a Artifact>) -> Vec<bool> {
        Matcher::new(arts).found_in(self)
    }

    /// The words of `wanted` (lowercase, of at least 3 characters) that are among the text's
    /// words ([`word_set`]), found without building that set: each of the text's words is
    /// looked up in `wanted`, and the pass stops once all are found.
    fn words_among<'w>(
        &self,
        wanted: &rustc_hash::FxHashSet<&'w str>,
    ) -> rustc_hash::FxHashSet<&'w str> {
        let mut found = rustc_hash::FxHashSet::default();
        words_into(&self.text, wanted, &shapes_of(wanted), &mut found);
        found
    }
}

/// The shapes of the ASCII words of `wanted`: an ASCII word lowercases only into a wanted word
/// of its shape (an ASCII one).
fn shapes_of(wanted: &rustc_hash::FxHashSet<&str>) -> crate::util::Shapes {
    let mut shapes = crate::util::Shapes::new();
    for w in wanted.iter().filter(|w| w.is_ascii()) {
        shapes.insert(w.as_bytes());
    }
    shapes
}

/// Add to `found` the words of `wanted` among the words of `text` ([`Corpus::words_among`]);
/// stops once all are found.
fn words_into<'w>(
    text: &str,
    wanted: &rustc_hash::FxHashSet<&'w str>,
    shapes: &crate::util::Shapes,
    found: &mut rustc_hash::FxHashSet<&'w str>,
) {
    if found.len() == wanted.len() {
        return;
    }
    let mut buf = String::new();
    for w in alnum_words(text) {
        let hit = if w.is_ascii() {
            if w.len() < 3 || !shapes.may_hold(w.as_bytes()) {
                continue;
            }
            buf.clear();
            buf.push_str(w);
            buf.make_ascii_lowercase();
            wanted.get(buf.as_str())
        } else if w.chars().count() >= 3 {
            wanted.get(w.to_lowercase().as_str())
        } else {
            continue;
        };
        if let Some(&k) = hit {
            found.insert(k);
            if found.len() == wanted.len() {
                return;
            }
        }
    }
}

/// The artifacts' match rules, prepared once for any number of texts ([`score_history`] asks
/// the same of a history with and without its ledger).
struct Matcher {
    /// How many artifacts, and those whose pattern is empty (found everywhere).
    n: usize,
    empty: Vec<usize>,
    /// Distinct non-empty patterns, and the artifacts waiting on each.
    patterns: Vec<String>,
    waiting: Vec<Vec<usize>>,
    /// The artifacts matched by their words, and those words.
    by_words: Vec<(usize, Vec<String>)>,
    /// The automaton of `patterns` (`None`: none, or too many for it).
    ac: Option<aho_corasick::AhoCorasick>,
    /// The longest pattern, in bytes.
    longest: usize,
}

impl Matcher {
    fn new<'a>(arts: impl IntoIterator<Item = &'a Artifact>) -> Matcher {
        let mut m = Matcher {
            n: 0,
            empty: Vec::new(),
            patterns: Vec::new(),
            waiting: Vec::new(),
            by_words: Vec::new(),
            ac: None,
            longest: 0,
        };
        let mut index: rustc_hash::FxHashMap<String, usize> = Default::default();
        for (i, a) in arts.into_iter().enumerate() {
            m.n += 1;
            match match_rule(a) {
                Match::Verbatim(p) if p.is_empty() => m.empty.push(i),
                Match::Verbatim(p) => {
                    let k = *index.entry(p).or_insert_with_key(|p| {
                        m.patterns.push(p.clone());
                        m.waiting.push(Vec::new());
                        m.patterns.len() - 1
                    });
                    m.waiting[k].push(i);
                }
                Match::Words(ws) => m.by_words.push((i, ws)),
            }
        }
        m.longest = m.patterns.iter().map(String::len).max().unwrap_or(0);
        if !m.patterns.is_empty() {
            // A contiguous NFA: a DFA searches faster but costs more to build than one search
            // over a result saves. No prefilter: over a history the candidates it finds are so
            // frequent that it costs more than it skips (1.4% fewer instructions over an LLM
            // batch without it).
            m.ac = aho_corasick::AhoCorasick::builder()
                .kind(Some(aho_corasick::AhoCorasickKind::ContiguousNFA))
                .prefilter(false)
                .build(&m.patterns)
                .ok();
        }
        m
    }

    /// [`Corpus::contains`] of each artifact, in order.
    fn found_in(&self, corpus: &Corpus) -> Vec<bool> {
        let mut out = self.words_found(corpus);
        if self.patterns.is_empty() {
            return out;
        }
        let found = match &self.ac {
            Some(ac) => {
                let mut found = vec![false; self.patterns.len()];
                let mut left = self.patterns.len();
                scan(ac, corpus.text.as_bytes(), &mut found, &mut left);
                found
            }
            None => self.each_pattern_in(corpus),
        };
        self.spread(&found, &mut out);
        out
    }

    /// [`Matcher::found_in`] of two texts that share most of their bytes (a history with and
    /// without its ledger), the shared bytes read once. The longest common prefix and then
    /// suffix (never overlapping the prefix in either text) hold the same patterns in both;
    /// an occurrence lying in neither overlaps the middle, so it lies within the middle widened
    /// by the longest pattern less one byte on each side, which is searched in each text. The
    /// words are read the same way, the shared ends cut after (before) a character that is no
    /// word character, so that no word runs across a cut.
    fn found_in_both(&self, a: &Corpus, b: &Corpus) -> (Vec<bool>, Vec<bool>) {
        let (x, y) = (a.text.as_str(), b.text.as_str());
        let (pre, suf) = shared_ends(x.as_bytes(), y.as_bytes());
        let (mut out_a, mut out_b) = (self.empties(), self.empties());
        if !self.by_words.is_empty() {
            let wanted = self.wanted_words();
            let shapes = shapes_of(&wanted);
            let head = word_cut_before(x, pre);
            let tail = word_cut_after(x, x.len() - suf);
            let mut shared = rustc_hash::FxHashSet::default();
            words_into(&x[..head], &wanted, &shapes, &mut shared);
            words_into(&x[tail..], &wanted, &shapes, &mut shared);
            let mut fa = shared.clone();
            words_into(&x[head..tail], &wanted, &shapes, &mut fa);
            let mut fb = shared;
            words_into(
                &y[head..tail + y.len() - x.len()],
                &wanted,
                &shapes,
                &mut fb,
            );
            self.words_enough(&fa, &mut out_a);
            self.words_enough(&fb, &mut out_b);
        }
        if self.patterns.is_empty() {
            return (out_a, out_b);
        }
        let (found_a, found_b) = match &self.ac {
            Some(ac) => {
                let (x, y) = (x.as_bytes(), y.as_bytes());
                let mut shared = vec![false; self.patterns.len()];
                let mut left = self.patterns.len();
                scan(ac, &x[..pre], &mut shared, &mut left);
                scan(ac, &x[x.len() - suf..], &mut shared, &mut left);
                let reach = self.longest.saturating_sub(1);
                let middle = |t: &[u8]| {
                    let lo = pre.saturating_sub(reach);
                    let hi = (t.len() - suf).saturating_add(reach).min(t.len());
                    (lo, hi)
                };
                let (mut fa, mut la) = (shared.clone(), left);
                let (lo, hi) = middle(x);
                scan(ac, &x[lo..hi], &mut fa, &mut la);
                let (mut fb, mut lb) = (shared, left);
                let (lo, hi) = middle(y);
                scan(ac, &y[lo..hi], &mut fb, &mut lb);
                (fa, fb)
            }
            None => (self.each_pattern_in(a), self.each_pattern_in(b)),
        };
        self.spread(&found_a, &mut out_a);
        self.spread(&found_b, &mut out_b);
        (out_a, out_b)
    }

    /// `true` for the artifacts whose pattern is empty (found everywhere), else `false`.
    fn empties(&self) -> Vec<bool> {
        let mut out = vec![false; self.n];
        for &i in &self.empty {
            out[i] = true;
        }
        out
    }

    /// Every word the word-matched artifacts ask about.
    fn wanted_words(&self) -> rustc_hash::FxHashSet<&str> {
        self.by_words
            .iter()
            .flat_map(|(_, ws)| ws)
            .map(String::as_str)
            .collect()
    }

    /// Each word-matched artifact's answer, given the words found.
    fn words_enough(&self, found: &rustc_hash::FxHashSet<&str>, out: &mut [bool]) {
        for (i, ws) in &self.by_words {
            let hit = ws.iter().filter(|w| found.contains(w.as_str())).count();
            out[*i] = enough_words(hit, ws.len());
        }
    }

    /// The answers of the empty-pattern and word-matched artifacts (the others `false`).
    fn words_found(&self, corpus: &Corpus) -> Vec<bool> {
        let mut out = self.empties();
        if !self.by_words.is_empty() {
            let found = corpus.words_among(&self.wanted_words());
            self.words_enough(&found, &mut out);
        }
        out
    }

    /// Too many patterns for the automaton: one search each.
    fn each_pattern_in(&self, corpus: &Corpus) -> Vec<bool> {
        self.patterns
            .iter()
            .map(|p| corpus.text.contains(p.as_str()))
            .collect()
    }

    /// Each pattern's answer given to the artifacts waiting on it.
    fn spread(&self, found: &[bool], out: &mut [bool]) {
        for (k, is) in self.waiting.iter().enumerate() {
            for &i in is {
                out[i] = found[k];
            }
        }
    }
}

/// Mark in `found` the patterns of `ac` that occur in `hay`, counting `left` down; stops once
/// every pattern is found.
fn scan(ac: &aho_corasick::AhoCorasick, hay: &[u8], found: &mut [bool], left: &mut usize) {
    if *left == 0 {
        return;
    }
    for m in ac.find_overlapping_iter(hay) {
        let k = m.pattern().as_usize();
        if !found[k] {
            found[k] = true;
            *left -= 1;
            if *left == 0 {
                return;
            }
        }
    }
}

/// The lengths of the longest common prefix of `x` and `y`, and of their longest common
/// suffix after it (the two never overlap in either).
fn shared_ends(x: &[u8], y: &[u8]) -> (usize, usize) {
    let pre = x.iter().zip(y).take_while(|(p, q)| p == q).count();
    let suf = x[pre..]
        .iter()
        .rev()
        .zip(y[pre..].iter().rev())
        .take_while(|(p, q)| p == q)
        .count();
    (pre, suf)
}

/// The end of the last character of `s[..at]` (at most `at`, rounded down to a character) that
/// is no word character ([`alnum_words`]); 0 when there is none. No word runs across it.
fn word_cut_before(s: &str, at: usize) -> usize {
    let mut at = at.min(s.len());
    while !s.is_char_boundary(at) {
        at -= 1;
    }
    s[..at]
        .char_indices()
        .rev()
        .find(|(_, c)| !c.is_alphanumeric())
        .map_or(0, |(i, c)| i + c.len_utf8())
}

/// The start of the first character of `s` starting at or after `at` that is no word
/// character; `s.len()` when there is none. No word runs across it.
fn word_cut_after(s: &str, at: usize) -> usize {
    let mut at = at.min(s.len());
    while !s.is_char_boundary(at) {
        at += 1;
    }
    s[at..]
        .char_indices()
        .find(|(_, c)| !c.is_alphanumeric())
        .map_or(s.len(), |(i, _)| at + i)
}

/// The runs of alphanumeric characters of `s`: what `s.split(|c: char| !c.is_alphanumeric())`
/// gives without its empty pieces, read a byte at a time where the text is ASCII.
fn alnum_words(s: &str) -> crate::util::Runs<'_, false> {
    crate::util::runs(s)
}

/// Whether `hit` of an artifact's `of` words are enough for it to count as kept: 80%.
fn enough_words(hit: usize, of: usize) -> bool {
    hit * 5 >= of * 4
}

/// How an artifact is matched (see the module docs).
enum Match {
    /// Its whitespace-normalized text occurs in the result's.
    Verbatim(String),
    /// Most of its words (never empty) are among the result's.
    Words(Vec<String>),
}

fn match_rule(a: &Artifact) -> Match {
    if a.kind.verbatim() {
        return Match::Verbatim(squash(&a.text));
    }
    let ws: Vec<String> = words(&a.text).collect();
    if ws.is_empty() {
        return Match::Verbatim(squash(&a.text));
    }
    Match::Words(ws)
}

/// Every run of whitespace made one space, none at either end.
fn squash(s: &str) -> String {
    // `s.split_whitespace()`, read a byte at a time where the text is ASCII.
    const SPACE: [bool; 128] = {
        let mut t = [false; 128];
        t[b'\t' as usize] = true;
        t[b'\n' as usize] = true;
        t[0x0B] = true;
        t[0x0C] = true;
        t[b'\r' as usize] = true;
        t[b' ' as usize] = true;
        t
    };
    let bytes = s.as_bytes();
    // Whether the character at `i` is whitespace, and its length.
    let space_at = |i: usize| -> (bool, usize) {
        match bytes[i] {
            b if b < 0x80 => (SPACE[b as usize], 1),
            _ => {
                let c = s[i..].chars().next().expect("a character starts here");
                (c.is_whitespace(), c.len_utf8())
            }
        }
    };
    let mut out = String::with_capacity(s.len());
    let mut i = 0;
    loop {
        while i < bytes.len() {
            let (space, n) = space_at(i);
            if !space {
                break;
            }
            i += n;
        }
        if i >= bytes.len() {
            return out;
        }
        if !out.is_empty() {
            out.push(' ');
        }
        // Copied in one piece: words and the single spaces between them, which are already
        // what they become (one copy per span, not per word).
        let start = i;
        loop {
            i = simple_run_end(bytes, i);
            while i < bytes.len() {
                let (space, n) = space_at(i);
                if space {
                    break;
                }
                i += n;
            }
            if bytes.get(i) == Some(&b' ') && i + 1 < bytes.len() && !space_at(i + 1).0 {
                i += 1;
                continue;
            }
            break;
        }
        out.push_str(&s[start..i]);
    }
}

/// How far a span of [`squash`] runs from `i` (a byte inside it, not whitespace) through bytes
/// that stay as they are, eight at a time: ASCII bytes that are not whitespace, and single
/// spaces with such a byte after them. It stops at the first eight bytes that hold anything
/// else (another whitespace or control byte, two spaces, a non-ASCII byte), which the caller
/// reads one at a time.
fn simple_run_end(bytes: &[u8], mut i: usize) -> usize {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = ONES * 0x80;
    const LOW: u64 = ONES * 0x7F;
    while let Some(chunk) = bytes.get(i..i + 8) {
        let x = u64::from_le_bytes(chunk.try_into().expect("eight bytes"));
        if x & HIGH != 0 {
            break;
        }
        // All ASCII from here on, so no sum carries into the next byte. The high bit of a
        // byte is set in `below` when it is below 0x21 (whitespace and control bytes, the
        // space among them), in `spaces` when it is a space.
        let below = !x.wrapping_add(ONES * 0x5F) & HIGH;
        let y = x ^ (ONES * 0x20);
        let spaces = !(((y & LOW) + LOW) | y) & HIGH;
        if below != spaces || spaces & (spaces >> 8) != 0 {
            break;
        }
        // A space in the last byte needs the byte after it: the caller reads it.
        i += if spaces >> 63 == 1 { 7 } else { 8 };
    }
    i
}

/// The distinct [`words`] of `s`, each allocated once (an ASCII word is lowercased in a
/// reused buffer and copied only when new).
fn word_set(s: &str) -> rustc_hash::FxHashSet<String> {
    let mut set = rustc_hash::FxHashSet::default();
    let mut buf = String::new();
    for w in s.split(|c: char| !c.is_alphanumeric()) {
        if w.is_ascii() {
            if w.len() < 3 {
                continue;
            }
            buf.clear();
            buf.push_str(w);
            buf.make_ascii_lowercase();
            if !set.contains(buf.as_str()) {
                set.insert(buf.clone());
            }
        } else if w.chars().count() >= 3 {
            set.insert(w.to_lowercase());
        }
    }
    set
}

fn words(s: &str) -> impl Iterator<Item = String> + '_ {
    s.split(|c: char| !c.is_alphanumeric())
        .filter(|w| w.chars().count() >= 3)
        .map(str::to_lowercase)
}

/// The string values of a serialized history (a JSON array or JSON lines), one a line.
fn json_text(raw: &str) -> String {
    let mut out = String::new();
    // Streamed (no `Value` of the whole history), unless the history is one the stream
    // does not answer for.
    if !strings::strings_into(raw, &mut out) {
        out.clear();
        match serde_json::from_str::<serde_json::Value>(raw) {
            Ok(v) => strings_of(&v, &mut out),
            Err(_) => out.push_str(raw),
        }
    }
    out
}

fn strings_of(v: &serde_json::Value, out: &mut String) {
    match v {
        serde_json::Value::String(s) => {
            // A string that is itself JSON (tool arguments, stored envelopes) is read too.
            let t = s.trim_start();
            if t.starts_with('{') || t.starts_with('[') {
                if let Ok(inner) = serde_json::from_str::<serde_json::Value>(s) {
                    strings_of(&inner, out);
                    return;
                }
            }
            out.push_str(s);
            out.push('\n');
        }
        serde_json::Value::Array(a) => a.iter().for_each(|x| strings_of(x, out)),
        serde_json::Value::Object(o) => o.values().for_each(|x| strings_of(x, out)),
        _ => {}
    }
}

/// The text pieces of a message, each followed by a line break, appended to `out`: text
/// blocks, tool-call names and inputs (as string values), tool results.
fn message_pieces_into(m: &Message, out: &mut String) {
    for b in &m.blocks {
        let piece = match b {
            Block::Text { text } => text,
            Block::ToolCall { name, input, .. } => {
                out.push_str(name);
                out.push('\n');
                out.push_str(&json_strings(input));
                out.push('\n');
                continue;
            }
            Block::ToolResult { content, .. } => content,
            _ => continue,
        };
        out.push_str(piece);
        out.push('\n');
    }
}

fn json_strings(input: &str) -> String {
    strings_or(serde_json::from_str(input).ok().as_ref(), input)
}

/// The string values of `v`, the JSON `input` parsed; `input` itself when it is not JSON.
fn strings_or(v: Option<&serde_json::Value>, input: &str) -> String {
    let mut s = String::new();
    match v {
        Some(v) => strings_of(v, &mut s),
        None => s.push_str(input),
    }
    s
}

const SHELL_TOOLS: &[&str] = &[
    "bash",
    "shell",
    "exec",
    "run",
    "run_command",
    "run_shell_command",
    "execute",
    "execute_command",
    "terminal",
    "developer__shell",
    "command",
];

fn is_shell_tool(name: &str) -> bool {
    let n = name.to_ascii_lowercase();
    SHELL_TOOLS.contains(&n.as_str()) || n.ends_with("__shell") || n.ends_with("_bash")
}

fn is_todo_tool(name: &str) -> bool {
    let n = name.to_ascii_lowercase().replace(['_', '-'], "");
    n.contains("todo")
}

const RULE_MARKERS: &[&str] = &[
    "always ",
    "never ",
    "don't ",
    "do not ",
    "must ",
    "make sure",
    "avoid ",
    "prefer ",
];

/// Markers followed by an exit code in a tool result.
const EXIT_MARKERS: &[&str] = &[
    "exited with status",
    "exited with code",
    "exit code",
    "exit status",
    "exitcode",
    "exit_code",
];

/// Parts of a tool's name (or an editor tool's sub-command) that make it change files.
const MODIFY_WORDS: &[&str] = &[
    "edit", "write", "create", "patch", "replace", "insert", "delete", "remove", "move", "rename",
    "apply", "update",
];

/// Parts of a tool's name (or an editor tool's sub-command) that make it read files.
const READ_WORDS: &[&str] = &[
    "read", "view", "cat", "open", "grep", "search", "glob", "find", "list", "ls", "tree",
];

const ERROR_STARTS: &[&str] = &["error", "fatal", "panicked", "failed", "traceback"];

/// Whether `l.to_lowercase()` starts with one of [`ERROR_STARTS`]: a line whose first character
/// is ASCII and lowercases to none of their first letters is not lowercased at all. Lowercasing
/// maps character by character, each to at least one (the final-sigma rule only picks between
/// two non-ASCII forms), so the first [`ERROR_START_MAX`] characters decide: compared without
/// case when they are ASCII, else only they are lowercased.
fn error_start(l: &str) -> bool {
    let b = l.as_bytes();
    match b.first() {
        Some(c) if c.is_ascii() && !matches!(c.to_ascii_lowercase(), b'e' | b'f' | b'p' | b't') => {
            false
        }
        _ if b.iter().take(ERROR_START_MAX).all(u8::is_ascii) => ERROR_STARTS.iter().any(|s| {
            b.get(..s.len())
                .is_some_and(|p| p.eq_ignore_ascii_case(s.as_bytes()))
        }),
        _ => {
            let end = l
                .char_indices()
                .nth(ERROR_START_MAX)
                .map_or(l.len(), |(i, _)| i);
            let low = l[..end].to_lowercase();
            ERROR_STARTS.iter().any(|s| low.starts_with(s))
        }
    }
}

/// The longest of [`ERROR_STARTS`], in bytes.
const ERROR_START_MAX: usize = 9;

const MAX_LINE: usize = 160;

fn clip(s: &str) -> String {
    let s = s.trim();
    match s.char_indices().nth(MAX_LINE) {
        Some((i, _)) => s[..i].to_string(),
        None => s.to_string(),
    }
}

/// The artifacts of the summarized span (see the module docs for what each kind is).
pub fn extract(span: &[Message]) -> Artifacts {
    let mut x = Extractor::default();
    // Call outcomes (failed, exit code) from their results.
    let results = results_of(span);
    // Each call's key ([`call_key`]) and, in order, the outcome of each call with a result.
    let mut keys: std::collections::HashMap<&str, String> = Default::default();
    let mut last_failed: std::collections::HashMap<String, bool> = Default::default();
    let latest = span.iter().rposition(|m| m.is_user_instruction());
    let mut todo_calls: HashSet<&str> = HashSet::new();
    for (i, m) in span.iter().enumerate() {
        let user = m.is_user_instruction();
        for b in &m.blocks {
            match b {
                Block::Text { text } => {
                    x.paths_urls(text);
                    x.errors(text, false, None);
                    if user && !crate::summary::is_summary_text(text) {
                        x.user_text(text);
                    }
                }
                Block::ToolCall { id, name, input } => {
                    let (key, todo) = x.call(name, input, results.get(id.as_str()));
                    keys.insert(id.as_str(), key);
                    if todo {
                        todo_calls.insert(id.as_str());
                    }
                }
                Block::ToolResult {
                    call_id,
                    content,
                    is_error,
                    ..
                } => {
                    let key = keys.get(call_id.as_str());
                    let failed = results.get(call_id.as_str()).is_some_and(|o| o.0);
                    // Paths in a result (listings, search hits) were seen, not touched.
                    x.errors(
                        content,
                        *is_error,
                        key.filter(|_| failed).map(String::as_str),
                    );
                    if let Some(k) = key {
                        last_failed.insert(k.clone(), failed);
                    }
                    if !*is_error && todo_calls.contains(call_id.as_str()) {
                        x.todo_state(content);
                    }
                }
                _ => {}
            }
        }
        if Some(i) == latest && m.role == Role::User {
            let t = m.text();
            if !t.trim().is_empty() && !crate::summary::is_summary_text(&t) {
                x.push(Kind::Latest, &clip(&t));
            }
        }
    }
    x.finish();
    // An error is open while the call it came from never succeeded after it.
    for a in x.out.iter_mut().filter(|a| a.kind == Kind::Error) {
        if let Some(f) = &a.from {
            let open = last_failed.get(f).copied().unwrap_or(true);
            a.status = Some(if open { "open" } else { "resolved" }.into());
        }
    }
    Artifacts(x.out)
}

/// The outcome of each tool call of `span` with a result, by call id: (failed, exit code). A
/// result fails when it is marked as an error or reports a non-zero exit code.
fn results_of(span: &[Message]) -> std::collections::HashMap<&str, (bool, Option<i64>)> {
    let mut results: std::collections::HashMap<&str, (bool, Option<i64>)> = Default::default();
    for m in span {
        for b in &m.blocks {
            if let Block::ToolResult {
                call_id,
                is_error,
                content,
                ..
            } = b
            {
                let exit = exit_code(content);
                let failed = *is_error || exit.is_some_and(|c| c != 0);
                results.insert(call_id.as_str(), (failed, exit));
            }
        }
    }
    results
}

/// The keys ([`call_key`]) of the calls of `span` whose last result succeeded.
fn succeeded_calls(span: &[Message]) -> HashSet<String> {
    let results = results_of(span);
    let mut last: std::collections::HashMap<String, bool> = Default::default();
    for m in span {
        for b in &m.blocks {
            if let Block::ToolCall { id, name, input } = b {
                let Some(o) = results.get(id.as_str()) else {
                    continue;
                };
                let v = serde_json::from_str::<serde_json::Value>(input).ok();
                let key = shell_command(name, v.as_ref())
                    .unwrap_or_else(|| call_key(name, &strings_or(v.as_ref(), input)));
                last.insert(key, o.0);
            }
        }
    }
    last.into_iter()
        .filter(|(_, f)| !f)
        .map(|(k, _)| k)
        .collect()
}

/// The command of a shell tool call: the first line of its `command`, `cmd` or `script`.
fn shell_command(name: &str, v: Option<&serde_json::Value>) -> Option<String> {
    if !is_shell_tool(name) {
        return None;
    }
    let c = ["command", "cmd", "script"]
        .iter()
        .find_map(|k| v?.get(k).and_then(|c| c.as_str()))?;
    let line = clip(c.lines().next()?);
    (!line.is_empty()).then_some(line)
}

/// What identifies a call that is not a shell command: its tool's name and its input's strings.
fn call_key(name: &str, strings: &str) -> String {
    // Only the start counts (a written file's content can be long).
    let start = match strings.char_indices().nth(4 * MAX_LINE) {
        Some((i, _)) => &strings[..i],
        None => strings,
    };
    clip(&format!("{name} {}", squash(start)))
}

/// The exit code a tool result reports (`exit code: 2`, `exited with status 1`, `"exit_code":
/// 0`), read from its first and last lines.
fn exit_code(content: &str) -> Option<i64> {
    if !content.contains("xit") {
        return None;
    }
    let first: Vec<&str> = content.lines().take(3).collect();
    // The last three lines, unless they are among the first three.
    let last: Vec<&str> = content
        .trim_end()
        .rsplit('\n')
        .take(3)
        .filter(|l| !first.iter().any(|f| std::ptr::eq(*f, *l)))
        .collect();
    for l in first.iter().chain(last.iter().rev()) {
        if !l.contains("xit") {
            continue;
        }
        let low = l.to_ascii_lowercase();
        for m in EXIT_MARKERS {
            let Some(at) = low.find(m) else { continue };
            let rest = low[at + m.len()..].trim_start_matches([' ', ':', '=', '"', '\'']);
            let neg = rest.starts_with('-');
            let digits: String = rest
                .trim_start_matches('-')
                .chars()
                .take_while(char::is_ascii_digit)
                .collect();
            if let Ok(c) = digits.parse::<i64>() {
                return Some(if neg { -c } else { c });
            }
        }
    }
    None
}

/// How a tool call acts on the files its input names: `modified` for a tool that edits,
/// writes, creates, moves or deletes files (or an editor tool's sub-command that does), `read`
/// for one that reads, views, lists or searches; `None` for others (shell commands included).
fn file_action(name: &str, v: Option<&serde_json::Value>) -> Option<&'static str> {
    if is_shell_tool(name) {
        return None;
    }
    let parts: Vec<String> = name
        .to_ascii_lowercase()
        .split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|p| !p.is_empty())
        .map(str::to_string)
        .collect();
    let has = |list: &[&str]| {
        parts.iter().any(|p| {
            list.iter()
                .any(|w| p == w || (w.len() > 3 && p.contains(w)))
        })
    };
    let sub = v
        .and_then(|v| v.get("command"))
        .and_then(|c| c.as_str())
        .map(str::to_ascii_lowercase);
    if let Some(sub) = sub {
        if MODIFY_WORDS.iter().any(|w| sub.contains(w)) {
            return Some("modified");
        }
        if READ_WORDS.contains(&sub.as_str()) {
            return Some("read");
        }
    }
    if has(MODIFY_WORDS) {
        Some("modified")
    } else if has(READ_WORDS) {
        Some("read")
    } else {
        None
    }
}

#[derive(Default)]
struct Extractor {
    out: Vec<Artifact>,
    seen: HashSet<(Kind, String)>,
    /// The open items of the last whole to-do list a todo tool call wrote.
    list: Vec<String>,
    /// What file tools did to each path (`modified` wins over `read`).
    path_action: std::collections::HashMap<String, &'static str>,
    /// The call each error line of a failed result came from (the latest).
    error_from: std::collections::HashMap<String, String>,
    /// Each command's exit code, from its last run with a result.
    command_exit: std::collections::HashMap<String, Option<i64>>,
}

impl Extractor {
    /// A tool call's artifacts (paths and URLs in its input, the files it touched, its command
    /// with the `outcome` of its result, its to-dos): its key ([`call_key`], or its command),
    /// and whether it is a to-do tool's.
    fn call(
        &mut self,
        name: &str,
        input: &str,
        outcome: Option<&(bool, Option<i64>)>,
    ) -> (String, bool) {
        // One parse serves the strings, the command and the to-dos.
        let v = serde_json::from_str::<serde_json::Value>(input).ok();
        let strs = strings_or(v.as_ref(), input);
        self.paths_urls(&strs);
        if let Some(action) = file_action(name, v.as_ref()) {
            if let Some(v) = &v {
                self.mark_paths(v, action);
            }
        }
        let key = match shell_command(name, v.as_ref()) {
            Some(c) => {
                let status = outcome.map(|o| if o.0 { "failed" } else { "ok" });
                self.push_command(&c, status, outcome.and_then(|o| o.1));
                c
            }
            None => call_key(name, &strs),
        };
        let todo = is_todo_tool(name);
        if todo {
            if let Some(v) = &v {
                self.todos(v);
            }
        }
        (key, todo)
    }

    fn push(&mut self, kind: Kind, text: &str) {
        self.push_status(kind, text, None)
    }

    /// A command, with the outcome and exit code of its result: the last run's win.
    fn push_command(&mut self, text: &str, status: Option<&str>, exit: Option<i64>) {
        self.push_status(Kind::Command, text, status);
        if status.is_some() {
            self.command_exit.insert(text.trim().to_string(), exit);
        }
    }

    /// Set what [`Extractor::mark_paths`], [`Extractor::errors`] and
    /// [`Extractor::push_command`] noted on the artifacts.
    fn finish(&mut self) {
        for a in &mut self.out {
            match a.kind {
                Kind::Path => {
                    if let Some(act) = self.path_action.get(&a.text) {
                        a.status = Some((*act).into());
                    }
                }
                Kind::Error => a.from = self.error_from.get(&a.text).cloned(),
                Kind::Command => a.exit = self.command_exit.get(&a.text).copied().flatten(),
                _ => {}
            }
        }
    }

    /// The paths a file tool's input names under a path key (`path`, `file_path`, `files` …):
    /// `modified` or `read` (a path both read and modified is modified).
    fn mark_paths(&mut self, v: &serde_json::Value, action: &'static str) {
        let Some(obj) = v.as_object() else { return };
        for (k, val) in obj {
            let k = k.to_ascii_lowercase();
            if !(k.contains("path") || k.contains("file")) {
                continue;
            }
            let vals: Vec<&str> = match val {
                serde_json::Value::String(s) => vec![s.as_str()],
                serde_json::Value::Array(a) => a.iter().filter_map(|x| x.as_str()).collect(),
                _ => continue,
            };
            for p in vals {
                let p = strip_position(p.trim());
                if !is_path(p) {
                    continue;
                }
                let act = self.path_action.entry(p.to_string()).or_insert(action);
                if *act != "modified" {
                    *act = action;
                }
            }
        }
    }

    fn push_status(&mut self, kind: Kind, text: &str, status: Option<&str>) {
        let status = status.map(str::to_string);
        let text = text.trim();
        if text.is_empty() {
            return;
        }
        if self.seen.insert((kind, text.to_string())) {
            let mut a = Artifact::new(kind, text);
            a.status = status;
            self.out.push(a);
        } else if status.is_some() {
            // The last status of a command wins.
            if let Some(a) = self
                .out
                .iter_mut()
                .find(|a| a.kind == kind && a.text == text)
            {
                a.status = status;
            }
        }
    }

    fn paths_urls(&mut self, text: &str) {
        for raw in text.split(|c: char| c.is_whitespace() || "\"'`()<>[]{},;|".contains(c)) {
            if raw.starts_with("http://") || raw.starts_with("https://") {
                let u = raw.trim_end_matches(['.', ':', '!', '?']);
                if u.len() > "https://".len() {
                    self.push(Kind::Url, u);
                }
                continue;
            }
            let w = strip_position(raw.trim_end_matches(['.', ':', '!', '?']));
            if is_path(w) {
                self.push(Kind::Path, w);
            }
        }
    }

    /// The error lines of `text` (a failed result's first line, lines that start like an
    /// error); `from`: the call of a failed result they come from.
    fn errors(&mut self, text: &str, failed: bool, from: Option<&str>) {
        let mut first = failed;
        for line in text.lines() {
            let l = line.trim();
            if l.is_empty() {
                continue;
            }
            if first || error_start(l) {
                let t = clip(l);
                self.push(Kind::Error, &t);
                if let Some(f) = from {
                    self.error_from.insert(t.trim().to_string(), f.to_string());
                }
            }
            first = false;
        }
    }

    fn user_text(&mut self, text: &str) {
        let quoted = quoted_numbers(text);
        // The last two words: a number assigned to an identifier (`max_retries = 250`) is its
        // value.
        let (mut prev, mut before) = ("", "");
        for raw in text.split(|c: char| c.is_whitespace() || "\"'`()<>[]{},;".contains(c)) {
            if raw.is_empty() {
                continue;
            }
            let w = raw.trim_end_matches(['.', ':', '!', '?']);
            let assigned = (prev == "=" || prev == ":") && is_identifier(before)
                || prev.strip_suffix(['=', ':']).is_some_and(is_identifier);
            (before, prev) = (prev, raw);
            if w.starts_with("http") || is_path(w) {
                continue;
            }
            let value = assigned && w.chars().filter(char::is_ascii_digit).count() >= 2;
            if is_identifier(w)
                || is_host_port(w)
                || is_number(w)
                || quoted.contains(w)
                || value && w.chars().all(|c| c.is_ascii_digit() || c == '.')
            {
                self.push(Kind::Identifier, w);
            }
        }
        for line in text.lines() {
            let l = line.trim_start_matches(['-', '*', ' ']).trim();
            if l.starts_with("TODO") {
                self.push(Kind::Todo, &clip(l));
            }
        }
        for sentence in sentences(text) {
            let low = format!("{} ", sentence.to_lowercase());
            if RULE_MARKERS
                .iter()
                .any(|m| low.starts_with(m) || low.contains(&format!(" {m}")))
            {
                self.push(Kind::Rule, &clip(sentence));
            }
        }
    }

    /// A todo tool call's input: a whole list (`todos`, `items`, `tasks`: it replaces the list
    /// an earlier call wrote), one item (`description`), new items (`descriptions`), or a
    /// checklist (`content`, `- [ ] item` open, `- [x] item` done: a whole list too).
    fn todos(&mut self, v: &serde_json::Value) {
        let list = ["todos", "items", "tasks"]
            .iter()
            .find_map(|k| v.get(k).and_then(|t| t.as_array()));
        if let Some(items) = list {
            let listed = todo_items(items);
            self.replace_list(listed);
            return;
        }
        if let Some(c) = v.get("content").and_then(|c| c.as_str()) {
            let listed = checklist(c);
            if !listed.is_empty() {
                self.replace_list(listed);
            }
            return;
        }
        let mut new: Vec<&str> = Vec::new();
        if let Some(d) = v.get("description").and_then(|d| d.as_str()) {
            new.push(d);
        }
        if let Some(ds) = v.get("descriptions").and_then(|d| d.as_array()) {
            new.extend(ds.iter().filter_map(|d| d.as_str()));
        }
        for d in new {
            self.push(Kind::Todo, &clip(d));
        }
    }

    /// A todo tool's result that states the whole list (`all_todos`, or `todos` of a listing):
    /// its closed items close the to-dos earlier calls opened, its open items are added.
    fn todo_state(&mut self, content: &str) {
        let Ok(v) = serde_json::from_str::<serde_json::Value>(content.trim()) else {
            return;
        };
        let Some(items) = ["all_todos", "todos"]
            .iter()
            .find_map(|k| v.get(k).and_then(|t| t.as_array()))
        else {
            return;
        };
        for (text, open) in todo_items(items) {
            if open {
                self.push(Kind::Todo, &text);
            } else {
                self.close_todo(&text);
            }
        }
    }

    /// A whole list replaces the items the previous whole list opened: those it no longer
    /// lists as open are closed.
    fn replace_list(&mut self, listed: Vec<(String, bool)>) {
        let open: HashSet<&str> = listed
            .iter()
            .filter(|(_, o)| *o)
            .map(|(t, _)| t.as_str())
            .collect();
        for old in std::mem::take(&mut self.list) {
            if !open.contains(old.as_str()) {
                self.close_todo(&old);
            }
        }
        for (text, o) in &listed {
            if *o {
                self.push(Kind::Todo, text);
                self.list.push(text.clone());
            } else {
                self.close_todo(text);
            }
        }
    }

    fn close_todo(&mut self, text: &str) {
        if self.seen.remove(&(Kind::Todo, text.to_string())) {
            self.out
                .retain(|a| !(a.kind == Kind::Todo && a.text == text));
        }
    }
}

/// The items of a todo list: `(text, open)`.
fn todo_items(items: &[serde_json::Value]) -> Vec<(String, bool)> {
    items
        .iter()
        .filter_map(|it| {
            let status = it.get("status").and_then(|s| s.as_str()).unwrap_or("");
            let text = ["content", "description", "text", "title"]
                .iter()
                .find_map(|k| it.get(k).and_then(|s| s.as_str()))?;
            let text = clip(text);
            (!text.is_empty()).then(|| (text, todo_is_open(status)))
        })
        .collect()
}

/// The open items (`- [ ] item`) of a markdown checklist, in order.
pub fn open_checklist_items(content: &str) -> Vec<String> {
    checklist(content)
        .into_iter()
        .filter(|(_, open)| *open)
        .map(|(t, _)| t)
        .collect()
}

/// The items of a markdown checklist: `- [ ] item` open, `- [x] item` done.
fn checklist(content: &str) -> Vec<(String, bool)> {
    content
        .lines()
        .filter_map(|l| {
            let l = l.trim_start().strip_prefix(['-', '*'])?.trim_start();
            let (mark, rest) = l.strip_prefix('[')?.split_once(']')?;
            let text = clip(rest);
            if text.is_empty() {
                return None;
            }
            match mark.trim() {
                "" => Some((text, true)),
                "x" | "X" => Some((text, false)),
                _ => None,
            }
        })
        .collect()
}

fn sentences(text: &str) -> impl Iterator<Item = &str> {
    text.split(['\n', '.', '!', '?', ';'])
        .map(str::trim)
        .filter(|s| !s.is_empty())
}

/// `src/a.rs:42:9` -> `src/a.rs` (a compiler's position suffix is not part of the path).
fn strip_position(w: &str) -> &str {
    let mut w = w;
    while let Some((head, tail)) = w.rsplit_once(':') {
        if tail.is_empty() || !tail.chars().all(|c| c.is_ascii_digit()) {
            break;
        }
        w = head;
    }
    w
}

fn is_name_char(c: char) -> bool {
    c.is_alphanumeric() || "_-.~".contains(c)
}

fn is_path(w: &str) -> bool {
    // A path has a `/` or a `.` (most words of a history have neither: no more to check).
    if !w.bytes().any(|b| b == b'/' || b == b'.') {
        return false;
    }
    if w.len() < 3 || w.contains("://") || !w.chars().all(|c| is_name_char(c) || c == '/') {
        return false;
    }
    let segs: Vec<&str> = w.split('/').filter(|s| !s.is_empty()).collect();
    let slash = w.contains('/')
        && (segs.len() >= 2 || (w.starts_with('/') && segs.len() == 1))
        && segs.iter().any(|s| s.chars().any(char::is_alphabetic));
    if slash {
        return true;
    }
    // name.ext
    match w.rsplit_once('.') {
        Some((stem, ext)) => {
            !stem.is_empty()
                && !w.contains('/')
                && (1..=5).contains(&ext.len())
                && stem.len() + ext.len() >= 3
                && ext.chars().all(|c| c.is_ascii_alphanumeric())
                && ext.chars().any(|c| c.is_ascii_alphabetic())
                && stem.chars().any(char::is_alphabetic)
                && stem.chars().last().is_some_and(|c| c.is_alphanumeric())
                && !stem.contains("..")
        }
        None => false,
    }
}

fn is_identifier(w: &str) -> bool {
    if w.len() < 2
        || !w
            .chars()
            .all(|c| c.is_alphanumeric() || c == '_' || c == ':')
    {
        return false;
    }
    if !w
        .chars()
        .next()
        .is_some_and(|c| c.is_alphabetic() || c == '_')
    {
        return false;
    }
    let inner_cap = w.chars().skip(1).any(char::is_uppercase) && w.chars().any(char::is_lowercase);
    let digit_after_letter = w
        .chars()
        .zip(w.chars().skip(1))
        .any(|(a, b)| a.is_alphabetic() && b.is_ascii_digit());
    (w.contains('_') && w.chars().any(char::is_alphabetic))
        || w.contains("::")
        || inner_cap
        || digit_after_letter
}

/// A number that names something: a version or an address (`1.2.3`, `10.0.0.1`: three or more
/// groups of digits between dots) or a port (`:8080`, `8080:80`). A bare number (`Task 103`,
/// `2,000`, `1.5`) is prose, not an identifier, unless it is quoted ([`quoted_numbers`]).
fn is_number(w: &str) -> bool {
    let digits = w.chars().filter(char::is_ascii_digit).count();
    if digits < 2 || !w.chars().all(|c| c.is_ascii_digit() || ".:".contains(c)) {
        return false;
    }
    let dotted = w.split('.').collect::<Vec<_>>();
    let version = dotted.len() >= 3
        && dotted
            .iter()
            .all(|g| !g.is_empty() && g.chars().all(|c| c.is_ascii_digit()));
    let port = w.contains(':')
        && w.split(':')
            .filter(|g| !g.is_empty())
            .all(|g| g.chars().all(|c| c.is_ascii_digit() || c == '.'))
        && w.rsplit(':')
            .next()
            .is_some_and(|p| (2..=5).contains(&p.len()));
    version || port
}

/// `host:port` (`localhost:8080`, `db.internal:5432`): a name, a colon, 2 to 5 digits.
fn is_host_port(w: &str) -> bool {
    match w.rsplit_once(':') {
        Some((host, port)) => {
            (2..=5).contains(&port.len())
                && port.chars().all(|c| c.is_ascii_digit())
                && host.chars().any(char::is_alphabetic)
                && host
                    .chars()
                    .all(|c| c.is_alphanumeric() || ".-_".contains(c))
        }
        None => false,
    }
}

/// The numbers (2 digits or more) the user wrote in backticks or double quotes: quoted, a
/// number is a value someone meant exactly.
fn quoted_numbers(text: &str) -> HashSet<&str> {
    let mut out = HashSet::new();
    for q in ['`', '"'] {
        if !text.contains(q) {
            continue;
        }
        for inner in text.split(q).skip(1).step_by(2) {
            for w in inner.split(|c: char| c.is_whitespace() || ",;()[]{}".contains(c)) {
                let w = w.trim_end_matches(['.', ':', '!', '?']);
                if w.chars().filter(char::is_ascii_digit).count() >= 2
                    && w.chars().all(|c| c.is_ascii_digit() || ".:-".contains(c))
                {
                    out.insert(w);
                }
            }
        }
    }
    out
}

/// The artifact ledger's first line.
pub const LEDGER_HEAD: &str = "Artifact ledger (verbatim, from the summarized history):";
/// The artifact ledger's last line: what follows it is not the ledger's.
pub const LEDGER_END: &str = "(end of the artifact ledger)";

/// What the ledger knows of the history beyond the summarized span's artifacts.
#[derive(Debug, Clone, Copy, Default)]
pub struct LedgerContext<'a> {
    /// The user's rules over the whole history (the summarized span and the kept tail), and
    /// whether each still stands. A `rule` artifact that is one of the rules taken back is never
    /// listed (an artifact is matched to the rule whose words cover most of its own).
    pub rules: &'a [(String, bool)],
    /// The messages after the summarized span (the kept tail): a call that succeeds there
    /// resolves the errors the same call had in the span.
    pub later: &'a [Message],
}

/// [`ledger_in`] with no knowledge of the rest of the history.
#[cfg(test)]
pub fn ledger(arts: &Artifacts, result: &Corpus, max_chars: usize) -> Option<String> {
    ledger_in(arts, result, &LedgerContext::default(), max_chars)
}

/// A deterministic ledger of the artifacts `result` lacks, verbatim, in sections: the user's
/// rules that still stand, open to-dos, open errors (of a failed call that did not succeed
/// later, in the span or the kept tail), commands with their outcome (`[ok]`, `[failed, exit
/// 2]`), files modified, files read, and other paths. At most `max_chars` characters (whole lines
/// only; when some do not fit, a line counts them), between [`LEDGER_HEAD`] and [`LEDGER_END`].
/// `None` when nothing is missing. Appended to a model-written summary so those kinds survive
/// whatever the model wrote. Paths come last (a long session touches hundreds): when the bound
/// is reached, paths are what is left out, never a rule, to-do or command that fits.
pub fn ledger_in(
    arts: &Artifacts,
    result: &Corpus,
    ctx: &LedgerContext<'_>,
    max_chars: usize,
) -> Option<String> {
    let wanted = ledger_sections(arts, result, ctx);
    if wanted.is_empty() {
        return None;
    }
    fit_ledger(wanted, max_chars)
}

/// A section of the ledger.
#[derive(Clone, Copy, PartialEq)]
enum Sec {
    Rules,
    Todos,
    Errors,
    Commands,
    Modified,
    Read,
    Paths,
}

/// The ledger's sections in order, each its title line and the lines of the artifacts `result`
/// lacks; empty sections left out.
fn ledger_sections(
    arts: &Artifacts,
    result: &Corpus,
    ctx: &LedgerContext<'_>,
) -> Vec<(String, Vec<String>)> {
    let sections = [
        (Sec::Rules, "User rules (still standing):"),
        (Sec::Todos, "Open to-dos:"),
        (Sec::Errors, "Open errors (failed, not resolved later):"),
        (Sec::Commands, "Commands run (outcome):"),
        (Sec::Modified, "Files modified:"),
        (Sec::Read, "Files read:"),
        (Sec::Paths, "Other paths:"),
    ];
    let resolved_later = succeeded_calls(ctx.later);
    let section_of = |a: &Artifact| -> Option<Sec> {
        match a.kind {
            Kind::Rule if rule_taken_back(&a.text, ctx.rules) => None,
            Kind::Rule => Some(Sec::Rules),
            Kind::Todo => Some(Sec::Todos),
            Kind::Error => (a.status.as_deref() == Some("open")
                && !a.from.as_ref().is_some_and(|f| resolved_later.contains(f)))
            .then_some(Sec::Errors),
            Kind::Command => Some(Sec::Commands),
            Kind::Path => Some(match a.status.as_deref() {
                Some("modified") => Sec::Modified,
                Some("read") => Sec::Read,
                _ => Sec::Paths,
            }),
            _ => None,
        }
    };
    let listed: Vec<(&Artifact, Sec)> = arts
        .0
        .iter()
        .filter_map(|a| section_of(a).map(|s| (a, s)))
        .collect();
    let found = result.contains_each(listed.iter().map(|(a, _)| *a));
    let mut wanted: Vec<(String, Vec<String>)> = Vec::new();
    for (sec, title) in sections {
        let lines: Vec<String> = listed
            .iter()
            .zip(&found)
            .filter(|((_, s), found)| *s == sec && !**found)
            .map(|((a, _), _)| ledger_line(a))
            .collect();
        if !lines.is_empty() {
            wanted.push((format!("\n{title}"), lines));
        }
    }
    wanted
}

/// The ledger of `wanted` in at most `max_chars` characters: every section's lines when they
/// fit; else whole lines are left out (the last sections' first) and a closing line says how
/// many. `None` when no line fits.
fn fit_ledger(wanted: Vec<(String, Vec<String>)>, max_chars: usize) -> Option<String> {
    let end = format!("\n{LEDGER_END}");
    let whole: usize = LEDGER_HEAD.len()
        + end.len()
        + wanted
            .iter()
            .map(|(t, ls)| t.len() + ls.iter().map(String::len).sum::<usize>())
            .sum::<usize>();
    let lines: usize = wanted.iter().map(|(_, ls)| ls.len()).sum();
    let budget = if whole <= max_chars {
        max_chars
    } else {
        // Room for the closing lines.
        max_chars.saturating_sub(left_out_line(lines).len() + end.len())
    };
    let mut out = String::from(LEDGER_HEAD);
    let (mut any, mut left_out) = (false, 0usize);
    for (title, lines) in wanted {
        if out.len() + title.len() > budget {
            left_out += lines.len();
            continue;
        }
        out.push_str(&title);
        for line in lines {
            if out.len() + line.len() > budget {
                // A shorter line after it may still fit.
                left_out += 1;
                continue;
            }
            out.push_str(&line);
            any = true;
        }
    }
    if left_out > 0 {
        out.push_str(&left_out_line(left_out));
    }
    out.push_str(&end);
    any.then_some(out)
}

/// One line of the ledger.
fn ledger_line(a: &Artifact) -> String {
    match (a.kind, a.status.as_deref(), a.exit) {
        (Kind::Command, Some(s), Some(code)) if code != 0 => {
            format!("\n- {} [{s}, exit {code}]", a.text)
        }
        (Kind::Command, Some(s), _) => format!("\n- {} [{s}]", a.text),
        _ => format!("\n- {}", a.text),
    }
}

/// Whether a `rule` artifact is one of the rules taken back: the rule closest to it (the most
/// words shared over the words of both), when it holds at least 80% of the artifact's words,
/// does not stand.
fn rule_taken_back(text: &str, rules: &[(String, bool)]) -> bool {
    let ws: HashSet<String> = words(text).collect();
    if ws.is_empty() {
        return false;
    }
    // (shared, union, live) of the closest rule so far.
    let mut best: Option<(usize, usize, bool)> = None;
    for (rule, live) in rules {
        let have: HashSet<String> = words(rule).collect();
        let shared = ws.intersection(&have).count();
        let union = ws.union(&have).count();
        // A higher share of words in common (shared over union); on a tie, a live rule.
        let better = best.is_none_or(|(s, u, l)| {
            shared * u > s * union || (shared * u == s * union && *live && !l)
        });
        if better {
            best = Some((shared, union, *live));
        }
    }
    best.is_some_and(|(shared, _, live)| !live && enough_words(shared, ws.len()))
}

/// `text` without its artifact ledgers (from [`LEDGER_HEAD`] through [`LEDGER_END`], or to the
/// end of `text` when a ledger is not closed); `None` when it holds none.
pub fn without_ledger(text: &str) -> Option<String> {
    let mut at = text.find(LEDGER_HEAD)?;
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    loop {
        out.push_str(&rest[..at]);
        let after = &rest[at..];
        match after.find(LEDGER_END) {
            Some(e) => rest = &after[e + LEDGER_END.len()..],
            None => return Some(out),
        }
        match rest.find(LEDGER_HEAD) {
            Some(n) => at = n,
            None => {
                out.push_str(rest);
                return Some(out);
            }
        }
    }
}

/// The retention of a serialized history (a JSON array or JSON lines, see
/// [`Corpus::of_json`]); when it holds an artifact ledger, also the score without it
/// ([`Retention::model_score`]) and what the ledger adds ([`Retention::ledger_score`]).
pub fn score_history(arts: &Artifacts, raw: &str) -> Retention {
    let text = json_text(raw);
    let matcher = Matcher::new(&arts.0);
    let Some(bare) = without_ledger(&text) else {
        return score_found(arts, matcher.found_in(&Corpus::of_text(&text)));
    };
    // The history with its ledger and without it share all but the ledger's bytes.
    let (with, without) = matcher.found_in_both(&Corpus::of_text(&text), &Corpus::of_text(&bare));
    let mut r = score_found(arts, with);
    let m = score_found(arts, without);
    let kept = |r: &Retention| r.by_kind.values().map(|c| c.kept).sum::<usize>();
    let total: usize = r.by_kind.values().map(|c| c.total).sum();
    r.model_score = Some(m.score);
    r.ledger_score = Some(if total == 0 {
        0.0
    } else {
        kept(&r).saturating_sub(kept(&m)) as f64 / total as f64
    });
    r
}

/// The ledger's closing line when `n` lines did not fit.
fn left_out_line(n: usize) -> String {
    format!("\n({n} more not listed: over the ledger's size)")
}

#[cfg(test)]
mod tests;

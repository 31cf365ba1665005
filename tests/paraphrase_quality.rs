//! Summary quality of the offline (extractive) summarizer on independent paraphrase corpora
//! (issue 12, item 3).
//!
//! A corpus (`fixtures/paraphrase/corpus.toml`, and a held-out one, `holdout.toml`, with the same
//! schema) is written by hand without reading the summarizer's code: for each of seven fact kinds
//! (user rule, decision, edited path, error with file:line, pending item, required command,
//! withdrawn fact) it holds many phrasings in varied registers, each with a slot for the fact's
//! key (a distinctive made-up token), plus distractor turns. [`run_corpus`] builds deterministic
//! conversations in the three kodelet formats (48, or more until every phrasing was planted),
//! plants facts of every kind at random depths of the head among long tool outputs and
//! distractors, compacts each with a kept tail of 15–20% of its tokens, and applies the oracle of
//! the summary contract:
//!
//! - a live fact is kept when its key occurs in the new history (summary outside its
//!   `## Withdrawn` section, re-inserted instruction, kept tail), whitespace-collapsed,
//!   case-sensitive;
//! - a withdrawn fact is presented as live when its key occurs in the summary outside the
//!   `## Withdrawn` section;
//! - compression: summary tokens (`count_text`) over the head's tokens.
//!
//! Targets (asserted for every corpus run): >= 95% of live facts kept, no withdrawn fact
//! presented as live, every summary at most 1/5 of the head it replaces. The figures per fact
//! kind are printed. `PARAPHRASE_VERBOSE=1` prints the failing examples; without it only
//! aggregate figures are printed, so they can be shared without the phrasings.
//!
//! The tests: `paraphrase_quality` (the main corpus); `paraphrase_quality_without_cue_words`,
//! an ablation that runs the main corpus again with the lexicon's prose cue lists switched off
//! (`Options { prose_cues: false }`: no negations, no take-back words; the lists that describe
//! tool formats stay) and asserts the same targets, so it fails if keeping live facts or
//! resolving withdrawals leans on the words the corpus shares with the lexicon rather than on the
//! conversation's structure (who said what in which turn, what the tools touched, what came
//! after); `paraphrase_quality_dev_withdrawals`, the withdrawal work's own development set
//! (`dev-withdrawals.toml`, tuned on, not an independent measure); `holdout_quality`, the
//! held-out corpus when the file exists (a note is printed when it does not;
//! `PARAPHRASE_HOLDOUT=FILE` points it at any other corpus file with the same schema);
//! `holdout2_quality`, a second held-out corpus written the same way, weighted to withdrawals;
//! `holdout3_quality`, a third, written blind on 2026-11-25 (a development corpus since);
//! `holdout4_quality`, a fourth, written blind the same day and measured after the fixes the
//! third led to.
//! The live facts whose phrasings share no word with any list of
//! `src/compact/extractive/lexicon.rs` are also tallied on their own, and held to the same target.
//!
//! Run with `cargo test --release --test paraphrase_quality -- --nocapture`.

use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};

use agent_db::compact::extractive::{summarize_with, Options};
use agent_db::compact::HeadInput;
use agent_db::compact::SUMMARY_HEADER;
use agent_db::message::{Block, Format, Message};
use agent_db::tokens;
use chrono::{DateTime, FixedOffset};
use serde::Deserialize;
use serde_json::{json, Value};

#[path = "support/convgen.rs"]
mod convgen;
#[path = "support/skip.rs"]
mod skip_rule;
use convgen::*;

/// Conversations built at least (a third per format), and at most while some phrasing was not
/// planted yet.
const MIN_CONVERSATIONS: usize = 48;
const MAX_CONVERSATIONS: usize = 480;
/// Targets of the summary contract.
const MIN_KEPT_PCT: f64 = 95.0;
/// Withdrawn facts of the first held-out corpus presented as live: 25 of 62 before the
/// structural withdrawal rule, 6 of 62 after it, 0 since 2026-11-23, when holdout.toml became a
/// development corpus (its failures were read and their two classes fixed: markdown
/// strikethrough, the assistant changing its mind to not doing what was asked). Not a blind
/// measure any more: holdout2.toml and holdout4.toml are.
const HOLDOUT_WITHDRAWN_LIVE_CEILING: usize = 0;
/// The same for the second held-out corpus: 2 of 71 when it was first measured (main at
/// 5207eb9), 0 of 71 since the withdrawal work that referred take-backs to what they describe
/// (merged at wip-withdraw's 2b8bd43, designed without seeing either held-out corpus): the
/// contract's target, held here.
const HOLDOUT2_WITHDRAWN_LIVE_CEILING: usize = 0;
/// The third corpus (`holdout3.toml`): 2 of 68 when it was first measured blind (at f2c9865,
/// with 98.2% of live facts kept); its failures were then read, so it became a development
/// corpus, and the two withdrawal classes were fixed (a change of mind negated in a later
/// clause, a take-back of an action the sentence names itself): 0 of 68 since.
const HOLDOUT3_WITHDRAWN_LIVE_CEILING: usize = 0;
/// The fourth held-out corpus (`holdout4.toml`), the blind measure after those fixes: the
/// contract's target.
const HOLDOUT4_WITHDRAWN_LIVE_CEILING: usize = 0;
const MAX_SUMMARY_RATIO: f64 = 0.2;
/// The lexicon-free live facts are held to the target only when there are this many.
const MIN_LEXICON_FREE: usize = 20;

// ---------------------------------------------------------------------------------------------
// The corpus.
// ---------------------------------------------------------------------------------------------

#[derive(Deserialize, Clone, Copy, PartialEq, Eq, Debug)]
#[serde(rename_all = "lowercase")]
enum Speaker {
    User,
    Assistant,
}

#[derive(Deserialize)]
struct Phrasing {
    #[serde(default)]
    shape: String,
    register: String,
    speaker: Speaker,
    text: String,
}

/// A kind whose facts are said in a turn: keys by shape, and phrasings.
#[derive(Deserialize)]
struct Said {
    keys: BTreeMap<String, Vec<String>>,
    phrasings: Vec<Phrasing>,
}

#[derive(Deserialize)]
struct EditCall {
    register: String,
    tool: String,
    result: String,
    input: Value,
}

#[derive(Deserialize)]
struct Edits {
    keys: BTreeMap<String, Vec<String>>,
    comments: Vec<Phrasing>,
    calls: Vec<EditCall>,
}

#[derive(Deserialize)]
struct ErrorOutput {
    shape: String,
    register: String,
    is_error: bool,
    command: String,
    output: String,
}

#[derive(Deserialize)]
struct Errors {
    keys: BTreeMap<String, Vec<String>>,
    comments: Vec<Phrasing>,
    outputs: Vec<ErrorOutput>,
}

#[derive(Deserialize)]
struct Withdrawn {
    keys: BTreeMap<String, Vec<String>>,
    statements: Vec<Phrasing>,
    withdrawals: Vec<Phrasing>,
}

#[derive(Deserialize)]
struct Wrappers {
    user: Vec<String>,
}

#[derive(Deserialize)]
struct Distractors {
    tokens: Vec<String>,
    user_chatter: Vec<String>,
    user_mentions: Vec<String>,
    assistant_mentions: Vec<String>,
}

#[derive(Deserialize)]
struct Corpus {
    rule: Said,
    decision: Said,
    edit: Edits,
    error: Errors,
    pending: Said,
    command: Said,
    withdrawn: Withdrawn,
    wrappers: Wrappers,
    distractors: Distractors,
}

/// A corpus file under `fixtures/paraphrase/`.
fn corpus_path(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures/paraphrase")
        .join(name)
}

fn load_corpus(path: &Path) -> Corpus {
    let text = std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    toml::from_str(&text).unwrap_or_else(|e| panic!("cannot parse {}: {e}", path.display()))
}

/// Fill `{name}` slots.
fn fill(template: &str, slots: &[(&str, &str)]) -> String {
    let mut out = template.to_string();
    for (name, value) in slots {
        out = out.replace(&format!("{{{name}}}"), value);
    }
    out
}

/// Fill slots in every string of a JSON value.
fn fill_json(v: &Value, slots: &[(&str, &str)]) -> Value {
    match v {
        Value::String(s) => Value::String(fill(s, slots)),
        Value::Array(a) => Value::Array(a.iter().map(|x| fill_json(x, slots)).collect()),
        Value::Object(o) => Value::Object(
            o.iter()
                .map(|(k, x)| (k.clone(), fill_json(x, slots)))
                .collect(),
        ),
        other => other.clone(),
    }
}

/// Every user or assistant phrasing template a fact can be planted with: (label, template).
/// Tool outputs and tool-call inputs are not phrasings.
fn phrasing_templates(c: &Corpus) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut add = |what: &str, list: &[Phrasing]| {
        for (i, p) in list.iter().enumerate() {
            out.push((format!("{what} #{i} ({})", p.register), p.text.clone()));
        }
    };
    add("rule", &c.rule.phrasings);
    add("decision", &c.decision.phrasings);
    add("pending", &c.pending.phrasings);
    add("command", &c.command.phrasings);
    add("withdrawn statement", &c.withdrawn.statements);
    add("withdrawal", &c.withdrawn.withdrawals);
    add("edit comment", &c.edit.comments);
    add("error comment", &c.error.comments);
    for (i, w) in c.wrappers.user.iter().enumerate() {
        out.push((format!("user wrapper #{i}"), w.clone()));
    }
    out
}

// ---------------------------------------------------------------------------------------------
// A tiny deterministic RNG (xorshift64*).
// ---------------------------------------------------------------------------------------------

/// Draws indices into a list so that every entry is used once per round, in a shuffled order:
/// every phrasing gets planted, and about equally often.
#[derive(Default)]
struct Decks(BTreeMap<String, Deck>);

#[derive(Default)]
struct Deck {
    order: Vec<usize>,
    next: usize,
    draws: usize,
}

impl Decks {
    fn draw(&mut self, name: &str, len: usize, rng: &mut Rng) -> usize {
        let d = self.0.entry(name.to_string()).or_default();
        if d.next >= d.order.len() {
            d.order = (0..len).collect();
            rng.shuffle(&mut d.order);
            d.next = 0;
        }
        d.next += 1;
        d.draws += 1;
        d.order[d.next - 1]
    }

    /// Decks not drawn through once: some of their entries were never planted.
    fn incomplete(&self) -> Vec<String> {
        self.0
            .iter()
            .filter(|(_, d)| d.draws < d.order.len())
            .map(|(name, d)| format!("{name} ({} of {})", d.draws, d.order.len()))
            .collect()
    }
}

// ---------------------------------------------------------------------------------------------
// Conversations in the three kodelet formats (adapted from tests/extractive_quality.rs).
// ---------------------------------------------------------------------------------------------

// ---------------------------------------------------------------------------------------------
// Filler: the ordinary work of a session (reads, greps, test runs, edits, logs).
// ---------------------------------------------------------------------------------------------

fn cap(s: &str) -> String {
    let mut c = s.chars();
    match c.next() {
        Some(f) => f.to_uppercase().collect::<String>() + c.as_str(),
        None => String::new(),
    }
}

fn code_line(rng: &mut Rng, lang: Lang) -> String {
    let n = rng.pick(NOUNS);
    let v = rng.pick(VERBS);
    match (lang, rng.below(5)) {
        (Lang::Rust, 0) => format!("    let {n}_{v} = self.{v}_{n}(&ctx)?;"),
        (Lang::Rust, 1) => format!("    if {n}.is_empty() {{ return Err(Error::Empty); }}"),
        (Lang::Rust, 2) => format!(
            "pub fn {v}_{n}(&mut self, {n}: &{}) -> Result<()> {{",
            cap(n)
        ),
        (Lang::Go, 0) => format!("\t{n}, err := s.{}{}(ctx, req)", cap(v), cap(n)),
        (Lang::Go, 1) => "\tif err != nil {\n\t\treturn nil, err\n\t}".to_string(),
        (Lang::Go, 2) => format!(
            "func (s *Service) {}{}(ctx context.Context) error {{",
            cap(v),
            cap(n)
        ),
        (Lang::Python, 0) => format!("    {n} = self._{v}_{n}(ctx)"),
        (Lang::Python, 1) => format!("    if not {n}:\n        raise ValueError(\"empty {n}\")"),
        (Lang::Python, 2) => format!("def {v}_{n}(self, {n}: dict) -> None:"),
        (Lang::Ts, 0) => format!("  const {n} = await this.{v}{}(ctx);", cap(n)),
        (Lang::Ts, 1) => format!("  if (!{n}) throw new Error('missing {n}');"),
        (Lang::Ts, 2) => format!(
            "export async function {v}{}({n}: {}): Promise<void> {{",
            cap(n),
            cap(n)
        ),
        (Lang::Python, 3) => "    return None".to_string(),
        (_, 3) => "}".to_string(),
        _ => format!("    // {v} the {n} before handing it to the worker"),
    }
}

/// Code as a file_read shows it (numbered lines).
fn file_content(rng: &mut Rng, lang: Lang, lines: usize) -> String {
    (0..lines)
        .map(|i| format!("{:>4}: {}\n", i + 1, code_line(rng, lang)))
        .collect()
}

/// Code as an agent writes it.
fn code_block(rng: &mut Rng, lang: Lang, lines: usize) -> String {
    (0..lines)
        .map(|_| code_line(rng, lang))
        .collect::<Vec<_>>()
        .join("\n")
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
    (0..lines)
        .map(|_| {
            format!(
                "{}:{}:{}\n",
                p.file(rng),
                rng.range(1, 900),
                code_line(rng, p.lang).trim()
            )
        })
        .collect()
}

/// A service log; `others` are distractor tokens that may appear in it.
fn service_log(rng: &mut Rng, lines: usize, others: &[String]) -> String {
    let mut s = String::new();
    for i in 0..lines {
        let level = *rng.pick(&["INFO", "INFO", "INFO", "DEBUG", "WARN"]);
        let extra = if !others.is_empty() && rng.chance(0.05) {
            format!(" component={}", rng.pick(others))
        } else {
            String::new()
        };
        s.push_str(&format!(
            "2026-10-28T13:{:02}:{:02}.{:03}Z {level} request_id={:08x} route=/v1/{}/{} status={} dur={}ms{extra}\n",
            (i / 60) % 60,
            i % 60,
            rng.below(1000),
            rng.next() as u32,
            rng.pick(NOUNS),
            rng.pick(VERBS),
            *rng.pick(&[200, 200, 200, 201, 204, 404, 409]),
            rng.range(1, 400)
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
        format!("I'll read {short} next to see where the {n} gets handled."),
        format!("The test suite passes locally, moving on to the {n} changes."),
        format!("Okay, the {n} cache is only consulted on the slow path."),
        format!("Now I'll update the {v} helper so it takes the {n} by reference."),
        format!("The diff is small: two call sites of {v}_{n} change."),
    ];
    rng.pick(&options).clone()
}

fn thinking(rng: &mut Rng) -> String {
    let n = rng.pick(NOUNS);
    format!(
        "the user wants the {n} flow fixed; I should check the callers first, then the tests. Maybe the {} is stale.",
        rng.pick(NOUNS)
    )
}

/// What distractor material a conversation uses.
struct Noise<'a> {
    corpus: &'a Corpus,
    /// Distractor tokens of this conversation (none of them is a planted key).
    others: Vec<String>,
}

impl Noise<'_> {
    fn other(&self, rng: &mut Rng) -> String {
        rng.pick(&self.others).clone()
    }
}

/// One step of ordinary work, sometimes preceded by a distractor user turn.
fn filler_step(rng: &mut Rng, c: &mut Conv, p: &Project, noise: &Noise<'_>) {
    let d = &noise.corpus.distractors;
    match rng.below(100) {
        0..=4 => c.user(pick_str(rng, &d.user_chatter)),
        5..=8 => {
            let o = noise.other(rng);
            c.user(&fill(pick_str(rng, &d.user_mentions), &[("other", &o)]))
        }
        _ => {}
    }
    let think = rng.chance(0.4).then(|| thinking(rng));
    let mut text = if rng.chance(0.7) {
        narrative(rng, p)
    } else {
        String::new()
    };
    if rng.chance(0.1) {
        let o = noise.other(rng);
        let aside = fill(pick_str(rng, &d.assistant_mentions), &[("other", &o)]);
        text = format!("{aside} {text}").trim().to_string();
    }
    let mut calls: Vec<(String, &str, Value)> = Vec::new();
    let mut results: Vec<(String, String, bool)> = Vec::new();
    let n = if rng.chance(0.8) { 1 } else { 2 };
    for _ in 0..n {
        let id = c.id();
        let (name, input, out, err) = filler_call(rng, p, noise);
        calls.push((id.clone(), name, input));
        results.push((id, out, err));
    }
    c.assistant(think.as_deref(), &text, &calls);
    c.results(&results);
}

/// One ordinary tool call: (tool, input, output, is_error).
fn filler_call(
    rng: &mut Rng,
    p: &Project,
    noise: &Noise<'_>,
) -> (&'static str, Value, String, bool) {
    match rng.below(11) {
        0..=3 => {
            let f = p.file(rng);
            let lines = rng.range(60, 260);
            (
                "file_read",
                json!({"file_path": f}),
                file_content(rng, p.lang, lines),
                false,
            )
        }
        4 => {
            let pat = format!("{}_{}", rng.pick(VERBS), rng.pick(NOUNS));
            let lines = rng.range(10, 60);
            let out = grep_output(rng, p, lines);
            (
                "grep_tool",
                json!({"pattern": pat, "path": p.root}),
                out,
                false,
            )
        }
        5 | 6 => {
            let cmd = match p.lang {
                Lang::Rust => format!("cargo test -p {} -- {}", rng.pick(NOUNS), rng.pick(VERBS)),
                Lang::Go => format!("go test ./{}/...", rng.pick(DIRS)),
                Lang::Python => format!("pytest -q tests/test_{}.py", rng.pick(NOUNS)),
                Lang::Ts => format!("pnpm vitest run {}", rng.pick(NOUNS)),
            };
            let input = json!({"command": cmd, "description": "run tests", "timeout": 300});
            if rng.chance(0.15) {
                let f = p.file(rng);
                let out = format!(
                    "Error: Command exited with status 1\n{}\n{f}:{}:{}: undefined: {}{}",
                    test_log(rng, 5),
                    rng.range(10, 400),
                    rng.range(2, 40),
                    cap(pick_str(rng, VERBS)),
                    cap(pick_str(rng, NOUNS))
                );
                ("bash", input, out, true)
            } else {
                let lines = rng.range(20, 120);
                ("bash", input, test_log(rng, lines), false)
            }
        }
        7 | 8 => {
            let f = p.file(rng);
            let old = code_line(rng, p.lang);
            let new = code_block(rng, p.lang, 2);
            let out = format!("File {f} edited successfully: 1 replacement");
            let input = json!({"file_path": f, "old_text": old, "new_text": new});
            ("file_edit", input, out, false)
        }
        9 => {
            let lines = rng.range(40, 200);
            let out = service_log(rng, lines, &noise.others);
            let cmd = "kubectl logs deploy/api --since=15m | tail -n 200";
            ("bash", json!({"command": cmd}), out, false)
        }
        _ => {
            let mut out = String::new();
            for _ in 0..rng.range(3, 12) {
                out.push_str(&format!(" {} | {} +++--\n", p.file(rng), rng.range(1, 40)));
            }
            (
                "bash",
                json!({"command": "git diff --stat && git status --short"}),
                out,
                false,
            )
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Planted facts.
// ---------------------------------------------------------------------------------------------

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Rule,
    Decision,
    Edit,
    Error,
    Pending,
    Command,
    Withdrawn,
}

const LIVE_KINDS: [Kind; 6] = [
    Kind::Rule,
    Kind::Decision,
    Kind::Edit,
    Kind::Error,
    Kind::Pending,
    Kind::Command,
];

impl Kind {
    fn label(self) -> &'static str {
        match self {
            Kind::Rule => "user rule",
            Kind::Decision => "decision",
            Kind::Edit => "edited path",
            Kind::Error => "error file:line",
            Kind::Pending => "pending item",
            Kind::Command => "required command",
            Kind::Withdrawn => "withdrawn fact",
        }
    }
}

/// One message (or exchange) that plants a fact.
enum Plant {
    /// A user or assistant turn.
    Say { speaker: Speaker, text: String },
    /// An edit or write call with its result.
    Edit {
        comment: String,
        tool: String,
        input: Value,
        result: String,
    },
    /// A failing command, its output, and the assistant's comment afterwards.
    Error {
        command: String,
        output: String,
        is_error: bool,
        comment: String,
    },
    /// The agent runs a command the user asked for.
    Run { command: String },
}

struct Fact {
    kind: Kind,
    key: String,
    /// Which phrasings were used, for verbose output.
    label: String,
    /// The user/assistant templates used (for the lexicon-free subset).
    templates: Vec<String>,
    /// The planted turns, for verbose output.
    texts: Vec<String>,
}

/// A planted turn at a relative depth of the conversation (0 = start, 1 = end).
struct Event {
    at: f64,
    plant: Plant,
}

/// State shared while planting one conversation's facts.
struct Planter<'a> {
    corpus: &'a Corpus,
    decks: &'a mut Decks,
    rng: &'a mut Rng,
    used: HashSet<String>,
    others: Vec<String>,
    facts: Vec<Fact>,
    events: Vec<Event>,
}

impl Planter<'_> {
    /// A key from `pool` not used yet in this conversation.
    fn key(&mut self, pool: &[String], ext: &str) -> String {
        assert!(!pool.is_empty(), "empty key pool");
        for _ in 0..1000 {
            let k = pool[self.rng.below(pool.len())].replace("{ext}", ext);
            if self.used.insert(k.clone()) {
                return k;
            }
        }
        panic!("key pool exhausted: {pool:?}");
    }

    fn other(&mut self) -> String {
        self.rng.pick(&self.others).clone()
    }

    /// A said phrasing: (text, template, label) with the key and slots filled, maybe wrapped.
    fn say(
        &mut self,
        what: &str,
        p: &Phrasing,
        idx: usize,
        key: &str,
    ) -> (String, Vec<String>, String) {
        let other = self.other();
        let noun = *self.rng.pick(NOUNS);
        let mut text = fill(&p.text, &[("key", key), ("other", &other), ("noun", noun)]);
        let mut templates = vec![p.text.clone()];
        let mut label = format!("{what} #{idx} ({})", p.register);
        if p.speaker == Speaker::User && self.rng.chance(0.35) {
            let corpus = self.corpus;
            let wrappers = &corpus.wrappers.user;
            let w = self.decks.draw("wrapper", wrappers.len(), self.rng);
            text = fill(&wrappers[w], &[("fact", &text), ("noun", noun)]);
            templates.push(wrappers[w].clone());
            label.push_str(&format!(" in wrapper #{w}"));
        }
        (text, templates, label)
    }

    fn push_fact(
        &mut self,
        kind: Kind,
        key: String,
        label: String,
        templates: Vec<String>,
        texts: Vec<String>,
    ) {
        self.facts.push(Fact {
            kind,
            key,
            label,
            templates,
            texts,
        });
    }

    /// A rule, decision, pending item or required command.
    fn said(&mut self, kind: Kind, what: &str, said: &Said, at: f64) {
        let i = self.decks.draw(what, said.phrasings.len(), self.rng);
        let p = &said.phrasings[i];
        let key = self.key(&said.keys[&p.shape], "");
        let (text, templates, label) = self.say(what, p, i, &key);
        self.push_fact(kind, key.clone(), label, templates, vec![text.clone()]);
        self.events.push(Event {
            at,
            plant: Plant::Say {
                speaker: p.speaker,
                text,
            },
        });
        if kind == Kind::Command && self.rng.chance(0.3) {
            self.events.push(Event {
                at: at + 0.0001,
                plant: Plant::Run { command: key },
            });
        }
    }

    fn edit(&mut self, p: &Project, at: f64) {
        let corpus = self.corpus;
        let e = &corpus.edit;
        let key = self.key(&e.keys["path"], p.lang.ext());
        let ci = self.decks.draw("edit call", e.calls.len(), self.rng);
        let mi = self.decks.draw("edit comment", e.comments.len(), self.rng);
        let call = &e.calls[ci];
        let path = format!("{}/{key}", p.root);
        let lines = self.rng.range(12, 40);
        let content = code_block(self.rng, p.lang, lines);
        let old = code_line(self.rng, p.lang);
        let new = code_block(self.rng, p.lang, 3);
        let slots = [
            ("key", key.as_str()),
            ("path", path.as_str()),
            ("root", p.root.as_str()),
            ("content", content.as_str()),
            ("old", old.as_str()),
            ("new", new.as_str()),
        ];
        let comment = fill(&e.comments[mi].text, &[("key", &key)]);
        let input = fill_json(&call.input, &slots);
        let label = format!(
            "edit call #{ci} ({}) + comment #{mi} ({})",
            call.register, e.comments[mi].register
        );
        let texts = vec![comment.clone(), format!("{} {input}", call.tool)];
        self.push_fact(
            Kind::Edit,
            key.clone(),
            label,
            vec![e.comments[mi].text.clone()],
            texts,
        );
        self.events.push(Event {
            at,
            plant: Plant::Edit {
                comment,
                tool: call.tool.clone(),
                input,
                result: fill(&call.result, &slots),
            },
        });
    }

    fn error(&mut self, p: &Project, at: f64) {
        let corpus = self.corpus;
        let e = &corpus.error;
        let shape = p.lang.ext();
        let outputs: Vec<&ErrorOutput> = e.outputs.iter().filter(|o| o.shape == shape).collect();
        let oi = self
            .decks
            .draw(&format!("error {shape}"), outputs.len(), self.rng);
        let mi = self.decks.draw("error comment", e.comments.len(), self.rng);
        let out = outputs[oi];
        let key = self.key(&e.keys[shape], "");
        let slots = [("key", key.as_str()), ("root", p.root.as_str())];
        let comment = fill(&e.comments[mi].text, &slots);
        let output = fill(&out.output, &slots);
        let label = format!(
            "error output {shape} ({}) + comment #{mi} ({})",
            out.register, e.comments[mi].register
        );
        let texts = vec![output.clone(), comment.clone()];
        self.push_fact(
            Kind::Error,
            key,
            label,
            vec![e.comments[mi].text.clone()],
            texts,
        );
        self.events.push(Event {
            at,
            plant: Plant::Error {
                command: out.command.clone(),
                output,
                is_error: out.is_error,
                comment,
            },
        });
    }

    /// A statement early, its withdrawal later (both in the head).
    fn withdrawn(&mut self, at: f64, until: f64) {
        let corpus = self.corpus;
        let w = &corpus.withdrawn;
        let si = self
            .decks
            .draw("withdrawn statement", w.statements.len(), self.rng);
        let wi = self.decks.draw("withdrawal", w.withdrawals.len(), self.rng);
        let (s, x) = (&w.statements[si], &w.withdrawals[wi]);
        let key = self.key(&w.keys[&s.shape], "");
        let (said, mut templates, l1) = self.say("withdrawn statement", s, si, &key);
        let (unsaid, t2, l2) = self.say("withdrawal", x, wi, &key);
        templates.extend(t2);
        let later = at + (until - at) * (0.3 + 0.7 * self.rng.below(1000) as f64 / 1000.0);
        self.push_fact(
            Kind::Withdrawn,
            key,
            format!("{l1} / {l2}"),
            templates,
            vec![said.clone(), unsaid.clone()],
        );
        self.events.push(Event {
            at,
            plant: Plant::Say {
                speaker: s.speaker,
                text: said,
            },
        });
        self.events.push(Event {
            at: later,
            plant: Plant::Say {
                speaker: x.speaker,
                text: unsaid,
            },
        });
    }
}

/// Plays one planted turn into the conversation.
fn play(rng: &mut Rng, c: &mut Conv, p: &Project, noise: &Noise<'_>, plant: &Plant) {
    match plant {
        Plant::Say {
            speaker: Speaker::User,
            text,
        } => c.user(text),
        Plant::Say {
            speaker: Speaker::Assistant,
            text,
        } => {
            let text = if rng.chance(0.4) {
                format!("{} {text}", narrative(rng, p))
            } else {
                text.clone()
            };
            if rng.chance(0.25) {
                c.assistant(None, &text, &[]);
                c.user(pick_str(rng, &noise.corpus.distractors.user_chatter));
            } else {
                let f = p.file(rng);
                let lines = rng.range(40, 120);
                let body = file_content(rng, p.lang, lines);
                c.call(&text, "file_read", json!({"file_path": f}), body, false);
            }
        }
        Plant::Edit {
            comment,
            tool,
            input,
            result,
        } => c.call(comment, tool, input.clone(), result.clone(), false),
        Plant::Error {
            command,
            output,
            is_error,
            comment,
        } => {
            let pre = *rng.pick(&["Running the build.", "Let me run the checks.", ""]);
            let input = json!({"command": command, "timeout": 600});
            c.call(pre, "bash", input, output.clone(), *is_error);
            let f = p.file(rng);
            let lines = rng.range(40, 160);
            let body = file_content(rng, p.lang, lines);
            let think = rng.chance(0.5).then(|| thinking(rng));
            let id = c.id();
            c.assistant(
                think.as_deref(),
                comment,
                &[(id.clone(), "file_read", json!({"file_path": f}))],
            );
            c.results(&[(id, body, false)]);
        }
        Plant::Run { command } => {
            let out = format!("$ {command}\nall checks passed (0 problems)\n");
            c.call(
                "Running it now.",
                "bash",
                json!({"command": command, "timeout": 900}),
                out,
                false,
            );
        }
    }
}

struct Built {
    format: Format,
    raw: String,
    facts: Vec<Fact>,
    others: Vec<String>,
}

/// Relative depth where planted facts may go: inside the head, well clear of the kept tail.
const PLANT_FROM: f64 = 0.04;
const PLANT_TO: f64 = 0.64;

fn depth(rng: &mut Rng, lo: f64, hi: f64) -> f64 {
    lo + (hi - lo) * rng.below(10_000) as f64 / 10_000.0
}

fn plant_all(pl: &mut Planter<'_>, p: &Project) {
    let corpus = pl.corpus;
    for kind in LIVE_KINDS.iter().chain([Kind::Withdrawn].iter()) {
        let n = if pl.rng.chance(0.35) { 2 } else { 1 };
        for _ in 0..n {
            let at = depth(pl.rng, PLANT_FROM, PLANT_TO);
            match kind {
                Kind::Rule => pl.said(*kind, "rule", &corpus.rule, at),
                Kind::Decision => pl.said(*kind, "decision", &corpus.decision, at),
                Kind::Pending => pl.said(*kind, "pending", &corpus.pending, at),
                Kind::Command => pl.said(*kind, "command", &corpus.command, at),
                Kind::Edit => pl.edit(p, at),
                Kind::Error => pl.error(p, at),
                Kind::Withdrawn => {
                    let at = depth(pl.rng, PLANT_FROM, 0.45);
                    pl.withdrawn(at, PLANT_TO)
                }
            }
        }
    }
    pl.events.sort_by(|a, b| a.at.total_cmp(&b.at));
}

fn build(i: usize, corpus: &Corpus, decks: &mut Decks) -> Built {
    let format = [
        agent_db::agents::kodelet::ANTHROPIC,
        agent_db::agents::kodelet::OPENAI_CHAT,
        agent_db::agents::kodelet::OPENAI_RESPONSES,
    ][i % 3];
    let mut rng = Rng::new(7_000 + i as u64);
    let p = Project::new(&mut rng, Lang::ALL[(i / 3) % 4]);
    let mut others = corpus.distractors.tokens.clone();
    rng.shuffle(&mut others);
    others.truncate(8);
    let mut pl = Planter {
        corpus,
        decks,
        rng: &mut rng,
        used: HashSet::new(),
        others: others.clone(),
        facts: Vec::new(),
        events: Vec::new(),
    };
    plant_all(&mut pl, &p);
    let Planter { facts, events, .. } = pl;
    let noise = Noise { corpus, others };

    let mut c = Conv::new(format);
    let target = (rng.range(30_000, 60_000) * 4) as f64;
    let n = rng.pick(NOUNS);
    c.user(&format!(
        "Hi! We're working in {} today. The {n} {} path is slow and sometimes returns stale data; find out why and fix it, with tests.",
        p.root,
        rng.pick(VERBS)
    ));
    let listing: String = p.files.iter().map(|f| format!("{f}\n")).collect();
    let pattern = format!("**/*.{}", p.lang.ext());
    c.call(
        &format!("I'll start by getting an overview of {}.", p.root),
        "glob_tool",
        json!({"pattern": pattern, "path": p.root}),
        listing,
        false,
    );
    for e in &events {
        while (c.chars as f64) < e.at * target {
            filler_step(&mut rng, &mut c, &p, &noise);
        }
        play(&mut rng, &mut c, &p, &noise, &e.plant);
    }
    while (c.chars as f64) < target {
        filler_step(&mut rng, &mut c, &p, &noise);
    }
    c.user(&format!(
        "Good. Now write up what changed in {} and draft the PR description.",
        p.root
    ));
    c.assistant(None, "Here is what changed so far, in three commits.", &[]);
    Built {
        format,
        raw: c.raw(),
        facts,
        others: noise.others,
    }
}

// ---------------------------------------------------------------------------------------------
// The oracle (summary contract, points 2-4 and 6).
// ---------------------------------------------------------------------------------------------

/// Texts, tool names and inputs, tool outputs of a message (what the model sees).
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

fn collapse(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Tool inputs are JSON text, so a key with quotes or backslashes would be escaped there; the
/// corpus keys have neither (checked in `corpus_is_well_formed`).
fn contains_key(haystack_collapsed: &str, key: &str) -> bool {
    haystack_collapsed.contains(&collapse(key))
}

/// The summary split into (text outside the withdrawn section, the withdrawn section).
fn split_withdrawn(summary: &str) -> (String, String) {
    let mut outside = String::new();
    let mut inside = String::new();
    let mut state = 0; // 0 before, 1 inside, 2 after the (single) withdrawn section
    for line in summary.lines() {
        if state == 0 && line.starts_with("## Withdrawn") {
            state = 1;
        } else if state == 1 && line.starts_with("## ") {
            state = 2;
        }
        let target = if state == 1 {
            &mut inside
        } else {
            &mut outside
        };
        target.push_str(line);
        target.push('\n');
    }
    (outside, inside)
}

#[test]
fn oracle_reads_the_withdrawn_section() {
    let summary = "[header]\n## Rules\n- keep KEEP_A\n## Withdrawn or superseded\n- GONE_B (cancelled)\n  ## not a heading GONE_C\n## Pending\n- LIVE_D\n## Withdrawn again\n- LIVE_E\n";
    let (outside, inside) = split_withdrawn(summary);
    let (outside, inside) = (collapse(&outside), collapse(&inside));
    for k in ["KEEP_A", "LIVE_D", "LIVE_E"] {
        assert!(
            contains_key(&outside, k) && !contains_key(&inside, k),
            "{k}"
        );
    }
    for k in ["GONE_B", "GONE_C"] {
        assert!(
            !contains_key(&outside, k) && contains_key(&inside, k),
            "{k}"
        );
    }
    // Whitespace runs collapse on both sides; case matters.
    assert!(contains_key(
        &collapse("run make\n   verify-schema  first"),
        "make  verify-schema"
    ));
    assert!(!contains_key(
        &collapse("run MAKE verify-schema"),
        "make verify-schema"
    ));
}

/// What one conversation measured.
struct Measured {
    /// (fact index, kept / presented live, named in the withdrawn section)
    outcomes: Vec<(usize, bool, bool)>,
    head_tokens: usize,
    summary_tokens: usize,
    others_in_summary: usize,
    summary: String,
}

fn measure(
    i: usize,
    built: &Built,
    now: DateTime<FixedOffset>,
    rng: &mut Rng,
    options: Options,
) -> Measured {
    let probe = plan_of(
        "p",
        "paraphrase",
        built.format,
        built.raw.clone(),
        usize::MAX,
    );
    let total = probe.tokens_before();
    assert!(total >= 25_000, "conversation {i} is only {total} tokens");
    let keep = total * rng.range(15, 21) / 100;
    let plan = plan_of("p", "paraphrase", built.format, built.raw.clone(), keep);
    let split = plan
        .split()
        .unwrap_or_else(|| panic!("conversation {i}: {:?}", plan.decision))
        .clone();
    let summary = summarize_with(&HeadInput::new(&plan, now), options);
    assert!(
        summary.starts_with(SUMMARY_HEADER),
        "conversation {i}: summary does not start with the header"
    );
    let head_tokens: usize = plan.loaded.tokens[..split.cut].iter().sum();
    let mut head = String::new();
    for m in plan.head() {
        message_text(m, &mut head);
    }
    let head = collapse(&head);
    // Everything of the new history but the summary: the re-inserted instruction and the tail.
    let mut kept = String::new();
    if let Some(r) = split.reinsert {
        message_text(&plan.loaded.messages[r], &mut kept);
    }
    for m in plan.tail() {
        message_text(m, &mut kept);
    }
    let kept = collapse(&kept);
    let (outside, inside) = split_withdrawn(&summary);
    let (outside, inside) = (collapse(&outside), collapse(&inside));
    let mut outcomes = Vec::new();
    for (fi, f) in built.facts.iter().enumerate() {
        // A harness check: facts are planted in the head only, so they survive only through
        // the summary.
        assert!(
            contains_key(&head, &f.key) && !contains_key(&kept, &f.key),
            "conversation {i}: {} {:?} is not planted in the head only",
            f.kind.label(),
            f.key
        );
        let hit = contains_key(&outside, &f.key);
        outcomes.push((fi, hit, contains_key(&inside, &f.key)));
    }
    let others_in_summary = built
        .others
        .iter()
        .filter(|o| contains_key(&outside, o))
        .count();
    Measured {
        outcomes,
        head_tokens,
        summary_tokens: tokens::count_text(&summary),
        others_in_summary,
        summary,
    }
}

fn verbose() -> bool {
    std::env::var("PARAPHRASE_VERBOSE").is_ok_and(|v| v == "1")
}

/// Tallies over the corpus.
#[derive(Default)]
struct Tally {
    /// Per live kind: (planted, kept).
    live: [(usize, usize); 6],
    /// Live facts whose templates share no word with the lexicon: (planted, kept).
    lexicon_free: (usize, usize),
    withdrawn: usize,
    withdrawn_live: usize,
    /// Withdrawn facts named in the withdrawn section (information only).
    withdrawn_listed: usize,
    ratios: Vec<f64>,
    head_tokens: Vec<usize>,
    others: (usize, usize),
    failures: Vec<String>,
}

impl Tally {
    fn add(&mut self, i: usize, built: &Built, m: &Measured, lexicon: Option<&[String]>) {
        for &(fi, hit, listed) in &m.outcomes {
            let f = &built.facts[fi];
            let where_ = format!("conv {i} ({})", built.format.name());
            if f.kind == Kind::Withdrawn {
                self.withdrawn += 1;
                self.withdrawn_listed += usize::from(listed);
                if hit {
                    self.withdrawn_live += 1;
                    let lines: Vec<&str> =
                        m.summary.lines().filter(|l| l.contains(&f.key)).collect();
                    self.failures.push(format!(
                        "{where_}: withdrawn {:?} presented as live [{}]\n    planted: {:?}\n    summary lines: {lines:?}",
                        f.key, f.label, f.texts
                    ));
                }
                continue;
            }
            let k = LIVE_KINDS.iter().position(|x| *x == f.kind).unwrap();
            self.live[k].0 += 1;
            self.live[k].1 += usize::from(hit);
            if let Some(lex) = lexicon {
                if f.templates.iter().all(|t| lexicon_hits(t, lex).is_empty()) {
                    self.lexicon_free.0 += 1;
                    self.lexicon_free.1 += usize::from(hit);
                }
            }
            if !hit {
                self.failures.push(format!(
                    "{where_}: {} {:?} lost [{}]\n    planted: {:?}",
                    f.kind.label(),
                    f.key,
                    f.label,
                    f.texts
                ));
            }
        }
        self.ratios
            .push(m.summary_tokens as f64 / m.head_tokens as f64);
        self.head_tokens.push(m.head_tokens);
        self.others.0 += built.others.len();
        self.others.1 += m.others_in_summary;
    }

    fn kept_pct(&self) -> f64 {
        let planted: usize = self.live.iter().map(|x| x.0).sum();
        let kept: usize = self.live.iter().map(|x| x.1).sum();
        100.0 * kept as f64 / planted.max(1) as f64
    }

    fn print(&self, label: &str, conversations: usize) {
        let pct = |k: usize, p: usize| 100.0 * k as f64 / p.max(1) as f64;
        let heads = &self.head_tokens;
        eprintln!(
            "{label}: {conversations} conversations ({} per format), head {}..{} tokens (mean {})",
            conversations / 3,
            heads.iter().min().unwrap(),
            heads.iter().max().unwrap(),
            heads.iter().sum::<usize>() / heads.len()
        );
        eprintln!("  {:<18} {:>7} {:>6} {:>7}", "kind", "planted", "kept", "%");
        for (kind, (planted, kept)) in LIVE_KINDS.iter().zip(self.live) {
            let label = kind.label();
            eprintln!(
                "  {label:<18} {planted:>7} {kept:>6} {:>6.1}%",
                pct(kept, planted)
            );
        }
        let planted: usize = self.live.iter().map(|x| x.0).sum();
        let kept: usize = self.live.iter().map(|x| x.1).sum();
        eprintln!(
            "  {:<18} {planted:>7} {kept:>6} {:>6.1}%",
            "all live facts",
            self.kept_pct()
        );
        if self.lexicon_free.0 > 0 {
            let (p, k) = self.lexicon_free;
            eprintln!(
                "  {:<18} {p:>7} {k:>6} {:>6.1}%  (phrasings sharing no word with the lexicon)",
                "lexicon-free",
                pct(k, p)
            );
        }
        eprintln!(
            "  withdrawn facts: {} planted, {} presented as live, {} named in the withdrawn section",
            self.withdrawn, self.withdrawn_live, self.withdrawn_listed
        );
        let mean = self.ratios.iter().sum::<f64>() / self.ratios.len() as f64;
        let max = self.ratios.iter().cloned().fold(0.0, f64::max);
        eprintln!("  compression (summary tokens / head tokens): mean {mean:.3}, max {max:.3}");
        eprintln!(
            "  distractor tokens in the summary (information only): {} of {}",
            self.others.1, self.others.0
        );
        if verbose() {
            for f in &self.failures {
                eprintln!("  {f}");
            }
        } else if !self.failures.is_empty() {
            eprintln!(
                "  ({} failing examples; PARAPHRASE_VERBOSE=1 prints them)",
                self.failures.len()
            );
        }
    }
}

/// Build and measure conversations from the corpus at `path`: at least [`MIN_CONVERSATIONS`], a
/// multiple of three (one per format), and more until every phrasing was planted. Prints the
/// figures per fact kind under `label`.
fn run_corpus(path: &Path, label: &str, options: Options) -> Tally {
    let corpus = load_corpus(path);
    let problems = corpus_problems(&corpus, false);
    assert!(
        problems.is_empty(),
        "{}: corpus problems:\n{}",
        path.display(),
        problems.join("\n")
    );
    let lexicon = lexicon_literals().ok();
    let now: DateTime<FixedOffset> =
        DateTime::parse_from_rfc3339("2026-11-02T08:00:00+01:00").unwrap();
    let mut decks = Decks::default();
    let mut tally = Tally::default();
    let mut rng = Rng::new(99);
    let mut n = 0;
    while n < MAX_CONVERSATIONS
        && (n < MIN_CONVERSATIONS || n % 3 != 0 || !decks.incomplete().is_empty())
    {
        let built = build(n, &corpus, &mut decks);
        let m = measure(n, &built, now, &mut rng, options);
        if std::env::var("PARAPHRASE_DUMP").is_ok_and(|v| v == n.to_string()) {
            eprintln!("{}", m.summary);
        }
        tally.add(n, &built, &m, lexicon.as_deref());
        n += 1;
    }
    tally.print(label, n);
    let unplanted = decks.incomplete();
    assert!(
        unplanted.is_empty(),
        "{label}: phrasings never planted: {unplanted:?}"
    );
    tally
}

/// The targets of the summary contract; `withdrawn_ceiling` is 0 (the target) except on the
/// held-out corpus, see [`HOLDOUT_WITHDRAWN_LIVE_CEILING`].
fn assert_targets(label: &str, tally: &Tally, withdrawn_ceiling: usize) {
    let pct = tally.kept_pct();
    assert!(
        pct >= MIN_KEPT_PCT,
        "{label}: only {pct:.1}% of live facts kept (target {MIN_KEPT_PCT}%)"
    );
    assert!(
        tally.withdrawn_live <= withdrawn_ceiling,
        "{label}: {} withdrawn facts presented as live (target 0, at most {withdrawn_ceiling} today)",
        tally.withdrawn_live
    );
    assert!(tally.withdrawn > 0, "{label}: no withdrawn fact planted");
    // The live-fact figure does not hinge on the lexicon: it holds on the phrasings that share
    // no word with it too.
    let (planted, kept) = tally.lexicon_free;
    if planted >= MIN_LEXICON_FREE {
        let free_pct = 100.0 * kept as f64 / planted as f64;
        assert!(
            free_pct >= MIN_KEPT_PCT,
            "{label}: only {free_pct:.1}% of lexicon-free live facts kept (target {MIN_KEPT_PCT}%)"
        );
    }
    let max_ratio = tally.ratios.iter().cloned().fold(0.0, f64::max);
    assert!(
        max_ratio <= MAX_SUMMARY_RATIO,
        "{label}: a summary is {max_ratio:.3} of its head (target at most {MAX_SUMMARY_RATIO})"
    );
}

#[test]
fn paraphrase_quality() {
    let label = "paraphrase corpus";
    let tally = run_corpus(&corpus_path("corpus.toml"), label, Options::default());
    assert_targets(label, &tally, 0);
}

/// The ablation: the same corpus with the lexicon's prose cue lists (negations, take-back words)
/// switched off meets the same targets, so the summary stands on the conversation's structure,
/// not on the words the corpus happens to share with the lexicon.
#[test]
fn paraphrase_quality_without_cue_words() {
    let label = "paraphrase corpus, prose cue lists off";
    let options = Options { prose_cues: false };
    let tally = run_corpus(&corpus_path("corpus.toml"), label, options);
    assert_targets(label, &tally, 0);
}

/// The withdrawal work's own development set (`dev-withdrawals.toml`: other ways of taking
/// things back, the assistant's among them), tuned on by the summarizer's designer, so no
/// independent measure; held to the contract's targets like the main corpus.
#[test]
fn paraphrase_quality_dev_withdrawals() {
    measure_file("dev-withdrawals.toml", "dev withdrawals corpus", 0);
}

/// The held-out corpus, written by someone who never saw the summarizer, with the same schema.
/// `PARAPHRASE_HOLDOUT=FILE` measures another corpus file instead (a path, or a name under
/// `fixtures/paraphrase/`).
#[test]
fn holdout_quality() {
    let name = std::env::var("PARAPHRASE_HOLDOUT").unwrap_or_else(|_| "holdout.toml".into());
    let path = corpus_path(&name);
    if !path.exists() {
        skip_rule::skip(&format!(
            "{} is absent; the held-out corpus was not measured (PARAPHRASE_HOLDOUT names it)",
            path.display()
        ));
        return;
    }
    let label = "held-out corpus";
    let tally = run_corpus(&path, label, Options::default());
    assert_targets(label, &tally, HOLDOUT_WITHDRAWN_LIVE_CEILING);
}

/// Run the corpus file `name` (under `fixtures/paraphrase/`) with the default options and hold it
/// to the targets, with `ceiling` withdrawn facts presented as live at most.
fn measure_file(name: &str, label: &str, ceiling: usize) {
    let tally = run_corpus(&corpus_path(name), label, Options::default());
    assert_targets(label, &tally, ceiling);
}

/// The second held-out corpus (`holdout2.toml`, weighted to withdrawals: 71 withdrawn facts),
/// written blind to the summarizer and to `holdout.toml`, after the structural withdrawal rule
/// was merged; see [`HOLDOUT2_WITHDRAWN_LIVE_CEILING`].
#[test]
fn holdout2_quality() {
    measure_file(
        "holdout2.toml",
        "second held-out corpus",
        HOLDOUT2_WITHDRAWN_LIVE_CEILING,
    );
}

/// The third corpus (`holdout3.toml`), written blind on 2026-11-25 by someone who saw neither
/// the summarizer's code nor any other held-out or development corpus (only `corpus.toml` and
/// this file's structs, for the schema); a development corpus since its failures were read, see
/// [`HOLDOUT3_WITHDRAWN_LIVE_CEILING`].
#[test]
fn holdout3_quality() {
    measure_file(
        "holdout3.toml",
        "third corpus (development since its first measure)",
        HOLDOUT3_WITHDRAWN_LIVE_CEILING,
    );
}

/// The fourth held-out corpus (`holdout4.toml`), written blind on 2026-11-25 the same way, also
/// blind to `holdout3.toml`, and measured only after the fixes `holdout3.toml` led to. Only its
/// aggregate figures have been read.
#[test]
fn holdout4_quality() {
    measure_file(
        "holdout4.toml",
        "fourth held-out corpus",
        HOLDOUT4_WITHDRAWN_LIVE_CEILING,
    );
}

// ---------------------------------------------------------------------------------------------
// The corpus itself.
// ---------------------------------------------------------------------------------------------

/// Every key of the corpus, with `{ext}` expanded for each language.
fn all_keys(c: &Corpus) -> Vec<String> {
    let maps = [
        &c.rule.keys,
        &c.decision.keys,
        &c.edit.keys,
        &c.error.keys,
        &c.pending.keys,
        &c.command.keys,
        &c.withdrawn.keys,
    ];
    let mut keys = Vec::new();
    for m in maps {
        for pool in m.values() {
            for k in pool {
                if k.contains("{ext}") {
                    keys.extend(["rs", "go", "py", "ts"].map(|e| k.replace("{ext}", e)));
                } else {
                    keys.push(k.clone());
                }
            }
        }
    }
    keys
}

fn check_said(
    what: &str,
    list: &[Phrasing],
    keys: &BTreeMap<String, Vec<String>>,
    strict: bool,
    problems: &mut Vec<String>,
) {
    if list.is_empty() || (strict && list.len() < 12) {
        problems.push(format!("{what}: only {} phrasings", list.len()));
    }
    let registers: HashSet<&str> = list.iter().map(|p| p.register.as_str()).collect();
    if strict && registers.len() < 5 {
        problems.push(format!("{what}: only {} registers", registers.len()));
    }
    let distinct: HashSet<&str> = list.iter().map(|p| p.text.as_str()).collect();
    if strict && distinct.len() != list.len() {
        problems.push(format!("{what}: repeated phrasings"));
    }
    for (i, p) in list.iter().enumerate() {
        if p.text.matches("{key}").count() != 1 {
            problems.push(format!("{what} #{i}: needs exactly one {{key}}"));
        }
        match keys.get(&p.shape) {
            Some(pool) if pool.len() >= 4 => {}
            _ => problems.push(format!(
                "{what} #{i}: no pool of 4+ keys for shape {:?}",
                p.shape
            )),
        }
    }
}

/// What is wrong with a corpus. Not `strict`: only what would break the harness or the oracle
/// (every phrasing carries its key once, pools of keys, error outputs per language, keys
/// distinct from every template); `strict` adds the main corpus's own standards (a dozen
/// phrasings or more per kind, in five registers or more, none repeated).
fn corpus_problems(c: &Corpus, strict: bool) -> Vec<String> {
    let mut problems = Vec::new();
    let said = [
        ("rule", &c.rule.phrasings, &c.rule.keys),
        ("decision", &c.decision.phrasings, &c.decision.keys),
        ("pending", &c.pending.phrasings, &c.pending.keys),
        ("command", &c.command.phrasings, &c.command.keys),
        (
            "withdrawn statement",
            &c.withdrawn.statements,
            &c.withdrawn.keys,
        ),
        ("withdrawal", &c.withdrawn.withdrawals, &c.withdrawn.keys),
    ];
    for (what, list, keys) in said {
        check_said(what, list, keys, strict, &mut problems);
    }
    let least = if strict { 12 } else { 1 };
    for (what, n) in [
        ("edit calls", c.edit.calls.len()),
        ("edit comments", c.edit.comments.len()),
        ("error outputs", c.error.outputs.len()),
        ("error comments", c.error.comments.len()),
    ] {
        if n < least {
            problems.push(format!("{what}: only {n}"));
        }
    }
    let d = &c.distractors;
    for (what, n) in [
        ("user wrappers", c.wrappers.user.len()),
        ("distractor tokens", d.tokens.len()),
        ("user chatter", d.user_chatter.len()),
        ("user mentions", d.user_mentions.len()),
        ("assistant mentions", d.assistant_mentions.len()),
    ] {
        if n == 0 {
            problems.push(format!("{what}: none"));
        }
    }
    for (i, call) in c.edit.calls.iter().enumerate() {
        let input = call.input.to_string();
        if !input.contains("{path}") && !input.contains("{key}") {
            problems.push(format!("edit call #{i}: the input names no file"));
        }
    }
    let least_outputs = if strict { 3 } else { 1 };
    for lang in ["rs", "go", "py", "ts"] {
        let n = c.error.outputs.iter().filter(|o| o.shape == lang).count();
        let keys = c.error.keys.get(lang).map_or(0, Vec::len);
        if n < least_outputs || keys < 4 {
            problems.push(format!("error {lang}: {n} outputs, {keys} keys"));
        }
    }
    for (i, o) in c.error.outputs.iter().enumerate() {
        if !o.output.contains("{key}") {
            problems.push(format!("error output #{i}: no {{key}}"));
        }
    }
    if c.edit.keys.get("path").is_none_or(|p| p.len() < 4) {
        problems.push("edit: no pool of 4+ keys for shape \"path\"".to_string());
    }
    check_keys(c, &mut problems);
    problems
}

#[test]
fn corpus_is_well_formed() {
    let c = load_corpus(&corpus_path("corpus.toml"));
    let problems = corpus_problems(&c, true);
    assert!(
        problems.is_empty(),
        "corpus problems:\n{}",
        problems.join("\n")
    );
}

/// Every template text of the corpus: phrasings, wrappers, distractors, tool inputs and outputs.
fn all_templates(c: &Corpus) -> Vec<String> {
    let mut out: Vec<String> = phrasing_templates(c).into_iter().map(|(_, t)| t).collect();
    let d = &c.distractors;
    out.extend(d.user_chatter.iter().chain(&d.user_mentions).cloned());
    out.extend(d.assistant_mentions.iter().cloned());
    for call in &c.edit.calls {
        out.push(format!("{} {} {}", call.tool, call.input, call.result));
    }
    for o in &c.error.outputs {
        out.push(format!("{}\n{}", o.command, o.output));
    }
    out
}

/// Keys are distinct, none contains another or a distractor token (or is contained in one), none
/// occurs in any template, and none needs JSON escaping.
fn check_keys(c: &Corpus, problems: &mut Vec<String>) {
    let keys = all_keys(c);
    let tokens = &c.distractors.tokens;
    let mut everything: Vec<&String> = keys.iter().collect();
    everything.extend(tokens.iter());
    for (a, x) in everything.iter().enumerate() {
        for (b, y) in everything.iter().enumerate() {
            if a != b && y.contains(x.as_str()) {
                problems.push(format!("key or token {x:?} occurs in {y:?}"));
            }
        }
        if x.contains('"') || x.contains('\\') || x.trim() != x.as_str() {
            problems.push(format!("key {x:?} needs escaping or trimming"));
        }
    }
    let templates = all_templates(c).join("\n");
    for k in &everything {
        if templates.contains(k.as_str()) {
            problems.push(format!("key or token {k:?} occurs in a template"));
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Independence from the summarizer's lexicon.
// ---------------------------------------------------------------------------------------------

fn lexicon_path() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src/compact/extractive/lexicon.rs")
}

/// The string literals of every `pub const` (or `pub static`) string array in lexicon.rs.
fn lexicon_literals() -> Result<Vec<String>, String> {
    let path = lexicon_path();
    let src = std::fs::read_to_string(&path).map_err(|e| {
        format!(
            "{} is missing ({e}): the summarizer must keep every word list it uses there as pub const string arrays",
            path.display()
        )
    })?;
    let lits = pub_const_string_literals(&src);
    if lits.is_empty() {
        return Err(format!("{} has no pub const string arrays", path.display()));
    }
    Ok(lits)
}

/// A minimal Rust lexer: the string literals inside `pub const`/`pub static` items whose type is
/// an array or slice of strings (`&[&str]`, `[&str; N]`, nested tuples of `&str`).
fn pub_const_string_literals(src: &str) -> Vec<String> {
    let chars: Vec<char> = src.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    // Inside an item: (bracket depth, seen '=', type text, literals so far).
    let mut item: Option<(i32, bool, String, Vec<String>)> = None;
    let mut ident = String::new();
    let mut recent: Vec<String> = Vec::new();
    while i < chars.len() {
        let ch = chars[i];
        if ch == '/' && chars.get(i + 1) == Some(&'/') {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
            continue;
        }
        if ch == '/' && chars.get(i + 1) == Some(&'*') {
            i = skip_block_comment(&chars, i);
            continue;
        }
        if let Some((lit, next)) = string_literal(&chars, i) {
            if let Some(it) = item.as_mut() {
                it.3.push(lit);
            }
            i = next;
            continue;
        }
        if ch == '\'' {
            i = skip_char_literal(&chars, i);
            continue;
        }
        if ch.is_alphanumeric() || ch == '_' {
            ident.push(ch);
            i += 1;
            continue;
        }
        if !ident.is_empty() {
            if let Some(it) = item.as_mut().filter(|it| !it.1) {
                it.2.push_str(&ident);
            }
            recent.push(std::mem::take(&mut ident));
            if recent.len() > 3 {
                recent.remove(0);
            }
            let n = recent.len();
            let kw = recent[n - 1].as_str();
            if item.is_none()
                && (kw == "const" || kw == "static")
                && n >= 2
                && starts_pub(&recent[..n - 1])
            {
                item = Some((0, false, String::new(), Vec::new()));
            }
        }
        if let Some(it) = item.as_mut() {
            match ch {
                '[' | '(' | '{' => it.0 += 1,
                ']' | ')' | '}' => it.0 -= 1,
                '=' if it.0 == 0 => it.1 = true,
                ';' if it.0 == 0 => {
                    let (_, _, ty, lits) = item.take().unwrap();
                    if ty.contains('[') && ty.contains("str") {
                        out.extend(lits);
                    }
                }
                _ => {}
            }
            if let Some(it) = item.as_mut() {
                if !it.1 {
                    it.2.push(ch);
                }
            }
        }
        i += 1;
    }
    out
}

/// Whether the identifiers before `const` make it public (`pub`, or `pub(crate)` and friends).
fn starts_pub(before: &[String]) -> bool {
    before.last().is_some_and(|w| w == "pub")
        || (before.len() >= 2 && before[before.len() - 2] == "pub")
}

fn skip_block_comment(chars: &[char], mut i: usize) -> usize {
    let mut depth = 0;
    while i < chars.len() {
        if chars[i] == '/' && chars.get(i + 1) == Some(&'*') {
            depth += 1;
            i += 2;
        } else if chars[i] == '*' && chars.get(i + 1) == Some(&'/') {
            depth -= 1;
            i += 2;
            if depth == 0 {
                return i;
            }
        } else {
            i += 1;
        }
    }
    i
}

/// A char literal (`'a'`, `'\n'`, `'\u{2019}'`) or a lifetime (`'static`): skip it.
fn skip_char_literal(chars: &[char], i: usize) -> usize {
    if chars.get(i + 1) == Some(&'\\') {
        let mut j = i + 2;
        while j < chars.len() && chars[j] != '\'' {
            j += 1;
        }
        return j + 1;
    }
    if chars.get(i + 2) == Some(&'\'') {
        return i + 3;
    }
    i + 1
}

/// A string literal starting at `i` ("…", r"…", r#"…"#, b"…"): (its value, the index after it).
fn string_literal(chars: &[char], i: usize) -> Option<(String, usize)> {
    let prev_ident = i > 0 && (chars[i - 1].is_alphanumeric() || chars[i - 1] == '_');
    let mut j = i;
    if !prev_ident && chars[j] == 'b' && matches!(chars.get(j + 1), Some('"') | Some('r')) {
        j += 1;
    }
    if ((j == i && !prev_ident) || j > i) && chars[j] == 'r' {
        let mut k = j + 1;
        let mut hashes = 0;
        while chars.get(k) == Some(&'#') {
            hashes += 1;
            k += 1;
        }
        if chars.get(k) != Some(&'"') {
            return None;
        }
        let start = k + 1;
        let mut e = start;
        while e < chars.len() {
            if chars[e] == '"' && (0..hashes).all(|h| chars.get(e + 1 + h) == Some(&'#')) {
                return Some((chars[start..e].iter().collect(), e + 1 + hashes));
            }
            e += 1;
        }
        return None;
    }
    if chars[j] != '"' {
        return None;
    }
    let mut s = String::new();
    let mut e = j + 1;
    while e < chars.len() {
        match chars[e] {
            '"' => return Some((s, e + 1)),
            '\\' => {
                let (c, next) = escape(chars, e);
                s.extend(c);
                e = next;
            }
            c => {
                s.push(c);
                e += 1;
            }
        }
    }
    None
}

/// One escape sequence at `e` (the backslash): (the char, if any, and the index after it).
fn escape(chars: &[char], e: usize) -> (Option<char>, usize) {
    match chars.get(e + 1) {
        Some('n') => (Some('\n'), e + 2),
        Some('t') => (Some('\t'), e + 2),
        Some('r') => (Some('\r'), e + 2),
        Some('0') => (Some('\0'), e + 2),
        Some('x') => {
            let hex: String = chars[e + 2..(e + 4).min(chars.len())].iter().collect();
            (
                u32::from_str_radix(&hex, 16).ok().and_then(char::from_u32),
                e + 4,
            )
        }
        Some('u') => {
            let close = (e..chars.len())
                .find(|&k| chars[k] == '}')
                .unwrap_or(chars.len() - 1);
            let hex: String = chars[e + 3..close].iter().collect();
            (
                u32::from_str_radix(&hex, 16).ok().and_then(char::from_u32),
                close + 1,
            )
        }
        Some('\n') => {
            let mut k = e + 2;
            while k < chars.len() && chars[k].is_whitespace() {
                k += 1;
            }
            (None, k)
        }
        Some(c) => (Some(*c), e + 2),
        None => (None, e + 1),
    }
}

fn is_word(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// The lexicon literals a template contains as a whole word or phrase (case-insensitive). Slots
/// are replaced by a separator first, so only the text around them counts.
fn lexicon_hits(template: &str, lexicon: &[String]) -> Vec<String> {
    let mut text = template.to_string();
    for slot in ["key", "other", "noun", "fact"] {
        text = text.replace(&format!("{{{slot}}}"), " | ");
    }
    let text = text.to_lowercase();
    let mut hits = Vec::new();
    for lit in lexicon {
        let l = lit.to_lowercase();
        let l = l.trim();
        if l.is_empty() {
            continue;
        }
        let first_word = l.chars().next().is_some_and(is_word);
        let last_word = l.chars().last().is_some_and(is_word);
        // Every occurrence, overlapping ones included.
        let found = (0..text.len())
            .filter(|&at| text.is_char_boundary(at) && text[at..].starts_with(l))
            .any(|at| {
                let before = text[..at].chars().next_back();
                let after = text[at + l.len()..].chars().next();
                (!first_word || !before.is_some_and(is_word))
                    && (!last_word || !after.is_some_and(is_word))
            });
        if found && !hits.contains(lit) {
            hits.push(lit.clone());
        }
    }
    hits
}

#[test]
fn lexicon_parser_reads_const_string_arrays() {
    let src = r####"
//! doc with "a quoted" word
/// doc "ignored"
pub const CUES: &[&str] = &[
    "let us", // "comment literal"
    r"raw one",
    r#"raw "two""#,
    "esc\"aped\u{2019}s",
    /* "block" */ "x\
       y",
];
pub(crate) const PAIRS: &[(&str, &str)] = &[("k1", "v1")];
pub const FIXED: [&str; 2] = ["f1", "f2"];
const PRIVATE: &[&str] = &["hidden"];
pub const HEADING: &str = "## Not a list";
pub static MORE: &[&'static str] = &["s1"];
fn f() -> char { let _ = '"'; 'x' }
pub const AFTER: &[&str] = &["after"];
"####;
    assert_eq!(
        pub_const_string_literals(src),
        vec![
            "let us",
            "raw one",
            "raw \"two\"",
            "esc\"aped\u{2019}s",
            "xy",
            "k1",
            "v1",
            "f1",
            "f2",
            "s1",
            "after"
        ]
    );
    let lex = vec!["let us".to_string(), "go".to_string(), "todo:".to_string()];
    assert_eq!(lexicon_hits("Let us {key} go", &lex), vec!["let us", "go"]);
    assert!(lexicon_hits("going, ago, cargo", &lex).is_empty());
    assert_eq!(lexicon_hits("TODO: {key}", &lex), vec!["todo:"]);
    assert!(lexicon_hits("{key}go", &lex).contains(&"go".to_string()));
}

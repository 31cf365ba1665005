//! Distinctive entities and how rare words are in the head.
//!
//! [`Stats`] counts, for every lowercase word, how many messages of the head contain it, and
//! which words occur in tool calls and results. An *entity* is what a statement is about, found
//! without word lists: a code-like token (path, identifier, flag, command in backticks, number),
//! a capitalized name the head never writes in lowercase (`Redis`, `CSV`), or a prose word that
//! is rare in the head and never occurs in tool I/O (a made-up name). Two statements that share
//! an entity are about the same thing, which is how withdrawals are tied to what they withdraw.

use std::cell::RefCell;

use rustc_hash::FxHashMap;

use crate::message::{Block, Message};

use super::text::{backtick_spans, is_capitalized, is_code_like, tokens, tokens_at_start};

/// A prose word in at most this many messages (and never in tool I/O) is rare.
const RARE_DF: u32 = 4;
/// Rare prose words are at least this long.
const RARE_MIN_CHARS: usize = 5;

/// Word statistics of a head.
#[derive(Default)]
pub(super) struct Stats {
    pub docs: usize,
    /// Every lowercase word of the head: in how many messages it occurs, whether in tool I/O,
    /// whether written all-lowercase in prose. One table, so counting a word is one lookup.
    words: FxHashMap<String, Word>,
    /// Tool inputs and outputs, lowercased, for substring checks.
    tool_text: String,
    /// Each message's text (all blocks), lowercased.
    lower_texts: Vec<String>,
    /// Tool inputs and outputs of the messages after the head (the kept tail), lowercased.
    later_tool_text: String,
    /// Indexes (in the conversation) of the messages that call a tool, in order.
    calls_at: Vec<usize>,
    /// Answers of [`Stats::in_tools`] and [`Stats::entity_df`] so far, by lowercase text: each
    /// scans whole texts, and the same entities are asked about again and again.
    in_tools_memo: RefCell<FxHashMap<String, bool>>,
    entity_df_memo: RefCell<FxHashMap<String, u32>>,
    /// [`Stats::of_prose`]: the table holds the words of prose only.
    prose_only: bool,
    /// Where each message's tool texts end in `tool_text`.
    tool_ends: Vec<usize>,
    /// Answers of [`Stats::tool_only`] so far.
    tool_only_memo: RefCell<FxHashMap<String, Option<Word>>>,
    /// Whether `tool_text` holds the Kelvin sign (read once, when first asked).
    kelvin: std::cell::OnceCell<bool>,
}

/// What [`Stats`] knows of one lowercase word.
#[derive(Debug, Default, Clone, Copy)]
struct Word {
    /// Messages that contain it (its document frequency).
    df: u32,
    /// The last message (counted from 1) that counted it in `df`.
    last_doc: u32,
    /// [`Stats::of_prose`]: the last message whose tool texts held it.
    tool_doc: u32,
    /// It occurs in a tool call's input or a tool result.
    tool: bool,
    /// It is written all-lowercase somewhere in prose.
    lower: bool,
}

/// Identifier-ish words: runs of letters, digits and `_` (what `s.split(|c: char|
/// !(c.is_alphanumeric() || c == '_'))` gives, without its empty pieces), read a byte at a
/// time where the text is ASCII.
pub(super) fn id_words(s: &str) -> crate::util::Runs<'_, true> {
    crate::util::runs(s)
}

/// In how many of the segments of `text` (ending at `ends`, each non-empty one with a line
/// break) `word` (a whole [`id_words`] word, ASCII) is one of the words (found with no word
/// character next to it); `None` for none. One search over the whole text: a word holds no line break, so a
/// match never spans two segments, and the line break before a segment is no word character,
/// as the start of the segment is none.
fn word_df(text: &str, ends: &[usize], word: &str) -> Option<u32> {
    let is_word = |c: char| c.is_alphanumeric() || c == '_';
    let mut df = 0;
    let mut last = None;
    // `memmem`'s matches are `match_indices`' (leftmost, non-overlapping), found with SIMD.
    for i in memchr::memmem::find_iter(text.as_bytes(), word.as_bytes()) {
        let whole = !text[..i].chars().next_back().is_some_and(is_word)
            && !text[i + word.len()..].chars().next().is_some_and(is_word);
        if !whole {
            continue;
        }
        let seg = ends.partition_point(|&e| e <= i);
        if last != Some(seg) {
            last = Some(seg);
            df += 1;
        }
    }
    (df > 0).then_some(df)
}

/// `w.to_lowercase()`: `w` itself when it is ASCII without uppercase, else in `buf` (reused:
/// no allocation per word).
fn lowercase<'a>(w: &'a str, buf: &'a mut String) -> &'a str {
    if w.bytes().all(|b| b.is_ascii() && !b.is_ascii_uppercase()) {
        w
    } else if w.is_ascii() {
        buf.clear();
        buf.push_str(w);
        buf.make_ascii_lowercase();
        buf
    } else {
        *buf = w.to_lowercase();
        buf
    }
}

/// A block's text and whether it is tool input or output; `None` for a block without words.
fn block_text(b: &Block) -> Option<(&str, bool)> {
    match b {
        Block::Text { text } => Some((text, false)),
        Block::ToolCall { input, .. } => Some((input, true)),
        Block::ToolResult { content, .. } => Some((content, true)),
        _ => None,
    }
}

impl Stats {
    /// The statistics of `messages`, the first of which is message `first` of the conversation.
    pub fn new(messages: &[Message], first: usize) -> Stats {
        let mut st = Stats::texts(messages, first);
        let mut buf = String::new();
        for (k, m) in messages.iter().enumerate() {
            let doc = k as u32 + 1;
            for (text, tool) in m.blocks.iter().filter_map(block_text) {
                for w in id_words(text) {
                    st.note(w, lowercase(w, &mut buf), doc, tool);
                }
            }
        }
        st
    }

    /// [`Stats::new`], answering the same, with a table of the words prose (text blocks) holds:
    /// the tool calls and results are read only for those words, and a word only they hold is
    /// counted when asked about ([`Stats::word`]). For callers that ask about prose words
    /// (the standing rules: every statement is prose), it skips the table of every identifier,
    /// number and path of the tool output.
    pub fn of_prose(messages: &[Message], first: usize) -> Stats {
        let mut st = Stats::texts(messages, first);
        st.prose_only = true;
        let mut buf = String::new();
        // The prose words of each message that also calls or answers a tool, so a word there
        // in both is counted once for it.
        let mut mixed: Vec<rustc_hash::FxHashSet<String>> = Vec::with_capacity(messages.len());
        for (k, m) in messages.iter().enumerate() {
            let doc = k as u32 + 1;
            let tools = m
                .blocks
                .iter()
                .any(|b| block_text(b).is_some_and(|(_, t)| t));
            let mut own = rustc_hash::FxHashSet::default();
            for b in &m.blocks {
                let Block::Text { text } = b else { continue };
                for w in id_words(text) {
                    let lw = lowercase(w, &mut buf);
                    if st.note(w, lw, doc, false) && tools {
                        own.insert(lw.to_string());
                    }
                }
            }
            mixed.push(own);
        }
        // Most words of tool output are in no prose: their shapes turn them away before they
        // are lowercased and hashed.
        let mut maybe = crate::util::Shapes::new();
        for w in st.words.keys().filter(|w| w.is_ascii()) {
            maybe.insert(w.as_bytes());
        }
        for (k, m) in messages.iter().enumerate() {
            let doc = k as u32 + 1;
            for (text, tool) in m.blocks.iter().filter_map(block_text) {
                if !tool {
                    continue;
                }
                for w in id_words(text) {
                    if w.is_ascii() && !maybe.may_hold(w.as_bytes()) {
                        continue;
                    }
                    let lw = lowercase(w, &mut buf);
                    let Some(word) = st.words.get_mut(lw) else {
                        continue;
                    };
                    word.tool = true;
                    if word.tool_doc != doc {
                        word.tool_doc = doc;
                        if !mixed[k].contains(lw) {
                            word.df += 1;
                        }
                    }
                }
            }
        }
        st
    }

    /// Count word `w` (lowercased `lw`) of message `doc`, in a tool text or prose; `true` when
    /// it is the first time this message counts it.
    fn note(&mut self, w: &str, lw: &str, doc: u32, tool: bool) -> bool {
        let word = match self.words.get_mut(lw) {
            Some(word) => word,
            None => self.words.entry(lw.to_string()).or_default(),
        };
        let first = word.last_doc != doc;
        if first {
            word.last_doc = doc;
            word.df += 1;
        }
        if tool {
            word.tool = true;
        } else if lw == w {
            word.lower = true;
        }
        first
    }

    /// Everything but the word table: the documents, the tool calls, and the lowercased texts.
    fn texts(messages: &[Message], first: usize) -> Stats {
        let mut st = Stats::default();
        // Every text's size is known: the strings are allocated once, not grown copy by copy.
        let (mut tool_bytes, mut sizes) = (0, Vec::with_capacity(messages.len()));
        for m in messages {
            let mut size = 0;
            for (text, tool) in m.blocks.iter().filter_map(block_text) {
                size += text.len() + 1;
                tool_bytes += if tool { text.len() + 1 } else { 0 };
            }
            sizes.push(size);
        }
        st.tool_text.reserve_exact(tool_bytes);
        st.lower_texts.reserve_exact(messages.len());
        for (k, m) in messages.iter().enumerate() {
            st.docs += 1;
            if m.blocks.iter().any(|b| matches!(b, Block::ToolCall { .. })) {
                st.calls_at.push(first + k);
            }
            let mut all = String::with_capacity(sizes[k]);
            for (text, tool) in m.blocks.iter().filter_map(block_text) {
                // Lowercased in place, without a copy of its own.
                let start = all.len();
                all.push_str(text);
                all[start..].make_ascii_lowercase();
                if tool {
                    st.tool_text.push_str(&all[start..]);
                    st.tool_text.push('\n');
                }
                all.push('\n');
            }
            st.lower_texts.push(all);
            st.tool_ends.push(st.tool_text.len());
        }
        st
    }

    /// What the table says of a lowercase word (`None`: no message holds it). A table of prose
    /// words counts a word only tool texts hold here, from those texts.
    fn word(&self, lower: &str) -> Option<Word> {
        if let Some(w) = self.words.get(lower) {
            return Some(*w);
        }
        if !self.prose_only {
            return None;
        }
        if let Some(w) = self.tool_only_memo.borrow().get(lower) {
            return *w;
        }
        let w = self.tool_only(lower);
        self.tool_only_memo
            .borrow_mut()
            .insert(lower.to_string(), w);
        w
    }

    /// A word no prose holds, counted in the tool texts: in how many messages' tool calls and
    /// results it is one of the [`id_words`] (lowercased).
    fn tool_only(&self, lower: &str) -> Option<Word> {
        // Only a whole word is in the table.
        if id_words(lower).next() != Some(lower) {
            return None;
        }
        // The tool texts are lowercased as ASCII: an ASCII word is found by its bytes, unless
        // the texts hold the one non-ASCII character that lowercases to ASCII (the Kelvin sign).
        let by_bytes = lower.is_ascii()
            && !*self
                .kelvin
                .get_or_init(|| self.tool_text.contains('\u{212A}'));
        if by_bytes {
            return word_df(&self.tool_text, &self.tool_ends, lower).map(|df| Word {
                df,
                tool: true,
                ..Word::default()
            });
        }
        let mut buf = String::new();
        let mut df = 0;
        let mut start = 0;
        for &end in &self.tool_ends {
            let seg = &self.tool_text[start..end];
            start = end;
            df += u32::from(id_words(seg).any(|w| lowercase(w, &mut buf) == lower));
        }
        (df > 0).then_some(Word {
            df,
            tool: true,
            ..Word::default()
        })
    }

    /// Add the tool calls and results of the messages after the head (the first of which is
    /// message `first`): what the agent did later counts for [`Stats::in_tools`] and
    /// [`Stats::calls_after`], not for word counts.
    pub fn add_later(&mut self, later: &[Message], first: usize) {
        // What is in tools changes: nothing remembered stands.
        self.in_tools_memo.get_mut().clear();
        for (k, m) in later.iter().enumerate() {
            for b in &m.blocks {
                let text = match b {
                    Block::ToolCall { input, .. } => {
                        if self.calls_at.last() != Some(&(first + k)) {
                            self.calls_at.push(first + k);
                        }
                        input
                    }
                    Block::ToolResult { content, .. } => content,
                    _ => continue,
                };
                // Lowercased in place, without a copy of its own.
                let start = self.later_tool_text.len();
                self.later_tool_text.push_str(text);
                self.later_tool_text[start..].make_ascii_lowercase();
                self.later_tool_text.push('\n');
            }
        }
    }

    /// Whether a tool is called after message `at` (in the head or the kept tail).
    pub fn calls_after(&self, at: usize) -> bool {
        self.calls_at.last().is_some_and(|&last| last > at)
    }

    pub fn df(&self, lower: &str) -> u32 {
        self.word(lower).map_or(0, |w| w.df)
    }

    /// Inverse document frequency of a lowercase word.
    pub fn idf(&self, lower: &str) -> f64 {
        ((self.docs as f64 + 1.0) / (self.df(lower) as f64 + 0.5)).ln()
    }

    /// Whether `text` (any case) occurs in a tool call or result, in the head or after it.
    pub fn in_tools(&self, text: &str) -> bool {
        let t = text.to_ascii_lowercase();
        if t.is_empty() {
            return false;
        }
        if let Some(&hit) = self.in_tools_memo.borrow().get(&t) {
            return hit;
        }
        let f = memchr::memmem::Finder::new(t.as_bytes());
        let hit = f.find(self.tool_text.as_bytes()).is_some()
            || f.find(self.later_tool_text.as_bytes()).is_some();
        self.in_tools_memo.borrow_mut().insert(t, hit);
        hit
    }

    /// How many messages mention an entity (its text, in any case, anywhere).
    pub fn entity_df(&self, e: &Entity) -> u32 {
        let k = e.text.to_ascii_lowercase();
        if let Some(&n) = self.entity_df_memo.borrow().get(&k) {
            return n;
        }
        let f = memchr::memmem::Finder::new(k.as_bytes());
        let n = self
            .lower_texts
            .iter()
            .filter(|t| f.find(t.as_bytes()).is_some())
            .count() as u32;
        self.entity_df_memo.borrow_mut().insert(k, n);
        n
    }

    fn is_rare_word(&self, lower: &str) -> bool {
        lower.chars().count() >= RARE_MIN_CHARS
            && lower.chars().all(char::is_alphabetic)
            && self.word(lower).is_none_or(|w| w.df <= RARE_DF && !w.tool)
    }

    fn is_name(&self, word: &str) -> bool {
        is_capitalized(word)
            && !self
                .words
                .get(&word.to_lowercase())
                .is_some_and(|w| w.lower)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    /// Matched and masked as a substring (paths, identifiers, commands).
    Code,
    /// Matched and masked as a whole word, in any case.
    Word,
}

#[derive(Debug, Clone)]
pub(super) struct Entity {
    /// As written.
    pub text: String,
    /// Lowercase, without a trailing `/`.
    pub key: String,
    pub kind: Kind,
    /// Code-like or a name (not only a rare word): enough on its own to tie two statements
    /// whose polarity differs.
    pub strong: bool,
}

impl Entity {
    pub fn new(text: &str, kind: Kind) -> Entity {
        let text = text.trim_end_matches('/');
        Entity {
            text: text.to_string(),
            key: text.to_ascii_lowercase(),
            kind,
            strong: true,
        }
    }

    fn weak(mut self) -> Entity {
        self.strong = false;
        self
    }

    /// Parts of a code entity that can stand for it in prose (`fastjson` in `fastjson::parse`
    /// or `fastjson/src`), split at path and module separators only (`a_b` and `a-b` stay
    /// whole: `zork` is not `zork_token`).
    fn parts(&self) -> Vec<&str> {
        match self.kind {
            Kind::Code => self
                .key
                .split(|c: char| c.is_whitespace() || matches!(c, '/' | ':' | '.' | '`'))
                .filter(|p| p.chars().count() >= 4)
                .collect(),
            Kind::Word => vec![self.key.as_str()],
        }
    }

    /// Whether two entities name the same thing: equal, one a whole-token part of the other
    /// (`vendor/gen` in `vendor/gen/x.rs`, `lint-x` in `make lint-x`), or a word that is a part
    /// of a code entity.
    pub fn matches(&self, other: &Entity) -> bool {
        if self.key == other.key {
            return true;
        }
        match (self.kind, other.kind) {
            (Kind::Code, Kind::Code) => {
                let (short, long) = if self.key.len() <= other.key.len() {
                    (&self.key, &other.key)
                } else {
                    (&other.key, &self.key)
                };
                short.chars().count() >= 4 && contains_part(long, short)
            }
            (Kind::Word, Kind::Word) => false,
            _ => {
                let (word, code) = if self.kind == Kind::Word {
                    (self, other)
                } else {
                    (other, self)
                };
                code.parts().contains(&word.key.as_str())
            }
        }
    }
}

impl Entity {
    /// Path prefixes (`vendor/gen` of `vendor/gen/x.rs`) and whitespace-separated words
    /// (`lint-x` of `make lint-x`) of a code entity, four characters or more.
    fn sub_keys(&self) -> Vec<&str> {
        if self.kind != Kind::Code {
            return Vec::new();
        }
        let mut out: Vec<&str> = self
            .key
            .match_indices('/')
            .map(|(i, _)| &self.key[..i])
            .filter(|p| p.chars().count() >= 4)
            .collect();
        if self.key.contains(char::is_whitespace) {
            out.extend(
                self.key
                    .split_whitespace()
                    .filter(|w| w.chars().count() >= 4),
            );
        }
        out
    }

    /// The keys this entity is found under: an entity `b` matches `a` exactly when one of
    /// `b.probes()` is among `a.marks()` (or the other way round), which lets threads be
    /// built with a hash map instead of comparing every pair.
    pub fn marks(&self) -> Vec<String> {
        let mut out = vec![format!("k:{}", self.key)];
        match self.kind {
            Kind::Code => {
                out.extend(self.sub_keys().into_iter().map(|p| format!("sub:{p}")));
                out.extend(self.parts().into_iter().map(|p| format!("part:{p}")));
            }
            Kind::Word => out.push(format!("word:{}", self.key)),
        }
        out
    }

    /// The keys to look this entity up by (see [`Entity::marks`]).
    pub fn probes(&self) -> Vec<String> {
        let mut out = vec![format!("k:{}", self.key)];
        match self.kind {
            Kind::Code => {
                if self.key.chars().count() >= 4 {
                    out.push(format!("sub:{}", self.key));
                }
                out.extend(self.sub_keys().into_iter().map(|p| format!("k:{p}")));
                out.extend(self.parts().into_iter().map(|p| format!("word:{p}")));
            }
            Kind::Word => out.push(format!("part:{}", self.key)),
        }
        out
    }
}

/// Whether `short` is a path prefix of `long` (`vendor/gen` of `vendor/gen/x.rs`) or one of
/// its whitespace-separated words (`lint-x` of `make lint-x`).
fn contains_part(long: &str, short: &str) -> bool {
    long.strip_prefix(short).is_some_and(|r| r.starts_with('/'))
        || long.split_whitespace().any(|w| w == short)
}

/// The distinctive entities of a sentence, de-duplicated by key. A rare prose word only stands
/// for what the sentence is about when it names nothing code-like or capitalized: next to
/// `KrellRateLimiter`, "forget" or "please" (rare in a head full of tool output) is not a subject,
/// and would tie unrelated statements together.
pub(super) fn entities(sentence: &str, stats: &Stats) -> Vec<Entity> {
    let mut out: Vec<Entity> = Vec::new();
    let mut push = |e: Entity| {
        if !e.key.is_empty() && !out.iter().any(|x| x.key == e.key) {
            out.push(e);
        }
    };
    for span in backtick_spans(sentence) {
        if span.chars().count() >= 3 {
            push(Entity::new(span, Kind::Code));
        }
    }
    for (at_start, t) in tokens_at_start(sentence) {
        if is_code_like(t) {
            push(Entity::new(t, Kind::Code));
        } else if (!at_start || t.chars().all(char::is_uppercase)) && stats.is_name(t) {
            push(Entity::new(t, Kind::Word));
        } else if t.chars().all(|c| c.is_lowercase()) && stats.is_rare_word(t) {
            push(Entity::new(t, Kind::Word).weak());
        }
    }
    if out.iter().any(|e| e.strong) {
        out.retain(|e| e.strong);
    }
    out
}

/// Whether a sentence mentions anything distinctive.
pub(super) fn has_code(sentence: &str) -> bool {
    !backtick_spans(sentence).is_empty() || tokens(sentence).any(is_code_like)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::Role;
    use rustc_hash::FxHashSet;
    use serde_json::value::RawValue;

    /// Assistant messages of (block kind, text) pairs: 0 a text, 1 a tool call's input, 2 a tool
    /// result.
    fn assistant_messages(msgs: &[Vec<(usize, String)>]) -> Vec<Message> {
        msgs.iter()
            .map(|blocks| Message {
                role: Role::Assistant,
                blocks: blocks
                    .iter()
                    .map(|(k, t)| match k {
                        0 => Block::Text { text: t.clone() },
                        1 => Block::ToolCall {
                            id: "c".into(),
                            name: "n".into(),
                            input: t.clone(),
                        },
                        _ => Block::ToolResult {
                            call_id: "c".into(),
                            content: t.clone(),
                            is_error: false,
                            images: vec![],
                        },
                    })
                    .collect(),
                raw: RawValue::from_string("null".into()).unwrap(),
            })
            .collect()
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(64))]

        /// The word statistics are those of their definition: a word's document frequency is
        /// the number of messages containing it (lowercased), tool words are those of tool
        /// inputs and results, and `lower_seen` the prose words written in lowercase.
        #[test]
        fn stats_count_words_as_defined(
            msgs in proptest::collection::vec(
                proptest::collection::vec((0usize..3, "(foo|Foo|bar|BAR|Éclair|éclair|a_b|x| |\\.){0,8}"), 0..4),
                0..6,
            ),
        ) {
            let messages = assistant_messages(&msgs);
            let st = Stats::new(&messages, 0);
            let mut df: FxHashMap<String, u32> = FxHashMap::default();
            let mut tool_words = FxHashSet::default();
            let mut lower_seen = FxHashSet::default();
            for blocks in &msgs {
                let mut in_msg = FxHashSet::default();
                for (k, t) in blocks {
                    // The definition of a word, not `id_words` itself.
                    let words = t
                        .split(|c: char| !(c.is_alphanumeric() || c == '_'))
                        .filter(|w| !w.is_empty());
                    for w in words {
                        let lw = w.to_lowercase();
                        if *k > 0 {
                            tool_words.insert(lw.clone());
                        } else if lw == w {
                            lower_seen.insert(lw.clone());
                        }
                        in_msg.insert(lw);
                    }
                }
                for w in in_msg {
                    *df.entry(w).or_default() += 1;
                }
            }
            let got_df: FxHashMap<String, u32> =
                st.words.iter().map(|(w, s)| (w.clone(), s.df)).collect();
            let got = |f: fn(&Word) -> bool| -> FxHashSet<String> {
                st.words.iter().filter(|(_, s)| f(s)).map(|(w, _)| w.clone()).collect()
            };
            proptest::prop_assert_eq!(&got_df, &df);
            proptest::prop_assert_eq!(got(|s| s.tool), tool_words);
            proptest::prop_assert_eq!(got(|s| s.lower), lower_seen);
            for w in df.keys() {
                proptest::prop_assert_eq!(st.df(w), df[w]);
            }
        }

        /// A table of prose words answers every question a full table answers: document
        /// frequency, rarity, names, for words of prose, of tool texts only (the Kelvin sign
        /// lowercases to ASCII `k`), in both, and for what is no word at all.
        #[test]
        fn a_prose_table_answers_as_the_full_table(
            msgs in proptest::collection::vec(
                proptest::collection::vec(
                    (0usize..3, "(foo|Foo|bar|BAR|Éclair|éclair|a_b|x| |\\.|K|kelvin|KELVIN|\u{212A}elvin|rarely|Rarely|\n){0,8}"),
                    0..4,
                ),
                0..6,
            ),
        ) {
            let messages = assistant_messages(&msgs);
            let full = Stats::new(&messages, 0);
            let prose = Stats::of_prose(&messages, 0);
            let mut asked: Vec<String> = ["missing", "foo.bar", "", "k", "kelvin", "rarely", "éclair", "a_b"]
                .map(String::from)
                .to_vec();
            for (_, t) in msgs.iter().flatten() {
                for w in t.split(|c: char| !(c.is_alphanumeric() || c == '_')).filter(|w| !w.is_empty()) {
                    asked.push(w.to_string());
                    asked.push(w.to_lowercase());
                }
            }
            for w in &asked {
                proptest::prop_assert_eq!(prose.df(w), full.df(w), "df {}", w);
                proptest::prop_assert_eq!(prose.is_rare_word(w), full.is_rare_word(w), "rare {}", w);
                proptest::prop_assert_eq!(prose.is_name(w), full.is_name(w), "name {}", w);
            }
            proptest::prop_assert_eq!(prose.docs, full.docs);
            proptest::prop_assert_eq!(&prose.tool_text, &full.tool_text);
            proptest::prop_assert_eq!(&prose.lower_texts, &full.lower_texts);
        }

        /// `id_words` reads a text into exactly the words of its definition: the non-empty
        /// pieces between characters that are neither alphanumeric nor `_`.
        #[test]
        fn id_words_are_the_split_of_their_definition(
            t in "([a-zA-Z0-9_ .:/-]|é|É|ß|ǅ|٣|²|\\x{301}|\\x{200b}|\\x{a0}|日本|🦀|\\n){0,40}",
        ) {
            let want: Vec<&str> = t
                .split(|c: char| !(c.is_alphanumeric() || c == '_'))
                .filter(|w| !w.is_empty())
                .collect();
            proptest::prop_assert_eq!(id_words(&t).collect::<Vec<_>>(), want);
        }
    }
}

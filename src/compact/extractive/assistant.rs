//! The assistant's statements of intent and choice, picked by structure rather than by wording.
//!
//! Every sentence of the assistant's visible text (thinking excluded) is scored by:
//!
//! - how distinctive its words are: the sum of the three highest inverse document frequencies
//!   of its words over the head (a sentence naming `zork_id` and `BTreeMap` outranks "Let me
//!   look at the file"), plus a bonus for code-like tokens that occur in at most two messages;
//! - where it stands: the assistant's first text after a user turn (its answer), text in a
//!   message that changes files (where choices turn into edits), and text right after a failed
//!   tool result (what it concluded from the failure).
//!
//! The summary keeps the best-scored sentences in conversation order, as many as the budget
//! allows. The assistant's last text goes to "Where we stopped" instead.

use std::collections::HashSet;

use super::entities::{id_words, Stats};
use super::text::{collapse, is_code_like, normalize, sentences, tokens};

/// Sentences shorter than this many words say too little to keep, unless they name something
/// code-like.
const MIN_WORDS: usize = 4;
/// Longest sentence kept whole, in characters.
pub(super) const SENTENCE_CHARS: usize = 600;

const BONUS_ANSWER: f64 = 2.0;
const BONUS_EDIT: f64 = 1.0;
const BONUS_AFTER_ERROR: f64 = 1.5;
const BONUS_RARE_CODE: f64 = 1.5;

/// One assistant text block and where it stands.
pub(super) struct TextAt {
    pub text: String,
    /// The first assistant text after a user turn.
    pub answer: bool,
    /// In a message that also creates, writes, edits or deletes files.
    pub edits: bool,
    /// Right after a failed tool result.
    pub after_error: bool,
}

/// A picked sentence.
pub(super) struct Said {
    pub text: String,
    pub score: f64,
}

/// The scored sentences of the assistant's texts, in order, de-duplicated.
pub(super) fn statements(texts: &[TextAt], stats: &Stats) -> Vec<Said> {
    let mut out = Vec::new();
    let mut seen: HashSet<String> = HashSet::new();
    for t in texts {
        for s in sentences(&t.text) {
            // A short sentence says too little, unless it names something ("Settled: X.", a
            // list item "- X-1207").
            if s.split_whitespace().count() < MIN_WORDS && !tokens(&s).any(is_code_like) {
                continue;
            }
            if !seen.insert(normalize(&collapse(&s))) {
                continue;
            }
            let mut score = distinctiveness(&s, stats);
            if t.answer {
                score += BONUS_ANSWER;
            }
            if t.edits {
                score += BONUS_EDIT;
            }
            if t.after_error {
                score += BONUS_AFTER_ERROR;
            }
            out.push(Said { text: s, score });
        }
    }
    out
}

/// The sum of the three highest idf of the sentence's words, plus rare code-like tokens.
fn distinctiveness(s: &str, stats: &Stats) -> f64 {
    let lower = s.to_lowercase();
    let mut idfs: Vec<f64> = id_words(&lower)
        .filter(|w| w.chars().count() >= 3)
        .collect::<HashSet<_>>()
        .into_iter()
        .map(|w| stats.idf(w))
        .collect();
    idfs.sort_by(|a, b| b.total_cmp(a));
    let top: f64 = idfs.iter().take(3).sum();
    let rare_code = tokens(s)
        .filter(|t| is_code_like(t))
        .filter(|t| {
            id_words(&t.to_lowercase())
                .filter(|w| w.len() >= 3)
                .any(|w| stats.df(w) <= 2)
        })
        .count()
        .min(2);
    top + BONUS_RARE_CODE * rare_code as f64
}

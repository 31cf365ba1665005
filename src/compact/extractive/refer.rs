//! Take-backs that never name what they take back: resolved to the earlier statement they refer
//! to, by description or by position.
//!
//! A user sentence that takes something back (a take-back or change-of-mind word, see `text`)
//! but names nothing the conversation named before is about something said earlier in other
//! words. It refers to:
//!
//! - **by description**: the earlier statement (the user's or the assistant's) that shares the
//!   most distinctive words with it, weighted by how rare they are in the head ("the migration
//!   thing from before — forget it" → "write the zephyr_backfill migration"; "ignore my earlier
//!   note about the config loader"). Words are split at `_`, `-` and `/` too, so a new option of
//!   the same kind replaces the old one ("use the kiln_queue instead" → "use the fennel_queue");
//! - **by position**, when it shares no such word and is short ("drop that", "actually never
//!   mind that"): the nearest earlier statement that names something no tool touched, in the
//!   same turn, the user's turn before or the assistant's messages since.
//!
//! The distinctive entities of that statement are attached to the sentence as if it had named
//! them, so the threads of `supersede` resolve it like any other take-back: a later mention can
//! still bring the thing back, and it is masked when its thread ends withdrawn. Entities in many
//! messages (the session's topic) are never attached, nor, for a reference by position, entities
//! a tool touched (taking back "that" after an edit leaves the edited file alone).

use std::collections::HashSet;

use super::entities::{Entity, Kind, Stats};
use super::supersede::{Origin, Stmt, FLIP_MAX_DF, PRONOUN_WORDS};
use super::text::Cues;

/// A shared word counts for a description when it is in at most this many messages.
const DESCRIBE_MAX_DF: u32 = 5;
/// A short take-back answers the assistant's message when it comes within this many messages.
const ANSWER_GAP: usize = 2;
/// A word shared with more earlier statements than this describes none of them.
const DESCRIBE_MAX_STMTS: usize = 2;
/// Shortest describing word (shorter ones are mostly pronouns and prepositions: "that", "from").
const DESCRIBE_MIN_CHARS: usize = 5;
/// A take-back of more words than this is an explanation, not a reference to something said.
const DESCRIBE_MAX_WORDS: usize = 16;

/// Attach to every take-back that names nothing known the entities of what it refers to.
pub(super) fn attach_references(stmts: &mut [Stmt], stats: &Stats, cues: Cues) {
    for s in 0..stmts.len() {
        if let Some(refs) = reference(stmts, stats, s, cues) {
            for e in refs {
                if !stmts[s].ents.iter().any(|x| x.key == e.key) {
                    stmts[s].ents.push(e);
                }
            }
        }
    }
}

/// The entities statement `s` refers to, if it is a take-back that names nothing known, in a
/// turn that names nothing else (a take-back word next to something named in the same turn is
/// about that: "X stays. I'd rather not do that again.").
fn reference(stmts: &[Stmt], stats: &Stats, s: usize, cues: Cues) -> Option<Vec<Entity>> {
    let st = &stmts[s];
    if st.origin != Origin::User || !cues.withdrawal(&st.text) || cues.own_action(&st.text) {
        return None;
    }
    let named_before = st.ents.iter().any(|e| {
        e.strong
            && stmts[..s]
                .iter()
                .any(|p| p.ents.iter().any(|x| x.matches(e)))
    });
    let turn_names = stmts.iter().enumerate().any(|(j, o)| {
        j != s && o.origin == Origin::User && o.turn == st.turn && o.ents.iter().any(|e| e.strong)
    });
    if named_before || turn_names {
        return None;
    }
    let names_new = st.ents.iter().any(|e| e.strong);
    if st.text.split_whitespace().count() > DESCRIBE_MAX_WORDS {
        return None;
    }
    // A new code-like name is a new option; a new capitalized word is more often who decided
    // ("DBA says no") than what replaces it, so the rest of the sentence may describe too.
    let names_code = st.ents.iter().any(|e| e.strong && e.kind == Kind::Code);
    let found = described(stmts, stats, s, names_new, cues)
        .or_else(|| (names_new && !names_code).then(|| described(stmts, stats, s, false, cues))?);
    if let Some(t) = found {
        return referable(&stmts[t], stats, false);
    }
    if names_new || st.text.split_whitespace().count() > PRONOUN_WORDS {
        return None;
    }
    pointed(stmts, stats, s).and_then(|t| referable(&stmts[t], stats, true))
}

/// The entities of statement `t` that a reference may stand for: strong, not the session's
/// topic, and (when `untouched`) named in no tool call or result.
fn referable(t: &Stmt, stats: &Stats, untouched: bool) -> Option<Vec<Entity>> {
    let out: Vec<Entity> = t
        .ents
        .iter()
        .filter(|e| e.strong && stats.entity_df(e) <= FLIP_MAX_DF)
        .filter(|e| !untouched || !stats.in_tools(&e.text))
        .cloned()
        .collect();
    (!out.is_empty()).then_some(out)
}

/// Lowercase words of a text split at anything but letters and digits, long enough and rare
/// enough in the head to describe something, that are not negations or take-back words.
fn describing_words(text: &str, stats: &Stats, cues: Cues) -> HashSet<String> {
    text.to_lowercase()
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| w.chars().count() >= DESCRIBE_MIN_CHARS && w.chars().any(char::is_alphabetic))
        .filter(|w| stats.df(w) <= DESCRIBE_MAX_DF && (stats.df(w) as usize) * 3 <= stats.docs)
        .filter(|w| !cues.negative(w) && !cues.withdrawal(w))
        .map(str::to_string)
        .collect()
}

/// The describing words of a statement: of its strong entities only (`kiln_queue` → `kiln`,
/// `queue`) when `of_names`, else of its whole text.
fn words_of(st: &Stmt, stats: &Stats, of_names: bool, cues: Cues) -> HashSet<String> {
    if !of_names {
        return describing_words(&st.text, stats, cues);
    }
    st.ents
        .iter()
        .filter(|e| e.strong)
        .flat_map(|e| describing_words(&e.text, stats, cues))
        .collect()
}

/// The earlier statement naming something that shares the most distinctive words with
/// statement `s` (the sum of their idf), the latest on a tie. A statement that takes something
/// back itself is not one to refer to, and a word in more than [`DESCRIBE_MAX_STMTS`] earlier
/// statements describes none of them. When `s` names something new ("use the kiln_queue
/// instead"), only the words of the names count: a new option replaces an old one of the same
/// kind (`fennel_queue`).
fn described(
    stmts: &[Stmt],
    stats: &Stats,
    s: usize,
    names_new: bool,
    cues: Cues,
) -> Option<usize> {
    let words = words_of(&stmts[s], stats, names_new, cues);
    if words.is_empty() {
        return None;
    }
    let cands: Vec<(usize, HashSet<String>)> = (0..s)
        .filter(|&t| stmts[t].ents.iter().any(|e| e.strong) && !cues.withdrawal(&stmts[t].text))
        .map(|t| (t, words_of(&stmts[t], stats, names_new, cues)))
        .collect();
    let specific =
        |w: &String| cands.iter().filter(|(_, ws)| ws.contains(w)).count() <= DESCRIBE_MAX_STMTS;
    let mut best: Option<(f64, usize)> = None;
    for (t, theirs) in &cands {
        let score: f64 = words
            .intersection(theirs)
            .filter(|w| specific(w))
            .map(|w| stats.idf(w))
            .sum();
        if score > 0.0 && best.is_none_or(|(b, _)| score >= b) {
            best = Some((score, *t));
        }
    }
    best.map(|(_, t)| t)
}

/// The statement a short take-back points at: the nearest earlier one naming something no tool
/// touched, in the same user turn, or in the assistant's message it answers (right before it), or
/// in the user's turn before.
fn pointed(stmts: &[Stmt], stats: &Stats, s: usize) -> Option<usize> {
    let st = &stmts[s];
    let usable = |t: usize| referable(&stmts[t], stats, true).is_some();
    let same_turn = |t: usize| stmts[t].origin == Origin::User && stmts[t].turn == st.turn;
    if let Some(t) = (0..s)
        .rev()
        .take_while(|&t| same_turn(t))
        .find(|&t| usable(t))
    {
        return Some(t);
    }
    let before = (0..s).rev().find(|&t| !same_turn(t))?;
    let answered =
        |t: usize| stmts[t].origin == Origin::Assistant && stmts[t].at + ANSWER_GAP >= st.at;
    if let Some(t) = (0..=before)
        .rev()
        .take_while(|&t| answered(t))
        .find(|&t| usable(t))
    {
        return Some(t);
    }
    let prev_turn = stmts[..s]
        .iter()
        .rev()
        .find(|p| p.origin == Origin::User && p.turn < st.turn)?
        .turn;
    (0..s)
        .rev()
        .find(|&t| stmts[t].origin == Origin::User && stmts[t].turn == prev_turn && usable(t))
}

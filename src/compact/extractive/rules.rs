//! The user's standing rules over a whole history: the summarized head and the kept tail.
//!
//! [`standing_rules_over`] reads the user's statements of both (the tail's user turns are
//! statements like the head's, so a rule stated there is a rule, and a take-back there takes
//! back what the head said) and resolves their withdrawals as the summary does (`supersede`).
//! Each rule comes back with where it stands: live, withdrawn (with the user's latest word), or
//! replaced (with the statement that replaced it). A statement that takes a rule back and names
//! something new in its place ("no need to run make lint-sedge anymore; run `make check`
//! instead") is itself a live rule.

use std::collections::{HashMap, HashSet};

use super::entities::Entity;
use super::supersede::Origin;
use super::text::Cues;
use super::{gather, Facts, Scope, MAX_RULES, RULE_CHARS};
use crate::message::{Format, Message};

/// One of the user's rules and where it stands at the end of the history.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StandingRule {
    /// The user's sentence, verbatim.
    pub text: String,
    pub status: RuleStatus,
}

/// Where a rule stands at the end of the history.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RuleStatus {
    /// Nothing later took it back.
    Live,
    /// A later user statement took it back; `latest` is that statement, verbatim.
    Withdrawn { latest: String },
    /// A later user statement took it back and named what holds instead; `by` is that
    /// statement, verbatim (also listed as a live rule).
    Replaced { by: String },
}

impl StandingRule {
    pub fn is_live(&self) -> bool {
        self.status == RuleStatus::Live
    }
}

/// The user's rules of `head` and `tail` (the whole history, in order), each with where it
/// stands: the user's own sentences that name something distinctive (a path, identifier,
/// command, number or name), verbatim, de-duplicated, at most the latest 40 live ones
/// and the latest 40 taken back. A rule is never reported live when a later user
/// statement (in the head or the tail) took it back.
pub fn standing_rules_over(
    format: Format,
    head: &[Message],
    tail: &[Message],
) -> Vec<StandingRule> {
    let f = gather(
        format,
        head,
        None,
        None,
        tail,
        Cues { on: true },
        Scope::Statements,
    );
    rules_over(&f)
}

/// The rules of gathered facts (see [`standing_rules_over`]).
fn rules_over(f: &Facts) -> Vec<StandingRule> {
    let last_word = last_words(f);
    // The withdrawing statements, by their withdrawal.
    let withdrawing: HashMap<usize, usize> = f
        .withdrawals
        .iter()
        .enumerate()
        .map(|(k, w)| (w.latest, k))
        .collect();
    let is_rule = |i: usize| {
        let s = &f.stmts[i];
        s.origin == Origin::User
            && s.ents.iter().any(|e| e.strong)
            && s.text.chars().count() <= RULE_CHARS
    };
    let mut live = Vec::new();
    let mut gone = Vec::new();
    let mut seen = HashSet::new();
    for (i, s) in f.stmts.iter().enumerate() {
        if !is_rule(i) {
            continue;
        }
        let status = match last_word.get(&i) {
            Some(&k) => {
                let w = &f.withdrawals[k];
                let latest = &f.stmts[w.latest];
                match replacement(f, k) {
                    Some(by) => RuleStatus::Replaced { by },
                    None if latest.origin == Origin::User => RuleStatus::Withdrawn {
                        latest: latest.text.clone(),
                    },
                    None => RuleStatus::Withdrawn {
                        latest: format!("(the assistant) {}", latest.text),
                    },
                }
            }
            // A statement that only takes something back is that rule's latest word, not a
            // rule; one that names what holds instead is a rule.
            None => match withdrawing.get(&i) {
                Some(&k) if replacement(f, k).as_deref() != Some(s.text.as_str()) => continue,
                _ => RuleStatus::Live,
            },
        };
        if !seen.insert((s.text.to_lowercase(), status == RuleStatus::Live)) {
            continue;
        }
        let rule = StandingRule {
            text: s.text.clone(),
            status,
        };
        if rule.is_live() {
            live.push(rule);
        } else {
            gone.push(rule);
        }
    }
    // A rule both taken back and stated again later as live is live only.
    let live_texts: HashSet<String> = live.iter().map(|r| r.text.to_lowercase()).collect();
    gone.retain(|r| !live_texts.contains(&r.text.to_lowercase()));
    let live = live.split_off(live.len().saturating_sub(MAX_RULES));
    let gone = gone.split_off(gone.len().saturating_sub(MAX_RULES));
    in_conversation_order(f, live.into_iter().chain(gone).collect())
}

/// For each superseded statement, the withdrawal with the latest word about it.
fn last_words(f: &Facts) -> HashMap<usize, usize> {
    let mut last_word: HashMap<usize, usize> = HashMap::new();
    for (k, w) in f.withdrawals.iter().enumerate() {
        for &e in &w.earlier {
            let cur = last_word.entry(e).or_insert(k);
            if f.withdrawals[*cur].latest < w.latest {
                *cur = k;
            }
        }
    }
    last_word
}

/// `rules` back in conversation order (of each text's first statement).
fn in_conversation_order(f: &Facts, mut rules: Vec<StandingRule>) -> Vec<StandingRule> {
    let order: HashMap<&str, usize> = f
        .stmts
        .iter()
        .enumerate()
        .rev()
        .map(|(i, s)| (s.text.as_str(), i))
        .collect();
    rules.sort_by_key(|r| order.get(r.text.as_str()).copied().unwrap_or(usize::MAX));
    rules
}

/// The user statement that replaced what withdrawal `k` took back, if it names what holds
/// instead: the withdrawing statement itself when it names a distinctive entity the
/// withdrawal is not about (and that nothing took back), else a later user statement of the
/// same turn that does and that nothing superseded.
fn replacement(f: &Facts, k: usize) -> Option<String> {
    let w = &f.withdrawals[k];
    let latest = &f.stmts[w.latest];
    if latest.origin != Origin::User {
        return None;
    }
    let about: Vec<&Entity> = w.masks.iter().chain(&w.subject).collect();
    let taken_back: Vec<&Entity> = f.withdrawals.iter().flat_map(|w| &w.masks).collect();
    let names_new = |ents: &[Entity]| {
        ents.iter().any(|e| {
            e.strong
                && !about.iter().any(|a| a.matches(e) || e.matches(a))
                && !taken_back.iter().any(|a| a.matches(e) || e.matches(a))
        })
    };
    let superseded = |i: usize| f.withdrawals.iter().any(|x| x.earlier.contains(&i));
    if names_new(&latest.ents) && !superseded(w.latest) {
        return Some(latest.text.clone());
    }
    f.stmts
        .iter()
        .enumerate()
        .skip(w.latest + 1)
        .take_while(|(_, s)| s.origin == Origin::User && s.turn == latest.turn)
        .find(|(i, s)| {
            names_new(&s.ents)
                && !superseded(*i)
                && !f.withdrawals.iter().any(|x| x.latest == *i)
                && s.text.chars().count() <= RULE_CHARS
        })
        .map(|(_, s)| s.text.clone())
}

//! Withdrawals, resolved by structure rather than phrasings.
//!
//! Every sentence the user wrote (and every line of a carried-forward summary, and every sentence
//! of the assistant's) is a [`Stmt`] with its distinctive [`Entity`]s. Statements that share an
//! entity form a thread about one thing. A later *user* statement in a thread changes it when:
//!
//! - **by structure alone**, with no cue word: the user brings up again something that was asked
//!   for or planned (the thread stands: it was not taken back already and is not a prohibition)
//!   and that was never acted upon (no tool call or result, in the head or the kept tail, names
//!   it); the user's clause does not repeat an earlier one (adds no content word to it, or
//!   shares more than half of their content words) and names nothing new beside it; and the agent goes on calling tools
//!   afterwards. What people say when they take back something asked for or planned varies
//!   without end ("X is off the table", "take X off the list", "we go another way"); that the
//!   work then moves on without X does not. Or:
//! - it takes something back or replaces it (the small take-back lexicon; a take-back verb right
//!   after a negation insists instead: "don't forget X"), in the clause that names the entity or
//!   in a clause that names nothing ("On second thought, keep X out"); this covers what the agent
//!   already worked on ("forget ibis-json, serde_json is enough"), or
//! - the clause that names the entity has the other polarity than the user's previous statement
//!   in the thread (one says "not", the other does not), in a later turn, about an entity few
//!   messages mention: talk about the session's topic or a file being worked on is not a change
//!   of mind, and an entity in four or five messages needs the two clauses to share another
//!   word (their predicate, "modify" in "never modify X" / "you can modify X now"), or
//! - it is negative where the thread so far is only the assistant's positive plan, or
//! - it strikes the entity out in markdown (`~~X~~`, as in an edited checklist): markup, not
//!   words, so this holds with the prose cues off too.
//!
//! When the thread is already taken back, a clause that only changes its mind (`CHANGE_WORDS`,
//! `CHANGE_PHRASES`: "we need X after all") with the polarity of before the take-back brings it
//! back; one that takes back again ("again, forget X") changes nothing. A negated take-back verb
//! insists and is not negative ("don't forget X", "never skip X"), and is never a drop.
//!
//! An *assistant* statement changes a thread too when it takes back (a take-back word in the
//! clause that names the entity, or a change of mind to not doing it: "on second thought I
//! won't add X", never about a thread that is a prohibition, where it only agrees) something no
//! tool touched and the user does not object in the
//! next turn (by naming it again, or by a short reply that says no or asks back): "I've dropped
//! X from the plan" / "ok", or the assistant reversing its own plan. Asked as a question ("should
//! I drop X?") it needs the user's short agreement right after ("yep"). A user who answers the
//! assistant's drop by naming X ("wait, we still want X") keeps it.
//!
//! A take-back that names nothing known ("the migration thing — forget it", "drop that", "use
//! the kiln_queue instead") is first tied to what it refers to (see `refer`), and then joins
//! that thread like any other statement.
//!
//! A question that ends its turn ("what is X for?") changes nothing unless it asks to take
//! something back ("can we drop X?"). An entity the user spoke of in four turns or more is the
//! session's topic and is never withdrawn. Each change supersedes the statements before it in
//! the thread and flips the thread between live and withdrawn. A short user sentence that takes
//! something back without naming anything and that `refer` could not tie to anything untouched
//! ("scratch that" after an edit) still supersedes the sentence or turn right before it. When a thread ends withdrawn, its entity is masked as `[Wn]` everywhere outside
//! the `## Withdrawn or superseded` section, which quotes what was said and the latest word; so
//! are the code-like entities that only the superseded statements mention (in the same clause as
//! the withdrawn subject) and no tool touched: the rest of what was taken back.
//!
//! Limits, by design: without understanding, a follow-up that adds to X ("X should also handle
//! timeouts") before anyone touched X, and that the agent then never acts on, reads as taken
//! back; a change of mind about something the agent already worked on, said with no cue word
//! and the same polarity ("X is off limits" → "ops handed X over, go ahead and edit it"), is not
//! detected.

use std::collections::{HashMap, HashSet};

use super::entities::{id_words, Entity, Kind, Stats};
use super::text::{clauses, quote, Cues};

/// Where a statement comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Origin {
    /// A line of a carried-forward summary.
    Prior,
    User,
    Assistant,
}

impl Origin {
    fn name(self) -> &'static str {
        match self {
            Origin::Prior => "earlier summary",
            Origin::User => "user",
            Origin::Assistant => "assistant",
        }
    }
}

pub(super) struct Stmt {
    pub origin: Origin,
    /// The user turn (for `User`), or the message index (for `Assistant`).
    pub turn: usize,
    /// The message index in the conversation (0 for `Prior`).
    pub at: usize,
    pub text: String,
    pub ents: Vec<Entity>,
}

/// One resolved withdrawal: the statement with the latest word and what it superseded.
#[derive(Debug, Clone)]
pub(super) struct Withdrawal {
    pub latest: usize,
    pub earlier: Vec<usize>,
    /// Entities masked in the live sections (empty when the thread was taken up again).
    pub masks: Vec<Entity>,
    /// What the change is about: the entity of the thread it was found in (none for a short
    /// "scratch that").
    pub subject: Vec<Entity>,
    /// `[Wn]`, set when there is something to mask.
    pub label: Option<String>,
}

/// Longest quotes in the withdrawn section.
const EARLIER_CHARS: usize = 240;
const LATEST_CHARS: usize = 300;
/// A sentence of at most this many words may take back what came right before it.
pub(super) const PRONOUN_WORDS: usize = 12;
/// An entity in more messages than this is a topic of the session, not one statement's
/// subject: a change of polarity about it is not read as a withdrawal.
pub(super) const FLIP_MAX_DF: u32 = 5;
/// An entity in at most this many messages is specific enough that a change of polarity about
/// it is a withdrawal even when the two clauses share no other word.
const FLIP_BARE_MAX_DF: u32 = 3;
/// The user has spoken of the session's topic in more turns than this before: not even an
/// explicit withdrawal word withdraws it (the agent using a thing in tools does not make it
/// the topic; the user returning to it does).
const TOPIC_MIN_TURNS: usize = 4;

/// The clause of `text` that names `e`, or the whole text when that clause is very short.
fn scope<'a>(text: &'a str, e: &Entity) -> &'a str {
    let lower = text.to_ascii_lowercase();
    let Some(at) = lower.find(&e.key) else {
        return text;
    };
    for c in clauses(text) {
        // Clauses are sub-slices of `text`.
        let start = c.as_ptr() as usize - text.as_ptr() as usize;
        if start <= at && at < start + c.len() {
            return if c.split_whitespace().count() >= 3 {
                c
            } else {
                text
            };
        }
    }
    text
}

/// Whether a clause names an entity.
fn mentions(clause: &str, e: &Entity) -> bool {
    clause.to_ascii_lowercase().contains(&e.key)
}

struct Mention {
    stmt: usize,
    ent: usize,
}

/// Threads: statements grouped by matching entities, in statement order. An entity joins the
/// earliest thread one of its probes finds (see [`Entity::marks`]).
fn threads(stmts: &[Stmt]) -> Vec<Vec<Mention>> {
    let mut threads: Vec<Vec<Mention>> = Vec::new();
    let mut index: HashMap<String, usize> = HashMap::new();
    for (s, st) in stmts.iter().enumerate() {
        let mut joined: HashSet<usize> = HashSet::new();
        for (k, e) in st.ents.iter().enumerate() {
            let found = e
                .probes()
                .iter()
                .filter_map(|p| index.get(p).copied())
                .min();
            let t = match found {
                Some(t) => {
                    if joined.insert(t) {
                        threads[t].push(Mention { stmt: s, ent: k });
                    }
                    t
                }
                None => {
                    threads.push(vec![Mention { stmt: s, ent: k }]);
                    joined.insert(threads.len() - 1);
                    threads.len() - 1
                }
            };
            for m in e.marks() {
                index.entry(m).or_insert(t);
            }
        }
    }
    threads
}

/// Where a thread stands after the statements so far.
#[derive(Default)]
struct ThreadState {
    withdrawn: bool,
    /// Whether the thread's current word is negative ("never touch X", or "X" taken back).
    negative: bool,
    /// The user's (or a carried-forward summary's) latest mention in the thread.
    last_user: Option<usize>,
}

/// Whether the user statement `m` changes the thread, and if so the thread's new polarity.
fn change(
    stmts: &[Stmt],
    stats: &Stats,
    thread: &[Mention],
    k: usize,
    state: &ThreadState,
    cues: Cues,
) -> Option<bool> {
    let m = &thread[k];
    let st = &stmts[m.stmt];
    let e = &st.ents[m.ent];
    let user_turns: HashSet<usize> = thread[..k]
        .iter()
        .map(|b| &stmts[b.stmt])
        .filter(|b| b.origin == Origin::User)
        .map(|b| b.turn)
        .collect();
    if user_turns.len() >= TOPIC_MIN_TURNS {
        return None;
    }
    let df = stats.entity_df(e);
    let sc = scope(&st.text, e);
    // A marker in the entity's clause, or in a clause that names nothing ("On second
    // thought, keep X off the list").
    // Struck out in markdown (`~~X~~`): removed, whatever the words around it.
    let marker = marked(st, sc, |c| cues.withdrawal(c)) || struck_out(&st.text, e);
    // A question that ends its turn asks and changes nothing until it is answered ("is X
    // still needed?"), unless it asks to take something back ("can we drop X?").
    if closing_question(stmts, m.stmt) && !marker {
        return None;
    }
    if dropped(stmts, stats, thread, k, state, cues) {
        return Some(true);
    }
    let neg = cues.negative(sc);
    let Some(u) = state.last_user else {
        // Only the assistant spoke about it so far: the user rejecting its plan.
        let plan_positive = thread[..k]
            .iter()
            .all(|b| !cues.negative(scope(&stmts[b.stmt].text, &stmts[b.stmt].ents[b.ent])));
        return (marker || (neg && plan_positive)).then_some(true);
    };
    if marker {
        if !state.withdrawn {
            return Some(!state.negative);
        }
        // Taking back what is already taken back changes nothing; a change of mind that takes
        // nothing back and is not negative brings it back ("we need X after all").
        let takes_back = marked(st, sc, |c| cues.takes_back(c)) || struck_out(&st.text, e);
        return (!takes_back && neg != state.negative).then_some(neg);
    }
    let ut = &stmts[thread[u].stmt];
    let ue = &ut.ents[thread[u].ent];
    let same_turn = ut.origin == Origin::User && ut.turn == st.turn;
    let specific = df <= FLIP_BARE_MAX_DF
        || (df <= FLIP_MAX_DF && shares_predicate(stats, sc, scope(&ut.text, ue), e, ue, cues));
    let flip = neg != state.negative && e.strong && ue.strong && specific && !same_turn;
    flip.then_some(neg)
}

/// Whether the assistant statement `m` takes the thread back: it says so (a take-back word in
/// the clause that names the entity, or a change of mind to not doing it) about something no
/// tool touched, and the user does not
/// object in the next turn (naming it again, or a short reply that says no or asks back): "I've
/// dropped X from the plan" / "ok". Asked as a question ("should I drop X?"), it needs the user's
/// short agreement right after ("yep").
fn assistant_change(
    stmts: &[Stmt],
    stats: &Stats,
    thread: &[Mention],
    k: usize,
    state: &ThreadState,
    cues: Cues,
) -> Option<bool> {
    let m = &thread[k];
    let st = &stmts[m.stmt];
    let e = &st.ents[m.ent];
    if state.withdrawn || !e.strong || stats.in_tools(&e.text) {
        return None;
    }
    // It takes X back, or changes its mind to not doing X, which only reverses something asked
    // for or planned, not a prohibition it agrees with.
    let drops = match reversal(st, e, cues) {
        Drop::TakesBack => true,
        Drop::Reverses => !state.negative,
        Drop::No => false,
    };
    if !drops || thread[..k].iter().any(|b| stmts[b.stmt].at == st.at) {
        return None;
    }
    let reply = next_reply(stmts, m.stmt);
    // A short reply that says no or asks back objects, unless it is about something else (it
    // names another thing and not this one: "is Y the thing that sends the emails?").
    let objects = |r: &Reply<'_>| {
        let names = |f: &dyn Fn(&Entity) -> bool| r.turn.iter().any(|x| x.ents.iter().any(f));
        names(&|y| y.matches(e))
            || (r.direct
                && r.words <= AGREE_WORDS
                && !r.plain(cues)
                && !names(&|y| y.strong && !y.matches(e)))
    };
    let verdict = if st.text.trim_end().ends_with('?') {
        reply.is_some_and(|r| r.direct && r.words <= AGREE_WORDS && r.plain(cues) && !objects(&r))
    } else {
        !reply.is_some_and(|r| objects(&r))
    };
    verdict.then_some(true)
}

/// How an assistant statement speaks of dropping the thing `e`.
enum Drop {
    /// A take-back word in the clause that names it ("I've dropped X").
    TakesBack,
    /// A change of mind to not doing it ("on second thought I won't add X").
    Reverses,
    No,
}

fn reversal(st: &Stmt, e: &Entity, cues: Cues) -> Drop {
    let sc = scope(&st.text, e);
    if cues.takes_back(sc) {
        Drop::TakesBack
    } else if negative_after(st, sc, cues) && marked(st, sc, |c| cues.withdrawal(c)) {
        Drop::Reverses
    } else {
        Drop::No
    }
}

/// Whether the clause `sc` of `st` is negative, or a later clause of `st` that names nothing
/// strong is ("I've changed my mind on X: it adds a dependency, so I'm not adding it").
fn negative_after(st: &Stmt, sc: &str, cues: Cues) -> bool {
    if cues.negative(sc) {
        return true;
    }
    let offset = |c: &str| c.as_ptr() as usize - st.text.as_ptr() as usize;
    let end = offset(sc) + sc.len();
    clauses(&st.text).into_iter().any(|c| {
        offset(c) >= end && cues.negative(c) && !st.ents.iter().any(|x| x.strong && mentions(c, x))
    })
}

/// Whether `e` is struck out in `text`: inside a markdown strikethrough (`~~…~~`, paired in
/// order of appearance).
fn struck_out(text: &str, e: &Entity) -> bool {
    let lower = text.to_ascii_lowercase();
    let marks: Vec<usize> = lower.match_indices("~~").map(|(i, _)| i).collect();
    marks
        .chunks_exact(2)
        .any(|pair| lower[pair[0] + 2..pair[1]].contains(&e.key))
}

/// Longest reply (in words) that reads as plain agreement (or disagreement).
const AGREE_WORDS: usize = 8;
/// A reply comes within this many messages of the assistant's to answer it directly.
const AGREE_GAP: usize = 2;

/// The user's next turn after a statement.
struct Reply<'a> {
    turn: Vec<&'a Stmt>,
    /// Right after the statement.
    direct: bool,
    words: usize,
}

impl Reply<'_> {
    /// Not a question, not negative, naming nothing ("yep, go ahead", "ok").
    fn plain(&self, cues: Cues) -> bool {
        self.turn.iter().all(|r| {
            !r.text.trim_end().ends_with('?')
                && !cues.negative(&r.text)
                && !r.ents.iter().any(|e| e.strong)
        })
    }
}

fn next_reply(stmts: &[Stmt], s: usize) -> Option<Reply<'_>> {
    let st = &stmts[s];
    let first = s + stmts[s..]
        .iter()
        .position(|r| r.origin == Origin::User && r.at > st.at)?;
    let turn: Vec<&Stmt> = stmts[first..]
        .iter()
        .take_while(|r| r.origin == Origin::User && r.turn == stmts[first].turn)
        .collect();
    Some(Reply {
        direct: stmts[first].at <= st.at + AGREE_GAP,
        words: turn.iter().map(|r| r.text.split_whitespace().count()).sum(),
        turn,
    })
}

/// Whether `mark` holds for the clause `sc` (of `st`) or for a clause of `st` that names nothing
/// ("On second thought, keep X off the list").
fn marked(st: &Stmt, sc: &str, mark: impl Fn(&str) -> bool) -> bool {
    mark(sc)
        || clauses(&st.text)
            .into_iter()
            .any(|c| mark(c) && !st.ents.iter().any(|x| x.strong && mentions(c, x)))
}

/// Structure alone: the user brings up again something that was asked for or planned (the
/// thread stands, and is not a prohibition) but never acted upon (no tool call or result names
/// it, in the head or the kept tail), says something else about it than before (the clause does
/// not mostly repeat an earlier one) and nothing new beside it, and the agent goes on calling
/// tools without ever touching it. People take things back in endless words ("X is off the
/// table", "take X off the list"); that the work then moves on without X is what they have in
/// common.
fn dropped(
    stmts: &[Stmt],
    stats: &Stats,
    thread: &[Mention],
    k: usize,
    state: &ThreadState,
    cues: Cues,
) -> bool {
    let m = &thread[k];
    let st = &stmts[m.stmt];
    let e = &st.ents[m.ent];
    if state.withdrawn || state.negative || !e.strong || k == 0 {
        return false;
    }
    if stats.entity_df(e) > FLIP_MAX_DF || stats.in_tools(&e.text) || !stats.calls_after(st.at) {
        return false;
    }
    // Naming something new in the same clause ("IMPORTANT: Y stays read-only" after
    // "IMPORTANT: X stays read-only") is a statement about the new thing, not a take-back.
    let sc = scope(&st.text, e);
    // Insisting on it ("never skip X") is not leaving it behind, nor is answering the
    // assistant's word that it drops it ("I've dropped X" / "wait, we still want X").
    let prev = &thread[k - 1];
    let prev_st = &stmts[prev.stmt];
    let answers_drop = prev_st.origin == Origin::Assistant
        && !matches!(reversal(prev_st, &prev_st.ents[prev.ent], cues), Drop::No);
    if cues.insists(sc) || answers_drop {
        return false;
    }
    let new_name = st.ents.iter().any(|x| {
        x.strong
            && mentions(sc, x)
            && !stmts[..m.stmt]
                .iter()
                .any(|p| p.ents.iter().any(|y| y.matches(x)))
    });
    if new_name {
        return false;
    }
    let earlier = &thread[..k];
    let same_turn = earlier.iter().any(|b| {
        let o = &stmts[b.stmt];
        o.origin == Origin::User && o.turn == st.turn
    });
    let others: Vec<&str> = earlier
        .iter()
        .map(|b| scope(&stmts[b.stmt].text, &stmts[b.stmt].ents[b.ent]))
        .collect();
    !same_turn && !restates(stats, sc, &others, e, cues)
}

/// A question that ends its turn asks and waits for the answer ("what is X for?"); one the user
/// answers in the same turn ("can we not do X? it's a bad idea") is a statement.
fn closing_question(stmts: &[Stmt], s: usize) -> bool {
    let st = &stmts[s];
    let last_in_turn = stmts
        .get(s + 1)
        .is_none_or(|n| n.origin != st.origin || n.turn != st.turn);
    st.text.trim_end().ends_with('?') && last_in_turn
}

/// Content words of a clause: identifier-ish words of four characters or more with a letter
/// (`tern_flags` as well as `read`), not the entity's own, not in a third of the messages or
/// more, not a negation.
fn content_words(stats: &Stats, clause: &str, e: &Entity, cues: Cues) -> HashSet<String> {
    let own: HashSet<&str> = id_words(&e.key).collect();
    let lower = clause.to_lowercase();
    id_words(&lower)
        .filter(|w| w.chars().count() >= 4 && w.chars().any(char::is_alphabetic))
        .filter(|w| !own.contains(w) && (stats.df(w) as usize) * 3 <= stats.docs)
        .filter(|w| !cues.negative(w))
        .map(str::to_string)
        .collect()
}

/// Whether a clause repeats an earlier one: it adds no content word to it ("reminder, tern_flags
/// is read-only" after "The tern_flags table is read-only"), or more than half of the content
/// words of the two are shared (not "keep X out of the config loader" after "wire X into the
/// config loader").
fn restates(stats: &Stats, clause: &str, earlier: &[&str], e: &Entity, cues: Cues) -> bool {
    let words = content_words(stats, clause, e, cues);
    if words.is_empty() {
        return false;
    }
    earlier.iter().any(|c| {
        let before = content_words(stats, c, e, cues);
        let shared = words.intersection(&before).count();
        shared == words.len() || shared * 2 > words.union(&before).count()
    })
}

/// Whether two clauses share a word besides their entity (the same predicate: "modify" in
/// "never modify X" and "you can modify X now"), one that is not in most messages.
fn shares_predicate(stats: &Stats, a: &str, b: &str, ea: &Entity, eb: &Entity, cues: Cues) -> bool {
    let words = |s: &str| -> HashSet<String> {
        id_words(&s.to_lowercase())
            .filter(|w| w.chars().count() >= 3 && w.chars().all(char::is_alphabetic))
            .map(str::to_string)
            .collect()
    };
    let (wa, wb) = (words(a), words(b));
    let own: HashSet<String> = words(&ea.key).union(&words(&eb.key)).cloned().collect();
    wa.intersection(&wb)
        .any(|w| !own.contains(w) && (stats.df(w) as usize) * 3 <= stats.docs && !cues.negative(w))
}

/// Resolve the withdrawals among `stmts` (in conversation order).
pub(super) fn resolve(stmts: &[Stmt], stats: &Stats, cues: Cues) -> Vec<Withdrawal> {
    let mut events: Vec<Withdrawal> = Vec::new();
    let mut superseded: HashSet<usize> = HashSet::new();
    for thread in threads(stmts) {
        let mut open: Vec<usize> = Vec::new();
        let mut state = ThreadState::default();
        let mut last_event = None;
        for (k, m) in thread.iter().enumerate() {
            let st = &stmts[m.stmt];
            let mut changed = false;
            let verdict = match st.origin {
                _ if open.is_empty() => None,
                Origin::User => change(stmts, stats, &thread, k, &state, cues),
                Origin::Assistant => assistant_change(stmts, stats, &thread, k, &state, cues),
                Origin::Prior => None,
            };
            if let Some(negative) = verdict {
                superseded.extend(open.iter().copied());
                last_event = Some(events.len());
                events.push(Withdrawal {
                    latest: m.stmt,
                    earlier: std::mem::take(&mut open),
                    masks: Vec::new(),
                    subject: vec![st.ents[m.ent].clone()],
                    label: None,
                });
                state.withdrawn = !state.withdrawn;
                state.negative = negative;
                changed = true;
            }
            if st.origin != Origin::Assistant {
                if state.last_user.is_none() && !changed {
                    state.negative = cues.negative(scope(&st.text, &st.ents[m.ent]));
                }
                state.last_user = Some(k);
            }
            open.push(m.stmt);
        }
        if let Some(last) = last_event.filter(|_| state.withdrawn) {
            for m in &thread {
                push_mask(&mut events[last].masks, &stmts[m.stmt].ents[m.ent]);
            }
        }
    }
    pronoun_withdrawals(stmts, &mut events, &mut superseded, cues);
    merge(&mut events);
    add_exclusive(stmts, stats, &mut events, &superseded);
    events
}

fn push_mask(masks: &mut Vec<Entity>, e: &Entity) {
    if !masks.iter().any(|x| x.key == e.key) {
        masks.push(e.clone());
    }
}

/// "scratch that": a short user sentence that takes something back without naming anything
/// the conversation named before supersedes the sentence before it in its turn, or else the
/// previous user turn.
fn pronoun_withdrawals(
    stmts: &[Stmt],
    events: &mut Vec<Withdrawal>,
    sup: &mut HashSet<usize>,
    cues: Cues,
) {
    for (s, st) in stmts.iter().enumerate() {
        if st.origin != Origin::User
            || st.text.split_whitespace().count() > PRONOUN_WORDS
            || !cues.withdrawal(&st.text)
            || cues.own_action(&st.text)
            || events.iter().any(|w| w.latest == s)
        {
            continue;
        }
        let named_before = st.ents.iter().any(|e| {
            stmts[..s]
                .iter()
                .any(|p| p.ents.iter().any(|x| x.matches(e)))
        });
        if named_before {
            continue;
        }
        let prev_same_turn = s
            .checked_sub(1)
            .filter(|&p| stmts[p].origin == Origin::User && stmts[p].turn == st.turn);
        let targets: Vec<usize> = match prev_same_turn {
            Some(p) => vec![p],
            None => {
                let prev_turn = stmts[..s]
                    .iter()
                    .rev()
                    .find(|p| p.origin == Origin::User && p.turn < st.turn)
                    .map(|p| p.turn);
                (0..s)
                    .filter(|&p| {
                        stmts[p].origin == Origin::User && Some(stmts[p].turn) == prev_turn
                    })
                    .collect()
            }
        };
        if targets.is_empty() {
            continue;
        }
        sup.extend(targets.iter().copied());
        events.push(Withdrawal {
            latest: s,
            earlier: targets,
            masks: Vec::new(),
            subject: Vec::new(),
            label: None,
        });
    }
}

/// One withdrawal per latest statement, ordered by it.
fn merge(events: &mut Vec<Withdrawal>) {
    events.sort_by_key(|w| w.latest);
    let mut out: Vec<Withdrawal> = Vec::new();
    for w in events.drain(..) {
        match out.last_mut() {
            Some(last) if last.latest == w.latest => {
                for e in w.earlier {
                    if !last.earlier.contains(&e) {
                        last.earlier.push(e);
                    }
                }
                for m in &w.masks {
                    push_mask(&mut last.masks, m);
                }
                for m in &w.subject {
                    push_mask(&mut last.subject, m);
                }
            }
            _ => out.push(w),
        }
    }
    for w in &mut out {
        w.earlier.sort_unstable();
    }
    *events = out;
}

/// Entities that only superseded statements (and the withdrawing one) mention, and that no tool
/// touched, go with the withdrawal: they were part of what was taken back. When the change is
/// about one subject, only those said in the same clause as it go ("Let's do A; B looks nice but
/// nobody can run it": taking B back leaves A).
fn add_exclusive(stmts: &[Stmt], stats: &Stats, events: &mut [Withdrawal], sup: &HashSet<usize>) {
    let masked_any = |events: &[Withdrawal], e: &Entity| {
        events.iter().any(|w| w.masks.iter().any(|m| m.matches(e)))
    };
    for i in 0..events.len() {
        let mut extra = Vec::new();
        let subject = &events[i].subject;
        for &s in &events[i].earlier {
            let text = &stmts[s].text;
            for e in &stmts[s].ents {
                let beside = subject.is_empty()
                    || clauses(text)
                        .iter()
                        .any(|c| mentions(c, e) && subject.iter().any(|x| mentions(c, x)));
                if !beside {
                    continue;
                }
                // Used in a statement that still stands: the user's, or the assistant's from
                // before the change (after it, the assistant only echoes the change).
                let live_elsewhere = stmts.iter().enumerate().any(|(j, o)| {
                    (o.origin != Origin::Assistant || j < events[i].latest)
                        && !sup.contains(&j)
                        && j != events[i].latest
                        && o.ents.iter().any(|x| x.matches(e))
                });
                // What the latest word names is settled by its thread, not here.
                let named_by_latest = stmts[events[i].latest].ents.iter().any(|x| x.matches(e));
                let code =
                    e.kind == Kind::Code && !named_by_latest && stats.entity_df(e) <= FLIP_MAX_DF;
                if code && !live_elsewhere && !stats.in_tools(&e.text) && !masked_any(events, e) {
                    extra.push(e.clone());
                }
            }
        }
        for e in &extra {
            push_mask(&mut events[i].masks, e);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Masking and rendering
// ---------------------------------------------------------------------------------------------

/// Replaces withdrawn entities by their `[Wn]` label.
#[derive(Default)]
pub(super) struct Masker {
    /// (lowercase pattern, kind, label), longest pattern first.
    pats: Vec<(String, Kind, String)>,
}

impl Masker {
    pub fn add(&mut self, e: &Entity, label: &str) {
        let p = e.text.to_ascii_lowercase();
        if p.chars().count() >= 3 && !self.pats.iter().any(|(x, _, _)| *x == p) {
            self.pats.push((p, e.kind, label.to_string()));
            self.pats
                .sort_by(|a, b| b.0.len().cmp(&a.0.len()).then(a.0.cmp(&b.0)));
        }
    }

    /// `s` with every withdrawn entity replaced by its label.
    pub fn apply(&self, s: &str) -> String {
        let mut out = s.to_string();
        for (p, kind, label) in &self.pats {
            out = replace_all(&out, p, *kind, label);
        }
        out
    }
}

fn is_word_char(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

fn replace_all(s: &str, pat: &str, kind: Kind, label: &str) -> String {
    let lower = s.to_ascii_lowercase();
    let mut out = String::with_capacity(s.len());
    let mut last = 0;
    for (at, _) in lower.match_indices(pat) {
        if at < last {
            continue;
        }
        let end = at + pat.len();
        if kind == Kind::Word {
            let before = s[..at].chars().next_back().is_some_and(is_word_char);
            let after = s[end..].chars().next().is_some_and(is_word_char);
            if before || after {
                continue;
            }
        }
        out.push_str(&s[last..at]);
        out.push_str(label);
        last = end;
    }
    out.push_str(&s[last..]);
    out
}

/// Earlier statements quoted per withdrawal (the latest ones).
const MAX_EARLIER: usize = 3;

/// The line of one withdrawal in the `## Withdrawn or superseded` section.
pub(super) fn render_item(w: &Withdrawal, stmts: &[Stmt]) -> String {
    let mut line = String::from("- ");
    if let Some(l) = &w.label {
        let names: Vec<String> = w.masks.iter().map(|e| format!("`{}`", e.text)).collect();
        line.push_str(&format!("{l} = {}. ", names.join(", ")));
    }
    let mut earlier: Vec<String> = Vec::new();
    for &s in w.earlier.iter().rev() {
        let q = format!(
            "({}) {}",
            stmts[s].origin.name(),
            quote(&stmts[s].text, EARLIER_CHARS)
        );
        if !earlier.contains(&q) && earlier.len() < MAX_EARLIER {
            earlier.push(q);
        }
    }
    earlier.reverse();
    line.push_str(&format!("Earlier {}", earlier.join(" / ")));
    let latest = &stmts[w.latest];
    line.push_str(&format!(
        " → latest word ({}): {}",
        latest.origin.name(),
        quote(&latest.text, LATEST_CHARS)
    ));
    line
}

/// Labels (`[W3]` → 3) and masked entities of the items of a carried-forward withdrawn section.
pub(super) fn parse_prior_item(line: &str) -> Option<(usize, Vec<String>)> {
    let rest = line.strip_prefix("- [W")?;
    let (num, rest) = rest.split_once(']')?;
    let n: usize = num.parse().ok()?;
    let head = rest.split(". Earlier").next().unwrap_or("");
    let names = super::text::backtick_spans(head)
        .into_iter()
        .map(str::to_string)
        .collect();
    Some((n, names))
}

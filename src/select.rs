//! Selecting conversations: ids, the most recent one, utilization, recency, idleness, provider
//! and a limit, combined with AND.
//!
//! Selection reads only [`ConversationMeta`] (stored usage and timestamps), never message
//! bodies, and streams: batch selectors walk the store in listing order (most recently updated
//! first by kodelet's stored text, ties in rowid order) and stop at `--limit`. `--id` keeps the
//! order given; `--follow` picks the newest `updated_at` by parsed time.

use std::time::Duration;

use chrono::{DateTime, FixedOffset};
use serde::Serialize;

use crate::error::{Error, Result};
use crate::store::kind::Unrated;
use crate::store::{ConversationMeta, Facts, Store};

/// Default `--idle` for batch selectors: leave conversations touched this recently alone.
pub const DEFAULT_IDLE: Duration = Duration::from_secs(10 * 60);

/// Why a conversation was selected.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Reason {
    /// Named with `--id` or picked by `--follow`.
    Manual,
    /// Matched `--all-over`.
    Threshold,
    /// Matched `--older-than` / `--since`.
    Recency,
    /// Listed with no selector at all (`list` only).
    All,
}

impl Reason {
    pub fn name(self) -> &'static str {
        match self {
            Reason::Manual => "manual",
            Reason::Threshold => "threshold",
            Reason::Recency => "recency",
            Reason::All => "all",
        }
    }
}

/// The selectors of one command line.
#[derive(Debug, Clone, Default)]
pub struct Selector {
    pub ids: Vec<String>,
    pub follow: bool,
    pub all_over: Option<f64>,
    pub older_than: Option<Duration>,
    pub since: Option<Duration>,
    /// `None`: the default applies to batch selectors; `Some(0)` disables.
    pub idle: Option<Duration>,
    pub provider: Option<String>,
    pub limit: Option<usize>,
    /// Context limit used when a conversation has no stored maxContextWindow.
    pub context_limit: Option<i64>,
    /// `--include-archived`: batch selections take archived conversations too.
    pub include_archived: bool,
}

/// The fate of one conversation during selection.
#[derive(Debug, Clone)]
pub enum Outcome {
    Selected {
        meta: ConversationMeta,
        reason: Reason,
    },
    /// It matched the explicit selectors but is excluded, with the reason shown to the user.
    Skipped {
        meta: ConversationMeta,
        reason: Reason,
        why: String,
        /// The reason in a few words, the same for every conversation skipped for it (the CLI
        /// summarizes skips by it: `116 skipped: no context window known — give --context-limit N`).
        summary: &'static str,
    },
    /// It could not be evaluated (missing, unreadable stored data).
    Failed {
        id: String,
        reason: Reason,
        error: String,
    },
}

impl Selector {
    /// Whether any selector was given.
    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
            && !self.follow
            && self.all_over.is_none()
            && self.older_than.is_none()
            && self.since.is_none()
            && self.provider.is_none()
    }

    fn is_manual(&self) -> bool {
        !self.ids.is_empty() || self.follow
    }

    fn reason(&self) -> Reason {
        if self.is_manual() {
            Reason::Manual
        } else if self.all_over.is_some() {
            Reason::Threshold
        } else if self.older_than.is_some() || self.since.is_some() {
            Reason::Recency
        } else {
            Reason::All
        }
    }

    /// The idle window in force: explicit, else the default for batch selectors, else none.
    pub fn idle_window(&self) -> Option<Duration> {
        match self.idle {
            Some(d) if d.is_zero() => None,
            Some(d) => Some(d),
            None if self.is_manual() => None,
            // `list` with no selector shows everything; any batch selection (a threshold,
            // recency, or only --provider) leaves recently active conversations alone.
            None if self.is_empty() => None,
            None => Some(DEFAULT_IDLE),
        }
    }

    /// Reject contradictory selector sets.
    pub fn validate(&self) -> Result<()> {
        if self.follow && !self.ids.is_empty() {
            return Err(Error::Usage("--follow and --id cannot be combined".into()));
        }
        for id in &self.ids {
            crate::store::prefix::not_empty(id)?;
        }
        if let Some(r) = self.all_over {
            check_ratio("--all-over", r)?;
        }
        if self.limit == Some(0) {
            return Err(Error::Usage("--limit must be at least 1".into()));
        }
        Ok(())
    }

    /// Evaluate the filters on one conversation (in `store`: an idle skip of agent-db's own
    /// write is told apart, [`own_write`]).
    fn evaluate(
        &self,
        store: Option<&Store>,
        meta: ConversationMeta,
        now: &DateTime<FixedOffset>,
        unrated: Unrated,
    ) -> Outcome {
        let reason = self.reason();
        if let Some(p) = &self.provider {
            let format_name = meta.format().map(|f| f.name()).unwrap_or("");
            if &meta.provider != p && format_name != p {
                return not_matched(meta, reason);
            }
        }
        let mut verdict = self.verdict(&meta.facts(), now, unrated);
        if let Some(store) = store {
            verdict = own_write(store, &meta.id, verdict);
        }
        match verdict {
            Verdict::Selected => Outcome::Selected { meta, reason },
            Verdict::Dropped => not_matched(meta, reason),
            Verdict::Skipped { why, summary } => Outcome::Skipped {
                meta,
                reason,
                why,
                summary,
            },
            Verdict::Failed(error) => Outcome::Failed {
                id: meta.id,
                reason,
                error,
            },
        }
    }

    /// Whether a conversation's `updated_at` decides (recency, or an idle window).
    fn needs_time(&self) -> bool {
        self.older_than.is_some() || self.since.is_some() || self.idle_window().is_some()
    }

    /// Every filter but `--provider` on what the selection reads of a conversation.
    fn verdict(&self, f: &Facts<'_>, now: &DateTime<FixedOffset>, unrated: Unrated) -> Verdict {
        let age = if self.needs_time() {
            match f.updated() {
                Ok(t) => Some(now.signed_duration_since(t)),
                Err(e) => return Verdict::Failed(e.to_string()),
            }
        } else {
            None
        };
        let age_std = age.map(|a| a.to_std().unwrap_or(Duration::ZERO));
        if let (Some(d), Some(a)) = (self.older_than, age_std) {
            if a < d {
                return Verdict::Dropped;
            }
        }
        if let (Some(d), Some(a)) = (self.since, age_std) {
            if a > d {
                return Verdict::Dropped;
            }
        }
        if let Some(ratio) = self.all_over {
            if let Some(problem) = f.problem {
                return Verdict::Failed(problem.to_string());
            }
            if let Some(corrupt) = crate::store::corrupt_usage(f.current_context, f.max_context) {
                return Verdict::Failed(corrupt);
            }
            match f.utilization(self.context_limit) {
                Some(u) if crate::store::over_threshold(u, ratio) => {}
                Some(_) => return Verdict::Dropped,
                None => {
                    let (why, summary) = if f.current_context.is_none() {
                        (unrated.no_usage, SKIP_NO_USAGE)
                    } else {
                        (unrated.no_window, SKIP_NO_WINDOW)
                    };
                    return Verdict::Skipped {
                        why: why.to_string(),
                        summary,
                    };
                }
            }
        }
        if let Some(v) = self.set_aside(f) {
            return v;
        }
        if let (Some(idle), Some(a)) = (self.idle_window(), age_std) {
            if a < idle {
                let why = format!(
                    "active: updated {} ago, within the idle window of {} (--idle)",
                    short_duration(a),
                    humantime::format_duration(idle)
                );
                return Verdict::Skipped {
                    why,
                    summary: SKIP_ACTIVE,
                };
            }
        }
        Verdict::Selected
    }

    /// A conversation a batch selection leaves out although it matches, by the agent's own
    /// standing of it: archived (unless `--include-archived`), or a child session (when any
    /// selector but `--provider` is given; a plain `list` shows children, marked). A
    /// conversation named by ID is never set aside.
    fn set_aside(&self, f: &Facts<'_>) -> Option<Verdict> {
        if !self.ids.is_empty() {
            return None;
        }
        if f.archived && !self.include_archived {
            return Some(Verdict::Skipped {
                why:
                    "archived in the agent (--include-archived selects it; naming its ID does too)"
                        .into(),
                summary: SKIP_ARCHIVED,
            });
        }
        let batch = self.follow
            || self.all_over.is_some()
            || self.older_than.is_some()
            || self.since.is_some();
        match f.parent {
            Some(p) if batch => Some(Verdict::Skipped {
                why: if p.is_empty() {
                    "a session the agent keeps for itself (a subagent's or a hidden one, parent not recorded): \
                     the agent does not list it; name its ID to compact it"
                        .to_string()
                } else {
                    format!(
                        "a child session (a subagent's) of {p}: the agent works in it for its parent; name its ID to compact it"
                    )
                },
                summary: SKIP_CHILD,
            }),
            _ => None,
        }
    }

    /// `--follow`: the conversation updated last (of those not set aside), and the conversations
    /// whose update time cannot be read.
    fn latest(&self, store: &Store) -> Result<(Option<ConversationMeta>, Vec<Outcome>)> {
        let mut best: Option<(DateTime<FixedOffset>, ConversationMeta)> = None;
        let mut failures = Vec::new();
        store.scan(|meta| {
            if self.set_aside(&meta.facts()).is_some() {
                return true;
            }
            match meta.updated() {
                Ok(t) => {
                    if best.as_ref().is_none_or(|(b, _)| t > *b) {
                        best = Some((t, meta));
                    }
                }
                Err(e) => failures.push(Outcome::Failed {
                    id: meta.id.clone(),
                    reason: self.reason(),
                    error: e.to_string(),
                }),
            }
            true
        })?;
        Ok((best.map(|(_, meta)| meta), failures))
    }

    /// Run the selection, streaming outcomes to `f` (which returns `false` to stop). Conversations
    /// that simply do not match are not reported; skipped ones carry a reason.
    pub fn run(
        &self,
        store: &Store,
        now: &DateTime<FixedOffset>,
        mut f: impl FnMut(Outcome) -> bool,
    ) -> Result<()> {
        self.validate()?;
        let unrated = store.kind.unrated();
        let mut selected = 0usize;
        let limit = self.limit.unwrap_or(usize::MAX);
        let mut emit = |o: Outcome, f: &mut dyn FnMut(Outcome) -> bool| -> bool {
            match &o {
                Outcome::Skipped { why, .. } if why.is_empty() => return true,
                Outcome::Selected { .. } => selected += 1,
                _ => {}
            }
            let go_on = f(o);
            go_on && selected < limit
        };
        if !self.ids.is_empty() {
            // The one resolver: a full ID or a unique prefix; an ID that names nothing or an
            // ambiguous prefix stops the run before anything is reported (exit 5).
            for id in store.resolve_ids(&self.ids)? {
                let o = match store.meta(&id) {
                    Ok(meta) => left_alone(self.evaluate(Some(store), meta, now, unrated), |id| {
                        store.left_alone(id)
                    }),
                    Err(e) => Outcome::Failed {
                        id,
                        reason: self.reason(),
                        error: e.to_string(),
                    },
                };
                if !emit(o, &mut f) {
                    break;
                }
            }
            return Ok(());
        }
        if self.follow {
            let (best, failures) = self.latest(store)?;
            for o in failures {
                f(o);
            }
            match best {
                Some(meta) => {
                    let o = self.evaluate(Some(store), meta, now, unrated);
                    emit(left_alone(o, |id| store.left_alone(id)), &mut f);
                }
                None => {
                    return Err(Error::NotFound(
                        "--follow: the store has no conversations to follow".into(),
                    ))
                }
            }
            return Ok(());
        }
        // What the store's own rules leave alone, read once for the batch where the store can.
        let now_left_alone = store.left_alone_now()?;
        store.scan_prefiltered(self.prefilter(), |meta| {
            let o = left_alone(self.evaluate(Some(store), meta, now, unrated), |id| {
                match &now_left_alone {
                    Some(known) => Ok(known.get(id).cloned()),
                    None => store.left_alone(id),
                }
            });
            emit(o, &mut f)
        })
    }
}

impl Selector {
    /// [`Selector::run`] for a caller that needs only each conversation's id (a listing of
    /// ids): a batch selection without `--provider` reads only the [`Facts`] of each row
    /// ([`Store::scan_facts`]), so no [`ConversationMeta`] is built per row. The same outcomes
    /// in the same order as [`Selector::run`].
    pub fn run_ids(
        &self,
        store: &Store,
        now: &DateTime<FixedOffset>,
        mut f: impl FnMut(Picked<'_>) -> bool,
    ) -> Result<()> {
        if !self.ids.is_empty() || self.follow || self.provider.is_some() {
            return self.run(store, now, |o| f(Picked::of(&o)));
        }
        self.validate()?;
        let unrated = store.kind.unrated();
        let mut selected = 0usize;
        let limit = self.limit.unwrap_or(usize::MAX);
        let now_left_alone = store.left_alone_now()?;
        store.scan_facts(self.prefilter(), |facts| {
            let id = facts.id;
            let (why, error);
            let picked = match own_write(store, id, self.verdict(&facts, now, unrated)) {
                Verdict::Dropped => return true,
                Verdict::Selected => match &now_left_alone {
                    Some(known) => match known.get(id) {
                        None => Picked::Selected(id),
                        Some(w) => Picked::Skipped {
                            id,
                            why: w,
                            summary: SKIP_LEFT_ALONE,
                        },
                    },
                    None => match store.left_alone(id) {
                        Ok(None) => Picked::Selected(id),
                        Ok(Some(w)) => {
                            why = w;
                            Picked::Skipped {
                                id,
                                why: &why,
                                summary: SKIP_LEFT_ALONE,
                            }
                        }
                        Err(e) => {
                            error = e.to_string();
                            Picked::Failed { id, error: &error }
                        }
                    },
                },
                Verdict::Skipped { why: w, summary } => {
                    why = w;
                    Picked::Skipped {
                        id,
                        why: &why,
                        summary,
                    }
                }
                Verdict::Failed(e) => {
                    error = e;
                    Picked::Failed { id, error: &error }
                }
            };
            if matches!(picked, Picked::Selected(_)) {
                selected += 1;
            }
            f(picked) && selected < limit
        })
    }

    fn prefilter(&self) -> crate::store::Prefilter {
        crate::store::Prefilter {
            all_over: self.all_over,
            context_limit: self.context_limit,
            times: self.needs_time(),
        }
    }
}

/// [`Verdict`] of every filter but `--provider`.
enum Verdict {
    Selected,
    /// It does not match: not reported.
    Dropped,
    Skipped {
        why: String,
        summary: &'static str,
    },
    Failed(String),
}

/// [`Outcome`] by id alone ([`Selector::run_ids`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Picked<'a> {
    Selected(&'a str),
    Skipped {
        id: &'a str,
        why: &'a str,
        summary: &'static str,
    },
    Failed {
        id: &'a str,
        error: &'a str,
    },
}

impl<'a> Picked<'a> {
    fn of(o: &'a Outcome) -> Picked<'a> {
        match o {
            Outcome::Selected { meta, .. } => Picked::Selected(&meta.id),
            Outcome::Skipped {
                meta, why, summary, ..
            } => Picked::Skipped {
                id: &meta.id,
                why,
                summary,
            },
            Outcome::Failed { id, error, .. } => Picked::Failed { id, error },
        }
    }
}

/// A utilization ratio must be in [0, 1] (0 selects every conversation whose utilization is
/// known). Users often type a percentage (`70`) or tenths (`7`): the error's hint then
/// says what they probably meant; a value with no likely reading (`1.5`) gets the range
/// explained instead of a guess.
pub fn check_ratio(flag: &str, r: f64) -> Result<()> {
    if (0.0..=1.0).contains(&r) {
        return Ok(());
    }
    let hint = match ratio_guess(r) {
        Some(g) => format!(
            "did you mean {flag} {}? ({flag} {}% works too)",
            (g * 1000.0).round() / 1000.0,
            (g * 1000.0).round() / 10.0
        ),
        None => "the ratio is the share of the context window in use: 0 is empty, 1 is full; \
                 give a number from 0 to 1 (0.7) or a percentage (70%)"
            .to_string(),
    };
    Err(Error::Usage(format!(
        "{flag} takes a utilization ratio from 0 to 1, such as 0.7; got {r}"
    ))
    .with_hint(hint))
}

/// What an out-of-range ratio probably meant: tenths (`7` for 0.7) or a percentage (`70`).
pub fn ratio_guess(r: f64) -> Option<f64> {
    if r.fract() == 0.0 && (2.0..=9.0).contains(&r) {
        Some(r / 10.0)
    } else if (10.0..=100.0).contains(&r) {
        Some(r / 100.0)
    } else {
        None
    }
}

/// Parse a utilization ratio for the CLI: a number (`0.7`) or a percentage (`70%`, which is
/// 0.7). The range is checked later ([`check_ratio`]), so the error can say what was meant.
pub fn parse_ratio(s: &str) -> std::result::Result<f64, String> {
    let t = s.trim();
    let (num, pct) = match t.strip_suffix('%') {
        Some(n) => (n.trim(), true),
        None => (t, false),
    };
    match num.parse::<f64>() {
        Ok(v) if v.is_finite() => Ok(if pct { v / 100.0 } else { v }),
        _ => Err("expected a ratio from 0 to 1 (0.7) or a percentage (70%)".to_string()),
    }
}

/// A warning when `--provider` names something no conversation in the store has, listing what
/// the store does have (`None` when it matches, or when no provider was given).
pub fn provider_warning(selector: &Selector, store: &Store) -> Result<Option<String>> {
    let Some(wanted) = selector.provider.as_deref() else {
        return Ok(None);
    };
    let present = store.providers()?;
    let matches = present
        .iter()
        .any(|p| store.kind.provider_matches(p, wanted));
    if matches {
        return Ok(None);
    }
    let shown = if present.is_empty() {
        "none (the store has no conversations)".to_string()
    } else {
        present.join(", ")
    };
    // The store's own message formats, which `--provider` also matches.
    let formats: Vec<String> = store
        .kind
        .codecs()
        .iter()
        .map(|f| f.name().to_string())
        .filter(|f| !present.contains(f))
        .collect();
    let also = match formats.as_slice() {
        [] => String::new(),
        [one] => format!(" (format {one} is accepted too: every conversation of this store)"),
        many => format!(
            " (formats {} are accepted too)",
            crate::util::join_and(many, "and")
        ),
    };
    Ok(Some(format!(
        "no conversation in this store has provider {wanted:?}; providers present: {shown}{also}"
    )))
}

/// A conversation the selectors chose is skipped when the agent itself never compacts it
/// ([`Store::left_alone`]: a goose session whose provider manages its own context, a kodelet
/// conversation with a running turn), with the
/// store's reason; a failure to find out fails that conversation only.
fn left_alone(o: Outcome, why: impl FnOnce(&str) -> Result<Option<String>>) -> Outcome {
    let Outcome::Selected { meta, reason } = o else {
        return o;
    };
    match why(&meta.id) {
        Ok(None) => Outcome::Selected { meta, reason },
        Ok(Some(why)) => Outcome::Skipped {
            meta,
            reason,
            why,
            summary: SKIP_LEFT_ALONE,
        },
        Err(e) => Outcome::Failed {
            id: meta.id,
            reason,
            error: e.to_string(),
        },
    }
}

fn not_matched(meta: ConversationMeta, reason: Reason) -> Outcome {
    Outcome::Skipped {
        meta,
        reason,
        why: String::new(),
        summary: "",
    }
}

/// [`Outcome::Skipped`]'s summary: the store records no usage for the conversation.
pub const SKIP_NO_USAGE: &str = "no context usage recorded";
/// [`Outcome::Skipped`]'s summary: no context window is known for the conversation.
pub const SKIP_NO_WINDOW: &str = "no context window known — give --context-limit N";
/// [`Outcome::Skipped`]'s summary: the store's own rules leave it alone ([`left_alone`]).
pub const SKIP_LEFT_ALONE: &str =
    "left to the agent (it manages this context itself, is running a turn in it now, or has an undo pending)";
/// [`Outcome::Skipped`]'s summary: archived in the agent.
pub const SKIP_ARCHIVED: &str = "archived in the agent (--include-archived selects them)";
/// [`Outcome::Skipped`]'s summary: a child session (a subagent's).
pub const SKIP_CHILD: &str = "child sessions (a subagent's; name one by ID to compact it)";
/// [`Outcome::Skipped`]'s summary: updated within the idle window.
pub const SKIP_ACTIVE: &str = "active within the idle window (--idle 0 includes them)";
/// [`Outcome::Skipped`]'s summary: within the idle window, but the last change is agent-db's
/// own compaction ([`own_write`]).
pub const SKIP_COMPACTED: &str = "compacted by agent-db within the idle window, nothing new since";

/// An idle-window skip whose last change is agent-db's own compaction (nothing written since):
/// said so, not blamed on a live agent. Any other verdict, or a store that cannot tell, as is.
fn own_write(store: &Store, id: &str, v: Verdict) -> Verdict {
    match v {
        Verdict::Skipped {
            summary: SKIP_ACTIVE,
            why,
        } => match crate::archive::restore::own_last_change(store, id) {
            Ok(Some(age)) => Verdict::Skipped {
                why: format!("compacted by agent-db {age} ago; nothing new since"),
                summary: SKIP_COMPACTED,
            },
            _ => Verdict::Skipped {
                why,
                summary: SKIP_ACTIVE,
            },
        },
        v => v,
    }
}

pub use crate::util::short_duration;

/// Parse a humantime duration (`30d`, `12h`, `0`) for the CLI.
pub fn parse_duration(s: &str) -> std::result::Result<Duration, String> {
    if s.trim() == "0" {
        return Ok(Duration::ZERO);
    }
    humantime::parse_duration(s.trim()).map_err(|e| format!("{e} (examples: 30d, 12h, 10m, 0)"))
}

#[cfg(test)]
mod threshold_tests {
    use super::*;
    use crate::store::Prefilter;
    use proptest::prelude::*;

    #[test]
    fn an_out_of_range_ratio_carries_its_guess_as_a_hint_not_as_text() {
        let e = check_ratio("--all-over", 70.0).unwrap_err();
        assert_eq!(
            e.to_string(),
            "--all-over takes a utilization ratio from 0 to 1, such as 0.7; got 70"
        );
        assert!(!e.to_string().contains("hint:"), "{e}");
        assert_eq!(
            e.hint(),
            Some("did you mean --all-over 0.7? (--all-over 70% works too)")
        );
        assert_eq!(e.exit_code(), crate::error::exit::USAGE);
    }

    fn meta(current: Option<i64>, max: Option<i64>, problem: bool) -> ConversationMeta {
        ConversationMeta {
            id: "c".into(),
            name: None,
            provider: "anthropic".into(),
            codec: None,
            api_mode: None,
            model: None,
            message_count: None,
            current_context: current,
            max_context: max,
            input_tokens: None,
            output_tokens: None,
            cwd: None,
            created_at: "2026-01-01T00:00:00Z".into(),
            updated_at: "2026-01-01T00:00:00Z".into(),
            problem: problem.then(|| "bad usage".to_string()),
            parent: None,
            archived: false,
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]
        /// The scans' prefilter drops exactly the conversations `--all-over` silently does not
        /// match, and a row it keeps is selected exactly when its utilization, worked out here
        /// from the two numbers, is at or over the ratio.
        #[test]
        fn prefilter_is_the_selections_rule(
            current in prop::option::of(prop_oneof![Just(0i64), Just(140_000), 0i64..2_000_000]),
            max in prop::option::of(prop_oneof![Just(0i64), Just(-5), Just(200_000), 1i64..2_000_000]),
            limit in prop::option::of(prop_oneof![Just(0i64), Just(200_000), 1i64..2_000_000]),
            ratio in prop_oneof![Just(0.0), Just(0.7), Just(1.0), 0.0f64..1.5],
            problem in prop::bool::weighted(0.1),
        ) {
            let m = meta(current, max, problem);
            let sel = Selector {
                all_over: Some(ratio),
                idle: Some(Duration::ZERO),
                context_limit: limit,
                ..Selector::default()
            };
            let now = crate::gotime::parse("2026-02-01T00:00:00Z").unwrap();
            let unrated = Unrated { no_usage: "no usage", no_window: "no window" };
            let outcome = sel.evaluate(None, m.clone(), &now, unrated);
            let dropped = matches!(&outcome, Outcome::Skipped { why, .. } if why.is_empty());
            let p = Prefilter { all_over: Some(ratio), context_limit: limit, times: false };
            prop_assert_eq!(p.keeps(&m), !dropped);
            // The oracle: the ratio of the two stored numbers, the window falling back to a
            // positive --context-limit.
            let window = max.filter(|m| *m > 0).or(limit.filter(|l| *l > 0));
            // A negative window is corrupt usage: reported by name (failed), never rated.
            let corrupt = max.is_some_and(|m| m < 0);
            if corrupt && !problem {
                prop_assert!(matches!(outcome, Outcome::Failed { .. }), "{outcome:?}");
            } else if let (false, Some(c), Some(w)) = (problem, current, window) {
                let selected = matches!(outcome, Outcome::Selected { .. });
                prop_assert_eq!(selected, (c as f64) / (w as f64) >= ratio);
            }
        }
    }
}

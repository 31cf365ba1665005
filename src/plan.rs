//! Planning one conversation: load it, decode its messages, count tokens and decide the split.
//!
//! A dry run then runs offline strategies for exact figures (a strategy that calls a model only
//! estimates) and writes nothing. The plan keeps the loaded row and decoded messages so the compactor
//! and the writer work from exactly what was read (the writer re-checks the version token).

use crate::error::{Error, Result};
use crate::message::{self, Format, Message};
use crate::select::Reason;
use crate::split::{self, Decision, View};
use crate::store::{ConversationMeta, Store, StoredConversation};
use crate::tokens;

/// Planning settings.
#[derive(Debug, Clone, Default)]
pub struct PlanOptions {
    /// Tail budget; `None` = chosen from `target`, else [`split::default_keep_tokens`].
    pub keep_tokens: Option<usize>,
    /// Overrides a missing or zero stored maxContextWindow.
    pub context_limit: Option<i64>,
    /// The utilization a compaction should land at or under (`--target`).
    pub target: Option<f64>,
    /// The most tokens the strategy's summary can take ([`crate::compact::Strategy::summary_reserve`]).
    pub summary_reserve: usize,
    /// The stall guard ([`StallGuard`]); `None` = off (`--force`).
    pub stall: Option<StallGuard>,
    /// Leave alone a conversation whose stored utilization is already at or under `target`
    /// (when the target decides the tail, that is without `keep_tokens`); off with `--force`.
    pub skip_under_target: bool,
    /// The least share of its tokens a compaction must save to be written
    /// (`compact.min_saving`); `None` = any saving (`--force`).
    pub min_saving: Option<f64>,
    /// `--force`: a conversation whose messages all fit the kept tail the target allows is
    /// compacted anyway, keeping the newer half of its tokens verbatim (without `keep_tokens`;
    /// an explicit budget still decides).
    pub force: bool,
}

pub use crate::config::{StallGuard, DEFAULT_TARGET};

/// Where a compaction should land, and what it cannot shrink.
///
/// A conversation's utilization is one figure everywhere: its stored context over its window
/// ([`crate::store::utilization`]), the figure `list`, `show` and `--all-over` use. Estimates
/// after a compaction are in the same units: agent-db's count of the new history, scaled to
/// the agent's count where agent-db counts the messages higher than the agent recorded, plus
/// the part of the stored context that is not in the messages.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Landing {
    /// The context window.
    pub limit: i64,
    /// The stored context (what the agent recorded), in tokens.
    pub stored: usize,
    /// Stored context minus agent-db's count of the messages (system prompt, tool definitions,
    /// anything else the agent counts): what compaction cannot shrink.
    pub overhead: usize,
    /// The stored context's share of each token agent-db counts in the messages: 1, or less
    /// when agent-db counts the messages higher than the agent's stored context.
    pub scale: f64,
    /// Utilization before: the stored utilization (`stored / limit`).
    pub before: f64,
}

impl Landing {
    /// The landing of a conversation with `stored` tokens of context in a window of `limit`,
    /// whose messages agent-db counts at `counted`.
    pub fn new(limit: i64, stored: usize, counted: usize) -> Landing {
        let scale = if counted > stored && counted > 0 {
            stored as f64 / counted as f64
        } else {
            1.0
        };
        Landing {
            limit,
            stored,
            overhead: stored.saturating_sub(counted),
            scale,
            before: stored as f64 / limit as f64,
        }
    }

    /// The context, in the agent's units, with `tokens` of messages (agent-db's count): what
    /// a store records as the context after a compaction.
    pub fn context(&self, tokens: usize) -> usize {
        self.overhead + (tokens as f64 * self.scale).round() as usize
    }

    /// Estimated utilization with `tokens` of messages.
    pub fn utilization(&self, tokens: usize) -> f64 {
        self.context(tokens) as f64 / self.limit as f64
    }
}

/// Why a compaction from `before` to `after` tokens is not written, when it saves less than
/// `min_saving` of its tokens.
pub fn too_little_saved(before: usize, after: usize, min_saving: f64) -> Option<String> {
    if before == 0 {
        return None;
    }
    let saved = 1.0 - after as f64 / before as f64;
    (saved < min_saving).then(|| {
        format!(
            "not worth it: compacting would save only {:.0}% of its tokens ({} → {}), less than \
             the minimum of {:.0}% (compact.min_saving), so nothing was written; --force compacts it anyway",
            saved * 100.0,
            crate::util::thousands(before),
            crate::util::thousands(after),
            min_saving * 100.0
        )
    })
}

/// A conversation loaded and decoded.
#[derive(Debug, Clone)]
pub struct Loaded {
    pub row: StoredConversation,
    pub format: Format,
    pub messages: Vec<Message>,
    pub tokens: Vec<usize>,
}

impl Loaded {
    pub fn total_tokens(&self) -> usize {
        self.tokens.iter().sum()
    }
}

/// The plan for one conversation.
#[derive(Debug, Clone)]
pub struct Plan {
    pub meta: ConversationMeta,
    pub reason: Reason,
    pub loaded: Loaded,
    pub keep_tokens: usize,
    pub decision: Decision,
    /// The window, overhead and stored utilization, when the store records them.
    pub landing: Option<Landing>,
    /// Why `--target` cannot be reached, when it cannot (the overhead alone is above it).
    pub target_note: Option<String>,
    /// `--target`, when it decides the kept tail (no `--keep-tokens`).
    pub target: Option<f64>,
    /// The head's artifacts ([`crate::retention::extract`]), kept when the head is released.
    pub artifacts: Option<crate::retention::Artifacts>,
    /// For a conversation agent-db compacted before: what its new summary is written from.
    pub resummary: Option<Resummary>,
}

/// What the summary of a re-compaction is written from ([`originals`]).
#[derive(Debug, Clone)]
pub enum Resummary {
    /// The original messages before the new kept tail, read back from the archive of every
    /// earlier compaction plus what came after them, and their tokens.
    Originals {
        head: Vec<Message>,
        head_tokens: usize,
        compactions: usize,
        /// How many leading messages of `head` are the agent's own summary, where only the
        /// store can tell (`StoredConversation::agent_summary`).
        agent_summary: usize,
    },
    /// The originals cannot be read back (why): the earlier summary is summarized again.
    CarriedSummary(String),
}

impl Plan {
    pub fn tokens_before(&self) -> usize {
        self.loaded.total_tokens()
    }

    pub fn split(&self) -> Option<&split::Split> {
        match &self.decision {
            Decision::Compact(s) => Some(s),
            Decision::NoOp(_) => None,
        }
    }

    /// The head: messages to summarize.
    pub fn head(&self) -> &[Message] {
        let cut = self.split().map(|s| s.cut).unwrap_or(0);
        &self.loaded.messages[..cut]
    }

    /// What the summary is written from: the original messages before the kept tail when this
    /// is a re-compaction whose originals the archive holds, else the head.
    pub fn summarized(&self) -> &[Message] {
        match &self.resummary {
            Some(Resummary::Originals { head, .. }) => head,
            _ => self.head(),
        }
    }

    /// The tail: messages kept verbatim.
    pub fn tail(&self) -> &[Message] {
        let cut = self.split().map(|s| s.cut).unwrap_or(0);
        &self.loaded.messages[cut..]
    }

    /// The artifacts the retention score judges the result by: those of what was summarized
    /// ([`Self::summarized`]) and the conversation's open to-dos the store keeps outside the
    /// history.
    pub fn summarized_artifacts(&self) -> crate::retention::Artifacts {
        self.artifacts_of(self.summarized())
    }

    /// The artifacts of `span` ([`crate::retention::extract`]) and the conversation's open
    /// to-dos the store keeps outside the history.
    pub fn artifacts_of(&self, span: &[Message]) -> crate::retention::Artifacts {
        let mut a = crate::retention::extract(span);
        a.add_native_todos(&self.loaded.row.native_todos);
        a
    }

    /// Index of the latest real user instruction (not a summary agent-db put first).
    pub fn latest_instruction(&self) -> Option<usize> {
        let messages = &self.loaded.messages;
        let prior =
            crate::summary::prior_len(self.loaded.format, messages, self.loaded.row.agent_summary);
        messages
            .iter()
            .enumerate()
            .rev()
            .find(|(i, m)| m.is_user_instruction() && *i >= prior)
            .map(|(i, _)| i)
    }

    /// Free what the rest of a compaction never reads of the head, once a strategy that calls
    /// out has prepared its requests from it: the head's messages keep their place (and their
    /// token counts) but not their content, except the earlier summary at the head's start,
    /// the instruction put back after the summary and the latest instruction (the request's
    /// prompt and the swap read those). A conversation waits on the network with its tail and
    /// requests only; `--concurrency` of them wait at once.
    pub fn release_head(&mut self) {
        let Some(split) = self.split().cloned() else {
            return;
        };
        // The retention score is judged against what the head held (the originals, for a
        // re-compaction that reads them).
        self.artifacts = Some(self.summarized_artifacts());
        if let Some(Resummary::Originals { head, .. }) = &mut self.resummary {
            head.iter_mut().for_each(release);
        }
        let keep = [split.reinsert, self.latest_instruction()];
        for (i, m) in self.loaded.messages[..split.cut].iter_mut().enumerate() {
            if i >= split.prior_len && !keep.contains(&Some(i)) {
                release(m);
            }
        }
    }

    /// Release every message's content (the count stays): once the store's proposal is made,
    /// the rest of a conversation's steps (the write, the hooks after it, the report) read only
    /// its metadata, counts and token figures. Run on the planning pool, so the memory is freed
    /// by the threads that allocated it.
    pub fn release_messages(&mut self) {
        self.loaded.messages.iter_mut().for_each(release);
        if let Some(Resummary::Originals { head, .. }) = &mut self.resummary {
            head.iter_mut().for_each(release);
        }
    }

    /// Tokens after compaction, given the summary's token count.
    pub fn tokens_after(&self, summary_tokens: usize) -> usize {
        match self.split() {
            Some(s) => {
                let reinsert = s.reinsert.map(|i| self.loaded.tokens[i]).unwrap_or(0);
                summary_tokens + tokens::MESSAGE_OVERHEAD + reinsert + s.tail_tokens
            }
            None => self.tokens_before(),
        }
    }
}

/// Drop a message's content, keeping its place (its token count stays in `Loaded::tokens`).
fn release(m: &mut Message) {
    m.blocks = Vec::new();
    m.raw = serde_json::value::RawValue::from_string("null".into()).expect("null is JSON");
}

/// The format of a loaded row, by its store's rule ([`StoredConversation::format`]: the format
/// the metadata states, or where it does not, the one the history's shape shows).
pub fn format_of(row: &StoredConversation, meta: &ConversationMeta) -> Result<Format> {
    row.format(meta)
        .map_err(|why| Error::conversation(&row.id, why.to_string()))
}

/// Decode a loaded row.
pub fn decode(row: StoredConversation, meta: &ConversationMeta) -> Result<Loaded> {
    let format = format_of(&row, meta)?;
    let messages =
        message::decode_all(format, &row.raw_messages).map_err(|e| Error::decode(&row.id, e))?;
    let tokens = messages
        .iter()
        .map(|m| tokens::message_tokens(format, m))
        .collect();
    Ok(Loaded {
        row,
        format,
        messages,
        tokens,
    })
}

/// Load, decode and split one selected conversation.
pub fn plan(
    store: &Store,
    meta: ConversationMeta,
    reason: Reason,
    opts: &PlanOptions,
) -> Result<Plan> {
    let row = store.load(&meta.id)?;
    let mut plan = if !store.can_keep_tail()? {
        // The store cannot express a kept tail (docker-agent before migration 21): the summary
        // covers the whole history, as the agent's own compaction does there. The row says so.
        let opts = PlanOptions {
            keep_tokens: Some(0),
            ..opts.clone()
        };
        let mut plan = plan_loaded(row, meta, reason, &opts)?;
        let note = format!(
            "this {} file cannot keep a tail (it predates first_kept_entry): the summary replaces \
             the whole history, as the agent's own compaction does there; upgrade the agent to keep \
             recent messages verbatim",
            store.kind.name()
        );
        plan.target_note = Some(match plan.target_note.take() {
            Some(t) => format!("{note}; {t}"),
            None => note,
        });
        plan
    } else {
        plan_loaded(row, meta, reason, opts)?
    };
    // The guard's reason wins over "already small": in a loop it is the reason that matters.
    if let Some(guard) = opts.stall {
        if let Some(last) = crate::archive::restore::last_compaction(store, &plan.meta.id)? {
            if let Some(why) = stalled(&guard, &last, plan.loaded.messages.len()) {
                plan.decision = Decision::NoOp(why);
            }
        }
    }
    if plan.split().is_some_and(|s| s.prior_summary) {
        plan.resummary = originals(store, &plan);
    }
    Ok(plan)
}

/// For a conversation whose history starts with an earlier summary: what its new summary is
/// written from. When agent-db made that summary, the originals are rebuilt from the archive:
/// the first compaction's pre-image, then from each later pre-image the messages after the part
/// the compaction before it wrote (its summary, the instruction it put back, its kept tail),
/// then the messages after the newest compaction's part of the current history, up to the new
/// kept tail. A pre-image that does not start with agent-db's summary (the agent replaced the
/// history in between, e.g. with its own compaction) starts the originals over. `None`: agent-db
/// never compacted it (the earlier summary is another writer's).
pub fn originals(store: &Store, plan: &Plan) -> Option<Resummary> {
    use crate::archive::originals::Originals;
    let split = plan.split()?;
    let found = match store.originals(&plan.meta.id) {
        Ok(Originals::None) => return None,
        Ok(Originals::Unavailable(why)) => return Some(Resummary::CarriedSummary(why)),
        Err(e) => return Some(Resummary::CarriedSummary(e.to_string())),
        Ok(Originals::Found {
            pre_images,
            written_last,
        }) => (pre_images, written_last),
    };
    let format = plan.loaded.format;
    let rebuilt = rebuild(format, &found.0, found.1, &plan.loaded.messages, split.cut);
    Some(match rebuilt {
        Ok((head, agent_summary)) => Resummary::Originals {
            head_tokens: head.iter().map(|m| tokens::message_tokens(format, m)).sum(),
            head,
            compactions: found.0.len(),
            agent_summary,
        },
        Err(why) => Resummary::CarriedSummary(why),
    })
}

/// The originals before the new kept tail (see [`originals`]), and how many of their leading
/// messages are the agent's own summary; `current` is the history now, `cut` its first kept
/// message.
fn rebuild(
    format: Format,
    pre_images: &[crate::archive::originals::PreImage],
    written_last: usize,
    current: &[Message],
    cut: usize,
) -> std::result::Result<(Vec<Message>, usize), String> {
    // Starts with a summary agent-db wrote (where the store's replay puts one: a first user
    // message, or opencode's compaction request and reply).
    let ours = |m: &[Message]| {
        let n = crate::summary::prior_summary_len(format, m);
        n > 0 && crate::summary::is_agent_db_summary(&m[n - 1].text())
    };
    let mut originals: Vec<Message> = Vec::new();
    let mut agent_summary = 0;
    for p in pre_images {
        let messages = message::decode_all(format, &p.history).map_err(|e| {
            format!(
                "the archive of compaction {} does not decode as {}: {e}",
                p.compaction_id,
                format.name()
            )
        })?;
        if p.written_before == 0 || !ours(&messages) {
            originals = messages;
            agent_summary = p.agent_summary;
        } else if messages.len() < p.written_before {
            return Err(format!(
                "the archive of compaction {} is shorter than what the compaction before it wrote",
                p.compaction_id
            ));
        } else {
            originals.extend(messages.into_iter().skip(p.written_before));
        }
    }
    if !ours(current) || current.len() < written_last {
        return Err("the history no longer starts with what agent-db last wrote".into());
    }
    if cut >= written_last {
        originals.extend(current[written_last..cut].iter().cloned());
    } else {
        // The new tail starts inside the tail kept last time: those messages are the
        // originals' last ones.
        let back = written_last - cut;
        let start = originals.len().checked_sub(back).filter(|_| cut > 0);
        let same = start.is_some_and(|s| {
            originals[s..]
                .iter()
                .zip(&current[cut..written_last])
                // Decoded, not byte for byte: the agent may save its history re-encoded.
                .all(|(a, b)| a.role == b.role && a.blocks == b.blocks)
        });
        if !same {
            return Err("the kept tail does not match the archived history".into());
        }
        originals.truncate(start.unwrap_or(0));
    }
    Ok((originals, agent_summary))
}

/// The stall guard's verdict on a conversation agent-db last compacted as `last`.
pub fn stalled(
    guard: &StallGuard,
    last: &crate::archive::restore::LastCompaction,
    messages_now: usize,
) -> Option<String> {
    let new = messages_now.saturating_sub(last.messages_after.max(0) as usize);
    if new < guard.min_new_messages {
        return Some(format!(
            "stall guard: agent-db compacted it {} ago and only {new} message(s) came since \
             (fewer than {}); --force compacts it anyway",
            last.age, guard.min_new_messages
        ));
    }
    if last.tokens_before > 0 {
        let saved = 1.0 - last.tokens_after as f64 / last.tokens_before as f64;
        if saved < guard.min_saving {
            return Some(format!(
                "stall guard: agent-db's last compaction of it saved only {:.0}% (less than {:.0}%), \
                 so another would lose detail for little room; --force compacts it anyway",
                saved * 100.0,
                guard.min_saving * 100.0
            ));
        }
    }
    None
}

/// Plan from an already loaded row.
pub fn plan_loaded(
    row: StoredConversation,
    meta: ConversationMeta,
    reason: Reason,
    opts: &PlanOptions,
) -> Result<Plan> {
    let loaded = decode(row, &meta)?;
    let limit = match meta.max_context {
        Some(m) if m > 0 => Some(m),
        _ => opts.context_limit,
    };
    let landing = match (limit, meta.current_context) {
        (Some(l), Some(current)) if l > 0 && current >= 0 => {
            Some(Landing::new(l, current as usize, loaded.total_tokens()))
        }
        _ => None,
    };
    let mut target_note = None;
    let mut keep_tokens = match (opts.keep_tokens, opts.target, landing) {
        (Some(k), _, _) => k,
        (None, Some(target), Some(land)) => {
            let (keep, note) = tail_for_target(target, &land, opts.summary_reserve);
            target_note = note;
            keep
        }
        _ => split::default_keep_tokens(limit),
    };
    let views: Vec<View> = loaded
        .messages
        .iter()
        .zip(&loaded.tokens)
        .map(|(m, t)| View::of(m, *t))
        .collect();
    let prior_len =
        crate::summary::prior_len(loaded.format, &loaded.messages, loaded.row.agent_summary);
    let mut decision = split::split_after(&views, keep_tokens, prior_len);
    if opts.force
        && opts.keep_tokens.is_none()
        && matches!(&decision, Decision::NoOp(why) if why.starts_with("already small"))
    {
        // --force forces: the tail the target allows holds every message, so half of them (by
        // tokens) are summarized instead.
        keep_tokens = loaded.total_tokens() / 2;
        decision = split::split_after(&views, keep_tokens, prior_len);
    }
    under_target(&mut decision, opts, landing);
    explain_small(&mut decision, opts, landing, loaded.total_tokens());
    Ok(Plan {
        meta,
        reason,
        loaded,
        keep_tokens,
        decision,
        landing,
        target_note,
        // Only when the target decides the tail (no --keep-tokens).
        target: opts.target.filter(|_| opts.keep_tokens.is_none()),
        artifacts: None,
        resummary: None,
    })
}

/// Without `--force`: a conversation whose context is at or under `--target` is not compacted
/// (it would lose detail for room it does not need).
fn under_target(decision: &mut Decision, opts: &PlanOptions, landing: Option<Landing>) {
    if let (true, None, Some(target), Some(land)) = (
        opts.skip_under_target,
        opts.keep_tokens,
        opts.target,
        landing,
    ) {
        let small = matches!(&*decision, Decision::NoOp(why) if why.starts_with("already small"));
        if land.before <= target && (small || matches!(*decision, Decision::Compact(_))) {
            *decision = Decision::NoOp(format!(
                "under the target: its context is {} of the window, at or under --target {target}, \
                 so compacting it would lose detail for room it does not need; a lower --target, or --force, \
                 compacts it anyway",
                crate::util::percent(land.before)
            ));
        }
    }
}

/// Why a conversation already small is left alone, and what would compact it: a smaller
/// `--keep-tokens`, or nothing when the context is overhead (`total_tokens`: its messages').
fn explain_small(
    decision: &mut Decision,
    opts: &PlanOptions,
    landing: Option<Landing>,
    total_tokens: usize,
) {
    if let Decision::NoOp(why) = decision {
        if why.starts_with("already small") {
            let hint = if opts.keep_tokens.is_some() {
                "a smaller --keep-tokens compacts it"
            } else {
                "nothing to gain; --keep-tokens N with a smaller N compacts it anyway"
            };
            why.push_str(&format!(" ({hint})"));
        }
    }
    if let (Decision::NoOp(why), Some(target), Some(land)) = (decision, opts.target, landing) {
        // Only "already small" is about the budget; empty or one-message histories keep their
        // own reason.
        if land.before > target && opts.keep_tokens.is_none() && why.starts_with("already small") {
            *why = format!(
                "its messages ({} tokens) already fit the kept tail, but the context is {} of the window: \
                 the other {} tokens (system prompt, tool definitions) are overhead compaction cannot shrink, \
                 so --target {target} cannot be reached",
                crate::util::thousands(total_tokens),
                crate::util::percent(land.before),
                crate::util::thousands(land.overhead)
            );
        }
    }
}

/// The kept-tail budget that lands a compaction at `target`: what the window allows at the
/// target, minus the fixed overhead and room for the summary. When the overhead and the summary
/// alone exceed the target, no tail reaches it: shrinking the tail to nothing would lose history
/// for no gain, so the default budget applies ([`split::default_keep_tokens`]) and the note says
/// why the target cannot be reached.
pub fn tail_for_target(
    target: f64,
    land: &Landing,
    summary_reserve: usize,
) -> (usize, Option<String>) {
    let goal = (target * land.limit as f64) as usize;
    let fixed = land.overhead + summary_reserve + tokens::MESSAGE_OVERHEAD;
    if fixed >= goal {
        (
            split::default_keep_tokens(Some(land.limit)),
            Some(target_note(target, land, summary_reserve)),
        )
    } else {
        // The budget is in agent-db's count of the messages.
        (((goal - fixed) as f64 / land.scale) as usize, None)
    }
}

/// Why `--target` cannot be reached when what compaction cannot shrink, plus room for the
/// summary, is already over it: the figures in the agent's units (the stored context, and how
/// much of it agent-db finds in the messages).
pub fn target_note(target: f64, land: &Landing, summary_reserve: usize) -> String {
    use crate::util::{percent, thousands};
    let fixed = land.overhead + summary_reserve + tokens::MESSAGE_OVERHEAD;
    format!(
        "--target {target} cannot be reached: of its stored context of {} tokens, {} are not in its \
         messages (system prompt, tool definitions, whatever else the agent counts) and compaction \
         cannot shrink them; with room for the summary ({} tokens) that is already {} of the window",
        thousands(land.stored),
        thousands(land.overhead),
        thousands(summary_reserve),
        percent(fixed as f64 / land.limit as f64)
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::archive::originals::PreImage;

    /// The registered codec named `name` (the formats kodelet stores).
    fn codec(name: &str) -> crate::message::Format {
        crate::store::StoreKind::codec(name).expect("a registered codec")
    }

    const SUMMARY: &str =
        "[agent-db compaction summary]\nagent-db replaced 2 earlier messages.\n\nbody";

    /// Another writer's summary under agent-db's header, with a framing of its own (as the
    /// docker-agent store presents docker-agent's summary item).
    const PRESENTED: &str =
        "[agent-db compaction summary]\nThe agent loads this summary in place of the earlier messages.\n\nuAgentSummary";

    /// A Chat Completions history of these contents (`S` is an agent-db summary, `P` another
    /// writer's presented under the header; a name starting with `u` is a user message, else an
    /// assistant one).
    fn history(names: &[&str]) -> String {
        let m: Vec<serde_json::Value> = names
            .iter()
            .map(|n| match *n {
                "S" => serde_json::json!({"role": "user", "content": SUMMARY}),
                "P" => serde_json::json!({"role": "user", "content": PRESENTED}),
                n if n.starts_with('u') => serde_json::json!({"role": "user", "content": n}),
                n => serde_json::json!({"role": "assistant", "content": n}),
            })
            .collect();
        serde_json::to_string(&m).unwrap()
    }

    fn messages(names: &[&str]) -> Vec<Message> {
        message::decode_all(codec("openai-chat"), &history(names)).unwrap()
    }

    fn texts(m: &[Message]) -> Vec<String> {
        m.iter().map(Message::text).collect()
    }

    fn pre(id: i64, names: &[&str], written_before: usize) -> PreImage {
        PreImage {
            compaction_id: id,
            history: history(names),
            written_before,
            agent_summary: 0,
        }
    }

    /// Two compactions: the first kept `a5`, the second `a7`; the history now grew by `u8 a9`.
    fn chain() -> Vec<PreImage> {
        vec![
            pre(1, &["u0", "a1", "u2", "a3", "u4", "a5"], 0),
            pre(2, &["S", "a5", "u6", "a7"], 2),
        ]
    }

    #[test]
    fn the_originals_are_the_first_pre_image_and_what_came_after_each_compaction() {
        let now = messages(&["S", "a7", "u8", "a9"]);
        let head = rebuild(codec("openai-chat"), &chain(), 2, &now, 3)
            .unwrap()
            .0;
        assert_eq!(
            texts(&head),
            ["u0", "a1", "u2", "a3", "u4", "a5", "u6", "a7", "u8"]
        );
    }

    #[test]
    fn a_new_tail_reaching_into_the_last_kept_tail_ends_the_originals_before_it() {
        let now = messages(&["S", "a7", "u8", "a9"]);
        let head = rebuild(codec("openai-chat"), &chain(), 2, &now, 1)
            .unwrap()
            .0;
        assert_eq!(texts(&head), ["u0", "a1", "u2", "a3", "u4", "a5", "u6"]);
        // The kept tail no longer matches the archive: no originals, and why.
        let changed = messages(&["S", "a7-edited", "u8", "a9"]);
        let e = rebuild(codec("openai-chat"), &chain(), 2, &changed, 1).unwrap_err();
        assert!(e.contains("does not match"), "{e}");
    }

    #[test]
    fn a_pre_image_without_agent_db_summary_starts_the_originals_over() {
        // Between the compactions the agent replaced the history (its own compaction).
        let chain = vec![
            pre(1, &["u0", "a1", "u2", "a3"], 0),
            pre(2, &["uAgentSummary", "a3", "u6", "a7"], 2),
        ];
        let now = messages(&["S", "a7", "u8", "a9"]);
        let mut chain = chain;
        chain[1].agent_summary = 1;
        let (head, agent_summary) = rebuild(codec("openai-chat"), &chain, 2, &now, 2).unwrap();
        assert_eq!(texts(&head), ["uAgentSummary", "a3", "u6", "a7"]);
        // The agent's own summary the store saw at the start of that pre-image is still first.
        assert_eq!(agent_summary, 1);
    }

    #[test]
    fn a_pre_image_with_another_writers_summary_under_the_header_starts_the_originals_over() {
        let chain = vec![
            pre(1, &["u0", "a1", "u2", "a3"], 0),
            pre(2, &["P", "u6", "a7"], 2),
        ];
        let now = messages(&["S", "a7", "u8", "a9"]);
        let head = rebuild(codec("openai-chat"), &chain, 2, &now, 2).unwrap().0;
        assert_eq!(texts(&head), [PRESENTED, "u6", "a7"]);
    }

    #[test]
    fn a_history_that_does_not_start_with_the_last_summary_has_no_originals() {
        let now = messages(&["u0", "a7", "u8", "a9"]);
        assert!(rebuild(codec("openai-chat"), &chain(), 2, &now, 3).is_err());
        // Another writer's summary presented under the header is not agent-db's.
        let now = messages(&["P", "a7", "u8", "a9"]);
        assert!(rebuild(codec("openai-chat"), &chain(), 2, &now, 3).is_err());
        let bad = vec![PreImage {
            compaction_id: 1,
            history: "not json".into(),
            written_before: 0,
            agent_summary: 0,
        }];
        let e = rebuild(codec("openai-chat"), &bad, 2, &messages(&["S", "a1"]), 2).unwrap_err();
        assert!(e.contains("compaction 1"), "{e}");
    }
}

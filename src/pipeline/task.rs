//! One conversation's compaction as a short sequence of named steps over typed values:
//! hooks before → rewrite → new history → proposal → write → hooks after. Each step either
//! hands its value on or ends the conversation with its [`Status`].

use std::sync::Arc;
use std::time::Instant;

use chrono::{DateTime, FixedOffset};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::land::{self, retention_of, unchanged, Landing, Runway, Step};
use super::pool::Pool;
use super::rows::{plan_row, record_after, set_after, Early};
use crate::compact::swap::{self, NewHistory};
use crate::compact::{HeadInput, Rewrite, Strategy, StrategyError, Summary};
use crate::hooks::{self, Hooks, Verdict};
use crate::plan::Plan;
use crate::report::{NotStarted, Row, Status};
use crate::store::writer::WriterHandle;
use crate::store::StoreKind;

/// What every conversation's task shares.
pub(super) struct Context {
    pub kind: StoreKind,
    pub strategy: Arc<dyn Strategy>,
    pub pool: Arc<Pool>,
    pub hooks: Option<Arc<Hooks>>,
    pub dry_run: bool,
    /// The writer (none in a dry run).
    pub writer: Option<WriterHandle>,
    /// Extra facts for the audit row's `details`.
    pub details: serde_json::Value,
    pub now: DateTime<FixedOffset>,
    /// [`crate::plan::PlanOptions::min_saving`].
    pub min_saving: Option<f64>,
    /// [`super::RunOptions::min_retention`].
    pub min_retention: Option<f64>,
    /// [`super::RunOptions::min_retention_is_default`].
    pub min_retention_is_default: bool,
    /// `--fallback`: the strategies tried, in order, when the result is under `min_retention`.
    pub fallbacks: Vec<Arc<dyn Strategy>>,
    /// [`super::RunOptions::proposals`]: capture each result there instead of writing it.
    pub proposals: Option<super::review::Sink>,
}

/// The concurrency slots a conversation holds: `compacting` while its strategy runs (this is
/// what `--concurrency` bounds: summarizer requests in flight), then `writing` while it waits for
/// the writer, so the next conversation's request never waits on a database commit.
pub(super) struct Slots {
    pub compacting: OwnedSemaphorePermit,
    pub writing: Arc<Semaphore>,
    /// Set when the store refused a write for a reason no other conversation can escape (disk
    /// full, read-only): the dispatcher then starts nothing more, so nothing more is spent.
    pub halt: Arc<std::sync::OnceLock<NotStarted>>,
}

impl Slots {
    /// The strategy is done: take a writing slot and hand the compacting one to the next
    /// conversation.
    async fn hand_over(self) -> (OwnedSemaphorePermit, Arc<std::sync::OnceLock<NotStarted>>) {
        let writing = self.writing.acquire_owned().await.expect("semaphore open");
        drop(self.compacting);
        (writing, self.halt)
    }
}

/// Who wrote the new head: the configured strategy, or a `before_compaction` hook that
/// supplied the summary (the strategy then did not run).
#[derive(Debug, Clone, PartialEq)]
enum Provenance {
    Strategy,
    Hook(String),
}

impl Provenance {
    /// The name reports and the audit log record (`hook:NAME` for a hook).
    fn label(&self, strategy: &dyn Strategy) -> String {
        match self {
            Provenance::Strategy => strategy.name().to_string(),
            Provenance::Hook(hook) => format!("hook:{hook}"),
        }
    }
}

fn strategy_status(e: StrategyError) -> Status {
    match e {
        StrategyError::Skip(why) => Status::Skipped(why),
        StrategyError::Fail(why) | StrategyError::Rejected(why) => Status::Failed(why),
    }
}

fn internal(why: impl std::fmt::Display) -> Status {
    Status::Failed(format!(
        "internal error (a bug in agent-db; please report it): {why}"
    ))
}

/// Compact one planned conversation into its report row.
pub(super) async fn compact_one(
    plan: Plan,
    early: Option<Early>,
    ctx: Arc<Context>,
    slots: Slots,
) -> Row {
    let started = Instant::now();
    let mut row = plan_row(&plan);
    row.strategy = Some(ctx.strategy.name().to_string());
    let status = steps(plan, early, &ctx, slots, &mut row)
        .await
        .unwrap_or_else(|s| s);
    row.status = status;
    row.duration_ms = started.elapsed().as_millis() as u64;
    row
}

async fn steps(
    plan: Plan,
    early: Option<Early>,
    ctx: &Context,
    slots: Slots,
    row: &mut Row,
) -> Step<Status> {
    if ctx.dry_run && !ctx.strategy.offline() {
        let (strategy, now) = (ctx.strategy.clone(), ctx.now);
        let (plan, est) = on_pool(ctx, plan, move |p| {
            strategy.estimate(&HeadInput::new(p, now))
        })
        .await?;
        return estimate(&plan, est, row, ctx.min_saving);
    }
    let (provenance, supplied) = hooks_before(&plan, ctx, row).await?;
    let label = provenance.label(ctx.strategy.as_ref());
    row.strategy = Some(label.clone());
    if supplied.is_none() && ctx.strategy.rewrites_head() && !ctx.kind.rewrites_history() {
        return Err(Status::Skipped(format!(
            "{} is not available for {} stores: their history is append-only",
            ctx.strategy.name(),
            ctx.kind.name()
        )));
    }
    let (plan, rewrite, built) = rewrite(plan, supplied, early, ctx).await?;
    let (_writing, halt) = slots.hand_over().await;
    let rewrite = match rewrite {
        Ok(r) => r,
        // `--fallback`: a result its strategy rejected lands the next strategy instead.
        Err(StrategyError::Rejected(why)) if !ctx.fallbacks.is_empty() => {
            let min = ctx.min_retention.unwrap_or(0.0);
            let (plan, rewrite, new, landed) =
                fall_back(plan, ctx, min, (&label, why), row).await?;
            return land(plan, rewrite, new, landed, provenance, ctx, row, halt).await;
        }
        Err(e) => return Err(strategy_status(e)),
    };
    record_spend(row, &rewrite);
    // The new history is scored where it is built: for a strategy that calls out, on the pool,
    // so the async workers stay free to send the next requests the moment an answer frees a slot.
    let prunes = matches!(rewrite, Rewrite::PrunedHead(_));
    let (plan, rewrite, scored) = match built {
        Some(new) => {
            let scored = new.map(|n| (retention_of(&plan, &n, prunes), n));
            (plan, rewrite, scored)
        }
        None => {
            let (plan, (rewrite, scored)) = on_pool(ctx, plan, move |p| {
                let scored = swap::build(p, &rewrite).map(|n| (retention_of(p, &n, prunes), n));
                (rewrite, scored)
            })
            .await?;
            (plan, rewrite, scored)
        }
    };
    let (kept, new) = scored.map_err(strategy_status)?;
    record_after(row, &plan, &new);
    let floor = ctx
        .min_retention
        .filter(|_| !(ctx.min_retention_is_default && matches!(provenance, Provenance::Hook(_))))
        .filter(|m| kept.score < *m);
    let score = kept.score;
    row.retention = Some(kept);
    let (plan, rewrite, new, landed) = match floor {
        None => (plan, rewrite, new, ctx.strategy.clone()),
        Some(min) if ctx.fallbacks.is_empty() => return Err(land::below_floor(row, score, min)),
        Some(min) => {
            let (plan, rewrite, new, landed) =
                fall_back(plan, ctx, min, (&label, under(score, min)), row).await?;
            (plan, rewrite, new, landed)
        }
    };
    land(plan, rewrite, new, landed, provenance, ctx, row, halt).await
}

/// Write what landed (or, in a dry run or a review, stop short of it).
#[allow(clippy::too_many_arguments)]
async fn land(
    plan: Plan,
    rewrite: Rewrite,
    new: NewHistory,
    landed: Arc<dyn Strategy>,
    provenance: Provenance,
    ctx: &Context,
    row: &mut Row,
    halt: Arc<std::sync::OnceLock<NotStarted>>,
) -> Step<Status> {
    let provenance = if Arc::ptr_eq(&landed, &ctx.strategy) {
        provenance
    } else {
        Provenance::Strategy
    };
    // A compaction that makes nothing better is not written (nor, in a dry run, planned).
    if let Some(why) = ctx
        .min_saving
        .and_then(|m| crate::plan::too_little_saved(plan.tokens_before(), new.tokens, m))
    {
        return Err(unchanged(row, why));
    }
    if let Some(w) = far_under_target(row, &plan, landed.offline()) {
        row.note = Some(match row.note.take() {
            Some(n) => format!("{n}; {w}"),
            None => w,
        });
    }
    let by_hook = matches!(provenance, Provenance::Hook(_));
    let landing = Landing {
        label: provenance.label(landed.as_ref()),
        model: land::summary_model(&rewrite, by_hook, landed.as_ref()),
        facts: land::run_facts(&plan, by_hook, &rewrite, row, &ctx.details),
        plan,
        rewrite,
        new,
    };
    if let Some(sink) = &ctx.proposals {
        return super::review::capture(sink, landing, row);
    }
    if ctx.dry_run {
        return Ok(Status::Planned);
    }
    let runway = Runway {
        kind: ctx.kind,
        writer: ctx.writer.as_ref(),
        hooks: ctx.hooks.as_deref(),
        halt: &halt,
    };
    // The store's proposal is made on the pool: it may encode and compress (kodelet packs the
    // pre-image), work the one writer thread should not do.
    land::land(landing, &runway, row, |plan, compaction, audit| {
        on_pool_with_store(ctx, plan, move |p, store| {
            let proposal = p.loaded.row.propose(compaction, audit, store);
            p.release_messages();
            proposal
        })
    })
    .await
}

/// A warning for an offline summary that lands far under `--target` (at half of it or less)
/// while keeping under half of what it summarized: the room was not needed, the detail was.
fn far_under_target(row: &Row, plan: &Plan, offline: bool) -> Option<String> {
    let (after, target) = (row.utilization_after?, plan.target?);
    let kept = row.retention.as_ref()?.score;
    (offline && after <= target / 2.0 && kept < 0.5).then(|| {
        format!(
            "landed at {}, far under --target {target}, keeping only {} of the artifacts of what it \
             summarized (file paths, commands, errors): detail was lost for room not needed; \
             a larger --keep-tokens, or --strategy llm, keeps more",
            crate::util::percent(after),
            crate::util::percent(kept)
        )
    })
}

/// `retention 62.0% < 80.0%`.
fn under(score: f64, min: f64) -> String {
    format!("retention {:.1}% < {:.1}%", score * 100.0, min * 100.0)
}

type Landed = (Plan, Rewrite, NewHistory, Arc<dyn Strategy>);

/// `--fallback`: `from`'s result was under the floor `min` (`first` says by how much); try
/// the next strategies in order on the same head, each scored, and hand back the first that
/// reaches `min` (the row then names it and says why). None does: the conversation is skipped
/// with every step's reason. A strategy the store refuses (prune on an append-only store) is
/// passed over.
async fn fall_back(
    mut plan: Plan,
    ctx: &Context,
    min: f64,
    (from, first): (&str, String),
    row: &mut Row,
) -> Step<Landed> {
    let mut steps = vec![format!("{from}: {first}")];
    for s in &ctx.fallbacks {
        if s.rewrites_head() && !ctx.kind.rewrites_history() {
            steps.push(format!(
                "{}: not available for {} stores",
                s.name(),
                ctx.kind.name()
            ));
            continue;
        }
        let handle = tokio::runtime::Handle::current();
        let (strategy, now) = (s.clone(), ctx.now);
        let (p, out) = on_pool(ctx, plan, move |p| {
            let input = HeadInput::new(p, now);
            let r = handle.block_on(rewrite_head(strategy.as_ref(), &input, &p.meta.id));
            drop(input);
            r.and_then(|rw| {
                let new = swap::build(p, &rw)?;
                let kept = retention_of(p, &new, matches!(rw, Rewrite::PrunedHead(_)));
                Ok((rw, new, kept))
            })
        })
        .await?;
        plan = p;
        match out {
            Ok((rw, new, kept)) if kept.score >= min => {
                row.fallback = Some(crate::report::Fallback {
                    from: from.to_string(),
                    reason: steps.join("; "),
                });
                row.strategy = Some(s.name().to_string());
                record_after(row, &plan, &new);
                row.retention = Some(kept);
                return Ok((plan, rw, new, s.clone()));
            }
            Ok((_, _, kept)) => steps.push(format!("{}: {}", s.name(), under(kept.score, min))),
            Err(
                StrategyError::Skip(why) | StrategyError::Fail(why) | StrategyError::Rejected(why),
            ) => steps.push(format!("{}: {why}", s.name())),
        }
    }
    Err(unchanged(
        row,
        format!(
            "no strategy reaches --min-retention {:.1}% ({}); nothing written",
            min * 100.0,
            steps.join("; ")
        ),
    ))
}

/// A dry run of a strategy that calls a model: its estimate (made on the pool), and no call.
fn estimate(
    plan: &Plan,
    est: Option<std::result::Result<crate::compact::Estimate, StrategyError>>,
    row: &mut Row,
    min_saving: Option<f64>,
) -> Step<Status> {
    match est {
        Some(Ok(est)) => {
            let after = plan.tokens_after(est.summary_tokens);
            let split = plan.split().expect("planned conversations have a split");
            row.messages_after = Some(
                1 + (plan.loaded.messages.len() - split.cut)
                    + usize::from(split.reinsert.is_some()),
            );
            row.tokens_after = Some(after);
            set_after(row, plan, after);
            row.cost_usd = est.cost_usd;
            if let Some(why) = min_saving
                .and_then(|m| crate::plan::too_little_saved(plan.tokens_before(), after, m))
            {
                return Err(unchanged(row, why));
            }
            Ok(Status::Planned)
        }
        Some(Err(e)) => Err(strategy_status(e)),
        None => Ok(Status::Planned),
    }
}

/// Run the `before_compaction` hooks: they may block the conversation or supply its summary.
async fn hooks_before(
    plan: &Plan,
    ctx: &Context,
    row: &mut Row,
) -> Step<(Provenance, Option<Summary>)> {
    let Some(h) = &ctx.hooks else {
        return Ok((Provenance::Strategy, None));
    };
    let (verdict, records) = h
        .before(
            &hooks::before_payload(plan, ctx.kind.name()),
            plan.meta.cwd.as_deref(),
        )
        .await;
    row.hooks = records;
    match verdict {
        Verdict::Allow => Ok((Provenance::Strategy, None)),
        Verdict::Block { hook, reason } => {
            Err(Status::Skipped(format!("blocked by hook {hook}: {reason}")))
        }
        Verdict::Summary { hook, text } => Ok((
            Provenance::Hook(hook),
            Some(Summary {
                text,
                ..Summary::default()
            }),
        )),
    }
}

type Built = Option<std::result::Result<NewHistory, StrategyError>>;

/// Run the strategy on the head (the `strategy` failpoint sits here).
async fn rewrite_head(
    strategy: &dyn Strategy,
    input: &HeadInput<'_>,
    id: &str,
) -> std::result::Result<Rewrite, StrategyError> {
    crate::failpoint::hit("strategy", id);
    strategy.rewrite(input).await
}

/// Run the strategy on the head (or take the summary a hook supplied). An offline strategy is
/// CPU-bound: it runs on the planning pool together with the swap, not on the async workers;
/// the `llm` strategy prepares on the pool, awaits its requests here and leaves the swap to the
/// caller (which runs it on the pool too).
async fn rewrite(
    plan: Plan,
    supplied: Option<Summary>,
    early: Option<Early>,
    ctx: &Context,
) -> Step<(Plan, std::result::Result<Rewrite, StrategyError>, Built)> {
    if let Some(s) = supplied {
        return Ok((plan, Ok(Rewrite::Summary(s)), None));
    }
    if !ctx.strategy.offline() {
        return rewrite_online(plan, early, ctx).await;
    }
    let handle = tokio::runtime::Handle::current();
    let (strategy, now) = (ctx.strategy.clone(), ctx.now);
    let (plan, (r, built)) = on_pool(ctx, plan, move |p| {
        let input = HeadInput::new(p, now);
        let r = handle.block_on(rewrite_head(strategy.as_ref(), &input, &p.meta.id));
        drop(input);
        let built = r.as_ref().ok().map(|rw| swap::build(p, rw));
        (r, built)
    })
    .await?;
    Ok((plan, r, built))
}

/// A strategy that calls out: its CPU-bound preparation on the pool (done right after planning,
/// `early`, when no hook runs), then its requests here (the async workers only wait on the
/// network). The swap is left to the caller, after the conversation gives its `--concurrency`
/// slot to the next one.
async fn rewrite_online(
    plan: Plan,
    early: Option<Early>,
    ctx: &Context,
) -> Step<(Plan, std::result::Result<Rewrite, StrategyError>, Built)> {
    let (plan, prepared) = match early {
        Some(prepared) => (plan, prepared),
        None => {
            // Prepared here when hooks run (they may supply the summary or read the messages,
            // so nothing was done ahead and the head is kept).
            let (strategy, now) = (ctx.strategy.clone(), ctx.now);
            on_pool(ctx, plan, move |p| {
                strategy.prepare(&HeadInput::new(p, now))
            })
            .await?
        }
    };
    let prepared = prepared.map_err(strategy_status)?;
    let input = HeadInput::new(&plan, ctx.now);
    crate::failpoint::hit("strategy", &plan.meta.id);
    let r = ctx.strategy.rewrite_prepared(&input, prepared).await;
    drop(input);
    Ok((plan, r, None))
}

/// Run `f` on the plan on the planning pool (ahead of planning work) and hand both back; a
/// panic in `f` is the conversation's internal error.
async fn on_pool<T: Send + 'static>(
    ctx: &Context,
    plan: Plan,
    f: impl FnOnce(&Plan) -> T + Send + 'static,
) -> Step<(Plan, T)> {
    on_pool_with_store(ctx, plan, move |p, _| f(p)).await
}

/// [`on_pool`], with the planning thread's own read connection (`None` if it has none).
async fn on_pool_with_store<T: Send + 'static>(
    ctx: &Context,
    plan: Plan,
    f: impl FnOnce(&mut Plan, Option<&crate::store::Store>) -> T + Send + 'static,
) -> Step<(Plan, T)> {
    let (tx, rx) = tokio::sync::oneshot::channel();
    ctx.pool.submit(
        true,
        Box::new(move |store| {
            let out = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                let mut plan = plan;
                let t = f(&mut plan, store.ok());
                (plan, t)
            }))
            .map_err(|p| crate::error::panic_message(p.as_ref()));
            let _ = tx.send(out);
        }),
    );
    match rx.await {
        Ok(Ok(out)) => Ok(out),
        Ok(Err(panic)) => Err(internal(panic)),
        Err(_) => Err(internal("the planning thread stopped")),
    }
}

/// The summarizer's spend on the row.
fn record_spend(row: &mut Row, rewrite: &Rewrite) {
    if let Rewrite::Summary(sm) = rewrite {
        row.cost_usd = sm.cost_usd;
        row.masking = sm.masking;
        if let (Some(p), Some(c)) = (sm.prompt_tokens, sm.completion_tokens) {
            row.llm_tokens = Some((p, c));
        }
    }
}

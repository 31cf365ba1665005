//! The compaction pipeline: select → plan (a pool of threads) → compact (concurrent) → write
//! (one writer) → rows.
//!
//! - A loader thread runs the selection and numbers each outcome (`seq`). Each selected
//!   conversation goes to the planning pool; its place in line goes, in order, into a bounded
//!   channel, so at most that channel's capacity of planned conversations wait at once.
//! - The planning pool: `--jobs` threads (default: the cores), each with its own read
//!   connection, load, decode, count and split conversations. The offline strategies
//!   (extractive, prune) run on the same threads, so an offline batch scales with the cores.
//! - Up to `concurrency` strategy tasks run at once on a tokio runtime (an LLM strategy spends
//!   its time waiting on HTTP).
//! - One writer thread (`store::writer`) owns the only write connection and commits each
//!   compaction in its own transaction; tasks hand it proposals and wait for the outcome.
//!
//! Files: `pool.rs` (the planning pool), `dispatch.rs` (order, `--concurrency`, `--max-cost`),
//! `task.rs` (one conversation's steps), `land.rs` (the one landing path every writer takes:
//! audit row, proposal, write, after hooks), `rows.rs` (rows before the strategy runs),
//! `review.rs` (proposals captured instead of written, and a plan of them applied).
//! - A failure on one conversation becomes its report row; the batch goes on.
//!
//! Rows come back in selection order. The library reports progress through a callback and
//! never prints.

mod dispatch;
mod land;
mod pool;
mod review;
mod rows;
mod task;

pub use pool::planning_threads;
pub use review::{
    apply as apply_plan, fingerprint, parse_plan, ApplyOptions, ApplyReport, PlanFile, PlanStore,
    Proposed, Sink, PLAN_VERSION,
};
pub use rows::plan_row;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use chrono::{DateTime, FixedOffset};
use tokio::sync::mpsc;

use crate::compact::Strategy;
use crate::error::{Error, Result};
use crate::hooks::Hooks;
use crate::plan::PlanOptions;
use crate::report::Row;
use crate::select::Selector;
use crate::store::writer::Writer;
use crate::store::{Access, Location};
use pool::{Pending, Pool};
use rows::{selection_row, Job};

/// How to run.
#[derive(Debug, Clone)]
pub struct RunOptions {
    pub plan: PlanOptions,
    pub dry_run: bool,
    pub concurrency: usize,
    /// Planning threads (`--jobs`); 0 = one per available core.
    pub jobs: usize,
    /// Extra facts for the audit row's `details`.
    pub details: serde_json::Value,
    /// Stop starting new conversations once the summarizer spend reaches this (USD).
    pub max_cost: Option<f64>,
    /// Leave a conversation unwritten when its retention score is under this
    /// ([`crate::retention`]).
    pub min_retention: Option<f64>,
    /// `min_retention` is the strategy's default (none was set): it does not hold for a
    /// summary a hook supplied, which carries no artifact ledger.
    pub min_retention_is_default: bool,
    /// Under `min_retention`, try the next strategy ([`crate::compact::build::fallbacks`]);
    /// the first that reaches it is written.
    pub fallback: bool,
    /// Hooks to run (none in a dry run).
    pub hooks: Option<Arc<Hooks>>,
    /// Keep every row for the returned report. Callers that stream rows as they finish (a
    /// JSON report) turn this off so memory stays flat however many conversations run.
    pub collect_rows: bool,
    /// Set from outside (the CLI's Ctrl-C handler) to stop the run: no more conversations are
    /// selected or started (those already queued become not-started rows), and those in flight
    /// finish, each committed or rolled back whole.
    pub interrupt: Option<Arc<AtomicBool>>,
    /// How long a write waits, retrying with backoff, while another process holds the write
    /// lock ([`crate::config::Settings::busy_wait`]).
    pub busy_wait: std::time::Duration,
    /// Propose only (`compact --plan-out`, `--edit`): run everything a compaction runs (the
    /// selection, the `before_compaction` hooks, the strategy, the retention floor) and put each
    /// result here instead of writing it; the store is opened read-only.
    pub proposals: Option<Sink>,
}

/// Progress, for the CLI's progress bar.
pub enum Event<'a> {
    /// A conversation's compaction started (it is in flight).
    Started,
    /// A conversation is done (compacted, skipped or failed); `seq` is its position in the
    /// selection, starting at 1 and without gaps.
    Finished { seq: usize, row: &'a Row },
}

/// What tasks report to the run's event loop.
enum Msg {
    Started,
    Done(usize, Box<Row>),
}

/// The outcome of a run.
pub struct RunReport {
    /// One row per conversation, in selection order (empty unless `collect_rows`).
    pub rows: Vec<Row>,
    /// `--max-cost` was reached and later conversations were not started.
    pub stopped_by_max_cost: bool,
    /// The run was interrupted ([`RunOptions::interrupt`]): later conversations were not
    /// selected or not started.
    pub interrupted: bool,
    /// Another process kept the store's write lock longer than `busy_wait`: the writes from
    /// then on were not made (those rows say so).
    pub busy: bool,
    /// When interrupted: the conversations the selection still held, counted on the same read
    /// as the rest (so a conversation this run compacted is not mistaken for one it skipped).
    pub unreached: usize,
}

/// Run the pipeline over the store at `location`. `on_event` sees progress (in completion
/// order).
pub fn run(
    location: &Location,
    selector: &Selector,
    strategy: Arc<dyn Strategy>,
    opts: &RunOptions,
    now: DateTime<FixedOffset>,
    on_event: &mut dyn FnMut(Event<'_>),
) -> Result<RunReport> {
    selector.validate()?;
    // This first connection stays open until every other one has closed: when the store had
    // no WAL file, it is the read-write connection that created it, and closing last it
    // removes the -wal/-shm files again (the loader's and the pool's connections, opened
    // after it, are read-only and could not), so a dry run leaves the files as they were.
    let keeper = location.open(Access::Read)?;
    let concurrency = opts.concurrency.max(1);
    let runtime = runtime(concurrency, !opts.dry_run && !strategy.offline(), location)?;
    let writes = !opts.dry_run && opts.proposals.is_none();
    let threads = planning_threads(opts.jobs);
    let (pool, workers) = Pool::start(location, threads);
    // Conversations selected and not yet started: planned (or being planned) ahead, queued in
    // selection order; the dispatcher holds a window of as many (being planned, or planned and
    // waiting for a slot) and starts whichever is ready first. Enough to keep every pool thread
    // busy and to refill several --concurrency slots at once; bounded (and capped: a cap of 32
    // was no faster in the 32-slot LLM batch and took 5-8 MB more) so memory stays flat
    // whatever the store's size and the concurrency.
    let window = (threads * 2).max(concurrency.min(16));
    let (job_tx, job_rx) = mpsc::channel::<(usize, Pending)>(window);
    let hooks = opts
        .hooks
        .clone()
        .filter(|h| !h.is_empty() && !opts.dry_run);
    let ahead = pool::Ahead {
        seal: writes,
        prepare: (!opts.dry_run && !strategy.offline() && hooks.is_none())
            .then(|| (strategy.clone(), now)),
        release_head: !opts.fallback,
    };
    let loader = start_loader(location, selector, opts, &pool, now, ahead, job_tx);
    let writer = writes.then(|| Writer::start(location, opts.busy_wait));
    let ctx = context(
        keeper.kind,
        strategy,
        &pool,
        hooks,
        writer.as_ref(),
        opts,
        now,
    );
    let limits = limits(opts, concurrency, window);
    let (rows, stopped, busy) = runtime.block_on(dispatch::drive(
        job_rx,
        ctx,
        limits,
        opts.collect_rows,
        on_event,
    ));
    // Every task is done; dropping the runtime drops their last handles on the writer, which
    // then drains and stops.
    drop(runtime);
    let unreached = finish(loader, &pool, workers, writer)?;
    drop(keeper);
    let mut rows = rows;
    // Rows come back in selection order.
    rows.sort_by_key(|(seq, _)| *seq);
    Ok(RunReport {
        rows: rows.into_iter().map(|(_, r)| r).collect(),
        stopped_by_max_cost: stopped,
        interrupted: opts
            .interrupt
            .as_ref()
            .is_some_and(|i| i.load(Ordering::SeqCst)),
        busy,
        unreached,
    })
}

/// What every conversation's task shares.
fn context(
    kind: crate::store::StoreKind,
    strategy: Arc<dyn Strategy>,
    pool: &Arc<Pool>,
    hooks: Option<Arc<Hooks>>,
    writer: Option<&Writer>,
    opts: &RunOptions,
    now: DateTime<FixedOffset>,
) -> Arc<task::Context> {
    Arc::new(task::Context {
        kind,
        fallbacks: fallbacks(opts, strategy.name()),
        strategy,
        pool: pool.clone(),
        hooks,
        dry_run: opts.dry_run,
        writer: writer.map(Writer::handle),
        details: opts.details.clone(),
        now,
        min_saving: opts.plan.min_saving,
        min_retention: opts.min_retention,
        min_retention_is_default: opts.min_retention_is_default,
        proposals: opts.proposals.clone(),
    })
}

/// `--fallback`: the strategies tried after `strategy`, when a floor is set.
fn fallbacks(opts: &RunOptions, strategy: &str) -> Vec<Arc<dyn Strategy>> {
    if opts.fallback && opts.min_retention.is_some() {
        crate::compact::build::fallbacks(strategy)
    } else {
        Vec::new()
    }
}

/// What the dispatcher may start: `--concurrency`, `--max-cost`, Ctrl-C, and how far ahead of
/// the selection order (`window`) it may look for a planned conversation.
fn limits(opts: &RunOptions, concurrency: usize, window: usize) -> dispatch::Limits {
    dispatch::Limits {
        concurrency,
        max_cost: opts.max_cost,
        interrupt: opts.interrupt.clone(),
        // In selection order when the order decides what gets done: one at a time, or up to
        // a budget (`--max-cost` compacts the first conversations of the selection).
        window: if concurrency > 1 && opts.max_cost.is_none() {
            window
        } else {
            1
        },
    }
}

/// The tokio runtime the strategy tasks run on. A strategy that calls out gets
/// `min(--concurrency, CPUs)` workers, to wait on the network. An offline batch (and a dry run)
/// does its CPU work on the planning pool and in the writer; its tasks only hand values between
/// them, so they run on the calling thread: no worker threads to wake for every hand-over (about
/// 2% of an offline batch's CPU time went to waking them).
fn runtime(
    concurrency: usize,
    calls_out: bool,
    location: &Location,
) -> Result<tokio::runtime::Runtime> {
    let cpus = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(2);
    let mut builder = if calls_out {
        let mut b = tokio::runtime::Builder::new_multi_thread();
        b.worker_threads(concurrency.min(cpus).max(1));
        b
    } else {
        tokio::runtime::Builder::new_current_thread()
    };
    builder.enable_all().build().map_err(|source| Error::Io {
        path: location.path.clone(),
        source,
    })
}

/// The loader thread: runs the selection on its own read connection, queues each selected
/// conversation's planning on the pool, and sends every place in line, numbered, in order. Once
/// the run is interrupted it starts nothing more and only counts what the selection still holds,
/// which it returns.
fn start_loader(
    location: &Location,
    selector: &Selector,
    opts: &RunOptions,
    pool: &Arc<Pool>,
    now: DateTime<FixedOffset>,
    ahead: pool::Ahead,
    job_tx: mpsc::Sender<(usize, Pending)>,
) -> std::thread::JoinHandle<Result<usize>> {
    let location = location.clone();
    let selector = selector.clone();
    let plan_opts = opts.plan.clone();
    let interrupt = opts.interrupt.clone();
    let pool = pool.clone();
    std::thread::Builder::new()
        .name("agent-db-select".into())
        .spawn(move || -> Result<usize> {
            let store = location.open(Access::Read)?;
            let mut seq = 0usize;
            let mut unreached = 0usize;
            // A panic here (outside any one conversation's planning, which is caught in
            // `plan_job`) ends the run as an internal error; the join below reports it.
            selector.run(&store, &now, |o| {
                if interrupt.as_ref().is_some_and(|i| i.load(Ordering::SeqCst)) {
                    if !matches!(o, crate::select::Outcome::Skipped { .. }) {
                        unreached += 1;
                    }
                    return true;
                }
                let pending = match selection_row(o) {
                    Err(row) => Pending::Ready(Job::Row(row)),
                    Ok((meta, reason)) => {
                        pool::submit_plan(&pool, meta, reason, &plan_opts, &ahead)
                    }
                };
                seq += 1;
                job_tx.blocking_send((seq, pending)).is_ok()
            })?;
            Ok(unreached)
        })
        .expect("spawn the selection thread")
}

/// Join the loader, the pool and the writer, reporting the first failure.
fn finish(
    loader: std::thread::JoinHandle<Result<usize>>,
    pool: &Pool,
    workers: Vec<std::thread::JoinHandle<()>>,
    writer: Option<Writer>,
) -> Result<usize> {
    let loaded = loader.join();
    pool.close();
    for w in workers {
        let _ = w.join();
    }
    let loaded = loaded.map_err(|p| {
        Error::Internal(format!(
            "the selection stopped: {}",
            crate::error::panic_message(p.as_ref())
        ))
    })?;
    if let Some(w) = writer {
        w.finish()?;
    }
    loaded
}

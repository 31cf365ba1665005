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
//! - One writer thread owns the only write connection and commits each compaction in its own
//!   transaction; tasks hand it proposals through a channel and wait for the outcome.
//! - A failure on one conversation becomes its report row; the batch goes on.
//!
//! Rows come back in selection order. The library reports progress through a callback and
//! never prints.

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Instant;

use chrono::{DateTime, FixedOffset};
use tokio::sync::{mpsc, oneshot, Semaphore};

use crate::compact::swap::{self, NewHistory};
use crate::compact::{HeadInput, Rewrite, Strategy, StrategyError, Summary};
use crate::error::{Error, Result};
use crate::hooks::{self, Hooks, Verdict};
use crate::plan::{self, Plan, PlanOptions};
use crate::report::{Row, Status};
use crate::select::{Outcome, Selector};
use crate::split::Decision;
use crate::store::archive::AuditEntry;
use crate::store::{self, Access, Store};
use crate::store::{Proposal, StoreKind, Written};

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
    /// Hooks to run (none in a dry run).
    pub hooks: Option<Arc<Hooks>>,
    /// Keep every row for the returned report. Callers that stream rows as they finish (a
    /// JSON report) turn this off so memory stays flat however many conversations run.
    pub collect_rows: bool,
}

/// Progress, for the CLI's progress bar.
pub enum Event<'a> {
    /// A conversation's compaction started (it is in flight).
    Started,
    /// A conversation is done (compacted, skipped or failed); `seq` is its position in the
    /// selection, starting at 1 and without gaps.
    Finished { seq: usize, row: &'a Row },
}

enum Msg {
    Started,
    Done(usize, Box<Row>),
}

enum Job {
    Plan(Box<Plan>),
    Row(Box<Row>),
}

type WriteRequest = (Proposal, oneshot::Sender<Result<Written>>);

/// A conversation's place in line: its job, or the planning still under way.
enum Pending {
    Ready(Job),
    Planning {
        id: String,
        provider: String,
        reason: crate::select::Reason,
        job: oneshot::Receiver<Job>,
    },
}

/// Work for the pool. It gets the worker's own read connection (or why it could not open one).
type PoolTask = Box<dyn FnOnce(std::result::Result<&Store, &str>) + Send>;

#[derive(Default)]
struct Queues {
    /// Strategy work of conversations already started: served first, so started conversations
    /// finish before more are planned ahead.
    urgent: VecDeque<PoolTask>,
    /// Planning, in selection order.
    normal: VecDeque<PoolTask>,
    closed: bool,
}

/// The planning pool: a few OS threads, each with its own read connection to the store. How
/// much work waits is bounded by the callers (the loader's channel, the strategy semaphore).
struct Pool {
    queues: Mutex<Queues>,
    ready: Condvar,
}

impl Pool {
    /// Start `threads` workers on the store at `path`.
    fn start(path: &Path, threads: usize) -> (Arc<Pool>, Vec<std::thread::JoinHandle<()>>) {
        let pool = Arc::new(Pool {
            queues: Mutex::new(Queues::default()),
            ready: Condvar::new(),
        });
        let workers = (0..threads.max(1))
            .map(|i| {
                let pool = pool.clone();
                let path = path.to_path_buf();
                std::thread::Builder::new()
                    .name(format!("agent-db-plan-{i}"))
                    .spawn(move || pool.work(&path))
                    .expect("spawn a planning thread")
            })
            .collect();
        (pool, workers)
    }

    fn work(&self, path: &Path) {
        let store = Store::open(path, Access::Read).map_err(|e| e.to_string());
        while let Some(task) = self.next() {
            // Tasks catch their own panics (each becomes its conversation's row); this only
            // keeps the worker alive should one escape.
            let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                task(store.as_ref().map_err(String::as_str))
            }));
        }
    }

    fn next(&self) -> Option<PoolTask> {
        let mut q = self.queues.lock().unwrap_or_else(|p| p.into_inner());
        loop {
            if let Some(t) = q.urgent.pop_front().or_else(|| q.normal.pop_front()) {
                return Some(t);
            }
            if q.closed {
                return None;
            }
            q = self.ready.wait(q).unwrap_or_else(|p| p.into_inner());
        }
    }

    fn submit(&self, urgent: bool, task: PoolTask) {
        let mut q = self.queues.lock().unwrap_or_else(|p| p.into_inner());
        if urgent {
            q.urgent.push_back(task);
        } else {
            q.normal.push_back(task);
        }
        drop(q);
        self.ready.notify_one();
    }

    /// Let the workers finish what is queued and stop.
    fn close(&self) {
        self.queues.lock().unwrap_or_else(|p| p.into_inner()).closed = true;
        self.ready.notify_all();
    }
}

/// The number of planning threads: `jobs`, or one per available core.
pub fn planning_threads(jobs: usize) -> usize {
    if jobs > 0 {
        return jobs;
    }
    std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(2)
}

/// Queue the planning of one selected conversation on the pool; its job arrives on the
/// returned receiver.
fn submit_plan(
    pool: &Pool,
    meta: crate::store::ConversationMeta,
    reason: crate::select::Reason,
    opts: &PlanOptions,
) -> Pending {
    let (tx, rx) = oneshot::channel();
    let (id, provider) = (meta.id.clone(), meta.provider.clone());
    let opts = opts.clone();
    pool.submit(
        false,
        Box::new(move |store| {
            let job = match store {
                Ok(store) => plan_job(store, meta, reason, &opts),
                Err(why) => Job::Row(Box::new(Row::bare(
                    &meta.id,
                    &meta.provider,
                    reason.name(),
                    Status::Failed(why.to_string()),
                ))),
            };
            let _ = tx.send(job);
        }),
    );
    Pending::Planning {
        id,
        provider,
        reason,
        job: rx,
    }
}

/// Wait for a conversation's job (planning runs ahead on the pool).
async fn resolve(p: Pending) -> Job {
    match p {
        Pending::Ready(job) => job,
        Pending::Planning {
            id,
            provider,
            reason,
            job,
        } => job.await.unwrap_or_else(|_| {
            Job::Row(Box::new(Row::bare(
                &id,
                &provider,
                reason.name(),
                Status::Failed(
                    "internal error while planning (a bug in agent-db; please report it): the planning thread stopped"
                        .into(),
                ),
            )))
        }),
    }
}

fn round3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

/// The report row for a plan, before the strategy runs.
pub fn plan_row(p: &Plan) -> Row {
    let mut row = Row::bare(
        &p.meta.id,
        &p.meta.provider,
        p.reason.name(),
        Status::Planned,
    );
    row.format = Some(p.loaded.format.name());
    row.model = p.meta.model.clone();
    row.tokens_exact = p.loaded.format.tokens_exact();
    row.messages_before = Some(p.loaded.messages.len());
    row.tokens_before = Some(p.tokens_before());
    row.utilization_before = p.landing.map(|l| round3(l.before));
    row.note = p.target_note.clone();
    match &p.decision {
        Decision::Compact(s) => {
            let reinsert = usize::from(s.reinsert.is_some());
            row.messages_summarized = Some(s.cut - reinsert);
            row.messages_kept = Some(p.loaded.messages.len() - s.cut + reinsert);
        }
        Decision::NoOp(why) => {
            row.status = Status::Skipped(why.clone());
            row.messages_after = row.messages_before;
            row.tokens_after = row.tokens_before;
        }
    }
    row
}

/// Plan one selected conversation into a job. Any failure, a panic in decoding or counting
/// included, becomes that conversation's `failed` row.
fn plan_job(
    store: &Store,
    meta: crate::store::ConversationMeta,
    reason: crate::select::Reason,
    opts: &PlanOptions,
) -> Job {
    let (id, provider) = (meta.id.clone(), meta.provider.clone());
    let planned = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        crate::failpoint::hit("plan", &meta.id);
        plan::plan(store, meta, reason, opts)
    }));
    let failed = |why: String| {
        Job::Row(Box::new(Row::bare(
            &id,
            &provider,
            reason.name(),
            Status::Failed(why),
        )))
    };
    match planned {
        Ok(Ok(p)) if matches!(p.decision, Decision::NoOp(_)) => Job::Row(Box::new(plan_row(&p))),
        Ok(Ok(p)) => Job::Plan(Box::new(p)),
        Ok(Err(e)) => failed(e.to_string()),
        Err(p) => failed(format!(
            "internal error while planning (a bug in agent-db; please report it): {}",
            crate::error::panic_message(p.as_ref())
        )),
    }
}

type Selected = (crate::store::ConversationMeta, crate::select::Reason);

fn selection_row(o: Outcome) -> std::result::Result<Selected, Box<Row>> {
    match o {
        Outcome::Selected { meta, reason } => Ok((meta, reason)),
        Outcome::Skipped { meta, reason, why } => Err(Box::new(Row::bare(
            &meta.id,
            &meta.provider,
            reason.name(),
            Status::Skipped(why),
        ))),
        Outcome::Failed { id, reason, error } => Err(Box::new(Row::bare(
            &id,
            "",
            reason.name(),
            Status::Failed(error),
        ))),
    }
}

/// The outcome of a run.
pub struct RunReport {
    /// One row per conversation, in selection order (empty unless `collect_rows`).
    pub rows: Vec<Row>,
    /// `--max-cost` was reached and later conversations were not started.
    pub stopped_by_max_cost: bool,
}

/// Run the pipeline over the store at `path`. `on_event` sees progress (in completion order).
pub fn run(
    path: &Path,
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
    let keeper = Store::open(path, Access::Read)?;
    let kind = keeper.kind;
    let concurrency = opts.concurrency.max(1);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(
            concurrency
                .min(
                    std::thread::available_parallelism()
                        .map(|n| n.get())
                        .unwrap_or(2),
                )
                .max(1),
        )
        .enable_all()
        .build()
        .map_err(|source| Error::Io {
            path: path.to_path_buf(),
            source,
        })?;

    let threads = planning_threads(opts.jobs);
    let (pool, workers) = Pool::start(path, threads);
    // Conversations selected and not yet started: planned (or being planned) ahead, in
    // selection order. Enough to keep every pool thread busy and to refill several
    // --concurrency slots at once; bounded (and capped) so memory stays flat whatever the
    // store's size and the concurrency.
    let ahead = (threads * 2).max(concurrency.min(16));
    let (job_tx, mut job_rx) = mpsc::channel::<(usize, Pending)>(ahead);
    let loader = {
        let path = path.to_path_buf();
        let selector = selector.clone();
        let plan_opts = opts.plan.clone();
        let pool = pool.clone();
        std::thread::spawn(move || -> Result<()> {
            let store = Store::open(&path, Access::Read)?;
            let mut seq = 0usize;
            // A panic here (outside any one conversation's planning, which is caught in
            // `plan_job`) ends the run as an internal error; the join below reports it.
            selector.run(&store, &now, |o| {
                let pending = match selection_row(o) {
                    Err(row) => Pending::Ready(Job::Row(row)),
                    Ok((meta, reason)) => submit_plan(&pool, meta, reason, &plan_opts),
                };
                seq += 1;
                job_tx.blocking_send((seq, pending)).is_ok()
            })
        })
    };

    let (write_tx, write_rx) = std::sync::mpsc::channel::<WriteRequest>();
    let writer = if opts.dry_run {
        drop(write_rx);
        None
    } else {
        let path = path.to_path_buf();
        Some(std::thread::spawn(move || -> Result<()> {
            let mut conn = store::connect(&path, Access::Write)?;
            // As kodelet and docker-agent run their own connections: in WAL mode a commit is then
            // durable against a crash of the process (the crash test kills it), and fsync happens
            // at checkpoints rather than on every one of a batch's commits. Per connection only;
            // the file is not changed.
            conn.pragma_update(None, "synchronous", "NORMAL")
                .map_err(|source| Error::Sqlite {
                    path: path.clone(),
                    source,
                })?;
            let mut migrated = false;
            for (proposal, reply) in write_rx {
                // agent-db's own tables are created just before the first commit, so a run
                // that only skips writes nothing at all.
                if !migrated {
                    if let Err(e) = store::agent_tables::migrate(&mut conn) {
                        let _ = reply.send(Err(Error::Sqlite {
                            path: path.clone(),
                            source: e,
                        }));
                        continue;
                    }
                    migrated = true;
                }
                let at = crate::gotime::rfc3339_utc(&crate::gotime::now());
                // A panic while writing one conversation is that conversation's failure: the
                // open transaction rolls back as it unwinds, and the writer serves the others.
                let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    crate::failpoint::hit("write", &proposal.id);
                    store::commit(kind, &mut conn, &path, &proposal, &at)
                }))
                .unwrap_or_else(|p| {
                    Err(Error::Internal(format!(
                        "while writing conversation {}: {}",
                        proposal.id,
                        crate::error::panic_message(p.as_ref())
                    )))
                });
                let _ = reply.send(outcome);
            }
            Ok(())
        }))
    };

    let mut rows: Vec<(usize, Row)> = Vec::new();
    let collect = opts.collect_rows;
    let spent = Arc::new(std::sync::Mutex::new(0.0f64));
    let stopped = Arc::new(std::sync::atomic::AtomicBool::new(false));
    runtime.block_on(async {
        let (msg_tx, mut msg_rx) = mpsc::unbounded_channel::<Msg>();
        let sem = Arc::new(Semaphore::new(concurrency));
        // Conversations past their strategy, waiting for the single writer: bounded too, so
        // memory stays bounded even if the writer falls behind.
        let writing = Arc::new(Semaphore::new(concurrency));
        let halt: Arc<std::sync::OnceLock<String>> = Arc::new(std::sync::OnceLock::new());
        let dispatcher = {
            let msg_tx = msg_tx.clone();
            let strategy = strategy.clone();
            let details = opts.details.clone();
            let dry_run = opts.dry_run;
            let max_cost = opts.max_cost;
            let hooks = opts
                .hooks
                .clone()
                .filter(|h| !h.is_empty() && !opts.dry_run);
            let spent = spent.clone();
            let stopped = stopped.clone();
            let path: PathBuf = path.to_path_buf();
            let pool = pool.clone();
            tokio::spawn(async move {
                while let Some((seq, pending)) = job_rx.recv().await {
                    match resolve(pending).await {
                        Job::Row(r) => {
                            let _ = msg_tx.send(Msg::Done(seq, r));
                        }
                        Job::Plan(p) => {
                            let permit = sem.clone().acquire_owned().await.expect("semaphore open");
                            // Row costs cover compacted conversations; the strategy's own meter
                            // also counts what failed conversations were billed.
                            let so_far = spent.lock().expect("cost lock").max(strategy.spent_usd());
                            if let Some(why) = halt.get() {
                                let mut row = plan_row(&p);
                                row.status = Status::Skipped(format!(
                                    "not started: the store cannot be written ({why})"
                                ));
                                let _ = msg_tx.send(Msg::Done(seq, Box::new(row)));
                                continue;
                            }
                            if let Some(max) = max_cost.filter(|m| so_far >= *m) {
                                stopped.store(true, std::sync::atomic::Ordering::Relaxed);
                                let mut row = plan_row(&p);
                                row.status = Status::Skipped(format!(
                                    "not started: --max-cost ${max:.2} reached (${so_far:.4} spent)"
                                ));
                                let _ = msg_tx.send(Msg::Done(seq, Box::new(row)));
                                continue;
                            }
                            let msg_tx = msg_tx.clone();
                            let strategy = strategy.clone();
                            let write_tx = write_tx.clone();
                            let details = details.clone();
                            let path = path.clone();
                            let spent = spent.clone();
                            let hooks = hooks.clone();
                            let _ = msg_tx.send(Msg::Started);
                            let writing = writing.clone();
                            let halt = halt.clone();
                            let pool = pool.clone();
                            tokio::spawn(async move {
                                let slots = Slots {
                                    compacting: permit,
                                    writing,
                                    halt,
                                };
                                let mut failed = plan_row(&p);
                                let task = tokio::spawn(async move {
                                    compact_one(
                                        *p,
                                        kind,
                                        strategy,
                                        &pool,
                                        hooks.as_deref(),
                                        dry_run,
                                        write_tx,
                                        &details,
                                        &path,
                                        now,
                                        slots,
                                    )
                                    .await
                                });
                                // A panic in the strategy, a hook or a codec is this
                                // conversation's failure; the batch goes on.
                                let row = match task.await {
                                    Ok(row) => row,
                                    Err(e) => {
                                        let why = match e.try_into_panic() {
                                            Ok(p) => crate::error::panic_message(p.as_ref()),
                                            Err(e) => e.to_string(),
                                        };
                                        failed.status = Status::Failed(format!(
                                            "internal error (a bug in agent-db; please report it): {why}"
                                        ));
                                        failed
                                    }
                                };
                                if !dry_run {
                                    *spent.lock().expect("cost lock") +=
                                        row.cost_usd.unwrap_or(0.0);
                                }
                                let _ = msg_tx.send(Msg::Done(seq, Box::new(row)));
                            });
                        }
                    }
                }
            })
        };
        drop(msg_tx);
        while let Some(msg) = msg_rx.recv().await {
            match msg {
                Msg::Started => on_event(Event::Started),
                Msg::Done(seq, row) => {
                    on_event(Event::Finished { seq, row: &row });
                    if collect {
                        rows.push((seq, *row));
                    }
                }
            }
        }
        let _ = dispatcher.await;
    });
    // All proposal senders are gone: the writer drains and stops.
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
        w.join().map_err(|p| {
            Error::Internal(format!(
                "the writer stopped: {}",
                crate::error::panic_message(p.as_ref())
            ))
        })??;
    }
    drop(keeper);
    loaded?;
    rows.sort_by_key(|(seq, _)| *seq);
    Ok(RunReport {
        rows: rows.into_iter().map(|(_, r)| r).collect(),
        stopped_by_max_cost: stopped.load(std::sync::atomic::Ordering::Relaxed),
    })
}

/// Run the strategy on the head (the `strategy` failpoint sits here).
async fn rewrite_head(
    strategy: &dyn Strategy,
    input: &HeadInput<'_>,
    id: &str,
) -> std::result::Result<Rewrite, StrategyError> {
    crate::failpoint::hit("strategy", id);
    strategy.rewrite(input).await
}

type Built = Option<std::result::Result<NewHistory, StrategyError>>;

/// Run the strategy on the head (or take the summary a hook supplied). An offline strategy is
/// CPU-bound: it runs on the planning pool together with the swap, not on the async workers;
/// the `llm` strategy awaits its requests here and leaves the swap to the caller. `Err` is a
/// panic in the strategy or the swap, as its message.
async fn rewrite_and_build(
    plan: Plan,
    supplied: Option<Summary>,
    strategy: Arc<dyn Strategy>,
    pool: &Pool,
    now: DateTime<FixedOffset>,
) -> std::result::Result<(Plan, std::result::Result<Rewrite, StrategyError>, Built), String> {
    if let Some(s) = supplied {
        return Ok((plan, Ok(Rewrite::Summary(s)), None));
    }
    if !strategy.offline() {
        let r = rewrite_head(
            strategy.as_ref(),
            &HeadInput::new(&plan, now),
            &plan.meta.id,
        )
        .await;
        return Ok((plan, r, None));
    }
    let (tx, rx) = oneshot::channel();
    let handle = tokio::runtime::Handle::current();
    pool.submit(
        true,
        Box::new(move |_store| {
            let out = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                let input = HeadInput::new(&plan, now);
                let r = handle.block_on(rewrite_head(strategy.as_ref(), &input, &plan.meta.id));
                drop(input);
                let built = r.as_ref().ok().map(|rw| swap::build(&plan, rw));
                (plan, r, built)
            }))
            .map_err(|p| crate::error::panic_message(p.as_ref()));
            let _ = tx.send(out);
        }),
    );
    rx.await
        .unwrap_or_else(|_| Err("the planning thread stopped".to_string()))
}

/// The concurrency slots a conversation holds: `compacting` while its strategy runs (this is
/// what `--concurrency` bounds: summarizer requests in flight), then `writing` while it waits for
/// the writer, so the next conversation's request never waits on a database commit.
struct Slots {
    compacting: tokio::sync::OwnedSemaphorePermit,
    writing: Arc<Semaphore>,
    /// Set when the store refused a write for a reason no other conversation can escape (disk
    /// full, read-only): the dispatcher then starts nothing more, so nothing more is spent.
    halt: Arc<std::sync::OnceLock<String>>,
}

/// Whether a write error means the store cannot take any write (so the run should stop starting
/// conversations) rather than a problem with this one conversation.
fn store_cannot_write(e: &Error) -> bool {
    use rusqlite::ErrorCode as C;
    match e {
        Error::Unwritable { .. } => true,
        Error::Sqlite {
            source: rusqlite::Error::SqliteFailure(f, _),
            ..
        } => matches!(
            f.code,
            C::DiskFull | C::ReadOnly | C::CannotOpen | C::SystemIoFailure | C::PermissionDenied
        ),
        _ => false,
    }
}

#[allow(clippy::too_many_arguments)]
async fn compact_one(
    plan: Plan,
    kind: StoreKind,
    strategy: Arc<dyn Strategy>,
    pool: &Arc<Pool>,
    hooks: Option<&Hooks>,
    dry_run: bool,
    write_tx: std::sync::mpsc::Sender<WriteRequest>,
    details: &serde_json::Value,
    path: &Path,
    now: DateTime<FixedOffset>,
    slots: Slots,
) -> Row {
    let started = Instant::now();
    let halt = slots.halt.clone();
    let mut row = plan_row(&plan);
    row.strategy = Some(strategy.name().to_string());
    let finish = |mut row: Row, status: Status| {
        row.status = status;
        row.duration_ms = started.elapsed().as_millis() as u64;
        row
    };
    if dry_run && !strategy.offline() {
        return match strategy.estimate(&HeadInput::new(&plan, now)) {
            Some(Ok(est)) => {
                let after = plan.tokens_after(est.summary_tokens);
                let split = plan.split().expect("planned conversations have a split");
                row.messages_after = Some(
                    1 + (plan.loaded.messages.len() - split.cut)
                        + usize::from(split.reinsert.is_some()),
                );
                row.tokens_after = Some(after);
                row.utilization_after = plan.landing.map(|l| round3(l.utilization(after)));
                row.cost_usd = est.cost_usd;
                finish(row, Status::Planned)
            }
            Some(Err(StrategyError::Skip(why))) => finish(row, Status::Skipped(why)),
            Some(Err(StrategyError::Fail(why))) => finish(row, Status::Failed(why)),
            None => finish(row, Status::Planned),
        };
    }
    let store_kind = kind.name();
    let mut strategy_name = strategy.name().to_string();
    let mut supplied: Option<Summary> = None;
    if let Some(h) = hooks {
        let (verdict, records) = h
            .before(
                &hooks::before_payload(&plan, store_kind),
                plan.meta.cwd.as_deref(),
            )
            .await;
        row.hooks = records;
        match verdict {
            Verdict::Allow => {}
            Verdict::Block { hook, reason } => {
                return finish(
                    row,
                    Status::Skipped(format!("blocked by hook {hook}: {reason}")),
                )
            }
            Verdict::Summary { hook, text } => {
                strategy_name = format!("hook:{hook}");
                supplied = Some(Summary {
                    text,
                    ..Summary::default()
                });
            }
        }
    }
    row.strategy = Some(strategy_name.clone());
    if supplied.is_none() && !kind.rewrites_history() && strategy.name() == "prune" {
        return finish(
            row,
            Status::Skipped(format!(
                "prune is not available for {store_kind} stores: their history is append-only"
            )),
        );
    }
    let (plan, rewrite, built) =
        match rewrite_and_build(plan, supplied, strategy.clone(), pool, now).await {
            Ok((plan, Ok(r), built)) => (plan, r, built),
            Ok((_, Err(StrategyError::Skip(why)), _)) => return finish(row, Status::Skipped(why)),
            Ok((_, Err(StrategyError::Fail(why)), _)) => return finish(row, Status::Failed(why)),
            Err(panic) => {
                return finish(
                    row,
                    Status::Failed(format!(
                        "internal error (a bug in agent-db; please report it): {panic}"
                    )),
                )
            }
        };
    // The strategy is done: hand the compacting slot to the next conversation.
    let _writing = slots
        .writing
        .clone()
        .acquire_owned()
        .await
        .expect("semaphore open");
    drop(slots.compacting);
    if let Rewrite::Summary(sm) = &rewrite {
        row.cost_usd = sm.cost_usd;
        if let (Some(p), Some(c)) = (sm.prompt_tokens, sm.completion_tokens) {
            row.llm_tokens = Some((p, c));
        }
    }
    let new = match built.unwrap_or_else(|| swap::build(&plan, &rewrite)) {
        Ok(n) => n,
        Err(StrategyError::Skip(why)) => return finish(row, Status::Skipped(why)),
        Err(StrategyError::Fail(why)) => return finish(row, Status::Failed(why)),
    };
    row.messages_after = Some(new.messages);
    row.tokens_after = Some(new.tokens);
    row.utilization_after = plan.landing.map(|l| round3(l.utilization(new.tokens)));
    // What the agent will send next: the new history plus the fixed overhead.
    let context_after = new.tokens + plan.landing.map_or(0, |l| l.overhead);
    if dry_run {
        return finish(row, Status::Planned);
    }
    let from_hook = strategy_name.starts_with("hook:");
    let (summary_sha, model) = match &rewrite {
        // A hook's summary was written by no model, whatever the configured strategy.
        Rewrite::Summary(s) if from_hook => (plan::sha256_hex(&s.text), None),
        Rewrite::Summary(s) => (
            plan::sha256_hex(&s.text),
            s.model
                .clone()
                .or_else(|| strategy.model().map(str::to_string)),
        ),
        Rewrite::PrunedHead(_) => (String::new(), None),
    };
    let mut details = details.clone();
    if let (true, Some(obj)) = (from_hook, details.as_object_mut()) {
        // The strategy's recipe and instructions were not used.
        obj.remove("recipe");
        obj.remove("instructions_sha256");
    }
    if let (Some(obj), Rewrite::Summary(sm)) = (details.as_object_mut(), &rewrite) {
        if let Some(c) = sm.cost_usd {
            obj.insert("cost_usd".into(), c.into());
        }
        if let (Some(p), Some(c)) = (sm.prompt_tokens, sm.completion_tokens) {
            obj.insert("llm_prompt_tokens".into(), p.into());
            obj.insert("llm_completion_tokens".into(), c.into());
        }
    }
    if let (Some(obj), false) = (details.as_object_mut(), row.hooks.is_empty()) {
        obj.insert(
            "hooks".into(),
            serde_json::to_value(&row.hooks).unwrap_or_default(),
        );
    }
    if let Some(obj) = details.as_object_mut() {
        obj.insert("format".into(), plan.loaded.format.name().into());
        obj.insert("keep_tokens".into(), plan.keep_tokens.into());
        obj.insert(
            "tokens_exact".into(),
            plan.loaded.format.tokens_exact().into(),
        );
    }
    let summary_text = match &rewrite {
        Rewrite::Summary(s) => Some(s.text.clone()),
        Rewrite::PrunedHead(_) => None,
    };
    let split = plan.split().expect("compacted conversations have a split");
    let proposal = Proposal {
        id: plan.meta.id.clone(),
        format: plan.loaded.format,
        version: plan.loaded.version.clone(),
        raw_messages: new.raw_messages,
        summary: summary_text.clone(),
        tail_start: split.cut,
        reinsert: split.reinsert,
        slots: plan.loaded.row.slots.clone(),
        tokens_after: context_after,
        call_ids: new.call_ids,
        audit: AuditEntry {
            conversation_id: plan.meta.id.clone(),
            store_kind: store_kind.into(),
            reason: plan.reason.name().into(),
            strategy: strategy_name.clone(),
            model,
            messages_before: plan.loaded.messages.len() as i64,
            messages_after: new.messages as i64,
            tokens_before: plan.tokens_before() as i64,
            tokens_after: new.tokens as i64,
            summary_sha256: summary_sha,
            details,
        },
    };
    let (tx, rx) = oneshot::channel();
    if write_tx.send((proposal, tx)).is_err() {
        return finish(row, Status::Failed("the writer stopped".into()));
    }
    match rx.await {
        Ok(Ok(Written::Committed { compaction_id })) => {
            row.compaction_id = Some(compaction_id);
            if let Some(h) = hooks {
                let facts = hooks::AfterFacts {
                    strategy: &strategy_name,
                    summary: summary_text.as_deref(),
                    messages_after: row.messages_after.unwrap_or(0),
                    tokens_after: row.tokens_after.unwrap_or(0),
                    compaction_id,
                    cost_usd: row.cost_usd,
                };
                let records = h
                    .after(
                        &hooks::after_payload(&plan, store_kind, &facts),
                        plan.meta.cwd.as_deref(),
                    )
                    .await;
                row.hooks.extend(records);
            }
            finish(row, Status::Compacted)
        }
        Ok(Ok(Written::Changed(why))) => finish(row, Status::Skipped(why)),
        Ok(Err(e)) => {
            if store_cannot_write(&e) {
                let _ = halt.set(e.to_string());
            }
            finish(row, Status::Failed(e.to_string()))
        }
        Err(_) => finish(
            row,
            Status::Failed(format!("the writer for {} stopped", path.display())),
        ),
    }
}

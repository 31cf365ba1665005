//! The dispatcher: takes the places in line in selection order, waits for a window of plans at
//! once and starts each conversation as soon as its plan is ready (a large conversation still
//! being planned does not hold back those behind it), at most `--concurrency` at once. With
//! `--concurrency 1` or `--max-cost` the window is one place: conversations start in selection
//! order, so what a budget covers, and the order of the compactions, are the selection's.
//!
//! It stops starting conversations once `--max-cost` is reached or the store refused a write no
//! conversation escapes; those become [`NotStarted`] rows. The run's event loop receives the rows as they finish.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use tokio::sync::{mpsc, Semaphore};

use super::pool::{resolve, Pending};
use super::rows::{plan_row, Early, Job};
use super::task::{compact_one, Context, Slots};
use super::{Event, Msg};
use crate::plan::Plan;
use crate::report::{NotStarted, Row, Status};

/// What bounds the run.
pub(super) struct Limits {
    pub concurrency: usize,
    pub max_cost: Option<f64>,
    /// Set when the run is interrupted: start nothing more.
    pub interrupt: Option<Arc<AtomicBool>>,
    /// Places in line whose plans the dispatcher waits for at once, starting whichever is
    /// ready first.
    pub window: usize,
}

/// State the dispatcher and the tasks share.
struct Shared {
    ctx: Arc<Context>,
    /// `--concurrency` permits: conversations whose strategy runs.
    compacting: Arc<Semaphore>,
    /// Conversations past their strategy, waiting for the single writer: bounded too, so
    /// memory stays bounded even if the writer falls behind.
    writing: Arc<Semaphore>,
    halt: Arc<OnceLock<NotStarted>>,
    /// Row costs of finished conversations (not counted in a dry run).
    spent: Arc<Mutex<f64>>,
    stopped: Arc<AtomicBool>,
    max_cost: Option<f64>,
    interrupt: Option<Arc<AtomicBool>>,
    msg_tx: mpsc::UnboundedSender<Msg>,
}

/// Run the dispatcher and collect the rows (in completion order, with their `seq`), reporting
/// each to `on_event`. Returns the rows (empty unless `collect`), whether `--max-cost`
/// stopped the run, and whether the store was busy (another process kept its write lock).
pub(super) async fn drive(
    jobs: mpsc::Receiver<(usize, Pending)>,
    ctx: Arc<Context>,
    limits: Limits,
    collect: bool,
    on_event: &mut dyn FnMut(Event<'_>),
) -> (Vec<(usize, Row)>, bool, bool) {
    let (msg_tx, mut msg_rx) = mpsc::unbounded_channel::<Msg>();
    let stopped = Arc::new(AtomicBool::new(false));
    let halt = Arc::new(OnceLock::new());
    let shared = Shared {
        ctx,
        compacting: Arc::new(Semaphore::new(limits.concurrency)),
        writing: Arc::new(Semaphore::new(limits.concurrency)),
        halt: halt.clone(),
        spent: Arc::new(Mutex::new(0.0)),
        stopped: stopped.clone(),
        max_cost: limits.max_cost,
        interrupt: limits.interrupt.clone(),
        msg_tx,
    };
    let dispatcher = tokio::spawn(dispatch(jobs, shared, limits.window.max(1)));
    let mut rows = Vec::new();
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
    let busy = matches!(halt.get(), Some(NotStarted::Busy));
    (rows, stopped.load(Ordering::Relaxed), busy)
}

/// Take places in line as they come and start each conversation as soon as its plan is ready,
/// whichever that is among up to `window` being planned or waiting for a `--concurrency` slot:
/// a large conversation still being planned does not hold back the ones planned after it (rows
/// are put back in selection order by the caller). A conversation with nothing to compact is
/// reported the moment its plan says so, slot or no slot, and frees its place at once: while
/// every slot is busy, planning goes on ahead, so a slot that frees finds a plan ready.
async fn dispatch(mut jobs: mpsc::Receiver<(usize, Pending)>, shared: Shared, window: usize) {
    let mut planning = tokio::task::JoinSet::new();
    let mut ready: VecDeque<(usize, Box<Plan>, Option<Early>)> = VecDeque::new();
    let mut open = true;
    loop {
        let waiting = !ready.is_empty();
        tokio::select! {
            biased;
            permit = shared.compacting.clone().acquire_owned(), if waiting => {
                let permit = permit.expect("semaphore open");
                let (seq, plan, early) = ready.pop_front().expect("a plan is waiting");
                start(seq, plan, early, permit, &shared);
            }
            done = planning.join_next(), if !planning.is_empty() => {
                let Some(Ok((seq, job))) = done else { continue };
                match job {
                    Job::Row(r) => {
                        let _ = shared.msg_tx.send(Msg::Done(seq, r));
                    }
                    Job::Plan(p, early) => ready.push_back((seq, p, early)),
                }
            }
            next = jobs.recv(), if open && planning.len() + ready.len() < window => match next {
                Some((seq, pending)) => {
                    planning.spawn(async move { (seq, resolve(pending).await) });
                }
                None => open = false,
            },
            else => break,
        }
    }
}

/// Start one planned conversation with its `--concurrency` permit, unless the run stopped
/// starting.
fn start(
    seq: usize,
    plan: Box<Plan>,
    early: Option<Early>,
    permit: tokio::sync::OwnedSemaphorePermit,
    shared: &Shared,
) {
    if let Some(why) = not_started(shared) {
        let mut row = plan_row(&plan);
        row.status = Status::NotStarted(why);
        let _ = shared.msg_tx.send(Msg::Done(seq, Box::new(row)));
        return;
    }
    let _ = shared.msg_tx.send(Msg::Started);
    let slots = Slots {
        compacting: permit,
        writing: shared.writing.clone(),
        halt: shared.halt.clone(),
    };
    let ctx = shared.ctx.clone();
    let msg_tx = shared.msg_tx.clone();
    let spent = shared.spent.clone();
    tokio::spawn(async move {
        let mut failed = plan_row(&plan);
        let dry_run = ctx.dry_run;
        let task = tokio::spawn(compact_one(*plan, early, ctx, slots));
        // A panic in the strategy, a hook or a codec is this conversation's failure; the batch
        // goes on.
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
            *spent.lock().expect("cost lock") += row.cost_usd.unwrap_or(0.0);
        }
        let _ = msg_tx.send(Msg::Done(seq, Box::new(row)));
    });
}

/// Why the run starts no more conversations, if it does not: it was interrupted, the store
/// cannot be written, or `--max-cost` is reached. Row costs cover compacted conversations; the strategy's own meter
/// also counts what failed conversations were billed.
fn not_started(shared: &Shared) -> Option<NotStarted> {
    let so_far = shared
        .spent
        .lock()
        .expect("cost lock")
        .max(shared.ctx.strategy.spent_usd());
    if shared
        .interrupt
        .as_ref()
        .is_some_and(|i| i.load(Ordering::SeqCst))
    {
        return Some(NotStarted::Interrupted);
    }
    if let Some(why) = shared.halt.get() {
        return Some(why.clone());
    }
    let max = shared.max_cost.filter(|m| so_far >= *m)?;
    shared.stopped.store(true, Ordering::Relaxed);
    Some(NotStarted::MaxCost { max, spent: so_far })
}

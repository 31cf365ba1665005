//! The planning pool: a few OS threads, each with its own read connection, that plan
//! conversations (load, decode, count, split) and run the offline strategies. How much work
//! waits is bounded by the callers (the loader's channel, the strategy semaphore).

use std::collections::VecDeque;
use std::sync::{Arc, Condvar, Mutex};

use chrono::{DateTime, FixedOffset};
use tokio::sync::oneshot;

use super::rows::{plan_row, Job};
use crate::compact::{HeadInput, Strategy};
use crate::plan::{self, PlanOptions};
use crate::report::{Row, Status};
use crate::select::Reason;
use crate::split::Decision;
use crate::store::{Access, ConversationMeta, Location, Store};

/// Work for the pool. It gets the worker's own read connection (or why it could not open one).
pub(super) type PoolTask = Box<dyn FnOnce(std::result::Result<&Store, &str>) + Send>;

#[derive(Default)]
struct Queues {
    /// Strategy work of conversations already started: served first, so started conversations
    /// finish before more are planned ahead.
    urgent: VecDeque<PoolTask>,
    /// Planning, in selection order.
    normal: VecDeque<PoolTask>,
    closed: bool,
}

/// The planning pool.
pub(super) struct Pool {
    queues: Mutex<Queues>,
    ready: Condvar,
}

impl Pool {
    /// Start `threads` workers on the store at `location`.
    pub(super) fn start(
        location: &Location,
        threads: usize,
    ) -> (Arc<Pool>, Vec<std::thread::JoinHandle<()>>) {
        let pool = Arc::new(Pool {
            queues: Mutex::new(Queues::default()),
            ready: Condvar::new(),
        });
        let workers = (0..threads.max(1))
            .map(|i| {
                let pool = pool.clone();
                let location = location.clone();
                std::thread::Builder::new()
                    .name(format!("agent-db-plan-{i}"))
                    .spawn(move || pool.work(&location))
                    .expect("spawn a planning thread")
            })
            .collect();
        (pool, workers)
    }

    fn work(&self, location: &Location) {
        let store = location.open(Access::Read).map_err(|e| e.to_string());
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

    pub(super) fn submit(&self, urgent: bool, task: PoolTask) {
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
    pub(super) fn close(&self) {
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

/// A conversation's place in line: its job, or the planning still under way.
pub(super) enum Pending {
    Ready(Job),
    Planning {
        id: String,
        provider: String,
        reason: Reason,
        job: oneshot::Receiver<Job>,
    },
}

/// What planning does ahead, on the pool, for a conversation that will be compacted.
#[derive(Clone)]
pub(super) struct Ahead {
    /// Keep the history's digest and packed pre-image instead of its text (a run that writes).
    pub seal: bool,
    /// A strategy that calls out, and the run's time: prepare its requests (and release the
    /// head) while the conversation waits for a `--concurrency` slot, so a slot that frees is
    /// refilled at once. Only when no hook may supply the summary or read the messages.
    pub prepare: Option<(Arc<dyn Strategy>, DateTime<FixedOffset>)>,
    /// Release the head once prepared (not when `--fallback` may run another strategy on it).
    pub release_head: bool,
}

/// Queue the planning of one selected conversation on the pool; its job arrives on the
/// returned receiver.
pub(super) fn submit_plan(
    pool: &Pool,
    meta: ConversationMeta,
    reason: Reason,
    opts: &PlanOptions,
    ahead: &Ahead,
) -> Pending {
    let ahead = ahead.clone();
    let (tx, rx) = oneshot::channel();
    let (id, provider) = (meta.id.clone(), meta.provider.clone());
    let opts = opts.clone();
    pool.submit(
        false,
        Box::new(move |store| {
            let job = match store {
                Ok(store) => plan_job(store, meta, reason, &opts, &ahead),
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
pub(super) async fn resolve(p: Pending) -> Job {
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

/// Plan one selected conversation into a job, and do for one to compact what [`Ahead`] says:
/// keep only what the write needs of its loaded history text
/// ([`crate::store::StoredConversation::seal`]), prepare its requests. Any failure, a panic in
/// decoding, counting or preparing included, becomes that conversation's `failed` row.
fn plan_job(
    store: &Store,
    meta: ConversationMeta,
    reason: Reason,
    opts: &PlanOptions,
    ahead: &Ahead,
) -> Job {
    let (id, provider) = (meta.id.clone(), meta.provider.clone());
    let planned = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        crate::failpoint::hit("plan", &meta.id);
        let mut p = plan::plan(store, meta, reason, opts)?;
        if matches!(p.decision, Decision::NoOp(_)) {
            return Ok((p, None));
        }
        if ahead.seal {
            p.loaded.row.seal();
        }
        let early = ahead.prepare.as_ref().map(|(strategy, now)| {
            let r = strategy.prepare(&HeadInput::new(&p, *now));
            if ahead.release_head && matches!(r, Ok(Some(_))) {
                p.release_head();
            }
            r
        });
        Ok::<_, crate::error::Error>((p, early))
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
        Ok(Ok((p, _))) if matches!(p.decision, Decision::NoOp(_)) => {
            Job::Row(Box::new(plan_row(&p)))
        }
        Ok(Ok((p, early))) => Job::Plan(Box::new(p), early),
        Ok(Err(e)) => failed(e.to_string()),
        Err(p) => failed(format!(
            "internal error while planning (a bug in agent-db; please report it): {}",
            crate::error::panic_message(p.as_ref())
        )),
    }
}

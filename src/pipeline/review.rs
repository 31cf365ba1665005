//! Look before it lands: compactions proposed without writing (`compact --plan-out`, `--edit`)
//! as a plan a user can read and change, and a plan applied later (`apply`). A proposal carries
//! a fingerprint of the conversation as it was read; applying it loads the conversation again,
//! refuses it when the fingerprint differs, and otherwise writes the (possibly edited) summary
//! through the landing path `compact` takes: validated, scored, archived, one transaction each.

use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::land::{self, retention_of, Landing, Runway, Step};
use super::rows::{plan_row, record_after};
use crate::compact::swap;
use crate::compact::{Rewrite, StrategyError, Summary};
use crate::error::{Error, Result};
use crate::plan::{Plan, PlanOptions};
use crate::report::{NotStarted, Row, Status};
use crate::select::Reason;
use crate::split::{Decision, Split};
use crate::store::writer::Writer;
use crate::store::{Access, Location, Store};

/// The version of the plan file's format; `apply` refuses any other.
pub const PLAN_VERSION: u64 = 1;

/// A plan file: the store it was made for and one proposal per conversation.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct PlanFile {
    /// [`PLAN_VERSION`].
    pub agent_db_plan: u64,
    pub store: PlanStore,
    /// When the plan was made (RFC 3339).
    pub created_at: String,
    pub conversations: Vec<Proposed>,
}

/// The store a plan was made for.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct PlanStore {
    pub kind: String,
    /// The store file, absolute.
    pub path: PathBuf,
}

/// One conversation's proposed compaction.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Proposed {
    pub id: String,
    /// The strategy that wrote the summary (`hook:NAME` for a hook's).
    pub strategy: String,
    /// The summary; a user may change it before `apply`.
    pub summary: String,
    /// sha256 of the summary as proposed (so `apply` knows whether it was edited).
    pub summary_sha256: String,
    /// Index of the first message kept verbatim: messages before it are summarized.
    pub kept_from: usize,
    /// Index of the latest instruction put back after the summary, when the cut fell after it.
    pub reinsert: Option<usize>,
    pub messages_before: usize,
    pub messages_after: usize,
    pub tokens_before: usize,
    pub tokens_after: usize,
    pub retention: Option<crate::retention::Retention>,
    /// sha256 of the conversation's history as it was read.
    pub fingerprint: String,
    /// The model that wrote the summary, if one did.
    pub model: Option<String>,
    /// Why the conversation was selected (`manual`, `threshold`, `recency`), for the audit row.
    #[serde(default = "manual")]
    pub reason: String,
    /// The facts of the run that made the proposal (recipe, spend, `before_compaction` hooks,
    /// what a re-compaction summarized from, the tail budget), for the audit row's `details`:
    /// applied, the plan writes the audit row `compact` would have.
    #[serde(default)]
    pub details: serde_json::Value,
}

fn manual() -> String {
    Reason::Manual.name().to_string()
}

/// The selection reason a plan names (an unknown one is `manual`).
fn reason_named(name: &str) -> Reason {
    [Reason::Threshold, Reason::Recency, Reason::All]
        .into_iter()
        .find(|r| r.name() == name)
        .unwrap_or(Reason::Manual)
}

/// Where the pipeline puts the proposals of a run that writes nothing ([`super::RunOptions::proposals`]).
pub type Sink = Arc<Mutex<Vec<Proposed>>>;

/// The fingerprint of a conversation's history as loaded.
pub fn fingerprint(raw_messages: &str) -> String {
    crate::util::sha256_hex(raw_messages)
}

/// A compacted result, captured instead of written: the row says it was planned.
pub(super) fn capture(sink: &Sink, landing: Landing, row: &Row) -> Step<Status> {
    let Landing {
        plan,
        rewrite,
        new,
        label,
        model,
        facts,
    } = landing;
    let Rewrite::Summary(s) = rewrite else {
        return Err(Status::Skipped(
            "prune writes no summary, so it cannot be reviewed; compact it without --plan-out or --edit"
                .into(),
        ));
    };
    let split = plan.split().expect("compacted conversations have a split");
    let proposed = Proposed {
        id: plan.meta.id.clone(),
        strategy: label,
        summary_sha256: crate::util::sha256_hex(&s.text),
        summary: s.text,
        kept_from: split.cut,
        reinsert: split.reinsert,
        messages_before: plan.loaded.messages.len(),
        messages_after: new.messages,
        tokens_before: plan.tokens_before(),
        tokens_after: new.tokens,
        retention: row.retention.clone(),
        fingerprint: fingerprint(&plan.loaded.row.raw_messages),
        model,
        reason: plan.reason.name().to_string(),
        details: facts,
    };
    sink.lock().expect("proposals lock").push(proposed);
    Ok(Status::Planned)
}

/// How to apply a plan.
#[derive(Debug, Clone)]
pub struct ApplyOptions {
    /// How long a write waits for another process's write lock.
    pub busy_wait: Duration,
    /// Facts for the audit row's `details` (where the plan came from).
    pub details: serde_json::Value,
    /// The `after_compaction` hooks, run on each written compaction (the `before_compaction`
    /// ones ran when the plan was made).
    pub hooks: Option<Arc<crate::hooks::Hooks>>,
    /// `apply --min-retention`: a proposal scoring under it is skipped, nothing written.
    pub min_retention: Option<f64>,
    /// `apply --dry-run`: every check, no write (a proposal that would be written is
    /// [`Status::Planned`]); no write connection is opened.
    pub dry_run: bool,
}

/// The outcome of applying a plan.
pub struct ApplyReport {
    /// One row per proposal, in the plan's order.
    pub rows: Vec<Row>,
    /// Another process kept the write lock past `busy_wait`: later proposals were not written.
    pub busy: bool,
}

/// Read a plan file's text: its version is checked first, so an older or newer plan says so
/// rather than failing on a field.
pub fn parse_plan(text: &str) -> std::result::Result<PlanFile, String> {
    let value: serde_json::Value =
        serde_json::from_str(text).map_err(|e| format!("not JSON: {e}"))?;
    match value.get("agent_db_plan").and_then(|v| v.as_u64()) {
        Some(PLAN_VERSION) => {}
        Some(v) => {
            return Err(format!(
                "plan version {v}, but this agent-db reads version {PLAN_VERSION}"
            ))
        }
        None => return Err("not an agent-db plan (no \"agent_db_plan\" version)".into()),
    }
    serde_json::from_value(value).map_err(|e| format!("not a valid plan: {e}"))
}

/// Write every proposal of `plan` to the store at `location`, each in its own transaction,
/// through the landing path `compact` takes ([`super::land`]); `on_row` sees each row as it is
/// done.
pub fn apply(
    location: &Location,
    plan: &PlanFile,
    opts: &ApplyOptions,
    on_row: &mut dyn FnMut(&Row),
) -> Result<ApplyReport> {
    let store = location.open(Access::Read)?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|source| Error::Io {
            path: location.path.clone(),
            source,
        })?;
    let writer = (!opts.dry_run).then(|| Writer::start(location, opts.busy_wait));
    let handle = writer.as_ref().map(Writer::handle);
    let halt = OnceLock::new();
    let runway = Runway {
        kind: store.kind,
        writer: handle.as_ref(),
        hooks: opts.hooks.as_deref(),
        halt: &halt,
    };
    let mut rows = Vec::with_capacity(plan.conversations.len());
    for p in &plan.conversations {
        let started = Instant::now();
        let mut row = match runway.halted() {
            // A refused write no proposal escapes (busy, disk full, read-only): the rest wait.
            Some(why) => Row::bare(
                &p.id,
                "",
                reason_named(&p.reason).name(),
                Status::NotStarted(why),
            ),
            None => apply_one(&store, p, opts, &runway, &runtime),
        };
        row.strategy.get_or_insert_with(|| p.strategy.clone());
        row.duration_ms = started.elapsed().as_millis() as u64;
        on_row(&row);
        rows.push(row);
    }
    drop(handle);
    drop(runtime);
    if let Some(w) = writer {
        w.finish()?;
    }
    let busy = matches!(halt.get(), Some(NotStarted::Busy));
    Ok(ApplyReport { rows, busy })
}

/// One proposal: reload, compare, rebuild, score, land.
fn apply_one(
    store: &Store,
    p: &Proposed,
    opts: &ApplyOptions,
    runway: &Runway<'_>,
    runtime: &tokio::runtime::Runtime,
) -> Row {
    let plan = match reload(store, p) {
        Ok(plan) => plan,
        Err(row) => return *row,
    };
    let mut row = plan_row(&plan);
    row.strategy = Some(p.strategy.clone());
    let status = match rebuild(plan, p, opts, &mut row) {
        Ok(landing) => runtime
            .block_on(land::land(landing, runway, &mut row, |plan, c, audit| {
                let proposal = plan.loaded.row.propose(c, audit, Some(store));
                std::future::ready(Ok((plan, proposal)))
            }))
            .unwrap_or_else(|s| s),
        Err(s) => s,
    };
    row.status = status;
    row
}

/// The proposal's conversation loaded again, checked against the fingerprint, and planned with
/// the proposal's cut (or the row saying why not).
fn reload(store: &Store, p: &Proposed) -> std::result::Result<Plan, Box<Row>> {
    let reason = reason_named(&p.reason);
    let row = |provider: &str, status| Box::new(Row::bare(&p.id, provider, reason.name(), status));
    let meta = store
        .meta(&p.id)
        .map_err(|e| row("", Status::Failed(e.to_string())))?;
    let provider = meta.provider.clone();
    let failed = |why: String| row(&provider, Status::Failed(why));
    let loaded = store.load(&p.id).map_err(|e| failed(e.to_string()))?;
    if fingerprint(&loaded.raw_messages) != p.fingerprint {
        return Err(row(
            &provider,
            Status::Skipped(
                "changed since the plan was made (a live agent wrote to it); nothing written, make a new plan"
                    .into(),
            ),
        ));
    }
    let mut plan = crate::plan::plan_loaded(loaded, meta, reason, &PlanOptions::default())
        .map_err(|e| failed(e.to_string()))?;
    plan.decision = Decision::Compact(split_of(&plan, p).map_err(failed)?);
    if plan.split().is_some_and(|s| s.prior_summary) {
        // A re-compaction is scored against what it summarized, as when it was planned.
        plan.resummary = crate::plan::originals(store, &plan);
    }
    Ok(plan)
}

/// The new history from the proposal's (possibly edited) summary, scored and checked against
/// `--min-retention`: what lands, with the audit row's facts (the plan's, and the apply's own).
fn rebuild(plan: Plan, p: &Proposed, opts: &ApplyOptions, row: &mut Row) -> Step<Landing> {
    let rewrite = Rewrite::Summary(Summary {
        text: p.summary.clone(),
        model: p.model.clone(),
        ..Summary::default()
    });
    let new = swap::build(&plan, &rewrite).map_err(|e| match e {
        StrategyError::Skip(why) => Status::Skipped(why),
        StrategyError::Fail(why) | StrategyError::Rejected(why) => Status::Failed(why),
    })?;
    record_after(row, &plan, &new);
    let kept = retention_of(&plan, &new, false);
    let score = kept.score;
    row.retention = Some(kept);
    if let Some(min) = opts.min_retention.filter(|m| score < *m) {
        return Err(land::below_floor(row, score, min));
    }
    let mut facts = match &p.details {
        serde_json::Value::Object(o) => o.clone(),
        _ => serde_json::Map::new(),
    };
    if let serde_json::Value::Object(own) = &opts.details {
        facts.extend(own.clone());
    }
    let edited = crate::util::sha256_hex(&p.summary) != p.summary_sha256;
    facts.insert("edited".into(), edited.into());
    Ok(Landing {
        plan,
        rewrite,
        new,
        label: p.strategy.clone(),
        model: p.model.clone(),
        facts: serde_json::Value::Object(facts),
    })
}

/// The plan's cut over the conversation as loaded now (the same messages: the fingerprint
/// matched), checked against what a split may be.
fn split_of(plan: &Plan, p: &Proposed) -> std::result::Result<Split, String> {
    let messages = &plan.loaded.messages;
    let prior_len =
        crate::summary::prior_len(plan.loaded.format, messages, plan.loaded.row.agent_summary);
    let cut = p.kept_from;
    let bad = |why: &str| Err(format!("the plan's kept range is not valid: {why}"));
    if cut > messages.len() || cut <= prior_len {
        return bad(&format!(
            "kept_from {cut} is outside {}..={} for its {} messages",
            prior_len + 1,
            messages.len(),
            messages.len()
        ));
    }
    if p.reinsert.is_some_and(|i| i < prior_len || i >= cut) {
        return bad("reinsert must be a summarized message");
    }
    Ok(Split {
        cut,
        reinsert: p.reinsert,
        prior_summary: prior_len > 0,
        prior_len,
        head_tokens: plan.loaded.tokens[..cut].iter().sum(),
        tail_tokens: plan.loaded.tokens[cut..].iter().sum(),
    })
}

//! Look before it lands: compactions proposed without writing (`compact --plan-out`, `--edit`)
//! as a plan a user can read and change, and a plan applied later (`apply`). A proposal carries
//! a fingerprint of the conversation as it was read; applying it loads the conversation again,
//! refuses it when the fingerprint differs, and otherwise writes the (possibly edited) summary
//! through the one write path: validated, scored, archived, one transaction each.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::rows::plan_row;
use super::task::{compaction_of, record_after, retention_of};
use crate::compact::swap;
use crate::compact::{Rewrite, Strategy, StrategyError, Summary};
use crate::error::{Error, Result};
use crate::plan::{Plan, PlanOptions};
use crate::report::{NotStarted, Row, Status};
use crate::select::Reason;
use crate::split::{Decision, Split};
use crate::store::pre_image::AuditEntry;
use crate::store::writer::{Writer, WriterHandle};
use crate::store::{Access, Location, Store, Written};

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
}

/// Where the pipeline puts the proposals of a run that writes nothing ([`super::RunOptions::proposals`]).
pub type Sink = Arc<Mutex<Vec<Proposed>>>;

/// The fingerprint of a conversation's history as loaded.
pub fn fingerprint(raw_messages: &str) -> String {
    crate::util::sha256_hex(raw_messages)
}

/// A compacted result, captured instead of written: the row says it was planned.
pub(super) fn capture(
    sink: &Sink,
    plan: &Plan,
    rewrite: &Rewrite,
    new: &swap::NewHistory,
    row: &Row,
    label: &str,
    landed: &dyn Strategy,
) -> std::result::Result<Status, Status> {
    let Rewrite::Summary(s) = rewrite else {
        return Err(Status::Skipped(
            "prune writes no summary, so it cannot be reviewed; compact it without --plan-out or --edit"
                .into(),
        ));
    };
    let split = plan.split().expect("compacted conversations have a split");
    let model = if label.starts_with("hook:") {
        None
    } else {
        s.model
            .clone()
            .or_else(|| landed.model().map(str::to_string))
    };
    let proposed = Proposed {
        id: plan.meta.id.clone(),
        strategy: label.to_string(),
        summary: s.text.clone(),
        summary_sha256: crate::util::sha256_hex(&s.text),
        kept_from: split.cut,
        reinsert: split.reinsert,
        messages_before: plan.loaded.messages.len(),
        messages_after: new.messages,
        tokens_before: plan.tokens_before(),
        tokens_after: new.tokens,
        retention: row.retention.clone(),
        fingerprint: fingerprint(&plan.loaded.row.raw_messages),
        model,
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

/// Write every proposal of `plan` to the store at `location`, each in its own transaction;
/// `on_row` sees each row as it is done.
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
    let mut rows = Vec::with_capacity(plan.conversations.len());
    let mut busy = false;
    for p in &plan.conversations {
        let started = Instant::now();
        let mut row = if busy {
            Row::bare(
                &p.id,
                "",
                Reason::Manual.name(),
                Status::NotStarted(NotStarted::Busy),
            )
        } else {
            apply_one(&store, p, opts, handle.as_ref(), &runtime)
        };
        row.strategy.get_or_insert_with(|| p.strategy.clone());
        busy |= matches!(row.status, Status::NotStarted(NotStarted::Busy));
        row.duration_ms = started.elapsed().as_millis() as u64;
        on_row(&row);
        rows.push(row);
    }
    drop(handle);
    drop(runtime);
    if let Some(w) = writer {
        w.finish()?;
    }
    Ok(ApplyReport { rows, busy })
}

/// One proposal: reload, compare, rebuild, score, write.
fn apply_one(
    store: &Store,
    p: &Proposed,
    opts: &ApplyOptions,
    writer: Option<&WriterHandle>,
    runtime: &tokio::runtime::Runtime,
) -> Row {
    let manual = Reason::Manual.name();
    let failed =
        |provider: &str, why: String| Row::bare(&p.id, provider, manual, Status::Failed(why));
    let meta = match store.meta(&p.id) {
        Ok(m) => m,
        Err(e) => return failed("", e.to_string()),
    };
    let provider = meta.provider.clone();
    let loaded = match store.load(&p.id) {
        Ok(l) => l,
        Err(e) => return failed(&provider, e.to_string()),
    };
    if fingerprint(&loaded.raw_messages) != p.fingerprint {
        return Row::bare(
            &p.id,
            &provider,
            manual,
            Status::Skipped(
                "changed since the plan was made (a live agent wrote to it); nothing written, make a new plan"
                    .into(),
            ),
        );
    }
    let mut plan =
        match crate::plan::plan_loaded(loaded, meta, Reason::Manual, &PlanOptions::default()) {
            Ok(plan) => plan,
            Err(e) => return failed(&provider, e.to_string()),
        };
    match split_of(&plan, p) {
        Ok(split) => plan.decision = Decision::Compact(split),
        Err(why) => return failed(&provider, why),
    }
    let mut row = plan_row(&plan);
    row.strategy = Some(p.strategy.clone());
    let rewrite = Rewrite::Summary(Summary {
        text: p.summary.clone(),
        model: p.model.clone(),
        ..Summary::default()
    });
    let new = match swap::build(&plan, &rewrite) {
        Ok(new) => new,
        Err(StrategyError::Skip(why)) => {
            row.status = Status::Skipped(why);
            return row;
        }
        Err(StrategyError::Fail(why) | StrategyError::Rejected(why)) => {
            row.status = Status::Failed(why);
            return row;
        }
    };
    record_after(&mut row, &plan, &new);
    let kept = retention_of(&plan, &new, false);
    let score = kept.score;
    row.retention = Some(kept);
    if let Some(min) = opts.min_retention.filter(|m| score < *m) {
        row.status = Status::Skipped(format!(
            "retention {:.1}% is under --min-retention {:.1}%; nothing written",
            score * 100.0,
            min * 100.0
        ));
        row.messages_after = row.messages_before;
        row.tokens_after = row.tokens_before;
        row.utilization_after = row.utilization_before;
        return row;
    }
    let edited = crate::util::sha256_hex(&p.summary) != p.summary_sha256;
    let mut details = opts.details.clone();
    if let Some(obj) = details.as_object_mut() {
        obj.insert("edited".into(), edited.into());
        obj.insert("format".into(), plan.loaded.format.name().into());
        obj.insert(
            "tokens_exact".into(),
            plan.loaded.format.tokens_exact().into(),
        );
    }
    let audit = AuditEntry {
        conversation_id: plan.meta.id.clone(),
        store_kind: store.kind.name().into(),
        reason: manual.into(),
        strategy: p.strategy.clone(),
        model: p.model.clone(),
        messages_before: plan.loaded.messages.len() as i64,
        messages_after: new.messages as i64,
        tokens_before: plan.tokens_before() as i64,
        tokens_after: new.tokens as i64,
        summary_sha256: crate::util::sha256_hex(&p.summary),
        retention: row
            .retention
            .as_ref()
            .and_then(|r| serde_json::to_string(r).ok()),
        details,
    };
    let Some(writer) = writer else {
        // A dry run: every check passed, this is what would be written.
        row.status = Status::Planned;
        return row;
    };
    let compaction = compaction_of(&plan, &rewrite, new, p.model.clone());
    let proposal = plan.loaded.row.propose(compaction, audit, Some(store));
    row.status = match runtime.block_on(writer.write(proposal)) {
        Ok(Ok(Written::Committed { compaction_id })) => {
            row.compaction_id = Some(compaction_id);
            if let Some(h) = &opts.hooks {
                let facts = crate::hooks::AfterFacts {
                    strategy: &p.strategy,
                    summary: Some(&p.summary),
                    messages_after: row.messages_after.unwrap_or(0),
                    tokens_after: row.tokens_after.unwrap_or(0),
                    compaction_id,
                    cost_usd: row.cost_usd,
                };
                let payload = crate::hooks::after_payload(&plan, store.kind.name(), &facts);
                let records = runtime.block_on(h.after(&payload, plan.meta.cwd.as_deref()));
                row.hooks.extend(records);
            }
            Status::Compacted
        }
        Ok(Ok(Written::Changed(why))) => Status::Skipped(why),
        Ok(Err(Error::Busy { .. })) => Status::NotStarted(NotStarted::Busy),
        Ok(Err(e)) => Status::Failed(e.to_string()),
        Err(gone) => Status::Failed(gone),
    };
    if !matches!(row.status, Status::Compacted) {
        row.messages_after = row.messages_before;
        row.tokens_after = row.tokens_before;
        row.utilization_after = row.utilization_before;
    }
    row
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

//! Landing a compacted conversation: the one path from a new history to a committed compaction
//! that every writer takes (`compact`, `apply`, and any later one). It builds the audit row
//! (the run's facts plus what the landing itself knows), has the store make its proposal, hands
//! it to the writer (one transaction: version check, archive, audit row, write), says what a
//! refused write means for the rest of the run, and runs the `after_compaction` hooks. So an
//! audit row is the same whoever wrote it.

use std::future::Future;
use std::sync::OnceLock;

use crate::compact::swap::NewHistory;
use crate::compact::{Rewrite, Strategy};
use crate::error::Error;
use crate::hooks::{self, Hooks};
use crate::plan::Plan;
use crate::report::{NotStarted, Row, Status};
use crate::store::pre_image::AuditEntry;
use crate::store::writer::WriterHandle;
use crate::store::{Compaction, Proposal, StoreKind, Written};

/// The end of a conversation's steps: its status.
pub(super) type Step<T> = std::result::Result<T, Status>;

/// Where a compaction lands: the run's writer (none in a dry run) and what runs after it.
pub(super) struct Runway<'a> {
    pub kind: StoreKind,
    pub writer: Option<&'a WriterHandle>,
    pub hooks: Option<&'a Hooks>,
    /// Set when the store refuses a write for a reason no other conversation escapes (busy,
    /// disk full, read-only): the writer then starts no further conversation.
    pub halt: &'a OnceLock<NotStarted>,
}

impl Runway<'_> {
    /// Why no further conversation starts, once a write was refused for all of them.
    pub fn halted(&self) -> Option<NotStarted> {
        self.halt.get().cloned()
    }
}

/// A compacted conversation, ready to land.
pub(super) struct Landing {
    pub plan: Plan,
    pub rewrite: Rewrite,
    pub new: NewHistory,
    /// Who wrote the new head, as reports and the audit row name it (`hook:NAME` for a hook).
    pub label: String,
    /// The model that wrote the summary, if one did.
    pub model: Option<String>,
    /// [`run_facts`] (plus a writer's own, such as where a plan came from).
    pub facts: serde_json::Value,
}

/// Land `landing`: the audit row, the store's proposal (`propose`: on the planning pool for a
/// batch, in place for a plan), the write and the `after_compaction` hooks. Without a writer it
/// stops before the proposal ([`Status::Planned`]). A conversation that is not written keeps its
/// before figures as its after figures.
pub(super) async fn land<F, Fut>(
    landing: Landing,
    runway: &Runway<'_>,
    row: &mut Row,
    propose: F,
) -> Step<Status>
where
    F: FnOnce(Plan, Compaction, AuditEntry) -> Fut,
    Fut: Future<Output = Step<(Plan, Proposal)>>,
{
    let Landing {
        plan,
        rewrite,
        new,
        label,
        model,
        facts,
    } = landing;
    let Some(writer) = runway.writer else {
        return Ok(Status::Planned);
    };
    let summary = summary_text(&rewrite);
    let audit = audit_entry(
        &plan,
        runway.kind,
        &label,
        model.clone(),
        &rewrite,
        &new,
        row,
        facts,
    );
    let compaction = compaction_of(&plan, &rewrite, new, model);
    let written = match propose(plan, compaction, audit).await {
        Ok((plan, proposal)) => write(writer, proposal, runway.halt)
            .await
            .map(|id| (plan, id)),
        Err(status) => Err(status),
    };
    let (plan, compaction_id) = written.map_err(|status| left_as_it_was(row, status))?;
    row.compaction_id = Some(compaction_id);
    if let Some(h) = runway.hooks {
        hooks_after(
            h,
            &plan,
            runway.kind,
            row,
            &label,
            summary.as_deref(),
            compaction_id,
        )
        .await;
    }
    Ok(Status::Compacted)
}

/// The summary's text (none for a pruned head).
fn summary_text(rewrite: &Rewrite) -> Option<String> {
    match rewrite {
        Rewrite::Summary(s) => Some(s.text.clone()),
        Rewrite::PrunedHead(_) => None,
    }
}

/// The model that wrote a summary: the one it names, else the strategy's; none for a pruned
/// head or a summary a hook supplied (written by no model, whatever the configured strategy).
pub(super) fn summary_model(
    rewrite: &Rewrite,
    by_hook: bool,
    landed: &dyn Strategy,
) -> Option<String> {
    match rewrite {
        Rewrite::Summary(s) if !by_hook => s
            .model
            .clone()
            .or_else(|| landed.model().map(str::to_string)),
        _ => None,
    }
}

/// A conversation left as it was: the row's after figures are its before figures, and
/// `status` says why.
pub(super) fn left_as_it_was(row: &mut Row, status: Status) -> Status {
    row.messages_after = row.messages_before;
    row.tokens_after = row.tokens_before;
    row.utilization_after = row.utilization_before;
    status
}

/// A conversation left as it was (`why` says what compacting it would have done).
pub(super) fn unchanged(row: &mut Row, why: String) -> Status {
    left_as_it_was(row, Status::Skipped(why))
}

/// A result under the retention floor `min` (`--min-retention`): nothing is written.
pub(super) fn below_floor(row: &mut Row, score: f64, min: f64) -> Status {
    unchanged(
        row,
        format!(
            "retention {:.1}% is under --min-retention {:.1}%; nothing written",
            score * 100.0,
            min * 100.0
        ),
    )
}

/// The facts of the run that made a compaction, for its audit row's `details`: the run's own
/// (`base`: recipe, instructions), the fallback, the summarizer's spend, the `before_compaction`
/// hooks, what a re-compaction's summary was written from, and the tail budget. A plan file
/// carries them, so a plan applied later writes the audit row a compact would have.
pub(super) fn run_facts(
    plan: &Plan,
    by_hook: bool,
    rewrite: &Rewrite,
    row: &Row,
    base: &serde_json::Value,
) -> serde_json::Value {
    let mut details = base.clone();
    let Some(obj) = details.as_object_mut() else {
        return details;
    };
    if by_hook {
        // The strategy's recipe and instructions were not used.
        obj.remove("recipe");
        obj.remove("instructions_sha256");
    }
    if let Some(f) = &row.fallback {
        // Another strategy landed: the configured one's recipe was not what wrote the head.
        obj.remove("recipe");
        obj.remove("instructions_sha256");
        obj.insert(
            "fallback".into(),
            serde_json::to_value(f).unwrap_or_default(),
        );
    }
    if let Rewrite::Summary(sm) = rewrite {
        if let Some(c) = sm.cost_usd {
            obj.insert("cost_usd".into(), c.into());
        }
        if let (Some(p), Some(c)) = (sm.prompt_tokens, sm.completion_tokens) {
            obj.insert("llm_prompt_tokens".into(), p.into());
            obj.insert("llm_completion_tokens".into(), c.into());
        }
    }
    if !row.hooks.is_empty() {
        obj.insert(
            "hooks".into(),
            serde_json::to_value(&row.hooks).unwrap_or_default(),
        );
    }
    if let (false, Some(r)) = (by_hook, resummary_detail(plan, rewrite)) {
        obj.insert("resummary".into(), r);
    }
    obj.insert("keep_tokens".into(), plan.keep_tokens.into());
    details
}

/// The audit row's `details`: the run's facts, and what the landing knows (the context after,
/// in the agent's units: what a listing reports for a store that records no context of its own
/// until the agent's next turn; the history's format).
fn audit_details(plan: &Plan, facts: serde_json::Value, tokens_after: usize) -> serde_json::Value {
    let mut details = match facts {
        serde_json::Value::Object(o) => o,
        _ => serde_json::Map::new(),
    };
    let keep_tokens = details.shift_remove("keep_tokens");
    if let Some(l) = plan.landing {
        details.insert("context_after".into(), l.context(tokens_after).into());
    }
    details.insert("format".into(), plan.loaded.format.name().into());
    if let Some(k) = keep_tokens {
        details.insert("keep_tokens".into(), k);
    }
    details.insert(
        "tokens_exact".into(),
        plan.loaded.format.tokens_exact().into(),
    );
    serde_json::Value::Object(details)
}

/// What a re-compaction's summary was written from, for the audit row: the originals (and how
/// many earlier compactions they span) or the earlier summary (and why).
fn resummary_detail(plan: &Plan, rewrite: &Rewrite) -> Option<serde_json::Value> {
    use crate::plan::Resummary;
    if !matches!(rewrite, Rewrite::Summary(_)) {
        return None;
    }
    Some(match plan.resummary.as_ref()? {
        Resummary::Originals {
            head, compactions, ..
        } => serde_json::json!({
            "from": "originals", "compactions": compactions, "messages": head.len()
        }),
        Resummary::CarriedSummary(why) => {
            serde_json::json!({ "from": "earlier summary", "why": why })
        }
    })
}

/// The audit row of landing `plan` as `new`.
#[allow(clippy::too_many_arguments)]
fn audit_entry(
    plan: &Plan,
    kind: StoreKind,
    label: &str,
    model: Option<String>,
    rewrite: &Rewrite,
    new: &NewHistory,
    row: &Row,
    facts: serde_json::Value,
) -> AuditEntry {
    AuditEntry {
        conversation_id: plan.meta.id.clone(),
        store_kind: kind.name().into(),
        reason: plan.reason.name().into(),
        strategy: label.to_string(),
        model,
        messages_before: plan.loaded.messages.len() as i64,
        messages_after: new.messages as i64,
        tokens_before: plan.tokens_before() as i64,
        tokens_after: new.tokens as i64,
        summary_sha256: match rewrite {
            Rewrite::Summary(s) => crate::util::sha256_hex(&s.text),
            Rewrite::PrunedHead(_) => String::new(),
        },
        retention: row
            .retention
            .as_ref()
            .and_then(|r| serde_json::to_string(r).ok()),
        details: audit_details(plan, facts, new.tokens),
    }
}

/// The store-neutral compaction of `plan` into `new` (what the store's proposal is made from).
fn compaction_of(
    plan: &Plan,
    rewrite: &Rewrite,
    new: NewHistory,
    model: Option<String>,
) -> Compaction {
    let split = plan.split().expect("compacted conversations have a split");
    Compaction {
        format: plan.loaded.format,
        summary: summary_text(rewrite),
        tail_start: split.cut,
        reinsert: split.reinsert,
        // What the agent will send next: the new history plus the fixed overhead.
        context_after: plan.landing.map_or(new.tokens, |l| l.context(new.tokens)),
        history: new.raw_messages,
        call_ids: new.call_ids,
        model,
        message_tokens: plan.loaded.tokens.clone(),
    }
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

/// Hand the proposal to the writer and wait: the compaction's audit id, or the row's status.
/// A refusal no later conversation escapes sets `halt`.
async fn write(
    writer: &WriterHandle,
    proposal: Proposal,
    halt: &OnceLock<NotStarted>,
) -> Step<i64> {
    match writer.write(proposal).await {
        Ok(Ok(Written::Committed { compaction_id })) => Ok(compaction_id),
        Ok(Ok(Written::Changed(why))) => Err(Status::Skipped(why)),
        Ok(Err(Error::Busy { .. })) => {
            // Not this conversation's failure: the run stops writing and says so once.
            let _ = halt.set(NotStarted::Busy);
            Err(Status::NotStarted(NotStarted::Busy))
        }
        Ok(Err(e)) => {
            if store_cannot_write(&e) {
                let _ = halt.set(NotStarted::StoreUnwritable(e.to_string()));
            }
            Err(Status::Failed(e.to_string()))
        }
        Err(gone) => Err(Status::Failed(gone)),
    }
}

/// Run the `after_compaction` hooks on the committed result (they observe; they cannot undo).
async fn hooks_after(
    h: &Hooks,
    plan: &Plan,
    kind: StoreKind,
    row: &mut Row,
    label: &str,
    summary: Option<&str>,
    compaction_id: i64,
) {
    let facts = hooks::AfterFacts {
        strategy: label,
        summary,
        messages_after: row.messages_after.unwrap_or(0),
        tokens_after: row.tokens_after.unwrap_or(0),
        compaction_id,
        cost_usd: row.cost_usd,
    };
    let records = h
        .after(
            &hooks::after_payload(plan, kind.name(), &facts),
            plan.meta.cwd.as_deref(),
        )
        .await;
    row.hooks.extend(records);
}

/// How much of the summarized span's artifacts the new history keeps: the artifacts are those
/// the plan kept when it released the head, or read now from what was summarized (for a
/// re-compaction that reads them, the originals since the conversation began) or, for a
/// strategy that rewrites the head in place, from the head. A summary with an artifact ledger
/// is also scored without it ([`crate::retention::Retention::model_score`]).
pub(super) fn retention_of(
    plan: &Plan,
    new: &NewHistory,
    rewrites_head: bool,
) -> crate::retention::Retention {
    let arts = match &plan.artifacts {
        _ if rewrites_head => plan.artifacts_of(plan.head()),
        Some(a) => a.clone(),
        None => plan.summarized_artifacts(),
    };
    // With an artifact ledger in the summary, the model's share and the ledger's apart.
    crate::retention::score_history(&arts, &new.raw_messages)
}

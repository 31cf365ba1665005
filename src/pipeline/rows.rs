//! Report rows the pipeline builds before a conversation's strategy runs: from a selection
//! outcome, and from a plan.

use crate::plan::Plan;
use crate::report::{Row, Status};
use crate::select::{Outcome, Reason};
use crate::split::Decision;
use crate::store::ConversationMeta;

/// What a conversation's place in line resolves to: a plan to compact, or a finished row.
pub(super) enum Job {
    /// A planned conversation, with its requests when they were prepared ahead.
    Plan(Box<Plan>, Option<Early>),
    Row(Box<Row>),
}

/// A strategy's preparation done on the planning pool right after planning (see
/// [`super::pool::Ahead`]).
pub(super) type Early =
    std::result::Result<Option<crate::compact::Prepared>, crate::compact::StrategyError>;

/// The notes of a row: why `--target` cannot be reached (only while the estimate after is over
/// it: a note never contradicts its row), and why a re-compaction summarized the earlier
/// summary.
pub(super) fn row_note(p: &Plan, after: Option<f64>) -> Option<String> {
    let target = p.target_note.clone().filter(|_| match (after, p.target) {
        (Some(a), Some(t)) => a > t,
        _ => true,
    });
    let carried = match &p.resummary {
        Some(crate::plan::Resummary::CarriedSummary(why)) => Some(format!(
            "summarized from the earlier summary, not the originals: {why}"
        )),
        _ => None,
    };
    match (target, carried) {
        (Some(t), Some(c)) => Some(format!("{t}; {c}")),
        (t, c) => t.or(c),
    }
}

/// The figures after compacting to `tokens` of messages: the estimated utilization (in the
/// units of the stored one), and the row's notes again now that it is known.
pub(super) fn set_after(row: &mut Row, p: &Plan, tokens: usize) {
    row.utilization_after = p.landing.map(|l| l.utilization(tokens));
    row.note = row_note(p, row.utilization_after);
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
    row.utilization_before = p.landing.map(|l| l.before);
    row.note = row_note(p, None);
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

pub(super) type Selected = (ConversationMeta, Reason);

/// A selection outcome: a conversation to plan, or its finished row.
pub(super) fn selection_row(o: Outcome) -> std::result::Result<Selected, Box<Row>> {
    match o {
        Outcome::Selected { meta, reason } => Ok((meta, reason)),
        Outcome::Skipped {
            meta,
            reason,
            why,
            summary,
        } => {
            let mut row = Row::bare(
                &meta.id,
                &meta.provider,
                reason.name(),
                Status::Skipped(why),
            );
            row.skipped_at_selection = Some(summary);
            Err(Box::new(row))
        }
        Outcome::Failed { id, reason, error } => Err(Box::new(Row::bare(
            &id,
            "",
            reason.name(),
            Status::Failed(error),
        ))),
    }
}

/// The figures after compaction on the row.
pub(super) fn record_after(row: &mut Row, plan: &Plan, new: &crate::compact::swap::NewHistory) {
    row.messages_after = Some(new.messages);
    row.tokens_after = Some(new.tokens);
    set_after(row, plan, new.tokens);
}

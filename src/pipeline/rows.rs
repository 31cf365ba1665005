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

pub(super) fn round3(x: f64) -> f64 {
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
    if let Some(crate::plan::Resummary::CarriedSummary(why)) = &p.resummary {
        let fell_back = format!("summarized from the earlier summary, not the originals: {why}");
        row.note = Some(match row.note.take() {
            Some(n) => format!("{n}; {fell_back}"),
            None => fell_back,
        });
    }
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

//! Building the new history: the summary as one user message in the conversation's own format
//! (for goose followed by the assistant continuation goose stores after its own summaries),
//! the latest instruction when the split puts it back, then the kept tail, every kept message
//! byte-identical. What comes before the kept tail is decoded again (a round trip through the
//! codec; the kept messages are the planned ones, already decoded from these same bytes), the
//! whole is validated, and it must be smaller than before.

use std::collections::HashSet;

use serde_json::value::RawValue;

use super::{validate::validate, Rewrite, StrategyError};
use crate::message::{self, Message};
use crate::plan::Plan;
use crate::tokens;

/// A validated new history, ready to write.
#[derive(Debug, Clone)]
pub struct NewHistory {
    pub raw_messages: String,
    pub messages: usize,
    pub tokens: usize,
    /// The summary text (None for prune).
    pub summary: Option<String>,
    /// Every tool-call id still present.
    pub call_ids: HashSet<String>,
}

pub fn build(plan: &Plan, rewrite: &Rewrite) -> Result<NewHistory, StrategyError> {
    let split = plan
        .split()
        .ok_or_else(|| StrategyError::Skip("nothing to compact".into()))?;
    let format = plan.loaded.format;
    let mut parts: Vec<Box<RawValue>> = Vec::new();
    let summary = match rewrite {
        Rewrite::Summary(s) => {
            if s.text.trim().is_empty() {
                return Err(StrategyError::Fail("the summary is empty".into()));
            }
            parts.extend(message::summary_messages(format, &s.text));
            if let Some(i) = split.reinsert {
                parts.push(plan.loaded.messages[i].raw.clone());
            }
            Some(s.text.clone())
        }
        Rewrite::PrunedHead(head) => {
            if head.len() != split.cut {
                return Err(StrategyError::Fail(format!(
                    "prune returned {} messages for a head of {}",
                    head.len(),
                    split.cut
                )));
            }
            parts.extend(head.iter().cloned());
            None
        }
    };
    let tail = plan.tail();
    let raw_messages = message::join_raw(
        parts
            .iter()
            .map(|p| p.as_ref())
            .chain(tail.iter().map(|m| m.raw.as_ref())),
    );
    // Round trip: what we write must decode with the same codec kodelet's loader mirrors. The
    // kept tail's bytes are the planned messages' own, so their decoding is reused (decoding is
    // a function of a message's bytes); what comes before them is decoded here, with the same
    // rule as a whole history's (a message hidden from the agent is not part of it).
    let mut head = Vec::with_capacity(parts.len());
    for (i, raw) in parts.iter().enumerate() {
        if format.agent_visible(raw) {
            let m = message::decode(format, raw).map_err(|e| {
                let e = e.at(Some(i));
                StrategyError::Fail(format!("the new history does not decode: {e}"))
            })?;
            head.push(m);
        }
    }
    let decoded: Vec<&Message> = head.iter().chain(tail).collect();
    validate(format, &decoded)
        .map_err(|e| StrategyError::Fail(format!("invalid new history: {e}")))?;
    let new_tokens = new_history_tokens(plan, &head);
    let before = plan.tokens_before();
    if new_tokens >= before {
        return Err(StrategyError::Skip(format!(
            "not smaller: {new_tokens} tokens after vs {before} before"
        )));
    }
    let call_ids = decoded
        .iter()
        .flat_map(|m| m.tool_calls().map(|(id, _, _)| id.to_string()))
        .collect();
    Ok(NewHistory {
        raw_messages,
        messages: decoded.len(),
        tokens: new_tokens,
        summary,
        call_ids,
    })
}

/// Tokens of the new history: those of `head` (what comes before the kept tail: the summary, a
/// re-inserted instruction, a pruned head) counted, and the kept tail's counts from planning
/// (its messages are the planned ones, byte for byte).
fn new_history_tokens(plan: &Plan, head: &[Message]) -> usize {
    let format = plan.loaded.format;
    let tail = plan.tail();
    let cut = plan.loaded.messages.len() - tail.len();
    let tail_tokens = match plan.loaded.tokens.get(cut..) {
        Some(counted) if counted.len() == tail.len() => counted.iter().sum::<usize>(),
        _ => tokens::history_tokens(format, tail),
    };
    let n = tokens::history_tokens(format, head) + tail_tokens;
    // Every compaction of the test suite (all stores, all formats) checks the reuse.
    debug_assert_eq!(
        n,
        tokens::history_tokens(format, head) + tokens::history_tokens(format, tail)
    );
    n
}

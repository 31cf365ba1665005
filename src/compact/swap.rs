//! Building the new history: the summary as one user message in the conversation's own format
//! (for goose followed by the assistant continuation goose stores after its own summaries),
//! the latest instruction when the split puts it back, then the kept tail, every kept message
//! byte-identical. The result is decoded again (a round trip through the codec), validated,
//! and must be smaller than before.

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
    parts.extend(plan.tail().iter().map(|m| m.raw.clone()));
    let raw_messages = message::join_raw(parts.iter().map(|p| p.as_ref()));
    // Round trip: what we write must decode with the same codec kodelet's loader mirrors.
    let decoded: Vec<Message> = message::decode_all(format, &raw_messages)
        .map_err(|e| StrategyError::Fail(format!("the new history does not decode: {e}")))?;
    validate(format, &decoded)
        .map_err(|e| StrategyError::Fail(format!("invalid new history: {e}")))?;
    let new_tokens = new_history_tokens(plan, &decoded);
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

/// Tokens of the decoded new history. The kept tail's messages are the planned ones, byte for
/// byte, so their counts from planning are reused when the decoded tail is exactly the kept
/// messages (same number, same bytes); only what comes before it (the summary, a re-inserted
/// instruction, a pruned head) is counted. Otherwise everything is counted.
fn new_history_tokens(plan: &Plan, decoded: &[Message]) -> usize {
    let format = plan.loaded.format;
    let tail = plan.tail();
    let cut = plan.loaded.messages.len() - tail.len();
    let Some(prefix) = decoded.len().checked_sub(tail.len()) else {
        return tokens::history_tokens(format, decoded);
    };
    let same = decoded[prefix..]
        .iter()
        .zip(tail)
        .all(|(d, t)| d.raw.get() == t.raw.get());
    match (same, plan.loaded.tokens.get(cut..)) {
        (true, Some(counted)) if counted.len() == tail.len() => {
            let n =
                tokens::history_tokens(format, &decoded[..prefix]) + counted.iter().sum::<usize>();
            // Every compaction of the test suite (all stores, all formats) checks the reuse.
            debug_assert_eq!(n, tokens::history_tokens(format, decoded));
            n
        }
        _ => tokens::history_tokens(format, decoded),
    }
}

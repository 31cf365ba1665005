//! Checks on a new history before it is written (the providers' rules; docs/stores.md, "kodelet"):
//! it is not empty, starts with a real user message, every tool result follows its call, no
//! call is left unanswered at the end, and for Anthropic every tool_use is answered in the
//! very next message. Anthropic merges consecutive same-role turns and OpenAI allows them, so
//! consecutive user messages (summary, then the kept instruction) are valid.

use std::collections::HashSet;

use crate::message::{Format, Message, Role};

pub fn validate(format: Format, messages: &[&Message]) -> Result<(), String> {
    let first = *messages.first().ok_or("the new history is empty")?;
    if first.role != Role::User || first.has_tool_results() {
        return Err("the new history does not start with a user message".into());
    }
    let mut called: HashSet<&str> = HashSet::new();
    let mut answered: HashSet<&str> = HashSet::new();
    for (i, &m) in messages.iter().enumerate() {
        // A format whose tool part is its call and its result in one message.
        let own: HashSet<&str> = if format.answers_itself() {
            m.tool_calls().map(|(id, _, _)| id).collect()
        } else {
            HashSet::new()
        };
        for id in m.tool_result_ids() {
            if !called.contains(id) && !own.contains(id) {
                return Err(format!(
                    "message {i}: tool result {id} has no earlier tool call"
                ));
            }
            answered.insert(id);
        }
        for (id, _, _) in m.tool_calls() {
            called.insert(id);
        }
        if format.answers_next() && m.role == Role::Assistant && m.has_tool_calls() {
            if let Some(next) = messages.get(i + 1) {
                let results: HashSet<&str> = next.tool_result_ids().collect();
                if let Some((id, _, _)) = m.tool_calls().find(|(id, _, _)| !results.contains(id)) {
                    return Err(format!(
                        "message {i}: tool_use {id} is not answered by the next message"
                    ));
                }
            }
        }
    }
    if let Some(last) = messages.last() {
        if let Some((id, _, _)) = last.tool_calls().find(|(id, _, _)| !answered.contains(id)) {
            return Err(format!(
                "the new history ends with an unanswered tool call {id}"
            ));
        }
    }
    Ok(())
}

//! agent-db's own summaries: the header that marks them and how to read one back. A small module
//! of its own because stores (reading a stored summary), planning (an earlier summary at the
//! head) and the strategies (writing one) all need it, and none of them should import the others.

use crate::message::{Message, Role};

/// The framing line every agent-db summary starts with (used to recognize earlier summaries).
pub const SUMMARY_HEADER: &str = "[agent-db compaction summary]";

/// Whether `text` is an agent-db summary.
pub fn is_summary_text(text: &str) -> bool {
    text.trim_start().starts_with(SUMMARY_HEADER)
}

/// Whether the first message is an earlier agent-db summary.
pub fn starts_with_summary(messages: &[Message]) -> bool {
    messages
        .first()
        .is_some_and(|m| m.role == Role::User && is_summary_text(&m.text()))
}

/// The body of an earlier summary: the text after its framing paragraph.
pub fn summary_body(text: &str) -> String {
    let t = text.trim_start();
    let t = t.strip_prefix(SUMMARY_HEADER).unwrap_or(t);
    // The framing paragraph ends at the first blank line.
    match t.split_once("\n\n") {
        Some((_, body)) => body.trim().to_string(),
        None => t.trim().to_string(),
    }
}

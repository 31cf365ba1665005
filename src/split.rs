//! Where to cut a history: the head is summarized, the tail is kept verbatim.
//!
//! Rules (docs/usage.md, "How the split works"):
//! - (a) The cut never separates a tool call from its result: it falls before a real user
//!   instruction, or before an assistant message that starts a new step (the message before it
//!   is a user or tool message, or an assistant step that holds its own results, as opencode's
//!   do), and no result at or after the cut answers a call before it. So
//!   the kept tail never begins with a tool result.
//! - The tail is the longest suffix, on a valid cut, within `keep_tokens`; if even the shortest
//!   valid tail is over budget, the shortest one is kept (correctness beats the budget).
//! - (b) The latest user instruction survives verbatim: in the tail, or put back right after the
//!   summary when the cut falls after it. It is not counted against `keep_tokens`.
//! - (c) When the head has nothing to summarize besides an earlier summary and the instruction
//!   that would be put back, the conversation is a no-op.
//! - (d) A history that begins with an earlier summary is compacted again; the head then
//!   includes that summary, which the strategy carries forward.
//!
//! Pure: no I/O, property-tested in `tests/`.

use crate::message::{Message, Role};

/// What the split needs to know of one message.
#[derive(Debug, Clone, Default)]
pub struct View {
    pub role: Option<Role>,
    /// A real user instruction (user text, no tool results).
    pub instruction: bool,
    pub calls: Vec<String>,
    pub results: Vec<String>,
    pub tokens: usize,
}

impl View {
    pub fn of(m: &Message, tokens: usize) -> View {
        View {
            role: Some(m.role),
            instruction: m.is_user_instruction(),
            calls: m.tool_calls().map(|(id, _, _)| id.to_string()).collect(),
            results: m.tool_result_ids().map(str::to_string).collect(),
            tokens,
        }
    }
}

/// A decided split.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Split {
    /// Messages `[0, cut)` are the head, `[cut, n)` the tail.
    pub cut: usize,
    /// Index (in the head) of the latest user instruction, put back after the summary.
    pub reinsert: Option<usize>,
    /// The history starts with an earlier summary, carried forward.
    pub prior_summary: bool,
    /// How many leading messages that summary takes (1, or 2 for opencode's compaction request
    /// and summary reply; 0 without one). The cut never falls inside them.
    pub prior_len: usize,
    pub head_tokens: usize,
    pub tail_tokens: usize,
}

/// The result of splitting.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    Compact(Split),
    /// Nothing to compact, with the reason.
    NoOp(String),
}

/// The valid cut positions in `1..=n` (a cut at `n` keeps an empty tail).
pub fn valid_cuts(views: &[View]) -> Vec<bool> {
    let n = views.len();
    // blocked[c] = true when a result at index >= c answers a call at index < c.
    let mut delta = vec![0i64; n + 2];
    let mut call_at = std::collections::HashMap::new();
    for (i, v) in views.iter().enumerate() {
        for id in &v.calls {
            call_at.insert(id.as_str(), i);
        }
    }
    for (j, v) in views.iter().enumerate() {
        for id in &v.results {
            // Cuts c in (i, j] would put the result in the tail without its call. An orphan
            // result (no call anywhere) must stay in the head: cuts in [1, j] are out.
            let start = match call_at.get(id.as_str()) {
                Some(&i) if i < j => i + 1,
                Some(_) => continue,
                None => 1,
            };
            delta[start] += 1;
            delta[j + 1] -= 1;
        }
    }
    let mut ok = vec![false; n + 1];
    let mut running = 0i64;
    for c in 0..=n {
        running += delta[c];
        if c == 0 || running > 0 {
            continue;
        }
        ok[c] = if c == n {
            // An empty tail is fine unless the history ends in an unanswered call: that call
            // then goes to the head and is summarized, which is also fine.
            true
        } else {
            let v = &views[c];
            let prev = &views[c - 1];
            v.instruction
                || (v.role == Some(Role::Assistant)
                    && (matches!(prev.role, Some(Role::User) | Some(Role::Tool))
                        || answers_itself(prev)))
        };
    }
    ok
}

/// An assistant step whose calls are all answered inside the message itself (an opencode
/// `tool` part is its call and its result): the next assistant message starts a new step.
fn answers_itself(v: &View) -> bool {
    v.role == Some(Role::Assistant)
        && !v.calls.is_empty()
        && v.calls.iter().all(|c| v.results.contains(c))
}

/// Decide the split for `views` with a tail budget of `keep_tokens`; `prior_summary` says the
/// first message is an earlier agent-db summary.
pub fn split(views: &[View], keep_tokens: usize, prior_summary: bool) -> Decision {
    split_after(views, keep_tokens, usize::from(prior_summary))
}

/// [`split`] for a history whose first `prior_len` messages are an earlier summary.
pub fn split_after(views: &[View], keep_tokens: usize, prior_len: usize) -> Decision {
    let prior_summary = prior_len > 0;
    let n = views.len();
    if n == 0 {
        return Decision::NoOp("empty conversation".into());
    }
    if n == 1 {
        return Decision::NoOp("only one message".into());
    }
    // suffix[c] = tokens of [c, n)
    let mut suffix = vec![0usize; n + 1];
    for i in (0..n).rev() {
        suffix[i] = suffix[i + 1] + views[i].tokens;
    }
    if suffix[0] <= keep_tokens {
        return Decision::NoOp(format!(
            "already small: {} tokens fit in the kept tail budget of {}",
            crate::util::thousands(suffix[0]),
            crate::util::thousands(keep_tokens)
        ));
    }
    let ok = valid_cuts(views);
    let first = prior_len.max(1);
    let cut = (first..=n)
        .find(|&c| ok[c] && suffix[c] <= keep_tokens)
        .or_else(|| (first..=n).rev().find(|&c| ok[c]));
    let Some(cut) = cut else {
        return Decision::NoOp(
            "no place to cut without separating a tool call from its result".into(),
        );
    };
    let latest = views
        .iter()
        .enumerate()
        .rev()
        .find(|(i, v)| v.instruction && *i >= prior_len)
        .map(|(i, _)| i);
    let reinsert = latest.filter(|&l| l < cut);
    let summarizable = (0..cut)
        .filter(|&i| Some(i) != reinsert && i >= prior_len)
        .count();
    if summarizable == 0 {
        return Decision::NoOp("nothing to compact: the history before the kept tail is only the latest instruction or an earlier summary".into());
    }
    Decision::Compact(Split {
        cut,
        reinsert,
        prior_summary,
        prior_len,
        head_tokens: suffix[0] - suffix[cut],
        tail_tokens: suffix[cut],
    })
}

/// The default tail budget: 20% of the context limit, at most 20,000 tokens (20,000 when the
/// limit is unknown).
pub fn default_keep_tokens(context_limit: Option<i64>) -> usize {
    match context_limit {
        Some(l) if l > 0 => ((l as f64 * 0.2) as usize).min(20_000),
        _ => 20_000,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn user(t: usize) -> View {
        View {
            role: Some(Role::User),
            instruction: true,
            tokens: t,
            ..Default::default()
        }
    }
    fn asst(t: usize, calls: &[&str]) -> View {
        View {
            role: Some(Role::Assistant),
            calls: calls.iter().map(|s| s.to_string()).collect(),
            tokens: t,
            ..Default::default()
        }
    }
    fn tool(t: usize, id: &str) -> View {
        View {
            role: Some(Role::Tool),
            results: vec![id.into()],
            tokens: t,
            ..Default::default()
        }
    }

    #[test]
    fn never_cuts_between_call_and_result() {
        let v = vec![
            user(10),
            asst(10, &["a"]),
            tool(100, "a"),
            asst(10, &["b"]),
            tool(100, "b"),
            asst(10, &[]),
        ];
        let ok = valid_cuts(&v);
        assert_eq!(ok, vec![false, true, false, true, false, true, true]);
    }

    #[test]
    fn long_tool_loop_under_one_instruction_is_compactable() {
        let mut v = vec![user(10)];
        for i in 0..20 {
            let id = format!("c{i}");
            v.push(asst(10, &[&id]));
            v.push(tool(1000, &id));
        }
        v.push(asst(10, &[]));
        match split(&v, 3000, false) {
            Decision::Compact(s) => {
                assert_eq!(s.reinsert, Some(0));
                assert!(s.tail_tokens <= 3000);
                assert!(!v[s.cut].role.eq(&Some(Role::Tool)));
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_two_message_earlier_summary_is_never_cut_and_never_the_instruction() {
        // opencode's compaction question (a user text) and the summary reply, then two turns.
        let v = vec![
            user(5),
            asst(500, &[]),
            user(5),
            asst(500, &[]),
            user(5),
            asst(500, &[]),
        ];
        match split_after(&v, 0, 2) {
            Decision::Compact(s) => {
                assert!(s.cut >= 2, "{s:?}");
                assert_eq!(s.prior_len, 2);
                assert!(s.prior_summary);
                assert_ne!(s.reinsert, Some(0));
            }
            d => panic!("{d:?}"),
        }
        // Only the summary before the latest instruction: nothing to compact.
        let v = vec![user(5), asst(500, &[]), user(500)];
        assert!(matches!(split_after(&v, 0, 2), Decision::NoOp(_)));
    }

    #[test]
    fn no_ops() {
        assert!(matches!(split(&[], 0, false), Decision::NoOp(_)));
        assert!(matches!(split(&[user(5)], 0, false), Decision::NoOp(_)));
        // Everything fits in the tail.
        assert!(matches!(
            split(&[user(5), asst(5, &[])], 100, false),
            Decision::NoOp(_)
        ));
        assert!(matches!(
            split(&[user(5), asst(5, &[]), user(5), asst(5, &[])], 100, false),
            Decision::NoOp(_)
        ));
    }

    #[test]
    fn an_assistant_after_a_self_answered_step_is_a_cut() {
        // opencode: each assistant step holds its tool calls and their results.
        let both = |t: usize, id: &str| View {
            role: Some(Role::Assistant),
            calls: vec![id.into()],
            results: vec![id.into()],
            tokens: t,
            ..Default::default()
        };
        let views = [user(10), both(100, "a"), both(100, "b"), asst(5, &[])];
        let ok = valid_cuts(&views);
        assert_eq!(ok, [false, true, true, true, true]);
        // An assistant whose call is answered elsewhere is not a step boundary.
        let views = [user(10), asst(100, &["a"]), asst(5, &[])];
        assert!(!valid_cuts(&views)[2]);
    }
}

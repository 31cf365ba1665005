//! The head as transcript text, and its split into requests.
//!
//! Only structure starts at the first column of a transcript line: a role label (`[user]`,
//! `[assistant]`, `[tool]`, `[system]`), a tool call (`→ bash #3`) or a tool result named by its
//! call (`← result of bash #3`). Every line of content (text, thinking, tool inputs, tool
//! outputs) starts with [`PREFIX`], so nothing a message says can open a line that reads as a
//! role label, a call or a result.
//!
//! A long tool output is sent head and tail with the omission marked: test runners and
//! compilers print their verdict last, so the tail is the longer part, and longer still when the
//! call failed or the output ends in a verdict ([`ends_in_verdict`]).

use std::collections::{HashMap, HashSet};

use crate::message::{Block, Format, Message, Role};
use crate::tokens::count_text;

/// What starts every line of content in the transcript.
pub const PREFIX: &str = "│ ";
/// Characters of a tool output sent whole; a longer one is sent as its first
/// [`RESULT_HEAD_CHARS`] and last [`RESULT_TAIL_CHARS`].
pub const TOOL_RESULT_CHARS: usize = 2_000;
pub const RESULT_HEAD_CHARS: usize = 700;
pub const RESULT_TAIL_CHARS: usize = 1_300;
/// The same for a failed call or an output that ends in a verdict.
pub const VERDICT_RESULT_CHARS: usize = 5_000;
pub const VERDICT_HEAD_CHARS: usize = 1_000;
pub const VERDICT_TAIL_CHARS: usize = 4_000;
/// Characters of a tool call's input sent whole (else 600 head and 400 tail).
pub const TOOL_INPUT_CHARS: usize = 1_000;
/// Characters of a thinking block sent (its start), labelled as an excerpt.
pub const THINKING_CHARS: usize = 400;
/// `--mask-observations`: the most recent tool results always sent (head and tail as usual).
pub const MASK_KEEP_RECENT: usize = 5;
/// `--mask-observations`: a successful output shorter than this is sent anyway.
pub const MASK_MIN_CHARS: usize = 300;

/// How much of the end of an output is searched for a verdict, in bytes.
const VERDICT_WINDOW: usize = 2_000;

/// Whether a tool output ends in a verdict a summary must quote: a test summary line, a panic,
/// a compiler error, an error line or a non-zero exit status in its last 2,000 bytes.
pub fn ends_in_verdict(text: &str) -> bool {
    let mut start = text.len().saturating_sub(VERDICT_WINDOW);
    while !text.is_char_boundary(start) {
        start += 1;
    }
    let end = &text[start..];
    const MARKS: &[&str] = &[
        "test result: FAILED",
        "panicked at",
        "error[E",
        "FAILED",
        "FAIL:",
        "Error:",
        "error:",
        "ERROR",
        "Traceback (most recent call last)",
        "npm ERR!",
        "Segmentation fault",
        "command not found",
    ];
    if MARKS.iter().any(|m| end.contains(m)) {
        return true;
    }
    // `exit status: 1`, `exit code 2`, `exited with code 127`, `Exit code: 1`.
    let lower = end.to_ascii_lowercase();
    ["exit status", "exit code", "exited with code", "exit_code"]
        .iter()
        .any(|k| {
            lower.match_indices(k).any(|(i, _)| {
                let rest = lower[i + k.len()..].trim_start_matches([':', '=', ' ', '"']);
                let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
                digits.parse::<u64>().is_ok_and(|n| n != 0)
            })
        })
}

/// Lines prefixed with [`PREFIX`] (an empty line keeps the prefix's first character).
fn prefixed(out: &mut String, text: &str) {
    for line in text.trim_end().split('\n') {
        let line = line.strip_suffix('\r').unwrap_or(line);
        if line.is_empty() {
            out.push_str(PREFIX.trim_end());
        } else {
            out.push_str(PREFIX);
            out.push_str(line);
        }
        out.push('\n');
    }
}

/// The byte index `n` characters into `text` (its length when shorter).
fn char_index(text: &str, n: usize) -> usize {
    text.char_indices().nth(n).map_or(text.len(), |(i, _)| i)
}

/// The byte index where the last `n` characters of `text` start (0 when it is shorter):
/// `char_index(text, total - n)`, found from the end, without reading the characters before.
fn char_index_from_end(text: &str, n: usize) -> usize {
    match n {
        0 => text.len(),
        _ => text.char_indices().nth_back(n - 1).map_or(0, |(i, _)| i),
    }
}

/// `text` whole when it has at most `head + tail` characters, else its first `head` and last
/// `tail` characters (each end moved to a line break when one is near) around a marker that
/// says how many characters and lines were left out.
pub fn head_tail(text: &str, head: usize, tail: usize) -> std::borrow::Cow<'_, str> {
    if text.len() <= head + tail {
        return text.into();
    }
    let total = text.chars().count();
    if total <= head + tail {
        return text.into();
    }
    let mut h = char_index(text, head);
    // End the head at a line break in its last fifth, if there is one.
    if let Some(nl) = text[..h].rfind('\n') {
        if nl >= h - h / 5 {
            h = nl;
        }
    }
    let mut t = char_index_from_end(text, tail);
    // Start the tail after a line break in its first fifth, if there is one.
    let fifth = char_index(&text[t..], tail / 5) + t;
    if let Some(nl) = text[t..fifth].find('\n') {
        t += nl + 1;
    }
    let middle = &text[h..t];
    // The middle's characters are the total's less those of the (short) ends: the long text is
    // read once to count them.
    let chars = total - text[..h].chars().count() - text[t..].chars().count();
    let lines = count_newlines(middle.as_bytes());
    format!(
        "{}\n[… {chars} characters ({lines} lines) omitted …]\n{}",
        text[..h].trim_end_matches('\n'),
        &text[t..]
    )
    .into()
}

/// The line breaks (`\n` bytes) of `b`, eight bytes at a time.
fn count_newlines(b: &[u8]) -> usize {
    const LOW7: u64 = 0x7F7F_7F7F_7F7F_7F7F;
    let mut chunks = b.chunks_exact(8);
    let mut n = 0usize;
    for c in &mut chunks {
        // Each byte's high bit set when the byte is not `\n`; the bits left clear are counted.
        let x = u64::from_le_bytes(c.try_into().expect("8 bytes")) ^ 0x0A0A_0A0A_0A0A_0A0A;
        let nonzero = ((x & LOW7).wrapping_add(LOW7) | x) & !LOW7;
        n += (!nonzero & !LOW7).count_ones() as usize;
    }
    n + chunks.remainder().iter().filter(|&&c| c == b'\n').count()
}

/// A tool output as sent: head and tail, the tail longer for a failed call or a verdict.
pub fn tool_output(content: &str, failed: bool) -> std::borrow::Cow<'_, str> {
    if failed || ends_in_verdict(content) {
        head_tail(content, VERDICT_HEAD_CHARS, VERDICT_TAIL_CHARS)
    } else {
        head_tail(content, RESULT_HEAD_CHARS, RESULT_TAIL_CHARS)
    }
}

/// Renders messages in order: each tool call gets a number (in order over the whole head), and
/// each result is named by its call's tool name and number.
#[derive(Default)]
pub struct Renderer {
    calls: HashMap<String, (String, usize)>,
    next: usize,
    /// `(message, block)` of the tool results elided by `--mask-observations`.
    elide: HashSet<(usize, usize)>,
    /// The stored format, whose bookkeeping blocks (opencode's step, patch and snapshot parts)
    /// the agent neither shows nor sends: they are left out as its own view leaves them out.
    format: Option<Format>,
}

/// The role label of a message: a message of tool results only is `[tool]` whatever role its
/// format gives it (a user message in Anthropic's format, a tool message in OpenAI's).
fn label(m: &Message) -> &'static str {
    let results_only = !m.blocks.is_empty()
        && m.blocks
            .iter()
            .all(|b| matches!(b, Block::ToolResult { .. }));
    match m.role {
        _ if results_only => "tool",
        Role::User => "user",
        Role::Assistant => "assistant",
        Role::Tool => "tool",
        Role::System => "system",
    }
}

impl Renderer {
    /// A renderer that elides the results in `elide` ([`masked`]).
    pub fn masking(format: Format, elide: HashSet<(usize, usize)>) -> Renderer {
        Renderer {
            elide,
            format: Some(format),
            ..Renderer::default()
        }
    }

    fn hidden(&self, b: &Block) -> bool {
        matches!((b, self.format), (Block::Opaque { kind, .. }, Some(f)) if f.bookkeeping(kind))
    }

    /// Message `index` of the head as transcript text.
    pub fn message(&mut self, index: usize, m: &Message) -> String {
        if !m.blocks.is_empty() && m.blocks.iter().all(|b| self.hidden(b)) {
            return String::new();
        }
        let mut s = format!("[{}]\n", label(m));
        for (j, b) in m.blocks.iter().enumerate() {
            if self.hidden(b) {
                continue;
            }
            match b {
                Block::Text { text } => {
                    if !text.trim().is_empty() {
                        prefixed(&mut s, text)
                    }
                }
                Block::Thinking { text, redacted } => {
                    if !*redacted && !text.trim().is_empty() {
                        let n = text.chars().count();
                        let shown = &text[..char_index(text, THINKING_CHARS)];
                        s.push_str("(thinking, excerpt");
                        if n > THINKING_CHARS {
                            s.push_str(&format!(": the first {THINKING_CHARS} of {n} characters"));
                        }
                        s.push_str(")\n");
                        prefixed(&mut s, shown);
                    }
                }
                Block::ToolCall { id, name, input } => {
                    self.next += 1;
                    let name = one_line(name);
                    self.calls.insert(id.clone(), (name.clone(), self.next));
                    s.push_str(&format!("→ {name} #{}\n", self.next));
                    if !input.trim().is_empty() && input.trim() != "{}" {
                        prefixed(&mut s, &head_tail(input, 600, 400));
                    }
                }
                Block::ToolResult {
                    call_id,
                    content,
                    is_error,
                    images,
                } => {
                    let of = match self.calls.get(call_id) {
                        Some((name, n)) => format!("{name} #{n}"),
                        None => "an earlier call".to_string(),
                    };
                    let failed = if *is_error { " (failed)" } else { "" };
                    let content = content.trim_end();
                    if self.elide.contains(&(index, j)) {
                        let first: String = content
                            .lines()
                            .next()
                            .unwrap_or("")
                            .chars()
                            .take(120)
                            .collect();
                        s.push_str(&format!(
                            "← result of {of}{failed} (elided by --mask-observations: {} characters, {} lines; its first line follows)\n",
                            content.chars().count(),
                            content.lines().count()
                        ));
                        prefixed(&mut s, &first);
                    } else {
                        s.push_str(&format!("← result of {of}{failed}\n"));
                        if !content.is_empty() {
                            prefixed(&mut s, &tool_output(content, *is_error));
                        }
                    }
                    for i in images {
                        prefixed(&mut s, &i.placeholder());
                    }
                }
                Block::Image(i) => prefixed(&mut s, &i.placeholder()),
                Block::Opaque { kind, bytes, .. } => {
                    prefixed(&mut s, &format!("[{}: {bytes} bytes]", one_line(kind)))
                }
            }
        }
        s
    }
}

/// A name on one line (a tool name is content too).
fn one_line(s: &str) -> String {
    s.chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .take(80)
        .collect()
}

/// `--mask-observations`: the `(message, block)` of the tool results to elide: every
/// successful result except the [`MASK_KEEP_RECENT`] most recent, one that ends in a verdict and
/// one shorter than [`MASK_MIN_CHARS`].
pub fn masked(messages: &[&Message]) -> HashSet<(usize, usize)> {
    let results: Vec<(usize, usize, bool)> = messages
        .iter()
        .enumerate()
        .flat_map(|(i, m)| {
            m.blocks
                .iter()
                .enumerate()
                .filter_map(move |(j, b)| match b {
                    Block::ToolResult {
                        content, is_error, ..
                    } => Some((
                        i,
                        j,
                        !*is_error && content.len() >= MASK_MIN_CHARS && !ends_in_verdict(content),
                    )),
                    _ => None,
                })
        })
        .collect();
    let old = results.len().saturating_sub(MASK_KEEP_RECENT);
    results[..old]
        .iter()
        .filter(|r| r.2)
        .map(|&(i, j, _)| (i, j))
        .collect()
}

/// The head's messages grouped so that no group starts with a tool result whose call is in the
/// group before: while a group has a call not yet answered, the next message joins it (a user
/// instruction excepted: a call left unanswered by then never is). Ranges of indices.
pub fn units(messages: &[&Message]) -> Vec<std::ops::Range<usize>> {
    let mut out: Vec<std::ops::Range<usize>> = Vec::new();
    let mut open: HashSet<&str> = HashSet::new();
    for (i, m) in messages.iter().enumerate() {
        let joins = !open.is_empty()
            && (m.tool_result_ids().any(|id| open.contains(id)) || !m.is_user_instruction());
        match out.last_mut() {
            Some(r) if joins => r.end = i + 1,
            _ => {
                out.push(i..i + 1);
                open.clear();
            }
        }
        for id in m.tool_result_ids() {
            open.remove(id);
        }
        open.extend(m.tool_calls().map(|(id, _, _)| id));
    }
    out
}

/// The transcript texts of the head's units (see [`units`]), rendered in order.
pub fn unit_texts(
    messages: &[&Message],
    format: Format,
    elide: HashSet<(usize, usize)>,
) -> Vec<String> {
    let mut r = Renderer::masking(format, elide);
    units(messages)
        .into_iter()
        .map(|range| {
            let mut s = String::new();
            for i in range {
                s.push_str(&r.message(i, messages[i]));
            }
            s
        })
        .collect()
}

/// Cut `text` middle-out until it is at most `max_tokens` tokens.
pub fn middle_out(text: &str, max_tokens: usize) -> String {
    let total = count_text(text);
    if total <= max_tokens {
        return text.to_string();
    }
    let chars: Vec<char> = text.chars().collect();
    let mut keep = (chars.len() as f64 * max_tokens as f64 / total as f64 * 0.9) as usize;
    loop {
        let half = keep / 2;
        let head: String = chars[..half].iter().collect();
        let tail: String = chars[chars.len() - half..].iter().collect();
        // The tail starts at a line of its own: a line cut in two would start at the first
        // column without its prefix.
        let tail = match tail.split_once('\n') {
            Some((_, rest)) if !rest.trim().is_empty() => rest.to_string(),
            _ => format!("{PREFIX}{tail}"),
        };
        let omitted = total.saturating_sub(count_text(&head) + count_text(&tail));
        let s =
            format!("{head}\n[… middle of this message omitted: about {omitted} tokens …]\n{tail}");
        if count_text(&s) <= max_tokens || keep == 0 {
            return s;
        }
        keep = keep * 8 / 10;
    }
}

/// Split rendered units (each followed by a newline) into chunks of at most `room` tokens:
/// a chunk closes before the unit that would overflow it, counting each unit's tokens plus one
/// of slack (joining texts can merge tokens at the boundary); a unit larger than `room` alone is
/// cut in the middle ([`middle_out`]).
///
/// Counting is lazy: a BPE token is at least one byte, so a unit whose bytes still fit the room
/// left (an upper bound on its tokens) is taken without counting it. Units taken that way are
/// counted only when a later unit no longer fits by bytes. The chunks are exactly those of
/// counting every unit; a head well inside the budget is not counted at all.
pub(crate) fn split_transcript(texts: impl Iterator<Item = String>, room: usize) -> Vec<String> {
    let mut chunks = Vec::new();
    let mut cur = String::new();
    // Exact tokens (with slack) of `cur[..counted]`; `pending` starts the uncounted units.
    let mut cur_tokens = 0usize;
    let mut counted = 0usize;
    let mut pending: Vec<usize> = Vec::new();
    for mut text in texts {
        text.push('\n');
        let bound = cur_tokens + (cur.len() - counted) + pending.len();
        if bound + text.len() < room {
            pending.push(cur.len());
            cur.push_str(&text);
            continue;
        }
        for (k, &start) in pending.iter().enumerate() {
            let end = pending.get(k + 1).copied().unwrap_or(cur.len());
            cur_tokens += count_text(&cur[start..end]) + 1;
        }
        pending.clear();
        let mut t = count_text(&text);
        if t > room {
            text = middle_out(&text, room);
            t = count_text(&text);
        }
        if cur_tokens + t + 1 > room && !cur.is_empty() {
            chunks.push(std::mem::take(&mut cur));
            cur_tokens = 0;
        }
        cur.push_str(&text);
        cur_tokens += t + 1;
        counted = cur.len();
    }
    if !cur.is_empty() {
        chunks.push(cur);
    }
    chunks
}

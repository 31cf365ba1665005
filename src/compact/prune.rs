//! The `prune` strategy: no summary. In the head (outside the kept tail) the content of every
//! tool result is replaced by a short placeholder naming the tool and the original size; calls
//! and results stay paired. With `elide_images`, images and base64 payloads go too.
//!
//! goose keeps its rows and hides them instead (its own tool-pair summarization): each complete
//! tool pair in the head is hidden from the agent as a whole, and one agent-only note in its
//! place names each call, its arguments and the size of its result ([`pair_prunes`]).

use std::collections::HashMap;

use async_trait::async_trait;

use serde_json::value::RawValue;

use super::{HeadInput, Rewrite, Strategy, StrategyError};
use crate::message::{prune_message, Block, Format, Message};
use crate::util::human_bytes;

/// The text every prune placeholder starts with; results already pruned are left alone.
pub const PRUNE_MARKER: &str = "[agent-db pruned";

pub struct Prune {
    pub elide_images: bool,
}

#[async_trait]
impl Strategy for Prune {
    fn name(&self) -> &str {
        "prune"
    }

    fn rewrites_head(&self) -> bool {
        true
    }

    async fn rewrite(&self, input: &HeadInput<'_>) -> Result<Rewrite, StrategyError> {
        let format = input.plan.loaded.format;
        // Pruning rewrites the head's own messages in place (a re-compaction's originals are
        // for summaries).
        let head = input.plan.head();
        let mut tool_names: HashMap<&str, &str> = HashMap::new();
        for m in head {
            for (id, name, _) in m.tool_calls() {
                tool_names.insert(id, name);
            }
        }
        let mut changed = 0usize;
        let mut out = Vec::with_capacity(head.len());
        let keep_verbatim = input.plan.split().and_then(|s| s.reinsert);
        let pairs = pair_prunes(format, head, keep_verbatim);
        for (i, m) in head.iter().enumerate() {
            if let Some(raw) = pairs.get(&i) {
                changed += 1;
                out.push(raw.clone());
                continue;
            }
            // The latest user instruction stays verbatim (split rule b), images included.
            if Some(i) == keep_verbatim {
                out.push(m.raw.clone());
                continue;
            }
            match pruned(format, m, &tool_names, self.elide_images) {
                Some(raw) => {
                    changed += 1;
                    out.push(raw);
                }
                None => out.push(m.raw.clone()),
            }
        }
        if changed == 0 {
            return Err(StrategyError::Skip(
                "nothing to prune: no tool output before the kept tail".into(),
            ));
        }
        Ok(Rewrite::PrunedHead(out))
    }
}

/// Message `m` with its tool outputs replaced by placeholders naming the tool and the size (an
/// earlier placeholder is kept as it was) and, with `elide_images`, its images elided; `None`
/// when there is nothing of it to prune.
fn pruned(
    format: Format,
    m: &Message,
    tool_names: &HashMap<&str, &str>,
    elide_images: bool,
) -> Option<Box<serde_json::value::RawValue>> {
    let sizes: HashMap<&str, (usize, bool)> = m
        .blocks
        .iter()
        .filter_map(|b| match b {
            Block::ToolResult {
                call_id, content, ..
            } => Some((
                call_id.as_str(),
                (content.len(), content.starts_with(PRUNE_MARKER)),
            )),
            _ => None,
        })
        .collect();
    let already = !sizes.is_empty() && sizes.values().all(|(_, done)| *done);
    let has_images = m.blocks.iter().any(|b| matches!(b, Block::Image(_)));
    if (sizes.is_empty() || already) && !(elide_images && has_images) {
        return None;
    }
    let placeholder = |id: &str| {
        let (size, done) = sizes.get(id).copied().unwrap_or((0, false));
        if done {
            // Keep an earlier placeholder as it was.
            return m
                .blocks
                .iter()
                .find_map(|b| match b {
                    Block::ToolResult {
                        call_id, content, ..
                    } if call_id == id => Some(content.clone()),
                    _ => None,
                })
                .unwrap_or_default();
        }
        let tool = tool_names.get(id).copied().unwrap_or("tool");
        format!(
            "{PRUNE_MARKER} this {tool} output ({}) to save context]",
            human_bytes(size as u64)
        )
    };
    prune_message(format, m, &placeholder, elide_images)
}

/// The prune of a head by tool pairs, for formats that prune that way
/// ([`Codec::tool_pairs`](crate::message::Codec::tool_pairs)): for every complete pair, the
/// request and response messages hidden from the agent, the last response replaced by one
/// note with a line per call. Keyed by head index; empty for other formats.
fn pair_prunes(
    format: Format,
    head: &[Message],
    keep: Option<usize>,
) -> HashMap<usize, Box<RawValue>> {
    let mut out = HashMap::new();
    for pair in format.tool_pairs(head, keep) {
        let results: HashMap<&str, (usize, bool)> = pair
            .responses
            .iter()
            .flat_map(|&r| head[r].blocks.iter())
            .filter_map(|b| match b {
                Block::ToolResult {
                    call_id,
                    content,
                    is_error,
                    ..
                } => Some((call_id.as_str(), (content.len(), *is_error))),
                _ => None,
            })
            .collect();
        let lines: Vec<String> = head[pair.request]
            .tool_calls()
            .map(|(id, name, input)| {
                let (size, error) = results.get(id).copied().unwrap_or((0, false));
                pair_line(name, input, size, error)
            })
            .collect();
        out.insert(pair.request, format.hidden(&head[pair.request]));
        let (last, rest) = pair.responses.split_last().expect("a pair has a response");
        for &r in rest {
            out.insert(r, format.hidden(&head[r]));
        }
        out.insert(*last, format.pair_note(&lines.join("\n")));
    }
    out
}

/// Longest argument gist in a goose pair note, in characters.
const GIST_CHARS: usize = 120;

/// One line of a goose pair note: `[agent-db pruned a call to NAME ARGS: SIZE of output]`
/// (`failed, SIZE of error text` for an error result).
fn pair_line(name: &str, input: &str, size: usize, error: bool) -> String {
    let name = if name.is_empty() { "a tool" } else { name };
    let flat: String = input.split_whitespace().collect::<Vec<_>>().join(" ");
    let gist = if flat.chars().count() > GIST_CHARS {
        let cut: String = flat.chars().take(GIST_CHARS).collect();
        format!("{cut}…")
    } else {
        flat
    };
    let size = human_bytes(size as u64);
    if error {
        format!("{PRUNE_MARKER} a call to {name} {gist}: failed, {size} of error text]")
    } else {
        format!("{PRUNE_MARKER} a call to {name} {gist}: {size} of output]")
    }
}

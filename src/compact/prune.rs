//! The `prune` strategy: no summary. In the head (outside the kept tail) the content of every
//! tool result is replaced by a short placeholder naming the tool and the original size; calls
//! and results stay paired. With `elide_images`, images and base64 payloads go too.

use std::collections::HashMap;

use async_trait::async_trait;

use super::{HeadInput, Rewrite, Strategy, StrategyError};
use crate::message::{prune_message, Block};
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
        let mut tool_names: HashMap<&str, &str> = HashMap::new();
        for m in input.head {
            for (id, name, _) in m.tool_calls() {
                tool_names.insert(id, name);
            }
        }
        let mut changed = 0usize;
        let mut out = Vec::with_capacity(input.head.len());
        let keep_verbatim = input.plan.split().and_then(|s| s.reinsert);
        for (i, m) in input.head.iter().enumerate() {
            // The latest user instruction stays verbatim (split rule b), images included.
            if Some(i) == keep_verbatim {
                out.push(m.raw.clone());
                continue;
            }
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
            if (sizes.is_empty() || already) && !(self.elide_images && has_images) {
                out.push(m.raw.clone());
                continue;
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
            match prune_message(format, m, &placeholder, self.elide_images) {
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

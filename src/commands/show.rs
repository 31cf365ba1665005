//! `agent-db show ID`: a readable transcript, `--json` for the neutral messages, `--raw` for the
//! stored JSON exactly as stored.

use agent_db::message::{Block, Message, Role};
use agent_db::plan;
use agent_db::store::Store;

use super::CmdResult;
use crate::cli::ShowArgs;
use crate::output::{self, json, table, Ui};

/// Longest tool output shown in a transcript, in characters.
const MAX_RESULT_CHARS: usize = 1500;

pub fn run(ui: &Ui, store: &Store, args: &ShowArgs) -> CmdResult {
    let id = store.resolve_id(&args.id)?;
    let meta = store.meta(&id)?;
    let row = store.load(&id)?;
    if args.raw {
        output::out(&row.raw_messages)?;
        output::out("\n")?;
        return Ok(0);
    }
    let loaded = plan::decode(row, &meta)?;
    // `--last N`: the last N messages, numbered as in the whole conversation.
    let first = args
        .last
        .map(|n| loaded.messages.len().saturating_sub(n))
        .unwrap_or(0);
    if args.json {
        let doc = serde_json::json!({
            "id": meta.id,
            "name": meta.name,
            "provider": meta.provider,
            "format": loaded.format.name(),
            "model": meta.model,
            "tokens": loaded.total_tokens(),
            "tokens_exact": loaded.format.tokens_exact(),
            "first_index": first,
            "messages": loaded.messages.iter().zip(&loaded.tokens).skip(first).map(|(m, t)| {
                let mut v = serde_json::to_value(m).unwrap_or_default();
                v["tokens"] = (*t).into();
                v
            }).collect::<Vec<_>>(),
        });
        json::print("show", doc)?;
        return Ok(0);
    }
    let exact = loaded.format.tokens_exact();
    let mut s = format!(
        "conversation {}\n  name: {}\n  provider: {} ({}), model: {}\n  updated: {} ({})\n  {} messages, {} tokens{}\n",
        meta.id,
        meta.name.as_deref().unwrap_or("-"),
        meta.provider,
        loaded.format.name(),
        meta.model.as_deref().unwrap_or("-"),
        output::ago(&agent_db::gotime::now(), &meta.updated_at),
        output::utc(&meta.updated_at).unwrap_or_else(|| meta.updated_at.clone()),
        loaded.messages.len(),
        table::tokens(loaded.total_tokens(), exact),
        if exact { "" } else { " (estimated)" },
    );
    if first > 0 {
        s.push_str(&format!(
            "\n… {first} earlier message(s) not shown (--last)\n"
        ));
    }
    for (i, (m, t)) in loaded
        .messages
        .iter()
        .zip(&loaded.tokens)
        .enumerate()
        .skip(first)
    {
        s.push_str(&render_message(i, m, *t, exact));
    }
    output::page(ui, &s, args.no_pager)?;
    Ok(0)
}

fn role_name(r: Role) -> &'static str {
    match r {
        Role::User => "user",
        Role::Assistant => "assistant",
        Role::Tool => "tool",
        Role::System => "system",
    }
}

fn clip(s: &str, max: usize) -> String {
    let count = s.chars().count();
    if count <= max {
        s.to_string()
    } else {
        let head: String = s.chars().take(max).collect();
        format!("{head}\n… [{} more characters]", count - max)
    }
}

fn indent(s: &str) -> String {
    s.lines().map(|l| format!("    {l}\n")).collect()
}

fn render_message(i: usize, m: &Message, tokens: usize, exact: bool) -> String {
    let mut s = format!(
        "\n── [{i}] {} · {} tokens\n",
        role_name(m.role),
        table::tokens(tokens, exact)
    );
    for b in &m.blocks {
        match b {
            Block::Text { text } => s.push_str(&indent(text)),
            Block::Thinking { text, redacted } => {
                if *redacted {
                    s.push_str("    (thinking: redacted)\n");
                } else {
                    s.push_str(&indent(&format!("(thinking) {}", clip(text, 400))));
                }
            }
            Block::ToolCall { id, name, input } => {
                s.push_str(&format!("    → {name} {} [{id}]\n", clip(input, 400)))
            }
            Block::ToolResult {
                call_id,
                content,
                is_error,
                images,
            } => {
                let tag = if *is_error { "error" } else { "result" };
                s.push_str(&format!("    ← {tag} [{call_id}]\n"));
                s.push_str(&indent(&clip(content, MAX_RESULT_CHARS)));
                for im in images {
                    s.push_str(&format!("    {}\n", im.placeholder()));
                }
            }
            Block::Image(im) => s.push_str(&format!("    {}\n", im.placeholder())),
            Block::Opaque { kind, bytes } => s.push_str(&format!("    [{kind}: {bytes} bytes]\n")),
        }
    }
    s
}

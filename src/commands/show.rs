//! `agent-db show ID`: a readable transcript, `--json` for the neutral messages, `--raw` for
//! every stored row of the conversation as stored (kodelet: `raw_messages`; the others: a JSON
//! array of the rows, docs/stores.md).

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
    if args.raw {
        return raw(store, &id);
    }
    let meta = store.meta(&id)?;
    let row = store.load(&id)?;
    // The rows the agent keeps but does not send (goose's rows hidden by a compaction).
    let hidden_rows = store.hidden(&id)?.filter(|h| h.rows > 0);
    let loaded = plan::decode(row, &meta)?;
    let (lead, summary_by) = summary_author(store, &loaded);
    let label = |i: usize| summary_by.filter(|_| i < lead);
    // `--last N`: the last N messages, numbered as in the whole conversation.
    let first = args
        .last
        .map(|n| loaded.messages.len().saturating_sub(n))
        .unwrap_or(0);
    if args.json {
        let hidden = hidden_rows.as_ref().map_or(0, |h| h.rows);
        json::print("show", json_doc(&meta, &loaded, first, &label, hidden))?;
        return Ok(0);
    }
    let exact = loaded.format.tokens_exact();
    let format = loaded.format;
    let hidden = |b: &Block| {
        !args.verbose && matches!(b, Block::Opaque { kind, .. } if format.bookkeeping(kind))
    };
    let n_hidden: usize = loaded.messages[first..]
        .iter()
        .map(|m| m.blocks.iter().filter(|b| hidden(b)).count())
        .sum();
    let mut s = header(
        store,
        &meta,
        &loaded,
        n_hidden,
        hidden_rows.as_ref(),
        args.verbose,
    )?;
    if let (Some(h), true) = (&hidden_rows, args.verbose) {
        s.push_str(&hidden_section(store, &meta, &loaded, h)?);
    }
    if first > 0 {
        s.push_str(&format!(
            "\n… {first} earlier message(s) not shown (--last)\n"
        ));
    }
    // On a terminal, long lines wrap under their own indent instead of at column 0.
    let width = ui.stdout_tty.then(|| output::term_width() as usize);
    if let Some(w) = width {
        s = wrap_indented(&s, w);
    }
    for (i, (m, t)) in loaded
        .messages
        .iter()
        .zip(&loaded.tokens)
        .enumerate()
        .skip(first)
    {
        let text = render_message_as(&i.to_string(), m, *t, exact, label(i), &hidden);
        match width {
            Some(w) => s.push_str(&wrap_indented(&text, w)),
            None => s.push_str(&text),
        }
    }
    output::page(ui, &s, args.no_pager)?;
    Ok(0)
}

/// `show --raw`: the stored rows, every one, in the store's documented shape (docs/stores.md).
fn raw(store: &Store, id: &str) -> CmdResult {
    let Some(text) = store.stored(id)? else {
        return Err(agent_db::error::Error::Usage(format!(
            "show --raw: {} stores keep no raw form agent-db can print; use show {id} --json",
            store.kind.name()
        ))
        .into());
    };
    output::out(&text)?;
    output::out("\n")?;
    Ok(0)
}

/// The leading messages that are an earlier summary, and who wrote it: agent-db, or the
/// agent's own compaction (shown under the agent's name, never as agent-db's).
fn summary_author(store: &Store, loaded: &plan::Loaded) -> (usize, Option<&'static str>) {
    let lead =
        agent_db::summary::prior_len(loaded.format, &loaded.messages, loaded.row.agent_summary);
    let summary_by = (lead > 0).then(|| {
        if loaded.messages[..lead]
            .iter()
            .any(|m| agent_db::summary::is_agent_db_summary(&m.text()))
        {
            "agent-db"
        } else {
            store.kind.name()
        }
    });
    (lead, summary_by)
}

/// `show --json`: the conversation's facts and its neutral messages from `first` on.
fn json_doc(
    meta: &agent_db::store::ConversationMeta,
    loaded: &plan::Loaded,
    first: usize,
    label: &dyn Fn(usize) -> Option<&'static str>,
    hidden_rows: usize,
) -> serde_json::Value {
    serde_json::json!({
        "id": meta.id,
        "name": meta.name,
        "provider": meta.provider,
        "format": loaded.format.name(),
        "model": meta.model,
        "tokens": loaded.total_tokens(),
        "tokens_exact": loaded.format.tokens_exact(),
        "stored_messages": meta.message_count,
        "context_tokens": meta.current_context,
        "max_context_tokens": meta.max_context,
        "utilization": meta.utilization(None).map(agent_db::report::round4),
        "first_index": first,
        "messages": loaded.messages.iter().zip(&loaded.tokens).enumerate().skip(first).map(|(i, (m, t))| {
            let mut v = serde_json::to_value(m).unwrap_or_default();
            v["tokens"] = (*t).into();
            if let Some(by) = label(i) {
                v["summary_by"] = by.into();
            }
            v
        }).collect::<Vec<_>>(),
        "hidden_rows": hidden_rows,
    })
}

/// The transcript's head: the conversation's facts, its place among sessions, and what is not
/// shown.
fn header(
    store: &Store,
    meta: &agent_db::store::ConversationMeta,
    loaded: &plan::Loaded,
    n_hidden: usize,
    hidden_rows: Option<&agent_db::store::kind::Hidden>,
    verbose: bool,
) -> Result<String, agent_db::error::Error> {
    let mut s = format!(
        "conversation {}\n  name: {}\n  provider: {} ({}), model: {}\n  updated: {} ({})\n  {}\n  {}\n",
        meta.id,
        meta.name
            .as_deref()
            .map(super::list::first_line)
            .unwrap_or("-".into()),
        meta.provider,
        loaded.format.name(),
        meta.model.as_deref().unwrap_or("-"),
        output::ago(&agent_db::gotime::now(), &meta.updated_at),
        output::utc(&meta.updated_at).unwrap_or_else(|| meta.updated_at.clone()),
        context_line(meta),
        counted_line(meta, loaded),
    );
    if let Some(p) = &meta.parent {
        s.push_str(&format!(
            "  a child session of {p}, a subagent's (agent-db show {p} shows its parent)\n"
        ));
    }
    if meta.archived {
        s.push_str("  archived in the agent\n");
    }
    if n_hidden > 0 {
        s.push_str(&format!(
            "  {n_hidden} bookkeeping item(s) the agent's own view hides are not shown (--verbose shows them)\n"
        ));
    }
    let children = store.children(&meta.id)?;
    if !children.is_empty() {
        let named: Vec<String> = children
            .iter()
            .map(|(c, t)| match t {
                Some(t) => format!("{c} ({t})"),
                None => c.clone(),
            })
            .collect();
        s.push_str(&format!(
            "  child sessions (agent-db show ID shows one): {}\n",
            named.join(", ")
        ));
    }
    if let Some(h) = hidden_rows {
        s.push_str(&format!(
            "  {} stored row(s) hidden from the model by a compaction ({} still shows them); {}\n",
            h.rows,
            store.kind.name(),
            if verbose {
                "shown first below"
            } else {
                "--verbose shows them"
            }
        ));
    }
    Ok(s)
}

/// `--verbose`: the rows hidden from the model, every one, agent-visible or not (decode_all
/// keeps only what the model is sent).
fn hidden_section(
    store: &Store,
    meta: &agent_db::store::ConversationMeta,
    loaded: &plan::Loaded,
    h: &agent_db::store::kind::Hidden,
) -> Result<String, agent_db::error::Error> {
    let rows: Vec<Message> = agent_db::message::split_raw(&h.raw_messages)
        .map_err(|e| agent_db::error::Error::decode(&meta.id, e))?
        .into_iter()
        .filter_map(|raw| agent_db::message::decode(loaded.format, raw).ok())
        .collect();
    let mut s = format!(
        "\n══ hidden from the model ({} row(s), in {}'s order) ══\n",
        h.rows,
        store.kind.name()
    );
    let exact = loaded.format.tokens_exact();
    for m in &rows {
        let t = agent_db::tokens::message_tokens(loaded.format, m);
        s.push_str(&render_message_as(
            "hidden",
            m,
            t,
            exact,
            None,
            &|_: &Block| false,
        ));
    }
    s.push_str("\n══ sent to the model ══\n");
    Ok(s)
}

/// The stored context and its utilization: the figure `list` and `compact` give.
fn context_line(meta: &agent_db::store::ConversationMeta) -> String {
    let stored = |n: i64| table::thousands(n.max(0) as usize);
    match (
        meta.utilization(None),
        meta.current_context,
        meta.max_context,
    ) {
        (Some(u), Some(c), Some(m)) if m > 0 => format!(
            "context: {} of the window ({} of {} tokens, as stored)",
            table::percent(u),
            stored(c),
            stored(m)
        ),
        (_, Some(c), _) => format!(
            "context: {} tokens stored, no context window known",
            stored(c)
        ),
        _ => "context: none recorded".to_string(),
    }
}

/// The messages shown and agent-db's count of their tokens; the agent's own message count
/// beside it when it differs (it may count rows the agent does not load, or load several
/// messages from one row).
fn counted_line(meta: &agent_db::store::ConversationMeta, loaded: &plan::Loaded) -> String {
    let exact = loaded.format.tokens_exact();
    let n = loaded.messages.len();
    let stored = match meta.message_count {
        Some(c) if c >= 0 && c as usize != n => {
            format!(" ({} stored)", table::thousands(c as usize))
        }
        _ => String::new(),
    };
    format!(
        "{} messages{stored}, {} tokens counted by agent-db{}",
        table::thousands(n),
        table::tokens(loaded.total_tokens(), exact),
        if exact { "" } else { " (estimated)" },
    )
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
    indent_by(s, "    ")
}

fn indent_by(s: &str, pad: &str) -> String {
    s.lines().map(|l| format!("{pad}{l}\n")).collect()
}

/// Longest string argument of a tool call shown, in characters.
const MAX_ARG_CHARS: usize = 800;

/// A tool call's input as the tool received it: the stored JSON decoded, one argument a line
/// (`command: cargo test -- --nocapture`), strings unescaped and multi-line ones indented under
/// their name; other values as compact JSON. Input that is not a JSON object is shown decoded
/// (a string) or as stored.
fn tool_input(input: &str) -> String {
    let pad = "      ";
    match serde_json::from_str::<serde_json::Value>(input) {
        Ok(serde_json::Value::Object(map)) => map
            .iter()
            .map(|(k, v)| match v {
                serde_json::Value::String(text) => {
                    let text = clip(text, MAX_ARG_CHARS);
                    if text.contains('\n') {
                        format!("{pad}{k}:\n{}", indent_by(&text, "        "))
                    } else {
                        format!("{pad}{k}: {text}\n")
                    }
                }
                other => format!("{pad}{k}: {}\n", clip(&other.to_string(), MAX_ARG_CHARS)),
            })
            .collect(),
        Ok(serde_json::Value::String(text)) => indent_by(&clip(&text, MAX_ARG_CHARS), pad),
        Ok(serde_json::Value::Null) => String::new(),
        Ok(other) => indent_by(&clip(&other.to_string(), MAX_ARG_CHARS), pad),
        Err(_) => indent_by(&clip(input, MAX_ARG_CHARS), pad),
    }
}

/// Wrap every line of `text` longer than `width` characters at spaces, continuing under the
/// line's own indent (two columns further for a `→ `/`← ` marker line); a word longer than a
/// whole line is cut where the line ends.
pub fn wrap_indented(text: &str, width: usize) -> String {
    let mut out = String::with_capacity(text.len());
    for line in text.lines() {
        for piece in wrap_line(line, width) {
            out.push_str(&piece);
            out.push('\n');
        }
    }
    out
}

fn wrap_line(line: &str, width: usize) -> Vec<String> {
    if line.chars().count() <= width {
        return vec![line.to_string()];
    }
    let lead = line.chars().take_while(|c| *c == ' ').count();
    let rest = &line[lead..];
    let marker = rest.starts_with("→ ") || rest.starts_with("← ");
    let pad_len = (lead + if marker { 2 } else { 0 }).min(width / 2);
    let mut lines = Vec::new();
    let mut cur = " ".repeat(lead.min(width / 2));
    let mut cur_len = cur.len();
    let mut empty = true;
    for word in rest.split(' ') {
        let mut chars: Vec<char> = word.chars().collect();
        loop {
            let sep = usize::from(!empty);
            if cur_len + sep + chars.len() <= width {
                if !empty {
                    cur.push(' ');
                }
                cur.extend(chars.iter());
                cur_len += sep + chars.len();
                empty = false;
                break;
            }
            if !empty {
                lines.push(std::mem::replace(&mut cur, " ".repeat(pad_len)));
                cur_len = pad_len;
                empty = true;
                continue;
            }
            // Longer than a whole line: fill this one and carry the rest.
            let room = width - cur_len;
            cur.extend(chars.drain(..room));
            lines.push(std::mem::replace(&mut cur, " ".repeat(pad_len)));
            cur_len = pad_len;
            if chars.is_empty() {
                break;
            }
        }
    }
    if !empty {
        lines.push(cur);
    }
    lines
}

/// One message of the transcript: `── [i] role · tokens`, with who wrote it when it is an
/// earlier summary (`summary_by`: `agent-db`, or the agent's name for its own compaction);
/// blocks `hidden` says the agent's own view hides are left out.
fn render_message_as(
    i: &str,
    m: &Message,
    tokens: usize,
    exact: bool,
    summary_by: Option<&str>,
    hidden: &dyn Fn(&Block) -> bool,
) -> String {
    let by = match summary_by {
        Some("agent-db") => " · agent-db's summary".to_string(),
        Some(agent) => format!(" · {agent}'s own summary"),
        None => String::new(),
    };
    let mut s = format!(
        "\n── [{i}] {}{by} · {} tokens\n",
        role_name(m.role),
        table::tokens(tokens, exact)
    );
    for b in m.blocks.iter().filter(|b| !hidden(b)) {
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
                s.push_str(&format!("    → {name} [{id}]\n"));
                s.push_str(&tool_input(input));
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
            Block::Opaque {
                kind,
                detail: Some(d),
                ..
            } => s.push_str(&format!("    [{kind}] {d}\n")),
            Block::Opaque { kind, bytes, .. } => {
                s.push_str(&format!("    [{kind}: {bytes} bytes]\n"))
            }
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wrapped_lines_fit_keep_their_indent_and_every_word() {
        let line = format!(
            "    → bash [call_1]\n      command: {} {}\n",
            "cargo test --workspace --all-features -- --nocapture".repeat(2),
            "x".repeat(70)
        );
        let out = wrap_indented(&line, 40);
        for l in out.lines() {
            assert!(l.chars().count() <= 40, "{l:?}\n{out}");
        }
        for l in out.lines().skip(2) {
            assert!(
                l.starts_with("      ") && !l.starts_with("       "),
                "{l:?}"
            );
        }
        let words = |s: &str| s.split_whitespace().collect::<String>();
        assert_eq!(words(&out), words(&line));
        assert_eq!(wrap_indented("short\n", 40), "short\n");
    }

    #[test]
    fn tool_input_is_decoded() {
        let s = tool_input(r#"{"command":"echo \u0026\u0026 x -\u003e y","n":3,"body":"a\nb"}"#);
        assert_eq!(
            s,
            "      command: echo && x -> y\n      n: 3\n      body:\n        a\n        b\n"
        );
        assert_eq!(tool_input("not json {"), "      not json {\n");
    }
}

//! Our replay of goose's loading rule (goose itself is not run), written from goose's source at
//! `block/goose@8d844eec`: `crates/goose/src/session/session_manager.rs` (`get_conversation`)
//! and `crates/goose/src/conversation/mod.rs` (`agent_visible_messages`, `fix_conversation`);
//! docs/stores.md, goose, cites the same sources. Independent of agent-db's `src/`.
//!
//! - Rows `ORDER BY created_timestamp, id`; roles other than `user`/`assistant` skipped.
//! - `content_json` must parse as a list of known items, else goose cannot load the session.
//! - `metadata_json` NULL or unreadable (or without both flags as booleans) means visible to
//!   both; only `agentVisible` rows reach the model, projected to the assistant audience.
//! - `fix_tool_calling`, counted: tool requests in user messages, tool responses in assistant
//!   messages, responses without an earlier pending request, and requests never answered are
//!   removals. A well-formed compacted session needs none.

#![allow(dead_code)]

use std::collections::HashSet;

use rusqlite::Connection;
use serde_json::Value;

/// The item types goose (upstream main, plus `document`) can read.
const KNOWN: &[&str] = &[
    "text",
    "image",
    "toolRequest",
    "toolResponse",
    "toolConfirmationRequest",
    "actionRequired",
    "frontendToolRequest",
    "thinking",
    "redactedThinking",
    "reasoning",
    "systemNotification",
    "error",
    "document",
    "conversationCompacted",
];

#[derive(Debug, Clone)]
pub struct Row {
    pub id: i64,
    pub message_id: Option<String>,
    pub role: String,
    pub items: Vec<Value>,
    pub created: i64,
    pub user_visible: bool,
    pub agent_visible: bool,
}

impl Row {
    pub fn text(&self) -> String {
        self.items
            .iter()
            .filter(|i| i["type"] == "text")
            .filter_map(|i| i["text"].as_str())
            .collect::<Vec<_>>()
            .join("\n")
    }
}

#[derive(Debug, Clone)]
pub struct Loaded {
    /// Every user/assistant row, in goose's order.
    pub all: Vec<Row>,
    /// What the model is sent, after the visibility filter and the tool-call fixer.
    pub model: Vec<Row>,
    /// Items `fix_tool_calling` removed.
    pub removals: usize,
}

fn flags(metadata: Option<&str>) -> (bool, bool) {
    let parsed: Option<Value> = metadata.and_then(|m| serde_json::from_str(m).ok());
    match parsed {
        Some(v) if v["userVisible"].is_boolean() && v["agentVisible"].is_boolean() => {
            (v["userVisible"] == true, v["agentVisible"] == true)
        }
        _ => (true, true),
    }
}

/// Load a session the way goose does; `Err` when goose could not load it at all.
pub fn load(conn: &Connection, session: &str) -> Result<Loaded, String> {
    let has_meta = conn
        .prepare("SELECT 1 FROM pragma_table_info('messages') WHERE name = 'metadata_json'")
        .unwrap()
        .exists([])
        .unwrap();
    let has_mid = conn
        .prepare("SELECT 1 FROM pragma_table_info('messages') WHERE name = 'message_id'")
        .unwrap()
        .exists([])
        .unwrap();
    let sql = format!(
        "SELECT id, {}, role, content_json, created_timestamp, {} FROM messages \
         WHERE session_id = ?1 ORDER BY created_timestamp, id",
        if has_mid { "message_id" } else { "NULL" },
        if has_meta { "metadata_json" } else { "NULL" }
    );
    let mut st = conn.prepare(&sql).unwrap();
    type Raw = (i64, Option<String>, String, String, i64, Option<String>);
    let raw: Vec<Raw> = st
        .query_map([session], |r| {
            Ok((
                r.get(0)?,
                r.get(1)?,
                r.get(2)?,
                r.get(3)?,
                r.get(4)?,
                r.get(5)?,
            ))
        })
        .unwrap()
        .map(|r| r.unwrap())
        .collect();
    let mut all = Vec::new();
    for (id, message_id, role, content, created, meta) in raw {
        if role != "user" && role != "assistant" {
            continue;
        }
        let items: Vec<Value> = serde_json::from_str(&content)
            .map_err(|e| format!("row {id}: content_json does not parse: {e}"))?;
        for it in &items {
            let t = it["type"].as_str().unwrap_or("");
            if !KNOWN.contains(&t) {
                return Err(format!("row {id}: unknown item type {t:?}"));
            }
        }
        let (user_visible, agent_visible) = flags(meta.as_deref());
        all.push(Row {
            id,
            message_id,
            role,
            items,
            created,
            user_visible,
            agent_visible,
        });
    }
    let (model, removals) = fix_tool_calling(agent_view(&all));
    Ok(Loaded {
        all,
        model,
        removals,
    })
}

fn for_assistant(item: &Value) -> bool {
    match item["annotations"]["audience"].as_array() {
        Some(a) => a.iter().any(|w| w == "assistant"),
        None => true,
    }
}

fn agent_view(all: &[Row]) -> Vec<Row> {
    all.iter()
        .filter(|r| r.agent_visible)
        .map(|r| {
            let mut r = r.clone();
            r.items.retain(|i| {
                let t = i["type"].as_str().unwrap_or("");
                let media = t == "text" || t == "image";
                (!media || for_assistant(i)) && t != "conversationCompacted"
            });
            r
        })
        .filter(|r| !r.items.is_empty())
        .collect()
}

fn fix_tool_calling(rows: Vec<Row>) -> (Vec<Row>, usize) {
    let mut removals = 0;
    let mut pending: HashSet<String> = HashSet::new();
    let mut answered: HashSet<String> = HashSet::new();
    let mut out = Vec::new();
    for mut r in rows {
        let user = r.role == "user";
        r.items.retain(|i| {
            let id = i["id"].as_str().unwrap_or("").to_string();
            match i["type"].as_str().unwrap_or("") {
                "toolRequest" if user => {
                    removals += 1;
                    false
                }
                "toolConfirmationRequest" | "thinking" | "redactedThinking" if user => false,
                "toolResponse" if user => {
                    if pending.remove(&id) {
                        answered.insert(id);
                        true
                    } else {
                        removals += 1;
                        false
                    }
                }
                "toolResponse" => {
                    removals += 1;
                    false
                }
                "frontendToolRequest" => user,
                "toolRequest" => {
                    pending.insert(id);
                    true
                }
                _ => true,
            }
        });
        out.push(r);
    }
    for r in out.iter_mut().filter(|r| r.role == "assistant") {
        r.items.retain(|i| {
            let orphan =
                i["type"] == "toolRequest" && !answered.contains(i["id"].as_str().unwrap_or(""));
            if orphan {
                removals += 1;
            }
            !orphan
        });
    }
    out.retain(|r| !r.items.is_empty());
    (out, removals)
}

/// Whether `r` is a summary as goose stores it: an agent-only user text message.
pub fn is_summary(r: &Row) -> bool {
    r.role == "user"
        && !r.user_visible
        && r.agent_visible
        && !r.items.is_empty()
        && r.items.iter().all(|i| i["type"] == "text")
}

/// The checks a compacted session must pass (goose's load, above); `summary` is the text
/// the summary must start with.
pub fn check_compacted(l: &Loaded, summary_prefix: &str) -> Result<(), String> {
    let m = &l.model;
    let first = m.first().ok_or("the model sees nothing")?;
    if !is_summary(first) || !first.text().starts_with(summary_prefix) {
        return Err(format!(
            "the first agent-visible row is not the summary: {first:?}"
        ));
    }
    let second = m.get(1).ok_or("no continuation")?;
    if second.role != "assistant" || second.user_visible || second.text().is_empty() {
        return Err(format!(
            "the second agent-visible row is not the continuation: {second:?}"
        ));
    }
    if l.removals != 0 {
        return Err(format!("fix_tool_calling removed {} items", l.removals));
    }
    let summaries = m
        .iter()
        .filter(|r| is_summary(r) && r.text().starts_with(summary_prefix))
        .count();
    if summaries != 1 {
        return Err(format!("{summaries} agent-visible summaries"));
    }
    Ok(())
}

/// The checks a pruned session must pass: goose sends it without any `fix_tool_calling`
/// removal, and `fix_lead_trail` keeps its first message (a user message). Agent-only rows are
/// ordinary agent-visible messages to goose (`agent_only` sets only the metadata flags): nothing else tells them apart.
pub fn check_pruned(l: &Loaded) -> Result<(), String> {
    let first = l.model.first().ok_or("the model sees nothing")?;
    if first.role != "user" {
        return Err(format!(
            "the first agent-visible row is not a user message: {first:?}"
        ));
    }
    if l.removals != 0 {
        return Err(format!("fix_tool_calling removed {} items", l.removals));
    }
    Ok(())
}

#[test]
fn goose_replay_reads_goose_rows_and_rejects_orphans_and_unknown_items() {
    let conn = Connection::open_in_memory().unwrap();
    conn.execute_batch(
        "CREATE TABLE messages (id INTEGER PRIMARY KEY AUTOINCREMENT, message_id TEXT, session_id TEXT, role TEXT, \
         content_json TEXT, created_timestamp INTEGER, timestamp TEXT, tokens INTEGER, metadata_json TEXT);
         INSERT INTO messages (session_id, role, content_json, created_timestamp, metadata_json) VALUES
          ('s', 'user', '[{\"type\":\"text\",\"text\":\"old\"}]', 1, '{\"userVisible\":true,\"agentVisible\":false}'),
          ('s', 'user', '[{\"type\":\"text\",\"text\":\"S: summary\"}]', 2, '{\"userVisible\":false,\"agentVisible\":true}'),
          ('s', 'assistant', '[{\"type\":\"text\",\"text\":\"go on\"}]', 2, '{\"userVisible\":false,\"agentVisible\":true}'),
          ('s', 'assistant', '[{\"type\":\"toolRequest\",\"id\":\"c1\",\"toolCall\":{\"status\":\"success\",\"value\":{\"name\":\"x\",\"arguments\":{}}}}]', 3, NULL),
          ('s', 'user', '[{\"type\":\"toolResponse\",\"id\":\"c1\",\"toolResult\":{\"status\":\"success\",\"value\":{\"content\":[]}}}]', 4, 'garbage'),
          ('s', 'system', 'not even json', 5, NULL);",
    )
    .unwrap();
    let l = load(&conn, "s").unwrap();
    assert_eq!(l.all.len(), 5);
    assert_eq!(l.model.len(), 4);
    check_compacted(&l, "S:").unwrap();
    // An orphaned response and an unanswered request are removals.
    conn.execute("UPDATE messages SET metadata_json = '{\"userVisible\":true,\"agentVisible\":false}' WHERE id = 4", [])
        .unwrap();
    let l = load(&conn, "s").unwrap();
    assert_eq!(l.removals, 1);
    assert!(check_compacted(&l, "S:").is_err());
    conn.execute(
        "UPDATE messages SET content_json = '[{\"type\":\"mystery\"}]' WHERE id = 1",
        [],
    )
    .unwrap();
    assert!(load(&conn, "s").unwrap_err().contains("unknown item type"));
}

/// The generator's goose-compacted sessions are what goose's loader expects of a compaction,
/// and every generated session loads (checked by the oracle, not by agent-db).
#[test]
fn generated_goose_stores_load() {
    use agent_db_synth::goose::{generate_goose, GooseSchema};
    for preset in GooseSchema::PRESETS {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sessions.db");
        let opts = agent_db_synth::SynthOptions {
            conversations: 20,
            scale: 0.3,
            ..Default::default()
        };
        generate_goose(&path, &opts, &GooseSchema::preset(preset).unwrap()).unwrap();
        let conn = Connection::open(&path).unwrap();
        let ids: Vec<String> = conn
            .prepare("SELECT id FROM sessions")
            .unwrap()
            .query_map([], |r| r.get(0))
            .unwrap()
            .map(|r| r.unwrap())
            .collect();
        let mut compacted = 0;
        for id in ids {
            let l = load(&conn, &id).unwrap_or_else(|e| panic!("{preset} {id}: {e}"));
            assert_eq!(l.removals, 0, "{preset} {id}");
            let goose_compacted = l.model.get(1).is_some_and(|r| {
                r.role == "assistant" && r.text().starts_with("Your context was compacted")
            });
            if goose_compacted {
                // goose's agent_only copy of the latest instruction and tool-pair summaries are
                // agent-only user texts too: the summary is told apart by its text.
                let prefix: String = l.model[0].text().chars().take(40).collect();
                check_compacted(&l, &prefix).unwrap_or_else(|e| panic!("{preset} {id}: {e}"));
                compacted += 1;
            }
        }
        if !preset.ends_with("v3") {
            assert!(compacted > 0, "{preset}: no goose-compacted session");
        }
    }
}

//! Our replay of opencode's loading rule (opencode itself runs in `real_opencode.rs`), written
//! from `anomalyco/opencode` `packages/opencode/src/session/message-v2.ts@007a9409`
//! (`filterCompacted`, `toModelMessages`; docs/stores.md, opencode, cites the same sources) and
//! independent of `src/`: read a session's messages in `(time_created, id)` order and their
//! parts by `id`, replay `filterCompacted` (walk newest → oldest, stop at the compaction user
//! message of the newest completed summary, or at its `tail_start_id`), the reorder that puts
//! that compaction and its summary before the kept tail, and `toModelMessages`' skip rules
//! (errored assistants, ignored and empty texts, messages left without content).

use rusqlite::Connection;
use serde_json::Value;

/// One message as opencode sends it.
#[derive(Debug, Clone, PartialEq)]
pub struct Sent {
    pub id: String,
    pub role: String,
    /// The texts the model gets from this message, in part order.
    pub texts: Vec<String>,
    /// The tool calls of an assistant message with the result the model gets for each, in
    /// part order ([`tool_sent`]).
    pub tools: Vec<String>,
    /// Whether the user message is a real instruction (typed text, not a compaction).
    pub instruction: bool,
}

struct Row {
    id: String,
    info: Value,
    parts: Vec<Value>,
}

fn rows(c: &Connection, session: &str) -> Result<Vec<Row>, String> {
    let mut st = c
        .prepare("SELECT id, data FROM message WHERE session_id = ?1 ORDER BY time_created, id")
        .unwrap();
    let msgs: Vec<(String, String)> = st
        .query_map([session], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .map(|r| r.unwrap())
        .collect();
    let mut pst = c
        .prepare("SELECT data FROM part WHERE message_id = ?1 ORDER BY id")
        .unwrap();
    let mut out = Vec::new();
    for (id, data) in msgs {
        let info: Value = serde_json::from_str(&data).map_err(|e| format!("{id}: {e}"))?;
        let parts: Vec<String> = pst
            .query_map([&id], |r| r.get(0))
            .unwrap()
            .map(|r| r.unwrap())
            .collect();
        let parts = parts
            .iter()
            .map(|p| serde_json::from_str(p).map_err(|e| format!("{id} part: {e}")))
            .collect::<Result<Vec<Value>, String>>()?;
        out.push(Row { id, info, parts });
    }
    Ok(out)
}

fn compaction(r: &Row) -> Option<&Value> {
    r.parts.iter().find(|p| p["type"] == "compaction")
}

fn done_summary(info: &Value) -> bool {
    info["role"] == "assistant"
        && info["summary"] == Value::Bool(true)
        && !info["finish"].is_null()
        && info["error"].is_null()
}

/// `filterCompacted`: newest to oldest, up to the newest completed compaction.
fn filter_compacted(all: Vec<Row>) -> Vec<Row> {
    let mut out = Vec::new();
    let mut completed: Vec<String> = Vec::new();
    let mut retain: Option<String> = None;
    for r in all.into_iter().rev() {
        let mut stop = false;
        if let Some(t) = &retain {
            stop = *t == r.id;
        } else if r.info["role"] == "user" && completed.contains(&r.id) {
            if let Some(c) = compaction(&r) {
                match c["tail_start_id"].as_str() {
                    None => stop = true,
                    Some(t) => {
                        retain = Some(t.to_string());
                        stop = t == r.id;
                    }
                }
            }
        } else if done_summary(&r.info) {
            completed.push(r.info["parentID"].as_str().unwrap_or("").to_string());
        }
        out.push(r);
        if stop {
            break;
        }
    }
    out.reverse();
    out
}

/// The reorder after `filterCompacted`: the compaction and its summary before the kept tail.
fn reorder(v: Vec<Row>) -> Vec<Row> {
    let Some(w) = v.iter().rposition(|r| {
        r.info["role"] == "user" && compaction(r).is_some_and(|c| c["tail_start_id"].is_string())
    }) else {
        return v;
    };
    let tail = compaction(&v[w]).unwrap()["tail_start_id"]
        .as_str()
        .unwrap()
        .to_string();
    let j = (w + 1..v.len()).find(|&i| {
        v[i].info["role"] == "assistant"
            && v[i].info["summary"] == Value::Bool(true)
            && v[i].info["parentID"].as_str() == Some(v[w].id.as_str())
    });
    let s = v.iter().position(|r| r.id == tail);
    match (s, j) {
        (Some(s), Some(j)) if s < w && w < j => {
            let mut order: Vec<usize> = (w..=j).collect();
            order.extend(s..w);
            order.extend(j + 1..v.len());
            let mut slots: Vec<Option<Row>> = v.into_iter().map(Some).collect();
            order
                .into_iter()
                .map(|i| slots[i].take().unwrap())
                .collect()
        }
        _ => v,
    }
}

/// What `toModelMessages` sends for a `tool` part: the call (id, tool, input) and its result:
/// the output when completed, `[Old tool result content cleared]` once opencode's prune set
/// `state.time.compacted`, the error text, or `[Tool execution was interrupted]` for a call that
/// never finished.
fn tool_sent(p: &Value) -> String {
    let state = &p["state"];
    let result = match state["status"].as_str() {
        Some("completed") if !state["time"]["compacted"].is_null() => {
            "[Old tool result content cleared]".to_string()
        }
        Some("completed") => match &state["output"] {
            Value::String(t) => t.clone(),
            other => other.to_string(),
        },
        Some("error") => match &state["error"] {
            Value::String(t) => t.clone(),
            other => other.to_string(),
        },
        _ => "[Tool execution was interrupted]".to_string(),
    };
    format!(
        "{} {}({}) -> {result}",
        p["callID"].as_str().unwrap_or(""),
        p["tool"].as_str().unwrap_or(""),
        state["input"]
    )
}

/// `toModelMessages` for one message: its texts and its tool calls with their results.
fn to_model(r: &Row) -> Option<Sent> {
    let role = r.info["role"].as_str().unwrap_or("").to_string();
    if role == "assistant" && !r.info["error"].is_null() {
        let aborted = r.info["error"]["name"] == "MessageAbortedError";
        let content = r
            .parts
            .iter()
            .any(|p| matches!(p["type"].as_str(), Some("text" | "reasoning" | "tool")));
        if !(aborted && content) {
            return None;
        }
    }
    let mut texts = Vec::new();
    let mut tools = Vec::new();
    let mut instruction = false;
    let mut any = false;
    for p in &r.parts {
        match (role.as_str(), p["type"].as_str().unwrap_or("")) {
            (_, "text") => {
                let t = p["text"].as_str().unwrap_or("");
                if p["ignored"] == Value::Bool(true) || (role == "user" && t.is_empty()) {
                    continue;
                }
                if role == "user" && p["synthetic"] != Value::Bool(true) {
                    instruction = true;
                }
                texts.push(t.to_string());
                any = true;
            }
            ("user", "compaction") => {
                texts.push("What did we do so far?".into());
                any = true;
            }
            ("user", "subtask") => {
                texts.push("The following tool was executed by the user".into());
                any = true;
            }
            ("user", "file") => {
                any |= !matches!(
                    p["mime"].as_str(),
                    Some("text/plain" | "application/x-directory")
                )
            }
            ("assistant", "tool") => {
                tools.push(tool_sent(p));
                any = true;
            }
            ("assistant", "reasoning" | "step-start") => any = true,
            _ => {}
        }
    }
    any.then_some(Sent {
        id: r.id.clone(),
        role,
        texts,
        tools,
        instruction,
    })
}

/// What opencode sends for `session`, or why it cannot load it.
pub fn load(c: &Connection, session: &str) -> Result<Vec<Sent>, String> {
    let all = rows(c, session)?;
    Ok(reorder(filter_compacted(all))
        .iter()
        .filter_map(to_model)
        .collect())
}

/// Check a session agent-db compacted: opencode now sends the compaction question, the
/// summary (agent-db's), then exactly a suffix of what it sent before; and the latest user
/// instruction sent before is still sent, verbatim (kept, or in the summary text).
pub fn check_compacted(before: &[Sent], after: &[Sent], header: &str) -> Result<(), String> {
    let [q, s, tail @ ..] = after else {
        return Err(format!("only {} messages load", after.len()));
    };
    if q.role != "user" || q.texts != ["What did we do so far?"] {
        return Err(format!("first is not the compaction question: {q:?}"));
    }
    let summary = s.texts.join("\n");
    if s.role != "assistant" || !summary.starts_with(header) {
        return Err(format!("second is not agent-db's summary: {:?}", s.texts));
    }
    if tail.len() >= before.len() || before[before.len() - tail.len()..] != *tail {
        return Err(format!(
            "the kept messages {:?} are not a suffix of the {} loaded before",
            tail.iter().map(|m| &m.id).collect::<Vec<_>>(),
            before.len()
        ));
    }
    if let Some(latest) = before.iter().rev().find(|m| m.instruction) {
        let kept = tail.iter().any(|m| m.id == latest.id);
        let text = latest.texts.join("\n");
        if !kept && !summary.contains(text.trim()) {
            return Err(format!("the latest instruction {} is lost", latest.id));
        }
    }
    Ok(())
}

/// The replay can say no: on a small session written here with SQL, a well-formed compaction
/// passes [`check_compacted`], and each bad history it must reject is rejected: a compaction
/// whose `tail_start_id` points past the end, a kept tool result changed or dropped, and the
/// latest instruction neither kept nor in the summary.
#[test]
fn opencode_replay_rejects_histories_opencode_would_not_send_as_compacted() {
    let c = Connection::open_in_memory().unwrap();
    c.execute_batch(
        "CREATE TABLE message (id TEXT PRIMARY KEY, session_id TEXT, time_created INTEGER, data TEXT);
         CREATE TABLE part (id TEXT PRIMARY KEY, message_id TEXT, data TEXT);",
    )
    .unwrap();
    let msg = |id: &str, t: i64, info: Value| {
        c.execute(
            "INSERT INTO message VALUES (?1, 's', ?2, ?3)",
            rusqlite::params![id, t, info.to_string()],
        )
        .unwrap();
    };
    let part = |id: &str, m: &str, data: Value| {
        c.execute(
            "INSERT INTO part VALUES (?1, ?2, ?3)",
            rusqlite::params![id, m, data.to_string()],
        )
        .unwrap();
    };
    let done = serde_json::json!({"role": "assistant", "finish": "stop"});
    let user = serde_json::json!({"role": "user"});
    msg("m1", 1, user.clone());
    part(
        "p01",
        "m1",
        serde_json::json!({"type": "text", "text": "build the parser"}),
    );
    msg("m2", 2, done.clone());
    part(
        "p02",
        "m2",
        serde_json::json!({"type": "text", "text": "reading it"}),
    );
    part(
        "p03",
        "m2",
        serde_json::json!({"type": "tool", "tool": "read", "callID": "c1",
            "state": {"status": "completed", "input": {"path": "a.rs"}, "output": "fn a() {}"}}),
    );
    msg("m3", 3, user.clone());
    part(
        "p04",
        "m3",
        serde_json::json!({"type": "text", "text": "now run the tests"}),
    );
    msg("m4", 4, done.clone());
    part(
        "p05",
        "m4",
        serde_json::json!({"type": "tool", "tool": "bash", "callID": "c2",
            "state": {"status": "completed", "input": {"command": "cargo test"}, "output": "ok. 3 passed"}}),
    );
    part(
        "p06",
        "m4",
        serde_json::json!({"type": "text", "text": "tests pass"}),
    );
    let before = load(&c, "s").unwrap();
    assert_eq!(before.len(), 4);
    assert_eq!(
        before[3].tools,
        ["c2 bash({\"command\":\"cargo test\"}) -> ok. 3 passed"]
    );

    // A compaction keeping m3 and m4: what opencode's own compaction writes.
    msg("m5", 5, user.clone());
    part(
        "p07",
        "m5",
        serde_json::json!({"type": "compaction", "tail_start_id": "m3"}),
    );
    msg(
        "m6",
        6,
        serde_json::json!({"role": "assistant", "summary": true, "finish": "stop", "parentID": "m5"}),
    );
    part(
        "p08",
        "m6",
        serde_json::json!({"type": "text", "text": "HEADER the parser is built"}),
    );
    let good = load(&c, "s").unwrap();
    check_compacted(&before, &good, "HEADER").unwrap();

    let rejects = |sql: &str, undo: &str, why: &str| {
        c.execute_batch(sql).unwrap();
        let after = load(&c, "s").unwrap();
        let verdict = check_compacted(&before, &after, "HEADER");
        c.execute_batch(undo).unwrap();
        assert!(verdict.is_err(), "{why}: accepted {after:?}");
    };
    rejects(
        "UPDATE part SET data = json_set(data, '$.tail_start_id', 'm9') WHERE id = 'p07'",
        "UPDATE part SET data = json_set(data, '$.tail_start_id', 'm3') WHERE id = 'p07'",
        "a tail_start_id past the end",
    );
    rejects(
        "UPDATE part SET data = json_set(data, '$.state.output', 'FAILED') WHERE id = 'p05'",
        "UPDATE part SET data = json_set(data, '$.state.output', 'ok. 3 passed') WHERE id = 'p05'",
        "a kept tool result changed",
    );
    rejects(
        "UPDATE part SET data = json_set(data, '$.state.time', json('{\"compacted\":1}')) WHERE id = 'p05'",
        "UPDATE part SET data = json_remove(data, '$.state.time') WHERE id = 'p05'",
        "a kept tool result cleared",
    );
    rejects(
        "UPDATE part SET message_id = 'gone' WHERE id = 'p05'",
        "UPDATE part SET message_id = 'm4' WHERE id = 'p05'",
        "a kept tool call dropped",
    );
    rejects(
        "UPDATE part SET data = json_set(data, '$.tail_start_id', 'm4') WHERE id = 'p07'",
        "UPDATE part SET data = json_set(data, '$.tail_start_id', 'm3') WHERE id = 'p07'",
        "the latest instruction neither kept nor summarized",
    );
    // Every change was undone: the good compaction passes again.
    check_compacted(&before, &load(&c, "s").unwrap(), "HEADER").unwrap();
}

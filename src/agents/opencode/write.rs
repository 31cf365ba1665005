//! opencode's proposal, in the shared protocol's one `BEGIN IMMEDIATE` transaction
//! (docs/stores.md, "opencode").
//!
//! A summary is written the way opencode records its own compaction (`SessionCompaction.process`, released
//! opencode 1.18.33; its loader replays what agent-db writes, `tests/it/real_opencode.rs`): nothing is deleted or rewritten; two messages are appended.
//! - A user message (agent and model of the session's latest user message) with one
//!   `compaction` part `{"type":"compaction","auto":false,"tail_start_id":<first kept>}`.
//! - The summary assistant: `parentID` = that user message, `mode`/`agent` `"compaction"`,
//!   `summary:true`, `finish:"stop"`, zero cost and tokens, with one `text` part holding the
//!   summary. No `step-finish` part, so the session totals do not change (opencode sums them over `step-finish` parts).
//! - Ids from opencode's algorithm (`ids.rs`); `time_created` 1 ms after the newest existing
//!   message or part of the session (not the wall clock), so opencode's `(time_created, id)`
//!   order puts them last and the session's place in time-ordered lists does not move.
//! - `session.time_updated` = the summary's completion time when that is later, as opencode's
//!   own compaction leaves it (at or after its newest message).
//! - The kept tail starts at the first kept message. When the split put the latest instruction
//!   back and it sits right before the tail, the tail starts at that instruction (opencode
//!   keeps whole turns); otherwise (further back, on a store whose opencode ignores
//!   `tail_start_id` (before the events migration), or where no tail can be expressed) the
//!   instruction is appended to the summary text verbatim, as the docker-agent store does.
//! - The event log is not written: opencode's loader does not read it (`MessageV2.page` reads `message` and `part` only).
//!
//! `prune` marks each cleared tool part `state.time.compacted` (its output kept) and bumps the
//! part's `time_updated`, as opencode's own prune (`SessionCompaction.prune`).
//!
//! Archived: the inserted rows (parts before messages) and every changed cell. Before
//! committing, the session is loaded again as opencode would load it.

use std::path::Path;

use rusqlite::{params, Connection};
use serde_json::{json, Value};

use super::super::opencode_family as ids;
use super::super::opencode_family::codec;
use super::read::{load_session, Msg, Session};
use crate::error::{Error, Result, SqlContext};
use crate::message::{self, str_field};
use crate::store::commit::{Stage, Staged, Write};
use crate::store::pre_image::Cell;

/// opencode's typed proposal.
pub struct Proposal {
    /// Which agent's file this is (opencode, or a fork that shares the format).
    pub flavor: &'static super::super::opencode_family::Flavor,
    pub id: String,
    pub version: String,
    /// The ids of the loaded messages the plan was made on.
    pub loaded: Vec<String>,
    pub summary: Option<String>,
    pub tail_start: usize,
    pub reinsert: Option<usize>,
    /// The new history (for prune: the head with cleared tool parts marked).
    pub history: String,
    /// The plan's token count of each loaded message ([`crate::store::Compaction`]).
    pub message_tokens: Vec<usize>,
}

/// A row agent-db inserts.
#[derive(Debug, Clone)]
pub struct NewRow {
    table: &'static str,
    id: String,
    message_id: Option<String>,
    time: i64,
    data: String,
}

/// The token figures of agent-db's summary message: `input` the summarized messages, `output`
/// the summary (no model was necessarily called; these are agent-db's o200k estimates).
#[derive(Debug, Clone, Copy)]
pub struct Usage {
    input: i64,
    output: i64,
}

impl Usage {
    /// opencode's `tokens` object (`total` = input + output + reasoning + cache).
    fn tokens(self) -> Value {
        json!({"total": self.input + self.output, "input": self.input, "output": self.output,
            "reasoning": 0, "cache": {"write": 0, "read": 0}})
    }
}

/// What the apply step writes.
pub enum Apply {
    Append {
        rows: Vec<NewRow>,
        time_updated: i64,
        /// The ids opencode must load afterwards.
        expect: Vec<String>,
        /// Added to `session.tokens_input` / `tokens_output` when the file has them (opencode
        /// adds every `step-finish` part's tokens).
        totals: Option<Usage>,
    },
    Prune {
        parts: Vec<(String, String)>,
        now: i64,
    },
}

impl Write for Proposal {
    type Version = String;
    type Current = Session;
    type Apply = Apply;

    fn planned(&self) -> &String {
        &self.version
    }

    fn read(&self, tx: &Connection, path: &Path) -> Result<Option<(String, Session)>> {
        // The file's migrations, again in the write's transaction: a newer agent may have
        // upgraded it since it was opened.
        super::schema::check_schema_as(tx, path, self.flavor)?;
        let s = crate::error::unless_gone(load_session(tx, path, &self.id))?;
        Ok(s.map(|s| (s.version.clone(), s)))
    }

    fn stage(&self, _tx: &Connection, _path: &Path, cur: Session) -> Result<Stage<Apply>> {
        if cur.revert_pending {
            return Ok(Stage::Changed(
                super::super::opencode_family::REVERT_PENDING.into(),
            ));
        }
        let ids: Vec<&str> = cur.loaded.iter().map(|m| m.id.as_str()).collect();
        if ids != self.loaded.iter().map(String::as_str).collect::<Vec<_>>()
            || self.tail_start > cur.loaded.len()
        {
            return Ok(Stage::Changed(
                "changed since read (its messages moved); nothing written".into(),
            ));
        }
        match &self.summary {
            Some(s) => self.stage_summary(&cur, s),
            None => self.stage_prune(&cur),
        }
    }

    fn apply(&self, tx: &Connection, path: &Path, a: Apply) -> Result<()> {
        match a {
            Apply::Append {
                rows,
                time_updated,
                expect,
                totals,
            } => {
                for r in &rows {
                    insert(tx, path, &self.id, r)?;
                }
                if let Some(u) = totals {
                    tx.execute(
                        "UPDATE session SET tokens_input = COALESCE(tokens_input, 0) + ?1, \
                         tokens_output = COALESCE(tokens_output, 0) + ?2 WHERE id = ?3",
                        params![u.input, u.output, self.id],
                    )
                    .at(path)?;
                }
                tx.execute(
                    "UPDATE session SET time_updated = MAX(time_updated, ?1) WHERE id = ?2",
                    params![time_updated, self.id],
                )
                .at(path)?;
                let after = load_session(tx, path, &self.id)?;
                let got: Vec<&str> = after.loaded.iter().map(|m| m.id.as_str()).collect();
                if got != expect.iter().map(String::as_str).collect::<Vec<_>>() {
                    return Err(Error::conversation(
                        &self.id,
                        format!("after the write opencode would load {got:?}, not {expect:?}; nothing written"),
                    ));
                }
                Ok(())
            }
            Apply::Prune { parts, now } => {
                for (pid, data) in &parts {
                    tx.execute(
                        "UPDATE part SET data = ?1, time_updated = ?2 WHERE id = ?3",
                        params![data, now, pid],
                    )
                    .at(path)?;
                }
                Ok(())
            }
        }
    }
}

fn insert(tx: &Connection, path: &Path, session: &str, r: &NewRow) -> Result<()> {
    match r.message_id.as_deref() {
        None => tx.execute(
            "INSERT INTO message (id, session_id, time_created, time_updated, data) VALUES (?1, ?2, ?3, ?3, ?4)",
            params![r.id, session, r.time, r.data],
        ),
        Some(m) => tx.execute(
            "INSERT INTO part (id, message_id, session_id, time_created, time_updated, data) VALUES (?1, ?2, ?3, ?4, ?4, ?5)",
            params![r.id, m, session, r.time, r.data],
        ),
    }
    .at(path)?;
    Ok(())
}

/// The first index `k >= start` from which the loaded messages are exactly what opencode loads
/// after a `tail_start_id` of `loaded[k]`: chronological, and after everything before them.
fn consistent_start(loaded: &[Msg], start: usize) -> usize {
    (start..loaded.len())
        .find(|&k| {
            loaded[k..].windows(2).all(|w| w[0].key() < w[1].key())
                && loaded[..k].iter().all(|m| m.key() < loaded[k].key())
        })
        .unwrap_or(loaded.len())
}

fn now_ms() -> i64 {
    crate::gotime::now().timestamp_millis()
}

impl Proposal {
    /// The text of loaded message `i` (the latest instruction).
    fn instruction(&self, cur: &Session, i: usize) -> Result<String> {
        let parts =
            message::split_raw(&cur.raw_messages).map_err(|e| Error::decode(&self.id, e))?;
        let raw = parts.get(i).ok_or_else(|| {
            Error::conversation(
                &self.id,
                format!("message {i} (the latest instruction) is not loaded"),
            )
        })?;
        let m = message::decode(&crate::agents::opencode_family::codec::CODEC, raw)
            .map_err(|e| Error::decode(&self.id, e))?;
        Ok(m.text())
    }

    fn stage_summary(&self, cur: &Session, summary: &str) -> Result<Stage<Apply>> {
        let n = cur.loaded.len();
        // The put-back instruction right before the kept tail starts it (opencode keeps whole
        // turns); one further back would drag the summarized steps after it along, so it is
        // appended to the summary text instead.
        let want = match self.reinsert {
            Some(i) if i + 1 == self.tail_start => i,
            _ => self.tail_start,
        };
        let k = if cur.schema.keeps_tail() {
            consistent_start(&cur.loaded, want)
        } else {
            n
        };
        let mut text = summary.to_string();
        if let Some(i) = self.reinsert.filter(|i| *i < k) {
            text = format!(
                "{}\n\nThe latest instruction, verbatim:\n\n{}",
                text.trim_end(),
                self.instruction(cur, i)?
            );
        }
        let tail = (k < n).then(|| cur.loaded[k].id.clone());
        let usage = Usage {
            input: self.head_tokens(cur, k)?,
            output: crate::tokens::count_text(&text) as i64,
        };
        let rows = self.new_rows(cur, &text, tail.as_deref(), usage);
        let mut expect = vec![rows[0].id.clone(), rows[2].id.clone()];
        expect.extend(cur.loaded[k..].iter().map(|m| m.id.clone()));
        let mut cells: Vec<Cell> = rows
            .iter()
            .rev()
            .map(|r| Cell::inserted_row(r.table, "id", r.id.clone()))
            .collect();
        cells.push(Cell::new("session", "id", self.id.clone(), "time_updated"));
        let totals =
            cur.schema.session_has("tokens_input") && cur.schema.session_has("tokens_output");
        if totals {
            cells.push(Cell::new("session", "id", self.id.clone(), "tokens_input"));
            cells.push(Cell::new("session", "id", self.id.clone(), "tokens_output"));
        }
        let details = json!({
            "schema": cur.schema.describe(),
            "compaction_message": rows[0].id,
            "summary_message": rows[2].id,
            "inserted_rows": rows.iter().map(|r| r.id.clone()).collect::<Vec<_>>(),
            "tail_start_id": tail,
            "kept_messages": n - k,
            "summary_tokens": {"input": usage.input, "output": usage.output},
        });
        let time_updated = rows[2].time + 1;
        Ok(Stage::Ready(Staged {
            cells,
            details: Some(("opencode", details)),
            hashed: None,
            apply: Apply::Append {
                rows,
                time_updated,
                expect,
                totals: totals.then_some(usage),
            },
        }))
    }

    /// agent-db's estimate of what the summarized messages (loaded `[0, k)`) take, the input a
    /// summarizer reads: the plan's counts (`cur` is the version planned, message for message),
    /// or counted here when the proposal has none.
    fn head_tokens(&self, cur: &Session, k: usize) -> Result<i64> {
        if self.message_tokens.len() == cur.loaded.len() {
            return Ok(self.message_tokens[..k].iter().sum::<usize>() as i64);
        }
        let parts =
            message::split_raw(&cur.raw_messages).map_err(|e| Error::decode(&self.id, e))?;
        let mut n = 0usize;
        for raw in parts.into_iter().take(k) {
            let m = message::decode(&crate::agents::opencode_family::codec::CODEC, raw)
                .map_err(|e| Error::decode(&self.id, e))?;
            n += crate::tokens::message_tokens(&crate::agents::opencode_family::codec::CODEC, &m);
        }
        Ok(n as i64)
    }

    /// The compaction user message and its part, then the summary assistant and its parts
    /// (step-start, the text, step-finish), as opencode 1.18 writes its own compaction.
    fn new_rows(&self, cur: &Session, text: &str, tail: Option<&str>, usage: Usage) -> Vec<NewRow> {
        // Right after the session's newest row, as if opencode had compacted it then: the
        // session keeps its place in opencode's list (and agent-db's, and `--follow`), which
        // order by `time_updated`; a batch of old sessions does not jump to the top.
        let t = cur.max_time + 1;
        let seed = |n: usize| format!("{}\0{}\0{n}\0agent-db", self.id, self.version);
        let user_id = ids::ascending_id("msg", t, 1, &seed(0));
        let asst_id = ids::ascending_id("msg", t + 1, 1, &seed(2));
        let (agent, model) = match &cur.latest_user {
            Some(u) => (u.get("agent").cloned(), u.get("model").cloned()),
            None => (None, None),
        };
        let last_asst = cur.loaded.iter().rev().find(|m| m.role() == "assistant");
        let model = model.unwrap_or_else(|| {
            let a = last_asst.map(|m| &m.info);
            json!({"providerID": a.and_then(|a| str_field(a, "providerID")).unwrap_or(""),
                   "modelID": a.and_then(|a| str_field(a, "modelID")).unwrap_or("")})
        });
        let user = json!({"role": "user", "time": {"created": t},
            "agent": agent.unwrap_or_else(|| json!("build")), "model": model,
            "summary": {"diffs": []}});
        let mut compaction = json!({"type": "compaction", "auto": false});
        if let Some(tail) = tail {
            compaction["tail_start_id"] = json!(tail);
        }
        let path = last_asst
            .and_then(|m| m.info.get("path").cloned())
            .unwrap_or_else(|| json!({"cwd": cur.directory, "root": "/"}));
        let asst = json!({"role": "assistant", "parentID": user_id, "mode": "compaction",
            "agent": "compaction", "summary": true, "path": path, "cost": 0,
            "tokens": usage.tokens(),
            "modelID": model["modelID"], "providerID": model["providerID"],
            "time": {"created": t + 1, "completed": t + 2}, "finish": "stop"});
        let text_part =
            json!({"type": "text", "text": text, "time": {"start": t + 1, "end": t + 2}});
        let step_finish =
            json!({"reason": "stop", "type": "step-finish", "tokens": usage.tokens(), "cost": 0});
        let row = |table, id: String, message_id: Option<&str>, time, v: &Value| NewRow {
            table,
            id,
            message_id: message_id.map(str::to_string),
            time,
            data: v.to_string(),
        };
        vec![
            row("message", user_id.clone(), None, t, &user),
            row(
                "part",
                ids::ascending_id("prt", t, 1, &seed(1)),
                Some(&user_id),
                t,
                &compaction,
            ),
            row("message", asst_id.clone(), None, t + 1, &asst),
            row(
                "part",
                ids::ascending_id("prt", t + 1, 1, &seed(3)),
                Some(&asst_id),
                t + 1,
                &json!({"type": "step-start"}),
            ),
            row(
                "part",
                ids::ascending_id("prt", t + 1, 2, &seed(4)),
                Some(&asst_id),
                t + 1,
                &text_part,
            ),
            row(
                "part",
                ids::ascending_id("prt", t + 2, 1, &seed(5)),
                Some(&asst_id),
                t + 2,
                &step_finish,
            ),
        ]
    }

    fn stage_prune(&self, cur: &Session) -> Result<Stage<Apply>> {
        let new = message::split_raw(&self.history).map_err(|e| Error::decode(&self.id, e))?;
        let now = now_ms();
        let mut parts = Vec::new();
        for (i, raw) in new.iter().take(self.tail_start).enumerate() {
            let Some(m) = cur.loaded.get(i) else { break };
            for pid in codec::cleared_parts(raw) {
                let Some((_, data)) = m.parts.iter().find(|(p, _)| *p == pid) else {
                    continue;
                };
                let Ok(mut v) = serde_json::from_str::<Value>(data) else {
                    continue;
                };
                if !codec::prunable(&v) {
                    continue;
                }
                let state = &mut v["state"];
                if !state.get("time").is_some_and(Value::is_object) {
                    state["time"] = json!({});
                }
                state["time"]["compacted"] = json!(now);
                parts.push((pid, v.to_string()));
            }
        }
        if parts.is_empty() {
            return Ok(Stage::Changed(
                "nothing to prune: no completed tool output before the kept tail".into(),
            ));
        }
        let mut cells = Vec::new();
        for (pid, _) in &parts {
            cells.push(Cell::new("part", "id", pid.clone(), "data"));
            cells.push(Cell::new("part", "id", pid.clone(), "time_updated"));
        }
        let details = json!({
            "schema": cur.schema.describe(),
            "pruned_parts": parts.iter().map(|(p, _)| p.clone()).collect::<Vec<_>>(),
        });
        Ok(Stage::Ready(Staged {
            cells,
            details: Some(("opencode", details)),
            hashed: None,
            apply: Apply::Prune { parts, now },
        }))
    }
}

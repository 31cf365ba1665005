//! Reading docker-agent's (cagent's) `session.db` (docs/stores.md, "docker-agent"): the listing scan, and loading
//! the history docker-agent would send. Generations are in `schema.rs`, the write side in
//! `write.rs`.
//!
//! - **Generation.** docker-agent records its migrations by name in `migrations`; a binary
//!   refuses a file whose `MAX(id)` is above the newest migration it knows, and so does agent-db
//!   ([`NEWEST_KNOWN`]). What agent-db reads and writes is then decided by the columns
//!   (`PRAGMA table_info`): the legacy `sessions.messages` JSON (up to migration 19),
//!   `session_items.first_kept_entry` (21), `sessions.instruction_context` (22), `cost` (23),
//!   `model` and `usage_json` (25), `actor_pending` (31), `actor_input_mode` (34).
//! - **Sessions.** Only root sessions (`parent_id` empty) are conversations; sub-sessions belong
//!   to their parent's history and are never listed or compacted on their own.
//! - **Active history.** Items are read ordered by `position` (then `id`) into the slice
//!   docker-agent loads (`message`, `subsession` rows whose sub-session exists, `summary`,
//!   `error`, `termination`). The last summary with text is presented as a synthetic first
//!   user message starting with [`crate::summary::SUMMARY_HEADER`]; the messages after it (or from
//!   `first_kept_entry` when `0 < first_kept_entry < lastSummaryIndex`) follow with their stored
//!   bytes, except those docker-agent holds back (pending input, `legacy_run` input), which
//!   stay in the slice but are not sent. Each `instruction_context.updates` entry is sent as a
//!   user message before the item at its position, as `getMessages` does. `slots` holds each
//!   message's index in the slice (-1 for the synthetic summary, [`update_slot`] for an update).
//! - **Listing** reads `sessions` plus three indexed subqueries per session (message count, the
//!   model of the latest assistant message, the latest item's `created_at`); it never loads a
//!   history. Under `--all-over` only the model is needed to judge a session, so the other two
//!   are read only for the sessions the selection reports.

use std::path::Path;

use rusqlite::types::{ToSqlOutput, ValueRef};
use rusqlite::{Connection, OptionalExtension, Row};
use serde_json::value::RawValue;

use super::schema::{check_schema, Schema};
use super::{Version, PROVIDER};
use crate::error::{Error, Result, SqlContext};
use crate::message::{self};
use crate::models::ContextLimits;
use crate::store::cells::{int, lossy, lossy_ref, NewestFirst, SortKey};
use crate::store::pre_image::CellValue;
use crate::store::schema_util::{one_read, KeptCounts};
use crate::store::{ConversationMeta, Facts, Prefilter};

// ---- listing --------------------------------------------------------------------------------

/// The listing query. Columns: id, title, created_at, working_dir, input_tokens, output_tokens,
/// message count, model, latest item time, parent_id, rowid. `lean` leaves out the message count
/// and the latest item time (NULL): a prefiltered scan reads them only for the rows it keeps.
/// It finds the latest assistant message with a model once (its rowid, joined back) and adds
/// three columns: that message's `position`, `id` and `created_at` (see [`Latest`]).
fn list_sql(schema: &Schema, filter: &str, lean: bool) -> String {
    let title = if schema.title { "s.title" } else { "NULL" };
    let wd = if schema.working_dir {
        "s.working_dir"
    } else {
        "NULL"
    };
    // The item's own model when its JSON has no usable one. The WHERE clause below tests the
    // role first, in a CASE, so the model is only extracted from valid JSON.
    let model = |i: &str| {
        let item_model = if schema.item_model {
            format!("NULLIF({i}.model, '')")
        } else {
            "NULL".to_string()
        };
        format!(
            "COALESCE(NULLIF(CASE WHEN typeof({i}.message_json ->> '$.model') = 'text' THEN {i}.message_json ->> '$.model' END, ''), {item_model})"
        )
    };
    let role =
        "CASE WHEN json_valid(i.message_json) THEN json_extract(i.message_json, '$.role') END";
    let latest_assistant = |select: &str| {
        format!(
            "(SELECT {select} FROM session_items i
     WHERE i.session_id = s.id AND i.item_type = 'message'
       AND CASE WHEN {role} = 'assistant' THEN {m} IS NOT NULL ELSE 0 END
     ORDER BY i.position DESC, i.id DESC LIMIT 1)",
            m = model("i")
        )
    };
    if lean {
        return format!(
            "SELECT s.id, {title}, s.created_at, {wd}, s.input_tokens, s.output_tokens, NULL,
  {model}, NULL, s.parent_id, s.rowid, j.position, j.id, {created}, {INSTANT}
FROM sessions s LEFT JOIN session_items j ON j.rowid = {found} {filter}",
            model = model("j"),
            created = created_sql("j"),
            found = latest_assistant("i.rowid"),
        );
    }
    format!(
        "SELECT s.id, {title}, s.created_at, {wd}, s.input_tokens, s.output_tokens,
  ({COUNT_SQL}),
  {found},
  ({latest}),
  s.parent_id,
  s.rowid,
  {INSTANT}
FROM sessions s {filter}",
        found = latest_assistant(&model("i")),
        latest = latest_sql(),
    )
}

/// A session's message count (on `idx_session_items_session_type`), for `s.id`.
const COUNT_SQL: &str =
    "SELECT COUNT(*) FROM session_items i WHERE i.session_id = s.id AND i.item_type = 'message'";

/// The same count for every session, by rowid ([`KeptCounts`]); `+s.id` is the id as a bound
/// value is compared (without the column's affinity).
const ALL_COUNTS_SQL: &str = "SELECT s.rowid, (SELECT COUNT(*) FROM session_items i
   WHERE i.session_id = +s.id AND i.item_type = 'message') FROM sessions s";

/// An item's `created_at`, from the JSON of the item aliased `i`.
fn created_sql(i: &str) -> String {
    format!("CASE WHEN json_valid({i}.message_json) THEN json_extract({i}.message_json, '$.created_at') END")
}

/// The `created_at` of a session's latest item that has one, for `s.id`.
fn latest_sql() -> String {
    latest_after("")
}

/// [`latest_sql`] among the items after those matching `after` in the listing's order (empty:
/// all of them).
fn latest_after(after: &str) -> String {
    let created = created_sql("i");
    format!(
        "SELECT {created} FROM session_items i
     WHERE i.session_id = s.id AND i.message_json IS NOT NULL AND typeof({created}) = 'text'{after}
     ORDER BY i.position DESC, i.id DESC LIMIT 1"
    )
}

/// The latest item time of a kept session, from the latest assistant message the listing
/// query found (columns 11–13: its `position`, `id` and text `created_at`): that message's time
/// unless an item after it has one. When the message has no text time, or no position or id
/// to order by, the latest item time is read whole ([`latest_sql`]).
struct Latest<'c> {
    whole: rusqlite::Statement<'c>,
    /// Items after `(position, id)` = `(?2, ?3)` in `ORDER BY position DESC, id DESC`.
    after: rusqlite::Statement<'c>,
}

impl<'c> Latest<'c> {
    fn new(conn: &'c Connection, path: &Path) -> Result<Latest<'c>> {
        let after =
            latest_after("\n       AND i.position >= ?2 AND (i.position > ?2 OR i.id > ?3)");
        Ok(Latest {
            whole: conn.prepare(&latest_sql().replace("s.id", "?1")).at(path)?,
            after: conn.prepare(&after.replace("s.id", "?1")).at(path)?,
        })
    }

    fn of(&mut self, path: &Path, id: &CellValue, r: &Row<'_>) -> Result<Option<String>> {
        let (position, item) = (r.get_ref(11).at(path)?, r.get_ref(12).at(path)?);
        let own = match r.get_ref(13).at(path)? {
            ValueRef::Text(_) => lossy(r, 13).at(path)?,
            _ => None,
        };
        let Some(own) =
            own.filter(|_| !matches!(position, ValueRef::Null) && !matches!(item, ValueRef::Null))
        else {
            return self
                .whole
                .query_row([id], |c| lossy(c, 0))
                .optional()
                .at(path)
                .map(Option::flatten);
        };
        let later = self
            .after
            // Bound as stored: a `From<ValueRef>` conversion panics on text that is not UTF-8.
            .query_row(
                rusqlite::params![
                    id,
                    ToSqlOutput::Borrowed(position),
                    ToSqlOutput::Borrowed(item)
                ],
                |c| lossy(c, 0),
            )
            .optional()
            .at(path)?
            .flatten();
        Ok(Some(later.unwrap_or(own)))
    }
}

/// A session's context tokens: its input plus output tokens, when either is recorded. Both 0
/// (the columns' default: no model call yet, an empty session) is no usage recorded, not a
/// context of 0 tokens.
fn current(input: Option<i64>, output: Option<i64>) -> Option<i64> {
    match (input, output) {
        (None | Some(0), None | Some(0)) => None,
        // Stored numbers can be anything a program wrote; never overflow on them.
        (a, b) => Some(a.unwrap_or(0).saturating_add(b.unwrap_or(0))),
    }
}

fn meta_from_row(
    r: &Row<'_>,
    limits: &ContextLimits,
) -> rusqlite::Result<(ConversationMeta, Option<String>)> {
    let id = lossy(r, 0)?.unwrap_or_default();
    let created_at = lossy(r, 2)?.unwrap_or_default();
    let input = int(r, 4)?;
    let output = int(r, 5)?;
    let model = lossy(r, 7)?;
    let current = current(input, output);
    let meta = ConversationMeta {
        parent: None,
        archived: false,
        id,
        name: lossy(r, 1)?.filter(|t| !t.is_empty()),
        provider: PROVIDER.to_string(),
        codec: Some(&super::codec::CODEC),
        api_mode: None,
        max_context: model.as_deref().and_then(|m| limits.of(m)),
        model,
        message_count: int(r, 6)?,
        current_context: current,
        input_tokens: input,
        output_tokens: output,
        cwd: lossy(r, 3)?.filter(|w| !w.is_empty()),
        updated_at: lossy(r, 8)?.unwrap_or_else(|| created_at.clone()),
        created_at,
        problem: None,
    };
    Ok((meta, lossy(r, 9)?.filter(|p| !p.is_empty())))
}

/// A session's `created_at` as an instant (SQLite's `julianday`, which reads RFC 3339 with any
/// offset), so sessions written under different offsets (`-07:00`, `+05:30`) sort by when they
/// were created, not by their text; NULL (sorted last) when it cannot be read.
const INSTANT: &str = "julianday(s.created_at)";
/// The listing column holding [`INSTANT`] in the lean query.
const LEAN_INSTANT: usize = 14;

/// Root sessions, in docker-agent's order (newest `created_at` first, ties in rowid order).
const ROOTS: &str = "WHERE s.parent_id IS NULL OR s.parent_id = ''";
const ROOTS_ORDERED: &str =
    "WHERE s.parent_id IS NULL OR s.parent_id = '' ORDER BY julianday(s.created_at) DESC, s.rowid";

/// Stream every root session's metadata, newest `created_at` first (docker-agent's own order),
/// ties in rowid order; `f` returns `false` to stop. With a prefilter, the sessions are read in
/// the table's order and only the kept ones are sorted ([`NewestFirst`], flat memory), and the
/// message count and the latest item time (the costly parts of a row) are read only for them;
/// the others are left out.
pub fn scan(
    conn: &Connection,
    path: &Path,
    limits: &ContextLimits,
    prefilter: Prefilter,
    f: &mut dyn FnMut(ConversationMeta) -> bool,
) -> Result<()> {
    let schema = check_schema(conn, path)?;
    if prefilter.all_over.is_none() {
        let mut stmt = conn
            .prepare(&list_sql(&schema, ROOTS_ORDERED, false))
            .at(path)?;
        let mut rows = stmt.query([]).at(path)?;
        while let Some(r) = rows.next().at(path)? {
            if !f(meta_from_row(r, limits).at(path)?.0) {
                break;
            }
        }
        return Ok(());
    }
    // A kept session is completed with its message count and latest item time as soon as the
    // scan reads it, while the pages the scan just read for it (its latest items) are still in
    // SQLite's cache.
    let one = COUNT_SQL.replace("s.id", "?1");
    let mut counts = KeptCounts::new(conn, path, "sessions", &one, ALL_COUNTS_SQL, 3)?;
    let mut latest = Latest::new(conn, path)?;
    // One read transaction for the pass and its per-row statements, ended before the first
    // session is handed on.
    let kept = {
        let _read = one_read(conn, path)?;
        kept_unordered(
            conn,
            path,
            &schema,
            limits,
            &prefilter,
            &mut counts,
            &mut latest,
        )?
    };
    kept.each(path, |meta| Ok(f(meta)))
}

/// [`scan`] with `--all-over`, of only what the selection reads: the kept sessions' [`Facts`]
/// from the same one pass, without their message counts, and without their latest item time
/// unless the selection reads it ([`Prefilter::times`]).
pub fn scan_facts(
    conn: &Connection,
    path: &Path,
    limits: &ContextLimits,
    prefilter: Prefilter,
    f: &mut dyn FnMut(Facts<'_>) -> bool,
) -> Result<()> {
    let schema = check_schema(conn, path)?;
    let mut latest = Latest::new(conn, path)?;
    let kept = {
        let _read = one_read(conn, path)?;
        let mut stmt = conn.prepare(&list_sql(&schema, ROOTS, true)).at(path)?;
        let mut rows = stmt.query([]).at(path)?;
        let mut kept = NewestFirst::listing();
        while let Some(r) = rows.next().at(path)? {
            let (current_context, max_context) = usage(r, limits).at(path)?;
            if !prefilter.keeps_usage(current_context, max_context) {
                continue;
            }
            // As [`meta_from_row`] and [`kept_unordered`] read them.
            let updated_at = if !prefilter.times {
                None
            } else if let Some(u) =
                latest.of(path, &CellValue::from_ref(r.get_ref(0).at(path)?), r)?
            {
                Some(u)
            } else {
                lossy(r, 2).at(path)?
            };
            let id = lossy_ref(r, 0).at(path)?;
            let facts = Facts {
                parent: None,
                archived: false,
                id: id.as_deref().unwrap_or_default(),
                updated_at: updated_at.as_deref().unwrap_or_default(),
                current_context,
                max_context,
                problem: None,
            };
            kept.push_facts_at(
                path,
                r.get_ref(LEAN_INSTANT).at(path)?,
                r.get(10).at(path)?,
                &facts,
            )?;
        }
        kept
    };
    kept.each_facts(path, |facts| Ok(f(facts)))
}

/// Whether the prefilter keeps a row of the listing query, judged on its token columns and
/// model alone (as [`meta_from_row`] reads them) before the row is decoded.
fn keeps(r: &Row<'_>, limits: &ContextLimits, prefilter: &Prefilter) -> rusqlite::Result<bool> {
    let (current, max) = usage(r, limits)?;
    Ok(prefilter.keeps_usage(current, max))
}

/// A row's context tokens and window, as [`meta_from_row`] reads them.
fn usage(r: &Row<'_>, limits: &ContextLimits) -> rusqlite::Result<(Option<i64>, Option<i64>)> {
    let (input, output) = (int(r, 4)?, int(r, 5)?);
    let max = match r.get_ref(7)? {
        ValueRef::Null => None,
        ValueRef::Text(b) if std::str::from_utf8(b).is_ok() => {
            std::str::from_utf8(b).ok().and_then(|m| limits.of(m))
        }
        _ => lossy(r, 7)?.and_then(|m| limits.of(&m)),
    };
    Ok((current(input, output), max))
}

/// The sessions the prefilter keeps, each completed with its message count and latest item
/// time as it is read, read in the
/// table's order in one pass whatever share is kept, to be sorted by [`NewestFirst`].
/// Every kept session is completed before the first is handed on (even when the caller then
/// stops early, as `--limit` does): the scan has to read every session to sort them anyway, and
/// completing each while its pages are cached costs less than half as much as afterwards.
fn kept_unordered(
    conn: &Connection,
    path: &Path,
    schema: &Schema,
    limits: &ContextLimits,
    prefilter: &Prefilter,
    counts: &mut KeptCounts<'_>,
    latest: &mut Latest<'_>,
) -> Result<NewestFirst> {
    let mut stmt = conn.prepare(&list_sql(schema, ROOTS, true)).at(path)?;
    let mut rows = stmt.query([]).at(path)?;
    let mut kept = NewestFirst::listing();
    while let Some(r) = rows.next().at(path)? {
        let keep = keeps(r, limits, prefilter).at(path)?;
        counts.note(path, keep)?;
        if !keep {
            continue;
        }
        let (mut meta, _) = meta_from_row(r, limits).at(path)?;
        // The id as stored (any bytes: a `Value` would panic on text that is not UTF-8).
        let id = CellValue::from_ref(r.get_ref(0).at(path)?);
        let rowid: i64 = r.get(10).at(path)?;
        meta.message_count = Some(counts.count(path, rowid, true, &id)?);
        if let Some(u) = latest.of(path, &id, r)? {
            meta.updated_at = u;
        }
        // Newest first by the instant of created_at, ties in rowid order.
        let key = SortKey::of(r.get_ref(LEAN_INSTANT).at(path)?);
        kept.push_meta(path, key, rowid, meta)?;
    }
    Ok(kept)
}

fn sub_session_error(id: &str, parent: &str) -> Error {
    Error::conversation(
        id,
        format!("is a sub-session of {parent}; compact its parent"),
    )
}

/// One root session's metadata, or `None`. A sub-session is an error naming its parent.
pub fn meta(
    conn: &Connection,
    path: &Path,
    limits: &ContextLimits,
    id: &str,
) -> Result<Option<ConversationMeta>> {
    let schema = check_schema(conn, path)?;
    let sql = list_sql(&schema, "WHERE s.id = ?1", false);
    let found = conn
        .query_row(&sql, [id], |r| meta_from_row(r, limits))
        .optional()
        .at(path)?;
    // A sub-session is found too (to be shown), marked with its parent.
    Ok(found.map(|(mut m, parent)| {
        m.parent = parent;
        m
    }))
}

// ---- loading --------------------------------------------------------------------------------

/// One entry of the slice docker-agent loads.
#[derive(Debug, Clone)]
pub(super) enum Entry {
    /// A message item: its stored JSON; `held` when docker-agent keeps it out of the model's
    /// history (pending input, or `legacy_run` input).
    Message { json: String, held: bool },
    /// A summary item (empty text counts as no summary, as in docker-agent).
    Summary { text: String, first_kept_entry: i64 },
    /// A sub-session, error or termination item: in the slice, not sent to the model.
    Other,
}

/// A session as docker-agent would load it, plus what the writer needs.
#[derive(Debug, Clone)]
pub struct Session {
    pub id: String,
    /// The active history as a JSON array: the summary as a synthetic first message, then the
    /// stored messages' bytes.
    pub raw_messages: String,
    pub version: Version,
    /// Each message's index in the loaded item slice (-1 for the synthetic summary).
    pub slots: Vec<i64>,
    /// Length of the loaded item slice (the slice index a new item would get).
    pub slice_len: usize,
    /// Rows in `session_items` for this session.
    pub item_count: i64,
    /// The legacy `sessions.messages` text, when the column exists.
    pub legacy_messages: Option<String>,
    /// 1 when the history starts with docker-agent's own summary, else 0.
    pub agent_summary: usize,
}

/// The synthetic first message's text for a stored summary: agent-db's own summaries keep
/// their framing under agent-db's header; any other summary (docker-agent's own, a hook's) is
/// shown as docker-agent sends it, `Session Summary: <text>`, and counted as the agent's own
/// ([`is_native_summary`]).
pub fn present_summary(stored: &str) -> String {
    let header = crate::summary::SUMMARY_HEADER;
    let s = stored.trim_start();
    let s = s.strip_prefix(header).map(str::trim_start).unwrap_or(s);
    if is_native_summary(stored) {
        format!("{NATIVE_PREFIX}{s}")
    } else {
        format!("{header}\n{s}")
    }
}

/// How docker-agent sends its last summary to the model (`GetMessages`).
pub const NATIVE_PREFIX: &str = "Session Summary: ";

/// Whether a stored summary is not agent-db's (its framing paragraph does not say agent-db
/// replaced the earlier messages): docker-agent's own compaction wrote it.
pub fn is_native_summary(stored: &str) -> bool {
    let header = crate::summary::SUMMARY_HEADER;
    let s = stored.trim_start();
    let s = s.strip_prefix(header).map(str::trim_start).unwrap_or(s);
    !s.split("\n\n")
        .next()
        .unwrap_or("")
        .contains("agent-db replaced")
}

/// Load one root session's active history (see the module doc).
pub fn load_session(conn: &Connection, path: &Path, schema: &Schema, id: &str) -> Result<Session> {
    load_session_with(conn, path, schema, id, false)
}

/// [`load_session`]; `child_ok`: a sub-session loads too (to be shown, never written).
fn load_session_with(
    conn: &Connection,
    path: &Path,
    schema: &Schema,
    id: &str,
    child_ok: bool,
) -> Result<Session> {
    let (input, output, legacy_messages, context) = session_row(conn, path, schema, id, child_ok)?;
    let updates = instruction_updates(context.as_deref(), id)?;
    let items = read_items(conn, path, schema, id)?;
    if items.count == 0
        && legacy_messages
            .as_deref()
            .is_some_and(|m| !m.trim().is_empty() && m.trim() != "[]")
    {
        return Err(Error::conversation(
            id,
            "its history is only in the legacy sessions.messages column (never moved to session_items); agent-db will not touch it",
        ));
    }
    let (raw, slots) = active_history(&items.slice, &updates, id)?;
    let agent_summary = usize::from(native_head(&items.slice));
    let marker = format!(
        "items:{}:{}:{}:{}",
        items.count,
        items.max_id,
        input.unwrap_or(0),
        output.unwrap_or(0)
    );
    Ok(Session {
        id: id.to_string(),
        version: Version {
            marker,
            raw_digest: crate::util::version_digest(raw.as_bytes()),
        },
        raw_messages: raw,
        slots,
        slice_len: items.slice.len(),
        item_count: items.count,
        legacy_messages,
        agent_summary,
    })
}

/// Whether the history docker-agent sends from `slice` starts with a summary docker-agent
/// wrote itself ([`is_native_summary`]).
pub(super) fn native_head(slice: &[Entry]) -> bool {
    slice.iter().rev().find_map(|e| match e {
        Entry::Summary { text, .. } if !text.is_empty() => Some(is_native_summary(text)),
        _ => None,
    }) == Some(true)
}

/// The session's row: its token columns and the legacy `messages` JSON. A missing session is
/// `ConversationNotFound`; a sub-session is an error naming its parent.
pub(super) fn read_session_row(
    conn: &Connection,
    path: &Path,
    schema: &Schema,
    id: &str,
) -> Result<SessionRow> {
    session_row(conn, path, schema, id, false)
}

/// [`read_session_row`]; `child_ok`: a sub-session's row is read too.
fn session_row(
    conn: &Connection,
    path: &Path,
    schema: &Schema,
    id: &str,
    child_ok: bool,
) -> Result<SessionRow> {
    let legacy = if schema.legacy_messages {
        "s.messages"
    } else {
        "NULL"
    };
    let context = if schema.instruction_context {
        "s.instruction_context"
    } else {
        "NULL"
    };
    let head = conn
        .query_row(
            &format!(
                "SELECT s.parent_id, s.input_tokens, s.output_tokens, {legacy}, {context} FROM sessions s WHERE s.id = ?1"
            ),
            [id],
            |r| {
                Ok((
                    lossy(r, 0)?,
                    int(r, 1)?,
                    int(r, 2)?,
                    lossy(r, 3)?,
                    lossy(r, 4)?,
                ))
            },
        )
        .optional()
        .at(path)?;
    let (parent, input, output, legacy_messages, context) =
        head.ok_or_else(|| Error::ConversationNotFound { id: id.to_string() })?;
    if let Some(p) = parent.filter(|p| !p.is_empty() && !child_ok) {
        return Err(sub_session_error(id, &p));
    }
    Ok((input, output, legacy_messages, context))
}

/// The session row's token columns, legacy `messages` JSON and `instruction_context` JSON.
type SessionRow = (Option<i64>, Option<i64>, Option<String>, Option<String>);

/// One `instruction_context.updates` entry: a `<system-update>` docker-agent sends as a user
/// message before the item at `position` (a slice index; `position == len` sends it last).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Update {
    position: i64,
    content: String,
}

/// The `updates` of a session's `instruction_context` (empty or absent: none). docker-agent
/// refuses to load a session whose JSON does not decode, and so does agent-db.
pub(super) fn instruction_updates(context: Option<&str>, id: &str) -> Result<Vec<Update>> {
    let Some(text) = context.filter(|t| !t.is_empty()) else {
        return Ok(Vec::new());
    };
    let bad = |why: String| {
        Error::conversation(
            id,
            format!("sessions.instruction_context does not decode ({why}); docker-agent would not load this session, agent-db will not touch it"),
        )
    };
    let v: serde_json::Value = serde_json::from_str(text).map_err(|e| bad(e.to_string()))?;
    let Some(list) = v.get("updates").filter(|u| !u.is_null()) else {
        return Ok(Vec::new());
    };
    let list = list
        .as_array()
        .ok_or_else(|| bad("updates is not an array".into()))?;
    list.iter()
        .map(|u| {
            let position = match u.get("position") {
                None | Some(serde_json::Value::Null) => 0,
                Some(p) => p
                    .as_i64()
                    .ok_or_else(|| bad("an update's position is not an integer".into()))?,
            };
            let content = match u.get("content") {
                None | Some(serde_json::Value::Null) => String::new(),
                Some(c) => c
                    .as_str()
                    .ok_or_else(|| bad("an update's content is not a string".into()))?
                    .to_string(),
            };
            Ok(Update { position, content })
        })
        .collect()
}

/// The session's items as docker-agent loads them.
pub(super) struct Items {
    /// The loaded slice, in order.
    pub(super) slice: Vec<Entry>,
    /// Each slice entry's row id.
    pub(super) ids: Vec<i64>,
    /// Rows in `session_items` for the session.
    count: i64,
    /// The largest item id.
    max_id: i64,
}

/// Read the session's items ordered by `position` (then `id`) into the slice docker-agent
/// loads.
pub(super) fn read_items(
    conn: &Connection,
    path: &Path,
    schema: &Schema,
    id: &str,
) -> Result<Items> {
    let fke = if schema.first_kept_entry {
        "COALESCE(first_kept_entry, 0)"
    } else {
        "0"
    };
    let pending = if schema.actor_pending {
        "COALESCE(i.actor_pending, 0) <> 0"
    } else {
        "0"
    };
    let legacy_run = if schema.actor_input_mode {
        "COALESCE(i.actor_input_mode, '') = 'legacy_run'"
    } else {
        "0"
    };
    let mut stmt = conn
        .prepare(&format!(
            "SELECT i.id, i.position, i.item_type, i.message_json, i.subsession_id, i.summary_text, {fke},
               i.subsession_id IS NOT NULL AND i.subsession_id <> ''
                 AND EXISTS (SELECT 1 FROM sessions x WHERE x.id = i.subsession_id),
               ({pending}) OR ({legacy_run})
             FROM session_items i WHERE i.session_id = ?1 ORDER BY i.position, i.id"
        ))
        .at(path)?;
    let mut rows = stmt.query([id]).at(path)?;
    let mut items = Items {
        slice: Vec::new(),
        ids: Vec::new(),
        count: 0,
        max_id: 0,
    };
    while let Some(r) = rows.next().at(path)? {
        items.count += 1;
        let row_id: i64 = r.get(0).at(path)?;
        items.max_id = items.max_id.max(row_id);
        if let Some(e) = entry(r, path, id, row_id)? {
            items.slice.push(e);
            items.ids.push(row_id);
        }
    }
    Ok(items)
}

/// One item as a slice entry, or `None` for an item docker-agent does not load.
fn entry(r: &Row<'_>, path: &Path, id: &str, row_id: i64) -> Result<Option<Entry>> {
    let position: i64 = r.get(1).unwrap_or(0);
    let kind = lossy(r, 2).at(path)?.unwrap_or_default();
    Ok(match kind.as_str() {
        "message" => {
            let json = match r.get_ref(3).at(path)? {
                ValueRef::Text(b) | ValueRef::Blob(b) => String::from_utf8(b.to_vec())
                    .map_err(|_| {
                        Error::conversation(
                            id,
                            format!(
                                "session_items row {row_id} (position {position}): message_json is not valid UTF-8; agent-db will not touch it"
                            ),
                        )
                    })?,
                _ => {
                    return Err(Error::conversation(
                        id,
                        format!("session_items row {row_id} (position {position}): message item without message_json"),
                    ))
                }
            };
            let held = r.get::<_, bool>(8).unwrap_or(false);
            Some(Entry::Message { json, held })
        }
        "summary" => Some(Entry::Summary {
            text: lossy(r, 5).at(path)?.unwrap_or_default(),
            first_kept_entry: int(r, 6).at(path)?.unwrap_or(0),
        }),
        // docker-agent skips sub-session rows whose reference is NULL or dangling.
        "subsession" if r.get::<_, bool>(7).unwrap_or(false) => Some(Entry::Other),
        "error" | "termination" => Some(Entry::Other),
        _ => None,
    })
}

/// The slot of an instruction update replayed before the item at slice index `position`
/// (always below -1; -1 is the synthetic summary).
pub fn update_slot(position: i64) -> i64 {
    -2 - position
}

/// The slice position of an instruction update's slot, or `None` for any other slot.
pub fn update_position(slot: i64) -> Option<i64> {
    (slot <= -2).then(|| -2 - slot)
}

/// The history docker-agent sends from a loaded slice (`getMessages`): the last summary as a
/// synthetic first message, then from `first_kept_entry` (or after the summary) each
/// instruction update at its position and each message docker-agent does not hold back
/// (pending and `legacy_run` input are held). Each entry's slot: the message's slice index, -1
/// for the summary, [`update_slot`] for an update.
pub(super) fn active_history(
    slice: &[Entry],
    updates: &[Update],
    id: &str,
) -> Result<(String, Vec<i64>)> {
    let last_summary = slice
        .iter()
        .rposition(|e| matches!(e, Entry::Summary { text, .. } if !text.is_empty()));
    let start = match last_summary {
        None => 0,
        Some(l) => match &slice[l] {
            Entry::Summary {
                first_kept_entry: f,
                ..
            } if *f > 0 && (*f as usize) < l => *f as usize,
            _ => l + 1,
        },
    };
    let mut parts: Vec<Box<RawValue>> = Vec::new();
    let mut slots: Vec<i64> = Vec::new();
    if let Some(l) = last_summary {
        if let Entry::Summary { text, .. } = &slice[l] {
            parts.push(message::user_text_message(
                &super::codec::CODEC,
                &present_summary(text),
            ));
            slots.push(-1);
        }
    }
    // docker-agent walks the updates in their stored order: the leading ones before `start`
    // are passed over, then each is sent when the walk reaches its position.
    let mut u = 0;
    while u < updates.len() && updates[u].position < start as i64 {
        u += 1;
    }
    for k in start..=slice.len() {
        while u < updates.len() && updates[u].position == k as i64 {
            parts.push(message::user_text_message(
                &super::codec::CODEC,
                &updates[u].content,
            ));
            slots.push(update_slot(k as i64));
            u += 1;
        }
        if let Some(Entry::Message { json, held: false }) = slice.get(k) {
            let raw = RawValue::from_string(json.clone()).map_err(|e| {
                Error::conversation(
                    id,
                    format!("the message at slice index {k} is not valid JSON ({e})"),
                )
            })?;
            parts.push(raw);
            slots.push(k as i64);
        }
    }
    Ok((message::join_raw(parts.iter().map(|p| p.as_ref())), slots))
}

/// The session's open to-dos from `session_todos` (migration 33, `033_add_session_todos_table`:
/// `todos` is the JSON list `[{"id","description","status"}]` docker-agent's todo tools keep,
/// status `pending`, `in-progress` or `completed`), in their order; none when the file has no
/// such table or row, or the row is not that JSON (docker-agent would not load it either).
pub fn open_todos(conn: &Connection, path: &Path, id: &str) -> Result<Vec<String>> {
    let has_table: bool = conn
        .query_row(
            "SELECT EXISTS (SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'session_todos')",
            [],
            |r| r.get(0),
        )
        .at(path)?;
    if !has_table {
        return Ok(Vec::new());
    }
    let todos: Option<String> = conn
        .query_row(
            "SELECT CAST(todos AS TEXT) FROM session_todos WHERE session_id = ?1",
            [id],
            |r| r.get(0),
        )
        .optional()
        .at(path)?
        .flatten();
    let Some(items) = todos.and_then(|t| serde_json::from_str::<Vec<serde_json::Value>>(&t).ok())
    else {
        return Ok(Vec::new());
    };
    Ok(items
        .iter()
        .filter(|t| {
            crate::retention::todo_is_open(t.get("status").and_then(|s| s.as_str()).unwrap_or(""))
        })
        .filter_map(|t| t.get("description").and_then(|d| d.as_str()))
        .filter(|d| !d.trim().is_empty())
        .map(str::to_string)
        .collect())
}

/// Load one session's active history as docker-agent would (see the module doc); a
/// sub-session loads too, to be shown (selection leaves it alone, and the write refuses it).
pub fn load(conn: &Connection, path: &Path, id: &str) -> Result<Session> {
    let schema = check_schema(conn, path)?;
    load_session_with(conn, path, &schema, id, true)
}

/// The parent of session `id` when it is a sub-session.
pub fn parent_of(conn: &Connection, path: &Path, id: &str) -> Result<Option<String>> {
    Ok(conn
        .query_row("SELECT parent_id FROM sessions WHERE id = ?1", [id], |r| {
            lossy(r, 0)
        })
        .optional()
        .at(path)?
        .flatten()
        .filter(|p| !p.is_empty()))
}

/// The sub-sessions session `id` runs (its `subsession` items whose session exists), in its
/// order, each with its title.
pub fn children(conn: &Connection, path: &Path, id: &str) -> Result<Vec<(String, Option<String>)>> {
    let schema = check_schema(conn, path)?;
    let title = if schema.title { "x.title" } else { "NULL" };
    let mut stmt = conn
        .prepare(&format!(
            "SELECT x.id, {title} FROM session_items i JOIN sessions x ON x.id = i.subsession_id
             WHERE i.session_id = ?1 AND i.item_type = 'subsession' ORDER BY i.position, i.id"
        ))
        .at(path)?;
    let mut rows = stmt.query([id]).at(path)?;
    let mut out = Vec::new();
    while let Some(r) = rows.next().at(path)? {
        let child = lossy(r, 0).at(path)?.unwrap_or_default();
        out.push((child, lossy(r, 1).at(path)?.filter(|t| !t.is_empty())));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msg(n: u32, held: bool) -> Entry {
        Entry::Message {
            json: format!("{{\"role\":\"user\",\"content\":\"m{n}\"}}"),
            held,
        }
    }

    fn update(position: i64, content: &str) -> Update {
        Update {
            position,
            content: content.into(),
        }
    }

    #[test]
    fn held_input_is_not_sent_and_updates_are_sent_at_their_positions() {
        // 0 m0, 1 m1 (pending), 2 summary keeping from 1, 3 m3, 4 m4 (legacy_run)
        let slice = vec![
            msg(0, false),
            msg(1, true),
            Entry::Summary {
                text: "s".into(),
                first_kept_entry: 1,
            },
            msg(3, false),
            msg(4, true),
        ];
        // An update before the start is passed over; the rest go before their item, the last
        // one after every item.
        let updates = vec![
            update(0, "u0"),
            update(1, "u1"),
            update(3, "u3"),
            update(5, "u5"),
        ];
        let (raw, slots) = active_history(&slice, &updates, "x").unwrap();
        let v: Vec<serde_json::Value> = serde_json::from_str(&raw).unwrap();
        let contents: Vec<&str> = v.iter().map(|m| m["content"].as_str().unwrap()).collect();
        assert_eq!(contents[1..], ["u1", "u3", "m3", "u5"]);
        assert_eq!(
            slots,
            vec![-1, update_slot(1), update_slot(3), 3, update_slot(5)]
        );
        assert_eq!(update_position(update_slot(3)), Some(3));
        assert_eq!(update_position(-1), None);
        assert_eq!(update_position(3), None);
        // Out of order, as docker-agent walks them: an update behind a later one waits for it.
        let (raw, _) = active_history(&slice, &[update(3, "a"), update(1, "b")], "x").unwrap();
        let v: Vec<serde_json::Value> = serde_json::from_str(&raw).unwrap();
        let contents: Vec<&str> = v.iter().map(|m| m["content"].as_str().unwrap()).collect();
        assert_eq!(contents[1..], ["a", "m3"]);
    }

    #[test]
    fn instruction_context_decodes_or_refuses() {
        assert!(instruction_updates(None, "x").unwrap().is_empty());
        assert!(instruction_updates(Some(""), "x").unwrap().is_empty());
        assert!(instruction_updates(Some("{\"epoch_start\":-1}"), "x")
            .unwrap()
            .is_empty());
        assert_eq!(
            instruction_updates(
                Some("{\"updates\":[{\"position\":4,\"content\":\"<system-update>\\nx\\n</system-update>\"}]}"),
                "x"
            )
            .unwrap(),
            vec![update(4, "<system-update>\nx\n</system-update>")]
        );
        assert!(instruction_updates(Some("{not json"), "x").is_err());
        assert!(instruction_updates(Some("{\"updates\":{}}"), "x").is_err());
    }

    #[test]
    fn summaries_are_presented_as_their_writer_wrote_them() {
        let own = "[agent-db compaction summary]\nThis session continues an earlier conversation. agent-db replaced 3 earlier messages (about 10 tokens) with this summary on 2026-11-01; everything after it is verbatim.\n\n## Goal\nx";
        let stripped = own.strip_prefix("[agent-db compaction summary]\n").unwrap();
        assert_eq!(present_summary(stripped), own);
        assert_eq!(present_summary(own), own);
        assert!(!is_native_summary(stripped));
        // docker-agent's own summary: as docker-agent sends it, never under agent-db's header.
        let native = present_summary("The user asked for a fix.\n\nDone: tests pass.");
        assert_eq!(
            native,
            "Session Summary: The user asked for a fix.\n\nDone: tests pass."
        );
        assert!(!crate::summary::is_summary_text(&native));
    }
}

//! `agent-db list`: stored usage only, streamed; JSON rows are written as they are read.

use agent_db::gotime;
use agent_db::select::{Outcome, Picked, Selector};
use agent_db::store::{ConversationMeta, Store};

use super::CmdResult;
use crate::cli::ListArgs;
use crate::output::table::{self, Kind};
use crate::output::{self, json, Ui};

#[derive(serde::Serialize)]
struct JsonRow<'a> {
    id: &'a str,
    name: Option<&'a str>,
    provider: &'a str,
    format: Option<&'static str>,
    model: Option<&'a str>,
    messages: Option<i64>,
    context_tokens: Option<i64>,
    max_context_tokens: Option<i64>,
    utilization: Option<f64>,
    updated_at: &'a str,
    /// `updated_at` as RFC 3339 UTC (null when it cannot be read).
    updated_at_utc: Option<String>,
    status: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    reason: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    detail: Option<&'a str>,
    /// The session this one is a child of (opencode's `parent_id`).
    #[serde(skip_serializing_if = "Option::is_none")]
    parent_id: Option<&'a str>,
    /// Archived in the agent (opencode's `time_archived`).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    archived: bool,
}

/// [`json_row`] for a selected row; like the table, a timestamp that cannot be read is reported.
fn json_row_checked<'a>(
    failures: &mut Vec<(String, String)>,
    m: &'a ConversationMeta,
    limit: Option<i64>,
    status: &'a str,
    reason: Option<&'a str>,
    detail: Option<&'a str>,
) -> JsonRow<'a> {
    let updated = match m.updated() {
        Ok(t) => Some(output::utc_of(t)),
        Err(e) => {
            failures.push((m.id.clone(), e.to_string()));
            None
        }
    };
    JsonRow {
        updated_at_utc: updated,
        ..json_row_of(m, limit, status, reason, detail)
    }
}

fn json_row<'a>(
    m: &'a ConversationMeta,
    limit: Option<i64>,
    status: &'a str,
    reason: Option<&'a str>,
    detail: Option<&'a str>,
) -> JsonRow<'a> {
    JsonRow {
        updated_at_utc: output::utc(&m.updated_at),
        ..json_row_of(m, limit, status, reason, detail)
    }
}

/// Every field of [`json_row`] but `updated_at_utc` (left `None`), which needs a parse.
fn json_row_of<'a>(
    m: &'a ConversationMeta,
    limit: Option<i64>,
    status: &'a str,
    reason: Option<&'a str>,
    detail: Option<&'a str>,
) -> JsonRow<'a> {
    JsonRow {
        id: &m.id,
        name: m.name.as_deref(),
        provider: &m.provider,
        format: m.format().ok().map(|f| f.name()),
        model: m.model.as_deref(),
        messages: m.message_count,
        context_tokens: m.current_context,
        max_context_tokens: m.max_context,
        utilization: m
            .utilization(limit)
            .map(|u| (u * 10000.0).round() / 10000.0),
        updated_at: &m.updated_at,
        updated_at_utc: None,
        status,
        reason,
        detail,
        parent_id: m.parent.as_deref(),
        archived: m.archived,
    }
}

pub fn run(ui: &Ui, store: &Store, args: &ListArgs) -> CmdResult {
    let mut selector = args.select.selector(&[]);
    selector.validate()?;
    selector.ids = store.resolve_ids(&selector.ids)?;
    if let Some(w) = agent_db::select::provider_warning(&selector, store)? {
        ui.warn(&w);
    }
    let now = gotime::now();
    let mut failures: Vec<(String, String)> = Vec::new();
    if args.json {
        json_list(store, &selector, &now, &mut failures)?;
    } else if args.ids_only {
        ids_list(ui, store, &selector, &now, &mut failures, args.verbose)?;
    } else {
        table_list(ui, store, &selector, &now, &mut failures, args.verbose)?;
    }
    for (id, e) in &failures {
        ui.failure(id, e);
    }
    Ok(if failures.is_empty() {
        0
    } else {
        agent_db::error::exit::PARTIAL
    })
}

type Now = chrono::DateTime<chrono::FixedOffset>;

/// The JSON document, streamed: memory stays flat however large the store is.
fn json_list(
    store: &Store,
    selector: &Selector,
    now: &Now,
    failures: &mut Vec<(String, String)>,
) -> Result<(), super::Failure> {
    let limit = selector.context_limit;
    let mut io_err: Option<std::io::Error> = None;
    let out = std::io::BufWriter::with_capacity(1 << 16, std::io::stdout().lock());
    let head =
        serde_json::json!({"path": store.path.display().to_string(), "kind": store.kind.name()});
    let mut out = json::Stream::start_versioned(
        out,
        json::LIST_VERSION,
        "list",
        &[("store", head)],
        "conversations",
        json::Layout::Compact,
    )?;
    // `conversations` holds the selected ones only (`jq '.conversations[].id'` prints what was
    // selected); the skipped and the unreadable follow in `skipped` and `failed`.
    let mut skipped: Vec<serde_json::Value> = Vec::new();
    let mut failed: Vec<serde_json::Value> = Vec::new();
    let mut line = Vec::with_capacity(1024);
    selector.run(store, now, |o| {
        line.clear();
        let written = match &o {
            Outcome::Selected { meta, reason } => serde_json::to_writer(
                &mut line,
                &json_row_checked(failures, meta, limit, "selected", Some(reason.name()), None),
            ),
            Outcome::Skipped {
                meta, reason, why, ..
            } => {
                skipped.push(
                    serde_json::to_value(json_row(
                        meta,
                        limit,
                        "skipped",
                        Some(reason.name()),
                        Some(why),
                    ))
                    .unwrap_or_default(),
                );
                return true;
            }
            Outcome::Failed { id, error, .. } => {
                failures.push((id.clone(), error.clone()));
                failed.push(serde_json::json!({"id": id, "status": "error", "detail": error}));
                return true;
            }
        };
        if written.is_err() {
            line.clear();
        }
        match out.item_bytes(&line) {
            Ok(()) => true,
            Err(e) => {
                io_err = Some(e);
                false
            }
        }
    })?;
    if let Some(e) = io_err {
        return Err(e.into());
    }
    out.finish(&[
        ("skipped", serde_json::Value::Array(skipped)),
        ("failed", serde_json::Value::Array(failed)),
    ])?;
    Ok(())
}

/// The selected IDs, one per line (read without building a row per conversation:
/// [`Selector::run_ids`]), then the count and the skipped conversations on stderr.
fn ids_list(
    ui: &Ui,
    store: &Store,
    selector: &Selector,
    now: &Now,
    failures: &mut Vec<(String, String)>,
    verbose: bool,
) -> Result<(), super::Failure> {
    use std::io::Write;
    let mut out = std::io::BufWriter::with_capacity(1 << 16, std::io::stdout().lock());
    let mut io_err: Option<std::io::Error> = None;
    let mut rows = 0usize;
    let mut skipped = output::skips::Skips::default();
    let mut compacted = CompactedInWindow::read(store, selector, now)?;
    selector.run_ids(store, now, |p| {
        match p {
            Picked::Selected(id) => {
                rows += 1;
                compacted.seen(id);
                if let Err(e) = out.write_all(id.as_bytes()).and(out.write_all(b"\n")) {
                    io_err = Some(e);
                    return false;
                }
            }
            Picked::Skipped { id, why, summary } => {
                compacted.seen(id);
                skipped.add(summary, id, why)
            }
            Picked::Failed { id, error } => {
                compacted.seen(id);
                failures.push((id.to_string(), error.to_string()))
            }
        }
        true
    })?;
    match io_err {
        Some(e) => return Err(e.into()),
        None => out.flush()?,
    }
    status_lines(ui, store, rows, &skipped, verbose, &output::Ids::full());
    compacted.note(ui);
    Ok(())
}

/// Under `--since`: the conversations agent-db compacted within the window. `--since` compares
/// the agent's own last-activity time, which a compaction moves only where the agent's own
/// compaction does (goose, kodelet), so the listing may leave a just-compacted conversation out; the
/// note says how many and where to find them (`history --since`).
#[derive(Default)]
struct CompactedInWindow {
    window: Option<std::time::Duration>,
    ids: std::collections::HashSet<String>,
}

impl CompactedInWindow {
    fn read(store: &Store, selector: &Selector, now: &Now) -> agent_db::error::Result<Self> {
        let Some(window) = selector.since else {
            return Ok(Self::default());
        };
        let from = *now - chrono::Duration::from_std(window).unwrap_or_default();
        let ids = agent_db::archive::restore::conversations_compacted_since(
            store,
            &gotime::rfc3339_utc(&from),
        )?;
        Ok(Self {
            window: Some(window),
            ids: ids.into_iter().collect(),
        })
    }

    /// A conversation the listing showed (or reported as skipped or failed).
    fn seen(&mut self, id: &str) {
        if !self.ids.is_empty() {
            self.ids.remove(id);
        }
    }

    fn note(&self, ui: &Ui) {
        let (Some(window), n) = (self.window, self.ids.len()) else {
            return;
        };
        if n == 0 {
            return;
        }
        let dur = humantime::format_duration(window);
        ui.status(&format!(
            "{n} conversation(s) agent-db compacted within the last {dur} are not listed: \
             --since compares the agent's own last activity, which a compaction does not move on \
             this store; `agent-db history --since {dur}` lists them"
        ));
    }
}

/// The count and the skipped conversations (one line per reason; each one with `--verbose`), on
/// stderr.
fn status_lines(
    ui: &Ui,
    store: &Store,
    rows: usize,
    skipped: &output::skips::Skips,
    verbose: bool,
    ids: &output::Ids,
) {
    ui.status(&format!(
        "{rows} conversation(s) in {}",
        store.path.display()
    ));
    for line in skipped.lines(verbose, ids) {
        ui.status(&line);
    }
}

/// The table and the TOTAL line on stdout, then the skipped conversations (one line per
/// reason; each one with `--verbose`) on stderr.
fn table_list(
    ui: &Ui,
    store: &Store,
    selector: &Selector,
    now: &Now,
    failures: &mut Vec<(String, String)>,
    verbose: bool,
) -> Result<(), super::Failure> {
    let limit = selector.context_limit;
    let ids = output::Ids::new(ui, store);
    let mut t = table::Grid::new(&COLUMNS);
    t.collapse_constant(&["PROVIDER", "MODEL"]);
    let mut rows = 0usize;
    let mut skipped = output::skips::Skips::default();
    let mut compacted = CompactedInWindow::read(store, selector, now)?;
    selector.run(store, now, |o| {
        match o {
            Outcome::Selected { meta, .. } => {
                rows += 1;
                compacted.seen(&meta.id);
                if let Err(e) = meta.updated() {
                    failures.push((meta.id.clone(), e.to_string()));
                }
                t.row(table_row(&ids, &meta, limit, now));
            }
            Outcome::Skipped {
                meta, why, summary, ..
            } => {
                compacted.seen(&meta.id);
                skipped.add(summary, &meta.id, &why)
            }
            Outcome::Failed { id, error, .. } => {
                compacted.seen(&id);
                failures.push((id, error))
            }
        }
        true
    })?;
    if rows > 0 {
        output::out(&t.render(ui.style()))?;
    }
    // As `compact`: the table and its TOTAL on stdout, the skipped conversations on stderr.
    let file = store
        .path
        .file_name()
        .map(|f| f.to_string_lossy().into_owned())
        .unwrap_or_else(|| store.path.display().to_string());
    output::out(&format!(
        "TOTAL {} conversation(s) in {file}\n",
        table::thousands(rows),
    ))?;
    for line in skipped.lines(verbose, &ids) {
        ui.status(&line);
    }
    compacted.note(ui);
    Ok(())
}

/// On a narrow terminal the name keeps room (it is how a user recognizes a conversation);
/// the provider goes first (the model says it), and a model is cut from the front, keeping the
/// part that tells models apart (`…sonnet-4-6`, not `claude-…`).
const COLUMNS: [table::Col; 8] = [
    table::col("ID", Kind::Fixed, 0),
    table::col("NAME", Kind::Cut, 8).min(20),
    table::col("PROVIDER", Kind::Fixed, 2),
    table::col("MODEL", Kind::CutFront, 3).min(12),
    table::col("MSGS", Kind::Num, 5),
    table::col("STORED CTX", Kind::Num, 7),
    table::col("USE", Kind::Num, 9),
    table::col("UPDATED", Kind::Fixed, 6),
];

/// One table row: stored figures only (the agent's message count and last context size).
fn table_row(
    ids: &output::Ids,
    meta: &ConversationMeta,
    limit: Option<i64>,
    now: &chrono::DateTime<chrono::FixedOffset>,
) -> Vec<(String, table::Tone)> {
    let util = meta.utilization(limit);
    let tone = match util {
        Some(u) if u >= 0.9 => table::Tone::Bad,
        Some(u) if u >= 0.7 => table::Tone::Warn,
        _ => table::Tone::Plain,
    };
    vec![
        table::c(ids.show(&meta.id)),
        table::c(table::ellipsize(&list_name(meta), 40)),
        table::c(meta.provider.clone()),
        table::c(meta.model.clone().unwrap_or_default()),
        table::c(
            meta.message_count
                .map(|c| c.to_string())
                .unwrap_or_default(),
        ),
        table::c(
            meta.current_context
                .map(|c| table::thousands(c.max(0) as usize))
                .unwrap_or_default(),
        ),
        (util.map(table::percent).unwrap_or_else(|| "-".into()), tone),
        table::c(output::ago(now, &meta.updated_at)),
    ]
}

/// The NAME cell: a child session (a subagent's) is marked `↳ `, an archived one `[archived] `.
fn list_name(meta: &ConversationMeta) -> String {
    let name = meta.name.as_deref().unwrap_or("");
    let mut out = String::new();
    if meta.parent.is_some() {
        out.push_str("↳ ");
    }
    if meta.archived {
        out.push_str("[archived] ");
    }
    out.push_str(&first_line(name));
    out
}

/// The first line of a name (a title may hold several), with `…` when more follow.
pub fn first_line(name: &str) -> std::borrow::Cow<'_, str> {
    let t = name.trim_matches(['\n', '\r']);
    match t.split_once('\n') {
        Some((head, _)) => format!("{}…", head.trim_end()).into(),
        None => t.into(),
    }
}

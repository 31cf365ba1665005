//! `agent-db retire`: whole conversations moved into a cold file beside the store, selected as
//! `compact` selects them; `--dry-run` prints what would move.

use agent_db::error::exit;
use agent_db::gotime;
use agent_db::select::{Picked, Selector};
use agent_db::store::cold::{self, Cold};
use agent_db::store::retirement::{self, Outcome as Moved};
use agent_db::store::{lock, Store};
use agent_db::util::human_bytes;
use agent_db::Error;

use super::history::ask;
use super::CmdResult;
use crate::cli::RetireArgs;
use crate::output::{self, json, Ui};

/// A conversation the selection skipped, and why.
#[derive(serde::Serialize)]
struct Skipped {
    id: String,
    why: String,
}

pub fn run(ui: &Ui, store: Store, args: &RetireArgs) -> CmdResult {
    let selector = selection(&store, args)?;
    let now = gotime::now();
    let to = args
        .to
        .clone()
        .unwrap_or_else(|| cold::default_path(&store.path));
    let (ids, skipped) = select(&store, &selector, &now)?;
    let asks = !args.yes || args.dry_run;
    if asks || ids.is_empty() {
        let plans: Vec<Moved> = ids.iter().map(|id| plan_row(&store, id)).collect();
        if args.dry_run || ids.is_empty() {
            report(ui, args, &to, &plans, &skipped, true)?;
            return Ok(exit::OK);
        }
        let bytes: u64 = plans.iter().map(|p| p.bytes).sum();
        let question = format!(
            "move {} conversation(s) ({}) out of the store into {}? `agent-db restore ID` brings one back.",
            ids.len(),
            human_bytes(bytes),
            to.display()
        );
        if !ask(ui, args.yes, &question) {
            ui.status("nothing done");
            return Ok(exit::OK);
        }
    }
    bounded_heap();
    let _lock = lock::acquire(&store.path)?;
    let mut store = store;
    for note in retirement::recover(&store)? {
        ui.status(&note);
    }
    let mut cold = Cold::open(&to, true)?.ok_or_else(|| Error::MissingFile { path: to.clone() })?;
    let stamp = gotime::rfc3339_utc(&now);
    let (done, busy) = move_all(&mut store, &mut cold, &ids, &stamp);
    let failed = done.iter().any(|r| r.status.starts_with("failed"));
    report(ui, args, &to, &done, &skipped, false)?;
    if busy {
        // The one busy error every command reports (exit 9), after the report of what was done.
        return Err(Error::Busy {
            path: store.path.clone(),
            holder: None,
        }
        .into());
    }
    Ok(if failed { exit::PARTIAL } else { exit::OK })
}

/// Blocks of 512 KiB and more (large cells, a table's rows) are mapped and unmapped on their
/// own from here on. glibc's default raises that threshold to the largest block freed (up to
/// 32 MiB) and keeps what each batch's threads freed, so a run's peak memory grew with the
/// file (generated stores, peak RSS at 0.5 / 2 GB: kodelet 47 / 53 MB, opencode 59 / 69; with
/// this 45 / 44 and 42 / 48). The cost: page faults, about 0.1 s of system time per 0.5 GB.
fn bounded_heap() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only sets a tuning parameter of the allocator.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 512 << 10);
    }
}

/// Retire `ids` in batches ([`retirement::retire_all`]): one row per ID, in order, and whether
/// another process held the store (then nothing more started, as in `compact`).
fn move_all(store: &mut Store, cold: &mut Cold, ids: &[String], now: &str) -> (Vec<Moved>, bool) {
    match retirement::retire_all(store, cold, ids, now) {
        Ok(done) => done,
        Err(Error::Busy { .. }) => (ids.iter().map(|id| not_started(id)).collect(), true),
        Err(e) => (ids.iter().map(|id| failed_row(id, &e)).collect(), false),
    }
}

/// The selectors, with ID prefixes resolved, validated (as `compact`'s).
fn selection(store: &Store, args: &RetireArgs) -> Result<Selector, Error> {
    let mut selector = args.select.selector(&args.positional);
    selector.ids = store.resolve_ids(&selector.ids)?;
    if selector.is_empty() {
        return Err(Error::Usage(
            "choose conversations to retire: ID, --id, --follow, --all-over, --older-than, --since or --provider"
                .into(),
        ));
    }
    selector.validate()?;
    Ok(selector)
}

/// The selected conversations' IDs, and the ones the selection skipped (the idle guard, the
/// agent's own rules) with why.
fn select(
    store: &Store,
    selector: &Selector,
    now: &chrono::DateTime<chrono::FixedOffset>,
) -> Result<(Vec<String>, Vec<Skipped>), Error> {
    let (mut ids, mut skipped) = (Vec::new(), Vec::new());
    // Only the IDs ([`Selector::run_ids`]): no conversation's metadata is built per row.
    selector.run_ids(store, now, |p| {
        match p {
            Picked::Selected(id) => ids.push(id.to_string()),
            Picked::Skipped { id, why, .. } => skipped.push(Skipped {
                id: id.to_string(),
                why: why.to_string(),
            }),
            Picked::Failed { id, error } => skipped.push(Skipped {
                id: id.to_string(),
                why: error.to_string(),
            }),
        }
        true
    })?;
    Ok((ids, skipped))
}

/// What retiring `id` would move.
fn plan_row(store: &Store, id: &str) -> Moved {
    let (status, m) = match retirement::plan(store, id) {
        Ok(Some(m)) => ("would retire".to_string(), Some(m)),
        Ok(None) => ("skipped: not in the store".to_string(), None),
        Err(e) => (format!("failed: {e}"), None),
    };
    Moved {
        conversation: id.to_string(),
        status,
        conversations: m.as_ref().map(|m| m.ids.clone()).unwrap_or_default(),
        rows: m.as_ref().map_or(0, |m| m.rows()),
        bytes: m.as_ref().map_or(0, |m| m.bytes()),
        compaction_id: None,
    }
}

fn failed_row(id: &str, e: &Error) -> Moved {
    row(id, format!("failed: {e}"))
}

/// A conversation left alone because another process holds the store's lock.
fn not_started(id: &str) -> Moved {
    row(id, retirement::NOT_STARTED.to_string())
}

fn row(id: &str, status: String) -> Moved {
    Moved {
        conversation: id.to_string(),
        status,
        conversations: Vec::new(),
        rows: 0,
        bytes: 0,
        compaction_id: None,
    }
}

/// The `--json` document, written row by row from the outcomes (no copy of the whole
/// document in memory: a run over thousands of conversations stays flat).
fn json_report(
    to: &std::path::Path,
    rows: &[Moved],
    skipped: &[Skipped],
    dry_run: bool,
) -> std::io::Result<()> {
    let out = std::io::BufWriter::with_capacity(1 << 16, std::io::stdout().lock());
    let head = [
        ("dry_run", serde_json::Value::from(dry_run)),
        ("cold_path", to.display().to_string().into()),
    ];
    let mut doc = json::Stream::start(out, "retire", &head, "conversations", json::Layout::Lines)?;
    let mut line = Vec::with_capacity(512);
    for r in rows {
        line.clear();
        serde_json::to_writer(&mut line, r).map_err(std::io::Error::other)?;
        doc.item_bytes(&line)?;
    }
    let skipped = serde_json::to_value(skipped).map_err(std::io::Error::other)?;
    doc.finish(&[("skipped", skipped)])
}

/// One line per conversation and a total; `--json` the same as fields.
fn report(
    ui: &Ui,
    args: &RetireArgs,
    to: &std::path::Path,
    rows: &[Moved],
    skipped: &[Skipped],
    dry_run: bool,
) -> std::io::Result<()> {
    if args.json {
        return json_report(to, rows, skipped, dry_run);
    }
    let mut o = String::new();
    for r in rows {
        let children = r.conversations.len().saturating_sub(1);
        let with = if children > 0 {
            format!(", with {children} child conversation(s)")
        } else {
            String::new()
        };
        o.push_str(&format!(
            "{} {}: {} rows, {}{with}\n",
            r.status,
            r.conversation,
            r.rows,
            human_bytes(r.bytes)
        ));
    }
    for s in skipped {
        o.push_str(&format!("skipped {}: {}\n", s.id, s.why));
    }
    let moved: Vec<_> = rows
        .iter()
        .filter(|r| r.status == "retired" || r.status == "would retire")
        .collect();
    let bytes: u64 = moved.iter().map(|r| r.bytes).sum();
    let verb = if dry_run { "would move" } else { "moved" };
    o.push_str(&format!(
        "{verb} {} conversation(s), {}, to {}\n",
        moved.len(),
        human_bytes(bytes),
        to.display()
    ));
    if !ui.quiet || rows.iter().any(|r| r.status.starts_with("failed")) {
        output::out(&o)?;
    }
    if dry_run {
        ui.status("dry run: nothing was moved");
    } else if !moved.is_empty() {
        ui.status("`agent-db restore ID` brings one back; `agent-db vacuum` gives the space back to the file system");
    }
    Ok(())
}

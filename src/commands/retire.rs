//! `agent-db retire`: whole conversations moved into a cold file beside the store, selected as
//! `compact` selects them; `--dry-run` prints what would move.

use agent_db::error::exit;
use agent_db::gotime;
use agent_db::select::{Outcome, Selector};
use agent_db::store::cold::{self, Cold};
use agent_db::store::retire as retirement_rows;
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

/// Retire `ids` in batches (at most [`retirement::BATCH_CONVERSATIONS`] conversations or
/// [`retirement::BATCH_BYTES`] of rows each): one row per ID, in order, and whether another
/// process held the store's lock (then nothing more started, as in `compact`).
fn move_all(store: &mut Store, cold: &mut Cold, ids: &[String], now: &str) -> (Vec<Moved>, bool) {
    let mut done: Vec<Option<Moved>> = vec![None; ids.len()];
    let mut batch = Batch::default();
    let mut busy = false;
    let mut i = 0;
    while i < ids.len() && !busy {
        let id = &ids[i];
        match retirement::plan(store, id) {
            // A conversation of the batch moves with this one (or this one with it): the
            // batch goes first, then this one is read again.
            Ok(Some(m)) if m.ids.iter().any(|c| batch.ids.contains(c)) => {
                busy = batch.flush(store, cold, now, &mut done);
                continue;
            }
            Ok(Some(m)) => batch.push(i, m),
            Ok(None) => {
                done[i] = Some(row(
                    id,
                    "skipped: not in the store (retired with its parent?)".into(),
                ))
            }
            Err(Error::Busy { .. }) => busy = true,
            Err(e) => done[i] = Some(failed_row(id, &e)),
        }
        if !busy && batch.full() {
            busy = batch.flush(store, cold, now, &mut done);
        }
        i += 1;
    }
    if !busy {
        busy = batch.flush(store, cold, now, &mut done);
    }
    let rows = done
        .into_iter()
        .zip(ids)
        .map(|(r, id)| r.unwrap_or_else(|| not_started(id)))
        .collect();
    (rows, busy)
}

/// The conversations read and not yet moved: their places in the selection and their rows.
#[derive(Default)]
struct Batch {
    at: Vec<usize>,
    moved: Vec<retirement_rows::Moved>,
    ids: std::collections::HashSet<String>,
    bytes: u64,
}

impl Batch {
    fn push(&mut self, at: usize, m: retirement_rows::Moved) {
        self.bytes += m.bytes();
        self.ids.extend(m.ids.iter().cloned());
        self.at.push(at);
        self.moved.push(m);
    }

    fn full(&self) -> bool {
        self.moved.len() >= retirement::BATCH_CONVERSATIONS || self.bytes >= retirement::BATCH_BYTES
    }

    /// Retire the batch, its rows into `done`, and empty it; whether the store was busy.
    fn flush(
        &mut self,
        store: &mut Store,
        cold: &mut Cold,
        now: &str,
        done: &mut [Option<Moved>],
    ) -> bool {
        let batch = std::mem::take(self);
        match retirement::retire_batch(store, cold, &batch.moved, now) {
            Ok(outs) => {
                for (at, o) in batch.at.into_iter().zip(outs) {
                    done[at] = Some(o);
                }
                false
            }
            // Nothing of the batch started; it and the rest are reported not started.
            Err(Error::Busy { .. }) => true,
            Err(e) => {
                // One batch's failure is its conversations' own.
                for (at, m) in batch.at.into_iter().zip(&batch.moved) {
                    done[at] = Some(failed_row(&m.ids[0], &e));
                }
                false
            }
        }
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
    selector.run(store, now, |o| {
        match o {
            Outcome::Selected { meta, .. } => ids.push(meta.id),
            Outcome::Skipped { meta, why, .. } => skipped.push(Skipped { id: meta.id, why }),
            Outcome::Failed { id, error, .. } => skipped.push(Skipped { id, why: error }),
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
    row(id, "not started: the store is busy".to_string())
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
        return json::print(
            "retire",
            serde_json::json!({"dry_run": dry_run, "cold_path": to.display().to_string(),
                "conversations": rows, "skipped": skipped}),
        );
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

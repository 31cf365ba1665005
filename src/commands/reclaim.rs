//! `agent-db reclaim`: what the agent never reads again, by category, removed a bounded batch of
//! conversations per transaction with the rows archived for `restore`; `--dry-run` prints the bytes only.

use std::time::Duration;

use agent_db::archive::vacuum;
use agent_db::error::exit;
use agent_db::gotime;
use agent_db::store::{lock, reclaim, Store};
use agent_db::util::human_bytes;

use super::history::{ask, vacuum_report};
use super::CmdResult;
use crate::cli::ReclaimArgs;
use crate::output::{self, json, Ui};

/// The idle guard when `--idle` is not given.
const IDLE: Duration = Duration::from_secs(600);

fn lines(totals: &[reclaim::CategoryTotal], verb: &str) -> String {
    let mut o = String::new();
    for t in totals {
        o.push_str(&format!(
            "{verb} {}: {} in {} rows of {} conversation(s)\n",
            t.category,
            human_bytes(t.bytes),
            t.rows,
            t.conversations
        ));
    }
    o
}

pub fn run(ui: &Ui, store: Store, args: &ReclaimArgs) -> CmdResult {
    let _lock = if args.dry_run {
        None
    } else {
        Some(lock::acquire(&store.path)?)
    };
    let mut store = store;
    let now = gotime::now();
    let idle = args.idle.unwrap_or(IDLE);
    let cutoff = (now - chrono::Duration::from_std(idle).unwrap_or_default()).timestamp_millis();
    let units = reclaim::plan(&store, cutoff)?;
    let would = reclaim::totals(&units);
    if args.dry_run || units.is_empty() {
        report_plan(ui, &store, args, &units, &would)?;
        return Ok(exit::OK);
    }
    if !ask(ui, args.yes, &question(&units, &would)) {
        ui.status("nothing done");
        return Ok(exit::OK);
    }
    let stamp = gotime::rfc3339_utc(&now);
    let (removed, failed) = remove_all(&mut store, &units, cutoff, &stamp);
    let done: Vec<reclaim::Planned> = units
        .iter()
        .zip(&removed)
        .filter(|(_, r)| r.status == "removed")
        .map(|(u, _)| u.clone())
        .collect();
    let totals = reclaim::totals(&done);
    let path = store.path.clone();
    drop(store);
    let v = if args.vacuum {
        Some(vacuum::vacuum(&path)?)
    } else {
        None
    };
    report_removed(ui, args, &totals, &removed, failed, v.as_ref())?;
    Ok(if failed { exit::PARTIAL } else { exit::OK })
}

/// `--dry-run`, or nothing to reclaim: what would be removed.
fn report_plan(
    ui: &Ui,
    store: &Store,
    args: &ReclaimArgs,
    units: &[reclaim::Planned],
    would: &[reclaim::CategoryTotal],
) -> std::io::Result<()> {
    // Why this agent has nothing agent-db may remove, when that is so (docs/stores.md).
    let none = reclaim::nothing_removable(store);
    if args.json {
        json::print(
            "reclaim",
            serde_json::json!({"dry_run": args.dry_run, "categories": would, "removed": [], "nothing_removable": none}),
        )?;
    } else if units.is_empty() {
        if !ui.quiet || args.dry_run {
            output::out(&match none {
                Some(why) => format!(
                    "{}: nothing agent-db may remove: {why} (see docs/stores.md)\n",
                    store.kind.name()
                ),
                None => format!("nothing to reclaim in this {} store\n", store.kind.name()),
            })?;
        }
    } else {
        output::out(&format!(
            "{}dry run: nothing was removed\n",
            lines(would, "would remove")
        ))?;
    }
    Ok(())
}

/// The confirmation question: how much, from how many conversations, of which categories.
fn question(units: &[reclaim::Planned], would: &[reclaim::CategoryTotal]) -> String {
    let total: u64 = would.iter().map(|t| t.bytes).sum();
    format!(
        "remove {} from {} conversation(s) ({})? `agent-db restore` puts them back.",
        human_bytes(total),
        units.len(),
        would
            .iter()
            .map(|t| t.category)
            .collect::<Vec<_>>()
            .join(", ")
    )
}

/// Remove every unit, a bounded batch of them per transaction; one unit's failure is its own
/// (a failed transaction fails its batch, whose units are then reported failed). Whether any
/// failed.
fn remove_all(
    store: &mut Store,
    units: &[reclaim::Planned],
    cutoff: i64,
    stamp: &str,
) -> (Vec<reclaim::Removed>, bool) {
    let mut removed = Vec::with_capacity(units.len());
    let mut failed = false;
    let failure = |u: &reclaim::Planned, e: &dyn std::fmt::Display| reclaim::Removed {
        category: u.category,
        conversation: u.conversation.clone(),
        status: format!("failed: {e}"),
        compaction_id: None,
        rows: 0,
        bytes: 0,
    };
    let mut rest = units;
    while !rest.is_empty() {
        let n = batch_len(rest);
        let (batch, tail) = rest.split_at(n);
        rest = tail;
        match reclaim::remove_batch(store, batch, cutoff, stamp) {
            Ok(outcomes) => {
                for (u, r) in batch.iter().zip(outcomes) {
                    match r {
                        Ok(r) => removed.push(r),
                        Err(e) => {
                            failed = true;
                            removed.push(failure(u, &e));
                        }
                    }
                }
            }
            Err(e) => {
                failed = true;
                removed.extend(batch.iter().map(|u| failure(u, &e)));
            }
        }
    }
    (removed, failed)
}

/// How many of `units` the next transaction takes ([`reclaim::BATCH_UNITS`] and
/// [`reclaim::BATCH_BYTES`]; at least one).
fn batch_len(units: &[reclaim::Planned]) -> usize {
    let mut bytes = 0u64;
    let mut n = 0;
    for u in units.iter().take(reclaim::BATCH_UNITS) {
        if n > 0 && bytes + u.bytes > reclaim::BATCH_BYTES {
            break;
        }
        bytes += u.bytes;
        n += 1;
    }
    n
}

/// What was removed, skipped or failed, and the vacuum's result if `--vacuum` ran one.
fn report_removed(
    ui: &Ui,
    args: &ReclaimArgs,
    totals: &[reclaim::CategoryTotal],
    removed: &[reclaim::Removed],
    failed: bool,
    v: Option<&vacuum::Vacuumed>,
) -> std::io::Result<()> {
    if args.json {
        json::print(
            "reclaim",
            serde_json::json!({"dry_run": false, "categories": totals, "removed": removed, "vacuum": v, "nothing_removable": null}),
        )?;
        return Ok(());
    }
    let mut o = lines(totals, "removed");
    for r in removed.iter().filter(|r| r.status != "removed") {
        o.push_str(&format!(
            "{} {}: {}\n",
            r.category, r.conversation, r.status
        ));
    }
    if !ui.quiet || failed {
        output::out(&o)?;
    }
    match v {
        Some(v) => vacuum_report(v)?,
        None => ui.status(
            "SQLite reuses the freed pages; `agent-db vacuum` gives them back to the file system",
        ),
    }
    Ok(())
}

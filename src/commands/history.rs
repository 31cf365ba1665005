//! `history`, `restore`, `prune-archive` and `vacuum`: the audit log, undo, and getting space
//! back.

use agent_db::archive::{restore, stats, vacuum};
use agent_db::error::exit;
use agent_db::gotime;
use agent_db::store::{lock, prefix, retirement, Store};
use agent_db::util::human_bytes;
use agent_db::Error;

use super::CmdResult;
use crate::cli::{HistoryArgs, PruneArchiveArgs, RestoreArgs, VacuumArgs};
use crate::output::table::{self, Kind, Tone};
use crate::output::{self, json, Ui};

/// A conversation named on the command line: a full ID or a unique prefix, looked up among the
/// store's conversations and then the audit log (a compacted conversation may since be gone).
/// An ID found in neither is not found (exit 5).
fn resolve_conversation(store: &Store, input: &str) -> Result<String, Error> {
    match store.resolve_id(input) {
        Ok(id) => Ok(id),
        Err(Error::UnknownId { .. }) if store.has_agent_tables()? => {
            prefix::resolve_in(store, "agent_db_compactions", "conversation_id", input)?
                .ok_or_else(|| prefix::unknown_id(store, input))
        }
        Err(e) => Err(e),
    }
}

const HISTORY_COLUMNS: [table::Col; 10] = [
    table::col("#", Kind::Num, 0),
    table::col("CONVERSATION", Kind::Fixed, 0),
    table::col("NAME", Kind::Cut, 6),
    table::col("WHEN", Kind::Fixed, 7),
    table::col("WHY", Kind::Fixed, 2),
    table::col("STRATEGY", Kind::Fixed, 3),
    table::col("COUNTED MSGS", Kind::Fixed, 4),
    table::col("COUNTED TOKENS", Kind::Fixed, 5),
    table::col("KEPT", Kind::Fixed, 8),
    table::col("STATE", Kind::Fixed, 9),
];

pub fn history(ui: &Ui, store: &Store, args: &HistoryArgs) -> CmdResult {
    let id = match &args.id {
        Some(i) => Some(resolve_conversation(store, i)?),
        None => None,
    };
    let mut rows = restore::history(store, id.as_deref())?;
    if let Some(d) = args.since {
        let since = gotime::now() - chrono::Duration::from_std(d).unwrap_or_default();
        rows.retain(|c| gotime::parse(&c.compacted_at).is_ok_and(|t| t >= since));
    }
    if let Some(n) = args.limit {
        // The most recent N, still oldest first.
        let cut = rows.len().saturating_sub(n);
        rows.drain(..cut);
    }
    if args.json {
        return json::print("history", serde_json::json!({"compactions": rows}))
            .map(|_| exit::OK)
            .map_err(Into::into);
    }
    if rows.is_empty() {
        if let Some(d) = args.since {
            ui.status(&format!(
                "no compactions within the last {}",
                humantime::format_duration(d)
            ));
            return Ok(exit::OK);
        }
        match &id {
            Some(id) => ui.status(&format!("conversation {id}: no compactions recorded")),
            None => ui.status(&format!(
                "no compactions recorded in {}",
                store.path.display()
            )),
        }
        return Ok(exit::OK);
    }
    let now = gotime::now();
    let ids = output::Ids::new(ui, store);
    let mut t = table::Grid::new(&HISTORY_COLUMNS);
    for c in &rows {
        let state = match (&c.restored_at, &c.archive_pruned_at) {
            (Some(at), _) => (format!("restored {}", output::ago(&now, at)), Tone::Dim),
            (None, Some(_)) => ("archive pruned".into(), Tone::Warn),
            // What `restore` would do: without --force it refuses a compaction whose
            // conversation changed after it (the agent or a later compaction wrote to it).
            _ if restore::needs_force(store, c.id)? => ("changed since".into(), Tone::Warn),
            _ => ("restorable".into(), Tone::Good),
        };
        let name = store
            .meta(&c.conversation_id)
            .ok()
            .and_then(|m| m.name)
            .unwrap_or_default();
        let kept = c.retention.as_ref().map_or_else(
            || "unknown".into(),
            |r| crate::output::report_table::kept_cell(&mut t, r),
        );
        t.row(vec![
            table::c(c.id.to_string()),
            table::c(ids.show(&c.conversation_id)),
            table::c(table::ellipsize(&name, 40)),
            table::c(output::ago(&now, &c.compacted_at)),
            table::c(c.reason.clone()),
            table::c(c.strategy.clone()),
            table::c(format!("{} → {}", c.messages_before, c.messages_after)),
            table::c(format!(
                "{} → {}",
                table::thousands(c.tokens_before.max(0) as usize),
                table::thousands(c.tokens_after.max(0) as usize)
            )),
            table::c(kept),
            state,
        ]);
    }
    output::out(&t.render(ui.style()))?;
    Ok(exit::OK)
}

pub fn restore(ui: &Ui, store: Store, args: &RestoreArgs) -> CmdResult {
    // A dry run writes nothing and takes no lock (as `compact --dry-run`).
    let _lock = if args.dry_run {
        None
    } else {
        Some(lock::acquire(&store.path)?)
    };
    let mut store = store;
    if let Some(r) = retired(&store, args)? {
        return restore_cold(ui, store, &r, args);
    }
    let now_text = gotime::rfc3339_utc(&gotime::now());
    let (ids, nothing_to_do) = to_restore(&store, args)?;
    if !ids.is_empty() && !args.dry_run {
        // Tables an older agent-db made are upgraded first (the archive's reader needs them);
        // tables a newer one made are refused.
        store.ensure_agent_tables()?;
    }
    let mut results = Vec::new();
    for n in ids {
        results.push(if args.dry_run {
            restore::preview(&store, n, args.force, &now_text)?
        } else {
            let now = gotime::rfc3339_utc(&gotime::now());
            restore::restore(&mut store, n, args.force, &now)?
        });
    }
    let refused = results.iter().filter(|r| !r.ok).count();
    report_restored(ui, args, &results, nothing_to_do.as_deref())?;
    Ok(if refused > 0 { exit::REFUSED } else { exit::OK })
}

/// `restore`'s report: `--json`'s document, else the lines.
fn report_restored(
    ui: &Ui,
    args: &RestoreArgs,
    results: &[restore::Restored],
    nothing_to_do: Option<&str>,
) -> Result<(), super::Failure> {
    if args.json {
        json::print(
            "restore",
            serde_json::json!({"dry_run": args.dry_run, "results": results}),
        )?;
    } else {
        say_restored(ui, args, results, nothing_to_do)?;
    }
    Ok(())
}

/// The retired conversation `restore ID` (or `--compaction N` of its retirement) names.
fn retired(store: &Store, args: &RestoreArgs) -> Result<Option<retirement::Retirement>, Error> {
    if args.all_since.is_some() {
        return Ok(None);
    }
    match (args.compaction, &args.id) {
        (Some(n), _) => retirement::by_audit_row(store, n),
        (None, Some(id)) => retirement::retired(store, id),
        (None, None) => Ok(None),
    }
}

/// Bring a retired conversation back from its cold file (`--dry-run`: say so).
fn restore_cold(
    ui: &Ui,
    mut store: Store,
    r: &retirement::Retirement,
    args: &RestoreArgs,
) -> CmdResult {
    let cold = r.cold_path.display();
    let status = if args.dry_run {
        format!("would be brought back from {cold}")
    } else {
        store.ensure_agent_tables()?;
        let now = gotime::rfc3339_utc(&gotime::now());
        let o = retirement::restore(&mut store, r, &now)?;
        format!("restored from {cold} ({} rows)", o.rows)
    };
    let results = vec![restore::Restored {
        compaction_id: r.compaction_id.unwrap_or_default(),
        conversation_id: r.conversation_id.clone(),
        status,
        ok: true,
    }];
    report_restored(ui, args, &results, None)?;
    Ok(exit::OK)
}

/// The compactions a restore undoes (`--all-since`, `--compaction N`, or a conversation's
/// latest), and, when there are none but that is not an error, why there is nothing to do.
fn to_restore(store: &Store, args: &RestoreArgs) -> Result<(Vec<i64>, Option<String>), Error> {
    if let Some(d) = args.all_since {
        let since = gotime::now() - chrono::Duration::from_std(d).unwrap_or_default();
        return Ok((restore::since(store, &gotime::rfc3339_utc(&since))?, None));
    }
    if let Some(n) = args.compaction {
        // A compaction's number is unique: the conversation is optional, and when given it
        // must be that compaction's.
        let c = restore::get(store, n)?.ok_or_else(|| {
            Error::NotFound(format!(
                "compaction {n}: not found in the audit log (`agent-db history` lists them)"
            ))
        })?;
        if let Some(given) = &args.id {
            let id = resolve_conversation(store, given)?;
            if c.conversation_id != id {
                return Err(Error::Usage(format!(
                    "compaction {n} belongs to conversation {}, not {id}",
                    c.conversation_id
                )));
            }
        }
        return Ok((vec![n], None));
    }
    let id = resolve_conversation(store, args.id.as_deref().unwrap_or_default())?;
    match restore::latest_for(store, &id)? {
        Some(n) => Ok((vec![n], None)),
        // Every compaction of it is restored already: nothing to do (exit 0). One never
        // compacted is not found (exit 5).
        None if !restore::history(store, Some(&id))?.is_empty() => Ok((
            Vec::new(),
            Some(format!(
                "conversation {id}: nothing to do: every compaction of it is restored (see `agent-db history {id}`)"
            )),
        )),
        None => Err(Error::NotFound(format!(
            "conversation {id}: no compaction to restore (see `agent-db history {id}`)"
        ))),
    }
}

/// What a restore did (or, in a dry run, would do), one line per compaction.
fn say_restored(
    ui: &Ui,
    args: &RestoreArgs,
    results: &[restore::Restored],
    nothing_to_do: Option<&str>,
) -> Result<(), super::Failure> {
    if results.is_empty() {
        ui.status(nothing_to_do.unwrap_or("nothing to restore"));
    }
    for r in results {
        let line = format!(
            "compaction {} of {}: {}",
            r.compaction_id, r.conversation_id, r.status
        );
        if !r.ok {
            ui.alert(&line);
        } else if args.dry_run || !ui.quiet {
            // --quiet: a restore that went well prints nothing; a preview is what was asked.
            output::out(&format!("{line}\n"))?;
        }
    }
    if args.dry_run && !results.is_empty() {
        ui.status("dry run: nothing was restored");
    }
    Ok(())
}

/// Ask on a terminal; `--yes`, and runs without a terminal, never ask.
pub(super) fn ask(ui: &Ui, yes: bool, question: &str) -> bool {
    yes || !ui.interactive() || ui.ask(&[], question)
}

pub fn prune_archive(ui: &Ui, store: Store, args: &PruneArchiveArgs) -> CmdResult {
    let _lock = if args.dry_run {
        None
    } else {
        Some(lock::acquire(&store.path)?)
    };
    let mut store = store;
    let now = gotime::now();
    let before = now - chrono::Duration::from_std(args.older_than).unwrap_or_default();
    let path = store.path.clone();
    let would = stats::prunable(&store, &gotime::rfc3339_utc(&before))?;
    let report = |p: &restore::Pruned, dry_run: bool| -> std::io::Result<()> {
        if args.json {
            return json::print(
                "prune-archive",
                serde_json::json!({"dry_run": dry_run, "pruned": p}),
            );
        }
        let (verb, tail) = if dry_run {
            ("would prune", "; dry run: nothing was deleted")
        } else {
            ("pruned", "")
        };
        output::out(&format!(
            "{verb} the archives of {} compaction(s): {} values, {}; those compactions can no longer be restored{tail}\n",
            p.compactions,
            p.archived_values,
            human_bytes(p.bytes.max(0) as u64)
        ))
    };
    if args.dry_run || would.compactions == 0 {
        // --quiet: nothing to prune prints nothing; a dry run's preview is what was asked.
        if args.dry_run || args.json || !ui.quiet {
            report(&would, args.dry_run)?;
        }
        return Ok(exit::OK);
    }
    let question = format!(
        "delete the archived originals of {} compaction(s) made before {} ({})? They can no longer be restored.",
        would.compactions,
        gotime::rfc3339_utc(&before),
        human_bytes(would.bytes.max(0) as u64)
    );
    if !ask(ui, args.yes, &question) {
        ui.status("nothing done");
        return Ok(exit::OK);
    }
    let p = restore::prune_archive(
        &mut store,
        &gotime::rfc3339_utc(&before),
        &gotime::rfc3339_utc(&now),
    )?;
    if args.json || !ui.quiet {
        report(&p, false)?;
    }
    drop(store);
    if args.vacuum {
        let v = vacuum::vacuum(&path)?;
        if !args.json && (!ui.quiet || v.integrity_check != "ok") {
            vacuum_report(&v)?;
        }
    } else {
        ui.status(
            "SQLite reuses the freed pages; `agent-db vacuum` gives them back to the file system",
        );
    }
    Ok(exit::OK)
}

pub(super) fn vacuum_report(v: &vacuum::Vacuumed) -> std::io::Result<()> {
    output::out(&format!(
        "vacuumed: {} → {} ({} free pages given back); journal_mode {}, quick_check {}\n",
        human_bytes(v.bytes_before),
        human_bytes(v.bytes_after),
        v.free_pages_before,
        v.journal_mode,
        v.integrity_check
    ))
}

/// `agent-db vacuum`: the store is recognized first (`store`), then reopened alone.
pub fn vacuum(ui: &Ui, store: Store, args: &VacuumArgs) -> CmdResult {
    let json = args.json;
    if args.dry_run {
        let f = vacuum::free_space(&store)?;
        if json {
            json::print(
                "vacuum",
                serde_json::json!({"dry_run": true, "free_pages": f.free_pages, "free_bytes": f.free_bytes}),
            )?;
        } else {
            output::out(&format!(
                "would give back {} free pages ({}); dry run: nothing was changed\n",
                f.free_pages,
                human_bytes(f.free_bytes.max(0) as u64)
            ))?;
        }
        return Ok(exit::OK);
    }
    let path = store.path.clone();
    // Our own connection would count as "another connection" to the exclusive lock.
    drop(store);
    if let Some(into) = &args.into {
        let v = vacuum::vacuum_into(&path, into)?;
        if json {
            json::print("vacuum", serde_json::json!({"vacuum_into": v}))?;
        } else if !ui.quiet || v.integrity_check != "ok" {
            output::out(&format!(
                "wrote {} ({} → {}); the store is unchanged; quick_check {}\n",
                v.into,
                human_bytes(v.bytes_before),
                human_bytes(v.bytes_after),
                v.integrity_check
            ))?;
        }
        return Ok(if v.integrity_check == "ok" {
            exit::OK
        } else {
            exit::STORE
        });
    }
    let _lock = lock::acquire(&path)?;
    let size = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
    let (bar, progress) = output::progress::vacuum_bar(ui, json, size).unzip();
    let v = vacuum::vacuum_with(&path, progress);
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    let v = v?;
    if json {
        json::print("vacuum", serde_json::json!({"vacuum": v}))?;
    } else if !ui.quiet || v.integrity_check != "ok" {
        // --quiet: a vacuum that went well prints nothing.
        vacuum_report(&v)?;
    }
    Ok(if v.integrity_check == "ok" {
        exit::OK
    } else {
        exit::STORE
    })
}

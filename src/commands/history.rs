//! `history`, `restore` and `prune-archive`: the audit log and undo.

use agent_db::error::exit;
use agent_db::gotime;
use agent_db::store::{lock, restore, Store};
use agent_db::Error;

use super::CmdResult;
use crate::cli::{HistoryArgs, PruneArchiveArgs, RestoreArgs};
use crate::output::{self, table, Ui};

pub fn history(store: &Store, args: &HistoryArgs) -> CmdResult {
    let rows = restore::history(&store.conn, &store.path, args.id.as_deref())?;
    if args.json {
        let doc = serde_json::json!({
            "version": super::list::JSON_VERSION,
            "command": "history",
            "compactions": rows,
        });
        output::out(&format!(
            "{}\n",
            serde_json::to_string_pretty(&doc).unwrap_or_default()
        ))?;
        return Ok(exit::OK);
    }
    if rows.is_empty() {
        eprintln!("no compactions recorded in {}", store.path.display());
        return Ok(exit::OK);
    }
    let mut t = table::new(
        &[
            "#",
            "CONVERSATION",
            "WHEN",
            "WHY",
            "STRATEGY",
            "MESSAGES",
            "TOKENS",
            "STATE",
        ],
        &[0],
    );
    for c in &rows {
        let state = match (&c.restored_at, &c.archive_pruned_at) {
            (Some(at), _) => format!("restored {at}"),
            (None, Some(_)) => "archive pruned".into(),
            _ => "restorable".into(),
        };
        t.add_row(vec![
            c.id.to_string(),
            c.conversation_id.clone(),
            c.compacted_at.clone(),
            c.reason.clone(),
            c.strategy.clone(),
            format!("{} → {}", c.messages_before, c.messages_after),
            format!(
                "{} → {}",
                table::thousands(c.tokens_before.max(0) as usize),
                table::thousands(c.tokens_after.max(0) as usize)
            ),
            state,
        ]);
    }
    output::out(&format!("{t}\n"))?;
    Ok(exit::OK)
}

pub fn restore(ui: &Ui, store: Store, args: &RestoreArgs) -> CmdResult {
    let _lock = lock::acquire(&store.path)?;
    let mut store = store;
    let path = store.path.clone();
    let ids: Vec<i64> = if let Some(d) = args.all_since {
        let since = gotime::now() - chrono::Duration::from_std(d).unwrap_or_default();
        restore::since(&store.conn, &path, &gotime::rfc3339_utc(&since))?
    } else {
        let id = args.id.as_deref().unwrap_or_default();
        match args.compaction {
            Some(n) => {
                let c = restore::get(&store.conn, &path, n)?.ok_or_else(|| {
                    Error::Refused(format!("compaction {n}: not found in the audit log"))
                })?;
                if c.conversation_id != id {
                    return Err(Error::Usage(format!(
                        "compaction {n} belongs to conversation {}, not {id}",
                        c.conversation_id
                    ))
                    .into());
                }
                vec![n]
            }
            None => match restore::latest_for(&store.conn, &path, id)? {
                Some(n) => vec![n],
                None => {
                    return Err(Error::NotFound(format!(
                        "conversation {id}: no compaction to restore (see `agent-db history {id}`)"
                    ))
                    .into())
                }
            },
        }
    };
    let mut results = Vec::new();
    for n in ids {
        let now = gotime::rfc3339_utc(&gotime::now());
        results.push(restore::restore(
            &mut store.conn,
            &path,
            n,
            args.force,
            &now,
        )?);
    }
    let refused = results.iter().filter(|r| !r.ok).count();
    if args.json {
        let doc = serde_json::json!({"version": super::list::JSON_VERSION, "command": "restore", "results": results});
        output::out(&format!(
            "{}\n",
            serde_json::to_string_pretty(&doc).unwrap_or_default()
        ))?;
    } else {
        if results.is_empty() {
            ui.status("nothing to restore");
        }
        for r in &results {
            let line = format!(
                "compaction {} of {}: {}",
                r.compaction_id, r.conversation_id, r.status
            );
            if r.ok {
                output::out(&format!("{line}\n"))?;
            } else {
                eprintln!("agent-db: {line}");
            }
        }
    }
    Ok(if refused > 0 { exit::REFUSED } else { exit::OK })
}

pub fn prune_archive(ui: &Ui, store: Store, args: &PruneArchiveArgs) -> CmdResult {
    let _lock = lock::acquire(&store.path)?;
    let mut store = store;
    if !store.has_agent_tables()? {
        if args.json {
            let doc = serde_json::json!({"version": super::list::JSON_VERSION, "command": "prune-archive", "pruned": restore::Pruned::default()});
            output::out(&format!(
                "{}\n",
                serde_json::to_string_pretty(&doc).unwrap_or_default()
            ))?;
        } else {
            ui.status("no archive in this store yet: nothing to prune");
        }
        return Ok(exit::OK);
    }
    let now = gotime::now();
    let before = now - chrono::Duration::from_std(args.older_than).unwrap_or_default();
    let path = store.path.clone();
    let p = restore::prune_archive(
        &mut store.conn,
        &path,
        &gotime::rfc3339_utc(&before),
        &gotime::rfc3339_utc(&now),
    )?;
    if args.json {
        let doc = serde_json::json!({"version": super::list::JSON_VERSION, "command": "prune-archive", "pruned": p});
        output::out(&format!(
            "{}\n",
            serde_json::to_string_pretty(&doc).unwrap_or_default()
        ))?;
    } else {
        output::out(&format!(
            "pruned the archives of {} compaction(s): {} values, {}; those compactions can no longer be restored\n",
            p.compactions,
            p.archived_values,
            agent_db::message::image::human_bytes(p.bytes.max(0) as usize)
        ))?;
        ui.status("SQLite reuses the freed pages; to shrink the file, run `sqlite3 STORE 'VACUUM'` while no agent is using it");
    }
    Ok(exit::OK)
}

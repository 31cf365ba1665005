//! `agent-db compact`: select, plan, and (without `--dry-run`) compact and write back.

use std::time::Instant;

use agent_db::gotime;
use agent_db::plan::{self, Plan, PlanOptions};
use agent_db::report::{Row, Status, Totals};
use agent_db::select::Outcome;
use agent_db::split::Decision;
use agent_db::store::Store;
use agent_db::Error;

use super::CmdResult;
use crate::cli::CompactArgs;
use crate::output::{self, table, Ui};

/// Rough summary size for a dry run before a strategy has run: a tenth of the head, between
/// 256 and 4,096 tokens, never more than the head itself.
fn estimate_summary_tokens(head_tokens: usize) -> usize {
    (head_tokens / 10).clamp(256, 4096).min(head_tokens)
}

/// The report row for a plan (dry run).
fn planned_row(p: &Plan, started: Instant) -> Row {
    let mut row = Row::bare(&p.meta.id, &p.meta.provider, p.reason.name(), Status::Planned);
    row.format = Some(p.loaded.format.name());
    row.model = p.meta.model.clone();
    row.tokens_exact = p.loaded.format.tokens_exact();
    row.messages_before = Some(p.loaded.messages.len());
    row.tokens_before = Some(p.tokens_before());
    match &p.decision {
        Decision::Compact(s) => {
            let kept = p.loaded.messages.len() - s.cut;
            row.messages_summarized = Some(s.cut - usize::from(s.reinsert.is_some()));
            row.messages_kept = Some(kept + usize::from(s.reinsert.is_some()));
            row.messages_after = Some(1 + kept + usize::from(s.reinsert.is_some()));
            row.tokens_after = Some(p.tokens_after(estimate_summary_tokens(s.head_tokens)));
        }
        Decision::NoOp(why) => {
            row.status = Status::Skipped(why.clone());
            row.messages_after = row.messages_before;
            row.tokens_after = row.tokens_before;
        }
    }
    row.duration_ms = started.elapsed().as_millis() as u64;
    row
}

pub fn run(ui: &Ui, store: Store, args: &CompactArgs) -> CmdResult {
    let selector = args.select.selector(&args.positional);
    if selector.is_empty() {
        return Err(Error::Usage(
            "choose conversations to compact: ID, --id, --follow, --all-over, --older-than, --since or --provider"
                .into(),
        )
        .into());
    }
    if !args.dry_run {
        return Err(Error::Usage(
            "writing compactions is not available yet; run with --dry-run to see the plan".into(),
        )
        .into());
    }
    let opts = PlanOptions {
        keep_tokens: args.keep_tokens,
        context_limit: args.select.context_limit,
    };
    let now = gotime::now();
    let mut rows = Vec::new();
    selector.run(&store, &now, |o| {
        let started = Instant::now();
        let row = match o {
            Outcome::Selected { meta, reason } => {
                let (id, provider) = (meta.id.clone(), meta.provider.clone());
                match plan::plan(&store, meta, reason, &opts) {
                    Ok(p) => planned_row(&p, started),
                    Err(e) => Row::bare(&id, &provider, reason.name(), Status::Failed(e.to_string())),
                }
            }
            Outcome::Skipped { meta, reason, why } => {
                Row::bare(&meta.id, &meta.provider, reason.name(), Status::Skipped(why))
            }
            Outcome::Failed { id, error } => Row::bare(&id, "", "manual", Status::Failed(error)),
        };
        rows.push(row);
        true
    })?;
    let mut totals = Totals::default();
    for r in &rows {
        totals += r;
    }
    if args.json {
        let doc = serde_json::json!({
            "version": super::list::JSON_VERSION,
            "command": "compact",
            "dry_run": true,
            "store": {"path": store.path.display().to_string(), "kind": store.kind.name()},
            "conversations": rows,
            "totals": totals,
        });
        output::out(&format!("{}\n", serde_json::to_string_pretty(&doc).unwrap_or_default()))?;
    } else {
        render(ui, &rows, &totals, true)?;
    }
    Ok(if totals.failed > 0 { agent_db::error::exit::PARTIAL } else { 0 })
}

fn arrow(a: Option<usize>, b: Option<usize>) -> String {
    match (a, b) {
        (Some(a), Some(b)) => format!("{a} → {b}"),
        (Some(a), None) => a.to_string(),
        _ => String::new(),
    }
}

/// The before/after table and the totals line.
fn render(ui: &Ui, rows: &[Row], totals: &Totals, dry_run: bool) -> std::io::Result<()> {
    if rows.is_empty() {
        ui.status("no conversation matched the selectors");
        return Ok(());
    }
    let mut t = table::new(
        &["ID", "PROVIDER", "WHY", "MESSAGES", "SUMMARIZE/KEEP", "TOKENS", "SAVED", "STATUS"],
        &[3, 5, 6],
    );
    for r in rows {
        let tok = match (r.tokens_before, r.tokens_after) {
            (Some(b), Some(a)) => format!(
                "{} → {}",
                table::tokens(b, r.tokens_exact),
                table::tokens(a, r.tokens_exact)
            ),
            _ => String::new(),
        };
        let split = match (r.messages_summarized, r.messages_kept) {
            (Some(s), Some(k)) => format!("{s} / {k}"),
            _ => String::new(),
        };
        t.add_row(vec![
            r.id.clone(),
            r.format.unwrap_or(&r.provider).to_string(),
            r.reason.to_string(),
            arrow(r.messages_before, r.messages_after),
            split,
            tok,
            r.saved_pct()
                .filter(|_| matches!(r.status, Status::Planned | Status::Compacted))
                .map(|p| format!("{p:.0}%"))
                .unwrap_or_default(),
            r.status.label(),
        ]);
    }
    output::out(&format!("{t}\n"))?;
    let verb = if dry_run { "would compact" } else { "compacted" };
    let done = if dry_run { totals.planned } else { totals.compacted };
    let line = format!(
        "{} conversation(s): {verb} {done}, skipped {}, failed {}; tokens {} → {} ({} saved){}",
        totals.conversations,
        totals.skipped,
        totals.failed,
        table::thousands(totals.tokens_before),
        table::thousands(totals.tokens_after),
        totals
            .saved_pct()
            .map(|p| format!("{p:.0}%"))
            .unwrap_or_else(|| "0%".into()),
        if dry_run { "; dry run: nothing was written" } else { "" },
    );
    output::out(&format!("{line}\n"))
}

//! The before/after table of `compact` (one row per conversation, skip and failure reasons as
//! numbered notes, one per distinct sentence) and its totals lines.

use agent_db::report::{Row, Status, Totals};

use super::table::{self, thousands, Kind, Tone};
use super::{Ids, Ui};

fn arrow(a: Option<usize>, b: Option<usize>) -> String {
    match (a, b) {
        (Some(a), Some(b)) => format!("{a} → {b}"),
        (Some(a), None) => a.to_string(),
        _ => String::new(),
    }
}

const COLUMNS: [table::Col; 12] = [
    table::col("ID", Kind::Fixed, 0),
    table::col("NAME", Kind::Cut, 7),
    table::col("FORMAT", Kind::Fixed, 3),
    table::col("WHY", Kind::Fixed, 1),
    table::col("COUNTED MSGS", Kind::Fixed, 5),
    table::col("SUMMARIZE/KEEP", Kind::Fixed, 2),
    table::col("COUNTED TOKENS", Kind::Fixed, 8),
    table::col("SAVED", Kind::Num, 6),
    table::col("USE", Kind::Fixed, 7),
    table::col("KEPT", Kind::Num, 6),
    table::col("STRATEGY", Kind::Fixed, 4),
    table::col("STATUS", Kind::Fixed, 9),
];

/// Stored utilization before → estimated after (`82% → 37%`, the percentage style of every
/// table), with a numbered note when --target could not be reached.
fn utilization(t: &mut table::Grid, r: &Row) -> String {
    let mark = match &r.note {
        Some(n) => format!(" [{}]", t.note(n)),
        None => String::new(),
    };
    let figures = match (r.utilization_before, r.utilization_after) {
        (Some(b), Some(a)) => format!("{} → {}", table::percent(b), table::percent(a)),
        (Some(b), None) => table::percent(b),
        _ => String::new(),
    };
    // Every row counted in a note shows its mark.
    format!("{figures}{mark}").trim_start().to_string()
}

/// The retention score, with a numbered note giving the model's share and the artifact
/// ledger's (for a summary with a ledger) and, in words, what share of each kind not kept in
/// full the new history keeps.
pub fn kept_cell(t: &mut table::Grid, k: &agent_db::retention::Retention) -> String {
    let pct = format!("{:.0}%", k.score * 100.0);
    let parts: Vec<String> = k
        .split()
        .into_iter()
        .chain(
            k.partial_words()
                .map(|low| format!("the new history keeps {low} of the summarized messages")),
        )
        .collect();
    if parts.is_empty() {
        pct
    } else {
        format!("{pct} [{}]", t.note(&parts.join("; ")))
    }
}

/// The strategy, with a numbered note when `--fallback` landed it in place of another.
fn strategy_cell(t: &mut table::Grid, r: &Row) -> String {
    let name = r.strategy.clone().unwrap_or_default();
    match &r.fallback {
        Some(f) => format!("{name} [{}]", t.note(&format!("fell back: {}", f.reason))),
        None => name,
    }
}

/// The status cell: a word, with a numbered note holding a skip or failure reason.
fn status_cell(t: &mut table::Grid, s: &Status) -> (String, Tone) {
    match s {
        Status::Planned => ("planned".into(), Tone::Good),
        Status::Compacted => ("compacted".into(), Tone::Good),
        Status::Skipped(why) => (format!("skipped [{}]", t.note(why)), Tone::Warn),
        Status::NotStarted(n) => (format!("skipped [{}]", t.note(&n.to_string())), Tone::Warn),
        Status::Failed(why) => (format!("failed [{}]", t.note(why)), Tone::Bad),
    }
}

/// The before/after table, the totals lines, and `skipped` (the conversations the selection
/// skipped, one line per reason).
pub fn render(
    ui: &Ui,
    rows: &[&Row],
    totals: &Totals,
    dry_run: bool,
    ids: &Ids,
    name: &dyn Fn(&str) -> String,
    skipped: &[String],
) -> std::io::Result<()> {
    // The table and TOTAL on stdout; the conversations the selection skipped are diagnostics,
    // on stderr (as `list` puts them).
    let skipped = || skipped.iter().for_each(|l| ui.status(l));
    if rows.is_empty() {
        ui.status("no conversation to compact matched the selectors");
        skipped();
        return Ok(());
    }
    let mut t = table::Grid::new(&COLUMNS);
    t.collapse_constant(&["FORMAT", "WHY", "STRATEGY"]);
    t.subject("conversations");
    for r in rows {
        let cells = cells(&mut t, r, ids, name);
        t.row(cells);
    }
    super::out(&t.render(ui.style()))?;
    super::out(&totals_lines(ui, totals, dry_run))?;
    skipped();
    Ok(())
}

/// One conversation's cells, in [`COLUMNS`] order.
fn cells(
    t: &mut table::Grid,
    r: &Row,
    ids: &Ids,
    name: &dyn Fn(&str) -> String,
) -> Vec<(String, Tone)> {
    let tok = match (r.tokens_before, r.tokens_after) {
        (Some(b), Some(a)) => format!(
            "{} → {}",
            table::tokens(b, r.tokens_exact),
            table::tokens(a, r.tokens_exact)
        ),
        (Some(b), None) => table::tokens(b, r.tokens_exact),
        _ => String::new(),
    };
    let split = match (r.messages_summarized, r.messages_kept) {
        (Some(s), Some(k)) => format!("{s} / {k}"),
        _ => String::new(),
    };
    let status = status_cell(t, &r.status);
    let util = utilization(t, r);
    vec![
        table::c(ids.show(&r.id)),
        table::c(table::ellipsize(&name(&r.id), 40)),
        table::c(r.format.unwrap_or(&r.provider)),
        table::c(r.reason),
        table::c(arrow(r.messages_before, r.messages_after)),
        table::c(split),
        table::c(tok),
        table::c(
            r.saved_pct()
                .filter(|_| matches!(r.status, Status::Planned | Status::Compacted))
                .map(|p| format!("{p:.0}%"))
                .unwrap_or_default(),
        ),
        table::c(util),
        table::c(
            r.retention
                .as_ref()
                .map(|k| kept_cell(t, k))
                .unwrap_or_default(),
        ),
        table::c(strategy_cell(t, r)),
        status,
    ]
}

/// The TOTAL line (broken to fit 80 columns on a terminal), the cost, and whether
/// `--max-cost` stopped the run.
fn totals_lines(ui: &Ui, totals: &Totals, dry_run: bool) -> String {
    let verb = if dry_run {
        "would compact"
    } else {
        "compacted"
    };
    let sep = if ui.stdout_tty { "\n      " } else { "; " };
    let done = if dry_run {
        totals.planned
    } else {
        totals.compacted
    };
    // The token figures cover the conversations that change; with none, there are none to give.
    let tokens = if done > 0 {
        format!(
            "{sep}tokens {} → {} ({} saved)",
            table::thousands(totals.tokens_before),
            table::thousands(totals.tokens_after),
            totals
                .saved_pct()
                .map(|p| format!("{p:.0}%"))
                .unwrap_or_else(|| "0%".into()),
        )
    } else {
        String::new()
    };
    // After Ctrl-C, the conversations the selection never reached are counted too.
    let count = match totals.not_visited {
        0 => format!("{} conversation(s)", thousands(totals.conversations)),
        n => format!(
            "{} of {} conversation(s) visited before Ctrl-C ({} not visited)",
            thousands(totals.conversations),
            thousands(totals.conversations + n),
            thousands(n)
        ),
    };
    let mut text = format!(
        "TOTAL {count}: {verb} {}, skipped {}, failed {}{tokens}{}\n",
        thousands(done),
        thousands(totals.skipped),
        thousands(totals.failed),
        if dry_run {
            format!("{sep}dry run: nothing was written")
        } else {
            String::new()
        },
    );
    if totals.cost_usd > 0.0 {
        let what = if dry_run {
            "estimated summarizer cost"
        } else {
            "summarizer cost"
        };
        text.push_str(&format!("{what}: ${:.4}\n", totals.cost_usd));
    }
    if let Some(m) = &totals.masking {
        text.push_str(&format!(
            "masking saved: {} of {} requests, {} of {} prompt tokens ({} tool outputs elided)\n",
            m.requests_unmasked.saturating_sub(m.requests),
            m.requests_unmasked,
            m.prompt_tokens_unmasked.saturating_sub(m.prompt_tokens),
            m.prompt_tokens_unmasked,
            m.elided
        ));
    }
    if totals.stopped_by_max_cost {
        text.push_str("--max-cost was reached: the remaining conversations were not started\n");
    }
    text
}

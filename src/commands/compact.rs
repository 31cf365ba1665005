//! `agent-db compact`: select, plan, compact and write back (or, with `--dry-run`, plan only).

use std::io::Write;

use agent_db::config::Settings;
use agent_db::error::exit;
use agent_db::gotime;
use agent_db::pipeline::{self, Event, RunOptions};
use agent_db::plan::PlanOptions;
use agent_db::report::{Row, Status, Totals};
use agent_db::select::{Outcome, Reason};
use agent_db::store::{lock, Store};
use agent_db::Error;

use super::CmdResult;
use crate::cli::{CompactArgs, StrategyArg};
use crate::output::table::{self, Kind, Tone};
use crate::output::{self, Ui};

pub fn run(ui: &Ui, store: Store, args: &CompactArgs, settings: &Settings) -> CmdResult {
    let mut selector = args.select.selector(&args.positional);
    // Unique prefixes name their conversation; an unknown ID stays as given and becomes that
    // conversation's failed row.
    selector.ids = selector
        .ids
        .iter()
        .map(|i| store.resolve_id_lenient(i))
        .collect::<Result<_, _>>()?;
    if selector.is_empty() {
        return Err(Error::Usage(
            "choose conversations to compact: ID, --id, --follow, --all-over, --older-than, --since or --provider"
                .into(),
        )
        .into());
    }
    selector.validate()?;
    if let Some(w) = agent_db::select::provider_warning(&selector, &store)? {
        ui.warn(&w);
    }
    if args.elide_images && args.strategy != Some(StrategyArg::Prune) {
        return Err(Error::Usage("--elide-images goes with --strategy prune".into()).into());
    }
    let (strategy, recipe, why) = super::settings::strategy(settings, args)?;
    let now = gotime::now();
    let _lock = if args.dry_run {
        None
    } else {
        // Ask before taking the lock, so a prompt left open never blocks a cron run.
        if !confirm(ui, &store, &selector, args, &now)? {
            ui.status("nothing done");
            return Ok(exit::OK);
        }
        Some(lock::acquire(&store.path)?)
    };
    ui.status(&why);
    let keep_tokens = args
        .keep_tokens
        .or(recipe.as_ref().and_then(|r| r.keep_tokens))
        .or(settings.keep_tokens);
    let mut details = serde_json::json!({});
    if let Some(r) = &recipe {
        details["recipe"] =
            serde_json::json!({"name": r.name, "sha256": r.sha256, "source": r.source});
        if let Some(i) = &settings.instructions {
            details["instructions_sha256"] = agent_db::util::sha256_hex(i).into();
        }
    }
    let hooks = if args.no_hooks || args.dry_run {
        None
    } else {
        let found = super::settings::discover_hooks(settings)?;
        for i in &found.ignored {
            ui.status(&format!("hook ignored: {}: {}", i.path.display(), i.why));
        }
        if !found.is_empty() {
            ui.status(&format!(
                "hooks: {}",
                found
                    .hooks
                    .iter()
                    .map(|h| format!("{} ({})", h.name, h.events.join(", ")))
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
        Some(std::sync::Arc::new(found))
    };
    if args.dry_run {
        ui.status("dry run: hooks are not run");
    }
    let opts = RunOptions {
        plan: PlanOptions {
            keep_tokens,
            context_limit: args.select.context_limit,
            target: Some(settings.target),
            summary_reserve: strategy.summary_reserve(),
            stall: (!args.force).then_some(settings.stall),
        },
        dry_run: args.dry_run,
        // The table needs every row; a JSON report streams them.
        collect_rows: !args.json,
        concurrency: settings.concurrency,
        jobs: args.jobs.unwrap_or(0),
        details,
        max_cost: settings.max_cost,
        hooks,
    };
    let total = if ui.stderr_tty && !ui.quiet {
        count_rows(&store, &selector, &now)
    } else {
        None
    };
    let progress = Progress::new(ui, total);
    let path = store.path.clone();
    let location = store.location();
    let kind = store.kind.name();
    drop(store);
    let mut totals = Totals::default();
    // A JSON report streams: rows are written in selection order as soon as every earlier row
    // is done, so memory stays flat however many conversations the run covers.
    let mut json = if args.json {
        Some(JsonReport::start(&path, kind, args.dry_run)?)
    } else {
        None
    };
    let mut write_error: Option<std::io::Error> = None;
    let meter = strategy.clone();
    let run = pipeline::run(&location, &selector, strategy, &opts, now, &mut |e| {
        if let Event::Finished { seq, row } = &e {
            totals += *row;
            if let Status::Failed(why) = &row.status {
                progress.suspend(|| ui.failure(&row.id, why));
            }
            for h in row.hooks.iter().filter(|h| h.decision == "error") {
                eprintln!(
                    "agent-db: warning: {} hook {} failed for {} (the compaction stands): {}",
                    h.event,
                    h.hook,
                    row.id,
                    h.detail.as_deref().unwrap_or("")
                );
            }
            if let (Some(j), None) = (json.as_mut(), write_error.as_ref()) {
                if let Err(err) = j.row(*seq, row) {
                    write_error = Some(err);
                }
            }
        }
        progress.event(e)
    })?;
    progress.finish();
    totals.stopped_by_max_cost = run.stopped_by_max_cost;
    if !args.dry_run {
        // The strategy's meter also counts what failed conversations were billed.
        totals.cost_usd = totals.cost_usd.max(meter.spent_usd());
    }
    if let Some(err) = write_error {
        return Err(err.into());
    }
    let rows = run.rows;
    if let Some(j) = json {
        j.finish(&totals)?;
    }
    after_run(ui, &path, &selector, &rows, &totals, args)?;
    Ok(if totals.failed > 0 {
        exit::PARTIAL
    } else {
        exit::OK
    })
}

/// What follows a run: `--follow`'s pick, the table (not with `--json`, nor with `-q` on a
/// real run), the store's growth and the undo hint.
fn after_run(
    ui: &Ui,
    path: &std::path::Path,
    selector: &agent_db::select::Selector,
    rows: &[Row],
    totals: &Totals,
    args: &CompactArgs,
) -> std::io::Result<()> {
    // A second, read-only look at the store for names, short IDs and the archive's growth.
    let after = Store::open(path, agent_db::store::Access::Read).ok();
    let name_of = |id: &str| {
        after
            .as_ref()
            .and_then(|s| s.meta(id).ok())
            .and_then(|m| m.name)
    };
    if selector.follow {
        if let Some(r) = rows.first() {
            ui.status(&format!(
                "--follow picked {}{}",
                r.id,
                name_of(&r.id)
                    .map(|n| format!(" ({})", table::ellipsize(&n, 60)))
                    .unwrap_or_default()
            ));
        }
    }
    if !args.json && (!ui.quiet || args.dry_run) {
        // -q on a real run: nothing on stdout; failures are already on stderr.
        let ids = after
            .as_ref()
            .map(|s| output::Ids::new(ui, s))
            .unwrap_or_else(output::Ids::full);
        let names = |id: &str| name_of(id).unwrap_or_default();
        render(ui, rows, totals, args.dry_run, &ids, &names)?;
    }
    if !args.dry_run && totals.compacted > 0 {
        growth(ui, after.as_ref(), rows);
        ui.status(&format!(
            "undo with: agent-db --db {} restore ID   (or: restore --all-since 1h); see `agent-db history`",
            shell_quote(&path.display().to_string())
        ));
    }
    Ok(())
}

/// Say how much the archive of this run added to the store, and how to get it back.
fn growth(ui: &Ui, store: Option<&Store>, rows: &[Row]) {
    let Some(store) = store else { return };
    let ids: Vec<i64> = rows.iter().filter_map(|r| r.compaction_id).collect();
    if let Ok(bytes) = agent_db::store::stats::archived_bytes_of(store, &ids) {
        if bytes > 0 {
            ui.status(&format!(
                "the store grew by about {} because the originals were archived (so they can be restored); \
                 `agent-db prune-archive --older-than DUR` then `agent-db vacuum` gives the space back",
                agent_db::util::human_bytes(bytes as u64)
            ));
        }
    }
}

/// How many rows the run will report (for the progress bar), from stored metadata only.
fn count_rows(
    store: &Store,
    selector: &agent_db::select::Selector,
    now: &chrono::DateTime<chrono::FixedOffset>,
) -> Option<u64> {
    let mut n = 0u64;
    selector
        .run(store, now, |_| {
            n += 1;
            true
        })
        .ok()?;
    Some(n)
}

fn shell_quote(s: &str) -> String {
    if s.chars()
        .all(|c| c.is_ascii_alphanumeric() || "/._-".contains(c))
    {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', "'\\''"))
    }
}

/// Batch selections on a terminal ask first; explicit ids, `--follow`, `--yes` and runs without a
/// terminal (cron) never do.
fn confirm(
    ui: &Ui,
    store: &Store,
    selector: &agent_db::select::Selector,
    args: &CompactArgs,
    now: &chrono::DateTime<chrono::FixedOffset>,
) -> Result<bool, Error> {
    if args.yes || !ui.stdin_tty || !ui.stderr_tty || !selector.ids.is_empty() || selector.follow {
        return Ok(true);
    }
    let mut n = 0usize;
    let mut shown = Vec::new();
    selector.run(store, now, |o| {
        if let Outcome::Selected { reason, meta } = o {
            if reason != Reason::Manual {
                n += 1;
                if shown.len() < 10 {
                    shown.push(format!(
                        "  {}  {}  {}",
                        meta.id,
                        meta.utilization(selector.context_limit)
                            .map(|u| format!("{:>4.0}%", u * 100.0))
                            .unwrap_or_else(|| "    -".into()),
                        table::ellipsize(meta.name.as_deref().unwrap_or(""), 50)
                    ));
                }
            }
        }
        true
    })?;
    if n == 0 {
        return Ok(true);
    }
    for line in &shown {
        eprintln!("{line}");
    }
    if n > shown.len() {
        eprintln!(
            "  … and {} more (see `agent-db compact --dry-run` with the same selectors)",
            n - shown.len()
        );
    }
    eprint!(
        "compact {n} conversation(s) in {}? Each one can be undone with `agent-db restore`. [y/N] ",
        store.path.display()
    );
    let _ = std::io::stderr().flush();
    let mut answer = String::new();
    let _ = std::io::stdin().read_line(&mut answer);
    Ok(matches!(answer.trim(), "y" | "Y" | "yes" | "YES"))
}

/// A progress bar on stderr, only on a terminal and without --quiet.
struct Progress {
    bar: Option<indicatif::ProgressBar>,
    saved: std::cell::Cell<usize>,
    failed: std::cell::Cell<usize>,
    in_flight: std::cell::Cell<usize>,
}

impl Progress {
    /// A bar with the total and an ETA when the number of rows is known, else a spinner.
    fn new(ui: &Ui, total: Option<u64>) -> Progress {
        let bar = (ui.stderr_tty && !ui.quiet).then(|| {
            let (b, template) = match total {
                Some(n) => (
                    indicatif::ProgressBar::new(n),
                    "{bar:20} {pos}/{len} · {elapsed}, ETA {eta} · {wide_msg}",
                ),
                None => (
                    indicatif::ProgressBar::new_spinner(),
                    "{spinner} {pos} done · {msg} · {elapsed}",
                ),
            };
            b.set_style(
                indicatif::ProgressStyle::with_template(template)
                    .unwrap_or_else(|_| indicatif::ProgressStyle::default_spinner()),
            );
            b.enable_steady_tick(std::time::Duration::from_millis(250));
            b
        });
        Progress {
            bar,
            saved: Default::default(),
            failed: Default::default(),
            in_flight: Default::default(),
        }
    }

    fn event(&self, e: Event<'_>) {
        match e {
            Event::Started => {
                self.in_flight.set(self.in_flight.get() + 1);
                self.redraw();
            }
            Event::Finished { row, .. } => self.row(row),
        }
    }

    fn redraw(&self) {
        if let Some(bar) = &self.bar {
            bar.set_message(format!(
                "{} in flight · {} failed · {} tokens saved",
                self.in_flight.get(),
                self.failed.get(),
                table::thousands(self.saved.get())
            ));
        }
    }

    fn row(&self, r: &Row) {
        if r.strategy.is_some()
            && self.in_flight.get() > 0
            && !matches!(r.status, Status::NotStarted(_))
        {
            self.in_flight.set(self.in_flight.get() - 1);
        }
        if let (Some(b), Some(a)) = (r.tokens_before, r.tokens_after) {
            if matches!(r.status, Status::Compacted | Status::Planned) {
                self.saved.set(self.saved.get() + b.saturating_sub(a));
            }
        }
        if matches!(r.status, Status::Failed(_)) {
            self.failed.set(self.failed.get() + 1);
        }
        if let Some(bar) = &self.bar {
            bar.inc(1);
        }
        self.redraw();
    }

    /// Print something on stderr without tearing the bar.
    fn suspend(&self, f: impl FnOnce()) {
        match &self.bar {
            Some(b) => b.suspend(f),
            None => f(),
        }
    }

    fn finish(&self) {
        if let Some(b) = &self.bar {
            b.finish_and_clear();
        }
    }
}

fn arrow(a: Option<usize>, b: Option<usize>) -> String {
    match (a, b) {
        (Some(a), Some(b)) => format!("{a} → {b}"),
        (Some(a), None) => a.to_string(),
        _ => String::new(),
    }
}

const COLUMNS: [table::Col; 11] = [
    table::col("ID", Kind::Fixed, 0),
    table::col("NAME", Kind::Cut, 7),
    table::col("FORMAT", Kind::Fixed, 3),
    table::col("WHY", Kind::Fixed, 1),
    table::col("COUNTED MSGS", Kind::Fixed, 5),
    table::col("SUMMARIZE/KEEP", Kind::Fixed, 2),
    table::col("COUNTED TOKENS", Kind::Fixed, 8),
    table::col("SAVED", Kind::Num, 6),
    table::col("UTIL", Kind::Fixed, 7),
    table::col("STRATEGY", Kind::Fixed, 4),
    table::col("STATUS", Kind::Fixed, 9),
];

/// Stored utilization before → estimated after (`0.82 → 0.37`), with a numbered note when
/// --target could not be reached.
fn utilization(t: &mut table::Grid, r: &Row) -> String {
    let mark = match &r.note {
        Some(n) => format!(" [{}]", t.note(n)),
        None => String::new(),
    };
    match (r.utilization_before, r.utilization_after) {
        (Some(b), Some(a)) => format!("{b:.2} → {a:.2}{mark}"),
        (Some(b), None) => format!("{b:.2}"),
        _ => String::new(),
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

/// The before/after table and the totals line.
pub fn render(
    ui: &Ui,
    rows: &[Row],
    totals: &Totals,
    dry_run: bool,
    ids: &output::Ids,
    name: &dyn Fn(&str) -> String,
) -> std::io::Result<()> {
    if rows.is_empty() {
        ui.status("no conversation matched the selectors");
        return Ok(());
    }
    let mut t = table::Grid::new(&COLUMNS);
    for r in rows {
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
        let status = status_cell(&mut t, &r.status);
        let util = utilization(&mut t, r);
        t.row(vec![
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
            table::c(r.strategy.clone().unwrap_or_default()),
            status,
        ]);
    }
    output::out(&t.render(ui.style()))?;
    let verb = if dry_run {
        "would compact"
    } else {
        "compacted"
    };
    // On a terminal the line is broken so that it fits 80 columns.
    let sep = if ui.stdout_tty { "\n      " } else { "; " };
    let done = if dry_run {
        totals.planned
    } else {
        totals.compacted
    };
    let line = format!(
        "TOTAL {} conversation(s): {verb} {done}, skipped {}, failed {}{sep}tokens {} → {} ({} saved){}",
        totals.conversations,
        totals.skipped,
        totals.failed,
        table::thousands(totals.tokens_before),
        table::thousands(totals.tokens_after),
        totals
            .saved_pct()
            .map(|p| format!("{p:.0}%"))
            .unwrap_or_else(|| "0%".into()),
        if dry_run {
            format!("{sep}dry run: nothing was written")
        } else {
            String::new()
        },
    );
    output::out(&format!("{line}\n"))?;
    if totals.cost_usd > 0.0 {
        let what = if dry_run {
            "estimated summarizer cost"
        } else {
            "summarizer cost"
        };
        output::out(&format!("{what}: ${:.4}\n", totals.cost_usd))?;
    }
    if totals.stopped_by_max_cost {
        output::out("--max-cost was reached: the remaining conversations were not started\n")?;
    }
    Ok(())
}

/// The `compact --json` document, written as it goes (docs/json-output.md).
struct JsonReport {
    out: std::io::BufWriter<std::io::Stdout>,
    next: usize,
    pending: std::collections::BTreeMap<usize, Row>,
    first: bool,
}

impl JsonReport {
    fn start(path: &std::path::Path, kind: &str, dry_run: bool) -> std::io::Result<JsonReport> {
        let mut out = std::io::BufWriter::new(std::io::stdout());
        let store = serde_json::json!({"path": path.display().to_string(), "kind": kind});
        write!(
            out,
            "{{\"version\":{},\"command\":\"compact\",\"dry_run\":{dry_run},\"store\":{store},\"conversations\":[",
            super::list::JSON_VERSION
        )?;
        Ok(JsonReport {
            out,
            next: 1,
            pending: Default::default(),
            first: true,
        })
    }

    /// Queue row `seq`; write every row whose turn has come.
    fn row(&mut self, seq: usize, row: &Row) -> std::io::Result<()> {
        self.pending.insert(seq, row.clone());
        while let Some(r) = self.pending.remove(&self.next) {
            let sep = if self.first { "\n" } else { ",\n" };
            self.first = false;
            write!(
                self.out,
                "{sep}{}",
                serde_json::to_string(&r).unwrap_or_default()
            )?;
            self.next += 1;
        }
        self.out.flush()
    }

    fn finish(mut self, totals: &Totals) -> std::io::Result<()> {
        writeln!(
            self.out,
            "\n],\"totals\":{}}}",
            serde_json::to_string(totals).unwrap_or_default()
        )?;
        self.out.flush()
    }
}

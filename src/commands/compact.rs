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
use crate::output::{self, table, Ui};

pub fn run(ui: &Ui, store: Store, args: &CompactArgs, settings: &Settings) -> CmdResult {
    let selector = args.select.selector(&args.positional);
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
            details["instructions_sha256"] = agent_db::plan::sha256_hex(i).into();
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
    let progress = Progress::new(ui, args.json);
    let path = store.path.clone();
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
    let run = pipeline::run(&path, &selector, strategy, &opts, now, &mut |e| {
        if let Event::Finished { seq, row } = &e {
            totals += *row;
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
    } else {
        render(ui, &rows, &totals, args.dry_run)?;
        if !args.dry_run && totals.compacted > 0 {
            ui.status(&format!(
                "undo with: agent-db --db {} restore ID   (or: restore --all-since 1h); see `agent-db history`",
                shell_quote(&path.display().to_string())
            ));
        }
    }
    Ok(if totals.failed > 0 {
        exit::PARTIAL
    } else {
        exit::OK
    })
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
    selector.run(store, now, |o| {
        if let Outcome::Selected { reason, .. } = o {
            if reason != Reason::Manual {
                n += 1;
            }
        }
        true
    })?;
    if n == 0 {
        return Ok(true);
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
    fn new(ui: &Ui, _json: bool) -> Progress {
        let bar = (ui.stderr_tty && !ui.quiet).then(|| {
            let b = indicatif::ProgressBar::new_spinner();
            b.set_style(
                indicatif::ProgressStyle::with_template("{spinner} {pos} done · {msg} · {elapsed}")
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
            && !matches!(r.status, Status::Skipped(ref w) if w.starts_with("not started"))
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

/// The before/after table and the totals line.
pub fn render(ui: &Ui, rows: &[Row], totals: &Totals, dry_run: bool) -> std::io::Result<()> {
    if rows.is_empty() {
        ui.status("no conversation matched the selectors");
        return Ok(());
    }
    let mut t = table::new(
        &[
            "ID",
            "PROVIDER",
            "WHY",
            "MESSAGES",
            "SUMMARIZE/KEEP",
            "TOKENS",
            "SAVED",
            "STRATEGY",
            "STATUS",
            "TIME",
        ],
        &[3, 5, 6, 9],
    );
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
            r.strategy.clone().unwrap_or_default(),
            r.status.label(),
            format!("{} ms", r.duration_ms),
        ]);
    }
    output::out(&format!("{t}\n"))?;
    let verb = if dry_run {
        "would compact"
    } else {
        "compacted"
    };
    let done = if dry_run {
        totals.planned
    } else {
        totals.compacted
    };
    let line = format!(
        "TOTAL {} conversation(s): {verb} {done}, skipped {}, failed {}; tokens {} → {} ({} saved){}",
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

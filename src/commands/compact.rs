//! `agent-db compact`: select, plan, compact and write back (or, with `--dry-run`, plan only).
//! The strategy is built by the library ([`agent_db::compact::build`]); the progress bar, the
//! before/after table and the JSON report are in `output/`.

use std::sync::Arc;

use agent_db::compact::build::{self, Built, Choice};
use agent_db::config::Settings;
use agent_db::error::exit;
use agent_db::gotime;
use agent_db::pipeline::{self, Event, RunOptions};
use agent_db::plan::PlanOptions;
use agent_db::report::{Row, Status, Totals};
use agent_db::select::{Outcome, Reason, Selector};
use agent_db::store::{lock, Store};
use agent_db::Error;

use super::CmdResult;
use crate::cli::{CompactArgs, StrategyArg};
use crate::output::json::CompactReport;
use crate::output::progress::Progress;
use crate::output::{self, report_table, table, Ui};

type Now = chrono::DateTime<chrono::FixedOffset>;

pub fn run(ui: &Ui, store: Store, args: &CompactArgs, settings: &Settings) -> CmdResult {
    if args.edit {
        super::apply::check_terminal(ui)?;
    }
    let selector = selection(ui, &store, args)?;
    if args.elide_images && args.strategy != Some(StrategyArg::Prune) {
        return Err(Error::Usage("--elide-images goes with --strategy prune".into()).into());
    }
    let review = args.edit || args.plan_out.is_some();
    if review && args.strategy == Some(StrategyArg::Prune) {
        return Err(Error::Usage(
            "--strategy prune writes no summary to review; --edit and --plan-out go with llm or extractive"
                .into(),
        )
        .into());
    }
    let built = build::build(settings, choice(args))?;
    if built.strategy.rewrites_head() && !store.kind.rewrites_history() {
        return Err(Error::Config(format!(
            "--strategy {} is not available for {} stores: their history is append-only \
             (use --strategy extractive or llm)",
            built.strategy.name(),
            store.kind.name()
        ))
        .into());
    }
    let now = gotime::now();
    if args.edit {
        super::apply::check_one(&store, &selector, &now)?;
    }
    let _lock = if args.dry_run || review {
        None
    } else {
        // Ask before taking the lock, so a prompt left open never blocks a cron run.
        if !confirm(ui, &store, &selector, args, &now)? {
            ui.status("nothing done");
            return Ok(exit::OK);
        }
        Some(lock::acquire(&store.path)?)
    };
    ui.status(&built.why);
    let mut opts = run_options(ui, args, &built)?;
    opts.interrupt = Some(interrupt::install());
    if args.edit {
        let strategy = built.strategy;
        return super::apply::edit(ui, store, &mut opts, settings, &now, |opts, location| {
            Ok(pipeline::run(&location, &selector, strategy, opts, now, &mut |_| {})?.rows)
        });
    }
    if let Some(file) = &args.plan_out {
        let (path, kind) = (store.path.clone(), store.kind.name());
        return super::apply::plan_out(ui, file, (&path, kind), &mut opts, &now, |opts| {
            let (totals, interrupted, busy) =
                execute(ui, store, &selector, built.strategy, opts, now, args, true)?;
            Ok(exit_code(&totals, interrupted, busy))
        });
    }
    let path = store.path.clone();
    let (totals, interrupted, busy) = execute(
        ui,
        store,
        &selector,
        built.strategy,
        &opts,
        now,
        args,
        args.dry_run,
    )?;
    if busy {
        // The one busy error every command reports (exit 9), after the report of what was done.
        return Err(Error::Busy { path, holder: None }.into());
    }
    Ok(exit_code(&totals, interrupted, busy))
}

fn exit_code(totals: &Totals, interrupted: bool, busy: bool) -> i32 {
    if busy {
        exit::BUSY
    } else if interrupted {
        exit::INTERRUPTED
    } else if totals.failed > 0 {
        exit::PARTIAL
    } else {
        exit::OK
    }
}

/// Ctrl-C during a run: the first SIGINT sets the run's interrupt flag (the conversations in
/// flight finish, nothing more starts, what was done is reported, exit 130); the handler then
/// steps aside, so a second Ctrl-C stops the process at once (each conversation's transaction
/// is still committed or rolled back whole by SQLite).
mod interrupt {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::{Arc, OnceLock};

    static FLAG: OnceLock<Arc<AtomicBool>> = OnceLock::new();

    extern "C" fn on_sigint(_: libc::c_int) {
        if let Some(f) = FLAG.get() {
            f.store(true, Ordering::SeqCst);
        }
        // SAFETY: signal() is async-signal-safe; this restores the default disposition.
        unsafe {
            libc::signal(libc::SIGINT, libc::SIG_DFL);
        }
    }

    /// Install the handler; the returned flag is set on the first Ctrl-C.
    pub fn install() -> Arc<AtomicBool> {
        let flag = FLAG
            .get_or_init(|| Arc::new(AtomicBool::new(false)))
            .clone();
        let handler: extern "C" fn(libc::c_int) = on_sigint;
        // SAFETY: the handler only stores to an atomic and calls signal(), both
        // async-signal-safe; FLAG is initialized before the handler is installed.
        unsafe {
            libc::signal(libc::SIGINT, handler as libc::sighandler_t);
        }
        flag
    }
}

/// The selectors, with ID prefixes resolved, validated.
fn selection(ui: &Ui, store: &Store, args: &CompactArgs) -> Result<Selector, Error> {
    // The one resolver every command uses, before anything is printed: an ID that names
    // nothing, or an ambiguous prefix, is the run's error (exit 5), not a failed row.
    let mut selector = args.select.selector(&args.positional);
    selector.ids = store.resolve_ids(&selector.ids)?;
    if selector.is_empty() {
        return Err(Error::Usage(
            "choose conversations to compact: ID, --id, --follow, --all-over, --older-than, --since or --provider"
                .into(),
        ));
    }
    selector.validate()?;
    if let Some(w) = agent_db::select::provider_warning(&selector, store)? {
        ui.warn(&w);
    }
    Ok(selector)
}

fn choice(args: &CompactArgs) -> Choice {
    let asked = [
        ("--llm-provider", args.llm.llm_provider.is_some()),
        ("--base-url", args.llm.base_url.is_some()),
        ("--model", args.llm.model.is_some()),
    ]
    .into_iter()
    .find_map(|(flag, given)| given.then_some(flag));
    match args.strategy {
        None => asked.map_or(Choice::Auto, Choice::Asked),
        Some(StrategyArg::Llm) => Choice::Llm,
        Some(StrategyArg::Extractive) => Choice::Extractive,
        Some(StrategyArg::Prune) => Choice::Prune {
            elide_images: args.elide_images,
        },
    }
}

/// The pipeline's options: the effective settings (the recipe's layer applied), the audit
/// details, and the hooks (not on a dry run, nor with `--no-hooks`).
fn run_options(ui: &Ui, args: &CompactArgs, built: &Built) -> Result<RunOptions, Error> {
    let settings = &built.settings;
    let mut details = serde_json::json!({});
    if let Some(r) = &built.recipe {
        details["recipe"] =
            serde_json::json!({"name": r.name, "sha256": r.sha256, "source": r.source});
        if let Some(i) = &settings.instructions {
            details["instructions_sha256"] = agent_db::util::sha256_hex(i).into();
        }
    }
    let hooks = if args.no_hooks || args.dry_run {
        None
    } else {
        Some(Arc::new(super::config::announced_hooks(ui, settings)?))
    };
    if args.dry_run {
        ui.status("dry run: hooks are not run");
    }
    Ok(RunOptions {
        plan: PlanOptions {
            keep_tokens: settings.keep_tokens,
            context_limit: args.select.context_limit,
            target: Some(settings.target),
            summary_reserve: built.strategy.summary_reserve(),
            stall: (!args.force).then_some(settings.stall),
            skip_under_target: !args.force,
            min_saving: (!args.force).then_some(settings.min_saving),
            force: args.force,
        },
        dry_run: args.dry_run,
        // The table needs every row; a JSON report streams them.
        collect_rows: !args.json,
        concurrency: settings.concurrency,
        jobs: args.jobs.unwrap_or(0),
        details,
        max_cost: settings.max_cost,
        min_retention: settings.min_retention_for(built.strategy.name()),
        min_retention_is_default: settings.min_retention.is_none(),
        fallback: args.fallback,
        hooks,
        interrupt: None,
        busy_wait: settings.busy_wait,
        proposals: None,
    })
}

/// Run the pipeline, reporting each row as it finishes (progress, failures, the JSON report),
/// then what follows the run. Returns the totals, whether the run was interrupted, and
/// whether the store was busy (another process kept its write lock past `compact.busy_wait`;
/// said once, here). `dry`: nothing is written (a dry run, or proposals for a plan).
#[allow(clippy::too_many_arguments)]
fn execute(
    ui: &Ui,
    store: Store,
    selector: &Selector,
    strategy: Arc<dyn agent_db::compact::Strategy>,
    opts: &RunOptions,
    now: Now,
    args: &CompactArgs,
    dry: bool,
) -> Result<(Totals, bool, bool), super::Failure> {
    let total = (ui.stderr_tty && !ui.quiet)
        .then(|| count_rows(&store, selector, &now))
        .flatten();
    let progress = Progress::new(ui, total);
    let path = &store.path.clone();
    let location = store.location();
    let kind = store.kind.name();
    drop(store);
    // Every row (the JSON report's totals), and the rows of the conversations the run works on:
    // those skipped by the selection itself are summarized by reason instead.
    let mut totals = Totals::default();
    let mut work = Totals::default();
    let mut skips = output::skips::Skips::default();
    // A JSON report streams: rows are written in selection order as soon as every earlier row
    // is done, so memory stays flat however many conversations the run covers.
    let mut json = args
        .json
        .then(|| CompactReport::start(path, kind, dry))
        .transpose()?;
    let mut write_error: Option<std::io::Error> = None;
    let meter = strategy.clone();
    let run = pipeline::run(&location, selector, strategy, opts, now, &mut |e| {
        if let Event::Finished { seq, row } = &e {
            totals += *row;
            match row.skipped_at_selection {
                Some(summary) => skips.add(summary, &row.id, &row.status.label()),
                None => work += *row,
            }
            progress.suspend(|| report_problems(ui, row));
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
    if !dry {
        // The strategy's meter also counts what failed conversations were billed.
        totals.cost_usd = totals
            .cost_usd
            .max(agent_db::report::usd(meter.spent_usd()));
    }
    if let Some(err) = write_error {
        return Err(err.into());
    }
    if run.interrupted {
        // The conversations the selection never reached are counted, not left out: on the
        // selection's own read, since this run's writes move what a second count would see.
        work.not_visited = run.unreached;
        totals.not_visited = work.not_visited;
    }
    if let Some(j) = json {
        j.finish(&totals)?;
    }
    work.stopped_by_max_cost = totals.stopped_by_max_cost;
    work.cost_usd = totals.cost_usd;
    after_run(ui, path, selector, &run.rows, &work, &skips, args, dry)?;
    if run.interrupted {
        say_interrupted(ui, &totals, work.not_visited, dry);
    }
    Ok((totals, run.interrupted, run.busy))
}

/// Where an interrupted run stopped. Never suppressed: the user asked to stop and must see
/// where it stopped.
fn say_interrupted(ui: &Ui, totals: &Totals, not_visited: usize, dry: bool) {
    let done = if dry {
        totals.planned
    } else {
        totals.compacted
    };
    let rest = match not_visited {
        0 => "the rest not started".to_string(),
        n => format!("the rest not started ({n} not visited)"),
    };
    ui.alert_hinted(
        &format!(
            "interrupted (Ctrl-C): {} {done}, failed {}, and {rest}",
            if dry { "planned" } else { "compacted" },
            totals.failed
        ),
        "every finished conversation is complete (see `agent-db history`); rerun the same command to go on",
    );
}

/// A failed conversation, and an after-compaction hook that failed (the compaction stands).
fn report_problems(ui: &Ui, row: &Row) {
    if let Status::Failed(why) = &row.status {
        ui.failure(&row.id, why);
    }
    for h in row.hooks.iter().filter(|h| h.decision == "error") {
        ui.warn(&format!(
            "{} hook {} failed for {} (the compaction stands): {}",
            h.event,
            h.hook,
            row.id,
            h.detail.as_deref().unwrap_or("")
        ));
    }
}

/// What follows a run: `--follow`'s pick, the table (not with `--json`, nor with `-q` on a
/// real run), the store's growth and the undo hint.
#[allow(clippy::too_many_arguments)]
fn after_run(
    ui: &Ui,
    path: &std::path::Path,
    selector: &Selector,
    rows: &[Row],
    totals: &Totals,
    skips: &output::skips::Skips,
    args: &CompactArgs,
    dry: bool,
) -> std::io::Result<()> {
    // A second, read-only look at the store for names, short IDs and the archive's growth,
    // opened only when something will be shown (`--json --quiet` from cron shows nothing).
    let opened = std::cell::OnceCell::new();
    let after = || -> Option<&Store> {
        opened
            .get_or_init(|| Store::open(path, agent_db::store::Access::Read).ok())
            .as_ref()
    };
    let name_of = |id: &str| after().and_then(|s| s.meta(id).ok()).and_then(|m| m.name);
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
    if !args.json && (!ui.quiet || dry) {
        // -q on a real run: nothing on stdout; failures are already on stderr.
        let ids = after()
            .map(|s| output::Ids::new(ui, s))
            .unwrap_or_else(output::Ids::full);
        let names = |id: &str| name_of(id).unwrap_or_default();
        // Conversations the selection skipped are rows only with --verbose; else one line per
        // reason under the totals.
        let shown: Vec<&Row> = rows
            .iter()
            .filter(|r| args.verbose || r.skipped_at_selection.is_none())
            .collect();
        let skipped = skips.lines(args.verbose, &ids);
        let skipped = if args.verbose {
            // The rows already say why; the per-reason counts are enough.
            skipped
                .into_iter()
                .filter(|l| !l.starts_with("  "))
                .collect()
        } else {
            skipped
        };
        report_table::render(ui, &shown, totals, dry, &ids, &names, &skipped)?;
    }
    if !dry && totals.compacted > 0 && !ui.quiet {
        growth(ui, after(), rows);
        let db = shell_quote(&path.display().to_string());
        let done: Vec<&Row> = rows
            .iter()
            .filter(|r| r.status == Status::Compacted)
            .collect();
        ui.status(&match done.as_slice() {
            // One conversation: the command that undoes it, with its ID.
            [one] => format!(
                "undo with: agent-db --db {db} restore {}; see `agent-db history`",
                undo_id(ui, after(), &one.id)
            ),
            _ => format!(
                "undo with: agent-db --db {db} restore ID, or restore --all-since 1h for all of them; see `agent-db history`"
            ),
        });
    }
    Ok(())
}

/// Say how much the archive of this run added to the store, and how to get it back.
fn growth(ui: &Ui, store: Option<&Store>, rows: &[Row]) {
    let Some(store) = store else { return };
    let ids: Vec<i64> = rows.iter().filter_map(|r| r.compaction_id).collect();
    if let Ok(bytes) = agent_db::archive::stats::archived_bytes_of(store, &ids) {
        if bytes > 0 {
            ui.status(&format!(
                "the store grew by about {} because the originals were archived (so they can be restored); \
                 `agent-db prune-archive --older-than DUR` then `agent-db vacuum` gives the space back",
                agent_db::util::human_bytes(bytes as u64)
            ));
        }
    }
}

/// How many conversations the run works on (for the progress bar), from stored metadata only:
/// those selected, and those that cannot be read (failed rows). Conversations the selection
/// skips are summarized apart, as in the confirmation and the totals.
fn count_rows(store: &Store, selector: &Selector, now: &Now) -> Option<u64> {
    let mut n = 0u64;
    selector
        .run(store, now, |o| {
            if !matches!(o, Outcome::Skipped { .. }) {
                n += 1;
            }
            true
        })
        .ok()?;
    Some(n)
}

/// `id` as the undo line gives it: its shortest unique prefix on a terminal, else in full.
fn undo_id(ui: &Ui, store: Option<&Store>, id: &str) -> String {
    let short = store
        .filter(|_| ui.stderr_tty)
        .and_then(|s| s.all_ids().ok())
        .map(|ids| agent_db::store::prefix::Prefixes::new(ids).short(id));
    shell_quote(&short.unwrap_or_else(|| id.to_string()))
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
    selector: &Selector,
    args: &CompactArgs,
    now: &Now,
) -> Result<bool, Error> {
    if args.yes || !ui.interactive() || !selector.ids.is_empty() || selector.follow {
        return Ok(true);
    }
    let mut n = 0usize;
    let mut shown = Vec::new();
    let mut skips = output::skips::Skips::default();
    // The IDs as the tables show them (the shortest unique prefix), and each line cut to the
    // terminal's width.
    let ids = output::Ids::prefixed(store);
    let width = output::term_width() as usize;
    let fit = |head: String, rest: &str| {
        let room = width.saturating_sub(head.chars().count() + 1).max(10);
        format!("{head}{}", table::ellipsize(rest, room))
    };
    selector.run(store, now, |o| {
        match o {
            Outcome::Selected { reason, meta } if reason != Reason::Manual => {
                n += 1;
                if shown.len() < 10 {
                    let head = format!(
                        "  {}  {}  ",
                        ids.show(&meta.id),
                        meta.utilization(selector.context_limit)
                            .map(|u| format!("{:>4.0}%", u * 100.0))
                            .unwrap_or_else(|| "    -".into()),
                    );
                    shown.push(fit(head, meta.name.as_deref().unwrap_or("")));
                }
            }
            Outcome::Failed { id, error, .. } => {
                n += 1;
                if shown.len() < 10 {
                    let head = format!("  {}  ", ids.show(&id));
                    shown.push(fit(head, &format!("cannot be read: {error}")));
                }
            }
            Outcome::Skipped {
                meta, why, summary, ..
            } => skips.add(summary, &meta.id, &why),
            _ => {}
        }
        true
    })?;
    if n == 0 {
        return Ok(true);
    }
    if n > shown.len() {
        shown.push(format!(
            "  … and {} more (see `agent-db compact --dry-run` with the same selectors)",
            n - shown.len()
        ));
    }
    shown.extend(skips.lines(args.verbose, &ids));
    Ok(ui.ask(
        &shown,
        &format!(
            "compact {n} conversation(s) in {}? Each one can be undone with `agent-db restore`.",
            store.path.display()
        ),
    ))
}

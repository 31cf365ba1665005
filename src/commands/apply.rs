//! Look before it lands: `compact --plan-out FILE` (the proposals as a plan, nothing written),
//! `compact ID --edit` (one proposal reviewed in the user's editor, then written) and
//! `agent-db apply FILE` (a plan written, refusing conversations changed since).

use std::path::{Path, PathBuf};

use agent_db::config::Settings;
use agent_db::error::exit;
use agent_db::pipeline::{self, ApplyOptions, PlanFile, PlanStore, Proposed, RunOptions};
use agent_db::report::{Row, Status, Totals};
use agent_db::select::{Outcome, Selector};
use agent_db::store::{lock, Store};
use agent_db::Error;

use super::CmdResult;
use crate::cli::ApplyArgs;
use crate::output::json::CompactReport;
use crate::output::{report_table, Ui};

type Now = chrono::DateTime<chrono::FixedOffset>;

/// The store file as a plan names it: absolute, links resolved.
fn canonical(path: &Path) -> PathBuf {
    std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf())
}

/// Read and check a plan file (exit 5 when it cannot be read or is not a plan of this version).
pub fn read_plan(file: &Path) -> Result<PlanFile, Error> {
    let text = std::fs::read_to_string(file)
        .map_err(|e| Error::NotFound(format!("plan {}: {e}", file.display())))?;
    pipeline::parse_plan(&text).map_err(|why| {
        Error::NotFound(format!("plan {}: {why}; nothing written", file.display()))
            .with_hint("make a new one with `agent-db compact … --plan-out FILE`")
    })
}

/// The store `apply` writes: `--db` (or `AGENT_DB_PATH`) when given, else the plan's own.
/// A plan made for another file is refused (exit 2).
pub fn store_for(plan: &PlanFile, file: &Path, db: Option<&Path>) -> Result<PathBuf, Error> {
    let Some(db) = db else {
        return Ok(plan.store.path.clone());
    };
    if canonical(db) != canonical(&plan.store.path) {
        return Err(Error::Usage(format!(
            "plan {} was made for {}, not {}; nothing written",
            file.display(),
            plan.store.path.display(),
            db.display()
        )));
    }
    Ok(db.to_path_buf())
}

/// A plan made for another kind of store is refused (exit 2).
fn check_kind(plan: &PlanFile, file: &Path, store: &Store) -> Result<(), Error> {
    if plan.store.kind == store.kind.name() {
        return Ok(());
    }
    Err(Error::Usage(format!(
        "plan {} is for a {} store, but {} is a {} store; nothing written",
        file.display(),
        plan.store.kind,
        store.path.display(),
        store.kind.name()
    )))
}

/// `agent-db apply FILE`.
pub fn run(
    ui: &Ui,
    store: Store,
    plan: PlanFile,
    args: &ApplyArgs,
    settings: &Settings,
) -> CmdResult {
    check_kind(&plan, &args.file, &store)?;
    if plan.conversations.is_empty() && !args.json {
        ui.status(&format!(
            "plan {} has no proposals; nothing written",
            args.file.display()
        ));
        return Ok(exit::OK);
    }
    let hooks = if args.no_hooks {
        None
    } else {
        Some(std::sync::Arc::new(super::config::announced_hooks(
            ui, settings,
        )?))
    };
    // A dry run writes nothing and takes no lock.
    let _lock = if args.dry_run {
        None
    } else {
        Some(lock::acquire(&store.path)?)
    };
    let details = serde_json::json!({
        "review": "plan",
        "plan": canonical(&args.file).display().to_string(),
    });
    let mut json = if args.json {
        Some(CompactReport::start_as(
            "apply",
            &store.path,
            store.kind.name(),
            args.dry_run,
        )?)
    } else {
        None
    };
    let (ids, path) = (crate::output::Ids::new(ui, &store), store.path.clone());
    let location = store.location();
    drop(store);
    let mut seq = 0;
    let mut write_error = None;
    let report = pipeline::apply_plan(
        &location,
        &plan,
        &ApplyOptions {
            busy_wait: settings.busy_wait,
            details,
            hooks,
            min_retention: args.min_retention,
            dry_run: args.dry_run,
        },
        &mut |row| {
            seq += 1;
            if let Status::Failed(why) = &row.status {
                ui.failure(&row.id, why);
            }
            if let (Some(j), None) = (json.as_mut(), write_error.as_ref()) {
                if let Err(e) = j.row(seq, row) {
                    write_error = Some(e);
                }
            }
        },
    )?;
    if let Some(e) = write_error {
        return Err(e.into());
    }
    finish(ui, &report.rows, json, &ids, report.busy, &path)
}

/// The report of an apply (or an edit's write), and its exit code: 1 when any proposal was not
/// written, 9 when the store stayed busy.
fn finish(
    ui: &Ui,
    rows: &[Row],
    json: Option<CompactReport>,
    ids: &crate::output::Ids,
    busy: bool,
    path: &Path,
) -> CmdResult {
    let mut totals = Totals::default();
    for r in rows {
        totals += r;
    }
    match json {
        Some(j) => j.finish(&totals)?,
        // --quiet: a run that went well prints nothing; a dry run's table is what was asked.
        None if !ui.quiet || rows.iter().any(|r| r.status == Status::Planned) => {
            let shown: Vec<&Row> = rows.iter().collect();
            let store = Store::open(path, agent_db::store::Access::Read).ok();
            let name = |id: &str| {
                store
                    .as_ref()
                    .and_then(|s| s.meta(id).ok())
                    .and_then(|m| m.name)
                    .unwrap_or_default()
            };
            let dry = rows.iter().any(|r| r.status == Status::Planned);
            report_table::render(ui, &shown, &totals, dry, ids, &name, &[])?;
        }
        None => {}
    }
    if busy {
        // The one busy error every command reports (exit 9): later proposals were not written.
        return Err(Error::Busy {
            path: path.to_path_buf(),
            holder: None,
        }
        .into());
    }
    if totals.compacted > 0 && !ui.quiet {
        let done: Vec<&str> = rows
            .iter()
            .filter(|r| r.status == Status::Compacted)
            .map(|r| r.id.as_str())
            .collect();
        // One conversation: the command that undoes it, with its ID.
        let id = match done.as_slice() {
            [one] => *one,
            _ => "ID",
        };
        ui.status(&format!(
            "undo with: agent-db --db {} restore {id}; see `agent-db history`",
            path.display()
        ));
    }
    Ok(
        if rows
            .iter()
            .all(|r| matches!(r.status, Status::Compacted | Status::Planned))
        {
            exit::OK
        } else {
            exit::PARTIAL
        },
    )
}

/// Propose without writing: the run's options with the proposals captured.
fn proposing(opts: &mut RunOptions) -> pipeline::Sink {
    let sink = pipeline::Sink::default();
    opts.proposals = Some(sink.clone());
    opts.dry_run = false;
    sink
}

/// The captured proposals, in ID order.
fn taken(sink: pipeline::Sink) -> Vec<Proposed> {
    let mut v = std::mem::take(&mut *sink.lock().expect("proposals lock"));
    v.sort_by(|a, b| a.id.cmp(&b.id));
    v
}

fn plan_file(store: &Path, kind: &str, now: &Now, conversations: Vec<Proposed>) -> PlanFile {
    PlanFile {
        agent_db_plan: pipeline::PLAN_VERSION,
        store: PlanStore {
            kind: kind.to_string(),
            path: canonical(store),
        },
        created_at: now.to_rfc3339(),
        conversations,
    }
}

/// `compact … --plan-out FILE`: run as `run_compact` does with the proposals captured, then write
/// them to FILE.
pub fn plan_out(
    ui: &Ui,
    file: &Path,
    (path, kind): (&Path, &str),
    opts: &mut RunOptions,
    now: &Now,
    run_compact: impl FnOnce(&RunOptions) -> CmdResult,
) -> CmdResult {
    let sink = proposing(opts);
    let code = run_compact(opts)?;
    let proposals = taken(sink);
    let n = proposals.len();
    let plan = plan_file(path, kind, now, proposals);
    let text = serde_json::to_string_pretty(&plan).map_err(|e| Error::Internal(e.to_string()))?;
    std::fs::write(file, format!("{text}\n")).map_err(|source| Error::Io {
        path: file.to_path_buf(),
        source,
    })?;
    ui.status(&format!(
        "plan written to {}: {n} proposal(s), nothing written to the store; review it, then: agent-db apply {}",
        file.display(),
        file.display()
    ));
    Ok(code)
}

/// `compact ID --edit` is for a person at a terminal (stdin and stdout).
pub fn check_terminal(ui: &Ui) -> Result<(), Error> {
    if ui.stdin_tty && ui.stdout_tty {
        return Ok(());
    }
    Err(
        Error::Usage("--edit opens an editor, so it needs a terminal (stdin and stdout)".into())
            .with_hint(
            "without one, use `compact … --plan-out FILE`, edit FILE, then `agent-db apply FILE`",
        ),
    )
}

/// `--edit` reviews one conversation: more selected is a usage error.
pub fn check_one(store: &Store, selector: &Selector, now: &Now) -> Result<(), Error> {
    let mut n = 0usize;
    selector.run(store, now, |o| {
        if matches!(o, Outcome::Selected { .. }) {
            n += 1;
        }
        n < 2
    })?;
    if n > 1 {
        return Err(Error::Usage(
            "--edit reviews one conversation, but the selection has several; name one ID".into(),
        )
        .with_hint("for several, use --plan-out FILE, edit FILE, then `agent-db apply FILE`"));
    }
    Ok(())
}

/// The editor: `$VISUAL`, else `$EDITOR`, else `vi`. It may carry arguments; it runs through
/// `sh` with the file as its last argument, as git runs it.
fn editor() -> String {
    ["VISUAL", "EDITOR"]
        .iter()
        .filter_map(|k| std::env::var(k).ok())
        .find(|v| !v.trim().is_empty())
        .unwrap_or_else(|| "vi".into())
}

/// Open `file` in the editor; an editor that cannot start or exits non-zero aborts.
fn run_editor(file: &Path) -> Result<(), Error> {
    let editor = editor();
    let status = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!("{editor} \"$@\""))
        .arg(&editor)
        .arg(file)
        .status()
        .map_err(|e| {
            Error::Refused(format!(
                "cannot run the editor `{editor}`: {e}; nothing written"
            ))
        })?;
    if !status.success() {
        return Err(Error::Refused(format!(
            "the editor `{editor}` exited with {status}; nothing written"
        )));
    }
    Ok(())
}

/// `compact ID --edit`: propose (as `propose` runs the pipeline), open the summary in the
/// editor, and write what was saved through the plan's write path.
#[allow(clippy::too_many_arguments)]
pub fn edit(
    ui: &Ui,
    store: Store,
    opts: &mut RunOptions,
    settings: &Settings,
    now: &Now,
    propose: impl FnOnce(&RunOptions, agent_db::store::Location) -> Result<Vec<Row>, Error>,
) -> CmdResult {
    let (path, kind) = (store.path.clone(), store.kind.name());
    let ids = crate::output::Ids::new(ui, &store);
    let location = store.location();
    drop(store);
    let sink = proposing(opts);
    opts.collect_rows = true;
    let rows = propose(opts, location.clone())?;
    let Some(mut proposed) = taken(sink).pop() else {
        // Nothing to review: the row says why (skipped or failed), as a compact would.
        return finish(ui, &rows, None, &ids, false, &path).map(|code| {
            if rows.iter().any(|r| matches!(r.status, Status::Failed(_))) {
                code
            } else {
                exit::OK
            }
        });
    };
    let dir = EditDir::create()?;
    let file = dir.0.join("summary.md");
    let io = |source| Error::Io {
        path: file.clone(),
        source,
    };
    std::fs::write(&file, format!("{}\n", proposed.summary.trim_end())).map_err(io)?;
    if let Some(r) = &proposed.retention {
        ui.status(&format!(
            "{}: the proposed summary keeps {:.1}% of the summarized span's artifacts; opening it in your editor \
             (save to write it, empty the file or quit with an error to write nothing)",
            proposed.id,
            r.score * 100.0
        ));
    }
    run_editor(&file)?;
    let text = std::fs::read_to_string(&file).map_err(io)?;
    if text.trim().is_empty() {
        return Err(Error::Refused(format!(
            "{}: the summary is empty; nothing written",
            proposed.id
        ))
        .into());
    }
    if text.trim_end() != proposed.summary.trim_end() {
        proposed.summary = text.trim_end().to_string();
    }
    let _lock = lock::acquire(&path)?;
    let plan = plan_file(&path, kind, now, vec![proposed]);
    let report = pipeline::apply_plan(
        &location,
        &plan,
        &ApplyOptions {
            busy_wait: settings.busy_wait,
            details: serde_json::json!({"review": "edit"}),
            hooks: opts.hooks.clone(),
            // A floor the user set holds for the edited summary too; the strategy's default
            // does not (the edit is the user's own judgement).
            min_retention: opts
                .min_retention
                .filter(|_| !opts.min_retention_is_default),
            dry_run: false,
        },
        &mut |row| {
            if let Status::Failed(why) = &row.status {
                ui.failure(&row.id, why);
            }
        },
    )?;
    finish(ui, &report.rows, None, &ids, report.busy, &path)
}

/// A private directory for the file the editor opens (mode 0700), removed when dropped.
struct EditDir(PathBuf);

impl EditDir {
    fn create() -> Result<EditDir, Error> {
        use std::os::unix::fs::DirBuilderExt;
        let base = std::env::temp_dir();
        let stamp = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        let dir = base.join(format!("agent-db-edit-{}-{stamp}", std::process::id()));
        std::fs::DirBuilder::new()
            .mode(0o700)
            .create(&dir)
            .map_err(|source| Error::Io {
                path: dir.clone(),
                source,
            })?;
        Ok(EditDir(dir))
    }
}

impl Drop for EditDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

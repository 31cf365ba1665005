//! One module per subcommand. Each returns the process exit code, or a [`Failure`].

mod apply;
mod compact;
mod config;
mod history;
mod list;
mod reclaim;
mod retire;
mod show;
mod stats;

use agent_db::store::{self, Access, Store};
use agent_db::Error;

use crate::cli::{Cli, Command};
use crate::output::Ui;

/// Why a command stopped early.
pub enum Failure {
    /// stdout was closed by the reader: not an error.
    BrokenPipe,
    Error(Error),
}

impl From<Error> for Failure {
    fn from(e: Error) -> Self {
        Failure::Error(e)
    }
}

impl From<std::io::Error> for Failure {
    fn from(e: std::io::Error) -> Self {
        if e.kind() == std::io::ErrorKind::BrokenPipe {
            Failure::BrokenPipe
        } else {
            Failure::Error(Error::Io {
                path: "<stdout>".into(),
                source: e,
            })
        }
    }
}

pub type CmdResult = Result<i32, Failure>;

/// A pinned clock that cannot be read must not silently fall back to the real one.
fn check_clock() -> Result<(), Error> {
    if let Some(v) = std::env::var_os("AGENT_DB_NOW").filter(|v| !v.is_empty()) {
        let v = v.to_string_lossy();
        if agent_db::gotime::parse(&v).is_err() {
            return Err(Error::Config(format!(
                "AGENT_DB_NOW: unparseable timestamp {v:?} (use RFC 3339, e.g. 2026-11-01T12:00:00Z)"
            )));
        }
    }
    Ok(())
}

pub fn run(ui: &Ui, cli: Cli) -> CmdResult {
    check_clock()?;
    install_wait_notice(ui);
    let (loaded, choice) = settings_and_choice(&cli)?;
    let db = cli.db.clone();
    let db_from_env = cli.db_from_env;
    let open = |access: Access| {
        let store = open_store(db.as_deref(), &choice, access)?;
        check_agent(&store, choice.agent_flag, db_from_env)?;
        Ok::<_, Error>(store)
    };
    match cli.command {
        Command::Init => init(ui, cli.db),
        Command::Config { json } => config::config(ui, &loaded?, json),
        Command::Recipes { json } => {
            let dir = agent_db::config::config_dir(&|k| std::env::var(k).ok());
            config::recipes(ui, &dir, json)
        }
        Command::Hooks { json } => config::hooks(ui, &loaded?, json),
        Command::Stores { json } => {
            let explicit = match (&cli.db, choice.config_path.as_deref()) {
                (Some(p), _) => Some((p.as_path(), "--db")),
                (None, Some(p)) => Some((p, "[store] path")),
                _ => None,
            };
            config::stores(ui, &store::survey(explicit), json)
        }
        Command::Completions { shell } => completions(shell),
        Command::Man => man(),
        Command::List(args) => list::run(ui, &open(Access::Read)?, &args),
        Command::Show(args) => show::run(ui, &open(Access::Read)?, &args),
        Command::Stats(args) => stats::run(ui, &recovered(ui, open(Access::Read)?, false)?, &args),
        Command::Vacuum(args) => {
            history::vacuum(ui, recovered(ui, open(Access::Read)?, args.dry_run)?, &args)
        }
        Command::Apply(args) => {
            // The plan is read and its store checked before the store is opened to write.
            let plan = apply::read_plan(&args.file)?;
            let db = apply::store_for(&plan, &args.file, db.as_deref())?;
            let settings = loaded?;
            let store = open_store(Some(&db), &choice, writing_unless(args.dry_run))?;
            check_agent(&store, choice.agent_flag, db_from_env)?;
            apply::run(
                ui,
                recovered(ui, store, args.dry_run)?,
                plan,
                &args,
                &settings,
            )
        }
        Command::Compact(args) => {
            let access = writing_unless(args.dry_run || args.plan_out.is_some());
            let settings = loaded?;
            compact::run(
                ui,
                recovered(ui, open(access)?, access == Access::Read)?,
                &args,
                &settings,
            )
        }
        Command::History(args) => history::history(ui, &open(Access::Read)?, &args),
        Command::Restore(args) => history::restore(
            ui,
            recovered(ui, open(writing_unless(args.dry_run))?, args.dry_run)?,
            &args,
        ),
        Command::Reclaim(args) => reclaim::run(
            ui,
            recovered(ui, open(writing_unless(args.dry_run))?, args.dry_run)?,
            &args,
        ),
        Command::Retire(args) => retire::run(ui, open(writing_unless(args.dry_run))?, &args),
        Command::PruneArchive(args) => history::prune_archive(
            ui,
            recovered(ui, open(writing_unless(args.dry_run))?, args.dry_run)?,
            &args,
        ),
    }
}

/// The settings (loaded once: with the compact flags for `compact`) and the store choice they
/// and the flags make. docker-agent stores do not record context limits, so the store layer
/// gets the effective `[context_limits]` (including --config). A broken config file is
/// reported by the commands that need the rest of it (compact, config, hooks), not by read-only
/// ones; but a config file named explicitly (--config, AGENT_DB_CONFIG) that is not there is an
/// error for every command, reported the same way (exit 3).
fn settings_and_choice(
    cli: &Cli,
) -> Result<
    (
        agent_db::Result<agent_db::config::Settings>,
        store::StoreChoice,
    ),
    Error,
> {
    let compact_args = match &cli.command {
        Command::Compact(args) => Some(&**args),
        _ => None,
    };
    let loaded = agent_db::config::load(&config::overrides(cli.config.clone(), compact_args));
    if let (Err(e), Some(p)) = (&loaded, explicit_config(cli.config.as_deref())) {
        if !p.exists() {
            return Err(Error::Config(e.to_string()));
        }
    }
    let mut choice = store::StoreChoice {
        agent_flag: cli.agent,
        ..Default::default()
    };
    if let Ok(s) = &loaded {
        // Every command waits for another process's lock as long as `compact` does.
        store::busy::set_wait(s.busy_wait);
        choice.config_path = s.store_path.clone();
        choice.config_agent = s.store_agent.as_deref().and_then(store::StoreKind::parse);
        choice.context_limits = s.context_limits.clone().into();
    }
    Ok((loaded, choice))
}

/// The store, after finishing or undoing a `retire` or `restore` a crash interrupted
/// ([`agent_db::store::retirement::recover`]): every command that writes, and `stats` and
/// `vacuum`, run it first (not dry runs, which write nothing). Another agent-db run holding the
/// store's lock is left to it.
fn recovered(ui: &Ui, store: Store, dry_run: bool) -> Result<Store, Error> {
    use agent_db::store::{lock, retirement};
    if dry_run || !retirement::needs_recovery(&store)? {
        return Ok(store);
    }
    let Ok(_lock) = lock::acquire(&store.path) else {
        return Ok(store);
    };
    let writer = Store::open_with(&store.path, Access::Write, Default::default())?;
    for note in retirement::recover(&writer)? {
        ui.status(&note);
    }
    Ok(store)
}

/// A command that writes opens the store to write, unless it is a dry run (or only proposes).
fn writing_unless(dry: bool) -> Access {
    if dry {
        Access::Read
    } else {
        Access::Write
    }
}

/// `agent-db --db PATH init`: an empty store.
fn init(ui: &Ui, db: Option<std::path::PathBuf>) -> CmdResult {
    let path =
        db.ok_or_else(|| Error::Usage("init needs --db PATH (the new store's file)".into()))?;
    let kind = agent_db::agents::init_store(&path)?;
    ui.status(&format!(
        "created an empty {kind}-layout store at {}",
        path.display()
    ));
    Ok(0)
}

/// The config file named by `--config` or `AGENT_DB_CONFIG`, if any.
fn explicit_config(flag: Option<&std::path::Path>) -> Option<std::path::PathBuf> {
    flag.map(|p| p.to_path_buf()).or_else(|| {
        std::env::var_os("AGENT_DB_CONFIG")
            .filter(|v| !v.is_empty())
            .map(std::path::PathBuf::from)
    })
}

/// `--agent` with a path (`--db` or `AGENT_DB_PATH`) that is another agent's store: the path
/// wins (it names one file), but only when it is that agent's; a mismatch is a usage error
/// that says whose file it is, never a silent listing of the other agent's store.
fn check_agent(
    store: &Store,
    agent: Option<store::StoreKind>,
    db_from_env: bool,
) -> Result<(), Error> {
    let Some(wanted) = agent else { return Ok(()) };
    if store.kind == wanted {
        return Ok(());
    }
    let (source, hint) = if db_from_env {
        (
            "$AGENT_DB_PATH",
            format!(
                "unset AGENT_DB_PATH to use {}'s store, or drop --agent",
                wanted.name()
            ),
        )
    } else {
        (
            "--db",
            format!("drop --agent, or give --db {}'s store", wanted.name()),
        )
    };
    Err(Error::Usage(format!(
        "{} ({source}) is {}'s store, not {}'s (--agent {})",
        store.path.display(),
        store.kind.name(),
        wanted.name(),
        wanted.name()
    ))
    .with_hint(hint))
}

fn completions(shell: clap_complete::Shell) -> CmdResult {
    let mut cmd = crate::cli::command_for_completions();
    let mut buf = Vec::new();
    clap_complete::generate(shell, &mut cmd, "agent-db", &mut buf);
    crate::output::out(&String::from_utf8_lossy(&buf))?;
    Ok(0)
}

/// The man page: one page, `agent-db(1)`, that references no other page. clap's sections for
/// the top level (name, synopsis, description, global options), then every subcommand with its
/// own options, then examples, the store choice and the exit codes as sections of their own.
fn man() -> CmdResult {
    use clap_mangen::roff::{bold, italic, roman, Roff};
    let cmd = crate::cli::command();
    let man = clap_mangen::Man::new(cmd.clone());
    let mut buf = Vec::new();
    let io = |e| Error::Io {
        path: "<man page>".into(),
        source: e,
    };
    man.render_title(&mut buf).map_err(io)?;
    man.render_name_section(&mut buf).map_err(io)?;
    man.render_synopsis_section(&mut buf).map_err(io)?;
    man.render_description_section(&mut buf).map_err(io)?;
    man.render_options_section(&mut buf).map_err(io)?;

    let mut roff = Roff::default();
    roff.control("SH", ["COMMANDS"]);
    for sub in cmd.get_subcommands() {
        roff.control("SS", [format!("agent-db {}", sub.get_name()).as_str()]);
        if let Some(about) = sub.get_long_about().or_else(|| sub.get_about()) {
            roff.text([roman(about.to_string())]);
        }
        for arg in sub.get_arguments().filter(|a| !a.is_hide_set()) {
            let mut head = Vec::new();
            if let Some(short) = arg.get_short() {
                head.push(bold(format!("-{short}")));
                head.push(roman(", "));
            }
            match arg.get_long() {
                Some(long) => head.push(bold(format!("--{long}"))),
                None => head.push(italic(arg.get_id().as_str().to_uppercase())),
            }
            if arg.get_long().is_some() && arg.get_action().takes_values() {
                let value = arg
                    .get_value_names()
                    .map(|v| v.join(" "))
                    .unwrap_or_else(|| arg.get_id().as_str().to_uppercase());
                head.push(roman(" "));
                head.push(italic(value));
            }
            roff.control("TP", []);
            roff.text(head);
            if let Some(help) = arg.get_long_help().or_else(|| arg.get_help()) {
                roff.text([roman(help.to_string())]);
            }
        }
    }
    let extras = crate::cli::man_extras();
    roff.control("SH", ["EXAMPLES"]);
    for (line, what) in extras.examples {
        roff.control("TP", []);
        roff.text([bold(*line)]);
        roff.text([roman(*what)]);
    }
    roff.control("SH", ["STORE"]);
    // Prose is filled; the indented lines (each agent's default file) stay lines of their own.
    for line in extras.store_choice.lines() {
        if let Some(item) = line.strip_prefix("  ") {
            roff.control("br", []);
            roff.text([roman(format!("  {item}"))]);
            roff.control("br", []);
        } else {
            roff.text([roman(line)]);
        }
    }
    roff.control("SH", ["EXIT STATUS"]);
    for (n, what) in extras.exit_codes {
        roff.control("TP", []);
        roff.text([bold(n.to_string())]);
        roff.text([roman(*what)]);
    }
    roff.control("SH", ["SEE ALSO"]);
    roff.text([roman(
        "agent-db SUBCOMMAND --help; the documentation in docs/ (usage.md, cron.md, json-output.md).",
    )]);
    roff.to_writer(&mut buf).map_err(io)?;
    man.render_version_section(&mut buf).map_err(io)?;
    crate::output::out(&String::from_utf8_lossy(&buf))?;
    Ok(0)
}

/// The store the run uses, for the notice said while waiting for another process's lock.
static WAITING_FOR: std::sync::OnceLock<std::path::PathBuf> = std::sync::OnceLock::new();

/// The notice said on stderr (not under `--quiet`) once another process's lock has kept a
/// command waiting for 2 s.
fn install_wait_notice(ui: &Ui) {
    if ui.quiet {
        return;
    }
    store::busy::on_wait(Box::new(|| {
        let path = WAITING_FOR
            .get()
            .map(|p| p.display().to_string())
            .unwrap_or_else(|| "the store".into());
        crate::output::progress::line(&format!(
            "waiting for {path} (another process holds a write lock)"
        ));
    }));
}

/// Resolve and open the store.
pub fn open_store(
    db: Option<&std::path::Path>,
    choice: &store::StoreChoice,
    access: Access,
) -> Result<Store, Error> {
    let resolved = store::resolve_store(db, choice)?;
    WAITING_FOR.get_or_init(|| resolved.path.clone());
    Store::open_with(&resolved.path, access, choice.context_limits.clone())
}

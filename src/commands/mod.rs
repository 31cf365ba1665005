//! One module per subcommand. Each returns the process exit code, or a [`Failure`].

mod compact;
mod config;
mod history;
mod list;
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
    // The settings, loaded once: with the compact flags for `compact`. docker-agent stores do
    // not record context limits, so the store layer gets the effective `[context_limits]`
    // (including --config). A broken config file is reported by the commands that need the
    // rest of it (compact, config, hooks), not by read-only ones.
    let compact_args = match &cli.command {
        Command::Compact(args) => Some(&**args),
        _ => None,
    };
    let loaded = agent_db::config::load(&config::overrides(cli.config.clone(), compact_args));
    let mut choice = store::StoreChoice {
        agent_flag: cli.agent,
        ..Default::default()
    };
    if let Ok(s) = &loaded {
        choice.config_path = s.store_path.clone();
        choice.config_agent = s.store_agent.as_deref().and_then(store::StoreKind::parse);
        choice.context_limits = s.context_limits.clone().into();
    }
    let db = cli.db.clone();
    let open = |access: Access| open_store(db.as_deref(), &choice, access);
    match cli.command {
        Command::Init => {
            let path = cli.db.ok_or_else(|| {
                Error::Usage("init needs --db PATH (the new store's file)".into())
            })?;
            store::kodelet::init_store(&path)?;
            ui.status(&format!(
                "created an empty kodelet-layout store at {}",
                path.display()
            ));
            Ok(0)
        }
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
        Command::Stats(args) => stats::run(ui, &open(Access::Read)?, &args),
        Command::Vacuum(args) => history::vacuum(ui, open(Access::Read)?, args.json),
        Command::Compact(args) => {
            let access = if args.dry_run {
                Access::Read
            } else {
                Access::Write
            };
            let settings = loaded?;
            compact::run(ui, open(access)?, &args, &settings)
        }
        Command::History(args) => history::history(ui, &open(Access::Read)?, &args),
        Command::Restore(args) => history::restore(ui, open(Access::Write)?, &args),
        Command::PruneArchive(args) => {
            let access = if args.dry_run {
                Access::Read
            } else {
                Access::Write
            };
            history::prune_archive(ui, open(access)?, &args)
        }
    }
}

fn completions(shell: clap_complete::Shell) -> CmdResult {
    use clap::CommandFactory;
    let mut cmd = Cli::command();
    let mut buf = Vec::new();
    clap_complete::generate(shell, &mut cmd, "agent-db", &mut buf);
    crate::output::out(&String::from_utf8_lossy(&buf))?;
    Ok(0)
}

fn man() -> CmdResult {
    use clap::CommandFactory;
    let mut buf = Vec::new();
    clap_mangen::Man::new(Cli::command())
        .render(&mut buf)
        .map_err(|e| Error::Io {
            path: "<man page>".into(),
            source: e,
        })?;
    crate::output::out(&String::from_utf8_lossy(&buf))?;
    Ok(0)
}

/// Resolve and open the store.
pub fn open_store(
    db: Option<&std::path::Path>,
    choice: &store::StoreChoice,
    access: Access,
) -> Result<Store, Error> {
    let resolved = store::resolve_store(db, choice)?;
    Store::open_with(&resolved.path, access, choice.context_limits.clone())
}

//! Everything the CLI prints: status lines and errors on stderr, data on stdout, tables that fit
//! the terminal. The library never prints; only this layer and `commands` do.

pub mod table;

use std::io::{IsTerminal, Write};

use agent_db::Error;

/// Terminal facts and the `--quiet` switch.
pub struct Ui {
    pub quiet: bool,
    pub stderr_tty: bool,
    pub stdin_tty: bool,
}

impl Ui {
    pub fn new(quiet: bool) -> Ui {
        Ui {
            quiet,
            stderr_tty: std::io::stderr().is_terminal(),
            stdin_tty: std::io::stdin().is_terminal(),
        }
    }

    /// A status line on stderr (suppressed by `--quiet`).
    pub fn status(&self, msg: &str) {
        if !self.quiet {
            eprintln!("{msg}");
        }
    }

    /// A warning on stderr about a likely mistake. Never suppressed: a cron job that silently
    /// matches nothing is worse than one line of mail.
    pub fn warn(&self, msg: &str) {
        eprintln!("agent-db: warning: {msg}");
    }

    /// An error on stderr, with a hint where one helps. Never suppressed.
    pub fn error(&self, e: &Error) {
        eprintln!("agent-db: error: {e}");
        if let Some(h) = hint(e) {
            eprintln!("  hint: {h}");
        }
    }
}

fn hint(e: &Error) -> Option<&'static str> {
    match e {
        Error::StoreNotFound { .. } => Some("pass --db PATH or set AGENT_DB_PATH; `agent-db init --db PATH` creates an empty store"),
        Error::NotSqlite { .. } | Error::UnknownSchema { .. } => {
            Some("agent-db reads kodelet's storage.db; check the path given to --db")
        }
        Error::SchemaChanged { .. } => Some("this store was written by a kodelet version agent-db does not know; nothing was changed"),
        Error::Locked { .. } => Some("another agent-db run is working on this store; it exits when done"),
        Error::Unwritable { .. } => Some("nothing was changed and nothing was spent; fix the cause, or use --dry-run to see the plan"),
        Error::Internal(_) => Some("rerun with AGENT_DB_LOG=debug and RUST_BACKTRACE=1, and report it with that output"),
        _ => None,
    }
}

/// Write to stdout; a closed pipe surfaces as `BrokenPipe` for `main` to treat as success.
pub fn out(text: &str) -> std::io::Result<()> {
    let mut o = std::io::stdout().lock();
    o.write_all(text.as_bytes())?;
    o.flush()
}

/// Terminal width for tables, when stdout is a terminal.
pub fn term_width() -> Option<u16> {
    if !std::io::stdout().is_terminal() {
        return None;
    }
    std::env::var("COLUMNS").ok().and_then(|c| c.parse().ok())
}

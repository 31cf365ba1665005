//! Everything the CLI prints: status lines, warnings, errors and questions on stderr through
//! [`Ui`] (so `--quiet` holds everywhere), data on stdout ([`out`], [`json`]), tables that fit
//! the terminal, the progress bar, the pager. The library never prints; commands print only
//! through this layer.

pub mod json;
mod notes;
pub mod progress;
pub mod report_table;
pub mod skips;
pub mod table;

use std::io::{IsTerminal, Write};

use agent_db::Error;

/// When to colour output (`--color`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, Default)]
pub enum ColorChoice {
    /// On a terminal, unless `NO_COLOR` is set
    #[default]
    Auto,
    Always,
    Never,
}

/// Terminal facts, `--quiet` and `--color`.
pub struct Ui {
    pub quiet: bool,
    pub stderr_tty: bool,
    pub stdin_tty: bool,
    pub stdout_tty: bool,
    pub color: bool,
    /// Colour the `error:`, `warning:` and `hint:` labels on stderr (as clap does): on a
    /// terminal unless `NO_COLOR` is set, or `--color always`.
    pub stderr_color: bool,
}

impl Ui {
    pub fn new(quiet: bool, color: ColorChoice) -> Ui {
        let stdout_tty = std::io::stdout().is_terminal();
        let stderr_tty = std::io::stderr().is_terminal();
        let no_color = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
        Ui {
            quiet,
            stderr_tty,
            stderr_color: match color {
                ColorChoice::Always => true,
                ColorChoice::Never => false,
                ColorChoice::Auto => stderr_tty && !no_color,
            },
            stdin_tty: std::io::stdin().is_terminal(),
            stdout_tty,
            color: match color {
                ColorChoice::Always => true,
                ColorChoice::Never => false,
                ColorChoice::Auto => stdout_tty && !no_color,
            },
        }
    }

    /// How tables are drawn: fitted to the terminal, or plain columns when piped.
    pub fn style(&self) -> table::Style {
        table::Style {
            width: self.stdout_tty.then(term_width),
            color: self.color,
        }
    }

    /// A status line on stderr (suppressed by `--quiet`).
    pub fn status(&self, msg: &str) {
        if !self.quiet {
            let text: Vec<String> = msg.lines().map(|l| self.wrap("", "", "  ", l)).collect();
            eprintln!("{}", text.join("\n"));
        }
    }

    /// `head` then `text`, wrapped at word boundaries to the terminal's width under `indent`
    /// when stderr is a terminal (as notes are), as it is otherwise. `plain` is `head` without
    /// colour, for its width.
    fn wrap(&self, head: &str, plain: &str, indent: &str, text: &str) -> String {
        if !self.stderr_tty {
            return format!("{head}{text}");
        }
        let width = usize::from(stderr_width()).max(plain.chars().count() + 20);
        let first = " ".repeat(plain.chars().count());
        let opts = textwrap::Options::new(width)
            .initial_indent(&first)
            .subsequent_indent(indent)
            .break_words(false);
        let lines = textwrap::wrap(text, opts);
        let mut out = String::new();
        for (i, l) in lines.iter().enumerate() {
            if i == 0 {
                out.push_str(head);
                out.push_str(l.get(first.len()..).unwrap_or("").trim_end());
            } else {
                out.push('\n');
                out.push_str(l.trim_end());
            }
        }
        out
    }

    /// A warning on stderr about a likely mistake (`warning: …`). Never suppressed: a cron job
    /// that silently matches nothing is worse than one line of mail.
    pub fn warn(&self, msg: &str) {
        self.labelled(Label::Warning, msg, None);
    }

    /// Something refused or not done that the user must see (`error: …` on stderr). Never
    /// suppressed.
    pub fn alert(&self, msg: &str) {
        self.labelled(Label::Error, msg, None);
    }

    /// [`Ui::alert`] with a `hint: …` line after it.
    pub fn alert_hinted(&self, msg: &str, hint: &str) {
        self.labelled(Label::Error, msg, Some(hint));
    }

    /// One labelled line on stderr (further lines of `msg` indented under it), then `hint` as a
    /// `hint:` line of its own: the one style of every error, warning and hint agent-db prints.
    /// A line of `msg` is never read as a hint, whatever it says.
    fn labelled(&self, label: Label, msg: &str, hint: Option<&str>) {
        let mut err = std::io::stderr().lock();
        let mut lines = msg.lines();
        let first = lines.next().unwrap_or("");
        let head = |l: Label| {
            (
                format!("{} ", l.paint(self.stderr_color)),
                format!("{} ", l.paint(false)),
            )
        };
        let (h, p) = head(label);
        let _ = writeln!(err, "{}", self.wrap(&h, &p, "  ", first));
        for l in lines {
            let _ = writeln!(err, "{}", self.wrap("  ", "  ", "  ", l));
        }
        if let Some(text) = hint {
            let (h, p) = head(Label::Hint);
            let _ = writeln!(err, "{}", self.wrap(&h, &p, "  ", text));
        }
    }

    /// Whether a question can be asked: stdin and stderr are terminals.
    pub fn interactive(&self) -> bool {
        self.stdin_tty && self.stderr_tty
    }

    /// Ask a yes/no question on stderr, after `context` lines (what it is about); only "y" or
    /// "yes" is yes. Never suppressed: callers ask only when [`Ui::interactive`] and not told
    /// `--yes`.
    pub fn ask(&self, context: &[String], question: &str) -> bool {
        let mut err = std::io::stderr().lock();
        for line in context {
            let _ = writeln!(err, "{}", self.wrap("", "", "  ", line));
        }
        let _ = write!(
            err,
            "{} ",
            self.wrap("", "", "", &format!("{question} [y/N]"))
        );
        let _ = err.flush();
        drop(err);
        let mut answer = String::new();
        let _ = std::io::stdin().read_line(&mut answer);
        matches!(answer.trim(), "y" | "Y" | "yes" | "YES")
    }

    /// A conversation's failure, one line on stderr. Never suppressed.
    pub fn failure(&self, id: &str, detail: &str) {
        let line = if detail.contains(id) {
            detail.to_string()
        } else {
            format!("conversation {id}: {detail}")
        };
        self.labelled(Label::Error, &line.replace('\n', " "), None);
    }

    /// An error on stderr (`error: …`), then a `hint: …` line where one helps. Never suppressed.
    pub fn error(&self, e: &Error) {
        self.labelled(Label::Error, &e.to_string(), hint(e).as_deref());
    }
}

/// The label of a line on stderr, coloured as clap colours its own.
#[derive(Clone, Copy)]
enum Label {
    Error,
    Warning,
    Hint,
}

impl Label {
    fn paint(self, color: bool) -> String {
        let (text, code) = match self {
            Label::Error => ("error:", "1;31"),
            Label::Warning => ("warning:", "1;33"),
            Label::Hint => ("hint:", "1;32"),
        };
        if color {
            format!("\x1b[{code}m{text}\x1b[0m")
        } else {
            text.to_string()
        }
    }
}

/// The hint printed after an error: the one it carries ([`Error::hint`]), else the one its kind
/// always gets.
fn hint(e: &Error) -> Option<String> {
    if let Some(h) = e.hint() {
        return Some(h.to_string());
    }
    let kinds: Vec<&str> = agent_db::store::StoreKind::all()
        .map(|k| k.name())
        .collect();
    let fixed = |h: &str| Some(h.to_string());
    match e.cause() {
        Error::StoreNotFound { .. } => Some(format!(
            "pass --db PATH or --agent {}, or set AGENT_DB_PATH; `agent-db init --db PATH` creates an empty store",
            kinds.join("|")
        )),
        Error::NotSqlite { .. } | Error::UnknownSchema { .. } => Some(format!(
            "agent-db reads the stores of {}; check the path given to --db",
            kinds.join(", ")
        )),
        Error::SchemaChanged { .. } => fixed("this store was written by an agent version agent-db does not know; nothing was changed"),
        Error::Locked { .. } => fixed("another agent-db run is working on this store; it exits when done"),
        Error::Unwritable { .. } => fixed("nothing was changed and nothing was spent; fix the cause, or use --dry-run to see the plan"),
        Error::Internal(_) => fixed("rerun with AGENT_DB_LOG=debug and RUST_BACKTRACE=1, and report it with that output"),
        Error::ConversationNotFound { id }
            if id.chars().count() < agent_db::store::prefix::MIN_INPUT =>
        {
            Some(format!(
                "an ID prefix needs at least {} characters; `agent-db list` shows the IDs",
                agent_db::store::prefix::MIN_INPUT
            ))
        }
        _ => None,
    }
}

/// Write to stdout; a closed pipe surfaces as `BrokenPipe` for `main` to treat as success.
pub fn out(text: &str) -> std::io::Result<()> {
    let mut o = std::io::stdout().lock();
    o.write_all(text.as_bytes())?;
    o.flush()
}

/// Terminal width for tables: `COLUMNS` when set to a number, else the terminal's own width,
/// else 80.
pub fn term_width() -> u16 {
    if let Some(w) = std::env::var("COLUMNS")
        .ok()
        .and_then(|c| c.trim().parse::<u16>().ok())
        .filter(|w| *w > 0)
    {
        return w;
    }
    tty_columns().unwrap_or(80)
}

/// The width stderr's lines wrap at: `COLUMNS`, else stderr's terminal, else 80.
fn stderr_width() -> u16 {
    if let Some(w) = std::env::var("COLUMNS")
        .ok()
        .and_then(|c| c.trim().parse::<u16>().ok())
        .filter(|w| *w > 0)
    {
        return w;
    }
    // SAFETY: TIOCGWINSZ fills a winsize struct we own; the fd is stderr's.
    unsafe {
        let mut ws: libc::winsize = std::mem::zeroed();
        if libc::ioctl(libc::STDERR_FILENO, libc::TIOCGWINSZ, &mut ws) == 0 && ws.ws_col > 0 {
            return ws.ws_col;
        }
    }
    80
}

fn tty_columns() -> Option<u16> {
    // SAFETY: TIOCGWINSZ fills a winsize struct we own; the fd is stdout's.
    unsafe {
        let mut ws: libc::winsize = std::mem::zeroed();
        if libc::ioctl(libc::STDOUT_FILENO, libc::TIOCGWINSZ, &mut ws) == 0 && ws.ws_col > 0 {
            Some(ws.ws_col)
        } else {
            None
        }
    }
}

/// Show `text` through a pager when stdout is a terminal and the text is longer than the
/// screen: `$PAGER`, else `less -FRX`. Falls back to printing when the pager cannot start.
pub fn page(ui: &Ui, text: &str, no_pager: bool) -> std::io::Result<()> {
    if no_pager || !ui.stdout_tty {
        return out(text);
    }
    let pager = std::env::var("PAGER")
        .ok()
        .filter(|p| !p.trim().is_empty())
        .unwrap_or_else(|| "less -FRX".to_string());
    if pager.trim() == "cat" {
        return out(text);
    }
    let mut parts = pager.split_whitespace();
    let Some(prog) = parts.next() else {
        return out(text);
    };
    let child = std::process::Command::new(prog)
        .args(parts)
        .stdin(std::process::Stdio::piped())
        .spawn();
    let mut child = match child {
        Ok(c) => c,
        Err(_) => return out(text),
    };
    if let Some(mut stdin) = child.stdin.take() {
        // The reader quitting early (q in less) is not an error.
        let _ = stdin.write_all(text.as_bytes());
    }
    let _ = child.wait();
    Ok(())
}

/// `3m ago`, `21d ago`; `in 2h` for a time after `now`; `?` when `text` cannot be read.
pub fn ago(now: &chrono::DateTime<chrono::FixedOffset>, text: &str) -> String {
    match agent_db::gotime::parse(text) {
        Ok(t) => {
            let d = now.signed_duration_since(t);
            match d.to_std() {
                Ok(d) => format!("{} ago", agent_db::select::short_duration(d)),
                Err(_) => format!(
                    "in {}",
                    agent_db::select::short_duration((-d).to_std().unwrap_or_default())
                ),
            }
        }
        Err(_) => "?".into(),
    }
}

/// RFC 3339 UTC of a stored timestamp, when it can be read, with every stored fractional digit
/// (`2026-10-09T10:58:38.584424343Z`).
pub fn utc(text: &str) -> Option<String> {
    agent_db::gotime::parse(text).ok().map(utc_of)
}

/// [`utc`] of a time already parsed.
pub fn utc_of(t: chrono::DateTime<chrono::FixedOffset>) -> String {
    t.with_timezone(&chrono::Utc)
        .to_rfc3339_opts(chrono::SecondsFormat::AutoSi, true)
}

/// The shortest unique prefixes on a terminal; full IDs when piped (scripts want them whole).
pub struct Ids {
    prefixes: Option<agent_db::store::prefix::Prefixes>,
}

impl Ids {
    pub fn new(ui: &Ui, store: &agent_db::store::Store) -> Ids {
        Ids {
            prefixes: ui
                .stdout_tty
                .then(|| store.all_ids().ok())
                .flatten()
                .map(agent_db::store::prefix::Prefixes::new),
        }
    }

    /// The shortest unique prefixes, wherever the text goes (a question on stderr).
    pub fn prefixed(store: &agent_db::store::Store) -> Ids {
        Ids {
            prefixes: store
                .all_ids()
                .ok()
                .map(agent_db::store::prefix::Prefixes::new),
        }
    }

    /// Full IDs (no store at hand, or piped).
    pub fn full() -> Ids {
        Ids { prefixes: None }
    }

    pub fn show(&self, id: &str) -> String {
        match &self.prefixes {
            Some(p) => p.short(id),
            None => id.to_string(),
        }
    }
}

//! Command-line definitions (clap types only). Shell completions are generated from these.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand, ValueEnum};

use agent_db::select::{parse_duration, parse_ratio, Selector};

/// `--min-retention`: a ratio from 0 to 1 inclusive (out of range is a usage error).
fn parse_retention(s: &str) -> std::result::Result<f64, String> {
    match parse_ratio(s)? {
        v if (0.0..=1.0).contains(&v) => Ok(v),
        v => Err(format!("expected a retention from 0 to 1, got {v}")),
    }
}
use agent_db::store::StoreKind;

/// The top-level examples: (command line, what it does).
const EXAMPLES: &[(&str, &str)] = &[
    (
        "agent-db list --all-over 0.7",
        "conversations using >= 70% of their context window",
    ),
    (
        "agent-db compact --follow --dry-run",
        "what compacting the latest conversation would do",
    ),
    (
        "agent-db compact --all-over 0.7 --older-than 1d --yes --quiet",
        "(cron)",
    ),
    (
        "agent-db show 3f2a91c0 --last 20",
        "the end of one conversation (an ID prefix is enough)",
    ),
    (
        "agent-db --agent docker-agent stats",
        "docker-agent's store: sizes, archive, utilization",
    ),
];

/// The documented exit codes (`docs/usage.md`, "Exit codes"), as the help and the man page say
/// them.
const EXIT_CODES: &[(i32, &str)] = &[
    (0, "ok"),
    (1, "some conversations failed"),
    (2, "usage"),
    (3, "config"),
    (4, "store unusable"),
    (5, "not found, ambiguous ID prefix or unreadable"),
    (6, "store locked"),
    (7, "refused (restore, vacuum, an aborted --edit)"),
    (8, "internal error (a bug in agent-db; please report it)"),
    (
        9,
        "store busy (another process kept its write lock; nothing more was written, rerun later)",
    ),
    (130, "interrupted (Ctrl-C): what was done is reported"),
];

/// How the store is chosen, with every registered kind's default file.
fn store_choice() -> String {
    let defaults: Vec<String> = StoreKind::all()
        .map(|k| format!("  {}", k.default_path_doc()))
        .collect();
    format!(
        "\
The store is --db PATH, else $AGENT_DB_PATH, else --agent's default file, else the config's
[store] path or [store] agent, else the one agent's default file that exists:
{}
(when several exist, choose with --agent or --db). With --agent, a --db or $AGENT_DB_PATH file
must be that agent's store.",
        defaults.join("\n")
    )
}

/// `text` broken into lines of at most `width` characters, at spaces.
fn fill(text: &str, width: usize) -> String {
    let mut lines: Vec<String> = vec![String::new()];
    for word in text.split(' ') {
        let line = lines.last_mut().expect("one line");
        if !line.is_empty() && line.len() + 1 + word.len() > width {
            lines.push(word.to_string());
        } else {
            if !line.is_empty() {
                line.push(' ');
            }
            line.push_str(word);
        }
    }
    lines.join("\n")
}

/// The top-level help's closing text: examples, how the store is chosen (every registered
/// kind's default file), exit codes.
fn after_help() -> String {
    let examples: Vec<String> = EXAMPLES
        .iter()
        .map(|(cmd, what)| {
            if cmd.len() < 45 {
                format!("  {cmd:<45}{what}")
            } else {
                format!("  {cmd}   {what}")
            }
        })
        .collect();
    let codes: Vec<String> = EXIT_CODES
        .iter()
        .map(|(n, what)| format!("{n} {what}"))
        .collect();
    let codes = fill(&format!("Exit codes: {}.", codes.join(", ")), 96);
    format!(
        "Examples:\n{}\n\n{}\n{codes}",
        examples.join("\n"),
        store_choice()
    )
}

/// The top-level long description, naming every registered kind.
fn long_about() -> String {
    let kinds: Vec<&str> = StoreKind::all().map(|k| k.name()).collect();
    format!(
        "agent-db opens an agent's SQLite conversation store ({}), selects conversations, compacts \
each one (summarizes older history, keeps the recent tail verbatim) and writes the result back in \
one transaction per conversation, archiving the original so any compaction can be undone with \
`agent-db restore`.",
        kinds.join(", ")
    )
}

/// Global options heading in `--help`.
const GLOBAL: &str = "Global options";
/// The selectors' heading in `--help`.
const SELECTORS: &str = "Selectors";

/// `--agent` values: one per registered store kind (`agent_db::store::KINDS`), each with its
/// default file as help.
fn agent_parser() -> impl clap::builder::TypedValueParser<Value = StoreKind> {
    use clap::builder::{PossibleValue, PossibleValuesParser, TypedValueParser};
    let values = StoreKind::all().map(|k| {
        PossibleValue::new(k.name())
            .help(k.default_path_doc())
            .aliases(k.aliases().iter().copied())
    });
    PossibleValuesParser::new(values)
        .map(|name| StoreKind::parse(&name).expect("clap accepts registered names only"))
}

/// A duration (`30s`, `2m`) or a plain number of seconds (`5`).
pub fn parse_seconds_or_duration(s: &str) -> Result<Duration, String> {
    match s.trim().parse::<u64>() {
        Ok(n) => Ok(Duration::from_secs(n)),
        Err(_) => parse_duration(s),
    }
}

/// `--target`: a utilization ratio greater than 0 and at most 1 (`0.4` or `40%`). Out of range
/// is a usage error (exit 2), like `--all-over`'s, with the likely meaning as a hint.
fn parse_target(s: &str) -> Result<f64, String> {
    let r = parse_ratio(s)?;
    if r > 0.0 && r <= 1.0 {
        return Ok(r);
    }
    Err(match agent_db::select::ratio_guess(r) {
        Some(g) => format!(
            "a utilization ratio greater than 0 and at most 1 is expected\nhint: did you mean --target {}? (--target {}% works too)",
            (g * 1000.0).round() / 1000.0,
            (g * 1000.0).round() / 10.0
        ),
        None => "a utilization ratio greater than 0 and at most 1 is expected, such as 0.4 or 40%".to_string(),
    })
}

/// A count that must be at least 1 (`--concurrency`).
fn parse_at_least_one(s: &str) -> Result<usize, String> {
    match s.trim().parse::<usize>() {
        Ok(0) => Err("must be at least 1".to_string()),
        Ok(n) => Ok(n),
        Err(e) => Err(e.to_string()),
    }
}

/// `--version` (`-V` gives the version alone): the version, and the failpoint when the build
/// has it (`src/failpoint.rs`; the tests check for it).
#[cfg(feature = "failpoints")]
const LONG_VERSION: &str = concat!(env!("CARGO_PKG_VERSION"), " (features: failpoints)");
#[cfg(not(feature = "failpoints"))]
const LONG_VERSION: &str = env!("CARGO_PKG_VERSION");

#[derive(Debug, Parser)]
#[command(
    name = "agent-db",
    version,
    long_version = LONG_VERSION,
    about = "Offline, undoable compaction of AI coding agents' conversation stores",
    long_about = long_about(),
    after_help = after_help()
)]
pub struct Cli {
    /// The conversation store (SQLite file)
    #[arg(long, global = true, env = "AGENT_DB_PATH", value_name = "PATH", help_heading = GLOBAL)]
    pub db: Option<PathBuf>,

    /// Use this agent's default store [config: [store] agent]
    #[arg(long, global = true, value_parser = agent_parser(), value_name = "AGENT", help_heading = GLOBAL)]
    pub agent: Option<StoreKind>,

    /// Print only errors: no status lines, no progress, no compact report when all went well
    #[arg(long, short, global = true, help_heading = GLOBAL)]
    pub quiet: bool,

    /// Colour: auto (on a terminal, unless NO_COLOR is set), always, never
    #[arg(long, global = true, value_enum, value_name = "WHEN", default_value = "auto", help_heading = GLOBAL)]
    pub color: crate::output::ColorChoice,

    /// Configuration file [default: $XDG_CONFIG_HOME/agent-db/config.toml]
    #[arg(long, global = true, env = "AGENT_DB_CONFIG", value_name = "PATH", help_heading = GLOBAL)]
    pub config: Option<PathBuf>,

    #[command(subcommand)]
    pub command: Command,

    /// Whether `--db` came from `AGENT_DB_PATH` rather than the command line (set by `main`).
    #[arg(skip)]
    pub db_from_env: bool,
}

/// The command line as clap parses it and as `--help` shows it: each subcommand's help lists
/// only its own options, then one line pointing at `agent-db --help` for the global ones. The
/// global options are still accepted after the subcommand: each subcommand gets a hidden copy
/// of them (clap then does not add its own visible one).
pub fn command() -> clap::Command {
    let mut cmd = <Cli as clap::CommandFactory>::command();
    let globals: Vec<clap::Arg> = cmd
        .get_arguments()
        .filter(|a| a.is_global_set())
        .cloned()
        .collect();
    let pointer = global_pointer(&globals);
    let names: Vec<String> = cmd
        .get_subcommands()
        .map(|s| s.get_name().to_string())
        .collect();
    // clap carries a flattened struct's heading on to the arguments after it: `compact
    // --dry-run` and `list --json` would be listed under "Selectors". Only the selectors are.
    let selectors: Vec<String> = <SelectArgs as Args>::augment_args(clap::Command::new("s"))
        .get_arguments()
        .map(|a| a.get_id().to_string())
        .collect();
    for name in names {
        cmd = cmd.mut_subcommand(&name, |mut sub| {
            let misfiled: Vec<String> = sub
                .get_arguments()
                .filter(|a| a.get_help_heading() == Some(SELECTORS))
                .map(|a| a.get_id().to_string())
                .filter(|id| !selectors.contains(id))
                .collect();
            for id in misfiled {
                sub = sub.mut_arg(id, |a| a.help_heading(None::<&str>));
            }
            for g in &globals {
                sub = sub.arg(g.clone().hide(true));
            }
            let after = sub
                .get_after_help()
                .map(|a| format!("{a}\n\n"))
                .unwrap_or_default();
            let sub = sub.after_long_help(format!("{after}{pointer}"));
            short_help(sub, &name)
        });
    }
    // `-h` is a screenful; `--help` the long form with examples, the store choice, exit codes.
    cmd.after_long_help(after_help()).after_help(
        "`agent-db --help`: every command and option, examples, the store choice and exit codes",
    )
}

/// What a subcommand's short help (`-h`) lists, with a one-line help each; its other options
/// are in `--help` only. Subcommands not here list every option in both.
const SHORT_HELP: &[(&str, &[(&str, &str)])] = &[
    (
        "compact",
        &[
            ("dry_run", "Print the plan; write nothing"),
            ("target", "Utilization to land at [default: 0.4]"),
            ("keep_tokens", "Tokens of recent history to keep verbatim"),
            ("strategy", "llm, extractive or prune"),
            ("force", "Compact what the safety checks would skip"),
            ("yes", "Do not ask for confirmation"),
            ("json", "Machine-readable report"),
            ("follow", "The most recently updated conversation"),
            ("all_over", "Context utilization at least RATIO (0.7, 70%)"),
            ("older_than", "Last updated at least DUR ago (30d, 12h)"),
        ],
    ),
    (
        "list",
        &[
            ("follow", "The most recently updated conversation"),
            ("all_over", "Context utilization at least RATIO (0.7, 70%)"),
            ("older_than", "Last updated at least DUR ago (30d, 12h)"),
            ("since", "Updated within the last DUR"),
            ("provider", "Only this provider or format"),
            ("limit", "At most N conversations"),
            ("json", "Machine-readable output"),
            ("ids_only", "Only the selected IDs, one per line"),
            ("verbose", "List each skipped conversation"),
        ],
    ),
];

/// `sub` with its short help trimmed as [`SHORT_HELP`] says.
fn short_help(mut sub: clap::Command, name: &str) -> clap::Command {
    let Some((_, shown)) = SHORT_HELP.iter().find(|(n, _)| *n == name) else {
        return sub.after_help(format!(
            "Details, examples and the global options: `agent-db {name} --help`"
        ));
    };
    let ids: Vec<String> = sub
        .get_arguments()
        .filter(|a| !a.is_positional() && !a.is_hide_set())
        .map(|a| a.get_id().to_string())
        .collect();
    for id in ids {
        sub = match shown.iter().find(|(i, _)| *i == id) {
            Some((_, short)) => sub.mut_arg(&id, |a| {
                let long = a
                    .get_long_help()
                    .or(a.get_help())
                    .map(|h| h.to_string())
                    .unwrap_or_default();
                let a = a.help(*short).long_help(long);
                if a.get_action().takes_values() {
                    a.hide_possible_values(true)
                } else {
                    a
                }
            }),
            None => sub.mut_arg(&id, |a| a.hide_short_help(true)),
        };
    }
    sub.after_help(format!(
        "More options, details and examples: `agent-db {name} --help`"
    ))
}

/// The top-level `-h`: the main commands and options on one screen (24 rows); the rest (the
/// other commands, every option) are in `--help`.
pub fn short_top_help() -> clap::Command {
    const RARE: &[&str] = &[
        "apply",
        "init",
        "config",
        "hooks",
        "recipes",
        "completions",
        "man",
    ];
    let mut cmd = command().disable_help_subcommand(true);
    for name in RARE {
        cmd = cmd.mut_subcommand(name, |s| s.hide(true));
    }
    for id in ["color", "config"] {
        cmd = cmd.mut_arg(id, |a| a.hide(true));
    }
    cmd = cmd.disable_version_flag(true);
    for (id, short) in [
        ("db", "The conversation store (SQLite file)"),
        ("agent", "Use this agent's default store"),
        ("quiet", "Print only errors"),
    ] {
        cmd = cmd.mut_arg(id, |a| {
            let a = a.help(short).help_heading(None::<&str>).hide_env(true);
            if a.get_action().takes_values() {
                a.hide_possible_values(true)
            } else {
                a
            }
        });
    }
    cmd.after_help(format!("Also: {} (`agent-db --help`)", RARE.join(", ")))
}

/// The command line with the global options shown everywhere: for shell completions, so
/// `agent-db list --d<TAB>` still completes `--db`.
pub fn command_for_completions() -> clap::Command {
    <Cli as clap::CommandFactory>::command()
}

/// The line that closes every subcommand's help.
fn global_pointer(globals: &[clap::Arg]) -> String {
    let flags: Vec<String> = globals
        .iter()
        .filter_map(|a| a.get_long())
        .map(|l| format!("--{l}"))
        .collect();
    format!(
        "Global options ({}) can be given before or after the subcommand; see `agent-db --help`.",
        flags.join(", ")
    )
}

/// The man page's sections that clap does not render: examples, how the store is chosen, and
/// the exit codes.
pub struct ManExtras {
    pub examples: &'static [(&'static str, &'static str)],
    pub store_choice: String,
    pub exit_codes: &'static [(i32, &'static str)],
}

pub fn man_extras() -> ManExtras {
    ManExtras {
        examples: EXAMPLES,
        store_choice: store_choice(),
        exit_codes: EXIT_CODES,
    }
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// List conversations with their stored context usage
    ///
    /// Cheap: no message bodies are read.
    #[command(
        after_help = "Examples:\n  agent-db list\n  agent-db list --all-over 0.7 --older-than 1d\n  agent-db list --json | jq '.conversations[].id'"
    )]
    List(ListArgs),
    /// Show one conversation (transcript, JSON or stored rows)
    ///
    /// A readable transcript, the provider-neutral messages as JSON, or every stored row.
    #[command(
        after_help = "Examples:\n  agent-db show 3f2a91c0              (a unique ID prefix is enough)\n  agent-db show 3f2a91c0 --last 10\n  agent-db show 3f2a91c0 --json | jq '.messages | length'\n  agent-db show 3f2a91c0 --raw > original.json"
    )]
    Show(ShowArgs),
    /// Compact the selected conversations (--dry-run: the plan)
    ///
    /// Use --dry-run to see the plan first. Every compaction can be undone with `restore`.
    #[command(
        after_help = "Examples:\n  agent-db compact --follow --dry-run\n  agent-db compact 3f2a91c0\n  agent-db compact --all-over 0.7 --older-than 1d --yes --quiet      (cron)\n  agent-db compact --all-over 0.8 --strategy prune --dry-run --json"
    )]
    Compact(Box<CompactArgs>),
    /// Write a plan made by `compact --plan-out`
    ///
    /// Any conversation changed since the plan was made is refused.
    #[command(
        after_help = "Examples:\n  agent-db compact --all-over 0.7 --plan-out plan.json\n  agent-db apply plan.json"
    )]
    Apply(ApplyArgs),
    /// Show the audit log of compactions (all, or one conversation's)
    #[command(
        after_help = "Examples:\n  agent-db history --limit 20\n  agent-db history --since 1d\n  agent-db history 3f2a91c0 --json"
    )]
    History(HistoryArgs),
    /// Undo compactions, byte for byte
    ///
    /// Puts the archived original back, byte-identical.
    #[command(
        after_help = "Examples:\n  agent-db restore 3f2a91c0\n  agent-db restore --compaction 12\n  agent-db restore --all-since 1h --dry-run"
    )]
    Restore(RestoreArgs),
    /// Delete old archived originals (no longer restorable)
    ///
    /// Deletes the archived originals older than DUR: they can no longer be restored. `vacuum`
    /// then gives the space back.
    #[command(
        after_help = "Examples:\n  agent-db prune-archive --older-than 90d --dry-run\n  agent-db prune-archive --older-than 90d --yes --vacuum"
    )]
    PruneArchive(PruneArchiveArgs),
    /// Remove rows the agent never reads again (undoable)
    ///
    /// Per agent, what its own source shows it never reads back (opencode: the event log of
    /// idle sessions, events of deleted sessions; kodelet: the ACP log of deleted
    /// conversations); other agents say why nothing. Each conversation's rows are removed in one
    /// transaction and archived: `restore` puts them back. `vacuum` then gives the space back.
    #[command(
        after_help = "Examples:\n  agent-db reclaim --dry-run\n  agent-db reclaim --yes --vacuum"
    )]
    Reclaim(ReclaimArgs),
    /// Move whole conversations into a cold file (undoable)
    ///
    /// Every row the agent keeps of each selected conversation (and its child conversations)
    /// moves into a compressed cold file; the agent no longer lists it. `restore ID` brings it
    /// back byte for byte; `vacuum` then gives the space back.
    #[command(
        after_help = "Examples:\n  agent-db retire --older-than 30d --dry-run\n  agent-db retire --older-than 30d --yes && agent-db vacuum\n  agent-db restore 3f2a91c0"
    )]
    Retire(RetireArgs),
    /// Store figures: sizes, archive, models, utilization
    ///
    /// File size and free pages, archive size, conversations and tokens by provider and model,
    /// utilization, compactions.
    #[command(
        after_help = "Examples:\n  agent-db stats\n  agent-db --agent docker-agent stats --json"
    )]
    Stats(StatsArgs),
    /// Give free pages back to the file system (VACUUM)
    ///
    /// SQLite's VACUUM; refused while another process has the store open.
    #[command(
        after_help = "Examples:\n  agent-db prune-archive --older-than 30d --yes && agent-db vacuum"
    )]
    Vacuum(VacuumArgs),
    /// Print the effective settings, secrets redacted
    ///
    /// Defaults < config file < environment < flags.
    #[command(
        after_help = "Examples:\n  agent-db config\n  agent-db --config ./team.toml config --json"
    )]
    Config {
        /// Machine-readable output on stdout
        #[arg(long)]
        json: bool,
    },
    /// Find the agents' stores and whether agent-db supports them
    ///
    /// Each agent's default file, and --db: for each, the agent, its schema version and whether
    /// agent-db supports it.
    #[command(
        after_help = "Examples:\n  agent-db stores\n  agent-db --db ~/.kodelet/storage.db stores --json\n\nSUPPORT is read-write (compact and restore work), read-only (the file is newer than\nthis agent-db knows: list and show work, nothing is written) or unsupported (DETAIL says why)."
    )]
    Stores {
        /// Machine-readable output on stdout
        #[arg(long)]
        json: bool,
    },
    /// List the compaction hooks found and the events each handles
    #[command(after_help = "Examples:\n  agent-db hooks\n  agent-db hooks --json")]
    Hooks {
        /// Machine-readable output on stdout
        #[arg(long)]
        json: bool,
    },
    /// List the summary recipes the llm strategy can use
    #[command(after_help = "Examples:\n  agent-db recipes\n  agent-db recipes --json")]
    Recipes {
        /// Machine-readable output on stdout
        #[arg(long)]
        json: bool,
    },
    /// Create an empty store in kodelet's layout (demos, tests)
    #[command(after_help = "Examples:\n  agent-db --db /tmp/demo.db init")]
    Init,
    /// Print shell completions
    #[command(
        after_help = "Examples:\n  agent-db completions bash > ~/.local/share/bash-completion/completions/agent-db\n  agent-db completions zsh > ~/.zfunc/_agent-db"
    )]
    Completions {
        /// The shell
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Print the man page (roff) on stdout
    #[command(
        after_help = "Examples:\n  agent-db man > ~/.local/share/man/man1/agent-db.1\n  agent-db man | man -l -"
    )]
    Man,
}

/// How to pick conversations. Selectors combine with AND.
#[derive(Debug, Args, Clone, Default)]
#[command(next_help_heading = SELECTORS)]
pub struct SelectArgs {
    /// A conversation ID or unique prefix (repeatable)
    #[arg(long = "id", value_name = "ID")]
    pub ids: Vec<String>,

    /// The most recently updated conversation
    #[arg(long)]
    pub follow: bool,

    /// Conversations whose stored context utilization (the context the agent last recorded,
    /// over its context window) is at least RATIO, e.g. 0.7 or 70%
    #[arg(long, value_name = "RATIO", value_parser = parse_ratio)]
    pub all_over: Option<f64>,

    /// Only conversations last updated at least DUR ago (e.g. 30d, 12h)
    #[arg(long, value_name = "DUR", value_parser = parse_duration)]
    pub older_than: Option<Duration>,

    /// Only conversations updated within the last DUR
    #[arg(long, value_name = "DUR", value_parser = parse_duration)]
    pub since: Option<Duration>,

    /// Skip conversations updated more recently than DUR, as a live agent may hold them
    /// [default: 10m for batch selectors, none for --id/--follow; 0 disables]
    #[arg(long, value_name = "DUR", value_parser = parse_duration)]
    pub idle: Option<Duration>,

    /// Only this provider (kodelet's provider column, or a format: anthropic, openai-chat,
    /// openai-responses)
    #[arg(long, value_name = "NAME")]
    pub provider: Option<String>,

    /// At most N conversations
    #[arg(long, value_name = "N")]
    pub limit: Option<usize>,

    /// Context window in tokens for conversations whose store records none
    #[arg(long, value_name = "N")]
    pub context_limit: Option<i64>,

    /// Also select conversations archived in the agent (opencode's and goose's archived ones), which
    /// batch selections leave out
    #[arg(long)]
    pub include_archived: bool,
}

impl SelectArgs {
    pub fn selector(&self, positional: &[String]) -> Selector {
        let mut ids = positional.to_vec();
        ids.extend(self.ids.iter().cloned());
        Selector {
            ids,
            follow: self.follow,
            all_over: self.all_over,
            older_than: self.older_than,
            since: self.since,
            idle: self.idle,
            provider: self.provider.clone(),
            limit: self.limit,
            context_limit: self.context_limit,
            include_archived: self.include_archived,
        }
    }
}

#[derive(Debug, Args)]
pub struct ListArgs {
    #[command(flatten)]
    pub select: SelectArgs,

    /// List each skipped conversation with its reason (by default, one line per reason)
    #[arg(long, short)]
    pub verbose: bool,

    /// Machine-readable output on stdout (see docs/json-output.md)
    #[arg(long)]
    pub json: bool,

    /// Only the selected conversations' IDs on stdout, one per line, newest first (for
    /// scripts); skipped ones are counted on stderr
    #[arg(long = "ids", conflicts_with = "json")]
    pub ids_only: bool,
}

#[derive(Debug, Args)]
pub struct ShowArgs {
    /// The conversation ID, or a unique prefix of it
    pub id: String,

    /// Only the last N messages (the header still counts them all)
    #[arg(long, value_name = "N", conflicts_with = "raw")]
    pub last: Option<usize>,

    /// Never page the transcript ($PAGER, default `less -FRX`, is used on a terminal)
    #[arg(long)]
    pub no_pager: bool,

    /// The provider-neutral messages as JSON
    #[arg(long, conflicts_with = "raw")]
    pub json: bool,

    /// Also what the agent keeps but does not show or send: opencode's bookkeeping parts
    /// (step-start, step-finish, snapshot, patch, agent, retry) with what they hold, goose's
    /// rows hidden by a compaction (which goose's UI still shows)
    #[arg(long, short, conflicts_with_all = ["raw", "json"])]
    pub verbose: bool,

    /// Every stored row of the conversation, as stored: kodelet's raw_messages; for
    /// docker-agent, goose and opencode a JSON array of the rows (session_items; messages;
    /// message rows with their part rows; opencode 2.x session_message), each column as stored
    #[arg(long)]
    pub raw: bool,
}

#[derive(Debug, Clone, Copy, ValueEnum, PartialEq, Eq)]
pub enum StrategyArg {
    /// A model writes the summary (default when an LLM provider is configured)
    Llm,
    /// Deterministic offline summary of the head (default without an LLM)
    Extractive,
    /// No summary: replace old tool outputs with short placeholders
    Prune,
}

#[derive(Debug, Args)]
pub struct ApplyArgs {
    /// The plan file (`compact --plan-out`); its store unless --db names one
    #[arg(value_name = "FILE")]
    pub file: PathBuf,

    /// Machine-readable report on stdout (see docs/json-output.md)
    #[arg(long)]
    pub json: bool,

    /// Do not run the after_compaction hooks on what is written
    #[arg(long)]
    pub no_hooks: bool,

    /// Check every proposal against the store as `apply` would and report what would be
    /// written; write nothing
    #[arg(long, short = 'n')]
    pub dry_run: bool,

    /// Skip a proposal whose retention score, computed again on what would be written (an
    /// edited summary may have dropped artifacts), is under R, from 0 to 1 [default: off]
    #[arg(long, value_name = "R", value_parser = parse_retention)]
    pub min_retention: Option<f64>,
}

#[derive(Debug, Args)]
pub struct CompactArgs {
    /// Conversation IDs or unique prefixes (same as --id)
    #[arg(value_name = "ID")]
    pub positional: Vec<String>,

    #[command(flatten)]
    pub select: SelectArgs,

    /// Print the plan; write nothing
    #[arg(long, short = 'n')]
    pub dry_run: bool,

    /// Machine-readable report on stdout (see docs/json-output.md)
    #[arg(long)]
    pub json: bool,

    /// Open the one selected conversation's proposed summary in $VISUAL or $EDITOR (else vi)
    /// first; saving writes it, an empty file or a failing editor writes nothing (exit 7).
    /// Terminal only
    #[arg(long, conflicts_with_all = ["dry_run", "json", "plan_out"])]
    pub edit: bool,

    /// Write every proposal (summary, kept range, retention) to FILE as a plan, and nothing to
    /// the store; `agent-db apply FILE` writes it
    #[arg(long, value_name = "FILE", conflicts_with = "dry_run")]
    pub plan_out: Option<PathBuf>,

    /// Tokens of recent history to keep verbatim, instead of what --target allows [0 keeps only
    /// the latest instruction]
    #[arg(long, value_name = "N")]
    pub keep_tokens: Option<usize>,

    /// Land each conversation at or under this estimated utilization: the kept tail is what the
    /// window allows after the fixed overhead (system prompt, tools) and the summary
    /// [default: 0.4 (40%); config compact.target]
    #[arg(long, value_name = "RATIO", value_parser = parse_target)]
    pub target: Option<f64>,

    /// Do not write a compaction whose retention score (the share of the summarized span's
    /// paths, commands, errors, identifiers, URLs, rules, to-dos and latest instruction found in
    /// the result) is under R, from 0 to 1; the conversation is skipped with the reason
    /// [default: off; 0.8 with the llm strategy; config compact.min_retention]
    #[arg(long, value_name = "R", value_parser = parse_retention)]
    pub min_retention: Option<f64>,

    /// When a result is under the retention floor (or a model's answer is rejected twice),
    /// try the next strategy (llm, then
    /// extractive, then prune; prune is passed over on append-only stores) and write the first
    /// that reaches it; the row names the strategy that landed and why
    #[arg(long)]
    pub fallback: bool,

    /// Compact even conversations the stall guard protects (compacted fewer than 10 messages
    /// ago, or whose last compaction saved under 10%), conversations already at or under the
    /// target, and compactions that would save less than compact.min_saving
    #[arg(long)]
    pub force: bool,

    /// How to compact the head [default: llm when an LLM provider is configured, else extractive]
    #[arg(long, value_enum)]
    pub strategy: Option<StrategyArg>,

    /// With --strategy prune: also replace images and base64 payloads by placeholders
    #[arg(long)]
    pub elide_images: bool,

    /// Do not ask for confirmation (agent-db only asks for batch selections on a terminal)
    #[arg(long, short)]
    pub yes: bool,

    /// List each conversation the selection skipped, with its reason (by default, one line per
    /// reason)
    #[arg(long, short)]
    pub verbose: bool,

    /// Do not run compaction hooks (see `agent-db hooks`)
    #[arg(long)]
    pub no_hooks: bool,

    /// How long a hook may run before it is killed: seconds (5) or a duration (2m) [default: 30s]
    #[arg(long, value_name = "DUR", value_parser = parse_seconds_or_duration)]
    pub hook_timeout: Option<Duration>,

    /// Conversations compacted at once, at least 1 [default: 4]
    #[arg(long, value_name = "N", value_parser = parse_at_least_one)]
    pub concurrency: Option<usize>,

    /// Threads that load, decode and count conversations and run the offline strategies
    /// [default: one per core]
    #[arg(long, value_name = "N", env = "AGENT_DB_JOBS")]
    pub jobs: Option<usize>,

    #[command(flatten)]
    pub llm: LlmArgs,
}

/// LLM settings (each overrides the config file and the environment).
#[derive(Debug, Args, Clone, Default)]
#[command(next_help_heading = "LLM summarizer")]
pub struct LlmArgs {
    /// Summarizer API: openai (any OpenAI-compatible server) or anthropic
    #[arg(long, value_name = "NAME")]
    pub llm_provider: Option<String>,

    /// Summarizer model [default: gpt-4.1-mini / claude-haiku-4-5]
    #[arg(long, value_name = "MODEL")]
    pub model: Option<String>,

    /// API base URL, e.g. http://127.0.0.1:11434/v1 for Ollama
    #[arg(long, value_name = "URL")]
    pub base_url: Option<String>,

    /// Longest summary the model may write, in tokens [default: 4096]
    #[arg(long, value_name = "N")]
    pub max_summary_tokens: Option<u32>,

    /// Input-token budget of each summary request; longer histories are summarized in chunks
    /// [default: from the model's context window]
    #[arg(long, value_name = "N")]
    pub summary_context: Option<usize>,

    /// Recipe name or path (see `agent-db recipes`) [default: compact]
    #[arg(long, value_name = "NAME|PATH")]
    pub recipe: Option<String>,

    /// Extra instructions, added to the recipe (never replacing it)
    #[arg(long, value_name = "TEXT")]
    pub instructions: Option<String>,

    /// Summarizer sampling temperature, 0 to 2 [default: 0]
    #[arg(long, value_name = "T")]
    pub temperature: Option<f64>,

    /// Elide old successful tool outputs from what the summarizer reads (failed ones and the
    /// last few are kept whole); the report says what it saved
    #[arg(long)]
    pub mask_observations: bool,

    /// Stop starting new conversations once the summarizer spend reaches USD
    #[arg(long, value_name = "USD")]
    pub max_cost: Option<f64>,

    /// Per-request timeout, e.g. 90s [default: 120s]
    #[arg(long, value_name = "DUR", value_parser = parse_duration)]
    pub timeout: Option<Duration>,
}

#[derive(Debug, Args)]
pub struct HistoryArgs {
    /// Only this conversation (ID or unique prefix)
    pub id: Option<String>,

    /// Only the N most recent compactions (shown oldest first)
    #[arg(long, value_name = "N")]
    pub limit: Option<usize>,

    /// Only compactions made within the last DUR (e.g. 1d, 12h)
    #[arg(long, value_name = "DUR", value_parser = parse_duration)]
    pub since: Option<Duration>,

    /// Machine-readable output on stdout
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
#[command(group(clap::ArgGroup::new("what").required(true).multiple(true).args(["id", "compaction", "all_since"])))]
pub struct RestoreArgs {
    /// The conversation to restore, ID or unique prefix (its latest compaction, or --compaction N)
    pub id: Option<String>,

    /// A specific compaction (its number from `agent-db history`; the conversation is optional)
    #[arg(long, value_name = "N", conflicts_with = "all_since")]
    pub compaction: Option<i64>,

    /// Restore every compaction made within the last DUR (newest first)
    #[arg(long, value_name = "DUR", value_parser = parse_duration, conflicts_with = "id")]
    pub all_since: Option<Duration>,

    /// Restore even if the conversation changed after the compaction (the later changes are lost)
    #[arg(long)]
    pub force: bool,

    /// Say what would be restored (or refused); write nothing
    #[arg(long, short = 'n')]
    pub dry_run: bool,

    /// Machine-readable output on stdout
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct PruneArchiveArgs {
    /// Prune archives of compactions made more than DUR ago (e.g. 90d)
    #[arg(long, value_name = "DUR", value_parser = parse_duration, required = true)]
    pub older_than: Duration,

    /// Say what would be pruned; delete nothing
    #[arg(long, short = 'n')]
    pub dry_run: bool,

    /// Do not ask (agent-db asks only when stdin and stderr are terminals)
    #[arg(long, short)]
    pub yes: bool,

    /// Then give the freed space back to the file system (as `agent-db vacuum`)
    #[arg(long)]
    pub vacuum: bool,

    /// Machine-readable output on stdout
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct ReclaimArgs {
    /// Print the bytes per category that would be removed; change nothing
    #[arg(long, short = 'n')]
    pub dry_run: bool,

    /// Leave conversations the agent wrote to in the last DUR alone [default: 10m]
    #[arg(long, value_name = "DUR", value_parser = parse_duration)]
    pub idle: Option<Duration>,

    /// Do not ask (agent-db asks only when stdin and stderr are terminals)
    #[arg(long, short)]
    pub yes: bool,

    /// Then give the freed space back to the file system (as `agent-db vacuum`)
    #[arg(long)]
    pub vacuum: bool,

    /// Machine-readable output on stdout
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct RetireArgs {
    /// Conversation IDs or unique prefixes (same as --id)
    #[arg(value_name = "ID")]
    pub positional: Vec<String>,

    #[command(flatten)]
    pub select: SelectArgs,

    /// The cold file [default: the store's path + .agent-db-cold.db]
    #[arg(long, value_name = "PATH")]
    pub to: Option<std::path::PathBuf>,

    /// Print what would move (conversations, rows, bytes); write nothing
    #[arg(long, short = 'n')]
    pub dry_run: bool,

    /// Do not ask (agent-db asks only when stdin and stderr are terminals)
    #[arg(long, short)]
    pub yes: bool,

    /// Machine-readable output on stdout
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct StatsArgs {
    /// Machine-readable output on stdout (see docs/json-output.md)
    #[arg(long)]
    pub json: bool,

    /// Context window in tokens for conversations whose store records none (utilization)
    #[arg(long, value_name = "N")]
    pub context_limit: Option<i64>,
}

#[derive(Debug, Args)]
pub struct VacuumArgs {
    /// Say how much would be given back (the store's free pages); change nothing
    #[arg(long, short = 'n')]
    pub dry_run: bool,

    /// Write a compacted copy to PATH (VACUUM INTO; must not exist); the store is unchanged
    #[arg(long, value_name = "PATH")]
    pub into: Option<std::path::PathBuf>,

    /// Machine-readable output on stdout
    #[arg(long)]
    pub json: bool,
}

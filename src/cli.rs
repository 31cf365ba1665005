//! Command-line definitions (clap types only). Shell completions are generated from these.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand, ValueEnum};

use agent_db::select::{parse_duration, Selector};

const AFTER_HELP: &str = "\
Examples:
  agent-db list --all-over 0.7                 conversations using >= 70% of their context window
  agent-db compact --follow --dry-run          what compacting the latest conversation would do
  agent-db compact --all-over 0.7 --older-than 1d --yes --quiet   (cron)
  agent-db show 3f2a... --json                 one conversation as provider-neutral JSON

The store is --db PATH, else $AGENT_DB_PATH, else kodelet's $KODELET_BASE_PATH/storage.db or
~/.kodelet/storage.db, else docker-agent's ~/.cagent/session.db.
Exit codes: 0 ok, 1 some conversations failed, 2 usage, 3 config, 4 store unusable,
5 not found or unreadable, 6 store locked, 7 restore refused.";

#[derive(Debug, Parser)]
#[command(
    name = "agent-db",
    version,
    about = "Offline, transactional, undoable compaction for AI coding agents' conversation stores",
    long_about = "agent-db opens an agent's SQLite conversation store (kodelet's storage.db), selects \
conversations, compacts each one (summarizes older history, keeps the recent tail verbatim) and \
writes the result back in one transaction per conversation, archiving the original so any \
compaction can be undone with `agent-db restore`.",
    after_help = AFTER_HELP
)]
pub struct Cli {
    /// The conversation store (SQLite file)
    #[arg(long, global = true, env = "AGENT_DB_PATH", value_name = "PATH")]
    pub db: Option<PathBuf>,

    /// Print only errors (no status lines, no progress)
    #[arg(long, short, global = true)]
    pub quiet: bool,

    /// Configuration file [default: $XDG_CONFIG_HOME/agent-db/config.toml]
    #[arg(long, global = true, env = "AGENT_DB_CONFIG", value_name = "PATH")]
    pub config: Option<PathBuf>,

    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Create a new, empty store in kodelet's layout (for demos and tests)
    Init,
    /// List conversations with their stored context usage (cheap: no message bodies are read)
    List(ListArgs),
    /// Show one conversation as a readable transcript, neutral JSON or the stored JSON
    Show(ShowArgs),
    /// Compact the selected conversations (use --dry-run to see the plan first)
    Compact(Box<CompactArgs>),
    /// Show the audit log of compactions (all, or one conversation's)
    History(HistoryArgs),
    /// Undo compactions: put the archived original back, byte-identical
    Restore(RestoreArgs),
    /// Delete archived originals older than DUR to reclaim space (they can no longer be restored)
    PruneArchive(PruneArchiveArgs),
    /// Print the effective settings (defaults < config file < environment < flags), secrets redacted
    Config {
        /// Machine-readable output on stdout
        #[arg(long)]
        json: bool,
    },
    /// List the compaction hooks found and the events each handles
    Hooks {
        /// Machine-readable output on stdout
        #[arg(long)]
        json: bool,
    },
    /// List the summary recipes the llm strategy can use
    Recipes {
        /// Machine-readable output on stdout
        #[arg(long)]
        json: bool,
    },
    /// Print shell completions
    Completions {
        /// The shell
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
}

/// How to pick conversations. Selectors combine with AND.
#[derive(Debug, Args, Clone, Default)]
pub struct SelectArgs {
    /// A conversation ID (repeatable)
    #[arg(long = "id", value_name = "ID")]
    pub ids: Vec<String>,

    /// The most recently updated conversation
    #[arg(long)]
    pub follow: bool,

    /// Conversations whose stored context utilization (currentContextWindow /
    /// maxContextWindow) is at least RATIO, e.g. 0.7
    #[arg(long, value_name = "RATIO")]
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

    /// Context limit in tokens for conversations with no stored maxContextWindow
    #[arg(long, value_name = "N")]
    pub context_limit: Option<i64>,
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
        }
    }
}

#[derive(Debug, Args)]
pub struct ListArgs {
    #[command(flatten)]
    pub select: SelectArgs,

    /// Machine-readable output on stdout (see docs/json-output.md)
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct ShowArgs {
    /// The conversation ID
    pub id: String,

    /// The provider-neutral messages as JSON
    #[arg(long, conflicts_with = "raw")]
    pub json: bool,

    /// The stored raw_messages JSON, exactly as stored
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
pub struct CompactArgs {
    /// Conversation IDs (same as --id)
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

    /// Tokens of recent history to keep verbatim [default: 20% of the context limit, at most
    /// 20000; 0 keeps only the latest instruction]
    #[arg(long, value_name = "N")]
    pub keep_tokens: Option<usize>,

    /// How to compact the head [default: llm when an LLM provider is configured, else extractive]
    #[arg(long, value_enum)]
    pub strategy: Option<StrategyArg>,

    /// With --strategy prune: also replace images and base64 payloads by placeholders
    #[arg(long)]
    pub elide_images: bool,

    /// Do not ask for confirmation (agent-db only asks for batch selections on a terminal)
    #[arg(long, short)]
    pub yes: bool,

    /// Do not run compaction hooks (see `agent-db hooks`)
    #[arg(long)]
    pub no_hooks: bool,

    /// Seconds before a hook is killed [default: 30s]
    #[arg(long, value_name = "DUR", value_parser = parse_duration)]
    pub hook_timeout: Option<Duration>,

    /// Conversations compacted at once [default: 4]
    #[arg(long, value_name = "N")]
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

    /// Stop starting new conversations once the summarizer spend reaches USD
    #[arg(long, value_name = "USD")]
    pub max_cost: Option<f64>,

    /// Per-request timeout, e.g. 90s [default: 120s]
    #[arg(long, value_name = "DUR", value_parser = parse_duration)]
    pub timeout: Option<Duration>,
}

#[derive(Debug, Args)]
pub struct HistoryArgs {
    /// Only this conversation
    pub id: Option<String>,

    /// Machine-readable output on stdout
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
#[command(group(clap::ArgGroup::new("what").required(true).args(["id", "all_since"])))]
pub struct RestoreArgs {
    /// The conversation to restore (its latest compaction, or --compaction N)
    pub id: Option<String>,

    /// A specific compaction (its id from `agent-db history`)
    #[arg(long, value_name = "N", requires = "id")]
    pub compaction: Option<i64>,

    /// Restore every compaction made within the last DUR (newest first)
    #[arg(long, value_name = "DUR", value_parser = parse_duration, conflicts_with = "id")]
    pub all_since: Option<Duration>,

    /// Restore even if the conversation changed after the compaction (the later changes are lost)
    #[arg(long)]
    pub force: bool,

    /// Machine-readable output on stdout
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct PruneArchiveArgs {
    /// Prune archives of compactions made more than DUR ago (e.g. 90d)
    #[arg(long, value_name = "DUR", value_parser = parse_duration, required = true)]
    pub older_than: Duration,

    /// Machine-readable output on stdout
    #[arg(long)]
    pub json: bool,
}

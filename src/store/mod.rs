//! Opening conversation stores: path resolution, safe open, schema detection, agent-db's own
//! migrations, and the store-kind dispatch.
//!
//! This is the only layer that runs SQL. Opening never creates or changes anything in a file
//! that is not already a store agent-db recognizes: the file is opened without `CREATE`, its
//! `journal_mode` is never changed, and agent-db's own tables are added only by
//! [`Store::ensure_agent_tables`], which write commands call after detection succeeded.

pub mod agent_tables;
pub mod archive;
pub mod docker_agent;
pub mod kodelet;
pub mod kodelet_summaries;
pub mod kodelet_write;
pub mod lock;
pub mod prefix;
pub mod preflight;
pub mod restore;
pub mod stats;
pub mod vacuum;

use std::path::{Path, PathBuf};

use rusqlite::{Connection, OpenFlags};

use crate::error::{Error, Result, SqlContext};

/// The kinds of store agent-db understands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum StoreKind {
    Kodelet,
    DockerAgent,
}

impl StoreKind {
    pub fn name(self) -> &'static str {
        match self {
            StoreKind::Kodelet => "kodelet",
            StoreKind::DockerAgent => "docker-agent",
        }
    }
}

/// Whether a command only reads or also writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    Read,
    Write,
}

/// An open, recognized store.
pub struct Store {
    pub path: PathBuf,
    pub kind: StoreKind,
    pub conn: Connection,
    pub access: Access,
}

/// Where the store came from, for messages.
#[derive(Debug, Clone)]
pub struct Resolved {
    pub path: PathBuf,
    pub how: &'static str,
}

/// How the store was chosen besides `--db`: `--agent` (or `[store] agent`) and `[store] path`.
#[derive(Debug, Clone, Default)]
pub struct StoreChoice {
    /// `--agent` on the command line.
    pub agent_flag: Option<StoreKind>,
    /// `[store] path` from the config file.
    pub config_path: Option<PathBuf>,
    /// `[store] agent` from the config file.
    pub config_agent: Option<StoreKind>,
}

impl StoreKind {
    /// `kodelet` or `docker-agent`.
    pub fn parse(s: &str) -> Option<StoreKind> {
        match s {
            "kodelet" => Some(StoreKind::Kodelet),
            "docker-agent" => Some(StoreKind::DockerAgent),
            _ => None,
        }
    }

    /// This agent's default store file.
    pub fn default_path(self) -> PathBuf {
        match self {
            StoreKind::Kodelet => match std::env::var_os("KODELET_BASE_PATH") {
                Some(base) if !base.is_empty() => PathBuf::from(base).join("storage.db"),
                _ => home_dir().join(".kodelet").join("storage.db"),
            },
            StoreKind::DockerAgent => home_dir().join(".cagent").join("session.db"),
        }
    }
}

/// Resolve the store path: `--db` (or `AGENT_DB_PATH`, which clap folds into it), else the
/// agents' default locations.
pub fn resolve_path(explicit: Option<&Path>) -> Result<Resolved> {
    resolve_store(explicit, &StoreChoice::default())
}

/// Resolve the store path: `--db`/`AGENT_DB_PATH`, else `--agent`'s default file, else
/// `[store] path`, else `[store] agent`'s default file, else whichever agent's default store
/// exists (an error naming both, with the flags to choose, when both do).
pub fn resolve_store(explicit: Option<&Path>, choice: &StoreChoice) -> Result<Resolved> {
    if let Some(p) = explicit {
        return Ok(Resolved {
            path: p.to_path_buf(),
            how: "--db",
        });
    }
    if let Some(kind) = choice.agent_flag {
        return Ok(Resolved {
            path: kind.default_path(),
            how: "--agent",
        });
    }
    if let Some(p) = &choice.config_path {
        return Ok(Resolved {
            path: p.clone(),
            how: "[store] path",
        });
    }
    if let Some(kind) = choice.config_agent {
        return Ok(Resolved {
            path: kind.default_path(),
            how: "[store] agent",
        });
    }
    let kodelet = StoreKind::Kodelet.default_path();
    let docker_agent = StoreKind::DockerAgent.default_path();
    match (kodelet.is_file(), docker_agent.is_file()) {
        (true, true) => Err(Error::AmbiguousStore {
            path: kodelet.clone(),
            detail: format!(
                "two conversation stores found: {} (kodelet) and {} (docker-agent); choose one with \
                 --agent kodelet or --agent docker-agent (or --db PATH, or `agent = \"kodelet\"` under [store] in the config file)",
                kodelet.display(),
                docker_agent.display()
            ),
        }),
        (true, false) => Ok(Resolved {
            path: kodelet,
            how: "kodelet default",
        }),
        (false, true) => Ok(Resolved {
            path: docker_agent,
            how: "docker-agent default",
        }),
        (false, false) => Err(Error::StoreNotFound {
            looked: vec![
                "--db / AGENT_DB_PATH (not set)".to_string(),
                format!("{} (kodelet)", kodelet.display()),
                format!("{} (docker-agent)", docker_agent.display()),
            ],
        }),
    }
}

fn home_dir() -> PathBuf {
    std::env::var_os("HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("."))
}

fn wal_path(path: &Path) -> PathBuf {
    let mut s = path.as_os_str().to_owned();
    s.push("-wal");
    PathBuf::from(s)
}

/// Open a connection compatibly with a live agent. See the module doc for the guarantees.
pub fn connect(path: &Path, access: Access) -> Result<Connection> {
    if !path.exists() {
        return Err(Error::MissingFile {
            path: path.to_path_buf(),
        });
    }
    if path.is_dir() {
        return Err(Error::NotSqlite {
            path: path.to_path_buf(),
            detail: "it is a directory".into(),
        });
    }
    if access == Access::Write {
        // Before the first byte is read: opening a WAL store creates its -wal/-shm files, which
        // a store that cannot be written would keep as debris.
        preflight::check_writable(path)?;
    }
    // A reader whose connection is the last to close would checkpoint an existing WAL into the
    // main file; when a WAL exists, pure reads use a read-only connection so the files stay as
    // they were. Without a WAL, a read-write connection that only reads leaves every byte alone.
    let read_only = access == Access::Read && wal_path(path).exists();
    let mut flags = OpenFlags::SQLITE_OPEN_NO_MUTEX | OpenFlags::SQLITE_OPEN_URI;
    flags |= if read_only {
        OpenFlags::SQLITE_OPEN_READ_ONLY
    } else {
        OpenFlags::SQLITE_OPEN_READ_WRITE
    };
    let conn = Connection::open_with_flags(path, flags).at(path)?;
    conn.busy_timeout(std::time::Duration::from_millis(5000))
        .at(path)?;
    conn.pragma_update(None, "foreign_keys", "ON").at(path)?;
    Ok(conn)
}

/// The user tables in the file, or a `NotSqlite` error.
fn table_names(conn: &Connection, path: &Path) -> Result<Vec<String>> {
    let mut stmt =
        match conn.prepare("SELECT name FROM sqlite_master WHERE type='table' ORDER BY name") {
            Ok(s) => s,
            Err(e) => return Err(classify_open_error(path, e)),
        };
    let rows = stmt
        .query_map([], |r| r.get::<_, String>(0))
        .map_err(|e| classify_open_error(path, e))?;
    rows.collect::<std::result::Result<Vec<_>, _>>()
        .map_err(|e| classify_open_error(path, e))
}

fn classify_open_error(path: &Path, e: rusqlite::Error) -> Error {
    match &e {
        rusqlite::Error::SqliteFailure(f, _)
            if matches!(
                f.code,
                rusqlite::ErrorCode::NotADatabase | rusqlite::ErrorCode::DatabaseCorrupt
            ) =>
        {
            Error::NotSqlite {
                path: path.to_path_buf(),
                detail: e.to_string(),
            }
        }
        _ => Error::Sqlite {
            path: path.to_path_buf(),
            source: e,
        },
    }
}

impl Store {
    /// Open and recognize the store at `path`.
    pub fn open(path: &Path, access: Access) -> Result<Store> {
        let conn = connect(path, access)?;
        let tables = table_names(&conn, path)?;
        let has = |t: &str| tables.iter().any(|n| n == t);
        let kind = if has("conversations")
            && has("conversation_summaries")
            && has("schema_migrations")
        {
            kodelet::check_schema(&conn, path)?;
            StoreKind::Kodelet
        } else if has("sessions") && has("session_items") && has("migrations") {
            docker_agent::check_schema(&conn, path)?;
            StoreKind::DockerAgent
        } else {
            let detail = if tables.is_empty() {
                "the database is empty".to_string()
            } else {
                let shown: Vec<_> = tables.iter().take(8).cloned().collect();
                format!(
                    "expected kodelet's conversations, conversation_summaries and schema_migrations tables, \
                     or docker-agent's sessions, session_items and migrations tables; found: {}",
                    shown.join(", ")
                )
            };
            return Err(Error::UnknownSchema {
                path: path.to_path_buf(),
                detail,
            });
        };
        Ok(Store {
            path: path.to_path_buf(),
            kind,
            conn,
            access,
        })
    }

    /// The journal mode, as the file has it (never changed by agent-db).
    pub fn journal_mode(&self) -> Result<String> {
        self.conn
            .pragma_query_value(None, "journal_mode", |r| r.get(0))
            .at(&self.path)
    }

    /// Whether agent-db's own tables exist yet (they are created on the first write).
    pub fn has_agent_tables(&self) -> Result<bool> {
        agent_tables::present(&self.conn).at(&self.path)
    }

    /// Create or upgrade agent-db's own tables (write commands only).
    pub fn ensure_agent_tables(&mut self) -> Result<()> {
        let path = self.path.clone();
        agent_tables::migrate(&mut self.conn).at(&path)
    }
}

/// What listing and selection know of a conversation, read without touching its messages.
#[derive(Debug, Clone, serde::Serialize)]
pub struct ConversationMeta {
    pub id: String,
    /// The conversation's name (kodelet's `summary` column).
    pub name: Option<String>,
    pub provider: String,
    pub api_mode: Option<String>,
    pub model: Option<String>,
    pub message_count: Option<i64>,
    /// Stored `usage.currentContextWindow`.
    pub current_context: Option<i64>,
    /// Stored `usage.maxContextWindow`.
    pub max_context: Option<i64>,
    /// Stored cumulative `usage.inputTokens` / `usage.outputTokens`.
    pub input_tokens: Option<i64>,
    pub output_tokens: Option<i64>,
    /// The working directory the agent ran in, when the store records it.
    pub cwd: Option<String>,
    pub created_at: String,
    pub updated_at: String,
    /// A problem reading the stored usage, reported instead of failing the whole listing.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub problem: Option<String>,
}

#[derive(serde::Deserialize)]
struct UsageWindow {
    #[serde(rename = "currentContextWindow")]
    current: Option<i64>,
    #[serde(rename = "maxContextWindow")]
    max: Option<i64>,
    #[serde(rename = "inputTokens")]
    input: Option<i64>,
    #[serde(rename = "outputTokens")]
    output: Option<i64>,
}

#[derive(serde::Deserialize, Default)]
struct MetaFields {
    model: Option<String>,
    api_mode: Option<String>,
}

impl ConversationMeta {
    #[allow(clippy::too_many_arguments)]
    pub fn from_columns(
        id: String,
        provider: String,
        usage: Option<String>,
        created_at: String,
        updated_at: String,
        name: Option<String>,
        metadata: Option<&str>,
        message_count: Option<i64>,
    ) -> ConversationMeta {
        let mut problem = None;
        let w = match usage.as_deref() {
            None => None,
            Some(u) => match serde_json::from_str::<UsageWindow>(u) {
                Ok(w) => Some(w),
                Err(e) => {
                    problem = Some(format!("usage is not valid JSON ({e})"));
                    None
                }
            },
        };
        let pick = |f: fn(&UsageWindow) -> Option<i64>| w.as_ref().and_then(f);
        let meta: MetaFields = metadata
            .filter(|m| !m.is_empty())
            .and_then(|m| serde_json::from_str(m).ok())
            .unwrap_or_default();
        ConversationMeta {
            id,
            name,
            provider,
            api_mode: meta.api_mode,
            model: meta.model,
            message_count,
            current_context: pick(|w| w.current),
            max_context: pick(|w| w.max),
            input_tokens: pick(|w| w.input),
            output_tokens: pick(|w| w.output),
            cwd: None,
            created_at,
            updated_at,
            problem,
        }
    }

    /// Stored utilization `current / max`; with `context_limit` the limit replaces a missing or
    /// zero `maxContextWindow`.
    pub fn utilization(&self, context_limit: Option<i64>) -> Option<f64> {
        let current = self.current_context?;
        let max = match self.max_context {
            Some(m) if m > 0 => m,
            _ => context_limit.filter(|l| *l > 0)?,
        };
        Some(current as f64 / max as f64)
    }

    /// The wire format, or why it cannot be compacted.
    pub fn format(&self) -> Result<crate::message::Format, String> {
        crate::message::Format::detect(&self.provider, self.api_mode.as_deref())
    }

    /// Parsed `updated_at`, or an error naming this conversation.
    pub fn updated(&self) -> Result<chrono::DateTime<chrono::FixedOffset>> {
        crate::gotime::parse(&self.updated_at)
            .map_err(|e| Error::conversation(&self.id, format!("updated_at: {e}")))
    }
}

impl Store {
    /// Stream every conversation's metadata in listing order; `f` returns `false` to stop.
    pub fn scan(&self, f: impl FnMut(ConversationMeta) -> bool) -> Result<()> {
        self.scan_prefiltered(kodelet::Prefilter::default(), f)
    }

    /// [`Store::scan`], leaving out in SQL rows the selection would drop silently (kodelet; a
    /// store that cannot tell in advance passes every row).
    pub fn scan_prefiltered(
        &self,
        prefilter: kodelet::Prefilter,
        f: impl FnMut(ConversationMeta) -> bool,
    ) -> Result<()> {
        match self.kind {
            StoreKind::Kodelet => kodelet::scan(&self.conn, &self.path, prefilter, f),
            StoreKind::DockerAgent => docker_agent::scan(&self.conn, &self.path, prefilter, f),
        }
    }

    /// The distinct providers of the store's conversations (read from an index, never from
    /// message bodies), sorted.
    pub fn providers(&self) -> Result<Vec<String>> {
        let sql = match self.kind {
            StoreKind::Kodelet => "SELECT DISTINCT CAST(provider AS TEXT) FROM conversations WHERE provider IS NOT NULL",
            StoreKind::DockerAgent => {
                return Ok(vec![docker_agent::PROVIDER.to_string()]);
            }
        };
        let mut stmt = self.conn.prepare(sql).at(&self.path)?;
        let rows = stmt
            .query_map([], |r| {
                Ok(match r.get_ref(0)? {
                    rusqlite::types::ValueRef::Text(t) => String::from_utf8_lossy(t).into_owned(),
                    _ => String::new(),
                })
            })
            .at(&self.path)?;
        let mut v: Vec<String> = rows.collect::<std::result::Result<_, _>>().at(&self.path)?;
        v.sort();
        v.dedup();
        Ok(v)
    }

    /// One conversation's metadata.
    pub fn meta(&self, id: &str) -> Result<ConversationMeta> {
        match self.kind {
            StoreKind::Kodelet => kodelet::meta(&self.conn, &self.path, id)?
                .ok_or_else(|| Error::ConversationNotFound { id: id.to_string() }),
            StoreKind::DockerAgent => docker_agent::meta(&self.conn, &self.path, id)?
                .ok_or_else(|| Error::ConversationNotFound { id: id.to_string() }),
        }
    }
}

/// The version of a conversation as read: the writer compares it inside its transaction, and
/// skips the conversation when it differs (a live agent wrote to it).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct VersionToken {
    /// A store-specific marker (kodelet: `updated_at`).
    pub updated_at: String,
    /// sha256 of the conversation's stored history.
    pub raw_sha256: String,
}

/// One conversation as loaded for planning, in a store-neutral shape.
#[derive(Debug, Clone)]
pub struct StoredConversation {
    pub id: String,
    /// The history the agent currently sends, as a JSON array of the store's message JSON.
    pub raw_messages: String,
    pub version: VersionToken,
    /// Store positions of each message, for stores that append instead of rewriting (for
    /// docker-agent: the loaded item-slice index); empty for kodelet.
    pub slots: Vec<i64>,
}

impl StoredConversation {
    /// A conversation whose version is its `updated_at` marker and the hash of its history.
    pub fn new(
        id: impl Into<String>,
        raw_messages: impl Into<String>,
        updated_at: impl Into<String>,
    ) -> Self {
        let raw_messages = raw_messages.into();
        StoredConversation {
            id: id.into(),
            version: VersionToken {
                updated_at: updated_at.into(),
                raw_sha256: crate::plan::sha256_hex(&raw_messages),
            },
            raw_messages,
            slots: Vec::new(),
        }
    }
}

/// A compaction ready to be written, in a store-neutral shape: each store's writer takes what
/// it needs (kodelet rewrites `raw_messages`; an append-only store appends `summary` and points
/// at `tail_start`).
#[derive(Debug, Clone)]
pub struct Proposal {
    pub id: String,
    pub format: crate::message::Format,
    pub version: VersionToken,
    /// The complete new history (kodelet's `raw_messages`).
    pub raw_messages: String,
    /// The summary text, when the strategy wrote one.
    pub summary: Option<String>,
    /// Index (in the loaded messages) of the first message kept verbatim.
    pub tail_start: usize,
    /// Index of the latest instruction put back after the summary, when the cut fell after it.
    pub reinsert: Option<usize>,
    /// The loaded [`StoredConversation::slots`].
    pub slots: Vec<i64>,
    pub tokens_after: usize,
    pub call_ids: std::collections::HashSet<String>,
    pub audit: archive::AuditEntry,
}

/// The outcome of a write.
#[derive(Debug, Clone, PartialEq)]
pub enum Written {
    Committed {
        compaction_id: i64,
    },
    /// The conversation changed (or vanished) since it was read; nothing was written.
    Changed(String),
}

impl StoreKind {
    /// Whether the store can hold a rewritten head (the `prune` strategy), or only append.
    pub fn rewrites_history(self) -> bool {
        match self {
            StoreKind::Kodelet => true,
            StoreKind::DockerAgent => false,
        }
    }
}

/// Write one compaction in the store's own way, in one transaction.
pub fn commit(
    kind: StoreKind,
    conn: &mut Connection,
    path: &Path,
    p: &Proposal,
    now: &str,
) -> Result<Written> {
    match kind {
        StoreKind::Kodelet => kodelet_write::commit(conn, path, p, now),
        StoreKind::DockerAgent => docker_agent::commit(conn, path, p, now),
    }
}

impl Store {
    /// Load one conversation for planning.
    pub fn load(&self, id: &str) -> Result<StoredConversation> {
        match self.kind {
            StoreKind::Kodelet => {
                let row = kodelet::load(&self.conn, &self.path, id)?;
                Ok(StoredConversation::new(
                    row.id,
                    row.raw_messages,
                    row.version_marker,
                ))
            }
            StoreKind::DockerAgent => docker_agent::load(&self.conn, &self.path, id),
        }
    }

    /// Whether a compaction can keep a tail verbatim: docker-agent before migration 21 loads
    /// only what follows the last summary, so its plans get a zero tail budget.
    pub fn can_keep_tail(&self) -> Result<bool> {
        match self.kind {
            StoreKind::Kodelet => Ok(true),
            StoreKind::DockerAgent => docker_agent::keeps_tail(&self.conn, &self.path),
        }
    }
}

//! Opening conversation stores: path resolution, safe open, schema detection, and the
//! store-neutral types every store kind speaks (metadata, loaded conversation, proposal).
//!
//! This is the only layer that runs SQL, and the rusqlite connection never leaves it. Each store
//! kind is one folder (`kodelet/`, `docker_agent/`) with an [`kind::Adapter`], registered in
//! [`kind::KINDS`]; the write protocol shared by all of them is [`commit`], run by the
//! [`writer`] thread. Opening never creates or changes anything in a file that is not already a
//! store agent-db recognizes: the file is opened without `CREATE`, its `journal_mode` is never
//! changed, and agent-db's own tables are added only by [`Store::ensure_agent_tables`] and the
//! writer, after detection succeeded.

pub mod agent_tables;
pub mod archive;
pub mod busy;
mod cells;
pub mod commit;
pub mod kind;
pub mod lock;
pub mod originals;
pub mod prefix;
pub mod preflight;
pub mod restore;
mod schema_util;
pub mod stats;
pub mod vacuum;
pub mod writer;

/// Declares each store kind's module (`store/<kind>/`) and lists its `KIND` in [`KINDS`], in
/// detection order, so registering a store is adding its folder's name here.
macro_rules! register_stores {
    ($($kind:ident),+ $(,)?) => {
        $(pub mod $kind;)+
        /// Every store kind agent-db understands, in detection order.
        pub static KINDS: &[StoreKind] = &[$($kind::KIND),+];
    };
}

register_stores!(kodelet, docker_agent, goose, opencode_v2, kilo, opencode);

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rusqlite::{Connection, OpenFlags};

use crate::error::{Error, Result, SqlContext};
pub use crate::models::ContextLimits;
pub use kind::StoreKind;

/// `agent-db init`: a new, empty store at `path` in the layout agent-db's demos and tests use
/// (kodelet's); returns that agent's name. The binary names no store kind itself.
pub fn init_store(path: &Path) -> Result<&'static str> {
    kodelet::init_store(path)?;
    Ok(kodelet::KIND.name())
}

/// Whether a command only reads or also writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    Read,
    Write,
}

/// An open, recognized store. The connection is private to `store/`.
pub struct Store {
    pub path: PathBuf,
    pub kind: StoreKind,
    pub access: Access,
    conn: Connection,
    limits: ContextLimits,
}

/// Everything needed to open the same store again on another thread (the pipeline's loader,
/// planning pool and writer each have their own connection).
#[derive(Debug, Clone)]
pub struct Location {
    pub path: PathBuf,
    /// `[context_limits]` for stores that do not record a context window.
    pub limits: ContextLimits,
}

impl Location {
    /// Open and recognize the store.
    pub fn open(&self, access: Access) -> Result<Store> {
        Store::open_with(&self.path, access, self.limits.clone())
    }
}

/// Where the store came from, for messages.
#[derive(Debug, Clone)]
pub struct Resolved {
    pub path: PathBuf,
    pub how: String,
}

/// How the store was chosen besides `--db` (`--agent` or `[store] agent`, `[store] path`), and
/// what opening it needs from the configuration.
#[derive(Debug, Clone, Default)]
pub struct StoreChoice {
    /// `--agent` on the command line.
    pub agent_flag: Option<StoreKind>,
    /// `[store] path` from the config file.
    pub config_path: Option<PathBuf>,
    /// `[store] agent` from the config file.
    pub config_agent: Option<StoreKind>,
    /// `[context_limits]` from the config file.
    pub context_limits: ContextLimits,
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
            how: "--db".into(),
        });
    }
    if let Some(kind) = choice.agent_flag {
        let path = kind.default_path();
        missing_beside(kind, &path)?;
        return Ok(Resolved {
            path,
            how: "--agent".into(),
        });
    }
    if let Some(p) = &choice.config_path {
        return Ok(Resolved {
            path: p.clone(),
            how: "[store] path".into(),
        });
    }
    if let Some(kind) = choice.config_agent {
        let path = kind.default_path();
        missing_beside(kind, &path)?;
        return Ok(Resolved {
            path,
            how: "[store] agent".into(),
        });
    }
    let found: Vec<(StoreKind, PathBuf)> = StoreKind::all()
        .map(|k| (k, k.default_path()))
        .filter(|(_, p)| p.is_file())
        .collect();
    match found.as_slice() {
        [] => Err(Error::StoreNotFound {
            looked: std::iter::once("--db / AGENT_DB_PATH (not set)".to_string())
                .chain(
                    StoreKind::all()
                        .map(|k| format!("{} ({})", k.default_path().display(), k.name())),
                )
                .collect(),
        }),
        [(kind, path)] => Ok(Resolved {
            path: path.clone(),
            how: format!("{} default", kind.name()),
        }),
        several => Err(ambiguous(several)),
    }
}

/// The agent's default file is missing but the agent's files for other setups are there
/// ([`StoreKind::nearby`]): an error naming them and how to use one, instead of "no such file".
fn missing_beside(kind: StoreKind, path: &Path) -> Result<()> {
    if path.exists() {
        return Ok(());
    }
    let nearby = kind.nearby();
    let Some(first) = nearby.first() else {
        return Ok(());
    };
    let listed: Vec<String> = nearby.iter().map(|p| p.display().to_string()).collect();
    Err(Error::StoreNotFound {
        looked: vec![
            format!(
                "{} ({}'s default: no such file)",
                path.display(),
                kind.name()
            ),
            format!(
                "beside it: {} ({}'s file for another channel; use it with --db {})",
                join_and(&listed, "and"),
                kind.name(),
                first.display()
            ),
        ],
    })
}

/// What `agent-db stores` reports of one file.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Surveyed {
    /// The agent whose store it is (`None`: not recognized).
    pub agent: Option<&'static str>,
    pub path: PathBuf,
    /// Why agent-db looked here (`kodelet default`, `--db`).
    pub how: String,
    /// The file's version in the words the agent's users know (`opencode 2.x`).
    pub version_name: Option<String>,
    /// The file's schema version, as the agent numbers it.
    pub schema_version: Option<String>,
    /// The newest schema version of this agent that agent-db knows.
    pub newest_known: Option<String>,
    /// `read-write`, `read-only` (newer than agent-db knows: listed and shown, never written)
    /// or `unsupported` (agent-db does not open it; `detail` says why).
    pub support: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
}

/// Each registered agent's default store that exists, and `explicit` (`--db`, with how it was
/// given), opened read-only: which agent, which schema version, and whether agent-db supports
/// it. Never writes.
pub fn survey(explicit: Option<(&Path, &str)>) -> Vec<Surveyed> {
    let mut candidates: Vec<(PathBuf, String)> = Vec::new();
    if let Some((p, how)) = explicit {
        candidates.push((p.to_path_buf(), how.to_string()));
    }
    for k in StoreKind::all() {
        let p = k.default_path();
        if p.is_file() && !candidates.iter().any(|(c, _)| *c == p) {
            candidates.push((p, format!("{} default", k.name())));
        }
        for p in k.nearby() {
            if !candidates.iter().any(|(c, _)| *c == p) {
                candidates.push((
                    p,
                    format!("beside {}'s default (another channel)", k.name()),
                ));
            }
        }
    }
    candidates
        .into_iter()
        .map(|(path, how)| survey_one(path, how))
        .collect()
}

fn survey_one(path: PathBuf, how: String) -> Surveyed {
    let unsupported = |agent, detail: String| Surveyed {
        agent,
        path: path.clone(),
        how: how.clone(),
        version_name: None,
        schema_version: None,
        newest_known: None,
        support: "unsupported",
        detail: Some(detail),
    };
    let detected = connect(&path, Access::Read).and_then(|conn| {
        let tables = table_names(&conn, &path)?;
        Ok((conn, StoreKind::detect(&tables)))
    });
    let (conn, kind) = match detected {
        Ok((conn, Some(kind))) => (conn, kind),
        Ok((_, None)) => {
            return unsupported(None, "not a conversation store agent-db knows".into())
        }
        Err(e) => return unsupported(None, e.to_string()),
    };
    let agent = Some(kind.name());
    if let Err(e) = kind.adapter().check_schema(&conn, &path) {
        return unsupported(agent, e.to_string());
    }
    match kind.adapter().schema_status(&conn, &path) {
        Ok(st) => Surveyed {
            agent,
            path: path.clone(),
            how,
            version_name: st
                .version
                .as_deref()
                .map(|v| kind.adapter().version_name(v)),
            schema_version: st.version,
            newest_known: st.newest_known,
            support: if st.writable {
                "read-write"
            } else {
                "read-only"
            },
            detail: (!st.writable)
                .then(|| "newer than agent-db knows: listed and shown, never written".to_string()),
        },
        Err(e) => unsupported(agent, e.to_string()),
    }
}

/// Several agents' default stores exist: an error naming them all, with the flags to choose.
fn ambiguous(found: &[(StoreKind, PathBuf)]) -> Error {
    let count = match found.len() {
        2 => "two".to_string(),
        3 => "three".to_string(),
        n => n.to_string(),
    };
    let listed: Vec<String> = found
        .iter()
        .map(|(k, p)| format!("{} ({})", p.display(), k.name()))
        .collect();
    let flags: Vec<String> = found
        .iter()
        .map(|(k, _)| format!("--agent {}", k.name()))
        .collect();
    Error::AmbiguousStore {
        path: found[0].1.clone(),
        detail: format!(
            "{count} conversation stores found: {}; choose one with {} (or --db PATH, or `agent = \"{}\"` under [store] in the config file)",
            join_and(&listed, "and"),
            join_and(&flags, "or"),
            found[0].0.name()
        ),
    }
}

/// `a`, `a and b`, `a, b and c`.
pub(crate) fn join_and(items: &[String], word: &str) -> String {
    match items {
        [] => String::new(),
        [one] => one.clone(),
        [init @ .., last] => format!("{} {word} {last}", init.join(", ")),
    }
}

pub(crate) fn home_dir() -> PathBuf {
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
pub(crate) fn connect(path: &Path, access: Access) -> Result<Connection> {
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
    // Another process's lock is waited for as every command waits for it (busy::handler).
    conn.busy_handler(Some(busy::handler)).at(path)?;
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
        _ if crate::error::is_busy(&e) => Error::Busy {
            path: path.to_path_buf(),
            holder: None,
        },
        _ => Error::Sqlite {
            path: path.to_path_buf(),
            source: e,
        },
    }
}

/// No registered kind recognizes the file's tables.
fn unknown_schema(path: &Path, tables: &[String]) -> Error {
    let detail = if tables.is_empty() {
        "the database is empty".to_string()
    } else {
        let expected: Vec<String> = KINDS
            .iter()
            .map(|k| {
                let t: Vec<String> = k
                    .adapter()
                    .signature_tables()
                    .iter()
                    .map(|t| t.to_string())
                    .collect();
                format!("{}'s {} tables", k.name(), join_and(&t, "and"))
            })
            .collect();
        let shown: Vec<_> = tables.iter().take(8).cloned().collect();
        format!(
            "expected {}; found: {}",
            match expected.as_slice() {
                [init @ .., last] if !init.is_empty() => format!("{}, or {last}", init.join(", ")),
                _ => expected.join(""),
            },
            shown.join(", ")
        )
    };
    Error::UnknownSchema {
        path: path.to_path_buf(),
        detail,
    }
}

impl Store {
    /// Open and recognize the store at `path`, with only the built-in context windows.
    pub fn open(path: &Path, access: Access) -> Result<Store> {
        Store::open_with(path, access, ContextLimits::default())
    }

    /// Open and recognize the store at `path`; `limits` gives a window to conversations whose
    /// store does not record one.
    pub fn open_with(path: &Path, access: Access, limits: ContextLimits) -> Result<Store> {
        let conn = connect(path, access)?;
        let tables = table_names(&conn, path)?;
        let kind = StoreKind::detect(&tables).ok_or_else(|| unknown_schema(path, &tables))?;
        kind.adapter().check_schema(&conn, path)?;
        if access == Access::Write {
            let status = kind.adapter().schema_status(&conn, path)?;
            if !status.writable {
                return Err(Error::SchemaChanged {
                    path: path.to_path_buf(),
                    detail: format!(
                        "{} schema version {} is newer than any agent-db knows (the newest it knows is {}); \
                         a newer {} wrote this file, so agent-db reads it but will not write to it (upgrade agent-db)",
                        kind.name(),
                        status.version.as_deref().unwrap_or("?"),
                        status.newest_known.as_deref().unwrap_or("?"),
                        kind.name()
                    ),
                });
            }
        }
        if access == Access::Write && tables.iter().any(|t| t == "agent_db_migrations") {
            if let Some(detail) = agent_tables::newer(&conn).at(path)? {
                return Err(Error::SchemaChanged {
                    path: path.to_path_buf(),
                    detail,
                });
            }
        }
        Ok(Store {
            path: path.to_path_buf(),
            kind,
            access,
            conn,
            limits,
        })
    }

    /// How to open this store again (another thread's connection).
    pub fn location(&self) -> Location {
        Location {
            path: self.path.clone(),
            limits: self.limits.clone(),
        }
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
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct ConversationMeta {
    pub id: String,
    /// The conversation's name (kodelet's `summary` column).
    pub name: Option<String>,
    pub provider: String,
    /// The codec of a store with one message format, handed out by its adapter; `None` where
    /// the format follows `provider` and `api_mode` (kodelet).
    #[serde(skip)]
    pub codec: Option<crate::message::Format>,
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
    /// The conversation this one is a child of (opencode's `parent_id`: a subagent's
    /// session): listed, marked, and left out of batch selections unless named.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parent: Option<String>,
    /// Archived in the agent (opencode's `time_archived`): left out of batch selections
    /// unless `--include-archived`.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub archived: bool,
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
            codec: None,
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
            parent: None,
            archived: false,
        }
    }

    /// Stored utilization `current / max`; with `context_limit` the limit replaces a missing or
    /// zero `maxContextWindow`.
    pub fn utilization(&self, context_limit: Option<i64>) -> Option<f64> {
        utilization(self.current_context, self.max_context, context_limit)
    }

    /// The wire format, or why it cannot be compacted.
    pub fn format(&self) -> Result<crate::message::Format, String> {
        match self.codec {
            Some(codec) => Ok(codec),
            None => crate::message::detect(&self.provider, self.api_mode.as_deref()),
        }
    }

    /// Parsed `updated_at`, or an error naming this conversation.
    pub fn updated(&self) -> Result<chrono::DateTime<chrono::FixedOffset>> {
        self.facts().updated()
    }

    /// What the selection reads of this conversation, borrowed.
    pub fn facts(&self) -> Facts<'_> {
        Facts {
            id: &self.id,
            updated_at: &self.updated_at,
            current_context: self.current_context,
            max_context: self.max_context,
            problem: self.problem.as_deref(),
            parent: self.parent.as_deref(),
            archived: self.archived,
        }
    }
}

/// What a selection without `--provider` reads of a conversation: a listing of ids
/// ([`Store::scan_facts`]) holds only these, borrowed from the row as read.
#[derive(Debug, Clone, Copy)]
pub struct Facts<'a> {
    pub id: &'a str,
    pub updated_at: &'a str,
    /// Stored `usage.currentContextWindow` and `usage.maxContextWindow`.
    pub current_context: Option<i64>,
    pub max_context: Option<i64>,
    /// A problem reading the stored usage ([`ConversationMeta::problem`]).
    pub problem: Option<&'a str>,
    /// [`ConversationMeta::parent`] and [`ConversationMeta::archived`].
    pub parent: Option<&'a str>,
    pub archived: bool,
}

impl Facts<'_> {
    /// [`utilization`] of the stored usage.
    pub fn utilization(&self, context_limit: Option<i64>) -> Option<f64> {
        utilization(self.current_context, self.max_context, context_limit)
    }

    /// Parsed `updated_at`, or an error naming this conversation.
    pub fn updated(&self) -> Result<chrono::DateTime<chrono::FixedOffset>> {
        crate::gotime::parse(self.updated_at)
            .map_err(|e| Error::conversation(self.id, format!("updated_at: {e}")))
    }
}

/// A stored context over its window (`max`, or `context_limit` when `max` is missing or not
/// positive); `None` when either is unknown. The one definition of utilization: the listing,
/// the selection and every store's prefilter compute it here.
pub fn utilization(
    current: Option<i64>,
    max: Option<i64>,
    context_limit: Option<i64>,
) -> Option<f64> {
    if corrupt_usage(current, max).is_some() {
        return None;
    }
    let current = current?;
    let max = match max {
        Some(m) if m > 0 => m,
        _ => context_limit.filter(|l| *l > 0)?,
    };
    Some(current as f64 / max as f64)
}

/// Why a stored context and window cannot be a conversation's usage (a negative count), if
/// they cannot: such a conversation is reported by name with this reason, not counted with
/// those whose window is unknown.
pub fn corrupt_usage(current: Option<i64>, max: Option<i64>) -> Option<String> {
    match (current, max) {
        (Some(c), _) if c < 0 => Some(format!(
            "its stored usage is corrupt: a context of {c} tokens (negative)"
        )),
        (_, Some(m)) if m < 0 => Some(format!(
            "its stored usage is corrupt: a context window of {m} tokens (negative)"
        )),
        _ => None,
    }
}

/// `--all-over RATIO`'s rule, written once: a utilization at or over the ratio is selected.
/// [`crate::select::Selector`], [`Prefilter::keeps`] and the stores' quick prefilters all apply
/// it through this function.
pub fn over_threshold(utilization: f64, ratio: f64) -> bool {
    utilization >= ratio
}

/// What the selection can tell a scan in advance: rows it would drop silently may be left out
/// in SQL, so they are never decoded. Rows it would report (selected, skipped, failed) are
/// always kept; the selection still evaluates every row it gets.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Prefilter {
    /// `--all-over RATIO`.
    pub all_over: Option<f64>,
    /// `--context-limit N` (stands in for a missing or zero `maxContextWindow`).
    pub context_limit: Option<i64>,
    /// Whether the selection reads `updated_at` (recency or an idle window): without it a
    /// store may hand out [`Facts`] with an empty `updated_at` when it costs a query per row.
    pub times: bool,
}

impl Prefilter {
    /// Whether the selection would report this conversation (selected, skipped or failed)
    /// under `--all-over`: the same rule as `Selector::evaluate`, on the same parsed usage.
    pub fn keeps(&self, m: &ConversationMeta) -> bool {
        m.problem.is_some() || self.keeps_usage(m.current_context, m.max_context)
    }

    /// [`Prefilter::keeps`] of a row whose usage was read without a problem, on its stored
    /// context and window alone (for a listing pass that judges a row before decoding it).
    pub fn keeps_usage(&self, current: Option<i64>, max: Option<i64>) -> bool {
        let Some(ratio) = self.all_over else {
            return true;
        };
        // A corrupt usage is reported (by name), never dropped.
        utilization(current, max, self.context_limit).is_none_or(|u| over_threshold(u, ratio))
            || corrupt_usage(current, max).is_some()
    }
}

impl Store {
    /// Stream every conversation's metadata in listing order; `f` returns `false` to stop.
    pub fn scan(&self, f: impl FnMut(ConversationMeta) -> bool) -> Result<()> {
        self.scan_prefiltered(Prefilter::default(), f)
    }

    /// [`Store::scan`], leaving out in SQL rows the selection would drop silently (a store that
    /// cannot tell in advance passes every row).
    pub fn scan_prefiltered(
        &self,
        prefilter: Prefilter,
        mut f: impl FnMut(ConversationMeta) -> bool,
    ) -> Result<()> {
        let read = self.read();
        self.kind.adapter().scan(&read, prefilter, &mut f)
    }

    /// [`Store::scan_prefiltered`] of only what the selection reads ([`Facts`]). With
    /// `--all-over`, a store whose pass can skip the rest of a row does
    /// ([`kind::Adapter::scan_facts`]: no [`ConversationMeta`] per kept row); otherwise every row
    /// is listed, and the metas' facts are handed out.
    pub fn scan_facts(
        &self,
        prefilter: Prefilter,
        mut f: impl FnMut(Facts<'_>) -> bool,
    ) -> Result<()> {
        let read = self.read();
        let adapter = self.kind.adapter();
        if prefilter.all_over.is_none() {
            return adapter.scan(&read, prefilter, &mut |m| f(m.facts()));
        }
        adapter.scan_facts(&read, prefilter, &mut f)
    }

    /// The distinct providers of the store's conversations (read from an index, never from
    /// message bodies), sorted.
    pub fn providers(&self) -> Result<Vec<String>> {
        self.kind.adapter().providers(&self.read())
    }

    /// One conversation's metadata.
    pub fn meta(&self, id: &str) -> Result<ConversationMeta> {
        self.kind
            .adapter()
            .meta(&self.read(), id)?
            .ok_or_else(|| Error::ConversationNotFound { id: id.to_string() })
    }

    /// Why agent-db leaves conversation `id` alone (the agent never compacts it, or is working
    /// on it now), or `None` ([`kind::Adapter::left_alone`]).
    pub fn left_alone(&self, id: &str) -> Result<Option<String>> {
        self.kind.adapter().left_alone(&self.read(), id)
    }

    /// Every conversation [`Store::left_alone`] would name now, with its reason, when the store
    /// can tell them at once ([`kind::Adapter::left_alone_now`]).
    pub fn left_alone_now(&self) -> Result<Option<std::collections::HashMap<String, String>>> {
        self.kind.adapter().left_alone_now(&self.read())
    }

    /// The child sessions conversation `id` ran, with their titles
    /// ([`kind::Adapter::children`]).
    pub fn children(&self, id: &str) -> Result<Vec<(String, Option<String>)>> {
        self.kind.adapter().children(&self.read(), id)
    }

    /// What the store keeps of conversation `id` but the agent does not send to the model
    /// ([`kind::Adapter::hidden`]).
    pub fn hidden(&self, id: &str) -> Result<Option<kind::Hidden>> {
        self.kind.adapter().hidden(&self.read(), id)
    }

    /// Load one conversation for planning.
    pub fn load(&self, id: &str) -> Result<StoredConversation> {
        self.kind.adapter().load(&self.read(), id)
    }

    /// Every stored row of conversation `id` in the store's documented shape (`show --raw`),
    /// or `None` when the store has no such form ([`kind::Adapter::stored`]).
    pub fn stored(&self, id: &str) -> Result<Option<String>> {
        self.kind.adapter().stored(&self.read(), id)
    }

    /// Whether a compaction can keep a tail verbatim (docker-agent before migration 21 loads
    /// only what follows the last summary, so its plans get a zero tail budget).
    pub fn can_keep_tail(&self) -> Result<bool> {
        self.kind.adapter().keeps_tail(&self.read())
    }

    /// Write one compaction through the shared commit protocol ([`commit`]), creating
    /// agent-db's tables first if needed. The pipeline's writer thread does the same on its own
    /// connection; this is for single writes (and the tests of the protocol).
    pub fn commit(&mut self, proposal: &Proposal, now: &str) -> Result<Written> {
        self.ensure_agent_tables()?;
        proposal
            .write
            .commit(&mut self.conn, &self.path, &proposal.audit, now)
    }

    /// The connection, path and limits an adapter reads with.
    fn read(&self) -> kind::Read<'_> {
        kind::Read {
            conn: &self.conn,
            path: &self.path,
            limits: &self.limits,
        }
    }
}

/// One conversation as loaded for planning: its history in the store's message JSON, and the
/// store's own state of exactly this version (opaque here; the store's proposal uses it).
#[derive(Debug, Clone)]
pub struct StoredConversation {
    pub id: String,
    /// The history the agent currently sends, as a JSON array of the store's message JSON
    /// (empty once [`StoredConversation::seal`] replaced it).
    pub raw_messages: String,
    /// The conversation's open to-dos as the agent keeps them outside its history (its own
    /// to-do table), in the agent's order; empty when the store keeps none. The retention score
    /// counts them as to-dos of the summarized span ([`crate::retention::Artifacts::add_native_todos`]).
    pub native_todos: Vec<String>,
    /// How many leading messages of the history are a summary the agent wrote itself in place
    /// of the messages before (its own compaction), where only the store can tell (kodelet's
    /// `activeDisplayStart`); 0 otherwise. A compaction carries it forward as an earlier summary
    /// ([`crate::summary::prior_len`]).
    pub agent_summary: usize,
    state: Arc<dyn kind::LoadedState>,
    sealed: Option<kind::Sealed>,
}

impl StoredConversation {
    /// A conversation as a store loaded it, with that store's state.
    pub(crate) fn with_state(
        id: impl Into<String>,
        raw_messages: String,
        state: Arc<dyn kind::LoadedState>,
    ) -> Self {
        StoredConversation {
            id: id.into(),
            raw_messages,
            native_todos: Vec::new(),
            agent_summary: 0,
            state,
            sealed: None,
        }
    }

    /// With the agent's own summary at the head of the history ([`Self::agent_summary`]).
    pub(crate) fn with_agent_summary(mut self, n: usize) -> Self {
        self.agent_summary = n;
        self
    }

    /// With the open to-dos the store keeps outside the history.
    pub(crate) fn with_native_todos(mut self, todos: Vec<String>) -> Self {
        self.native_todos = todos;
        self
    }

    /// A kodelet conversation whose version is its `updated_at` marker and the hash of its
    /// history (tests and fixtures build conversations this way).
    pub fn new(
        id: impl Into<String>,
        raw_messages: impl Into<String>,
        updated_at: impl Into<String>,
    ) -> Self {
        kodelet::conversation(id.into(), raw_messages.into(), updated_at.into(), false)
    }

    /// The store's proposal to write `compaction` over exactly this version. `store` is a read
    /// connection the store may use to prepare the write (the planning thread's own).
    pub fn propose(
        &self,
        compaction: Compaction,
        audit: archive::AuditEntry,
        store: Option<&Store>,
    ) -> Proposal {
        let read = store.map(Store::read);
        let loaded = match &self.sealed {
            Some(s) => kind::Loaded::Sealed(s),
            None => kind::Loaded::Text(&self.raw_messages),
        };
        Proposal {
            write: self
                .state
                .propose(&self.id, loaded, compaction, read.as_ref()),
            audit,
        }
    }

    /// Once the conversation is planned (decoded into messages that keep their own bytes):
    /// replace the history's text by what the write needs of it, when the store can keep that
    /// smaller (its digest and compressed pre-image). A batch holds up to `--concurrency`
    /// conversations while their summaries are written; this keeps a fraction of each.
    pub fn seal(&mut self) {
        if self.sealed.is_none() {
            if let Some(s) = self.state.seal(&self.raw_messages) {
                self.sealed = Some(s);
                self.raw_messages = String::new();
            }
        }
    }
}

/// A compaction in store-neutral terms, as the pipeline hands it to a store. Each store turns
/// it into its own typed proposal and takes what it needs (kodelet rewrites the history; an
/// append-only store appends the summary and points at the kept tail).
#[derive(Debug, Clone)]
pub struct Compaction {
    pub format: crate::message::Format,
    /// The complete new history, in the store's message JSON.
    pub history: String,
    /// The summary text, when the head was summarized (not pruned).
    pub summary: Option<String>,
    /// Index (in the loaded messages) of the first message kept verbatim.
    pub tail_start: usize,
    /// Index of the latest instruction put back after the summary, when the cut fell after it.
    pub reinsert: Option<usize>,
    /// The context the agent will send next: the new history plus the fixed overhead.
    pub context_after: usize,
    /// Tool-call ids still present in the new history.
    pub call_ids: HashSet<String>,
    /// The model that wrote the summary, if one did.
    pub model: Option<String>,
    /// agent-db's count of each loaded message ([`crate::tokens::message_tokens`], the plan's),
    /// for a store that records what the summarized messages took; empty when not counted (the
    /// store then counts them itself).
    pub message_tokens: Vec<usize>,
}

/// A compaction ready to be written: the audit row and the store's own write.
pub struct Proposal {
    pub audit: archive::AuditEntry,
    write: Box<dyn commit::Commit>,
}

impl Proposal {
    /// The conversation it writes.
    pub fn id(&self) -> &str {
        &self.audit.conversation_id
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The messages built from the registry read as they did when they named both kinds.
    #[test]
    fn registry_messages_read_as_before() {
        let found = [
            (kodelet::KIND, PathBuf::from("/h/.kodelet/storage.db")),
            (docker_agent::KIND, PathBuf::from("/h/.cagent/session.db")),
        ];
        let Error::AmbiguousStore { detail, .. } = ambiguous(&found) else {
            panic!("not an ambiguity error")
        };
        assert_eq!(
            detail,
            "two conversation stores found: /h/.kodelet/storage.db (kodelet) and /h/.cagent/session.db (docker-agent); \
             choose one with --agent kodelet or --agent docker-agent (or --db PATH, or `agent = \"kodelet\"` under [store] \
             in the config file)"
        );
        let Error::UnknownSchema { detail, .. } =
            unknown_schema(Path::new("x.db"), &["notes".to_string()])
        else {
            panic!("not an unknown-schema error")
        };
        assert_eq!(
            detail,
            "expected kodelet's conversations, conversation_summaries and schema_migrations tables, \
             docker-agent's sessions, session_items and migrations tables, \
             goose's sessions, messages and schema_version tables, \
             opencode's session_v2, session_message and migration tables, \
             kilo's session, message, part and kilo_board tables, \
             or opencode's session, message and part tables; found: notes"
        );
    }
}

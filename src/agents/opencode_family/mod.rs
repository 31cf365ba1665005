//! What opencode 1.x ([`super::opencode`]) and 2.x ([`super::opencode_v2`]) share, and what
//! an opencode fork's store reads the same way: the message codec ([`codec`]), opencode's id
//! algorithm ([`ids`]), where the files live, and the row helpers both listings use; a fork of
//! opencode 1.x's store (Kilo) is a [`Family`] value with its names, files and [`Flavor`].
//!
//! - `codec.rs`: opencode's message envelope (a message and its parts).
//! - `ids.rs`: opencode's ascending and descending ids.

pub mod codec;
mod ids;

pub use ids::{ascending as ascending_id, descending as descending_id};

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use rusqlite::{Connection, Row as SqlRow};
use serde_json::Value;

use crate::error::{Result, SqlContext};
use crate::store::cells::lossy;
use crate::store::schema_util::changed;

/// The provider name agent-db gives opencode sessions (shown in listings; the
/// adapter hands out its codec).
pub const PROVIDER: &str = "opencode";

/// How [`default_path`] is found, for `--help`.
pub const DEFAULT_PATH_DOC: &str = "opencode: $OPENCODE_DB or ~/.local/share/opencode/opencode.db";

/// `OPENCODE_DB` (absolute as is, relative under the data dir), else the data dir's
/// `opencode.db` (the `latest`, `beta` and `prod` channels' file).
pub fn default_path() -> PathBuf {
    default_path_of("opencode", "OPENCODE_DB")
}

/// The default file of an agent of the family named `app` (`opencode`, `kilo`), whose variable
/// `db_env` (`OPENCODE_DB`, `KILO_DB`) overrides it: absolute as is, relative under its data
/// dir; else the data dir's `<app>.db`.
pub fn default_path_of(app: &str, db_env: &str) -> PathBuf {
    match std::env::var_os(db_env).filter(|v| !v.is_empty()) {
        Some(v) if PathBuf::from(&v).is_absolute() => PathBuf::from(v),
        Some(v) => data_dir(app).join(v),
        None => data_dir(app).join(format!("{app}.db")),
    }
}

/// opencode's files for its other channels in the data dir (`opencode-<channel>.db`,
/// `storage/db.ts`: every channel but latest, beta and prod has its own file), sorted.
pub fn channel_files() -> Vec<PathBuf> {
    channel_files_of("opencode")
}

/// [`channel_files`] of the agent named `app`: `<app>-<channel>.db` in its data dir.
pub fn channel_files_of(app: &str) -> Vec<PathBuf> {
    let Ok(dir) = std::fs::read_dir(data_dir(app)) else {
        return Vec::new();
    };
    let prefix = format!("{app}-");
    let mut out: Vec<PathBuf> = dir
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| {
            p.is_file()
                && p.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.starts_with(&prefix) && n.ends_with(".db"))
        })
        .collect();
    out.sort();
    out
}

/// The data directory of the agent named `app`: `$XDG_DATA_HOME/<app>` (absolute), else
/// `~/.local/share/<app>`.
fn data_dir(app: &str) -> PathBuf {
    match std::env::var_os("XDG_DATA_HOME")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
    {
        Some(x) => x.join(app),
        None => crate::store::home_dir().join(".local/share").join(app),
    }
}

/// Epoch milliseconds as RFC 3339 (UTC, milliseconds).
pub fn rfc3339_ms(ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(ms)
        .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true))
        .unwrap_or_else(|| ms.to_string())
}

/// Whether the file has agent-db's audit table (it has once agent-db compacted in it).
pub fn has_audit(conn: &Connection, path: &Path) -> Result<bool> {
    conn.query_row(
        "SELECT EXISTS (SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'agent_db_compactions')",
        [],
        |r| r.get(0),
    )
    .at(path)
}

/// The context an assistant's tokens count, as opencode's `isOverflow` counts it:
/// `tokens.total`, else input + output + cache read + cache write.
pub fn context_tokens(info: &Value) -> Option<i64> {
    let t = info.get("tokens")?;
    let n = |v: &Value| v.as_f64().map(|f| f as i64);
    Some(count(
        n(&t["total"]),
        [
            &t["input"],
            &t["output"],
            &t["cache"]["read"],
            &t["cache"]["write"],
        ]
        .map(n),
    ))
}

/// `total` when positive, else the sum of the parts.
pub(crate) fn count(total: Option<i64>, parts: [Option<i64>; 4]) -> i64 {
    match total.filter(|t| *t > 0) {
        Some(t) => t,
        None => parts.iter().map(|p| p.unwrap_or(0)).sum(),
    }
}

/// A session's `parent_id` (a child session: a subagent's), when set.
pub fn parent(r: &SqlRow<'_>, i: usize) -> rusqlite::Result<Option<String>> {
    Ok(lossy(r, i)?.filter(|p| !p.is_empty()))
}

/// Whether a session's `time_archived` is set (opencode's archive: hidden from its session list).
pub fn archived(r: &SqlRow<'_>, i: usize) -> rusqlite::Result<bool> {
    use rusqlite::types::ValueRef;
    Ok(!matches!(r.get_ref(i)?, ValueRef::Null))
}

/// What agent-db says of a session with an undo pending ([`pending_reverts`]).
pub const REVERT_PENDING: &str =
    "opencode has an undo pending in this session (/undo set session.revert): \
     opencode deletes the undone messages on the next prompt, so agent-db leaves it alone; \
     send a prompt or /redo in opencode, then compact it";

/// Every session with a pending undo (`session.revert` set, opencode's `SessionRevert.revert`;
/// it stays until the next prompt's `SessionRevert.cleanup` deletes the undone messages, or
/// `/redo` clears it), by id; `one`: only that session. A file without the column has none.
pub fn pending_reverts(
    conn: &Connection,
    path: &Path,
    table: &str,
    one: Option<&str>,
) -> Result<HashSet<String>> {
    let cols = crate::store::schema_util::columns(conn, table, path)?;
    if !cols.contains("revert") {
        return Ok(HashSet::new());
    }
    let filter = if one.is_some() { "AND id = ?1" } else { "" };
    let sql = format!(
        "SELECT id FROM \"{table}\" WHERE revert IS NOT NULL AND CAST(revert AS TEXT) NOT IN ('', 'null') {filter}"
    );
    let mut st = conn.prepare(&sql).at(path)?;
    let mut q = match one {
        Some(id) => st.query([id]),
        None => st.query([]),
    }
    .at(path)?;
    let mut out = HashSet::new();
    while let Some(r) = q.next().at(path)? {
        if let Some(id) = lossy(r, 0).at(path)? {
            out.insert(id);
        }
    }
    Ok(out)
}

/// An agent that keeps opencode 1.x's store (opencode, or a fork such as Kilo): what differs
/// between them is here; every read and write is opencode 1.x's (`super::opencode`, which
/// implements the adapter for it).
pub struct Family {
    /// The name users type (`--agent`).
    pub name: &'static str,
    /// The agent's application name: its data directory (`$XDG_DATA_HOME/<app>`), its file
    /// (`<app>.db`) and its other channels' files (`<app>-<channel>.db`).
    pub app: &'static str,
    /// The migrations its files carry.
    pub flavor: &'static Flavor,
    /// Tables whose presence (all of them) identifies its file.
    pub signature: &'static [&'static str],
    /// The variable that overrides its file (absolute, or relative to the data directory).
    pub db_env: &'static str,
    pub default_path_doc: &'static str,
    /// The file's newest migration in the words its users know.
    pub version_name: fn(&str) -> String,
    /// Why `reclaim` may not remove its event log (`None`: it may, the agent's own source was
    /// read and shows it never reads those events back; docs/stores.md).
    pub events_refused: Option<&'static str>,
}

/// An agent that writes opencode's 1.x store: opencode itself, or a fork (Kilo) whose files
/// record opencode's migrations up to one of them and the fork's own after it.
#[derive(Debug)]
pub struct Flavor {
    /// The agent's name in messages (`opencode`, `Kilo`).
    pub agent: &'static str,
    /// The newest of opencode's migrations its files record.
    pub upstream_newest: &'static str,
    /// Its own migrations after that one, by name, oldest first (none for opencode).
    pub own: &'static [&'static str],
}

impl Family {
    /// The PROVIDER the agent's sessions show: opencode's [`PROVIDER`], a fork's own name.
    pub fn provider(&self) -> &'static str {
        if self.flavor.own.is_empty() {
            PROVIDER
        } else {
            self.name
        }
    }
}

impl Flavor {
    /// The newest migration of this agent that agent-db knows.
    pub fn newest_known(&self) -> &'static str {
        self.own.last().copied().unwrap_or(self.upstream_newest)
    }

    /// Refuses a migration this agent's files do not carry as agent-db knows them: one newer
    /// than the newest known (naming both), or one past opencode's that is not the agent's own.
    pub(crate) fn admit(&self, id: &str, path: &Path) -> Result<()> {
        let agent = self.agent;
        let newest_known = self.newest_known();
        let upstream = stamp(self.upstream_newest).expect("a stamped id");
        match stamp(id) {
            Some(s) if s <= upstream => Ok(()),
            Some(_) if self.own.contains(&id) => Ok(()),
            Some(s) if s > stamp(newest_known).expect("a stamped id") => Err(changed(
                path,
                format!(
                    "{agent} migration {id} is newer than any agent-db knows (the newest it knows is \
                     {newest_known}); a newer {agent} wrote this file, so agent-db will not touch it (upgrade agent-db)"
                ),
            )),
            _ => Err(changed(
                path,
                format!("{agent} migration {id:?} is not one agent-db knows, so it will not touch this file"),
            )),
        }
    }
}

/// The 14-digit folder prefix of a migration id, when it has one.
pub(crate) fn stamp(id: &str) -> Option<&str> {
    let s = id.get(..14)?;
    (s.bytes().all(|b| b.is_ascii_digit()) && id.as_bytes().get(14) == Some(&b'_')).then_some(s)
}

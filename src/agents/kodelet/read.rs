//! Reading kodelet's `storage.db` (docs/stores.md, "kodelet"): schema check, `init`, the streaming listing
//! scan and loading one conversation. The write side lives in `write.rs`.
//!
//! The listing reads `conversation_summaries`, as kodelet's own `conversation list` does
//! (kodelet keeps it in sync in the same transaction as every save), so it never reads a row of
//! the large `conversations` table, whose small columns sit after `raw_messages`. One merge of
//! the two tables' primary-key indexes finds the conversations without a summary row and the
//! summary rows without a conversation (never listed). Only conversations without a usable
//! summary row (none, or one whose `updated_at` is not TEXT) are read from their own row and
//! merged into the order. `raw_messages` is never read here; the write path re-reads and
//! version-checks the conversation's own row.

use std::path::Path;

use rusqlite::types::{ToSqlOutput, ValueRef};
use rusqlite::{Connection, OptionalExtension, Row};

use crate::error::{Error, Result, SqlContext};
use crate::store::cells::{lossy, lossy_ref, lossy_value, newest_first, NewestFirst, SortKey};
use crate::store::Facts;
use crate::store::{ConversationMeta, Prefilter};

/// Columns agent-db reads or writes, with the declared type it expects.
const CONVERSATION_COLUMNS: &[(&str, &str, bool)] = &[
    // (name, declared type, required)
    ("id", "TEXT", true),
    ("raw_messages", "TEXT", true),
    ("provider", "TEXT", true),
    ("usage", "TEXT", true),
    ("summary", "TEXT", true),
    ("created_at", "DATETIME", true),
    ("updated_at", "DATETIME", true),
    ("metadata", "TEXT", true),
    ("tool_results", "TEXT", true),
    ("cwd", "TEXT", false),
    // kodelet's display archive (migration 20260920120000, see `history.rs`).
    ("compaction_history", "TEXT", false),
];
const SUMMARY_COLUMNS: &[(&str, &str, bool)] = &[
    ("id", "TEXT", true),
    ("message_count", "INTEGER", true),
    ("first_message", "TEXT", true),
    ("summary", "TEXT", true),
    ("usage", "TEXT", true),
    ("created_at", "DATETIME", true),
    ("updated_at", "DATETIME", true),
    ("provider", "TEXT", false),
    ("metadata", "TEXT", false),
    ("cwd", "TEXT", false),
];

/// kodelet migrations whose tables `init` creates (see schema.sql in this folder).
const INIT_MIGRATIONS: &[(i64, &str)] = &[
    (20260204163000, "create conversations and summaries"),
    (20260204163001, "add indexes"),
    (20260204163002, "add provider to summaries"),
    (20260204163003, "add background_processes"),
    (20260204163004, "create acp_session_updates"),
    (20260226120000, "add metadata to summaries"),
    (20260331120000, "add cwd"),
    (20260719170000, "create steering_messages"),
];

/// Every kodelet migration agent-db has read upstream and handles (`pkg/db/migrations/`;
/// `fixtures/upstream/kodelet.toml` records the commit of each, and a test keeps the two equal).
/// Those after `init`'s change nothing agent-db reads or writes but for `chat_turns`
/// (20260906130000), image artifacts (20260910120000), `compaction_history` (20260920120000)
/// and the search index (20260929120000); the others add runner, login and token tables or
/// `steering_messages.run_id`.
pub const KNOWN_MIGRATIONS: &[(i64, &str)] = &[
    (20260204163000, "create_conversations"),
    (20260204163001, "add_performance_indexes"),
    (20260204163002, "add_provider_to_summaries"),
    (20260204163003, "add_background_processes"),
    (20260204163004, "create_acp_session_updates"),
    (20260226120000, "add_metadata_to_summaries"),
    (20260331120000, "add_cwd_to_conversations"),
    (20260719170000, "create_steering_messages"),
    (20260806120000, "create_runner_state"),
    (20260807120000, "add_runner_environment_profile"),
    (20260812120000, "create_control_plane_auth"),
    (20260813120000, "create_user_api_credentials"),
    (20260813130000, "create_runner_dpop_replays"),
    (20260906130000, "create_chat_turns"),
    (20260906160000, "scope_child_steering"),
    (20260910120000, "create_image_artifacts"),
    (20260920120000, "add_compaction_history"),
    (20260924120000, "create_user_refresh_tokens"),
    (20260929120000, "create_conversation_search"),
];

/// The newest kodelet migration agent-db knows (the last of [`KNOWN_MIGRATIONS`]). A file with
/// a newer one was written by a kodelet agent-db has not been checked against: it is read,
/// never written (docs/stores.md "Schema versions").
pub const NEWEST_KNOWN: i64 = KNOWN_MIGRATIONS[KNOWN_MIGRATIONS.len() - 1].0;

/// Which of the optional columns and tables exist.
#[derive(Debug, Clone, Copy, Default)]
pub struct Columns {
    pub conversations_cwd: bool,
    pub summaries_provider: bool,
    pub summaries_metadata: bool,
    pub summaries_cwd: bool,
    /// `conversations.compaction_history` (migration 20260920120000).
    pub compaction_history: bool,
    /// `chat_turns` (20260906130000): a turn `accepted` or `running` means kodelet is working on
    /// the conversation now.
    pub chat_turns: bool,
    /// `conversation_artifacts` (20260910120000): image references kodelet's cleanup keeps only
    /// while a `tool_results` entry names them.
    pub artifacts: bool,
    /// `conversation_search_state` (20260929120000): the search index's record of what it
    /// indexed, per conversation.
    pub search_state: bool,
}

impl Columns {
    /// Whether `tool_results` is kept whole by a compaction: kodelet's own compaction keeps it
    /// since it archives the display history, and image artifacts live only as long as an entry
    /// names them (a restore needs them).
    pub fn keeps_tool_results(&self) -> bool {
        self.compaction_history || self.artifacts
    }
}

/// The highest version in `schema_migrations` (`None`: no rows, or not integers).
pub fn newest_migration(conn: &Connection, path: &Path) -> Result<Option<i64>> {
    conn.prepare_cached(
        "SELECT MAX(version) FROM schema_migrations WHERE typeof(version) = 'integer'",
    )
    .at(path)?
    .query_row([], |r| r.get::<_, Option<i64>>(0))
    .at(path)
}

fn table_columns(conn: &Connection, table: &str, path: &Path) -> Result<Vec<(String, String)>> {
    // Cached: the writer reads the column lists again whenever the schema cookie changes.
    let mut stmt = conn
        .prepare_cached(&format!(
            "SELECT name, type FROM pragma_table_info('{table}')"
        ))
        .at(path)?;
    let rows = stmt
        .query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?)))
        .at(path)?;
    rows.collect::<std::result::Result<Vec<_>, _>>().at(path)
}

fn check_table(
    conn: &Connection,
    path: &Path,
    table: &str,
    expected: &[(&str, &str, bool)],
) -> Result<Vec<String>> {
    let cols = table_columns(conn, table, path)?;
    let mut present = Vec::new();
    for (name, ty, required) in expected {
        match cols.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)) {
            Some((_, actual)) if actual.eq_ignore_ascii_case(ty) => present.push(name.to_string()),
            Some((_, actual)) => {
                return Err(Error::SchemaChanged {
                    path: path.to_path_buf(),
                    detail: format!(
                        "column {table}.{name} is declared {actual:?}, agent-db knows it as {ty}; refusing to touch this store"
                    ),
                })
            }
            None if *required => {
                return Err(Error::SchemaChanged {
                    path: path.to_path_buf(),
                    detail: format!(
                        "column {table}.{name} is missing; this kodelet version is not one agent-db knows"
                    ),
                })
            }
            None => {}
        }
    }
    Ok(present)
}

thread_local! {
    /// The last schema check on this thread: (file, its schema cookie then, the result). The
    /// writer thread lives for one run and checks in every transaction.
    static CHECKED: std::cell::RefCell<Option<(std::path::PathBuf, i64, Columns)>> =
        const { std::cell::RefCell::new(None) };
}

/// [`check_schema`], repeated only when the file's schema cookie (`PRAGMA schema_version`,
/// which SQLite changes with every schema change by any connection) differs from the last check
/// on this thread: the writer runs it in every transaction, and reading the two tables' column
/// lists prepares two `PRAGMA` statements each time.
pub fn check_schema_again(conn: &Connection, path: &Path) -> Result<Columns> {
    let cookie: i64 = conn
        .prepare_cached("PRAGMA schema_version")
        .at(path)?
        .query_row([], |r| r.get(0))
        .at(path)?;
    let known = CHECKED.with_borrow(|c| match c {
        Some((p, v, cols)) if p == path && *v == cookie => Some(*cols),
        _ => None,
    });
    if let Some(cols) = known {
        return Ok(cols);
    }
    let cols = check_schema(conn, path)?;
    CHECKED.set(Some((path.to_path_buf(), cookie, cols)));
    Ok(cols)
}

/// Verify that the columns agent-db reads and writes exist with the meaning it knows. Extra
/// tables and extra columns are fine; a migration newer than [`NEWEST_KNOWN`] is refused by the
/// write commands only (see the adapter's `schema_status`).
pub fn check_schema(conn: &Connection, path: &Path) -> Result<Columns> {
    let c = check_table(conn, path, "conversations", CONVERSATION_COLUMNS)?;
    let s = check_table(conn, path, "conversation_summaries", SUMMARY_COLUMNS)?;
    let has = |v: &[String], n: &str| v.iter().any(|x| x == n);
    let table = |name: &str| -> Result<bool> {
        conn.prepare_cached("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?1")
            .at(path)?
            .query_row([name], |_| Ok(()))
            .optional()
            .map(|o| o.is_some())
            .at(path)
    };
    Ok(Columns {
        conversations_cwd: has(&c, "cwd"),
        summaries_provider: has(&s, "provider"),
        summaries_metadata: has(&s, "metadata"),
        summaries_cwd: has(&s, "cwd"),
        compaction_history: has(&c, "compaction_history"),
        chat_turns: table("chat_turns")?,
        artifacts: table("conversation_artifacts")?,
        search_state: table("conversation_search_state")?,
    })
}

/// Create a fresh store in kodelet's layout at `path` (WAL mode, as kodelet requires). Refuses a
/// path that exists and is not empty. Returns the open connection.
pub fn init_store(path: &Path) -> Result<Connection> {
    if let Ok(md) = std::fs::metadata(path) {
        if md.len() > 0 || md.is_dir() {
            return Err(Error::Usage(format!(
                "{}: already exists; init only creates new stores",
                path.display()
            )));
        }
    }
    let conn = Connection::open(path).at(path)?;
    conn.busy_timeout(std::time::Duration::from_millis(5000))
        .at(path)?;
    let mode: String = conn
        .pragma_update_and_check(None, "journal_mode", "WAL", |r| r.get(0))
        .at(path)?;
    if !mode.eq_ignore_ascii_case("wal") {
        return Err(Error::Usage(format!(
            "{}: cannot use WAL journal mode here (got {mode}); kodelet requires WAL",
            path.display()
        )));
    }
    conn.pragma_update(None, "foreign_keys", "ON").at(path)?;
    conn.execute_batch(include_str!("schema.sql")).at(path)?;
    let now = crate::gotime::format_go(&crate::gotime::now(), None);
    for (version, description) in INIT_MIGRATIONS {
        conn.execute(
            "INSERT OR IGNORE INTO schema_migrations(version, applied_at, description) VALUES (?1, ?2, ?3)",
            rusqlite::params![version, now, description],
        )
        .at(path)?;
    }
    Ok(conn)
}

/// The listing order (docs/usage.md "Order"): most recently updated first by the stored
/// `updated_at` (SQLite's order of values, so by the bytes of the text), ties in the rowid
/// order of the row the conversation is listed from.
///
/// A conversation is listed from its **summary row** when that row is usable: its `updated_at`
/// is TEXT (kodelet writes both tables in one transaction, so the two `updated_at` agree) and
/// its conversation exists. `provider`, `usage` and `created_at` still fall back to the
/// conversation's own cells when the summary's are NULL (legacy rows), lazily: SQLite seeks the
/// conversation's row only for such a row. The join is a probe of the conversations'
/// primary-key index; `raw_messages` is never read.
///
/// Columns: id, provider, usage, created_at, updated_at, name, metadata, message_count, cwd.
const SUMMARY_LIST_SQL: &str = "SELECT s.id,
  COALESCE(s.provider, c.provider),
  COALESCE(s.usage, c.usage),
  COALESCE(s.created_at, c.created_at),
  s.updated_at,
  s.summary,
  s.metadata,
  s.message_count,
  @CWD@
FROM conversation_summaries s JOIN conversations c ON c.id = s.id
WHERE typeof(s.updated_at) = 'text'";

/// Listing order on `idx_summaries_updated_at`: rows come in order as they are read (random
/// access into the table). Used when rows cannot be judged in advance.
const ORDER_BY_INDEX: &str = " ORDER BY s.updated_at DESC, s.rowid";

/// The summary rows in the table's own order (one sequential pass), for a prefiltered listing.
/// Columns as [`SUMMARY_LIST_SQL`]'s, without the conversations' values (the few rows kept are
/// checked and completed one by one), then the rowid. `@FIELDS@` is [`SEQ_META`] or
/// [`SEQ_FACTS`].
const SUMMARY_SEQ_SQL: &str = "SELECT s.id, @FIELDS@, s.rowid
FROM conversation_summaries s WHERE typeof(s.updated_at) = 'text'";

/// [`SUMMARY_SEQ_SQL`]'s columns for a listing's metadata.
const SEQ_META: &str = "s.provider, s.usage, s.created_at, s.updated_at,
  s.summary, s.metadata, s.message_count, @CWD@";

/// [`SUMMARY_SEQ_SQL`]'s columns for [`Facts`] alone, at the same positions: facts read neither
/// the provider nor the creation time, so those are constants (never NULL, so a row never
/// falls back to its conversation's cell for them), and the metadata columns are not read.
const SEQ_FACTS: &str = "'', s.usage, '', s.updated_at, NULL, NULL, NULL, NULL";

/// Conversations with no summary row (the anti-join), on the two primary-key indexes alone; see
/// [`without_summary`] for the faster merge used when both indexes order ids by their bytes.
const NO_SUMMARY_SQL: &str = "SELECT c.rowid FROM conversations c
WHERE NOT EXISTS (SELECT 1 FROM conversation_summaries s WHERE s.id = c.id)";

/// Conversations whose summary row's `updated_at` is not TEXT, found by ranges of
/// `idx_summaries_updated_at` (numbers sort before any text, BLOBs after).
const FALLBACK_SQL: &str =
    "SELECT c.rowid FROM conversation_summaries s JOIN conversations c ON c.id = s.id
WHERE s.updated_at < ''
UNION ALL
SELECT c.rowid FROM conversation_summaries s JOIN conversations c ON c.id = s.id
WHERE s.updated_at >= x''";

/// The NULL part of [`FALLBACK_SQL`], for a store whose `conversation_summaries.updated_at` is
/// not declared NOT NULL (kodelet declares it so; SQLite then plans `IS NULL` as a full scan).
const FALLBACK_NULL_SQL: &str = "
UNION ALL
SELECT c.rowid FROM conversation_summaries s JOIN conversations c ON c.id = s.id
WHERE s.updated_at IS NULL";

/// One conversation listed from its own row (and its summary row's message count, if any).
/// Same columns as [`SUMMARY_LIST_SQL`].
const OWN_ROW_SQL: &str = "SELECT c.id,
  COALESCE(s.provider, c.provider),
  COALESCE(s.usage, c.usage),
  COALESCE(s.created_at, c.created_at),
  c.updated_at,
  CASE WHEN s.id IS NULL THEN c.summary ELSE s.summary END,
  CASE WHEN s.id IS NULL THEN c.metadata ELSE s.metadata END,
  s.message_count,
  CASE WHEN s.id IS NULL THEN @CCWD@ ELSE @CWD@ END
FROM conversations c LEFT JOIN conversation_summaries s ON s.id = c.id";

/// The listing query for stores whose summaries lack provider/metadata columns (old kodelet):
/// those columns only exist in `conversations`, so the listing reads that table (ties in rowid
/// order).
const LIST_SQL_OLD: &str = "SELECT c.id, c.provider, COALESCE(s.usage, c.usage),
  COALESCE(s.created_at, c.created_at), c.updated_at,
  CASE WHEN s.id IS NULL THEN c.summary ELSE s.summary END, c.metadata, s.message_count, NULL
FROM conversations c LEFT JOIN conversation_summaries s ON s.id = c.id";

/// SQL text for the store's optional columns.
fn with_columns(sql: &str, cols: &Columns) -> String {
    let cwd = if cols.summaries_cwd { "s.cwd" } else { "NULL" };
    let ccwd = if cols.conversations_cwd {
        "c.cwd"
    } else {
        "NULL"
    };
    sql.replace("@CWD@", cwd).replace("@CCWD@", ccwd)
}

/// The SQLite type name of a value, for messages.
pub fn sql_type(v: ValueRef<'_>) -> &'static str {
    match v {
        ValueRef::Null => "NULL",
        ValueRef::Integer(_) => "INTEGER",
        ValueRef::Real(_) => "REAL",
        ValueRef::Text(_) => "TEXT",
        ValueRef::Blob(_) => "BLOB",
    }
}

fn meta_from_row(r: &Row<'_>) -> rusqlite::Result<ConversationMeta> {
    let mut m = super::meta_from_columns(
        lossy(r, 0)?.unwrap_or_default(),
        lossy(r, 1)?.unwrap_or_default(),
        lossy(r, 2)?,
        lossy(r, 3)?.unwrap_or_default(),
        lossy(r, 4)?.unwrap_or_default(),
        lossy(r, 5)?,
        lossy(r, 6)?.as_deref(),
        r.get(7).ok(),
    );
    m.cwd = lossy(r, 8)?;
    Ok(m)
}

/// The collation of a table's primary-key index on `id`, if it has one.
fn pk_collation(conn: &Connection, table: &str) -> rusqlite::Result<Option<String>> {
    conn.query_row(
        "SELECT x.coll FROM pragma_index_list(?1) l, pragma_index_xinfo(l.name) x
         WHERE l.origin = 'pk' AND x.name = 'id' AND x.key = 1",
        [table],
        |r| r.get(0),
    )
    .optional()
}

/// Summary ids with no conversation, as (is a BLOB, bytes); NULL ids match nothing and are not
/// held. `None` when the merge could not be used: each kept row is then probed.
type Orphans = Option<std::collections::HashSet<(bool, Vec<u8>)>>;

/// The rowids of conversations with no summary row, and the summary ids with no conversation.
/// When both primary-key indexes order ids by their bytes, one merge of the two ordered id lists
/// (two index scans) answers both, instead of a probe of one index per row of the other;
/// otherwise [`NO_SUMMARY_SQL`] (and no orphan set). Ids are TEXT or BLOB (both columns have
/// TEXT affinity) or NULL, which matches nothing.
fn without_summary(conn: &Connection, path: &Path) -> Result<(Vec<i64>, Orphans)> {
    let binary = |t: &str| pk_collation(conn, t).map(|c| c.as_deref() == Some("BINARY"));
    if !(binary("conversations").at(path)? && binary("conversation_summaries").at(path)?) {
        let mut stmt = conn.prepare(NO_SUMMARY_SQL).at(path)?;
        let rows = stmt.query_map([], |r| r.get::<_, i64>(0)).at(path)?;
        return Ok((rows.collect::<rusqlite::Result<Vec<i64>>>().at(path)?, None));
    }
    let mut convs = conn
        .prepare("SELECT id, rowid FROM conversations ORDER BY id")
        .at(path)?;
    let mut sums = conn
        .prepare("SELECT id FROM conversation_summaries ORDER BY id")
        .at(path)?;
    let mut convs = convs.query([]).at(path)?;
    let mut sums = sums.query([]).at(path)?;
    // Each side's current id, its buffer reused from row to row (`None`: that side is done).
    let mut next_conv = |k: &mut Option<(SortKey, i64)>| -> Result<()> {
        match (convs.next().at(path)?, k.as_mut()) {
            (Some(r), Some((key, rowid))) => {
                key.set(r.get_ref(0).at(path)?);
                *rowid = r.get(1).at(path)?;
            }
            (Some(r), None) => *k = Some((SortKey::of(r.get_ref(0).at(path)?), r.get(1).at(path)?)),
            (None, _) => *k = None,
        }
        Ok(())
    };
    let mut next_sum = |k: &mut Option<SortKey>| -> Result<()> {
        match (sums.next().at(path)?, k.as_mut()) {
            (Some(r), Some(key)) => key.set(r.get_ref(0).at(path)?),
            (Some(r), None) => *k = Some(SortKey::of(r.get_ref(0).at(path)?)),
            (None, _) => *k = None,
        }
        Ok(())
    };
    let orphan = |k: &SortKey, set: &mut std::collections::HashSet<(bool, Vec<u8>)>| match k {
        SortKey::Text(b) => {
            set.insert((false, b.clone()));
        }
        SortKey::Blob(b) => {
            set.insert((true, b.clone()));
        }
        // NULL matches nothing; a number cannot be stored in a TEXT-affinity column.
        SortKey::Null | SortKey::Number(_) => {}
    };
    let mut no_summary = Vec::new();
    let mut orphans = std::collections::HashSet::new();
    let (mut c, mut s) = (None, None);
    next_conv(&mut c)?;
    next_sum(&mut s)?;
    loop {
        let order = match (&c, &s) {
            (None, None) => break,
            (Some(_), None) => std::cmp::Ordering::Less,
            (None, Some(_)) => std::cmp::Ordering::Greater,
            (Some((ck, _)), Some(sk)) => ck.cmp(sk),
        };
        let null = |k: &SortKey| *k == SortKey::Null;
        match order {
            std::cmp::Ordering::Equal if !c.as_ref().is_some_and(|(k, _)| null(k)) => {
                next_conv(&mut c)?;
                next_sum(&mut s)?;
            }
            std::cmp::Ordering::Less | std::cmp::Ordering::Equal => {
                no_summary.push(c.as_ref().expect("a conversation sorts first").1);
                next_conv(&mut c)?;
            }
            std::cmp::Ordering::Greater => {
                orphan(s.as_ref().expect("a summary sorts first"), &mut orphans);
                next_sum(&mut s)?;
            }
        }
    }
    Ok((no_summary, Some(orphans)))
}

/// The conversations listed from their own row, in listing order: (updated_at, rowid).
/// Also the summary ids with no conversation ([`without_summary`]).
fn fallback_rows(conn: &Connection, path: &Path) -> Result<(Vec<(SortKey, i64)>, Orphans)> {
    let not_null: bool = conn
        .query_row(
            "SELECT \"notnull\" FROM pragma_table_info('conversation_summaries') WHERE name = 'updated_at'",
            [],
            |r| r.get::<_, i64>(0),
        )
        .optional()
        .at(path)?
        .is_some_and(|n| n != 0);
    let sql = if not_null {
        FALLBACK_SQL.to_string()
    } else {
        format!("{FALLBACK_SQL}{FALLBACK_NULL_SQL}")
    };
    let (mut rowids, orphans) = without_summary(conn, path)?;
    let mut stmt = conn.prepare(&sql).at(path)?;
    for rowid in stmt.query_map([], |r| r.get::<_, i64>(0)).at(path)? {
        rowids.push(rowid.at(path)?);
    }
    let mut key = conn
        .prepare("SELECT updated_at FROM conversations WHERE rowid = ?1")
        .at(path)?;
    let mut out = Vec::with_capacity(rowids.len());
    for rowid in rowids {
        let k = key
            .query_row([rowid], |r| Ok(SortKey::of(r.get_ref(0)?)))
            .optional()
            .at(path)?;
        if let Some(k) = k {
            out.push((k, rowid));
        }
    }
    // Most recent first, ties in rowid order.
    out.sort_by(|a, b| newest_first((&a.0, a.1), (&b.0, b.1)));
    out.dedup_by_key(|x| x.1);
    Ok((out, orphans))
}

/// The summary rows the prefilter keeps, read in one sequential pass whatever share is kept
/// (never in `idx_summaries_updated_at`'s order, which reads the table one page per row), to be
/// put in listing order by [`NewestFirst`].
/// With `facts`, only each kept row's [`Facts`] are held ([`NewestFirst::push_facts_at`]).
fn prefiltered_rows(
    conn: &Connection,
    path: &Path,
    cols: &Columns,
    prefilter: &Prefilter,
    orphans: &Orphans,
    facts: bool,
) -> Result<NewestFirst> {
    let mut own = conn
        .prepare("SELECT provider, usage, created_at FROM conversations WHERE id = ?1")
        .at(path)?;
    let fields = if facts { SEQ_FACTS } else { SEQ_META };
    let sql = with_columns(&SUMMARY_SEQ_SQL.replace("@FIELDS@", fields), cols);
    let mut stmt = conn.prepare(&sql).at(path)?;
    let mut rows = stmt.query([]).at(path)?;
    let mut kept = NewestFirst::listing();
    while let Some(r) = rows.next().at(path)? {
        // Most rows are below the threshold: drop them on the stored bytes when that is sure.
        // A kept row's sure fields are used as they are (no serde decode of the cell).
        let mut sure = None;
        if let ValueRef::Text(b) | ValueRef::Blob(b) = r.get_ref(2).at(path)? {
            sure = super::quick::window(b);
            if sure.is_some_and(|w| super::quick::rejects_window(prefilter, w)) {
                continue;
            }
        }
        let id = r.get_ref(0).at(path)?;
        let nulls = [1, 2, 3].map(|i| matches!(r.get_ref(i), Ok(ValueRef::Null)));
        if let (true, Some([current, max, _, _]), [false, false, false]) = (facts, sure, nulls) {
            // The sure usage is all the selection reads besides the id and `updated_at`.
            if prefilter.keeps_usage(current, max) && exists(conn, path, orphans, id)? {
                push_sure_facts(&mut kept, r, path, prefilter.times, [current, max])?;
            }
            continue;
        }
        // A legacy NULL falls back to the conversation's own cell (and proves it exists).
        let theirs = if nulls.iter().any(|n| *n) {
            match own_cells(&mut own, id, path)? {
                Some(v) => Some(v),
                None => continue,
            }
        } else {
            None
        };
        let mut m = row_meta(r, path, theirs.as_ref(), nulls, sure)?;
        // The usage is decoded once, here; the prefilter judges the decoded row.
        if !prefilter.keeps(&m) {
            continue;
        }
        if theirs.is_none() && !exists(conn, path, orphans, id)? {
            continue;
        }
        let (key, rowid) = (r.get_ref(4).at(path)?, r.get(9).at(path)?);
        if facts {
            kept.push_facts_at(path, key, rowid, &m.facts())?;
            continue;
        }
        m.cwd = lossy(r, 8).at(path)?;
        kept.push_meta_at(path, key, rowid, m)?;
    }
    Ok(kept)
}

/// Hold a kept row's [`Facts`] from its sure usage (`[current, max]`), without decoding it.
fn push_sure_facts(
    kept: &mut NewestFirst,
    r: &Row<'_>,
    path: &Path,
    times: bool,
    [current, max]: [Option<i64>; 2],
) -> Result<()> {
    let id = lossy_value(r.get_ref(0).at(path)?);
    let key = r.get_ref(4).at(path)?;
    let updated_at = lossy_value(key).filter(|_| times);
    let f = Facts {
        parent: None,
        archived: false,
        id: id.as_deref().unwrap_or_default(),
        updated_at: updated_at.as_deref().unwrap_or_default(),
        current_context: current,
        max_context: max,
        problem: None,
    };
    kept.push_facts_at(path, key, r.get(9).at(path)?, &f)
}

/// The conversation's own `provider`, `usage` and `created_at` cells (for a summary row's
/// legacy NULLs), or `None` when no conversation has this id.
fn own_cells(
    own: &mut rusqlite::Statement<'_>,
    id: ValueRef<'_>,
    path: &Path,
) -> Result<Option<[Option<String>; 3]>> {
    own.query_row([ToSqlOutput::Borrowed(id)], |c| {
        Ok([lossy(c, 0)?, lossy(c, 1)?, lossy(c, 2)?])
    })
    .optional()
    .at(path)
}

/// A summary row's metadata, its NULL cells taken from the conversation's own (`theirs`), and
/// the usage fields from the sure read of the stored bytes when there is one.
fn row_meta(
    r: &Row<'_>,
    path: &Path,
    theirs: Option<&[Option<String>; 3]>,
    nulls: [bool; 3],
    sure: Option<[Option<i64>; 4]>,
) -> Result<ConversationMeta> {
    let pick = |i: usize| -> Result<Option<String>> {
        match (theirs, nulls[i - 1]) {
            (Some(v), true) => Ok(v[i - 1].clone()),
            _ => lossy(r, i).at(path),
        }
    };
    let mut m = super::meta_from_columns(
        lossy(r, 0).at(path)?.unwrap_or_default(),
        pick(1)?.unwrap_or_default(),
        if sure.is_some() { None } else { pick(2)? },
        pick(3)?.unwrap_or_default(),
        lossy(r, 4).at(path)?.unwrap_or_default(),
        lossy(r, 5).at(path)?,
        lossy_ref(r, 6).at(path)?.as_deref(),
        r.get(7).ok(),
    );
    if let Some([current, max, input, output]) = sure {
        (m.current_context, m.max_context) = (current, max);
        (m.input_tokens, m.output_tokens) = (input, output);
    }
    Ok(m)
}

/// Whether a conversation has this id: from the merge's orphan set when there is one, else a
/// probe of the conversations' primary-key index.
fn exists(conn: &Connection, path: &Path, orphans: &Orphans, id: ValueRef<'_>) -> Result<bool> {
    if let Some(set) = orphans {
        return Ok(match id {
            ValueRef::Text(_) | ValueRef::Blob(_) if set.is_empty() => true,
            ValueRef::Text(b) => !set.contains(&(false, b.to_vec())),
            ValueRef::Blob(b) => !set.contains(&(true, b.to_vec())),
            _ => false,
        });
    }
    let mut stmt = conn
        .prepare_cached("SELECT 1 FROM conversations WHERE id = ?1")
        .at(path)?;
    stmt.exists([ToSqlOutput::Borrowed(id)]).at(path)
}

/// Stream every conversation's metadata in listing order (see [`SUMMARY_LIST_SQL`]); `f`
/// returns `false` to stop early. With a prefilter, rows the selection would drop silently
/// may be left out.
pub fn scan(
    conn: &Connection,
    path: &Path,
    prefilter: Prefilter,
    f: &mut dyn FnMut(ConversationMeta) -> bool,
) -> Result<()> {
    let cols = check_schema(conn, path)?;
    if !(cols.summaries_provider && cols.summaries_metadata) {
        let sql = format!("{LIST_SQL_OLD} ORDER BY c.updated_at DESC, c.rowid");
        let mut stmt = conn.prepare(&sql).at(path)?;
        let mut rows = stmt.query([]).at(path)?;
        while let Some(r) = rows.next().at(path)? {
            if !f(meta_from_row(r).at(path)?) {
                break;
            }
        }
        return Ok(());
    }
    let (fallback, orphans) = fallback_rows(conn, path)?;
    if prefilter.all_over.is_some() {
        let kept = prefiltered_rows(conn, path, &cols, &prefilter, &orphans, false)?;
        return kept.with_sorted(path, |next| merge(conn, path, &cols, fallback, next, f));
    }
    let sql = format!("{}{ORDER_BY_INDEX}", with_columns(SUMMARY_LIST_SQL, &cols));
    let mut stmt = conn.prepare(&sql).at(path)?;
    let mut rows = stmt.query([]).at(path)?;
    let mut next = || -> Result<Option<(SortKey, ConversationMeta)>> {
        match rows.next().at(path)? {
            Some(r) => Ok(Some((
                SortKey::of(r.get_ref(4).at(path)?),
                meta_from_row(r).at(path)?,
            ))),
            None => Ok(None),
        }
    };
    merge(conn, path, &cols, fallback, &mut next, f)
}

/// [`scan`] with `--all-over`, of only what the selection reads: when every conversation is
/// listed from its summary row and none from its own row (as in a store kodelet keeps), each
/// kept row's [`Facts`] alone are held and sorted; otherwise the metas' facts.
pub fn scan_facts(
    conn: &Connection,
    path: &Path,
    prefilter: Prefilter,
    f: &mut dyn FnMut(Facts<'_>) -> bool,
) -> Result<()> {
    let cols = check_schema(conn, path)?;
    if !(cols.summaries_provider && cols.summaries_metadata) {
        return scan(conn, path, prefilter, &mut |m| f(m.facts()));
    }
    let (fallback, orphans) = fallback_rows(conn, path)?;
    let facts = fallback.is_empty();
    let kept = prefiltered_rows(conn, path, &cols, &prefilter, &orphans, facts)?;
    if facts {
        return kept.each_facts(path, |facts| Ok(f(facts)));
    }
    kept.with_sorted(path, |next| {
        merge(conn, path, &cols, fallback, next, &mut |m| f(m.facts()))
    })
}

type NextRow<'a> = dyn FnMut() -> Result<Option<(SortKey, ConversationMeta)>> + 'a;

/// Merge the summary-listed rows (`next`, in listing order) with the conversations listed from
/// their own row: one of those comes before a summary row it sorts after (ties: summary rows
/// first).
fn merge(
    conn: &Connection,
    path: &Path,
    cols: &Columns,
    fallback: Vec<(SortKey, i64)>,
    next: &mut NextRow<'_>,
    f: &mut dyn FnMut(ConversationMeta) -> bool,
) -> Result<()> {
    let mut fallback = fallback.into_iter().peekable();
    let mut own = conn
        .prepare(&format!(
            "{} WHERE c.rowid = ?1",
            with_columns(OWN_ROW_SQL, cols)
        ))
        .at(path)?;
    let mut emit_fallback_until =
        |bound: Option<&SortKey>, f: &mut dyn FnMut(ConversationMeta) -> bool| -> Result<bool> {
            while let Some((k, rowid)) = fallback.peek() {
                if bound.is_some_and(|b| k.cmp(b) != std::cmp::Ordering::Greater) {
                    break;
                }
                let rowid = *rowid;
                fallback.next();
                if let Some(m) = own.query_row([rowid], meta_from_row).optional().at(path)? {
                    if !f(m) {
                        return Ok(false);
                    }
                }
            }
            Ok(true)
        };
    while let Some((key, meta)) = next()? {
        if !emit_fallback_until(Some(&key), f)? {
            return Ok(());
        }
        if !f(meta) {
            return Ok(());
        }
    }
    emit_fallback_until(None, f)?;
    Ok(())
}

/// One conversation's metadata (from its summary row when usable, as [`scan`] lists it), or
/// `None`.
pub fn meta(conn: &Connection, path: &Path, id: &str) -> Result<Option<ConversationMeta>> {
    let cols = check_schema(conn, path)?;
    if cols.summaries_provider && cols.summaries_metadata {
        let sql = format!("{} AND s.id = ?1", with_columns(SUMMARY_LIST_SQL, &cols));
        let found = conn
            .query_row(&sql, [id], meta_from_row)
            .optional()
            .at(path)?;
        if found.is_some() {
            return Ok(found);
        }
        let sql = format!("{} WHERE c.id = ?1", with_columns(OWN_ROW_SQL, &cols));
        return conn
            .query_row(&sql, [id], meta_from_row)
            .optional()
            .at(path);
    }
    let sql = format!("{LIST_SQL_OLD} WHERE c.id = ?1");
    conn.query_row(&sql, [id], meta_from_row)
        .optional()
        .at(path)
}

/// How the writer recognizes that `updated_at` changed since the conversation was read: the
/// value's storage class and exact bytes (a Go writer can store anything there, and a number or
/// invalid UTF-8 must compare as exactly as text does).
pub fn version_marker(v: ValueRef<'_>) -> String {
    match v {
        ValueRef::Text(t) => match std::str::from_utf8(t) {
            Ok(s) => format!("text:{s}"),
            Err(_) => format!("text-bytes:{}", hex::encode(t)),
        },
        ValueRef::Integer(i) => format!("integer:{i}"),
        ValueRef::Real(f) => format!("real:{}", f.to_bits()),
        ValueRef::Blob(b) => format!("blob:{}", hex::encode(b)),
        ValueRef::Null => "null".to_string(),
    }
}

/// Everything agent-db needs of one conversation to plan and write its compaction.
#[derive(Debug, Clone)]
pub struct KodeletRow {
    pub id: String,
    pub raw_messages: String,
    /// Whether `raw_messages` is stored as a BLOB (kodelet writes TEXT).
    pub raw_blob: bool,
    pub provider: String,
    /// [`version_marker`] of `updated_at`.
    pub version_marker: String,
    pub metadata: Option<String>,
    /// [`own_summary_len`] of the row's `compaction_history`.
    pub own_summary: usize,
}

/// Load one conversation: the columns planning and writing need, in one statement. SQLite finds
/// a column after `raw_messages` by walking the row's chain of overflow pages, and a column after
/// `tool_results` (kodelet's `cwd`, its `compaction_history`) by walking that one too, a read of
/// every page of both values: the columns read here are the ones before `tool_results`, and
/// `compaction_history` (when the store has it), read in the same walk.
pub fn load(conn: &Connection, path: &Path, id: &str) -> Result<KodeletRow> {
    // A planning thread loads many conversations: the columns are read again only when the
    // schema changed.
    let cols = check_schema_again(conn, path)?;
    let history = if cols.compaction_history {
        "CAST(compaction_history AS TEXT)"
    } else {
        "NULL"
    };
    let sql = format!(
        "SELECT id, raw_messages, provider, updated_at, metadata, {history}
         FROM conversations WHERE id = ?1"
    );
    let row = conn
        .prepare_cached(&sql)
        .at(path)?
        .query_row([id], |r| {
            let raw = match r.get_ref(1)? {
                ValueRef::Text(b) | ValueRef::Blob(b) => {
                    String::from_utf8(b.to_vec()).map_err(|e| {
                        format!("is not valid UTF-8 (byte {})", e.utf8_error().valid_up_to())
                    })
                }
                ValueRef::Null => Err("is NULL".to_string()),
                other => Err(format!("holds a {} instead of JSON text", sql_type(other))),
            };
            Ok((
                raw,
                history_cell(r.get_ref(5)?),
                KodeletRow {
                    id: lossy(r, 0)?.unwrap_or_default(),
                    raw_messages: String::new(),
                    raw_blob: matches!(r.get_ref(1)?, ValueRef::Blob(_)),
                    provider: lossy(r, 2)?.unwrap_or_default(),
                    version_marker: version_marker(r.get_ref(3)?),
                    metadata: lossy(r, 4)?,
                    own_summary: 0,
                },
            ))
        })
        .optional()
        .at(path)?;
    let (raw, history, mut conv) =
        row.ok_or_else(|| Error::ConversationNotFound { id: id.to_string() })?;
    conv.raw_messages = raw.map_err(|why| {
        Error::conversation(
            id,
            format!("raw_messages {why}; agent-db will not touch it"),
        )
    })?;
    conv.own_summary = own_summary_len(history.at(path)?.as_deref());
    Ok(conv)
}

/// `CAST(compaction_history AS TEXT)` as a `String`, failing as `Row::get` fails for text that
/// is not UTF-8 (the error a statement reading only this column gave).
fn history_cell(v: ValueRef<'_>) -> rusqlite::Result<Option<String>> {
    match v {
        ValueRef::Text(b) => std::str::from_utf8(b)
            .map(|t| Some(t.to_string()))
            .map_err(|e| {
                rusqlite::Error::FromSqlConversionFailure(
                    0,
                    rusqlite::types::Type::Text,
                    Box::new(e),
                )
            }),
        _ => Ok(None),
    }
}

/// How many leading items of the conversation's `raw_messages` kodelet sends but does not show
/// (`compaction_history.activeDisplayStart`, of the stored `history`): what a compaction put in
/// place of the history. 0 without a compaction history, or one kodelet could not load (the
/// write path reports that).
pub fn own_summary_len(history: Option<&str>) -> usize {
    super::history::parse(history)
        .ok()
        .flatten()
        .map_or(0, |h| h.start)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use rusqlite::types::Value;

    /// The history read in the load's statement answers, and fails, as the statement that read
    /// only it did (`Row::get` of column 0 is the oracle): text, NULL, and bytes that are not
    /// UTF-8 (whose error names column 0, as before).
    #[test]
    fn a_history_read_with_the_row_fails_as_one_read_alone() {
        let c = Connection::open_in_memory().unwrap();
        for value in [
            "'{\"activeDisplayStart\":2}'",
            "NULL",
            "x'7b22ff'",
            "x''",
            "12",
        ] {
            let sql = format!("SELECT CAST({value} AS TEXT)");
            let (got, want) = c
                .query_row(&sql, [], |r| {
                    Ok((history_cell(r.get_ref(0)?), r.get::<_, Option<String>>(0)))
                })
                .unwrap();
            match (got, want) {
                (Ok(g), Ok(w)) => assert_eq!(g, w, "{value}"),
                (Err(g), Err(w)) => assert_eq!(g.to_string(), w.to_string(), "{value}"),
                (g, w) => panic!("{value}: {g:?} against {w:?}"),
            }
        }
    }

    /// An id as a store may hold it: TEXT or BLOB of a few bytes (a small alphabet, so the two
    /// tables share ids and a TEXT and a BLOB can hold the same bytes), or NULL.
    fn id_value() -> impl Strategy<Value = Value> {
        let bytes = prop::collection::vec(prop_oneof![Just(b'a'), Just(b'b'), Just(0xffu8)], 0..3);
        prop_oneof![
            4 => bytes.clone().prop_map(|b| Value::Text(String::from_utf8_lossy(&b).into_owned())),
            2 => bytes.prop_map(Value::Blob),
            1 => Just(Value::Null),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(128))]
        /// The one merge of the two primary-key indexes answers both questions as SQLite's own
        /// `=` does: which conversations have no summary row, and which summary ids have no
        /// conversation (the listing's existence check), against SQL the test writes.
        #[test]
        fn the_id_merge_agrees_with_sqls_join(
            convs in prop::collection::vec(id_value(), 0..12),
            sums in prop::collection::vec(id_value(), 0..12),
        ) {
            let conn = Connection::open_in_memory().unwrap();
            conn.execute_batch(include_str!("schema.sql")).unwrap();
            for id in &convs {
                // Primary keys: a repeated id is refused, as in a real store.
                let _ = conn.execute(
                    "INSERT INTO conversations (id, raw_messages, provider, usage, created_at, updated_at)
                     VALUES (?1, '[]', 'anthropic', '{}', 't', 't')",
                    [id],
                );
            }
            for id in &sums {
                let _ = conn.execute(
                    "INSERT INTO conversation_summaries (id, message_count, first_message, usage, created_at, updated_at)
                     VALUES (?1, 0, '', '{}', 't', 't')",
                    [id],
                );
            }
            let path = Path::new("test");
            let (mut got, orphans) = without_summary(&conn, path).unwrap();
            got.sort();
            let want: Vec<i64> = conn
                .prepare("SELECT c.rowid FROM conversations c WHERE NOT EXISTS
                          (SELECT 1 FROM conversation_summaries s WHERE s.id = c.id) ORDER BY 1")
                .unwrap()
                .query_map([], |r| r.get(0))
                .unwrap()
                .collect::<rusqlite::Result<_>>()
                .unwrap();
            prop_assert_eq!(got, want);
            let orphans = orphans.expect("BINARY primary keys: the merge ran");
            let mut probe = conn.prepare("SELECT id FROM conversation_summaries").unwrap();
            let mut rows = probe.query([]).unwrap();
            while let Some(r) = rows.next().unwrap() {
                let id = r.get_ref(0).unwrap();
                let by_sql: bool = conn
                    .query_row("SELECT EXISTS (SELECT 1 FROM conversations WHERE id = ?1)",
                               [ToSqlOutput::Borrowed(id)], |r| r.get(0))
                    .unwrap();
                prop_assert_eq!(exists(&conn, path, &Some(orphans.clone()), id).unwrap(), by_sql, "{:?}", id);
                prop_assert_eq!(exists(&conn, path, &None, id).unwrap(), by_sql, "probe {:?}", id);
            }
        }
    }

    /// The cached check follows the file's schema: a column another connection drops or renames
    /// between two checks is seen at the next one (the schema cookie changed).
    #[test]
    fn the_cached_schema_check_sees_a_schema_change_by_another_connection() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("storage.db");
        let conn = init_store(&path).unwrap();
        let first = check_schema_again(&conn, &path).unwrap();
        assert!(first.summaries_metadata && first.summaries_cwd);
        // Unchanged: the same answer.
        assert!(check_schema_again(&conn, &path).unwrap().summaries_metadata);
        let other = Connection::open(&path).unwrap();
        other
            .execute_batch("ALTER TABLE conversation_summaries DROP COLUMN metadata")
            .unwrap();
        let after = check_schema_again(&conn, &path).unwrap();
        assert!(!after.summaries_metadata && after.summaries_cwd);
        other
            .execute_batch("ALTER TABLE conversations RENAME COLUMN tool_results TO tool_output")
            .unwrap();
        match check_schema_again(&conn, &path) {
            Err(Error::SchemaChanged { detail, .. }) => {
                assert!(detail.contains("tool_results"), "{detail}")
            }
            other => panic!("expected SchemaChanged, got {other:?}"),
        }
    }
}

//! Opening a store file and recognizing it: the connection ([`connect`]), the table names
//! detection reads, and [`Store::open_with`] with its schema and version checks. Opening never
//! creates or changes anything in a file agent-db does not recognize.

use std::path::{Path, PathBuf};

use rusqlite::{Connection, OpenFlags};

use super::kind::{StoreKind, KINDS};
use super::{agent_tables, busy, preflight, Access, Location, Store};
use crate::error::{Error, Result, SqlContext};
use crate::models::ContextLimits;
use crate::util::join_and;

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
pub(crate) fn table_names(conn: &Connection, path: &Path) -> Result<Vec<String>> {
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
pub(crate) fn unknown_schema(path: &Path, tables: &[String]) -> Error {
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
        let kind =
            StoreKind::recognize(&conn, &tables).ok_or_else(|| unknown_schema(path, &tables))?;
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

//! Typed errors of the library and their documented exit codes.
//!
//! The library returns [`Error`]; only the CLI maps it to a process exit code through
//! [`Error::exit_code`]. Messages are lowercase, carry no trailing period, and name the path or
//! conversation they are about. No variant ever holds an API key.

use std::path::PathBuf;

pub mod decode;
pub use decode::DecodeError;

/// Documented process exit codes (see `docs/usage.md`, "Exit codes").
pub mod exit {
    /// Everything selected was done or rightly skipped.
    pub const OK: i32 = 0;
    /// The run finished, but at least one conversation failed (it is named in the report).
    pub const PARTIAL: i32 = 1;
    /// Bad command-line usage (clap's own code).
    pub const USAGE: i32 = 2;
    /// Bad configuration (config file, environment, recipe, hook setup).
    pub const CONFIG: i32 = 3;
    /// The store cannot be used: missing, not SQLite, unknown or changed schema.
    pub const STORE: i32 = 4;
    /// A named conversation or compaction does not exist, or its stored data cannot be read.
    pub const DATA: i32 = 5;
    /// Another agent-db run holds the lock on this store.
    pub const LOCKED: i32 = 6;
    /// A restore was refused (the row changed after the compaction, or it was already restored).
    pub const REFUSED: i32 = 7;
    /// An internal error: a bug in agent-db (for example a panic outside any one conversation).
    pub const INTERNAL: i32 = 8;
    /// Interrupted (Ctrl-C, SIGINT): `compact` finished the conversations in flight, started no
    /// more, and reported what was done (128 + SIGINT, as shells report it).
    pub const INTERRUPTED: i32 = 130;
    /// Another process (the agent) kept the store's write lock longer than agent-db waits
    /// (`compact.busy_wait`): nothing more was written; a rerun is safe.
    pub const BUSY: i32 = 9;
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("no conversation store found; looked in: {}", .looked.join(", "))]
    StoreNotFound { looked: Vec<String> },

    #[error("{path}: no such file")]
    MissingFile { path: PathBuf },

    #[error("{path}: not an SQLite database ({detail})")]
    NotSqlite { path: PathBuf, detail: String },

    #[error("{path}: not a known conversation store ({detail})")]
    UnknownSchema { path: PathBuf, detail: String },

    #[error("{path}: schema changed: {detail}")]
    SchemaChanged { path: PathBuf, detail: String },

    /// Several stores found and none chosen: about no one file, so the message names no path
    /// in front (the detail lists them all).
    #[error("{detail}")]
    AmbiguousStore { path: PathBuf, detail: String },

    #[error("{path}: sqlite: {source}")]
    Sqlite {
        path: PathBuf,
        #[source]
        source: rusqlite::Error,
    },

    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },

    #[error("conversation {id}: not found")]
    ConversationNotFound { id: String },

    #[error("conversation {id}: {detail}")]
    Conversation { id: String, detail: String },

    /// A conversation whose stored history does not decode.
    #[error("conversation {id}: {error}")]
    Decode { id: String, error: DecodeError },

    /// An ID given on the command line that names no conversation (see
    /// `store::prefix::unknown_id`); the hint says why when it can.
    #[error("conversation {id}: not found")]
    UnknownId { id: String, hint: String },

    #[error(
        "{path}: locked by another agent-db run (lock file {lock}); try again when it finishes"
    )]
    Locked { path: PathBuf, lock: PathBuf },

    /// Another process held a lock on the store for longer than agent-db waits (SQLite's
    /// `SQLITE_BUSY`/`SQLITE_LOCKED`, from any command). `holder` names it when the operating
    /// system says who (the CLI fills it in, `store::busy::holder`).
    #[error(
        "{path}: busy: {} holds a lock on it; nothing was left half-written, rerun later",
        .holder.as_deref().unwrap_or("another process")
    )]
    Busy {
        path: PathBuf,
        holder: Option<String>,
    },

    #[error("{0}")]
    NotFound(String),

    #[error("{0}")]
    Refused(String),

    #[error("{0}")]
    Config(String),

    #[error("{0}")]
    Usage(String),

    #[error("{path}: cannot be written: {detail}")]
    Unwritable { path: PathBuf, detail: String },

    #[error("internal error (a bug in agent-db; please report it): {0}")]
    Internal(String),

    /// An error with a hint: what the user can do about it. The message is the inner error's
    /// alone; the CLI prints the hint as a `hint:` line of its own ([`Error::hint`]).
    #[error("{error}")]
    Hinted { error: Box<Error>, hint: String },
}

impl Error {
    /// The documented exit code for this error.
    pub fn exit_code(&self) -> i32 {
        match self {
            Error::StoreNotFound { .. }
            | Error::MissingFile { .. }
            | Error::NotSqlite { .. }
            | Error::UnknownSchema { .. }
            | Error::SchemaChanged { .. }
            | Error::AmbiguousStore { .. }
            | Error::Sqlite { .. }
            | Error::Unwritable { .. }
            | Error::Io { .. } => exit::STORE,
            Error::ConversationNotFound { .. }
            | Error::UnknownId { .. }
            | Error::Conversation { .. }
            | Error::Decode { .. }
            | Error::NotFound(_) => exit::DATA,
            Error::Locked { .. } => exit::LOCKED,
            Error::Busy { .. } => exit::BUSY,
            Error::Refused(_) => exit::REFUSED,
            Error::Config(_) => exit::CONFIG,
            Error::Usage(_) => exit::USAGE,
            Error::Internal(_) => exit::INTERNAL,
            Error::Hinted { error, .. } => error.exit_code(),
        }
    }

    /// This error with `hint` (what the user can do about it) beside its message.
    pub fn with_hint(self, hint: impl Into<String>) -> Self {
        Error::Hinted {
            error: Box::new(self.unhinted()),
            hint: hint.into(),
        }
    }

    /// The hint this error carries, if any: [`Error::with_hint`]'s, or why an ID names no
    /// conversation ([`Error::UnknownId`]). Never part of the error's message.
    pub fn hint(&self) -> Option<&str> {
        match self {
            Error::Hinted { hint, .. } | Error::UnknownId { hint, .. } => Some(hint),
            _ => None,
        }
    }

    /// The error itself, without a hint given by [`Error::with_hint`].
    pub fn unhinted(self) -> Self {
        match self {
            Error::Hinted { error, .. } => *error,
            e => e,
        }
    }

    /// The error itself, by reference, without a hint given by [`Error::with_hint`].
    pub fn cause(&self) -> &Error {
        match self {
            Error::Hinted { error, .. } => error,
            e => e,
        }
    }

    /// A conversation whose stored history does not decode.
    pub fn decode(id: impl Into<String>, error: DecodeError) -> Self {
        Error::Decode {
            id: id.into(),
            error,
        }
    }

    /// A per-conversation data error.
    pub fn conversation(id: impl Into<String>, detail: impl Into<String>) -> Self {
        Error::Conversation {
            id: id.into(),
            detail: detail.into(),
        }
    }
}

/// The message of a caught panic's payload.
/// `Ok(None)` when the conversation is not there (for a store's re-read inside a write); every
/// other outcome as it is.
pub fn unless_gone<T>(r: Result<T>) -> Result<Option<T>> {
    match r {
        Ok(t) => Ok(Some(t)),
        Err(Error::ConversationNotFound { .. }) => Ok(None),
        Err(e) => Err(e),
    }
}

pub fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        s.to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "a panic with no message".to_string()
    }
}

/// Whether a SQLite error is another process's lock (`SQLITE_BUSY`, `SQLITE_LOCKED`).
pub fn is_busy(e: &rusqlite::Error) -> bool {
    matches!(e, rusqlite::Error::SqliteFailure(f, _)
        if matches!(f.code, rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked))
}

/// Attach the store path to a rusqlite error.
pub trait SqlContext<T> {
    fn at(self, path: &std::path::Path) -> Result<T>;
}

impl<T> SqlContext<T> for std::result::Result<T, rusqlite::Error> {
    /// Another process's lock (SQLITE_BUSY, SQLITE_LOCKED) is [`Error::Busy`], wherever it
    /// happens: the same error, message and exit code (9) from every command.
    fn at(self, path: &std::path::Path) -> Result<T> {
        self.map_err(|source| {
            if is_busy(&source) {
                Error::Busy {
                    path: path.to_path_buf(),
                    holder: None,
                }
            } else {
                Error::Sqlite {
                    path: path.to_path_buf(),
                    source,
                }
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::{exit, Error};

    #[test]
    fn a_hint_is_a_field_and_not_part_of_the_message() {
        let e = Error::Usage("--edit needs a terminal".into()).with_hint("use --plan-out FILE");
        assert_eq!(e.hint(), Some("use --plan-out FILE"));
        assert_eq!(e.to_string(), "--edit needs a terminal");
        assert!(!e.to_string().contains("hint:"));
        assert_eq!(e.exit_code(), exit::USAGE);
        assert!(matches!(e.cause(), Error::Usage(m) if m == "--edit needs a terminal"));
        // A second hint replaces the first rather than nesting it.
        let again = e.with_hint("another");
        assert_eq!(again.hint(), Some("another"));
        assert!(matches!(again.unhinted(), Error::Usage(_)));
    }

    #[test]
    fn a_decode_failure_keeps_its_cause_typed_under_the_conversation() {
        let cause = super::DecodeError::missing("message", "role").at(Some(2));
        let e = Error::decode("c1", cause.clone());
        assert_eq!(
            e.to_string(),
            "conversation c1: raw_messages[2]: message has no role"
        );
        assert_eq!(e.exit_code(), exit::DATA);
        assert!(matches!(&e, Error::Decode { id, error } if id == "c1" && *error == cause));
        assert_eq!(e.hint(), None);
    }

    #[test]
    fn an_unknown_id_carries_its_hint_outside_its_message() {
        let e = Error::UnknownId {
            id: "ab".into(),
            hint: "an ID prefix needs at least 4 characters".into(),
        };
        assert_eq!(e.to_string(), "conversation ab: not found");
        assert_eq!(e.hint(), Some("an ID prefix needs at least 4 characters"));
        assert_eq!(Error::NotFound("x".into()).hint(), None);
    }
}

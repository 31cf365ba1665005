//! agent-db: offline, transactional, undoable compaction for the SQLite conversation stores of
//! AI coding agents.
//!
//! Data flows one way: [`select`] picks conversations from a [`store`] (reading only stored
//! usage and timestamps), [`plan`] loads one conversation at a time, decodes its [`message`]s
//! and decides the [`split`]; a strategy turns the head into a summary; the store's writer
//! commits each compaction in its own transaction with an archived pre-image. The library never
//! prints: the binary's CLI layer renders reports.

pub mod agents;
pub mod archive;
pub mod compact;
pub mod config;
pub mod error;
pub mod failpoint;
pub mod gotime;
pub mod hooks;
pub mod message;
pub mod models;
pub mod pipeline;
pub mod plan;
pub mod provider;
pub mod recipe;
pub mod report;
pub mod retention;
pub mod select;
pub mod split;
pub mod store;
pub mod summary;
pub mod tokens;
pub mod util;

pub use error::{Error, Result};

/// agent-db's version, recorded in every audit row.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

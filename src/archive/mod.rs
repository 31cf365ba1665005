//! agent-db's undo log, in the store file's `agent_db_` tables: the audit history and restore
//! ([`restore`]), pruning the archive (`prune-archive`, [`restore::prune_archive`]), the
//! original histories a re-compaction summarizes ([`originals`]), size figures ([`stats`]) and
//! `vacuum` ([`vacuum`]). The rows themselves (pre-image cells, audit rows) are written by the
//! commit protocol in the compaction's own transaction ([`crate::store::pre_image`]).

pub mod originals;
pub mod restore;
pub mod stats;
pub mod vacuum;

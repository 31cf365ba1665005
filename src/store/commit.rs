//! The one commit protocol every store kind writes through (docs/reliability.md).
//!
//! [`commit`] owns the transaction: `BEGIN IMMEDIATE`, the version check, the audit row, the
//! archived pre-image, the store's apply step, the post-image hash, then `COMMIT` (an error
//! anywhere drops the transaction, which rolls it back). A store supplies only a [`Write`]:
//! how to read its conversation's current version, which cells and rows it will change (for the
//! archive), and how to apply the change. Restore needs nothing from the store: the archive
//! names its own tables, keys and columns (`store/restore.rs`).

use std::path::Path;

use rusqlite::{Connection, TransactionBehavior};

use super::pre_image::{self, AuditEntry, Cell};
use crate::error::{Result, SqlContext};

/// The outcome of a write.
#[derive(Debug, Clone, PartialEq)]
pub enum Written {
    Committed {
        compaction_id: i64,
    },
    /// The conversation changed (or vanished) since it was read; nothing was written.
    Changed(String),
}

/// What a store decided, inside the transaction, once the version matched.
pub enum Stage<A> {
    /// Write: archive `cells`, then apply.
    Ready(Staged<A>),
    /// The conversation is not as planned after all (for example its items moved); nothing is
    /// written and the conversation is reported as skipped with this reason.
    Changed(String),
}

/// The cells a write changes (column `*`: a row it inserts), extra facts for the audit row's
/// `details`, and what the apply step needs.
pub struct Staged<A> {
    pub cells: Vec<Cell>,
    /// A `details` entry (key, value) the store adds to the audit row.
    pub details: Option<(&'static str, serde_json::Value)>,
    /// The post-image hash of the first cells, when the store computed it from the values it
    /// writes (see [`pre_image::HashedPrefix`]).
    pub hashed: Option<pre_image::HashedPrefix>,
    pub apply: A,
}

/// One store's write of one compaction: its typed proposal.
pub trait Write: Send + 'static {
    /// The store's version token.
    type Version: PartialEq;
    /// What [`Write::read`] found, passed on to [`Write::stage`].
    type Current;
    /// What [`Write::stage`] decided, passed on to [`Write::apply`].
    type Apply;

    /// The version the compaction was planned on.
    fn planned(&self) -> &Self::Version;
    /// The conversation's current version and state, read inside the transaction; `None` when
    /// it is gone.
    fn read(&self, tx: &Connection, path: &Path) -> Result<Option<(Self::Version, Self::Current)>>;
    /// Decide the cells to archive and the change (nothing is written yet).
    fn stage(
        &self,
        tx: &Connection,
        path: &Path,
        current: Self::Current,
    ) -> Result<Stage<Self::Apply>>;
    /// Write the change (after the pre-image is archived). An error rolls everything back.
    fn apply(&self, tx: &Connection, path: &Path, apply: Self::Apply) -> Result<()>;
}

/// A [`Write`] with its types erased, so proposals of every store travel through one channel.
pub trait Commit: Send {
    /// Run [`commit`] for this write.
    fn commit(
        &self,
        conn: &mut Connection,
        path: &Path,
        audit: &AuditEntry,
        now: &str,
    ) -> Result<Written>;
}

impl<W: Write> Commit for W {
    fn commit(
        &self,
        conn: &mut Connection,
        path: &Path,
        audit: &AuditEntry,
        now: &str,
    ) -> Result<Written> {
        commit(self, conn, path, audit, now)
    }
}

/// Write one compaction in one transaction. Returns [`Written::Changed`] without writing when
/// the conversation is not the version that was planned.
pub fn commit<W: Write>(
    w: &W,
    conn: &mut Connection,
    path: &Path,
    audit: &AuditEntry,
    now: &str,
) -> Result<Written> {
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .at(path)?;
    let Some((version, current)) = w.read(&tx, path)? else {
        return Ok(Written::Changed("deleted since it was read".into()));
    };
    if version != *w.planned() {
        return Ok(Written::Changed(
            "changed since read (a live agent wrote to it); nothing written".into(),
        ));
    }
    let staged = match w.stage(&tx, path, current)? {
        Stage::Ready(s) => s,
        Stage::Changed(why) => return Ok(Written::Changed(why)),
    };
    let mut audit = audit.clone();
    if let (Some((key, value)), Some(obj)) = (staged.details, audit.details.as_object_mut()) {
        obj.insert(key.into(), value);
    }
    let compaction_id = pre_image::insert_audit(&tx, &audit, now).at(path)?;
    pre_image::save_pre_image(&tx, compaction_id, &staged.cells).at(path)?;
    w.apply(&tx, path, staged.apply)?;
    pre_image::finish_audit(&tx, compaction_id, &staged.cells, staged.hashed).at(path)?;
    tx.commit().at(path)?;
    Ok(Written::Committed { compaction_id })
}

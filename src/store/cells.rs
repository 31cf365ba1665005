//! Reading listing columns leniently, the same way for every store: a bad cell is reported on
//! its conversation's row instead of failing the whole listing.

use std::path::Path;

use rusqlite::types::{ToSqlOutput, Value, ValueRef};
use rusqlite::{Connection, Row};

use crate::error::{Error, Result, SqlContext};

/// A text column read leniently: invalid UTF-8 (which a Go writer can store) becomes U+FFFD;
/// BLOBs are read the same way and numbers become their text.
pub(crate) fn lossy(r: &Row<'_>, i: usize) -> rusqlite::Result<Option<String>> {
    Ok(match r.get_ref(i)? {
        ValueRef::Null => None,
        ValueRef::Text(b) | ValueRef::Blob(b) => Some(text_lossy(b)),
        ValueRef::Integer(n) => Some(n.to_string()),
        ValueRef::Real(f) => Some(f.to_string()),
    })
}

/// [`lossy`] borrowed from the row when the cell is valid UTF-8 text or a BLOB.
pub(crate) fn lossy_ref<'a>(
    r: &'a Row<'_>,
    i: usize,
) -> rusqlite::Result<Option<std::borrow::Cow<'a, str>>> {
    Ok(lossy_value(r.get_ref(i)?))
}

/// [`lossy_ref`] of a value already read.
pub(crate) fn lossy_value(v: ValueRef<'_>) -> Option<std::borrow::Cow<'_, str>> {
    match v {
        ValueRef::Null => None,
        ValueRef::Text(b) | ValueRef::Blob(b) => Some(match std::str::from_utf8(b) {
            Ok(s) => std::borrow::Cow::Borrowed(s),
            Err(_) => String::from_utf8_lossy(b),
        }),
        ValueRef::Integer(n) => Some(std::borrow::Cow::Owned(n.to_string())),
        ValueRef::Real(f) => Some(std::borrow::Cow::Owned(f.to_string())),
    }
}

/// `String::from_utf8_lossy(b).into_owned()`, checking valid UTF-8 (nearly every cell) on the
/// faster path first.
pub(crate) fn text_lossy(b: &[u8]) -> String {
    match std::str::from_utf8(b) {
        Ok(s) => s.to_owned(),
        Err(_) => String::from_utf8_lossy(b).into_owned(),
    }
}

/// An integer column read leniently: REALs are truncated, numeric TEXT is parsed, anything else
/// is `None`.
pub(crate) fn int(r: &Row<'_>, i: usize) -> rusqlite::Result<Option<i64>> {
    Ok(match r.get_ref(i)? {
        ValueRef::Integer(n) => Some(n),
        ValueRef::Real(f) => Some(f as i64),
        ValueRef::Text(b) => std::str::from_utf8(b)
            .ok()
            .and_then(|t| t.trim().parse().ok()),
        _ => None,
    })
}

/// A stored value as SQLite orders it (BINARY collation): NULL, then numbers, then text (by
/// bytes), then BLOBs. For listing orders computed in memory.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum SortKey {
    Null,
    Number(f64),
    Text(Vec<u8>),
    Blob(Vec<u8>),
}

impl SortKey {
    pub(crate) fn of(v: ValueRef<'_>) -> SortKey {
        match v {
            ValueRef::Null => SortKey::Null,
            ValueRef::Integer(i) => SortKey::Number(i as f64),
            ValueRef::Real(f) => SortKey::Number(f),
            ValueRef::Text(t) => SortKey::Text(t.to_vec()),
            ValueRef::Blob(b) => SortKey::Blob(b.to_vec()),
        }
    }

    /// [`SortKey::of`] into `self`, reusing its buffer for a text or BLOB key.
    pub(crate) fn set(&mut self, v: ValueRef<'_>) {
        match (self, v) {
            (SortKey::Text(b), ValueRef::Text(t)) | (SortKey::Blob(b), ValueRef::Blob(t)) => {
                b.clear();
                b.extend_from_slice(t);
            }
            (k, v) => *k = SortKey::of(v),
        }
    }

    fn rank(&self) -> u8 {
        match self {
            SortKey::Null => 0,
            SortKey::Number(_) => 1,
            SortKey::Text(_) => 2,
            SortKey::Blob(_) => 3,
        }
    }

    pub(crate) fn cmp(&self, other: &SortKey) -> std::cmp::Ordering {
        match (self, other) {
            (SortKey::Number(a), SortKey::Number(b)) => a.total_cmp(b),
            (SortKey::Text(a), SortKey::Text(b)) | (SortKey::Blob(a), SortKey::Blob(b)) => a.cmp(b),
            _ => self.rank().cmp(&other.rank()),
        }
    }
}

/// A listing's kept rows held in memory before they spill to SQLite's sorter: at most this many
/// bytes of packed rows (a listed row of a typical store packs into about 450 bytes with its
/// key, so about 110,000 rows), whatever the store's size.
const KEPT_IN_MEMORY: usize = 48 << 20;

/// The arena's chunk size: rows are packed back to back into chunks of this size (a row longer
/// than a chunk gets a chunk of its own), so the arena never holds twice what it needs.
const CHUNK: usize = 1 << 20;

/// How many rows ahead of the one being read, in sorted order, a row's bytes are prefetched.
/// Measured on P1's 90% store: 6 to 12 cut the read-back of 89,000 rows by a third, 24 less.
const PREFETCH_AHEAD: usize = 8;

/// Ask the CPU to bring the start of the row [`PREFETCH_AHEAD`] slots after slot `i` into its
/// caches: a hint, with no effect on what the program reads (nothing past the end, or off
/// x86-64). Rows are read in sorted order, scattered over the arena: asking ahead lets a row's
/// cache miss overlap the work on the rows before it.
#[inline]
fn prefetch_ahead(slots: &[Slot], chunks: &[Vec<u8>], i: usize) {
    #[cfg(target_arch = "x86_64")]
    if let Some(b) = slots
        .get(i + PREFETCH_AHEAD)
        .and_then(|a| chunks[a.chunk as usize].get(a.start as usize))
    {
        // SAFETY: `prefetch` only hints at the cache and never faults, whatever the address
        // (and this one is a live byte); SSE is part of the x86-64 baseline.
        unsafe {
            std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(
                (b as *const u8).cast(),
            );
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (slots, chunks, i);
}

/// Where one kept row's packed bytes are: its key's bytes, then the row ([`pack`]).
#[derive(Clone, Copy)]
struct Slot {
    /// A text or BLOB key's first 24 bytes, big-endian, zero-padded: most comparisons end here
    /// (a timestamp's first 24 bytes reach its microseconds).
    prefix: (u128, u64),
    rowid: i64,
    chunk: u32,
    start: u32,
    key_len: u32,
    len: u32,
    key_kind: u8,
}

/// Rows a prefiltered scan keeps, put into a listing order: newest first by a stored value, ties
/// in rowid order (SQLite's `ORDER BY value DESC, rowid`). Each row is packed into a few
/// hundred bytes of an arena (no allocation per row, a third of a decoded row's size) and only
/// the small slots are sorted; up to a bound ([`NewestFirst::listing`]: [`KEPT_IN_MEMORY`]
/// bytes) rows stay in memory, past that every row goes to a private temporary database and
/// SQLite's sorter orders them (it spills to disk), so memory stays flat and the store is still
/// read in one sequential pass whatever share of it is kept.
pub(crate) struct NewestFirst {
    slots: Vec<Slot>,
    chunks: Vec<Vec<u8>>,
    /// The distinct codecs of the rows pushed (a row packs its codec as an index into these).
    codecs: Vec<crate::message::Format>,
    spill: Option<Connection>,
    cap: usize,
    /// The bytes held in memory so far and the bound past which rows spill.
    bytes: usize,
    byte_cap: usize,
    scratch: Vec<u8>,
}

impl NewestFirst {
    /// A listing's kept rows, in memory up to [`KEPT_IN_MEMORY`] bytes.
    pub(crate) fn listing() -> Self {
        NewestFirst {
            byte_cap: KEPT_IN_MEMORY,
            ..Self::with_cap(usize::MAX)
        }
    }

    /// At most `cap` rows in memory (tests of the spill).
    fn with_cap(cap: usize) -> NewestFirst {
        NewestFirst {
            slots: Vec::new(),
            chunks: Vec::new(),
            codecs: Vec::new(),
            spill: None,
            cap,
            bytes: 0,
            byte_cap: usize::MAX,
            scratch: Vec::new(),
        }
    }

    /// Hold one listed row (in memory, or in the spill past the bound).
    pub(crate) fn push_meta(
        &mut self,
        path: &Path,
        key: SortKey,
        rowid: i64,
        m: super::ConversationMeta,
    ) -> Result<()> {
        let key = match &key {
            SortKey::Null => KeyRef::Null,
            SortKey::Number(n) => KeyRef::Number(*n),
            SortKey::Text(b) => KeyRef::Text(b),
            SortKey::Blob(b) => KeyRef::Blob(b),
        };
        self.push_keyed(path, key, rowid, m)
    }

    /// [`NewestFirst::push_meta`] keyed by a stored value as read (no copy of the key).
    pub(crate) fn push_meta_at(
        &mut self,
        path: &Path,
        key: ValueRef<'_>,
        rowid: i64,
        m: super::ConversationMeta,
    ) -> Result<()> {
        self.push_keyed(path, value_key(key), rowid, m)
    }

    /// Hold one row's [`super::Facts`] alone (a listing of ids), keyed by a stored value as
    /// read; [`NewestFirst::each_facts`] hands them back. A holder takes either metas or facts.
    pub(crate) fn push_facts_at(
        &mut self,
        path: &Path,
        key: ValueRef<'_>,
        rowid: i64,
        f: &super::Facts<'_>,
    ) -> Result<()> {
        let mut buf = std::mem::take(&mut self.scratch);
        let key_len = key_bytes(value_key(key), &mut buf);
        pack_facts(f, &mut buf);
        let r = self.hold(path, buf[0], key_len, rowid, &buf[1..]);
        self.scratch = buf;
        r
    }

    fn push_keyed(
        &mut self,
        path: &Path,
        key: KeyRef<'_>,
        rowid: i64,
        m: super::ConversationMeta,
    ) -> Result<()> {
        let mut buf = std::mem::take(&mut self.scratch);
        let key_len = key_bytes(key, &mut buf);
        pack(&m, &mut self.codecs, &mut buf);
        let r = self.hold(path, buf[0], key_len, rowid, &buf[1..]);
        self.scratch = buf;
        r
    }

    fn hold(
        &mut self,
        path: &Path,
        key_kind: u8,
        key_len: usize,
        rowid: i64,
        packed: &[u8],
    ) -> Result<()> {
        self.bytes += std::mem::size_of::<Slot>() + packed.len();
        if self.spill.is_none() && self.slots.len() < self.cap && self.bytes <= self.byte_cap {
            let fits = self
                .chunks
                .last()
                .is_some_and(|c| c.capacity() - c.len() >= packed.len());
            if !fits {
                self.chunks
                    .push(Vec::with_capacity(CHUNK.max(packed.len())));
            }
            let chunk = self.chunks.len() - 1;
            let c = &mut self.chunks[chunk];
            let start = c.len();
            c.extend_from_slice(packed);
            let mut head = [0u8; 24];
            let k = &packed[..key_len.min(24)];
            head[..k.len()].copy_from_slice(k);
            let (hi, lo) = head.split_at(16);
            self.slots.push(Slot {
                prefix: (
                    u128::from_be_bytes(hi.try_into().expect("16 bytes")),
                    u64::from_be_bytes(lo.try_into().expect("8 bytes")),
                ),
                rowid,
                chunk: chunk as u32,
                start: start as u32,
                key_len: key_len as u32,
                len: packed.len() as u32,
                key_kind,
            });
            return Ok(());
        }
        if self.spill.is_none() {
            // An empty name: a private on-disk database, deleted when closed.
            let conn = Connection::open("").at(path)?;
            conn.execute_batch(
                "PRAGMA journal_mode = OFF; PRAGMA synchronous = OFF;
                 CREATE TABLE kept (k, r INTEGER NOT NULL, t BLOB NOT NULL); BEGIN;",
            )
            .at(path)?;
            for s in std::mem::take(&mut self.slots) {
                let bytes = &self.chunks[s.chunk as usize][s.start as usize..][..s.len as usize];
                spill_row(&conn, path, s.key_kind, s.key_len as usize, s.rowid, bytes)?;
            }
            self.chunks = Vec::new();
            self.spill = Some(conn);
        }
        let conn = self.spill.as_ref().expect("spill opened above");
        spill_row(conn, path, key_kind, key_len, rowid, packed)
    }

    /// Hand `f` a puller of the rows in listing order, with their keys.
    pub(crate) fn with_sorted<R>(
        self,
        path: &Path,
        f: impl FnOnce(
            &mut dyn FnMut() -> Result<Option<(SortKey, super::ConversationMeta)>>,
        ) -> Result<R>,
    ) -> Result<R> {
        self.sorted(path, true, f)
    }

    /// [`NewestFirst::with_sorted`]; without `keys` every key handed out is `Null` (no copy of
    /// a key nobody reads).
    fn sorted<R>(
        mut self,
        path: &Path,
        keys: bool,
        f: impl FnOnce(
            &mut dyn FnMut() -> Result<Option<(SortKey, super::ConversationMeta)>>,
        ) -> Result<R>,
    ) -> Result<R> {
        let codecs = std::mem::take(&mut self.codecs);
        let Some(conn) = self.spill.take() else {
            self.order();
            let chunks = &self.chunks;
            let bytes = |s: &Slot| &chunks[s.chunk as usize][s.start as usize..][..s.len as usize];
            let key = |s: &Slot| key_of(s.key_kind, &bytes(s)[..s.key_len as usize]);
            let slots = &self.slots;
            let mut it = slots.iter().enumerate();
            return f(&mut || match it.next() {
                Some((i, s)) => {
                    prefetch_ahead(slots, chunks, i);
                    let b = bytes(s);
                    let m = unpack(&b[s.key_len as usize..], &codecs)?;
                    let k = if keys { key(s).owned() } else { SortKey::Null };
                    Ok(Some((k, m)))
                }
                None => Ok(None),
            });
        };
        let mut stmt = conn
            .prepare("SELECT k, t FROM kept ORDER BY k DESC, r")
            .at(path)?;
        let mut rows = stmt.query([]).at(path)?;
        f(&mut || match rows.next().at(path)? {
            Some(r) => {
                let key = if keys {
                    SortKey::of(r.get_ref(0).at(path)?)
                } else {
                    SortKey::Null
                };
                let t = match r.get_ref(1).at(path)? {
                    ValueRef::Blob(b) => unpack(b, &codecs)?,
                    _ => return Err(Error::Internal("spilled listing row: not a BLOB".into())),
                };
                Ok(Some((key, t)))
            }
            None => Ok(None),
        })
    }

    /// The rows in listing order, without their keys.
    pub(crate) fn each(
        self,
        path: &Path,
        mut f: impl FnMut(super::ConversationMeta) -> Result<bool>,
    ) -> Result<()> {
        self.sorted(path, false, |next| {
            while let Some((_, t)) = next()? {
                if !f(t)? {
                    break;
                }
            }
            Ok(())
        })
    }
}

impl NewestFirst {
    /// The rows [`NewestFirst::push_facts_at`] held, in listing order.
    pub(crate) fn each_facts(
        mut self,
        path: &Path,
        mut f: impl FnMut(super::Facts<'_>) -> Result<bool>,
    ) -> Result<()> {
        let Some(conn) = self.spill.take() else {
            self.order();
            for (i, s) in self.slots.iter().enumerate() {
                prefetch_ahead(&self.slots, &self.chunks, i);
                let b = &self.chunks[s.chunk as usize][s.start as usize..][..s.len as usize];
                if !f(unpack_facts(&b[s.key_len as usize..])?)? {
                    break;
                }
            }
            return Ok(());
        };
        let mut stmt = conn
            .prepare("SELECT t FROM kept ORDER BY k DESC, r")
            .at(path)?;
        let mut rows = stmt.query([]).at(path)?;
        while let Some(r) = rows.next().at(path)? {
            let ValueRef::Blob(b) = r.get_ref(0).at(path)? else {
                return Err(Error::Internal("spilled listing row: not a BLOB".into()));
            };
            if !f(unpack_facts(b)?)? {
                break;
            }
        }
        Ok(())
    }

    /// Sort the slots held in memory into listing order: newest first, ties in rowid order.
    /// Equal text or BLOB keys have equal prefixes, and a prefix orders as its key does unless
    /// they are equal (zero padding sorts first).
    fn order(&mut self) {
        let chunks = &self.chunks;
        let key = |s: &Slot| {
            key_of(
                s.key_kind,
                &chunks[s.chunk as usize][s.start as usize..][..s.key_len as usize],
            )
        };
        self.slots.sort_unstable_by(|a, b| {
            let keys = if a.key_kind == b.key_kind && a.key_kind >= 2 && a.prefix != b.prefix {
                b.prefix.cmp(&a.prefix)
            } else {
                key(b).cmp_ref(&key(a))
            };
            keys.then(a.rowid.cmp(&b.rowid))
        });
    }
}

fn value_key(v: ValueRef<'_>) -> KeyRef<'_> {
    match v {
        ValueRef::Null => KeyRef::Null,
        ValueRef::Integer(i) => KeyRef::Number(i as f64),
        ValueRef::Real(f) => KeyRef::Number(f),
        ValueRef::Text(b) => KeyRef::Text(b),
        ValueRef::Blob(b) => KeyRef::Blob(b),
    }
}

/// `buf` cleared, then the key's kind byte and its bytes; returns the bytes' length.
fn key_bytes(key: KeyRef<'_>, buf: &mut Vec<u8>) -> usize {
    buf.clear();
    let (kind, bytes): (u8, &[u8]) = match &key {
        KeyRef::Null => (0, &[]),
        KeyRef::Number(_) => (1, &[]),
        KeyRef::Text(b) => (2, b),
        KeyRef::Blob(b) => (3, b),
    };
    buf.push(kind);
    match key {
        KeyRef::Number(n) => buf.extend_from_slice(&n.to_le_bytes()),
        _ => buf.extend_from_slice(bytes),
    }
    buf.len() - 1
}

/// A key as packed, borrowed: compared without decoding.
enum KeyRef<'a> {
    Null,
    Number(f64),
    Text(&'a [u8]),
    Blob(&'a [u8]),
}

fn key_of(kind: u8, b: &[u8]) -> KeyRef<'_> {
    match kind {
        1 => KeyRef::Number(f64::from_le_bytes(b.try_into().unwrap_or([0; 8]))),
        2 => KeyRef::Text(b),
        3 => KeyRef::Blob(b),
        _ => KeyRef::Null,
    }
}

impl KeyRef<'_> {
    fn rank(&self) -> u8 {
        match self {
            KeyRef::Null => 0,
            KeyRef::Number(_) => 1,
            KeyRef::Text(_) => 2,
            KeyRef::Blob(_) => 3,
        }
    }

    /// [`SortKey::cmp`] on borrowed keys.
    fn cmp_ref(&self, other: &KeyRef<'_>) -> std::cmp::Ordering {
        match (self, other) {
            (KeyRef::Number(a), KeyRef::Number(b)) => a.total_cmp(b),
            (KeyRef::Text(a), KeyRef::Text(b)) | (KeyRef::Blob(a), KeyRef::Blob(b)) => a.cmp(b),
            _ => self.rank().cmp(&other.rank()),
        }
    }

    fn owned(&self) -> SortKey {
        match self {
            KeyRef::Null => SortKey::Null,
            KeyRef::Number(n) => SortKey::Number(*n),
            KeyRef::Text(b) => SortKey::Text(b.to_vec()),
            KeyRef::Blob(b) => SortKey::Blob(b.to_vec()),
        }
    }
}

fn spill_row(
    conn: &Connection,
    path: &Path,
    key_kind: u8,
    key_len: usize,
    r: i64,
    packed: &[u8],
) -> Result<()> {
    let (kb, row) = packed.split_at(key_len);
    let key = match key_of(key_kind, kb) {
        KeyRef::Null => ToSqlOutput::Owned(Value::Null),
        KeyRef::Number(n) => ToSqlOutput::Owned(Value::Real(n)),
        KeyRef::Text(b) => ToSqlOutput::Borrowed(ValueRef::Text(b)),
        KeyRef::Blob(b) => ToSqlOutput::Borrowed(ValueRef::Blob(b)),
    };
    conn.prepare_cached("INSERT INTO kept (k, r, t) VALUES (?1, ?2, ?3)")
        .at(path)?
        .execute(rusqlite::params![key, r, row])
        .at(path)?;
    Ok(())
}

/// A listed row as bytes: strings length-prefixed (`u32::MAX`: `None`), numbers as a presence
/// byte and 8 bytes, the codec as an index into `codecs` (0: none; a store has one or two).
fn pack(m: &super::ConversationMeta, codecs: &mut Vec<crate::message::Format>, out: &mut Vec<u8>) {
    let text = |out: &mut Vec<u8>, s: Option<&str>| match s {
        Some(s) => {
            out.extend_from_slice(&(s.len() as u32).to_le_bytes());
            out.extend_from_slice(s.as_bytes());
        }
        None => out.extend_from_slice(&u32::MAX.to_le_bytes()),
    };
    let num = |out: &mut Vec<u8>, n: Option<i64>| match n {
        Some(n) => {
            out.push(1);
            out.extend_from_slice(&n.to_le_bytes());
        }
        None => out.push(0),
    };
    let codec = match m.codec {
        None => 0,
        Some(c) => {
            let i = codecs
                .iter()
                .position(|k| k.name() == c.name())
                .unwrap_or_else(|| {
                    codecs.push(c);
                    codecs.len() - 1
                });
            i as u8 + 1
        }
    };
    out.push(codec);
    for s in [&m.id, &m.provider, &m.created_at, &m.updated_at] {
        text(out, Some(s.as_str()));
    }
    for s in [
        &m.name,
        &m.api_mode,
        &m.model,
        &m.cwd,
        &m.problem,
        &m.parent,
    ] {
        text(out, s.as_deref());
    }
    out.push(u8::from(m.archived));
    for n in [
        m.message_count,
        m.current_context,
        m.max_context,
        m.input_tokens,
        m.output_tokens,
    ] {
        num(out, n);
    }
}

/// [`pack`]'s inverse.
fn unpack(b: &[u8], codecs: &[crate::message::Format]) -> Result<super::ConversationMeta> {
    let bad = || Error::Internal("kept listing row: truncated".into());
    let mut at = 0usize;
    let mut take = |n: usize| -> Result<&[u8]> {
        let s = b.get(at..at + n).ok_or_else(bad)?;
        at += n;
        Ok(s)
    };
    let codec = match take(1)?[0] {
        0 => None,
        i => Some(*codecs.get(i as usize - 1).ok_or_else(bad)?),
    };
    let mut text = || -> Result<Option<String>> {
        let n = u32::from_le_bytes(take(4)?.try_into().map_err(|_| bad())?);
        if n == u32::MAX {
            return Ok(None);
        }
        let s = std::str::from_utf8(take(n as usize)?).map_err(|_| bad())?;
        Ok(Some(s.to_owned()))
    };
    let [id, provider, created_at, updated_at] =
        [text()?, text()?, text()?, text()?].map(Option::unwrap_or_default);
    let [name, api_mode, model, cwd, problem, parent] =
        [text()?, text()?, text()?, text()?, text()?, text()?];
    let archived = take(1)?[0] != 0;
    let mut num = || -> Result<Option<i64>> {
        Ok(match take(1)?[0] {
            0 => None,
            _ => Some(i64::from_le_bytes(take(8)?.try_into().map_err(|_| bad())?)),
        })
    };
    let [message_count, current_context, max_context, input_tokens, output_tokens] =
        [num()?, num()?, num()?, num()?, num()?];
    Ok(super::ConversationMeta {
        id,
        name,
        provider,
        codec,
        api_mode,
        model,
        message_count,
        current_context,
        max_context,
        input_tokens,
        output_tokens,
        cwd,
        created_at,
        updated_at,
        problem,
        parent,
        archived,
    })
}

/// [`super::Facts`] as bytes, appended: the two strings length-prefixed, the problem too
/// (`u32::MAX`: none), the numbers as in [`pack`].
fn pack_facts(f: &super::Facts<'_>, out: &mut Vec<u8>) {
    for s in [Some(f.id), Some(f.updated_at), f.problem, f.parent] {
        match s {
            Some(s) => {
                out.extend_from_slice(&(s.len() as u32).to_le_bytes());
                out.extend_from_slice(s.as_bytes());
            }
            None => out.extend_from_slice(&u32::MAX.to_le_bytes()),
        }
    }
    for n in [f.current_context, f.max_context] {
        match n {
            Some(n) => {
                out.push(1);
                out.extend_from_slice(&n.to_le_bytes());
            }
            None => out.push(0),
        }
    }
    out.push(u8::from(f.archived));
}

/// [`pack_facts`]' inverse, borrowing the strings.
fn unpack_facts(b: &[u8]) -> Result<super::Facts<'_>> {
    let bad = || Error::Internal("kept listing row: truncated".into());
    let mut at = 0usize;
    let mut take = |n: usize| -> Result<&[u8]> {
        let s = b.get(at..at + n).ok_or_else(bad)?;
        at += n;
        Ok(s)
    };
    let mut text = || -> Result<Option<&str>> {
        let n = u32::from_le_bytes(take(4)?.try_into().map_err(|_| bad())?);
        if n == u32::MAX {
            return Ok(None);
        }
        std::str::from_utf8(take(n as usize)?)
            .map(Some)
            .map_err(|_| bad())
    };
    let [id, updated_at, problem, parent] = [text()?, text()?, text()?, text()?];
    let mut num = || -> Result<Option<i64>> {
        Ok(match take(1)?[0] {
            0 => None,
            _ => Some(i64::from_le_bytes(take(8)?.try_into().map_err(|_| bad())?)),
        })
    };
    let [current_context, max_context] = [num()?, num()?];
    let archived = take(1)?[0] != 0;
    Ok(super::Facts {
        id: id.unwrap_or_default(),
        updated_at: updated_at.unwrap_or_default(),
        current_context,
        max_context,
        problem,
        parent,
        archived,
    })
}

/// The listing order of two (stored value, rowid) pairs: newest first, ties in rowid order.
pub(crate) fn newest_first(a: (&SortKey, i64), b: (&SortKey, i64)) -> std::cmp::Ordering {
    b.0.cmp(a.0).then(a.1.cmp(&b.1))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The registered codec named `name` (the formats kodelet stores).
    fn codec(name: &str) -> crate::message::Format {
        crate::store::StoreKind::codec(name).expect("a registered codec")
    }

    fn value() -> impl Strategy<Value = Value> {
        prop_oneof![
            Just(Value::Null),
            (-3i64..3).prop_map(Value::Integer),
            prop_oneof![Just(0.5f64), Just(-1.0), Just(2.0)].prop_map(Value::Real),
            // Keys sharing the first 14–26 bytes, NULs included: the sort's 24-byte prefixes.
            (
                prop_oneof![0usize..4, 14usize..26],
                prop::collection::vec(
                    prop_oneof![Just(b'a'), Just(b'b'), Just(0), Just(0xff)],
                    0..4
                )
            )
                .prop_map(|(n, b)| {
                    let b = [vec![b'a'; n], b].concat();
                    Value::Text(String::from_utf8_lossy(&b).into_owned())
                }),
            (
                prop_oneof![0usize..4, 14usize..26],
                prop::collection::vec(0u8..3, 0..3)
            )
                .prop_map(|(n, b)| Value::Blob([vec![0; n], b].concat())),
        ]
    }

    fn text() -> impl Strategy<Value = String> {
        prop_oneof![Just(String::new()), "[a-z0-9 é\u{1F600}\u{0}-]{0,12}"]
    }

    fn meta() -> impl Strategy<Value = super::super::ConversationMeta> {
        let texts = prop::collection::vec(text(), 4);
        let opts = prop::collection::vec(prop::option::of(text()), 6);
        let nums = prop::collection::vec(prop::option::of(any::<i64>()), 5);
        let codec = prop_oneof![
            Just(None),
            Just(Some(codec("anthropic"))),
            Just(Some(codec("openai-chat"))),
        ];
        (texts, opts, nums, codec, any::<bool>()).prop_map(|(t, o, n, codec, archived)| {
            super::super::ConversationMeta {
                parent: o[5].clone(),
                archived,
                id: t[0].clone(),
                provider: t[1].clone(),
                created_at: t[2].clone(),
                updated_at: t[3].clone(),
                name: o[0].clone(),
                api_mode: o[1].clone(),
                model: o[2].clone(),
                cwd: o[3].clone(),
                problem: o[4].clone(),
                message_count: n[0],
                current_context: n[1],
                max_context: n[2],
                input_tokens: n[3],
                output_tokens: n[4],
                codec,
            }
        })
    }

    /// Every field of a row, the codec by its name.
    fn fields(m: &super::super::ConversationMeta) -> (String, Option<&'static str>) {
        (format!("{m:?}"), m.codec.map(|c| c.name()))
    }

    /// The oracle: SQLite's own `ORDER BY k DESC, rowid` on the table the test wrote.
    fn sqlites_order(db: &Connection) -> Vec<i64> {
        db.prepare("SELECT rowid FROM t ORDER BY k DESC, rowid")
            .unwrap()
            .query_map([], |r| r.get(0))
            .unwrap()
            .collect::<rusqlite::Result<_>>()
            .unwrap()
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(120))]
        /// In memory or spilled, the order is SQLite's own `ORDER BY k DESC, rowid` on a table
        /// the test writes itself, and every row and key comes back as it was pushed.
        #[test]
        fn newest_first_is_sqlites_order(
            rows in prop::collection::vec((value(), meta()), 0..40),
            cap in 0usize..45,
        ) {
            let path = Path::new("test");
            let db = Connection::open_in_memory().unwrap();
            db.execute_batch("CREATE TABLE t (k)").unwrap();
            let mut kept = NewestFirst::with_cap(cap);
            let mut pushed = std::collections::HashMap::new();
            for (k, m) in &rows {
                db.execute("INSERT INTO t (k) VALUES (?1)", [k]).unwrap();
                let rowid = db.last_insert_rowid();
                let key = db
                    .query_row("SELECT k FROM t WHERE rowid = ?1", [rowid], |r| Ok(SortKey::of(r.get_ref(0)?)))
                    .unwrap();
                let mut m = m.clone();
                m.id = format!("{rowid}:{}", m.id);
                pushed.insert(rowid, (key.clone(), fields(&m)));
                if rowid % 2 == 0 {
                    kept.push_meta(path, key, rowid, m).unwrap();
                } else {
                    // The same row keyed by the stored value as read.
                    db.query_row("SELECT k FROM t WHERE rowid = ?1", [rowid], |r| {
                        kept.push_meta_at(path, r.get_ref(0)?, rowid, m).unwrap();
                        Ok(())
                    })
                    .unwrap();
                }
            }
            let want = sqlites_order(&db);
            let mut got = Vec::new();
            kept.with_sorted(path, |next| {
                while let Some((key, m)) = next()? {
                    let rowid: i64 = m.id.split(':').next().unwrap().parse().unwrap();
                    let (k, f) = &pushed[&rowid];
                    assert_eq!((&key, &fields(&m)), (k, f));
                    got.push(rowid);
                }
                Ok(())
            })
            .unwrap();
            prop_assert_eq!(got, want);
        }

        /// Facts alone ([`NewestFirst::push_facts_at`]), in memory or spilled: SQLite's order,
        /// and every field back as pushed.
        #[test]
        fn facts_come_back_in_sqlites_order(
            rows in prop::collection::vec(
                (value(), text(), text(), prop::option::of(text()),
                 prop::option::of(any::<i64>()), prop::option::of(any::<i64>())),
                0..40,
            ),
            cap in 0usize..45,
        ) {
            let path = Path::new("test");
            let db = Connection::open_in_memory().unwrap();
            db.execute_batch("CREATE TABLE t (k)").unwrap();
            let mut kept = NewestFirst::with_cap(cap);
            let mut pushed = std::collections::HashMap::new();
            for (k, id, updated_at, problem, current, max) in &rows {
                db.execute("INSERT INTO t (k) VALUES (?1)", [k]).unwrap();
                let rowid = db.last_insert_rowid();
                let id = format!("{rowid}:{id}");
                let f = super::super::Facts {
                    parent: problem.as_deref(),
                    archived: current.is_some_and(|c| c % 2 == 0),
                    id: &id,
                    updated_at,
                    current_context: *current,
                    max_context: *max,
                    problem: problem.as_deref(),
                };
                pushed.insert(rowid, format!("{f:?}"));
                db.query_row("SELECT k FROM t WHERE rowid = ?1", [rowid], |r| {
                    kept.push_facts_at(path, r.get_ref(0)?, rowid, &f).unwrap();
                    Ok(())
                })
                .unwrap();
            }
            let want = sqlites_order(&db);
            let mut got = Vec::new();
            kept.each_facts(path, |f| {
                let rowid: i64 = f.id.split(':').next().unwrap().parse().unwrap();
                assert_eq!(format!("{f:?}"), pushed[&rowid]);
                got.push(rowid);
                Ok(true)
            })
            .unwrap();
            prop_assert_eq!(got, want);
        }
    }
}

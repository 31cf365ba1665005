//! The archive of pre-images and the audit log, shared by every store kind.
//!
//! An archived cell is (table, key column, key, column, value). Before a compaction changes a
//! cell, SQLite itself copies its current value here (`INSERT … SELECT`) in the same
//! transaction, and a restore copies it back the same way (`UPDATE … SET c = (SELECT value …)`):
//! no value ever passes through a Rust `String`, so TEXT that is not valid UTF-8, a BLOB or a
//! number in a TEXT column, and very long values all come back with their storage class and
//! bytes (the archive's `value` column has BLOB affinity, so nothing is converted). A row the
//! compaction inserts is archived as column `*` with a NULL value: restoring deletes it. Rows
//! `reclaim` deletes are archived as column `-rows`: one zstd frame of whole rows as stored
//! ([`super::row_codec`]), their columns in `value`; restoring inserts them again (earlier
//! agent-db archived each as a `-` marker followed by its cells, still restored). Restore is
//! therefore store-agnostic.
//!
//! One exception, for speed and size: a store that already holds a cell's current bytes (it
//! loaded them, and its version check proves in the transaction that they are still the stored
//! ones) hands them over [`Packed`]: zstd-compressed on the planning pool, tagged with their
//! storage class, and archived in the `packed` column (`value` NULL, `encoding` naming the
//! codec). The writer then neither copies the cell nor writes its full size through the WAL
//! (kodelet's `raw_messages`, most of a compaction's bytes, shrinks about 5×). A restore
//! decompresses it and binds it back with its storage class.

use rusqlite::types::ValueRef;
use rusqlite::{params, Connection, ToSql};
use sha2::{Digest, Sha256};

pub use super::row_codec::CellValue;

/// A TEXT or BLOB pre-image the caller holds, zstd-compressed (see the module doc), or a frame
/// of whole rows a removal deletes ([`Packed::rows`]). Made on the planning pool or by the
/// writer; [`save_pre_image`] archives it as is.
#[derive(Debug, Clone, PartialEq)]
pub struct Packed {
    kind: PackedKind,
    zstd: Vec<u8>,
}

#[derive(Debug, Clone, PartialEq)]
enum PackedKind {
    Text,
    Blob,
    /// Whole rows ([`super::row_codec`]) with these columns, as one zstd frame.
    Rows {
        columns: Vec<String>,
        rows: u64,
    },
}

/// zstd's fastest standard level: about 330 MB/s and 4.7× on kodelet histories (one core).
pub const PACK_LEVEL: i32 = 1;

impl Packed {
    /// Compress `bytes`, a TEXT value (`blob` false) or a BLOB (`blob` true).
    pub fn new(bytes: &[u8], blob: bool) -> std::io::Result<Packed> {
        let zstd = compress_packed(bytes)?;
        Ok(Packed {
            kind: if blob {
                PackedKind::Blob
            } else {
                PackedKind::Text
            },
            zstd,
        })
    }

    /// `rows` whole rows of a table, read with `columns` and encoded cell by cell
    /// ([`super::row_codec::encode_cell`]), already compressed into the zstd frame `zstd`.
    pub fn rows(columns: Vec<String>, rows: u64, zstd: Vec<u8>) -> Packed {
        Packed {
            kind: PackedKind::Rows { columns, rows },
            zstd,
        }
    }

    /// The archive's `encoding` for this value.
    fn encoding(&self) -> &'static str {
        match self.kind {
            PackedKind::Text => ENCODING_TEXT,
            PackedKind::Blob => ENCODING_BLOB,
            PackedKind::Rows { .. } => ENCODING_ROWS,
        }
    }

    /// What the archive's `value` holds beside the frame: a row frame's columns and row count
    /// (JSON); nothing for a single value.
    fn meta(&self) -> Option<String> {
        match &self.kind {
            PackedKind::Rows { columns, rows } => {
                Some(serde_json::json!({"columns": columns, "rows": rows}).to_string())
            }
            _ => None,
        }
    }
}

/// A scratch buffer larger than this is not kept for the thread's next value.
const SCRATCH_KEPT: usize = 8 << 20;

thread_local! {
    /// This thread's compression context and output buffer, reused from value to value: a
    /// fresh context allocates (and the kernel zeroes) its tables for every value, and the
    /// worst-case output buffer is as large as the input.
    static PACKER: std::cell::RefCell<Option<(zstd::bulk::Compressor<'static>, Vec<u8>)>> =
        const { std::cell::RefCell::new(None) };
}

/// `bytes` as one zstd frame at [`PACK_LEVEL`], the same frame `zstd::bulk::compress` makes
/// (zstd's output depends only on the input and the parameters), in a vector of its own size:
/// a batch holds a packed pre-image per conversation in flight.
fn compress_packed(bytes: &[u8]) -> std::io::Result<Vec<u8>> {
    PACKER.with(|cell| {
        let mut slot = cell.borrow_mut();
        if slot.is_none() {
            *slot = Some((zstd::bulk::Compressor::new(PACK_LEVEL)?, Vec::new()));
        }
        let (z, scratch) = slot.as_mut().expect("set above");
        scratch.clear();
        scratch.reserve(zstd::zstd_safe::compress_bound(bytes.len()));
        z.compress_to_buffer(bytes, scratch)?;
        let frame = scratch.as_slice().to_vec();
        if scratch.capacity() > SCRATCH_KEPT {
            *scratch = Vec::new();
        }
        Ok(frame)
    })
}

const ENCODING_TEXT: &str = "zstd-text";
const ENCODING_BLOB: &str = "zstd-blob";
const ENCODING_ROWS: &str = "zstd-rows";

/// Decompress an archived packed value back to its bytes and storage class.
fn unpack(encoding: &str, packed: &[u8]) -> rusqlite::Result<CellValue> {
    let blob = match encoding {
        ENCODING_TEXT => false,
        ENCODING_BLOB => true,
        other => {
            return Err(rusqlite::Error::ToSqlConversionFailure(
                format!(
                    "the archive holds a value encoded as {other:?}, which this agent-db does not \
                     know; restore it with the agent-db that made it"
                )
                .into(),
            ))
        }
    };
    let bytes = zstd::stream::decode_all(packed).map_err(|e| {
        rusqlite::Error::ToSqlConversionFailure(
            format!("an archived value does not decompress ({e}); the archive is damaged").into(),
        )
    })?;
    Ok(if blob {
        CellValue::Blob(bytes)
    } else {
        CellValue::Text(bytes)
    })
}

/// A cell agent-db is about to change, or (column `*`) a row it is about to insert.
#[derive(Debug, Clone, PartialEq)]
pub struct Cell {
    pub table: String,
    pub key_column: String,
    pub key: CellValue,
    pub column: String,
    /// The cell's current value, when the store holds it and proved it current: archived as
    /// is instead of copied by SQLite.
    pub packed: Option<std::sync::Arc<Packed>>,
}

impl Cell {
    pub fn new(table: &str, key_column: &str, key: impl Into<CellValue>, column: &str) -> Cell {
        Cell {
            table: table.into(),
            key_column: key_column.into(),
            key: key.into(),
            column: column.into(),
            packed: None,
        }
    }

    /// This cell, archived from `packed` (its current value, proven so by the version check).
    pub fn with_packed(mut self, packed: Option<std::sync::Arc<Packed>>) -> Cell {
        self.packed = packed;
        self
    }

    /// Marker for a row that will be inserted.
    pub fn inserted_row(table: &str, key_column: &str, key: impl Into<CellValue>) -> Cell {
        Cell::new(table, key_column, key, "*")
    }

    /// Marker for a row that will be deleted; the cells of its columns follow it (the form
    /// earlier agent-db wrote, still restored; a test writes it).
    #[cfg(test)]
    pub fn deleted_row(table: &str, key_column: &str, key: impl Into<CellValue>) -> Cell {
        Cell::new(table, key_column, key, DELETED)
    }

    /// Marker for the rows of `table` whose `key_column` holds one of a removal's keys, all
    /// deleted; [`Packed::rows`] holds them (`label` names whose rows they are, for reading).
    pub fn deleted_rows(table: &str, key_column: &str, label: &str, rows: Packed) -> Cell {
        Cell::new(table, key_column, label, DELETED_ROWS).with_packed(Some(rows.into()))
    }

    /// Whether this is a row marker (`*` inserted, `-` deleted, `-rows` rows deleted), not a
    /// column's cell.
    pub fn is_marker(&self) -> bool {
        self.column == "*" || self.column == DELETED || self.column == DELETED_ROWS
    }

    /// The SQL expression selecting this cell's value from its row (`1` for a row marker).
    fn column_expr(&self) -> rusqlite::Result<String> {
        Ok(if self.is_marker() {
            "1".to_string()
        } else {
            format!("\"{}\"", ident(&self.column)?)
        })
    }

    /// `FROM "table" WHERE "key" = ?{n}`.
    fn row_clause(&self, n: usize) -> rusqlite::Result<String> {
        Ok(format!(
            "FROM \"{}\" WHERE \"{}\" = ?{n}",
            ident(&self.table)?,
            ident(&self.key_column)?
        ))
    }
}

/// The archive's column name of a deleted-row marker ([`Cell::deleted_row`]).
pub const DELETED: &str = "-";
/// The archive's column name of a frame of deleted rows ([`Cell::deleted_rows`]).
pub const DELETED_ROWS: &str = "-rows";

/// Identifiers come from agent-db's code or its own archive; refuse anything but plain names.
fn ident(s: &str) -> rusqlite::Result<&str> {
    if !s.is_empty() && s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') {
        Ok(s)
    } else {
        Err(rusqlite::Error::InvalidParameterName(format!(
            "refusing identifier {s:?} in the archive"
        )))
    }
}

/// Archive the current values of `cells` under `compaction_id`. SQLite copies each value itself
/// (`INSERT … SELECT`), so its storage class and bytes survive whatever they are: TEXT that is
/// not valid UTF-8, a BLOB or a number in a TEXT column, NULL, very long values. A cell whose row
/// does not exist is archived as NULL. A cell with a [`Packed`] value is archived from it.
pub fn save_pre_image(
    conn: &Connection,
    compaction_id: i64,
    cells: &[Cell],
) -> rusqlite::Result<()> {
    for (seq, c) in cells.iter().enumerate() {
        let (value, encoding, packed) = match &c.packed {
            // A row frame's columns go in `value` (`?9`); a single packed value has none.
            Some(p) => ("?9".to_string(), Some(p.encoding()), Some(&p.zstd[..])),
            None if c.is_marker() => ("NULL".to_string(), None, None),
            None => (
                format!("(SELECT {} {})", c.column_expr()?, c.row_clause(5)?),
                None,
                None,
            ),
        };
        let sql = format!(
            "INSERT INTO agent_db_archive(compaction_id, seq, table_name, key_column, row_key, column_name, value, encoding, packed)
             SELECT ?1, ?2, ?3, ?4, ?5, ?6, {value}, ?7, ?8"
        );
        let meta = c.packed.as_ref().and_then(|p| p.meta());
        let seq_i = seq as i64;
        let mut bound: Vec<&dyn ToSql> = vec![
            &compaction_id,
            &seq_i,
            &c.table,
            &c.key_column,
            &c.key,
            &c.column,
            &encoding,
            &packed,
        ];
        if c.packed.is_some() {
            bound.push(&meta);
        }
        conn.prepare_cached(&sql)?.execute(bound.as_slice())?;
        if !c.is_marker() && c.packed.is_none() && !deleting(cells, seq) {
            refuse_unrestorable_null(conn, compaction_id, seq as i64, c)?;
        }
    }
    Ok(())
}

/// Whether cell `i` belongs to a row being deleted (a `-` marker of its row precedes it): its
/// NULL goes back with the whole row, by INSERT.
fn deleting(cells: &[Cell], i: usize) -> bool {
    cells[..i]
        .iter()
        .rev()
        .take_while(|c| c.table == cells[i].table && c.key == cells[i].key)
        .any(|c| c.column == DELETED)
}

/// A legacy row can hold NULL in a column the schema now declares NOT NULL. A restore could not
/// put that NULL back (SQLite enforces NOT NULL on UPDATE), so such a cell is not changed at all:
/// the write fails, its transaction rolls back, and the conversation is reported as failed.
fn refuse_unrestorable_null(
    conn: &Connection,
    compaction_id: i64,
    seq: i64,
    c: &Cell,
) -> rusqlite::Result<()> {
    let null: bool = conn
        .prepare_cached(
            "SELECT value IS NULL FROM agent_db_archive WHERE compaction_id = ?1 AND seq = ?2",
        )?
        .query_row(params![compaction_id, seq], |r| r.get(0))?;
    if !null {
        return Ok(());
    }
    let not_null: bool = conn
        .prepare_cached("SELECT \"notnull\" FROM pragma_table_info(?1) WHERE name = ?2")?
        .query_row(params![c.table, c.column], |r| r.get(0))
        .unwrap_or(false);
    if not_null {
        return Err(rusqlite::Error::ToSqlConversionFailure(
            format!(
                "{}.{} holds NULL although the schema declares it NOT NULL; a restore could not put \
                 that back, so agent-db leaves this conversation alone",
                c.table, c.column
            )
            .into(),
        ));
    }
    Ok(())
}

/// Feed one value into the image hash. The layout is the one agent-db has always used, so the
/// post-image hashes recorded by earlier versions still match.
fn hash_value(h: &mut Sha256, v: Option<ValueRef<'_>>) {
    match v {
        None => h.update(b"absent;"),
        Some(ValueRef::Null) => h.update(b"null;"),
        Some(ValueRef::Integer(i)) => h.update(format!("int:{i};").as_bytes()),
        Some(ValueRef::Real(f)) => h.update(format!("real:{};", f.to_bits()).as_bytes()),
        Some(ValueRef::Text(t)) => {
            h.update(format!("text:{}:", t.len()).as_bytes());
            h.update(t);
        }
        Some(ValueRef::Blob(b)) => {
            h.update(format!("blob:{}:", b.len()).as_bytes());
            h.update(b);
        }
    }
}

/// A version token of one stored value: its storage class and the digest
/// ([`crate::util::version_digest`]) of its exact bytes, telling them apart without keeping them.
pub fn value_digest(v: ValueRef<'_>) -> String {
    match v {
        ValueRef::Null => "null".into(),
        ValueRef::Integer(i) => format!("int:{i}"),
        ValueRef::Real(f) => format!("real:{}", f.to_bits()),
        ValueRef::Text(t) => format!("text:{}", crate::util::version_digest(t)),
        ValueRef::Blob(b) => format!("blob:{}", crate::util::version_digest(b)),
    }
}

/// Feed one cell of the image hash: its name, its key, its value (`None`: the row is absent).
fn hash_cell(h: &mut Sha256, c: &Cell, value: Option<ValueRef<'_>>) {
    h.update(format!("{}.{}.{}:", c.table, c.column, c.key_column).as_bytes());
    hash_value(h, Some(c.key.as_ref()));
    hash_value(h, value);
}

/// The post-image hash of a compaction's first cells, computed by the store from the values it
/// is about to write, on the planning pool (kodelet's new `raw_messages` and `tool_results`,
/// most of the bytes a writer would otherwise read back and hash). [`finish_audit`] hashes only
/// the cells after them, and only when the staged cells begin with exactly these.
#[derive(Clone)]
pub struct HashedPrefix {
    cells: Vec<(String, String, String, CellValue)>,
    /// Boxed: a proposal carries it through channels.
    state: Box<Sha256>,
}

impl Default for HashedPrefix {
    fn default() -> Self {
        HashedPrefix {
            cells: Vec::new(),
            state: Box::new(Sha256::new()),
        }
    }
}

impl HashedPrefix {
    /// Add the next cell with the value it will hold once written: a value bound as is, which
    /// SQLite stores with these bytes and this storage class (TEXT into a TEXT column).
    pub fn push(&mut self, c: &Cell, value: ValueRef<'_>) {
        hash_cell(&mut self.state, c, Some(value));
        self.cells.push(Self::name(c));
    }

    fn name(c: &Cell) -> (String, String, String, CellValue) {
        (
            c.table.clone(),
            c.column.clone(),
            c.key_column.clone(),
            c.key.clone(),
        )
    }

    /// Whether `cells` begins with this prefix's cells.
    fn starts(&self, cells: &[Cell]) -> bool {
        self.cells.len() <= cells.len()
            && self
                .cells
                .iter()
                .zip(cells)
                .all(|(hashed, c)| *hashed == Self::name(c))
    }
}

/// A hash of the current values of `cells` (for inserted rows: whether they exist). Recorded
/// after a compaction's write, compared before a restore to detect later changes. Values are
/// hashed from their stored bytes and storage class, never converted.
pub fn image_hash(conn: &Connection, cells: &[Cell]) -> rusqlite::Result<String> {
    image_hash_after(conn, cells, None)
}

/// [`image_hash`], continuing from `prefix` (the first cells' hash) when `cells` begin with it.
fn image_hash_after(
    conn: &Connection,
    cells: &[Cell],
    prefix: Option<HashedPrefix>,
) -> rusqlite::Result<String> {
    let (mut h, done) = match prefix {
        Some(p) if p.starts(cells) => (*p.state, p.cells.len()),
        _ => (Sha256::new(), 0),
    };
    for c in &cells[done..] {
        if c.column == DELETED_ROWS {
            // Whether its rows came back is [`frames_present`]'s to say.
            hash_cell(&mut h, c, None);
            continue;
        }
        let sql = format!("SELECT {} {}", c.column_expr()?, c.row_clause(1)?);
        let mut stmt = conn.prepare_cached(&sql)?;
        let mut rows = stmt.query([&c.key])?;
        match rows.next()? {
            Some(r) => hash_cell(&mut h, c, Some(r.get_ref(0)?)),
            None => hash_cell(&mut h, c, None),
        }
    }
    Ok(hex::encode(h.finalize()))
}

/// The table holding each `AUTOINCREMENT` table's high-water mark (one row per table, keyed by
/// `name`, column `seq`). A store that archives its row (goose) shares it with every other
/// conversation: any insert anywhere moves it. So a restore compares it with the value the
/// compaction itself left ([`sequence_after`]), not with the current one, and puts the archived
/// value back only while nobody moved it since ([`restorable`]).
pub const SEQUENCE_TABLE: &str = "sqlite_sequence";

/// For each archived [`SEQUENCE_TABLE`] cell of compaction `compaction_id` (by its index in
/// `archived`): the value that compaction left, which `AUTOINCREMENT` makes the larger of the
/// archived value and the largest rowid the compaction inserted into that table.
pub fn sequence_after(
    conn: &Connection,
    compaction_id: i64,
    archived: &[Archived],
) -> rusqlite::Result<std::collections::HashMap<usize, CellValue>> {
    let mut out = std::collections::HashMap::new();
    for (i, a) in archived.iter().enumerate() {
        let c = &a.cell;
        if c.table != SEQUENCE_TABLE || c.is_marker() || a.encoding.is_some() {
            continue;
        }
        let before: Option<i64> = conn
            .prepare_cached(
                "SELECT CASE WHEN typeof(value) = 'integer' THEN value END FROM agent_db_archive
                 WHERE compaction_id = ?1 AND seq = ?2",
            )?
            .query_row(params![compaction_id, a.seq], |r| r.get(0))?;
        let CellValue::Text(table) = &c.key else {
            continue;
        };
        let inserted = inserted_rowids(conn, compaction_id, &String::from_utf8_lossy(table))?;
        let after = inserted.into_iter().chain(before).max();
        if let Some(v) = after {
            out.insert(i, CellValue::Integer(v));
        }
    }
    Ok(out)
}

/// [`image_hash`] with the cells at the indexes of `expected` hashed as holding those values
/// (for [`SEQUENCE_TABLE`] cells: the value the compaction left, see [`sequence_after`]).
pub fn image_hash_expecting(
    conn: &Connection,
    cells: &[Cell],
    expected: &std::collections::HashMap<usize, CellValue>,
) -> rusqlite::Result<String> {
    let mut h = Sha256::new();
    for (i, c) in cells.iter().enumerate() {
        match expected.get(&i) {
            Some(v) => hash_cell(&mut h, c, Some(v.as_ref())),
            None => match current_value(conn, c)? {
                Some(v) => hash_cell(&mut h, c, Some(v.as_ref())),
                None => hash_cell(&mut h, c, None),
            },
        }
    }
    Ok(hex::encode(h.finalize()))
}

/// A cell's current value (`None`: its row is absent; `1` for a row marker whose row exists).
fn current_value(conn: &Connection, c: &Cell) -> rusqlite::Result<Option<CellValue>> {
    if c.column == DELETED_ROWS {
        return Ok(None);
    }
    let sql = format!("SELECT {} {}", c.column_expr()?, c.row_clause(1)?);
    let mut stmt = conn.prepare_cached(&sql)?;
    let mut rows = stmt.query([&c.key])?;
    match rows.next()? {
        Some(r) => Ok(Some(CellValue::from_ref(r.get_ref(0)?))),
        None => Ok(None),
    }
}

/// The archived cells a restore writes back: all but the [`SEQUENCE_TABLE`] cells some other
/// insert moved since the compaction (their value is no longer the one in `expected`); those
/// keep their high-water mark, so no rowid is ever handed out twice.
pub fn restorable(
    conn: &Connection,
    archived: Vec<Archived>,
    expected: &std::collections::HashMap<usize, CellValue>,
) -> rusqlite::Result<Vec<Archived>> {
    let mut out = Vec::with_capacity(archived.len());
    for (i, a) in archived.into_iter().enumerate() {
        if let Some(v) = expected.get(&i) {
            if current_value(conn, &a.cell)?.as_ref() != Some(v) {
                continue;
            }
        }
        out.push(a);
    }
    Ok(out)
}

/// An archived cell; its pre-image value stays in the archive table (see [`apply`]).
#[derive(Debug, Clone)]
pub struct Archived {
    pub seq: i64,
    pub cell: Cell,
    /// How the value is stored: `None` as is in `value`, else packed (see [`Packed`]).
    pub encoding: Option<String>,
}

/// The archived cells of a compaction, in the order they were saved.
pub fn load(conn: &Connection, compaction_id: i64) -> rusqlite::Result<Vec<Archived>> {
    let mut stmt = conn.prepare(
        "SELECT seq, table_name, key_column, row_key, column_name, encoding FROM agent_db_archive
         WHERE compaction_id = ?1 ORDER BY seq",
    )?;
    let rows = stmt.query_map([compaction_id], |r| {
        Ok(Archived {
            seq: r.get(0)?,
            cell: Cell {
                table: r.get(1)?,
                key_column: r.get(2)?,
                key: CellValue::from_ref(r.get_ref(3)?),
                column: r.get(4)?,
                packed: None,
            },
            encoding: r.get(5)?,
        })
    })?;
    rows.collect()
}

/// The archived value of one cell of compaction `compaction_id` (unpacked, with its storage
/// class), or `None` when the compaction archived no such cell or its archive was pruned.
pub fn archived_value(
    conn: &Connection,
    compaction_id: i64,
    table: &str,
    column: &str,
) -> rusqlite::Result<Option<CellValue>> {
    let packed: bool = conn.query_row(
        "SELECT COUNT(*) > 0 FROM pragma_table_info('agent_db_archive') WHERE name = 'packed'",
        [],
        |r| r.get(0),
    )?;
    let sql = if packed {
        "SELECT value, encoding, packed FROM agent_db_archive
         WHERE compaction_id = ?1 AND table_name = ?2 AND column_name = ?3 ORDER BY seq LIMIT 1"
    } else {
        "SELECT value, NULL, NULL FROM agent_db_archive
         WHERE compaction_id = ?1 AND table_name = ?2 AND column_name = ?3 ORDER BY seq LIMIT 1"
    };
    let mut stmt = conn.prepare_cached(sql)?;
    let mut rows = stmt.query(params![compaction_id, table, column])?;
    let Some(r) = rows.next()? else {
        return Ok(None);
    };
    match r.get::<_, Option<String>>(1)? {
        Some(encoding) => {
            let bytes: Vec<u8> = r.get(2)?;
            unpack(&encoding, &bytes).map(Some)
        }
        None => Ok(Some(CellValue::from_ref(r.get_ref(0)?))),
    }
}

/// The integer keys (rowids) of the rows of `table` compaction `compaction_id` inserted (its
/// `*` markers), in the order it inserted them; keys of another type are left out.
pub fn inserted_rowids(
    conn: &Connection,
    compaction_id: i64,
    table: &str,
) -> rusqlite::Result<Vec<i64>> {
    let mut stmt = conn.prepare_cached(
        "SELECT row_key FROM agent_db_archive
         WHERE compaction_id = ?1 AND table_name = ?2 AND column_name = '*' ORDER BY seq",
    )?;
    let rows = stmt.query_map(params![compaction_id, table], |r| {
        Ok(CellValue::from_ref(r.get_ref(0)?))
    })?;
    let mut out = Vec::new();
    for k in rows {
        if let CellValue::Integer(i) = k? {
            out.push(i);
        }
    }
    Ok(out)
}

/// Each cell of `table`.`column` as it was before compaction `compaction_id` of conversation
/// `conversation`, where that compaction or a later unrestored one of the conversation archived
/// it: the value the earliest of them archived (unpacked), by row key ([`key_text`]). A cell
/// missing here has its current value since then, as far as agent-db's writes go.
pub fn values_before(
    conn: &Connection,
    conversation: &str,
    compaction_id: i64,
    table: &str,
    column: &str,
) -> rusqlite::Result<std::collections::HashMap<String, CellValue>> {
    let packed: bool = conn.query_row(
        "SELECT COUNT(*) > 0 FROM pragma_table_info('agent_db_archive') WHERE name = 'packed'",
        [],
        |r| r.get(0),
    )?;
    let cols = if packed {
        "a.encoding, a.packed"
    } else {
        "NULL, NULL"
    };
    let mut stmt = conn.prepare(&format!(
        "SELECT a.row_key, a.value, {cols} FROM agent_db_archive a
         JOIN agent_db_compactions c ON c.id = a.compaction_id
         WHERE a.compaction_id >= ?1 AND c.conversation_id = ?2 AND c.restored_at IS NULL
           AND a.table_name = ?3 AND a.column_name = ?4
         ORDER BY a.compaction_id DESC, a.seq DESC"
    ))?;
    let mut rows = stmt.query(params![compaction_id, conversation, table, column])?;
    // Newest first, so the earliest compaction's value of a cell comes last and wins.
    let mut out = std::collections::HashMap::new();
    while let Some(r) = rows.next()? {
        let key = key_text(&CellValue::from_ref(r.get_ref(0)?));
        let value = match r.get::<_, Option<String>>(2)? {
            Some(encoding) => unpack(&encoding, &r.get::<_, Vec<u8>>(3)?)?,
            None => CellValue::from_ref(r.get_ref(1)?),
        };
        out.insert(key, value);
    }
    Ok(out)
}

/// A row key as text (an integer in decimal, text as is), for looking archived cells up.
pub fn key_text(key: &CellValue) -> String {
    match key {
        CellValue::Integer(i) => i.to_string(),
        CellValue::Real(f) => f.to_string(),
        CellValue::Text(b) | CellValue::Blob(b) => String::from_utf8_lossy(b).into_owned(),
        CellValue::Null => String::new(),
    }
}

/// Write archived values back (inserted rows are deleted). SQLite copies each value from the
/// archive itself, so the cell gets back its exact bytes and storage class; a packed value is
/// decompressed and bound with the storage class it was archived with.
pub fn apply(conn: &Connection, compaction_id: i64, archived: &[Archived]) -> rusqlite::Result<()> {
    let mut i = 0;
    while i < archived.len() {
        let a = &archived[i];
        let c = &a.cell;
        i += 1;
        if c.column == DELETED {
            // The row's cells follow its marker: insert it again from them.
            let n = archived[i..]
                .iter()
                .take_while(|b| {
                    !b.cell.is_marker() && b.cell.table == c.table && b.cell.key == c.key
                })
                .count();
            insert_row(conn, compaction_id, &archived[i..i + n])?;
            i += n;
        } else if c.column == DELETED_ROWS {
            insert_frame(conn, compaction_id, a)?;
        } else if c.column == "*" {
            let sql = format!("DELETE {}", c.row_clause(1)?);
            conn.execute(&sql, [&c.key])?;
        } else if let Some(encoding) = &a.encoding {
            let packed: Vec<u8> = conn.query_row(
                "SELECT packed FROM agent_db_archive WHERE compaction_id = ?1 AND seq = ?2",
                params![compaction_id, a.seq],
                |r| r.get(0),
            )?;
            let value = unpack(encoding, &packed)?;
            let sql = format!(
                "UPDATE \"{}\" SET \"{}\" = ?2 WHERE \"{}\" = ?1",
                ident(&c.table)?,
                ident(&c.column)?,
                ident(&c.key_column)?
            );
            conn.execute(&sql, params![c.key, value])?;
        } else {
            let sql = format!(
                "UPDATE \"{}\" SET \"{}\" = (SELECT value FROM agent_db_archive WHERE compaction_id = ?2 AND seq = ?3)
                 WHERE \"{}\" = ?1",
                ident(&c.table)?,
                ident(&c.column)?,
                ident(&c.key_column)?
            );
            conn.execute(&sql, params![c.key, compaction_id, a.seq])?;
        }
    }
    Ok(())
}

/// Insert a deleted row again from its archived cells (each value copied by SQLite, or unpacked
/// and bound with its storage class).
fn insert_row(conn: &Connection, compaction_id: i64, cells: &[Archived]) -> rusqlite::Result<()> {
    let Some(first) = cells.first() else {
        return Ok(());
    };
    let mut cols = Vec::with_capacity(cells.len());
    let mut exprs = Vec::with_capacity(cells.len());
    let mut values = Vec::new();
    for a in cells {
        cols.push(format!("\"{}\"", ident(&a.cell.column)?));
        match &a.encoding {
            Some(encoding) => {
                let packed: Vec<u8> = conn.query_row(
                    "SELECT packed FROM agent_db_archive WHERE compaction_id = ?1 AND seq = ?2",
                    params![compaction_id, a.seq],
                    |r| r.get(0),
                )?;
                values.push(unpack(encoding, &packed)?);
                exprs.push(format!("?{}", values.len() + 1));
            }
            None => exprs.push(format!(
                "(SELECT value FROM agent_db_archive WHERE compaction_id = ?1 AND seq = {})",
                a.seq
            )),
        }
    }
    let sql = format!(
        "INSERT INTO \"{}\" ({}) VALUES ({})",
        ident(&first.cell.table)?,
        cols.join(", "),
        exprs.join(", ")
    );
    let mut bound: Vec<&dyn ToSql> = vec![&compaction_id];
    bound.extend(values.iter().map(|v| v as &dyn ToSql));
    conn.prepare_cached(&sql)?.execute(bound.as_slice())?;
    Ok(())
}

/// A row frame's columns and cells (row after row), from the archive.
fn frame(
    conn: &Connection,
    compaction_id: i64,
    a: &Archived,
) -> rusqlite::Result<(Vec<String>, Vec<CellValue>)> {
    let damaged = |why: &str| {
        rusqlite::Error::ToSqlConversionFailure(
            format!(
                "the archived rows of {} (compaction {compaction_id}) {why}; the archive is damaged",
                a.cell.table
            )
            .into(),
        )
    };
    if a.encoding.as_deref() != Some(ENCODING_ROWS) {
        return Err(damaged("are not a row frame"));
    }
    let (meta, packed): (String, Vec<u8>) = conn.query_row(
        "SELECT value, packed FROM agent_db_archive WHERE compaction_id = ?1 AND seq = ?2",
        params![compaction_id, a.seq],
        |r| Ok((r.get(0)?, r.get(1)?)),
    )?;
    #[derive(serde::Deserialize)]
    struct Meta {
        columns: Vec<String>,
        rows: u64,
    }
    let meta: Meta = serde_json::from_str(&meta).map_err(|_| damaged("name no columns"))?;
    let data =
        zstd::stream::decode_all(packed.as_slice()).map_err(|_| damaged("do not decompress"))?;
    let cells = super::row_codec::decode_cells(&data).ok_or_else(|| damaged("do not decode"))?;
    if meta.columns.is_empty() || cells.len() as u64 != meta.rows * meta.columns.len() as u64 {
        return Err(damaged("do not add up to their row count"));
    }
    for c in &meta.columns {
        ident(c)?;
    }
    Ok((meta.columns, cells))
}

/// Insert a frame's deleted rows again, each with the columns (and hidden rowid) it was read
/// with ([`super::row_codec::insert_rows`]).
fn insert_frame(conn: &Connection, compaction_id: i64, a: &Archived) -> rusqlite::Result<()> {
    let (columns, cells) = frame(conn, compaction_id, a)?;
    super::row_codec::insert_rows(conn, ident(&a.cell.table)?, &columns, &cells)
}

/// Whether any row of compaction `compaction_id`'s row frames is in its table again (a row with
/// one of the frame's keys): its restore would then duplicate or clash with it.
pub fn frames_present(
    conn: &Connection,
    compaction_id: i64,
    archived: &[Archived],
) -> rusqlite::Result<bool> {
    for a in archived.iter().filter(|a| a.cell.column == DELETED_ROWS) {
        let (columns, cells) = frame(conn, compaction_id, a)?;
        let key = &a.cell.key_column;
        let Some(k) = columns.iter().position(|c| c == key) else {
            return Err(rusqlite::Error::InvalidColumnName(key.clone()));
        };
        let sql = format!(
            "SELECT 1 FROM \"{}\" WHERE \"{}\" = ?1",
            ident(&a.cell.table)?,
            ident(key)?
        );
        let mut st = conn.prepare_cached(&sql)?;
        for row in cells.chunks(columns.len()) {
            if st.exists([&row[k]])? {
                return Ok(true);
            }
        }
    }
    Ok(false)
}

/// The SQL sum of the archive's stored bytes over the rows a query selects (`value`, plus the
/// packed column once agent-db's tables have it: read-only commands do not upgrade them).
pub fn stored_bytes_sum(conn: &Connection) -> rusqlite::Result<&'static str> {
    let packed: bool = conn.query_row(
        "SELECT COUNT(*) > 0 FROM pragma_table_info('agent_db_archive') WHERE name = 'packed'",
        [],
        |r| r.get(0),
    )?;
    Ok(if packed {
        "COALESCE(SUM(COALESCE(LENGTH(CAST(value AS BLOB)), 0) + COALESCE(LENGTH(packed), 0)), 0)"
    } else {
        "COALESCE(SUM(LENGTH(CAST(value AS BLOB))), 0)"
    })
}

/// What the audit log records for one compaction.
#[derive(Debug, Clone, serde::Serialize)]
pub struct AuditEntry {
    pub conversation_id: String,
    pub store_kind: String,
    pub reason: String,
    pub strategy: String,
    pub model: Option<String>,
    pub messages_before: i64,
    pub messages_after: i64,
    pub tokens_before: i64,
    pub tokens_after: i64,
    pub summary_sha256: String,
    /// The retention score ([`crate::retention::Retention`]) as JSON; `None` is unknown.
    pub retention: Option<String>,
    /// Free-form details (hooks, cost, recipe), JSON.
    pub details: serde_json::Value,
}

impl AuditEntry {
    /// The audit row of a change that moves whole rows and writes no summary (`reclaim`,
    /// `retire`): no message or token figures, no retention.
    pub fn housekeeping(
        conversation_id: &str,
        store_kind: &str,
        reason: String,
        strategy: &str,
        details: serde_json::Value,
    ) -> AuditEntry {
        AuditEntry {
            conversation_id: conversation_id.to_string(),
            store_kind: store_kind.to_string(),
            reason,
            strategy: strategy.to_string(),
            model: None,
            messages_before: 0,
            messages_after: 0,
            tokens_before: 0,
            tokens_after: 0,
            summary_sha256: String::new(),
            retention: None,
            details,
        }
    }
}

/// Insert an audit row (post-image hash filled in by [`finish_audit`]); returns its id.
pub fn insert_audit(conn: &Connection, e: &AuditEntry, now: &str) -> rusqlite::Result<i64> {
    conn.prepare_cached(
        "INSERT INTO agent_db_compactions(conversation_id, store_kind, compacted_at, reason, strategy, model,
           messages_before, messages_after, tokens_before, tokens_after, summary_sha256, post_image_sha256,
           agent_db_version, details, retention)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, '', ?12, ?13, ?14)",
    )?
    .execute(params![
            e.conversation_id,
            e.store_kind,
            now,
            e.reason,
            e.strategy,
            e.model,
            e.messages_before,
            e.messages_after,
            e.tokens_before,
            e.tokens_after,
            e.summary_sha256,
            crate::VERSION,
            e.details.to_string(),
            e.retention,
        ])?;
    Ok(conn.last_insert_rowid())
}

/// Record the post-image hash once the new state is written (continuing from `prefix`, the
/// store's own hash of the first cells' new values, when it has one).
pub fn finish_audit(
    conn: &Connection,
    compaction_id: i64,
    cells: &[Cell],
    prefix: Option<HashedPrefix>,
) -> rusqlite::Result<()> {
    let hash = image_hash_after(conn, cells, prefix)?;
    conn.prepare_cached("UPDATE agent_db_compactions SET post_image_sha256 = ?1 WHERE id = ?2")?
        .execute(params![hash, compaction_id])?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// A packed value holds its frame, not the worst case `zstd::bulk` allocates (at least the
    /// input's size): a batch keeps one per conversation in flight (a regression that made a
    /// third of the LLM batch's heap).
    #[test]
    fn a_packed_value_keeps_only_its_frame() {
        let text = "the same line of a long history\n".repeat(32 * 1024);
        let p = Packed::new(text.as_bytes(), false).unwrap();
        assert!(p.zstd.len() < text.len() / 50, "{} bytes", p.zstd.len());
        assert!(
            p.zstd.capacity() <= p.zstd.len() + 64,
            "capacity {} for a {}-byte frame",
            p.zstd.capacity(),
            p.zstd.len()
        );
    }

    /// One thread packs value after value with one context and one buffer; each frame is still
    /// the frame a fresh `zstd::bulk::compress` makes (what earlier agent-db archived, and what
    /// the benchmarks compare byte for byte), whatever the thread packed before, a value larger
    /// than the kept buffer included.
    #[test]
    fn packing_with_a_reused_context_gives_fresh_frames() {
        let big = "error: a line of a long build log, 0123456789\n".repeat(250_000);
        let values: Vec<Vec<u8>> = vec![
            b"short".to_vec(),
            big.as_bytes().to_vec(),
            Vec::new(),
            "another history [{\"role\":\"user\"}]"
                .repeat(5000)
                .into_bytes(),
            big.as_bytes()[..1 << 16].to_vec(),
            (0..=255u8).cycle().take(300_000).collect(),
        ];
        for v in values.iter().chain(values.iter().rev()) {
            let p = Packed::new(v, false).unwrap();
            assert_eq!(
                p.zstd,
                zstd::bulk::compress(v, PACK_LEVEL).unwrap(),
                "{} bytes",
                v.len()
            );
        }
    }

    /// A cell's value before compaction `c` of a conversation is what the earliest of `c` and
    /// its later unrestored compactions archived; earlier ones, restored ones and other
    /// conversations' do not count. Inserted rows are the `*` markers.
    #[test]
    fn values_before_a_compaction_are_the_earliest_archived_since() {
        let c = Connection::open_in_memory().unwrap();
        c.execute_batch(
            "CREATE TABLE agent_db_compactions (id INTEGER PRIMARY KEY, conversation_id TEXT, restored_at TEXT);
             CREATE TABLE agent_db_archive (compaction_id INTEGER, seq INTEGER, table_name TEXT,
               key_column TEXT, row_key BLOB, column_name TEXT, value BLOB, encoding TEXT, packed BLOB);
             INSERT INTO agent_db_compactions VALUES (1, 'a', NULL), (2, 'a', NULL), (3, 'a', '2026-01-01'), (4, 'b', NULL);
             INSERT INTO agent_db_archive VALUES
               (1, 1, 'messages', 'id', 10, 'metadata_json', 'v1', NULL, NULL),
               (2, 1, 'messages', 'id', 10, 'metadata_json', 'v2', NULL, NULL),
               (2, 2, 'messages', 'id', 11, 'metadata_json', 'w2', NULL, NULL),
               (2, 3, 'messages', 'id', 20, '*', NULL, NULL, NULL),
               (3, 1, 'messages', 'id', 12, 'metadata_json', 'x3', NULL, NULL),
               (4, 1, 'messages', 'id', 10, 'metadata_json', 'other', NULL, NULL);",
        )
        .unwrap();
        let text = |v: &str| CellValue::Text(v.as_bytes().to_vec());
        let got = values_before(&c, "a", 1, "messages", "metadata_json").unwrap();
        assert_eq!(got.len(), 2, "{got:?}");
        assert_eq!(got["10"], text("v1"));
        assert_eq!(got["11"], text("w2"));
        let got = values_before(&c, "a", 2, "messages", "metadata_json").unwrap();
        assert_eq!(got["10"], text("v2"));
        assert!(!got.contains_key("12"), "{got:?}");
        assert_eq!(inserted_rowids(&c, 2, "messages").unwrap(), [20]);
        assert!(inserted_rowids(&c, 1, "messages").unwrap().is_empty());
    }

    proptest! {
        /// Any bytes, TEXT or BLOB, come back from the packed form as they went in, storage
        /// class included (the restore's half of the packed archive).
        #[test]
        fn packed_values_unpack_to_the_same_bytes_and_class(
            bytes in proptest::collection::vec(any::<u8>(), 0..4096),
            blob in any::<bool>(),
        ) {
            let p = Packed::new(&bytes, blob).unwrap();
            let back = unpack(p.encoding(), &p.zstd).unwrap();
            let want = if blob { CellValue::Blob(bytes) } else { CellValue::Text(bytes) };
            prop_assert_eq!(back, want);
        }
    }

    fn any_value() -> impl Strategy<Value = CellValue> {
        prop_oneof![
            Just(CellValue::Null),
            any::<i64>().prop_map(CellValue::Integer),
            any::<f64>()
                .prop_filter("NaN is stored as NULL", |f| !f.is_nan())
                .prop_map(CellValue::Real),
            proptest::collection::vec(any::<u8>(), 0..600).prop_map(CellValue::Text),
            proptest::collection::vec(any::<u8>(), 0..600).prop_map(CellValue::Blob),
        ]
    }

    proptest! {
        /// Rows archived as one frame ([`Cell::deleted_rows`]) and deleted come back from
        /// `apply` with their hidden rowids and every value's storage class and bytes; the
        /// frame's rows count as present again ([`frames_present`]) once they are back, not
        /// before.
        #[test]
        fn a_row_frame_comes_back_value_for_value(
            rows in proptest::collection::vec((any_value(), any_value()), 1..6),
        ) {
            let conn = Connection::open_in_memory().unwrap();
            conn.execute_batch(
                "CREATE TABLE agent_db_archive (compaction_id INTEGER, seq INTEGER, table_name TEXT,
                   key_column TEXT, row_key BLOB, column_name TEXT, value BLOB, encoding TEXT, packed BLOB);
                 CREATE TABLE t(k TEXT, a, b);",
            )
            .unwrap();
            for (i, (a, b)) in rows.iter().enumerate() {
                conn.execute(
                    "INSERT INTO t(rowid, k, a, b) VALUES (?1, ?2, ?3, ?4)",
                    params![10 * i as i64 + 3, format!("k{i}"), a, b],
                )
                .unwrap();
            }
            let dump = |c: &Connection| -> Vec<Vec<CellValue>> {
                let mut st = c.prepare("SELECT rowid, k, a, b FROM t ORDER BY rowid").unwrap();
                let r = st
                    .query_map([], |r| {
                        Ok((0..4)
                            .map(|i| CellValue::from_ref(r.get_ref(i).unwrap()))
                            .collect::<Vec<_>>())
                    })
                    .unwrap();
                r.map(|x| x.unwrap()).collect()
            };
            let before = dump(&conn);
            let mut data = Vec::new();
            for row in &before {
                for v in row {
                    super::super::row_codec::encode_cell(&mut data, v.as_ref());
                }
            }
            let frame = Packed::rows(
                ["rowid", "k", "a", "b"].map(String::from).to_vec(),
                before.len() as u64,
                zstd::bulk::compress(&data, PACK_LEVEL).unwrap(),
            );
            let cells = vec![Cell::deleted_rows("t", "k", "conversation", frame)];
            save_pre_image(&conn, 1, &cells).unwrap();
            conn.execute("DELETE FROM t", []).unwrap();
            let archived = load(&conn, 1).unwrap();
            prop_assert!(!frames_present(&conn, 1, &archived).unwrap());
            apply(&conn, 1, &archived).unwrap();
            prop_assert_eq!(dump(&conn), before);
            prop_assert!(frames_present(&conn, 1, &archived).unwrap());
        }

        /// Rows deleted with their pre-image archived (a deleted-row marker, then each column's
        /// cell, some packed) come back from `apply` with every value's storage class and bytes,
        /// and the post-image hash after the delete is that of absent rows.
        #[test]
        fn deleted_rows_come_back_value_for_value(
            rows in proptest::collection::vec((any_value(), any_value()), 1..6),
            pack in any::<bool>(),
        ) {
            let conn = Connection::open_in_memory().unwrap();
            conn.execute_batch(
                "CREATE TABLE agent_db_archive (compaction_id INTEGER, seq INTEGER, table_name TEXT,
                   key_column TEXT, row_key BLOB, column_name TEXT, value BLOB, encoding TEXT, packed BLOB);
                 CREATE TABLE t(id INTEGER PRIMARY KEY, a, b);",
            )
            .unwrap();
            for (i, (a, b)) in rows.iter().enumerate() {
                conn.execute("INSERT INTO t VALUES (?1, ?2, ?3)", params![i as i64, a, b])
                    .unwrap();
            }
            let dump = |c: &Connection| -> Vec<Vec<CellValue>> {
                let mut st = c.prepare("SELECT id, a, b FROM t ORDER BY id").unwrap();
                let r = st
                    .query_map([], |r| {
                        Ok((0..3)
                            .map(|i| CellValue::from_ref(r.get_ref(i).unwrap()))
                            .collect::<Vec<_>>())
                    })
                    .unwrap();
                r.map(|x| x.unwrap()).collect()
            };
            let before = dump(&conn);
            let mut cells = Vec::new();
            for (i, (a, b)) in rows.iter().enumerate() {
                let key = i as i64;
                cells.push(Cell::deleted_row("t", "id", key));
                cells.push(Cell::new("t", "id", key, "id"));
                for (col, v) in [("a", a), ("b", b)] {
                    let packed = match v {
                        CellValue::Text(t) if pack => Some(Packed::new(t, false).unwrap()),
                        CellValue::Blob(t) if pack => Some(Packed::new(t, true).unwrap()),
                        _ => None,
                    };
                    cells.push(
                        Cell::new("t", "id", key, col).with_packed(packed.map(std::sync::Arc::new)),
                    );
                }
            }
            save_pre_image(&conn, 1, &cells).unwrap();
            conn.execute("DELETE FROM t", []).unwrap();
            let absent = image_hash(&conn, &cells).unwrap();
            apply(&conn, 1, &load(&conn, 1).unwrap()).unwrap();
            prop_assert_eq!(dump(&conn), before);
            prop_assert_ne!(image_hash(&conn, &cells).unwrap(), absent);
        }
    }

    /// A table holding `values` under key 'k' (TEXT columns a, b, c).
    fn table_with(values: [&str; 3]) -> Connection {
        let conn = Connection::open_in_memory().unwrap();
        conn.execute_batch("CREATE TABLE t(id TEXT PRIMARY KEY, a TEXT, b TEXT, c TEXT)")
            .unwrap();
        conn.execute(
            "INSERT INTO t VALUES ('k', ?1, ?2, ?3)",
            params![values[0], values[1], values[2]],
        )
        .unwrap();
        conn
    }

    fn cells() -> Vec<Cell> {
        ["a", "b", "c"]
            .iter()
            .map(|c| Cell::new("t", "id", "k", c))
            .collect()
    }

    proptest! {
        /// The hash of the first cells made from the values bound, continued by the writer,
        /// equals the hash SQLite's stored values give (what a restore recomputes).
        #[test]
        fn a_hashed_prefix_continues_to_the_stored_hash(
            a in "\\PC{0,300}", b in "\\PC{0,300}", c in "\\PC{0,30}", n in 0usize..=3,
        ) {
            let conn = table_with([&a, &b, &c]);
            let cells = cells();
            let mut prefix = HashedPrefix::default();
            for (cell, v) in cells.iter().zip([&a, &b, &c]).take(n) {
                prefix.push(cell, ValueRef::Text(v.as_bytes()));
            }
            prop_assert_eq!(
                image_hash_after(&conn, &cells, Some(prefix)).unwrap(),
                image_hash(&conn, &cells).unwrap()
            );
        }
    }

    /// A prefix whose cells are not the staged cells' first ones is not used: the hash is the
    /// stored values' even if the prefix was made from other values.
    #[test]
    fn a_prefix_of_other_cells_is_ignored() {
        let conn = table_with(["stored a", "stored b", "stored c"]);
        let cells = cells();
        let mut prefix = HashedPrefix::default();
        prefix.push(&cells[1], ValueRef::Text(b"not what is stored"));
        assert_eq!(
            image_hash_after(&conn, &cells, Some(prefix)).unwrap(),
            image_hash(&conn, &cells).unwrap()
        );
        let mut wrong_key = HashedPrefix::default();
        wrong_key.push(
            &Cell::new("t", "id", "other", "a"),
            ValueRef::Text(b"stored a"),
        );
        assert_eq!(
            image_hash_after(&conn, &cells, Some(wrong_key)).unwrap(),
            image_hash(&conn, &cells).unwrap()
        );
    }

    /// A NULL in a column declared NOT NULL (a legacy row: the constraint came later) cannot be
    /// restored, so archiving it fails; a NULL in a nullable column and any other value archive.
    #[test]
    fn a_null_the_schema_forbids_is_refused_and_others_are_archived() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("legacy.db");
        {
            let conn = Connection::open(&path).unwrap();
            conn.execute_batch(
                "CREATE TABLE t(id TEXT PRIMARY KEY, strict TEXT, loose TEXT);
                 INSERT INTO t VALUES ('k', NULL, NULL), ('v', 'x', 'y');
                 PRAGMA writable_schema = ON;
                 UPDATE sqlite_schema
                    SET sql = 'CREATE TABLE t(id TEXT PRIMARY KEY, strict TEXT NOT NULL, loose TEXT)'
                  WHERE name = 't';
                 PRAGMA writable_schema = OFF;",
            )
            .unwrap();
        }
        let mut conn = Connection::open(&path).unwrap();
        crate::store::agent_tables::migrate(&mut conn).unwrap();
        // Archive rows without audit rows: this test is about the archive alone.
        conn.execute_batch("PRAGMA foreign_keys = OFF").unwrap();
        let archived_null = |id: i64| -> bool {
            conn.query_row(
                "SELECT value IS NULL FROM agent_db_archive WHERE compaction_id = ?1",
                [id],
                |r| r.get(0),
            )
            .unwrap()
        };
        save_pre_image(&conn, 1, &[Cell::new("t", "id", "k", "loose")]).unwrap();
        assert!(archived_null(1));
        save_pre_image(&conn, 2, &[Cell::new("t", "id", "v", "strict")]).unwrap();
        assert!(!archived_null(2));
        let e = save_pre_image(&conn, 3, &[Cell::new("t", "id", "k", "strict")])
            .unwrap_err()
            .to_string();
        assert!(e.contains("t.strict") && e.contains("NOT NULL"), "{e}");
    }

    #[test]
    fn an_unknown_encoding_is_refused_by_name() {
        let e = unpack("brotli-text", b"x").unwrap_err().to_string();
        assert!(e.contains("\"brotli-text\""), "{e}");
    }
}

//! Where the bytes of a store file are, for `agent-db stats`: every table's and index's pages by
//! SQLite's own page accounting (the `dbstat` virtual table, compiled into the bundled SQLite),
//! the free list, and the categories a user understands (live history, hidden history, the
//! agent's logs and caches, agent-db's archive, indexes, free pages), with the conversations that
//! take the most bytes. Which table belongs to which category is the agent's to say
//! ([`super::kind::Adapter::space_map`]). Read-only.

use std::collections::HashMap;

use rusqlite::Connection;
use serde::Serialize;

use super::Store;
use crate::error::{Result, SqlContext};

/// A kind of bytes a user can tell apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Category {
    /// What the agent sends to the model.
    Live,
    /// What the agent keeps after a compaction for its display, but no longer sends.
    Hidden,
    /// The agent's own event logs, replay logs, caches, generated media.
    AgentData,
    /// The agent's other tables: sessions, projects, settings, listing copies.
    Other,
    /// agent-db's own tables (`agent_db_*`): the archive `restore` reads and the audit log.
    Archive,
    /// Every index, the agent's and agent-db's.
    Indexes,
    /// SQLite's own pages: the header and schema page(s), `sqlite_sequence`, and pages no table
    /// owns but SQLite reserves (pointer maps, the lock-byte page of files over 1 GiB).
    Sqlite,
    /// Pages on the free list: what `vacuum` gives back.
    Free,
}

impl Category {
    /// In the order `stats` shows them.
    pub const ALL: [Category; 8] = [
        Category::Live,
        Category::Hidden,
        Category::AgentData,
        Category::Other,
        Category::Archive,
        Category::Indexes,
        Category::Sqlite,
        Category::Free,
    ];

    /// The name `stats` prints and `--json` carries.
    pub fn name(self) -> &'static str {
        match self {
            Category::Live => "live history",
            Category::Hidden => "hidden history",
            Category::AgentData => "agent logs and caches",
            Category::Other => "other agent tables",
            Category::Archive => "agent-db archive",
            Category::Indexes => "indexes",
            Category::Sqlite => "sqlite header and schema",
            Category::Free => "free pages",
        }
    }
}

/// Part of a table's bytes that belongs to another category than the table's (kodelet's
/// `compaction_history` column inside `conversations`): the bytes `sql` counts (one row, one
/// integer: a sum of `octet_length()`), at most the table's own bytes.
#[derive(Debug, Clone)]
pub struct Within {
    pub category: Category,
    pub table: &'static str,
    /// What the bytes are, as `stats` lists it (`conversations.compaction_history`).
    pub label: String,
    pub sql: String,
}

/// How one agent's tables divide into categories ([`super::kind::Adapter::space_map`]).
#[derive(Debug, Clone, Default)]
pub struct SpaceMap {
    /// The agent's tables and their category; a table of the file not listed here is
    /// [`Category::Other`] (agent-db's own, indexes and SQLite's are placed by this module).
    pub tables: Vec<(&'static str, Category)>,
    /// Bytes inside a listed table that belong to another category.
    pub within: Vec<Within>,
    /// Why a category holds nothing (or is not told apart) in this agent's files.
    pub notes: Vec<(Category, &'static str)>,
    /// SQL giving `(conversation id, bytes)` per conversation, largest first, at most `?1` rows.
    pub top: Option<String>,
}

/// One table's, index's or pseudo-table's bytes.
#[derive(Debug, Clone, Serialize)]
pub struct TableBytes {
    pub name: String,
    /// `table`, `index`, or `pages` (the free list and reserved pages, which no table owns).
    pub kind: &'static str,
    pub bytes: u64,
}

/// One category's bytes and what makes them up.
#[derive(Debug, Clone, Serialize)]
pub struct CategoryBytes {
    pub name: &'static str,
    pub bytes: u64,
    pub tables: Vec<String>,
    /// Why it is empty or not told apart for this agent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<&'static str>,
}

/// One of the conversations that take the most bytes.
#[derive(Debug, Clone, Serialize)]
pub struct TopConversation {
    pub id: String,
    pub bytes: u64,
}

/// Where the bytes of the file are.
#[derive(Debug, Clone, Serialize)]
pub struct Space {
    /// `page_count × page_size`: what `tables` sums to. Equal to the file's size once the WAL
    /// (if any) is checkpointed.
    pub pages_bytes: u64,
    pub page_size: u64,
    pub tables: Vec<TableBytes>,
    pub categories: Vec<CategoryBytes>,
    pub top: Vec<TopConversation>,
}

/// The free-list pseudo-table's name in [`Space::tables`].
pub const FREE: &str = "(free pages)";
/// Pages SQLite reserves that no table owns (pointer maps, the lock-byte page).
pub const RESERVED: &str = "(reserved pages)";

fn int(conn: &Connection, pragma: &str) -> rusqlite::Result<i64> {
    conn.pragma_query_value(None, pragma, |r| r.get(0))
}

/// Every b-tree's bytes, from `dbstat` (page size times pages, overflow pages included).
fn btrees(conn: &Connection) -> rusqlite::Result<Vec<(String, u64)>> {
    let mut st = conn.prepare("SELECT name, pgsize FROM dbstat WHERE aggregate = TRUE")?;
    let rows = st.query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)?)))?;
    rows.map(|r| r.map(|(n, b)| (n, b.max(0) as u64))).collect()
}

/// `type` of every table and index in `sqlite_master`.
fn types(conn: &Connection) -> rusqlite::Result<HashMap<String, String>> {
    let mut st = conn.prepare("SELECT name, type FROM sqlite_master")?;
    let rows = st.query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?)))?;
    rows.collect()
}

fn is_sqlite_own(name: &str) -> bool {
    matches!(name, "sqlite_schema" | "sqlite_master" | "sqlite_sequence")
        || name.starts_with("sqlite_stat")
}

/// Why a category of this file has no table, when the agent said nothing of it.
fn none_here(c: Category) -> &'static str {
    match c {
        Category::Archive => "agent-db has not written to this file",
        _ => "none in this file",
    }
}

/// Where the bytes of `store` are, with the `top` largest conversations.
pub fn space(store: &Store, top: usize) -> Result<Space> {
    let map = store.kind.adapter().space_map(&store.read())?;
    measure(&store.conn, &store.path, &map, top)
}

/// [`space`] on a connection, with the agent's map.
pub fn measure(
    conn: &Connection,
    path: &std::path::Path,
    map: &SpaceMap,
    top: usize,
) -> Result<Space> {
    let page_size = int(conn, "page_size").at(path)?.max(0) as u64;
    let page_count = int(conn, "page_count").at(path)?.max(0) as u64;
    let free = int(conn, "freelist_count").at(path)?.max(0) as u64 * page_size;
    let mut tally = Tally::default();
    let owned = tally.btrees(conn, path, map)?;
    let total = page_count * page_size;
    tally.pages(FREE, Category::Free, free);
    let reserved = total.saturating_sub(owned + free);
    if reserved > 0 {
        tally.pages(RESERVED, Category::Sqlite, reserved);
    }
    tally.move_within(conn, path, map)?;
    Ok(Space {
        pages_bytes: total,
        page_size,
        categories: tally.categories(map),
        tables: tally.tables,
        top: top_conversations(conn, path, map, top)?,
    })
}

/// The bytes of the file as [`measure`] sorts them: per table and per category.
#[derive(Default)]
struct Tally {
    tables: Vec<TableBytes>,
    cats: HashMap<Category, (u64, Vec<String>)>,
    /// Each b-tree's category and the bytes of it still counted there.
    table_cat: HashMap<String, (Category, u64)>,
}

impl Tally {
    fn add(&mut self, c: Category, name: &str, bytes: u64) {
        let e = self.cats.entry(c).or_default();
        e.0 += bytes;
        e.1.push(name.to_string());
    }

    /// Every b-tree of the file in its category; the bytes they own.
    fn btrees(&mut self, conn: &Connection, path: &std::path::Path, map: &SpaceMap) -> Result<u64> {
        let types = types(conn).at(path)?;
        let agent: HashMap<&str, Category> = map.tables.iter().copied().collect();
        let mut owned = 0u64;
        for (name, bytes) in btrees(conn).at(path)? {
            owned += bytes;
            let is_index = types.get(&name).map(String::as_str) == Some("index");
            let c = if is_index {
                Category::Indexes
            } else if is_sqlite_own(&name) {
                Category::Sqlite
            } else if name.starts_with("agent_db_") {
                Category::Archive
            } else {
                agent.get(name.as_str()).copied().unwrap_or(Category::Other)
            };
            self.add(c, &name, bytes);
            self.table_cat.insert(name.clone(), (c, bytes));
            self.tables.push(TableBytes {
                name,
                kind: if is_index { "index" } else { "table" },
                bytes,
            });
        }
        Ok(owned)
    }

    /// Pages no table owns (the free list, reserved pages), as the pseudo-table `name`.
    fn pages(&mut self, name: &str, c: Category, bytes: u64) {
        self.tables.push(TableBytes {
            name: name.into(),
            kind: "pages",
            bytes,
        });
        self.add(c, name, bytes);
    }

    /// Bytes of another category inside a table: moved out of the table's category.
    fn move_within(
        &mut self,
        conn: &Connection,
        path: &std::path::Path,
        map: &SpaceMap,
    ) -> Result<()> {
        for w in &map.within {
            let Some((host, left)) = self.table_cat.get_mut(w.table) else {
                continue;
            };
            let counted: i64 = conn.query_row(&w.sql, [], |r| r.get(0)).at(path)?;
            let moved = (counted.max(0) as u64).min(*left);
            *left -= moved;
            let host = *host;
            if let Some(e) = self.cats.get_mut(&host) {
                e.0 -= moved;
            }
            self.add(w.category, &w.label, moved);
        }
        Ok(())
    }

    /// Every category in [`Category::ALL`]'s order, with the agent's note or why it is empty.
    fn categories(&mut self, map: &SpaceMap) -> Vec<CategoryBytes> {
        Category::ALL
            .iter()
            .map(|c| {
                let (bytes, tables) = self.cats.remove(c).unwrap_or_default();
                let empty = tables.is_empty();
                CategoryBytes {
                    name: c.name(),
                    bytes,
                    tables,
                    note: map
                        .notes
                        .iter()
                        .find(|(n, _)| n == c)
                        .map(|(_, why)| *why)
                        .or_else(|| empty.then_some(none_here(*c))),
                }
            })
            .collect()
    }
}

/// The `top` largest conversations by the agent's query, if it has one.
fn top_conversations(
    conn: &Connection,
    path: &std::path::Path,
    map: &SpaceMap,
    top: usize,
) -> Result<Vec<TopConversation>> {
    let (Some(sql), n) = (&map.top, top) else {
        return Ok(Vec::new());
    };
    if n == 0 {
        return Ok(Vec::new());
    }
    let mut st = conn.prepare(sql).at(path)?;
    let rows = st
        .query_map([n as i64], |r| {
            Ok(TopConversation {
                id: r.get(0)?,
                bytes: r.get::<_, Option<i64>>(1)?.unwrap_or(0).max(0) as u64,
            })
        })
        .at(path)?;
    rows.collect::<std::result::Result<_, _>>().at(path)
}

/// `coalesce(octet_length(c), 0)` for each column, joined with `+`: a row's bytes in them.
pub(crate) fn octets(columns: &[&str]) -> String {
    columns
        .iter()
        .map(|c| format!("coalesce(octet_length({c}), 0)"))
        .collect::<Vec<_>>()
        .join(" + ")
}

/// The `top` query over `(id, bytes)` rows of several tables (`SELECT id, bytes FROM …` each),
/// summed per conversation.
pub(crate) fn top_of(parts: &[String]) -> String {
    format!(
        "SELECT id, SUM(bytes) FROM ({}) GROUP BY id ORDER BY 2 DESC, 1 LIMIT ?1",
        parts.join(" UNION ALL ")
    )
}

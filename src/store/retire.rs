//! `agent-db retire`: whole conversations moved out of the store into a cold file
//! ([`super::cold`]) and back. What belongs to a conversation is the agent's to say
//! ([`super::kind::Adapter::retire_map`]): its row in the conversation table, its child
//! conversations, and every row of the other tables that names one of them. The rows are read
//! as stored (storage class and bytes, rowids where the table has them) and digested; the
//! protocol and its recovery are in [`super::retirement`].

use std::collections::HashSet;
use std::path::Path;

use rusqlite::Connection;

use crate::error::{Error, Result, SqlContext};

/// What an agent keeps of one conversation ([`super::kind::Adapter::retire_map`]).
#[derive(Debug, Clone, Copy)]
pub struct RetireMap {
    /// The conversation table.
    pub root: &'static str,
    /// Its id column.
    pub id: &'static str,
    /// Its column naming a parent conversation: children move with their parent.
    pub parent: Option<&'static str>,
    /// Other tables, each with the columns that name a conversation; a row moves when any of
    /// them names one of the group. Tables or columns a file lacks are passed over.
    pub links: &'static [(&'static str, &'static [&'static str])],
}

/// One table's rows of a conversation, as stored.
#[derive(Debug, Clone, PartialEq)]
pub struct TableRows {
    pub table: String,
    /// The columns, `rowid` first where the table has rowids that no column holds.
    pub columns: Vec<String>,
    pub rows: u64,
    /// The cells, row by row ([`encode_cell`]).
    pub data: Vec<u8>,
}

/// Every row of one conversation (and its children).
#[derive(Debug, Clone, PartialEq)]
pub struct Moved {
    /// The conversation and its children.
    pub ids: Vec<String>,
    pub tables: Vec<TableRows>,
    /// XXH3-128 of the tables, names and columns included (hex).
    pub digest: String,
}

impl Moved {
    pub fn rows(&self) -> u64 {
        self.tables.iter().map(|t| t.rows).sum()
    }

    /// The stored bytes of the cells.
    pub fn bytes(&self) -> u64 {
        self.tables.iter().map(|t| t.data.len() as u64).sum()
    }
}

/// The digest of `tables`.
pub fn digest(tables: &[TableRows]) -> String {
    let mut h = xxhash_rust::xxh3::Xxh3::new();
    for t in tables {
        h.update(t.table.as_bytes());
        h.update(&[0]);
        for c in &t.columns {
            h.update(c.as_bytes());
            h.update(&[0]);
        }
        h.update(&t.rows.to_le_bytes());
        h.update(&t.data);
    }
    format!("{:032x}", h.digest128())
}

use super::row_codec::{decode_cells, encode_cell, encoded_len};
use super::row_codec::{has_hidden_rowid, quote, table_info};

/// The conversation `id` and its children, or an empty list when it is not in the store.
fn group(conn: &Connection, path: &Path, map: &RetireMap, id: &str) -> Result<Vec<String>> {
    let exists = format!(
        "SELECT 1 FROM {} WHERE {} = ?1",
        quote(map.root),
        quote(map.id)
    );
    if !conn
        .prepare_cached(&exists)
        .at(path)?
        .exists([id])
        .at(path)?
    {
        return Ok(Vec::new());
    }
    let mut ids = vec![id.to_string()];
    let Some(parent) = map.parent else {
        return Ok(ids);
    };
    let children = format!(
        "SELECT {} FROM {} WHERE {} = ?1 ORDER BY rowid",
        quote(map.id),
        quote(map.root),
        quote(parent)
    );
    let mut st = conn.prepare_cached(&children).at(path)?;
    let mut seen: HashSet<String> = ids.iter().cloned().collect();
    let mut i = 0;
    while i < ids.len() {
        let kids = st
            .query_map([&ids[i]], |r| r.get::<_, String>(0))
            .at(path)?
            .collect::<std::result::Result<Vec<_>, _>>()
            .at(path)?;
        for k in kids {
            if seen.insert(k.clone()) {
                ids.push(k);
            }
        }
        i += 1;
    }
    Ok(ids)
}

/// How to read and delete one table's rows of a group: the columns to read and the condition.
pub(crate) struct Plan {
    table: String,
    columns: Vec<String>,
    /// The statements that read and delete a group's rows (`?1`: the IDs as a JSON array).
    select: String,
    delete: String,
    /// The same for a group of one conversation (`?1`: its ID), the most common: no JSON to
    /// parse nor list to build per statement.
    select_one: String,
    delete_one: String,
}

impl Plan {
    /// The read and the delete of a group of `n` conversations.
    fn statements(&self, n: usize) -> (&str, &str) {
        if n == 1 {
            (&self.select_one, &self.delete_one)
        } else {
            (&self.select, &self.delete)
        }
    }
}

/// What a plan binds to `?1` for the group `ids` (see [`Plan::statements`]).
fn group_param(ids: &[String]) -> String {
    match ids {
        [one] => one.clone(),
        _ => serde_json::to_string(ids).unwrap_or_default(),
    }
}

/// The tables of `map` present in the file, links first and the conversation table last (read
/// once per transaction, then [`read_planned`] and [`delete_planned`] per conversation).
pub(crate) fn plans(conn: &Connection, path: &Path, map: &RetireMap) -> Result<Vec<Plan>> {
    let mut out = Vec::new();
    let all = map
        .links
        .iter()
        .copied()
        .chain(std::iter::once((map.root, std::slice::from_ref(&map.id))));
    for (table, cols) in all {
        let info = table_info(conn, path, table)?;
        if info.is_empty() {
            continue;
        }
        let present: Vec<&str> = cols
            .iter()
            .copied()
            .filter(|c| info.iter().any(|(n, _, _)| n == c))
            .collect();
        if present.is_empty() {
            continue;
        }
        let condition = |one: bool| {
            present
                .iter()
                .map(|c| match one {
                    true => format!("{} = ?1", quote(c)),
                    false => format!("{} IN (SELECT value FROM json_each(?1))", quote(c)),
                })
                .collect::<Vec<_>>()
                .join(" OR ")
        };
        let mut columns: Vec<String> = info.iter().map(|(n, _, _)| n.clone()).collect();
        if has_hidden_rowid(conn, table, &info) {
            columns.insert(0, "rowid".into());
        }
        let cols = columns
            .iter()
            .map(|c| quote(c))
            .collect::<Vec<_>>()
            .join(", ");
        let (select, delete) = (
            |one| {
                format!(
                    "SELECT {cols} FROM {} WHERE {}",
                    quote(table),
                    condition(one)
                )
            },
            |one| format!("DELETE FROM {} WHERE {}", quote(table), condition(one)),
        );
        out.push(Plan {
            table: table.to_string(),
            select: select(false),
            delete: delete(false),
            select_one: select(true),
            delete_one: delete(true),
            columns,
        });
    }
    Ok(out)
}

/// Every row of conversation `id` and its children, as stored; `None` when it is not in the
/// store.
pub fn read(conn: &Connection, path: &Path, map: &RetireMap, id: &str) -> Result<Option<Moved>> {
    read_planned(conn, path, map, &plans(conn, path, map)?, id)
}

/// [`read`] with the tables' plans already made. Each table's rows come in the order the
/// condition's lookup gives them (index or rowid order): within one transaction the same rows
/// come in the same order, and nothing is sorted.
pub(crate) fn read_planned(
    conn: &Connection,
    path: &Path,
    map: &RetireMap,
    plans: &[Plan],
    id: &str,
) -> Result<Option<Moved>> {
    let ids = group(conn, path, map, id)?;
    if ids.is_empty() {
        return Ok(None);
    }
    let param = group_param(&ids);
    let mut tables = Vec::with_capacity(plans.len());
    for p in plans {
        let mut st = conn.prepare_cached(p.statements(ids.len()).0).at(path)?;
        let mut q = st.query([&param]).at(path)?;
        let (mut data, mut rows) = (Vec::new(), 0u64);
        while let Some(r) = q.next().at(path)? {
            // Room for the whole row first: a small cell after a large one would otherwise
            // copy the buffer again.
            let mut len = 0;
            for i in 0..p.columns.len() {
                len += encoded_len(r.get_ref(i).at(path)?);
            }
            data.reserve(len);
            for i in 0..p.columns.len() {
                encode_cell(&mut data, r.get_ref(i).at(path)?);
            }
            rows += 1;
        }
        tables.push(TableRows {
            table: p.table.clone(),
            columns: p.columns.clone(),
            rows,
            data,
        });
    }
    let digest = digest(&tables);
    Ok(Some(Moved {
        ids,
        tables,
        digest,
    }))
}

/// Delete the rows of the group `ids` [`read_planned`] read (in this transaction).
pub(crate) fn delete_planned(
    conn: &Connection,
    path: &Path,
    plans: &[Plan],
    ids: &[String],
) -> Result<()> {
    let param = group_param(ids);
    for p in plans.iter().rev() {
        conn.prepare_cached(p.statements(ids.len()).1)
            .at(path)?
            .execute([&param])
            .at(path)?;
    }
    Ok(())
}

/// Whether `a` and `b` hold the same tables, columns and rows, in any row order.
pub fn same_rows(a: &[TableRows], b: &[TableRows]) -> bool {
    a.len() == b.len()
        && a.iter().zip(b).all(|(x, y)| {
            x.table == y.table
                && x.columns == y.columns
                && x.rows == y.rows
                && match (rows_of(x), rows_of(y)) {
                    (Some(mut p), Some(mut q)) => {
                        p.sort_unstable();
                        q.sort_unstable();
                        p == q
                    }
                    _ => false,
                }
        })
}

/// The encoded rows of `t`, one slice each, or `None` when its cells do not split into rows.
fn rows_of(t: &TableRows) -> Option<Vec<&[u8]>> {
    let n = t.columns.len();
    if n == 0 {
        return (t.data.is_empty() && t.rows == 0).then(Vec::new);
    }
    let (mut out, mut at) = (Vec::new(), 0usize);
    while at < t.data.len() {
        let start = at;
        for _ in 0..n {
            let tag = *t.data.get(at)?;
            at += match tag {
                0 => 1,
                1 | 2 => 9,
                3 | 4 => {
                    let word = t.data.get(at + 1..at + 9)?;
                    9 + usize::try_from(u64::from_le_bytes(word.try_into().ok()?)).ok()?
                }
                _ => return None,
            };
        }
        out.push(t.data.get(start..at)?);
    }
    (out.len() as u64 == t.rows).then_some(out)
}

/// Insert `tables` back, each row with the columns it was read with.
pub fn insert(conn: &Connection, id: &str, tables: &[TableRows]) -> Result<()> {
    for t in tables {
        let cells = decode_cells(&t.data).ok_or_else(|| damaged(id))?;
        let n = t.columns.len();
        if n == 0 || cells.len() as u64 != t.rows * n as u64 {
            return Err(damaged(id));
        }
        super::row_codec::insert_rows(conn, &t.table, &t.columns, &cells).map_err(|e| {
            Error::conversation(id, format!("cannot put back a row of {}: {e}", t.table))
        })?;
    }
    Ok(())
}

fn damaged(id: &str) -> Error {
    Error::conversation(
        id,
        "the cold file's copy does not decode (damaged); nothing was restored".to_string(),
    )
}

#[cfg(test)]
mod tests {
    use super::super::row_codec::CellValue;
    use super::*;

    const MAP: RetireMap = RetireMap {
        root: "conv",
        id: "id",
        parent: Some("parent"),
        links: &[("link", &["a", "b"])],
    };

    fn store() -> Connection {
        let c = Connection::open_in_memory().unwrap();
        c.execute_batch(
            "CREATE TABLE conv (id TEXT PRIMARY KEY, parent TEXT, v);
             CREATE TABLE link (a TEXT, b TEXT, v);
             INSERT INTO conv VALUES ('p', NULL, 1), ('kid', 'p', 2), ('lone', NULL, 3), ('x', NULL, 4);
             INSERT INTO link VALUES ('p', NULL, 'p1'), (NULL, 'kid', 'k1'), ('lone', 'x', 'both'),
               ('x', NULL, 'x1'), (NULL, 'lone', 'l2'), ('pp', 'p ', 'near miss');",
        )
        .unwrap();
        c
    }

    /// The `v` of the rows the SQL written here selects (the oracle), sorted.
    fn oracle(c: &Connection, sql: &str) -> Vec<String> {
        let mut v: Vec<String> = c
            .prepare(sql)
            .unwrap()
            .query_map([], |r| r.get::<_, rusqlite::types::Value>(0))
            .unwrap()
            .map(|r| format!("{:?}", r.unwrap()))
            .collect();
        v.sort();
        v
    }

    /// The `v` cells (each row's last) of what was read of `table`, sorted.
    fn read_v(m: &Moved, table: &str) -> Vec<String> {
        let t = m.tables.iter().find(|t| t.table == table).unwrap();
        let cells = decode_cells(&t.data).unwrap();
        let mut v: Vec<String> = cells
            .chunks(t.columns.len())
            .map(|row| {
                let last: rusqlite::types::Value = match &row[row.len() - 1] {
                    CellValue::Integer(i) => (*i).into(),
                    CellValue::Text(b) => String::from_utf8(b.clone()).unwrap().into(),
                    other => panic!("{other:?}"),
                };
                format!("{last:?}")
            })
            .collect();
        v.sort();
        v
    }

    /// A conversation alone (its ID bound) and one with a child (the IDs as a list) read and
    /// delete exactly the rows any link column names, as plain SQL selects them.
    #[test]
    fn a_group_of_one_and_of_several_read_and_delete_the_rows_their_ids_name() {
        for (id, group, links) in [
            ("lone", "'lone'", "a IN ('lone') OR b IN ('lone')"),
            ("p", "'p', 'kid'", "a IN ('p', 'kid') OR b IN ('p', 'kid')"),
        ] {
            let c = store();
            let path = Path::new("t.db");
            let m = read(&c, path, &MAP, id).unwrap().unwrap();
            assert_eq!(m.ids.len(), group.split(',').count());
            let want_links = oracle(&c, &format!("SELECT v FROM link WHERE {links}"));
            let want_conv = oracle(&c, &format!("SELECT v FROM conv WHERE id IN ({group})"));
            assert_eq!(read_v(&m, "link"), want_links);
            assert_eq!(read_v(&m, "conv"), want_conv);
            let left = oracle(
                &c,
                &format!("SELECT v FROM link WHERE NOT coalesce({links}, 0)"),
            );
            delete_planned(&c, path, &plans(&c, path, &MAP).unwrap(), &m.ids).unwrap();
            assert_eq!(oracle(&c, "SELECT v FROM link"), left);
            let conv = format!("SELECT v FROM conv WHERE id IN ({group})");
            assert!(oracle(&c, &conv).is_empty());
            assert!(read(&c, path, &MAP, id).unwrap().is_none());
        }
    }
}

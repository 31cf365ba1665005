//! Unique ID prefixes, as jj and git use them: every command that takes a conversation ID also
//! takes a prefix of at least [`MIN_INPUT`] characters that matches exactly one conversation,
//! and tables show the shortest unique prefix (at least [`MIN_SHOWN`] characters).
//!
//! Lookups are range queries on the ID column (`id >= prefix AND id < successor(prefix)`), so
//! they use the primary-key index and never read message bodies.

use std::path::Path;

use rusqlite::Connection;

use super::{Store, StoreKind};
use crate::error::{Error, Result, SqlContext};

/// Shortest prefix a table shows.
pub const MIN_SHOWN: usize = 8;
/// IDs this short are always shown whole: goose's `20261013_110320` or `20261128_1` cut to a
/// prefix would read as another ID or a date (`20261013_11`, `20261128`), and resuming in goose
/// takes the full ID. Longer IDs (UUIDs, opencode's `ses_…`) show their shortest unique prefix.
pub const SHOWN_WHOLE: usize = 16;
/// Shortest prefix accepted as input (a full ID of any length is always accepted).
pub const MIN_INPUT: usize = 4;
/// Candidates listed in an ambiguity error.
const MAX_CANDIDATES: usize = 10;

/// Where a kind of store keeps its conversation IDs (table, column).
fn id_column(kind: StoreKind) -> (&'static str, &'static str) {
    kind.adapter().id_column()
}

/// The smallest string greater than every string starting with `p`, when `p` is ASCII and
/// its last byte can be incremented.
fn successor(p: &str) -> Option<String> {
    let mut b = p.as_bytes().to_vec();
    while let Some(last) = b.pop() {
        if last < 0x7f && p.is_ascii() {
            b.push(last + 1);
            return String::from_utf8(b).ok();
        }
    }
    None
}

/// IDs in `table.column` starting with `prefix`, sorted, at most `limit`.
fn matching(
    conn: &Connection,
    path: &Path,
    table: &str,
    column: &str,
    prefix: &str,
    limit: usize,
) -> Result<Vec<String>> {
    let sql = match successor(prefix) {
        Some(_) => format!(
            "SELECT DISTINCT {column} FROM {table} WHERE {column} >= ?1 AND {column} < ?2 ORDER BY {column} LIMIT ?3"
        ),
        None => format!(
            "SELECT DISTINCT {column} FROM {table} WHERE substr({column}, 1, length(?1)) = ?1 AND ?2 IS NULL ORDER BY {column} LIMIT ?3"
        ),
    };
    let mut stmt = conn.prepare(&sql).at(path)?;
    let rows = stmt
        .query_map(
            rusqlite::params![prefix, successor(prefix), limit as i64],
            |r| r.get::<_, String>(0),
        )
        .at(path)?;
    rows.collect::<std::result::Result<_, _>>().at(path)
}

/// Resolve `input` (a full ID or a unique prefix) against `table.column`. `Ok(None)` when
/// nothing matches; an error listing the candidates when several do.
pub fn resolve_in(store: &Store, table: &str, column: &str, input: &str) -> Result<Option<String>> {
    let found = matching(
        &store.conn,
        &store.path,
        table,
        column,
        input,
        MAX_CANDIDATES + 1,
    )?;
    if found.iter().any(|id| id == input) {
        return Ok(Some(input.to_string()));
    }
    if input.chars().count() < MIN_INPUT {
        return Ok(None);
    }
    match found.len() {
        0 => Ok(None),
        1 => Ok(found.into_iter().next()),
        n => {
            let more = if n > MAX_CANDIDATES { ", and more" } else { "" };
            let shown: Vec<&str> = found
                .iter()
                .take(MAX_CANDIDATES)
                .map(String::as_str)
                .collect();
            Err(Error::NotFound(format!(
                "conversation prefix {input} is ambiguous: it matches {}{more}; give more characters",
                shown.join(", ")
            )))
        }
    }
}

/// An empty ID (`show ""`, `--id ""`) is a usage error, not a conversation that is missing.
pub fn not_empty(input: &str) -> Result<()> {
    if input.trim().is_empty() {
        return Err(Error::Usage(
            "the conversation ID is empty; give an ID or a unique prefix of at least 4 characters"
                .into(),
        ));
    }
    Ok(())
}

/// The error for an ID that names no conversation: the same message and exit code (5) from
/// every command, with a hint that says why when it can (too short; the store's IDs all start
/// with a prefix such as opencode's `ses_` that `input` lacks).
pub fn unknown_id(store: &Store, input: &str) -> Error {
    let hint = if input.chars().count() < MIN_INPUT {
        format!("an ID prefix needs at least {MIN_INPUT} characters; `agent-db list` shows the IDs")
    } else {
        match common_lead(store) {
            Some(lead) if !input.starts_with(&lead) => format!(
                "{} IDs start with {lead}; `agent-db list` shows the IDs",
                store.kind.name()
            ),
            _ => "`agent-db list` shows the IDs".to_string(),
        }
    };
    Error::UnknownId {
        id: input.to_string(),
        hint,
    }
}

/// The prefix every ID of the store shares up to and including its last `_` (opencode's
/// `ses_`), when there is one: the common prefix of the smallest and largest ID is every ID's.
fn common_lead(store: &Store) -> Option<String> {
    let (table, column) = id_column(store.kind);
    let (lo, hi): (Option<String>, Option<String>) = store
        .conn
        .query_row(
            &format!("SELECT MIN({column}), MAX({column}) FROM {table}"),
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .ok()?;
    let (lo, hi) = (lo?, hi?);
    let common: String = lo
        .chars()
        .zip(hi.chars())
        .take_while(|(a, b)| a == b)
        .map(|(a, _)| a)
        .collect();
    let end = common.rfind('_')?;
    Some(common[..=end].to_string())
}

impl Store {
    /// The conversation `input` names (a full ID or a unique prefix): the one resolver every
    /// command uses. Nothing matching is [`unknown_id`]'s error; an ambiguous prefix lists the
    /// candidates. Both exit 5.
    pub fn resolve_id(&self, input: &str) -> Result<String> {
        not_empty(input)?;
        let (table, column) = id_column(self.kind);
        resolve_in(self, table, column, input)?.ok_or_else(|| unknown_id(self, input))
    }

    /// Every ID of `inputs` resolved ([`Store::resolve_id`]), in order, duplicates dropped: the
    /// first that names nothing (or is ambiguous) is the error, before anything is done.
    pub fn resolve_ids(&self, inputs: &[String]) -> Result<Vec<String>> {
        let mut out: Vec<String> = Vec::new();
        for i in inputs {
            let id = self.resolve_id(i)?;
            if !out.contains(&id) {
                out.push(id);
            }
        }
        Ok(out)
    }

    /// Every conversation ID, sorted (for shortest unique prefixes).
    pub fn all_ids(&self) -> Result<Vec<String>> {
        let (table, column) = id_column(self.kind);
        let mut stmt = self
            .conn
            .prepare(&format!("SELECT {column} FROM {table} ORDER BY {column}"))
            .at(&self.path)?;
        let rows = stmt
            .query_map([], |r| r.get::<_, String>(0))
            .at(&self.path)?;
        rows.collect::<std::result::Result<_, _>>().at(&self.path)
    }
}

/// Shortest unique prefixes of IDs among a sorted list of every ID in the store.
pub struct Prefixes {
    sorted: Vec<String>,
}

impl Prefixes {
    pub fn new(mut ids: Vec<String>) -> Prefixes {
        ids.sort();
        ids.dedup();
        Prefixes { sorted: ids }
    }

    /// Characters of `id` needed to tell it apart from every other ID (at least
    /// [`MIN_SHOWN`], at most the whole ID; the whole of an ID of at most [`SHOWN_WHOLE`]).
    pub fn len(&self, id: &str) -> usize {
        let whole = id.chars().count();
        if whole <= SHOWN_WHOLE {
            return whole;
        }
        let common =
            |a: &str, b: &str| a.chars().zip(b.chars()).take_while(|(x, y)| x == y).count();
        let i = self.sorted.partition_point(|x| x.as_str() < id);
        let mut need = 0;
        if i > 0 {
            need = need.max(common(&self.sorted[i - 1], id) + 1);
        }
        for next in self
            .sorted
            .iter()
            .skip(i)
            .filter(|x| x.as_str() != id)
            .take(1)
        {
            need = need.max(common(next, id) + 1);
        }
        need.max(MIN_SHOWN).min(id.chars().count())
    }

    /// The shortest unique prefix of `id`.
    pub fn short(&self, id: &str) -> String {
        id.chars().take(self.len(id)).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn successor_bounds_the_range() {
        assert_eq!(successor("4db8").as_deref(), Some("4db9"));
        assert_eq!(successor("a\u{7f}").as_deref(), Some("b"));
        assert_eq!(successor("é"), None);
    }

    #[test]
    fn shortest_unique_prefix() {
        let p = Prefixes::new(vec![
            "aaaaaaaa1111-0000-0000".into(),
            "aaaaaaaa1122-0000-0000".into(),
            "bbbbbbbbbbbb-0000-0000".into(),
            "short".into(),
        ]);
        assert_eq!(p.short("aaaaaaaa1111-0000-0000"), "aaaaaaaa111");
        assert_eq!(p.short("aaaaaaaa1122-0000-0000"), "aaaaaaaa112");
        assert_eq!(p.short("bbbbbbbbbbbb-0000-0000"), "bbbbbbbb");
        assert_eq!(p.short("short"), "short");
    }

    /// goose's IDs are shown whole: no prefix reads as another session or a date.
    #[test]
    fn short_ids_are_shown_whole() {
        let p = Prefixes::new(vec![
            "20261013_110320".into(),
            "20261013_110321".into(),
            "20261128_1".into(),
            "20261128_10".into(),
            "0d7c253c-8993-44d3-a4a5-e08727579a33".into(),
        ]);
        assert_eq!(p.short("20261013_110320"), "20261013_110320");
        assert_eq!(p.short("20261128_1"), "20261128_1");
        assert_eq!(p.short("20261128_10"), "20261128_10");
        assert_eq!(p.short("0d7c253c-8993-44d3-a4a5-e08727579a33"), "0d7c253c");
    }
}

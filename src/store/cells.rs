//! Reading listing columns leniently, the same way for every store: a bad cell is reported on
//! its conversation's row instead of failing the whole listing.

use rusqlite::types::ValueRef;
use rusqlite::Row;

/// A text column read leniently: invalid UTF-8 (which a Go writer can store) becomes U+FFFD;
/// BLOBs are read the same way and numbers become their text.
pub(crate) fn lossy(r: &Row<'_>, i: usize) -> rusqlite::Result<Option<String>> {
    Ok(match r.get_ref(i)? {
        ValueRef::Null => None,
        ValueRef::Text(b) | ValueRef::Blob(b) => Some(String::from_utf8_lossy(b).into_owned()),
        ValueRef::Integer(n) => Some(n.to_string()),
        ValueRef::Real(f) => Some(f.to_string()),
    })
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

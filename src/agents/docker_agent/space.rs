//! docker-agent's tables by kind of bytes, for `stats` (docs/stores.md, "docker-agent").

use crate::error::{Result, SqlContext};
use crate::store::conversation::Read;
use crate::store::schema_util::columns;
use crate::store::schema_util::has_table;
use crate::store::space::{octets, top_of, Category, SpaceMap};

pub(super) fn map(read: &Read<'_>) -> Result<SpaceMap> {
    let mut tables = vec![
        ("session_items", Category::Live),
        // Images and files the agent generated, kept per session.
        ("generated_media_blobs", Category::AgentData),
        ("generated_media_manifest", Category::AgentData),
    ];
    let mut top = Vec::new();
    if columns(read.conn, "sessions", read.path)?.contains("messages") {
        // The oldest layout keeps the history in `sessions.messages`.
        tables.push(("sessions", Category::Live));
        top.push(format!(
            "SELECT id, {} AS bytes FROM sessions",
            octets(&["messages"])
        ));
    }
    if has_table(read.conn, "session_items").at(read.path)? {
        top.push(format!(
            "SELECT session_id AS id, {} AS bytes FROM session_items",
            octets(&["message_json", "summary_text"])
        ));
    }
    Ok(SpaceMap {
        tables,
        within: Vec::new(),
        notes: vec![(
            Category::Hidden,
            "docker-agent keeps the items before a summary as ordinary rows: counted in live history",
        )],
        top: (!top.is_empty()).then(|| top_of(&top)),
    })
}

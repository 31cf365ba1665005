//! opencode 1.x's tables by kind of bytes, for `stats` (docs/stores.md, "opencode").

use crate::error::{Result, SqlContext};
use crate::store::conversation::Read;
use crate::store::schema_util::has_table;
use crate::store::space::{top_of, Category, SpaceMap};

pub(super) fn map(read: &Read<'_>) -> Result<SpaceMap> {
    let mut top = vec![
        "SELECT session_id AS id, octet_length(data) AS bytes FROM message".to_string(),
        "SELECT session_id AS id, octet_length(data) AS bytes FROM part".to_string(),
    ];
    // Session events are keyed by the session id (`aggregate_id`).
    if has_table(read.conn, "event").at(read.path)? {
        top.push("SELECT aggregate_id AS id, octet_length(data) AS bytes FROM event".into());
    }
    Ok(SpaceMap {
        tables: vec![
            ("message", Category::Live),
            ("part", Category::Live),
            // The sync event log: a snapshot of every update of a session, message and part.
            ("event", Category::AgentData),
            ("event_sequence", Category::AgentData),
        ],
        within: Vec::new(),
        notes: vec![(
            Category::Hidden,
            "opencode keeps what a compaction hid as ordinary message and part rows: counted in live history",
        )],
        top: Some(top_of(&top)),
    })
}

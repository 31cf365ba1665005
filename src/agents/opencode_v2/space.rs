//! opencode 2.x's tables by kind of bytes, for `stats` (docs/stores.md, "opencode 2.x").

use crate::error::Result;
use crate::store::conversation::Read;
use crate::store::space::{top_of, Category, SpaceMap};

pub(super) fn map(_read: &Read<'_>) -> Result<SpaceMap> {
    Ok(SpaceMap {
        tables: vec![
            ("session_message", Category::Live),
            ("event", Category::AgentData),
            ("event_sequence", Category::AgentData),
        ],
        within: Vec::new(),
        notes: vec![(
            Category::Hidden,
            "opencode 2.x keeps the rows before a checkpoint as ordinary session_message rows: counted in live history",
        )],
        top: Some(top_of(&[
            "SELECT session_id AS id, octet_length(data) AS bytes FROM session_message".into(),
            "SELECT aggregate_id AS id, octet_length(data) AS bytes FROM event".into(),
        ])),
    })
}

//! kodelet's tables by kind of bytes, for `stats` (docs/stores.md, "kodelet").

use crate::error::Result;
use crate::store::conversation::Read;
use crate::store::schema_util::columns;
use crate::store::space::{octets, Category, SpaceMap, Within};

pub(super) fn map(read: &Read<'_>) -> Result<SpaceMap> {
    let cols = columns(read.conn, "conversations", read.path)?;
    let history = cols.contains("compaction_history");
    let mut counted = vec!["raw_messages", "tool_results"];
    let mut map = SpaceMap {
        tables: vec![
            ("conversations", Category::Live),
            // The ACP UI's replay log, and the images tool results point at.
            ("acp_session_updates", Category::AgentData),
            ("image_artifacts", Category::AgentData),
            ("conversation_artifacts", Category::AgentData),
            // The conversation search index kodelet rebuilds from the conversations.
            ("conversation_search_entries", Category::AgentData),
            ("conversation_search_state", Category::AgentData),
        ],
        ..SpaceMap::default()
    };
    if history {
        counted.push("compaction_history");
        map.within.push(Within {
            category: Category::Hidden,
            table: "conversations",
            label: "conversations.compaction_history".into(),
            sql: "SELECT COALESCE(SUM(octet_length(compaction_history)), 0) FROM conversations"
                .into(),
        });
    } else {
        map.notes.push((
            Category::Hidden,
            "kodelet keeps no compaction history in a file of this schema",
        ));
    }
    map.top = Some(format!(
        "SELECT id, {} FROM conversations ORDER BY 2 DESC, 1 LIMIT ?1",
        octets(&counted)
    ));
    Ok(map)
}

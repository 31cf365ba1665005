//! Crush's tables by kind of bytes, for `stats` (docs/stores.md, "Crush").

use crate::error::Result;
use crate::store::conversation::Read;
use crate::store::space::{Category, SpaceMap, Within};

use super::schema::check_schema;

pub(super) fn map(read: &Read<'_>) -> Result<SpaceMap> {
    let schema = check_schema(read.conn, read.path)?;
    let mut within = Vec::new();
    let mut notes = Vec::new();
    if schema.session_has("summary_message_id") {
        // Crush loads a summarized session from its summary message on (`ORDER BY created_at`,
        // ties in rowid order, as agent-db's loader reads it): the messages before it stay in
        // the file for Crush's display but are no longer sent.
        within.push(Within {
            category: Category::Hidden,
            table: "messages",
            label: "messages (before the summary message)".into(),
            sql: "WITH ordered AS (SELECT session_id, id, coalesce(octet_length(parts), 0) AS bytes, \
                  ROW_NUMBER() OVER (PARTITION BY session_id ORDER BY created_at, rowid) AS pos \
                  FROM messages) \
                  SELECT COALESCE(SUM(o.bytes), 0) FROM ordered o \
                  JOIN sessions s ON s.id = o.session_id \
                  JOIN ordered summary ON summary.session_id = o.session_id \
                  AND summary.id = s.summary_message_id AND s.summary_message_id != '' \
                  WHERE o.pos < summary.pos"
                .into(),
        });
    } else {
        notes.push((
            Category::Hidden,
            "Crush keeps no summary pointer in a file of this schema (before 20250515105448_add_summary_message_id)",
        ));
    }
    Ok(SpaceMap {
        tables: vec![
            ("sessions", Category::Live),
            ("messages", Category::Live),
            // The versions of each file the agent edited, and the files it read in a session.
            ("files", Category::AgentData),
            ("read_files", Category::AgentData),
        ],
        within,
        notes,
        top: Some(
            "SELECT session_id, SUM(coalesce(octet_length(parts), 0)) FROM messages \
             GROUP BY session_id ORDER BY 2 DESC, 1 LIMIT ?1"
                .into(),
        ),
    })
}

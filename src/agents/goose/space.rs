//! goose's tables by kind of bytes, for `stats` (docs/stores.md, "goose").

use crate::error::Result;
use crate::store::conversation::Read;
use crate::store::space::{octets, Category, SpaceMap, Within};

pub(super) fn map(_read: &Read<'_>) -> Result<SpaceMap> {
    let row = octets(&["content_json", "metadata_json"]);
    Ok(SpaceMap {
        tables: vec![
            ("messages", Category::Live),
            // Token accounting per request, and the providers' model lists goose caches.
            ("usage_ledger", Category::AgentData),
            ("provider_inventory_entries", Category::AgentData),
            ("provider_inventory_models", Category::AgentData),
        ],
        // The rows a compaction hid from the model (`agentVisible: false`), which goose's UI
        // still shows.
        within: vec![Within {
            category: Category::Hidden,
            table: "messages",
            label: "messages (agentVisible false)".into(),
            sql: format!(
                "SELECT COALESCE(SUM({row}), 0) FROM messages WHERE json_valid(metadata_json) \
                 AND json_extract(metadata_json, '$.agentVisible') = 0"
            ),
        }],
        notes: Vec::new(),
        top: Some(format!(
            "SELECT session_id, SUM({row}) FROM messages GROUP BY session_id ORDER BY 2 DESC, 1 LIMIT ?1"
        )),
    })
}

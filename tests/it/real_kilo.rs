//! The real Kilo CLI (`@kilocode/cli-linux-x64` 7.7.9 from npm, installed under
//! `target/real-agents` by the first test that needs it: `real_agents.rs`) against agent-db's
//! compactions of its `kilo.db`, through the harness of `real_opencode.rs` (Kilo is an opencode
//! fork: the same server routes, configuration layout and store tables, under `KILO_*` names
//! and `kilo/kilo.json`, `kilo/kilo.db`).
//!
//! Kilo talks to the loopback model server of that harness, which records every request: what
//! the model is sent is the oracle. Skipped with a message where the binary cannot be had,
//! failing when `CI` is set.

use crate::real_agents::KILO;
use crate::real_opencode::{
    continues_sessions_agent_db_compacted_and_restored, own_compaction_and_agent_db_fields,
};

/// Sessions built through `kilo serve`, compacted by agent-db (extractive, prune, one twice),
/// continued by Kilo (the model is sent the summary and the kept tail, none of the summarized
/// turns), restored (the original history is sent again) and continued again.
#[test]
fn real_kilo_continues_sessions_agent_db_compacted_and_restored() {
    continues_sessions_agent_db_compacted_and_restored(&KILO);
}

/// Kilo's own compaction (`POST /session/{id}/summarize`) and agent-db's, compared field by
/// field, and each read back by agent-db: they agree on every compared field; the one difference
/// docs/stores.md names (Kilo appends `event` rows, agent-db none) is asserted as such.
#[test]
fn real_kilo_own_compaction_and_agent_db_write_the_same_fields() {
    let Some(differ) = own_compaction_and_agent_db_fields(&KILO) else {
        return;
    };
    assert!(
        differ.is_empty(),
        "{} field(s) differ between Kilo's own compaction and agent-db's:\n{}",
        differ.len(),
        differ.join("\n")
    );
}

//! Fault injection for the tests of the failure boundaries: `AGENT_DB_FAILPOINT=STAGE:ID` makes
//! agent-db panic at that stage of that one conversation (`plan`, `strategy` or `write`), as a
//! bug in agent-db or in a dependency would. The tests use it to prove that such a panic stays
//! that conversation's failure. Unset (always, outside those tests) it does nothing but read one
//! environment variable once.

use std::sync::OnceLock;

fn armed() -> Option<&'static str> {
    static SPEC: OnceLock<Option<String>> = OnceLock::new();
    SPEC.get_or_init(|| {
        std::env::var("AGENT_DB_FAILPOINT")
            .ok()
            .filter(|s| !s.is_empty())
    })
    .as_deref()
}

/// Panic when the failpoint `stage:id` is armed.
pub fn hit(stage: &str, id: &str) {
    if let Some(spec) = armed() {
        if spec.split_once(':') == Some((stage, id)) {
            panic!("failpoint {stage} hit for conversation {id}");
        }
    }
}

//! Fault injection for the tests of the failure boundaries: `AGENT_DB_FAILPOINT=STAGE:ID` makes
//! agent-db panic at that stage of that one conversation (`plan`, `strategy` or `write`), as a
//! bug in agent-db or in a dependency would. The tests use it to prove that such a panic stays
//! that conversation's failure.
//!
//! It exists only in a build with the cargo feature `failpoints`, which `cargo test` turns on
//! (agent-db's dev-dependency on itself) and a release build (`cargo build --release`,
//! `cargo install`) does not: there [`hit`] is an empty inline function and the variable is
//! never read. A binary built with it says so in `agent-db --version`.

#[cfg(feature = "failpoints")]
fn armed() -> Option<&'static str> {
    use std::sync::OnceLock;
    static SPEC: OnceLock<Option<String>> = OnceLock::new();
    SPEC.get_or_init(|| {
        std::env::var("AGENT_DB_FAILPOINT")
            .ok()
            .filter(|s| !s.is_empty())
    })
    .as_deref()
}

/// Panic when the failpoint `stage:id` is armed.
#[cfg(feature = "failpoints")]
pub fn hit(stage: &str, id: &str) {
    if let Some(spec) = armed() {
        if spec.split_once(':') == Some((stage, id)) {
            panic!("failpoint {stage} hit for conversation {id}");
        }
    }
}

/// Without the `failpoints` feature: nothing.
#[cfg(not(feature = "failpoints"))]
#[inline(always)]
pub fn hit(_stage: &str, _id: &str) {}

/// Stop the process at once, as `kill -9` would (no unwinding, nothing flushed by agent-db), when
/// the failpoint `stage:id` is armed: the crash tests of `retire` and `restore`.
#[cfg(feature = "failpoints")]
pub fn crash(stage: &str, id: &str) {
    if let Some(spec) = armed() {
        if spec.split_once(':') == Some((stage, id)) {
            std::process::abort();
        }
    }
}

/// Without the `failpoints` feature: nothing.
#[cfg(not(feature = "failpoints"))]
#[inline(always)]
pub fn crash(_stage: &str, _id: &str) {}

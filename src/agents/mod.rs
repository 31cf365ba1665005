//! Each agent's store format, one folder per agent: its schema check, reading, codecs and typed
//! write, behind the [`crate::store::kind::Adapter`] trait. Registering an agent is its folder
//! and its one `pub mod` line here; the folder's `mod.rs` adds its `KIND` to
//! [`crate::store::kind::KINDS`] with its detection rank. Folders import the store file's
//! machinery (`crate::store`), never each other, except the shared
//! [`opencode_family`].

pub mod crush;
pub mod docker_agent;
pub mod goose;
pub mod kilo;
pub mod kodelet;
pub mod opencode;
pub mod opencode_family;
pub mod opencode_v2;

use std::path::Path;

use crate::error::Result;

/// `agent-db init`: a new, empty store at `path` in the layout agent-db's demos and tests use
/// (kodelet's); returns that agent's name. The binary names no store kind itself.
pub fn init_store(path: &Path) -> Result<&'static str> {
    kodelet::init_store(path)?;
    Ok(kodelet::KIND.name())
}

#[cfg(test)]
mod tests {
    use std::path::{Path, PathBuf};

    use crate::error::Error;
    use crate::store::kind::KINDS;
    use crate::store::locate::ambiguous;
    use crate::store::open::unknown_schema;
    use crate::store::StoreKind;

    /// The messages built from the registry read as they did when they named both kinds.
    #[test]
    fn registry_messages_read_as_before() {
        let found = [
            (
                super::kodelet::KIND,
                PathBuf::from("/h/.kodelet/storage.db"),
            ),
            (
                super::docker_agent::KIND,
                PathBuf::from("/h/.cagent/session.db"),
            ),
        ];
        let Error::AmbiguousStore { detail, .. } = ambiguous(&found) else {
            panic!("not an ambiguity error")
        };
        assert_eq!(
            detail,
            "two conversation stores found: /h/.kodelet/storage.db (kodelet) and /h/.cagent/session.db (docker-agent); \
             choose one with --agent kodelet or --agent docker-agent (or --db PATH, or `agent = \"kodelet\"` under [store] \
             in the config file)"
        );
        let Error::UnknownSchema { detail, .. } =
            unknown_schema(Path::new("x.db"), &["notes".to_string()])
        else {
            panic!("not an unknown-schema error")
        };
        assert_eq!(
            detail,
            "expected kodelet's conversations, conversation_summaries and schema_migrations tables, \
             docker-agent's sessions, session_items and migrations tables, \
             goose's sessions, messages and schema_version tables, \
             opencode's session_v2, session_message and migration tables, \
             kilo's session, message, part and kilo_board tables, \
             opencode's session, message and part tables, \
             or crush's sessions, messages, files and goose_db_version tables; found: notes"
        );
    }

    #[test]
    fn every_kind_parses_by_its_name_and_detects_by_its_tables() {
        let names: Vec<&str> = StoreKind::all().map(StoreKind::name).collect();
        assert_eq!(
            names,
            [
                "kodelet",
                "docker-agent",
                "goose",
                "opencode",
                "kilo",
                "crush"
            ]
        );
        for &k in KINDS.iter() {
            assert_eq!(StoreKind::parse(k.name()), Some(k));
            let tables: Vec<String> = k
                .adapter()
                .signature_tables()
                .iter()
                .map(|t| t.to_string())
                .collect();
            assert_eq!(StoreKind::detect(&tables), Some(k));
            assert_eq!(StoreKind::detect(&tables[1..]), None);
        }
        assert_eq!(StoreKind::parse("pi"), None);
        assert_eq!(StoreKind::parse("cagent"), Some(super::docker_agent::KIND));
        // opencode's two forms answer to one name; a file upgraded from 1.x to 2.x (both table
        // sets) is read from its live 2.x tables.
        assert_eq!(KINDS.len(), names.len() + 1);
        let upgraded: Vec<String> = [
            "session",
            "message",
            "part",
            "session_v2",
            "session_message",
            "migration",
        ]
        .map(String::from)
        .to_vec();
        let kind = StoreKind::detect(&upgraded).unwrap();
        assert_eq!(kind.adapter().signature_tables()[0], "session_v2");
        let v1 = StoreKind::detect(&upgraded[..3]).unwrap();
        assert_eq!(v1.adapter().signature_tables()[0], "session");
        assert!(super::kodelet::KIND.rewrites_history());
        assert!(!super::docker_agent::KIND.rewrites_history());
    }

    /// The registry is every agent's folder, in the detection order of their ranks: kodelet,
    /// docker-agent, goose, opencode 2.x, Kilo, then opencode 1.x (whose tables an upgraded 2.x
    /// file and a Kilo file also have), then Crush, each rank once.
    #[test]
    fn the_registry_is_in_detection_order() {
        let order: Vec<(&str, &str)> = KINDS
            .iter()
            .map(|k| (k.name(), k.adapter().signature_tables()[0]))
            .collect();
        assert_eq!(
            order,
            [
                ("kodelet", "conversations"),
                ("docker-agent", "sessions"),
                ("goose", "sessions"),
                ("opencode", "session_v2"),
                ("kilo", "session"),
                ("opencode", "session"),
                ("crush", "sessions"),
            ]
        );
        let mut ranks: Vec<u32> = KINDS.iter().map(|k| k.rank()).collect();
        ranks.dedup();
        assert_eq!(ranks.len(), KINDS.len(), "two kinds share a rank");
    }
}

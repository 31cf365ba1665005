//! Kilo CLI's `kilo.db` (docs/stores.md, "Kilo"). Kilo (Kilo-Org/kilocode) is an opencode fork
//! whose store is opencode 1.x's (`session`, `message`, `part`, read and compacted by the same
//! rules), so every read and write is the shared one ([`super::opencode_family::Family`]); what
//! is Kilo's own is here: its name, its files (`~/.local/share/kilo/kilo.db`, `KILO_DB`,
//! `kilo-<channel>.db`), its tables (`kilo_board`, which identifies the file), and its
//! migrations after opencode's, known by name.

use super::opencode_family::{Family, Flavor};
use crate::store::StoreKind;

/// The newest of opencode's migrations a Kilo file records (Kilo 7.7.9 records every opencode
/// 1.18.33 migration, then its own).
pub const UPSTREAM_NEWEST: &str = "20260622202450_simplify_session_input";

/// Kilo's own migrations after opencode's, oldest first: what the released Kilo 7.7.9 records,
/// and `recall-part-index` (Kilo-Org/kilocode's migration list; it adds only the
/// `recall_part_search_idx` index on `part`, which a 7.7.9 file has).
pub const OWN_MIGRATIONS: &[&str] = &[
    "20260714141136_session-message-legacy-writer-compat",
    "20260731102142_recall-part-index",
    "20260828074139_kilocode_board",
    "20260903104806_kilocode_board_reset",
    "20260907102000_kilocode_model_usage_index",
];

/// The migrations Kilo's files carry.
pub static FLAVOR: Flavor = Flavor {
    agent: "Kilo",
    upstream_newest: UPSTREAM_NEWEST,
    own: OWN_MIGRATIONS,
};

/// Kilo's adapter: opencode's, with Kilo's names and files.
pub static ADAPTER: Family = Family {
    name: "kilo",
    app: "kilo",
    flavor: &FLAVOR,
    // `kilo_board` last: a file with only opencode's tables is opencode's.
    signature: &["session", "message", "part", "kilo_board"],
    db_env: "KILO_DB",
    default_path_doc: "kilo: $KILO_DB or ~/.local/share/kilo/kilo.db",
    version_name,
    // docs/stores.md, "Kilo".
    events_refused: Some(
        "which of Kilo's features read its event log back is not established from Kilo's source",
    ),
};

/// The Kilo store kind.
pub const KIND: StoreKind = StoreKind::new(&ADAPTER, 45);

/// Registered before opencode 1.x (50): a Kilo file has all of opencode's tables.
#[linkme::distributed_slice(crate::store::kind::REGISTERED)]
static REGISTER: StoreKind = KIND;

/// A Kilo file's newest migration as the Kilo release that writes it.
fn version_name(newest: &str) -> String {
    match newest {
        "20260907102000_kilocode_model_usage_index" => "Kilo 7.7.9".to_string(),
        _ => format!("Kilo (newest migration {newest})"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kilo_knows_its_migrations_by_name_after_opencodes() {
        assert_eq!(
            FLAVOR.newest_known(),
            "20260907102000_kilocode_model_usage_index"
        );
        let mut sorted = OWN_MIGRATIONS.to_vec();
        sorted.sort();
        assert_eq!(sorted, OWN_MIGRATIONS);
        assert!(OWN_MIGRATIONS.iter().all(|m| *m > UPSTREAM_NEWEST));
    }
}

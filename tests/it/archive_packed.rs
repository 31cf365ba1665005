//! The packed pre-image (migration 0002): kodelet's `raw_messages` and `tool_results` are
//! archived zstd-compressed from the copy agent-db loaded, once the version check proved them
//! current.
//!
//! The oracle is the test's own SQL plus libzstd (the `zstd` crate) to read the archive, and
//! `typeof()`/`hex()` of every cell before the compaction and after the restore:
//! - the archive holds exactly the original bytes, with their storage class, and smaller;
//! - restore gives back every cell byte for byte, a BLOB history included;
//! - an archive written before packing (migration 0001 only) still restores, and its tables are
//!   upgraded;
//! - tables a newer agent-db made are refused with exit 4 and nothing changes;
//! - a damaged packed value fails the restore and nothing changes.

use rusqlite::Connection;

use crate::common::{json, Env};

/// Every cell of `conversations` as (typeof, hex), by id.
fn conversation_cells(env: &Env) -> Vec<Vec<String>> {
    let c = env.conn();
    let cols: Vec<String> = {
        let mut s = c
            .prepare("SELECT name FROM pragma_table_info('conversations') ORDER BY cid")
            .unwrap();
        let rows = s.query_map([], |r| r.get(0)).unwrap();
        rows.map(|r| r.unwrap()).collect()
    };
    let select: Vec<String> = cols
        .iter()
        .map(|c| format!("typeof(\"{c}\") || ':' || COALESCE(hex(\"{c}\"), '')"))
        .collect();
    let mut s = c
        .prepare(&format!(
            "SELECT {} FROM conversations ORDER BY id",
            select.join(", ")
        ))
        .unwrap();
    let n = cols.len();
    let rows = s
        .query_map([], |r| (0..n).map(|i| r.get(i)).collect())
        .unwrap();
    rows.map(|r| r.unwrap()).collect()
}

/// A generated store with one history stored as a BLOB (kodelet writes TEXT; SQLite keeps
/// whatever it is given), and that conversation's id.
fn store_with_a_blob_history() -> (Env, String) {
    let env = Env::generated(6, 41, &[]);
    let id: String = env
        .conn()
        .query_row(
            "SELECT id FROM conversations WHERE json_extract(usage, '$.maxContextWindow') > 0
             ORDER BY length(raw_messages) DESC LIMIT 1",
            [],
            |r| r.get(0),
        )
        .unwrap();
    env.conn()
        .execute(
            "UPDATE conversations SET raw_messages = CAST(raw_messages AS BLOB) WHERE id = ?1",
            [&id],
        )
        .unwrap();
    (env, id)
}

/// `restore --all-since 1h`, which must succeed.
fn restore_all(env: &Env) {
    let out = env
        .cmd()
        .args(["restore", "--all-since", "1h"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
}

fn compact(env: &Env) -> serde_json::Value {
    let mut c = env.cmd();
    c.args([
        "compact",
        "--all-over",
        "0",
        "--idle",
        "0",
        "--keep-tokens",
        "1500",
        "--yes",
        "--json",
    ]);
    let (doc, code) = json(c);
    assert_eq!(code, 0, "{doc}");
    doc
}

/// (compaction id, row key, encoding, packed, column) of every packed archive row.
type PackedRow = (i64, String, String, Vec<u8>, String);

fn packed_rows(c: &Connection) -> Vec<PackedRow> {
    let mut s = c
        .prepare(
            "SELECT compaction_id, CAST(row_key AS TEXT), encoding, packed, column_name FROM agent_db_archive
             WHERE encoding IS NOT NULL ORDER BY compaction_id, seq",
        )
        .unwrap();
    let rows = s
        .query_map([], |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?))
        })
        .unwrap();
    rows.map(|r| r.unwrap()).collect()
}

#[test]
fn the_history_is_archived_packed_and_restores_with_its_storage_class() {
    let (env, blob_id) = store_with_a_blob_history();
    let before = conversation_cells(&env);
    // (id, column) -> (typeof, bytes) of the two cells agent-db archives packed.
    let originals: std::collections::BTreeMap<(String, String), (String, Vec<u8>)> = {
        let c = env.conn();
        let mut s = c
            .prepare(
                "SELECT id, 'raw_messages', typeof(raw_messages), CAST(raw_messages AS BLOB) FROM conversations
                 UNION ALL
                 SELECT id, 'tool_results', typeof(tool_results), CAST(tool_results AS BLOB) FROM conversations",
            )
            .unwrap();
        let rows = s
            .query_map([], |r| {
                Ok((
                    (r.get(0)?, r.get(1)?),
                    (
                        r.get(2)?,
                        r.get::<_, Option<Vec<u8>>>(3)?.unwrap_or_default(),
                    ),
                ))
            })
            .unwrap();
        rows.map(|r| r.unwrap()).collect()
    };
    let doc = compact(&env);
    let compacted = crate::common::ids_with_status(&doc, "compacted");
    assert!(compacted.contains(&blob_id), "{doc}");

    let c = env.conn();
    let packed = packed_rows(&c);
    let histories = packed.iter().filter(|p| p.4 == "raw_messages").count();
    assert_eq!(histories, compacted.len(), "one packed history each");
    assert!(
        packed.iter().any(|p| p.4 == "tool_results"),
        "the generated tool results are archived packed too"
    );
    for (compaction, key, encoding, bytes, column) in &packed {
        let (class, original) = &originals[&(key.clone(), column.clone())];
        let value: Option<Vec<u8>> = c
            .query_row(
                "SELECT value FROM agent_db_archive WHERE compaction_id = ?1 AND column_name = ?2",
                rusqlite::params![compaction, column],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(value, None, "{key} {column}");
        assert_eq!(encoding, &format!("zstd-{class}"), "{key} {column}");
        let unpacked = zstd::stream::decode_all(&bytes[..]).expect("a zstd frame");
        assert!(
            &unpacked == original,
            "{key} {column}: the archive holds other bytes"
        );
        assert!(
            bytes.len() * 2 < original.len(),
            "{key} {column}: {} packed bytes for {}",
            bytes.len(),
            original.len()
        );
    }
    drop(c);

    restore_all(&env);
    assert_eq!(conversation_cells(&env), before);
    let class: String = env
        .conn()
        .query_row(
            "SELECT typeof(raw_messages) FROM conversations WHERE id = ?1",
            [&blob_id],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(class, "blob");
}

#[test]
fn an_archive_written_before_packing_still_restores() {
    let env = Env::generated(5, 42, &[]);
    let before = conversation_cells(&env);
    compact(&env);
    // Turn the archive into what agent-db wrote before migration 0002: the value itself in
    // `value`, no `encoding`/`packed` columns, migration 1 only (so no later migration either:
    // 0003's retention column and 0004's retirements table go too).
    let c = env.conn();
    for (compaction, _, encoding, bytes, column) in packed_rows(&c) {
        let plain = zstd::stream::decode_all(&bytes[..]).unwrap();
        let cast = if encoding == "zstd-blob" {
            "?1"
        } else {
            "CAST(?1 AS TEXT)"
        };
        c.execute(
            &format!(
                "UPDATE agent_db_archive SET value = {cast} WHERE compaction_id = ?2 AND column_name = ?3"
            ),
            rusqlite::params![plain, compaction, column],
        )
        .unwrap();
    }
    c.execute_batch(
        "ALTER TABLE agent_db_archive DROP COLUMN encoding;
         ALTER TABLE agent_db_archive DROP COLUMN packed;
         ALTER TABLE agent_db_compactions DROP COLUMN retention;
         DROP TABLE agent_db_retirements;
         DELETE FROM agent_db_migrations WHERE version >= 2;",
    )
    .unwrap();
    let plain_bytes: i64 = c
        .query_row(
            "SELECT SUM(LENGTH(CAST(value AS BLOB))) FROM agent_db_archive",
            [],
            |r| r.get(0),
        )
        .unwrap();
    drop(c);

    // A read-only command reads the old tables as they are.
    let (stats, code) = json({
        let mut c = env.cmd();
        c.args(["stats", "--json"]);
        c
    });
    assert_eq!(code, 0, "{stats}");
    assert_eq!(stats["archive"]["archive_bytes"], plain_bytes, "{stats}");

    restore_all(&env);
    assert_eq!(conversation_cells(&env), before);
    let latest: i64 = env
        .conn()
        .query_row("SELECT MAX(version) FROM agent_db_migrations", [], |r| {
            r.get(0)
        })
        .unwrap();
    // The newest migration is the highest-numbered file in migrations/.
    let newest = std::fs::read_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/migrations"))
        .unwrap()
        .filter_map(|e| {
            let name = e.unwrap().file_name().to_string_lossy().to_string();
            name.split('_').next()?.parse::<i64>().ok()
        })
        .max()
        .unwrap();
    assert!(newest >= 2);
    assert_eq!(latest, newest, "restore upgrades agent-db's tables");
}

#[test]
fn tables_from_a_newer_agent_db_are_refused() {
    let env = Env::generated(5, 43, &[]);
    compact(&env);
    env.conn()
        .execute(
            "INSERT INTO agent_db_migrations(version, name, applied_at) VALUES (99, 'future', '2030-01-01T00:00:00Z')",
            [],
        )
        .unwrap();
    env.conn()
        .query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))
        .unwrap();
    let hash = env.files_hash();
    for args in [
        vec!["compact", "--all-over", "0", "--idle", "0", "--yes"],
        vec!["restore", "--all-since", "1h"],
    ] {
        let out = env.cmd().args(&args).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.contains("newer than this agent-db knows"),
            "{args:?}: {stderr}"
        );
        assert_eq!(out.status.code(), Some(4), "{args:?}: {stderr}");
        assert_eq!(env.files_hash(), hash, "{args:?} changed the store");
    }
}

#[test]
fn a_damaged_packed_value_fails_the_restore_and_changes_nothing() {
    let env = Env::generated(4, 44, &[]);
    compact(&env);
    env.conn()
        .execute(
            "UPDATE agent_db_archive SET packed = X'28B52FFD00' WHERE encoding IS NOT NULL",
            [],
        )
        .unwrap();
    env.conn()
        .query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))
        .unwrap();
    let hash = env.files_hash();
    let out = env
        .cmd()
        .args(["restore", "--all-since", "1h"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(4), "{stderr}");
    assert!(stderr.contains("does not decompress"), "{stderr}");
    assert_eq!(env.files_hash(), hash);
}

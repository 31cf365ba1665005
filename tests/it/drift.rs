//! The drift check: `fixtures/upstream/<agent>.toml` records, per agent, the upstream
//! migrations agent-db knows (names, the commit each was read at) and the loading facts it
//! relies on. This test holds the code's known-migration lists and docs/stores.md's support
//! table to those files, so re-reading upstream means editing one file and rerunning
//! `cargo test --test it drift::`.

use std::path::PathBuf;

use toml::Value;

fn upstream(name: &str) -> Value {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures/upstream")
        .join(format!("{name}.toml"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path:?}: {e}"));
    toml::from_str(&text).unwrap_or_else(|e| panic!("{path:?}: {e}"))
}

fn s<'a>(v: &'a Value, key: &str) -> &'a str {
    v.get(key)
        .and_then(Value::as_str)
        .unwrap_or_else(|| panic!("missing {key}"))
}

fn stores_md() -> String {
    std::fs::read_to_string(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("docs/stores.md"))
        .unwrap()
}

/// The support table's row whose first cell is `label`.
fn support_row(docs: &str, label: &str) -> String {
    let table = docs
        .split("## Supported versions")
        .nth(1)
        .expect("docs/stores.md has a Supported versions section");
    table
        .lines()
        .take_while(|l| !l.starts_with("## "))
        .find(|l| l.split('|').nth(1).map(str::trim) == Some(label))
        .unwrap_or_else(|| panic!("no support-table row for {label}"))
        .to_string()
}

/// Every loader fact names a source file and a commit.
fn check_facts(v: &Value) {
    for f in v
        .get("loader")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        assert!(
            !s(f, "fact").is_empty() && !s(f, "source").is_empty() && !s(f, "commit").is_empty()
        );
    }
}

#[test]
fn kodelet_migrations_equal_the_upstream_record() {
    let v = upstream("kodelet");
    let file: Vec<(i64, String)> = v["migrations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            let name = s(m, "name");
            assert!(!s(m, "commit").is_empty(), "{name}: no commit");
            let (version, rest) = name.split_once('_').unwrap();
            (version.parse().unwrap(), rest.to_string())
        })
        .collect();
    let code: Vec<(i64, String)> = agent_db::agents::kodelet::KNOWN_MIGRATIONS
        .iter()
        .map(|(v, n)| (*v, n.to_string()))
        .collect();
    assert_eq!(code, file);
    assert_eq!(
        s(&v, "newest"),
        agent_db::agents::kodelet::NEWEST_KNOWN.to_string()
    );
    check_facts(&v);
    // docs/stores.md names every migration after the first eight `init` records.
    let docs = stores_md();
    let kodelet = docs
        .split("\n## kodelet")
        .nth(1)
        .unwrap()
        .split("\n## ")
        .next()
        .unwrap();
    for (version, name) in file.iter().skip(8) {
        assert!(
            kodelet.contains(&version.to_string()),
            "docs/stores.md misses kodelet {version}_{name}"
        );
    }
}

#[test]
fn docker_agent_migrations_equal_the_upstream_record() {
    let v = upstream("docker-agent");
    let file: Vec<(i64, String)> = v["migrations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| (m["id"].as_integer().unwrap(), s(m, "name").to_string()))
        .collect();
    let code: Vec<(i64, String)> = agent_db::agents::docker_agent::KNOWN_MIGRATIONS
        .iter()
        .map(|(i, n)| (*i, n.to_string()))
        .collect();
    assert_eq!(code, file);
    assert_eq!(s(&v, "newest"), file.last().unwrap().1);
    check_facts(&v);
}

#[test]
fn goose_versions_equal_the_upstream_record() {
    let v = upstream("goose");
    let file: Vec<i64> = v["versions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_integer().unwrap())
        .collect();
    let code: Vec<i64> = (1..=agent_db::agents::goose::NEWEST_KNOWN).collect();
    assert_eq!(code, file);
    assert_eq!(
        s(&v, "newest"),
        agent_db::agents::goose::NEWEST_KNOWN.to_string()
    );
    check_facts(&v);
}

#[test]
fn opencode_migrations_equal_the_upstream_record() {
    let v1 = upstream("opencode");
    assert_eq!(s(&v1, "newest"), agent_db::agents::opencode::NEWEST_KNOWN);
    let v2 = upstream("opencode-v2");
    assert_eq!(s(&v2, "first"), agent_db::agents::opencode_v2::FIRST);
    assert_eq!(
        s(&v2, "newest"),
        agent_db::agents::opencode_v2::NEWEST_KNOWN
    );
    check_facts(&v2);
}

#[test]
fn kilo_migrations_equal_the_upstream_record() {
    let v = upstream("kilo");
    assert_eq!(
        s(&v, "upstream_newest"),
        agent_db::agents::kilo::UPSTREAM_NEWEST
    );
    let own: Vec<&str> = v
        .get("own")
        .and_then(Value::as_array)
        .expect("own")
        .iter()
        .map(|m| m.as_str().expect("a name"))
        .collect();
    assert_eq!(own, agent_db::agents::kilo::OWN_MIGRATIONS);
    assert_eq!(own.last().copied(), Some(s(&v, "newest")));
    check_facts(&v);
}

/// docs/stores.md's support table names, for each agent, the newest migration agent-db knows
/// and the commit (or release) it was read at, as recorded upstream.
#[test]
fn the_support_table_follows_the_upstream_records() {
    let docs = stores_md();
    for name in [
        "kodelet",
        "docker-agent",
        "goose",
        "opencode",
        "opencode-v2",
        "kilo",
    ] {
        let v = upstream(name);
        let row = support_row(&docs, s(&v, "docs_row"));
        assert!(row.contains(s(&v, "newest")), "{name}: {row}");
        assert!(row.contains(s(&v, "newest_commit")), "{name}: {row}");
    }
}

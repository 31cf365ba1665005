//! A conversation's utilization is one figure: `list`, `show` and `compact --dry-run` print the
//! same number for it, and the figure `compact` gives after a compaction is the one the next
//! `list` reads back from the store, on every store kind the generator makes.

use std::path::{Path, PathBuf};

use agent_db_synth::SynthOptions;
use rusqlite::Connection;
use serde_json::Value;
use tempfile::TempDir;

use crate::common::{bare_cmd, json};

fn opts(n: usize) -> SynthOptions {
    SynthOptions {
        conversations: n,
        seed: 41,
        ..SynthOptions::default()
    }
}

/// Half the rated conversations at or over 0.7 of their window.
fn shape() -> agent_db_synth::StoreShape {
    agent_db_synth::StoreShape {
        over_share: Some(0.5),
        ..Default::default()
    }
}

/// One generated store of each kind.
fn stores(dir: &Path) -> Vec<(&'static str, PathBuf)> {
    use agent_db_synth::docker_agent::{generate_docker_agent_shaped, Generation};
    use agent_db_synth::goose::{generate_goose_shaped, GooseSchema};
    use agent_db_synth::opencode::{generate_opencode_shaped, OpencodeEra};
    use agent_db_synth::opencode_v2::{generate_opencode_v2, V2Era};
    let p = |name: &str| dir.join(name);
    let full = shape();
    agent_db_synth::generate_shaped(&p("kodelet.db"), &opts(10), &full).unwrap();
    generate_docker_agent_shaped(&p("docker.db"), &opts(10), Generation::Modern, &full).unwrap();
    let goose = GooseSchema::preset("goose").unwrap();
    generate_goose_shaped(&p("goose.db"), &opts(10), &goose, &full).unwrap();
    let era = OpencodeEra::preset("opencode").unwrap();
    generate_opencode_shaped(&p("opencode.db"), &opts(10), era, &full).unwrap();
    generate_opencode_v2(&p("opencode2.db"), 10, 41, V2Era::Newest).unwrap();
    vec![
        ("kodelet", p("kodelet.db")),
        ("docker-agent", p("docker.db")),
        ("goose", p("goose.db")),
        ("opencode 1.x", p("opencode.db")),
        ("opencode 2.x", p("opencode2.db")),
    ]
}

fn cmd(home: &Path, db: &Path) -> assert_cmd::Command {
    let mut c = bare_cmd(home);
    c.arg("--db").arg(db);
    c
}

/// `list --json`'s utilization of each conversation that has one, by id.
fn listed(home: &Path, db: &Path) -> Vec<(String, f64)> {
    let mut c = cmd(home, db);
    c.args(["list", "--json"]);
    let (doc, code) = json(c);
    assert_eq!(code, 0, "{doc}");
    doc["conversations"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|r| Some((r["id"].as_str()?.to_string(), r["utilization"].as_f64()?)))
        .collect()
}

fn listed_one(home: &Path, db: &Path, id: &str) -> Option<f64> {
    listed(home, db)
        .into_iter()
        .find(|(i, _)| i == id)
        .map(|(_, u)| u)
}

fn compact_row(home: &Path, db: &Path, id: &str, dry: bool) -> Value {
    let mut c = cmd(home, db);
    // A small tail, so conversations whose stored context is mostly overhead compact too.
    c.args(["compact", id, "--json", "--keep-tokens", "100"]);
    c.arg(if dry { "--dry-run" } else { "--yes" });
    let (doc, code) = json(c);
    assert_eq!(code, 0, "{doc}");
    doc["conversations"][0].clone()
}

/// `show`'s figure: the JSON number and the percentage of its header.
fn shown(home: &Path, db: &Path, id: &str) -> (Option<f64>, String) {
    let mut c = cmd(home, db);
    c.args(["show", id, "--json"]);
    let (doc, code) = json(c);
    assert_eq!(code, 0, "{doc}");
    let out = cmd(home, db)
        .args(["show", id, "--no-pager"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    let line = text
        .lines()
        .find(|l| l.trim_start().starts_with("context:"))
        .unwrap_or_else(|| panic!("no context line:\n{text}"))
        .to_string();
    (doc["utilization"].as_f64(), line)
}

fn pct(u: f64) -> String {
    format!("{:.0}%", u * 100.0)
}

#[test]
fn list_show_and_compact_print_one_utilization_and_the_after_figure_is_the_next_lists() {
    let dir = TempDir::new().unwrap();
    let home = dir.path();
    for (kind, db) in stores(home) {
        let rated = listed(home, &db);
        assert!(!rated.is_empty(), "{kind}: no rated conversation");
        let mut compacted = false;
        let mut seen = Vec::new();
        for (id, u) in &rated {
            let row = compact_row(home, &db, id, true);
            seen.push(format!("{id} {u} {} {}", row["status"], row["detail"]));
            assert_eq!(
                row["utilization_before"].as_f64(),
                Some(*u),
                "{kind} {id}: list says {u}, compact --dry-run says {}",
                row["utilization_before"]
            );
            let (json_u, line) = shown(home, &db, id);
            assert_eq!(json_u, Some(*u), "{kind} {id}: show --json");
            assert!(
                line.contains(&format!("context: {} of the window", pct(*u))),
                "{kind} {id}: list {}, show: {line}",
                pct(*u)
            );
            if compacted || row["status"] != "planned" {
                continue;
            }
            let done = compact_row(home, &db, id, false);
            assert_eq!(done["status"], "compacted", "{kind} {id}: {done}");
            let after = done["utilization_after"].as_f64().expect("an after figure");
            assert_eq!(
                listed_one(home, &db, id),
                Some(after),
                "{kind} {id}: compact said {after} after, the next list differs"
            );
            compacted = true;
        }
        assert!(compacted, "{kind}: nothing was compacted: {seen:#?}");
    }
}

/// Where agent-db counts the messages higher than the agent's stored context, the stored
/// figure is still the one printed, and the estimate after is in its units.
#[test]
fn a_stored_context_under_agent_dbs_count_is_still_the_one_figure() {
    let dir = TempDir::new().unwrap();
    let home = dir.path();
    let db = home.join("kodelet.db");
    agent_db_synth::generate_shaped(&db, &opts(10), &shape()).unwrap();
    let (id, _) = listed(home, &db)
        .into_iter()
        .max_by(|a, b| a.1.total_cmp(&b.1))
        .unwrap();
    let counted = compact_row(home, &db, &id, true)["tokens_before"]
        .as_u64()
        .unwrap();
    // The agent recorded less than agent-db counts (its tokenizer differs), still over 0.4.
    let stored = counted * 3 / 4;
    let max = (stored as f64 / 0.9) as u64;
    let c = Connection::open(&db).unwrap();
    for table in ["conversations", "conversation_summaries"] {
        c.execute(
            &format!(
                "UPDATE {table} SET usage = json_set(usage, '$.currentContextWindow', ?1, \
                 '$.maxContextWindow', ?2) WHERE id = ?3"
            ),
            rusqlite::params![stored, max, id],
        )
        .unwrap();
    }
    drop(c);
    let u = listed_one(home, &db, &id).unwrap();
    let row = compact_row(home, &db, &id, true);
    assert_eq!(row["utilization_before"].as_f64(), Some(u), "{row}");
    let done = compact_row(home, &db, &id, false);
    let after = done["utilization_after"].as_f64().unwrap();
    assert!(after < u, "{done}");
    assert_eq!(listed_one(home, &db, &id), Some(after));
}

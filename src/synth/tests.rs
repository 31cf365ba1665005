use super::*;
use rusqlite::Connection;
use serde_json::Value;
use std::collections::{HashMap, HashSet};

fn opts(n: usize, seed: u64) -> SynthOptions {
    SynthOptions {
        conversations: n,
        seed,
        scale: 0.4,
        ..SynthOptions::default()
    }
}

type RowText = Vec<Option<String>>;

fn dump(path: &Path, table: &str) -> Vec<RowText> {
    let conn = Connection::open(path).unwrap();
    let mut stmt = conn
        .prepare(&format!("SELECT * FROM {table} ORDER BY id"))
        .unwrap();
    let cols = stmt.column_count();
    let rows = stmt
        .query_map([], |r| {
            (0..cols)
                .map(|i| {
                    let v: rusqlite::types::Value = r.get(i)?;
                    Ok(match v {
                        rusqlite::types::Value::Null => None,
                        rusqlite::types::Value::Integer(i) => Some(i.to_string()),
                        rusqlite::types::Value::Text(t) => Some(t),
                        other => Some(format!("{other:?}")),
                    })
                })
                .collect::<rusqlite::Result<Vec<_>>>()
        })
        .unwrap();
    rows.collect::<rusqlite::Result<Vec<_>>>().unwrap()
}

#[test]
fn same_seed_same_rows_other_seed_other_rows() {
    let dir = tempfile::tempdir().unwrap();
    let a = dir.path().join("a.db");
    let b = dir.path().join("b.db");
    let c = dir.path().join("c.db");
    let sa = generate(&a, &opts(24, 7)).unwrap();
    let sb = generate(&b, &opts(24, 7)).unwrap();
    let sc = generate(&c, &opts(24, 8)).unwrap();
    assert_eq!(sc.conversations, 24);
    assert_eq!(sa, sb);
    assert_eq!(sa.conversations, 24);
    let (da, db, dc) = (
        dump(&a, "conversations"),
        dump(&b, "conversations"),
        dump(&c, "conversations"),
    );
    assert_eq!(da.len(), 24);
    assert_eq!(da, db);
    assert_ne!(da, dc);
    assert_eq!(
        dump(&a, "conversation_summaries"),
        dump(&b, "conversation_summaries")
    );
    // A refusal to overwrite: init_store refuses a non-empty file.
    assert!(generate(&a, &opts(1, 7)).is_err());
}

#[test]
fn prefix_stable_across_counts() {
    let dir = tempfile::tempdir().unwrap();
    let a = dir.path().join("a.db");
    let b = dir.path().join("b.db");
    generate(
        &a,
        &SynthOptions {
            conversations: 5,
            ..opts(5, 3)
        },
    )
    .unwrap();
    generate(
        &b,
        &SynthOptions {
            conversations: 9,
            ..opts(9, 3)
        },
    )
    .unwrap();
    // Conversation i depends only on (seed, i) except for the special-row choice, so
    // ids of a small store (with no specials below 8 rows except "recent") appear in the larger.
    let ids_a: HashSet<_> = dump(&a, "conversations")
        .into_iter()
        .map(|r| r[0].clone())
        .collect();
    let ids_b: HashSet<_> = dump(&b, "conversations")
        .into_iter()
        .map(|r| r[0].clone())
        .collect();
    assert!(ids_a.is_subset(&ids_b));
}

/// Every tool result refers to a call made earlier in the same conversation; every call is
/// answered; tool_results keys are exactly the call ids.
fn check_pairing(provider: &str, metadata: &Value, raw: &Value) -> (usize, usize) {
    let items = raw.as_array().expect("raw_messages is an array");
    let mut calls: Vec<String> = Vec::new();
    let mut results: Vec<String> = Vec::new();
    let responses = provider == "openai-responses"
        || metadata.get("api_mode").and_then(Value::as_str) == Some("responses");
    for m in items {
        if provider == "anthropic" {
            for b in m["content"].as_array().expect("anthropic content array") {
                match b["type"].as_str().unwrap() {
                    "tool_use" => {
                        assert!(b["input"].is_object());
                        calls.push(b["id"].as_str().unwrap().to_string());
                    }
                    "tool_result" => {
                        let id = b["tool_use_id"].as_str().unwrap().to_string();
                        assert!(calls.contains(&id), "result {id} before its call");
                        assert_eq!(m["role"], "user");
                        results.push(id);
                    }
                    "text" => assert!(!b["text"].as_str().unwrap().is_empty()),
                    "thinking" | "redacted_thinking" | "image" => {}
                    other => panic!("unexpected block {other}"),
                }
            }
        } else if responses {
            match m["type"].as_str().unwrap() {
                "function_call" => {
                    let args: Value =
                        serde_json::from_str(m["arguments"].as_str().unwrap()).unwrap();
                    assert!(args.is_object());
                    calls.push(m["call_id"].as_str().unwrap().to_string());
                }
                "function_call_output" => {
                    let id = m["call_id"].as_str().unwrap().to_string();
                    assert!(calls.contains(&id), "output {id} before its call");
                    results.push(id);
                }
                "message" | "reasoning" | "compaction" => {}
                other => panic!("unexpected item {other}"),
            }
        } else {
            if let Some(tc) = m.get("tool_calls") {
                for c in tc.as_array().unwrap() {
                    let args: Value =
                        serde_json::from_str(c["function"]["arguments"].as_str().unwrap()).unwrap();
                    assert!(args.is_object());
                    calls.push(c["id"].as_str().unwrap().to_string());
                }
            }
            if m["role"] == "tool" {
                let id = m["tool_call_id"].as_str().unwrap().to_string();
                assert!(calls.contains(&id), "tool message {id} before its call");
                results.push(id);
            }
        }
    }
    let mut c = calls.clone();
    let mut r = results.clone();
    c.sort();
    r.sort();
    assert_eq!(c, r, "every call answered exactly once");
    (calls.len(), results.len())
}

#[test]
fn rows_are_valid_and_paired_in_every_format() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.db");
    let o = opts(90, 11);
    let stats = generate(&path, &o).unwrap();
    assert_eq!(stats.conversations, 90);
    let conn = Connection::open(&path).unwrap();
    let mut stmt = conn
        .prepare(
            "SELECT c.id, c.raw_messages, c.provider, c.usage, c.metadata, c.tool_results, c.created_at, \
             c.updated_at, s.message_count, s.first_message, s.summary, c.summary, s.usage, s.metadata, c.cwd, s.cwd \
             FROM conversations c JOIN conversation_summaries s ON s.id = c.id",
        )
        .unwrap();
    let mut rows = stmt.query([]).unwrap();
    let mut kinds: HashMap<&'static str, usize> = HashMap::new();
    let mut empties = 0;
    let mut singles = 0;
    let mut recent = 0;
    let mut utils = Vec::new();
    let mut with_calls = HashMap::new();
    let mut messages = 0;
    while let Some(r) = rows.next().unwrap() {
        let id: String = r.get(0).unwrap();
        let raw: String = r.get(1).unwrap();
        let provider: String = r.get(2).unwrap();
        let usage: String = r.get(3).unwrap();
        let metadata: String = r.get(4).unwrap();
        let tool_results: String = r.get(5).unwrap();
        let created: String = r.get(6).unwrap();
        let updated: String = r.get(7).unwrap();
        let count: i64 = r.get(8).unwrap();
        let first: Vec<u8> = r.get_ref(9).unwrap().as_bytes().unwrap().to_vec();
        assert_eq!(
            r.get::<_, Option<String>>(10).unwrap(),
            r.get::<_, Option<String>>(11).unwrap()
        );
        assert_eq!(r.get::<_, String>(12).unwrap(), usage);
        assert_eq!(r.get::<_, String>(13).unwrap(), metadata);
        assert_eq!(
            r.get::<_, Option<String>>(14).unwrap(),
            r.get::<_, Option<String>>(15).unwrap()
        );

        assert_eq!(id.len(), 36);
        let raw_v: Value = serde_json::from_str(&raw).unwrap_or_else(|e| panic!("{id}: {e}"));
        let meta_v: Value = serde_json::from_str(&metadata).unwrap();
        let usage_v: Value = serde_json::from_str(&usage).unwrap();
        let tr_v: Value = serde_json::from_str(&tool_results).unwrap();
        assert_eq!(count, message_count(&raw));
        assert_eq!(first, first_message(&raw, Some(&metadata)));
        messages += raw_v.as_array().unwrap().len();

        // Metadata keys are sorted, as Go writes maps.
        let keys: Vec<&String> = meta_v.as_object().unwrap().keys().collect();
        let mut sorted = keys.clone();
        sorted.sort();
        assert_eq!(keys, sorted);
        assert!(meta_v.get("model").is_some() && meta_v.get("config_snapshot").is_some());
        // Usage has the ten fields in Go struct order.
        let ukeys: Vec<&str> = usage_v
            .as_object()
            .unwrap()
            .keys()
            .map(|s| s.as_str())
            .collect();
        assert_eq!(
            ukeys,
            [
                "inputTokens",
                "outputTokens",
                "cacheCreationInputTokens",
                "cacheReadInputTokens",
                "inputCost",
                "outputCost",
                "cacheCreationCost",
                "cacheReadCost",
                "currentContextWindow",
                "maxContextWindow"
            ]
        );
        let cur = usage_v["currentContextWindow"].as_i64().unwrap();
        let max = usage_v["maxContextWindow"].as_i64().unwrap();
        assert!(
            [0, 200_000, 1_000_000, 1_047_576].contains(&max),
            "max {max}"
        );
        if max > 0 && cur > 0 {
            utils.push(cur as f64 / max as f64);
        }

        // Timestamps parse, updated >= created, nothing after now.
        let c = gotime::parse(&created).unwrap();
        let u = gotime::parse(&updated).unwrap();
        assert!(u >= c, "{id}: {updated} < {created}");
        assert!(u <= o.now);
        assert!(c >= o.now - Duration::days(70), "{created}");
        if o.now - u <= Duration::minutes(5) {
            recent += 1;
        }

        let format = match provider.as_str() {
            "anthropic" => "anthropic",
            "openai-responses" => "responses",
            "openai" if meta_v.get("api_mode").and_then(Value::as_str) == Some("responses") => {
                "responses"
            }
            "openai" => "chat",
            other => panic!("provider {other}"),
        };
        *kinds.entry(format).or_default() += 1;
        let n = raw_v.as_array().unwrap().len();
        if n == 0 {
            empties += 1;
        }
        if n == 1 {
            singles += 1;
        }
        let (calls, _) = check_pairing(&provider, &meta_v, &raw_v);
        let tr = tr_v.as_object().unwrap();
        assert_eq!(tr.len(), calls, "{id}: tool_results has one entry per call");
        let trkeys: Vec<&String> = tr.keys().collect();
        let mut sorted = trkeys.clone();
        sorted.sort();
        assert_eq!(trkeys, sorted);
        for (_, v) in tr {
            let k: Vec<&str> = v.as_object().unwrap().keys().map(|s| s.as_str()).collect();
            assert_eq!(k[0], "toolName");
            assert_eq!(*k.last().unwrap(), "timestamp");
            let ts = v["timestamp"].as_str().unwrap();
            assert!(chrono::DateTime::parse_from_rfc3339(ts).is_ok(), "{ts}");
        }
        if calls > 0 {
            *with_calls.entry(format).or_insert(0) += 1;
        }
    }
    assert_eq!(stats.messages, messages);
    for f in ["anthropic", "chat", "responses"] {
        assert!(kinds.get(f).copied().unwrap_or(0) >= 20, "{f}: {kinds:?}");
        assert!(
            with_calls.get(f).copied().unwrap_or(0) >= 10,
            "{f} with calls: {with_calls:?}"
        );
    }
    assert!(empties >= 2, "empties {empties}");
    assert!(singles >= 2, "singles {singles}");
    assert_eq!(recent, 3);
    let lo = utils.iter().cloned().fold(f64::MAX, f64::min);
    let hi = utils.iter().cloned().fold(0.0, f64::max);
    assert!(lo < 0.05 && hi > 0.3, "utilization spread {lo}..{hi}");
}

#[test]
fn format_selection_and_scale() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a.db");
    let o = SynthOptions {
        formats: vec![SynthFormat::Anthropic],
        ..opts(12, 5)
    };
    generate(&path, &o).unwrap();
    let rows = dump(&path, "conversations");
    assert!(rows.iter().all(|r| r[2].as_deref() == Some("anthropic")));
    assert_eq!(
        SynthFormat::parse("Responses"),
        Some(SynthFormat::OpenAiResponses)
    );
    assert_eq!(SynthFormat::parse("openai"), Some(SynthFormat::OpenAiChat));
    assert_eq!(SynthFormat::parse("x"), None);
}

#[test]
fn auto_name_cuts_runes() {
    assert_eq!(auto_name("  fix\n\tthe   build "), "fix the build");
    let long = "é".repeat(120);
    let n = auto_name(&long);
    assert_eq!(n.chars().count(), 100);
    assert!(n.ends_with("..."));
}

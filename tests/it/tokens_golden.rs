//! Token counts against an independent oracle: every text of `fixtures/tokens/corpus.jsonl`
//! counted with `agent_db::tokens::count_text` must equal the count Python tiktoken
//! (o200k_base, `encode_ordinary`) gave for it, stored once in `fixtures/tokens/golden.jsonl`
//! by `fixtures/tokens/make_golden.py` (which says how it was run). The corpus mixes prose,
//! code, JSON, CJK, emoji, accented and other scripts, whitespace runs, long numbers, URLs, tool
//! outputs and Go-escaped kodelet messages (`fixtures/tokens/make_corpus.py`).
//!
//! Only text counts are checked here: the per-message framing (`tokens::MESSAGE_OVERHEAD`) has
//! no public reference implementation to compare with.

use std::path::Path;

use serde_json::Value;
use sha2::{Digest, Sha256};

/// How many mismatches the failure message lists.
const SHOWN: usize = 10;

fn read_jsonl(name: &str) -> Vec<Value> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures/tokens")
        .join(name);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, l)| {
            serde_json::from_str(l).unwrap_or_else(|e| panic!("{}:{}: {e}", path.display(), i + 1))
        })
        .collect()
}

fn str_field<'a>(v: &'a Value, key: &str) -> &'a str {
    v[key]
        .as_str()
        .unwrap_or_else(|| panic!("{key} missing in {v}"))
}

#[test]
fn count_text_matches_tiktoken_on_the_golden_corpus() {
    let corpus = read_jsonl("corpus.jsonl");
    let mut golden = read_jsonl("golden.jsonl");
    let meta = golden.remove(0);
    assert_eq!(
        meta["meta"]["encoding"], "o200k_base",
        "golden header: {meta}"
    );
    assert_eq!(
        meta["meta"]["method"], "encode_ordinary",
        "golden header: {meta}"
    );
    assert!(
        corpus.len() >= 300,
        "the corpus has only {} texts",
        corpus.len()
    );
    assert_eq!(
        corpus.len(),
        golden.len(),
        "corpus.jsonl and golden.jsonl differ in length: rerun fixtures/tokens/make_golden.py"
    );

    let mut mismatches = Vec::new();
    let mut total = 0usize;
    for (c, g) in corpus.iter().zip(&golden) {
        let (id, text) = (str_field(c, "id"), str_field(c, "text"));
        assert_eq!(
            id,
            str_field(g, "id"),
            "the two files are not in the same order"
        );
        assert_eq!(
            hex::encode(Sha256::digest(text.as_bytes())),
            str_field(g, "sha256"),
            "{id}: the text changed since golden.jsonl was made: rerun fixtures/tokens/make_golden.py"
        );
        let want = g["tokens"].as_u64().expect("tokens") as usize;
        let got = agent_db::tokens::count_text(text);
        total += want;
        if got != want {
            let shown: String = text.chars().take(80).collect();
            mismatches.push(format!(
                "{id}: count_text {got}, tiktoken {want}: {shown:?}"
            ));
        }
    }
    assert!(
        mismatches.is_empty(),
        "{} of {} texts differ from tiktoken (first {}):\n{}",
        mismatches.len(),
        corpus.len(),
        SHOWN.min(mismatches.len()),
        mismatches[..SHOWN.min(mismatches.len())].join("\n")
    );
    // The corpus is not trivially small: a golden file of zeros would not pass.
    assert!(total > 50_000, "only {total} tokens in the golden counts");
}

#[test]
fn every_kind_of_text_is_in_the_corpus() {
    let corpus = read_jsonl("corpus.jsonl");
    for kind in [
        "prose",
        "code-rust",
        "code-go",
        "code-python",
        "json",
        "cjk",
        "emoji",
        "accented",
        "whitespace",
        "numbers",
        "url",
        "tool",
        "gen-kodelet-json",
        "gen-unicode",
    ] {
        assert!(
            corpus.iter().any(|c| c["kind"] == kind),
            "no {kind} text in the corpus"
        );
    }
}

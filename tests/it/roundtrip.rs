//! Library round trip on generated stores in each live format: every stored `raw_messages`
//! decodes, and writing the (untouched) messages back gives the stored bytes exactly, message
//! by message and as a whole.

use agent_db::message::{self, Format};
use agent_db_synth::SynthFormat;
use serde_json::value::RawValue;

use crate::common::Env;

struct Row {
    id: String,
    provider: String,
    metadata: Option<String>,
    raw: String,
}

fn rows(env: &Env) -> Vec<Row> {
    let c = env.conn();
    let mut s = c
        .prepare("SELECT id, provider, metadata, raw_messages FROM conversations ORDER BY id")
        .unwrap();
    let rows = s
        .query_map([], |r| {
            Ok(Row {
                id: r.get(0)?,
                provider: r.get(1)?,
                metadata: r.get(2)?,
                raw: r.get(3)?,
            })
        })
        .unwrap();
    rows.map(Result::unwrap).collect()
}

/// `metadata.api_mode`, read with serde_json.
fn api_mode(metadata: Option<&str>) -> Option<String> {
    let m: serde_json::Value = serde_json::from_str(metadata?).ok()?;
    m.get("api_mode")?.as_str().map(str::to_string)
}

fn expected(f: SynthFormat) -> Format {
    match f {
        SynthFormat::Anthropic => agent_db::agents::kodelet::ANTHROPIC,
        SynthFormat::OpenAiChat => agent_db::agents::kodelet::OPENAI_CHAT,
        SynthFormat::OpenAiResponses => agent_db::agents::kodelet::OPENAI_RESPONSES,
    }
}

fn round_trip(format: SynthFormat, seeds: &[u64]) {
    let mut conversations = 0;
    let mut messages = 0;
    let mut empty = 0;
    let mut flavours = std::collections::BTreeSet::new();
    for &seed in seeds {
        let env = Env::generated(30, seed, &[format]);
        for row in rows(&env) {
            let id = &row.id;
            let mode = api_mode(row.metadata.as_deref());
            flavours.insert((row.provider.clone(), mode.clone()));
            let f = agent_db::agents::kodelet::detect(&row.provider, mode.as_deref())
                .unwrap_or_else(|e| panic!("{id}: {e}"));
            assert_eq!(f, expected(format), "{id}: detected format");

            let decoded = message::decode_all(f, &row.raw).unwrap_or_else(|e| panic!("{id}: {e}"));
            let joined = message::join_raw(decoded.iter().map(|m| m.raw.as_ref()));
            assert!(
                joined == row.raw,
                "{id}: re-encoding is not byte-identical ({} vs {} bytes)",
                joined.len(),
                row.raw.len()
            );

            let parts: Vec<&RawValue> = serde_json::from_str(&row.raw).expect("a JSON array");
            assert_eq!(decoded.len(), parts.len(), "{id}: one message per element");
            for (i, (m, p)) in decoded.iter().zip(&parts).enumerate() {
                assert!(
                    m.raw.get() == p.get(),
                    "{id}: message {i} is not the stored element"
                );
            }
            conversations += 1;
            messages += decoded.len();
            empty += usize::from(decoded.is_empty());
        }
    }
    assert_eq!(conversations, 30 * seeds.len());
    assert!(
        messages > conversations * 5,
        "realistic sizes: {messages} messages"
    );
    assert!(empty > 0, "the empty `[]` shape is covered");
    // Every stored flavour of the format is covered.
    let want: &[(&str, Option<&str>)] = match format {
        SynthFormat::Anthropic => &[("anthropic", None)],
        SynthFormat::OpenAiChat => &[("openai", None), ("openai", Some("chat_completions"))],
        SynthFormat::OpenAiResponses => {
            &[("openai", Some("responses")), ("openai-responses", None)]
        }
    };
    for (p, m) in want {
        assert!(
            flavours.contains(&(p.to_string(), m.map(str::to_string))),
            "{p}/{m:?} not covered: {flavours:?}"
        );
    }
}

#[test]
fn anthropic() {
    round_trip(SynthFormat::Anthropic, &[501, 502]);
}

#[test]
fn openai_chat() {
    round_trip(SynthFormat::OpenAiChat, &[503, 504]);
}

#[test]
fn openai_responses() {
    round_trip(SynthFormat::OpenAiResponses, &[505, 506]);
}

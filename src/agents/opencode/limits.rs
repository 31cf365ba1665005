//! opencode's overflow rule: how much input a model may use before opencode compacts.

/// (model name prefix, separate input limit, output limit) from opencode 1.18.33's bundled
/// models.dev snapshot (its `openai`, `anthropic` and `google` providers), for opencode's
/// overflow rule ([`usable_input`]). Longest prefix wins.
const IO_LIMITS: &[(&str, Option<i64>, i64)] = &[
    ("gpt-5", Some(272_000), 128_000),
    ("gpt-5.2-chat-latest", None, 16_384),
    ("gpt-5.3-chat-latest", None, 16_384),
    ("gpt-5.3-codex-spark", Some(100_000), 32_000),
    ("gpt-5.4", Some(922_000), 128_000),
    ("gpt-5.4-mini", Some(272_000), 128_000),
    ("gpt-5.4-nano", Some(272_000), 128_000),
    ("gpt-5.5", Some(922_000), 128_000),
    ("gpt-5.6", Some(922_000), 128_000),
    ("gpt-6", Some(922_000), 128_000),
    ("gpt-4o", None, 16_384),
    ("gpt-4o-2024-05-13", None, 4_096),
    ("gpt-4.1", None, 32_768),
    ("gpt-4-turbo", None, 4_096),
    ("gpt-4", None, 8_192),
    ("gpt-3.5-turbo", None, 4_096),
    ("o1", None, 100_000),
    ("o3", None, 100_000),
    ("o4-mini", None, 100_000),
    ("claude-haiku-4-5", None, 64_000),
    ("claude-opus-4-5", None, 64_000),
    ("claude-sonnet-4-5", None, 64_000),
    ("claude-opus-4-6", None, 128_000),
    ("claude-sonnet-4-6", None, 128_000),
    ("claude-opus-4-7", None, 128_000),
    ("claude-opus-4-8", None, 128_000),
    ("claude-opus-5", None, 128_000),
    ("claude-sonnet-5", None, 128_000),
    ("claude-fable-5", None, 128_000),
    ("gemini-2.5", None, 65_536),
    ("gemini-3", None, 65_536),
    ("gemini-flash", None, 65_536),
    ("gemma-4", None, 32_768),
];

/// opencode's default output cap (`OUTPUT_TOKEN_MAX`), and the most it reserves for output
/// against a separate input limit.
const OPENCODE_OUTPUT_MAX: i64 = 32_000;
const OPENCODE_RESERVED_MAX: i64 = 20_000;

/// The input opencode lets a request use before it compacts (`isOverflow` in
/// `packages/opencode/src/session/overflow.ts`, as the 1.18.33 binary has it): with
/// `max_output = min(limit.output, 32000)` (32000 when the output limit is unknown), the
/// model's input limit minus `min(20000, max_output)` when it has one, else `context -
/// max_output`; never below 0. `context` is the window agent-db knows for the model.
pub(crate) fn usable_input(model: &str, context: i64) -> i64 {
    let lower = model.to_ascii_lowercase();
    let bare = lower.rsplit('/').next().unwrap_or(&lower);
    let found = IO_LIMITS
        .iter()
        .filter(|(p, _, _)| bare.starts_with(p))
        .max_by_key(|(p, _, _)| p.len());
    let (input, output) = found.map_or((None, 0), |(_, i, o)| (*i, *o));
    let max_output = match output.min(OPENCODE_OUTPUT_MAX) {
        0 => OPENCODE_OUTPUT_MAX,
        n => n,
    };
    match input {
        Some(i) => (i - max_output.min(OPENCODE_RESERVED_MAX)).max(0),
        None => (context - max_output).max(0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn usable_input_as_opencode_computes_it() {
        // A separate input limit: 272,000 - min(20,000, min(128,000, 32,000)).
        assert_eq!(usable_input("openai/gpt-5", 400_000), 252_000);
        assert_eq!(usable_input("gpt-5.1-codex", 400_000), 252_000);
        // None: the window minus min(output, 32,000).
        assert_eq!(usable_input("anthropic/claude-opus-4-5", 200_000), 168_000);
        assert_eq!(usable_input("gpt-4o", 128_000), 128_000 - 16_384);
        // Unknown output limit: opencode's 32,000.
        assert_eq!(usable_input("llama3.1:8b", 100_000), 68_000);
        assert_eq!(usable_input("tiny", 1_000), 0);
    }
}

//! What agent-db knows about models: context windows, by longest matching name prefix, so dated
//! variants (`claude-sonnet-4-5-20250929`) match. Config (`[context_limits]`, carried as
//! [`ContextLimits`]) overrides these.

/// (model name prefix, context window in tokens). Longest prefix wins.
const CONTEXT_LIMITS: &[(&str, i64)] = &[
    ("claude-opus-4-6", 1_000_000),
    ("claude-sonnet-4-6", 1_000_000),
    ("claude-sonnet-5", 1_000_000),
    ("claude-opus-4", 200_000),
    ("claude-sonnet-4", 200_000),
    ("claude-haiku-4", 200_000),
    ("claude-3", 200_000),
    ("claude", 200_000),
    ("gpt-4.1", 1_047_576),
    ("gpt-4o", 128_000),
    ("gpt-4-turbo", 128_000),
    ("gpt-5", 400_000),
    ("o1", 200_000),
    ("o3", 200_000),
    ("o4-mini", 200_000),
    ("gemini-2", 1_048_576),
    ("gemini-1.5", 1_048_576),
    // opencode's bundled models.dev snapshot (the models.dev snapshot bundled in the
    // released opencode 1.18.34), for models the entries above do not cover.
    ("claude-opus-4-7", 1_000_000),
    ("claude-opus-4-8", 1_000_000),
    ("claude-opus-5", 1_000_000),
    ("claude-fable-5", 1_000_000),
    ("gpt-3.5-turbo", 16_385),
    ("gpt-4", 8_192),
    ("gpt-5.2-chat-latest", 128_000),
    ("gpt-5.3-chat-latest", 128_000),
    ("gpt-5.3-codex-spark", 128_000),
    ("gpt-5.4", 1_050_000),
    ("gpt-5.4-mini", 400_000),
    ("gpt-5.4-nano", 400_000),
    ("gpt-5.5", 1_050_000),
    ("gpt-5.6", 1_050_000),
    ("gpt-6", 1_050_000),
    ("gemini-3", 1_048_576),
    ("gemini-flash", 1_048_576),
    ("gemma-4", 262_144),
    ("grok-4.20", 1_000_000),
    ("grok-4.3", 1_000_000),
    ("grok-4.5", 500_000),
    ("grok-4.6", 500_000),
    ("grok-4.7", 500_000),
    ("grok-build", 256_000),
    ("deepseek-v4", 1_000_000),
    ("deepseek-flash", 1_000_000),
];

/// The context window of `model`, from `overrides` first, then the built-in table.
pub fn context_limit(
    model: &str,
    overrides: &std::collections::BTreeMap<String, i64>,
) -> Option<i64> {
    if let Some(v) = overrides.get(model) {
        return Some(*v);
    }
    let lower = model.to_ascii_lowercase();
    // A provider prefix such as `anthropic/` or `openai/` (OpenRouter, LiteLLM) is ignored.
    let bare = lower.rsplit('/').next().unwrap_or(&lower);
    overrides
        .iter()
        .filter(|(k, _)| bare.starts_with(&k.to_ascii_lowercase()))
        .max_by_key(|(k, _)| k.len())
        .map(|(_, v)| *v)
        .or_else(|| {
            CONTEXT_LIMITS
                .iter()
                .filter(|(p, _)| bare.starts_with(p))
                .max_by_key(|(p, _)| p.len())
                .map(|(_, v)| *v)
        })
}

/// The configured `[context_limits]`, given to a store when it is opened (stores that do not
/// record a conversation's window, such as docker-agent, take it from here).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ContextLimits {
    overrides: std::collections::BTreeMap<String, i64>,
}

impl ContextLimits {
    pub fn new(overrides: std::collections::BTreeMap<String, i64>) -> ContextLimits {
        ContextLimits { overrides }
    }

    /// The context window of `model`: the overrides first, then the built-in table.
    pub fn of(&self, model: &str) -> Option<i64> {
        context_limit(model, &self.overrides)
    }
}

impl From<std::collections::BTreeMap<String, i64>> for ContextLimits {
    fn from(overrides: std::collections::BTreeMap<String, i64>) -> ContextLimits {
        ContextLimits::new(overrides)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn longest_prefix_and_overrides() {
        let none = Default::default();
        assert_eq!(
            context_limit("claude-sonnet-4-5-20250929", &none),
            Some(200_000)
        );
        assert_eq!(context_limit("claude-sonnet-4-6", &none), Some(1_000_000));
        assert_eq!(
            context_limit("openrouter/anthropic/claude-opus-4-5", &none),
            Some(200_000)
        );
        assert_eq!(context_limit("gpt-4.1-mini", &none), Some(1_047_576));
        assert_eq!(context_limit("llama3.1:8b", &none), None);
        assert_eq!(
            context_limit("anthropic/claude-opus-4-7", &none),
            Some(1_000_000)
        );
        assert_eq!(context_limit("openai/gpt-5.4-mini", &none), Some(400_000));
        assert_eq!(context_limit("gpt-4", &none), Some(8_192));
        assert_eq!(context_limit("gpt-4o-mini", &none), Some(128_000));
        let mut o = std::collections::BTreeMap::new();
        o.insert("llama3".to_string(), 8192);
        assert_eq!(context_limit("llama3.1:8b", &o), Some(8192));
    }
}

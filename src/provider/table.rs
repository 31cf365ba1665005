//! The provider table: every fact agent-db knows about each summarizer provider (its name and
//! aliases, default model, API-key variables, default base URL, wire format and list prices), in
//! one entry per provider. [`ProviderKind`] is generated from the same table, so a provider
//! cannot exist without its facts, and everything that must cover every provider (the parser,
//! the key variables scrubbed from hook environments, the built-in prices) reads the table.
//!
//! Adding a provider: its wire module (`encode` and `send` functions, like `openai.rs`) and one
//! entry below (docs/architecture.md, "Settings, providers and output").

use std::future::Future;
use std::pin::Pin;

use super::list_prices::{self, ListPrice};
use super::{ChatRequest, ClientConfig, Completion, ProviderError};

/// The variable that holds the key for whichever provider is configured; it wins over the
/// provider's own variables.
pub const GENERIC_KEY_VAR: &str = "AGENT_DB_API_KEY";

/// A request in flight.
pub type Reply<'a> = Pin<Box<dyn Future<Output = Result<Completion, ProviderError>> + Send + 'a>>;

/// A wire format: a request's body, serialized once per request.
pub type EncodeFn = fn(&ClientConfig, &ChatRequest) -> Vec<u8>;

/// A wire format: send one encoded request (no retries; [`super::Client::complete`] adds them).
pub type SendFn = for<'a> fn(&'a reqwest::Client, &'a ClientConfig, bytes::Bytes) -> Reply<'a>;

/// The facts of one provider.
pub struct Provider {
    /// The name in settings, output and the audit log (`llm.provider`, `--llm-provider`).
    pub name: &'static str,
    /// Other spellings accepted for it (compared lowercased).
    pub aliases: &'static [&'static str],
    /// How it is named in the error for an unknown provider.
    pub label: &'static str,
    /// The summarizer model used when none is configured (cheap, fast, long context).
    pub default_model: &'static str,
    /// Its own API-key variables, asked after [`GENERIC_KEY_VAR`], in order. Every one is
    /// removed from hook environments.
    pub key_vars: &'static [&'static str],
    /// The base URL when none is configured; any other URL needs no key.
    pub default_base_url: &'static str,
    /// Its wire format: the body of a request, and how it is sent.
    pub encode: EncodeFn,
    pub send: SendFn,
    /// Its models' list prices (looked up by longest prefix across every provider).
    pub list_prices: &'static [ListPrice],
}

/// Generates [`ProviderKind`] (one variant per entry) and its lookup from the table.
macro_rules! provider_table {
    ($( $(#[$doc:meta])* $variant:ident => $spec:expr ),+ $(,)?) => {
        /// Which provider: one variant per entry of the provider table.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum ProviderKind {
            $( $(#[$doc])* $variant ),+
        }

        impl ProviderKind {
            /// Every provider, in table order.
            pub const ALL: &'static [ProviderKind] = &[$(ProviderKind::$variant),+];

            /// This provider's facts.
            pub fn spec(self) -> &'static Provider {
                match self {
                    $( ProviderKind::$variant => {
                        static SPEC: Provider = $spec;
                        &SPEC
                    } )+
                }
            }
        }
    };
}

provider_table! {
    /// `POST {base}/chat/completions` (OpenAI, Ollama, vLLM, llama.cpp server, LiteLLM, OpenRouter).
    OpenAi => Provider {
        name: "openai",
        aliases: &["openai-compatible", "openai_compatible"],
        label: "openai (any OpenAI-compatible server)",
        default_model: "gpt-4.1-mini",
        key_vars: &["OPENAI_API_KEY"],
        default_base_url: "https://api.openai.com/v1",
        encode: super::openai::encode,
        send: |http, cfg, body| Box::pin(super::openai::send(http, cfg, body)),
        list_prices: list_prices::OPENAI,
    },
    /// `POST {base}/v1/messages` with `anthropic-version` and `x-api-key`.
    Anthropic => Provider {
        name: "anthropic",
        aliases: &[],
        label: "anthropic",
        default_model: "claude-haiku-4-5",
        key_vars: &["ANTHROPIC_API_KEY"],
        default_base_url: "https://api.anthropic.com",
        encode: super::anthropic::encode,
        send: |http, cfg, body| Box::pin(super::anthropic::send(http, cfg, body)),
        list_prices: list_prices::ANTHROPIC,
    },
}

impl ProviderKind {
    /// The provider named `s` (its name or an alias, any case), if there is one.
    pub fn parse(s: &str) -> Option<ProviderKind> {
        let s = s.trim().to_ascii_lowercase();
        Self::ALL.iter().copied().find(|k| {
            let p = k.spec();
            p.name == s || p.aliases.contains(&s.as_str())
        })
    }

    pub fn name(self) -> &'static str {
        self.spec().name
    }

    pub fn default_base_url(self) -> &'static str {
        self.spec().default_base_url
    }

    pub fn default_model(self) -> &'static str {
        self.spec().default_model
    }

    /// The variables a key for this provider is read from, in order of preference.
    pub fn key_vars(self) -> impl Iterator<Item = &'static str> {
        std::iter::once(GENERIC_KEY_VAR).chain(self.spec().key_vars.iter().copied())
    }
}

/// Shown as the provider's name, the same text settings accept.
impl serde::Serialize for ProviderKind {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

/// Every variable that can hold a summarizer API key, for any provider (removed from hook
/// environments).
pub fn all_key_vars() -> impl Iterator<Item = &'static str> {
    std::iter::once(GENERIC_KEY_VAR).chain(
        ProviderKind::ALL
            .iter()
            .flat_map(|k| k.spec().key_vars.iter().copied()),
    )
}

/// The providers settings accept, for the error naming an unknown one.
pub fn accepted() -> String {
    let labels: Vec<&str> = ProviderKind::ALL.iter().map(|k| k.spec().label).collect();
    match labels.split_last() {
        Some((last, rest)) if !rest.is_empty() => format!("{} or {last}", rest.join(", ")),
        _ => labels.join(""),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_aliases_parse_back() {
        for &k in ProviderKind::ALL {
            assert_eq!(ProviderKind::parse(k.name()), Some(k));
            assert_eq!(ProviderKind::parse(&k.name().to_uppercase()), Some(k));
            for a in k.spec().aliases {
                assert_eq!(ProviderKind::parse(a), Some(k));
            }
            assert_eq!(serde_json::to_value(k).unwrap(), k.name());
        }
        assert_eq!(
            ProviderKind::parse(" OpenAI-Compatible "),
            Some(ProviderKind::OpenAi)
        );
        assert_eq!(ProviderKind::parse("gemini"), None);
        assert_eq!(
            accepted(),
            "openai (any OpenAI-compatible server) or anthropic"
        );
    }

    #[test]
    fn every_key_variable_is_scrubbed() {
        let all: Vec<&str> = all_key_vars().collect();
        assert_eq!(
            all,
            ["AGENT_DB_API_KEY", "OPENAI_API_KEY", "ANTHROPIC_API_KEY"]
        );
        for &k in ProviderKind::ALL {
            for v in k.key_vars() {
                assert!(all.contains(&v), "{v} of {} is not scrubbed", k.name());
            }
        }
    }
}

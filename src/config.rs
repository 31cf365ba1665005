//! Settings, layered: built-in defaults < config file (`$XDG_CONFIG_HOME/agent-db/config.toml`, or
//! `--config PATH`) < `AGENT_DB_*` environment < command-line flags. Every key and variable is
//! listed in docs/configuration.md. The API key is held in a [`Secret`] and never printed.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::provider::pricing::Price;
use crate::provider::{ProviderKind, Secret};

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileConfig {
    #[serde(default)]
    llm: LlmSection,
    #[serde(default)]
    compact: CompactSection,
    #[serde(default)]
    hooks: HooksSection,
    #[serde(default)]
    prices: BTreeMap<String, PriceEntry>,
    #[serde(default)]
    context_limits: BTreeMap<String, i64>,
    #[serde(default)]
    store: StoreSection,
}

/// `[store]`: which conversation store to open when `--db` is not given.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct StoreSection {
    agent: Option<String>,
    path: Option<PathBuf>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct LlmSection {
    provider: Option<String>,
    model: Option<String>,
    base_url: Option<String>,
    api_key: Option<String>,
    max_summary_tokens: Option<u32>,
    summary_context: Option<usize>,
    timeout: Option<String>,
    max_retries: Option<usize>,
    recipe: Option<String>,
    instructions: Option<String>,
    max_cost: Option<f64>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct CompactSection {
    concurrency: Option<usize>,
    keep_tokens: Option<usize>,
    target: Option<f64>,
    stall_min_new_messages: Option<usize>,
    stall_min_saving: Option<f64>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct HooksSection {
    dirs: Option<Vec<PathBuf>>,
    timeout: Option<String>,
    fail_open: Option<bool>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct PriceEntry {
    input_per_mtok: f64,
    output_per_mtok: f64,
}

/// Command-line values that override everything else (`None` = not given).
#[derive(Debug, Clone, Default)]
pub struct Overrides {
    pub config: Option<PathBuf>,
    pub llm_provider: Option<String>,
    pub model: Option<String>,
    pub base_url: Option<String>,
    pub max_summary_tokens: Option<u32>,
    pub summary_context: Option<usize>,
    pub timeout: Option<Duration>,
    pub recipe: Option<String>,
    pub instructions: Option<String>,
    pub concurrency: Option<usize>,
    pub max_cost: Option<f64>,
    pub hook_timeout: Option<Duration>,
    pub target: Option<f64>,
}

/// The effective settings.
#[derive(Debug, Clone, Serialize)]
pub struct Settings {
    pub config_file: Option<PathBuf>,
    pub llm_provider: Option<ProviderKind>,
    pub model: Option<String>,
    /// Shown (serialized) masked: a key written into the URL never prints.
    #[serde(serialize_with = "masked_url")]
    pub base_url: Option<String>,
    #[serde(serialize_with = "redacted")]
    pub api_key: Option<Secret>,
    /// Where the key came from (a variable name or `config file`), never the key.
    pub api_key_source: Option<String>,
    pub max_summary_tokens: u32,
    pub summary_context: Option<usize>,
    #[serde(with = "humantime_serde_compat")]
    pub timeout: Duration,
    pub max_retries: usize,
    pub recipe: Option<String>,
    pub instructions: Option<String>,
    pub max_cost: Option<f64>,
    pub concurrency: usize,
    pub keep_tokens: Option<usize>,
    /// The utilization a compaction lands at or under (`compact.target`, `--target`).
    pub target: f64,
    /// The stall guard's thresholds (`compact.stall_*`); `--force` turns it off.
    pub stall: crate::plan::StallGuard,
    pub hook_dirs: Vec<PathBuf>,
    #[serde(with = "humantime_serde_compat")]
    pub hook_timeout: Duration,
    pub hook_fail_open: bool,
    #[serde(serialize_with = "prices_json")]
    pub prices: BTreeMap<String, Price>,
    pub context_limits: BTreeMap<String, i64>,
    /// `[store] agent`: `kodelet` or `docker-agent`, whose default store is used.
    pub store_agent: Option<String>,
    /// `[store] path`: the store file (`--db`, `AGENT_DB_PATH` and `--agent` win).
    pub store_path: Option<PathBuf>,
    /// Which layer each setting came from.
    pub sources: BTreeMap<String, String>,
}

fn masked_url<S: serde::Serializer>(
    v: &Option<String>,
    s: S,
) -> std::result::Result<S::Ok, S::Error> {
    match v {
        Some(u) => s.serialize_some(&crate::provider::mask_url(u)),
        None => s.serialize_none(),
    }
}

fn redacted<S: serde::Serializer>(
    v: &Option<Secret>,
    s: S,
) -> std::result::Result<S::Ok, S::Error> {
    match v {
        Some(_) => s.serialize_str("[redacted]"),
        None => s.serialize_none(),
    }
}

fn prices_json<S: serde::Serializer>(
    v: &BTreeMap<String, Price>,
    s: S,
) -> std::result::Result<S::Ok, S::Error> {
    use serde::ser::SerializeMap;
    let mut m = s.serialize_map(Some(v.len()))?;
    for (k, p) in v {
        m.serialize_entry(
            k,
            &serde_json::json!({"input_per_mtok": p.input_per_mtok, "output_per_mtok": p.output_per_mtok}),
        )?;
    }
    m.end()
}

mod humantime_serde_compat {
    pub fn serialize<S: serde::Serializer>(
        d: &std::time::Duration,
        s: S,
    ) -> Result<S::Ok, S::Error> {
        s.serialize_str(&humantime::format_duration(*d).to_string())
    }
}

pub const DEFAULT_MAX_SUMMARY_TOKENS: u32 = 4096;
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(120);
pub const DEFAULT_MAX_RETRIES: usize = 4;
pub const DEFAULT_CONCURRENCY: usize = 4;
pub const DEFAULT_HOOK_TIMEOUT: Duration = Duration::from_secs(30);

/// The default summarization model of each provider (cheap, fast, long context).
pub fn default_model(kind: ProviderKind) -> &'static str {
    match kind {
        ProviderKind::OpenAi => "gpt-4.1-mini",
        ProviderKind::Anthropic => "claude-haiku-4-5",
    }
}

/// The default config file: `$XDG_CONFIG_HOME/agent-db/config.toml`, else
/// `~/.config/agent-db/config.toml`.
pub fn config_dir(env: &dyn Fn(&str) -> Option<String>) -> PathBuf {
    match env("XDG_CONFIG_HOME").filter(|s| !s.is_empty()) {
        Some(x) => PathBuf::from(x).join("agent-db"),
        None => PathBuf::from(env("HOME").unwrap_or_else(|| ".".into()))
            .join(".config")
            .join("agent-db"),
    }
}

/// A humantime duration (`30s`, `2m`), or a plain number of seconds (`5`).
fn parse_duration(what: &str, s: &str) -> Result<Duration> {
    if let Ok(n) = s.trim().parse::<u64>() {
        return Ok(Duration::from_secs(n));
    }
    humantime::parse_duration(s.trim())
        .map_err(|e| Error::Config(format!("{what}: {e} (e.g. 30s, 2m)")))
}

/// Load the settings from the process environment.
pub fn load(o: &Overrides) -> Result<Settings> {
    load_with(o, &|k| std::env::var(k).ok())
}

/// Load the settings with an explicit environment (for tests).
pub fn load_with(o: &Overrides, env: &dyn Fn(&str) -> Option<String>) -> Result<Settings> {
    let mut sources = BTreeMap::new();
    let explicit = o.config.clone().or_else(|| {
        env("AGENT_DB_CONFIG")
            .filter(|s| !s.is_empty())
            .map(PathBuf::from)
    });
    let (path, file) = match &explicit {
        Some(p) => (Some(p.clone()), Some(read_file(p)?)),
        None => {
            let p = config_dir(env).join("config.toml");
            if p.is_file() {
                (Some(p.clone()), Some(read_file(&p)?))
            } else {
                (None, None)
            }
        }
    };
    if path.is_some() {
        let how = match (&o.config, explicit.is_some()) {
            (Some(_), _) => "flag",
            (None, true) => "environment",
            (None, false) => "default location",
        };
        sources.insert("config_file".to_string(), how.to_string());
    }
    let file = file.unwrap_or_default();
    let store_agent = file.store.agent.clone();
    if let Some(a) = &store_agent {
        if a != "kodelet" && a != "docker-agent" {
            return Err(Error::Config(format!(
                "{}: [store] agent = {a:?}: expected \"kodelet\" or \"docker-agent\"",
                path.as_deref().unwrap_or(Path::new("config")).display()
            )));
        }
        sources.insert("store.agent".to_string(), "config file".to_string());
    }
    if file.store.path.is_some() {
        sources.insert("store.path".to_string(), "config file".to_string());
    }
    if !file.prices.is_empty() {
        sources.insert("prices".to_string(), "config file".to_string());
    }
    if !file.context_limits.is_empty() {
        sources.insert("context_limits".to_string(), "config file".to_string());
    }
    let e = |k: &str| env(k).filter(|v| !v.is_empty());

    // layer(key, file value, env var, flag) -> (value, source)
    macro_rules! layer {
        ($key:expr, $file:expr, $env:expr, $flag:expr) => {{
            let mut v = None;
            if let Some(x) = $file {
                v = Some(x);
                sources.insert($key.to_string(), "config file".to_string());
            }
            if let Some(x) = $env {
                v = Some(x);
                sources.insert($key.to_string(), "environment".to_string());
            }
            if let Some(x) = $flag {
                v = Some(x);
                sources.insert($key.to_string(), "flag".to_string());
            }
            v
        }};
    }

    let provider_text = layer!(
        "llm.provider",
        file.llm.provider.clone(),
        e("AGENT_DB_LLM_PROVIDER"),
        o.llm_provider.clone()
    );
    let llm_provider = match provider_text.as_deref() {
        None | Some("none") | Some("") => None,
        Some(p) => Some(ProviderKind::parse(p).ok_or_else(|| {
            Error::Config(format!("unknown LLM provider {p:?}; use openai (any OpenAI-compatible server) or anthropic"))
        })?),
    };
    let model = layer!(
        "llm.model",
        file.llm.model.clone(),
        e("AGENT_DB_MODEL"),
        o.model.clone()
    )
    .or_else(|| llm_provider.map(|k| default_model(k).to_string()));
    let base_url = layer!(
        "llm.base_url",
        file.llm.base_url.clone(),
        e("AGENT_DB_BASE_URL"),
        o.base_url.clone()
    )
    .map(|u| u.trim_end_matches('/').to_string())
    .or_else(|| llm_provider.map(|k| k.default_base_url().to_string()));

    // The key: AGENT_DB_API_KEY > the provider's own variable > the config file.
    let (api_key, api_key_source) = {
        let provider_var = match llm_provider {
            Some(ProviderKind::OpenAi) => Some("OPENAI_API_KEY"),
            Some(ProviderKind::Anthropic) => Some("ANTHROPIC_API_KEY"),
            None => None,
        };
        if let Some(k) = e("AGENT_DB_API_KEY") {
            (Some(Secret::new(k)), Some("AGENT_DB_API_KEY".to_string()))
        } else if let Some(k) = provider_var.and_then(&e) {
            (Some(Secret::new(k)), provider_var.map(str::to_string))
        } else if let Some(k) = file.llm.api_key.clone().filter(|k| !k.is_empty()) {
            (Some(Secret::new(k)), Some("config file".to_string()))
        } else {
            (None, None)
        }
    };

    let env_num = |k: &str| -> Result<Option<u64>> {
        e(k).map(|v| {
            v.trim()
                .parse::<u64>()
                .map_err(|_| Error::Config(format!("{k}: not a number: {v:?}")))
        })
        .transpose()
    };
    let env_f64 = |k: &str| -> Result<Option<f64>> {
        e(k).map(|v| {
            v.trim()
                .parse::<f64>()
                .map_err(|_| Error::Config(format!("{k}: not a number: {v:?}")))
        })
        .transpose()
    };
    let max_summary_tokens = layer!(
        "llm.max_summary_tokens",
        file.llm.max_summary_tokens,
        env_num("AGENT_DB_MAX_SUMMARY_TOKENS")?.map(|n| n as u32),
        o.max_summary_tokens
    )
    .unwrap_or(DEFAULT_MAX_SUMMARY_TOKENS);
    let summary_context = layer!(
        "llm.summary_context",
        file.llm.summary_context,
        env_num("AGENT_DB_SUMMARY_CONTEXT")?.map(|n| n as usize),
        o.summary_context
    );
    let file_timeout = file
        .llm
        .timeout
        .as_deref()
        .map(|t| parse_duration("llm.timeout", t))
        .transpose()?;
    let env_timeout = e("AGENT_DB_TIMEOUT")
        .map(|t| parse_duration("AGENT_DB_TIMEOUT", &t))
        .transpose()?;
    let timeout =
        layer!("llm.timeout", file_timeout, env_timeout, o.timeout).unwrap_or(DEFAULT_TIMEOUT);
    let max_retries = layer!(
        "llm.max_retries",
        file.llm.max_retries,
        env_num("AGENT_DB_MAX_RETRIES")?.map(|n| n as usize),
        None::<usize>
    )
    .unwrap_or(DEFAULT_MAX_RETRIES);
    let recipe = layer!(
        "llm.recipe",
        file.llm.recipe.clone(),
        e("AGENT_DB_RECIPE"),
        o.recipe.clone()
    );
    let instructions = layer!(
        "llm.instructions",
        file.llm.instructions.clone(),
        e("AGENT_DB_INSTRUCTIONS"),
        o.instructions.clone()
    );
    let max_cost = layer!(
        "llm.max_cost",
        file.llm.max_cost,
        env_f64("AGENT_DB_MAX_COST")?,
        o.max_cost
    );
    let concurrency = layer!(
        "compact.concurrency",
        file.compact.concurrency,
        env_num("AGENT_DB_CONCURRENCY")?.map(|n| n as usize),
        o.concurrency
    )
    .unwrap_or(DEFAULT_CONCURRENCY)
    .max(1);
    let keep_tokens = file.compact.keep_tokens;
    let target = layer!(
        "compact.target",
        file.compact.target,
        env_f64("AGENT_DB_TARGET")?,
        o.target
    )
    .unwrap_or(crate::plan::DEFAULT_TARGET);
    if !(target > 0.0 && target <= 1.0) {
        return Err(Error::Config(format!(
            "compact.target / AGENT_DB_TARGET / --target takes a utilization ratio greater than 0 and at most 1, such as 0.4; got {target}"
        )));
    }
    let defaults = crate::plan::StallGuard::default();
    let stall = crate::plan::StallGuard {
        min_new_messages: layer!(
            "compact.stall_min_new_messages",
            file.compact.stall_min_new_messages,
            env_num("AGENT_DB_STALL_MIN_NEW_MESSAGES")?.map(|n| n as usize),
            None::<usize>
        )
        .unwrap_or(defaults.min_new_messages),
        min_saving: layer!(
            "compact.stall_min_saving",
            file.compact.stall_min_saving,
            env_f64("AGENT_DB_STALL_MIN_SAVING")?,
            None::<f64>
        )
        .unwrap_or(defaults.min_saving),
    };
    let hook_dirs = file.hooks.dirs.clone().unwrap_or_default();
    let file_hook_timeout = file
        .hooks
        .timeout
        .as_deref()
        .map(|t| parse_duration("hooks.timeout", t))
        .transpose()?;
    let env_hook_timeout = e("AGENT_DB_HOOK_TIMEOUT")
        .map(|t| parse_duration("AGENT_DB_HOOK_TIMEOUT", &t))
        .transpose()?;
    let hook_timeout = layer!(
        "hooks.timeout",
        file_hook_timeout,
        env_hook_timeout,
        o.hook_timeout
    )
    .unwrap_or(DEFAULT_HOOK_TIMEOUT);
    let hook_fail_open = file.hooks.fail_open.unwrap_or(false);
    let prices = file
        .prices
        .iter()
        .map(|(k, p)| {
            (
                k.clone(),
                Price {
                    input_per_mtok: p.input_per_mtok,
                    output_per_mtok: p.output_per_mtok,
                },
            )
        })
        .collect();
    Ok(Settings {
        config_file: path,
        llm_provider,
        model,
        base_url,
        api_key,
        api_key_source,
        max_summary_tokens,
        summary_context,
        timeout,
        max_retries,
        recipe,
        instructions,
        max_cost,
        concurrency,
        keep_tokens,
        target,
        stall,
        hook_dirs,
        hook_timeout,
        hook_fail_open,
        prices,
        context_limits: file.context_limits.clone(),
        store_agent,
        store_path: file.store.path.clone(),
        sources,
    })
}

fn read_file(p: &Path) -> Result<FileConfig> {
    let text =
        std::fs::read_to_string(p).map_err(|e| Error::Config(format!("{}: {e}", p.display())))?;
    toml::from_str(&text).map_err(|e| Error::Config(format!("{}: {e}", p.display())))
}

impl Settings {
    /// The price of the configured model: config `[prices]` first, then the built-in table.
    pub fn price(&self, model: &str) -> Option<Price> {
        self.prices
            .get(model)
            .cloned()
            .or_else(|| crate::provider::pricing::builtin(model))
    }

    /// The request budget: `llm.summary_context`, else 80% of the summarizer's context window
    /// minus the summary it must leave room for, else 32,000 tokens for unknown models (local
    /// servers), always at least 2,000.
    pub fn summary_budget(&self) -> usize {
        if let Some(n) = self.summary_context {
            return n.max(2_000);
        }
        let window = self
            .model
            .as_deref()
            .and_then(|m| crate::models::context_limit(m, &self.context_limits));
        match window {
            Some(w) => ((w as f64 * 0.8) as usize)
                .saturating_sub(self.max_summary_tokens as usize)
                .clamp(2_000, 400_000),
            None => 32_000,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env_of(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let m: BTreeMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |k| m.get(k).cloned()
    }

    #[test]
    fn layers_file_env_flag() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("c.toml");
        std::fs::write(
            &f,
            "[llm]\nprovider = \"anthropic\"\nmodel = \"from-file\"\napi_key = \"file-key\"\ntimeout = \"10s\"\n",
        )
        .unwrap();
        let o = Overrides {
            config: Some(f.clone()),
            ..Default::default()
        };
        let s = load_with(&o, &env_of(&[])).unwrap();
        assert_eq!(s.llm_provider, Some(ProviderKind::Anthropic));
        assert_eq!(s.model.as_deref(), Some("from-file"));
        assert_eq!(s.timeout, Duration::from_secs(10));
        assert_eq!(s.api_key_source.as_deref(), Some("config file"));
        let s = load_with(
            &o,
            &env_of(&[
                ("AGENT_DB_MODEL", "from-env"),
                ("ANTHROPIC_API_KEY", "env-key"),
            ]),
        )
        .unwrap();
        assert_eq!(s.model.as_deref(), Some("from-env"));
        assert_eq!(s.api_key.as_ref().unwrap().expose(), "env-key");
        let o2 = Overrides {
            model: Some("from-flag".into()),
            ..o
        };
        let s = load_with(&o2, &env_of(&[("AGENT_DB_MODEL", "from-env")])).unwrap();
        assert_eq!(s.model.as_deref(), Some("from-flag"));
        assert_eq!(s.sources["llm.model"], "flag");
        let json = serde_json::to_string(&s).unwrap();
        assert!(!json.contains("file-key") && json.contains("[redacted]"));
    }

    #[test]
    fn no_provider_means_offline_and_bad_values_are_config_errors() {
        let s = load_with(&Overrides::default(), &env_of(&[("OPENAI_API_KEY", "k")])).unwrap();
        assert_eq!(s.llm_provider, None);
        assert!(s.api_key.is_none(), "a key alone must not enable an LLM");
        let e = load_with(
            &Overrides::default(),
            &env_of(&[("AGENT_DB_LLM_PROVIDER", "gemini")]),
        )
        .unwrap_err();
        assert_eq!(e.exit_code(), crate::error::exit::CONFIG);
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("c.toml");
        std::fs::write(&f, "[llm]\nbogus = 1\n").unwrap();
        let e = load_with(
            &Overrides {
                config: Some(f),
                ..Default::default()
            },
            &env_of(&[]),
        )
        .unwrap_err();
        assert!(e.to_string().contains("bogus"), "{e}");
    }
}

//! Settings: the one place that decides every setting's value and the layer it came from.
//!
//! Layers, each overriding the ones before it: built-in defaults < config file
//! (`$XDG_CONFIG_HOME/agent-db/config.toml`, or `--config PATH`) < `AGENT_DB_*` environment <
//! the recipe's frontmatter ([`Settings::apply_recipe`], once the LLM strategy has found its
//! recipe) < command-line flags ([`Overrides`]). [`load`] reads the file and the environment
//! once per command; [`Settings::sources`] records each value's layer, and
//! [`Settings::rows`] is what `agent-db config` shows. Every key and variable is listed in
//! docs/configuration.md. The API key is held in a [`Secret`] and never printed.

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
    temperature: Option<f64>,
    mask_observations: Option<bool>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct CompactSection {
    concurrency: Option<usize>,
    keep_tokens: Option<usize>,
    target: Option<f64>,
    stall_min_new_messages: Option<usize>,
    stall_min_saving: Option<f64>,
    min_saving: Option<f64>,
    min_retention: Option<f64>,
    busy_wait: Option<String>,
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
    pub temperature: Option<f64>,
    pub mask_observations: Option<bool>,
    pub concurrency: Option<usize>,
    pub max_cost: Option<f64>,
    pub hook_timeout: Option<Duration>,
    pub target: Option<f64>,
    pub keep_tokens: Option<usize>,
    pub min_retention: Option<f64>,
}

/// The layer a setting's value came from, in order of precedence (a later one wins).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub enum Source {
    #[serde(rename = "default")]
    Default,
    /// The config file found at its default location (only `config_file` itself).
    #[serde(rename = "default location")]
    DefaultLocation,
    #[serde(rename = "config file")]
    ConfigFile,
    #[serde(rename = "environment")]
    Environment,
    /// The recipe's frontmatter (`model`, `max_summary_tokens`, `keep_tokens`).
    #[serde(rename = "recipe")]
    Recipe,
    #[serde(rename = "flag")]
    Flag,
}

impl std::fmt::Display for Source {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Source::Default => "default",
            Source::DefaultLocation => "default location",
            Source::ConfigFile => "config file",
            Source::Environment => "environment",
            Source::Recipe => "recipe",
            Source::Flag => "flag",
        })
    }
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
    /// The summarizer's sampling temperature (`llm.temperature`, `--temperature`; default 0).
    pub temperature: f64,
    /// Elide old successful tool outputs from the summarizer's transcript
    /// (`llm.mask_observations`, `--mask-observations`).
    pub mask_observations: bool,
    pub concurrency: usize,
    pub keep_tokens: Option<usize>,
    /// The utilization a compaction lands at or under (`compact.target`, `--target`).
    pub target: f64,
    /// The stall guard's thresholds (`compact.stall_*`); `--force` turns it off.
    pub stall: StallGuard,
    /// The least share of its tokens a compaction must save to be written
    /// (`compact.min_saving`); `--force` turns it off.
    pub min_saving: f64,
    /// The least retention score a compaction must reach to be written
    /// (`compact.min_retention`); `None`: not set, so the strategy's default applies
    /// ([`DEFAULT_LLM_MIN_RETENTION`] for `llm`, off otherwise).
    pub min_retention: Option<f64>,
    /// How long a write waits, retrying with backoff, while another process holds the store's
    /// write lock (`compact.busy_wait`).
    #[serde(with = "humantime_serde_compat")]
    pub busy_wait: Duration,
    pub hook_dirs: Vec<PathBuf>,
    #[serde(with = "humantime_serde_compat")]
    pub hook_timeout: Duration,
    pub hook_fail_open: bool,
    #[serde(serialize_with = "prices_json")]
    pub prices: BTreeMap<String, Price>,
    pub context_limits: BTreeMap<String, i64>,
    /// `[store] agent`: a store kind's name (`kodelet`, `docker-agent`, `goose`, `opencode`, `kilo`),
    /// whose default store is used.
    pub store_agent: Option<String>,
    /// `[store] path`: the store file (`--db`, `AGENT_DB_PATH` and `--agent` win).
    pub store_path: Option<PathBuf>,
    /// Which layer each setting came from (absent: the default).
    pub sources: BTreeMap<String, Source>,
    /// agent-db's config directory (user recipes and hooks live under it); not a setting.
    #[serde(skip)]
    pub config_dir: PathBuf,
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
    let mut l = Layers {
        env,
        sources: BTreeMap::new(),
    };
    let (path, file) = l.config_file(o)?;
    let mut s = Settings::defaults(path, config_dir(env));
    l.store_and_tables(&mut s, &file)?;
    l.llm(&mut s, &file.llm, o)?;
    l.api_key(&mut s, &file.llm);
    l.llm_limits(&mut s, &file.llm, o)?;
    l.compact(&mut s, &file.compact, o)?;
    l.hooks(&mut s, &file.hooks, o)?;
    s.sources = l.sources;
    Ok(s)
}

/// The layers being read, and the source of every value taken from them.
struct Layers<'a> {
    env: &'a dyn Fn(&str) -> Option<String>,
    sources: BTreeMap<String, Source>,
}

impl Layers<'_> {
    /// A variable's value; set to the empty string counts as unset.
    fn var(&self, k: &str) -> Option<String> {
        (self.env)(k).filter(|v| !v.is_empty())
    }

    /// A number from the environment; one that does not parse is a configuration error.
    fn var_num<T: std::str::FromStr>(&self, k: &str) -> Result<Option<T>> {
        self.var(k)
            .map(|v| {
                v.trim()
                    .parse::<T>()
                    .map_err(|_| Error::Config(format!("{k}: not a number: {v:?}")))
            })
            .transpose()
    }

    /// A whole number from the environment (read as u64, like the file's integers).
    fn var_u64(&self, k: &str) -> Result<Option<u64>> {
        self.var_num::<u64>(k)
    }

    fn var_duration(&self, k: &str) -> Result<Option<Duration>> {
        self.var(k).map(|t| parse_duration(k, &t)).transpose()
    }

    /// The layered value of `key`: the flag, else the environment, else the file; the layer it
    /// came from is recorded. `None` leaves the default to the caller.
    fn pick<T>(
        &mut self,
        key: &str,
        file: Option<T>,
        env: Option<T>,
        flag: Option<T>,
    ) -> Option<T> {
        let (v, src) = match (flag, env, file) {
            (Some(v), _, _) => (v, Source::Flag),
            (None, Some(v), _) => (v, Source::Environment),
            (None, None, Some(v)) => (v, Source::ConfigFile),
            (None, None, None) => return None,
        };
        self.sources.insert(key.to_string(), src);
        Some(v)
    }

    /// The config file: `--config`, else `AGENT_DB_CONFIG` (either must exist), else the
    /// default location when a file is there.
    fn config_file(&mut self, o: &Overrides) -> Result<(Option<PathBuf>, FileConfig)> {
        let explicit = match (&o.config, self.var("AGENT_DB_CONFIG")) {
            (Some(p), _) => Some((p.clone(), Source::Flag)),
            (None, Some(p)) => Some((PathBuf::from(p), Source::Environment)),
            (None, None) => None,
        };
        let found = explicit.or_else(|| {
            let p = config_dir(self.env).join("config.toml");
            p.is_file().then_some((p, Source::DefaultLocation))
        });
        match found {
            Some((p, how)) => {
                let file = read_file(&p)?;
                self.sources.insert("config_file".to_string(), how);
                Ok((Some(p), file))
            }
            None => Ok((None, FileConfig::default())),
        }
    }

    /// `[store]`, `[prices]` and `[context_limits]`: config file only.
    fn store_and_tables(&mut self, s: &mut Settings, file: &FileConfig) -> Result<()> {
        if let Some(a) = &file.store.agent {
            if crate::store::StoreKind::parse(a).is_none() {
                let known: Vec<String> = crate::store::StoreKind::all()
                    .map(|k| format!("{:?}", k.name()))
                    .collect();
                return Err(Error::Config(format!(
                    "{}: [store] agent = {a:?}: expected one of {}",
                    s.config_file
                        .as_deref()
                        .unwrap_or(Path::new("config"))
                        .display(),
                    known.join(", ")
                )));
            }
        }
        s.store_agent = self.pick("store.agent", file.store.agent.clone(), None, None);
        s.store_path = self.pick("store.path", file.store.path.clone(), None, None);
        let prices: BTreeMap<String, Price> = file
            .prices
            .iter()
            .map(|(k, p)| {
                let price = Price {
                    input_per_mtok: p.input_per_mtok,
                    output_per_mtok: p.output_per_mtok,
                };
                (k.clone(), price)
            })
            .collect();
        let some = |m: BTreeMap<String, Price>| (!m.is_empty()).then_some(m);
        s.prices = self
            .pick("prices", some(prices), None, None)
            .unwrap_or_default();
        let limits = (!file.context_limits.is_empty()).then(|| file.context_limits.clone());
        s.context_limits = self
            .pick("context_limits", limits, None, None)
            .unwrap_or_default();
        Ok(())
    }

    /// The provider and, from it, the model's and base URL's defaults.
    fn llm(&mut self, s: &mut Settings, f: &LlmSection, o: &Overrides) -> Result<()> {
        let provider_env = self.var("AGENT_DB_LLM_PROVIDER");
        let text = self.pick(
            "llm.provider",
            f.provider.clone(),
            provider_env,
            o.llm_provider.clone(),
        );
        s.llm_provider = match text.as_deref() {
            None | Some("none") | Some("") => None,
            Some(p) => Some(ProviderKind::parse(p).ok_or_else(|| {
                Error::Config(format!(
                    "unknown LLM provider {p:?}; use {}",
                    crate::provider::table::accepted()
                ))
            })?),
        };
        let model_env = self.var("AGENT_DB_MODEL");
        s.model = self
            .pick("llm.model", f.model.clone(), model_env, o.model.clone())
            .or_else(|| s.llm_provider.map(|k| k.default_model().to_string()));
        let url_env = self.var("AGENT_DB_BASE_URL");
        s.base_url = self
            .pick(
                "llm.base_url",
                f.base_url.clone(),
                url_env,
                o.base_url.clone(),
            )
            .map(|u| u.trim_end_matches('/').to_string())
            .or_else(|| s.llm_provider.map(|k| k.default_base_url().to_string()));
        Ok(())
    }

    /// The key: `AGENT_DB_API_KEY` > the provider's own variables > the config file. A key
    /// alone never enables the LLM, and nothing is read before a provider is set.
    fn api_key(&mut self, s: &mut Settings, f: &LlmSection) {
        // Without a provider, only AGENT_DB_API_KEY (it serves any provider).
        let vars: Vec<&str> = match s.llm_provider {
            Some(k) => k.key_vars().collect(),
            None => vec![crate::provider::table::GENERIC_KEY_VAR],
        };
        let found = vars
            .iter()
            .find_map(|var| self.var(var).map(|k| (k, var.to_string())))
            .or_else(|| {
                f.api_key
                    .clone()
                    .filter(|k| !k.is_empty())
                    .map(|k| (k, Source::ConfigFile.to_string()))
            });
        (s.api_key, s.api_key_source) = match found {
            Some((k, from)) => (Some(Secret::new(k)), Some(from)),
            None => (None, None),
        };
    }

    /// The summarizer's limits and prompt: lengths, timeout, retries, recipe, instructions,
    /// spending cap.
    fn llm_limits(&mut self, s: &mut Settings, f: &LlmSection, o: &Overrides) -> Result<()> {
        let env = self.var_u64("AGENT_DB_MAX_SUMMARY_TOKENS")?;
        s.max_summary_tokens = self
            .pick(
                "llm.max_summary_tokens",
                f.max_summary_tokens,
                env.map(|n| n as u32),
                o.max_summary_tokens,
            )
            .unwrap_or(DEFAULT_MAX_SUMMARY_TOKENS);
        let env = self.var_u64("AGENT_DB_SUMMARY_CONTEXT")?;
        s.summary_context = self.pick(
            "llm.summary_context",
            f.summary_context,
            env.map(|n| n as usize),
            o.summary_context,
        );
        let file_timeout = f
            .timeout
            .as_deref()
            .map(|t| parse_duration("llm.timeout", t))
            .transpose()?;
        let env = self.var_duration("AGENT_DB_TIMEOUT")?;
        s.timeout = self
            .pick("llm.timeout", file_timeout, env, o.timeout)
            .unwrap_or(DEFAULT_TIMEOUT);
        let env = self.var_u64("AGENT_DB_MAX_RETRIES")?;
        s.max_retries = self
            .pick(
                "llm.max_retries",
                f.max_retries,
                env.map(|n| n as usize),
                None,
            )
            .unwrap_or(DEFAULT_MAX_RETRIES);
        let env = self.var("AGENT_DB_RECIPE");
        s.recipe = self.pick("llm.recipe", f.recipe.clone(), env, o.recipe.clone());
        let env = self.var("AGENT_DB_INSTRUCTIONS");
        s.instructions = self.pick(
            "llm.instructions",
            f.instructions.clone(),
            env,
            o.instructions.clone(),
        );
        let env = self.var_num::<f64>("AGENT_DB_MAX_COST")?;
        s.max_cost = self.pick("llm.max_cost", f.max_cost, env, o.max_cost);
        s.temperature = self
            .pick("llm.temperature", f.temperature, None, o.temperature)
            .unwrap_or(0.0);
        if !(0.0..=2.0).contains(&s.temperature) {
            return Err(Error::Config(format!(
                "llm.temperature must be between 0 and 2, got {}",
                s.temperature
            )));
        }
        s.mask_observations = self
            .pick(
                "llm.mask_observations",
                f.mask_observations,
                None,
                o.mask_observations,
            )
            .unwrap_or(false);
        Ok(())
    }

    /// `[compact]`: concurrency, the tail budget, the target and the stall guard.
    fn compact(&mut self, s: &mut Settings, f: &CompactSection, o: &Overrides) -> Result<()> {
        let env = self.var_u64("AGENT_DB_CONCURRENCY")?;
        s.concurrency = self
            .pick(
                "compact.concurrency",
                f.concurrency,
                env.map(|n| n as usize),
                o.concurrency,
            )
            .unwrap_or(DEFAULT_CONCURRENCY)
            .max(1);
        let env = self.var_u64("AGENT_DB_KEEP_TOKENS")?;
        s.keep_tokens = self.pick(
            "compact.keep_tokens",
            f.keep_tokens,
            env.map(|n| n as usize),
            o.keep_tokens,
        );
        let env = self.var_num::<f64>("AGENT_DB_TARGET")?;
        s.target = self
            .pick("compact.target", f.target, env, o.target)
            .unwrap_or(DEFAULT_TARGET);
        if !(s.target > 0.0 && s.target <= 1.0) {
            return Err(Error::Config(format!(
                "compact.target / AGENT_DB_TARGET / --target takes a utilization ratio greater than 0 and at most 1, such as 0.4; got {}",
                s.target
            )));
        }
        let env = self.var_u64("AGENT_DB_STALL_MIN_NEW_MESSAGES")?;
        if let Some(n) = self.pick(
            "compact.stall_min_new_messages",
            f.stall_min_new_messages,
            env.map(|n| n as usize),
            None,
        ) {
            s.stall.min_new_messages = n;
        }
        let env = self.var_num::<f64>("AGENT_DB_STALL_MIN_SAVING")?;
        if let Some(x) = self.pick("compact.stall_min_saving", f.stall_min_saving, env, None) {
            s.stall.min_saving = x;
        }
        let env = self.var_num::<f64>("AGENT_DB_MIN_SAVING")?;
        if let Some(x) = self.pick("compact.min_saving", f.min_saving, env, None) {
            if !(0.0..1.0).contains(&x) {
                return Err(Error::Config(format!(
                    "compact.min_saving / AGENT_DB_MIN_SAVING takes a share from 0 (any saving) to below 1, such as 0.1; got {x}"
                )));
            }
            s.min_saving = x;
        }
        let env = self.var_num::<f64>("AGENT_DB_MIN_RETENTION")?;
        if let Some(x) = self.pick(
            "compact.min_retention",
            f.min_retention,
            env,
            o.min_retention,
        ) {
            if !(0.0..=1.0).contains(&x) {
                return Err(Error::Config(format!(
                    "compact.min_retention / AGENT_DB_MIN_RETENTION takes a retention score from 0 to 1, such as 0.9; got {x}"
                )));
            }
            s.min_retention = Some(x);
        }
        let file_wait = f
            .busy_wait
            .as_deref()
            .map(|t| parse_duration("compact.busy_wait", t))
            .transpose()?;
        let env = self.var_duration("AGENT_DB_BUSY_WAIT")?;
        if let Some(d) = self.pick("compact.busy_wait", file_wait, env, None) {
            s.busy_wait = d;
        }
        Ok(())
    }

    /// `[hooks]`: extra directories, the timeout, fail open.
    fn hooks(&mut self, s: &mut Settings, f: &HooksSection, o: &Overrides) -> Result<()> {
        s.hook_dirs = self
            .pick("hooks.dirs", f.dirs.clone(), None, None)
            .unwrap_or_default();
        let file_timeout = f
            .timeout
            .as_deref()
            .map(|t| parse_duration("hooks.timeout", t))
            .transpose()?;
        let env = self.var_duration("AGENT_DB_HOOK_TIMEOUT")?;
        s.hook_timeout = self
            .pick("hooks.timeout", file_timeout, env, o.hook_timeout)
            .unwrap_or(DEFAULT_HOOK_TIMEOUT);
        s.hook_fail_open = self
            .pick("hooks.fail_open", f.fail_open, None, None)
            .unwrap_or(false);
        Ok(())
    }
}

fn read_file(p: &Path) -> Result<FileConfig> {
    let text = std::fs::read_to_string(p).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => {
            Error::Config(format!("{}: no such config file", p.display()))
        }
        _ => Error::Config(format!("{}: {e}", p.display())),
    })?;
    toml::from_str(&text).map_err(|e| Error::Config(format!("{}: {e}", p.display())))
}

/// The settings' JSON field names and the keys (as in the config file) they are shown and
/// sourced under; fields not listed are shown under their own name.
const KEYS: &[(&str, &str)] = &[
    ("llm_provider", "llm.provider"),
    ("model", "llm.model"),
    ("base_url", "llm.base_url"),
    ("api_key", "llm.api_key"),
    ("max_summary_tokens", "llm.max_summary_tokens"),
    ("summary_context", "llm.summary_context"),
    ("timeout", "llm.timeout"),
    ("max_retries", "llm.max_retries"),
    ("recipe", "llm.recipe"),
    ("instructions", "llm.instructions"),
    ("max_cost", "llm.max_cost"),
    ("temperature", "llm.temperature"),
    ("mask_observations", "llm.mask_observations"),
    ("concurrency", "compact.concurrency"),
    ("keep_tokens", "compact.keep_tokens"),
    ("target", "compact.target"),
    ("min_saving", "compact.min_saving"),
    ("min_retention", "compact.min_retention"),
    ("busy_wait", "compact.busy_wait"),
    ("hook_dirs", "hooks.dirs"),
    ("hook_timeout", "hooks.timeout"),
    ("hook_fail_open", "hooks.fail_open"),
    ("store_agent", "store.agent"),
    ("store_path", "store.path"),
];

/// One line of `agent-db config`: the key, its value as JSON, and where it came from.
#[derive(Debug, Clone, PartialEq)]
pub struct Shown {
    pub key: String,
    pub value: serde_json::Value,
    pub from: String,
}

impl Settings {
    /// Every setting at its built-in default.
    fn defaults(config_file: Option<PathBuf>, config_dir: PathBuf) -> Settings {
        Settings {
            config_file,
            llm_provider: None,
            model: None,
            base_url: None,
            api_key: None,
            api_key_source: None,
            max_summary_tokens: DEFAULT_MAX_SUMMARY_TOKENS,
            summary_context: None,
            timeout: DEFAULT_TIMEOUT,
            max_retries: DEFAULT_MAX_RETRIES,
            recipe: None,
            instructions: None,
            max_cost: None,
            temperature: 0.0,
            mask_observations: false,
            concurrency: DEFAULT_CONCURRENCY,
            keep_tokens: None,
            target: DEFAULT_TARGET,
            stall: StallGuard::default(),
            min_saving: DEFAULT_MIN_SAVING,
            min_retention: None,
            busy_wait: DEFAULT_BUSY_WAIT,
            hook_dirs: Vec::new(),
            hook_timeout: DEFAULT_HOOK_TIMEOUT,
            hook_fail_open: false,
            prices: BTreeMap::new(),
            context_limits: BTreeMap::new(),
            store_agent: None,
            store_path: None,
            sources: BTreeMap::new(),
            config_dir,
        }
    }

    /// The retention floor for `strategy` (its name): the one set, else
    /// [`DEFAULT_LLM_MIN_RETENTION`] for `llm`, else none.
    pub fn min_retention_for(&self, strategy: &str) -> Option<f64> {
        self.min_retention
            .or((strategy == "llm").then_some(DEFAULT_LLM_MIN_RETENTION))
    }

    /// The layer `key` (`llm.model`, `compact.keep_tokens`, …) came from.
    pub fn source(&self, key: &str) -> Source {
        self.sources.get(key).copied().unwrap_or(Source::Default)
    }

    /// The recipe's layer: its `model`, `max_summary_tokens` and `keep_tokens` win over the
    /// environment, the config file and the defaults; a flag wins over them.
    pub fn apply_recipe(&mut self, r: &crate::recipe::Recipe) {
        let sources = &mut self.sources;
        let mut take = |key: &str| {
            let wins = sources.get(key).copied().unwrap_or(Source::Default) < Source::Recipe;
            if wins {
                sources.insert(key.to_string(), Source::Recipe);
            }
            wins
        };
        if let Some(m) = &r.model {
            if take("llm.model") {
                self.model = Some(m.clone());
            }
        }
        if let Some(n) = r.max_summary_tokens {
            if take("llm.max_summary_tokens") {
                self.max_summary_tokens = n;
            }
        }
        if let Some(n) = r.keep_tokens {
            if take("compact.keep_tokens") {
                self.keep_tokens = Some(n);
            }
        }
    }

    /// What `agent-db config` shows: every setting under its config-file key (the stall guard
    /// as its two keys), with its value and its layer (for the key: the variable it came from).
    pub fn rows(&self) -> Vec<Shown> {
        let v = serde_json::to_value(self).unwrap_or_default();
        let mut rows = Vec::new();
        let Some(obj) = v.as_object() else {
            return rows;
        };
        for (field, value) in obj {
            let key = KEYS
                .iter()
                .find(|(f, _)| f == field)
                .map_or(field.as_str(), |(_, k)| k);
            let from = self.source(key).to_string();
            match field.as_str() {
                // The key's source is shown on the llm.api_key row itself.
                "sources" | "api_key_source" => {}
                "api_key" => rows.push(Shown {
                    key: key.into(),
                    value: value.clone(),
                    from: self.api_key_source.clone().unwrap_or_else(|| "-".into()),
                }),
                "stall" => {
                    for (k, x) in value.as_object().into_iter().flatten() {
                        let key = format!("compact.stall_{k}");
                        let from = self.source(&key).to_string();
                        rows.push(Shown {
                            key,
                            value: x.clone(),
                            from,
                        });
                    }
                }
                _ => rows.push(Shown {
                    key: key.into(),
                    value: value.clone(),
                    from,
                }),
            }
        }
        rows
    }

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

/// The stall guard: a conversation agent-db compacted recently, or whose last compaction barely
/// helped, is left alone, so a batch never grinds the same conversation down run after run.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct StallGuard {
    /// Skip when fewer messages than this were added since agent-db's last compaction.
    pub min_new_messages: usize,
    /// Skip when agent-db's last compaction saved less than this share of the tokens.
    pub min_saving: f64,
}

impl Default for StallGuard {
    fn default() -> Self {
        StallGuard {
            min_new_messages: 10,
            min_saving: 0.1,
        }
    }
}

/// The default `compact.min_saving`: a compaction that saves less than 10% of its tokens is not
/// written.
pub const DEFAULT_MIN_SAVING: f64 = 0.1;

/// The retention floor of the `llm` strategy when none is set (`compact.min_retention`,
/// `--min-retention`). Its summaries carry the artifact ledger (paths, commands, to-dos, rules),
/// but errors, identifiers and URLs are the model's to keep and the ledger is bounded: ordinary
/// model summaries score 0.86-1.0 in the tests, so 0.9 would refuse about one in five of them.
pub const DEFAULT_LLM_MIN_RETENTION: f64 = 0.8;

/// The default `compact.busy_wait`.
pub const DEFAULT_BUSY_WAIT: Duration = Duration::from_secs(30);

/// The default `--target`.
pub const DEFAULT_TARGET: f64 = 0.4;

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
        assert_eq!(s.sources["llm.model"], Source::Flag);
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

    fn recipe(model: &str, max_summary_tokens: u32, keep_tokens: usize) -> crate::recipe::Recipe {
        let text = format!(
            "---\nname: r\nmodel: {model}\nmax_summary_tokens: {max_summary_tokens}\nkeep_tokens: {keep_tokens}\n---\nbody\n"
        );
        crate::recipe::parse(&text, "r", "test").unwrap()
    }

    #[test]
    fn the_recipe_beats_environment_and_file_but_not_flags() {
        let env = env_of(&[
            ("AGENT_DB_LLM_PROVIDER", "openai"),
            ("AGENT_DB_MODEL", "env-model"),
            ("AGENT_DB_KEEP_TOKENS", "111"),
        ]);
        let mut s = load_with(&Overrides::default(), &env).unwrap();
        assert_eq!(s.source("compact.keep_tokens"), Source::Environment);
        s.apply_recipe(&recipe("recipe-model", 900, 222));
        assert_eq!(s.model.as_deref(), Some("recipe-model"));
        assert_eq!(s.max_summary_tokens, 900);
        assert_eq!(s.keep_tokens, Some(222));
        for k in ["llm.model", "llm.max_summary_tokens", "compact.keep_tokens"] {
            assert_eq!(s.source(k), Source::Recipe, "{k}");
        }
        let flags = Overrides {
            model: Some("flag-model".into()),
            max_summary_tokens: Some(333),
            keep_tokens: Some(444),
            ..Default::default()
        };
        let mut s = load_with(&flags, &env).unwrap();
        s.apply_recipe(&recipe("recipe-model", 900, 222));
        assert_eq!(
            (s.model.as_deref(), s.max_summary_tokens, s.keep_tokens),
            (Some("flag-model"), 333, Some(444))
        );
        assert_eq!(s.source("compact.keep_tokens"), Source::Flag);
    }

    #[test]
    fn min_retention_layers_and_the_llm_default() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("c.toml");
        std::fs::write(&f, "[compact]\nmin_retention = 0.7\n").unwrap();
        let file = Overrides {
            config: Some(f.clone()),
            ..Default::default()
        };
        // Nothing set: llm gets the documented floor, the others none.
        let s = load_with(&Overrides::default(), &env_of(&[])).unwrap();
        assert_eq!(s.min_retention, None);
        assert_eq!(s.min_retention_for("llm"), Some(0.8));
        assert_eq!(s.min_retention_for("extractive"), None);
        assert_eq!(s.min_retention_for("prune"), None);
        // The file, then the environment, then the flag win; a set floor holds for every strategy.
        let s = load_with(&file, &env_of(&[])).unwrap();
        assert_eq!(
            (s.min_retention_for("llm"), s.min_retention_for("prune")),
            (Some(0.7), Some(0.7))
        );
        assert_eq!(s.source("compact.min_retention"), Source::ConfigFile);
        let s = load_with(&file, &env_of(&[("AGENT_DB_MIN_RETENTION", "0.8")])).unwrap();
        assert_eq!(s.min_retention, Some(0.8));
        assert_eq!(s.source("compact.min_retention"), Source::Environment);
        let flag = Overrides {
            min_retention: Some(0.0),
            ..file
        };
        let s = load_with(&flag, &env_of(&[("AGENT_DB_MIN_RETENTION", "0.8")])).unwrap();
        assert_eq!(s.min_retention_for("llm"), Some(0.0));
        assert_eq!(s.source("compact.min_retention"), Source::Flag);
        // Out of range in the environment or the file is a config error.
        for bad in ["1.5", "-0.1"] {
            let e = load_with(
                &Overrides::default(),
                &env_of(&[("AGENT_DB_MIN_RETENTION", bad)]),
            )
            .unwrap_err();
            assert!(
                matches!(&e, Error::Config(m) if m.contains("compact.min_retention")),
                "{e}"
            );
        }
        std::fs::write(&f, "[compact]\nmin_retention = 2\n").unwrap();
        let e = load_with(
            &Overrides {
                config: Some(f),
                ..Default::default()
            },
            &env_of(&[]),
        )
        .unwrap_err();
        assert!(matches!(e, Error::Config(_)), "{e}");
    }

    #[test]
    fn every_row_of_config_has_its_layer() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("c.toml");
        std::fs::write(
            &f,
            "[compact]\nkeep_tokens = 5\ntarget = 0.3\n[hooks]\nfail_open = true\n",
        )
        .unwrap();
        let o = Overrides {
            config: Some(f),
            ..Default::default()
        };
        let s = load_with(&o, &env_of(&[("AGENT_DB_STALL_MIN_SAVING", "0.2")])).unwrap();
        let from = |key: &str| {
            let rows = s.rows();
            let r = rows
                .iter()
                .find(|r| r.key == key)
                .unwrap_or_else(|| panic!("{key}"));
            (r.value.clone(), r.from.clone())
        };
        assert_eq!(
            from("compact.keep_tokens"),
            (5.into(), "config file".into())
        );
        assert_eq!(from("compact.target"), (0.3.into(), "config file".into()));
        assert_eq!(from("hooks.fail_open"), (true.into(), "config file".into()));
        assert_eq!(
            from("compact.stall_min_saving"),
            (0.2.into(), "environment".into())
        );
        assert_eq!(
            from("compact.stall_min_new_messages"),
            (10.into(), "default".into())
        );
        assert_eq!(from("config_file").1, "flag");
    }
}

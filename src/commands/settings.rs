//! `agent-db config` and `agent-db recipes`, and building the strategy from the settings.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use agent_db::compact::{llm::Llm, prune::Prune, Extractive, Strategy};
use agent_db::config::{self, Overrides, Settings};
use agent_db::error::exit;
use agent_db::provider::{Client, ClientConfig};
use agent_db::recipe::{self, Recipe};
use agent_db::Error;

use super::CmdResult;
use crate::cli::{CompactArgs, StrategyArg};
use crate::output::{self, table};

/// The flags that override configuration.
pub fn overrides(config: Option<PathBuf>, args: Option<&CompactArgs>) -> Overrides {
    let mut o = Overrides {
        config,
        ..Default::default()
    };
    if let Some(a) = args {
        let l = &a.llm;
        o.llm_provider = l.llm_provider.clone();
        o.model = l.model.clone();
        o.base_url = l.base_url.clone();
        o.max_summary_tokens = l.max_summary_tokens;
        o.summary_context = l.summary_context;
        o.timeout = l.timeout;
        o.recipe = l.recipe.clone();
        o.instructions = l.instructions.clone();
        o.concurrency = a.concurrency;
        o.max_cost = l.max_cost;
        o.hook_timeout = a.hook_timeout;
        o.target = a.target;
    }
    o
}

/// Discover the configured hooks.
pub fn discover_hooks(s: &Settings) -> Result<agent_db::hooks::Hooks, Error> {
    let dirs = agent_db::hooks::dirs(
        &config::config_dir(&|k| std::env::var(k).ok()),
        &s.hook_dirs,
    );
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| Error::Config(format!("cannot start the hook runner: {e}")))?;
    Ok(rt.block_on(agent_db::hooks::discover(
        &dirs,
        s.hook_timeout,
        s.hook_fail_open,
    )))
}

pub fn hooks(config: Option<PathBuf>, json: bool) -> CmdResult {
    let s = config::load(&overrides(config, None))?;
    let found = discover_hooks(&s)?;
    if json {
        let doc = serde_json::json!({
            "version": super::list::JSON_VERSION,
            "command": "hooks",
            "hooks": found.hooks,
            "ignored": found.ignored,
            "disabled": found.disabled,
            "timeout": humantime::format_duration(found.timeout).to_string(),
            "fail_open": found.fail_open,
        });
        output::out(&format!(
            "{}\n",
            serde_json::to_string_pretty(&doc).unwrap_or_default()
        ))?;
        return Ok(exit::OK);
    }
    if found.hooks.is_empty() {
        eprintln!("no hooks found");
    } else {
        let mut t = table::new(&["#", "HOOK", "EVENTS", "PATH"], &[0]);
        for (i, h) in found.hooks.iter().enumerate() {
            t.add_row(vec![
                (i + 1).to_string(),
                h.name.clone(),
                h.events.join(", "),
                h.path.display().to_string(),
            ]);
        }
        output::out(&format!("{t}\n"))?;
    }
    for i in &found.ignored {
        eprintln!("ignored {}: {}", i.path.display(), i.why);
    }
    for p in &found.disabled {
        eprintln!(
            "disabled {} (its name ends in {})",
            p.display(),
            agent_db::hooks::DISABLED_SUFFIX
        );
    }
    let dirs = agent_db::hooks::dirs(
        &config::config_dir(&|k| std::env::var(k).ok()),
        &s.hook_dirs,
    );
    eprintln!(
        "searched, in order: {}; timeout {}, {}",
        dirs.iter()
            .map(|d| d.display().to_string())
            .collect::<Vec<_>>()
            .join(", "),
        humantime::format_duration(found.timeout),
        if found.fail_open {
            "fail open"
        } else {
            "fail closed"
        }
    );
    Ok(exit::OK)
}

fn recipe_dirs() -> Vec<PathBuf> {
    recipe::search_dirs(&config::config_dir(&|k| std::env::var(k).ok()))
}

/// Whether an LLM can be used: a provider is configured, and it has a key or is a local server.
fn llm_ready(s: &Settings) -> Result<(), String> {
    let Some(kind) = s.llm_provider else {
        return Err("no LLM provider is configured".into());
    };
    let local = s
        .base_url
        .as_deref()
        .is_some_and(|u| u != kind.default_base_url());
    if s.api_key.is_none() && !local {
        let var = match kind {
            agent_db::provider::ProviderKind::OpenAi => "OPENAI_API_KEY",
            agent_db::provider::ProviderKind::Anthropic => "ANTHROPIC_API_KEY",
        };
        return Err(format!(
            "LLM provider {} is configured but no API key was found ({var}, AGENT_DB_API_KEY or [llm] api_key)",
            kind.name()
        ));
    }
    Ok(())
}

/// The strategy for a compact run, the recipe (for the audit log) and one line saying why.
pub type Chosen = (Arc<dyn Strategy>, Option<Recipe>, String);

/// Choose the strategy of a compact run (see [`Chosen`]).
pub fn strategy(s: &Settings, args: &CompactArgs) -> Result<Chosen, Error> {
    let offline = |why: &str| -> Chosen {
        (
            Arc::new(Extractive),
            None,
            format!("strategy: extractive (offline, no LLM: {why})"),
        )
    };
    match args.strategy {
        Some(StrategyArg::Prune) => Ok((
            Arc::new(Prune {
                elide_images: args.elide_images,
            }),
            None,
            "strategy: prune (no summary; old tool outputs become placeholders)".into(),
        )),
        Some(StrategyArg::Extractive) => Ok(offline("chosen with --strategy extractive")),
        Some(StrategyArg::Llm) => {
            llm_ready(s).map_err(|why| Error::Config(format!("--strategy llm: {why}")))?;
            build_llm(s)
        }
        None => match llm_ready(s) {
            Ok(()) => build_llm(s),
            Err(why) => Ok(offline(&why)),
        },
    }
}

fn build_llm(s: &Settings) -> Result<Chosen, Error> {
    let kind = s.llm_provider.expect("checked by llm_ready");
    let recipe = recipe::find(s.recipe.as_deref().unwrap_or("compact"), &recipe_dirs())?;
    let flag = |k: &str| s.sources.get(k).is_some_and(|v| v == "flag");
    // A flag wins; then the recipe's own preference; then config, environment and defaults.
    let model = match (&recipe.model, flag("llm.model")) {
        (Some(m), false) => m.clone(),
        _ => s
            .model
            .clone()
            .unwrap_or_else(|| config::default_model(kind).to_string()),
    };
    let max_summary_tokens = match (recipe.max_summary_tokens, flag("llm.max_summary_tokens")) {
        (Some(n), false) => n,
        _ => s.max_summary_tokens,
    };
    let mut budget_settings = s.clone();
    budget_settings.model = Some(model.clone());
    budget_settings.max_summary_tokens = max_summary_tokens;
    let budget = budget_settings.summary_budget();
    let client = Client::new(ClientConfig {
        kind,
        base_url: s
            .base_url
            .clone()
            .unwrap_or_else(|| kind.default_base_url().to_string()),
        api_key: s.api_key.clone(),
        model: model.clone(),
        timeout: s.timeout,
        max_retries: s.max_retries,
        initial_backoff: Duration::from_secs(1),
    })
    .map_err(|e| Error::Config(e.to_string()))?;
    let price = s.price(&model);
    let line = format!(
        "strategy: llm ({} {model} at {}, recipe {}, key from {}, {} tokens per request{})",
        kind.name(),
        agent_db::provider::mask_url(&client.config.base_url),
        recipe.name,
        s.api_key_source
            .as_deref()
            .unwrap_or("nowhere: local server"),
        budget,
        if price.is_none() {
            "; no price known for this model, cost not reported"
        } else {
            ""
        }
    );
    Ok((
        Arc::new(Llm {
            client,
            recipe: recipe.clone(),
            instructions: s.instructions.clone(),
            max_summary_tokens,
            budget,
            price,
            spent: Default::default(),
        }),
        Some(recipe),
        line,
    ))
}

pub fn config(config: Option<PathBuf>, json: bool) -> CmdResult {
    let s = config::load(&overrides(config, None))?;
    if json {
        let doc = serde_json::json!({"version": super::list::JSON_VERSION, "command": "config", "settings": s});
        output::out(&format!(
            "{}\n",
            serde_json::to_string_pretty(&doc).unwrap_or_default()
        ))?;
        return Ok(exit::OK);
    }
    let v = serde_json::to_value(&s).unwrap_or_default();
    let mut t = table::new(&["SETTING", "VALUE", "FROM"], &[]);
    if let Some(obj) = v.as_object() {
        for (k, val) in obj {
            // The key's source is shown on the llm.api_key row itself.
            if k == "sources" || k == "api_key_source" {
                continue;
            }
            let key = match k.as_str() {
                "llm_provider" => "llm.provider",
                "model" => "llm.model",
                "base_url" => "llm.base_url",
                "api_key" => "llm.api_key",
                "max_summary_tokens" => "llm.max_summary_tokens",
                "summary_context" => "llm.summary_context",
                "timeout" => "llm.timeout",
                "max_retries" => "llm.max_retries",
                "recipe" => "llm.recipe",
                "instructions" => "llm.instructions",
                "max_cost" => "llm.max_cost",
                "concurrency" => "compact.concurrency",
                "keep_tokens" => "compact.keep_tokens",
                "hook_dirs" => "hooks.dirs",
                "hook_timeout" => "hooks.timeout",
                "hook_fail_open" => "hooks.fail_open",
                "store_agent" => "store.agent",
                "store_path" => "store.path",
                other => other,
            };
            let from = if k == "api_key" {
                s.api_key_source.clone().unwrap_or_else(|| "-".into())
            } else {
                s.sources
                    .get(key)
                    .cloned()
                    .unwrap_or_else(|| "default".into())
            };
            let shown = match val {
                serde_json::Value::Null => "-".to_string(),
                serde_json::Value::String(x) => x.clone(),
                other => other.to_string(),
            };
            t.add_row(vec![key.to_string(), shown, from]);
        }
    }
    output::out(&format!("{t}\n"))?;
    let summary = match llm_ready(&s) {
        Ok(()) => "compact uses the llm strategy by default".to_string(),
        Err(why) => format!("compact uses the offline extractive strategy by default: {why}"),
    };
    eprintln!("{summary}");
    Ok(exit::OK)
}

pub fn recipes(json: bool) -> CmdResult {
    let dirs = recipe_dirs();
    let all = recipe::list(&dirs);
    let mut bad = 0;
    if json {
        let items: Vec<serde_json::Value> = all
            .iter()
            .map(|r| match r {
                Ok(r) => serde_json::json!({"name": r.name, "description": r.description, "source": r.source, "model": r.model, "sha256": r.sha256}),
                Err(e) => {
                    bad += 1;
                    serde_json::json!({"error": e.to_string()})
                }
            })
            .collect();
        let doc = serde_json::json!({"version": super::list::JSON_VERSION, "command": "recipes", "recipes": items});
        output::out(&format!(
            "{}\n",
            serde_json::to_string_pretty(&doc).unwrap_or_default()
        ))?;
    } else {
        let mut t = table::new(&["NAME", "DESCRIPTION", "SOURCE"], &[]);
        for r in &all {
            match r {
                Ok(r) => {
                    t.add_row(vec![
                        r.name.clone(),
                        r.description.clone(),
                        r.source.clone(),
                    ]);
                }
                Err(e) => {
                    bad += 1;
                    eprintln!("agent-db: error: {e}");
                }
            }
        }
        output::out(&format!("{t}\n"))?;
        eprintln!(
            "searched: {} (then the built-ins)",
            dirs.iter()
                .map(|d| d.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    Ok(if bad > 0 { exit::CONFIG } else { exit::OK })
}

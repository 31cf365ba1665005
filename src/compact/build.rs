//! Building a compact run's strategy from the settings: `--strategy` when given, else the LLM
//! when a provider is configured and usable, else the offline extractive summarizer. The LLM
//! strategy finds its recipe here and applies the recipe's layer to the settings
//! ([`Settings::apply_recipe`]), so the run uses one set of effective settings.

use std::sync::Arc;
use std::time::Duration;

use super::llm::Llm;
use super::prune::Prune;
use super::{Extractive, Strategy};
use crate::config::Settings;
use crate::error::{Error, Result};
use crate::provider::{Client, ClientConfig};
use crate::recipe::{self, Recipe};

/// Which strategy was asked for (`--strategy`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Choice {
    /// None named: the LLM when [`llm_ready`], else extractive.
    Auto,
    Llm,
    /// None named, but an LLM setting given on the command line (the flag): a request for the
    /// LLM, so one that cannot be used is an error naming what is missing, never an offline run.
    Asked(&'static str),
    Extractive,
    Prune {
        elide_images: bool,
    },
}

/// A built strategy.
pub struct Built {
    pub strategy: Arc<dyn Strategy>,
    /// The LLM's recipe (for the audit log).
    pub recipe: Option<Recipe>,
    /// One status line saying which strategy and why.
    pub why: String,
    /// The effective settings: the loaded ones, with the recipe's layer applied.
    pub settings: Settings,
}

/// The strategies `--fallback` tries, in order, after `strategy` (its name) falls under the
/// retention floor: llm → extractive → prune; extractive → prune; prune has none.
pub fn fallbacks(strategy: &str) -> Vec<Arc<dyn Strategy>> {
    let prune: Arc<dyn Strategy> = Arc::new(Prune {
        elide_images: false,
    });
    match strategy {
        "llm" => vec![Arc::new(Extractive), prune],
        "extractive" => vec![prune],
        _ => Vec::new(),
    }
}

/// Whether an LLM can be used: a provider is configured, and it has a key or is a local server.
pub fn llm_ready(s: &Settings) -> std::result::Result<(), String> {
    let Some(kind) = s.llm_provider else {
        return Err("no LLM provider is configured".into());
    };
    let local = s
        .base_url
        .as_deref()
        .is_some_and(|u| u != kind.default_base_url());
    if s.api_key.is_none() && !local {
        let own: Vec<&str> = kind.spec().key_vars.to_vec();
        return Err(format!(
            "LLM provider {} is configured but no API key was found ({}, {} or [llm] api_key)",
            kind.name(),
            own.join(", "),
            crate::provider::table::GENERIC_KEY_VAR
        ));
    }
    Ok(())
}

/// Build the strategy of a compact run (see [`Built`]).
pub fn build(s: &Settings, choice: Choice) -> Result<Built> {
    let offline = |why: &str| Built {
        strategy: Arc::new(Extractive),
        recipe: None,
        why: format!("strategy: extractive (offline, no LLM: {why})"),
        settings: s.clone(),
    };
    match choice {
        Choice::Prune { elide_images } => Ok(Built {
            strategy: Arc::new(Prune { elide_images }),
            recipe: None,
            why: "strategy: prune (no summary; old tool outputs become placeholders)".into(),
            settings: s.clone(),
        }),
        Choice::Extractive => Ok(offline("chosen with --strategy extractive")),
        Choice::Llm => {
            llm_ready(s).map_err(|why| Error::Config(format!("--strategy llm: {why}")))?;
            build_llm(s)
        }
        Choice::Asked(flag) => {
            llm_ready(s).map_err(|mut why| {
                if s.llm_provider.is_none() {
                    why.push_str(" (--llm-provider, AGENT_DB_LLM_PROVIDER or [llm] provider)");
                }
                Error::Config(format!(
                    "{flag} was given, but the LLM cannot be used: {why}"
                ))
                .with_hint(format!(
                    "set what is missing, or drop {flag} (--strategy extractive runs offline)"
                ))
            })?;
            build_llm(s)
        }
        Choice::Auto => match llm_ready(s) {
            Ok(()) => build_llm(s),
            Err(why) => Ok(offline(&why)),
        },
    }
}

/// The LLM strategy: the recipe, its layer, the request budget and the client.
fn build_llm(loaded: &Settings) -> Result<Built> {
    let kind = loaded.llm_provider.expect("checked by llm_ready");
    let dirs = recipe::search_dirs(&loaded.config_dir);
    let recipe = recipe::find(loaded.recipe.as_deref().unwrap_or("compact"), &dirs)?;
    let mut s = loaded.clone();
    s.apply_recipe(&recipe);
    let model = s
        .model
        .clone()
        .unwrap_or_else(|| kind.default_model().to_string());
    let budget = s.summary_budget();
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
    let why = format!(
        "strategy: llm ({} {model} at {}, recipe {}, key from {}, {} tokens per request{})",
        kind.name(),
        crate::provider::mask_url(&client.config.base_url),
        recipe.name,
        s.api_key_source
            .as_deref()
            .unwrap_or("nowhere: local server"),
        crate::util::thousands(budget),
        if price.is_none() {
            "; no price known for this model, cost not reported"
        } else {
            ""
        }
    );
    let llm = Llm {
        client,
        recipe: recipe.clone(),
        instructions: s.instructions.clone(),
        max_summary_tokens: s.max_summary_tokens,
        budget,
        price,
        spent: Default::default(),
        temperature: Some(s.temperature),
        mask_observations: s.mask_observations,
    };
    Ok(Built {
        strategy: Arc::new(llm),
        recipe: Some(recipe),
        why,
        settings: s,
    })
}

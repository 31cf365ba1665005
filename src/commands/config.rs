//! `agent-db config`, `agent-db recipes` and `agent-db hooks`: what the settings, recipes and
//! hooks are, and where each came from; and the command-line flags that override settings.

use std::path::PathBuf;

use agent_db::compact::build::llm_ready;
use agent_db::config::{Overrides, Settings};
use agent_db::error::exit;
use agent_db::recipe;
use agent_db::Error;

use super::CmdResult;
use crate::cli::CompactArgs;
use crate::output::{self, json, table, Ui};

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
        o.temperature = l.temperature;
        o.mask_observations = l.mask_observations.then_some(true);
        o.concurrency = a.concurrency;
        o.max_cost = l.max_cost;
        o.hook_timeout = a.hook_timeout;
        o.target = a.target;
        o.keep_tokens = a.keep_tokens;
        o.min_retention = a.min_retention;
    }
    o
}

/// Discover the configured hooks.
pub fn discover_hooks(s: &Settings) -> Result<agent_db::hooks::Hooks, Error> {
    let dirs = agent_db::hooks::dirs(&s.config_dir, &s.hook_dirs);
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

/// `agent-db stores`: the stores found, their schema versions and agent-db's support.
pub fn stores(ui: &Ui, found: &[agent_db::store::Surveyed], as_json: bool) -> CmdResult {
    if as_json {
        json::print("stores", serde_json::json!({ "stores": found }))?;
        return Ok(exit::OK);
    }
    if found.is_empty() {
        ui.status("no store found: no agent's default file exists (give --db PATH)");
        return Ok(exit::OK);
    }
    use table::{col, Kind};
    // At 80 columns the file keeps room (cut from the front: its name stays).
    let mut t = table::Grid::new(&[
        col("AGENT", Kind::Fixed, 0),
        col("FILE", Kind::CutFront, 9).min(24),
        col("VERSION", Kind::Cut, 5).min(16),
        col("SUPPORT", Kind::Fixed, 8),
        col("DETAIL", Kind::Cut, 3),
    ]);
    // On a terminal, the home directory is `~`.
    let home = ui
        .stdout_tty
        .then(|| std::env::var_os("HOME"))
        .flatten()
        .map(std::path::PathBuf::from)
        .filter(|h| !h.as_os_str().is_empty());
    for s in found {
        let file = match home.as_ref().and_then(|h| s.path.strip_prefix(h).ok()) {
            Some(rest) => format!("~/{}", rest.display()),
            None => s.path.display().to_string(),
        };
        t.add_row(vec![
            s.agent.unwrap_or("?").to_string(),
            file,
            s.version_name
                .clone()
                .or_else(|| s.schema_version.clone())
                .unwrap_or_else(|| "-".into()),
            s.support.to_string(),
            match (&s.detail, s.how.starts_with("beside")) {
                (Some(d), _) => d.clone(),
                (None, true) => s.how.clone(),
                (None, false) => String::new(),
            },
        ]);
    }
    output::out(&format!("{t}\n"))?;
    Ok(exit::OK)
}

pub fn hooks(ui: &Ui, s: &Settings, as_json: bool) -> CmdResult {
    let found = discover_hooks(s)?;
    if as_json {
        json::print(
            "hooks",
            serde_json::json!({
                "hooks": found.hooks,
                "ignored": found.ignored,
                "disabled": found.disabled,
                "timeout": humantime::format_duration(found.timeout).to_string(),
                "fail_open": found.fail_open,
            }),
        )?;
        return Ok(exit::OK);
    }
    if found.hooks.is_empty() {
        ui.status("no hooks found");
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
        ui.status(&format!("ignored {}: {}", i.path.display(), i.why));
    }
    for p in &found.disabled {
        ui.status(&format!(
            "disabled {} (its name ends in {})",
            p.display(),
            agent_db::hooks::DISABLED_SUFFIX
        ));
    }
    let dirs = agent_db::hooks::dirs(&s.config_dir, &s.hook_dirs);
    ui.status(&format!(
        "searched, in order: {}; timeout {}, {}",
        shown_dirs(&dirs),
        humantime::format_duration(found.timeout),
        if found.fail_open {
            "fail open"
        } else {
            "fail closed"
        }
    ));
    Ok(exit::OK)
}

fn shown_dirs(dirs: &[PathBuf]) -> String {
    dirs.iter()
        .map(|d| d.display().to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

pub fn config(ui: &Ui, s: &Settings, as_json: bool) -> CmdResult {
    if as_json {
        json::print("config", serde_json::json!({"settings": s}))?;
        return Ok(exit::OK);
    }
    let mut t = table::new(&["SETTING", "VALUE", "FROM"], &[]);
    for row in s.rows() {
        let shown = match row.value {
            serde_json::Value::Null => "-".to_string(),
            serde_json::Value::String(x) => x,
            other => other.to_string(),
        };
        t.add_row(vec![row.key, shown, row.from]);
    }
    output::out(&format!("{t}\n"))?;
    ui.status(&match llm_ready(s) {
        Ok(()) => "compact uses the llm strategy by default".to_string(),
        Err(why) => format!("compact uses the offline extractive strategy by default: {why}"),
    });
    Ok(exit::OK)
}

/// `agent-db recipes`. The search directories come from the settings when they could be read,
/// else from the environment alone (a broken config file does not hide the recipes).
pub fn recipes(ui: &Ui, config_dir: &std::path::Path, as_json: bool) -> CmdResult {
    let dirs = recipe::search_dirs(config_dir);
    let all = recipe::list(&dirs);
    let bad = all.iter().filter(|r| r.is_err()).count();
    if as_json {
        let items: Vec<serde_json::Value> = all
            .iter()
            .map(|r| match r {
                Ok(r) => serde_json::json!({"name": r.name, "description": r.description, "source": r.source, "model": r.model, "sha256": r.sha256}),
                Err(e) => serde_json::json!({"error": e.to_string()}),
            })
            .collect();
        json::print("recipes", serde_json::json!({"recipes": items}))?;
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
                Err(e) => ui.error(e),
            }
        }
        output::out(&format!("{t}\n"))?;
        ui.status(&format!(
            "searched: {} (then the built-ins)",
            shown_dirs(&dirs)
        ));
    }
    Ok(if bad > 0 { exit::CONFIG } else { exit::OK })
}

/// The run's hooks, announced.
pub(super) fn announced_hooks(
    ui: &Ui,
    settings: &Settings,
) -> Result<agent_db::hooks::Hooks, Error> {
    let found = discover_hooks(settings)?;
    for i in &found.ignored {
        ui.status(&format!("hook ignored: {}: {}", i.path.display(), i.why));
    }
    if !found.is_empty() {
        ui.status(&format!(
            "hooks: {}",
            found
                .hooks
                .iter()
                .map(|h| format!("{} ({})", h.name, h.events.join(", ")))
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    Ok(found)
}

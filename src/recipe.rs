//! Recipes: the instructions an LLM summarizer follows. A recipe is markdown with YAML
//! frontmatter (`name`, `description`, optional `model`, `max_summary_tokens`, `keep_tokens`).
//!
//! kodelet's recipe fields are accepted: `allowed_tools` is ignored (the summarizer runs no
//! tools), and `hooks: {turn_end: {handler: swap_context, once: true}}` is understood as "swap
//! the context with the summary", which is what agent-db does; any other handler is an error.
//! Other unknown frontmatter keys are ignored.
//!
//! Lookup for `--recipe NAME`: `./.agent-db/recipes/NAME.md`, then
//! `$XDG_CONFIG_HOME/agent-db/recipes/NAME.md`, then the built-ins (`compact`, `brief`). A value
//! containing `/` or ending in `.md` is a path.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

const BUILTINS: &[(&str, &str)] = &[
    ("compact", include_str!("recipes/compact.md")),
    ("brief", include_str!("recipes/brief.md")),
];

/// A loaded recipe.
#[derive(Debug, Clone, Serialize)]
pub struct Recipe {
    pub name: String,
    pub description: String,
    pub model: Option<String>,
    pub max_summary_tokens: Option<u32>,
    pub keep_tokens: Option<usize>,
    /// The prompt text (after the frontmatter).
    pub body: String,
    /// `builtin` or the file it came from.
    pub source: String,
    /// sha256 of the whole recipe text, recorded in the audit log.
    pub sha256: String,
}

#[derive(Debug, Default, Deserialize)]
struct Frontmatter {
    name: Option<String>,
    #[serde(default)]
    description: String,
    model: Option<String>,
    max_summary_tokens: Option<u32>,
    keep_tokens: Option<usize>,
    /// kodelet: which tools the recipe may use; the summarizer uses none.
    #[allow(dead_code)]
    allowed_tools: Option<serde_yaml_ng::Value>,
    hooks: Option<BTreeMap<String, HookSpec>>,
}

#[derive(Debug, Deserialize)]
struct HookSpec {
    handler: String,
    #[allow(dead_code)]
    once: Option<bool>,
}

/// Parse recipe text; `fallback_name` names it when the frontmatter does not.
pub fn parse(text: &str, fallback_name: &str, source: &str) -> Result<Recipe> {
    let bad = |why: String| Error::Config(format!("recipe {source}: {why}"));
    let trimmed = text.trim_start_matches('\u{feff}');
    let (front, body) = match trimmed.strip_prefix("---") {
        Some(rest) => {
            let rest = rest.strip_prefix('\r').unwrap_or(rest);
            let rest = rest
                .strip_prefix('\n')
                .ok_or_else(|| bad("the frontmatter must start with a line '---'".into()))?;
            let end = rest
                .find("\n---")
                .ok_or_else(|| bad("the frontmatter has no closing '---' line".into()))?;
            let after = &rest[end + 4..];
            let after = after.split_once('\n').map(|(_, b)| b).unwrap_or("");
            (&rest[..end], after)
        }
        None => ("", trimmed),
    };
    let fm: Frontmatter = if front.trim().is_empty() {
        Frontmatter::default()
    } else {
        serde_yaml_ng::from_str(front).map_err(|e| bad(format!("invalid frontmatter: {e}")))?
    };
    for (event, spec) in fm.hooks.iter().flatten() {
        match (event.as_str(), spec.handler.as_str()) {
            ("turn_end", "swap_context") => {}
            (ev, handler) => {
                return Err(bad(format!(
                    "unknown hook handler {handler:?} for {ev:?}; agent-db understands only turn_end: swap_context"
                )))
            }
        }
    }
    let body = body.trim().to_string();
    if body.is_empty() {
        return Err(bad("the recipe has no prompt text".into()));
    }
    Ok(Recipe {
        name: fm.name.unwrap_or_else(|| fallback_name.to_string()),
        description: fm.description,
        model: fm.model,
        max_summary_tokens: fm.max_summary_tokens,
        keep_tokens: fm.keep_tokens,
        body,
        source: source.to_string(),
        sha256: crate::util::sha256_hex(text),
    })
}

/// Directories searched for recipes, in order (the built-ins come last).
pub fn search_dirs(config_dir: &Path) -> Vec<PathBuf> {
    vec![
        PathBuf::from(".agent-db/recipes"),
        config_dir.join("recipes"),
    ]
}

/// Find a recipe by name or path.
pub fn find(name: &str, dirs: &[PathBuf]) -> Result<Recipe> {
    if name.contains('/') || name.ends_with(".md") {
        let p = Path::new(name);
        let text =
            std::fs::read_to_string(p).map_err(|e| Error::Config(format!("recipe {name}: {e}")))?;
        let stem = p.file_stem().and_then(|s| s.to_str()).unwrap_or(name);
        return parse(&text, stem, &p.display().to_string());
    }
    for d in dirs {
        let p = d.join(format!("{name}.md"));
        if p.is_file() {
            let text = std::fs::read_to_string(&p)
                .map_err(|e| Error::Config(format!("recipe {}: {e}", p.display())))?;
            return parse(&text, name, &p.display().to_string());
        }
    }
    match BUILTINS.iter().find(|(n, _)| *n == name) {
        Some((n, text)) => parse(text, n, "builtin"),
        None => Err(Error::Config(format!(
            "recipe {name:?} not found in {} or the built-ins (compact, brief); see `agent-db recipes`",
            dirs.iter().map(|d| d.display().to_string()).collect::<Vec<_>>().join(", ")
        ))),
    }
}

/// Every recipe visible from `dirs`, files first, then built-ins not shadowed by a file.
pub fn list(dirs: &[PathBuf]) -> Vec<Result<Recipe>> {
    let mut out = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for d in dirs {
        let paths = crate::util::sorted_entries(d);
        for p in paths
            .into_iter()
            .filter(|p| p.extension().is_some_and(|e| e == "md"))
        {
            let stem = p
                .file_stem()
                .and_then(|s| s.to_str())
                .unwrap_or("")
                .to_string();
            if !seen.insert(stem.clone()) {
                continue;
            }
            out.push(
                std::fs::read_to_string(&p)
                    .map_err(|e| Error::Config(format!("recipe {}: {e}", p.display())))
                    .and_then(|t| parse(&t, &stem, &p.display().to_string())),
            );
        }
    }
    for (n, text) in BUILTINS {
        if seen.insert(n.to_string()) {
            out.push(parse(text, n, "builtin"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtins_parse() {
        for (n, _) in BUILTINS {
            let r = find(n, &[]).unwrap();
            assert_eq!(&r.name, n);
            assert!(!r.body.is_empty() && !r.description.is_empty());
        }
    }

    #[test]
    fn hook_recipe_and_unknown_handler() {
        let text = "---\nname: mine\ndescription: d\nallowed_tools: [bash, file_read]\nmax_summary_tokens: 900\nhooks:\n  turn_end:\n    handler: swap_context\n    once: true\n---\nSummarize it.\n";
        let r = parse(text, "x", "test").unwrap();
        assert_eq!(
            (r.name.as_str(), r.max_summary_tokens, r.body.as_str()),
            ("mine", Some(900), "Summarize it.")
        );
        let bad = text.replace("swap_context", "launch_rockets");
        let e = parse(&bad, "x", "test").unwrap_err();
        assert!(
            e.to_string()
                .contains("unknown hook handler \"launch_rockets\""),
            "{e}"
        );
        assert!(parse("---\nname: a\n", "x", "t").is_err());
    }
}

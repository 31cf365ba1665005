//! Where the store is: `--db`, `--agent`, the config file or the agents' default files
//! ([`resolve_store`]), and `agent-db stores`' survey of them ([`survey`]). Never writes.

use std::path::{Path, PathBuf};

use super::kind::StoreKind;
use super::open::{connect, table_names};
use super::Access;
use crate::error::{Error, Result};
use crate::models::ContextLimits;
use crate::util::join_and;

/// Where the store came from, for messages.
#[derive(Debug, Clone)]
pub struct Resolved {
    pub path: PathBuf,
    pub how: String,
}

/// How the store was chosen besides `--db` (`--agent` or `[store] agent`, `[store] path`), and
/// what opening it needs from the configuration.
#[derive(Debug, Clone, Default)]
pub struct StoreChoice {
    /// `--agent` on the command line.
    pub agent_flag: Option<StoreKind>,
    /// `[store] path` from the config file.
    pub config_path: Option<PathBuf>,
    /// `[store] agent` from the config file.
    pub config_agent: Option<StoreKind>,
    /// `[context_limits]` from the config file.
    pub context_limits: ContextLimits,
}

/// Resolve the store path: `--db` (or `AGENT_DB_PATH`, which clap folds into it), else the
/// agents' default locations.
pub fn resolve_path(explicit: Option<&Path>) -> Result<Resolved> {
    resolve_store(explicit, &StoreChoice::default())
}

/// Resolve the store path: `--db`/`AGENT_DB_PATH`, else `--agent`'s default file, else
/// `[store] path`, else `[store] agent`'s default file, else whichever agent's default store
/// exists (an error naming both, with the flags to choose, when both do).
pub fn resolve_store(explicit: Option<&Path>, choice: &StoreChoice) -> Result<Resolved> {
    if let Some(p) = explicit {
        return Ok(Resolved {
            path: p.to_path_buf(),
            how: "--db".into(),
        });
    }
    if let Some(kind) = choice.agent_flag {
        let path = kind.default_path();
        missing_beside(kind, &path)?;
        return Ok(Resolved {
            path,
            how: "--agent".into(),
        });
    }
    if let Some(p) = &choice.config_path {
        return Ok(Resolved {
            path: p.clone(),
            how: "[store] path".into(),
        });
    }
    if let Some(kind) = choice.config_agent {
        let path = kind.default_path();
        missing_beside(kind, &path)?;
        return Ok(Resolved {
            path,
            how: "[store] agent".into(),
        });
    }
    let found: Vec<(StoreKind, PathBuf)> = StoreKind::all()
        .map(|k| (k, k.default_path()))
        .filter(|(_, p)| p.is_file())
        .collect();
    match found.as_slice() {
        [] => Err(Error::StoreNotFound {
            looked: std::iter::once("--db / AGENT_DB_PATH (not set)".to_string())
                .chain(
                    StoreKind::all()
                        .map(|k| format!("{} ({})", k.default_path().display(), k.name())),
                )
                .collect(),
        }),
        [(kind, path)] => Ok(Resolved {
            path: path.clone(),
            how: format!("{} default", kind.name()),
        }),
        several => Err(ambiguous(several)),
    }
}

/// The agent's default file is missing but the agent's files for other setups are there
/// ([`StoreKind::nearby`]): an error naming them and how to use one, instead of "no such file".
fn missing_beside(kind: StoreKind, path: &Path) -> Result<()> {
    if path.exists() {
        return Ok(());
    }
    let nearby = kind.nearby();
    let Some(first) = nearby.first() else {
        return Ok(());
    };
    let listed: Vec<String> = nearby.iter().map(|p| p.display().to_string()).collect();
    Err(Error::StoreNotFound {
        looked: vec![
            format!(
                "{} ({}'s default: no such file)",
                path.display(),
                kind.name()
            ),
            format!(
                "beside it: {} ({}'s file for {}; use it with --db {})",
                join_and(&listed, "and"),
                kind.name(),
                kind.adapter().nearby_role(),
                first.display()
            ),
        ],
    })
}

/// What `agent-db stores` reports of one file.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Surveyed {
    /// The agent whose store it is (`None`: not recognized).
    pub agent: Option<&'static str>,
    pub path: PathBuf,
    /// Why agent-db looked here (`kodelet default`, `--db`).
    pub how: String,
    /// The file's version in the words the agent's users know (`opencode 2.x`).
    pub version_name: Option<String>,
    /// The file's schema version, as the agent numbers it.
    pub schema_version: Option<String>,
    /// The newest schema version of this agent that agent-db knows.
    pub newest_known: Option<String>,
    /// `read-write`, `read-only` (newer than agent-db knows: listed and shown, never written)
    /// or `unsupported` (agent-db does not open it; `detail` says why).
    pub support: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
}

/// Each registered agent's default store that exists, and `explicit` (`--db`, with how it was
/// given), opened read-only: which agent, which schema version, and whether agent-db supports
/// it. Never writes.
pub fn survey(explicit: Option<(&Path, &str)>) -> Vec<Surveyed> {
    let mut candidates: Vec<(PathBuf, String)> = Vec::new();
    if let Some((p, how)) = explicit {
        candidates.push((p.to_path_buf(), how.to_string()));
    }
    for k in StoreKind::all() {
        let p = k.default_path();
        if p.is_file() && !candidates.iter().any(|(c, _)| *c == p) {
            candidates.push((p, format!("{} default", k.name())));
        }
        for p in k.nearby() {
            if !candidates.iter().any(|(c, _)| *c == p) {
                candidates.push((
                    p,
                    format!(
                        "beside {}'s default ({})",
                        k.name(),
                        k.adapter().nearby_role()
                    ),
                ));
            }
        }
    }
    candidates
        .into_iter()
        .map(|(path, how)| survey_one(path, how))
        .collect()
}

fn survey_one(path: PathBuf, how: String) -> Surveyed {
    let unsupported = |agent, detail: String| Surveyed {
        agent,
        path: path.clone(),
        how: how.clone(),
        version_name: None,
        schema_version: None,
        newest_known: None,
        support: "unsupported",
        detail: Some(detail),
    };
    let detected = connect(&path, Access::Read).and_then(|conn| {
        let tables = table_names(&conn, &path)?;
        let kind = StoreKind::recognize(&conn, &tables);
        Ok((conn, kind))
    });
    let (conn, kind) = match detected {
        Ok((conn, Some(kind))) => (conn, kind),
        Ok((_, None)) => {
            return unsupported(None, "not a conversation store agent-db knows".into())
        }
        Err(e) => return unsupported(None, e.to_string()),
    };
    let agent = Some(kind.name());
    if let Err(e) = kind.adapter().check_schema(&conn, &path) {
        return unsupported(agent, e.to_string());
    }
    match kind.adapter().schema_status(&conn, &path) {
        Ok(st) => Surveyed {
            agent,
            path: path.clone(),
            how,
            version_name: st
                .version
                .as_deref()
                .map(|v| kind.adapter().version_name(v)),
            schema_version: st.version,
            newest_known: st.newest_known,
            support: if st.writable {
                "read-write"
            } else {
                "read-only"
            },
            detail: (!st.writable)
                .then(|| "newer than agent-db knows: listed and shown, never written".to_string()),
        },
        Err(e) => unsupported(agent, e.to_string()),
    }
}

/// Several agents' default stores exist: an error naming them all, with the flags to choose.
pub(crate) fn ambiguous(found: &[(StoreKind, PathBuf)]) -> Error {
    let count = match found.len() {
        2 => "two".to_string(),
        3 => "three".to_string(),
        n => n.to_string(),
    };
    let listed: Vec<String> = found
        .iter()
        .map(|(k, p)| format!("{} ({})", p.display(), k.name()))
        .collect();
    let flags: Vec<String> = found
        .iter()
        .map(|(k, _)| format!("--agent {}", k.name()))
        .collect();
    Error::AmbiguousStore {
        path: found[0].1.clone(),
        detail: format!(
            "{count} conversation stores found: {}; choose one with {} (or --db PATH, or `agent = \"{}\"` under [store] in the config file)",
            join_and(&listed, "and"),
            join_and(&flags, "or"),
            found[0].0.name()
        ),
    }
}

pub(crate) fn home_dir() -> PathBuf {
    std::env::var_os("HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("."))
}

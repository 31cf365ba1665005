//! Compaction hooks: external executables that guard, customize or observe compaction, with
//! kodelet's hook protocol (docs/hooks.md).
//!
//! - Discovery: executables in `./.agent-db/hooks/`, `$XDG_CONFIG_HOME/agent-db/hooks/`, then
//!   the directories listed in the config (`hooks.dirs`), in that order; within a directory, by
//!   file name. A file whose name ends in `.disable` is switched off, as kodelet does: never
//!   run, only listed by `agent-db hooks`. `<exe> hook` prints the events it handles, one per
//!   line.
//! - `<exe> run` gets the JSON payload on stdin and answers with JSON on stdout. It runs
//!   directly (never through a shell), in the conversation's working directory when that is
//!   known and exists, and is killed (with its process group) after the timeout. Hooks get
//!   agent-db's environment without the summarizer API keys (every variable the provider table
//!   names: [`crate::provider::table::all_key_vars`]), and with a credential inside
//!   `AGENT_DB_BASE_URL` masked.
//! - `before_compaction`: `{"decision":"block","reason":..}` or exit code 2 (reason on stderr)
//!   blocks; `{"summary":".."}` supplies the summary (the first non-empty one in discovery
//!   order wins; the strategy is skipped); `{}` or empty output allows. kodelet-style actions:
//!   `{"action":"compact"|"continue"|"allow"}` allow, `{"action":"skip"|"block"|"stop"}` block.
//!   kodelet's `{"blocked": true, "reason": ..}` blocks too.
//!   A hook that crashes, times out or prints invalid JSON blocks (fail closed) unless
//!   `hooks.fail_open` is set. Block wins over any summary.
//! - `after_compaction` runs after the commit; its output is ignored and a failure is only a
//!   warning: it never undoes the compaction.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Serialize;
use tokio::io::AsyncWriteExt;

pub const BEFORE: &str = "before_compaction";
pub const AFTER: &str = "after_compaction";

/// The suffix that switches a hook file off (kodelet's convention).
pub const DISABLED_SUFFIX: &str = ".disable";

/// A discovered hook.
#[derive(Debug, Clone, Serialize)]
pub struct Hook {
    pub name: String,
    pub path: PathBuf,
    pub events: Vec<String>,
}

/// Something found in a hook directory that is not a usable hook.
#[derive(Debug, Clone, Serialize)]
pub struct Ignored {
    pub path: PathBuf,
    pub why: String,
}

/// The hooks of a run.
#[derive(Debug, Clone, Default)]
pub struct Hooks {
    pub hooks: Vec<Hook>,
    pub ignored: Vec<Ignored>,
    /// Files switched off with the `.disable` suffix (never run).
    pub disabled: Vec<PathBuf>,
    pub timeout: Duration,
    pub fail_open: bool,
}

/// What one hook decided, for the report and the audit row.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Record {
    pub hook: String,
    pub event: String,
    /// `allow`, `block`, `summary`, `error` (after hooks), or `ok`.
    pub decision: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
}

/// The combined verdict of the before hooks.
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    Allow,
    Block { hook: String, reason: String },
    Summary { hook: String, text: String },
}

/// The directories searched, in order.
pub fn dirs(config_dir: &Path, extra: &[PathBuf]) -> Vec<PathBuf> {
    let mut d = vec![PathBuf::from(".agent-db/hooks"), config_dir.join("hooks")];
    d.extend(extra.iter().cloned());
    d
}

fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// Find hooks and ask each which events it handles.
pub async fn discover(dirs: &[PathBuf], timeout: Duration, fail_open: bool) -> Hooks {
    let mut hooks = Hooks {
        timeout,
        fail_open,
        ..Default::default()
    };
    let mut seen = std::collections::HashSet::new();
    for d in dirs {
        let paths = crate::util::sorted_entries(d);
        for p in paths {
            let name = p
                .file_name()
                .and_then(|n| n.to_str())
                .unwrap_or("")
                .to_string();
            if name.starts_with('.') || p.is_dir() {
                continue;
            }
            if name.ends_with(DISABLED_SUFFIX) {
                hooks.disabled.push(p);
                continue;
            }
            // Absolute, so the hook still starts after changing into a conversation's directory.
            let canonical = std::fs::canonicalize(&p).unwrap_or_else(|_| p.clone());
            if !seen.insert(canonical.clone()) {
                continue;
            }
            if !is_executable(&p) {
                hooks.ignored.push(Ignored {
                    path: p,
                    why: "not executable (chmod +x it to use it as a hook)".into(),
                });
                continue;
            }
            match run(&canonical, &["hook"], None, None, timeout).await {
                Ok(out) if out.code == Some(0) => {
                    let events: Vec<String> = out
                        .stdout
                        .lines()
                        .map(|l| l.trim().to_string())
                        .filter(|l| l == BEFORE || l == AFTER)
                        .collect();
                    if events.is_empty() {
                        hooks.ignored.push(Ignored {
                            path: p,
                            why: "`hook` named no compaction event (before_compaction, after_compaction)".into(),
                        });
                    } else {
                        hooks.hooks.push(Hook {
                            name,
                            path: canonical,
                            events,
                        });
                    }
                }
                Ok(out) => hooks.ignored.push(Ignored {
                    path: p,
                    why: format!(
                        "`hook` exited with {}: {}",
                        code_text(out.code),
                        first_line(&out.stderr)
                    ),
                }),
                Err(e) => hooks.ignored.push(Ignored { path: p, why: e }),
            }
        }
    }
    hooks
}

fn code_text(c: Option<i32>) -> String {
    c.map(|c| format!("code {c}"))
        .unwrap_or_else(|| "a signal".into())
}

fn first_line(s: &str) -> String {
    let l = s
        .lines()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("")
        .trim();
    l.chars().take(300).collect()
}

struct Output {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

/// Run `exe args…` with `stdin`, in `cwd`, killed with its process group after `timeout`.
async fn run(
    exe: &Path,
    args: &[&str],
    stdin: Option<&[u8]>,
    cwd: Option<&Path>,
    timeout: Duration,
) -> Result<Output, String> {
    let mut cmd = tokio::process::Command::new(exe);
    cmd.args(args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .process_group(0);
    // Hooks get agent-db's environment, minus every variable the provider table names as a key
    // holder, and never a key written into the base URL.
    for k in crate::provider::table::all_key_vars() {
        cmd.env_remove(k);
    }
    if let Some(url) = std::env::var_os("AGENT_DB_BASE_URL") {
        let url = url.to_string_lossy();
        let masked = crate::provider::mask_url(&url);
        if masked != url {
            cmd.env("AGENT_DB_BASE_URL", masked);
        }
    }
    if let Some(d) = cwd {
        cmd.current_dir(d);
    }
    let mut child = cmd
        .spawn()
        .map_err(|e| format!("cannot run {}: {e}", exe.display()))?;
    let pid = child.id();
    let input = stdin.map(|b| b.to_vec());
    let mut pipe = child.stdin.take();
    let work = async move {
        if let (Some(p), Some(b)) = (pipe.as_mut(), input) {
            // A hook may exit without reading its input; that is not an error.
            let _ = p.write_all(&b).await;
        }
        drop(pipe);
        child.wait_with_output().await
    };
    match tokio::time::timeout(timeout, work).await {
        Ok(Ok(out)) => Ok(Output {
            code: out.status.code(),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }),
        Ok(Err(e)) => Err(format!("{} failed: {e}", exe.display())),
        Err(_) => {
            if let Some(pid) = pid {
                // The hook and anything it started (its process group).
                unsafe {
                    libc::kill(-(pid as i32), libc::SIGKILL);
                }
            }
            Err(format!(
                "timed out after {} and was killed",
                humantime::format_duration(timeout)
            ))
        }
    }
}

/// Parse a before hook's answer.
fn decide(hook: &str, out: &Output) -> Result<Verdict, String> {
    if out.code == Some(2) {
        let reason = first_line(&out.stderr);
        return Ok(Verdict::Block {
            hook: hook.into(),
            reason: if reason.is_empty() {
                "exit code 2".into()
            } else {
                reason
            },
        });
    }
    if out.code != Some(0) {
        return Err(format!(
            "exited with {}: {}",
            code_text(out.code),
            first_line(&out.stderr)
        ));
    }
    let text = out.stdout.trim();
    if text.is_empty() {
        return Ok(Verdict::Allow);
    }
    let v: serde_json::Value = serde_json::from_str(text)
        .map_err(|e| format!("printed invalid JSON ({e}): {}", first_line(text)))?;
    let obj = v
        .as_object()
        .ok_or_else(|| "printed JSON that is not an object".to_string())?;
    let reason = obj
        .get("reason")
        .and_then(|r| r.as_str())
        .unwrap_or("no reason given")
        .to_string();
    if obj.get("blocked").and_then(|b| b.as_bool()) == Some(true) {
        // kodelet's own hook answer for "do not proceed".
        return Ok(Verdict::Block {
            hook: hook.into(),
            reason,
        });
    }
    let decision = obj.get("decision").and_then(|d| d.as_str());
    let action = obj.get("action").and_then(|d| d.as_str());
    match (decision, action) {
        (Some("block") | Some("deny"), _) | (_, Some("skip") | Some("block") | Some("stop")) => {
            return Ok(Verdict::Block {
                hook: hook.into(),
                reason,
            })
        }
        (
            Some("allow") | Some("approve") | None,
            None | Some("compact") | Some("continue") | Some("allow"),
        ) => {}
        (d, a) => {
            return Err(format!(
                "unknown decision {:?}",
                d.or(a).unwrap_or_default()
            ))
        }
    }
    match obj.get("summary") {
        Some(serde_json::Value::String(s)) if !s.trim().is_empty() => Ok(Verdict::Summary {
            hook: hook.into(),
            text: s.clone(),
        }),
        Some(serde_json::Value::String(_)) | Some(serde_json::Value::Null) | None => {
            Ok(Verdict::Allow)
        }
        Some(_) => Err("\"summary\" is not a string".into()),
    }
}

fn working_dir(cwd: Option<&str>) -> Option<PathBuf> {
    cwd.map(PathBuf::from).filter(|p| p.is_dir())
}

impl Hooks {
    pub fn for_event<'a>(&'a self, event: &'a str) -> impl Iterator<Item = &'a Hook> + 'a {
        self.hooks
            .iter()
            .filter(move |h| h.events.iter().any(|e| e == event))
    }

    pub fn is_empty(&self) -> bool {
        self.hooks.is_empty()
    }

    /// Run the before hooks in order: the first block stops and wins; otherwise the first
    /// non-empty summary wins.
    pub async fn before(
        &self,
        payload: &serde_json::Value,
        cwd: Option<&str>,
    ) -> (Verdict, Vec<Record>) {
        let bytes = serde_json::to_vec(payload).unwrap_or_default();
        let dir = working_dir(cwd);
        let mut records = Vec::new();
        let mut summary: Option<Verdict> = None;
        for h in self.for_event(BEFORE) {
            let result = match run(
                &h.path,
                &["run"],
                Some(&bytes),
                dir.as_deref(),
                self.timeout,
            )
            .await
            {
                Ok(out) => decide(&h.name, &out),
                Err(e) => Err(e),
            };
            let verdict = match result {
                Ok(v) => v,
                Err(e) if self.fail_open => {
                    records.push(Record {
                        hook: h.name.clone(),
                        event: BEFORE.into(),
                        decision: "allow".into(),
                        detail: Some(format!("failed open: {e}")),
                    });
                    continue;
                }
                Err(e) => Verdict::Block {
                    hook: h.name.clone(),
                    reason: format!("hook failed (fail closed): {e}"),
                },
            };
            let (decision, detail) = match &verdict {
                Verdict::Allow => ("allow", None),
                Verdict::Block { reason, .. } => ("block", Some(reason.clone())),
                Verdict::Summary { text, .. } => (
                    "summary",
                    Some(if summary.is_some() {
                        "ignored: an earlier hook supplied the summary".to_string()
                    } else {
                        format!("{} characters", text.chars().count())
                    }),
                ),
            };
            records.push(Record {
                hook: h.name.clone(),
                event: BEFORE.into(),
                decision: decision.into(),
                detail,
            });
            match verdict {
                Verdict::Block { .. } => return (verdict, records),
                Verdict::Summary { .. } if summary.is_none() => summary = Some(verdict),
                _ => {}
            }
        }
        (summary.unwrap_or(Verdict::Allow), records)
    }

    /// Run the after hooks; failures become warning records.
    pub async fn after(&self, payload: &serde_json::Value, cwd: Option<&str>) -> Vec<Record> {
        let bytes = serde_json::to_vec(payload).unwrap_or_default();
        let dir = working_dir(cwd);
        let mut records = Vec::new();
        for h in self.for_event(AFTER) {
            let (decision, detail) = match run(
                &h.path,
                &["run"],
                Some(&bytes),
                dir.as_deref(),
                self.timeout,
            )
            .await
            {
                Ok(out) if out.code == Some(0) => ("ok", None),
                Ok(out) => (
                    "error",
                    Some(format!(
                        "exited with {}: {}",
                        code_text(out.code),
                        first_line(&out.stderr)
                    )),
                ),
                Err(e) => ("error", Some(e)),
            };
            records.push(Record {
                hook: h.name.clone(),
                event: AFTER.into(),
                decision: decision.into(),
                detail,
            });
        }
        records
    }
}

/// The `before_compaction` payload.
pub fn before_payload(plan: &crate::plan::Plan, store_kind: &str) -> serde_json::Value {
    let m = &plan.meta;
    serde_json::json!({
        "event": BEFORE,
        "conversation_id": m.id,
        "store_kind": store_kind,
        "provider": m.provider,
        "model": m.model,
        "cwd": m.cwd,
        "reason": plan.reason.name(),
        "input_tokens": m.input_tokens,
        "output_tokens": m.output_tokens,
        "current_context_window": m.current_context,
        "max_context_window": m.max_context,
        "message_count": plan.loaded.messages.len(),
        "messages": plan.loaded.messages,
        "invoked_by": "agent-db",
    })
}

/// What the `after_compaction` payload reports about the committed compaction.
pub struct AfterFacts<'a> {
    pub strategy: &'a str,
    pub summary: Option<&'a str>,
    pub messages_after: usize,
    pub tokens_after: usize,
    pub compaction_id: i64,
    pub cost_usd: Option<f64>,
}

/// The `after_compaction` payload: the pre-compaction usage as stored, and the before/after
/// figures of the compaction.
pub fn after_payload(
    plan: &crate::plan::Plan,
    store_kind: &str,
    f: &AfterFacts<'_>,
) -> serde_json::Value {
    let m = &plan.meta;
    serde_json::json!({
        "event": AFTER,
        "conversation_id": m.id,
        "store_kind": store_kind,
        "reason": plan.reason.name(),
        "strategy": f.strategy,
        "summary": f.summary,
        "input_tokens": m.input_tokens,
        "output_tokens": m.output_tokens,
        "current_context_window": m.current_context,
        "max_context_window": m.max_context,
        "messages_before": plan.loaded.messages.len(),
        "messages_after": f.messages_after,
        "tokens_before": plan.tokens_before(),
        "tokens_after": f.tokens_after,
        "compaction_id": f.compaction_id,
        "cost_usd": f.cost_usd,
        "invoked_by": "agent-db",
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn out(code: i32, stdout: &str, stderr: &str) -> Output {
        Output {
            code: Some(code),
            stdout: stdout.into(),
            stderr: stderr.into(),
        }
    }

    #[test]
    fn decisions() {
        assert_eq!(decide("h", &out(0, "", "")), Ok(Verdict::Allow));
        assert_eq!(decide("h", &out(0, "{}", "")), Ok(Verdict::Allow));
        assert_eq!(
            decide("h", &out(0, r#"{"action":"compact"}"#, "")),
            Ok(Verdict::Allow)
        );
        assert!(
            matches!(decide("h", &out(0, r#"{"decision":"block","reason":"busy"}"#, "")), Ok(Verdict::Block { ref reason, .. }) if reason == "busy")
        );
        assert!(matches!(
            decide("h", &out(0, r#"{"action":"skip"}"#, "")),
            Ok(Verdict::Block { .. })
        ));
        assert!(
            matches!(decide("h", &out(2, "", "not now\n")), Ok(Verdict::Block { ref reason, .. }) if reason == "not now")
        );
        assert!(
            matches!(decide("h", &out(0, r#"{"summary":"S"}"#, "")), Ok(Verdict::Summary { ref text, .. }) if text == "S")
        );
        assert!(decide("h", &out(0, "not json", "")).is_err());
        assert!(decide("h", &out(1, "", "boom"))
            .unwrap_err()
            .contains("boom"));
        assert!(decide("h", &out(0, r#"{"decision":"maybe"}"#, "")).is_err());
    }
}

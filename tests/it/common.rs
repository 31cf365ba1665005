//! Shared test environment: temp dirs, generated stores, a hermetic `agent-db` command.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use agent_db_synth::{self as synth, SynthFormat, SynthOptions};
use rusqlite::Connection;
use sha2::{Digest, Sha256};
use tempfile::TempDir;

#[path = "../support/skip.rs"]
pub mod skip_rule;
pub use skip_rule::{skip, skip_with};

/// The generator's default clock; tests pin agent-db's clock to it.
pub const NOW: &str = "2026-11-01T12:00:00Z";

pub struct Env {
    pub dir: TempDir,
    pub db: PathBuf,
}

impl Env {
    /// A store generated with `n` conversations in `formats` (empty = all three).
    pub fn generated(n: usize, seed: u64, formats: &[SynthFormat]) -> Env {
        Env::generated_at(n, seed, formats, 1.0)
    }

    /// [`Env::generated`] with the generator's message sizes times `scale`.
    pub fn generated_at(n: usize, seed: u64, formats: &[SynthFormat], scale: f64) -> Env {
        let dir = tempfile::tempdir().expect("tempdir");
        let db = dir.path().join("storage.db");
        let opts = SynthOptions {
            conversations: n,
            seed,
            formats: formats.to_vec(),
            scale,
            ..SynthOptions::default()
        };
        synth::generate(&db, &opts).expect("generate store");
        Env { dir, db }
    }

    /// A generated opencode 1.x store, `opencode.db` (opencode's DDL of the era `preset` names:
    /// `opencode-1.14`, `opencode-1.18`, …), of `n` sessions from `seed`, message sizes times
    /// `scale`.
    pub fn opencode(preset: &str, n: usize, seed: u64, scale: f64) -> Env {
        let dir = tempfile::tempdir().expect("tempdir");
        let db = dir.path().join("opencode.db");
        let opts = SynthOptions {
            conversations: n,
            seed,
            scale,
            ..SynthOptions::default()
        };
        let era = synth::opencode::OpencodeEra::preset(preset)
            .unwrap_or_else(|| panic!("no opencode era {preset}"));
        synth::opencode::generate_opencode(&db, &opts, era).expect("generate opencode store");
        Env { dir, db }
    }

    /// An empty store in kodelet's layout.
    pub fn empty() -> Env {
        let dir = tempfile::tempdir().expect("tempdir");
        let db = dir.path().join("storage.db");
        drop(agent_db_synth::kodelet_schema::create(&db).expect("init"));
        Env { dir, db }
    }

    /// A file at `name` in the temp dir with `bytes`.
    pub fn file(&self, name: &str, bytes: &[u8]) -> PathBuf {
        let p = self.dir.path().join(name);
        std::fs::write(&p, bytes).expect("write");
        p
    }

    /// `agent-db --db <store>` with a clean environment and the clock pinned to [`NOW`].
    pub fn cmd(&self) -> assert_cmd::Command {
        let mut c = bare_cmd(self.dir.path());
        c.arg("--db").arg(&self.db);
        c
    }

    pub fn conn(&self) -> Connection {
        Connection::open(&self.db).expect("open")
    }

    /// sha256 of the store file and of its -wal/-shm files (or their absence).
    pub fn files_hash(&self) -> String {
        files_hash(&self.db)
    }

    pub fn ids(&self, sql: &str) -> Vec<String> {
        let c = self.conn();
        let mut s = c.prepare(sql).expect("prepare");
        let rows = s.query_map([], |r| r.get::<_, String>(0)).expect("query");
        rows.map(|r| r.expect("row")).collect()
    }

    /// Every row of `table` as text, ordered, for byte-level comparisons.
    pub fn dump(&self, table: &str) -> Vec<Vec<String>> {
        dump(&self.conn(), table)
    }
}

/// Every row of `table` (ordered by its first column), each cell as [`cell`] shows it: never
/// panics, whatever a cell holds.
pub fn dump(c: &Connection, table: &str) -> Vec<Vec<String>> {
    query_cells(c, &format!("SELECT * FROM \"{table}\" ORDER BY 1"))
}

/// Every row `sql` returns, each cell as [`cell`] shows it.
pub fn query_cells(c: &Connection, sql: &str) -> Vec<Vec<String>> {
    let mut s = c.prepare(sql).expect("prepare");
    let n = s.column_count();
    let rows = s
        .query_map([], |r| {
            (0..n)
                .map(|i| r.get_ref(i).map(cell))
                .collect::<rusqlite::Result<Vec<_>>>()
        })
        .expect("query");
    rows.map(|r| r.expect("row")).collect()
}

/// Every table of the store (`sqlite_sequence` and agent-db's own `agent_db_*` tables
/// included), every row in rowid order with its rowid first, every cell as [`cell`] shows it:
/// two dumps are equal only when every cell holds the same bytes with the same storage class.
pub fn dump_all(c: &Connection) -> BTreeMap<String, Vec<Vec<String>>> {
    let tables: Vec<String> = query_cells(
        c,
        "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name",
    )
    .into_iter()
    .map(|r| r[0].clone())
    .collect();
    tables
        .into_iter()
        .map(|t| {
            let name = t
                .strip_prefix("Text(\"")
                .and_then(|t| t.strip_suffix("\")"))
                .expect("a table name is text")
                .to_string();
            let rows = query_cells(
                c,
                &format!("SELECT rowid, * FROM \"{name}\" ORDER BY rowid"),
            );
            (name, rows)
        })
        .collect()
}

/// One cell with its storage class, byte-exact and never panicking: `Null`, `Integer(7)`,
/// `Real(0.5)` (the shortest text that reads back as the same double), `Text("…")` for valid
/// UTF-8, `InvalidText(x'c328')` for text that is not, `Blob(x'00ff')`.
pub fn cell(v: rusqlite::types::ValueRef<'_>) -> String {
    use rusqlite::types::ValueRef;
    let hex = |b: &[u8]| b.iter().map(|x| format!("{x:02x}")).collect::<String>();
    match v {
        ValueRef::Null => "Null".into(),
        ValueRef::Integer(i) => format!("Integer({i})"),
        ValueRef::Real(f) => format!("Real({f:?})"),
        ValueRef::Text(t) => match std::str::from_utf8(t) {
            Ok(s) => format!("Text({s:?})"),
            Err(_) => format!("InvalidText(x'{}')", hex(t)),
        },
        ValueRef::Blob(b) => format!("Blob(x'{}')", hex(b)),
    }
}

/// `agent-db` with a clean environment (no store variables, HOME in `home`).
pub fn bare_cmd(home: &Path) -> assert_cmd::Command {
    assert_cmd::Command::from_std(std_cmd(home))
}

/// The same as a plain `std::process::Command` (for spawning and killing).
pub fn std_cmd(home: &Path) -> std::process::Command {
    let mut c = std::process::Command::new(assert_cmd::cargo::cargo_bin("agent-db"));
    for (k, _) in std::env::vars() {
        if k.starts_with("AGENT_DB_") || k == "KODELET_BASE_PATH" || k.ends_with("_API_KEY") {
            c.env_remove(k);
        }
    }
    c.env("HOME", home)
        .env("XDG_CONFIG_HOME", home.join(".config"))
        .env("AGENT_DB_NOW", NOW)
        .env("COLUMNS", "200");
    c
}

pub fn files_hash(db: &Path) -> String {
    let mut h = Sha256::new();
    for suffix in ["", "-wal", "-shm"] {
        let mut p = db.as_os_str().to_owned();
        p.push(suffix);
        match std::fs::read(PathBuf::from(p)) {
            Ok(b) => {
                h.update(suffix.as_bytes());
                h.update((b.len() as u64).to_le_bytes());
                h.update(&b);
            }
            Err(_) => h.update(format!("{suffix}:absent").as_bytes()),
        }
    }
    hex::encode(h.finalize())
}

/// Run and parse stdout as JSON.
pub fn json(mut c: assert_cmd::Command) -> (serde_json::Value, i32) {
    let out = c.output().expect("run");
    let code = out.status.code().unwrap_or(-1);
    let v = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "stdout is not JSON ({e}); exit {code}\nstdout: {}\nstderr: {}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (v, code)
}

/// The ids of `conversations` rows in a JSON document with the given status.
/// Every row of a `list` or `compact` document, owned: `conversations`, then (`list --json`)
/// `skipped` and `failed`.
pub fn all_rows(doc: &serde_json::Value) -> Vec<serde_json::Value> {
    let mut rows: Vec<serde_json::Value> =
        doc["conversations"].as_array().cloned().unwrap_or_default();
    for more in ["skipped", "failed"] {
        rows.extend(doc[more].as_array().into_iter().flatten().cloned());
    }
    rows
}

/// (`list --json` puts skipped rows in `skipped` and unreadable ones in `failed`.)
pub fn ids_with_status(doc: &serde_json::Value, status: &str) -> Vec<String> {
    let mut rows: Vec<&serde_json::Value> = doc["conversations"]
        .as_array()
        .expect("conversations array")
        .iter()
        .collect();
    for more in ["skipped", "failed"] {
        rows.extend(doc[more].as_array().into_iter().flatten());
    }
    rows.into_iter()
        .filter(|r| r["status"] == status)
        .map(|r| r["id"].as_str().expect("id").to_string())
        .collect()
}

/// Each listed row's message count and `updated_at`, by id, from a `list --json` document.
pub fn counts_and_times_of(
    doc: &serde_json::Value,
) -> std::collections::BTreeMap<String, (i64, String)> {
    all_rows(doc)
        .iter()
        .map(|r| {
            let id = r["id"].as_str().unwrap().to_string();
            (
                id,
                (
                    r["messages"].as_i64().unwrap(),
                    r["updated_at"].as_str().unwrap().to_string(),
                ),
            )
        })
        .collect()
}

/// `list ... --ids` (`c`) against the same listing's JSON document (`doc`): stdout is the
/// selected ids, one per line, in the document's order; stderr counts the skipped ones.
pub fn ids_agree(mut c: assert_cmd::Command, doc: &serde_json::Value) {
    let out = c.output().expect("run list --ids");
    let stdout = String::from_utf8(out.stdout).expect("UTF-8 ids");
    let stderr = String::from_utf8_lossy(&out.stderr);
    let got: Vec<&str> = stdout.lines().collect();
    assert_eq!(
        got,
        ids_with_status(doc, "selected"),
        "list --ids\n{stderr}"
    );
    let skipped: usize = stderr
        .lines()
        .filter_map(|l| {
            l.split_once(" skipped: ")
                .and_then(|(n, _)| n.parse::<usize>().ok())
        })
        .sum();
    assert_eq!(skipped, ids_with_status(doc, "skipped").len(), "{stderr}");
}

/// Environment variable naming the shared fixtures directory instead of [`SHARED_DIR_DEFAULT`]
/// (used to check that a missing fixture fails under `CI`; see [`shared_fixture`]).
pub const SHARED_DIR_ENV: &str = "AGENT_DB_SHARED_DIR";

/// Where the project's shared fixtures (large real stores kept out of this repository) are
/// checked out, relative to this repository.
pub const SHARED_DIR_DEFAULT: &str = "../shared";

/// A file of the project's shared fixtures ([`SHARED_DIR_DEFAULT`]`/<rel>`, or
/// `$AGENT_DB_SHARED_DIR/<rel>` when that variable is set and non-empty).
///
/// `None`, with a "SKIPPING" line on stderr ([`skip`]), when the file is absent: a user's fresh
/// clone of this repository alone has no shared fixtures. When the environment variable `CI` is set and not
/// empty, a missing file **panics** instead, so a CI run that lost its fixtures fails rather than
/// passing with the tests silently skipped. To see that rule at work:
///
/// ```sh
/// CI=true AGENT_DB_SHARED_DIR=/nonexistent cargo test --test it e2e_   # fails
/// cargo test --test it e2e_                                             # passes
/// ```
pub fn shared_fixture(rel: &str) -> Option<PathBuf> {
    let dir = match std::env::var_os(SHARED_DIR_ENV) {
        Some(d) if !d.is_empty() => PathBuf::from(d),
        _ => Path::new(env!("CARGO_MANIFEST_DIR")).join(SHARED_DIR_DEFAULT),
    };
    require_fixture(&dir.join(rel), std::env::var_os("CI"))
}

/// The policy of [`shared_fixture`] for one path, given the value of `CI` ([`skip_with`]).
pub fn require_fixture(path: &Path, ci: Option<std::ffi::OsString>) -> Option<PathBuf> {
    if path.is_file() {
        return Some(path.to_path_buf());
    }
    skip_with(
        &format!(
            "shared fixture {} is missing: check out the shared fixtures next to this \
             repository (or point {SHARED_DIR_ENV} at them)",
            path.display()
        ),
        ci,
    );
    None
}

#[test]
fn a_missing_shared_fixture_skips_outside_ci() {
    let missing = Path::new("/nonexistent/agent-db/fixture.db");
    assert_eq!(require_fixture(missing, None), None);
    assert_eq!(require_fixture(missing, Some("".into())), None);
}

#[test]
#[should_panic(expected = "cannot run and CI is set")]
fn a_missing_shared_fixture_fails_under_ci() {
    require_fixture(
        Path::new("/nonexistent/agent-db/fixture.db"),
        Some("true".into()),
    );
}

#[test]
fn a_present_shared_fixture_is_returned_under_ci() {
    let dir = tempfile::tempdir().expect("tempdir");
    let p = dir.path().join("f.db");
    std::fs::write(&p, b"x").expect("write");
    assert_eq!(require_fixture(&p, Some("true".into())), Some(p));
}

/// An OpenAI-compatible chat-completions server on 127.0.0.1 that answers every request with
/// the same short summary and counts the requests it gets (std threads, no runtime needed).
pub struct MiniLlm {
    pub port: u16,
    pub seen: std::sync::Arc<std::sync::atomic::AtomicUsize>,
}

/// The headings the built-in `compact` recipe requires (its `## ` lines), in order.
pub fn compact_headings() -> Vec<String> {
    include_str!("../../src/recipes/compact.md")
        .lines()
        .filter(|l| l.starts_with("## "))
        .map(str::to_string)
        .collect()
}

/// A model answer that passes agent-db's checks for the `compact` recipe: `text` under the first
/// required heading, and a sentence of plain prose (no path, command or number) under each of
/// the others, so the answer has enough content for any span. An answer that already has the
/// first heading is returned as is.
pub fn sectioned(text: &str) -> String {
    let headings = compact_headings();
    if text.contains(&headings[0]) {
        return text.to_string();
    }
    let mut out = format!("{}\n{}\n", headings[0], text.trim());
    for h in &headings[1..] {
        out.push_str(&format!(
            "\n{h}\n- Nothing beyond the notes above was recorded under this heading by the model for this part of the work.\n"
        ));
    }
    out
}

impl MiniLlm {
    pub fn start() -> MiniLlm {
        MiniLlm::answering(|_| "## Summary\nThe user asked for a refactor; it is done.".into())
    }

    /// A server whose answer to each request is `answer` of the request body (JSON), made a
    /// valid summary by [`sectioned`].
    pub fn answering(
        answer: impl Fn(&serde_json::Value) -> String + Send + Sync + 'static,
    ) -> MiniLlm {
        use std::io::{BufRead, BufReader, Read, Write};
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1");
        let port = l.local_addr().unwrap().port();
        let seen = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let counter = seen.clone();
        let answer = std::sync::Arc::new(answer);
        std::thread::spawn(move || {
            for s in l.incoming().flatten() {
                counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                let answer = answer.clone();
                std::thread::spawn(move || {
                    let mut r = BufReader::new(s.try_clone().unwrap());
                    let mut len = 0usize;
                    loop {
                        let mut line = String::new();
                        if r.read_line(&mut line).unwrap_or(0) == 0 {
                            return;
                        }
                        let l = line.trim_end().to_ascii_lowercase();
                        if l.is_empty() {
                            break;
                        }
                        if let Some(v) = l.strip_prefix("content-length:") {
                            len = v.trim().parse().unwrap_or(0);
                        }
                    }
                    let mut body = vec![0; len];
                    let _ = r.read_exact(&mut body);
                    let req = serde_json::from_slice(&body).unwrap_or(serde_json::Value::Null);
                    let answer = serde_json::json!({
                        "id": "chatcmpl-1", "object": "chat.completion", "model": "test-model",
                        "choices": [{"index": 0, "finish_reason": "stop",
                            "message": {"role": "assistant", "content": sectioned(&answer(&req))}}],
                        "usage": {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120}
                    })
                    .to_string();
                    let mut s = s;
                    let _ = write!(
                        s,
                        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{answer}",
                        answer.len()
                    );
                });
            }
        });
        MiniLlm { port, seen }
    }

    pub fn base_url(&self) -> String {
        format!("http://127.0.0.1:{}/v1", self.port)
    }

    pub fn requests(&self) -> usize {
        self.seen.load(std::sync::atomic::Ordering::SeqCst)
    }
}

/// An archived cell's pre-image bytes, read by the test's own SQL: `value` as stored, or, for a
/// packed value (migration 0002), its `packed` zstd frame decompressed with libzstd. `filter` is
/// an SQL condition on `agent_db_archive` with one parameter.
pub fn archived_bytes(c: &Connection, filter: &str, param: &dyn rusqlite::ToSql) -> Vec<u8> {
    let (value, packed): (Option<Vec<u8>>, Option<Vec<u8>>) = c
        .query_row(
            &format!("SELECT CAST(value AS BLOB), packed FROM agent_db_archive WHERE {filter}"),
            [param],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .expect("archived cell");
    match (value, packed) {
        (_, Some(p)) => zstd::stream::decode_all(&p[..]).expect("a zstd frame"),
        (Some(v), None) => v,
        (None, None) => Vec::new(),
    }
}

/// The archive's stored size as the test's SQL sees it: `value` bytes plus packed bytes.
pub const ARCHIVE_BYTES_SQL: &str =
    "SELECT COALESCE(SUM(COALESCE(LENGTH(CAST(value AS BLOB)), 0) + COALESCE(LENGTH(packed), 0)), 0) FROM agent_db_archive";

/// `ids` (in a store's listing order) as a `list --json` document orders them: the selected
/// first, then the skipped and the unreadable, each in listing order.
pub fn in_list_json_order(doc: &serde_json::Value, mut ids: Vec<String>) -> Vec<String> {
    let selected: std::collections::HashSet<String> = doc["conversations"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|r| r["id"].as_str().map(str::to_string))
        .collect();
    ids.sort_by_key(|id| !selected.contains(id));
    ids
}

/// The skip rule itself: outside CI a skip returns (the caller stops); with `CI` set, even to
/// `false`, it panics; an empty `CI` counts as unset.
#[test]
fn a_skip_returns_outside_ci() {
    skip_with("nothing is missing, this is the rule's own test", None);
    skip_with(
        "nothing is missing, this is the rule's own test",
        Some("".into()),
    );
}

#[test]
#[should_panic(expected = "cannot run and CI is set, so it fails instead of skipping")]
fn a_skip_fails_under_ci() {
    skip_with("the rule's own test", Some("false".into()));
}

//! A deterministic generator of realistic docker-agent (cagent) `session.db` files, in two
//! generations, for tests and demos (stores.md §2).
//!
//! - [`Generation::Legacy`]: docker-agent's migrations 1–19 applied (their SQL run in order, so
//!   the schema text is what docker-agent leaves), `migrations` rows 1–19, the legacy
//!   `sessions.messages` `[]Item` JSON kept in sync as docker-agent up to migration 19 does, no
//!   `first_kept_entry`.
//! - [`Generation::Modern`]: migrations 1–29 (`messages` dropped by 20, `first_kept_entry` 21,
//!   item `cost` 23, item `model`/`usage_json` 25, `origin` 27, `generated_media_manifest` 28–29).
//!
//! Sessions are coding sessions from the shared neutral generator, rendered as
//! `json.Marshal(chat.Message)`: user turns (some with an image in `multi_content`), assistant
//! steps with `tool_calls`, `tool_definitions`, `usage`, `model`, `cost`, tool results (some
//! `is_error`). Some sessions hand a task to a sub-agent (`transfer_task`, a sub-session row
//! with `parent_id`, a `subsession` item), some hold an earlier docker-agent summary item (with
//! a kept tail through `first_kept_entry` on modern files), a few use a model agent-db has no
//! context limit for, one is empty, and one was active a few minutes before `now`.
//! `sessions.input_tokens`/`output_tokens` hold the last model call, as docker-agent records it.
//!
//! The same options always give identical files. This module writes rows directly, like the
//! kodelet generator (the one exception to "only `store/` runs SQL").

use std::path::Path;

use base64::Engine;
use chrono::{DateTime, Duration, FixedOffset};
use rand::rngs::StdRng;
use rand::seq::IndexedRandom;
use rand::{Rng, SeedableRng};
use rusqlite::{params, Connection};

use super::gojson::{Arr, Obj};
use super::session::{self, IdStyle, Plan, Shape, Step};
use super::words::{self, Topic};
use super::{splitmix64, uuid, SynthOptions, SynthStats};
use crate::error::{Error, Result, SqlContext};

/// Which docker-agent schema generation to write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Generation {
    /// Migrations 1–19: legacy `sessions.messages`, no `first_kept_entry`.
    Legacy,
    /// Migrations 1–29: `first_kept_entry`, item `cost`, `model`, `usage_json`.
    Modern,
}

impl Generation {
    pub fn last_migration(self) -> i64 {
        match self {
            Generation::Legacy => 19,
            Generation::Modern => 29,
        }
    }
}

/// docker-agent's bootstrap table and migrations (`pkg/session/migrations.go`): id, name,
/// description, SQL (migration 15 is a Go data migration with no SQL).
const MIGRATIONS: &[(i64, &str, &str, &str)] = &[
    (1, "001_add_tools_approved_column", "Add tools_approved column to sessions table", "ALTER TABLE sessions ADD COLUMN tools_approved BOOLEAN DEFAULT 0"),
    (2, "002_add_usage_column", "Add usage column to sessions table", "ALTER TABLE sessions ADD COLUMN input_tokens INTEGER DEFAULT 0"),
    (3, "003_add_output_tokens_column", "Add output_tokens column to sessions table", "ALTER TABLE sessions ADD COLUMN output_tokens INTEGER DEFAULT 0"),
    (4, "004_add_title_column", "Add title column to sessions table", "ALTER TABLE sessions ADD COLUMN title TEXT DEFAULT ''"),
    (5, "005_add_cost_column", "Add cost column to sessions table", "ALTER TABLE sessions ADD COLUMN cost REAL DEFAULT 0"),
    (6, "006_add_send_user_message_column", "Add send_user_message column to sessions table", "ALTER TABLE sessions ADD COLUMN send_user_message BOOLEAN DEFAULT 1"),
    (7, "007_add_max_iterations_column", "Add max_iterations column to sessions table", "ALTER TABLE sessions ADD COLUMN max_iterations INTEGER DEFAULT 0"),
    (8, "008_add_working_dir_column", "Add working_dir column to sessions table", "ALTER TABLE sessions ADD COLUMN working_dir TEXT DEFAULT ''"),
    (9, "009_add_starred_column", "Add starred column to sessions table", "ALTER TABLE sessions ADD COLUMN starred BOOLEAN DEFAULT 0"),
    (10, "010_add_permissions_column", "Add permissions column to sessions table for session-level permission overrides", "ALTER TABLE sessions ADD COLUMN permissions TEXT DEFAULT ''"),
    (11, "011_add_agent_model_overrides_column", "Add agent_model_overrides column to sessions table for per-session model switching", "ALTER TABLE sessions ADD COLUMN agent_model_overrides TEXT DEFAULT '{}'"),
    (12, "012_add_custom_models_used_column", "Add custom_models_used column to sessions table for tracking custom models used in session", "ALTER TABLE sessions ADD COLUMN custom_models_used TEXT DEFAULT '[]'"),
    (13, "013_add_thinking_column", "Add thinking column to sessions table for session-level thinking toggle (default enabled)", "ALTER TABLE sessions ADD COLUMN thinking BOOLEAN DEFAULT 1"),
    (14, "014_normalize_session_items", "Add session_items table and parent_id column for normalized session storage", "
\t\t\t\tALTER TABLE sessions ADD COLUMN parent_id TEXT REFERENCES sessions(id) ON DELETE CASCADE;
\t\t\t\tCREATE INDEX IF NOT EXISTS idx_sessions_parent_id ON sessions(parent_id);
\t\t\t\tCREATE TABLE IF NOT EXISTS session_items (
\t\t\t\t\tid INTEGER PRIMARY KEY AUTOINCREMENT,
\t\t\t\t\tsession_id TEXT NOT NULL,
\t\t\t\t\tposition INTEGER NOT NULL,
\t\t\t\t\titem_type TEXT NOT NULL,
\t\t\t\t\tagent_name TEXT,
\t\t\t\t\tmessage_json TEXT,
\t\t\t\t\timplicit BOOLEAN DEFAULT 0,
\t\t\t\t\tsubsession_id TEXT,
\t\t\t\t\tsummary_text TEXT,
\t\t\t\t\tFOREIGN KEY (session_id) REFERENCES sessions(id) ON DELETE CASCADE,
\t\t\t\t\tFOREIGN KEY (subsession_id) REFERENCES sessions(id) ON DELETE SET NULL
\t\t\t\t);
\t\t\t\tCREATE INDEX IF NOT EXISTS idx_session_items_session ON session_items(session_id, position);
"),
    (15, "015_migrate_messages_to_session_items", "Migrate existing messages JSON data to session_items table", ""),
    (16, "016_add_branching_columns", "Add branch metadata columns for session branching", "
\t\t\t\tALTER TABLE sessions ADD COLUMN branch_parent_session_id TEXT REFERENCES sessions(id) ON DELETE SET NULL;
\t\t\t\tALTER TABLE sessions ADD COLUMN branch_parent_position INTEGER;
\t\t\t\tALTER TABLE sessions ADD COLUMN branch_created_at TEXT;
\t\t\t\tCREATE INDEX IF NOT EXISTS idx_sessions_branch_parent ON sessions(branch_parent_session_id);
"),
    (17, "017_add_split_diff_view_column", "Add split_diff_view column to sessions table for persisting split diff toggle", "ALTER TABLE sessions ADD COLUMN split_diff_view BOOLEAN"),
    (18, "018_add_session_items_type_index", "Add index on session_items(session_id, item_type) to speed up session summary message counts", "CREATE INDEX IF NOT EXISTS idx_session_items_session_type ON session_items(session_id, item_type)"),
    (19, "019_drop_branch_and_split_diff_columns", "Drop unused branch metadata columns and split_diff_view column", "
\t\t\t\tDROP INDEX IF EXISTS idx_sessions_branch_parent;
\t\t\t\tALTER TABLE sessions DROP COLUMN branch_parent_session_id;
\t\t\t\tALTER TABLE sessions DROP COLUMN branch_parent_position;
\t\t\t\tALTER TABLE sessions DROP COLUMN branch_created_at;
\t\t\t\tALTER TABLE sessions DROP COLUMN split_diff_view;
"),
    (20, "020_drop_messages_column", "Drop the legacy messages JSON column now that all data lives in session_items", "ALTER TABLE sessions DROP COLUMN messages"),
    (21, "021_add_first_kept_entry_column", "Add first_kept_entry column to session_items for compaction-preserved messages", "ALTER TABLE session_items ADD COLUMN first_kept_entry INTEGER DEFAULT 0"),
    (22, "022_add_instruction_context_column", "Persist cache-stable instruction snapshots and chronological updates", "ALTER TABLE sessions ADD COLUMN instruction_context TEXT DEFAULT ''"),
    (23, "023_add_cost_to_session_items", "Add cost column to session_items so compaction summary costs survive reload", "ALTER TABLE session_items ADD COLUMN cost REAL NOT NULL DEFAULT 0"),
    (24, "024_add_safety_policy_column", "Add safety_policy column to sessions table", "ALTER TABLE sessions ADD COLUMN safety_policy TEXT DEFAULT ''"),
    (25, "025_add_model_usage_to_session_items", "Add model and usage_json columns to session_items so compaction summary costs can be attributed per model", "
\t\t\t\tALTER TABLE session_items ADD COLUMN model TEXT NOT NULL DEFAULT '';
\t\t\t\tALTER TABLE session_items ADD COLUMN usage_json TEXT NOT NULL DEFAULT '';
"),
    (26, "026_add_session_attributes_column", "Add generic attributes to sessions", "ALTER TABLE sessions ADD COLUMN attributes TEXT DEFAULT '{}'"),
    (27, "027_add_session_origin_column", "Record the protocol surface that created each session", "ALTER TABLE sessions ADD COLUMN origin TEXT NOT NULL DEFAULT 'run'"),
    (28, "028_add_generated_media_manifest_table", "Record which workspace files generated-media materialization wrote, keyed by owning session and workspace-relative path", "
\t\t\t\tCREATE TABLE IF NOT EXISTS generated_media_manifest (
\t\t\t\t\tsession_id TEXT NOT NULL,
\t\t\t\t\trel_path TEXT NOT NULL,
\t\t\t\t\tmime_type TEXT NOT NULL,
\t\t\t\t\tcreated_at TEXT NOT NULL,
\t\t\t\t\tPRIMARY KEY (session_id, rel_path)
\t\t\t\t)
"),
    (29, "029_add_root_kind_to_generated_media_manifest", "Add root_kind to generated_media_manifest so user-confirmed out-of-workspace generated files stay manifest-gated alongside workspace-relative ones", "ALTER TABLE generated_media_manifest ADD COLUMN root_kind TEXT NOT NULL DEFAULT 'workspace'"),
];

const BOOTSTRAP: &str = "
\t\tCREATE TABLE IF NOT EXISTS sessions (
\t\t\tid TEXT PRIMARY KEY,
\t\t\tmessages TEXT,
\t\t\tcreated_at TEXT
\t\t)
\t";

const MIGRATIONS_TABLE: &str = "
\t\tCREATE TABLE IF NOT EXISTS migrations (
\t\t\tid INTEGER PRIMARY KEY,
\t\t\tname TEXT UNIQUE NOT NULL,
\t\t\tdescription TEXT,
\t\t\tapplied_at TEXT NOT NULL
\t\t)
\t";

/// (model, $/Mtok input, $/Mtok output). The last two have no entry in agent-db's table.
const MODELS: &[(&str, f64, f64)] = &[
    ("claude-sonnet-4-5-20250929", 3.0, 15.0),
    ("claude-opus-4-5-20251101", 5.0, 25.0),
    ("claude-sonnet-4-5-20250929", 3.0, 15.0),
    ("gpt-5", 1.25, 10.0),
    ("claude-haiku-4-5-20251001", 1.0, 5.0),
];
const UNKNOWN_MODELS: &[&str] = &["qwen3-coder:30b", "llama3.1:70b"];

/// docker-agent's tool names for the neutral generator's tools.
fn tool_name(neutral: &str) -> &'static str {
    match neutral {
        "file_read" => "read_file",
        "bash" => "shell",
        "grep_tool" => "search_files_content",
        "glob_tool" => "directory_tree",
        "file_edit" => "edit_file",
        "file_write" => "write_file",
        _ => "shell",
    }
}

/// A tool definition as docker-agent stores it in `tool_definitions` (map keys sorted).
fn tool_definition(out: &mut String, name: &str) {
    let (category, desc, read_only) = match name {
        "read_file" => (
            "filesystem",
            "Read the complete contents of a file from the file system.",
            true,
        ),
        "search_files_content" => (
            "filesystem",
            "Searches for text or regex patterns in the content of files matching a GLOB pattern.",
            true,
        ),
        "directory_tree" => (
            "filesystem",
            "Get a recursive tree view of files and directories as a JSON structure.",
            true,
        ),
        "edit_file" => ("filesystem", "Make line-based edits to a text file.", false),
        "write_file" => (
            "filesystem",
            "Create a new file or completely overwrite an existing file with new content.",
            false,
        ),
        "transfer_task" => (
            "transfer",
            "Use this function to transfer a task to the selected team member.",
            false,
        ),
        _ => (
            "shell",
            "Executes the given shell command in the user's default shell.",
            false,
        ),
    };
    let mut o = Obj::start(out);
    o.str("name", name)
        .str("category", category)
        .str("description", desc)
        .raw(
            "parameters",
            r#"{"additionalProperties":false,"properties":{"path":{"description":"The path","type":"string"}},"required":["path"],"type":"object"}"#,
        );
    {
        let mut a = Obj::start(o.field("annotations"));
        if read_only {
            a.bool("readOnlyHint", true);
        }
        a.str("title", &words::pascal(&name.replace('_', " ")));
        a.end();
    }
    o.raw("outputSchema", r#"{"type":"string"}"#);
    o.end();
}

/// Go `time.Time.Format(time.RFC3339)`: whole seconds, `Z` for UTC.
fn rfc3339(t: &DateTime<FixedOffset>) -> String {
    let whole = *t - Duration::nanoseconds(t.timestamp_subsec_nanos() as i64);
    session::rfc3339_nano(&whole)
}

/// One row of `session_items`, in insertion order.
#[derive(Debug, Clone)]
enum Item {
    Message {
        agent: String,
        json: String,
        implicit: bool,
    },
    Summary {
        text: String,
        first_kept_entry: i64,
    },
    SubSession(Box<SessionRow>),
}

#[derive(Debug, Clone)]
struct SessionRow {
    id: String,
    title: String,
    created_at: String,
    working_dir: String,
    input_tokens: i64,
    output_tokens: i64,
    cost: f64,
    items: Vec<Item>,
}

/// Builds one session's items while tracking the context size and the clock.
struct Builder<'a, R: Rng> {
    rng: &'a mut R,
    clock: DateTime<FixedOffset>,
    model: &'a str,
    price: (f64, f64),
    generation: Generation,
    /// Tokens the next model call would send (system prompt and tools included).
    context: i64,
    last_input: i64,
    last_output: i64,
    cost: f64,
    items: Vec<Item>,
}

impl<R: Rng> Builder<'_, R> {
    fn tick(&mut self, lo: i64, hi: i64) -> String {
        self.clock += Duration::seconds(self.rng.random_range(lo..hi));
        rfc3339(&self.clock)
    }

    fn push(&mut self, agent: &str, json: String, implicit: bool) {
        self.context += json.len() as i64 / 4;
        self.items.push(Item::Message {
            agent: agent.to_string(),
            json,
            implicit,
        });
    }

    fn user(&mut self, text: &str, image: Option<&[u8]>) {
        let at = self.tick(20, 600);
        let mut j = String::new();
        let mut o = Obj::start(&mut j);
        o.str("role", "user").str("content", text);
        if let Some(png) = image {
            let mut parts = Arr::start(o.field("multi_content"));
            {
                let mut p = Obj::start(parts.item());
                p.str("type", "text").str("text", text);
                p.end();
            }
            {
                let mut p = Obj::start(parts.item());
                p.str("type", "image_url");
                let mut u = Obj::start(p.field("image_url"));
                let data = base64::engine::general_purpose::STANDARD.encode(png);
                u.str("url", &format!("data:image/png;base64,{data}"))
                    .str("detail", "auto");
                u.end();
                p.end();
            }
            parts.end();
        }
        o.str("created_at", &at);
        o.end();
        self.push("", j, false);
    }

    fn assistant(
        &mut self,
        agent: &str,
        thinking: Option<&(String, String)>,
        text: &str,
        calls: &[(String, String, String)],
    ) {
        let at = self.tick(2, 40);
        let output =
            ((text.len() + calls.iter().map(|c| c.2.len()).sum::<usize>()) / 4 + 20) as i64;
        let fresh = self.rng.random_range(1..12);
        let write = self.rng.random_range(200..2500).min(self.context.max(1));
        let cached = (self.context - write - fresh).max(0);
        let cost = (fresh + write) as f64 * self.price.0 * 1.25 / 1e6
            + cached as f64 * self.price.0 * 0.1 / 1e6
            + output as f64 * self.price.1 / 1e6;
        let cost = (cost * 1e7).round() / 1e7;
        let mut j = String::new();
        let mut o = Obj::start(&mut j);
        o.str("role", "assistant").str("content", text);
        if let Some((t, sig)) = thinking {
            o.str("reasoning_content", t).str("thinking_signature", sig);
        }
        if !calls.is_empty() {
            let mut a = Arr::start(o.field("tool_calls"));
            for (id, name, args) in calls {
                let mut c = Obj::start(a.item());
                c.str("id", id).str("type", "function");
                let mut f = Obj::start(c.field("function"));
                f.str("name", name).str("arguments", args);
                f.end();
                c.end();
            }
            a.end();
            let mut d = Arr::start(o.field("tool_definitions"));
            let mut seen: Vec<&str> = Vec::new();
            for (_, name, _) in calls {
                if !seen.contains(&name.as_str()) {
                    seen.push(name);
                    tool_definition(d.item(), name);
                }
            }
            d.end();
        }
        o.str("created_at", &at);
        {
            let mut u = Obj::start(o.field("usage"));
            u.int("input_tokens", fresh)
                .int("output_tokens", output)
                .int("cached_input_tokens", cached)
                .int("cached_write_tokens", write);
            u.end();
        }
        o.str("model", self.model).float("cost", cost);
        if self.generation == Generation::Modern {
            o.str(
                "finish_reason",
                if calls.is_empty() {
                    "stop"
                } else {
                    "tool_calls"
                },
            );
        }
        o.end();
        self.last_input = fresh + cached + write;
        self.last_output = output;
        self.cost += cost;
        self.push(agent, j, false);
    }

    fn tool(&mut self, agent: &str, call_id: &str, text: &str, is_error: bool) {
        let at = self.tick(1, 30);
        let mut j = String::new();
        let mut o = Obj::start(&mut j);
        o.str("role", "tool")
            .str("content", text)
            .str("tool_call_id", call_id);
        if is_error {
            o.bool("is_error", true);
        }
        o.str("created_at", &at);
        o.end();
        self.push(agent, j, false);
    }

    /// Slice index the next item will get (sub-session rows always resolve here).
    fn next_index(&self) -> i64 {
        self.items.len() as i64
    }
}

/// What a session should contain.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Shape2 {
    empty: bool,
    sub_session: bool,
    summary: bool,
    unknown_model: bool,
    recent: bool,
    huge: bool,
}

/// Which features session `i` of `n` has (by index, so every feature appears in small stores).
fn shape_of(i: usize, n: usize) -> Shape2 {
    let empty = n >= 6 && i == 4;
    Shape2 {
        empty,
        sub_session: !empty && i % 4 == 1,
        summary: !empty && i % 3 == 2,
        unknown_model: !empty && i % 6 == 5 && i % 8 != 3,
        recent: n > 1 && i == n - 1,
        huge: !empty && i % 8 == 3,
    }
}

/// Generate session `index`; `start` overrides its start time (the draws stay the same), and the
/// time of its last item is returned with it.
fn session_row(
    opts: &SynthOptions,
    index: usize,
    generation: Generation,
    seed: u64,
    start: Option<DateTime<FixedOffset>>,
) -> (SessionRow, DateTime<FixedOffset>) {
    let n = opts.conversations;
    let shape = shape_of(index, n);
    let mut rng = StdRng::seed_from_u64(seed);
    let rng = &mut rng;
    let scale = if opts.scale.is_finite() && opts.scale > 0.0 {
        opts.scale
    } else {
        1.0
    };
    let id = uuid(rng);
    let (project, lang) = *words::PROJECTS.choose(rng).expect("projects");
    let topic = Topic::new(rng, project, lang);
    let cwd = format!("/Users/dev/src/{project}");
    let (model, pin, pout) = if shape.unknown_model {
        (*UNKNOWN_MODELS.choose(rng).expect("models"), 0.0, 0.0)
    } else if shape.huge {
        // Long sessions run close to a 200k window, where docker-agent would compact at 90%.
        *MODELS[..3].choose(rng).expect("models")
    } else {
        *MODELS.choose(rng).expect("models")
    };
    let tz = FixedOffset::east_opt(*[0, 3600, -7 * 3600, 19800].choose(rng).expect("zones"))
        .expect("valid offset");
    let back = Duration::seconds(rng.random_range(86_400..50 * 86_400));
    let created = start.unwrap_or(opts.now - back).with_timezone(&tz);

    let scaled = |k: usize| ((k as f64 * scale).round() as usize).max(1);
    let plan = if shape.empty {
        Plan {
            shape: Shape::Empty,
            user_turns: 0,
            steps: 0,
            target_bytes: None,
            long_prob: 0.0,
            think_prob: 0.0,
            image_prob: 0.0,
            error_prob: 0.0,
        }
    } else if shape.huge {
        let tokens = rng.random_range(150_000..175_000usize);
        Plan {
            shape: Shape::Normal,
            user_turns: rng.random_range(2..=4),
            steps: scaled(30),
            target_bytes: Some((tokens as f64 * 3.4 * scale) as usize),
            long_prob: 0.2,
            think_prob: 0.4,
            image_prob: 0.0,
            error_prob: 0.08,
        }
    } else {
        Plan {
            shape: Shape::Normal,
            user_turns: rng.random_range(2..=4),
            steps: scaled(rng.random_range(6..24)),
            target_bytes: None,
            long_prob: 0.03,
            think_prob: 0.4,
            image_prob: 0.05,
            error_prob: 0.08,
        }
    };
    let neutral = session::generate(rng, &topic, &cwd, IdStyle::Anthropic, created, &plan);
    let title = if shape.empty {
        String::new()
    } else {
        format!(
            "{} {} {}",
            words::pascal(words::pick(rng, words::VERBS)),
            topic.module,
            words::pick(rng, words::NOUNS)
        )
    };
    let mut b = Builder {
        rng,
        clock: created,
        model,
        price: (pin, pout),
        generation,
        context: 0,
        last_input: 0,
        last_output: 0,
        cost: 0.0,
        items: Vec::new(),
    };
    b.context = b.rng.random_range(6_000..14_000);
    let turns = neutral
        .steps
        .iter()
        .filter(|s| matches!(s, Step::User { .. }))
        .count();
    let summary_turn = if shape.summary && turns >= 2 { 2 } else { 0 };
    let mut user_seen = 0;
    // Slice index of the latest assistant message that starts a step (its predecessor is a
    // user or tool message): a place docker-agent's compaction may keep a tail from.
    let mut step_start: i64 = 0;
    let mut after_user_or_tool = false;
    let mut sub_done = !shape.sub_session;
    let mut seq = 0usize;
    for step in &neutral.steps {
        match step {
            Step::User { text, image } => {
                user_seen += 1;
                if user_seen == summary_turn {
                    // docker-agent compacted before this turn: a summary item, with the last step
                    // of the previous turn kept verbatim (first_kept_entry) on most modern files.
                    let text = format!(
                        "The user is working on {} in {}. They asked: {}\n\nDone so far: the relevant files were read and the first changes were made; the tests were run.",
                        topic.module,
                        project,
                        neutral.first_text.as_deref().unwrap_or("").lines().next().unwrap_or("")
                    );
                    let fke = if generation == Generation::Modern
                        && step_start > 0
                        && b.rng.random_bool(0.7)
                    {
                        step_start
                    } else {
                        0
                    };
                    b.items.push(Item::Summary {
                        text,
                        first_kept_entry: fke,
                    });
                    b.context = b.rng.random_range(6_000..14_000) + 600;
                }
                b.user(text, image.as_ref().map(|i| i.png.as_slice()));
                after_user_or_tool = true;
            }
            Step::Assistant {
                thinking,
                text,
                calls,
                ..
            } => {
                if after_user_or_tool {
                    step_start = b.next_index();
                }
                after_user_or_tool = false;
                let calls: Vec<(String, String, String)> = calls
                    .iter()
                    .map(|c| (c.id.clone(), tool_name(c.name).to_string(), c.args.clone()))
                    .collect();
                b.assistant(
                    "root",
                    thinking.as_ref(),
                    text.as_deref().unwrap_or(""),
                    &calls,
                );
            }
            Step::Results(results) => {
                for r in results {
                    b.tool("root", &r.call_id, &r.text, r.is_error);
                }
                seq += 1;
                if !sub_done && seq >= 2 {
                    sub_done = true;
                    sub_session(&mut b, &cwd, &topic);
                }
                after_user_or_tool = true;
            }
        }
    }
    let end = b.clock;
    let row = SessionRow {
        id,
        title,
        created_at: rfc3339(&created),
        working_dir: cwd,
        input_tokens: b.last_input,
        output_tokens: b.last_output,
        cost: (b.cost * 1e6).round() / 1e6,
        items: b.items,
    };
    (row, end)
}

/// A `transfer_task` to a sub-agent: the call, the sub-session (its own row and items), the
/// `subsession` item, then the result.
fn sub_session<R: Rng>(b: &mut Builder<'_, R>, cwd: &str, topic: &Topic) {
    let call_id = format!("toolu_01{}", words::alnum(b.rng, 22));
    let task = format!(
        "Investigate how {} handles {} and report the relevant code paths.",
        topic.module,
        words::pick(b.rng, words::NOUNS)
    );
    let mut args = String::new();
    {
        let mut o = Obj::start(&mut args);
        o.str("agent", "researcher")
            .str("task", &task)
            .str("expected_output", "A short report with file paths.");
        o.end();
    }
    b.assistant(
        "root",
        None,
        "",
        &[(call_id.clone(), "transfer_task".into(), args)],
    );
    let sub_id = uuid(b.rng);
    let created = b.clock;
    let parent_items = std::mem::take(&mut b.items);
    let parent_context = b.context;
    let (pi, po) = (b.last_input, b.last_output);
    b.context = b.rng.random_range(3_000..6_000);
    // The sub-agent's own history: the task as an implicit user message, a search, a report.
    let at = b.tick(1, 3);
    let mut j = String::new();
    {
        let mut o = Obj::start(&mut j);
        o.str("role", "user")
            .str("content", &task)
            .str("created_at", &at);
        o.end();
    }
    b.items.push(Item::Message {
        agent: String::new(),
        json: j,
        implicit: true,
    });
    let search = format!("toolu_01{}", words::alnum(b.rng, 22));
    let sargs = format!("{{\"path\": \".\", \"query\": \"{}\"}}", topic.module);
    b.assistant(
        "researcher",
        None,
        "Let me search the code.",
        &[(search.clone(), "search_files_content".into(), sargs)],
    );
    let hits = format!(
        "{cwd}/src/{m}.rs:12: fn {m}()\n{cwd}/src/lib.rs:40: mod {m};",
        m = topic.module
    );
    b.tool("researcher", &search, &hits, false);
    let report = format!(
        "{} is defined in src/{}.rs and wired up in src/lib.rs.",
        topic.module, topic.module
    );
    b.assistant("researcher", None, &report, &[]);
    let sub = SessionRow {
        id: sub_id,
        title: String::new(),
        created_at: rfc3339(&created),
        working_dir: cwd.to_string(),
        input_tokens: b.last_input,
        output_tokens: b.last_output,
        cost: 0.0,
        items: std::mem::replace(&mut b.items, parent_items),
    };
    b.context = parent_context;
    b.last_input = pi;
    b.last_output = po;
    b.items.push(Item::SubSession(Box::new(sub)));
    b.tool("root", &call_id, &report, false);
}

/// The legacy `[]Item` JSON docker-agent (up to migration 19) keeps in `sessions.messages`.
fn legacy_items(items: &[Item]) -> String {
    let mut out = String::new();
    let mut a = Arr::start(&mut out);
    for it in items {
        let o = a.item();
        match it {
            Item::Message {
                agent,
                json,
                implicit,
            } => {
                let mut m = Obj::start(o);
                {
                    let mut inner = Obj::start(m.field("message"));
                    inner.str("agentName", agent).raw("message", json);
                    if *implicit {
                        inner.bool("implicit", true);
                    }
                    inner.end();
                }
                m.end();
            }
            Item::Summary { text, .. } => {
                let mut m = Obj::start(o);
                m.str("summary", text);
                m.end();
            }
            Item::SubSession(s) => {
                let mut m = Obj::start(o);
                {
                    let mut j = Obj::start(m.field("sub_session"));
                    j.str("id", &s.id)
                        .str("title", &s.title)
                        .raw("messages", &legacy_items(&s.items))
                        .str("created_at", &s.created_at)
                        .bool("tools_approved", false)
                        .bool("thinking", false)
                        .bool("hide_tool_results", false)
                        .str("working_dir", &s.working_dir)
                        .bool("SendUserMessage", true)
                        .int("max_iterations", 0)
                        .bool("starred", false)
                        .int("input_tokens", s.input_tokens)
                        .int("output_tokens", s.output_tokens)
                        .float("cost", s.cost);
                    j.end();
                }
                m.end();
            }
        }
    }
    a.end();
    out
}

fn insert_session(
    tx: &Connection,
    path: &Path,
    generation: Generation,
    s: &SessionRow,
    parent: Option<&str>,
    stats: &mut SynthStats,
) -> Result<()> {
    let legacy =
        (generation == Generation::Legacy && !s.items.is_empty()).then(|| legacy_items(&s.items));
    tx.execute(
        "INSERT INTO sessions (id, created_at, tools_approved, input_tokens, output_tokens, title, cost, \
         send_user_message, max_iterations, working_dir, starred, permissions, agent_model_overrides, \
         custom_models_used, thinking, parent_id) VALUES (?1, ?2, 0, ?3, ?4, ?5, ?6, 1, 0, ?7, 0, '', '{}', '[]', 0, ?8)",
        params![s.id, s.created_at, s.input_tokens, s.output_tokens, s.title, s.cost, s.working_dir, parent],
    )
    .at(path)?;
    if let Some(m) = &legacy {
        tx.execute(
            "UPDATE sessions SET messages = ?1 WHERE id = ?2",
            params![m, s.id],
        )
        .at(path)?;
    }
    for (position, it) in s.items.iter().enumerate() {
        match it {
            Item::Message {
                agent,
                json,
                implicit,
            } => {
                tx.execute(
                    "INSERT INTO session_items (session_id, position, item_type, agent_name, message_json, implicit) \
                     VALUES (?1, ?2, 'message', ?3, ?4, ?5)",
                    params![s.id, position as i64, agent, json, implicit],
                )
                .at(path)?;
                stats.messages += 1;
                stats.bytes += json.len() as u64;
            }
            Item::Summary {
                text,
                first_kept_entry,
            } => {
                tx.execute(
                    "INSERT INTO session_items (session_id, position, item_type, summary_text) VALUES (?1, ?2, 'summary', ?3)",
                    params![s.id, position as i64, text],
                )
                .at(path)?;
                if generation == Generation::Modern {
                    let usage = format!(
                        "{{\"input_tokens\":{},\"output_tokens\":{},\"cached_input_tokens\":0,\"cached_write_tokens\":0}}",
                        40_000 + position * 97,
                        800 + position * 3
                    );
                    tx.execute(
                        "UPDATE session_items SET first_kept_entry = ?1, cost = ?2, model = ?3, usage_json = ?4 \
                         WHERE id = last_insert_rowid()",
                        params![first_kept_entry, 0.0421, "claude-haiku-4-5-20251001", usage],
                    )
                    .at(path)?;
                }
            }
            Item::SubSession(sub) => {
                insert_session(tx, path, generation, sub, Some(&s.id), stats)?;
                tx.execute(
                    "INSERT INTO session_items (session_id, position, item_type, subsession_id) VALUES (?1, ?2, 'subsession', ?3)",
                    params![s.id, position as i64, sub.id],
                )
                .at(path)?;
            }
        }
    }
    Ok(())
}

/// Create a docker-agent `session.db` at `path` (which must not exist or be empty) of the given
/// generation, with `opts.conversations` root sessions.
pub fn generate_docker_agent(
    path: &Path,
    opts: &SynthOptions,
    generation: Generation,
) -> Result<SynthStats> {
    if let Ok(md) = std::fs::metadata(path) {
        if md.len() > 0 || md.is_dir() {
            return Err(Error::Usage(format!(
                "{}: already exists; the generator only creates new stores",
                path.display()
            )));
        }
    }
    let mut conn = Connection::open(path).at(path)?;
    let _: String = conn
        .pragma_update_and_check(None, "journal_mode", "WAL", |r| r.get(0))
        .at(path)?;
    conn.pragma_update(None, "foreign_keys", "ON").at(path)?;
    conn.execute_batch(BOOTSTRAP).at(path)?;
    conn.execute_batch(MIGRATIONS_TABLE).at(path)?;
    let applied0 = opts.now - Duration::days(90);
    for (id, name, description, sql) in MIGRATIONS
        .iter()
        .filter(|m| m.0 <= generation.last_migration())
    {
        if !sql.trim().is_empty() {
            conn.execute_batch(sql).at(path)?;
        }
        let at = if *id <= 15 {
            applied0
        } else {
            applied0 + Duration::days(*id - 15)
        };
        conn.execute(
            "INSERT INTO migrations (id, name, description, applied_at) VALUES (?1, ?2, ?3, ?4)",
            params![id, name, description, rfc3339(&at)],
        )
        .at(path)?;
    }
    let mut stats = SynthStats::default();
    let tx = conn.transaction().at(path)?;
    for i in 0..opts.conversations {
        let seed = splitmix64(opts.seed ^ 0xD0C4_E7A6 ^ splitmix64(i as u64 + 1));
        let (mut row, end) = session_row(opts, i, generation, seed, None);
        if shape_of(i, opts.conversations).recent {
            // Replay it so its last item lands a few minutes before `now`.
            let created = gotime_parse(&row.created_at);
            let last = opts.now - Duration::seconds(90 + (seed % 120) as i64);
            row = session_row(opts, i, generation, seed, Some(last - (end - created))).0;
        }
        insert_session(&tx, path, generation, &row, None, &mut stats)?;
        stats.conversations += 1;
    }
    tx.commit().at(path)?;
    Ok(stats)
}

fn gotime_parse(s: &str) -> DateTime<FixedOffset> {
    crate::gotime::parse(s).expect("the generator writes valid RFC 3339")
}

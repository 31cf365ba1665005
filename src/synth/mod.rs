//! A deterministic generator of realistic kodelet stores, for demos, tests and benchmarks.
//!
//! [`generate`] creates a new store with [`crate::store::kodelet::init_store`] and fills
//! `conversations` and `conversation_summaries` in one transaction, one conversation at a time
//! (memory stays bounded by the largest conversation). The same [`SynthOptions`] always give
//! identical rows: each conversation draws from its own RNG seeded from `(seed, index)`, so the
//! first N conversations of a larger store equal those of a smaller one with the same options.
//!
//! What the rows look like (stores.md §1.4–1.7):
//! - three live formats in rotation: Anthropic (`provider="anthropic"`), OpenAI Chat Completions
//!   (`provider="openai"`, `api_mode:"chat_completions"` or no api_mode on older rows) and OpenAI
//!   Responses (`provider="openai"`, `api_mode:"responses"`, some Codex rows, a few legacy
//!   `provider="openai-responses"` rows);
//! - coding sessions: an instruction, assistant steps with `bash`, `file_read`, `file_edit`,
//!   `file_write`, `grep_tool`, `glob_tool` calls and their results (some failing), thinking,
//!   a few PNG screenshots, long logs and file contents, follow-up turns;
//! - sizes from empty `[]` and one-message rows to hundreds of messages (~100–400k tokens);
//! - `usage` with plausible cumulative tokens and costs, `currentContextWindow` ≈ bytes/4 and
//!   `maxContextWindow` 200000 / 1000000 / 1047576 (0 for ~5% of rows);
//! - Go `time.Time.String()` timestamps over the 60 days before `now` in several zones, some
//!   with the monotonic `m=` suffix, and three conversations updated in the last five minutes.

pub mod docker_agent;
pub mod gojson;
mod png;
mod render;
mod session;
mod words;

use std::collections::HashMap;
use std::path::Path;

use chrono::{DateTime, Duration, FixedOffset, TimeZone, Utc};
use rand::rngs::StdRng;
use rand::seq::IndexedRandom;
use rand::{Rng, SeedableRng};

use crate::error::{Result, SqlContext};
use crate::gotime;
use crate::store::kodelet_summaries::{as_text, display_key, first_message, message_count};

use gojson::Obj;
use session::{IdStyle, Plan, Session, Shape};
use words::Topic;

/// The `raw_messages` format of a generated conversation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SynthFormat {
    /// `provider="anthropic"`, `[]anthropic.MessageParam`.
    Anthropic,
    /// `provider="openai"`, Chat Completions messages.
    OpenAiChat,
    /// `provider="openai"` with `api_mode:"responses"` (and legacy `openai-responses`).
    OpenAiResponses,
}

impl SynthFormat {
    pub const ALL: [SynthFormat; 3] = [
        SynthFormat::Anthropic,
        SynthFormat::OpenAiChat,
        SynthFormat::OpenAiResponses,
    ];

    /// Parse `anthropic`, `openai` (or `chat`, `openai-chat`), `responses` (or
    /// `openai-responses`).
    pub fn parse(s: &str) -> Option<SynthFormat> {
        match s.trim().to_ascii_lowercase().as_str() {
            "anthropic" | "claude" => Some(SynthFormat::Anthropic),
            "openai" | "chat" | "openai-chat" | "chat_completions" => Some(SynthFormat::OpenAiChat),
            "responses" | "openai-responses" | "codex" => Some(SynthFormat::OpenAiResponses),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            SynthFormat::Anthropic => "anthropic",
            SynthFormat::OpenAiChat => "openai",
            SynthFormat::OpenAiResponses => "responses",
        }
    }
}

/// What to generate.
#[derive(Debug, Clone)]
pub struct SynthOptions {
    pub conversations: usize,
    pub seed: u64,
    /// The clock the timestamps are relative to.
    pub now: DateTime<FixedOffset>,
    /// Formats to rotate through (conversation `i` uses `formats[i % len]`); empty = all three.
    pub formats: Vec<SynthFormat>,
    /// Multiplies message counts and target sizes; 1.0 is the default mix.
    pub scale: f64,
}

impl Default for SynthOptions {
    fn default() -> Self {
        SynthOptions {
            conversations: 40,
            seed: 1,
            now: Utc
                .with_ymd_and_hms(2026, 11, 1, 12, 0, 0)
                .single()
                .expect("valid date")
                .fixed_offset(),
            formats: Vec::new(),
            scale: 1.0,
        }
    }
}

/// What [`generate`] wrote.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SynthStats {
    pub conversations: usize,
    /// Top-level messages (or Responses items) over all `raw_messages`.
    pub messages: usize,
    /// Total bytes of the `raw_messages` values written.
    pub bytes: u64,
}

/// One generated `conversations` row.
#[derive(Debug, Clone)]
struct Row {
    id: String,
    raw_messages: String,
    provider: &'static str,
    file_last_access: Option<String>,
    usage: String,
    summary: Option<String>,
    created_at: String,
    updated_at: String,
    metadata: Option<String>,
    tool_results: Option<String>,
    background_processes: Option<String>,
    cwd: Option<String>,
    messages: usize,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Special {
    Empty,
    OneUser,
    UserAssistant,
    Recent,
}

/// Create the store at `path` (which must not exist or be empty) and fill it.
pub fn generate(path: &Path, opts: &SynthOptions) -> Result<SynthStats> {
    let mut conn = crate::store::kodelet::init_store(path)?;
    // Bulk load: a larger page cache keeps the one big transaction from spilling early.
    conn.pragma_update(None, "cache_size", -65536i64).at(path)?;
    let formats = if opts.formats.is_empty() {
        SynthFormat::ALL.to_vec()
    } else {
        opts.formats.clone()
    };
    let specials = plan_specials(opts);
    let mut stats = SynthStats::default();
    let tx = conn.transaction().at(path)?;
    {
        let mut ins_conv = tx
            .prepare(
                "INSERT INTO conversations (id, raw_messages, provider, file_last_access, usage, summary, \
                 created_at, updated_at, metadata, tool_results, background_processes, cwd) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)",
            )
            .at(path)?;
        let mut ins_sum = tx
            .prepare(
                "INSERT INTO conversation_summaries (id, message_count, first_message, summary, usage, \
                 created_at, updated_at, provider, metadata, cwd) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
            )
            .at(path)?;
        for i in 0..opts.conversations {
            let format = formats[i % formats.len()];
            let row = conversation(opts, i, format, specials.get(&i).copied());
            ins_conv
                .execute(rusqlite::params![
                    row.id,
                    row.raw_messages,
                    row.provider,
                    row.file_last_access,
                    row.usage,
                    row.summary,
                    row.created_at,
                    row.updated_at,
                    row.metadata,
                    row.tool_results,
                    row.background_processes,
                    row.cwd,
                ])
                .at(path)?;
            // ConversationRecord.ToSummary(): derived fields plus copies of the record's.
            ins_sum
                .execute(rusqlite::params![
                    row.id,
                    message_count(&row.raw_messages),
                    as_text(&first_message(&row.raw_messages, row.metadata.as_deref())),
                    row.summary,
                    row.usage,
                    row.created_at,
                    row.updated_at,
                    row.provider,
                    row.metadata,
                    row.cwd,
                ])
                .at(path)?;
            stats.conversations += 1;
            stats.messages += row.messages;
            stats.bytes += row.raw_messages.len() as u64;
        }
    }
    tx.commit().at(path)?;
    Ok(stats)
}

fn splitmix64(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

/// Which conversations are deliberately tiny or recently updated.
fn plan_specials(opts: &SynthOptions) -> HashMap<usize, Special> {
    let n = opts.conversations;
    let mut rng = StdRng::seed_from_u64(splitmix64(opts.seed ^ 0x5EED_5EED));
    let mut map = HashMap::new();
    let tiny = |min: usize| if n >= 8 { (n / 100).max(min) } else { 0 };
    let wanted = [
        (Special::Recent, 3.min(n)),
        (Special::Empty, tiny(2)),
        (Special::OneUser, tiny(2)),
        (Special::UserAssistant, tiny(1)),
    ];
    for (kind, count) in wanted {
        let mut placed = 0;
        let mut tries = 0;
        while placed < count && tries < count * 50 + 100 {
            tries += 1;
            let i = rng.random_range(0..n);
            if let std::collections::hash_map::Entry::Vacant(e) = map.entry(i) {
                e.insert(kind);
                placed += 1;
            }
        }
    }
    map
}

struct Model {
    name: &'static str,
    window: i64,
    weight: u32,
    /// $ per million tokens: input, output, cache write, cache read.
    price: [f64; 4],
}

const ANTHROPIC_MODELS: &[Model] = &[
    Model {
        name: "claude-sonnet-4-6",
        window: 1_000_000,
        weight: 5,
        price: [3.0, 15.0, 3.75, 0.3],
    },
    Model {
        name: "claude-sonnet-4-5",
        window: 200_000,
        weight: 4,
        price: [3.0, 15.0, 3.75, 0.3],
    },
    Model {
        name: "claude-haiku-4-5",
        window: 200_000,
        weight: 2,
        price: [1.0, 5.0, 1.25, 0.1],
    },
];
const CHAT_MODELS: &[Model] = &[
    Model {
        name: "gpt-4.1",
        window: 1_047_576,
        weight: 4,
        price: [2.0, 8.0, 0.0, 0.5],
    },
    Model {
        name: "gpt-5",
        window: 200_000,
        weight: 4,
        price: [1.25, 10.0, 0.0, 0.125],
    },
    Model {
        name: "gpt-4.1-mini",
        window: 1_047_576,
        weight: 1,
        price: [0.4, 1.6, 0.0, 0.1],
    },
];
const RESPONSES_MODELS: &[Model] = &[
    Model {
        name: "gpt-5",
        window: 200_000,
        weight: 3,
        price: [1.25, 10.0, 0.0, 0.125],
    },
    Model {
        name: "gpt-4.1",
        window: 1_047_576,
        weight: 2,
        price: [2.0, 8.0, 0.0, 0.5],
    },
];
const CODEX_MODELS: &[Model] = &[
    Model {
        name: "gpt-5-codex",
        window: 200_000,
        weight: 3,
        price: [1.25, 10.0, 0.0, 0.125],
    },
    Model {
        name: "gpt-5.1-codex",
        window: 200_000,
        weight: 2,
        price: [1.25, 10.0, 0.0, 0.125],
    },
    Model {
        name: "gpt-4.1",
        window: 1_047_576,
        weight: 1,
        price: [2.0, 8.0, 0.0, 0.5],
    },
];

/// A model whose window holds `tokens` at <= 98% utilization when possible.
fn choose_model<'a, R: Rng>(rng: &mut R, models: &'a [Model], tokens: i64) -> &'a Model {
    let fits: Vec<&Model> = models
        .iter()
        .filter(|m| (m.window as f64) * 0.98 >= tokens as f64)
        .collect();
    let pool: Vec<&Model> = if fits.is_empty() {
        let max = models.iter().map(|m| m.window).max().unwrap_or(0);
        models.iter().filter(|m| m.window == max).collect()
    } else if tokens > 50_000 && rng.random_bool(0.6) {
        // Long sessions tend to run close to their window (kodelet compacts at 80%).
        let min = fits.iter().map(|m| m.window).min().unwrap_or(0);
        fits.into_iter().filter(|m| m.window == min).collect()
    } else {
        fits
    };
    let total: u32 = pool.iter().map(|m| m.weight).sum();
    let mut r = rng.random_range(0..total.max(1));
    for m in &pool {
        if r < m.weight {
            return m;
        }
        r -= m.weight;
    }
    pool[0]
}

fn uuid<R: Rng>(rng: &mut R) -> String {
    let a: u128 = rng.random();
    let mut b = a.to_be_bytes();
    b[6] = (b[6] & 0x0F) | 0x40;
    b[8] = (b[8] & 0x3F) | 0x80;
    let h = hex::encode(b);
    format!(
        "{}-{}-{}-{}-{}",
        &h[0..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..32]
    )
}

/// `EnsureConversationName`: whitespace collapsed, at most 100 runes (97 + `...`).
fn auto_name(text: &str) -> String {
    let collapsed = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if collapsed.chars().count() > 100 {
        let mut s: String = collapsed.chars().take(97).collect();
        s.push_str("...");
        s
    } else {
        collapsed
    }
}

/// A Go `time.Time.String()` value, sometimes with the monotonic clock reading.
fn go_time<R: Rng>(rng: &mut R, t: &DateTime<FixedOffset>, zone: Option<&str>) -> String {
    let mut s = gotime::format_go(t, zone);
    if rng.random_bool(0.35) {
        s.push_str(&format!(
            " m=+{}.{:09}",
            rng.random_range(0..250_000u64),
            rng.random_range(0..1_000_000_000u32)
        ));
    }
    s
}

fn conversation(
    opts: &SynthOptions,
    index: usize,
    format: SynthFormat,
    special: Option<Special>,
) -> Row {
    let seed = splitmix64(opts.seed ^ splitmix64(index as u64 + 1));
    let mut rng = StdRng::seed_from_u64(seed);
    let rng = &mut rng;
    let scale = if opts.scale.is_finite() && opts.scale > 0.0 {
        opts.scale
    } else {
        1.0
    };
    let scaled = |n: usize| ((n as f64 * scale).round() as usize).max(1);

    let id = uuid(rng);
    let (project, lang) = *words::PROJECTS.choose(rng).unwrap();
    let topic = Topic::new(rng, project, lang);
    let cwd_path = format!("/home/dev/projects/{project}");

    // --- shape of the session
    let plan = match special {
        Some(Special::Empty) => Plan {
            shape: Shape::Empty,
            ..small_plan()
        },
        Some(Special::OneUser) => Plan {
            shape: Shape::OneUser,
            ..small_plan()
        },
        Some(Special::UserAssistant) => Plan {
            shape: Shape::UserAssistant,
            ..small_plan()
        },
        _ => {
            let r: f64 = rng.random();
            let think = match format {
                SynthFormat::Anthropic => 0.5,
                SynthFormat::OpenAiChat => 0.25,
                SynthFormat::OpenAiResponses => 0.6,
            };
            let (turns, steps, target, long) = if r < 0.40 {
                (rng.random_range(1..=2), rng.random_range(1..8), None, 0.02)
            } else if r < 0.78 {
                (rng.random_range(1..=4), rng.random_range(8..25), None, 0.04)
            } else if r < 0.96 {
                let turns = if rng.random_bool(0.25) {
                    1
                } else {
                    rng.random_range(2..=8)
                };
                (turns, rng.random_range(25..70), None, 0.05)
            } else {
                // Huge: a long tool loop until ~100-400k tokens.
                let turns = if rng.random_bool(0.4) {
                    1
                } else {
                    rng.random_range(2..=6)
                };
                let tokens = rng.random_range(60_000..390_000usize);
                (
                    turns,
                    rng.random_range(30..60),
                    Some((tokens as f64 * 4.0 * scale) as usize),
                    0.10,
                )
            };
            Plan {
                shape: Shape::Normal,
                user_turns: turns,
                steps: scaled(steps),
                target_bytes: target,
                long_prob: long,
                think_prob: think,
                image_prob: 0.04,
                error_prob: 0.08,
            }
        }
    };

    // --- time zone and start
    let (zone_off, zone_name): (i32, Option<&str>) = *[
        (0, Some("UTC")),
        (0, Some("UTC")),
        (3600, Some("BST")),
        (-7 * 3600, Some("PDT")),
        (5 * 3600 + 1800, None),
    ]
    .choose(rng)
    .unwrap();
    let tz = FixedOffset::east_opt(zone_off).expect("valid offset");
    let back = Duration::seconds(rng.random_range(0..60 * 86_400));
    let nanos: i64 = match rng.random_range(0..10) {
        0 => 0,
        1 | 2 => rng.random_range(0..1_000_000i64) * 1000,
        _ => rng.random_range(0..1_000_000_000i64),
    };
    let created0 = (opts.now - back).with_timezone(&tz)
        - Duration::nanoseconds(opts.now.timestamp_subsec_nanos() as i64)
        + Duration::nanoseconds(nanos);

    let style = match format {
        SynthFormat::Anthropic => IdStyle::Anthropic,
        _ => IdStyle::OpenAi,
    };
    let session: Session = session::generate(rng, &topic, &cwd_path, style, created0, &plan);
    let updated0 =
        session.end + Duration::nanoseconds(rng.random_range(1_000_000..4_000_000_000i64));

    // Shift the whole session so it ends before `now` (recent ones: in the last five minutes).
    let shift = if special == Some(Special::Recent) {
        let target = opts.now - Duration::seconds(rng.random_range(10..290))
            + Duration::nanoseconds(rng.random_range(0..1_000_000_000));
        target.with_timezone(&tz) - updated0
    } else {
        let limit = opts.now - Duration::minutes(6);
        if updated0 > limit {
            let to = limit
                - Duration::seconds(rng.random_range(0..6 * 3600))
                - Duration::nanoseconds(rng.random_range(0..1_000_000_000));
            to.with_timezone(&tz) - updated0
        } else {
            Duration::zero()
        }
    };
    let created = created0 + shift;
    let updated = updated0 + shift;

    // --- provider flavour
    let codex = format == SynthFormat::OpenAiResponses && rng.random_bool(0.4);
    let legacy_responses =
        format == SynthFormat::OpenAiResponses && !codex && rng.random_bool(0.15);
    let chat_no_mode = format == SynthFormat::OpenAiChat && rng.random_bool(0.2);
    let generation = if codex && rng.random_bool(0.6) {
        rng.random_range(1..5)
    } else {
        0
    };
    let rstyle = render::ResponsesStyle {
        codex,
        compaction_item: generation > 0 && rng.random_bool(0.5),
    };
    let rendered = match format {
        SynthFormat::Anthropic => render::anthropic(rng, &session),
        SynthFormat::OpenAiChat => render::openai_chat(rng, &session),
        SynthFormat::OpenAiResponses => render::responses(rng, &session, rstyle),
    };
    let provider = match format {
        SynthFormat::Anthropic => "anthropic",
        SynthFormat::OpenAiResponses if legacy_responses => "openai-responses",
        _ => "openai",
    };

    // --- context window and model
    let empty = plan.shape == Shape::Empty;
    let text_bytes = rendered.raw_messages.len() - rendered.image_bytes;
    let images = session
        .steps
        .iter()
        .filter(|s| matches!(s, session::Step::User { image: Some(_), .. }))
        .count();
    let current: i64 = if empty || session.model_calls == 0 {
        0
    } else {
        let sys = rng.random_range(2500..9000) as f64;
        let est = text_bytes as f64 / 4.0 + images as f64 * 120.0 + sys;
        (est * rng.random_range(0.92..1.08)) as i64
    };
    let models = match format {
        SynthFormat::Anthropic => ANTHROPIC_MODELS,
        SynthFormat::OpenAiChat => CHAT_MODELS,
        SynthFormat::OpenAiResponses if codex => CODEX_MODELS,
        SynthFormat::OpenAiResponses => RESPONSES_MODELS,
    };
    let model = choose_model(rng, models, current);
    let max_window = if rng.random_bool(0.05) {
        0
    } else {
        model.window
    };
    let usage = usage_json(rng, &session, model, current, max_window, format, empty);

    // --- names
    let name_source = session
        .display
        .as_ref()
        .map(|(_, typed)| typed.clone())
        .or_else(|| session.first_text.clone());
    let r: f64 = rng.random();
    let (auto, explicit) = match &name_source {
        None => (None, None),
        Some(_) if r < 0.04 => (None, None),
        Some(t) if r < 0.09 => (
            Some(auto_name(t)),
            Some(format!(
                "{} {} {}",
                words::pascal(words::pick(rng, words::VERBS)),
                topic.module,
                words::pick(rng, words::NOUNS)
            )),
        ),
        Some(t) => (Some(auto_name(t)), None),
    };
    let summary = explicit
        .clone()
        .or_else(|| auto.clone())
        .filter(|s| !s.is_empty());

    // --- metadata (a Go map: keys sorted)
    let reasoning_effort = if model.name.starts_with("gpt-5") {
        *["low", "medium", "medium", "high"].choose(rng).unwrap()
    } else {
        ""
    };
    let (api_mode, platform) = match format {
        SynthFormat::Anthropic => (None, None),
        SynthFormat::OpenAiChat if chat_no_mode => (None, None),
        SynthFormat::OpenAiChat => (Some("chat_completions"), Some("openai")),
        SynthFormat::OpenAiResponses if legacy_responses => (None, None),
        SynthFormat::OpenAiResponses => (
            Some("responses"),
            Some(if codex { "codex" } else { "openai" }),
        ),
    };
    let mut meta: Vec<(&str, String)> = Vec::new();
    let jstr = |s: &str| {
        let mut o = String::new();
        gojson::string(&mut o, s);
        o
    };
    if let Some(m) = api_mode {
        meta.push(("api_mode", jstr(m)));
    }
    if generation > 0 {
        meta.push(("codex_responses_window_generation", generation.to_string()));
    }
    {
        let mut cs = String::new();
        let mut o = Obj::start(&mut cs);
        o.str("model", model.name);
        if let (Some(m), Some(p)) = (api_mode, platform) {
            let mut oa = Obj::start(o.field("openai"));
            oa.str("api_mode", m).str("platform", p);
            oa.end();
        }
        let snap_provider = if format == SynthFormat::Anthropic {
            "anthropic"
        } else {
            "openai"
        };
        o.str("provider", snap_provider)
            .str("reasoning_effort", reasoning_effort)
            .int("version", 1);
        o.end();
        meta.push(("config_snapshot", cs));
    }
    if let Some(a) = &auto {
        meta.push(("conversation_auto_name", jstr(a)));
    }
    if let Some(e) = &explicit {
        meta.push(("conversation_name", jstr(e)));
    }
    if let Some((expanded, typed)) = &session.display {
        let cmd = typed
            .trim_start_matches('/')
            .split_whitespace()
            .next()
            .unwrap_or("")
            .to_string();
        let legacy = rng.random_bool(0.2);
        let mut d = String::new();
        let mut o = Obj::start(&mut d);
        {
            let mut v = Obj::start(o.field("v1"));
            let mut e = Obj::start(v.field(&display_key(expanded)));
            if legacy {
                e.str("command", &cmd)
                    .str("display", typed)
                    .str("kind", "slash-command");
            } else {
                e.str("command", &cmd)
                    .str("kind", "slash-command")
                    .str("text", typed);
            }
            e.end();
            v.end();
        }
        o.end();
        meta.push((
            if legacy {
                "message_display_overrides"
            } else {
                "message_display"
            },
            d,
        ));
    }
    meta.push(("model", jstr(model.name)));
    if let Some(p) = platform {
        meta.push(("platform", jstr(p)));
    }
    if rng.random_bool(0.15) {
        meta.push((
            "profile",
            jstr(words::pick(rng, &["default", "work", "cheap", "review"])),
        ));
    }
    meta.sort_by(|a, b| a.0.cmp(b.0));
    let mut metadata = String::new();
    {
        let mut o = Obj::start(&mut metadata);
        for (k, v) in &meta {
            o.raw(k, v);
        }
        o.end();
    }

    // --- legacy columns
    let file_last_access = if !session.reads.is_empty() && rng.random_bool(0.08) {
        let mut reads: Vec<(String, DateTime<FixedOffset>)> = Vec::new();
        for (p, t) in &session.reads {
            match reads.iter_mut().find(|(q, _)| q == p) {
                Some(e) => e.1 = *t,
                None => reads.push((p.clone(), *t)),
            }
        }
        reads.sort_by(|a, b| a.0.cmp(&b.0));
        let mut s = String::new();
        let mut o = Obj::start(&mut s);
        for (p, t) in &reads {
            o.str(p, &session::rfc3339_nano(&(*t + shift)));
        }
        o.end();
        Some(s)
    } else if rng.random_bool(0.02) {
        Some("{}".to_string())
    } else {
        None
    };
    let background_processes = if rng.random_bool(0.03) {
        if rng.random_bool(0.5) {
            Some("[]".to_string())
        } else {
            let pid = rng.random_range(1000..99_999);
            let mut s = String::new();
            let mut a = gojson::Arr::start(&mut s);
            let mut o = Obj::start(a.item());
            o.int("pid", pid)
                .str(
                    "command",
                    words::pick(
                        rng,
                        &[
                            "npm run dev",
                            "cargo watch -x test",
                            "go run ./cmd/server",
                            "python -m http.server 8000",
                        ],
                    ),
                )
                .str("log_path", &format!("/tmp/kodelet-bg-{pid}.log"))
                .str("start_time", &session::rfc3339_nano(&created));
            o.end();
            a.end();
            Some(s)
        }
    } else {
        None
    };
    let cwd = if rng.random_bool(0.04) {
        None
    } else {
        Some(cwd_path)
    };

    Row {
        id,
        tool_results: Some(render::tool_results(&session, shift)),
        raw_messages: rendered.raw_messages,
        provider,
        file_last_access,
        usage,
        summary,
        created_at: go_time(rng, &created, zone_name),
        updated_at: go_time(rng, &updated, zone_name),
        metadata: Some(metadata),
        background_processes,
        cwd,
        messages: rendered.messages,
    }
}

fn small_plan() -> Plan {
    Plan {
        shape: Shape::Normal,
        user_turns: 1,
        steps: 0,
        target_bytes: None,
        long_prob: 0.0,
        think_prob: 0.3,
        image_prob: 0.05,
        error_prob: 0.0,
    }
}

/// `llmtypes.Usage` JSON, fields in struct order.
fn usage_json<R: Rng>(
    rng: &mut R,
    s: &Session,
    model: &Model,
    current: i64,
    max_window: i64,
    format: SynthFormat,
    empty: bool,
) -> String {
    let calls = s.model_calls as i64;
    let (mut input, mut output, mut cache_w, mut cache_r) = (0i64, 0i64, 0i64, 0i64);
    if !empty && calls > 0 {
        output = (s.output_chars / 4) as i64 + calls * rng.random_range(10..60);
        // The context grows roughly linearly, so all calls together read ~calls * current / 2.
        let prompt_total = (current as f64 * (calls as f64 + 1.0) / 2.0) as i64;
        match format {
            SynthFormat::Anthropic => {
                cache_r = (prompt_total as f64 * rng.random_range(0.75..0.92)) as i64;
                cache_w = ((current as f64) * rng.random_range(0.9..1.3)) as i64;
                input = (prompt_total - cache_r - cache_w).max(calls * rng.random_range(3..40));
            }
            _ => {
                cache_r = (prompt_total as f64 * rng.random_range(0.4..0.8)) as i64;
                input = (prompt_total - cache_r).max(calls * 50);
            }
        }
        // Subagents add their own usage to the totals.
        if rng.random_bool(0.1) {
            let f = rng.random_range(1.05..1.4);
            input = (input as f64 * f) as i64;
            output = (output as f64 * f) as i64;
            cache_r = (cache_r as f64 * f) as i64;
        }
    }
    let per = |tokens: i64, price: f64| tokens as f64 * price / 1_000_000.0;
    let mut out = String::with_capacity(320);
    let mut o = Obj::start(&mut out);
    o.int("inputTokens", input)
        .int("outputTokens", output)
        .int("cacheCreationInputTokens", cache_w)
        .int("cacheReadInputTokens", cache_r)
        .float("inputCost", per(input, model.price[0]))
        .float("outputCost", per(output, model.price[1]))
        .float("cacheCreationCost", per(cache_w, model.price[2]))
        .float("cacheReadCost", per(cache_r, model.price[3]))
        .int("currentContextWindow", current)
        .int("maxContextWindow", max_window);
    o.end();
    out
}

#[cfg(test)]
mod tests;

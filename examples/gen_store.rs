//! Generate a realistic synthetic conversation store: kodelet's (default), docker-agent's or
//! goose's.
//!
//! ```text
//! cargo run --release --example gen_store -- --conversations 10000 --seed 1 --out /tmp/kodelet.db \
//!     [--now 2026-11-01T12:00:00Z] [--formats anthropic,openai,responses] [--scale 1.0] [--force]
//! cargo run --release --example gen_store -- --store docker-agent-modern --out /tmp/session.db
//! cargo run --release --example gen_store -- --store goose-v16 --out /tmp/sessions.db
//! ```
//!
//! Refuses to overwrite an existing file unless `--force` (which first deletes the file and its
//! `-wal`/`-shm` companions). Prints one summary line to stderr.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

use agent_db_synth::docker_agent::{generate_docker_agent, Generation};
use agent_db_synth::goose::{generate_goose, GooseSchema};
use agent_db_synth::opencode::{generate_opencode, OpencodeEra};
use agent_db_synth::{generate_selected, SynthFormat, SynthOptions};
use clap::Parser;

#[derive(Parser, Debug)]
#[command(about = "Generate a deterministic, realistic kodelet conversation store")]
struct Args {
    /// Number of conversations.
    #[arg(long, default_value_t = 40)]
    conversations: usize,
    /// RNG seed: the same seed and options give identical rows.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Output SQLite file (must not exist unless --force).
    #[arg(long)]
    out: PathBuf,
    /// The clock timestamps are relative to (RFC 3339); default 2026-11-01T12:00:00Z.
    #[arg(long)]
    now: Option<String>,
    /// Comma-separated formats to rotate through: anthropic, openai, responses (default: all).
    #[arg(long, value_delimiter = ',')]
    formats: Vec<String>,
    /// Size multiplier for message counts (1.0 = default mix).
    #[arg(long, default_value_t = 1.0)]
    scale: f64,
    /// Replace an existing file (and its -wal/-shm files).
    #[arg(long)]
    force: bool,
    /// kodelet only: the share (0–1) of rated conversations at or over 0.7 of their window
    /// (the `--all-over 0.7` selected fraction); default: as the messages' sizes give it.
    #[arg(long)]
    over_share: Option<f64>,
    /// Which store: kodelet, docker-agent-modern (migrations up to 29, first_kept_entry),
    /// docker-agent-current (the current line, migrations up to 38: pending input) or
    /// docker-agent-legacy (migrations up to 19, the sessions.messages column), goose (a fresh
    /// v16 sessions.db), goose-v3, goose-v7, goose-v12 (migrated from v5, leftover thread
    /// tables), goose-v16, goose-v17, goose-v16-migrated (created at v3), opencode (=
    /// opencode-1.18, a fresh 1.18.34 opencode.db), opencode-1.14 (drizzle era),
    /// opencode-upgraded (1.14.48 upgraded by 1.18.34).
    #[arg(long, default_value = "kodelet")]
    store: String,
}

fn sidecar(path: &Path, suffix: &str) -> PathBuf {
    let mut s = path.as_os_str().to_owned();
    s.push(suffix);
    PathBuf::from(s)
}

fn run(args: Args) -> Result<(), String> {
    let mut opts = SynthOptions {
        conversations: args.conversations,
        seed: args.seed,
        scale: args.scale,
        ..SynthOptions::default()
    };
    if let Some(now) = &args.now {
        opts.now = chrono::DateTime::parse_from_rfc3339(now)
            .map_err(|e| format!("--now {now:?}: not an RFC 3339 time ({e})"))?;
    }
    for f in args.formats.iter().filter(|f| !f.trim().is_empty()) {
        let parsed = SynthFormat::parse(f).ok_or_else(|| {
            format!("--formats: unknown format {f:?} (use anthropic, openai, responses)")
        })?;
        if !opts.formats.contains(&parsed) {
            opts.formats.push(parsed);
        }
    }
    if !(args.scale.is_finite() && args.scale > 0.0) {
        return Err(format!("--scale {}: must be a positive number", args.scale));
    }
    let out = &args.out;
    let companions = [
        sidecar(out, "-wal"),
        sidecar(out, "-shm"),
        sidecar(out, "-journal"),
    ];
    let existing = std::iter::once(out)
        .chain(companions.iter())
        .find(|p| p.exists());
    if let Some(found) = existing {
        if !args.force {
            return Err(format!(
                "{}: already exists; refusing to overwrite (use --force to replace it)",
                found.display()
            ));
        }
        if out.is_dir() {
            return Err(format!("{}: is a directory", out.display()));
        }
        for p in std::iter::once(out).chain(companions.iter()) {
            match std::fs::remove_file(p) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(format!("{}: cannot remove: {e}", p.display())),
            }
        }
    }
    let started = Instant::now();
    let stats = match args.store.as_str() {
        "kodelet" => generate_selected(out, &opts, args.over_share),
        "docker-agent-modern" => generate_docker_agent(out, &opts, Generation::Modern),
        "docker-agent-legacy" => generate_docker_agent(out, &opts, Generation::Legacy),
        "docker-agent-current" => generate_docker_agent(
            out,
            &opts,
            Generation::Current(agent_db_synth::docker_agent::CURRENT_NEWEST),
        ),
        other => match (GooseSchema::preset(other), OpencodeEra::preset(other)) {
            (Some(schema), _) => generate_goose(out, &opts, &schema),
            (None, Some(era)) => generate_opencode(out, &opts, era),
            (None, None) => {
                return Err(format!(
                    "--store {other:?}: use kodelet, docker-agent-modern, docker-agent-legacy, docker-agent-current, goose, {}, opencode or {}",
                    GooseSchema::PRESETS.join(", "),
                    OpencodeEra::PRESETS.join(", ")
                ))
            }
        },
    }
    .map_err(|e| e.to_string())?;
    let secs = started.elapsed().as_secs_f64();
    let size: u64 = std::iter::once(out.clone())
        .chain(companions)
        .filter_map(|p| std::fs::metadata(p).ok())
        .map(|m| m.len())
        .sum();
    eprintln!(
        "gen_store: {} conversations, {} messages, {:.1} MB on disk ({:.1} MB raw_messages) in {:.2}s -> {}",
        stats.conversations,
        stats.messages,
        size as f64 / 1e6,
        stats.bytes as f64 / 1e6,
        secs,
        out.display()
    );
    Ok(())
}

fn main() -> ExitCode {
    let args = Args::parse();
    match run(args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("gen_store: error: {e}");
            ExitCode::from(1)
        }
    }
}

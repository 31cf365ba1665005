//! `agent-db stats`: the store file and its free pages, the archive, conversations and stored
//! context by provider and model, a utilization histogram, and what `prune-archive` would free.

use std::collections::BTreeMap;

use agent_db::archive::stats;
use agent_db::store::{space, Store};
use agent_db::util::human_bytes;
use serde::Serialize;

use super::CmdResult;
use crate::cli::StatsArgs;
use crate::output::table::{self, Kind};
use crate::output::{self, json, Ui};

/// How many of the largest conversations `stats` lists.
const TOP: usize = 10;

#[derive(Debug, Default, Serialize)]
struct ModelRow {
    provider: String,
    model: Option<String>,
    conversations: u64,
    /// Sum of the stored context (what the agent last sent) of these conversations.
    stored_context_tokens: i64,
}

#[derive(Debug, Serialize)]
struct Bucket {
    /// `0-10%`, … `90-100%`, `over 100%`, `unknown`.
    bucket: String,
    conversations: u64,
}

/// Histogram bucket of a utilization: 0..=9 for tenths, 10 over 100%, 11 unknown.
fn bucket_of(u: Option<f64>) -> usize {
    match u {
        None => 11,
        Some(u) if u > 1.0 => 10,
        Some(u) => ((u * 10.0).floor() as usize).min(9),
    }
}

fn bucket_name(i: usize) -> String {
    match i {
        10 => "over 100%".into(),
        11 => "unknown".into(),
        i => format!("{}-{}%", i * 10, i * 10 + 10),
    }
}

struct Scan {
    total: u64,
    models: Vec<ModelRow>,
    histogram: Vec<Bucket>,
}

fn scan(store: &Store, limit: Option<i64>) -> Result<Scan, agent_db::Error> {
    let mut by: BTreeMap<(String, Option<String>), ModelRow> = BTreeMap::new();
    let mut hist = [0u64; 12];
    let mut total = 0;
    store.scan(|m| {
        total += 1;
        hist[bucket_of(m.utilization(limit))] += 1;
        let e = by
            .entry((m.provider.clone(), m.model.clone()))
            .or_insert_with(|| ModelRow {
                provider: m.provider.clone(),
                model: m.model.clone(),
                ..Default::default()
            });
        e.conversations += 1;
        e.stored_context_tokens += m.current_context.unwrap_or(0).max(0);
        true
    })?;
    let mut models: Vec<ModelRow> = by.into_values().collect();
    models.sort_by_key(|m| std::cmp::Reverse(m.conversations));
    Ok(Scan {
        total,
        models,
        histogram: hist
            .iter()
            .enumerate()
            .map(|(i, n)| Bucket {
                bucket: bucket_name(i),
                conversations: *n,
            })
            .collect(),
    })
}

pub fn run(ui: &Ui, store: &Store, args: &StatsArgs) -> CmdResult {
    let file = stats::file_stats(store)?;
    let archive = stats::archive_stats(store)?;
    let s = scan(store, args.context_limit)?;
    let space = space::space(store, TOP)?;
    let cold = agent_db::store::retirement::cold_bytes(store)?;
    if args.json {
        let doc = serde_json::json!({
            "store": {"path": store.path.display().to_string(), "kind": store.kind.name()},
            "file": file,
            "archive": archive,
            "prune_archive_frees_bytes": archive.archive_bytes,
            "cold_bytes": cold,
            "conversations": s.total,
            "by_model": s.models,
            "utilization": s.histogram,
            "space": space,
        });
        json::print("stats", doc)?;
        return Ok(agent_db::error::exit::OK);
    }
    let mut t = text(ui, store, &file, (&archive, cold), &s);
    t.push('\n');
    t.push_str(&space_text(ui, &space));
    output::out(&t)?;
    Ok(agent_db::error::exit::OK)
}

/// The figures as text: key/value lines, the per-model table and the histogram.
fn text(
    ui: &Ui,
    store: &Store,
    file: &stats::FileStats,
    (archive, cold): (&stats::ArchiveStats, u64),
    s: &Scan,
) -> String {
    let mut o = String::new();
    let mut line = |k: &str, v: String| o.push_str(&format!("{k:<14}{v}\n"));
    line(
        "store",
        format!("{} ({})", store.path.display(), store.kind.name()),
    );
    line(
        "file",
        format!(
            "{} (+ {} WAL), journal_mode {}",
            human_bytes(file.file_bytes),
            human_bytes(file.wal_bytes),
            file.journal_mode
        ),
    );
    // The hints only when there is something to get back.
    line(
        "free pages",
        format!(
            "{} ({}){}",
            file.free_pages,
            human_bytes(file.free_bytes.max(0) as u64),
            if file.free_pages > 0 {
                ": `agent-db vacuum` gives them back"
            } else {
                ""
            }
        ),
    );
    line(
        "archive",
        format!(
            "{} in {} values{}",
            human_bytes(archive.archive_bytes.max(0) as u64),
            archive.archived_values,
            if archive.archive_bytes > 0 {
                ": `prune-archive` frees it"
            } else {
                ""
            }
        ),
    );
    if cold > 0 {
        // Beside the store: what `retire` moved out of it.
        line("cold files", human_bytes(cold));
    }
    line(
        "compactions",
        format!(
            "{}: {} restorable, {} restored, {} archive pruned",
            archive.compactions, archive.restorable, archive.restored, archive.archive_pruned
        ),
    );
    line("conversations", format!("{}\n", s.total));
    o.push_str(&models_table(ui, s));
    o.push('\n');
    o.push_str(&histogram(ui, s));
    o
}

/// Conversations and stored context by provider and model.
fn models_table(ui: &Ui, s: &Scan) -> String {
    let mut t = table::Grid::new(&[
        table::col("PROVIDER", Kind::Fixed, 0),
        table::col("MODEL", Kind::Cut, 0),
        table::col("CONVERSATIONS", Kind::Num, 0),
        table::col("STORED CTX", Kind::Num, 0),
    ]);
    for m in &s.models {
        t.row(vec![
            table::c(m.provider.clone()),
            table::c(m.model.clone().unwrap_or_else(|| "-".into())),
            table::c(table::thousands(m.conversations as usize)),
            table::c(table::thousands(m.stored_context_tokens as usize)),
        ]);
    }
    t.render(ui.style())
}

/// Conversations by stored utilization, with bars.
fn histogram(ui: &Ui, s: &Scan) -> String {
    let mut h = table::Grid::new(&[
        table::col("UTILIZATION", Kind::Fixed, 0),
        table::col("CONVERSATIONS", Kind::Num, 0),
        table::col("", Kind::Fixed, 1),
    ]);
    let max = s
        .histogram
        .iter()
        .map(|b| b.conversations)
        .max()
        .unwrap_or(0)
        .max(1);
    for b in &s.histogram {
        let bar = bar(b.conversations, max);
        h.row(vec![
            table::c(b.bucket.clone()),
            table::c(b.conversations.to_string()),
            table::c(bar),
        ]);
    }
    h.render(ui.style())
}

/// A bar of up to 30 blocks for `part` of `whole` (rounded up, so any part shows).
fn bar(part: u64, whole: u64) -> String {
    "█".repeat((part.saturating_mul(30)).div_ceil(whole.max(1)) as usize)
}

/// Bytes by category, each with a bar (its share of the file), the categories' notes, and the
/// largest conversations.
fn space_text(ui: &Ui, sp: &space::Space) -> String {
    let mut h = table::Grid::new(&[
        table::col("SPACE", Kind::Cut, 0),
        table::col("BYTES", Kind::Num, 0),
        table::col("SHARE", Kind::Num, 0),
        table::col("", Kind::Fixed, 1),
    ]);
    let total = sp.pages_bytes.max(1);
    let mut notes = String::new();
    for c in &sp.categories {
        let share = c.bytes as f64 / total as f64;
        let bar = bar(c.bytes, total);
        h.row(vec![
            table::c(c.name.to_string()),
            table::c(human_bytes(c.bytes)),
            table::c(format!("{:.1}%", share * 100.0)),
            table::c(bar),
        ]);
        if let Some(why) = c.note {
            notes.push_str(&format!("  {}: {why}\n", c.name));
        }
    }
    let mut o = h.render(ui.style());
    o.push_str(&notes);
    if !sp.top.is_empty() {
        o.push('\n');
        let mut t = table::Grid::new(&[
            table::col("LARGEST CONVERSATIONS", Kind::Fixed, 0),
            table::col("BYTES", Kind::Num, 0),
        ]);
        for c in &sp.top {
            t.row(vec![table::c(c.id.clone()), table::c(human_bytes(c.bytes))]);
        }
        o.push_str(&t.render(ui.style()));
    }
    o
}

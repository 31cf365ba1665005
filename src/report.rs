//! Per-conversation and total figures of a compaction run (or a dry run), serializable as the
//! documented JSON contract (docs/json-output.md). The CLI renders them; nothing here prints.

use serde::Serialize;

/// What happened to one conversation.
#[derive(Debug, Clone, PartialEq)]
pub enum Status {
    /// Dry run: this is what would happen.
    Planned,
    Compacted,
    Skipped(String),
    /// Planned but never started: the run stopped starting conversations. Reported (and
    /// serialized) as skipped.
    NotStarted(NotStarted),
    Failed(String),
}

/// Why a planned conversation was not started.
#[derive(Debug, Clone, PartialEq)]
pub enum NotStarted {
    /// `--max-cost` was reached: the limit, and what had been spent.
    MaxCost { max: f64, spent: f64 },
    /// The store refused a write for a reason no conversation escapes (disk full, read-only).
    StoreUnwritable(String),
    /// The run was interrupted (Ctrl-C) before this conversation started.
    Interrupted,
    /// Another process kept the store's write lock longer than agent-db waits.
    Busy,
}

impl std::fmt::Display for NotStarted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            NotStarted::MaxCost { max, spent } => {
                write!(
                    f,
                    "not started: --max-cost ${max:.2} reached (${spent:.4} spent)"
                )
            }
            NotStarted::StoreUnwritable(why) => {
                write!(f, "not started: the store cannot be written ({why})")
            }
            NotStarted::Interrupted => write!(f, "not started: interrupted (Ctrl-C)"),
            NotStarted::Busy => write!(
                f,
                "not compacted: another process kept the store's write lock (busy); nothing written"
            ),
        }
    }
}

impl Status {
    pub fn label(&self) -> String {
        match self {
            Status::Planned => "planned".into(),
            Status::Compacted => "compacted".into(),
            Status::Skipped(r) => format!("skipped: {r}"),
            Status::NotStarted(n) => format!("skipped: {n}"),
            Status::Failed(r) => format!("failed: {r}"),
        }
    }

    /// Whether the conversation counts as skipped (a [`Status::NotStarted`] one does).
    pub fn is_skipped(&self) -> bool {
        matches!(self, Status::Skipped(_) | Status::NotStarted(_))
    }
}

/// The JSON shape of a status: `{"status": "skipped", "detail": "..."}`.
#[derive(Serialize)]
#[serde(tag = "status", content = "detail", rename_all = "snake_case")]
enum WireStatus<'a> {
    Planned,
    Compacted,
    Skipped(std::borrow::Cow<'a, str>),
    Failed(&'a str),
}

impl Serialize for Status {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let wire = match self {
            Status::Planned => WireStatus::Planned,
            Status::Compacted => WireStatus::Compacted,
            Status::Skipped(r) => WireStatus::Skipped(r.as_str().into()),
            Status::NotStarted(n) => WireStatus::Skipped(n.to_string().into()),
            Status::Failed(r) => WireStatus::Failed(r),
        };
        wire.serialize(s)
    }
}

/// A utilization as JSON gives it everywhere: 4 decimals (as `list --json`).
pub fn round4(x: f64) -> f64 {
    (x * 10000.0).round() / 10000.0
}

fn ratio4<S: serde::Serializer>(v: &Option<f64>, s: S) -> Result<S::Ok, S::Error> {
    v.map(round4).serialize(s)
}

/// A strategy `--fallback` left: its name and why (`retention 62% < 80%`).
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Fallback {
    pub from: String,
    pub reason: String,
}

/// One conversation's line in the report.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    pub id: String,
    pub provider: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub format: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// Why it was selected: manual, threshold, recency.
    pub reason: &'static str,
    #[serde(flatten)]
    pub status: Status,
    pub strategy: Option<String>,
    pub messages_before: Option<usize>,
    pub messages_after: Option<usize>,
    /// Messages summarized (the head) and kept verbatim (the tail).
    pub messages_summarized: Option<usize>,
    pub messages_kept: Option<usize>,
    pub tokens_before: Option<usize>,
    pub tokens_after: Option<usize>,
    /// `false` when token figures are estimates (Anthropic).
    pub tokens_exact: bool,
    /// Summarizer spend in USD (LLM strategy; estimated in a dry run), when a price is known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cost_usd: Option<f64>,
    /// Summarizer tokens (prompt, completion) as the provider reported them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub llm_tokens: Option<(u64, u64)>,
    /// With `--mask-observations`: what masking saved on this conversation.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub masking: Option<crate::compact::Masking>,
    /// What each hook decided (before_compaction) or how it ran (after_compaction).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub hooks: Vec<crate::hooks::Record>,
    /// The audit-log id of a committed compaction.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub compaction_id: Option<i64>,
    /// The stored utilization before (stored context / window): the figure `list` gives.
    #[serde(skip_serializing_if = "Option::is_none", serialize_with = "ratio4")]
    pub utilization_before: Option<f64>,
    /// Estimated utilization after, in the same units ([`crate::plan::Landing`]): what the
    /// store records as the context afterwards, over the window.
    #[serde(skip_serializing_if = "Option::is_none", serialize_with = "ratio4")]
    pub utilization_after: Option<f64>,
    /// What the result keeps of the summarized span's artifacts ([`crate::retention`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retention: Option<crate::retention::Retention>,
    /// With `--fallback`: the strategy that fell under the retention floor, and why; `strategy`
    /// is then the one that landed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fallback: Option<Fallback>,
    /// Why `--target` could not be reached, when it could not.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    pub duration_ms: u64,
    /// Skipped by the selection itself, before planning: the reason in a few words
    /// ([`crate::select::Outcome::Skipped`]'s summary). Reports count these apart from the
    /// conversations the run works on.
    #[serde(skip)]
    pub skipped_at_selection: Option<&'static str>,
}

impl Row {
    /// A row for a conversation that was skipped or failed before planning.
    pub fn bare(id: &str, provider: &str, reason: &'static str, status: Status) -> Row {
        Row {
            id: id.to_string(),
            provider: provider.to_string(),
            format: None,
            model: None,
            reason,
            status,
            strategy: None,
            messages_before: None,
            messages_after: None,
            messages_summarized: None,
            messages_kept: None,
            tokens_before: None,
            tokens_after: None,
            tokens_exact: true,
            cost_usd: None,
            llm_tokens: None,
            masking: None,
            hooks: Vec::new(),
            compaction_id: None,
            utilization_before: None,
            utilization_after: None,
            retention: None,
            fallback: None,
            note: None,
            duration_ms: 0,
            skipped_at_selection: None,
        }
    }

    /// Tokens saved, as a percentage of before.
    pub fn saved_pct(&self) -> Option<f64> {
        match (self.tokens_before, self.tokens_after) {
            (Some(b), Some(a)) if b > 0 => Some(100.0 * (b as f64 - a as f64) / b as f64),
            _ => None,
        }
    }
}

/// Totals over a run; adds up with `+=`.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct Totals {
    pub conversations: usize,
    pub planned: usize,
    pub compacted: usize,
    pub skipped: usize,
    pub failed: usize,
    pub messages_before: usize,
    pub messages_after: usize,
    pub tokens_before: usize,
    pub tokens_after: usize,
    /// The rows' costs added up in whole nano-dollars ([`usd`]): the same total in whatever
    /// order the conversations finished.
    pub cost_usd: f64,
    pub duration_ms: u64,
    /// `--max-cost` was reached and the remaining conversations were not started.
    pub stopped_by_max_cost: bool,
    /// With `--mask-observations`: the rows' masking figures added up.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub masking: Option<crate::compact::Masking>,
    /// The run was interrupted (Ctrl-C) before the selection reached these conversations:
    /// they are not rows. Omitted when 0.
    #[serde(skip_serializing_if = "is_zero")]
    pub not_visited: usize,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

/// `x` dollars rounded to a whole nano-dollar. Costs are token counts times prices of a few
/// decimals per million tokens, so whole nano-dollars in practice: adding them rounded gives the
/// same total in any order, where adding the floats gives a last digit that depends on it.
pub fn usd(x: f64) -> f64 {
    (x * 1e9).round() / 1e9
}

impl Totals {
    pub fn saved_pct(&self) -> Option<f64> {
        (self.tokens_before > 0).then(|| {
            100.0 * (self.tokens_before as f64 - self.tokens_after as f64)
                / self.tokens_before as f64
        })
    }
}

impl std::ops::AddAssign<&Row> for Totals {
    fn add_assign(&mut self, r: &Row) {
        self.conversations += 1;
        match r.status {
            Status::Planned => self.planned += 1,
            Status::Compacted => self.compacted += 1,
            Status::Skipped(_) | Status::NotStarted(_) => self.skipped += 1,
            Status::Failed(_) => self.failed += 1,
        }
        // Only conversations that change contribute to before/after figures, so the saving is
        // the saving of the work done.
        if matches!(r.status, Status::Planned | Status::Compacted) {
            self.messages_before += r.messages_before.unwrap_or(0);
            self.messages_after += r.messages_after.unwrap_or(0);
            self.tokens_before += r.tokens_before.unwrap_or(0);
            self.tokens_after += r.tokens_after.unwrap_or(0);
        }
        self.cost_usd = usd(self.cost_usd + usd(r.cost_usd.unwrap_or(0.0)));
        self.duration_ms += r.duration_ms;
        if let Some(m) = &r.masking {
            let t = self.masking.get_or_insert_with(Default::default);
            t.elided += m.elided;
            t.requests += m.requests;
            t.requests_unmasked += m.requests_unmasked;
            t.prompt_tokens += m.prompt_tokens;
            t.prompt_tokens_unmasked += m.prompt_tokens_unmasked;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn totals_add_up() {
        let mut a = Row::bare("a", "openai", "manual", Status::Compacted);
        a.tokens_before = Some(1000);
        a.tokens_after = Some(250);
        let b = Row::bare(
            "b",
            "openai",
            "manual",
            Status::Skipped("nothing to compact".into()),
        );
        let mut t = Totals::default();
        t += &a;
        t += &b;
        assert_eq!(
            (t.compacted, t.skipped, t.tokens_before, t.tokens_after),
            (1, 1, 1000, 250)
        );
        assert_eq!(t.saved_pct(), Some(75.0));
    }

    proptest::proptest! {
        /// The total cost is the same whatever order the rows finished in (float additions in
        /// another order gave 3.0339712 in one run and 3.0339712000000003 in the next).
        #[test]
        fn total_cost_does_not_depend_on_the_order(
            costs in proptest::collection::vec(0u32..2_000_000, 1..60),
            seed in proptest::prelude::any::<u64>(),
        ) {
            let rows: Vec<Row> = costs
                .iter()
                .map(|c| {
                    let mut r = Row::bare("a", "openai", "manual", Status::Compacted);
                    // A price per million tokens times a token count: 0.4 $/M × c tokens.
                    r.cost_usd = Some(f64::from(*c) * 0.4 / 1e6);
                    r
                })
                .collect();
            let mut shuffled: Vec<&Row> = rows.iter().collect();
            let mut s = seed;
            for i in (1..shuffled.len()).rev() {
                s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                shuffled.swap(i, (s >> 33) as usize % (i + 1));
            }
            let (mut a, mut b) = (Totals::default(), Totals::default());
            rows.iter().for_each(|r| a += r);
            shuffled.into_iter().for_each(|r| b += r);
            proptest::prop_assert_eq!(a.cost_usd.to_bits(), b.cost_usd.to_bits());
            // And it is the exact sum, in nano-dollars.
            let nanos: u64 = costs.iter().map(|c| u64::from(*c) * 400).sum();
            proptest::prop_assert_eq!(a.cost_usd, nanos as f64 / 1e9);
        }
    }

    #[test]
    fn status_json_shape() {
        let s = serde_json::to_string(&Status::Skipped("x".into())).unwrap();
        assert_eq!(s, r#"{"status":"skipped","detail":"x"}"#);
        let n = Status::NotStarted(NotStarted::MaxCost {
            max: 0.5,
            spent: 0.51234,
        });
        assert_eq!(
            serde_json::to_string(&n).unwrap(),
            r#"{"status":"skipped","detail":"not started: --max-cost $0.50 reached ($0.5123 spent)"}"#
        );
        assert_eq!(
            serde_json::to_string(&Status::Planned).unwrap(),
            r#"{"status":"planned"}"#
        );
        let mut t = Totals::default();
        t += &Row::bare("c", "openai", "manual", n);
        assert_eq!(t.skipped, 1);
    }
}

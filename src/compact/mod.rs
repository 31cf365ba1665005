//! Compaction strategies and the swap that builds the new history.
//!
//! A [`Strategy`] turns a [`Plan`]'s head into a [`Rewrite`]: a summary (extractive offline, an
//! LLM in a later module, or text supplied by a hook) or a pruned head. [`swap::build`] then
//! assembles the new history in the conversation's own format, keeping every kept message's
//! bytes, and [`validate`] checks it against the provider's rules before anything is written.
//! Nothing here touches SQLite or the terminal.

pub mod build;
pub mod extractive;
pub mod llm;
pub mod prune;
pub mod swap;
pub mod validate;

use async_trait::async_trait;
use chrono::{DateTime, FixedOffset};

use crate::message::Message;
use crate::plan::Plan;

/// What a strategy produced.
#[derive(Debug, Clone)]
pub enum Rewrite {
    /// Replace the head by one user message with this summary text (the full text, framing
    /// included).
    Summary(Summary),
    /// Keep every message, with the head's messages replaced by these (same count, same order).
    PrunedHead(Vec<Box<serde_json::value::RawValue>>),
}

/// A summary and where it came from.
#[derive(Debug, Clone, Default)]
pub struct Summary {
    pub text: String,
    /// The model that wrote it, for LLM strategies.
    pub model: Option<String>,
    /// Provider-reported tokens and cost, for LLM strategies.
    pub prompt_tokens: Option<u64>,
    pub completion_tokens: Option<u64>,
    pub cost_usd: Option<f64>,
    /// For the `llm` strategy with `--mask-observations`: what masking saved.
    pub masking: Option<Masking>,
}

/// What `--mask-observations` saved on one conversation: its requests and prompt tokens
/// (agent-db's o200k_base count of the transcript plus each request's fixed part), and what the
/// same head would have taken unmasked.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct Masking {
    /// Tool outputs elided.
    pub elided: usize,
    pub requests: usize,
    pub requests_unmasked: usize,
    pub prompt_tokens: usize,
    pub prompt_tokens_unmasked: usize,
}

/// Everything a summarizer may look at.
pub struct HeadInput<'a> {
    pub plan: &'a Plan,
    /// The messages to summarize. When `prior_summary` is set, the first `prior_len` are that
    /// summary.
    pub head: &'a [Message],
    /// The body of an earlier agent-db summary at the start of the head (rule (d)).
    pub prior_summary: Option<String>,
    /// How many leading messages of `head` the earlier summary takes (0 without one).
    pub prior_len: usize,
    /// The latest real user instruction (kept verbatim after the summary or in the tail).
    pub latest_instruction: Option<&'a Message>,
    pub head_tokens: usize,
    /// For a re-compaction written from the originals: the body of the summary the compaction
    /// before it wrote, which the new one must not keep less than.
    pub earlier_summary: Option<String>,
    pub now: DateTime<FixedOffset>,
}

impl<'a> HeadInput<'a> {
    pub fn new(plan: &'a Plan, now: DateTime<FixedOffset>) -> HeadInput<'a> {
        let latest_instruction = plan.latest_instruction().map(|i| &plan.loaded.messages[i]);
        if let Some(crate::plan::Resummary::Originals {
            head,
            head_tokens,
            agent_summary,
            ..
        }) = &plan.resummary
        {
            // A re-compaction summarizes the original messages, not its earlier summary; a
            // summary the agent wrote itself before them is an earlier summary all the same.
            let format = plan.loaded.format;
            let prior_len = crate::summary::prior_len(format, head, *agent_summary);
            return HeadInput {
                plan,
                head,
                prior_summary: crate::summary::prior_text(format, head, prior_len),
                prior_len,
                latest_instruction,
                head_tokens: *head_tokens,
                earlier_summary: crate::summary::prior_summary_text(format, plan.head()),
                now,
            };
        }
        let head = plan.head();
        let prior_summary = plan
            .split()
            .filter(|s| s.prior_summary)
            .and_then(|s| crate::summary::prior_text(plan.loaded.format, head, s.prior_len));
        HeadInput {
            plan,
            head,
            prior_len: plan.split().map_or(0, |s| s.prior_len),
            prior_summary,
            latest_instruction,
            head_tokens: plan.split().map(|s| s.head_tokens).unwrap_or(0),
            earlier_summary: None,
            now,
        }
    }
}

pub use crate::summary::{is_summary_text, starts_with_summary, summary_body, SUMMARY_HEADER};

/// What a dry run expects a strategy that calls a model to produce and cost.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Estimate {
    pub requests: usize,
    pub prompt_tokens: usize,
    pub summary_tokens: usize,
    pub cost_usd: Option<f64>,
}

/// Why a strategy could not produce a rewrite.
#[derive(Debug, Clone, thiserror::Error)]
pub enum StrategyError {
    /// The conversation is left alone (reported as skipped).
    #[error("{0}")]
    Skip(String),
    /// The strategy failed (reported as failed).
    #[error("{0}")]
    Fail(String),
    /// The strategy's result failed its own checks (the `llm` strategy: an answer rejected
    /// twice): reported as failed, or, with `--fallback`, the next strategy is tried.
    #[error("{0}")]
    Rejected(String),
}

/// A way to compact a head. Async so an LLM strategy fits the same shape.
#[async_trait]
pub trait Strategy: Send + Sync {
    /// The name recorded in reports and the audit log.
    fn name(&self) -> &str;
    /// The model, for the audit log.
    fn model(&self) -> Option<&str> {
        None
    }
    /// Whether it rewrites the head's messages in place ([`Rewrite::PrunedHead`]) instead of
    /// summarizing them; a store that only appends cannot take such a rewrite.
    fn rewrites_head(&self) -> bool {
        false
    }
    /// Whether it runs without network or cost (a dry run then runs it for exact figures).
    fn offline(&self) -> bool {
        true
    }
    /// What this strategy has been billed so far in the run, failed conversations included.
    fn spent_usd(&self) -> f64 {
        0.0
    }
    /// The most tokens the new head (the summary) can take, so `--target` can leave room for
    /// it when it chooses the kept tail.
    fn summary_reserve(&self) -> usize {
        extractive::MAX_SUMMARY_TOKENS
    }
    /// For strategies that are not offline: what a dry run expects, without calling out.
    fn estimate(&self, _input: &HeadInput<'_>) -> Option<Result<Estimate, StrategyError>> {
        None
    }
    async fn rewrite(&self, input: &HeadInput<'_>) -> Result<Rewrite, StrategyError>;
    /// For strategies that are not offline: the CPU-bound part of [`Strategy::rewrite`] (for
    /// the `llm` strategy: the standing rules, rendering and splitting the transcript into
    /// requests). The pipeline runs it on the planning pool, so the async workers only wait on
    /// the network, and hands the result to [`Strategy::rewrite_prepared`].
    fn prepare(&self, _input: &HeadInput<'_>) -> Result<Option<Prepared>, StrategyError> {
        Ok(None)
    }
    /// [`Strategy::rewrite`] with what [`Strategy::prepare`] returned for the same input.
    async fn rewrite_prepared(
        &self,
        input: &HeadInput<'_>,
        _prepared: Option<Prepared>,
    ) -> Result<Rewrite, StrategyError> {
        self.rewrite(input).await
    }
}

/// What [`Strategy::prepare`] hands to [`Strategy::rewrite_prepared`] (each strategy its own
/// type).
pub type Prepared = Box<dyn std::any::Any + Send>;

/// The offline, deterministic default.
pub struct Extractive;

#[async_trait]
impl Strategy for Extractive {
    fn name(&self) -> &str {
        "extractive"
    }
    async fn rewrite(&self, input: &HeadInput<'_>) -> Result<Rewrite, StrategyError> {
        Ok(Rewrite::Summary(Summary {
            text: extractive::summarize(input),
            ..Summary::default()
        }))
    }
}

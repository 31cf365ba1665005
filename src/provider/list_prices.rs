//! The providers' list prices, as data: each provider's entry in the table (`table.rs`) points
//! at its list, and `pricing.rs` looks a model up across all of them.

/// A list price: (model-name prefix, USD per million input tokens, per million output tokens).
pub type ListPrice = (&'static str, f64, f64);

/// OpenAI's list prices: (model-name prefix, input, output), referenced by its entry in the
/// provider table. Every provider's lists are matched together by the longest prefix, so dated
/// snapshots (`claude-sonnet-4-5-20250929`, `gpt-4o-mini-2024-07-18`) find their family and a
/// more specific entry (`gpt-4.1-mini`) beats a shorter one (`gpt-4.1`).
pub const OPENAI: &[ListPrice] = &[
    ("gpt-5", 1.25, 10.0),
    ("gpt-5-mini", 0.25, 2.0),
    ("gpt-5-nano", 0.05, 0.40),
    ("gpt-4.1", 2.0, 8.0),
    ("gpt-4.1-mini", 0.40, 1.60),
    ("gpt-4.1-nano", 0.10, 0.40),
    // The first gpt-4o snapshot (2024-05-13) listed at 5/15; later ones at 2.5/10.
    ("gpt-4o", 2.50, 10.0),
    ("gpt-4o-mini", 0.15, 0.60),
    ("o3", 2.0, 8.0),
    ("o3-mini", 1.10, 4.40),
    ("o4-mini", 1.10, 4.40),
];

/// Anthropic's list prices (see [`OPENAI`]).
pub const ANTHROPIC: &[ListPrice] = &[
    ("claude-opus-4", 15.0, 75.0),
    ("claude-opus-4-1", 15.0, 75.0),
    ("claude-opus-4-5", 5.0, 25.0),
    ("claude-sonnet-4", 3.0, 15.0),
    ("claude-haiku-4-5", 1.0, 5.0),
    ("claude-3-7-sonnet", 3.0, 15.0),
    ("claude-3-5-sonnet", 3.0, 15.0),
    ("claude-3-5-haiku", 0.80, 4.0),
    ("claude-3-opus", 15.0, 75.0),
    ("claude-3-haiku", 0.25, 1.25),
];

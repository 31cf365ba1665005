//! Token prices, for cost estimates in reports.
//!
//! The built-in figures (`list_prices.rs`) are the providers' public list prices (USD per million tokens, standard
//! tier, no batch or cache discounts) as last checked; they go stale and do not know about
//! negotiated rates, so configuration should be able to override them per model.

use super::table::ProviderKind;

/// USD per million tokens.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Price {
    pub input_per_mtok: f64,
    pub output_per_mtok: f64,
}

/// The built-in list price for `model`, by longest known prefix. Case-insensitive; a router
/// prefix such as OpenRouter's `openai/` or `anthropic/` is ignored.
pub fn builtin(model: &str) -> Option<Price> {
    let name = model.trim().to_ascii_lowercase();
    let name = name.rsplit('/').next().unwrap_or(&name);
    ProviderKind::ALL
        .iter()
        .flat_map(|k| k.spec().list_prices)
        .filter(|(prefix, _, _)| matches_family(name, prefix))
        .max_by_key(|(prefix, _, _)| prefix.len())
        .map(|&(_, input, output)| Price {
            input_per_mtok: input,
            output_per_mtok: output,
        })
}

/// `name` is `prefix` or `prefix` followed by a `-` suffix (a snapshot date or a variant), so
/// `gpt-4o` does not claim a hypothetical `gpt-4ox` and `o3` does not claim `o30`.
fn matches_family(name: &str, prefix: &str) -> bool {
    match name.strip_prefix(prefix) {
        Some(rest) => rest.is_empty() || rest.starts_with('-') || rest.starts_with(':'),
        None => false,
    }
}

/// The cost in USD of one call.
pub fn cost(price: &Price, prompt_tokens: u64, completion_tokens: u64) -> f64 {
    (prompt_tokens as f64 * price.input_per_mtok + completion_tokens as f64 * price.output_per_mtok)
        / 1_000_000.0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(model: &str) -> (f64, f64) {
        let price = builtin(model).unwrap_or_else(|| panic!("{model} has a price"));
        (price.input_per_mtok, price.output_per_mtok)
    }

    #[test]
    fn exact_names() {
        assert_eq!(p("gpt-4.1"), (2.0, 8.0));
        assert_eq!(p("gpt-4.1-mini"), (0.40, 1.60));
        assert_eq!(p("gpt-4.1-nano"), (0.10, 0.40));
        assert_eq!(p("gpt-4o"), (2.50, 10.0));
        assert_eq!(p("gpt-4o-mini"), (0.15, 0.60));
        assert_eq!(p("gpt-5"), (1.25, 10.0));
        assert_eq!(p("gpt-5-mini"), (0.25, 2.0));
        assert_eq!(p("o4-mini"), (1.10, 4.40));
        assert_eq!(p("claude-haiku-4-5"), (1.0, 5.0));
        assert_eq!(p("claude-3-5-haiku"), (0.80, 4.0));
    }

    #[test]
    fn dated_variants_use_the_longest_prefix() {
        assert_eq!(p("claude-sonnet-4-5-20250929"), (3.0, 15.0));
        assert_eq!(p("claude-sonnet-4-20250514"), (3.0, 15.0));
        assert_eq!(p("claude-opus-4-1-20250805"), (15.0, 75.0));
        assert_eq!(p("claude-opus-4-5-20251101"), (5.0, 25.0));
        assert_eq!(p("claude-haiku-4-5-20251001"), (1.0, 5.0));
        assert_eq!(p("claude-3-5-haiku-20241022"), (0.80, 4.0));
        assert_eq!(p("gpt-4o-mini-2024-07-18"), (0.15, 0.60));
        assert_eq!(p("gpt-4.1-mini-2025-04-14"), (0.40, 1.60));
        assert_eq!(p("gpt-5-mini-2025-08-07"), (0.25, 2.0));
        assert_eq!(p("o4-mini-2025-04-16"), (1.10, 4.40));
    }

    #[test]
    fn case_and_router_prefixes() {
        assert_eq!(p("GPT-4o-Mini"), (0.15, 0.60));
        assert_eq!(p("openai/gpt-4.1-nano"), (0.10, 0.40));
        assert_eq!(p("anthropic/claude-sonnet-4-5"), (3.0, 15.0));
    }

    #[test]
    fn unknown_models_have_no_price() {
        assert_eq!(builtin("llama3.1:8b"), None);
        assert_eq!(builtin("qwen2.5-coder"), None);
        assert_eq!(builtin("gpt-4ox"), None);
        assert_eq!(builtin("o30"), None);
        assert_eq!(builtin(""), None);
    }

    #[test]
    fn cost_is_per_million() {
        let price = Price {
            input_per_mtok: 3.0,
            output_per_mtok: 15.0,
        };
        assert_eq!(cost(&price, 0, 0), 0.0);
        assert!((cost(&price, 1_000_000, 0) - 3.0).abs() < 1e-12);
        assert!((cost(&price, 200_000, 10_000) - (0.6 + 0.15)).abs() < 1e-12);
    }
}

//! kodelet's conversation metadata: its `usage` JSON (`currentContextWindow`,
//! `maxContextWindow`, `inputTokens`, `outputTokens`) and `metadata` (`model`, `api_mode`), and
//! the format they state ([`super::detect`]).

use crate::store::ConversationMeta;

#[derive(serde::Deserialize)]
struct UsageWindow {
    #[serde(rename = "currentContextWindow")]
    current: Option<i64>,
    #[serde(rename = "maxContextWindow")]
    max: Option<i64>,
    #[serde(rename = "inputTokens")]
    input: Option<i64>,
    #[serde(rename = "outputTokens")]
    output: Option<i64>,
}

#[derive(serde::Deserialize, Default)]
struct MetaFields {
    model: Option<String>,
    api_mode: Option<String>,
}

/// A listing row's metadata from kodelet's columns; a `usage` that is not JSON is the row's
/// `problem`, reported instead of failing the listing.
#[allow(clippy::too_many_arguments)]
pub fn meta_from_columns(
    id: String,
    provider: String,
    usage: Option<String>,
    created_at: String,
    updated_at: String,
    name: Option<String>,
    metadata: Option<&str>,
    message_count: Option<i64>,
) -> ConversationMeta {
    let mut problem = None;
    let w = match usage.as_deref() {
        None => None,
        Some(u) => match serde_json::from_str::<UsageWindow>(u) {
            Ok(w) => Some(w),
            Err(e) => {
                problem = Some(format!("usage is not valid JSON ({e})"));
                None
            }
        },
    };
    let pick = |f: fn(&UsageWindow) -> Option<i64>| w.as_ref().and_then(f);
    let meta: MetaFields = metadata
        .filter(|m| !m.is_empty())
        .and_then(|m| serde_json::from_str(m).ok())
        .unwrap_or_default();
    let codec = super::detect(&provider, meta.api_mode.as_deref()).ok();
    ConversationMeta {
        id,
        name,
        provider,
        codec,
        api_mode: meta.api_mode,
        model: meta.model,
        message_count,
        current_context: pick(|w| w.current),
        max_context: pick(|w| w.max),
        input_tokens: pick(|w| w.input),
        output_tokens: pick(|w| w.output),
        cwd: None,
        created_at,
        updated_at,
        problem,
        parent: None,
        archived: false,
    }
}

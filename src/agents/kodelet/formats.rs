//! kodelet's three live `raw_messages` formats, chosen by the row's `provider` and
//! `metadata.api_mode` ([`detect`]), and their codecs ([`super::anthropic`],
//! [`super::openai_chat`], [`super::responses`]).

use super::{anthropic, openai_chat, responses};
use crate::message::{Format, FormatError};

/// kodelet's `provider=anthropic` format.
pub const ANTHROPIC: Format = &anthropic::Anthropic;
/// kodelet's `provider=openai` format, `api_mode` `chat_completions` or absent.
pub const OPENAI_CHAT: Format = &openai_chat::OpenAiChat;
/// kodelet's `provider=openai` with `api_mode=responses`, or legacy `provider=openai-responses`.
pub const OPENAI_RESPONSES: Format = &responses::OpenAiResponses;

/// kodelet's format from its stored `provider` and `metadata.api_mode`; `Err` says why the
/// conversation cannot be compacted.
pub fn detect(provider: &str, api_mode: Option<&str>) -> Result<Format, FormatError> {
    match (provider, api_mode) {
        ("anthropic", _) => Ok(ANTHROPIC),
        ("openai", Some("responses")) | ("openai-responses", _) => Ok(OPENAI_RESPONSES),
        ("openai", None | Some("chat_completions") | Some("")) => Ok(OPENAI_CHAT),
        ("openai", Some(other)) => Err(FormatError::UnsupportedMode {
            provider: "openai".into(),
            mode: other.into(),
        }),
        ("google", _) => Err(FormatError::Retired {
            provider: "google",
            why: "the agent removed it (2026-04) and no longer loads these rows",
        }),
        (other, _) => Err(FormatError::UnknownProvider {
            provider: other.into(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn detect_formats() {
        assert_eq!(detect("anthropic", None), Ok(ANTHROPIC));
        assert_eq!(detect("openai", None), Ok(OPENAI_CHAT));
        assert_eq!(detect("openai", Some("chat_completions")), Ok(OPENAI_CHAT));
        assert_eq!(detect("openai", Some("responses")), Ok(OPENAI_RESPONSES));
        assert_eq!(detect("openai-responses", None), Ok(OPENAI_RESPONSES));
        assert_eq!(
            detect("google", None).unwrap_err().to_string(),
            "provider google is unsupported: the agent removed it (2026-04) and no longer loads these rows"
        );
        assert_eq!(
            detect("openai", Some("batch")).unwrap_err().to_string(),
            "unsupported openai api_mode \"batch\""
        );
        assert_eq!(
            detect("mistral", None),
            Err(FormatError::UnknownProvider {
                provider: "mistral".into()
            })
        );
        assert_eq!(
            detect("mistral", None).unwrap_err().to_string(),
            "unknown provider \"mistral\""
        );
    }

    /// A codec reads a repeated key as kodelet's Go decode does (the last value), and an
    /// escaped key as the key it spells.
    #[test]
    fn the_codecs_read_repeated_and_escaped_keys_as_a_value_does() {
        let raw = |s: &str| serde_json::value::RawValue::from_string(s.to_string()).unwrap();
        let text = |m: crate::message::Message| m.text();
        let m = super::super::anthropic::decode(&raw(
            r#"{"role":"user","content":[{"type":"text","text":"first","text":"last"}]}"#,
        ))
        .unwrap();
        assert_eq!(text(m), "last");
        let m = super::super::anthropic::decode(&raw(
            r#"{"role":"user","content":[{"type":"text","t\u0065xt":"escaped"}]}"#,
        ))
        .unwrap();
        assert_eq!(text(m), "escaped");
        let m = super::super::openai_chat::decode(&raw(
            r#"{"role":"tool","role":"user","content":"hi"}"#,
        ))
        .unwrap();
        assert_eq!(m.role, crate::message::Role::User);
        // A stored message is JSON, but a number past `f64` is one a `Value` cannot hold.
        let err = super::super::responses::decode(&raw(
            r#"{"type":"message","role":"user","content":"x","n":1e400}"#,
        ))
        .unwrap_err();
        assert!(
            matches!(&err, crate::message::DecodeError::NotJson { what, .. } if what == "invalid JSON"),
            "{err:?}"
        );
        assert!(err.to_string().starts_with("invalid JSON ("), "{err}");
    }
}

//! Token counts per message and per conversation.
//!
//! - OpenAI-family formats: exact `o200k_base` BPE counts of each message's text, tool names,
//!   tool inputs and tool results (the vocabulary compiled from `bpe-openai`'s at build time into
//!   a 4 MB table, `vocab.rs`; see docs/benchmarks.md for the speed against Python `tiktoken`),
//!   plus [`MESSAGE_OVERHEAD`] tokens of framing per message, as
//!   OpenAI's chat format adds. [`count_text`] gives exactly `bpe-openai`'s count, faster: its own
//!   pre-tokenizer for ASCII (`pretok.rs`) and a per-thread cache of piece counts (`cache.rs`).
//! - Anthropic: an **estimate**. Anthropic's tokenizer is not public (the exact figure only comes
//!   from its token-counting API, which needs a key and network), so agent-db counts
//!   `o200k_base` tokens and multiplies by [`ANTHROPIC_FACTOR`]: Claude tokenizers produce
//!   noticeably more tokens than o200k_base for the same English and code, and an estimate that
//!   errs high never promises room that is not there.
//! - Images are counted as the provider bills them (from their pixel size; see
//!   [`crate::message::ImageInfo`]), never by their base64 length. Opaque items count one token
//!   per four bytes.
//!
//! Only planning counts tokens; listing uses the usage the agent stored.

use crate::message::{Block, Format, Message};

mod cache;
mod pretok;
mod vocab;
mod vocab_hash;

pub use pretok::{split, Pieces};
pub use vocab::{o200k, Vocab};

/// Framing tokens per message (role and separators).
pub const MESSAGE_OVERHEAD: usize = 4;
/// Multiplier applied to o200k_base counts to estimate Claude tokens.
pub const ANTHROPIC_FACTOR: f64 = 1.15;

/// Exact o200k_base token count of `text`: always equal to tiktoken's (and to
/// `bpe_openai::o200k_base().count(text)`, which the tests use as the oracle). Pieces come from
/// [`split`] (a hand-written ASCII pre-tokenizer, falling back to the o200k regex for
/// non-ASCII), a piece of one byte is one token (every byte is in the vocabulary), one of two
/// bytes one or two (a bit table of the two-byte tokens, [`Vocab::count_pair`]), and other
/// pieces' counts go through a bounded per-thread cache (`cache.rs`) in front of the byte-pair
/// merge over the compiled vocabulary (`vocab.rs`).
pub fn count_text(text: &str) -> usize {
    if text.is_empty() {
        return 0;
    }
    let vocab = o200k();
    cache::with(|cache| {
        pretok::split_bytes(text)
            .map(|piece| match *piece {
                [_] => 1,
                [a, b] => vocab.count_pair(a, b),
                _ => cache.get_or(piece, |p| vocab.count_piece(p)),
            })
            .sum()
    })
}

/// Tokens of one message in `format`.
pub fn message_tokens(format: Format, m: &Message) -> usize {
    let mut text = 0usize;
    let mut images = 0usize;
    let image_cost = |i: &crate::message::ImageInfo| {
        if format.anthropic_tokens() {
            i.anthropic_tokens()
        } else {
            i.openai_tokens()
        }
    };
    for b in &m.blocks {
        match b {
            Block::Text { text: t } => text += count_text(t),
            Block::Thinking { text: t, .. } => text += count_text(t),
            Block::ToolCall { name, input, .. } => text += count_text(name) + count_text(input),
            Block::ToolResult {
                content,
                images: im,
                ..
            } => {
                text += count_text(content);
                images += im.iter().map(image_cost).sum::<usize>();
            }
            Block::Image(i) => images += image_cost(i),
            Block::Opaque { bytes, .. } => text += bytes.div_ceil(4),
        }
    }
    let text = if format.anthropic_tokens() {
        (text as f64 * ANTHROPIC_FACTOR).ceil() as usize
    } else {
        text
    };
    text + images + MESSAGE_OVERHEAD
}

/// Tokens of a whole history.
pub fn history_tokens(format: Format, messages: &[Message]) -> usize {
    messages.iter().map(|m| message_tokens(format, m)).sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The registered codec named `name` (the formats kodelet stores).
    fn codec(name: &str) -> crate::message::Format {
        crate::store::StoreKind::codec(name).expect("a registered codec")
    }

    #[test]
    fn o200k_counts_are_exact() {
        // Reference values from tiktoken's o200k_base.
        assert_eq!(count_text("hello world"), 2);
        assert_eq!(count_text(""), 0);
    }

    #[test]
    fn every_ascii_byte_is_one_token() {
        // count_text counts one-byte pieces as 1 without asking the encoder.
        for b in 0u8..128 {
            assert_eq!(o200k().count_piece(&[b]), 1, "byte {b:#04x}");
        }
    }

    #[test]
    fn anthropic_is_scaled_openai_is_not() {
        let raw = serde_json::value::RawValue::from_string(
            r#"{"role":"user","content":"hello world"}"#.into(),
        )
        .unwrap();
        let m = crate::message::decode(codec("openai-chat"), &raw).unwrap();
        assert_eq!(
            message_tokens(codec("openai-chat"), &m),
            2 + MESSAGE_OVERHEAD
        );
        assert_eq!(message_tokens(codec("anthropic"), &m), 3 + MESSAGE_OVERHEAD);
    }
}

//! `agent_db::tokens` against `bpe-openai`'s own slow path: for random texts, the pieces of
//! `tokens::split` equal `bpe_openai::o200k_base().split` (the regex pre-tokenizer the fast ASCII
//! path replaces) and `tokens::count_text` equals `bpe_openai::o200k_base().count` (regex split,
//! then a fresh encoder per piece, no cache). Three generators: fragments chosen to hit the
//! pre-tokenizer's tricky cases in ASCII, the same mixed with non-ASCII characters that change a
//! piece when they follow ASCII (letters, marks, digits and whitespace outside ASCII, case
//! variants such as `ſ`), and arbitrary Unicode. The golden corpus is checked piece by piece too.

use std::path::Path;

use agent_db::tokens;
use proptest::prelude::*;

/// ASCII fragments around the o200k pattern's edges.
const ASCII_FRAGMENTS: &[&str] = &[
    " ",
    "  ",
    "    ",
    "\t",
    "\n",
    "\r",
    "\r\n",
    "\n\n",
    " \n ",
    "\x0b",
    "\x0c",
    "'s",
    "'S",
    "'t",
    "'T",
    "'re",
    "'RE",
    "'rE",
    "'ve",
    "'Ve",
    "'m",
    "'M",
    "'ll",
    "'lL",
    "'LL",
    "'d",
    "'D",
    "'",
    "''",
    "'r",
    "'v",
    "'l",
    "'x",
    "0",
    "7",
    "12",
    "123",
    "1234",
    "1234567",
    "HTTPServer",
    "fooBAR",
    "FooBar",
    "foo",
    "BAR",
    "A",
    "a",
    "I",
    "don",
    "it",
    "!",
    "...",
    "/",
    "//",
    "!!\n",
    ";\n/",
    "?\r\n",
    ")/\n",
    "{",
    "}",
    "\"",
    "\\",
    "\\n",
    "_",
    "-",
    "=>",
    "\x01",
    "\x1f",
    "\x7f",
    "\x00",
    "#",
    "@",
    "`",
    "~",
];

/// Non-ASCII characters that change a piece when they follow or precede ASCII.
const UNICODE_FRAGMENTS: &[&str] = &[
    "é",
    "É",
    "\u{301}",
    "ſ",
    "\u{212a}",
    "\u{a0}",
    "\u{3000}",
    "\u{85}",
    "\u{2028}",
    "\u{2009}",
    "٣",
    "０",
    "²",
    "½",
    "中文",
    "日本語",
    "😀",
    "👍🏽",
    "ǅ",
    "ʰ",
    "ª",
    "ß",
    "ñ",
    "Ω",
    "ω",
    "«",
    "—",
    "’",
    "…",
    "\u{200b}",
    "\u{feff}",
];

fn fragments(pool: &'static [&'static str]) -> impl Strategy<Value = String> {
    prop::collection::vec(
        prop_oneof![
            4 => prop::sample::select(pool).prop_map(str::to_owned),
            1 => prop::char::range('\0', '\x7f').prop_map(String::from),
        ],
        0..48,
    )
    .prop_map(|v| v.concat())
}

fn mixed() -> impl Strategy<Value = String> {
    prop::collection::vec(
        prop_oneof![
            6 => prop::sample::select(ASCII_FRAGMENTS).prop_map(str::to_owned),
            2 => prop::sample::select(UNICODE_FRAGMENTS).prop_map(str::to_owned),
            1 => any::<char>().prop_map(String::from),
        ],
        0..48,
    )
    .prop_map(|v| v.concat())
}

fn check(text: &str) -> Result<(), TestCaseError> {
    let tokenizer = bpe_openai::o200k_base();
    let ours: Vec<&str> = tokens::split(text).collect();
    let theirs: Vec<&str> = tokenizer.split(text).collect();
    prop_assert_eq!(&ours, &theirs, "pieces of {:?}", text);
    prop_assert_eq!(
        tokens::count_text(text),
        tokenizer.count(text),
        "count of {:?}",
        text
    );
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn ascii_pieces_and_counts_match_bpe_openai(text in fragments(ASCII_FRAGMENTS)) {
        check(&text)?;
    }

    #[test]
    fn mixed_pieces_and_counts_match_bpe_openai(text in mixed()) {
        check(&text)?;
    }

    #[test]
    fn unicode_pieces_and_counts_match_bpe_openai(text in any::<String>()) {
        check(&text)?;
    }
}

#[test]
fn hand_picked_edges_match_bpe_openai() {
    for text in [
        "",
        " ",
        "   ",
        "a   ",
        "x\n  ",
        "  \n  foo",
        "HTTPServer fooBAR don't I'LL we'Re",
        "   1234567 89",
        "!!!\n\n/x",
        "a/b//c\r\n/",
        " é",
        "\té",
        "ab\u{301}c",
        "Straße",
        "it'ſ",
        "x'\u{212a}",
        "12٣4",
        " \u{a0}x",
        "foo\u{3000}\u{3000}bar",
        "\u{85}\n",
        "'s'd",
        "'sʰ",
        "aঅ",
    ] {
        check(text).unwrap_or_else(|e| panic!("{e}"));
    }
}

#[test]
fn golden_corpus_pieces_match_bpe_openai() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/tokens/corpus.jsonl");
    let corpus =
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut texts = 0;
    for line in corpus.lines().filter(|l| !l.trim().is_empty()) {
        let v: serde_json::Value = serde_json::from_str(line).expect("corpus line");
        let text = v["text"].as_str().expect("text");
        check(text).unwrap_or_else(|e| panic!("{}: {e}", v["id"]));
        texts += 1;
    }
    assert!(texts >= 300, "only {texts} texts in the corpus");
}

// ---------------------------------------------------------------------------------------------
// The compiled vocabulary's byte-pair merge (`tokens::o200k().count_piece`) against
// `bpe-openai`'s encoder, piece by piece, at every length: the linear scan (up to 64 bytes) and
// the heap merge (longer pieces, and any piece through `count_piece_by_heap`).
// ---------------------------------------------------------------------------------------------

fn check_piece(piece: &[u8]) -> Result<(), TestCaseError> {
    let theirs = bpe_openai::o200k_base().bpe.count(piece);
    let vocab = tokens::o200k();
    prop_assert_eq!(vocab.count_piece(piece), theirs, "count of {:?}", piece);
    prop_assert_eq!(
        vocab.count_piece_by_heap(piece),
        theirs,
        "heap count of {:?}",
        piece
    );
    Ok(())
}

/// Repetitions of short fragments: long pieces that merge many times (runs of one letter,
/// of punctuation, of spaces, of a syllable, of a multi-byte character).
fn long_piece() -> impl Strategy<Value = Vec<u8>> {
    (
        prop::sample::select(
            &[
                "a", "e", "ab", "ing", "-", "=", " ", "\t", "0", "é", "你", "\u{200b}", "xy", "_",
                "/", "Z",
            ][..],
        ),
        1usize..400,
    )
        .prop_map(|(f, n)| f.repeat(n).into_bytes())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1000))]

    #[test]
    fn pieces_of_random_text_count_as_bpe_openai(text in mixed()) {
        for piece in tokens::split(&text) {
            check_piece(piece.as_bytes())?;
        }
    }

    #[test]
    fn arbitrary_bytes_count_as_bpe_openai(bytes in prop::collection::vec(any::<u8>(), 0..200)) {
        check_piece(&bytes)?;
    }

    #[test]
    fn long_pieces_count_as_bpe_openai(piece in long_piece()) {
        check_piece(&piece)?;
    }
}

#[test]
fn an_eighth_of_a_megabyte_of_one_letter_counts_as_bpe_openai() {
    // One pre-token piece (lowercase letters only): the heap merge keeps it n log n (a
    // quadratic merge would take an hour on it).
    let piece = "a".repeat(1 << 17);
    assert_eq!(
        tokens::o200k().count_piece(piece.as_bytes()),
        bpe_openai::o200k_base().bpe.count(piece.as_bytes())
    );
    assert_eq!(
        tokens::count_text(&piece),
        bpe_openai::o200k_base().count(piece.as_str())
    );
}

#[test]
fn every_token_of_the_vocabulary_is_one_token() {
    let vocab = tokens::o200k();
    let bpe = &bpe_openai::o200k_base().bpe;
    assert_eq!(vocab.len(), bpe.num_tokens());
    for rank in 0..vocab.len() as u32 {
        assert_eq!(vocab.token(rank), bpe.token_bytes(rank), "rank {rank}");
        assert_eq!(vocab.rank(vocab.token(rank)), Some(rank), "rank {rank}");
    }
}

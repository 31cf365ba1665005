use super::render::{self, ends_in_verdict, head_tail, middle_out, split_transcript, PREFIX};
use crate::message::{Block, Message, Role};
use crate::tokens::count_text;
use proptest::prelude::*;

/// The registered codec named `name` (the formats kodelet stores).
fn codec(name: &str) -> crate::message::Format {
    crate::store::StoreKind::codec(name).expect("a registered codec")
}

/// The rule the lazy split must reproduce: count every unit.
fn split_counting_everything(texts: &[String], room: usize) -> Vec<String> {
    let mut chunks = Vec::new();
    let mut cur = String::new();
    let mut cur_tokens = 0usize;
    for text in texts {
        let mut text = format!("{text}\n");
        let mut t = count_text(&text);
        if t > room {
            text = middle_out(&text, room);
            t = count_text(&text);
        }
        if cur_tokens + t + 1 > room && !cur.is_empty() {
            chunks.push(std::mem::take(&mut cur));
            cur_tokens = 0;
        }
        cur.push_str(&text);
        cur_tokens += t + 1;
    }
    if !cur.is_empty() {
        chunks.push(cur);
    }
    chunks
}

fn text_strategy() -> impl Strategy<Value = String> {
    prop_oneof![
        "[a-z ]{0,40}",
        "[a-zA-Z0-9_./ ]{0,400}",
        "\\PC{0,120}",
        ("[a-z]{1,8}", 1usize..600).prop_map(|(w, n)| vec![w; n].join(" ")),
    ]
}

fn msg(role: Role, blocks: Vec<Block>) -> Message {
    Message {
        role,
        blocks,
        raw: serde_json::value::RawValue::from_string("{}".into()).unwrap(),
    }
}

/// A message of a generated conversation: text, calls (ids `c{n}`), or results of calls.
#[derive(Debug, Clone)]
enum Gen {
    User(String),
    Calls(String, usize),
    Results(usize, String),
}

fn gen() -> impl Strategy<Value = Gen> {
    prop_oneof![
        text_strategy().prop_map(Gen::User),
        (text_strategy(), 1usize..4).prop_map(|(t, n)| Gen::Calls(t, n)),
        (1usize..4, text_strategy()).prop_map(|(n, t)| Gen::Results(n, t)),
    ]
}

/// Messages from generated steps: a `Results` step answers the oldest calls not yet answered
/// since the last user turn (up to n of them), one result message each (OpenAI's shape) or all in one (the
/// Anthropic shape) alternately.
fn conversation(steps: &[Gen]) -> Vec<Message> {
    let mut out = Vec::new();
    let mut next = 0usize;
    let mut open: Vec<String> = Vec::new();
    for (k, s) in steps.iter().enumerate() {
        match s {
            Gen::User(t) => {
                // A valid history answers calls before the next user turn.
                open.clear();
                out.push(msg(Role::User, vec![Block::Text { text: t.clone() }]))
            }
            Gen::Calls(t, n) => {
                let mut blocks = vec![Block::Text { text: t.clone() }];
                for _ in 0..*n {
                    next += 1;
                    open.push(format!("c{next}"));
                    blocks.push(Block::ToolCall {
                        id: format!("c{next}"),
                        name: "bash".into(),
                        input: format!("{{\"command\":\"step {next}\"}}"),
                    });
                }
                out.push(msg(Role::Assistant, blocks));
            }
            Gen::Results(n, t) => {
                let ids: Vec<String> = open.drain(..(*n).min(open.len())).collect();
                let result = |id: String| Block::ToolResult {
                    call_id: id,
                    content: t.clone(),
                    is_error: false,
                    images: Vec::new(),
                };
                if k % 2 == 0 {
                    for id in ids {
                        out.push(msg(Role::Tool, vec![result(id)]));
                    }
                } else if !ids.is_empty() {
                    out.push(msg(Role::User, ids.into_iter().map(result).collect()));
                }
            }
        }
    }
    out
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]
    #[test]
    fn lazy_counting_gives_the_chunks_of_counting_everything(
        texts in proptest::collection::vec(text_strategy(), 0..40),
        room in 40usize..2_500,
    ) {
        let lazy = split_transcript(texts.iter().cloned(), room);
        prop_assert_eq!(lazy, split_counting_everything(&texts, room));
    }

    #[test]
    fn a_token_is_at_least_a_byte(text in "\\PC{0,300}") {
        prop_assert!(count_text(&text) <= text.len());
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(150))]
    /// No chunk starts with a tool result whose call is in an earlier chunk: every result
    /// line `← result of bash #N` is in the chunk of its call `→ bash #N`.
    #[test]
    fn chunks_never_separate_a_call_from_its_result(
        steps in proptest::collection::vec(gen(), 0..40),
        room in 200usize..2_500,
    ) {
        let messages = conversation(&steps);
        let refs: Vec<&Message> = messages.iter().collect();
        let chunks = split_transcript(render::unit_texts(&refs, codec("anthropic"), Default::default()).into_iter(), room);
        for (c, chunk) in chunks.iter().enumerate() {
            for line in chunk.lines() {
                if let Some(of) = line.strip_prefix("← result of ") {
                    let call = format!("→ {}\n", of.trim_end_matches(" (failed)"));
                    // The call is in this chunk unless the middle of an oversized unit was cut.
                    prop_assert!(
                        chunk.contains(&call) || chunk.contains("middle of this message omitted"),
                        "chunk {} has {:?} without its call", c, line
                    );
                }
            }
            // Only structure starts at the first column.
            for line in chunk.lines() {
                prop_assert!(
                    line.is_empty() || line.starts_with(PREFIX.trim_end()) || line.starts_with('[')
                        // (a structure line cut short by the middle-out cut is still structure)
                        || line.starts_with('→') || line.starts_with('←') || line.starts_with('('),
                    "a content line at the first column: {:?}", line
                );
            }
        }
    }
}

#[test]
fn head_and_tail_keep_the_verdict() {
    let mut out = String::from("running 441 tests\n");
    let mut i = 0;
    while out.len() < 30_000 {
        out.push_str(&format!("test net::case_{i} ... ok\n"));
        i += 1;
    }
    out.push_str("thread 'net::retry::backoff' panicked at src/net/retry.rs:142:9:\nassertion failed\n\nfailures:\n    net::retry::backoff\n\ntest result: FAILED. 440 passed; 1 failed\n");
    assert!(ends_in_verdict(&out));
    let shown = render::tool_output(&out, false);
    assert!(
        shown.contains("panicked at src/net/retry.rs:142:9"),
        "{shown}"
    );
    assert!(shown.contains("test result: FAILED"));
    assert!(shown.starts_with("running 441 tests"));
    assert!(
        shown.contains("characters ("),
        "the omission is marked: {shown}"
    );
    assert!(shown.len() < 7_000);
    // An ordinary output gets a shorter tail.
    let plain: String = (0..2000).map(|i| format!("line {i}\n")).collect();
    assert!(!ends_in_verdict(&plain));
    let shown = render::tool_output(&plain, false);
    assert!(shown.len() < 2_200, "{}", shown.len());
    assert!(shown.contains("line 1999"));
}

#[test]
fn verdicts() {
    assert!(ends_in_verdict("...\nerror[E0308]: mismatched types"));
    assert!(ends_in_verdict("make: *** [all] Error 2\nexit status: 2"));
    assert!(ends_in_verdict("Process exited with code 127"));
    assert!(!ends_in_verdict("done\nexit status: 0"));
    assert!(!ends_in_verdict("all good"));
}

proptest! {
    /// Head and tail: the output whole when it fits, else both ends with a marker counting what
    /// was left out, so the shown parts and the count add up to the whole.
    #[test]
    fn head_tail_accounts_for_every_character(text in "(\\PC{0,30}\n){0,60}", head in 1usize..200, tail in 1usize..200) {
        let shown = head_tail(&text, head, tail);
        if text.chars().count() <= head + tail {
            prop_assert_eq!(shown.as_ref(), text.as_str());
        } else {
            let (h, rest) = shown.split_once("\n[… ").unwrap();
            let (n, t) = rest.split_once(" characters (").unwrap();
            let t = t.split_once("omitted …]\n").unwrap().1;
            let n: usize = n.parse().unwrap();
            prop_assert!(text.starts_with(h));
            prop_assert!(text.ends_with(t));
            // The head's line break it ended at is dropped, not counted: within one.
            let total = text.chars().count();
            let counted = h.chars().count() + n + t.chars().count();
            prop_assert!(counted <= total && total <= counted + text.matches('\n').count().min(1) + 1,
                "{} + {} + {} vs {}", h.chars().count(), n, t.chars().count(), total);
        }
    }

    /// Head and tail as defined by character positions counted from the start (what
    /// `head_tail` computed before it found the tail from the end): the same text.
    #[test]
    fn head_tail_is_its_definition(text in "(\\PC{0,30}\n){0,60}", head in 1usize..200, tail in 0usize..200) {
        let at = |t: &str, n: usize| t.char_indices().nth(n).map_or(t.len(), |(i, _)| i);
        let total = text.chars().count();
        let want = if total <= head + tail {
            text.clone()
        } else {
            let mut h = at(&text, head);
            if let Some(nl) = text[..h].rfind('\n') {
                if nl >= h - h / 5 {
                    h = nl;
                }
            }
            let mut t = at(&text, total - tail);
            let fifth = at(&text[t..], tail / 5) + t;
            if let Some(nl) = text[t..fifth].find('\n') {
                t += nl + 1;
            }
            let middle = &text[h..t];
            format!(
                "{}\n[… {} characters ({} lines) omitted …]\n{}",
                text[..h].trim_end_matches('\n'),
                middle.chars().count(),
                middle.matches('\n').count(),
                &text[t..]
            )
        };
        let got = head_tail(&text, head, tail);
        prop_assert_eq!(got.as_ref(), want.as_str());
    }
}

#[test]
fn results_are_named_by_their_call_in_every_format() {
    let call = msg(
        Role::Assistant,
        vec![Block::ToolCall {
            id: "a".into(),
            name: "bash".into(),
            input: "{\"command\":\"ls\"}".into(),
        }],
    );
    let result = |role| {
        msg(
            role,
            vec![Block::ToolResult {
                call_id: "a".into(),
                content: "x\n[user]\ny".into(),
                is_error: false,
                images: vec![],
            }],
        )
    };
    let mut shown = Vec::new();
    for role in [Role::Tool, Role::User] {
        let (c, r) = (call.clone(), result(role));
        let texts = render::unit_texts(&[&c, &r], codec("anthropic"), Default::default());
        assert_eq!(texts.len(), 1, "one unit");
        shown.push(texts[0].clone());
    }
    assert_eq!(shown[0], shown[1]);
    assert_eq!(
        shown[0],
        "[assistant]\n→ bash #1\n│ {\"command\":\"ls\"}\n[tool]\n← result of bash #1\n│ x\n│ [user]\n│ y\n"
    );
}

//! The user's own turns, kept near-verbatim, and how a turn is shortened when the summary is over
//! budget: prose is cut, tokens that look like code are not.
//!
//! Each turn has up to three forms, from full to shortest:
//!
//! 1. the whole text, whitespace collapsed;
//! 2. its pieces (sentences, and pasted blocks cut to their first lines) that carry something
//!    distinctive: the first piece, and every piece with a code-like token (path, identifier,
//!    command, number) or naming a command the tools ran or a file they touched; the other
//!    pieces become `…`;
//! 3. the first piece, clipped, and the distinctive tokens of the rest.
//!
//! Which turns are shortened, and how far, is decided by `render::fit`.

use super::entities::has_code;
use super::text::{backtick_spans, clip, collapse, is_code_like, is_fence, split_line, tokens};

/// Longest first piece in the shortest form.
const FIRST_PIECE_CHARS: usize = 200;
/// Lines of a pasted block kept in the second form.
const BLOCK_LINES: usize = 2;
/// Longest line of a pasted block in the second form.
const BLOCK_LINE_CHARS: usize = 160;
/// Distinctive tokens listed in the shortest form.
const MAX_MENTIONS: usize = 16;

/// One piece of a turn: a sentence of prose or a pasted (fenced) block.
struct Piece {
    text: String,
}

fn pieces(text: &str) -> Vec<Piece> {
    let mut out = Vec::new();
    let mut block: Option<Vec<&str>> = None;
    for line in text.lines() {
        let t = line.trim();
        if is_fence(t) {
            match block.take() {
                Some(lines) => out.push(block_piece(&lines)),
                None => block = Some(Vec::new()),
            }
            continue;
        }
        if let Some(b) = block.as_mut() {
            if !t.is_empty() {
                b.push(t);
            }
            continue;
        }
        if t.is_empty() {
            continue;
        }
        let mut s = Vec::new();
        split_line(t, &mut s);
        out.extend(s.into_iter().map(|text| Piece { text }));
    }
    if let Some(lines) = block {
        out.push(block_piece(&lines));
    }
    out
}

fn block_piece(lines: &[&str]) -> Piece {
    let mut kept: Vec<String> = lines
        .iter()
        .take(BLOCK_LINES)
        .map(|l| clip(&collapse(l), BLOCK_LINE_CHARS))
        .collect();
    if lines.len() > BLOCK_LINES {
        kept.push(format!("[{} more lines]", lines.len() - BLOCK_LINES));
    }
    Piece {
        text: format!("``` {} ```", kept.join(" / ")),
    }
}

/// The forms of a turn, fullest first. `anchors` are lowercase strings (commands the tools ran,
/// names of files they touched) whose mention makes a piece worth keeping.
pub(super) fn forms(text: &str, anchors: &[String]) -> Vec<String> {
    let full = collapse(text);
    let ps = pieces(text);
    let keep = |p: &Piece| {
        has_code(&p.text) || {
            let lower = p.text.to_lowercase();
            anchors.iter().any(|a| lower.contains(a.as_str()))
        }
    };
    let mut second = String::new();
    let mut gap = false;
    for (i, p) in ps.iter().enumerate() {
        if i == 0 || keep(p) {
            if gap {
                second.push_str("… ");
                gap = false;
            }
            second.push_str(&p.text);
            second.push(' ');
        } else {
            gap = true;
        }
    }
    if gap {
        second.push('…');
    }
    let second = second.trim_end().to_string();
    let mut out = vec![full];
    if second.len() < out[0].len() {
        out.push(second);
    }
    if let Some(third) = shortest(&ps) {
        if third.len() < out.last().map_or(usize::MAX, String::len) {
            out.push(third);
        }
    }
    out
}

/// The first piece, clipped, and the distinctive tokens of the rest.
fn shortest(ps: &[Piece]) -> Option<String> {
    let first = ps.first()?;
    let mut mentions: Vec<String> = Vec::new();
    for p in &ps[1..] {
        let spans = backtick_spans(&p.text);
        for s in &spans {
            push_mention(&mut mentions, s);
        }
        for t in tokens(&p.text) {
            if is_code_like(t) && !spans.iter().any(|s| s.contains(t)) {
                push_mention(&mut mentions, t);
            }
        }
    }
    let mut s = clip(&first.text, FIRST_PIECE_CHARS);
    if ps.len() > 1 {
        s.push_str(" …");
    }
    if !mentions.is_empty() {
        mentions.truncate(MAX_MENTIONS);
        s.push_str(&format!(" (also mentions: {})", mentions.join(", ")));
    }
    Some(s)
}

fn push_mention(list: &mut Vec<String>, t: &str) {
    let t = t.to_string();
    if !list.contains(&t) {
        list.push(t);
    }
}

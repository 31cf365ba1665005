//! Prose handling: splitting text into sentences, normalizing for matching, whole-word phrase
//! matching, classifying sentences (rules, pending work, decisions), and quoting (whitespace
//! collapsed, long quotes clipped at a word boundary).

/// Sentences of prose: lines outside code fences, bullets stripped, split after `.`, `!` or `?`
/// followed by a space and a non-lowercase word (so "e.g. foo" stays whole).
pub(super) fn sentences(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut in_fence = false;
    for line in text.lines() {
        let t = line.trim();
        if t.starts_with("```") || t.starts_with("~~~") {
            in_fence = !in_fence;
            continue;
        }
        if in_fence || t.is_empty() {
            continue;
        }
        let t = strip_bullet(t);
        let chars: Vec<(usize, char)> = t.char_indices().collect();
        let mut start = 0usize;
        for k in 0..chars.len() {
            let (pos, c) = chars[k];
            if !matches!(c, '.' | '!' | '?') || pos < start {
                continue;
            }
            if !chars.get(k + 1).is_some_and(|(_, n)| n.is_whitespace()) {
                continue;
            }
            if chars[k + 1..]
                .iter()
                .find(|(_, n)| !n.is_whitespace())
                .is_some_and(|(_, n)| n.is_lowercase())
            {
                continue;
            }
            let end = pos + c.len_utf8();
            let seg = t[start..end].trim();
            if c == '.' && is_abbreviation(seg) {
                continue;
            }
            push_sentence(seg, &mut out);
            start = end;
        }
        push_sentence(t[start..].trim(), &mut out);
    }
    out
}

fn push_sentence(s: &str, out: &mut Vec<String>) {
    let s = collapse(s);
    if s.chars().count() >= 8 {
        out.push(s);
    }
}

fn strip_bullet(t: &str) -> &str {
    let mut t = t;
    for p in ["- [ ] ", "- [x] ", "- ", "* ", "• ", "+ ", "> "] {
        if let Some(rest) = t.strip_prefix(p) {
            t = rest.trim_start();
            break;
        }
    }
    // "1. " / "2) "
    let digits = t.chars().take_while(char::is_ascii_digit).count();
    if digits > 0 && digits <= 3 {
        let rest = &t[digits..];
        if let Some(r) = rest.strip_prefix(". ").or_else(|| rest.strip_prefix(") ")) {
            t = r.trim_start();
        }
    }
    t
}

fn is_abbreviation(seg: &str) -> bool {
    let last = seg
        .trim_end_matches('.')
        .rsplit(|c: char| c.is_whitespace() || c == '(')
        .next()
        .unwrap_or("")
        .to_lowercase();
    (last.chars().count() == 1 && last.chars().all(char::is_alphabetic))
        || matches!(
            last.as_str(),
            "e.g" | "i.e" | "etc" | "vs" | "cf" | "approx" | "mr" | "dr" | "no" | "fig"
        )
}

/// Lowercase with typographic apostrophes folded, for matching only.
pub(super) fn normalize(s: &str) -> String {
    s.to_lowercase().replace(['\u{2019}', '\u{2018}'], "'")
}

/// Whether `lower` contains `phrase` as whole words.
fn has_phrase(lower: &str, phrase: &str) -> bool {
    let mut from = 0;
    while let Some(p) = lower[from..].find(phrase) {
        let s = from + p;
        let e = s + phrase.len();
        let before = lower[..s]
            .chars()
            .next_back()
            .is_none_or(|c| !c.is_alphanumeric());
        let after = !phrase.ends_with(|c: char| c.is_alphanumeric())
            || lower[e..]
                .chars()
                .next()
                .is_none_or(|c| !c.is_alphanumeric());
        if before && after {
            return true;
        }
        from = s + phrase.chars().next().map_or(1, char::len_utf8);
    }
    false
}

fn has_any(lower: &str, phrases: &[&str]) -> bool {
    phrases.iter().any(|p| has_phrase(lower, p))
}

const RULE_PHRASES: &[&str] = &[
    "always",
    "never",
    "don't",
    "dont",
    "do not",
    "must",
    "mustn't",
    "make sure",
    "please keep",
    "keep it",
    "prefer",
    "avoid",
    "only use",
    "use only",
    "from now on",
    "going forward",
    "shouldn't",
    "should not",
    "ensure",
    "remember to",
    "be sure to",
    "stick to",
    "under no circumstances",
    "at all times",
    "refrain",
    "stop using",
    "not allowed",
    "forbidden",
    "important:",
    "rule:",
    "instead of",
];

const DECISION_STRONG: &[&str] = &[
    "decided",
    "decide to",
    "decision",
    "i'll use",
    "i will use",
    "we'll use",
    "we will use",
    "i'll go with",
    "going with",
    "go with",
    "instead of",
    "rather than",
    "chose",
    "chosen",
    "opted",
    "settled on",
    "switched to",
    "switching to",
    "root cause",
    "fixed by",
    "turns out",
    "turned out",
    "found that",
    "the problem is",
    "the problem was",
    "the issue is",
    "the issue was",
    "the bug is",
    "the bug was",
    "caused by",
    "comes from",
    "culprit",
    "to fix",
    "i'll fix",
    "the fix",
];

const DECISION_WEAK: &[&str] = &[
    "because",
    "so that",
    "which means",
    "this means",
    "the reason",
    "confirmed",
    "the approach",
    "the plan is",
];

const PENDING_PHRASES: &[&str] = &[
    "todo",
    "to-do",
    "next step",
    "next steps",
    "remaining",
    "still need",
    "still needs",
    "still have to",
    "still to do",
    "left to do",
    "not yet",
    "will need to",
    "follow-up",
    "follow up",
    "pending",
    "haven't yet",
    "outstanding",
    "afterwards",
    "next, i",
    "next i'll",
    "next, we",
    "then i'll",
    "later",
];

pub(super) fn is_rule(lower: &str) -> bool {
    has_any(lower, RULE_PHRASES)
}

pub(super) fn is_pending(lower: &str) -> bool {
    has_any(lower, PENDING_PHRASES)
}

/// `Some(true)` for a clear decision or finding, `Some(false)` for a weaker one.
pub(super) fn decision_strength(lower: &str) -> Option<bool> {
    if has_any(lower, DECISION_STRONG) {
        Some(true)
    } else if has_any(lower, DECISION_WEAK) {
        Some(false)
    } else {
        None
    }
}

// ---------------------------------------------------------------------------------------------
// Quoting
// ---------------------------------------------------------------------------------------------

pub(super) fn collapse(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Cut `s` to `max` characters, at a word boundary near the end when there is one, marking the
/// cut with `…`.
pub(super) fn clip(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        return s.to_string();
    }
    let cut = s.char_indices().nth(max).map_or(s.len(), |(i, _)| i);
    let mut head = &s[..cut];
    if let Some(sp) = head.rfind(' ') {
        if sp >= cut * 4 / 5 {
            head = &head[..sp];
        }
    }
    format!("{}…", head.trim_end())
}

pub(super) fn quote_raw(s: &str) -> String {
    format!("\"{s}\"")
}

/// `"text"`, whitespace collapsed and cut to `max` characters.
pub(super) fn quote(s: &str, max: usize) -> String {
    quote_raw(&clip(&collapse(s), max))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sentence_splitting_and_classes() {
        let s = sentences("- Always use tabs, e.g. in Makefiles. Never push to main!\n```\nnever in code\n```\n1. Prefer `anyhow` over `Box<dyn Error>`.");
        assert_eq!(
            s,
            vec![
                "Always use tabs, e.g. in Makefiles.",
                "Never push to main!",
                "Prefer `anyhow` over `Box<dyn Error>`."
            ]
        );
        assert!(is_rule(&normalize("Don\u{2019}t touch the lockfile.")));
        assert!(!is_rule("fix the bug in the parser."));
        assert!(!has_phrase("nevertheless it works", "never"));
        assert_eq!(
            decision_strength("it turns out the cache was stale."),
            Some(true)
        );
        assert_eq!(decision_strength("i read the file."), None);
    }
}

//! Prose handling: splitting text into sentences and clauses, normalizing for matching,
//! whole-word phrase matching, telling code-like tokens from prose words, polarity and withdrawal
//! marks of a clause, and quoting (whitespace collapsed, long quotes clipped at a word boundary).

use super::lexicon::{
    ABBREVIATIONS, CHANGE_PHRASES, CHANGE_WORDS, NEGATIONS, NEGATION_CONTRACTIONS, REFERRING_WORDS,
    WITHDRAWAL_PHRASES, WITHDRAWAL_VERBS, WITHDRAWAL_WORDS,
};

/// Sentences of prose: lines outside code fences, bullets stripped, split after `.`, `!` or `?`
/// followed by a space and a non-lowercase word (so "e.g. foo" stays whole).
pub(super) fn sentences(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut in_fence = false;
    for line in text.lines() {
        let t = line.trim();
        if is_fence(t) {
            in_fence = !in_fence;
            continue;
        }
        if in_fence || t.is_empty() {
            continue;
        }
        split_line(strip_bullet(t), &mut out);
    }
    out
}

pub(super) fn is_fence(t: &str) -> bool {
    t.starts_with("```") || t.starts_with("~~~")
}

/// Split one line of prose into sentences, appended to `out`.
pub(super) fn split_line(t: &str, out: &mut Vec<String>) {
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
        push_sentence(seg, out);
        start = end;
    }
    push_sentence(t[start..].trim(), out);
}

fn push_sentence(s: &str, out: &mut Vec<String>) {
    let s = collapse(s);
    if s.chars().any(char::is_alphanumeric) {
        out.push(s);
    }
}

pub(super) fn strip_bullet(t: &str) -> &str {
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
        || ABBREVIATIONS.contains(&last.as_str())
}

/// Clauses of a sentence: split at `,`, `;`, `:`, dashes and parentheses.
pub(super) fn clauses(s: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut start = 0;
    let b = s.as_bytes();
    let mut i = 0;
    while i < s.len() {
        let c = s[i..].chars().next().unwrap_or(' ');
        let w = c.len_utf8();
        let split = match c {
            ';' | '(' | ')' | '—' | '–' => true,
            // "a, b" and "a: b", not "1,000" or "a::b" or "http://".
            ',' | ':' => b.get(i + 1).is_none_or(|n| *n == b' '),
            '-' => i > 0 && b[i - 1] == b' ' && b.get(i + 1) == Some(&b' '),
            _ => false,
        };
        if split {
            out.push(s[start..i].trim());
            start = i + w;
        }
        i += w;
    }
    out.push(s[start..].trim());
    out.retain(|c| c.chars().any(char::is_alphanumeric));
    out
}

/// Lowercase with typographic apostrophes folded, for matching only.
pub(super) fn normalize(s: &str) -> String {
    s.to_lowercase().replace(['\u{2019}', '\u{2018}'], "'")
}

/// Whether `lower` contains `phrase` as whole words.
pub(super) fn has_phrase(lower: &str, phrase: &str) -> bool {
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

/// Lowercase words of prose (letters, digits and apostrophes).
pub(super) fn prose_words(lower: &str) -> impl Iterator<Item = &str> {
    lower
        .split(|c: char| !(c.is_alphanumeric() || c == '\''))
        .map(|w| w.trim_matches('\''))
        .filter(|w| !w.is_empty())
}

/// Whether a clause is negative: it holds a negation word or an `n't` contraction that does not
/// negate a take-back verb ("don't forget X" and "never skip X" insist on X: not negative).
pub(super) fn is_negative(clause: &str) -> bool {
    let lower = normalize(clause);
    let words: Vec<&str> = prose_words(&lower).collect();
    words.iter().enumerate().any(|(k, w)| {
        is_negation(w) && !words.get(k + 1).is_some_and(|next| is_take_back_verb(next))
    })
}

/// Whether a clause negates a take-back verb ("don't forget X", "never skip it").
pub(super) fn insists(clause: &str) -> bool {
    let lower = normalize(clause);
    let words: Vec<&str> = prose_words(&lower).collect();
    words
        .windows(2)
        .any(|w| is_negation(w[0]) && is_take_back_verb(w[1]))
}

fn is_take_back_verb(w: &str) -> bool {
    stems(w)
        .iter()
        .any(|s| WITHDRAWAL_VERBS.contains(&s.as_str()))
}

fn is_negation(w: &str) -> bool {
    w.ends_with("n't") || NEGATIONS.contains(&w) || NEGATION_CONTRACTIONS.contains(&w)
}

/// Whether a clause takes something back, replaces it or changes one's mind about it.
pub(super) fn is_withdrawal(clause: &str) -> bool {
    takes_back(clause) || {
        let lower = normalize(clause);
        CHANGE_PHRASES.iter().any(|p| has_phrase(&lower, p))
            || prose_words(&lower).any(|w| CHANGE_WORDS.contains(&w))
    }
}

/// Whether a clause takes something back (not only changes one's mind, which may also bring
/// something back). A take-back verb right after a negation insists instead ("don't forget X",
/// "never skip it").
pub(super) fn takes_back(clause: &str) -> bool {
    let lower = normalize(clause);
    if WITHDRAWAL_PHRASES.iter().any(|p| has_phrase(&lower, p)) {
        return true;
    }
    let words: Vec<&str> = prose_words(&lower).collect();
    words.iter().enumerate().any(|(k, w)| {
        let other = stems(w)
            .iter()
            .any(|s| WITHDRAWAL_WORDS.contains(&s.as_str()));
        other || (is_take_back_verb(w) && !(k > 0 && is_negation(words[k - 1])))
    })
}

/// Whether every clause of `text` that takes something back takes back an action it names
/// itself: the take-back marker is followed by `to` and an action none of whose words refers
/// back ("Anyway, go ahead, no need to wait for me."), so the sentence takes back nothing said
/// before. "No need to do that" and "no need" alone refer back.
pub(super) fn takes_back_own_action(text: &str) -> bool {
    let marked: Vec<&str> = clauses(text)
        .into_iter()
        .filter(|c| is_withdrawal(c))
        .collect();
    !marked.is_empty() && marked.iter().all(|c| own_action(c))
}

fn own_action(clause: &str) -> bool {
    let lower = normalize(clause);
    let words: Vec<&str> = prose_words(&lower).collect();
    let Some(end) = take_back_end(&words) else {
        return false;
    };
    words.get(end) == Some(&"to")
        && words.len() > end + 1
        && !words[end + 1..].iter().any(|w| REFERRING_WORDS.contains(w))
}

/// The index just after the first take-back marker among `words` (a phrase, a take-back word,
/// or a take-back verb not right after a negation), if any.
fn take_back_end(words: &[&str]) -> Option<usize> {
    for k in 0..words.len() {
        for p in WITHDRAWAL_PHRASES {
            let n = p.split(' ').count();
            if k + n <= words.len() && words[k..k + n].iter().copied().eq(p.split(' ')) {
                return Some(k + n);
            }
        }
        let w = words[k];
        let other = stems(w)
            .iter()
            .any(|s| WITHDRAWAL_WORDS.contains(&s.as_str()));
        if other || (is_take_back_verb(w) && !(k > 0 && is_negation(words[k - 1]))) {
            return Some(k + 1);
        }
    }
    None
}

/// Whether the lexicon's prose cue lists (negations, take-back words) are read. Switched off
/// only by the ablation run of the paraphrase test: then no clause is negative and none takes
/// anything back by its words, and withdrawals rest on structure alone.
#[derive(Debug, Clone, Copy)]
pub(super) struct Cues {
    pub on: bool,
}

impl Cues {
    pub fn negative(self, clause: &str) -> bool {
        self.on && is_negative(clause)
    }

    pub fn withdrawal(self, clause: &str) -> bool {
        self.on && is_withdrawal(clause)
    }

    pub fn takes_back(self, clause: &str) -> bool {
        self.on && takes_back(clause)
    }

    /// See [`takes_back_own_action`].
    pub fn own_action(self, text: &str) -> bool {
        self.on && takes_back_own_action(text)
    }

    /// A negated take-back verb: "don't forget X", "never skip X" insist on X.
    pub fn insists(self, clause: &str) -> bool {
        self.on && insists(clause)
    }
}

/// The word and its plausible stems: `scrapped` → `scrapp`, `scrap`; `ignored` → `ignor`,
/// `ignore`; `drops` → `drop`.
fn stems(w: &str) -> Vec<String> {
    let mut out = vec![w.to_string()];
    for suffix in ["ing", "ed", "es", "s", "d"] {
        if let Some(stem) = w.strip_suffix(suffix) {
            if stem.len() >= 3 {
                out.push(stem.to_string());
                out.push(format!("{stem}e"));
                let b = stem.as_bytes();
                if b.len() >= 2 && b[b.len() - 1] == b[b.len() - 2] {
                    out.push(stem[..stem.len() - 1].to_string());
                }
            }
        }
    }
    out
}

// ---------------------------------------------------------------------------------------------
// Tokens
// ---------------------------------------------------------------------------------------------

/// Whitespace-separated tokens with surrounding punctuation trimmed (and a possessive `'s`).
pub(super) fn tokens(s: &str) -> impl Iterator<Item = &str> {
    s.split_whitespace().filter_map(trim_token)
}

/// [`tokens`], each with whether it opens a sentence or a clause after a colon (the first
/// token, or one after a token ending in `.`, `!`, `?` or `:`), where any word is capitalized.
pub(super) fn tokens_at_start(s: &str) -> impl Iterator<Item = (bool, &str)> {
    let mut start = true;
    s.split_whitespace().filter_map(move |raw| {
        let at_start = start;
        start = raw.ends_with(['.', '!', '?', ':']);
        trim_token(raw).map(|t| (at_start, t))
    })
}

/// A token without the quotes, brackets and punctuation around it.
fn trim_marks(t: &str) -> &str {
    t.trim_start_matches(|c: char| "([{<\"'`*“‘".contains(c))
        .trim_end_matches(|c: char| ")]}>\"'`,.;:!?*”’".contains(c))
}

fn trim_token(raw: &str) -> Option<&str> {
    // Markdown strikethrough (`~~X~~,`) is markup around the token, as `*` and quotes are; a
    // single `~` is not (`~/.config`).
    let t = trim_marks(raw);
    let t = trim_marks(t.strip_prefix("~~").unwrap_or(t));
    let t = trim_marks(t.strip_suffix("~~").unwrap_or(t));
    let t = t
        .strip_suffix("'s")
        .or_else(|| t.strip_suffix("’s"))
        .unwrap_or(t);
    (t.chars().any(char::is_alphanumeric)).then_some(t)
}

/// Spans between backticks (single-line, at most 80 characters).
pub(super) fn backtick_spans(s: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut rest = s;
    while let Some(a) = rest.find('`') {
        let after = &rest[a + 1..];
        let Some(b) = after.find('`') else { break };
        let span = after[..b].trim();
        if !span.is_empty() && span.chars().count() <= 80 && !span.contains('\n') {
            out.push(span);
        }
        rest = &after[b + 1..];
    }
    out
}

/// Whether a (trimmed) token looks like code rather than a prose word: a path, an identifier
/// with `_`, `::`, `.` or `-` inside, a flag, a number of three digits or more, a word with
/// digits, or a mixed-case name (`BTreeMap`).
pub(super) fn is_code_like(t: &str) -> bool {
    let n = t.chars().count();
    if n < 3 || !t.chars().any(char::is_alphanumeric) {
        return false;
    }
    if ABBREVIATIONS.contains(&t.to_lowercase().as_str()) {
        return false;
    }
    let chars: Vec<char> = t.chars().collect();
    let inner = |k: usize| {
        k > 0
            && k + 1 < chars.len()
            && chars[k - 1].is_alphanumeric()
            && chars[k + 1].is_alphanumeric()
    };
    if t.contains(['/', '_', '\\', '=', '$', '@', '#', '<', '>', '(', '{', '[']) || t.contains("::")
    {
        return true;
    }
    if (0..chars.len()).any(|k| matches!(chars[k], '.' | '-') && inner(k)) {
        return true;
    }
    if t.starts_with('-')
        && chars
            .get(1)
            .is_some_and(|c| c.is_alphanumeric() || *c == '-')
    {
        return true;
    }
    let digits = chars.iter().filter(|c| c.is_ascii_digit()).count();
    let letters = chars.iter().filter(|c| c.is_alphabetic()).count();
    if digits > 0 && (letters > 0 || digits >= 3) {
        return true;
    }
    // Mixed case after the first letter: camelCase, PascalCase with a second capital.
    chars[1..].iter().any(|c| c.is_uppercase()) && chars.iter().any(|c| c.is_lowercase())
}

/// An all-caps word of three letters or more (`CSV`, `TODO`), or a capitalized word.
pub(super) fn is_capitalized(t: &str) -> bool {
    let mut cs = t.chars();
    let Some(first) = cs.next() else { return false };
    first.is_uppercase() && t.chars().count() >= 3 && t.chars().all(char::is_alphabetic)
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
    fn sentence_splitting() {
        let s = sentences("- Always use tabs, e.g. in Makefiles. Never push to main!\n```\nnever in code\n```\n1. Prefer `anyhow` over `Box<dyn Error>`.");
        assert_eq!(
            s,
            vec![
                "Always use tabs, e.g. in Makefiles.",
                "Never push to main!",
                "Prefer `anyhow` over `Box<dyn Error>`."
            ]
        );
        assert!(!has_phrase("nevertheless it works", "never"));
        assert_eq!(
            clauses("vendor/gen is off limits, ops owns it; see http://x (really)"),
            vec![
                "vendor/gen is off limits",
                "ops owns it",
                "see http://x",
                "really"
            ]
        );
    }

    #[test]
    fn tokens_and_code_likeness() {
        let toks: Vec<&str> =
            tokens("Run `make lint-x`, then (see src/a.rs). Redis's port: 6379!").collect();
        assert_eq!(
            toks,
            vec!["Run", "make", "lint-x", "then", "see", "src/a.rs", "Redis", "port", "6379"]
        );
        for code in [
            "src/a.rs", "lint-x", "6379", "BTreeMap", "E0425", "--force", "a::b", "v12", "x.y",
        ] {
            assert!(is_code_like(code), "{code}");
        }
        for prose in ["Redis", "port", "the", "e.g", "30", "it's", "v2"] {
            assert!(!is_code_like(prose), "{prose}");
        }
        assert_eq!(
            backtick_spans("run `cargo test` and `x`"),
            vec!["cargo test", "x"]
        );
    }

    #[test]
    fn polarity_and_withdrawal() {
        assert!(is_negative("Don\u{2019}t touch the lockfile"));
        assert!(is_negative("we shouldnt"));
        assert!(!is_negative("nothingness is fine"));
        assert!(is_withdrawal("we scrapped that"));
        assert!(is_withdrawal("ignoring the old plan"));
        assert!(is_withdrawal("that is no longer true"));
        assert!(!is_withdrawal("the dropdown menu"));
        // A negated take-back verb insists; a negated "anymore" still takes back.
        assert!(!is_withdrawal("dont forget the flag, is important"));
        assert!(!is_withdrawal("don\u{2019}t skip it"));
        assert!(is_withdrawal("forget the flag, don't bother"));
        assert!(is_withdrawal("not anymore"));
        // Negating a take-back verb insists: the clause is not negative.
        assert!(!is_negative("dont forget the flag"));
        assert!(!is_negative("and never skip tern_check"));
        assert!(is_negative("never skip it, don't add the flag"));
        assert!(insists("Don\u{2019}t forget the flag") && !insists("forget the flag"));
        // A change of mind is a withdrawal mark, but takes nothing back by itself.
        assert!(is_withdrawal("use kiln_queue instead") && !takes_back("use kiln_queue instead"));
        assert!(is_withdrawal("we need it after all") && !takes_back("we need it after all"));
        assert!(takes_back("drop it after all"));
        let off = Cues { on: false };
        assert!(!off.negative("never touch it") && !off.withdrawal("scrap that"));
        let on = Cues { on: true };
        assert!(on.negative("never touch it") && on.withdrawal("scrap that"));
    }
}

//! The model's answer: cleaned of wrappers, checked before anything is written, and (for a head
//! summarized in parts) parsed into its sections and merged with the sections carried from the
//! earlier parts.

use crate::tokens::count_text;

/// The sections a recipe asks for: its lines that start with `## `, in order. A recipe without
/// such lines requires none.
pub fn required_headings(recipe_body: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for line in recipe_body.lines() {
        if let Some(name) = line.strip_prefix("## ") {
            let h = format!("## {}", name.trim());
            if !out.iter().any(|o| key(o) == key(&h)) {
                out.push(h);
            }
        }
    }
    out
}

/// A heading's name for matching: without its `#`s, a trailing colon, bold marks or case.
fn key(heading: &str) -> String {
    heading
        .trim()
        .trim_start_matches('#')
        .trim()
        .trim_matches('*')
        .trim_end_matches(':')
        .trim()
        .to_lowercase()
}

/// Whether `line` is a Markdown heading (`#` to `####` and a space); its name when it is.
fn heading_of(line: &str) -> Option<&str> {
    let t = line.trim_end();
    let hashes = t.len() - t.trim_start_matches('#').len();
    if (1..=4).contains(&hashes) && t[hashes..].starts_with(' ') {
        Some(t)
    } else {
        None
    }
}

/// The answer without what models wrap a summary in: a code fence around all of it, a
/// `<summary>` element (what is outside it, an `<analysis>` for example, is dropped), and a
/// preamble line such as "Here is the summary:".
pub fn clean(text: &str) -> String {
    let mut s = text.trim().to_string();
    for _ in 0..3 {
        if let Some(inner) = inside_tag(&s, "summary") {
            s = inner.trim().to_string();
        }
        if let Some(inner) = inside_fence(&s) {
            s = inner.trim().to_string();
        }
        // A preamble line before the first heading.
        let first = s.lines().next().unwrap_or("");
        if is_preamble(first)
            && s.lines()
                .skip(1)
                .any(|l| heading_of(l).is_some() || l.starts_with("```"))
        {
            s = s[first.len()..].trim_start().to_string();
        }
    }
    s
}

fn inside_tag<'a>(s: &'a str, tag: &str) -> Option<&'a str> {
    let lower = s.to_ascii_lowercase();
    let open = format!("<{tag}>");
    let close = format!("</{tag}>");
    let i = lower.find(&open)? + open.len();
    let j = lower[i..].rfind(&close).map_or(s.len(), |j| i + j);
    Some(&s[i..j])
}

fn inside_fence(s: &str) -> Option<&str> {
    let rest = s.strip_prefix("```")?;
    let (lang, body) = rest.split_once('\n')?;
    if lang.contains(' ') || lang.len() > 12 {
        return None;
    }
    let body = body.trim_end().strip_suffix("```")?;
    // A fence inside would mean the answer is not one fenced block.
    (!body.lines().any(|l| l.trim_start().starts_with("```"))).then_some(body)
}

fn is_preamble(line: &str) -> bool {
    let l = line.trim().to_lowercase();
    if l.is_empty() || heading_of(line).is_some() || l.chars().count() > 160 {
        return false;
    }
    [
        "here is",
        "here's",
        "below is",
        "sure",
        "certainly",
        "okay",
        "ok,",
        "of course",
    ]
    .iter()
    .any(|p| l.starts_with(p))
        || l.ends_with(':')
}

/// A line that says a section has nothing (`None.`, `- none`, `(none)`, `N/A`).
fn is_placeholder(line: &str) -> bool {
    let l = line
        .trim()
        .trim_start_matches(['-', '*', ' '])
        .trim_matches(['(', ')', '.', '_', '*', ' '])
        .to_lowercase();
    // A line of punctuation only ("(", "-") is not "nothing": it is kept as written, so merging
    // an answer into itself gives it back.
    matches!(l.as_str(), "none" | "n/a" | "nothing" | "none yet")
}

/// The least content an answer must have, in tokens (heading lines and "None." lines not
/// counted): one token per 100 of the span it summarizes, at least 10 and at most 150, and never
/// more than a quarter of the answer's limit.
pub fn floor(span_tokens: usize, max_summary_tokens: u32) -> usize {
    (span_tokens / 100)
        .clamp(10, 150)
        .min(max_summary_tokens as usize / 4)
}

/// The tokens of an answer's content: its lines that are neither headings nor placeholders.
pub fn content_tokens(text: &str) -> usize {
    let body: Vec<&str> = text
        .lines()
        .filter(|l| heading_of(l).is_none() && !is_placeholder(l))
        .collect();
    count_text(&body.join("\n"))
}

/// Why a cleaned answer cannot be stored, if it cannot: a required section is missing, or it
/// has less content than `floor` tokens.
pub fn check(
    text: &str,
    required: &[String],
    floor: usize,
    span_tokens: usize,
) -> Result<(), String> {
    let present: Vec<String> = text.lines().filter_map(heading_of).map(key).collect();
    let missing: Vec<&str> = required
        .iter()
        .filter(|h| !present.contains(&key(h)))
        .map(String::as_str)
        .collect();
    if !missing.is_empty() {
        return Err(format!(
            "the answer lacks the required section{} {}",
            if missing.len() > 1 { "s" } else { "" },
            missing.join(", ")
        ));
    }
    let n = content_tokens(text);
    if n < floor {
        return Err(format!(
            "the answer has {n} tokens of content (headings and \"None.\" lines not counted) for {span_tokens} tokens of conversation; at least {floor} expected"
        ));
    }
    Ok(())
}

/// An answer's sections: the text before its first heading, then each heading and its items.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Sections {
    pub intro: Vec<String>,
    pub list: Vec<(String, Vec<String>)>,
}

/// The sections whose content a newer part replaces instead of adding to.
pub const LATEST_ONLY: &[&str] = &["## Where we stopped", "## Next step"];
/// The section that lists what was taken back.
pub const WITHDRAWN: &str = "## Withdrawn or superseded";

/// Split a section's lines into items: a fenced block is one item; a line indented or not
/// starting a list item continues the item before it.
fn items(lines: &[&str]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut fence = false;
    for l in lines {
        let is_fence = l.trim_start().starts_with("```");
        if fence {
            if let Some(last) = out.last_mut() {
                last.push('\n');
                last.push_str(l.trim_end());
            }
            fence = !is_fence;
            continue;
        }
        if l.trim().is_empty() {
            continue;
        }
        let indented = l.starts_with(' ') || l.starts_with('\t');
        match out.last_mut() {
            Some(last) if indented => {
                last.push('\n');
                last.push_str(l.trim_end());
            }
            _ => out.push(l.trim_end().to_string()),
        }
        fence = is_fence;
    }
    out
}

/// Parse an answer into [`Sections`].
pub fn parse(text: &str) -> Sections {
    let mut s = Sections::default();
    let mut cur: Vec<&str> = Vec::new();
    let mut name: Option<String> = None;
    let mut in_fence = false;
    let flush = |s: &mut Sections, name: &Option<String>, cur: &mut Vec<&str>| {
        let its = items(cur);
        cur.clear();
        match name {
            None => s.intro.extend(its),
            Some(n) => s.list.push((n.clone(), its)),
        }
    };
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            in_fence = !in_fence;
        }
        match heading_of(line) {
            Some(h) if !in_fence && h.starts_with("## ") => {
                flush(&mut s, &name, &mut cur);
                name = Some(format!("## {}", h[3..].trim()));
            }
            _ => cur.push(line),
        }
    }
    flush(&mut s, &name, &mut cur);
    s
}

fn norm(item: &str) -> String {
    item.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The words of an item that make it recognizable when it is quoted elsewhere: the item without
/// its list mark and quotes, lowercased, whitespace collapsed.
fn gist(item: &str) -> String {
    norm(item)
        .trim_start_matches(['-', '*', '+', ' '])
        .trim_matches(['"', '“', '”', '\'', '`', ' '])
        .to_lowercase()
}

impl Sections {
    fn find(&mut self, heading: &str) -> Option<&mut Vec<String>> {
        self.list
            .iter_mut()
            .find(|(h, _)| key(h) == key(heading))
            .map(|(_, v)| v)
    }

    /// Merge a newer part's answer: its new items are appended to their sections (exact
    /// duplicates, whitespace aside, dropped; a section new so far is added at the end), the
    /// [`LATEST_ONLY`] sections take the newer content when it has any, and an item of another
    /// section that the newer answer quotes under [`WITHDRAWN`] leaves that section (it stays
    /// listed as withdrawn).
    pub fn merge(&mut self, newer: Sections) {
        let withdrawn: String = newer
            .list
            .iter()
            .filter(|(h, _)| key(h) == key(WITHDRAWN))
            .flat_map(|(_, v)| v.iter())
            .map(|i| gist(i))
            .collect::<Vec<_>>()
            .join("\n");
        if !withdrawn.is_empty() {
            for (h, v) in &mut self.list {
                if key(h) == key(WITHDRAWN) {
                    continue;
                }
                v.retain(|i| {
                    let g = gist(i);
                    g.chars().count() < 12 || !withdrawn.contains(&g)
                });
            }
        }
        add_items(&mut self.intro, newer.intro);
        for (h, new_items) in newer.list {
            let new_items: Vec<String> = new_items
                .into_iter()
                .filter(|i| !is_placeholder(i))
                .collect();
            let latest = LATEST_ONLY.iter().any(|l| key(l) == key(&h));
            match self.find(&h) {
                Some(v) if latest => {
                    if !new_items.is_empty() {
                        *v = new_items;
                    }
                }
                Some(v) => {
                    v.retain(|i| !is_placeholder(i));
                    add_items(v, new_items);
                }
                None => self.list.push((h, new_items)),
            }
        }
    }

    /// The sections as Markdown: the intro, then the `order`ed headings present, then the
    /// others in the order met; a section with nothing says "None.".
    pub fn render(&self, order: &[String]) -> String {
        let mut out = String::new();
        for i in &self.intro {
            out.push_str(i);
            out.push('\n');
        }
        let mut done = vec![false; self.list.len()];
        let emit = |out: &mut String, (h, v): &(String, Vec<String>)| {
            if !out.is_empty() {
                out.push('\n');
            }
            out.push_str(h);
            out.push('\n');
            if v.is_empty() {
                out.push_str("None.\n");
            }
            for i in v {
                out.push_str(i);
                out.push('\n');
            }
        };
        for o in order {
            if let Some(k) = self.list.iter().position(|(h, _)| key(h) == key(o)) {
                emit(&mut out, &self.list[k]);
                done[k] = true;
            }
        }
        for (k, s) in self.list.iter().enumerate() {
            if !done[k] {
                emit(&mut out, s);
            }
        }
        out.trim_end().to_string()
    }
}

fn add_items(to: &mut Vec<String>, new: Vec<String>) {
    for i in new {
        let n = norm(&i);
        if !to.iter().any(|t| norm(t) == n) {
            to.push(i);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// Whatever a model answers, cleaning, checking, parsing and merging never panic, and
        /// merging an answer into itself changes nothing once it is rendered.
        #[test]
        fn any_answer_is_handled(text in "(\\PC{0,20}|```|## [a-z]{1,6}|<summary>|</summary>|\n){0,40}") {
            let c = clean(&text);
            let _ = check(&c, &["## a".to_string()], 10, 1000);
            let once = parse(&c);
            let mut twice = once.clone();
            twice.merge(parse(&c));
            let mut again = parse(&once.render(&[]));
            again.merge(parse(&once.render(&[])));
            prop_assert_eq!(again.render(&[]), parse(&once.render(&[])).render(&[]));
        }
    }

    #[test]
    fn wrappers_are_stripped() {
        let body = "## A\nx\n## B\ny";
        for wrapped in [
            format!("<summary>\n{body}\n</summary>"),
            format!("```markdown\n{body}\n```"),
            format!("Here is the summary:\n\n{body}"),
            format!("<analysis>thinking</analysis>\n<summary>{body}</summary>"),
            format!("Sure! Here's the handoff summary:\n```\n{body}\n```"),
        ] {
            assert_eq!(clean(&wrapped), body, "{wrapped}");
        }
        assert_eq!(clean("<summary>ok</summary>"), "ok");
    }

    #[test]
    fn headings_come_from_the_recipe_lines() {
        let r = "Intro `## Not this`\n## One\ntext\n## Two:\n";
        assert_eq!(required_headings(r), vec!["## One", "## Two:"]);
        assert!(required_headings("Summarize it.").is_empty());
        let req = required_headings(r);
        assert!(check("## one\nsome words here\n## Two\nmore", &req, 3, 0).is_ok());
        let e = check("## One\nsome words here", &req, 3, 0).unwrap_err();
        assert!(e.contains("## Two"), "{e}");
        let e = check("## One\nNone.\n## Two\n- none", &req, 3, 900).unwrap_err();
        assert!(e.contains("0 tokens of content"), "{e}");
    }

    #[test]
    fn floor_scales_with_the_span() {
        assert_eq!(floor(25_639, 8000), 150);
        assert_eq!(floor(3_000, 8000), 30);
        assert_eq!(floor(100, 8000), 10);
        assert_eq!(floor(25_639, 200), 50);
    }

    #[test]
    fn merge_keeps_earlier_items_and_takes_the_latest_stop() {
        let mut a = parse("## Facts\n- port 8443 is fixed\n- uses sqlite\n## Where we stopped\nediting a.rs\n## Pending\nNone.");
        a.merge(parse("## Facts\n- uses  sqlite\n- new fact\n## Where we stopped\nediting b.rs\n## Pending\n- write docs\n## Extra\nz"));
        assert_eq!(
            a.render(&["## Pending".into()]),
            "## Pending\n- write docs\n\n## Facts\n- port 8443 is fixed\n- uses sqlite\n- new fact\n\n## Where we stopped\nediting b.rs\n\n## Extra\nz"
        );
    }

    #[test]
    fn merge_moves_a_withdrawn_item_out_of_live_sections() {
        let mut a = parse("## User requests and instructions\n- \"run make lint-sedge before committing\"\n## Withdrawn or superseded\nNone.");
        a.merge(parse("## User requests and instructions\n- \"run make check instead\"\n## Withdrawn or superseded\n- \"run make lint-sedge before committing\" was replaced by make check"));
        let r = a.render(&[]);
        let live = r.split("## Withdrawn").next().unwrap();
        assert!(!live.contains("lint-sedge"), "{r}");
        assert!(live.contains("make check"), "{r}");
        assert!(r
            .split("## Withdrawn")
            .nth(1)
            .unwrap()
            .contains("lint-sedge"));
    }

    #[test]
    fn code_blocks_are_one_item() {
        let s = parse("## Files\n- a.rs:\n  ```rust\n  }\n  ```\n- b.rs:\n  ```rust\n  }\n  ```");
        assert_eq!(s.list[0].1.len(), 2, "{s:?}");
        let mut t = s.clone();
        t.merge(s.clone());
        assert_eq!(t, s);
    }
}

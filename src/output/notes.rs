//! The numbered notes under a table. Rows whose reasons are the same sentence share one note,
//! numbers included or not: `[1] 58 conversations: not worth it: compacting would save only
//! 2–4% of its tokens (1,210–9,876 → …)`. Where the numbers differ between rows, the note gives
//! each one's range (`min–max`); where they agree, the number itself. On a terminal a note is
//! wrapped at its width under a hanging indent; piped, it stays on one line.

/// The notes of one table, in the order they were first referred to.
#[derive(Debug, Default)]
pub struct Notes {
    notes: Vec<Note>,
}

#[derive(Debug)]
struct Note {
    /// The text with each number replaced by [`SLOT`].
    template: String,
    /// The numbers of each text referring to this note, in order of appearance.
    numbers: Vec<Vec<String>>,
}

/// Where a number stood in a note's template (a character reasons never contain).
const SLOT: char = '\u{0}';

impl Notes {
    /// The number of the note for `text` (1-based): a note already holding the same sentence
    /// (numbers aside) counts one more referrer; otherwise a new note.
    pub fn add(&mut self, text: &str) -> usize {
        let (template, numbers) = split_numbers(text);
        match self.notes.iter().position(|n| n.template == template) {
            Some(i) => {
                self.notes[i].numbers.push(numbers);
                i + 1
            }
            None => {
                self.notes.push(Note {
                    template,
                    numbers: vec![numbers],
                });
                self.notes.len()
            }
        }
    }

    /// The notes as lines: `[N] text`, with `K <subject>: ` before the text when K > 1 rows
    /// refer to it; wrapped at `width` with a hanging indent when given.
    pub fn render(&self, subject: &str, width: Option<u16>) -> String {
        let mut s = String::new();
        for (i, n) in self.notes.iter().enumerate() {
            let head = format!("[{}] ", i + 1);
            let count = n.numbers.len();
            let text = if count > 1 {
                format!("{count} {subject}: {}", n.text())
            } else {
                n.text()
            };
            match width {
                Some(w) => {
                    let indent = " ".repeat(head.chars().count());
                    let opts = textwrap::Options::new(usize::from(w).max(head.len() + 10))
                        .initial_indent(&head)
                        .subsequent_indent(&indent);
                    for line in textwrap::wrap(&text, opts) {
                        s.push_str(line.trim_end());
                        s.push('\n');
                    }
                }
                None => {
                    s.push_str(&head);
                    s.push_str(&text);
                    s.push('\n');
                }
            }
        }
        s
    }
}

impl Note {
    /// The template with each slot filled: the number when every referrer has the same one,
    /// else `min–max`.
    fn text(&self) -> String {
        let mut slot = 0;
        let mut out = String::new();
        for ch in self.template.chars() {
            if ch != SLOT {
                out.push(ch);
                continue;
            }
            let values: Vec<&String> = self.numbers.iter().map(|ns| &ns[slot]).collect();
            slot += 1;
            let value = |s: &str| s.replace(',', "").parse::<f64>().unwrap_or(0.0);
            let min = values
                .iter()
                .min_by(|a, b| value(a).total_cmp(&value(b)))
                .expect("a note has a referrer");
            let max = values
                .iter()
                .max_by(|a, b| value(a).total_cmp(&value(b)))
                .expect("a note has a referrer");
            if values.iter().all(|v| v == min) {
                out.push_str(min);
            } else {
                out.push_str(&format!("{min}–{max}"));
            }
        }
        out
    }
}

/// `text` with its numbers taken out: the template (a [`SLOT`] where each stood) and the
/// numbers as written. A number is a run of digits, with `,` thousands groups and a `.`
/// fraction, standing alone: not part of a word, an ID or a hyphenated name (`2d7af506`,
/// `gpt-4o`, `v1`).
fn split_numbers(text: &str) -> (String, Vec<String>) {
    let chars: Vec<char> = text.chars().collect();
    let word = |c: char| c.is_alphanumeric() || c == '_' || c == '-';
    let mut template = String::new();
    let mut numbers = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let starts = c.is_ascii_digit() && (i == 0 || !word(chars[i - 1]));
        if !starts {
            template.push(c);
            i += 1;
            continue;
        }
        let end = number_end(&chars, i);
        if end < chars.len() && word(chars[end]) {
            // Part of a word: copy the whole word as it is.
            let mut j = i;
            while j < chars.len() && word(chars[j]) {
                template.push(chars[j]);
                j += 1;
            }
            i = j;
            continue;
        }
        template.push(SLOT);
        numbers.push(chars[i..end].iter().collect());
        i = end;
    }
    (template, numbers)
}

/// The end of the number starting at `start`: digits, `,ddd` groups, one `.ddd` fraction.
fn number_end(chars: &[char], start: usize) -> usize {
    let digits = |mut j: usize| {
        while j < chars.len() && chars[j].is_ascii_digit() {
            j += 1;
        }
        j
    };
    let mut end = digits(start);
    while chars.get(end) == Some(&',') && digits(end + 1) == end + 4 {
        end += 4;
    }
    if chars.get(end) == Some(&'.') && chars.get(end + 1).is_some_and(|c| c.is_ascii_digit()) {
        end = digits(end + 1);
    }
    end
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_are_found_standing_alone_only() {
        let (t, n) = split_numbers("save 3% (1,234 → 12.5) of gpt-4o at 2d7af506, v1 or 40.");
        assert_eq!(n, ["3", "1,234", "12.5", "40"]);
        assert_eq!(t, "save \0% (\0 → \0) of gpt-4o at 2d7af506, v1 or \0.");
    }

    #[test]
    fn the_same_sentence_shares_a_note_with_ranges() {
        let mut notes = Notes::default();
        assert_eq!(notes.add("saves 3% (1,200 → 1,164), under 10%"), 1);
        assert_eq!(notes.add("another reason"), 2);
        assert_eq!(notes.add("saves 1% (9,000 → 8,910), under 10%"), 1);
        assert_eq!(notes.add("saves 2% (950 → 931), under 10%"), 1);
        assert_eq!(
            notes.render("conversations", None),
            "[1] 3 conversations: saves 1–3% (950–9,000 → 931–8,910), under 10%\n\
             [2] another reason\n"
        );
    }

    #[test]
    fn identical_reasons_are_counted() {
        let mut notes = Notes::default();
        for _ in 0..58 {
            assert_eq!(
                notes.add("no window known (give --context-limit 200000)"),
                1
            );
        }
        assert_eq!(
            notes.render("conversations", None),
            "[1] 58 conversations: no window known (give --context-limit 200000)\n"
        );
    }

    #[test]
    fn wrapped_under_a_hanging_indent() {
        let mut notes = Notes::default();
        for _ in 0..12 {
            notes.add("a reason long enough that it cannot fit on one line of a narrow terminal");
        }
        let s = notes.render("conversations", Some(40));
        let lines: Vec<&str> = s.lines().collect();
        assert!(lines.len() > 1, "{s}");
        assert!(lines[0].starts_with("[1] 12 conversations: "), "{s}");
        for l in &lines {
            assert!(l.chars().count() <= 40, "{s}");
        }
        for l in &lines[1..] {
            assert!(l.starts_with("    ") && !l.starts_with("     "), "{s}");
        }
    }
}

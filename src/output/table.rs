//! Tables: fitted to the terminal on a TTY (one line per row, long names cut with `…`,
//! low-priority columns dropped when even the cut table does not fit; drawn by comfy-table),
//! plain aligned columns without box drawing when piped. IDs are never cut: callers pass the
//! shortest unique prefix on a terminal and the full ID otherwise. Long reasons go to numbered
//! notes under the table ([`Notes`]).

use super::notes::Notes;
use comfy_table::{
    Attribute, Cell, CellAlignment, Color, ColumnConstraint, ContentArrangement, Row, Table,
};

/// How a column behaves when the table does not fit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Never cut (IDs, numbers, short words).
    Fixed,
    /// Right-aligned, never cut.
    Num,
    /// May be cut with `…` down to a few characters (names, reasons).
    Cut,
    /// May be cut from the front (`…sonnet-4-6`, `…/.kodelet/storage.db`): for values whose end
    /// tells them apart (models, paths).
    CutFront,
}

/// One column: header, kind, and priority (higher is dropped later on a narrow terminal).
#[derive(Debug, Clone, Copy)]
pub struct Col {
    pub header: &'static str,
    pub kind: Kind,
    pub priority: u8,
    /// The least a cut column keeps before lower-priority columns are dropped (0: a few
    /// characters).
    pub min: usize,
}

pub const fn col(header: &'static str, kind: Kind, priority: u8) -> Col {
    Col {
        header,
        kind,
        priority,
        min: 0,
    }
}

impl Col {
    /// This column, kept at least `min` characters wide while lower-priority ones can go.
    pub const fn min(self, min: usize) -> Col {
        Col { min, ..self }
    }
}

/// A colour hint for a cell; only used when colour is on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tone {
    Plain,
    Good,
    Warn,
    Bad,
    Dim,
}

/// Where and how a table is drawn.
#[derive(Debug, Clone, Copy)]
pub struct Style {
    /// `Some(width)` on a terminal, `None` when piped.
    pub width: Option<u16>,
    pub color: bool,
}

/// A table under construction, with numbered notes.
#[derive(Clone)]
pub struct Grid {
    cols: Vec<Col>,
    rows: Vec<Vec<(String, Tone)>>,
    /// The text of each note reference a cell holds (a [`mark`] in its text), in the order
    /// they were made. Notes are numbered when the table is drawn, from the references in the
    /// cells shown: a note whose column is dropped on a narrow terminal is not printed.
    refs: Vec<String>,
    /// What the rows are, for a note shared by several (`58 conversations: …`).
    subject: &'static str,
    /// Columns that, on a terminal, collapse into a line under the table when every row holds
    /// the same value (`provider: anthropic (all rows)`).
    collapsible: Vec<&'static str>,
}

/// Shortest width a cut column keeps.
const MIN_CUT: usize = 8;

impl Grid {
    pub fn new(cols: &[Col]) -> Grid {
        Grid {
            cols: cols.to_vec(),
            rows: Vec::new(),
            refs: Vec::new(),
            subject: "rows",
            collapsible: Vec::new(),
        }
    }

    /// On a terminal, show each of these columns as one line under the table instead (`header:
    /// value (all rows)`) when it holds the same value on every row (two rows or more), so the
    /// room goes to the columns that differ. Piped output keeps every column.
    pub fn collapse_constant(&mut self, headers: &[&'static str]) {
        self.collapsible.extend_from_slice(headers);
    }

    /// The collapsible columns that hold one value on every row (two rows or more).
    fn constant_cols(&self) -> Vec<usize> {
        if self.rows.len() < 2 {
            return Vec::new();
        }
        (0..self.cols.len())
            .filter(|&i| self.collapsible.contains(&self.cols[i].header))
            .filter(|&i| {
                let first = &self.rows[0][i].0;
                !first.is_empty() && self.rows.iter().all(|r| &r[i].0 == first)
            })
            .collect()
    }

    /// This grid with only the columns `keep` (indices, in order).
    fn project(&self, keep: &[usize]) -> Grid {
        Grid {
            cols: keep.iter().map(|&i| self.cols[i]).collect(),
            rows: self
                .rows
                .iter()
                .map(|r| keep.iter().map(|&i| r[i].clone()).collect())
                .collect(),
            refs: Vec::new(),
            subject: self.subject,
            collapsible: Vec::new(),
        }
    }

    /// The notes referred to from the cells of the columns `shown`, numbered in the order they
    /// are met (row by row, left to right), and each reference's number.
    fn numbered(&self, shown: &[bool]) -> (Notes, std::collections::HashMap<usize, usize>) {
        let mut notes = Notes::default();
        let mut number = std::collections::HashMap::new();
        for r in &self.rows {
            for (i, (text, _)) in r.iter().enumerate() {
                if shown[i] {
                    for k in marks(text) {
                        number.insert(k, notes.add(&self.refs[k]));
                    }
                }
            }
        }
        (notes, number)
    }

    /// This grid with each note reference replaced by its number.
    fn resolved(&self, number: &std::collections::HashMap<usize, usize>) -> Grid {
        let mut g = self.clone();
        g.refs.clear();
        for r in &mut g.rows {
            for (text, _) in r.iter_mut() {
                if text.contains(MARK_OPEN) {
                    *text = resolve(text, number);
                }
            }
        }
        g
    }

    pub fn row(&mut self, cells: Vec<(String, Tone)>) {
        self.rows.push(cells);
    }

    /// What a row is, in a note several rows share (`58 conversations: …`); `rows` unless set.
    pub fn subject(&mut self, subject: &'static str) {
        self.subject = subject;
    }

    /// A reference to the note for `text`, to put in a cell (`format!("skipped [{}]", …)`): it
    /// becomes the note's number when the table is drawn. Texts that are the same sentence,
    /// numbers aside, share one note (see [`Notes`]).
    pub fn note(&mut self, text: &str) -> String {
        self.refs.push(text.to_string());
        format!("{MARK_OPEN}{}{MARK_CLOSE}", self.refs.len() - 1)
    }

    pub fn render(&self, style: Style) -> String {
        let all = vec![true; self.cols.len()];
        let Some(w) = style.width else {
            let (notes, number) = self.numbered(&all);
            let mut s = self.resolved(&number).plain(style.color);
            s.push_str(&notes.render(self.subject, None));
            return s;
        };
        // The layout is decided with every note numbered (numbers only get smaller after).
        let (_, number) = self.numbered(&all);
        let full = self.resolved(&number);
        let constant = full.constant_cols();
        let rest: Vec<usize> = (0..self.cols.len())
            .filter(|i| !constant.contains(i))
            .collect();
        let shown_rest = full.project(&rest).visible(w as usize);
        // Notes only for what is on screen: the shown columns and the collapsed lines.
        let mut on_screen = vec![false; self.cols.len()];
        for &i in &constant {
            on_screen[i] = true;
        }
        for (pos, &i) in rest.iter().enumerate() {
            on_screen[i] = shown_rest[pos];
        }
        let (notes, number) = self.numbered(&on_screen);
        let g = self.resolved(&number);
        let mut s = g
            .project(&rest)
            .fitted_shown(w as usize, style.color, &shown_rest);
        for &i in &constant {
            let header = self.cols[i].header.to_lowercase();
            s.push_str(&format!("{header}: {} (all rows)\n", g.rows[0][i].0));
        }
        s.push_str(&notes.render(self.subject, style.width));
        s
    }

    /// Which columns are shown at `width`: drop the lowest priority ones until the narrowest
    /// possible table fits.
    fn visible(&self, width: usize) -> Vec<bool> {
        let mut shown = vec![true; self.cols.len()];
        loop {
            let need: usize = self
                .cols
                .iter()
                .enumerate()
                .filter(|(i, _)| shown[*i])
                .map(|(i, c)| self.min_width(i, c) + 2)
                .sum();
            if need <= width {
                return shown;
            }
            let drop = self
                .cols
                .iter()
                .enumerate()
                .filter(|(i, c)| shown[*i] && c.priority > 0)
                .min_by_key(|(i, c)| (c.priority, usize::MAX - i));
            match drop {
                Some((i, _)) => shown[i] = false,
                None => return shown,
            }
        }
    }

    fn natural(&self, i: usize) -> usize {
        self.rows
            .iter()
            .map(|r| text_width(&r[i].0))
            .chain(std::iter::once(self.cols[i].header.chars().count()))
            .max()
            .unwrap_or(0)
    }

    fn min_width(&self, i: usize, c: &Col) -> usize {
        let natural = self.natural(i);
        match c.kind {
            Kind::Cut | Kind::CutFront => {
                natural.min(MIN_CUT.max(c.header.chars().count()).max(c.min))
            }
            _ => natural,
        }
    }

    /// Column widths at `width`: natural widths, then the cut columns give up characters, the
    /// least important (then the widest) first, down to their minimum.
    fn allocate(&self, shown: &[bool], width: usize) -> Vec<usize> {
        let mut w: Vec<usize> = (0..self.cols.len()).map(|i| self.natural(i)).collect();
        let idx: Vec<usize> = (0..self.cols.len()).filter(|i| shown[*i]).collect();
        let seps = 2 * idx.len().saturating_sub(1);
        let mut total: usize = idx.iter().map(|&i| w[i]).sum::<usize>() + seps;
        while total > width {
            let widest = idx
                .iter()
                .copied()
                .filter(|&i| {
                    matches!(self.cols[i].kind, Kind::Cut | Kind::CutFront)
                        && w[i] > self.min_width(i, &self.cols[i])
                })
                .max_by_key(|&i| (u8::MAX - self.cols[i].priority, w[i], usize::MAX - i));
            match widest {
                Some(i) => {
                    w[i] -= 1;
                    total -= 1;
                }
                None => break,
            }
        }
        w
    }

    fn fitted_shown(&self, width: usize, color: bool, shown: &[bool]) -> String {
        let shown = shown.to_vec();
        let widths = self.allocate(&shown, width);
        let idx: Vec<usize> = (0..self.cols.len()).filter(|i| shown[*i]).collect();
        let mut t = Table::new();
        // Only a line under the header: no vertical lines, no outer border. Cells arrive cut to
        // their width, so comfy-table never wraps.
        t.load_preset("     ─             ");
        t.set_content_arrangement(ContentArrangement::Disabled);
        if color {
            t.enforce_styling();
        } else {
            t.force_no_tty();
        }
        t.set_header(idx.iter().map(|&i| {
            let c = Cell::new(self.cols[i].header);
            if color {
                c.add_attribute(Attribute::Bold)
            } else {
                c
            }
        }));
        for r in &self.rows {
            let mut row = Row::from(idx.iter().map(|&i| {
                let (text, tone) = &r[i];
                let text = match self.cols[i].kind {
                    Kind::CutFront => cut_front(&one_line(text), widths[i]),
                    _ => cut(&one_line(text), widths[i]),
                };
                let c = Cell::new(text);
                match (color, tone_color(*tone)) {
                    (true, Some(col)) => c.fg(col),
                    _ => c,
                }
            }));
            row.max_height(1);
            t.add_row(row);
        }
        for (pos, &i) in idx.iter().enumerate() {
            if let Some(column) = t.column_mut(pos) {
                let last = pos + 1 == idx.len();
                column.set_padding((0, if last { 0 } else { 2 }));
                column.set_constraint(ColumnConstraint::Absolute(comfy_table::Width::Fixed(
                    (widths[i] + if last { 0 } else { 2 }) as u16,
                )));
                if self.cols[i].kind == Kind::Num {
                    column.set_cell_alignment(CellAlignment::Right);
                }
            }
        }
        let mut s = String::new();
        for line in t.lines() {
            s.push_str(line.trim_end());
            s.push('\n');
        }
        s
    }

    fn plain(&self, color: bool) -> String {
        let widths: Vec<usize> = (0..self.cols.len()).map(|i| self.natural(i)).collect();
        let header: Vec<(String, Tone)> = self
            .cols
            .iter()
            .map(|c| (c.header.to_string(), Tone::Plain))
            .collect();
        let mut s = String::new();
        for (n, r) in std::iter::once(&header).chain(&self.rows).enumerate() {
            let mut line = String::new();
            for (i, (text, tone)) in r.iter().enumerate() {
                let text = one_line(text);
                let pad = widths[i].saturating_sub(text_width(&text));
                let last = i + 1 == r.len();
                let cell = if n == 0 && color {
                    paint(&text, "1")
                } else {
                    paint_tone(&text, *tone, color)
                };
                if i > 0 {
                    line.push_str("  ");
                }
                if self.cols[i].kind == Kind::Num {
                    line.push_str(&" ".repeat(pad));
                    line.push_str(&cell);
                } else {
                    line.push_str(&cell);
                    if !last {
                        line.push_str(&" ".repeat(pad));
                    }
                }
            }
            s.push_str(line.trim_end());
            s.push('\n');
        }
        s
    }
}

/// A simple table of text columns (numeric ones right-aligned), none dropped on a narrow
/// terminal; see [`Grid::add_row`] and its `Display`.
pub fn new(headers: &[&'static str], numeric: &[usize]) -> Grid {
    let cols: Vec<Col> = headers
        .iter()
        .enumerate()
        .map(|(i, h)| {
            let kind = if numeric.contains(&i) {
                Kind::Num
            } else {
                Kind::Cut
            };
            col(h, kind, 0)
        })
        .collect();
    Grid::new(&cols)
}

impl Grid {
    /// A row of plain cells.
    pub fn add_row(&mut self, cells: Vec<String>) {
        self.row(cells.into_iter().map(c).collect());
    }
}

/// Rendered for stdout without colour: fitted on a terminal, plain when piped.
impl std::fmt::Display for Grid {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        use std::io::IsTerminal;
        let style = Style {
            width: std::io::stdout().is_terminal().then(super::term_width),
            color: false,
        };
        f.write_str(self.render(style).trim_end_matches('\n'))
    }
}

/// Where a note reference starts and ends in a cell's text (private-use characters no text
/// holds).
const MARK_OPEN: char = '\u{E000}';
const MARK_CLOSE: char = '\u{E001}';

/// The note references in `text`, in order.
fn marks(text: &str) -> Vec<usize> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(a) = rest.find(MARK_OPEN) {
        let after = &rest[a + MARK_OPEN.len_utf8()..];
        let Some(b) = after.find(MARK_CLOSE) else {
            break;
        };
        if let Ok(k) = after[..b].parse() {
            out.push(k);
        }
        rest = &after[b + MARK_CLOSE.len_utf8()..];
    }
    out
}

/// `text` with each note reference replaced by its number.
fn resolve(text: &str, number: &std::collections::HashMap<usize, usize>) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(a) = rest.find(MARK_OPEN) {
        out.push_str(&rest[..a]);
        let after = &rest[a + MARK_OPEN.len_utf8()..];
        let Some(b) = after.find(MARK_CLOSE) else {
            rest = after;
            break;
        };
        let n = after[..b].parse().ok().and_then(|k| number.get(&k));
        if let Some(n) = n {
            out.push_str(&n.to_string());
        }
        rest = &after[b + MARK_CLOSE.len_utf8()..];
    }
    out.push_str(rest);
    out
}

fn one_line(s: &str) -> String {
    if s.contains(['\n', '\r', '\t']) {
        s.split_whitespace().collect::<Vec<_>>().join(" ")
    } else {
        s.to_string()
    }
}

/// `s` cut to `w` characters, the last one `…` when cut.
fn cut(s: &str, w: usize) -> String {
    if text_width(s) <= w {
        s.to_string()
    } else {
        let mut t: String = s.chars().take(w.saturating_sub(1)).collect();
        t.push('…');
        t
    }
}

/// `s` cut to `w` characters from the front, the first one `…` when cut: whole leading parts
/// (up to a `/`, `-` or `_`) go first, so the part that tells values apart stays readable
/// (`anthropic/claude-haiku-4-5` → `…haiku-4-5`, `claude-sonnet-4-6` → `…sonnet-4-6`).
fn cut_front(s: &str, w: usize) -> String {
    if text_width(s) <= w {
        return s.to_string();
    }
    let mut rest = s;
    while text_width(rest) + 1 > w {
        match rest.find(['/', '-', '_']) {
            Some(i) if i + 1 < rest.len() => rest = &rest[i + 1..],
            _ => {
                let n = text_width(rest);
                let mut t = String::from("…");
                t.extend(rest.chars().skip(n + 1 - w.max(1)));
                return t;
            }
        }
    }
    format!("…{rest}")
}

fn text_width(s: &str) -> usize {
    s.chars().count()
}

fn tone_color(t: Tone) -> Option<Color> {
    match t {
        Tone::Plain => None,
        Tone::Good => Some(Color::Green),
        Tone::Warn => Some(Color::Yellow),
        Tone::Bad => Some(Color::Red),
        Tone::Dim => Some(Color::DarkGrey),
    }
}

/// `s` in an SGR colour.
pub fn paint(s: &str, sgr: &str) -> String {
    format!("\x1b[{sgr}m{s}\x1b[0m")
}

fn paint_tone(s: &str, t: Tone, color: bool) -> String {
    let code = match t {
        Tone::Plain => return s.to_string(),
        Tone::Good => "32",
        Tone::Warn => "33",
        Tone::Bad => "31",
        Tone::Dim => "90",
    };
    if color {
        paint(s, code)
    } else {
        s.to_string()
    }
}

/// A plain cell.
pub fn c(s: impl Into<String>) -> (String, Tone) {
    (s.into(), Tone::Plain)
}

/// A utilization ratio as the tables show it: `38%` (0.38). Every table uses this one style;
/// JSON keeps the ratio as a number.
pub fn percent(ratio: f64) -> String {
    agent_db::util::percent(ratio)
}

/// `12,345`
pub fn thousands(n: usize) -> String {
    agent_db::util::thousands(n)
}

/// Tokens with a `~` when estimated.
pub fn tokens(n: usize, exact: bool) -> String {
    if exact {
        thousands(n)
    } else {
        format!("~{}", thousands(n))
    }
}

/// Cut `s` to `max` characters with an ellipsis.
pub fn ellipsize(s: &str, max: usize) -> String {
    let collapsed: String = s.split_whitespace().collect::<Vec<_>>().join(" ");
    if collapsed.chars().count() <= max {
        collapsed
    } else {
        let mut t: String = collapsed.chars().take(max.saturating_sub(1)).collect();
        t.push('…');
        t
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn grid() -> Grid {
        let mut g = Grid::new(&[
            col("ID", Kind::Fixed, 0),
            col("NAME", Kind::Cut, 5),
            col("N", Kind::Num, 3),
            col("EXTRA", Kind::Fixed, 1),
        ]);
        g.row(vec![
            c("abcdef12"),
            c("a rather long conversation name that will not fit"),
            c("12,345"),
            c("something"),
        ]);
        g.row(vec![c("0123abcd"), c("short"), c("7"), c("x")]);
        g
    }

    #[test]
    fn fitted_lines_never_exceed_the_width_and_keep_ids() {
        for w in [30u16, 40, 60, 80, 120] {
            let s = grid().render(Style {
                width: Some(w),
                color: false,
            });
            for line in s.lines() {
                assert!(line.chars().count() <= w as usize, "{w}: {line:?}\n{s}");
            }
            assert!(s.contains("abcdef12") && s.contains("0123abcd"), "{s}");
            assert_eq!(s.lines().count(), 4, "header, rule, two rows:\n{s}");
        }
        let narrow = grid().render(Style {
            width: Some(30),
            color: false,
        });
        assert!(
            !narrow.contains("EXTRA"),
            "lowest priority dropped:\n{narrow}"
        );
        assert!(narrow.contains('…'), "name cut:\n{narrow}");
    }

    #[test]
    fn plain_is_aligned_and_one_line_per_row() {
        let mut g = grid();
        let a = g.note("a long reason");
        let b = g.note("a long reason");
        g.rows[0][3].0 = format!("x [{a}]");
        g.rows[1][3].0 = format!("y [{b}]");
        let s = g.render(Style {
            width: None,
            color: false,
        });
        let lines: Vec<&str> = s.lines().collect();
        assert_eq!(lines.len(), 4);
        assert!(!s.contains('─') && !s.contains('│'));
        assert!(lines[1].contains("a rather long conversation name that will not fit"));
        // Numbers are right-aligned: both end at the same column.
        let end = |l: &str, pat: &str| l.find(pat).unwrap() + pat.len();
        assert_eq!(end(lines[1], "12,345"), end(lines[2], " 7"));
        assert_eq!(lines[3], "[1] 2 rows: a long reason");
        assert!(!s.contains('\x1b'));
        let colored = grid().render(Style {
            width: None,
            color: true,
        });
        assert!(colored.contains("\x1b[1mID\x1b[0m"));
    }

    #[test]
    fn cut_from_the_front_keeps_the_distinguishing_part() {
        assert_eq!(cut_front("claude-sonnet-4-6", 12), "…sonnet-4-6");
        assert_eq!(cut_front("anthropic/claude-haiku-4-5", 12), "…haiku-4-5");
        assert_eq!(cut_front("gpt-4.1-mini", 12), "gpt-4.1-mini");
        assert_eq!(
            cut_front("~/.local/share/agent/agent.db", 18),
            "…agent/agent.db"
        );
        assert_eq!(cut_front("abcdefghijklmnop", 8), "…jklmnop");
        for w in 2..30 {
            assert!(text_width(&cut_front("anthropic/claude-haiku-4-5", w)) <= w);
        }
    }

    #[test]
    fn thousands_groups() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(1234567), "1,234,567");
    }
}

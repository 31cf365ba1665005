//! comfy-table helpers: a plain, terminal-fitting table style.

use comfy_table::{presets, Cell, CellAlignment, ContentArrangement, Table};

/// A new table with `headers`; numeric columns (by index) are right-aligned.
pub fn new(headers: &[&str], numeric: &[usize]) -> Table {
    let mut t = Table::new();
    t.load_preset(presets::UTF8_BORDERS_ONLY);
    t.set_content_arrangement(ContentArrangement::Dynamic);
    if let Some(w) = super::term_width() {
        t.set_width(w);
    }
    t.set_header(headers.iter().map(Cell::new));
    for &i in numeric {
        if let Some(c) = t.column_mut(i) {
            c.set_cell_alignment(CellAlignment::Right);
        }
    }
    t
}

/// `12,345`
pub fn thousands(n: usize) -> String {
    let s = n.to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
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

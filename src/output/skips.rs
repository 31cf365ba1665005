//! Conversations the selection skipped, summarized by reason: one line per reason
//! (`116 skipped: no context window known — give --context-limit N`), or with `--verbose` one
//! line per conversation under its reason. Reasons keep the order they were first seen in.

use super::Ids;

#[derive(Default)]
pub struct Skips {
    groups: Vec<(&'static str, Vec<(String, String)>)>,
}

impl Skips {
    /// Count one skipped conversation under `summary`, with its own `why`.
    pub fn add(&mut self, summary: &'static str, id: &str, why: &str) {
        let i = match self.groups.iter().position(|(s, _)| *s == summary) {
            Some(i) => i,
            None => {
                self.groups.push((summary, Vec::new()));
                self.groups.len() - 1
            }
        };
        self.groups[i].1.push((id.to_string(), why.to_string()));
    }

    /// The lines: one per reason, and with `verbose` every conversation (its ID as `ids` shows
    /// it, and its own reason) under its reason's line; without, a pointer to `--verbose`.
    pub fn lines(&self, verbose: bool, ids: &Ids) -> Vec<String> {
        let mut out = Vec::new();
        for (summary, list) in &self.groups {
            out.push(format!(
                "{} skipped: {summary}",
                super::table::thousands(list.len())
            ));
            if verbose {
                for (id, why) in list {
                    out.push(format!("  {}: {why}", ids.show(id)));
                }
            }
        }
        if !verbose && !out.is_empty() {
            out.push("(--verbose lists the skipped conversations)".into());
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_line_per_reason_in_first_seen_order() {
        let mut s = Skips::default();
        s.add("b", "id1", "why 1");
        s.add("a", "id2", "why 2");
        s.add("b", "id3", "why 3");
        assert_eq!(
            s.lines(false, &Ids::full()),
            [
                "2 skipped: b",
                "1 skipped: a",
                "(--verbose lists the skipped conversations)"
            ]
        );
        assert_eq!(
            s.lines(true, &Ids::full()),
            [
                "2 skipped: b",
                "  id1: why 1",
                "  id3: why 3",
                "1 skipped: a",
                "  id2: why 2"
            ]
        );
    }
}

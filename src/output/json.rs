//! JSON on stdout (docs/json-output.md): every document opens with the same envelope,
//! `{"version": 1, "command": NAME, …}`. Whole documents are pretty-printed ([`print`]); the
//! long listings of `list` and `compact` are streamed row by row ([`Stream`], [`CompactReport`])
//! so memory stays flat however many conversations they cover.

use std::collections::BTreeMap;
use std::io::Write;

use agent_db::report::{Row, Status, Totals};
use serde_json::{Map, Value};

/// The JSON contract's version.
pub const VERSION: u32 = 1;

/// `list --json`'s version: 2 since `conversations` holds the selected conversations only
/// (skipped ones moved to `skipped`, unreadable ones to `failed`).
pub const LIST_VERSION: u32 = 2;

/// The envelope of `command` followed by `fields` (an object; its keys keep their order).
pub fn envelope(command: &str, fields: Value) -> Value {
    let mut doc = Map::new();
    doc.insert("version".into(), VERSION.into());
    doc.insert("command".into(), command.into());
    if let Value::Object(rest) = fields {
        doc.extend(rest);
    }
    Value::Object(doc)
}

/// Print [`envelope`]`(command, fields)`, pretty, with a final newline.
pub fn print(command: &str, fields: Value) -> std::io::Result<()> {
    let doc = envelope(command, fields);
    super::out(&format!(
        "{}\n",
        serde_json::to_string_pretty(&doc).unwrap_or_default()
    ))
}

/// How a streamed array is laid out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layout {
    /// `[a,b]` on one line (`list`).
    Compact,
    /// One element per line: `[\na,\nb\n]` (`compact`).
    Lines,
}

/// A document whose last-but-one member is an array written element by element:
/// `{"version":1,"command":C,<head…>,"<array>":[…]<,tail…>}` and a newline.
pub struct Stream<W: Write> {
    out: W,
    layout: Layout,
    first: bool,
}

impl<W: Write> Stream<W> {
    /// Write the envelope, the `head` members and the array's opening bracket.
    pub fn start(
        out: W,
        command: &str,
        head: &[(&str, Value)],
        array: &str,
        layout: Layout,
    ) -> std::io::Result<Stream<W>> {
        Stream::start_versioned(out, VERSION, command, head, array, layout)
    }

    /// [`Stream::start`] of a document at its own `version` (`list` is at [`LIST_VERSION`]).
    pub fn start_versioned(
        mut out: W,
        version: u32,
        command: &str,
        head: &[(&str, Value)],
        array: &str,
        layout: Layout,
    ) -> std::io::Result<Stream<W>> {
        let mut text = format!("{{\"version\":{version},\"command\":{}", quoted(command));
        for (k, v) in head {
            text.push_str(&format!(",{}:{}", quoted(k), compact(v)));
        }
        text.push_str(&format!(",{}:[", quoted(array)));
        out.write_all(text.as_bytes())?;
        Ok(Stream {
            out,
            layout,
            first: true,
        })
    }

    /// Append one element, already serialized.
    pub fn item(&mut self, json: &str) -> std::io::Result<()> {
        self.item_bytes(json.as_bytes())
    }

    /// [`Stream::item`] of serialized bytes.
    pub fn item_bytes(&mut self, json: &[u8]) -> std::io::Result<()> {
        let sep = match (self.layout, self.first) {
            (Layout::Compact, true) => "",
            (Layout::Compact, false) => ",",
            (Layout::Lines, true) => "\n",
            (Layout::Lines, false) => ",\n",
        };
        self.first = false;
        self.out.write_all(sep.as_bytes())?;
        self.out.write_all(json)
    }

    pub fn flush(&mut self) -> std::io::Result<()> {
        self.out.flush()
    }

    /// Close the array, write the `tail` members, close the document.
    pub fn finish(mut self, tail: &[(&str, Value)]) -> std::io::Result<()> {
        let mut text = String::from(match self.layout {
            Layout::Compact => "]",
            Layout::Lines => "\n]",
        });
        for (k, v) in tail {
            text.push_str(&format!(",{}:{}", quoted(k), compact(v)));
        }
        text.push_str("}\n");
        self.out.write_all(text.as_bytes())?;
        self.out.flush()
    }
}

fn quoted(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_default()
}

fn compact(v: &Value) -> String {
    serde_json::to_string(v).unwrap_or_default()
}

/// The `compact --json` document, written as it goes: rows come back out of order (several
/// conversations are in flight) and are written in selection order as soon as every earlier row
/// is done.
pub struct CompactReport {
    stream: Stream<std::io::BufWriter<std::io::Stdout>>,
    next: usize,
    pending: BTreeMap<usize, Row>,
}

impl CompactReport {
    pub fn start(path: &std::path::Path, kind: &str, dry_run: bool) -> std::io::Result<Self> {
        Self::start_as("compact", path, kind, dry_run)
    }

    /// The same document for another command (`apply`).
    pub fn start_as(
        command: &str,
        path: &std::path::Path,
        kind: &str,
        dry_run: bool,
    ) -> std::io::Result<Self> {
        let out = std::io::BufWriter::new(std::io::stdout());
        let store = serde_json::json!({"path": path.display().to_string(), "kind": kind});
        let head = [("dry_run", Value::Bool(dry_run)), ("store", store)];
        Ok(CompactReport {
            stream: Stream::start(out, command, &head, "conversations", Layout::Lines)?,
            next: 1,
            pending: BTreeMap::new(),
        })
    }

    /// Queue row `seq` (1-based, in selection order); write every row whose turn has come. A
    /// skipped or failed row's reason is its `note` too (as the table's note gives it) when it
    /// has no note of its own.
    pub fn row(&mut self, seq: usize, row: &Row) -> std::io::Result<()> {
        let mut row = row.clone();
        if row.note.is_none() {
            row.note = match &row.status {
                Status::Skipped(why) | Status::Failed(why) => Some(why.clone()),
                Status::NotStarted(n) => Some(n.to_string()),
                Status::Planned | Status::Compacted => None,
            };
        }
        self.pending.insert(seq, row);
        while let Some(r) = self.pending.remove(&self.next) {
            self.stream
                .item(&serde_json::to_string(&r).unwrap_or_default())?;
            self.next += 1;
        }
        self.stream.flush()
    }

    pub fn finish(self, totals: &Totals) -> std::io::Result<()> {
        let totals = serde_json::to_value(totals).unwrap_or_default();
        self.stream.finish(&[("totals", totals)])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn streamed(layout: Layout, items: &[&str]) -> String {
        let mut buf = Vec::new();
        let head = [(
            "store",
            serde_json::json!({"path": "/a \"b\"", "kind": "an-agent"}),
        )];
        let mut s = Stream::start(&mut buf, "list", &head, "conversations", layout).unwrap();
        for i in items {
            s.item(i).unwrap();
        }
        s.finish(&[("totals", serde_json::json!({"n": 2}))])
            .unwrap();
        String::from_utf8(buf).unwrap()
    }

    #[test]
    fn streams_are_the_documented_bytes() {
        assert_eq!(
            streamed(Layout::Compact, &["1", "2"]),
            "{\"version\":1,\"command\":\"list\",\"store\":{\"path\":\"/a \\\"b\\\"\",\"kind\":\"an-agent\"},\"conversations\":[1,2],\"totals\":{\"n\":2}}\n"
        );
        assert_eq!(
            streamed(Layout::Lines, &["1", "2"]),
            "{\"version\":1,\"command\":\"list\",\"store\":{\"path\":\"/a \\\"b\\\"\",\"kind\":\"an-agent\"},\"conversations\":[\n1,\n2\n],\"totals\":{\"n\":2}}\n"
        );
        assert!(streamed(Layout::Lines, &[]).contains("\"conversations\":[\n],"));
        let v: Value = serde_json::from_str(&streamed(Layout::Lines, &["{}"])).unwrap();
        assert_eq!(v["store"]["path"], "/a \"b\"");
    }

    #[test]
    fn the_envelope_comes_first() {
        let doc = envelope(
            "history",
            serde_json::json!({"compactions": [], "b": 1, "a": 2}),
        );
        let text = serde_json::to_string(&doc).unwrap();
        assert_eq!(
            text,
            "{\"version\":1,\"command\":\"history\",\"compactions\":[],\"b\":1,\"a\":2}"
        );
    }
}

//! kodelet's `conversations.compaction_history` (migration `20260920120000`; the type
//! `CompactionHistory` of `pkg/types/conversations/compaction.go`, docs/stores.md "Compaction
//! history"): the display archive kodelet keeps beside the model input.
//!
//! ```json
//! {"segments":[{"rawMessages":[…],"marker":{"id":…,"method":"summary","summary":…,"createdAt":…}}],
//!  "activeDisplayStart":1}
//! ```
//!
//! kodelet shows every segment's `rawMessages` (each followed by its marker), then
//! `raw_messages[activeDisplayStart:]`; the first `activeDisplayStart` items of `raw_messages` are
//! the replacement it installed (its summary), sent to the model but not shown. Every save checks
//! `0 <= activeDisplayStart <= len(raw_messages)` and fails otherwise ("invalid compaction display
//! boundary"), so a rewrite of `raw_messages` must move the boundary with it.
//!
//! agent-db's compaction is filed the way kodelet files its own (`ArchiveCompactionLocked`): the
//! visible messages it replaces become a new segment, with a marker holding the summary, and the
//! boundary becomes the number of replacement items at the head of the new `raw_messages`. The
//! display therefore still shows the whole history, with a marker where agent-db compacted.

use serde_json::value::RawValue;

use crate::message::{go_escape, go_escape_into};

/// A stored `compaction_history`, as kodelet decodes it.
#[derive(Debug)]
pub struct History<'a> {
    /// The segments, as stored (each one JSON object).
    pub segments: Vec<&'a RawValue>,
    /// `activeDisplayStart`.
    pub start: usize,
}

#[derive(serde::Deserialize)]
struct Stored<'a> {
    #[serde(borrow, default)]
    segments: Option<Vec<&'a RawValue>>,
    #[serde(rename = "activeDisplayStart", default)]
    active_display_start: i64,
}

#[derive(serde::Deserialize)]
struct Segment<'a> {
    #[serde(rename = "rawMessages", borrow, default)]
    raw_messages: Option<&'a RawValue>,
}

/// Decode a stored value: `None` for SQL NULL or JSON `null` (kodelet's nil history, written by
/// a kodelet that never compacted the conversation), an error for anything kodelet cannot load.
pub fn parse(cell: Option<&str>) -> Result<Option<History<'_>>, String> {
    let Some(text) = cell else { return Ok(None) };
    if text.trim() == "null" {
        return Ok(None);
    }
    let stored: Stored<'_> = serde_json::from_str(text)
        .map_err(|e| format!("compaction_history is not what kodelet reads ({e})"))?;
    let start = usize::try_from(stored.active_display_start).map_err(|_| {
        format!(
            "compaction_history's activeDisplayStart is {} (kodelet refuses to save it: invalid compaction display boundary)",
            stored.active_display_start
        )
    })?;
    Ok(Some(History {
        segments: stored.segments.unwrap_or_default(),
        start,
    }))
}

/// kodelet's Responses loader (`loadConversation`, `pkg/llm/openai/responses/thread.go`) refuses a
/// conversation whose `activeDisplayStart` is past the items left once trailing `function_call`
/// items are cleaned (`cleanedStoredInputItems`): "invalid Responses compaction display boundary
/// after cleanup of incomplete tool calls". `Err` says why, for `raw_messages` and `start`.
pub fn responses_boundary(raw_messages: &str, start: usize) -> Result<(), String> {
    #[derive(serde::Deserialize)]
    struct Item<'a> {
        #[serde(rename = "type", borrow, default)]
        kind: Option<std::borrow::Cow<'a, str>>,
    }
    let items: Vec<Item<'_>> = serde_json::from_str(raw_messages)
        .map_err(|e| format!("raw_messages is not a list of Responses items ({e})"))?;
    let mut left = items.len();
    while left > 0 && items[left - 1].kind.as_deref() == Some("function_call") {
        left -= 1;
    }
    if start > left {
        return Err(format!(
            "compaction_history's activeDisplayStart {start} is past the {left} items left once trailing \
             function_call items are cleaned; kodelet's Responses loader refuses this conversation"
        ));
    }
    Ok(())
}

/// Whether kodelet loads the row with its Responses thread (`provider` `openai-responses`, or
/// `openai` with `metadata.api_mode` `responses`).
pub fn is_responses(provider: &str, metadata: Option<&str>) -> bool {
    let api_mode = || {
        metadata
            .and_then(|m| serde_json::from_str::<serde_json::Value>(m).ok())
            .and_then(|v| {
                v.get("api_mode")
                    .and_then(|a| a.as_str().map(str::to_string))
            })
    };
    provider == "openai-responses"
        || (provider == "openai" && api_mode().as_deref() == Some("responses"))
}

/// A segment's `rawMessages` text (`[]` when it has none).
pub fn segment_messages(segment: &RawValue) -> Option<&str> {
    serde_json::from_str::<Segment<'_>>(segment.get())
        .ok()?
        .raw_messages
        .map(RawValue::get)
}

/// The marker of agent-db's compaction, in the field order of kodelet's `CompactionMarker`
/// (`id`, `method`, `summary` when not empty, `createdAt`).
pub struct Marker<'a> {
    pub id: &'a str,
    pub summary: &'a str,
    /// RFC 3339 UTC with nanoseconds, trailing zeros trimmed (Go's `time.Time` JSON form).
    pub created_at: &'a str,
}

impl Marker<'_> {
    fn to_json(&self) -> String {
        let s = |v: &str| go_escape(&serde_json::Value::from(v).to_string());
        let mut out = format!("{{\"id\":{},\"method\":\"summary\"", s(self.id));
        if !self.summary.is_empty() {
            out.push_str(&format!(",\"summary\":{}", s(self.summary)));
        }
        out.push_str(&format!(",\"createdAt\":{}}}", s(self.created_at)));
        out
    }
}

/// The new `compaction_history` and boundary after a compaction.
#[derive(Debug, Clone, PartialEq)]
pub struct Appended {
    /// The whole new value, as kodelet marshals it.
    pub json: String,
    /// The new `activeDisplayStart`.
    pub start: usize,
    /// The first segment's `rawMessages`: where it is in `json` (the new segment, when it is the
    /// only one), or its own copy (an earlier segment's).
    first: First,
    /// The number of `"role"` substrings in every segment's `rawMessages`.
    pub segment_roles: i64,
}

/// Where [`Appended::first_segment`] is.
#[derive(Debug, Clone, PartialEq)]
enum First {
    InJson(std::ops::Range<usize>),
    Own(String),
}

impl Appended {
    /// The first segment's `rawMessages` (for `first_message`).
    pub fn first_segment(&self) -> &str {
        match &self.first {
            First::InJson(r) => &self.json[r.clone()],
            First::Own(s) => s,
        }
    }
}

/// File a compaction in the history, as kodelet's own compaction does.
///
/// `loaded` are the items of `raw_messages` the compaction was planned on, `tail_start` the first
/// one kept verbatim, `new_len` the number of items in the new `raw_messages` (whose head,
/// `new_len - (loaded.len() - tail_start)` items, replaces `loaded[..tail_start]`).
///
/// The new segment holds the replaced items that were on display (`loaded[start..tail_start]`);
/// kept items that kodelet hid (its earlier replacement, when the cut falls inside it) stay hidden.
pub fn append(
    old: Option<&History<'_>>,
    loaded: &[&RawValue],
    tail_start: usize,
    new_len: usize,
    marker: &Marker<'_>,
) -> Result<Appended, String> {
    let n = loaded.len();
    let start = old.map_or(0, |h| h.start);
    if start > n {
        return Err(format!(
            "compaction_history's activeDisplayStart {start} is past the {n} messages (kodelet refuses to save it: invalid compaction display boundary)"
        ));
    }
    let kept = n.checked_sub(tail_start).ok_or("the cut is past the end")?;
    let head = new_len
        .checked_sub(kept)
        .ok_or("the new history is shorter than its kept tail")?;
    let new_start = head + start.saturating_sub(tail_start);
    let replaced = &loaded[start.min(tail_start)..tail_start];
    let marker = marker.to_json();
    // `{"segments":[OLD...,NEW],"activeDisplayStart":N}`, built in one buffer: the replaced
    // items are most of it, and are copied once.
    let old_segments = old.map_or(&[][..], |h| &h.segments[..]);
    let size = old_segments
        .iter()
        .map(|s| s.get().len() + 1)
        .sum::<usize>()
        + replaced.iter().map(|m| m.get().len() + 1).sum::<usize>()
        + marker.len()
        + 80;
    let mut json = String::with_capacity(size);
    json.push_str("{\"segments\":[");
    let mut roles = 0;
    let mut first = None;
    for (i, s) in old_segments.iter().enumerate() {
        go_compact_into(s.get(), &mut json);
        json.push(',');
        let msgs = segment_messages_text(s);
        roles += count_roles(&msgs);
        if i == 0 {
            first = Some(First::Own(msgs));
        }
    }
    json.push_str("{\"rawMessages\":");
    let at = json.len();
    go_compact_array_into(replaced, &mut json);
    let messages = at..json.len();
    roles += count_roles(&json[messages.clone()]);
    json.push_str(",\"marker\":");
    json.push_str(&marker);
    json.push_str("}],\"activeDisplayStart\":");
    json.push_str(&new_start.to_string());
    json.push('}');
    Ok(Appended {
        json,
        start: new_start,
        first: first.unwrap_or(First::InJson(messages)),
        segment_roles: roles,
    })
}

/// A stored segment's `rawMessages`, as Go marshals it again (compact).
fn segment_messages_text(segment: &RawValue) -> String {
    segment_messages(segment)
        .map(go_compact)
        .unwrap_or_else(|| "null".to_string())
}

/// `strings.Count(s, "\"role\"")`.
pub fn count_roles(s: &str) -> i64 {
    memchr::memmem::find_iter(s.as_bytes(), b"\"role\"").count() as i64
}

/// `json.Marshal` of a `[]json.RawMessage`: each item compacted, HTML-escaped.
fn go_compact_array_into(items: &[&RawValue], out: &mut String) {
    out.push('[');
    for (i, item) in items.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        go_compact_into(item.get(), out);
    }
    out.push(']');
}

/// What Go's `json.Marshal` makes of a `json.RawMessage`: insignificant whitespace removed and
/// `<`, `>`, `&`, U+2028 and U+2029 escaped inside strings; every other byte kept.
pub fn go_compact(json: &str) -> String {
    let mut out = String::with_capacity(json.len());
    go_compact_into(json, &mut out);
    out
}

/// [`go_compact`] of `json`, appended to `out`.
fn go_compact_into(json: &str, out: &mut String) {
    // What kodelet stored went through `json.Marshal`: most items have no whitespace to drop,
    // which one pass over the bytes tells without building anything.
    let mut dropped = outside_whitespace(json.as_bytes()).peekable();
    if dropped.peek().is_none() {
        return go_escape_into(json, out);
    }
    // The runs between the dropped bytes, copied whole.
    let mut compact = String::with_capacity(json.len());
    let mut run = 0;
    for i in dropped {
        compact.push_str(&json[run..i]);
        run = i + 1;
    }
    compact.push_str(&json[run..]);
    go_escape_into(&compact, out)
}

/// Where `json` has whitespace outside strings (what Go's compaction drops). A string is
/// skipped from quote to quote with `memchr`, stepping over each escaped byte. The bytes that
/// decide it are ASCII, so they are never part of a longer character.
fn outside_whitespace(json: &[u8]) -> OutsideWhitespace<'_> {
    OutsideWhitespace { json, pos: 0 }
}

/// Iterator of [`outside_whitespace`].
struct OutsideWhitespace<'a> {
    json: &'a [u8],
    pos: usize,
}

impl Iterator for OutsideWhitespace<'_> {
    type Item = usize;

    fn next(&mut self) -> Option<usize> {
        let b = self.json;
        while let Some(&c) = b.get(self.pos) {
            let i = self.pos;
            self.pos = i + 1;
            match c {
                b'"' => loop {
                    // The rest of the text is inside an unterminated string: nothing to drop.
                    let Some(k) = b
                        .get(self.pos..)
                        .and_then(|r| memchr::memchr2(b'"', b'\\', r))
                    else {
                        self.pos = b.len();
                        return None;
                    };
                    let at = self.pos + k;
                    if b[at] == b'"' {
                        self.pos = at + 1;
                        break;
                    }
                    self.pos = at + 2;
                },
                b' ' | b'\t' | b'\n' | b'\r' => return Some(i),
                _ => {}
            }
        }
        None
    }
}

/// A marker id: 32 hex digits in the 8-4-4-4-12 form (version 4 layout), from the conversation,
/// the instant and the summary, so two compactions never share one.
pub fn marker_id(conversation: &str, created_at: &str, summary: &str) -> String {
    let h = crate::util::sha256_hex(&format!("{conversation}\n{created_at}\n{summary}"));
    format!(
        "{}-{}-4{}-{}{}-{}",
        &h[0..8],
        &h[8..12],
        &h[13..16],
        // variant 10xx
        ["8", "9", "a", "b"][usize::from(h.as_bytes()[16] % 4)],
        &h[17..20],
        &h[20..32]
    )
}

/// Go's `time.Time` JSON form of an instant in UTC (RFC 3339, nanoseconds with trailing zeros
/// trimmed).
pub fn go_time_json(t: &chrono::DateTime<chrono::FixedOffset>) -> String {
    let utc = t.with_timezone(&chrono::Utc);
    let nanos = utc.timestamp_subsec_nanos();
    let frac = if nanos == 0 {
        String::new()
    } else {
        format!(".{}", format!("{nanos:09}").trim_end_matches('0'))
    };
    format!("{}{frac}Z", utc.format("%Y-%m-%dT%H:%M:%S"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `go_compact` by its definition: the characters a pass keeps (all but whitespace outside
    /// strings), then Go's HTML escaping, a character at a time.
    fn go_compact_by_definition(json: &str) -> String {
        let (mut out, mut in_string, mut escaped) = (String::new(), false, false);
        for c in json.chars() {
            if in_string {
                if escaped {
                    escaped = false;
                } else if c == '\\' {
                    escaped = true;
                } else if c == '"' {
                    in_string = false;
                }
                out.push(c);
            } else if c == '"' {
                in_string = true;
                out.push(c);
            } else if !matches!(c, ' ' | '\t' | '\n' | '\r') {
                out.push(c);
            }
        }
        let mut escaped_out = String::new();
        for c in out.chars() {
            match c {
                '<' => escaped_out.push_str("\\u003c"),
                '>' => escaped_out.push_str("\\u003e"),
                '&' => escaped_out.push_str("\\u0026"),
                '\u{2028}' => escaped_out.push_str("\\u2028"),
                '\u{2029}' => escaped_out.push_str("\\u2029"),
                c => escaped_out.push(c),
            }
        }
        escaped_out
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(1024))]

        /// Roles are counted as `strings.Count` does (non-overlapping, left to right), with
        /// quotes shared between neighbours.
        #[test]
        fn roles_count_as_strings_count(pieces in proptest::collection::vec(0usize..5, 0..30)) {
            const PIECES: [&str; 5] = ["\"role\"", "role", "\"", "x", "\"role"];
            let s: String = pieces.iter().map(|&k| PIECES[k]).collect();
            proptest::prop_assert_eq!(count_roles(&s), s.matches("\"role\"").count() as i64);
        }

        /// `go_compact`, which returns most items as they are after one quick look, answers as
        /// its definition does: on compact items and on items with whitespace in and out of
        /// strings, escapes, the characters Go escapes, and characters whose UTF-8 starts like
        /// U+2028's.
        #[test]
        fn go_compact_is_its_definition(
            pieces in proptest::collection::vec(0usize..20, 0..40),
        ) {
            const PIECES: [&str; 20] = [
                "{", "}", "[", "]", "\"", "\\", " ", "\t", "\n", "\r", ":", ",", "ab", "<",
                ">", "&", "\u{2028}", "\u{2029}", "\u{2027}", "\u{20AC}é",
            ];
            let json: String = pieces.iter().map(|&k| PIECES[k]).collect();
            proptest::prop_assert_eq!(go_compact(&json), go_compact_by_definition(&json));
        }
    }

    #[test]
    fn the_responses_boundary_counts_items_left_after_trailing_calls_go() {
        let raw = r#"[{"type":"message","role":"user"},{"type":"function_call","call_id":"a"},{"type":"function_call","call_id":"b"}]"#;
        assert!(responses_boundary(raw, 1).is_ok());
        assert!(responses_boundary(raw, 2).is_err());
        let answered =
            r#"[{"type":"message"},{"type":"function_call"},{"type":"function_call_output"}]"#;
        assert!(responses_boundary(answered, 3).is_ok());
        assert!(is_responses("openai", Some(r#"{"api_mode":"responses"}"#)));
        assert!(is_responses("openai-responses", None));
        assert!(!is_responses(
            "openai",
            Some(r#"{"api_mode":"chat_completions"}"#)
        ));
    }

    fn items(json: &str) -> Vec<&RawValue> {
        serde_json::from_str(json).unwrap()
    }

    const MARK: Marker<'static> = Marker {
        id: "m1",
        summary: "sum <x>",
        created_at: "2026-11-26T12:00:00Z",
    };

    #[test]
    fn null_and_absent_are_no_history() {
        assert!(parse(None).unwrap().is_none());
        assert!(parse(Some("null")).unwrap().is_none());
        assert!(parse(Some("{")).is_err());
        assert!(parse(Some(r#"{"segments":null,"activeDisplayStart":-1}"#)).is_err());
        let h = parse(Some(
            r#"{"segments":[{"rawMessages":[],"marker":{}}],"activeDisplayStart":2}"#,
        ))
        .unwrap()
        .unwrap();
        assert_eq!((h.segments.len(), h.start), (1, 2));
    }

    #[test]
    fn first_compaction_files_the_replaced_head() {
        let loaded = items(
            r#"[{"role":"user","content":"a"}, {"role":"assistant","content":"b"},{"role":"user","content":"c"}]"#,
        );
        // summary + tail of 1: new_len 2.
        let a = append(None, &loaded, 2, 2, &MARK).unwrap();
        assert_eq!(a.start, 1);
        assert_eq!(
            a.json,
            r#"{"segments":[{"rawMessages":[{"role":"user","content":"a"},{"role":"assistant","content":"b"}],"marker":{"id":"m1","method":"summary","summary":"sum \u003cx\u003e","createdAt":"2026-11-26T12:00:00Z"}}],"activeDisplayStart":1}"#
        );
        assert_eq!(a.segment_roles, 2);
        // The first segment is the new one: its rawMessages, read from the new value.
        assert_eq!(
            a.first_segment(),
            r#"[{"role":"user","content":"a"},{"role":"assistant","content":"b"}]"#
        );
    }

    #[test]
    fn after_kodelet_compacted_the_replacement_is_not_filed_again() {
        // kodelet's summary at 0 (hidden), then three visible items.
        let old_json = r#"{"segments":[{"rawMessages":[{"role":"user","content":"orig"}],"marker":{"id":"k"}}],"activeDisplayStart":1}"#;
        let old = parse(Some(old_json)).unwrap().unwrap();
        let loaded = items(
            r#"[{"role":"user","content":"ksum"},{"role":"user","content":"x"},{"role":"assistant","content":"y"},{"role":"user","content":"z"}]"#,
        );
        let a = append(Some(&old), &loaded, 3, 2, &MARK).unwrap();
        assert_eq!(a.start, 1);
        let v: serde_json::Value = serde_json::from_str(&a.json).unwrap();
        assert_eq!(v["segments"].as_array().unwrap().len(), 2);
        assert_eq!(
            v["segments"][1]["rawMessages"],
            serde_json::json!([{"role":"user","content":"x"},{"role":"assistant","content":"y"}])
        );
        assert_eq!(a.first_segment(), r#"[{"role":"user","content":"orig"}]"#);
        assert_eq!(a.segment_roles, 3);
        // A cut inside kodelet's hidden replacement keeps the rest of it hidden.
        let old = parse(Some(r#"{"segments":[],"activeDisplayStart":3}"#))
            .unwrap()
            .unwrap();
        let a = append(Some(&old), &loaded, 1, 4, &MARK).unwrap();
        assert_eq!(a.start, 1 + 2);
        // A boundary past the end is refused.
        let bad = parse(Some(r#"{"segments":[],"activeDisplayStart":9}"#))
            .unwrap()
            .unwrap();
        assert!(append(Some(&bad), &loaded, 1, 4, &MARK)
            .unwrap_err()
            .contains("invalid compaction display boundary"));
    }

    #[test]
    fn compacts_like_go() {
        assert_eq!(
            go_compact("{ \"a\" : [1, 2],\n \"b\": \"x y <&>\\\" \" }"),
            r#"{"a":[1,2],"b":"x y \u003c\u0026\u003e\" "}"#
        );
    }

    #[test]
    fn ids_and_times() {
        let id = marker_id("c", "t", "s");
        assert_eq!(id.len(), 36);
        assert_eq!(&id[14..15], "4");
        assert_ne!(id, marker_id("c", "t2", "s"));
        let t = chrono::DateTime::parse_from_rfc3339("2026-11-26T13:00:00.120+01:00").unwrap();
        assert_eq!(go_time_json(&t), "2026-11-26T12:00:00.12Z");
    }
}

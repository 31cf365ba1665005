//! Render a [`Session`] as the `raw_messages` JSON of each kodelet provider (stores.md §1.5) and
//! its `tool_results` map (§1.4), as Go's `json.Marshal` writes them.

use base64::Engine;
use chrono::Duration;
use rand::Rng;

use super::gojson::{self, Arr, Obj};
use super::session::{Session, Step};
use super::words;

/// Options that change details of the Responses rendering.
#[derive(Debug, Clone, Copy, Default)]
pub struct ResponsesStyle {
    /// Codex: assistant messages carry a `raw_item` with a `phase`.
    pub codex: bool,
    /// Insert an opaque server-side `compaction` item after the first user message.
    pub compaction_item: bool,
}

pub struct Rendered {
    pub raw_messages: String,
    /// Number of top-level messages/items.
    pub messages: usize,
    /// Bytes of base64 image data inside `raw_messages`.
    pub image_bytes: usize,
}

fn b64(data: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(data)
}

/// `[]anthropic.MessageParam`.
pub fn anthropic<R: Rng>(rng: &mut R, s: &Session) -> Rendered {
    let mut out = String::with_capacity(4096);
    let mut messages = 0;
    let mut image_bytes = 0;
    let mut arr = Arr::start(&mut out);
    for step in &s.steps {
        messages += 1;
        let mut m = Obj::start(arr.item());
        {
            let mut content = Arr::start(m.field("content"));
            match step {
                Step::User { text, image } => {
                    let mut b = Obj::start(content.item());
                    b.str("text", text).str("type", "text");
                    b.end();
                    if let Some(img) = image {
                        let data = b64(&img.png);
                        image_bytes += data.len();
                        let mut b = Obj::start(content.item());
                        {
                            let mut src = Obj::start(b.field("source"));
                            src.str("data", &data)
                                .str("media_type", "image/png")
                                .str("type", "base64");
                            src.end();
                        }
                        b.str("type", "image");
                        b.end();
                    }
                }
                Step::Assistant {
                    thinking,
                    text,
                    calls,
                    ..
                } => {
                    if let Some((t, sig)) = thinking {
                        let mut b = Obj::start(content.item());
                        if rng.random_bool(0.005) {
                            b.str("data", sig).str("type", "redacted_thinking");
                        } else {
                            b.str("signature", sig)
                                .str("thinking", t)
                                .str("type", "thinking");
                        }
                        b.end();
                    }
                    if let Some(t) = text {
                        let mut b = Obj::start(content.item());
                        b.str("text", t).str("type", "text");
                        b.end();
                    }
                    for c in calls {
                        let mut b = Obj::start(content.item());
                        b.str("id", &c.id)
                            .raw("input", &c.args)
                            .str("name", c.name)
                            .str("type", "tool_use");
                        b.end();
                    }
                }
                Step::Results(results) => {
                    for r in results {
                        let mut b = Obj::start(content.item());
                        b.str("tool_use_id", &r.call_id)
                            .bool("is_error", r.is_error);
                        {
                            let mut inner = Arr::start(b.field("content"));
                            let mut t = Obj::start(inner.item());
                            t.str("text", &r.text).str("type", "text");
                            t.end();
                            inner.end();
                        }
                        b.str("type", "tool_result");
                        b.end();
                    }
                }
            }
            content.end();
        }
        let role = match step {
            Step::Assistant { .. } => "assistant",
            _ => "user",
        };
        m.str("role", role);
        m.end();
    }
    arr.end();
    Rendered {
        raw_messages: out,
        messages,
        image_bytes,
    }
}

/// `[]openai.ChatCompletionMessage` (go-openai): `role, content, refusal, name,
/// reasoning_content, function_call, tool_calls, tool_call_id`, empty fields omitted.
pub fn openai_chat<R: Rng>(_rng: &mut R, s: &Session) -> Rendered {
    let mut out = String::with_capacity(4096);
    let mut messages = 0;
    let mut image_bytes = 0;
    let mut arr = Arr::start(&mut out);
    for step in &s.steps {
        match step {
            Step::User { text, image } => {
                messages += 1;
                let mut m = Obj::start(arr.item());
                m.str("role", "user");
                match image {
                    None => {
                        m.str("content", text);
                    }
                    Some(img) => {
                        let mut parts = Arr::start(m.field("content"));
                        let mut p = Obj::start(parts.item());
                        p.str("type", "text").str("text", text);
                        p.end();
                        let data = b64(&img.png);
                        image_bytes += data.len();
                        let mut p = Obj::start(parts.item());
                        p.str("type", "image_url");
                        {
                            let mut u = Obj::start(p.field("image_url"));
                            u.str("url", &format!("data:image/png;base64,{data}"))
                                .str("detail", "auto");
                            u.end();
                        }
                        p.end();
                        parts.end();
                    }
                }
                m.end();
            }
            Step::Assistant {
                thinking,
                text,
                calls,
                ..
            } => {
                messages += 1;
                let mut m = Obj::start(arr.item());
                m.str("role", "assistant");
                if let Some(t) = text {
                    m.str("content", t);
                }
                if let Some((t, _)) = thinking {
                    m.str("reasoning_content", t);
                }
                if !calls.is_empty() {
                    let mut tc = Arr::start(m.field("tool_calls"));
                    for c in calls {
                        let mut o = Obj::start(tc.item());
                        o.str("id", &c.id).str("type", "function");
                        {
                            let mut f = Obj::start(o.field("function"));
                            f.str("name", c.name).str("arguments", &c.args);
                            f.end();
                        }
                        o.end();
                    }
                    tc.end();
                }
                m.end();
            }
            Step::Results(results) => {
                for r in results {
                    messages += 1;
                    let mut m = Obj::start(arr.item());
                    m.str("role", "tool")
                        .str("content", &r.text)
                        .str("tool_call_id", &r.call_id);
                    m.end();
                }
            }
        }
    }
    arr.end();
    Rendered {
        raw_messages: out,
        messages,
        image_bytes,
    }
}

/// kodelet's `[]StoredInputItem`: `type, role, content, call_id, name, arguments, status,
/// action, output, encrypted_content, raw_item`, empty fields omitted.
pub fn responses<R: Rng>(rng: &mut R, s: &Session, style: ResponsesStyle) -> Rendered {
    let mut out = String::with_capacity(4096);
    let mut messages = 0;
    let mut image_bytes = 0;
    let mut arr = Arr::start(&mut out);
    let mut first_user = true;
    for step in &s.steps {
        match step {
            Step::User { text, image } => {
                messages += 1;
                let mut m = Obj::start(arr.item());
                m.str("type", "message")
                    .str("role", "user")
                    .str("content", text);
                if let Some(img) = image {
                    let data = b64(&img.png);
                    image_bytes += data.len();
                    let mut raw = Obj::start(m.field("raw_item"));
                    raw.str("type", "message").str("role", "user");
                    {
                        let mut parts = Arr::start(raw.field("content"));
                        let mut p = Obj::start(parts.item());
                        p.str("type", "input_text").str("text", text);
                        p.end();
                        let mut p = Obj::start(parts.item());
                        p.str("type", "input_image")
                            .str("image_url", &format!("data:image/png;base64,{data}"));
                        p.end();
                        parts.end();
                    }
                    raw.end();
                }
                m.end();
                if first_user && style.compaction_item {
                    messages += 1;
                    let len = rng.random_range(800..6000);
                    let mut c = Obj::start(arr.item());
                    c.str("type", "compaction").str(
                        "encrypted_content",
                        &format!("gAAAAA{}", words::alnum(rng, len)),
                    );
                    c.end();
                }
                first_user = false;
            }
            Step::Assistant {
                thinking,
                text,
                calls,
                final_answer,
            } => {
                if let Some((t, _)) = thinking {
                    messages += 1;
                    let mut m = Obj::start(arr.item());
                    m.str("type", "reasoning")
                        .str("role", "assistant")
                        .str("content", t);
                    m.end();
                }
                if let Some(t) = text {
                    messages += 1;
                    let mut m = Obj::start(arr.item());
                    m.str("type", "message")
                        .str("role", "assistant")
                        .str("content", t);
                    if style.codex || rng.random_bool(0.3) {
                        let mut raw = Obj::start(m.field("raw_item"));
                        raw.str("type", "message")
                            .str("id", &format!("msg_{}", hex_id(rng, 48)))
                            .str("status", "completed");
                        if style.codex {
                            raw.str(
                                "phase",
                                if *final_answer {
                                    "final_answer"
                                } else {
                                    "commentary"
                                },
                            );
                        }
                        {
                            let mut parts = Arr::start(raw.field("content"));
                            let mut p = Obj::start(parts.item());
                            p.str("type", "output_text")
                                .raw("annotations", "[]")
                                .str("text", t);
                            p.end();
                            parts.end();
                        }
                        raw.str("role", "assistant");
                        raw.end();
                    }
                    m.end();
                }
                for c in calls {
                    messages += 1;
                    let mut m = Obj::start(arr.item());
                    m.str("type", "function_call")
                        .str("call_id", &c.id)
                        .str("name", c.name)
                        .str("arguments", &c.args);
                    m.end();
                }
            }
            Step::Results(results) => {
                for r in results {
                    messages += 1;
                    let mut m = Obj::start(arr.item());
                    m.str("type", "function_call_output")
                        .str("call_id", &r.call_id)
                        .str("output", &r.text);
                    m.end();
                }
            }
        }
    }
    arr.end();
    Rendered {
        raw_messages: out,
        messages,
        image_bytes,
    }
}

fn hex_id<R: Rng>(rng: &mut R, len: usize) -> String {
    const H: &[u8] = b"0123456789abcdef";
    (0..len)
        .map(|_| H[rng.random_range(0..16)] as char)
        .collect()
}

/// The `tool_results` column: a Go map, so keys are sorted bytewise.
pub fn tool_results(s: &Session, shift: Duration) -> String {
    let mut all: Vec<&super::session::Outcome> = s
        .steps
        .iter()
        .filter_map(|st| match st {
            Step::Results(r) => Some(r.iter()),
            _ => None,
        })
        .flatten()
        .collect();
    all.sort_by(|a, b| a.call_id.cmp(&b.call_id));
    let cap: usize = all
        .iter()
        .map(|o| o.structured_head.len() + o.call_id.len() + 64)
        .sum();
    let mut out = String::with_capacity(cap + 2);
    out.push('{');
    for (i, o) in all.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        gojson::string(&mut out, &o.call_id);
        out.push(':');
        o.structured(shift, &mut out);
    }
    out.push('}');
    out
}

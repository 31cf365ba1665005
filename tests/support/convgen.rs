//! Building blocks shared by the summary-quality tests (`extractive_quality`,
//! `paraphrase_quality`): a tiny deterministic RNG, conversations written in the three kodelet
//! formats, and a made-up vocabulary. Included by both with `#[path]`, so each test binary uses
//! only what it needs.

#![allow(dead_code)]

use agent_db::agents::kodelet;
use agent_db::message::Format;
use agent_db::plan::{plan_loaded, Plan, PlanOptions};
use agent_db::select::Reason;
use serde_json::{json, Value};

// ---------------------------------------------------------------------------------------------
// A tiny deterministic RNG (xorshift64*).
// ---------------------------------------------------------------------------------------------

pub struct Rng(pub u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }
    pub fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    pub fn range(&mut self, lo: usize, hi: usize) -> usize {
        lo + self.below(hi - lo)
    }
    pub fn pick<'a, T>(&mut self, xs: &'a [T]) -> &'a T {
        &xs[self.below(xs.len())]
    }
    pub fn chance(&mut self, p: f64) -> bool {
        (self.next() % 10_000) as f64 / 10_000.0 < p
    }
    pub fn shuffle<T>(&mut self, xs: &mut [T]) {
        for j in (1..xs.len()).rev() {
            let s = self.below(j + 1);
            xs.swap(j, s);
        }
    }
}

/// A random entry of a list of strings.
pub fn pick_str<'a, S: AsRef<str>>(rng: &mut Rng, xs: &'a [S]) -> &'a str {
    rng.pick(xs).as_ref()
}

// ---------------------------------------------------------------------------------------------
// Conversations in the three kodelet formats.
// ---------------------------------------------------------------------------------------------

pub struct Conv {
    pub format: Format,
    pub msgs: Vec<Value>,
    pub chars: usize,
    pub next_id: usize,
}

impl Conv {
    pub fn new(format: Format) -> Conv {
        Conv {
            format,
            msgs: Vec::new(),
            chars: 0,
            next_id: 0,
        }
    }

    pub fn id(&mut self) -> String {
        self.next_id += 1;
        match self.format.name() {
            "anthropic" => format!("toolu_01{:08x}", self.next_id * 7919),
            "openai-chat" => {
                format!("call_{:08x}", self.next_id * 104_729)
            }
            "openai-responses" => format!("call_r{:06}", self.next_id),
            other => unimplemented!("convgen builds kodelet formats only, not {other}"),
        }
    }

    pub fn user(&mut self, text: &str) {
        self.chars += text.len();
        self.msgs.push(match self.format.name() {
            "anthropic" => json!({"content":[{"text":text,"type":"text"}],"role":"user"}),
            "openai-chat" => json!({"role":"user","content":text}),
            "openai-responses" => json!({"type":"message","role":"user","content":text}),
            other => unimplemented!("convgen builds kodelet formats only, not {other}"),
        });
    }

    /// An assistant turn: optional thinking, text, then tool calls (id, name, input).
    pub fn assistant(
        &mut self,
        thinking: Option<&str>,
        text: &str,
        calls: &[(String, &str, Value)],
    ) {
        self.chars += text.len() + thinking.map_or(0, str::len);
        for (_, _, input) in calls {
            self.chars += input.to_string().len();
        }
        match self.format.name() {
            "anthropic" => self.assistant_anthropic(thinking, text, calls),
            "openai-chat" => {
                let mut m = json!({"role":"assistant"});
                if !text.is_empty() {
                    m["content"] = json!(text);
                }
                if let Some(t) = thinking {
                    m["reasoning_content"] = json!(t);
                }
                if !calls.is_empty() {
                    let list: Vec<Value> = calls
                        .iter()
                        .map(|(id, name, input)| {
                            json!({"id":id,"type":"function","function":{"name":name,"arguments":input.to_string()}})
                        })
                        .collect();
                    m["tool_calls"] = Value::Array(list);
                }
                self.msgs.push(m);
            }
            "openai-responses" => {
                if let Some(t) = thinking {
                    self.msgs
                        .push(json!({"type":"reasoning","role":"assistant","content":t}));
                }
                if !text.is_empty() {
                    self.msgs.push(json!({"type":"message","role":"assistant","content":text,
                        "raw_item":{"type":"message","id":"msg_0","status":"completed","role":"assistant","content":[{"type":"output_text","text":text}]}}));
                }
                for (id, name, input) in calls {
                    self.msgs.push(json!({"type":"function_call","call_id":id,"name":name,"arguments":input.to_string()}));
                }
            }
            other => unimplemented!("convgen builds kodelet formats only, not {other}"),
        }
    }

    pub fn assistant_anthropic(
        &mut self,
        thinking: Option<&str>,
        text: &str,
        calls: &[(String, &str, Value)],
    ) {
        let mut content = Vec::new();
        if let Some(t) = thinking {
            content.push(json!({"signature":"EqQBCkYIBxgCKkB","thinking":t,"type":"thinking"}));
        }
        if !text.is_empty() {
            content.push(json!({"text":text,"type":"text"}));
        }
        for (id, name, input) in calls {
            content.push(json!({"id":id,"input":input,"name":name,"type":"tool_use"}));
        }
        self.msgs
            .push(json!({"content":content,"role":"assistant"}));
    }

    /// Results (id, content, is_error) of the previous turn's calls.
    pub fn results(&mut self, results: &[(String, String, bool)]) {
        for (_, c, _) in results {
            self.chars += c.len();
        }
        match self.format.name() {
            "anthropic" => {
                let content: Vec<Value> = results
                    .iter()
                    .map(|(id, c, e)| {
                        json!({"tool_use_id":id,"is_error":e,"content":[{"text":c,"type":"text"}],"type":"tool_result"})
                    })
                    .collect();
                self.msgs.push(json!({"content":content,"role":"user"}));
            }
            "openai-chat" => {
                for (id, c, _) in results {
                    self.msgs
                        .push(json!({"role":"tool","content":c,"tool_call_id":id}));
                }
            }
            "openai-responses" => {
                for (id, c, _) in results {
                    self.msgs
                        .push(json!({"type":"function_call_output","call_id":id,"output":c}));
                }
            }
            other => unimplemented!("convgen builds kodelet formats only, not {other}"),
        }
    }

    /// One call and its result.
    pub fn call(&mut self, text: &str, name: &str, input: Value, result: String, is_error: bool) {
        let id = self.id();
        self.assistant(None, text, &[(id.clone(), name, input)]);
        self.results(&[(id, result, is_error)]);
    }

    pub fn raw(&self) -> String {
        serde_json::to_string(&self.msgs).unwrap()
    }
}

// ---------------------------------------------------------------------------------------------
// A made-up vocabulary.
// ---------------------------------------------------------------------------------------------

pub const SYLLABLES: &[&str] = &[
    "zor", "quin", "vex", "mar", "tal", "bro", "kel", "dun", "fey", "lox", "pim", "rask", "tov",
    "yel", "nob", "wix",
];
pub const NOUNS: &[&str] = &[
    "ledger",
    "invoice",
    "session",
    "tenant",
    "payload",
    "cursor",
    "shard",
    "bucket",
    "quota",
    "webhook",
    "token",
    "schedule",
    "report",
    "account",
    "migration",
    "snapshot",
    "index",
    "queue",
    "worker",
    "policy",
];
pub const VERBS: &[&str] = &[
    "parse", "load", "store", "render", "sync", "flush", "resolve", "validate", "encode", "fetch",
    "merge", "prune", "retry", "emit", "apply",
];
pub const DIRS: &[&str] = &[
    "src",
    "internal",
    "pkg",
    "lib",
    "app",
    "services/api",
    "crates/core/src",
    "web/src",
];

pub fn word(rng: &mut Rng) -> String {
    format!("{}{}", rng.pick(SYLLABLES), rng.pick(SYLLABLES))
}

/// Plan one generated conversation (stored as conversation `id`, named `name`) with a fixed
/// tail budget.
pub fn plan_of(id: &str, name: &str, format: Format, raw: String, keep_tokens: usize) -> Plan {
    let (provider, metadata) = match format.name() {
        "anthropic" => ("anthropic", None),
        "openai-chat" => (
            "openai",
            Some(r#"{"api_mode":"chat_completions","model":"gpt-4.1"}"#.to_string()),
        ),
        "openai-responses" => (
            "openai",
            Some(r#"{"api_mode":"responses","model":"gpt-5"}"#.to_string()),
        ),
        other => unimplemented!("convgen builds kodelet formats only, not {other}"),
    };
    let at = "2026-10-28 14:02:11.482913 +0100 CET".to_string();
    let usage = r#"{"currentContextWindow":150000,"maxContextWindow":200000}"#.to_string();
    let row = kodelet::conversation(
        id.into(),
        raw,
        "2026-11-01 10:00:00 +0000 UTC".into(),
        false,
    );
    let meta = kodelet::meta_from_columns(
        id.into(),
        provider.into(),
        Some(usage),
        at.clone(),
        at,
        Some(name.into()),
        metadata.as_deref(),
        None,
    );
    let opts = PlanOptions {
        keep_tokens: Some(keep_tokens),
        context_limit: None,
        ..Default::default()
    };
    plan_loaded(row, meta, Reason::Manual, &opts).unwrap()
}

/// The language of a generated project.
#[derive(Clone, Copy)]
pub enum Lang {
    Rust,
    Go,
    Python,
    Ts,
}

impl Lang {
    pub const ALL: [Lang; 4] = [Lang::Rust, Lang::Go, Lang::Python, Lang::Ts];

    /// The file extension, which is also the shape of the paraphrase corpus's error keys.
    pub fn ext(self) -> &'static str {
        match self {
            Lang::Rust => "rs",
            Lang::Go => "go",
            Lang::Python => "py",
            Lang::Ts => "ts",
        }
    }
}

/// A made-up project: a root and 14–29 source files in one language.
pub struct Project {
    pub root: String,
    pub lang: Lang,
    pub files: Vec<String>,
}

impl Project {
    pub fn new(rng: &mut Rng, lang: Lang) -> Project {
        let root = format!(
            "/home/{}/work/{}-{}",
            rng.pick(&["dev", "ana", "kim", "sam"]),
            word(rng),
            rng.pick(NOUNS)
        );
        let n = rng.range(14, 30);
        let mut files = Vec::new();
        while files.len() < n {
            let f = format!(
                "{}/{}/{}_{}.{}",
                root,
                rng.pick(DIRS),
                rng.pick(NOUNS),
                rng.pick(VERBS),
                lang.ext()
            );
            if !files.contains(&f) {
                files.push(f);
            }
        }
        Project { root, lang, files }
    }

    pub fn file(&self, rng: &mut Rng) -> String {
        rng.pick(&self.files).clone()
    }
}

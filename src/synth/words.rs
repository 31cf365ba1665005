//! Vocabulary and text templates for synthetic coding-agent sessions: projects, file paths,
//! identifiers, source code, compiler errors, test logs, user instructions and assistant prose.
//! Everything is drawn from the caller's RNG, so the same RNG state gives the same text.

use rand::seq::IndexedRandom;
use rand::Rng;
use std::fmt::Write;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lang {
    Rust,
    Go,
    TypeScript,
    Python,
}

impl Lang {
    /// The `language` value kodelet's structured results use.
    pub fn name(self) -> &'static str {
        match self {
            Lang::Rust => "rust",
            Lang::Go => "go",
            Lang::TypeScript => "typescript",
            Lang::Python => "python",
        }
    }
}

pub const PROJECTS: &[(&str, Lang)] = &[
    ("ledger-sync", Lang::Rust),
    ("agent-db", Lang::Rust),
    ("tiletrace", Lang::Rust),
    ("quarry", Lang::Rust),
    ("edge-proxy", Lang::Rust),
    ("blobstore", Lang::Rust),
    ("payments-api", Lang::Go),
    ("kodelet", Lang::Go),
    ("infra-tools", Lang::Go),
    ("feature-flags", Lang::Go),
    ("k8s-operator", Lang::Go),
    ("metrics-gateway", Lang::Go),
    ("billing-worker", Lang::Go),
    ("web-dashboard", Lang::TypeScript),
    ("checkout-ui", Lang::TypeScript),
    ("docs-site", Lang::TypeScript),
    ("admin-console", Lang::TypeScript),
    ("realtime-chat", Lang::TypeScript),
    ("ml-pipeline", Lang::Python),
    ("etl-jobs", Lang::Python),
    ("data-api", Lang::Python),
    ("notebook-tools", Lang::Python),
    ("scraper", Lang::Python),
    ("recsys", Lang::Python),
];

pub const MODULES: &[&str] = &[
    "auth",
    "billing",
    "cache",
    "config",
    "db",
    "http",
    "ingest",
    "jobs",
    "metrics",
    "parser",
    "queue",
    "router",
    "scheduler",
    "session",
    "storage",
    "sync",
    "telemetry",
    "worker",
    "api",
    "cli",
    "export",
    "index",
    "migrate",
    "notify",
    "payments",
    "search",
    "upload",
    "webhook",
    "ratelimit",
    "retry",
    "compaction",
    "snapshot",
    "tokenizer",
    "render",
    "audit",
    "tenant",
];

pub const NOUNS: &[&str] = &[
    "user",
    "account",
    "invoice",
    "token",
    "request",
    "response",
    "record",
    "batch",
    "event",
    "order",
    "session",
    "snapshot",
    "segment",
    "manifest",
    "chunk",
    "connection",
    "client",
    "handler",
    "config",
    "schema",
    "query",
    "cursor",
    "entry",
    "job",
    "lease",
    "span",
    "metric",
    "payload",
    "header",
    "route",
    "policy",
    "budget",
    "window",
    "offset",
    "checkpoint",
    "buffer",
    "frame",
    "tenant",
    "webhook",
    "subscription",
    "ledger",
    "report",
    "message",
    "thread",
    "limit",
    "queue",
    "worker",
    "pool",
    "cache",
    "key",
    "index",
    "column",
    "migration",
    "row",
    "file",
];

pub const VERBS: &[&str] = &[
    "parse",
    "load",
    "fetch",
    "validate",
    "apply",
    "build",
    "encode",
    "decode",
    "flush",
    "retry",
    "merge",
    "resolve",
    "render",
    "compute",
    "normalize",
    "serialize",
    "schedule",
    "dispatch",
    "refresh",
    "sync",
    "persist",
    "prune",
    "collect",
    "emit",
    "open",
    "close",
    "spawn",
    "drain",
    "reconcile",
    "rotate",
    "split",
    "compact",
    "estimate",
    "register",
    "lookup",
    "upsert",
];

pub const ADJS: &[&str] = &[
    "pending", "stale", "active", "cached", "expired", "partial", "default", "remote", "local",
    "raw", "next", "last", "current", "max", "min", "total", "dirty", "idle", "failed", "retry",
];

const TYPE_SUFFIXES: &[&str] = &[
    "", "", "Config", "Error", "Store", "Client", "Handler", "Builder", "State", "Options",
    "Summary", "Result", "Request", "Response", "Manager", "Entry", "Id", "Kind",
];

pub fn pascal(w: &str) -> String {
    let mut c = w.chars();
    match c.next() {
        Some(f) => f.to_uppercase().chain(c).collect(),
        None => String::new(),
    }
}

pub fn pick<'a, R: Rng>(rng: &mut R, xs: &'a [&'a str]) -> &'a str {
    xs.choose(rng).copied().unwrap_or("")
}

/// A type name such as `InvoiceStore`.
pub fn type_name<R: Rng>(rng: &mut R) -> String {
    let mut s = pascal(pick(rng, NOUNS));
    if rng.random_bool(0.3) {
        s = format!("{}{}", pascal(pick(rng, ADJS)), s);
    }
    s.push_str(pick(rng, TYPE_SUFFIXES));
    s
}

/// A function name in the language's style (`load_pending_batch`, `loadPendingBatch`).
pub fn fn_name<R: Rng>(rng: &mut R, lang: Lang) -> String {
    let v = pick(rng, VERBS);
    let n = pick(rng, NOUNS);
    let a = if rng.random_bool(0.35) {
        Some(pick(rng, ADJS))
    } else {
        None
    };
    match lang {
        Lang::Rust | Lang::Python => match a {
            Some(a) => format!("{v}_{a}_{n}"),
            None => format!("{v}_{n}"),
        },
        Lang::Go => {
            let head = if rng.random_bool(0.5) {
                pascal(v)
            } else {
                v.to_string()
            };
            match a {
                Some(a) => format!("{head}{}{}", pascal(a), pascal(n)),
                None => format!("{head}{}", pascal(n)),
            }
        }
        Lang::TypeScript => match a {
            Some(a) => format!("{v}{}{}", pascal(a), pascal(n)),
            None => format!("{v}{}", pascal(n)),
        },
    }
}

pub fn var_name<R: Rng>(rng: &mut R, lang: Lang) -> String {
    let n = pick(rng, NOUNS);
    if rng.random_bool(0.3) {
        let a = pick(rng, ADJS);
        match lang {
            Lang::Rust | Lang::Python => format!("{a}_{n}"),
            _ => format!("{a}{}", pascal(n)),
        }
    } else {
        n.to_string()
    }
}

/// A repository-relative source path for the language.
pub fn file_path<R: Rng>(rng: &mut R, lang: Lang, project: &str) -> String {
    let m = pick(rng, MODULES);
    let n = pick(rng, NOUNS);
    match lang {
        Lang::Rust => match rng.random_range(0..6) {
            0 => format!("src/{m}.rs"),
            1 => format!("src/{m}/mod.rs"),
            2 => format!("tests/{m}_{n}.rs"),
            3 => "src/main.rs".to_string(),
            _ => format!("src/{m}/{n}.rs"),
        },
        Lang::Go => match rng.random_range(0..6) {
            0 => format!("cmd/{project}/main.go"),
            1 => format!("internal/{m}/{n}.go"),
            2 => format!("pkg/{m}/{n}_test.go"),
            _ => format!("pkg/{m}/{n}.go"),
        },
        Lang::TypeScript => match rng.random_range(0..6) {
            0 => format!(
                "src/components/{}{}.tsx",
                pascal(n),
                pascal(pick(
                    rng,
                    &["List", "Panel", "Form", "Table", "Modal", "Card"]
                ))
            ),
            1 => format!("src/hooks/use{}.ts", pascal(n)),
            2 => format!("src/lib/{m}.test.ts"),
            3 => format!("src/pages/{m}/index.tsx"),
            _ => format!("src/lib/{m}/{n}.ts"),
        },
        Lang::Python => {
            let pkg = project.replace('-', "_");
            match rng.random_range(0..5) {
                0 => format!("tests/test_{m}.py"),
                1 => format!("{pkg}/{m}/__init__.py"),
                _ => format!("{pkg}/{m}/{n}.py"),
            }
        }
    }
}

/// Identifiers a conversation keeps coming back to.
#[derive(Debug, Clone)]
pub struct Topic {
    pub lang: Lang,
    pub project: String,
    pub files: Vec<String>,
    pub types: Vec<String>,
    pub fns: Vec<String>,
    pub module: String,
}

impl Topic {
    pub fn new<R: Rng>(rng: &mut R, project: &str, lang: Lang) -> Topic {
        let nf = rng.random_range(3..14);
        let mut files: Vec<String> = Vec::with_capacity(nf);
        while files.len() < nf {
            let f = file_path(rng, lang, project);
            if !files.contains(&f) {
                files.push(f);
            }
        }
        Topic {
            lang,
            project: project.to_string(),
            files,
            types: (0..rng.random_range(3..8))
                .map(|_| type_name(rng))
                .collect(),
            fns: (0..rng.random_range(4..10))
                .map(|_| fn_name(rng, lang))
                .collect(),
            module: pick(rng, MODULES).to_string(),
        }
    }
    pub fn file<R: Rng>(&self, rng: &mut R) -> &str {
        &self.files[rng.random_range(0..self.files.len())]
    }
    pub fn ty<R: Rng>(&self, rng: &mut R) -> &str {
        &self.types[rng.random_range(0..self.types.len())]
    }
    pub fn func<R: Rng>(&self, rng: &mut R) -> &str {
        &self.fns[rng.random_range(0..self.fns.len())]
    }
}

// ---------------------------------------------------------------------------------------------
// Source code

/// Append roughly `lines` lines of a plausible source file at `path` (repository-relative) in
/// the topic's language, starting with its header (package, imports).
pub fn code<R: Rng>(rng: &mut R, t: &Topic, path: &str, lines: usize, out: &mut Vec<String>) {
    let target = out.len() + lines;
    header(rng, t, path, out);
    while out.len() < target {
        item(rng, t, out);
        out.push(String::new());
    }
    out.truncate(target.max(1));
}

fn item<R: Rng>(rng: &mut R, t: &Topic, out: &mut Vec<String>) {
    match t.lang {
        Lang::Rust => rust_item(rng, t, out),
        Lang::Go => go_item(rng, t, out),
        Lang::TypeScript => ts_item(rng, t, out),
        Lang::Python => py_item(rng, t, out),
    }
}

/// `lines` contiguous lines from the body of a file (no header), as an edit would quote them.
pub fn fragment<R: Rng>(rng: &mut R, t: &Topic, lines: usize) -> Vec<String> {
    let lines = lines.max(1);
    let mut all = Vec::new();
    while all.len() < lines + 2 {
        item(rng, t, &mut all);
    }
    let start = rng.random_range(0..=all.len() - lines);
    let mut out: Vec<String> = all.drain(start..start + lines).collect();
    // Edits quote whole lines; trailing blank lines are trimmed by the model.
    while out.len() > 1 && out.last().is_some_and(|l| l.trim().is_empty()) {
        out.pop();
    }
    out
}

/// A modified copy of `old`: a line changed, lines inserted or removed, or a comment added.
pub fn modify<R: Rng>(rng: &mut R, t: &Topic, old: &[String]) -> Vec<String> {
    let mut new: Vec<String> = old.to_vec();
    let n = rng.random_range(1..4);
    let fresh = fragment(rng, t, n);
    match rng.random_range(0..4) {
        0 if !new.is_empty() => {
            let i = rng.random_range(0..new.len());
            new[i] = fresh[0].clone();
        }
        1 => {
            let i = rng.random_range(0..=new.len());
            for (k, l) in fresh.into_iter().enumerate() {
                new.insert(i + k, l);
            }
        }
        2 if new.len() > 1 => {
            let i = rng.random_range(0..new.len());
            new.remove(i);
        }
        _ => {
            let i = rng.random_range(0..new.len().max(1));
            let indent: String = new
                .get(i)
                .map(|l| l.chars().take_while(|c| c.is_whitespace()).collect())
                .unwrap_or_default();
            let comment = match t.lang {
                Lang::Python => "#",
                _ => "//",
            };
            let line = format!(
                "{indent}{comment} {} the {} before {} (see {})",
                pascal(pick(rng, VERBS)),
                pick(rng, NOUNS),
                pick(rng, VERBS),
                t.func(rng)
            );
            new.insert(i.min(new.len()), line);
        }
    }
    if new == old {
        new.push(String::new());
    }
    new
}

fn header<R: Rng>(rng: &mut R, t: &Topic, path: &str, out: &mut Vec<String>) {
    match t.lang {
        Lang::Rust => {
            out.push(format!(
                "//! {} {}.",
                pascal(pick(rng, VERBS)),
                pick(rng, NOUNS)
            ));
            out.push(String::new());
            out.push("use std::collections::HashMap;".into());
            out.push(format!(
                "use crate::{}::{{{}, {}}};",
                t.module,
                t.ty(rng),
                t.ty(rng)
            ));
            out.push("use crate::error::{Error, Result};".into());
        }
        Lang::Go => {
            let dir = path.rsplit('/').nth(1).unwrap_or("main");
            let pkg = if path.starts_with("cmd/") {
                "main"
            } else {
                dir
            };
            out.push(format!("package {pkg}"));
            out.push(String::new());
            out.push("import (".into());
            for imp in ["\"context\"", "\"fmt\"", "\"time\""] {
                out.push(format!("\t{imp}"));
            }
            out.push(String::new());
            out.push(format!(
                "\t\"github.com/acme/{}/pkg/{}\"",
                t.project, t.module
            ));
            out.push(")".into());
        }
        Lang::TypeScript => {
            out.push(format!(
                "import {{ {}, {} }} from \"../{}\";",
                t.ty(rng),
                t.ty(rng),
                t.module
            ));
            out.push("import { useEffect, useMemo, useState } from \"react\";".into());
        }
        Lang::Python => {
            out.push("from __future__ import annotations".into());
            out.push(String::new());
            out.push("import logging".into());
            out.push("from dataclasses import dataclass, field".into());
            out.push(format!("from .{} import {}", t.module, t.ty(rng)));
            out.push(String::new());
            out.push("log = logging.getLogger(__name__)".into());
        }
    }
    out.push(String::new());
}

fn rust_item<R: Rng>(rng: &mut R, t: &Topic, out: &mut Vec<String>) {
    let ty = t.ty(rng).to_string();
    if rng.random_bool(0.25) {
        out.push("#[derive(Debug, Clone, PartialEq)]".into());
        out.push(format!("pub struct {ty} {{"));
        for _ in 0..rng.random_range(2..7) {
            let f = var_name(rng, Lang::Rust);
            let fty = pick(
                rng,
                &[
                    "u64",
                    "String",
                    "Option<String>",
                    "Vec<u8>",
                    "bool",
                    "usize",
                    "i64",
                    "Duration",
                ],
            );
            out.push(format!("    pub {f}: {fty},"));
        }
        out.push("}".into());
        return;
    }
    let f = if rng.random_bool(0.6) {
        t.func(rng).to_string()
    } else {
        fn_name(rng, Lang::Rust)
    };
    let arg = var_name(rng, Lang::Rust);
    let ret = t.ty(rng).to_string();
    if rng.random_bool(0.3) {
        out.push(format!(
            "/// {} the {} for {}.",
            pascal(pick(rng, VERBS)),
            pick(rng, NOUNS),
            arg
        ));
    }
    out.push(format!(
        "pub fn {f}(&mut self, {arg}: &{ty}) -> Result<{ret}> {{"
    ));
    for _ in 0..rng.random_range(3..12) {
        let v = var_name(rng, Lang::Rust);
        let line = match rng.random_range(0..12) {
            0 => format!("    let {v} = self.{}.get(&{arg}.id).ok_or_else(|| Error::NotFound({arg}.id.clone()))?;", pick(rng, NOUNS)),
            1 => format!("    if {arg}.{} > self.{}_{} {{ return Err(Error::Invalid(format!(\"{} too large: {{}}\", {arg}.{}))); }}", pick(rng, NOUNS), pick(rng, ADJS), pick(rng, NOUNS), pick(rng, NOUNS), pick(rng, NOUNS)),
            2 => format!("    let mut {v}: Vec<{ret}> = Vec::with_capacity({});", rng.random_range(4..256)),
            3 => format!("    for {} in &{arg}.{}s {{ {v}.push(self.{}({})?); }}", pick(rng, NOUNS), pick(rng, NOUNS), t.func(rng), pick(rng, NOUNS)),
            4 => format!("    tracing::debug!({v} = ?{arg}, \"{} {}\");", pick(rng, VERBS), pick(rng, NOUNS)),
            5 => format!("    let {v} = {}::{}(&{arg})?;", t.module, t.func(rng)),
            6 => format!("    self.{}.insert({arg}.id.clone(), {v}.clone());", pick(rng, NOUNS)),
            7 => format!("    match {arg}.kind {{ Kind::{} => {{}}, _ => return Ok({ret}::default()) }}", pascal(pick(rng, ADJS))),
            8 => format!("    let {v} = {arg}.{}.iter().filter(|x| x.is_{}()).count();", pick(rng, NOUNS), pick(rng, ADJS)),
            9 => format!("    // {}: {} the {} before {} it", pick(rng, &["NOTE", "TODO", "SAFETY", "why"]), pick(rng, VERBS), pick(rng, NOUNS), pick(rng, VERBS)),
            10 => format!("    let {v} = std::time::Instant::now();"),
            _ => format!("    let {v} = self.{}(&{arg}).await.map_err(|e| Error::{}(e.to_string()))?;", t.func(rng), pascal(pick(rng, MODULES))),
        };
        out.push(line);
    }
    out.push(format!("    Ok({ret}::from({arg}))"));
    out.push("}".into());
}

fn go_item<R: Rng>(rng: &mut R, t: &Topic, out: &mut Vec<String>) {
    let ty = t.ty(rng).to_string();
    if rng.random_bool(0.25) {
        out.push(format!("// {ty} holds the {} state.", pick(rng, NOUNS)));
        out.push(format!("type {ty} struct {{"));
        for _ in 0..rng.random_range(2..7) {
            let f = pascal(&var_name(rng, Lang::Go));
            let fty = pick(
                rng,
                &[
                    "string",
                    "int64",
                    "time.Time",
                    "[]byte",
                    "bool",
                    "map[string]string",
                    "*sync.Mutex",
                ],
            );
            out.push(format!("\t{f} {fty} `json:\"{}\"`", pick(rng, NOUNS)));
        }
        out.push("}".into());
        return;
    }
    let f = if rng.random_bool(0.6) {
        t.func(rng).to_string()
    } else {
        fn_name(rng, Lang::Go)
    };
    let arg = var_name(rng, Lang::Go);
    let ret = t.ty(rng).to_string();
    out.push(format!(
        "func (s *{ty}) {f}(ctx context.Context, {arg} *{ret}) (*{ret}, error) {{"
    ));
    for _ in 0..rng.random_range(3..12) {
        let v = var_name(rng, Lang::Go);
        let line = match rng.random_range(0..10) {
            0 => format!("\t{v}, err := s.{}(ctx, {arg}.ID)\n\tif err != nil {{\n\t\treturn nil, fmt.Errorf(\"{} {}: %w\", err)\n\t}}", t.func(rng), pick(rng, VERBS), pick(rng, NOUNS)),
            1 => format!("\tif {arg} == nil {{\n\t\treturn nil, ErrNo{}\n\t}}", pascal(pick(rng, NOUNS))),
            2 => format!("\t{v} := make([]*{ret}, 0, len({arg}.{}s))", pascal(pick(rng, NOUNS))),
            3 => format!("\tfor _, {} := range {arg}.{}s {{\n\t\t{v} = append({v}, {})\n\t}}", pick(rng, NOUNS), pascal(pick(rng, NOUNS)), pick(rng, NOUNS)),
            4 => format!("\ts.log.Debug(\"{} {}\", \"id\", {arg}.ID)", pick(rng, VERBS), pick(rng, NOUNS)),
            5 => format!("\tctx, cancel := context.WithTimeout(ctx, {}*time.Second)\n\tdefer cancel()", rng.random_range(1..60)),
            6 => "\ts.mu.Lock()\n\tdefer s.mu.Unlock()".to_string(),
            7 => format!("\t// {} the {} before {} it", pick(rng, VERBS), pick(rng, NOUNS), pick(rng, VERBS)),
            8 => format!("\t{v} := time.Since({arg}.{}At)", pascal(pick(rng, ADJS))),
            _ => format!("\tif err := s.{}.{}(ctx, {arg}); err != nil {{\n\t\treturn nil, err\n\t}}", pick(rng, NOUNS), t.func(rng)),
        };
        for l in line.split('\n') {
            out.push(l.to_string());
        }
    }
    out.push(format!("\treturn {arg}, nil"));
    out.push("}".into());
}

fn ts_item<R: Rng>(rng: &mut R, t: &Topic, out: &mut Vec<String>) {
    let ty = t.ty(rng).to_string();
    if rng.random_bool(0.25) {
        out.push(format!("export interface {ty} {{"));
        for _ in 0..rng.random_range(2..7) {
            let f = var_name(rng, Lang::TypeScript);
            let fty = pick(
                rng,
                &[
                    "string",
                    "number",
                    "boolean",
                    "string | null",
                    "Date",
                    "Record<string, unknown>",
                ],
            );
            out.push(format!(
                "  {f}{}: {fty};",
                if rng.random_bool(0.3) { "?" } else { "" }
            ));
        }
        out.push("}".into());
        return;
    }
    let f = if rng.random_bool(0.6) {
        t.func(rng).to_string()
    } else {
        fn_name(rng, Lang::TypeScript)
    };
    let arg = var_name(rng, Lang::TypeScript);
    let ret = t.ty(rng).to_string();
    out.push(format!(
        "export async function {f}({arg}: {ty}): Promise<{ret}> {{"
    ));
    for _ in 0..rng.random_range(3..12) {
        let v = var_name(rng, Lang::TypeScript);
        let line = match rng.random_range(0..9) {
            0 => format!(
                "  const {v} = await fetch(`/api/{}/${{{arg}.id}}`);",
                pick(rng, MODULES)
            ),
            1 => format!(
                "  if (!{arg}.{}) {{\n    throw new Error(\"missing {}\");\n  }}",
                pick(rng, NOUNS),
                pick(rng, NOUNS)
            ),
            2 => format!(
                "  const {v} = {arg}.{}s.filter((x) => x.{} !== undefined);",
                pick(rng, NOUNS),
                pick(rng, ADJS)
            ),
            3 => format!(
                "  const {v} = useMemo(() => {}({arg}), [{arg}]);",
                t.func(rng)
            ),
            4 => format!(
                "  console.debug(\"{} {}\", {arg});",
                pick(rng, VERBS),
                pick(rng, NOUNS)
            ),
            5 => format!(
                "  // {} the {} before {} it",
                pick(rng, VERBS),
                pick(rng, NOUNS),
                pick(rng, VERBS)
            ),
            6 => format!(
                "  const [{v}, set{}] = useState<{ret} | null>(null);",
                pascal(&v)
            ),
            7 => format!(
                "  for (const {} of {arg}.{}s) {{\n    await {}({});\n  }}",
                pick(rng, NOUNS),
                pick(rng, NOUNS),
                t.func(rng),
                pick(rng, NOUNS)
            ),
            _ => format!(
                "  const {v}: {ret} = {{ ...{arg}, {}: Date.now() }};",
                pick(rng, NOUNS)
            ),
        };
        for l in line.split('\n') {
            out.push(l.to_string());
        }
    }
    out.push(format!("  return {arg} as unknown as {ret};"));
    out.push("}".into());
}

fn py_item<R: Rng>(rng: &mut R, t: &Topic, out: &mut Vec<String>) {
    let ty = t.ty(rng).to_string();
    if rng.random_bool(0.25) {
        out.push("@dataclass".into());
        out.push(format!("class {ty}:"));
        for _ in 0..rng.random_range(2..7) {
            let f = var_name(rng, Lang::Python);
            let fty = pick(
                rng,
                &[
                    "str",
                    "int",
                    "float",
                    "bool",
                    "list[str] = field(default_factory=list)",
                    "dict[str, int] | None = None",
                ],
            );
            out.push(format!("    {f}: {fty}"));
        }
        return;
    }
    let f = if rng.random_bool(0.6) {
        t.func(rng).to_string()
    } else {
        fn_name(rng, Lang::Python)
    };
    let arg = var_name(rng, Lang::Python);
    let ret = t.ty(rng).to_string();
    out.push(format!("def {f}(self, {arg}: {ty}) -> {ret}:"));
    if rng.random_bool(0.4) {
        out.push(format!(
            "    \"\"\"{} the {} for ``{arg}``.\"\"\"",
            pascal(pick(rng, VERBS)),
            pick(rng, NOUNS)
        ));
    }
    for _ in 0..rng.random_range(3..12) {
        let v = var_name(rng, Lang::Python);
        let line = match rng.random_range(0..9) {
            0 => format!("    {v} = self.{}.get({arg}.id)", pick(rng, NOUNS)),
            1 => format!("    if {arg}.{} is None:\n        raise ValueError(f\"missing {} for {{{arg}.id}}\")", pick(rng, NOUNS), pick(rng, NOUNS)),
            2 => format!("    {v} = [x for x in {arg}.{}s if x.{}]", pick(rng, NOUNS), pick(rng, ADJS)),
            3 => format!("    log.debug(\"{} {} %s\", {arg}.id)", pick(rng, VERBS), pick(rng, NOUNS)),
            4 => format!("    # {} the {} before {} it", pick(rng, VERBS), pick(rng, NOUNS), pick(rng, VERBS)),
            5 => format!("    for {} in {arg}.{}s:\n        self.{}({})", pick(rng, NOUNS), pick(rng, NOUNS), t.func(rng), pick(rng, NOUNS)),
            6 => format!("    {v} = {{k: v for k, v in {arg}.{}.items() if v}}", pick(rng, NOUNS)),
            7 => format!("    with self._lock:\n        self._{}[{arg}.id] = {arg}", pick(rng, NOUNS)),
            _ => format!("    {v} = self.{}({arg}, timeout={})", t.func(rng), rng.random_range(1..30)),
        };
        for l in line.split('\n') {
            out.push(l.to_string());
        }
    }
    out.push(format!("    return {ret}.from_{}({arg})", pick(rng, NOUNS)));
}

// ---------------------------------------------------------------------------------------------
// Tool outputs: errors, logs, listings

/// One compiler or type-checker error for the topic's language (multi-line for Rust).
pub fn compiler_error<R: Rng>(rng: &mut R, t: &Topic) -> String {
    let file = t.file(rng).to_string();
    let line = rng.random_range(12..900);
    let col = rng.random_range(5..60);
    let ty = t.ty(rng).to_string();
    let f = t.func(rng).to_string();
    let v = var_name(rng, t.lang);
    match t.lang {
        Lang::Rust => match rng.random_range(0..5) {
            0 => format!("error[E0308]: mismatched types\n  --> {file}:{line}:{col}\n   |\n{line} |     let {v}: {ty} = self.{f}(&req)?;\n   |             {}   ^^^^^^^^^^^^^^^^^ expected `{ty}`, found `Option<{ty}>`\n   |\n   = note: expected struct `{ty}`\n              found enum `Option<{ty}>`\nhelp: consider using `Option::expect` to unwrap the `Option<{ty}>` value, panicking if the value is an `Option::None`\n", " ".repeat(v.len().min(20))),
            1 => format!("error[E0599]: no method named `{f}` found for reference `&{ty}` in the current scope\n  --> {file}:{line}:{col}\n   |\n{line} |         .{f}()\n   |          ^^^^ method not found in `&{ty}`\n"),
            2 => format!("error[E0502]: cannot borrow `self.{v}` as mutable because it is also borrowed as immutable\n  --> {file}:{line}:{col}\n   |\n{} |         let first = self.{v}.first();\n   |                     -------- immutable borrow occurs here\n{line} |         self.{v}.push(entry);\n   |         ^^^^^^^^^^^^^^^^^^^^ mutable borrow occurs here\n", line - 1),
            3 => format!("error[E0425]: cannot find value `{v}` in this scope\n  --> {file}:{line}:{col}\n   |\n{line} |     {f}({v})\n   |        ^^^ not found in this scope\n"),
            _ => format!("error[E0277]: the trait bound `{ty}: serde::Serialize` is not satisfied\n  --> {file}:{line}:{col}\n    |\n{line}  |     serde_json::to_string(&{v})?\n    |     --------------------- ^^^ the trait `Serialize` is not implemented for `{ty}`\n"),
        },
        Lang::Go => match rng.random_range(0..4) {
            0 => format!("{file}:{line}:{col}: undefined: {f}"),
            1 => format!("{file}:{line}:{col}: cannot use {v} (variable of type *{ty}) as {} value in argument to s.{f}", t.ty(rng)),
            2 => format!("{file}:{line}:{col}: {v} declared and not used"),
            _ => format!("{file}:{line}:{col}: too many return values\n\thave (*{ty}, error)\n\twant (error)"),
        },
        Lang::TypeScript => match rng.random_range(0..4) {
            0 => format!("{file}({line},{col}): error TS2322: Type 'string | undefined' is not assignable to type 'string'.\n  Type 'undefined' is not assignable to type 'string'."),
            1 => format!("{file}({line},{col}): error TS2339: Property '{v}' does not exist on type '{ty}'."),
            2 => format!("{file}({line},{col}): error TS2345: Argument of type '{ty}' is not assignable to parameter of type '{}'.", t.ty(rng)),
            _ => format!("{file}({line},{col}): error TS7006: Parameter '{v}' implicitly has an 'any' type."),
        },
        Lang::Python => match rng.random_range(0..3) {
            0 => format!("{file}:{line}: error: Argument 1 to \"{f}\" has incompatible type \"{ty} | None\"; expected \"{ty}\"  [arg-type]"),
            1 => format!("{file}:{line}: error: \"{ty}\" has no attribute \"{v}\"  [attr-defined]"),
            _ => format!("{file}:{line}:{col}: F841 local variable '{v}' is assigned to but never used"),
        },
    }
}

/// A short one-line error as a user would paste it into a message.
pub fn short_error<R: Rng>(rng: &mut R, t: &Topic) -> String {
    let ty = t.ty(rng).to_string();
    let f = t.func(rng).to_string();
    let file = t.file(rng).to_string();
    let line = rng.random_range(10..500);
    // Half of the time an error typical of the language, otherwise a generic one.
    if rng.random_bool(0.5) {
        return match t.lang {
            Lang::Rust => format!(
                "thread 'main' panicked at {file}:{line}:{}: called `Option::unwrap()` on a `None` value",
                rng.random_range(5..40)
            ),
            Lang::Go => format!(
                "panic: runtime error: invalid memory address or nil pointer dereference [signal SIGSEGV] in {f} ({file}:{line})"
            ),
            Lang::TypeScript => format!(
                "TypeError: Cannot read properties of undefined (reading '{}') at {f} ({file}:{line})",
                pick(rng, NOUNS)
            ),
            Lang::Python => format!("KeyError: '{}' in {f} ({file}, line {line})", pick(rng, NOUNS)),
        };
    }
    match rng.random_range(0..4) {
        0 => format!("context deadline exceeded while calling {f}"),
        1 => format!("database is locked (SQLITE_BUSY) in {ty}.{f}"),
        2 => format!(
            "assertion failed: expected {} got {}",
            rng.random_range(1..50),
            rng.random_range(50..100)
        ),
        _ => format!(
            "connection reset by peer after {}ms",
            rng.random_range(100..30000)
        ),
    }
}

/// A test-run log of about `lines` lines, with `failures` failing tests at the end.
pub fn test_log<R: Rng>(rng: &mut R, t: &Topic, lines: usize, failures: usize) -> String {
    let mut s = String::with_capacity(lines * 60);
    let mut failed = Vec::new();
    match t.lang {
        Lang::Rust => {
            let _ = writeln!(
                s,
                "   Compiling {} v0.{}.{} ({})",
                t.project,
                rng.random_range(1..9),
                rng.random_range(0..30),
                t.project
            );
            let _ = writeln!(
                s,
                "    Finished `test` profile [unoptimized + debuginfo] target(s) in {}.{:02}s",
                rng.random_range(2..90),
                rng.random_range(0..100)
            );
            let _ = writeln!(
                s,
                "     Running unittests src/lib.rs (target/debug/deps/{}-{:016x})\n",
                t.project.replace('-', "_"),
                rng.random::<u64>()
            );
            let _ = writeln!(s, "running {} tests", lines);
            for i in 0..lines {
                let name = format!(
                    "{}::tests::{}_{}",
                    pick(rng, MODULES),
                    fn_name(rng, Lang::Rust),
                    pick(rng, ADJS)
                );
                let fail = i + failures >= lines;
                let _ = writeln!(s, "test {name} ... {}", if fail { "FAILED" } else { "ok" });
                if fail {
                    failed.push(name);
                }
            }
            for name in &failed {
                let _ = writeln!(s, "\n---- {name} stdout ----\nthread '{name}' panicked at {}:{}:{}:\nassertion `left == right` failed\n  left: {}\n right: {}", t.file(rng), rng.random_range(10..800), rng.random_range(5..40), rng.random_range(0..100), rng.random_range(0..100));
            }
            let _ = writeln!(s, "\ntest result: {}. {} passed; {} failed; 0 ignored; 0 measured; 0 filtered out; finished in {}.{:02}s", if failures > 0 { "FAILED" } else { "ok" }, lines - failures.min(lines), failures.min(lines), rng.random_range(0..20), rng.random_range(0..100));
        }
        Lang::Go => {
            for i in 0..lines {
                let name = format!(
                    "Test{}{}",
                    pascal(pick(rng, VERBS)),
                    pascal(pick(rng, NOUNS))
                );
                let fail = i + failures >= lines;
                let _ = writeln!(s, "=== RUN   {name}");
                if fail {
                    let _ = writeln!(
                        s,
                        "    {}_test.go:{}: got {}, want {}",
                        pick(rng, NOUNS),
                        rng.random_range(10..400),
                        rng.random_range(0..9),
                        rng.random_range(10..20)
                    );
                    let _ = writeln!(s, "--- FAIL: {name} (0.{:02}s)", rng.random_range(0..100));
                    failed.push(name);
                } else {
                    let _ = writeln!(s, "--- PASS: {name} (0.{:02}s)", rng.random_range(0..100));
                }
            }
            if failures > 0 {
                let _ = writeln!(
                    s,
                    "FAIL\nFAIL\tgithub.com/acme/{}/pkg/{}\t{}.{:03}s\nFAIL",
                    t.project,
                    t.module,
                    rng.random_range(0..9),
                    rng.random_range(0..1000)
                );
            } else {
                let _ = writeln!(
                    s,
                    "PASS\nok  \tgithub.com/acme/{}/pkg/{}\t{}.{:03}s",
                    t.project,
                    t.module,
                    rng.random_range(0..9),
                    rng.random_range(0..1000)
                );
            }
        }
        Lang::TypeScript => {
            let _ = writeln!(
                s,
                "\n RUN  v1.{}.{} /home/dev/projects/{}\n",
                rng.random_range(0..6),
                rng.random_range(0..9),
                t.project
            );
            for i in 0..lines {
                let fail = i + failures >= lines;
                let _ = writeln!(
                    s,
                    " {} src/lib/{}.test.ts > {} > {} {} ({}ms)",
                    if fail { "×" } else { "✓" },
                    pick(rng, MODULES),
                    fn_name(rng, Lang::TypeScript),
                    pick(
                        rng,
                        &["handles", "returns", "rejects", "renders", "retries"]
                    ),
                    pick(rng, NOUNS),
                    rng.random_range(1..400)
                );
            }
            let _ = writeln!(
                s,
                "\n Test Files  {} failed | {} passed\n      Tests  {} failed | {} passed",
                failures.min(1),
                rng.random_range(3..40),
                failures,
                lines - failures.min(lines)
            );
        }
        Lang::Python => {
            let _ = writeln!(s, "============================= test session starts ==============================\nplatform linux -- Python 3.12.{}, pytest-8.{}.{}, pluggy-1.5.0\nrootdir: /home/dev/projects/{}\ncollected {} items\n", rng.random_range(0..9), rng.random_range(0..4), rng.random_range(0..5), t.project, lines);
            for i in 0..lines {
                let fail = i + failures >= lines;
                let name = format!(
                    "tests/test_{}.py::test_{}",
                    pick(rng, MODULES),
                    fn_name(rng, Lang::Python)
                );
                let _ = writeln!(
                    s,
                    "{name} {} [{:>3}%]",
                    if fail { "FAILED" } else { "PASSED" },
                    (i + 1) * 100 / lines.max(1)
                );
                if fail {
                    failed.push(name);
                }
            }
            for name in &failed {
                let _ = writeln!(s, "\n___ {name} ___\n\n    def test_it():\n>       assert result == expected\nE       AssertionError: assert {} == {}", rng.random_range(0..50), rng.random_range(50..99));
            }
            let _ = writeln!(s, "\n========================= {} passed, {} failed in {}.{:02}s =========================", lines - failures.min(lines), failures, rng.random_range(0..60), rng.random_range(0..100));
        }
    }
    s
}

/// A build log (dependency compilation or bundler output) of about `lines` lines.
pub fn build_log<R: Rng>(rng: &mut R, t: &Topic, lines: usize) -> String {
    let mut s = String::with_capacity(lines * 50);
    const CRATES: &[&str] = &[
        "serde",
        "tokio",
        "hyper",
        "rustls",
        "regex",
        "clap",
        "tracing",
        "sqlx",
        "axum",
        "prost",
        "bytes",
        "futures-util",
        "libc",
        "syn",
        "quote",
        "proc-macro2",
        "rand",
        "chrono",
        "uuid",
        "reqwest",
    ];
    for i in 0..lines {
        match t.lang {
            Lang::Rust => {
                let _ = writeln!(
                    s,
                    "   Compiling {} v{}.{}.{}",
                    pick(rng, CRATES),
                    rng.random_range(0..3),
                    rng.random_range(0..40),
                    rng.random_range(0..20)
                );
            }
            Lang::Go => {
                let _ = writeln!(
                    s,
                    "go: downloading github.com/{}/{} v{}.{}.{}",
                    pick(
                        rng,
                        &[
                            "google",
                            "uber-go",
                            "spf13",
                            "stretchr",
                            "jackc",
                            "prometheus"
                        ]
                    ),
                    pick(rng, NOUNS),
                    rng.random_range(0..3),
                    rng.random_range(0..30),
                    rng.random_range(0..10)
                );
            }
            Lang::TypeScript => {
                let _ = writeln!(
                    s,
                    "dist/assets/{}-{:08x}.js   {:>7.2} kB │ gzip: {:>6.2} kB",
                    pick(rng, NOUNS),
                    rng.random::<u32>(),
                    rng.random_range(0.5..400.0f64),
                    rng.random_range(0.2..90.0f64)
                );
            }
            Lang::Python => {
                let _ = writeln!(
                    s,
                    "{} {}/{}.py:{}: {} {}",
                    if i % 7 == 0 { "WARNING" } else { "INFO" },
                    t.project.replace('-', "_"),
                    pick(rng, MODULES),
                    rng.random_range(10..500),
                    pick(rng, VERBS),
                    pick(rng, NOUNS)
                );
            }
        }
    }
    s
}

/// An application log (timestamps, levels, request ids) of about `lines` lines.
pub fn app_log<R: Rng>(rng: &mut R, t: &Topic, lines: usize) -> String {
    let mut s = String::with_capacity(lines * 110);
    let (mut h, mut m, mut sec) = (
        rng.random_range(0..24),
        rng.random_range(0..60),
        rng.random_range(0..60),
    );
    let day = rng.random_range(1..31);
    for _ in 0..lines {
        sec += rng.random_range(0..3);
        if sec >= 60 {
            sec -= 60;
            m += 1;
            if m >= 60 {
                m = 0;
                h = (h + 1) % 24;
            }
        }
        let level = match rng.random_range(0..20) {
            0 => "ERROR",
            1 | 2 => "WARN",
            3..=5 => "DEBUG",
            _ => "INFO",
        };
        let _ = writeln!(s, "2026-10-{day:02}T{h:02}:{m:02}:{sec:02}.{:03}Z {level:<5} {}::{} request_id={:08x} {} {} took={}ms status={}", rng.random_range(0..1000), t.module, t.func(rng), rng.random::<u32>(), pick(rng, VERBS), pick(rng, NOUNS), rng.random_range(1..2500), pick(rng, &["200", "200", "200", "204", "404", "409", "500", "503"]));
    }
    s
}

pub fn git_status<R: Rng>(rng: &mut R, t: &Topic) -> String {
    let mut s = format!("On branch {}\nChanges not staged for commit:\n  (use \"git add <file>...\" to update what will be committed)\n", branch(rng));
    for _ in 0..rng.random_range(1..6) {
        let _ = writeln!(s, "\tmodified:   {}", t.file(rng));
    }
    if rng.random_bool(0.4) {
        let _ = writeln!(
            s,
            "\nUntracked files:\n\t{}",
            file_path(rng, t.lang, &t.project)
        );
    }
    s
}

pub fn branch<R: Rng>(rng: &mut R) -> String {
    format!(
        "{}/{}-{}",
        pick(rng, &["fix", "feat", "chore", "refactor", "dev"]),
        pick(rng, VERBS),
        pick(rng, NOUNS)
    )
}

/// A unified diff for an edit.
pub fn unified_diff(path: &str, start: usize, old: &[String], new: &[String]) -> String {
    let mut s = format!(
        "--- a/{path}\n+++ b/{path}\n@@ -{},{} +{},{} @@\n",
        start,
        old.len(),
        start,
        new.len()
    );
    for l in old {
        s.push('-');
        s.push_str(l);
        s.push('\n');
    }
    for l in new {
        s.push('+');
        s.push_str(l);
        s.push('\n');
    }
    s
}

// ---------------------------------------------------------------------------------------------
// Human and assistant prose

fn fill<R: Rng>(rng: &mut R, t: &Topic, template: &str) -> String {
    let mut out = String::with_capacity(template.len() + 64);
    let mut rest = template;
    while let Some(i) = rest.find('{') {
        out.push_str(&rest[..i]);
        let Some(j) = rest[i..].find('}') else { break };
        let key = &rest[i + 1..i + j];
        match key {
            "file" => out.push_str(t.file(rng)),
            "file2" => out.push_str(t.file(rng)),
            "type" => out.push_str(t.ty(rng)),
            "fn" => out.push_str(t.func(rng)),
            "fn2" => out.push_str(t.func(rng)),
            "module" => out.push_str(&t.module),
            "noun" => out.push_str(pick(rng, NOUNS)),
            "noun2" => out.push_str(pick(rng, NOUNS)),
            "verb" => out.push_str(pick(rng, VERBS)),
            "adj" => out.push_str(pick(rng, ADJS)),
            "n" => {
                let _ = write!(out, "{}", rng.random_range(2..50));
            }
            "flag" => {
                let _ = write!(out, "{}-{}", pick(rng, ADJS), pick(rng, NOUNS));
            }
            "error" => out.push_str(&short_error(rng, t)),
            "project" => out.push_str(&t.project),
            "branch" => out.push_str(&branch(rng)),
            "test" => out.push_str(&test_cmd(t)),
            _ => {
                out.push('{');
                out.push_str(key);
                out.push('}');
            }
        }
        rest = &rest[i + j + 1..];
    }
    out.push_str(rest);
    out
}

pub fn test_cmd(t: &Topic) -> String {
    match t.lang {
        Lang::Rust => "cargo test".into(),
        Lang::Go => "go test ./...".into(),
        Lang::TypeScript => "npm test".into(),
        Lang::Python => "pytest -q".into(),
    }
}

const INSTRUCTIONS: &[&str] = &[
    "Fix the flaky test in {file}: it fails intermittently in CI with `{error}`. Find the root cause instead of adding retries.",
    "Add a --{flag} option to the {module} command that skips {noun}s older than N days. Default should keep the current behaviour.",
    "Refactor {fn} in {file} so it no longer holds the {noun} lock while calling {fn2}. Keep the public API unchanged.",
    "`{test}` fails after my last rebase with:\n\n```\n{error}\n```\n\nCan you figure out what broke and fix it?",
    "Implement {fn} in {file}. It should {verb} the {adj} {noun}s in batches of {n} and return a {type}. Add unit tests.",
    "Why is {fn} so slow on large inputs? Profile it and propose a fix, then implement the fix if it's small.",
    "Please review {file} and {file2} for error handling problems. We swallow errors somewhere around {fn}.",
    "Migrate the {module} module from the old {noun} API to the new {type}. There are call sites in {file} and {file2}.",
    "Write integration tests for the {module} {noun} flow: happy path, {adj} {noun2}s, and the timeout case.",
    "The {module} service returns 500 when the {noun} is {adj}. Logs show `{error}`. Please fix and add a regression test.",
    "Rename {type} to something clearer and update all usages. Run the tests afterwards.",
    "Add structured logging to {fn} (request id, {noun} id, duration). Don't log secrets.",
    "Our CI lint step fails on {file}. Fix the warnings without disabling the lints.",
    "Split {file} into smaller modules; it has grown too big. Keep behaviour identical and make sure `{test}` passes.",
    "Can you explain how {fn} interacts with {fn2}? I want to change how {noun}s are retried and need to understand the flow first.",
    "Add pagination to the {noun} listing endpoint ({file}). Use cursor-based pagination, page size {n} by default.",
    "Bump the {noun} client to the latest version and fix whatever breaks.",
    "There's a race between {fn} and {fn2} when two {noun}s arrive at once. Reproduce it with a test, then fix it.",
    "Make {fn} idempotent: calling it twice with the same {noun} must not create duplicates.",
    "Update the README and docs for the new --{flag} flag, and add an example to {file}.",
    "Set up a benchmark for {fn} with realistic {noun} sizes and report the numbers before/after your change.",
    "Remove the dead code around {type}; nothing calls {fn} anymore since we moved to {module}.",
    "On branch {branch}: finish the half-done work in {file} (look for TODOs), then run `{test}`.",
    "Investigate the memory growth in the {module} worker. Heap grows by ~{n}MB per hour under load.",
];

const FOLLOWUPS: &[&str] = &[
    "Looks good. Now also update the docs for this change.",
    "CI is still failing:\n\n```\n{error}\n```",
    "Can you run the full test suite, not just the {module} tests?",
    "Please don't change the public API of {type}; revert that part and find another way.",
    "Nice. Can you also handle the case where the {noun} is {adj}?",
    "That fixed it locally, thanks. Commit message suggestion?",
    "Hmm, {fn} still looks wrong to me. What happens when {noun} is empty?",
    "Add a test for the bug you just fixed.",
    "Now do the same for {file}.",
    "Can you simplify {fn}? It's hard to read now.",
    "Also run the linter and fix anything it reports.",
    "I pushed a change to {file} in the meantime, please rebase your edits onto it.",
    "Great. One more thing: log a warning when we skip a {noun}.",
    "ok",
    "continue",
    "Why did you change {file2}? Was that needed?",
];

const PLANS: &[&str] = &[
    "I'll start by reading {file} to understand how {fn} handles {noun}s.",
    "Let me look at the call sites of {fn} first.",
    "I'll search for where {type} is constructed.",
    "Let me check the current test status before changing anything.",
    "Now I'll update {fn} to {verb} the {noun} before taking the lock.",
    "The failure comes from {fn2} returning early when the {noun} is {adj}. I'll fix that path.",
    "Let me run the tests again to confirm the fix.",
    "I'll add a regression test covering the {adj} {noun} case.",
    "Let me check git status to see what has changed so far.",
    "I need to see how {module} is wired together; listing the relevant files.",
    "The compiler error points at {file}; let me open it around that line.",
    "I'll make the edit in {file} and re-run `{test}`.",
];

const THOUGHTS: &[&str] = &[
    "The user wants {fn} changed without touching the public API.",
    "The error mentions the {noun}, so the bug is probably in how {fn2} builds it.",
    "If I hold the lock across the await point the whole {module} path serializes.",
    "There are two call sites; one of them already checks for the {adj} case.",
    "The test uses a fixed clock, so the flakiness must come from ordering of {noun}s.",
    "I should check whether {type} implements Clone; if not I need to restructure.",
    "Batch size {n} seems arbitrary; keep it but make it configurable.",
    "Running the whole suite takes a while but it is the only way to be sure.",
    "The previous edit compiled but the test still fails, so the logic is wrong, not the types.",
    "Maybe the {noun} cache is stale after {fn} returns.",
    "I must not break backwards compatibility of the stored {noun}s.",
    "Let me reconsider: the error is only on the {adj} path.",
];

const USER_CONTEXT: &[&str] = &[
    "Note: {fn} is also called from the {module} worker, so be careful with its signature.",
    "We deploy on Fridays, keep the change small and reviewable.",
    "I tried bumping the timeout already, it didn't help.",
    "This started after the {noun} refactor last week.",
    "Don't touch the generated code under gen/.",
    "Please keep the existing log messages, ops grep for them.",
    "It only happens with more than {n} {noun}s.",
];

const CONCLUSIONS: &[&str] = &[
    "Done. The root cause was that {fn} ignored {adj} {noun}s, so {fn2} retried forever.",
    "All tests pass now.",
    "I fixed the issue and added a regression test.",
    "The change is in place; `{test}` is green.",
    "Here's what I changed:",
    "Summary of the changes:",
];

pub fn instruction<R: Rng>(rng: &mut R, t: &Topic) -> String {
    let mut s = {
        let tpl = pick(rng, INSTRUCTIONS);
        fill(rng, t, tpl)
    };
    if rng.random_bool(0.15) {
        let _ = write!(s, "\n\n{}", {
            let tpl = pick(rng, USER_CONTEXT);
            fill(rng, t, tpl)
        });
    }
    if rng.random_bool(0.08) {
        // A pasted log makes some first messages long.
        s.push_str("\n\nFull output:\n```\n");
        let n = rng.random_range(5..60);
        s.push_str(&test_log(rng, t, n, 1));
        s.push_str("```");
    }
    s
}

pub fn followup<R: Rng>(rng: &mut R, t: &Topic) -> String {
    {
        let tpl = pick(rng, FOLLOWUPS);
        fill(rng, t, tpl)
    }
}

pub fn plan<R: Rng>(rng: &mut R, t: &Topic) -> String {
    {
        let tpl = pick(rng, PLANS);
        fill(rng, t, tpl)
    }
}

pub fn thinking<R: Rng>(rng: &mut R, t: &Topic) -> String {
    let n = rng.random_range(1..6);
    let picked: Vec<&str> = THOUGHTS.choose_multiple(rng, n).copied().collect();
    let parts: Vec<String> = picked.into_iter().map(|tpl| fill(rng, t, tpl)).collect();
    parts.join(" ")
}

pub fn conclusion<R: Rng>(rng: &mut R, t: &Topic, touched: &[String]) -> String {
    let mut s = {
        let tpl = pick(rng, CONCLUSIONS);
        fill(rng, t, tpl)
    };
    if !touched.is_empty() && rng.random_bool(0.8) {
        s.push_str("\n\n");
        for f in touched.iter().take(6) {
            let _ = writeln!(
                s,
                "- `{f}`: {} {} {}",
                pick(rng, VERBS),
                pick(rng, ADJS),
                pick(rng, NOUNS)
            );
        }
        let _ = write!(s, "\nVerified with `{}`.", test_cmd(t));
    }
    s
}

/// Base64-looking opaque text (thinking signatures, encrypted content).
pub fn opaque<R: Rng>(rng: &mut R, len: usize) -> String {
    const B64: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut s = String::with_capacity(len + 4);
    s.push_str("EqQB");
    for _ in 0..len {
        s.push(B64[rng.random_range(0..64)] as char);
    }
    s
}

/// Alphanumeric id suffix.
pub fn alnum<R: Rng>(rng: &mut R, len: usize) -> String {
    const A: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    (0..len)
        .map(|_| A[rng.random_range(0..A.len())] as char)
        .collect()
}

/// What the assistant says before a tool call (`tool`, its main argument).
pub fn narrate<R: Rng>(rng: &mut R, t: &Topic, tool: &str, target: &str) -> String {
    let tpl: &str = match tool {
        "file_read" => pick(
            rng,
            &[
                "I'll read `{target}` to see how {fn} handles {noun}s.",
                "Let me look at `{target}` first.",
                "The compiler error points at `{target}`; let me open it.",
                "Let me check how `{target}` builds the {type}.",
            ],
        ),
        "file_edit" => pick(
            rng,
            &[
                "Now I'll update `{target}` so {fn} checks the {adj} case first.",
                "The failure comes from {fn} returning early when the {noun} is {adj}. I'll fix that in `{target}`.",
                "I'll make the edit in `{target}`.",
                "Applying the same change to `{target}`.",
            ],
        ),
        "file_write" => pick(
            rng,
            &[
                "I'll add a new file `{target}` with the {noun} helpers.",
                "Creating `{target}` with a regression test for the {adj} {noun} case.",
            ],
        ),
        "grep_tool" => pick(
            rng,
            &[
                "Let me find all uses of `{target}`.",
                "I'll search for where `{target}` is used.",
            ],
        ),
        "glob_tool" => pick(
            rng,
            &[
                "Let me list the {lang} files to get an overview.",
                "I need to see how {module} is laid out; listing the files.",
            ],
        ),
        _ => pick(
            rng,
            &[
                "Let me run `{target}`.",
                "Running `{target}` to check the current state.",
                "Let me run `{target}` again to confirm the fix.",
            ],
        ),
    };
    let tpl = tpl
        .replace("{target}", target)
        .replace("{lang}", t.lang.name());
    fill(rng, t, &tpl)
}

/// A source line that uses `name`, as a search tool would show it.
pub fn call_line<R: Rng>(rng: &mut R, lang: Lang, name: &str) -> String {
    let v = var_name(rng, lang);
    let a = var_name(rng, lang);
    match (lang, rng.random_range(0..3)) {
        (Lang::Rust, 0) => format!("    let {v} = {name}(&{a})?;"),
        (Lang::Rust, 1) => format!("    self.{name}(&mut {a}).await?;"),
        (Lang::Rust, _) => format!(
            "pub fn {name}(&self, {a}: &{}) -> Result<()> {{",
            pascal(&v)
        ),
        (Lang::Go, 0) => format!("\t{v}, err := s.{name}(ctx, {a})"),
        (Lang::Go, 1) => format!("\tif err := {name}({a}); err != nil {{"),
        (Lang::Go, _) => format!(
            "func (s *{}) {name}(ctx context.Context, {a} string) error {{",
            pascal(&v)
        ),
        (Lang::TypeScript, 0) => format!("  const {v} = await {name}({a});"),
        (Lang::TypeScript, 1) => format!("import {{ {name} }} from \"../lib/{a}\";"),
        (Lang::TypeScript, _) => format!("export function {name}({a}: {}) {{", pascal(&v)),
        (Lang::Python, 0) => format!("    {v} = self.{name}({a})"),
        (Lang::Python, 1) => format!("from .{a} import {name}"),
        (Lang::Python, _) => format!("def {name}(self, {a}: {}) -> None:", pascal(&v)),
    }
}

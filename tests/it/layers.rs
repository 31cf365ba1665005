//! The library's modules import each other in one direction only (issue 14: "no import cycle").
//!
//! The oracle is the source text itself: every `crate::name` a top-level library module
//! mentions outside comments and `#[cfg(test)]` code is an edge; the test fails, naming the
//! modules, when those edges form a cycle. The binary's modules (`main`, `cli`, `commands`,
//! `output`) sit on top and are left out.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

const BINARY_SIDE: &[&str] = &["main", "lib", "cli", "commands", "output"];

fn rust_files(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// `crate::a::b`, and the names inside `use crate::{a, b::c}`.
fn mentioned(code: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let ident = |s: &str| -> String {
        s.chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect()
    };
    for (i, _) in code.match_indices("crate::") {
        let rest = &code[i + "crate::".len()..];
        if let Some(group) = rest.strip_prefix('{') {
            let group = &group[..group.find('}').unwrap_or(group.len())];
            for item in group.split(',') {
                let name = ident(item.trim());
                if !name.is_empty() {
                    out.insert(name);
                }
            }
        } else {
            let name = ident(rest);
            if !name.is_empty() {
                out.insert(name);
            }
        }
    }
    out
}

fn edges() -> BTreeMap<String, BTreeSet<String>> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let mut g: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for f in files {
        let rel = f.strip_prefix(&src).unwrap();
        let first = rel
            .components()
            .next()
            .unwrap()
            .as_os_str()
            .to_string_lossy();
        let top = first.trim_end_matches(".rs").to_string();
        if BINARY_SIDE.contains(&top.as_str()) {
            continue;
        }
        let text = std::fs::read_to_string(&f).unwrap();
        let code: String = text
            .split("#[cfg(test)]")
            .next()
            .unwrap()
            .lines()
            .filter(|l| !l.trim_start().starts_with("//"))
            .collect::<Vec<_>>()
            .join("\n");
        let entry = g.entry(top.clone()).or_default();
        for m in mentioned(&code) {
            if m != top && m != "VERSION" {
                entry.insert(m);
            }
        }
    }
    g
}

/// A cycle through `start`, if any (depth-first search).
fn cycle_from(
    g: &BTreeMap<String, BTreeSet<String>>,
    start: &str,
    node: &str,
    path: &mut Vec<String>,
    seen: &mut BTreeSet<String>,
) -> Option<Vec<String>> {
    for next in g.get(node).into_iter().flatten() {
        if next == start {
            let mut c = path.clone();
            c.push(start.to_string());
            return Some(c);
        }
        if seen.insert(next.clone()) {
            path.push(next.clone());
            if let Some(c) = cycle_from(g, start, next, path, seen) {
                return Some(c);
            }
            path.pop();
        }
    }
    None
}

#[test]
fn library_modules_have_no_import_cycle() {
    let g = edges();
    assert!(
        g.contains_key("store") && g.contains_key("pipeline"),
        "{g:?}"
    );
    for start in g.keys() {
        let mut path = vec![start.clone()];
        if let Some(c) = cycle_from(&g, start, start, &mut path, &mut BTreeSet::new()) {
            panic!("import cycle: {}", c.join(" -> "));
        }
    }
}

#[test]
fn the_cycle_check_sees_a_cycle() {
    // The checker itself, on a graph with a planted cycle.
    let mut g: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    g.entry("a".into()).or_default().insert("b".into());
    g.entry("b".into()).or_default().insert("c".into());
    g.entry("c".into()).or_default().insert("a".into());
    let mut path = vec!["a".to_string()];
    let c = cycle_from(&g, "a", "a", &mut path, &mut BTreeSet::new()).unwrap();
    assert_eq!(c, ["a", "b", "c", "a"]);
    assert_eq!(
        mentioned("use crate::{store::Store, util};\nlet x = crate::plan::Plan;"),
        ["plan", "store", "util"].map(String::from).into()
    );
}

/// docs/architecture.md's `layers` block: each line a layer, top first.
fn documented_layers() -> Vec<Vec<String>> {
    let doc =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/architecture.md"))
            .unwrap();
    let block = doc
        .split("```layers\n")
        .nth(1)
        .expect("docs/architecture.md has a ```layers block")
        .split("```")
        .next()
        .unwrap();
    block
        .lines()
        .map(|l| l.split_whitespace().map(str::to_string).collect::<Vec<_>>())
        .filter(|l| !l.is_empty())
        .collect()
}

/// The import direction docs/architecture.md states is the one the code has: every
/// `crate::` import goes from a layer to a layer below it, and every library module is placed.
#[test]
fn imports_follow_the_layers_architecture_md_states() {
    let layers = documented_layers();
    let rank: BTreeMap<String, usize> = layers
        .iter()
        .enumerate()
        .flat_map(|(i, l)| l.iter().map(move |m| (m.clone(), i)))
        .collect();
    let g = edges();
    let mut problems = Vec::new();
    for (from, tos) in &g {
        let Some(rf) = rank.get(from) else {
            problems.push(format!("`{from}` is not in docs/architecture.md's layers"));
            continue;
        };
        for to in tos {
            match rank.get(to) {
                None => problems.push(format!("`{to}` is not in docs/architecture.md's layers")),
                Some(rt) if rt <= rf => problems.push(format!(
                    "`{from}` imports `{to}`, which architecture.md places {}",
                    if rt == rf { "beside it" } else { "above it" }
                )),
                _ => {}
            }
        }
    }
    problems.sort();
    problems.dedup();
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// The store kinds' names as they appear in code: kind names, module and type names.
const STORE_WORDS: &[&str] = &[
    "kodelet",
    "docker_agent",
    "docker-agent",
    "dockeragent",
    "goose",
    "opencode",
];

/// Where library code outside `src/agents/` names an agent: every line of a library file
/// (test code included) that is not a comment line and contains one of [`STORE_WORDS`]
/// (case-insensitive: identifiers, string literals, type names). Comment lines (`//`, `///`,
/// `//!`) are left out, and so is `cli.rs`, whose `--help` examples name agents the way the
/// docs do (`agent-db --agent docker-agent stats`); the rest of the binary (`main.rs`,
/// `commands/`, `output/`) is counted.
fn agent_names_outside_agents() -> Vec<String> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let mut hits = Vec::new();
    for f in files {
        let rel = f.strip_prefix(&src).unwrap();
        let top = rel
            .components()
            .next()
            .unwrap()
            .as_os_str()
            .to_string_lossy();
        let top = top.trim_end_matches(".rs");
        if top == "agents" || top == "cli" {
            continue;
        }
        let text = std::fs::read_to_string(&f).unwrap();
        hits.extend(
            code_lines_naming_stores(&text)
                .into_iter()
                .map(|(n, l)| format!("src/{}:{n}: {l}", rel.display())),
        );
    }
    hits
}

/// The (1-based number, text) of each non-comment line of `text` naming a store kind.
fn code_lines_naming_stores(text: &str) -> Vec<(usize, String)> {
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim_start().starts_with("//"))
        .filter(|(_, l)| {
            let lower = l.to_ascii_lowercase();
            STORE_WORDS.iter().any(|w| lower.contains(w))
        })
        .map(|(i, l)| (i + 1, l.trim().to_string()))
        .collect()
}

#[test]
fn library_code_outside_agents_names_no_agent() {
    let hits = agent_names_outside_agents();
    assert!(
        hits.is_empty(),
        "{} places:\n{}",
        hits.len(),
        hits.join("\n")
    );
}

#[test]
fn the_store_name_count_sees_names_in_code_not_in_comments() {
    let text = "/// goose rows\nuse crate::agents::goose::codec;\nlet f = Format::DockerAgent;\n// opencode\nlet s = \"kodelet\";\nlet x = 1;";
    let lines: Vec<usize> = code_lines_naming_stores(text)
        .into_iter()
        .map(|(n, _)| n)
        .collect();
    assert_eq!(lines, [2, 3, 5]);
}

// ---- Files: no two files import each other; agents apart; the message model neutral. ----

/// The module path of a file under `src/` (`store/kind.rs` → `store::kind`, `store/mod.rs` →
/// `store`; `lib.rs` and `main.rs` are the roots of the library and the binary).
fn module_of(rel: &Path) -> Vec<String> {
    let mut parts: Vec<String> = rel
        .iter()
        .map(|c| c.to_string_lossy().into_owned())
        .collect();
    let last = parts.pop().unwrap();
    let stem = last.trim_end_matches(".rs");
    if !matches!(stem, "mod" | "lib" | "main") || !parts.is_empty() && stem != "mod" {
        parts.push(stem.to_string());
    }
    parts
}

/// The file that defines module `m`, if any (`lib.rs` for the library root).
fn file_of(src: &Path, m: &[String]) -> Option<String> {
    if m.is_empty() {
        return Some("lib.rs".to_string());
    }
    let joined = m.join("/");
    [format!("{joined}.rs"), format!("{joined}/mod.rs")]
        .into_iter()
        .find(|f| src.join(f).is_file())
}

/// Code without comments, strings kept, and without what follows the first `#[cfg(test)]`
/// (tests are not part of the build's dependencies).
fn build_code(text: &str) -> String {
    text.split("#[cfg(test)]")
        .next()
        .unwrap()
        .lines()
        .map(|l| match l.find("//") {
            Some(i) if !l[..i].contains('"') => &l[..i],
            _ => l,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Every path the code names from a module root or relative to itself: the leaves of each
/// `use` tree (`use super::{a, b::c}` → `super::a`, `super::b::c`; `use x::Y` → `self::x::Y`)
/// and every inline `crate::…`, `super::…`, `self::…` or `agent_db::…` path. A `pub use` of a
/// child module's names (`pub use kind::StoreKind` in `store/mod.rs`) re-exports them: the
/// folder's interface, not an import of the child.
fn named_paths(code: &str) -> Vec<Vec<String>> {
    fn expand(prefix: &[String], tree: &str, out: &mut Vec<Vec<String>>) {
        let tree = tree.trim();
        if let Some(open) = tree.find('{') {
            let head: Vec<String> = tree[..open]
                .split("::")
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(String::from)
                .collect();
            let mut base = prefix.to_vec();
            base.extend(head);
            let close = tree.rfind('}').filter(|c| *c > open).unwrap_or(tree.len());
            let inner = &tree[open + 1..close];
            let (mut depth, mut start) = (0, 0);
            for (i, c) in inner.char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' => depth -= 1,
                    ',' if depth == 0 => {
                        expand(&base, &inner[start..i], out);
                        start = i + 1;
                    }
                    _ => {}
                }
            }
            expand(&base, &inner[start..], out);
        } else {
            let item = tree.split(" as ").next().unwrap().trim();
            if item.is_empty() {
                return;
            }
            let mut p = prefix.to_vec();
            p.extend(
                item.split("::")
                    .map(str::trim)
                    .filter(|s| !s.is_empty() && *s != "*")
                    .map(String::from),
            );
            out.push(p);
        }
    }
    let roots = ["crate", "super", "self", "agent_db"];
    let mut out = Vec::new();
    // `use` statements: a line that starts with `use` (after `pub`, `pub(crate)` and friends),
    // to the next `;`.
    let mut offset = 0;
    for line in code.split_inclusive('\n') {
        let start = offset;
        offset += line.len();
        let t = line.trim_start();
        let public = t.starts_with("pub");
        let t = match t.strip_prefix("pub") {
            Some(r) if r.starts_with('(') => {
                r[r.find(')').map_or(r.len(), |i| i + 1)..].trim_start()
            }
            Some(r) => r.trim_start(),
            None => t,
        };
        let Some(tree) = t.strip_prefix("use ") else {
            continue;
        };
        let at = start + (line.len() - tree.len());
        let Some(end) = code[at..].find(';') else {
            break;
        };
        let stmt = code[at..at + end].trim();
        if roots.iter().any(|r| stmt.starts_with(&format!("{r}::"))) {
            expand(&[], stmt, &mut out);
        } else if !stmt.starts_with("::") && !public {
            // A path relative to the module itself (a child module, or another crate, which
            // resolves to no file under src/). A `pub use` of a child's names is the folder's
            // interface, not an import: it is left out.
            expand(&["self".to_string()], stmt, &mut out);
        }
    }
    // Inline paths.
    for root in roots {
        let pat = format!("{root}::");
        for (i, _) in code.match_indices(&pat) {
            if code[..i]
                .chars()
                .last()
                .is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':')
            {
                continue;
            }
            let path: String = code[i..]
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_' || *c == ':')
                .collect();
            let segs: Vec<String> = path
                .split("::")
                .filter(|s| !s.is_empty())
                .map(String::from)
                .collect();
            if segs.len() > 1 {
                out.push(segs);
            }
        }
    }
    out
}

/// The file a path named in module `here` resolves to: the deepest module along it that is a
/// file (`super::Compaction` from `store::kind` → `store/mod.rs`).
fn resolve(src: &Path, here: &[String], path: &[String]) -> Option<String> {
    let mut m: Vec<String> = Vec::new();
    let mut segs = path.iter().peekable();
    match segs.peek().map(|s| s.as_str()) {
        Some("crate") | Some("agent_db") => {
            segs.next();
        }
        Some("super") | Some("self") => {
            m = here.to_vec();
            while let Some(s) = segs.peek() {
                match s.as_str() {
                    "super" => {
                        m.pop();
                    }
                    "self" => {}
                    _ => break,
                }
                segs.next();
            }
        }
        _ => return None,
    }
    let mut best = file_of(src, &m);
    for s in segs {
        m.push(s.clone());
        match file_of(src, &m) {
            Some(f) => best = Some(f),
            None => break,
        }
    }
    best
}

/// Every file under `src/` and the files it imports (by `src/`-relative path).
fn file_edges_in(src: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let mut files = Vec::new();
    rust_files(src, &mut files);
    let mut g: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for f in files {
        let rel = f.strip_prefix(src).unwrap();
        let name = rel.to_string_lossy().into_owned();
        let here = module_of(rel);
        let code = build_code(&std::fs::read_to_string(&f).unwrap());
        let entry = g.entry(name.clone()).or_default();
        for p in named_paths(&code) {
            if let Some(to) = resolve(src, &here, &p) {
                if to != name {
                    entry.insert(to);
                }
            }
        }
    }
    g
}

/// Pairs of files that import each other.
fn circles(g: &BTreeMap<String, BTreeSet<String>>) -> Vec<String> {
    let mut out = Vec::new();
    for (a, tos) in g {
        for b in tos {
            if a < b && g.get(b).is_some_and(|t| t.contains(a)) {
                out.push(format!("{a} <-> {b}"));
            }
        }
    }
    out
}

fn src_dir() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

#[test]
fn no_two_files_import_each_other() {
    let g = file_edges_in(&src_dir());
    assert!(
        g["store/kind.rs"].contains("store/conversation.rs"),
        "{g:?}"
    );
    let found = circles(&g);
    assert!(found.is_empty(), "{}", found.join("\n"));
}

/// The import reader and the circle check on a planted source tree: a `use` tree with a
/// group and a rename, `super::` from a folder's file to its `mod.rs`, an inline path, and
/// what comments and test code say left out.
#[test]
fn the_file_import_check_sees_a_circle() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path();
    let write = |p: &str, text: &str| {
        let p = src.join(p);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    };
    write("lib.rs", "pub mod a;\npub mod b;\n");
    write(
        "a/mod.rs",
        "pub mod x;\npub mod y;\npub use y::g;\nuse x::{X as Ex, self as ex};\npub struct A;\n",
    );
    write("a/x.rs", "pub struct X;\nfn f() -> super::A { super::A }\n");
    write(
        "a/y.rs",
        "// use crate::b;\npub fn g() {}\n#[cfg(test)]\nuse crate::b::B;\n",
    );
    write("b.rs", "pub struct B;\nfn h() { crate::a::y::g() }\n");
    let g = file_edges_in(src);
    assert_eq!(g["a/mod.rs"], ["a/x.rs".to_string()].into());
    assert_eq!(g["a/x.rs"], ["a/mod.rs".to_string()].into());
    assert!(g["a/y.rs"].is_empty(), "{g:?}");
    assert_eq!(g["b.rs"], ["a/y.rs".to_string()].into());
    assert_eq!(circles(&g), ["a/mod.rs <-> a/x.rs"]);
}

/// The agent folder a file belongs to (`agents/goose/read.rs` → `goose`).
fn agent_folder(file: &str) -> Option<&str> {
    let rest = file.strip_prefix("agents/")?;
    let (folder, _) = rest.split_once('/')?;
    Some(folder)
}

/// An agent's folder imports the store file's machinery, never another agent's folder; the
/// one shared folder, `opencode_family`, is what opencode 1.x, 2.x and their forks own.
#[test]
fn agent_folders_import_no_other_agent() {
    let g = file_edges_in(&src_dir());
    assert!(g.keys().any(|f| agent_folder(f) == Some("kodelet")));
    let mut found = Vec::new();
    for (from, tos) in &g {
        let Some(a) = agent_folder(from) else {
            continue;
        };
        for to in tos {
            if let Some(b) = agent_folder(to) {
                if b != a && b != "opencode_family" {
                    found.push(format!("{from} imports {to}"));
                }
            }
        }
    }
    assert!(found.is_empty(), "{}", found.join("\n"));
}

/// The neutral message model names no agent in code (tests included): every agent's formats
/// are in its folder.
#[test]
fn the_message_model_names_no_agent() {
    let dir = src_dir().join("message");
    let mut files = Vec::new();
    rust_files(&dir, &mut files);
    assert!(files.len() >= 3, "{files:?}");
    let hits: Vec<String> = files
        .iter()
        .flat_map(|f| {
            let text = std::fs::read_to_string(f).unwrap();
            code_lines_naming_stores(&text)
                .into_iter()
                .map(move |(n, l)| format!("{}:{n}: {l}", f.display()))
        })
        .collect();
    assert!(hits.is_empty(), "{}", hits.join("\n"));
}

// ---- Function length: no non-test function over 80 lines. ----

/// The longest a non-test function may be, in lines from its `fn` line to its closing brace.
const MAX_FN_LINES: usize = 80;

/// `text` with comments, string and char literals blanked to spaces (newlines kept), so
/// braces and `fn` are found only in code.
fn code_only(text: &str) -> String {
    let b: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let blank = |c: char| if c == '\n' { '\n' } else { ' ' };
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        let next = b.get(i + 1).copied();
        if c == '/' && next == Some('/') {
            while i < b.len() && b[i] != '\n' {
                out.push(' ');
                i += 1;
            }
        } else if c == '/' && next == Some('*') {
            let mut depth = 0;
            while i < b.len() {
                if b[i] == '/' && b.get(i + 1) == Some(&'*') {
                    depth += 1;
                    out.push_str("  ");
                    i += 2;
                } else if b[i] == '*' && b.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    out.push_str("  ");
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    out.push(blank(b[i]));
                    i += 1;
                }
            }
        } else if c == 'r'
            && matches!(next, Some('"') | Some('#'))
            && !b[..i]
                .last()
                .is_some_and(|p| p.is_alphanumeric() || *p == '_')
        {
            // A raw string r"…" or r#"…"#.
            let mut j = i + 1;
            let mut hashes = 0;
            while b.get(j) == Some(&'#') {
                hashes += 1;
                j += 1;
            }
            if b.get(j) != Some(&'"') {
                out.push(c);
                i += 1;
                continue;
            }
            j += 1;
            loop {
                if j >= b.len() {
                    break;
                }
                if b[j] == '"' && (0..hashes).all(|k| b.get(j + 1 + k) == Some(&'#')) {
                    j += 1 + hashes;
                    break;
                }
                j += 1;
            }
            for &x in &b[i..j.min(b.len())] {
                out.push(blank(x));
            }
            i = j;
        } else if c == '"' {
            out.push(' ');
            i += 1;
            while i < b.len() && b[i] != '"' {
                if b[i] == '\\' {
                    out.push(' ');
                    i += 1;
                }
                if i < b.len() {
                    out.push(blank(b[i]));
                    i += 1;
                }
            }
            out.push(' ');
            i += 1;
        } else if c == '\'' {
            // A char literal ('x', '\n', '\''), or a lifetime ('a), left as it is.
            let end = if next == Some('\\') {
                (i + 2..b.len()).find(|&k| b[k] == '\'' && k > i + 2)
            } else if b.get(i + 2) == Some(&'\'') {
                Some(i + 2)
            } else {
                None
            };
            match end {
                Some(e) => {
                    for &x in &b[i..=e] {
                        out.push(blank(x));
                    }
                    i = e + 1;
                }
                None => {
                    out.push(c);
                    i += 1;
                }
            }
        } else {
            out.push(c);
            i += 1;
        }
    }
    out
}

/// Every function with a body in `text` that is not test code: (name, first line, lines).
/// Test code is an item under `#[cfg(test)]` or `#[test]` (a test module, a test helper).
fn function_lengths(text: &str) -> Vec<(String, usize, usize)> {
    let code = code_only(text);
    let b = code.as_bytes();
    let line_at = |i: usize| code[..i].matches('\n').count() + 1;
    // The spans of test items: from a `#[cfg(test)]`/`#[test]` to its item's closing brace.
    let mut test_spans = Vec::new();
    for attr in ["#[cfg(test)]", "#[test]"] {
        for (i, _) in code.match_indices(attr) {
            if let Some(open) = code[i..].find(['{', ';']).map(|k| i + k) {
                if b[open] == b'{' {
                    test_spans.push((i, matching(b, open)));
                }
            }
        }
    }
    let mut out = Vec::new();
    for (i, _) in code.match_indices("fn ") {
        if i > 0 && (b[i - 1].is_ascii_alphanumeric() || b[i - 1] == b'_') {
            continue;
        }
        if test_spans.iter().any(|&(s, e)| s <= i && i <= e) {
            continue;
        }
        let name: String = code[i + 3..]
            .trim_start()
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        if name.is_empty() {
            continue; // `fn(…)` pointer types
        }
        // The body: the first `{` outside the signature's parentheses and angle brackets, unless a
        // `;` ends a bodiless declaration first.
        let mut depth = 0i32;
        let mut body = None;
        for (k, &c) in b.iter().enumerate().skip(i) {
            match c {
                b'(' | b'[' => depth += 1,
                b')' | b']' => depth -= 1,
                b';' if depth == 0 => break,
                b'{' if depth == 0 => {
                    body = Some(k);
                    break;
                }
                _ => {}
            }
        }
        if let Some(open) = body {
            let close = matching(b, open);
            out.push((name, line_at(i), line_at(close) - line_at(i) + 1));
        }
    }
    out
}

/// The index of the brace closing the one at `open`.
fn matching(b: &[u8], open: usize) -> usize {
    let mut depth = 0;
    for (k, &c) in b.iter().enumerate().skip(open) {
        match c {
            b'{' => depth += 1,
            b'}' => {
                depth -= 1;
                if depth == 0 {
                    return k;
                }
            }
            _ => {}
        }
    }
    b.len() - 1
}

/// Non-test functions over [`MAX_FN_LINES`] in the library and the binary, as
/// `file:line name (N lines)`. Files that are test modules (`tests.rs`, `*_tests.rs`) are left
/// out.
fn long_functions() -> Vec<String> {
    let src = src_dir();
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    files.sort();
    let mut out = Vec::new();
    for f in files {
        let rel = f.strip_prefix(&src).unwrap().to_string_lossy().into_owned();
        let name = f.file_name().unwrap().to_string_lossy();
        if name == "tests.rs" || name.ends_with("_tests.rs") {
            continue;
        }
        for (fname, line, n) in function_lengths(&std::fs::read_to_string(&f).unwrap()) {
            if n > MAX_FN_LINES {
                out.push(format!("src/{rel}:{line} {fname} ({n} lines)"));
            }
        }
    }
    out
}

#[test]
fn no_non_test_function_is_over_80_lines() {
    let long = long_functions();
    assert!(
        long.is_empty(),
        "{} functions over {MAX_FN_LINES} lines:\n{}",
        long.len(),
        long.join("\n")
    );
}

/// The counter on planted code: braces in strings, chars and comments do not count, a
/// bodiless trait method is no function, test items are left out.
#[test]
fn the_function_counter_counts_lines_of_code() {
    let text = "trait T {\n    fn decl(&self) -> u8;\n}\n\
                fn three(x: &str) -> Vec<u8> {\n    let s = \"}{\"; // }\n    let c = '{'; let r = r#\"}\"#; vec![]\n}\n\
                fn generic<'a, F: Fn(u8) -> u8>(f: F) where F: Copy {\n}\n\
                #[cfg(test)]\nmod tests {\n    fn helper() {\n    }\n}\n\
                #[test]\nfn t() {\n}\n";
    let found = function_lengths(text);
    assert_eq!(
        found,
        [("three".to_string(), 4, 4), ("generic".to_string(), 8, 2)]
    );
}

// ---- docs/architecture.md describes the house as it is. ----

fn architecture_md() -> String {
    std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/architecture.md"))
        .unwrap()
}

/// docs/architecture.md's `house` block: each line a folder under `src/` and its files
/// (without `.rs`).
fn documented_house() -> Vec<(String, Vec<String>)> {
    let doc = architecture_md();
    let block = doc
        .split("```house\n")
        .nth(1)
        .expect("docs/architecture.md has a ```house block")
        .split("```")
        .next()
        .unwrap()
        .to_string();
    block
        .lines()
        .filter_map(|l| l.split_once(':'))
        .map(|(dir, files)| {
            (
                dir.trim().to_string(),
                files.split_whitespace().map(String::from).collect(),
            )
        })
        .collect()
}

/// Every file the block names exists, every source file in those folders is named (test
/// modules, `*_tests.rs`, aside), and every agent folder is in it.
#[test]
fn architecture_md_lists_every_file_of_the_house() {
    let src = src_dir();
    let house = documented_house();
    let mut problems = Vec::new();
    for (dir, files) in &house {
        for f in files {
            if !src.join(dir).join(format!("{f}.rs")).is_file() {
                problems.push(format!("src/{dir}/{f}.rs is named but does not exist"));
            }
        }
        let Ok(entries) = std::fs::read_dir(src.join(dir)) else {
            problems.push(format!("src/{dir} does not exist"));
            continue;
        };
        for e in entries {
            let name = e.unwrap().file_name().to_string_lossy().into_owned();
            if let Some(stem) = name.strip_suffix(".rs") {
                if !stem.ends_with("_tests") && !files.iter().any(|f| f == stem) {
                    problems.push(format!("src/{dir}/{name} is not named"));
                }
            }
        }
    }
    for e in std::fs::read_dir(src.join("agents")).unwrap() {
        let e = e.unwrap();
        if e.path().is_dir() {
            let dir = format!("agents/{}", e.file_name().to_string_lossy());
            if !house.iter().any(|(d, _)| *d == dir) {
                problems.push(format!("src/{dir}/ is not in the house block"));
            }
        }
    }
    for top in ["store", "archive"] {
        if !house.iter().any(|(d, _)| d == top) {
            problems.push(format!("src/{top}/ is not in the house block"));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// Every method of the `Adapter` trait is named in docs/architecture.md's section on it.
#[test]
fn architecture_md_names_every_adapter_method() {
    let kind = std::fs::read_to_string(src_dir().join("store/kind.rs")).unwrap();
    let start = kind.find("pub trait Adapter").expect("the Adapter trait");
    let body = &kind[start..];
    let body = &body[..matching(body.as_bytes(), body.find('{').unwrap())];
    let methods: Vec<String> = body
        .lines()
        .filter_map(|l| l.trim_start().strip_prefix("fn "))
        .map(|l| {
            l.chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect()
        })
        .collect();
    assert!(methods.len() > 20, "{methods:?}");
    let doc = architecture_md();
    let section = doc
        .split("## The Adapter trait")
        .nth(1)
        .expect("docs/architecture.md has a section on the Adapter trait");
    let section = section.split("\n## ").next().unwrap();
    let missing: Vec<&String> = methods
        .iter()
        .filter(|m| !section.contains(&format!("`{m}`")))
        .collect();
    assert!(missing.is_empty(), "not in architecture.md: {missing:?}");
}

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

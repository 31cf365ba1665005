//! The documentation is part of the contract: every flag, default and exit code that
//! docs/usage.md promises, and every field the JSON examples of docs/json-output.md show, is
//! checked against the binary itself (its `--help`, its man page, its real `--json` output on a
//! generated store), and the docs may not send a reader to a file outside the repository.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::common::{json, Env};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn read(rel: &str) -> String {
    std::fs::read_to_string(root().join(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

/// The sections of a markdown page by `## ` heading (heading text without the hashes).
fn sections(md: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut name = String::new();
    let mut body = String::new();
    let mut fenced = false;
    for line in md.lines() {
        if line.starts_with("```") {
            fenced = !fenced;
        }
        if !fenced && line.starts_with("## ") {
            out.insert(std::mem::take(&mut name), std::mem::take(&mut body));
            name = line[3..].trim().to_string();
            continue;
        }
        body.push_str(line);
        body.push('\n');
    }
    out.insert(name, body);
    out
}

/// Table rows (cells, trimmed) of every table in `text` whose header's first cell is one of
/// `heads`, with the header's cells.
fn table_rows(text: &str, heads: &[&str]) -> Vec<(Vec<String>, Vec<String>)> {
    let mut out = Vec::new();
    let mut header: Option<Vec<String>> = None;
    for line in text.lines() {
        let t = line.trim();
        if !t.starts_with('|') {
            header = None;
            continue;
        }
        let cells: Vec<String> = t
            .trim_matches('|')
            .split(" | ")
            .map(|c| c.trim().trim_matches('|').trim().to_string())
            .collect();
        match &header {
            None if heads.contains(&cells[0].as_str()) => header = Some(cells),
            None => {}
            Some(_) if cells[0].starts_with("---") => {}
            Some(h) => out.push((h.clone(), cells)),
        }
    }
    out
}

/// The long flags (`--name`) written in code spans of `cell`.
fn long_flags(cell: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for (i, span) in cell.split('`').enumerate() {
        if i % 2 == 0 {
            continue;
        }
        for word in span.split(|c: char| c.is_whitespace() || c == ',' || c == '=') {
            if let Some(name) = word.strip_prefix("--") {
                let name: String = name
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '-')
                    .collect();
                if !name.is_empty() {
                    out.insert(name);
                }
            }
        }
    }
    out
}

fn normalize(s: &str) -> String {
    s.replace('`', "")
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .to_lowercase()
}

/// `agent-db <args> --help`: each long flag with its `[default: …]` text, if any.
fn help_flags(args: &[&str]) -> BTreeMap<String, Option<String>> {
    let home = tempfile::tempdir().expect("tempdir");
    let out = crate::common::bare_cmd(home.path())
        .args(args)
        .arg("--help")
        .env("COLUMNS", "10000")
        .output()
        .expect("run --help");
    assert!(out.status.success(), "{args:?} --help failed");
    let text = String::from_utf8(out.stdout).expect("utf-8 help");
    let mut flags: BTreeMap<String, Option<String>> = BTreeMap::new();
    let mut current: Option<String> = None;
    let mut desc = String::new();
    let finish = |name: &Option<String>, desc: &str, flags: &mut BTreeMap<_, _>| {
        if let Some(n) = name {
            let default = desc.split("[default: ").nth(1).map(|d| {
                d.split([';', ']'])
                    .next()
                    .unwrap_or("")
                    .split(" (")
                    .next()
                    .unwrap_or("")
                    .trim()
                    .to_string()
            });
            flags.insert(n.clone(), default);
        }
    };
    for line in text.lines() {
        let t = line.trim_start();
        let indent = line.len() - t.len();
        let flag_line = (2..=6).contains(&indent) && (t.starts_with("--") || t.starts_with('-'));
        if flag_line {
            finish(&current, &desc, &mut flags);
            desc.clear();
            let long = t
                .split_whitespace()
                .find_map(|w| w.strip_prefix("--"))
                .map(|w| w.trim_end_matches(',').to_string());
            current = long;
            desc.push_str(t);
        } else if current.is_some() {
            desc.push(' ');
            desc.push_str(t);
        }
    }
    finish(&current, &desc, &mut flags);
    flags.remove("help");
    flags.remove("version");
    flags
}

const SUBCOMMANDS: [&str; 17] = [
    "init",
    "retire",
    "apply",
    "list",
    "show",
    "compact",
    "history",
    "restore",
    "prune-archive",
    "stats",
    "vacuum",
    "man",
    "config",
    "hooks",
    "stores",
    "recipes",
    "completions",
];

#[test]
fn every_flag_and_default_in_usage_md_is_the_binarys() {
    let usage = read("docs/usage.md");
    let secs = sections(&usage);
    let rows_of = |sec: &str, heads: &[&str]| {
        table_rows(
            secs.get(sec)
                .unwrap_or_else(|| panic!("docs/usage.md has no section `## {sec}`")),
            heads,
        )
    };
    let global = rows_of("Global options", &["Option"]);
    let selectors = rows_of("Selectors", &["Selector"]);
    let llm = rows_of("LLM summarizer", &["Option"]);
    let mut problems = Vec::new();
    for sub in SUBCOMMANDS {
        let help = help_flags(&[sub]);
        let own = rows_of(sub, &["Option"]);
        let mut documented: Vec<(Vec<String>, Vec<String>)> = own.clone();
        documented.extend(global.iter().cloned());
        if sub == "list" || sub == "compact" || sub == "retire" {
            documented.extend(selectors.iter().cloned());
        }
        if sub == "compact" {
            documented.extend(llm.iter().cloned());
        }
        // Every flag the binary takes is documented, with its default.
        for (flag, default) in &help {
            let row = documented
                .iter()
                .find(|(_, cells)| long_flags(&cells[0]).contains(flag));
            let Some((header, cells)) = row else {
                problems.push(format!(
                    "`{sub} --{flag}` is not documented in docs/usage.md"
                ));
                continue;
            };
            if let Some(default) = default {
                let col = header.iter().position(|h| h == "Default");
                let text = match col {
                    Some(i) => cells.get(i).cloned().unwrap_or_default(),
                    None => cells.join(" "),
                };
                if !normalize(&text).contains(&normalize(default)) {
                    problems.push(format!(
                        "`{sub} --{flag}`: the binary's default is `{default}`, docs/usage.md says `{text}`"
                    ));
                }
            }
        }
        // Every flag the command's own tables document exists.
        let mut listed: Vec<&Vec<String>> = own.iter().map(|(_, c)| c).collect();
        if sub == "list" || sub == "compact" || sub == "retire" {
            listed.extend(selectors.iter().map(|(_, c)| c));
        }
        for cells in listed {
            for flag in long_flags(&cells[0]) {
                if !help.contains_key(&flag) {
                    problems.push(format!(
                        "docs/usage.md documents `{sub} --{flag}`, which the binary does not take"
                    ));
                }
            }
        }
    }
    // Global options exist on the top-level command.
    let top = help_flags(&[]);
    for (_, cells) in &global {
        for flag in long_flags(&cells[0]) {
            if !top.contains_key(&flag) && flag != "help" && flag != "version" {
                problems.push(format!("global option `--{flag}` does not exist"));
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// (code, name) from the `## Exit codes` table of docs/usage.md.
fn documented_exit_codes() -> BTreeSet<(i32, String)> {
    let secs = sections(&read("docs/usage.md"));
    let rows = table_rows(&secs["Exit codes"], &["Code"]);
    rows.iter()
        .map(|(_, c)| (c[0].parse().expect("a code"), c[1].clone()))
        .collect()
}

#[test]
fn the_exit_code_table_is_the_binarys() {
    let documented = documented_exit_codes();
    assert!(documented.len() >= 10, "{documented:?}");
    // The constants the binary exits with.
    let source = read("src/error.rs");
    let mut constants = BTreeSet::new();
    for line in source.lines() {
        let t = line.trim();
        if let Some(rest) = t.strip_prefix("pub const ") {
            if let Some((name, value)) = rest.split_once(": i32 = ") {
                constants.insert((
                    value.trim_end_matches(';').parse().unwrap(),
                    name.to_string(),
                ));
            }
        }
    }
    assert_eq!(
        documented, constants,
        "docs/usage.md exit codes vs src/error.rs"
    );
    // The man page the binary prints lists the same codes.
    let home = tempfile::tempdir().expect("tempdir");
    let out = crate::common::bare_cmd(home.path())
        .arg("man")
        .output()
        .expect("man");
    let man = String::from_utf8(out.stdout).unwrap();
    let exit = man
        .split(".SH \"EXIT STATUS\"")
        .nth(1)
        .expect("EXIT STATUS");
    let exit = exit.split(".SH").next().unwrap();
    let man_codes: BTreeSet<i32> = exit
        .lines()
        .filter_map(|l| l.strip_prefix("\\fB")?.strip_suffix("\\fR")?.parse().ok())
        .collect();
    let doc_codes: BTreeSet<i32> = documented.iter().map(|(c, _)| *c).collect();
    assert_eq!(doc_codes, man_codes, "docs/usage.md vs `agent-db man`");
}

/// Every key path in a JSON value (`a.b`, arrays as `a[]`).
fn key_paths(v: &Value, prefix: &str, out: &mut BTreeSet<String>) {
    match v {
        Value::Object(m) => {
            // A map keyed by data (the retention score's kinds) is one shape: `by_kind.*`.
            let by_data = prefix.ends_with("by_kind");
            for (k, v) in m {
                let k = if by_data { "*".to_string() } else { k.clone() };
                let p = if prefix.is_empty() {
                    k
                } else {
                    format!("{prefix}.{k}")
                };
                out.insert(p.clone());
                key_paths(v, &p, out);
            }
        }
        Value::Array(a) => {
            for v in a {
                key_paths(v, &format!("{prefix}[]"), out);
            }
        }
        _ => {}
    }
}

/// The key paths of every ```json example in the `## {heading}` section of json-output.md.
fn example_paths(secs: &BTreeMap<String, String>, heading: &str) -> BTreeSet<String> {
    let body = secs
        .get(heading)
        .unwrap_or_else(|| panic!("docs/json-output.md has no `## {heading}`"));
    let mut out = BTreeSet::new();
    for block in body.split("```json").skip(1) {
        let text = block.split("```").next().unwrap();
        // Examples may elide array items with `…`.
        let text = text
            .replace("… ,", "")
            .replace("…,", "")
            .replace(", …", "")
            .replace('…', "");
        // One document, or several (one per line, as excerpts of a report).
        for v in serde_json::Deserializer::from_str(&text).into_iter::<Value>() {
            match v {
                Ok(v) => key_paths(&v, "", &mut out),
                Err(e) => panic!("`## {heading}`: an example is not JSON ({e}):\n{text}"),
            }
        }
    }
    assert!(
        !out.is_empty(),
        "`## {heading}` has no parseable JSON example"
    );
    out
}

#[test]
fn json_examples_show_every_field_the_binary_writes() {
    let secs = sections(&read("docs/json-output.md"));
    let env = Env::generated(14, 7, &[]);
    let run = |args: &[&str], ok: &[i32]| {
        let mut c = env.cmd();
        c.args(args).arg("--json");
        let (v, code) = json(c);
        assert!(ok.contains(&code), "{args:?} exited {code}: {v}");
        v
    };
    let mut problems = Vec::new();
    let mut check = |heading: &str, v: &Value| {
        let documented = example_paths(&secs, heading);
        let mut actual = BTreeSet::new();
        key_paths(v, "", &mut actual);
        for p in actual.difference(&documented) {
            problems.push(format!(
                "`{heading}`: the binary writes `{p}`, the example lacks it"
            ));
        }
    };
    check("list --json", &run(&["list", "--all-over", "0.3"], &[0, 1]));
    let compact = [
        "compact",
        "--all-over",
        "0.3",
        "--idle",
        "0",
        "--keep-tokens",
        "2000",
        "--strategy",
        "extractive",
        "--yes",
    ];
    check("compact --json", &run(&compact, &[0, 1]));
    check("history --json", &run(&["history"], &[0]));
    check("stats --json", &run(&["stats"], &[0]));
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// Markdown files a reader is given: README.md and docs/*.md.
fn pages() -> Vec<PathBuf> {
    let mut out = vec![root().join("README.md")];
    for e in std::fs::read_dir(root().join("docs")).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_some_and(|x| x == "md") {
            out.push(p);
        }
    }
    out.sort();
    out
}

fn rust_sources(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            rust_sources(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

#[test]
fn docs_sources_and_tests_cite_nothing_outside_the_repository() {
    // Paths of files a reader of this repository does not have: the notes the project was
    // researched from, sibling directories, one machine's absolute paths, and "§" sections of
    // such notes.
    let outside = [
        "../shared",
        "shared/",
        "/work/",
        "field-notes",
        "§",
        "/root/",
    ];
    let mut files = pages();
    rust_sources(&root().join("src"), &mut files);
    // The tests and the fixture generator cite their sources too (a replay of an agent's rule
    // names the agent's file and commit). There, comments are checked: string literals are test
    // data (a generated project path), and the one place that locates the shared fixtures
    // directory is a named constant in `tests/it/common.rs`.
    let mut test_files = Vec::new();
    rust_sources(&root().join("tests"), &mut test_files);
    rust_sources(&root().join("fixtures"), &mut test_files);
    let this_file = root().join("tests/it/docs_promises.rs");
    test_files.retain(|f| *f != this_file);
    let mut problems = Vec::new();
    for f in files.iter().chain(&test_files) {
        let only_comments = test_files.contains(f);
        let text = std::fs::read_to_string(f).unwrap();
        for (i, line) in text.lines().enumerate() {
            if only_comments && !line.trim_start().starts_with("//") {
                continue;
            }
            for o in outside {
                if line.contains(o) {
                    problems.push(format!(
                        "{}:{}: `{o}`: {}",
                        f.strip_prefix(root()).unwrap().display(),
                        i + 1,
                        line.trim()
                    ));
                }
            }
        }
    }
    // Relative links in the pages point at files that exist.
    for f in pages() {
        let text = std::fs::read_to_string(&f).unwrap();
        for part in text.split("](").skip(1) {
            let target = part.split(')').next().unwrap();
            let file = target.split('#').next().unwrap();
            if file.is_empty() || file.contains("://") || file.starts_with("mailto:") {
                continue;
            }
            if !f.parent().unwrap().join(file).exists() {
                problems.push(format!(
                    "{}: link to `{target}`, which does not exist",
                    f.strip_prefix(root()).unwrap().display()
                ));
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// The same kind of mistake gets the same exit code: an out-of-range ratio is a usage error
/// (2) for every ratio flag, and the hint says what was probably meant; `--follow` on an empty
/// store is "not found" (5), as the exit-code table says.
#[test]
fn documented_exit_codes_for_ratios_and_an_empty_follow() {
    let env = Env::generated(4, 3, &[]);
    for (args, hint) in [
        (&["compact", "--all-over", "70", "--dry-run"][..], "0.7"),
        (&["list", "--all-over", "70"][..], "0.7"),
        (
            &[
                "compact",
                "--all-over",
                "0.7",
                "--target",
                "40",
                "--dry-run",
            ][..],
            "0.4",
        ),
        (
            &["compact", "--all-over", "0.7", "--target", "0", "--dry-run"][..],
            "at most 1",
        ),
        (
            &[
                "compact",
                "--all-over",
                "0.7",
                "--target",
                "1.5",
                "--dry-run",
            ][..],
            "at most 1",
        ),
    ] {
        let out = env.cmd().args(args).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(hint), "{args:?}: {err}");
    }
    let empty = Env::empty();
    for args in [
        &["compact", "--follow", "--dry-run"][..],
        &["list", "--follow"][..],
    ] {
        let out = empty.cmd().args(args).output().unwrap();
        assert_eq!(
            out.status.code(),
            Some(5),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// docs/ is read, not skimmed: every page by task, each fact said once, under 120,000
/// characters in all.
#[test]
fn docs_stay_under_120k_characters() {
    let mut total = 0;
    let mut sizes = Vec::new();
    for e in std::fs::read_dir(root().join("docs")).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_some_and(|x| x == "md") {
            let n = std::fs::read_to_string(&p).unwrap().chars().count();
            sizes.push(format!("{}: {n}", p.file_name().unwrap().to_string_lossy()));
            total += n;
        }
    }
    assert!(total < 120_000, "docs/ holds {total} characters: {sizes:?}");
}

/// Every `agent-db <command> …` line in README.md and docs/ code blocks uses only flags that
/// command (or the top level) takes.
#[test]
fn example_command_lines_use_real_flags() {
    let top = help_flags(&[]);
    let mut helps: BTreeMap<String, BTreeMap<String, Option<String>>> = BTreeMap::new();
    let mut problems = Vec::new();
    for page in pages() {
        let text = std::fs::read_to_string(&page).unwrap();
        let mut fenced = false;
        for line in text.lines() {
            if line.starts_with("```") {
                fenced = !fenced;
                continue;
            }
            if !fenced {
                continue;
            }
            let code = line
                .split(" #")
                .next()
                .unwrap()
                .trim()
                .trim_start_matches("$ ");
            let Some(rest) = code.strip_prefix("agent-db ") else {
                continue;
            };
            let words: Vec<&str> = rest.split_whitespace().collect();
            // The first word that is not a global option (or its value) is the command.
            let mut i = 0;
            while i < words.len() && words[i].starts_with('-') {
                let takes_value = ["--db", "--agent", "--config", "--color"].contains(&words[i]);
                i += if takes_value { 2 } else { 1 };
            }
            let Some(sub) = words.get(i) else { continue };
            if !SUBCOMMANDS.contains(sub) {
                continue;
            }
            let help = helps
                .entry(sub.to_string())
                .or_insert_with(|| help_flags(&[sub]));
            for w in &words {
                if let Some(flag) = w.strip_prefix("--") {
                    let flag = flag.split('=').next().unwrap();
                    if !help.contains_key(flag) && !top.contains_key(flag) && flag != "help" {
                        problems.push(format!(
                            "{}: `{code}`: `{sub}` takes no `--{flag}`",
                            page.strip_prefix(root()).unwrap().display()
                        ));
                    }
                }
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// README's first run is two commands, the demo and the test suite (which installs the real
/// agents itself), and `.ci/run` runs that same test command; no script the README or CI runs
/// is missing.
#[test]
fn readme_first_run_is_the_demo_and_the_test_command_ci_runs() {
    let readme = read("README.md");
    let first = sections(&readme)
        .into_iter()
        .find(|(k, _)| k.starts_with("First run"))
        .map(|(_, v)| v)
        .expect("a 'First run' section in README.md");
    let block: Vec<&str> = first
        .split("```")
        .nth(1)
        .expect("a code block")
        .lines()
        .skip(1)
        .map(|l| l.split('#').next().unwrap_or("").trim())
        .filter(|l| !l.is_empty())
        .collect();
    assert_eq!(block, ["bash fixtures/demo.sh", "cargo test"], "{first}");
    let ci = read(".ci/run");
    let runs: Vec<&str> = ci
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .collect();
    assert!(runs.contains(&"cargo test"), ".ci/run:\n{ci}");
    for l in &runs {
        if let Some(script) = l.strip_prefix("bash ") {
            assert!(root().join(script.trim()).is_file(), ".ci/run runs {l}");
        }
    }
    assert!(root().join("fixtures/demo.sh").is_file());
}

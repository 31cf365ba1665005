//! Tool calls: recording each call (its label, kind and command run), the files it touched and
//! how, from JSON path keys, `apply_patch` envelopes and simple shell commands. Tool names,
//! JSON keys and program names are in `lexicon`.

use serde_json::Value;

use super::lexicon::{
    COMMAND_KEYS, CREATE_PROGRAMS, DELETE_PROGRAMS, DESCRIBE_KEYS, EDITOR_SUBCOMMANDS,
    GIT_PRINT_SUBCOMMANDS, GIT_PROGRAMS, PATCH_BEGIN, PATCH_CREATE, PATCH_DELETE, PATCH_EDIT,
    PATCH_WRITE, PATHS_KEYS, PATH_KEYS, PRINT_PROGRAMS, READ_PROGRAMS, SHELL_PROGRAMS,
    SHELL_TOOL_NAMES, SHELL_TOOL_PARTS, STREAM_EDITORS, SUB_CREATE, SUB_DELETE, SUB_EDIT, SUB_READ,
    SUB_WRITE, TOOL_CREATE_PARTS, TOOL_DELETE_PARTS, TOOL_EDIT_PARTS, TOOL_READ_PARTS,
    TOOL_SEARCH_PARTS, TOOL_WRITE_PARTS,
};
use super::text::{clip, collapse, quote_raw};
use super::{CallRec, CmdRun, Facts, FileEntry, Kind, Seen};

const COMMAND_CHARS: usize = 200;

// File actions, as the summary names them.
pub(super) const A_CREATED: &str = "created";
pub(super) const A_WRITTEN: &str = "written";
pub(super) const A_EDITED: &str = "edited";
pub(super) const A_DELETED: &str = "deleted";
pub(super) const A_READ: &str = "read";
pub(super) const A_SEARCHED: &str = "searched";
pub(super) const A_USED: &str = "used";

/// Actions in the order a file's actions are listed.
const ACTION_ORDER: [&str; 6] = [
    A_CREATED, A_WRITTEN, A_EDITED, A_DELETED, A_READ, A_SEARCHED,
];

/// Whether an action changes the file.
pub(super) fn modifies(a: &str) -> bool {
    ACTION_ORDER[..4].contains(&a)
}

/// Where an action is listed among a file's actions.
pub(super) fn action_rank(a: &str) -> usize {
    ACTION_ORDER
        .iter()
        .position(|x| *x == a)
        .unwrap_or(ACTION_ORDER.len())
}
const LABEL_COMMAND_CHARS: usize = 80;
const PATH_MAX_CHARS: usize = 240;

pub(super) fn record_call(f: &mut Facts, seen: &mut Seen, id: &str, name: &str, input: &str) {
    let lname = name.to_ascii_lowercase();
    let parsed: Option<Value> = serde_json::from_str(input).ok();
    let shellish = is_shell_name(&lname);
    let mut paths: Vec<(String, String)> = Vec::new();
    let mut command: Option<String> = None;

    match &parsed {
        Some(v) => {
            let mut found = Vec::new();
            collect_paths(v, 0, &mut found);
            let cmd = COMMAND_KEYS.iter().find_map(|k| v.get(*k));
            let sub = cmd.and_then(Value::as_str);
            let action = tool_action(&lname, if shellish { None } else { sub });
            for p in found {
                paths.push((p, action.clone()));
            }
            if let Some(c) = cmd.and_then(command_text) {
                // An editor tool's `command` ("view", "str_replace") is a sub-command, not shell.
                if shellish || (paths.is_empty() && !is_editor_subcommand(&c)) {
                    command = Some(c);
                }
            }
            // Patches passed as a JSON string (apply_patch {"input": "*** Begin Patch …"}).
            let mut strings = Vec::new();
            collect_strings(v, 0, &mut strings);
            for s in strings {
                if is_patch(s) {
                    patch_paths(s, &mut paths);
                }
            }
        }
        None => {
            let raw = input.trim();
            if is_patch(raw) {
                patch_paths(raw, &mut paths);
            }
            if shellish && !raw.is_empty() {
                command = Some(raw.to_string());
            }
        }
    }
    if let Some(c) = &command {
        command_paths(c, &mut paths);
    }

    let kind = call_kind(command.as_deref(), &lname, shellish);

    for (p, action) in &paths {
        touch(f, seen, p, action);
    }

    let label = match (&command, paths.first()) {
        (Some(c), _) => format!("{name} `{}`", clip(&collapse(c), LABEL_COMMAND_CHARS)),
        (None, Some((p, _))) => format!("{name} {p}"),
        (None, None) => match parsed.as_ref().and_then(describe_input) {
            Some(d) => format!("{name} {d}"),
            None => name.to_string(),
        },
    };
    let run = command.map(|c| {
        f.runs.push(CmdRun {
            command: clip(&collapse(&c), COMMAND_CHARS),
            failed: false,
            exit: None,
        });
        f.runs.len() - 1
    });
    seen.calls.insert(id.to_string(), f.calls.len());
    f.calls.push(CallRec {
        label,
        kind,
        run,
        failed: false,
    });
}

/// How a call's result is read: from the command it ran, or else from the tool's name.
fn call_kind(command: Option<&str>, lname: &str, shellish: bool) -> Kind {
    if let Some(c) = command {
        return if is_read_command(c) {
            Kind::ShellRead
        } else {
            Kind::Shell
        };
    }
    let a = tool_action(lname, None);
    if a == A_READ {
        Kind::Read
    } else if a == A_SEARCHED {
        Kind::Search
    } else if modifies(&a) {
        Kind::Modify
    } else if shellish {
        Kind::Shell
    } else {
        Kind::Other
    }
}

fn touch(f: &mut Facts, seen: &mut Seen, path: &str, action: &str) {
    let idx = match seen.files.get(path) {
        Some(&i) => i,
        None => {
            seen.files.insert(path.to_string(), f.files.len());
            f.files.push(FileEntry {
                path: path.to_string(),
                count: 0,
                actions: Vec::new(),
            });
            f.files.len() - 1
        }
    };
    let e = &mut f.files[idx];
    e.count += 1;
    match e.actions.iter_mut().find(|(a, _)| a == action) {
        Some((_, n)) => *n += 1,
        None => e.actions.push((action.to_string(), 1)),
    }
}

fn is_shell_name(lname: &str) -> bool {
    SHELL_TOOL_PARTS.iter().any(|k| lname.contains(k)) || SHELL_TOOL_NAMES.contains(&lname)
}

fn is_editor_subcommand(c: &str) -> bool {
    EDITOR_SUBCOMMANDS.contains(&c.trim())
}

fn is_patch(s: &str) -> bool {
    let lower = s.to_ascii_lowercase();
    PATCH_BEGIN.iter().any(|p| lower.contains(p))
}

/// The file action of a tool, from an editor sub-command or the tool's name.
fn tool_action(lname: &str, sub: Option<&str>) -> String {
    if let Some(sub) = sub.map(str::trim) {
        let by_sub: [(&[&str], &str); 5] = [
            (SUB_READ, A_READ),
            (SUB_CREATE, A_CREATED),
            (SUB_WRITE, A_WRITTEN),
            (SUB_EDIT, A_EDITED),
            (SUB_DELETE, A_DELETED),
        ];
        if let Some((_, a)) = by_sub.iter().find(|(l, _)| l.contains(&sub)) {
            return (*a).into();
        }
    }
    let by_name: [(&[&str], &str); 6] = [
        (TOOL_CREATE_PARTS, A_CREATED),
        (TOOL_WRITE_PARTS, A_WRITTEN),
        (TOOL_EDIT_PARTS, A_EDITED),
        (TOOL_DELETE_PARTS, A_DELETED),
        (TOOL_READ_PARTS, A_READ),
        (TOOL_SEARCH_PARTS, A_SEARCHED),
    ];
    if let Some((_, a)) = by_name
        .iter()
        .find(|(parts, _)| parts.iter().any(|k| lname.contains(k)))
    {
        (*a).into()
    } else if is_shell_name(lname) {
        A_USED.into()
    } else {
        format!("used by {lname}")
    }
}

fn collect_paths(v: &Value, depth: usize, out: &mut Vec<String>) {
    if depth > 3 {
        return;
    }
    match v {
        Value::Object(map) => {
            for (k, x) in map {
                let lk = k.to_ascii_lowercase();
                if PATH_KEYS.contains(&lk.as_str()) {
                    if let Some(s) = x.as_str() {
                        push_path(s, out);
                    }
                } else if PATHS_KEYS.contains(&lk.as_str()) {
                    if let Some(items) = x.as_array() {
                        for it in items {
                            match it {
                                Value::String(s) => push_path(s, out),
                                other => collect_paths(other, depth + 1, out),
                            }
                        }
                    }
                } else if x.is_object() || x.is_array() {
                    collect_paths(x, depth + 1, out);
                }
            }
        }
        Value::Array(items) => {
            for it in items {
                collect_paths(it, depth + 1, out);
            }
        }
        _ => {}
    }
}

fn push_path(s: &str, out: &mut Vec<String>) {
    let s = s.trim();
    if s.is_empty() || s.chars().count() > PATH_MAX_CHARS || s.contains('\n') {
        return;
    }
    if !out.iter().any(|p| p == s) {
        out.push(s.to_string());
    }
}

fn collect_strings<'v>(v: &'v Value, depth: usize, out: &mut Vec<&'v str>) {
    if depth > 3 {
        return;
    }
    match v {
        Value::String(s) => out.push(s),
        Value::Array(items) => items
            .iter()
            .for_each(|x| collect_strings(x, depth + 1, out)),
        Value::Object(map) => map
            .values()
            .for_each(|x| collect_strings(x, depth + 1, out)),
        _ => {}
    }
}

/// A shell command from a `command`/`cmd` value: a string, or an argv (`["bash","-lc","…"]`).
fn command_text(v: &Value) -> Option<String> {
    match v {
        Value::String(s) if !s.trim().is_empty() => Some(s.clone()),
        Value::Array(items) => {
            let argv: Vec<&str> = items.iter().filter_map(Value::as_str).collect();
            if argv.is_empty() {
                return None;
            }
            let shell = SHELL_PROGRAMS.contains(&argv[0].rsplit('/').next().unwrap_or(""));
            if shell && argv.len() >= 3 && argv[1].starts_with('-') && argv[1].contains('c') {
                Some(argv[2..].join(" "))
            } else {
                Some(argv.join(" "))
            }
        }
        _ => None,
    }
}

/// Files named in an apply_patch envelope.
fn patch_paths(text: &str, out: &mut Vec<(String, String)>) {
    let kinds: [(&[&str], &str); 4] = [
        (PATCH_EDIT, A_EDITED),
        (PATCH_CREATE, A_CREATED),
        (PATCH_DELETE, A_DELETED),
        (PATCH_WRITE, A_WRITTEN),
    ];
    for line in text.lines() {
        let l = line.trim();
        let lower = l.to_ascii_lowercase();
        let found = kinds.iter().find_map(|(prefixes, a)| {
            prefixes
                .iter()
                .find(|p| lower.starts_with(*p))
                .map(|p| (l[p.len()..].trim(), *a))
        });
        if let Some((p, a)) = found {
            if !p.is_empty()
                && p.chars().count() <= PATH_MAX_CHARS
                && !out.iter().any(|(x, _)| x == p)
            {
                out.push((p.to_string(), a.to_string()));
            }
        }
    }
}

fn looks_like_path(t: &str) -> bool {
    if t.is_empty()
        || t.starts_with('-')
        || t.contains("://")
        || t.chars().count() > PATH_MAX_CHARS
        || t.starts_with("/dev/")
        || t.contains(|c: char| "=$*|&;<>`(){}'\"".contains(c))
        || t.chars().all(|c| c.is_ascii_digit() || c == '.')
    {
        return false;
    }
    if t.contains('/') {
        return t.chars().any(|c| c.is_alphanumeric());
    }
    // A bare name with an extension: main.rs, Cargo.toml.
    match t.rsplit_once('.') {
        Some((stem, ext)) => {
            !stem.is_empty()
                && (1..=6).contains(&ext.len())
                && ext.chars().all(|c| c.is_ascii_alphanumeric())
                && ext.chars().any(|c| c.is_ascii_alphabetic())
        }
        None => false,
    }
}

fn unquote(t: &str) -> &str {
    let t = t.trim();
    for q in ['"', '\''] {
        if t.len() >= 2 && t.starts_with(q) && t.ends_with(q) {
            return &t[1..t.len() - 1];
        }
    }
    t
}

/// Paths a simple shell command reads, edits or writes (the easy cases only).
fn command_paths(cmd: &str, out: &mut Vec<(String, String)>) {
    let first_line = cmd.lines().next().unwrap_or("");
    let add = |p: &str, a: &str, out: &mut Vec<(String, String)>| {
        let p = unquote(p);
        if looks_like_path(p) && !out.iter().any(|(x, _)| x == p) {
            out.push((p.to_string(), a.to_string()));
        }
    };
    for seg in first_line.split(['|', ';']).flat_map(|s| s.split("&&")) {
        let toks: Vec<&str> = seg.split_whitespace().collect();
        // Output redirection writes a file.
        for (k, t) in toks.iter().enumerate() {
            if *t == ">" || *t == ">>" {
                if let Some(next) = toks.get(k + 1) {
                    add(next, A_WRITTEN, out);
                }
            } else if let Some(rest) = t.strip_prefix(">>").or_else(|| t.strip_prefix('>')) {
                if !rest.starts_with('&') && !rest.is_empty() {
                    add(rest, A_WRITTEN, out);
                }
            }
        }
        let mut words = toks
            .iter()
            .copied()
            .filter(|t| !t.starts_with('>'))
            .take_while(|t| *t != ">" && *t != ">>");
        let Some(prog) = words.next() else { continue };
        let prog = prog.rsplit('/').next().unwrap_or(prog);
        let args: Vec<&str> = words.collect();
        let sed = STREAM_EDITORS.contains(&prog);
        let action = if READ_PROGRAMS.contains(&prog) {
            A_READ
        } else if sed && args.iter().any(|a| a.starts_with("-i")) {
            A_EDITED
        } else if sed {
            A_READ
        } else if DELETE_PROGRAMS.contains(&prog) {
            A_DELETED
        } else if CREATE_PROGRAMS.contains(&prog) {
            A_CREATED
        } else {
            continue;
        };
        let mut args = args.as_slice();
        if sed {
            // Skip the script: the first non-option argument.
            if let Some(pos) = args.iter().position(|a| !a.starts_with('-')) {
                args = &args[pos + 1..];
            }
        }
        for a in args {
            if !a.starts_with('-') {
                add(a, action, out);
            }
        }
    }
}

fn is_read_command(cmd: &str) -> bool {
    let first = cmd.split_whitespace().next().unwrap_or("");
    let first = first.rsplit('/').next().unwrap_or(first);
    let second = cmd.split_whitespace().nth(1).unwrap_or("");
    if STREAM_EDITORS.contains(&first) {
        !cmd.contains(" -i")
    } else if GIT_PROGRAMS.contains(&first) {
        GIT_PRINT_SUBCOMMANDS.contains(&second)
    } else {
        PRINT_PROGRAMS.contains(&first)
    }
}

/// A short description of a call's input without a path or command (a pattern, query or url).
fn describe_input(v: &Value) -> Option<String> {
    for k in DESCRIBE_KEYS {
        if let Some(s) = v.get(k).and_then(Value::as_str) {
            let s = collapse(s);
            if !s.is_empty() {
                return Some(format!("{k}={}", quote_raw(&clip(&s, 80))));
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn paths_from_commands_and_patches() {
        let mut out = Vec::new();
        command_paths(
            "cat src/main.rs | head -n 20 && sed -i 's/a/b/' src/lib.rs > /dev/null",
            &mut out,
        );
        command_paths("echo hi > notes/todo.md; rm -f build/out.o", &mut out);
        assert_eq!(
            out,
            vec![
                ("src/main.rs".to_string(), "read".to_string()),
                ("src/lib.rs".to_string(), "edited".to_string()),
                ("notes/todo.md".to_string(), "written".to_string()),
                ("build/out.o".to_string(), "deleted".to_string()),
            ]
        );
        let mut p = Vec::new();
        patch_paths("*** Begin Patch\n*** Update File: a/b.py\n@@\n-x\n+y\n*** Add File: c.py\n*** End Patch", &mut p);
        assert_eq!(
            p,
            vec![
                ("a/b.py".into(), "edited".into()),
                ("c.py".into(), "created".into())
            ]
        );
        assert_eq!(
            command_text(&json!(["bash", "-lc", "ls -la"])).as_deref(),
            Some("ls -la")
        );
    }
}

//! Tool calls: recording each call (its label, kind and command run), the files it touched and
//! how, from JSON path keys, `apply_patch` envelopes and simple shell commands.

use serde_json::Value;

use super::text::{clip, collapse, quote_raw};
use super::{CallRec, CmdRun, Facts, FileEntry, Kind, Seen};

const COMMAND_CHARS: usize = 200;
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
            let sub = v.get("command").and_then(Value::as_str);
            let action = tool_action(&lname, if shellish { None } else { sub });
            for p in found {
                paths.push((p, action.clone()));
            }
            let cmd = v.get("command").or_else(|| v.get("cmd"));
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
                if s.contains("*** Begin Patch") {
                    patch_paths(s, &mut paths);
                }
            }
        }
        None => {
            let raw = input.trim();
            if raw.contains("*** Begin Patch") {
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

    let kind = if let Some(c) = &command {
        if is_read_command(c) {
            Kind::ShellRead
        } else {
            Kind::Shell
        }
    } else {
        match tool_action(&lname, None).as_str() {
            "read" => Kind::Read,
            "searched" => Kind::Search,
            "edited" | "written" | "created" | "deleted" => Kind::Modify,
            _ if shellish => Kind::Shell,
            _ => Kind::Other,
        }
    };

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
    [
        "bash",
        "shell",
        "terminal",
        "exec",
        "run_command",
        "command",
        "powershell",
    ]
    .iter()
    .any(|k| lname.contains(k))
        || matches!(lname, "sh" | "cmd" | "zsh" | "run")
}

fn is_editor_subcommand(c: &str) -> bool {
    matches!(
        c.trim(),
        "view"
            | "create"
            | "str_replace"
            | "insert"
            | "undo_edit"
            | "write"
            | "read"
            | "edit"
            | "delete"
    )
}

/// The file action of a tool, from an editor sub-command or the tool's name.
fn tool_action(lname: &str, sub: Option<&str>) -> String {
    if let Some(sub) = sub.map(str::trim) {
        match sub {
            "view" | "read" => return "read".into(),
            "create" => return "created".into(),
            "write" => return "written".into(),
            "str_replace" | "insert" | "undo_edit" | "edit" => return "edited".into(),
            "delete" => return "deleted".into(),
            _ => {}
        }
    }
    let has = |ks: &[&str]| ks.iter().any(|k| lname.contains(k));
    if has(&["create", "new_file", "add_file"]) {
        "created".into()
    } else if has(&["write", "save"]) {
        "written".into()
    } else if has(&[
        "edit", "replace", "patch", "modify", "update", "insert", "rename", "move",
    ]) {
        "edited".into()
    } else if has(&["delete", "remove", "unlink"]) {
        "deleted".into()
    } else if has(&[
        "read",
        "view",
        "cat",
        "open",
        "show",
        "fetch_file",
        "get_file",
    ]) {
        "read".into()
    } else if has(&["grep", "search", "glob", "find", "list", "ls", "tree"]) {
        "searched".into()
    } else if is_shell_name(lname) {
        "used".into()
    } else {
        format!("used by {lname}")
    }
}

const PATH_KEYS: &[&str] = &[
    "path",
    "file_path",
    "filepath",
    "filePath",
    "filename",
    "file",
    "target_file",
    "notebook_path",
    "source_path",
    "target_path",
    "dest_path",
    "destination",
    "old_path",
    "new_path",
];
const PATHS_KEYS: &[&str] = &["paths", "files", "file_paths", "filenames"];

fn collect_paths(v: &Value, depth: usize, out: &mut Vec<String>) {
    if depth > 3 {
        return;
    }
    match v {
        Value::Object(map) => {
            for (k, x) in map {
                if PATH_KEYS.contains(&k.as_str()) {
                    if let Some(s) = x.as_str() {
                        push_path(s, out);
                    }
                } else if PATHS_KEYS.contains(&k.as_str()) {
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
            let shell = matches!(
                argv[0].rsplit('/').next().unwrap_or(""),
                "bash" | "sh" | "zsh" | "dash"
            );
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
    for line in text.lines() {
        let l = line.trim();
        let found = [
            ("*** Update File:", "edited"),
            ("*** Add File:", "created"),
            ("*** Delete File:", "deleted"),
            ("*** Move to:", "written"),
        ]
        .iter()
        .find_map(|(p, a)| l.strip_prefix(p).map(|rest| (rest.trim(), *a)));
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
                    add(next, "written", out);
                }
            } else if let Some(rest) = t.strip_prefix(">>").or_else(|| t.strip_prefix('>')) {
                if !rest.starts_with('&') && !rest.is_empty() {
                    add(rest, "written", out);
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
        let action = match prog {
            "cat" | "head" | "tail" | "less" | "more" | "nl" | "wc" | "bat" => "read",
            "sed" if args.iter().any(|a| a.starts_with("-i")) => "edited",
            "sed" => "read",
            "rm" => "deleted",
            "touch" => "created",
            _ => continue,
        };
        let mut args = args.as_slice();
        if prog == "sed" {
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
    match first {
        "cat" | "head" | "tail" | "less" | "more" | "nl" | "grep" | "rg" | "ag" | "ack" | "awk"
        | "find" | "ls" | "tree" | "bat" | "jq" | "wc" | "diff" | "fd" => true,
        "sed" => !cmd.contains(" -i"),
        "git" => matches!(
            second,
            "diff" | "show" | "log" | "blame" | "grep" | "status"
        ),
        _ => false,
    }
}

/// A short description of a call's input without a path or command (a pattern, query or url).
fn describe_input(v: &Value) -> Option<String> {
    for k in ["pattern", "query", "url", "name", "description"] {
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

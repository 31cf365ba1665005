//! `compact ID --edit` on a real pseudo-terminal (stdin and stdout on it), with editors that
//! are small shell scripts written here: one that rewrites the summary with sed, one that empties
//! it, one that exits 1. The store is checked with the test's own SQL: the edited summary in
//! kodelet's history, the audit row, restore giving the original back, and nothing changed on
//! an abort or a refusal.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::Value;

use crate::common::{std_cmd, Env};

struct Out {
    stderr: String,
    code: i32,
}

/// Run `cmd` with stdin and stdout on a new pseudo-terminal, stderr a pipe.
fn on_tty(mut cmd: Command) -> Out {
    let (mut master, slave) = crate::pty::open(120);
    let slave_out = slave.try_clone().expect("dup the terminal");
    cmd.env_remove("COLUMNS")
        .stdin(Stdio::from(slave))
        .stdout(Stdio::from(slave_out))
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("spawn agent-db");
    drop(cmd);
    let reader = std::thread::spawn(move || {
        let mut buf = Vec::new();
        let mut chunk = [0u8; 4096];
        while let Ok(n) = master.read(&mut chunk) {
            if n == 0 {
                break;
            }
            buf.extend_from_slice(&chunk[..n]);
        }
        buf
    });
    let mut stderr = String::new();
    if let Some(mut e) = child.stderr.take() {
        e.read_to_string(&mut stderr).expect("stderr");
    }
    let status = child.wait().expect("wait");
    let _ = reader.join();
    Out {
        stderr,
        code: status.code().unwrap_or(-1),
    }
}

/// An executable script at `name` in the env's dir.
fn script(env: &Env, name: &str, body: &str) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let p = env.file(name, format!("#!/bin/sh\n{body}\n").as_bytes());
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    p
}

const ARGS: [&str; 5] = [
    "--strategy",
    "extractive",
    "--keep-tokens",
    "300",
    "--force",
];

/// `compact ID --edit` with `VISUAL`/`EDITOR` as given.
fn edit(env: &Env, id: &str, visual: Option<&str>, editor: Option<&str>) -> Out {
    let mut c = std_cmd(env.dir.path());
    c.arg("--db")
        .arg(&env.db)
        .args(["compact", id, "--edit"])
        .args(ARGS);
    c.env_remove("VISUAL").env_remove("EDITOR");
    if let Some(v) = visual {
        c.env("VISUAL", v);
    }
    if let Some(e) = editor {
        c.env("EDITOR", e);
    }
    on_tty(c)
}

fn first_id(env: &Env) -> String {
    env.ids(
        "SELECT id FROM conversations WHERE json_array_length(raw_messages) >= 8 ORDER BY id LIMIT 1",
    )[0]
    .clone()
}

fn raw(env: &Env, id: &str) -> String {
    env.conn()
        .query_row(
            "SELECT raw_messages FROM conversations WHERE id = ?1",
            [id],
            |r| r.get(0),
        )
        .unwrap()
}

/// The summary agent-db proposes for `id`, from a plan (extractive is deterministic).
fn proposed(env: &Env, id: &str) -> String {
    let file = env.dir.path().join("proposed.json");
    let out = env
        .cmd()
        .args(["compact", id])
        .args(ARGS)
        .arg("--plan-out")
        .arg(&file)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let plan: Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    plan["conversations"][0]["summary"]
        .as_str()
        .unwrap()
        .to_string()
}

fn quoted(p: &Path) -> String {
    format!("'{}'", p.display())
}

#[test]
fn the_edited_summary_is_written_archived_and_restorable() {
    let env = Env::generated(4, 41, &[]);
    let id = first_id(&env);
    let summary = proposed(&env, &id);
    let before = env.dump("conversations");
    let original = raw(&env, &id);
    // VISUAL wins over EDITOR; the editor value carries an argument, split as a shell would.
    let sed = script(
        &env,
        "sed editor.sh",
        "[ \"$1\" = \"-x\" ] || exit 3\nsed -i '1s/^/EDITED-BY-TEST /' \"$2\"",
    );
    let failing = script(&env, "fail.sh", "exit 1");
    let out = edit(
        &env,
        &id,
        Some(&format!("{} -x", quoted(&sed))),
        Some(&quoted(&failing)),
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(
        out.stderr.contains("opening it in your editor"),
        "{}",
        out.stderr
    );

    // The summary is the proposal with the editor's change, in kodelet's first message.
    let msgs: Vec<Value> = serde_json::from_str(&raw(&env, &id)).unwrap();
    let text = crate::plan_apply::texts(&msgs[0]);
    let expected = format!("EDITED-BY-TEST {}", summary.trim_end());
    assert!(text.contains(&expected), "{text}\n---\n{expected}");
    let c = env.conn();
    let (sha, review, edited): (String, String, i64) = c
        .query_row(
            "SELECT summary_sha256, json_extract(details, '$.review'), json_extract(details, '$.edited')
             FROM agent_db_compactions WHERE conversation_id = ?1",
            [&id],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
        )
        .unwrap();
    use sha2::{Digest, Sha256};
    assert_eq!(sha, hex::encode(Sha256::digest(expected.as_bytes())));
    assert_eq!((review.as_str(), edited), ("edit", 1));
    let archived: i64 = c
        .query_row("SELECT COUNT(*) FROM agent_db_archive", [], |r| r.get(0))
        .unwrap();
    assert!(archived > 0);
    drop(c);

    let out = env.cmd().args(["restore", &id]).output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(raw(&env, &id), original);
    assert_eq!(env.dump("conversations"), before);
}

#[test]
fn an_empty_file_or_a_failing_editor_writes_nothing() {
    let env = Env::generated(4, 42, &[]);
    let id = first_id(&env);
    let hash = env.files_hash();
    let empty = script(&env, "empty.sh", ": > \"$1\"");
    let out = edit(&env, &id, None, Some(&quoted(&empty)));
    assert_eq!(out.code, 7, "{}", out.stderr);
    assert!(
        out.stderr.contains("the summary is empty; nothing written"),
        "{}",
        out.stderr
    );
    assert_eq!(env.files_hash(), hash);

    let blank = script(&env, "blank.sh", "printf '  \\n\\n' > \"$1\"");
    let out = edit(&env, &id, None, Some(&quoted(&blank)));
    assert_eq!(out.code, 7, "{}", out.stderr);
    assert_eq!(env.files_hash(), hash);

    let failing = script(&env, "fail.sh", "sed -i 's/^/CHANGED /' \"$1\"\nexit 1");
    let out = edit(&env, &id, None, Some(&quoted(&failing)));
    assert_eq!(out.code, 7, "{}", out.stderr);
    assert!(out.stderr.contains("exited with"), "{}", out.stderr);
    assert_eq!(env.files_hash(), hash);
}

#[test]
fn edit_needs_a_terminal_and_one_conversation() {
    let env = Env::generated(4, 43, &[]);
    let id = first_id(&env);
    let hash = env.files_hash();
    let never = script(&env, "never.sh", "touch \"$(dirname \"$0\")/ran\"");
    // Not a terminal: a usage error with the plan-file way as the hint.
    let out = env
        .cmd()
        .args(["compact", &id, "--edit"])
        .args(ARGS)
        .env("EDITOR", quoted(&never))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("needs a terminal") && err.contains("--plan-out"),
        "{err}"
    );
    // Two conversations on a terminal: a usage error too.
    let ids = env.ids("SELECT id FROM conversations ORDER BY id LIMIT 2");
    let mut c = std_cmd(env.dir.path());
    c.arg("--db")
        .arg(&env.db)
        .args(["compact", &ids[0], &ids[1], "--edit"])
        .args(ARGS)
        .env("EDITOR", quoted(&never));
    let out = on_tty(c);
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert!(
        out.stderr.contains("reviews one conversation"),
        "{}",
        out.stderr
    );
    assert!(!env.dir.path().join("ran").exists(), "the editor ran");
    assert_eq!(env.files_hash(), hash);
}

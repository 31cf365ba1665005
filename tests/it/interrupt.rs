//! Ctrl-C in `compact`: the conversation in flight is finished, the report printed (counting the
//! conversations the selection never reached) and the exit code is 130.

use std::path::PathBuf;

use crate::common::Env;

/// `compact --concurrency 1` of `ids` with a before-compaction hook that marks in `marks` that
/// it runs and then takes a second; SIGINT (Ctrl-C) goes to agent-db while the first
/// conversation's hook runs. Returns what agent-db printed and its exit status.
pub fn interrupted_compaction(env: &Env, ids: &[String]) -> (std::process::Output, PathBuf) {
    let mut args: Vec<String> = ["--concurrency", "1", "--keep-tokens", "300"]
        .map(String::from)
        .to_vec();
    args.extend(ids.iter().cloned());
    interrupted_compaction_with(env, &args)
}

/// [`interrupted_compaction`] with `compact`'s arguments given.
pub fn interrupted_compaction_with(env: &Env, args: &[String]) -> (std::process::Output, PathBuf) {
    use std::os::unix::fs::PermissionsExt;
    let marks = env.dir.path().join("marks");
    std::fs::create_dir_all(&marks).unwrap();
    let hooks = env.dir.path().join(".agent-db").join("hooks");
    std::fs::create_dir_all(&hooks).unwrap();
    let hook = hooks.join("10-slow");
    std::fs::write(
        &hook,
        format!(
            "#!/bin/sh\ncase \"$1\" in\nhook)\n  echo before_compaction\n  ;;\nrun)\n  cat >/dev/null\n  touch '{}'/$$\n  sleep 1\n  ;;\nesac\n",
            marks.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&hook, std::fs::Permissions::from_mode(0o755)).unwrap();
    let mut c = crate::common::std_cmd(env.dir.path());
    c.current_dir(env.dir.path())
        .arg("--db")
        .arg(&env.db)
        .arg("compact")
        .args(args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let mut child = c.spawn().unwrap();
    // Until the first hook runs; agent-db exiting first means it never ran.
    while std::fs::read_dir(&marks).unwrap().count() == 0 {
        assert!(
            child.try_wait().unwrap().is_none(),
            "agent-db exited before the hook ran"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    // SAFETY: a signal to our own child.
    unsafe {
        libc::kill(child.id() as i32, libc::SIGINT);
    }
    (child.wait_with_output().unwrap(), marks)
}

/// Ctrl-C in a batch whose selection had not reached every conversation: the TOTAL line counts
/// the ones never visited instead of leaving them out, as do the JSON totals.
#[test]
fn ctrl_c_counts_the_conversations_the_selection_never_reached() {
    let env = Env::generated(40, 21, &[]);
    let mut list = env.cmd();
    list.args(["list", "--all-over", "0", "--ids"]);
    let selected = String::from_utf8(list.output().unwrap().stdout)
        .unwrap()
        .lines()
        .count();
    assert!(selected > 10, "{selected}");
    let args: Vec<String> = [
        "--all-over",
        "0",
        "--yes",
        "--jobs",
        "1",
        "--concurrency",
        "1",
        "--keep-tokens",
        "300",
    ]
    .map(String::from)
    .to_vec();
    let (out, _) = interrupted_compaction_with(&env, &args);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(130), "{stdout}\n{stderr}");
    let total = stdout
        .lines()
        .find(|l| l.starts_with("TOTAL "))
        .unwrap_or_else(|| panic!("{stdout}"));
    let rows = stdout
        .lines()
        .filter(|l| l.contains("compacted") || l.contains("skipped"))
        .count();
    assert!(
        total.contains(&format!(
            " of {selected} conversation(s) visited before Ctrl-C"
        )),
        "{total}\n{stdout}\nrows {rows}"
    );
    assert!(stderr.contains("not visited)"), "{stderr}");
}

/// Conversations with enough messages to compact, for [`interrupted_compaction`].
pub fn four_to_compact(env: &Env) -> Vec<String> {
    let ids = env.ids(
        "SELECT c.id FROM conversations c JOIN conversation_summaries s ON s.id = c.id
         WHERE s.message_count >= 6 ORDER BY c.id LIMIT 4",
    );
    assert_eq!(ids.len(), 4);
    ids
}

#[test]
fn ctrl_c_finishes_the_conversation_in_flight_reports_and_exits_130() {
    let env = Env::generated(16, 21, &[]);
    let ids = four_to_compact(&env);
    let before: Vec<Vec<String>> = env.dump("conversations");
    let (out, marks) = interrupted_compaction(&env, &ids);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(130), "{stdout}\n{stderr}");

    // The store: the conversation in flight was compacted whole, the others untouched.
    let audit: Vec<String> = env.ids("SELECT conversation_id FROM agent_db_compactions");
    assert_eq!(
        audit.len(),
        1,
        "exactly the conversation in flight: {stderr}"
    );
    assert_eq!(audit[0], ids[0]);
    let after = env.dump("conversations");
    let changed: Vec<_> = before.iter().zip(&after).filter(|(a, b)| a != b).collect();
    assert_eq!(changed.len(), 1);
    assert_eq!(
        std::fs::read_dir(&marks).unwrap().count(),
        1,
        "no other hook started"
    );

    // What was done is printed: the table with the one compacted row and the rest not
    // started (conversations the selection had not queued yet are not rows at all), and the
    // summary line with its hint.
    assert!(stdout.contains("compacted 1, skipped "), "{stdout}");
    assert!(stdout.contains("failed 0"), "{stdout}");
    assert!(
        stderr.contains(
            "error: interrupted (Ctrl-C): compacted 1, failed 0, and the rest not started"
        ),
        "{stderr}"
    );
    assert!(stderr.contains("hint: "), "{stderr}");
}

//! opencode's own session state respected (1.x and 2.x): a pending /undo (`revert`), child
//! sessions (`parent_id`), archived sessions (`time_archived`), the session list's order after
//! a batch, `show --raw` as the stored rows, and the transcript as opencode's UI shows it.
//! Every store is generated from opencode's DDL; the test's own SQL is the oracle.

use std::collections::BTreeSet;
use std::path::PathBuf;

use agent_db_synth::opencode::{generate_opencode, OpencodeEra};
use agent_db_synth::opencode_v2::{generate_opencode_v2, V2Era};
use agent_db_synth::SynthOptions;
use rusqlite::Connection;
use serde_json::Value;
use tempfile::TempDir;

use crate::common::{bare_cmd, files_hash, ids_with_status, json};

/// One generated store: a 1.x file (`session`) or a 2.x file (`session_v2`).
struct O {
    dir: TempDir,
    db: PathBuf,
    session: &'static str,
}

impl O {
    fn v1(n: usize) -> O {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("opencode.db");
        let opts = SynthOptions {
            conversations: n,
            seed: 7,
            scale: 0.5,
            ..SynthOptions::default()
        };
        generate_opencode(&db, &opts, OpencodeEra::Effect).unwrap();
        O {
            dir,
            db,
            session: "session",
        }
    }

    fn v2(n: usize) -> O {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("opencode.db");
        generate_opencode_v2(&db, n, 11, V2Era::Newest).unwrap();
        O {
            dir,
            db,
            session: "session_v2",
        }
    }

    fn both(n: usize) -> [O; 2] {
        [O::v1(n), O::v2(n)]
    }

    fn cmd(&self) -> assert_cmd::Command {
        let mut c = bare_cmd(self.dir.path());
        c.arg("--db").arg(&self.db);
        c
    }

    fn conn(&self) -> Connection {
        Connection::open(&self.db).unwrap()
    }

    fn strings(&self, sql: &str) -> Vec<String> {
        let c = self.conn();
        let mut st = c.prepare(sql).unwrap();
        let rows = st.query_map([], |r| r.get::<_, String>(0)).unwrap();
        rows.map(|r| r.unwrap()).collect()
    }

    fn exec(&self, sql: &str) {
        self.conn().execute_batch(sql).unwrap();
    }

    /// Root sessions, newest `time_updated` first.
    fn roots(&self) -> Vec<String> {
        self.strings(&format!(
            "SELECT id FROM {} WHERE parent_id IS NULL ORDER BY time_updated DESC, id",
            self.session
        ))
    }

    fn run_json(&self, args: &[&str]) -> (Value, i32) {
        let mut c = self.cmd();
        c.args(args);
        json(c)
    }
}

/// A listed row, selected or skipped (`list --json` version 2 keeps them apart).
fn row<'a>(doc: &'a Value, id: &str) -> &'a Value {
    ["conversations", "skipped"]
        .iter()
        .filter_map(|k| doc[*k].as_array())
        .flatten()
        .find(|r| r["id"] == id)
        .unwrap_or_else(|| panic!("{id} not in {doc:#}"))
}

#[test]
fn a_pending_undo_is_left_alone_and_nothing_is_written() {
    for o in O::both(6) {
        let ids = o.roots();
        let undone = &ids[0];
        // What opencode's /undo leaves until the next prompt (`SessionRevert.revert`).
        o.exec(&format!(
            "UPDATE {} SET revert = '{{\"messageID\":\"msg_x\",\"snapshot\":\"abc\"}}' WHERE id = '{undone}'",
            o.session
        ));
        let before = files_hash(&o.db);
        let (doc, code) = o.run_json(&["compact", undone, "--yes", "--json"]);
        assert_eq!(code, 0, "{}: {doc:#}", o.session);
        let r = row(&doc, undone);
        assert_eq!(r["status"], "skipped", "{doc:#}");
        let why = r.to_string();
        assert!(
            why.contains("undo pending") && why.contains("/redo") && why.contains("prompt"),
            "{why}"
        );
        assert_eq!(files_hash(&o.db), before, "{}: the file changed", o.session);
        // A batch skips it with the same reason and compacts the others.
        let (doc, _) = o.run_json(&[
            "compact",
            "--all-over",
            "0",
            "--idle",
            "0",
            "--yes",
            "--json",
            "--strategy",
            "extractive",
            "--keep-tokens",
            "80",
            "--force",
        ]);
        assert_eq!(row(&doc, undone)["status"], "skipped", "{doc:#}");
        assert!(!ids_with_status(&doc, "compacted").is_empty(), "{doc:#}");
        let n: i64 = o
            .conn()
            .query_row(
                "SELECT COUNT(*) FROM agent_db_compactions WHERE conversation_id = ?1",
                [undone],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(n, 0);
    }
}

fn selected(o: &O, args: &[&str]) -> BTreeSet<String> {
    let mut all = vec!["list", "--json", "--idle", "0"];
    all.extend_from_slice(args);
    let (doc, code) = o.run_json(&all);
    assert!(code == 0, "{doc:#}");
    ids_with_status(&doc, "selected").into_iter().collect()
}

#[test]
fn child_and_archived_sessions_are_marked_and_left_out_of_batches_unless_asked() {
    for o in O::both(8) {
        let t = o.session;
        let rated = selected(&o, &["--all-over", "0"]);
        let mut it = rated.iter();
        let (parent, child, archived) = (
            it.next().unwrap().clone(),
            it.next().unwrap().clone(),
            it.next().unwrap().clone(),
        );
        o.exec(&format!(
            "UPDATE {t} SET parent_id = '{parent}' WHERE id = '{child}';
             UPDATE {t} SET time_archived = time_updated + 1 WHERE id = '{archived}';"
        ));
        // The oracle: sessions with neither, by the test's own SQL, among the rated ones.
        let plain: BTreeSet<String> = o
            .strings(&format!(
                "SELECT id FROM {t} WHERE (parent_id IS NULL OR parent_id = '') AND time_archived IS NULL"
            ))
            .into_iter()
            .filter(|id| rated.contains(id))
            .collect();
        assert_eq!(selected(&o, &["--all-over", "0"]), plain, "{t}");
        let mut with_archived = plain.clone();
        with_archived.insert(archived.clone());
        assert_eq!(
            selected(&o, &["--all-over", "0", "--include-archived"]),
            with_archived,
            "{t}"
        );
        // A plain listing shows the child, marked, and leaves the archived one out.
        let (doc, _) = o.run_json(&["list", "--json"]);
        assert_eq!(row(&doc, &child)["parent_id"], parent.as_str(), "{doc:#}");
        assert_eq!(row(&doc, &child)["status"], "selected");
        assert_ne!(row(&doc, &archived)["status"], "selected");
        let table = o
            .cmd()
            .args(["list", "--include-archived"])
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&table.stdout);
        let line = |id: &str| {
            text.lines()
                .find(|l| l.contains(&id[..12]))
                .unwrap_or_else(|| panic!("{id}:\n{text}"))
                .to_string()
        };
        assert!(line(&child).contains('↳'), "{text}");
        assert!(line(&archived).contains("[archived]"), "{text}");
        // Named, each is compacted as any other.
        for id in [&child, &archived] {
            let (doc, code) = o.run_json(&["compact", id, "--dry-run", "--json", "--force"]);
            assert_eq!(code, 0, "{doc:#}");
            let detail = row(&doc, id)["detail"].to_string();
            assert!(
                !detail.contains("child session") && !detail.contains("archived"),
                "{doc:#}"
            );
        }
        // --follow passes over them.
        let newest_plain = o.strings(&format!(
            "SELECT id FROM {t} WHERE (parent_id IS NULL OR parent_id = '') AND time_archived IS NULL \
             ORDER BY time_updated DESC, id LIMIT 1"
        ));
        o.exec(&format!(
            "UPDATE {t} SET time_updated = time_updated + 999999999 WHERE id IN ('{child}', '{archived}')"
        ));
        let (doc, _) = o.run_json(&["list", "--follow", "--json"]);
        assert_eq!(
            ids_with_status(&doc, "selected"),
            newest_plain,
            "{t}: {doc:#}"
        );
    }
}

/// The listing's ids, in order.
fn listed(o: &O, args: &[&str]) -> Vec<String> {
    let mut all = vec!["list", "--json", "--idle", "0"];
    all.extend_from_slice(args);
    let (doc, code) = o.run_json(&all);
    assert_eq!(code, 0, "{doc:#}");
    ids_with_status(&doc, "selected")
}

#[test]
fn a_batch_of_old_sessions_keeps_the_list_order_and_follow_picks_the_latest() {
    for o in O::both(8) {
        let t = o.session;
        let order = listed(&o, &[]);
        let newest = order[0].clone();
        // Compact every session but the one used last.
        let mut args: Vec<&str> = vec![
            "compact",
            "--yes",
            "--json",
            "--strategy",
            "extractive",
            "--keep-tokens",
            "80",
            "--force",
        ];
        args.extend(order[1..].iter().map(String::as_str));
        let (doc, _) = o.run_json(&args);
        let compacted = ids_with_status(&doc, "compacted");
        assert!(compacted.len() >= 3, "{t}: {doc:#}");
        assert_eq!(listed(&o, &[]), order, "{t}: the listing order moved");
        let (doc, code) = o.run_json(&["compact", "--follow", "--dry-run", "--json"]);
        assert_eq!(code, 0, "{doc:#}");
        assert_eq!(
            doc["conversations"][0]["id"],
            newest.as_str(),
            "{t}: {doc:#}"
        );
        // As opencode leaves its own compaction: time_updated at or after the newest row.
        let rows = if t == "session" {
            "message"
        } else {
            "session_message"
        };
        for id in &compacted {
            let ok: i64 = o
                .conn()
                .query_row(
                    &format!(
                        "SELECT time_updated >= (SELECT MAX(time_created) FROM {rows} WHERE session_id = ?1) \
                         FROM {t} WHERE id = ?1"
                    ),
                    [id],
                    |r| r.get(0),
                )
                .unwrap();
            assert_eq!(ok, 1, "{t} {id}");
        }
    }
}

fn show(o: &O, args: &[&str]) -> String {
    let out = o.cmd().arg("show").args(args).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn show_hides_opencodes_bookkeeping_parts_unless_verbose_and_shows_patches_whole() {
    let o = O::v1(10);
    // A session with a patch part, and that part's files, by the test's own read.
    let (sid, data): (String, String) = o
        .conn()
        .query_row(
            "SELECT m.session_id, p.data FROM part p JOIN message m ON m.id = p.message_id \
             WHERE json_extract(p.data, '$.type') = 'patch' AND json_array_length(p.data, '$.files') > 0 \
             ORDER BY p.id LIMIT 1",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    let patch: Value = serde_json::from_str(&data).unwrap();
    let bookkeeping: i64 = o
        .conn()
        .query_row(
            "SELECT COUNT(*) FROM part p JOIN message m ON m.id = p.message_id WHERE m.session_id = ?1 \
             AND json_extract(p.data, '$.type') IN ('step-start','step-finish','snapshot','patch','agent','retry')",
            [&sid],
            |r| r.get(0),
        )
        .unwrap();
    assert!(bookkeeping > 0);
    let plain = show(&o, &[&sid, "--no-pager"]);
    for kind in [
        "step-start",
        "step-finish",
        "snapshot",
        "patch",
        "agent",
        "retry",
    ] {
        assert!(
            !plain.contains(&format!("[opencode:{kind}")),
            "{kind}:\n{plain}"
        );
    }
    assert!(plain.contains("--verbose shows them"), "{plain}");
    let verbose = show(&o, &[&sid, "--no-pager", "--verbose"]);
    assert!(!verbose.contains("[opencode:patch: 0 bytes]"), "{verbose}");
    let files: Vec<&str> = patch["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f.as_str().unwrap())
        .collect();
    let line = verbose
        .lines()
        .find(|l| l.contains("[opencode:patch]") && l.contains(patch["hash"].as_str().unwrap()))
        .unwrap_or_else(|| panic!("{verbose}"));
    for f in files {
        assert!(line.contains(f), "{f}: {line}");
    }
    let shown = verbose.matches("[opencode:").count() as i64;
    assert!(shown >= bookkeeping, "{shown} < {bookkeeping}");
}

#[test]
fn a_multi_line_title_is_one_header_line() {
    for o in O::both(3) {
        let id = o.roots()[0].clone();
        o.exec(&format!(
            "UPDATE {} SET title = 'Fix the parser\nand then the lexer\nthird line' WHERE id = '{id}'",
            o.session
        ));
        let out = show(&o, &[&id, "--no-pager"]);
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines[1], "  name: Fix the parser…", "{out}");
        assert!(lines[2].starts_with("  provider: "), "{out}");
        let listed = String::from_utf8(o.cmd().arg("list").output().unwrap().stdout).unwrap();
        assert!(!listed.contains("and then the lexer"), "{listed}");
        assert!(listed.contains("Fix the parser…"), "{listed}");
        // On a terminal at 80 columns too (the header wraps under its own indent).
        let mut c = crate::common::std_cmd(o.dir.path());
        c.arg("--db")
            .arg(&o.db)
            .args(["show", &id, "--no-pager"])
            .env("NO_COLOR", "1");
        let tty = crate::pty::run(c, 80);
        assert_eq!(tty.code, 0, "{}", tty.stderr);
        let lines: Vec<&str> = tty
            .stdout
            .lines()
            .map(|l| l.trim_end_matches('\r'))
            .collect();
        assert_eq!(lines[1], "  name: Fix the parser…", "{}", tty.stdout);
        assert!(lines[2].starts_with("  provider: "), "{}", tty.stdout);
    }
}

/// What the model is sent is what opencode shows and sends: its bookkeeping parts (step-start,
/// step-finish, snapshot, patch, agent, retry) are left out of the llm transcript, as `show`
/// leaves them out. The parts' presence in the summarized head is the test's own SQL.
#[test]
fn the_llm_transcript_leaves_out_opencodes_bookkeeping_parts() {
    use crate::llm::{llm_args, ok, prompt, transcript, Server, KEY};
    use agent_db::provider::ProviderKind;
    let o = O::v1(10);
    let sid = o.roots()[0].clone();
    let bookkeeping: i64 = o
        .conn()
        .query_row(
            "SELECT COUNT(*) FROM part p JOIN message m ON m.id = p.message_id WHERE m.session_id = ?1 \
             AND json_extract(p.data, '$.type') IN ('step-start','step-finish','snapshot','patch','agent','retry')",
            [&sid],
            |r| r.get(0),
        )
        .unwrap();
    assert!(bookkeeping > 2, "{bookkeeping}");
    let kind = ProviderKind::OpenAi;
    let server = Server::start(move |_, _| ok(kind, "BOOKKEEPING-SUMMARY", (10, 5)));
    let out = o
        .cmd()
        .env("AGENT_DB_API_KEY", KEY)
        .args([
            "compact",
            &sid,
            "--idle",
            "0",
            "--yes",
            "--keep-tokens",
            "500",
            "--json",
        ])
        .args(["--summary-context", "400000"])
        .args(llm_args(kind, &server))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let reqs = server.requests();
    assert!(!reqs.is_empty());
    let mut sent = String::new();
    for r in &reqs {
        sent.push_str(transcript(&prompt(kind, r).user));
    }
    assert!(sent.contains("[assistant]"), "{sent}");
    for part in [
        "step-start",
        "step-finish",
        "snapshot",
        "patch",
        "agent",
        "retry",
    ] {
        assert!(
            !sent.contains(&format!("[opencode:{part}")),
            "{part}:\n{sent}"
        );
    }
}

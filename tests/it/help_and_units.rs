//! Help, the man page and units: subcommand help lists only its own options at 80 columns, the
//! man page references no other page, one percentage style, and `stats` in the units it names.

use crate::common::{bare_cmd, json, Env};
use crate::ids_and_errors::run;

#[test]
fn subcommand_help_lists_only_its_own_options_at_80_columns() {
    let home = tempfile::tempdir().unwrap();
    let help = |args: &[&str]| {
        let mut c = crate::common::std_cmd(home.path());
        c.env("NO_COLOR", "1").args(args);
        let out = crate::pty::run(c, 80);
        assert_eq!(out.code, 0, "{args:?}: {}", out.stderr);
        out.stdout
    };
    let list = help(&["list", "--help"]);
    // No global block: its heading and its options are gone, one line points at them.
    assert!(!list.contains("Global options:"), "{list}");
    for flag in [
        "--db <PATH>",
        "--agent <AGENT>",
        "--color <WHEN>",
        "--config <PATH>",
    ] {
        assert!(!list.contains(flag), "{flag} in list --help:\n{list}");
    }
    assert!(list.contains("see `agent-db --help`"), "{list}");
    for line in list.lines() {
        assert!(line.chars().count() <= 80, "{line}");
    }
    insta::assert_snapshot!("list_help_80", list);
    // The same for every subcommand; the top-level help keeps the global options.
    for sub in [
        "show", "compact", "history", "restore", "stats", "vacuum", "man",
    ] {
        let h = help(&[sub, "--help"]);
        assert!(
            !h.contains("Global options:") && !h.contains("--db <PATH>"),
            "{sub}:\n{h}"
        );
        assert!(h.contains("see `agent-db --help`"), "{sub}:\n{h}");
    }
    let top = help(&["--help"]);
    assert!(
        top.contains("Global options:") && top.contains("--db <PATH>"),
        "{top}"
    );

    // The hidden global options still work after the subcommand, --db from the environment too.
    let env = Env::generated(3, 2, &[]);
    let mut c = bare_cmd(env.dir.path());
    c.args(["list", "--json", "--quiet", "--db"]).arg(&env.db);
    assert_eq!(json(c).1, 0);
    let mut c = bare_cmd(env.dir.path());
    c.env("AGENT_DB_PATH", &env.db).args(["list", "--json"]);
    assert_eq!(json(c).1, 0);
    // Completions still offer the global options after a subcommand.
    let out = run(bare_cmd(home.path()).args(["completions", "bash"]));
    let list_case = out
        .stdout
        .split("agent__subcmd__db__subcmd__list)")
        .nth(1)
        .expect("bash completion for list");
    let opts = list_case.lines().find(|l| l.contains("opts=")).unwrap();
    assert!(
        opts.contains("--db") && opts.contains("--all-over"),
        "{opts}"
    );
}

#[test]
fn the_man_page_references_no_other_page_and_has_its_own_sections() {
    let home = tempfile::tempdir().unwrap();
    let out = run(bare_cmd(home.path()).arg("man"));
    assert_eq!(out.code, 0, "{}", out.stderr);
    let roff = out.stdout;
    // No agent-db-list(1) and the like: those pages do not exist.
    assert!(!roff.contains("agent-db-"), "references another page");
    assert!(!roff.contains("(1)"), "references another page");
    let sections: Vec<&str> = roff
        .lines()
        .filter_map(|l| l.strip_prefix(".SH "))
        .collect();
    for want in [
        "NAME",
        "SYNOPSIS",
        "COMMANDS",
        "EXAMPLES",
        "STORE",
        "\"EXIT STATUS\"",
    ] {
        assert!(sections.contains(&want), "{want} in {sections:?}");
    }
    // Every subcommand has its own subsection with its own options.
    for sub in [
        "list",
        "show",
        "compact",
        "history",
        "restore",
        "prune-archive",
        "stats",
    ] {
        assert!(
            roff.contains(&format!(".SS \"agent-db {sub}\"")),
            "{sub} subsection"
        );
    }
    // Each exit code is an item of its own in EXIT STATUS, exactly the documented ones.
    let exit = roff.split(".SH \"EXIT STATUS\"").nth(1).unwrap();
    let exit = exit.split("\n.SH ").next().unwrap();
    let codes: Vec<i32> = exit
        .lines()
        .collect::<Vec<_>>()
        .windows(2)
        .filter(|w| w[0] == ".TP")
        .filter_map(|w| {
            w[1].trim_start_matches("\\fB")
                .trim_end_matches("\\fR")
                .parse()
                .ok()
        })
        .collect();
    assert_eq!(codes, [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 130]);
    // groff renders it, with the examples apart from the exit codes.
    let page = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(page.path(), &roff).unwrap();
    let groff = std::process::Command::new("groff")
        .args(["-man", "-Tutf8", "-P", "-cbou"])
        .arg(page.path())
        .output();
    match groff {
        Err(e) => crate::common::skip(&format!(
            "groff cannot run ({e}): install groff to check the rendered page"
        )),
        Ok(o) => {
            assert!(o.status.success(), "groff failed: {o:?}");
            let text = String::from_utf8_lossy(&o.stdout);
            let ex = text.find("EXAMPLES").expect("EXAMPLES rendered");
            let st = text.find("EXIT STATUS").expect("EXIT STATUS rendered");
            assert!(ex < st);
            assert!(
                text[ex..st].contains("agent-db list --all-over 0.7"),
                "{}",
                &text[ex..st]
            );
            assert!(
                !text[ex..st].contains("store unusable"),
                "exit codes run into the examples"
            );
        }
    }
}

/// The figure and unit `stats` prints for a byte count, computed here: binary units with their
/// binary names (1 KiB = 1024 bytes).
fn iec(n: u64) -> String {
    let f = n as f64;
    if n < 1024 {
        format!("{n} B")
    } else if n < 1024 * 1024 {
        format!("{:.1} KiB", f / 1024.0)
    } else {
        format!("{:.1} MiB", f / 1024.0 / 1024.0)
    }
}

#[test]
fn one_percentage_style_and_stats_in_the_units_it_names() {
    let env = Env::generated(12, 7, &[]);
    let big = env.ids(
        "SELECT c.id FROM conversations c JOIN conversation_summaries s ON s.id = c.id
         WHERE s.message_count >= 20 ORDER BY c.id LIMIT 1",
    )[0]
    .clone();
    // A fresh store: nothing to vacuum, nothing archived, so no hints to do either.
    let out = run(env.cmd().arg("stats"));
    assert_eq!(out.code, 0);
    let line = |s: &str, key: &str| {
        s.lines()
            .find(|l| l.starts_with(key))
            .unwrap_or_else(|| panic!("{key}:\n{s}"))
            .to_string()
    };
    let len = std::fs::metadata(&env.db).unwrap().len();
    assert!(
        line(&out.stdout, "file ").contains(&format!("file          {} (", iec(len))),
        "{}",
        out.stdout
    );
    let free: i64 = env
        .conn()
        .query_row("PRAGMA freelist_count", [], |r| r.get(0))
        .unwrap();
    if free == 0 {
        assert!(
            !line(&out.stdout, "free pages").contains("vacuum"),
            "{}",
            out.stdout
        );
    }
    assert!(
        !line(&out.stdout, "archive").contains("prune-archive"),
        "{}",
        out.stdout
    );
    assert!(!out.stdout.contains(" KB") && !out.stdout.contains(" MB"));

    // After a compaction the archive holds the original: now the hint is there.
    assert_eq!(
        run(env.cmd().args(["compact", &big, "--keep-tokens", "500"])).code,
        0
    );
    let out = run(env.cmd().arg("stats"));
    assert!(
        line(&out.stdout, "archive").contains("`prune-archive` frees it"),
        "{}",
        out.stdout
    );

    // The compact table shows utilization as list does: percentages, never 0.38-style ratios.
    let mut c = crate::common::std_cmd(env.dir.path());
    c.env("NO_COLOR", "1").arg("--db").arg(&env.db).args([
        "compact",
        "--dry-run",
        "--all-over",
        "0",
        "--idle",
        "0",
        "--keep-tokens",
        "300",
    ]);
    let table = crate::pty::run(c, 120).stdout;
    let header = table.lines().next().unwrap();
    assert!(
        header.contains(" USE ") && !header.contains("UTIL"),
        "{header}"
    );
    let ratio = regex_lite_ratio(&table);
    assert!(
        ratio.is_none(),
        "a 0.xx ratio in the table: {ratio:?}\n{table}"
    );
    assert!(table.contains("% → "), "{table}");
}

/// The first `0.dd` (a ratio in the old style) in `s`, if any.
fn regex_lite_ratio(s: &str) -> Option<String> {
    let b = s.as_bytes();
    (0..b.len().saturating_sub(3)).find_map(|i| {
        let prev_ok = i == 0 || !(b[i - 1].is_ascii_digit() || b[i - 1] == b'.');
        (prev_ok
            && b[i] == b'0'
            && b[i + 1] == b'.'
            && b[i + 2].is_ascii_digit()
            && b[i + 3].is_ascii_digit())
        .then(|| s[i..i + 4].to_string())
    })
}

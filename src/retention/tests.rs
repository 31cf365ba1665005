use super::*;
use serde_json::value::RawValue;

fn msg(role: Role, blocks: Vec<Block>) -> Message {
    Message {
        role,
        blocks,
        raw: RawValue::from_string("null".into()).unwrap(),
    }
}

fn user(t: &str) -> Message {
    msg(Role::User, vec![Block::Text { text: t.into() }])
}

fn assistant(t: &str) -> Message {
    msg(Role::Assistant, vec![Block::Text { text: t.into() }])
}

fn call(id: &str, name: &str, input: serde_json::Value) -> Message {
    msg(
        Role::Assistant,
        vec![Block::ToolCall {
            id: id.into(),
            name: name.into(),
            input: input.to_string(),
        }],
    )
}

fn result(id: &str, content: &str, is_error: bool) -> Message {
    msg(
        Role::Tool,
        vec![Block::ToolResult {
            call_id: id.into(),
            content: content.into(),
            is_error,
            images: vec![],
        }],
    )
}

fn texts(a: &Artifacts, k: Kind) -> Vec<&str> {
    a.0.iter()
        .filter(|x| x.kind == k)
        .map(|x| x.text.as_str())
        .collect()
}

fn span() -> Vec<Message> {
    vec![
        user("Fix the flaky test in src/store/lock.rs. Always run cargo fmt before committing. The limit is max_retries = 250, see https://example.com/issue/7."),
        call("c1", "bash", serde_json::json!({"command": "cargo test --lib lock::\necho done"})),
        result("c1", "error[E0308]: mismatched types\n  --> src/store/lock.rs:42:9", true),
        call("c2", "todo_write", serde_json::json!({"todos": [
            {"content": "Add a regression test for the busy lock", "status": "pending"},
            {"content": "Read the old code", "status": "completed"}]})),
        call("c3", "bash", serde_json::json!({"command": "cargo test --lib lock::"})),
        result("c3", "test result: ok. 3 passed", false),
        assistant("Changed Cargo.toml and README.md."),
        user("Now update the changelog for HttpClient"),
    ]
}

#[test]
fn extracts_each_kind() {
    let a = extract(&span());
    assert_eq!(
        texts(&a, Kind::Path),
        ["src/store/lock.rs", "Cargo.toml", "README.md"]
    );
    assert_eq!(texts(&a, Kind::Url), ["https://example.com/issue/7"]);
    assert_eq!(texts(&a, Kind::Command), ["cargo test --lib lock::"]);
    // The last result of the same command decides its status.
    assert_eq!(
        a.0.iter()
            .find(|x| x.kind == Kind::Command)
            .unwrap()
            .status
            .as_deref(),
        Some("ok")
    );
    assert_eq!(texts(&a, Kind::Error), ["error[E0308]: mismatched types"]);
    assert_eq!(
        texts(&a, Kind::Identifier),
        ["max_retries", "250", "HttpClient"]
    );
    assert_eq!(
        texts(&a, Kind::Rule),
        ["Always run cargo fmt before committing"]
    );
    assert_eq!(
        texts(&a, Kind::Todo),
        ["Add a regression test for the busy lock"]
    );
    assert_eq!(
        texts(&a, Kind::Latest),
        ["Now update the changelog for HttpClient"]
    );
}

#[test]
fn everything_kept_scores_one_and_nothing_kept_scores_zero() {
    let s = span();
    let r = score(&s, &s);
    assert_eq!(r.score, 1.0);
    assert!(r.lost.is_empty());
    let r = score(&s, &[user("[agent-db compaction summary]\n\nWe worked.")]);
    assert_eq!(r.score, 0.0);
    assert_eq!(r.kind_score(Kind::Path), Some(0.0));
    assert_eq!(r.kind_score(Kind::Url), Some(0.0));
    assert_eq!(
        r.by_kind.values().map(|c| c.total).sum::<usize>(),
        extract(&s).0.len()
    );
}

#[test]
fn empty_span_scores_one() {
    let r = score(&[], &[user("x")]);
    assert_eq!((r.score, r.by_kind.len()), (1.0, 0));
}

#[test]
fn verbatim_kinds_need_the_exact_text_prose_kinds_need_80_percent_of_words() {
    let c = Corpus::of_text("we touched src/store/LOCK.rs and   ran cargo  test --lib lock::");
    let path = |t: &str| Artifact::new(Kind::Path, t);
    assert!(!c.contains(&path("src/store/lock.rs")), "case-sensitive");
    assert!(
        c.contains(&Artifact::new(Kind::Command, "cargo test --lib lock::")),
        "whitespace-normalized"
    );
    let rule = |t: &str| Artifact::new(Kind::Rule, t);
    let c = Corpus::of_text("Rule: ALWAYS run cargo fmt, before each commit");
    // always, run, cargo, fmt, before, committing: 5 of 6 words present (83%).
    assert!(c.contains(&rule("Always run cargo fmt before committing")));
    // never, push, main, branch, without, review: 0 of 6.
    assert!(!c.contains(&rule("Never push to the main branch without review")));
}

#[test]
fn the_score_counts_per_kind_and_lists_what_was_lost() {
    let s = span();
    let summary = user("[agent-db compaction summary]\n\nEdited src/store/lock.rs, Cargo.toml, README.md and src/store/lock.rs:42:9. Always run cargo fmt before committing.");
    let r = score(&s, &[summary]);
    assert_eq!(r.by_kind[&Kind::Path], Count { kept: 3, total: 3 });
    assert_eq!(r.by_kind[&Kind::Rule], Count { kept: 1, total: 1 });
    assert_eq!(r.by_kind[&Kind::Command], Count { kept: 0, total: 1 });
    assert!(r.lost.iter().any(|a| a.kind == Kind::Todo));
    assert!(r.brief().contains("command 0/1"), "{}", r.brief());
}

#[test]
fn prose_numbers_and_versions_are_not_paths() {
    for w in ["1.5", "e.g", "and", "v1.2.3", "...", "i.e"] {
        assert!(!is_path(w), "{w}");
    }
    for w in [
        "/tmp",
        "a/b",
        "./x.rs",
        "~/notes.md",
        "main.go",
        "src/lib.rs",
    ] {
        assert!(is_path(w), "{w}");
    }
    assert_eq!(strip_position("src/lib.rs:10:2"), "src/lib.rs");
}

#[test]
fn the_ledger_lists_what_the_result_lacks_within_its_budget_and_then_everything_counts() {
    let s = span();
    let arts = extract(&s);
    let summary = "We fixed a test.";
    let l = ledger(&arts, &Corpus::of_text(summary), 4000).expect("missing artifacts");
    assert!(l.contains("- cargo test --lib lock:: [ok]"), "{l}");
    assert!(
        l.contains("- Add a regression test for the busy lock"),
        "{l}"
    );
    let full = format!("{summary}\n\n{l}");
    let r = score_artifacts(&arts, &Corpus::of_text(&full));
    for k in [Kind::Path, Kind::Command, Kind::Todo, Kind::Rule] {
        assert_eq!(r.kind_score(k), Some(1.0), "{k:?}: {l}");
    }
    // Nothing missing, no ledger; a tight budget keeps whole lines under it.
    assert_eq!(ledger(&arts, &Corpus::of_text(&full), 4000), None);
    let small = ledger(&arts, &Corpus::of_text(summary), 200).unwrap();
    assert!(small.len() <= 200, "{}", small.len());
    assert!(
        small.ends_with(&format!("over the ledger's size)\n{LEDGER_END}")),
        "{small}"
    );
}

#[test]
fn json_history_is_read_as_its_strings() {
    let raw = serde_json::json!([{"role":"user","content":"see src/a.rs"},
        {"role":"assistant","tool_calls":[{"function":{"name":"bash","arguments":"{\"command\":\"make   all\"}"}}]}])
    .to_string();
    let c = Corpus::of_json(&raw);
    assert!(c.contains(&Artifact::new(Kind::Path, "src/a.rs")));
    assert!(c.contains(&Artifact::new(Kind::Command, "make all")));
}

/// docker-agent's todo tools (`create_todo`, `create_todos`, `update_todos`): the items the calls
/// create are to-dos until a result's `all_todos` says they are completed.
#[test]
fn create_and_update_todo_calls_and_their_results() {
    let span = vec![
        user("Port the parser."),
        call(
            "t1",
            "create_todos",
            serde_json::json!({"descriptions": ["Port the lexer", "Port the grammar tables"]}),
        ),
        result(
            "t1",
            r#"{"created":[],"all_todos":[{"id":"todo_1","description":"Port the lexer","status":"pending"},{"id":"todo_2","description":"Port the grammar tables","status":"pending"}]}"#,
            false,
        ),
        call(
            "t2",
            "create_todo",
            serde_json::json!({"description": "Benchmark the port"}),
        ),
        call(
            "t3",
            "update_todos",
            serde_json::json!({"updates": [{"id": "todo_1", "status": "completed"}]}),
        ),
        result(
            "t3",
            r#"{"updated":[{"id":"todo_1","status":"completed"}],"all_todos":[{"id":"todo_1","description":"Port the lexer","status":"completed"},{"id":"todo_2","description":"Port the grammar tables","status":"in-progress"},{"id":"todo_3","description":"Benchmark the port","status":"pending"}]}"#,
            false,
        ),
    ];
    let a = extract(&span);
    assert_eq!(
        texts(&a, Kind::Todo),
        ["Port the grammar tables", "Benchmark the port"]
    );
}

/// goose's `todo__todo_write` takes a markdown checklist that replaces the previous one; kodelet's
/// `todo_write` a whole list: an item a later call checks or drops is no longer open.
#[test]
fn whole_list_todo_calls_replace_the_previous_list() {
    let span = vec![
        user("Tidy the build."),
        call(
            "g1",
            "todo__todo_write",
            serde_json::json!({"content": "- [ ] Drop the vendored zlib\n- [ ] Pin the toolchain\n  - [ ] Update CI image\n- [x] Read the old Makefile"}),
        ),
        call(
            "g2",
            "todo__todo_write",
            serde_json::json!({"content": "- [x] Drop the vendored zlib\n- [ ] Pin the toolchain\n  - [ ] Update CI image"}),
        ),
        call(
            "k1",
            "todo_write",
            serde_json::json!({"todos": [
            {"content": "Rename the crate", "status": "in_progress", "priority": "high"},
            {"content": "Write the changelog", "status": "pending", "priority": "low"}]}),
        ),
        call(
            "k2",
            "todo_write",
            serde_json::json!({"todos": [
            {"content": "Rename the crate", "status": "completed", "priority": "high"},
            {"content": "Write the changelog", "status": "pending", "priority": "low"}]}),
        ),
    ];
    let a = extract(&span);
    assert_eq!(
        texts(&a, Kind::Todo),
        ["Write the changelog"],
        "the second kind of list replaced the checklist (one whole list at a time)"
    );
    let checklist_only = extract(&span[..3]);
    assert_eq!(
        texts(&checklist_only, Kind::Todo),
        ["Pin the toolchain", "Update CI image"]
    );
}

#[test]
fn native_todos_are_added_once_after_the_spans() {
    let mut a = extract(&span());
    a.add_native_todos(&[
        "Add a regression test for the busy lock".into(),
        "  Ship the fix  ".into(),
        String::new(),
    ]);
    assert_eq!(
        texts(&a, Kind::Todo),
        ["Add a regression test for the busy lock", "Ship the fix"]
    );
    assert!(todo_is_open("in-progress") && todo_is_open("pending") && todo_is_open("in_progress"));
    assert!(!todo_is_open("Completed") && !todo_is_open("canceled") && !todo_is_open("cancelled"));
}

/// A session that touched more paths than the ledger's bound holds still gets every command,
/// to-do and rule into it; the paths fill what is left, whole lines only.
#[test]
fn a_full_ledger_leaves_out_paths_not_commands() {
    let mut span = vec![user("Always keep the changelog current. Sweep the tree.")];
    for i in 0..400 {
        span.push(call(
            &format!("p{i}"),
            "read_file",
            serde_json::json!({"path": format!("src/generated/module_{i:03}/handlers.rs")}),
        ));
    }
    for i in 0..20 {
        span.push(call(
            &format!("c{i}"),
            "bash",
            serde_json::json!({"command": format!("cargo test -p sweep_{i}")}),
        ));
    }
    span.push(call("t", "todo_write", serde_json::json!({"todos": [{"content": "Sweep the remaining fixtures", "status": "pending"}]})));
    let arts = extract(&span);
    let l = ledger(&arts, &Corpus::of_text("Done."), 8000).unwrap();
    assert!(l.len() <= 8000);
    let r = score_artifacts(&arts, &Corpus::of_text(&l));
    for k in [Kind::Command, Kind::Todo, Kind::Rule] {
        assert_eq!(r.kind_score(k), Some(1.0), "{k:?}");
    }
    let paths = r.by_kind[&Kind::Path];
    assert!(paths.kept > 150 && paths.kept < paths.total, "{paths:?}");
    // It says how many it left out: the paths not in it, counted here on the span itself.
    let listed = (0..400)
        .filter(|i| l.contains(&format!("- src/generated/module_{i:03}/handlers.rs\n")))
        .count();
    assert!(
        l.ends_with(&format!(
            "\n({} more not listed: over the ledger's size)\n{LEDGER_END}",
            400 - listed
        )),
        "{}",
        &l[l.len() - 120..]
    );
    // With room for all of them (a short model answer leaves the ledger more), every path is
    // listed and nothing is said to be left out.
    let all = ledger(&arts, &Corpus::of_text("Done."), 40_000).unwrap();
    assert!(all.len() <= 40_000 && !all.contains("more not listed"));
    assert_eq!(
        score_artifacts(&arts, &Corpus::of_text(&all)).kind_score(Kind::Path),
        Some(1.0)
    );
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(100))]

    /// The one-pass match of every artifact answers what matching each alone answers, with
    /// repeated, overlapping, empty-after-squash and word-matched artifacts mixed in.
    #[test]
    fn contains_each_is_contains_of_each(
        text in proptest::collection::vec(0usize..17, 0..40),
        arts in proptest::collection::vec(
            (0usize..Kind::ALL.len(), proptest::collection::vec(0usize..17, 1..4)),
            0..30,
        ),
    ) {
        // Words in any case and script (Unicode lowercasing changes `İ`'s length, and takes
        // the Kelvin sign to ASCII `k`), and a long one: the word pass looks up only what is
        // wanted.
        const PIECES: [&str; 17] = [
            "src/a.rs", "a.rs", " ", "\n\t", "max_retries", "Error: boom", "ab", "b", "--", "the build",
            "The BUILD", "Éclair", "éclairs", "İstanbul", "supercalifragilistic", "\u{212A}elvin", "KELVIN",
        ];
        let corpus = Corpus::of_text(&text.iter().map(|&k| PIECES[k]).collect::<String>());
        let arts: Vec<Artifact> = arts
            .iter()
            .map(|(k, ps)| Artifact::new(Kind::ALL[*k], ps.iter().map(|&p| PIECES[p]).collect::<String>()))
            .collect();
        let each: Vec<bool> = arts.iter().map(|a| corpus.contains(a)).collect();
        proptest::prop_assert_eq!(corpus.contains_each(&arts), each);
    }
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(64))]

    /// The word set is the set of [`words`]; squashing is splitting on whitespace and joining
    /// with one space.
    #[test]
    fn word_set_and_squash_match_their_definitions(s in "[a-zA-Z0-9_ \\t\\nÉéΣσς.:/\\x{0B}\\x{0C}\\r\\x{85}\\x{a0}\\x{2003}\\x{3000}\\x{200b}-]{0,80}") {
        let want: rustc_hash::FxHashSet<String> = words(&s).collect();
        proptest::prop_assert_eq!(word_set(&s), want);
        proptest::prop_assert_eq!(squash(&s), s.split_whitespace().collect::<Vec<_>>().join(" "));
    }
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(64))]

    /// The messages and a text normalized at once are the messages normalized, then joined to
    /// the text and normalized again.
    #[test]
    fn of_messages_and_is_the_joined_corpus(
        texts in proptest::collection::vec("[a-c \\t\\n]{0,8}", 0..4),
        more in "[a-c \\t\\n]{0,8}",
    ) {
        let msgs: Vec<Message> = texts.iter().map(|t| user(t)).collect();
        let twice = Corpus::of_text(&format!("{}\n{more}", Corpus::of_messages(&msgs).text()));
        let once = Corpus::of_messages_and(&msgs, &format!("\n{more}"));
        proptest::prop_assert_eq!(once.text(), twice.text());
    }
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(256))]

    /// `alnum_words` reads a text into exactly the pieces of its definition.
    #[test]
    fn alnum_words_are_the_split_of_their_definition(
        t in "([a-zA-Z0-9_ .:/-]|é|É|ß|İ|\u{212A}|٣|²|\\x{301}|\\x{200b}|\\x{a0}|日本|🦀|\\n){0,40}",
    ) {
        let want: Vec<&str> = t
            .split(|c: char| !c.is_alphanumeric())
            .filter(|w| !w.is_empty())
            .collect();
        proptest::prop_assert_eq!(super::alnum_words(&t).collect::<Vec<_>>(), want);
    }
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(512))]

    /// `error_start` is the rule as written, and the first letters it checks first are those
    /// of `ERROR_STARTS`.
    #[test]
    fn error_start_is_to_lowercase_starts_with(
        l in "(ERROR|Error|error|FAIL|Failed|fatal|Traceback|PANICKED|\u{212A}|İ|Σ|é|: | |x|`|%){0,4}",
    ) {
        let low = l.to_lowercase();
        proptest::prop_assert_eq!(
            super::error_start(&l),
            super::ERROR_STARTS.iter().any(|s| low.starts_with(s)),
            "{:?}", l
        );
    }
}

#[test]
fn error_starts_begin_with_the_letters_error_start_checks() {
    for s in ERROR_STARTS {
        assert!(matches!(s.as_bytes()[0], b'e' | b'f' | b'p' | b't'), "{s}");
    }
}

/// A span with files edited and read, a command that fails (exit 2) and one that fails then
/// passes, a non-shell call that fails, and two user rules.
fn sectioned_span() -> Vec<Message> {
    vec![
        user("Port the parser. Always run cargo fmt before committing. Never touch vendor/ directly."),
        call("r1", "read_file", serde_json::json!({"path": "src/parse/lexer.rs"})),
        result("r1", "pub fn lex() {}", false),
        call("e1", "edit_file", serde_json::json!({"file_path": "src/parse/mod.rs", "old": "a", "new": "see src/parse/lexer.rs"})),
        result("e1", "ok", false),
        call("v1", "str_replace_editor", serde_json::json!({"command": "view", "path": "docs/grammar.md"})),
        result("v1", "grammar", false),
        call("b1", "bash", serde_json::json!({"command": "make parser-check"})),
        result("b1", "error: unexpected token at src/parse/mod.rs:3\nexit code: 2", false),
        call("b2", "bash", serde_json::json!({"command": "cargo test -p parse"})),
        result("b2", "error[E0425]: cannot find value `tok`", true),
        call("b3", "bash", serde_json::json!({"command": "cargo test -p parse"})),
        result("b3", "test result: ok. 4 passed", false),
        call("w1", "fetch_url", serde_json::json!({"url": "https://example.test/spec"})),
        result("w1", "connection refused", true),
    ]
}

/// The lines of a ledger's section (an oracle of the format: the title line, then `- ` lines).
fn section_lines<'a>(ledger: &'a str, title: &str) -> Vec<&'a str> {
    ledger
        .lines()
        .skip_while(|l| *l != title)
        .skip(1)
        .take_while(|l| l.starts_with("- "))
        .collect()
}

#[test]
fn the_ledger_has_sections_files_modified_and_read_commands_with_outcomes_open_errors() {
    let span = sectioned_span();
    let arts = extract(&span);
    let l = ledger(&arts, &Corpus::of_text("Done."), 8000).unwrap();
    assert!(l.starts_with(LEDGER_HEAD) && l.ends_with(LEDGER_END), "{l}");
    assert_eq!(
        section_lines(&l, "Files modified:"),
        ["- src/parse/mod.rs"],
        "{l}"
    );
    assert_eq!(
        section_lines(&l, "Files read:"),
        ["- src/parse/lexer.rs", "- docs/grammar.md"],
        "{l}"
    );
    assert_eq!(
        section_lines(&l, "Commands run (outcome):"),
        [
            "- make parser-check [failed, exit 2]",
            "- cargo test -p parse [ok]"
        ],
        "{l}"
    );
    // The failed make and the failed fetch are open; cargo test's error was resolved by its
    // rerun.
    let open = section_lines(&l, "Open errors (failed, not resolved later):");
    assert_eq!(open.len(), 2, "{l}");
    assert_eq!(
        open,
        [
            "- error: unexpected token at src/parse/mod.rs:3",
            "- connection refused"
        ],
        "{l}"
    );
    assert!(!l.contains("E0425"), "{l}");
    assert_eq!(
        section_lines(&l, "User rules (still standing):").len(),
        2,
        "{l}"
    );
}

#[test]
fn a_call_that_succeeds_in_the_kept_tail_resolves_its_open_error() {
    let arts = extract(&sectioned_span());
    let tail = vec![
        call(
            "t1",
            "bash",
            serde_json::json!({"command": "make parser-check"}),
        ),
        result("t1", "all good\nexit code: 0", false),
    ];
    let ctx = LedgerContext {
        rules: &[],
        later: &tail,
    };
    let l = ledger_in(&arts, &Corpus::of_text("Done."), &ctx, 8000).unwrap();
    let open = section_lines(&l, "Open errors (failed, not resolved later):");
    assert_eq!(open.len(), 1, "{l}");
    assert!(open[0].contains("connection refused"), "{l}");
}

#[test]
fn the_ledger_never_lists_a_rule_taken_back_in_the_history_as_standing() {
    let arts = extract(&sectioned_span());
    let rules = [
        ("Always run cargo fmt before committing.".to_string(), false),
        ("Never touch vendor/ directly.".to_string(), true),
        // A live rule that shares most words with the withdrawn one does not hide it.
        (
            "Always run cargo fmt --check before committing.".to_string(),
            true,
        ),
    ];
    let ctx = LedgerContext {
        rules: &rules,
        later: &[],
    };
    let l = ledger_in(&arts, &Corpus::of_text("Done."), &ctx, 8000).unwrap();
    assert_eq!(
        section_lines(&l, "User rules (still standing):"),
        ["- Never touch vendor/ directly"],
        "{l}"
    );
}

#[test]
fn the_score_without_the_ledger_and_the_ledgers_share_add_up() {
    let span = sectioned_span();
    let arts = extract(&span);
    let l = ledger(&arts, &Corpus::of_text("Ported."), 8000).unwrap();
    let history = serde_json::json!([
        {"role": "user", "content": format!("[agent-db compaction summary]\nPorted src/parse/mod.rs.\n\n{l}")},
        {"role": "user", "content": "Carry on."}
    ])
    .to_string();
    let r = score_history(&arts, &history);
    let (m, led) = (r.model_score.unwrap(), r.ledger_score.unwrap());
    assert!((m + led - r.score).abs() < 1e-12, "{r:?}");
    // Counted here: without the ledger, of the paths only src/parse/mod.rs is kept.
    let bare = score_artifacts(
        &arts,
        &Corpus::of_text("Ported src/parse/mod.rs. Carry on."),
    );
    assert_eq!(m, bare.score);
    assert_eq!(bare.by_kind[&Kind::Path].kept, 1);
    // No ledger, no split.
    let plain = serde_json::json!([{"role": "user", "content": "Ported."}]).to_string();
    let r = score_history(&arts, &plain);
    assert_eq!((r.model_score, r.ledger_score), (None, None));
    assert!(r.split().is_none());
}

/// Issue 41, item 16: a bare number is prose, not an identifier; a number that names something
/// (a version, an address, a port) or that the user quoted is. The oracle is this table.
#[test]
fn bare_numbers_are_not_identifiers_versions_ports_and_quoted_numbers_are() {
    let cases: &[(&str, &[&str])] = &[
        ("Task 103 is done, see step 42 of 2,000.", &[]),
        ("It took 1.5 seconds on 2026-11-01 at 10 am.", &[]),
        (
            "Upgrade to 1.2.3 and point it at 10.0.0.1 please",
            &["1.2.3", "10.0.0.1"],
        ),
        (
            "The proxy listens on :8080 and maps 8080:80",
            &[":8080", "8080:80"],
        ),
        ("Use localhost:5432 for the db", &["localhost:5432"]),
        (
            "Set the limit to `250` and the code to \"4711\", not 999",
            &["250", "4711"],
        ),
        (
            "Rename max_retries and HttpClient in v2",
            &["max_retries", "HttpClient", "v2"],
        ),
        (
            "Keep max_retries = 250 and timeout_ms: 1500 but not 300",
            &["max_retries", "250", "timeout_ms", "1500"],
        ),
    ];
    for (text, want) in cases {
        let arts = extract(&[user(text)]);
        let got = texts(&arts, Kind::Identifier);
        assert_eq!(&got, want, "{text}");
    }
}

/// A dead session whose user spoke of numbered tasks: a summary keeping every path and the
/// words of the instruction keeps it all, whatever the numbers.
#[test]
fn numbered_tasks_do_not_deflate_the_score() {
    let span = vec![
        user("Task 103: fix src/a.rs. Task 104: fix src/b.rs. Then task 105."),
        assistant("Done with 103 and 104."),
    ];
    let summary = user("Fixed src/a.rs and src/b.rs; the tasks are done: fix src/a.rs, fix src/b.rs, then the next.");
    let r = score(&span, &[summary]);
    assert!(!r.by_kind.contains_key(&Kind::Identifier), "{r:?}");
    assert_eq!(r.by_kind[&Kind::Path], Count { kept: 2, total: 2 });
}

#[test]
fn error_start_max_is_the_longest_error_start() {
    let longest = ERROR_STARTS.iter().map(|s| s.len()).max().unwrap();
    assert_eq!(ERROR_START_MAX, longest);
    // A non-ASCII character that lowercases to ASCII (the Kelvin sign to `k`) inside the
    // prefix; a line starting with a non-ASCII character and a long one.
    let long = format!("│ {}", "x".repeat(500));
    for (line, want) in [
        ("TRACEBAC\u{212A}: x", true),
        ("Trace\u{212A}", false),
        ("ERROR: boom", true),
        ("\u{130}error", false),
        (long.as_str(), false),
    ] {
        assert_eq!(error_start(line), want, "{line:?}");
        let low = line.to_lowercase();
        assert_eq!(
            ERROR_STARTS.iter().any(|s| low.starts_with(s)),
            want,
            "{line:?}"
        );
    }
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(512))]

    /// `error_start` is its definition: the lowercased line starts with an error word. Lines are
    /// the words in any case, cut short, mixed with characters whose lowercase changes length,
    /// is ASCII (`İ`, the Kelvin sign) or depends on what follows (a final sigma).
    #[test]
    fn error_start_is_its_lowercase_definition(
        pieces in proptest::collection::vec(0usize..19, 1..5),
        cut in 1usize..16,
    ) {
        const PIECES: [&str; 19] = [
            "error", "ERROR", "Fatal", "panicked", "FAILED", "traceback", "TraceBack", "\u{212A}",
            "İ", "e", "t", ": x", "Éclair", "pan", "│ ", "Σ", "ΑΣ ", "\u{1E9E}", "TRACEBAC",
        ];
        let line: String = pieces.iter().map(|&k| PIECES[k]).collect();
        let line: String = line.chars().take(cut).collect();
        let low = line.to_lowercase();
        let want = ERROR_STARTS.iter().any(|s| low.starts_with(s));
        proptest::prop_assert_eq!(error_start(&line), want, "{:?}", line);
    }
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(256))]

    /// Two texts matched at once (their shared prefix and suffix searched once) answer what
    /// matching each alone answers: texts that differ in a middle part, at either end or not at
    /// all, with patterns that straddle the edges of what they share.
    #[test]
    fn found_in_both_is_found_in_each(
        pre in proptest::collection::vec(0usize..10, 0..12),
        mid_a in proptest::collection::vec(0usize..10, 0..6),
        mid_b in proptest::collection::vec(0usize..10, 0..6),
        suf in proptest::collection::vec(0usize..10, 0..12),
        arts in proptest::collection::vec(
            (0usize..Kind::ALL.len(), proptest::collection::vec(0usize..10, 1..4)),
            0..30,
        ),
    ) {
        const PIECES: [&str; 10] =
            ["a", "b", "c", "ab", " ", "\n", "é", "src/a.rs", "--x", "cargo test"];
        let join = |ks: &[usize]| ks.iter().map(|&k| PIECES[k]).collect::<String>();
        let a = Corpus::of_text(&format!("{}{}{}", join(&pre), join(&mid_a), join(&suf)));
        let b = Corpus::of_text(&format!("{}{}{}", join(&pre), join(&mid_b), join(&suf)));
        let arts: Vec<Artifact> = arts
            .iter()
            .map(|(k, ps)| Artifact::new(Kind::ALL[*k], join(ps)))
            .collect();
        let m = Matcher::new(&arts);
        let (fa, fb) = m.found_in_both(&a, &b);
        proptest::prop_assert_eq!(&fa, &m.found_in(&a));
        proptest::prop_assert_eq!(&fb, &m.found_in(&b));
        let each: Vec<bool> = arts.iter().map(|x| b.contains(x)).collect();
        proptest::prop_assert_eq!(fb, each);
    }
}

/// A pattern as long as the longest that ends one byte into the part two texts do not share,
/// or starts one byte before its end, is found in the one that holds it and not in the other.
#[test]
fn found_in_both_sees_a_pattern_one_byte_into_the_middle() {
    let arts = [
        Artifact::new(Kind::Command, "abc"),
        Artifact::new(Kind::Command, "cab"),
    ];
    let m = Matcher::new(&arts);
    for (x, y, want_x, want_y) in [
        ("xabc", "xabd", [true, false], [false, false]),
        ("cabx", "dabx", [false, true], [false, false]),
    ] {
        let (fx, fy) = m.found_in_both(&Corpus::of_text(x), &Corpus::of_text(y));
        assert_eq!((fx, fy), (want_x.to_vec(), want_y.to_vec()), "{x} / {y}");
    }
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(512))]

    /// Squashing long texts, read eight bytes at a time where they hold only words and single
    /// spaces, is still splitting on whitespace and joining with one space: runs of every
    /// length around eight, spaces at every place of an eight-byte chunk, two spaces, other
    /// whitespace and control bytes, and non-ASCII characters (whitespace ones among them).
    #[test]
    fn squash_of_long_texts_is_split_and_join(
        pieces in proptest::collection::vec(0usize..16, 0..60),
    ) {
        const PIECES: [&str; 16] = [
            "a", "word", "sevench", "eightchr", "ninechars", "x_1.y/z:", " ", "  ", "\n", "\t",
            "\r\n", "\u{0}", "\u{1F}", "é", "\u{A0}", "\u{3000}",
        ];
        let s: String = pieces.iter().map(|&k| PIECES[k]).collect();
        proptest::prop_assert_eq!(squash(&s), s.split_whitespace().collect::<Vec<_>>().join(" "));
    }
}

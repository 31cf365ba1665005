//! Selectors through the real binary, alone and combined. The expected conversations are
//! computed independently of agent-db: utilization with SQL `json_extract` on
//! `conversations.usage`, listing order with `ORDER BY updated_at DESC`, and ages by parsing
//! the stored Go timestamps here with chrono.
//!
//! Each test generates its own small store (three formats, 60 conversations, a fifth of the
//! default size) and moves one conversation to 30 minutes before NOW, so that `--idle 1h`
//! and the 10-minute default differ.

use agent_db_synth::{self as synth, SynthOptions};
use chrono::{DateTime, FixedOffset, TimeDelta};
use serde_json::Value;

use crate::common::{ids_agree, json, Env, NOW};

const N: usize = 60;
const SEED: u64 = 12;
/// The conversation moved to 30 minutes before NOW.
const HALF_HOUR_AGO: &str = "2026-11-01 11:30:00.25 +0000 UTC";

const IDLE: &str = "idle window";
const NO_WINDOW: &str = "maxContextWindow is 0 or missing";

fn fixture() -> (Env, Vec<Conv>) {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("storage.db");
    let opts = SynthOptions {
        conversations: N,
        seed: SEED,
        scale: 0.2,
        ..SynthOptions::default()
    };
    synth::generate(&db, &opts).expect("generate store");
    let env = Env { dir, db };
    // The 10th conversation in listing order (weeks old in this fixture) becomes half an hour
    // old; kodelet keeps both tables in sync, so do the same.
    let id = env.ids("SELECT id FROM conversations ORDER BY updated_at DESC")[9].clone();
    let c = env.conn();
    for t in ["conversations", "conversation_summaries"] {
        c.execute(
            &format!("UPDATE {t} SET updated_at = ?1 WHERE id = ?2"),
            [HALF_HOUR_AGO, id.as_str()],
        )
        .unwrap();
    }
    drop(c);
    let convs = convs(&env);
    assert_eq!(convs.len(), N);
    (env, convs)
}

/// What the test knows of one conversation, read with SQL, in listing order.
#[derive(Debug, Clone)]
struct Conv {
    id: String,
    provider: String,
    api_mode: Option<String>,
    current: i64,
    max: i64,
    age: TimeDelta,
}

impl Conv {
    fn has_window(&self) -> bool {
        self.max > 0
    }
    fn older_than(&self, d: TimeDelta) -> bool {
        self.age >= d
    }
    fn within(&self, d: TimeDelta) -> bool {
        self.age <= d
    }
}

fn now() -> DateTime<FixedOffset> {
    DateTime::parse_from_rfc3339(NOW).unwrap()
}

/// A Go `time.Time.String()` value: drop ` m=...`, then parse date, clock and numeric offset
/// (the zone name, the fourth field, is ignored).
fn parse_go_time(text: &str) -> DateTime<FixedOffset> {
    let s = match text.find(" m=") {
        Some(i) => &text[..i],
        None => text,
    };
    let fields: Vec<&str> = s.split(' ').collect();
    assert!(fields.len() >= 3, "not a Go time: {text:?}");
    DateTime::parse_from_str(&fields[..3].join(" "), "%Y-%m-%d %H:%M:%S%.f %z")
        .unwrap_or_else(|e| panic!("{text:?}: {e}"))
}

fn convs(env: &Env) -> Vec<Conv> {
    let c = env.conn();
    let mut s = c
        .prepare(
            "SELECT id, provider, json_extract(metadata, '$.api_mode'),
                    json_extract(usage, '$.currentContextWindow'),
                    COALESCE(json_extract(usage, '$.maxContextWindow'), 0), updated_at
             FROM conversations ORDER BY updated_at DESC",
        )
        .unwrap();
    let now = now();
    let rows = s
        .query_map([], |r| {
            let updated: String = r.get(5)?;
            Ok(Conv {
                id: r.get(0)?,
                provider: r.get(1)?,
                api_mode: r.get(2)?,
                current: r.get(3)?,
                max: r.get(4)?,
                age: now.signed_duration_since(parse_go_time(&updated)),
            })
        })
        .unwrap();
    rows.map(Result::unwrap).collect()
}

/// Ids whose stored utilization is at least `ratio`, by SQL, in listing order.
fn sql_over(env: &Env, ratio: f64) -> Vec<String> {
    env.ids(&format!(
        "SELECT id FROM conversations
         WHERE json_extract(usage, '$.maxContextWindow') > 0
           AND CAST(json_extract(usage, '$.currentContextWindow') AS REAL)
               / json_extract(usage, '$.maxContextWindow') >= {ratio:?}
         ORDER BY updated_at DESC"
    ))
}

fn mins(m: i64) -> TimeDelta {
    TimeDelta::minutes(m)
}
fn hours(h: i64) -> TimeDelta {
    TimeDelta::hours(h)
}
fn days(d: i64) -> TimeDelta {
    TimeDelta::days(d)
}

/// What a row of the output should be.
#[derive(Debug, Clone, PartialEq)]
enum Want {
    Selected,
    /// Skipped, with a fragment of the reason shown.
    Skipped(&'static str),
}

/// One output row: id, status, reason, detail.
#[derive(Debug, Clone)]
struct Got {
    id: String,
    status: String,
    reason: String,
    detail: Option<String>,
}

/// The rows of a `list` or `compact` document: `list` keeps the skipped and the unreadable
/// apart (`skipped`, `failed`), after the selected ones.
fn rows_of(doc: &Value) -> Vec<Got> {
    let mut rows: Vec<&Value> = doc["conversations"]
        .as_array()
        .expect("conversations")
        .iter()
        .collect();
    for more in ["skipped", "failed"] {
        rows.extend(doc[more].as_array().into_iter().flatten());
    }
    rows.into_iter()
        .map(|r| Got {
            id: r["id"].as_str().expect("id").to_string(),
            status: r["status"].as_str().expect("status").to_string(),
            reason: r["reason"].as_str().unwrap_or("").to_string(),
            detail: r["detail"].as_str().map(str::to_string),
        })
        .collect()
}

/// `agent-db list ARGS --json`: its rows; it must exit 0.
fn list(env: &Env, args: &[&str]) -> Vec<Got> {
    let mut c = env.cmd();
    c.arg("list").args(args).arg("--json");
    let (doc, code) = json(c);
    assert_eq!(code, 0, "list {args:?}: exit code\n{doc}");
    // `--ids` reads less of each row: the same selection.
    let mut c = env.cmd();
    c.arg("list").args(args).arg("--ids");
    ids_agree(c, &doc);
    rows_of(&doc)
}

/// `agent-db compact --dry-run ARGS --json`: its rows; it must exit 0.
fn compact(env: &Env, args: &[&str]) -> Vec<Got> {
    let mut c = env.cmd();
    c.args(["compact", "--dry-run"]).args(args).arg("--json");
    let (doc, code) = json(c);
    assert_eq!(code, 0, "compact --dry-run {args:?}: exit code\n{doc}");
    rows_of(&doc)
}

/// Compare `list` rows with the expectation, as ordered lists, and the reasons shown.
fn check(args: &[&str], got: &[Got], want: &[(String, Want)], reason: Option<&str>) {
    let g: Vec<(&str, &str)> = got
        .iter()
        .map(|r| (r.id.as_str(), r.status.as_str()))
        .collect();
    let w: Vec<(&str, &str)> = want
        .iter()
        .map(|(id, w)| {
            (
                id.as_str(),
                match w {
                    Want::Selected => "selected",
                    Want::Skipped(_) => "skipped",
                },
            )
        })
        .collect();
    // In selection order within each status (`list` gives the skipped apart, after).
    let by_status = |v: &[(&str, &str)]| -> Vec<(String, String)> {
        let mut v: Vec<(String, String)> = v
            .iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect();
        v.sort_by_key(|(_, st)| st != "selected");
        v
    };
    assert_eq!(
        by_status(&g),
        by_status(&w),
        "{args:?}: (id, status) in order"
    );
    let mut got: Vec<&Got> = got.iter().collect();
    got.sort_by_key(|r| r.status != "selected");
    let mut want: Vec<&(String, Want)> = want.iter().collect();
    want.sort_by_key(|(_, w)| !matches!(w, Want::Selected));
    for (r, (_, w)) in got.iter().zip(want) {
        match w {
            Want::Selected => assert!(r.detail.is_none(), "{args:?} {}: {:?}", r.id, r.detail),
            Want::Skipped(frag) => {
                let d = r.detail.as_deref().unwrap_or("");
                assert!(
                    d.contains(frag),
                    "{args:?} {}: detail {d:?} lacks {frag:?}",
                    r.id
                );
            }
        }
        if let Some(reason) = reason {
            assert_eq!(r.reason, reason, "{args:?} {}: reason", r.id);
        }
    }
}

/// Walk conversations in listing order: `decide` says whether each is shown and how; stop
/// after `limit` selected ones (skipped ones do not count).
fn walk(
    convs: &[Conv],
    limit: Option<usize>,
    decide: impl Fn(&Conv) -> Option<Want>,
) -> Vec<(String, Want)> {
    let mut out = Vec::new();
    let mut selected = 0;
    for c in convs {
        if let Some(w) = decide(c) {
            if w == Want::Selected {
                selected += 1;
            }
            out.push((c.id.clone(), w));
            if Some(selected) == limit {
                break;
            }
        }
    }
    out
}

fn ids(want: &[(String, Want)]) -> Vec<&str> {
    want.iter().map(|(id, _)| id.as_str()).collect()
}

/// Preconditions the tests rely on, so a generator change fails loudly here.
fn assert_fixture(convs: &[Conv]) {
    let recent: Vec<_> = convs.iter().filter(|c| c.age < mins(10)).collect();
    assert!(recent.len() >= 2, "recent conversations: {recent:?}");
    assert!(
        recent.iter().any(|c| c.has_window()),
        "a recent one with a window"
    );
    assert!(
        convs.iter().any(|c| c.age >= mins(10) && c.age < hours(1)),
        "one updated 10m..1h ago"
    );
    assert!(
        convs.iter().any(|c| !c.has_window()),
        "a row without maxContextWindow"
    );
    for p in ["anthropic", "openai", "openai-responses"] {
        assert!(convs.iter().any(|c| c.provider == p), "provider {p}");
    }
    assert!(
        convs
            .iter()
            .any(|c| c.provider == "openai" && c.api_mode.is_none()),
        "an openai row without api_mode"
    );
    assert!(
        convs.iter().all(|c| c.age > TimeDelta::zero()),
        "nothing in the future"
    );
}

// ---------------------------------------------------------------------------------------------

#[test]
fn all_over_idle_and_context_limit() {
    let (env, convs) = fixture();
    assert_fixture(&convs);

    // --all-over 0.05: utilization by SQL; the 10m idle default applies; rows without a
    // window are reported skipped.
    for ratio in ["0.05", "0.1"] {
        let r: f64 = ratio.parse().unwrap();
        let over = sql_over(&env, r);
        assert!(
            !over.is_empty() && over.len() < N / 2,
            "{ratio}: {}",
            over.len()
        );
        let want = walk(&convs, None, |c| {
            if !c.has_window() {
                Some(Want::Skipped(NO_WINDOW))
            } else if over.contains(&c.id) {
                Some(if c.age < mins(10) {
                    Want::Skipped(IDLE)
                } else {
                    Want::Selected
                })
            } else {
                None
            }
        });
        let args = ["--all-over", ratio];
        check(&args, &list(&env, &args), &want, Some("threshold"));
    }

    // --all-over 0: everything with a window matches; the recent ones come back skipped with
    // the idle window named, and --idle 0 includes them.
    let recent: Vec<&Conv> = convs
        .iter()
        .filter(|c| c.age < mins(10) && c.has_window())
        .collect();
    let args = ["--all-over", "0"];
    let got = list(&env, &args);
    let want = walk(&convs, None, |c| {
        Some(if !c.has_window() {
            Want::Skipped(NO_WINDOW)
        } else if c.age < mins(10) {
            Want::Skipped("within the idle window of 10m (--idle)")
        } else {
            Want::Selected
        })
    });
    check(&args, &got, &want, Some("threshold"));
    for c in &recent {
        let row = got.iter().find(|r| r.id == c.id).unwrap();
        assert!(
            row.detail
                .as_deref()
                .unwrap()
                .starts_with("active: updated "),
            "{:?}",
            row.detail
        );
    }

    let args = ["--all-over", "0", "--idle", "0"];
    let want = walk(&convs, None, |c| {
        Some(if c.has_window() {
            Want::Selected
        } else {
            Want::Skipped(NO_WINDOW)
        })
    });
    check(&args, &list(&env, &args), &want, Some("threshold"));

    // --context-limit N stands in for a missing window: those rows are evaluated, not skipped.
    let limit = 100_000i64;
    let over_with_limit = env.ids(&format!(
        "SELECT id FROM conversations
         WHERE CAST(json_extract(usage, '$.currentContextWindow') AS REAL)
               / (CASE WHEN COALESCE(json_extract(usage, '$.maxContextWindow'), 0) > 0
                       THEN json_extract(usage, '$.maxContextWindow') ELSE {limit} END) >= 0.05
         ORDER BY updated_at DESC"
    ));
    let no_window_in: Vec<&Conv> = convs
        .iter()
        .filter(|c| !c.has_window() && over_with_limit.contains(&c.id))
        .collect();
    assert!(
        !no_window_in.is_empty(),
        "a row without a window is over 5% of {limit}"
    );
    let args = [
        "--all-over",
        "0.05",
        "--context-limit",
        "100000",
        "--idle",
        "0",
    ];
    let want = walk(&convs, None, |c| {
        over_with_limit.contains(&c.id).then_some(Want::Selected)
    });
    check(&args, &list(&env, &args), &want, Some("threshold"));
    for c in no_window_in {
        assert!(c.current as f64 / limit as f64 >= 0.05);
    }

    // The same selection through compact: the no-window rows are skipped there too.
    let args = ["--all-over", "0.1"];
    let got = compact(&env, &args);
    let over = sql_over(&env, 0.1);
    let want_ids: Vec<&str> = convs
        .iter()
        .filter(|c| !c.has_window() || over.contains(&c.id))
        .map(|c| c.id.as_str())
        .collect();
    let got_ids: Vec<&str> = got.iter().map(|r| r.id.as_str()).collect();
    assert_eq!(got_ids, want_ids, "compact {args:?}: ids in order");
    for (r, c) in got
        .iter()
        .zip(convs.iter().filter(|c| want_ids.contains(&c.id.as_str())))
    {
        assert_eq!(r.reason, "threshold");
        if !c.has_window() {
            assert_eq!(r.status, "skipped");
            assert!(
                r.detail.as_deref().unwrap().contains(NO_WINDOW),
                "{:?}",
                r.detail
            );
        } else if c.age < mins(10) {
            assert_eq!(r.status, "skipped");
            assert!(
                r.detail.as_deref().unwrap().contains(IDLE),
                "{:?}",
                r.detail
            );
        } else {
            assert!(
                r.status == "planned" || r.status == "skipped",
                "{}: {}",
                r.id,
                r.status
            );
            if r.status == "skipped" {
                let d = r.detail.as_deref().unwrap();
                assert!(!d.contains(IDLE) && !d.contains(NO_WINDOW), "{d}");
            }
        }
    }
}

#[test]
fn time_selectors() {
    let (env, convs) = fixture();
    assert_fixture(&convs);

    // --older-than: age >= DUR; the idle default cannot matter.
    for (arg, d) in [("7d", days(7)), ("30d", days(30)), ("36h", hours(36))] {
        let args = ["--older-than", arg];
        let want = walk(&convs, None, |c| c.older_than(d).then_some(Want::Selected));
        assert!(!want.is_empty() && want.len() < N, "{arg}");
        check(&args, &list(&env, &args), &want, Some("recency"));
    }

    // --since: age <= DUR, with the 10m idle default.
    let args = ["--since", "2d"];
    let want = walk(&convs, None, |c| {
        c.within(days(2)).then(|| {
            if c.age < mins(10) {
                Want::Skipped(IDLE)
            } else {
                Want::Selected
            }
        })
    });
    assert!(want.iter().filter(|w| w.1 == Want::Selected).count() >= 2);
    check(&args, &list(&env, &args), &want, Some("recency"));

    let args = ["--since", "2d", "--idle", "0"];
    let want = walk(&convs, None, |c| {
        c.within(days(2)).then_some(Want::Selected)
    });
    check(&args, &list(&env, &args), &want, Some("recency"));

    // --idle 1h: the half-hour-old conversation is now skipped too.
    let args = ["--since", "3d", "--idle", "1h"];
    let want = walk(&convs, None, |c| {
        c.within(days(3)).then(|| {
            if c.age < hours(1) {
                Want::Skipped("within the idle window of 1h (--idle)")
            } else {
                Want::Selected
            }
        })
    });
    let half = convs
        .iter()
        .find(|c| c.age == mins(30) - TimeDelta::milliseconds(250))
        .expect("the half-hour-old conversation");
    assert!(
        want.contains(&(
            half.id.clone(),
            Want::Skipped("within the idle window of 1h (--idle)")
        )),
        "--idle 1h skips the conversation updated 30m ago"
    );
    check(&args, &list(&env, &args), &want, Some("recency"));
    let default_idle = list(&env, &["--since", "3d"]);
    let row = default_idle.iter().find(|r| r.id == half.id).unwrap();
    assert_eq!(
        row.status, "selected",
        "the 10m default keeps the 30m-old one"
    );

    // A window: --older-than and --since together.
    let args = ["--older-than", "1d", "--since", "10d"];
    let want = walk(&convs, None, |c| {
        (c.older_than(days(1)) && c.within(days(10))).then_some(Want::Selected)
    });
    assert!(!want.is_empty());
    check(&args, &list(&env, &args), &want, Some("recency"));
}

#[test]
fn provider_limit_follow_and_ids() {
    let (env, convs) = fixture();
    assert_fixture(&convs);

    // --provider: kodelet's provider column, or a format name. Expected sets by SQL.
    let cases = [
        ("anthropic", "provider = 'anthropic'"),
        ("openai", "provider = 'openai'"),
        ("openai-responses", "provider = 'openai-responses' OR (provider = 'openai' AND json_extract(metadata, '$.api_mode') = 'responses')"),
        ("openai-chat", "provider = 'openai' AND COALESCE(json_extract(metadata, '$.api_mode'), '') IN ('', 'chat_completions')"),
    ];
    for (name, cond) in cases {
        let want = env.ids(&format!(
            "SELECT id FROM conversations WHERE {cond} ORDER BY updated_at DESC"
        ));
        assert!(!want.is_empty(), "{name}");
        let args = ["--provider", name, "--idle", "0"];
        let got = list(&env, &args);
        let got_ids: Vec<&str> = got.iter().map(|r| r.id.as_str()).collect();
        assert_eq!(got_ids, want, "{args:?}: ids in order");
        assert!(got.iter().all(|r| r.status == "selected"), "{args:?}");
    }
    // The legacy provider name is both a provider and the format: same rows as the format.
    let legacy = env.ids("SELECT id FROM conversations WHERE provider = 'openai-responses'");
    assert!(!legacy.is_empty());
    let got = list(&env, &["--provider", "openai-responses", "--idle", "0"]);
    for id in &legacy {
        assert!(got.iter().any(|r| &r.id == id), "legacy row {id}");
    }
    // An unknown provider name selects nothing.
    assert!(list(&env, &["--provider", "mistral"]).is_empty());

    // --limit alone: the first N in listing order.
    let order = env.ids("SELECT id FROM conversations ORDER BY updated_at DESC");
    let got = list(&env, &["--limit", "5"]);
    let got_ids: Vec<&str> = got.iter().map(|r| r.id.as_str()).collect();
    assert_eq!(got_ids, order[..5].to_vec(), "--limit 5");
    assert!(got.iter().all(|r| r.status == "selected"));

    // --limit counts selected rows only: skipped ones on the way are still reported.
    let args = ["--all-over", "0", "--limit", "5"];
    let want = walk(&convs, Some(5), |c| {
        Some(if !c.has_window() {
            Want::Skipped(NO_WINDOW)
        } else if c.age < mins(10) {
            Want::Skipped(IDLE)
        } else {
            Want::Selected
        })
    });
    assert!(
        want.len() > 5,
        "skipped rows come before the fifth selected one"
    );
    check(&args, &list(&env, &args), &want, Some("threshold"));

    // --follow: the newest by parsed time (not the first by stored text), no idle default.
    let newest = convs.iter().min_by_key(|c| c.age).unwrap();
    assert_ne!(
        newest.id, order[0],
        "the fixture's first row by text is not the newest"
    );
    assert!(newest.age < mins(10));
    let got = list(&env, &["--follow"]);
    assert_eq!(got.len(), 1, "{got:?}");
    assert_eq!(
        (
            got[0].id.as_str(),
            got[0].status.as_str(),
            got[0].reason.as_str()
        ),
        (newest.id.as_str(), "selected", "manual")
    );
    let got = compact(&env, &["--follow"]);
    assert_eq!(got.len(), 1, "{got:?}");
    assert_eq!(got[0].id, newest.id);
    assert_eq!(got[0].reason, "manual");
    assert_ne!(got[0].status, "failed");
    if let Some(d) = &got[0].detail {
        assert!(!d.contains(IDLE), "--follow has no idle default: {d}");
    }

    // Repeated --id: the order given, duplicates once, recent ones included (no idle default).
    let recent = convs.iter().find(|c| c.age < mins(10)).unwrap();
    let (a, b, c) = (&convs[40].id, &recent.id, &convs[20].id);
    let args = ["--id", a, "--id", b, "--id", a, "--id", c, "--id", b];
    let got = list(&env, &args);
    let got_ids: Vec<&str> = got.iter().map(|r| r.id.as_str()).collect();
    assert_eq!(
        got_ids,
        vec![a.as_str(), b.as_str(), c.as_str()],
        "{args:?}"
    );
    for r in &got {
        assert_eq!(
            (r.status.as_str(), r.reason.as_str()),
            ("selected", "manual")
        );
    }

    // compact: positional ids first, then --id; duplicates once.
    let small = env.ids(
        "SELECT c.id FROM conversations c JOIN conversation_summaries s ON s.id = c.id
         WHERE s.message_count BETWEEN 2 AND 40 ORDER BY c.id LIMIT 3",
    );
    assert_eq!(small.len(), 3);
    let (x, y, z) = (small[0].as_str(), small[1].as_str(), small[2].as_str());
    let args = [z, x, "--id", y, "--id", z, x];
    let got = compact(&env, &args);
    let got_ids: Vec<&str> = got.iter().map(|r| r.id.as_str()).collect();
    assert_eq!(got_ids, vec![z, x, y], "compact {args:?}");
    for r in &got {
        assert_eq!(r.reason, "manual");
        assert!(r.status == "planned" || r.status == "skipped", "{r:?}");
    }
}

#[test]
fn combinations() {
    let (env, convs) = fixture();
    assert_fixture(&convs);

    // --all-over + --older-than + --provider (the idle default cannot matter here).
    let over = sql_over(&env, 0.02);
    let args = [
        "--all-over",
        "0.02",
        "--older-than",
        "3d",
        "--provider",
        "openai",
    ];
    let want = walk(&convs, None, |c| {
        if c.provider != "openai" || !c.older_than(days(3)) {
            None
        } else if !c.has_window() {
            Some(Want::Skipped(NO_WINDOW))
        } else {
            over.contains(&c.id).then_some(Want::Selected)
        }
    });
    assert!(want.iter().filter(|w| w.1 == Want::Selected).count() >= 3);
    check(&args, &list(&env, &args), &want, Some("threshold"));

    // The same through compact: the same conversations, in the same order.
    let got = compact(&env, &args);
    let got_ids: Vec<&str> = got.iter().map(|r| r.id.as_str()).collect();
    assert_eq!(got_ids, ids(&want), "compact {args:?}");
    for (r, (_, w)) in got.iter().zip(&want) {
        match w {
            Want::Skipped(frag) => {
                assert_eq!(r.status, "skipped");
                assert!(r.detail.as_deref().unwrap().contains(frag));
            }
            Want::Selected => assert!(r.status == "planned" || r.status == "skipped", "{r:?}"),
        }
    }

    // --since + --limit, with the idle default: recent ones are reported, not counted.
    let args = ["--since", "20d", "--limit", "4"];
    let want = walk(&convs, Some(4), |c| {
        c.within(days(20)).then(|| {
            if c.age < mins(10) {
                Want::Skipped(IDLE)
            } else {
                Want::Selected
            }
        })
    });
    assert_eq!(want.iter().filter(|w| w.1 == Want::Selected).count(), 4);
    check(&args, &list(&env, &args), &want, Some("recency"));

    // --provider + --limit.
    let anthropic = env
        .ids("SELECT id FROM conversations WHERE provider = 'anthropic' ORDER BY updated_at DESC");
    let args = ["--provider", "anthropic", "--limit", "3", "--idle", "0"];
    let got = list(&env, &args);
    let got_ids: Vec<&str> = got.iter().map(|r| r.id.as_str()).collect();
    assert_eq!(got_ids, anthropic[..3].to_vec(), "{args:?}");

    // --provider (format name) + --since + --idle 0.
    let args = [
        "--provider",
        "openai-responses",
        "--since",
        "30d",
        "--idle",
        "0",
    ];
    let want = walk(&convs, None, |c| {
        let responses = c.provider == "openai-responses"
            || (c.provider == "openai" && c.api_mode.as_deref() == Some("responses"));
        (responses && c.within(days(30))).then_some(Want::Selected)
    });
    assert!(want.len() >= 2);
    check(&args, &list(&env, &args), &want, Some("recency"));

    // --all-over + --since + --limit + --idle 1h.
    let over = sql_over(&env, 0.03);
    let args = [
        "--all-over",
        "0.03",
        "--since",
        "30d",
        "--idle",
        "1h",
        "--limit",
        "3",
    ];
    let want = walk(&convs, Some(3), |c| {
        if !c.within(days(30)) {
            None
        } else if !c.has_window() {
            Some(Want::Skipped(NO_WINDOW))
        } else if !over.contains(&c.id) {
            None
        } else if c.age < hours(1) {
            Some(Want::Skipped(IDLE))
        } else {
            Some(Want::Selected)
        }
    });
    check(&args, &list(&env, &args), &want, Some("threshold"));
}

/// `--provider` is a batch selector (it is enough to run `compact`), so the 10m idle default
/// protects conversations a live agent may hold, in `compact` and in `list` alike.
#[test]
fn provider_alone_applies_the_idle_default() {
    let (env, convs) = fixture();
    let recent: Vec<&Conv> = convs
        .iter()
        .filter(|c| c.age < mins(10) && c.provider == "anthropic")
        .collect();
    assert!(!recent.is_empty(), "a recent anthropic conversation");
    // --keep-tokens 0 so that a small recent conversation would really be compacted.
    let got = compact(&env, &["--provider", "anthropic", "--keep-tokens", "0"]);
    for c in recent {
        let r = got
            .iter()
            .find(|r| r.id == c.id)
            .expect("recent row reported");
        assert_eq!(r.status, "skipped", "{r:?}");
        assert!(r.detail.as_deref().unwrap_or("").contains(IDLE), "{r:?}");
    }

    for name in ["anthropic", "openai", "openai-responses", "openai-chat"] {
        let args = ["--provider", name];
        let got = list(&env, &args);
        let want = list(&env, &["--provider", name, "--idle", "0"]);
        let ids = |v: &[Got]| {
            let mut ids = v.iter().map(|r| r.id.clone()).collect::<Vec<_>>();
            ids.sort();
            ids
        };
        assert_eq!(ids(&got), ids(&want), "{args:?}: the same conversations");
        for r in &got {
            let c = convs.iter().find(|c| c.id == r.id).unwrap();
            if c.age < mins(10) {
                assert_eq!(r.status, "skipped", "{args:?}: {r:?}");
                assert!(r.detail.as_deref().unwrap().contains(IDLE), "{r:?}");
            } else {
                assert_eq!(r.status, "selected", "{args:?}: {r:?}");
            }
        }
    }

    // The default applies to --since too: `--since 5m` finds only active conversations.
    let got = list(&env, &["--since", "5m"]);
    assert!(!got.is_empty());
    assert!(got.iter().all(|r| r.status == "skipped"), "{got:?}");
}

/// select.rs and store/kodelet.rs document the listing order as "most recently updated first
/// by the stored text, ties in the rowid order of the row a conversation is listed from" (its
/// summary row; regression: ties came out in descending rowid order).
#[test]
fn ties_are_listed_in_rowid_order() {
    let (env, _) = fixture();
    let tied = "2026-10-31 10:00:00 +0000 UTC";
    let c = env.conn();
    let ids =
        env.ids("SELECT id FROM conversation_summaries WHERE rowid IN (1, 2, 3) ORDER BY rowid");
    assert_eq!(ids.len(), 3);
    for t in ["conversations", "conversation_summaries"] {
        for id in &ids {
            c.execute(
                &format!("UPDATE {t} SET updated_at = ?1 WHERE id = ?2"),
                [tied, id.as_str()],
            )
            .unwrap();
        }
    }
    drop(c);
    let want = env.ids("SELECT id FROM conversation_summaries ORDER BY updated_at DESC, rowid ASC");
    let got: Vec<String> = list(&env, &[]).into_iter().map(|r| r.id).collect();
    let pos = |v: &[String], id: &str| v.iter().position(|x| x == id).unwrap();
    let got_tied: Vec<usize> = ids.iter().map(|id| pos(&got, id)).collect();
    assert!(
        got_tied.windows(2).all(|w| w[0] < w[1]),
        "tied rows in rowid order: positions {got_tied:?}"
    );
    assert_eq!(got, want);
}

/// The listing comes from `conversation_summaries`; a conversation without a usable summary row
/// (none, or one whose `updated_at` is not TEXT) is read from its own row and merged into the
/// order by its own `updated_at`; a summary row without a conversation is not listed. The
/// expected order is the documented contract written as one SQL query over both tables.
#[test]
fn conversations_without_a_usable_summary_row_are_merged_into_the_order() {
    let (env, _) = fixture();
    let c = env.conn();
    let by_age = env.ids("SELECT id FROM conversations ORDER BY updated_at DESC");
    // No summary row at all, and an updated_at that ties with a summary-listed conversation.
    let (missing, tie_with) = (&by_age[5], &by_age[20]);
    c.execute(
        "DELETE FROM conversation_summaries WHERE id = ?1",
        [missing],
    )
    .unwrap();
    c.execute(
        "UPDATE conversations SET updated_at = (SELECT updated_at FROM conversations WHERE id = ?2)
         WHERE id = ?1",
        [missing, tie_with],
    )
    .unwrap();
    // A summary row whose updated_at is an INTEGER: listed from the conversation's own row.
    let numeric = &by_age[30];
    c.execute(
        "UPDATE conversation_summaries SET updated_at = 1761998400 WHERE id = ?1",
        [numeric],
    )
    .unwrap();
    // A summary row rewritten (kodelet upserts): it gets the largest rowid.
    let moved = &by_age[0];
    c.execute(
        "CREATE TEMP TABLE keep AS SELECT * FROM conversation_summaries WHERE id = ?1",
        [moved],
    )
    .unwrap();
    c.execute("DELETE FROM conversation_summaries WHERE id = ?1", [moved])
        .unwrap();
    c.execute(
        "INSERT INTO conversation_summaries SELECT * FROM temp.keep",
        [],
    )
    .unwrap();
    // A summary row whose conversation is gone.
    c.execute(
        "INSERT INTO conversation_summaries (id, message_count, first_message, summary, usage,
           created_at, updated_at, provider, metadata, cwd)
         SELECT 'orphan-summary', message_count, first_message, summary, usage, created_at,
           updated_at, provider, metadata, cwd FROM conversation_summaries WHERE id = ?1",
        [&by_age[10]],
    )
    .unwrap();
    drop(c);
    let want = env.ids(
        "SELECT id FROM (
           SELECT s.id AS id, s.updated_at AS k, 0 AS src, s.rowid AS r
             FROM conversation_summaries s JOIN conversations c ON c.id = s.id
            WHERE typeof(s.updated_at) = 'text'
           UNION ALL
           SELECT c.id, c.updated_at, 1, c.rowid
             FROM conversations c LEFT JOIN conversation_summaries s ON s.id = c.id
            WHERE s.id IS NULL OR typeof(s.updated_at) != 'text')
         ORDER BY k DESC, src, r",
    );
    assert_eq!(want.len(), N);
    let rows = list(&env, &[]);
    let got: Vec<String> = rows.iter().map(|r| r.id.clone()).collect();
    // Every one listed; in the listing's order within `conversations` (the skipped and the
    // unreadable are listed apart, after).
    let (mut a, mut b) = (got.clone(), want.clone());
    a.sort();
    b.sort();
    assert_eq!(a, b, "listed");
    let selected: Vec<&String> = rows
        .iter()
        .filter(|r| r.status == "selected")
        .map(|r| &r.id)
        .collect();
    let want_order: Vec<&String> = want.iter().filter(|id| selected.contains(id)).collect();
    assert_eq!(selected, want_order, "list order");
    for id in [missing, numeric, moved] {
        assert!(got.contains(id), "{id} listed");
    }
    assert!(!got.iter().any(|id| id == "orphan-summary"));
    let pos = |id: &str| got.iter().position(|x| x == id).unwrap();
    assert_eq!(pos(missing), pos(tie_with) + 1, "ties: summary rows first");

    // The same walk drives the batch selectors, and --limit stops inside it.
    let rows = list(&env, &["--all-over", "0", "--idle", "0"]);
    let got: Vec<String> = rows.iter().map(|r| r.id.clone()).collect();
    let selected: Vec<String> = rows
        .iter()
        .filter(|r| r.status == "selected")
        .map(|r| r.id.clone())
        .collect();
    let want_sel: Vec<String> = want
        .iter()
        .filter(|id| selected.contains(id))
        .cloned()
        .collect();
    assert_eq!(selected, want_sel);
    assert!(got.contains(missing) && got.contains(numeric));
    let limited: Vec<Got> = list(&env, &["--all-over", "0", "--idle", "0", "--limit", "7"]);
    let sel: Vec<&str> = limited
        .iter()
        .filter(|r| r.status == "selected")
        .map(|r| r.id.as_str())
        .collect();
    assert_eq!(sel.len(), 7);
    let all_sel: Vec<String> = list(&env, &["--all-over", "0", "--idle", "0"])
        .into_iter()
        .filter(|r| r.status == "selected")
        .map(|r| r.id)
        .take(7)
        .collect();
    assert_eq!(sel, all_sel.iter().map(String::as_str).collect::<Vec<_>>());

    // --id finds the fallback conversations, and not the orphan summary row.
    let got = list(&env, &["--id", missing, "--id", numeric]);
    assert_eq!(
        got.iter().map(|r| r.status.as_str()).collect::<Vec<_>>(),
        ["selected", "selected"]
    );
    // A summary row without its conversation is no conversation: not found (5), as any ID
    // that names none.
    let out = env
        .cmd()
        .args(["list", "--id", "orphan-summary", "--json"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(5));
    assert!(out.stdout.is_empty());
    assert!(String::from_utf8_lossy(&out.stderr).contains("conversation orphan-summary: not found"));
}

/// Which conversations have no summary row is found by merging the two tables' id indexes
/// (regression guard for that merge, issue 11): summary rows deleted at both ends of the id
/// order and in between, a summary whose id is the BLOB of a conversation's TEXT id (SQLite's
/// `=` does not match them), and a conversation whose own id is a BLOB. Every conversation is
/// listed exactly once; the oracle is the test's own SQL join, in listing order.
#[test]
fn conversations_missing_summary_rows_anywhere_in_the_id_order_are_listed() {
    let (env, _) = fixture();
    let c = env.conn();
    let by_id = env.ids("SELECT id FROM conversations ORDER BY id");
    let mut gone: Vec<&String> = vec![&by_id[0], &by_id[N - 1]];
    gone.extend(by_id.iter().skip(3).step_by(7));
    for id in &gone {
        c.execute("DELETE FROM conversation_summaries WHERE id = ?1", [id])
            .unwrap();
    }
    // The summary of by_id[1] keyed by the BLOB of its id: no longer that conversation's.
    c.execute(
        "UPDATE conversation_summaries SET id = CAST(id AS BLOB) WHERE id = ?1",
        [&by_id[1]],
    )
    .unwrap();
    // A conversation stored under a BLOB id, with a TEXT summary id of the same bytes.
    c.execute(
        "UPDATE conversations SET id = CAST(id AS BLOB) WHERE id = ?1",
        [&by_id[2]],
    )
    .unwrap();
    drop(c);
    let want = env.ids(
        "SELECT id FROM (
           SELECT CAST(s.id AS TEXT) AS id, s.updated_at AS k, 0 AS src, s.rowid AS r
             FROM conversation_summaries s JOIN conversations c ON c.id = s.id
            WHERE typeof(s.updated_at) = 'text'
           UNION ALL
           SELECT CAST(c.id AS TEXT), c.updated_at, 1, c.rowid
             FROM conversations c LEFT JOIN conversation_summaries s ON s.id = c.id
            WHERE s.id IS NULL OR typeof(s.updated_at) != 'text')
         ORDER BY k DESC, src, r",
    );
    assert_eq!(want.len(), N);
    let rows = list(&env, &[]);
    let got: Vec<String> = rows.iter().map(|r| r.id.clone()).collect();
    // Every one listed; in the listing's order within `conversations` (the skipped and the
    // unreadable are listed apart, after).
    let (mut a, mut b) = (got.clone(), want.clone());
    a.sort();
    b.sort();
    assert_eq!(a, b, "listed");
    let selected: Vec<&String> = rows
        .iter()
        .filter(|r| r.status == "selected")
        .map(|r| &r.id)
        .collect();
    let want_order: Vec<&String> = want.iter().filter(|id| selected.contains(id)).collect();
    assert_eq!(selected, want_order, "list order");
    let selected: Vec<String> = list(&env, &["--all-over", "0", "--idle", "0"])
        .into_iter()
        .map(|r| r.id)
        .collect();
    let mut sorted = selected.clone();
    sorted.sort();
    sorted.dedup();
    assert_eq!(sorted.len(), selected.len(), "each conversation once");
    for id in gone {
        assert!(selected.contains(id), "{id} (no summary row) selected");
    }
}

/// `list --ids` reads only what the selection needs of each summary row: a row whose `usage` the
/// quick reader is not sure of (spaces, a float), one with a legacy NULL `provider` (read from
/// the conversation's own row) and a summary row without a conversation (not listed) are
/// selected exactly as the full listing and the SQL oracle select them, in listing order, with
/// the idle default in force (which reads `updated_at`).
#[test]
fn ids_listing_reads_odd_summary_rows_as_the_full_listing_does() {
    let (env, convs) = fixture();
    let c = env.conn();
    let by_age: Vec<&str> = convs.iter().map(|c| c.id.as_str()).collect();
    // Not sure for the quick reader: spaces and a float field; still over 0.02 for serde.
    c.execute(
        "UPDATE conversation_summaries SET usage = ' { \"currentContextWindow\" : 9000 , \
         \"maxContextWindow\": 10000, \"inputCost\": 1.5e-3 } ' WHERE id = ?1",
        [by_age[3]],
    )
    .unwrap();
    c.execute(
        "UPDATE conversations SET usage = (SELECT usage FROM conversation_summaries WHERE id = ?1) \
         WHERE id = ?1",
        [by_age[3]],
    )
    .unwrap();
    c.execute(
        "UPDATE conversation_summaries SET provider = NULL WHERE id = ?1",
        [by_age[4]],
    )
    .unwrap();
    // A summary row whose conversation is gone.
    c.execute("DELETE FROM conversations WHERE id = ?1", [by_age[6]])
        .unwrap();
    drop(c);
    let over = sql_over(&env, 0.02);
    assert!(over.contains(&by_age[3].to_string()) && !over.contains(&by_age[6].to_string()));
    let args = ["--all-over", "0.02"];
    let got = list(&env, &args);
    let want = walk(&convs, None, |c| {
        if c.id == by_age[6] {
            None
        } else if !c.has_window() {
            Some(Want::Skipped(NO_WINDOW))
        } else if !over.contains(&c.id) {
            None
        } else if c.age < mins(10) {
            Some(Want::Skipped(IDLE))
        } else {
            Some(Want::Selected)
        }
    });
    check(&args, &got, &want, Some("threshold"));
}

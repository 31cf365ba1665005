//! Error lines: whether a tool result failed and which of its lines say so best (exit codes,
//! compiler and runtime errors, diagnostics), scored and clipped for the summary; the exit code
//! a result reports and the names of the tests a runner reported as failed. The markers are in
//! `lexicon`.

use super::lexicon::{
    ERROR_COLON_MARKERS, ERROR_CONTAINS, ERROR_STARTS, EXIT_MARKERS, FAILED_TEST_PREFIXES,
    FAIL_CONTAINS, FAIL_STARTS, FRAME_MARKERS, NONZERO_EXIT_MARKERS, NONZERO_WORDS,
    STRONG_ERROR_CONTAINS, STRONG_ERROR_STARTS, TEST_LINE_PREFIXES, UPPERCASE_ERROR_WORDS,
    UPPERCASE_FAIL_WORDS,
};
use super::text::{clip, collapse};

const ERROR_CHARS: usize = 200;
/// Extra room for a location line added to the error lines.
const LOCATION_CHARS: usize = 160;
/// Failed test names listed per error.
const MAX_FAILED_TESTS: usize = 5;
const TEST_NAME_CHARS: usize = 120;

/// The exit code a line reports (`exit code 1`, `exited with status 2`, `exitCode: 0`).
pub(super) fn exit_code(lower: &str) -> Option<i64> {
    // Every marker holds "exit" (a test holds the lexicon to it): most lines are turned away by
    // one search instead of one per marker.
    if !lower.contains(EXIT_WORD) {
        return None;
    }
    if NONZERO_EXIT_MARKERS.iter().any(|m| lower.contains(m)) {
        return Some(1);
    }
    for marker in EXIT_MARKERS {
        if let Some(p) = lower.find(marker) {
            let rest = lower[p + marker.len()..].trim_start_matches([' ', ':', '=', '"']);
            let digits: String = rest
                .chars()
                .take_while(|c| c.is_ascii_digit() || *c == '-')
                .collect();
            if let Ok(n) = digits.parse::<i64>() {
                return Some(n);
            }
            if NONZERO_WORDS.iter().any(|w| rest.starts_with(w)) {
                return Some(1);
            }
        }
    }
    None
}

/// What every exit marker holds.
const EXIT_WORD: &str = "exit";

/// The first non-zero exit code a result reports.
pub(super) fn result_exit_code(content: &str) -> Option<i64> {
    content
        .lines()
        .filter_map(|l| exit_code(&l.to_lowercase()))
        .find(|c| *c != 0)
}

/// Whether `t` contains `Error:` (not `Error::`) right after an identifier such as `TypeError`
/// (`named`) or on its own.
fn error_colon(t: &str) -> (bool, bool) {
    let lower = t.to_ascii_lowercase();
    let mut any = false;
    let mut named = false;
    for marker in ERROR_COLON_MARKERS {
        let mut from = 0;
        while let Some(p) = lower[from..].find(marker) {
            let s = from + p;
            let e = s + marker.len();
            from = e;
            // `Error:` with a capital, not `error:` inside prose or `Error::` paths.
            if !t[s..].starts_with(|c: char| c.is_uppercase()) || lower[e..].starts_with(':') {
                continue;
            }
            any = true;
            if t[..s]
                .chars()
                .next_back()
                .is_some_and(|c| c.is_alphanumeric() || c == '.')
            {
                named = true;
            }
        }
    }
    (any, named)
}

/// Whether the uppercase form of any of `words` occurs in `t` as a whole word.
fn has_upper_word(t: &str, words: &[&str]) -> bool {
    words.iter().any(|w| has_word_cs(t, &w.to_uppercase()))
}

/// How clearly a line reports an error: 0 (not at all) to 5 (a compiler or runtime error).
fn line_score(line: &str) -> u8 {
    let t = line.trim();
    if t.is_empty() {
        return 0;
    }
    let lower = t.to_lowercase();
    if let Some(code) = exit_code(&lower) {
        return u8::from(code != 0);
    }
    let (error_colon, named_error) = error_colon(t);
    if STRONG_ERROR_CONTAINS.iter().any(|m| lower.contains(m))
        || STRONG_ERROR_STARTS.iter().any(|m| lower.starts_with(m))
        || named_error
    {
        return 5;
    }
    if error_colon
        || has_upper_word(t, UPPERCASE_ERROR_WORDS)
        || ERROR_CONTAINS.iter().any(|m| lower.contains(m))
        || ERROR_STARTS.iter().any(|m| lower.starts_with(m))
    {
        return 3;
    }
    if has_upper_word(t, UPPERCASE_FAIL_WORDS)
        || FAIL_STARTS.iter().any(|m| lower.starts_with(m))
        || FAIL_CONTAINS.iter().any(|m| lower.contains(m))
    {
        return 2;
    }
    0
}

/// Names of the tests a runner reported as failed (`--- FAIL: TestX`, `test a::b ... FAILED`,
/// `FAILED tests/x.py::test_y - …`), de-duplicated, in order.
pub(super) fn failed_tests(content: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for line in content.lines() {
        let t = line.trim();
        let lower = t.to_lowercase();
        let name = FAILED_TEST_PREFIXES
            .iter()
            .find(|p| {
                lower.starts_with(*p) && t.starts_with(|c: char| c == '-' || c.is_uppercase())
            })
            .and_then(|p| t[p.len()..].split_whitespace().next())
            .or_else(|| {
                let upper_fail = UPPERCASE_FAIL_WORDS.first().map(|w| w.to_uppercase())?;
                let prefix = TEST_LINE_PREFIXES.iter().find(|p| lower.starts_with(*p))?;
                t.ends_with(&upper_fail)
                    .then(|| t[prefix.len()..].split_whitespace().next())
                    .flatten()
            });
        if let Some(n) = name {
            let n = clip(n.trim_end_matches(':'), TEST_NAME_CHARS);
            if n.chars().any(char::is_alphanumeric) && !out.contains(&n) {
                out.push(n);
            }
        }
        if out.len() >= MAX_FAILED_TESTS {
            break;
        }
    }
    out
}

/// Whether `word` occurs in `t` as a whole word (case-sensitive).
fn has_word_cs(t: &str, word: &str) -> bool {
    t.match_indices(word).any(|(s, _)| {
        let e = s + word.len();
        t[..s]
            .chars()
            .next_back()
            .is_none_or(|c| !c.is_alphanumeric())
            && t[e..].chars().next().is_none_or(|c| !c.is_alphanumeric())
    })
}

/// A compiler-style diagnostic: `path/file.ext:12:5: message` or `file.ext(12,5): message`.
fn is_diagnostic(t: &str) -> bool {
    let t = t.trim();
    let Some((loc, msg)) = t.split_once(": ") else {
        return false;
    };
    if msg.trim().is_empty() || loc.contains(char::is_whitespace) {
        return false;
    }
    let path = match loc.split_once('(') {
        Some((p, rest)) => {
            if !rest.ends_with(')')
                || !rest[..rest.len() - 1]
                    .chars()
                    .all(|c| c.is_ascii_digit() || c == ',')
            {
                return false;
            }
            p
        }
        None => {
            let mut parts = loc.rsplitn(3, ':').collect::<Vec<_>>();
            parts.reverse();
            let nums = parts
                .iter()
                .skip(1)
                .filter(|x| !x.is_empty() && x.chars().all(|c| c.is_ascii_digit()))
                .count();
            if nums == 0 || nums + 1 != parts.len() {
                return false;
            }
            parts[0]
        }
    };
    path.rsplit('/').next().is_some_and(|f| f.contains('.'))
}

/// The most informative error line(s) of a tool result, or `None` when it did not fail.
/// `first_lines_only` limits the scan to the first three lines (file contents and search
/// matches are full of "error" words that are not errors).
#[cfg(test)]
pub(super) fn error_line(content: &str, is_error: bool, first_lines_only: bool) -> Option<String> {
    error_line_near(content, is_error, first_lines_only, &[])
}

/// [`error_line`], preferring a location in the project: `known` are the paths of the files the
/// session touched so far.
pub(super) fn error_line_near(
    content: &str,
    is_error: bool,
    first_lines_only: bool,
    known: &[&str],
) -> Option<String> {
    let lines: Vec<&str> = content.lines().filter(|l| !l.trim().is_empty()).collect();
    let scan = if first_lines_only && !is_error {
        &lines[..lines.len().min(3)]
    } else {
        &lines[..]
    };
    let scored = scored_lines(scan, is_error, first_lines_only);
    let best = best_of(scored.iter().copied());
    let Some((bi, bs)) = best else {
        if is_error {
            return lines.first().map(|l| clip(&collapse(l), ERROR_CHARS));
        }
        return None;
    };
    let mut picked = vec![bi];
    // A compiler error's location line (`--> src/x.rs:12:5`) says where.
    if bs >= 5 {
        if let Some(next) = scan.get(bi + 1) {
            if next.trim_start().starts_with("-->") {
                picked.push(bi + 1);
            }
        }
    }
    // The runner-up, when it fits.
    let second = best_of(scored.iter().copied().filter(|(i, _)| !picked.contains(i)));
    if let Some((si, _)) = second {
        let len: usize = picked
            .iter()
            .chain([&si])
            .map(|&i| collapse(scan[i]).chars().count() + 3)
            .sum();
        if len <= ERROR_CHARS {
            picked.push(si);
        }
    }
    let located = add_location(scan, &mut picked, bi, known);
    picked.sort_unstable();
    picked.dedup();
    let joined = picked
        .iter()
        .map(|&i| collapse(scan[i]))
        .collect::<Vec<_>>()
        .join(" | ");
    Some(clip(
        &joined,
        ERROR_CHARS + if located { LOCATION_CHARS } else { 0 },
    ))
}

/// The lines of `scan` that look like an error, with their score. In a result that failed,
/// compiler-style diagnostics say what failed (score 2).
fn scored_lines(scan: &[&str], is_error: bool, first_lines_only: bool) -> Vec<(usize, u8)> {
    let scores: Vec<u8> = scan.iter().map(|l| line_score(l)).collect();
    let scored: Vec<(usize, u8)> = scores
        .iter()
        .copied()
        .enumerate()
        .filter(|(_, s)| *s > 0)
        .collect();
    if (is_error || !scored.is_empty()) && !first_lines_only {
        scan.iter()
            .zip(&scores)
            .enumerate()
            .filter_map(|(i, (l, s))| match *s {
                0 if is_diagnostic(l) => Some((i, 2)),
                0 => None,
                s => Some((i, s)),
            })
            .collect()
    } else {
        scored
    }
}

/// The highest-scored line, the first of equals.
fn best_of(scored: impl Iterator<Item = (usize, u8)>) -> Option<(usize, u8)> {
    scored.fold(None, |acc, (i, s)| match acc {
        Some((_, bs)) if bs >= s => acc,
        _ => Some((i, s)),
    })
}

/// When no picked line says where, add a line that does (`at f (src/x.js:12:5)`,
/// `File "app/x.py", line 3`): the one nearest the project (see [`affinity`]), and among those
/// the first after the best line, else the last before it. Returns whether one was added.
fn add_location(scan: &[&str], picked: &mut Vec<usize>, best: usize, known: &[&str]) -> bool {
    if picked.iter().any(|&i| has_location(scan[i])) {
        return false;
    }
    let fits =
        |i: &usize| has_location(scan[*i]) && collapse(scan[*i]).chars().count() <= LOCATION_CHARS;
    let order = (best + 1..scan.len()).chain((0..best).rev()).filter(fits);
    // Any frame in the project will do (the first in order, where the failure surfaced), not
    // the one in the most-visited directory.
    let cap = project_depth(known).unwrap_or(usize::MAX);
    let mut found: Option<(usize, usize)> = None;
    for i in order.take(MAX_LOCATIONS) {
        let a = affinity(scan[i], known).min(cap);
        if found.is_none_or(|(_, fa)| a > fa) {
            found = Some((i, a));
        }
    }
    match found {
        Some((i, _)) => {
            picked.push(i);
            true
        }
        None => false,
    }
}

/// Location lines compared per error, and touched files compared per location.
const MAX_LOCATIONS: usize = 64;
const MAX_KNOWN: usize = 256;

/// The directories all touched absolute paths share (the project's root), when they share any.
fn project_depth(known: &[&str]) -> Option<usize> {
    let mut common: Option<Vec<&str>> = None;
    for k in known.iter().take(MAX_KNOWN).filter(|k| k.starts_with('/')) {
        let dirs: Vec<&str> = k.split('/').filter(|d| !d.is_empty()).collect();
        let dirs = &dirs[..dirs.len().saturating_sub(1)];
        common = Some(match common {
            None => dirs.to_vec(),
            Some(c) => c
                .iter()
                .zip(dirs)
                .take_while(|(a, b)| a == b)
                .map(|(a, _)| *a)
                .collect(),
        });
    }
    common.map(|c| c.len()).filter(|&n| n > 0)
}

/// How near a location line is to the project: the most leading directories one of its paths
/// shares with a file the session touched (for a relative path: how many of its directories
/// occur in a row in one). A runtime's or a library's frame (`/usr/local/go/src/…`) shares none.
fn affinity(line: &str, known: &[&str]) -> usize {
    let mut best = 0;
    for t in line.split(|c: char| c.is_whitespace() || "()[]'\",".contains(c)) {
        let path = t.split(':').next().unwrap_or(t);
        let Some((dir, _)) = path.rsplit_once('/') else {
            continue;
        };
        let dirs: Vec<&str> = dir.split('/').filter(|d| !d.is_empty()).collect();
        for k in known.iter().take(MAX_KNOWN) {
            let kd: Vec<&str> = k.split('/').filter(|d| !d.is_empty()).collect();
            let n = if path.starts_with('/') {
                if k.starts_with('/') {
                    dirs.iter().zip(&kd).take_while(|(a, b)| a == b).count()
                } else {
                    0
                }
            } else if !dirs.is_empty() && kd.windows(dirs.len()).any(|w| w == dirs.as_slice()) {
                dirs.len()
            } else {
                0
            };
            best = best.max(n);
        }
    }
    best
}

/// Whether a line names a source location: `file.ext:line` or a Python frame.
fn has_location(line: &str) -> bool {
    let lower = line.to_lowercase();
    if FRAME_MARKERS.iter().all(|m| lower.contains(m)) {
        return true;
    }
    line.split(|c: char| c.is_whitespace() || "()[]'\",".contains(c))
        .any(|t| {
            let Some((file, rest)) = t.split_once(':') else {
                return false;
            };
            let ext_ok = file.rsplit_once('.').is_some_and(|(stem, ext)| {
                !stem.is_empty()
                    && (1..=6).contains(&ext.len())
                    && ext.chars().all(|c| c.is_ascii_alphanumeric())
                    && ext.chars().any(|c| c.is_ascii_alphabetic())
            });
            ext_ok && rest.starts_with(|c: char| c.is_ascii_digit())
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// [`exit_code`] turns a line away when it lacks [`EXIT_WORD`]: every marker must hold it.
    #[test]
    fn every_exit_marker_holds_the_exit_word() {
        for m in EXIT_MARKERS.iter().chain(NONZERO_EXIT_MARKERS) {
            assert!(m.contains(EXIT_WORD), "{m:?}");
        }
        assert_eq!(exit_code("process exited with code 3"), Some(3));
        assert_eq!(exit_code("returned non-zero exit status"), Some(1));
        assert_eq!(exit_code("code 3"), None);
    }

    #[test]
    fn error_lines() {
        assert_eq!(
            error_line("Error: Command exited with status 1\nTraceback (most recent call last):\n  File \"x.py\", line 3\nModuleNotFoundError: No module named 'frob'", false, false).as_deref(),
            Some("Traceback (most recent call last): | File \"x.py\", line 3 | ModuleNotFoundError: No module named 'frob'")
        );
        assert_eq!(error_line("all good\nexit code 0", false, false), None);
        assert_eq!(error_line("done", true, false).as_deref(), Some("done"));
        assert_eq!(
            error_line(
                "bash: line 1: gradlew: command not found\nError: Command exited with status 127",
                false,
                false
            )
            .as_deref(),
            Some(
                "bash: line 1: gradlew: command not found | Error: Command exited with status 127"
            )
        );
        assert_eq!(
            error_line("fn f() -> io::Error::Other {}", false, false),
            None
        );
        assert_eq!(
            error_line("line one\nline two\nline three\nerror: late", false, true),
            None
        );
        assert_eq!(line_score("test result: ok. 3 passed; 0 failed"), 0);
        assert_eq!(line_score("test parse::tests::it_works ... FAILED"), 2);
        assert_eq!(line_score("src/a.ts(3,4): error TS2322: Type 'x'"), 5);
        assert_eq!(line_score("===== ERRORS ====="), 0);
        assert_eq!(
            line_score("psql:m/0042.sql:17: ERROR:  relation \"x\" does not exist"),
            5
        );
        assert!(is_diagnostic("internal/a/b.go:12:5: undefined: Foo"));
        assert_eq!(
            failed_tests("=== RUN TestA\n--- FAIL: TestA (0.01s)\ntest parse::it ... FAILED\nFAILED tests/t.py::test_x - assert 1\nFAIL\tpkg 0.1s"),
            vec!["TestA", "parse::it", "tests/t.py::test_x"]
        );
        assert_eq!(
            result_exit_code("ok\nError: Command exited with status 101"),
            Some(101)
        );
        assert!(is_diagnostic("src/a.ts(3,4): oops"));
        assert!(!is_diagnostic("note: see above"));
        assert!(!is_diagnostic("at 12:30: lunch"));
        // Diagnostics name the failure when the result failed, and are no error on their own.
        assert_eq!(
            error_line("Error: Command exited with status 2\nok  \tpkg/a\ninternal/a/b.go:12:5: undefined: Foo", false, false).as_deref(),
            Some("Error: Command exited with status 2 | internal/a/b.go:12:5: undefined: Foo")
        );
        assert_eq!(
            error_line("internal/a/b.go:12:5: undefined: Foo", false, false),
            None
        );
        // A Go panic: the frame in the project, not the runtime's, says where.
        let trace = "--- FAIL: TestLease (0.00s)\npanic: runtime error: index out of range [3]\n\ngoroutine 7 [running]:\ntesting.tRunner.func1()\n\t/usr/local/go/src/testing/testing.go:1632 +0x1bc\npanic({0x1, 0x2})\n\t/usr/local/go/src/runtime/panic.go:785 +0x124\napp/internal.(*Leases).Renew(0x1)\n\t/home/dev/app/internal/lease.go:157 +0x2c\nFAIL\tapp/internal\t0.3s";
        let known = ["/home/dev/app/internal/store.go", "/home/dev/app/README.md"];
        let line = error_line_near(trace, true, false, &known).unwrap();
        assert!(
            line.contains("/home/dev/app/internal/lease.go:157"),
            "{line}"
        );
        // The first project frame, not the one in the directory touched most.
        let deeper = trace.replace(
            "\nFAIL\tapp",
            "\napp/internal.TestLease(0x1)\n\t/home/dev/app/internal/x/lease_test.go:48 +0x98\nFAIL\tapp",
        );
        let known = ["/home/dev/app/internal/x/a.go", "/home/dev/app/README.md"];
        let line = error_line_near(&deeper, true, false, &known).unwrap();
        assert!(line.contains("lease.go:157"), "{line}");
        assert_eq!(project_depth(&known), Some(3));
        let line = error_line_near(trace, true, false, &[]).unwrap();
        assert!(line.contains("testing.go:1632"), "{line}");
        assert_eq!(
            affinity("  File \"app/x.py\", line 3", &["/srv/app/y.py"]),
            1
        );
    }
}

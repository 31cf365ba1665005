//! A test that cannot run here says so and stops, and never under CI: with the environment
//! variable `CI` set (and not empty) every skip is a failure, so a CI run that lost a fixture,
//! a tool or a privilege fails instead of passing with the test silently skipped.
//!
//! Every early return of a test for want of something outside it goes through [`skip`].

#![allow(dead_code)]

use std::ffi::OsString;

/// Whether `CI` (given as its value) asks for skips to fail.
pub fn under_ci(ci: Option<OsString>) -> bool {
    ci.is_some_and(|v| !v.is_empty())
}

/// Skip the calling test for `reason` (what is missing, and how to provide it): a
/// "SKIPPING" line on stderr, or a panic when the environment variable `CI` is set. The caller
/// returns right after.
#[track_caller]
pub fn skip(reason: &str) {
    skip_with(reason, std::env::var_os("CI"))
}

/// [`skip`] with the value of `CI` given (for testing the rule itself).
#[track_caller]
pub fn skip_with(reason: &str, ci: Option<OsString>) {
    let at = std::panic::Location::caller();
    let test = std::thread::current()
        .name()
        .unwrap_or("a test")
        .to_string();
    if under_ci(ci) {
        panic!("{test} cannot run and CI is set, so it fails instead of skipping ({at}): {reason}");
    }
    eprintln!("SKIPPING {test} ({at}): {reason}");
}

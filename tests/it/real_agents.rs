//! The pinned real agents the test suite drives (opencode in `real_opencode.rs`, Kilo in
//! `real_kilo.rs`), installed by the test suite itself: the first test that needs one runs
//! `npm install` of its pinned release into `target/real-agents/<package>@<version>` (ignored
//! by git, removed by `cargo clean`), under a file lock so that parallel tests install it once.
//! Later runs find it there and need no network.
//!
//! Where npm is missing, or the install fails (offline, registry down), the tests that need the
//! agent are skipped by the shared rule (`skip`), with the message also printed past the test
//! harness's output capture, so it shows in a passing `cargo test`; when `CI` is set they fail
//! instead (CI must run them).
//! `AGENT_DB_<NAME>_BIN` (`AGENT_DB_OPENCODE_BIN`, `AGENT_DB_KILO_BIN`) names a binary to use
//! instead of installing one.

use std::ffi::{OsStr, OsString};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;

/// One pinned agent release on npm.
#[derive(Debug)]
pub struct RealAgent {
    /// The name the messages use (`opencode`, `kilo`).
    pub name: &'static str,
    /// The npm package and its pinned version.
    pub package: &'static str,
    pub version: &'static str,
    /// The binary, relative to the install directory.
    pub bin: &'static str,
    /// The variable naming a binary to use instead.
    pub bin_env: &'static str,
    /// The agent's environment prefix (`OPENCODE`, `KILO`) and its application name, which
    /// names its config and data directories and its store (`<app>/<app>.json`, `<app>/<app>.db`).
    pub env_prefix: &'static str,
    pub app: &'static str,
}

/// opencode 1.x: the `opencode-ai` wrapper (its `postinstall` links the platform binary).
pub const OPENCODE: RealAgent = RealAgent {
    name: "opencode",
    package: "opencode-ai",
    version: "1.18.33",
    bin: "node_modules/.bin/opencode",
    bin_env: "AGENT_DB_OPENCODE_BIN",
    env_prefix: "OPENCODE",
    app: "opencode",
};

/// Kilo CLI: the prebuilt Linux x64 binary (the `@kilocode/cli` wrapper downloads nothing, but
/// pulls every platform's package; this one is the binary alone).
pub const KILO: RealAgent = RealAgent {
    name: "kilo",
    package: "@kilocode/cli-linux-x64",
    version: "7.7.9",
    bin: "node_modules/@kilocode/cli-linux-x64/bin/kilo",
    bin_env: "AGENT_DB_KILO_BIN",
    env_prefix: "KILO",
    app: "kilo",
};

/// Where the real agents are installed.
fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("target/real-agents")
}

impl RealAgent {
    /// The agent's install directory: `target/real-agents/<package>@<version>` (a scope's `/`
    /// as `+`).
    pub fn dir(&self, root: &Path) -> PathBuf {
        root.join(format!(
            "{}@{}",
            self.package.replace('/', "+"),
            self.version
        ))
    }

    /// The agent's binary, installed on first use; `None` (the test skips) where it cannot be
    /// had and `CI` is unset.
    pub fn require(&self) -> Option<PathBuf> {
        let ci = std::env::var_os("CI");
        if let Some(p) = std::env::var_os(self.bin_env).filter(|p| !p.is_empty()) {
            let p = PathBuf::from(p);
            if p.is_file() {
                return Some(p);
            }
            return self.missing(
                &format!("{} names {}, which is absent", self.bin_env, p.display()),
                ci,
            );
        }
        match self.install(&root(), OsStr::new("npm")) {
            Ok(bin) => Some(bin),
            Err(why) => self.missing(&why, ci),
        }
    }

    /// The policy for an agent that cannot be had: the shared skip rule (`tests/support/skip.rs`:
    /// skip with a message outside CI, fail under CI), the message also written past the test
    /// harness's capture so that it shows in a passing run.
    #[track_caller]
    pub fn missing(&self, why: &str, ci: Option<OsString>) -> Option<PathBuf> {
        let reason = format!(
            "the real {} ({}@{}) is missing: {why}. It needs npm once (to install it under \
             target/real-agents); then `cargo test` runs it offline",
            self.name, self.package, self.version
        );
        if !crate::common::skip_rule::under_ci(ci.clone()) {
            let _ = writeln!(
                std::io::stderr(),
                "\n########## SKIPPING: {reason} ##########"
            );
        }
        crate::common::skip_with(&reason, ci);
        None
    }

    /// Installs the pinned release under `root` with `npm` (the program to run) unless it is
    /// there already, under `root/.lock`: the binary, or why it cannot be had.
    pub fn install(&self, root: &Path, npm: &OsStr) -> Result<PathBuf, String> {
        let dir = self.dir(root);
        let bin = dir.join(self.bin);
        let done = dir.join(".installed");
        let ready = || {
            bin.is_file() && std::fs::read_to_string(&done).is_ok_and(|v| v.trim() == self.version)
        };
        if ready() {
            return Ok(bin);
        }
        std::fs::create_dir_all(&dir)
            .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        let lock_path = root.join(".lock");
        let lock = std::fs::File::create(&lock_path)
            .map_err(|e| format!("cannot create {}: {e}", lock_path.display()))?;
        lock.lock()
            .map_err(|e| format!("cannot lock {}: {e}", lock_path.display()))?;
        // Another test may have installed it while this one waited.
        if ready() {
            return Ok(bin);
        }
        // A package.json of its own, so npm installs here and not into an enclosing project.
        let manifest = dir.join("package.json");
        if !manifest.is_file() {
            std::fs::write(&manifest, "{\"private\": true}\n")
                .map_err(|e| format!("cannot write {}: {e}", manifest.display()))?;
        }
        let spec = format!("{}@{}", self.package, self.version);
        let out = Command::new(npm)
            .arg("install")
            .arg("--prefix")
            .arg(&dir)
            .args(["--no-audit", "--no-fund", "--no-save", "--loglevel=error"])
            .arg(&spec)
            .output()
            .map_err(|e| format!("npm is not available ({}: {e})", npm.to_string_lossy()))?;
        if !out.status.success() {
            return Err(format!(
                "`npm install {spec}` failed ({}): {}",
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        let got = Command::new(&bin)
            .arg("--version")
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
            .unwrap_or_default();
        if got != self.version {
            return Err(format!(
                "{} --version printed {got:?} after `npm install {spec}`, expected {}",
                bin.display(),
                self.version
            ));
        }
        std::fs::write(&done, self.version)
            .map_err(|e| format!("cannot write {}: {e}", done.display()))?;
        Ok(bin)
    }
}

#[test]
fn a_missing_agent_skips_outside_ci() {
    for agent in [&OPENCODE, &KILO] {
        assert_eq!(agent.missing("gone", None), None);
        assert_eq!(agent.missing("gone", Some("".into())), None);
    }
}

#[test]
#[should_panic(expected = "the real kilo (@kilocode/cli-linux-x64@7.7.9) is missing")]
fn a_missing_agent_fails_under_ci() {
    KILO.missing("gone", Some("true".into()));
}

/// Without npm the install says so (and writes no marker), so the tests skip or fail by the
/// policy above.
#[test]
fn without_npm_the_install_names_npm() {
    let root = tempfile::tempdir().expect("tempdir");
    let err = KILO
        .install(root.path(), OsStr::new("/nonexistent/agent-db/npm"))
        .expect_err("no npm, no install");
    assert!(err.contains("npm is not available"), "{err}");
    assert!(!KILO.dir(root.path()).join(".installed").exists());
}

/// An installed release (binary and marker) is used as it is: npm is not run (here it does not
/// exist), so a cached install works offline.
#[test]
fn a_cached_install_needs_no_npm() {
    let root = tempfile::tempdir().expect("tempdir");
    let dir = KILO.dir(root.path());
    let bin = dir.join(KILO.bin);
    std::fs::create_dir_all(bin.parent().unwrap()).unwrap();
    std::fs::write(&bin, "#!/bin/sh\necho 7.7.9\n").unwrap();
    std::fs::write(dir.join(".installed"), "7.7.9").unwrap();
    assert_eq!(
        KILO.install(root.path(), OsStr::new("/nonexistent/agent-db/npm")),
        Ok(bin)
    );
    // Another version's marker is not this install.
    std::fs::write(dir.join(".installed"), "7.7.8").unwrap();
    assert!(KILO
        .install(root.path(), OsStr::new("/nonexistent/agent-db/npm"))
        .is_err());
}

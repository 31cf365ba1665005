//! Fail before spending: a store agent-db cannot write (a read-only file, a read-only directory
//! where the WAL must be created, a file-size limit it would outgrow, another agent-db holding
//! the lock) is refused before the first summary is made. The llm strategy points at a server on
//! 127.0.0.1 that counts requests: it must see none, and the store's files keep every byte.
//!
//! As root, file permissions do not stop a process; those cases run agent-db through `setpriv`
//! with the capabilities that bypass them dropped, which is what an ordinary user has.

use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::Path;

use agent_db_synth::SynthFormat;

use crate::common::{files_hash, std_cmd, Env, MiniLlm};

const STORE: i32 = 4;
const LOCKED: i32 = 6;

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// `agent-db --db DB compact … --strategy llm` against `server`, as an ordinary user would run it
/// (as root: through setpriv without the capabilities that bypass file permissions).
fn compact_llm(
    env: &Env,
    db: &Path,
    server: &MiniLlm,
    configure: impl FnOnce(&mut std::process::Command),
) -> (i32, String) {
    let mut c = std_cmd(env.dir.path());
    if is_root() {
        let program = c.get_program().to_owned();
        let mut wrapped = std::process::Command::new("setpriv");
        wrapped
            .args([
                "--bounding-set",
                "-dac_override,-dac_read_search,-fowner,-linux_immutable",
            ])
            .arg(program);
        for (k, v) in c.get_envs() {
            match v {
                Some(v) => wrapped.env(k, v),
                None => wrapped.env_remove(k),
            };
        }
        c = wrapped;
    }
    c.current_dir(env.dir.path())
        .arg("--db")
        .arg(db)
        .args([
            "compact",
            "--all-over",
            "0",
            "--idle",
            "0",
            "--keep-tokens",
            "300",
        ])
        .args([
            "--strategy",
            "llm",
            "--llm-provider",
            "openai",
            "--model",
            "m",
        ])
        .arg("--base-url")
        .arg(server.base_url())
        .env("AGENT_DB_API_KEY", "sk-preflight-test");
    configure(&mut c);
    let out = c.output().expect("run");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(!stderr.contains("panicked"), "{stderr}");
    (out.status.code().unwrap_or(-1), stderr)
}

fn store() -> Env {
    Env::generated(6, 31, &[SynthFormat::Anthropic])
}

#[test]
fn a_read_only_store_file_is_refused_before_any_request() {
    let env = store();
    let server = MiniLlm::start();
    let mut p = std::fs::metadata(&env.db).unwrap().permissions();
    p.set_mode(0o444);
    std::fs::set_permissions(&env.db, p).unwrap();
    let before = files_hash(&env.db);
    let (code, stderr) = compact_llm(&env, &env.db, &server, |_| {});
    assert_eq!(code, STORE, "{stderr}");
    assert!(
        stderr.contains(&env.db.display().to_string()) && stderr.contains("not writable"),
        "{stderr}"
    );
    assert_eq!(
        stderr.lines().filter(|l| l.contains("error:")).count(),
        1,
        "{stderr}"
    );
    assert_eq!(server.requests(), 0, "no request is sent");
    assert_eq!(files_hash(&env.db), before);
}

#[test]
fn a_read_only_directory_is_refused_before_any_request() {
    let env = store();
    let server = MiniLlm::start();
    let dir = env.dir.path().join("ro");
    std::fs::create_dir(&dir).unwrap();
    let db = dir.join("storage.db");
    std::fs::copy(&env.db, &db).unwrap();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o555)).unwrap();
    let before = files_hash(&db);
    let (code, stderr) = compact_llm(&env, &db, &server, |_| {});
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    assert_eq!(code, STORE, "{stderr}");
    assert!(
        stderr.contains("directory") && stderr.contains("-wal"),
        "names the WAL it cannot create: {stderr}"
    );
    assert_eq!(server.requests(), 0);
    assert_eq!(files_hash(&db), before);
}

#[test]
fn a_file_size_limit_below_the_store_is_refused_before_any_request() {
    let env = store();
    let server = MiniLlm::start();
    let size = std::fs::metadata(&env.db).unwrap().len();
    let before = files_hash(&env.db);
    let (code, stderr) = compact_llm(&env, &env.db, &server, |c| {
        let limit = size + 4096;
        // SAFETY: setrlimit is async-signal-safe; it only lowers this child's own limit.
        unsafe {
            c.pre_exec(move || {
                let lim = libc::rlimit {
                    rlim_cur: limit as libc::rlim_t,
                    rlim_max: libc::RLIM_INFINITY,
                };
                if libc::setrlimit(libc::RLIMIT_FSIZE, &lim) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
    });
    assert_eq!(code, STORE, "{stderr}");
    assert!(stderr.contains("ulimit -f"), "{stderr}");
    assert_eq!(server.requests(), 0);
    assert_eq!(files_hash(&env.db), before);
}

#[test]
fn a_store_locked_by_another_run_is_refused_before_any_request() {
    let env = store();
    let server = MiniLlm::start();
    let lock = agent_db::store::lock::lock_path(&env.db);
    let held = std::fs::File::create(&lock).unwrap();
    held.try_lock().unwrap();
    let before = files_hash(&env.db);
    let (code, stderr) = compact_llm(&env, &env.db, &server, |_| {});
    assert_eq!(code, LOCKED, "{stderr}");
    assert_eq!(server.requests(), 0);
    assert_eq!(files_hash(&env.db), before);
    drop(held);
}

#[test]
fn a_writable_store_does_spend_and_write() {
    // The control: the same command on a writable store reaches the server and writes.
    let env = store();
    let server = MiniLlm::start();
    let before = files_hash(&env.db);
    let (code, stderr) = compact_llm(&env, &env.db, &server, |_| {});
    assert_eq!(code, 0, "{stderr}");
    assert!(server.requests() > 0);
    assert_ne!(files_hash(&env.db), before);
}

/// A real full disk: a 4 MB tmpfs holding the store leaves less than the free space a run
/// starts with. Mounting needs root; elsewhere the test says so and stops (the file-size-limit
/// test above covers the same refusal without privileges).
#[test]
fn a_full_disk_is_refused_before_any_request() {
    if !is_root() {
        crate::common::skip("mounting a small tmpfs needs root (run the tests as root)");
        return;
    }
    let env = store();
    let server = MiniLlm::start();
    let mnt = env.dir.path().join("small-disk");
    std::fs::create_dir(&mnt).unwrap();
    let mounted = std::process::Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=4m", "tmpfs"])
        .arg(&mnt)
        .status();
    if !matches!(mounted, Ok(s) if s.success()) {
        crate::common::skip(&format!(
            "mount -t tmpfs is not permitted here ({mounted:?}): a container needs CAP_SYS_ADMIN"
        ));
        return;
    }
    struct Unmount(std::path::PathBuf);
    impl Drop for Unmount {
        fn drop(&mut self) {
            let _ = std::process::Command::new("umount").arg(&self.0).status();
        }
    }
    let _guard = Unmount(mnt.clone());
    let db = mnt.join("storage.db");
    std::fs::copy(&env.db, &db).unwrap();
    let before = files_hash(&db);
    let (code, stderr) = compact_llm(&env, &db, &server, |_| {});
    assert_eq!(code, STORE, "{stderr}");
    assert!(stderr.contains("disk is full"), "{stderr}");
    assert_eq!(server.requests(), 0);
    assert_eq!(files_hash(&db), before);
}

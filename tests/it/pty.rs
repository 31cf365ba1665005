//! Running `agent-db` with stdout on a real pseudo-terminal of a given width (openpty), so table
//! fitting is tested the way a user sees it, not through a test-only switch.

use std::io::Read;
use std::os::fd::{FromRawFd, OwnedFd};
use std::process::{Command, Stdio};

/// What a run on a terminal printed.
pub struct TtyOut {
    /// stdout as the terminal received it (`\r\n` turned back into `\n`).
    pub stdout: String,
    pub stderr: String,
    pub code: i32,
}

/// Run `cmd` with stdout on a new pseudo-terminal `cols` wide; stdin is empty and stderr a pipe.
/// `COLUMNS` is removed, so the width comes from the terminal itself.
pub fn run(mut cmd: Command, cols: u16) -> TtyOut {
    let (mut master, slave) = open(cols);
    cmd.env_remove("COLUMNS")
        .stdin(Stdio::null())
        .stdout(Stdio::from(slave))
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("spawn agent-db");
    // The parent's copy of the slave end went into `cmd`; drop it so reads end at exit.
    drop(cmd);
    let reader = std::thread::spawn(move || {
        let mut buf = Vec::new();
        let mut chunk = [0u8; 4096];
        loop {
            match master.read(&mut chunk) {
                Ok(0) | Err(_) => break, // EIO once the slave is closed everywhere
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
        }
        buf
    });
    let mut stderr = String::new();
    if let Some(mut e) = child.stderr.take() {
        e.read_to_string(&mut stderr).expect("stderr");
    }
    let status = child.wait().expect("wait");
    let out = reader.join().expect("reader");
    TtyOut {
        stdout: String::from_utf8_lossy(&out).replace("\r\n", "\n"),
        stderr,
        code: status.code().unwrap_or(-1),
    }
}

/// Run `cmd` with stderr on a new pseudo-terminal (stdout a pipe, stdin empty): how errors look
/// to a user at a terminal. `stdout` holds the pipe's text, `stderr` the terminal's.
pub fn run_stderr_on_tty(mut cmd: Command) -> TtyOut {
    let (mut master, slave) = open(80);
    cmd.env_remove("COLUMNS")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::from(slave));
    let mut child = cmd.spawn().expect("spawn agent-db");
    drop(cmd);
    let reader = std::thread::spawn(move || {
        let mut buf = Vec::new();
        let mut chunk = [0u8; 4096];
        loop {
            match master.read(&mut chunk) {
                Ok(0) | Err(_) => break,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
        }
        buf
    });
    let mut stdout = String::new();
    if let Some(mut o) = child.stdout.take() {
        o.read_to_string(&mut stdout).expect("stdout");
    }
    let status = child.wait().expect("wait");
    let err = reader.join().expect("reader");
    TtyOut {
        stdout,
        stderr: String::from_utf8_lossy(&err).replace("\r\n", "\n"),
        code: status.code().unwrap_or(-1),
    }
}

pub fn open(cols: u16) -> (std::fs::File, OwnedFd) {
    let mut master = 0;
    let mut slave = 0;
    let ws = libc::winsize {
        ws_row: 50,
        ws_col: cols,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    // SAFETY: openpty writes two fds we then own; the pointers are to locals.
    let rc = unsafe {
        libc::openpty(
            &mut master,
            &mut slave,
            std::ptr::null_mut(),
            std::ptr::null(),
            &ws,
        )
    };
    assert_eq!(rc, 0, "openpty: {}", std::io::Error::last_os_error());
    // SAFETY: both fds are fresh from openpty and owned by nobody else.
    unsafe {
        (
            std::fs::File::from_raw_fd(master),
            OwnedFd::from_raw_fd(slave),
        )
    }
}

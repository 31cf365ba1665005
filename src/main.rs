//! The `agent-db` binary: parse arguments, set up logging, run the command, map errors to the
//! documented exit codes. A closed stdout (`agent-db list | head`) is success, not an error.

mod cli;
mod commands;
mod output;

use clap::FromArgMatches;

fn main() {
    // `agent-db -h` alone: the short help, one screen; `--help` the long one.
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    if args.len() == 2 && args[1] == "-h" {
        let _ = cli::short_top_help().print_help();
        std::process::exit(0);
    }
    let matches = cli::command().get_matches();
    let mut cli = cli::Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit());
    cli.db_from_env = matches.value_source("db") == Some(clap::parser::ValueSource::EnvVariable);
    init_logging();
    ignore_file_size_signal();
    fewer_heap_arenas();
    one_line_panics();
    let ui = output::Ui::new(cli.quiet, cli.color);
    // Panics inside one conversation are caught where it is processed and become its failed
    // row; one that escapes to here is a bug outside any conversation: exit 8, not a crash.
    let outcome =
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| commands::run(&ui, cli)));
    let code = match outcome {
        Ok(Ok(code)) => code,
        Ok(Err(commands::Failure::BrokenPipe)) => 0,
        Ok(Err(commands::Failure::Error(mut e))) => {
            // Every connection is closed by now: the lock's holder can be asked for.
            if let agent_db::Error::Busy { path, holder } = &mut e {
                if holder.is_none() {
                    *holder = agent_db::store::busy::holder(path);
                }
            }
            ui.error(&e);
            e.exit_code()
        }
        Err(p) => {
            let e = agent_db::Error::Internal(agent_db::error::panic_message(p.as_ref()));
            ui.error(&e);
            e.exit_code()
        }
    };
    std::process::exit(code);
}

/// A panic (a bug) prints one line naming where it happened, instead of Rust's two-line default;
/// the conversation it happened in is reported as failed with the same message.
fn one_line_panics() {
    std::panic::set_hook(Box::new(|info| {
        let msg = agent_db::error::panic_message(info.payload());
        match info.location() {
            Some(l) => eprintln!("error: bug: panicked at {}:{}: {msg}", l.file(), l.line()),
            None => eprintln!("error: bug: panicked: {msg}"),
        }
    }));
}

/// A store that outgrows `ulimit -f` makes the kernel send SIGXFSZ, which kills the process by
/// default. Ignored, the write fails with EFBIG instead, which SQLite reports as a full disk: the
/// conversation fails, its transaction rolls back, and the run stops starting new ones.
fn ignore_file_size_signal() {
    // SAFETY: setting a signal's disposition to SIG_IGN has no other effect.
    unsafe {
        libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
    }
}

/// At most one malloc arena per core. glibc gives each thread that allocates while another
/// holds an arena a new one, up to eight per core, and memory freed in one arena is not reused
/// by the others: a 32-request LLM batch on 2 cores peaked at 99 MiB instead of 86 with the
/// default (64 instead of 59 on long tool outputs; CHANGELOG, issue 44), at the same CPU time.
/// At most one thread per core runs at a time, so threads seldom wait for an arena.
/// `MALLOC_ARENA_MAX` or a `glibc.malloc.arena_max` tunable set by the user wins.
fn fewer_heap_arenas() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        let tunables = std::env::var("GLIBC_TUNABLES").unwrap_or_default();
        if std::env::var_os("MALLOC_ARENA_MAX").is_some() || tunables.contains("arena_max") {
            return;
        }
        let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
        let cores = libc::c_int::try_from(cores).unwrap_or(libc::c_int::MAX);
        // SAFETY: mallopt only sets a tuning parameter of the allocator.
        unsafe {
            libc::mallopt(libc::M_ARENA_MAX, cores.max(2));
        }
    }
}

/// Logs go to stderr, filtered by `AGENT_DB_LOG` (e.g. `debug`, `agent_db=trace`); off by
/// default so status lines stay readable.
fn init_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_env("AGENT_DB_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("off"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_target(false)
        .try_init();
}

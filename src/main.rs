//! The `agent-db` binary: parse arguments, set up logging, run the command, map errors to the
//! documented exit codes. A closed stdout (`agent-db list | head`) is success, not an error.

mod cli;
mod commands;
mod output;

use clap::Parser;

fn main() {
    let cli = cli::Cli::parse();
    init_logging();
    let ui = output::Ui::new(cli.quiet, cli.color);
    let code = match commands::run(&ui, cli) {
        Ok(code) => code,
        Err(commands::Failure::BrokenPipe) => 0,
        Err(commands::Failure::Error(e)) => {
            ui.error(&e);
            e.exit_code()
        }
    };
    std::process::exit(code);
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

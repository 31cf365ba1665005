//! All integration tests build into one binary (faster to link, shared helpers).

mod bad_inputs;
mod cli_tables;
mod common;
mod crash;
mod docker_agent;
mod everyday;
mod exit_codes;
mod hooks;
mod llm;
mod provider;
mod pty;
mod read_side;
mod roundtrip;
mod selectors;
mod split_props;
mod write_path;

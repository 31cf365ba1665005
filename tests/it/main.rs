//! All integration tests build into one binary (faster to link, shared helpers).

mod bad_inputs;
mod cli_tables;
mod common;
mod crash;
mod docker_agent;
mod everyday;
mod exit_codes;
mod goose;
mod goose_loader;
mod hooks;
mod json_snapshots;
mod layers;
mod llm;
mod odd_values;
mod preflight;
mod provider;
mod pty;
mod read_side;
mod roundtrip;
mod selectors;
mod settings;
mod split_props;
mod target;
mod tokens_golden;
mod tokens_props;
mod write_path;

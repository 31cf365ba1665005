//! All integration tests build into one binary (faster to link, shared helpers).

mod bad_inputs;
mod common;
mod crash;
mod docker_agent;
mod hooks;
mod json_snapshots;
mod llm;
mod odd_values;
mod preflight;
mod provider;
mod read_side;
mod roundtrip;
mod selectors;
mod split_props;
mod target;
mod tokens_golden;
mod write_path;

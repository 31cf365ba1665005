//! All integration tests build into one binary (faster to link, shared helpers).

mod common;
mod crash;
mod split_props;
mod write_path;
mod read_side;
mod roundtrip;
mod selectors;
mod provider;
mod bad_inputs;

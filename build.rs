//! Compiles the o200k_base vocabulary into a compact table the binary embeds
//! (`$OUT_DIR/o200k.bin`), so counting tokens does not load `bpe-openai`'s full encoder (about
//! 70 MB of automata and maps built at first use; see docs/architecture.md, "Token counting").
//!
//! The vocabulary comes from `bpe-openai` (a build dependency here; the same crate the tests use
//! as the oracle), whose token ids are tiktoken's ranks. Layout, all little-endian `u32`:
//! `n` (tokens), `slots` (index size, a power of two), `starts[n + 1]` (byte offset of each
//! token in `bytes`), `index[slots]` (open addressing, linear probing by
//! `vocab_hash::hash(token) & (slots - 1)`, holding `rank + 1`, 0 for empty), then `bytes`.

#[path = "src/tokens/vocab_hash.rs"]
mod vocab_hash;

use std::io::Write;

fn main() {
    println!("cargo::rerun-if-changed=build.rs");
    println!("cargo::rerun-if-changed=src/tokens/vocab_hash.rs");
    let bpe = &bpe_openai::o200k_base().bpe;
    let n = bpe.num_tokens();
    let mut bytes = Vec::new();
    let mut starts = Vec::with_capacity(n + 1);
    starts.push(0u32);
    for rank in 0..n {
        bytes.extend_from_slice(bpe.token_bytes(rank as u32));
        starts.push(u32::try_from(bytes.len()).expect("vocabulary under 4 GB"));
    }
    // Load factor at most 0.5: short probe sequences.
    let slots = (2 * n).next_power_of_two();
    let mask = slots - 1;
    let mut index = vec![0u32; slots];
    for rank in 0..n {
        let token = &bytes[starts[rank] as usize..starts[rank + 1] as usize];
        let mut slot = vocab_hash::hash(token) as usize & mask;
        while index[slot] != 0 {
            slot = (slot + 1) & mask;
        }
        index[slot] = rank as u32 + 1;
    }
    let out = std::path::PathBuf::from(std::env::var("OUT_DIR").expect("OUT_DIR is set"))
        .join("o200k.bin");
    let mut w = std::io::BufWriter::new(std::fs::File::create(&out).expect("create o200k.bin"));
    let mut put = |v: u32| w.write_all(&v.to_le_bytes()).expect("write o200k.bin");
    put(n as u32);
    put(slots as u32);
    for s in &starts {
        put(*s);
    }
    for i in &index {
        put(*i);
    }
    w.write_all(&bytes).expect("write o200k.bin");
    w.flush().expect("write o200k.bin");
}

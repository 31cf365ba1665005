//! Compiles the o200k_base vocabulary into a compact table the binary embeds
//! (`$OUT_DIR/o200k.bin`), so counting tokens loads nothing at run time (see
//! docs/architecture.md, "Token counting").
//!
//! The vocabulary is data in the repository, `src/tokens/o200k.tokens`: for each rank in
//! order (tiktoken's ranks), one length byte and the token's bytes. `tests/it/tokens_vocab.rs`
//! holds it to `bpe-openai`'s vocabulary token for token, so the build needs no tokenizer crate.
//! Layout of the table, all little-endian `u32`: `n` (tokens), `slots` (index size, a power of
//! two), `starts[n + 1]` (byte offset of each token in `bytes`), `index[slots]` (open
//! addressing, linear probing by `vocab_hash::hash(token) & (slots - 1)`, holding `rank + 1`, 0
//! for empty), then `bytes`.

#[path = "src/tokens/vocab_hash.rs"]
mod vocab_hash;

use std::io::Write;

fn main() {
    println!("cargo::rerun-if-changed=build.rs");
    println!("cargo::rerun-if-changed=src/tokens/vocab_hash.rs");
    println!("cargo::rerun-if-changed=src/tokens/o200k.tokens");
    let data = std::fs::read("src/tokens/o200k.tokens").expect("read src/tokens/o200k.tokens");
    let mut bytes = Vec::with_capacity(data.len());
    let mut starts = vec![0u32];
    let mut at = 0;
    while at < data.len() {
        let len = data[at] as usize;
        let token = data
            .get(at + 1..at + 1 + len)
            .expect("src/tokens/o200k.tokens ends inside a token");
        bytes.extend_from_slice(token);
        starts.push(u32::try_from(bytes.len()).expect("vocabulary under 4 GB"));
        at += 1 + len;
    }
    let n = starts.len() - 1;
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

//! Token-counting throughput of `agent_db::tokens::count_text` (exact o200k_base, `bpe-openai`)
//! on a corpus file; the Rust half of the tokenizer benchmark in `benches/run.sh`
//! (docs/benchmarks.md compares it with Python `tiktoken`).
//!
//! ```text
//! cargo run --release --example count_tokens -- CORPUS [--sep nul|newline]
//! cargo run --release --example count_tokens -- --dump-tiktoken OUT
//! ```
//!
//! `CORPUS` holds one text per entry, NUL-separated by default (a trailing separator is fine).
//! Every entry is counted with `count_text`, one at a time on one thread, after the tokenizer
//! has been initialized (its one-off load time is reported separately as `init_s`). Prints one
//! line of `key=value` pairs: entries, bytes, MB (10^6 bytes), tokens, init_s, count_s, mb_per_s.
//!
//! `--dump-tiktoken OUT` writes the o200k_base vocabulary compiled into `bpe-openai` in
//! tiktoken's file format (`base64(token bytes) rank` per line, ranks in order), so that Python
//! `tiktoken` can run offline from exactly the vocabulary agent-db uses.

use std::io::Write;
use std::process::ExitCode;
use std::time::Instant;

use base64::Engine;

fn dump_tiktoken(out: &str) -> Result<(), String> {
    let bpe = &bpe_openai::o200k_base().bpe;
    let file = std::fs::File::create(out).map_err(|e| format!("{out}: {e}"))?;
    let mut w = std::io::BufWriter::new(file);
    let engine = base64::engine::general_purpose::STANDARD;
    for rank in 0..bpe.num_tokens() {
        let bytes = bpe.token_bytes(rank as u32);
        writeln!(w, "{} {rank}", engine.encode(bytes)).map_err(|e| format!("{out}: {e}"))?;
    }
    w.flush().map_err(|e| format!("{out}: {e}"))?;
    eprintln!("count_tokens: wrote {} tokens to {out}", bpe.num_tokens());
    Ok(())
}

fn count(path: &str, sep: char) -> Result<(), String> {
    let corpus = std::fs::read_to_string(path).map_err(|e| format!("{path}: {e}"))?;
    let entries: Vec<&str> = corpus.split(sep).filter(|e| !e.is_empty()).collect();
    let bytes: usize = entries.iter().map(|e| e.len()).sum();

    // One-off tokenizer load (deserializing the embedded dictionary), timed on its own.
    let t0 = Instant::now();
    std::hint::black_box(agent_db::tokens::count_text("warm up"));
    let init = t0.elapsed().as_secs_f64();

    let t1 = Instant::now();
    let mut tokens = 0usize;
    for e in &entries {
        tokens += agent_db::tokens::count_text(std::hint::black_box(e));
    }
    let secs = t1.elapsed().as_secs_f64();
    let mb = bytes as f64 / 1e6;
    println!(
        "entries={} bytes={bytes} MB={mb:.3} tokens={tokens} init_s={init:.4} count_s={secs:.4} mb_per_s={:.3}",
        entries.len(),
        mb / secs
    );
    Ok(())
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let usage = "usage: count_tokens CORPUS [--sep nul|newline] | count_tokens --dump-tiktoken OUT";
    let result = match args.as_slice() {
        [flag, out] if flag == "--dump-tiktoken" => dump_tiktoken(out),
        [path] => count(path, '\0'),
        [path, flag, sep] if flag == "--sep" => match sep.as_str() {
            "nul" => count(path, '\0'),
            "newline" => count(path, '\n'),
            other => Err(format!("--sep {other:?}: use nul or newline")),
        },
        _ => Err(usage.to_string()),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("count_tokens: error: {e}");
            ExitCode::from(1)
        }
    }
}

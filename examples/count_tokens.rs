//! Token-counting throughput of `agent_db::tokens::count_text` (exact o200k_base, `bpe-openai`)
//! on a corpus file; the Rust half of the tokenizer benchmark in `benches/run.sh`
//! (docs/benchmarks.md compares it with Python `tiktoken`).
//!
//! ```text
//! cargo run --release --example count_tokens -- CORPUS [--sep nul|newline] [--threads N] [--baseline]
//! cargo run --release --example count_tokens -- --dump-tiktoken OUT
//! ```
//!
//! `CORPUS` holds one text per entry, NUL-separated by default (a trailing separator is fine).
//! Every entry is counted with `count_text`, one at a time, after the tokenizer has been
//! initialized (its one-off load time is reported separately as `init_s`). With `--threads N`
//! (default 1) the entries are dealt round-robin to N threads that count at the same time.
//! `--baseline` counts with `bpe_openai::o200k_base().count` instead (what `count_text` called
//! before its fast path), so before and after can be run interleaved from one binary. Prints
//! one line of `key=value` pairs: counter, threads, entries, bytes, MB (10^6 bytes), tokens,
//! init_s, count_s, mb_per_s.
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

/// How `count` counts: agent-db's `count_text`, or `bpe-openai`'s own `count`.
#[derive(Clone, Copy)]
enum Counter {
    AgentDb,
    Baseline,
}

impl Counter {
    fn count(self, text: &str) -> usize {
        match self {
            Counter::AgentDb => agent_db::tokens::count_text(text),
            Counter::Baseline => bpe_openai::o200k_base().count(text),
        }
    }

    fn name(self) -> &'static str {
        match self {
            Counter::AgentDb => "count_text",
            Counter::Baseline => "bpe_openai",
        }
    }
}

/// Counting options from the command line.
struct Opts {
    sep: char,
    threads: usize,
    counter: Counter,
}

fn count(path: &str, opts: &Opts) -> Result<(), String> {
    let corpus = std::fs::read_to_string(path).map_err(|e| format!("{path}: {e}"))?;
    let entries: Vec<&str> = corpus.split(opts.sep).filter(|e| !e.is_empty()).collect();
    let bytes: usize = entries.iter().map(|e| e.len()).sum();
    let counter = opts.counter;

    // One-off tokenizer load (deserializing the embedded dictionary), timed on its own.
    let t0 = Instant::now();
    std::hint::black_box(counter.count("warm up"));
    let init = t0.elapsed().as_secs_f64();

    let t1 = Instant::now();
    let tokens: usize = std::thread::scope(|s| {
        let workers: Vec<_> = (0..opts.threads)
            .map(|t| {
                let entries = &entries;
                s.spawn(move || {
                    entries
                        .iter()
                        .skip(t)
                        .step_by(opts.threads)
                        .map(|e| counter.count(std::hint::black_box(e)))
                        .sum::<usize>()
                })
            })
            .collect();
        workers
            .into_iter()
            .map(|w| w.join().expect("counting thread"))
            .sum()
    });
    let secs = t1.elapsed().as_secs_f64();
    let mb = bytes as f64 / 1e6;
    println!(
        "counter={} threads={} entries={} bytes={bytes} MB={mb:.3} tokens={tokens} init_s={init:.4} count_s={secs:.4} mb_per_s={:.3}",
        counter.name(),
        opts.threads,
        entries.len(),
        mb / secs
    );
    Ok(())
}

fn parse_opts(flags: &[String]) -> Result<Opts, String> {
    let mut opts = Opts {
        sep: '\0',
        threads: 1,
        counter: Counter::AgentDb,
    };
    let mut it = flags.iter();
    while let Some(flag) = it.next() {
        match flag.as_str() {
            "--baseline" => opts.counter = Counter::Baseline,
            "--sep" => {
                opts.sep = match it.next().map(String::as_str) {
                    Some("nul") => '\0',
                    Some("newline") => '\n',
                    other => return Err(format!("--sep {other:?}: use nul or newline")),
                }
            }
            "--threads" => {
                opts.threads = it
                    .next()
                    .and_then(|n| n.parse().ok())
                    .filter(|&n: &usize| n > 0)
                    .ok_or("--threads needs a positive number")?
            }
            other => return Err(format!("unknown option {other:?}")),
        }
    }
    Ok(opts)
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let usage = "usage: count_tokens CORPUS [--sep nul|newline] [--threads N] [--baseline] | count_tokens --dump-tiktoken OUT";
    let result = match args.as_slice() {
        [flag, out] if flag == "--dump-tiktoken" => dump_tiktoken(out),
        [path, flags @ ..] if !path.starts_with("--") => {
            parse_opts(flags).and_then(|opts| count(path, &opts))
        }
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

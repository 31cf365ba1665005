//! The least CPU any decoder spends on a corpus of JSON texts: serde_json reads every entry
//! into `IgnoredAny` (each token checked and every string scanned for its end and escapes, but
//! nothing built). `benches/llm_fixed.py` times it as the floor of decoding the histories.
//!
//! ```text
//! cargo run --release --example json_scan -- CORPUS
//! ```
//!
//! `CORPUS` holds one JSON text per entry, NUL-separated (`benches/extract_corpus.py`'s
//! format). Prints one line of `key=value` pairs: entries, bytes, MB (10^6 bytes), scan_s (the
//! scan alone, after the file is read), mb_per_s.

use std::process::ExitCode;
use std::time::Instant;

fn scan(path: &str) -> Result<(), String> {
    let corpus = std::fs::read_to_string(path).map_err(|e| format!("{path}: {e}"))?;
    let entries: Vec<&str> = corpus.split('\0').filter(|e| !e.is_empty()).collect();
    let bytes: usize = entries.iter().map(|e| e.len()).sum();
    let t = Instant::now();
    for (k, e) in entries.iter().enumerate() {
        serde_json::from_str::<serde::de::IgnoredAny>(std::hint::black_box(e))
            .map_err(|err| format!("{path}: entry {k}: {err}"))?;
    }
    let secs = t.elapsed().as_secs_f64();
    let mb = bytes as f64 / 1e6;
    println!(
        "entries={} bytes={bytes} MB={mb:.3} scan_s={secs:.4} mb_per_s={:.3}",
        entries.len(),
        mb / secs
    );
    Ok(())
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [path] = args.as_slice() else {
        eprintln!("usage: json_scan CORPUS");
        return ExitCode::from(2);
    };
    match scan(path) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("json_scan: error: {e}");
            ExitCode::FAILURE
        }
    }
}

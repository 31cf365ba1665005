//! Small helpers: sorted directory listings (recipe and hook discovery), byte counts for
//! messages, and the sha256 hex digest used for version tokens, audit rows and recipes.

use std::path::{Path, PathBuf};

/// The entries of `dir`, sorted by path; empty when the directory does not exist or cannot be
/// read (a missing optional directory is not an error).
pub fn sorted_entries(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut paths: Vec<PathBuf> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
    paths.sort();
    paths
}

/// A byte count for messages, in binary units: `512 B`, `1.5 KB`, `3.2 MB`, `4.0 GB`.
pub fn human_bytes(n: u64) -> String {
    const K: f64 = 1024.0;
    let f = n as f64;
    if n < 1024 {
        format!("{n} B")
    } else if f < K * K {
        format!("{:.1} KB", f / K)
    } else if f < K * K * K {
        format!("{:.1} MB", f / (K * K))
    } else {
        format!("{:.1} GB", f / (K * K * K))
    }
}

/// sha256 hex of a text.
pub fn sha256_hex(text: &str) -> String {
    use sha2::{Digest, Sha256};
    hex::encode(Sha256::digest(text.as_bytes()))
}

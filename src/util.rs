//! Small filesystem helpers shared by recipe and hook discovery.

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

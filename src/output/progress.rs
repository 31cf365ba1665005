//! The progress bar of `compact`: on stderr, only on a terminal and without `--quiet`; a bar
//! with an ETA when the number of rows is known, else a spinner, with the conversations in
//! flight, failed, and the tokens saved so far.

use agent_db::pipeline::Event;
use agent_db::report::{NotStarted, Row, Status};

use super::table;
use super::Ui;

/// A progress bar on stderr, only on a terminal and without --quiet.
pub struct Progress {
    bar: Option<indicatif::ProgressBar>,
    /// Columns left for the message after the bar, the counts, the elapsed time and the ETA.
    room: usize,
    saved: std::cell::Cell<usize>,
    failed: std::cell::Cell<usize>,
    in_flight: std::cell::Cell<usize>,
}

impl Progress {
    /// A bar with the total and an ETA when the number of rows is known, else a spinner.
    pub fn new(ui: &Ui, total: Option<u64>) -> Progress {
        // The fixed part of the line at its widest: `{bar:20} {pos}/{len} · {elapsed}, ETA {eta} · `
        // (or the spinner's), elapsed and ETA counted at 8 characters each.
        let digits = total.map_or(6, |n| n.to_string().len());
        let fixed = match total {
            Some(_) => 20 + 1 + 2 * digits + 1 + 3 + 8 + 6 + 8 + 3,
            None => 2 + digits + 8 + 3 + 3 + 8,
        };
        let room = (super::term_width() as usize).saturating_sub(fixed + 1);
        let bar = (ui.stderr_tty && !ui.quiet).then(|| {
            let (b, template) = match total {
                Some(n) => (
                    indicatif::ProgressBar::new(n),
                    "{bar:20} {pos}/{len} · {elapsed}, ETA {eta} · {msg}",
                ),
                None => (
                    indicatif::ProgressBar::new_spinner(),
                    "{spinner} {pos} done · {msg} · {elapsed}",
                ),
            };
            b.set_style(
                indicatif::ProgressStyle::with_template(template)
                    .unwrap_or_else(|_| indicatif::ProgressStyle::default_spinner()),
            );
            b.enable_steady_tick(std::time::Duration::from_millis(250));
            *SHOWN.lock().unwrap_or_else(|e| e.into_inner()) = Some(b.clone());
            b
        });
        Progress {
            bar,
            room,
            saved: Default::default(),
            failed: Default::default(),
            in_flight: Default::default(),
        }
    }

    pub fn event(&self, e: Event<'_>) {
        match e {
            Event::Started => {
                self.in_flight.set(self.in_flight.get() + 1);
                self.redraw();
            }
            Event::Finished { row, .. } => self.row(row),
        }
    }

    fn redraw(&self) {
        if let Some(bar) = &self.bar {
            bar.set_message(fit(
                &[
                    format!("{} in flight", self.in_flight.get()),
                    format!("{} failed", self.failed.get()),
                    format!("{} tokens saved", table::thousands(self.saved.get())),
                ],
                self.room,
            ));
        }
    }

    fn row(&self, r: &Row) {
        if r.skipped_at_selection.is_some() {
            // Not one of the conversations the bar counts (see `count_rows`).
            return;
        }
        if r.strategy.is_some()
            && self.in_flight.get() > 0
            && !matches!(&r.status, Status::NotStarted(n) if *n != NotStarted::Busy)
        {
            self.in_flight.set(self.in_flight.get() - 1);
        }
        if let (Some(b), Some(a)) = (r.tokens_before, r.tokens_after) {
            if matches!(r.status, Status::Compacted | Status::Planned) {
                self.saved.set(self.saved.get() + b.saturating_sub(a));
            }
        }
        if matches!(r.status, Status::Failed(_)) {
            self.failed.set(self.failed.get() + 1);
        }
        if let Some(bar) = &self.bar {
            bar.inc(1);
        }
        self.redraw();
    }

    /// Print something on stderr without tearing the bar.
    pub fn suspend(&self, f: impl FnOnce()) {
        match &self.bar {
            Some(b) => b.suspend(f),
            None => f(),
        }
    }

    pub fn finish(&self) {
        if let Some(b) = &self.bar {
            b.finish_and_clear();
        }
        *SHOWN.lock().unwrap_or_else(|e| e.into_inner()) = None;
    }
}

/// Stores smaller than this vacuum too fast for a bar.
const VACUUM_BAR_FROM: u64 = 16 << 20;

/// `vacuum`'s bar on stderr: only on a terminal, without `--quiet` or `--json`, and for a store
/// of 16 MiB or more. The bar and the callback that moves it; `finish` clears it.
pub fn vacuum_bar(
    ui: &Ui,
    json: bool,
    store_bytes: u64,
) -> Option<(indicatif::ProgressBar, agent_db::archive::vacuum::Progress)> {
    if !ui.stderr_tty || ui.quiet || json || store_bytes < VACUUM_BAR_FROM {
        return None;
    }
    let bar = indicatif::ProgressBar::new(0);
    bar.set_style(
        indicatif::ProgressStyle::with_template(
            "{bar:20} {percent:>3}% · vacuum · {elapsed}, ETA {eta}",
        )
        .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    );
    bar.enable_steady_tick(std::time::Duration::from_millis(250));
    let moved = bar.clone();
    let progress: agent_db::archive::vacuum::Progress = Box::new(move |done, total| {
        moved.set_length(total);
        moved.set_position(done);
    });
    Some((bar, progress))
}

/// The bar on screen, so a line said from another thread while it runs ([`line`]) is printed
/// above it instead of into it.
static SHOWN: std::sync::Mutex<Option<indicatif::ProgressBar>> = std::sync::Mutex::new(None);

/// One line on stderr, above the progress bar when one is on screen.
pub fn line(text: &str) {
    let bar = SHOWN.lock().unwrap_or_else(|e| e.into_inner()).clone();
    match bar {
        Some(b) if !b.is_finished() => b.suspend(|| eprintln!("{text}")),
        _ => eprintln!("{text}"),
    }
}

/// The parts joined with ` · `, as many whole parts as fit in `room` characters (never one cut
/// mid-word).
fn fit(parts: &[String], room: usize) -> String {
    let mut out = String::new();
    for p in parts {
        let add = if out.is_empty() { 0 } else { 3 } + p.chars().count();
        if out.chars().count() + add > room {
            break;
        }
        if !out.is_empty() {
            out.push_str(" · ");
        }
        out.push_str(p);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::fit;

    #[test]
    fn whole_parts_only() {
        let parts = [
            "3 in flight".to_string(),
            "0 failed".into(),
            "12,345 tokens saved".into(),
        ];
        assert_eq!(
            fit(&parts, 200),
            "3 in flight · 0 failed · 12,345 tokens saved"
        );
        assert_eq!(fit(&parts, 30), "3 in flight · 0 failed");
        assert_eq!(fit(&parts, 22), "3 in flight · 0 failed");
        assert_eq!(fit(&parts, 21), "3 in flight");
        assert_eq!(fit(&parts, 5), "");
    }
}

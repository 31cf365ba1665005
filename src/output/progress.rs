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
    saved: std::cell::Cell<usize>,
    failed: std::cell::Cell<usize>,
    in_flight: std::cell::Cell<usize>,
}

impl Progress {
    /// A bar with the total and an ETA when the number of rows is known, else a spinner.
    pub fn new(ui: &Ui, total: Option<u64>) -> Progress {
        let bar = (ui.stderr_tty && !ui.quiet).then(|| {
            let (b, template) = match total {
                Some(n) => (
                    indicatif::ProgressBar::new(n),
                    "{bar:20} {pos}/{len} · {elapsed}, ETA {eta} · {wide_msg}",
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
            b
        });
        Progress {
            bar,
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
            bar.set_message(format!(
                "{} in flight · {} failed · {} tokens saved",
                self.in_flight.get(),
                self.failed.get(),
                table::thousands(self.saved.get())
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
    }
}

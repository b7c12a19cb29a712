//! The terminal's [`Reporter`]: progress of long operations on stderr.
//!
//! On a terminal (stderr is a TTY) a spinner shows the latest [`Event::Status`] line and
//! [`Event::Output`] lines are printed above it; otherwise every event is one plain stderr line
//! (status lines prefixed `[devcell] `, output lines as given), so logs and CI output stay
//! readable. Every command that fetches Features or blobs (`up`, `features
//! resolve-dependencies`, `outdated`, `upgrade`, `features publish`) reports through it.
//! Library operations take an `Arc<dyn Reporter>` / `&dyn Reporter`; commands create one
//! [`CliReporter`] and call [`CliReporter::finish`] (or drop it) before printing results.

use std::io::IsTerminal;
use std::sync::Mutex;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::cli::output;
use crate::progress::{Event, Reporter};

/// Spinner tick interval.
const TICK: Duration = Duration::from_millis(100);

/// Where events go.
#[derive(Debug)]
enum Sink {
    /// A spinner on the terminal (indicatif), cleared on finish.
    Spinner(ProgressBar),
    /// Plain lines on stderr.
    Lines,
}

/// A [`Reporter`] for the command line: an indicatif spinner on a TTY, plain stderr lines
/// otherwise. Thread-safe; cheap per event.
#[derive(Debug)]
pub struct CliReporter {
    sink: Mutex<Sink>,
}

impl CliReporter {
    /// A reporter for stderr: a spinner when stderr is a terminal, else plain lines.
    pub fn stderr() -> CliReporter {
        if std::io::stderr().is_terminal() {
            Self::spinner(ProgressDrawTarget::stderr())
        } else {
            Self::lines()
        }
    }

    /// A reporter writing plain lines on stderr.
    pub fn lines() -> CliReporter {
        CliReporter {
            sink: Mutex::new(Sink::Lines),
        }
    }

    /// A reporter drawing a spinner to `target`.
    pub fn spinner(target: ProgressDrawTarget) -> CliReporter {
        let bar = ProgressBar::with_draw_target(None, target);
        if let Ok(style) = ProgressStyle::with_template("{spinner} {msg}") {
            bar.set_style(style);
        }
        bar.enable_steady_tick(TICK);
        CliReporter {
            sink: Mutex::new(Sink::Spinner(bar)),
        }
    }

    /// Clears the spinner (if any); later events are plain lines. Call before printing the
    /// result so it is not interleaved with the spinner.
    pub fn finish(&self) {
        if let Ok(mut sink) = self.sink.lock() {
            if let Sink::Spinner(bar) = &*sink {
                bar.finish_and_clear();
            }
            *sink = Sink::Lines;
        }
    }

    /// Whether a spinner is shown.
    pub fn is_spinner(&self) -> bool {
        self.sink
            .lock()
            .is_ok_and(|sink| matches!(&*sink, Sink::Spinner(_)))
    }
}

impl Reporter for CliReporter {
    fn report(&self, event: Event) {
        let Ok(sink) = self.sink.lock() else {
            return;
        };
        match (&*sink, event) {
            (Sink::Spinner(bar), Event::Status(line)) => bar.set_message(
                crate::formats::terminal::printable(&line, crate::formats::terminal::Sgr::Escape)
                    .into_owned(),
            ),
            (Sink::Spinner(bar), Event::Output(line)) => {
                bar.suspend(|| output::stderr_output_line(&line));
            }
            (Sink::Lines, Event::Status(line)) => output::stderr_line(&status_line(&line)),
            (Sink::Lines, Event::Output(line)) => output::stderr_output_line(&line),
            (Sink::Spinner(bar), Event::Warning(warning)) => {
                bar.suspend(|| output::warning(&warning));
            }
            (Sink::Lines, Event::Warning(warning)) => output::warning(&warning),
        }
    }
}

/// A status line as printed without a spinner: `[devcell] <line>` (as `up`'s progress has
/// always read in logs).
fn status_line(line: &str) -> String {
    format!("[devcell] {line}")
}

impl Drop for CliReporter {
    fn drop(&mut self) {
        self.finish();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spinner_clears_on_finish_and_falls_back_to_lines() {
        let r = CliReporter::spinner(ProgressDrawTarget::hidden());
        assert!(r.is_spinner());
        r.report(Event::Status("pulling x".into()));
        r.report(Event::Output("a line".into()));
        r.finish();
        assert!(!r.is_spinner());
        assert!(!CliReporter::lines().is_spinner());
        assert_eq!(status_line("pulling x"), "[devcell] pulling x");
    }
}

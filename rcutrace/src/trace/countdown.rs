//! A countdown on stderr while a timed window runs, so that a long run does not look hung.
//! Only on a terminal: a redirected stderr never gets it.

use std::{
    io::{IsTerminal as _, Write as _},
    time::{Duration, Instant},
};

/// The line `\r`-rewritten in place each second, and wiped when the window ends.
pub struct Countdown {
    end: Instant,
    /// Length of the line last written, to wipe it.
    shown: usize,
}

impl Countdown {
    /// `None` for a window without an end (until Ctrl-C) or where stderr is not a terminal.
    pub fn start(duration: Option<Duration>) -> Option<Self> {
        let duration = duration?;
        std::io::stderr().is_terminal().then(|| Countdown {
            end: Instant::now() + duration,
            shown: 0,
        })
    }

    pub fn show(&mut self) {
        let left = self.end.saturating_duration_since(Instant::now());
        // The last tick can race the end of the window: no "0 s left".
        if left.is_zero() {
            return;
        }
        let text = line(left);
        // Padding covers a longer line before it (10 s left, then 9 s left).
        let pad = self.shown.saturating_sub(text.len());
        self.write(&format!("\r{text}{}", " ".repeat(pad)));
        self.shown = text.len();
    }

    /// Wipes the line, before other messages and before the results.
    pub fn clear(&mut self) {
        if self.shown > 0 {
            self.write(&format!("\r{}\r", " ".repeat(self.shown)));
            self.shown = 0;
        }
    }

    fn write(&self, text: &str) {
        // Progress is a courtesy: a failed write to the terminal changes nothing else.
        let mut stderr = std::io::stderr().lock();
        let _ = stderr
            .write_all(text.as_bytes())
            .and_then(|()| stderr.flush());
    }
}

impl Drop for Countdown {
    fn drop(&mut self) {
        self.clear();
    }
}

/// Whole seconds left, rounded up: the line says 1 s until the very end.
fn line(left: Duration) -> String {
    let secs = left.as_secs() + u64::from(left.subsec_nanos() > 0);
    format!("rcutrace: {secs} s left (Ctrl-C ends early and prints)")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seconds_round_up() {
        assert_eq!(
            line(Duration::from_secs(10)),
            "rcutrace: 10 s left (Ctrl-C ends early and prints)"
        );
        assert!(line(Duration::from_millis(9001)).starts_with("rcutrace: 10 s left"));
        assert!(line(Duration::from_millis(1)).starts_with("rcutrace: 1 s left"));
    }
}

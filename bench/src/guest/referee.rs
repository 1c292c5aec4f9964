//! The footprint's referee (see `crate::footprint`): a bpftrace counting every RCU updater
//! function the kernel has, by kprobes, that prints its totals whenever `sync()` is called, and
//! the windows its totals delimit.

use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use super::tracer::ATTACH_TIMEOUT;
use crate::footprint::{self, Family};

/// A bpftrace counting every RCU updater function the kernel has, by kprobes, and printing
/// its totals whenever `sync()` is called.
pub(crate) struct Referee {
    child: Child,
    output: Arc<Mutex<String>>,
    reader: JoinHandle<()>,
}

/// What the referee counted between two of its totals.
pub(crate) struct RefereeWindow {
    before: HashMap<String, u64>,
    after: HashMap<String, u64>,
    pub(crate) elapsed: Duration,
}

impl RefereeWindow {
    pub(crate) fn calls(&self, family: Family) -> u64 {
        footprint::family_calls(family, &self.before, &self.after)
    }

    /// `function=calls` for each function called in the window.
    pub(crate) fn describe(&self) -> String {
        let mut calls: Vec<(&str, u64)> = Family::every_function()
            .map(|f| {
                let get = |t: &HashMap<String, u64>| t.get(f).copied().unwrap_or(0);
                (f, get(&self.after).saturating_sub(get(&self.before)))
            })
            .filter(|(_, n)| *n > 0)
            .collect();
        calls.sort_by_key(|(_, n)| std::cmp::Reverse(*n));
        calls
            .iter()
            .map(|(f, n)| format!("{f}={n}"))
            .collect::<Vec<_>>()
            .join(" ")
    }
}

impl Referee {
    pub(crate) fn start(bpftrace: &str) -> Result<Self, String> {
        let kallsyms = std::fs::read_to_string("/proc/kallsyms")
            .map_err(|e| format!("reading /proc/kallsyms: {e}"))?;
        let text: std::collections::HashSet<&str> = kallsyms
            .lines()
            .filter_map(|l| {
                let mut fields = l.split_whitespace();
                let (_, kind, name) = (fields.next()?, fields.next()?, fields.next()?);
                (matches!(kind, "t" | "T") && fields.next().is_none()).then_some(name)
            })
            .collect();
        let present: Vec<&str> = Family::every_function()
            .filter(|f| text.contains(f))
            .collect();
        println!("info footprint-referee hooks {}", present.join(" "));
        let mut child = Command::new(bpftrace)
            .args(["-e", &footprint::referee_script(&present)])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|e| format!("could not start the footprint referee: {e}"))?;
        let output = Arc::new(Mutex::new(String::new()));
        let stdout = child.stdout.take().expect("piped");
        let reader = {
            let output = Arc::clone(&output);
            thread::spawn(move || {
                for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                    let mut output = output.lock().unwrap_or_else(|e| e.into_inner());
                    output.push_str(&line);
                    output.push('\n');
                }
            })
        };
        let mut referee = Referee {
            child,
            output,
            reader,
        };
        // Its first totals say all its probes are attached; then its own attaching settles.
        let started = Instant::now();
        while !referee.text().contains("Attaching ") {
            if started.elapsed() > ATTACH_TIMEOUT {
                let _ = referee.stop();
                return Err("the footprint referee printed no banner".into());
            }
            thread::sleep(Duration::from_millis(50));
        }
        referee.totals()?;
        thread::sleep(footprint::TAIL);
        Ok(referee)
    }

    fn text(&self) -> String {
        self.output
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Its totals so far: `sync()` makes it print them.
    fn totals(&mut self) -> Result<HashMap<String, u64>, String> {
        let marks = |text: &str| text.matches(footprint::END_OF_TOTALS).count();
        let before = marks(&self.text());
        let started = Instant::now();
        let mut last_sync: Option<Instant> = None;
        loop {
            // Its sync probe may not be attached yet: ask again now and then.
            if last_sync.is_none_or(|t| t.elapsed() > Duration::from_secs(2)) {
                unsafe { libc::sync() };
                last_sync = Some(Instant::now());
            }
            let text = self.text();
            if marks(&text) > before {
                return footprint::last_totals(&text)
                    .ok_or_else(|| "the footprint referee's totals are unreadable".into());
            }
            if started.elapsed() > ATTACH_TIMEOUT {
                return Err(format!(
                    "the footprint referee printed no totals in {ATTACH_TIMEOUT:?}:\n{text}"
                ));
            }
            thread::sleep(Duration::from_millis(20));
        }
    }

    /// What it counts while `run` runs and for `footprint::TAIL` after.
    pub(crate) fn window(
        &mut self,
        run: impl FnOnce() -> Result<(), String>,
    ) -> Result<RefereeWindow, String> {
        let before = self.totals()?;
        let started = Instant::now();
        run()?;
        thread::sleep(footprint::TAIL);
        let after = self.totals()?;
        Ok(RefereeWindow {
            before,
            after,
            elapsed: started.elapsed(),
        })
    }

    pub(crate) fn stop(mut self) -> Result<(), String> {
        unsafe { libc::kill(self.child.id() as libc::pid_t, libc::SIGINT) };
        let status = self
            .child
            .wait()
            .map_err(|e| format!("waiting for the footprint referee: {e}"))?;
        let _ = self.reader.join();
        if !status.success() {
            return Err(format!("the footprint referee ended badly: {status}"));
        }
        Ok(())
    }
}

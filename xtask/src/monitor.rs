//! A client for QEMU's human monitor (HMP) on a Unix socket: how the runner presses magic SysRq
//! keys in a guest and reads QEMU's own view of its vCPUs, even when the guest's user space is
//! stuck.

use std::io::{self, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::{Duration, Instant};

const PROMPT: &str = "(qemu) ";

pub struct Monitor {
    stream: UnixStream,
}

impl Monitor {
    /// Connects and reads up to the first prompt.
    pub fn connect(socket: &Path, timeout: Duration) -> io::Result<Self> {
        let stream = UnixStream::connect(socket)?;
        let mut monitor = Monitor { stream };
        monitor.read_to_prompt(timeout)?;
        Ok(monitor)
    }

    /// Runs one command and returns its output (the echoed command and terminal escapes removed).
    pub fn command(&mut self, command: &str, timeout: Duration) -> io::Result<String> {
        self.stream.write_all(format!("{command}\n").as_bytes())?;
        let raw = self.read_to_prompt(timeout)?;
        let text = strip_terminal_escapes(&raw).replace('\r', "");
        // The first line is the monitor echoing what was typed.
        let output = text.split_once('\n').map_or("", |(_, rest)| rest);
        Ok(output.trim_end_matches(PROMPT).to_string())
    }

    /// Presses a key combination in the guest, e.g. `alt-sysrq-t`.
    pub fn send_key(&mut self, keys: &str, timeout: Duration) -> io::Result<()> {
        let out = self.command(&format!("sendkey {keys}"), timeout)?;
        if out.trim().is_empty() {
            Ok(())
        } else {
            Err(io::Error::other(format!("sendkey {keys}: {}", out.trim())))
        }
    }

    fn read_to_prompt(&mut self, timeout: Duration) -> io::Result<String> {
        let deadline = Instant::now() + timeout;
        let mut bytes = Vec::new();
        let mut buf = [0u8; 4096];
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!("QEMU's monitor did not answer within {timeout:?}"),
                ));
            }
            self.stream.set_read_timeout(Some(left))?;
            match self.stream.read(&mut buf) {
                Ok(0) => return Err(io::ErrorKind::UnexpectedEof.into()),
                Ok(n) => bytes.extend_from_slice(&buf[..n]),
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                    ) =>
                {
                    continue;
                }
                Err(e) => return Err(e),
            }
            let text = String::from_utf8_lossy(&bytes);
            if strip_terminal_escapes(&text).ends_with(PROMPT) {
                return Ok(text.into_owned());
            }
        }
    }
}

/// Removes the VT100 sequences (`ESC [ ... letter`) that the monitor's line editor writes.
fn strip_terminal_escapes(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\x1b' {
            if chars.peek() == Some(&'[') {
                chars.next();
                for c in chars.by_ref() {
                    if c.is_ascii_alphabetic() {
                        break;
                    }
                }
            }
            continue;
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_are_removed() {
        assert_eq!(
            strip_terminal_escapes("info cpus\x1b[K\x1b[D\r\n* CPU #0\r\n(qemu) "),
            "info cpus\r\n* CPU #0\r\n(qemu) "
        );
        assert_eq!(strip_terminal_escapes("plain"), "plain");
    }
}

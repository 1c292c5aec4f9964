//! Runs every test binary of the workspace, as `cargo test --all-targets --no-fail-fast`
//! would, but with the binaries that boot guests side by side. Each guest is one host thread,
//! and a binary whose last test runs alone leaves a core idle; run together, the binaries'
//! guests take turns at the host's slots (`vm_slots`) and every core stays busy.
//!
//! The binaries that boot guests are named `vm_*` or `bench_*`; the others (unit tests, host
//! tests) run first, one at a time, with the host to themselves. A guest binary's output is
//! kept until it ends and then printed whole, so that the log reads as cargo's would.

use std::{
    fs::{self, File},
    io::{BufRead as _, BufReader, Write as _},
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    thread,
    time::Duration,
};

use anyhow::{Context, Result, bail};

use crate::{build, vm_slots, workspace};

/// Guest binaries whose single guests run longest, started first so that none of them is
/// left running alone at the end.
const LONGEST_FIRST: [&str; 3] = ["bench_smoke", "vm_tree", "vm_stall"];

/// One test binary, as cargo built it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TestBinary {
    /// The target's name (`vm_tree`, `rcutrace`, ...).
    pub name: String,
    /// Where its source starts, relative to its package (`tests/vm_tree.rs`).
    pub source: String,
    pub executable: PathBuf,
    /// Its package's directory, where cargo would run it.
    pub package_dir: PathBuf,
}

impl TestBinary {
    /// Whether the binary boots guests: named `vm_*` or `bench_*`.
    pub fn boots_guests(&self) -> bool {
        self.name.starts_with("vm_") || self.name.starts_with("bench_")
    }

    /// cargo's line before a binary's output.
    fn heading(&self) -> String {
        let exe = self
            .executable
            .strip_prefix(workspace::root())
            .unwrap_or(&self.executable);
        format!("     Running {} ({})", self.source, exe.display())
    }

    fn command(&self) -> Command {
        let mut cmd = Command::new(&self.executable);
        cmd.current_dir(&self.package_dir)
            .env("CARGO_MANIFEST_DIR", &self.package_dir);
        cmd
    }
}

/// Tests passed and failed, over every binary.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Totals {
    pub passed: u64,
    pub failed: u64,
}

impl Totals {
    /// Adds a binary's output, and counts a binary that failed without a failed test (it
    /// crashed, or could not start) as one failure.
    fn add(&mut self, output: &str, succeeded: bool) {
        let (mut passed, mut failed) = (0, 0);
        for (p, f) in output.lines().filter_map(test_totals) {
            passed += p;
            failed += f;
        }
        if !succeeded && failed == 0 {
            failed = 1;
        }
        self.passed += passed;
        self.failed += failed;
    }
}

/// Builds every test binary and runs them all; a failing binary never stops the others.
pub fn run_all() -> Result<Totals> {
    let binaries = list()?;
    let (guests, host): (Vec<_>, Vec<_>) = binaries.into_iter().partition(|b| b.boots_guests());
    let mut totals = Totals::default();
    for binary in &host {
        println!("{}", binary.heading());
        let (output, succeeded) = run_streamed(binary)?;
        totals.add(&output, succeeded);
    }
    run_side_by_side(order_guest_binaries(guests), &mut totals)?;
    Ok(totals)
}

/// The workspace's test binaries, built (`cargo test --all-targets --no-run`).
fn list() -> Result<Vec<TestBinary>> {
    eprintln!("xtask: cargo test --all-targets --no-run");
    let out = build::cargo()
        .args([
            "test",
            "--all-targets",
            "--no-run",
            "--message-format=json-render-diagnostics",
        ])
        .stderr(Stdio::inherit())
        .output()
        .context("could not run cargo test --no-run")?;
    if !out.status.success() {
        bail!("building the tests failed ({})", out.status);
    }
    let binaries: Vec<TestBinary> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(test_binary)
        .collect();
    if binaries.is_empty() {
        bail!("cargo built no test binaries");
    }
    Ok(binaries)
}

/// A test binary from one line of cargo's JSON messages, if the line names one.
fn test_binary(line: &str) -> Option<TestBinary> {
    let message: serde_json::Value = serde_json::from_str(line).ok()?;
    if message["reason"] != "compiler-artifact" || message["profile"]["test"] != true {
        return None;
    }
    let executable = PathBuf::from(message["executable"].as_str()?);
    let package_dir = Path::new(message["manifest_path"].as_str()?)
        .parent()?
        .to_path_buf();
    let src = Path::new(message["target"]["src_path"].as_str()?);
    let source = src
        .strip_prefix(&package_dir)
        .unwrap_or(src)
        .display()
        .to_string();
    Some(TestBinary {
        name: message["target"]["name"].as_str()?.to_string(),
        source,
        executable,
        package_dir,
    })
}

/// The guest binaries in the order they start: the longest-running first, then by name.
fn order_guest_binaries(mut binaries: Vec<TestBinary>) -> Vec<TestBinary> {
    let rank = |b: &TestBinary| {
        LONGEST_FIRST
            .iter()
            .position(|n| *n == b.name)
            .unwrap_or(LONGEST_FIRST.len())
    };
    binaries.sort_by(|a, b| rank(a).cmp(&rank(b)).then_with(|| a.name.cmp(&b.name)));
    binaries
}

/// Runs `binary` with its output passed through; returns the output and whether it passed.
fn run_streamed(binary: &TestBinary) -> Result<(String, bool)> {
    let mut child = binary
        .command()
        .stdout(Stdio::piped())
        .spawn()
        .with_context(|| format!("could not run {}", binary.executable.display()))?;
    let stdout = child.stdout.take().context("the test binary's output")?;
    let mut output = String::new();
    for line in BufReader::new(stdout).lines() {
        let line = line.context("reading a test binary's output")?;
        println!("{line}");
        output.push_str(&line);
        output.push('\n');
    }
    let status = child.wait().context("waiting for a test binary")?;
    Ok((output, status.success()))
}

/// A guest binary running, its output going to `log`.
struct Running {
    binary: TestBinary,
    child: Child,
    log: PathBuf,
}

/// Runs the guest binaries, one more at a time than there are guest slots, so that a test
/// is always waiting when a slot comes free; prints each one's output when it ends.
fn run_side_by_side(binaries: Vec<TestBinary>, totals: &mut Totals) -> Result<()> {
    let logs = workspace::target_dir().join("tmp/test-logs");
    fs::create_dir_all(&logs).with_context(|| format!("creating {}", logs.display()))?;
    let at_once = vm_slots::slots() + 1;
    let mut waiting = binaries.into_iter();
    let mut running: Vec<Running> = Vec::new();
    loop {
        while running.len() < at_once {
            let Some(binary) = waiting.next() else { break };
            running.push(start_logged(binary, &logs)?);
        }
        if running.is_empty() {
            return Ok(());
        }
        let mut i = 0;
        while i < running.len() {
            match running[i].child.try_wait()? {
                Some(status) => {
                    let done = running.remove(i);
                    let output = fs::read_to_string(&done.log).unwrap_or_default();
                    println!("{}", done.binary.heading());
                    print!("{output}");
                    std::io::stdout().flush()?;
                    totals.add(&output, status.success());
                    let _ = fs::remove_file(&done.log);
                }
                None => i += 1,
            }
        }
        thread::sleep(Duration::from_millis(200));
    }
}

fn start_logged(binary: TestBinary, logs: &Path) -> Result<Running> {
    let log = logs.join(format!("{}.log", binary.name));
    let file = File::create(&log).with_context(|| format!("creating {}", log.display()))?;
    let child = binary
        .command()
        .stdout(file.try_clone()?)
        .stderr(file)
        .spawn()
        .with_context(|| format!("could not run {}", binary.executable.display()))?;
    Ok(Running { binary, child, log })
}

/// `(passed, failed)` from libtest's `test result: ok. 4 passed; 0 failed; ...` line.
pub fn test_totals(line: &str) -> Option<(u64, u64)> {
    let rest = line.strip_prefix("test result: ")?;
    let count = |word: &str| -> Option<u64> {
        let end = rest.find(&format!(" {word}"))?;
        let start = rest[..end].rfind(' ').map_or(0, |i| i + 1);
        rest[start..end].parse().ok()
    };
    Some((count("passed")?, count("failed")?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn totals_of_libtest_lines() {
        assert_eq!(
            test_totals(
                "test result: ok. 4 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out; \
                 finished in 0.01s"
            ),
            Some((4, 0))
        );
        assert_eq!(
            test_totals("test result: FAILED. 2 passed; 1 failed; 0 ignored; 0 measured"),
            Some((2, 1))
        );
        assert_eq!(test_totals("running 3 tests"), None);
    }

    #[test]
    fn a_binary_that_crashed_counts_as_a_failure() {
        let mut totals = Totals::default();
        totals.add("running 2 tests\ntest a ... ok\n", false);
        totals.add("test result: ok. 3 passed; 0 failed; 0 ignored\n", true);
        totals.add(
            "test result: FAILED. 1 passed; 2 failed; 0 ignored\n",
            false,
        );
        assert_eq!(
            totals,
            Totals {
                passed: 4,
                failed: 3
            }
        );
    }

    fn binary(name: &str) -> TestBinary {
        TestBinary {
            name: name.into(),
            source: format!("tests/{name}.rs"),
            executable: PathBuf::from(format!("/t/{name}-0")),
            package_dir: PathBuf::from("/w/xtask"),
        }
    }

    #[test]
    fn guest_binaries_known_by_name_and_longest_first() {
        assert!(binary("vm_gp").boots_guests() && binary("bench_smoke").boots_guests());
        assert!(!binary("host_kernel").boots_guests() && !binary("rcutrace").boots_guests());
        let ordered = order_guest_binaries(
            ["vm_window", "vm_stall", "vm_count", "bench_smoke"]
                .map(binary)
                .to_vec(),
        );
        let names: Vec<&str> = ordered.iter().map(|b| b.name.as_str()).collect();
        assert_eq!(names, ["bench_smoke", "vm_stall", "vm_count", "vm_window"]);
    }

    #[test]
    fn a_test_binary_from_cargos_message() {
        let line = r#"{"reason":"compiler-artifact","package_id":"path+file:///w/xtask#0.1.0","manifest_path":"/w/xtask/Cargo.toml","target":{"kind":["test"],"crate_types":["bin"],"name":"vm_gp","src_path":"/w/xtask/tests/vm_gp.rs","edition":"2024","doc":false,"doctest":false,"test":true},"profile":{"opt_level":"0","debuginfo":2,"debug_assertions":true,"overflow_checks":true,"test":true},"features":[],"filenames":["/w/target/debug/deps/vm_gp-1"],"executable":"/w/target/debug/deps/vm_gp-1","fresh":true}"#;
        assert_eq!(
            test_binary(line),
            Some(TestBinary {
                name: "vm_gp".into(),
                source: "tests/vm_gp.rs".into(),
                executable: "/w/target/debug/deps/vm_gp-1".into(),
                package_dir: "/w/xtask".into(),
            })
        );
        let built_binary =
            line.replace(r#""test":true},"features""#, r#""test":false},"features""#);
        assert_eq!(test_binary(&built_binary), None);
    }
}

//! `cargo xtask vm --script FILE`: a user's shell script runs in one boot with rcutrace and the
//! workload on its PATH, its output is xtask's standard output (nothing of the set-up or the
//! build before it) and its exit status is xtask's.

use std::path::PathBuf;
use std::process::{Command, Output};

fn xtask(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_xtask"))
        .args(args)
        .output()
        .expect("running xtask")
}

/// A script file of its own for each test.
fn script_file(name: &str, text: &str) -> PathBuf {
    let dir = xtask::workspace::target_dir().join("vm-script-test");
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(format!("{name}-{}.sh", std::process::id()));
    std::fs::write(&path, text).unwrap();
    path
}

fn script_runs_several_commands_in_one_boot(series: &str) {
    let script = script_file(
        series,
        "echo start\n\
         which rcutrace rcu-workload\n\
         rcu-workload membarrier 5\n\
         rcutrace count --secs 1 | head -n 1\n\
         echo 'to stderr' >&2\n\
         exit 3\n",
    );
    let out = xtask(&[
        "vm",
        "--kernel",
        series,
        "--idle",
        "--script",
        script.to_str().unwrap(),
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{series}\n{stdout}\n{stderr}");
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 8, "{series}: {stdout:?}");
    // The script's output and nothing else: no apt, cargo or set-up line before it.
    assert_eq!(
        lines[..4],
        [
            "start",
            "/bin/rcutrace",
            "/bin/rcu-workload",
            "membarrier: 5"
        ],
        "{series}: {stdout:?}"
    );
    assert!(lines[4].starts_with("slowest_ns: "), "{stdout:?}");
    assert!(lines[5].starts_with("elapsed_ns: "), "{stdout:?}");
    assert!(lines[6].starts_with("cpu_ns: "), "{stdout:?}");
    assert!(
        lines[7].starts_with("Attaching ") && lines[7].ends_with(" probes..."),
        "{series}: {stdout:?}"
    );
    assert!(stderr.contains("to stderr\n"), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "xtask: the script {} exited with status 3",
            script.display()
        )),
        "{stderr}"
    );
    let _ = std::fs::remove_file(script);
}

#[test]
fn script_runs_several_commands_in_one_boot_6_1() {
    script_runs_several_commands_in_one_boot("6.1");
}

#[test]
fn script_runs_several_commands_in_one_boot_6_12() {
    script_runs_several_commands_in_one_boot("6.12");
}

#[test]
fn script_runs_several_commands_in_one_boot_7_3() {
    script_runs_several_commands_in_one_boot("7.3");
}

#[test]
fn a_missing_script_is_refused_before_the_boot() {
    let out = xtask(&["vm", "--script", "/nonexistent/session.sh"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("--script /nonexistent/session.sh: No such file or directory"),
        "{stderr}"
    );
    assert!(out.stdout.is_empty());

    // A script or rcutrace's arguments, not both: a usage error.
    let out = xtask(&["vm", "--script", "x.sh", "--", "count"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("cannot be used with"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

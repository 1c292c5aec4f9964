//! rcutrace on the machine that runs the tests, outside any VM: its kernel cannot trace
//! (no kprobes, trampolines refused), so rcutrace must fail cleanly and explain why.

use std::process::{Command, Output};

fn rcutrace(args: &[&str]) -> Output {
    let binary = xtask::build::build_rcutrace().expect("building rcutrace");
    Command::new(binary)
        .args(args)
        .output()
        .expect("running rcutrace")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[test]
fn untraceable_kernel_fails_with_an_explanation_per_method() {
    if std::path::Path::new("/sys/bus/event_source/devices/kprobe").exists() {
        panic!("this host kernel offers kprobes: this test expects one that cannot trace");
    }
    let out = rcutrace(&["count", "--secs", "1"]);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "stderr: {stderr}");
    assert!(out.stdout.is_empty(), "nothing printed as results");
    assert!(
        stderr.starts_with("rcutrace: error: no probe could be attached"),
        "{stderr}"
    );
    // Readers: kprobe only, never a trampoline.
    let reader = stderr
        .lines()
        .find(|l| l.trim_start().starts_with("__rcu_read_lock:"))
        .unwrap();
    assert!(
        reader.contains("kprobe:") && !reader.contains("fentry"),
        "{reader}"
    );
    // Everything else: fentry tried first, then kprobe, each with the kernel's answer.
    for function in ["call_rcu", "synchronize_rcu", "rcu_gp_fqs_loop"] {
        let line = stderr
            .lines()
            .find(|l| l.trim_start().starts_with(&format!("{function}:")))
            .unwrap_or_else(|| panic!("no line for {function}: {stderr}"));
        let fentry = line.find("fentry:").expect("fentry tried");
        let kprobe = line.find("kprobe:").expect("kprobe tried");
        assert!(fentry < kprobe, "{line}");
        assert!(line.contains("os error"), "kernel's answer missing: {line}");
    }
    assert!(stderr.contains("CONFIG_KPROBES"), "{stderr}");
    assert!(stderr.contains("cargo xtask vm"), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");

    // Forcing a method tries only that one.
    let out = rcutrace(&["count", "--secs", "1", "--attach", "kprobe"]);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(!stderr.contains("fentry:"), "{stderr}");
}

#[test]
fn latency_commands_need_both_ends() {
    let out = rcutrace(&["srlat", "--secs", "1"]);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    // The entry prefers a kprobe (one trampoline per function), then tries fentry.
    assert!(stderr.contains("synchronize_rcu: kprobe:"), "{stderr}");
    assert!(stderr.contains("; fentry:"), "{stderr}");
    assert!(stderr.contains("synchronize_rcu: fexit:"), "{stderr}");
    assert!(stderr.contains("kretprobe:"), "{stderr}");
}

#[test]
fn usage_errors_exit_2_and_say_what_is_accepted() {
    for (args, says) in [
        (&["srlat", "--linear", "0,10"][..], "MIN,MAX,STEP"),
        (&["gplat", "--unit", "s"], "possible values: ms, us, ns"),
        (
            &["count", "--attach", "uprobe"],
            "possible values: auto, kprobe, fentry",
        ),
        (&["count", "--secs", "soon"], "invalid value"),
        // Above the kernel's largest pid_max (2^22): no such process, said before loading.
        (
            &["srlat", "--pid", "4194305"],
            "no process 4194305 is running",
        ),
        // What a new user typed: each says what is accepted, none "unexpected argument".
        (
            &["count", "--secs", "-1"],
            "--secs takes 0 or more (0: until Ctrl-C)",
        ),
        (
            &["count", "--secs", "1.5"],
            "\"1.5\" is not a whole number of seconds",
        ),
        (
            &["count", "--by", "comm", "--top", "-1"],
            "--top takes 0 or more (0: all)",
        ),
        (
            &["srlat", "--pid", "-5"],
            "--pid takes the id of a running process",
        ),
        (
            &["srlat", "--linear", "-10,100,10"],
            "MIN \"-10\" in \"-10,100,10\" is not a whole number",
        ),
        (
            &["serve", "--listen", "localhost"],
            "a host name that resolves, with a port (localhost:9750)",
        ),
        (
            &["count", "--secs", "1", "--save", "/nonexistent/dir/x.json"],
            "--save /nonexistent/dir/x.json: cannot be written",
        ),
        (
            &["count", "--secs", "1", "--save", "/proc/version"],
            "--save /proc/version: cannot be written",
        ),
        (
            &["-f", "json", "serve"],
            "serve answers in the OpenMetrics text format only",
        ),
        (
            &["serve", "--save", "x.json"],
            "--save is for the commands that print a run",
        ),
    ] {
        let out = rcutrace(args);
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(says), "{args:?}: {stderr}");
    }
    let help = rcutrace(&["srlat", "--help"]);
    assert_eq!(help.status.code(), Some(0));
    assert!(text(&help.stdout).contains("Examples:"));
}

/// `serve` said `listening on ...` before attaching, then failed to attach: it announces
/// itself only once it serves.
#[test]
fn serve_that_cannot_attach_never_says_it_listens() {
    let out = rcutrace(&["serve", "--listen", "127.0.0.1:0"]);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("no probe could be attached"), "{stderr}");
    assert!(!stderr.contains("listening"), "{stderr}");
}

/// Every tracing command says so first, and nothing else: `gp` and `stall` blamed
/// kptr_restrict (kallsyms gives an unprivileged reader no addresses), and `serve` warned of
/// missing metrics before the privileges error.
#[test]
fn without_privileges_it_says_what_is_needed() {
    let binary = xtask::build::build_rcutrace().expect("building rcutrace");
    for command in [
        &["count", "--secs", "1"][..],
        &["gplat", "--secs", "1"],
        &["srlat", "--secs", "1"],
        &["srlat", "--stages", "--secs", "1"],
        &["callbacks", "--secs", "1"],
        &["gp", "--secs", "1"],
        &["stall", "--secs", "1"],
        &["serve", "--listen", "127.0.0.1:0"],
    ] {
        // Drop every capability, as an ordinary user would have none.
        let out = Command::new("setpriv")
            .args([
                "--reuid=65534",
                "--regid=65534",
                "--clear-groups",
                "--inh-caps=-all",
            ])
            .arg(&binary)
            .args(command)
            .output()
            .expect("running setpriv (util-linux)");
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{command:?}: {stderr}");
        assert!(
            stderr.starts_with("rcutrace: error: rcutrace needs root")
                && stderr.contains("CAP_BPF and CAP_PERFMON")
                && stderr.contains("sudo")
                && stderr.lines().count() == 1,
            "{command:?}: {stderr}"
        );
    }
}

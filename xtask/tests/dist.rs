//! `cargo xtask dist`: the static rcutrace, its man pages and completions, and proof that the
//! binary needs nothing from the system it runs on: a guest with no C library at all runs it.

use std::{fs, process::Command};

use xtask::vm::{self, GuestJob, Kernel};

#[test]
fn dist_installs_a_static_binary_its_pages_and_completions() {
    let dist = xtask::dist::run().expect("cargo xtask dist");
    assert_eq!(dist.files[0], "rcutrace");
    for file in [
        "man/man1/rcutrace.1",
        "man/man1/rcutrace-count.1",
        "man/man1/rcutrace-gplat.1",
        "man/man1/rcutrace-srlat.1",
        "man/man1/rcutrace-report.1",
        "man/man1/rcutrace-callbacks.1",
        "man/man1/rcutrace-serve.1",
        "man/man1/rcutrace-gp.1",
        "man/man1/rcutrace-stall.1",
        "man/man1/rcutrace-top.1",
        "completions/bash/rcutrace.bash",
        "completions/zsh/_rcutrace",
        "completions/fish/rcutrace.fish",
    ] {
        assert!(
            dist.files.iter().any(|f| f == file),
            "{file}: {:?}",
            dist.files
        );
        assert!(dist.dir.join(file).is_file(), "{file}");
    }
    let binary = dist.dir.join("rcutrace");
    assert!(!xtask::build::has_interpreter(&binary).unwrap());
    assert!(vm::shared_libraries(&binary).unwrap().is_empty());
    let version = Command::new(&binary).arg("--version").output().unwrap();
    assert!(version.status.success());
    assert!(String::from_utf8_lossy(&version.stdout).starts_with("rcutrace "));
    // The top page lists the commands; each command's page has its options.
    let top = fs::read_to_string(dist.dir.join("man/man1/rcutrace.1")).unwrap();
    assert!(top.starts_with(".ie"), "{top}");
    for command in [
        "count",
        "gplat",
        "srlat",
        "callbacks",
        "report",
        "gp",
        "stall",
        "top",
    ] {
        assert!(top.contains(&format!("rcutrace\\-{command}(1)")), "{top}");
    }
    let count = fs::read_to_string(dist.dir.join("man/man1/rcutrace-count.1")).unwrap();
    assert!(count.contains("\\-\\-all"), "{count}");
    // The installation page lists exactly what dist installs.
    let readme = fs::read_to_string(xtask::workspace::root().join("docs/install.md")).unwrap();
    let listed: Vec<&str> = readme
        .lines()
        .skip_while(|l| !l.starts_with("xtask: installable files in target/dist:"))
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .map(str::trim)
        .collect();
    assert_eq!(
        listed, dist.files,
        "docs/install.md's `cargo xtask dist` listing"
    );
}

/// The guest gets busybox (static) and rcutrace, nothing else: no loader, no libc. The job's
/// stderr is a terminal (a serial port), so a timed run counts down there, then says how its
/// detaching went; into a file it writes neither.
#[test]
fn the_static_binary_traces_in_a_guest_without_a_c_library_6_12() {
    let binary = xtask::build::build_rcutrace().expect("building rcutrace");
    let script = "ls /lib /lib64 /usr/lib 2>&1 | grep -c -e 'ld-linux' -e 'libc' || true\n\
                  /bin/rcutrace count --secs 2 >/tmp/out 2>/tmp/err; echo \"status $?\"\n\
                  grep -c '^@\\[synchronize_rcu\\]: ' /tmp/out\n\
                  wc -c </tmp/err\n\
                  /bin/rcutrace count --secs 2 >/dev/null\n";
    let job = GuestJob::new(Kernel::Series("6.12".into()), script).file(&binary, "/bin/rcutrace");
    let out = vm::run(&job, false).expect("running the guest");
    let lines: Vec<&str> = out.stdout.lines().collect();
    assert_eq!(
        lines,
        ["0", "status 0", "1", "0"],
        "{}\n{}",
        out.stdout,
        out.stderr
    );
    let countdown = "\rrcutrace: 2 s left (Ctrl-C ends early and prints)\r\
                     rcutrace: 1 s left (Ctrl-C ends early and prints)\r";
    assert!(out.stderr.starts_with(countdown), "{:?}", out.stderr);
    // Wiped before the results: blanks over the line, and back to its start; then the
    // detaching, on a line of its own.
    let (counted_down, detached) = out.stderr.rsplit_once(" \r").unwrap_or_default();
    assert!(counted_down.starts_with(countdown), "{:?}", out.stderr);
    assert!(
        detached.starts_with("rcutrace: detached ") && detached.ends_with('\n'),
        "{:?}",
        out.stderr
    );
    assert_eq!(out.status, Some(0));
}

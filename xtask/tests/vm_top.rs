//! `rcutrace top`, used as a person would: in a terminal in the guest (tmux), driven by its
//! keys (`send-keys`) and read off the screen (`capture-pane`). A known workload runs while it
//! is open: 40 `membarrier()` calls (one `synchronize_rcu()` each) and, through the test
//! module, 500 `call_rcu()` callbacks and one `rcu_barrier()`, all from `rcu-workload`; the
//! screen must show exactly those totals. `p` freezes the screen (10 more calls do not show
//! until `p` again), `s` cycles the sort, and `q`, Ctrl-C and SIGTERM each end it with the
//! terminal given back (the pane off the alternate screen) and status 0. Without a terminal
//! it refuses with status 2, naming `--interval` for scripts.

mod support;

use std::{path::PathBuf, time::Duration};

use support::{boot_with_module_and_files, sections};

const CALLS: u64 = 40;
const MORE_CALLS: u64 = 10;
const CALLBACKS: u64 = 500;

const SCRIPT: &str = r#"
mkdir -p /dev/pts && mount -t devpts devpts /dev/pts || exit 1
export TERM=screen TERMINFO=/lib/terminfo SHELL=/bin/sh
insmod /lib/rcutrace_test.ko || exit 1
wait_for() { i=0; while ! eval "$1" && [ $i -lt 900 ]; do sleep 0.1; i=$((i + 1)); done; }
# Each session has a tmux server of its own (-L NAME): a new session on the server the last
# one killed could land on it while it is still going away, and go with it.
t() { tmux -L "$server" "$@"; }
screen() { t capture-pane -p -t top; }
on_screen() { screen | grep -q -e "$1"; }
# start NAME: rcutrace top in a 150x45 terminal, its status in /tmp/NAME.status on exit.
start() {
    server=$1
    rm -f /tmp/$1.status
    t new-session -d -s top -x 150 -y 45 \
        "/bin/rcutrace top --rows 30 2>/tmp/$1.err; echo \$? >/tmp/$1.status"
    t set-option -t top remain-on-exit on
    wait_for "on_screen 'Grace periods'"
    # Two refreshes: its first intervals are behind it.
    sleep 2.5
}
# stop NAME: after the keys or signal that ended it, its status and what the pane shows. If it
# did not end, where each of its threads is (in the kernel too) and what the kernel said.
stop() {
    wait_for "[ -s /tmp/$1.status ]"
    echo "=== $1.stuck"
    if [ ! -s /tmp/$1.status ]; then
        for t in /proc/$(pidof rcutrace)/task/*; do
            echo "thread $(cat $t/comm): state $(cut -d' ' -f3 $t/stat), in $(cat $t/wchan)"
            cat $t/stack
        done
        dmesg | tail -20
    fi
    echo "=== $1.status"; cat /tmp/$1.status
    echo "=== $1.alternate"; t display-message -p -t top '#{alternate_on}'
    echo "=== $1.after"; screen
    echo "=== $1.err"; cat /tmp/$1.err
    t kill-server
}

start keys
echo "=== keys.alternate_while_open"; t display-message -p -t top '#{alternate_on}'
/bin/rcu-workload membarrier CALLS >/dev/null
/bin/rcu-workload module call_rcu CALLBACKS >/dev/null
/bin/rcu-workload module rcu_barrier 1 >/dev/null
sleep 2.5
echo "=== workload"; screen
t send-keys -t top p
sleep 0.5
echo "=== paused"; screen
/bin/rcu-workload membarrier MORE_CALLS >/dev/null
sleep 2.5
echo "=== still_paused"; screen
t send-keys -t top p
sleep 2.5
echo "=== resumed"; screen
t send-keys -t top s
sleep 0.5
echo "=== sort_max"; screen
t send-keys -t top s
sleep 0.5
echo "=== sort_calls"; screen
t send-keys -t top q
stop keys

start interrupt
t send-keys -t top C-c
stop interrupt

start terminate
kill -TERM $(pidof rcutrace)
stop terminate

echo "=== no_terminal.err"; /bin/rcutrace top </dev/null >/dev/null 2>/tmp/no_terminal.err; s=$?
cat /tmp/no_terminal.err
echo "=== no_terminal.status"; echo $s
"#;

/// The row of a table on a screen whose first two cells are `first` and `second`, split
/// into its cells.
fn row<'a>(screen: &'a str, first: &str, second: &str) -> Vec<&'a str> {
    screen
        .lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .find(|cells| cells.len() > 2 && cells[0] == first && cells[1] == second)
        .unwrap_or_else(|| panic!("no row {first} {second} on the screen:\n{screen}"))
}

/// TOTAL, the fourth cell of a waiter's row (WAITER COMM CALLS/s TOTAL ...).
fn waiter_total(screen: &str, function: &str) -> u64 {
    row(screen, function, "rcu-workload")[3].parse().unwrap()
}

fn top(series: &str) {
    let script = SCRIPT
        .replace("MORE_CALLS", &MORE_CALLS.to_string())
        .replace("CALLBACKS", &CALLBACKS.to_string())
        .replace("CALLS", &CALLS.to_string());
    // tmux from the build machine (its libraries follow it in), and the terminal
    // description it runs its panes with.
    let files = [
        (PathBuf::from("/usr/bin/tmux"), "/bin/tmux".to_string()),
        (
            PathBuf::from("/lib/terminfo/s/screen"),
            "/lib/terminfo/s/screen".to_string(),
        ),
        // tmux insists on a UTF-8 locale.
        (
            PathBuf::from("/usr/lib/locale/C.utf8/LC_CTYPE"),
            "/usr/lib/locale/C.utf8/LC_CTYPE".to_string(),
        ),
    ];
    let guest = boot_with_module_and_files(series, &script, &files, Duration::from_secs(600));
    let sections = sections(&guest.stdout);
    let section = |name: &str| -> &str {
        sections
            .get(name)
            .unwrap_or_else(|| panic!("no {name} in the guest's output:\n{}", guest.stdout))
    };
    println!(
        "{series}: the screen after the workload:\n{}",
        section("workload")
    );

    // The workload's totals, exactly, and the figures of every part of the screen.
    let workload = section("workload");
    assert_eq!(section("keys.alternate_while_open").trim(), "1");
    assert_eq!(
        waiter_total(workload, "synchronize_rcu"),
        CALLS,
        "{workload}"
    );
    assert_eq!(waiter_total(workload, "rcu_barrier"), 1, "{workload}");
    let callback = row(workload, "rcutrace_test_cb", "[rcutrace_test]");
    assert_eq!(callback[3].parse::<u64>().unwrap(), CALLBACKS, "{workload}");
    for expected in [
        "Grace periods",
        "Callbacks      queued",
        "backlog:",
        "sampled: the reader probe is attached",
        "sorted by p99",
    ] {
        assert!(workload.contains(expected), "{expected}:\n{workload}");
    }
    // The grace periods the calls made were seen, with their latency.
    let grace = workload
        .lines()
        .find(|l| l.starts_with("Grace periods"))
        .unwrap();
    assert!(
        grace.contains(" p99 ") && grace.contains(" max "),
        "{grace}"
    );

    // p: frozen, the calls made meanwhile not shown; p again: they are.
    assert!(
        section("paused").contains("PAUSED"),
        "{}",
        section("paused")
    );
    assert_eq!(
        waiter_total(section("still_paused"), "synchronize_rcu"),
        CALLS,
        "{}",
        section("still_paused")
    );
    assert!(!section("resumed").contains("PAUSED"));
    assert_eq!(
        waiter_total(section("resumed"), "synchronize_rcu"),
        CALLS + MORE_CALLS,
        "{}",
        section("resumed")
    );
    // s: the next sort, and the next.
    assert!(section("sort_max").contains("sorted by max"));
    assert!(section("sort_calls").contains("sorted by calls/s"));

    // q, Ctrl-C and SIGTERM: status 0, off the alternate screen, nothing of top left on it.
    for ending in ["keys", "interrupt", "terminate"] {
        let status = section(&format!("{ending}.status")).trim();
        let err = section(&format!("{ending}.err"));
        assert_eq!(
            status,
            "0",
            "{series} {ending}: {err}\nthe screen:\n{}\nwhere it was:\n{}",
            section(&format!("{ending}.after")),
            section(&format!("{ending}.stuck"))
        );
        assert_eq!(
            section(&format!("{ending}.alternate")).trim(),
            "0",
            "{ending}"
        );
        let after = section(&format!("{ending}.after"));
        assert!(!after.contains("Grace periods"), "{ending}:\n{after}");
        assert!(!err.contains("panicked"), "{ending}: {err}");
    }

    // No terminal: a usage error that names the way for scripts.
    assert_eq!(section("no_terminal.status").trim(), "2");
    assert!(
        section("no_terminal.err").contains("--interval"),
        "{}",
        section("no_terminal.err")
    );
}

#[test]
fn top_on_6_12() {
    top("6.12");
}

#[test]
fn top_on_6_1() {
    top("6.1");
}

#[test]
fn top_on_7_3() {
    top("7.3");
}

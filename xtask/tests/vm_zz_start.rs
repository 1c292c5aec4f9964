mod support;
use support::*;

#[test]
fn start_6_12() {
    let script = "export RUST_LOG=info\nfor i in 1 2 3; do cat /proc/uptime; /bin/rcutrace count --secs 1 2>&1 | grep -v '^@' | cut -c1-200; cat /proc/uptime; done; for i in 1 2 3; do cat /proc/uptime; /bin/rcutrace srlat --secs 1 2>&1 | grep -e MARK -e attached | cut -c1-200; done\n";
    let guest = boot("6.1", script);
    println!("{}", guest.stdout);
}

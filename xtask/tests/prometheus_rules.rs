//! The alerting rules shipped in prometheus/ for `rcutrace serve`, unit-tested by Prometheus's
//! own promtool (Debian's package, unpacked by `scripts/setup --serve-test`): the stalled
//! grace-period alert stays silent below 5 s, fires after 5 s more, and clears when the grace
//! period ends; the kernel-warning alert fires on the kernel's own stall warning; the
//! tasks-RCU and SRCU alert (`serve --flavor`) fires after 10 s more past 10 s, naming the
//! flavour and domain, and clears when the grace period ends.

use std::process::Command;

#[test]
fn alerting_rules_pass_promtool() {
    let root = xtask::workspace::root();
    let promtool = root.join("target/prometheus/usr/bin/promtool");
    if !promtool.exists() {
        xtask::setup::run_with(&["--serve-test"]).expect("scripts/setup --serve-test");
    }
    for args in [
        vec!["check", "rules", "rcutrace-alerts.yml"],
        vec!["test", "rules", "rcutrace-alerts.test.yml"],
    ] {
        let out = Command::new(&promtool)
            .args(&args)
            .current_dir(root.join("prometheus"))
            .output()
            .expect("running promtool");
        let text = String::from_utf8_lossy(&out.stdout).into_owned()
            + &String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "promtool {args:?}:\n{text}");
        assert!(text.contains("SUCCESS"), "promtool {args:?}:\n{text}");
    }
}

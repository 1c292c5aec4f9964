//! Flame graphs of real runs on 6.1, 6.12 and 7.3: `-f folded count --by stack` around N
//! membarrier() calls puts exactly N calls on the synchronize_rcu stacks through membarrier;
//! `-f folded srlat --by stack` weighs the caller's stacks by the nanoseconds they waited, as
//! much as the run's own statistics add up to; inferno's reader takes both back with the same
//! totals; `--flamegraph`, live and from the saved run, draws them; and the SVG, opened in a
//! real headless Chromium (Debian's package: `scripts/setup --browser-test`), is screenshot
//! and its frames read back from the page the browser built. `-f folded gp` weighs each
//! listed grace period's last holdout stack by how long it held it up: with the test module
//! holding a reader on CPU 1, its spinning function tops the heaviest stack.

mod support;

use std::{
    io::BufReader,
    path::{Path, PathBuf},
    process::Command,
    sync::OnceLock,
};

use inferno::collapse::{Collapse as _, recursive};
use rcutrace_common::records::Record;
use support::{boot, boot_with_module, run_named, sections};

const COUNT_CALLS: u64 = 30;
const SRLAT_CALLS: u64 = 20;

#[test]
fn folded_stacks_and_flame_graphs_6_12() {
    folded_stacks_and_flame_graphs("6.12");
}

#[test]
fn folded_stacks_and_flame_graphs_6_1() {
    folded_stacks_and_flame_graphs("6.1");
}

#[test]
fn folded_stacks_and_flame_graphs_7_3() {
    folded_stacks_and_flame_graphs("7.3");
}

fn folded_stacks_and_flame_graphs(series: &str) {
    let script = format!(
        "\
traced count '-f folded count --secs 0 --by stack --top 0 --flamegraph /tmp/count.svg' '/bin/rcu-workload membarrier {COUNT_CALLS}'
traced srlat '-f folded srlat --secs 0 --by stack --top 0 --pid WPID --save /tmp/srlat.json' '/bin/rcu-workload membarrier {SRLAT_CALLS}'
/bin/rcutrace report /tmp/srlat.json --flamegraph /tmp/srlat.svg >/tmp/srlat.report 2>&1
echo \"=== srlat.report_status\"; echo $?
echo '=== srlat.refolded'; /bin/rcutrace -f folded report /tmp/srlat.json
echo '=== srlat.json'; cat /tmp/srlat.json
echo '=== count.svg'; cat /tmp/count.svg; echo
echo '=== srlat.svg'; cat /tmp/srlat.svg; echo
"
    );
    let out = boot(series, &script);
    let parts = sections(&out.stdout);

    // count: every call, weighed by one; exactly N synchronize_rcu() through membarrier.
    let count = run_named(&parts, "count");
    count.assert_ok("count");
    assert!(count.err.contains("Attaching "), "{}", count.err);
    let stacks = folded(&count.out);
    assert!(!stacks.is_empty(), "{}", count.out);
    for (frames, _) in &stacks {
        assert!(
            frames
                .split(';')
                .all(|f| f.ends_with("_[k]") || f == "[stack lost]" || f.starts_with("[other: ")),
            "{frames}"
        );
        assert!(!frames.contains('+'), "offsets are folded away: {frames}");
    }
    let through_membarrier: u64 = stacks
        .iter()
        .filter(|(frames, _)| {
            frames.ends_with(";synchronize_rcu_[k]") && frames.contains("membarrier")
        })
        .map(|(_, n)| n)
        .sum();
    assert_eq!(through_membarrier, COUNT_CALLS, "{}", count.out);
    let total: u64 = stacks.iter().map(|(_, n)| n).sum();
    assert_eq!(read_back_total(&count.out), total);

    // srlat: the nanoseconds waited, as much as the run's own statistics say it waited.
    let srlat = run_named(&parts, "srlat");
    srlat.assert_ok("srlat");
    let waited = folded(&srlat.out);
    let (calls, waited_ns) = saved_latency(&parts["srlat.json"]);
    assert_eq!(calls, SRLAT_CALLS, "{}", parts["srlat.json"]);
    let folded_ns: u64 = waited.iter().map(|(_, n)| n).sum();
    assert_eq!(folded_ns, waited_ns, "{}", srlat.out);
    assert_eq!(read_back_total(&srlat.out), folded_ns);
    // Each call waited a grace period: milliseconds, not nanoseconds.
    assert!(folded_ns > SRLAT_CALLS * 1_000_000, "{}", srlat.out);
    assert!(
        waited
            .iter()
            .all(|(frames, _)| frames.contains("membarrier")),
        "only the workload's calls (--pid): {}",
        srlat.out
    );
    // The saved run folds again to the same lines.
    assert_eq!(parts["srlat.refolded"], srlat.out);
    assert_eq!(parts["srlat.report_status"], "0\n");

    // The flame graphs: drawn by inferno with the same totals, then looked at in a browser.
    let dir = xtask::workspace::target_dir()
        .join("vm-flamegraph")
        .join(series);
    std::fs::create_dir_all(&dir).unwrap();
    for (name, unit, total) in [("count", "calls", total), ("srlat", "ns", folded_ns)] {
        let svg = parts[&format!("{name}.svg")].trim_end();
        assert!(svg.starts_with("<?xml"), "{name}: {svg}");
        let all = format!("<title>all ({} {unit}, 100%)</title>", thousands(total));
        assert!(svg.contains(&all), "{name}: no {all} in {svg}");
        let path = dir.join(format!("{name}.svg"));
        std::fs::write(&path, svg).unwrap();
        let page = look_at(&path, &dir.join(format!("{name}.png")));
        for frame in ["synchronize_rcu", "membarrier", "all ("] {
            assert!(
                page.contains(frame),
                "{name}: the page has no {frame}: {page}"
            );
        }
    }
}

const HOLD_CPU: u64 = 1;
const HOLD_MS: u64 = 400;

#[test]
fn grace_periods_folded_by_their_holdouts_6_12() {
    grace_periods_folded_by_their_holdouts("6.12");
}

#[test]
fn grace_periods_folded_by_their_holdouts_6_1() {
    grace_periods_folded_by_their_holdouts("6.1");
}

#[test]
fn grace_periods_folded_by_their_holdouts_7_3() {
    grace_periods_folded_by_their_holdouts("7.3");
}

fn grace_periods_folded_by_their_holdouts(series: &str) {
    // Half a second after the hold, for its grace period to end before the interrupt.
    let script = format!(
        "insmod /lib/rcutrace_test.ko || exit 1
traced gp '-f folded gp --secs 0 --top 50 --save /tmp/gp.json --flamegraph /tmp/gp.svg' 'sh -c \"/bin/rcu-workload module hold_cpu {HOLD_CPU} {HOLD_MS}; sleep 0.5\"'
echo '=== gp.json'; cat /tmp/gp.json
echo '=== gp.svg'; cat /tmp/gp.svg; echo
"
    );
    let out = boot_with_module(series, &script);
    let parts = sections(&out.stdout);
    let gp = run_named(&parts, "gp");
    gp.assert_ok("gp");
    let stacks = folded(&gp.out);
    // One line per listed normal grace period, in their order (slowest first), each its last
    // holdout's stack root first, weighed by how long it held the grace period up (the
    // expedited ones listed beside them are not in the folded stacks).
    let listed: Vec<rcutrace_common::records::GracePeriod> = parts["gp.json"]
        .lines()
        .filter_map(|line| match serde_json::from_str::<Record>(line).unwrap() {
            Record::GracePeriod(g) if !g.expedited => Some(g),
            _ => None,
        })
        .collect();
    assert!(!listed.is_empty(), "{}", parts["gp.json"]);
    assert_eq!(stacks.len(), listed.len(), "{}", gp.out);
    for ((frames, weight), g) in stacks.iter().zip(&listed) {
        assert_eq!(Some(*weight), g.held_ns, "{frames}: {g:#?}");
        let stack = g.last_holdout.as_ref().map_or(&[][..], |h| &h.stack[..]);
        let expected: Vec<String> = match stack {
            [] => vec!["[no stack]".to_string()],
            frames => frames
                .iter()
                .rev()
                .map(|f| format!("{}_[k]", f.split(['+', ' ']).next().unwrap()))
                .collect(),
        };
        assert_eq!(frames, &expected.join(";"), "{g:#?}");
    }
    let heaviest = stacks.iter().max_by_key(|(_, weight)| *weight).unwrap();
    // The tick sampled in the spin: the module's frame, unless the tick landed in a retpoline
    // thunk (the spin's clock read is an indirect call), where the kernel's unwinder stops.
    let sampled_in_the_spin = heaviest.0.contains(";rcutrace_test_hold_spin_[k]")
        || heaviest.0.starts_with("rcutrace_test_hold_spin_[k]");
    let cut_at_a_thunk = heaviest.0.starts_with("__x86_indirect_thunk")
        && heaviest.0.ends_with(";rcu_sched_clock_irq_[k]");
    assert!(
        sampled_in_the_spin || cut_at_a_thunk,
        "the hold is the heaviest: {}",
        gp.out
    );
    assert!(heaviest.1 >= HOLD_MS * 1_000_000 / 2, "{}", gp.out);
    let total: u64 = stacks.iter().map(|(_, n)| n).sum();
    assert_eq!(read_back_total(&gp.out), total);
    let svg = parts["gp.svg"].trim_end();
    let all = format!("<title>all ({} ns, 100%)</title>", thousands(total));
    assert!(svg.contains(&all), "no {all} in {svg}");
    assert!(
        !sampled_in_the_spin || svg.contains("rcutrace_test_hold_spin"),
        "{svg}"
    );
}

/// `(frames, weight)` of each folded line.
fn folded(out: &str) -> Vec<(String, u64)> {
    out.lines()
        .map(|line| {
            let (frames, n) = line
                .rsplit_once(' ')
                .unwrap_or_else(|| panic!("not a folded line: {line:?}"));
            let n = n.parse().unwrap_or_else(|e| panic!("{line:?}: {e}"));
            (frames.to_string(), n)
        })
        .collect()
}

/// The total of the folded lines as inferno reads them (its collapse-recursive stage takes
/// folded stacks in and writes them merged).
fn read_back_total(out: &str) -> u64 {
    let mut merged = Vec::new();
    recursive::Folder::from(recursive::Options::default())
        .collapse(BufReader::new(out.as_bytes()), &mut merged)
        .expect("inferno reads the folded stacks");
    String::from_utf8(merged)
        .unwrap()
        .lines()
        .map(|l| l.rsplit_once(' ').unwrap().1.parse::<u64>().unwrap())
        .sum()
}

/// Calls and nanoseconds waited over every key of the saved run's latency summaries.
fn saved_latency(json: &str) -> (u64, u64) {
    json.lines()
        .map(|line| serde_json::from_str::<Record>(line).unwrap())
        .filter_map(|record| match record {
            Record::LatencySummary(s) => Some(s),
            _ => None,
        })
        .fold((0, 0), |(calls, ns), s| {
            let waited = s.mean_ns.map_or(0, |m| (m * s.count as f64).round() as u64);
            (calls + s.count, ns + waited)
        })
}

/// `1,234,567`, as the flame graph writes its counts.
fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// Debian's chromium, installed by scripts/setup --browser-test (run here if it has not been;
/// once per test process, as both kernels' tests run at once).
fn chromium() -> PathBuf {
    static INSTALLED: OnceLock<PathBuf> = OnceLock::new();
    INSTALLED
        .get_or_init(|| {
            let chromium = PathBuf::from("/usr/bin/chromium");
            if !chromium.exists() {
                xtask::setup::run_with(&["--browser-test"]).expect("scripts/setup --browser-test");
            }
            chromium
        })
        .clone()
}

/// Opens the SVG in headless Chromium: a screenshot to `png`, which must show the flame
/// graph's frames (many pixels of its colours on its pale background), and the page as the
/// browser built it, after the flame graph's script ran.
fn look_at(svg: &Path, png: &Path) -> String {
    let url = format!("file://{}", svg.display());
    let profile = svg.with_extension("profile");
    let browser = |args: &[&str]| {
        let out = Command::new(chromium())
            .args([
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--hide-scrollbars",
            ])
            .arg(format!("--user-data-dir={}", profile.display()))
            .args(args)
            .arg(&url)
            .output()
            .expect("running chromium");
        assert!(
            out.status.success(),
            "chromium {args:?}: {}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    };
    let _ = std::fs::remove_file(png);
    browser(&[
        &format!("--screenshot={}", png.display()),
        "--window-size=1200,600",
    ]);
    let decoder = png::Decoder::new(BufReader::new(std::fs::File::open(png).unwrap()));
    let mut reader = decoder.read_info().expect("a PNG");
    let mut pixels = vec![0; reader.output_buffer_size().unwrap()];
    let frame = reader.next_frame(&mut pixels).unwrap();
    assert_eq!((frame.width, frame.height), (1200, 600));
    let channels = frame.color_type.samples();
    // The frames' colours, as inferno's palettes make them: hot for calls (red at least 205,
    // blue at most 55), io for time waited (red and green 80 to 140, blue 190 and up). The
    // pale background gradients, the text and a blank page have neither.
    let in_frames = pixels[..frame.buffer_size()]
        .chunks(channels)
        .filter(|p| {
            let (r, g, b) = (i32::from(p[0]), i32::from(p[1]), i32::from(p[2]));
            let hot = r >= 205 && b <= 55;
            let io = (80..=140).contains(&r) && (80..=140).contains(&g) && b >= 190;
            hot || io
        })
        .count();
    let all = (frame.width * frame.height) as usize;
    assert!(
        in_frames > all / 100,
        "{}: {in_frames} of {all} pixels in a frame's colours",
        png.display()
    );
    browser(&["--dump-dom"])
}

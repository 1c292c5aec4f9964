//! `rcutrace stall` against held grace periods on Debian's 6.1, 6.12 and 7.3, with the kernel's
//! stall timeout lowered to 3 s at run time: a reader held 5 s on CPU 1 with preemption off
//! is warned about while the grace period is under 1.5 s old, naming CPU 1 with the module's
//! function on its stack, before the kernel's own warning, which is then reported, and the
//! expedited grace period requested during the hold is warned about under 1.5 s old too,
//! waiting for CPU 1 alone as the kernel's leaf says (the
//! hold begins 2.5 s into the window, between two of the watch's own looks, 5 s apart: only
//! the kernel side's wake-up can warn on time); a reader
//! blocked 5 s is named as that task, with how long it has been blocked; a starved
//! grace-period kthread (a SCHED_FIFO loop on its CPU, with RT throttling and 6.12's fair
//! server, which would give it 5% of the CPU, turned off) is said not to have run, and for
//! how long; `--exit-on-warning` ends with status 3; an idle and a busy guest watched for 60 s
//! give no warning at all.

mod support;

use std::time::Duration;

use rcutrace_common::records::{
    ExpeditedStallWarning, ExpeditedWaitingFor, Record, StallHoldout, StallWarning,
};
use support::{Run, boot_with_module_within, run_named, sections, stall_warnings, workload_value};

const NS: u64 = 1_000_000_000;

fn holdout<'a>(w: &'a StallWarning, kind: &str) -> Option<&'a StallHoldout> {
    w.holdouts.iter().find(|h| h.kind == kind)
}

fn summary_warnings(records: &[Record]) -> u64 {
    records
        .iter()
        .find_map(|r| match r {
            Record::StallSummary(s) => Some(s.warnings),
            _ => None,
        })
        .expect("an rcutrace_stall_summary record")
}

fn no_warning(name: &str, run: &Run) {
    run.assert_ok(name);
    let records = run.records();
    assert!(stall_warnings(&records).is_empty(), "{name}: {}", run.out);
    assert_eq!(summary_warnings(&records), 0, "{name}");
}

fn stalls(series: &str) {
    let timeout = "/sys/module/rcupdate/parameters/rcu_cpu_stall_timeout";
    let script = format!(
        "insmod /lib/rcutrace_test.ko || exit 1\n\
         echo 3 > {timeout}\n\
         cat > /tmp/cpu.sh <<'EOF'\n\
         sleep 2.5\n\
         /bin/rcu-workload module hold_cpu 1 5000 & hold=$!\n\
         sleep 0.3\n\
         /bin/rcu-workload module synchronize_rcu_expedited 1 >/dev/null\n\
         wait $hold\n\
         EOF\n\
         traced cpu 'stall -f json' 'sh /tmp/cpu.sh'\n\
         traced task 'stall -f json' '/bin/rcu-workload module block_reader 1 5000'\n\
         traced exit 'stall --exit-on-warning' '/bin/rcu-workload module hold_cpu 1 3000'\n\
         echo -1 > /proc/sys/kernel/sched_rt_runtime_us\n\
         mount -t debugfs none /sys/kernel/debug 2>/dev/null\n\
         for f in /sys/kernel/debug/sched/fair_server/cpu*/runtime; do [ -e $f ] && echo 0 > $f; done\n\
         cat > /tmp/starve.sh <<'EOF'\n\
         /bin/rcu-workload module block_reader 1 6000 >/dev/null &\n\
         reader=$!\n\
         sleep 0.5\n\
         /bin/rcu-workload starve-kthread rcu_preempt 1 4000\n\
         wait $reader\n\
         EOF\n\
         traced kthread 'stall -f json --warn-at 1s --warn-at 3s --warn-at 4s' 'sh /tmp/starve.sh'\n\
         echo 950000 > /proc/sys/kernel/sched_rt_runtime_us\n\
         for f in /sys/kernel/debug/sched/fair_server/cpu*/runtime; do [ -e $f ] && echo 50000000 > $f; done\n\
         echo 21 > {timeout}\n\
         traced idle 'stall -f json' 'sleep 60'\n\
         cat > /tmp/busy.sh <<'EOF'\n\
         /bin/rcu-workload background & load=$!\n\
         sleep 60\n\
         kill $load\n\
         EOF\n\
         traced busy 'stall -f json' 'sh /tmp/busy.sh'\n\
         dmesg | grep -i 'rcu.*stall' | head -5 | sed 's/^/dmesg: /'\n"
    );
    let guest = boot_with_module_within(series, &script, Duration::from_secs(900));
    let sections = sections(&guest.stdout);

    // A reader held 5 s on CPU 1 with preemption off.
    let cpu = run_named(&sections, "cpu");
    cpu.assert_ok("cpu");
    let records = cpu.records();
    let all = stall_warnings(&records);
    let first = all
        .first()
        .unwrap_or_else(|| panic!("no warning: {}", cpu.out));
    assert!(
        (NS..NS * 3 / 2).contains(&first.age_ns),
        "first warning at {} ns: {first:#?}",
        first.age_ns
    );
    let held = holdout(first, "cpu").unwrap_or_else(|| panic!("{first:#?}"));
    assert_eq!(held.cpu, 1, "{first:#?}");
    // A tick that lands in a retpoline thunk unwinds no further (seen on 6.12), so the
    // module's function is looked for in every warning's sample of CPU 1.
    assert!(
        all.iter()
            .filter_map(|w| holdout(w, "cpu").filter(|h| h.cpu == 1))
            .any(|h| h
                .stack
                .iter()
                .any(|f| f.starts_with("rcutrace_test_hold_spin"))),
        "{}",
        cpu.out
    );
    assert_eq!(held.comm.as_deref(), Some("rcu-workload"), "{first:#?}");
    let writer = workload_value(&cpu.work, "pid") as u32;
    assert_eq!(held.pid, Some(writer), "{first:#?}");
    // The kernel's own warning follows, and rcutrace says how much earlier it warned.
    let first_at = records
        .iter()
        .position(|r| matches!(r, Record::StallWarning(_)))
        .unwrap();
    let (kernel_at, kernel) = records
        .iter()
        .enumerate()
        .find_map(|(i, r)| match r {
            Record::KernelStallWarning(k) => Some((i, k)),
            _ => None,
        })
        .unwrap_or_else(|| panic!("no kernel stall warning reported: {}", cpu.out));
    assert!(kernel_at > first_at, "{}", cpu.out);
    assert_eq!(kernel.rcuname, "rcu_preempt", "{kernel:#?}");
    assert!(
        kernel.rcutrace_earlier_ns.is_some_and(|e| e >= NS),
        "{kernel:#?}"
    );
    let ended = records
        .iter()
        .find_map(|r| match r {
            Record::StallEnded(e) => Some(e),
            _ => None,
        })
        .unwrap_or_else(|| panic!("no end of the stall reported: {}", cpu.out));
    assert_eq!(ended.gp_seq, first.gp_seq);
    assert!(ended.duration_ns >= 4 * NS, "{ended:#?}");

    // The expedited grace period requested 0.3 s into the hold waits for CPU 1 too.
    let expedited: Vec<&ExpeditedStallWarning> = records
        .iter()
        .filter_map(|r| match r {
            Record::ExpeditedStallWarning(w) => Some(w),
            _ => None,
        })
        .collect();
    let first = expedited
        .first()
        .unwrap_or_else(|| panic!("no expedited warning: {}", cpu.out));
    assert!((NS..NS * 3 / 2).contains(&first.age_ns), "{first:#?}");
    // Read from the kernel's leaf: it waits for CPU 1 alone, and no blocked task.
    for warning in &expedited {
        assert_eq!(
            warning.waiting_for,
            Some(ExpeditedWaitingFor {
                cpus: vec![1],
                blocked_tasks: false
            }),
            "{}",
            cpu.out
        );
    }
    let ended = records
        .iter()
        .find_map(|r| match r {
            Record::ExpeditedStallEnded(e) => Some(e),
            _ => None,
        })
        .unwrap_or_else(|| panic!("no end of the expedited stall: {}", cpu.out));
    assert!(ended.duration_ns >= 4 * NS, "{ended:#?}");
    assert_eq!(ended.warnings as usize, expedited.len(), "{}", cpu.out);

    // A reader blocked 5 s.
    let task = run_named(&sections, "task");
    task.assert_ok("task");
    let records = task.records();
    let writer = workload_value(&task.work, "pid") as u32;
    let named = stall_warnings(&records).into_iter().find_map(|w| {
        holdout(w, "task")
            .filter(|h| h.pid == Some(writer))
            .map(|h| (w, h))
    });
    let (w, blocked) = named.unwrap_or_else(|| panic!("no warning names the reader: {}", task.out));
    assert_eq!(blocked.comm.as_deref(), Some("rcu-workload"), "{w:#?}");
    assert!(blocked.blocked_ns.is_some_and(|b| b >= NS / 2), "{w:#?}");
    assert!(
        blocked
            .stack
            .iter()
            .any(|f| f.starts_with("rcutrace_test_block_in_reader")),
        "{w:#?}"
    );

    // --exit-on-warning: status 3 at the first warning, while the hold goes on.
    let exit = run_named(&sections, "exit");
    assert_eq!(exit.rcutrace_status, 3, "{}\n{}", exit.out, exit.err);
    assert_eq!(
        exit.out.matches(" RCU STALL WARNING: grace period").count(),
        1,
        "{}",
        exit.out
    );
    assert!(exit.out.contains("CPU 1 has not reported"), "{}", exit.out);
    assert!(
        exit.out.contains("stopped at the first warning"),
        "{}",
        exit.out
    );

    // A starved grace-period kthread.
    let kthread = run_named(&sections, "kthread");
    kthread.assert_ok("kthread");
    let records = kthread.records();
    let starved_pid = workload_value(&kthread.work, "kthread") as u32;
    let starved = stall_warnings(&records)
        .into_iter()
        .find(|w| w.kthread_not_run_ns.is_some())
        .unwrap_or_else(|| panic!("no warning says the kthread is starved: {}", kthread.out));
    assert_eq!(starved.kthread_pid, starved_pid, "{starved:#?}");
    assert!(
        starved.kthread_not_run_ns.unwrap() >= 2 * NS,
        "{starved:#?}"
    );

    // Nothing held: no warning, idle or busy.
    no_warning("idle", &run_named(&sections, "idle"));
    no_warning("busy", &run_named(&sections, "busy"));
}

#[test]
fn stalls_on_6_1() {
    stalls("6.1");
}

#[test]
fn stalls_on_6_12() {
    stalls("6.12");
}

#[test]
fn stalls_on_7_3() {
    stalls("7.3");
}

//! A stuck guest becomes a diagnosis: a job that holds a CPU in the kernel with preemption off
//! (the test module's `spin_preempt_off`) for longer than its time limit fails with the
//! guest's state collected before QEMU is killed, and the failure names the blocker and its
//! stack; a job can also ask for its state itself (`xtask-collect-state`).

use std::collections::BTreeSet;
use std::time::Duration;

use xtask::vm::{self, GuestJob, GuestTimeout, Kernel};

const SPIN_FUNCTION: &str = "rcutrace_test_spin_preempt_off";

fn deliberate_block_is_reported_with_its_stack(series: &str) {
    // Ten minutes of spinning against a 110 s limit. The RCU stall warning comes at 21 s and
    // touches the soft-lockup watchdog, which then speaks 20-25 s later: about 45 s into the
    // spin, and the boot takes up to 20 s on a loaded host.
    let script = "insmod /lib/rcutrace_test.ko || exit 1\n\
                  echo spinning\n\
                  echo 'spin_preempt_off 600000' > /proc/rcutrace_test\n\
                  echo 'the spin returned'\n";
    let mut job = GuestJob::new(Kernel::Series(series.into()), script)
        .with_test_module()
        .expect("building the test module");
    job.timeout = Duration::from_secs(110);
    let err = vm::run(&job, false).expect_err("the job must time out");
    let message = format!("{err:#}");
    let timeout = err
        .downcast_ref::<GuestTimeout>()
        .unwrap_or_else(|| panic!("{series}: not a timeout: {message}"));
    let state = &timeout.state;
    let kernel = &state.kernel;
    eprintln!("{series}: {message}");

    assert_eq!(timeout.stdout, "spinning\n", "{series}: {message}");
    assert!(state.problems.is_empty(), "{series}: {message}");

    // The soft-lockup report names the shell that wrote the request, and the spin.
    let lockup = kernel
        .soft_lockups
        .first()
        .unwrap_or_else(|| panic!("{series}: no soft lockup reported: {message}"));
    assert_eq!(lockup.task.comm, "sh", "{series}: {lockup:?}");
    assert!(lockup.secs >= 20, "{series}: {lockup:?}");
    // Its stack, where the console kept it whole (once on 6.12 the report's trace came out
    // as one frame among the stall warning's lines): the spin among the innermost frames (gcc
    // 14, for 7.3, names it `...spin_preempt_off.isra.0`). SysRq l below shows the spin anyway.
    // Where the watchdog's interrupt came at a retpoline thunk's entry, the unwinder stops
    // there and the kernel names the spin as a guessed caller (`? `): that counts, as below.
    if lockup.stack.frames.len() >= 3 {
        assert!(
            lockup.stack.frames[..3].iter().any(|f| {
                let at_thunk = lockup.stack.frames[0].starts_with("__x86_indirect_thunk");
                let f = f.strip_prefix("? ").filter(|_| at_thunk).unwrap_or(f);
                f.starts_with(SPIN_FUNCTION) && f.ends_with(" [rcutrace_test]")
            }),
            "{series}: {lockup:?}"
        );
        assert!(
            lockup.stack.contains("rcutrace_test_write"),
            "{series}: {lockup:?}"
        );
    }

    // SysRq l: exactly one CPU in the spin, the locked-up one, running that shell (the other
    // idles, or runs whatever the kernel has to do at that moment). Where the NMI came at a
    // retpoline thunk's entry (the spin reads the clock through one), the unwinder stops
    // there and the kernel names the spin only as a guessed caller: that counts.
    let spinning: Vec<_> = kernel
        .busy_cpus()
        .into_iter()
        .filter(|c| c.stack.contains(SPIN_FUNCTION))
        .collect();
    assert_eq!(spinning.len(), 1, "{series}: {message}");
    assert_eq!(spinning[0].cpu, lockup.cpu, "{series}: {message}");
    assert_eq!(spinning[0].task.as_ref().unwrap().pid, lockup.task.pid);
    // (An RCU stall warning backtraces CPUs too: count CPUs, not backtraces.)
    let cpus: BTreeSet<u32> = kernel.cpus.iter().map(|c| c.cpu).collect();
    assert_eq!(
        cpus,
        BTreeSet::from([0, 1]),
        "{series}: every CPU backtraced"
    );

    // SysRq t: every task's stack, init's among them; QEMU's registers for both vCPUs.
    assert!(
        kernel.tasks.iter().any(|t| t.task.pid == 1),
        "{series}: {message}"
    );
    assert!(
        kernel.tasks.len() > 20,
        "{series}: {} tasks",
        kernel.tasks.len()
    );
    assert_eq!(state.vcpus_with_registers(), 2, "{}", state.registers);
    assert!(state.registers.contains("RIP="), "{}", state.registers);

    // The failure itself says what was stuck and where.
    assert!(
        message.contains(&format!(
            "soft lockup: CPU {} stuck for {} s running sh (pid {}), in",
            lockup.cpu, lockup.secs, lockup.task.pid
        )),
        "{series}: {message}"
    );
    assert!(
        message.contains(&format!("running sh (pid {}), in", lockup.task.pid))
            && message.contains(SPIN_FUNCTION),
        "{series}: {message}"
    );
    assert!(
        timeout.dir.join(xtask::guest_state::REGISTERS).is_file(),
        "{message}"
    );
}

#[test]
fn deliberate_block_is_reported_with_its_stack_6_1() {
    deliberate_block_is_reported_with_its_stack("6.1");
}

#[test]
fn deliberate_block_is_reported_with_its_stack_6_12() {
    deliberate_block_is_reported_with_its_stack("6.12");
}

#[test]
fn deliberate_block_is_reported_with_its_stack_7_3() {
    deliberate_block_is_reported_with_its_stack("7.3");
}

fn a_job_asks_for_its_state(series: &str) {
    let script = "sleep 300 &\n\
                  echo \"sleeper $!\"\n\
                  xtask-collect-state\n\
                  echo collected\n\
                  kill $!\n";
    let job = GuestJob::new(Kernel::Series(series.into()), script);
    let out = vm::run(&job, false).unwrap();
    assert_eq!(out.status, Some(0), "{}{}", out.stdout, out.stderr);
    let sleeper: u32 = out
        .stdout
        .lines()
        .find_map(|l| l.strip_prefix("sleeper "))
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("{}", out.stdout));
    assert!(out.stdout.ends_with("collected\n"), "{}", out.stdout);
    assert_eq!(out.states.len(), 1, "{series}");
    let state = &out.states[0];
    assert!(
        state.problems.is_empty(),
        "{series}: {state}\n{}",
        out.console
    );
    let kernel = &state.kernel;
    let task = kernel
        .tasks
        .iter()
        .find(|t| t.task.pid == sleeper)
        .unwrap_or_else(|| panic!("{series}: no stack of the sleeper: {:?}", kernel.tasks));
    assert_eq!(task.task.comm, "sleep");
    assert_eq!(task.state, "S");
    assert!(task.stack.contains("do_nanosleep"), "{series}: {task:?}");
    assert_eq!(kernel.cpus.len(), 2, "{series}: {state}");
    assert!(kernel.soft_lockups.is_empty() && kernel.hung_tasks.is_empty());
    assert_eq!(state.vcpus_with_registers(), 2, "{}", state.registers);
}

#[test]
fn a_job_asks_for_its_state_6_1() {
    a_job_asks_for_its_state("6.1");
}

#[test]
fn a_job_asks_for_its_state_6_12() {
    a_job_asks_for_its_state("6.12");
}

#[test]
fn a_job_asks_for_its_state_7_3() {
    a_job_asks_for_its_state("7.3");
}

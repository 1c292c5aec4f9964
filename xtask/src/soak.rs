//! `cargo xtask soak`: the same scenarios boot after boot, to measure how often a guest hangs
//! and, from the state collected at each hang (see `guest_state`), whether rcutrace is involved.

use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::Result;
use clap::ValueEnum;

use crate::bpftrace::{BPFTRACE_SRLAT, HOST_BPFTRACE};
use crate::hang::KernelState;
use crate::vm::{self, GuestJob, GuestTimeout, Kernel, shell_quote};
use crate::{build, testmod, workspace};

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Scenario {
    /// bpftrace's seed srlat script (-f json; 30 membarrier() calls; SIGINT), then
    /// `rcutrace srlat --unit us -f json --secs 0` (30 more; SIGINT), in one guest.
    SeedSrlat,
    /// Attach and detach under the background load, twice each: `count --all`, `srlat --func`
    /// with 8 functions, `callbacks`, `count --sample-readers 100/500`.
    AttachCycles,
    /// The test module's flood of 100 000 callbacks from every CPU under `callbacks`.
    FloodCallbacks,
}

impl Scenario {
    pub const ALL: [Scenario; 3] = [
        Scenario::SeedSrlat,
        Scenario::AttachCycles,
        Scenario::FloodCallbacks,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Scenario::SeedSrlat => "seed-srlat",
            Scenario::AttachCycles => "attach-cycles",
            Scenario::FloodCallbacks => "flood-callbacks",
        }
    }

    /// The guest job's steps (after `STEP`'s definition).
    fn steps(self) -> String {
        match self {
            Scenario::SeedSrlat => format!(
                "step bpftrace {} 'rcu-workload membarrier 30'\n\
                 step rcutrace 'rcutrace srlat --unit us -f json --secs 0' 'rcu-workload membarrier 30'\n",
                shell_quote(&format!(
                    "{HOST_BPFTRACE} -f json -e {}",
                    shell_quote(BPFTRACE_SRLAT)
                ))
            ),
            Scenario::AttachCycles => {
                let funcs: String = SRLAT_FUNCS.iter().map(|f| format!(" --func {f}")).collect();
                format!(
                    "rcu-workload background >/dev/null 2>&1 & load=$!\n\
                     for round in 1 2; do\n\
                     step count-all-$round 'rcutrace count --all --secs 0' 'sleep 2'\n\
                     step srlat-func-$round 'rcutrace srlat --secs 0{funcs}' 'sleep 2'\n\
                     step callbacks-$round 'rcutrace callbacks --secs 0' 'sleep 2'\n\
                     step sampled-$round 'rcutrace count --sample-readers 100/500 --secs 0' 'sleep 2'\n\
                     done\n\
                     kill $load; wait $load\n"
                )
            }
            Scenario::FloodCallbacks => "insmod /lib/rcutrace_test.ko || exit 1\n\
                 step flood 'rcutrace callbacks --secs 0' 'rcu-workload module flood 100000'\n\
                 grep -q rcutrace_test_flood_cb /tmp/flood.out || { echo 'no flood row'; failed=1; }\n"
                .to_string(),
        }
    }
}

/// Eight waiting functions that 6.1, 6.12 and 7.3 all have.
const SRLAT_FUNCS: [&str; 8] = [
    "synchronize_rcu",
    "synchronize_rcu_expedited",
    "rcu_barrier",
    "synchronize_srcu",
    "synchronize_srcu_expedited",
    "srcu_barrier",
    "synchronize_rcu_tasks",
    "rcu_barrier_tasks",
];

/// `step NAME 'TRACER' 'WORK'`: starts the tracer, waits for its banner (text or JSON), runs the
/// work, interrupts the tracer like Ctrl-C and waits for it; says so on stdout, so a hung job's
/// output ends at the step it hung in. A failed step prints its outputs and fails the job.
const STEP: &str = r#"
failed=0
step() {
    name=$1; tracer=$2; work=$3
    echo "step $name: start"
    sh -c "exec $tracer" >/tmp/$name.out 2>/tmp/$name.err &
    pid=$!
    i=0
    while ! grep -q -e '^Attaching' -e '"attached_probes"' /tmp/$name.out 2>/dev/null && kill -0 $pid 2>/dev/null && [ $i -lt 600 ]; do
        sleep 0.1; i=$((i + 1))
    done
    if grep -q -e '^Attaching' -e '"attached_probes"' /tmp/$name.out 2>/dev/null; then
        echo "step $name: attached"
    else
        echo "step $name: no banner within 60 s"; failed=1
    fi
    sh -c "$work" >/tmp/$name.work 2>&1; wstatus=$?
    kill -INT $pid 2>/dev/null
    wait $pid; status=$?
    echo "step $name: tracer $status, work $wstatus"
    if [ $status -ne 0 ] || [ $wstatus -ne 0 ]; then
        failed=1
        for f in out err work; do echo "--- $name.$f"; tail -n 20 /tmp/$name.$f; done
    fi
}
"#;

/// What one boot came to.
#[derive(Debug)]
pub enum Outcome {
    Passed,
    Failed(String),
    Hung(Hang),
}

#[derive(Debug)]
pub struct Hang {
    /// The job's last line: the step it was in.
    pub last_step: String,
    pub summary: String,
    pub verdict: String,
    /// Where its console, registers and summary are kept.
    pub dir: PathBuf,
}

pub struct Options {
    pub kernel: Kernel,
    pub boots: u32,
    pub scenarios: Vec<Scenario>,
    pub timeout: Duration,
    pub cpus: u32,
}

/// Results per scenario, in the order run.
pub struct Report {
    pub kernel: Kernel,
    pub release: Option<String>,
    pub results: Vec<(Scenario, Vec<Outcome>)>,
    pub elapsed: Duration,
}

/// Boots each scenario `opts.boots` times (round-robin, so drift spreads evenly), telling each
/// boot's outcome on stderr.
pub fn run(opts: &Options) -> Result<Report> {
    let (rcutrace, workload) = build::build_all()?;
    let module = if opts.scenarios.contains(&Scenario::FloodCallbacks) {
        match &opts.kernel {
            Kernel::Series(series) => Some(testmod::build(series)?),
            Kernel::Path(_) => anyhow::bail!(
                "flood-callbacks needs the test module, built for a downloaded kernel series only"
            ),
        }
    } else {
        None
    };
    let base = soak_dir(&opts.kernel);
    fs::create_dir_all(&base)?;
    let started = Instant::now();
    let mut results: Vec<(Scenario, Vec<Outcome>)> =
        opts.scenarios.iter().map(|s| (*s, Vec::new())).collect();
    let mut release = None;
    for boot in 1..=opts.boots {
        for (scenario, outcomes) in results.iter_mut() {
            let mut job = GuestJob::new(
                opts.kernel.clone(),
                format!(
                    "{STEP}cat /proc/sys/kernel/osrelease >/tmp/release\n{}exit $failed\n",
                    scenario.steps()
                ),
            )
            .file(&rcutrace, "/bin/rcutrace")
            .file(&workload, "/bin/rcu-workload");
            job.cpus = opts.cpus;
            job.timeout = opts.timeout;
            // A soak counts every hang, the boot's own included.
            job.boot_again = false;
            if *scenario == Scenario::SeedSrlat {
                job = job.file(HOST_BPFTRACE, HOST_BPFTRACE);
                job.memory_mb = vm::BPFTRACE_MEMORY_MB;
            }
            if let Some(module) = &module {
                job = job.file(module, testmod::GUEST_PATH);
            }
            let t0 = Instant::now();
            let outcome = outcome_of(vm::run(&job, false), &base, *scenario, boot);
            if let Outcome::Passed = outcome {
                release.get_or_insert_with(|| kernel_release(&opts.kernel));
            }
            eprintln!(
                "xtask: soak [{boot}/{}] {}: {} ({:.0} s)",
                opts.boots,
                scenario.name(),
                outcome.word(),
                t0.elapsed().as_secs_f64()
            );
            if let Outcome::Hung(hang) = &outcome {
                eprintln!("{}", hang.summary.trim_end());
            }
            if let Outcome::Failed(why) = &outcome {
                eprintln!("{}", head(why, 30));
            }
            outcomes.push(outcome);
        }
    }
    Ok(Report {
        kernel: opts.kernel.clone(),
        release: release.flatten(),
        results,
        elapsed: started.elapsed(),
    })
}

fn outcome_of(
    result: Result<vm::GuestOutput>,
    base: &Path,
    scenario: Scenario,
    boot: u32,
) -> Outcome {
    match result {
        Ok(out) if out.status == Some(0) => Outcome::Passed,
        Ok(out) => Outcome::Failed(format!(
            "status {:?}\n{}{}",
            out.status, out.stdout, out.stderr
        )),
        Err(err) => match err.downcast_ref::<GuestTimeout>() {
            Some(timeout) => {
                let kept = base.join(format!("{}-{boot}", scenario.name()));
                let _ = fs::remove_dir_all(&kept);
                let dir = match fs::rename(&timeout.dir, &kept) {
                    Ok(()) => kept,
                    Err(_) => timeout.dir.clone(),
                };
                Outcome::Hung(Hang {
                    last_step: timeout
                        .stdout
                        .lines()
                        .last()
                        .unwrap_or("(no output)")
                        .to_string(),
                    summary: timeout.state.to_string(),
                    verdict: verdict(&timeout.state.kernel, &timeout.state.problems),
                    dir,
                })
            }
            None => Outcome::Failed(format!("{err:#}")),
        },
    }
}

/// Whether a hang's stacks implicate a tracer, from its stuck tasks and CPUs.
pub fn verdict(kernel: &KernelState, problems: &[String]) -> String {
    if problems.iter().any(|p| p.contains("monitor")) {
        return format!(
            "QEMU's monitor did not answer: the emulator itself was stuck ({})",
            problems.join("; ")
        );
    }
    let frames = kernel.tracing_frames();
    let tracers = kernel.stuck_tracers();
    if frames.is_empty() && tracers.is_empty() {
        if kernel.is_empty() {
            return "the kernel printed no stack: no evidence either way".into();
        }
        let mut verdict = "no stuck task or CPU is a tracer or in tracing code (BPF, kprobes, \
                           trampolines, text patching)"
            .to_string();
        let alive: Vec<String> = kernel
            .tracer_tasks()
            .iter()
            .map(|t| format!("{} in state {} in {}", t.task, t.state, t.stack.location(2)))
            .collect();
        if !alive.is_empty() {
            verdict.push_str(&format!("; tracers still running: {}", alive.join(", ")));
        }
        verdict
    } else {
        let mut what = Vec::new();
        if !tracers.is_empty() {
            what.push(format!("stuck tracer tasks: {}", tracers.join(", ")));
        }
        if !frames.is_empty() {
            what.push(format!("tracing frames: {}", frames.join(", ")));
        }
        format!("implicates tracing: {}", what.join("; "))
    }
}

impl Outcome {
    fn word(&self) -> &'static str {
        match self {
            Outcome::Passed => "passed",
            Outcome::Failed(_) => "FAILED",
            Outcome::Hung(_) => "HUNG",
        }
    }
}

impl Report {
    /// The figures as Markdown: a table, then each hang and failure.
    pub fn markdown(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "Kernel {} ({}), {:.0} min in all.\n",
            self.kernel,
            self.release.as_deref().unwrap_or("release not read"),
            self.elapsed.as_secs_f64() / 60.0
        );
        let _ = writeln!(out, "| scenario | boots | passed | hung | failed |");
        let _ = writeln!(out, "|---|---:|---:|---:|---:|");
        for (scenario, outcomes) in &self.results {
            let count = |f: fn(&Outcome) -> bool| outcomes.iter().filter(|o| f(o)).count();
            let _ = writeln!(
                out,
                "| {} | {} | {} | {} | {} |",
                scenario.name(),
                outcomes.len(),
                count(|o| matches!(o, Outcome::Passed)),
                count(|o| matches!(o, Outcome::Hung(_))),
                count(|o| matches!(o, Outcome::Failed(_))),
            );
        }
        for (scenario, outcomes) in &self.results {
            for (i, outcome) in outcomes.iter().enumerate() {
                match outcome {
                    Outcome::Passed => {}
                    Outcome::Hung(hang) => {
                        let _ = writeln!(
                            out,
                            "\n{} boot {}: hung after `{}`; {}.\n\n```\n{}```\n(state kept in {})",
                            scenario.name(),
                            i + 1,
                            hang.last_step,
                            hang.verdict,
                            hang.summary,
                            relative(&hang.dir)
                        );
                    }
                    Outcome::Failed(why) => {
                        let _ = writeln!(
                            out,
                            "\n{} boot {}: failed:\n\n```\n{}\n```",
                            scenario.name(),
                            i + 1,
                            head(why, 25)
                        );
                    }
                }
            }
        }
        out
    }
}

fn soak_dir(kernel: &Kernel) -> PathBuf {
    let name = match kernel {
        Kernel::Series(s) => s.clone(),
        Kernel::Path(p) => p
            .file_name()
            .map_or("kernel".into(), |n| n.to_string_lossy().into_owned()),
    };
    workspace::target_dir().join("soak").join(name)
}

fn kernel_release(kernel: &Kernel) -> Option<String> {
    let image = kernel.resolve().ok()?;
    let name = image.file_name()?.to_str()?;
    Some(name.strip_prefix("vmlinuz-").unwrap_or(name).to_string())
}

fn relative(path: &Path) -> String {
    path.strip_prefix(workspace::root())
        .unwrap_or(path)
        .display()
        .to_string()
}

fn head(text: &str, n: usize) -> String {
    text.lines().take(n).collect::<Vec<_>>().join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verdicts() {
        let spin = KernelState::parse(
            "[ 1.0] watchdog: BUG: soft lockup - CPU#1 stuck for 22s! [sh:150]\n\
             [ 1.0] CPU: 1 PID: 150 Comm: sh\n\
             [ 1.0] Call Trace:\n\
             [ 1.0]  <TASK>\n\
             [ 1.0]  rcutrace_test_spin_preempt_off+0x21/0x40 [rcutrace_test]\n\
             [ 1.0]  </TASK>\n",
        );
        assert!(verdict(&spin, &[]).starts_with("no stuck task"), "{spin:?}");
        // The seed-srlat hang of the 6.12 soak: the kernel idle, bpftrace alive after SIGINT.
        let waiting = KernelState::parse(
            "[ 1.0] sysrq: Show State\n\
             [ 1.0] task:bpftrace        state:S stack:0     pid:157   tgid:157   ppid:155\n\
             [ 1.0] Call Trace:\n\
             [ 1.0]  <TASK>\n\
             [ 1.0]  __schedule+0x4e0/0xbf0\n\
             [ 1.0]  schedule_hrtimeout_range_clock+0xda/0x120\n\
             [ 1.0]  do_epoll_wait+0x6a2/0x850\n\
             [ 1.0]  __x64_sys_epoll_wait+0x73/0x110\n\
             [ 1.0]  </TASK>\n",
        );
        assert_eq!(
            verdict(&waiting, &[]),
            "no stuck task or CPU is a tracer or in tracing code (BPF, kprobes, trampolines, \
             text patching); tracers still running: bpftrace (pid 157) in state S in \
             do_epoll_wait <- __x64_sys_epoll_wait"
        );
        let patching = KernelState::parse(
            "[ 1.0] INFO: task rcutrace:99 blocked for more than 30 seconds.\n\
             [ 1.0] task:rcutrace        state:D stack:0     pid:99    ppid:1\n\
             [ 1.0] Call Trace:\n\
             [ 1.0]  <TASK>\n\
             [ 1.0]  __schedule+0x3c/0xa0\n\
             [ 1.0]  text_poke_bp_batch+0x1/0x2\n\
             [ 1.0]  unregister_kprobe+0x1/0x2\n\
             [ 1.0]  </TASK>\n",
        );
        let v = verdict(&patching, &[]);
        assert_eq!(
            v,
            "implicates tracing: stuck tracer tasks: rcutrace (pid 99); tracing frames: \
             text_poke_bp_batch, unregister_kprobe"
        );
        assert!(
            verdict(
                &KernelState::default(),
                &["QEMU's monitor at x did not answer".into()]
            )
            .starts_with("QEMU's monitor did not answer")
        );
    }

    #[test]
    fn scenario_scripts_quote_the_bpftrace_program() {
        let steps = Scenario::SeedSrlat.steps();
        assert!(
            steps.starts_with(
                "step bpftrace '/usr/bin/bpftrace -f json -e '\\''kprobe:synchronize_rcu"
            ),
            "{steps}"
        );
        assert_eq!(Scenario::AttachCycles.steps().matches("--func").count(), 8);
    }
}

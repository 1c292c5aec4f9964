//! One benchmark run: scripts/setup --bench, the guest binaries, one boot running the driver,
//! and its output read back.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result, bail};

use crate::marks;
use crate::sample::Samples;
use crate::scaling::ScalingSummary;
use crate::{Options, Sizes, Summary};
use xtask::bpftrace::HOST_BPFTRACE;
use xtask::vm::{self, GuestJob};
use xtask::{build, setup};

/// What one benchmark run measured.
#[derive(Debug, Clone)]
pub struct Outcome {
    /// `uname -r` in the guest.
    pub kernel_release: String,
    /// `info` lines from the driver: versions, sizes, programs, attach methods.
    pub info: Vec<String>,
    pub summary: Summary,
    /// Wall time of the whole guest run.
    pub elapsed: Duration,
}

/// A full run's outcome read back from what it printed (`cargo xtask bench > LOG`): its
/// guest's `sample` and `info` lines and its closing `whole guest run` line. For writing the
/// kernel's section again once its generator (`prose`, `table`) changed, without measuring
/// again; the measurements are the logged run's.
pub fn replay(log: &str) -> Result<(Outcome, Sizes)> {
    let info: Vec<String> = log
        .lines()
        .filter_map(|l| l.strip_prefix("info "))
        .map(str::to_string)
        .collect();
    let field = |key: &str| info.iter().find_map(|l| l.strip_prefix(key));
    let kernel_release = field("kernel ")
        .context("the log has no `info kernel` line")?
        .to_string();
    let sizes_line = field("sizes ").context("the log has no `info sizes` line")?;
    let size = |name: &str| -> Result<u64> {
        sizes_line
            .split_whitespace()
            .find_map(|word| word.strip_prefix(name)?.strip_prefix('='))
            .and_then(|value| value.parse().ok())
            .with_context(|| format!("no {name} in `info sizes {sizes_line}`"))
    };
    let sizes = Sizes {
        reps: u32::try_from(size("reps")?)?,
        calls: size("calls")?,
        membarriers: size("membarriers")?,
        window_secs: size("window")?,
    };
    let elapsed_s: f64 = log
        .lines()
        .find_map(|l| {
            let (_, rest) = l.split_once("; whole guest run ")?;
            rest.strip_suffix(" s")?.parse().ok()
        })
        .context("the log has no `whole guest run` line: it is not a finished run's")?;
    Ok((
        Outcome {
            summary: Summary::new(&Samples::parse(&with_phases_recomputed(log)), sizes),
            kernel_release,
            info,
            elapsed: Duration::from_secs_f64(elapsed_s),
        },
        sizes,
    ))
}

/// `log` with each start-up's phase samples computed again from its logged marks, by the
/// phases' current reading of them (the marks are what was measured; the phases are read).
fn with_phases_recomputed(log: &str) -> String {
    let mut runs: Vec<(String, Vec<marks::Mark>)> = Vec::new();
    for (config, mark) in log.lines().filter_map(marks::parse_logged) {
        let new_run = match runs.last() {
            Some((last, marks)) => {
                last != config
                    || mark.step == "privileges checked"
                    || marks.last().is_some_and(|m| m.at_ms > mark.at_ms)
            }
            None => true,
        };
        if new_run {
            runs.push((config.to_string(), Vec::new()));
        }
        runs.last_mut().expect("a run").1.push(mark);
    }
    let recomputed: std::collections::HashSet<&str> =
        runs.iter().map(|(config, _)| config.as_str()).collect();
    let phase_metrics: Vec<&str> = marks::PHASE_METRICS.iter().map(|m| m.name()).collect();
    let mut text: String = log
        .lines()
        .filter(|line| {
            let mut words = line.split_whitespace();
            let is_phase_sample = words.next() == Some("sample")
                && words.next().is_some_and(|m| phase_metrics.contains(&m))
                && words.next().is_some_and(|c| recomputed.contains(c));
            !is_phase_sample
        })
        .flat_map(|line| [line, "\n"])
        .collect();
    for (config, run) in &runs {
        if let Some(phases) = marks::phases(run) {
            for (metric, value) in marks::phase_samples(&phases) {
                text.push_str(&format!("sample {} {config} {value:.3}\n", metric.name()));
            }
        }
    }
    text
}

/// Runs scripts/setup --bench, builds the guest binaries, boots the kernel once and runs the
/// driver in it. With `echo`, the driver's progress is shown as it happens.
pub fn run(opts: &Options, echo: bool) -> Result<Outcome> {
    let binaries = prepare(opts)?;
    let s = opts.sizes;
    let guest = boot(
        opts,
        &binaries,
        opts.cpus,
        opts.memory_mb,
        &format!(
            "--reps {} --calls {} --membarriers {} --window {}",
            s.reps, s.calls, s.membarriers, s.window_secs
        ),
        opts.timeout.unwrap_or_else(|| s.timeout()),
        echo,
    )?;
    Ok(Outcome {
        summary: Summary::new(&guest.samples, s),
        kernel_release: guest.kernel_release,
        info: guest.info,
        elapsed: guest.elapsed,
    })
}

/// What one scaling run measured (`--scaling`): the same measurements in a guest of 2 CPUs
/// and in one of `cpus`.
#[derive(Debug, Clone)]
pub struct ScalingOutcome {
    pub kernel_release: String,
    /// The larger guest's `info` lines: versions, sizes.
    pub info: Vec<String>,
    pub reps: u32,
    pub window_secs: u64,
    pub summary: ScalingSummary,
    /// Wall time of both guest runs.
    pub elapsed: Duration,
}

/// Memory for the guest of many CPUs: the kernel's per-CPU areas grow with them.
const MANY_CPUS_MEMORY_MB: u32 = 4096;

/// Runs the driver's `--scaling` measurements in a guest of 2 CPUs, then in one of `cpus`.
pub fn run_scaling(opts: &Options, cpus: u32, echo: bool) -> Result<ScalingOutcome> {
    let binaries = prepare(opts)?;
    let s = opts.sizes;
    let args = format!("--scaling --reps {} --window {}", s.reps, s.window_secs);
    let timeout = opts.timeout.unwrap_or_else(|| s.scaling_timeout());
    let few = boot(
        opts,
        &binaries,
        vm::DEFAULT_CPUS,
        opts.memory_mb,
        &args,
        timeout,
        echo,
    )?;
    let memory = opts.memory_mb.max(MANY_CPUS_MEMORY_MB);
    let many = boot(opts, &binaries, cpus, memory, &args, timeout, echo)?;
    Ok(ScalingOutcome {
        summary: ScalingSummary::new(&few.samples, &many.samples, (vm::DEFAULT_CPUS, cpus)),
        kernel_release: many.kernel_release,
        info: many.info,
        reps: s.reps,
        window_secs: s.window_secs,
        elapsed: few.elapsed + many.elapsed,
    })
}

/// The guest binaries, built after scripts/setup --bench.
struct Binaries {
    rcutrace: PathBuf,
    workload: PathBuf,
    driver: PathBuf,
}

fn prepare(opts: &Options) -> Result<Binaries> {
    setup::run_with(&["--bench"])?;
    let missing = vm::missing_host_tools();
    if !missing.is_empty() {
        bail!(
            "still missing after scripts/setup --bench: {}",
            missing.join(", ")
        );
    }
    if !Path::new(HOST_BPFTRACE).is_file() {
        bail!("{HOST_BPFTRACE} is missing after scripts/setup --bench");
    }
    opts.kernel.resolve()?;
    let (rcutrace, workload) = build::build_all()?;
    let driver = build::build_bench()?;
    Ok(Binaries {
        rcutrace,
        workload,
        driver,
    })
}

/// One guest's run of the driver.
struct Guest {
    kernel_release: String,
    /// `info` lines from the driver: versions, sizes, programs, attach methods.
    info: Vec<String>,
    samples: Samples,
    elapsed: Duration,
}

/// Boots the kernel with `cpus` CPUs and runs the driver with `args` in it.
fn boot(
    opts: &Options,
    binaries: &Binaries,
    cpus: u32,
    memory_mb: u32,
    args: &str,
    timeout: Duration,
    echo: bool,
) -> Result<Guest> {
    let script =
        format!("/bin/rcu-bench {args} --rcutrace /bin/rcutrace --bpftrace {HOST_BPFTRACE}\n");
    let job = GuestJob {
        kernel: opts.kernel.clone(),
        cpus,
        memory_mb,
        files: vec![
            (binaries.rcutrace.clone(), "/bin/rcutrace".into()),
            (binaries.driver.clone(), "/bin/rcu-bench".into()),
            (binaries.workload.clone(), "/bin/rcu-workload".into()),
            (PathBuf::from(HOST_BPFTRACE), HOST_BPFTRACE.into()),
        ],
        script,
        timeout,
        kernel_args: Vec::new(),
        max_cpus: None,
        boot_again: true,
    };
    let out = vm::run(&job, echo)?;
    if out.status != Some(0) {
        bail!(
            "the benchmark driver failed in the guest of {cpus} CPUs (status {:?}):\n{}",
            out.status,
            out.stderr.trim_end()
        );
    }
    let info: Vec<String> = out
        .stdout
        .lines()
        .filter_map(|l| l.strip_prefix("info "))
        .map(str::to_string)
        .collect();
    let kernel_release = info
        .iter()
        .find_map(|l| l.strip_prefix("kernel "))
        .context("the driver did not report the kernel release")?
        .to_string();
    Ok(Guest {
        kernel_release,
        info,
        samples: Samples::parse(&out.stdout),
        elapsed: out.elapsed,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A replayed run's start-up phases are read again from its logged marks: the sample
    /// the guest computed is replaced, the others kept.
    #[test]
    fn replay_reads_the_phases_again_from_the_marks() {
        let log = "\
info mark rcutrace-count 5.0 privileges checked
info mark rcutrace-count 90.0 kernel BTF read (user 60.0 ms, system 30.0 ms, peak 5000 KiB)
info mark rcutrace-count 91.0 eBPF object narrowed: 9 of its 190 programs kept (user 60.0 ms, system 30.0 ms, peak 7000 KiB)
info mark rcutrace-count 140.0 object loaded, maps created (user 70.0 ms, system 60.0 ms, peak 8000 KiB)
info mark rcutrace-count 170.0 __rcu_read_lock attached (user 70.0 ms, system 88.0 ms, peak 8000 KiB)
info mark rcutrace-count 172.0 /proc/kallsyms read for the start's symbols (10 of 10 found) (user 200.0 ms, system 150.0 ms, peak 8000 KiB)
info mark rcutrace-count 200.0 call_rcu attached (user 70.0 ms, system 110.0 ms, peak 8000 KiB)
info mark rcutrace-count 201.0 probes attached (user 70.0 ms, system 110.0 ms, peak 8000 KiB)
sample attach_min_ms rcutrace-count 2.000
sample rss_kib rcutrace-count 8000.000
";
        let text = with_phases_recomputed(log);
        let samples: Vec<&str> = text.lines().filter(|l| l.starts_with("sample")).collect();
        assert!(
            samples.contains(&"sample rss_kib rcutrace-count 8000.000"),
            "{text}"
        );
        assert!(
            !samples.contains(&"sample attach_min_ms rcutrace-count 2.000"),
            "{text}"
        );
        assert!(
            samples.contains(&"sample attach_min_ms rcutrace-count 30.000"),
            "{text}"
        );
        assert!(
            samples.contains(&"sample attach_system_max_ms rcutrace-count 28.000"),
            "{text}"
        );
    }
}

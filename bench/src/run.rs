//! One benchmark run: scripts/setup --bench, the guest binaries, one boot running the driver,
//! and its output read back.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result, bail};

use crate::sample::Samples;
use crate::{Options, Summary};
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

/// Runs scripts/setup --bench, builds the guest binaries, boots the kernel once and runs the
/// driver in it. With `echo`, the driver's progress is shown as it happens.
pub fn run(opts: &Options, echo: bool) -> Result<Outcome> {
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

    let s = opts.sizes;
    let script = format!(
        "/bin/rcu-bench --reps {} --calls {} --membarriers {} --window {} \
         --rcutrace /bin/rcutrace --bpftrace {HOST_BPFTRACE}\n",
        s.reps, s.calls, s.membarriers, s.window_secs
    );
    let job = GuestJob {
        kernel: opts.kernel.clone(),
        cpus: opts.cpus,
        memory_mb: opts.memory_mb,
        files: vec![
            (rcutrace, "/bin/rcutrace".into()),
            (driver, "/bin/rcu-bench".into()),
            (workload, "/bin/rcu-workload".into()),
            (PathBuf::from(HOST_BPFTRACE), HOST_BPFTRACE.into()),
        ],
        script,
        timeout: opts.timeout.unwrap_or_else(|| s.timeout()),
        kernel_args: Vec::new(),
    };
    let out = vm::run(&job, echo)?;
    if out.status != Some(0) {
        bail!(
            "the benchmark driver failed in the guest (status {:?}):\n{}",
            out.status,
            out.stderr.trim_end()
        );
    }
    let samples = Samples::parse(&out.stdout);
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
    Ok(Outcome {
        kernel_release,
        info,
        summary: Summary::new(&samples, s),
        elapsed: out.elapsed,
    })
}

//! The namespace load: network namespaces created and dropped, timed by the load itself, with
//! no tracer, under `rcutrace run`, under `rcutrace srlat -c` and under bpftrace.

use std::process::{Command, Stdio};

use crate::guest::{Options, progress, sample};
use crate::sample::{Config, Metric, Tracer};
use crate::{NAMESPACES, bpftrace_waits_script};

/// The waiting functions `rcutrace run` times that this kernel has, for the tracers that
/// time the same ones.
fn run_waits() -> Result<Vec<&'static str>, String> {
    let kallsyms = std::fs::read_to_string("/proc/kallsyms")
        .map_err(|e| format!("reading /proc/kallsyms: {e}"))?;
    let present = |f: &&str| {
        kallsyms
            .lines()
            .any(|l| l.split_whitespace().nth(2) == Some(*f))
    };
    Ok(rcutrace_common::followed::RUN_WAITS
        .iter()
        .copied()
        .filter(present)
        .collect())
}

/// `NAMESPACES` network namespaces created and dropped, timed by the load itself: with no
/// tracer, under `rcutrace run` (which follows their cleanup in the kernel's worker until it
/// ends), under `rcutrace srlat -c` timing the same functions, and under bpftrace timing them
/// by stack. What each adds to the command is what it costs the user waiting for it.
pub fn namespace_load(opts: &Options, tracer: Tracer, tag: &str) -> Result<(), String> {
    let load = format!("/bin/rcu-workload netns {NAMESPACES}");
    let load_words: Vec<&str> = load.split(' ').collect();
    let waits = run_waits()?;
    let mut cmd = match tracer {
        Tracer::None => Command::new(load_words[0]),
        Tracer::RcutraceRun => {
            let mut cmd = Command::new(&opts.rcutrace);
            cmd.args(["run", "--"]).arg(load_words[0]);
            cmd
        }
        Tracer::RcutraceSrlatCommand => {
            let mut cmd = Command::new(&opts.rcutrace);
            cmd.arg("srlat");
            for f in &waits {
                cmd.args(["--func", f]);
            }
            cmd.args(["-c", &load]);
            cmd
        }
        Tracer::Bpftrace => {
            let mut cmd = Command::new(&opts.bpftrace);
            cmd.args(["-c", &load, "-e", &bpftrace_waits_script(&waits)]);
            cmd
        }
        other => return Err(format!("{} does not run the namespace load", other.name())),
    };
    if matches!(tracer, Tracer::None | Tracer::RcutraceRun) {
        cmd.args(&load_words[1..]);
    }
    let output = cmd
        .stdin(Stdio::null())
        .stderr(Stdio::piped())
        .output()
        .map_err(|e| format!("running the namespace load under {}: {e}", tracer.name()))?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    let elapsed: f64 = stdout
        .lines()
        .find_map(|l| l.strip_prefix("elapsed_ns: ")?.trim().parse().ok())
        .ok_or_else(|| {
            format!(
                "the namespace load under {} printed no elapsed_ns (status {:?}): {}",
                tracer.name(),
                output.status.code(),
                String::from_utf8_lossy(&output.stderr).trim_end()
            )
        })?;
    let per_namespace = elapsed / NAMESPACES as f64;
    sample(Metric::NetnsNs, Config::Under(tracer), per_namespace);
    progress(&format!(
        "{tag} namespace load, {}: {:.2} ms per namespace",
        tracer.name(),
        per_namespace / 1e6
    ));
    Ok(())
}

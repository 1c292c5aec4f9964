//! The commands, as thin compositions of the shared machinery below: check privileges, load,
//! attach from the probe table, trace for a window, detach, then read and render.

pub mod callbacks;
pub mod count;
pub mod latency;
pub mod report;

use std::{collections::HashSet, fmt::Write as _, io::Write as _, time::Duration};

use anyhow::{Context as _, Result, anyhow};

use crate::{
    attribution::{self, By},
    kernel,
    probes::{AttachChoice, Keys, Method, Probe},
    render::{self, Format},
    session::{self, Consume, Interrupts, Samples, Window},
    symbols::Symbolizer,
    tracer::{Attachment, Constant, Tracer},
};

/// Whether a command can run without some of its probes.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Need {
    /// Run with whatever attached; report the rest.
    Any,
    /// Every probe must attach.
    All,
    /// These probes must attach; the others are optional.
    These(&'static [Probe]),
}

impl Need {
    fn unmet_by(self, problems: &[(Probe, Attachment)]) -> bool {
        match self {
            Need::Any => false,
            Need::All => !problems.is_empty(),
            Need::These(needed) => problems.iter().any(|(p, _)| needed.contains(p)),
        }
    }
}

/// What a command asks `trace` for.
pub struct Request<'a> {
    pub probes: &'a [Probe],
    /// Load-time constants of the programs, beside the ones `trace` sets itself.
    pub constants: Vec<Constant>,
    pub choice: AttachChoice,
    pub by: Option<By>,
    pub need: Need,
    pub duration: Option<Duration>,
    /// The process a pid filter selects, whose exit is reported.
    pub traced_process: Option<u32>,
    pub format: Format,
}

/// A finished tracing window: programs quiet, maps ready to read. The programs detach when
/// this is dropped.
pub struct Traced {
    pub tracer: Tracer,
    pub window: Window,
    /// How each probe that attached was attached, in the order given.
    pub attached: Vec<(Probe, Method)>,
    /// Per-slot counts of `count`'s programs over exactly the window.
    pub counts: Vec<u64>,
}

/// Loads, attaches the probes, prints bpftrace's banner, and traces for the window. Counting
/// starts once the last probe is attached and stops before anything is detached; latency
/// samples go to `consume` as they arrive, the last ones after every program has finished.
pub async fn trace(request: Request<'_>, mut consume: Option<Consume<'_>>) -> Result<Traced> {
    kernel::check_privileges()?;
    let mut interrupts = Interrupts::catch()?;
    let mut constants = request.constants;
    constants.push(Constant::U32("SELF_TGID", std::process::id()));
    constants.push(Constant::U32("BY_MODE", attribution::mode(request.by)));
    let mut tracer = Tracer::load(&constants)?;
    let keys = if request.by == Some(By::Stack) {
        Keys::Stacks
    } else {
        Keys::Plain
    };
    let mut attached = Vec::new();
    let mut problems = Vec::new();
    for probe in request.probes {
        match tracer.attach(probe, request.choice, keys) {
            Attachment::Attached(method) => attached.push((*probe, method)),
            other => problems.push((*probe, other)),
        }
    }
    // A function that failed every method may simply not exist on this kernel: say so.
    let failed: Vec<&str> = problems.iter().map(|(p, _)| p.function).collect();
    let present = if failed.is_empty() {
        HashSet::new()
    } else {
        kernel::functions_present(&failed)?
    };
    for (probe, problem) in &mut problems {
        if !present.contains(probe.function) {
            *problem = Attachment::Missing;
        }
    }
    if attached.is_empty() || request.need.unmet_by(&problems) {
        return Err(attach_failure(&problems, attached.is_empty(), &present));
    }
    warn_not_traced(&problems);

    let mut samples = match consume {
        Some(_) => Some(Samples::new(tracer.take_samples()?)?),
        None => None,
    };
    let counts_at_open = tracer.per_cpu_sums("COUNTS")?;
    tracer.set_running(true)?;
    let mut stdout = std::io::stdout();
    stdout
        .write_all(render::banner(request.format, attached.len()).as_bytes())
        .and_then(|()| stdout.flush())
        .context("writing to stdout")?;
    let following = match (samples.as_mut(), consume.as_mut()) {
        (Some(samples), Some(consume)) => Some((samples, &mut **consume as Consume<'_>)),
        _ => None,
    };
    let window = session::run(
        request.duration,
        &mut interrupts,
        following,
        request.traced_process,
    )
    .await?;
    tracer.set_running(false)?;
    let counts_at_close = tracer.per_cpu_sums("COUNTS")?;
    kernel::wait_for_programs()?;
    if let (Some(samples), Some(consume)) = (samples.as_mut(), consume.as_mut()) {
        samples.drain(&mut **consume);
    }
    if window.interrupted {
        eprintln!(
            "rcutrace: interrupted after {:.1} s; printing what was traced",
            window.elapsed.as_secs_f64()
        );
    }
    let counts = counts_at_close
        .iter()
        .zip(&counts_at_open)
        .map(|(close, open)| close.wrapping_sub(*open))
        .collect();
    Ok(Traced {
        tracer,
        window,
        attached,
        counts,
    })
}

/// Symbolized frames of the kernel stacks the programs kept, by stack id, `name+offset`
/// deepest first; the symbolizer is made on first use, so runs without stacks never pay for it.
pub fn stack_frames<'a>(
    traced: &'a Traced,
    symbolizer: &'a mut Option<Symbolizer>,
) -> impl FnMut(u64) -> Vec<String> + 'a {
    move |stack| {
        let addresses = match traced.tracer.stack(stack) {
            Ok(addresses) => addresses,
            Err(e) => return vec![format!("[stack unreadable: {e:#}]")],
        };
        if symbolizer.is_none() {
            match Symbolizer::new() {
                Ok(s) => *symbolizer = Some(s),
                Err(e) => log::warn!("kernel stacks are not symbolized: {e:#}"),
            }
        }
        addresses
            .iter()
            .map(|&address| match symbolizer.as_ref() {
                Some(s) => s.frame(address),
                None => format!("0x{address:x}"),
            })
            .collect()
    }
}

/// Functions that could not be traced, on stderr: the missing ones on one line.
fn warn_not_traced(problems: &[(Probe, Attachment)]) {
    let missing: Vec<&str> = problems
        .iter()
        .filter(|(_, p)| matches!(p, Attachment::Missing))
        .map(|(probe, _)| probe.function)
        .collect();
    if !missing.is_empty() {
        eprintln!(
            "rcutrace: not on this kernel (absent or inlined), not traced: {}",
            missing.join(", ")
        );
    }
    for (probe, problem) in problems {
        if let Attachment::Failed(_) = problem {
            eprintln!(
                "rcutrace: warning: {}: {}; not traced",
                probe.function,
                describe(problem)
            );
        }
    }
}

fn describe(problem: &Attachment) -> String {
    match problem {
        Attachment::Attached(method) => format!("attached by {method}"),
        Attachment::Missing => {
            "not in /proc/kallsyms (this kernel has no such function, or inlined it)".into()
        }
        Attachment::Failed(failures) => failures
            .iter()
            .map(|(method, error)| format!("{method}: {error}"))
            .collect::<Vec<_>>()
            .join("; "),
    }
}

fn attach_failure(
    problems: &[(Probe, Attachment)],
    nothing_attached: bool,
    present: &HashSet<String>,
) -> anyhow::Error {
    let mut message = String::from(if nothing_attached {
        "no probe could be attached on this kernel:"
    } else {
        "not every probe this command needs could be attached:"
    });
    for (probe, problem) in problems {
        let _ = write!(message, "\n  {}: {}", probe.function, describe(problem));
    }
    let tried_kprobe = problems.iter().any(|(_, p)| {
        matches!(p, Attachment::Failed(f) if f.iter().any(|(m, _)| matches!(m, Method::Kprobe | Method::Kretprobe)))
    });
    if tried_kprobe && !std::path::Path::new("/sys/bus/event_source/devices/kprobe").exists() {
        message.push_str(
            "\nThis kernel has no kprobe event source (/sys/bus/event_source/devices/kprobe \
             is missing: built without CONFIG_KPROBES), so no kprobe can be used here.",
        );
    }
    if !problems.is_empty() && present.is_empty() {
        message.push_str("\nNone of the functions appear in /proc/kallsyms.");
    }
    message.push_str(
        "\nRun rcutrace on a kernel with CONFIG_KPROBES=y and BTF, for example inside a VM \
         (from rcutrace's source tree: cargo xtask vm -- count).",
    );
    anyhow!(message)
}

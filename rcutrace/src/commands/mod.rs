//! The commands, as thin compositions of the shared machinery below: check privileges, load,
//! attach from the probe table, trace for a window, detach, then read and render.

pub mod callbacks;
pub mod count;
pub mod latency;

use std::{collections::HashSet, fmt::Write as _, io::Write as _, time::Duration};

use anyhow::{Context as _, Result, anyhow};

use crate::{
    kernel,
    probes::{AttachChoice, Method, Probe},
    render::{self, Format},
    session::{self, Interrupts, Window},
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

/// A finished tracing window: latency programs stopped, maps ready to read. The programs
/// detach when this is dropped (after reading, so that counters read as of the window's end).
pub struct Traced {
    pub tracer: Tracer,
    pub window: Window,
    /// How each probe that attached was attached, in the order given.
    pub attached: Vec<(Probe, Method)>,
}

/// Loads, attaches `probes`, prints bpftrace's banner, and traces for the window.
pub async fn trace(
    probes: &[Probe],
    constants: &[Constant],
    choice: AttachChoice,
    need: Need,
    duration: Option<Duration>,
    format: Format,
) -> Result<Traced> {
    kernel::check_privileges()?;
    let mut interrupts = Interrupts::catch()?;
    let mut tracer = Tracer::load(constants)?;
    let mut attached = Vec::new();
    let mut problems = Vec::new();
    for probe in probes {
        match tracer.attach(probe, choice) {
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
    if attached.is_empty() || need.unmet_by(&problems) {
        return Err(attach_failure(&problems, attached.is_empty(), &present));
    }
    for (probe, problem) in &problems {
        eprintln!(
            "rcutrace: warning: {}: {}; not traced",
            probe.function,
            describe(problem)
        );
    }

    let mut stdout = std::io::stdout();
    stdout
        .write_all(render::banner(format, attached.len()).as_bytes())
        .and_then(|()| stdout.flush())
        .context("writing to stdout")?;
    let logger = tracer.take_logger();
    let window = session::run(duration, &mut interrupts, logger).await?;
    tracer.stop()?;
    if window.interrupted {
        eprintln!(
            "rcutrace: interrupted after {:.1} s; printing what was traced",
            window.elapsed.as_secs_f64()
        );
    }
    Ok(Traced {
        tracer,
        window,
        attached,
    })
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

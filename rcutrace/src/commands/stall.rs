//! `rcutrace stall`: the grace-period machinery of `gp` (the same programs and the same
//! assembler), watched every 100 ms by `model::stall`, which says when the grace period in
//! progress has grown old enough to warn about. Warnings, the kernel's own stall warnings
//! (its `rcu:rcu_stall_warning` tracepoint) and the end of a warned grace period are printed
//! as they happen; the window's end prints a one-line summary.

use std::{cell::RefCell, time::Duration};

use anyhow::Result;
use rcutrace_common::gp::EVENT_KERNEL_STALL_WARNING;

use super::{Need, Request, Watch, WatchNext, gp, print, trace};
use crate::{
    cli::StallArgs,
    kernel::{self, rcu_state, symbols::Symbolizer},
    model::{
        Report, StallEvent, StallSummary, Summary,
        anatomy::Assembler,
        stall::{StallWatch, default_thresholds},
    },
    render::{self, Format},
    trace::{
        probes::{GRACE_PERIODS, GRACE_PERIODS_NEEDED, KERNEL_STALL_WARNING, Probe},
        tracer::Tracer,
    },
};

/// How often the grace period in progress is looked at.
const WATCH_EVERY: Duration = Duration::from_millis(100);

struct State {
    stream: Assembler,
    watch: StallWatch,
    warnings: u64,
    kernel_warnings: u64,
    stalls_ended: u64,
    stopped_at_warning: bool,
    malformed: u64,
}

pub async fn run(args: &StallArgs, format: Format) -> Result<Report> {
    let layout = rcu_state::layout()?;
    let cpus = kernel::possible_cpus()?;
    let online = kernel::online_cpus()?;
    let thresholds = if args.warn_at.is_empty() {
        default_thresholds(rcu_state::stall_timeout()?)
    } else {
        let mut thresholds = args.warn_at.clone();
        thresholds.sort();
        thresholds.dedup();
        thresholds
    };
    let mut probes: Vec<Probe> = GRACE_PERIODS.in_attach_order().to_vec();
    if layout.stall_warning.is_some() {
        probes.insert(0, KERNEL_STALL_WARNING);
    } else {
        eprintln!(
            "rcutrace: this kernel has no rcu:rcu_stall_warning tracepoint in tracefs (or \
             tracefs is not mounted); the kernel's own stall warnings will not be reported"
        );
    }
    let state = RefCell::new(State {
        stream: Assembler::awaiting(&kernel::online_cpus()?),
        watch: StallWatch::new(thresholds.clone()),
        warnings: 0,
        kernel_warnings: 0,
        stalls_ended: 0,
        stopped_at_warning: false,
        malformed: 0,
    });
    let emit = |event: &StallEvent| print(&render::stall_event(format, event));
    let mut consume = |record: &[u8]| {
        let mut state = state.borrow_mut();
        let Some(event) = gp::decode(record) else {
            state.malformed += 1;
            return;
        };
        if event.kind == EVENT_KERNEL_STALL_WARNING {
            state.kernel_warnings += 1;
            let earlier = state
                .watch
                .first_warning_ns()
                .map(|first| Duration::from_nanos(event.at_ns.saturating_sub(first)));
            let _ = emit(&StallEvent::KernelWarning {
                time: kernel::local_time(),
                rcuname: text(&event.comm),
                msg: text(&event.text),
                cpu: event.cpu,
                rcutrace_earlier: earlier,
            });
            return;
        }
        state.stream.add(&event);
        for done in state.stream.take_done() {
            if let Some(ended) = state.watch.ended(&done) {
                state.stalls_ended += 1;
                let _ = emit(&StallEvent::Ended {
                    time: kernel::local_time(),
                    ended,
                });
            }
        }
    };
    let mut symbolizer: Option<Symbolizer> = None;
    let mut check = |tracer: &Tracer| -> Result<WatchNext> {
        let mut state = state.borrow_mut();
        let state = &mut *state;
        let Some(warning) = state
            .watch
            .check(&state.stream, kernel::monotonic_ns(), &online)
        else {
            return Ok(WatchNext::Continue);
        };
        let mut frames = super::stack_frames(tracer, &mut symbolizer);
        let cpu_stacks = warning
            .cpus
            .iter()
            .map(|cpu| {
                cpu.sample
                    .as_ref()
                    .and_then(|s| s.stack)
                    .map(&mut frames)
                    .unwrap_or_default()
            })
            .collect();
        let blocked_stacks = warning
            .blocked
            .iter()
            .map(|(reader, _)| reader.stack.map(&mut frames).unwrap_or_default())
            .collect();
        state.warnings += 1;
        emit(&StallEvent::Warning {
            time: kernel::local_time(),
            warning,
            cpu_stacks,
            blocked_stacks,
        })?;
        if args.exit_on_warning {
            state.stopped_at_warning = true;
            return Ok(WatchNext::EndWindow);
        }
        Ok(WatchNext::Continue)
    };
    trace(
        Request {
            probes: &probes,
            constants: gp::constants(&layout, cpus, gp::GpEvents::WithSamples),
            choice: Default::default(),
            by: None,
            need: Need::These(GRACE_PERIODS_NEEDED),
            duration: args.duration(),
            interval: None,
            listener: None,
            traced_process: None,
            sample_readers: None,
            watch: Some(Watch {
                every: WATCH_EVERY,
                check: &mut check,
            }),
            format,
        },
        Some(&mut consume),
        &mut |period| {
            let state = state.borrow();
            if state.malformed > 0 {
                anyhow::bail!(
                    "{} records in the event buffer were not grace-period events \
                     (rcutrace's eBPF object and loader disagree)",
                    state.malformed
                );
            }
            Ok(Report {
                time: None,
                maps: Vec::new(),
                summary: Summary::Stall(StallSummary {
                    elapsed: period.elapsed,
                    thresholds: thresholds.clone(),
                    warnings: state.warnings,
                    kernel_warnings: state.kernel_warnings,
                    stalls_ended: state.stalls_ended,
                    stopped_at_warning: state.stopped_at_warning,
                }),
                environment: kernel::environment::current(period.attached),
            })
        },
    )
    .await
}

/// A NUL-padded string from an event.
fn text(bytes: &[u8; 16]) -> String {
    let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
    String::from_utf8_lossy(&bytes[..end]).into_owned()
}

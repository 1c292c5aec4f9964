//! `rcutrace stall`: the grace-period machinery of `gp` (the same programs and the same
//! assembler), watched by `model::stall`, which says when the grace period in progress (and
//! the expedited one, whose start the programs keep) has grown old enough to warn about. The
//! watch looks once a second, and at the moment a grace period in progress will pass its
//! next threshold: an always-on command wakes rarely. Warnings, the kernel's own stall warnings
//! (its `rcu:rcu_stall_warning` tracepoint) and the end of a warned grace period are printed
//! as they happen; the window's end prints a one-line summary.

use std::{
    cell::{Cell, RefCell},
    sync::mpsc,
    thread,
    time::Duration,
};

use anyhow::Result;
use rcutrace_common::gp::{EVENT_KERNEL_STALL_WARNING, EVENT_STALL_WAKE};

mod flavours;

use super::{naming::symbolize, window::trace};
use crate::{
    cli::StallArgs,
    commands::publish::Sink,
    kernel::{
        self, expedited_holdouts::ExpeditedHoldoutReader, rcu_state, symbols::keeper::SymbolKeeper,
    },
    model::{
        Report, StallEvent, StallSummary, Summary,
        anatomy::Assembler,
        flavour_stall,
        stall::{
            ExpeditedHoldouts, ExpeditedNews, ExpeditedWatch, Looks, StallWarning, StallWatch,
            default_thresholds,
        },
    },
    trace::{
        engine::{self, Ends, Hooks, Need, Reporting, Request},
        grace_periods::{self, GpEvents, expedited_state},
        probes::{
            EXPEDITED_END, EXPEDITED_START, GRACE_PERIODS, GRACE_PERIODS_NEEDED,
            KERNEL_STALL_WARNING, Probe,
        },
        tracer::Tracer,
        watch::{Watch, WatchNext},
    },
};
use flavours::FlavourWatches;

/// How often the watch looks while the kernel side wakes it as a grace period passes the
/// first threshold: only for what no tick or force-quiescent-state pass would wake it for
/// (an expedited grace period held by a blocked reader on an otherwise idle machine, with no
/// normal one in progress). Each look is a wake-up an always-on command pays for.
const LOOK_EVERY: Duration = Duration::from_secs(5);
/// How often it looks while a grace period it warned about is in progress (to say its end
/// when it comes), and always when the kernel side cannot wake it (neither the tick's hook
/// nor the force-quiescent-state pass's attached): shorter still if the first threshold is.
const LOOK_OFTEN: Duration = Duration::from_secs(1);

struct State {
    printer: Printer,
    stream: Assembler,
    watch: StallWatch,
    expedited: ExpeditedWatch,
    warnings: u64,
    expedited_warnings: u64,
    kernel_warnings: u64,
    stalls_ended: u64,
    stopped_at_warning: bool,
    malformed: u64,
    /// The flavours watched beside normal RCU (`--flavor`).
    flavours: Option<FlavourWatches>,
}

pub async fn run(args: &StallArgs, sink: Sink) -> Result<Report> {
    let mut probes: Vec<Probe> = GRACE_PERIODS.in_attach_order().to_vec();
    probes.extend([EXPEDITED_START, EXPEDITED_END]);
    engine::read_btf_ahead(&probes, Default::default(), None);
    crate::marks::mark("kernel BTF pass started beside the start");
    let layout = rcu_state::layout()?;
    crate::marks::mark("RCU's layout and rcu_node tree read");
    let cpus = kernel::possible_cpus()?;
    let online = kernel::online_cpus()?;
    let mut flavour_constants = Vec::new();
    let thresholds = match ascending(&args.warn_at) {
        Some(given) => given,
        None => default_thresholds(rcu_state::stall_timeout()?),
    };
    if layout.stall_warning.is_some() {
        probes.insert(0, KERNEL_STALL_WARNING);
    } else {
        eprintln!(
            "rcutrace: this kernel has no rcu:rcu_stall_warning tracepoint in tracefs (or \
             tracefs is not mounted); the kernel's own stall warnings will not be reported"
        );
    }
    let (flavours, needed) = match args.flavors.is_empty() {
        true => (None, GRACE_PERIODS_NEEDED.to_vec()),
        false => {
            let flavors: Vec<_> = args.flavors.iter().map(|f| f.flavor()).collect();
            let thresholds = ascending(&args.flavor_warn_at)
                .unwrap_or_else(|| flavour_stall::DEFAULT_THRESHOLDS.to_vec());
            let (watches, attaching) = FlavourWatches::plan(&flavors, thresholds)?;
            for probe in attaching.probes {
                if !probes.contains(&probe) {
                    probes.push(probe);
                }
            }
            let mut needed = GRACE_PERIODS_NEEDED.to_vec();
            needed.extend(attaching.needed);
            flavour_constants = attaching.constants;
            (Some(watches), needed)
        }
    };
    let mut expedited_holdouts = ExpeditedHoldoutLooks {
        reader: ExpeditedHoldoutReader::new(layout.tree.clone()),
        failure_said: false,
    };
    // A warning's stacks are named as it is printed, while what holds the grace period is
    // still loaded: the watch's own looks (`check`) keep the names of what goes away before
    // that. A thread of the keeper's own would be a wake-up more (at one a second, three
    // quarters of an idle stall's own CPU).
    let symbols = SymbolKeeper::looked_after_by_owner();
    let state = RefCell::new(State {
        printer: Printer::start(sink, symbols.clone()),
        stream: Assembler::new(layout.tree.clone(), &online),
        watch: StallWatch::new(thresholds.clone()),
        expedited: ExpeditedWatch::new(thresholds.clone()),
        warnings: 0,
        expedited_warnings: 0,
        kernel_warnings: 0,
        stalls_ended: 0,
        stopped_at_warning: false,
        malformed: 0,
        flavours,
    });
    let look_often = state.borrow().watch.longest_wait(LOOK_OFTEN);
    let look_now = Cell::new(false);
    let mut consume = |record: &[u8]| {
        let mut state = state.borrow_mut();
        let Some(event) = grace_periods::decode(record) else {
            state.malformed += 1;
            return;
        };
        let state = &mut *state;
        if let Some(flavours) = &mut state.flavours
            && let Some(ends) = flavours.add(&event)
        {
            for ended in ends {
                state.stalls_ended += 1;
                let _ = state.printer.event(ended);
            }
            return;
        }
        if event.kind == EVENT_STALL_WAKE {
            look_now.set(true);
            return;
        }
        if event.kind == EVENT_KERNEL_STALL_WARNING {
            state.kernel_warnings += 1;
            let msg = text(&event.text);
            // Its expedited stall warning is about the expedited grace period.
            let first = if msg.starts_with("Expedited") {
                state.expedited.first_warning_ns()
            } else {
                state.watch.first_warning_ns()
            };
            let earlier =
                first.map(|first| Duration::from_nanos(event.at_ns.saturating_sub(first)));
            // A printer that stopped is said by the next look.
            let _ = state.printer.event(StallEvent::KernelWarning {
                time: kernel::local_time(),
                rcuname: text(&event.comm),
                msg,
                cpu: event.cpu,
                rcutrace_earlier: earlier,
            });
            return;
        }
        state.stream.add(&event);
        for done in state.stream.take_done() {
            if let Some(ended) = state.watch.ended(&done) {
                state.stalls_ended += 1;
                let _ = state.printer.event(StallEvent::Ended {
                    time: kernel::local_time(),
                    ended,
                });
            }
        }
    };
    let mut check = |tracer: &mut Tracer| -> Result<WatchNext> {
        symbols.look();
        let mut state = state.borrow_mut();
        let state = &mut *state;
        let now_ns = kernel::monotonic_ns();
        let expedited = expedited_state(tracer)?;
        let kernel_wakes = tracer
            .program_ids(&[GRACE_PERIODS.tick, GRACE_PERIODS.fqs])
            .next()
            .is_some();
        let next = |state: &State| {
            // Nothing wakes the watch as another flavour's grace period begins: its events
            // are read at each look, so these flavours are looked at often.
            let (looks, every) = if !kernel_wakes {
                (Looks::All, look_often)
            } else if state.watch.awaits_end(&state.stream)
                || state.expedited.awaits_end()
                || state.flavours.is_some()
            {
                (Looks::AfterTheFirst, look_often)
            } else {
                (Looks::AfterTheFirst, LOOK_EVERY)
            };
            let normal = state.watch.next_due(&state.stream, now_ns, looks);
            let expedited = state.expedited.next_due(expedited, now_ns, looks);
            let flavours = state.flavours.as_ref().and_then(|f| f.next_due(now_ns));
            let due = normal.into_iter().chain(expedited).chain(flavours).min();
            WatchNext::Within(due.map_or(every, |due| due.min(every)))
        };
        match state.expedited.check(expedited, now_ns) {
            Some(ExpeditedNews::Warning(warning)) => {
                state.warnings += 1;
                state.expedited_warnings += 1;
                state.printer.event(StallEvent::ExpeditedWarning {
                    time: kernel::local_time(),
                    warning,
                    waiting_for: expedited_holdouts.read(),
                })?;
                if args.exit_on_warning {
                    state.stopped_at_warning = true;
                    return Ok(WatchNext::EndWindow);
                }
            }
            Some(ExpeditedNews::Ended(ended)) => {
                state.stalls_ended += 1;
                state.printer.event(StallEvent::ExpeditedEnded {
                    time: kernel::local_time(),
                    ended,
                })?;
            }
            None => {}
        }
        let flavour_warnings = match &mut state.flavours {
            Some(flavours) => flavours.check(now_ns, tracer, &symbols),
            None => Vec::new(),
        };
        for warning in flavour_warnings {
            state.warnings += 1;
            state.printer.event(warning)?;
            if args.exit_on_warning {
                state.stopped_at_warning = true;
                return Ok(WatchNext::EndWindow);
            }
        }
        let Some(warning) = state.watch.check(&state.stream, now_ns, &online) else {
            return Ok(next(state));
        };
        // Read now, while the stacks are in the map; symbolized on the printer's thread.
        let read = |stack: Option<u64>| stack.map(|stack| tracer.stack(stack));
        let cpu_stacks = warning
            .cpus
            .iter()
            .map(|cpu| read(cpu.sample.as_ref().and_then(|s| s.stack)))
            .collect();
        let blocked_stacks = warning
            .blocked
            .iter()
            .map(|(reader, _)| read(reader.stack))
            .collect();
        state.warnings += 1;
        state
            .printer
            .warning(kernel::local_time(), warning, cpu_stacks, blocked_stacks)?;
        if args.exit_on_warning {
            state.stopped_at_warning = true;
            return Ok(WatchNext::EndWindow);
        }
        Ok(next(state))
    };
    trace(
        Request {
            probes: &probes,
            constants: grace_periods::constants(
                &layout,
                cpus,
                GpEvents::WithWakeAfter(thresholds[0]),
            )
            .into_iter()
            .chain(flavour_constants)
            .collect(),
            choice: Default::default(),
            by: None,
            need: Need::These(&needed),
            ends: Ends::after(args.duration()),
            reporting: Reporting::AtEnd,
            sample_readers: None,
            hooks: Hooks {
                // The first look soon: whether the kernel side can wake the watch is known
                // then.
                watch: Some(Watch {
                    every: look_often,
                    check: Box::new(&mut check),
                    now: Some(&look_now),
                    reads_events: true,
                }),
                ..super::window::hooks(Some(&symbols), None)
            },
        },
        Some(&mut consume),
        &mut |period| {
            let mut state = state.borrow_mut();
            // The last look: an expedited grace period warned about may have ended since.
            if let Some(ExpeditedNews::Ended(ended)) = state
                .expedited
                .check(expedited_state(period.tracer)?, kernel::monotonic_ns())
            {
                state.stalls_ended += 1;
                state.printer.event(StallEvent::ExpeditedEnded {
                    time: kernel::local_time(),
                    ended,
                })?;
            }
            state.printer.finish()?;
            grace_periods::refuse_malformed(state.malformed)?;
            Ok(Report {
                time: None,
                maps: Vec::new(),
                summary: Summary::Stall(StallSummary {
                    elapsed: period.elapsed,
                    thresholds: thresholds.clone(),
                    flavor_thresholds: state
                        .flavours
                        .as_ref()
                        .map_or_else(Vec::new, |f| f.thresholds().to_vec()),
                    warnings: state.warnings,
                    expedited_warnings: state.expedited_warnings,
                    kernel_warnings: state.kernel_warnings,
                    stalls_ended: state.stalls_ended,
                    stopped_at_warning: state.stopped_at_warning,
                }),
                environment: period.environment(),
            })
        },
        sink,
    )
    .await
}

/// The thresholds given on the command line, ascending and each once; `None` if none was.
fn ascending(given: &[Duration]) -> Option<Vec<Duration>> {
    let mut thresholds = given.to_vec();
    thresholds.sort();
    thresholds.dedup();
    (!thresholds.is_empty()).then_some(thresholds)
}

/// Reads what an expedited grace period warned about still waits for; a failure is said
/// once, with its cause, and the warnings then say it is unknown.
struct ExpeditedHoldoutLooks {
    reader: Result<ExpeditedHoldoutReader>,
    failure_said: bool,
}

impl ExpeditedHoldoutLooks {
    fn read(&mut self) -> Option<ExpeditedHoldouts> {
        let read = match &self.reader {
            Ok(reader) => reader.read(),
            Err(error) => Err(anyhow::anyhow!("{error:#}")),
        };
        read.map_err(|error| {
            if !std::mem::replace(&mut self.failure_said, true) {
                eprintln!(
                    "rcutrace: warning: what expedited grace periods wait for cannot be read: \
                     {error:#}"
                );
            }
        })
        .ok()
    }
}

/// Prints the events in the order they happen, on a thread of its own: symbolizing a
/// warning's stacks (the first time, parsing all of /proc/kallsyms, most of a second under
/// emulation) must not hold up the next look, which may be due within it.
struct Printer {
    jobs: Option<mpsc::Sender<Job>>,
    thread: Option<thread::JoinHandle<Result<()>>>,
}

/// A kernel stack's addresses as read from the programs' map, if the event had one.
type Stack = Option<Result<Vec<u64>>>;

enum Job {
    Event(StallEvent),
    Warning {
        time: String,
        warning: StallWarning,
        cpu_stacks: Vec<Stack>,
        blocked_stacks: Vec<Stack>,
    },
}

impl Printer {
    fn start(sink: Sink, symbols: SymbolKeeper) -> Self {
        let (jobs, queue) = mpsc::channel::<Job>();
        let thread = thread::spawn(move || {
            for job in queue {
                let event = match job {
                    Job::Event(event) => event,
                    Job::Warning {
                        time,
                        warning,
                        cpu_stacks,
                        blocked_stacks,
                    } => {
                        let names = symbols.names();
                        let frames = |stack: Stack| {
                            stack.map_or_else(Vec::new, |addresses| symbolize(&names, addresses))
                        };
                        StallEvent::Warning {
                            time,
                            warning,
                            cpu_stacks: cpu_stacks.into_iter().map(frames).collect(),
                            blocked_stacks: blocked_stacks.into_iter().map(frames).collect(),
                        }
                    }
                };
                sink.stall_event(&event)?;
            }
            Ok(())
        });
        Printer {
            jobs: Some(jobs),
            thread: Some(thread),
        }
    }

    fn event(&mut self, event: StallEvent) -> Result<()> {
        self.send(Job::Event(event))
    }

    fn warning(
        &mut self,
        time: String,
        warning: StallWarning,
        cpu_stacks: Vec<Stack>,
        blocked_stacks: Vec<Stack>,
    ) -> Result<()> {
        self.send(Job::Warning {
            time,
            warning,
            cpu_stacks,
            blocked_stacks,
        })
    }

    /// Queues `job`; if the printer has stopped (it could not write to stdout), why.
    fn send(&mut self, job: Job) -> Result<()> {
        let stopped = match &self.jobs {
            Some(jobs) => jobs.send(job).is_err(),
            None => true,
        };
        if stopped {
            self.finish()?;
            anyhow::bail!("the stall events' printer has stopped");
        }
        Ok(())
    }

    /// Prints what is queued and stops; the first failure to print, if any.
    fn finish(&mut self) -> Result<()> {
        self.jobs = None;
        match self.thread.take().map(thread::JoinHandle::join) {
            Some(Ok(printed)) => printed,
            Some(Err(_)) => anyhow::bail!("the thread printing stall events panicked"),
            None => Ok(()),
        }
    }
}

impl Drop for Printer {
    fn drop(&mut self) {
        let _ = self.finish();
    }
}

/// A NUL-padded string from an event.
fn text(bytes: &[u8; 16]) -> String {
    let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
    String::from_utf8_lossy(&bytes[..end]).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thresholds_given_are_taken_ascending_each_once() {
        let s = Duration::from_secs;
        assert_eq!(ascending(&[s(10), s(2), s(10)]), Some(vec![s(2), s(10)]));
        assert_eq!(ascending(&[]), None);
    }
}

//! The tracing engine every command runs on: `trace_with` checks privileges, loads the
//! programs a run may attach, attaches them from the probe table, opens the window, runs it
//! and closes it; a command says what it wants in a `Request` and makes its report of each
//! `Period`. The steps keep their order: the start-up marks (`marks`) time them.

use std::{
    cell::RefCell,
    collections::HashSet,
    fmt::Write as _,
    thread::JoinHandle,
    time::{Duration, Instant},
};

use anyhow::{Result, anyhow};
use rcutrace_common::{
    attribution::{MAX_DOMAIN_INITS, MAX_STACKS},
    counters::{self, MAX_KEYED_COUNTS},
    latency::{MAX_IN_FLIGHT, SAMPLE_RING_BYTES},
    own_work::MAX_OWN_HEADS,
    records::Environment,
};
use tokio::net::TcpListener;

use crate::{
    kernel::{self, grace_counters::GraceCounters, kprobe_table::KprobeTable},
    marks,
    model::attribution::{self, By},
    model::{Report, detach::OwnDetach},
    trace::{
        probes::{self, AttachChoice, Keys, Method, OwnWork, Probe, READERS},
        readings::Reading,
        sampling::{ReaderSampling, SampledReaders, Sampler, Switch},
        session::{
            self, Consume, Due, Interrupts, Next, Reports, Samples, Scheduled, Trigger, Window,
        },
        tracer::{self, Attachment, Constant, Tracer},
        watch::{Watch, WatchNext},
    },
};

/// How a run keys its counts: by stack only under `--by stack`.
fn keys_for(by: Option<By>) -> Keys {
    if by == Some(By::Stack) {
        Keys::Stacks
    } else {
        Keys::Plain
    }
}

/// Starts one pass over the kernel's BTF for all a command will ask of it: the layouts of
/// RCU's structures and of the kprobe table, and the ids of the functions its probes may get
/// trampolines on. It runs beside the start's other work; what needs an answer first waits
/// for it. Commands that read a layout before tracing call it first; `trace_with` then reads
/// nothing more.
pub fn read_btf_ahead(probes: &[Probe], choice: AttachChoice, by: Option<By>) {
    // The start's symbol lookup, which the BTF pass's thread may begin, asks about the
    // kprobe-multi links' functions too.
    kernel::look_up_at_start(tracer::kprobe_multi_functions(probes, choice, keys_for(by)));
    let functions = tracer::trampoline_functions(probes, choice, keys_for(by));
    let mut fields = kernel::rcu_state::fields();
    fields.extend(kernel::kprobe_table::FIELDS);
    kernel::btf::read_ahead_in_background(functions, fields);
}

/// Whether a command can run without some of its probes.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Need<'a> {
    /// Run with whatever attached; report the rest.
    Any,
    /// Every probe must attach.
    All,
    /// These probes must attach; the others are optional.
    These(&'a [Probe]),
}

impl Need<'_> {
    fn unmet_by(self, problems: &[(Probe, Attachment)]) -> bool {
        match self {
            Need::Any => false,
            // A hook that only names what others count never makes a run fail.
            Need::All => problems.iter().any(|(p, _)| !p.names_only()),
            Need::These(needed) => problems.iter().any(|(p, _)| needed.contains(p)),
        }
    }
}

/// What a command asks `trace_with` for: what to attach and how, what ends the window, when
/// to report, and the command's own work at the window's steps.
pub struct Request<'a> {
    pub probes: &'a [Probe],
    /// Load-time constants of the programs, beside the ones `trace_with` sets itself.
    pub constants: Vec<Constant>,
    pub choice: AttachChoice,
    pub by: Option<By>,
    pub need: Need<'a>,
    pub ends: Ends,
    pub reporting: Reporting<'a>,
    /// Attach the reader probe only part of the time (`count --sample-readers`).
    pub sample_readers: Option<ReaderSampling>,
    pub hooks: Hooks<'a>,
}

/// What ends the window, besides Ctrl-C and a watch that says so.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Ends {
    /// After this long.
    pub after: Option<Duration>,
    /// When this process exits (the one a pid filter selects), which is said.
    pub with_process: Option<u32>,
}

impl Ends {
    pub fn after(duration: Option<Duration>) -> Ends {
        Ends {
            after: duration,
            with_process: None,
        }
    }
}

/// When reports are made while the window is open, besides the last one, at its end.
#[derive(Clone, Copy, Debug, Default)]
pub enum Reporting<'a> {
    #[default]
    AtEnd,
    /// `--interval N [--cumulative]`.
    Every(Interval),
    /// To each client that connects here (`serve`); every report covers the window so far.
    PerConnection(&'a TcpListener),
}

impl Reporting<'_> {
    pub fn every(interval: Option<Interval>) -> Reporting<'static> {
        interval.map_or(Reporting::AtEnd, Reporting::Every)
    }

    /// Every report covers the window so far, not only what happened since the last one.
    fn cumulative(self) -> bool {
        match self {
            Reporting::AtEnd => false,
            Reporting::Every(interval) => interval.cumulative,
            Reporting::PerConnection(_) => true,
        }
    }
}

/// A command's own work at the window's steps.
#[derive(Default)]
pub struct Hooks<'a> {
    /// Once the window is open and said to be (a run that names kernel addresses keeps the
    /// symbols from here, so that they are named as they were when captured).
    pub at_open: Option<AtOpen<'a>>,
    /// Every so often while the window is open (`stall`'s watch, a launched command's look).
    pub watch: Option<Watch<'a>>,
    /// A last look at the kernel while the programs still count, just before the window
    /// closes (`callbacks` reads the callback lists' lengths there).
    pub at_close: Option<AtClose<'a>>,
}

/// What a command does once the window is open.
pub type AtOpen<'a> = Box<dyn FnMut() + 'a>;

/// A command's last look at the kernel before the window closes.
pub type AtClose<'a> = Box<dyn FnMut(&Tracer) + 'a>;

/// Where the window's opening is said and the reports made during it go.
pub trait Publisher<R> {
    /// The window is open, with `probes` probes attached: bpftrace's banner.
    fn opened(&mut self, probes: usize) -> Result<()>;
    /// A report due while the window is open (an interval's, a connection's).
    fn publish(&mut self, report: R, due: Due) -> Result<()>;
    /// The window closed and its last report was made: rcutrace's own detaching, done.
    fn detached(&mut self, detach: &OwnDetach) -> Result<()>;
}

/// `--interval N [--cumulative]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Interval {
    pub every: Duration,
    /// Each report covers the window so far, not only what happened since the last one.
    pub cumulative: bool,
}

/// One stretch of the window that a report covers: the whole window, one interval, or with
/// `--cumulative` the window so far. The probes may still be running.
pub struct Period<'a> {
    pub tracer: &'a Tracer,
    /// How each probe that attached was attached, in the order given.
    pub attached: &'a [(Probe, Method)],
    /// What the programs' counters added over the period.
    pub counters: Reading,
    pub elapsed: Duration,
    /// Later reports cover this period too (`--cumulative`, `serve`): samples consumed so
    /// far must be kept, not taken.
    pub cumulative: bool,
    /// With `--sample-readers`: the windows in which the reader probe counted.
    pub sampled_readers: Option<SampledReaders>,
    /// The window has closed and every record has been read: nothing more will come.
    pub closing: bool,
}

impl Period<'_> {
    /// What the run ran on, with how each probe was hooked, if the run records it.
    pub fn environment(&self) -> Option<Environment> {
        kernel::environment::current(self.attached.iter().map(|(p, m)| (p.function, m)))
    }
}

/// Makes a command's report of one period.
pub type MakeReport<'a, R = Report> = &'a mut dyn FnMut(&Period<'_>) -> Result<R>;

/// Loads, attaches the probes, has the window's opening said and traces for the window, for
/// any kind of report: counting starts once the last probe is attached and stops before
/// anything is detached; latency samples go to `consume` as they arrive, the last ones after
/// every program has finished. Reports due during the window (intervals, connections) go to
/// `publisher`; the report of the end of the window is returned.
pub async fn trace_with<R>(
    mut request: Request<'_>,
    mut consume: Option<Consume<'_>>,
    make_report: MakeReport<'_, R>,
    publisher: &mut dyn Publisher<R>,
) -> Result<R> {
    let mut interrupts = Interrupts::catch()?;
    // First, so that the places found below are answered by the same pass.
    read_btf_ahead(request.probes, request.choice, request.by);
    // Finding the kprobe table and the grace-period counters needs the BTF's layouts: done
    // beside loading and attaching, so that the window does not open later for them.
    let places = std::thread::spawn(KernelPlaces::find);
    let constants = std::mem::take(&mut request.constants);
    let (mut tracer, own_work) = load(&request, constants, consume.is_some())?;
    let Attached {
        probes: attached,
        grace_counters,
    } = attach(&mut tracer, &request, own_work, places)?;
    let Opened {
        mut samples,
        at_open,
        opened,
        sampler,
    } = open(
        &mut tracer,
        &mut request,
        &attached,
        consume.is_some(),
        publisher,
    )?;
    let mut periods = Periods {
        attached: &attached,
        cumulative: request.reporting.cumulative(),
        start: at_open,
        started: opened,
        sampler: sampler.as_ref(),
    };
    // The reports and the reader probe's switching both use the tracer: one at a time, from
    // the window's one loop.
    let tracer = RefCell::new(tracer);
    let window = run_window(
        &tracer,
        &mut request,
        &mut interrupts,
        following(&mut samples, &mut consume),
        &mut periods,
        &mut *make_report,
        publisher,
    )
    .await?;
    let mut tracer = tracer.into_inner();
    let report = close(
        &mut tracer,
        request,
        &window,
        following(&mut samples, &mut consume),
        &mut periods,
        make_report,
    )?;
    publisher.detached(&detach(&mut tracer, grace_counters.as_ref()))?;
    Ok(report)
}

/// Where things rcutrace reads at the edges of the window lie in this kernel, found from the
/// start's symbol lookup and BTF pass: the kprobe table (for the hits the kernel skipped) and the
/// grace-period counters (for what its own detaching waited for).
struct KernelPlaces {
    kprobe_table: Located<KprobeTable>,
    grace_counters: Located<GraceCounters>,
}

/// How each probe that attached was attached, and what the end of the window will read.
struct Attached {
    probes: Vec<(Probe, Method)>,
    grace_counters: Located<GraceCounters>,
}

/// A place in the kernel, or why it was not found.
type Located<T> = std::result::Result<T, String>;

impl KernelPlaces {
    fn find() -> KernelPlaces {
        // Shared with RCU's layout, which `gp` and `stall` read before they load: then done.
        let symbols = kernel::start_symbols();
        KernelPlaces {
            kprobe_table: symbols
                .clone()
                .and_then(|s| KprobeTable::locate(s).map_err(|e| format!("{e:#}"))),
            grace_counters: symbols
                .and_then(|s| GraceCounters::locate(s).map_err(|e| format!("{e:#}"))),
        }
    }
}

/// Detaches every program, timing each kind of hook, with the grace periods that ended
/// meanwhile where they can be read.
fn detach(
    tracer: &mut Tracer,
    counters: std::result::Result<&GraceCounters, &String>,
) -> OwnDetach {
    let read = || {
        let counters = counters.map_err(String::clone)?;
        counters.read().map_err(|e| format!("{e:#}"))
    };
    let before = read();
    let times = tracer.detach();
    let grace_periods = before.and_then(|before| {
        let after = read()?;
        Ok(before
            .since(&after)
            .into_iter()
            .map(|(flavour, ended)| (flavour.name(), ended))
            .collect())
    });
    OwnDetach {
        times,
        grace_periods,
    }
}

/// Loads the eBPF object with the run's constants (`constants`, the command's, and those set
/// here) and map sizes, given only the programs this run may attach: its probes', and the
/// own-work hooks it needs, which are returned.
fn load(
    request: &Request<'_>,
    mut constants: Vec<Constant>,
    samples: bool,
) -> Result<(Tracer, OwnWork)> {
    constants.push(Constant::U32("SELF_TGID", std::process::id()));
    let keys = keys_for(request.by);
    let own_work = own_work(request);
    if own_work != OwnWork::Off {
        constants.extend(own_work_constants());
        marks::mark("own-work constants found");
    }
    constants.push(Constant::U32("BY_MODE", attribution::mode(request.by)));
    let domain_slots = match request.by {
        Some(By::Srcu) => probes::srcu_domain_slots(),
        _ => 0,
    };
    constants.push(Constant::U64("DOMAIN_SLOTS", domain_slots));
    // The large maps are declared with one entry: only a run that uses one sizes it.
    if request.by.is_some() {
        constants.push(Constant::MaxEntries("KEYED_COUNTS", MAX_KEYED_COUNTS));
    }
    if request.by == Some(By::Stack) {
        constants.push(Constant::MaxEntries("STACKS", MAX_STACKS));
    }
    if request.probes.contains(&probes::SRCU_DOMAIN_INIT) {
        constants.push(Constant::MaxEntries("DOMAIN_INITS", MAX_DOMAIN_INITS));
    }
    if samples {
        constants.push(Constant::MaxEntries("IN_FLIGHT", MAX_IN_FLIGHT));
        constants.push(Constant::MaxEntries("SAMPLES", SAMPLE_RING_BYTES));
    }
    // aya is given only the programs this run may attach (see trace::object).
    let own_work_probes = own_work.probes();
    let programs = |loader| -> HashSet<String> {
        probes::planned_programs(request.probes, request.choice, keys, loader)
            .chain(probes::planned_programs(
                &own_work_probes,
                OWN_WORK_ATTACH.0,
                OWN_WORK_ATTACH.1,
                loader,
            ))
            .collect()
    };
    let mut tracer = Tracer::load(
        &constants,
        &programs(probes::Loader::Aya),
        programs(probes::Loader::Own),
    )?;
    tracer.set_written_slots("COUNTS", probes::counter_slots_written(request.probes));
    marks::mark("object loaded, maps created");
    Ok((tracer, own_work))
}

/// Which of its own work this run follows (see `probes::own_work_needed`): the sampled reader
/// probe is detached and attached again in the window; another tool's tracing program on a
/// function this run puts a trampoline on is found among the programs loaded.
fn own_work(request: &Request<'_>) -> OwnWork {
    let traced_by_others = |functions: &[&str]| {
        let targets = kernel::bpf_programs::tracing_targets();
        if targets.is_empty() {
            return false;
        }
        // The ids come from the run's one BTF pass, which looked for these functions.
        match kernel::btf::function_ids(functions) {
            Ok(ids) => ids.values().any(|id| targets.contains(id)),
            Err(_) => true,
        }
    };
    probes::own_work_needed(
        request.probes,
        request.choice,
        keys_for(request.by),
        request.sample_readers.is_some(),
        kernel::has_kprobe_multi(),
        &traced_by_others,
    )
}

/// Attaches the own-work hooks, then the command's probes; says what could not be traced,
/// and fails where the command cannot run without it. The kprobe table, found meanwhile, is
/// taken once everything is attached, with the grace-period counters found with it.
fn attach(
    tracer: &mut Tracer,
    request: &Request<'_>,
    own_work: OwnWork,
    places: JoinHandle<KernelPlaces>,
) -> Result<Attached> {
    let keys = keys_for(request.by);
    // First, so that the tasks-RCU work the command's own attaching queues is followed (by
    // the programs that ask whose doing a call is: the others need no such hooks).
    let own_work_missing = if own_work != OwnWork::Off {
        let missing = attach_own_work(tracer, own_work);
        marks::mark("own-work hooks attached");
        missing
    } else {
        Vec::new()
    };
    let mut attached = Vec::new();
    let mut problems = Vec::new();
    for (probe, attachment) in tracer.attach(request.probes, request.choice, keys) {
        match attachment {
            Attachment::Attached(method) => attached.push((probe, method)),
            other => problems.push((probe, other)),
        }
    }
    tracer.attaching_done();
    // A function that failed every method may simply not exist on this kernel: say so. The
    // tracer already knows of most absent ones (the kernel said so at the attach); /proc/kallsyms
    // is read only for the others.
    let failed: Vec<&str> = problems
        .iter()
        .filter(|(_, p)| matches!(p, Attachment::Failed(_)))
        .map(|(p, _)| p.function)
        .collect();
    let present = if failed.is_empty() {
        HashSet::new()
    } else {
        log::info!("reading /proc/kallsyms for {}", failed.join(", "));
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
    marks::mark("probes attached");
    warn_not_traced(&problems);
    // Said once the command itself is traced: before, a kernel that traces nothing has its
    // own error to give.
    warn_own_work_missing(&own_work_missing);
    let places = places.join().unwrap_or_else(|_| KernelPlaces {
        kprobe_table: Err("finding the kprobe table failed".into()),
        grace_counters: Err("finding the grace-period counters failed".into()),
    });
    marks::mark("kprobe table found");
    note_uncounted_skips(tracer, places.kprobe_table, &attached);
    Ok(Attached {
        probes: attached,
        grace_counters: places.grace_counters,
    })
}

/// What the window starts from.
struct Opened {
    /// The sample buffer, where the run consumes samples.
    samples: Option<Samples>,
    /// The counters as the window opened, and when that was.
    at_open: Reading,
    opened: Instant,
    /// With `--sample-readers`: the reader probe's schedule.
    sampler: Option<RefCell<Sampler>>,
}

/// Opens the window: the counters are read and the programs start counting; then the
/// opening is said (bpftrace's banner), the command's `at_open` hook runs and, for `serve`,
/// the address it listens on is said.
fn open<R>(
    tracer: &mut Tracer,
    request: &mut Request<'_>,
    attached: &[(Probe, Method)],
    samples: bool,
    publisher: &mut dyn Publisher<R>,
) -> Result<Opened> {
    let samples = if samples {
        // A watch that reads the buffer itself does so before each check.
        let watch_reads = request.hooks.watch.as_ref().is_some_and(|w| w.reads_events);
        Some(Samples::new(
            tracer.take_samples()?,
            (!watch_reads).then_some(session::DRAIN_EVERY),
        )?)
    } else {
        None
    };
    let keyed = request.by.is_some();
    let mut at_open = Reading::take(tracer, keyed)?;
    // `count`'s plain counters do not check the window either: read them again last, so
    // that what they count from here is what the programs that check it see (the reading
    // of everything else takes a while, tens of grace periods' worth on a slow machine).
    at_open.set_array("COUNTS", tracer.per_cpu_sums("COUNTS")?);
    marks::mark("counters read at the opening");
    tracer.set_running(true)?;
    let opened = Instant::now();
    // Sampling needs the reader probe attached, and by kprobe (it is never anything else).
    let sampler = match request.sample_readers {
        Some(sampling) if attached.iter().any(|(p, _)| *p == READERS.probe) => {
            Some(RefCell::new(Sampler::open(sampling, opened)))
        }
        _ => None,
    };
    publisher.opened(attached.len())?;
    marks::mark("banner printed");
    if let Some(at_open) = request.hooks.at_open.as_mut() {
        at_open();
    }
    // A server is announced once it serves: after its probes are attached.
    if let Reporting::PerConnection(listener) = request.reporting
        && let Ok(address) = listener.local_addr()
    {
        eprintln!("rcutrace: listening on http://{address}/metrics");
    }
    Ok(Opened {
        samples,
        at_open,
        opened,
        sampler,
    })
}

/// The sample buffer and what consumes it, where the run has both.
fn following<'a>(
    samples: &'a mut Option<Samples>,
    consume: &'a mut Option<Consume<'_>>,
) -> Option<(&'a mut Samples, Consume<'a>)> {
    match (samples.as_mut(), consume.as_mut()) {
        (Some(samples), Some(consume)) => Some((samples, &mut **consume as Consume<'_>)),
        _ => None,
    }
}

/// Runs the window to its end, making the reports due meanwhile (intervals, connections)
/// and doing the work scheduled in it: the reader probe's switches, or the command's watch.
async fn run_window<R>(
    tracer: &RefCell<Tracer>,
    request: &mut Request<'_>,
    interrupts: &mut Interrupts,
    following: Option<(&mut Samples, Consume<'_>)>,
    periods: &mut Periods<'_>,
    make_report: MakeReport<'_, R>,
    publisher: &mut dyn Publisher<R>,
) -> Result<Window> {
    let keyed = request.by.is_some();
    let sampler = periods.sampler;
    let mut report_due = |due: Due, drain: &mut dyn FnMut()| {
        let tracer = tracer.borrow();
        let reading = marks::thread_cpu();
        let (now, arrays_cpu) = Reading::take_timed(&tracer, keyed)?;
        // The bench reads this line for what reading the counters costs on each report.
        log::debug!(
            "counters read for a report in {:.3} ms of CPU, the per-CPU arrays in {:.3} ms",
            (marks::thread_cpu() - reading).as_secs_f64() * 1e3,
            arrays_cpu.as_secs_f64() * 1e3
        );
        drain();
        let report = periods.report(&tracer, now, Instant::now(), false, &mut *make_report)?;
        publisher.publish(report, due)
    };
    let trigger = match request.reporting {
        Reporting::AtEnd => None,
        Reporting::Every(interval) => Some(Trigger::Every(interval.every)),
        Reporting::PerConnection(listener) => Some(Trigger::Connection(listener)),
    };
    let reports = trigger.map(|trigger| Reports {
        trigger,
        report: &mut report_due,
    });
    let mut switch = || switch_readers(&mut tracer.borrow_mut(), sampler);
    let mut watch = request.hooks.watch.take();
    let watch_every = watch.as_ref().map(|w| (w.every, w.now));
    let mut watch_once = || {
        let Some(watch) = watch.as_mut() else {
            return Ok(Next::Never);
        };
        let next = (watch.check)(&mut tracer.borrow_mut())?;
        Ok(match next {
            WatchNext::Continue => Next::At(Instant::now() + watch.every),
            WatchNext::Within(due) => Next::At(Instant::now() + due),
            WatchNext::EndWindow => Next::EndWindow,
        })
    };
    // One piece of scheduled work at most: no command both samples readers and watches.
    let scheduled = match (sampler, watch_every) {
        (Some(s), _) => Some(Scheduled {
            next: Some(s.borrow().next().0),
            run: &mut switch,
            reports: false,
            now: None,
        }),
        (None, Some((every, now))) => Some(Scheduled {
            next: Some(Instant::now() + every),
            run: &mut watch_once,
            reports: true,
            now,
        }),
        (None, None) => None,
    };
    session::run(
        request.ends.after,
        interrupts,
        following,
        request.ends.with_process,
        reports,
        scheduled,
    )
    .await
}

/// Closes the window: a last look at the kernel (`at_close`), counting stops, and once every
/// program has finished, the last samples are consumed and the last period reported.
fn close<R>(
    tracer: &mut Tracer,
    request: Request<'_>,
    window: &Window,
    following: Option<(&mut Samples, Consume<'_>)>,
    periods: &mut Periods<'_>,
    make_report: MakeReport<'_, R>,
) -> Result<R> {
    if let Some(mut at_close) = request.hooks.at_close {
        at_close(tracer);
    }
    tracer.set_running(false)?;
    // `count`'s plain counters do not check the window: read them before the wait, which
    // itself makes a grace period (and takes readers).
    let counts_at_close = tracer.per_cpu_sums("COUNTS")?;
    let closed = Instant::now();
    kernel::wait_for_programs()?;
    if let Some((samples, consume)) = following {
        samples.drain(consume);
    }
    if window.interrupted && !matches!(request.reporting, Reporting::PerConnection(_)) {
        eprintln!(
            "rcutrace: interrupted after {:.1} s; printing what was traced",
            window.elapsed.as_secs_f64()
        );
    }
    let mut at_close = Reading::take(tracer, request.by.is_some())?;
    at_close.set_array("COUNTS", counts_at_close);
    periods.report(tracer, at_close, closed, true, make_report)
}

/// What the own-work programs need: the tasks-RCU kthreads, where the callback list keeps
/// its segments, and which counted functions queue a head given first.
fn own_work_constants() -> Vec<Constant> {
    let (normal, tasks) = probes::head_first_slots();
    let mut constants = vec![
        Constant::MaxEntries("OWN_HEADS", MAX_OWN_HEADS),
        Constant::Pids("TASKS_KTHREAD_PIDS", kernel::tasks_rcu_kthreads()),
        Constant::U64("NORMAL_HEAD_SLOTS", normal),
        Constant::U64("TASKS_HEAD_SLOTS", tasks),
    ];
    match kernel::rcu_state::own_work_layout() {
        Ok(layout) => {
            constants.extend([
                Constant::U32("SEGCBLIST_TAILS", layout.segcblist_tails),
                Constant::U32("PERCPU_CBLIST", layout.percpu_cblist),
                Constant::U32("PERCPU_RTPP", layout.percpu_rtpp),
                Constant::U32("TASKS_KTHREAD_PTR", layout.tasks_kthread_ptr),
                Constant::U32("TASK_STACK", layout.task_stack),
                Constant::U32("OWN_WORK_LAYOUT", 1),
            ]);
            // Without it, SRCU grace periods are never found to be rcutrace's: only kernels
            // whose SRCU grace periods call RCU updaters (7.3's SRCU-fast) lose by that, and
            // those have all of it.
            match layout.srcu {
                Some(srcu) => constants.extend([
                    Constant::U32("TASK_FLAGS", srcu.task_flags),
                    Constant::U32("TASK_WORKER_PRIVATE", srcu.task_worker_private),
                    Constant::U32("KTHREAD_DATA", srcu.kthread_data),
                    Constant::U32("WORKER_CURRENT_WORK", srcu.worker_current_work),
                    Constant::U32("SRCU_USAGE_WORK", srcu.usage_work),
                    Constant::U32("SRCU_USAGE_SSP", srcu.usage_ssp),
                    Constant::U32("SRCU_USAGE_GP_SEQ", srcu.usage_gp_seq),
                    Constant::U32("SRCU_USAGE_SIZE_STATE", srcu.usage_size_state),
                    Constant::U32("SRCU_STRUCT_SUP", srcu.struct_sup),
                    Constant::U32("SRCU_DATA_CBLIST", srcu.data_cblist),
                    Constant::U32("SRCU_DATA_SSP", srcu.data_ssp),
                    Constant::U32("SEGCBLIST_GP_SEQ", srcu.segcblist_gp_seq),
                    Constant::U32("SEGCBLIST_GP_SEQ_SIZE", srcu.segcblist_gp_seq_size),
                    Constant::U32("SRCU_LAYOUT", 1),
                ]),
                None => {
                    log::info!("no SRCU layout in the kernel BTF: SRCU grace periods not followed")
                }
            }
        }
        // Without it no list is recognised, so no grace period is found to be rcutrace's
        // alone: its kthreads' calls are counted, as the warning says.
        Err(e) => eprintln!(
            "rcutrace: warning: {e:#}: the calls the tasks-RCU kthreads make for rcutrace's \
             own attaching are counted as the system's"
        ),
    }
    constants
}

/// How the own-work hooks are attached: by kprobe (their functions run inside the tasks-RCU
/// machinery a trampoline's attach sets going), keyed by nothing.
const OWN_WORK_ATTACH: (AttachChoice, Keys) = (AttachChoice::Kprobe, Keys::Plain);

/// Attaches the hooks that tell rcutrace's own tasks-RCU work apart; returns the essential
/// ones this kernel lacks.
fn attach_own_work(tracer: &mut Tracer, own_work: OwnWork) -> Vec<&'static str> {
    tracer
        .attach(&own_work.probes(), OWN_WORK_ATTACH.0, OWN_WORK_ATTACH.1)
        .into_iter()
        .filter_map(|(probe, attachment)| match attachment {
            Attachment::Attached(_) => None,
            other => {
                log::info!("{}: {}", probe.function, describe(&other));
                Some(probe.function)
            }
        })
        .filter(|function| probes::OWN_WORK_ESSENTIAL.contains(function))
        .collect()
}

/// Without some of the own-work hooks, the kthreads' calls for rcutrace are counted as the
/// system's: said once.
fn warn_own_work_missing(missing: &[&str]) {
    if !missing.is_empty() {
        eprintln!(
            "rcutrace: warning: cannot follow {} on this kernel: the calls the tasks-RCU \
             kthreads make for rcutrace's own attaching are counted as the system's",
            missing.join(", ")
        );
    }
}

/// Switches the sampled reader probe as its schedule says is due now, keeping out of every
/// window what the switch itself counts; says when the next switch is due.
fn switch_readers(tracer: &mut Tracer, sampler: Option<&RefCell<Sampler>>) -> Result<Next> {
    let Some(sampler) = sampler else {
        return Ok(Next::Never);
    };
    let mut sampler = sampler.borrow_mut();
    let readers = |tracer: &Tracer| tracer.counter("COUNTS", counters::READ_LOCK);
    let switch = sampler.next().1;
    if switch == Switch::Begin {
        sampler.open_window(Instant::now(), readers(tracer)?);
        return Ok(Next::At(sampler.next().0));
    }
    let grace_periods_before = tracer.counter("COUNTS", counters::GP_FQS_LOOP)?;
    let began = Instant::now();
    let switched = if switch == Switch::Detach {
        sampler.close_window(Instant::now(), readers(tracer)?);
        tracer.switch_kprobe(&READERS.probe, false)
    } else {
        tracer.switch_kprobe(&READERS.probe, true)
    };
    // The windows so far still make an estimate: say why no more follow, and keep tracing.
    if let Err(e) = switched {
        eprintln!(
            "rcutrace: warning: sampling readers stopped: {e:#}; they are estimated from the \
             windows before"
        );
        return Ok(Next::Never);
    }
    if switch == Switch::Attach {
        sampler.attached(Instant::now());
    }
    log::info!("reader probe: {switch:?} took {:?}", began.elapsed());
    let grace_periods = tracer.counter("COUNTS", counters::GP_FQS_LOOP)?;
    sampler.add_switching_grace_periods(grace_periods.wrapping_sub(grace_periods_before));
    Ok(Next::At(sampler.next().0))
}

/// The periods of one window, one after another: where the current one started.
struct Periods<'a> {
    attached: &'a [(Probe, Method)],
    /// Every period starts at the opening.
    cumulative: bool,
    /// The counters when the current period started, and when that was.
    start: Reading,
    started: Instant,
    /// With `--sample-readers`: the reader probe's windows so far.
    sampler: Option<&'a RefCell<Sampler>>,
}

impl Periods<'_> {
    /// The report of the period ending with reading `now`, taken at `ended`; the next period
    /// starts here (unless every period starts at the opening).
    fn report<R>(
        &mut self,
        tracer: &Tracer,
        now: Reading,
        ended: Instant,
        closing: bool,
        make_report: MakeReport<'_, R>,
    ) -> Result<R> {
        let readers = now
            .array("COUNTS")
            .get(counters::READ_LOCK as usize)
            .copied()
            .unwrap_or(0);
        let sampled_readers = self
            .sampler
            .map(|s| s.borrow_mut().take_period(ended, readers, self.cumulative));
        let period = Period {
            tracer,
            attached: self.attached,
            counters: now.since(&self.start),
            elapsed: ended.saturating_duration_since(self.started),
            cumulative: self.cumulative,
            sampled_readers,
            closing,
        };
        let report = make_report(&period)?;
        if !self.cumulative {
            self.start.advance(now);
            self.started = ended;
        }
        Ok(report)
    }
}

/// Finds the kprobe layer's counts of skipped hits, and says once, on stderr, where the hits
/// the kernel skipped may be more than it counted: the figure is then a lower bound.
fn note_uncounted_skips(
    tracer: &mut Tracer,
    kprobe_table: std::result::Result<crate::kernel::kprobe_table::KprobeTable, String>,
    attached: &[(Probe, Method)],
) {
    let mut causes = Vec::new();
    if let Err(e) = tracer.set_kprobe_table(kprobe_table) {
        causes.push(format!(
            "the kprobe layer's own count could not be read ({e})"
        ));
    }
    let run_by_trace_call_bpf = attached.iter().any(|(_, m)| {
        matches!(
            m,
            Method::Kprobe | Method::KprobeMulti | Method::Kretprobe | Method::Tracepoint
        )
    });
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    let release = release.trim();
    if run_by_trace_call_bpf && kernel::misses::bpf_layer_skips_uncounted(release) {
        causes.push(format!(
            "Linux {release} counts nowhere a kprobe's or tracepoint's program skipped while \
             another BPF program runs on its CPU (counted from 6.7)"
        ));
    }
    for cause in causes {
        eprintln!("rcutrace: note: hits missed by the kernel are a lower bound: {cause}");
        kernel::misses::note_uncounted(cause);
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
    let mut said_missing: Vec<&str> = Vec::new();
    for (probe, problem) in problems {
        // A function's entry and return are both missing: one line says it.
        if matches!(problem, Attachment::Missing) {
            if said_missing.contains(&probe.function) {
                continue;
            }
            said_missing.push(probe.function);
        }
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
    // Functions this kernel does not have are no reason to doubt its kprobes.
    if problems
        .iter()
        .any(|(_, p)| !matches!(p, Attachment::Missing))
    {
        message.push_str(
            "\nRun rcutrace on a kernel with CONFIG_KPROBES=y and BTF, for example inside a VM \
             (from rcutrace's source tree: cargo xtask vm -- count).",
        );
    }
    anyhow!(message)
}

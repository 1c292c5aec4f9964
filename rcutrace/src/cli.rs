//! Command-line interface: what each command accepts, validated before anything is loaded.
//! Usage errors exit with status 2 (clap's convention) and say what is accepted.

use std::time::Duration;

use clap::{Args, Parser, Subcommand};
use rcutrace_common::hist::Linear;

use crate::{
    model::Unit,
    model::attribution::By,
    render::Format,
    trace::engine::Interval,
    trace::launch::RunAs,
    trace::probes::{self, AttachChoice},
    trace::sampling::ReaderSampling,
};

#[derive(Debug, Parser)]
#[command(
    name = "rcutrace",
    version,
    about = "See how the Linux kernel uses RCU: readers, updaters, grace periods and their latency",
    long_about = "See how the Linux kernel uses RCU: readers, updaters, grace periods and their latency.\n\n\
        rcutrace attaches eBPF programs to the kernel's RCU functions, aggregates in the kernel, \
        and prints maps and histograms the way bpftrace does, plus exact extremes, percentiles \
        and whatever could not be measured. It needs root (or CAP_BPF and CAP_PERFMON).",
    after_help = "Examples:\n  \
        sudo rcutrace count --secs 10\n  \
        sudo rcutrace count --all --by comm\n  \
        sudo rcutrace gplat --secs 30\n  \
        sudo rcutrace gp --secs 10\n  \
        sudo rcutrace srlat --expedited --linear 0,1000,100\n  \
        sudo rcutrace srlat --func rcu_barrier --by stack\n  \
        sudo rcutrace -f folded srlat --by stack --top 0 --flamegraph waits.svg\n  \
        sudo rcutrace count --interval 1 --secs 0\n  \
        sudo rcutrace serve --listen 127.0.0.1:9750\n\n\
        Set RUST_LOG=info to see how each probe was attached."
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
    /// Output as bpftrace prints it (text), as its JSON lines (-f json), one object a line, or
    /// as folded kernel stacks (-f folded: one line per stack, root first, `;` between frames,
    /// then its calls, or for srlat, gplat and gp the nanoseconds waited), which flame graph
    /// tools read; folded needs --by stack (count, srlat, gplat) or gp.
    #[arg(long, short = 'f', global = true, value_enum, default_value_t = Format::Text)]
    pub format: Format,
    /// Also save the run's JSON lines to FILE, for `rcutrace report` (the output stays as -f says).
    #[arg(long, global = true, value_name = "FILE")]
    pub save: Option<std::path::PathBuf>,
    /// Also draw the run's kernel stacks (those -f folded prints) as an interactive SVG flame
    /// graph in FILE: with --by stack (count, srlat, gplat), gp, or report of such a run.
    #[arg(long, global = true, value_name = "FILE.svg")]
    pub flamegraph: Option<std::path::PathBuf>,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run a command and say how much of its time went to waiting on RCU: each wait
    /// (synchronize_rcu(), rcu_barrier(), synchronize_srcu(), synchronize_net(), ...) in its
    /// threads and in the work items they queued, with the call sites, and what an expedited
    /// grace period would have saved.
    #[command(after_help = "Examples:\n  \
        sudo rcutrace run -- unshare -n true\n  \
        sudo rcutrace run -- ip netns del blue\n  \
        sudo rcutrace run --func synchronize_rcu_tasks -- bpftool prog load prog.o /sys/fs/bpf/p\n  \
        sudo rcutrace run --linger 30 -- rmdir /sys/fs/cgroup/job\n  \
        sudo rcutrace -f json run -- ./teardown.sh > teardown.json\n  \
        sudo rcutrace run --flamegraph waits.svg -- ./teardown.sh\n\n\
        The command runs as the user who ran sudo (SUDO_UID), else as rcutrace's own user;\n\
        --user chooses. Its output is its own; rcutrace's report follows it. The exit status\n\
        is the command's (128 + the signal that ended it; 127 if it could not be found).")]
    Run(RunArgs),
    /// Count RCU readers, updaters and grace periods, and print their ratios.
    #[command(after_help = "Examples:\n  \
        sudo rcutrace count                      # 10 seconds\n  \
        sudo rcutrace count --secs 0             # until Ctrl-C\n  \
        sudo rcutrace count --all                # every update-side function\n  \
        sudo rcutrace count --all --by comm      # ... and who calls each\n  \
        sudo rcutrace count --by stack --top 5   # the five busiest kernel paths\n  \
        sudo rcutrace count --interval 1 --secs 0   # every second, until Ctrl-C\n  \
        sudo rcutrace count --sample-readers 100/1000   # readers estimated, at ~1/10 the cost\n  \
        sudo rcutrace count --attach kprobe")]
    Count(CountArgs),
    /// Histogram of internal grace-period latency (rcu_gp_init() entry to rcu_gp_cleanup() return).
    #[command(after_help = "Examples:\n  \
        sudo rcutrace gplat --secs 30\n  \
        sudo rcutrace gplat --unit us --linear 0,20000,1000")]
    #[command(mut_arg("unit", |unit| unit.help("Unit of the histogram [default: ms]")))]
    Gplat(LatencyArgs),
    /// Histogram of how long callers wait in synchronize_rcu(), rcu_barrier() or any other
    /// waiting RCU updater, per call.
    #[command(after_help = "Examples:\n  \
        sudo rcutrace srlat\n  \
        sudo rcutrace srlat --expedited --linear 0,1000,100\n  \
        sudo rcutrace srlat --func rcu_barrier --func synchronize_rcu --by comm\n  \
        sudo rcutrace srlat --func synchronize_srcu --by stack --top 5\n  \
        sudo rcutrace srlat --pid 1234 --buckets 5")]
    Srlat(SrlatArgs),
    /// Which RCU callbacks are queued, how many are invoked or still pending, and how long
    /// each function's callbacks wait from queueing to invocation.
    #[command(after_help = "Examples:\n  \
        sudo rcutrace callbacks --secs 5\n  \
        sudo rcutrace callbacks --top 0 --by cpu\n  \
        sudo rcutrace callbacks --unit us -f json")]
    Callbacks(CallbacksArgs),
    /// Why grace periods are slow: each one taken apart into its phases (init, the wait for
    /// quiescent states, the kthread's wake-up, cleanup), with the CPU or blocked reader whose
    /// report ended the wait, what ran on that CPU and its kernel stack.
    #[command(after_help = "Examples:\n  \
        sudo rcutrace gp --secs 10\n  \
        sudo rcutrace gp --top 20 --unit us\n  \
        sudo rcutrace gp --interval 1 --secs 0\n  \
        sudo rcutrace -f json gp --secs 30 > gp.json\n  \
        sudo rcutrace gp --flavor srcu --secs 10\n  \
        sudo rcutrace gp --flavor tasks --secs 30\n  \
        sudo rcutrace gp --flavor trace --secs 10\n\n\
        Every hook but the quiescent-state report is a kprobe: the functions run in the\n\
        scheduler, the tick and RCU's core. The report is a trampoline where the kernel allows\n\
        (a kprobe is skipped inside another kprobe's handler).\n\n\
        With --flavor srcu, a histogram of SRCU grace periods' lengths per domain, from\n\
        srcu_gp_start() to the return of the grace-period work (process_srcu()) that ended\n\
        each, or to the run of its callbacks (srcu_invoke_callbacks()) if that came first;\n\
        with --flavor tasks, of tasks-RCU grace periods per flavour, each a call of the\n\
        flavour's wait function (rcu_tasks_wait_gp(), rcu_tasks_rude_wait_gp()); --flavor\n\
        rude and trace keep one tasks-RCU flavour. Since 7.0 tasks-trace RCU is SRCU: there\n\
        --flavor trace follows its domain, rcu_tasks_trace_srcu_struct, and says so. Beside\n\
        them, the flavour's waiters: each wait (synchronize_rcu_tasks*(), rcu_barrier_tasks*(),\n\
        synchronize_srcu*(), srcu_barrier()) timed by its caller's kernel stack, SRCU's by\n\
        domain too. All by kprobe.")]
    Gp(GpArgs),
    /// Watch for RCU stalls: warn, seconds before the kernel's own stall warning, when the
    /// grace period in progress grows old, naming the CPUs that have not reported a quiescent
    /// state (what runs there, its kernel stack), the blocked readers holding it up, and
    /// whether the grace-period kthread is starved. The expedited grace period in progress is
    /// watched too (its age). The kernel's own warning is reported too.
    #[command(after_help = "Examples:\n  \
        sudo rcutrace stall                         # until Ctrl-C or SIGTERM\n  \
        sudo rcutrace stall --warn-at 500ms --warn-at 2s\n  \
        sudo rcutrace stall --exit-on-warning --secs 3600 || echo \"stall: $?\"\n  \
        sudo rcutrace -f json stall >> /var/log/rcu-stalls.json\n  \
        sudo rcutrace stall --flavor tasks --flavor srcu --flavor-warn-at 5s\n\n\
        By default it warns at 1 s and at 25%, 50% and 75% of the kernel's rcu_cpu_stall_timeout\n\
        (/sys/module/rcupdate/parameters/), each once per grace period. With --flavor it watches\n\
        tasks-RCU or SRCU grace periods too (the kernel warns about a tasks-RCU one after 10\n\
        minutes, never about an SRCU one), warning at 2 s, 10 s and 60 s by default and naming\n\
        the holdout tasks (tasks RCU) or the CPUs of the readers that hold it (SRCU). Exit\n\
        status: 0 when stopped, 3 with --exit-on-warning at the first warning.")]
    Stall(StallArgs),
    /// Print a run saved with -f json as the text it printed, or compare two saved runs.
    #[command(after_help = "Examples:\n  \
        sudo rcutrace -f json srlat --secs 30 > normal.json\n  \
        rcutrace report normal.json                  # the text that run printed\n  \
        rcutrace report normal.json expedited.json   # what differs, and by how much\n  \
        rcutrace report a.json b.json --fail-if 'p99 > +20%' --fail-if 'mean > 2ms'\n  \
        rcutrace report stacks.json --flamegraph stacks.svg\n\n\
        Runs saved by bpftrace -f json print too, as far as their records allow.\n\
        With --fail-if, the exit status is 1 when a condition holds for run B (one line each\n\
        names the map, the key and both values), 0 when none does.")]
    Report(ReportArgs),
    /// Export RCU metrics for Prometheus: attach once, then serve /metrics in the OpenMetrics
    /// text format, from the live maps on every scrape, until SIGTERM or Ctrl-C.
    #[command(after_help = "Metrics (totals since rcutrace started):\n  \
        rcutrace_calls_total{function}                   every function of `count --all`\n  \
        rcutrace_grace_periods_total, rcutrace_readers_total\n  \
        rcutrace_grace_period_latency_nanoseconds        histogram, rcu_gp_init() to rcu_gp_cleanup()\n  \
        rcutrace_synchronize_latency_nanoseconds{function}\n                                                   \
        histogram, synchronize_rcu() and synchronize_rcu_expedited()\n  \
        rcutrace_probe_info{function,side,program,method}, rcutrace_kernel_skipped_total{function},\n  \
        rcutrace_lost_total{cause}, rcutrace_start_time_seconds\n  \
        rcutrace_grace_period_age_seconds, rcutrace_grace_period_holdout_cpus\n                                                   \
        the grace period in progress (0 and 0 while none is)\n  \
        rcutrace_expedited_grace_period_age_seconds      the expedited one's age (0 while none is)\n  \
        rcutrace_stall_warnings_total{source}             rcutrace (older than 1 s) and kernel\n  \
        rcutrace_flavor_grace_period_latency_nanoseconds{flavor,key}, \
        rcutrace_flavor_grace_period_phase_nanoseconds{flavor,key,phase},\n  \
        rcutrace_flavor_grace_period_age_seconds{flavor,key}\n                                                   \
        with --flavor: tasks RCU's and SRCU's grace periods\n\
        Histogram buckets are log2 bounds in nanoseconds: le=\"2^(k+1)-1\" holds every latency\n\
        below 2^(k+1) ns, as bpftrace's hist() bucket [2^k, 2^(k+1)) does.\n\n\
        Examples:\n  \
        sudo rcutrace serve                              # on 127.0.0.1:9750\n  \
        sudo rcutrace serve --listen 127.0.0.1:9750 --by cpu\n  \
        sudo rcutrace serve --flavor tasks --flavor srcu   # tasks RCU's and SRCU's too")]
    Serve(ServeArgs),
    /// A live full-screen view, refreshed every --interval: grace periods per second with
    /// their latency and the age of the one in progress, callbacks queued and invoked per
    /// second with each CPU's backlog (the largest first, as many as fit the line, the rest
    /// added up), the callback functions and the waiters
    /// (synchronize_rcu(), its expedited form, rcu_barrier()) with their latency, and readers
    /// per second, sampled. Keys: q quits, p pauses, s cycles the tables' sort.
    #[command(after_help = "Examples:
          sudo rcutrace top
          sudo rcutrace top --interval 2 --rows 20

        It needs a terminal; for scripts, use --interval with count, srlat, gplat or gp
        (rcutrace count --interval 1), which print each interval.")]
    Top(TopArgs),
}

#[derive(Debug, Args)]
pub struct TopArgs {
    /// Seconds between refreshes; every figure is of the last interval (per second).
    #[arg(long, default_value_t = 1, value_parser = parse_interval, value_name = "N", allow_negative_numbers = true)]
    pub interval: u64,
    /// Rows of each table.
    #[arg(long, default_value_t = 10, value_name = "N", value_parser = parse_top, allow_negative_numbers = true)]
    pub rows: usize,
    /// How the reader probe is sampled, as count --sample-readers: attached ON_MS of every
    /// PERIOD_MS, so that leaving top open costs little.
    #[arg(long, default_value = "100/1000", value_name = "ON_MS/PERIOD_MS")]
    pub sample_readers: ReaderSampling,
    /// How to hook kernel functions. Readers (__rcu_read_lock) are always kprobes.
    #[arg(long, value_enum, default_value_t = AttachChoice::Auto, value_name = "METHOD")]
    pub attach: AttachChoice,
}

#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Address and port to serve /metrics on.
    #[arg(long, default_value = "127.0.0.1:9750", value_name = "ADDR:PORT", value_parser = parse_listen)]
    pub listen: std::net::SocketAddr,
    /// Add a `cpu` label to every metric (the CPU each call was made on), or a `cgroup`
    /// label (the caller's cgroup v2 path, at most --top of them).
    #[arg(long, value_enum, value_name = "KEY")]
    pub by: Option<ServeBy>,
    /// With --by cgroup: the first N cgroups seen keep a label of their own for the whole
    /// run, later ones share cgroup="[other]" (so that no counter ever goes down; 0: all).
    #[arg(long, default_value_t = 20, value_name = "N", requires = "by", value_parser = parse_top, allow_negative_numbers = true)]
    pub top: usize,
    /// How to hook kernel functions. Readers (__rcu_read_lock) are always kprobes.
    #[arg(long, value_enum, default_value_t = AttachChoice::Auto, value_name = "METHOD")]
    pub attach: AttachChoice,
    /// Serve the grace periods of another flavour too, by flavour and key: tasks (every
    /// tasks-RCU flavour) or srcu (every SRCU domain, 7.x's tasks-trace RCU among them).
    /// Repeat for both.
    #[arg(long = "flavor", value_enum, value_name = "FLAVOR")]
    pub flavors: Vec<FollowedFlavor>,
}

/// What `serve` can key its metrics by.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum ServeBy {
    Cpu,
    Cgroup,
}

#[derive(Debug, Args)]
pub struct ReportArgs {
    /// A run saved with -f json; a second one to compare with the first (A, then B).
    #[arg(value_name = "FILE", num_args = 1..=2, required = true)]
    pub files: Vec<std::path::PathBuf>,
    /// Of a run saved with --interval, only its Nth interval (from 1). Without it a run prints
    /// every interval, and a comparison takes each run whole.
    #[arg(long, value_name = "N", value_parser = parse_interval_index, allow_negative_numbers = true)]
    pub interval_index: Option<u64>,
    /// With two runs: fail (exit status 1) where run B meets this condition, judged on every
    /// map and key both runs have: '[@MAP] STATISTIC OP VALUE', STATISTIC one of count, min,
    /// mean, max, p50, p90, p99, p99.9; OP >, >=, < or <=; VALUE a time with its unit (2ms),
    /// a count, or relative to run A (+20%, -10%). Repeat it for several.
    #[arg(long = "fail-if", value_name = "EXPR", allow_hyphen_values = true)]
    pub fail_if: Vec<crate::runs::gate::Condition>,
    /// With --fail-if: also write the verdicts to FILE as JUnit XML, one test case per
    /// condition and map or key, for CI systems to display.
    #[arg(long, value_name = "FILE", requires = "fail_if")]
    pub junit: Option<std::path::PathBuf>,
}

/// What every tracing command takes: how long to trace (`Length`) and how to hook the
/// kernel's functions; `gp` and `stall` choose their hooks themselves and take `Length` alone.
#[derive(Debug, Args)]
pub struct Common {
    #[command(flatten)]
    pub length: Length,
    /// How to hook kernel functions. Readers (__rcu_read_lock) are always kprobes.
    #[arg(long, value_enum, default_value_t = AttachChoice::Auto, value_name = "METHOD")]
    pub attach: AttachChoice,
}

/// How long to trace: `--secs`, or as long as `-c`'s command runs.
#[derive(Debug, Args)]
pub struct Length {
    /// Seconds to trace (0: until Ctrl-C). Ctrl-C always ends early and still prints.
    #[arg(long, default_value_t = 10, value_name = "N", value_parser = parse_secs, allow_negative_numbers = true)]
    pub secs: u64,
    /// Run CMD once tracing has begun, and trace until it exits, as bpftrace's -c does (CMD
    /// is split at spaces; sh -c '...' for more). srlat times only the calls of its process
    /// tree.
    #[arg(
        short = 'c',
        long = "command",
        value_name = "CMD",
        conflicts_with = "secs"
    )]
    pub command: Option<String>,
}

impl Length {
    /// `--secs` seconds, or `None`: until Ctrl-C (`--secs 0`) or until the command exits.
    pub fn duration(&self) -> Option<Duration> {
        (self.secs > 0 && self.command.is_none()).then(|| Duration::from_secs(self.secs))
    }

    /// `-c`'s command line.
    pub fn command(&self) -> Option<&str> {
        self.command.as_deref()
    }
}

/// Reporting over time, for the commands whose maps can be read while the probes run.
#[derive(Debug, Default, Args)]
pub struct OverTime {
    /// Print every N seconds, each time the time (HH:MM:SS) and what happened since the last
    /// print, as bpftrace's `interval:s:N { time(); print(@); clear(@); }`. The end of the
    /// window (--secs, or Ctrl-C) prints the last, possibly partial, interval.
    #[arg(long, value_parser = parse_interval, value_name = "N", allow_negative_numbers = true)]
    pub interval: Option<u64>,
    /// With --interval: print the totals since tracing started each time, not the interval's.
    #[arg(long, requires = "interval")]
    pub cumulative: bool,
}

impl OverTime {
    pub fn interval(&self) -> Option<Interval> {
        self.interval.map(|secs| Interval {
            every: Duration::from_secs(secs),
            cumulative: self.cumulative,
        })
    }
}

fn parse_interval(text: &str) -> Result<u64, String> {
    match whole_number(text) {
        Some(0) => Err("N must be at least 1 (whole seconds)".into()),
        Some(secs) => Ok(secs),
        None => Err(format!(
            "{text:?} is not a whole number of seconds; --interval takes 1 or more"
        )),
    }
}

/// `--user`: a name from the password database, or a uid.
fn parse_user(text: &str) -> Result<RunAs, String> {
    RunAs::named(text)
        .ok_or_else(|| "no such user in the password database (give its name, or a uid)".into())
}

/// A whole number as a user types one: digits only (no sign, no fraction).
fn whole_number(text: &str) -> Option<u64> {
    let text = text.trim();
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    text.parse().ok()
}

fn parse_secs(text: &str) -> Result<u64, String> {
    whole_number(text).ok_or_else(|| {
        format!(
            "{text:?} is not a whole number of seconds; --secs takes 0 or more (0: until Ctrl-C)"
        )
    })
}

fn parse_top(text: &str) -> Result<usize, String> {
    whole_number(text)
        .and_then(|n| usize::try_from(n).ok())
        .ok_or_else(|| format!("{text:?} is not a whole number; --top takes 0 or more (0: all)"))
}

/// `gp --top`, where 0 lists no grace period (not all of them).
fn parse_gp_top(text: &str) -> Result<usize, String> {
    whole_number(text)
        .and_then(|n| usize::try_from(n).ok())
        .ok_or_else(|| format!("{text:?} is not a whole number; --top takes 0 or more (0: none)"))
}

fn parse_interval_index(text: &str) -> Result<u64, String> {
    match whole_number(text) {
        Some(0) | None => Err(format!(
            "{text:?} is not an interval's number; --interval-index takes 1 or more (the first \
             interval is 1)"
        )),
        Some(index) => Ok(index),
    }
}

/// `ADDR:PORT`: a numeric address, or a host name that resolves (its first address).
fn parse_listen(text: &str) -> Result<std::net::SocketAddr, String> {
    use std::net::ToSocketAddrs as _;
    let accepted = "--listen takes ADDR:PORT, a numeric IP address and port (127.0.0.1:9750, \
                    [::1]:9750) or a host name that resolves, with a port (localhost:9750)";
    if let Ok(address) = text.trim().parse() {
        return Ok(address);
    }
    match text.trim().to_socket_addrs() {
        Ok(mut addresses) => addresses
            .next()
            .ok_or_else(|| format!("{text:?} resolves to no address; {accepted}")),
        Err(e) => Err(format!("{text:?}: {e}; {accepted}")),
    }
}

#[derive(Debug, Args)]
pub struct CountArgs {
    #[command(flatten)]
    pub common: Common,
    #[command(flatten)]
    pub over_time: OverTime,
    /// Count every RCU update-side function this kernel has (call_srcu, rcu_barrier,
    /// synchronize_rcu_tasks, the polling API, ...), not only the default seven.
    #[arg(long)]
    pub all: bool,
    #[command(flatten)]
    pub by: ByArgs,
    /// Attach the reader probe (__rcu_read_lock) only ON_MS of every PERIOD_MS, detached in
    /// between, and estimate the readers from what it counted, with a 95% margin: readers then
    /// cost a fraction of their usual overhead. The updater and grace-period counts stay exact.
    /// Each window starts counting 100 ms after its attach, at a random point of its period;
    /// ON_MS is at least 100 and PERIOD_MS at least ON_MS + 200, since every attach and detach
    /// waits for grace periods.
    #[arg(long, value_name = "ON_MS/PERIOD_MS", conflicts_with_all = ["by", "command"])]
    pub sample_readers: Option<ReaderSampling>,
}

/// Attribution options, shared by every command.
#[derive(Debug, Default, Args)]
pub struct ByArgs {
    /// Key every map by the caller's command name, process id, CPU, kernel stack or cgroup
    /// (v2, as its path below the cgroup mount; cgroup,comm and cgroup,pid add the caller),
    /// or by the SRCU domain called on (srcu: count then counts the SRCU functions, srlat
    /// takes it with --func synchronize_srcu and the other SRCU waits).
    #[arg(long, value_enum, value_name = "KEY")]
    pub by: Option<By>,
    /// With --by: keep the N largest keys of each map and fold the rest into one
    /// "[other: K keys]" entry, so totals stay exact (0: keep every key).
    #[arg(long, default_value_t = 20, value_name = "N", requires = "by", value_parser = parse_top, allow_negative_numbers = true)]
    pub top: usize,
}

#[derive(Debug, Args)]
pub struct CallbacksArgs {
    #[command(flatten)]
    pub common: Common,
    /// Rows and histograms to print, most queued first (0: all).
    #[arg(long, default_value_t = 10, value_name = "N", value_parser = parse_top, allow_negative_numbers = true)]
    pub top: usize,
    /// Also print per-CPU totals (callbacks queued, invoked and pending at exit, by CPU), or
    /// the callbacks queued by each cgroup (v2) of the queueing tasks.
    #[arg(long, value_enum, value_name = "KEY")]
    pub by: Option<CallbacksBy>,
    /// Unit of the latency histograms and table.
    #[arg(long, value_enum, default_value_t = Unit::Ms, value_name = "UNIT")]
    pub unit: Unit,
}

/// What `callbacks --by` breaks the totals down by.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum CallbacksBy {
    Cpu,
    /// Callbacks queued, by the queueing task's cgroup (v2) path.
    Cgroup,
    /// Callbacks queued by call_srcu(), by the SRCU domain (srcu_struct) they went to.
    Srcu,
}

#[derive(Debug, Args)]
pub struct LatencyArgs {
    #[command(flatten)]
    pub common: Common,
    #[command(flatten)]
    pub over_time: OverTime,
    /// Unit of the histogram [default: ms; us for srlat --expedited].
    #[arg(long, value_enum, value_name = "UNIT")]
    pub unit: Option<Unit>,
    /// Linear histogram instead of log2, as bpftrace's lhist(v, MIN, MAX, STEP).
    #[arg(long, value_parser = parse_linear, value_name = "MIN,MAX,STEP", conflicts_with = "buckets", allow_hyphen_values = true)]
    pub linear: Option<Linear>,
    /// Sparse exact buckets of width STEP, one line per non-empty bucket, no overflow bucket.
    #[arg(long, value_parser = parse_step, value_name = "STEP", allow_negative_numbers = true)]
    pub buckets: Option<u64>,
    #[command(flatten)]
    pub by: ByArgs,
}

/// Which RCU's grace periods `gp` takes apart.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Flavor {
    /// Normal RCU: each grace period's phases and holdouts.
    #[default]
    Normal,
    /// SRCU: each grace period's length, by domain (srcu_struct).
    Srcu,
    /// Tasks RCU: each grace period's length, by flavour (rcu_tasks, rcu_tasks_rude, and
    /// rcu_tasks_trace before 7.0, where it became SRCU).
    Tasks,
    /// Tasks-rude RCU alone (rcu_tasks_rude).
    Rude,
    /// Tasks-trace RCU alone: rcu_tasks_trace, or since 7.0 the SRCU domain it became
    /// (rcu_tasks_trace_srcu_struct).
    Trace,
}

#[derive(Debug, Args)]
pub struct GpArgs {
    /// The flavour of RCU whose grace periods to follow.
    #[arg(long, value_enum, default_value_t = Flavor::Normal, value_name = "FLAVOR")]
    pub flavor: Flavor,
    #[command(flatten)]
    pub length: Length,
    #[command(flatten)]
    pub over_time: OverTime,
    /// Unit of the histogram and the tables.
    #[arg(long, value_enum, default_value_t = Unit::Ms, value_name = "UNIT")]
    pub unit: Unit,
    /// The N slowest grace periods to list, each with its anatomy and its last holdout's
    /// stack (0: none); also the N CPUs that were last holdout most often, the rest summed on
    /// one line (-f json lists every CPU). With --flavor, the N stacks of each wait with the
    /// most calls, the rest folded into one (0: every stack).
    #[arg(long, default_value_t = 10, value_name = "N", value_parser = parse_gp_top, allow_negative_numbers = true)]
    pub top: usize,
    /// How to hook the functions that have a trampoline program (the kthread's milestones,
    /// the quiescent-state report); the others are always kprobes.
    #[arg(long, value_enum, default_value_t = AttachChoice::Auto, value_name = "METHOD")]
    pub attach: AttachChoice,
}

#[derive(Debug, Args)]
pub struct StallArgs {
    /// Seconds to watch (0: until Ctrl-C or SIGTERM).
    #[arg(long, default_value_t = 0, value_name = "N")]
    pub secs: u64,
    /// Warn when the grace period in progress is this old: a number with a unit, ms or s
    /// (500ms, 2s, 1.5s). Repeat it for several thresholds; it replaces the defaults.
    #[arg(long = "warn-at", value_parser = parse_threshold, value_name = "DURATION")]
    pub warn_at: Vec<Duration>,
    /// End at the first warning, with exit status 3 (for scripts).
    #[arg(long)]
    pub exit_on_warning: bool,
    /// Watch the grace periods of another flavour too: tasks (every tasks-RCU flavour) or
    /// srcu (every SRCU domain, 7.x's tasks-trace RCU among them). Repeat for both.
    #[arg(long = "flavor", value_enum, value_name = "FLAVOR")]
    pub flavors: Vec<FollowedFlavor>,
    /// Warn when a grace period of those flavours is this old: a number with a unit, ms or s.
    /// Repeat it for several thresholds; it replaces the defaults (2s, 10s, 60s).
    #[arg(long = "flavor-warn-at", value_parser = parse_threshold, value_name = "DURATION", requires = "flavors")]
    pub flavor_warn_at: Vec<Duration>,
}

/// The flavours `stall` and `serve` follow beside normal RCU, each as a whole.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum FollowedFlavor {
    /// Every tasks-RCU flavour (rcu_tasks, rcu_tasks_rude, and rcu_tasks_trace before 7.0).
    Tasks,
    /// Every SRCU domain.
    Srcu,
}

impl FollowedFlavor {
    pub fn flavor(self) -> Flavor {
        match self {
            FollowedFlavor::Tasks => Flavor::Tasks,
            FollowedFlavor::Srcu => Flavor::Srcu,
        }
    }
}

impl StallArgs {
    pub fn duration(&self) -> Option<Duration> {
        (self.secs > 0).then(|| Duration::from_secs(self.secs))
    }
}

/// A stall threshold: `500ms`, `2s`, `1.5s`; at least 10 ms.
pub fn parse_threshold(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let (number, scale) = if let Some(ms) = text.strip_suffix("ms") {
        (ms, 1e-3)
    } else if let Some(s) = text.strip_suffix('s') {
        (s, 1.0)
    } else {
        return Err(format!(
            "{text:?} has no unit: write it with ms or s, e.g. 500ms or 1.5s"
        ));
    };
    let value: f64 = number
        .trim()
        .parse()
        .map_err(|_| format!("{text:?} is not a number with ms or s, e.g. 500ms or 1.5s"))?;
    let secs = value * scale;
    if !(0.01..=86_400.0).contains(&secs) {
        return Err(format!("{text:?} is outside 10ms to 86400s"));
    }
    Ok(Duration::from_secs_f64(secs))
}

#[derive(Debug, Args)]
pub struct RunArgs {
    /// Also time this waiting RCU updater (repeatable), beside synchronize_rcu(),
    /// synchronize_rcu_expedited(), rcu_barrier(), synchronize_srcu(), synchronize_rcu_tasks(),
    /// synchronize_rcu_tasks_trace() and synchronize_net(); at most 8 in all.
    #[arg(long, value_parser = parse_waiting_function, value_name = "NAME")]
    pub func: Vec<&'static str>,
    /// Run the command as this user (a name or a uid) and its groups.
    #[arg(long, value_name = "USER", value_parser = parse_user)]
    pub user: Option<RunAs>,
    /// After the command exits, follow the work it queued until it is done, for at most this
    /// many seconds.
    #[arg(long, default_value_t = 10, value_name = "SECS")]
    pub linger: u64,
    /// Kernel stacks to print per function: the N with the most time waited, the rest summed
    /// on one line (0: all).
    #[arg(long, default_value_t = 10, value_name = "N")]
    pub top: usize,
    /// How to hook the waiting functions' returns (their entries are kprobes, for the stacks).
    #[arg(long, value_enum, default_value_t = AttachChoice::Auto, value_name = "METHOD")]
    pub attach: AttachChoice,
    /// The command and its arguments (after `--`, so that its options stay its own).
    #[arg(required = true, trailing_var_arg = true, value_name = "CMD")]
    pub command: Vec<std::ffi::OsString>,
}

#[derive(Debug, Args)]
pub struct SrlatArgs {
    #[command(flatten)]
    pub latency: LatencyArgs,
    /// Time synchronize_rcu_expedited() (short for --func synchronize_rcu_expedited).
    #[arg(long)]
    pub expedited: bool,
    /// Time this function instead of synchronize_rcu(): any RCU updater that blocks its
    /// caller (synchronize_*, rcu_barrier*, srcu_barrier, cond_synchronize_*, and
    /// synchronize_net). Repeat it for one histogram per function, in one run (at most 8).
    #[arg(long, value_parser = parse_waiting_function, value_name = "NAME")]
    pub func: Vec<&'static str>,
    /// Only calls made by this process (it must be running).
    #[arg(long, value_parser = parse_pid, value_name = "PID", allow_negative_numbers = true, conflicts_with = "command")]
    pub pid: Option<u32>,
    /// Take each synchronize_rcu() / synchronize_rcu_expedited() call apart: waiting for a
    /// grace period to start, the grace period, and from its end to the caller running
    /// again (its wakeme_after_rcu() callback and the wake-up); expedited: the funnel,
    /// selecting CPUs and their IPIs, waiting for their reports. Printed per stage under the
    /// histogram; with -f json, each call too.
    #[arg(long, conflicts_with = "by")]
    pub stages: bool,
}

/// A usage error clap did not find itself: status 2, with clap's usage line.
pub fn usage_error(message: &str) -> clap::Error {
    <Cli as clap::CommandFactory>::command().error(clap::error::ErrorKind::InvalidValue, message)
}

/// The functions `srlat --stages` can take apart.
pub const STAGED_FUNCTIONS: [&str; 2] = ["synchronize_rcu", "synchronize_rcu_expedited"];

/// Rules across a command and the global options, which clap cannot state.
pub fn check(cli: &Cli) -> Result<(), clap::Error> {
    let conflict = |message: &str| {
        <Cli as clap::CommandFactory>::command()
            .error(clap::error::ErrorKind::ArgumentConflict, message)
    };
    if let Command::Serve(_) = &cli.command {
        if cli.save.is_some() {
            return Err(conflict(
                "--save is for the commands that print a run (count, gplat, srlat, callbacks); \
                 serve answers scrapes and keeps no run",
            ));
        }
        if cli.format == Format::Json {
            return Err(conflict(
                "serve answers in the OpenMetrics text format only; -f json is for the commands \
                 that print a run",
            ));
        }
    }
    if let Command::Top(_) = &cli.command {
        use std::io::IsTerminal as _;
        if !(std::io::stdin().is_terminal() && std::io::stdout().is_terminal()) {
            return Err(<Cli as clap::CommandFactory>::command().error(
                clap::error::ErrorKind::InvalidValue,
                "top draws a live screen and needs a terminal (its stdin and stdout); for \
                 scripts, use --interval with count, srlat, gplat or gp, which print each \
                 interval (rcutrace count --interval 1)",
            ));
        }
        if cli.save.is_some() || cli.format == Format::Json {
            return Err(conflict(
                "top draws a live screen: --save and -f json are for the commands that print \
                 a run (with --interval, each interval)",
            ));
        }
    }
    if let Command::Srlat(args) = &cli.command {
        let mut functions: Vec<&str> = args.func.clone();
        if args.expedited {
            functions.push("synchronize_rcu_expedited");
        }
        functions.sort_unstable();
        functions.dedup();
        let most = rcutrace_common::latency::MAX_TIMED as usize;
        if functions.len() > most {
            return Err(conflict(&format!(
                "--func: at most {most} functions can be timed in one run ({} given)",
                functions.len()
            )));
        }
    }
    if cli.save.is_some() && matches!(cli.command, Command::Report(_)) {
        return Err(<Cli as clap::CommandFactory>::command().error(
            clap::error::ErrorKind::ArgumentConflict,
            "--save is for the commands that trace (count, gplat, srlat, callbacks); report reads saved runs",
        ));
    }
    if let Command::Srlat(args) = &cli.command
        && args.stages
        && let Some(other) = args.func.iter().find(|f| !STAGED_FUNCTIONS.contains(f))
    {
        return Err(<Cli as clap::CommandFactory>::command().error(
            clap::error::ErrorKind::ArgumentConflict,
            format!(
                "--stages takes apart {} only, not {other}",
                STAGED_FUNCTIONS.join(" and ")
            ),
        ));
    }
    check_by_srcu(cli)?;
    check_stacks(cli)?;
    if let Command::Gp(args) = &cli.command
        && args.flavor != Flavor::Normal
        && args.attach == AttachChoice::Fentry
    {
        return Err(conflict(
            "gp's flavours other than normal hook by kprobe only (a trampoline's attach and detach \
             wait for tasks-RCU grace periods, and on 7.x tasks-trace RCU is SRCU): --attach \
             takes auto or kprobe with them",
        ));
    }
    if let Command::Report(args) = &cli.command
        && args.files.len() < 2
        && !args.fail_if.is_empty()
    {
        return Err(conflict(
            "--fail-if judges run B against run A: give two saved runs (report A B --fail-if ...)",
        ));
    }
    if let Command::Report(args) = &cli.command
        && args.files.len() == 2
        && cli.format == Format::Json
    {
        return Err(<Cli as clap::CommandFactory>::command().error(
            clap::error::ErrorKind::ArgumentConflict,
            "a comparison of two runs prints as text only; -f json takes one saved run",
        ));
    }
    Ok(())
}

/// `--by srcu` keys calls on an SRCU domain: srlat takes it for SRCU waits alone, gplat (which
/// times normal RCU's grace periods) not at all.
fn check_by_srcu(cli: &Cli) -> Result<(), clap::Error> {
    let srcu_waits = || {
        probes::waiting_functions()
            .filter(|f| crate::model::attribution::takes_srcu_domain(f))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let message = match &cli.command {
        Command::Gplat(args) if args.by.by == Some(By::Srcu) => format!(
            "--by srcu keys calls by the SRCU domain they are on; gplat times normal RCU's grace \
             periods (srlat --func {} --by srcu times SRCU's waits)",
            srcu_waits()
        ),
        Command::Srlat(args) if args.latency.by.by == Some(By::Srcu) => {
            let not_srcu = match (args.func.as_slice(), args.expedited) {
                (_, true) => Some("synchronize_rcu_expedited"),
                ([], false) => Some("synchronize_rcu"),
                (functions, false) => functions
                    .iter()
                    .copied()
                    .find(|f| !crate::model::attribution::takes_srcu_domain(f)),
            };
            match not_srcu {
                Some(function) => format!(
                    "--by srcu keys waits by the SRCU domain they wait on, and {function} waits \
                     on none: time SRCU's waits with --func ({})",
                    srcu_waits()
                ),
                None => return Ok(()),
            }
        }
        _ => return Ok(()),
    };
    Err(<Cli as clap::CommandFactory>::command()
        .error(clap::error::ErrorKind::ArgumentConflict, message))
}

/// `-f folded` and `--flamegraph` need a run with kernel stacks: `--by stack`, or `gp`.
fn check_stacks(cli: &Cli) -> Result<(), clap::Error> {
    let asked = match (cli.format == Format::Folded, &cli.flamegraph) {
        (true, _) => "-f folded",
        (false, Some(_)) => "--flamegraph",
        (false, None) => return Ok(()),
    };
    let conflict = |message: String| {
        <Cli as clap::CommandFactory>::command()
            .error(clap::error::ErrorKind::ArgumentConflict, message)
    };
    let interval_free = |over_time: &OverTime| match over_time.interval {
        Some(_) => Err(conflict(format!(
            "{asked} draws the stacks of the whole window: it takes no --interval"
        ))),
        None => Ok(()),
    };
    let needs_by_stack = |by: &ByArgs, over_time: &OverTime| {
        if by.by != Some(By::Stack) {
            return Err(conflict(format!(
                "{asked} draws kernel stacks: it needs --by stack (count, srlat and gplat take \
                 it; gp has its holdouts' stacks)"
            )));
        }
        interval_free(over_time)
    };
    match &cli.command {
        Command::Count(args) => needs_by_stack(&args.by, &args.over_time),
        Command::Gplat(args) => needs_by_stack(&args.by, &args.over_time),
        Command::Srlat(args) => needs_by_stack(&args.latency.by, &args.latency.over_time),
        Command::Gp(args) => interval_free(&args.over_time),
        Command::Run(_) => Ok(()),
        Command::Report(args) if args.files.len() == 2 => Err(conflict(format!(
            "{asked} draws one run's stacks; a comparison of two runs prints as text only"
        ))),
        Command::Report(_) => Ok(()),
        Command::Callbacks(_) | Command::Stall(_) | Command::Serve(_) | Command::Top(_) => {
            Err(conflict(format!(
                "{asked} draws kernel stacks, which only count, srlat and gplat (with --by stack) \
             and gp record"
            )))
        }
    }
}

/// `MIN,MAX,STEP` with bpftrace's rules for lhist().
pub fn parse_linear(text: &str) -> Result<Linear, String> {
    let parts: Vec<&str> = text.split(',').map(str::trim).collect();
    let [min, max, step] = parts[..] else {
        return Err(format!(
            "expected MIN,MAX,STEP (three integers, e.g. 0,1000,100), got {text:?}"
        ));
    };
    let number = |name: &str, s: &str| -> Result<u64, String> {
        whole_number(s).ok_or_else(|| {
            format!(
                "{name} {s:?} in {text:?} is not a whole number; MIN, MAX and STEP are 0 or \
                 more (lhist() has no negative buckets)"
            )
        })
    };
    let linear = Linear {
        min: number("MIN", min)?,
        max: number("MAX", max)?,
        step: number("STEP", step)?,
    };
    if linear.step == 0 {
        return Err("STEP must be at least 1".into());
    }
    if linear.min >= linear.max {
        return Err(format!(
            "MIN ({}) must be less than MAX ({})",
            linear.min, linear.max
        ));
    }
    if linear.step > linear.max - linear.min {
        return Err(format!(
            "STEP ({}) must not exceed MAX - MIN ({})",
            linear.step,
            linear.max - linear.min
        ));
    }
    if linear.buckets() > 1000 {
        return Err(format!(
            "(MAX - MIN) / STEP is {}, at most 1000 buckets are allowed",
            linear.buckets()
        ));
    }
    Ok(linear)
}

/// A function of the probe table that blocks its caller.
fn parse_waiting_function(text: &str) -> Result<&'static str, String> {
    probes::waiting_functions()
        .find(|f| *f == text.trim())
        .ok_or_else(|| {
            let accepted: Vec<&str> = probes::waiting_functions().collect();
            format!(
                "{text:?} is not an RCU function that makes its caller wait; accepted: {}",
                accepted.join(", ")
            )
        })
}

/// A process id of a running process: tracing one that does not exist would print an empty
/// histogram after the whole window, with no word of why.
fn parse_pid(text: &str) -> Result<u32, String> {
    let pid = match whole_number(text).map(u32::try_from) {
        Some(Ok(0)) => return Err("PID must be at least 1".into()),
        Some(Ok(pid)) => pid,
        _ => {
            return Err(format!(
                "{text:?} is not a process id; --pid takes the id of a running process, a \
                 whole number from 1"
            ));
        }
    };
    if !crate::kernel::task_exists(pid) {
        return Err(format!("no process {pid} is running"));
    }
    Ok(pid)
}

fn parse_step(text: &str) -> Result<u64, String> {
    match whole_number(text) {
        Some(0) => Err("STEP must be at least 1".into()),
        Some(step) => Ok(step),
        None => Err(format!(
            "STEP {text:?} is not a whole number; --buckets takes 1 or more"
        )),
    }
}

#[cfg(test)]
mod tests;

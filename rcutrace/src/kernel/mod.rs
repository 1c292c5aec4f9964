//! Facts about the running kernel and this process that decide what can be traced: here, its
//! functions (kallsyms; `symbol_lookup` asks the kernel for addresses by name), privileges
//! and tasks; `btf` reads the kernel's own type information,
//! `misses` and `kprobe_table` the probe hits it skipped, `rcu_tree` its tree of `rcu_node`s
//! (`expedited_holdouts`: what an expedited grace period still waits for), `grace_counters`
//! how many grace periods of each flavour have ended, `srcu_layout` where SRCU keeps its grace
//! periods, `tasks_holdouts` where tasks RCU lists the tasks it waits for,
//! `symbols` names its addresses (`bpf_programs`: the BPF programs loaded, which kallsyms
//! lists without lengths), `cgroups` its cgroups,
//! and `environment` records what a run ran on.

pub mod blocked_tasks;
pub mod bpf_programs;
pub mod btf;
pub mod callback_lists;
pub mod cgroups;
pub mod environment;
pub mod expedited_holdouts;
pub mod grace_counters;
pub mod kcore;
pub mod kprobe_table;
pub mod misses;
pub mod rcu_state;
pub mod rcu_tree;
pub mod srcu_layout;
pub mod symbol_lookup;
pub mod symbols;
pub mod tasks_holdouts;
pub mod tracefs;

use std::{
    collections::{HashMap, HashSet},
    fs::File,
    io::{BufRead, BufReader},
    path::Path,
    sync::OnceLock,
};

use anyhow::{Context as _, Result, bail};
use rcutrace_common::latency::TASKS_RCU_KTHREADS;

/// Which of `wanted` this kernel has: functions in /proc/kallsyms (text symbols only), and
/// tracepoints (`category:name`) in tracefs.
pub fn functions_present(wanted: &[&str]) -> Result<HashSet<String>> {
    let mut present: HashSet<String> = wanted
        .iter()
        .filter(|name| {
            name.split_once(':').is_some_and(|(category, event)| {
                ["/sys/kernel/tracing", "/sys/kernel/debug/tracing"]
                    .iter()
                    .any(|root| Path::new(&format!("{root}/events/{category}/{event}")).exists())
            })
        })
        .map(|name| name.to_string())
        .collect();
    scan_kallsyms(|symbol| {
        if let Some(name) = text_symbol(symbol)
            && wanted.contains(&name)
        {
            present.insert(name.to_string());
        }
        true
    })?;
    Ok(present)
}

/// The addresses of the kernel's own symbols among `wanted` (text or data), asked of the
/// kernel (`symbol_lookup`), or where it will not answer so, from one pass over
/// /proc/kallsyms; a symbol whose address kptr_restrict hides is left out. The first address
/// of a name wins (a static function may have several copies). The kernel's answer falls
/// back to a module's symbol for a name the kernel proper lacks: the names asked for here are
/// the kernel's own.
pub fn kernel_symbols(wanted: &[&str]) -> Result<HashMap<String, u64>> {
    match symbol_lookup::addresses(wanted) {
        Ok(found) => return Ok(found),
        Err(error) => {
            log::debug!("asking the kernel for symbols: {error:#}; reading /proc/kallsyms")
        }
    }
    let mut found = HashMap::new();
    // Each line is cut once: under emulation the parsing of 200,000 lines is a second of CPU
    // if done once for each name.
    scan_kallsyms(|line| {
        if let Some((name, address)) = own_symbol(line)
            && wanted.contains(&name)
            && !found.contains_key(name)
            && let Some(address) = address.parse().filter(|&a| a != 0)
        {
            found.insert(name.to_string(), address);
        }
        found.len() < wanted.len()
    })?;
    Ok(found)
}

/// A function only a kernel with kprobe-multi links has: they are built on fprobes, and the
/// kernel refuses them where it has none (CONFIG_FPROBE unset, as in Debian's 6.1).
const KPROBE_MULTI_MARK: &str = "register_fprobe_ips";

/// Whether this kernel has kprobe-multi links (from the start's symbols).
pub fn has_kprobe_multi() -> bool {
    start_symbols().is_ok_and(|symbols| symbols.contains_key(KPROBE_MULTI_MARK))
}

/// The kernel's own symbols a trace's start looks up, wherever it does: `rcu_state` and the
/// tree's size (RCU's layout, for `gp` and `stall`), the kprobe table's (the hits the kernel
/// skipped), the grace-period counters' (what rcutrace's own detaching waited for) and the
/// mark of kprobe-multi links.
fn start_symbol_names() -> Vec<&'static str> {
    let mut names = vec!["rcu_state", KPROBE_MULTI_MARK];
    names.extend(rcu_tree::VARIABLES);
    names.extend(kprobe_table::SYMBOLS);
    names.extend(grace_counters::SYMBOLS);
    names.extend(START_FUNCTIONS.get().into_iter().flatten());
    names.sort_unstable();
    names.dedup();
    names
}

/// Functions the start's lookup also asks about (`look_up_at_start`).
static START_FUNCTIONS: OnceLock<Vec<&'static str>> = OnceLock::new();

/// Has the start's one lookup also ask about `functions`: those the run may put on
/// kprobe-multi links, whose presence the link's attach checks (`start_symbols_covering`),
/// which spares it a lookup of its own (a program loaded, run and freed). Without effect
/// once the start's symbols were looked up (`gp` and `stall` look them up before they
/// load; they put nothing on kprobe-multi links). The first call's functions are kept: a
/// run asks about one set of probes.
pub fn look_up_at_start(functions: Vec<&'static str>) {
    let _ = START_FUNCTIONS.set(functions);
}

/// The start's symbols, if its lookup asked about every one of `functions` (a function it
/// did not find is then one this kernel lacks); `None` if it did not, or failed.
pub fn start_symbols_covering(functions: &[&str]) -> Option<&'static HashMap<String, u64>> {
    let (asked, found) = start_lookup();
    let found = found.as_ref().ok()?;
    covers(asked, functions).then_some(found)
}

/// Whether the names `asked` include every one of `functions`.
fn covers(asked: &[&str], functions: &[&str]) -> bool {
    functions.iter().all(|function| asked.contains(function))
}

/// The addresses of the start's symbols (`start_symbol_names`) this kernel has, from one
/// lookup that every asker shares (`kernel_symbols`: where the kernel will not be asked, a
/// pass over /proc/kallsyms, which makes it format every symbol up to the last one wanted,
/// 0.4 s of an emulated guest's CPU on 7.3). A symbol whose address kptr_restrict hides is
/// left out.
pub fn start_symbols() -> std::result::Result<&'static HashMap<String, u64>, String> {
    start_lookup().1.as_ref().map_err(Clone::clone)
}

/// The names the start's lookup asked about, and what it found (`start_symbols`).
type StartLookup = (
    Vec<&'static str>,
    std::result::Result<HashMap<String, u64>, String>,
);

fn start_lookup() -> &'static StartLookup {
    static PASS: OnceLock<StartLookup> = OnceLock::new();
    PASS.get_or_init(|| {
        let names = start_symbol_names();
        let found = kernel_symbols(&names).map_err(|e| format!("{e:#}"));
        if let Ok(found) = &found {
            crate::marks::mark(format_args!(
                "the start's symbols found ({} of {})",
                found.len(),
                names.len()
            ));
            log::debug!("the start's symbols: {found:x?}");
        }
        (names, found)
    })
}

/// The addresses of kernel variables `names`, each if the kernel gives it (`kernel_symbols`).
pub fn variable_addresses<const N: usize>(names: [&str; N]) -> Result<[Option<u64>; N]> {
    let found = kernel_symbols(&names)?;
    Ok(names.map(|name| found.get(name).copied()))
}

/// Hands each line of /proc/kallsyms to `visit` until it returns false. The lines are read
/// into one buffer: there are a few hundred thousand.
fn scan_kallsyms(mut visit: impl FnMut(&str) -> bool) -> Result<()> {
    let file = File::open("/proc/kallsyms").context("opening /proc/kallsyms")?;
    let mut kallsyms = BufReader::with_capacity(64 * 1024, file);
    let mut line = Vec::new();
    loop {
        line.clear();
        let read = kallsyms
            .read_until(b'\n', &mut line)
            .context("reading /proc/kallsyms")?;
        if read == 0 {
            return Ok(());
        }
        if let Ok(symbol) = std::str::from_utf8(&line)
            && !visit(symbol)
        {
            return Ok(());
        }
    }
}

/// The name in a kallsyms line `ADDRESS TYPE NAME [MODULE]` if it is a text symbol.
fn text_symbol(line: &str) -> Option<&str> {
    let mut fields = line.split_whitespace();
    let _address = fields.next()?;
    let kind = fields.next()?;
    let name = fields.next()?;
    matches!(kind, "t" | "T").then_some(name)
}

/// The address in a kallsyms line if it is the kernel's own symbol `wanted` (how
/// `kernel_symbols` reads a line, for its tests).
#[cfg(test)]
fn data_symbol(line: &str, wanted: &str) -> Option<u64> {
    own_symbol(line).and_then(|(name, address)| (name == wanted).then(|| address.parse()))?
}

/// The name in a kallsyms line `ADDRESS TYPE NAME [MODULE]`, and its address still to be
/// parsed, if it is a defined symbol of the kernel proper. Its type letter is not checked
/// further: kallsyms guesses it from the section, and Debian's 7.3 lists the variable
/// `rcu_state` as `t`.
fn own_symbol(line: &str) -> Option<(&str, KallsymsAddress<'_>)> {
    // Cut at kallsyms' own separators (`%px %c %s\t[%s]`), not by splitting on whitespace
    // char by char: a pass sees every line, and under emulation that was most of its CPU.
    let line = line.trim_end_matches('\n');
    let address_end = memchr::memchr(b' ', line.as_bytes())?;
    let (address, rest) = (&line[..address_end], &line[address_end + 1..]);
    let (kind, name) = rest.split_once(' ')?;
    let defined = !matches!(kind, "U" | "u" | "w" | "W" | "v" | "V");
    let in_module = name.contains('\t');
    (!in_module && defined && !name.is_empty()).then_some((name, KallsymsAddress(address)))
}

/// A symbol's address as kallsyms writes it: parsed only for the symbols wanted, since a
/// pass sees a few hundred thousand.
struct KallsymsAddress<'a>(&'a str);

impl KallsymsAddress<'_> {
    fn parse(&self) -> Option<u64> {
        u64::from_str_radix(self.0, 16).ok()
    }
}

/// How many CPUs this kernel can have (the highest possible CPU's number, plus one).
pub fn possible_cpus() -> Result<u32> {
    const POSSIBLE: &str = "/sys/devices/system/cpu/possible";
    let list = std::fs::read_to_string(POSSIBLE).with_context(|| format!("reading {POSSIBLE}"))?;
    highest_in_cpu_list(&list)
        .map(|highest| highest + 1)
        .with_context(|| format!("{POSSIBLE} is not a CPU list: {list:?}"))
}

/// The CPUs online now.
pub fn online_cpus() -> Result<Vec<u32>> {
    const ONLINE: &str = "/sys/devices/system/cpu/online";
    let list = std::fs::read_to_string(ONLINE).with_context(|| format!("reading {ONLINE}"))?;
    crate::model::tree::parse_cpu_list(&list)
        .with_context(|| format!("{ONLINE} is not a CPU list: {list:?}"))
}

/// The highest CPU of a kernel CPU list such as `0-3,8-11`.
fn highest_in_cpu_list(list: &str) -> Option<u32> {
    let mut highest = None;
    for range in list.trim().split(',') {
        let last = range.rsplit('-').next()?.parse::<u32>().ok()?;
        highest = Some(highest.map_or(last, |h: u32| h.max(last)));
    }
    highest
}

/// Returns once every eBPF program that may have started before now has finished.
///
/// rcutrace's programs run inside RCU read-side critical sections (kprobe handlers with
/// preemption off, trampolines under `rcu_read_lock()`), so one grace period is enough; the
/// global membarrier command waits for exactly one. Its `synchronize_rcu()` is rcutrace's
/// own, which the programs ignore.
pub fn wait_for_programs() -> Result<()> {
    const MEMBARRIER_CMD_GLOBAL: libc::c_long = 1;
    // SAFETY: membarrier takes two integers and touches no memory of ours.
    let result = unsafe { libc::syscall(libc::SYS_membarrier, MEMBARRIER_CMD_GLOBAL, 0, 0) };
    if result != 0 {
        // Without membarrier (or on one CPU, where it returns at once), give a program that
        // was preempted mid-way time to finish.
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    Ok(())
}

/// CLOCK_MONOTONIC now, in ns: the clock eBPF programs stamp events with
/// (`bpf_ktime_get_ns()`).
pub fn monotonic_ns() -> u64 {
    let mut now = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes the timespec we own.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut now) };
    now.tv_sec as u64 * 1_000_000_000 + now.tv_nsec as u64
}

/// The local time now as bpftrace's `time()` prints it by default (`%H:%M:%S`).
pub fn local_time() -> String {
    // SAFETY: time() with a null pointer only returns the time; localtime_r fills the tm we
    // own, or returns null and leaves it alone.
    let now = unsafe { libc::time(std::ptr::null_mut()) };
    let mut tm: libc::tm = unsafe { std::mem::zeroed() };
    if unsafe { libc::localtime_r(&now, &mut tm) }.is_null() {
        // No usable time zone: UTC.
        let of_day = now.rem_euclid(86_400);
        return format!(
            "{:02}:{:02}:{:02}",
            of_day / 3600,
            of_day / 60 % 60,
            of_day % 60
        );
    }
    format!("{:02}:{:02}:{:02}", tm.tm_hour, tm.tm_min, tm.tm_sec)
}

/// Whether process or thread `pid` exists now (/proc/TID works for any thread).
pub fn task_exists(pid: u32) -> bool {
    std::path::Path::new(&format!("/proc/{pid}")).exists()
}

/// The pids of the tasks-RCU kthreads (`rcu_tasks_kthread`, `rcu_tasks_rude_kthread`,
/// `rcu_tasks_trace_kthread`; their names are cut to 15 characters), 0 where there are fewer.
/// Kernel threads are told from processes that took such a name by their empty command line.
pub fn tasks_rcu_kthreads() -> [u32; TASKS_RCU_KTHREADS] {
    let mut pids = [0; TASKS_RCU_KTHREADS];
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return pids;
    };
    let found = entries
        .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            let read = |file: &str| std::fs::read(format!("/proc/{pid}/{file}")).ok();
            read("comm").is_some_and(|comm| comm.starts_with(b"rcu_tasks_"))
                && read("cmdline").is_some_and(|cmdline| cmdline.is_empty())
        });
    for (slot, pid) in pids.iter_mut().zip(found) {
        *slot = pid;
    }
    pids
}

const CAP_SYS_ADMIN: u32 = 21;
const CAP_PERFMON: u32 = 38;
const CAP_BPF: u32 = 39;

/// Fails with an explanation unless this process may load tracing programs.
pub fn check_privileges() -> Result<()> {
    let status =
        std::fs::read_to_string("/proc/self/status").context("reading /proc/self/status")?;
    let effective =
        effective_capabilities(&status).context("no CapEff line in /proc/self/status")?;
    if may_trace(effective) {
        return Ok(());
    }
    bail!(
        "rcutrace needs root: loading and attaching tracing programs requires the capabilities \
         CAP_BPF and CAP_PERFMON (or CAP_SYS_ADMIN), and this process has neither; \
         run it with sudo"
    )
}

fn effective_capabilities(status: &str) -> Option<u64> {
    let hex = status
        .lines()
        .find_map(|line| line.strip_prefix("CapEff:"))?
        .trim();
    u64::from_str_radix(hex, 16).ok()
}

fn may_trace(caps: u64) -> bool {
    let has = |cap: u32| caps & (1 << cap) != 0;
    has(CAP_SYS_ADMIN) || (has(CAP_BPF) && has(CAP_PERFMON))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_start_lookup_covers_only_functions_it_asked_about() {
        let asked = ["call_rcu", "rcu_state", "synchronize_rcu"];
        assert!(covers(&asked, &["call_rcu", "synchronize_rcu"]));
        assert!(covers(&asked, &[]));
        // One function not asked about: its absence from the answer would say nothing.
        assert!(!covers(&asked, &["call_rcu", "kvfree_call_rcu"]));
    }

    #[test]
    fn kallsyms_lines() {
        assert_eq!(text_symbol("ffffffff81123450 T call_rcu"), Some("call_rcu"));
        assert_eq!(
            text_symbol("ffffffff81123450 t rcu_gp_kthread"),
            Some("rcu_gp_kthread")
        );
        assert_eq!(text_symbol("ffffffff82000000 D rcu_state"), None);
        assert_eq!(text_symbol("ffffffffc0001000 t foo\t[ext4]"), Some("foo"));
        assert_eq!(text_symbol("garbage"), None);
    }

    /// The start's pass stops once it has found as many symbols as it asks for: each name is
    /// asked for once (`rcu_state` is both RCU's layout and a grace-period counter).
    #[test]
    fn the_starts_symbols_are_sorted_and_each_named_once() {
        let names = start_symbol_names();
        assert!(names.windows(2).all(|pair| pair[0] < pair[1]), "{names:?}");
        for name in [
            "rcu_state",
            "rcu_num_nodes",
            "kprobe_table",
            "rcu_tasks_rude",
        ] {
            assert!(names.binary_search(&name).is_ok(), "{name} in {names:?}");
        }
    }

    #[test]
    fn kernel_variables_in_kallsyms() {
        let line = "ffffffff82a4b8c0 d rcu_state";
        assert_eq!(data_symbol(line, "rcu_state"), Some(0xffff_ffff_82a4_b8c0));
        assert_eq!(
            data_symbol("ffffffff82a4b8c0 b rcu_state", "rcu_state"),
            Some(0xffff_ffff_82a4_b8c0)
        );
        // 7.3 lists the variable as text.
        assert_eq!(
            data_symbol("ffffffff8b50f300 t rcu_state", "rcu_state"),
            Some(0xffff_ffff_8b50_f300)
        );
        assert_eq!(
            data_symbol("0000000000000000 U rcu_state", "rcu_state"),
            None
        );
        assert_eq!(
            data_symbol("ffffffffc0001000 d rcu_state\t[mod]", "rcu_state"),
            None
        );
        assert_eq!(data_symbol(line, "rcu_stat"), None);
        // As read from the file, with its newline.
        assert_eq!(
            data_symbol("ffffffff82a4b8c0 d rcu_state\n", "rcu_state"),
            Some(0xffff_ffff_82a4_b8c0)
        );
        assert_eq!(
            data_symbol("ffffffffc0001000 d rcu_state\t[mod]\n", "rcu_state"),
            None
        );
        assert_eq!(data_symbol("garbage\n", "garbage"), None);
    }

    #[test]
    fn cpu_lists() {
        assert_eq!(highest_in_cpu_list("0-1\n"), Some(1));
        assert_eq!(highest_in_cpu_list("0"), Some(0));
        assert_eq!(highest_in_cpu_list("0-3,8-11"), Some(11));
        assert_eq!(highest_in_cpu_list(""), None);
        assert_eq!(highest_in_cpu_list("x"), None);
    }

    #[test]
    fn capabilities() {
        let status = "Name:\tx\nCapEff:\t000001ffffffffff\n";
        assert_eq!(effective_capabilities(status), Some(0x1ff_ffff_ffff));
        assert!(may_trace(0x1ff_ffff_ffff));
        assert!(may_trace(1 << CAP_SYS_ADMIN));
        assert!(may_trace((1 << CAP_BPF) | (1 << CAP_PERFMON)));
        assert!(!may_trace(1 << CAP_BPF));
        assert!(!may_trace(0));
    }
}

//! Guest-side load generator with known RCU effects, for rcutrace's VM runs and tests.

use std::io;
use std::process::exit;
use std::time::{Duration, Instant};

use xtask::guest::{online_cpus, sys_getppid, sys_membarrier_global};

const USAGE: &str = "\
rcu-workload: drives known amounts of RCU activity in the running kernel

USAGE:
    rcu-workload getppid N       make exactly N getppid() syscalls (each takes rcu_read_lock();
                                 on Debian 6.1 and 6.12 that is two __rcu_read_lock() calls)
    rcu-workload paced-getppid N MS COUNT
                                 COUNT batches of N getppid() calls, one batch every MS
                                 milliseconds on a fixed schedule: readers at a rate that a
                                 tracer's cost does not change while the batches fit
    rcu-workload membarrier N    make exactly N membarrier(MEMBARRIER_CMD_GLOBAL) syscalls
                                 (one synchronize_rcu() each when more than one CPU is online)
    rcu-workload membarrier-threads T N
                                 the same from T threads released at once, N calls each
    rcu-workload bursts B N MS   B bursts of N membarrier calls each, MS milliseconds apart, in
                                 this one process (known counts spread over time)
    rcu-workload netns N         create and drop N network namespaces, one after the other,
                                 each in a child of its own (the kernel tears each down
                                 later, in its cleanup_net worker)
    rcu-workload background      run a mixed RCU load until killed
    rcu-workload module OP N [ARG]
                                 have the test module (rcutrace_test.ko, loaded) perform OP N
                                 times in this process, e.g. `module call_rcu 300`; its ops
                                 are listed by `cat /proc/rcutrace_test`
    rcu-workload starve-kthread NAME CPU MS
                                 pin the kernel thread NAME (e.g. rcu_preempt) to CPU, then
                                 busy-loop there as SCHED_FIFO 99 for MS milliseconds, so that
                                 the thread cannot run (with RT throttling off:
                                 /proc/sys/kernel/sched_rt_runtime_us = -1); the thread's
                                 affinity is restored after
    rcu-workload bpf-readers N   take N RCU readers inside a BPF program of its own (a socket
                                 filter named `rcu_readers`, run N times by BPF_PROG_TEST_RUN,
                                 walking an empty one-bucket hash map with
                                 bpf_for_each_map_elem()), keep it loaded until standard
                                 input closes, and unload it by exiting
    rcu-workload --help          show this text

The counting subcommands print `getppid: N` or `membarrier: N` when done; `membarrier` also
prints `slowest_ns: T`, the longest single call as user space timed it, then `elapsed_ns: T`
and `cpu_ns: T`, the calls' wall time and this thread's CPU time over them (bursts and pauses
included). `module` prints
`pid: P` before it starts, then `done: N` and `elapsed_ns: T` (the whole request).
`netns` prints `netns: N` and `elapsed_ns: T` (the whole loop).
`starve-kthread` prints `kthread: PID` once it spins, `starved_ns: T` when done. `bpf-readers`
prints `pid: P`, then `bpf_prog: rcu_readers` once loaded and `readers: N` once run.
`background` mixes bursts of getppid (readers), short-lived child processes, socket, pipe and
epoll open/close (call_rcu and kvfree_call_rcu updaters), a few membarrier calls per second
(synchronize_rcu, grace periods), as many down/up bounces of `lo` (synchronize_net() under
RTNL: synchronize_rcu_expedited) and as many short-lived network namespaces (their teardown
in the kernel's cleanup_net worker waits in rcu_barrier() and synchronize_rcu()). It sleeps
between bursts, leaving most of the CPUs free.
Meant for a throwaway VM: it takes the loopback interface down and up.

EXAMPLES:
    rcu-workload getppid 100000
    rcu-workload membarrier 80
    rcu-workload module synchronize_srcu 20
    rcu-workload module call_rcu_delayed 100 20
    rcu-workload background & pid=$!; sleep 5; kill $pid
";

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    match args.as_slice() {
        ["-h" | "--help" | "help"] => print!("{USAGE}"),
        ["getppid", n] => getppid(count(n)),
        ["paced-getppid", n, ms, batches] => paced_getppid(count(n), count(ms), count(batches)),
        ["paced-getppid", ..] => usage_error("`paced-getppid` needs N, MS and COUNT"),
        ["membarrier", n] => membarrier(1, count(n), Duration::ZERO),
        ["bursts", b, n, ms] => membarrier(count(b), count(n), Duration::from_millis(count(ms))),
        ["membarrier-threads", t, n] => membarrier_threads(count(t), count(n)),
        ["background"] => background(),
        ["netns", n] => netns(count(n)),
        ["module", op, n] => module(op, count(n), None),
        ["module", op, n, arg] => module(op, count(n), Some(count(arg))),
        ["starve-kthread", name, cpu, ms] => starve_kthread(name, count(cpu), count(ms)),
        ["starve-kthread", ..] => usage_error("`starve-kthread` needs NAME, CPU and MS"),
        ["bpf-readers", n] => bpf_readers(count(n)),
        ["bpf-readers", ..] => usage_error("`bpf-readers` needs a count N"),
        [] => usage_error("missing subcommand"),
        [cmd @ ("getppid" | "membarrier" | "netns")] => {
            usage_error(&format!("`{cmd}` needs a count N"))
        }
        ["bursts", ..] => usage_error("`bursts` needs B, N and MS"),
        ["membarrier-threads", ..] => {
            usage_error("`membarrier-threads` needs T threads and N calls")
        }
        ["module", ..] => usage_error("`module` needs an op and a count N, then an optional ARG"),
        [cmd, ..] if ["getppid", "membarrier", "netns", "background"].contains(cmd) => {
            usage_error(&format!("too many arguments for `{cmd}`"))
        }
        [cmd, ..] => usage_error(&format!("unknown subcommand `{cmd}`")),
    }
}

fn usage_error(msg: &str) -> ! {
    eprintln!(
        "rcu-workload: {msg}\n\
         accepted: `getppid N`, `membarrier N`, `membarrier-threads T N`, `bursts B N MS`, \
         `netns N`, `background`, `module OP N [ARG]`, `starve-kthread NAME CPU MS`, `bpf-readers N`, \
         `--help`"
    );
    exit(2)
}

fn count(arg: &str) -> u64 {
    arg.parse()
        .unwrap_or_else(|_| usage_error(&format!("N must be a non-negative integer, not `{arg}`")))
}

fn getppid(n: u64) {
    for _ in 0..n {
        sys_getppid();
    }
    println!("getppid: {n}");
}

/// `batches` batches of `n` getppid() calls, one starting every `ms` milliseconds from the
/// first (a batch that overruns its slot starts the next late, and is counted as late).
fn paced_getppid(n: u64, ms: u64, batches: u64) {
    let start = Instant::now();
    let mut late = 0;
    for batch in 0..batches {
        let due = start + Duration::from_millis(ms * batch);
        match due.checked_duration_since(Instant::now()) {
            Some(wait) => std::thread::sleep(wait),
            None if batch > 0 => late += 1,
            None => {}
        }
        for _ in 0..n {
            sys_getppid();
        }
    }
    println!("getppid: {}", n * batches);
    println!("late: {late}");
}

/// T threads released together, N membarrier calls each: more threads asleep in
/// synchronize_rcu() at once than a kretprobe has instances.
fn membarrier_threads(threads: u64, n: u64) {
    let start = std::sync::Arc::new(std::sync::Barrier::new(threads as usize));
    let workers: Vec<_> = (0..threads)
        .map(|_| {
            let start = start.clone();
            std::thread::spawn(move || {
                start.wait();
                (0..n).all(|_| sys_membarrier_global().is_ok())
            })
        })
        .collect();
    let failed = workers
        .into_iter()
        .map(|w| w.join())
        .filter(|joined| !matches!(joined, Ok(true)))
        .count();
    if failed > 0 {
        eprintln!("rcu-workload: membarrier(MEMBARRIER_CMD_GLOBAL) failed in {failed} threads");
        exit(1);
    }
    println!("membarrier: {}", threads * n);
}

/// `bursts` bursts of `n` calls, `pause` apart; prints the total as `membarrier: N`.
fn membarrier(bursts: u64, n: u64, pause: Duration) {
    if online_cpus() < 2 {
        eprintln!(
            "rcu-workload: note: only one CPU is online, so membarrier does not call synchronize_rcu()"
        );
    }
    // The slowest call as user space saw it: an upper bound for the kernel-side latency.
    let mut slowest = Duration::ZERO;
    let total = bursts * n;
    let (started, cpu_at_start) = (Instant::now(), thread_cpu());
    for burst in 0..bursts {
        if burst > 0 {
            std::thread::sleep(pause);
        }
        for call in 0..n {
            let started = Instant::now();
            let result = sys_membarrier_global();
            slowest = slowest.max(started.elapsed());
            if let Err(e) = result {
                let done = burst * n + call;
                eprintln!(
                    "rcu-workload: membarrier(MEMBARRIER_CMD_GLOBAL) failed after {done} of {total} calls: {e}"
                );
                exit(1);
            }
        }
    }
    let (elapsed, cpu) = (started.elapsed(), thread_cpu() - cpu_at_start);
    println!("membarrier: {total}");
    println!("slowest_ns: {}", slowest.as_nanos());
    println!("elapsed_ns: {}", elapsed.as_nanos());
    println!("cpu_ns: {}", cpu.as_nanos());
}

/// This thread's CPU time so far (user and system).
fn thread_cpu() -> Duration {
    let mut now = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes the timespec it is given.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut now) };
    Duration::new(now.tv_sec as u64, now.tv_nsec as u32)
}

/// The test module's control file.
const TEST_MODULE_PROC: &str = "/proc/rcutrace_test";

/// One write of `OP N [ARG]` to the test module: it performs the op N times in this process
/// and the write returns when all are done.
fn module(op: &str, n: u64, arg: Option<u64>) {
    use std::io::Write;

    let mut file = match std::fs::OpenOptions::new()
        .write(true)
        .open(TEST_MODULE_PROC)
    {
        Ok(file) => file,
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            eprintln!(
                "rcu-workload: {TEST_MODULE_PROC} does not exist: load the test module first \
                 (insmod rcutrace_test.ko)"
            );
            exit(1)
        }
        Err(e) => {
            eprintln!("rcu-workload: cannot open {TEST_MODULE_PROC}: {e}");
            exit(1)
        }
    };
    let command = match arg {
        Some(arg) => format!("{op} {n} {arg}\n"),
        None => format!("{op} {n}\n"),
    };
    println!("pid: {}", std::process::id());
    let started = Instant::now();
    // One write() call: the module reads the whole command from it.
    match file.write(command.as_bytes()) {
        Ok(written) if written == command.len() => {}
        Ok(written) => {
            eprintln!(
                "rcu-workload: the module took {written} of {} bytes",
                command.len()
            );
            exit(1)
        }
        Err(e) => {
            let why = match e.raw_os_error() {
                Some(libc::EOPNOTSUPP) => {
                    "this kernel lacks the function (see `ops:` in /proc/rcutrace_test)"
                }
                Some(libc::EINVAL) => "unknown op, or N or ARG out of range",
                _ => "the module failed",
            };
            eprintln!("rcu-workload: `{}` failed: {why}: {e}", command.trim_end());
            exit(1)
        }
    }
    println!("done: {n}");
    println!("elapsed_ns: {}", started.elapsed().as_nanos());
}

fn background() -> ! {
    const READERS_PER_BURST: u32 = 5_000;
    const CHILDREN_PER_BURST: u32 = 3;
    const FILES_PER_BURST: u32 = 8;
    const MEMBARRIER_EVERY: Duration = Duration::from_millis(250);
    const PAUSE: Duration = Duration::from_millis(20);

    let mut last_membarrier = Instant::now();
    let mut membarrier_ok = true;
    let mut loopback_ok = true;
    let mut namespaces_ok = true;
    loop {
        for _ in 0..READERS_PER_BURST {
            sys_getppid();
        }
        for _ in 0..CHILDREN_PER_BURST {
            fork_and_reap();
        }
        for _ in 0..FILES_PER_BURST {
            open_and_close_files();
        }
        if membarrier_ok && last_membarrier.elapsed() >= MEMBARRIER_EVERY {
            last_membarrier = Instant::now();
            if loopback_ok && let Err(e) = bounce_loopback() {
                eprintln!("rcu-workload: cannot bounce lo, continuing without it: {e}");
                loopback_ok = false;
            }
            if namespaces_ok && let Err(e) = short_lived_network_namespace() {
                eprintln!("rcu-workload: cannot make network namespaces, continuing without: {e}");
                namespaces_ok = false;
            }
            if let Err(e) = sys_membarrier_global() {
                eprintln!("rcu-workload: membarrier failed, continuing without it: {e}");
                membarrier_ok = false;
            }
        }
        std::thread::sleep(PAUSE);
    }
}

/// Taking `lo` down waits in synchronize_net() under the RTNL lock, which is
/// synchronize_rcu_expedited(): the networking stack's real use of expedited grace periods.
/// Only meant for the throwaway guest, where nothing uses `lo`.
fn bounce_loopback() -> io::Result<()> {
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    let mut request: libc::ifreq = unsafe { std::mem::zeroed() };
    for (dst, src) in request.ifr_name.iter_mut().zip(b"lo\0") {
        *dst = *src as libc::c_char;
    }
    let ioctl = |request: &mut libc::ifreq, op| {
        if unsafe { libc::ioctl(fd, op, request as *mut libc::ifreq) } < 0 {
            Err(io::Error::last_os_error())
        } else {
            Ok(())
        }
    };
    let result = (|| {
        ioctl(&mut request, libc::SIOCGIFFLAGS)?;
        let flags = unsafe { request.ifr_ifru.ifru_flags };
        request.ifr_ifru.ifru_flags = flags & !(libc::IFF_UP as libc::c_short);
        ioctl(&mut request, libc::SIOCSIFFLAGS)?;
        request.ifr_ifru.ifru_flags = flags | libc::IFF_UP as libc::c_short;
        ioctl(&mut request, libc::SIOCSIFFLAGS)
    })();
    unsafe { libc::close(fd) };
    result
}

/// An exiting task is freed through call_rcu.
fn fork_and_reap() {
    unsafe {
        match libc::fork() {
            0 => libc::_exit(0),
            pid if pid > 0 => {
                libc::waitpid(pid, std::ptr::null_mut(), 0);
            }
            _ => {}
        }
    }
}

/// N short-lived network namespaces in a row, timed as a whole.
fn netns(n: u64) {
    let start = Instant::now();
    for _ in 0..n {
        if let Err(e) = short_lived_network_namespace() {
            eprintln!("rcu-workload: {e}");
            exit(1);
        }
    }
    let elapsed = start.elapsed();
    println!("netns: {n}");
    println!("elapsed_ns: {}", elapsed.as_nanos());
}

/// A child enters a network namespace of its own and exits; the kernel tears the namespace
/// down later, in its cleanup_net worker.
fn short_lived_network_namespace() -> io::Result<()> {
    unsafe {
        match libc::fork() {
            0 => libc::_exit(if libc::unshare(libc::CLONE_NEWNET) == 0 {
                0
            } else {
                1
            }),
            pid if pid > 0 => {
                let mut status = 0;
                libc::waitpid(pid, &mut status, 0);
                if libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0 {
                    Ok(())
                } else {
                    Err(io::Error::other(
                        "unshare(CLONE_NEWNET) failed in the child",
                    ))
                }
            }
            _ => Err(io::Error::last_os_error()),
        }
    }
}

/// Sockets, pipes and epoll items go through RCU-deferred frees when closed.
fn open_and_close_files() {
    unsafe {
        for domain in [libc::AF_UNIX, libc::AF_INET] {
            let fd = libc::socket(domain, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0);
            if fd >= 0 {
                libc::close(fd);
            }
        }
        let mut pipe = [0; 2];
        if libc::pipe2(pipe.as_mut_ptr(), libc::O_CLOEXEC) == 0 {
            let ep = libc::epoll_create1(libc::EPOLL_CLOEXEC);
            if ep >= 0 {
                let mut ev = libc::epoll_event {
                    events: libc::EPOLLIN as u32,
                    u64: 0,
                };
                libc::epoll_ctl(ep, libc::EPOLL_CTL_ADD, pipe[0], &mut ev);
                libc::close(ep);
            }
            libc::close(pipe[0]);
            libc::close(pipe[1]);
        }
    }
}

/// The pid of the kernel thread whose command name is `name`.
fn kthread_pid(name: &str) -> Option<libc::pid_t> {
    std::fs::read_dir("/proc").ok()?.find_map(|entry| {
        let pid: libc::pid_t = entry.ok()?.file_name().to_str()?.parse().ok()?;
        let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).ok()?;
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
        (comm.trim_end() == name && cmdline.is_empty()).then_some(pid)
    })
}

fn affinity(pid: libc::pid_t) -> libc::cpu_set_t {
    // SAFETY: a zeroed cpu_set_t is an empty set; sched_getaffinity fills the one we own.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    if unsafe { libc::sched_getaffinity(pid, size_of::<libc::cpu_set_t>(), &mut set) } != 0 {
        fail(&format!("reading the affinity of {pid}"));
    }
    set
}

fn set_affinity(pid: libc::pid_t, set: &libc::cpu_set_t) {
    // SAFETY: sched_setaffinity reads the set we own.
    if unsafe { libc::sched_setaffinity(pid, size_of::<libc::cpu_set_t>(), set) } != 0 {
        fail(&format!("setting the affinity of {pid}"));
    }
}

fn fail(what: &str) -> ! {
    eprintln!("rcu-workload: {what}: {}", io::Error::last_os_error());
    exit(1)
}

/// Keeps kernel thread `name` off the CPU for `ms`: both on `cpu`, this one SCHED_FIFO 99.
fn starve_kthread(name: &str, cpu: u64, ms: u64) {
    let Some(kthread) = kthread_pid(name) else {
        eprintln!("rcu-workload: no kernel thread named {name}");
        exit(1)
    };
    // SAFETY: a zeroed cpu_set_t is an empty set; CPU_SET adds one CPU to it.
    let mut only: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    unsafe { libc::CPU_SET(cpu as usize, &mut only) };
    let before = affinity(kthread);
    set_affinity(kthread, &only);
    set_affinity(0, &only);
    let param = libc::sched_param { sched_priority: 99 };
    // SAFETY: sched_setscheduler reads the parameter we own.
    if unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &param) } != 0 {
        fail("becoming SCHED_FIFO");
    }
    println!("kthread: {kthread}");
    let start = Instant::now();
    while start.elapsed() < Duration::from_millis(ms) {
        std::hint::spin_loop();
    }
    let starved = start.elapsed();
    let normal = libc::sched_param { sched_priority: 0 };
    // SAFETY: as above.
    unsafe { libc::sched_setscheduler(0, libc::SCHED_OTHER, &normal) };
    set_affinity(kthread, &before);
    println!("starved_ns: {}", starved.as_nanos());
}

/// RCU readers taken inside a BPF program of this process's own, then the program unloaded:
/// a socket filter named `rcu_readers` that walks an empty one-bucket hash map with
/// bpf_for_each_map_elem() (which takes rcu_read_lock() once per bucket), run `n` times by
/// one BPF_PROG_TEST_RUN. The program stays loaded until standard input closes (so that a
/// tracer can see it first); exiting unloads it.
fn bpf_readers(n: u64) {
    let repeat = u32::try_from(n).unwrap_or_else(|_| usage_error("N must fit in 32 bits"));
    println!("pid: {}", std::process::id());
    let map = bpf_hash_map();
    let program = bpf_readers_program(map);
    println!("bpf_prog: rcu_readers");
    bpf_test_run(program, repeat);
    println!("readers: {n}");
    let _ = io::Read::read_to_end(&mut io::stdin(), &mut Vec::new());
}

const BPF_MAP_CREATE: libc::c_long = 0;
const BPF_PROG_LOAD: libc::c_long = 5;
const BPF_PROG_TEST_RUN: libc::c_long = 10;
const BPF_BTF_LOAD: libc::c_long = 18;
const BPF_MAP_TYPE_HASH: u32 = 1;
const BPF_PROG_TYPE_SOCKET_FILTER: u32 = 1;
const BPF_FUNC_FOR_EACH_MAP_ELEM: i32 = 164;
const BPF_PSEUDO_MAP_FD: u8 = 1;
const BPF_PSEUDO_FUNC: u8 = 4;

fn bpf(cmd: libc::c_long, attr: &mut [u8], what: &str, log: Option<&[u8]>) -> libc::c_int {
    // SAFETY: the kernel reads at most `attr.len()` bytes of attributes, and the buffers
    // they point to, set by the callers to buffers that outlive the call, with their lengths.
    let result = unsafe { libc::syscall(libc::SYS_bpf, cmd, attr.as_mut_ptr(), attr.len()) };
    if result < 0 {
        let error = io::Error::last_os_error();
        let log = log.map_or(String::new(), |log| {
            let end = log.iter().position(|&b| b == 0).unwrap_or(log.len());
            String::from_utf8_lossy(&log[..end]).into_owned()
        });
        eprintln!("rcu-workload: {what}: {error}\n{log}");
        exit(1);
    }
    result as libc::c_int
}

fn put(attr: &mut [u8], at: usize, bytes: &[u8]) {
    attr[at..at + bytes.len()].copy_from_slice(bytes);
}

/// An empty hash map of one bucket (4-byte keys and values).
fn bpf_hash_map() -> libc::c_int {
    let mut attr = [0u8; 20];
    put(&mut attr, 0, &BPF_MAP_TYPE_HASH.to_ne_bytes());
    put(&mut attr, 4, &4u32.to_ne_bytes());
    put(&mut attr, 8, &4u32.to_ne_bytes());
    put(&mut attr, 12, &1u32.to_ne_bytes());
    bpf(BPF_MAP_CREATE, &mut attr, "creating a BPF hash map", None)
}

/// `bpf_for_each_map_elem(map, body, 0, 0); return 0`, with `body` returning 0.
fn bpf_readers_program(map: libc::c_int) -> libc::c_int {
    let insn = |code: u8, dst: u8, src: u8, imm: i32| -> [u8; 8] {
        let mut i = [0u8; 8];
        i[0] = code;
        i[1] = (src << 4) | dst;
        i[4..8].copy_from_slice(&imm.to_le_bytes());
        i
    };
    let insns: Vec<[u8; 8]> = vec![
        // r1 = the map; r2 = &body (16-byte loads; a function's imm counts instructions
        // from the one after the load's first)
        insn(0x18, 1, BPF_PSEUDO_MAP_FD, map),
        insn(0, 0, 0, 0),
        insn(0x18, 2, BPF_PSEUDO_FUNC, 6),
        insn(0, 0, 0, 0),
        insn(0xb7, 3, 0, 0),                          // r3 = 0 (context)
        insn(0xb7, 4, 0, 0),                          // r4 = 0 (flags)
        insn(0x85, 0, 0, BPF_FUNC_FOR_EACH_MAP_ELEM), // call
        insn(0xb7, 0, 0, 0),                          // r0 = 0
        insn(0x95, 0, 0, 0),                          // exit
        insn(0xb7, 0, 0, 0),                          // body (9): r0 = 0 (go on)
        insn(0x95, 0, 0, 0),                          // exit
    ];
    let license = c"GPL";
    // A callback needs its function described in BTF: `rcu_readers` at 0, `body` at 9.
    let btf = readers_btf();
    let func_info: [u32; 4] = [0, 4, 9, 6];
    let mut log = vec![0u8; 64 * 1024];
    let mut attr = [0u8; 112];
    put(&mut attr, 0, &BPF_PROG_TYPE_SOCKET_FILTER.to_ne_bytes());
    put(&mut attr, 4, &(insns.len() as u32).to_ne_bytes());
    put(&mut attr, 8, &(insns.as_ptr() as u64).to_ne_bytes());
    put(&mut attr, 16, &(license.as_ptr() as u64).to_ne_bytes());
    put(&mut attr, 24, &1u32.to_ne_bytes());
    put(&mut attr, 28, &(log.len() as u32).to_ne_bytes());
    put(&mut attr, 32, &(log.as_mut_ptr() as u64).to_ne_bytes());
    put(&mut attr, 48, b"rcu_readers");
    put(&mut attr, 72, &(btf as u32).to_ne_bytes());
    put(&mut attr, 76, &8u32.to_ne_bytes());
    put(&mut attr, 80, &(func_info.as_ptr() as u64).to_ne_bytes());
    put(&mut attr, 88, &2u32.to_ne_bytes());
    bpf(
        BPF_PROG_LOAD,
        &mut attr,
        "loading the BPF program",
        Some(&log),
    )
}

/// BTF of the program's two functions: type 4 `int rcu_readers(void *ctx)` and type 6
/// `int body(void *map, void *key, void *value, void *ctx)` (1 is `int`, 2 `void *`, 3 and
/// 5 their prototypes).
fn readers_btf() -> libc::c_int {
    const INT: u32 = 1 << 24;
    const PTR: u32 = 2 << 24;
    const FUNC: u32 = 12 << 24;
    const FUNC_PROTO: u32 = 13 << 24;
    let mut strings = vec![0u8];
    let mut name = |s: &str| {
        let at = strings.len() as u32;
        strings.extend_from_slice(s.as_bytes());
        strings.push(0);
        at
    };
    let (int, ctx, readers) = (name("int"), name("ctx"), name("rcu_readers"));
    let (map, key, value, body) = (name("map"), name("key"), name("value"), name("body"));
    let types: Vec<u32> = vec![
        int,
        INT,
        4,
        0x0100_0020, // 1: int, signed, 32 bits
        0,
        PTR,
        0, // 2: void *
        0,
        FUNC_PROTO | 1,
        1,
        ctx,
        2, // 3: int (void *ctx)
        readers,
        FUNC,
        3, // 4: rcu_readers
        0,
        FUNC_PROTO | 4,
        1,
        map,
        2,
        key,
        2,
        value,
        2,
        ctx,
        2, // 5: int (4 pointers)
        body,
        FUNC,
        5, // 6: body
    ];
    let types: Vec<u8> = types.iter().flat_map(|w| w.to_ne_bytes()).collect();
    let mut blob = Vec::new();
    blob.extend_from_slice(&0xeb9fu16.to_ne_bytes());
    blob.extend_from_slice(&[1, 0]); // version, flags
    for word in [
        24,
        0,
        types.len() as u32,
        types.len() as u32,
        strings.len() as u32,
    ] {
        blob.extend_from_slice(&word.to_ne_bytes());
    }
    blob.extend_from_slice(&types);
    blob.extend_from_slice(&strings);
    let mut log = vec![0u8; 16 * 1024];
    let mut attr = [0u8; 28];
    put(&mut attr, 0, &(blob.as_ptr() as u64).to_ne_bytes());
    put(&mut attr, 8, &(log.as_mut_ptr() as u64).to_ne_bytes());
    put(&mut attr, 16, &(blob.len() as u32).to_ne_bytes());
    put(&mut attr, 20, &(log.len() as u32).to_ne_bytes());
    put(&mut attr, 24, &1u32.to_ne_bytes());
    bpf(
        BPF_BTF_LOAD,
        &mut attr,
        "loading the BPF program's BTF",
        Some(&log),
    )
}

/// Runs `program` `repeat` times in one BPF_PROG_TEST_RUN.
fn bpf_test_run(program: libc::c_int, repeat: u32) {
    // A socket filter's test run needs at least an Ethernet header of data.
    let data = [0u8; 64];
    let mut attr = [0u8; 40];
    put(&mut attr, 0, &(program as u32).to_ne_bytes());
    put(&mut attr, 8, &(data.len() as u32).to_ne_bytes());
    put(&mut attr, 16, &(data.as_ptr() as u64).to_ne_bytes());
    put(&mut attr, 32, &repeat.to_ne_bytes());
    bpf(
        BPF_PROG_TEST_RUN,
        &mut attr,
        "running the BPF program",
        None,
    );
}

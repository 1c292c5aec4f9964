//! What a stuck guest's kernel said about itself: its console read for the reports a kernel
//! engineer asks for first (soft lockups, hung tasks, RCU stalls, and the task stacks and CPU
//! backtraces that magic SysRq `w`, `t` and `l` print), summed up as which tasks were blocked
//! or running, and where.

use std::fmt::{self, Write as _};

/// A task as the kernel names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Task {
    pub comm: String,
    pub pid: u32,
}

impl fmt::Display for Task {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} (pid {})", self.comm, self.pid)
    }
}

/// The reliable frames of a kernel stack, innermost first: `function` or `function [module]`,
/// offsets dropped. Frames of interrupt context are left out when the trace has a task part.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Stack {
    pub frames: Vec<String>,
}

/// Scheduler and wait plumbing: where every sleeping task is, so it says nothing about why.
const SLEEP_FRAMES: &[&str] = &[
    "__schedule",
    "schedule",
    "schedule_idle",
    "schedule_timeout",
    "schedule_hrtimeout_range",
    "schedule_hrtimeout_range_clock",
    "schedule_preempt_disabled",
    "io_schedule",
    "io_schedule_timeout",
    "preempt_schedule",
    "preempt_schedule_common",
    "preempt_schedule_irq",
    "__cond_resched",
    "__wait_for_common",
    "wait_for_common",
    "wait_for_completion",
    "wait_for_completion_state",
    "wait_for_completion_killable",
    "wait_for_completion_interruptible",
    "rcuwait_wait_event",
    "__mutex_lock",
    "__mutex_lock_slowpath",
    "mutex_lock",
    "rwsem_down_read_slowpath",
    "rwsem_down_write_slowpath",
    "down_read",
    "down_write",
    "percpu_rwsem_wait",
    "__percpu_down_read",
];

impl Stack {
    /// Where the task is: its first frames past the scheduler's and the interrupt entry's,
    /// joined by " <- ".
    pub fn location(&self, depth: usize) -> String {
        let mut frames = self.frames.iter().peekable();
        while frames.peek().is_some_and(|f| {
            let function = function_of(f);
            SLEEP_FRAMES.contains(&function) || function.starts_with("asm_")
        }) {
            frames.next();
        }
        let shown: Vec<&str> = frames.take(depth).map(String::as_str).collect();
        if shown.is_empty() {
            self.frames
                .first()
                .cloned()
                .unwrap_or_else(|| "(no stack)".into())
        } else {
            shown.join(" <- ")
        }
    }

    /// Whether any frame is `function` (with or without a module, guessed or not).
    pub fn contains(&self, function: &str) -> bool {
        self.frames.iter().any(|f| function_of(f) == function)
    }
}

/// A frame's function, without its module or the compiler's clone suffix (`.isra.0`,
/// `.part.0`, `.constprop.0`, `.cold`): the name in the source.
fn function_of(frame: &str) -> &str {
    let frame = frame.strip_prefix(GUESS).unwrap_or(frame);
    let name = frame.split(' ').next().unwrap_or(frame);
    name.split('.').next().unwrap_or(name)
}

/// A task stack printed by SysRq `t`/`w` or the hung-task detector.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskStack {
    pub task: Task,
    /// The state letter: `D` (uninterruptible), `S`, `R`, `I`...
    pub state: String,
    pub stack: Stack,
}

/// One CPU's backtrace (SysRq `l`, or an RCU stall's NMI backtraces).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CpuBacktrace {
    pub cpu: u32,
    /// The task it was running; `None` when idle.
    pub task: Option<Task>,
    pub stack: Stack,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SoftLockup {
    pub cpu: u32,
    pub secs: u32,
    pub task: Task,
    pub stack: Stack,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HungTask {
    pub secs: u32,
    pub stack: TaskStack,
}

/// Everything the console says about stuck tasks and CPUs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KernelState {
    pub soft_lockups: Vec<SoftLockup>,
    pub hung_tasks: Vec<HungTask>,
    /// The headline and per-CPU lines of each RCU stall warning.
    pub rcu_stalls: Vec<String>,
    pub cpus: Vec<CpuBacktrace>,
    /// Every task stack of the SysRq dumps, in console order.
    pub tasks: Vec<TaskStack>,
}

/// What is being read from the console right now.
enum Record {
    None,
    Task {
        stack: TaskStack,
        hung_secs: Option<u32>,
    },
    Cpu(CpuBacktrace),
    SoftLockup(SoftLockup),
}

/// Frames of a trace being read, split by context.
#[derive(Default)]
struct Frames {
    task: Vec<String>,
    other: Vec<String>,
    /// The task context's `? func+0x..` lines: addresses on the stack that the unwinder
    /// could not place in the chain of calls.
    task_guesses: Vec<String>,
    in_interrupt: bool,
    saw_task_context: bool,
}

impl Frames {
    fn push(&mut self, frame: String) {
        if self.in_interrupt {
            self.other.push(frame);
        } else {
            self.task.push(frame);
        }
    }

    fn push_guess(&mut self, frame: String) {
        if !self.in_interrupt {
            self.task_guesses.push(frame);
        }
    }

    fn into_stack(self) -> Stack {
        let mut frames = if self.saw_task_context {
            self.task
        } else {
            let mut all = self.other;
            all.extend(self.task);
            all
        };
        // An interrupted instruction (RIP) is often the trace's next frame too.
        frames.dedup();
        // Where the unwinder lost the chain at the interrupted instruction itself (an
        // interrupt taken at a retpoline thunk's entry, whose unwind hint is "undefined"), the
        // kernel prints its callers only as guesses: keep them, marked as such, rather than
        // a stack of one frame.
        if frames.len() <= 1 {
            frames.extend(self.task_guesses.into_iter().map(|f| format!("{GUESS}{f}")));
        }
        Stack { frames }
    }
}

/// How the kernel marks a frame its unwinder only guessed, and how a stack keeps it.
const GUESS: &str = "? ";

impl KernelState {
    pub fn parse(console: &str) -> Self {
        let mut state = KernelState::default();
        let mut record = Record::None;
        let mut frames = Frames::default();
        let mut hung: Option<(Task, u32)> = None;
        for raw in console.lines() {
            let line = strip_timestamp(raw);
            let header = parse_header(line, &mut hung, &mut state);
            if let Some(next) = header {
                state.finish(
                    std::mem::replace(&mut record, next),
                    std::mem::take(&mut frames),
                );
                continue;
            }
            let body = line.trim();
            match body {
                "<TASK>" => {
                    frames.in_interrupt = false;
                    frames.saw_task_context = true;
                }
                "<IRQ>" | "<NMI>" | "<SOFTIRQ>" | "<#DF>" => frames.in_interrupt = true,
                "</IRQ>" | "</NMI>" | "</SOFTIRQ>" | "</#DF>" => frames.in_interrupt = false,
                "</TASK>" => {
                    state.finish(
                        std::mem::replace(&mut record, Record::None),
                        std::mem::take(&mut frames),
                    );
                }
                _ => {
                    if let Some(rip) = body.strip_prefix("RIP: ") {
                        // The interrupted instruction of the context it is printed in:
                        // "0010:func+0x1c/0x40 [mod]"; user space ("0033:0x7f...") has no name.
                        if let Some(frame) = rip.split_once(':').and_then(|(_, f)| parse_frame(f)) {
                            frames.push(frame);
                        }
                    } else if let Some(task) = cpu_line_task(body) {
                        match &mut record {
                            Record::Cpu(cpu) if cpu.task.is_none() => cpu.task = Some(task),
                            Record::SoftLockup(lockup) if lockup.task.pid == 0 => {
                                lockup.task = task
                            }
                            _ => {}
                        }
                    } else if let Some(frame) = parse_frame(body) {
                        frames.push(frame);
                    } else if let Some(frame) = body.strip_prefix(GUESS).and_then(parse_frame) {
                        frames.push_guess(frame);
                    }
                }
            }
        }
        state.finish(record, frames);
        state
    }

    fn finish(&mut self, record: Record, frames: Frames) {
        match record {
            Record::None => {}
            Record::Task {
                mut stack,
                hung_secs,
            } => {
                stack.stack = frames.into_stack();
                match hung_secs {
                    Some(secs) => self.hung_tasks.push(HungTask { secs, stack }),
                    None => self.tasks.push(stack),
                }
            }
            Record::Cpu(mut cpu) => {
                if cpu.stack.frames.is_empty() {
                    cpu.stack = frames.into_stack();
                }
                self.cpus.push(cpu);
            }
            Record::SoftLockup(mut lockup) => {
                lockup.stack = frames.into_stack();
                self.soft_lockups.push(lockup);
            }
        }
    }

    /// Tasks in uninterruptible sleep (`D`), each once: the hung-task reports first.
    pub fn blocked_tasks(&self) -> Vec<&TaskStack> {
        let mut seen = Vec::new();
        let mut blocked: Vec<&TaskStack> = Vec::new();
        let candidates = self
            .hung_tasks
            .iter()
            .map(|h| &h.stack)
            .chain(self.tasks.iter().filter(|t| t.state == "D"));
        for task in candidates {
            if !seen.contains(&task.task.pid) {
                seen.push(task.task.pid);
                blocked.push(task);
            }
        }
        blocked
    }

    /// The CPUs that were busy (not idle), the last backtrace of each.
    pub fn busy_cpus(&self) -> Vec<&CpuBacktrace> {
        let mut last: Vec<&CpuBacktrace> = Vec::new();
        for cpu in &self.cpus {
            last.retain(|c| c.cpu != cpu.cpu);
            last.push(cpu);
        }
        last.retain(|c| {
            c.task
                .as_ref()
                .is_some_and(|t| !t.comm.starts_with("swapper"))
        });
        last.sort_by_key(|c| c.cpu);
        last
    }

    /// Whether any stack or lockup names `function`.
    pub fn mentions(&self, function: &str) -> bool {
        self.soft_lockups.iter().any(|l| l.stack.contains(function))
            || self
                .hung_tasks
                .iter()
                .any(|h| h.stack.stack.contains(function))
            || self.cpus.iter().any(|c| c.stack.contains(function))
            || self.tasks.iter().any(|t| t.stack.contains(function))
    }

    /// Frames of tracing machinery (BPF, kprobes, trampolines, ftrace, text patching, perf) in
    /// the stacks of what was stuck: lockups, hung and blocked tasks, busy CPUs. Each once.
    pub fn tracing_frames(&self) -> Vec<String> {
        const TRACING: [&str; 9] = [
            "bpf",
            "kprobe",
            "kretprobe",
            "trampoline",
            "ftrace",
            "text_poke",
            "perf_",
            "fprobe",
            "rethook",
        ];
        let stuck = self
            .soft_lockups
            .iter()
            .map(|l| &l.stack)
            .chain(self.blocked_tasks().into_iter().map(|t| &t.stack))
            .chain(self.busy_cpus().into_iter().map(|c| &c.stack));
        let mut found: Vec<String> = Vec::new();
        for frame in stuck.flat_map(|s| s.frames.iter()) {
            let function = function_of(frame);
            if TRACING.iter().any(|t| function.contains(t)) && !found.iter().any(|f| f == function)
            {
                found.push(function.to_string());
            }
        }
        found
    }

    /// Tracers (rcutrace, bpftrace) among the stuck tasks and busy CPUs, each once.
    pub fn stuck_tracers(&self) -> Vec<String> {
        let tasks = self
            .soft_lockups
            .iter()
            .map(|l| &l.task)
            .chain(self.blocked_tasks().into_iter().map(|t| &t.task))
            .chain(self.busy_cpus().into_iter().filter_map(|c| c.task.as_ref()));
        let mut found: Vec<String> = Vec::new();
        for task in tasks {
            let name = task.to_string();
            if ["rcutrace", "bpftrace"].contains(&task.comm.as_str()) && !found.contains(&name) {
                found.push(name);
            }
        }
        found
    }

    /// The tracers (rcutrace, bpftrace) in the task dump, whatever their state: a tracer that
    /// sleeps in its event loop after it was told to exit is stuck in user space, not the kernel.
    pub fn tracer_tasks(&self) -> Vec<&TaskStack> {
        self.tasks
            .iter()
            .filter(|t| ["rcutrace", "bpftrace"].contains(&t.task.comm.as_str()))
            .collect()
    }

    pub fn is_empty(&self) -> bool {
        *self == KernelState::default()
    }

    /// A few lines for a test failure: what was stuck, and where.
    pub fn summary(&self) -> String {
        const DEPTH: usize = 5;
        let mut out = String::new();
        for l in &self.soft_lockups {
            let _ = writeln!(
                out,
                "soft lockup: CPU {} stuck for {} s running {}, in {}",
                l.cpu,
                l.secs,
                l.task,
                l.stack.location(DEPTH)
            );
        }
        for h in &self.hung_tasks {
            let _ = writeln!(
                out,
                "hung task: {} blocked for more than {} s, in {}",
                h.stack.task,
                h.secs,
                h.stack.stack.location(DEPTH)
            );
        }
        if let Some(first) = self.rcu_stalls.first() {
            let _ = writeln!(
                out,
                "RCU stall warnings: {} lines, the first: {first}",
                self.rcu_stalls.len()
            );
        }
        for cpu in self.busy_cpus() {
            let task = cpu.task.as_ref().map_or("?".to_string(), Task::to_string);
            let _ = writeln!(
                out,
                "CPU {} running {task}, in {}",
                cpu.cpu,
                cpu.stack.location(DEPTH)
            );
        }
        let blocked = self.blocked_tasks();
        for task in &blocked {
            let _ = writeln!(
                out,
                "blocked (D): {}, in {}",
                task.task,
                task.stack.location(DEPTH)
            );
        }
        if blocked.is_empty() && !self.tasks.is_empty() {
            let _ = writeln!(out, "no task was in uninterruptible sleep (D)");
        }
        if out.is_empty() {
            out.push_str("the console holds no lockup, stall or stack report\n");
        }
        out
    }
}

/// Starts a new record for a header line, or notes a report line; `None` for other lines.
fn parse_header(
    line: &str,
    hung: &mut Option<(Task, u32)>,
    state: &mut KernelState,
) -> Option<Record> {
    let body = line.trim_start();
    if let Some(rest) = body.strip_prefix("task:") {
        let (comm, fields) = rest.split_once(" state:")?;
        let task_state = fields.split_whitespace().next()?.to_string();
        let pid = field_after(fields, "pid:")?;
        let task = Task {
            comm: comm.trim().to_string(),
            pid,
        };
        let hung_secs = match hung.take() {
            Some((t, secs)) if t.pid == pid => Some(secs),
            _ => None,
        };
        return Some(Record::Task {
            stack: TaskStack {
                task,
                state: task_state,
                stack: Stack::default(),
            },
            hung_secs,
        });
    }
    // "INFO: task sh:150 blocked for more than 30 seconds."
    if let Some(rest) = body.strip_prefix("INFO: task ") {
        let (name_pid, secs) = rest.split_once(" blocked for more than ")?;
        let (comm, pid) = name_pid.rsplit_once(':')?;
        let secs = secs.split_whitespace().next()?.parse().ok()?;
        *hung = Some((
            Task {
                comm: comm.to_string(),
                pid: pid.parse().ok()?,
            },
            secs,
        ));
        return None;
    }
    // "NMI backtrace for cpu 1", or "... for cpu 0 skipped: idling at default_idle+0x..".
    if let Some(rest) = body.strip_prefix("NMI backtrace for cpu ") {
        let cpu = rest.split_whitespace().next()?.parse().ok()?;
        let idle_at = rest
            .split_once("idling at ")
            .and_then(|(_, f)| parse_frame(f));
        return Some(Record::Cpu(CpuBacktrace {
            cpu,
            task: idle_at.as_ref().map(|_| Task {
                comm: "swapper (idle)".into(),
                pid: 0,
            }),
            stack: Stack {
                frames: idle_at.into_iter().collect(),
            },
        }));
    }
    // "watchdog: BUG: soft lockup - CPU#1 stuck for 22s! [sh:150]"
    if let Some((_, rest)) = body.split_once("BUG: soft lockup - CPU#") {
        let (cpu, rest) = rest.split_once(" stuck for ")?;
        let (secs, rest) = rest.split_once("s!")?;
        let task = rest
            .trim()
            .strip_prefix('[')
            .and_then(|t| t.strip_suffix(']'))
            .and_then(|t| t.rsplit_once(':'))
            .and_then(|(comm, pid)| {
                Some(Task {
                    comm: comm.to_string(),
                    pid: pid.parse().ok()?,
                })
            })
            .unwrap_or(Task {
                comm: "?".into(),
                pid: 0,
            });
        return Some(Record::SoftLockup(SoftLockup {
            cpu: cpu.parse().ok()?,
            secs: secs.parse().ok()?,
            task,
            stack: Stack::default(),
        }));
    }
    if body.starts_with("rcu: INFO:")
        || (body.starts_with("rcu: \t") && !state.rcu_stalls.is_empty())
    {
        state.rcu_stalls.push(body.replace('\t', " "));
        return None;
    }
    None
}

/// The task of a "CPU: 1 PID: 150 Comm: sh Tainted: ..." line (6.12 adds "UID: 0").
fn cpu_line_task(line: &str) -> Option<Task> {
    let rest = line.strip_prefix("CPU: ")?;
    let pid = field_after(rest, "PID: ")?;
    let comm = rest.split_once("Comm: ")?.1.split_whitespace().next()?;
    Some(Task {
        comm: comm.to_string(),
        pid,
    })
}

fn field_after(text: &str, key: &str) -> Option<u32> {
    text.split_once(key)?
        .1
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// `func+0x1c/0x40 [mod]` as `func [mod]`; `None` for unreliable (`? `) frames and other lines.
fn parse_frame(text: &str) -> Option<String> {
    let text = text.trim();
    let (name, rest) = text.split_once('+')?;
    let valid_name = !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"_.$".contains(&b));
    if !valid_name || !rest.starts_with("0x") {
        return None;
    }
    let (offsets, module) = match rest.split_once(' ') {
        Some((offsets, module)) => (offsets, Some(module.trim())),
        None => (rest, None),
    };
    if !offsets.contains('/') {
        return None;
    }
    Some(match module {
        Some(m) if m.starts_with('[') => format!("{name} {m}"),
        _ => name.to_string(),
    })
}

/// The line without its printk time stamp (`[   12.345678] `).
fn strip_timestamp(line: &str) -> &str {
    if let Some(rest) = line.strip_prefix('[')
        && let Some((stamp, text)) = rest.split_once("] ")
        && stamp
            .trim()
            .bytes()
            .all(|b| b.is_ascii_digit() || b == b'.')
    {
        return text;
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Shaped like Debian 6.12's console: a soft lockup, SysRq w with one blocked task, SysRq l.
    const CONSOLE: &str = "\
[   30.100000] watchdog: BUG: soft lockup - CPU#1 stuck for 22s! [sh:150]
[   30.100001] Modules linked in: rcutrace_test(OE)
[   30.100002] CPU: 1 UID: 0 PID: 150 Comm: sh Tainted: G           OE      6.12.117+deb12-cloud-amd64 #1
[   30.100003] RIP: 0010:rcutrace_test_spin_preempt_off+0x21/0x40 [rcutrace_test]
[   30.100004] RSP: 0018:ffffb0c0 EFLAGS: 00000202
[   30.100005] Call Trace:
[   30.100006]  <IRQ>
[   30.100007]  ? watchdog_timer_fn+0x1e0/0x250
[   30.100008]  __hrtimer_run_queues+0x112/0x2b0
[   30.100009]  </IRQ>
[   30.100010]  <TASK>
[   30.100011]  ? ktime_get+0x3c/0xa0
[   30.100012]  rcutrace_test_spin_preempt_off+0x21/0x40 [rcutrace_test]
[   30.100013]  rcutrace_test_write+0xe2/0x150 [rcutrace_test]
[   30.100014]  proc_reg_write+0x56/0xa0
[   30.100015]  vfs_write+0xf6/0x450
[   30.100016]  </TASK>
[   40.000000] INFO: task kworker/0:1:20 blocked for more than 30 seconds.
[   40.000001]       Tainted: G           OE      6.12.117+deb12-cloud-amd64 #1
[   40.000002] task:kworker/0:1     state:D stack:0     pid:20    tgid:20    ppid:2      flags:0x00004000
[   40.000003] Call Trace:
[   40.000004]  <TASK>
[   40.000005]  __schedule+0x3c/0xa0
[   40.000006]  schedule+0x27/0xa0
[   40.000007]  synchronize_rcu_expedited+0x1a0/0x220
[   40.000008]  process_one_work+0x179/0x390
[   40.000009]  </TASK>
[   41.000000] rcu: INFO: rcu_preempt detected stalls on CPUs/tasks:
[   41.000001] rcu: \t1-....: (1 GPs behind) idle=7ac/1/0x4000000000000000
[   50.000000] sysrq: Show Blocked State
[   50.000001] task:kworker/0:1     state:D stack:0     pid:20    tgid:20    ppid:2      flags:0x00004000
[   50.000002] Call Trace:
[   50.000003]  <TASK>
[   50.000004]  __schedule+0x3c/0xa0
[   50.000005]  synchronize_rcu_expedited+0x1a0/0x220
[   50.000006]  </TASK>
[   52.000000] sysrq: Show backtrace of all active CPUs
[   52.000001] NMI backtrace for cpu 0 skipped: idling at default_idle+0xf/0x20
[   52.000002] NMI backtrace for cpu 1
[   52.000003] CPU: 1 UID: 0 PID: 150 Comm: sh Tainted: G           OEL     6.12.117+deb12-cloud-amd64 #1
[   52.000004] RIP: 0010:ktime_get+0x3c/0xa0
[   52.000005] Call Trace:
[   52.000006]  <NMI>
[   52.000007]  nmi_cpu_backtrace+0x9e/0x110
[   52.000008]  </NMI>
[   52.000009]  <TASK>
[   52.000010]  rcutrace_test_spin_preempt_off+0x1c/0x40 [rcutrace_test]
[   52.000011]  rcutrace_test_write+0xe2/0x150 [rcutrace_test]
[   52.000012]  </TASK>
";

    /// An NMI taken at a retpoline thunk's entry: the unwinder stops there, and the kernel
    /// prints the callers only as guesses (6.12, once in CI).
    #[test]
    fn a_cpu_interrupted_in_a_thunk_keeps_the_guessed_callers() {
        let console = "\
[  110.000001] NMI backtrace for cpu 1
[  110.000002] CPU: 1 UID: 0 PID: 153 Comm: sh Tainted: G           OEL     6.12.118+deb12-cloud-amd64 #1
[  110.000003] RIP: 0010:__x86_indirect_thunk_array+0x0/0x20
[  110.000004] Call Trace:
[  110.000005]  <NMI>
[  110.000006]  ? nmi_cpu_backtrace+0x9e/0x110
[  110.000007]  </NMI>
[  110.000008]  <TASK>
[  110.000009]  ? ktime_get+0x3c/0xa0
[  110.000010]  ? rcutrace_test_spin_preempt_off+0x29/0x60 [rcutrace_test]
[  110.000011]  ? rcutrace_test_write+0x173/0x1f0 [rcutrace_test]
[  110.000012]  </TASK>
[  120.000001] NMI backtrace for cpu 1
[  120.000002] CPU: 1 UID: 0 PID: 153 Comm: sh Tainted: G           OEL     6.12.118+deb12-cloud-amd64 #1
[  120.000003] RIP: 0010:ktime_get+0x3c/0xa0
[  120.000004] Call Trace:
[  120.000005]  <TASK>
[  120.000006]  rcutrace_test_spin_preempt_off+0x29/0x60 [rcutrace_test]
[  120.000007]  ? vfs_write+0xf8/0x450
[  120.000008]  </TASK>
";
        let state = KernelState::parse(console);
        assert_eq!(state.cpus.len(), 2);
        assert_eq!(
            state.cpus[0].stack.frames,
            [
                "__x86_indirect_thunk_array",
                "? ktime_get",
                "? rcutrace_test_spin_preempt_off [rcutrace_test]",
                "? rcutrace_test_write [rcutrace_test]"
            ]
        );
        assert!(
            state.cpus[0]
                .stack
                .contains("rcutrace_test_spin_preempt_off")
        );
        // Where the chain holds, its guesses stay out.
        assert_eq!(
            state.cpus[1].stack.frames,
            [
                "ktime_get",
                "rcutrace_test_spin_preempt_off [rcutrace_test]"
            ]
        );
    }

    #[test]
    fn reads_lockups_hung_tasks_and_backtraces() {
        let state = KernelState::parse(CONSOLE);
        assert_eq!(state.soft_lockups.len(), 1);
        let lockup = &state.soft_lockups[0];
        assert_eq!((lockup.cpu, lockup.secs), (1, 22));
        assert_eq!(
            lockup.task,
            Task {
                comm: "sh".into(),
                pid: 150
            }
        );
        assert_eq!(
            lockup.stack.frames,
            [
                "rcutrace_test_spin_preempt_off [rcutrace_test]",
                "rcutrace_test_write [rcutrace_test]",
                "proc_reg_write",
                "vfs_write"
            ]
        );

        assert_eq!(state.hung_tasks.len(), 1);
        assert_eq!(state.hung_tasks[0].secs, 30);
        assert_eq!(state.hung_tasks[0].stack.task.comm, "kworker/0:1");
        assert_eq!(state.tasks.len(), 1, "the SysRq w dump");
        assert_eq!(state.blocked_tasks().len(), 1, "one task, reported twice");
        assert_eq!(
            state.blocked_tasks()[0].stack.location(2),
            "synchronize_rcu_expedited <- process_one_work"
        );

        assert_eq!(state.rcu_stalls.len(), 2);
        assert_eq!(state.cpus.len(), 2);
        let busy = state.busy_cpus();
        assert_eq!(busy.len(), 1);
        assert_eq!(busy[0].cpu, 1);
        assert_eq!(
            busy[0].stack.frames,
            [
                "ktime_get",
                "rcutrace_test_spin_preempt_off [rcutrace_test]",
                "rcutrace_test_write [rcutrace_test]"
            ]
        );
        assert!(state.mentions("rcutrace_test_spin_preempt_off"));
        let clone = Stack {
            frames: vec!["spin.isra.0 [m]".into()],
        };
        assert!(clone.contains("spin"));
        assert!(!state.mentions("rcutrace_test"));

        let summary = state.summary();
        assert!(
            summary.contains(
                "soft lockup: CPU 1 stuck for 22 s running sh (pid 150), in \
                 rcutrace_test_spin_preempt_off [rcutrace_test] <- rcutrace_test_write"
            ),
            "{summary}"
        );
        assert!(
            summary.contains("blocked (D): kworker/0:1 (pid 20), in synchronize_rcu_expedited"),
            "{summary}"
        );
        assert!(
            summary.contains("CPU 1 running sh (pid 150), in ktime_get <- "),
            "{summary}"
        );
    }

    /// 7.3: SysRq l taken on the spinning CPU itself, whose interrupt had interrupted the spin.
    #[test]
    fn each_rip_belongs_to_its_context() {
        let state = KernelState::parse(
            "NMI backtrace for cpu 1\n\
             CPU: 1 UID: 0 PID: 112 Comm: sh Tainted: G\n\
             Call Trace:\n \
             <IRQ>\n \
             dump_stack_lvl+0x5d/0x80\n\
             RIP: 0010:handle_softirqs+0x78/0x330\n \
             __irq_exit_rcu+0xa7/0x100\n \
             </IRQ>\n \
             <TASK>\n \
             asm_sysvec_apic_timer_interrupt+0x1a/0x20\n\
             RIP: 0010:spin.isra.0+0x25/0x50 [rcutrace_test]\n\
             RSP: 0018:ff810ecf8047fc60 EFLAGS: 00000287\n \
             op_spin+0xe/0x20 [rcutrace_test]\n \
             </TASK>\n",
        );
        let cpu = &state.cpus[0];
        assert_eq!(
            cpu.stack.frames,
            [
                "asm_sysvec_apic_timer_interrupt",
                "spin.isra.0 [rcutrace_test]",
                "op_spin [rcutrace_test]"
            ]
        );
        assert_eq!(
            cpu.stack.location(2),
            "spin.isra.0 [rcutrace_test] <- op_spin [rcutrace_test]"
        );
    }

    #[test]
    fn frames_and_stamps() {
        assert_eq!(
            parse_frame(" vfs_write+0xf6/0x450"),
            Some("vfs_write".into())
        );
        assert_eq!(
            parse_frame("cb+0x1/0x2 [rcutrace_test]"),
            Some("cb [rcutrace_test]".into())
        );
        assert_eq!(parse_frame("? ktime_get+0x3c/0xa0"), None);
        assert_eq!(parse_frame("Call Trace:"), None);
        assert_eq!(parse_frame("0x7f00+0x1"), None);
        assert_eq!(strip_timestamp("[    1.5] text"), "text");
        assert_eq!(strip_timestamp("[x] text"), "[x] text");
    }

    #[test]
    fn a_quiet_console_says_so() {
        let state = KernelState::parse("boot\nxtask-vm: job start\n");
        assert!(state.is_empty());
        assert!(state.summary().contains("no lockup"));
    }
}

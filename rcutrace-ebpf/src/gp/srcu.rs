//! `rcutrace gp --flavor srcu`: each SRCU grace period's bounds, per domain. A grace period
//! begins in `srcu_gp_start()`; its end (`srcu_gp_end()`, inlined everywhere) comes inside
//! a run of the domain's grace-period work, `process_srcu()`, whose return sends the
//! domain's number then: user space ends every grace period that number has passed. The
//! callbacks it schedules can run on another CPU, and wake their waiters, before that work
//! returns: their run (`srcu_invoke_callbacks()`) sends the number too. Kprobes only: on 7.x
//! tasks-trace RCU is an SRCU domain, and a trampoline's attach queues work there.

use aya_ebpf::{
    macros::map,
    maps::{HashMap, PerCpuArray},
    programs::{ProbeContext, RetProbeContext},
};
use rcutrace_common::gp::{
    EVENT_SRCU_CALLBACKS, EVENT_SRCU_READERS, EVENT_SRCU_SCAN_CLEAR, EVENT_SRCU_START,
    EVENT_SRCU_WORK_DONE, GP_LOST_EVENTS, MAX_SRCU_READER_CPUS, MAX_SRCU_SCANNED_CPUS,
};

use super::{lose, read, send, sending};
use crate::window;

/// 1: the domain keeps its grace-period number in a `struct srcu_usage` of its own
/// (`srcu_struct.srcu_sup`, at `GP_SRCU_SUP`; 6.2 on); 0: in `srcu_struct` itself (6.1).
#[unsafe(no_mangle)]
static GP_SRCU_VIA_USAGE: u32 = 0;
#[unsafe(no_mangle)]
static GP_SRCU_SUP: u32 = 0;
/// `srcu_gp_seq`'s offset in `srcu_usage` (or in `srcu_struct`, on 6.1).
#[unsafe(no_mangle)]
static GP_SRCU_GP_SEQ: u32 = 0;
/// The offset of the `work_struct` `process_srcu()` is given in the structure holding it:
/// `srcu_usage.work.work` (6.2 on, whose `srcu_ssp` at `GP_SRCU_USAGE_SSP` is the domain), or
/// `srcu_struct.work.work` (6.1).
#[unsafe(no_mangle)]
static GP_SRCU_WORK: u32 = 0;
#[unsafe(no_mangle)]
static GP_SRCU_USAGE_SSP: u32 = 0;
/// The offsets in `srcu_data` (one CPU's share of a domain) of the `work_struct`
/// `srcu_invoke_callbacks()` is given and of `ssp`, its domain.
#[unsafe(no_mangle)]
static GP_SRCU_DATA_WORK: u32 = 0;
#[unsafe(no_mangle)]
static GP_SRCU_DATA_SSP: u32 = 0;

/// Where a scan that found readers looks for them, CPU by CPU: `srcu_struct.sda` (the
/// domain's per-CPU `srcu_data`), the offsets in `srcu_data` of the counts of readers that
/// entered and left index 0, the distance to index 1's, the address of `__per_cpu_offset`,
/// and the possible CPUs. Set only where the scans are hooked.
#[unsafe(no_mangle)]
static GP_SRCU_SDA: u32 = 0;
#[unsafe(no_mangle)]
static GP_SRCU_LOCKS: u32 = 0;
#[unsafe(no_mangle)]
static GP_SRCU_UNLOCKS: u32 = 0;
#[unsafe(no_mangle)]
static GP_SRCU_INDEX_STRIDE: u32 = 0;
#[unsafe(no_mangle)]
static GP_PER_CPU_OFFSET: u64 = 0;
#[unsafe(no_mangle)]
static GP_SRCU_CPUS: u32 = 0;

/// The domain each thread running `process_srcu()` works for, until it returns; sized at
/// load time.
#[map]
static SRCU_WORKING: HashMap<u32, u64> = HashMap::with_max_entries(1, 0);
/// The domain, index and scan number (`trycount`: 1 or 2) each thread running
/// `try_check_zero()` scans, until it returns; sized at load time.
#[map]
static SRCU_SCANNING: HashMap<u32, [u64; 3]> = HashMap::with_max_entries(1, 0);

/// The CPUs one scan would name, kept until it knows whether readers are still in.
#[map]
static SRCU_NAMED: PerCpuArray<[u64; MAX_SRCU_READER_CPUS as usize]> =
    PerCpuArray::with_max_entries(1, 0);

/// Per domain, index and CPU (`[domain, index << 32 | cpu]`), that CPU's count of readers that
/// entered the index less those that left it, as the last scan that found the index clear saw
/// it, where not zero: a reader that moved CPU inside its critical section leaves one CPU
/// ahead and another behind for good, and a later scan must not take that for a reader still
/// there (nor let it hide one). Sized at load time, where the scans are hooked.
#[map]
static SRCU_RESIDUES: HashMap<[u64; 2], i64> = HashMap::with_max_entries(1, 0);

#[inline(always)]
fn via_usage() -> bool {
    window::constant(&GP_SRCU_VIA_USAGE) != 0
}

/// `domain`'s `srcu_gp_seq`.
#[inline(always)]
fn gp_seq_of(domain: u64) -> Option<u64> {
    let holder = if via_usage() {
        read::<u64>(domain + u64::from(window::constant(&GP_SRCU_SUP)))?
    } else {
        domain
    };
    read::<u64>(holder + u64::from(window::constant(&GP_SRCU_GP_SEQ)))
}

/// The domain whose grace-period work `work` is.
#[inline(always)]
fn domain_of_work(work: u64) -> Option<u64> {
    let holder = work.wrapping_sub(u64::from(window::constant(&GP_SRCU_WORK)));
    if via_usage() {
        read::<u64>(holder + u64::from(window::constant(&GP_SRCU_USAGE_SSP)))
    } else {
        Some(holder)
    }
}

program! {
    kprobe fn gp_srcu_start_kprobe(ctx: ProbeContext) -> u32 {
        if sending()
            && let Some(domain) = ctx.arg::<u64>(0)
            && let Some(gp_seq) = gp_seq_of(domain)
        {
            send(&ctx, EVENT_SRCU_START, domain, gp_seq, false);
        }
        0
    }
}

program! {
    kprobe fn gp_srcu_work_kprobe(ctx: ProbeContext) -> u32 {
        if sending()
            && let Some(work) = ctx.arg::<u64>(0)
            && let Some(domain) = domain_of_work(work)
        {
            let (_, tid, _) = window::current();
            // Without it this run's end would go unseen: counted as lost.
            if SRCU_WORKING.insert(&tid, &domain, 0).is_err() {
                lose(GP_LOST_EVENTS);
            }
        }
        0
    }
}

program! {
    kretprobe fn gp_srcu_work_kretprobe(ctx: RetProbeContext) -> u32 {
        let (_, tid, _) = window::current();
        let Some(&domain) = (unsafe { SRCU_WORKING.get(&tid) }) else {
            return 0;
        };
        let _ = SRCU_WORKING.remove(&tid);
        if sending()
            && let Some(gp_seq) = gp_seq_of(domain)
        {
            send(&ctx, EVENT_SRCU_WORK_DONE, domain, gp_seq, false);
        }
        0
    }
}

program! {
    kprobe fn gp_srcu_callbacks_kprobe(ctx: ProbeContext) -> u32 {
        if sending()
            && let Some(work) = ctx.arg::<u64>(0)
            && let Some(domain) = read::<u64>(
                work.wrapping_sub(u64::from(window::constant(&GP_SRCU_DATA_WORK)))
                    .wrapping_add(u64::from(window::constant(&GP_SRCU_DATA_SSP))),
            )
            && let Some(gp_seq) = gp_seq_of(domain)
        {
            send(&ctx, EVENT_SRCU_CALLBACKS, domain, gp_seq, false);
        }
        0
    }
}

/// Names the CPUs whose readers of `domain` entered `index` and have not all left: their
/// count of entries there exceeds their count of exits by more than the residue the last clear
/// scan left there (`SRCU_RESIDUES`). Where readers entered, not who they are; a reader that
/// moved CPU since that scan still shows as one CPU ahead, another behind. Only while readers
/// are still in as this looks (the excesses sum above zero): a scan that failed for a reader
/// that has left since leaves only residues, which, before any clear scan of the index was
/// seen, would name a CPU a reader merely moved from. With `clear` (the scan found none
/// left), keeps each CPU's residue instead.
#[inline(always)]
fn scan_reader_cpus(ctx: &RetProbeContext, domain: u64, index: u64, clear: bool) {
    let Some(sda) = read::<u64>(domain + u64::from(window::constant(&GP_SRCU_SDA))) else {
        return;
    };
    let per_cpu_offset = window::constant(&GP_PER_CPU_OFFSET);
    let cpus = window::constant(&GP_SRCU_CPUS);
    let stride = u64::from(window::constant(&GP_SRCU_INDEX_STRIDE)) * index;
    let locks = u64::from(window::constant(&GP_SRCU_LOCKS)) + stride;
    let unlocks = u64::from(window::constant(&GP_SRCU_UNLOCKS)) + stride;
    // Each CPU to name as `cpu << 32 | excess`, sent once the sum says readers are in. A
    // kretprobe runs with preemption off: this CPU's scratch is this run's alone.
    let Some(named) = SRCU_NAMED.get_ptr_mut(0) else {
        return;
    };
    // SAFETY: the map's own per-CPU slot, which nothing else uses while this runs.
    let named = unsafe { &mut *named };
    *named = [0; MAX_SRCU_READER_CPUS as usize];
    let mut found = 0usize;
    let mut in_now: i64 = 0;
    for cpu in 0..MAX_SRCU_SCANNED_CPUS {
        if cpu >= cpus {
            break;
        }
        let Some(offset) = read::<u64>(per_cpu_offset + u64::from(cpu) * 8) else {
            break;
        };
        let data = sda.wrapping_add(offset);
        let (Some(entered), Some(left)) = (read::<u64>(data + locks), read::<u64>(data + unlocks))
        else {
            continue;
        };
        let counted = entered.wrapping_sub(left) as i64;
        let key = [domain, index << 32 | u64::from(cpu)];
        if clear {
            if counted != 0 {
                if SRCU_RESIDUES.insert(&key, &counted, 0).is_err() {
                    lose(GP_LOST_EVENTS);
                }
            } else {
                // Balanced now: one lookup either way, none left behind.
                let _ = SRCU_RESIDUES.remove(&key);
            }
            continue;
        }
        let residue = unsafe { SRCU_RESIDUES.get(&key) }.copied().unwrap_or(0);
        let excess = counted.wrapping_sub(residue);
        in_now = in_now.wrapping_add(excess);
        if excess > 0
            && let Some(slot) = named.get_mut(found)
        {
            *slot = (u64::from(cpu) << 32) | excess.min(i64::from(u32::MAX)) as u64;
            found += 1;
        }
    }
    if in_now <= 0 {
        return;
    }
    for entry in named.iter() {
        if *entry == 0 {
            break;
        }
        send(ctx, EVENT_SRCU_READERS, domain, *entry, false);
    }
}

program! {
    kprobe fn gp_srcu_scan_kprobe(ctx: ProbeContext) -> u32 {
        if sending()
            && let (Some(domain), Some(index), Some(scan)) =
                (ctx.arg::<u64>(0), ctx.arg::<u64>(1), ctx.arg::<u64>(2))
        {
            let (_, tid, _) = window::current();
            // Without it this scan's readers would go unnamed: counted as lost.
            let scanning = [domain, index & 1, scan & 0xffff_ffff];
            if SRCU_SCANNING.insert(&tid, &scanning, 0).is_err() {
                lose(GP_LOST_EVENTS);
            }
        }
        0
    }
}

program! {
    kretprobe fn gp_srcu_scan_kretprobe(ctx: RetProbeContext) -> u32 {
        let (_, tid, _) = window::current();
        let Some(&[domain, index, scan]) = (unsafe { SRCU_SCANNING.get(&tid) }) else {
            return 0;
        };
        let _ = SRCU_SCANNING.remove(&tid);
        // try_check_zero() returns true when the index has no readers left: the scan's
        // phase of the grace period is over.
        if sending() {
            let clear = ctx.ret::<u64>() & 0xff != 0;
            scan_reader_cpus(&ctx, domain, index, clear);
            if clear {
                send(&ctx, EVENT_SRCU_SCAN_CLEAR, domain, scan, false);
            }
        }
        0
    }
}

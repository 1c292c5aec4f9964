//! The tracing window: runs until the duration ends or the user interrupts, while latency
//! samples flow from the kernel's ring buffer to their consumer, the exit of a traced
//! process is reported, and with `--interval` a report of the window so far is made on time.

use std::{
    cell::Cell,
    os::fd::{AsFd as _, AsRawFd as _, BorrowedFd, FromRawFd as _, OwnedFd},
    pin::pin,
    sync::atomic::{AtomicU64, Ordering},
    time::{Duration, Instant},
};

use anyhow::{Context as _, Result};
use aya::maps::{MapData, RingBuf};
use tokio::{
    io::{Interest, unix::AsyncFd},
    net::{TcpListener, TcpStream},
    signal::unix::{Signal, SignalKind, signal},
};

use crate::trace::{alarm::Alarm, countdown::Countdown};

/// Ctrl-C and termination requests, caught from the start so that an interrupt during
/// attaching still detaches cleanly instead of killing the process mid-way.
pub struct Interrupts {
    interrupt: Signal,
    terminate: Signal,
    hangup: Signal,
}

impl Interrupts {
    pub fn catch() -> Result<Self> {
        let install = |kind| signal(kind).context("installing a signal handler");
        Ok(Interrupts {
            interrupt: install(SignalKind::interrupt())?,
            terminate: install(SignalKind::terminate())?,
            hangup: install(SignalKind::hangup())?,
        })
    }

    async fn any(&mut self) {
        tokio::select! {
            _ = self.interrupt.recv() => {}
            _ = self.terminate.recv() => {}
            _ = self.hangup.recv() => {}
        }
    }
}

/// How the window ended.
#[derive(Debug)]
pub struct Window {
    pub elapsed: Duration,
    pub interrupted: bool,
}

/// What takes each sample record as it arrives.
pub type Consume<'a> = &'a mut dyn FnMut(&[u8]);

/// How often samples are read when the kernel has not asked for it. Each read is a wake-up
/// of rcutrace's own, which always-on commands pay for every second; the kernel asks once
/// the buffer is a quarter full, long before it could overflow.
pub const DRAIN_EVERY: Duration = Duration::from_secs(1);

/// How long a report waits for the records that programs on other CPUs are still writing.
/// A program writes its record in microseconds; only a CPU taken away from it mid-way (a
/// virtual CPU the host descheduled) makes it longer.
const RESERVED_WAIT: Duration = Duration::from_secs(1);

/// The kernel's ring buffer of samples, read as it fills.
pub struct Samples {
    ring: AsyncFd<RingBuf<MapData>>,
    /// `None` where the kernel would not map them: reports then read what is complete.
    positions: Option<RingPositions>,
    /// `None`: only when the kernel asks (someone else reads it on time).
    drain_every: Option<Duration>,
    /// Wakes the read every `drain_every`.
    drain_alarm: Alarm,
}

impl Samples {
    pub fn new(ring: RingBuf<MapData>, drain_every: Option<Duration>) -> Result<Self> {
        let positions = RingPositions::of(ring.as_fd())
            .inspect_err(|e| log::info!("the ring buffer's positions: {e:#}"))
            .ok();
        // SAFETY: the ring buffer owns its fd and keeps it open until it is dropped, which
        // happens only when this AsyncFd is dropped.
        let ring = unsafe { AsyncFd::register_with_interest(ring, Interest::READABLE) }
            .map_err(|e| e.into_parts().1)
            .context("watching the sample ring buffer")?;
        Ok(Samples {
            ring,
            positions,
            drain_every,
            drain_alarm: Alarm::new(),
        })
    }

    /// Hands every sample waiting in the buffer to `consume`, up to the first that a program
    /// is still writing.
    pub fn drain(&mut self, consume: Consume<'_>) {
        let ring = self.ring.get_mut();
        while let Some(item) = ring.next() {
            consume(&item);
        }
    }

    /// Hands `consume` every sample reserved by now, waiting for those that programs on
    /// other CPUs are still writing: a report made after its counters were read must see
    /// every event those counters counted, and `drain` stops at the first record not yet
    /// complete. Says so if it gave up waiting (the rest then comes in the next report).
    pub fn drain_reserved(&mut self, consume: Consume<'_>) {
        let Some(reserved) = self.positions.as_ref().map(RingPositions::producer) else {
            return self.drain(consume);
        };
        let started = Instant::now();
        loop {
            self.drain(consume);
            let read = self
                .positions
                .as_ref()
                .map_or(reserved, RingPositions::consumer);
            if ring_position_reached(read, reserved) {
                return;
            }
            if started.elapsed() > RESERVED_WAIT {
                log::warn!(
                    "a program was still writing an event after {RESERVED_WAIT:?}: this report \
                     leaves it for the next"
                );
                return;
            }
            std::thread::sleep(Duration::from_micros(200));
        }
    }

    /// Waits until the kernel says the buffer is filling, or for `drain_every` (the programs
    /// wake user space only then: a wake-up per sample costs each call an interrupt), and
    /// hands every waiting sample to `consume`. Cancelling it while it waits loses nothing:
    /// the samples stay in the buffer.
    async fn next_batch(&mut self, consume: Consume<'_>) -> Result<()> {
        let drain_every = self.drain_every;
        tokio::select! {
            ready = self.ring.readable_mut() => {
                ready.context("waiting for samples")?.clear_ready();
            }
            () = self.drain_alarm.at(drain_every.map(|every| Instant::now() + every)) => {}
        }
        self.drain(consume);
        Ok(())
    }
}

/// Whether the ring's reading position `read` has reached `target` (positions only grow,
/// and wrap around the word).
fn ring_position_reached(read: u64, target: u64) -> bool {
    read.wrapping_sub(target) as i64 >= 0
}

/// A ring buffer's positions, from its two metadata pages mapped read-only beside aya's own
/// mappings (aya 0.14 does not expose them): how far programs have reserved records, and how
/// far user space has read.
struct RingPositions {
    consumer: *const AtomicU64,
    producer: *const AtomicU64,
    page: usize,
}

impl RingPositions {
    fn of(ring: BorrowedFd<'_>) -> Result<Self> {
        // SAFETY: sysconf has no preconditions.
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) } as usize;
        let map = |offset: usize| -> Result<*const AtomicU64> {
            // SAFETY: a new read-only shared mapping of the ring's metadata page; the kernel
            // checks the fd and the offset.
            let at = unsafe {
                libc::mmap(
                    std::ptr::null_mut(),
                    page,
                    libc::PROT_READ,
                    libc::MAP_SHARED,
                    ring.as_raw_fd(),
                    offset as libc::off_t,
                )
            };
            if at == libc::MAP_FAILED {
                return Err(std::io::Error::last_os_error())
                    .context("mapping a ring buffer's metadata page");
            }
            Ok(at.cast())
        };
        let consumer = map(0)?;
        let producer = match map(page) {
            Ok(producer) => producer,
            Err(e) => {
                // SAFETY: mapped just above, with this length.
                unsafe { libc::munmap(consumer as *mut libc::c_void, page) };
                return Err(e);
            }
        };
        Ok(RingPositions {
            consumer,
            producer,
            page,
        })
    }

    /// Where the next record will be reserved.
    fn producer(&self) -> u64 {
        // SAFETY: the page stays mapped until drop; the kernel writes the position atomically.
        unsafe { &*self.producer }.load(Ordering::Acquire)
    }

    /// Where user space will read next.
    fn consumer(&self) -> u64 {
        // SAFETY: as in `producer`.
        unsafe { &*self.consumer }.load(Ordering::Acquire)
    }
}

impl Drop for RingPositions {
    fn drop(&mut self) {
        // SAFETY: both were mapped in `of` with this length and are not used after this.
        unsafe {
            libc::munmap(self.consumer as *mut libc::c_void, self.page);
            libc::munmap(self.producer as *mut libc::c_void, self.page);
        }
    }
}

/// When reports are made during the window (the end of the window always makes one).
pub enum Trigger<'a> {
    /// Every so often from the start; the end of the window is not one of these ticks.
    Every(Duration),
    /// Whenever a client connects (a scrape).
    Connection(&'a TcpListener),
}

/// What a report during the window is due for.
pub enum Due {
    Tick,
    Connection(TcpStream),
}

/// Reports made during the window.
/// Makes a report when it is due, given the function that drains the samples.
pub type Report<'a> = dyn FnMut(Due, &mut dyn FnMut()) -> Result<()> + 'a;

pub struct Reports<'a> {
    pub trigger: Trigger<'a>,
    /// Makes a report; the function it is given consumes every sample reserved by the time
    /// it is called, to be called once the counters are read (the samples drained after it
    /// then cover at least what the counters counted).
    pub report: &'a mut Report<'a>,
}

/// Work the window does at times of its own (switching the sampled reader probe, watching
/// for stalls).
pub struct Scheduled<'a> {
    /// When the work is next due; `None`: never again.
    pub next: Option<Instant>,
    /// Does the work due now, and says what follows.
    pub run: &'a mut dyn FnMut() -> Result<Next>,
    /// The work prints during the window (a countdown rewritten in place would break into
    /// its lines), and judges by the events so far (they are consumed first).
    pub reports: bool,
    /// Set while events are consumed when the work is due at once.
    pub now: Option<&'a Cell<bool>>,
}

/// What follows a scheduled piece of work.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Next {
    At(Instant),
    Never,
    /// The work decided the window is over (`stall --exit-on-warning`).
    EndWindow,
}

/// Waits for `duration` (forever if `None`) or an interrupt, feeding samples to `consume`,
/// doing the `scheduled` work on time and reporting when `reports` are due. If
/// `traced_process` exits meanwhile, says so once on stderr (its calls can no longer be
/// traced) and keeps waiting.
pub async fn run(
    duration: Option<Duration>,
    interrupts: &mut Interrupts,
    mut samples: Option<(&mut Samples, Consume<'_>)>,
    traced_process: Option<u32>,
    mut reports: Option<Reports<'_>>,
    mut scheduled: Option<Scheduled<'_>>,
) -> Result<Window> {
    let started = Instant::now();
    let mut deadline = pin!(async {
        match duration {
            Some(d) => tokio::time::sleep(d).await,
            None => std::future::pending().await,
        }
    });
    let mut ticks_done: u32 = 0;
    let mut process = traced_process.and_then(Process::watch);
    // Reports made during the window (--interval, serve, stall's warnings) show progress
    // themselves, and a countdown rewritten in place would break into their lines.
    let mut countdown = match (&reports, &scheduled) {
        (None, None) => Countdown::start(duration),
        (None, Some(work)) if !work.reports => Countdown::start(duration),
        _ => None,
    };
    let mut second = tokio::time::interval(Duration::from_secs(1));
    // The window's own schedule wakes it through alarms of the kernel's (see `alarm`).
    let mut scheduled_alarm = Alarm::new();
    let mut tick_alarm = Alarm::new();
    let interrupted = loop {
        let (every, listener) = match reports.as_ref().map(|r| &r.trigger) {
            Some(Trigger::Every(every)) => (Some(*every), None),
            Some(Trigger::Connection(listener)) => (None, Some(*listener)),
            None => (None, None),
        };
        let next_tick = every
            .and_then(|every| every.checked_mul(ticks_done + 1))
            .filter(|at| duration.is_none_or(|d| *at < d));
        tokio::select! {
            _ = &mut deadline => break false,
            _ = second.tick(), if countdown.is_some() => countdown.iter_mut().for_each(Countdown::show),
            _ = interrupts.any() => break true,
            result = next_batch(&mut samples) => {
                result?;
                if let Some(scheduled) = scheduled.as_mut()
                    && scheduled.now.is_some_and(Cell::take)
                    && run_scheduled(scheduled, &mut samples)? == Next::EndWindow
                {
                    break false;
                }
            }
            () = scheduled_alarm.at(scheduled.as_ref().and_then(|s| s.next)) => {
                if let Some(scheduled) = scheduled.as_mut()
                    && run_scheduled(scheduled, &mut samples)? == Next::EndWindow
                {
                    break false;
                }
            }
            due = next_due(&mut tick_alarm, next_tick.map(|at| started + at), listener) => {
                // A late tick (a busy machine) skips the ticks it overran rather than
                // making reports of nearly nothing right after it.
                if let (Due::Tick, Some(every)) = (&due, every) {
                    let overran = started.elapsed().as_nanos() / every.as_nanos().max(1);
                    ticks_done = u32::try_from(overran).unwrap_or(u32::MAX).max(ticks_done + 1);
                }
                let mut drain = || {
                    if let Some((samples, consume)) = samples.as_mut() {
                        samples.drain_reserved(&mut **consume);
                    }
                };
                match reports.as_mut() {
                    Some(reports) => (reports.report)(due, &mut drain)?,
                    None => drain(),
                }
            }
            () = exit_of(&process) => {
                if let Some(p) = process.take() {
                    countdown.iter_mut().for_each(Countdown::clear);
                    report_exit(p.pid, started);
                }
            }
        }
    };
    drop(countdown);
    // An exit that raced with the end of the window is still worth its word.
    if let Some(p) = &process
        && p.has_exited()
    {
        report_exit(p.pid, started);
    }
    Ok(Window {
        elapsed: started.elapsed(),
        interrupted,
    })
}

/// Does the scheduled work now (the events so far consumed first, if it judges by them) and
/// notes when it is next due.
fn run_scheduled(
    scheduled: &mut Scheduled<'_>,
    samples: &mut Option<(&mut Samples, Consume<'_>)>,
) -> Result<Next> {
    if scheduled.reports
        && let Some((samples, consume)) = samples.as_mut()
    {
        samples.drain(&mut **consume);
    }
    let next = (scheduled.run)()?;
    scheduled.next = match next {
        Next::At(at) => Some(at),
        Next::Never | Next::EndWindow => None,
    };
    Ok(next)
}

/// The next batch of samples; never without a sample buffer.
async fn next_batch(samples: &mut Option<(&mut Samples, Consume<'_>)>) -> Result<()> {
    match samples {
        Some((samples, consume)) => samples.next_batch(&mut **consume).await,
        None => std::future::pending().await,
    }
}

/// The next tick at `at`, or the next connection to `listener`; never without either.
async fn next_due(alarm: &mut Alarm, at: Option<Instant>, listener: Option<&TcpListener>) -> Due {
    match (at, listener) {
        (Some(at), _) => {
            alarm.at(Some(at)).await;
            Due::Tick
        }
        (None, Some(listener)) => loop {
            match listener.accept().await {
                Ok((stream, _)) => break Due::Connection(stream),
                // Out of file descriptors and the like: the exporter keeps going.
                Err(e) => {
                    log::warn!("accepting a connection: {e}");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            }
        },
        (None, None) => std::future::pending().await,
    }
}

/// A running process whose exit the window watches, through a pidfd (readable once it exits).
struct Process {
    pid: u32,
    pidfd: AsyncFd<OwnedFd>,
}

impl Process {
    /// `None` where the process is already gone (said at once) or the kernel has no pidfd
    /// (before 5.3: the exit then goes unreported).
    fn watch(pid: u32) -> Option<Self> {
        // SAFETY: pidfd_open takes a pid and flags and returns a new fd or -1.
        let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid as libc::pid_t, 0) };
        if fd < 0 {
            let error = std::io::Error::last_os_error();
            if error.raw_os_error() == Some(libc::ESRCH) {
                eprintln!("rcutrace: process {pid} exited before tracing started");
            } else {
                log::info!("cannot watch process {pid}: {error}");
            }
            return None;
        }
        // SAFETY: the fd was just opened and nothing else owns it.
        let fd = unsafe { OwnedFd::from_raw_fd(fd as i32) };
        // SAFETY: the AsyncFd owns the fd, so it stays open for as long as it is registered.
        match unsafe { AsyncFd::register_with_interest(fd, Interest::READABLE) } {
            Ok(pidfd) => Some(Process { pid, pidfd }),
            Err(e) => {
                log::info!("cannot watch process {pid}: {}", e.into_parts().1);
                None
            }
        }
    }

    fn has_exited(&self) -> bool {
        let mut poll = libc::pollfd {
            fd: std::os::fd::AsRawFd::as_raw_fd(self.pidfd.get_ref()),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd, no waiting.
        unsafe { libc::poll(&mut poll, 1, 0) == 1 }
    }
}

/// Completes when the watched process exits; never without one.
async fn exit_of(process: &Option<Process>) {
    match process {
        Some(p) => {
            // An error here leaves the exit unreported; the window goes on either way.
            if p.pidfd.readable().await.is_err() {
                std::future::pending::<()>().await
            }
        }
        None => std::future::pending().await,
    }
}

fn report_exit(pid: u32, started: Instant) {
    eprintln!(
        "rcutrace: process {pid} exited {:.1} s into the window; nothing more of it can be traced",
        started.elapsed().as_secs_f64()
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ring_positions_compare_across_the_word_s_wrap() {
        assert!(ring_position_reached(8, 8));
        assert!(ring_position_reached(16, 8));
        assert!(!ring_position_reached(8, 16));
        // The reading position wrapped past zero; the target did not yet.
        assert!(ring_position_reached(8, u64::MAX - 7));
        assert!(!ring_position_reached(u64::MAX - 7, 8));
    }
}

//! The tracing window: runs until the duration ends or the user interrupts, while latency
//! samples flow from the kernel's ring buffer to their consumer.

use std::time::{Duration, Instant};

use anyhow::{Context as _, Result};
use aya::maps::{MapData, RingBuf};
use tokio::{
    io::{Interest, unix::AsyncFd},
    signal::unix::{Signal, SignalKind, signal},
};

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

/// The kernel's ring buffer of samples, read as it fills.
pub struct Samples {
    ring: AsyncFd<RingBuf<MapData>>,
}

impl Samples {
    pub fn new(ring: RingBuf<MapData>) -> Result<Self> {
        // SAFETY: the ring buffer owns its fd and keeps it open until it is dropped, which
        // happens only when this AsyncFd is dropped.
        let ring = unsafe { AsyncFd::register_with_interest(ring, Interest::READABLE) }
            .map_err(|e| e.into_parts().1)
            .context("watching the sample ring buffer")?;
        Ok(Samples { ring })
    }

    /// Hands every sample waiting in the buffer to `consume`.
    pub fn drain(&mut self, consume: &mut dyn FnMut(&[u8])) {
        let ring = self.ring.get_mut();
        while let Some(item) = ring.next() {
            consume(&item);
        }
    }

    /// Waits for samples and hands them to `consume`, forever; returns only if waiting fails.
    async fn follow(&mut self, consume: &mut dyn FnMut(&[u8])) -> Result<()> {
        loop {
            let mut ready = self
                .ring
                .readable_mut()
                .await
                .context("waiting for samples")?;
            let ring = ready.get_inner_mut();
            while let Some(item) = ring.next() {
                consume(&item);
            }
            ready.clear_ready();
        }
    }
}

/// Waits for `duration` (forever if `None`) or an interrupt, feeding samples to `consume`.
pub async fn run(
    duration: Option<Duration>,
    interrupts: &mut Interrupts,
    samples: Option<(&mut Samples, &mut dyn FnMut(&[u8]))>,
) -> Result<Window> {
    let started = Instant::now();
    let deadline = async {
        match duration {
            Some(d) => tokio::time::sleep(d).await,
            None => std::future::pending().await,
        }
    };
    let follow = async {
        match samples {
            Some((samples, consume)) => samples.follow(consume).await,
            None => std::future::pending().await,
        }
    };
    let interrupted = tokio::select! {
        _ = deadline => false,
        _ = interrupts.any() => true,
        result = follow => { result?; false }
    };
    Ok(Window {
        elapsed: started.elapsed(),
        interrupted,
    })
}

//! The tracing window: runs until the duration ends or the user interrupts, while eBPF
//! diagnostics flow to the logger.

use std::{
    convert::Infallible,
    time::{Duration, Instant},
};

use anyhow::{Context as _, Result};
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

type Logger = aya_log::EbpfLogger<&'static dyn log::Log>;

/// Waits for `duration` (forever if `None`) or an interrupt.
pub async fn run(
    duration: Option<Duration>,
    interrupts: &mut Interrupts,
    logger: Option<Logger>,
) -> Result<Window> {
    let started = Instant::now();
    let deadline = async {
        match duration {
            Some(d) => tokio::time::sleep(d).await,
            None => std::future::pending().await,
        }
    };
    let logs = drain(logger);
    let interrupted = tokio::select! {
        _ = deadline => false,
        _ = interrupts.any() => true,
        result = logs => match result? {},
    };
    Ok(Window {
        elapsed: started.elapsed(),
        interrupted,
    })
}

/// Forwards eBPF log records to the logger as they arrive; returns only if reading fails.
async fn drain(logger: Option<Logger>) -> Result<Infallible> {
    let Some(logger) = logger else {
        return std::future::pending().await;
    };
    // SAFETY: the logger owns its ring buffer's fd and keeps it open until it is dropped,
    // which happens only when this AsyncFd is dropped.
    let mut fd = unsafe { AsyncFd::register_with_interest(logger, Interest::READABLE) }
        .map_err(|e| e.into_parts().1)
        .context("watching the eBPF log buffer")?;
    loop {
        let mut ready = fd.readable_mut().await.context("waiting for eBPF logs")?;
        ready.get_inner_mut().flush();
        ready.clear_ready();
    }
}

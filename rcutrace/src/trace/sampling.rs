//! `count --sample-readers ON_MS/PERIOD_MS`: the reader probe is attached for ON_MS of every
//! PERIOD_MS and really detached in between (a kprobe costs its whole path while attached, even
//! if its program does nothing), and the readers counted in those windows are scaled to the
//! whole window, with the estimate's margin of error. Here: the schedule, the windows' log and
//! the estimate; the switching itself is the tracing window's (trace::engine).

use std::{
    fmt,
    hash::{BuildHasher as _, RandomState},
    str::FromStr,
    time::{Duration, Instant},
};

use crate::model::ReadersEstimate;

/// Each switch of the probe waits for grace periods inside the kernel: shorter windows (on or
/// off) would be mostly switching.
pub const MIN_SWITCH_MS: u64 = 100;

/// How long after an attach a window begins to count: patching the probe in disturbs the
/// machine for a while (code is rewritten on every CPU), and a window counting through that
/// sees fewer readers than the load makes. Measured in the emulated guests: estimates 5% low
/// (median of 5 runs) with 20 ms, 2.4% with 100 ms (of 3), about what the probe's own cost on
/// that load explains.
pub const SETTLE: Duration = Duration::from_millis(100);

/// z for a two-sided 95% interval.
const Z95: f64 = 1.96;

/// How the reader probe is sampled: attached for `on` of every `period`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReaderSampling {
    pub on: Duration,
    pub period: Duration,
}

impl FromStr for ReaderSampling {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        let shape =
            || format!("expected ON_MS/PERIOD_MS in milliseconds, e.g. 100/1000, not {text:?}");
        let (on, period) = text.split_once('/').ok_or_else(shape)?;
        let ms = |part: &str| part.trim().parse::<u64>().map_err(|_| shape());
        let (on, period) = (ms(on)?, ms(period)?);
        if on < MIN_SWITCH_MS {
            return Err(format!(
                "ON_MS must be at least {MIN_SWITCH_MS}: each attach and detach of the probe \
                 waits for grace periods"
            ));
        }
        let settle = SETTLE.as_millis() as u64;
        if period < on + settle + MIN_SWITCH_MS {
            return Err(format!(
                "PERIOD_MS must exceed ON_MS by at least {} (the probe settles {settle} ms after \
                 each attach before it counts, and needs time detached), e.g. {on}/{}",
                settle + MIN_SWITCH_MS,
                on * 10
            ));
        }
        Ok(ReaderSampling {
            on: Duration::from_millis(on),
            period: Duration::from_millis(period),
        })
    }
}

impl fmt::Display for ReaderSampling {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.on.as_millis(), self.period.as_millis())
    }
}

/// A stretch of time the reader probe was attached, and the readers it counted: the counter
/// is read after the attach completed and before the detach began, so what a switch itself
/// counts is in no window.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SampledWindow {
    pub readers: u64,
    pub length: Duration,
}

/// The windows of one report's period and what the switching cost in grace periods.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SampledReaders {
    pub windows: Vec<SampledWindow>,
    /// Grace periods that ended while rcutrace attached or detached the probe (an upper
    /// bound of those its switching caused).
    pub switching_grace_periods: u64,
}

/// What the window does next with the reader probe.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Switch {
    Attach,
    /// The attached probe has settled: the window begins to count.
    Begin,
    Detach,
}

/// Where the reader probe is in its schedule.
#[derive(Clone, Copy, Debug)]
enum ProbeState {
    /// Detached at this moment.
    Detached(Instant),
    /// Attached again at this moment, settling before its window begins.
    Settling(Instant),
    /// Counting since this moment, from this counter value.
    Counting(Instant, u64),
}

/// The schedule of the reader probe and the log of what it counted. Window k starts at a
/// random offset within period k, so that a load which repeats with the period is not always
/// sampled at the same phase; the first one settles after the opening like any other after
/// its attach, rather than counting the moment when rcutrace has just patched every probe in
/// (in the emulated guests a steady load ran at 0.57 to 0.70 of its speed there in two runs
/// of six). It is not placed at random: a short run must still get its window.
pub struct Sampler {
    sampling: ReaderSampling,
    opened: Instant,
    /// The opening on CLOCK_MONOTONIC, the clock other programs stamp their own time with,
    /// for the windows' log.
    opened_ns: u64,
    /// The period whose window is open or next.
    period: u32,
    probe: ProbeState,
    windows: Vec<SampledWindow>,
    /// Windows before this index, and this many of the switching grace periods, were reported
    /// in an earlier period.
    reported: (usize, u64),
    switching_grace_periods: u64,
    random: RandomState,
}

impl Sampler {
    /// The reader probe, attached with every other, is settling at `now`, the window's
    /// opening.
    pub fn open(sampling: ReaderSampling, now: Instant) -> Self {
        Sampler {
            sampling,
            opened: now,
            opened_ns: crate::kernel::monotonic_ns()
                .saturating_sub(now.elapsed().as_nanos() as u64),
            period: 0,
            probe: ProbeState::Settling(now),
            windows: Vec::new(),
            reported: (0, 0),
            switching_grace_periods: 0,
            random: RandomState::new(),
        }
    }

    /// When the next switch is due, and which.
    pub fn next(&self) -> (Instant, Switch) {
        match self.probe {
            // Attaching takes a while: the window lasts ON from when it began to count.
            ProbeState::Counting(since, _) => (since + self.sampling.on, Switch::Detach),
            ProbeState::Settling(attached) => (attached + SETTLE, Switch::Begin),
            // A window whose attach overran its slack may end after the next one's start:
            // that one then starts once it has ended.
            ProbeState::Detached(at) => (
                (self.opened + self.window_start(self.period)).max(at),
                Switch::Attach,
            ),
        }
    }

    /// Where window `k` is due to start in the tracing window: within period k, early enough
    /// to end by the period's end.
    fn window_start(&self, k: u32) -> Duration {
        let slack = self
            .sampling
            .period
            .saturating_sub(self.sampling.on + SETTLE)
            .as_millis() as u64;
        let offset = match k {
            0 => 0,
            _ => self.random.hash_one(k) % (slack + 1),
        };
        self.sampling.period * k + Duration::from_millis(offset)
    }

    /// The probe is about to be detached: the open window ends at `now` with `counter`.
    pub fn close_window(&mut self, now: Instant, counter: u64) {
        self.log_window(now, counter);
        self.probe = ProbeState::Detached(now);
        self.period += 1;
    }

    /// The probe was attached again at `now`; its window begins once it has settled.
    pub fn attached(&mut self, now: Instant) {
        self.probe = ProbeState::Settling(now);
    }

    /// The attached probe has settled: a window counts from `counter` at `now`.
    pub fn open_window(&mut self, now: Instant, counter: u64) {
        self.probe = ProbeState::Counting(now, counter);
    }

    /// Logs what the counting window has counted up to `now` (`counter` then); whether one
    /// was counting.
    fn log_window(&mut self, now: Instant, counter: u64) -> bool {
        let ProbeState::Counting(since, from) = self.probe else {
            return false;
        };
        let window = SampledWindow {
            readers: counter.wrapping_sub(from),
            length: now.saturating_duration_since(since),
        };
        // Where each window fell, for whoever measures a load beside rcutrace (the benchmark
        // compares the load's speed in the windows with its speed over the run).
        let offset = since.saturating_duration_since(self.opened);
        log::info!(
            "reader window {}: {} readers in {} ns from CLOCK_MONOTONIC {} ns ({offset:?} after \
             the opening)",
            self.windows.len(),
            window.readers,
            window.length.as_nanos(),
            self.opened_ns + offset.as_nanos() as u64,
        );
        self.windows.push(window);
        true
    }

    /// Grace periods that ended during one attach or detach.
    pub fn add_switching_grace_periods(&mut self, n: u64) {
        self.switching_grace_periods += n;
    }

    /// The windows of a report's period ending at `now` (the probe's counter then: `counter`):
    /// an open window is cut there and goes on counting in the next period. `cumulative`: every
    /// window since the opening.
    pub fn take_period(&mut self, now: Instant, counter: u64, cumulative: bool) -> SampledReaders {
        if self.log_window(now, counter) {
            self.open_window(now, counter);
        }
        let (first, grace_periods_before) = if cumulative { (0, 0) } else { self.reported };
        self.reported = (self.windows.len(), self.switching_grace_periods);
        SampledReaders {
            windows: self.windows[first..].to_vec(),
            switching_grace_periods: self.switching_grace_periods - grace_periods_before,
        }
    }
}

/// The readers over `elapsed`, from the readers counted in `sampled`'s windows: their rate
/// times the period, and a 95% margin from how much the windows' rates differ (the ratio
/// estimator of cluster sampling, with the finite-population correction: sampling everything
/// leaves no error). Assumes the unsampled time carries the same load as the sampled.
/// `switching_calls_left_out`: the updater calls the counters left out as rcutrace's switching.
pub fn estimate(
    sampled: &SampledReaders,
    elapsed: Duration,
    switching_calls_left_out: u64,
) -> ReadersEstimate {
    let windows = &sampled.windows;
    let counted: u64 = windows.iter().map(|w| w.readers).sum();
    let time: Duration = windows.iter().map(|w| w.length).sum();
    let covered = if elapsed.is_zero() {
        1.0
    } else {
        (time.as_secs_f64() / elapsed.as_secs_f64()).min(1.0)
    };
    let rate = (!time.is_zero()).then(|| counted as f64 / time.as_secs_f64());
    let readers = rate.map(|rate| (rate * elapsed.as_secs_f64()).round() as u64);
    let n = windows.len();
    let margin = match rate {
        Some(rate) if n >= 2 => {
            let mean_length = time.as_secs_f64() / n as f64;
            let spread = windows
                .iter()
                .map(|w| (w.readers as f64 - rate * w.length.as_secs_f64()).powi(2))
                .sum::<f64>()
                / (n - 1) as f64;
            let rate_variance = (1.0 - covered) * spread / (n as f64 * mean_length.powi(2));
            Some((Z95 * rate_variance.sqrt() * elapsed.as_secs_f64()).round() as u64)
        }
        // Nothing left unsampled: the count is the whole.
        Some(_) if covered >= 1.0 => Some(0),
        _ => None,
    };
    ReadersEstimate {
        readers,
        counted,
        sampled: time,
        windows: n as u32,
        margin,
        switching_grace_periods: sampled.switching_grace_periods,
        switching_calls_left_out,
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn sampling_is_parsed_and_checked() {
        assert_eq!(
            "100/1000".parse(),
            Ok(ReaderSampling {
                on: ms(100),
                period: ms(1000)
            })
        );
        assert_eq!(
            "250/ 500".parse::<ReaderSampling>().unwrap().to_string(),
            "250/500"
        );
        for bad in ["100", "100/", "a/1000", "-1/1000", "100/1000/2"] {
            let error = bad.parse::<ReaderSampling>().unwrap_err();
            assert!(
                error.starts_with("expected ON_MS/PERIOD_MS"),
                "{bad}: {error}"
            );
        }
        assert!(
            "50/1000"
                .parse::<ReaderSampling>()
                .unwrap_err()
                .contains("at least 100")
        );
        for bad in ["100/150", "100/299"] {
            let error = bad.parse::<ReaderSampling>().unwrap_err();
            assert!(
                error.contains("at least 200") && error.contains("e.g. 100/1000"),
                "{error}"
            );
        }
        assert!("100/300".parse::<ReaderSampling>().is_ok());
    }

    /// The first window counts once the probe has settled after the opening; then every
    /// window lies inside its own period, each lasting ON, and they do not all start at the
    /// same offset.
    #[test]
    fn the_schedule_keeps_each_window_in_its_period() {
        let sampling = "100/300".parse().unwrap();
        let opened = Instant::now();
        let mut sampler = Sampler::open(sampling, opened);
        assert_eq!(sampler.next(), (opened + SETTLE, Switch::Begin));
        // What the probe counted while settling (11) is in no window.
        let mut counter = 11;
        sampler.open_window(opened + SETTLE, counter);
        assert_eq!(sampler.next(), (opened + SETTLE + ms(100), Switch::Detach));
        counter += 7;
        sampler.close_window(opened + SETTLE + ms(100), counter);
        let mut offsets = HashSet::new();
        for k in 1..50u32 {
            let (attach, switch) = sampler.next();
            assert_eq!(switch, Switch::Attach);
            // Attaching took 5 ms; the window begins once the probe has settled.
            sampler.attached(attach + ms(5));
            let (begin, switch) = sampler.next();
            assert_eq!((begin, switch), (attach + ms(5) + SETTLE, Switch::Begin));
            // What the attach itself counted (3) is in no window.
            counter += 3;
            sampler.open_window(begin, counter);
            let (at, switch) = sampler.next();
            assert_eq!((at, switch), (begin + ms(100), Switch::Detach));
            // Within its period, but for the time the attach itself took.
            let start = attach - opened;
            assert!(
                start >= ms(300) * k && at - opened <= ms(300) * (k + 1) + ms(5),
                "window {k}"
            );
            offsets.insert(start - ms(300) * k);
            counter += 7;
            sampler.close_window(at, counter);
            let (next, _) = sampler.next();
            assert!(next >= at, "window {} starts before {k} ends", k + 1);
        }
        assert!(offsets.len() > 1, "{offsets:?}");
        let windows = sampler
            .take_period(opened + ms(15_000), counter, false)
            .windows;
        assert_eq!(windows.len(), 50);
        let expected = SampledWindow {
            readers: 7,
            length: ms(100),
        };
        assert!(windows[..50].iter().all(|w| *w == expected), "{windows:?}");
    }

    /// A report's period cuts the open window; the next period gets the rest, and a
    /// cumulative report every window so far.
    #[test]
    fn periods_split_the_open_window() {
        let opened = Instant::now();
        let mut sampler = Sampler::open("200/1000".parse().unwrap(), opened);
        // Nothing counts while the probe settles.
        assert!(sampler.take_period(opened, 3, false).windows.is_empty());
        sampler.open_window(opened, 10);
        let first = sampler.take_period(opened + ms(50), 15, false);
        assert_eq!(
            first.windows,
            [SampledWindow {
                readers: 5,
                length: ms(50)
            }]
        );
        sampler.close_window(opened + ms(200), 40);
        sampler.add_switching_grace_periods(2);
        let second = sampler.take_period(opened + ms(600), 40, false);
        assert_eq!(
            second.windows,
            [SampledWindow {
                readers: 25,
                length: ms(150)
            }]
        );
        assert_eq!(second.switching_grace_periods, 2);
        sampler.add_switching_grace_periods(3);
        let third = sampler.take_period(opened + ms(650), 40, false);
        assert_eq!((third.windows.len(), third.switching_grace_periods), (0, 3));
        let all = sampler.take_period(opened + ms(700), 40, true);
        assert_eq!((all.windows.len(), all.switching_grace_periods), (2, 5));
    }

    fn estimate_of(sampled: &SampledReaders, elapsed: Duration) -> ReadersEstimate {
        estimate(sampled, elapsed, 0)
    }

    fn windows(counts: &[u64], each_ms: u64) -> SampledReaders {
        SampledReaders {
            windows: counts
                .iter()
                .map(|&readers| SampledWindow {
                    readers,
                    length: ms(each_ms),
                })
                .collect(),
            switching_grace_periods: 3,
        }
    }

    #[test]
    fn a_steady_load_scales_with_no_spread() {
        let e = estimate_of(&windows(&[1000; 10], 100), ms(10_000));
        assert_eq!(e.readers, Some(100_000));
        assert_eq!((e.counted, e.sampled, e.windows), (10_000, ms(1000), 10));
        assert_eq!(e.margin, Some(0));
        assert_eq!(e.switching_grace_periods, 3);
    }

    /// Windows of 900 and 1100 readers per 100 ms over 10 s, sampled 10%: the rate's standard
    /// error is sd(100)/sqrt(10)/0.1 s * sqrt(0.9) readers/s, times 10 s and 1.96.
    #[test]
    fn the_margin_follows_the_spread_of_the_windows() {
        let counts: Vec<u64> = (0..10)
            .map(|i| if i % 2 == 0 { 900 } else { 1100 })
            .collect();
        let e = estimate_of(&windows(&counts, 100), ms(10_000));
        assert_eq!(e.readers, Some(100_000));
        let sd = (10.0 * 100.0f64.powi(2) / 9.0).sqrt();
        let expected = 1.96 * (0.9f64).sqrt() * sd / 10f64.sqrt() / 0.1 * 10.0;
        assert_eq!(e.margin, Some(expected.round() as u64));
    }

    #[test]
    fn what_cannot_be_estimated_says_so() {
        // One window: no spread to judge by.
        let one = estimate_of(&windows(&[500], 100), ms(1000));
        assert_eq!((one.readers, one.margin), (Some(5000), None));
        // Nothing sampled (interrupted before the first window closed).
        let none = estimate_of(&SampledReaders::default(), ms(50));
        assert_eq!((none.readers, none.margin, none.windows), (None, None, 0));
        // The whole period was sampled: exact.
        let whole = estimate_of(&windows(&[500], 100), ms(100));
        assert_eq!((whole.readers, whole.margin), (Some(500), Some(0)));
    }
}

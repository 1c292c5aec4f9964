//! `rcutrace top`: a live full-screen view, refreshed every `--interval`. One window of the
//! shared machinery, with `--interval`'s reports drawn instead of printed: the grace-period
//! and waiter timings of `gplat`/`srlat` (waiters keyed by comm), `callbacks`' programs (read
//! live, each refresh the difference from the last), `serve`'s grace period in progress, and
//! readers sampled as `count --sample-readers` samples them.
//!
//! Keys are read by a thread of their own: `q` (or Ctrl-C, which raw mode turns into a key)
//! ends the window as Ctrl-C would, by the signal the window already waits for; `p` and `s`
//! redraw the last refresh. The terminal is restored however the command ends.

use crate::model::attribution::comm;
use std::{
    cell::RefCell,
    collections::{BTreeMap, HashMap},
    io::Stdout,
    sync::{Arc, Mutex, OnceLock},
    time::Duration,
};

use anyhow::{Context as _, Result, bail};
use ratatui::{
    Terminal,
    backend::{Backend as _, ClearType},
    crossterm::event::{self, Event, KeyCode, KeyEventKind, KeyModifiers},
    prelude::CrosstermBackend,
};
use rcutrace_common::{
    callbacks::{
        CALLBACK_FINE_BITS, CallbackKey, CallbackStats, Extremes, Pending, TOTAL_INVOKED,
        TOTAL_QUEUED, VIA_NOT_SEEN,
    },
    counters,
    hist::fine_slot_range_bits,
};

use crate::{
    cli::TopArgs,
    commands::publish::{Delivering, Sink},
    kernel,
    kernel::symbols::keeper::SymbolKeeper,
    model::aggregate::{Aggregate, Layout, Series},
    model::attribution::By,
    model::stats::percentile_bits,
    model::top::{LatencyFigures, Readers, TopFrame, TopRow},
    render::top::View,
    trace::engine::{Ends, Interval, Need, Period, Reporting, Request, trace_with},
    trace::grace_periods::{self, GpEvents, grace_period_now},
    trace::probes::{self, CALLBACKS, GP_LATENCY, GRACE_PERIODS_NEEDED, Probe, READERS, Timed},
    trace::sampling,
    trace::tracer::{Constant, Tracer},
};

/// The waiters timed beside the grace periods (index 0).
const WAITERS: [Timed; 3] = [
    probes::timed_call(1, "synchronize_rcu"),
    probes::timed_call(2, "synchronize_rcu_expedited"),
    probes::timed_call(3, "rcu_barrier"),
];

pub async fn run(args: &TopArgs, sink: Sink) -> Result<()> {
    let mut probes: Vec<Probe> = vec![READERS.probe];
    probes.extend(GP_LATENCY.probes());
    probes.extend(WAITERS.iter().flat_map(|t| t.probes()));
    probes.extend(CALLBACKS.in_attach_order());
    let same_function_mask = WAITERS.iter().fold(0u32, |mask, t| mask | 1 << t.index());
    let mut constants = vec![
        Constant::U32("SAME_FUNCTION_MASK", same_function_mask),
        Constant::U32("TARGET_TGID", 0),
        // Waiters are keyed by comm; the reader counter stays a plain one, for sampling.
        Constant::U32("COUNTS_UNKEYED", 1),
        // Switching the sampled reader probe makes these threads wait in synchronize_rcu()
        // for rcutrace: their calls are not the system's.
        Constant::Pids("TASKS_RCU_PIDS", kernel::tasks_rcu_kthreads()),
        Constant::U32("CALLBACK_UNIT_NS", 1_000_000),
        Constant::MaxEntries("PENDING", rcutrace_common::callbacks::MAX_PENDING),
        Constant::MaxEntries("ROWS", rcutrace_common::callbacks::MAX_ROWS),
        Constant::MaxEntries("EXTREMES", rcutrace_common::callbacks::MAX_ROWS),
    ];
    let layout = match kernel::rcu_state::layout() {
        Ok(layout) => Some(layout),
        Err(e) => {
            log::warn!("no age of the grace period in progress: {e:#}");
            None
        }
    };
    if let Some(layout) = &layout {
        probes.extend_from_slice(GRACE_PERIODS_NEEDED);
        constants.extend(grace_periods::constants(
            layout,
            kernel::possible_cpus()?,
            GpEvents::None,
        ));
    }
    let online = kernel::online_cpus()?;
    let units = vec![1; 1 + WAITERS.len()];
    let aggregate = RefCell::new(Aggregate::new(Layout::Log2, units));
    let mut consume = |record: &[u8]| aggregate.borrow_mut().add(record);
    let symbols = SymbolKeeper::new();
    let mut history = History {
        symbols: symbols.clone(),
        ..History::default()
    };

    // From here on the screen is ours; the guard gives it back on every way out (the key
    // thread keeps the screen itself alive).
    let restore = Restore;
    let screen = Screen::open(View {
        rows: args.rows,
        ..View::default()
    })?;
    let keys_failed = Screen::read_keys(&screen);
    let mut make_frame = |period: &Period<'_>| {
        let mut aggregate = aggregate.borrow_mut();
        if aggregate.malformed > 0 {
            bail!(
                "{} records in the sample buffer were not samples (rcutrace's eBPF object and \
                 loader disagree)",
                aggregate.malformed
            );
        }
        let age = match &layout {
            Some(_) => Some(grace_period_now(period.tracer, &online)?.map(|w| w.age)),
            None => None,
        };
        history.frame(period, &mut aggregate, age)
    };
    let mut show = |frame: TopFrame, _| {
        screen
            .lock()
            .map_err(|_| anyhow::anyhow!("the screen's lock"))?
            .show(frame)
    };
    let mut delivering = Delivering::new(sink, &mut show);
    let traced = trace_with(
        Request {
            probes: &probes,
            constants,
            choice: args.attach,
            by: Some(By::Comm),
            need: Need::These(&[GP_LATENCY.entry, GP_LATENCY.exit]),
            ends: Ends::default(),
            reporting: Reporting::Every(Interval {
                every: Duration::from_secs(args.interval),
                cumulative: false,
            }),
            sample_readers: Some(args.sample_readers),
            hooks: super::window::hooks(Some(&symbols), None),
        },
        Some(&mut consume),
        &mut make_frame,
        &mut delivering,
    )
    .await;
    // The screen is given back before anything (an error among them) is printed, and the
    // key thread draws no more.
    if let Ok(mut s) = screen.lock() {
        s.closed = true;
    }
    drop(restore);
    delivering.say_detached();
    if let Some(failure) = keys_failed.get() {
        bail!(
            "reading the keyboard failed, so top ended (its keys could no longer end it): {failure}"
        );
    }
    traced.map(|_| ())
}

/// The terminal in raw mode on its alternate screen, the last refresh and the view on it.
struct Screen {
    terminal: Terminal<CrosstermBackend<Stdout>>,
    last: Option<TopFrame>,
    view: View,
    cleared: bool,
    /// The terminal has been given back: nothing more is drawn.
    closed: bool,
}

impl Screen {
    fn open(view: View) -> Result<Arc<Mutex<Screen>>> {
        // Also restores the terminal if rcutrace panics.
        let terminal = ratatui::try_init().context("setting up the terminal")?;
        let screen = Arc::new(Mutex::new(Screen {
            terminal,
            last: None,
            view,
            cleared: false,
            closed: false,
        }));
        screen.lock().expect("new lock").redraw()?;
        Ok(screen)
    }

    /// Reads keys until the process ends: `q` and Ctrl-C end the window (as SIGINT does),
    /// `p` and `s` change the view. If reading them fails, the window ends too: in raw mode
    /// Ctrl-C is only a key, and a screen no key can end must not be left running. What
    /// failed is returned.
    fn read_keys(screen: &Arc<Mutex<Screen>>) -> Arc<OnceLock<String>> {
        let screen = Arc::clone(screen);
        let failed = Arc::new(OnceLock::new());
        let failure = Arc::clone(&failed);
        let fail = move |what: String| {
            let _ = failure.set(what);
            quit();
        };
        std::thread::spawn(move || {
            loop {
                let event = match event::read() {
                    Ok(event) => event,
                    Err(e) => return fail(e.to_string()),
                };
                let Event::Key(key) = event else {
                    if let Event::Resize(..) = event
                        && let Ok(mut s) = screen.lock()
                    {
                        let _ = s.redraw();
                    }
                    continue;
                };
                if key.kind != KeyEventKind::Press {
                    continue;
                }
                let Ok(mut s) = screen.lock() else {
                    return fail("the screen's lock was poisoned".to_string());
                };
                match key.code {
                    KeyCode::Char('q') | KeyCode::Esc => quit(),
                    KeyCode::Char('c') if key.modifiers.contains(KeyModifiers::CONTROL) => quit(),
                    KeyCode::Char('p') => s.view.paused = !s.view.paused,
                    KeyCode::Char('s') => s.view.sort = s.view.sort.next(),
                    _ => continue,
                }
                let _ = s.redraw();
            }
        });
        failed
    }

    /// A new refresh: shown unless paused (the frozen one stays, so it can be read).
    fn show(&mut self, frame: TopFrame) -> Result<()> {
        if self.view.paused {
            return Ok(());
        }
        // What was printed since the screen was first drawn (the banner, warnings) is wiped
        // with the first refresh.
        if self.last.is_none() {
            self.cleared = false;
        }
        self.last = Some(frame);
        self.redraw()
    }

    fn redraw(&mut self) -> Result<()> {
        if self.closed {
            return Ok(());
        }
        if !std::mem::replace(&mut self.cleared, true) {
            // Not Terminal::clear(): it asks the terminal where its cursor is, and the answer
            // may not come back in time (a slow machine, or the key thread reading first). A
            // cleared screen and a new terminal, whose every cell is blank, agree instead.
            self.terminal
                .backend_mut()
                .clear_region(ClearType::All)
                .context("clearing the screen")?;
            self.terminal = Terminal::new(CrosstermBackend::new(std::io::stdout()))
                .context("setting up the terminal")?;
        }
        let (last, view) = (self.last.as_ref(), self.view);
        self.terminal
            .draw(|f| crate::render::top::draw(f, last, &view))
            .context("drawing the screen")?;
        Ok(())
    }
}

/// Gives the terminal back (cooked mode, the normal screen) when dropped.
struct Restore;

impl Drop for Restore {
    fn drop(&mut self) {
        ratatui::restore();
    }
}

/// Ends the window as Ctrl-C does: by the signal it already waits for.
fn quit() {
    // SAFETY: sending a signal to this very process.
    unsafe { libc::kill(libc::getpid(), libc::SIGINT) };
}

/// What the callbacks' maps held at the last refresh (they only grow), and the totals so
/// far of the waiters, so that each refresh shows its own interval.
#[derive(Default)]
struct History {
    rows: HashMap<CallbackKey, CallbackStats>,
    totals: Vec<u64>,
    since_start: Duration,
    waiter_calls: HashMap<(u32, String), u64>,
    callback_calls: HashMap<String, u64>,
    /// Callback functions are named as they were when invoked.
    symbols: SymbolKeeper,
    names: HashMap<u64, String>,
}

impl History {
    fn frame(
        &mut self,
        period: &Period<'_>,
        aggregate: &mut Aggregate,
        grace_period_age: Option<Option<Duration>>,
    ) -> Result<TopFrame> {
        let tracer = period.tracer;
        self.since_start += period.elapsed;
        let gp = aggregate.take(GP_LATENCY.index());
        let gp = merged(gp.into_iter().map(|(_, s)| s));
        // Every waiter seen stays on the screen, with its total; its rate and latency are the
        // interval's (none: idle).
        let mut now: HashMap<(u32, String), Series> = HashMap::new();
        for timed in &WAITERS {
            for (key, series) in aggregate.take(timed.index()) {
                let comm = comm(&key.comm);
                *self
                    .waiter_calls
                    .entry((timed.index(), comm.clone()))
                    .or_default() += series.count();
                now.insert((timed.index(), comm), series);
            }
        }
        let waiters = self
            .waiter_calls
            .iter()
            .map(|((index, comm), total)| {
                let series = now.get(&(*index, comm.clone()));
                TopRow {
                    name: WAITERS
                        .iter()
                        .find(|t| t.index() == *index)
                        .map_or("?", |t| t.entry.function)
                        .to_string(),
                    comm: Some(comm.clone()),
                    calls: series.map_or(0, Series::count),
                    total: *total,
                    latency: series.map(figures).unwrap_or_default(),
                }
            })
            .collect();
        let totals: Vec<u64> = tracer.per_cpu_sums("CALLBACK_TOTALS")?;
        let since = |slot: u32| {
            let now = totals.get(slot as usize).copied().unwrap_or(0);
            now.saturating_sub(self.totals.get(slot as usize).copied().unwrap_or(0))
        };
        let (callbacks_queued, callbacks_invoked) = (since(TOTAL_QUEUED), since(TOTAL_INVOKED));
        self.totals = totals;
        let callbacks = self.callbacks(tracer)?;
        let mut backlog: BTreeMap<u32, u64> = BTreeMap::new();
        for (_, pending) in tracer.hash_entries::<u64, Pending>("PENDING")? {
            *backlog.entry(pending.cpu).or_default() += 1;
        }
        let readers = match &period.sampled_readers {
            Some(sampled) => {
                let left_out = period
                    .counters
                    .array("COUNT_LOSSES")
                    .get(counters::LEFT_OUT_SWITCHING as usize)
                    .copied()
                    .unwrap_or(0);
                let estimate = sampling::estimate(sampled, period.elapsed, left_out);
                Readers::Sampled {
                    estimate: estimate.readers,
                    margin: estimate.margin,
                    attached_fraction: estimate.sampled.as_secs_f64()
                        / period.elapsed.as_secs_f64().max(1e-9),
                }
            }
            None => Readers::Unavailable,
        };
        Ok(TopFrame {
            interval: period.elapsed,
            since_start: self.since_start,
            grace_periods: gp.count(),
            grace_period_latency: (gp.count() > 0).then(|| figures(&gp)),
            grace_period_age,
            callbacks_queued,
            callbacks_invoked,
            backlog: backlog.into_iter().collect(),
            callbacks,
            waiters,
            readers,
        })
    }

    /// Each callback function invoked in the interval: the rows' growth since the last
    /// refresh (their entry points together), and its maximum since tracing began.
    fn callbacks(&mut self, tracer: &Tracer) -> Result<Vec<TopRow>> {
        let rows: Vec<(CallbackKey, CallbackStats)> = tracer.hash_entries("ROWS")?;
        let extremes: Vec<(CallbackKey, Vec<Extremes>)> =
            tracer.per_cpu_hash_entries("EXTREMES")?;
        let mut by_function: BTreeMap<u64, (u64, Vec<u64>, u64)> = BTreeMap::new();
        for (key, stats) in &rows {
            if key.via == VIA_NOT_SEEN {
                continue;
            }
            let before = self.rows.get(key);
            let invoked = stats.invoked - before.map_or(0, |b| b.invoked);
            let entry = by_function
                .entry(key.func)
                .or_insert_with(|| (0, vec![0; stats.fine.len()], 0));
            entry.0 += invoked;
            for (i, n) in stats.fine.iter().enumerate() {
                entry.1[i] += n - before.map_or(0, |b| b.fine[i]);
            }
            let max = extremes
                .iter()
                .filter(|(k, _)| k == key)
                .flat_map(|(_, per_cpu)| per_cpu.iter().map(|e| e.max))
                .max()
                .unwrap_or(0);
            entry.2 = entry.2.max(max);
        }
        self.rows = rows.into_iter().collect();
        let mut now: HashMap<String, TopRow> = HashMap::new();
        for (func, (invoked, fine, max_ns)) in by_function {
            let name = self.name(func);
            *self.callback_calls.entry(name.clone()).or_default() += invoked;
            // The interval's own extremes are not kept, only its buckets: they bound it.
            let (low, high) = occupied_range(&fine);
            let q = |q| {
                percentile_bits(&fine, CALLBACK_FINE_BITS, q, low, high.min(max_ns))
                    .map_or(0, |ns| ns as u64)
            };
            let row = now.entry(name.clone()).or_insert_with(|| TopRow {
                name,
                ..TopRow::default()
            });
            // Two addresses of one name (a function's clones): the larger figures.
            row.calls += invoked;
            row.latency = LatencyFigures {
                count: row.latency.count + invoked,
                p50_ns: row.latency.p50_ns.max(q(0.5)),
                p99_ns: row.latency.p99_ns.max(q(0.99)),
                max_ns: row.latency.max_ns.max(max_ns),
            };
        }
        // Every function invoked since tracing began stays on the screen, with its total.
        Ok(self
            .callback_calls
            .iter()
            .filter(|(_, total)| **total > 0)
            .map(|(name, total)| {
                let mut row = now.remove(name).unwrap_or_else(|| TopRow {
                    name: name.clone(),
                    ..TopRow::default()
                });
                row.total = *total;
                row
            })
            .collect())
    }

    fn name(&mut self, addr: u64) -> String {
        let symbols = &self.symbols;
        self.names
            .entry(addr)
            .or_insert_with(|| symbols.names().function_name(addr))
            .clone()
    }
}

fn merged(series: impl Iterator<Item = Series>) -> Series {
    series
        .reduce(|mut a, b| {
            a.merge(b);
            a
        })
        .unwrap_or_else(|| Series::new(Layout::Log2))
}

/// The lowest and highest values the occupied buckets of a callbacks' fine histogram can
/// hold.
fn occupied_range(fine: &[u64]) -> (u64, u64) {
    let slot_range = |slot: usize| fine_slot_range_bits(slot as u32, CALLBACK_FINE_BITS);
    let first = fine.iter().position(|&n| n > 0);
    let last = fine.iter().rposition(|&n| n > 0);
    match (first, last) {
        (Some(first), Some(last)) => {
            let (high_start, width) = slot_range(last);
            (slot_range(first).0, high_start + width.saturating_sub(1))
        }
        _ => (0, 0),
    }
}

fn figures(series: &Series) -> LatencyFigures {
    let stats = series.stats(None);
    let quantile = |q: f64| {
        stats
            .percentiles
            .iter()
            .find(|(at, _)| (*at - q).abs() < 1e-9)
            .map_or(0, |(_, ns)| *ns as u64)
    };
    LatencyFigures {
        count: stats.count,
        p50_ns: quantile(0.5),
        p99_ns: quantile(0.99),
        max_ns: stats.max_ns.unwrap_or(0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rcutrace_common::hist::fine_slot_bits;

    /// A quiet interval's percentiles come from its own buckets, never from the extremes
    /// since tracing began.
    #[test]
    fn interval_percentiles_stay_within_the_intervals_buckets() {
        let mut fine = vec![0u64; rcutrace_common::callbacks::CALLBACK_FINE_SLOTS as usize];
        for ns in [10_000_000u64, 12_000_000] {
            fine[fine_slot_bits(ns, CALLBACK_FINE_BITS) as usize] += 1;
        }
        let (low, high) = occupied_range(&fine);
        assert!((9_000_001..=10_000_000).contains(&low), "{low}");
        assert!((12_000_000..13_000_000).contains(&high), "{high}");
        let p50 = percentile_bits(&fine, CALLBACK_FINE_BITS, 0.5, low, high).unwrap();
        let p99 = percentile_bits(&fine, CALLBACK_FINE_BITS, 0.99, low, high).unwrap();
        assert!((9e6..=10.5e6).contains(&p50), "{p50}");
        assert!((12e6..=13e6).contains(&p99), "{p99}");
        assert_eq!(occupied_range(&[0; 4]), (0, 0));
    }
}

//! `rcutrace run`: one command's RCU waits put together: per function and origin (the
//! command's own threads, or the work items it caused), the time spent waiting with nested
//! waits counted once, and what an expedited grace period would have saved.

use std::collections::BTreeMap;

use rcutrace_common::followed::{ORIGIN_CAUSED_WORK, ORIGIN_COMMAND};
pub use rcutrace_common::records::{RunSummary as RunFigures, RunWait};

use super::LatencySummary;

/// What `run` reports: each waiting function's histogram statistics (as `srlat`'s), and the
/// command's account.
#[derive(Clone, Debug, PartialEq)]
pub struct RunSummary {
    pub latency: Vec<LatencySummary>,
    pub figures: RunFigures,
}

/// One completed wait.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Wait {
    /// The timed function's index.
    pub timed: u32,
    pub tid: u32,
    /// `followed::ORIGIN_*`.
    pub origin: u32,
    /// The domain waited on (an `srcu_struct`'s address), 0 where the function has none.
    pub domain: u64,
    pub start_ns: u64,
    pub nanos: u64,
}

/// The time the threads of `origin` spent inside waits, each moment of a thread once: a
/// wait inside another (synchronize_net() calling synchronize_rcu()) adds nothing.
pub fn time_waiting(waits: &[Wait], origin: u32) -> u64 {
    let mut spans: Vec<(u32, u64, u64)> = waits
        .iter()
        .filter(|w| w.origin == origin)
        .map(|w| (w.tid, w.start_ns, w.start_ns.saturating_add(w.nanos)))
        .collect();
    spans.sort_unstable();
    let mut total = 0;
    let mut open: Option<(u32, u64, u64)> = None;
    for (tid, start, end) in spans {
        match &mut open {
            Some((t, _, e)) if *t == tid && start <= *e => *e = (*e).max(end),
            _ => {
                if let Some((_, s, e)) = open {
                    total += e - s;
                }
                open = Some((tid, start, end));
            }
        }
    }
    total + open.map_or(0, |(_, s, e)| e - s)
}

/// One row per function, domain and origin that had calls: the command's first, then the
/// work it caused, each in the order `functions` names them, domains by address; `domain`
/// names a domain.
pub fn wait_rows(
    waits: &[Wait],
    functions: &[&str],
    domain: &mut dyn FnMut(u64) -> String,
) -> Vec<RunWait> {
    // The command's before its work's (ORIGIN_COMMAND < ORIGIN_CAUSED_WORK), then by
    // function and domain.
    let mut groups: BTreeMap<(u32, u32, u64), RunWait> = BTreeMap::new();
    for w in waits
        .iter()
        .filter(|w| [ORIGIN_COMMAND, ORIGIN_CAUSED_WORK].contains(&w.origin))
    {
        let Some(function) = functions.get(w.timed as usize) else {
            continue;
        };
        let row = groups
            .entry((w.origin, w.timed, w.domain))
            .or_insert_with(|| RunWait {
                function: function.to_string(),
                domain: (w.domain != 0).then(|| domain(w.domain)),
                caused_work: w.origin == ORIGIN_CAUSED_WORK,
                ..RunWait::default()
            });
        row.calls += 1;
        row.total_ns += w.nanos;
        row.max_ns = row.max_ns.max(w.nanos);
    }
    groups.into_values().collect()
}

/// The mean synchronize_rcu_expedited() of the run, in the command or its work.
pub fn expedited_mean(rows: &[RunWait]) -> Option<u64> {
    let (calls, total) = rows
        .iter()
        .filter(|r| r.function == "synchronize_rcu_expedited")
        .fold((0, 0), |(c, t), r| (c + r.calls, t + r.total_ns));
    (calls > 0).then(|| total / calls)
}

/// The waits an expedited grace period could replace: those for one normal grace period.
pub fn expeditable(function: &str) -> bool {
    function == "synchronize_rcu"
}

/// What expediting a row's calls would have saved, at the run's own expedited cost; `None`
/// where that cost is unknown or the wait is not for one grace period.
pub fn expedited_saving(row: &RunWait, expedited_mean_ns: Option<u64>) -> Option<u64> {
    let mean = expedited_mean_ns?;
    expeditable(&row.function).then(|| row.total_ns.saturating_sub(row.calls.saturating_mul(mean)))
}

/// A command line as a shell would take it back: words with anything special quoted.
pub fn command_line<S: AsRef<str>>(words: &[S]) -> String {
    words
        .iter()
        .map(|word| {
            let word = word.as_ref();
            let plain = !word.is_empty()
                && word
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_./=:,+@%".contains(c));
            if plain {
                word.to_string()
            } else {
                format!("'{}'", word.replace('\'', r"'\''"))
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wait(timed: u32, tid: u32, origin: u32, start_ns: u64, nanos: u64) -> Wait {
        Wait {
            timed,
            tid,
            origin,
            domain: 0,
            start_ns,
            nanos,
        }
    }

    #[test]
    fn nested_and_overlapping_waits_of_a_thread_count_once() {
        let waits = [
            // synchronize_net() 100..400 with synchronize_rcu() 150..350 inside it.
            wait(1, 7, ORIGIN_COMMAND, 100, 300),
            wait(0, 7, ORIGIN_COMMAND, 150, 200),
            // Later, alone.
            wait(0, 7, ORIGIN_COMMAND, 1000, 50),
            // Another thread at the same time counts: its time is its own.
            wait(0, 8, ORIGIN_COMMAND, 100, 300),
            // Work it caused is summed apart.
            wait(0, 99, ORIGIN_CAUSED_WORK, 0, 10_000),
        ];
        assert_eq!(time_waiting(&waits, ORIGIN_COMMAND), 300 + 50 + 300);
        assert_eq!(time_waiting(&waits, ORIGIN_CAUSED_WORK), 10_000);
        assert_eq!(time_waiting(&[], ORIGIN_COMMAND), 0);
    }

    #[test]
    fn rows_by_origin_then_function() {
        let waits = [
            wait(0, 7, ORIGIN_COMMAND, 0, 10),
            wait(0, 7, ORIGIN_COMMAND, 20, 30),
            wait(1, 99, ORIGIN_CAUSED_WORK, 0, 5),
        ];
        let rows = wait_rows(&waits, &["synchronize_rcu", "rcu_barrier"], &mut |_| {
            unreachable!("no domain")
        });
        assert_eq!(
            rows,
            [
                RunWait {
                    function: "synchronize_rcu".into(),
                    domain: None,
                    caused_work: false,
                    calls: 2,
                    total_ns: 40,
                    max_ns: 30,
                },
                RunWait {
                    function: "rcu_barrier".into(),
                    domain: None,
                    caused_work: true,
                    calls: 1,
                    total_ns: 5,
                    max_ns: 5,
                },
            ]
        );
    }

    #[test]
    fn srcu_waits_are_apart_by_domain() {
        let on = |domain, nanos| Wait {
            domain,
            ..wait(0, 7, ORIGIN_COMMAND, 0, nanos)
        };
        let waits = [on(0xa0, 10), on(0xb0, 20), on(0xa0, 30)];
        let rows = wait_rows(&waits, &["synchronize_srcu"], &mut |a| format!("{a:#x}"));
        let by_domain: Vec<(Option<&str>, u64, u64)> = rows
            .iter()
            .map(|r| (r.domain.as_deref(), r.calls, r.total_ns))
            .collect();
        assert_eq!(by_domain, [(Some("0xa0"), 2, 40), (Some("0xb0"), 1, 20)]);
    }

    #[test]
    fn an_expedited_saving_needs_the_runs_expedited_cost() {
        let normal = RunWait {
            function: "synchronize_rcu".into(),
            domain: None,
            caused_work: false,
            calls: 4,
            total_ns: 64_000_000,
            max_ns: 20_000_000,
        };
        let expedited = RunWait {
            function: "synchronize_rcu_expedited".into(),
            calls: 2,
            total_ns: 400_000,
            ..normal.clone()
        };
        assert_eq!(expedited_mean(std::slice::from_ref(&normal)), None);
        let mean = expedited_mean(&[normal.clone(), expedited.clone()]);
        assert_eq!(mean, Some(200_000));
        assert_eq!(expedited_saving(&normal, mean), Some(63_200_000));
        assert_eq!(expedited_saving(&normal, None), None);
        assert_eq!(expedited_saving(&expedited, mean), None);
    }

    #[test]
    fn command_lines_quote_what_a_shell_would_split() {
        assert_eq!(
            command_line(&["ip", "netns", "del", "a b", "it's", ""]),
            r"ip netns del 'a b' 'it'\''s' ''"
        );
    }
}

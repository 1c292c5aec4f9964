//! `rcutrace top`: what one refresh of the live view shows, for the last interval, and the
//! orders its tables can be sorted in.

use std::time::Duration;

/// One refresh: the interval just ended, and the state at its end.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TopFrame {
    /// How long the interval lasted, and how long tracing has run.
    pub interval: Duration,
    pub since_start: Duration,
    /// Grace periods that ended in the interval, and their latency (rcu_gp_init() to
    /// rcu_gp_cleanup()).
    pub grace_periods: u64,
    pub grace_period_latency: Option<LatencyFigures>,
    /// The grace period in progress: `Some(None)` when none is, `None` where its hooks could
    /// not be attached.
    pub grace_period_age: Option<Option<Duration>>,
    /// Callbacks queued and invoked in the interval (of those queued while tracing).
    pub callbacks_queued: u64,
    pub callbacks_invoked: u64,
    /// Callbacks queued while tracing and not invoked yet, by the CPU whose list holds them.
    pub backlog: Vec<(u32, u64)>,
    /// Callback functions with an invocation in the interval.
    pub callbacks: Vec<TopRow>,
    /// Callers that waited (synchronize_*, rcu_barrier) in the interval, by function and comm.
    pub waiters: Vec<TopRow>,
    pub readers: Readers,
}

/// Readers in the interval.
#[derive(Clone, Debug, Default, PartialEq)]
pub enum Readers {
    /// The reader probe is attached only part of the time: an estimate, with its 95% margin
    /// (`None`: too few windows to say) and the fraction of the time it was attached.
    Sampled {
        estimate: Option<u64>,
        margin: Option<u64>,
        attached_fraction: f64,
    },
    /// This kernel has no reader function to hook.
    #[default]
    Unavailable,
}

/// Latency over the interval, in nanoseconds.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct LatencyFigures {
    pub count: u64,
    pub p50_ns: u64,
    pub p99_ns: u64,
    pub max_ns: u64,
}

/// A row of the callbacks or waiters table.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TopRow {
    /// The callback function, or `function` and the waiter's `comm`.
    pub name: String,
    pub comm: Option<String>,
    /// Calls (callbacks invoked) in the interval, and since tracing began.
    pub calls: u64,
    pub total: u64,
    pub latency: LatencyFigures,
}

/// What the tables are sorted by (`s` cycles through them), largest first.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Sort {
    #[default]
    P99,
    Max,
    Calls,
}

impl Sort {
    pub fn next(self) -> Sort {
        match self {
            Sort::P99 => Sort::Max,
            Sort::Max => Sort::Calls,
            Sort::Calls => Sort::P99,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Sort::P99 => "p99",
            Sort::Max => "max",
            Sort::Calls => "calls/s",
        }
    }

    /// `rows` in this order, ties by name, so that a refresh does not reshuffle equal rows.
    pub fn sorted(self, rows: &[TopRow]) -> Vec<TopRow> {
        let mut rows = rows.to_vec();
        let key = |r: &TopRow| match self {
            Sort::P99 => r.latency.p99_ns,
            Sort::Max => r.latency.max_ns,
            Sort::Calls => r.calls,
        };
        rows.sort_by(|a, b| {
            key(b)
                .cmp(&key(a))
                .then_with(|| a.name.cmp(&b.name))
                .then_with(|| a.comm.cmp(&b.comm))
        });
        rows
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(name: &str, calls: u64, p99_ns: u64, max_ns: u64) -> TopRow {
        TopRow {
            name: name.into(),
            calls,
            latency: LatencyFigures {
                count: calls,
                p99_ns,
                max_ns,
                ..Default::default()
            },
            ..Default::default()
        }
    }

    #[test]
    fn each_sort_puts_the_largest_first_and_s_cycles_through_all() {
        let rows = [
            row("a", 5, 10, 90),
            row("b", 9, 30, 40),
            row("c", 1, 20, 50),
        ];
        let names = |sort: Sort| -> Vec<String> {
            sort.sorted(&rows).into_iter().map(|r| r.name).collect()
        };
        assert_eq!(names(Sort::P99), ["b", "c", "a"]);
        assert_eq!(names(Sort::Max), ["a", "c", "b"]);
        assert_eq!(names(Sort::Calls), ["b", "a", "c"]);
        assert_eq!(Sort::default().next().next().next(), Sort::default());
    }
}

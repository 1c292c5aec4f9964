//! Cross-checks that catch a silent zero. rcutrace's hooks are kernel-internal functions that
//! kernels inline, rename or bypass from one release to the next, and a hook that attaches
//! but never fires reads as "nothing happened". Where two hooks see the same events, their
//! counts must agree up to what the window's edges allow; a larger difference means one of
//! them missed events, and the report says so with both figures.

/// Two counts of the same events by different hooks.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CrossCheck {
    /// What `value` counts, e.g. `callbacks queued via call_rcu`.
    pub counted: String,
    pub value: u64,
    /// What it is checked against, e.g. `call_rcu() calls`.
    pub against: String,
    pub expected: u64,
    /// The largest difference that hooks which never miss can still give.
    pub bound: u64,
    /// `expected` is a ceiling, not a count of the same events: `value` may be below it by
    /// any amount, above it by no more than `bound`.
    pub at_most: bool,
}

impl CrossCheck {
    pub fn difference(&self) -> u64 {
        if self.at_most {
            self.value.saturating_sub(self.expected)
        } else {
            self.value.abs_diff(self.expected)
        }
    }

    pub fn agrees(&self) -> bool {
        self.difference() <= self.bound
    }

    /// The warning a disagreement prints, both figures in it.
    pub fn warning(&self) -> String {
        let (relation, consequence) = if self.at_most {
            (
                "exceed",
                "allowed when every hook fires: at least that many events went unseen on this \
                 kernel, and the figures that rest on them are wrong",
            )
        } else {
            (
                "and",
                "they can differ by when every hook fires: a hook missed events on this \
                 kernel, and the figures that rest on it are short",
            )
        };
        let gap = if self.at_most { "by" } else { "differ by" };
        format!(
            "{} ({}) {relation} {} ({}) {gap} {}, more than the {} {consequence}",
            self.counted,
            self.value,
            self.against,
            self.expected,
            self.difference(),
            self.bound
        )
    }

    /// The same check over two periods one after the other: the counts and the bounds add.
    pub fn add(&mut self, other: &CrossCheck) {
        // A saved file may say anything: figures stop at the largest they hold.
        self.value = self.value.saturating_add(other.value);
        self.expected = self.expected.saturating_add(other.expected);
        self.bound = self.bound.saturating_add(other.bound);
    }
}

/// The checks that disagree.
pub fn disagreeing(checks: &[CrossCheck]) -> impl Iterator<Item = &CrossCheck> {
    checks.iter().filter(|c| !c.agrees())
}

/// Merges the checks of a later period into an earlier one's, by what they count.
pub fn add_all(checks: &mut Vec<CrossCheck>, later: &[CrossCheck]) {
    for check in later {
        match checks
            .iter_mut()
            .find(|c| c.counted == check.counted && c.against == check.against)
        {
            Some(same) => same.add(check),
            None => checks.push(check.clone()),
        }
    }
}

/// One entry point of `rcutrace callbacks`: its calls, and the callbacks the queueing hooks
/// saw it queue.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EntryPoint<'a> {
    pub function: &'a str,
    pub calls: u64,
    pub queued: u64,
}

/// Callbacks seen queued through each entry point against the calls of that entry point:
/// every call queues one callback, so a queueing path the hooks do not see (an offloaded
/// CPU's bypass list, say) shows as queueings short of the calls. They may differ without
/// any hook missing by: a call in progress on each CPU as the window opens and as it closes
/// (`2 * cpus`); callers interrupted or moved to another CPU between the entry and the
/// queueing, whose callbacks count as `other` (1% of the calls); and `allowance`, what the
/// summary already counts as lost (probe hits the kernel skipped, rows lost to a full map).
pub fn callbacks_by_entry_point(
    entry_points: &[EntryPoint<'_>],
    cpus: u64,
    allowance: u64,
) -> Vec<CrossCheck> {
    entry_points
        .iter()
        .filter(|e| e.calls > 0 || e.queued > 0)
        .map(|e| CrossCheck {
            counted: format!("callbacks queued via {}", e.function),
            value: e.queued,
            against: format!("{}() calls", e.function),
            expected: e.calls,
            bound: 2 * cpus + e.calls / 100 + allowance,
            at_most: false,
        })
        .collect()
}

/// A timed function's entries against what became of them: every call that entered while
/// tracing returned with a sample, is still in flight, or is counted lost (`accounted`). A
/// return hook that never fires leaves its calls in flight where entry and return are one
/// function (each new entry then counts the last one's return lost), but where they are two
/// (`gplat`: `rcu_gp_init()` to `rcu_gp_cleanup()`) each entry replaces the last: only this
/// check sees those. There, the rare entry begun again before any end (an `rcu_gp_init()`
/// that found nothing to do) is allowed for (2, plus 1% of the entries); one function
/// accounts for every call exactly.
pub fn samples_against_entries(
    function: &str,
    entries: u64,
    accounted: u64,
    same_function: bool,
) -> CrossCheck {
    CrossCheck {
        counted: format!("{function} calls sampled, in flight or counted lost"),
        value: accounted,
        against: format!("{function} entries"),
        expected: entries,
        bound: if same_function { 0 } else { 2 + entries / 100 },
        at_most: false,
    }
}

/// `rcu_gp_init()` against `rcu_gp_fqs_loop()`: the grace-period kthread calls both once per
/// grace period. They may differ by the grace period in progress at each end of the window,
/// and by the rare `rcu_gp_init()` that finds nothing to do (1% of them).
pub fn grace_period_inits(inits: u64, fqs_loops: u64) -> CrossCheck {
    CrossCheck {
        counted: "rcu_gp_init() calls".into(),
        value: inits,
        against: "rcu_gp_fqs_loop() calls".into(),
        expected: fqs_loops,
        bound: 2 + inits.max(fqs_loops) / 100,
        at_most: false,
    }
}

/// `rcutrace gp`'s grace periods, each assembled from `rcu_gp_init()` to `rcu_gp_cleanup()`,
/// against the advance of `rcu_state.gp_seq` (read from kernel memory) from the first listed
/// to the last: every grace period in between advanced it, so they agree exactly.
pub fn grace_periods_by_gp_seq(assembled: u64, by_gp_seq: u64) -> CrossCheck {
    CrossCheck {
        counted: "grace periods assembled from rcu_gp_init() to rcu_gp_cleanup()".into(),
        value: assembled,
        against: "the advance of rcu_state.gp_seq".into(),
        expected: by_gp_seq,
        bound: 0,
        at_most: false,
    }
}

/// The callbacks `rcutrace callbacks` saw queued through `call_rcu()` and its hurried
/// cousin but never saw invoked, against what the CPUs' callback lists held (read from
/// kernel memory) just before the window closed, plus every queueing seen after that read.
/// A callback pending at the close was on a list at the read or was queued after it, so the
/// first can exceed the second only when the invocation hook missed invocations (a kprobe
/// skipped because another kprobe's handler ran on that CPU when a softirq came, which the
/// kernel does not count): at least the excess were invoked unseen. The lists' lengths also
/// count the callbacks queued before tracing, those of a batch still being invoked, and the
/// offloaded CPUs' bypass lists, which only widens the margin. Allowed for: one queueing in
/// progress on each CPU at the read (the program counts it before the kernel adds it to the
/// list's length), and `allowance`, the hits the kernel counted as skipped (the summary
/// already says so).
pub fn pending_against_lists(
    pending: u64,
    listed: u64,
    queued_since: u64,
    cpus: u64,
    allowance: u64,
) -> CrossCheck {
    CrossCheck {
        counted: "callbacks queued via call_rcu or call_rcu_hurry and pending at exit".into(),
        value: pending,
        against: "callbacks on the CPUs' lists shortly before exit, and queued since".into(),
        expected: listed + queued_since,
        bound: cpus + allowance,
        at_most: true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The figures of a 6.12 guest booted with `rcu_nocbs=all` before rcutrace hooked the
    /// bypass list, while the test module queued 300 call_rcu() and 300 call_rcu_hurry()
    /// callbacks and a flood of 10 000 call_rcu() from a kworker per CPU: every one was
    /// invoked, but the lazy ones were never seen queued, nor most of the hurried ones.
    #[test]
    fn a_bypassed_queueing_is_a_disagreement_with_both_figures() {
        let checks = callbacks_by_entry_point(
            &[
                EntryPoint {
                    function: "call_rcu",
                    calls: 10_799,
                    queued: 0,
                },
                EntryPoint {
                    function: "call_rcu_hurry",
                    calls: 304,
                    queued: 69,
                },
                EntryPoint {
                    function: "call_srcu",
                    calls: 0,
                    queued: 0,
                },
            ],
            2,
            0,
        );
        assert_eq!(checks.len(), 2, "an entry point without calls is no check");
        let wrong: Vec<(u64, u64, u64)> = disagreeing(&checks)
            .map(|c| (c.value, c.expected, c.bound))
            .collect();
        assert_eq!(wrong, [(0, 10_799, 111), (69, 304, 7)]);
        assert_eq!(
            checks[0].warning(),
            "callbacks queued via call_rcu (0) and call_rcu() calls (10799) differ by 10799, \
             more than the 111 they can differ by when every hook fires: a hook missed events \
             on this kernel, and the figures that rest on it are short"
        );
        // Hooked, the same run agrees.
        let hooked = callbacks_by_entry_point(
            &[EntryPoint {
                function: "call_rcu",
                calls: 10_799,
                queued: 10_799,
            }],
            2,
            0,
        );
        assert!(hooked[0].agrees());
    }

    #[test]
    fn edges_and_what_is_already_counted_lost_are_within_the_bound() {
        let edge = |queued, allowance| {
            callbacks_by_entry_point(
                &[EntryPoint {
                    function: "call_rcu",
                    calls: 1000,
                    queued,
                }],
                4,
                allowance,
            )[0]
            .agrees()
        };
        // 8 calls at the edges of 4 CPUs, 10 moved between entry and queueing.
        assert!(edge(982, 0));
        assert!(!edge(981, 0));
        assert!(edge(1018, 0));
        assert!(edge(971, 11));
        assert!(!edge(970, 11));
    }

    #[test]
    fn grace_periods_agree_but_for_the_edges() {
        assert!(grace_period_inits(456, 456).agrees());
        assert!(grace_period_inits(457, 455).agrees());
        assert!(!grace_period_inits(0, 456).agrees());
        assert!(!grace_period_inits(40, 45).agrees());
    }

    #[test]
    fn every_entry_is_a_sample_in_flight_or_lost() {
        assert!(samples_against_entries("synchronize_rcu", 30, 30, true).agrees());
        assert!(!samples_against_entries("synchronize_rcu", 30, 29, true).agrees());
        // gplat's end never seen: every init replaced the one before, but the last.
        let silent = samples_against_entries("rcu_gp_init", 400, 1, false);
        assert!(!silent.agrees());
        assert_eq!(silent.bound, 6);
        assert!(samples_against_entries("rcu_gp_init", 400, 396, false).agrees());
    }

    #[test]
    fn grace_periods_seen_agree_with_gp_seq_exactly() {
        assert!(grace_periods_by_gp_seq(697, 697).agrees());
        let missed = grace_periods_by_gp_seq(690, 697);
        assert!(!missed.agrees());
        assert!(missed.warning().starts_with(
            "grace periods assembled from rcu_gp_init() to rcu_gp_cleanup() (690) and the \
             advance of rcu_state.gp_seq (697) differ by 7, more than the 0"
        ));
    }

    #[test]
    fn checks_of_intervals_add_up() {
        let mut all = vec![grace_period_inits(10, 10)];
        add_all(&mut all, &[grace_period_inits(0, 20)]);
        assert_eq!(all.len(), 1);
        assert_eq!((all[0].value, all[0].expected, all[0].bound), (10, 30, 4));
        assert!(!all[0].agrees());
    }

    /// A 6.12 guest with 2 CPUs, callbacks by kprobe: 3000 module callbacks and a barrier
    /// left 53 pending at exit against empty lists (the barrier had returned); a reader held
    /// across the close left 417 pending against 417 on the lists. Fewer pending than listed
    /// is every run's normal: the lists also hold callbacks queued before tracing.
    #[test]
    fn pending_beyond_the_kernels_lists_is_a_disagreement_in_one_direction_only() {
        let missed = pending_against_lists(53, 0, 0, 2, 0);
        assert!(!missed.agrees());
        assert_eq!(missed.difference(), 53);
        assert_eq!(
            missed.warning(),
            "callbacks queued via call_rcu or call_rcu_hurry and pending at exit (53) exceed \
             callbacks on the CPUs' lists shortly before exit, and queued since (0) by 53, more \
             than the 2 allowed when every hook fires: at least that many events went unseen \
             on this kernel, and the figures that rest on them are wrong"
        );
        assert!(pending_against_lists(417, 417, 0, 2, 0).agrees());
        assert!(pending_against_lists(0, 400, 0, 2, 0).agrees());
        // What was queued after the lists were read may still be pending, and one queueing
        // per CPU may have been counted before its list's length grew.
        assert!(pending_against_lists(14, 5, 7, 2, 0).agrees());
        assert!(!pending_against_lists(15, 5, 7, 2, 0).agrees());
        // Hits the kernel counted as skipped are already reported.
        assert!(pending_against_lists(18, 5, 7, 2, 4).agrees());
    }
}

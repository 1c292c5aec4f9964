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

/// What became of an entry point's notes: each call leaves its CPU a note of the head it is
/// queueing, which the queueing hook takes when the head matches. Counted by the programs
/// and at the close, per entry point.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Notes {
    /// Notes of calls counted in the window, replaced on their CPU by another call's note
    /// before their queueing took them: a call queued by an interrupt or another task in
    /// between, a caller moved to another CPU, a queueing hit the kernel skipped. The callback
    /// counts as `other`, or was not seen queued.
    pub overwritten: u64,
    /// Notes of calls counted in the window still waiting when it closed: queued after the
    /// close, or (the caller moved) on another CPU as `other`.
    pub waiting_at_close: u64,
    /// Queueings in the window that took the note of a call made before it opened.
    pub from_before: u64,
}

impl Notes {
    /// Calls counted in the window whose queueing did not take their note.
    pub fn not_taken(&self) -> u64 {
        self.overwritten.saturating_add(self.waiting_at_close)
    }
}

/// One entry point of `rcutrace callbacks`: its calls, the callbacks the queueing hooks saw
/// it queue, and what became of its notes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EntryPoint<'a> {
    pub function: &'a str,
    pub calls: u64,
    pub queued: u64,
    pub notes: Notes,
}

/// Callbacks seen queued through each entry point against the calls of that entry point:
/// every call queues one callback, so a queueing path the hooks do not see (an offloaded
/// CPU's bypass list, say) shows as queueings short of the calls. Each call counted in the
/// window is seen queued through it exactly when its queueing takes its note and finds a row.
/// So they differ, without any hook missing, by what the programs count:
/// - the notes not taken (`Notes::not_taken`: overwritten, or waiting at the close, which
///   also covers the calls in progress as the window closes);
/// - the notes of calls made before the window taken in it (`Notes::from_before`: the calls
///   in progress as it opened);
/// - `rows_full`, queueings that took their note but found no room for a row (the summary
///   counts them lost).
///
/// A hit the kernel skipped needs no more: a skipped entry is neither a call counted nor a
/// note, and a skipped queueing leaves its note to be overwritten or waiting.
pub fn callbacks_by_entry_point(
    entry_points: &[EntryPoint<'_>],
    rows_full: u64,
) -> Vec<CrossCheck> {
    entry_points
        .iter()
        .filter(|e| e.calls > 0 || e.queued > 0)
        .map(|e| CrossCheck {
            counted: format!("callbacks queued via {}", e.function),
            value: e.queued,
            against: format!("{}() calls", e.function),
            expected: e.calls,
            bound: e
                .notes
                .not_taken()
                .saturating_add(e.notes.from_before)
                .saturating_add(rows_full),
            at_most: false,
        })
        .collect()
}

/// A timed function's entries against what became of them: every call that entered while
/// tracing returned with a sample, is still in flight, is counted lost, or found nothing to
/// do (`accounted`; an `rcu_gp_init()` that returned false). A return hook that never fires
/// leaves its calls in flight where entry and return are one function (each new entry then
/// counts the last one's return lost), but where they are two (`gplat`: `rcu_gp_init()` to
/// `rcu_gp_cleanup()`) each entry replaces the last: only this check sees those. Exact, but
/// for the returns of the entry function the kernel skipped (`found_nothing_skipped`: a call
/// that found nothing, not seen to, is replaced unseen by the next).
pub fn samples_against_entries(
    function: &str,
    entries: u64,
    accounted: u64,
    found_nothing_skipped: u64,
) -> CrossCheck {
    CrossCheck {
        counted: format!("{function} calls sampled, in flight, counted lost or finding nothing"),
        value: accounted,
        against: format!("{function} entries"),
        expected: entries,
        bound: found_nothing_skipped,
        at_most: false,
    }
}

/// `rcu_gp_init()` calls that started a grace period (those that did not return false)
/// against `rcu_gp_fqs_loop()` calls: the grace-period kthread calls the second once after
/// each of the first. One grace period may be between the two at each end of the window: at
/// the open, a loop counted without its init (or a false return without its call); at the
/// close, an init without its loop (or a call without its false return). The kthread does
/// one at a time, so the two ends differ by at most one together.
pub fn grace_period_inits(inits: u64, found_nothing: u64, fqs_loops: u64) -> CrossCheck {
    CrossCheck {
        counted: "rcu_gp_init() calls that started a grace period".into(),
        value: inits.saturating_sub(found_nothing),
        against: "rcu_gp_fqs_loop() calls".into(),
        expected: fqs_loops,
        bound: 1,
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

/// `rcutrace gp`'s expedited grace periods, each assembled from `sync_rcu_exp_select_cpus()`
/// to `rcu_exp_wait_wake()`'s return, against the advance of `rcu_state.expedited_sequence`
/// from the first listed to the last (each advances it by one grace period, as `gp_seq`).
pub fn expedited_by_sequence(assembled: u64, by_sequence: u64) -> CrossCheck {
    CrossCheck {
        counted: "expedited grace periods assembled from sync_rcu_exp_select_cpus() to \
                  rcu_exp_wait_wake()"
            .into(),
        value: assembled,
        against: "the advance of rcu_state.expedited_sequence".into(),
        expected: by_sequence,
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

    fn entry_point(function: &str, calls: u64, queued: u64, notes: Notes) -> EntryPoint<'_> {
        EntryPoint {
            function,
            calls,
            queued,
            notes,
        }
    }

    /// The figures of a 6.12 guest booted with `rcu_nocbs=all` before rcutrace hooked the
    /// bypass list, while the test module queued 300 call_rcu() and 300 call_rcu_hurry()
    /// callbacks and a flood of 10 000 call_rcu() from a kworker per CPU: every one was
    /// invoked, but the lazy ones were never seen queued, nor most of the hurried ones.
    #[test]
    fn a_bypassed_queueing_is_a_disagreement_with_both_figures() {
        let none = Notes::default();
        let checks = callbacks_by_entry_point(
            &[
                entry_point("call_rcu", 10_799, 0, none),
                entry_point("call_rcu_hurry", 304, 69, none),
                entry_point("call_srcu", 0, 0, none),
            ],
            0,
        );
        assert_eq!(checks.len(), 2, "an entry point without calls is no check");
        let wrong: Vec<(u64, u64, u64)> = disagreeing(&checks)
            .map(|c| (c.value, c.expected, c.bound))
            .collect();
        assert_eq!(wrong, [(0, 10_799, 0), (69, 304, 0)]);
        assert_eq!(
            checks[0].warning(),
            "callbacks queued via call_rcu (0) and call_rcu() calls (10799) differ by 10799, \
             more than the 0 they can differ by when every hook fires: a hook missed events \
             on this kernel, and the figures that rest on it are short"
        );
        // Hooked, the same run agrees.
        let hooked = callbacks_by_entry_point(&[entry_point("call_rcu", 10_799, 10_799, none)], 0);
        assert!(hooked[0].agrees());
    }

    #[test]
    fn the_bound_is_what_the_programs_counted_and_no_more() {
        let notes = Notes {
            overwritten: 3,
            waiting_at_close: 2,
            from_before: 1,
        };
        assert_eq!(notes.not_taken(), 5);
        let agrees = |calls, queued, notes, rows_full| {
            callbacks_by_entry_point(&[entry_point("call_rcu", calls, queued, notes)], rows_full)[0]
                .agrees()
        };
        // Every note taken: exactly as many queued as called.
        assert!(agrees(1000, 1000, Notes::default(), 0));
        assert!(!agrees(1000, 999, Notes::default(), 0));
        assert!(!agrees(1000, 1001, Notes::default(), 0));
        // Five notes not taken, one taken from before the window: 996 queued. The bound
        // is their sum (6), the one difference judged whichever way it goes.
        assert!(agrees(1000, 996, notes, 0));
        assert!(agrees(1000, 994, notes, 0));
        assert!(!agrees(1000, 993, notes, 0));
        // Queueings that found no row are the summary's loss.
        assert!(agrees(1000, 990, notes, 4));
        assert!(!agrees(1000, 989, notes, 4));
        // A call in progress as the window opened, none at its close: one more queued.
        let from_before = Notes {
            from_before: 1,
            ..Notes::default()
        };
        assert!(agrees(1000, 1001, from_before, 0));
        assert!(!agrees(1000, 1002, from_before, 0));
    }

    #[test]
    fn grace_periods_agree_but_for_the_edges() {
        assert!(grace_period_inits(456, 0, 456).agrees());
        // One grace period between its init and its loop at the close.
        assert!(grace_period_inits(457, 0, 456).agrees());
        // Three inits that found nothing, told apart.
        assert!(grace_period_inits(459, 3, 456).agrees());
        assert!(!grace_period_inits(459, 0, 456).agrees());
        assert!(!grace_period_inits(457, 0, 455).agrees());
        assert!(!grace_period_inits(0, 0, 456).agrees());
    }

    #[test]
    fn every_entry_is_a_sample_in_flight_or_lost() {
        assert!(samples_against_entries("synchronize_rcu", 30, 30, 0).agrees());
        assert!(!samples_against_entries("synchronize_rcu", 30, 29, 0).agrees());
        // gplat's end never seen: every init replaced the one before, but the last.
        let silent = samples_against_entries("rcu_gp_init", 400, 1, 0);
        assert!(!silent.agrees());
        assert_eq!(silent.bound, 0);
        assert!(!samples_against_entries("rcu_gp_init", 400, 399, 0).agrees());
        // A return of rcu_gp_init() the kernel skipped: one call replaced unseen.
        assert!(samples_against_entries("rcu_gp_init", 400, 399, 1).agrees());
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
        let mut all = vec![grace_period_inits(10, 0, 10)];
        add_all(&mut all, &[grace_period_inits(0, 0, 20)]);
        assert_eq!(all.len(), 1);
        assert_eq!((all[0].value, all[0].expected, all[0].bound), (10, 30, 2));
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

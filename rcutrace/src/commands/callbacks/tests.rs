use super::*;
use crate::render::Format;
use rcutrace_common::hist::{fine_slot_bits, log2_slot};

const FIX_CB: u64 = 0xffff_ffff_8110_0000;
const MOD_CB: u64 = 0xffff_ffff_c040_0000;
const OLD_CB: u64 = 0xffff_ffff_8120_0000;

fn key(func: u64, via: Via) -> CallbackKey {
    CallbackKey { func, via, _pad: 0 }
}

fn stats(queued: u64, latencies_ms: &[u64]) -> CallbackStats {
    let mut s = CallbackStats {
        queued,
        queued_unrecorded: 0,
        invoked: 0,
        invoked_unpaired: 0,
        requeued: 0,
        sum_ns: 0,
        display: [0; LOG2_SLOTS as usize],
        fine: [0; CALLBACK_FINE_SLOTS as usize],
    };
    for &ms in latencies_ms {
        s.invoked += 1;
        s.sum_ns += ms * 1_000_000;
        s.display[log2_slot(ms as i64) as usize] += 1;
        s.fine[fine_slot_bits(ms * 1_000_000, CALLBACK_FINE_BITS) as usize] += 1;
    }
    s
}

fn unpaired(n: u64) -> CallbackStats {
    CallbackStats {
        invoked_unpaired: n,
        ..stats(0, &[])
    }
}

fn raw() -> Raw {
    Raw {
        rows: vec![
            (key(FIX_CB, VIA_CALL_RCU), stats(3, &[4, 6])),
            (key(FIX_CB, VIA_CALL_RCU_HURRY), stats(5, &[1, 1, 2, 3, 20])),
            (key(MOD_CB, VIA_CALL_RCU), stats(2, &[9])),
            (key(MOD_CB, VIA_NOT_SEEN), unpaired(7)),
            (key(OLD_CB, VIA_NOT_SEEN), unpaired(4)),
        ],
        extremes: vec![(
            key(FIX_CB, VIA_CALL_RCU_HURRY),
            vec![
                Extremes {
                    min_inverted: !1_000_000,
                    max: 3_000_000,
                },
                Extremes {
                    min_inverted: !2_000_000,
                    max: 20_000_000,
                },
                Extremes::default(),
            ],
        )],
        pending: vec![
            Pending {
                func: FIX_CB,
                queued_ns: 1,
                via: VIA_CALL_RCU,
                cpu: 1,
            },
            Pending {
                func: MOD_CB,
                queued_ns: 1,
                via: VIA_CALL_RCU,
                cpu: 1,
            },
        ],
        // Per CPU, adding up to the rows' columns: QUEUED, INVOKED, kvfree, three
        // losses, BEFORE; then cgroups lost and rcutrace's own queueings.
        totals: vec![
            vec![6, 4],
            vec![5, 3],
            vec![0, 9],
            vec![0, 0],
            vec![0, 0],
            vec![0, 0],
            vec![7, 4],
            vec![0, 0],
            vec![2, 12],
        ],
        queued_by: Vec::new(),
        kvfree_traced: true,
        entry_points_not_traced: vec!["call_rcu_tasks_rude".into()],
        entry_calls: vec![
            (VIA_CALL_RCU, 5, Notes::default()),
            (VIA_CALL_RCU_HURRY, 5, Notes::default()),
        ],
        missed_by_kernel: 0,
        missed_by_kprobe_layer: 0,
        invocations_missed: 0,
        lists_at_close: None,
    }
}

fn names() -> BTreeMap<u64, String> {
    BTreeMap::from([
        (FIX_CB, "fix_cb".to_string()),
        (MOD_CB, "rcutrace_test_cb [rcutrace_test]".to_string()),
    ])
}

fn summary(report: &Report) -> &CallbacksSummary {
    match &report.summary {
        Summary::Callbacks(s) => s,
        other => panic!("not a callbacks summary: {other:?}"),
    }
}

fn options(top: usize, by_cpu: bool) -> Options {
    Options {
        unit: Unit::Ms,
        top,
        by_cpu,
    }
}

#[test]
fn queueings_by_cgroup_add_up_and_keep_what_had_no_room() {
    let mut raw = raw();
    let queued = |by, func| QueuedBy { by, func };
    // One of the cgroups was removed; the map had no room for 2 more.
    raw.queued_by = vec![
        (queued(1, FIX_CB), 4),
        (queued(7, FIX_CB), 3),
        (queued(7, MOD_CB), 5),
        (queued(9, OLD_CB), 2),
    ];
    raw.totals[TOTAL_LOST_QUEUED_BY_FULL as usize] = vec![0, 2];
    let mut path = |id: u64| match id {
        1 => "/".to_string(),
        7 => "/a".to_string(),
        _ => format!("[cgroup {id}, removed]"),
    };
    let mut map = |top| match queued_by_map(&raw, &names(), top, QueuedByKind::Cgroup, &mut path) {
        Map::Count(map) => map,
        other => panic!("a count map expected: {other:?}"),
    };
    let all = map(0);
    assert_eq!(all.name, "@cgroup_queued");
    assert_eq!(
        all.entries,
        vec![
            ("/, fix_cb".into(), 4),
            ("/a, fix_cb".into(), 3),
            ("/a, rcutrace_test_cb [rcutrace_test]".into(), 5),
            ("[cgroup 9, removed], 0xffffffff81200000".into(), 2),
            ("[cgroup map full]".into(), 2),
        ]
    );
    let two = map(2);
    assert_eq!(
        two.entries,
        vec![
            ("/a, rcutrace_test_cb [rcutrace_test]".into(), 5),
            ("/, fix_cb".into(), 4),
            ("[other: 3 keys]".into(), 7),
        ]
    );
}

/// Only what normal RCU's entry points queued is set against its lists; everything
/// queued after the lists were read (10 by the close, 7 at the read) may still be
/// pending, and so may one queueing per CPU (2) in progress at the read.
#[test]
fn pending_callbacks_are_checked_against_the_lists_read_before_the_close() {
    let mut raw = raw();
    raw.pending.push(Pending {
        func: MOD_CB,
        queued_ns: 1,
        via: VIA_CALL_SRCU,
        cpu: 0,
    });
    for _ in 0..3 {
        raw.pending.push(Pending {
            func: MOD_CB,
            queued_ns: 1,
            via: VIA_CALL_RCU_HURRY,
            cpu: 1,
        });
    }
    let summary_checks = |raw: &Raw| {
        let report = assemble(raw, &names(), &options(0, false), Duration::from_secs(5));
        summary(&report).cross_checks.clone()
    };
    assert!(
        summary_checks(&raw).iter().all(|c| !c.at_most),
        "no lists, no check"
    );
    raw.lists_at_close = Some(ListsAtClose {
        queued_before: 7,
        listed: 0,
    });
    let check = pending_check(&raw).unwrap();
    assert_eq!(
        (check.value, check.expected, check.bound, check.agrees()),
        (5, 3, 2, true)
    );
    raw.lists_at_close = Some(ListsAtClose {
        queued_before: 10,
        listed: 0,
    });
    let checks = summary_checks(&raw);
    let check = checks.iter().find(|c| c.at_most).unwrap();
    assert_eq!((check.value, check.expected, check.agrees()), (5, 0, false));
    // Hits the kernel counted as skipped are on the not-timed line already.
    raw.missed_by_kernel = 3;
    assert!(pending_check(&raw).unwrap().agrees());
}

#[test]
fn rows_are_most_queued_first_with_unseen_queueings_attributed() {
    let report = assemble(&raw(), &names(), &options(0, false), Duration::from_secs(5));
    let s = summary(&report);
    let rows: Vec<(&str, &str, u64, u64, u64, u64)> = s
        .rows
        .iter()
        .map(|r| {
            (
                r.function.as_str(),
                r.via.as_str(),
                r.queued,
                r.invoked,
                r.pending_at_exit,
                r.queued_before_tracing,
            )
        })
        .collect();
    assert_eq!(
        rows,
        vec![
            ("fix_cb", "call_rcu_hurry", 5, 5, 0, 0),
            ("fix_cb", "call_rcu", 3, 2, 1, 0),
            // The only row of its function takes the invocations queued before tracing.
            ("rcutrace_test_cb [rcutrace_test]", "call_rcu", 2, 1, 1, 7),
            // Never seen queued: a row of its own, named by address without a symbol.
            ("0xffffffff81200000", "?", 0, 0, 0, 4),
        ]
    );
    assert_eq!(s.totals.queued_before_tracing, 11);
    assert_eq!(s.totals.queued, 10);
    assert_eq!(s.totals.kvfree_queued, Some(9));
    let hurry = &s.rows[0].latency;
    assert_eq!(
        (hurry.count, hurry.min_ns, hurry.max_ns),
        (5, Some(1_000_000), Some(20_000_000))
    );
    assert_eq!(hurry.mean_ns, Some(5_400_000.0));
    assert_eq!(s.rows[3].latency.count, 0);
    // Each entry point's calls against the callbacks seen queued through it, over
    // every row: both agree.
    let checks: Vec<(&str, u64, u64)> = s
        .cross_checks
        .iter()
        .map(|c| (c.counted.as_str(), c.value, c.expected))
        .collect();
    assert_eq!(
        checks,
        [
            ("callbacks queued via call_rcu", 5, 5),
            ("callbacks queued via call_rcu_hurry", 5, 5)
        ]
    );
    assert!(s.cross_checks.iter().all(|c| c.agrees()));
}

/// Callbacks rcutrace itself queued are in no row and said apart, only when there are any.
#[test]
fn own_queueings_are_said_apart() {
    let report = assemble(&raw(), &names(), &options(0, false), Duration::from_secs(5));
    let s = summary(&report);
    assert_eq!(s.totals.own_queued, 14);
    assert_eq!(s.totals.queued, 10);
    let text = crate::render::output(Format::Text, &report);
    assert!(
        text.contains(
            "  not counted, as rcutrace's own doing: 14 callbacks its attaching, reading \
             and detaching queued\n"
        ),
        "{text}"
    );
    let mut none = raw();
    none.totals[TOTAL_OWN_QUEUED as usize] = vec![0, 0];
    let report = assemble(&none, &names(), &options(0, false), Duration::from_secs(5));
    assert!(!crate::render::output(Format::Text, &report).contains("own doing"));
}

/// Only a counted call's note that no queueing took is waiting: not a taken one (head
/// 0), not one made before the window or by rcutrace itself, not another entry point's.
#[test]
fn notes_waiting_at_the_close_are_counted_calls_untaken() {
    let note = |head, via, counted| Caller {
        head,
        via,
        counted,
        domain: 0,
    };
    let cpus = [
        note(0xffff_8880_0000_1000, VIA_CALL_RCU, 1),
        note(0, VIA_CALL_RCU, 1),
        note(0xffff_8880_0000_2000, VIA_CALL_RCU, 0),
        note(0xffff_8880_0000_3000, VIA_CALL_SRCU, 1),
        note(0xffff_8880_0000_4000, VIA_CALL_RCU, 1),
    ];
    assert_eq!(waiting_at_close(&cpus, VIA_CALL_RCU), 2);
    assert_eq!(waiting_at_close(&cpus, VIA_CALL_SRCU), 1);
    assert_eq!(waiting_at_close(&cpus, VIA_CALL_RCU_HURRY), 0);
}

/// Notes not taken are the bound of their entry point's check, and said on a line of
/// their own.
#[test]
fn notes_not_taken_bound_the_check_and_are_said() {
    let mut raw = raw();
    raw.entry_calls[0] = (
        VIA_CALL_RCU,
        8,
        Notes {
            overwritten: 2,
            waiting_at_close: 1,
            from_before: 0,
        },
    );
    let report = assemble(&raw, &names(), &options(0, false), Duration::from_secs(5));
    let s = summary(&report);
    assert_eq!(
        (s.cross_checks[0].bound, s.cross_checks[0].agrees()),
        (3, true)
    );
    let text = crate::render::output(Format::Text, &report);
    assert!(
        text.contains(
            "  calls whose queueing did not take their note (callback via other, or queued \
             after the close): call_rcu 3 of 8 calls (2 overwritten on their CPU, 1 waiting \
             at the close; 0 queued from a call before tracing)\n"
        ),
        "{text}"
    );
    raw.entry_calls[0].1 = 9;
    let report = assemble(&raw, &names(), &options(0, false), Duration::from_secs(5));
    assert!(!summary(&report).cross_checks[0].agrees());
    let json = crate::render::output(Format::Json, &report);
    assert!(
        json.contains(
            r#""entry_points": [{"entry_point": "call_rcu", "calls": 9, "notes_overwritten": 2, "notes_waiting_at_close": 1, "notes_from_before": 0}"#
        ),
        "{json}"
    );
}

/// An offloaded CPU's bypass list unhooked: call_rcu() was called, its callbacks were
/// invoked, none was seen queued. The text says so, with both figures.
#[test]
fn queueings_short_of_the_calls_print_a_warning() {
    let mut raw = raw();
    raw.entry_calls = vec![
        (VIA_CALL_RCU, 305, Notes::default()),
        (VIA_CALL_RCU_HURRY, 5, Notes::default()),
    ];
    let report = assemble(&raw, &names(), &options(2, false), Duration::from_secs(5));
    let s = summary(&report);
    assert!(!s.cross_checks[0].agrees());
    assert!(s.cross_checks[1].agrees());
    let text = crate::render::output(crate::render::Format::Text, &report);
    let warnings: Vec<&str> = text.lines().filter(|l| l.contains("WARNING")).collect();
    assert_eq!(warnings.len(), 1, "{text}");
    assert!(
        warnings[0].starts_with(
            "  WARNING: callbacks queued via call_rcu (5) and call_rcu() calls (305) differ \
             by 300, more than the 0 "
        ),
        "{text}"
    );
    let json = crate::render::output(crate::render::Format::Json, &report);
    assert!(json.contains(r#""agrees": false"#), "{json}");
}

#[test]
fn top_limits_rows_and_histograms_and_merges_entry_points() {
    let report = assemble(&raw(), &names(), &options(2, false), Duration::from_secs(5));
    let s = summary(&report);
    assert_eq!(s.rows.len(), 2);
    assert_eq!(s.rows_not_shown, 2);
    assert_eq!(
        s.not_shown,
        CallbackCounts {
            queued: 2,
            invoked: 1,
            pending_at_exit: 1,
            queued_before_tracing: 11,
        }
    );
    let [Map::Hist(hist)] = report.maps.as_slice() else {
        panic!("one histogram expected: {:?}", report.maps);
    };
    // Both rows are fix_cb: one histogram with all 7 samples.
    assert_eq!(
        (hist.name.as_str(), hist.key.as_deref()),
        ("@cblat", Some("fix_cb"))
    );
    assert_eq!(hist.total(), 7);
}

#[test]
fn per_cpu_totals_leave_out_idle_cpus() {
    let report = assemble(&raw(), &names(), &options(0, true), Duration::from_secs(5));
    let counts: Vec<(&str, Vec<(String, u64)>)> = report
        .maps
        .iter()
        .filter_map(|m| match m {
            Map::Count(c) => Some((c.name.as_str(), c.entries.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(
        counts,
        vec![
            ("@cpu_queued", vec![("0".into(), 6), ("1".into(), 4)]),
            ("@cpu_invoked", vec![("0".into(), 5), ("1".into(), 3)]),
            ("@cpu_before", vec![("0".into(), 7), ("1".into(), 4)]),
            ("@cpu_pending", vec![("1".into(), 2)]),
        ]
    );
}

#[test]
fn per_cpu_totals_of_many_cpus_fold_past_the_top_and_add_up() {
    let mut raw = raw();
    // 384 CPUs, CPU n queueing n + 1 callbacks.
    raw.totals[TOTAL_QUEUED as usize] = (1..=384).collect();
    let report = assemble(&raw, &names(), &options(10, true), Duration::from_secs(5));
    let queued = report
        .maps
        .iter()
        .find_map(|m| match m {
            Map::Count(c) if c.name == "@cpu_queued" => Some(c.entries.clone()),
            _ => None,
        })
        .expect("@cpu_queued");
    assert_eq!(queued.len(), 11);
    assert_eq!(queued[0], ("383".to_string(), 384));
    assert_eq!(queued[9], ("374".to_string(), 375));
    assert_eq!(
        queued[10],
        ("[other: 374 keys]".to_string(), (1..=374).sum())
    );
    assert_eq!(
        queued.iter().map(|(_, n)| n).sum::<u64>(),
        (1..=384).sum::<u64>()
    );
}

/// Interrupted half a second in: nothing queued while tracing was invoked yet, and the
/// invocations seen were of callbacks queued before. The total line must say 0 invoked,
/// as the column does, and name the others as BEFORE.
#[test]
fn every_total_is_the_sum_of_its_column() {
    let raw = Raw {
        rows: vec![
            (key(FIX_CB, VIA_CALL_RCU), stats(20, &[])),
            (key(FIX_CB, VIA_NOT_SEEN), unpaired(30)),
            (key(MOD_CB, VIA_CALL_RCU_HURRY), stats(16, &[])),
            (key(OLD_CB, VIA_NOT_SEEN), unpaired(5)),
        ],
        pending: (0..36)
            .map(|i| Pending {
                func: if i < 20 { FIX_CB } else { MOD_CB },
                queued_ns: 1,
                via: if i < 20 {
                    VIA_CALL_RCU
                } else {
                    VIA_CALL_RCU_HURRY
                },
                cpu: i % 2,
            })
            .collect(),
        totals: vec![
            vec![18, 18],
            vec![0, 0],
            vec![0, 0],
            vec![0, 0],
            vec![0, 0],
            vec![0, 0],
            vec![20, 15],
        ],
        ..Raw::default()
    };
    for top in [0, 1] {
        let report = assemble(&raw, &names(), &options(top, true), Duration::from_secs(1));
        let s = summary(&report);
        let all = CallbackCounts::of(&s.rows);
        let t = &s.totals;
        assert_eq!(
            (
                all.queued + s.not_shown.queued,
                all.invoked + s.not_shown.invoked,
                all.pending_at_exit + s.not_shown.pending_at_exit,
                all.queued_before_tracing + s.not_shown.queued_before_tracing,
            ),
            (
                t.queued,
                t.invoked,
                t.pending_at_exit,
                t.queued_before_tracing
            )
        );
        assert_eq!(
            (
                t.queued,
                t.invoked,
                t.pending_at_exit,
                t.queued_before_tracing
            ),
            (36, 0, 36, 35)
        );
        let per_cpu = |name: &str| -> u64 {
            report
                .maps
                .iter()
                .find_map(|m| match m {
                    Map::Count(c) if c.name == name => Some(c.entries.iter().map(|(_, n)| n).sum()),
                    _ => None,
                })
                .unwrap()
        };
        assert_eq!(
            [
                per_cpu("@cpu_queued"),
                per_cpu("@cpu_invoked"),
                per_cpu("@cpu_pending"),
                per_cpu("@cpu_before"),
            ],
            [36, 0, 36, 35]
        );
        let text = crate::render::output(crate::render::Format::Text, &report);
        assert!(
            text.contains("\n  all rows: 36 queued, 0 invoked, 36 pending, 35 before\n"),
            "{text}"
        );
    }
}

#[test]
fn queueings_by_srcu_domain_are_named_by_their_domain() {
    let mut raw = raw();
    raw.queued_by = vec![
        (
            QueuedBy {
                by: 0xa0,
                func: FIX_CB,
            },
            10,
        ),
        (
            QueuedBy {
                by: 0xb0,
                func: FIX_CB,
            },
            2,
        ),
    ];
    raw.totals[TOTAL_LOST_QUEUED_BY_FULL as usize] = vec![1, 0];
    let mut domain = |address: u64| match address {
        0xa0 => "rcutrace_test_srcu [rcutrace_test]".to_string(),
        other => format!("{other:#x}"),
    };
    let Map::Count(map) = queued_by_map(&raw, &names(), 0, QueuedByKind::Srcu, &mut domain) else {
        panic!("a count map expected");
    };
    assert_eq!(map.name, "@srcu_queued");
    assert_eq!(
        map.entries,
        vec![
            ("0xb0, fix_cb".into(), 2),
            ("[domain map full]".into(), 1),
            ("rcutrace_test_srcu [rcutrace_test], fix_cb".into(), 10),
        ]
    );
}

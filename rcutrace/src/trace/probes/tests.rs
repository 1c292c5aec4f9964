use super::*;

#[test]
fn head_masks_name_the_queueing_slots() {
    let (normal, tasks) = head_first_slots();
    let slot = |name: &str| {
        COUNTED
            .iter()
            .find(|c| c.function() == name)
            .unwrap()
            .slot()
    };
    for f in ["call_rcu", "call_rcu_hurry", "kvfree_call_rcu"] {
        assert_ne!(normal & 1 << slot(f), 0, "{f}");
    }
    for f in [
        "call_rcu_tasks",
        "call_rcu_tasks_rude",
        "call_rcu_tasks_trace",
    ] {
        assert_ne!(tasks & 1 << slot(f), 0, "{f}");
    }
    assert_eq!(normal & tasks, 0);
    // call_srcu's head is its second argument, and waiting functions queue none.
    assert_eq!((normal | tasks) & 1 << slot("call_srcu"), 0);
    assert_eq!((normal | tasks) & 1 << slot("synchronize_rcu"), 0);
    assert_eq!((normal | tasks).count_ones(), 6);
}

#[test]
fn own_work_hooks_are_kprobes_only() {
    for probe in OWN_WORK {
        let plan = plan(probe, AttachChoice::Fentry, Keys::Plain);
        assert!(
            plan.iter().all(|(method, _)| *method == Method::Kprobe),
            "{}: {plan:?}",
            probe.function
        );
        assert!(!plan.is_empty(), "{}", probe.function);
    }
    for essential in OWN_WORK_ESSENTIAL {
        assert!(
            OWN_WORK.iter().any(|p| p.function == *essential),
            "{essential}"
        );
    }
}

fn counted_probe(function: &str) -> Probe {
    COUNTED
        .iter()
        .find(|c| c.function() == function)
        .unwrap()
        .probe
}

fn plan_methods(probe: &Probe, choice: AttachChoice) -> Vec<Method> {
    plan(probe, choice, Keys::Plain)
        .into_iter()
        .map(|(m, _)| m)
        .collect()
}

#[test]
fn auto_prefers_trampolines_then_falls_back() {
    let plan = plan(&counted_probe("call_rcu"), AttachChoice::Auto, Keys::Plain);
    assert_eq!(
        plan,
        vec![
            (Method::KprobeMulti, "count_multi_kprobe".to_string()),
            (Method::Fentry, "count_1_fentry".to_string()),
            (Method::Kprobe, "count_1_kprobe".to_string())
        ]
    );
    let exit = plan_methods(&GP_LATENCY.exit, AttachChoice::Auto);
    assert_eq!(exit, vec![Method::Fexit, Method::Kretprobe]);
    assert_eq!(
        GP_LATENCY.exit.program(Method::Fexit).as_deref(),
        Some("timed_0_return_fexit")
    );
}

#[test]
fn callbacks_attach_queueing_first_and_name_each_entry_point_once() {
    let order = CALLBACKS.in_attach_order();
    assert_eq!(
        order[..4],
        [
            CALLBACKS.queue,
            CALLBACKS.bypass,
            CALLBACKS.bypass_flush,
            CALLBACKS.barrier
        ]
    );
    assert_eq!(order.len(), 6 + CALLBACKS.entry_points.len());
    let mut vias: Vec<_> = CALLBACKS.entry_points.iter().map(|(_, v)| *v).collect();
    vias.sort();
    vias.dedup();
    assert_eq!(vias.len(), CALLBACKS.entry_points.len());
    for (probe, via) in CALLBACKS.entry_points {
        // The entry point's printed name is its function's.
        assert_eq!(callbacks::VIA_NAMES[via as usize], probe.function);
    }
    assert_eq!(
        plan(&CALLBACKS.invoke, AttachChoice::Auto, Keys::Plain),
        vec![
            (Method::Fexit, "callbacks_dequeue_fexit".to_string()),
            (Method::Kretprobe, "callbacks_dequeue_kretprobe".to_string())
        ]
    );
    assert_eq!(
        CALLBACKS.queue.program(Method::Kprobe).as_deref(),
        Some("callbacks_enqueue_kprobe")
    );
    assert_eq!(
        plan(&CALLBACKS.bypass_flush, AttachChoice::Auto, Keys::Plain),
        vec![
            (Method::Fentry, "callbacks_bypass_flush_fentry".to_string()),
            (Method::Kprobe, "callbacks_bypass_flush_kprobe".to_string())
        ]
    );
}

#[test]
fn grace_period_hooks_are_kprobes_whatever_is_asked_but_the_report_and_milestones() {
    let trampolined = [
        GRACE_PERIODS.report,
        GRACE_PERIODS.init,
        GRACE_PERIODS.init_return,
        GRACE_PERIODS.cleanup,
        GRACE_PERIODS.cleanup_return,
    ];
    for probe in GRACE_PERIODS.in_attach_order() {
        if trampolined.contains(&probe) {
            continue;
        }
        for choice in [
            AttachChoice::Auto,
            AttachChoice::Fentry,
            AttachChoice::Kprobe,
        ] {
            // Under `--attach auto`, the entries go on the kprobe-multi link first where the
            // kernel has one, but for the tick and the context switch.
            let methods = plan_methods(&probe, choice);
            let hot = [GRACE_PERIODS.tick, GRACE_PERIODS.context_switch].contains(&probe);
            let batched = choice == AttachChoice::Auto && probe.side == Side::Entry && !hot;
            let expected: &[Method] = match probe.side {
                Side::Entry if batched => &[Method::KprobeMulti, Method::Kprobe],
                Side::Entry => &[Method::Kprobe],
                Side::Return => &[Method::Kretprobe],
            };
            assert_eq!(methods, expected, "{} {choice:?}", probe.function);
            assert_eq!(
                plan_on(&probe, choice, Keys::Plain, false)
                    .into_iter()
                    .map(|(method, _)| method)
                    .collect::<Vec<_>>(),
                [if probe.side == Side::Entry {
                    Method::Kprobe
                } else {
                    Method::Kretprobe
                }],
                "{} {choice:?} without kprobe-multi links",
                probe.function
            );
        }
    }
    // The report is hooked by trampoline where the kernel allows, else by kprobe.
    assert_eq!(
        plan(&GRACE_PERIODS.report, AttachChoice::Auto, Keys::Plain),
        vec![
            (Method::Fentry, "gp_report_fentry".to_string()),
            (Method::Kprobe, "gp_report_kprobe".to_string())
        ]
    );
    // So are the kthread's milestones: every one a grace period is assembled from.
    assert_eq!(
        plan(&GRACE_PERIODS.init_return, AttachChoice::Auto, Keys::Plain),
        vec![
            (Method::Fexit, "gp_init_fexit".to_string()),
            (Method::Kretprobe, "gp_init_kretprobe".to_string())
        ]
    );
    assert_eq!(
        plan(&GRACE_PERIODS.cleanup, AttachChoice::Kprobe, Keys::Plain),
        vec![(Method::Kprobe, "gp_cleanup_kprobe".to_string())]
    );
    for probe in GRACE_PERIODS_NEEDED {
        assert_eq!(
            plan_methods(probe, AttachChoice::Auto).len(),
            2,
            "{}",
            probe.function
        );
    }
    assert_eq!(
        GRACE_PERIODS.tick.program(Method::Kprobe).as_deref(),
        Some("gp_tick_kprobe")
    );
    let all = GRACE_PERIODS.in_attach_order();
    assert!(GRACE_PERIODS_NEEDED.iter().all(|p| all.contains(p)));
    // The kthread's milestones go in last, init's entry the very last.
    assert_eq!(all.last(), Some(&GRACE_PERIODS.init));
}

#[test]
fn a_tracepoint_is_attached_as_one_whatever_is_asked() {
    assert_eq!(
        KERNEL_STALL_WARNING.tracepoint(),
        Some(("rcu", "rcu_stall_warning"))
    );
    for choice in [
        AttachChoice::Auto,
        AttachChoice::Fentry,
        AttachChoice::Kprobe,
    ] {
        assert_eq!(
            plan(&KERNEL_STALL_WARNING, choice, Keys::Stacks),
            [(
                Method::Tracepoint,
                "gp_stall_warning_tracepoint".to_string()
            )]
        );
    }
    assert_eq!(KERNEL_STALL_WARNING.program(Method::Kprobe), None);
    assert_eq!(GRACE_PERIODS.tick.program(Method::Tracepoint), None);
}

#[test]
fn stage_hooks_are_kprobes_named_for_their_programs() {
    let mut all = STAGES.expedited_needed().to_vec();
    all.extend([
        STAGES.sync,
        STAGES.queue_call_rcu,
        STAGES.queue_call_rcu_hurry,
        STAGES.wakeme,
        STAGES.exp_work,
        STAGES.exp_ipi,
    ]);
    for probe in all {
        for choice in [AttachChoice::Auto, AttachChoice::Fentry] {
            let methods = plan_methods(&probe, choice);
            assert!(
                matches!(methods[..], [Method::Kprobe] | [Method::Kretprobe]),
                "{}: {methods:?}",
                probe.function
            );
        }
    }
    assert_eq!(
        STAGES.exp_select_end.program(Method::Kretprobe).as_deref(),
        Some("stages_exp_select_kretprobe")
    );
    assert_eq!(
        STAGES
            .queue_call_rcu_hurry
            .program(Method::Kprobe)
            .as_deref(),
        Some("stages_queue_call_rcu_hurry_kprobe")
    );
    // gp's milestones, init's entry last, tried by kprobe first.
    let init = GRACE_PERIOD_BOUNDS[3];
    assert_eq!(
        (init.function, init.side, init.programs),
        (
            GRACE_PERIODS.init.function,
            GRACE_PERIODS.init.side,
            GRACE_PERIODS.init.programs
        )
    );
    for bound in GRACE_PERIOD_BOUNDS {
        assert_eq!(
            plan_methods(&bound, AttachChoice::Auto)[0],
            if bound.side == Side::Entry {
                Method::Kprobe
            } else {
                Method::Kretprobe
            },
            "{}",
            bound.function
        );
    }
}

/// Under `--attach auto` with plain keys, every counted function but the reader is tried first
/// on one kprobe-multi link (cookie: its slot), whose program aya does not load; forced
/// methods, stack keys and the other families never are.
#[test]
fn counted_functions_share_a_kprobe_multi_link_first() {
    let all: Vec<Probe> = counted_functions(CountedSet::All)
        .map(|c| c.probe)
        .collect();
    for probe in &all {
        let first = plan(probe, AttachChoice::Auto, Keys::Plain)[0].0;
        let is_reader = probe.function == "__rcu_read_lock";
        assert_eq!(first == Method::KprobeMulti, !is_reader, "{probe:?}");
        if let Programs::Counter(slot) = probe.programs {
            assert_eq!(probe.multi_cookie(), u64::from(slot));
        }
        for choice in [AttachChoice::Kprobe, AttachChoice::Fentry] {
            assert!(!plan_methods(probe, choice).contains(&Method::KprobeMulti));
        }
        let stacks = plan(probe, AttachChoice::Auto, Keys::Stacks);
        assert!(stacks.iter().all(|(m, _)| *m != Method::KprobeMulti));
    }
    for other in [GP_LATENCY.entry, GP_INIT_FOUND_NOTHING, CALLBACKS.invoke] {
        assert!(!plan_methods(&other, AttachChoice::Auto).contains(&Method::KprobeMulti));
    }
    assert!(
        !planned_programs(&all, AttachChoice::Auto, Keys::Plain, Loader::Aya)
            .any(|program| program == "count_multi_kprobe")
    );
    assert!(
        planned_programs(&all, AttachChoice::Auto, Keys::Plain, Loader::Own)
            .any(|program| program == "count_multi_kprobe")
    );
    // Nor a trampoline's program: own_links loads those by the function's BTF id.
    let trampoline_programs: Vec<String> = all
        .iter()
        .flat_map(|probe| [Method::Fentry, Method::Fexit].map(|m| probe.program(m)))
        .flatten()
        .collect();
    assert!(!trampoline_programs.is_empty());
    assert!(
        !planned_programs(&all, AttachChoice::Fentry, Keys::Plain, Loader::Aya)
            .any(|program| trampoline_programs.contains(&program))
    );
    assert!(
        planned_programs(&all, AttachChoice::Fentry, Keys::Plain, Loader::Own)
            .all(|program| trampoline_programs.contains(&program))
    );
    // As carried out: the link alone where the kernel has such links, the rest where not.
    let call_rcu = counted_probe("call_rcu");
    let methods = |planned: Vec<(Method, String)>| -> Vec<Method> {
        planned.into_iter().map(|(m, _)| m).collect()
    };
    assert_eq!(
        methods(plan_on(&call_rcu, AttachChoice::Auto, Keys::Plain, true)),
        [Method::KprobeMulti]
    );
    assert_eq!(
        methods(plan_on(&call_rcu, AttachChoice::Auto, Keys::Plain, false)),
        [Method::Fentry, Method::Kprobe]
    );
    let reader = counted_probe("__rcu_read_lock");
    assert_eq!(
        methods(plan_on(&reader, AttachChoice::Auto, Keys::Plain, true)),
        [Method::Kprobe]
    );
}

#[test]
fn forced_methods_are_the_only_ones_tried() {
    let probe = counted_probe("synchronize_rcu");
    assert_eq!(
        plan_methods(&probe, AttachChoice::Kprobe),
        vec![Method::Kprobe]
    );
    assert_eq!(
        plan_methods(&probe, AttachChoice::Fentry),
        vec![Method::Fentry]
    );
    let exit = timed_call(3, "rcu_barrier").exit;
    assert_eq!(
        plan_methods(&exit, AttachChoice::Kprobe),
        vec![Method::Kretprobe]
    );
    assert_eq!(
        plan_methods(&exit, AttachChoice::Fentry),
        vec![Method::Fexit]
    );
}

#[test]
fn a_timed_call_takes_one_trampoline_only() {
    let call = timed_call(2, "synchronize_rcu");
    assert_eq!(
        plan_methods(&call.entry, AttachChoice::Auto),
        [Method::Kprobe, Method::Fentry]
    );
    assert_eq!(
        plan_methods(&call.exit, AttachChoice::Auto),
        [Method::Fexit, Method::Kretprobe]
    );
    assert_eq!(
        plan_methods(&call.entry, AttachChoice::Fentry),
        [Method::Fentry]
    );
    // Different functions have a trampoline each.
    assert_eq!(
        plan_methods(&GP_LATENCY.entry, AttachChoice::Auto),
        [Method::Fentry, Method::Kprobe]
    );
}

#[test]
fn stack_keys_take_entries_by_kprobe_and_leave_returns_alone() {
    let latency = timed(1, "synchronize_rcu", "synchronize_rcu");
    let entry = plan(&latency.entry, AttachChoice::Auto, Keys::Stacks);
    assert_eq!(entry, vec![(Method::Kprobe, "timed_1_entry_kprobe".into())]);
    let exit = plan(&latency.exit, AttachChoice::Auto, Keys::Stacks);
    assert_eq!(exit[0].0, Method::Fexit);
}

#[test]
fn readers_never_get_a_trampoline_whatever_is_asked() {
    let reader = counted_probe("__rcu_read_lock");
    for choice in [
        AttachChoice::Auto,
        AttachChoice::Fentry,
        AttachChoice::Kprobe,
    ] {
        assert_eq!(plan_methods(&reader, choice), vec![Method::Kprobe]);
    }
    // Even a table entry that gave the reader an ordinary counter slot would be refused.
    let careless = Probe {
        programs: Programs::Counter(5),
        ..reader
    };
    assert_eq!(
        plan_methods(&careless, AttachChoice::Fentry),
        vec![Method::Kprobe]
    );
    assert_eq!(careless.program(Method::Fentry), None);
}

#[test]
fn every_counter_slot_is_used_once_and_has_programs() {
    let mut slots: Vec<_> = COUNTED.iter().map(Counted::slot).collect();
    slots.sort();
    slots.dedup();
    assert_eq!(slots.len(), COUNTED.len());
    assert!(slots.iter().all(|&s| s < counters::COUNTER_SLOTS));
    let mut functions: Vec<_> = COUNTED.iter().map(Counted::function).collect();
    functions.sort();
    functions.dedup();
    assert_eq!(functions.len(), COUNTED.len());
}

#[test]
fn programs_exist_only_for_their_side_and_range() {
    let entry = counted_probe("call_rcu");
    assert_eq!(entry.program(Method::Kretprobe), None);
    assert_eq!(entry.program(Method::Fexit), None);
    let beyond = Probe {
        programs: Programs::Timed(MAX_TIMED),
        ..GP_LATENCY.entry
    };
    assert_eq!(beyond.program(Method::Kprobe), None);
}

/// An `rcu_gp_init()` that returns false is seen at its return, by gplat's timing and by
/// `count --all`, each with a program of its own, in a slot no counted function has.
#[test]
fn inits_that_find_nothing_have_their_own_return_programs() {
    let probes: Vec<Probe> = GP_LATENCY.probes().collect();
    assert_eq!(probes.len(), 3);
    let found_nothing = GP_LATENCY.found_nothing.unwrap();
    assert_eq!(
        (found_nothing.function, found_nothing.side),
        ("rcu_gp_init", Side::Return)
    );
    assert_eq!(
        plan(&found_nothing, AttachChoice::Auto, Keys::Plain),
        [
            (Method::Fexit, "timed_0_found_nothing_fexit".to_string()),
            (
                Method::Kretprobe,
                "timed_0_found_nothing_kretprobe".to_string()
            ),
        ]
    );
    assert_eq!(
        plan(&GP_INIT_FOUND_NOTHING, AttachChoice::Kprobe, Keys::Plain),
        [(Method::Kretprobe, "count_37_kretprobe".to_string())]
    );
    assert!(
        COUNTED
            .iter()
            .all(|c| c.slot() != counters::GP_INIT_FOUND_NOTHING)
    );
    assert_eq!(timed_call(1, "synchronize_rcu").probes().count(), 2);
}

#[test]
fn the_default_set_and_the_waiting_functions() {
    let default: Vec<_> = counted_functions(CountedSet::Default)
        .map(Counted::function)
        .collect();
    assert_eq!(default.len(), 7);
    assert!(counted_functions(CountedSet::All).count() > 30);
    let waiting: Vec<_> = waiting_functions().collect();
    for f in [
        "synchronize_rcu",
        "rcu_barrier",
        "srcu_barrier",
        "cond_synchronize_rcu",
        "synchronize_net",
    ] {
        assert!(waiting.contains(&f), "{f}");
    }
    assert!(!waiting.contains(&"call_rcu"));
    // A wrapper is timed, never counted.
    assert!(!counted_functions(CountedSet::All).any(|c| c.function() == "synchronize_net"));
}

fn nobody_else(_: &[&str]) -> bool {
    false
}

/// Only the programs that ask whose doing a call is get the own-work hooks: `gp`, `stall`
/// and `callbacks` start without them; `count`, the timed waits and `serve`'s counts not.
#[test]
fn own_work_hooks_only_where_a_program_asks() {
    let needs = |probes: &[Probe]| {
        own_work_needed(
            probes,
            AttachChoice::Auto,
            Keys::Plain,
            false,
            false,
            &nobody_else,
        )
    };
    let mut gp: Vec<Probe> = GRACE_PERIODS.in_attach_order().to_vec();
    gp.extend([EXPEDITED_START, EXPEDITED_END, KERNEL_STALL_WARNING]);
    assert_eq!(needs(&gp), OwnWork::Off);
    assert_eq!(needs(&CALLBACKS.in_attach_order()), OwnWork::Off);
    assert_eq!(needs(&GRACE_PERIOD_BOUNDS), OwnWork::Off);
    assert_eq!(needs(FOLLOWED_TREE), OwnWork::Off);
    assert_ne!(needs(&[counted_probe("synchronize_rcu")]), OwnWork::Off);
    assert_ne!(needs(&[GP_LATENCY.entry]), OwnWork::Off);
    assert_ne!(needs(&[GP_INIT_FOUND_NOTHING]), OwnWork::Off);
    let mut served = gp.clone();
    served.push(counted_probe("call_rcu"));
    assert_ne!(needs(&served), OwnWork::Off);
}

/// ... and only the hooks for the work the run's own attaching can queue into its window:
/// none for kprobes; tasks RCU's for a first trampoline on each function; all of them where
/// an image is replaced (two of its programs on one function, or another tool's there), a
/// tracepoint is attached, or a probe is switched in the window.
#[test]
fn own_work_hooks_for_the_work_the_runs_attaching_queues() {
    let counted = [counted_probe("synchronize_rcu"), counted_probe("call_rcu")];
    let needs = |probes: &[Probe], choice, switches, others: &dyn Fn(&[&str]) -> bool| {
        own_work_needed(probes, choice, Keys::Plain, switches, false, others)
    };
    assert_eq!(
        needs(&counted, AttachChoice::Kprobe, false, &nobody_else),
        OwnWork::Off
    );
    assert_eq!(
        needs(&counted, AttachChoice::Kprobe, true, &nobody_else),
        OwnWork::All
    );
    assert_eq!(
        needs(&counted, AttachChoice::Fentry, false, &nobody_else),
        OwnWork::TasksRcu
    );
    assert_eq!(
        needs(&counted, AttachChoice::Auto, false, &nobody_else),
        OwnWork::TasksRcu
    );
    // Another tool's program on a function the run puts a trampoline on.
    let on_call_rcu = |functions: &[&str]| functions.contains(&"call_rcu");
    assert_eq!(
        needs(&counted, AttachChoice::Auto, false, &on_call_rcu),
        OwnWork::All
    );
    // The reader is a kprobe however the run is attached.
    let readers = [counted_probe("__rcu_read_lock")];
    assert_eq!(
        needs(&readers, AttachChoice::Auto, false, &nobody_else),
        OwnWork::Off
    );
    assert_eq!(
        needs(&readers, AttachChoice::Auto, true, &nobody_else),
        OwnWork::All
    );
    // Stacks are taken by kprobes at every entry: nothing there queues.
    assert_eq!(
        own_work_needed(
            &counted,
            AttachChoice::Auto,
            Keys::Stacks,
            false,
            false,
            &nobody_else
        ),
        OwnWork::Off
    );
    let mut with_tracepoint = counted.to_vec();
    with_tracepoint.extend(FOLLOWED_TREE);
    assert_eq!(
        needs(&with_tracepoint, AttachChoice::Kprobe, false, &nobody_else),
        OwnWork::All
    );
    // srlat's timed call: a kprobe at the entry, one trampoline at the return.
    let srlat: Vec<Probe> = timed_call(0, "synchronize_rcu").probes().collect();
    assert_eq!(
        needs(&srlat, AttachChoice::Auto, false, &nobody_else),
        OwnWork::TasksRcu
    );
    // By trampolines both: two programs on one function's trampoline.
    assert_eq!(
        needs(&srlat, AttachChoice::Fentry, false, &nobody_else),
        OwnWork::All
    );
    // `count --all`: rcu_gp_init's entry and its return, both by trampoline.
    let all: Vec<Probe> = counted_functions(CountedSet::All)
        .map(|c| c.probe)
        .chain([GP_INIT_FOUND_NOTHING])
        .collect();
    assert_eq!(
        needs(&all, AttachChoice::Auto, false, &nobody_else),
        OwnWork::All
    );
    // With kprobe-multi links: none for the counted functions; all where a trampoline
    // shares a function with the link (rcu_gp_init's return); as before where forced.
    let batched = |probes: &[Probe], choice| {
        own_work_needed(probes, choice, Keys::Plain, false, true, &nobody_else)
    };
    assert_eq!(batched(&counted, AttachChoice::Auto), OwnWork::Off);
    assert_eq!(batched(&all, AttachChoice::Auto), OwnWork::All);
    assert_eq!(batched(&counted, AttachChoice::Fentry), OwnWork::TasksRcu);
    assert_eq!(batched(&counted, AttachChoice::Kprobe), OwnWork::Off);
    assert_eq!(batched(&srlat, AttachChoice::Auto), OwnWork::TasksRcu);
    assert_eq!(OwnWork::TasksRcu.probes().len(), OWN_WORK_ESSENTIAL.len());
    assert_eq!(OwnWork::All.probes().len(), OWN_WORK.len());
    assert!(OwnWork::Off.probes().is_empty());
}

/// The domain-initialisation hook is a kprobe (it reads the stack), under every choice, and a
/// run never fails for want of it.
#[test]
fn the_domain_init_hook_is_an_optional_kprobe() {
    for choice in [
        AttachChoice::Auto,
        AttachChoice::Fentry,
        AttachChoice::Kprobe,
    ] {
        assert_eq!(
            plan_methods(&SRCU_DOMAIN_INIT, choice),
            [Method::Kprobe],
            "{choice:?}"
        );
    }
    assert!(SRCU_DOMAIN_INIT.names_only());
    assert!(!counted_probe("synchronize_srcu").names_only());
}

/// `gp`'s expedited hooks run in IPI handlers, readers' unlocks and with a node's lock held:
/// kprobes under every choice, never a trampoline.
#[test]
fn the_expedited_hooks_are_kprobes() {
    for probe in EXPEDITED_GRACE_PERIODS {
        for choice in [
            AttachChoice::Auto,
            AttachChoice::Fentry,
            AttachChoice::Kprobe,
        ] {
            let expected: &[Method] = match probe.side {
                Side::Entry if choice == AttachChoice::Auto => {
                    &[Method::KprobeMulti, Method::Kprobe]
                }
                Side::Entry => &[Method::Kprobe],
                Side::Return => &[Method::Kretprobe],
            };
            assert_eq!(
                plan_methods(&probe, choice),
                expected,
                "{} {choice:?}",
                probe.function
            );
        }
    }
    assert_eq!(
        EXPEDITED_REPORT.program(Method::Kprobe).as_deref(),
        Some("gp_expedited_report_kprobe")
    );
    assert_eq!(
        EXPEDITED_WALK.program(Method::Kprobe).as_deref(),
        Some("gp_expedited_walk_kprobe")
    );
}

/// A reading reads `COUNTS` only as far as the run's counter programs write: the default
/// seven are its first seven slots, `--all` reaches the count of empty `rcu_gp_init()`s,
/// and a run without counters reads none.
#[test]
fn counter_slots_written_end_at_the_last_counter() {
    let probes = |set| counted_functions(set).map(|c| c.probe).collect::<Vec<_>>();
    assert_eq!(counter_slots_written(&probes(CountedSet::Default)), 7);
    let mut all = probes(CountedSet::All);
    all.push(GP_INIT_FOUND_NOTHING);
    let written = counter_slots_written(&all);
    assert!(written > counters::GP_INIT_FOUND_NOTHING && written <= counters::COUNTER_SLOTS);
    assert!(COUNTED.iter().all(|c| c.slot() < written));
    let mut gp: Vec<Probe> = GRACE_PERIODS.in_attach_order().to_vec();
    gp.push(EXPEDITED_END);
    assert_eq!(counter_slots_written(&gp), 0);
    let mut srlat = vec![GP_LATENCY.entry, GP_LATENCY.exit];
    assert_eq!(counter_slots_written(&srlat), 0);
    srlat.push(counted_probe("call_rcu"));
    assert_eq!(counter_slots_written(&srlat), counters::CALL_RCU + 1);
}

/// The grace-period entry hooks that share the kprobe-multi link are told apart by cookies:
/// each its own, and the program that serves them knows each (`rcutrace_common::gp::HOOK_*`).
/// The kthread's milestones and the reports keep their trampolines, the tick and the context
/// switch their kprobes.
#[test]
fn grace_period_entries_share_one_link_each_by_its_own_cookie() {
    let mut batched: Vec<Probe> = GRACE_PERIODS
        .in_attach_order()
        .into_iter()
        .chain(EXPEDITED_GRACE_PERIODS)
        .filter(|probe| probe.program(Method::KprobeMulti).is_some())
        .collect();
    batched.dedup();
    let functions: Vec<&str> = batched.iter().map(|probe| probe.function).collect();
    assert_eq!(
        functions,
        [
            "force_qs_rnp",
            "rcu_read_unlock_special",
            "rcu_report_exp_cpu_mult",
            "__rcu_report_exp_rnp",
            "sync_rcu_exp_select_cpus",
        ]
    );
    for probe in &batched {
        assert_eq!(
            probe.program(Method::KprobeMulti).as_deref(),
            Some("gp_multi_kprobe")
        );
    }
    let mut cookies: Vec<u64> = batched.iter().map(Probe::multi_cookie).collect();
    cookies.sort_unstable();
    assert_eq!(cookies, [1, 2, 3, 4, 5]);
    for probe in GRACE_PERIODS_NEEDED {
        assert_eq!(
            probe.program(Method::KprobeMulti),
            None,
            "{}",
            probe.function
        );
    }
}

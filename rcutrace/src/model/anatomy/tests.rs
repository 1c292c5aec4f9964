use super::*;

fn event(at_ns: u64, kind: u32, pid: u32) -> GpEvent {
    GpEvent {
        at_ns,
        kind,
        pid,
        tgid: pid,
        ..Default::default()
    }
}

fn with(mut e: GpEvent, value: u64, extra: u64) -> GpEvent {
    e.value = value;
    e.extra = extra;
    e
}

const KTHREAD: u32 = 15;

/// The tree of a 2-CPU machine: one node, the root, is the leaf.
fn flat() -> RcuTree {
    RcuTree::modelled(2, 16, 64)
}

fn root(tree: &RcuTree) -> u64 {
    tree.nodes()[0].address
}

/// A grace period 1000..2000 ns whose last report (CPU `cpu`, by `reporter`) is at 1600.
fn one_grace_period(reporter: u32, cpu: u64) -> Vec<GpEvent> {
    vec![
        event(900, gp::EVENT_REQUEST, 300),
        event(1000, gp::EVENT_INIT_START, KTHREAD),
        with(event(1100, gp::EVENT_INIT_END, KTHREAD), 0x105, 1),
        event(1200, gp::EVENT_FQS, KTHREAD),
        with(event(1300, gp::EVENT_REPORT, KTHREAD), 0b01, root(&flat())),
        with(
            event(1600, gp::EVENT_REPORT, reporter),
            1 << cpu,
            root(&flat()),
        ),
        event(1700, gp::EVENT_CLEANUP_START, KTHREAD),
        event(2000, gp::EVENT_CLEANUP_END, KTHREAD),
    ]
}

fn assemble(events: &[GpEvent]) -> Assembler {
    let mut assembler = Assembler::new(flat(), &[]);
    events.iter().for_each(|e| assembler.add(e));
    assembler
}

#[test]
fn phases_add_up_to_the_duration_and_name_the_last_cpu() {
    let mut a = assemble(&one_grace_period(400, 1));
    let done = a.take_done();
    assert_eq!(done.len(), 1);
    let g = &done[0];
    assert_eq!(g.gp_seq, 0x105);
    assert_eq!(g.duration_ns, 1000);
    assert_eq!(
        g.phases,
        Phases {
            init_ns: 100,
            quiescent_wait_ns: 500,
            kthread_wake_ns: 100,
            cleanup_ns: 300
        }
    );
    let p = g.phases;
    assert_eq!(
        p.init_ns + p.quiescent_wait_ns + p.kthread_wake_ns + p.cleanup_ns,
        g.duration_ns
    );
    assert_eq!(g.request_wait_ns, Some(100));
    assert_eq!((g.fqs_passes, g.cpus_reported), (1, 2));
    assert_eq!(g.held_ns, 500);
    assert_eq!(
        g.last_holdout,
        Some(Holdout::Cpu {
            cpus: vec![1],
            found_by_pass: false,
            sample: None
        })
    );
    assert!(!a.in_progress());
}

#[test]
fn a_report_by_the_kthread_is_a_pass_and_a_sample_of_that_cpu_comes_along() {
    let mut events = one_grace_period(KTHREAD, 1);
    let mut sample = with(
        event(1500, gp::EVENT_HOLDOUT_SAMPLE, 77),
        gp::MODE_KERNEL,
        0x105,
    );
    sample.cpu = 1;
    sample.stack = 42;
    sample.comm[..4].copy_from_slice(b"spin");
    // A sample for another grace period, and one of another CPU, do not come along.
    let mut stale = with(
        event(1400, gp::EVENT_HOLDOUT_SAMPLE, 78),
        gp::MODE_USER,
        0x101,
    );
    stale.cpu = 0;
    let mut later = sample;
    later.at_ns = 1550;
    later.value = gp::MODE_USER;
    events.insert(5, later);
    events.insert(5, sample);
    events.insert(5, stale);
    let done = assemble(&events).take_done();
    let Some(Holdout::Cpu {
        cpus,
        found_by_pass,
        sample: Some(sample),
    }) = &done[0].last_holdout
    else {
        panic!("no sampled CPU holdout: {:?}", done[0].last_holdout);
    };
    assert_eq!((cpus.as_slice(), *found_by_pass), (&[1][..], true));
    assert_eq!(sample.task.comm, "spin");
    assert_eq!((sample.mode, sample.stack), (Mode::Kernel, Some(42)));
}

/// The sample shown is the CPU's most frequent stack, inside a reader where any tick was:
/// not the page fault before the reader began, nor the worker about to run a spin, nor the
/// tick that found it gone; of stacks as frequent, the latest in a reader, else the first.
#[test]
fn a_holdout_is_shown_by_its_last_sample_inside_a_reader() {
    let shown = |samples: &[(u64, u64)]| {
        let mut events = one_grace_period(KTHREAD, 1);
        for (i, &(mode, stack)) in samples.iter().enumerate().rev() {
            let mut sample = with(
                event(1500 + i as u64, gp::EVENT_HOLDOUT_SAMPLE, 77),
                mode,
                0x105,
            );
            sample.cpu = 1;
            sample.stack = stack;
            events.insert(5, sample);
        }
        let done = assemble(&events).take_done();
        match &done[0].last_holdout {
            Some(Holdout::Cpu {
                sample: Some(sample),
                ..
            }) => sample.stack,
            other => panic!("no sampled CPU holdout: {other:?}"),
        }
    };
    let reader = gp::MODE_KERNEL | gp::SAMPLE_IN_READER;
    assert_eq!(
        shown(&[
            (gp::MODE_KERNEL, 7),
            (reader, 42),
            (reader, 43),
            (gp::MODE_KERNEL, 99)
        ]),
        Some(43)
    );
    assert_eq!(
        shown(&[
            (gp::MODE_KERNEL, 7),
            (gp::MODE_KERNEL, 8),
            (gp::MODE_USER, 9)
        ]),
        Some(7)
    );
    // A worker's tick just before the spin began, then the spin's ticks (at two places of
    // its loop), then the tick that found it gone.
    assert_eq!(
        shown(&[
            (gp::MODE_KERNEL, 5),
            (gp::MODE_KERNEL, 42),
            (gp::MODE_KERNEL, 43),
            (gp::MODE_KERNEL, 42),
            (gp::MODE_KERNEL, 42),
            (gp::MODE_KERNEL, 43),
            (gp::MODE_USER, 9)
        ]),
        Some(42)
    );
    // Inside a reader, its most frequent stack, however many ticks came outside it.
    assert_eq!(
        shown(&[
            (gp::MODE_KERNEL, 7),
            (gp::MODE_KERNEL, 7),
            (gp::MODE_KERNEL, 7),
            (reader, 42),
            (reader, 43),
            (reader, 43),
        ]),
        Some(43)
    );
}

#[test]
fn a_blocked_reader_that_leaves_last_is_the_holdout() {
    let mut block = with(event(500, gp::EVENT_BLOCK, 321), 1, 0);
    block.stack = 9;
    block.cpu = 1;
    let mut events = vec![block];
    events.extend(one_grace_period(400, 1));
    // Leaves after the CPUs reported, before cleanup.
    events.insert(7, event(1650, gp::EVENT_UNBLOCK, 321));
    let done = assemble(&events).take_done();
    let g = &done[0];
    assert_eq!(g.blocked_readers, 1);
    assert_eq!(
        g.last_holdout,
        Some(Holdout::Task {
            task: Task {
                pid: 321,
                tgid: 321,
                comm: String::new()
            },
            cpu: 1,
            blocked_ns: 1150,
            blocked_at_ns: Some(500),
            stack: Some(9)
        })
    );
    assert_eq!(g.held_ns, 550);
    assert_eq!(g.phases.kthread_wake_ns, 50);
}

#[test]
fn a_reader_that_blocked_during_init_holds_it() {
    let mut events = one_grace_period(400, 1);
    // Between init's entry (1000) and return (1100): no CPU state to judge by, and init
    // makes the readers queued by then ones the grace period waits for.
    events.insert(2, with(event(1050, gp::EVENT_BLOCK, 321), 1, 0));
    events.insert(7, event(1650, gp::EVENT_UNBLOCK, 321));
    let done = assemble(&events).take_done();
    assert_eq!(done[0].blocked_readers, 1);
    assert_eq!(
        done[0].last_holdout.as_ref().map(Holdout::kind),
        Some("task")
    );
}

#[test]
fn a_reader_that_blocked_after_its_cpu_reported_does_not_hold_it() {
    let mut events = one_grace_period(400, 1);
    // Blocked during the wait with its CPU already reported (extra 0), leaves before
    // cleanup: not this grace period's holdout.
    events.insert(5, with(event(1350, gp::EVENT_BLOCK, 321), 1, 0));
    events.insert(7, event(1650, gp::EVENT_UNBLOCK, 321));
    let done = assemble(&events).take_done();
    assert_eq!(done[0].blocked_readers, 0);
    assert_eq!(
        done[0].last_holdout.as_ref().map(Holdout::kind),
        Some("cpu")
    );
}

#[test]
fn a_reader_that_blocked_while_its_cpu_owed_the_grace_period_holds_it() {
    // During the wait, its CPU not yet reported for 0x105 (the event's extra): held.
    let mut events = one_grace_period(400, 1);
    events.insert(5, with(event(1350, gp::EVENT_BLOCK, 321), 1, 0x105));
    events.insert(7, event(1650, gp::EVENT_UNBLOCK, 321));
    let done = assemble(&events).take_done();
    assert_eq!(done[0].blocked_readers, 1);
    // Owing an earlier grace period is not owing this one.
    let mut events = one_grace_period(400, 1);
    events.insert(5, with(event(1350, gp::EVENT_BLOCK, 321), 1, 0x101));
    events.insert(7, event(1650, gp::EVENT_UNBLOCK, 321));
    assert_eq!(assemble(&events).take_done()[0].blocked_readers, 0);
}

#[test]
fn a_block_stamped_before_init_ended_holds_it_whenever_it_arrives() {
    // The context switch read the programs' state before another CPU initialised the
    // grace period, and its event reached the ring after init's return: the kernel
    // queued the task before init looked at its node, so the grace period waits for it.
    let mut events = one_grace_period(400, 1);
    events.insert(3, with(event(1050, gp::EVENT_BLOCK, 321), 1, 0));
    events.insert(7, event(1650, gp::EVENT_UNBLOCK, 321));
    let done = assemble(&events).take_done();
    assert_eq!(done[0].blocked_readers, 1);
    assert_eq!(
        done[0].last_holdout.as_ref().map(Holdout::kind),
        Some("task")
    );
}

#[test]
fn a_grace_period_missing_a_cpu_report_has_no_last_holdout() {
    // CPU 1's report (the last) was skipped by the kernel: CPU 0's earlier one is not
    // what ended the wait, and the whole wait to cleanup is the wait for reports.
    let mut events = one_grace_period(400, 1);
    events.remove(5);
    let mut a = Assembler::new(flat(), &[0, 1]);
    events.iter().for_each(|e| a.add(e));
    let g = &a.take_done()[0];
    assert_eq!(g.last_holdout, None);
    assert_eq!(g.phases.quiescent_wait_ns, 1700 - 1100);
    assert_eq!(g.phases.kthread_wake_ns, 0);
    // With every report seen, the last one is the holdout.
    let mut a = Assembler::new(flat(), &[0, 1]);
    one_grace_period(400, 1).iter().for_each(|e| a.add(e));
    assert!(a.take_done()[0].last_holdout.is_some());
}

#[test]
fn what_cannot_be_assembled_is_counted() {
    let mut events = vec![
        // The end of one that began before tracing.
        event(10, gp::EVENT_CLEANUP_START, KTHREAD),
        event(20, gp::EVENT_CLEANUP_END, KTHREAD),
        // A spurious wake-up: the request carries over to the next init.
        event(30, gp::EVENT_REQUEST, 300),
        event(40, gp::EVENT_INIT_START, KTHREAD),
        with(event(50, gp::EVENT_INIT_END, KTHREAD), 0x101, 0),
    ];
    let mut next = one_grace_period(400, 0);
    next.remove(0);
    events.extend(next);
    let mut a = assemble(&events);
    let done = a.take_done();
    assert_eq!(done.len(), 1);
    assert_eq!(done[0].request_wait_ns, Some(1000 - 30));
    assert_eq!(
        a.unassembled,
        Unassembled {
            began_before_tracing: 1,
            incomplete: 0,
            unseen: 0,
            spurious_inits: 1,
            undecoded_reports: 0
        }
    );
    // Without a waking request the wait before init is unknown, not zero; a grace
    // period whose end was lost is counted as such.
    let mut events = one_grace_period(400, 0);
    events.remove(0);
    events.pop();
    events.extend(one_grace_period(400, 0));
    let mut a = assemble(&events);
    let done = a.take_done();
    assert_eq!(done.len(), 1);
    assert_eq!(a.unassembled.incomplete, 1);
    let mut a = assemble(&one_grace_period(400, 0)[1..]);
    assert_eq!(a.take_done()[0].request_wait_ns, None);
}

/// Grace period `n` (numbered 0x105 + 4n), 2000 ns after the one before.
fn numbered_grace_period(n: u64) -> Vec<GpEvent> {
    one_grace_period(400, 0)
        .into_iter()
        .map(|mut e| {
            e.at_ns += 2000 * n;
            if e.kind == gp::EVENT_INIT_END {
                e.value += 4 * n;
            }
            e
        })
        .collect()
}

#[test]
fn grace_periods_the_kernel_skipped_whole_are_counted_from_gp_seq() {
    fn kinds(n: u64, skipped: &[u32]) -> Vec<GpEvent> {
        numbered_grace_period(n)
            .into_iter()
            .filter(|e| !skipped.contains(&e.kind))
            .collect()
    }
    let all = [
        gp::EVENT_INIT_START,
        gp::EVENT_INIT_END,
        gp::EVENT_CLEANUP_END,
    ];
    // The second grace period's hooks all skipped, the fourth's start and number (its
    // end seen: incomplete), the fifth's start only (followed from its number).
    let events: Vec<GpEvent> = [
        kinds(0, &[]),
        kinds(1, &all),
        kinds(2, &[]),
        kinds(3, &all[..2]),
        kinds(4, &all[..1]),
        kinds(5, &[]),
    ]
    .concat();
    let mut a = assemble(&events);
    assert_eq!(a.take_done().len(), 3);
    assert_eq!(
        (
            a.unassembled.unseen,
            a.unassembled.incomplete,
            a.unassembled.began_before_tracing
        ),
        (1, 2, 0)
    );
    // One whose start was skipped is in progress from its number on; the first one seen,
    // its start before tracing began, is counted so when it ends.
    let mut a = assemble(&kinds(0, &all[..1])[..3]);
    assert!(a.in_progress());
    assert!(a.take_done().is_empty());
    let events = [kinds(0, &all[..1]), kinds(1, &[])].concat();
    let mut a = assemble(&events);
    assert_eq!(a.take_done().len(), 1);
    assert_eq!(
        (
            a.unassembled.began_before_tracing,
            a.unassembled.incomplete,
            a.unassembled.unseen
        ),
        (1, 0, 0)
    );
}

/// A 64-CPU machine: four leaves of 16 under a root. Every CPU's report reaches its
/// leaf; `last` follows the CPUs' reports (all by the kthread's pass, at 1300).
fn on_64_cpus(last: Vec<GpEvent>) -> Vec<GpEvent> {
    let tree = RcuTree::modelled(64, 16, 64);
    let leaves: Vec<u64> = tree.leaves().map(|n| n.address).collect();
    let mut events = vec![
        event(1000, gp::EVENT_INIT_START, KTHREAD),
        with(event(1100, gp::EVENT_INIT_END, KTHREAD), 0x105, 1),
    ];
    events.extend(
        leaves
            .iter()
            .map(|&leaf| with(event(1300, gp::EVENT_REPORT, KTHREAD), 0xffff, leaf)),
    );
    events.extend(last);
    events.push(event(1700, gp::EVENT_CLEANUP_START, KTHREAD));
    events.push(event(2000, gp::EVENT_CLEANUP_END, KTHREAD));
    events
}

fn assemble_on_64_cpus(events: &[GpEvent]) -> Assembler {
    let mut a = Assembler::new(
        RcuTree::modelled(64, 16, 64),
        &(0..64).collect::<Vec<u32>>(),
    );
    events.iter().for_each(|e| a.add(e));
    a
}

#[test]
fn a_reader_blocked_on_cpu_40_that_leaves_last_is_named_through_the_root() {
    let tree = RcuTree::modelled(64, 16, 64);
    let root = root(&tree);
    let mut block = with(event(500, gp::EVENT_BLOCK, 321), 1, 0);
    block.cpu = 40;
    block.stack = 9;
    let mut events = vec![block];
    // The reader leaves: its leaf (2, CPUs 32-47) reports itself to the root as bit 2.
    events.extend(on_64_cpus(vec![
        event(1600, gp::EVENT_UNBLOCK, 321),
        with(event(1610, gp::EVENT_REPORT, 321), 1 << 2, root),
    ]));
    let mut a = assemble_on_64_cpus(&events);
    let g = &a.take_done()[0];
    assert_eq!(
        g.last_holdout,
        Some(Holdout::Task {
            task: Task {
                pid: 321,
                tgid: 321,
                comm: String::new()
            },
            cpu: 40,
            blocked_ns: 1100,
            blocked_at_ns: Some(500),
            stack: Some(9)
        })
    );
    // The leaf's report counts no CPU: each had reported at its leaf.
    assert_eq!((g.cpus_reported, g.blocked_readers), (64, 1));
    assert_eq!(g.held_ns, 1610 - 1100);
    assert_eq!(a.unassembled.undecoded_reports, 0);
}

#[test]
fn readers_leaving_on_other_cpus_between_a_readers_unlock_and_its_report_change_nothing() {
    // Two readers blocked on CPUs 40 and 20 leave at once: 321's unlock, then 322's, then
    // each one's leaf report to the root (as 64 vCPUs on a busy host interleave them).
    let root = root(&RcuTree::modelled(64, 16, 64));
    let blocked_on = |pid, cpu| {
        let mut block = with(event(500, gp::EVENT_BLOCK, pid), 1, 0);
        block.cpu = cpu;
        block
    };
    let mut events = vec![blocked_on(321, 40), blocked_on(322, 20)];
    events.extend(on_64_cpus(vec![
        event(1600, gp::EVENT_UNBLOCK, 321),
        event(1601, gp::EVENT_UNBLOCK, 322),
        with(event(1602, gp::EVENT_REPORT, 322), 1 << 1, root),
        with(event(1610, gp::EVENT_REPORT, 321), 1 << 2, root),
    ]));
    let g = &assemble_on_64_cpus(&events).take_done()[0];
    assert_eq!(g.blocked_readers, 2);
    assert!(
        matches!(&g.last_holdout, Some(Holdout::Task { task, cpu: 40, .. }) if task.pid == 321),
        "{g:?}"
    );
}

#[test]
fn a_reader_judged_not_to_hold_it_is_the_holdout_when_its_leaf_says_so() {
    // Blocked after its CPU reported for this grace period (extra 0): the assembler's own
    // judgement says it holds nothing, but its leaf's report to the root says it did.
    let root = root(&RcuTree::modelled(64, 16, 64));
    let mut events = on_64_cpus(vec![
        event(1600, gp::EVENT_UNBLOCK, 321),
        with(event(1610, gp::EVENT_REPORT, 321), 1 << 3, root),
    ]);
    let mut block = with(event(1350, gp::EVENT_BLOCK, 321), 1, 0);
    block.cpu = 63;
    events.insert(6, block);
    let g = &assemble_on_64_cpus(&events).take_done()[0];
    assert_eq!(g.blocked_readers, 1);
    assert!(
        matches!(&g.last_holdout, Some(Holdout::Task { task, cpu: 63, .. }) if task.pid == 321),
        "{g:?}"
    );
}

#[test]
fn a_reader_blocked_before_tracing_is_named_with_its_leafs_cpus() {
    let root = root(&RcuTree::modelled(64, 16, 64));
    let mut leaving = with(event(1610, gp::EVENT_REPORT, 321), 1 << 2, root);
    leaving.comm[..6].copy_from_slice(b"reader");
    let g = &assemble_on_64_cpus(&on_64_cpus(vec![leaving])).take_done()[0];
    assert_eq!(
        g.last_holdout,
        Some(Holdout::Readers {
            task: Task {
                pid: 321,
                tgid: 321,
                comm: "reader".into()
            },
            cpus: (32..48).collect(),
        })
    );
    assert_eq!(g.last_holdout.as_ref().map(Holdout::kind), Some("task"));
    assert_eq!(g.blocked_readers, 1);
}

#[test]
fn a_pass_that_finds_a_whole_leaf_idle_names_every_cpu_of_it() {
    // The last leaf's CPUs are reported last, all at once, by the kthread.
    let tree = RcuTree::modelled(64, 16, 64);
    let last_leaf = tree.leaves().last().unwrap().address;
    let mut events = on_64_cpus(Vec::new());
    events.remove(5);
    events.insert(
        5,
        with(event(1500, gp::EVENT_REPORT, KTHREAD), 0xffff, last_leaf),
    );
    let g = &assemble_on_64_cpus(&events).take_done()[0];
    assert_eq!(
        g.last_holdout,
        Some(Holdout::Cpu {
            cpus: (48..64).collect(),
            found_by_pass: true,
            sample: None
        })
    );
    assert_eq!(g.cpus_reported, 64);
}

#[test]
fn a_report_from_no_node_of_the_tree_is_counted_not_read_as_cpus() {
    let mut events = one_grace_period(400, 1);
    events.insert(5, with(event(1500, gp::EVENT_REPORT, 400), 0b10, 0x1234));
    let mut a = assemble(&events);
    assert_eq!(a.unassembled.undecoded_reports, 1);
    // The grace period still ends with CPU 1's own report.
    assert!(matches!(
        a.take_done()[0].last_holdout,
        Some(Holdout::Cpu { ref cpus, .. }) if cpus == &[1]
    ));
}

#[test]
fn gp_seq_counts_grace_periods_in_steps_of_four() {
    assert_eq!(grace_periods_by_gp_seq(0x105, 0x105), 1);
    assert_eq!(grace_periods_by_gp_seq(0x105, 0x115), 5);
    // The counter starts below zero and wraps.
    assert_eq!(grace_periods_by_gp_seq(u64::MAX - 2, 1), 2);
}

fn on_cpu(mut e: GpEvent, cpu: u32) -> GpEvent {
    e.cpu = cpu;
    e
}

/// Expedited grace periods on the tree of 4 CPUs in leaves of 2 (two leaves under a root,
/// as `rcutree.rcu_fanout_leaf=2` makes it), or of one node.
fn two_leaves() -> RcuTree {
    RcuTree::modelled(4, 2, 64)
}

fn leaf(tree: &RcuTree, first_cpu: u32) -> u64 {
    tree.leaves()
        .find(|leaf| leaf.grplo == first_cpu)
        .map(|leaf| leaf.address)
        .unwrap_or_default()
}

fn assemble_on(tree: RcuTree, events: &[GpEvent]) -> Assembler {
    let mut assembler = Assembler::new(tree, &[]);
    events.iter().for_each(|e| assembler.add(e));
    assembler
}

const WORKER: u32 = 77;

#[test]
fn an_expedited_grace_period_is_named_by_the_cpu_that_reported_last() {
    let tree = two_leaves();
    let events = [
        with(event(1000, gp::EVENT_EXPEDITED_START, WORKER), 0x31, 0),
        // The selection, on CPU 0, finds CPUs 0 and 1 idle at once, then CPU 2.
        on_cpu(
            with(
                event(1100, gp::EVENT_EXPEDITED_REPORT, WORKER),
                0b11,
                leaf(&tree, 0),
            ),
            0,
        ),
        on_cpu(
            with(
                event(1200, gp::EVENT_EXPEDITED_REPORT, WORKER),
                0b01,
                leaf(&tree, 2),
            ),
            0,
        ),
        // CPU 3 reports itself last: bit 1 of the leaf of CPUs 2-3.
        on_cpu(
            with(
                event(1700, gp::EVENT_EXPEDITED_REPORT, 500),
                0b10,
                leaf(&tree, 2),
            ),
            3,
        ),
        with(event(2000, gp::EVENT_EXPEDITED_END, WORKER), 0x34, 0),
    ];
    let mut a = assemble_on(tree, &events);
    assert!(a.take_done().is_empty(), "no normal grace period");
    let done = a.take_done_expedited();
    assert_eq!(done.len(), 1);
    let g = &done[0];
    assert!(g.expedited);
    assert_eq!(g.gp_seq, 0x31);
    assert_eq!((g.started_ns, g.duration_ns, g.held_ns), (1000, 1000, 700));
    assert_eq!(
        (g.phases.quiescent_wait_ns, g.phases.kthread_wake_ns),
        (700, 300)
    );
    assert_eq!(
        (g.cpus_reported, g.blocked_readers, g.fqs_passes),
        (4, 0, 0)
    );
    assert_eq!(
        g.last_holdout,
        Some(Holdout::Cpu {
            cpus: vec![3],
            found_by_pass: false,
            sample: None
        })
    );
    assert_eq!(a.unassembled_expedited, Unassembled::default());
}

#[test]
fn cpus_found_idle_at_selection_last_are_one_holdout_of_several_cpus() {
    let tree = flat();
    let events = [
        with(event(1000, gp::EVENT_EXPEDITED_START, WORKER), 5, 0),
        on_cpu(
            with(
                event(1100, gp::EVENT_EXPEDITED_REPORT, 400),
                0b01,
                root(&tree),
            ),
            0,
        ),
        // Reported from CPU 0 about CPU 1 alone: found at selection, not CPU 1's own.
        on_cpu(
            with(
                event(1300, gp::EVENT_EXPEDITED_REPORT, WORKER),
                0b10,
                root(&tree),
            ),
            0,
        ),
        with(event(1400, gp::EVENT_EXPEDITED_END, WORKER), 8, 0),
        // The next: both CPUs found at once.
        with(event(2000, gp::EVENT_EXPEDITED_START, WORKER), 9, 0),
        on_cpu(
            with(
                event(2100, gp::EVENT_EXPEDITED_REPORT, WORKER),
                0b11,
                root(&tree),
            ),
            1,
        ),
        with(event(2200, gp::EVENT_EXPEDITED_END, WORKER), 12, 0),
    ];
    let done = assemble_on(tree, &events).take_done_expedited();
    let holdouts: Vec<_> = done.iter().map(|g| g.last_holdout.clone()).collect();
    assert_eq!(
        holdouts,
        [
            Some(Holdout::Cpu {
                cpus: vec![1],
                found_by_pass: true,
                sample: None
            }),
            Some(Holdout::Cpu {
                cpus: vec![0, 1],
                found_by_pass: true,
                sample: None
            })
        ]
    );
    assert_eq!(
        done.iter().map(|g| g.gp_seq).collect::<Vec<_>>(),
        [5, 9],
        "numbered by expedited_sequence while in progress"
    );
}

/// A reader blocked on CPU `cpu` (pid 900) leaves last: its leaf's report follows its unlock.
fn expedited_reader_leaves_last(tree: &RcuTree, cpu: u32, leaf_address: u64) -> Vec<GpEvent> {
    vec![
        on_cpu(with(event(500, gp::EVENT_BLOCK, 900), 1, 0), cpu),
        with(event(1000, gp::EVENT_EXPEDITED_START, WORKER), 0x41, 0),
        on_cpu(
            with(
                event(1100, gp::EVENT_EXPEDITED_REPORT, WORKER),
                0b01,
                tree.leaves().next().map(|l| l.address).unwrap_or_default(),
            ),
            0,
        ),
        on_cpu(event(1800, gp::EVENT_UNBLOCK, 900), cpu),
        on_cpu(
            with(
                event(1810, gp::EVENT_EXPEDITED_READER_REPORT, 900),
                0,
                leaf_address,
            ),
            cpu,
        ),
        with(event(1900, gp::EVENT_EXPEDITED_END, WORKER), 0x44, 0),
    ]
}

#[test]
fn a_blocked_reader_that_leaves_last_holds_the_expedited_grace_period() {
    // One node, and two leaves with the reader on the second (CPU 3).
    for (tree, cpu, first) in [(flat(), 1, 0), (two_leaves(), 3, 2)] {
        let address = leaf(&tree, first);
        let events = expedited_reader_leaves_last(&tree, cpu, address);
        let mut a = assemble_on(tree, &events);
        let done = a.take_done_expedited();
        assert_eq!(done.len(), 1);
        let g = &done[0];
        assert_eq!((g.blocked_readers, g.held_ns), (1, 810));
        match &g.last_holdout {
            Some(Holdout::Task {
                task,
                cpu: on,
                blocked_ns,
                blocked_at_ns,
                ..
            }) => {
                assert_eq!(
                    (task.pid, *on, *blocked_ns, *blocked_at_ns),
                    (900, cpu, 1300, Some(500))
                );
            }
            other => panic!("expected the reader, got {other:?}"),
        }
        assert_eq!(a.unassembled_expedited.undecoded_reports, 0);
    }
}

#[test]
fn expedited_readers_leaving_on_other_cpus_in_between_are_each_named() {
    // The reader on CPU 3 leaves; before its leaf's report, a reader on CPU 0 (blocked
    // too) leaves and reports; then the first one's report: it is named, not its leaf.
    let tree = two_leaves();
    let (first, second) = (leaf(&tree, 0), leaf(&tree, 2));
    let mut events = expedited_reader_leaves_last(&tree, 3, second);
    events.insert(0, on_cpu(with(event(600, gp::EVENT_BLOCK, 901), 1, 0), 0));
    events.insert(5, on_cpu(event(1801, gp::EVENT_UNBLOCK, 901), 0));
    events.insert(
        6,
        on_cpu(
            with(
                event(1802, gp::EVENT_EXPEDITED_READER_REPORT, 901),
                0,
                first,
            ),
            0,
        ),
    );
    let mut a = assemble_on(tree, &events);
    let done = a.take_done_expedited();
    assert_eq!(done[0].blocked_readers, 2);
    match &done[0].last_holdout {
        Some(Holdout::Task { task, cpu, .. }) => assert_eq!((task.pid, *cpu), (900, 3)),
        other => panic!("expected the reader on CPU 3, got {other:?}"),
    }
}

#[test]
fn a_reader_left_before_an_expedited_grace_period_is_not_its_reader() {
    // 900 left a reader while no expedited grace period was in progress, blocked again
    // unseen (its block lost), and left again: its report names its leaf, not the old one.
    let tree = two_leaves();
    let address = leaf(&tree, 2);
    let events = [
        on_cpu(with(event(500, gp::EVENT_BLOCK, 900), 1, 0), 3),
        on_cpu(event(600, gp::EVENT_UNBLOCK, 900), 3),
        with(event(1000, gp::EVENT_EXPEDITED_START, WORKER), 1, 0),
        on_cpu(event(1500, gp::EVENT_UNBLOCK, 900), 3),
        on_cpu(
            with(
                event(1510, gp::EVENT_EXPEDITED_READER_REPORT, 900),
                0,
                address,
            ),
            3,
        ),
        with(event(1600, gp::EVENT_EXPEDITED_END, WORKER), 4, 0),
    ];
    let done = assemble_on(tree, &events).take_done_expedited();
    assert!(
        matches!(&done[0].last_holdout, Some(Holdout::Readers { task, cpus }) if task.pid == 900 && cpus == &[2, 3]),
        "{:?}",
        done[0].last_holdout
    );
}

#[test]
fn an_expedited_reader_report_not_seen_to_block_names_its_leafs_cpus() {
    let tree = two_leaves();
    let address = leaf(&tree, 2);
    let events = [
        with(event(1000, gp::EVENT_EXPEDITED_START, WORKER), 1, 0),
        on_cpu(
            with(
                event(1500, gp::EVENT_EXPEDITED_READER_REPORT, 901),
                0,
                address,
            ),
            2,
        ),
        with(event(1600, gp::EVENT_EXPEDITED_END, WORKER), 4, 0),
    ];
    let done = assemble_on(tree, &events).take_done_expedited();
    match &done[0].last_holdout {
        Some(Holdout::Readers { task, cpus }) => {
            assert_eq!((task.pid, cpus.as_slice()), (901, &[2, 3][..]));
        }
        other => panic!("expected the leaf's readers, got {other:?}"),
    }
}

#[test]
fn expedited_events_that_cannot_be_assembled_are_counted() {
    let tree = two_leaves();
    let root_address = root(&tree);
    let events = [
        // An end before any start: begun before tracing.
        with(event(100, gp::EVENT_EXPEDITED_END, WORKER), 4, 0),
        with(event(1000, gp::EVENT_EXPEDITED_START, WORKER), 5, 0),
        // A CPU report at the root, and a reader report from no leaf: undecoded.
        with(
            event(1100, gp::EVENT_EXPEDITED_REPORT, WORKER),
            0b1,
            root_address,
        ),
        with(event(1150, gp::EVENT_EXPEDITED_READER_REPORT, 3), 0, 0xdead),
        // A start while one is in progress: the first is incomplete.
        with(event(1200, gp::EVENT_EXPEDITED_START, WORKER), 9, 0),
        with(event(1300, gp::EVENT_EXPEDITED_END, WORKER), 12, 0),
        // An end with no start after starts were seen: incomplete.
        with(event(1400, gp::EVENT_EXPEDITED_END, WORKER), 16, 0),
    ];
    let mut a = assemble_on(tree, &events);
    let done = a.take_done_expedited();
    assert_eq!(done.len(), 1);
    assert_eq!(done[0].last_holdout, None);
    assert_eq!(
        a.unassembled_expedited,
        Unassembled {
            began_before_tracing: 1,
            incomplete: 2,
            undecoded_reports: 2,
            ..Unassembled::default()
        }
    );
}

/// The waiter woken inside `rcu_exp_wait_wake()` can let the next expedited grace period
/// start before that function returns: the next one's start (and reports) come before the
/// last one's end, which `expedited_sequence` read at the end pairs with the right start.
#[test]
fn an_expedited_grace_period_that_starts_before_the_last_ones_end_is_seen() {
    let tree = flat();
    let report = |at: u64, cpu: u32, mask: u64| {
        on_cpu(
            with(
                event(at, gp::EVENT_EXPEDITED_REPORT, 400 + cpu),
                mask,
                root(&flat()),
            ),
            cpu,
        )
    };
    let events = [
        with(event(1000, gp::EVENT_EXPEDITED_START, WORKER), 0x31, 0),
        report(1100, 0, 0b01),
        report(1200, 1, 0b10),
        with(event(1300, gp::EVENT_EXPEDITED_START, 600), 0x35, 0),
        report(1400, 1, 0b10),
        // The first one's end, with the second one's start already in expedited_sequence.
        with(event(1450, gp::EVENT_EXPEDITED_END, WORKER), 0x35, 0),
        report(1500, 0, 0b01),
        with(event(1600, gp::EVENT_EXPEDITED_END, 600), 0x38, 0),
    ];
    let mut a = assemble_on(tree, &events);
    let done = a.take_done_expedited();
    let summary: Vec<_> = done
        .iter()
        .map(|g| {
            (
                g.gp_seq,
                g.started_ns,
                g.duration_ns,
                g.held_ns,
                g.last_holdout.as_ref().map(Holdout::cpu),
            )
        })
        .collect();
    assert_eq!(
        summary,
        [
            (0x31, 1000, 450, 200, Some(1)),
            (0x35, 1300, 300, 200, Some(0))
        ]
    );
    assert_eq!(a.unassembled_expedited, Unassembled::default());
}

#[test]
fn a_reader_whose_unlock_the_kernel_skipped_is_named_by_its_block() {
    // Blocked on CPU 40; its unlock's hook hit was skipped, its leaf's report was not.
    let root = root(&RcuTree::modelled(64, 16, 64));
    let mut block = with(event(500, gp::EVENT_BLOCK, 321), 1, 0);
    block.cpu = 40;
    let mut events = vec![block];
    events.extend(on_64_cpus(vec![with(
        event(1610, gp::EVENT_REPORT, 321),
        1 << 2,
        root,
    )]));
    let g = &assemble_on_64_cpus(&events).take_done()[0];
    assert_eq!(g.blocked_readers, 1);
    assert!(
        matches!(&g.last_holdout, Some(Holdout::Task { task, cpu: 40, blocked_ns: 1110, .. }) if task.pid == 321),
        "{g:?}"
    );
}

/// A reader holding a normal and an expedited grace period, whose unlock the kernel skipped:
/// its unlock reports to the normal one first, which names it from its block, then to the
/// expedited one, which must still find it (seen in CI on a 64-CPU 6.1 guest: named by its
/// leaf, with one `rcu_read_unlock_special` hit skipped).
#[test]
fn a_reader_whose_unlock_was_skipped_is_named_by_both_flavours_it_held() {
    let tree = two_leaves();
    let address = leaf(&tree, 2);
    let root = root(&tree);
    let mut events = vec![
        event(400, gp::EVENT_INIT_START, KTHREAD),
        with(event(450, gp::EVENT_INIT_END, KTHREAD), 0x105, 1),
    ];
    events.extend(
        expedited_reader_leaves_last(&tree, 3, address)
            .into_iter()
            .filter(|e| e.kind != gp::EVENT_UNBLOCK),
    );
    // The leaf of CPUs 2-3 (the root's second child) reports to the root as the reader
    // leaves, before its expedited report.
    let report = events
        .iter()
        .position(|e| e.kind == gp::EVENT_EXPEDITED_READER_REPORT)
        .unwrap();
    events.insert(
        report,
        on_cpu(with(event(1805, gp::EVENT_REPORT, 900), 1 << 1, root), 3),
    );
    let (pid, cpu, _, blocked_at_ns) = expedited_reader_named(tree, &events);
    assert_eq!((pid, cpu, blocked_at_ns), (900, 3, Some(500)));
}

/// The first expedited grace period's last holdout, which must be a reader: its pid, CPU,
/// time blocked and when it blocked.
fn expedited_reader_named(tree: RcuTree, events: &[GpEvent]) -> (u32, u32, u64, Option<u64>) {
    let mut a = assemble_on(tree, events);
    let done = a.take_done_expedited();
    assert_eq!(done[0].blocked_readers, 1);
    match &done[0].last_holdout {
        Some(Holdout::Task {
            task,
            cpu,
            blocked_ns,
            blocked_at_ns,
            ..
        }) => (task.pid, *cpu, *blocked_ns, *blocked_at_ns),
        other => panic!("expected the reader, got {other:?}"),
    }
}

#[test]
fn an_expedited_reader_whose_unlock_the_kernel_skipped_is_named_by_its_block() {
    let tree = two_leaves();
    let address = leaf(&tree, 2);
    let mut events = expedited_reader_leaves_last(&tree, 3, address);
    events.retain(|e| e.kind != gp::EVENT_UNBLOCK);
    assert_eq!(
        expedited_reader_named(tree, &events),
        (900, 3, 1310, Some(500))
    );
}

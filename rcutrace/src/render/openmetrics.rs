//! `serve`'s metrics in the OpenMetrics text format, written by the Prometheus project's own
//! client library from `model::Metrics`: counters end in `_total`, histograms have
//! cumulative `le` buckets, `_sum` and `_count`, and the exposition ends with `# EOF`.

use std::{borrow::Cow, fmt};

use prometheus_client::{
    collector::Collector,
    encoding::{DescriptorEncoder, EncodeMetric as _, NoLabelSet},
    metrics::{MetricType, gauge::ConstGauge},
    registry::{Registry, Unit},
};
use rcutrace_common::hist::{SlotBounds, log2_bounds};

use crate::model::{
    FlavourMetrics, FlavourSeries, Labelled, LastHoldout, LatencyHistogram, Metrics, tree::cpu_list,
};

/// The log2 slots shown as buckets of their own: from `[512, 1024)` ns (every faster call
/// is counted in it too, `le` being cumulative) to `[2^39, 2^40)` ns, about 18 minutes.
/// Slower calls are in `+Inf` only.
const FIRST_BUCKET_SLOT: usize = 11;
const LAST_BUCKET_SLOT: usize = 41;

pub fn exposition(metrics: &Metrics) -> String {
    let mut registry = Registry::default();
    registry.register_collector(Box::new(Exposition(metrics.clone())));
    let mut out = String::new();
    // Writing into a String cannot fail.
    let _ = prometheus_client::encoding::text::encode(&mut out, &registry);
    out
}

#[derive(Debug)]
struct Exposition(Metrics);

impl Collector for Exposition {
    fn encode(&self, mut encoder: DescriptorEncoder) -> fmt::Result {
        let m = &self.0;
        counters(
            &mut encoder,
            "rcutrace_calls",
            "Calls of each traced RCU function",
            &m.calls,
        )?;
        counters(
            &mut encoder,
            "rcutrace_grace_periods",
            "Grace periods (calls of rcu_gp_fqs_loop)",
            &m.grace_periods,
        )?;
        counters(
            &mut encoder,
            "rcutrace_readers",
            "RCU read-side critical sections entered (calls of __rcu_read_lock)",
            &m.readers,
        )?;
        histograms(
            &mut encoder,
            "rcutrace_grace_period_latency",
            "Grace-period latency, rcu_gp_init() entry to rcu_gp_cleanup() return",
            &m.grace_period_latency,
            |v| (labels(v), &v.value),
        )?;
        histograms(
            &mut encoder,
            "rcutrace_synchronize_latency",
            "Time a caller waited in a synchronize function",
            &m.synchronize_latency,
            |v| (labels(v), &v.value),
        )?;

        let mut probes = encoder.encode_descriptor(
            "rcutrace_probe",
            "A probe attached: the function, its side, what its program does, and how",
            None,
            MetricType::Info,
        )?;
        for probe in &m.probes {
            let labels = vec![
                ("function", probe.function.clone()),
                ("side", probe.side.to_string()),
                ("program", probe.program.to_string()),
                ("method", probe.method.clone()),
            ];
            probes.encode_info(&labels)?;
        }
        let mut skipped = encoder.encode_descriptor(
            "rcutrace_kernel_skipped",
            "Probe hits the kernel skipped (a BPF program, or another kprobe's handler, was \
             already running on that CPU); for __rcu_read_lock these are the tracer's own nested \
             readers, not lost readers",
            None,
            MetricType::Counter,
        )?;
        for (function, n) in &m.kernel_skipped {
            skipped
                .encode_family(&vec![("function", function.clone())])?
                .encode_counter::<NoLabelSet, _, u64>(n, None)?;
        }
        let mut lost = encoder.encode_descriptor(
            "rcutrace_lost",
            "Events seen but not kept, by cause",
            None,
            MetricType::Counter,
        )?;
        for (cause, n) in &m.lost {
            lost.encode_family(&vec![("cause", *cause)])?
                .encode_counter::<NoLabelSet, _, u64>(n, None)?;
        }
        if let Some(gp) = &m.grace_period {
            let age = encoder.encode_descriptor(
                "rcutrace_grace_period_age",
                "How long the grace period in progress has waited for quiescent states (0 while \
                 none is in progress)",
                Some(&Unit::Seconds),
                MetricType::Gauge,
            )?;
            ConstGauge::new(gp.age_s).encode(age)?;
            if let Some(expedited) = gp.expedited_age_s {
                let age = encoder.encode_descriptor(
                    "rcutrace_expedited_grace_period_age",
                    "How long the expedited grace period in progress has run (0 while none is)",
                    Some(&Unit::Seconds),
                    MetricType::Gauge,
                )?;
                ConstGauge::new(expedited).encode(age)?;
            }
            let holdouts = encoder.encode_descriptor(
                "rcutrace_grace_period_holdout_cpus",
                "CPUs the grace period in progress still waits for",
                None,
                MetricType::Gauge,
            )?;
            ConstGauge::new(gp.holdout_cpus as i64).encode(holdouts)?;
            let mut warnings = encoder.encode_descriptor(
                "rcutrace_stall_warnings",
                "Stall warnings by source: rcutrace (a grace period older than 1 s, each once) \
                 and kernel (its own RCU stall warnings)",
                None,
                MetricType::Counter,
            )?;
            for (source, n) in &gp.stall_warnings {
                warnings
                    .encode_family(&vec![("source", *source)])?
                    .encode_counter::<NoLabelSet, _, u64>(n, None)?;
            }
            let mut partial = encoder.encode_descriptor(
                "rcutrace_grace_periods_partial",
                "Grace periods not in the phase histograms: begun before tracing, incomplete \
                 (an event lost), unseen (the kernel skipped their hooks: a gap in gp_seq), in \
                 progress at this scrape (0 or 1)",
                None,
                MetricType::Gauge,
            )?;
            for (cause, n) in &gp.partial {
                partial
                    .encode_family(&vec![("cause", *cause)])?
                    .encode_gauge(&(*n as i64))?;
            }
            let unit = Unit::Other("nanoseconds".into());
            let mut phases = encoder.encode_descriptor(
                "rcutrace_grace_period_phase",
                "Time the grace periods spent in each phase: request_wait (requested to init, \
                 before the grace period), init, quiescent_wait (to the last report), \
                 kthread_wake (the kthread's wake-up after it) and cleanup",
                Some(&unit),
                MetricType::Histogram,
            )?;
            for (phase, h) in &gp.phases {
                phases
                    .encode_family(&vec![("phase", *phase)])?
                    .encode_histogram::<NoLabelSet>(h.sum_ns as f64, h.count, &buckets(h), None)?;
            }
            let mut holdouts = encoder.encode_descriptor(
                "rcutrace_grace_period_last_holdouts",
                "Grace periods by their last holdout: the CPU whose report ended the wait \
                 (kind=\"cpu\"), a blocked reader (kind=\"task\"), or not seen (kind=\"unseen\": a \
                 CPU's report missed, see rcutrace_kernel_skipped)",
                None,
                MetricType::Counter,
            )?;
            for (holdout, n) in &gp.last_holdouts {
                let labels = match holdout {
                    LastHoldout::Cpus(cpus) => vec![
                        ("kind", Cow::Borrowed("cpu")),
                        ("cpu", Cow::Owned(cpu_list(cpus))),
                    ],
                    LastHoldout::Task => vec![("kind", Cow::Borrowed("task"))],
                    LastHoldout::Unseen => vec![("kind", Cow::Borrowed("unseen"))],
                };
                holdouts
                    .encode_family(&labels)?
                    .encode_counter::<NoLabelSet, _, u64>(n, None)?;
            }
        }
        if let Some(flavours) = &m.flavours {
            flavour_metrics(&mut encoder, flavours)?;
        }
        let start = encoder.encode_descriptor(
            "rcutrace_start_time",
            "When rcutrace started counting, since the Unix epoch",
            Some(&Unit::Seconds),
            MetricType::Gauge,
        )?;
        ConstGauge::new(m.start_time_s).encode(start)
    }
}

/// Tasks RCU's and SRCU's grace periods (`serve --flavor`), by flavour and key.
fn flavour_metrics(encoder: &mut DescriptorEncoder, m: &FlavourMetrics) -> fmt::Result {
    histograms(
        encoder,
        "rcutrace_flavor_grace_period_latency",
        "Grace periods of tasks RCU (key: the flavour) and SRCU (key: the domain), from their \
         start to their end",
        &m.grace_periods,
        |series| (flavour_labels(series), &series.value),
    )?;
    histograms(
        encoder,
        "rcutrace_flavor_grace_period_phase",
        "Time those grace periods spent in each of their kernel's phases: tasks RCU's pre_gp, \
         scan_tasklist, post_scan, holdouts, post_gp; SRCU's scan1, scan2, gp_end",
        &m.phases,
        |series| (flavour_labels(series), &series.value),
    )?;
    let mut age = encoder.encode_descriptor(
        "rcutrace_flavor_grace_period_age",
        "How long the grace period in progress of each tasks-RCU flavour or SRCU domain seen \
         has run (0 while none is)",
        Some(&Unit::Seconds),
        MetricType::Gauge,
    )?;
    for series in &m.age_s {
        age.encode_family(&flavour_labels(series))?
            .encode_gauge(&series.value)?;
    }
    Ok(())
}

fn flavour_labels<V>(series: &FlavourSeries<V>) -> Vec<(&'static str, Cow<'static, str>)> {
    let mut labels = vec![
        ("flavor", Cow::Borrowed(series.flavor)),
        ("key", Cow::Owned(series.key.clone())),
    ];
    if let Some(phase) = series.phase {
        labels.push(("phase", Cow::Borrowed(phase)));
    }
    labels
}

fn labels<V>(labelled: &Labelled<V>) -> Vec<(&'static str, Cow<'static, str>)> {
    let mut labels = Vec::new();
    if let Some(function) = &labelled.function {
        labels.push(("function", Cow::Owned(function.clone())));
    }
    if let Some(cpu) = labelled.cpu {
        labels.push(("cpu", Cow::Owned(cpu.to_string())));
    }
    if let Some(cgroup) = &labelled.cgroup {
        labels.push(("cgroup", Cow::Owned(cgroup.clone())));
    }
    labels
}

fn counters(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    values: &[Labelled<u64>],
) -> fmt::Result {
    let mut metric = encoder.encode_descriptor(name, help, None, MetricType::Counter)?;
    for value in values {
        metric
            .encode_family(&labels(value))?
            .encode_counter::<NoLabelSet, _, u64>(&value.value, None)?;
    }
    Ok(())
}

/// A histogram family: each of `values` a series, with the labels and histogram `parts`
/// gives of it.
fn histograms<T>(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    values: &[T],
    parts: impl Fn(&T) -> (Vec<(&'static str, Cow<'static, str>)>, &LatencyHistogram),
) -> fmt::Result {
    let unit = Unit::Other("nanoseconds".into());
    let mut metric = encoder.encode_descriptor(name, help, Some(&unit), MetricType::Histogram)?;
    for value in values {
        let (labels, h) = parts(value);
        metric
            .encode_family(&labels)?
            .encode_histogram::<NoLabelSet>(h.sum_ns as f64, h.count, &buckets(h), None)?;
    }
    Ok(())
}

/// `(le, count in this bucket alone)`: the library adds them up into cumulative buckets.
fn buckets(h: &LatencyHistogram) -> Vec<(f64, u64)> {
    let slot = |s: usize| h.log2_slots.get(s).copied().unwrap_or(0);
    let mut buckets = Vec::new();
    let mut below: u64 = (0..FIRST_BUCKET_SLOT).map(slot).sum();
    for s in FIRST_BUCKET_SLOT..=LAST_BUCKET_SLOT {
        let le = match log2_bounds(s as u32) {
            SlotBounds::Range { high, .. } => high - 1,
            SlotBounds::Below(_) | SlotBounds::From(_) => {
                unreachable!("log2 slots above 0 are ranges")
            }
        };
        buckets.push((le as f64, slot(s) + below));
        below = 0;
    }
    let above: u64 = (LAST_BUCKET_SLOT + 1..h.log2_slots.len()).map(slot).sum();
    buckets.push((f64::INFINITY, above));
    buckets
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::ProbeInfo;
    use rcutrace_common::hist::{LOG2_SLOTS, log2_slot};

    fn histogram(values: &[u64]) -> LatencyHistogram {
        let mut log2_slots = vec![0; LOG2_SLOTS as usize];
        for &v in values {
            log2_slots[log2_slot(v as i64) as usize] += 1;
        }
        LatencyHistogram {
            log2_slots,
            count: values.len() as u64,
            sum_ns: values.iter().map(|&v| u128::from(v)).sum(),
        }
    }

    #[test]
    fn buckets_are_exact_log2_bounds() {
        // 1023 is the largest value of [512, 1024); 1024 the first of [1024, 2048).
        let h = histogram(&[5, 1023, 1024, 2047, 2048, 1 << 41]);
        let b = buckets(&h);
        assert_eq!(b[0], (1023.0, 2));
        assert_eq!(b[1], (2047.0, 2));
        assert_eq!(b[2], (4095.0, 1));
        assert_eq!(b.last(), Some(&(f64::INFINITY, 1)));
        assert_eq!(b[b.len() - 2].0, ((1u64 << 40) - 1) as f64);
        assert_eq!(b.iter().map(|(_, n)| n).sum::<u64>(), 6);
    }

    #[test]
    fn the_exposition_is_openmetrics() {
        let metrics = Metrics {
            calls: vec![Labelled {
                function: Some("synchronize_rcu".into()),
                cpu: Some(1),
                cgroup: None,
                value: 7,
            }],
            readers: vec![Labelled {
                function: None,
                cpu: None,
                cgroup: Some("/system.slice/a \"b\".service".into()),
                value: 9,
            }],
            grace_periods: vec![Labelled {
                function: None,
                cpu: None,
                cgroup: None,
                value: 3,
            }],
            synchronize_latency: vec![Labelled {
                function: Some("synchronize_rcu".into()),
                cpu: None,
                cgroup: None,
                value: histogram(&[1500, 3000]),
            }],
            probes: vec![ProbeInfo {
                function: "synchronize_rcu".into(),
                side: "entry",
                program: "count",
                method: "fentry".into(),
            }],
            lost: vec![("ring_buffer_full", 0)],
            start_time_s: 1_700_000_000.0,
            grace_period: Some(crate::model::GracePeriodMetrics {
                age_s: 2.5,
                expedited_age_s: Some(0.0),
                holdout_cpus: 1,
                stall_warnings: vec![("rcutrace", 1), ("kernel", 0)],
                phases: vec![("init", histogram(&[20_000, 30_000]))],
                last_holdouts: vec![
                    (LastHoldout::Cpus(vec![1]), 4),
                    // A pass that found a whole idle leaf: one holdout, labelled by its range.
                    (LastHoldout::Cpus((48..64).collect()), 3),
                    (LastHoldout::Task, 2),
                    (LastHoldout::Unseen, 0),
                ],
                partial: vec![("in_progress", 1)],
            }),
            flavours: Some(FlavourMetrics {
                grace_periods: vec![FlavourSeries {
                    flavor: "srcu",
                    key: "kvm_srcu [kvm]".into(),
                    phase: None,
                    value: histogram(&[2_000_000, 40_000_000]),
                }],
                phases: vec![FlavourSeries {
                    flavor: "tasks",
                    key: "rcu_tasks".into(),
                    phase: Some("holdouts"),
                    value: histogram(&[900_000_000]),
                }],
                age_s: vec![FlavourSeries {
                    flavor: "tasks",
                    key: "rcu_tasks".into(),
                    phase: None,
                    value: 1.5,
                }],
            }),
            ..Metrics::default()
        };
        let text = exposition(&metrics);
        for line in [
            "# TYPE rcutrace_grace_period_age_seconds gauge",
            "rcutrace_grace_period_age_seconds 2.5",
            "rcutrace_expedited_grace_period_age_seconds 0.0",
            "rcutrace_grace_period_holdout_cpus 1",
            "rcutrace_stall_warnings_total{source=\"rcutrace\"} 1",
            "rcutrace_stall_warnings_total{source=\"kernel\"} 0",
            "# TYPE rcutrace_grace_period_phase_nanoseconds histogram",
            "rcutrace_grace_period_phase_nanoseconds_sum{phase=\"init\"} 50000.0",
            "rcutrace_grace_period_phase_nanoseconds_count{phase=\"init\"} 2",
            "rcutrace_grace_period_phase_nanoseconds_bucket{le=\"32767.0\",phase=\"init\"} 2",
            "rcutrace_grace_period_last_holdouts_total{kind=\"cpu\",cpu=\"1\"} 4",
            "rcutrace_grace_period_last_holdouts_total{kind=\"cpu\",cpu=\"48-63\"} 3",
            "rcutrace_grace_period_last_holdouts_total{kind=\"task\"} 2",
            "rcutrace_grace_period_last_holdouts_total{kind=\"unseen\"} 0",
            "rcutrace_grace_periods_partial{cause=\"in_progress\"} 1",
            "# TYPE rcutrace_calls counter",
            "rcutrace_calls_total{function=\"synchronize_rcu\",cpu=\"1\"} 7",
            "rcutrace_grace_periods_total 3",
            "rcutrace_readers_total{cgroup=\"/system.slice/a \\\"b\\\".service\"} 9",
            "# TYPE rcutrace_synchronize_latency_nanoseconds histogram",
            "# UNIT rcutrace_synchronize_latency_nanoseconds nanoseconds",
            "rcutrace_synchronize_latency_nanoseconds_sum{function=\"synchronize_rcu\"} 4500.0",
            "rcutrace_synchronize_latency_nanoseconds_count{function=\"synchronize_rcu\"} 2",
            "rcutrace_synchronize_latency_nanoseconds_bucket{le=\"1023.0\",function=\"synchronize_rcu\"} 0",
            "rcutrace_synchronize_latency_nanoseconds_bucket{le=\"2047.0\",function=\"synchronize_rcu\"} 1",
            "rcutrace_synchronize_latency_nanoseconds_bucket{le=\"4095.0\",function=\"synchronize_rcu\"} 2",
            "rcutrace_synchronize_latency_nanoseconds_bucket{le=\"+Inf\",function=\"synchronize_rcu\"} 2",
            "rcutrace_probe_info{function=\"synchronize_rcu\",side=\"entry\",program=\"count\",method=\"fentry\"} 1",
            "rcutrace_lost_total{cause=\"ring_buffer_full\"} 0",
            "rcutrace_start_time_seconds 1700000000.0",
            "# TYPE rcutrace_flavor_grace_period_latency_nanoseconds histogram",
            "rcutrace_flavor_grace_period_latency_nanoseconds_count{flavor=\"srcu\",key=\"kvm_srcu [kvm]\"} 2",
            "rcutrace_flavor_grace_period_latency_nanoseconds_bucket{le=\"+Inf\",flavor=\"srcu\",key=\"kvm_srcu [kvm]\"} 2",
            "rcutrace_flavor_grace_period_phase_nanoseconds_sum{flavor=\"tasks\",key=\"rcu_tasks\",phase=\"holdouts\"} 900000000.0",
            "# TYPE rcutrace_flavor_grace_period_age_seconds gauge",
            "rcutrace_flavor_grace_period_age_seconds{flavor=\"tasks\",key=\"rcu_tasks\"} 1.5",
        ] {
            assert!(text.lines().any(|l| l == line), "{line}\n{text}");
        }
        assert!(text.ends_with("# EOF\n"), "{text}");
    }
}

use super::*;
use alloc::{string::ToString, vec};

fn decode(line: &str) -> Record {
    serde_json::from_str(line).unwrap_or_else(|e| panic!("{line}: {e}"))
}

/// Lines as bpftrace 0.17 prints them decode into the records, keeping the map order.
#[test]
fn bpftrace_records_decode() {
    assert_eq!(
        decode(r#"{"type": "attached_probes", "data": {"probes": 3}}"#),
        Record::AttachedProbes { probes: 3 }
    );
    assert_eq!(
        decode(r#"{"type": "map", "data": {"@c": {"7": 1, "1": 2}}}"#),
        Record::Map(Members(vec![(
            "@c".to_string(),
            MapValue::Keyed(Members(vec![("7".into(), 1), ("1".into(), 2)]))
        )]))
    );
    assert_eq!(
        decode(r#"{"type": "map", "data": {"@s": 1}}"#),
        Record::Map(Members(vec![("@s".to_string(), MapValue::Scalar(1))]))
    );
    let bucket = |min, max, count| Bucket { min, max, count };
    assert_eq!(
        decode(
            r#"{"type": "hist", "data": {"@h": [{"max": -1, "count": 1}, {"min": 4, "max": 7, "count": 2}, {"min": 10, "count": 3}]}}"#
        ),
        Record::Hist(Members(vec![(
            "@h".to_string(),
            HistValue::Buckets(vec![
                bucket(None, Some(-1), 1),
                bucket(Some(4), Some(7), 2),
                bucket(Some(10), None, 3),
            ])
        )]))
    );
    assert_eq!(
        decode(
            r#"{"type": "hist", "data": {"@h": {"loadgen": [{"min": 4, "max": 7, "count": 2}]}}}"#
        ),
        Record::Hist(Members(vec![(
            "@h".to_string(),
            HistValue::Keyed(Members(vec![(
                "loadgen".into(),
                vec![bucket(Some(4), Some(7), 2)]
            )]))
        )]))
    );
}

#[test]
fn summaries_round_trip() {
    let latency = Record::LatencySummary(LatencySummary {
        map: "@srlat".into(),
        unit: "ms".into(),
        count: 2,
        min_ns: Some(5),
        mean_ns: Some(7.5),
        max_ns: Some(10),
        percentiles_ns: Members(vec![("p99.9".into(), 10.0), ("p50".into(), 5.0)]),
        percentile_error: 0.0078125,
        percentiles_exact: false,
        key: Some("kworker/0:1".into()),
        layout: Some(HistLayout::Linear {
            min: 0,
            max: 1000,
            step: 100,
        }),
    });
    let line = serde_json::to_string(&latency).unwrap();
    assert!(line.starts_with(r#"{"type":"rcutrace_latency_summary","data":{"map":"#));
    assert_eq!(decode(&line), latency);
    let losses = Record::NotMeasured(NotMeasured {
        map: "@srlat".into(),
        in_flight_at_exit: 1,
        stacks_lost: Some(2),
        ..NotMeasured::default()
    });
    let line = serde_json::to_string(&losses).unwrap();
    assert_eq!(decode(&line), losses);
    let count = Record::CountSummary(CountSummary {
        elapsed_s: 1.5,
        elapsed_ns: Some(1_500_000_000),
        readers: None,
        call_rcu: Some(6),
        callbacks: None,
        callbacks_of: None,
        grace_periods: None,
        readers_per_grace_period: None,
        call_rcu_per_grace_period: Some(2.0),
        callbacks_per_grace_period: None,
        call_rcu_per_second: Some(4.0),
        missed_by_kernel: 0,
        own_calls_left_out: 0,
        keys_lost_to_full_map: Some(3),
        stacks_lost: None,
        readers_estimated: Some(ReadersEstimated {
            counted: 100,
            sampled_ns: 200_000_000,
            windows: 2,
            margin_95: None,
            switching_grace_periods: 4,
            switching_calls_left_out: 6,
        }),
        cross_checks: vec![CrossCheck {
            counted: "rcu_gp_init() calls".into(),
            value: 0,
            against: "rcu_gp_fqs_loop() calls".into(),
            expected: 40,
            bound: 2,
            agrees: false,
            at_most: false,
        }],
    });
    let line = serde_json::to_string(&count).unwrap();
    assert!(
        line.contains(r#""cross_checks":[{"counted":"rcu_gp_init() calls","value":0,"#),
        "{line}"
    );
    assert!(line.contains(r#""grace_periods":null"#), "{line}");
    assert_eq!(decode(&line), count);
    let environment = Record::Environment(Environment {
        kernel_release: "6.12.57+deb13-cloud-amd64".into(),
        cpus: 2,
        hz: None,
        rcu_expedited: Some("1".into()),
        rcutree_parameters: Members(vec![("enable_rcu_lazy".into(), "Y".into())]),
        attach: Members(vec![("synchronize_rcu".into(), "kprobe+fexit".into())]),
        ..Environment::default()
    });
    let line = serde_json::to_string(&environment).unwrap();
    assert!(!line.contains("hz"), "{line}");
    assert_eq!(decode(&line), environment);
}

/// Files written before a figure existed still read.
#[test]
fn older_summaries_decode() {
    let Record::CountSummary(count) = decode(
        r#"{"type": "rcutrace_count_summary", "data": {"elapsed_s": 5.01, "grace_periods": 1, "readers_per_grace_period": null, "call_rcu_per_grace_period": null, "callbacks_per_grace_period": null, "call_rcu_per_second": null, "missed_by_kernel": 0}}"#,
    ) else {
        panic!("not a count summary");
    };
    assert_eq!((count.elapsed_ns, count.readers), (None, None));
}

#[test]
fn the_largest_bounds_survive() {
    let bucket = Bucket {
        min: Some(u64::MAX as i128),
        max: None,
        count: u64::MAX,
    };
    let line = serde_json::to_string(&bucket).unwrap();
    assert_eq!(serde_json::from_str::<Bucket>(&line).unwrap(), bucket);
}

//! The verdicts of `report A B --fail-if`: a line per failed condition (which map and key,
//! A's and B's values, the limit), then what could not be judged; and the same verdicts as
//! JUnit XML through quick-junit, one test case per condition and map or key.

use std::fmt::Write as _;

use anyhow::{Context as _, Result};
use quick_junit::{NonSuccessKind, Report, TestCase, TestCaseStatus, TestSuite};

use crate::{
    render::figure,
    runs::gate::{Outcome, Statistic, Value, Verdict, Verdicts},
};

pub fn lines(verdicts: &Verdicts) -> String {
    let mut out = String::new();
    let failed: Vec<&Verdict> = verdicts.verdicts.iter().filter(|v| v.failed()).collect();
    for verdict in &failed {
        let _ = writeln!(out, "FAILED {}", describe(verdict));
    }
    for verdict in &verdicts.verdicts {
        if let Outcome::NotJudged(why) = &verdict.outcome {
            let _ = writeln!(
                out,
                "not judged: '{}' on {}: {why}",
                verdict.condition, verdict.subject
            );
        }
    }
    let judged = verdicts
        .verdicts
        .iter()
        .filter(|v| matches!(v.outcome, Outcome::Passed | Outcome::Failed))
        .count();
    let _ = writeln!(
        out,
        "--fail-if: {} of {judged} judged {} (map or key and condition) failed",
        failed.len(),
        if judged == 1 { "pair" } else { "pairs" },
    );
    out
}

/// `'p99 > +20%' on @srlat: A 12.004 ms, B 15.1 ms, limit 14.405 ms`.
fn describe(verdict: &Verdict) -> String {
    if let Outcome::NothingMatched(why) = &verdict.outcome {
        return format!("'{}': nothing to judge: {why}", verdict.condition);
    }
    // As the comparison above prints them: exact nanoseconds with every decimal, estimates
    // with five significant digits, counts whole.
    let value = |v: Option<Value>| match v {
        None => "-".to_string(),
        Some(Value { value, exact }) => match (verdict.statistic, verdict.unit) {
            (Statistic::Count, _) | (_, None) => format!("{}", value.round()),
            (_, Some(unit)) if exact => figure::exact(value as u64, unit),
            (_, Some(unit)) => figure::estimate(value, unit),
        },
    };
    let limit = verdict.limit.map(|value| Value {
        value,
        exact: false,
    });
    format!(
        "'{}' on {}: A {}, B {}, limit {}",
        verdict.condition,
        verdict.subject,
        value(verdict.a),
        value(verdict.b),
        value(limit)
    )
}

pub fn junit(verdicts: &Verdicts) -> Result<String> {
    let mut suite = TestSuite::new(format!(
        "rcutrace report {} {}",
        verdicts.a_name, verdicts.b_name
    ));
    for verdict in &verdicts.verdicts {
        let status = match &verdict.outcome {
            Outcome::Passed => TestCaseStatus::success(),
            Outcome::Failed | Outcome::NothingMatched(_) => {
                let mut status = TestCaseStatus::non_success(NonSuccessKind::Failure);
                status.set_message(describe(verdict));
                status
            }
            Outcome::NotJudged(why) => {
                let mut status = TestCaseStatus::skipped();
                status.set_message(why.as_str());
                status
            }
        };
        let mut case = TestCase::new(verdict.condition.as_str(), status);
        case.set_classname(verdict.subject.as_str());
        suite.add_test_case(case);
    }
    let mut report = Report::new("rcutrace --fail-if");
    report.add_test_suite(suite);
    report.to_string().context("writing the JUnit XML")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Unit;

    fn verdict(condition: &str, subject: &str, outcome: Outcome) -> Verdict {
        Verdict {
            condition: condition.into(),
            subject: subject.into(),
            statistic: Statistic::Percentile(0.99),
            unit: Some(Unit::Ms),
            a: Some(Value {
                value: 30e6,
                exact: true,
            }),
            b: Some(Value {
                value: 6_000_250.0,
                exact: true,
            }),
            limit: Some(15e6),
            outcome,
        }
    }

    fn verdicts() -> Verdicts {
        Verdicts {
            verdicts: vec![
                verdict("p99 < -50%", "@srlat", Outcome::Failed),
                verdict("p99 > +20%", "@srlat", Outcome::Passed),
                verdict(
                    "mean > 2ms",
                    "@srlat[rcu-workload]",
                    Outcome::NotJudged("B has no mean".into()),
                ),
                Verdict {
                    a: None,
                    b: None,
                    limit: None,
                    ..verdict(
                        "@srelat p99 > 2ms",
                        "-",
                        Outcome::NothingMatched("no map @srelat in both runs has p99".into()),
                    )
                },
            ],
            a_name: "normal.json".into(),
            b_name: "expedited.json".into(),
        }
    }

    #[test]
    fn one_line_per_failed_condition_with_both_values() {
        assert_eq!(
            lines(&verdicts()),
            "FAILED 'p99 < -50%' on @srlat: A 30.000 ms, B 6.00025 ms, limit 15.000 ms\n\
             FAILED '@srelat p99 > 2ms': nothing to judge: no map @srelat in both runs has p99\n\
             not judged: 'mean > 2ms' on @srlat[rcu-workload]: B has no mean\n\
             --fail-if: 2 of 2 judged pairs (map or key and condition) failed\n"
        );
    }

    /// quick-junit's own reader takes the XML back: one case per verdict, failures as such.
    #[test]
    fn junit_xml_reads_back_with_every_verdict() {
        let xml = junit(&verdicts()).unwrap();
        let report = quick_junit::Report::deserialize_from_str(&xml).unwrap();
        assert_eq!(report.tests, 4);
        assert_eq!(report.failures, 2);
        assert_eq!(report.test_suites.len(), 1);
        let suite = &report.test_suites[0];
        assert_eq!(
            suite.name.as_str(),
            "rcutrace report normal.json expedited.json"
        );
        assert_eq!(suite.skipped, 1);
        let failed = &suite.test_cases[0];
        assert_eq!(failed.name.as_str(), "p99 < -50%");
        assert_eq!(
            failed.classname.as_ref().map(|c| c.as_str()),
            Some("@srlat")
        );
        assert!(
            xml.contains("message=\"&apos;p99 &lt; -50%&apos; on @srlat: A 30.000 ms"),
            "{xml}"
        );
    }
}

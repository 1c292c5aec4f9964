//! `report A B --fail-if EXPR`: conditions a CI job states on a comparison (`p99 > +20%`,
//! `mean > 2ms`, `@srlat count < 100`), judged on every map and key both runs have, B's value
//! against an absolute limit or one relative to A's. Pure parsing and judging over
//! `compare::Comparison`; `render` prints the verdicts.

use std::fmt;

use crate::{
    model::{SeriesStats, Unit, stats},
    runs::compare::{Comparison, HistComparison},
};

/// What `--fail-if` accepts, for every message about an expression it cannot read.
pub const ACCEPTED: &str = "--fail-if takes '[@MAP] STATISTIC OP VALUE': STATISTIC is count, \
    min, mean, max, p50, p90, p99 or p99.9; OP is >, >=, < or <=; VALUE is a time with its unit \
    (2ms, 500us, 1.5s, 800ns) for the latency statistics, a whole number for count, or a change \
    relative to run A with its sign (+20%, -10%); e.g. 'p99 > +20%', 'mean > 2ms', \
    '@srlat count < 100'";

/// One `--fail-if` condition: run B fails where it holds.
#[derive(Clone, Debug, PartialEq)]
pub struct Condition {
    /// As the user wrote it, to name it in the verdicts.
    pub text: String,
    /// Only this map (`@srlat`, `@` for count's map); every map without.
    pub map: Option<String>,
    pub statistic: Statistic,
    pub op: Op,
    pub limit: Limit,
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Statistic {
    /// Samples of a histogram, or calls of a count map's key.
    Count,
    Min,
    Mean,
    Max,
    /// A quantile, `0.99` for p99.
    Percentile(f64),
}

impl Statistic {
    fn is_time(self) -> bool {
        self != Statistic::Count
    }

    fn name(self) -> String {
        match self {
            Statistic::Count => "count".into(),
            Statistic::Min => "min".into(),
            Statistic::Mean => "mean".into(),
            Statistic::Max => "max".into(),
            Statistic::Percentile(q) => stats::quantile_name(q),
        }
    }

    /// This statistic of one histogram's statistics, and whether it is exact (the extremes
    /// and counts are; percentiles when every sample was kept; a mean never prints as one).
    fn of(self, s: &SeriesStats) -> Option<Value> {
        let exact = |n: u64| Value {
            value: n as f64,
            exact: true,
        };
        match self {
            Statistic::Count => Some(exact(s.count)),
            Statistic::Min => s.min_ns.map(exact),
            Statistic::Mean => s.mean_ns.map(|mean| Value {
                value: mean,
                exact: false,
            }),
            Statistic::Max => s.max_ns.map(exact),
            Statistic::Percentile(q) => s
                .percentiles
                .iter()
                .find(|(quantile, _)| *quantile == q)
                .map(|(_, ns)| Value {
                    value: *ns,
                    exact: s.percentiles_exact,
                }),
        }
    }
}

/// A statistic's value in one run: nanoseconds, or a count.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Value {
    pub value: f64,
    /// Exact nanoseconds (printed with every decimal, as the comparison prints them), not an
    /// estimate.
    pub exact: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    Greater,
    GreaterOrEqual,
    Less,
    LessOrEqual,
}

impl Op {
    fn holds(self, value: f64, limit: f64) -> bool {
        match self {
            Op::Greater => value > limit,
            Op::GreaterOrEqual => value >= limit,
            Op::Less => value < limit,
            Op::LessOrEqual => value <= limit,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Limit {
    /// Nanoseconds for the latency statistics, a count for `count`.
    Absolute(f64),
    /// A's value times `1 + this` (`+20%` is 0.2).
    Relative(f64),
}

impl std::str::FromStr for Condition {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        let bad = |why: String| Err(format!("{text:?}: {why}; {ACCEPTED}"));
        let trimmed = text.trim();
        let (map, rest) = match trimmed.strip_prefix('@') {
            Some(_) => {
                let end = trimmed
                    .find(|c: char| c.is_whitespace())
                    .unwrap_or(trimmed.len());
                (
                    Some(trimmed[..end].to_string()),
                    trimmed[end..].trim_start(),
                )
            }
            None => (None, trimmed),
        };
        let Some(at) = rest.find(['<', '>', '=', '!']) else {
            return bad("no comparison (>, >=, < or <=)".into());
        };
        let (name, rest) = rest.split_at(at);
        let (op, value) = if let Some(v) = rest.strip_prefix(">=") {
            (Op::GreaterOrEqual, v)
        } else if let Some(v) = rest.strip_prefix("<=") {
            (Op::LessOrEqual, v)
        } else if let Some(v) = rest.strip_prefix('>') {
            (Op::Greater, v)
        } else if let Some(v) = rest.strip_prefix('<') {
            (Op::Less, v)
        } else {
            return bad(format!("{:?} is not a comparison", &rest[..1]));
        };
        let statistic = match parse_statistic(name.trim()) {
            Some(s) => s,
            None if name.trim().is_empty() => {
                return bad("no statistic before the comparison".into());
            }
            None => return bad(format!("{:?} is not a statistic", name.trim())),
        };
        let limit = match parse_limit(value.trim(), statistic) {
            Ok(limit) => limit,
            Err(why) => return bad(why),
        };
        Ok(Condition {
            text: trimmed.to_string(),
            map,
            statistic,
            op,
            limit,
        })
    }
}

fn parse_statistic(name: &str) -> Option<Statistic> {
    match name {
        "count" => Some(Statistic::Count),
        "min" => Some(Statistic::Min),
        "mean" => Some(Statistic::Mean),
        "max" => Some(Statistic::Max),
        _ => stats::QUANTILES
            .iter()
            .find(|&&q| stats::quantile_name(q) == name)
            .map(|&q| Statistic::Percentile(q)),
    }
}

fn parse_limit(value: &str, statistic: Statistic) -> Result<Limit, String> {
    if value.is_empty() {
        return Err("no value after the comparison".into());
    }
    if let Some(percent) = value.strip_suffix('%') {
        if !percent.starts_with(['+', '-']) {
            return Err(format!(
                "{value:?} has no sign: a change relative to A is written +{percent}% or \
                 -{percent}%"
            ));
        }
        let change: f64 =
            number(percent).ok_or_else(|| format!("{value:?} is not a percentage"))?;
        if change <= -100.0 {
            return Err(format!("{value:?} would be a limit of zero or below"));
        }
        return Ok(Limit::Relative(change / 100.0));
    }
    if !statistic.is_time() {
        return match value.parse::<u64>() {
            Ok(n) => Ok(Limit::Absolute(n as f64)),
            Err(_) => Err(format!(
                "{value:?} is not a whole number, which count is compared with"
            )),
        };
    }
    let units = [("ns", 1.0), ("us", 1e3), ("ms", 1e6), ("s", 1e9)];
    let Some((number_text, scale)) = units
        .iter()
        .find_map(|(suffix, scale)| Some((value.strip_suffix(suffix)?, *scale)))
    else {
        return Err(format!(
            "{value:?} has no unit: {} is a time, written with ns, us, ms or s",
            statistic.name()
        ));
    };
    match number(number_text.trim()) {
        Some(n) if n >= 0.0 => Ok(Limit::Absolute(n * scale)),
        _ => Err(format!("{value:?} is not a time (a number and its unit)")),
    }
}

/// A plain decimal number, with an optional sign: no `inf`, `nan` or exponent.
fn number(text: &str) -> Option<f64> {
    let digits = text.strip_prefix(['+', '-']).unwrap_or(text);
    let plain = !digits.is_empty()
        && digits.bytes().all(|b| b.is_ascii_digit() || b == b'.')
        && digits.bytes().any(|b| b.is_ascii_digit());
    plain.then(|| text.parse().ok()).flatten()
}

/// One condition judged on one map and key.
#[derive(Clone, Debug, PartialEq)]
pub struct Verdict {
    pub condition: String,
    /// `@srlat`, `@srlat[KEY]`, `@[KEY]` (keys on one line), or `-` where nothing matched.
    pub subject: String,
    pub statistic: Statistic,
    /// The unit the times are shown in (A's); `None` for counts.
    pub unit: Option<Unit>,
    pub a: Option<Value>,
    pub b: Option<Value>,
    /// The limit B was held to.
    pub limit: Option<f64>,
    pub outcome: Outcome,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    Passed,
    Failed,
    /// A value the condition needs is not there (no sample in one run); not a failure unless
    /// it is all the condition found.
    NotJudged(String),
    /// The condition matched no map or key of both runs: a gate that judged nothing fails.
    NothingMatched(String),
}

/// Every condition's verdicts, in the order the conditions were given.
#[derive(Clone, Debug, PartialEq)]
pub struct Verdicts {
    pub verdicts: Vec<Verdict>,
    /// The runs, as the comparison's heading names them.
    pub a_name: String,
    pub b_name: String,
}

impl Verdicts {
    pub fn failed(&self) -> bool {
        self.verdicts.iter().any(Verdict::failed)
    }
}

impl Verdict {
    pub fn failed(&self) -> bool {
        matches!(self.outcome, Outcome::Failed | Outcome::NothingMatched(_))
    }
}

pub fn judge(conditions: &[Condition], comparison: &Comparison, a: &str, b: &str) -> Verdicts {
    Verdicts {
        verdicts: conditions
            .iter()
            .flat_map(|c| judge_one(c, comparison))
            .collect(),
        a_name: a.to_string(),
        b_name: b.to_string(),
    }
}

fn judge_one(condition: &Condition, comparison: &Comparison) -> Vec<Verdict> {
    let wanted = |name: &str| condition.map.as_deref().is_none_or(|m| m == name);
    let mut verdicts = Vec::new();
    for hist in comparison.hists.iter().filter(|h| wanted(&h.name)) {
        let subject = subject(&hist.name, hist.key.as_deref());
        let (a, b, unit) = hist_values(hist, condition.statistic);
        verdicts.push(verdict(condition, subject, unit, a, b));
    }
    // Judged on the keys both runs have: a key one lacks is listed as not judged.
    for (name, key, in_a) in comparison.keys_unmatched.iter().filter(|k| wanted(&k.0)) {
        verdicts.push(Verdict {
            condition: condition.text.clone(),
            subject: subject(name, Some(key)),
            statistic: condition.statistic,
            unit: None,
            a: None,
            b: None,
            limit: None,
            outcome: Outcome::NotJudged(format!(
                "only {} has this key",
                if *in_a { "A" } else { "B" }
            )),
        });
    }
    if condition.statistic == Statistic::Count {
        for map in comparison.counts.iter().filter(|m| wanted(&m.name)) {
            for (key, a, b) in &map.rows {
                let value = |n: &Option<u64>| {
                    n.map(|n| Value {
                        value: n as f64,
                        exact: true,
                    })
                };
                let key = (!key.is_empty()).then_some(key.as_str());
                let mut judged =
                    verdict(condition, subject(&map.name, key), None, value(a), value(b));
                // Judged on the keys both runs have: a key one lacks is listed as not
                // judged, not taken as a count of 0.
                let only = match (a, b) {
                    (Some(_), None) => Some("A"),
                    (None, Some(_)) => Some("B"),
                    _ => None,
                };
                if let Some(run) = only {
                    judged.limit = None;
                    judged.outcome = Outcome::NotJudged(format!("only {run} has this key"));
                }
                verdicts.push(judged);
            }
        }
    }
    let judged = verdicts
        .iter()
        .any(|v| !matches!(v.outcome, Outcome::NotJudged(_)));
    if !judged {
        let why = match (&condition.map, verdicts.is_empty()) {
            (Some(map), true) => format!("no map {map} in both runs has {}", what(condition)),
            (None, true) => format!("no map in both runs has {}", what(condition)),
            (_, false) => "no map or key has a value in both runs".to_string(),
        };
        verdicts.push(Verdict {
            condition: condition.text.clone(),
            subject: "-".into(),
            statistic: condition.statistic,
            unit: None,
            a: None,
            b: None,
            limit: None,
            outcome: Outcome::NothingMatched(why),
        });
    }
    verdicts
}

fn what(condition: &Condition) -> String {
    match condition.statistic {
        Statistic::Count => "counts".into(),
        other => format!("a histogram with {}", other.name()),
    }
}

/// A histogram's statistic in A and B (from rcutrace's exact statistics; a count from the
/// buckets where a run has none, as bpftrace's), with the unit A shows it in.
fn hist_values(
    hist: &HistComparison,
    statistic: Statistic,
) -> (Option<Value>, Option<Value>, Option<Unit>) {
    if let Some((a, b, unit)) = &hist.stats {
        let unit = statistic.is_time().then_some(*unit);
        return (statistic.of(a), statistic.of(b), unit);
    }
    match (&hist.buckets, statistic) {
        (Some((a, b)), Statistic::Count) => {
            let total = |buckets| Value {
                value: crate::model::HistMap {
                    name: String::new(),
                    key: None,
                    buckets,
                }
                .total() as f64,
                exact: true,
            };
            (Some(total(a.clone())), Some(total(b.clone())), None)
        }
        _ => (None, None, None),
    }
}

fn subject(map: &str, key: Option<&str>) -> String {
    match key {
        Some(key) => {
            let frames: Vec<&str> = key
                .lines()
                .map(str::trim)
                .filter(|l| !l.is_empty())
                .collect();
            format!("{map}[{}]", frames.join("; "))
        }
        None => map.to_string(),
    }
}

fn verdict(
    condition: &Condition,
    subject: String,
    unit: Option<Unit>,
    a: Option<Value>,
    b: Option<Value>,
) -> Verdict {
    let limit = match condition.limit {
        Limit::Absolute(limit) => Some(limit),
        Limit::Relative(change) => a.map(|a| a.value * (1.0 + change)),
    };
    let outcome = match (b, limit) {
        (Some(b), Some(limit)) if condition.op.holds(b.value, limit) => Outcome::Failed,
        (Some(_), Some(_)) => Outcome::Passed,
        (None, _) => Outcome::NotJudged(format!("B has no {}", condition.statistic.name())),
        (Some(_), None) => Outcome::NotJudged(format!(
            "A has no {} to be relative to",
            condition.statistic.name()
        )),
    };
    Verdict {
        condition: condition.text.clone(),
        subject,
        statistic: condition.statistic,
        unit,
        a,
        b,
        limit,
        outcome,
    }
}

impl fmt::Display for Op {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Op::Greater => ">",
            Op::GreaterOrEqual => ">=",
            Op::Less => "<",
            Op::LessOrEqual => "<=",
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Buckets;
    use crate::runs::compare::{CountComparison, EnvironmentDifference};

    fn parse(text: &str) -> Result<Condition, String> {
        text.parse()
    }

    #[test]
    fn conditions_read_as_written() {
        let c = parse("p99 > +20%").unwrap();
        assert_eq!(
            (c.map, c.statistic, c.op, c.limit),
            (
                None,
                Statistic::Percentile(0.99),
                Op::Greater,
                Limit::Relative(0.2)
            )
        );
        let c = parse("  mean>2ms ").unwrap();
        assert_eq!(c.text, "mean>2ms");
        assert_eq!(
            (c.statistic, c.limit),
            (Statistic::Mean, Limit::Absolute(2e6))
        );
        let c = parse("@srlat count < 100").unwrap();
        assert_eq!(
            (c.map.as_deref(), c.statistic, c.op, c.limit),
            (
                Some("@srlat"),
                Statistic::Count,
                Op::Less,
                Limit::Absolute(100.0)
            )
        );
        let c = parse("p99.9 >= 1.5s").unwrap();
        assert_eq!(
            (c.statistic, c.op, c.limit),
            (
                Statistic::Percentile(0.999),
                Op::GreaterOrEqual,
                Limit::Absolute(1.5e9)
            )
        );
        assert_eq!(parse("max <= -10%").unwrap().limit, Limit::Relative(-0.1));
        assert_eq!(parse("min < 800ns").unwrap().limit, Limit::Absolute(800.0));
        assert_eq!(
            parse("p50 < 20.5us").unwrap().limit,
            Limit::Absolute(20500.0)
        );
        assert_eq!(parse("@ count >= 5").unwrap().map.as_deref(), Some("@"));
    }

    #[test]
    fn what_cannot_be_read_says_what_is_accepted() {
        for (bad, says) in [
            ("p99", "no comparison"),
            ("p98 > 2ms", "\"p98\" is not a statistic"),
            ("> 2ms", "no statistic"),
            ("mean > 2", "has no unit"),
            ("mean > 2h", "has no unit"),
            ("mean > 2 hours", "is not a time"),
            ("mean > ms", "is not a time"),
            ("mean > inf ms", "is not a time"),
            ("p99 > 20%", "has no sign"),
            ("p99 > +x%", "is not a percentage"),
            ("p99 > -100%", "zero or below"),
            ("count < 1.5", "not a whole number"),
            ("count < 100ms", "not a whole number"),
            ("mean == 2ms", "is not a comparison"),
            ("mean >", "no value"),
        ] {
            let error = parse(bad).unwrap_err();
            assert!(error.contains(says), "{bad}: {error}");
            assert!(
                error.contains("STATISTIC is count, min, mean"),
                "{bad}: {error}"
            );
        }
    }

    fn stats(count: u64, mean_ms: f64, p99_ms: f64) -> SeriesStats {
        SeriesStats {
            key: None,
            count,
            min_ns: Some(1_000_000),
            max_ns: Some(40_000_000),
            mean_ns: Some(mean_ms * 1e6),
            percentiles: vec![(0.5, mean_ms * 1e6), (0.99, p99_ms * 1e6)],
            percentiles_exact: true,
        }
    }

    /// Normal against expedited grace periods: B is much faster than A.
    fn comparison() -> Comparison {
        Comparison {
            different_runs: None,
            environment: EnvironmentDifference::Differs(Vec::new()),
            counts: vec![CountComparison {
                name: "@".into(),
                rows: vec![
                    ("synchronize_rcu".into(), Some(20), Some(20)),
                    ("call_rcu".into(), Some(300), None),
                ],
            }],
            rates: Vec::new(),
            hists: vec![HistComparison {
                name: "@srlat".into(),
                key: None,
                buckets: None,
                stats: Some((stats(20, 12.0, 30.0), stats(20, 3.0, 6.0), Unit::Ms)),
            }],
            unmatched: Vec::new(),
            keys_unmatched: Vec::new(),
        }
    }

    fn outcomes(condition: &str) -> Vec<(String, Outcome)> {
        judge(&[parse(condition).unwrap()], &comparison(), "a", "b")
            .verdicts
            .into_iter()
            .map(|v| (v.subject, v.outcome))
            .collect()
    }

    #[test]
    fn conditions_are_judged_per_map_and_key() {
        assert_eq!(outcomes("p99 > +20%"), [("@srlat".into(), Outcome::Passed)]);
        assert_eq!(outcomes("p99 < -50%"), [("@srlat".into(), Outcome::Failed)]);
        // -75% of A's 30 ms is 7.5 ms; B's 6 ms is below.
        assert_eq!(outcomes("p99 < -75%"), [("@srlat".into(), Outcome::Failed)]);
        assert_eq!(outcomes("p99 < -80%"), [("@srlat".into(), Outcome::Passed)]);
        assert_eq!(outcomes("mean > 2ms"), [("@srlat".into(), Outcome::Failed)]);
        assert_eq!(
            outcomes("mean >= 3ms"),
            [("@srlat".into(), Outcome::Failed)]
        );
        assert_eq!(outcomes("mean > 3ms"), [("@srlat".into(), Outcome::Passed)]);
        // count covers histograms and count maps; a key only one run has is not judged.
        let only_a = || Outcome::NotJudged("only A has this key".into());
        assert_eq!(
            outcomes("count < 100"),
            [
                ("@srlat".into(), Outcome::Failed),
                ("@[synchronize_rcu]".into(), Outcome::Failed),
                ("@[call_rcu]".into(), only_a()),
            ]
        );
        assert_eq!(
            outcomes("@ count < -50%"),
            [
                ("@[synchronize_rcu]".into(), Outcome::Passed),
                ("@[call_rcu]".into(), only_a()),
            ]
        );
        let verdicts = judge(&[parse("p99 < -50%").unwrap()], &comparison(), "a", "b");
        let v = &verdicts.verdicts[0];
        let values = (v.a.map(|a| a.value), v.b.map(|b| b.value), v.limit);
        assert_eq!(values, (Some(30e6), Some(6e6), Some(15e6)));
        assert!(v.a.unwrap().exact, "every sample kept: an exact p99");
        assert_eq!(v.unit, Some(Unit::Ms));
        assert!(verdicts.failed());
    }

    /// A key one run lacks is listed as not judged, in the lines and as a skipped JUnit
    /// case; it is not taken as a count of 0 (which `count < N` would fail and
    /// `count > +20%` would pass).
    #[test]
    fn a_key_one_run_lacks_is_not_judged() {
        let mut comparison = comparison();
        comparison.counts[0]
            .rows
            .push(("kvfree_call_rcu".into(), None, Some(7)));
        let verdicts = judge(
            &[parse("@ count > +20%").unwrap()],
            &comparison,
            "a.json",
            "b.json",
        );
        let outcomes: Vec<(&str, &Outcome)> = verdicts
            .verdicts
            .iter()
            .map(|v| (v.subject.as_str(), &v.outcome))
            .collect();
        assert_eq!(
            outcomes,
            [
                ("@[synchronize_rcu]", &Outcome::Passed),
                (
                    "@[call_rcu]",
                    &Outcome::NotJudged("only A has this key".into())
                ),
                (
                    "@[kvfree_call_rcu]",
                    &Outcome::NotJudged("only B has this key".into())
                ),
            ]
        );
        assert!(!verdicts.failed());
        // A keyed histogram's key only one run has, likewise.
        let mut keyed = self::comparison();
        keyed.keys_unmatched = vec![("@srlat".into(), "loadgen".into(), false)];
        let verdicts_keyed = judge(&[parse("p99 > 1ms").unwrap()], &keyed, "a", "b");
        assert_eq!(
            verdicts_keyed
                .verdicts
                .last()
                .map(|v| (&v.subject[..], &v.outcome)),
            Some((
                "@srlat[loadgen]",
                &Outcome::NotJudged("only B has this key".into())
            ))
        );
        let lines = crate::render::verdicts(&verdicts);
        assert!(
            lines.contains("not judged: '@ count > +20%' on @[call_rcu]: only A has this key\n"),
            "{lines}"
        );
        assert!(
            lines.ends_with("--fail-if: 0 of 1 judged pair (map or key and condition) failed\n"),
            "{lines}"
        );
        let xml = crate::render::junit(&verdicts).unwrap();
        let report = quick_junit::Report::deserialize_from_str(&xml).unwrap();
        assert_eq!((report.tests, report.failures), (3, 0));
        assert_eq!(report.test_suites[0].skipped, 2);
        // Keys only one run has are all a condition found: nothing was judged, which fails.
        comparison.counts[0]
            .rows
            .retain(|(_, a, b)| a.is_none() || b.is_none());
        comparison.hists.clear();
        let verdicts = judge(&[parse("count < 100").unwrap()], &comparison, "a", "b");
        assert!(matches!(
            verdicts.verdicts.last().unwrap().outcome,
            Outcome::NothingMatched(_)
        ));
        assert!(verdicts.failed());
    }

    #[test]
    fn a_condition_that_matches_nothing_fails() {
        let [(subject, outcome)] = &outcomes("@srelat p99 > 2ms")[..] else {
            panic!("not one verdict");
        };
        assert_eq!(subject, "-");
        assert_eq!(
            outcome,
            &Outcome::NothingMatched("no map @srelat in both runs has a histogram with p99".into())
        );
        // B without samples: not judged, so nothing was, and that fails.
        let mut comparison = comparison();
        comparison.hists[0].stats.as_mut().unwrap().1 = SeriesStats {
            mean_ns: None,
            ..stats(0, 0.0, 0.0)
        };
        let verdicts = judge(&[parse("mean > 2ms").unwrap()], &comparison, "a", "b");
        assert_eq!(
            verdicts.verdicts[0].outcome,
            Outcome::NotJudged("B has no mean".into())
        );
        assert!(matches!(
            verdicts.verdicts[1].outcome,
            Outcome::NothingMatched(_)
        ));
        assert!(verdicts.failed());
    }

    #[test]
    fn counts_of_runs_without_statistics_come_from_the_buckets() {
        let mut comparison = comparison();
        let mut slots = vec![0; 30];
        slots[25] = 7;
        comparison.hists[0].stats = None;
        comparison.hists[0].buckets = Some((Buckets::Log2(slots.clone()), Buckets::Log2(slots)));
        let verdicts = judge(&[parse("@srlat count < 7").unwrap()], &comparison, "a", "b");
        assert_eq!(verdicts.verdicts[0].outcome, Outcome::Passed);
        assert_eq!(verdicts.verdicts[0].b.map(|b| b.value), Some(7.0));
        let verdicts = judge(&[parse("@srlat p99 > 1ms").unwrap()], &comparison, "a", "b");
        assert!(verdicts.failed(), "{verdicts:?}");
    }
}

//! The records only `srlat --stages` writes (`rcutrace_stages_summary`,
//! `rcutrace_call_stages`) back into the model, so that `report` prints a saved run as it
//! printed live.

use anyhow::{Context as _, Result, bail};
use rcutrace_common::records;

use crate::model::{
    SeriesStats,
    stages::{NotTakenApart, Path, PathStages, StageStats, StagedCall, StagesSummary},
};
use crate::runs::figures::{percentiles, unit};

fn path(name: &str) -> Result<Path> {
    match name {
        "normal" => Ok(Path::Normal),
        "expedited" => Ok(Path::Expedited),
        other => bail!("unknown grace-period path {other:?}"),
    }
}

/// One timed function's stages from its summary and its calls' records.
pub fn summary(
    s: &records::StagesSummary,
    calls: &[&records::CallStages],
) -> Result<StagesSummary> {
    let unit = unit(&s.unit).with_context(|| format!("unknown unit {:?}", s.unit))?;
    let paths = s
        .paths
        .iter()
        .map(|p| {
            Ok(PathStages {
                path: path(&p.path)?,
                calls: p.calls,
                latency_sum_ns: u128::from(p.latency_sum_ns),
                stages: p
                    .stages
                    .iter()
                    .map(|stage| StageStats {
                        key: stage.key.clone(),
                        name: stage.name.clone(),
                        sum_ns: u128::from(stage.sum_ns),
                        stats: SeriesStats {
                            key: None,
                            count: stage.count,
                            min_ns: stage.min_ns,
                            max_ns: stage.max_ns,
                            mean_ns: stage.mean_ns,
                            percentiles: percentiles(&stage.percentiles_ns),
                            percentiles_exact: false,
                        },
                    })
                    .collect(),
                own: p.own,
                piggy_backed: p.piggy_backed,
                ipis: p.ipis,
                expedited_grace_periods: p.expedited_grace_periods,
            })
        })
        .collect::<Result<_>>()?;
    let calls = calls
        .iter()
        .filter(|c| c.map == s.map)
        .map(|c| call(c))
        .collect::<Result<_>>()?;
    Ok(StagesSummary {
        map_name: s.map.clone(),
        unit,
        paths,
        not_taken_apart: NotTakenApart {
            entry_not_seen: s.entry_not_seen,
            grace_period_not_seen: s.grace_period_not_seen,
        },
        adjusted: s.adjusted,
        out_of_order: s.out_of_order,
        events_lost: s.events_lost,
        wake_from_gp: s.wake_from_gp,
        calls,
        calls_not_listed: s.calls_not_listed,
    })
}

fn call(c: &records::CallStages) -> Result<StagedCall> {
    let path = path(&c.path)?;
    let stages_ns = path
        .stages()
        .iter()
        .map(|(key, _)| {
            c.stages_ns
                .0
                .iter()
                .find(|(k, _)| k == key)
                .map(|(_, ns)| *ns)
        })
        .collect();
    Ok(StagedCall {
        // Not saved: only the live run needs to know which programs timed it.
        timed: 0,
        path,
        tid: c.tid,
        started_ns: c.started_ns,
        latency_ns: c.latency_ns,
        gp_seq: c.gp_seq,
        stages_ns,
        piggy_backed: c.piggy_backed,
        ipis: c.ipis,
        adjusted: c.adjusted,
        out_of_order: c.out_of_order,
    })
}

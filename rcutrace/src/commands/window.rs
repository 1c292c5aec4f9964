//! What every tracing command does with the engine: a window traced and its reports
//! published through the sink (stamped, with `--interval`), the hooks a run that names kernel
//! addresses or launches a command needs, and the command it launches (`-c`).

use anyhow::Result;

use super::publish::{Sink, ToSink};
use crate::{
    kernel,
    kernel::symbols::keeper::SymbolKeeper,
    model::Report,
    trace::engine::{AtOpen, Hooks, MakeReport, Period, Reporting, Request, trace_with},
    trace::launch::Launch,
    trace::session::Consume,
};

/// Loads, attaches the probes, prints bpftrace's banner, traces for the window, and returns
/// the report `make_report` makes of it. With an interval, the reports of the intervals
/// before the last one are published as they are made, each after its time.
pub async fn trace(
    request: Request<'_>,
    consume: Option<Consume<'_>>,
    make_report: MakeReport<'_>,
    sink: Sink,
) -> Result<Report> {
    let interval = match request.reporting {
        Reporting::Every(interval) => Some(interval),
        _ => None,
    };
    let mut first = true;
    let mut make_stamped = |period: &Period<'_>| {
        let mut report = make_report(period)?;
        if let Some(interval) = interval {
            report.time = Some(crate::model::Stamp {
                time: kernel::local_time(),
                cumulative: interval.cumulative,
            });
            // The environment describes the run: said once, in its first interval.
            if !std::mem::take(&mut first) {
                report.environment = None;
            }
        }
        Ok(report)
    };
    trace_with(request, consume, &mut make_stamped, &mut ToSink(sink)).await
}

/// The hooks of a run that names kernel addresses by `symbols` (kept from the window's
/// opening, read at once where a command launched in the window may unload what they name)
/// and that may launch a command in the window (`-c`, `run`), which it then watches.
pub fn hooks<'a>(symbols: Option<&'a SymbolKeeper>, launch: Option<&'a Launch>) -> Hooks<'a> {
    Hooks {
        at_open: symbols.map(|symbols| -> AtOpen<'a> {
            Box::new(move || {
                if launch.is_some() {
                    symbols.read_now();
                }
                symbols.keep_while_tracing();
            })
        }),
        watch: launch.map(Launch::watch),
        at_close: None,
    }
}

/// `-c CMD`: the command to run in the window, where one is given.
pub fn launch_of(command: Option<&str>) -> Result<Option<Launch>> {
    command
        .map(|line| Launch::from_line(line, None))
        .transpose()
}

/// The error that ended a `-c` command's window (it could not start, or waiting for it
/// failed), if one did.
pub fn launched(launch: Option<&Launch>) -> Result<()> {
    match launch.and_then(Launch::take_failure) {
        Some(error) => Err(error),
        None => Ok(()),
    }
}

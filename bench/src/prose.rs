//! BENCHMARKS.md around the table: the run's facts, the targets, what explains each missed
//! one, and what was run. The prose lives in `prose/*.md` templates whose `{name}` fields are
//! filled from this run's figures.

use std::fmt::Write as _;

use crate::run::{Outcome, ScalingOutcome};
use crate::sample::{Attach, Config, Job, Load, Metric, Tracer, Watcher};
use crate::scaling::ScalingSummary;
use crate::table::{self, Row, RowId, Summary};
use crate::{MEMBARRIER_WARMUP, NAMESPACES, PACED_WORK, SAMPLE_READERS, bpftrace_waits_script};
use crate::{floor, footprint};
use xtask::bpftrace::{BPFTRACE_COUNT, BPFTRACE_SRLAT};

const HEADER: &str = include_str!("prose/header.md");
const WHAT_WAS_RUN: &str = include_str!("prose/what_was_run.md");
const GAP_READER: &str = include_str!("prose/gap_reader.md");
const GAP_READER_FLOOR_ABOVE: &str = include_str!("prose/gap_reader_floor_above.md");
const GAP_READER_FLOOR_BELOW: &str = include_str!("prose/gap_reader_floor_below.md");
const GAP_STARTUP: &str = include_str!("prose/gap_startup.md");
const GAP_STARTUP_STALL: &str = include_str!("prose/gap_startup_stall.md");
const GAP_RSS: &str = include_str!("prose/gap_rss.md");
const GAP_CPU: &str = include_str!("prose/gap_cpu.md");
const GAP_SAMPLED: &str = include_str!("prose/gap_sampled.md");
const WATCH: &str = include_str!("prose/watch.md");
const SCALING: &str = include_str!("prose/scaling.md");
const SCALING_GROWS: &str = include_str!("prose/scaling_grows.md");
const FOOTPRINT: &str = include_str!("prose/footprint.md");

/// `template` with every `{name}` replaced by its value; values are not scanned again.
fn fill(template: &str, fields: &[(&str, String)]) -> String {
    let mut out = String::with_capacity(template.len());
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        out.push_str(&rest[..open]);
        let after = &rest[open + 1..];
        let field = after.find('}').and_then(|close| {
            let name = &after[..close];
            let value = fields.iter().find(|(n, _)| *n == name)?;
            Some((close, &value.1))
        });
        match field {
            Some((close, value)) => {
                out.push_str(value);
                rest = &after[close + 1..];
            }
            None => {
                out.push('{');
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

/// What the guest said of `key` (a line `KEY VALUE` of its info), or `?`.
fn guest_info(info: &[String], key: &str) -> String {
    info.iter()
        .find_map(|l| l.strip_prefix(key)?.strip_prefix(' '))
        .unwrap_or("?")
        .to_string()
}

/// A figure with `decimals` places, or `?` where it was not measured.
fn num(value: Option<f64>, decimals: usize) -> String {
    value.map_or("?".into(), |v| format!("{v:.decimals$}"))
}

/// BENCHMARKS.md: the table, the kernel, the date, the command, and what the figures mean.
pub fn benchmarks_md(outcome: &Outcome, command: &str, date: &str) -> String {
    let summary = &outcome.summary;
    let sizes = summary.sizes;
    let info = |key: &str| guest_info(&outcome.info, key);
    let mut md = fill(
        HEADER,
        &[
            ("kernel", outcome.kernel_release.clone()),
            (
                "series",
                crate::document::series(&outcome.kernel_release).unwrap_or_else(|| "?".into()),
            ),
            ("cpus", info("cpus")),
            ("bpftrace", info("bpftrace")),
            ("rcutrace", info("rcutrace")),
            ("date", date.into()),
            ("elapsed", format!("{:.0}", outcome.elapsed.as_secs_f64())),
            ("command", command.into()),
        ],
    );
    md.push_str(&summary.table());
    md.push_str("\nTargets:\n\n");
    md.push_str(&summary.targets());
    md.push_str(&gap_notes(summary));
    md.push_str(&watch_notes(summary));
    md.push_str(&footprint_notes(outcome));
    let paced_calls = summary.get(Metric::PacedCallsPerS, Config::Under(Tracer::RCUTRACE));
    md.push_str(&fill(
        WHAT_WAS_RUN,
        &[
            ("reps", sizes.reps.to_string()),
            ("calls", sizes.calls.to_string()),
            ("membarriers", sizes.membarriers.to_string()),
            ("window", sizes.window_secs.to_string()),
            ("warmup", MEMBARRIER_WARMUP.to_string()),
            ("count_script", BPFTRACE_COUNT.into()),
            ("srlat_script", BPFTRACE_SRLAT.into()),
            ("floor_scripts", floor_scripts().join("\n  ")),
            ("sample_readers", SAMPLE_READERS.into()),
            ("namespaces", NAMESPACES.to_string()),
            ("netns_script", bpftrace_waits_script(&["F"])),
            ("paced_us", PACED_WORK.as_micros().to_string()),
            ("paced_calls", num(paced_calls, 0)),
            ("paced_call_us", num(paced_calls.map(|c| 1e6 / c), 0)),
            (
                "margin_pct",
                num(
                    summary.get(
                        Metric::SampledMarginPct,
                        Config::Under(Tracer::RcutraceSampled),
                    ),
                    1,
                ),
            ),
        ],
    ));
    let attach: Vec<&String> = outcome
        .info
        .iter()
        .filter(|l| l.starts_with("attach "))
        .collect();
    if !attach.is_empty() {
        md.push_str("\nHow rcutrace attached (its `RUST_LOG=info` log):\n\n```\n");
        for line in attach {
            let _ = writeln!(md, "{}", line.trim_start_matches("attach "));
        }
        md.push_str("```\n");
    }
    md
}

/// How the footprint rows were measured, and each run's calls by function.
fn footprint_notes(outcome: &Outcome) -> String {
    let after = |prefix: &str| -> Vec<&str> {
        outcome
            .info
            .iter()
            .filter_map(|l| l.strip_prefix(prefix))
            .collect()
    };
    let hooks = after("footprint-referee hooks ");
    let referee_hooks = hooks.last().map_or("?".to_string(), |h| {
        h.split_whitespace()
            .map(|f| format!("`{f}`"))
            .collect::<Vec<_>>()
            .join(", ")
    });
    // The last repetition's line of each run.
    let mut runs: Vec<(String, String)> = Vec::new();
    for line in after("footprint ") {
        let Some((config, rest)) = line.split_once(' ') else {
            continue;
        };
        let rest = format!("window {rest}");
        match runs.iter_mut().find(|(c, _)| c == config) {
            Some(run) => run.1 = rest,
            None => runs.push((config.to_string(), rest)),
        }
    }
    if runs.is_empty() {
        return String::new();
    }
    fill(
        FOOTPRINT,
        &[
            ("referee_hooks", referee_hooks),
            ("tail", footprint::TAIL.as_secs().to_string()),
            ("idle", footprint::IDLE_WINDOW.as_secs().to_string()),
            ("settle", crate::SETTLE.as_millis().to_string()),
            (
                "runs",
                runs.iter()
                    .map(|(config, rest)| format!("{config}: {rest}"))
                    .collect::<Vec<_>>()
                    .join("\n"),
            ),
        ],
    )
}

/// The empty-program scripts the floor configurations ran, in the order they run.
fn floor_scripts() -> Vec<String> {
    [Job::Count, Job::Srlat]
        .into_iter()
        .flat_map(|job| {
            job.tracers().iter().filter_map(move |tracer| match tracer {
                Tracer::Floor(mechanism) => floor::empty_script(job, *mechanism),
                _ => None,
            })
        })
        .collect()
}

/// The fields of a start-up's note that its timing marks under `config` give (medians), and
/// the target's `budget_ms`. The attaching's time less its thread's CPU is what the thread
/// waited inside the attaches' system calls; those waits and its system CPU are the kernel's
/// whole part.
fn startup_phase_fields(
    summary: &Summary,
    config: Config,
    budget_ms: Option<f64>,
) -> Vec<(&'static str, String)> {
    let figure = |metric| summary.get(metric, config);
    let mark = |metric| num(figure(metric), 0);
    let system = figure(Metric::AttachingSystemMs);
    let wait = figure(Metric::StartupAttachingMs)
        .zip(figure(Metric::AttachingUserMs))
        .zip(system)
        .map(|((all, user), system)| (all - user - system).max(0.0));
    let in_kernel = wait.zip(system).map(|(wait, system)| wait + system);
    vec![
        ("budget_ms", num(budget_ms, 0)),
        ("btf_pass_ms", mark(Metric::StartupBtfPassMs)),
        ("object_ms", mark(Metric::StartupObjectMs)),
        ("programs_kept", mark(Metric::ProgramsKept)),
        ("programs_in_object", mark(Metric::ProgramsInObject)),
        ("attaches", mark(Metric::Attaches)),
        ("attach_min_ms", mark(Metric::AttachMinMs)),
        ("attach_max_ms", mark(Metric::AttachMaxMs)),
        ("attaching_ms", mark(Metric::StartupAttachingMs)),
        ("attaching_user_ms", mark(Metric::AttachingUserMs)),
        ("attaching_system_ms", mark(Metric::AttachingSystemMs)),
        ("attach_system_min_ms", mark(Metric::AttachSystemMinMs)),
        ("attach_system_max_ms", mark(Metric::AttachSystemMaxMs)),
        (
            "attach_system_median_ms",
            mark(Metric::AttachSystemMedianMs),
        ),
        ("attaching_wait_ms", num(wait, 0)),
        ("attaching_kernel_ms", num(in_kernel, 0)),
        (
            "kernel_over_budget",
            num(
                in_kernel
                    .zip(budget_ms)
                    .map(|(kernel, budget)| kernel / budget),
                1,
            ),
        ),
    ]
}

/// For each missed target, the measured gap and what bounds it, from this run's figures.
fn gap_notes(summary: &Summary) -> String {
    let missed = |id| summary.row(id).is_some_and(|r| r.misses_target());
    let running = |metric, tracer, job| summary.get(metric, Config::Running(tracer, job));
    let under = |metric, tracer| summary.get(metric, Config::Under(tracer));
    let kernel = |metric| summary.get(metric, Config::Kernel);
    let btf_mib = num(kernel(Metric::BtfKib).map(|k| k / 1024.0), 1);
    let mut notes = Vec::new();

    if missed(RowId::ReaderAdded)
        && let Some(row) = summary.row(RowId::ReaderAdded)
    {
        let cells = |id| {
            summary.row(id).map_or((None, None, None), |r: &Row| {
                (r.floor, r.rcutrace, r.bpftrace)
            })
        };
        let (floor_program, rcutrace_program, bpftrace_program) = cells(RowId::ReaderProgram);
        let (_, rcutrace_own, bpftrace_own) = cells(RowId::ReaderOwn);
        let verdict = match (row.floor, row.bpftrace) {
            (Some(floor), Some(bt)) if bt > 0.0 => {
                let share = floor / bt;
                let template = if share > 0.5 {
                    GAP_READER_FLOOR_ABOVE
                } else {
                    GAP_READER_FLOOR_BELOW
                };
                fill(template, &[("floor", format!("{share:.2}"))])
            }
            _ => String::new(),
        };
        notes.push(fill(
            GAP_READER,
            &[
                ("ratio", num(row.ratio, 3)),
                ("rcutrace_ns", num(row.rcutrace, 0)),
                ("bpftrace_ns", num(row.bpftrace, 0)),
                ("floor_ns", num(row.floor, 0)),
                ("rcutrace_own_ns", num(rcutrace_own, 0)),
                ("bpftrace_own_ns", num(bpftrace_own, 0)),
                ("rcutrace_program_ns", num(rcutrace_program, 1)),
                ("bpftrace_program_ns", num(bpftrace_program, 1)),
                ("floor_program_ns", num(floor_program, 1)),
                ("verdict", verdict.trim_end().into()),
            ],
        ));
    }

    if missed(RowId::PacedEstimateOverCount)
        && let Some(row) = summary.row(RowId::PacedEstimateOverCount)
    {
        let per_call = |tracer| {
            summary
                .values(Metric::PacedEventsPerCall, Config::Under(tracer))
                .to_vec()
        };
        let ratios: Vec<f64> = per_call(Tracer::RcutraceSampled)
            .iter()
            .zip(per_call(Tracer::RCUTRACE))
            .map(|(estimate, count)| estimate / count)
            .collect();
        let margins = summary.values(
            Metric::SampledMarginPct,
            Config::Under(Tracer::RcutraceSampled),
        );
        let speeds = summary.values(
            Metric::PacedWindowSpeed,
            Config::Under(Tracer::RcutraceSampled),
        );
        // Each repetition's ratio with its own window speed allowed for.
        let allowed: Vec<f64> = ratios
            .iter()
            .zip(speeds)
            .map(|(ratio, speed)| ratio / speed)
            .collect();
        let within = ratios
            .iter()
            .zip(margins)
            .filter(|(ratio, margin)| (100.0 * (*ratio - 1.0)).abs() <= **margin)
            .count();
        let (on_ms, period_ms) = SAMPLE_READERS
            .split_once('/')
            .and_then(|(on, period)| Some((on.parse::<u64>().ok()?, period.parse::<u64>().ok()?)))
            .unwrap_or((0, 0));
        let list = |values: &[f64], decimals| {
            let texts: Vec<String> = values.iter().map(|v| format!("{v:.decimals$}")).collect();
            texts.join(", ")
        };
        let counted = summary.get(Metric::PacedEventsPerCall, Config::Under(Tracer::RCUTRACE));
        let calls = summary.get(Metric::PacedCallsPerS, Config::Under(Tracer::RCUTRACE));
        let probe_ns = summary.row(RowId::ReaderAdded).and_then(|r| r.rcutrace);
        let observer = probe_ns
            .zip(counted)
            .zip(calls)
            .map(|((ns, events), calls)| 100.0 * ns * 1e-9 * events * calls);
        notes.push(fill(
            GAP_SAMPLED,
            &[
                ("ratio", num(row.rcutrace, 3)),
                ("by_rep", list(&ratios, 3)),
                (
                    "speed",
                    num(
                        summary
                            .row(RowId::PacedWindowSpeed)
                            .and_then(|r| r.rcutrace),
                        3,
                    ),
                ),
                ("speed_by_rep", list(speeds, 3)),
                (
                    "allowed",
                    num(
                        summary
                            .row(RowId::PacedEstimateAllowed)
                            .and_then(|r| r.rcutrace),
                        3,
                    ),
                ),
                ("allowed_by_rep", list(&allowed, 3)),
                ("margins", list(margins, 1)),
                ("within", format!("{within} of {}", ratios.len())),
                ("window", summary.sizes.window_secs.to_string()),
                ("on_ms", on_ms.to_string()),
                ("period_ms", period_ms.to_string()),
                (
                    "windows",
                    (summary.sizes.window_secs * 1000 / period_ms.max(1)).to_string(),
                ),
                ("probe_ns", num(probe_ns, 0)),
                ("counted", num(counted, 3)),
                ("call_us", num(calls.map(|c| 1e6 / c), 0)),
                ("observer_pct", num(observer, 1)),
            ],
        ));
    }

    let bpftrace_count = running(Metric::StartupMs, Tracer::Bpftrace, Job::Count);
    let budget_ms = bpftrace_count.map(|b| b * table::STARTUP_RATIO);
    if missed(RowId::StartupCount) || missed(RowId::StartupSrlat) {
        let startup = |tracer, job| running(Metric::StartupMs, tracer, job);
        let count = Config::Running(Tracer::RCUTRACE, Job::Count);
        let count_mark = |metric| num(summary.get(metric, count), 0);
        let mut fields = startup_phase_fields(summary, count, budget_ms);
        fields.extend([
            (
                "rcutrace_count_ms",
                num(startup(Tracer::RCUTRACE, Job::Count), 0),
            ),
            (
                "rcutrace_srlat_ms",
                num(startup(Tracer::RCUTRACE, Job::Srlat), 0),
            ),
            ("bpftrace_count_ms", num(bpftrace_count, 0)),
            (
                "bpftrace_srlat_ms",
                num(startup(Tracer::Bpftrace, Job::Srlat), 0),
            ),
            ("btf_mib", btf_mib.clone()),
            ("ftrace_records", num(kernel(Metric::FtraceRecords), 0)),
            (
                "kallsyms_pass_cpu_ms",
                count_mark(Metric::KallsymsPassCpuMs),
            ),
            ("kallsyms_wait_ms", count_mark(Metric::KallsymsWaitMs)),
            ("kallsyms_ms", num(kernel(Metric::KallsymsReadMs), 0)),
            ("kallsyms_lines", num(kernel(Metric::KallsymsLines), 0)),
            (
                "rcutrace_utime_ms",
                num(
                    running(Metric::StartupUtimeMs, Tracer::RCUTRACE, Job::Count),
                    0,
                ),
            ),
            (
                "bpftrace_utime_ms",
                num(
                    running(Metric::StartupUtimeMs, Tracer::Bpftrace, Job::Count),
                    0,
                ),
            ),
        ]);
        notes.push(fill(GAP_STARTUP, &fields));
    }

    if missed(RowId::StartupStall) {
        let stall = Config::Watching(Watcher::Stall, Load::Idle);
        let mut fields = startup_phase_fields(summary, stall, budget_ms);
        fields.push(("stall_ms", num(summary.get(Metric::StartupMs, stall), 0)));
        notes.push(fill(GAP_STARTUP_STALL, &fields));
    }

    if missed(RowId::RssCount) || missed(RowId::RssSrlat) {
        let mib = |tracer| running(Metric::RssKib, tracer, Job::Count).map(|k| k / 1024.0);
        notes.push(fill(
            GAP_RSS,
            &[
                ("rcutrace_mib", num(mib(Tracer::RCUTRACE), 1)),
                ("bpftrace_mib", num(mib(Tracer::Bpftrace), 1)),
                ("budget_mib", num(Some(table::RSS_MIB), 0)),
                ("btf_mib", btf_mib.clone()),
                (
                    "kprobe_srlat_mib",
                    num(
                        running(Metric::RssKib, Tracer::Rcutrace(Attach::Kprobe), Job::Srlat)
                            .map(|kib| kib / 1024.0),
                        1,
                    ),
                ),
                (
                    "srlat_mib",
                    num(
                        running(Metric::RssKib, Tracer::RCUTRACE, Job::Srlat)
                            .map(|kib| kib / 1024.0),
                        1,
                    ),
                ),
            ],
        ));
    }

    if missed(RowId::UserCpuShare) {
        let run_s = under(Metric::RunS, Tracer::RCUTRACE);
        notes.push(fill(
            GAP_CPU,
            &[
                (
                    "run_utime_ms",
                    num(under(Metric::RunUtimeMs, Tracer::RCUTRACE), 0),
                ),
                ("run_s", num(run_s, 1)),
                ("budget_ms", num(run_s.map(|s| s * 10.0), 0)),
                (
                    "startup_utime_ms",
                    num(
                        running(Metric::StartupUtimeMs, Tracer::RCUTRACE, Job::Count),
                        0,
                    ),
                ),
                (
                    "window_utime_ms",
                    num(under(Metric::WindowUtimeMs, Tracer::RCUTRACE), 0),
                ),
                ("window", summary.sizes.window_secs.to_string()),
            ],
        ));
    }

    if notes.is_empty() {
        return String::new();
    }
    let mut out = String::from("\n### Gaps\n\n");
    for note in notes {
        // One line per note, however the template wraps it.
        let words: Vec<&str> = note.lines().map(str::trim).collect();
        let _ = writeln!(out, "{}", words.join(" ").trim_end());
    }
    out
}

/// What each always-on command added, where it went, and each target met or missed.
fn watch_notes(summary: &Summary) -> String {
    let watching = |metric, watcher, load| summary.get(metric, Config::Watching(watcher, load));
    let window = summary.sizes.window_secs as f64;
    let mut lines = Vec::new();
    for watcher in Watcher::ALL {
        for load in Load::ALL {
            let Some(row) = summary.row(RowId::WatchCpu(watcher, load)) else {
                continue;
            };
            let figure = |metric| watching(metric, watcher, load);
            let own_ms = figure(Metric::WindowCpuMs);
            let program_ms = figure(Metric::WindowProgramMs);
            let runs = figure(Metric::ProgramRunsPerS);
            let woken = figure(Metric::TracerRunsPerS);
            let per_wake_us = own_ms
                .zip(woken)
                .map(|(ms, woken)| ms * 1e3 / (woken * window).max(1.0));
            let per_run_ns = program_ms
                .zip(runs)
                .map(|(ms, runs)| ms * 1e6 / (runs * window).max(1.0));
            let judged = match &row.target {
                None => "no target".to_string(),
                Some(target) if target.met => format!("target {}: met", target.text),
                Some(target) => {
                    let share = match (own_ms, program_ms) {
                        (Some(own), Some(programs)) if own >= programs => format!(
                            "most of it the command's own time: its threads were put on a CPU \
                             {} times a second, for {} µs each",
                            num(woken, 1),
                            num(per_wake_us, 0)
                        ),
                        (Some(_), Some(_)) => {
                            "most of it its programs, at the rate they run".into()
                        }
                        _ => "its parts were not measured".into(),
                    };
                    format!("target {}: **missed**, {share}", target.text)
                }
            };
            lines.push(format!(
                "- `rcutrace {}`, {}: {} % of a CPU ({} ms its own and {} ms its programs' in \
                 {window:.0} s; {} program runs a second at {} ns each; {} context switches a \
                 second), {judged}.",
                watcher.args().join(" "),
                match load {
                    Load::Idle => "idle guest",
                    Load::Busy => "steady load",
                },
                num(row.rcutrace, 3),
                num(own_ms, 1),
                num(program_ms, 1),
                num(runs, 0),
                num(per_run_ns, 0),
                num(figure(Metric::SwitchesPerS), 0),
            ));
        }
    }
    let floor_ns = summary.row(RowId::ReaderAdded).and_then(|r| r.floor);
    let floor_pct = |watcher| {
        let runs = watching(Metric::ProgramRunsPerS, watcher, Load::Busy);
        num(
            floor_ns.zip(runs).map(|(ns, runs)| 100.0 * ns * runs / 1e9),
            3,
        )
    };
    // The command's own time each time its threads were put on a CPU, on the steady load.
    let wake_us = |watcher| {
        let figure = |metric| watching(metric, watcher, Load::Busy);
        num(
            figure(Metric::WindowCpuMs)
                .zip(figure(Metric::TracerRunsPerS))
                .map(|(ms, woken)| ms * 1e3 / (woken * window).max(1.0)),
            0,
        )
    };
    fill(
        WATCH,
        &[
            ("window", summary.sizes.window_secs.to_string()),
            ("gp_wake_us", wake_us(Watcher::Gp)),
            ("stall_wake_us", wake_us(Watcher::Stall)),
            ("lines", lines.join("\n")),
            ("floor_ns", num(floor_ns, 0)),
            ("gp_floor_pct", floor_pct(Watcher::Gp)),
            ("stall_floor_pct", floor_pct(Watcher::Stall)),
        ],
    )
}

/// The section a scaling run (`--scaling CPUS`) writes for its kernel: what was run, the
/// table, the targets missed and what grew.
pub fn scaling_md(outcome: &ScalingOutcome, command: &str, date: &str, many: u32) -> String {
    let summary = &outcome.summary;
    let info = |key: &str| guest_info(&outcome.info, key);
    let leaves = many.div_ceil(16);
    let mut md = fill(
        SCALING,
        &[
            ("kernel", outcome.kernel_release.clone()),
            (
                "series",
                crate::document::series(&outcome.kernel_release).unwrap_or_else(|| "?".into()),
            ),
            ("few", summary.cpus.0.to_string()),
            ("many", many.to_string()),
            (
                "leaves",
                format!("{leaves} rcu_node leaves of up to 16 under a root"),
            ),
            ("bpftrace", info("bpftrace")),
            ("rcutrace", info("rcutrace")),
            ("date", date.into()),
            ("elapsed", format!("{:.0}", outcome.elapsed.as_secs_f64())),
            ("command", command.into()),
            ("reps", outcome.reps.to_string()),
            ("window", outcome.window_secs.to_string()),
        ],
    );
    md.push_str(&summary.table());
    let misses = summary.misses();
    if misses.is_empty() {
        md.push_str("\nEvery target is met.\n");
    } else {
        md.push_str("\nTargets missed:\n\n");
        for miss in misses {
            md.push_str(&format!("- {miss}\n"));
        }
    }
    md.push_str(&scaling_grows(summary));
    md
}

/// What grew, from the table's own figures.
fn scaling_grows(summary: &ScalingSummary) -> String {
    let row = |prefix: &str| summary.rows.iter().find(|r| r.label.starts_with(prefix));
    let growth = |pair: Option<(Option<f64>, Option<f64>)>| match pair {
        Some((Some(few), Some(many))) if few > 0.0 => {
            format!(
                "{:+.0} % ({few:.1} to {many:.1})",
                (many / few - 1.0) * 100.0
            )
        }
        _ => "not measured".into(),
    };
    let rcutrace = |prefix: &str| row(prefix).map(|r| r.rcutrace);
    let bpftrace = |prefix: &str| row(prefix).and_then(|r| r.bpftrace);
    let figure = |v: Option<f64>, decimals: usize| match v {
        Some(v) => format!("{v:.decimals$}"),
        None => "n/a".into(),
    };
    let phases = [
        "of which rcutrace's BTF pass",
        "of which loading",
        "of which attaching",
    ];
    let grown = phases
        .iter()
        .filter_map(|p| {
            let (Some(few), Some(many)) = rcutrace(p)? else {
                return None;
            };
            Some((p.trim_start_matches("of which ").to_string(), few, many))
        })
        .max_by(|a, b| (a.2 - a.1).total_cmp(&(b.2 - b.1)));
    let (phase, phase_few, phase_many) = match grown {
        Some((phase, few, many)) => (phase, format!("{few:.0}"), format!("{many:.0}")),
        None => ("none".into(), "n/a".into(), "n/a".into()),
    };
    let pair = |prefix: &str, decimals| {
        let (few, many) = rcutrace(prefix).unwrap_or((None, None));
        (figure(few, decimals), figure(many, decimals))
    };
    let (interval_few, interval_many) = pair("CPU per", 3);
    let (read_few, read_many) = pair("of which reading", 3);
    let (arrays_few, arrays_many) = pair("of which the per-CPU maps", 3);
    let (gp_few, gp_many) = pair("`gp`", 3);
    let (stall_few, stall_many) = pair("`stall`", 3);
    fill(
        SCALING_GROWS,
        &[
            ("startup_growth", growth(rcutrace("Start-up"))),
            ("bpftrace_growth", growth(bpftrace("Start-up"))),
            ("phase", phase),
            ("phase_few", phase_few),
            ("phase_many", phase_many),
            ("rss_growth", growth(rcutrace("Peak RSS"))),
            ("bpftrace_rss_growth", growth(bpftrace("Peak RSS"))),
            ("interval_few", interval_few),
            ("interval_many", interval_many),
            ("read_few", read_few),
            ("read_many", read_many),
            ("arrays_few", arrays_few),
            ("arrays_many", arrays_many),
            ("few", summary.cpus.0.to_string()),
            ("many", summary.cpus.1.to_string()),
            ("gp_few", gp_few),
            ("gp_many", gp_many),
            ("stall_few", stall_few),
            ("stall_many", stall_many),
        ],
    )
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::{Options, Sizes, sample::Samples, table};
    use xtask::vm::Kernel;

    #[test]
    fn fields_are_filled_once() {
        assert_eq!(
            fill(
                "a {x} b {y} {unknown} {",
                &[("x", "{y}".into()), ("y", "2".into())]
            ),
            "a {y} b 2 {unknown} {"
        );
    }

    /// Every `{name}` that is left is a field the code does not fill.
    fn unfilled(text: &str) -> Vec<&str> {
        text.split('{')
            .skip(1)
            .filter_map(|s| s.split_once('}'))
            .map(|(name, _)| name)
            .filter(|name| {
                !name.is_empty() && name.chars().all(|c| c.is_ascii_lowercase() || c == '_')
            })
            .collect()
    }

    #[test]
    fn document_names_kernel_command_and_every_gap() {
        let outcome = Outcome {
            kernel_release: "6.12.0-test".into(),
            info: vec![
                "kernel 6.12.0-test".into(),
                "cpus 2".into(),
                "bpftrace bpftrace v0.17.0".into(),
                "attach rcutrace-count [INFO rcutrace::tracer] __rcu_read_lock: attached by kprobe"
                    .into(),
                "footprint-referee hooks call_rcu rcu_gp_init".into(),
                "footprint rcutrace-footprint-count 9.0s call_rcu=400".into(),
                "footprint rcutrace-footprint-count 8.5s call_rcu=70 rcu_gp_init=3".into(),
            ],
            summary: Summary::new(&Samples::parse(&all_targets_missed()), Sizes::FULL),
            elapsed: Duration::from_secs(300),
        };
        let opts = Options::new(Kernel::Series("6.12".into()), Sizes::FULL);
        assert_eq!(opts.command(), "cargo xtask bench --kernel 6.12");
        let md = benchmarks_md(&outcome, &opts.command(), "2026-11-30");
        assert_eq!(unfilled(&md), Vec::<&str>::new(), "{md}");
        assert!(
            md.contains("- Kernel: `6.12.0-test` (Debian), 2 CPUs"),
            "{md}"
        );
        assert!(md.contains("`cargo xtask bench --kernel 6.12`"), "{md}");
        assert!(md.contains(BPFTRACE_COUNT) && md.contains(BPFTRACE_SRLAT));
        assert!(
            md.contains(
                "  ```\n  kprobe:__rcu_read_lock {}\n  \
                 kprobe:synchronize_rcu {} kretprobe:synchronize_rcu {}\n  \
                 kprobe:synchronize_rcu {} kretfunc:synchronize_rcu {}\n  \
                 kfunc:synchronize_rcu {} kretfunc:synchronize_rcu {}\n  ```"
            ),
            "{md}"
        );
        assert!(md.contains("### Gaps"), "{md}");
        for note in [
            "- Added cost per `__rcu_read_lock` event: ratio 0.832, target 0.5.",
            "An empty program on the same kprobe costs 395 ns",
            "rcutrace's program adds 100 ns and bpftrace's 200 ns",
            "10.0 ns for the empty program). The empty program alone costs 0.66 of bpftrace's",
            "- Start-up: rcutrace count was attached after 1000 ms",
            "- Start-up, stall: attached after 1400 ms, against the target's 450 ms",
            "then 13 attaches (its own-work hooks included), 4 to 52 ms each and 380 ms in all",
            "the other 40 ms it waited inside the attaches' system calls. The kernel's part of \
             the attaching alone, 360 ms, is 0.8 times the target",
            "rcutrace parses none of the kernel's BTF (4.5 MiB here)",
            "- Peak RSS: rcutrace 80.0 MiB (count) against bpftrace 100.0 MiB",
            "- User CPU: rcutrace used 300 ms of user CPU in its whole run of 10.5 s",
            "- Sampled readers, the estimate against the count on the paced load: 0.896 (median), \
             target within 2 %; by repetition 0.896, with stated 95% margins of 1.2 %: the error \
             was within its margin in 0 of 1 repetitions.",
            "Inside the windows the paced load made 0.950 of the calls per second it made over \
             the whole run (median; by repetition 0.950)",
            "estimate ÷ count is 0.943 (by repetition 0.943)",
            "at the 495 ns per event of the row above and 2.010 events per call of about 50 µs, \
             2.0 % here",
            "the median call, after 3 untimed ones",
        ] {
            assert!(md.contains(note), "{note}\n{md}");
        }
        assert!(md.contains("__rcu_read_lock: attached by kprobe"), "{md}");
        // The footprint's method, and the last repetition's calls of each run.
        assert!(
            md.contains("every call of `call_rcu`, `rcu_gp_init` (kprobes"),
            "{md}"
        );
        assert!(
            md.contains(
                "```\nrcutrace-footprint-count: window 8.5s call_rcu=70 rcu_gp_init=3\n```"
            ),
            "{md}"
        );
    }

    #[test]
    fn always_on_commands_each_target_judged_with_its_parts() {
        let summary = Summary::new(&Samples::parse(table::tests::SAMPLES), Sizes::FULL);
        let notes = watch_notes(&summary);
        assert_eq!(unfilled(&notes), Vec::<&str>::new(), "{notes}");
        for line in [
            "### Always-on commands: `gp` and `stall`",
            "- `rcutrace gp --secs 0`, steady load: 0.400 % of a CPU (30.0 ms its own and 10.0 \
             ms its programs' in 10 s; 2000 program runs a second at 500 ns each; 300 context \
             switches a second), target rcutrace ≤ 0.5 %: met.",
            "- `rcutrace stall`, steady load: 0.150 % of a CPU (4.0 ms its own and 11.0 ms its \
             programs' in 10 s; 2200 program runs a second at 500 ns each; 310 context \
             switches a second), target rcutrace ≤ 0.1 %: **missed**, most of it its programs, \
             at the rate they run.",
            "- `rcutrace gp --secs 0`, idle guest: 0.050 % of a CPU (? ms its own",
            "), no target.",
            "- `rcutrace stall`, idle guest: 0.040 % of a CPU",
            // 395 ns × 2000 and × 2200 runs a second.
            "(395 ns, a hot probe",
            "about\n0.079 % of a CPU to `gp` and 0.087 % to `stall` on the steady load.",
        ] {
            assert!(notes.contains(line), "{line}\n{notes}");
        }
        // gp over its target, with its own time the larger part: 30 ms in 50 × 10 wake-ups.
        let over = table::tests::SAMPLES.replace(
            "added_cpu_pct rcutrace-gp-busy 0.2",
            "added_cpu_pct rcutrace-gp-busy 0.8",
        );
        let notes = watch_notes(&Summary::new(&Samples::parse(&over), Sizes::FULL));
        assert!(
            notes.contains(
                "0.700 % of a CPU (30.0 ms its own and 10.0 ms its programs' in 10 s; 2000 \
                 program runs a second at 500 ns each; 300 context switches a second), target \
                 rcutrace ≤ 0.5 %: **missed**, most of it the command's own time: its threads \
                 were put on a CPU 50.0 times a second, for 60 µs each."
            ),
            "{notes}"
        );
    }

    #[test]
    fn met_targets_need_no_notes() {
        let summary = Summary::new(&Samples::parse(table::tests::SAMPLES), Sizes::FULL);
        let notes = gap_notes(&summary);
        assert!(notes.contains("Added cost per"), "{notes}");
        assert!(
            !notes.contains("Start-up") && !notes.contains("Peak RSS"),
            "{notes}"
        );
    }

    /// The table's test samples with every target missed.
    fn all_targets_missed() -> String {
        table::tests::SAMPLES
            .replace(
                "startup_ms rcutrace-count 100",
                "startup_ms rcutrace-count 1000",
            )
            .replace(
                "startup_ms rcutrace-srlat 90",
                "startup_ms rcutrace-srlat 900",
            )
            .replace(
                "rss_kib rcutrace-count 8192",
                "rss_kib rcutrace-count 81920",
            )
            .replace("run_utime_ms rcutrace 30", "run_utime_ms rcutrace 300")
            .replace(
                "paced_events_per_call rcutrace-sampled 1.99",
                "paced_events_per_call rcutrace-sampled 1.80",
            )
            .replace(
                "startup_ms rcutrace-stall-idle 400",
                "startup_ms rcutrace-stall-idle 1400",
            )
            + STALL_MARKS
    }

    /// stall's start-up phases, as its marks give them.
    const STALL_MARKS: &str = "\
sample startup_btf_pass_ms rcutrace-stall-idle 150
sample startup_object_ms rcutrace-stall-idle 120
sample startup_attaching_ms rcutrace-stall-idle 380
sample attaches rcutrace-stall-idle 13
sample attach_min_ms rcutrace-stall-idle 4
sample attach_max_ms rcutrace-stall-idle 52
sample programs_kept rcutrace-stall-idle 20
sample programs_in_object rcutrace-stall-idle 60
sample attaching_user_ms rcutrace-stall-idle 20
sample attaching_system_ms rcutrace-stall-idle 320
sample attach_system_min_ms rcutrace-stall-idle 3
sample attach_system_median_ms rcutrace-stall-idle 20
sample attach_system_max_ms rcutrace-stall-idle 50
";
}

//! rcutrace's start-up timing marks (`rcutrace::marks` at debug level) read back from
//! its log, and the phases of its start-up they measure: BENCHMARKS.md says where this run's
//! start-up went, not figures measured once by hand.

use crate::sample::Metric;

/// rcutrace's log filter for a run whose start-up is taken apart: its marks, and the info
/// lines that say how each probe was attached.
pub const LOG_FILTER: &str = "info,rcutrace::marks=debug";

/// One step of the start-up and when it ended, in ms since rcutrace's `main` began.
#[derive(Clone, Debug, PartialEq)]
pub struct Mark {
    pub at_ms: f64,
    pub step: String,
    /// The process's CPU time and peak resident memory by then, where the mark says them.
    pub usage: Option<Usage>,
}

/// What a mark says by then: the CPU time of the thread that marked it (user, and system: the
/// kernel's work for it, such as an attach) and the process's peak resident memory.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Usage {
    pub user_ms: f64,
    pub system_ms: f64,
    pub peak_kib: u64,
}

impl Mark {
    /// The mark of the start's symbol lookup: made by a thread of its own beside the
    /// attaching (a pass over /proc/kallsyms before rcutrace asked the kernel instead).
    fn is_symbol_lookup(&self) -> bool {
        self.step.starts_with("the start's symbols found")
            || self
                .step
                .starts_with("/proc/kallsyms read for the start's symbols")
    }

    /// The mark of the BTF pass that runs on a thread of its own beside the start.
    fn is_btf_pass_beside(&self) -> bool {
        self.step == "kernel BTF read (beside the start)"
    }

    /// Whether a thread other than the attaching one made the mark.
    fn is_beside(&self) -> bool {
        self.is_symbol_lookup() || self.is_btf_pass_beside()
    }

    /// What one attach put in: the function of a `FUNCTION attached` mark, or the link of a
    /// `kprobe-multi link of N functions attached` one (not `probes attached`, which ends a
    /// phase).
    fn attached_function(&self) -> Option<&str> {
        let attached = self.step.strip_suffix(" attached")?;
        let one_function = !attached.contains(' ') && attached != "probes";
        (one_function || attached.starts_with("kprobe-multi link of ")).then_some(attached)
    }
}

/// A mark from one line of rcutrace's log (`[DEBUG rcutrace::marks]    12.3 ms  STEP`, or
/// with the usage: `12.3 ms  (thread: user 8.0 ms, system 3.1 ms; peak 4100 KiB)  STEP`).
pub fn parse(line: &str) -> Option<Mark> {
    let (_, rest) = line.split_once("rcutrace::marks]")?;
    let (at, step) = rest.trim_start().split_once(" ms  ")?;
    let (usage, step) = match step.strip_prefix('(').and_then(|s| s.split_once(")  ")) {
        Some((usage, step)) => (parse_usage(usage), step),
        None => (None, step),
    };
    Some(Mark {
        at_ms: at.trim().parse().ok()?,
        step: step.trim().to_string(),
        usage,
    })
}

fn parse_usage(text: &str) -> Option<Usage> {
    let mut numbers = text
        .split([',', ' ', ';'])
        .filter_map(|word| word.parse::<f64>().ok());
    Some(Usage {
        user_ms: numbers.next()?,
        system_ms: numbers.next()?,
        peak_kib: numbers.next()? as u64,
    })
}

/// Where one start-up's time went, in ms.
#[derive(Clone, Debug, PartialEq)]
pub struct Phases {
    /// When the one pass over the kernel's BTF ended (it starts with the command, and runs
    /// beside the rest of the start where the command reads no layout first).
    pub btf_pass_ms: f64,
    /// aya loading the narrowed object and creating its maps.
    pub object_ms: f64,
    /// The object's programs aya was given, of all it holds.
    pub programs_kept: u32,
    pub programs_in_object: u32,
    /// Every probe attached, the own-work hooks included, and the time each took (from the
    /// mark before it).
    pub attaches: u32,
    pub attach_min_ms: f64,
    pub attach_max_ms: f64,
    /// From the object loaded to the last probe attached.
    pub attaching_ms: f64,
    /// The kernel's CPU for each attach: the attaching thread's system time across it, where
    /// the marks say it.
    pub attach_system_ms: Vec<f64>,
    /// The start's symbol lookup: its thread's CPU; and how long the opening waited, after
    /// the last attach, for the kprobe table (found from the lookup and the BTF pass), where
    /// the marks say them.
    pub kallsyms_pass_cpu_ms: Option<f64>,
    pub kallsyms_wait_ms: Option<f64>,
    /// The attaching thread's CPU over the attaching (from the object loaded to the last
    /// probe attached): its own code's (user) and the kernel's (system); the rest of the
    /// attaching's time it waited in the kernel.
    pub attaching_user_ms: Option<f64>,
    pub attaching_system_ms: Option<f64>,
}

/// The phases of a start-up from its marks in order; `None` if a step is missing (an older
/// rcutrace, or a log without its marks).
pub fn phases(marks: &[Mark]) -> Option<Phases> {
    let at = |step: &str| marks.iter().find(|m| m.step == step).map(|m| m.at_ms);
    let loaded = at("object loaded, maps created")?;
    // The attaching thread's marks: the symbol lookup and the BTF pass mark from threads of
    // their own, whose time and CPU are not the attaches'.
    let attaching: Vec<&Mark> = marks.iter().filter(|m| !m.is_beside()).collect();
    let attaches = || {
        attaching
            .windows(2)
            .filter(move |pair| pair[1].attached_function().is_some() && pair[1].at_ms > loaded)
    };
    let spans: Vec<f64> = attaches()
        .map(|pair| pair[1].at_ms - pair[0].at_ms)
        .collect();
    let attach_system_ms = attaches()
        .filter_map(|pair| Some(pair[1].usage?.system_ms - pair[0].usage?.system_ms))
        .collect();
    let kallsyms = marks.iter().find(|m| m.is_symbol_lookup());
    // The pass's own mark where it ran beside the start (gp and stall once marked that
    // pass's start "kernel BTF read" too); else the attaching thread's read.
    let btf_pass = marks
        .iter()
        .find(|m| m.is_btf_pass_beside())
        .map(|m| m.at_ms)
        .or_else(|| at("kernel BTF read"))?;
    // The object's load starts after the attaching thread's last mark before it.
    let object_from = attaching
        .iter()
        .take_while(|m| !m.step.starts_with("eBPF object narrowed"))
        .last()
        .map(|m| m.at_ms)?;
    let usage_at = |step: &str| marks.iter().find(|m| m.step == step)?.usage;
    let usage_between = |from: &str, to: &str| {
        let (from, to) = (usage_at(from)?, usage_at(to)?);
        Some((to.user_ms - from.user_ms, to.system_ms - from.system_ms))
    };
    let narrowed = marks
        .iter()
        .find_map(|m| m.step.strip_prefix("eBPF object narrowed: "))?;
    let mut numbers = narrowed
        .split(|c: char| !c.is_ascii_digit())
        .filter(|s| !s.is_empty())
        .map(|s| s.parse::<u32>().ok());
    Some(Phases {
        btf_pass_ms: btf_pass,
        object_ms: loaded - object_from,
        programs_kept: numbers.next()??,
        programs_in_object: numbers.next()??,
        attaches: spans.len() as u32,
        attach_min_ms: spans.iter().copied().reduce(f64::min)?,
        attach_max_ms: spans.iter().copied().reduce(f64::max)?,
        attaching_ms: at("probes attached")? - loaded,
        attach_system_ms,
        kallsyms_pass_cpu_ms: kallsyms
            .and_then(|m| m.usage)
            .map(|u| u.user_ms + u.system_ms),
        kallsyms_wait_ms: at("kprobe table found")
            .zip(at("probes attached"))
            .map(|(found, attached)| found - attached),
        attaching_user_ms: usage_between("object loaded, maps created", "probes attached")
            .map(|(user, _)| user),
        attaching_system_ms: usage_between("object loaded, maps created", "probes attached")
            .map(|(_, system)| system),
    })
}

/// The samples a start-up's phases give (the guest prints them, `replay` recomputes them).
pub fn phase_samples(phases: &Phases) -> Vec<(Metric, f64)> {
    let mut samples = vec![
        (Metric::StartupBtfPassMs, phases.btf_pass_ms),
        (Metric::StartupObjectMs, phases.object_ms),
        (Metric::StartupAttachingMs, phases.attaching_ms),
        (Metric::Attaches, phases.attaches.into()),
        (Metric::AttachMinMs, phases.attach_min_ms),
        (Metric::AttachMaxMs, phases.attach_max_ms),
        (Metric::ProgramsKept, phases.programs_kept.into()),
        (Metric::ProgramsInObject, phases.programs_in_object.into()),
    ];
    let mut system = phases.attach_system_ms.clone();
    system.sort_by(f64::total_cmp);
    if let (Some(first), Some(last)) = (system.first(), system.last()) {
        samples.extend([
            (Metric::AttachSystemMinMs, *first),
            (Metric::AttachSystemMedianMs, system[system.len() / 2]),
            (Metric::AttachSystemMaxMs, *last),
        ]);
    }
    if let Some(cpu) = phases.kallsyms_pass_cpu_ms {
        samples.push((Metric::KallsymsPassCpuMs, cpu));
    }
    if let Some(wait) = phases.kallsyms_wait_ms {
        samples.push((Metric::KallsymsWaitMs, wait));
    }
    if let (Some(user), Some(system)) = (phases.attaching_user_ms, phases.attaching_system_ms) {
        samples.push((Metric::AttachingUserMs, user));
        samples.push((Metric::AttachingSystemMs, system));
    }
    samples
}

/// Every metric `phase_samples` may give.
pub const PHASE_METRICS: [Metric; 15] = [
    Metric::StartupBtfPassMs,
    Metric::StartupObjectMs,
    Metric::StartupAttachingMs,
    Metric::Attaches,
    Metric::AttachMinMs,
    Metric::AttachMaxMs,
    Metric::ProgramsKept,
    Metric::ProgramsInObject,
    Metric::AttachSystemMinMs,
    Metric::AttachSystemMedianMs,
    Metric::AttachSystemMaxMs,
    Metric::KallsymsPassCpuMs,
    Metric::KallsymsWaitMs,
    Metric::AttachingUserMs,
    Metric::AttachingSystemMs,
];

/// The line the guest logs for a mark of `config`'s start-up.
pub fn logged_line(config: &str, mark: &Mark) -> String {
    let usage = mark.usage.map_or(String::new(), |u| {
        format!(
            " (user {:.1} ms, system {:.1} ms, peak {} KiB)",
            u.user_ms, u.system_ms, u.peak_kib
        )
    });
    format!("info mark {config} {:.1} {}{usage}", mark.at_ms, mark.step)
}

/// A mark back from the guest's log (`logged_line`), with its config's name.
pub fn parse_logged(line: &str) -> Option<(&str, Mark)> {
    let rest = line.strip_prefix("info mark ")?;
    let (config, rest) = rest.split_once(' ')?;
    let (at, rest) = rest.split_once(' ')?;
    let (step, usage) = match rest
        .strip_suffix(" KiB)")
        .and_then(|r| r.rsplit_once(" (user "))
    {
        Some((step, usage)) => (step, parse_usage(usage)),
        None => (rest, None),
    };
    Some((
        config,
        Mark {
            at_ms: at.parse().ok()?,
            step: step.to_string(),
            usage,
        },
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    const LOG: &str = "\
[DEBUG rcutrace::marks]      2.0 ms  privileges checked
[DEBUG rcutrace::marks]     90.5 ms  kernel BTF read
[DEBUG rcutrace::marks]     91.0 ms  own-work constants found
[DEBUG rcutrace::marks]     91.2 ms  eBPF object narrowed: 21 of its 190 programs kept
[DEBUG rcutrace::marks]    141.0 ms  object loaded, maps created
[INFO  rcutrace::trace::tracer] rcu_tasks_wait_gp: attached by kprobe (own_kprobe)
[DEBUG rcutrace::marks]    153.0 ms  rcu_tasks_wait_gp attached
[DEBUG rcutrace::marks]    160.0 ms  own-work hooks attached
[DEBUG rcutrace::marks]    180.0 ms  synchronize_rcu: program loaded
[DEBUG rcutrace::marks]    198.0 ms  synchronize_rcu attached
[DEBUG rcutrace::marks]    208.5 ms  call_rcu attached
[DEBUG rcutrace::marks]    209.0 ms  probes attached
[DEBUG rcutrace::marks]    212.0 ms  banner printed
";

    /// A kprobe-multi link is one attach, however many functions it puts in.
    #[test]
    fn a_kprobe_multi_link_is_one_attach() {
        let link = Mark {
            at_ms: 1.0,
            step: "kprobe-multi link of 6 functions attached".into(),
            usage: None,
        };
        assert!(link.attached_function().is_some());
        let all = Mark {
            step: "probes attached".into(),
            ..link.clone()
        };
        assert_eq!(all.attached_function(), None);
    }

    fn marks(log: &str) -> Vec<Mark> {
        log.lines().filter_map(parse).collect()
    }

    #[test]
    fn marks_are_read_from_the_log_and_other_lines_passed_over() {
        let marks = marks(LOG);
        assert_eq!(marks.len(), 12);
        assert_eq!(
            marks[1],
            Mark {
                at_ms: 90.5,
                step: "kernel BTF read".into(),
                usage: None,
            }
        );
    }

    #[test]
    fn a_mark_with_the_usage_gives_its_cpu_time_and_peak() {
        let line = "[DEBUG rcutrace::marks]   141.0 ms  (thread: user   80.5 ms, system   \
                    22.0 ms; peak   7424 KiB)  object loaded, maps created";
        assert_eq!(
            parse(line),
            Some(Mark {
                at_ms: 141.0,
                step: "object loaded, maps created".into(),
                usage: Some(Usage {
                    user_ms: 80.5,
                    system_ms: 22.0,
                    peak_kib: 7424,
                }),
            })
        );
    }

    #[test]
    fn each_phase_is_the_time_between_its_marks() {
        let phases = phases(&marks(LOG)).unwrap();
        assert_eq!(phases.btf_pass_ms, 90.5);
        assert_eq!(phases.object_ms, 50.0);
        assert_eq!((phases.programs_kept, phases.programs_in_object), (21, 190));
        // The own-work hook from the object's load, the trampoline from its program's load.
        assert_eq!(phases.attaches, 3);
        assert_eq!(phases.attach_min_ms, 10.5);
        assert_eq!(phases.attach_max_ms, 18.0);
        assert_eq!(phases.attaching_ms, 68.0);
    }

    /// Marks with the usage give each attach's kernel CPU, the kallsyms pass's CPU and wait,
    /// and the attaching's user and system CPU; a run without own-work hooks still
    /// has its object's load timed.
    #[test]
    fn marks_with_the_usage_give_the_kernels_share() {
        let log = "\
[DEBUG rcutrace::marks]     90.5 ms  (thread: user 60.0 ms, system 30.0 ms; peak 5000 KiB)  kernel BTF read
[DEBUG rcutrace::marks]     91.2 ms  (thread: user 60.1 ms, system 30.0 ms; peak 7000 KiB)  eBPF object narrowed: 9 of its 190 programs kept
[DEBUG rcutrace::marks]    141.0 ms  (thread: user 70.0 ms, system 60.0 ms; peak 8000 KiB)  object loaded, maps created
[DEBUG rcutrace::marks]    171.0 ms  (thread: user 70.0 ms, system 88.0 ms; peak 8000 KiB)  __rcu_read_lock attached
[DEBUG rcutrace::marks]    250.0 ms  (thread: user 80.0 ms, system 120.0 ms; peak 8000 KiB)  call_rcu: program loaded
[DEBUG rcutrace::marks]    275.0 ms  (thread: user 200.0 ms, system 150.0 ms; peak 8000 KiB)  /proc/kallsyms read for the start's symbols (10 of 10 found)
[DEBUG rcutrace::marks]    280.0 ms  (thread: user 80.0 ms, system 145.0 ms; peak 8000 KiB)  call_rcu attached
[DEBUG rcutrace::marks]    290.0 ms  (thread: user 80.0 ms, system 146.0 ms; peak 8000 KiB)  probes attached
[DEBUG rcutrace::marks]    300.0 ms  (thread: user 80.0 ms, system 146.0 ms; peak 8000 KiB)  kprobe table found
";
        let phases = phases(&marks(log)).unwrap();
        assert_eq!(phases.object_ms, 50.5);
        // The kallsyms pass's mark, from its own thread, is passed over.
        assert_eq!(phases.attach_system_ms, vec![28.0, 25.0]);
        assert_eq!((phases.attach_min_ms, phases.attach_max_ms), (30.0, 30.0));
        assert_eq!(phases.kallsyms_pass_cpu_ms, Some(350.0));
        assert_eq!(phases.kallsyms_wait_ms, Some(10.0));
        assert_eq!(phases.attaching_user_ms, Some(10.0));
        assert_eq!(phases.attaching_system_ms, Some(86.0));
    }

    /// The start as it is now: the symbols asked of the kernel and the BTF read beside the
    /// load and the attaches, each on a thread of its own.
    #[test]
    fn the_threads_beside_the_attaching_are_told_apart() {
        let log = "\
[DEBUG rcutrace::marks]      4.6 ms  (thread: user 3.5 ms, system 3.5 ms; peak 3584 KiB)  privileges checked
[DEBUG rcutrace::marks]      9.7 ms  (thread: user 3.7 ms, system 7.5 ms; peak 4652 KiB)  the start's symbols found (11 of 11)
[DEBUG rcutrace::marks]     24.6 ms  (thread: user 11.2 ms, system 16.8 ms; peak 7264 KiB)  eBPF object narrowed: 13 of its 216 programs kept
[DEBUG rcutrace::marks]     71.1 ms  (thread: user 37.0 ms, system 37.0 ms; peak 8216 KiB)  object loaded, maps created
[DEBUG rcutrace::marks]    131.8 ms  (thread: user 42.4 ms, system 72.7 ms; peak 8400 KiB)  kernel BTF read (beside the start)
[DEBUG rcutrace::marks]    140.5 ms  (thread: user 47.1 ms, system 94.3 ms; peak 8400 KiB)  kprobe-multi link of 6 functions attached
[DEBUG rcutrace::marks]    151.7 ms  (thread: user 47.1 ms, system 106.7 ms; peak 8400 KiB)  __rcu_read_lock attached
[DEBUG rcutrace::marks]    152.2 ms  (thread: user 47.1 ms, system 106.7 ms; peak 8400 KiB)  probes attached
[DEBUG rcutrace::marks]    153.1 ms  (thread: user 47.1 ms, system 106.7 ms; peak 8400 KiB)  kprobe table found
";
        let phases = phases(&marks(log)).unwrap();
        assert_eq!(phases.btf_pass_ms, 131.8);
        assert!((phases.object_ms - 66.5).abs() < 1e-9);
        assert_eq!(phases.attaches, 2);
        assert!((phases.attach_min_ms - 11.2).abs() < 1e-9);
        assert!((phases.attach_max_ms - 69.4).abs() < 1e-9);
        assert_eq!(phases.kallsyms_pass_cpu_ms, Some(11.2));
        assert!((phases.kallsyms_wait_ms.unwrap() - 0.9).abs() < 1e-9);
    }

    #[test]
    fn a_logged_mark_reads_back_as_it_was() {
        let mark = Mark {
            at_ms: 141.0,
            step: "object loaded, maps created".into(),
            usage: Some(Usage {
                user_ms: 80.5,
                system_ms: 22.0,
                peak_kib: 7424,
            }),
        };
        let line = logged_line("rcutrace-count", &mark);
        assert_eq!(parse_logged(&line), Some(("rcutrace-count", mark.clone())));
        let bare = Mark {
            usage: None,
            ..mark
        };
        assert_eq!(
            parse_logged(&logged_line("rcutrace-count", &bare)),
            Some(("rcutrace-count", bare))
        );
    }

    #[test]
    fn the_btf_pass_beside_the_start_ends_where_it_says() {
        // stall marked the pass's start as "kernel BTF read" too, long before it ended.
        let mut with_start = marks(LOG);
        let beside = Mark {
            at_ms: 120.0,
            step: "kernel BTF read (beside the start)".into(),
            usage: None,
        };
        with_start.insert(2, beside);
        assert_eq!(phases(&with_start).map(|p| p.btf_pass_ms), Some(120.0));
    }

    #[test]
    fn a_log_without_the_marks_gives_no_phases() {
        assert_eq!(phases(&[]), None);
        let without_btf: Vec<Mark> = marks(LOG)
            .into_iter()
            .filter(|m| m.step != "kernel BTF read")
            .collect();
        assert_eq!(phases(&without_btf), None);
    }
}

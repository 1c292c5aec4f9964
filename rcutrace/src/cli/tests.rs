use super::*;
use clap::{CommandFactory, error::ErrorKind};

#[test]
fn stall_thresholds_take_a_unit() {
    assert_eq!(parse_threshold("500ms"), Ok(Duration::from_millis(500)));
    assert_eq!(parse_threshold("1.5s"), Ok(Duration::from_millis(1500)));
    assert_eq!(parse_threshold(" 2s "), Ok(Duration::from_secs(2)));
    for bad in ["2", "x s", "-1s", "0ms", "1h"] {
        assert!(parse_threshold(bad).is_err(), "{bad}");
    }
    let Command::Stall(args) =
        Cli::try_parse_from(["rcutrace", "stall", "--warn-at", "2s", "--warn-at", "500ms"])
            .unwrap()
            .command
    else {
        panic!("not stall");
    };
    assert_eq!(
        args.warn_at,
        [Duration::from_secs(2), Duration::from_millis(500)]
    );
    assert_eq!((args.secs, args.exit_on_warning), (0, false));
    let error = Cli::try_parse_from(["rcutrace", "stall", "--warn-at", "3"]).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::ValueValidation);
}

fn parse(args: &[&str]) -> Result<Cli, clap::Error> {
    Cli::try_parse_from(std::iter::once("rcutrace").chain(args.iter().copied()))
}

#[test]
fn run_takes_the_command_after_its_own_options() {
    let Command::Run(run) = parse(&["run", "--linger", "3", "--", "ip", "-n", "x"])
        .unwrap()
        .command
    else {
        panic!("not run");
    };
    assert_eq!(run.linger, 3);
    assert_eq!(run.command, ["ip", "-n", "x"]);
    // Without `--`, the command's own options stay its own after its name.
    let Command::Run(run) = parse(&["run", "unshare", "-n", "true"]).unwrap().command else {
        panic!("not run");
    };
    assert_eq!(run.command, ["unshare", "-n", "true"]);
    assert!(parse(&["run"]).is_err(), "a command is required");
    assert!(parse(&["run", "--func", "no_such_wait", "--", "true"]).is_err());
}

#[test]
fn dash_c_runs_a_command_in_place_of_the_seconds() {
    let Command::Srlat(srlat) = parse(&["srlat", "-c", "rcu-workload membarrier 5"])
        .unwrap()
        .command
    else {
        panic!("not srlat");
    };
    assert_eq!(
        srlat.latency.common.length.command(),
        Some("rcu-workload membarrier 5")
    );
    assert_eq!(
        srlat.latency.common.length.duration(),
        None,
        "until the command exits"
    );
    let Command::Gp(gp) = parse(&["gp", "--command", "true"]).unwrap().command else {
        panic!("not gp");
    };
    assert_eq!(
        (gp.length.command(), gp.length.duration()),
        (Some("true"), None)
    );
    for conflicting in [
        &["count", "-c", "true", "--secs", "5"][..],
        &["srlat", "-c", "true", "--pid", "1"],
        &["count", "-c", "true", "--sample-readers", "100/1000"],
    ] {
        let error = parse(conflicting).unwrap_err();
        assert_eq!(
            error.kind(),
            clap::error::ErrorKind::ArgumentConflict,
            "{conflicting:?}"
        );
    }
}

#[test]
fn cli_definition_is_consistent() {
    Cli::command().debug_assert();
}

#[test]
fn defaults() {
    let Command::Count(count) = parse(&["count"]).unwrap().command else {
        panic!("not count");
    };
    assert_eq!(count.common.length.secs, 10);
    assert_eq!(count.common.attach, AttachChoice::Auto);
    assert_eq!(
        count.common.length.duration(),
        Some(Duration::from_secs(10))
    );
    assert!(!count.all);
    assert_eq!((count.by.by, count.by.top), (None, 20));
    let Command::Count(count) = parse(&["count", "--secs", "0", "--all", "--by", "stack"])
        .unwrap()
        .command
    else {
        panic!("not count");
    };
    assert_eq!(count.common.length.duration(), None);
    assert!(count.all);
    assert_eq!(count.by.by, Some(By::Stack));
}

#[test]
fn srlat_options() {
    let cli = parse(&[
        "srlat",
        "--expedited",
        "--linear",
        "0,1000,100",
        "--pid",
        &std::process::id().to_string(),
        "--unit",
        "ns",
    ])
    .unwrap();
    let Command::Srlat(args) = cli.command else {
        panic!("not srlat");
    };
    assert!(args.expedited);
    assert!(args.func.is_empty());
    assert_eq!(args.pid, Some(std::process::id()));
    assert_eq!(args.latency.unit, Some(Unit::Ns));
    assert_eq!(
        args.latency.linear,
        Some(Linear {
            min: 0,
            max: 1000,
            step: 100
        })
    );
}

#[test]
fn func_takes_waiting_updaters_only() {
    let cli = parse(&[
        "srlat",
        "--func",
        "rcu_barrier",
        "--func",
        "synchronize_srcu",
        "--by",
        "comm",
        "--top",
        "3",
    ])
    .unwrap();
    let Command::Srlat(args) = cli.command else {
        panic!("not srlat");
    };
    assert_eq!(args.func, ["rcu_barrier", "synchronize_srcu"]);
    assert_eq!(
        (args.latency.by.by, args.latency.by.top),
        (Some(By::Comm), 3)
    );
    let err = parse(&["srlat", "--func", "call_rcu"]).unwrap_err();
    assert_eq!(err.exit_code(), 2);
    assert!(err.to_string().contains("accepted: "), "{err}");
    assert!(err.to_string().contains("rcu_barrier"), "{err}");
}

#[test]
fn sample_readers_takes_on_and_period() {
    let Command::Count(args) = parse(&["count", "--sample-readers", "100/1000", "--all"])
        .unwrap()
        .command
    else {
        panic!("not count");
    };
    assert_eq!(
        args.sample_readers,
        Some(ReaderSampling {
            on: Duration::from_millis(100),
            period: Duration::from_millis(1000)
        })
    );
    let err = parse(&["count", "--sample-readers", "50/1000"]).unwrap_err();
    assert!(
        err.to_string().contains("ON_MS must be at least 100"),
        "{err}"
    );
}

#[test]
fn interval_options() {
    let Command::Gplat(args) = parse(&["gplat", "--interval", "5", "--cumulative"])
        .unwrap()
        .command
    else {
        panic!("not gplat");
    };
    assert_eq!(
        args.over_time.interval(),
        Some(Interval {
            every: Duration::from_secs(5),
            cumulative: true
        })
    );
    let Command::Count(args) = parse(&["count"]).unwrap().command else {
        panic!("not count");
    };
    assert_eq!(args.over_time.interval(), None);
}

#[test]
fn callbacks_options() {
    let Command::Callbacks(args) = parse(&["callbacks"]).unwrap().command else {
        panic!("not callbacks");
    };
    assert_eq!((args.top, args.by, args.unit), (10, None, Unit::Ms));
    let cli = parse(&["callbacks", "--top", "0", "--by", "cpu", "--unit", "us"]).unwrap();
    let Command::Callbacks(args) = cli.command else {
        panic!("not callbacks");
    };
    assert_eq!(
        (args.top, args.by, args.unit),
        (0, Some(CallbacksBy::Cpu), Unit::Us)
    );
}

#[test]
fn linear_rules_follow_bpftrace() {
    assert!(parse_linear("0,1,1").is_ok());
    assert!(parse_linear("5, 1005, 1").is_ok());
    for (bad, says) in [
        ("0,10", "MIN,MAX,STEP"),
        ("0,10,2,3", "MIN,MAX,STEP"),
        (
            "-1,10,2",
            "MIN \"-1\" in \"-1,10,2\" is not a whole number; MIN, MAX and STEP are 0 or more",
        ),
        ("0,10,0", "at least 1"),
        ("10,10,1", "less than MAX"),
        ("0,10,11", "must not exceed"),
        ("0,1001,1", "at most 1000"),
        ("a,10,1", "MIN \"a\""),
    ] {
        let err = parse_linear(bad).unwrap_err();
        assert!(err.contains(says), "{bad}: {err}");
    }
}

#[test]
fn report_takes_one_or_two_saved_runs() {
    let Command::Report(args) = parse(&["report", "a.json", "b.json"]).unwrap().command else {
        panic!("not report");
    };
    assert_eq!(args.files.len(), 2);
    let cli = parse(&["report", "a.json", "--save", "b.json"]).unwrap();
    assert_eq!(check(&cli).unwrap_err().exit_code(), 2);
    assert!(check(&parse(&["srlat", "--save", "b.json"]).unwrap()).is_ok());
    let cli = parse(&["-f", "json", "report", "a.json", "b.json"]).unwrap();
    assert_eq!(check(&cli).unwrap_err().exit_code(), 2);
    assert!(check(&parse(&["-f", "json", "report", "a.json"]).unwrap()).is_ok());
}

#[test]
fn folded_stacks_and_flame_graphs_need_a_run_with_stacks() {
    for ok in [
        &["-f", "folded", "count", "--by", "stack"][..],
        &["-f", "folded", "srlat", "--by", "stack", "--top", "0"],
        &["gplat", "--by", "stack", "--flamegraph", "g.svg"],
        &["-f", "folded", "gp"],
        &["-f", "folded", "report", "a.json"],
        &["report", "a.json", "--flamegraph", "a.svg"],
    ] {
        assert!(check(&parse(ok).unwrap()).is_ok(), "{ok:?}");
    }
    for (bad, says) in [
        (&["-f", "folded", "count"][..], "it needs --by stack"),
        (
            &["count", "--by", "comm", "--flamegraph", "c.svg"],
            "it needs --by stack",
        ),
        (
            &["-f", "folded", "srlat", "--by", "stack", "--interval", "1"],
            "takes no --interval",
        ),
        (
            &["-f", "folded", "gp", "--interval", "1"],
            "takes no --interval",
        ),
        (
            &["-f", "folded", "callbacks"],
            "only count, srlat and gplat",
        ),
        (&["-f", "folded", "serve"], "only count, srlat and gplat"),
        (&["-f", "folded", "stall"], "only count, srlat and gplat"),
        (
            &["-f", "folded", "report", "a.json", "b.json"],
            "one run's stacks",
        ),
    ] {
        let err = check(&parse(bad).unwrap()).unwrap_err();
        assert_eq!(err.exit_code(), 2, "{bad:?}");
        assert!(err.to_string().contains(says), "{bad:?}: {err}");
    }
}

#[test]
fn fail_if_takes_conditions_it_can_read_on_two_runs() {
    let Command::Report(args) = parse(&[
        "report",
        "a.json",
        "b.json",
        "--fail-if",
        "p99 > +20%",
        "--fail-if",
        "mean > -5%",
        "--junit",
        "v.xml",
    ])
    .unwrap()
    .command
    else {
        panic!("not report");
    };
    assert_eq!(args.fail_if.len(), 2);
    assert_eq!(args.fail_if[1].text, "mean > -5%");
    let err = parse(&["report", "a.json", "b.json", "--fail-if", "p99 > 20"]).unwrap_err();
    assert_eq!(err.exit_code(), 2);
    assert!(err.to_string().contains("has no unit"), "{err}");
    assert!(
        err.to_string()
            .contains("STATISTIC is count, min, mean, max"),
        "{err}"
    );
    let err = parse(&["report", "a.json", "b.json", "--junit", "v.xml"]).unwrap_err();
    assert_eq!(err.exit_code(), 2);
    let cli = parse(&["report", "a.json", "--fail-if", "count < 3"]).unwrap();
    let err = check(&cli).unwrap_err();
    assert_eq!(err.exit_code(), 2);
    assert!(err.to_string().contains("give two saved runs"), "{err}");
}

#[test]
fn stages_take_apart_the_synchronize_rcu_calls_only() {
    for ok in [
        &["srlat", "--stages"][..],
        &["srlat", "--stages", "--expedited"],
        &[
            "srlat",
            "--stages",
            "--func",
            "synchronize_rcu",
            "--expedited",
        ],
    ] {
        let cli = parse(ok).unwrap();
        assert!(check(&cli).is_ok(), "{ok:?}");
    }
    let cli = parse(&["srlat", "--stages", "--func", "rcu_barrier"]).unwrap();
    let err = check(&cli).unwrap_err();
    assert_eq!(err.exit_code(), 2);
    assert!(
        err.to_string()
            .contains("takes apart synchronize_rcu and synchronize_rcu_expedited only"),
        "{err}"
    );
    assert_eq!(
        parse(&["srlat", "--stages", "--by", "comm"])
            .unwrap_err()
            .exit_code(),
        2
    );
}

#[test]
fn usage_errors_are_exit_status_2() {
    for args in [
        &["srlat", "--linear", "0,10"][..],
        &["srlat", "--buckets", "0"],
        &["srlat", "--linear", "0,10,1", "--buckets", "5"],
        &["srlat", "--pid", "0"],
        &["srlat", "--func", "__rcu_read_lock"],
        &["count", "--by", "nothing"],
        &["count", "--top", "5"],
        // Above the kernel's largest pid_max (2^22): never a running process.
        &["srlat", "--pid", "4194305"],
        &["count", "--secs", "-1"],
        &["count", "--attach", "uprobe"],
        &["count", "--interval", "0"],
        &["count", "--interval", "1.5"],
        &["count", "--cumulative"],
        &["count", "--sample-readers", "100"],
        &["count", "--sample-readers", "50/1000"],
        &["count", "--sample-readers", "100/150"],
        &["count", "--sample-readers", "100/1000", "--by", "comm"],
        &["srlat", "--sample-readers", "100/1000"],
        &["report"],
        &["report", "a", "b", "c"],
        &["gplat", "--unit", "s"],
        &["serve", "--listen", "localhost"],
        &["serve", "--by", "comm"],
        &["callbacks", "--by", "comm"],
        &["callbacks", "--interval", "1"],
        &["callbacks", "--top", "-1"],
        &["frobnicate"],
    ] {
        let err = parse(args).unwrap_err();
        assert_ne!(err.kind(), ErrorKind::DisplayHelp, "{args:?}");
        assert_eq!(err.exit_code(), 2, "{args:?}");
    }
}

/// What a new user typed, and what each must answer: exit 2, saying what is accepted.
#[test]
fn mistyped_numbers_say_what_is_accepted() {
    for (args, says) in [
        (
            &["count", "--secs", "-1"][..],
            "\"-1\" is not a whole number of seconds; --secs takes 0 or more (0: until Ctrl-C)",
        ),
        (
            &["count", "--secs", "1.5"],
            "\"1.5\" is not a whole number of seconds; --secs takes 0 or more",
        ),
        (
            &["count", "--by", "comm", "--top", "-1"],
            "\"-1\" is not a whole number; --top takes 0 or more (0: all)",
        ),
        (&["callbacks", "--top", "-1"], "--top takes 0 or more"),
        (
            &["gp", "--top", "-1"],
            "\"-1\" is not a whole number; --top takes 0 or more (0: none)",
        ),
        (&["gp", "--top", "ten"], "--top takes 0 or more (0: none)"),
        (
            &["srlat", "--pid", "-5"],
            "\"-5\" is not a process id; --pid takes the id of a running process",
        ),
        (
            &["srlat", "--linear", "-10,100,10"],
            "MIN \"-10\" in \"-10,100,10\" is not a whole number; MIN, MAX and STEP are 0 or more",
        ),
        (
            &["srlat", "--buckets", "-3"],
            "STEP \"-3\" is not a whole number; --buckets takes 1 or more",
        ),
        (&["count", "--interval", "-2"], "--interval takes 1 or more"),
        (
            &["report", "--interval-index", "0", "a.json"],
            "--interval-index takes 1 or more",
        ),
        (
            &["serve", "--listen", "localhost"],
            "--listen takes ADDR:PORT, a numeric IP address and port",
        ),
    ] {
        let err = parse(args).unwrap_err();
        assert_eq!(err.exit_code(), 2, "{args:?}");
        let text = err.to_string();
        assert!(text.contains(says), "{args:?}: {text}");
        assert!(!text.contains("unexpected argument"), "{args:?}: {text}");
        assert!(!text.contains("invalid digit"), "{args:?}: {text}");
    }
    // A name that resolves is an address.
    let Command::Serve(args) = parse(&["serve", "--listen", "localhost:9750"])
        .unwrap()
        .command
    else {
        panic!("not serve");
    };
    assert_eq!(args.listen.port(), 9750);
    assert!(args.listen.ip().is_loopback(), "{}", args.listen);
}

#[test]
fn rules_across_options_are_usage_errors() {
    let nine: Vec<&str> = [
        "synchronize_rcu",
        "synchronize_rcu_expedited",
        "synchronize_srcu",
        "synchronize_srcu_expedited",
        "synchronize_rcu_tasks",
        "synchronize_rcu_tasks_rude",
        "rcu_barrier",
        "rcu_barrier_tasks",
        "srcu_barrier",
    ]
    .iter()
    .flat_map(|f| ["--func", f])
    .collect();
    let cli = parse(&[&["srlat"][..], &nine].concat()).unwrap();
    let err = check(&cli).unwrap_err();
    assert_eq!(err.exit_code(), 2);
    assert!(
        err.to_string()
            .contains("at most 8 functions can be timed in one run (9 given)"),
        "{err}"
    );
    assert!(check(&parse(&[&["srlat"][..], &nine[..16]].concat()).unwrap()).is_ok());
    for (args, says) in [
        (
            &["-f", "json", "serve"][..],
            "serve answers in the OpenMetrics text format only",
        ),
        (
            &["serve", "--save", "x.json"],
            "--save is for the commands that print a run",
        ),
        (
            &["gp", "--flavor", "trace", "--attach", "fentry"],
            "gp's flavours other than normal hook by kprobe only",
        ),
    ] {
        let err = check(&parse(args).unwrap()).unwrap_err();
        assert_eq!(err.exit_code(), 2, "{args:?}");
        assert!(err.to_string().contains(says), "{args:?}: {err}");
    }
}

#[test]
fn each_command_help_says_its_own_defaults() {
    let help = |command: &str| {
        let mut cli = Cli::command();
        cli.find_subcommand_mut(command)
            .unwrap()
            .render_long_help()
            .to_string()
    };
    let gplat = help("gplat");
    assert!(
        gplat.contains("Unit of the histogram [default: ms]"),
        "{gplat}"
    );
    assert!(!gplat.contains("srlat --expedited"), "{gplat}");
    assert!(help("srlat").contains("us for srlat --expedited"));
    assert!(
        help("serve").contains("rcutrace_probe_info{function,side,program,method}"),
        "{}",
        help("serve")
    );
}

#[test]
fn by_srcu_is_for_calls_on_an_srcu_domain() {
    for ok in [
        &["srlat", "--func", "synchronize_srcu", "--by", "srcu"][..],
        &[
            "srlat",
            "--func",
            "synchronize_srcu_expedited",
            "--func",
            "srcu_barrier",
            "--by",
            "srcu",
        ],
        &["count", "--by", "srcu"],
        &["count", "--all", "--by", "srcu", "--top", "5"],
    ] {
        assert!(check(&parse(ok).unwrap()).is_ok(), "{ok:?}");
    }
    for (bad, says) in [
        (
            &["srlat", "--by", "srcu"][..],
            "synchronize_rcu waits on none: time SRCU's waits with --func (",
        ),
        (
            &["srlat", "--expedited", "--by", "srcu"],
            "synchronize_rcu_expedited waits on none",
        ),
        (
            &[
                "srlat",
                "--func",
                "synchronize_srcu",
                "--func",
                "rcu_barrier",
                "--by",
                "srcu",
            ],
            "rcu_barrier waits on none",
        ),
        (
            &["gplat", "--by", "srcu"],
            "gplat times normal RCU's grace periods",
        ),
    ] {
        let err = check(&parse(bad).unwrap()).unwrap_err();
        assert_eq!(err.exit_code(), 2, "{bad:?}");
        assert!(err.to_string().contains(says), "{bad:?}: {err}");
        assert!(
            err.to_string()
                .contains("srcu_barrier, synchronize_srcu, synchronize_srcu_expedited")
                || bad[0] == "gplat",
            "{err}"
        );
    }
}

#[test]
fn gp_follows_each_flavour_by_name() {
    for (name, flavor) in [
        ("normal", Flavor::Normal),
        ("srcu", Flavor::Srcu),
        ("tasks", Flavor::Tasks),
        ("rude", Flavor::Rude),
        ("trace", Flavor::Trace),
    ] {
        let Command::Gp(args) = parse(&["gp", "--flavor", name]).unwrap().command else {
            panic!("not gp");
        };
        assert_eq!(args.flavor, flavor);
    }
    let err = parse(&["gp", "--flavor", "tasks-trace"]).unwrap_err();
    assert_eq!(err.exit_code(), 2);
    assert!(err.to_string().contains("rude, trace"), "{err}");
}

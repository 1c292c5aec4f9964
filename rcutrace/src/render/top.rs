//! `rcutrace top`'s screen: one refresh (`model::top::TopFrame`) drawn with ratatui.

use ratatui::{
    Frame,
    layout::{Constraint, Layout},
    style::{Modifier, Style},
    text::Line,
    widgets::{Cell, Paragraph, Row, Table},
};

use std::collections::BTreeMap;

use crate::model::{
    top::{LatencyFigures, Readers, Sort, TopFrame, TopRow},
    tree::cpu_list,
};

/// What the keys changed: the screen shown, and the tables' order.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct View {
    pub paused: bool,
    pub sort: Sort,
    /// Rows per table.
    pub rows: usize,
}

/// Draws `data` (the last refresh; `None` before the first) on the whole screen.
pub fn draw(frame: &mut Frame, data: Option<&TopFrame>, view: &View) {
    let [header, summary, callbacks, waiters, keys] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Length(4),
        Constraint::Fill(1),
        Constraint::Fill(1),
        Constraint::Length(1),
    ])
    .areas(frame.area());
    frame.render_widget(Paragraph::new(title(data, view)), header);
    frame.render_widget(
        Paragraph::new(
            "q quit   p pause   s sort (p99, max, calls/s)   rates are per second over the last interval",
        ),
        keys,
    );
    let Some(data) = data else {
        frame.render_widget(Paragraph::new("waiting for the first interval..."), summary);
        return;
    };
    let width = usize::from(frame.area().width);
    frame.render_widget(Paragraph::new(summary_lines(data, width)), summary);
    let per_second = |n: u64| rate(n, data.interval.as_secs_f64());
    let bold = Style::default().add_modifier(Modifier::BOLD);

    let callback_rows: Vec<Row> = view
        .sort
        .sorted(&data.callbacks)
        .iter()
        .take(view.rows)
        .map(|r| {
            let mut cells = vec![Cell::from(r.name.clone())];
            cells.extend(numbers(r, per_second(r.calls)));
            Row::new(cells)
        })
        .collect();
    let table = Table::new(
        callback_rows,
        [
            Constraint::Fill(1),
            Constraint::Length(10),
            Constraint::Length(10),
            Constraint::Length(10),
            Constraint::Length(10),
            Constraint::Length(10),
        ],
    )
    .header(
        Row::new([
            "CALLBACK (queue to invoke)",
            "INVOKED/s",
            "TOTAL",
            "P50 ms",
            "P99 ms",
            "MAX ms*",
        ])
        .style(bold),
    );
    frame.render_widget(table, callbacks);

    let waiter_rows: Vec<Row> = view
        .sort
        .sorted(&data.waiters)
        .iter()
        .take(view.rows)
        .map(|r| {
            let mut cells = vec![
                Cell::from(r.name.clone()),
                Cell::from(r.comm.clone().unwrap_or_default()),
            ];
            cells.extend(numbers(r, per_second(r.calls)));
            Row::new(cells)
        })
        .collect();
    let table = Table::new(
        waiter_rows,
        [
            Constraint::Length(26),
            Constraint::Fill(1),
            Constraint::Length(10),
            Constraint::Length(10),
            Constraint::Length(10),
            Constraint::Length(10),
            Constraint::Length(10),
        ],
    )
    .header(
        Row::new([
            "WAITER", "COMM", "CALLS/s", "TOTAL", "P50 ms", "P99 ms", "MAX ms",
        ])
        .style(bold),
    );
    frame.render_widget(table, waiters);
}

fn title(data: Option<&TopFrame>, view: &View) -> Line<'static> {
    let traced = data.map_or(0.0, |d| d.since_start.as_secs_f64());
    let interval = data.map_or(0.0, |d| d.interval.as_secs_f64());
    let mut text = format!(
        "rcutrace top: {traced:.0} s traced, last interval {interval:.2} s, sorted by {}",
        view.sort.name()
    );
    if view.paused {
        text.push_str("   PAUSED (p resumes)");
    }
    Line::from(text)
}

/// The summary's lines, each to fit `width` columns where it can: the backlog does.
fn summary_lines(data: &TopFrame, width: usize) -> Vec<Line<'static>> {
    let seconds = data.interval.as_secs_f64();
    let mut grace = format!("Grace periods  {}/s", rate(data.grace_periods, seconds));
    if let Some(l) = data.grace_period_latency {
        grace.push_str(&format!(
            "   p50 {} ms   p99 {} ms   max {} ms",
            ms(l.p50_ns),
            ms(l.p99_ns),
            ms(l.max_ns)
        ));
    }
    grace.push_str(&match data.grace_period_age {
        Some(Some(age)) => format!("   current one {} ms old", ms(age.as_nanos() as u64)),
        Some(None) => "   none in progress".to_string(),
        None => "   age of the current one unknown (its hooks did not attach)".to_string(),
    });
    let mut callbacks = format!(
        "Callbacks      queued {}/s   invoked {}/s   backlog: ",
        rate(data.callbacks_queued, seconds),
        rate(data.callbacks_invoked, seconds),
    );
    let room = width.saturating_sub(callbacks.len());
    callbacks.push_str(&backlog_text(&data.backlog, room));
    let readers = match &data.readers {
        Readers::Sampled {
            estimate,
            margin,
            attached_fraction,
        } => {
            let sampled = format!(
                "(sampled: the reader probe is attached {:.0}% of the time)",
                attached_fraction * 100.0
            );
            match (estimate, margin) {
                (Some(n), Some(m)) => format!(
                    "Readers        ~{}/s ±{}/s {sampled}",
                    rate(*n, seconds),
                    rate(*m, seconds)
                ),
                (Some(n), None) => format!("Readers        ~{}/s {sampled}", rate(*n, seconds)),
                (None, _) => {
                    format!("Readers        no sampling window in this interval {sampled}")
                }
            }
        }
        Readers::Unavailable => {
            "Readers        not traced (this kernel has no __rcu_read_lock)".into()
        }
    };
    vec![
        Line::from(grace),
        Line::from(callbacks),
        Line::from(readers),
        Line::from(
            "* callbacks' MAX is since tracing began; every other figure is of the last interval",
        ),
    ]
}

/// Each CPU's backlog in `room` columns: the largest first, CPUs of equal backlogs together
/// as a cpulist (`cpu8-15 4 each`), and, where they do not all fit, the rest added up at the
/// end (`... 370 more CPUs: 1290`), so that hundreds of CPUs fit a line and none is left out
/// unsaid. Past the room of even that, the count of CPUs and their total alone.
fn backlog_text(backlog: &[(u32, u64)], room: usize) -> String {
    let mut by_backlog: BTreeMap<u64, Vec<u32>> = BTreeMap::new();
    for &(cpu, n) in backlog.iter().filter(|(_, n)| *n > 0) {
        by_backlog.entry(n).or_default().push(cpu);
    }
    // Largest first: (text, CPUs, callbacks).
    let groups: Vec<(String, usize, u64)> = by_backlog
        .iter()
        .rev()
        .map(|(&n, cpus)| {
            let text = match cpus.as_slice() {
                [cpu] => format!("cpu{cpu} {n}"),
                _ => format!("cpu{} {n} each", cpu_list(cpus)),
            };
            (text, cpus.len(), n * cpus.len() as u64)
        })
        .collect();
    if groups.is_empty() {
        return "none".into();
    }
    const GAP: &str = "  ";
    let all: Vec<&str> = groups.iter().map(|(text, ..)| text.as_str()).collect();
    let all = all.join(GAP);
    if all.len() <= room {
        return all;
    }
    // The most groups that fit beside the line that sums the others: what is not shown yet
    // goes down as each group is.
    let (mut cpus, mut sum) = groups
        .iter()
        .fold((0, 0), |(cpus, sum), (_, c, n)| (cpus + c, sum + n));
    let mut shown = 0;
    let mut width = 0;
    for (text, c, n) in &groups {
        width += text.len() + GAP.len();
        if width + format!("... {} more CPUs: {}", cpus - c, sum - n).len() > room {
            break;
        }
        (cpus, sum) = (cpus - c, sum - n);
        shown += 1;
    }
    if shown == 0 {
        return format!("{cpus} CPUs: {sum}");
    }
    let listed: Vec<&str> = groups[..shown].iter().map(|(t, ..)| t.as_str()).collect();
    format!("{}{GAP}... {cpus} more CPUs: {sum}", listed.join(GAP))
}

fn numbers(row: &TopRow, per_second: String) -> Vec<Cell<'static>> {
    let LatencyFigures {
        p50_ns,
        p99_ns,
        max_ns,
        count,
    } = row.latency;
    let figure = |ns: u64| if count == 0 { "-".to_string() } else { ms(ns) };
    vec![
        Cell::from(per_second),
        Cell::from(row.total.to_string()),
        Cell::from(figure(p50_ns)),
        Cell::from(figure(p99_ns)),
        Cell::from(if max_ns == 0 { "-".into() } else { ms(max_ns) }),
    ]
}

/// Milliseconds with three decimals.
fn ms(ns: u64) -> String {
    format!("{:.3}", ns as f64 / 1e6)
}

/// Per second, one decimal.
fn rate(n: u64, seconds: f64) -> String {
    if seconds <= 0.0 {
        return "0.0".into();
    }
    format!("{:.1}", n as f64 / seconds)
}

#[cfg(test)]
mod tests {
    use super::*;
    use ratatui::{Terminal, backend::TestBackend};
    use std::time::Duration;

    fn screen(data: Option<&TopFrame>, view: &View) -> String {
        let mut terminal = Terminal::new(TestBackend::new(120, 30)).unwrap();
        terminal.draw(|f| draw(f, data, view)).unwrap();
        screen_text(&terminal)
    }

    fn screen_text(terminal: &Terminal<TestBackend>) -> String {
        let buffer = terminal.backend().buffer();
        (0..buffer.area.height)
            .map(|y| {
                (0..buffer.area.width)
                    .map(|x| buffer[(x, y)].symbol())
                    .collect::<String>()
                    .trim_end()
                    .to_string()
            })
            .collect::<Vec<_>>()
            .join("\n")
    }

    fn frame() -> TopFrame {
        let latency = |p50, p99, max| LatencyFigures {
            count: 4,
            p50_ns: p50,
            p99_ns: p99,
            max_ns: max,
        };
        TopFrame {
            interval: Duration::from_secs(2),
            since_start: Duration::from_secs(12),
            grace_periods: 40,
            grace_period_latency: Some(latency(8_000_000, 20_500_000, 31_000_000)),
            grace_period_age: Some(Some(Duration::from_micros(4_100))),
            callbacks_queued: 300,
            callbacks_invoked: 280,
            backlog: vec![(0, 12), (1, 3)],
            callbacks: vec![TopRow {
                name: "rcutrace_test_cb [rcutrace_test]".into(),
                comm: None,
                calls: 100,
                total: 400,
                latency: latency(10_000_000, 30_000_000, 45_000_000),
            }],
            waiters: vec![
                TopRow {
                    name: "synchronize_rcu".into(),
                    comm: Some("rcu-workload".into()),
                    calls: 10,
                    total: 30,
                    latency: latency(12_000_000, 25_000_000, 26_000_000),
                },
                TopRow {
                    name: "rcu_barrier".into(),
                    comm: Some("modprobe".into()),
                    calls: 1,
                    total: 1,
                    latency: latency(40_000_000, 40_000_000, 40_000_000),
                },
            ],
            readers: Readers::Sampled {
                estimate: Some(500_000),
                margin: None,
                attached_fraction: 0.1,
            },
        }
    }

    #[test]
    fn the_screen_shows_every_figure_per_second_of_its_interval() {
        let view = View {
            rows: 10,
            ..View::default()
        };
        let text = screen(Some(&frame()), &view);
        for expected in [
            "rcutrace top: 12 s traced, last interval 2.00 s, sorted by p99",
            "Grace periods  20.0/s   p50 8.000 ms   p99 20.500 ms   max 31.000 ms   current one 4.100 ms old",
            "Callbacks      queued 150.0/s   invoked 140.0/s   backlog: cpu0 12  cpu1 3",
            "Readers        ~250000.0/s (sampled: the reader probe is attached 10% of the time)",
        ] {
            assert!(text.contains(expected), "{expected}\n{text}");
        }
        let line = |start: &str| {
            text.lines()
                .find(|l| l.starts_with(start))
                .unwrap_or_else(|| panic!("{start}\n{text}"))
                .split_whitespace()
                .collect::<Vec<_>>()
                .join(" ")
        };
        assert_eq!(
            line("rcutrace_test_cb"),
            "rcutrace_test_cb [rcutrace_test] 50.0 400 10.000 30.000 45.000"
        );
        assert_eq!(
            line("synchronize_rcu"),
            "synchronize_rcu rcu-workload 5.0 30 12.000 25.000 26.000"
        );
        // Sorted by p99: the barrier's 40 ms first.
        let barrier = text.find("rcu_barrier").unwrap();
        assert!(barrier < text.find("synchronize_rcu ").unwrap(), "{text}");
    }

    #[test]
    fn sorting_and_pausing_show_in_the_title() {
        let view = View {
            paused: true,
            sort: Sort::Calls,
            rows: 10,
        };
        let text = screen(Some(&frame()), &view);
        assert!(
            text.contains("sorted by calls/s   PAUSED (p resumes)"),
            "{text}"
        );
        assert!(
            text.find("synchronize_rcu ").unwrap() < text.find("rcu_barrier").unwrap(),
            "{text}"
        );
        let waiting = screen(None, &view);
        assert!(
            waiting.contains("waiting for the first interval"),
            "{waiting}"
        );
    }

    /// A machine of `cpus` CPUs whose backlogs are 1 to 7 (by CPU number), but `worst`'s.
    fn backlog_model(cpus: u32, worst: &[(u32, u64)]) -> Vec<(u32, u64)> {
        (0..cpus)
            .map(|cpu| {
                let n = worst.iter().find(|(c, _)| *c == cpu).map(|(_, n)| *n);
                (cpu, n.unwrap_or(u64::from(cpu % 7) + 1))
            })
            .collect()
    }

    const WORST_OF_384: [(u32, u64); 11] = [
        (17, 120),
        (3, 98),
        (200, 60),
        (201, 60),
        (202, 60),
        (203, 60),
        (5, 41),
        (1, 40),
        (300, 39),
        (150, 20),
        (151, 20),
    ];

    /// The callbacks line of the screen drawn `width` columns wide.
    fn callbacks_line(backlog: Vec<(u32, u64)>, width: u16) -> String {
        let data = TopFrame { backlog, ..frame() };
        let view = View {
            rows: 10,
            ..View::default()
        };
        let mut terminal = Terminal::new(TestBackend::new(width, 30)).unwrap();
        terminal.draw(|f| draw(f, Some(&data), &view)).unwrap();
        let text = screen_text(&terminal);
        text.lines()
            .find(|l| l.starts_with("Callbacks"))
            .unwrap_or_else(|| panic!("{text}"))
            .to_string()
    }

    #[test]
    fn the_backlog_of_384_cpus_fits_the_line_worst_first_the_rest_summed() {
        let backlog = backlog_model(384, &WORST_OF_384);
        let total: u64 = backlog.iter().map(|(_, n)| n).sum();
        assert_eq!(total, 2100);
        // 120 columns: the two worst, then the other 382 CPUs' 1882 callbacks
        // (120 + 98 + 1882 = 2100).
        let line = callbacks_line(backlog.clone(), 120);
        assert_eq!(
            line,
            "Callbacks      queued 150.0/s   invoked 140.0/s   backlog: cpu17 120  cpu3 98  \
             ... 382 more CPUs: 1882"
        );
        assert!(line.len() <= 120);
        // A wider terminal shows more of them; equal backlogs go together as a cpulist.
        let line = callbacks_line(backlog.clone(), 200);
        assert_eq!(
            line,
            "Callbacks      queued 150.0/s   invoked 140.0/s   backlog: cpu17 120  cpu3 98  \
             cpu200-203 60 each  cpu5 41  cpu1 40  cpu300 39  cpu150-151 20 each  \
             ... 373 more CPUs: 1482"
        );
        assert!(line.len() <= 200);
        // Too narrow for any CPU: how many, and their total.
        assert_eq!(backlog_text(&backlog, 20), "384 CPUs: 2100");
    }

    #[test]
    fn the_backlog_of_64_cpus_fits_the_line_worst_first_the_rest_summed() {
        let worst = [
            (17, 120),
            (3, 98),
            (40, 60),
            (41, 60),
            (42, 60),
            (43, 60),
            (5, 41),
            (1, 40),
            (60, 39),
            (50, 20),
            (51, 20),
        ];
        let backlog = backlog_model(64, &worst);
        // 120 + 98 + 4 × 60 shown, 371 summed: every callback.
        assert_eq!(backlog.iter().map(|(_, n)| n).sum::<u64>(), 829);
        let line = callbacks_line(backlog, 120);
        assert_eq!(
            line,
            "Callbacks      queued 150.0/s   invoked 140.0/s   backlog: cpu17 120  cpu3 98  \
             cpu40-43 60 each  ... 58 more CPUs: 371"
        );
        assert!(line.len() <= 120);
    }

    #[test]
    fn equal_backlogs_read_as_one_range_and_empty_ones_are_left_out() {
        let every_one: Vec<(u32, u64)> = (0..384).map(|cpu| (cpu, 1)).collect();
        assert_eq!(backlog_text(&every_one, 60), "cpu0-383 1 each");
        let odd: Vec<(u32, u64)> = (0..384).map(|cpu| (cpu, u64::from(cpu % 2))).collect();
        assert_eq!(backlog_text(&odd, 60), "192 CPUs: 192");
        assert_eq!(backlog_text(&[], 60), "none");
        assert_eq!(backlog_text(&[(0, 12), (1, 3)], 60), "cpu0 12  cpu1 3");
        assert_eq!(backlog_text(&[(0, 3), (1, 12)], 60), "cpu1 12  cpu0 3");
    }
}

//! The line that says how rcutrace's own detaching went, on stderr as a run ends.

use crate::model::detach::OwnDetach;

/// `rcutrace: detached 21 hooks in 412 ms (14 kprobes 120 ms, 7 trampolines 292 ms); grace
/// periods ended meanwhile: 5 normal, 2 tasks-RCU, 0 tasks-rude-RCU`.
pub fn detach_line(detach: &OwnDetach) -> String {
    let ms = |d: std::time::Duration| d.as_secs_f64() * 1e3;
    let kinds: Vec<String> = detach
        .times
        .iter()
        .map(|t| {
            format!(
                "{} {} {:.0} ms",
                t.hooks,
                t.kind.counted(t.hooks),
                ms(t.took)
            )
        })
        .collect();
    let grace_periods = match &detach.grace_periods {
        Ok(ended) if ended.is_empty() => String::new(),
        Ok(ended) => {
            let ended: Vec<String> = ended
                .iter()
                .map(|(flavour, n)| format!("{n} {flavour}"))
                .collect();
            format!("; grace periods ended meanwhile: {}", ended.join(", "))
        }
        Err(why) => format!("; the grace periods meanwhile are unknown: {why}"),
    };
    format!(
        "rcutrace: detached {} {} in {:.0} ms ({}){grace_periods}\n",
        detach.hooks(),
        if detach.hooks() == 1 { "hook" } else { "hooks" },
        ms(detach.took()),
        kinds.join(", ")
    )
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::model::detach::{DetachTime, HookKind};

    #[test]
    fn says_each_kind_of_hook_and_the_grace_periods_meanwhile() {
        let times = vec![
            DetachTime {
                kind: HookKind::Kprobe,
                hooks: 14,
                took: Duration::from_micros(120_400),
            },
            DetachTime {
                kind: HookKind::Trampoline,
                hooks: 7,
                took: Duration::from_micros(291_700),
            },
        ];
        let detach = OwnDetach {
            times: times.clone(),
            grace_periods: Ok(vec![("normal", 5), ("tasks-RCU", 2), ("tasks-rude-RCU", 0)]),
        };
        assert_eq!(
            detach_line(&detach),
            "rcutrace: detached 21 hooks in 412 ms (14 kprobes 120 ms, 7 trampolines 292 ms); \
             grace periods ended meanwhile: 5 normal, 2 tasks-RCU, 0 tasks-rude-RCU\n"
        );
        let unread = OwnDetach {
            times,
            grace_periods: Err("opening /proc/kcore: Operation not permitted".into()),
        };
        assert!(detach_line(&unread).ends_with(
            "292 ms); the grace periods meanwhile are unknown: opening /proc/kcore: Operation \
             not permitted\n"
        ));
    }
}

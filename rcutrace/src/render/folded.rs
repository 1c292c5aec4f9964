//! Folded stacks (`-f folded`), the format of Brendan Gregg's flamegraph.pl, inferno, speedscope
//! and Pyroscope's ingest: one line per stack, frames root first separated by `;`, a space and
//! its weight.

use std::fmt::Write as _;

use crate::model::stacks::WeightedStacks;

pub fn lines(stacks: &WeightedStacks) -> String {
    let mut out = String::new();
    for (frames, weight) in &stacks.stacks {
        let _ = writeln!(out, "{} {weight}", frames.join(";"));
    }
    out
}

#[cfg(test)]
mod tests {
    use std::io::BufReader;

    use inferno::collapse::{Collapse as _, recursive};

    use super::*;
    use crate::model::stacks::Weight;

    fn stacks() -> WeightedStacks {
        let frames = |f: &[&str]| f.iter().map(|f| f.to_string()).collect::<Vec<_>>();
        WeightedStacks {
            weight: Weight::Calls,
            stacks: vec![
                (
                    frames(&[
                        "do_syscall_64_[k]",
                        "__do_sys_membarrier_[k]",
                        "synchronize_rcu_[k]",
                    ]),
                    20,
                ),
                (frames(&["kthread_[k]", "rcu_gp_kthread_[k]"]), 3),
                (frames(&["[stack lost]", "call_rcu_[k]"]), 2),
                (frames(&["[other: 3 keys]"]), 7),
                // The same stack again (from another map): folded input adds them up.
                (frames(&["kthread_[k]", "rcu_gp_kthread_[k]"]), 4),
            ],
        }
    }

    #[test]
    fn one_line_per_stack_root_first() {
        assert_eq!(
            lines(&stacks()),
            "do_syscall_64_[k];__do_sys_membarrier_[k];synchronize_rcu_[k] 20\n\
             kthread_[k];rcu_gp_kthread_[k] 3\n\
             [stack lost];call_rcu_[k] 2\n\
             [other: 3 keys] 7\n\
             kthread_[k];rcu_gp_kthread_[k] 4\n"
        );
    }

    /// inferno's own reader of folded stacks (its `collapse-recursive` stage, which takes
    /// folded lines in and writes them merged) finds every stack, with the same totals.
    #[test]
    fn inferno_reads_the_folded_lines_back_with_the_same_totals() {
        let folded = lines(&stacks());
        let mut merged = Vec::new();
        let mut folder = recursive::Folder::from(recursive::Options::default());
        folder
            .collapse(BufReader::new(folded.as_bytes()), &mut merged)
            .unwrap();
        let merged = String::from_utf8(merged).unwrap();
        let parsed: Vec<(&str, u64)> = merged
            .lines()
            .map(|l| {
                let (stack, n) = l.rsplit_once(' ').unwrap();
                (stack, n.parse().unwrap())
            })
            .collect();
        assert_eq!(
            Some(parsed.iter().map(|(_, n)| n).sum::<u64>()),
            stacks().exact_total()
        );
        assert_eq!(parsed.len(), 4, "{merged}");
        assert!(
            parsed.contains(&("kthread_[k];rcu_gp_kthread_[k]", 7)),
            "{merged}"
        );
        assert!(
            parsed.contains(&(
                "do_syscall_64_[k];__do_sys_membarrier_[k];synchronize_rcu_[k]",
                20
            )),
            "{merged}"
        );
    }
}

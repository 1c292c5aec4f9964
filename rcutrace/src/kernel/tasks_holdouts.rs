//! Where classic tasks RCU lists the tasks a grace period waits for, from the kernel's BTF:
//! each holdout is on its `task_struct.rcu_tasks_holdout_list` (tasks-trace RCU's, before 7.0,
//! on `trc_holdout_list`), and `gp --flavor tasks` reads its pid, comm and the CPU it last ran
//! on from there.

use std::collections::HashMap;

use anyhow::{Context as _, Result};

use super::btf::{self, Field};

const HOLDOUT_LIST: Field = ("task_struct", "rcu_tasks_holdout_list");
/// Set while classic tasks RCU waits for the task (a byte).
const HOLDOUT_FLAG: Field = ("task_struct", "rcu_tasks_holdout");
/// Tasks-trace RCU's, before 7.0 (since, it is SRCU).
const TRACE_HOLDOUT_LIST: Field = ("task_struct", "trc_holdout_list");
const PID: Field = ("task_struct", "pid");
const COMM: Field = ("task_struct", "comm");
/// The CPU a task last ran on: in its `thread_info` where that is in the task (x86), else a
/// member of the task.
const THREAD_INFO: Field = ("task_struct", "thread_info");
const THREAD_INFO_CPU: Field = ("thread_info", "cpu");
const CPU: Field = ("task_struct", "cpu");

/// Every field read here, for a pass over the BTF that answers them all.
pub const FIELDS: [Field; 8] = [
    HOLDOUT_LIST,
    HOLDOUT_FLAG,
    TRACE_HOLDOUT_LIST,
    PID,
    COMM,
    THREAD_INFO,
    THREAD_INFO_CPU,
    CPU,
];

/// Byte offsets in `task_struct`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HoldoutLayout {
    pub holdout_list: u32,
    /// Tasks-trace RCU's list, where it has one.
    pub trace_holdout_list: Option<u32>,
    /// `rcu_tasks_holdout`, by which a tick tells a holdout task from the others.
    pub holdout_flag: Option<u32>,
    pub pid: u32,
    pub comm: u32,
    pub cpu: u32,
}

/// The layout, or `None` where this kernel's BTF lacks one of the fields (a kernel without
/// classic tasks RCU has no holdout list).
pub fn layout() -> Result<Option<HoldoutLayout>> {
    let offsets = btf::field_offsets(&FIELDS)
        .context("reading the tasks-RCU holdouts' fields from the kernel BTF")?;
    Ok(of(&offsets))
}

fn of(offsets: &HashMap<Field, u32>) -> Option<HoldoutLayout> {
    let get = |field: Field| offsets.get(&field).copied();
    Some(HoldoutLayout {
        holdout_list: get(HOLDOUT_LIST)?,
        trace_holdout_list: get(TRACE_HOLDOUT_LIST),
        holdout_flag: get(HOLDOUT_FLAG),
        pid: get(PID)?,
        comm: get(COMM)?,
        cpu: get(THREAD_INFO)
            .zip(get(THREAD_INFO_CPU))
            .map(|(info, cpu)| info + cpu)
            .or_else(|| get(CPU))?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cpu_is_read_where_the_task_keeps_it() {
        // Debian's 7.3 (x86: the CPU in the thread_info at the task's start).
        let mut offsets = HashMap::from([
            (HOLDOUT_LIST, 2544),
            (HOLDOUT_FLAG, 2536),
            (PID, 2872),
            (COMM, 3408),
            (THREAD_INFO, 0),
            (THREAD_INFO_CPU, 24),
        ]);
        let x86 = HoldoutLayout {
            holdout_list: 2544,
            trace_holdout_list: None,
            holdout_flag: Some(2536),
            pid: 2872,
            comm: 3408,
            cpu: 24,
        };
        assert_eq!(of(&offsets), Some(x86));
        // Where the thread_info is elsewhere, the task's own member.
        offsets.remove(&THREAD_INFO);
        assert_eq!(of(&offsets), None);
        offsets.insert(CPU, 60);
        assert_eq!(of(&offsets), Some(HoldoutLayout { cpu: 60, ..x86 }));
        // Before 7.0, tasks-trace RCU's list too (Debian's 6.12).
        offsets.insert(TRACE_HOLDOUT_LIST, 2152);
        assert_eq!(
            of(&offsets).and_then(|layout| layout.trace_holdout_list),
            Some(2152)
        );
        offsets.remove(&HOLDOUT_LIST);
        assert_eq!(of(&offsets), None);
    }
}

//! The BPF programs loaded in the kernel (anyone's): their ids, and where each one's jited
//! functions lie, which kallsyms lists without their lengths.
//!
//! Ids come from BPF_PROG_GET_NEXT_ID, which opens nothing: cheap enough to ask often. The
//! extents need a descriptor of each program (BPF_PROG_GET_FD_BY_ID, root only) and
//! BPF_OBJ_GET_INFO_BY_FD, so they are asked only when the set of programs changed.

use std::{
    collections::HashMap,
    os::fd::{AsFd as _, AsRawFd as _, BorrowedFd, FromRawFd as _, OwnedFd},
};

use aya_obj::generated::{bpf_attr, bpf_cmd, bpf_prog_info};

/// The ids above `id` of the programs loaded now, ascending (0: all of them); empty where
/// the kernel will not say. One call if there are none.
pub fn ids_after(id: u32) -> Vec<u32> {
    let mut ids = Vec::new();
    let mut id = id;
    loop {
        // SAFETY: all zeroes is a valid bpf_attr.
        let mut attr: bpf_attr = unsafe { std::mem::zeroed() };
        attr.__bindgen_anon_6.__bindgen_anon_1.start_id = id;
        if bpf(bpf_cmd::BPF_PROG_GET_NEXT_ID, &mut attr) != 0 {
            return ids;
        }
        // SAFETY: the kernel filled in `next_id` of the same union member.
        id = unsafe { attr.__bindgen_anon_6.next_id };
        ids.push(id);
    }
}

/// Start address to length of every jited function of the programs `ids` that the kernel
/// describes (a program unloaded meanwhile is skipped).
pub fn jited_functions(ids: &[u32]) -> HashMap<u64, u64> {
    let mut functions = HashMap::new();
    for &id in ids {
        let Some(program) = open(id) else { continue };
        let Some(counts) = program_info(program.as_fd(), |_| {}) else {
            continue;
        };
        let n = counts.nr_jited_ksyms.min(counts.nr_jited_func_lens) as usize;
        let mut starts = vec![0u64; n];
        let mut lens = vec![0u32; n];
        let ask_functions = |info: &mut bpf_prog_info| {
            info.nr_jited_ksyms = starts.len() as u32;
            info.jited_ksyms = starts.as_mut_ptr() as u64;
            info.nr_jited_func_lens = lens.len() as u32;
            info.jited_func_lens = lens.as_mut_ptr() as u64;
        };
        if n == 0 || program_info(program.as_fd(), ask_functions).is_none() {
            continue;
        }
        for (start, len) in starts.into_iter().zip(lens) {
            if start != 0 {
                functions.insert(start, u64::from(len));
            }
        }
    }
    functions
}

/// The kernel BTF ids of the functions that loaded tracing programs (fentry, fexit, ...)
/// were loaded for: each such function has, or may soon have, a BPF trampoline. Programs
/// that cannot be opened or described are passed over.
pub fn tracing_targets() -> std::collections::HashSet<u32> {
    ids_after(0)
        .into_iter()
        .filter_map(|id| program_info(open(id)?.as_fd(), |_| {}))
        .filter(|info| {
            info.type_ == aya_obj::generated::bpf_prog_type::BPF_PROG_TYPE_TRACING as u32
        })
        .map(|info| info.attach_btf_id)
        .filter(|&id| id != 0)
        .collect()
}

/// The ids of the maps `program` uses; `None` where the kernel will not say.
pub fn map_ids(program: BorrowedFd<'_>) -> Option<Vec<u32>> {
    let ask = |ids: &mut [u32]| {
        let info = program_info(program, |info| {
            info.nr_map_ids = ids.len() as u32;
            info.map_ids = ids.as_mut_ptr() as u64;
        })?;
        Some(info.nr_map_ids)
    };
    let count = ask(&mut [])? as usize;
    let mut ids = vec![0u32; count];
    let written = ask(&mut ids)? as usize;
    ids.truncate(written.min(count));
    Some(ids)
}

fn open(id: u32) -> Option<OwnedFd> {
    // SAFETY: all zeroes is a valid bpf_attr.
    let mut attr: bpf_attr = unsafe { std::mem::zeroed() };
    attr.__bindgen_anon_6.__bindgen_anon_1.prog_id = id;
    let fd = bpf(bpf_cmd::BPF_PROG_GET_FD_BY_ID, &mut attr);
    // SAFETY: a non-negative result is a new descriptor that nothing else owns.
    (fd >= 0).then(|| unsafe { OwnedFd::from_raw_fd(fd as i32) })
}

/// The kernel's information about `program`, or `None` if it would not say. `arrays` may
/// point some of its arrays at buffers (each with its length), which the kernel fills as far
/// as they go; they must outlive the call.
pub(crate) fn program_info(
    program: BorrowedFd<'_>,
    arrays: impl FnOnce(&mut bpf_prog_info),
) -> Option<bpf_prog_info> {
    // SAFETY: all zeroes is a valid bpf_prog_info and bpf_attr.
    let mut info: bpf_prog_info = unsafe { std::mem::zeroed() };
    arrays(&mut info);
    let mut attr: bpf_attr = unsafe { std::mem::zeroed() };
    attr.info.bpf_fd = program.as_raw_fd() as u32;
    attr.info.info_len = std::mem::size_of::<bpf_prog_info>() as u32;
    attr.info.info = &mut info as *mut bpf_prog_info as u64;
    // The kernel writes at most `info_len` bytes to `info` and, a kernel with a smaller
    // struct, leaves the rest zero.
    (bpf(bpf_cmd::BPF_OBJ_GET_INFO_BY_FD, &mut attr) == 0).then_some(info)
}

/// One bpf() call with a whole `bpf_attr`: its result (negative on failure, errno set).
pub(crate) fn bpf(cmd: bpf_cmd, attr: &mut bpf_attr) -> libc::c_long {
    // SAFETY: the kernel reads and writes at most `size_of::<bpf_attr>()` bytes of `attr`,
    // and writes through the pointers set in it only to buffers of the lengths set beside
    // them, all of which outlive the call.
    unsafe {
        libc::syscall(
            libc::SYS_bpf,
            cmd as libc::c_long,
            attr as *mut bpf_attr,
            std::mem::size_of::<bpf_attr>() as u32,
        )
    }
}

/// One bpf() call that creates an object, whose descriptor it returns.
pub(crate) fn bpf_object(command: bpf_cmd, attr: &mut bpf_attr) -> std::io::Result<OwnedFd> {
    let fd = bpf(command, attr);
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: the kernel gave us this new descriptor, which nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as i32) })
}

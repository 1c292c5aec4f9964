//! kprobe-multi links: one program on many kernel functions, patched in by one ftrace update.
//! A kprobe or a trampoline costs an update of its own, and each update walks the record of
//! every function ftrace can patch (tens of thousands), which is most of a start-up's time.
//!
//! The kernel wants such a program loaded with the expected attach type
//! `BPF_TRACE_KPROBE_MULTI`, which aya 0.14 never sets for a kprobe program. So this module
//! loads it itself: the same program from the same object, its map references relocated
//! against the maps aya created (aya-obj does the relocating), and it owns the program and
//! the link. The program tells the functions apart by the cookie each is attached with.

use std::{
    ffi::{CStr, CString, c_char},
    os::fd::{AsFd as _, AsRawFd as _, BorrowedFd, OwnedFd, RawFd},
};

use anyhow::{Context as _, Result, anyhow};
use aya_obj::generated::{
    bpf_attach_type::BPF_TRACE_KPROBE_MULTI, bpf_attr, bpf_cmd, bpf_insn, bpf_link_info,
    bpf_prog_type::BPF_PROG_TYPE_KPROBE,
};

use crate::{
    kernel::{
        bpf_programs::{bpf, bpf_object},
        misses,
    },
    trace::object,
};

/// A program attached to its functions by one link; dropping it detaches and unloads it.
pub struct MultiLink {
    // Fields drop in order: the link goes before its program.
    link: OwnedFd,
    program: OwnedFd,
    /// The program's kernel id, by which its skipped hits are counted (`None` where the
    /// kernel would not say).
    pub program_id: Option<u32>,
}

impl MultiLink {
    /// Loads `program` from `object` (its maps found by name in `map_fd`) and attaches it to
    /// each of `targets`, a function with the cookie its runs see.
    pub fn attach(
        object: &[u8],
        program: &str,
        map_fd: impl Fn(&str) -> Option<RawFd>,
        targets: &[(&str, u64)],
    ) -> Result<MultiLink> {
        let (instructions, license) =
            relocated(object, program, map_fd).context("relocating the program")?;
        let program_fd = load(program, &instructions, &license).context("loading the program")?;
        let link = link(program_fd.as_fd(), targets).context("attaching")?;
        Ok(MultiLink {
            link,
            program_id: misses::program_id(program_fd.as_fd()),
            program: program_fd,
        })
    }

    pub fn program(&self) -> BorrowedFd<'_> {
        self.program.as_fd()
    }

    /// Hits the kernel's function-probe layer skipped before the program (a probed function
    /// entered again from its own probe on the same CPU); `None` where the kernel does not
    /// say (before 6.7).
    pub fn missed(&self) -> Option<u64> {
        // SAFETY: plain C structs, for which all zeroes are valid.
        let mut info: bpf_link_info = unsafe { std::mem::zeroed() };
        let mut attr: bpf_attr = unsafe { std::mem::zeroed() };
        attr.info.bpf_fd = self.link.as_raw_fd() as u32;
        attr.info.info_len = std::mem::size_of::<bpf_link_info>() as u32;
        attr.info.info = &mut info as *mut bpf_link_info as u64;
        // The kernel writes at most `info_len` bytes to `info`, which outlives the call; it
        // writes no address list, since none is given.
        if bpf(bpf_cmd::BPF_OBJ_GET_INFO_BY_FD, &mut attr) != 0 {
            return None;
        }
        // SAFETY: the kernel filled the kprobe-multi member for this link.
        let missed = unsafe { info.__bindgen_anon_1.kprobe_multi.missed };
        Some(missed)
    }
}

/// `program`'s instructions from `object`, every call linked in and every map reference
/// pointing at the map of that name, and its licence.
fn relocated(
    object: &[u8],
    program: &str,
    map_fd: impl Fn(&str) -> Option<RawFd>,
) -> Result<(Vec<bpf_insn>, CString)> {
    let narrowed = object::narrowed(object, |name| name == program)?;
    let mut parsed = aya_obj::Object::parse(&narrowed.object)?;
    let maps = std::mem::take(&mut parsed.maps);
    let text_sections = parsed
        .functions
        .keys()
        .map(|(section, _)| *section)
        .collect();
    let with_fds: Vec<(&str, RawFd, &aya_obj::Map)> = maps
        .iter()
        .filter_map(|(name, map)| Some((name.as_str(), map_fd(name)?, map)))
        .collect();
    parsed.relocate_maps(with_fds.into_iter(), &text_sections)?;
    parsed.relocate_calls(&text_sections)?;
    parsed.sanitize_functions(aya::features());
    let found = parsed
        .programs
        .get(program)
        .ok_or_else(|| anyhow!("no program {program} in the eBPF object"))?;
    let function = parsed
        .functions
        .get(&found.function_key())
        .ok_or_else(|| anyhow!("program {program} has no code in the eBPF object"))?;
    Ok((function.instructions.clone(), found.license.clone()))
}

/// The verifier's log kept when a load fails: its last lines say why.
const VERIFIER_LOG_BYTES: usize = 1 << 20;

fn load(name: &str, instructions: &[bpf_insn], license: &CStr) -> Result<OwnedFd> {
    let attempt = |log: Option<&mut Vec<u8>>| {
        // SAFETY: a plain C union, for which all zeroes are valid.
        let mut attr: bpf_attr = unsafe { std::mem::zeroed() };
        let load = unsafe { &mut attr.__bindgen_anon_3 };
        load.prog_type = BPF_PROG_TYPE_KPROBE as u32;
        load.expected_attach_type = BPF_TRACE_KPROBE_MULTI as u32;
        load.insns = instructions.as_ptr() as u64;
        load.insn_cnt = instructions.len() as u32;
        load.license = license.as_ptr() as u64;
        // The kernel keeps 15 bytes of a name and its closing NUL.
        for (to, from) in load.prog_name.iter_mut().zip(name.bytes().take(15)) {
            *to = from as c_char;
        }
        if let Some(log) = log {
            load.log_level = 1;
            load.log_buf = log.as_mut_ptr() as u64;
            load.log_size = log.len() as u32;
        }
        // SAFETY: the instructions, licence and log outlive the call.
        bpf_object(bpf_cmd::BPF_PROG_LOAD, &mut attr)
    };
    match attempt(None) {
        Ok(fd) => Ok(fd),
        Err(error) => {
            let mut log = vec![0u8; VERIFIER_LOG_BYTES];
            let _ = attempt(Some(&mut log));
            let end = log.iter().position(|&b| b == 0).unwrap_or(log.len());
            let text = String::from_utf8_lossy(&log[..end]);
            let tail: Vec<&str> = text.lines().rev().take(10).collect();
            let tail: Vec<&str> = tail.into_iter().rev().collect();
            Err(anyhow!("{error}; the verifier said:\n{}", tail.join("\n")))
        }
    }
}

fn link(program: BorrowedFd<'_>, targets: &[(&str, u64)]) -> Result<OwnedFd> {
    let names: Vec<CString> = targets
        .iter()
        .map(|(function, _)| CString::new(*function))
        .collect::<std::result::Result<_, _>>()?;
    let symbols: Vec<*const c_char> = names.iter().map(|name| name.as_ptr()).collect();
    let cookies: Vec<u64> = targets.iter().map(|(_, cookie)| *cookie).collect();
    // SAFETY: a plain C union, for which all zeroes are valid.
    let mut attr: bpf_attr = unsafe { std::mem::zeroed() };
    let create = unsafe { &mut attr.link_create };
    create.__bindgen_anon_1.prog_fd = program.as_raw_fd() as u32;
    create.attach_type = BPF_TRACE_KPROBE_MULTI as u32;
    let multi = unsafe { &mut create.__bindgen_anon_3.kprobe_multi };
    multi.cnt = targets.len() as u32;
    multi.syms = symbols.as_ptr() as u64;
    multi.cookies = cookies.as_ptr() as u64;
    // SAFETY: the names, their pointers and the cookies outlive the call.
    Ok(bpf_object(bpf_cmd::BPF_LINK_CREATE, &mut attr)?)
}

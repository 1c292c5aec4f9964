//! Programs rcutrace loads and links itself, where aya 0.14 falls short:
//!
//! - kprobe-multi links: one program on many kernel functions, patched in by one ftrace
//!   update. A kprobe or a trampoline costs an update of its own, and each update walks the
//!   record of every function ftrace can patch (tens of thousands), which is most of a
//!   start-up's time. The kernel wants such a program loaded with the expected attach type
//!   `BPF_TRACE_KPROBE_MULTI`, which aya never sets for a kprobe program. The program tells
//!   its functions apart by the cookie each is attached with.
//! - trampolines (fentry, fexit). aya finds the function by its position in a `Btf` it is
//!   given, which must then hold a placeholder for every type id below the function's: a
//!   hundred thousand and more on 7.x, at 72 bytes each, which was most of a run's peak
//!   memory. The BTF pass already has the function's id, which is all the kernel wants.
//!
//! Either is the same program from the same object, its map references relocated against
//! the maps aya created (aya-obj does the relocating); this module owns the program and its
//! link.

use std::{
    collections::HashMap,
    ffi::{CStr, CString, c_char},
    os::fd::{AsFd as _, AsRawFd as _, BorrowedFd, OwnedFd, RawFd},
};

use anyhow::{Context as _, Result, anyhow};
use aya_obj::generated::{
    bpf_attach_type::{BPF_TRACE_FENTRY, BPF_TRACE_FEXIT, BPF_TRACE_KPROBE_MULTI},
    bpf_attr, bpf_cmd, bpf_insn, bpf_link_info,
    bpf_prog_type::{BPF_PROG_TYPE_KPROBE, BPF_PROG_TYPE_TRACING},
};

use crate::{
    kernel::{
        bpf_programs::{bpf, bpf_object},
        misses,
    },
    trace::probes::Side,
};

/// A program attached by a link of its own; dropping it detaches and unloads it.
pub struct OwnLink {
    // Fields drop in order: the link goes before its program.
    link: OwnedFd,
    program: OwnedFd,
    /// The program's kernel id, by which its skipped hits are counted (`None` where the
    /// kernel would not say).
    pub program_id: Option<u32>,
}

/// What one load asks of the kernel beside the instructions.
struct LoadAs {
    prog_type: u32,
    expected_attach_type: u32,
    /// The kernel BTF id of a trampoline's function; 0 for others.
    attach_btf_id: u32,
}

impl OwnLink {
    /// Loads `program` and attaches it to each of `targets`, a function with the cookie its
    /// runs see, by one kprobe-multi link.
    pub fn kprobe_multi(
        programs: &OwnPrograms,
        program: &str,
        targets: &[(&str, u64)],
        loaded: impl FnOnce(),
    ) -> Result<OwnLink> {
        let program_fd = programs.load(program, KPROBE_MULTI)?;
        loaded();
        let link = multi_link(program_fd.as_fd(), targets).context("attaching")?;
        Ok(OwnLink::new(link, program_fd))
    }

    /// Loads each of `hooks`, a program and the cookie of its function, as a kprobe-multi
    /// link's program and puts it in `table`, the link program's table of them, at its
    /// cookie, where that program tail-calls it. The table keeps the programs.
    pub fn load_hooks(
        programs: &OwnPrograms,
        table: BorrowedFd,
        hooks: &[(String, u64)],
    ) -> Result<()> {
        for (program, cookie) in hooks {
            let program_fd = programs.load(program, KPROBE_MULTI)?;
            let slot = u32::try_from(*cookie).context("a cookie past the table")?;
            put_in_table(table, slot, program_fd.as_fd())
                .with_context(|| format!("putting {program} in its link's table"))?;
        }
        Ok(())
    }

    /// Loads `program` as a trampoline's on the `side` of the kernel function whose BTF id is
    /// `function_btf_id`, and attaches it. `loaded` is called between the two, which a
    /// start-up's marks time apart: the verifier checks the program against its function at
    /// load; the attach builds the trampoline and patches it in.
    pub fn trampoline(
        programs: &OwnPrograms,
        program: &str,
        side: Side,
        function_btf_id: u32,
        loaded: impl FnOnce(),
    ) -> Result<OwnLink> {
        let load_as = LoadAs {
            prog_type: BPF_PROG_TYPE_TRACING as u32,
            expected_attach_type: match side {
                Side::Entry => BPF_TRACE_FENTRY as u32,
                Side::Return => BPF_TRACE_FEXIT as u32,
            },
            attach_btf_id: function_btf_id,
        };
        let program_fd = programs.load(program, load_as)?;
        loaded();
        let link = trampoline_link(program_fd.as_fd()).context("attaching")?;
        Ok(OwnLink::new(link, program_fd))
    }

    fn new(link: OwnedFd, program: OwnedFd) -> OwnLink {
        OwnLink {
            link,
            program_id: misses::program_id(program.as_fd()),
            program,
        }
    }

    pub fn program(&self) -> BorrowedFd<'_> {
        self.program.as_fd()
    }

    /// Hits a kprobe-multi link's function-probe layer skipped before the program (a probed
    /// function entered again from its own probe on the same CPU); `None` where the kernel
    /// does not say (before 6.7) and for a trampoline, whose skips are its program's own.
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
        if info.type_ != aya_obj::generated::bpf_link_type::BPF_LINK_TYPE_KPROBE_MULTI as u32 {
            return None;
        }
        // SAFETY: the kernel filled the kprobe-multi member for this link.
        let missed = unsafe { info.__bindgen_anon_1.kprobe_multi.missed };
        Some(missed)
    }
}

/// The programs a run loads itself, taken from the object once for them all: each with
/// every call linked in, every map reference pointing at the map of that name, and its
/// licence.
pub struct OwnPrograms {
    programs: HashMap<String, (Vec<bpf_insn>, CString)>,
}

impl OwnPrograms {
    /// The programs of `narrowed` (an object narrowed to them: `object::narrowed`), their maps
    /// found by name in `map_fd`.
    pub fn relocated(
        narrowed: &[u8],
        map_fd: impl Fn(&str) -> Option<RawFd>,
    ) -> Result<OwnPrograms> {
        let mut parsed = aya_obj::Object::parse(narrowed)?;
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
        parsed.sanitize_functions(super::feature_probes::features());
        let mut programs = HashMap::new();
        for (name, program) in &parsed.programs {
            if let Some(function) = parsed.functions.get(&program.function_key()) {
                programs.insert(
                    name.clone(),
                    (function.instructions.clone(), program.license.clone()),
                );
            }
        }
        Ok(OwnPrograms { programs })
    }

    pub fn count(&self) -> usize {
        self.programs.len()
    }

    fn load(&self, program: &str, load_as: LoadAs) -> Result<OwnedFd> {
        let (instructions, license) = self
            .programs
            .get(program)
            .ok_or_else(|| anyhow!("no program {program} in the eBPF object"))?;
        load(program, instructions, license, load_as).context("loading the program")
    }
}

/// How a kprobe-multi link's programs are loaded.
const KPROBE_MULTI: LoadAs = LoadAs {
    prog_type: BPF_PROG_TYPE_KPROBE as u32,
    expected_attach_type: BPF_TRACE_KPROBE_MULTI as u32,
    attach_btf_id: 0,
};

/// `table[slot] = program`, in a program array.
fn put_in_table(table: BorrowedFd, slot: u32, program: BorrowedFd) -> Result<()> {
    let value = program.as_raw_fd() as u32;
    // SAFETY: a plain C union, for which all zeroes are valid.
    let mut attr: bpf_attr = unsafe { std::mem::zeroed() };
    let update = unsafe { &mut attr.__bindgen_anon_2 };
    update.map_fd = table.as_raw_fd() as u32;
    update.key = &slot as *const u32 as u64;
    update.__bindgen_anon_1.value = &value as *const u32 as u64;
    // SAFETY: the key and value outlive the call.
    if bpf(bpf_cmd::BPF_MAP_UPDATE_ELEM, &mut attr) < 0 {
        return Err(std::io::Error::last_os_error().into());
    }
    Ok(())
}

/// The verifier's log kept when a load fails: its last lines say why.
const VERIFIER_LOG_BYTES: usize = 1 << 20;

fn load(name: &str, instructions: &[bpf_insn], license: &CStr, load_as: LoadAs) -> Result<OwnedFd> {
    let attempt = |log: Option<&mut Vec<u8>>| {
        // SAFETY: a plain C union, for which all zeroes are valid.
        let mut attr: bpf_attr = unsafe { std::mem::zeroed() };
        let load = unsafe { &mut attr.__bindgen_anon_3 };
        load.prog_type = load_as.prog_type;
        load.expected_attach_type = load_as.expected_attach_type;
        // The kernel's own BTF (no object's descriptor given).
        load.attach_btf_id = load_as.attach_btf_id;
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
            Err(anyhow!("{error}{}", verifier_said(&text)))
        }
    }
}

/// The last lines of a verifier's log, on the error's line (an error is one line of a
/// method's failures); nothing where it said nothing (a load refused before verifying).
fn verifier_said(log: &str) -> String {
    let lines: Vec<&str> = log.lines().filter(|l| !l.trim().is_empty()).collect();
    match lines.len() {
        0 => String::new(),
        n => format!(
            "; the verifier said: {}",
            lines[n.saturating_sub(5)..].join(" / ")
        ),
    }
}

fn multi_link(program: BorrowedFd<'_>, targets: &[(&str, u64)]) -> Result<OwnedFd> {
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

/// A trampoline's link: `BPF_RAW_TRACEPOINT_OPEN` with no name attaches a tracing program to
/// the function it was loaded for, on every kernel that has trampolines (`BPF_LINK_CREATE`
/// does so only on later ones).
fn trampoline_link(program: BorrowedFd<'_>) -> Result<OwnedFd> {
    // SAFETY: a plain C union, for which all zeroes are valid.
    let mut attr: bpf_attr = unsafe { std::mem::zeroed() };
    attr.raw_tracepoint.prog_fd = program.as_raw_fd() as u32;
    Ok(bpf_object(bpf_cmd::BPF_RAW_TRACEPOINT_OPEN, &mut attr)?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    use crate::trace::{object, tracer::OBJECT};

    #[test]
    fn a_verifier_log_is_cut_to_its_last_lines_on_one_line() {
        assert_eq!(verifier_said(""), "");
        assert_eq!(verifier_said("\n\n"), "");
        let log = "0: r1 = 0\n1: r2 = 1\n2: exit\n3: x\n4: y\nR0 !read_ok\nprocessed 7 insns\n";
        assert_eq!(
            verifier_said(log),
            "; the verifier said: 2: exit / 3: x / 4: y / R0 !read_ok / processed 7 insns"
        );
    }

    /// The programs named, and no other, each with its licence and every map it loads
    /// pointing at a descriptor `map_fd` gave.
    #[test]
    #[cfg_attr(rcutrace_ebpf_stub, ignore = "built without the eBPF programs")]
    fn a_runs_own_programs_are_relocated_against_its_maps() {
        const FIRST_FD: RawFd = 1000;
        let names: HashSet<String> = ["gp_init_fexit", "gp_report_fentry", "count_multi_kprobe"]
            .map(String::from)
            .into();
        let narrowed = object::narrowed(OBJECT, |name| names.contains(name)).unwrap();
        let programs = OwnPrograms::relocated(&narrowed.object, |name| {
            Some(FIRST_FD + name.len() as RawFd)
        })
        .unwrap();
        assert_eq!(programs.count(), names.len());
        for name in &names {
            let (instructions, license) = &programs.programs[name];
            assert_eq!(license.to_bytes(), b"GPL", "{name}");
            // A 64-bit immediate load with a map's pseudo source (a map by descriptor, or a
            // value in one: the constants) carries the descriptor.
            let map_loads: Vec<i32> = instructions
                .iter()
                .filter(|insn| insn.code == 0x18 && matches!(insn.src_reg(), 1 | 2))
                .map(|insn| insn.imm)
                .collect();
            assert!(!map_loads.is_empty(), "{name}");
            assert!(
                map_loads.iter().all(|fd| *fd > FIRST_FD),
                "{name}: {map_loads:?}"
            );
        }
        assert!(!programs.programs.contains_key("count_1_kprobe"));
    }
}

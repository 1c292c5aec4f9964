//! The addresses of kernel symbols by name, asked of the kernel itself: a BPF syscall
//! program calls `bpf_kallsyms_lookup_name()` for each name, run once with
//! BPF_PROG_TEST_RUN. The kernel finds each by binary search over its sorted names (from
//! 6.2), where reading /proc/kallsyms makes it format every symbol up to the last one
//! wanted: hundreds of milliseconds of an emulated guest's CPU at each start.
//!
//! The program is a few instructions per name, written here: aya 0.14 loads no syscall
//! programs, and the names are its constants. Like /proc/kallsyms, the helper gives nothing
//! where kptr_restrict hides addresses from the caller.
//!
//! The program is sleepable (the kernel requires it of syscall programs), and the kernel
//! frees a sleepable program through call_rcu_tasks_trace(): closed during a run, its
//! free would be RCU work of rcutrace's own in the window. Its descriptor is therefore kept
//! until the process exits, after every probe is detached.

use std::{
    collections::HashMap,
    ffi::c_char,
    os::fd::{AsRawFd as _, OwnedFd},
    sync::Mutex,
};

use anyhow::{Result, bail};
use aya_obj::generated::{
    BPF_F_SLEEPABLE, bpf_attr, bpf_cmd, bpf_func_id::BPF_FUNC_kallsyms_lookup_name, bpf_insn,
    bpf_prog_type::BPF_PROG_TYPE_SYSCALL,
};

use super::bpf_programs::{bpf, bpf_object};

/// The longest name asked for, with its closing NUL: the program copies each name onto its
/// stack in this many bytes.
const NAME_BYTES: usize = 64;

/// The addresses the kernel gives for `names` (a name it does not know, or whose address it
/// hides from this process, is left out); an error if it would not run the lookup at all
/// (a kernel before 5.16, or one that refuses syscall programs).
pub fn addresses(names: &[&str]) -> Result<HashMap<String, u64>> {
    let program = lookup_program(names)?;
    let program_fd = load(&program)?;
    // Each name's slot: the address found, then the helper's answer (0 or -errno).
    let mut slots = vec![0u64; 2 * names.len()];
    // SAFETY: a plain C union, for which all zeroes are valid.
    let mut attr: bpf_attr = unsafe { std::mem::zeroed() };
    attr.test.prog_fd = program_fd.as_raw_fd() as u32;
    attr.test.ctx_in = slots.as_mut_ptr() as u64;
    attr.test.ctx_size_in = std::mem::size_of_val(slots.as_slice()) as u32;
    // The kernel copies the context in, runs the program on it and copies it back out to
    // `ctx_in`, which outlives the call.
    let ran = bpf(bpf_cmd::BPF_PROG_TEST_RUN, &mut attr);
    let ran = if ran == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    };
    KEPT.lock()
        .unwrap_or_else(|e| e.into_inner())
        .push(program_fd);
    ran.map_err(|e| anyhow::anyhow!("running the lookup program: {e}"))?;
    Ok(names
        .iter()
        .zip(slots.chunks_exact(2))
        .filter(|(_, slot)| slot[1] == 0 && slot[0] != 0)
        .map(|(name, slot)| (name.to_string(), slot[0]))
        .collect())
}

/// The lookup programs loaded by this process, held open until it exits (see the module's
/// note).
static KEPT: Mutex<Vec<OwnedFd>> = Mutex::new(Vec::new());

fn load(program: &[bpf_insn]) -> Result<OwnedFd> {
    const LICENSE: &[u8] = b"GPL\0";
    const NAME: &[u8] = b"rcutrace_ksyms";
    // SAFETY: a plain C union, for which all zeroes are valid.
    let mut attr: bpf_attr = unsafe { std::mem::zeroed() };
    let load = unsafe { &mut attr.__bindgen_anon_3 };
    load.prog_type = BPF_PROG_TYPE_SYSCALL as u32;
    load.prog_flags = BPF_F_SLEEPABLE;
    load.insns = program.as_ptr() as u64;
    load.insn_cnt = program.len() as u32;
    load.license = LICENSE.as_ptr() as u64;
    for (to, from) in load.prog_name.iter_mut().zip(NAME) {
        *to = *from as c_char;
    }
    // The instructions and licence outlive the call.
    bpf_object(bpf_cmd::BPF_PROG_LOAD, &mut attr)
        .map_err(|e| anyhow::anyhow!("loading the lookup program: {e}"))
}

/// Registers as the instructions name them.
const R0: u8 = 0;
const R1: u8 = 1;
const R2: u8 = 2;
const R3: u8 = 3;
const R4: u8 = 4;
const R6: u8 = 6;
const FRAME: u8 = 10;

/// Where on the stack the name is copied, and where the helper writes its address.
const NAME_AT: i16 = -(NAME_BYTES as i16);
const ADDRESS_AT: i16 = NAME_AT - 8;

/// The program that looks up each of `names` in turn, writing the address found into the
/// context's slot `2i` and the helper's answer into slot `2i + 1`.
fn lookup_program(names: &[&str]) -> Result<Vec<bpf_insn>> {
    let mut program = vec![mov_reg(R6, R1)];
    for (i, name) in names.iter().enumerate() {
        let bytes = name.as_bytes();
        if bytes.is_empty() || bytes.len() >= NAME_BYTES || bytes.contains(&0) {
            bail!("cannot look up the symbol name {name:?}");
        }
        let mut padded = [0u8; NAME_BYTES];
        padded[..bytes.len()].copy_from_slice(bytes);
        for (at, word) in padded.chunks_exact(8).enumerate() {
            let word = u64::from_le_bytes(word.try_into().expect("chunks of eight"));
            program.extend(load_imm64(R1, word));
            program.push(store_reg(FRAME, NAME_AT + 8 * at as i16, R1));
        }
        program.push(store_imm(FRAME, ADDRESS_AT, 0));
        program.extend([
            mov_reg(R1, FRAME),
            add_imm(R1, NAME_AT.into()),
            mov_imm(R2, NAME_BYTES as i32),
            mov_imm(R3, 0),
            mov_reg(R4, FRAME),
            add_imm(R4, ADDRESS_AT.into()),
            call(BPF_FUNC_kallsyms_lookup_name as i32),
        ]);
        let slot = i16::try_from(16 * i).map_err(|_| anyhow::anyhow!("too many names"))?;
        program.push(store_reg(R6, slot + 8, R0));
        program.push(load_reg(R1, FRAME, ADDRESS_AT));
        program.push(store_reg(R6, slot, R1));
    }
    program.extend([mov_imm(R0, 0), exit()]);
    Ok(program)
}

fn instruction(code: u8, dst: u8, src: u8, off: i16, imm: i32) -> bpf_insn {
    bpf_insn {
        code,
        _bitfield_align_1: [],
        _bitfield_1: bpf_insn::new_bitfield_1(dst, src),
        off,
        imm,
    }
}

// The opcodes used, from the kernel's instruction set (class | size or op | mode or source).
const ALU64_MOV_K: u8 = 0x07 | 0xb0;
const ALU64_MOV_X: u8 = 0x07 | 0xb0 | 0x08;
const ALU64_ADD_K: u8 = 0x07;
const LD_IMM_DW: u8 = 0x18;
const LDX_MEM_DW: u8 = 0x79;
const ST_MEM_DW: u8 = 0x7a;
const STX_MEM_DW: u8 = 0x7b;
const JMP_CALL: u8 = 0x85;
const JMP_EXIT: u8 = 0x95;

fn mov_reg(dst: u8, src: u8) -> bpf_insn {
    instruction(ALU64_MOV_X, dst, src, 0, 0)
}

fn mov_imm(dst: u8, imm: i32) -> bpf_insn {
    instruction(ALU64_MOV_K, dst, 0, 0, imm)
}

fn add_imm(dst: u8, imm: i32) -> bpf_insn {
    instruction(ALU64_ADD_K, dst, 0, 0, imm)
}

/// A 64-bit constant: two instructions, the high half in the second's immediate.
fn load_imm64(dst: u8, value: u64) -> [bpf_insn; 2] {
    [
        instruction(LD_IMM_DW, dst, 0, 0, value as u32 as i32),
        instruction(0, 0, 0, 0, (value >> 32) as u32 as i32),
    ]
}

fn load_reg(dst: u8, src: u8, off: i16) -> bpf_insn {
    instruction(LDX_MEM_DW, dst, src, off, 0)
}

fn store_reg(dst: u8, off: i16, src: u8) -> bpf_insn {
    instruction(STX_MEM_DW, dst, src, off, 0)
}

fn store_imm(dst: u8, off: i16, imm: i32) -> bpf_insn {
    instruction(ST_MEM_DW, dst, 0, off, imm)
}

fn call(helper: i32) -> bpf_insn {
    instruction(JMP_CALL, 0, 0, 0, helper)
}

fn exit() -> bpf_insn {
    instruction(JMP_EXIT, 0, 0, 0, 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The name reaches the stack whole, NUL-padded to the length the helper is told (it
    /// wants the last byte NUL), in little-endian words.
    #[test]
    fn each_name_is_copied_to_the_stack_nul_padded() {
        let program = lookup_program(&["rcu_state"]).unwrap();
        let mut stack = [0xffu8; NAME_BYTES];
        let mut words = program.windows(3).filter(|w| {
            w[0].code == LD_IMM_DW && w[2].code == STX_MEM_DW && w[2].dst_reg() == FRAME
        });
        for w in words.by_ref() {
            let value = (w[0].imm as u32 as u64) | ((w[1].imm as u32 as u64) << 32);
            let at = (w[2].off - NAME_AT) as usize;
            stack[at..at + 8].copy_from_slice(&value.to_le_bytes());
        }
        assert_eq!(&stack[..10], b"rcu_state\0");
        assert!(stack[10..].iter().all(|&b| b == 0));
    }

    /// One call a name, each answer written to its own slots, and the program ends.
    #[test]
    fn every_name_gets_a_call_and_its_own_slots() {
        let program = lookup_program(&["a", "bb", "ccc"]).unwrap();
        let calls = program.iter().filter(|i| i.code == JMP_CALL).count();
        assert_eq!(calls, 3);
        let mut slots: Vec<i16> = program
            .iter()
            .filter(|i| i.code == STX_MEM_DW && i.dst_reg() == R6)
            .map(|i| i.off)
            .collect();
        slots.sort_unstable();
        assert_eq!(slots, [0, 8, 16, 24, 32, 40]);
        assert_eq!(program.last().unwrap().code, JMP_EXIT);
    }

    #[test]
    fn names_that_do_not_fit_are_refused() {
        assert!(lookup_program(&[""]).is_err());
        assert!(lookup_program(&[&"x".repeat(NAME_BYTES)]).is_err());
        assert!(lookup_program(&[&"x".repeat(NAME_BYTES - 1)]).is_ok());
    }
}

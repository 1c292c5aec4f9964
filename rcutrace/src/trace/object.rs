//! The embedded eBPF object, narrowed to the programs one run may attach. aya 0.14 parses,
//! relocates and keeps every program of the object it is given, and has no way to leave any
//! out; a command attaches a dozen or two of the object's ~190 programs. A program's section
//! whose executable flag is cleared is data to aya's parser, which passes over data sections
//! it does not know: so the copy aya is given has that flag cleared on the sections of every
//! program this run will not attach, and is otherwise the object byte for byte.

use std::{mem::offset_of, ops::Deref};

use anyhow::{Result, anyhow, bail};
use object::{
    LittleEndian,
    elf::{FileHeader64, SHF_EXECINSTR, SectionHeader64},
    read::elf::{FileHeader as _, SectionHeader as _},
};

/// Bytes with the alignment of a `u64`, which the ELF parser wants for its headers.
pub struct Aligned {
    words: Vec<u64>,
    len: usize,
}

impl Deref for Aligned {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        // SAFETY: `words` holds at least `len` initialised bytes, and u8 has no alignment.
        unsafe { std::slice::from_raw_parts(self.words.as_ptr().cast::<u8>(), self.len) }
    }
}

impl Aligned {
    fn copy_of(bytes: &[u8]) -> Self {
        let mut words = vec![0u64; bytes.len().div_ceil(8)];
        // SAFETY: `words` has room for `bytes.len()` bytes, and the two do not overlap.
        unsafe {
            std::ptr::copy_nonoverlapping(bytes.as_ptr(), words.as_mut_ptr().cast(), bytes.len())
        };
        Aligned {
            words,
            len: bytes.len(),
        }
    }

    fn bytes_mut(&mut self) -> &mut [u8] {
        // SAFETY: as in `deref`, and `self` is borrowed mutably.
        unsafe { std::slice::from_raw_parts_mut(self.words.as_mut_ptr().cast::<u8>(), self.len) }
    }
}

/// The object narrowed, with how many of its programs were kept (for the start-up marks).
pub struct Narrowed {
    pub object: Aligned,
    pub kept: usize,
    pub programs: usize,
}

/// A copy of `object` (a little-endian 64-bit ELF file) in which only the programs that
/// `keep` names are programs: sections named `KIND/NAME` that hold instructions, NAME being
/// the program. The shared functions' `.text` and every other section stay as they are.
pub fn narrowed(object: &[u8], keep: impl Fn(&str) -> bool) -> Result<Narrowed> {
    let mut copy = Aligned::copy_of(object);
    let (kept, programs) = mark_programs(object, copy.bytes_mut(), keep)?;
    Ok(Narrowed {
        object: copy,
        kept,
        programs,
    })
}

impl Narrowed {
    /// The same copy narrowed to other programs of `original` (the object it was copied
    /// from): a megabyte not copied again once aya has parsed it.
    pub fn narrow_again(&mut self, original: &[u8], keep: impl Fn(&str) -> bool) -> Result<()> {
        if original.len() != self.object.len() {
            bail!("the eBPF object narrowed again is not the one copied");
        }
        (self.kept, self.programs) = mark_programs(original, self.object.bytes_mut(), keep)?;
        Ok(())
    }
}

/// Sets the executable flag in `copy`'s section table, from `original`'s, on the programs
/// `keep` names and clears it on the others; returns how many were kept, of how many.
fn mark_programs(
    original: &[u8],
    copy: &mut [u8],
    keep: impl Fn(&str) -> bool,
) -> Result<(usize, usize)> {
    let elf = |e: object::read::Error| anyhow!("the eBPF object is not a 64-bit ELF file: {e}");
    let header = FileHeader64::<LittleEndian>::parse(original).map_err(elf)?;
    let endian = header.endian().map_err(elf)?;
    let sections = header.sections(endian, original).map_err(elf)?;
    let table_at = header.e_shoff(endian) as usize;
    let entry_size = usize::from(header.e_shentsize(endian));
    let executable = u64::from(SHF_EXECINSTR);
    let (mut kept, mut programs) = (0, 0);
    for (index, section) in sections.iter().enumerate() {
        let flags = section.sh_flags(endian);
        if flags & executable == 0 {
            continue;
        }
        let name = sections.section_name(endian, section).map_err(elf)?;
        let Some((_, program)) = std::str::from_utf8(name)?.split_once('/') else {
            continue;
        };
        programs += 1;
        let flags = if keep(program) {
            kept += 1;
            flags
        } else {
            flags & !executable
        };
        let at =
            table_at + index * entry_size + offset_of!(SectionHeader64<LittleEndian>, sh_flags);
        copy[at..at + 8].copy_from_slice(&flags.to_le_bytes());
    }
    Ok((kept, programs))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::tracer::OBJECT;

    fn programs(object: &[u8]) -> Vec<String> {
        let mut names: Vec<String> = aya_obj::Object::parse(object)
            .unwrap()
            .programs
            .into_keys()
            .collect();
        names.sort();
        names
    }

    /// aya's own parser finds exactly the programs kept, and the whole object otherwise.
    #[test]
    #[cfg_attr(rcutrace_ebpf_stub, ignore = "built without the eBPF programs")]
    fn aya_sees_only_the_programs_kept() {
        let all = programs(OBJECT);
        assert!(all.len() > 100, "{all:?}");
        let kept = ["count_1_kprobe", "count_1_fentry", "count_read_lock_kprobe"];
        let narrowed = narrowed(OBJECT, |name| kept.contains(&name)).unwrap();
        assert_eq!(narrowed.object.len(), OBJECT.len());
        assert_eq!((narrowed.kept, narrowed.programs), (kept.len(), all.len()));
        let mut expected = kept.map(String::from).to_vec();
        expected.sort();
        assert_eq!(programs(&narrowed.object), expected);
        let whole = super::narrowed(OBJECT, |_| true).unwrap();
        assert_eq!(programs(&whole.object), all);
        assert_eq!(whole.kept, all.len());
    }

    /// The copy narrowed again keeps exactly the programs named the second time, whether the
    /// first time kept them or not.
    #[test]
    #[cfg_attr(rcutrace_ebpf_stub, ignore = "built without the eBPF programs")]
    fn a_copy_narrowed_again_keeps_only_the_new_programs() {
        let mut copy = narrowed(OBJECT, |name| name == "count_1_kprobe").unwrap();
        let again = ["count_1_fentry", "count_read_lock_kprobe"];
        copy.narrow_again(OBJECT, |name| again.contains(&name))
            .unwrap();
        assert_eq!(copy.kept, again.len());
        let mut expected = again.map(String::from).to_vec();
        expected.sort();
        assert_eq!(programs(&copy.object), expected);
        assert!(copy.narrow_again(&OBJECT[1..], |_| true).is_err());
    }

    #[test]
    fn what_is_not_an_elf_object_is_refused() {
        assert!(narrowed(b"not an object", |_| true).is_err());
        // A header that points its section table past the end.
        let mut header = b"\x7fELF\x02\x01".to_vec();
        header.resize(0x40, 0);
        header[0x28] = 0x40;
        header[0x3a] = 0x40;
        header[0x3c] = 2;
        assert!(narrowed(&header, |_| true).is_err());
    }
}

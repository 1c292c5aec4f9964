//! The embedded eBPF object, narrowed to the programs one run may attach. aya 0.14 parses,
//! relocates and keeps every program of the object it is given, and has no way to leave any
//! out; a command attaches a dozen or two of the object's ~190 programs. A program's section
//! whose executable flag is cleared is data to aya's parser, which passes over data sections
//! it does not know: so the copy aya is given has that flag cleared on the sections of every
//! program this run will not attach, and is otherwise the object byte for byte.

use std::ops::Deref;

use anyhow::{Result, bail};

/// `SHF_EXECINSTR`: the section holds instructions.
const EXECUTABLE: u64 = 0x4;

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

/// A copy of `object` (a little-endian 64-bit ELF file) in which only the programs that
/// `keep` names are programs: sections named `KIND/NAME` that hold instructions, NAME being
/// the program. The shared functions' `.text` and every other section stay as they are.
pub fn narrowed(object: &[u8], keep: impl Fn(&str) -> bool) -> Result<Aligned> {
    let mut copy = Aligned::copy_of(object);
    let headers = section_headers(object)?;
    let names = headers.get(headers.names).copied();
    let Some(names) = names else {
        bail!("the eBPF object has no section names");
    };
    let bytes = copy.bytes_mut();
    for header in &headers.all {
        let flags = header.flags(object)?;
        if flags & EXECUTABLE == 0 {
            continue;
        }
        let name = names.string_at(object, header.name(object)?)?;
        let Some((_, program)) = name.split_once('/') else {
            continue;
        };
        if !keep(program) {
            bytes[header.at + 8..header.at + 16]
                .copy_from_slice(&(flags & !EXECUTABLE).to_le_bytes());
        }
    }
    Ok(copy)
}

/// Where one section header is in the file.
#[derive(Clone, Copy)]
struct Header {
    at: usize,
}

impl Header {
    fn name(self, object: &[u8]) -> Result<usize> {
        Ok(u32_at(object, self.at)? as usize)
    }

    fn flags(self, object: &[u8]) -> Result<u64> {
        u64_at(object, self.at + 8)
    }

    /// The section's bytes, as `(offset, size)` in the file, read as a string table.
    fn string_at(self, object: &[u8], name: usize) -> Result<&str> {
        let (offset, size) = (
            u64_at(object, self.at + 0x18)? as usize,
            u64_at(object, self.at + 0x20)? as usize,
        );
        let table = object
            .get(offset..offset.saturating_add(size))
            .ok_or_else(|| anyhow::anyhow!("the section names lie outside the eBPF object"))?;
        let rest = table
            .get(name..)
            .ok_or_else(|| anyhow::anyhow!("a section name lies outside its table"))?;
        let end = rest.iter().position(|&b| b == 0).unwrap_or(rest.len());
        Ok(std::str::from_utf8(&rest[..end])?)
    }
}

struct Headers {
    all: Vec<Header>,
    /// The index of the section that holds the sections' names.
    names: usize,
}

impl Headers {
    fn get(&self, index: usize) -> Option<&Header> {
        self.all.get(index)
    }
}

fn section_headers(object: &[u8]) -> Result<Headers> {
    if object.get(..6) != Some(b"\x7fELF\x02\x01".as_slice()) {
        bail!("the eBPF object is not a little-endian 64-bit ELF file");
    }
    let table = u64_at(object, 0x28)? as usize;
    let size = u16_at(object, 0x3a)? as usize;
    let count = u16_at(object, 0x3c)? as usize;
    let names = u16_at(object, 0x3e)? as usize;
    if size < 0x28 {
        bail!("the eBPF object's section headers are {size} bytes long");
    }
    let all = (0..count)
        .map(|i| Header {
            at: table + i * size,
        })
        .collect::<Vec<_>>();
    if let Some(last) = all.last()
        && last.at + size > object.len()
    {
        bail!("the eBPF object's section headers lie outside it");
    }
    Ok(Headers { all, names })
}

fn bytes_at<const N: usize>(object: &[u8], at: usize) -> Result<[u8; N]> {
    object
        .get(at..at + N)
        .and_then(|b| b.try_into().ok())
        .ok_or_else(|| anyhow::anyhow!("the eBPF object ends at {}, before {at}", object.len()))
}

fn u16_at(object: &[u8], at: usize) -> Result<u16> {
    Ok(u16::from_le_bytes(bytes_at(object, at)?))
}

fn u32_at(object: &[u8], at: usize) -> Result<u32> {
    Ok(u32::from_le_bytes(bytes_at(object, at)?))
}

fn u64_at(object: &[u8], at: usize) -> Result<u64> {
    Ok(u64::from_le_bytes(bytes_at(object, at)?))
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
        assert_eq!(narrowed.len(), OBJECT.len());
        let mut expected = kept.map(String::from).to_vec();
        expected.sort();
        assert_eq!(programs(&narrowed), expected);
        assert_eq!(programs(&super::narrowed(OBJECT, |_| true).unwrap()), all);
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

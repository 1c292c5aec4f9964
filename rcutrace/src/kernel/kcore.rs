//! Reads words of kernel memory from user space through /proc/kcore, the kernel's own ELF
//! core image of itself: each loadable segment maps a range of kernel addresses to an offset
//! in the file. Used where a figure must be read once, at a moment user space picks (the
//! callback lists' lengths as `rcutrace callbacks` closes), not at a probe's hit.

use std::{fs::File, os::unix::fs::FileExt as _};

use anyhow::{Context as _, Result, bail};
use object::{
    Endianness,
    elf::{FileHeader64, PT_LOAD},
    read::elf::{FileHeader as _, ProgramHeader as _},
};

const KCORE: &str = "/proc/kcore";

/// One loadable segment: kernel addresses `start..start + size` at `offset` in the file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Segment {
    start: u64,
    size: u64,
    offset: u64,
}

pub struct KernelMemory {
    file: File,
    segments: Vec<Segment>,
}

impl KernelMemory {
    pub fn open() -> Result<KernelMemory> {
        let file = File::open(KCORE).with_context(|| format!("opening {KCORE}"))?;
        let segments =
            read_segments(&file).with_context(|| format!("reading {KCORE}'s headers"))?;
        Ok(KernelMemory { file, segments })
    }

    /// The 64-bit word at `address`.
    pub fn read_u64(&self, address: u64) -> Result<u64> {
        let mut word = [0u8; 8];
        self.read(address, &mut word)?;
        Ok(u64::from_ne_bytes(word))
    }

    /// The 32-bit word at `address`.
    pub fn read_u32(&self, address: u64) -> Result<u32> {
        let mut word = [0u8; 4];
        self.read(address, &mut word)?;
        Ok(u32::from_ne_bytes(word))
    }

    /// The byte at `address`.
    pub fn read_u8(&self, address: u64) -> Result<u8> {
        let mut byte = [0u8; 1];
        self.read(address, &mut byte)?;
        Ok(byte[0])
    }

    /// Fills `bytes` from kernel memory at `address`.
    fn read(&self, address: u64, bytes: &mut [u8]) -> Result<()> {
        let offset = file_offset(&self.segments, address, bytes.len() as u64)
            .with_context(|| format!("{KCORE} does not map {address:#x}"))?;
        self.file
            .read_exact_at(bytes, offset)
            .with_context(|| format!("reading {address:#x} through {KCORE}"))
    }
}

/// The loadable segments of the ELF image `file` begins with.
fn read_segments(file: &File) -> Result<Vec<Segment>> {
    // The ELF header first, for where the program headers end; then everything up to there.
    let mut header = vec![0u8; std::mem::size_of::<FileHeader64<Endianness>>()];
    file.read_exact_at(&mut header, 0)?;
    let parsed = FileHeader64::<Endianness>::parse(header.as_slice())?;
    let endian = parsed.endian()?;
    let end = parsed.e_phoff(endian)
        + u64::from(parsed.e_phnum(endian)) * u64::from(parsed.e_phentsize(endian));
    if end > 1 << 20 {
        bail!("program headers end at {end}, past any kernel's");
    }
    let mut headers = vec![0u8; end as usize];
    file.read_exact_at(&mut headers, 0)?;
    let parsed = FileHeader64::<Endianness>::parse(headers.as_slice())?;
    Ok(parsed
        .program_headers(endian, headers.as_slice())?
        .iter()
        .filter(|p| p.p_type(endian) == PT_LOAD)
        .map(|p| Segment {
            start: p.p_vaddr(endian),
            size: p.p_filesz(endian),
            offset: p.p_offset(endian),
        })
        .collect())
}

/// Where `len` bytes at `address` are in the file, if one segment holds them all.
fn file_offset(segments: &[Segment], address: u64, len: u64) -> Option<u64> {
    segments
        .iter()
        .find(|s| {
            address >= s.start
                && address
                    .checked_add(len)
                    .is_some_and(|e| e <= s.start + s.size)
        })
        .map(|s| s.offset + (address - s.start))
}

#[cfg(test)]
mod tests {
    use super::*;
    use object::write::elf::{FileHeader, ProgramHeader, Writer};

    /// An ELF core image with two loadable segments, the way /proc/kcore lays itself out.
    fn image() -> Vec<u8> {
        let mut bytes = Vec::new();
        let mut writer = Writer::new(Endianness::Little, true, &mut bytes);
        writer.reserve_file_header();
        writer.reserve_program_headers(2);
        let first = writer.reserve(16, 8) as u64;
        let second = writer.reserve(16, 8) as u64;
        writer
            .write_file_header(&FileHeader {
                os_abi: 0,
                abi_version: 0,
                e_type: object::elf::ET_CORE,
                e_machine: object::elf::EM_X86_64,
                e_entry: 0,
                e_flags: 0,
            })
            .unwrap();
        writer.write_align_program_headers();
        for (start, offset) in [
            (0xffff_8880_0000_1000u64, first),
            (0xffff_ffff_8100_0000, second),
        ] {
            writer.write_program_header(&ProgramHeader {
                p_type: PT_LOAD,
                p_flags: 0,
                p_offset: offset,
                p_vaddr: start,
                p_paddr: 0,
                p_filesz: 16,
                p_memsz: 16,
                p_align: 8,
            });
        }
        writer.write_align(8);
        writer.write(&[1, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0]);
        writer.write(&[3, 0, 0, 0, 0, 0, 0, 0, 4, 0, 0, 0, 0, 0, 0, 0]);
        bytes
    }

    fn memory(bytes: &[u8]) -> KernelMemory {
        // One file per call: the tests run in parallel, and each removes its own.
        static CALLS: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let call = CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let path =
            std::env::temp_dir().join(format!("rcutrace-kcore-{}-{call}", std::process::id()));
        std::fs::write(&path, bytes).unwrap();
        let file = File::open(&path).unwrap();
        std::fs::remove_file(&path).unwrap();
        let segments = read_segments(&file).unwrap();
        KernelMemory { file, segments }
    }

    #[test]
    fn reads_words_through_the_segment_that_maps_them() {
        let memory = memory(&image());
        assert_eq!(memory.segments.len(), 2);
        assert_eq!(memory.read_u64(0xffff_8880_0000_1008).unwrap(), 2);
        assert_eq!(memory.read_u64(0xffff_ffff_8100_0000).unwrap(), 3);
        assert_eq!(memory.read_u64(0xffff_ffff_8100_0008).unwrap(), 4);
        assert_eq!(memory.read_u32(0xffff_ffff_8100_0008).unwrap(), 4);
        assert_eq!(memory.read_u8(0xffff_8880_0000_1000).unwrap(), 1);
        // The last byte of a segment, but not four bytes from there.
        assert_eq!(memory.read_u8(0xffff_ffff_8100_000f).unwrap(), 0);
        assert!(memory.read_u32(0xffff_ffff_8100_000d).is_err());
    }

    /// A word that runs past its segment's end, or lies in none, is refused, not read from
    /// whatever follows in the file.
    #[test]
    fn an_unmapped_address_is_refused() {
        let memory = memory(&image());
        let error = memory.read_u64(0xffff_8880_0000_100c).unwrap_err();
        assert!(error.to_string().contains("does not map"), "{error:#}");
        assert!(memory.read_u64(0x1000).is_err());
    }
}
